"""`cliplint.verify` from the editor: the command line's `--verify` session, kept between requests.

TensorFlow starts only when the command is first run (its worker then serves later requests
without importing it again) and is stopped on shutdown. Each request has the command line's
time budget. One verification at a time: the
session and its worker are not shared between threads.
"""
from __future__ import annotations

import os
import signal
import threading
from dataclasses import replace
from typing import Callable, List, Optional

from ..findings import Finding
from ..verify import DEFAULT_BUDGET, Session, require_tensorflow

Progress = Callable[[int, int, Finding], None]  # (done, total, the finding being verified)


class Verifier:
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.session: Optional[Session] = None
        self.closed = False
        self.running = threading.Lock()

    def verify(self, findings: List[Finding], progress: Progress) -> List[Finding]:
        """The findings with their verdicts; raises ConfigError when TensorFlow is not installed."""
        require_tensorflow()
        with self.running:
            # The session (and TensorFlow) outlives a request; the time budget is per request, as
            # for one `cliplint check --verify` run.
            self._session().restart_budget(DEFAULT_BUDGET)
            verified = []
            for done, finding in enumerate(findings):
                if self.closed:  # shutting down: the rest stay unverified
                    break
                progress(done, len(findings), finding)
                verified.append(replace(finding, verification=self._session().verify(finding)))
            if self.closed:
                self.close()  # a worker started while closing goes too
            return verified

    def _session(self) -> Session:
        if self.session is None:
            self.session = Session(self.timeout)
        return self.session

    def close(self) -> None:
        """Stop the worker at once, even mid-probe (the probe then ends `inconclusive`)."""
        self.closed = True
        if self.session is not None:
            self.session.close()
        _stop_starting_workers()


WORKER_MODULE = b"cliplint.verify.worker"


def _stop_starting_workers() -> None:
    """A worker still importing TensorFlow is not in the session yet (it joins once ready): stop
    every worker this process started, by its process group. Linux's /proc lists them; where
    there is none, such a worker ends by itself once TensorFlow is imported and it reads the
    closed pipe."""
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return
    parent = str(os.getpid())
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                ppid = handle.read().rsplit(b")", 1)[1].split()[1].decode()
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read()
        except (OSError, IndexError):
            continue
        if ppid == parent and WORKER_MODULE in command:
            try:
                os.killpg(int(entry), signal.SIGKILL)  # the worker leads its own session (group)
            except OSError:
                pass
