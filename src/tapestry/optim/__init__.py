"""Sparse-aware optimizers: ``opt = tp.optim.Adam(lr=1e-3); opt.update(params, grads)``.

``params`` is a pytree of float arrays updated in place.  A dense gradient
takes the usual path; a :class:`~tapestry.sparse.AxisSparse` gradient
updates only the slices it touches (lazy moments for Adam, like PyTorch's
SparseAdam), so a step costs O(|S|).
"""
from .algorithms import SGD, Adagrad, Adam, AdamW
from .base import Optimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adagrad"]
