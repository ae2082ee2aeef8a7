"""SLIDE: a network whose training step costs O(active neurons), not O(width).

input x (B, d) -> hidden (H, sampled) -> output (C classes, sampled)

Each layer keeps LSH tables (:mod:`.lsh`, SimHash or DWTA, ``K`` bits x
``L`` tables) over its weight rows.  A step queries the hidden layer's
tables with the inputs and the output layer's tables with the hidden
activations, so the active neurons ``S1``, ``S2`` depend on the activations;
the true labels are always in ``S2``.  The loss is ordinary NumPy::

    h = np.maximum(x @ W1[S1].T + b1[S1], 0)
    logits = h @ W2[S2][:, S1].T + b2[S2]

so ``tp.grad`` returns row-sparse gradients (``tp.AxisSparse``) for every
parameter and the lazy Adam update touches only those rows.  Tables are
rebuilt every ``rebuild_every`` steps, re-hashing the rows updated since.
The output layer's ``K`` defaults to about ``log2(C / 16)``, so buckets hold
~16 rows whatever ``C`` is: the step time stays flat as ``C`` grows.

A dense baseline (full hidden layer, full softmax over all classes) is
trained with the same engine and optimizer; both are evaluated by
precision@1 on held-out data with full (unsampled) inference.

Run: ``tapestry demo slide`` (``--quick`` for a smaller run), or
``python -m tapestry.examples.slide --classes 100000 --steps 600``.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

import tapestry as tp

from ..progress import Progress
from .lsh import FAMILIES, LSHTables
from .xc_data import make_extreme_classification


@dataclass
class SlideConfig:
    n_classes: int = 100_000
    n_features: int = 64
    hidden: int = 128
    batch: int = 128
    steps: int = 600                 # SLIDE steps
    dense_steps: int = 300           # baseline steps (each costs O(C))
    lr: float = 5e-3
    family: str = "simhash"          # or "dwta"
    K_hidden: int = 4
    L_hidden: int = 8
    max_hidden: int = 112            # active hidden neurons per batch (at most)
    K_out: int | None = None         # default: ~log2(n_classes / 16)
    L_out: int = 16
    max_out: int = 1024              # retrieved classes per batch (plus the labels)
    rebuild_every: int = 50
    n_train: int = 60_000
    n_test: int = 3_000
    seed: int = 0


def init_params(cfg, rng):
    """``[W1 (H, d), b1 (H,), W2 (C, H), b2 (C,)]``, float32."""
    W1 = rng.standard_normal((cfg.hidden, cfg.n_features)).astype(np.float32)
    W1 *= np.sqrt(2.0 / cfg.n_features)
    W2 = (0.01 * rng.standard_normal((cfg.n_classes, cfg.hidden))).astype(np.float32)
    return [W1, np.zeros(cfg.hidden, np.float32), W2, np.zeros(cfg.n_classes, np.float32)]


def softmax_xent(logits, target=None, labels=None):
    """Mean cross-entropy, the target given as a one-hot constant or as
    ``labels`` (column indices, read with ``np.take_along_axis``)."""
    z = logits - np.max(tp.stop_gradient(logits), axis=1, keepdims=True)
    if labels is not None:
        picked = np.sum(np.take_along_axis(z, labels[:, None], axis=1), axis=1)
    else:
        picked = np.sum(z * target, axis=1)
    return np.mean(np.log(np.sum(np.exp(z), axis=1)) - picked)


def slide_loss(params, x, S1, S2, target):
    """The loss on the sampled neurons: plain NumPy on gathered rows."""
    W1, b1, W2, b2 = params
    h = np.maximum(x @ W1[S1].T + b1[S1], 0.0)
    logits = h @ W2[S2][:, S1].T + b2[S2]
    return softmax_xent(logits, target)


def dense_loss(params, x, y):
    """The baseline: every hidden neuron, softmax over every class."""
    W1, b1, W2, b2 = params
    h = np.maximum(x @ W1.T + b1, 0.0)
    return softmax_xent(h @ W2.T + b2, labels=y)


class SlideNet:
    """Parameters, LSH tables, and the sampled training step."""

    def __init__(self, cfg):
        self.cfg = cfg
        rng = np.random.default_rng(cfg.seed)
        self.params = init_params(cfg, rng)
        fam = FAMILIES[cfg.family]
        K_out = cfg.K_out or max(4, int(round(np.log2(max(cfg.n_classes / 16, 2)))))
        if cfg.family == "dwta":  # 3 bits per winner with bins of 8
            K_out = max(2, int(np.ceil(K_out / 3)))
        self.hidden_tables = LSHTables(fam(cfg.n_features, cfg.K_hidden if cfg.family ==
                                           "simhash" else max(1, cfg.K_hidden // 3 + 1),
                                           cfg.L_hidden, rng), cfg.hidden)
        self.out_tables = LSHTables(fam(cfg.hidden, K_out, cfg.L_out, rng), cfg.n_classes)
        self.opt = tp.optim.Adam(lr=cfg.lr)
        self.vg = tp.value_and_grad(slide_loss)
        self.touched = ([], [])
        self.t = 0
        self.rebuild(full=True)

    def rebuild(self, full=False):
        """Re-hash the rows updated since the last build (all with ``full``)."""
        W1, _, W2, _ = self.params
        r1 = None if full else np.unique(np.concatenate(self.touched[0] or [[0]]))
        r2 = None if full else np.unique(np.concatenate(self.touched[1] or [[0]]))
        self.hidden_tables.build(W1, r1)
        self.out_tables.build(W2, r2)
        self.touched = ([], [])

    def active(self, x, y=None):
        """Hidden neurons for ``x``, then classes for the resulting activations."""
        cfg = self.cfg
        W1, b1, _, _ = self.params
        S1 = self.hidden_tables.query(x, cfg.max_hidden)
        if S1.size == 0:
            S1 = np.arange(min(cfg.max_hidden, cfg.hidden))
        h = np.zeros((x.shape[0], cfg.hidden), np.float32)
        h[:, S1] = np.maximum(x @ W1[S1].T + b1[S1], 0.0)
        S2 = self.out_tables.query(h, cfg.max_out, always=y)
        return S1, S2

    def step(self, x, y):
        """One sampled training step; returns the loss."""
        S1, S2 = self.active(x, y)
        target = (S2[None, :] == y[:, None]).astype(np.float32)
        loss, grads = self.vg(self.params, x, S1, S2, target)
        self.opt.update(self.params, grads)
        self.touched[0].append(S1)
        self.touched[1].append(S2)
        self.t += 1
        if self.t % self.cfg.rebuild_every == 0:
            self.rebuild()
        return float(loss)


def predict(params, X, chunk=256):
    """Full (unsampled) inference: argmax over every class."""
    W1, b1, W2, b2 = params
    out = np.empty(X.shape[0], dtype=np.int64)
    for s in range(0, X.shape[0], chunk):
        h = np.maximum(X[s:s + chunk] @ W1.T + b1, 0.0)
        out[s:s + chunk] = np.argmax(h @ W2.T + b2, axis=1)
    return out


def precision_at_1(params, X, y):
    return float(np.mean(predict(params, X) == y))


def _batches(rng, n, batch, steps):
    for _ in range(steps):
        yield rng.integers(0, n, batch)


def train(step_fn, data, cfg, description):
    """Run ``steps`` steps with a progress display; returns per-step times."""
    rng = np.random.default_rng(cfg.seed + 1)
    times = []
    with Progress(description, cfg.steps, fields={"loss": float("nan")}) as bar:
        for idx in _batches(rng, len(data.y_train), cfg.batch, cfg.steps):
            t0 = time.perf_counter()
            loss = step_fn(data.X_train[idx], data.y_train[idx])
            times.append(time.perf_counter() - t0)
            bar.advance(loss=float(loss))
    return np.array(times)


def dense_stepper(cfg):
    """The full-softmax baseline's parameters and step (same engine, same Adam)."""
    params = init_params(cfg, np.random.default_rng(cfg.seed))
    opt = tp.optim.Adam(lr=cfg.lr)
    vg = tp.value_and_grad(dense_loss)

    def step(x, y):
        loss, grads = vg(params, x, y)
        opt.update(params, grads)
        return float(loss)
    return params, step


