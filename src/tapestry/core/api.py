"""The reverse-mode API: grad, value_and_grad, vjp, jacrev (= jacobian),
hessian, hessian_vector_product, elementwise_grad, stop_gradient.

Forward mode (jvp, linearize, jacfwd) is :mod:`tapestry.core.api_forward`;
both trace through :mod:`tapestry.core.tracing`."""
from __future__ import annotations

import functools

import numpy as np

from .api_forward import jacfwd, jvp
from .backward import backward_sweep
from .forward import ForwardComplexError
from .pytree import tree_flatten, tree_map
from .tape import open_tape
from .tracing import (assemble, check_scalar_output, collect, jac_setup, lower,
                      normalize_argnums, output_node, returned, select_args, split_aux,
                      tapes_of, trace, trace_inputs)
from .var import Var, unwrap_all


def stop_gradient(x):
    """Return ``x`` (any pytree) as constants: no derivative flows through."""
    return tree_map(unwrap_all, x)


def _value_and_grad(f, argnums, has_aux, sparse, opname):
    @functools.wraps(f)
    def value_and_grad_f(*args, **kwargs):
        single, nums = normalize_argnums(argnums, len(args), opname)
        with open_tape(close=False) as tape:  # closed after the sweep, below
            try:
                targs, records = trace_inputs(tape, args, nums, opname)
                out = f(*targs, **kwargs)
            except BaseException:
                tape.close(keep=False)
                raise
        try:
            value, aux, cts = _sweep_scalar(tape, out, has_aux, opname)
        finally:
            tape.close(keep=False)
        grads = collect(records, cts, single, sparse, tape, opname)
        return ((value, aux), grads) if has_aux else (value, grads)
    return value_and_grad_f


def _sweep_scalar(tape, out, has_aux, opname):
    """Check ``f``'s output (a scalar, or ``(scalar, aux)``) and sweep the
    tape from it: ``(value, aux, cotangents by tape position)``."""
    out, aux = split_aux(out, tape, has_aux, opname, "scalar_output")
    value, dtype = check_scalar_output(out, tape, opname)
    returned(value, tape, opname)
    idx = output_node(out, tape)
    if idx is None:
        return value, aux, [None] * len(tape.nodes)
    seed = np.ones(np.shape(value), dtype=dtype)
    return value, aux, backward_sweep(tape, idx, seed, release=True)


def value_and_grad(f, argnums=0, has_aux=False, sparse="auto"):
    """``f``'s value and its gradient with respect to ``argnums``.

    ``f`` must return a scalar, or any array of size 1 (or ``(scalar, aux)``
    with ``has_aux``).  Arguments are pytrees; the gradient has the same
    structure and dtypes.  A leaf only read through gathers (``W[S]``) gets
    a ``tp.AxisSparse`` gradient where that pays (``sparse="auto"``: a large
    array of which the gathers touched at most a quarter, see
    tapestry.sparse); ``sparse=True`` keeps every sparse gradient,
    ``sparse=False`` returns dense arrays.
    """
    return _value_and_grad(f, argnums, has_aux, sparse, "value_and_grad")


