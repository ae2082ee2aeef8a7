"""W3: gradients nobody asked for are never computed.

loss(w1, b1, x) = sum(exp(w1 @ x + b1[:, None])), bs=4096, f=256, h=512,
float64.  Time and peak memory of the gradient w.r.t. (w1, b1) only and
w.r.t. (w1, b1, x).  NumPy written by hand is the floor.
Peak memory: tracemalloc for NumPy-based systems (tapestry, hand-written,
HIPS autograd); PyTorch allocates outside tracemalloc, so its figure is
the CPU allocator's peak via torch's profiler-free counter when available,
else max-RSS growth (said in the note).
``tapestry jit`` is ``tp.jit(tp.grad(loss, argnums))``, checked equal to
the eager gradient before timing; its peak is the replay's (the program's
own constants are allocated at trace time, outside the measurement).
Peers also under ``torch.compile`` (when it compiles here) and ``jax.jit``.
"""
from __future__ import annotations

import time

import numpy as np

from benchmarks._harness import (compile_rows, jit_compiled, jit_note, median_time, optional,
                                 peak_bytes, peak_rss_delta, row, torch_compile)


def make(quick=False):
    rng = np.random.default_rng(0)
    bs, f, h = (1024, 128, 256) if quick else (4096, 256, 512)
    w1 = 0.01 * rng.standard_normal((h, f))
    b1 = rng.standard_normal(h)
    x = 0.01 * rng.standard_normal((f, bs))
    return w1, b1, x


def loss(w1, b1, x):
    return np.sum(np.exp(w1 @ x + b1[:, None]))


def by_hand(w1, b1, x, want_x=False):
    """The floor: the gradient written by hand in NumPy."""
    e = np.exp(w1 @ x + b1[:, None])
    out = (e @ x.T, e.sum(axis=1))
    return out + (w1.T @ e,) if want_x else out


def main(quick=False, plot=False):
    import tapestry as tp
    w1, b1, x = make(quick)
    reps = 5 if quick else 9
    rows = []
    compiled = []
    for label, argnums in (("grad (w1, b1)", (0, 1)), ("grad (w1, b1, x)", (0, 1, 2))):
        g = tp.grad(loss, argnums=argnums)
        rows.append(row("W3", label, "tapestry", median_time(lambda: g(w1, b1, x), reps),
                        peak_bytes(lambda: g(w1, b1, x)), "tracemalloc"))
        jg = tp.jit(tp.grad(loss, argnums=argnums), fuse=False)
        info = jit_compiled(jg, g, w1, b1, x)
        jt = median_time(lambda: jg(w1, b1, x), reps)
        compiled += compile_rows("W3", label, info, jt)
        rows.append(row("W3", label, "tapestry jit", jt, peak_bytes(lambda: jg(w1, b1, x)),
                        "tracemalloc; " + jit_note(jg)))
        want_x = len(argnums) == 3
        rows.append(row("W3", label, "numpy by hand",
                        median_time(lambda: by_hand(w1, b1, x, want_x), reps),
                        peak_bytes(lambda: by_hand(w1, b1, x, want_x)), "tracemalloc; floor"))
    rows.extend(_inactive_rows(w1, b1, x, reps))
    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(2)
        tw, tb, tx = (torch.tensor(a) for a in (w1, b1, x))
        for label, req in (("grad (w1, b1)", (True, True, False)),
                           ("grad (w1, b1, x)", (True, True, True))):
            def step():
                a = [t.detach().requires_grad_(r) for t, r in zip((tw, tb, tx), req)]
                y = torch.exp(a[0] @ a[2] + a[1][:, None]).sum()
                return torch.autograd.grad(y, [t for t, r in zip(a, req) if r])
            rows.append(row("W3", label, "pytorch", median_time(step, reps),
                            _torch_peak(torch, step), "torch CPU allocator peak"))
        rows += _torch_compile_rows(torch, tw, tb, tx, reps)
    ag = optional("autograd")
    if ag is not None:
        import autograd.numpy as anp

        def aloss(w1, b1, x):
            return anp.sum(anp.exp(anp.dot(w1, x) + b1[:, None]))
        for label, argnums in (("grad (w1, b1)", (0, 1)), ("grad (w1, b1, x)", (0, 1, 2))):
            g = ag.grad(lambda *a, _n=argnums: aloss(*a), argnum=argnums) if False else None
            gs = [ag.grad(aloss, k) for k in argnums]
            fn = lambda: [gk(w1, b1, x) for gk in gs]  # noqa: E731  (autograd: one pass per argnum)
            rows.append(row("W3", label, "hips autograd", median_time(fn, reps),
                            peak_bytes(fn), "tracemalloc; one backward per argument"))
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        jw, jb, jx = (jnp.asarray(a) for a in (w1, b1, x))
        jl = lambda w1, b1, x: jnp.sum(jnp.exp(w1 @ x + b1[:, None]))  # noqa: E731
        for label, argnums in (("grad (w1, b1)", (0, 1)), ("grad (w1, b1, x)", (0, 1, 2))):
            g = jax.grad(jl, argnums=argnums)
            rows.append(row("W3", label, "jax eager",
                            median_time(lambda: jax.block_until_ready(g(jw, jb, jx)), reps),
                            None, "peak not measured"))
            jg = jax.jit(g)
            jax.block_until_ready(jg(jw, jb, jx))
            rows.append(row("W3", label, "jax jit",
                            median_time(lambda: jax.block_until_ready(jg(jw, jb, jx)), reps),
                            None, "peak not measured"))
    return rows + compiled


