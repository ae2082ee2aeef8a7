"""``minimize`` and ``least_squares``: pytree parameters in, pytree solution
out, exact derivatives from tapestry in between.

Both return an :class:`OptimizeResult`: SciPy's fields as attributes with
``x`` (and ``grad``) as pytrees shaped like ``params``.  It also unpacks as
``x, res = minimize(...)``.  Bounds come in SciPy's flat form (``bounds=``,
read exactly as SciPy reads it) or as pytrees shaped like ``params``
(``lower=`` / ``upper=``); the two are never guessed from each other."""
from __future__ import annotations

import numpy as np

from ..core.api import hessian_vector_product, jacobian, value_and_grad
from ..core.api_forward import jacfwd
from ..core.pytree import flatten_up_to, leaf_paths, ravel_pytree, tree_flatten
from ..core.var import Var

# Methods that use a Hessian-vector product (``hessp``) / need the full Hessian
# / use no derivative at all (they get the value alone: no gradient computed).
HESSP_METHODS = {"newton-cg", "trust-ncg", "trust-krylov", "trust-constr"}
HESS_METHODS = {"dogleg", "trust-exact"}
GRADIENT_FREE = {"nelder-mead", "powell", "cobyla", "cobyqa"}
# What SciPy honours; for other methods it warns and goes on without them.
BOUNDED_METHODS = {"nelder-mead", "powell", "l-bfgs-b", "cobyla", "cobyqa", "slsqp", "tnc",
                   "trust-constr"}
CONSTRAINED_METHODS = {"cobyla", "cobyqa", "slsqp", "trust-constr"}


class OptimizeResult:
    """The result of :func:`minimize` / :func:`least_squares`: every field of
    SciPy's ``OptimizeResult`` as an attribute (``fun``, ``success``,
    ``status``, ``message``, ``nit``, ``nfev``, ``njev``, ``nhev``,
    ``hess_inv``, ``cost``, ...), except that

    * ``x`` is the solution as a pytree with the structure, shapes and dtypes
      of ``params``;
    * ``grad`` is the objective's gradient at ``x`` as a pytree (None where
      SciPy reports none: gradient-free methods); for ``minimize``, ``jac``
      is the same pytree (as in JAX's ``OptimizeResults``), for
      ``least_squares`` it stays SciPy's Jacobian matrix of the residuals;
    * ``scipy`` is SciPy's own result, flat vectors included.

    Iterating yields ``x`` and then the result itself, so the older
    ``x, res = minimize(...)`` keeps working next to ``res = minimize(...);
    res.x``.
    """

    def __init__(self, raw, **fields):
        self.__dict__.update(raw)
        self.__dict__.update(fields)
        self.scipy = raw

    def __iter__(self):
        return iter((self.x, self))

    def __repr__(self):
        shown = [f"{k}={getattr(self, k)!r}" for k in ("success", "status", "message", "fun",
                                                       "nit", "nfev") if hasattr(self, k)
                 and np.size(getattr(self, k)) == 1]
        return f"OptimizeResult({', '.join(shown)}, x=<pytree; see .x>)"


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


def _refuse_derivatives(where, given):
    """Derivatives are tapestry's job: one passed by hand is refused, not
    silently preferred or ignored."""
    for name, value in given.items():
        if value is not None:
            what = ("the gradient" if name == "jac" else
                    "the Hessian (dogleg, trust-exact) and Hessian-vector products "
                    "(Newton-CG, trust-ncg, trust-krylov, trust-constr)")
            raise TypeError(f"tapestry.optimize.{where}: {name}= is not an argument here: "
                            f"{what} come{'s' if name == 'jac' else ''} from tapestry "
                            f"automatically (exact); remove {name}=. To supply your own, "
                            "call scipy.optimize directly.")


# --- bounds ----------------------------------------------------------------
_TREE_HINT = ("for bounds shaped like the params pytree pass lower=... and upper=... "
              "(scalars broadcast, None for unbounded)")


def _flat_name(k, params):
    """``params['a'][3]``: where flat position ``k`` lives in the tree."""
    leaves, td = tree_flatten(params)
    for path, x in zip(leaf_paths(td, "params"), leaves):
        size = int(np.size(x))
        if k < size:
            idx = np.unravel_index(k, np.shape(x)) if np.ndim(x) else ()
            return path + "".join(f"[{int(i)}]" for i in idx)
        k -= size
    return f"position {k}"


