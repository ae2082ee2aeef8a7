"""Staged values: what ``tapestry.jit`` passes to the function it compiles.

A :class:`Staged` holds a concrete value (the trace runs the function for
real, on the first call's data) and a slot of a :class:`Recorder`, which
writes down every NumPy call that touches it: ufuncs and their methods,
``__array_function__`` calls, operators, indexing, methods.  The record is
a straight-line program that ``tapestry.jit`` lowers to Python source and
replays on later calls (``tapestry/jit/``).

Everything the record cannot replay is a *guard*: wherever Python reads a
staged value (``bool``, ``int``, ``float``, ``.item()``, ``np.asarray``,
an ``if`` on a comparison), the value read is written down and checked at
replay; a failed guard makes ``jit`` trace again (CppAD's comparison
counting, generalized).  Output shapes that depend on data (``nonzero``,
boolean masks) are guarded too.  An operation that would write a staged
value into memory the program does not own (``out=`` a plain array,
``np.add.at`` into one) *refuses* the trace (:meth:`Recorder.refuse`): the
function then finishes on the concrete values, recording nothing more, so
that its effects (the write, an append to a list) happen once, as in the
plain call; ``jit`` returns that result and runs the function uncompiled
from then on, never half-compiled.

Staged values are the lowest level: a ``Var`` (``jit(grad(f))``) or a
``Batched`` (``jit(vmap(f))``) may hold one as its value, and a staged value
meeting either defers to it (``NotImplemented``), which then calls NumPy
on the staged value one level down.
"""
from __future__ import annotations

import contextlib
import functools
import operator
import sys
import threading
import warnings
import weakref

import numpy as np

from .tape import same_bits
from .var import ArrayMethods, Var, getitem, values_of


class Unstageable(Exception):
    """The function does something a replay cannot reproduce (a write of a
    staged value into a plain array, a result object of unknown kind):
    ``jit`` runs it uncompiled, with a warning naming the reason.  Raised
    before the function runs (its environment cannot be guarded); during
    the trace the recorder is refused instead (:meth:`Recorder.refuse`)."""


class EscapedStagedError(RuntimeError):
    """A staged value was used after the ``jit`` trace that made it ended."""


class Slot:
    """A position in the program: where a template holds a staged value."""

    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __repr__(self):
        return f"v{self.i}"


class Step:
    """One recorded instruction.

    ``kind``:

    - ``"call"``: ``out = fn(*args, **kwargs)`` (args and kwargs are
      templates: Slots where staged values were, constants elsewhere);
      ``inplace`` names the slot written when ``out`` is ``None``;
    - ``"item"``: ``out = args[0][args[1]]`` (an element of a tuple result);
    - ``"bool"``, ``"int"``, ``"index"``, ``"float"``, ``"pin"``: a guard,
      ``value`` is what Python read from slot ``args[0]`` at trace time;
    - ``"shape"``: a guard on slot ``args[0]``'s shape and dtype;
    - ``"state"``: a guard on state the function reads besides its values
      (``fn()`` equals ``value``: ``np.geterr`` where the function sets
      ``np.errstate``, ``np.get_printoptions`` where it makes text of a
      value; ``args`` is empty);
    - ``"raises"``: the call ``fn(*args, **kwargs)`` raised ``value`` at
      trace time (the function caught it), so at replay it must raise too.

    ``site`` is ``(filename, line, function)`` of the user's code that made
    the step (guards name it when they fail).  ``err``: the NumPy error
    state the function set around the call (``np.errstate``), the entries
    that differ from the state at the start of the trace; the replay sets
    them around the call too.
    """

    __slots__ = ("kind", "fn", "args", "kwargs", "out", "value", "site", "inplace", "err")

    def __init__(self, kind, fn, args, kwargs, out, value=None, site=None, inplace=None,
                 err=None):
        self.kind, self.fn, self.args, self.kwargs = kind, fn, args, kwargs
        self.out, self.value, self.site, self.inplace = out, value, site, inplace
        self.err = err


#: Files whose frames are not "the user's line" of a step.
_INTERNAL = ("/tapestry/", "/numpy/", "/scipy/", "/opt_einsum/", "<__array_function__")


