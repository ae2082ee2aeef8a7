"""W6 -- hierarchical Poisson log-likelihood (Stan reduce_sum).

G groups of 20 observations; parameters alpha, beta (scalars) and u (G,).
loss = sum y*eta - exp(eta) - lgamma(y+1), eta = alpha + beta*x + u[group],
plus a normal(0, 1) prior on u.  Written as a reduce_sum user would: a
partial log-likelihood over a slice of groups, summed by ``parallel_sum``
(``batched=True``).  Value+gradient w.r.t. (u, alpha, beta): serial, each
executor, and one vectorized call; peers: the same chunked loop and a
vectorized version (JAX also jit).  The vectorized call also under
``tp.jit`` (checked equal to eager first), with the observations passed as
an argument and, as a user may first write it, read from a closure (whose
arrays a replay compares with their trace-time bits every call).
"""
from __future__ import annotations

import json
import math
import sys

import numpy as np

from benchmarks._harness import (RESULTS_DIR, blas_one_thread, compile_rows, interleaved_times,
                                 jit_compiled, jit_note, median_time, optional, pyplot, row,
                                 save_figure)

EXECUTORS = ("serial", "threads", "processes", "dask")
N_OBS = 20


def make_data(G, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((G, N_OBS))
    u_true = rng.normal(0.0, 0.5, G)
    y = rng.poisson(np.exp(0.3 + 0.5 * x + u_true[:, None])).astype(np.float64)
    lgy = np.vectorize(math.lgamma)(y + 1.0)
    return {"x": x, "y": y, "c": lgy}, rng.normal(0.0, 0.5, G), 0.2, 0.4


def partial_loglik(g, alpha, beta):
    """Log-likelihood of a slice of groups (``g["u"]`` has the slice's u)."""
    eta = alpha + beta * g["x"] + np.reshape(g["u"], (-1, 1))
    return np.sum(g["y"] * eta - np.exp(eta) - g["c"]) - 0.5 * np.sum(g["u"] ** 2)


def partial_value_and_grad_by_hand(g, alpha, beta):
    """``partial_loglik`` and its gradient (u slice, alpha, beta) written out
    in NumPy: the floor for NumPy code, and with two threads over the chunks
    what this machine allows for this memory-heavy work."""
    eta = alpha + beta * g["x"] + np.reshape(g["u"], (-1, 1))
    mu = np.exp(eta)
    r = g["y"] - mu
    value = np.sum(g["y"] * eta - mu - g["c"]) - 0.5 * np.sum(g["u"] ** 2)
    return value, (np.sum(r, axis=1) - g["u"], np.sum(r), np.sum(r * g["x"]))


def _loss(executor, data):
    def loss(u, alpha, beta):
        return tp_parallel_sum(partial_loglik, dict(data, u=u), alpha, beta,
                               executor=executor, batched=True)
    return loss


def tp_parallel_sum(*a, **k):
    import tapestry as tp
    return tp.parallel_sum(*a, **k)


def _chunks(G):
    size = -(-G // 16)
    return [(a, min(a + size, G)) for a in range(0, G, size)]


def _tapestry_rows(tp, case, data, u, a, b, reps):
    """Every tapestry system and the hand-written NumPy rows (the same 16
    chunks, a loop and 2 threads), timed in turns (see
    benchmarks._harness.interleaved_times); executors' speedups are against
    the faster serial figure (BLAS at its default threads or at 1 thread).
    Dask is timed on its own afterwards."""
    from concurrent.futures import ThreadPoolExecutor

    vec = tp.value_and_grad(lambda u, a, b: partial_loglik(dict(data, u=u), a, b),
                            argnums=(0, 1, 2))
    vg = {ex: tp.value_and_grad(_loss(ex, data), argnums=(0, 1, 2)) for ex in EXECUTORS}
    parts = [dict({k: v[i:j] for k, v in data.items()}, u=u[i:j]) for i, j in _chunks(len(u))]

    def hand(ps=parts):
        return [partial_value_and_grad_by_hand(p, a, b) for p in ps]
    pool = ThreadPoolExecutor(2)
    t = interleaved_times([("tapestry serial", lambda: vg["serial"](u, a, b))], repeats=reps)
    systems = [("tapestry serial (BLAS 1 thread)", blas_one_thread(lambda: vg["serial"](u, a, b))),
               ("tapestry threads", lambda: vg["threads"](u, a, b)),
               ("tapestry processes", lambda: vg["processes"](u, a, b)),
               ("numpy by hand (no AD), 16 chunks, loop", blas_one_thread(hand)),
               ("numpy by hand (no AD), 16 chunks, 2 threads",
                blas_one_thread(lambda: list(pool.map(hand, [parts[0::2], parts[1::2]]))))]
    t.update(interleaved_times(systems, repeats=reps))
    # One call on all 100,000 groups allocates 16 MB arrays: timed apart.
    t["tapestry vectorized (one call)"] = median_time(lambda: vec(u, a, b), repeats=reps,
                                                      warmup=1, number=1)
    pool.shutdown()
    jit_rows = _jit_rows(tp, case, data, u, a, b, reps, vec, t["tapestry vectorized (one call)"])
    if optional("distributed") is not None:
        t["tapestry dask"] = median_time(lambda: vg["dask"](u, a, b), repeats=reps, warmup=1,
                                         number=1)
        from tapestry.parallel.executors import close_dask
        close_dask()
    best = min(t["tapestry serial"], t["tapestry serial (BLAS 1 thread)"])
    rows = [row("W6", case, "tapestry serial", t["tapestry serial"]),
            row("W6", case, "tapestry serial (BLAS 1 thread)",
                t["tapestry serial (BLAS 1 thread)"])]
    for name in ("tapestry threads", "tapestry processes", "tapestry dask",
                 "tapestry vectorized (one call)"):
        if name in t:
            rows.append(row("W6", case, name, t[name],
                            note=f"x{best / t[name]:.2f} vs best serial"))
    h1 = t["numpy by hand (no AD), 16 chunks, loop"]
    h2 = t["numpy by hand (no AD), 16 chunks, 2 threads"]
    rows += [row("W6", case, "numpy by hand (no AD), 16 chunks, loop", h1),
             row("W6", case, "numpy by hand (no AD), 16 chunks, 2 threads", h2,
                 note=f"x{h1 / h2:.2f} vs its loop: the 2-thread ceiling here")]
    return rows + jit_rows


def _jit_rows(tp, case, data, u, a, b, reps, vec, vec_t):
    """The vectorized call under ``tp.jit``: data as an argument, and data
    in a closure (guarded bitwise before each replay); then compile rows."""
    argnums = (0, 1, 2)
    by_arg = tp.jit(tp.value_and_grad(lambda u, a, b, d: partial_loglik(dict(d, u=u), a, b),
                                      argnums=argnums), fuse=False)
    closed = tp.jit(tp.value_and_grad(lambda u, a, b: partial_loglik(dict(data, u=u), a, b),
                                      argnums=argnums), fuse=False)
    info = jit_compiled(by_arg, lambda u, a, b, d: vec(u, a, b), u, a, b, data)
    jit_compiled(closed, vec, u, a, b)
    rows, medians = [], []
    for name, fn, f in (("tapestry jit(vectorized), data as argument",
                         lambda: by_arg(u, a, b, data), by_arg),
                        ("tapestry jit(vectorized), data in closure",
                         lambda: closed(u, a, b), closed)):
        s = median_time(fn, repeats=reps, warmup=1, number=1)
        medians.append(s)
        rows.append(row("W6", case, name, s,
                        note=f"x{vec_t / s:.2f} vs vectorized eager; " + jit_note(f)))
    return rows + _fused_rows(tp, case, data, u, a, b, reps, medians[0]) + \
        compile_rows("W6", case, info, medians[0])


def _fused_rows(tp, case, data, u, a, b, reps, replay_t):
    """The same jitted call with fused loops (numba; within a few ulp,
    checked), on one thread and on every core (large runs cut along axis
    0): the ratios to the NumPy replay and between the two."""
    if optional("numba") is None:
        return []
    from tapestry.jit import fuse as fuse_mod
    fused = tp.jit(tp.value_and_grad(lambda u, a, b, d: partial_loglik(dict(d, u=u), a, b),
                                     argnums=(0, 1, 2)), fuse=True)
    eager = tp.value_and_grad(lambda u, a, b, d: partial_loglik(dict(d, u=u), a, b),
                              argnums=(0, 1, 2))
    jit_compiled(fused, eager, u, a, b, data, rtol=1e-10)
    threads = fuse_mod.THREADS
    times = {}
    try:
        for n in (1, threads):
            fuse_mod.THREADS = n
            times[n] = median_time(lambda: fused(u, a, b, data), repeats=reps, warmup=1,
                                   number=1)
    finally:
        fuse_mod.THREADS = threads
    rows = [row("W6", case, "tapestry jit fused loops, 1 thread", times[1],
                note=f"x{replay_t / times[1]:.2f} vs the NumPy replay")]
    if threads > 1:
        rows.append(row("W6", case, f"tapestry jit fused loops, {threads} threads",
                        times[threads], note=f"x{times[1] / times[threads]:.2f} vs 1 thread, "
                        f"x{replay_t / times[threads]:.2f} vs the NumPy replay"))
    return rows


def _torch_rows(case, data, u, a, b, reps):
    torch = optional("torch")
    if torch is None:
        return []
    d = {k: torch.from_numpy(v) for k, v in data.items()}
    tu = torch.tensor(u, requires_grad=True)
    ta, tb = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (a, b))

    def part(x, y, c, uu):
        eta = ta + tb * x + uu.reshape(-1, 1)
        return torch.sum(y * eta - torch.exp(eta) - c) - 0.5 * torch.sum(uu ** 2)

    def chunked():
        total = sum(part(d["x"][i:j], d["y"][i:j], d["c"][i:j], tu[i:j])
                    for i, j in _chunks(len(u)))
        return total.item(), torch.autograd.grad(total, (tu, ta, tb))

    def vectorized():
        total = part(d["x"], d["y"], d["c"], tu)
        return total.item(), torch.autograd.grad(total, (tu, ta, tb))
    return [row("W6", case, "torch chunked loop", median_time(chunked, repeats=reps,
                                                              warmup=1, number=1)),
            row("W6", case, "torch vectorized", median_time(vectorized, repeats=reps,
                                                            warmup=1, number=1))]


def _jax_rows(case, data, u, a, b, reps):
    jax = optional("jax")
    if jax is None:
        return []
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    d = {k: jnp.asarray(v) for k, v in data.items()}

    def part(x, y, c, uu, al, be):
        eta = al + be * x + uu.reshape(-1, 1)
        return jnp.sum(y * eta - jnp.exp(eta) - c) - 0.5 * jnp.sum(uu ** 2)

    def chunked(uu, al, be):
        return sum(part(d["x"][i:j], d["y"][i:j], d["c"][i:j], uu[i:j], al, be)
                   for i, j in _chunks(len(u)))
    vec = jax.value_and_grad(lambda uu, al, be: part(d["x"], d["y"], d["c"], uu, al, be),
                             argnums=(0, 1, 2))
    chk = jax.value_and_grad(chunked, argnums=(0, 1, 2))
    jit = jax.jit(vec)
    ju = jnp.asarray(u)
    block = jax.block_until_ready
    return [row("W6", case, "jax chunked loop (eager)",
                median_time(lambda: block(chk(ju, a, b)), repeats=reps, warmup=1, number=1)),
            row("W6", case, "jax vectorized (eager)",
                median_time(lambda: block(vec(ju, a, b)), repeats=reps, warmup=1, number=1)),
            row("W6", case, "jax jit(vectorized)",
                median_time(lambda: block(jit(ju, a, b)), repeats=reps, warmup=2, number=1))]


def speedup_plot(rows, plot=True):
    """Save rows as JSON and draw every W4/W6 speedup saved so far
    (executor time vs tapestry serial) as parallel_speedup.png (see
    ``_harness.save_figure`` for where)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    wl = rows[-1]["workload"].lower()
    (RESULTS_DIR / f"parallel_{wl}.json").write_text(json.dumps(rows, indent=1))
    saved = []
    for w in ("w4", "w6"):
        p = RESULTS_DIR / f"parallel_{w}.json"
        if p.exists():
            saved += json.loads(p.read_text())
    cases = [c for c in dict.fromkeys(r["case"] for r in saved
                                      if "forward" not in str(r["case"]) and r["case"] != "machine")]
    systems = ["tapestry serial", "tapestry threads", "tapestry processes", "tapestry dask",
               "tapestry stacked models, threads"]  # the last: W4 only (batched=True)
    fig, ax = pyplot().subplots(figsize=(11, 4))
    width = 0.8 / len(systems)
    for k, s in enumerate(systems):
        ys = []
        for c in cases:
            t = {r["system"]: r["time_s"] for r in saved if r["case"] == c}
            best = min(v for k, v in t.items() if k.startswith("tapestry serial") and v)
            ys.append(best / t[s] if t.get(s) else 0.0)
        ax.bar(np.arange(len(cases)) + k * width, ys, width, label=s.replace("tapestry ", ""))
    for j, c in enumerate(cases):  # the hand-written NumPy 2-thread ceiling, as a tick
        t = {r["system"]: r["time_s"] for r in saved if r["case"] == c}
        loop = next((v for k, v in t.items() if k.startswith("numpy by hand") and
                     k.endswith("loop")), None)
        two = next((v for k, v in t.items() if k.startswith("numpy by hand") and
                    k.endswith("2 threads")), None)
        if loop and two:
            ax.plot([j - width / 2, j + 0.8 - width / 2], [loop / two] * 2, "k--", lw=1,
                    label="NumPy by hand, 2 threads vs 1" if j == 0 else None)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(cases)) + 0.4 - width / 2)
    ax.set_xticklabels([f"{r_wl(saved, c)} {c}" for c in cases], fontsize=8)
    ax.set_ylabel("value+gradient speedup vs best serial")
    ax.set_title("tapestry parallel_sum, 2 cores (medians, same run per workload)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    save_figure(fig, "parallel_speedup.png", plot)


def r_wl(rows, case):
    return next(r["workload"] for r in rows if r["case"] == case)


def main(quick=False, plot=False):
    import cloudpickle

    import tapestry as tp
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # for worker processes
    reps = 3 if quick else 7
    sizes = [1000] if quick else [1000, 100_000]
    rows = []
    for G in sizes:
        data, u, a, b = make_data(G)
        # The observations go to shared memory once (setup, like a peer's
        # tensor conversion): every system and executor reads the same arrays;
        # process workers map them instead of receiving ~48 MB per call.
        data = {k: tp.parallel.share(v) for k, v in data.items()}
        case = f"G={G:,}"
        rows += _tapestry_rows(tp, case, data, u, a, b, reps)
        rows += _torch_rows(case, data, u, a, b, reps)
        rows += _jax_rows(case, data, u, a, b, reps)
    if plot:
        speedup_plot(rows, plot)
    return rows


if __name__ == "__main__":
    for r in main(quick="--quick" in sys.argv):
        print(r)
