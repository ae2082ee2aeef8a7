"""Debugging aids: where did a sparse cotangent become dense?

Every rule that cannot keep an :class:`~tapestry.sparse.AxisSparse`
cotangent sparse densifies it through one helper, which bumps a counter
keyed by the operation's name.  ``densify_counts()`` reads the counters, so
a training loop that should cost O(|S|) can assert it never paid O(N)::

    tp.debug.reset_densify_counts()
    g = tp.grad(loss)(W)
    assert tp.debug.densify_counts() == {}

With ``set_densify_warnings(True)`` each densification also emits a
``tapestry.debug.DensifyWarning`` whose stack shows the rule responsible.
"""
from __future__ import annotations

import threading
import warnings
from collections import Counter

__all__ = ["densify_counts", "reset_densify_counts", "set_densify_warnings",
           "record_densify", "DensifyWarning"]

_lock = threading.Lock()  # counters are shared by every thread
_counts: Counter = Counter()
_warn = False


class DensifyWarning(UserWarning):
    """A sparse cotangent was turned into a dense array."""


def record_densify(where: str, shape=None) -> None:
    """Count one densification at ``where`` (called by the sparse machinery)."""
    with _lock:
        _counts[where] += 1
    if _warn:
        warnings.warn(f"tapestry: sparse cotangent of shape {shape} densified by "
                      f"{where}", DensifyWarning, stacklevel=3)


def densify_counts() -> dict:
    """``{operation name: number of densifications}`` since the last reset."""
    with _lock:
        return dict(_counts)


def reset_densify_counts() -> None:
    """Zero every densification counter."""
    with _lock:
        _counts.clear()


def set_densify_warnings(on: bool = True) -> None:
    """Also warn (``DensifyWarning``) at every densification."""
    global _warn
    _warn = bool(on)
