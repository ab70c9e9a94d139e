import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import pytest
from click.testing import CliRunner

from cliplint.cli import main

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Ran:
    """What a run of `cliplint` left: the fields of subprocess.CompletedProcess the tests read."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(tmp_path):
    """Run the `cliplint` command in this process (click's CliRunner), in `cwd` (default
    tmp_path), with `stdin` as standard input and `env` added to the environment; returns a
    `Ran`. An exception the command does not handle fails the test, as a traceback would."""

    def run(*args: str, cwd: Optional[Path] = None, stdin: Optional[str] = None,
            env: Optional[Dict[str, str]] = None) -> Ran:
        here = os.getcwd()
        os.chdir(cwd or tmp_path)
        try:
            result = CliRunner().invoke(main, list(args), input=stdin, env={"NO_COLOR": "1", **(env or {})},
                                        prog_name="cliplint", catch_exceptions=False)
        finally:
            os.chdir(here)
        return Ran(result.exit_code, result.stdout, result.stderr)

    return run


@pytest.fixture
def run_process(tmp_path):
    """Run `python -m cliplint` as a process of its own, for what only a real process shows
    (exit without teardown, signals, a pool of workers, the real standard streams); returns
    subprocess.CompletedProcess (text)."""

    def run(*args: str, cwd: Optional[Path] = None, stdin: Optional[str] = None,
            env: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
        environment = {**os.environ, "NO_COLOR": "1", **(env or {})}
        return subprocess.run(
            [sys.executable, "-m", "cliplint", *args], cwd=cwd or tmp_path, input=stdin,
            capture_output=True, text=True, env=environment, timeout=600)

    return run