def _is_bound(v):
    return v is None or (np.ndim(v) == 0 and np.asarray(v).dtype.kind in "iuf")


def _is_pair(b):
    """``(low, high)``: two numbers or None (SciPy's per-parameter bound)."""
    if isinstance(b, np.ndarray):
        return b.shape == (2,) and b.dtype.kind in "iuf"
    return isinstance(b, (tuple, list)) and len(b) == 2 and all(map(_is_bound, b))


def _scipy_pairs(bounds, n, where):
    """``minimize``'s SciPy form: one (low, high) per flat parameter."""
    if isinstance(bounds, (str, bytes, dict)) or not hasattr(bounds, "__iter__"):
        seq = None
    else:
        seq = list(bounds)  # zip(lb, ub) too, as SciPy takes it
    if seq is None or len(seq) != n or not all(map(_is_pair, seq)):
        got = (f"a {type(bounds).__name__} of {len(seq)}" if seq is not None
               else f"a {type(bounds).__name__}")
        raise TypeError(f"tapestry.optimize.{where}: bounds= takes SciPy's form: one "
                        f"(low, high) pair per number in params ({n} here, in "
                        "tp.ravel_pytree order; None for unbounded), or a "
                        f"scipy.optimize.Bounds; got {got}. A (lower, upper) pair of "
                        f"pytrees is not read from bounds=: {_TREE_HINT}.")
    if n == 2 and not isinstance(bounds, np.ndarray) and any(
            isinstance(b, np.ndarray) for b in seq):
        raise ValueError(f"tapestry.optimize.{where}: bounds= is ambiguous: with 2 numbers "
                         "in params, a pair of arrays reads as SciPy's per-parameter "
                         "(low, high) pairs but looks like (lower, upper) arrays. Write "
                         "[(low0, high0), (low1, high1)] with tuples, "
                         f"scipy.optimize.Bounds(lower, upper), or {_TREE_HINT}.")
    lb = np.array([-np.inf if lo is None else float(lo) for lo, _ in seq])
    ub = np.array([np.inf if hi is None else float(hi) for _, hi in seq])
    return lb, ub


def _scipy_lb_ub(bounds, n, where):
    """``least_squares``'s SciPy form: ``(lb, ub)``, each a scalar or ``n`` numbers."""
    msg = (f"tapestry.optimize.{where}: bounds= takes SciPy's form (lb, ub): each a "
           f"scalar or {n} numbers (params in tp.ravel_pytree order), or a "
           f"scipy.optimize.Bounds; {_TREE_HINT}")
    if not (isinstance(bounds, (tuple, list)) and len(bounds) == 2):
        raise TypeError(f"{msg}; got a {type(bounds).__name__}.")
    sides = []
    for b, fill in zip(bounds, (-np.inf, np.inf)):
        try:
            a = np.asarray(fill if b is None else b, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{msg}; got a side of type {type(b).__name__}.") from None
        if a.ndim == 0:
            a = np.full(n, a)
        elif a.shape != (n,):
            raise ValueError(f"{msg}; got a side of shape {a.shape}.")
        sides.append(a)
    return sides[0], sides[1]


def _tree_side(side, params, fill, where, name):
    """A ``lower=`` / ``upper=`` pytree as a flat float64 vector: a number
    (or None) for the whole tree, or a tree whose leaves broadcast to the
    parameters' (None: unbounded)."""
    leaves, td = tree_flatten(params)
    if _is_bound(side):  # one number (or None) for every parameter
        v = fill if side is None else float(side)
        parts = [np.full(np.size(x), v) for x in leaves]
    else:
        try:
            sub = flatten_up_to(td, side)
        except ValueError as e:
            raise ValueError(f"tapestry.optimize.{where}: {name}= does not match the "
                             f"structure of params ({e}).") from None
        parts = []
        for path, b, x in zip(leaf_paths(td, "params"), sub, leaves):
            try:
                v = np.asarray(fill if b is None else b, dtype=np.float64)
                if np.isnan(v).any():  # None inside an array converts to nan
                    raise ValueError
                parts.append(np.broadcast_to(v, np.shape(x)).ravel())
            except (TypeError, ValueError):
                raise ValueError(f"tapestry.optimize.{where}: {name}= for {path} must be "
                                 f"numbers (not nan) broadcasting to its shape "
                                 f"{np.shape(x)}, or None for the whole leaf; got "
                                 f"{b!r}.") from None
    return np.concatenate(parts) if parts else np.zeros(0)


def _flat_bounds(where, params, n, bounds, lower, upper, so, scipy_form):
    """The bounds as a ``scipy.optimize.Bounds`` on the flat vector (None: none)."""
    if lower is not None or upper is not None:
        if bounds is not None:
            raise TypeError(f"tapestry.optimize.{where}: give bounds= (SciPy's flat form) "
                            "or lower=/upper= (pytrees), not both.")
        lb = _tree_side(lower, params, -np.inf, where, "lower")
        ub = _tree_side(upper, params, np.inf, where, "upper")
    elif bounds is None:
        return None
    elif isinstance(bounds, so.Bounds):
        try:
            lb, ub = (np.broadcast_to(np.asarray(b, dtype=np.float64), (n,))
                      for b in (bounds.lb, bounds.ub))
        except ValueError:
            raise ValueError(f"tapestry.optimize.{where}: the scipy.optimize.Bounds have "
                             f"lb {np.shape(bounds.lb)} and ub {np.shape(bounds.ub)}; params "
                             f"have {n} numbers.") from None
    else:
        lb, ub = scipy_form(bounds, n, where)
    bad = np.flatnonzero(np.isnan(lb) | np.isnan(ub) | (lb > ub))
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"tapestry.optimize.{where}: the bounds of {_flat_name(k, params)} "
                         f"are [{lb[k]}, {ub[k]}]: each lower bound must be <= its upper "
                         "bound, neither nan.")
    return bounds if isinstance(bounds, so.Bounds) else so.Bounds(lb, ub)


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


