"""tapestry: reverse- and forward-mode automatic differentiation for plain NumPy code.

Capabilities: the core API (grad, vjp, jacobian, custom_vjp, ...), forward
mode (jvp, linearize, jacfwd, hessian: docs/forward.md), sparse
gradients (AxisSparse, optim), index-notation kernels (kernel, einsum) and
parallel reductions (parallel_sum, parallel_map).  See docs/architecture.md.
"""
from .core.allocator import tune_malloc as _tune_malloc

_tune_malloc()  # reuse freed large buffers (core/allocator.py; TAPESTRY_TUNE_MALLOC=0 opts out)

from . import ops as _ops  # noqa: E402,F401  (fills the rule registries)
from . import debug, optim, optimize, testing, tree_util  # noqa: E402,F401
from .core.api import (elementwise_grad, grad, hessian,  # noqa: E402
                       hessian_vector_product, jacobian, jacrev, stop_gradient,
                       value_and_grad, vjp)
from .core.api_forward import jacfwd, jvp, linearize  # noqa: E402
from .core.api_vmap import vmap  # noqa: E402
from .core.custom import checkpoint, custom_jvp, custom_vjp  # noqa: E402
from .core.pytree import (ravel_pytree, tree_flatten, tree_leaves, tree_map,  # noqa: E402
                          tree_structure, tree_unflatten)
from .core.tape import EscapedTracerError  # noqa: E402
from .core.tracing import LeakedTracerError  # noqa: E402
from .core.var import Var  # noqa: E402
from .core.registry import freeze as _freeze_registries  # noqa: E402
from .jit import JitError, JitWarning, jit  # noqa: E402
from .kernels import kernel  # noqa: E402
from .ops.einsum import einsum  # noqa: E402
from .parallel import parallel_map, parallel_sum  # noqa: E402
from .sparse import AxisSparse  # noqa: E402

_freeze_registries()  # every rule is declared: from here on, registries are read-only

__version__ = "0.1.0"

__all__ = [
    # core
    "grad", "value_and_grad", "vjp", "jacobian", "hessian", "hessian_vector_product",
    "jvp", "linearize", "jacfwd", "jacrev", "elementwise_grad", "vmap", "jit", "JitError", "JitWarning",
    "stop_gradient", "custom_vjp", "custom_jvp", "checkpoint", "tree_flatten", "tree_unflatten",
    "tree_map", "Var", "EscapedTracerError", "LeakedTracerError", "testing", "debug",
    # pytrees
    "tree_util", "tree_leaves", "tree_structure", "ravel_pytree",
    # sparse gradients
    "AxisSparse", "optim", "optimize",
    # kernels
    "kernel", "einsum",
    # parallel
    "parallel_sum", "parallel_map",
]
