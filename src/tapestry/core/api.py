"""The reverse-mode API: grad, value_and_grad, vjp, jacrev (= jacobian),
hessian, hessian_vector_product, elementwise_grad, stop_gradient.

Forward mode (jvp, linearize, jacfwd) is :mod:`tapestry.core.api_forward`;
both trace through :mod:`tapestry.core.tracing`."""
from __future__ import annotations

import functools

import numpy as np

from .api_forward import forward_jacobian, forward_jvp
from .backward import backward_sweep
from .batched import Batched
from .forward import ForwardComplexError
from .staged import Staged
from .pytree import (TreeMismatch, leaf_paths, match_up_to, tree_flatten, tree_map,
                     tree_structure)
from .tape import open_tape
from .tracing import (array_of, assemble, check_scalar_output, collect, jac_setup, lower,
                      normalize_argnums, output_node, own_output, require_complex, returned,
                      select_args, split_argnums, split_aux, tapes_of, trace,
                      trace_inputs)
from .var import MASKED_HELP, Var, unwrap_all


def stop_gradient(x):
    """Return ``x`` (any pytree) as constants: no derivative flows through."""
    return tree_map(_constant, x)


def _constant(x):
    """``x`` without any tracing level; a batched value stays batched (its
    items differ) but loses the traced values inside it (``grad(vmap(f))``)."""
    from .batched import Batched
    x = unwrap_all(x)
    if x.__class__ is Batched:
        return Batched(_constant(x._value), x._trace)
    return x


def _value_and_grad(f, argnums, has_aux, sparse, opname, holomorphic=False):
    split_argnums(argnums, opname)  # a bad argnums is refused here, not at the call

    @functools.wraps(f)
    def value_and_grad_f(*args, **kwargs):
        single, nums = normalize_argnums(argnums, len(args), opname)
        if holomorphic:
            require_complex([args[a] for a in nums], opname, "inputs")
        with open_tape(close=False) as tape:  # closed after the sweep, below
            try:
                targs, records = trace_inputs(tape, args, nums, opname)
                out = f(*targs, **kwargs)
            except BaseException:
                tape.close(keep=False)
                raise
        try:
            value, aux, cts = _sweep_scalar(tape, out, has_aux, opname, holomorphic)
        finally:
            tape.close(keep=False)
        grads = collect(records, cts, single, sparse, tape, opname)
        return ((value, aux), grads) if has_aux else (value, grads)
    return value_and_grad_f


def _sweep_scalar(tape, out, has_aux, opname, holomorphic=False):
    """Check ``f``'s output (a scalar, or ``(scalar, aux)``) and sweep the
    tape from it: ``(value, aux, cotangents by tape position)``.  With
    ``holomorphic`` the output is complex and the seed 1: the cotangent of
    an input is ``f'(z)`` (the pairing has no conjugation)."""
    out, aux = split_aux(out, tape, has_aux, opname, "scalar_output")
    value, dtype = check_scalar_output(out, tape, opname, holomorphic)
    returned(value, tape, opname)
    idx = output_node(out, tape)
    if idx is None:
        return value, aux, [None] * len(tape.nodes)
    seed = np.ones(np.shape(value), dtype=dtype)
    return value, aux, backward_sweep(tape, idx, seed, release=True)


def value_and_grad(f, argnums=0, has_aux=False, sparse="auto", holomorphic=False):
    """``f``'s value and its gradient with respect to ``argnums``.

    ``f`` must return a scalar, or any array of size 1 (or ``(scalar, aux)``
    with ``has_aux``).  Arguments are pytrees; the gradient has the same
    structure and dtypes.  A leaf only read through gathers (``W[S]``) gets
    a ``tp.AxisSparse`` gradient where that pays (``sparse="auto"``: a large
    array of which the gathers touched at most a quarter, see
    tapestry.sparse); ``sparse=True`` keeps every sparse gradient,
    ``sparse=False`` returns dense arrays.  ``holomorphic=True`` (JAX's
    flag): complex inputs and a complex output, and the gradient is the
    complex derivative ``f'(z)`` (docs/complex.md).
    """
    return _value_and_grad(f, argnums, has_aux, sparse, "value_and_grad", holomorphic)


