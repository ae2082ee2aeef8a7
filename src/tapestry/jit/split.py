"""Large elementwise steps of a NumPy replay cut over threads, with the same bits.

A replay (``fuse=False``) makes one NumPy call per step, and a ufunc call
runs on one core; BLAS already runs a large GEMM on every core, so in W4
(64 MLPs) the calls left on one core are the elementwise ones: ``tanh``
over a million elements alone is a third of the call.  NumPy releases the
GIL inside a ufunc's loop, so the lowering (:mod:`tapestry.jit.program`)
gives a large ufunc step a :class:`Split` in place of the ufunc: the call
writes its result in contiguous slices along the first axis longer than 1,
the first on the calling thread and the others on a persistent pool.

Why the bits are the plain call's: an elementwise loop computes each
element from its operands alone, and the slices are cut at multiples of 64
elements, so every element sits at the same place in its vector of the SIMD
loop as in the whole call (the same code path computes it).  The result is
laid out as NumPy would lay it out (C order: every operand C-ordered, as the
buffer reuse already requires), so a later reduction sums in the same order.
Reductions are never split (their summation order would change).

Floating-point errors: the slices run with NumPy's error mode ``call``
recording the flags each raised; the calling thread then handles their
union as NumPy handles a whole call's flags under the caller's
``np.errstate`` (a warning from the replay's line, ``FloatingPointError``,
the ``call``/``log`` function).

A step stays whole (one plain call) when splitting cannot pay or could
change something: fewer than :data:`SPLIT_MIN` elements a thread, an
operand that is not a plain numeric array or number, an operand laid out
against C order (a negative stride, a transposed one) or sharing memory
with the given ``out=`` other than being it, a replay inside a tapestry
``parallel_sum`` / ``parallel_map`` worker (its cores are taken), or while
another thread's step is split (threads replaying at once already use the
cores).  Whether a program's steps are cut is decided for the program as a
whole (:class:`Schedule`): after a threaded GEMM OpenBLAS's threads spin
for ~0.1 s without yielding (unless ``OPENBLAS_THREAD_TIMEOUT`` is low),
and slices competing with them lose.  Large matrix products are cut too
(:class:`SplitMatmul`, BLAS pinned to one thread), so that in a program
that cuts, OpenBLAS's threads sleep.  ``TAPESTRY_JIT_THREADS=1`` turns
splitting off.
"""
from __future__ import annotations

import math
import operator
import os
import queue
import sys
import threading
import warnings
from time import perf_counter

import numpy as np


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        return os.cpu_count() or 1


#: Threads a step may use (``TAPESTRY_JIT_THREADS``, else the cores this
#: process may run on; 1 turns splitting off).
THREADS = int(os.environ.get("TAPESTRY_JIT_THREADS", "0") or 0) or _cores()
#: Elements per thread below which a step stays whole: for a ufunc that
#: does little per element (arithmetic, bound by memory) and for any other.
#: Measured here (2 cores, quiet, in two slices): ``add`` on 2^19 elements
#: x1.0-1.2, on 2^20 x1.4-1.6; ``tanh`` on 2^17 x1.1-1.2, on 2^20 x1.4-1.8;
#: ``exp`` on 2^18 x1.1-1.2; ``sin`` pays from 2^15.  A hand-off to a pool
#: thread costs ~30 us on this VM (waking the idle core).
SPLIT_MIN_CHEAP = 1 << 18
SPLIT_MIN = 1 << 16
#: Elements a cut falls on a multiple of (the widest SIMD vector of bytes).
ALIGN = 64
#: Slices per thread: threads take them as they come, so a thread that
#: shares its core (with OpenBLAS spinning after a GEMM, another process)
#: takes fewer, and the others do the rest.
CHUNKS = 4

#: ufuncs that do one cheap operation per element.
CHEAP = frozenset({
    np.add, np.subtract, np.multiply, np.negative, np.positive, np.absolute, np.square,
    np.maximum, np.minimum, np.fmax, np.fmin, np.copysign, np.sign, np.conjugate,
    np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal,
    np.logical_and, np.logical_or, np.logical_xor, np.logical_not, np.isnan, np.isinf,
    np.isfinite, np.signbit, np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert,
    np.left_shift, np.right_shift, np.floor, np.ceil, np.trunc, np.rint})
