"""``parallel_sum`` of a jitted item function: a chunk without the engine.

``parallel_sum(jit(f), items, *shared)`` inside ``grad`` otherwise runs
each item as ``grad(jit(f))`` on the chunk's child tape: a traced call, a
node, a pullback per item, then a reverse sweep, ~48 us of Python per W7
item.  Here the chunk calls one jitted ``value_and_grad`` of ``f`` (with
respect to the chunk's active shared leaves) per item and adds the values
and gradients up itself: no tape, no node, no sweep.  A ``batched=True``
chunk (a slice of the stacked items) is one such call.

Bits: the values are added in item order, as the chunk's ``sum`` adds
them, and the gradients in reverse item order, as the reverse sweep of
the chunk's tape meets the items, each as the sweep hands it on (a sparse
one sparse) and added by the engine's own ``accumulate``, so the result
has the tape path's bits with ``fuse=False`` (where ``f`` reads each shared
leaf once; a leaf read twice gets its two contributions summed within
the item first).  Anything this path does not cover returns ``None`` and
the chunk runs on a tape as before: items that are differentiated
themselves, static arguments, a value that is not one real number, and
any exception (the tape path then names the first item that
raised, with its own message).
"""
from __future__ import annotations

import time

import numpy as np

from ..core.api import _value_and_grad
from ..core.backward import accumulate
from ..core.pytree import tree_flatten
from ..parallel.stacking import columns as _columns, same_form
from ..core.tracing import AS_SWEPT
from .order import aux_key


def _containers_changed(tree, treedef, leaves):
    from .api import _containers_changed as changed
    return changed(tree, treedef, leaves)


def sum_chunk(task, grads_like):
    """``(value, [gradient per active leaf])`` of ``task`` (whose ``f`` is a
    :class:`~tapestry.jit.api.jit`), or ``None`` where this path does not
    apply.  ``grads_like(acc, values)`` casts the gradients as the tape path
    does (``work._grads``)."""
    jf, chunk = task.f, task.chunk
    if not task.active or jf.fun is None or jf._static or jf._eager_all is not None:
        return None
    if not task.batched and (chunk.__class__ is not list or not chunk):
        return None
    n_chunk = task.n_chunk
    if n_chunk is None:
        n_chunk = len(tree_flatten(chunk)[0])
    if task.active[0] < n_chunk:  # an item's own leaf is differentiated
        return None
    shared_leaves, shared_td = tree_flatten(task.shared)
    act = tuple(p - n_chunk for p in task.active)
    vg = _item_value_and_grad(jf, shared_td, act)
    if task.batched:
        return _batched_chunk(vg, chunk, shared_leaves, act, grads_like)
    values, grads = [], []
    try:
        if jf.__dict__.get("_items_mutate_shared"):  # (see _MutatesShared)
            return None
        if len(chunk) > 1 and jf._fuse:  # whole programs: one loop over the items
            driven = _driven(vg, chunk, task.columns, shared_leaves)
            if driven is not None:
                v, gs = driven
                return v, grads_like(gs, [shared_leaves[k] for k in act])
        # f meets the items in their order, as on the tape (an f that runs
        # uncompiled may draw random numbers or log what it sees)
        for item in chunk:
            v, gs = vg(_fresh(item), *shared_leaves)
            if not _real_number(v):
                return None
            values.append(v)
            grads.append(gs)
    except Exception:  # the tape path names the item and says what it raised
        return None
    acc, owned = list(grads[-1]), set()
    for gs in reversed(grads[:-1]):
        _add_into(acc, owned, gs)
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total, grads_like(acc, [shared_leaves[k] for k in act])


def _batched_chunk(vg, chunk, shared_leaves, act, grads_like):
    """A ``batched=True`` chunk (one slice of the stacked items): one call
    of the jitted ``value_and_grad``, as the tape path makes one call of
    ``f`` and one reverse sweep (the same bits with ``fuse=False``); ``None``
    where ``f``'s value is not one real number or the call raises (the tape
    path then names the chunk and says what it raised)."""
    try:
        v, gs = vg(chunk, *shared_leaves)
    except Exception:
        return None
    if not _real_number(v):
        return None
    return v, grads_like(list(gs), [shared_leaves[k] for k in act])


