"""W4 -- sum over models (Zygote + ThreadsX): value+gradient of
``sum over m of sum(mlp_m(x))`` w.r.t. every model's parameters.

tapestry: a plain loop of ``value_and_grad`` calls, then ``parallel_sum`` on
each executor (same chunks, so the same bits), and the same models stacked
into arrays (``batched=True``, the vmap-style formulation); all timed in
turns with the hand-written NumPy rows.  Peers: PyTorch (loop,
``torch.func`` vmap over stacked parameters), JAX (loop, vmap, jit(vmap)).
A "machine ceiling" row measures how much two processes can speed up pure
NumPy work on this machine right now (other users' load caps every ratio).
Also the stacked models written with ``tp.vmap`` inside ``value_and_grad``,
eager and under ``tp.jit`` (checked equal to eager first), against
``torch.func`` vmap and JAX jit(vmap).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from benchmarks._harness import (blas_one_thread, compile_rows, interleaved_times, jit_compiled,
                                 jit_note, median_time, optional, row)

EXECUTORS = ("threads", "processes", "dask")


def make_models(M, hidden, seed=0):
    rng = np.random.default_rng(seed)
    ms = [{"W1": rng.standard_normal((hidden, 32)) * 0.1, "b1": rng.standard_normal(hidden),
           "W2": rng.standard_normal((1, hidden)) * 0.1, "b2": rng.standard_normal(1)}
          for _ in range(M)]
    return ms, rng.standard_normal((32, 256))


def mlp(m, x):
    h = np.tanh(m["W1"] @ x + m["b1"].reshape(-1, 1))
    return np.sum(m["W2"] @ h + m["b2"].reshape(-1, 1))


def mlp_value_and_grad_by_hand(m, x):
    """The same value and gradient written out in NumPy (no AD engine): the
    floor for any NumPy-based system, and what two threads can do when
    only NumPy's own GIL-held dispatch remains."""
    h = np.tanh(m["W1"] @ x + m["b1"].reshape(-1, 1))
    out = m["W2"] @ h + m["b2"].reshape(-1, 1)
    g_out = np.ones_like(out)
    g_pre = (m["W2"].T * g_out) * (1.0 - h * h)  # outer product by broadcasting
    return np.sum(out), {"W1": g_pre @ x.T, "b1": np.sum(g_pre, axis=1),
                         "W2": g_out @ h.T, "b2": np.sum(g_out, axis=1)}


def machine_ceiling(seconds=0.15):
    """Speedup of two processes over one on CPU-bound NumPy work, now."""
    from loky import get_reusable_executor
    pool = get_reusable_executor(max_workers=2)
    list(pool.map(_busy, [0.01, 0.01]))
    t0 = time.perf_counter(); _busy(seconds); _busy(seconds); serial = time.perf_counter() - t0
    t0 = time.perf_counter(); list(pool.map(_busy, [seconds, seconds]))
    return serial / (time.perf_counter() - t0)


def _busy(seconds):
    a, n = np.random.default_rng(0).random((200, 200)), int(seconds * 1500)
    for _ in range(n):
        a = np.tanh(a)
    return float(a[0, 0])


def mlp_stacked(p, x):
    """``mlp`` on a slice of stacked models (``p["W1"]`` is (k, H, 32)): the
    vmap-style way to write W4, for ``parallel_sum(..., batched=True)``."""
    h = np.tanh(p["W1"] @ x + p["b1"][:, :, None])
    return np.sum(p["W2"] @ h + p["b2"][:, :, None])


