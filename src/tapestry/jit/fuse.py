"""Fusing runs of elementwise steps of a recorded program into numba loops.

A replay makes one NumPy call per operation, and on small arrays NumPy's
call (0.3-0.7 us) is the whole cost.  A run of consecutive elementwise steps
of one shape -- arithmetic and the common float64 functions, the forward of
a chain and, under ``jit(grad(f))``, the rules of its backward -- becomes
one loop compiled with numba: one call per run, every intermediate in a
register, ``nogil=True`` (threads replaying at once run these loops in
parallel).  The source goes to a file under the cache directory, so
``cache=True`` keeps the machine code across processes.

Fused loops compute with the C library's ``sin``, ``log``, ... and with
:mod:`tapestry.jit.vmath` for ``exp`` and ``tanh``, where NumPy uses its own SIMD
versions: results agree within a few ulp (tested within 1e-13 relative),
not bit for bit.  On large arrays NumPy's SIMD transcendentals beat a
scalar loop's libm calls, so runs over arrays above
:data:`MAX_TRANSCENDENTAL_SIZE` elements fuse only arithmetic, ``exp`` and
``tanh`` (whose loop code vectorizes); above :data:`LARGE` elements even
those two stay NumPy's where NumPy's are more than :data:`LOOP_MARGIN` times
faster than the loop's, counting the cores each would use (measured once
per process, :func:`loop_over_numpy`).

A large run also computes the sums of its results that nothing else reads
(:func:`_absorbed_sums`): a whole sum or a sum over the last axis, added
block by block in the loop, the blocks' partial sums in NumPy's pairwise
sum.  W6's value and gradient then read their inputs once and write no
(G, 20) array at all: on two cores the loop was memory-bound before.

A loop writes its results in C order; where NumPy would lay one out
otherwise (order "K": from an F-ordered argument or a transposed view),
the run makes NumPy's calls instead (decided once per layout of the inputs).

A program that calls BLAS (``@``, ``dot``, ``einsum``, ``linalg``) runs
its loops on the calling thread only: after each GEMM on several threads,
OpenBLAS's threads spin for about 0.1 s, and a loop cut over a pool then
shares their cores (W4 at 64 models: its GEMMs ran 6x slower, the call
2.7x).  Arithmetic-only runs give NumPy's bits (each element is the same
exactly rounded operations; numba does not contract them into FMAs), so a
single step whose operand broadcasts along the last axis -- where NumPy
makes one short inner loop per row (a bias added to every row) -- is a
run of its own.
"""
from __future__ import annotations

import functools
import importlib.util
import math
import operator
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from ..core.staged import Slot, Step
from ..kernels.compile_numba import cache_dir, load_source
from .slots import output_slots, reads_of
from .split import _cores, c_ordered

#: scalar expression of each fusible operation (``{0}``, ``{1}``: operands)
_ARITH = {
    np.add: "({0} + {1})", operator.add: "({0} + {1})",
    np.subtract: "({0} - {1})", operator.sub: "({0} - {1})",
    np.multiply: "({0} * {1})", operator.mul: "({0} * {1})",
    np.true_divide: "({0} / {1})", operator.truediv: "({0} / {1})",
    np.negative: "(-{0})", operator.neg: "(-{0})",
    np.square: "({0} * {0})", np.absolute: "abs({0})", operator.abs: "abs({0})",
    np.fabs: "abs({0})",
    np.sign: "(1.0 if {0} > 0.0 else (-1.0 if {0} < 0.0 else ({0} if {0} != {0} else 0.0)))",
}
_TRANSCENDENTAL = {
    np.sin: "math.sin({0})", np.cos: "math.cos({0})", np.tan: "math.tan({0})",
    np.exp: "vexp({0})", np.log: "math.log({0})", np.log1p: "math.log1p({0})",
    np.expm1: "math.expm1({0})", np.tanh: "vtanh({0})", np.sinh: "math.sinh({0})",
    np.cosh: "math.cosh({0})", np.sqrt: "math.sqrt({0})", np.arctan: "math.atan({0})",
    np.arcsinh: "math.asinh({0})",
}
#: Runs over arrays larger than this fuse arithmetic only (NumPy's SIMD
#: transcendentals are faster than a scalar loop's libm calls there) and
#: ``exp``, whose loop version (:mod:`tapestry.jit.vmath`) vectorizes.
MAX_TRANSCENDENTAL_SIZE = 1024
#: Functions computed by straight-line code the loop vectorizes, fused at any
#: size, with the test of an argument outside what that code computes (the
#: run is then recomputed with NumPy).
_VECTORIZED = {np.exp: "(not exp_in_range({0}))", np.tanh: "({0} != {0})"}
#: Shortest run worth a loop (one step is enough for a step NumPy runs row
#: by row, :func:`_rowwise`, over at least ``ROWWISE_MIN`` elements).
MIN_RUN = 2
ROWWISE_MIN = 1 << 12
#: Runs over at least this many elements leave ``exp`` / ``tanh`` to NumPy
#: where its SIMD version beats the loop's by :data:`LOOP_MARGIN`
#: (:func:`loop_over_numpy`).
LARGE = 1 << 16
#: How many times slower than NumPy's a loop's ``exp`` / ``tanh`` may be,
#: per element and core, and still join it: NumPy's costs a pass of its
#: own, whose argument and result go through memory.  Measured with the
#: loop's 1.0-1.2x NumPy's on one thread: W6 at 100,000 groups on one
#: thread 6.35 against 8.63 ms with ``exp`` in the loop (break-even near
#: 1.5-2x); W4's 64 models, a BLAS program whose loops stay on one thread
#: while NumPy's ``tanh`` is cut over two cores, 6.4 against 4.6 ms with
#: ``tanh`` in the loop (break-even near 0.75x per core, so 1.5 over two).
LOOP_MARGIN = 1.5
_F8 = np.dtype(np.float64)
#: Scalar types a run computes in (a Python float stays one: its weak type
#: decides the dtype of what it meets later).
_FLOAT64 = (float, np.float64)


