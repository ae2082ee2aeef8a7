"""Splitting items into chunks and putting chunk gradients back together.

``items`` is either a ``list`` (item ``i`` is ``items[i]``, any pytree) or an
array / pytree of arrays sliced along axis 0 (item ``i`` is every leaf's row
``i``).  Chunk boundaries depend only on ``len(items)`` and ``chunk_size``
-- never on the executor or its worker count -- and every combination below
runs in chunk order, which is what makes results bit-identical everywhere.
"""
from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np

from ..core.primitive import shape_of
from ..core.pytree import tree_flatten
from ..core.batched import Batched, top_batch
from ..core.staged import Staged
from ..core.var import Var, innermost_tape, refuse_masked, traced_from
from .work import Task

#: Default number of chunks: enough to balance 2-16 workers, few enough
#: that per-task overhead (IPC for processes) stays small.
DEFAULT_CHUNKS = 16
#: Smallest default chunk of a vectorized call (``vectorize=True``): such a
#: chunk has a fixed cost (a child tape, one vectorized call of every
#: operation: ~0.15-0.2 ms here) that a few hundred cheap items only just
#: cover.  W7's 1,000 items: 16 chunks of 63 took 7.8x the hand-vectorized
#: call, 2 of 500 1.8x.  Still a function of ``len(items)`` alone, so the
#: bits do not depend on the executor or the number of workers.  (Not for
#: ``batched=True``: a hand-batched ``f`` is often heavy per item, and W4's
#: 512 stacked models then ran as one chunk, on one core.)
MIN_VECTORIZED_CHUNK = 512


