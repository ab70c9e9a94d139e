"""The guides under docs/: the MkDocs site builds with --strict (every internal link
and anchor resolves, every page is in the nav), the README's links resolve, the configuration
reference names every key and flag, and the examples run as shown."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()


def _slug(heading: str) -> str:
    """The anchor MkDocs' toc (and GitHub) gives a heading: lower case, punctuation dropped."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return re.sub(r"[\s]+", "-", text)


def _anchors(page: Path):
    return {_slug(line.lstrip("#")) for line in page.read_text().splitlines() if re.match(r"#{1,6} ", line)}


def test_every_relative_link_of_the_readme_resolves():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(local) > 20
    for link in local:
        target, _, anchor = link.partition("#")
        path = ROOT / target if target else ROOT / "README.md"
        assert path.exists(), link
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path), link


def test_the_readme_is_short_and_keeps_what_a_user_needs_first():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 220
    headings = re.findall(r"^## (.+)$", readme, re.M)
    assert headings[:3] == ["Quick start", "Install", "What it finds"]
    assert {"pre-commit", "In CI", "Editors", "Documentation"} <= set(headings)
    assert all(f"(docs/{page.name})" in readme for page in DOCS.glob("*.md") if page.name != "index.md")


def test_the_configuration_reference_names_every_key_and_flag():
    from cliplint.cli import check
    from cliplint.settings import KEYS

    reference = (DOCS / "configuration.md").read_text()
    keys = set(re.findall(r"^\| `([a-z-]+)` \|", reference.split("## Every key", 1)[1].split("\n## ", 1)[0], re.M))
    assert keys == KEYS
    flags = reference.split("## Every flag", 1)[1]
    for option in check.params:
        for name in (*option.opts, *option.secondary_opts):
            if name.startswith("-"):
                assert f"`{name}" in flags, name


def _examples(page: Path):
    """(file name, its text, the console blocks after it) for each "`NAME`:" python block."""
    text = page.read_text()
    found = []
    for match in re.finditer(r"^`([\w./-]+)`:\n\n```python\n(.*?)```\n", text, re.M | re.S):
        rest = text[match.end():]
        following = re.split(r"^`[\w./-]+`:\n\n```python\n", rest, maxsplit=1, flags=re.M)[0]
        found.append((match.group(1), match.group(2), re.findall(r"```console\n(.*?)```", following, re.S)))
    return found


def test_the_autofix_example_runs_as_shown(tmp_path, run_cli):
    examples = _examples(DOCS / "autofix.md")
    assert examples and all(blocks for _, _, blocks in examples)
    for name, source, blocks in examples:
        for block in blocks:
            (tmp_path / name).write_text(source)
            sessions = re.split(r"^\$ ", block, flags=re.M)[1:]
            for session in sessions:
                command, _, shown = session.partition("\n")
                words = shlex.split(command)
                assert words[0] == "cliplint"
                result = run_cli("--no-cache", *words[1:])
                assert result.stdout + result.stderr == shown, command


def test_every_toml_example_is_a_valid_configuration(tmp_path, run_cli):
    blocks = [block for page in [*DOCS.glob("*.md"), ROOT / "README.md"]
              for block in re.findall(r"```toml\n(.*?)```", page.read_text(), re.S) if "[tool.cliplint" in block]
    assert len(blocks) >= 3
    (tmp_path / "train.py").write_text("import tensorflow as tf\n")
    for block in blocks:
        (tmp_path / "pyproject.toml").write_text(block)
        result = run_cli("train.py")
        assert result.returncode == 0, block + result.stderr
