"""Tracing a function for a transformation: its inputs become leaves of a
tape, its outputs are checked and lowered off it, and cotangents come back
with the inputs' structure and dtypes.

Shared by the reverse API (:mod:`tapestry.core.api`) and the forward API
(:mod:`tapestry.core.api_forward`), so that both treat ``argnums``,
``has_aux``, pytrees, dtypes and bad outputs the same way.
"""
from __future__ import annotations

import numpy as np

from .pytree import tree_flatten, tree_map
from .tape import open_tape
from .var import MASKED_HELP, Var, new_leaf, unwrap_all


def normalize_argnums(argnums, nargs, opname):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError(f"tapestry.{opname}: argnums={argnums!r} but the "
                             f"function was called with {nargs} positional arguments.")
    return single, tuple(a % nargs for a in nums)


def check_leaf(x, opname, argnum):
    if type(x) is np.ndarray and x.dtype.kind in "fc":  # the common case
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"tapestry.{opname}: argument {argnum} {MASKED_HELP}")
    if isinstance(x, np.matrix):
        raise TypeError(f"tapestry.{opname}: argument {argnum} is an np.matrix, whose * "
                        "is a matrix product and whose reductions stay 2-D; pass "
                        "np.asarray(m) and use @ for matrix products.")
    dt = getattr(x, "dtype", None)
    if dt is None:
        if isinstance(x, bool) or not isinstance(x, (float, int, complex)):
            raise TypeError(f"tapestry.{opname}: argument {argnum} has a leaf of type "
                            f"{type(x).__name__}; differentiable inputs must be "
                            "float arrays or floats. A container class of your own "
                            "becomes a tree of such leaves with "
                            "tapestry.tree_util.register_pytree_node or register_dataclass.")
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


def trace_inputs(tape, args, nums, opname):
    """Replace args[nums] by traced leaves; return new args and leaf records.

    A repeated argnum (``argnums=(0, 0)``) is traced once and its record
    shared, so every position gets the same gradient."""
    args = list(args)
    by_num = {}  # argnum -> (treedef, [(index, primal), ...])
    for a in nums:
        if a in by_num:
            continue
        leaves, td = tree_flatten(args[a])
        traced, rec = [], []
        for x in leaves:
            v = new_leaf(tape, check_leaf(x, opname, a))
            rec.append((v._index, v._value))
            traced.append(v)
        args[a] = td.unflatten(traced)
        by_num[a] = (td, rec)
    return args, [by_num[a] for a in nums]


_F8 = np.dtype(np.float64)


def cast_like(ct, x, sparse="auto"):
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


def collect(records, cts, single, sparse="auto"):
    grads = []
    for td, rec in records:
        grads.append(td.unflatten([cast_like(cts[i], x, sparse) for i, x in rec]))
    return grads[0] if single else tuple(grads)


def output_node(out, tape):
    """Tape index of a traced scalar output, or None if it is constant."""
    if out.__class__ is Var and out._tape is tape:
        return out._index
    return None


def check_scalar_output(out, tape, opname):
    """``out``'s value (one tracing level lowered) and dtype, after checking
    that it is a float with one element: a forgotten ``return`` (``None``)
    or a string must not become a zero gradient.  Any size-1 shape is
    accepted (``x @ w`` of shape (1, 1)), as in HIPS autograd."""
    value = out._value if out.__class__ is Var and out._tape is tape else out
    plain = unwrap_all(value)
    if plain is None or isinstance(plain, (str, bytes, bool, np.bool_)) or not (
            isinstance(plain, (np.ndarray, np.generic, int, float, complex))):
        raise TypeError(
            f"tapestry.{opname}: the function must return a float scalar, but it "
            f"returned a value of type {type(plain).__name__}"
            + (" (a missing `return`?)." if plain is None else "."))
    if np.size(plain) != 1:
        raise TypeError(
            f"tapestry.{opname}: the function must return a scalar, got shape "
            f"{np.shape(plain)}. For array outputs use tapestry.vjp (one "
            "cotangent), tapestry.jacobian / jacfwd (all of them) or "
            "tapestry.elementwise_grad.")
    dtype = np.result_type(plain)
    if dtype.kind == "c":
        raise TypeError(
            f"tapestry.{opname}: the function returns a complex scalar; a gradient needs "
            "a real output. Return np.real(...), np.abs(...) ** 2 or similar, or use "
            "tapestry.vjp for the derivative of a holomorphic function "
            "(docs/complex.md).")
    if dtype.kind != "f":
        raise TypeError(f"tapestry.{opname}: the output must be a float scalar, got "
                        f"dtype {dtype}.")
    return value, dtype