def _add_into(acc, owned, gs):
    """``acc[k] += gs[k]`` as the engine's reverse sweep adds a leaf's
    cotangents (:func:`~tapestry.core.backward.accumulate`: in place once
    ``acc[k]`` is a buffer made here, sparse ones kept sparse; the first
    contribution may be an input of the item, returned as its gradient)."""
    for k, g in enumerate(gs):
        if g is None:
            continue
        a = acc[k]
        acc[k] = g if a is None else accumulate(a, g, k, owned)


def _real_number(v):
    if v.__class__ in (float, np.float64, np.float32, int):
        return True
    return isinstance(v, (np.ndarray, np.generic)) and v.shape == () \
        and v.dtype.kind in "iuf"


class _MutatesShared(Exception):
    """``f`` changed a shared argument's container (a list appended to): the
    chunk runs on the tape, where its items share those containers."""


def _fresh(item):
    """``item`` with new dicts and lists (the arrays and numbers as they
    are): the tape path gives ``f`` such a copy of each item, so what ``f``
    does to it (an append) stays off the caller's items, as there."""
    c = item.__class__
    if c is dict:
        return {k: _fresh(v) for k, v in item.items()}
    if c is list:
        return [_fresh(v) for v in item]
    if c is tuple and any(v.__class__ in (dict, list, tuple) for v in item):
        return tuple(_fresh(v) for v in item)
    return item


def _item_value_and_grad(jf, shared_td, act):
    """The jitted ``value_and_grad`` of ``f(item, *shared)`` with respect to
    the shared leaves at ``act``, called as ``(item, *shared_leaves)``;
    one per (structure of the shared arguments, active leaves), kept on
    ``jf`` with its options."""
    cache = jf.__dict__.setdefault("_items_value_and_grad", {})
    # (aux_key: dict key orders and key types, which a treedef's == ignores,
    # decide how the shared arguments are rebuilt for f)
    key = (shared_td, aux_key(shared_td), act)
    vg = cache.get(key)
    if vg is None:
        fun, fuse = jf.fun, jf._fuse

        def item_value_and_grad(item, *leaves):
            def of_active(*xs):
                full = list(leaves)
                for k, x in zip(act, xs):
                    full[k] = x
                shared = shared_td.unflatten(full)
                out = fun(item, *shared)
                if _containers_changed(shared, shared_td, full):
                    # (the chunk's items share its shared arguments on the
                    # tape: f's change must reach the next item; here each
                    # call rebuilds them, and a program would not redo it)
                    jf._items_mutate_shared = True
                    raise _MutatesShared()
                return out
            # (default replay: each item's gradients as the child tape's sweep
            # meets them, sparse ones sparse, for _add_into to add them as the
            # sweep does; whole programs take dense ones into their loop)
            return _value_and_grad(of_active, tuple(range(len(act))), False,
                                   False if fuse else AS_SWEPT,
                                   "parallel_sum")(*[leaves[k] for k in act])
        item_value_and_grad.__qualname__ = f"{getattr(fun, '__qualname__', 'f')}_item_grad"
        vg = cache.setdefault(key, jf._rewrap(lambda f: item_value_and_grad))
    return vg


# --- whole programs: one numba loop over the chunk's items -----------------------------


def columns_for(jf, items):
    """:func:`_columns` of all the items, where ``jf`` is a jit whose
    programs may be whole (with ``fuse``) and can take them; else ``None``."""
    from .api import jit
    if jf.__class__ is not jit or not jf._fuse or jf._static:
        return None
    return _columns(items)


