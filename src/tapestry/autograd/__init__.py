"""HIPS autograd's public API on tapestry's engine: a one-line port.

::

    import tapestry.autograd as autograd        # was: import autograd
    import tapestry.autograd.numpy as np        # was: import autograd.numpy as np
    from tapestry.autograd import grad

A thin layer: every derivative comes from tapestry's engine and rules
(``tapestry.vjp``, and ``tapestry.jvp`` for forward mode: ``make_jvp``,
``deriv``); these functions only translate autograd's calling conventions.
See docs/porting.md.
"""
from .builtins import dict, isinstance, list, tuple, type  # noqa: A004,F401
from .differential_operators import (checkpoint, deriv, elementwise_grad,  # noqa: F401
                                     grad, grad_and_aux, grad_named, hessian,
                                     hessian_tensor_product, hessian_vector_product,
                                     holomorphic_grad, jacobian, make_ggnvp, make_hvp,
                                     make_jvp, make_vjp, multigrad_dict,
                                     tensor_jacobian_product, value_and_grad,
                                     vector_jacobian_product)
from .extend import primitive  # noqa: F401

__all__ = [
    "grad", "value_and_grad", "grad_and_aux", "elementwise_grad", "jacobian", "hessian",
    "make_vjp", "make_hvp", "hessian_tensor_product", "hessian_vector_product",
    "tensor_jacobian_product", "vector_jacobian_product", "make_ggnvp", "checkpoint",
    "grad_named", "multigrad_dict", "primitive", "make_jvp", "deriv", "holomorphic_grad",
    "dict", "isinstance", "list", "tuple", "type",
]