def available():
    """numba importable and not disabled (``TAPESTRY_NO_NUMBA=1``)."""
    if os.environ.get("TAPESTRY_NO_NUMBA", "") not in ("", "0"):
        return False
    return importlib.util.find_spec("numba") is not None


def _broadcasts(small, shape):
    """Whether an operand of shape ``small`` broadcasts to ``shape`` (NumPy's
    rule: aligned from the right, each dimension equal or 1)."""
    if len(small) > len(shape):
        return False
    off = len(shape) - len(small)
    return all(d == shape[off + k] or d == 1 for k, d in enumerate(small))


def _operand_ok(a, shape, meta, scalars):
    """Whether ``a`` can enter a run of ``shape``: a float64 slot or
    constant array that broadcasts to it (``x @ W + b``'s ``b``), a float64
    scalar slot, or a float / int / float64 constant."""
    c = a.__class__
    if c is Slot:
        m = meta.get(a.i)
        if m is not None:
            return m[1] == _F8 and _broadcasts(m[0], shape)
        return scalars.get(a.i) in _FLOAT64
    if c is float or (c is int and abs(a) < 2 ** 53) or c is np.float64:
        return math.isfinite(a)
    if c is np.ndarray and a.dtype == _F8:  # a constant (a sum's cotangent of ones)
        if a.shape == ():
            return math.isfinite(a[()])
        return _broadcasts(a.shape, shape)
    return False


def _fusible(step, meta, scalars, serial=False):
    """The run shape of ``step`` if it can be fused, else ``None``
    (``serial``: the program's loops run on the calling thread only)."""
    if step.kind != "call" or step.out is None or step.kwargs or step.err:
        return None  # (an np.errstate around the call: NumPy's checks, not a loop's)
    fn = step.fn
    if fn not in _ARITH and fn not in _TRANSCENDENTAL:
        e = step.args[1] if fn is operator.pow and len(step.args) == 2 else None
        if e.__class__ in (int, float) and e == 2:
            pass  # x ** 2: NumPy's square
        else:
            return None
    if step.out in meta:
        shape, dt = meta[step.out]
        if dt != _F8:
            return None
    elif scalars.get(step.out) in _FLOAT64:
        shape = ()
    else:
        return None
    if fn in _TRANSCENDENTAL:
        size = int(np.prod(shape))
        if size > MAX_TRANSCENDENTAL_SIZE and fn not in _VECTORIZED:
            return None
        if size >= LARGE:
            cores = _parts(shape)  # (NumPy's step may be cut over them; a serial loop is not)
            if loop_over_numpy(fn) * cores > LOOP_MARGIN * (1 if serial else cores):
                return None  # NumPy's SIMD version is faster than the loop on its cores
    if not all(_operand_ok(a, shape, meta, scalars) for a in step.args):
        return None
    return shape


#: Functions that make a view of their argument (no arithmetic): a run may
#: move them ahead of itself, so a product with a transposed, broadcast
#: operand (W4's backward) joins the run.
_VIEWS = frozenset({np.swapaxes, np.transpose, np.broadcast_to, np.reshape, np.expand_dims,
                    np.squeeze, np.moveaxis})

#: How many steps a run may reach past that it cannot absorb (a ``sum``
#: between a forward chain and the backward chain that does not read it).
LOOKAHEAD = 64