def _scalar(value):
    """The objective's value as a Python float: any size-1 shape, as
    tapestry.grad and SciPy accept it (``float`` takes only 0-d arrays)."""
    a = np.asarray(value)
    if a.size != 1:
        raise TypeError(f"tapestry.optimize.minimize: the objective must return a scalar, "
                        f"got shape {a.shape}.")
    return float(a.reshape(()))


def _objective(fun, unravel, args):
    vg = value_and_grad(lambda p: fun(p, *args), sparse=False)

    def fun_and_jac(x):
        value, g = _untraced(vg(unravel(x)), "minimize")
        return _scalar(value), _flat64(g)
    return fun_and_jac


def _hessp(fun, unravel, args):
    hvp = hessian_vector_product(lambda p: fun(p, *args))

    def hessp(x, v):
        return _flat64(hvp(unravel(x), unravel(v)))
    return hessp


def minimize(fun, params, args=(), method=None, bounds=None, constraints=(), tol=None,
             callback=None, options=None, *, lower=None, upper=None, jac=None, hess=None,
             hessp=None):
    """Minimize scalar ``fun(params, *args)`` over a pytree ``params`` with
    ``scipy.optimize.minimize``; returns an :class:`OptimizeResult` (``res.x``
    the solution pytree; ``x, res = minimize(...)`` also works).

    The gradient comes from ``tapestry.value_and_grad``; for Newton-CG,
    trust-ncg, trust-krylov and trust-constr, ``hessp`` comes from
    ``tapestry.hessian_vector_product`` (the Hessian is never formed); for
    dogleg and trust-exact the Hessian is built from those products, one per
    parameter.  ``jac=``, ``hess=`` and ``hessp=`` are therefore refused.

    Bounds: ``bounds=`` exactly as SciPy reads it (one ``(low, high)`` pair
    per number of the ravelled params, or a ``scipy.optimize.Bounds``), or
    ``lower=`` / ``upper=`` pytrees shaped like ``params`` (scalars
    broadcast, ``None`` for unbounded).  Bounds or constraints with a method
    that ignores them (SciPy only warns) are refused.  ``callback(params_tree)``
    is called after each iteration.
    """
    so = _scipy_optimize()
    _refuse_derivatives("minimize", {"jac": jac, "hess": hess, "hessp": hessp})
    _check_params(params, "minimize")
    x0, unravel = ravel_pytree(params)
    x0 = np.asarray(x0, dtype=np.float64)
    if not isinstance(args, tuple):
        args = (args,)
    m = method.lower() if isinstance(method, str) else ""
    kw = {"jac": m not in GRADIENT_FREE or None, "method": method, "tol": tol,
          "options": options}
    if m in HESSP_METHODS or m in HESS_METHODS:
        product = _hessp(fun, unravel, args)
        if m in HESSP_METHODS:
            kw["hessp"] = product
        else:
            eye = np.eye(x0.size)
            kw["hess"] = lambda x: np.stack([product(x, e) for e in eye], axis=1)
    flat_bounds = _flat_bounds("minimize", params, x0.size, bounds, lower, upper, so,
                               _scipy_pairs)
    if flat_bounds is not None:
        _check_method_takes(m, "bounds", BOUNDED_METHODS)
        kw["bounds"] = flat_bounds
    if constraints:
        _check_method_takes(m, "constraints", CONSTRAINED_METHODS)
        kw["constraints"] = _constraints(constraints, unravel)
    if callback is not None:
        kw["callback"] = lambda xk, *rest: callback(unravel(np.asarray(xk)))
    objective = _objective(fun, unravel, args)
    if kw["jac"] is None:
        objective = _value_only(fun, unravel, args)
    raw = so.minimize(objective, x0, **kw)
    g = raw.get("grad") if m == "trust-constr" else raw.get("jac")
    g = unravel(np.asarray(g)) if g is not None and np.shape(g) == x0.shape else None
    return OptimizeResult(raw, x=unravel(raw.x), jac=g, grad=g)


