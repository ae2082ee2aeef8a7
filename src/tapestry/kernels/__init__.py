"""Index-notation kernels with symbolically derived gradients.

parse.py (spec -> tree), derive.py (symbolic derivatives, gradient kernels,
polynomial expansion), plan.py (plan choice; einsum plans; loop kernels as
primitives), compile_numba.py (plan c), blocked.py (plan d), kernel.py (the
user-facing ``kernel``).
"""
from .kernel import Kernel, kernel
from .parse import KernelSyntaxError

__all__ = ["Kernel", "kernel", "KernelSyntaxError"]