def fuse(steps, live, outputs, meta, scalars):
    """``steps`` with each run of fusible steps replaced by one call step
    (a compiled loop returning a tuple) and ``item`` steps for the values
    read outside the run.  Returns ``(steps, live, n_runs)``.

    A run grows past a step it cannot absorb (a reduction, a matmul) to
    the fusible steps after it that read nothing that step, or another
    step passed over, made: they are computed earlier, in the run, which
    changes no value (every step is pure) and lets the backward chain of
    ``jit(grad(f))`` join its forward chain in one loop.  A view step
    passed over (``swapaxes``, ``broadcast_to``, ...) of values made
    before the run moves ahead of it instead of blocking what reads it."""
    n = len(steps)
    serial = calls_blas(steps)
    taken = [False] * n
    readers: dict = {}  # slot -> the live steps reading it
    for j in range(n):
        if live[j]:
            for r in reads_of(steps[j]):
                readers.setdefault(r, []).append(j)
    next_slot = max([s.out for s in steps if s.out is not None] + [-1]
                    + list(output_slots(outputs))) + 1
    out_steps, out_live, runs = [], [], 0
    for k in range(n):
        if not live[k] or taken[k]:
            continue
        shape = _fusible(steps[k], meta, scalars, serial)
        if shape is None:
            out_steps.append(steps[k])
            out_live.append(True)
            continue
        run, blocked, missed = [k], set(), 0
        hoisted, run_made = [], {steps[k].out}
        for j in range(k + 1, n):
            if not live[j] or taken[j]:
                continue
            s = steps[j]
            if s.kind == "call" and s.out is None:
                break  # a write in place: nothing moves past it
            reads = reads_of(s)
            if _fusible(s, meta, scalars, serial) == shape and not blocked.intersection(reads):
                run.append(j)
                run_made.add(s.out)
                missed = 0
                continue
            if s.kind == "call" and (s.fn in _VIEWS or s.fn is _reshape_function()) \
                    and s.out is not None and \
                    not blocked.intersection(reads) and not run_made.intersection(reads):
                hoisted.append(j)  # a view of what exists before the run: made before it
                continue
            if s.out is not None:
                blocked.add(s.out)
            missed += 1
            if missed > LOOKAHEAD:
                break
        if len(run) < MIN_RUN and not _rowwise(steps[k], shape, meta):
            out_steps.append(steps[k])
            out_live.append(True)
            continue
        for i in run + hoisted:
            taken[i] = True
        for i in hoisted:
            out_steps.append(steps[i])
            out_live.append(True)
        made = {steps[i].out for i in run}
        views = _broadcast_sources(steps, live, meta, shape)
        inside = set(run)
        read_outside = output_slots(outputs)
        for j in range(n):
            if live[j] and j not in inside:
                read_outside.update(reads_of(steps[j]))
        results = [steps[i].out for i in run if steps[i].out in read_outside]
        sums = _absorbed_sums(steps, live, taken, readers, inside, results, outputs, shape,
                              meta, scalars)
        summed = {r for _, r, _ in sums}
        results = [r for r in results if r not in summed]
        if not results and not sums:  # (nothing reads what the run makes: its steps as they are)
            for i in run:
                out_steps.append(steps[i])
                out_live.append(True)
            continue
        for j, _, _ in sums:
            taken[j] = True
        fn, inputs = _compile_run([_through(steps[i], views) for i in run], made, results,
                                  shape, meta, scalars, serial,
                                  [(kind, r, steps[j]) for j, r, kind in sums])
        tup = next_slot
        next_slot += 1
        out_steps.append(Step("call", fn, tuple(Slot(i) for i in inputs), None, tup))
        out_live.append(True)
        for pos, r in enumerate(results + [steps[j].out for j, _, _ in sums]):
            out_steps.append(Step("item", None, (Slot(tup), pos), None, r))
            out_live.append(True)
        runs += 1
    return out_steps, out_live, runs


def _broadcast_sources(steps, live, meta, shape):
    """``{slot: source}`` for the float64 arrays made by ``np.broadcast_to``
    whose source broadcasts to a run of ``shape`` by itself.  The run reads
    the source: a loop over the view cannot know its strides are 0 (numba
    compiles any-layout indexing, which does not vectorize), over the
    source it reads one element per row."""
    views = {}
    for k, s in enumerate(steps):
        if live[k] and s.kind == "call" and s.fn is np.broadcast_to and s.out is not None \
                and not s.kwargs and s.args and s.args[0].__class__ is Slot:
            m = meta.get(s.args[0].i)
            if m is not None and m[1] == _F8 and _broadcasts(m[0], shape):
                views[s.out] = s.args[0]
    return views