def _torch_compile_rows(torch, tw, tb, tx, reps):
    """PyTorch's gradient with the loss under ``torch.compile`` (forward and
    backward graphs), time and allocator peak; or one row saying why not."""
    def loss_t(w1, b1, x):
        return torch.exp(w1 @ x + b1[:, None]).sum()
    rows = []
    cl = None
    for label, req in (("grad (w1, b1)", (True, True, False)),
                       ("grad (w1, b1, x)", (True, True, True))):
        def step(cf, req=req):
            a = [t.detach().requires_grad_(r) for t, r in zip((tw, tb, tx), req)]
            return torch.autograd.grad(cf(*a), [t for t, r in zip(a, req) if r])
        if cl is None:
            cl, took = torch_compile(torch, loss_t, step)
            if cl is None:
                return [row("W3", label, "pytorch torch.compile", None, None, f"skipped: {took}")]
        else:
            t0 = time.perf_counter(); step(cl); took = time.perf_counter() - t0
        rows.append(row("W3", label, "pytorch torch.compile", median_time(lambda: step(cl), reps),
                        _torch_peak(torch, lambda: step(cl)),
                        f"torch CPU allocator peak; first call {took:.1f} s"))
    return rows


def _torch_peak(torch, fn):
    """Peak bytes of torch's CPU allocations during ``fn`` via the profiler."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
        cur = peak = 0
        events = sorted((e for e in prof.events() if e.cpu_memory_usage),
                        key=lambda e: e.time_range.start)
        for e in events:
            cur += e.cpu_memory_usage
            peak = max(peak, cur)
        return peak
    except Exception:
        return peak_rss_delta(fn)


def _inactive_rows(w1, b1, x, reps):
    """Plain NumPy work on inputs nobody differentiates, inside ``grad`` of
    another argument, against the same work called directly."""
    import tapestry as tp

    def plain(w1, x):
        return np.sum(np.exp(w1 @ x) * 0.5 + np.tanh(w1 @ x))

    def f(s, w1, x):
        return s * plain(w1, x)

    g = tp.grad(f)
    s = np.float64(2.0)
    return [row("W3", "inactive NumPy inside grad", "tapestry", median_time(lambda: g(s, w1, x), reps),
                None, "grad w.r.t. a scalar; the rest is plain NumPy"),
            row("W3", "inactive NumPy inside grad", "numpy direct",
                median_time(lambda: plain(w1, x), reps), None, "same code, no grad")]
