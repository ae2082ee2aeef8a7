"""W5: per-operation overhead of value+gradient.

A chain of 1,000 elementwise ops cycling (sin, * 1.0001, + 0.5) on a 0-d
value and on a 10-element array; loss = sum.  Reported as microseconds per
op (value+gradient time / 1,000), every system in the same process.
``tapestry jit`` is ``tp.jit(tp.value_and_grad(...))``: the chain traced
once, then replayed as 2,000-odd NumPy calls (forward and backward) with no
engine in between; its compile rows give the first call against a replay.
PyTorch is also timed under ``torch.compile`` when that compiles here.
"""
from __future__ import annotations

import numpy as np

from benchmarks._harness import (compile_rows, jit_compiled, jit_note, median_time, optional,
                                 row, torch_compile)

N_OPS = 1000


def chain(x, sin=np.sin):
    for i in range(N_OPS):
        k = i % 3
        if k == 0:
            x = sin(x)
        elif k == 1:
            x = x * 1.0001
        else:
            x = x + 0.5
    return x.sum() if hasattr(x, "sum") else x


def _numba():
    import importlib.util
    return importlib.util.find_spec("numba") is not None


def _cases():
    return {"0-d": np.array(0.3), "10 elements": np.linspace(0.0, 1.0, 10)}


def main(quick=False, plot=False):
    import tapestry as tp
    repeats = 5 if quick else 15
    rows = []
    torch, jax, ag = optional("torch"), optional("jax"), optional("autograd")
    for case, x0 in _cases().items():
        def per_op(fn):
            return median_time(fn, repeats=repeats, warmup=2, number=1) / N_OPS

        vg = tp.value_and_grad(lambda x: np.sum(chain(x)))
        rows.append(row("W5", case, "tapestry", per_op(lambda: vg(x0)), note="per op"))
        jvg = tp.jit(tp.value_and_grad(lambda x: np.sum(chain(x))), fuse=False)
        info = jit_compiled(jvg, vg, x0)
        jit_op = per_op(lambda: jvg(x0))
        rows.append(row("W5", case, "tapestry jit", jit_op, note="per op; " + jit_note(jvg)))
        if _numba():  # the chain fused into one numba loop
            fvg = tp.jit(tp.value_and_grad(lambda x: np.sum(chain(x))), fuse=True)
            finfo = jit_compiled(fvg, vg, x0, rtol=1e-12)
            rows.append(row("W5", case, "tapestry jit, fused loops", per_op(lambda: fvg(x0)),
                            note=f"per op; compile {finfo['first'] * 1e3:.0f} ms; "
                            + jit_note(fvg, 1e-12)))
        compiled_rows = compile_rows("W5", case, info, jit_op * N_OPS)
        rows.append(row("W5", case, "numpy forward only", per_op(lambda: chain(x0)),
                        note="floor, no gradient"))
        if torch is not None:
            torch.set_num_threads(1)
            xt0 = torch.tensor(x0)

            def torch_vg():
                xt = xt0.clone().requires_grad_(True)
                y = chain(xt, torch.sin).sum()
                y.backward()
                return y, xt.grad
            rows.append(row("W5", case, "pytorch eager", per_op(torch_vg), note="per op"))
            rows.append(_torch_compile_row(torch, case, xt0, per_op))
        if jax is not None:
            import jax.numpy as jnp
            jax.config.update("jax_enable_x64", True)
            jvg = jax.value_and_grad(lambda x: jnp.sum(chain(x, jnp.sin)))
            xj = jnp.asarray(x0)
            rows.append(row("W5", case, "jax eager", per_op(
                lambda: jax.block_until_ready(jvg(xj))), note="per op"))
            jvg_jit = jax.jit(jvg)
            rows.append(row("W5", case, "jax jit (reference)", per_op(
                lambda: jax.block_until_ready(jvg_jit(xj))), note="compiled, not a peer in kind"))
        if ag is not None:
            import autograd.numpy as anp
            avg = ag.value_and_grad(lambda x: anp.sum(chain(x, anp.sin)))
            rows.append(row("W5", case, "hips autograd", per_op(lambda: avg(x0)), note="per op"))
        rows += compiled_rows
    return rows


def _torch_compile_row(torch, case, xt0, per_op):
    """PyTorch's value and gradient with the chain under ``torch.compile``
    (its compile time, forward and backward graphs, in the note), or a row
    saying why it did not run."""
    def step(cf):
        xt = xt0.clone().requires_grad_(True)
        y = cf(xt)
        y.backward()
        return y, xt.grad
    cf, took = torch_compile(torch, lambda x: chain(x, torch.sin).sum(), step)
    if cf is None:
        return row("W5", case, "pytorch torch.compile", None, note=f"skipped: {took}")
    return row("W5", case, "pytorch torch.compile", per_op(lambda: step(cf)),
               note=f"per op; first call (compile) {took:.1f} s")
