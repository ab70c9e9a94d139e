"""Score cliplint on a labelled set with each repository whole, as a user runs it.

`../shared/realcode/score.py` copies only the labelled files into a scratch folder, so a finding
that needs another module of the repository (a loss library called from a script, a builder
imported from `models.py`) cannot count there. This runs `cliplint .` in each clone (checked out
at the rows' commit) and matches the rows the same way: a MISTAKE is found when a finding of its
code is within 3 lines of it, a CORRECT row is a false positive when one is.

Clones fetched from a mirror that lacks some large blobs stop their checkout half way, so the
Python, notebook and config files of the rows' commit are written into the working tree first
(`_materialise`).

    TSV=bench/fresh-set-11/second.tsv REFS=/work/fresh-set-11/refs python bench/score_repos.py cliplint
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "realcode" / "score.py"


def _scorer():
    """The shared script, for its row parsing and its notebook cell -> JSON line mapping."""
    spec = importlib.util.spec_from_file_location("realcode_score", SHARED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


TEXT_FILES = (".py", ".pyi", ".ipynb", ".yaml", ".yml", ".json", ".toml", ".cfg", ".ini")


def _materialise(root: Path, commit: str) -> None:
    """Write each text file cliplint reads, as it is at `commit`, where the checkout left it absent or stale."""
    listing = subprocess.run(["git", "-C", str(root), "ls-tree", "-r", "-z", commit],
                             capture_output=True, check=True).stdout.decode("utf-8", "replace")
    entries = [entry.split("\t", 1) for entry in listing.split("\0") if "\t" in entry]
    names = [name for meta, name in entries  # regular files only: a committed symlink may point anywhere
             if meta.startswith(("100644", "100755")) and name.endswith(TEXT_FILES)]
    batch = subprocess.Popen(["git", "-C", str(root), "cat-file", "--batch"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert batch.stdin is not None and batch.stdout is not None
    for name in names:
        batch.stdin.write(f"{commit}:{name}\n".encode())
        batch.stdin.flush()
        header = batch.stdout.readline().split()
        if len(header) != 3:  # "<name> missing": the mirror lacks this blob
            continue
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)
        dest = root / name
        if dest.is_symlink() or any(parent.is_symlink() for parent in dest.parents if root in parent.parents):
            continue
        if not dest.is_file() or dest.read_bytes() != data:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
    batch.stdin.close()
    batch.wait()


def _rows(tsv: Path) -> list[list[str]]:
    """The labelled rows; a first line naming the columns is skipped (some sets have none)."""
    lines = [line for line in tsv.read_text().splitlines() if line.strip()]
    if lines and lines[0].split("\t")[0] == "repo":
        lines = lines[1:]
    return [line.split("\t") for line in lines]


def main(command: str) -> None:
    shared = _scorer()
    refs = Path(os.environ["REFS"])
    rows = _rows(Path(os.environ["TSV"]))
    found = mistakes = fp = correct = 0
    by_repo = defaultdict(list)
    for row in rows:
        by_repo[row[0]].append(row)
    for repo, repo_rows in sorted(by_repo.items()):
        root = refs / repo.replace("/", "+")
        _materialise(root, repo_rows[0][3])
        proc = subprocess.run([command, "--output-format", "json", "--isolated", "--exit-zero", "--no-cache", "."],
                              cwd=root, capture_output=True, text=True, timeout=1800)
        got = defaultdict(list)
        for finding in json.loads(proc.stdout or "[]"):
            path, line = Path(finding["path"]).as_posix().lstrip("./"), int(finding["line"])
            if finding.get("cell") is not None:
                raw = (root / path).read_text(encoding="utf-8", errors="replace")
                line = shared.notebook_line(raw, int(finding["cell"]), line)
                if line is None:
                    continue
            got[(path, finding["code"])].append(line)
        for _, path, spec, _, rule, label, why in repo_rows:
            lo, hi = shared.lines_of(spec)
            codes = set(rule.split("|"))
            hit = any(lo - 3 <= line <= hi + 3 for code in codes for line in got.get((path, code), []))
            if label == "MISTAKE":
                mistakes += 1
                found += hit
                print("FOUND " if hit else "MISSED", repo, path, lo, rule, "-", why[:90])
            else:
                correct += 1
                fp += hit
                if hit:
                    print("FALSE-POSITIVE", repo, path, lo, rule, "-", why[:90])
    print(f"whole repositories: found {found}/{mistakes} fp {fp}/{correct}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cliplint")
