"""What a worker does with one chunk: the functions shipped to executors.

A chunk task is a :class:`Task`: the user's ``f``, the chunk's items (a list
of item pytrees, or one slice when ``batched``), the shared arguments as
plain arrays, and the positions of the leaves of ``(chunk, shared)`` to
differentiate.  Each function opens its own tape in the worker's thread
(Stan's nested reverse sweep on a child tape), so workers share nothing
mutable.  Failures come back as :class:`~.faults.Failure` values, never as
raised exceptions, so the caller can name the item.
"""
from __future__ import annotations

import numpy as np

from ..core import rng
from ..core.batched import Batched
from ..core.backward import JointRule, backward_sweep
from ..core.forward import forward_sweep
from ..core.primitive import record
from ..core.pytree import tree_flatten
from ..core.tape import open_tape
from ..core.staged import Staged
from ..core.var import Var, new_leaf
from .faults import BadValue, Failure
from .vectorized import Vectorized


class Task:
    """One chunk's work order (picklable: all plain data plus ``f``)."""

    __slots__ = ("f", "start", "chunk", "shared", "active", "batched", "n_chunk", "columns")

    def __init__(self, f, start, chunk, shared, active, batched, n_chunk=None, columns=None):
        self.f, self.start, self.chunk, self.shared = f, start, chunk, shared
        self.active, self.batched = active, batched
        #: leaves of ``chunk`` (``active`` positions from here on are shared
        #: arguments'); ``None``: not counted
        self.n_chunk = n_chunk
        #: the chunk's items stacked leaf by leaf (tapestry.jit.items), or None
        self.columns = columns

    def __getstate__(self):
        return (self.f, self.start, self.chunk, self.shared, self.active, self.batched,
                self.n_chunk, self.columns)

    def __setstate__(self, s):
        (self.f, self.start, self.chunk, self.shared, self.active, self.batched,
         self.n_chunk, self.columns) = s

    def label(self, i=None):
        if self.batched:
            return f"{self.start}..{self.start + _length(self.chunk) - 1}"
        return self.start + i


def task_span(t):
    """The ``range`` of items a task (or a backward job holding one) covers."""
    if type(t) is tuple:
        t = t[0]
    if type(t) is KeptChunk:
        return t.span
    return range(t.start, t.start + _length(t.chunk))


def _length(chunk):
    if isinstance(chunk, list):
        return len(chunk)
    leaves = tree_flatten(chunk)[0]
    return len(leaves[0]) if leaves else 0


def _trace(task, tape):
    """Put the active leaves of ``(chunk, shared)`` on ``tape``; return the
    traced chunk, traced shared args, the leaves' tape positions and their
    plain values (what the gradients must look like)."""
    n = task.n_chunk
    if n is not None and task.active and task.active[0] >= n and task.batched \
            and (not isinstance(task.chunk, list) or task.f.__class__ is Vectorized):
        # only shared arguments are active, and the chunk is slices made for
        # this task, or a list that vectorize=True stacks into new arrays
        # (f never sees the caller's items): it goes to f as it is (not
        # flattened and rebuilt); so do shared arguments that are arrays
        # themselves (the common case)
        shared = task.shared
        flat = shared.__class__ is tuple and all(x.__class__ is np.ndarray for x in shared)
        leaves, td = (list(shared), None) if flat else tree_flatten(shared)
        positions, values = [], []
        for k in task.active:
            k -= n
            values.append(leaves[k])
            leaves[k] = new_leaf(tape, leaves[k])
            positions.append(leaves[k]._index)
        return task.chunk, tuple(leaves) if flat else td.unflatten(leaves), positions, values
    leaves, td = tree_flatten((task.chunk, task.shared))
    positions, values = [], []
    for k in task.active:
        values.append(leaves[k])
        leaves[k] = new_leaf(tape, leaves[k])
        positions.append(leaves[k]._index)
    chunk, shared = td.unflatten(leaves)
    return chunk, shared, positions, values


class _Failed(Exception):
    """Carries a :class:`Failure` out of the per-item loop."""


