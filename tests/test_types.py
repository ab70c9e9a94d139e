"""The package type-checks: mypy with the configuration of pyproject.toml ([tool.mypy]:
check_untyped_defs, every module checked) reports no error."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_error(tmp_path):
    pytest.importorskip("mypy", reason="mypy is in the `test` extra (pip install -e '.[test]')")
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")], cwd=ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
