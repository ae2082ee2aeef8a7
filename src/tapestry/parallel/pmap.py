"""``parallel_map``: ``[f(item, *shared) for item in items]`` in parallel,
differentiable, with a parallel backward pass.

In-process executors (serial, threads) keep each chunk's child tape and
sweep them in parallel in the backward pass.  Process and Dask executors
run the forward without a tape and, in the backward pass, recompute each
chunk's forward inside the task that applies its cotangent: every task is
stateless and safe to retry.  Shared arguments' cotangents are summed in
chunk order, so the bits do not depend on the executor.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..core.backward import JointRule
from ..core.batched import Batched
from ..core.primitive import record, shape_of
from ..core.pytree import tree_flatten
from ..core.var import Var
from .chunks import Plan, chunk_bounds
from .executors import SerialExecutor, check_options, get_executor, in_worker
from .runner import in_process, run_chunks
from .work import (map_chunk_jvp, map_chunk_keep, map_chunk_keep_owning, map_chunk_pullback,
                   map_chunk_values)
from .vectorized import vectorized


def parallel_map(f, items, *shared, executor="serial", chunk_size=None, n_workers=None,
                 batched=False, progress=False, timeout=None, vectorize=False):
    """``f`` over ``items`` in parallel.

    A list of items gives a list of outputs; items sliced along axis 0 (an
    array or pytree of arrays) give outputs stacked along axis 0, like
    ``vmap``.  With ``batched=True`` ``f`` gets a whole chunk and returns
    outputs with the chunk along axis 0; they are concatenated.  With
    ``vectorize=True`` ``f`` stays per item and each chunk is one
    ``tapestry.vmap(f)`` call; outputs are stacked along axis 0.  Other
    arguments as in :func:`tapestry.parallel_sum`.  Process and Dask
    executors recompute each chunk's forward in the backward pass, with
    the random state it first saw (global ``np.random`` and generators
    among the arguments; not one captured in a closure).
    """
    timeout = check_options("parallel_map", executor, n_workers, timeout)
    if vectorize:
        f, batched = vectorized(f, shared, batched, "parallel_map", reduce=False)
    plan = Plan(items, shared, batched, "parallel_map")
    bounds = chunk_bounds(plan.n, chunk_size, "parallel_map", vectorize)
    if plan.n == 0:
        return [] if plan.is_list else _no_rows(f, items, shared, batched)
    ex = SerialExecutor() if plan.inline else get_executor(executor, n_workers)
    if plan.draws and in_process(ex) and not isinstance(ex, SerialExecutor):
        # (a generator among the arguments: threads would draw from it in the
        # order they reach it; in order, the draws are the serial call's)
        ex = SerialExecutor()
    differentiate = plan.top is not None
    keep = differentiate and in_process(ex)
    tasks = plan.tasks(f, bounds, differentiate, stack_items=False)
    if keep:
        work = map_chunk_keep_owning if plan.top.owned is not None else map_chunk_keep
        results = run_chunks(ex, work, tasks, "parallel_map", progress, timeout)
        outs, kept = [r[0] for r in results], [r[1] for r in results]
    else:
        outs = run_chunks(ex, map_chunk_values, tasks, "parallel_map", progress, timeout)
        if differentiate:
            outs, kept = [r[0] for r in outs], [r[1] for r in outs]
    plan.check_outputs(tree_flatten(outs)[0], isinstance(ex, SerialExecutor))
    layout = _Layout(plan, bounds, outs)
    if not differentiate:
        return layout.result
    return _record(plan, bounds, layout, ex, tasks, kept, keep, timeout, f)


def _no_rows(f, items, shared, batched):
    """The outputs for items sliced along axis 0 that have no rows: ``f``'s
    outputs with 0 rows, as ``tapestry.vmap(f)`` gives them (their shapes
    come from running ``f`` on the empty batch: a batched ``f`` on the
    empty chunk, any other through ``vmap``).  (This returned ``None``,
    which failed later far from the call: ``out.shape``, or ``grad``'s
    "a missing return?".)"""
    from ..core.api_vmap import vmap
    try:
        if batched:
            out = f(items, *shared)
        else:
            out = vmap(f, in_axes=(0,) + (None,) * len(shared))(items, *shared)
    except Exception as e:
        raise ValueError("tapestry.parallel_map: the items have 0 rows, so the shapes of "
                         "f's outputs come from running f on an empty batch "
                         f"(tapestry.vmap), which raised {type(e).__name__}: {str(e).rstrip('.')}. Check "
                         "for no items before the call, or pass a list of items (0 items "
                         "give [])") from e
    for leaf in tree_flatten(out)[0]:
        shape = shape_of(leaf)
        if not shape or shape[0] != 0:
            raise ValueError("tapestry.parallel_map: with batched=True, f must return "
                             "outputs with one row per item (axis 0); for the 0 items "
                             f"given, an output leaf has shape {tuple(shape)}.")
    return out


class _Layout:
    """How the chunks' outputs become the result, and how the result's
    cotangents map back to each chunk's outputs."""

    def __init__(self, plan, bounds, outs):
        self.bounds = bounds
        self.mode = "list" if plan.is_list and not plan.batched else \
            ("concat" if plan.batched else "stack")
        if self.mode == "list":
            self.result = [o for chunk in outs for o in chunk]
            self.per_chunk = [sum(len(tree_flatten(o)[0]) for o in chunk) for chunk in outs]
            return
        per_item = [o for chunk in outs for o in chunk]
        flat = [tree_flatten(o) for o in per_item]
        td = flat[0][1]
        self._check(flat)
        join = np.concatenate if self.mode == "concat" else np.stack
        self.result = td.unflatten([join([l[j] for l, _ in flat])
                                    for j in range(td.n_leaves)])

    def _where(self, k):
        """Which items output ``k`` (one per item, or per chunk if batched) is for."""
        if self.mode == "stack":
            return f"item {k}"
        a, b = self.bounds[k]
        return f"items {a}..{b - 1}"

    def _check(self, flat):
        """Outputs that can be joined along axis 0, or an error naming the
        item (numpy's own error names none, and a batched f returning the
        wrong number of rows was joined silently into a result too short)."""
        leaves0, td = flat[0]
        for k, (leaves, t) in enumerate(flat):
            if t != td:
                raise ValueError(
                    f"tapestry.parallel_map: f returned outputs of another structure for "
                    f"{self._where(k)} than for {self._where(0)}; they must match to be "
                    "stacked (pass a list of items to get a list back).")
            for j, x in enumerate(leaves):
                shape = shape_of(x)
                if self.mode == "concat":
                    a, b = self.bounds[k]
                    if len(shape) == 0 or shape[0] != b - a:
                        raise ValueError(
                            f"tapestry.parallel_map: with batched=True, f gets a chunk of "
                            f"{b - a} items and must return outputs with one row per item "
                            f"(axis 0); for {self._where(k)} its output leaf {j} has shape "
                            f"{shape}.")
                elif shape != shape_of(leaves0[j]):
                    raise ValueError(
                        f"tapestry.parallel_map: f returned output leaf {j} of shape {shape} "
                        f"for {self._where(k)} but {shape_of(leaves0[j])} for item 0; "
                        "outputs are stacked along a new axis 0, so they need one shape "
                        "(pass a list of items to get a list back).")

    def leaves(self):
        return tree_flatten(self.result)[0]

    def tangents(self, chunk_ts, batch=None):
        """Forward mode: the result's leaf tangents (``None``: zero) from
        each chunk's flat list of output-leaf tangents (``None`` for a
        chunk whose inputs had none); with ``batch``, each has a leading
        batch axis and items are joined along axis 1."""
        leaves = self.leaves()
        if self.mode == "list":
            return [t for n, ts in zip(self.per_chunk, chunk_ts) for t in (ts or [None] * n)]
        n, axis = len(leaves), 0 if batch is None else 1
        lead = () if batch is None else (batch,)
        out = []
        for j, y in enumerate(leaves):
            if all(ts is None or all(t is None for t in ts[j::n]) for ts in chunk_ts):
                out.append(None)
                continue
            parts = []
            for (a, b), ts in zip(self.bounds, chunk_ts):
                if self.mode == "concat":
                    parts.append(_zero_if_none(ts and ts[j], lead, y[a:b]))
                else:
                    parts += [_zero_if_none(ts and ts[r * n + j], lead, y[a + r])
                              for r in range(b - a)]
            out.append(np.concatenate(parts, axis) if self.mode == "concat"
                       else np.stack(parts, axis))
        return out

    def chunk_cotangents(self, flat_g):
        """Per chunk: the flat list of its outputs' cotangents, or ``None``
        when all of them are zero (that chunk's backward is skipped)."""
        out = []
        if self.mode == "list":
            k = 0
            for n in self.per_chunk:
                cs = flat_g[k:k + n]
                k += n
                out.append(cs if any(c is not None for c in cs) else None)
            return out
        for a, b in self.bounds:
            if all(c is None for c in flat_g):
                out.append(None)
            elif self.mode == "concat":
                out.append([None if c is None else c[a:b] for c in flat_g])
            else:
                out.append([None if c is None else c[i] for i in range(a, b) for c in flat_g])
        return out