def _calls(task, chunk, shared, check=None):
    """The outputs of ``f`` on each item of the chunk (or once, batched);
    raises :class:`_Failed` naming the item whose call raised."""
    f = task.f
    if task.batched:
        return [_call(task, None, f, chunk, shared, check)]
    return [_call(task, i, f, item, shared, check) for i, item in enumerate(chunk)]


def _call(task, i, f, item, shared, check):
    """``f(item, *shared)``; a failure names item ``i`` of ``task`` (its
    label is worked out only then: for a chunk it flattens the chunk)."""
    try:
        out = f(item, *shared)
        if check is not None:
            check(out)
        return out
    except BadValue as e:
        raise _Failed(Failure(task.label(i), e, None)) from None
    except (Exception, SystemExit) as e:  # sys.exit() in f would end a Dask worker
        raise _Failed(Failure(task.label(i), e)) from None


def _in_order_sum(values):
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


def _grads(cts, positions, leaves_like):
    out = []
    for p, x in zip(positions, leaves_like):
        c = cts[p]
        if type(c) is np.ndarray and type(x) is np.ndarray and c.dtype == x.dtype \
                and c.shape == x.shape:  # the common case, without the checks below
            out.append(c)
            continue
        if type(c) is np.float64 and type(x) is np.float64:  # a scalar's: what the
            out.append(np.asarray(c, dtype=np.float64).reshape(()))  # general case makes
            continue
        if type(c) is np.ndarray or isinstance(c, np.generic):
            dt = np.result_type(x)
            if c.dtype.kind == "c" and dt.kind != "c":
                c = c.real  # a real leaf's cotangent is the real part (docs/complex.md)
            if c.dtype != dt or np.shape(c) != np.shape(x) or type(c) is not np.ndarray:
                c = np.asarray(c, dtype=dt).reshape(np.shape(x))
        out.append(c)
    return out


def grads_like(cts, like):
    """Gradients ``cts`` cast as the leaves ``like`` they are for (``_grads``
    with one cotangent per leaf, in order): how a chunk's gradients leave it."""
    return _grads(cts, range(len(like)), like)


# --- parallel_sum ---------------------------------------------------------------------
def _span_label(span):
    """The item (an int) or items ("4..7") of a chunk, for a Failure."""
    return span.start if len(span) == 1 else f"{span.start}..{span.stop - 1}"


def sum_chunk(task):
    """The chunk's partial sum and, if any leaf is active, its gradient
    from one reverse sweep: ``(value, [grad per active leaf])`` (and, for
    a complex sum, a third entry: the gradients for the cotangent 1j); a
    :class:`Failure` naming the item or chunk if any step raises."""
    if task.f.__class__ is _jit_class():  # no tape: one jitted value_and_grad per item
        from ..jit.items import sum_chunk as jitted_items
        r = jitted_items(task, grads_like)
        if r is not None:
            return r
    try:
        if not task.active:
            return _in_order_sum(_calls(task, task.chunk, task.shared, _check_scalar)), []
        with open_tape() as tape:
            chunk, shared, positions, values = _trace(task, tape)
            if task.f.__class__ is Vectorized and task.f.reduce:
                each = _call(task, None, task.f.values, chunk, shared, None)
                direct = _sum_seed(each, tape)
                if direct is not None:  # the sweep starts at the values
                    return direct[1], _grads(backward_sweep(tape, each._index, direct[0]),
                                             positions, values)
                total = np.sum(each)  # (what f.__call__ returns)
            else:
                total = _in_order_sum(_calls(task, chunk, shared, _check_scalar))
    except _Failed as e:
        return e.args[0]
    except Exception as e:  # adding the items' values up
        return Failure(_span_label(task_span(task)), e, "summing f's values raised")
    try:
        if total.__class__ is not Var or total._tape is not tape:
            return total, _grads([None] * len(tape.nodes), positions, values)
        value = total._value
        dt = value.dtype if value.__class__ in _NUMPY_VALUES else np.result_type(value)
        if dt.kind != "c":
            return value, _grads(backward_sweep(tape, total._index, np.ones((), dt)),
                                 positions, values)
        # A complex sum: its VJP is real-linear in the cotangent g, so the
        # gradients for g = 1 and g = 1j give every other (see reduce.py).
        one = backward_sweep(tape, total._index, np.ones((), dt), release=False)
        one = _grads(one, positions, values)
        return value, one, _grads(backward_sweep(tape, total._index, np.full((), 1j, dt)),
                                  positions, values)
    except Exception as e:
        return Failure(_span_label(task_span(task)), e, "the reverse sweep through f raised")