#: Python operators the replay calls, as the ufunc NumPy runs for them on arrays.
OPERATOR_UFUNCS = {operator.add: np.add, operator.sub: np.subtract,
                   operator.mul: np.multiply, operator.truediv: np.true_divide,
                   operator.neg: np.negative}

_SCALARS = (int, float, complex, bool, np.generic)
_q = queue.SimpleQueue()
_n_threads = 0
_pool_lock = threading.Lock()
#: Held while a step is split: one split at a time in the process.
_busy = threading.Lock()


def split_for(fn, shape, dtype, schedule=None):
    """A :class:`Split` to call in place of ``fn`` for a step whose result
    has ``shape`` and ``dtype``, or ``None`` (not a plain one-output ufunc
    on numbers, too small to pay, or no two slices to cut)."""
    schedule = Schedule() if schedule is None else schedule
    if fn is operator.matmul or fn is np.matmul:
        return matmul_split_for(fn, shape, dtype, schedule)
    u = OPERATOR_UFUNCS.get(fn, fn)
    if not isinstance(u, np.ufunc) or u.nout != 1 or u.signature is not None:
        return None
    dtype = np.dtype(dtype)
    if dtype.hasobject or dtype.kind not in "biufc" or not shape:
        return None
    if math.prod(shape) < 2 * min_elements(u):
        return None
    cut = Split(u, fn, tuple(shape), dtype, schedule)
    return None if cut._bounds() is None else cut  # (no two cuts at 64 elements)


def min_elements(u):
    return SPLIT_MIN_CHEAP if u in CHEAP else SPLIT_MIN


class Schedule:
    """Whether one program's large steps are cut, chosen for the program as
    a whole from the time its cut steps take each way.

    Not step by step: a whole matrix product wakes OpenBLAS's threads,
    which then spin for ~0.1 s on the cores the slices of the next steps
    need, so each step timed on its own finds cutting slower as long as its
    neighbours run whole (W4 at 64 models kept every step whole that way,
    5.2 ms a call, where all of them cut took 4.1-4.5 ms).  A round is one
    pass over the program's cut steps (it starts at the first of them); the
    steps' times are summed per round.  The program cuts for
    :data:`ROUNDS` rounds (the first :data:`QUARANTINE` seconds not counted:
    threads still spinning after whole products), runs whole for as many,
    keeps the faster way for at least :data:`KEEP` seconds and
    :data:`KEEP_ROUNDS` rounds, then times both again."""

    ROUNDS, KEEP, KEEP_ROUNDS = 6, 3.0, 64
    __slots__ = ("first", "cutting", "phase", "phase_start", "round_start", "round_sum",
                 "sums", "keep_until", "rounds")

    def __init__(self):
        self.first = None
        self.cutting, self.phase = True, "cut"
        self.phase_start = self.round_start = None
        self.round_sum, self.sums = 0.0, {"cut": [], "whole": []}
        self.keep_until, self.rounds = 0.0, 0

    def begin(self, step, now):
        """At the start of ``step``'s call (``now``: ``perf_counter()``):
        whether it cuts."""
        if self.first is None:
            self.first = step
        if step is self.first:
            self._next_round(now)
        return self.cutting

    def report(self, seconds):
        """A step's time this round (either way)."""
        self.round_sum += seconds

    def _next_round(self, now):
        phase = self.phase
        if self.phase_start is None:
            self.phase_start = now
        if self.round_start is not None and phase != "keep" and \
                (phase == "whole" or self.round_start - self.phase_start > QUARANTINE):
            self.sums[phase].append(self.round_sum)
        self.round_sum, self.round_start = 0.0, now
        self.rounds += 1
        if phase == "cut" and len(self.sums["cut"]) >= self.ROUNDS:
            self.phase, self.cutting, self.phase_start = "whole", False, now
        elif phase == "whole" and len(self.sums["whole"]) >= self.ROUNDS:
            self.cutting = _median(self.sums["cut"]) < _median(self.sums["whole"])
            self.phase, self.keep_until, self.rounds = "keep", now + self.KEEP, 0
        elif phase == "keep" and now >= self.keep_until and self.rounds >= self.KEEP_ROUNDS:
            self.phase, self.cutting, self.phase_start = "cut", True, now
            self.sums = {"cut": [], "whole": []}


