"""``minimize`` and ``least_squares``: pytree parameters in, pytree solution
out, exact derivatives from tapestry in between."""
from __future__ import annotations

import numpy as np

from ..core.api import hessian_vector_product, jacobian, value_and_grad
from ..core.pytree import flatten_up_to, ravel_pytree, tree_flatten
from ..core.var import Var

# Methods that use a Hessian-vector product (``hessp``) / need the full Hessian
# / use no derivative at all (they get the value alone: no gradient computed).
HESSP_METHODS = {"newton-cg", "trust-ncg", "trust-krylov", "trust-constr"}
HESS_METHODS = {"dogleg", "trust-exact"}
GRADIENT_FREE = {"nelder-mead", "powell", "cobyla", "cobyqa"}


def _scipy_optimize():
    try:
        import scipy.optimize as so
    except ImportError as e:
        raise ImportError("tapestry.optimize needs SciPy, an optional extra: "
                          "pip install 'tapestry[scipy]' (or pip install scipy).") from e
    return so


def _flat64(tree):
    """The leaves of ``tree`` ravelled into one float64 vector."""
    leaves = tree_flatten(tree)[0]
    if not leaves:
        return np.zeros(0)
    return np.concatenate([np.ravel(np.asarray(x, dtype=np.float64)) for x in leaves])


def _check_params(params, where):
    for x in tree_flatten(params)[0]:
        if np.result_type(x).kind != "f":
            raise TypeError(f"tapestry.optimize.{where}: parameters must be float arrays "
                            f"or floats, got a leaf of dtype {np.result_type(x)}; cast it "
                            "with .astype(float) or pass it through args=.")


def _flat_bounds(bounds, params, so):
    """``(lower, upper)`` pytrees (scalars broadcast; None: unbounded) as a
    ``scipy.optimize.Bounds`` on the flat vector (one given passes through)."""
    if isinstance(bounds, so.Bounds):
        return bounds
    if not (isinstance(bounds, tuple) and len(bounds) == 2):
        raise TypeError("tapestry.optimize: bounds must be a pair (lower, upper) of "
                        "pytrees shaped like params (scalars broadcast, None for none).")
    leaves, td = tree_flatten(params)
    sides = []
    for side, fill in zip(bounds, (-np.inf, np.inf)):
        if side is None:
            parts = [np.full(np.size(x), fill) for x in leaves]
        else:
            try:
                sub = flatten_up_to(td, side)
            except ValueError as e:
                raise ValueError(f"tapestry.optimize: bounds do not match the structure "
                                 f"of params ({e}).") from None
            parts = [np.broadcast_to(np.asarray(fill if b is None else b, dtype=np.float64),
                                     np.shape(x)).ravel() for b, x in zip(sub, leaves)]
        sides.append(np.concatenate(parts) if parts else np.zeros(0))
    return so.Bounds(sides[0], sides[1])


def _untraced(tree, where):
    """``tree``, refused if it holds traced values: the objective then reads
    a value being differentiated (through ``args`` or a closure), and the
    solver itself has no derivative to give it."""
    if any(isinstance(x, Var) for x in tree_flatten(tree)[0]):
        raise TypeError(
            f"tapestry.optimize.{where}: the objective depends on a value that is being "
            "differentiated (passed in args or read from a closure), but the solution "
            "of the optimization is not differentiable by tracing SciPy. Pass "
            "tapestry.stop_gradient(value) to optimize at a fixed value, or give the "
            "solution its derivative with tapestry.custom_vjp (implicit function "
            "theorem: see tapestry.autograd.misc.fixed_points).")
    return tree


def _objective(fun, unravel, args):
    vg = value_and_grad(lambda p: fun(p, *args), sparse=False)

    def fun_and_jac(x):
        value, g = _untraced(vg(unravel(x)), "minimize")
        return float(value), _flat64(g)
    return fun_and_jac


def _hessp(fun, unravel, args):
    hvp = hessian_vector_product(lambda p: fun(p, *args))

    def hessp(x, v):
        return _flat64(hvp(unravel(x), unravel(v)))
    return hessp


def minimize(fun, params, args=(), method=None, bounds=None, constraints=(), tol=None,
             callback=None, options=None):
    """Minimize scalar ``fun(params, *args)`` over a pytree ``params`` with
    ``scipy.optimize.minimize``; returns ``(solution, result)``.

    The gradient comes from ``tapestry.value_and_grad``; for Newton-CG,
    trust-ncg, trust-krylov and trust-constr, ``hessp`` comes from
    ``tapestry.hessian_vector_product`` (the Hessian is never formed); for
    dogleg and trust-exact the Hessian is built from those products, one per
    parameter.  ``bounds=(lower, upper)``: pytrees shaped like ``params``
    (scalars broadcast, ``None`` for unbounded).  ``callback(params_tree)``
    is called after each iteration.  ``solution`` has the structure, shapes
    and dtypes of ``params``; ``result`` is SciPy's ``OptimizeResult``.
    """
    so = _scipy_optimize()
    _check_params(params, "minimize")
    x0, unravel = ravel_pytree(params)
    x0 = np.asarray(x0, dtype=np.float64)
    if not isinstance(args, tuple):
        args = (args,)
    m = (method or "").lower()
    kw = {"jac": m not in GRADIENT_FREE or None, "method": method, "tol": tol,
          "options": options}
    if m in HESSP_METHODS or m in HESS_METHODS:
        hessp = _hessp(fun, unravel, args)
        if m in HESSP_METHODS:
            kw["hessp"] = hessp
        else:
            eye = np.eye(x0.size)
            kw["hess"] = lambda x: np.stack([hessp(x, e) for e in eye], axis=1)
    if bounds is not None:
        kw["bounds"] = _flat_bounds(bounds, params, so)
    if constraints:
        kw["constraints"] = _constraints(constraints, unravel)
    if callback is not None:
        kw["callback"] = lambda xk, *rest: callback(unravel(np.asarray(xk)))
    objective = _objective(fun, unravel, args)
    if kw["jac"] is None:
        objective = _value_only(fun, unravel, args)
    res = so.minimize(objective, x0, **kw)
    return unravel(res.x), res


