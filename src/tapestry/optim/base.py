"""The optimizer protocol: ``opt.update(params, grads)`` updates a pytree of
parameters in place, leaf by leaf, choosing the dense or the sparse path by
the gradient's type.

A sparse gradient (:class:`~tapestry.sparse.AxisSparse`) is coalesced once
(sorted unique indices, repeated slices summed) and then only its slices of
the parameter and of the optimizer state are read and written: the update
costs O(|S|), whatever the parameter's size.
"""
from __future__ import annotations

import numpy as np

from ..core.pytree import tree_flatten
from ..sparse import AxisSparse


class Optimizer:
    """Base class: per-leaf state, created on first use, keyed by leaf position.

    Subclasses implement ``_dense(p, g, state)`` and ``_sparse(p, key, g_rows,
    state)`` where ``key`` selects the touched slices (unique indices) and
    ``g_rows`` are the gradient's values there.  ``self.t`` is the number of
    ``update`` calls so far (1 during the first).
    """

    def __init__(self, lr):
        if not lr > 0:
            raise ValueError(f"tapestry.optim: lr must be positive, got {lr!r}.")
        self.lr = lr
        self.t = 0
        self.state: list = []
        self._treedef = None

    def update(self, params, grads):
        """Apply one step to ``params`` (a pytree of float arrays, modified in
        place) given ``grads`` (same structure; dense or sparse leaves;
        ``None`` leaves skip their parameter)."""
        p_leaves, p_td = tree_flatten(params)
        g_leaves, g_td = tree_flatten(grads)
        if len(g_leaves) != len(p_leaves):
            raise ValueError(f"tapestry.optim.{type(self).__name__}.update: grads have "
                             f"{len(g_leaves)} leaves but params have {len(p_leaves)}; "
                             "pass the gradient of the same pytree.")
        for p, g in zip(p_leaves, g_leaves):  # validate before touching state
            if g is not None:
                _check_param(p, g, type(self).__name__)
        if self._treedef is None:
            self._treedef = p_td
            self.state = [None] * len(p_leaves)
        elif p_td != self._treedef:
            raise ValueError(f"tapestry.optim.{type(self).__name__}.update: params "
                             "changed structure since the first update; use one "
                             "optimizer per parameter pytree.")
        self.t += 1
        for k, (p, g) in enumerate(zip(p_leaves, g_leaves)):
            if g is None:
                continue
            if self.state[k] is None:
                self.state[k] = self._init_state(p)
            if isinstance(g, AxisSparse):
                c = g.coalesce()
                vals = c.values if c.dtype == p.dtype else c.values.astype(p.dtype)
                self._sparse(p, c.key(), vals, self.state[k])
            else:
                self._dense(p, np.asarray(g, dtype=p.dtype), self.state[k])
        return params

    def _init_state(self, p):
        return {}


def _check_param(p, g, name):
    if type(p) is not np.ndarray or p.dtype.kind != "f":
        raise TypeError(f"tapestry.optim.{name}: parameters must be float NumPy arrays "
                        f"(updated in place), got {type(p).__name__}"
                        f"{'' if type(p) is not np.ndarray else ' of dtype ' + str(p.dtype)}.")
    if not p.flags.writeable:
        raise ValueError(f"tapestry.optim.{name}: a parameter array is read-only; "
                         "pass writeable arrays (np.array(x, copy=True)).")
    if np.shape(g) != p.shape:
        raise ValueError(f"tapestry.optim.{name}: gradient shape {np.shape(g)} does not "
                         f"match parameter shape {p.shape}.")
