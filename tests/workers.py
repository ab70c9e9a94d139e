"""One TensorFlow verify worker per configuration, shared by the whole test session.

Starting a worker imports TensorFlow under the lock-down (several seconds); the verifier, CLI
`--verify`, `--fix --verify` and allowlist tests would otherwise start one per run. A real
`cliplint --verify` run asks one worker for all its findings, resetting Keras' state after each
probe, so sharing a worker between tests is what a long run does. A worker is lent to one
session at a time; the session's `close` hands it back when it is idle, and kills it (as the
session always did) when it stopped in the middle of a probe: a timeout, a CPU limit, a crash.
Everything that decides how a worker starts (layer 1's hook, the lock-down layers switched off
for a test, the memory limit, the Keras flavour, --verify-unsandboxed) is part of its key.
"""
from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Any, Dict, List, Optional, Tuple

KEEP_IDLE = 3  # idle workers kept at most (each holds TensorFlow: a few hundred MB)


class Lent:
    """A pooled worker as the session sees it: the worker's own attributes, `sent` counted from
    the loan (tests read how many probes a session asked), and a `close` that returns it."""

    def __init__(self, pool: "WorkerPool", key: Tuple, worker: Any) -> None:
        self._pool, self._key, self._worker = pool, key, worker
        self._base = worker.sent
        self._busy = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._worker, name)

    @property
    def sent(self) -> int:
        return self._worker.sent - self._base

    def ask(self, probe: dict, timeout: float, cpu: float = float("inf")) -> dict:
        self._busy = True  # until the answer arrives: a probe cut short leaves the worker unusable
        answer = self._worker.ask(probe, timeout, cpu)
        self._busy = False
        return answer

    def close(self) -> None:
        if self._busy or self._worker.process.poll() is not None:
            self._worker.close()
        else:
            self._pool.give_back(self._key, self._worker)


class WorkerPool:
    """Stands in for the session module's `WorkerHandle` class: `lend` takes its arguments."""

    def __init__(self, module: ModuleType, folder: str) -> None:
        self.folder = folder
        self.real = module.WorkerHandle
        self.idle: List[Tuple[Tuple, Any]] = []
        self.folders: Dict[Tuple, str] = {}

    def key(self, unchecked: bool, legacy: Optional[bool], unsandboxed: bool) -> Tuple:
        from cliplint.verify import handle  # where a worker's start is decided

        return (unchecked, legacy, unsandboxed, os.environ.get("CLIPLINT_VERIFY_MEMORY"), handle.layers_off(),
                tuple(sorted(handle.scrubbed_environment("").items())))

    def lend(self, folder: str, unchecked: bool, ready_timeout: Optional[float] = None,
             legacy: Optional[bool] = None, unsandboxed: bool = False) -> Lent:
        key = self.key(unchecked, legacy, unsandboxed)
        for index, (idle_key, worker) in enumerate(self.idle):
            if idle_key == key:
                del self.idle[index]
                if worker.process.poll() is None:
                    return Lent(self, key, worker)
                worker.close()
                break
        # the worker's own folder outlives the session's (a worker runs, and logs, in its folder)
        own = self.folders.setdefault(key, os.path.join(self.folder, str(len(self.folders))))
        os.makedirs(own, exist_ok=True)
        timeout = {} if ready_timeout is None else {"ready_timeout": ready_timeout}
        return Lent(self, key, self.real(own, unchecked, legacy=legacy, unsandboxed=unsandboxed, **timeout))

    def give_back(self, key: Tuple, worker: Any) -> None:
        self.idle.append((key, worker))
        while len(self.idle) > KEEP_IDLE:
            self.idle.pop(0)[1].close()

    def close(self) -> None:
        for _, worker in self.idle:
            worker.close()
        self.idle.clear()


def session_module() -> Optional[ModuleType]:
    """The module whose `Session` starts workers (None without the verifier's dependencies)."""
    try:
        from cliplint.verify import Session
    except ImportError:
        return None
    return sys.modules[Session.__module__]