def grad(f, argnums=0, has_aux=False, sparse="auto", holomorphic=False):
    """The gradient of scalar-valued ``f`` with respect to ``argnums``
    (``sparse``, ``holomorphic``: see :func:`value_and_grad`)."""
    vg = _value_and_grad(f, argnums, has_aux, sparse, "grad", holomorphic)

    @functools.wraps(f)
    def grad_f(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return grad_f


def _cotangent_leaves(ct, out_td, opname):
    """``ct``'s leaves matched to the output's by key and position (an
    array-like leaf given as a list stays one leaf; a list may stand for a
    tuple): a missing, extra or renamed key is refused, naming its path."""
    if out_td.is_leaf():  # a bare array output
        return [ct]
    try:
        return match_up_to(out_td, ct, loose=True)
    except TreeMismatch as e:
        where, expected, got = e.args
        raise ValueError(
            f"tapestry.{opname}: the cotangent does not have the output's tree structure; "
            f"they differ at {where or 'the root'}: {expected} in the output, {got} in "
            f"the cotangent. Output: {out_td!r}; cotangent: {tree_structure(ct)!r}. "
            "Give the cotangent the output's structure, e.g. "
            "tapestry.tree_map(np.ones_like, y).") from None


def _as_cotangent(c, value, where, opname):
    """Cotangent ``c`` for an output leaf (``where()`` names it): any
    array-like, cast to the output's dtype; the shape must match."""
    dt = np.result_type(unwrap_all(value))
    if c.__class__ is Staged and np.result_type(c).kind in "biuf" + dt.kind:
        # a cotangent staged by jit (the pullback of grad(jit(f)), jit/reverse.py):
        # cast as below, never read (np.asarray would pin its value in the program)
        arr = c if np.result_type(c) == dt or dt.kind not in "fc" else c.astype(dt)
    elif c.__class__ is Var or c.__class__ is Batched or hasattr(c, "todense"):
        arr = c
        if c.__class__ is Var and np.result_type(unwrap_all(c)) != dt and \
                np.result_type(unwrap_all(c)).kind == dt.kind:
            arr = c.astype(dt)  # traced: the cast a plain cotangent gets, below
    else:
        if isinstance(c, np.ma.MaskedArray):  # np.asarray would drop its mask
            raise TypeError(f"tapestry.{opname}: the cotangent of {where()} {MASKED_HELP}")
        arr = np.asarray(c)
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"tapestry.{opname}: the cotangent of {where()} has dtype "
                            f"{arr.dtype} (a {type(c).__name__}); give a number or "
                            "numeric array.")
        if arr.dtype.kind == "c" and dt.kind != "c":
            raise TypeError(f"tapestry.{opname}: the cotangent of {where()} is complex but "
                            "the output is real; give a real cotangent.")
        if arr.dtype != dt and dt.kind in "fc":
            arr = arr.astype(dt)
    if np.shape(arr) != np.shape(value):
        raise ValueError(f"tapestry.{opname}: cotangent shape {np.shape(arr)} does not "
                         f"match output shape {np.shape(value)} ({where()}).")
    return arr


