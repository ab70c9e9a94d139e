"""The parent side of `--verify`: a `Session` verifies findings one by one within the run's
budgets, through one or two `WorkerHandle`s (one per Keras flavour), with verdicts cached."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from typing import Dict, List, Optional

from ..findings import Finding
from ..settings import ConfigError
from .handle import READY_TIMEOUT, CpuSpent, LockDownIncomplete, WorkerFailed, WorkerHandle
from .payload import prepare
from .progress import Progress
from .sandbox import layers_missing, platform_missing
from .verdicts import VerdictCache, expected_versions

DEFAULT_BUDGET = 600.0
DEFAULT_CPU = 20.0  # CPU seconds of the worker per finding (all its threads)
DEFAULT_FILE_BUDGET = 120.0  # CPU seconds of the worker per file
FOLDER_PREFIX = "cliplint-verify-"
MAX_TEXT = 2000
# The test-only hook that switches layer 1 off (tests/test_redteam.py): honoured only while pytest
# runs a test (it sets PYTEST_CURRENT_TEST), never in a plain run.
UNCHECKED_HOOK = "CLIPLINT_TEST_ONLY_SKIP_LAYER1"


def require_tensorflow() -> None:
    if importlib.util.find_spec("tensorflow") is None:
        raise ConfigError("--verify needs TensorFlow, which is not installed here: "
                          "install cliplint's verify extra (in a clone: pip install '.[verify]'; from git: "
                          "pip install 'cliplint[verify] @ git+URL'; see the README's Install)")


def layer1_off() -> bool:
    return os.environ.get(UNCHECKED_HOOK) == "1" and "PYTEST_CURRENT_TEST" in os.environ


def refusal(missing: LockDownIncomplete) -> str:
    return (f"not executed: the lock-down is incomplete here, unavailable: {missing}; "
            "pass --verify-unsandboxed to run the snippets anyway (see SECURITY.md)")


def printable(text) -> str:
    """Report text without control characters (no terminal escape sequences), of bounded length."""
    return "".join(c if c.isprintable() else " " for c in str(text))[:MAX_TEXT]


def remove_stale_folders(root: Optional[str] = None) -> None:
    """The folder of a run whose cliplint process is gone (killed, crashed) is removed."""
    root = root or tempfile.gettempdir()
    pattern = re.compile(re.escape(FOLDER_PREFIX) + r"(\d+)-")
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        match = pattern.match(name)
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Session:
    """Verifies findings one by one within a budget; identical probes run once, and verdicts are
    reused from the cache (`verdicts.VerdictCache`) without starting TensorFlow. A probe whose
    outcome depends on the Keras flavour (one refuses legacy code the other runs) is asked of a
    second worker running the other flavour, under the same lock-down, and both are reported."""

    def __init__(self, timeout: float, budget: float = DEFAULT_BUDGET, cache_folder: Optional[str] = None,
                 cpu: float = DEFAULT_CPU, file_budget: float = DEFAULT_FILE_BUDGET, unsandboxed: bool = False) -> None:
        """`unsandboxed`: the user's --verify-unsandboxed (run snippets even when a lock-down layer is
        unavailable); without it such a run executes nothing and every verdict says why."""
        self.timeout = timeout
        self.deadline = time.monotonic() + budget
        self.cpu = cpu
        self.file_budget = file_budget
        self.file_used: Dict[str, float] = {}  # CPU seconds the worker spent on each file's findings
        self.allowed = cpu  # CPU seconds the finding being verified may still use
        remove_stale_folders()
        self.folder = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-")
        self.worker: Optional[WorkerHandle] = None
        self.other: Optional[WorkerHandle] = None  # the other Keras flavour, started only when needed
        self.versions: dict = expected_versions()  # the worker's own report replaces it once started
        self.layers: dict = {}
        self.unsandboxed = unsandboxed
        self.refused: Optional[LockDownIncomplete] = None  # set once a worker found a layer missing
        if not unsandboxed and platform_missing():  # off Linux: no worker is even started
            self.layers = platform_missing()
            self.refused = LockDownIncomplete(self.layers)
        self.unchecked = layer1_off()
        self.answers: Dict[str, dict] = {}
        self.failed = False
        self.cache = None if cache_folder is None or self.unchecked else VerdictCache(cache_folder)
        self.cache_hits = 0

    def restart_budget(self, budget: float = DEFAULT_BUDGET) -> None:
        """A new run of a long-lived session (the language server's per request): the whole run's
        wall-clock budget and every file's CPU budget start again."""
        self.deadline = time.monotonic() + budget
        self.file_used.clear()

    def verify(self, finding: Finding) -> dict:
        if finding.probe is None:
            return self._verdict("skipped", f"no probe for {finding.code}: nothing to execute")
        prepared = prepare({"rule": finding.code, **finding.probe}, self.unchecked)
        if isinstance(prepared, str):
            return self._verdict("skipped", f"not executed: {prepared}")
        key = json.dumps(prepared, sort_keys=True, default=str)
        if key in self.answers:
            return self.answers[key]
        cached = self.cache.get(key) if self.cache else None
        if cached is not None:
            self.cache_hits += 1
            self.answers[key] = cached
            return cached
        used = self.file_used.setdefault(finding.path, 0.0)
        if used >= self.file_budget:
            return self._verdict("inconclusive", self._file_spent())
        self.allowed = min(self.cpu, self.file_budget - used)
        answer = self._run(prepared, finding.path)
        if not self.failed:  # a worker that died may not be this probe's fault: a twin runs again
            self.answers[key] = answer
            if self.cache and answer.pop("ran", False):
                self.cache.put(key, answer)
        answer.pop("ran", None)
        return answer

    def _file_spent(self) -> str:
        return f"the file's verify budget is spent ({self.file_budget:g} s of CPU, --verify-file-budget)"

    def _run(self, probe: dict, path: str) -> dict:
        answer = self._ask(probe, path, other=False)
        if not answer.pop("other_flavour", False) or not other_flavour_installed():
            return answer
        second = self._ask(probe, path, other=True)
        second.pop("other_flavour", None)
        return both_flavours(answer, second)

    def _ask(self, probe: dict, path: str, other: bool) -> dict:
        """One worker's verdict on the probe; `ran` marks a verdict the worker reached (cacheable).
        The CPU time it takes is charged to the finding's file."""
        self.failed = False
        if self.refused is not None:
            return self._verdict("skipped", refusal(self.refused))
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return self._verdict("inconclusive", "verify budget spent")
        if self.allowed <= 0:
            return self._verdict("inconclusive", self._file_spent())
        try:
            worker = self._other_worker(remaining) if other else self._worker(remaining)
        except LockDownIncomplete as err:
            self.refused, self.layers = err, err.layers
            return self._verdict("skipped", refusal(err))
        except TimeoutError:
            return self._verdict("inconclusive", "verify budget spent" if self._spent() else
                                 "TensorFlow could not be started: timed out")
        except (WorkerFailed, OSError, ValueError) as err:
            self.failed = True
            return self._verdict("inconclusive", f"TensorFlow could not be started: {err}")
        limit = min(self.timeout, self.deadline - time.monotonic())
        try:
            answer = worker.ask(probe, limit, self.allowed)
        except CpuSpent:
            by_file = self.allowed < self.cpu  # the file's budget, not the finding's, was the limit
            self._charge(path, worker)
            self._discard(other)
            if by_file:  # not the probe's own verdict: a twin in another file runs again
                self.failed = True
                return self._verdict("inconclusive", self._file_spent())
            return self._verdict("inconclusive", f"the probe used more than {self.cpu:g} s of CPU (--verify-cpu); "
                                                 "the worker was stopped and a new one takes the rest")
        except TimeoutError:
            self._charge(path, worker)
            self._discard(other)
            if limit < self.timeout:
                return self._verdict("inconclusive", "verify budget spent")
            return self._verdict("inconclusive", f"the probe did not finish within {self.timeout:g} s; "
                                                 "the worker was stopped and a new one takes the rest")
        except (WorkerFailed, OSError, ValueError) as err:
            self._charge(path, worker)
            self._discard(other)
            self.failed = True
            return self._verdict("inconclusive", f"{err}; a new worker takes the rest")
        self._charge(path, worker)
        return {**self._verdict(printable(answer["verdict"]), printable(answer["evidence"])),
                "assumptions": [printable(a) for a in [*probe.get("notes", []), *answer.get("assumptions", [])]],
                "other_flavour": bool(answer.get("other_flavour")), "ran": True}

    def _charge(self, path: str, worker: WorkerHandle) -> None:
        self.file_used[path] = self.file_used.get(path, 0.0) + worker.used
        self.allowed -= worker.used

    def _spent(self) -> bool:
        return time.monotonic() >= self.deadline

    def _worker(self, remaining: float = READY_TIMEOUT) -> WorkerHandle:
        if self.worker is None:
            self.worker = WorkerHandle(self.folder, self.unchecked, min(READY_TIMEOUT, remaining),
                                 unsandboxed=self.unsandboxed)
            self.versions = {k: self.worker.info.get(k) for k in ("tensorflow", "keras", "flavour")}
            self.layers = self.worker.info.get("layers", {})
        return self.worker

    def _other_worker(self, remaining: float) -> WorkerHandle:
        if self.other is None:
            legacy = self._worker(remaining).info.get("flavour") != "tf-keras"
            self.other = WorkerHandle(self.folder, self.unchecked, min(READY_TIMEOUT, remaining), legacy=legacy,
                                unsandboxed=self.unsandboxed)
        return self.other

    def _discard(self, other: bool = False) -> None:
        worker = self.other if other else self.worker
        if worker is not None:
            worker.close()
        if other:
            self.other = None
        else:
            self.worker = None

    def _verdict(self, verdict: str, evidence: str) -> dict:
        return {"verdict": verdict, "evidence": evidence, "assumptions": [], **self.versions}

    def close(self) -> None:
        self._discard(other=True)
        self._discard()
        shutil.rmtree(self.folder, ignore_errors=True)


def other_flavour_installed() -> bool:
    """Both Keras flavours are importable: Keras 3 (`keras`) and tf-keras (`tf_keras`)."""
    return all(importlib.util.find_spec(name) is not None for name in ("keras", "tf_keras"))


def both_flavours(first: dict, second: dict) -> dict:
    """One verdict from the two flavours' answers: confirmed when either confirms, else the
    conclusive one; the evidence names both outcomes (each starts with its flavour)."""
    order = ("confirmed", "not-reproduced", "inconclusive", "skipped")
    verdict = min(first["verdict"], second["verdict"], key=order.index)
    evidence = f"{first['evidence']} | under the other Keras flavour: {second['verdict']}: {second['evidence']}"
    assumptions = list(dict.fromkeys([*first["assumptions"], *second["assumptions"]]))
    ran = first.get("ran", False) and second.get("ran", False)
    return {**first, "verdict": verdict, "evidence": printable(evidence), "assumptions": assumptions, "ran": ran}


def warn_missing_layers(layers: dict, refused: bool = False) -> None:
    missing = layers_missing(layers)
    if missing and refused:
        print(f"cliplint: --verify executed no snippet: its lock-down is incomplete here, unavailable: "
              f"{'; '.join(missing)}. Pass --verify-unsandboxed to run them anyway (see SECURITY.md).",
              file=sys.stderr)
    elif missing:
        print(f"cliplint: --verify runs with part of its lock-down unavailable here: {'; '.join(missing)}. "
              "See SECURITY.md for what still holds.", file=sys.stderr)


def verify_findings(findings: List[Finding], timeout: float = 30.0, budget: float = DEFAULT_BUDGET,
                    cache_folder: Optional[str] = None, progress: bool = False, cpu: float = DEFAULT_CPU,
                    file_budget: float = DEFAULT_FILE_BUDGET, unsandboxed: bool = False) -> List[Finding]:
    """Each finding with its verdict. `progress`: a status line on stderr (verified / total, elapsed).
    `cpu`, `file_budget`: CPU seconds of the worker per finding and per file; `timeout`, `budget`:
    wall-clock seconds per probe and for the whole run; `unsandboxed`: see `Session`."""
    session = Session(timeout, budget, cache_folder, cpu, file_budget, unsandboxed)
    shown = Progress(len(findings)) if progress else None
    verified = []
    if shown:
        shown.update(0)
    try:
        for finding in findings:
            verified.append(replace(finding, verification=session.verify(finding)))
            if shown:
                shown.update(len(verified))
    finally:
        if shown:
            shown.clear()
        session.close()
    warn_missing_layers(session.layers, session.refused is not None)
    return verified
