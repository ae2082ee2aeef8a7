"""The user-facing differential operators: grad, value_and_grad, vjp,
jacobian, hessian_vector_product, hessian, stop_gradient."""
from __future__ import annotations

import functools

import numpy as np

from .backward import backward_sweep
from .pytree import tree_flatten, tree_map
from .tape import LEAF, open_tape
from .var import Var, unwrap_all


def stop_gradient(x):
    """Return ``x`` (any pytree) as constants: no derivative flows through."""
    return tree_map(unwrap_all, x)


def _normalize_argnums(argnums, nargs, opname):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError(f"tapestry.{opname}: argnums={argnums!r} but the "
                             f"function was called with {nargs} positional arguments.")
    return single, tuple(a % nargs for a in nums)


def _check_leaf(x, opname, argnum):
    if type(x) is np.ndarray and x.dtype.kind in "fc":  # the common case
        return x
    dt = getattr(x, "dtype", None)
    if dt is None:
        if isinstance(x, bool) or not isinstance(x, (float, int, complex)):
            raise TypeError(f"tapestry.{opname}: argument {argnum} has a leaf of type "
                            f"{type(x).__name__}; differentiable inputs must be "
                            "float arrays or floats.")
        if isinstance(x, int):
            dt = np.dtype(int)
        else:
            x = np.float64(x) if isinstance(x, float) else np.complex128(x)
            return x
    if np.dtype(dt).kind not in "fc":
        raise TypeError(
            f"tapestry.{opname}: argument {argnum} has dtype {np.dtype(dt)}; only "
            "float (or complex) inputs can be differentiated. Cast it with "
            ".astype(float), or leave it out of argnums.")
    return x


def _trace_inputs(tape, args, nums, opname):
    """Replace args[nums] by traced leaves; return new args and leaf records."""
    args = list(args)
    records = []  # (treedef, [(index, primal), ...]) per argnum
    nodes = tape.nodes
    for a in nums:
        leaves, td = tree_flatten(args[a])
        traced, rec = [], []
        for x in leaves:
            x = _check_leaf(x, opname, a)
            nodes.append(LEAF)
            i = len(nodes) - 1
            rec.append((i, x))
            traced.append(Var(x, tape, i))
        args[a] = td.unflatten(traced)
        records.append((td, rec))
    return args, records


_F8 = np.dtype(np.float64)


def _cast_like(ct, x, sparse="auto"):
    """The leaf's cotangent as the gradient: same shape and dtype as ``x``."""
    if type(ct) is np.ndarray and type(x) is np.ndarray and ct.dtype == x.dtype \
            and ct.shape == x.shape:
        return ct  # the common case, without the checks below
    if getattr(ct, "dtype", _F8).kind == "c" and getattr(x, "dtype", _F8).kind != "c":
        # a real leaf: Re(c * t) for real t (docs/complex.md)
        ct = np.real(ct.todense(ct.dtype) if hasattr(ct, "todense") else ct)
    if hasattr(ct, "todense"):  # a sparse cotangent (tapestry.sparse)
        dt = np.result_type(x)
        if sparse is True or (sparse == "auto" and ct.worth_keeping()):
            return ct if ct.dtype == dt else ct.astype(dt)
        ct = ct.todense(dt)
    if ct is None:
        return np.zeros_like(unwrap_all(x)) if not isinstance(x, Var) else x * 0.0
    if type(ct) is np.ndarray or isinstance(ct, np.generic):
        dt = np.result_type(x)
        if ct.dtype != dt or ct.shape != np.shape(x) or type(ct) is not np.ndarray:
            ct = np.asarray(ct, dtype=dt).reshape(np.shape(x))
    return ct


def _collect(records, cts, single, sparse="auto"):
    grads = []
    for td, rec in records:
        grads.append(td.unflatten([_cast_like(cts[i], x, sparse) for i, x in rec]))
    return grads[0] if single else tuple(grads)


def _output_node(out, tape):
    """Tape index of a traced scalar output, or None if it is constant."""
    if out.__class__ is Var and out._tape is tape:
        return out._index
    return None


def value_and_grad(f, argnums=0, has_aux=False, sparse="auto"):
    """``f``'s value and its gradient with respect to ``argnums``.

    ``f`` must return a scalar (or ``(scalar, aux)`` with ``has_aux``).
    Arguments are pytrees; the gradient has the same structure and dtypes.
    A leaf only read through gathers (``W[S]``) gets a ``tp.AxisSparse``
    gradient where that pays (``sparse="auto"``: a large array of which the
    gathers touched at most a quarter, see tapestry.sparse); ``sparse=True``
    keeps every sparse gradient, ``sparse=False`` returns dense arrays.
    """
    @functools.wraps(f)
    def value_and_grad_f(*args, **kwargs):
        single, nums = _normalize_argnums(argnums, len(args), "grad")
        with open_tape(close=False) as tape:  # closed after the sweep, below
            try:
                targs, records = _trace_inputs(tape, args, nums, "grad")
                out = f(*targs, **kwargs)
            except BaseException:
                tape.close(keep=False)
                raise
        try:
            value, aux, cts = _sweep_scalar(tape, out, has_aux)
        finally:
            tape.close(keep=False)
        grads = _collect(records, cts, single, sparse)
        return ((value, aux), grads) if has_aux else (value, grads)
    return value_and_grad_f


