"""Locality-sensitive hash tables over a layer's weight rows (SLIDE).

A query vector ``q`` (the layer's input) retrieves the rows ``w`` whose
inner product with ``q`` is likely large: rows and query are hashed with the
same family into ``L`` tables of ``K``-bit codes, and the rows sharing a
bucket with the query in any table are the candidates.

* :class:`SimHash` -- signs of ``K * L`` sparse random projections
  (entries in {-1, 0, +1}, a third non-zero): collision probability falls
  with the angle between ``q`` and ``w``.
* :class:`DWTA` -- densified winner-take-all: each of the ``K * L`` hash
  functions looks at ``bin_size`` random coordinates and records which is
  largest (``log2(bin_size)`` bits); rank-based, so it suits ReLU
  activations.  (Empty bins, where all the coordinates are zero, hash to 0:
  the densification step of the paper is left out.)

:class:`LSHTables` stores each table as the row ids sorted by code, so a
query is a ``searchsorted`` per table and all buckets of a batch are read
with one vectorized gather; rebuilding re-hashes only the rows changed since
the last build.
"""
from __future__ import annotations

import numpy as np

_CHUNK = 8192  # rows hashed at a time (bounds the temporaries of DWTA)


class SimHash:
    """Signed random projections, ``K`` bits per table, ``L`` tables."""

    def __init__(self, dim, K, L, rng, density=1 / 3):
        if K > 62:
            raise ValueError("SimHash: K must be <= 62 bits.")
        self.K, self.L = K, L
        self.bits = K
        signs = rng.choice(np.array([-1.0, 0.0, 1.0], dtype=np.float32),
                           p=[density / 2, 1 - density, density / 2], size=(dim, K * L))
        self.R = signs
        self.weights = (1 << np.arange(K, dtype=np.int64))

    def codes(self, X):
        """``(n, L)`` int64 bucket codes of the rows of ``X``."""
        out = np.empty((X.shape[0], self.L), dtype=np.int64)
        for s in range(0, X.shape[0], _CHUNK):
            bits = (X[s:s + _CHUNK] @ self.R) > 0
            out[s:s + _CHUNK] = bits.reshape(-1, self.L, self.K) @ self.weights
        return out


class DWTA:
    """Winner-take-all over random coordinate bins: ``K`` winners per table,
    each worth ``log2(bin_size)`` bits."""

    def __init__(self, dim, K, L, rng, bin_size=8):
        if bin_size < 2 or bin_size & (bin_size - 1):
            raise ValueError("DWTA: bin_size must be a power of two >= 2.")
        bits = int(np.log2(bin_size))
        if K * bits > 62:
            raise ValueError("DWTA: K * log2(bin_size) must be <= 62 bits.")
        self.K, self.L, self.bin_size = K, L, bin_size
        self.bits = K * bits
        self.coords = rng.integers(0, dim, size=(K * L, bin_size))
        self.weights = bin_size ** np.arange(K, dtype=np.int64)

    def codes(self, X):
        out = np.empty((X.shape[0], self.L), dtype=np.int64)
        step = max(1, _CHUNK * 8 // self.bin_size)
        for s in range(0, X.shape[0], step):
            winners = np.argmax(X[s:s + step][:, self.coords], axis=-1)
            out[s:s + step] = winners.reshape(-1, self.L, self.K) @ self.weights
        return out


FAMILIES = {"simhash": SimHash, "dwta": DWTA}


class LSHTables:
    """``L`` hash tables over the rows of a weight matrix."""

    def __init__(self, family, n_rows):
        self.family = family
        self.n_rows = n_rows
        self.codes = None

    def build(self, W, rows=None):
        """Hash all rows of ``W`` (or only ``rows``, after updates) and re-sort.

        Codes are kept table-major, ``(L, N)``, in the smallest unsigned type
        that holds them, so re-sorting is a radix sort over 16-bit keys for
        up to ~10^6 rows and the tables cost ~8 bytes per row and table."""
        if self.codes is None or rows is None:
            codes = self.family.codes(W).T
            self.codes = codes.astype(np.uint16 if self.family.bits <= 16 else np.int64)
        elif rows.size:
            self.codes[:, rows] = self.family.codes(W[rows]).T
        self.order = np.argsort(self.codes, axis=1, kind="stable").astype(np.int32)
        self.sorted = np.sort(self.codes, axis=1, kind="stable")  # == codes[order], no gather
        self.flat_order = self.order.reshape(-1)
        self.base = np.arange(self.family.L, dtype=np.int64)[:, None] * self.n_rows

    def query(self, Q, max_active, always=None):
        """Row ids retrieved for the batch ``Q``: the ``max_active`` most
        frequent candidates over all tables and queries (ties by id), plus
        ``always`` (e.g. the true labels), sorted."""
        qc = self.family.codes(Q).T.astype(self.codes.dtype)              # (L, B)
        lo = np.stack([np.searchsorted(self.sorted[l], qc[l], "left")
                       for l in range(self.family.L)])
        hi = np.stack([np.searchsorted(self.sorted[l], qc[l], "right")
                       for l in range(self.family.L)])
        start = (lo + self.base).reshape(-1)
        length = (hi - lo).reshape(-1)
        total = int(length.sum())
        if total:
            offs = np.arange(total) - np.repeat(np.cumsum(length) - length, length)
            cand = self.flat_order[np.repeat(start, length) + offs]
            ids, counts = np.unique(cand, return_counts=True)
            if ids.size > max_active:
                keep = np.argsort(-counts, kind="stable")[:max_active]
                ids = ids[keep]
        else:
            ids = np.empty(0, dtype=np.int64)
        if always is not None:
            ids = np.concatenate([ids, np.asarray(always, dtype=np.int64)])
        return np.unique(ids)