def grad(f, argnums=0, has_aux=False, sparse="auto"):
    """The gradient of scalar-valued ``f`` with respect to ``argnums``
    (``sparse``: see :func:`value_and_grad`)."""
    vg = _value_and_grad(f, argnums, has_aux, sparse, "grad")

    @functools.wraps(f)
    def grad_f(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return grad_f


def _cotangent_leaves(ct, out_td, n):
    """``ct``'s leaves matched to the output's, walking the output's
    structure, so an array-like leaf given as a list stays one leaf."""
    if n == 1 and out_td.unflatten([0]) == 0:  # a bare array output
        return [ct]
    acc = [None] * n
    try:
        _match(out_td.unflatten(list(range(n))), ct, acc)
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        raise ValueError("tapestry.vjp: the cotangent must have the structure of the "
                         f"output ({out_td}); matching it failed at {e!r}.") from None
    return acc


def _match(pos, ct, acc):
    if pos is None:
        return
    if type(pos) is int:
        acc[pos] = ct
    elif isinstance(pos, dict):
        for k in pos:
            _match(pos[k], ct[k], acc)
    elif isinstance(pos, (list, tuple)):
        if len(pos) != len(ct):
            raise IndexError(f"length {len(ct)} for {len(pos)}")
        for p, c in zip(pos, ct):
            _match(p, c, acc)
    else:  # dataclasses and other registered nodes: same leaf order
        for p, c in zip(tree_flatten(pos)[0], tree_flatten(ct)[0]):
            acc[p] = c


def _as_cotangent(c, value, k):
    """Cotangent ``c`` for output leaf ``k``: any array-like, cast to the
    output's dtype; the shape must match."""
    if c.__class__ is Var or hasattr(c, "todense"):
        arr = c
    else:
        arr = np.asarray(c)
        dt = np.result_type(unwrap_all(value))
        if arr.dtype.kind == "c" and dt.kind != "c":
            raise TypeError(f"tapestry.vjp: complex cotangent for the real output {k}.")
        if arr.dtype != dt and dt.kind in "fc":
            arr = arr.astype(dt)
    if np.shape(arr) != np.shape(value):
        raise ValueError(f"tapestry.vjp: cotangent shape {np.shape(arr)} does not "
                         f"match output shape {np.shape(value)} (output leaf {k}).")
    return arr


class _Pullback:
    """``vjp``'s pullback: reusable; sweeps only the outputs given a cotangent."""

    def __init__(self, tape, records, out_leaves, out_td, values):
        self.tape, self.records = tape, records
        self.out_leaves, self.out_td, self.values = out_leaves, out_td, values

    def sweep(self, pairs):
        """Cotangents by tape position for ``(output leaf, cotangent)`` pairs."""
        tape = self.tape
        cts = [None] * len(tape.nodes)
        for k, c in pairs:
            v = self.out_leaves[k]
            if v.__class__ is Var and v._tape is tape:
                sub = backward_sweep(tape, v._index, c, release=False)
                for i, s in enumerate(sub):
                    if s is not None:
                        cts[i] = s if cts[i] is None else cts[i] + s
        return cts

    def leaf(self, k, c):
        """The input cotangents (a list, one per primal) for output leaf ``k``."""
        return collect(self.records, self.sweep([(k, c)]), False, False, self.tape, "vjp")

    def __call__(self, ct):
        n = len(self.out_leaves)
        leaves = _cotangent_leaves(ct, self.out_td, n)
        pairs = [(k, _as_cotangent(c, self.values[k], k)) for k, c in enumerate(leaves)]
        return collect(self.records, self.sweep(pairs), False, "auto", self.tape, "vjp",
                       tapes_of(c for _, c in pairs))


def vjp(f, *primals, has_aux=False):
    """Return ``(f(*primals), pullback)`` (and ``aux`` with ``has_aux``);
    ``pullback(ct)`` gives one cotangent per primal and may be called many
    times.  ``ct`` has the output's structure; its leaves may be any
    array-like (Python floats, lists) and are cast to the output's dtype."""
    tape, records, out_leaves, out_td, aux = trace(f, primals, "vjp", has_aux)
    values = [lower(v, tape) for v in out_leaves]
    y = out_td.unflatten(values)
    pullback = _Pullback(tape, records, out_leaves, out_td, values)
    return (y, pullback, aux) if has_aux else (y, pullback)


def _stack(parts, lead_shape, trail_shape, dtype):
    """``parts`` (one per element) stacked into ``lead_shape + trail_shape``."""
    if not parts:
        return np.zeros(lead_shape + trail_shape, dtype)
    if len(parts) == 1:
        return np.reshape(parts[0], lead_shape + trail_shape)
    return np.reshape(np.stack(parts), lead_shape + trail_shape)


def _basis(shape, dtype, j):
    e = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype)
    e[j] = 1
    return e.reshape(shape)


def jacrev(f, argnums=0, has_aux=False):
    """The Jacobian by reverse mode: one backward sweep per output element,
    so it is the cheaper one when outputs are fewer than inputs.  Same
    structure as :func:`jacfwd`.  ``tapestry.jacobian`` is this function."""
    @functools.wraps(f)
    def jacrev_f(*args, **kwargs):
        single, nums, uniq, g, sel = jac_setup(f, argnums, args, kwargs, "jacrev")
        tape, records, out_leaves, out_td, aux = trace(g, sel, "jacrev", has_aux)
        pb = _Pullback(tape, records, out_leaves, out_td,
                       [lower(v, tape, "jacrev") for v in out_leaves])
        _refuse_real_to_complex(records, pb.values, "jacrev")
        blocks = []
        for k, y in enumerate(pb.values):
            ys, dt = np.shape(y), np.result_type(unwrap_all(y))
            rows = [pb.leaf(k, _basis(ys, dt, e))
                    for e in range(int(np.prod(ys, dtype=np.int64)))]
            block = {}
            for u, (td, rec) in enumerate(records):
                for j, (i, x) in enumerate(rec):
                    parts = [tree_flatten(r[u])[0][j] for r in rows]
                    block[(u, j)] = _stack(parts, ys, np.shape(x), np.result_type(x))
            blocks.append(block)
        jac = assemble(nums, uniq, records, out_td, blocks, single)
        return (jac, aux) if has_aux else jac
    return jacrev_f


