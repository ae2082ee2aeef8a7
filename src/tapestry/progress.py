"""The one progress display for long work (training demos, parallel calls).

A rich progress bar when rich is installed (the ``cli`` extra) and stderr
is a terminal; on a terminal without rich, one plain line on stderr,
rewritten in place (``\\r``) at most every 0.1 s and ended with a newline.
When stderr is not a terminal (a CI log, ``make demo > log 2>&1``) a
carriage return would run every update together on one line of the file,
so each update is its own line instead, written only at 25/50/75/100% and
at most every ``LOG_INTERVAL_S`` seconds in between: a log gets a handful of
lines per bar, however many steps.  Disabled instances cost one comparison
per step, so callers create one unconditionally.
"""
from __future__ import annotations

import sys
import time

__all__ = ["Progress"]

#: Terminal: the shortest time between two rewrites of the line.
REFRESH_S = 0.1
#: Not a terminal: the longest time between two lines (besides the quarters).
LOG_INTERVAL_S = 5.0


class Progress:
    """``with Progress("train", total=100, fields={"loss": nan}) as p:
    p.advance(loss=0.3)``."""

    def __init__(self, description, total, enabled=True, fields=None, unit=""):
        self.description, self.total, self.enabled = description, total, enabled
        self.fields = dict(fields or {})
        self.unit = unit
        self.done, self.t0, self.shown = 0, time.perf_counter(), 0.0
        self._rich = self._task = None
        self._tty = enabled and sys.stderr.isatty()
        self._quarter = 0          # log mode: quarters of the total already written
        self._written = -1         # log mode: ``done`` at the last line written
        if self._tty:
            self._rich = _rich_bar(description, self.fields)
        else:
            self.shown = self.t0   # a log's first line waits for a quarter or the interval

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
        if not self._tty:
            if self._log_due(now):
                self._write_line(now)
        elif now - self.shown >= REFRESH_S or self.done == self.total:
            self.shown = now
            self._write_line(now, end="\n" if self.done == self.total else "")

    def close(self):
        if self._rich is not None and self._task is not None:
            self._rich.stop()
            self._task = None
        elif self.enabled and 0 < self.done < self.total and self.done != self._written:
            self._write_line(time.perf_counter())

    def _log_due(self, now):
        """Log mode: whether this update gets a line (the end, a new quarter
        of the total, or ``LOG_INTERVAL_S`` since the last line)."""
        if self.done >= self.total:
            return self.done != self._written
        quarter = 4 * self.done // self.total if self.total > 0 else 0
        if quarter > self._quarter:
            self._quarter = quarter
            return True
        return now - self.shown >= LOG_INTERVAL_S

    def _write_line(self, now, end="\n"):
        """The status line; rewritten in place (``\\r``) on a terminal, a new
        line each time otherwise."""
        self.shown, self._written = now, self.done
        extra = "".join(f" {k} {v:.4g}" if isinstance(v, float) else f" {k} {v}"
                        for k, v in self.fields.items())
        start = "\r" if self._tty else ""
        sys.stderr.write(f"{start}{self.description}: {self.done}/{self.total}{self.unit}"
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
