from pathlib import Path
from typing import Dict, Optional

import pytest
from command import Ran, run_in_process
from workers import WorkerPool, session_module

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full-sweeps", action="store_true",
                     help="also run the cases of the slow sweeps marked beyond_sample (CI runs the sample)")


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Without --full-sweeps, the cases marked `beyond_sample` are deselected (and counted as such)."""
    if config.getoption("--full-sweeps"):
        return
    beyond = [item for item in items if item.get_closest_marker("beyond_sample")]
    if beyond:
        config.hook.pytest_deselected(items=beyond)
        items[:] = [item for item in items if not item.get_closest_marker("beyond_sample")]


@pytest.fixture
def run_cli(tmp_path):
    """Run the `cliplint` command in this process (tests/command.py), in `cwd` (default
    tmp_path), with `stdin` as standard input and `env` added to the environment."""

    def run(*args: str, cwd: Optional[Path] = None, stdin: Optional[str] = None,
            env: Optional[Dict[str, str]] = None) -> Ran:
        return run_in_process(args, cwd or tmp_path, stdin, env)

    return run


@pytest.fixture(scope="session", autouse=True)
def shared_verify_workers(tmp_path_factory):
    """The verify workers of every session this process starts come from one pool (tests/workers.py)."""
    module = session_module()
    if module is None:
        yield None
        return
    pool = WorkerPool(module, str(tmp_path_factory.mktemp("verify-workers")))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "WorkerHandle", pool.lend)
        yield pool
    pool.close()
