"""Fit models with ``tapestry.optimize`` (SciPy's optimizers, exact
derivatives from tapestry, parameters as pytrees).

* L2-regularised logistic regression, parameters ``{"w": ..., "b": ...}``,
  with L-BFGS-B (gradient from ``value_and_grad``).
* The 100-parameter Rosenbrock function with Newton-CG, whose Hessian-vector
  products come from ``hessian_vector_product`` (the Hessian is never formed).

Run: ``tapestry demo optimize`` (needs SciPy: ``pip install 'tapestry[scipy]'``).
"""
from __future__ import annotations

import time

import numpy as np

from tapestry.optimize import minimize


def logistic_data(rng, n=400, d=5):
    """Features and 0/1 labels drawn from a logistic model."""
    x = rng.standard_normal((n, d))
    w_true = rng.standard_normal(d)
    p = 1.0 / (1.0 + np.exp(-(x @ w_true + 0.5)))
    return x, (rng.uniform(size=n) < p).astype(float)


def logistic_loss(params, x, y, l2=1e-2):
    """Mean cross-entropy from logits plus ``l2/2 * |w|^2``."""
    z = x @ params["w"] + params["b"]
    return np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * l2 * np.sum(params["w"] ** 2)


def fit_logistic(x, y, l2=1e-2):
    params = {"w": np.zeros(x.shape[1]), "b": np.array(0.0)}
    return minimize(logistic_loss, params, args=(x, y, l2), method="L-BFGS-B",
                    options={"gtol": 1e-10, "ftol": 1e-14})


def rosenbrock(x):
    """``sum 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2``; minimum 0 at all ones."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_start(n=100):
    x0 = np.full(n, -1.2)
    x0[1::2] = 1.0
    return x0


def fit_rosenbrock(n=100):
    return minimize(rosenbrock, rosenbrock_start(n), method="Newton-CG",
                    options={"xtol": 1e-10})


def main(quick=False):
    """Both fits (``quick`` is accepted for the CLI; they take about a second)."""
    rng = np.random.default_rng(0)
    x, y = logistic_data(rng)
    t0 = time.perf_counter()
    params, res = fit_logistic(x, y)
    print(f"logistic regression, L-BFGS-B: {res.nit} iterations, loss {res.fun:.6f}, "
          f"{time.perf_counter() - t0:.2f} s")
    print(f"  w = {np.round(params['w'], 3)}, b = {float(params['b']):.3f}")
    t0 = time.perf_counter()
    sol, res = fit_rosenbrock()
    print(f"Rosenbrock (100 parameters), Newton-CG with hessp: {res.nit} iterations, "
          f"{res.nhev} Hessian-vector products, max |x - 1| = {np.abs(sol - 1).max():.1e}, "
          f"{time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