def _through(step, views):
    """``step`` reading the sources of the broadcast views among its
    operands (the values are the same, element by element)."""
    if not views or not any(a.__class__ is Slot and a.i in views for a in step.args):
        return step
    args = tuple(views.get(a.i, a) if a.__class__ is Slot else a for a in step.args)
    return Step(step.kind, step.fn, args, step.kwargs, step.out, step.value, step.site,
                step.inplace, step.err)


# --- sums taken into a run ---------------------------------------------------------
#: Runs over at least this many elements compute the sums of their results
#: that nothing else reads (W6's value and gradient: five sums of (G, 20)
#: arrays) inside the loop: the array is never written and read back, which
#: on large arrays is most of the memory traffic, and what kept a run cut
#: over the cores from scaling with them.
SUM_MIN = 1 << 15
#: Elements of the last axis added in order, in a register, before the
#: partial sums meet in NumPy's pairwise sum (NumPy's own block length).
SUM_BLOCK = 128


def _absorbed_sums(steps, live, taken, readers, inside, results, outputs, shape, meta,
                   scalars):
    """``[(step index, slot, kind)]``: the sums the run computes in its
    loop -- every step outside the run reading a result ``slot`` is a sum of
    it (``kind``: ``"all"`` axes, or the ``"last"``), and the result is no
    output -- so the result itself is never made."""
    if len(shape) == 0 or int(np.prod(shape)) < SUM_MIN:
        return []
    outs = output_slots(outputs)
    got = []
    for r in results:
        if r in outs:
            continue
        js = [j for j in readers.get(r, ()) if j not in inside]
        kinds = [_sum_kind(steps[j], r, shape, meta, scalars)
                 if live[j] and not taken[j] else None for j in js]
        if js and None not in kinds:
            got += [(j, r, kind) for j, kind in zip(js, kinds)]
    return got


def _sum_kind(step, r, shape, meta, scalars):
    """``"all"`` where ``step`` sums slot ``r`` (a float64 array of
    ``shape``) over every axis into an ``np.float64``, ``"last"`` where over
    its last axis into a float64 array, else ``None``."""
    if step.kind != "call" or step.out is None or step.err:
        return None
    fn, args, kw = step.fn, step.args, step.kwargs or {}
    d = len(shape)
    if fn is _sum_function() and len(args) == 3 and not kw:
        a, axis, keepdims = args
    elif fn == np.add.reduce and len(args) == 1 and set(kw) <= {"axis"}:
        a, axis, keepdims = args[0], kw.get("axis", 0), False
    elif fn is np.einsum and len(args) == 2 and not kw and args[0].__class__ is str:
        spec = args[0].replace(" ", "")
        ins, _, out = spec.partition("->")
        if not _ or len(ins) != d or len(set(ins)) != d or not ins.isalpha() \
                or not ins.startswith(out) or len(out) not in (0, d - 1):
            return None
        a, axis, keepdims = args[1], tuple(range(len(out), d)), False
    else:
        return None
    if a.__class__ is not Slot or a.i != r or keepdims is not False:
        return None
    if axis is None:
        axes = set(range(d))
    else:
        try:
            axes = {int(a) % d for a in (axis if axis.__class__ is tuple else (axis,))}
        except (TypeError, ValueError):
            return None
    if axes == set(range(d)):
        return "all" if step.out not in meta and scalars.get(step.out) is np.float64 else None
    if axes == {d - 1} and meta.get(step.out) == (tuple(shape[:-1]), _F8):
        return "last"
    return None


@functools.lru_cache(maxsize=None)
def _reshape_function():
    """The function tapestry's ``reshape`` primitive records (``np.reshape``
    with its order spelled out: a view where NumPy makes one)."""
    from ..ops.shape import _reshape_fun
    return _reshape_fun


@functools.lru_cache(maxsize=None)
def _sum_function():
    """The function tapestry's ``sum`` primitive records (imported on
    first use: the ops import the engine this package lowers)."""
    from ..ops.reductions import _sum_fun
    return _sum_fun


#: Functions whose calls run on BLAS (or LAPACK, which calls BLAS).
_BLAS_NAMES = frozenset({"matmul", "dot", "vdot", "inner", "tensordot", "einsum", "kron"})


def calls_blas(steps):
    """Whether any step calls BLAS: the program's loops then stay on the
    calling thread (see the module docstring)."""
    for s in steps:
        if s.kind == "call":
            fn = s.fn
            name = getattr(fn, "__name__", None)
            if name == "einsum":  # one operand (a row sum, unbroadcasting): NumPy's loop
                if sum(a.__class__ is not str for a in s.args) >= 2:
                    return True
            elif name in _BLAS_NAMES or \
                    str(getattr(fn, "__module__", None)).startswith(("numpy.linalg", "scipy.linalg")):
                return True
    return False


