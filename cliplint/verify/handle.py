"""The parent's handle on one verifier subprocess (`verify/worker.py` is the child): started
in its own process group with a key only the two share, asked one probe at a time over an
authenticated line protocol, with wall-clock and CPU-time limits, and killed with its group."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import IO, Dict, List, Optional, Tuple

from .channel import authentic
from .sandbox import layers_missing, scrubbed_environment

READY_TIMEOUT = 300.0  # importing TensorFlow cold can take tens of seconds on a busy machine
CPU_POLL = 0.2  # seconds between two readings of the worker's CPU time while it runs a probe
MEMORY_LIMIT = 4 * 1024 ** 3
MAX_ANSWER = 1024 ** 2  # bytes of one answer line
# Likewise, lock-down layers to switch off (comma-separated names of `sandbox.LAYERS`), to show what
# the others hold and that a missing layer stops `--verify` (tests/test_sandbox_layers.py).
LAYERS_OFF_HOOK = "CLIPLINT_TEST_ONLY_LAYERS_OFF"


def layers_off() -> str:
    return os.environ.get(LAYERS_OFF_HOOK, "") if "PYTEST_CURRENT_TEST" in os.environ else ""


class WorkerFailed(Exception):
    pass


class LockDownIncomplete(Exception):
    """A lock-down layer is unavailable and the user did not pass --verify-unsandboxed."""

    def __init__(self, layers: dict) -> None:
        super().__init__("; ".join(layers_missing(layers)))
        self.layers = layers


class CpuSpent(Exception):
    """The worker used more CPU time on one probe than it was allowed."""


def cpu_seconds(pid: int) -> Optional[float]:
    """The CPU time (user + system, all threads, and reaped children) a process has used, read
    from /proc/<pid>/stat; None where there is no /proc (then only the wall-clock limits hold)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return sum(int(field) for field in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


class WorkerHandle:
    """One verifier subprocess in its own process group, and the authenticated line protocol."""

    def __init__(self, folder: str, unchecked: bool, ready_timeout: float = READY_TIMEOUT,
                 legacy: Optional[bool] = None, unsandboxed: bool = False) -> None:
        """`legacy`: run tf-keras (True) or Keras 3 (False) whatever TF_USE_LEGACY_KERAS says (the
        second flavour's worker); None keeps the user's setting. `unsandboxed`: run snippets even
        when a lock-down layer is unavailable (else `LockDownIncomplete`)."""
        self.key = os.urandom(32)
        self.sent = 0
        self.used = 0.0  # CPU seconds the last probe took
        self.log = open(os.path.join(folder, "worker.log" if legacy is None else f"worker-{legacy}.log"), "wb")
        key_read, key_write = os.pipe()
        memory = int(os.environ.get("CLIPLINT_VERIFY_MEMORY", str(MEMORY_LIMIT)))
        command = [sys.executable, "-m", "cliplint.verify.worker", "--key-fd", str(key_read),
                   "--memory", str(memory), *(["--unchecked"] if unchecked else []),
                   *(["--unsandboxed"] if unsandboxed else []), *_layers_off()]
        try:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, cwd=folder,
                env={**scrubbed_environment(folder), **_import_path(), **_flavour(legacy)},
                pass_fds=(key_read,),
                start_new_session=True)
        finally:
            os.close(key_read)
        self.buffer = b""
        try:
            self.requests, self.answers = _pipes(self.process)
            with os.fdopen(key_write, "wb") as pipe:
                pipe.write(self.key)
            self.info = self._read(ready_timeout, 0)
            if not unsandboxed and list(layers_missing(self.info.get("layers", {}))):
                raise LockDownIncomplete(self.info["layers"])  # the worker refuses too; checked twice
            if not self.info.get("ready"):
                raise WorkerFailed("the worker did not start")
        except BaseException:
            self.close()
            raise

    def ask(self, probe: dict, timeout: float, cpu: float = float("inf")) -> dict:
        """The answer to one probe within `timeout` wall-clock seconds and `cpu` seconds of the
        worker's CPU time (TimeoutError, CpuSpent); `self.used`: the CPU time it took."""
        self.sent += 1
        start = cpu_seconds(self.process.pid)
        self.requests.write(json.dumps({"id": self.sent, "probe": probe}).encode() + b"\n")
        self.requests.flush()
        try:
            return self._read(timeout, self.sent, start, cpu)["answer"]
        finally:
            now = cpu_seconds(self.process.pid)
            self.used = now - start if start is not None and now is not None else 0.0

    def _read(self, timeout: float, expected: int, start: Optional[float] = None, cpu: float = float("inf")) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.answers.fileno()
        waiting = select.poll()  # not select(): a descriptor above FD_SETSIZE (1024) is fine
        waiting.register(fd, select.POLLIN)
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            wait = min(remaining, CPU_POLL) if start is not None else remaining
            ready = waiting.poll(max(1, int(wait * 1000)))
            now = cpu_seconds(self.process.pid) if start is not None else None
            if start is not None and now is not None and now - start > cpu:
                raise CpuSpent
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise WorkerFailed(self._death())
                self.buffer += chunk
                if len(self.buffer) > MAX_ANSWER:
                    raise WorkerFailed("the worker's answer is too long (something else wrote to its channel)")
        line, self.buffer = self.buffer.split(b"\n", 1)
        return self._authentic(line, expected)

    def _authentic(self, line: bytes, expected: int) -> dict:
        """The answer, when the line carries this run's MAC and the request's id; nothing the
        snippet wrote into the channel (it has no key) gets past this."""
        mac, _, body = line.decode("utf-8", "replace").partition(" ")
        if not authentic(self.key, mac, body) or self.buffer:
            raise WorkerFailed("the worker's answer failed authentication (something else wrote to its channel)")
        message = json.loads(body)
        if message.get("id") != expected:
            raise WorkerFailed("the worker answered out of turn")
        return message

    def _death(self) -> str:
        code = self.process.wait(timeout=10)
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (memory limit?)" if name in ("SIGKILL", "SIGSEGV", "SIGABRT") else ""
            return f"the worker died with {name}{hint}"
        return f"the worker exited with status {code}"

    def close(self) -> None:
        """Kill the worker's whole process group, whatever state it is in."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.log):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


def _pipes(process: "subprocess.Popen[bytes]") -> Tuple[IO[bytes], IO[bytes]]:
    """The worker's stdin and stdout: what requests go to and answers come from."""
    if process.stdin is None or process.stdout is None:
        raise WorkerFailed("the worker was started without its pipes")
    return process.stdin, process.stdout


def _flavour(legacy: Optional[bool]) -> Dict[str, str]:
    return {} if legacy is None else {"TF_USE_LEGACY_KERAS": "1" if legacy else "0"}


def _layers_off() -> List[str]:
    off = layers_off()
    return ["--test-only-off", off] if off else []


def _import_path() -> Dict[str, str]:
    """Where the worker finds cliplint when it is not installed (run from a checkout)."""
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return {"PYTHONPATH": package_parent}