def _tapestry_rows(tp, case, ms, x, reps):
    """Every tapestry system and the hand-written NumPy rows, timed in turns
    (benchmarks._harness.interleaved_times), so that each ratio compares
    runs that saw the same machine state.  Serial baselines run with BLAS at
    its default threads (timed first, on their own: multi-threaded OpenBLAS
    leaves a thread spinning for ~0.12 s) and at 1 thread; executors'
    speedups are against the faster serial figure.  Dask is timed on its
    own afterwards (an idle cluster keeps waking 5 processes)."""
    from concurrent.futures import ThreadPoolExecutor

    vg1 = tp.value_and_grad(mlp)
    psum = {ex: tp.value_and_grad(lambda ms, ex=ex: tp.parallel_sum(mlp, ms, x, executor=ex))
            for ex in ("serial",) + EXECUTORS}
    fwd = {ex: (lambda ex=ex: tp.parallel_sum(mlp, ms, x, executor=ex))
           for ex in ("serial",) + EXECUTORS}
    stacked = {k: np.stack([m[k] for m in ms]) for k in ms[0]}
    spsum = {ex: tp.value_and_grad(lambda st, ex=ex: tp.parallel_sum(
        mlp_stacked, st, x, executor=ex, batched=True)) for ex in ("serial",) + EXECUTORS}

    def loop():
        return [vg1(m, x) for m in ms]

    def hand(part=ms):
        return [mlp_value_and_grad_by_hand(m, x) for m in part]
    half = len(ms) // 2
    pool = ThreadPoolExecutor(2)
    t = interleaved_times([("tapestry loop of grad", loop),
                           ("tapestry serial", lambda: psum["serial"](ms)),
                           ("forward: tapestry serial", fwd["serial"])], repeats=reps)
    systems = [
        ("tapestry loop of grad (BLAS 1 thread)", blas_one_thread(loop)),
        ("tapestry serial (BLAS 1 thread)", blas_one_thread(lambda: psum["serial"](ms))),
        ("forward: tapestry serial (BLAS 1 thread)", blas_one_thread(fwd["serial"])),
        ("numpy by hand (no AD), loop", blas_one_thread(hand)),
        ("numpy by hand (no AD), 2 threads",
         blas_one_thread(lambda: list(pool.map(hand, [ms[:half], ms[half:]])))),
        ("stacked: tapestry serial (BLAS 1 thread)",
         blas_one_thread(lambda: spsum["serial"](stacked)))]
    for ex in EXECUTORS[:2]:
        systems += [(f"tapestry {ex}", lambda ex=ex: psum[ex](ms)),
                    (f"forward: tapestry {ex}", fwd[ex]),
                    (f"stacked: tapestry {ex}", lambda ex=ex: spsum[ex](stacked))]
    systems += _jit_systems(tp, ms, x, stacked)
    t.update(interleaved_times(systems, repeats=reps))
    pool.shutdown()
    if optional("distributed") is not None:
        t["tapestry dask"] = median_time(lambda: psum["dask"](ms), repeats=reps, warmup=1,
                                         number=1)
        t["forward: tapestry dask"] = median_time(fwd["dask"], repeats=reps, warmup=1,
                                                  number=1)
        from tapestry.parallel.executors import close_dask
        close_dask()
    best = min(t["tapestry serial"], t["tapestry serial (BLAS 1 thread)"])
    best_f = min(t["forward: tapestry serial"], t["forward: tapestry serial (BLAS 1 thread)"])
    rows = []
    for blas in ("", " (BLAS 1 thread)"):
        loop_t, ser = t["tapestry loop of grad" + blas], t["tapestry serial" + blas]
        rows += [row("W4", case, "tapestry loop of grad" + blas, loop_t),
                 row("W4", case, "tapestry serial" + blas, ser,
                     note=f"serial/loop {ser / loop_t:.3f}"),
                 row("W4", case + " forward", "tapestry serial" + blas,
                     t["forward: tapestry serial" + blas])]
    for ex in EXECUTORS:
        if f"tapestry {ex}" in t:
            rows += [row("W4", case, f"tapestry {ex}", t[f"tapestry {ex}"],
                         note=f"x{best / t[f'tapestry {ex}']:.2f} vs best serial"),
                     row("W4", case + " forward", f"tapestry {ex}", t[f"forward: tapestry {ex}"],
                         note=f"x{best_f / t[f'forward: tapestry {ex}']:.2f} vs best serial")]
    s1 = t["stacked: tapestry serial (BLAS 1 thread)"]
    rows.append(row("W4", case, "tapestry stacked models, serial (BLAS 1 thread)", s1,
                    note=f"x{best / s1:.2f} vs best serial (list of models)"))
    for ex in EXECUTORS[:2]:
        te = t[f"stacked: tapestry {ex}"]
        rows.append(row("W4", case, f"tapestry stacked models, {ex}", te,
                        note=f"x{s1 / te:.2f} vs stacked serial, x{best / te:.2f} vs best serial"))
    for what in ("", "stacked "):
        js = t[f"jit: {what}serial (BLAS 1 thread)"]
        rows.append(row("W4", case, f"tapestry jit, {what}serial (BLAS 1 thread)", js))
        for ex in ("threads",):
            te = t[f"jit: {what}{ex}"]
            rows.append(row("W4", case, f"tapestry jit, {what}{ex}", te,
                            note=f"x{js / te:.2f} vs its serial jit"))
    h1, h2 = t["numpy by hand (no AD), loop"], t["numpy by hand (no AD), 2 threads"]
    rows += [row("W4", case, "numpy by hand (no AD), loop", h1),
             row("W4", case, "numpy by hand (no AD), 2 threads", h2,
                 note=f"x{h1 / h2:.2f} vs its loop: the 2-thread ceiling here")]
    return rows


