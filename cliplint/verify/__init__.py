"""`--verify`: confirm each finding by executing the flagged snippet against the installed TensorFlow.

The linter never imports TensorFlow. Verification runs the probes in one worker subprocess
per cliplint run (TensorFlow imported once, GPU hidden, logging quiet), each probe under a
time limit; a worker that crashes or hangs is replaced and the probe is `inconclusive`.
Snippets are checked by `safety.check` before they are sent.
"""
from __future__ import annotations

import importlib.util
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from typing import List, Optional

from ..settings import ConfigError
from ..findings import Finding
from . import safety

READY_TIMEOUT = 300.0  # importing TensorFlow cold can take tens of seconds on a busy machine


def require_tensorflow() -> None:
    if importlib.util.find_spec("tensorflow") is None:
        raise ConfigError("--verify needs TensorFlow, which is not installed here: "
                          "pip install 'cliplint[verify]' (installs tensorflow-cpu)")


class WorkerFailed(Exception):
    pass


class Worker:
    """One verifier subprocess and the line protocol to it."""

    def __init__(self, folder: str) -> None:
        self.log = open(os.path.join(folder, "worker.log"), "wb")
        environment = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "3",
                       "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cliplint.verify.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, cwd=folder, env=environment, start_new_session=True)
        self.buffer = b""
        self.info = self._read(READY_TIMEOUT)
        if not self.info.get("ready"):
            raise WorkerFailed("the worker did not start")

    def ask(self, probe: dict, timeout: float) -> dict:
        self.process.stdin.write(json.dumps({"probe": probe}).encode() + b"\n")
        self.process.stdin.flush()
        return self._read(timeout)

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise WorkerFailed(self._death())
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def _death(self) -> str:
        code = self.process.wait(timeout=10)
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (memory limit?)" if name in ("SIGKILL", "SIGSEGV", "SIGABRT") else ""
            return f"the worker died with {name}{hint}"
        return f"the worker exited with status {code}"

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
        self.process.wait()
        self.log.close()


class Session:
    """Verifies findings one by one, starting a new worker after a crash or a timeout."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.folder = tempfile.mkdtemp(prefix="cliplint-verify-")
        self.worker: Optional[Worker] = None
        self.versions: dict = {}

    def verify(self, finding: Finding) -> dict:
        if finding.probe is None:
            return self._verdict("skipped", f"no probe for {finding.code}: nothing to execute")
        for snippet in _snippets(finding.probe):
            reason = safety.check(snippet)
            if reason:
                return self._verdict("skipped", f"not executed: {reason}")
        try:
            worker = self._worker()
        except (WorkerFailed, TimeoutError, OSError, ValueError) as err:
            return self._verdict("inconclusive", f"TensorFlow could not be started: {err or 'timed out'}")
        try:
            answer = worker.ask({"rule": finding.code, **finding.probe}, self.timeout)
        except TimeoutError:
            self._discard()
            return self._verdict("inconclusive", f"the probe did not finish within {self.timeout:g} s; "
                                                 "the worker was stopped and a new one takes the rest")
        except (WorkerFailed, OSError, ValueError) as err:
            self._discard()
            return self._verdict("inconclusive", f"{err}; a new worker takes the rest")
        return {**self._verdict(answer["verdict"], answer["evidence"]), "assumptions": answer.get("assumptions", [])}

    def _worker(self) -> Worker:
        if self.worker is None:
            self.worker = Worker(self.folder)
            self.versions = {k: self.worker.info.get(k) for k in ("tensorflow", "keras", "flavour")}
        return self.worker

    def _discard(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def _verdict(self, verdict: str, evidence: str) -> dict:
        return {"verdict": verdict, "evidence": evidence, "assumptions": [], **self.versions}

    def close(self) -> None:
        self._discard()
        shutil.rmtree(self.folder, ignore_errors=True)


def _snippets(probe: dict) -> List[dict]:
    """Every code snippet inside a probe payload (they are the dicts that carry `code`)."""
    found = []
    for value in probe.values():
        if isinstance(value, dict) and "code" in value:
            found.append(value)
        elif isinstance(value, list):
            found.extend(v for v in value if isinstance(v, dict) and "code" in v)
    return found


def verify_findings(findings: List[Finding], timeout: float = 30.0) -> List[Finding]:
    session = Session(timeout)
    try:
        return [replace(f, verification=session.verify(f)) for f in findings]
    finally:
        session.close()
