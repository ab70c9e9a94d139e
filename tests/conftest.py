import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def run_cli(tmp_path):
    """Run the installed `cliplint` command; returns CompletedProcess (text)."""

    def run(*args, cwd=None, stdin=None, env=None):
        environment = {**os.environ, "NO_COLOR": "1", **(env or {})}
        return subprocess.run(
            [sys.executable, "-m", "cliplint", *args], cwd=cwd or tmp_path, input=stdin,
            capture_output=True, text=True, env=environment, timeout=600)

    return run
