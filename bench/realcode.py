"""cliplint on real public TensorFlow/Keras training code: findings, files and time.

    python bench/realcode.py extract OUT [--mirror DIR]     # check out the pinned repositories into OUT
    python bench/realcode.py run OUT [--json results.json]  # lint each one, JSON output, timed
    python bench/realcode.py diff before.json after.json    # findings gained and lost between two runs

The repositories below are pinned to a commit: the same command always lints the same code.
They were chosen for the ways real projects write training code (TF 1 graphs with
`tf.layers`, actor-critic classes that build their nets in one method and take the log in
another, Keras RL agents, research code with `compute_gradients` pairs, notebooks), not for
having findings. The code is never committed to this repository: `extract` checks it out
from GitHub (or from local bare mirrors, `--mirror DIR` holding `owner+name/repo`).
Judging which findings are true is done by reading them: see the judged table in the
project's notes (realcode-baseline.md).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional

# (owner/name, commit): every .py and .ipynb file of the tree is linted (cliplint's own exclusions apply).
REPOS = (
    ("MorvanZhou/Reinforcement-learning-with-tensorflow", "93e333484be0e262d28b65507b6a1d002424a056"),
    ("MorvanZhou/Tensorflow-Tutorial", "42dc32de532d146725aeef965d87871142a542d6"),
    ("awjuliani/DeepRL-Agents", "f3c9a3ff9ee86029a72b63bbfa4dce3c56979ab3"),
    ("aymericdamien/TensorFlow-Examples", "6dcbe14649163814e72a22a999f20c5e247ce988"),
    ("carpedm20/deep-rl-tensorflow", "95d3e2dde77d4a7a393ec418fe3537094d08c2ba"),
    ("coreylynch/async-rl", "1741d52ce1cbab066c6af2c645865473c422db55"),
    ("deepmind/trfl", "08ccb293edb929d6002786f1c0c177ef291f2956"),
    ("dennybritz/reinforcement-learning", "2b832284894a65eccdd82353cc446f68d100676e"),
    ("flyyufelix/VizDoom-Keras-RL", "4fc27ce3d400eba5422d39e2fad565d0503a6149"),
    ("germain-hug/Deep-RL-Keras", "a50cc30bea78315750c7c41f691d4eba80c7a888"),
    ("google/dopamine", "5873f5494ee0c2d7c016d0ab2ad530354fec59d0"),
    ("hill-a/stable-baselines", "259f27868f0d727d990f50e04da6e3a5d5367582"),
    ("jaromiru/AI-blog", "348628b105058d876001ca758b6ba59fb1726614"),
    ("jcwleo/Reinforcement_Learning", "3487878954165377e726978196362db108b03864"),
    ("keon/deep-q-learning", "7856f2f003455c6c4935c902d722fe435bded863"),
    ("keras-rl/keras-rl", "216c3145f3dc4d17877be26ca2185ce7db462bad"),
    ("nfmcclure/tensorflow_cookbook", "d998edfe7df11177df2ea17814be7bd6193788c9"),
    ("openai/baselines", "ea25b9e8b234e6ee1bca43083f8f3cf974143998"),
    ("pemami4911/deep-rl", "3cc7eb13af9e4780ece8ddc8b663bde59e19c8c0"),
    ("rlcode/reinforcement-learning", "3d421f6e4d11c6f170c67a3b449f15d0a940fe1a"),
    ("stefanbo92/A3C-Continuous", "ffc98318b30fcc0cc7052414955a7bb5febaeef6"),
    ("tensorflow/tensor2tensor", "bafdc1b67730430d38d6ab802cbd51f9d053ba2e"),
    ("yanpanlau/DDPG-Keras-Torcs", "455fadee1016ef15ef08817d98ec376d7e34b500"),
)
LINTED = (".py", ".ipynb")


def folder_name(repo: str) -> str:
    return repo.replace("/", "+")


def _git_dir(mirror: Optional[Path], repo: str) -> Optional[Path]:
    if mirror is None:
        return None
    base = mirror / folder_name(repo) / "repo"
    for candidate in (base / ".git", base):
        if (candidate / "HEAD").exists():
            return candidate
    return None


def extract(out: Path, mirror: Optional[Path]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for repo, commit in REPOS:
        target = out / folder_name(repo)
        if target.exists():
            print(f"  {repo}: already there", flush=True)
            continue
        git_dir = _git_dir(mirror, repo)
        if git_dir is None:
            clone = Path(tempfile.mkdtemp(prefix="realcode-clone-"))
            subprocess.run(["git", "clone", "-q", "--bare", f"https://github.com/{repo}", str(clone)],
                           check=True)
            git_dir = clone
        revision = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", commit],
                                  check=True, capture_output=True, text=True).stdout.strip()
        written = _check_out_sources(git_dir, revision, target)
        (target / ".realcode-commit").write_text(revision + "\n")
        print(f"  {repo} @ {revision}: {written} files", flush=True)


def _check_out_sources(git_dir: Path, revision: str, target: Path) -> int:
    """Write the `.py` and `.ipynb` files of `revision` under `target`: only what cliplint lints
    (mirrors may lack large data blobs, which `git archive` would fail on)."""
    listing = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", revision],
                             check=True, capture_output=True).stdout.decode("utf-8", "replace")
    wanted = []
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob" and mode != "120000" and path.endswith(LINTED):
            wanted.append((sha, path))
    batch = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "--batch"], check=True,
                           input="".join(f"{sha}\n" for sha, _ in wanted).encode(), capture_output=True).stdout
    written, at = 0, 0
    for sha, path in wanted:
        header_end = batch.index(b"\n", at)
        header = batch[at:header_end].split()
        if header[-1] == b"missing":
            at = header_end + 1
            continue
        size = int(header[2])
        content = batch[header_end + 1:header_end + 1 + size]
        at = header_end + 1 + size + 1
        destination = target / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(content)
        written += 1
    return written


def count_files(folder: Path) -> Counter:
    counts: Counter = Counter()
    for _, _, names in os.walk(folder):
        counts.update(Path(name).suffix for name in names if name.endswith(LINTED))
    return counts


def lint(folder: Path, jobs: int) -> Dict:
    command = [sys.executable, "-m", "cliplint", "check", "--isolated", "--no-cache", "--exit-zero",
               "--output-format", "json", "-j", str(jobs), str(folder)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"cliplint failed on {folder} ({done.returncode}):\n{done.stderr}")
    return {"seconds": seconds, "findings": json.loads(done.stdout or "[]")}


def run(out: Path, jobs: int, json_path: Optional[Path]) -> None:
    results: List[Dict] = []
    for repo, _ in REPOS:
        folder = out / folder_name(repo)
        if not folder.exists():
            print(f"  {repo}: not extracted (run `extract` first)", flush=True)
            continue
        files = count_files(folder)
        linted = lint(folder, jobs)
        for finding in linted["findings"]:
            finding["path"] = os.path.relpath(finding["path"], out)
        results.append({"repo": repo, "files": dict(files), **linted})
        codes = Counter(f["code"] for f in linted["findings"])
        print(f"  {repo:<52} {sum(files.values()):5} files {linted['seconds']:6.2f} s  "
              f"{', '.join(f'{c} {n}' for c, n in sorted(codes.items())) or '-'}", flush=True)
    total_files = sum(sum(r["files"].values()) for r in results)
    total_seconds = sum(r["seconds"] for r in results)
    codes = Counter(f["code"] for r in results for f in r["findings"])
    print(f"\n{len(results)} repositories, {total_files} files (.py + .ipynb), {total_seconds:.1f} s, "
          f"{sum(codes.values())} findings: {dict(sorted(codes.items()))}")
    if json_path is not None:
        json_path.write_text(json.dumps(results, indent=1) + "\n")


def _keys(path: Path) -> Dict:
    found = {}
    for result in json.loads(path.read_text()):
        for f in result["findings"]:
            found[(f["path"], f.get("cell"), f["line"], f["code"])] = f["message"]
    return found


def diff(before: Path, after: Path) -> None:
    old, new = _keys(before), _keys(after)
    for label, keys, source in (("gained", new.keys() - old.keys(), new), ("lost", old.keys() - new.keys(), old)):
        print(f"{label}: {len(keys)}")
        for key in sorted(keys, key=lambda k: (k[0], k[1] or 0, k[2], k[3])):
            path, cell, line, code = key
            where = f"{path}:cell {cell}:{line}" if cell else f"{path}:{line}"
            print(f"  {where} {code} {source[key][:110]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    extracting = commands.add_parser("extract")
    extracting.add_argument("out", type=Path)
    extracting.add_argument("--mirror", type=Path, help="folder of local mirrors, owner+name/repo")
    running = commands.add_parser("run")
    running.add_argument("out", type=Path)
    running.add_argument("--json", type=Path)
    running.add_argument("-j", "--jobs", type=int, default=1)
    diffing = commands.add_parser("diff")
    diffing.add_argument("before", type=Path)
    diffing.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "extract":
        extract(args.out, args.mirror)
    elif args.command == "run":
        run(args.out, args.jobs, args.json)
    else:
        diff(args.before, args.after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