def _zero_if_none(t, lead, like):
    return np.zeros(lead + np.shape(like), np.result_type(like)) if t is None else t


class _Slots:
    """Cotangent of the map's node: output slot -> cotangent.  Adding one
    into another merges dicts (O(outputs touched), not O(all outputs))."""

    __slots__ = ("d",)

    def __init__(self, d):
        self.d = d

    def __accumulate_into__(self, prev):
        for k, c in self.d.items():
            old = prev.d.get(k)
            prev.d[k] = c if old is None else old + c
        return prev


#: Cotangents or tangents of these classes run in the calling thread: a
#: ``Var`` must be recorded there (higher derivatives), and a ``Batched``
#: (``vmap`` over ``vjp``'s cotangents or ``jvp``'s tangents) would lose its
#: batch trace if pickled to another process.
_TRACED = (Var, Batched)


def _slot_rule(k, n):
    """Output ``k``'s cotangent as a one-slot dict (no list of n)."""
    def select_pullback(g, ans):
        return _Slots({k: g})
    select_pullback.selects = k  # forward mode: slot k of the map's tangents
    return select_pullback


def _record(plan, bounds, layout, ex, tasks, kept, keep, timeout, f):
    """One node for the map on the caller's tape (its rule sweeps the kept
    chunk tapes, or recomputes chunks with their saved random ``kept``
    states), and one selecting node per output leaf.  A recompute must
    start from what the forward read: the caller's arrays among the tasks
    are the trace's copies where it is kept, and what ``f`` reads besides
    its arguments is checked (as for ``checkpoint``)."""
    tape = plan.top
    leaves = layout.leaves()
    state = None
    if not keep:
        from ..core.custom import check_same_state, state_watch
        state = state_watch(f)
        if tape.owned is not None:
            _own_task_constants(tasks, tape)

    def same_state():
        if state is not None:
            check_same_state(state, f, "parallel_map")

    def parallel_map_pullback(g, ans):
        flat_g = [None] * len(leaves)
        for k, c in g.d.items():
            flat_g[k] = np.asarray(c.todense()) if hasattr(c, "todense") else c
        per_chunk = layout.chunk_cotangents(flat_g)
        traced = any(c.__class__ in _TRACED for cs in per_chunk if cs for c in cs)
        run_ex = SerialExecutor() if (traced or in_worker()) else ex
        todo = [k for k, cs in enumerate(per_chunk) if cs is not None]
        if keep:
            jobs = [(kept[k], per_chunk[k]) for k in todo]
            grads = run_chunks(run_ex, _kept_pullback, jobs, "parallel_map", timeout=timeout)
        else:
            same_state()
            jobs = [(tasks[k], per_chunk[k], kept[k]) for k in todo]
            grads = run_chunks(run_ex, map_chunk_pullback, jobs, "parallel_map",
                               timeout=timeout)
        chunk_grads = [None] * len(bounds)
        for k, gr in zip(todo, grads):
            chunk_grads[k] = gr
        return plan.assemble(bounds, chunk_grads)

    def parallel_map_tangent(ts, batch=None):
        """Forward mode (jvp, linearize, jacfwd): each chunk's output
        tangents from one tangent sweep, over its kept tape (threads) or
        over its forward recomputed in the task (processes, Dask); with
        ``batch``, a batch of tangents (jacfwd's) in one parallel call."""
        per_chunk = plan.chunk_tangents(bounds, ts, batch)
        traced = any(t.__class__ in _TRACED for cs in per_chunk for t in cs)
        run_ex = SerialExecutor() if (traced or in_worker()) else ex
        todo = [k for k, cs in enumerate(per_chunk) if any(t is not None for t in cs)]
        if keep:
            jobs = [(kept[k], per_chunk[k], batch) for k in todo]
            outs = run_chunks(run_ex, _kept_push, jobs, "parallel_map", timeout=timeout)
        else:
            same_state()
            jobs = [(tasks[k], per_chunk[k], kept[k], batch) for k in todo]
            outs = run_chunks(run_ex, map_chunk_jvp, jobs, "parallel_map", timeout=timeout)
        chunk_ts = [None] * len(bounds)
        for k, o in zip(todo, outs):
            chunk_ts[k] = o
        return layout.tangents(chunk_ts, batch)

    # node_tangent calls this instead of transposing the pullback (batches too)
    parallel_map_pullback.custom_jvp = SimpleNamespace(tangent=parallel_map_tangent,
                                                       batched=True)
    outs = record(tape, tuple(leaves), plan.parents(), JointRule(parallel_map_pullback),
                  (), {}, len(leaves), select_rule=_slot_rule)
    return tree_flatten(layout.result)[1].unflatten(list(outs))


def _own_task_constants(tasks, top):
    """The caller's plain arrays among the tasks' items and shared
    arguments (those not differentiated) replaced by the kept trace's
    copies (``Tape.own_constant``: one per array): the recompute reads
    them when the pullback runs, after the caller may have updated them."""
    for t in tasks:
        leaves, td = tree_flatten((t.chunk, t.shared))
        active = set(t.active)
        own = [k for k, x in enumerate(leaves) if k not in active and x.__class__ is np.ndarray]
        if own:
            for k in own:
                leaves[k] = top.own_constant(leaves[k])
            t.chunk, t.shared = td.unflatten(leaves)


def _kept_pullback(job):
    kept, cts = job
    return kept.pullback(cts)


def _kept_push(job):
    kept, ts, batch = job
    return kept.push(ts, batch)
