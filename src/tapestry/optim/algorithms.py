"""SGD, Adam, AdamW, Adagrad and RMSprop, each with a dense and a sparse path.

Dense paths follow PyTorch's ``torch.optim`` formulas exactly.  Sparse paths
update only the slices a sparse gradient touches:

* SGD without momentum or weight decay, and Adagrad without weight decay,
  give exactly the dense result (an untouched row has a zero gradient and
  would not change).
* With momentum, Adam's moments, or weight decay, the sparse path is *lazy*
  (like ``torch.optim.SparseAdam``): the state and decay of an untouched row
  are left as they are instead of decaying, so results differ from the dense
  path on rows that the dense path would still move.  The step count ``t``
  (bias correction) is global.
"""
from __future__ import annotations

import numpy as np

from .base import Optimizer, _hyper


class SGD(Optimizer):
    """``p -= lr * (g + weight_decay * p)``, with optional (Nesterov) momentum
    ``buf = momentum * buf + g``."""

    def __init__(self, lr=1e-2, momentum=0.0, weight_decay=0.0, nesterov=False,
                 clip_norm=None):
        super().__init__(lr, clip_norm)
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, nesterov
        self._validate()

    def _validate(self):
        super()._validate()
        _hyper("tapestry.optim.SGD", "momentum", self.momentum)
        _hyper("tapestry.optim.SGD", "weight_decay", self.weight_decay)
        if self.nesterov and self.momentum == 0:
            raise ValueError("tapestry.optim.SGD: nesterov=True needs momentum > 0.")

    def _init_state(self, p):
        return {"buf": np.zeros_like(p)} if self.momentum else {}

    def _direction(self, g, p_rows, buf_rows):
        if self.weight_decay:
            g = g + self.weight_decay * p_rows
        if not self.momentum:
            return g, None
        buf_rows = self.momentum * buf_rows + g
        return (g + self.momentum * buf_rows if self.nesterov else buf_rows), buf_rows

    def _dense(self, p, g, state):
        if not self.momentum and not self.weight_decay:
            p -= self.lr * g
            return
        d, buf = self._direction(g, p, state.get("buf"))
        if buf is not None:
            state["buf"][...] = buf
        p -= self.lr * d

    def _sparse(self, p, key, g, state):
        if not self.momentum and not self.weight_decay:
            p[key] -= self.lr * g
            return
        d, buf = self._direction(g, p[key], state["buf"][key] if self.momentum else None)
        if buf is not None:
            state["buf"][key] = buf
        p[key] -= self.lr * d


