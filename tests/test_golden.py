"""Golden fixtures: realistic training scripts mark every expected finding inline with
`# expect: CODE[, CODE]`; files without markers must stay clean."""
import json
import re
from pathlib import Path

import pytest

from cliplint.engine import run
from cliplint.settings import Config

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MARKER = re.compile(r"#\s*expect:\s*(?P<codes>CL\d{3}(?:\s*,\s*CL\d{3})*)")
SUFFIXES = (".py", ".pyi", ".yaml", ".yml", ".toml", ".json", ".ipynb")
FILES = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in SUFFIXES)


def expected(path: Path):
    """Inline `# expect: CODE` markers; JSON (no comments) lists `LINE CODE` in a `.expect` file;
    in a notebook the markers sit in code cells and give (cell, line inside the cell, code)."""
    if path.suffix == ".ipynb":
        found = set()
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for number, cell in enumerate(cells, 1):
            if cell["cell_type"] == "code":
                for line_number, line in enumerate("".join(cell["source"]).splitlines(), 1):
                    match = MARKER.search(line)
                    if match:
                        found |= {(number, line_number, c.strip()) for c in match.group("codes").split(",")}
        return found
    sidecar = path.with_name(path.name + ".expect")
    if sidecar.exists():
        return {(int(line.split()[0]), line.split()[1]) for line in sidecar.read_text().splitlines() if line.strip()}
    found = set()
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        match = MARKER.search(line)
        if match:
            found |= {(number, code.strip()) for code in match.group("codes").split(",")}
    return found


def test_there_are_enough_fixtures():
    assert len(FILES) >= 12
    assert sum(1 for p in FILES if not expected(p)) >= 3, "clean look-alike files are needed too"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fixture_findings_match_markers(path):
    result = run([str(path)], Config(isolated=True), jobs=1)
    assert actual(result.findings, path) == expected(path)


def actual(findings, path: Path):
    if path.suffix == ".ipynb":
        return {(f.cell, f.line, f.code) for f in findings}
    return {(f.line, f.code) for f in findings}


def test_whole_tree_in_one_run_matches_per_file_markers():
    """A file with a syntax error in the tree changes nothing for the other files."""
    result = run([str(FIXTURES)], Config(isolated=True), jobs=1)
    by_file = {}
    for finding in result.findings:
        by_file.setdefault(Path(finding.path).name, []).append(finding)
    for path in FILES:
        assert actual(by_file.get(path.name, []), path) == expected(path), path.name