class _Pullback:
    """``vjp``'s pullback: reusable; sweeps only the outputs given a cotangent."""

    def __init__(self, tape, records, out_leaves, out_td, values, opname="vjp"):
        self.tape, self.records = tape, records
        self.out_leaves, self.out_td, self.values = out_leaves, out_td, values
        self.opname = opname  # the transform errors name

    def sweep(self, pairs):
        """Cotangents by tape position for ``(output leaf, cotangent)`` pairs."""
        tape = self.tape
        outs = ((self.out_leaves[k], c) for k, c in pairs)
        seeds = sorted(((v._index, c) for v, c in outs if v.__class__ is Var and v._tape is tape),
                       key=lambda pair: pair[0])
        if not seeds:
            return [None] * len(tape.nodes)
        last, seed = seeds.pop()  # one sweep from the last output seeds them all
        return backward_sweep(tape, last, seed, release=False, more=seeds)

    def leaf(self, k, c):
        """The input cotangents (a list, one per primal) for output leaf ``k``."""
        return collect(self.records, self.sweep([(k, c)]), False, False, self.tape, "vjp")

    def __call__(self, ct):
        leaves = _cotangent_leaves(ct, self.out_td, self.opname)
        pairs = [(k, _as_cotangent(c, self.values[k], self._namer(k), self.opname))
                 for k, c in enumerate(leaves)]
        cts = self.sweep(pairs)
        _unalias(cts, self.records, [c for _, c in pairs])
        return collect(self.records, cts, False, "auto", self.tape, self.opname,
                       tapes_of(c for _, c in pairs))

    def given(self, cts):
        """The input cotangents (as ``__call__``) for one cotangent per output
        leaf, ``None`` where an output got none: the sweep starts from the
        others only, as ``leaf`` does, so an output without a cotangent adds
        nothing (not the ``0 * ...`` of a zero cotangent, which may be -0.0).

        The rules of a node recording a whole function (checkpoint, jit) call
        this with the cotangents the sweep brought: a real output times a
        complex number downstream gets a complex one, of which only the real
        part reaches real inputs (the plain sweep casts it at them), so it is
        projected here, where ``__call__`` refuses a caller's."""
        pairs = [(k, _as_cotangent(_real_part_for(c, self.values[k]), self.values[k],
                                   self._namer(k), self.opname))
                 for k, c in enumerate(cts) if c is not None]
        swept = self.sweep(pairs)
        _unalias(swept, self.records, [c for _, c in pairs])
        return collect(self.records, swept, False, "auto", self.tape, self.opname,
                       tapes_of(c for _, c in pairs))

    def _namer(self, k):
        """Names output leaf ``k`` in an error (the path is found only then)."""
        def name():
            path = leaf_paths(self.out_td)[k]
            return f"output leaf {path}" if path else "the output"
        return name


def _real_part_for(c, value):
    """``c``'s real part where it is a plain complex cotangent of a real
    ``value``; else ``c`` as it is."""
    if (c.__class__ is np.ndarray or isinstance(c, (complex, np.generic))) \
            and np.iscomplexobj(c) and not np.iscomplexobj(unwrap_all(value)):
        return np.real(c)
    return c


def _root(a):
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def _unalias(cts, records, given):
    """Copy each input cotangent in ``cts`` that is (a view of) one of the
    caller's cotangent arrays ``given``: a rule that passes its cotangent on
    unchanged (``x + c``, the identity) would otherwise hand the caller's
    own array back as the gradient, and updating one would change the other."""
    roots = {id(_root(_array_in(c))) for c in given if _array_in(c) is not None}
    for _, rec in records:
        for i, _ in rec:
            c = cts[i]
            a = _array_in(c)
            if a is not None and id(_root(a)) in roots:
                # (staged by jit: the copy is a step of its program; a
                # read-only broadcast view laid out as tracing.unshared
                # copies one, so grad(jit(f)) and grad(f) agree)
                cts[i] = c.copy() if a.flags.writeable else c.copy(order="K")


def _array_in(c):
    """The array ``c`` is (a subclass too), or a jit-staged value's
    concrete array (:func:`tracing.array_of`); ``None`` for anything else."""
    if isinstance(c, np.ndarray):
        return c
    return array_of(c)


def vjp(f, *primals, has_aux=False):
    """Return ``(f(*primals), pullback)`` (and ``aux`` with ``has_aux``);
    ``pullback(ct)`` gives one cotangent per primal and may be called many
    times.  ``ct`` has the output's structure (checked: the same keys and
    shapes); its leaves may be any array-like (Python floats, lists) and are
    cast to the output's dtype.  The pullback keeps the point it was built
    at: the caller's arrays (inputs, and closed-over arrays the function's
    operations meet) are copied into the trace, so updating them in place
    later does not move it."""
    return _vjp(f, primals, has_aux, "vjp", keep=True)


def _vjp(f, primals, has_aux, opname, keep):
    """:func:`vjp` for the transform called ``opname``; ``keep=False`` for a
    pullback used before the transform returns (no copies needed)."""
    tape, records, out_leaves, out_td, aux = trace(f, primals, opname, has_aux, keep=keep)
    values = [lower(v, tape, opname) for v in out_leaves]
    y = out_td.unflatten([own_output(v) for v in values] if keep else values)
    pullback = _Pullback(tape, records, out_leaves, out_td, values, opname)
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