def split_aux(out, tape, has_aux, opname, what):
    """``(output, aux)`` of a ``has_aux`` function, aux lowered off ``tape``
    (it carries no derivative); ``(out, None)`` otherwise."""
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(f"tapestry.{opname}(has_aux=True): the function must "
                        f"return a pair ({what}, aux).")
    out, aux = out
    return out, tree_map(lambda v: lower(v, tape), aux)


def lower(v, tape):
    """Drop one tracing level (``tape``'s) from an output leaf."""
    return v._value if v.__class__ is Var and v._tape is tape else v


def trace(f, primals, opname, has_aux, nodes=None):
    """Trace ``f(*primals)`` on a new tape (whose node list is ``nodes`` if
    given); return ``(tape, records, out_leaves, out_td, aux)``."""
    with open_tape() as tape:
        if nodes is not None:
            tape.nodes = nodes
        targs, records = trace_inputs(tape, primals, tuple(range(len(primals))), opname)
        if nodes is not None:
            nodes.seed(records)
        out = f(*targs)
    out, aux = split_aux(out, tape, has_aux, opname, "output")
    out_leaves, out_td = tree_flatten(out)
    for v in out_leaves:
        check_output_leaf(unwrap_all(v), opname)
    return tape, records, out_leaves, out_td, aux


def check_output_leaf(x, opname):
    """Output leaves are numbers or numeric arrays: a string or an object
    would otherwise fail deep inside a sweep, or count as a constant."""
    if isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "biufc":
        return
    if isinstance(x, (int, float, complex)) or hasattr(x, "todense"):
        return
    raise TypeError(f"tapestry.{opname}: the function returned a value of type "
                    f"{type(x).__name__}{f' (dtype {x.dtype})' if hasattr(x, 'dtype') else ''}"
                    " among its outputs; outputs must be arrays or numbers (pytrees of them).")


def select_args(f, args, nums, kwargs):
    """``f`` as a function of the arguments at ``nums`` only (distinct)."""
    def selected(*sel):
        full = list(args)
        for a, s in zip(nums, sel):
            full[a] = s
        return f(*full, **kwargs)
    return selected


def assemble(nums, uniq, records, out_td, blocks, single):
    """JAX's nesting: the output's structure, then per output leaf the
    input's structure (a tuple of them for tuple ``argnums``);
    ``blocks[k][(u, j)]`` is the block of output leaf ``k`` and leaf ``j`` of
    the distinct argument ``u``."""
    per_out = []
    for k in range(len(blocks)):
        trees = []
        for a in nums:
            u = uniq.index(a)
            td, rec = records[u]
            trees.append(td.unflatten([blocks[k][(u, j)] for j in range(len(rec))]))
        per_out.append(trees[0] if single else tuple(trees))
    return out_td.unflatten(per_out)


def jac_setup(f, argnums, args, kwargs, opname):
    single, nums = normalize_argnums(argnums, len(args), opname)
    uniq = list(dict.fromkeys(nums))  # a repeated argnum is one input
    return single, nums, uniq, select_args(f, args, uniq, kwargs), [args[a] for a in uniq]