def _value_only(fun, unravel, args):
    return lambda x: float(np.asarray(_untraced(fun(unravel(x), *args), "minimize")))


def _constraints(constraints, unravel):
    """Dict constraints (``{"type", "fun", "args"}``) whose ``fun`` takes the
    parameter pytree: wrapped for the flat vector, with an exact ``jac``
    (reverse mode) unless one is given.  Constraint objects pass through and
    see the flat vector."""
    single = isinstance(constraints, dict)
    out = []
    for c in ([constraints] if single else list(constraints)):
        if not isinstance(c, dict):
            out.append(c)
            continue
        cf, cargs = c["fun"], tuple(c.get("args", ()))

        def flat_fun(x, cf=cf, cargs=cargs):
            return np.concatenate([np.ravel(v) for v in tree_flatten(
                cf(unravel(x), *cargs))[0]])
        wrapped = {"type": c["type"], "fun": lambda x, f=flat_fun: np.asarray(f(x), float)}
        if "jac" in c:
            wrapped["jac"] = lambda x, j=c["jac"], cargs=cargs: j(x, *cargs)
        else:
            jac = jacobian(flat_fun)
            wrapped["jac"] = lambda x, j=jac: np.asarray(j(x), dtype=np.float64)
        out.append(wrapped)
    return out


def _residual_jacobian(flat_residuals, n_in, n_out, mode):
    """Jacobian function of the flat residuals: reverse mode (one pullback
    per residual) unless forward mode exists and is cheaper (more residuals
    than parameters), or ``mode`` says which."""
    import tapestry  # at call time: forward mode may come from a newer core
    jacfwd = getattr(tapestry, "jacfwd", None)
    if mode == "fwd" and jacfwd is None:
        raise ValueError("tapestry.optimize.least_squares: jac_mode='fwd' needs "
                         "tapestry.jacfwd (forward mode), which this version lacks; "
                         "use jac_mode='rev' or 'auto'.")
    use_fwd = mode == "fwd" or (mode == "auto" and jacfwd is not None and n_out > n_in)
    jac = (jacfwd if use_fwd else jacobian)(flat_residuals)
    return lambda x: np.asarray(jac(x), dtype=np.float64).reshape(n_out, n_in)


def least_squares(residuals, params, args=(), bounds=None, jac_mode="auto", **kwargs):
    """Minimize ``0.5 * sum(residuals(params, *args)**2)`` with
    ``scipy.optimize.least_squares``; returns ``(solution, result)``.

    ``residuals`` may return any pytree of arrays (ravelled together).  The
    Jacobian is exact: reverse mode (``tapestry.jacobian``), or forward mode
    (``tapestry.jacfwd``, where this version has it) when there are more
    residuals than parameters; ``jac_mode`` = ``"rev"`` / ``"fwd"`` forces
    one.  ``bounds``: as in :func:`minimize`.  Other keyword arguments
    (``method``, ``loss``, ``x_scale``, ...) go to SciPy.
    """
    so = _scipy_optimize()
    _check_params(params, "least_squares")
    if jac_mode not in ("auto", "rev", "fwd"):
        raise ValueError(f"tapestry.optimize.least_squares: jac_mode must be 'auto', "
                         f"'rev' or 'fwd', got {jac_mode!r}.")
    x0, unravel = ravel_pytree(params)
    x0 = np.asarray(x0, dtype=np.float64)
    if not isinstance(args, tuple):
        args = (args,)

    def flat_residuals(x):
        leaves = tree_flatten(residuals(unravel(x), *args))[0]
        return np.concatenate([np.ravel(r) for r in leaves])

    n_out = _flat64(_untraced(residuals(unravel(x0), *args), "least_squares")).size
    jac = _residual_jacobian(flat_residuals, x0.size, n_out, jac_mode)
    if bounds is not None:
        b = _flat_bounds(bounds, params, so)
        kwargs["bounds"] = (b.lb, b.ub)
    res = so.least_squares(lambda x: _flat64(residuals(unravel(x), *args)), x0,
                           jac=jac, **kwargs)
    return unravel(res.x), res