def _driven(vg, chunk, columns, shared_leaves):
    """``(value, [gradients])`` of the chunk from one call of a numba loop
    over its items (nogil: threads run their chunks at once), where the
    program of ``vg`` at the chunk's last item is a whole-program kernel
    (``fuse=True``, :mod:`tapestry.jit.whole`) and every item has that
    item's signature; else ``None``.  The loop adds values and gradients
    in the orders :func:`sum_chunk` does, so its bits are the per-item
    calls' bits.  A flag of the kernel (an inf or nan, an index out of
    bounds, a failed guard) gives ``None`` too: the items then run one
    call each, whose fallbacks see to it."""
    loop = _loop(vg, chunk[-1], columns, shared_leaves, chunk)
    if loop is None:
        return None
    kernel, drivers, _, columns = loop
    try:
        r = drivers.drive(0, len(chunk), *columns, *shared_leaves, *kernel.consts)
    except Exception:  # (compiled at its first call: see sum_items)
        drivers.failed = True
        return None
    if r[0]:
        return None
    kinds = kernel.outputs
    value = _rebuilt(r[1], kinds[0]) if len(chunk) == 1 or kinds[0][2] is float \
        else np.float64(r[1])
    return value, [_rebuilt(g, k) for g, k in zip(r[2:], kinds[1:])]


def _loop(vg, last_item, columns, shared_leaves, chunk=None):
    """``(kernel, drivers, spec, columns)`` for a numba loop over items
    stacked as ``columns`` (``None``: the ``chunk``'s, stacked here once a
    program is found): the whole-program kernel of ``vg``'s program at
    ``last_item`` and the compiled module of the loops over it; ``None``
    where there is none (yet) or it cannot take these arguments."""
    progs = vg._compiled_for((last_item, *shared_leaves), {})
    # (none yet: the items' own calls trace it; a call here, out of the
    # items' order, would run an f that runs uncompiled once more)
    if not progs or progs[0].program.kernel is None:
        return None
    comp = progs[0]
    kernel = comp.program.kernel
    if len(comp.env) and comp.env.changed() is not None:
        return None  # (each item's call then traces again)
    if columns is None and chunk is not None:
        columns = _columns(chunk)
    if columns is None or any(k is None for k in kernel.outputs) \
            or kernel.outputs[0][1] != () \
            or len(columns) + len(shared_leaves) != kernel.n_inputs \
            or not all(_kernel_arg(x) for x in shared_leaves):
        return None
    spec = _spec(columns)
    if _zero_d_leaf(last_item):
        return None  # (its column's rows are numbers: the kernel takes 0-d arrays)
    drivers = comp.program.__dict__.setdefault("_item_drivers", {})
    drive = drivers.get(spec)
    if drive is not None and drive.__dict__.get("failed"):
        return None
    if drive is None:
        if spec in drivers:
            return None  # (this spec did not compile: no second try)
        try:
            drive = _driver(kernel, columns, len(shared_leaves))
        except Exception:
            drivers[spec] = None
            return None
        drivers[spec] = drive
    return kernel, drive, spec, columns


# --- every chunk of a call at once ------------------------------------------------------

def sum_items(f, items, shared, bounds, ex, add_in_order, grads_like):
    """``(tape, value, parents, gradients)`` of ``parallel_sum(f, items,
    *shared)`` for a jitted ``f`` whose program is one compiled loop over
    the items (``fuse=True``, :mod:`tapestry.jit.whole`), a list of plain
    items of one structure, and shared arguments of which some are being
    differentiated (``parents``: their tape positions); ``None`` where
    anything else holds (the chunks then run as tasks).  ``bounds``: the
    chunks; ``ex``: the serial or thread executor; ``add_in_order`` and
    ``grads_like``: how the caller adds the chunks' results and casts a
    chunk's gradients (``work.sum_chunk``).

    Every chunk's sums are the loop over that chunk alone (``drive``), in
    its own row, and the rows are added in chunk order after each chunk's
    gradients are cast as ``work.sum_chunk`` casts them: the tasks' bits
    (``_driven``), whatever the executor.  What this leaves out is the
    ~40 us of Python per chunk as a task and the Plan's look at every
    item (~0.9 ms of W7's 2.2).  With threads, the items are stacked in
    two halves, and the first half's loop runs on a pool thread (off the
    GIL) while this thread stacks the second."""
    from .api import jit
    n = len(items)
    if f.__class__ is not jit or f.fun is None or not f._fuse or f._static \
            or f._eager_all is not None or f.__dict__.get("_items_mutate_shared") or n < 2:
        return None
    low = _lowered(shared)
    if low is None:
        return None
    top, shared_td, leaves, act, active = low
    if any(b - a < 2 for a, b in bounds):
        return None
    vg = _item_value_and_grad(f, shared_td, act)
    loop = _loop(vg, items[-1], None, leaves, items[-1:])
    if loop is None:
        return None
    kernel, drivers, spec, _ = loop
    kinds = kernel.outputs
    if any(k[0] not in _SCRATCH_DTYPE for k in kinds[1:]):
        return None
    rows = _Rows(bounds, kinds, drivers.drive_chunks, (*leaves, *kernel.consts))
    try:
        if not rows.run(items, spec, ex, drivers):
            return None
    except Exception:  # (numba compiles the loop at its first call, and may refuse
        drivers.failed = True  # these arguments' types: the chunks run as tasks)
        return None
    value, grads = rows.sums(kinds, [leaves[p] for p in act], add_in_order, grads_like)
    return top, value, [x._index for x in active], grads