def user_site():
    """``(file, line, function)`` of the innermost frame outside tapestry,
    NumPy and SciPy: the line a guard or an error should name."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if not any(p in name for p in _INTERNAL):
            return name, f.f_lineno, f.f_code.co_name
        f = f.f_back
    return "?", 0, "?"


# --- functions whose results are metadata (no data read) --------------------
_STATIC_QUERIES = {np.shape, np.ndim, np.size, np.result_type, np.iscomplexobj,
                   np.isrealobj}

#: Functions whose result shape follows from their arguments' shapes and
#: static arguments (no shape guard needed).  Anything else gets one.
_SHAPE_SAFE = {
    np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.reshape, np.transpose,
    np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims, np.ravel, np.broadcast_to,
    np.concatenate, np.stack, np.vstack, np.hstack, np.dot, np.vdot, np.inner, np.outer,
    np.tensordot, np.einsum, np.where, np.clip, np.zeros_like, np.ones_like, np.full_like,
    np.empty_like, np.copy, np.take, np.take_along_axis, np.cumsum, np.cumprod, np.var,
    np.std, np.abs, np.round, np.around, np.diagonal, np.trace, np.tril, np.triu, np.flip,
    np.roll, np.tile, np.atleast_1d, np.atleast_2d, np.atleast_3d, np.linalg.norm,
    np.linalg.inv, np.linalg.det, np.linalg.solve, np.linalg.cholesky, np.linalg.slogdet,
    np.linalg.eigh, np.linalg.qr, np.linalg.svd, np.argmax, np.argmin, np.argsort, np.sort,
    np.any, np.all, np.real, np.imag, np.conjugate, np.diag, np.pad, np.matmul, np.cross,
    np.logaddexp, np.average, np.linalg.matrix_transpose, np.matrix_transpose,
    np.isclose, np.nan_to_num, np.diff, np.kron, np.broadcast_arrays, np.split,
    np.array_split, np.meshgrid, np.cov, np.corrcoef, np.median, np.percentile,
    np.quantile, np.cumulative_sum, np.cumulative_prod, np.ptp, np.triu_indices_from,
    np.asarray, np.asanyarray, np.ascontiguousarray, np.array,
}

#: Functions that write into their first argument.
_MUTATING = {np.copyto, np.put, np.place, np.putmask, np.put_along_axis,
             np.fill_diagonal}

#: Functions (and ndarray methods) that write values to a file or a file
#: object: their effect is outside the program (the function may read the
#: file back), so a trace meeting one runs uncompiled.
_WRITES_FILES = {np.save, np.savez, np.savez_compressed, np.savetxt}
_WRITES_FILES_METHODS = frozenset({"tofile", "dump"})

#: Python operators (the forward of arithmetic on traced values, ``x[i]``).
_OPERATOR_SAFE = {operator.add, operator.sub, operator.mul, operator.truediv, operator.pow,
                  operator.neg, operator.matmul, operator.floordiv, operator.mod,
                  operator.pos, operator.abs, operator.lt, operator.le, operator.gt,
                  operator.ge, operator.eq, operator.ne, operator.and_, operator.or_,
                  operator.xor, operator.invert}


class Recorder:
    """One ``jit`` trace: its steps and slots.  Used by one thread; a staged
    value of a finished recorder (kept in a global, say) raises when used."""

    __slots__ = ("steps", "n", "open", "external", "thread", "meta", "scalars", "err",
                 "warn", "warn_entries", "refused", "ext", "err_entered", "printopts", "text_read",
                 "handed", "known", "consts", "end_checks", "inline_sums", "opaque",
                 "stale", "input_arrays", "pristine", "converted", "read_only")

    def __init__(self):
        self.steps: list = []
        self.n = 0
        self.open = True
        #: Slots that may share memory with an input or a constant (inputs,
        #: and results of calls that can return views): writing into one
        #: would change the caller's data, which a replay must not do twice.
        self.external: set = set()
        self.thread = threading.get_ident()
        #: slot -> (shape, dtype) of the arrays (not scalars) the trace made:
        #: what the lowering needs to reuse a dead buffer for a result.
        self.meta: dict = {}
        #: slot -> type of the scalars (np.float64, float, ...) it made.
        self.scalars: dict = {}
        #: NumPy's error state and Python's warning machinery at the start:
        #: the function changing them around a call is part of the call.
        self.err = np.geterr()
        self.ext = _extobj()
        #: Whether the function set NumPy's error state (``np.errstate``)
        #: around a call: the entries it set that equal the caller's at the
        #: trace look unchanged, so the replay checks the caller's state
        #: (a guard, added by ``jit`` at the end of the trace).
        self.err_entered = False
        #: NumPy's print options, and whether the function made text of a
        #: staged value (``str``, f-strings, ``np.array2string``): the text
        #: depends on them, so the replay checks them (a guard).
        self.printopts = np.get_printoptions()
        self.text_read = False
        self.warn = _warning_state()
        self.warn_entries = tuple(warnings.filters)  # (the caller's filters, by identity)
        #: Why the trace cannot be replayed (``None`` while it can): from
        #: then on the function runs on the concrete values, unrecorded.
        self.refused = None
        #: The input arrays, and (from the first refusal on) their bits at
        #: that point, before the writes the function may make into them on
        #: the concrete values: a differentiated first call runs the function
        #: again from them (tapestry.jit.reverse._ran_for_real).
        self.input_arrays: list = []
        self.pristine: list = []
        #: id -> (array, staged value or None) of the read-only arrays that
        #: NumPy's conversion (``np.asarray(x)``) handed out: the plain call
        #: gets ``x``'s own array there (``None``: converted to another dtype,
        #: a new array), which jit returns in their place.
        self.handed: dict = {}
        #: (array, its bits when handed) of the writable arrays NumPy's
        #: conversion handed out where the plain call gets the (writable)
        #: value itself: a write into one would have changed the value.
        self.converted: list = []
        #: ids of the arrays the environment guards (jit sets them): a
        #: constant that is one of them, or a view of one, is not tracked by
        #: ``consts`` (a write into it during the trace changes the
        #: environment, which jit sees).
        self.known: set = set()
        #: id -> [array, snapshot, first step, earlier versions] of the other
        #: arrays the steps hold as constants (see :meth:`settle_constants`).
        self.consts: dict = {}
        #: functions called when the function returns: ``None``, or why
        #: the program would replay something else than this trace did
        #: (``parallel_sum`` run as one step: what its ``f`` reads changed
        #: after the step); jit then keeps no program from this trace.
        self.end_checks: list = []
        #: trace ``parallel_sum`` inline, not as one step (set by jit once
        #: an end check failed for the signature)
        self.inline_sums = False
        #: id -> (object, its environment) of the user's functions and
        #: objects the steps hold and the replay calls or converts (a
        #: primitive's forward, ``np.apply_along_axis(f, ...)``'s ``f``, an
        #: object with ``__array__``): see :meth:`_opaque`.
        self.opaque: dict = {}
        #: why a step would read such an object otherwise at replay than it
        #: did in the trace (``None``: it would not)
        self.stale = None
        #: slots that may not be written into (a write raises ValueError, as
        #: NumPy's read-only arrays do), and the slots that may be views of
        #: them: the arguments of a checkpointed function while its forward
        #: runs (:func:`read_only_slots`), which reruns on copies if it writes
        self.read_only: set = set()

    def slot(self):
        self.n += 1
        return self.n - 1

    def input(self, value):
        s = self.slot()
        self.external.add(s)
        if value.__class__ is np.ndarray:
            self.input_arrays.append(value)
        self._note(value, s)
        return Staged(value, self, s)

    def _note(self, value, s):
        if value.__class__ is np.ndarray:
            self.meta[s] = (value.shape, value.dtype)
        else:
            self.scalars[s] = value.__class__

    # --- recording ------------------------------------------------------------
    def call(self, fn, args, kwargs, *, inplace=None, site=True):
        """Run ``fn`` on the concrete values, write it down, and return its
        result with staged values in place of arrays and numbers."""
        if not self.open:
            raise EscapedStagedError(
                "tapestry.jit: a value staged by a jit trace was used after that trace "
                "ended (it escaped through a global, a closure or an attribute). Return "
                "it from the jitted function instead.")
        if self.refused is not None:
            return fn(*self._template(args)[1], **(self._template(kwargs)[1] if kwargs else {}))
        if self.converted:
            self.check_converted()
        if inplace is not None and inplace in self.external:
            return self.refuse(
                f"{_name(fn)} writes into an argument of the jitted function, a "
                "closed-over array or a view of one, in place", fn, args, kwargs)
        err = self._errstate(fn)
        if self.refused is not None:
            return self.call(fn, args, kwargs)
        targs, cargs, ext = self._template(args)
        tkw, ckw, extk = self._template(kwargs) if kwargs else ({}, {}, False)
        if _user_object(fn):
            self._opaque(fn)
        try:
            out = fn(*cargs, **ckw)
        except Exception as e:
            self.steps.append(Step("raises", fn, targs, tkw, None, type(e), user_site(),
                                   err=err))
            raise
        if out.__class__ is str:  # text of the values (np.array2string): a read of them
            for x in instances_in((args, kwargs), Staged, []):
                self.read_text(x)
            return out
        if inplace is not None:
            self.steps.append(Step("call", fn, targs, tkw, None, None, None, inplace, err))
            return out
        s = self.slot()
        self.steps.append(Step("call", fn, targs, tkw, s, err=err))
        if (ext or extk) and not _fresh(fn):  # may be a view of the caller's memory
            self.external.add(s)
        if self.read_only and not _fresh(fn) and any(
                x._slot in self.read_only for x in instances_in((args, kwargs), Staged, [])):
            self.read_only.add(s)  # may be a view of a read-only value
        res = self._wrap(out, s, fn)
        if not _shape_safe(fn, args, kwargs):
            self._shape_guards(res)
        return res

    def check_converted(self):
        """Whether the function wrote into an array NumPy's conversion
        handed out writable (:attr:`converted`), checked before each call:
        the plain call wrote into the value itself, which the call may read
        (a write the function undoes later is found too).  It marks the
        entry (its copy ``None``): jit then runs the function uncompiled."""
        for k, (a, snap) in enumerate(self.converted):
            if snap is not None and not same_bits(a, snap):
                self.converted[k] = (a, None)
                return True
        return False

    def refuse(self, why, fn=None, args=(), kwargs=None):
        """The trace cannot be replayed (``why``): record nothing more, and
        run ``fn`` (when given) and the rest of the function on the concrete
        values, as the plain call does."""
        if self.refused is None:
            self.refused = why
            self.pristine = [(a, a.copy()) for a in self.input_arrays]
        if fn is not None:
            return self.call(fn, args, kwargs)
        return None

    def _errstate(self, fn):
        """The entries of NumPy's error state the function changed (``None``
        if none).  Changed warning filters that turn a warning into an error,
        or a recording of warnings, cannot be replayed: the function may
        catch or read a warning that a replay would not raise."""
        added = ()
        if _warning_state() != self.warn:
            if _warnings_matter(self.warn):
                return self.refuse(
                    f"{_name(fn)} runs under warning filters the function set "
                    "(warnings.catch_warnings with 'error' or record=True), which a "
                    "replay does not reproduce")
            added = _added_filters(self.warn_entries)
            if added is None:
                return self.refuse(
                    f"{_name(fn)} runs under warning filters the function changed "
                    "otherwise than by adding some (warnings.resetwarnings, a filter "
                    "removed), which a replay does not reproduce")
        if _extobj() is not self.ext:
            self.err_entered = True
        e = np.geterr()
        err = {k: v for k, v in e.items() if v != self.err[k]}
        if added:
            # (warnings.simplefilter("ignore") around the call: the replay
            # runs it under the same filters, ahead of the caller's then)
            err["warning_filters"] = added
        return err or None

    def _template(self, x):
        """``(template, concrete, may_alias)`` of an argument structure."""
        c = x.__class__
        if c is Staged:
            if x._rec is not self:
                raise EscapedStagedError(
                    "tapestry.jit: a value staged by another jit trace met this one (a "
                    "staged value kept from an earlier call, or shared between threads). "
                    "Pass it as an argument.")
            return Slot(x._slot), x._value, x._slot in self.external
        if c is tuple or c is list:
            parts = [self._template(v) for v in x]
            return (c(p[0] for p in parts), c(p[1] for p in parts),
                    any(p[2] for p in parts))
        if c is dict:
            parts = {k: self._template(v) for k, v in x.items()}
            return ({k: p[0] for k, p in parts.items()}, {k: p[1] for k, p in parts.items()},
                    any(p[2] for p in parts.values()))
        if c is slice:
            t, v, e = self._template((x.start, x.stop, x.step))
            return slice(*t), slice(*v), e
        if c is np.ndarray:
            self._constant(x)
            return x, x, True  # a constant: may be a view of the caller's data
        if c not in _IMMUTABLE and _user_object(x):
            self._opaque(x)
        return x, x, False

    def _opaque(self, x):
        """The step about to be written holds ``x``, a function or an object
        of the user's, which the replay calls (or converts) again: it reads
        what ``x`` reaches as it is *then*.  Where the function changes that
        later in the trace (a primitive made inside, whose closure it
        rebinds after the call; an object with ``__array__`` whose array it
        replaces), each plain call would start afresh: the trace is
        ``stale`` and jit keeps no program from it.  Walked as jit walks a
        function's environment, at the first step that holds ``x``; checked
        at each later one and at the end (:meth:`stale_objects`)."""
        got = self.opaque.get(id(x))
        if got is not None and got[0] is x:
            if self.stale is None and got[1] is not None:
                why = got[1].changed()
                if why is not None:
                    self.stale = f"{_described(x)}: {why}"
            return
        try:
            env = object_environment(x)
        except Exception as e:  # (reaches a staged value, or too much to guard)
            env = None
            if self.stale is None:
                self.stale = f"{_described(x)}, which cannot be guarded ({type(e).__name__}: {e})"
        self.opaque[id(x)] = (x, env)

    def stale_objects(self):
        """At the end of the trace: ``None``, or why a replay would call or
        convert a function or object of the user's that a step holds on
        something else than the trace did (see :meth:`_opaque`)."""
        opaque, self.opaque = self.opaque, {}
        if self.stale is None:
            for x, env in opaque.values():
                why = env.changed() if env is not None else None
                if why is not None:
                    self.stale = f"{_described(x)}: {why}"
                    break
        if self.stale is None:
            return None
        return (f"a recorded call holds {self.stale} after the call, which the replay "
                "would read as the trace left it")

    def _constant(self, a):
        """Note that the step about to be written holds the array ``a`` (not
        staged: one the function made, or holds from elsewhere) as a
        constant.  The program holds it by reference, and the function may
        write into it later in the trace with plain NumPy (``c[0] = 5``,
        ``c += 1``): keep a snapshot, and a new one (a version) where a
        later step finds its value changed."""
        if id(a) in self.known or id(_root(a)) in self.known:
            return
        got = self.consts.get(id(a))
        if got is None or got[0] is not a:
            self.consts[id(a)] = [a, _snapshot(a), len(self.steps), []]
        elif not _same_bits(a, got[1]):
            got[3].append((got[1], got[2], len(self.steps)))
            got[1], got[2] = _snapshot(a), len(self.steps)

    def settle_constants(self):
        """At the end of the trace, give every step the value its constant
        arrays had when it ran: a constant written after a step read it
        (:meth:`_constant`) is replaced, in the steps of each of its
        versions, by that version's snapshot.  Returns ``(weak reference,
        large)`` for each array replaced: one still alive is held by
        something besides the program (a cache, a container the environment
        walk does not see, the function's result), whose plain call would see
        every call's writes; jit does not replay such a trace, nor one with
        a written constant too large to have kept a copy of (``large``: its
        reference is strong)."""
        consts, self.consts = self.consts, {}
        end = len(self.steps)
        replaced = []
        for a, snap, start, versions in consts.values():
            if versions or not _same_bits(a, snap):
                versions.append((snap, start, end))
                if any(v[0].__class__ is Digest for v in versions):
                    replaced.append((lambda a=a: a, True))  # (no old value to give it)
                    continue
                for snap_k, lo, hi in versions:
                    for st in self.steps[lo:hi]:
                        if st.kind == "call" or st.kind == "raises":
                            st.args = _swapped(st.args, a, snap_k)
                            if st.kwargs:
                                st.kwargs = _swapped(st.kwargs, a, snap_k)
                replaced.append((weakref.ref(a), False))
        return replaced

    def _wrap(self, out, s, fn):
        c = out.__class__
        if c is np.ndarray or isinstance(out, np.generic) or c in (float, int, complex, bool):
            self._note(out, s)
            return Staged(out, self, s)
        if isinstance(out, (tuple, list)):
            items = []
            for k, v in enumerate(out):
                e = self.slot()
                self.steps.append(Step("item", None, (Slot(s), k), None, e))
                if s in self.external:
                    self.external.add(e)
                if s in self.read_only:
                    self.read_only.add(e)
                items.append(self._wrap(v, e, fn))
            if c is tuple or c is list:
                return c(items)
            if hasattr(out, "_fields"):  # a named tuple (EighResult, SlogdetResult)
                return c(*items)
            self.refuse(f"{_name(fn)} returned a {c.__name__}")
            return out
        if out is None or c in (str, np.dtype) or isinstance(out, type):
            return out
        self.refuse(f"{_name(fn)} returned a {c.__name__}, which a replay cannot stage")
        return out

    def _shape_guards(self, res):
        if res.__class__ is Staged:
            v = res._value
            if v.__class__ is np.ndarray:
                self.steps.append(Step("shape", None, (Slot(res._slot),), None, None,
                                       (v.shape, v.dtype), user_site()))
        elif isinstance(res, (tuple, list)):
            for r in res:
                self._shape_guards(r)

    def read_text(self, x):
        """Python made text of ``x``'s value: a guard on the value, and on
        the print options (checked at replay)."""
        self.text_read = True
        return self.guard("pin", x, x._value)

    def layout(self, x, v):
        """``v`` (a copy of ``x``'s array value, pinned) laid out as the value
        is, and a guard on that layout.  NumPy's conversions decide by the
        layout whether to hand back the array or a copy
        (``np.ascontiguousarray``, ``np.asarray(x, order="F")``,
        ``np.require``): they must decide on the copy as on the value, and a
        replay whose argument (or intermediate value) is laid out otherwise
        traces again -- the plain call would copy where the trace handed the
        argument back, or the reverse."""
        a = x._value
        if v.strides != a.strides:
            v = _strided_copy(a, v)
        self.guard("pin", self.call(_layout, (x,), None), _layout(a))
        return v

    def guard(self, kind, x, value):
        """Write down that Python read ``value`` from ``x`` (``kind``, see
        :class:`Step`) and return it."""
        if not self.open:
            raise EscapedStagedError("tapestry.jit: a staged value was read after its "
                                     "trace ended.")
        if self.refused is not None:
            return value
        if kind == "pin":
            value = np.array(value, copy=True)
        self.steps.append(Step(kind, None, (Slot(x._slot),), None, None, value, user_site()))
        return value


def guard_layout(x):
    """A guard on the strides of the staged array ``x``: a decision taken
    on them in the trace (whether ``reshape`` views or copies, which
    decides what an update in place reaches under ``grad`` and ``vmap``)
    holds for a replay whose arguments are laid out alike."""
    rec = x._rec
    if rec.open and rec.refused is None and x._value.__class__ is np.ndarray:
        rec.guard("pin", rec.call(strides_of, (x,), None), strides_of(x._value))


def strides_of(a):
    """``a.strides`` as an array (a pinned value)."""
    return np.array(a.strides, np.int64)


def _layout(a):
    """What NumPy's conversions read of an array's layout besides its shape
    and dtype: its strides and its contiguity, alignment, ownership and
    writability flags (``np.require``'s requirements)."""
    f = a.flags
    return np.array(a.strides + (f.c_contiguous, f.f_contiguous, f.aligned, f.owndata,
                                 f.writeable), np.int64)


def _strided_copy(a, compact):
    """A copy of ``a`` with ``a``'s strides (a buffer spanning its bytes,
    viewed as ``a`` views its own), so that a conversion decides on it as on
    ``a``; ``compact`` where that buffer would be much larger than ``a``."""
    try:
        from numpy.lib.array_utils import byte_bounds
    except ImportError:  # pragma: no cover - NumPy 1
        byte_bounds = np.byte_bounds
    lo, hi = byte_bounds(a)
    if hi - lo > 4 * a.nbytes + 4096:
        return compact
    buf = np.empty(hi - lo + 64, np.uint8)
    start = a.__array_interface__["data"][0]
    shift = (-buf.ctypes.data + start) % 64  # the value's alignment, modulo 64
    out = np.ndarray(a.shape, a.dtype, buffer=buf, offset=shift + start - lo, strides=a.strides)
    out[...] = a
    return out


try:  # NumPy's error state: an object replaced by every np.errstate / np.seterr
    from numpy._core.umath import _extobj_contextvar as _EXTOBJ
    _extobj = _EXTOBJ.get
except ImportError:  # pragma: no cover - another NumPy: compare the values only
    def _extobj():
        return None


#: Constants a step may hold as they are: nothing in them can change.
_IMMUTABLE = frozenset({int, float, complex, bool, str, bytes, type(None), type(Ellipsis),
                        np.float64, np.float32, np.int64, np.int32, np.bool_, np.complex128,
                        np.dtype, np.ufunc, Slot, tuple, list, dict, slice})


def _user_object(x):
    """Whether ``x`` is a function or an object of the user's code (not of
    NumPy, SciPy, tapestry or Python's own), whose state the replay reads."""
    import types
    if isinstance(x, np.ufunc):
        fn = python_of(x)
        return fn is not None and _user_object(fn)
    if isinstance(x, (np.generic, np.dtype, type, types.BuiltinFunctionType,
                      types.ModuleType)):
        return False
    if isinstance(x, types.MethodType):
        return _user_object(x.__func__) or _user_object(x.__self__)
    if isinstance(x, functools.partial):
        return any(_user_object(v) for v in (x.func, *x.args, *(x.keywords or {}).values()))
    module = getattr(x, "__module__", None) if isinstance(x, types.FunctionType) \
        else type(x).__module__
    root = (module or "").partition(".")[0]
    return root not in _NOT_USERS


def python_of(u):
    """The Python function a ufunc made by ``np.frompyfunc`` calls (``None``
    for NumPy's own ufuncs, whose loops are compiled)."""
    if u.ntypes != 1 or set(u.types[0]) - set("O->"):
        return None
    import gc
    for r in gc.get_referents(u):
        if callable(r):
            return r
    return None


_NOT_USERS = frozenset({"numpy", "scipy", "tapestry", "builtins", "operator", "functools",
                        "math", "cmath", "opt_einsum", "numba", "_operator", "_functools"})


def _root(a):
    """The array that owns ``a``'s memory (a view's base, recursively)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


#: Constants larger than this are remembered by a digest of their bytes,
#: not a copy (the trace's memory stays what it was): one written after a
#: step read it cannot be given its old value, and runs uncompiled.
SNAPSHOT_BYTES = 1 << 24


class Digest:
    """What a large constant held (:data:`SNAPSHOT_BYTES`): shape, dtype and
    a BLAKE2 digest of its bytes."""

    __slots__ = ("shape", "dtype", "digest")

    def __init__(self, a):
        self.shape, self.dtype, self.digest = a.shape, a.dtype, _digest(a)


def _digest(a):
    import hashlib
    return hashlib.blake2b(np.ascontiguousarray(a).reshape(-1).view(np.uint8),
                           digest_size=32).digest()


def _snapshot(a):
    """A copy of ``a`` with its memory layout where it has one (C or F), or
    a :class:`Digest` of a large one."""
    if a.nbytes > SNAPSHOT_BYTES and not a.dtype.hasobject:
        return Digest(a)
    return np.array(a, order="K", copy=True, subok=False)


def _same_bits(a, s):
    """Whether ``a`` holds the bits of its snapshot ``s`` (an object array:
    the same objects)."""
    if s.__class__ is Digest:
        return a.shape == s.shape and a.dtype == s.dtype and _digest(a) == s.digest
    return same_bits(a, s)


def _swapped(t, a, b):
    """The argument template ``t`` with the array ``a`` (by identity)
    replaced by ``b``."""
    if t is a:
        return b
    c = t.__class__
    if c is tuple or c is list:
        return c(_swapped(v, a, b) for v in t)
    if c is dict:
        return {k: _swapped(v, a, b) for k, v in t.items()}
    if c is slice:
        return slice(*_swapped((t.start, t.stop, t.step), a, b))
    return t


def instances_in(t, cls, out):
    """Append the instances of ``cls`` in a structure of arguments (tuples,
    lists, dicts, slices) to ``out``: the staged values a call read, the
    slots a recorded step reads."""
    c = t.__class__
    if c is cls:
        out.append(t)
    elif c is tuple or c is list:
        for v in t:
            instances_in(v, cls, out)
    elif c is dict:
        for v in t.values():
            instances_in(v, cls, out)
    elif c is slice:
        instances_in((t.start, t.stop, t.step), cls, out)
    return out


def state_guards(rec):
    """Guards on the state the trace read besides values, to put first in
    its program: NumPy's error state where the function set ``np.errstate``
    (entries it set equal to the caller's look unchanged), the print
    options where it made text of a value."""
    got = []
    if rec.err_entered:
        got.append(Step("state", np.geterr, (), None, None, rec.err))
    if rec.text_read:
        got.append(Step("state", np.get_printoptions, (), None, None, rec.printopts))
    return got


def _warning_state():
    """What decides how a warning is handled: the filter list (its identity,
    replaced by ``catch_warnings``; its length, grown by ``simplefilter``) and
    the functions that show it (replaced by ``record=True``)."""
    return (warnings.filters, len(warnings.filters), warnings.showwarning,
            getattr(warnings, "_showwarnmsg_impl", None))


def _added_filters(entries):
    """The warning filters the function put ahead of the caller's
    ``entries`` (``catch_warnings`` + ``simplefilter("ignore")``), or
    ``None`` where the list is not those entries after the caller's."""
    cur = warnings.filters
    k = len(cur) - len(entries)
    if k < 0 or any(a is not b for a, b in zip(cur[k:], entries)):
        return None
    return tuple(cur[:k])


def _warnings_matter(before):
    """Whether the warning state now differs from ``before`` in a way that can
    change what the function computes: a warning recorded (it may read the
    list) or a new "error" filter (it may catch the exception).  Filters that
    only hide or show warnings change no result."""
    if (warnings.showwarning, getattr(warnings, "_showwarnmsg_impl", None)) != before[2:]:
        return True
    old = set(map(id, before[0]))
    return any(f[0] == "error" and id(f) not in old for f in warnings.filters)


def _name(fn):
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))


def object_environment(x):
    """What a function or object of the user's that a recorded call holds
    reaches (``Recorder._opaque``): :func:`tapestry.jit.env.object_environment`,
    installed here when tapestry.jit is imported (core imports no
    capability; only jit records)."""
    raise RuntimeError("tapestry.jit.env is not imported")  # pragma: no cover


def watched_environment(fn):
    """What ``fn`` reads besides its arguments, walked as jit walks it but
    with arrays watched by identity only (no copies: a checkpoint walks at
    every call; their contents are :func:`rule_watch`'s), or ``None`` where
    it cannot be walked:
    :func:`tapestry.jit.env.watched_environment`, installed here when
    tapestry.jit is imported."""
    return None  # pragma: no cover  (tapestry imports jit)


def rule_watch(rule, also=()):
    """What a derivative rule run after its forward pass reads besides its
    arguments, checked before it runs, or ``None``:
    :func:`tapestry.jit.env.rule_watch`, installed here when tapestry.jit
    is imported."""
    return None  # pragma: no cover  (tapestry imports jit)


def _described(x):
    """A function by its name, an object by its class."""
    if isinstance(x, np.ufunc):
        return f"np.frompyfunc's ufunc {x.__name__!r}"
    if callable(x) and hasattr(x, "__qualname__"):
        return _name(x)
    return f"a {type(x).__qualname__} object"


def _fresh(fn):
    """Whether ``fn`` always returns new memory (never a view of an argument)."""
    return isinstance(fn, np.ufunc) or fn in _OPERATOR_SAFE or fn in _FRESH


def _shape_safe(fn, args, kwargs=None):
    """Whether the result's shape follows from the shapes of the staged
    arguments (no shape guard needed).  A listed function is safe only when
    its staged arguments are all floating data arrays: a staged number or
    integer array among them may be a shape, an axis, a count or indices
    (``np.tile(x, n)``, ``np.sum(x, axis=n)``), and ``np.where(c)`` is
    ``nonzero``."""
    if isinstance(fn, np.ufunc) or fn in _OPERATOR_SAFE:
        return True
    if fn is operator.getitem:
        return _safe_key(args[1])
    u = getattr(fn, "__self__", None)
    if isinstance(u, np.ufunc):  # np.add.reduce, np.multiply.outer, ...
        listed = fn.__name__ in ("reduce", "outer", "accumulate")
    else:
        listed = fn in _SHAPE_SAFE or fn in _METHOD_SAFE
    if not listed or (fn is np.where and len(args) == 1 and not kwargs):
        return False
    return _data_only(args) and (not kwargs or _data_only(tuple(kwargs.values())))


def _data_only(xs):
    """No staged value among ``xs`` (nested in tuples, lists, dicts) but
    floating or complex arrays of at least one dimension."""
    for x in xs:
        c = x.__class__
        if c is Staged:
            v = x._value
            if v.__class__ is not np.ndarray or v.ndim == 0 or v.dtype.kind not in "fc":
                return False
        elif c is tuple or c is list:
            if not _data_only(x):
                return False
        elif c is dict:
            if not _data_only(tuple(x.values())):
                return False
        elif c is slice:
            if not _data_only((x.start, x.stop, x.step)):
                return False
    return True


def _safe_key(key):
    """A key whose result shape follows from shapes: no boolean staged mask,
    no staged slice bounds."""
    if key.__class__ is tuple:
        return all(_safe_key(k) for k in key)
    if key.__class__ is Staged:
        return np.result_type(key._value).kind != "b"
    if key.__class__ is slice:
        return not any(v.__class__ is Staged for v in (key.start, key.stop, key.step))
    if key.__class__ is list:
        return not any(v.__class__ is Staged for v in key)
    return True


def _method(name):
    """``x.<name>(*args)`` as a function of ``x`` (cached: one per name)."""
    f = _METHODS.get(name)
    if f is None:
        def f(x, *args, **kwargs):
            return getattr(x, name)(*args, **kwargs)
        f.__name__ = f.__qualname__ = f"ndarray.{name}"
        _METHODS[name] = f
    return f


_METHODS: dict = {}
_METHOD_SAFE: set = set()
_MUTATING_METHODS = {"fill", "sort", "partition", "resize", "put", "itemset", "setfield",
                     "setflags", "byteswap"}
_SAFE_METHODS = ("astype", "reshape", "transpose", "sum", "mean", "max", "min", "prod",
                 "copy", "ravel", "flatten", "squeeze", "swapaxes", "clip", "cumsum",
                 "cumprod", "dot", "conj", "conjugate", "round", "std", "var", "all",
                 "any", "argmax", "argmin", "argsort", "diagonal", "trace", "take",
                 "repeat", "view", "ptp")
for _n in _SAFE_METHODS:
    _METHOD_SAFE.add(_method(_n))
#: Functions that return new memory: writing into their result is the
#: program's own business (``y = np.empty_like(x); y[:] = ...``).
_FRESH = {np.zeros_like, np.ones_like, np.empty_like, np.full_like, np.copy,
          _method("copy")}


class Staged(ArrayMethods):
    """A value inside ``tapestry.jit``'s trace: a concrete value and the
    slot of the recorder that writes down what is done with it."""

    __slots__ = ("_value", "_rec", "_slot", "__weakref__")
    __array_priority__ = 50.0  # below Var and Batched: they handle mixed calls

    def __init__(self, value, rec, slot):
        self._value = value
        self._rec = rec
        self._slot = slot

    def guard_layout(self):
        """:func:`guard_layout` on this value (for the engine's view
        bookkeeping in ``core/var.py``, which does not import this module)."""
        guard_layout(self)

    # --- metadata: static (shapes are part of the cache key or guarded) -----
    shape = property(lambda self: np.shape(self._value))
    dtype = property(lambda self: np.result_type(self._value))
    ndim = property(lambda self: np.ndim(self._value))
    size = property(lambda self: np.size(self._value))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def __len__(self):
        return len(self._value)

    # ``str``, ``repr``, f-strings and ``hash`` are reads of the value by
    # Python (the text or the dict slot depends on it): guards, as ``float``.
    def __repr__(self):
        if not self._rec.open:
            return f"Staged(shape={self.shape}, dtype={self.dtype}, trace ended)"
        self._rec.read_text(self)
        return repr(self._value)

    def __str__(self):
        if self._rec.open:  # (after the trace: the text of the value it had, as
            self._rec.read_text(self)  # a log record kept from the trace formats it)
        return str(self._value)

    def __hash__(self):
        """Like the value's: an array is unhashable, a number hashes by value
        (``{1: a}.get(n)``, ``n in {1, 2}``), which is a read of it."""
        v = self._value
        if v.__class__ is np.ndarray:
            raise TypeError("unhashable type: 'numpy.ndarray'")
        self._rec.guard("pin", self, v)
        return hash(v)

    # --- reads by Python: guards --------------------------------------------
    def _read(self, kind, convert):
        """``convert(value)`` written down as a guard of ``kind``.  Where the
        conversion raises (``int(inf)``, ``int(nan)``), the raise is a read of
        the value too: a function that catches it (``try: k = int(s) except
        OverflowError:``) takes another branch for another value, so the
        value is pinned before the error goes on.  (A value of more than one
        element raises for its shape alone, which is guarded already.)"""
        try:
            v = convert(self._value)
        except Exception:
            if np.size(self._value) == 1:
                self._rec.guard("pin", self, self._value)
            raise
        return self._rec.guard(kind, self, v)

    def __bool__(self):
        return self._read("bool", bool)

    def __int__(self):
        return self._read("int", int)

    def __index__(self):
        return self._read("index", operator.index)

    def __float__(self):
        return self._read("float", float)

    def __complex__(self):
        return self._read("pin", complex).item()

    def item(self, *args):
        self._rec.guard("pin", self, self._value)
        return np.asarray(self._value).item(*args)

    def tolist(self):
        self._rec.guard("pin", self, self._value)
        return np.asarray(self._value).tolist()

    def __format__(self, spec):
        if self._rec.open:
            self._rec.read_text(self)
        return format(self._value, spec)

    def __array__(self, dtype=None, copy=None):
        """NumPy converting the value (``np.asarray``, a library call): the
        value is pinned (a guard), and a copy handed over with the value's
        flags (writable, owning its memory or a view), as NumPy would hand
        the value itself: code may read them (``np.require``,
        ``a.flags.writeable``).  A write into it, which the plain call makes
        into the value, is found (:meth:`Recorder.check_converted`, and at
        the end of the trace): jit then runs the function uncompiled."""
        if self._rec.refused is not None and self._rec.open:  # as the plain call
            v = self._value
            return np.asarray(v, dtype=dtype) if copy is not True else np.array(v, dtype)
        pin = v = self._rec.guard("pin", self, self._value)  # a copy
        if self._value.__class__ is np.ndarray and self._value.ndim:
            v = self._rec.layout(self, v)
        # (np.asarray of an array is the array itself; of a number, a new one)
        same = self._value.__class__ is np.ndarray and (dtype is None or
                                                        np.dtype(dtype) == v.dtype)
        if dtype is not None and np.dtype(dtype) != v.dtype:
            v = v.astype(dtype)
        elif copy:  # a new array, laid out as NumPy's copy (not the pinned value)
            v = np.array(v, copy=True)
        if not copy:
            if v is pin:  # (the guard's value stays as it was read)
                v = pin.copy(order="K")
            if same and not self._value.flags.owndata and v.flags.owndata:
                v = v[...]  # (a view, as the value: np.require(x, "O") copies)
            if same and (not self._value.flags.writeable or self._slot in self._rec.read_only):
                v.flags.writeable = False  # (as the value: np.require(x, "W") copies)
            elif same:
                # writable, as the value the plain call gets (code may ask:
                # a.flags.writeable); a write into it is found at the end
                self._rec.converted.append((v, v.copy()))
            self._rec.handed[id(v)] = (v, self if same else None)
            root = v
            while isinstance(root.base, np.ndarray):
                root = root.base
            if root is not v:  # (a strided copy views its buffer: a view of v views it too)
                self._rec.handed[id(root)] = (root, None)
        return v

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __contains__(self, v):
        return bool(np.any(self == v))

    def __copy__(self):
        return np.copy(self)

    def __deepcopy__(self, memo):
        return np.copy(self)

    def __reduce__(self):
        raise TypeError("tapestry.jit: a staged value cannot be pickled (it exists only "
                        "while jit traces the function).")

    # --- NumPy dispatch ---------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if _foreign(inputs) or (kwargs and _foreign(kwargs.values())):
            return NotImplemented
        for x in inputs:  # a sparse gradient handles the call (on staged operands)
            if hasattr(x.__class__, "scatter_add_into"):
                return NotImplemented
        fn = ufunc if method == "__call__" else getattr(ufunc, method)
        rec = self._rec
        out = kwargs.get("out")
        if method == "at":
            return _write(rec, fn, inputs, kwargs, inputs[0])
        if out is not None:
            outs = out if isinstance(out, tuple) else (out,)
            if len(outs) == 1 and outs[0].__class__ is Staged:
                return _write(rec, fn, inputs, kwargs, outs[0], returns=outs[0])
            if any(o is not None for o in outs):
                return rec.refuse(f"np.{ufunc.__name__}(..., out=...) writes a staged value "
                                  "into an array in place", fn, inputs, kwargs)
        return rec.call(fn, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        for t in types:
            if t is not Staged and not issubclass(t, np.ndarray):
                return NotImplemented
        if func in _STATIC_QUERIES:
            return func(*_concrete(args), **_concrete(kwargs))
        if func in _MUTATING:
            return _write(self._rec, func, args, kwargs, args[0])
        if func in _WRITES_FILES:
            return self._rec.refuse(f"{_name(func)} writes a staged value to a file, which "
                                    "a replay would not redo", func, args, kwargs)
        out = kwargs.get("out") if kwargs else None
        if out is not None:  # np.clip(x, 0, 1, out=x), np.cumsum(x, out=y): a write
            outs = out if isinstance(out, tuple) else (out,)
            if len(outs) == 1:
                return _write(self._rec, func, args, kwargs, outs[0], returns=outs[0])
            return self._rec.refuse(f"{_name(func)}(..., out=...) writes into several arrays",
                                    func, args, kwargs)
        if func is np.nan_to_num and not _copies(args, kwargs):
            return _write(self._rec, func, args, kwargs, args[0], returns=args[0])
        return self._rec.call(func, args, kwargs)

    # --- operators --------------------------------------------------------
    def __add__(self, o): return _binary(operator.add, self, o)
    def __radd__(self, o): return _binary(operator.add, o, self)
    def __sub__(self, o): return _binary(operator.sub, self, o)
    def __rsub__(self, o): return _binary(operator.sub, o, self)
    def __mul__(self, o): return _binary(operator.mul, self, o)
    def __rmul__(self, o): return _binary(operator.mul, o, self)
    def __truediv__(self, o): return _binary(operator.truediv, self, o)
    def __rtruediv__(self, o): return _binary(operator.truediv, o, self)
    def __pow__(self, o): return _binary(operator.pow, self, o)
    def __rpow__(self, o): return _binary(operator.pow, o, self)
    def __matmul__(self, o): return _binary(operator.matmul, self, o)
    def __rmatmul__(self, o): return _binary(operator.matmul, o, self)
    def __floordiv__(self, o): return _binary(operator.floordiv, self, o)
    def __rfloordiv__(self, o): return _binary(operator.floordiv, o, self)
    def __mod__(self, o): return _binary(operator.mod, self, o)
    def __rmod__(self, o): return _binary(operator.mod, o, self)
    # (Python's own divmod: Python numbers stay Python numbers, as in the plain call)
    def __divmod__(self, o): return _binary(divmod, self, o)
    def __rdivmod__(self, o): return _binary(divmod, o, self)
    def __and__(self, o): return _binary(operator.and_, self, o)
    def __rand__(self, o): return _binary(operator.and_, o, self)
    def __or__(self, o): return _binary(operator.or_, self, o)
    def __ror__(self, o): return _binary(operator.or_, o, self)
    def __xor__(self, o): return _binary(operator.xor, self, o)
    def __rxor__(self, o): return _binary(operator.xor, o, self)
    def __lt__(self, o): return _binary(operator.lt, self, o)
    def __le__(self, o): return _binary(operator.le, self, o)
    def __gt__(self, o): return _binary(operator.gt, self, o)
    def __ge__(self, o): return _binary(operator.ge, self, o)
    def __eq__(self, o): return _binary(operator.eq, self, o)
    def __ne__(self, o): return _binary(operator.ne, self, o)
    def __neg__(self): return self._rec.call(operator.neg, (self,), None)
    def __pos__(self): return self._rec.call(operator.pos, (self,), None)
    def __abs__(self): return self._rec.call(operator.abs, (self,), None)
    def __invert__(self): return self._rec.call(operator.invert, (self,), None)

    def __round__(self, ndigits=None):
        v = self._rec.guard("pin", self, self._value)
        if self._value.__class__ is not np.ndarray:  # a number: round(2.5, 1) is a float
            v = self._value
        else:
            v = v[()]
        return round(v) if ndigits is None else round(v, ndigits)

    def conjugate(self):
        """The value's own ``conjugate`` (a Python number's gives a Python number)."""
        return self._rec.call(_method("conjugate"), (self,), None)

    # ``x += y`` on a staged value: in place where the program owns the memory
    # (as NumPy does for arrays; a scalar value rebinds, as in Python).
    def __iadd__(self, o): return _inplace(operator.iadd, operator.add, self, o)
    def __isub__(self, o): return _inplace(operator.isub, operator.sub, self, o)
    def __imul__(self, o): return _inplace(operator.imul, operator.mul, self, o)
    def __itruediv__(self, o): return _inplace(operator.itruediv, operator.truediv, self, o)
    def __ipow__(self, o): return _inplace(operator.ipow, operator.pow, self, o)
    # (without these Python ran ``y = y @ m``: a view of y kept the old values)
    def __imatmul__(self, o): return _inplace(operator.imatmul, operator.matmul, self, o)
    def __ifloordiv__(self, o): return _inplace(operator.ifloordiv, operator.floordiv, self, o)
    def __imod__(self, o): return _inplace(operator.imod, operator.mod, self, o)
    def __iand__(self, o): return _inplace(operator.iand, operator.and_, self, o)
    def __ior__(self, o): return _inplace(operator.ior, operator.or_, self, o)
    def __ixor__(self, o): return _inplace(operator.ixor, operator.xor, self, o)
    def __ilshift__(self, o): return _inplace(operator.ilshift, operator.lshift, self, o)
    def __irshift__(self, o): return _inplace(operator.irshift, operator.rshift, self, o)

    def __getitem__(self, key):
        if _foreign((key,) if key.__class__ is not tuple else key):
            # a key of a higher level (a per-item index inside vmap, a traced
            # one): that level's indexing, with this array as its constant
            # (Python does not reflect ``[]``: NotImplemented would be the value)
            return getitem(self, key)
        return self._rec.call(operator.getitem, (self, key), None)

    def __setitem__(self, key, value):
        _write(self._rec, operator.setitem, (self, key, value), None, self)

    # --- methods (those of ArrayMethods go through NumPy's functions) -------
    def reshape(self, *shape, **k):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, np.ndarray)):
            shape = shape[0]
        return np.reshape(self, shape, **k)

    def astype(self, dtype, *a, **k):
        if self._value.__class__ in (int, float, complex, bool):
            # a Python number (an argument) has no astype: the library's
            # ``v.astype(dt) if hasattr(v, "astype") else np.asarray(v, dt)``
            # gets the conversion of the number, as a step of the program
            return self._rec.call(np.asarray, (self,), {"dtype": dtype})
        return self._rec.call(_method("astype"), (self, dtype) + a, k)

    def copy(self, *a, **k):
        return self._rec.call(_method("copy"), (self,) + a, k)

    def view(self, *a, **k):
        return self._rec.call(_method("view"), (self,) + a, k)

    def fill(self, value):
        _write(self._rec, _method("fill"), (self, value), None, self)

    def sort(self, *a, **k):
        _write(self._rec, _method("sort"), (self,) + a, k, self)

    def __getattr__(self, name):
        """Other ndarray methods, recorded as calls; other attributes
        (``flags``, ``strides``, ``ctypes``) are refused."""
        if name.startswith("__") or name in _MUTATING_METHODS:
            raise AttributeError(name)
        if name in _WRITES_FILES_METHODS:
            self._rec.refuse(f"ndarray.{name} writes a staged value to a file, which a "
                             "replay would not redo")
            return getattr(self._value, name)
        attr = getattr(np.ndarray, name, None)
        if attr is None:
            raise AttributeError(f"'Staged' object (an array inside tapestry.jit) has no "
                                 f"attribute {name!r}")
        if callable(attr):
            f = _method(name)
            return lambda *a, **k: self._rec.call(f, (self,) + a, k)
        self._rec.refuse(f"reading .{name} of an array inside jit (its memory layout "
                         "or buffer, which a replay does not guard)")
        return getattr(self._value, name)


#: Values of the levels above jit: a call meeting one is theirs to handle
#: (``core.batched`` adds ``Batched`` and ``Unbatched``).
HIGHER = {Var}
_HIGHER = HIGHER


def _foreign(xs):
    """Whether a value of a higher level (a ``Var``, a ``Batched``) is among ``xs``."""
    for x in xs:
        if x.__class__ in _HIGHER:
            return True
    return False


def _binary(op, a, b):
    other = (b if a.__class__ is Staged else a).__class__
    if other in _HIGHER or hasattr(other, "scatter_add_into"):
        return NotImplemented  # a higher level's value, or a sparse gradient: theirs
    if op is operator.mul and (other is list or other is tuple):
        n = b if a.__class__ is other else a
        if isinstance(n._value, (int, np.integer)):
            # ``[x] * k`` with ``k`` an int (a NumPy one too): Python repeats the sequence,
            # reading ``k`` (a guard); as one recorded step, the list's length
            # would stay the trace's
            k = operator.index(n)
            return op(a, k) if n is b else op(k, b)
    rec = a._rec if a.__class__ is Staged else b._rec
    res = rec.call(op, (a, b), None)
    if op is operator.pow and res.__class__ is Staged and _pow_type_varies(a, b):
        # Python's ``**`` is the one operator whose result type on Python
        # numbers depends on their values (``2 ** -1`` is a float, ``(-8.0) **
        # 0.5`` a complex): the type is guarded, as the program (and code
        # reading ``.dtype``) is specialized on the trace's
        operator.index(rec.call(number_kind, (res,), None))
    return res


_PY_NUMBERS = (int, float, complex)


def _pow_type_varies(a, b):
    """Whether ``a ** b`` on Python numbers can change type with the staged
    values: an int to an int power (a float for a negative one), a number
    that may be negative to a power that may be fractional (a complex)."""
    av = a._value if a.__class__ is Staged else a
    bv = b._value if b.__class__ is Staged else b
    ta = int if av.__class__ is bool else av.__class__
    tb = int if bv.__class__ is bool else bv.__class__
    if ta not in (int, float) or tb not in (int, float):
        return False
    if tb is int:
        return ta is int and b.__class__ is Staged
    return (a.__class__ is Staged or av < 0) and (b.__class__ is Staged
                                                  or not float(bv).is_integer())


def number_kind(v):
    """0, 1 or 2 for a Python int, float or complex ``v`` (a guard on the
    type of ``a ** b``)."""
    return _PY_NUMBERS.index(v.__class__)


def _inplace(iop, op, x, o):
    """``x += o``: NumPy writes into an array (0-d included: a name bound to
    the same array sees the change); a scalar rebinds.  A write into an
    argument or a view of one raises :class:`Unstageable` (``_write``): the
    plain call changes the caller's array, which a replay must not skip."""
    if x._value.__class__ is np.ndarray:
        _write(x._rec, iop, (x, o), None, x)
        return x
    return _binary(op, x, o)


def _copies(args, kwargs):
    """``np.nan_to_num``'s ``copy`` argument (False: it writes into ``x``)."""
    return bool(kwargs.get("copy", args[1] if len(args) > 1 else True))


def _write(rec, fn, args, kwargs, target, returns=None):
    """Record ``fn`` writing into ``target``; a plain array target refuses,
    a read-only one (:func:`read_only_slots`) raises as NumPy does."""
    if rec.read_only and target.__class__ is Staged and target._slot in rec.read_only:
        raise ValueError(f"tapestry.jit: {_name(fn)}: assignment destination is read-only "
                         "(an argument of a checkpointed function, or a view of one)")
    if target.__class__ is not Staged:
        rec.refuse(f"{_name(fn)} writes a staged value into a plain array in place",
                   fn, args, kwargs)
        return returns
    rec.call(fn, args, kwargs, inplace=target._slot)
    return returns


@contextlib.contextmanager
def read_only_slots(values):
    """While the block runs, the staged arrays among ``values`` (and the
    views made of them) are read-only: a write into one raises ValueError,
    as for a read-only NumPy array (``tapestry.checkpoint``'s forward: its
    function writing into an argument must not change the value its
    recompute starts from; it reruns on copies instead)."""
    slots = [(v._rec, v._slot) for v in values
             if v.__class__ is Staged and v._value.__class__ is np.ndarray]
    before = [(rec, set(rec.read_only)) for rec in {rec for rec, _ in slots}]
    for rec, s in slots:
        rec.read_only.add(s)
    try:
        yield
    finally:
        for rec, kept in before:
            rec.read_only = kept


def staged_recorder(args, kwargs=None):
    """The recorder of a staged value among ``args`` (or inside a list or
    tuple among them, or among ``kwargs``' values), or ``None``."""
    for a in args:
        c = a.__class__
        if c is Staged:
            return a._rec
        if c is tuple or c is list:
            for b in a:
                if b.__class__ is Staged:
                    return b._rec
    if kwargs:
        return staged_recorder(tuple(kwargs.values()))
    return None


def plain_call(fun, *args, **kwargs):
    """``fun(*args, **kwargs)`` as the plain call; inside ``jit`` (a staged
    value among the arguments) one step of the program, run on the values.

    For functions NumPy's dispatch does not reach (SciPy's, Python wrappers
    that call ``np.asarray``): called on staged values they would pin them
    (a re-trace for every new value); a rule that took its traced path
    instead would compute another formula than the plain call."""
    rec = staged_recorder(args, kwargs)
    if rec is not None:
        return rec.call(fun, args, kwargs)
    return fun(*args, **kwargs)


def _concrete(x):
    return values_of(x, Staged)
