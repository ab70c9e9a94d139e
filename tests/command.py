"""`cliplint` run in this process through click's CliRunner, as the tests' `run_cli` fixture does."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence, Union

from click.testing import CliRunner

from cliplint import cache
from cliplint.cli import main


@dataclass
class Ran:
    """What a run of `cliplint` left: the fields of subprocess.CompletedProcess the tests read."""

    returncode: int
    stdout: str
    stderr: str


def run_in_process(args: Sequence[str], cwd: Union[str, Path], stdin: Optional[str] = None,
                   env: Optional[Dict[str, Optional[str]]] = None) -> Ran:
    """The command in `cwd`, with `stdin` as standard input and `env` over the environment (None
    removes a variable). The cache's once-per-process state (opened folders, the user key) is
    released first, as a new process starts without it. An exception the command does not handle
    fails the test, as a traceback would."""
    cache.release()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, list(args), input=stdin, env={"NO_COLOR": "1", **(env or {})},
                                    prog_name="cliplint", catch_exceptions=False)
    finally:
        os.chdir(here)
    return Ran(result.exit_code, result.stdout, result.stderr)