def _sweep_scalar(tape, out, has_aux):
    """Check ``f``'s output (a scalar, or ``(scalar, aux)``) and sweep the
    tape from it: ``(value, aux, cotangents by tape position)``."""
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError("tapestry.grad(has_aux=True): the function must "
                            "return a pair (scalar_output, aux).")
        out, aux = out
        aux = tree_map(lambda v: _lower(v, tape), aux)
    value = out._value if out.__class__ is Var and out._tape is tape else out
    plain = unwrap_all(value)
    if np.shape(plain) != ():
        raise TypeError(
            f"tapestry.grad: the function must return a scalar, got shape "
            f"{np.shape(plain)}. For array outputs use tapestry.vjp (one "
            "cotangent) or tapestry.jacobian (all of them).")
    dtype = np.result_type(plain)
    if dtype.kind not in "fc":
        raise TypeError("tapestry.grad: the output must be a float scalar, got "
                        f"dtype {dtype}.")
    idx = _output_node(out, tape)
    if idx is None:
        return value, aux, [None] * len(tape.nodes)
    return value, aux, backward_sweep(tape, idx, np.ones((), dtype=dtype), release=True)


def grad(f, argnums=0, has_aux=False, sparse="auto"):
    """The gradient of scalar-valued ``f`` with respect to ``argnums``
    (``sparse``: see :func:`value_and_grad`)."""
    vg = value_and_grad(f, argnums, has_aux, sparse)

    @functools.wraps(f)
    def grad_f(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return grad_f


def _lower(v, tape):
    """Drop one tracing level (``tape``'s) from an output leaf."""
    return v._value if v.__class__ is Var and v._tape is tape else v


def vjp(f, *primals, has_aux=False):
    """Return ``(f(*primals), pullback)``; ``pullback(ct)`` gives one
    cotangent per primal.  The pullback may be called many times."""
    nums = tuple(range(len(primals)))
    with open_tape() as tape:
        targs, records = _trace_inputs(tape, primals, nums, "vjp")
        out = f(*targs)
    aux = None
    if has_aux:
        out, aux = out
        aux = tree_map(lambda v: _lower(v, tape), aux)
    out_leaves, out_td = tree_flatten(out)
    values = [_lower(v, tape) for v in out_leaves]
    y = out_td.unflatten(values)

    def pullback(ct):
        ct_leaves, ct_td = tree_flatten(ct)
        if len(ct_leaves) != len(out_leaves):
            raise ValueError("tapestry.vjp: the cotangent must have the structure "
                             "of the output.")
        cts = [None] * len(tape.nodes)
        for v, c, val in zip(out_leaves, ct_leaves, values):
            if np.shape(c) != np.shape(val):
                raise ValueError(f"tapestry.vjp: cotangent shape {np.shape(c)} does "
                                 f"not match output shape {np.shape(val)}.")
            if v.__class__ is Var and v._tape is tape:
                sub = backward_sweep(tape, v._index, c, release=False)
                for i, s in enumerate(sub):
                    if s is not None:
                        cts[i] = s if cts[i] is None else cts[i] + s
        return _collect(records, cts, False)

    return (y, pullback, aux) if has_aux else (y, pullback)


def jacobian(f, argnums=0):
    """The Jacobian of array-valued ``f``, computed in reverse mode row by row.

    The result has shape ``out.shape + in.shape`` (a pytree of those for a
    pytree argument; a tuple for a tuple ``argnums``).
    """
    @functools.wraps(f)
    def jacobian_f(*args):
        single, nums = _normalize_argnums(argnums, len(args), "jacobian")

        def g(*sel):
            full = list(args)
            for a, s in zip(nums, sel):
                full[a] = s
            return f(*full)

        y, pullback = vjp(g, *[args[a] for a in nums])
        yv = unwrap_all(y) if not isinstance(y, Var) else y
        shape = np.shape(yv)
        dtype = np.result_type(unwrap_all(yv))
        n = int(np.prod(shape))
        rows = []
        for k in range(n):
            e = np.zeros(n, dtype=dtype)
            e[k] = 1
            rows.append(pullback(e.reshape(shape)))
        out = []
        for j, a in enumerate(nums):
            leaves, td = tree_flatten(args[a])
            per_leaf = []
            for li, x in enumerate(leaves):
                stack = [tree_flatten(r[j])[0][li] for r in rows]
                xs = np.shape(x)
                if stack and isinstance(stack[0], Var):
                    per_leaf.append(np.reshape(np.stack(stack), shape + xs))
                else:
                    per_leaf.append(np.reshape(np.array(stack, dtype=np.result_type(x))
                                               if stack else np.zeros((0,) + xs), shape + xs))
            out.append(td.unflatten(per_leaf))
        return out[0] if single else tuple(out)
    return jacobian_f


def hessian_vector_product(f, argnums=0):
    """``hvp(*args, v)``: the Hessian of scalar ``f`` times ``v``, by reverse
    over reverse (grad of <grad f, v>), never forming the Hessian."""
    def hvp(*args):
        *args, v = args

        def inner(*a):
            g = grad(f, argnums)(*a)
            gl, vl = tree_flatten(g)[0], tree_flatten(v)[0]
            return sum(np.sum(gi * vi) for gi, vi in zip(gl, vl))
        return grad(inner, argnums)(*args)
    return hvp


def hessian(f, argnums=0):
    """The full Hessian of scalar ``f`` (jacobian of grad)."""
    return jacobian(grad(f, argnums), argnums)
