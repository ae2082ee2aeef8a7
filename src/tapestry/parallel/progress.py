"""A one-line progress display for long parallel calls (``progress=True``)."""
from __future__ import annotations

import sys
import time


class Progress:
    """Counts finished chunks on stderr, at most every 0.1 s."""

    def __init__(self, opname, total, enabled):
        self.opname, self.total, self.enabled = opname, total, enabled
        self.done, self.t0, self.shown = 0, time.perf_counter(), 0.0

    def step(self, n=1):
        self.done += n
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.shown >= 0.1 or self.done == self.total:
            self.shown = now
            end = "\n" if self.done == self.total else ""
            sys.stderr.write(f"\r{self.opname}: {self.done}/{self.total} chunks "
                             f"({now - self.t0:.1f} s){end}")
            sys.stderr.flush()
