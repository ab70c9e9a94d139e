"""The `--verify` status line on stderr: findings verified / total and the time elapsed, redrawn
in place, so that a long run never sits at a silent prompt. Only for a terminal (the CLI decides:
not with --quiet, not when stderr is a file or a CI log)."""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

MIN_INTERVAL = 0.2  # seconds between redraws: a run of cached verdicts does not flood the terminal


class Progress:
    def __init__(self, total: int, stream: Optional[TextIO] = None) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.drawn = 0.0
        self.width = 0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if done < self.total and now - self.drawn < MIN_INTERVAL:
            return
        self.drawn = now
        text = f"cliplint --verify: {done}/{self.total} findings verified, {now - self.started:.0f} s"
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def clear(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
