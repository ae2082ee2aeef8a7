"""autograd's differential operators, each a few lines over ``tapestry.vjp``
(reverse mode) or ``tapestry.jvp`` (forward mode: ``make_jvp``, ``deriv``).

Every derivative comes from tapestry's engine and rules; this module only
translates calling conventions (``argnum``, ``make_vjp``'s ``(vjp, ans)``
order, autograd's error types) and returns dense arrays, as autograd does.
"""
from __future__ import annotations

import numpy as np

from ..core.api import _vjp as _tp_vjp
from ..core.batched import Batched
from ..core.api_forward import forward_jvp as _tp_jvp
from ..core.custom import checkpoint as _tp_checkpoint
from ..core.var import unwrap_all
from ..core.pytree import tree_flatten, tree_map
from ..core.var import Var
from .wrap_util import unary_to_nary

__all__ = ["make_vjp", "grad", "value_and_grad", "grad_and_aux", "elementwise_grad",
           "jacobian", "hessian", "make_hvp", "hessian_tensor_product",
           "hessian_vector_product", "tensor_jacobian_product", "vector_jacobian_product",
           "make_ggnvp", "checkpoint", "multigrad_dict", "grad_named", "make_jvp", "deriv",
           "holomorphic_grad"]

def _dense(x):
    return x.todense() if hasattr(x, "todense") else x


def _as_cotangent(c, like):
    """A cotangent for the output ``like``: plain numbers and lists become
    arrays of the output's shape and dtype (traced ones pass as they are)."""
    if c.__class__ is Var or like is None:
        return c
    dt = np.result_type(unwrap_all(like))
    c = np.asarray(c)
    if c.dtype != dt and not (c.dtype.kind == "c" and dt.kind != "c"):
        c = c.astype(dt)
    return c.reshape(np.shape(like)) if c.size == np.size(unwrap_all(like)) else c


def make_vjp_unary(fun, x, opname="autograd.make_vjp", keep=True):
    """``(vjp, ans)`` of one-argument ``fun`` at ``x`` (autograd's order).
    ``opname`` is the operator errors name; ``keep=False`` for a ``vjp``
    used before the operator returns (no copies of ``x``, see tapestry.vjp)."""
    ans, pullback = _tp_vjp(fun, (x,), False, opname, keep)
    ans_leaves, ans_td = tree_flatten(ans)

    def vjp(g):
        if len(ans_leaves) == 1 and ans_leaves[0] is ans:  # one array output
            g = _as_cotangent(g, ans)
        else:
            g_leaves, g_td = tree_flatten(g)
            if len(g_leaves) == len(ans_leaves):
                g = g_td.unflatten([_as_cotangent(c, a)
                                    for c, a in zip(g_leaves, ans_leaves)])
        return tree_map(_dense, pullback(g)[0])
    return vjp, ans


make_vjp = unary_to_nary(make_vjp_unary)
make_vjp.__doc__ = "``make_vjp(fun, argnum)(*args)`` is ``(vjp, ans)``."


def _scalar_ones(ans, opname):
    plain = unwrap_all(ans)
    # a Batched (under tapestry.vmap) has its item's shape and dtype: one number per item
    if not isinstance(plain, (np.ndarray, np.generic, float, int, Batched)) \
            or np.size(plain) != 1 \
            or np.result_type(plain).kind != "f":
        raise TypeError(f"tapestry.autograd.{opname} only applies to real scalar-output "
                        f"functions (got {type(plain).__name__} of shape "
                        f"{np.shape(plain)}). Try jacobian or elementwise_grad.")
    return np.ones(np.shape(plain), np.result_type(plain))


@unary_to_nary
def grad(fun, x):
    """
    Returns a function which computes the gradient of `fun` with respect to
    positional argument number `argnum`. The returned function takes the same
    arguments as `fun`, but returns the gradient instead. The function `fun`
    should be scalar-valued (a real output of size 1, any shape). The gradient
    has the same type as the argument."""
    vjp, ans = make_vjp_unary(fun, x, "autograd.grad", False)
    return vjp(_scalar_ones(ans, "grad"))


