"""Shared timing helpers: medians over repeats after warm-up, peak memory,
optional peers.  Times are compared as ratios within one run (this machine's
run-to-run noise is 1.2-1.8x)."""
from __future__ import annotations

import gc
import importlib
import shutil
import statistics
import time
import tracemalloc
from pathlib import Path

from tapestry.bench_runner import PUBLISH

RESULTS_DIR = Path(__file__).resolve().parent / "results"  # gitignored
#: The tracked figures BENCHMARKS.md shows; written only when publishing.
DOCS_IMG = Path(__file__).resolve().parents[1] / "docs" / "img"


def median_time(fn, repeats=7, warmup=2, min_seconds=0.0, number=None):
    """Median wall time of ``fn()`` in seconds.

    ``number`` calls are timed together per repeat (auto-chosen so that one
    repeat lasts at least ~20 ms when ``None``)."""
    for _ in range(warmup):
        fn()
    if number is None:
        t0 = time.perf_counter(); fn(); one = time.perf_counter() - t0
        number = max(1, int(0.02 / max(one, 1e-9)))
    times = []
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times.append((time.perf_counter() - t0) / number)
    finally:
        if gc_was:
            gc.enable()
    return statistics.median(times)


def peak_bytes(fn):
    """Peak traced Python/NumPy allocation during ``fn()`` (tracemalloc).

    NumPy reports its buffers to tracemalloc; PyTorch and JAX allocate
    outside it, so for them use :func:`peak_rss_delta`."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def peak_rss_delta(fn):
    """Growth of the process's max RSS during ``fn()``, in bytes (coarse:
    only grows past the previous maximum; run it first in a fresh process
    for a fair figure)."""
    import resource
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (after - before) * 1024


def optional(name):
    """Import a peer library if installed, else ``None``."""
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def row(workload, case, system, time_s=None, peak=None, note=""):
    return {"workload": workload, "case": case, "system": system,
            "time_s": time_s, "peak_bytes": peak, "note": note}


def blas_one_thread(fn):
    """``fn`` run with BLAS (and OpenMP libraries) limited to one thread."""
    from threadpoolctl import ThreadpoolController
    ctl = ThreadpoolController()

    def run():
        with ctl.limit(limits=1):
            return fn()
    return run


def interleaved_times(systems, repeats=7, warmup=1, burst=3):
    """Median wall time of each system, timed in turns of short bursts.

    ``systems``: ``[(name, fn), ...]``.  Every repeat gives each system one
    turn of ``burst`` consecutive calls, of which all but the first are
    timed.  Turns make all systems see the same machine state (this VM's
    two-core speedups drift between x1.2 and x1.9 within minutes, which
    block-wise timing turns into differences between systems); bursts
    keep the state a system leaves for its next call, as a training loop
    calling it again would (single calls in turns measured two-thread code
    here at x0.99-1.08 where back-to-back calls gave x1.65-1.84: each turn
    started with the second core idle).  Systems that leave OpenBLAS
    threads spinning (multi-threaded BLAS) belong outside the rotation.
    Each repeat starts with a full ``gc.collect()``, after which the next
    few calls run on cold caches (W7 here: +15% on the second and third
    call); so the system that opens a repeat changes from one repeat to
    the next, and none of them always pays for it (W8's first system did:
    1.61x against 1.44x in an A/B script).
    Returns ``{name: seconds}``.
    """
    for _ in range(warmup):
        for _, fn in systems:
            fn()
    times = {name: [] for name, _ in systems}
    gc_was = gc.isenabled()
    try:
        for r in range(repeats):
            gc.enable()
            gc.collect()
            gc.disable()
            k = r % len(systems)
            for name, fn in systems[k:] + systems[:k]:
                fn()
                for _ in range(burst - 1):
                    t0 = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t0)
    finally:
        if gc_was:
            gc.enable()
    return {name: statistics.median(ts) for name, ts in times.items()}


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend (benchmarks run headless)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, name, plot=True, dpi=110):
    """Save ``fig`` as benchmarks/results/``name`` and close it; return the path.

    Every benchmark plot goes through here, so that a plain ``--plot`` never
    touches the tracked docs/img/*.png: only ``plot == PUBLISH`` (``tapestry
    bench --publish-plots``) copies the figure over docs/img/``name``."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / name
    fig.savefig(out, dpi=dpi)
    pyplot().close(fig)
    where = f"plot saved to {out}"
    if plot == PUBLISH:
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, DOCS_IMG / name)
        where += f" and published as docs/img/{name}"
    print(where)
    return out


def jit_compiled(jitted, eager, *args, rtol=None):
    """Call the ``tapestry.jit`` function ``jitted`` twice on ``args`` and
    check it against ``eager`` before anything is timed.

    The first call traces and lowers, the second replays; both results must
    equal ``eager(*args)`` bit for bit (``np.array_equal`` on every leaf), or
    within ``rtol`` of each leaf's largest value (fused loops), else
    AssertionError: a fast wrong answer is not a benchmark result.
    Returns ``{"first", "replay", "traces"}`` (seconds, seconds, count)."""
    import numpy as np

    from tapestry.tree_util import tree_leaves
    t0 = time.perf_counter()
    first_out = jitted(*args)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    replay_out = jitted(*args)
    replay = time.perf_counter() - t0
    want = tree_leaves(eager(*args))
    for what, out in (("first call", first_out), ("replay", replay_out)):
        got = tree_leaves(out)
        if rtol is None:
            same = [np.array_equal(g, w) for g, w in zip(got, want)]
        else:
            same = [np.max(np.abs(np.asarray(g) - w), initial=0) <= rtol * max(
                np.max(np.abs(w), initial=0), 1e-300) for g, w in zip(got, want)]
        if len(got) != len(want) or not all(same):
            raise AssertionError(f"tapestry.jit {what} of {jitted!r} differs from the eager "
                                 "result")
    return {"first": first, "replay": replay, "traces": jitted.cache_info()["traces"]}


def jit_note(jitted, rtol=None):
    """The note of a jit row: its traces so far (1 expected: a replay
    after every other call) and that its result was checked."""
    info = jitted.cache_info()
    if rtol is None:
        return f"{info['traces']} trace(s); equal to eager (checked)"
    return (f"{info['traces']} trace(s), {info['fused_loops']} fused loop(s); "
            f"within {rtol:g} of eager (checked)")


def compile_rows(workload, case, info, replay_s):
    """Rows for a jit's compile cost: the median replay ``replay_s`` (timed
    by the caller) and the first call (trace + lower, one call); the ratio
    column then reads first call / median replay."""
    return [row(workload, f"{case} compile", "tapestry jit replay (median)", replay_s),
            row(workload, f"{case} compile", "tapestry jit first call (trace+lower)",
                info["first"], note=f"x{info['first'] / replay_s:.1f} a replay; "
                                    f"second call {info['replay'] * 1e3:.2f} ms")]


def torch_compile(torch, fn, first_call, timeout_s=150):
    """``(torch.compile(fn), seconds)`` after ``first_call(compiled)`` (which
    compiles: the forward, and the backward if it runs one), or
    ``(None, reason)`` if compiling fails or does not finish in
    ``timeout_s`` (it then goes on in a daemon thread, unused, and the
    timings after it share the CPU with it: the reason says so)."""
    import threading
    box = {}

    def work():
        try:
            t0 = time.perf_counter()
            cf = torch.compile(fn)
            first_call(cf)
            box["out"] = (cf, time.perf_counter() - t0)
        except Exception as e:  # noqa: BLE001  (any failure: report and skip)
            line = str(e).splitlines()[0][:120] if str(e) else ""
            box["out"] = (None, f"torch.compile failed: {type(e).__name__}: {line}")
    th = threading.Thread(target=work, daemon=True)
    th.start()
    th.join(timeout_s)
    return box.get("out", (None, f"torch.compile did not finish in {timeout_s} s (still "
                                 "compiling in the background during later rows)"))
