"""The rule registries: how tapestry differentiates each NumPy function.

They are filled while ``import tapestry`` runs and then frozen, so that
afterwards they are only read: concurrent ``grad`` calls (threads, and
free-threaded CPython) share nothing mutable.  The one later writer is a
*loader* registered at import for rules that would be costly to load
eagerly (scipy.special's, on the first traced call of an unknown ufunc); it
runs under a lock and is marked done only after it succeeded, so a second
thread arriving meanwhile waits for it instead of missing its rules.

This module is the bottom of the core's import graph: it imports nothing
from tapestry.  ``tapestry.core.primitive.implements`` is the one way rules
get registered; see docs/architecture.md.
"""
from __future__ import annotations

import threading

#: ufunc -> callable taking the ufunc's arguments (a Primitive or a composite).
UFUNCS: dict = {}
#: ufunc -> Primitive with one output: what ``Var``'s operators and
#: ``__array_ufunc__`` call without going through keyword handling.
FAST_UFUNCS: dict = {}
#: NumPy function (or an internal key such as ``"astype"``) -> callable
#: taking NumPy's own arguments (NEP 18 dispatch).
FUNCTIONS: dict = {}
#: Functions and ufuncs whose outputs are piecewise constant (derivative
#: zero almost everywhere: comparisons, rounding, argmax, shape queries):
#: they run on plain values and return plain arrays.
NONDIFF: set = set()
#: Function (or key) -> ``"module:line"`` where its rule (or its constant
#: declaration) was declared.
DECLARED: dict = {}


class RegistryFrozen(RuntimeError):
    """A rule was declared after ``import tapestry`` finished."""


_lock = threading.RLock()
_frozen = False
_writer = None          # ident of the thread running a loader, if any
_pending: list = []     # loaders not yet run (callables of no arguments)


def _check_writable(key):
    if _frozen and _writer != threading.get_ident():
        raise RegistryFrozen(
            f"tapestry: cannot register a rule for {getattr(key, '__name__', key)!r} "
            "after import: the registries are read-only once tapestry is imported "
            "(threads read them without locks). Use tapestry.custom_vjp for a "
            "function of your own.")


def _site(site):
    return "?" if site is None else f"{site[0]}:{site[1]}"


def register(table, key, value, site=None):
    """``table[key] = value`` while registries are writable; a key gets one
    rule only (a second declaration would silently replace the first).
    ``site``: ``(module, line)`` of the declaration."""
    with _lock:
        _check_writable(key)
        old = table.get(key)
        if old is not None and old is not value:
            raise ValueError(
                f"tapestry: a rule for {getattr(key, '__name__', key)!r} is declared "
                f"twice ({DECLARED.get(key, '?')} and {_site(site)}); keep one.")
        table[key] = value
        DECLARED.setdefault(key, _site(site))


def register_nondiff(keys, site=None):
    """Declare ``keys`` piecewise constant; like a rule, once each, and never
    for a function that has a rule (one of the two would be wrong)."""
    with _lock:
        for k in keys:
            _check_writable(k)
            name = getattr(k, "__name__", k)
            if k in NONDIFF:
                raise ValueError(f"tapestry: {name!r} is declared constant twice "
                                 f"({DECLARED.get(k, '?')} and {_site(site)}); keep one "
                                 "(tapestry/ops/constant.py is the list).")
            if k in UFUNCS or k in FUNCTIONS:
                raise ValueError(f"tapestry: {name!r} is declared constant "
                                 f"({_site(site)}) but has a rule ({DECLARED.get(k, '?')}); "
                                 "keep one.")
        NONDIFF.update(keys)
        for k in keys:
            DECLARED[k] = _site(site)


def add_loader(load):
    """Run ``load()`` (which registers rules) on the first lookup miss."""
    with _lock:
        _check_writable(load)
        _pending.append(load)


def run_loaders():
    """Run the pending loaders once, under the lock.  A caller that missed a
    rule calls this and then looks again: by the time it returns, any loader
    that another thread was running has finished."""
    global _writer
    if not _pending:
        return
    with _lock:
        while _pending:
            _writer = threading.get_ident()
            try:
                _pending[0]()
            finally:
                _writer = None
            _pending.pop(0)  # only after it succeeded


def freeze():
    """End of ``import tapestry``: from now on the registries are read-only."""
    global _frozen
    with _lock:
        _frozen = True
