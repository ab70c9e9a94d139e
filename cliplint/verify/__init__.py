"""`--verify`: confirm each finding by executing the flagged snippet against the installed TensorFlow.

The linter never imports TensorFlow. Each snippet is first rebuilt by layer 1 (`rebuild`: only
allowlisted symbols survive, else the finding is `skipped`), then run by one worker subprocess per
cliplint run that has locked itself down (layer 2, `sandbox`). Answers come back authenticated
(`worker.sign`). Each finding may use so much of the worker's CPU time (`cpu`), each file so much in
all (`file_budget`); a wall-clock limit per probe (`timeout`) and for the whole run (`budget`) are the
backstop. A worker that overruns, crashes, hangs or sends an answer that fails authentication is
killed with its process group and replaced.
"""
from .handle import WorkerFailed, WorkerHandle
from .session import (
           DEFAULT_BUDGET,
           DEFAULT_CPU,
           DEFAULT_FILE_BUDGET,
           Session,
           other_flavour_installed,
           require_tensorflow,
           verify_findings,
)

__all__ = ["DEFAULT_BUDGET", "DEFAULT_CPU", "DEFAULT_FILE_BUDGET", "Session", "WorkerFailed", "WorkerHandle",
           "other_flavour_installed", "require_tensorflow", "verify_findings"]