def _rowwise(step, shape, meta):
    """Whether NumPy runs ``step`` row by row: an array operand broadcast
    along the last axis (``h + b[:, None]``), so its inner loop is one row
    long, over at least :data:`ROWWISE_MIN` elements.  A loop is faster
    there, and for arithmetic the bits are NumPy's."""
    if step.fn in _TRANSCENDENTAL or len(shape) < 2 or shape[-1] < 2 or \
            int(np.prod(shape)) < ROWWISE_MIN:
        return False
    for a in step.args:
        small = meta[a.i][0] if a.__class__ is Slot and a.i in meta else \
            (a.shape if a.__class__ is np.ndarray else ())
        if len(small) >= 2 and small[-1] == 1 and any(d > 1 for d in small):
            return True
    return False


@functools.lru_cache(maxsize=None)
def loop_over_numpy(fn):
    """How many times longer the fused loop's ``exp`` / ``tanh`` takes than
    NumPy's, per element on one thread, measured once per process on
    :data:`LARGE` elements (medians of 5).  ``TAPESTRY_JIT_LOOP_OVER_NUMPY``
    (a number) replaces the measurement."""
    fixed = os.environ.get("TAPESTRY_JIT_LOOP_OVER_NUMPY", "")
    if fixed:
        return float(fixed)
    name = {np.exp: "vexp", np.tanh: "vtanh"}[fn]
    kern = _load(f"from numba import njit\nfrom tapestry.jit.vmath import {name}"
                 f"  # vmath {_vmath_version()}\n\n"
                 '@njit(nogil=True, cache=True, error_model="numpy")\n'
                 "def kern(x, o):\n    for i in range(x.shape[0]):\n"
                 f"        o[i] = {name}(x[i])\n")
    x = np.linspace(-3.0, 3.0, LARGE)
    o = np.empty_like(x)

    def best(call):
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        return sorted(times)[2]
    kern(x, o)
    return best(lambda: kern(x, o)) / best(lambda: fn(x, out=o))


def _index(small, shape):
    """The subscript of an operand of shape ``small`` at the loop indices
    ``i0, i1, ...`` of a run of ``shape`` (0 along its broadcast axes)."""
    off = len(shape) - len(small)
    return ", ".join("0" if d == 1 and shape[off + k] != 1 else f"i{off + k}"
                     for k, d in enumerate(small))


