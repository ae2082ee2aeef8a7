"""W2 -- index-notation kernels (Tullio): Linear, Dist, Laplace.

w: (784, 1024), x: (784, 256), b: (1024,), float32, loss = mean(y**2).
tapestry runs each kernel through ``tapestry.kernel`` (Linear also through
``np.einsum`` on traced arrays); PyTorch (CPU) and JAX (jit) are written
the natural way: a matmul for Linear, a broadcast (k, i, j) array for Dist
and Laplace.  Times are medians in one process; memory is the peak of
tracemalloc for tapestry (NumPy reports its buffers there) and the peak RSS
growth sampled every millisecond for the peers (they allocate outside it).
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np

from benchmarks._harness import optional, peak_bytes, pyplot, row, save_figure

SPECS = {
    "linear": "y[i,j] := w[k,i]*x[k,j] + b[i]",
    "dist": "y[i,j] := (w[k,i] - x[k,j])**2",
    "laplace": "y[i,j] := exp(-abs(w[k,i] - x[k,j]))",
}


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_sampled(fn):
    """Peak growth of the resident set during ``fn()``, sampled each ms."""
    base = _rss()
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.001)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        fn()
    finally:
        done.set()
        t.join()
    return max(peak[0], _rss()) - base


def paired(fwd, vg, repeats):
    """Medians of forward and value+grad timed alternately, and the median of
    their per-pair ratio (robust to the load drifting during the run)."""
    fwd(), vg()
    tf, tg = [], []
    for _ in range(repeats):
        t0 = time.perf_counter(); fwd(); t1 = time.perf_counter(); vg()
        t2 = time.perf_counter()
        tf.append(t1 - t0)
        tg.append(t2 - t1)
    ratio = float(np.median(np.asarray(tg) / np.asarray(tf)))
    return float(np.median(tf)), float(np.median(tg)), ratio


def data(quick):
    k, i, j = (196, 256, 64) if quick else (784, 1024, 256)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((k, i)).astype(np.float32)
    x = rng.standard_normal((k, j)).astype(np.float32)
    b = rng.standard_normal(i).astype(np.float32)
    return w, x, b


# --- tapestry ------------------------------------------------------------------------
def tapestry_fns(case, via="kernel"):
    import tapestry as tp
    if via == "einsum":
        # tp.einsum, so that the forward row (plain arrays) is the optimized
        # contraction too; on traced arrays np.einsum is the same call.
        def f(w, x, b):
            return np.mean((tp.einsum("ki,kj->ij", w, x) + b[:, None]) ** 2)
    else:
        kern = tp.kernel(SPECS[case])
        if case == "linear":
            def f(w, x, b):
                return np.mean(kern(w, x, b) ** 2)
        else:
            def f(w, x, b):
                return np.mean(kern(w, x) ** 2)
    argnums = (0, 1, 2) if case == "linear" else (0, 1)
    return f, tp.value_and_grad(f, argnums=argnums)


# --- peers ---------------------------------------------------------------------------
def torch_fns(torch, case):
    def f(w, x, b):
        if case == "linear":
            y = w.T @ x + b[:, None]
        elif case == "dist":
            y = ((w[:, :, None] - x[:, None, :]) ** 2).sum(0)
        else:
            y = torch.exp(-torch.abs(w[:, :, None] - x[:, None, :])).sum(0)
        return (y ** 2).mean()

    def fwd(w, x, b):
        with torch.no_grad():
            return f(w, x, b)

    def vg(w, x, b):
        for t in (w, x, b):
            t.grad = None
        loss = f(w, x, b)
        loss.backward()
        return loss, w.grad, x.grad, b.grad
    return fwd, vg


def jax_fns(jax, case):
    jnp = jax.numpy

    def f(w, x, b):
        if case == "linear":
            y = w.T @ x + b[:, None]
        elif case == "dist":
            y = ((w[:, :, None] - x[:, None, :]) ** 2).sum(0)
        else:
            y = jnp.exp(-jnp.abs(w[:, :, None] - x[:, None, :])).sum(0)
        return jnp.mean(y ** 2)
    argnums = (0, 1, 2) if case == "linear" else (0, 1)
    fwd = jax.jit(f)
    vg = jax.jit(jax.value_and_grad(f, argnums=argnums))
    return (lambda *a: fwd(*a).block_until_ready(),
            lambda *a: jax.block_until_ready(vg(*a)))


def main(quick=False, plot=False):
    w, x, b = data(quick)
    reps = 3 if quick else 7
    rows = []
    torch = optional("torch")
    jax = optional("jax")
    if jax is not None:
        jax.config.update("jax_platforms", "cpu")
    for case in ("linear", "dist", "laplace"):
        systems = [("tapestry kernel", "kernel")]
        if case == "linear":
            systems.append(("tapestry einsum", "einsum"))
        for name, via in systems:
            f, vg = tapestry_fns(case, via)
            vg(w, x, b)  # compile (numba) and warm caches
            t_f, t_g, ratio = paired(lambda: f(w, x, b), lambda: vg(w, x, b), reps)
            mem = peak_bytes(lambda: vg(w, x, b))
            rows.append(row("W2", f"{case} forward", name, t_f, None, ""))
            rows.append(row("W2", f"{case} value+grad", name, t_g, mem,
                            f"{ratio:.1f}x fwd; tracemalloc"))
        if torch is not None:
            tw, tx, tb = (torch.tensor(a, requires_grad=True) for a in (w, x, b))
            fwd, vg = torch_fns(torch, case)
            n = 3 if case != "linear" and not quick else reps
            mem = peak_rss_sampled(lambda: vg(tw, tx, tb))
            t_f, t_g, ratio = paired(lambda: fwd(tw, tx, tb), lambda: vg(tw, tx, tb), n)
            rows.append(row("W2", f"{case} forward", "pytorch", t_f, None, ""))
            rows.append(row("W2", f"{case} value+grad", "pytorch", t_g, mem,
                            f"{ratio:.1f}x fwd; RSS sampled"))
        if jax is not None:
            jw, jx, jb = (jax.numpy.asarray(a) for a in (w, x, b))
            fwd, vg = jax_fns(jax, case)
            mem = peak_rss_sampled(lambda: vg(jw, jx, jb))  # includes compilation
            n = 3 if case != "linear" and not quick else reps
            t_f, t_g, ratio = paired(lambda: fwd(jw, jx, jb), lambda: vg(jw, jx, jb), n)
            rows.append(row("W2", f"{case} forward", "jax jit", t_f, None, ""))
            rows.append(row("W2", f"{case} value+grad", "jax jit", t_g, mem,
                            f"{ratio:.1f}x fwd; RSS sampled, incl. compile"))
    if plot:
        save_plot(rows, plot)
    return rows


def save_plot(rows, plot=True):
    """Time and memory bars per case (see ``_harness.save_figure`` for where)."""
    cases = ["linear", "dist", "laplace"]
    systems = list(dict.fromkeys(r["system"] for r in rows))
    fig, axes = pyplot().subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(systems)
    for s_i, s in enumerate(systems):
        t = [next((r["time_s"] for r in rows if r["system"] == s and
                   r["case"] == f"{c} value+grad"), np.nan) for c in cases]
        m = [next((r["peak_bytes"] for r in rows if r["system"] == s and
                   r["case"] == f"{c} value+grad"), np.nan) for c in cases]
        xs = np.arange(len(cases)) + s_i * width
        axes[0].bar(xs, t, width, label=s)
        axes[1].bar(xs, np.asarray(m, dtype=float) / 2**20, width, label=s)
    for ax, title in zip(axes, ["value+grad time (s, median)", "peak memory (MiB)"]):
        ax.set_xticks(np.arange(len(cases)) + 0.4 - width / 2)
        ax.set_xticklabels(cases)
        ax.set_yscale("log")
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    fig.suptitle("W2 kernels, float32, w (784,1024), x (784,256)")
    fig.tight_layout()
    return save_figure(fig, "w2.png", plot, dpi=90)


if __name__ == "__main__":
    import sys
    from tapestry.bench_runner import _print
    _print(main(quick="--quick" in sys.argv, plot="--plot" in sys.argv))
