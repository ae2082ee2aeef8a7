"""``parallel_sum``: Stan's reduce_sum for NumPy code.

Each chunk of items runs on a child tape in a worker, which returns the
chunk's partial sum and its gradient from one reverse sweep; the caller's
tape gets one node whose rule scales those gradients by the incoming
cotangent:  for ``s = sum_i f(x_i, θ)``,  ``x̄_i = s̄ ∂f/∂x_i`` and
``θ̄ = s̄ Σ_chunks Σ_{i in chunk} ∂f/∂θ`` (chunks summed in order).
"""
from __future__ import annotations

import numpy as np

from ..core.backward import JointRule
from ..core.primitive import record
from ..core.pytree import tree_flatten
from .chunks import Plan, _copy, _scale, add_in_order, chunk_bounds, sum_pullback
from .executors import SerialExecutor, ThreadExecutor, check_options, get_executor
from .runner import in_process, run_chunks
from .staged import staged_recorder, staged_sum
from .work import grads_like, sum_chunk
from .vectorized import vectorized


def parallel_sum(f, items, *shared, executor="serial", chunk_size=None, n_workers=None,
                 batched=False, progress=False, timeout=None, vectorize=False):
    """``sum(f(item, *shared) for item in items)``, forward and gradient in parallel.

    ``items``: a list of pytrees, or an array (pytree of arrays) sliced
    along axis 0.  ``executor``: "serial", "threads", "processes", "dask", a
    ``concurrent.futures.Executor`` or a ``dask.distributed.Client``.
    ``chunk_size`` (default: 1/16 of the items; with ``vectorize=True``, at
    least 512 items) fixes the chunks, and with them the bits of the
    result, whatever the executor.  ``batched=True``
    calls ``f(chunk, *shared)`` once per chunk (a list or a slice of items)
    and sums what it returns -- reduce_sum's partial-sum style; ``f``
    must return one number.  ``vectorize=True`` keeps ``f`` per item and
    runs each chunk as one ``tapestry.vmap(f)`` call (batched speed without
    rewriting ``f``; docs/vmap.md).  Differentiable with respect to the items and
    every shared argument.  ``n_workers``: a positive integer, or ``None``
    for one per CPU core.  ``timeout`` (positive seconds for the whole
    call, or ``None``) raises :class:`~tapestry.parallel.ParallelTimeoutError`
    naming the items not finished.  A call from inside a task of
    ``executor`` itself runs in place (serially) instead of waiting on its
    own pool.
    """
    timeout = check_options("parallel_sum", executor, n_workers, timeout)
    if vectorize:
        f, batched = vectorized(f, shared, batched, "parallel_sum", reduce=True)
    if items.__class__ is list and not (batched or progress or timeout is not None) \
            and (executor is None or executor.__class__ is str and executor in _IN_PROCESS) \
            and getattr(f, "_fuse", False):
        out = _compiled_items(f, items, shared, chunk_size, get_executor(executor, n_workers))
        if out is not None:
            return out
    plan = Plan(items, shared, batched, "parallel_sum")
    bounds = chunk_bounds(plan.n, chunk_size, "parallel_sum", vectorize)
    if plan.n == 0:
        return np.float64(0.0)
    if plan.inline:  # inside a jit trace: the chunks as one step of its program
        rec = staged_recorder(plan, executor)
        if rec is not None:
            out = staged_sum(rec, plan, f, bounds, executor, n_workers, progress, timeout)
            if out is not None:
                return out
    ex = SerialExecutor() if plan.inline else get_executor(executor, n_workers)
    if plan.draws and in_process(ex) and not isinstance(ex, SerialExecutor):
        # (a generator among the arguments: threads would draw from it in the
        # order they reach it; in order, the draws are the serial call's)
        ex = SerialExecutor()
    differentiate = plan.top is not None
    tasks = plan.tasks(f, bounds, differentiate, stack_items=isinstance(ex, SerialExecutor))
    results = run_chunks(ex, sum_chunk, tasks, "parallel_sum", progress, timeout)
    plan.check_outputs(_result_leaves(results), isinstance(ex, SerialExecutor))
    value = add_in_order([r[0] for r in results])
    if not differentiate:
        return value
    stored = plan.assemble(bounds, [r[1] for r in results])
    if any(len(r) == 3 for r in results):  # a complex sum
        stored_i = plan.assemble(bounds, [r[2] if len(r) == 3 else None for r in results])
        return record(plan.top, value, plan.parents(),
                      JointRule(_complex_pullback(stored, stored_i)), (), {})
    return record(plan.top, value, plan.parents(), JointRule(sum_pullback(stored, plan.top)),
                  (), {})


def _compiled_items(f, items, shared, chunk_size, ex):
    """A jitted ``f`` whose program is one compiled loop over the items:
    every chunk in one call of it per thread, off the GIL, with no
    per-chunk Python (tapestry.jit.items.sum_items); ``None``: run the
    chunks as tasks."""
    if ex.__class__ is not SerialExecutor and ex.__class__ is not ThreadExecutor:
        return None  # (in a worker of its own pool, "threads" runs serially)
    from ..jit.items import sum_items
    out = sum_items(f, items, shared, chunk_bounds(len(items), chunk_size, "parallel_sum"),
                    ex, add_in_order, grads_like)
    if out is None:
        return None
    top, value, parents, grads = out
    return record(top, value, parents, JointRule(sum_pullback(grads, top)), (), {})


#: Executors whose chunks may run as one compiled loop over the items
#: (:func:`tapestry.jit.items.sum_items`).
_IN_PROCESS = ("serial", "threads")


def _result_leaves(results):
    """The leaves of the chunks' results, ``(value, [gradient, ...])`` (a
    third entry for a complex sum), for :meth:`Plan.check_outputs`: its
    ``tree_flatten`` without walking the known structure."""
    out = []
    for r in results:
        if type(r) is not tuple or not all(type(p) is list for p in r[1:]):
            return tree_flatten(results)[0]
        out.append(r[0])
        for part in r[1:]:
            out += part
    return out


def _complex_pullback(stored, stored_i):
    """The pullback of a complex sum.  A VJP is real-linear in its
    cotangent, so ``vjp(a + ib) = a vjp(1) + b vjp(1j)``: the chunks kept
    both (``stored``, ``stored_i``).  Scaling ``vjp(1)`` by a complex ``g``
    instead would be wrong (the gradient of ``np.imag(parallel_sum(...))``
    came out as zero).  A real chunk's ``vjp(1j)`` is zero (``None``)."""
    def parallel_sum_pullback(g, ans):
        re, im = np.real(g), np.imag(g)
        out = []
        for c, ci in zip(stored, stored_i):
            a, b = _scale(re, c), _scale(im, ci)
            # (a scale by 1 or 0 hands on a stored array: a copy, for the
            # reasons of sum_pullback's later calls)
            out.append(_copy(a) if b is None else _copy(b) if a is None else a + b)
        return out
    return parallel_sum_pullback