jacobian = jacrev


def _refuse_real_to_complex(records, values, opname):
    """A real input with a complex output has a Jacobian that is not a
    complex matrix (the map is only real-linear): its rows cannot be pulled
    back with complex unit cotangents without losing a part.  JAX refuses
    it too (``holomorphic=True`` requires complex inputs)."""
    if not any(np.result_type(unwrap_all(v)).kind == "c" for v in values):
        return
    for td, rec in records:
        for _, x in rec:
            if np.result_type(x).kind != "c":
                raise TypeError(
                    f"tapestry.{opname}: the function maps a real input to a complex "
                    "output, whose Jacobian is not a complex matrix. Differentiate "
                    "np.real(f(x)) and np.imag(f(x)) separately (or np.stack them), or "
                    "pass complex inputs (x.astype(complex)) for a holomorphic f.")


def hessian(f, argnums=0, has_aux=False):
    """The Hessian of scalar ``f``, forward over reverse (``jacfwd`` of
    ``jacrev``), with JAX's nesting: for a dict argument a dict of dicts,
    for tuple ``argnums`` a tuple of tuples.  A function with complex
    intermediates (an FFT, ``exp(1j x)``) takes reverse over reverse:
    forward mode does not handle complex values yet."""
    fwd = jacfwd(jacrev(f, argnums, has_aux), argnums, has_aux)
    rev = jacrev(jacrev(f, argnums, has_aux), argnums, has_aux)

    @functools.wraps(f)
    def hessian_f(*args, **kwargs):
        try:
            return fwd(*args, **kwargs)
        except ForwardComplexError:
            _, nums = normalize_argnums(argnums, len(args), "hessian")
            _require_real_inputs([args[a] for a in nums], "hessian")
            return rev(*args, **kwargs)
    return hessian_f


def _require_real_inputs(primals, opname):
    """Reverse over reverse stands in for forward over reverse only for real
    inputs (complex intermediates): the Hessian of a real function of
    complex inputs is not a complex matrix, so that case stays refused."""
    if any(np.result_type(unwrap_all(x)).kind == "c" for x in tree_flatten(primals)[0]):
        raise ForwardComplexError(
            f"tapestry.{opname}: complex inputs are not supported (the second "
            "derivative of a real function of complex inputs is not a complex "
            "matrix); split them into real and imaginary parts.")


def hessian_vector_product(f, argnums=0):
    """``hvp(*args, v)``: the Hessian of scalar ``f`` times ``v`` (a pytree
    like the differentiated arguments; a tuple of them for tuple
    ``argnums``), forward over reverse: one gradient traced, one tangent
    pushed through it.  The Hessian is never formed."""
    def hvp(*args, **kwargs):
        *args, v = args
        single, nums = normalize_argnums(argnums, len(args), "hessian_vector_product")
        gradf = grad(f, argnums, sparse=False)

        def g(*sel):
            full = list(args)
            for a, s in zip(nums, sel):
                full[a] = s
            return gradf(*full, **kwargs)
        tangents = (v,) if single else tuple(v)
        primals = [args[a] for a in nums]
        try:
            return jvp(g, primals, tangents)[1]
        except ForwardComplexError:  # complex intermediates: reverse over reverse
            _require_real_inputs(primals, "hessian_vector_product")
            cts = vjp(g, *primals)[1](v if single else tuple(v))  # Hᵀv = Hv
            return cts[0] if single else cts
    return hvp


def elementwise_grad(f, argnums=0):
    """HIPS autograd's ``elementwise_grad``: the vector-Jacobian product with
    a cotangent of ones, i.e. the derivative of each output element with
    respect to its own input element when ``f`` acts elementwise (for other
    ``f``, the gradient of ``sum(f)``)."""
    @functools.wraps(f)
    def elementwise_grad_f(*args, **kwargs):
        single, nums = normalize_argnums(argnums, len(args), "elementwise_grad")
        uniq = list(dict.fromkeys(nums))
        y, pullback = vjp(select_args(f, args, uniq, kwargs), *[args[a] for a in uniq])
        ones = tree_map(lambda l: np.ones(np.shape(l), np.result_type(unwrap_all(l))), y)
        g = pullback(ones)
        return g[uniq.index(nums[0])] if single else tuple(g[uniq.index(a)] for a in nums)
    return elementwise_grad_f