class Split:
    """``ufunc(*args, out=None)`` computed in slices on several threads
    (see the module's docstring for when and why it gives the same bits).
    ``shape`` and ``dtype`` are the result's at the trace; ``plain`` is the
    function the step called (an operator, or the ufunc), called as it was
    when the step stays whole."""

    __slots__ = ("ufunc", "plain", "shape", "dtype", "axis", "__name__", "schedule")

    def __init__(self, ufunc, plain, shape, dtype, schedule):
        self.ufunc, self.plain, self.shape, self.dtype = ufunc, plain, shape, dtype
        self.axis = next(k for k, n in enumerate(shape) if n > 1) if max(shape) > 1 else 0
        self.__name__ = f"split_{ufunc.__name__}"
        self.schedule = schedule  # the program's choice (:class:`Schedule`)

    def __call__(self, *args, out=None):
        bounds = self._bounds()
        if bounds is None or not self._plain_operands(args, out) or _in_worker():
            return self._whole(args, out)
        t0 = perf_counter()
        if not self.schedule.begin(self, t0) or not _busy.acquire(False):
            got = self._whole(args, out)  # (busy: another thread's step is cut)
            self.schedule.report(perf_counter() - t0)
            return got
        try:
            if out is None:
                out = np.empty(self.shape, self.dtype)
            flags = self._run(args, out, bounds)
        finally:
            _busy.release()
        self.schedule.report(perf_counter() - t0)
        if flags:
            _report(self.ufunc.__name__, flags)
        return out

    def _whole(self, args, out):
        return self.plain(*args) if out is None else self.ufunc(*args, out=out)

    def _bounds(self):
        """Where the slices start and end along ``axis``, or ``None``."""
        parts = THREADS
        if parts < 2:
            return None
        n = self.shape[self.axis]
        row = math.prod(self.shape[self.axis + 1:])
        unit = ALIGN // math.gcd(ALIGN, row)  # rows per cut: a multiple of ALIGN elements
        size = n * row
        if min(parts, n // unit, size // min_elements(self.ufunc)) < 2:
            return None
        units = n // unit
        parts = min(parts * CHUNKS, units, size * CHUNKS // min_elements(self.ufunc))
        return [unit * (units * k // parts) for k in range(parts)] + [n]

    def _plain_operands(self, args, out):
        """Every operand a plain numeric array laid out in C order (or a
        number), ``out`` this step's result or ``None``, and no operand
        sharing memory with ``out`` unless it is ``out`` itself."""
        c_contiguous = out is not None
        if out is not None and (out.__class__ is not np.ndarray or out.shape != self.shape
                                or out.dtype != self.dtype or not out.flags.c_contiguous
                                or not out.flags.writeable):
            return False
        for a in args:
            if a.__class__ is np.ndarray:
                if a.dtype.hasobject or not c_ordered(a):
                    return False
                if a.shape == self.shape and a.flags.c_contiguous:
                    c_contiguous = True
                if out is not None and a is not out and np.may_share_memory(a, out):
                    return False
            elif not isinstance(a, _SCALARS):
                return False
        # NumPy lays the result out in C order when one operand is C-contiguous
        # and the others C-ordered; with one axis longer than 1, in any case
        return c_contiguous or sum(d > 1 for d in self.shape) < 2

    def _run(self, args, out, bounds):
        """The slices: this thread takes the first, then any no pool thread
        has started yet (a pool thread that the OS does not run at once,
        the other core being busy, costs nothing but the hand-off).  Returns
        the union of the floating-point flags the slices raised."""
        ax, nd = self.axis, len(self.shape)
        n = self.shape[ax]
        pieces = [([_cut(a, ax, nd, n, lo, hi) for a in args], _cut(out, ax, nd, n, lo, hi))
                  for lo, hi in zip(bounds, bounds[1:])]
        return _run_job(self.ufunc, pieces)


# --- matrix products: slices of the result's first axis, BLAS on one thread ---------
def matmul_split_for(fn, shape, dtype, schedule=None):
    """A :class:`SplitMatmul` for a matmul step whose result has ``shape``
    and ``dtype``, or ``None``: a vector product, a dtype BLAS does not
    take, fewer than :data:`SPLIT_MIN` elements a thread, or no OpenBLAS
    whose threads this process can set (threadpoolctl)."""
    dtype = np.dtype(dtype)
    if len(shape) < 2 or dtype.char not in "fdFD" or shape[0] < THREADS or \
            math.prod(shape) < THREADS * SPLIT_MIN or not blas_controls():
        return None
    return SplitMatmul(fn, tuple(shape), dtype, Schedule() if schedule is None else schedule)


class SplitMatmul:
    """``a @ b`` computed in slices along the result's first axis (rows of
    a matrix product, or the stacked axis of a batch of them), one slice a
    thread, each on BLAS pinned to one thread for the call.

    Why: a GEMM on OpenBLAS's own threads leaves them spinning for ~0.1 s
    (they do not yield), so every large elementwise step after it finds the
    second core taken and runs whole (W4 at 64 models: its GEMMs and its
    ``tanh`` take turns on the cores all call long).  With the GEMMs cut
    here, OpenBLAS's threads sleep and the elementwise steps get the cores.

    The bits: each element of a product is one dot product over the shared
    axis, computed by the same kernel whichever rows a call gets -- checked
    at the first call (whole and cut, compared bit for bit, and the whole
    result laid out in C order as the slices write it); where they differ,
    the step stays whole for good."""

    __slots__ = ("plain", "shape", "dtype", "checked", "ok", "__name__", "schedule")

    def __init__(self, plain, shape, dtype, schedule):
        self.plain, self.shape, self.dtype = plain, shape, dtype
        self.checked, self.ok = False, True
        self.__name__ = "split_matmul"
        self.schedule = schedule  # the program's choice (:class:`Schedule`)

    def __call__(self, a, b):
        if not self.ok or a.__class__ is not np.ndarray or b.__class__ is not np.ndarray \
                or a.ndim < 2 or b.ndim < 2 or a.dtype != self.dtype or b.dtype != self.dtype \
                or _in_worker():
            return self.plain(a, b)
        pieces_of = self._pieces(a, b)
        if pieces_of is None:
            return self.plain(a, b)
        t0 = perf_counter()
        if not self.schedule.begin(self, t0) or not _busy.acquire(False):
            got = self.plain(a, b)
            _spinning[0] = t1 = perf_counter()
            self.schedule.report(t1 - t0)
            return got
        try:
            whole = None if self.checked else self.plain(a, b)  # (BLAS as the caller set it)
            t1 = perf_counter()
            saved = _pin_blas()
            try:
                out = np.empty(self.shape, self.dtype)
                bounds = _even_bounds(self.shape[0], THREADS)
                _run_job(np.matmul, [(pieces_of(lo, hi), out[lo:hi])
                                     for lo, hi in zip(bounds, bounds[1:])])
            finally:
                _restore_blas(saved)
            self.schedule.report(perf_counter() - t1)
        finally:
            _busy.release()
        if whole is not None:
            _spinning[0] = t1
            self.checked = True
            if not (whole.flags.c_contiguous and whole.shape == out.shape
                    and np.array_equal(whole, out, equal_nan=True)):
                self.ok = False
                return whole
        return out

    def _pieces(self, a, b):
        """``(lo, hi) -> [a', b']``: the operands of the slice ``lo:hi`` of
        the result's first axis, or ``None`` (shapes other than the trace's).
        A matrix product's rows are ``a``'s; a stacked axis is sliced in
        each operand that has it (one of length 1 or missing broadcasts)."""
        nd = len(self.shape)
        n = self.shape[0]
        try:
            if np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]) \
                    != self.shape:
                return None
        except ValueError:
            return None
        if nd == 2:
            return lambda lo, hi: [a[lo:hi], b]
        cut_a = a.ndim == nd and a.shape[0] == n
        cut_b = b.ndim == nd and b.shape[0] == n
        return lambda lo, hi: [a[lo:hi] if cut_a else a, b[lo:hi] if cut_b else b]


#: Seconds after a whole product during which OpenBLAS's threads may still
#: spin (2^28 cycles at ~2.5 GHz, with some margin), and when the last one
#: ended.
QUARANTINE = 0.15
_spinning = [0.0]


def _even_bounds(n, parts):
    parts = max(1, min(parts, n))
    return [n * k // parts for k in range(parts + 1)]


def _run_job(fn, pieces):
    """``fn(*operands, out=out)`` for each piece, on this thread and the pool."""
    job = _Job(fn, pieces)
    put = _queue().put
    for _ in range(min(len(pieces), THREADS) - 1):
        put(job)
    _local.flags = 0
    with np.errstate(all="call", call=_record):
        job.work()
    job.finished.acquire()
    if job.error is not None:
        raise job.error
    return job.flags


_blas_libs = None


def blas_controls():
    """threadpoolctl's controllers of the OpenBLAS libraries loaded (an empty
    list without threadpoolctl, or with another BLAS: its threads are left
    alone, and no matmul is cut)."""
    global _blas_libs
    if _blas_libs is None:
        try:
            from threadpoolctl import ThreadpoolController
            libs = [c for c in ThreadpoolController().lib_controllers
                    if c.internal_api == "openblas"]
        except Exception:  # (threadpoolctl missing or failing: nothing pinned)
            libs = []
        _blas_libs = libs
    return _blas_libs


def _pin_blas():
    """Every OpenBLAS on one thread; their thread counts before."""
    saved = []
    for c in blas_controls():
        n = c.get_num_threads()
        saved.append((c, n))
        if n != 1:
            c.set_num_threads(1)
    return saved


def _restore_blas(saved):
    for c, n in saved:
        if n != 1:
            c.set_num_threads(n)


class _Job:
    """The slices of one call (``(operands, out)`` each), taken one at a
    time by whichever thread asks first (:meth:`work`); ``finished`` is
    released when all are written.  The pool threads hand out as little
    Python as possible: each GIL hand-off between two cores of this VM
    costs microseconds."""

    __slots__ = ("ufunc", "pieces", "n", "next", "left", "flags", "error", "lock", "finished")

    def __init__(self, ufunc, pieces):
        self.ufunc, self.pieces, self.n = ufunc, pieces, len(pieces)
        self.next, self.left, self.flags, self.error = 0, len(pieces), 0, None
        self.lock = threading.Lock()
        self.finished = threading.Lock()
        self.finished.acquire()

    def work(self):
        """Write slices until none is left; the thread's NumPy error mode is
        ``call`` with :func:`_record` (its flags land in ``_local.flags``)."""
        ufunc = self.ufunc
        while True:
            with self.lock:
                k = self.next
                if k >= self.n:
                    return
                self.next = k + 1
                cut, out = self.pieces[k]
            error = None
            try:
                ufunc(*cut, out=out)
            except BaseException as e:  # handed to the calling thread
                error = e
            with self.lock:
                self.flags |= _local.flags
                _local.flags = 0
                if error is not None and self.error is None:
                    self.error = error
                self.left -= 1
                if self.left == 0:
                    self.pieces = None  # (a job left in the queue holds no array)
                    self.finished.release()


_local = threading.local()


def _record(kind, status):
    """NumPy's error callback in a slice: keep the flags."""
    _local.flags = getattr(_local, "flags", 0) | status


def _pool_thread(q):
    """A pool thread: NumPy's error mode ``call`` (set once, in this thread's
    context), then the jobs put on ``q``."""
    np.seterr(all="call")
    np.seterrcall(_record)
    _local.flags = 0
    while True:
        q.get().work()


def _queue():
    """The pool's queue, with ``THREADS - 1`` threads reading it (started
    at the first split, daemons: a process exits without waiting for them)."""
    global _n_threads
    if _n_threads < THREADS - 1:
        with _pool_lock:
            while _n_threads < THREADS - 1:
                threading.Thread(target=_pool_thread, args=(_q,), daemon=True,
                                 name=f"tapestry-jit-split-{_n_threads}").start()
                _n_threads += 1
    return _q


def _median(times):
    return sorted(times)[(len(times) - 1) // 2]


def _cut(a, ax, nd, n, lo, hi):
    """Slice ``lo:hi`` of operand ``a`` along the result's axis ``ax`` (of
    length ``n``, ``nd`` axes), or ``a`` whole where it broadcasts there."""
    if a.__class__ is not np.ndarray:
        return a
    k = ax - (nd - a.ndim)  # operands align on their last axes
    if k < 0 or a.shape[k] != n:
        return a
    return a[(slice(None),) * k + (slice(lo, hi),)]


def c_ordered(a):
    """Whether NumPy lays a ufunc's result out in C order for ``a`` as far
    as ``a`` decides it: along its axes longer than 1, the strides that are
    not 0 (a broadcast) are positive and decreasing.  With every operand
    C-contiguous or C-ordered, and one of them C-contiguous, the result is
    C-contiguous (NumPy orders axes by the operands' strides and leaves the
    C order where none says otherwise).  (The replay's ``out=`` tests use
    it too: :mod:`tapestry.jit.program` imports it from here.)"""
    last = None
    for n, s in zip(a.shape, a.strides):
        if n > 1 and s:
            if s < 0 or (last is not None and s >= last):
                return False
            last = s
    return True


#: NumPy's floating-point flags, in the order it handles them, with its words.
_FLAGS = ((1, "divide", "divide by zero"), (2, "over", "overflow"),
          (4, "under", "underflow"), (8, "invalid", "invalid value"))


def _report(name, status):
    """Handle the flags ``status`` raised by ufunc ``name`` as NumPy handles
    a call's flags under the current ``np.errstate`` (numpy/_core/src/umath/
    extobj.c, ``PyUFunc_handlefperr``): in its order, each flag by its mode."""
    modes = np.geterr()
    for bit, key, words in _FLAGS:
        if not status & bit:
            continue
        mode = modes[key]
        if mode == "ignore":
            continue
        if mode == "print":
            sys.stderr.flush()
            os.write(2, f"Warning: {words} encountered in {name}\n".encode())
        elif mode == "warn":
            # stacklevel 3: the replay's line, where the plain call warns
            warnings.warn(f"{words} encountered in {name}", RuntimeWarning, stacklevel=3)
        elif mode == "raise":
            raise FloatingPointError(f"{words} encountered in {name}")
        else:
            func = np.geterrcall()
            if func is None:
                raise NameError(f"python callback specified for {words} (in  {name}) but "
                                "no function found." if mode == "call" else
                                f"log specified for {words} (in {name}) but no object "
                                "with write method found.")
            if mode == "call":
                func(words, status)
            else:
                func.write(f"Warning: {words} encountered in {name}\n")


#: Fewest bytes a bitwise comparison cuts over the threads (below, one
#: ``memcmp`` on the calling thread is faster than handing out slices).
COMPARE_MIN_BYTES = 1 << 21


def same_bytes(memcmp, a, b, nbytes):
    """``memcmp(a, b, nbytes) == 0`` for two addresses, cut over the
    threads when ``nbytes`` is large (``ctypes`` lets go of the GIL during
    the call): a jitted function's guard on a large closed-over array reads
    it and its snapshot every call, and two cores read them faster."""
    parts = min(THREADS, nbytes // COMPARE_MIN_BYTES)
    if parts < 2 or _in_worker() or not _busy.acquire(False):
        return memcmp(a, b, nbytes) == 0
    try:
        cuts = [nbytes * k // parts for k in range(parts + 1)]
        equal = [True] * parts

        def compare(k, lo, hi, out=None):
            equal[k] = memcmp(a + lo, b + lo, hi - lo) == 0
        _run_job(compare, [((k, cuts[k], cuts[k + 1]), None) for k in range(parts)])
    finally:
        _busy.release()
    return all(equal)


def _in_worker():
    """Inside a tapestry parallel worker (its executor already uses the
    cores): ``tapestry.parallel.executors.in_worker``, looked up, not
    imported (parallel imports jit; no worker exists before it is loaded)."""
    executors = sys.modules.get("tapestry.parallel.executors")
    return executors is not None and executors.in_worker()


def _forget_pool_in_child():
    """A forked child has the queue but none of the threads (a slice put on
    it would never run): it starts its own, and no split is held."""
    global _q, _n_threads, _pool_lock, _busy
    _q, _n_threads, _pool_lock, _busy = queue.SimpleQueue(), 0, threading.Lock(), \
        threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)