def _lowered(shared):
    """``(tape, treedef, plain leaves, active positions, active Vars)`` of
    the shared arguments, where some leaf is being differentiated on the
    innermost tape and every leaf is a plain array or number or a value
    of that tape; else ``None``."""
    from ..core.var import Var, innermost_tape
    leaves, td = tree_flatten(tuple(shared))
    top = innermost_tape(leaves)
    if top is None:
        return None
    plain, act, on = [], [], []
    for k, x in enumerate(leaves):
        if x.__class__ is Var:
            if x._tape is not top:
                return None  # (an outer level: traced in place, on the tape)
            act.append(k)
            on.append(x)
            x = x._value
        if not _kernel_arg(x):
            return None
        plain.append(x)
    return top, td, plain, tuple(act), on


#: A loop (all chunks) timed below this many seconds runs in the caller
#: alone: waking a pool thread costs ~50-100 us here (as for chunk tasks,
#: ``parallel.runner.MIN_PARALLEL_SECONDS``).
MIN_LOOP_SECONDS = 3e-4

#: The share of the items whose loop the pool thread runs (it starts once
#: they are stacked, and the caller stacks and loops over the rest) before
#: the stacking has been timed (then :func:`_first_share`).
FIRST_SHARE = 0.5


class _Rows:
    """Per chunk, its value and gradients from the items loop (one row each)."""

    def __init__(self, bounds, kinds, loop, tail):
        nc = len(bounds)
        self.bounds, self.loop, self.tail = bounds, loop, tail
        self.starts = np.array([a for a, _ in bounds] + [bounds[-1][1]], np.int64)
        self.bads, self.totals = np.zeros(nc, np.bool_), np.empty(nc)
        self.rows = [np.empty((nc,) + k[1], _SCRATCH_DTYPE[k[0]]) for k in kinds[1:]]

    def _call(self, c0, c1, columns, lo):
        starts = self.starts if lo == 0 else self.starts - lo
        self.loop(c0, c1, starts, self.bads, self.totals, *self.rows, *columns, *self.tail)

    def run(self, items, spec, ex, drivers):
        """Fill the rows (``False``: the items do not stack as the program's
        were, or the kernel flagged a chunk): in the caller's thread alone,
        or in two halves (a pool thread loops over the first while this
        one stacks the second) where the loop, as last timed alone, is
        worth waking a thread for."""
        nc, n = len(self.bounds), self.bounds[-1][1]
        # (seconds per item of the loop, last timed in the caller alone, kept
        # with the compiled loops: whether a thread is worth waking)
        per_item = drivers.__dict__.get("seconds_per_item")
        if ex.n_workers < 2 or nc < 2 or per_item is None \
                or per_item * n < MIN_LOOP_SECONDS:
            t0 = time.perf_counter()
            columns = _columns(items)
            if columns is None or _spec(columns) != spec:
                return False
            t1 = time.perf_counter()
            self._call(0, nc, columns, 0)
            if ex.n_workers >= 2:
                drivers.seconds_per_item = (time.perf_counter() - t1) / n
                drivers.stack_seconds_per_item = (t1 - t0) / n
            return not self.bads.any()
        cut = _cut(self.bounds, _first_share(per_item, drivers.__dict__.get(
            "stack_seconds_per_item")))
        mid = self.bounds[cut][0]
        # (each half's columns check its items against the half's first item
        # only: both first items must have the form of the item whose program
        # this is, or a half in another key order or container class would run
        # a program traced for another form, and stack alike)
        if not (same_form(items[0], items[-1]) and same_form(items[mid], items[-1])):
            return False
        first = _columns(items[:mid])
        if first is None or _spec(first) != spec:
            return False
        job = ex.pool.submit(self._call, 0, cut, first, 0)
        time.sleep(0)  # (hands the GIL to the pool thread, which starts its loop)
        same = False
        try:
            t0 = time.perf_counter()
            second = _columns(items[mid:])
            same = second is not None and all(
                a.dtype == b.dtype and a.shape[1:] == b.shape[1:] for a, b in zip(first, second))
            if same:
                t1 = time.perf_counter()
                self._call(cut, nc, second, mid)
                # (this call's own timings: the first call's loop included its warm-up)
                drivers.stack_seconds_per_item = (t1 - t0) / (n - mid)
                drivers.seconds_per_item = (time.perf_counter() - t1) / (n - mid)
        finally:
            job.result()  # (an error there is raised here)
        return same and not self.bads.any()

    def sums(self, kinds, like, add_in_order, grads_like):
        """The call's value and gradients: the rows added in chunk order,
        each gradient cast first as ``grads_like`` casts a chunk's."""
        rebuild = kinds[0][2]
        value = add_in_order([_rebuilt(v, kinds[0]) if rebuild is float else np.float64(v)
                              for v in self.totals.tolist()])
        grads, nc = [], len(self.bounds)
        for g, k, x in zip(self.rows, kinds[1:], like):
            if k[1] and x.__class__ is np.ndarray and x.dtype == g.dtype \
                    and x.shape == k[1] and k[2] is None:  # (grads_like hands each on)
                total = g[0].copy()
                for c in range(1, nc):
                    np.add(total, g[c], out=total)
                grads.append(total)
            elif k[1] == () and k[2] is float:  # Python floats, which grads_like hands on
                parts = g.tolist()
                total = parts[0]
                for r in parts[1:]:
                    total = total + r
                grads.append(total)
            else:
                grads.append(add_in_order([grads_like([_rebuilt(r if k[1] else r.item(), k)],
                                                      [x])[0] for r in g]))
        return value, grads