def _jit_systems(tp, ms, x, stacked):
    """``jit(value_and_grad(parallel_sum(...)))`` serial (the chunks traced
    into the program) and on threads (the chunks one step of the program,
    run on the executor at every replay), over the list of models and over
    stacked models; each checked bit-identical to eager first."""
    out = []
    for what, items, f, batched in (("", ms, mlp, False), ("stacked ", stacked, mlp_stacked, True)):
        for ex in ("serial", "threads"):
            def total(items, ex=ex, f=f, batched=batched):
                return tp.parallel_sum(f, items, x, executor=ex, batched=batched)
            eager, jitted = tp.value_and_grad(total), tp.jit(tp.value_and_grad(total))
            jitted(items)
            got, want = jitted(items), eager(items)
            for a, b in zip(tp.tree_util.tree_leaves(got), tp.tree_util.tree_leaves(want)):
                assert np.array_equal(a, b), "jit differs from eager"
            fn = (lambda j=jitted, i=items: j(i))
            out.append((f"jit: {what}{ex}" + (" (BLAS 1 thread)" if ex == "serial" else ""),
                        blas_one_thread(fn) if ex == "serial" else fn))
    return out


def _vmap_jit_rows(tp, case, ms, x, reps):
    """``value_and_grad`` of ``sum(vmap(mlp)(stacked, x))``, eager and under
    ``tp.jit``, timed in turns; then the jit's compile rows."""
    stacked = {k: np.stack([m[k] for m in ms]) for k in ms[0]}

    def total(p, x):
        return np.sum(tp.vmap(mlp, in_axes=(0, None))(p, x))
    eager = tp.value_and_grad(total)
    jitted = tp.jit(tp.value_and_grad(total), fuse=False)
    info = jit_compiled(jitted, eager, stacked, x)
    systems = [("eager", lambda: eager(stacked, x)), ("jit", lambda: jitted(stacked, x))]
    fused = None
    if optional("numba") is not None:  # tanh and its backward in loops, cut over threads
        fused = tp.jit(tp.value_and_grad(total), fuse=True)
        jit_compiled(fused, eager, stacked, x, rtol=1e-10)
        systems.append(("fused", lambda: fused(stacked, x)))
    for _ in range(80):  # past the schedule's first timing of cut and whole steps
        for name, fn in systems[1:]:
            fn()
    t = interleaved_times(systems, repeats=reps)
    rows = [row("W4", case, "tapestry vmap (stacked), eager", t["eager"]),
            row("W4", case, "tapestry jit(vmap) (stacked)", t["jit"],
                note=f"x{t['eager'] / t['jit']:.2f} vs vmap eager; " + jit_note(jitted))]
    # on its own, as the JAX rows are timed: in turns with the eager call, whose
    # GEMMs leave OpenBLAS's threads spinning, the replay keeps its steps whole
    # (docs/jit.md); alone, its schedule cuts them once timed each way
    alone = _alone(lambda: jitted(stacked, x), reps)
    rows.append(row("W4", case, "tapestry jit(vmap) (stacked), timed on its own", alone,
                    note=f"x{t['jit'] / alone:.2f} vs in turns"))
    if fused is not None:
        rows.append(row("W4", case, "tapestry jit(vmap) (stacked), fused loops", t["fused"],
                        note=f"x{t['jit'] / t['fused']:.2f} vs the NumPy replay; "
                        "within 1e-10 of eager"))
    return rows + compile_rows("W4", case, info, t["jit"])


