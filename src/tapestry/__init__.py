"""tapestry: reverse-mode automatic differentiation for plain NumPy code."""
from .core.allocator import tune_malloc as _tune_malloc

_tune_malloc()  # reuse freed large buffers (see core/allocator.py; TAPESTRY_TUNE_MALLOC=0 opts out)
from . import ops as _ops  # noqa: F401  (fills the rule registries)
from .core.api import (grad, hessian, hessian_vector_product, jacobian,
                       stop_gradient, value_and_grad, vjp)
from .core.custom import checkpoint, custom_vjp
from .core.pytree import tree_flatten, tree_map, tree_unflatten
from .core.var import Var
from . import debug, optim  # noqa: F401  (issue 3)
from .sparse import AxisSparse  # noqa: F401  (issue 3)
from .parallel import parallel_map, parallel_sum  # noqa: F401  (issue 5)
from .ops.einsum import einsum
from .kernels import kernel

__version__ = "0.1.0"

__all__ = ["grad", "value_and_grad", "vjp", "jacobian", "hessian",
           "hessian_vector_product", "stop_gradient", "custom_vjp", "checkpoint",
           "tree_flatten", "tree_unflatten", "tree_map", "Var"]