class Adam(Optimizer):
    """Adam (L2 ``weight_decay`` added to the gradient, as in ``torch.optim.Adam``):
    ``m = b1 m + (1-b1) g``, ``v = b2 v + (1-b2) g^2``,
    ``p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)``.
    The sparse path is lazy Adam (``torch.optim.SparseAdam``)."""

    decoupled = False

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 clip_norm=None):
        super().__init__(lr, clip_norm)
        where = f"tapestry.optim.{type(self).__name__}"
        try:
            self.b1, self.b2 = betas
        except (TypeError, ValueError):
            raise TypeError(f"{where}: betas must be a pair (beta1, beta2), "
                            f"got {betas!r}.") from None
        self.eps, self.weight_decay = eps, weight_decay
        self._validate()

    def _validate(self):
        super()._validate()
        where = f"tapestry.optim.{type(self).__name__}"
        _hyper(where, "betas[0]", self.b1, below=1.0)
        _hyper(where, "betas[1]", self.b2, below=1.0)
        _hyper(where, "eps", self.eps, strict=True)
        _hyper(where, "weight_decay", self.weight_decay)

    def _init_state(self, p):
        return {"m": np.zeros_like(p), "v": np.zeros_like(p)}

    def _step(self, p_rows, g, m, v):
        """New (p_rows, m, v) for the given slices; ``m``/``v`` updated in place."""
        if self.weight_decay:
            if self.decoupled:
                p_rows = p_rows * (1 - self.lr * self.weight_decay)
            else:
                g = g + self.weight_decay * p_rows
        m *= self.b1
        m += (1 - self.b1) * g
        v *= self.b2
        v += (1 - self.b2) * (g * g)
        bc1 = 1 - self.b1 ** self.t
        bc2 = 1 - self.b2 ** self.t
        denom = np.sqrt(v / bc2)
        denom += self.eps
        return p_rows - (self.lr / bc1) * m / denom

    def _dense(self, p, g, state):
        p[...] = self._step(p, g, state["m"], state["v"])

    def _sparse(self, p, key, g, state):
        m, v = state["m"][key], state["v"][key]
        p[key] = self._step(p[key], g, m, v)
        state["m"][key] = m
        state["v"][key] = v


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p *= 1 - lr * weight_decay`` before
    the Adam step (lazy on the sparse path: only touched slices decay)."""

    decoupled = True

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 clip_norm=None):
        super().__init__(lr, betas, eps, weight_decay, clip_norm)


class Adagrad(Optimizer):
    """``s += g^2``, ``p -= lr_t * g / (sqrt(s) + eps)`` with
    ``lr_t = lr / (1 + (t-1) * lr_decay)`` (``torch.optim.Adagrad``)."""

    def __init__(self, lr=1e-2, eps=1e-10, initial_accumulator_value=0.0,
                 weight_decay=0.0, lr_decay=0.0, clip_norm=None):
        super().__init__(lr, clip_norm)
        self.eps, self.weight_decay, self.lr_decay = eps, weight_decay, lr_decay
        self.init_acc = initial_accumulator_value
        self._validate()

    def _validate(self):
        super()._validate()
        where = "tapestry.optim.Adagrad"
        _hyper(where, "eps", self.eps, strict=True)
        _hyper(where, "weight_decay", self.weight_decay)
        _hyper(where, "lr_decay", self.lr_decay)
        _hyper(where, "initial_accumulator_value", self.init_acc)

    def _init_state(self, p):
        return {"sum": np.full_like(p, self.init_acc)}

    def _step(self, p_rows, g, s):
        if self.weight_decay:
            g = g + self.weight_decay * p_rows
        s += g * g
        clr = self.lr / (1 + (self.t - 1) * self.lr_decay)
        denom = np.sqrt(s)
        denom += self.eps
        return p_rows - clr * g / denom

    def _dense(self, p, g, state):
        p[...] = self._step(p, g, state["sum"])

    def _sparse(self, p, key, g, state):
        s = state["sum"][key]
        p[key] = self._step(p[key], g, s)
        state["sum"][key] = s


class RMSprop(Optimizer):
    """``torch.optim.RMSprop``: ``v = alpha v + (1-alpha) g^2``; with
    ``centered``, ``m = alpha m + (1-alpha) g`` and ``v - m^2`` in place of
    ``v``; ``d = g / (sqrt(v) + eps)``; with momentum ``buf = momentum buf + d``
    and ``p -= lr * buf``, else ``p -= lr * d``.  The sparse path is lazy."""

    def __init__(self, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, clip_norm=None):
        super().__init__(lr, clip_norm)
        self.alpha, self.eps, self.weight_decay = alpha, eps, weight_decay
        self.momentum, self.centered = momentum, centered
        self._validate()

    def _validate(self):
        super()._validate()
        where = "tapestry.optim.RMSprop"
        _hyper(where, "alpha", self.alpha, below=1.0)
        _hyper(where, "eps", self.eps, strict=True)
        _hyper(where, "weight_decay", self.weight_decay)
        _hyper(where, "momentum", self.momentum)

    def _init_state(self, p):
        st = {"square_avg": np.zeros_like(p)}
        if self.centered:
            st["grad_avg"] = np.zeros_like(p)
        if self.momentum:
            st["buf"] = np.zeros_like(p)
        return st

    def _step(self, p_rows, g, rows):
        """New ``p_rows``; the state slices in ``rows`` are updated in place."""
        if self.weight_decay:
            g = g + self.weight_decay * p_rows
        v = rows["square_avg"]
        v *= self.alpha
        v += (1 - self.alpha) * (g * g)
        if self.centered:
            m = rows["grad_avg"]
            m *= self.alpha
            m += (1 - self.alpha) * g
            denom = np.sqrt(v - m * m)
        else:
            denom = np.sqrt(v)
        denom += self.eps
        d = g / denom
        if self.momentum:
            buf = rows["buf"]
            buf *= self.momentum
            buf += d
            d = buf
        return p_rows - self.lr * d

    def _dense(self, p, g, state):
        p[...] = self._step(p, g, state)

    def _sparse(self, p, key, g, state):
        rows = {name: arr[key] for name, arr in state.items()}
        p[key] = self._step(p[key], g, rows)
        for name, arr in state.items():
            arr[key] = rows[name]
