"""W8 -- per-example gradients and per-item code under vmap.

(a) An MLP 784 -> 256 -> 10 (tanh, softmax cross-entropy), batch 256: the
gradient of each example's loss, ``vmap(grad(loss), in_axes=(None, 0, 0))``,
against one gradient of the summed batch loss (the floor), a Python loop of
``grad`` calls, ``torch.func.vmap(torch.func.grad)`` and JAX's vmap (eager
and jit).  (b) W7's per-item ``group_logp``, unchanged, under ``vmap``
inside ``value_and_grad``, against W6's hand-vectorized call.  (c) W4's 64
MLPs written ``vmap(value_and_grad(mlp))`` over stacked parameters, against
``torch.func.vmap`` and JAX.  Every system of a part timed in turns, in one
run; reported as ratios.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

from benchmarks._harness import interleaved_times, optional, row

BATCH, D_IN, HIDDEN, D_OUT = 256, 784, 256, 10


def make_mlp(seed=0):
    rng = np.random.default_rng(seed)
    params = {"W1": rng.standard_normal((HIDDEN, D_IN)) * 0.05, "b1": np.zeros(HIDDEN),
              "W2": rng.standard_normal((D_OUT, HIDDEN)) * 0.05, "b2": np.zeros(D_OUT)}
    X = rng.standard_normal((BATCH, D_IN))
    Y = np.eye(D_OUT)[rng.integers(0, D_OUT, BATCH)]
    return params, X, Y


def loss(p, x, y, m=np):
    """One example's softmax cross-entropy (``m``: the array module)."""
    h = m.tanh(p["W1"] @ x + p["b1"])
    z = p["W2"] @ h + p["b2"]
    z = z - m.max(z)
    return -m.sum(y * (z - m.log(m.sum(m.exp(z)))))


def batch_loss(p, X, Y):
    """The summed loss of the batch, written batched (the floor)."""
    h = np.tanh(X @ p["W1"].T + p["b1"])
    z = h @ p["W2"].T + p["b2"]
    z = z - np.max(z, axis=1, keepdims=True)
    return -np.sum(Y * (z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))))


def per_example_systems(tp, quick):
    params, X, Y = make_mlp()
    n_loop = 32 if quick else BATCH
    pe = tp.vmap(tp.grad(loss), in_axes=(None, 0, 0))
    g1 = tp.grad(loss)
    systems = [("tapestry vmap(grad)", lambda: pe(params, X, Y)),
               ("tapestry grad of the batch loss (floor)",
                lambda: tp.grad(batch_loss)(params, X, Y)),
               (f"tapestry loop of grad (x{BATCH // n_loop})",
                lambda: [g1(params, X[i], Y[i]) for i in range(n_loop)])]
    torch = optional("torch")
    if torch is not None:
        from torch.func import grad, vmap
        tp_ = {k: torch.tensor(v) for k, v in params.items()}
        tX, tY = torch.tensor(X), torch.tensor(Y)
        tpe = vmap(grad(lambda p, x, y: loss(p, x, y, torch)), in_dims=(None, 0, 0))
        systems.append(("torch.func vmap(grad)", lambda: tpe(tp_, tX, tY)))
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        jpe = jax.vmap(jax.grad(lambda p, x, y: loss(p, x, y, jnp)), in_axes=(None, 0, 0))
        jjit = jax.jit(jpe)
        jp = {k: jnp.asarray(v) for k, v in params.items()}
        jX, jY = jnp.asarray(X), jnp.asarray(Y)
        systems.append(("jax vmap(grad) eager", lambda: jax.block_until_ready(jpe(jp, jX, jY))))
        systems.append(("jax jit(vmap(grad)) (reference)",
                        lambda: jax.block_until_ready(jjit(jp, jX, jY))))
    return systems, n_loop


