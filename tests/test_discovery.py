"""Which files a folder walk reaches, through the `cliplint` command: a nested pyproject.toml's
excludes govern the files below it however far above it the walk starts (ruff: the closest
configuration file governs a file, its patterns relative to that file's folder)."""
import json
from pathlib import Path
from typing import List

import pytest

BAD = "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n"


def write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def linted(run_cli, *args: str, cwd: Path) -> List[str]:
    """The files a run reports, as it names them (every file written here has one finding)."""
    result = run_cli("--output-format", "json", *args, cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return sorted({record["path"] for record in json.loads(result.stdout)})


@pytest.fixture
def nested(tmp_path: Path) -> Path:
    """top/ without settings; top/sub/pyproject.toml excludes `*.pyi` and the folder `gen/`."""
    write(tmp_path, "top/sub/pyproject.toml", '[tool.cliplint]\nexclude = ["*.pyi", "gen/"]\n')
    for name in ("top/t.pyi", "top/sub/s.pyi", "top/sub/k.py", "top/sub/gen/g.py", "top/sub/deep/gen/d.py",
                 "top/sub/deep/e.pyi"):
        write(tmp_path, name, BAD)
    return tmp_path / "top"


def test_nested_excludes_apply_when_the_walk_starts_above(nested: Path, run_cli) -> None:
    # the top's files have the default settings: its .pyi is linted
    assert linted(run_cli, ".", cwd=nested) == ["sub/k.py", "t.pyi"]
    assert linted(run_cli, "top", cwd=nested.parent) == ["top/sub/k.py", "top/t.pyi"]


def test_nested_excludes_apply_when_the_walk_starts_at_or_below_the_config(nested: Path, run_cli) -> None:
    assert linted(run_cli, "sub", cwd=nested) == ["sub/k.py"]
    assert linted(run_cli, ".", cwd=nested / "sub") == ["k.py"]
    assert linted(run_cli, "sub/deep", cwd=nested) == []


def test_a_folder_named_on_the_command_line_is_walked_though_a_pattern_matches_it(nested: Path, run_cli) -> None:
    # as ruff: the excludes apply to what a walk finds, not to the paths given, unless --force-exclude
    assert linted(run_cli, "sub/gen", cwd=nested) == ["sub/gen/g.py"]
    assert linted(run_cli, "--force-exclude", "sub/gen", cwd=nested) == []


def test_an_explicit_file_is_linted_unless_force_exclude(nested: Path, run_cli) -> None:
    assert linted(run_cli, "sub/s.pyi", cwd=nested) == ["sub/s.pyi"]
    assert linted(run_cli, "--force-exclude", "sub/s.pyi", cwd=nested) == []
    assert linted(run_cli, "--force-exclude", "sub/gen/g.py", cwd=nested) == []


def test_default_excludes_apply_when_the_walk_starts_above_the_current_folder(tmp_path: Path, run_cli) -> None:
    """No pyproject.toml: the patterns are relative to the current folder, a walk of `..` included."""
    for name in ("cwd/build/b.py", "cwd/a.py", "other/build/o.py", "other/o.py"):
        write(tmp_path, name, BAD)
    assert linted(run_cli, "..", cwd=tmp_path / "cwd") == ["../other/o.py", "a.py"]