_NUMPY_VALUES = frozenset({np.ndarray, np.float64, np.float32, np.complex128, np.complex64})


def _sum_seed(each, tape):
    """``(cotangent, value)`` of ``np.sum(each)`` for the seed 1, where
    ``each`` is a float vector traced on ``tape`` (``vectorize=True``: the
    chunk's per-item values), else ``None``: the sum node's own forward and
    rule, called as the reverse sweep would call them, without recording
    the node and sweeping it (~8 us a chunk).  A sweep seeded at ``each``
    with this cotangent is the sweep from the sum, bit for bit."""
    if each.__class__ is not Var or each._tape is not tape:
        return None
    a = each._value
    if a.__class__ is not np.ndarray or a.ndim != 1 or a.dtype.kind != "f":
        return None
    if not _SUM:
        from ..ops.reductions import _sum
        _SUM.append((_sum.fun, _sum._rules_of((0,))[0]))
    fun, rule = _SUM[0]
    value = fun(a, None, False)
    if value.__class__ not in _NUMPY_VALUES:
        return None
    return rule(np.ones((), value.dtype), value, a, None, False), value


#: The ``np.sum`` primitive's forward and rule (imported on first use).
_SUM: list = []


def _jit_class():
    """``tapestry.jit`` (imported on first use: jit imports this module)."""
    if not _JIT:
        from ..jit.api import jit
        _JIT.append(jit)
    return _JIT[0]


_JIT: list = []


def _check_scalar(v):
    """parallel_sum adds f's values, so each must be one number."""
    x = v
    while x.__class__ is Var:
        x = x._value
    if isinstance(x, (int, float, complex)) and not isinstance(x, bool):
        return
    if isinstance(x, (np.ndarray, np.generic, Batched, Staged)) and x.dtype.kind in "iufc" \
            and x.shape == ():  # a batched value under vmap: one number per item
        return
    raise BadValue(f"f returned {_describe(x)}; parallel_sum adds f's values, so f must "
                   f"return one number (a Python or NumPy int, float or complex, or a 0-d "
                   f"numeric array){_hint(x)}.")


def _describe(x):
    if x is None:
        return "None"
    if isinstance(x, np.generic):
        return f"a NumPy {x.dtype} scalar ({x!r})"
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} and dtype {x.dtype}"
    text = repr(x)
    return f"a {type(x).__name__} ({text if len(text) < 40 else text[:37] + '...'})"


def _hint(x):
    if x is None:
        return ": does f end without a return statement?"
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if isinstance(x, bool) or kind == "b":
        return ("; convert booleans with float(...) or .astype(float) (NumPy adds "
                "booleans as a logical or)")
    if isinstance(x, (list, tuple, dict)) or (isinstance(x, np.ndarray) and x.ndim):
        return "; use parallel_map for array or pytree outputs, or np.sum(...) inside f"
    return ""


# --- parallel_map: forward ------------------------------------------------------------
def map_chunk_values(task):
    """Outputs of the chunk, no tape (stateless): a list of output pytrees;
    when the chunk will be recomputed for its gradient, ``(outputs, random
    state before the chunk)`` so the recompute can replay it."""
    snapshot = rng.capture((task.chunk, task.shared)) if task.active else None
    try:
        outs = _calls(task, task.chunk, task.shared)
    except _Failed as e:
        return e.args[0]
    return (outs, snapshot) if task.active else outs