def run(cfg, dense=True, data=None):
    """Train SLIDE (and the dense baseline); return a dict of results."""
    data = data or make_extreme_classification(cfg.n_classes, cfg.n_features, cfg.n_train,
                                               cfg.n_test, seed=cfg.seed)
    net = SlideNet(cfg)
    tp.debug.reset_densify_counts()
    t_slide = train(net.step, data, cfg, f"SLIDE C={cfg.n_classes:,}")
    res = {"n_classes": cfg.n_classes, "slide_step_s": float(np.median(t_slide)),
           "slide_step_mean_s": float(np.mean(t_slide)),
           "slide_p1": precision_at_1(net.params, data.X_test, data.y_test),
           "densify": tp.debug.densify_counts()}
    res["slide_train_s"] = float(np.sum(t_slide))
    if dense:
        params, step = dense_stepper(cfg)
        dcfg = SlideConfig(**{**cfg.__dict__, "steps": cfg.dense_steps})
        t_dense = train(step, data, dcfg, f"dense C={cfg.n_classes:,}")
        res.update(dense_step_s=float(np.median(t_dense)), dense_train_s=float(np.sum(t_dense)),
                   dense_p1=precision_at_1(params, data.X_test, data.y_test))
    return res


def _report(results):
    from ..console import print_table
    rows = []
    for r in results:
        d = r.get("dense_step_s")
        rows.append([f"{r['n_classes']:,}",
                     f"{r['slide_step_s'] * 1e3:.1f} / {r['slide_step_mean_s'] * 1e3:.1f} ms",
                     "-" if d is None else f"{d * 1e3:.1f} ms",
                     f"{r['slide_train_s']:.1f}" + ("" if d is None
                                                    else f" / {r['dense_train_s']:.1f}"),
                     f"{r['slide_p1']:.3f}" + ("" if d is None else f" / {r['dense_p1']:.3f}")])
    print_table("SLIDE vs dense full softmax (step: median / mean incl. rebuilds)",
                ("classes", "SLIDE step", "dense step", "train s SLIDE/dense",
                 "P@1 SLIDE/dense"), rows)
    dens = {k: v for r in results for k, v in r["densify"].items()}
    print(f"densifications of sparse cotangents during SLIDE training: {dens or 'none'}")


