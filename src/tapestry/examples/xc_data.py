"""Synthetic extreme-classification data: many classes, power-law frequencies.

Real extreme-classification sets (Amazon-670K, Delicious-200K) have a long
tail: a few classes are frequent, most are rare.  Here labels follow a Zipf
law over ``n_classes`` classes; each class that occurs gets a random
prototype, and an example is its class's prototype plus Gaussian noise.

* ``features="dense"``: ``X`` is ``(n, n_features)`` float32, unit rows.
* ``features="sparse"``: each class owns ``nnz`` random feature ids out of
  ``n_features``; an example keeps each with probability ``keep`` and adds
  random ids, given as ``(indices (n, nnz) int64, values (n, nnz) float32)``
  -- the input of an embedding-bag first layer.

Only classes that occur get prototypes, so 10^6 classes cost no more memory
than the examples themselves.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class XCData:
    """Train/test split of a synthetic extreme-classification task."""

    X_train: object
    y_train: np.ndarray
    X_test: object
    y_test: np.ndarray
    n_classes: int
    n_features: int
    features: str


def zipf_labels(rng, n, n_classes, exponent):
    """``n`` labels in ``range(n_classes)``, P(class r) proportional to
    ``(r + 1) ** -exponent``, classes shuffled so frequency is not the id."""
    p = np.arange(1, n_classes + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    ranks = np.minimum(np.searchsorted(cdf, rng.random(n)), n_classes - 1)
    perm_of = rng.permutation(n_classes)
    return perm_of[ranks]


def make_extreme_classification(n_classes=100_000, n_features=64, n_train=60_000,
                                n_test=3_000, zipf=1.0, noise=0.6, features="dense",
                                nnz=16, keep=0.8, seed=0):
    """Generate an :class:`XCData` task (see the module docstring)."""
    if n_classes < 2 or n_train < 1 or n_test < 1:
        raise ValueError("make_extreme_classification: need n_classes >= 2 and "
                         "n_train, n_test >= 1.")
    if features not in ("dense", "sparse"):
        raise ValueError(f"make_extreme_classification: features={features!r}; use "
                         "'dense' or 'sparse'.")
    rng = np.random.default_rng(seed)
    y = zipf_labels(rng, n_train + n_test, n_classes, zipf)
    seen, inv = np.unique(y, return_inverse=True)
    if features == "dense":
        proto = rng.standard_normal((seen.size, n_features)).astype(np.float32)
        X = proto[inv] + noise * rng.standard_normal((y.size, n_features)).astype(np.float32)
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        split = (X[:n_train], X[n_train:])
    else:
        own = rng.integers(0, n_features, (seen.size, nnz))
        idx = own[inv]
        swap = rng.random(idx.shape) > keep          # drop some, add random ones
        idx = np.where(swap, rng.integers(0, n_features, idx.shape), idx)
        val = np.full(idx.shape, 1.0 / np.sqrt(nnz), dtype=np.float32)
        split = ((idx[:n_train], val[:n_train]), (idx[n_train:], val[n_train:]))
    return XCData(split[0], y[:n_train], split[1], y[n_train:], n_classes,
                  n_features, features)
