"""The optimizer protocol: ``opt.update(params, grads)`` updates a pytree of
parameters in place, leaf by leaf, choosing the dense or the sparse path by
the gradient's type.

A sparse gradient (:class:`~tapestry.sparse.AxisSparse`) is coalesced once
(sorted unique indices, repeated slices summed) and then only its slices of
the parameter and of the optimizer state are read and written: the update
costs O(|S|), whatever the parameter's size.  Clipping by global norm keeps
that: a sparse gradient's norm is its coalesced values' norm, and clipping
scales the values without densifying.
"""
from __future__ import annotations

import numpy as np

from ..core.pytree import flatten_up_to, tree_flatten
from ..sparse import AxisSparse


class Optimizer:
    """Base class: per-leaf state, created on first use, keyed by leaf position.

    ``lr`` is a positive number or a schedule: a callable of the step count
    (0 for the first update, as in optax) returning the rate.  ``clip_norm``
    (optional) rescales the gradients so that their global L2 norm is at
    most ``clip_norm`` before the step (``torch.nn.utils.clip_grad_norm_``).

    Subclasses implement ``_dense(p, g, state)`` and ``_sparse(p, key, g_rows,
    state)`` where ``key`` selects the touched slices (unique indices) and
    ``g_rows`` are the gradient's values there.  ``self.t`` is the number of
    ``update`` calls so far (1 during the first); ``self.lr`` is the rate of
    the current step.
    """

    def __init__(self, lr, clip_norm=None):
        self.schedule = lr if callable(lr) else None
        if self.schedule is None and not lr > 0:
            raise ValueError(f"tapestry.optim: lr must be positive or a schedule "
                             f"(callable of the step), got {lr!r}.")
        if clip_norm is not None and not clip_norm > 0:
            raise ValueError(f"tapestry.optim: clip_norm must be positive, got {clip_norm!r}.")
        self.lr = lr if self.schedule is None else None
        self.clip_norm = clip_norm
        self.t = 0
        self.state: list = []
        self._treedef = None

    def update(self, params, grads):
        """Apply one step to ``params`` (a pytree of float arrays, modified in
        place) given ``grads`` (same structure; dense or sparse leaves;
        ``None`` leaves skip their parameter)."""
        p_leaves, g_leaves = self._check(params, grads)
        g_leaves = [_prepared(g, p) for p, g in zip(p_leaves, g_leaves)]
        if self.clip_norm is not None:
            g_leaves = _clipped(g_leaves, self.clip_norm)[0]
        if self.schedule is not None:
            self.lr = self._scheduled_lr(self.t)
        self.t += 1
        for k, (p, g) in enumerate(zip(p_leaves, g_leaves)):
            if g is None:
                continue
            if self.state[k] is None:
                self.state[k] = self._init_state(p)
            if isinstance(g, AxisSparse):
                self._sparse(p, g.key(), g.values, self.state[k])
            else:
                self._dense(p, g, self.state[k])
        return params

    def _scheduled_lr(self, step):
        lr = self.schedule(step)
        try:
            lr = float(lr)
        except TypeError:
            lr = float("nan")
        if not (lr >= 0 and np.isfinite(lr)):
            raise ValueError(f"tapestry.optim.{type(self).__name__}: the lr schedule "
                             f"returned {lr!r} at step {step}; it must return a finite "
                             "number >= 0.")
        return lr

    def _check(self, params, grads):
        """Flat leaves of params and grads, validated before any state changes."""
        p_leaves, p_td = tree_flatten(params)
        g_leaves, g_td = tree_flatten(grads)
        name = type(self).__name__
        if g_td != p_td:  # None where params have a leaf: skip that parameter
            try:
                g_leaves = flatten_up_to(p_td, grads)
            except ValueError:
                raise ValueError(f"tapestry.optim.{name}.update: grads have "
                                 f"{len(g_leaves)} leaves but params have {len(p_leaves)}"
                                 f" ({g_td} vs {p_td}); pass the gradient of the same "
                                 "pytree.") from None
        for p, g in zip(p_leaves, g_leaves):
            if g is not None:
                _check_param(p, g, name)
        if self._treedef is None:
            if self.state and len(self.state) != len(p_leaves):
                raise ValueError(f"tapestry.optim.{name}.update: the loaded state has "
                                 f"{len(self.state)} leaves but params have "
                                 f"{len(p_leaves)}.")
            self._treedef = p_td
            self.state = self.state or [None] * len(p_leaves)
        elif p_td != self._treedef:
            raise ValueError(f"tapestry.optim.{name}.update: params "
                             "changed structure since the first update; use one "
                             "optimizer per parameter pytree.")
        return p_leaves, g_leaves

    def _init_state(self, p):
        return {}

    # --- saving and restoring ---------------------------------------------
    def state_dict(self):
        """The optimizer's state as a flat ``{name: array}`` dict, ready for
        ``np.savez(path, **opt.state_dict())`` (arrays are copies)."""
        out = {"t": np.array(self.t), "n_leaves": np.array(len(self.state))}
        for k, st in enumerate(self.state):
            for name, arr in (st or {}).items():
                out[f"{k}.{name}"] = np.array(arr, copy=True)
        return out

    def load_state_dict(self, d):
        """Restore a :meth:`state_dict` (a dict or ``np.load``'s result).  The
        next ``update`` must pass a parameter pytree with as many leaves."""
        if "t" not in d or "n_leaves" not in d:
            raise ValueError(f"tapestry.optim.{type(self).__name__}.load_state_dict: not "
                             "an optimizer state (keys 't' and 'n_leaves' are missing).")
        state = [None] * int(d["n_leaves"])
        for key in d:
            if key in ("t", "n_leaves"):
                continue
            k, name = key.split(".", 1)
            if state[int(k)] is None:
                state[int(k)] = {}
            state[int(k)][name] = np.array(d[key], copy=True)
        self.t, self.state, self._treedef = int(d["t"]), state, None
        return self


def _prepared(g, p):
    """Sparse gradients coalesced in the parameter's dtype; dense ones as arrays."""
    if g is None:
        return None
    if isinstance(g, AxisSparse):
        c = g.coalesce()
        return c if c.dtype == p.dtype else c.astype(p.dtype)
    return np.asarray(g, dtype=p.dtype)


def _clipped(g_leaves, max_norm):
    """(leaves scaled so their global norm is at most ``max_norm``, the norm)."""
    sq = 0.0
    for g in g_leaves:
        if g is not None:
            v = g.values if isinstance(g, AxisSparse) else g
            sq += float(np.vdot(v, v).real)
    norm = np.sqrt(sq)
    scale = float(max_norm / (norm + 1e-6))
    if scale >= 1.0:
        return g_leaves, norm
    return [None if g is None else g * scale for g in g_leaves], norm


def clip_by_global_norm(grads, max_norm):
    """``(clipped, norm)``: ``grads`` (a pytree) scaled by
    ``max_norm / (norm + 1e-6)`` when their global L2 norm exceeds
    ``max_norm`` (PyTorch's ``clip_grad_norm_`` rule).  ``AxisSparse`` leaves
    are coalesced and scaled in place of their values: never densified."""
    leaves, td = tree_flatten(grads)
    leaves = [g.coalesce() if isinstance(g, AxisSparse)
              else (None if g is None else np.asarray(g)) for g in leaves]
    clipped, norm = _clipped(leaves, max_norm)
    return td.unflatten(clipped), norm


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
