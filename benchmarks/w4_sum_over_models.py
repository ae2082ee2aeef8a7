"""W4 -- sum over models (Zygote + ThreadsX): value+gradient of
``sum over m of sum(mlp_m(x))`` w.r.t. every model's parameters.

tapestry: a plain loop of ``value_and_grad`` calls, then ``parallel_sum`` on
each executor (same chunks, so the same bits).  Peers: PyTorch (loop,
``torch.func`` vmap over stacked parameters), JAX (loop, vmap, jit(vmap)).
A "machine ceiling" row measures how much two processes can speed up pure
NumPy work on this machine right now (other users' load caps every ratio).
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

from benchmarks._harness import median_time, optional, row

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


def _by_hand_rows(case, ms, x, reps):
    """Hand-written NumPy gradient: a loop, and two threads over halves."""
    from concurrent.futures import ThreadPoolExecutor
    from threadpoolctl import threadpool_limits

    def loop(part=ms):
        return [mlp_value_and_grad_by_hand(m, x) for m in part]
    half = len(ms) // 2
    t1s, t2s = [], []
    with ThreadPoolExecutor(2) as pool, threadpool_limits(1):
        for _ in range(reps):  # interleaved, so both see the same machine state
            t1s.append(median_time(loop, repeats=1, warmup=1, number=1))
            t2s.append(median_time(lambda: list(pool.map(loop, [ms[:half], ms[half:]])),
                                   repeats=1, warmup=1, number=1))
    t1, t2 = statistics.median(t1s), statistics.median(t2s)
    return [row("W4", case, "numpy by hand (no AD), loop", t1),
            row("W4", case, "numpy by hand (no AD), 2 threads", t2,
                note=f"x{t1 / t2:.2f} vs its loop: the 2-thread ceiling here")]


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


def _tapestry_rows(tp, case, ms, x, reps):
    """Serial baselines are timed with BLAS at its default threads and at 1
    thread (OpenBLAS threads on busy cores can be very slow); executors'
    speedups are against the faster of the two serial figures."""
    from threadpoolctl import threadpool_limits
    rows, grad_t, fwd_t = [], {}, {}

    def loop():
        vg = tp.value_and_grad(mlp)
        return [vg(m, x) for m in ms]
    for ex in ("serial",) + EXECUTORS:
        if ex == "dask" and optional("distributed") is None:
            continue
        vg = tp.value_and_grad(lambda ms: tp.parallel_sum(mlp, ms, x, executor=ex))
        for blas1 in ((False, True) if ex == "serial" else (False,)):
            if ex == "serial" and (blas1, "grad") in grad_t:
                continue
            with threadpool_limits(1) if blas1 else _null():
                if ex == "serial":
                    t_loop = median_time(loop, repeats=reps, warmup=1, number=1)
                t = median_time(lambda: vg(ms), repeats=reps, warmup=1, number=1)
                tf = median_time(lambda: tp.parallel_sum(mlp, ms, x, executor=ex),
                                 repeats=reps, warmup=1, number=1)
            name = f"tapestry {ex}" + (" (BLAS 1 thread)" if blas1 else "")
            if ex == "serial":
                grad_t[(blas1, "grad")], fwd_t[blas1] = t, tf
                rows.append(row("W4", case, "tapestry loop of grad" +
                                (" (BLAS 1 thread)" if blas1 else ""), t_loop))
                rows.append(row("W4", case, name, t, note=f"serial/loop {t / t_loop:.3f}"))
                rows.append(row("W4", case + " forward", name, tf))
                continue
            best, best_f = min(grad_t.values()), min(fwd_t.values())
            rows.append(row("W4", case, name, t, note=f"x{best / t:.2f} vs best serial"))
            rows.append(row("W4", case + " forward", name, tf,
                            note=f"x{best_f / tf:.2f} vs best serial"))
            if ex == "dask":  # an idle cluster still wakes 5 processes: stop it
                from tapestry.parallel.executors import close_dask
                close_dask()
    return rows


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
        rows += _by_hand_rows(case, ms, x, reps)
        rows += _torch_rows(case, ms, x, reps)
        rows += _jax_rows(case, ms, x, reps, quick)
    if plot:
        from benchmarks.w6_poisson import speedup_plot
        speedup_plot(rows)
    return rows


if __name__ == "__main__":
    for r in main(quick="--quick" in sys.argv):
        print(r)