def single_threaded_blas():
    """Limit BLAS to one thread (threadpoolctl, if installed): on a shared,
    loaded 2-core machine OpenBLAS's second thread spin-waits and turns a
    0.5 ms matmul into 15 ms.  Both SLIDE and the baseline run under it."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        import contextlib
        return contextlib.nullcontext()
    return threadpool_limits(1)


def main(quick=False, classes=None, steps=None, dense=True, family="simhash"):
    """``tapestry demo slide``: SLIDE at C and 10C classes (C = 100,000, or
    10,000 with ``quick``), the dense baseline at C with half the steps."""
    with single_threaded_blas():
        return _main(quick, classes, steps, dense, family)


def _main(quick, classes, steps, dense, family):
    base = 10_000 if quick else 100_000
    C = classes or base
    steps = steps or (300 if quick else 480)
    cfg = SlideConfig(n_classes=C, steps=steps, family=family, dense_steps=steps // 2,
                      n_train=20_000 if quick else 60_000, n_test=1_000 if quick else 3_000)
    results = [run(cfg, dense=dense)]
    big = SlideConfig(**{**cfg.__dict__, "n_classes": 10 * C, "steps": max(50, cfg.steps // 4)})
    results.append(run(big, dense=False))
    _report(results)
    return results


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--classes", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--family", choices=sorted(FAMILIES), default="simhash")
    p.add_argument("--no-dense", action="store_true")
    a = p.parse_args()
    main(a.quick, a.classes, a.steps, not a.no_dense, a.family)