@unary_to_nary
def value_and_grad(fun, x):
    """``(fun(x), grad(fun)(x))`` with one forward pass."""
    vjp, ans = make_vjp_unary(fun, x, "autograd.value_and_grad", False)
    return ans, vjp(_scalar_ones(ans, "value_and_grad"))


@unary_to_nary
def grad_and_aux(fun, x):
    """For ``fun`` returning ``(scalar, aux)``: ``(gradient, aux)``."""
    out = {}

    def scalar(x):
        value, out["aux"] = fun(x)
        return value
    vjp, ans = make_vjp_unary(scalar, x, "autograd.grad_and_aux", False)
    return vjp(_scalar_ones(ans, "grad_and_aux")), unwrap_aux(out["aux"])


def unwrap_aux(aux):
    return tree_map(lambda v: v._value if v.__class__ is Var else v, aux)


@unary_to_nary
def elementwise_grad(fun, x):
    """The sum of the Jacobian's rows: the gradient of ``sum(fun(x))``; for
    an elementwise ``fun`` that is each output's derivative."""
    vjp, ans = make_vjp_unary(fun, x, "autograd.elementwise_grad", False)
    if np.iscomplexobj(unwrap_all(ans)):
        raise TypeError("tapestry.autograd.elementwise_grad: the output is complex; "
                        "elementwise_grad is for real outputs.")
    return vjp(tree_map(lambda a: np.ones(np.shape(a), np.result_type(unwrap_all(a))), ans))


@unary_to_nary
def jacobian(fun, x):
    """The Jacobian, shape ``out.shape + in.shape``, one reverse pass per
    output element."""
    vjp, ans = make_vjp_unary(fun, x, "autograd.jacobian", False)
    out_shape, in_shape = np.shape(ans), np.shape(x)
    # no np.asarray(ans): under tapestry.vmap it is batched (shape and dtype are the item's)
    size = int(np.prod(out_shape))
    dt = np.result_type(*tree_flatten(unwrap_all(ans))[0]) if size else None
    rows = []
    for k in range(size):
        e = np.zeros(size, dt)
        e[k] = 1
        rows.append(vjp(e.reshape(out_shape)))
    if not rows:
        return np.zeros(out_shape + in_shape, np.result_type(unwrap_all(x)))
    return np.reshape(np.stack(rows), out_shape + in_shape)


def hessian(fun, argnum=0):
    """The full Hessian: the Jacobian of the Jacobian."""
    return jacobian(jacobian(fun, argnum), argnum)


@unary_to_nary
def make_hvp(fun, x):
    """``(hvp, grad_value)``: ``hvp(v)`` is the Hessian of scalar ``fun``
    at ``x`` times ``v`` (reverse over reverse)."""
    return make_vjp_unary(grad(fun), x, "autograd.make_hvp")


def hessian_tensor_product(fun, argnum=0):
    """``f(*args, v)``: the Hessian of scalar ``fun`` contracted with ``v``
    over all of ``v``'s axes (the Hessian is never formed)."""
    fun_grad = grad(fun, argnum)

    def vector_dot_grad(*args, **kwargs):
        args, v = args[:-1], args[-1]
        return np.tensordot(fun_grad(*args, **kwargs), v, np.ndim(v))
    return grad(vector_dot_grad, argnum)


hessian_vector_product = hessian_tensor_product


def tensor_jacobian_product(fun, argnum=0):
    """``f(*args, v)``: ``v`` contracted with ``fun``'s Jacobian over ``v``'s
    axes (the leading output axes); the rest of the output stays."""
    def vector_dot_fun(*args, **kwargs):
        args, v = args[:-1], args[-1]
        return np.tensordot(v, fun(*args, **kwargs), axes=np.ndim(v))
    return jacobian(vector_dot_fun, argnum)


vector_jacobian_product = tensor_jacobian_product