def _zero_d_leaf(item):
    """Whether a leaf of ``item`` (as :func:`_columns` reads it) is a 0-d
    array: the loop would hand the kernel its stacked column's number."""
    c = item.__class__
    leaves = [item] if c is np.ndarray else item.values() if c is dict else \
        item if c is tuple or c is list else ()
    return any(x.__class__ is np.ndarray and x.ndim == 0 for x in leaves)


def _spec(columns):
    return tuple((c.ndim, c.dtype.str) for c in columns)


def _first_share(loop, stack):
    """The share of the items whose loop the pool thread runs: with ``S``
    and ``L`` the seconds per item of stacking and of the loop, the caller
    stacks the first share, then stacks and loops over the rest while the
    pool thread loops over the first; the call ends soonest when both end
    together, at ``(S + L) / (S + 2L)`` (W7: stacking ~1.5x the loop, so
    ~0.7 rather than a half).  Unmeasured: :data:`FIRST_SHARE`."""
    if not loop or not stack:
        return FIRST_SHARE
    return min(0.85, max(0.3, (stack + loop) / (stack + 2.0 * loop)))


def _cut(bounds, share):
    """The number of leading chunks (at least one, and one fewer than all)
    holding about ``share`` of the items."""
    goal = bounds[0][0] + (bounds[-1][1] - bounds[0][0]) * share
    c = 1
    while c < len(bounds) - 1 and bounds[c][1] <= goal:
        c += 1
    return c


def _rebuilt(x, kind):
    rebuild = kind[2]
    if rebuild is None:
        return x
    return np.array(x, rebuild) if isinstance(rebuild, np.dtype) else rebuild(x)