def chunk_bounds(n, chunk_size=None, opname="parallel_sum", vectorized=False):
    """``[(start, stop), ...]`` covering ``range(n)`` (``vectorized``: the
    default chunks hold at least :data:`MIN_VECTORIZED_CHUNK` items)."""
    if chunk_size is None:
        chunk_size = max(1, -(-n // DEFAULT_CHUNKS))
        if vectorized:
            chunk_size = max(chunk_size, MIN_VECTORIZED_CHUNK)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or chunk_size < 1:  # (True is an int: it ran as 1, as n_workers refuses it)
        raise ValueError(f"tapestry.{opname}: chunk_size must be a positive integer, "
                         f"got {chunk_size!r}.")
    return [(a, min(a + int(chunk_size), n)) for a in range(0, n, int(chunk_size))]


def add_in_order(terms):
    """``terms[0] + terms[1] + ...`` left to right, ``None`` meaning zero;
    in place into a buffer this function allocated (never into a term)."""
    total, owned = None, False
    for c in terms:
        if c is None:
            continue
        if total is None:
            total = c
        elif owned and type(c) is np.ndarray and c.shape == total.shape \
                and np.can_cast(c.dtype, total.dtype, "same_kind"):
            np.add(total, c, out=total)
        else:
            total = total + c
            owned = type(total) is np.ndarray
    return total


def sum_pullback(stored, tape):
    """The pullback of a real ``parallel_sum`` whose gradients (one per
    parent) are ``stored``: each scaled by the cotangent, except for the
    usual seed, a plain 1 (under jit the seed is such a constant, so the
    program holds no multiplication by 1 per gradient: W4 heavy's 256).

    The seed hands ``stored`` on as they are, unless ``tape`` outlives the
    call (``tp.vjp``: ``tape.owned``), whose pullback may be called again:
    what an earlier call returned is then the caller's (an optimizer scales
    it in place), so each call hands on copies."""
    reused = tape is not None and getattr(tape, "owned", None) is not None

    def parallel_sum_pullback(g, ans):
        if type(g) is np.ndarray and g.shape == () and g == 1:
            # (``_scale`` by 1 of each)
            return [_copy(c) for c in stored] if reused else list(stored)
        return [_scale(g, c) for c in stored]
    return parallel_sum_pullback


def _copy(c):
    """``c`` as a new object where it is a mutable array (numbers are
    handed on: nobody writes into them)."""
    return c.copy() if isinstance(c, np.ndarray) else c


def _scale(g, c):
    """``g * c``, skipping the multiply (and its buffer) when ``g`` is 1."""
    if c is None:
        return None
    if type(g) is np.ndarray and g.shape == () and g == 1:
        return c
    return g * c


#: Leaves that hold nothing traced, batched, staged or masked.
_PLAIN = frozenset({np.ndarray, int, float, complex, bool, np.float64, np.float32, np.int64,
                    np.int32, np.bool_, np.complex128, str})


def _plain_counts(items):
    """Per item, its number of leaves, where every item is a plain array or
    number, or a dict / tuple / list of those (the common list of items,
    checked without flattening each: nothing traced is among them, so only
    the counts are needed); ``None`` otherwise.  (No container is made per
    item: a thousand small lists cost more in garbage collection than in
    making them.)"""
    out = []
    plain = _PLAIN
    for it in items:
        c = it.__class__
        if c is dict:
            values = it.values()
        elif c is tuple or c is list:
            values = it
        elif c in plain:
            out.append(1)
            continue
        else:
            return None
        for x in values:
            if x.__class__ not in plain:
                return None
        out.append(len(values))
    return out


class Plan:
    """The items and shared arguments of one call, lowered off the tape.

    ``top`` is the tape being recorded on (``None``: nothing to
    differentiate); ``inline`` is set when values still carry outer tracing
    levels (higher derivatives) or are batched by an enclosing ``vmap``:
    those must be recorded in this thread, and a batched value pickled to
    another process would lose its batch trace.
    """

    def __init__(self, items, shared, batched, opname):
        self.batched, self.opname = batched, opname
        if items.__class__ not in _CONTAINERS and isinstance(items, (Iterator, range)):
            items = list(items)  # a generator, map(...), iter(...): chunks need the
            # count and random access
        self.is_list = isinstance(items, list)
        self.item_counts = None
        if self.is_list:
            self.items = items
            self.n = len(items)
            #: leaves per item where items are plain (``_plain_counts``), else None
            self.item_counts = _plain_counts(items)
            if self.item_counts is not None:  # nothing traced among them
                self.item_leaves = self.item_defs = None
                all_items = []
            else:
                flat = [tree_flatten(it) for it in items]
                self.item_leaves = [l for l, _ in flat]
                self.item_defs = [td for _, td in flat]
                all_items = [x for l in self.item_leaves for x in l]
        else:
            leaves, self.item_def = tree_flatten(items)
            self.n = _common_length(leaves, opname)
            self.item_leaves = leaves
            all_items = leaves
            #: ``items`` where it is a dict of plain arrays (sliced directly)
            self.array_dict = items if items.__class__ is dict and all(
                x.__class__ is np.ndarray for x in items.values()) else None
        self.shared_leaves, self.shared_def = tree_flatten(tuple(shared))
        every = all_items + self.shared_leaves
        #: a random generator among the arguments: chunks on threads would draw
        #: from it in the order the threads reach it, not in item order
        self.draws = _draws(every)
        self.top = innermost_tape(every)
        if self.top is not None and any(x.__class__ is Batched for x in every) and \
                top_batch(every) is not None:
            # a vmap inside the tape's trace batches some arguments: a node on
            # the tape cannot hold its batched value, so f is traced like
            # ordinary code, in this thread (each operation batched, then taped)
            self.top = None
        if self.top is not None:  # differentiated: a masked constant would be wrong
            for x in every:
                if x.__class__ is not np.ndarray and x.__class__ is not Var:
                    refuse_masked(x, opname)
        self._lower_all()

    def _lower_all(self):
        top = self.top
        if self.is_list and self.item_counts is not None:  # plain items: none active
            self.item_active = self.item_values = None
            self.items_as_given = True
            flat = []
        elif self.is_list:
            self.item_active = [[_active(x, top) for x in l] for l in self.item_leaves]
            self.item_values = [[_low(x, top) for x in l] for l in self.item_leaves]
            #: no item holds a value traced here: chunks are the items themselves
            self.items_as_given = top is None or not any(map(any, self.item_active))
            flat = [x for l in self.item_values for x in l]
        else:
            self.item_active = [x.__class__ is Var and x._tape is top for x in self.item_leaves]
            self.item_values = [x._value if on else x
                                for x, on in zip(self.item_leaves, self.item_active)]
            flat = self.item_values
        self.shared_active = [x.__class__ is Var and x._tape is top for x in self.shared_leaves]
        self.shared_values = [x._value if on else x
                              for x, on in zip(self.shared_leaves, self.shared_active)]
        # (staged values: jit traces the chunks in place, into its program)
        traced = _TRACED
        self.inline = any(x.__class__ in traced for x in flat) or \
            any(x.__class__ in traced for x in self.shared_values)

    def check_outputs(self, leaves, serial):
        """Refuse outputs traced at this call's level or above: ``f`` read a
        value being differentiated from a closure, a global or an
        attribute, so its derivative would be lost (or, off the caller's
        thread, recorded out of order).  With nothing to differentiate
        among the arguments, a serial call is ordinary tracing and fine."""
        if self.top is None and serial:
            return
        level = 0 if self.top is None else self.top.level
        if traced_from(leaves, level) is not None:
            raise TypeError(
                f"tapestry.{self.opname}: f uses a value that is being differentiated "
                "but is not among its items or shared arguments (it reads it from a "
                "closure, a global or an attribute), so its derivative cannot be "
                f"computed. Pass it as a shared argument: {self.opname}(f, items, value) "
                "calls f(item, value).")

    # --- the tape side ----------------------------------------------------------------
    def parents(self):
        """Tape positions of the active leaves: items' first, then shared."""
        if self.is_list and self.item_counts is not None:
            items = []
        elif self.is_list:
            items = [x._index for l, a in zip(self.item_leaves, self.item_active)
                     for x, on in zip(l, a) if on]
        else:
            items = [x._index for x, on in zip(self.item_leaves, self.item_active) if on]
        return items + [x._index for x, on in zip(self.shared_leaves, self.shared_active) if on]

    # --- chunk tasks -----------------------------------------------------------------------
    def chunk_items(self, a, b):
        if self.is_list and self.items_as_given:  # as plain Python's loop hands them to f
            return self.items[a:b]
        if self.is_list:
            return [td.unflatten(v) for td, v in
                    zip(self.item_defs[a:b], self.item_values[a:b])]
        if self.batched:
            if self.array_dict is not None:  # what unflatten builds, in one step
                return {k: x[a:b] for k, x in self.array_dict.items()}
            return self.item_def.unflatten([x[a:b] for x in self.item_values])
        return [self.item_def.unflatten([x[i] for x in self.item_values]) for i in range(a, b)]

    def _chunk_active(self, a, b):
        """Active positions among the leaves of ``chunk_items(a, b)``."""
        if self.is_list and self.item_counts is not None:  # plain items: none active
            return [], sum(self.item_counts[a:b])
        if self.is_list:
            flags = [on for act in self.item_active[a:b] for on in act]
        elif self.batched:
            flags = list(self.item_active)
        else:
            flags = list(self.item_active) * (b - a)
        return [k for k, on in enumerate(flags) if on], len(flags)

    def tasks(self, f, bounds, differentiate, stack_items=True):
        """One :class:`Task` per chunk.  ``stack_items``: stack plain items
        for a jitted ``f`` here, once (tapestry.jit.items); otherwise each
        chunk stacks its own in its worker, where that Python overlaps
        another worker's compiled loop (threads)."""
        shared = self.shared_def.unflatten(self.shared_values)
        columns = self._columns(f) if differentiate and stack_items else None
        shared_pos = [k for k, on in enumerate(self.shared_active) if on]
        same = None  # a slice of arrays: the same active positions in every chunk
        out = []
        for a, b in bounds:
            active, n_chunk = (), None
            if differentiate:
                if same is None:
                    pos, n_chunk = self._chunk_active(a, b)
                    active = tuple(pos) + tuple(n_chunk + k for k in shared_pos)
                    if self.batched and not self.is_list:
                        same = active, n_chunk
                else:
                    active, n_chunk = same
            out.append(Task(f, a, self.chunk_items(a, b), shared, active, self.batched,
                            n_chunk, columns and [c[a:b] for c in columns]))
        return out

    def _columns(self, f):
        """The items stacked leaf by leaf, once for all chunks, where ``f`` is
        a jitted function whose programs may run as one numba loop over a
        chunk's items (tapestry.jit.items); else ``None``."""
        if not (self.is_list and self.item_counts is not None and self.n > 1):
            return None
        from ..jit.items import columns_for
        return columns_for(f, self.items)

    def chunk_tangents(self, bounds, ts, batch=None):
        """Forward mode: per chunk, the tangents of its active leaves in
        the order of its task's ``active`` (the inverse of :meth:`assemble`)
        from one tangent per parent (see :meth:`parents`; ``None``: zero).
        With ``batch``, every tangent has a leading batch axis: items are
        sliced along axis 1."""
        n_shared = sum(self.shared_active)
        item_ts, shared_ts = list(ts[:len(ts) - n_shared]), list(ts[len(ts) - n_shared:])
        lead = () if batch is None else (slice(None),)
        out, k = [], 0
        for a, b in bounds:
            if self.is_list:
                n = len(self._chunk_active(a, b)[0])
                part, k = item_ts[k:k + n], k + n
            elif self.batched:
                part = [None if t is None else t[lead + (slice(a, b),)] for t in item_ts]
            else:
                part = [None if t is None else t[lead + (i,)] for i in range(a, b)
                        for t in item_ts]
            out.append(part + shared_ts)
        return out

    # --- putting gradients back together ---------------------------------------------------
    def assemble(self, bounds, chunk_grads):
        """One cotangent per parent (see :meth:`parents`) from each chunk's
        list of active-leaf gradients (``None`` for a chunk with none)."""
        n_shared = sum(self.shared_active)
        item_parts, shared_parts = [], []
        n_items = None
        for (a, b), g in zip(bounds, chunk_grads):
            if n_items is None or self.is_list or not self.batched:
                n_items = len(self._chunk_active(a, b)[0])  # (slices: one count for all)
            if g is None:
                g = [None] * (n_items + n_shared)
            item_parts.append(g[:n_items])
            shared_parts.append(g[n_items:])
        shared = [add_in_order([p[j] for p in shared_parts]) for j in range(n_shared)]
        return self._assemble_items(bounds, item_parts) + shared

    def _assemble_items(self, bounds, parts):
        if self.is_list:
            return [c for p in parts for c in p]
        active = [x for x, on in zip(self.item_values, self.item_active) if on]
        out = []
        for j, x in enumerate(active):
            if self.batched:
                blocks = [_dense(p[j], x[a:b]) for (a, b), p in zip(bounds, parts)]
                out.append(np.concatenate(blocks) if blocks else np.zeros_like(x))
            else:
                na = len(active)
                rows = [_dense(p[r * na + j], x[a + r])
                        for (a, b), p in zip(bounds, parts) for r in range(b - a)]
                out.append(np.stack(rows) if rows else np.zeros_like(x))
        return out


def _active(x, top):
    return x.__class__ is Var and x._tape is top


def _low(x, top):
    return x._value if x.__class__ is Var and x._tape is top else x


#: Classes of values traced or batched (a chunk holding one runs in place).
_TRACED = frozenset({Var, Batched, Staged})
#: Classes of ``items`` that are certainly not iterators (see :class:`Plan`).
_CONTAINERS = frozenset({list, dict, tuple, np.ndarray})
#: Random generators whose draws depend on the order of the calls.
_GENERATORS = (np.random.Generator, np.random.RandomState, np.random.BitGenerator,
               random.Random)
#: Leaf classes that are no generator (skipped without an isinstance).
_NOT_GENERATORS = _PLAIN | {Var}


def _draws(leaves):
    """Whether a random generator is among ``leaves``."""
    skip = _NOT_GENERATORS
    for x in leaves:
        if x.__class__ not in skip and isinstance(x, _GENERATORS):
            return True
    return False


def _dense(c, like):
    if c is None:
        return np.zeros(np.shape(like), np.result_type(like))
    return np.asarray(c.todense()) if hasattr(c, "todense") else c


def _common_length(leaves, opname):
    if not leaves:
        raise ValueError(f"tapestry.{opname}: items has no arrays; pass a list of items "
                         "or an array sliced along axis 0.")
    lengths = set()
    for x in leaves:
        shape = x.shape if x.__class__ is np.ndarray else shape_of(x)
        lengths.add(shape[0] if len(shape) else None)
    if None in lengths or len(lengths) != 1:
        raise ValueError(
            f"tapestry.{opname}: items that are not a list are sliced along axis 0, so "
            f"every array in them needs the same leading length; got shapes "
            f"{[shape_of(x) for x in leaves]}. Pass a list to give items one by one.")
    return lengths.pop()