def _alone(fn, reps):
    """``fn``'s median time on its own: 4 s of calls first (a jit's schedule
    keeps its choice for 3 s, then times its steps cut and whole again, now
    without the eager calls' BLAS threads around), as before the JAX rows."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 4.0:
        fn()
    return median_time(fn, repeats=max(reps, 15), warmup=2, number=3)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _torch_rows(case, ms, x, reps):
    torch = optional("torch")
    if torch is None:
        return []
    torch.set_num_threads(os.cpu_count() or 1)
    tx = torch.from_numpy(x)
    tms = [{k: torch.tensor(v, requires_grad=True) for k, v in m.items()} for m in ms]

    def f(m, x):
        h = torch.tanh(m["W1"] @ x + m["b1"].reshape(-1, 1))
        return torch.sum(m["W2"] @ h + m["b2"].reshape(-1, 1))

    def loop():
        out = []
        for m in tms:
            v = f(m, tx)
            out.append((v.item(), torch.autograd.grad(v, list(m.values()))))
        return out
    stacked = {k: torch.stack([m[k].detach() for m in tms]) for k in tms[0]}
    from torch.func import grad_and_value, vmap
    total = grad_and_value(lambda p: vmap(f, in_dims=(0, None))(p, tx).sum())
    return [row("W4", case, "torch loop", median_time(loop, repeats=reps, warmup=1, number=1)),
            row("W4", case, "torch func.vmap",
                median_time(lambda: total(stacked), repeats=reps, warmup=1, number=1))]


def _jax_rows(case, ms, x, reps, quick):
    jax = optional("jax")
    if jax is None:
        return []
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def f(m, x):
        h = jnp.tanh(m["W1"] @ x + m["b1"].reshape(-1, 1))
        return jnp.sum(m["W2"] @ h + m["b2"].reshape(-1, 1))
    jx = jnp.asarray(x)
    jms = [{k: jnp.asarray(v) for k, v in m.items()} for m in ms]
    stacked = {k: jnp.stack([m[k] for m in jms]) for k in jms[0]}
    vg = jax.value_and_grad(f)
    total = jax.value_and_grad(lambda p: jax.vmap(f, in_axes=(0, None))(p, jx).sum())
    jitted = jax.jit(total)
    block = jax.block_until_ready
    rows = []
    if len(ms) <= 64 or not quick:
        rows.append(row("W4", case, "jax loop (eager)", median_time(
            lambda: block([vg(m, jx) for m in jms]), repeats=max(3, reps // 2), warmup=1,
            number=1)))
    rows.append(row("W4", case, "jax vmap (eager)", median_time(
        lambda: block(total(stacked)), repeats=reps, warmup=1, number=1)))
    rows.append(row("W4", case, "jax jit(vmap)", median_time(
        lambda: block(jitted(stacked)), repeats=reps, warmup=2, number=1)))
    return rows


def main(quick=False, plot=False):
    import cloudpickle

    import tapestry as tp
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # for worker processes
    reps = 3 if quick else 7
    cases = [("M=64", 64, 64), ("M=512", 512, 64), ("M=64 hidden=512", 64, 512)]
    if quick:
        cases = [("M=16", 16, 64)]
    rows = [row("W4", "machine", f"2-process ceiling ({os.cpu_count()} cores)", None,
                note=f"x{machine_ceiling():.2f} on pure NumPy work, same run")]
    for case, M, hidden in cases:
        ms, x = make_models(M, hidden)
        rows += _tapestry_rows(tp, case, ms, x, reps)
        rows += _vmap_jit_rows(tp, case, ms, x, reps)
        rows += _torch_rows(case, ms, x, reps)
        rows += _jax_rows(case, ms, x, reps, quick)
    if plot:
        from benchmarks.w6_poisson import speedup_plot
        speedup_plot(rows, plot)
    return rows


if __name__ == "__main__":
    for r in main(quick="--quick" in sys.argv):
        print(r)
