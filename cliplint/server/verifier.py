"""`cliplint.verify` from the editor: the command line's `--verify` session, kept between requests.

TensorFlow starts only when the command is first run (its worker then serves later requests
without importing it again) and is stopped on shutdown. One verification at a time: the
session and its worker are not shared between threads.
"""
from __future__ import annotations

import threading
from dataclasses import replace
from typing import Callable, List, Optional

from ..findings import Finding
from ..verify import Session, require_tensorflow

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