def _check_method_takes(m, what, methods):
    if m and m not in methods:
        raise ValueError(f"tapestry.optimize.minimize: method {m!r} ignores {what} (SciPy "
                         f"only warns and goes on without them); use one of "
                         f"{', '.join(sorted(methods))}, or drop {what}.")


def _value_only(fun, unravel, args):
    return lambda x: _scalar(_untraced(fun(unravel(x), *args), "minimize"))


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
    per residual) unless forward mode is cheaper (more residuals than
    parameters), or ``mode`` says which."""
    use_fwd = mode == "fwd" or (mode == "auto" and n_out > n_in)
    jac = (jacfwd if use_fwd else jacobian)(flat_residuals)
    return lambda x: np.asarray(jac(x), dtype=np.float64).reshape(n_out, n_in)


def least_squares(residuals, params, args=(), bounds=None, jac_mode="auto", *,
                  lower=None, upper=None, **kwargs):
    """Minimize ``0.5 * sum(residuals(params, *args)**2)`` with
    ``scipy.optimize.least_squares``; returns an :class:`OptimizeResult`
    (``res.x`` the solution pytree, ``res.grad`` the cost's gradient as a
    pytree; ``res.fun`` and ``res.jac`` stay SciPy's flat residuals and
    Jacobian matrix; ``x, res = least_squares(...)`` also works).

    ``residuals`` may return any pytree of arrays (ravelled together).  The
    Jacobian is exact: reverse mode (``tapestry.jacobian``), or forward mode
    (``tapestry.jacfwd``) when there are more
    residuals than parameters; ``jac_mode`` = ``"rev"`` / ``"fwd"`` forces
    one, and ``jac=`` is refused.  Bounds: ``bounds=(lb, ub)`` exactly as
    SciPy reads it (each a scalar or one number per ravelled parameter, or a
    ``scipy.optimize.Bounds``), or ``lower=`` / ``upper=`` pytrees as in
    :func:`minimize`.  Other keyword arguments (``method``, ``loss``,
    ``x_scale``, ...) go to SciPy.
    """
    so = _scipy_optimize()
    _refuse_derivatives("least_squares", {"jac": kwargs.pop("jac", None)})
    if kwargs.get("kwargs"):
        raise TypeError("tapestry.optimize.least_squares: kwargs= (SciPy's keyword "
                        "arguments for fun) is not passed on; pass extra inputs with "
                        "args= or close over them.")
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
    b = _flat_bounds("least_squares", params, x0.size, bounds, lower, upper, so, _scipy_lb_ub)
    if b is not None:
        kwargs["bounds"] = b
    raw = so.least_squares(lambda x: _flat64(residuals(unravel(x), *args)), x0,
                           jac=jac, **kwargs)
    return OptimizeResult(raw, x=unravel(raw.x), grad=unravel(np.asarray(raw.grad)))