def _compile_run(run, made, results, shape, meta, scalars, serial=False, sums=()):
    """The Python function computing ``results`` of a run from its inputs
    (then the values of the ``sums``: ``(kind, slot, step)``, see
    :func:`_absorbed_sums`), and the input slots in the order it takes them
    (``serial``: never cut over threads)."""
    inputs, names, arrays, consts, body, ranges = _run_body(run, made, shape, meta, scalars)
    # an inf or a nan anywhere sends the run to NumPy; t - t is 0.0 unless t is one
    odd = " + ".join(f"(t{v} - t{v})" for v in _unchecked(run, {r for _, r, _ in sums}))
    odd = " | ".join(([f"(({odd}) != 0.0)"] if odd else []) + ranges) or "False"
    params = [f"a{k}" if i in arrays else names[i] for k, i in enumerate(inputs)]
    params += [f"b{j}" for j in range(len(consts))]
    lines = ["import math", "import numpy as np", "from numba import njit",
             f"from tapestry.jit.vmath import exp_in_range, vexp, vtanh  # vmath {_vmath_version()}", "",
             '@njit(nogil=True, cache=True, error_model="numpy")']
    numpy_run = _numpy_run(run + [s for _, _, s in sums], inputs,
                           results + [s.out for _, _, s in sums])
    if shape == ():
        lines.append(f"def kern({', '.join(params)}):")
        lines += [f"    {b}" for b in body]
        lines.append(f"    return ({', '.join(f't{r}' for r in results)}, {odd})")
        kern = _load("\n".join(lines) + "\n")
        kinds = tuple(scalars.get(r, np.float64) for r in results)

        def run_scalar(*args):
            got = kern(*[a[()] if a.__class__ is np.ndarray else a for a in args])
            if got[-1]:  # an inf or a nan: NumPy's (or Python's) errors and bits
                return numpy_run(args)
            return tuple(k(r) for k, r in zip(kinds, got[:-1]))
        return _named(run_scalar, len(run)), inputs
    summed = list(dict.fromkeys(r for _, r, _ in sums))  # each summed result: one buffer
    lines += _loops(params, arrays, inputs, consts, body, results, summed, odd, shape)
    kern = _load("\n".join(lines) + "\n")
    n_out = len(results)
    expect = [arrays.get(i) for i in inputs]
    fixed = list(consts)
    d = len(shape)
    blocks = -(-shape[-1] // SUM_BLOCK) if d == 1 or shape[-1] > SUM_BLOCK else 1
    units = shape[0] if d > 1 else blocks  # what threads share: rows, or a 1-d run's blocks
    sizes = list(shape[1:]) if d > 1 else [shape[0]]
    finish = [(kind, summed.index(r)) for kind, r, _ in sums]
    c_results = {}  # the inputs' strides -> whether NumPy makes every result C-ordered

    def run_arrays(*given):
        # the loop trusts its shapes: never let it index past an array
        args = list(given)
        c_order = True
        for k, (a, want) in enumerate(zip(args, expect)):
            if want is None:
                if a.__class__ is np.ndarray:
                    args[k] = a[()]
            elif a.__class__ is not np.ndarray or a.shape != want:
                raise ValueError(f"a fused loop expected shape {want}, got {np.shape(a)}")
            elif c_order and len(want) > 1 and not a.flags.c_contiguous and not c_ordered(a):
                c_order = False
        if not c_order and n_out:
            # NumPy lays a result out as its operands (order "K": an F-ordered
            # argument, a transposed view), the loop in C order: where NumPy's
            # results are not all C-contiguous, its calls make them
            key = tuple(a.strides if a.__class__ is np.ndarray else None for a in given)
            ok = c_results.get(key)
            if ok is None:
                got = numpy_run(given)
                if len(c_results) >= 64:  # (views of ever new layouts: stay bounded)
                    c_results.clear()
                c_results[key] = all(np.ndim(r) < 2 or r.flags.c_contiguous
                                     for r in got[:n_out])
                return got
            if not ok:
                return numpy_run(given)
        outs = [np.empty(shape) for _ in range(n_out)]
        part = [np.empty(shape[:-1] + (blocks,)) for _ in summed]
        parts = 1 if serial else max(1, min(_parts(shape), units))
        if parts == 1:
            odd = kern(*args, *fixed, *outs, *part, *sizes, 0, units)
        else:
            odd = _in_threads(kern, args + fixed + outs + part + sizes, units, parts)
        if odd:  # an inf or a nan: NumPy's errors and bits
            return numpy_run(given)
        if not finish:
            return tuple(outs)
        got = [_finish_sum(kind, part[k], blocks) for kind, k in finish]
        if not all(math.isfinite(v) if v.__class__ is np.float64 else np.isfinite(v).all()
                   for v in got):
            return numpy_run(given)  # (a sum overflowed: NumPy's warning and bits)
        return tuple(outs) + tuple(got)
    return _named(run_arrays, len(run)), inputs


#: Functions whose result is an inf or a nan whenever the operand at these
#: positions is one (``inf * 0`` is nan, ``inf - inf`` is nan, ``sin(inf)``
#: is nan).  A division's denominator is not among them (``1 / inf`` is 0),
#: nor ``sign``, ``tanh``, ``arctan``, ``expm1`` (finite at an infinity).
_CARRIES = {fn: (0, 1) for fn in (np.add, operator.add, np.subtract, operator.sub,
                                  np.multiply, operator.mul)}
_CARRIES.update({fn: (0,) for fn in (
    np.true_divide, operator.truediv, np.negative, operator.neg, np.square, np.absolute,
    operator.abs, np.fabs, operator.pow, np.sin, np.cos, np.tan, np.log, np.log1p, np.sinh,
    np.cosh, np.sqrt, np.arcsinh)})


def _unchecked(run, summed):
    """The values of ``run`` (slots, in run order) the loop must test for an
    inf or a nan itself.  Every other value is seen through what it flows
    into: a value summed in the loop (its sum is tested after), the
    argument of ``vexp`` (its range test fails on an inf or a nan), or an
    operand that an inf or a nan always reaches the result of
    (:data:`_CARRIES`) where that result is seen.  W6's loop tests only its
    ``exp`` argument: the tests of its ten values cost a third of it."""
    seen = set(summed)
    test = []
    for s in reversed(run):  # (a value's readers come after it: whether each is seen is known)
        v = s.out
        if s.fn is np.exp:
            seen.add(v)  # finite wherever its argument passes the range test
        elif v not in seen:
            test.append(v)
            seen.add(v)
        for pos, a in enumerate(s.args):
            if a.__class__ is Slot and (pos in _CARRIES.get(s.fn, ()) or s.fn is np.exp):
                seen.add(a.i)
    return sorted(test)


def _run_body(run, made, shape, meta, scalars):
    """The loop body of a run: ``(inputs, names, arrays, consts, body,
    ranges)`` -- the input slots in parameter order, their names in the
    body, the array inputs' shapes, the constant arrays (passed after the
    inputs), the body's lines and the range tests of its ``vexp`` /
    ``vtanh`` arguments (outside, the run is NumPy's)."""
    inputs: list = []    # slots read, in parameter order
    names: dict = {}     # slot -> its name in the loop body
    arrays: dict = {}    # slot -> its shape, for the array inputs
    consts: list = []    # constant arrays, passed after the inputs
    scalar = shape == ()

    def operand(a):
        if a.__class__ is Slot:
            if a.i in made:
                return f"t{a.i}"
            if a.i not in names:
                k = len(inputs)
                m = meta.get(a.i)
                if not scalar and m is not None and m[0] != ():
                    arrays[a.i] = m[0]
                    names[a.i] = f"x{k}"
                else:
                    names[a.i] = f"s{k}"
                inputs.append(a.i)
            return names[a.i]
        if a.__class__ is np.ndarray and a.shape != ():
            for j, c in enumerate(consts):
                if c is a:
                    return f"y{j}"
            consts.append(a)
            return f"y{len(consts) - 1}"
        return repr(float(a[()] if a.__class__ is np.ndarray else a))

    body, ranges = [], []
    for s in run:
        ops = [operand(a) for a in s.args]
        if s.fn is operator.pow:
            expr = f"({ops[0]} * {ops[0]})"
        else:
            expr = (_ARITH.get(s.fn) or _TRANSCENDENTAL[s.fn]).format(*ops)
        if s.fn in _VECTORIZED:
            ranges.append(_VECTORIZED[s.fn].format(ops[0]))
        body.append(f"t{s.out} = {expr}")
    return inputs, names, arrays, consts, body, ranges


def _loops(params, arrays, inputs, consts, body, results, summed, odd, shape):
    """The kernel of an array run: ``kern(inputs, consts, outs, partial
    sums, sizes of axes 1.. (of a 1-d run: its length), lo, hi)`` over the
    units ``[lo, hi)`` -- rows (axis 0), or blocks of :data:`SUM_BLOCK`
    elements of a 1-d run -- so threads share one call's arrays without
    slicing them.  A summed result goes to a buffer one block long (the loop
    over the block still vectorizes), whose sum in order is the block's
    partial sum."""
    d = len(shape)
    outs = [f"o{k}" for k in range(len(results))]
    sums = [f"p{k}" for k in range(len(summed))]
    sizes = [f"n{k}" for k in range(1, d)] if d > 1 else ["n0"]
    last, n_last = f"i{d - 1}", f"n{d - 1}"
    lines = [f"def kern({', '.join(params + outs + sums + sizes)}, lo, hi):", "    odd = False"]
    lines += [f"    w{k} = np.empty({SUM_BLOCK})" for k in range(len(summed))]
    # rows longer than a block (and a 1-d run) are cut into blocks; the loop
    # over a block runs over its own counter (LLVM vectorizes that form)
    blocked = d == 1 or (bool(summed) and shape[-1] > SUM_BLOCK)
    if d == 1:
        lines.append("    for blk in range(lo, hi):")
    else:
        lines.append("    for i0 in range(lo, hi):")
        ind = "        "
        for k in range(1, d - 1):
            lines.append(f"{ind}for i{k} in range(n{k}):")
            ind += "    "
        if blocked:
            lines.append(f"{ind}for blk in range(({n_last} + {SUM_BLOCK - 1}) // {SUM_BLOCK}):")
    ind = "    " * (d + (1 if blocked else 0))
    if blocked:
        lines += [f"{ind}blo = blk * {SUM_BLOCK}", f"{ind}bhi = min(blo + {SUM_BLOCK}, {n_last})",
                  f"{ind}for q in range(bhi - blo):", f"{ind}    {last} = blo + q"]
        at_w = "q"
    else:
        lines += [f"{ind}blo = 0", f"{ind}bhi = {n_last}", f"{ind}for {last} in range({n_last}):"]
        at_w = last
    inner = ind + "    "
    full = ", ".join(f"i{k}" for k in range(d))
    lines += [f"{inner}x{k} = a{k}[{_index(arrays[i], shape)}]"
              for k, i in enumerate(inputs) if i in arrays]
    lines += [f"{inner}y{j} = b{j}[{_index(c.shape, shape)}]" for j, c in enumerate(consts)]
    lines += [f"{inner}{b}" for b in body]
    lines += [f"{inner}{o}[{full}] = t{r}" for o, r in zip(outs, results)]
    lines += [f"{inner}w{k}[{at_w}] = t{r}" for k, r in enumerate(summed)]
    lines.append(f"{inner}odd |= {odd}")
    at = ", ".join([f"i{k}" for k in range(d - 1)] + ["blk" if blocked else "0"])
    # the buffers added up in one loop: each in order, the sums' chains of
    # additions side by side (one after another, each waited on its latency)
    if summed:
        lines += [f"{ind}acc{k} = 0.0" for k in range(len(summed))]
        lines.append(f"{ind}for q in range(bhi - blo):")
        lines += [f"{ind}    acc{k} += w{k}[q]" for k in range(len(summed))]
        lines += [f"{ind}p{k}[{at}] = acc{k}" for k in range(len(summed))]
    lines.append("    return odd")
    return lines


def _finish_sum(kind, part, blocks):
    """A sum from its partial sums (one per block of each last-axis row):
    the whole sum (NumPy's pairwise sum of the partials, an ``np.float64``)
    or the rows' sums."""
    if kind == "all":
        return np.add.reduce(part, axis=None)
    if blocks == 1:
        return part.reshape(part.shape[:-1])
    return np.add.reduce(part, axis=-1)


# --- large runs on several cores -------------------------------------------------------
#: Elements per thread below which a run stays on the calling thread (a
#: thread's hand-off costs ~20 us; a loop does ~1e8 elements a second).
SPLIT_MIN = 1 << 16
_pool = None
_pool_lock = threading.Lock()


#: Threads a run may use (``TAPESTRY_JIT_THREADS``, else the cores this
#: process may run on).
THREADS = int(os.environ.get("TAPESTRY_JIT_THREADS", "0") or 0) or _cores()


def _parts(shape):
    """How many pieces along axis 0 a run of ``shape`` is cut into: one
    inside a ``parallel_sum`` / ``parallel_map`` worker, whose siblings
    already hold the other cores."""
    if THREADS < 2 or not shape or _in_worker():
        return 1
    size = 1
    for d in shape:
        size *= d
    return max(1, min(THREADS, shape[0], size // SPLIT_MIN))


def _in_worker():
    """Whether this thread runs a chunk of ``parallel_sum`` / ``parallel_map``
    (``tapestry.parallel.executors.in_worker``; looked up, not imported:
    parallel imports jit, and no worker exists before parallel is loaded)."""
    executors = sys.modules.get("tapestry.parallel.executors")
    return executors is not None and executors.in_worker()


def _forget_pool_in_child():
    """A forked child (a worker of a process pool started with 'fork') has
    the pool object but none of its threads: pieces put on it would never
    run, and the call would wait for them forever.  It starts its own."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def _in_threads(kern, args, units, parts):
    """``kern(*args, lo, hi)`` on ``parts`` ranges of its ``units`` (rows,
    or a 1-d run's blocks), the first on this thread and the others on a
    pool (the loops hold no GIL: ``nogil=True``).  Each element is computed
    as in one call, so the bits are the same; the odd flag is any range's."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max(1, THREADS - 1),
                                           thread_name_prefix="tapestry-jit-loop")
    bounds = [units * k // parts for k in range(parts + 1)]
    futures = [_pool.submit(kern, *args, bounds[k], bounds[k + 1]) for k in range(1, parts)]
    try:
        odd = kern(*args, bounds[0], bounds[1])
    finally:
        wait(futures)  # no piece outlives the call, even when one raised
    for f in futures:
        odd |= f.result()
    return odd


def _numpy_run(run, inputs, results):
    """The run's steps as NumPy calls, one by one, as the replay would make
    them: what a fused run falls back to when it meets an inf or a nan.
    NumPy's error state (``np.errstate(divide="raise")`` around the call),
    its warnings, a Python float's ``ZeroDivisionError`` and the bits of a
    nan are then the plain call's, which a compiled loop cannot reproduce."""
    def value(a, env):
        return env[a.i] if a.__class__ is Slot else a

    def numpy_run(args):
        env = dict(zip(inputs, args))
        for s in run:
            kw = {k: value(v, env) for k, v in s.kwargs.items()} if s.kwargs else {}
            env[s.out] = s.fn(*[value(a, env) for a in s.args], **kw)
        return tuple(env[r] for r in results)
    return numpy_run


def _named(fn, n):
    fn.__name__ = fn.__qualname__ = f"fused{n}"
    fn.new_memory = True  # its results are new arrays (the lowering may reuse them)
    return fn


def _vmath_version():
    from . import vmath
    return vmath.version()


def _load(src):
    """``kern`` of the generated module (written under the cache directory,
    so numba's ``cache=True`` keeps its machine code across processes)."""
    return load_source(src, "tj", "tapestry_jit", cache_dir("jit")).kern
