"""The one progress display for long work (training demos, parallel calls).

A rich progress bar when rich is installed (the ``cli`` extra) and stderr
is a terminal; otherwise one plain line on stderr, rewritten at most every
0.1 s and ended with a newline.  Disabled instances cost one comparison
per step, so callers create one unconditionally.
"""
from __future__ import annotations

import sys
import time


class Progress:
    """``with Progress("train", total=100, fields={"loss": nan}) as p:
    p.advance(loss=0.3)``."""

    def __init__(self, description, total, enabled=True, fields=None, unit=""):
        self.description, self.total, self.enabled = description, total, enabled
        self.fields = dict(fields or {})
        self.unit = unit
        self.done, self.t0, self.shown = 0, time.perf_counter(), 0.0
        self._rich = self._task = None
        if enabled and sys.stderr.isatty():
            self._rich = _rich_bar(description, self.fields)

    def __enter__(self):
        if self._rich is not None:
            self._task = self._rich.add_task(self.description, total=self.total,
                                             **self.fields)
            self._rich.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def advance(self, n=1, **fields):
        self.done += n
        if not self.enabled:
            return
        self.fields.update(fields)
        if self._rich is not None:
            if self._task is None:
                self.__enter__()
            self._rich.update(self._task, advance=n, **fields)
            if self.done >= self.total:  # callers without a with block
                self.close()
            return
        now = time.perf_counter()
        if now - self.shown >= 0.1 or self.done == self.total:
            self.shown = now
            self._write_line(now, end="\n" if self.done == self.total else "")

    def close(self):
        if self._rich is not None and self._task is not None:
            self._rich.stop()
            self._task = None
        elif self.enabled and 0 < self.done < self.total:
            self._write_line(time.perf_counter(), end="\n")

    def _write_line(self, now, end):
        extra = "".join(f" {k} {v:.4g}" if isinstance(v, float) else f" {k} {v}"
                        for k, v in self.fields.items())
        sys.stderr.write(f"\r{self.description}: {self.done}/{self.total}{self.unit}"
                         f"{extra} ({now - self.t0:.1f} s){end}")
        sys.stderr.flush()


def _rich_bar(description, fields):
    try:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress,
                                   TextColumn, TimeRemainingColumn)
    except ImportError:
        return None
    cols = [TextColumn(description), BarColumn(), MofNCompleteColumn()]
    cols += [TextColumn(f"{k} {{task.fields[{k}]:.3f}}") for k in fields]
    return RichProgress(*cols, TimeRemainingColumn(), transient=False)
