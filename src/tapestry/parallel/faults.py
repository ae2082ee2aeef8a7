"""Errors raised by parallel calls, and how a worker reports a failing item.

A worker never lets ``f``'s exception escape as is: it returns a
:class:`Failure` holding the item's index, the exception and its formatted
traceback, because a traceback does not survive pickling to another
process.  The caller then raises :class:`ParallelItemError` naming the item,
chained to the original exception, before anything is recorded on the tape
(so no partial gradient is ever applied).
"""
from __future__ import annotations

import traceback


class ParallelItemError(RuntimeError):
    """``f`` raised on one item.  ``index`` is the item's position in
    ``items``; ``__cause__`` is the original exception; ``worker_traceback``
    is its traceback as text (from the worker, thread or process)."""

    def __init__(self, message, index, worker_traceback):
        super().__init__(message)
        self.index = index
        self.worker_traceback = worker_traceback

    def __reduce__(self):
        # (pickle's default calls the class with the message alone: an error
        # of a nested call came back from a worker as a RuntimeError, or
        # without its .index)
        return type(self), (self.args[0], self.index, self.worker_traceback)


class WorkerDiedError(RuntimeError):
    """A worker was lost while running items ``items`` (a ``range``): a
    process worker died twice on them, a Dask worker was killed, or a
    user-supplied executor broke.  ``__cause__`` is the executor's own error."""

    def __init__(self, message, items=None):
        super().__init__(message)
        self.items = items

    def __reduce__(self):
        # (pickle's default calls the class with the message alone: an error
        # of a nested call came back from a worker as a RuntimeError, or
        # without its .items)
        return type(self), (self.args[0], self.items)


class ParallelTimeoutError(TimeoutError):
    """A parallel call ran past its ``timeout=``.  ``items`` lists the
    ranges of items whose chunks had not finished."""

    def __init__(self, message, items=()):
        super().__init__(message)
        self.items = list(items)

    def __reduce__(self):
        # (pickle's default calls the class with the message alone: an error
        # of a nested call came back from a worker as a RuntimeError, or
        # without its .items)
        return type(self), (self.args[0], self.items)


class Lost(Exception):
    """Internal: executor task ``k`` was lost (``cause``: the executor's error);
    ``twice``: it was already retried once."""

    def __init__(self, k, cause, twice=False):
        super().__init__(k, cause, twice)
        self.k, self.cause, self.twice = k, cause, twice


class Timedout(Exception):
    """Internal: the deadline passed with executor tasks ``ks`` unfinished;
    ``note``: what the executor did with them (for the message), if it says."""

    def __init__(self, ks, note=None):
        super().__init__(ks)
        self.ks, self.note = sorted(ks), note


def span_text(r):
    """``range`` of items as text: "item 4" or "items 4..7"."""
    return f"item {r.start}" if len(r) == 1 else f"items {r.start}..{r.stop - 1}"


class Failure:
    """What a worker returns instead of raising (picklable).  ``index``:
    the item (an int) or the items (text, "4..7") it was working on;
    ``what``: which step raised (``f`` itself, or the sweep through it;
    ``None``: a value ``f`` returned was refused, ``exc`` says which)."""

    __slots__ = ("index", "exc", "tb", "what")

    def __init__(self, index, exc, what="f raised"):
        self.index, self.what = index, what
        self.tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.exc = _picklable(exc)

    def __getstate__(self):
        return (self.index, self.exc, self.tb, self.what)

    def __setstate__(self, s):
        self.index, self.exc, self.tb, self.what = s

    def raise_in_caller(self, opname):
        exc = self.exc
        where = f"{'item' if isinstance(self.index, int) else 'items'} {self.index}"
        if self.what is None:  # a value f returned was refused: f itself did not raise
            raise ParallelItemError(f"tapestry.{opname}: on {where}, {exc}", self.index,
                                    self.tb) from exc
        raise ParallelItemError(
            f"tapestry.{opname}: {self.what} {type(exc).__name__} on {where}: "
            f"{exc}\n\nTraceback in the worker:\n{self.tb}", self.index, self.tb) from exc


def _picklable(exc):
    """The exception itself if it can cross a process boundary, else a
    RuntimeError carrying its text."""
    import pickle
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class BadValue(TypeError):
    """f returned something its caller cannot use (the message starts "f
    returned ..."); reported without f's traceback, since f did not raise."""