class KeptChunk:
    """A chunk's child tape kept alive for a later reverse sweep (threads),
    or a tangent sweep (forward mode)."""

    __slots__ = ("tape", "join", "positions", "leaves_like", "span", "outputs")

    def pullback(self, out_cts):
        """Cotangents of the active leaves given the outputs' cotangents
        (a list, ``None`` for zero); a :class:`Failure` if the sweep raises."""
        try:
            cts = backward_sweep(self.tape, self.join, list(out_cts), release=False)
            return _grads(cts, self.positions, self.leaves_like)
        except Exception as e:
            return Failure(_span_label(self.span), e, "the reverse sweep through f raised")

    def push(self, tangents, batch=None):
        """Tangents of the outputs' leaves (a flat list, ``None`` for zero)
        given the active leaves' tangents (with a leading axis of length
        ``batch``, if given): one forward sweep over the tape, up to the
        join node (which only gathers the outputs)."""
        ts = [None] * self.join
        for p, t in zip(self.positions, tangents):
            ts[p] = t
        try:
            forward_sweep(self.tape.nodes[:self.join], ts, batch=batch)
        except Exception as e:
            return Failure(_span_label(self.span), e, "the tangent sweep through f raised")
        return [None if i is None else ts[i] for i in self.outputs]


def map_chunk_keep(task, own=False):
    """Outputs of the chunk traced on a child tape that is kept:
    ``(output pytrees (plain), KeptChunk)``.  ``own``: the enclosing trace
    outlives its call (``tp.vjp``), so the chunk's tape copies the caller's
    arrays its rules read (``Tape.own_constant``), as that trace does: a
    closed-over ``W`` updated in place before the pullback must not move
    the chunk's point."""
    with open_tape() as tape:
        if own:
            tape.owned = {}
        chunk, shared, positions, values = _trace(task, tape)
        try:
            outs = _calls(task, chunk, shared)
        except _Failed as e:
            return e.args[0]
        join = _join(tape, outs)  # recorded before the tape closes
    kept = KeptChunk()
    kept.tape, kept.positions, kept.leaves_like = tape, positions, values
    kept.join, kept.span = join, task_span(task)
    kept.outputs = [x._index if x.__class__ is Var and x._tape is tape else None
                    for o in outs for x in tree_flatten(o)[0]]
    plain = [tree_flatten(o)[1].unflatten([_lower(x, tape) for x in tree_flatten(o)[0]])
             for o in outs]
    return plain, kept


def map_chunk_keep_owning(task):
    """:func:`map_chunk_keep` for an enclosing trace that is kept."""
    return map_chunk_keep(task, own=True)


def _join(tape, outs):
    """Append one node whose parents are all traced output leaves, so one
    sweep seeded there with the list of output cotangents reaches them all."""
    parents, take, k = [], [], 0
    for o in outs:
        for x in tree_flatten(o)[0]:
            if x.__class__ is Var and x._tape is tape:
                parents.append(x._index)
                take.append(k)
            k += 1

    def join_pullback(g, ans):
        return [g[k] for k in take]
    record(tape, None, parents, JointRule(join_pullback), (), {})
    return len(tape.nodes) - 1


def _lower(x, tape):
    return x._value if x.__class__ is Var and x._tape is tape else x


# --- parallel_map: backward by recomputation (processes, Dask) ---------------------------
def map_chunk_pullback(args):
    """Recompute the chunk's forward on a fresh tape and pull ``out_cts``
    back: stateless, so a lost task can simply run again.  The random
    state the forward saw is replayed (:mod:`tapestry.core.rng`)."""
    task, out_cts, snapshot = args
    with rng.replay(snapshot, (task.chunk, task.shared)):
        r = map_chunk_keep(task)
    if isinstance(r, Failure):
        return r
    return r[1].pullback(out_cts)


def map_chunk_jvp(args):
    """Forward mode by recomputation (processes, Dask): the chunk's forward
    on a fresh tape (its random state replayed), then one tangent sweep:
    the tangents of its outputs' leaves, flat (``None`` for zero)."""
    task, tangents, snapshot, batch = args
    with rng.replay(snapshot, (task.chunk, task.shared)):
        r = map_chunk_keep(task)
    if isinstance(r, Failure):
        return r
    return r[1].push(tangents, batch)