def w7_systems(tp):
    from benchmarks.w7_small_items import group_logp, groups_logp, make_items
    groups, stacked, u, a, b = make_items()
    axes = ({k: 0 for k in stacked}, None, None, None)
    mapped = tp.value_and_grad(
        lambda u, a, b: np.sum(tp.vmap(group_logp, in_axes=axes)(stacked, u, a, b)),
        argnums=(0, 1, 2))
    vec = tp.value_and_grad(lambda u, a, b: groups_logp(stacked, u, a, b), argnums=(0, 1, 2))

    def vectorized(items, size):  # the per-item code, unchanged, each chunk vmapped
        return tp.value_and_grad(lambda u, a, b: tp.parallel_sum(
            group_logp, items, u, a, b, chunk_size=size, vectorize=True), argnums=(0, 1, 2))
    def vectorized_jit(items, size):  # the same, f wrapped in tp.jit: compiled chunks
        jf = tp.jit(group_logp)
        return tp.value_and_grad(lambda u, a, b: tp.parallel_sum(
            jf, items, u, a, b, chunk_size=size, vectorize=True), argnums=(0, 1, 2))
    n = len(groups)
    # items as stacked arrays (item i: row i of each) and as a list of dicts
    one, two, listed = vectorized(stacked, n), vectorized(stacked, n // 2), \
        vectorized(groups, n // 2)
    one_jit, two_jit = vectorized_jit(stacked, n), vectorized_jit(stacked, n // 2)
    return [("tapestry value_and_grad of vmap(group_logp)", lambda: mapped(u, a, b)),
            ("tapestry parallel_sum(vectorize=True), 1 chunk", lambda: one(u, a, b)),
            (f"tapestry parallel_sum(vectorize=True), 2 chunks of {n // 2}", lambda: two(u, a, b)),
            (f"same, items a list of {n} dicts", lambda: listed(u, a, b)),
            ("tapestry parallel_sum(jit(f), vectorize=True), 1 chunk", lambda: one_jit(u, a, b)),
            (f"tapestry parallel_sum(jit(f), vectorize=True), 2 chunks of {n // 2}",
             lambda: two_jit(u, a, b)),
            ("tapestry hand-vectorized (W6, one call)", lambda: vec(u, a, b))]


def w4_systems(tp):
    from benchmarks.w4_sum_over_models import make_models, mlp, mlp_stacked
    ms, x = make_models(64, 64)
    stacked = {k: np.stack([m[k] for m in ms]) for k in ms[0]}
    vg = tp.vmap(tp.value_and_grad(mlp), in_axes=(0, None))
    st = tp.value_and_grad(lambda p: mlp_stacked(p, x))
    systems = [("tapestry vmap(value_and_grad(mlp))", lambda: vg(stacked, x)),
               ("tapestry stacked by hand", lambda: st(stacked))]
    torch = optional("torch")
    if torch is not None:
        from torch.func import grad_and_value, vmap
        ts = {k: torch.tensor(v) for k, v in stacked.items()}
        tx = torch.tensor(x)

        def tmlp(m, x):
            h = torch.tanh(m["W1"] @ x + m["b1"].reshape(-1, 1))
            return torch.sum(m["W2"] @ h + m["b2"].reshape(-1, 1))
        tvg = vmap(grad_and_value(tmlp), in_dims=(0, None))
        systems.append(("torch.func vmap(grad_and_value)", lambda: tvg(ts, tx)))
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)

        def jmlp(m, x):
            h = jnp.tanh(m["W1"] @ x + m["b1"].reshape(-1, 1))
            return jnp.sum(m["W2"] @ h + m["b2"].reshape(-1, 1))
        jvg = jax.vmap(jax.value_and_grad(jmlp), in_axes=(0, None))
        jj = jax.jit(jvg)
        js = {k: jnp.asarray(v) for k, v in stacked.items()}
        jx = jnp.asarray(x)
        systems.append(("jax vmap eager", lambda: jax.block_until_ready(jvg(js, jx))))
        systems.append(("jax jit(vmap) (reference)", lambda: jax.block_until_ready(jj(js, jx))))
    return systems


def main(quick=False, plot=False):
    import tapestry as tp
    from tapestry.core.batched import FALLBACKS
    reps = 3 if quick else 7
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        systems, n_loop = per_example_systems(tp, quick)
        t = interleaved_times(systems, repeats=reps, burst=2)
    floor, mine = t["tapestry grad of the batch loss (floor)"], t["tapestry vmap(grad)"]
    case = f"MLP {D_IN}-{HIDDEN}-{D_OUT}, batch {BATCH}"
    for name, s in t.items():
        if name.startswith("tapestry loop"):
            s = s * BATCH / n_loop
            name = "tapestry loop of grad"
        rows.append(row("W8", case, name, s, note=f"{s / floor:.2f}x the batch gradient; "
                                                  f"tapestry vmap is {mine / s:.2f}x this"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t7 = interleaved_times(w7_systems(tp), repeats=reps)
    vec = t7["tapestry hand-vectorized (W6, one call)"]
    for name, s in t7.items():
        rows.append(row("W8", "W7 item code, G=1,000", name, s,
                        note=f"{s / vec:.2f}x the hand-vectorized call"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t4 = interleaved_times(w4_systems(tp), repeats=reps)
    v4 = t4["tapestry vmap(value_and_grad(mlp))"]
    for name, s in t4.items():
        rows.append(row("W8", "W4 64 MLPs 32-64-1", name, s,
                        note=f"tapestry vmap is {v4 / s:.2f}x this"))
    rows.append(row("W8", "all", "loop fallbacks during the run", None,
                    note=", ".join(f"{k}: {v}" for k, v in FALLBACKS.items()) or "none"))
    return rows


if __name__ == "__main__":
    for r in main(quick="--quick" in sys.argv):
        ms = "" if r["time_s"] is None else f"{r['time_s'] * 1e3:9.3f} ms"
        print(f"{r['case']:<28} {r['system']:<46} {ms:>12}  {r['note']}")