def _half_sq(y):
    return 0.5 * np.sum(y ** 2, axis=-1)


def make_ggnvp(f, g=_half_sq, f_argnum=0):
    """``make_ggnvp(f, g)(*args)`` is ``v -> J^T H J v``, the generalized
    Gauss-Newton product of ``g(f(x))`` (``J``: ``f``'s Jacobian, ``H``:
    ``g``'s Hessian at ``f(x)``).  ``J v`` is the VJP of the linear map
    ``u -> J^T u``, so reverse mode is enough."""
    @unary_to_nary
    def _make_ggnvp(f, x):
        f_vjp, f_x = make_vjp_unary(f, x)
        g_hvp, grad_g_x = make_vjp_unary(grad(g), f_x)
        zeros = tree_map(lambda a: np.zeros(np.shape(a), np.result_type(unwrap_all(a))),
                         grad_g_x)
        f_jvp, _ = make_vjp_unary(f_vjp, zeros)
        return lambda v: f_vjp(g_hvp(f_jvp(v)))
    return _make_ggnvp(f, f_argnum)


def checkpoint(fun):
    """``fun`` recomputed during the backward pass instead of storing its
    intermediates (tapestry.checkpoint)."""
    return _tp_checkpoint(fun)


def multigrad_dict(fun):
    raise NotImplementedError("tapestry.autograd.multigrad_dict is not provided: "
                              "call grad(fun, argnum=(0, 1, ...)) for several "
                              "arguments, or pass the arguments as one dict.")


def grad_named(fun, argname):
    """The gradient with respect to the argument called ``argname``."""
    import inspect
    names = list(inspect.signature(fun).parameters)
    return grad(fun, names.index(argname))


def _tangent_like(g, x):
    """autograd takes any numeric tangent (``np.ones(n, int)``): integer and
    bool leaves become the primal's float dtype; everything else goes to
    ``tapestry.jvp`` as given, which checks structure, shapes and dtypes."""
    x_leaves, x_td = tree_flatten(x)
    if x_td.is_leaf():
        g_leaves = [g]
    else:
        g_leaves, g_td = tree_flatten(g)
        if g_td != x_td:
            return g
    out = []
    for gl, xl in zip(g_leaves, x_leaves):
        if gl.__class__ is not Var and np.result_type(gl).kind in "biu":
            gl = np.asarray(gl, np.result_type(unwrap_all(xl)))
        out.append(gl)
    return out[0] if x_td.is_leaf() else x_td.unflatten(out)


def make_jvp_unary(fun, x, opname="autograd.make_jvp"):
    """autograd's ``make_jvp``: ``jvp(g)`` is ``(fun(x), J g)``, forward mode
    (``tapestry.jvp``; each call traces ``fun`` once, as autograd's does)."""
    def jvp(g):
        return _tp_jvp(fun, (x,), (_tangent_like(g, x),), False, opname,
                       ["the tangent"])
    return jvp


make_jvp = unary_to_nary(make_jvp_unary)
make_jvp.__doc__ = ("``make_jvp(fun, argnum)(*args)`` is ``jvp``; ``jvp(g)`` is "
                    "``(ans, J g)`` (forward mode).")


@unary_to_nary
def deriv(fun, x):
    """The JVP with a tangent of ones (autograd's ``deriv``): for a scalar
    ``x``, ``fun``'s derivative; for an array, the sum of the Jacobian's
    columns (each output's derivative for an elementwise ``fun``)."""
    ones = tree_map(lambda a: np.ones(np.shape(a), np.result_type(unwrap_all(a))), x)
    return make_jvp_unary(fun, x, "autograd.deriv")(ones)[1]


def holomorphic_grad(fun, argnum=0):
    raise NotImplementedError(
        "tapestry.autograd.holomorphic_grad is not provided: tapestry's complex "
        "convention differs from autograd's holomorphic one (see docs/porting.md). "
        "Differentiate the real and imaginary parts separately with grad.")