def jacrev(f, argnums=0, has_aux=False, holomorphic=False):
    """The Jacobian by reverse mode: one backward sweep per output element,
    so it is the cheaper one when outputs are fewer than inputs.  Same
    structure as :func:`jacfwd`.  ``tapestry.jacobian`` is this function.
    ``holomorphic=True`` (JAX's flag) requires complex inputs and outputs:
    the Jacobian is then ``f'(z)``."""
    return _jacrev(f, argnums, has_aux, "jacrev", holomorphic)


def _jacrev(f, argnums, has_aux, opname, holomorphic=False):
    """:func:`jacrev` for the transform called ``opname`` (errors name it)."""
    split_argnums(argnums, opname)

    @functools.wraps(f)
    def jacrev_f(*args, **kwargs):
        single, nums, uniq, g, sel = jac_setup(f, argnums, args, kwargs, opname)
        if holomorphic:
            require_complex([args[a] for a in nums], opname, "inputs")
        tape, records, out_leaves, out_td, aux = trace(g, sel, opname, has_aux)
        pb = _Pullback(tape, records, out_leaves, out_td,
                       [lower(v, tape, opname) for v in out_leaves])
        if holomorphic:
            require_complex(pb.values, opname, "outputs")
        _refuse_real_to_complex(records, pb.values, opname)
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
    for tuple ``argnums`` a tuple of tuples.  Complex intermediates (an FFT,
    ``exp(1j x)``) are differentiated in forward mode too; complex inputs are
    refused (the second derivative of a real function of complex inputs is
    no complex matrix)."""
    fwd = forward_jacobian(_jacrev(f, argnums, has_aux, "hessian"), argnums, has_aux,
                           "hessian")

    @functools.wraps(f)
    def hessian_f(*args, **kwargs):
        _, nums = normalize_argnums(argnums, len(args), "hessian")
        _require_real_inputs([args[a] for a in nums], "hessian")
        return fwd(*args, **kwargs)
    return hessian_f


def _require_real_inputs(primals, opname):
    """The Hessian of a real function of complex inputs is not a complex
    matrix: refused by name (before jacfwd's own, more general refusal)."""
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
    name = "hessian_vector_product"
    gradf = _value_and_grad(f, argnums, False, False, name)

    def hvp(*args, **kwargs):
        if not args:
            raise TypeError(f"tapestry.{name}: call hvp(*args, v) with the function's "
                            "arguments and then the vector v.")
        *args, v = args
        single, nums = normalize_argnums(argnums, len(args), name)

        def g(*sel):
            full = list(args)
            for a, s in zip(nums, sel):
                full[a] = s
            return gradf(*full, **kwargs)[1]
        tangents = (v,) if single else _as_vectors(v, nums, name)
        primals = [args[a] for a in nums]
        labels = [f"v (for argument {a})" for a in nums]
        return forward_jvp(g, primals, tangents, False, name, labels)[1]
    return hvp


def _as_vectors(v, nums, opname):
    """``v`` for tuple ``argnums``: one vector per differentiated argument."""
    if not isinstance(v, (tuple, list)) or len(v) != len(nums):
        raise ValueError(f"tapestry.{opname}: with argnums={tuple(nums)}, v must be a "
                         f"tuple of {len(nums)} vectors (one per argument), got "
                         f"{type(v).__name__}"
                         + (f" of length {len(v)}." if isinstance(v, (tuple, list)) else "."))
    return tuple(v)


def elementwise_grad(f, argnums=0):
    """HIPS autograd's ``elementwise_grad``: the vector-Jacobian product with
    a cotangent of ones, i.e. the derivative of each output element with
    respect to its own input element when ``f`` acts elementwise (for other
    ``f``, the gradient of ``sum(f)``)."""
    split_argnums(argnums, "elementwise_grad")

    @functools.wraps(f)
    def elementwise_grad_f(*args, **kwargs):
        single, nums = normalize_argnums(argnums, len(args), "elementwise_grad")
        uniq = list(dict.fromkeys(nums))
        y, pullback = _vjp(select_args(f, args, uniq, kwargs), [args[a] for a in uniq],
                           False, "elementwise_grad", keep=False)
        ones = tree_map(lambda l: np.ones(np.shape(l), np.result_type(unwrap_all(l))), y)
        g = pullback(ones)
        return g[uniq.index(nums[0])] if single else tuple(g[uniq.index(a)] for a in nums)
    return elementwise_grad_f
