"""Sparse-aware optimizers: ``opt = tp.optim.Adam(lr=1e-3); opt.update(params, grads)``.

``params`` is a pytree of float arrays updated in place.  A dense gradient
takes the usual path; a :class:`~tapestry.sparse.AxisSparse` gradient
updates only the slices it touches (lazy moments for Adam, like PyTorch's
SparseAdam), so a step costs O(|S|).

``lr`` may be a schedule (a callable of the step), ``clip_norm=`` clips by
global norm (sparse-aware), and ``state_dict()`` / ``load_state_dict()``
round-trip through ``np.savez`` / ``np.load``.
"""
from .algorithms import SGD, Adagrad, Adam, AdamW, RMSprop
from .base import Optimizer, clip_by_global_norm

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "clip_by_global_norm"]
