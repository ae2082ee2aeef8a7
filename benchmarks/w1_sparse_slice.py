"""W1 -- sparse slice gradient (SLIDE): loss(W) = sum(W[S] @ x).

x: (512,) float64; W: (N, 512) float64, N = 2^8 .. 2^16; S: 64 rows drawn
with replacement.  For each system: (a) forward, (b) gradient w.r.t. W,
(c) a full SGD step W -= 0.1 * grad, (d) peak memory of (c) (tracemalloc,
NumPy-based systems only), and a lazy-Adam step against torch's SparseAdam.
tapestry uses plain ``W[S]`` indexing and plain ``W -= 0.1 * g``.
"""
from __future__ import annotations

import numpy as np

from ._harness import median_time, optional, peak_bytes, pyplot, row, save_figure

D, K = 512, 64
WL = "W1"


def _problem(n):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, D)), rng.standard_normal(D), rng.integers(0, n, K)


def _tapestry(n, repeats):
    import tapestry as tp
    W, x, S = _problem(n)
    loss = lambda W: np.sum(W[S] @ x)
    g_sparse, g_dense = tp.grad(loss), tp.grad(loss, sparse=False)

    def step():
        g = g_sparse(W)
        W.__isub__(0.1 * g)     # W -= 0.1 * g: a scatter into the touched rows

    def step_dense():
        W.__isub__(0.1 * g_dense(W))

    opt = tp.optim.Adam(lr=1e-3)

    def adam():
        opt.update([W], [g_sparse(W)])
    t = lambda f: median_time(f, repeats=repeats)
    yield "tapestry", {"forward": t(lambda: loss(W)), "grad": t(lambda: g_sparse(W)),
                       "step": t(step), "adam step": t(adam)}, peak_bytes(step)
    yield "tapestry sparse=False", {"grad": t(lambda: g_dense(W)),
                                    "step": t(step_dense)}, peak_bytes(step_dense)


def _torch(n, repeats):
    torch = optional("torch")
    if torch is None:
        return
    torch.set_num_threads(1)  # 2 threads on this shared 2-core machine: ~8 ms of spin-waits per step
    F = torch.nn.functional
    W0, x0, S0 = _problem(n)
    x, S = torch.tensor(x0), torch.tensor(S0)
    t = lambda f: median_time(f, repeats=repeats)

    Wd = torch.tensor(W0, requires_grad=True)
    fwd = lambda: (Wd[S] @ x).sum()

    def grad_dense():
        Wd.grad = None
        fwd().backward()

    def step_dense():
        grad_dense()
        with torch.no_grad():
            Wd.sub_(0.1 * Wd.grad)
    with torch.no_grad():
        f_time = t(lambda: fwd())
    yield "torch dense", {"forward": f_time, "grad": t(grad_dense), "step": t(step_dense)}, None

    We = torch.nn.Parameter(torch.tensor(W0))
    sgd = torch.optim.SGD([We], lr=0.1)
    adam = torch.optim.SparseAdam([We], lr=1e-3)
    efwd = lambda: (F.embedding(S, We, sparse=True) @ x).sum()

    def grad_emb():
        We.grad = None
        efwd().backward()

    def step_emb(opt=sgd):
        grad_emb()
        opt.step()
    with torch.no_grad():
        f_time = t(lambda: efwd())
    yield "torch embedding(sparse=True)", {
        "forward": f_time, "grad": t(grad_emb), "step": t(step_emb),
        "adam step": t(lambda: step_emb(adam))}, None


def _jax(n, repeats):
    jax = optional("jax")
    if jax is None:
        return
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    W0, x0, S0 = _problem(n)
    x, S = jnp.asarray(x0), jnp.asarray(S0)
    loss = lambda W: jnp.sum(W[S] @ x)
    t = lambda f: median_time(f, repeats=repeats)
    for name, wrap in (("jax eager", lambda f: f), ("jax jit", jax.jit)):
        W = {"W": jnp.asarray(W0)}
        fwd, g = wrap(loss), wrap(jax.grad(loss))
        upd = wrap(lambda W: W - 0.1 * jax.grad(loss)(W))

        def step():
            W["W"] = upd(W["W"])
            W["W"].block_until_ready()
        yield name, {"forward": t(lambda: fwd(W["W"]).block_until_ready()),
                     "grad": t(lambda: g(W["W"]).block_until_ready()),
                     "step": t(step)}, None


def main(quick=False, plot=False):
    """Rows for every system and N; ``plot`` saves step time against N."""
    from tapestry.examples.slide import single_threaded_blas
    with single_threaded_blas():  # like torch.set_num_threads(1): see _torch
        return _main(quick, plot)


def _main(quick, plot):
    ns = [2 ** 8, 2 ** 12, 2 ** 16] if quick else [2 ** k for k in range(8, 17)]
    repeats = 3 if quick else 7
    rows, steps = [], {}
    for _ in _tapestry(ns[0], 1):  # warm the process (imports, allocator) first
        pass
    for n in ns:
        for source in (_tapestry, _torch, _jax):
            for system, times, peak in source(n, repeats):
                for phase, tm in times.items():
                    rows.append(row(WL, f"{phase} N={n}", system, tm,
                                    peak if phase == "step" else None,
                                    "peak: tracemalloc" if phase == "step" and peak else ""))
                steps.setdefault(system, {})[n] = times["step"]
    for system, by_n in steps.items():
        ratio = by_n[ns[-1]] / by_n[ns[0]]
        rows.append(row(WL, f"step N={ns[-1]} / N={ns[0]}", system, None, None,
                        f"ratio {ratio:.2f}"))
    if plot:
        _plot(steps, ns, plot)
    return rows


def _plot(steps, ns, plot):
    fig, ax = pyplot().subplots(figsize=(6.4, 4.2))
    for system, by_n in steps.items():
        ax.plot(ns, [by_n[n] * 1e3 for n in ns], marker="o", label=system)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N (rows of W)")
    ax.set_ylabel("SGD step time (ms, median)")
    ax.set_title("W1: loss = sum(W[S] @ x), |S| = 64, D = 512")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, "w1.png", plot)