def _kernel_arg(x):
    """Whether a shared leaf goes into the kernel as its signature says (a
    C-contiguous writable array, a Python or NumPy number)."""
    if x.__class__ is np.ndarray:
        return x.flags.c_contiguous and x.flags.writeable
    if x.__class__ is int:  # (an int64 in the kernel: a larger one runs as tasks)
        return -2 ** 63 <= x < 2 ** 63
    return x.__class__ in (float, np.float64, np.int64)


_SCRATCH_DTYPE = {"f": "float64", "i": "int64", "b": "bool_"}


def _driver(kernel, columns, n_shared):
    """The numba loop over items calling ``kernel`` (generated source, kept
    on disk like the kernel's so ``cache=True`` works across processes)."""
    from ..kernels.compile_numba import cache_dir, load_source
    item = [f"a{k}" for k in range(len(columns))]
    shared = [f"s{k}" for k in range(n_shared)]
    consts = [f"k{k}" for k in range(len(kernel.consts))]
    params = ", ".join(["lo", "hi"] + item + shared + consts)
    grads = kernel.outputs[1:]
    # gradients kern_into adds into the loop's own arrays (an item's gradient
    # with respect to a long vector, at its few positions); the rest come back
    # per item and are added here, each in the tuple after those kept
    into = kernel.into[1:] if kernel.into is not None else [False] * len(grads)
    accs = [f"g{k}" for k, on in enumerate(into) if on]
    use_into = kernel.into is not None
    scratch = [f"z{k}" for k in range(len(kernel.scratch))] if use_into else []
    at, p = {}, 2
    for k, on in enumerate(into):
        if not on:
            at[k], p = p, p + 1

    def call(i):
        args = [f'{a}[{i}]' for a in item] + shared + consts + accs + scratch
        return f"{'kern_into' if use_into else 'kern'}({', '.join(args)})"
    zeros = [f"    g{k} = np.zeros({g[1]!r}, np.float64)" for k, g in enumerate(grads) if into[k]]
    zeros += [f"    z{k} = np.empty({shape!r}, np.{_SCRATCH_DTYPE[dt]})"
              for k, (shape, dt) in enumerate(kernel.scratch if use_into else ())]
    first = [f"    g{k} = r[{at[k]}]{'.copy()' if g[1] != () else ''}"
             for k, g in enumerate(grads) if not into[k]]
    more = [f"            g{k} {'+=' if g[1] != () else '= g' + str(k) + ' +'} r[{at[k]}]"
            for k, g in enumerate(grads) if not into[k]]
    rows = [f"G{k}" for k in range(len(grads))]
    lines = ["import numpy as np", "from numba import njit",
             f"from {kernel.module} import {'kern_into' if use_into else 'kern'}", "",
             "@njit(nogil=True, cache=True)",
             f"def drive({params}):",
             "    n = hi - lo",
             "    vals = np.empty(n)",
             *zeros,
             f"    r = {call('hi - 1')}",
             "    bad = r[0]",
             "    vals[n - 1] = r[1]",
             *first,
             "    i = hi - 2",
             "    while i >= lo and not bad:",
             f"        r = {call('i')}",
             "        if r[0]:",
             "            bad = True",
             "        else:",
             "            vals[i - lo] = r[1]",
             *more,
             "        i -= 1",
             "    total = vals[0]",
             "    for i in range(1, n):",
             "        total = total + vals[i]",
             f"    return (bad, total{''.join(f', g{k}' for k in range(len(grads)))})",
             "",
             "",
             "@njit(nogil=True, cache=True)",
             f"def drive_chunks({', '.join(['c0', 'c1', 'starts', 'bads', 'totals'] + rows + item + shared + consts)}):",
             "    for c in range(c0, c1):",
             f"        r = drive({', '.join(['starts[c]', 'starts[c + 1]'] + item + shared + consts)})",
             "        bads[c] = r[0]",
             "        if r[0]:",
             "            return",
             "        totals[c] = r[1]",
             *[f"        G{k}[c] = r[{k + 2}]" for k in range(len(grads))]]
    src = "\n".join(lines) + "\n"
    return load_source(src, "td", "tapestry_items", cache_dir("jit"))
