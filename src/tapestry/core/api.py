"""The user-facing differential operators: grad, value_and_grad, vjp (reverse
mode), jvp, linearize (forward mode, tapestry.core.forward), jacfwd, jacrev
(= jacobian), hessian, hessian_vector_product, elementwise_grad, stop_gradient."""
from __future__ import annotations

import functools

import numpy as np

from .backward import backward_sweep
from .forward import ForwardComplexError, TangentRecorder, push
from .pytree import tree_flatten, tree_map
from .tape import open_tape
from .var import Var, new_leaf, unwrap_all


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


def _trace_inputs(tape, args, nums, opname):
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
            v = new_leaf(tape, _check_leaf(x, opname, a))
            rec.append((v._index, v._value))
            traced.append(v)
        args[a] = td.unflatten(traced)
        by_num[a] = (td, rec)
    return args, [by_num[a] for a in nums]


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


def _check_scalar_output(out, tape, opname):
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


def _value_and_grad(f, argnums, has_aux, sparse, opname):
    @functools.wraps(f)
    def value_and_grad_f(*args, **kwargs):
        single, nums = _normalize_argnums(argnums, len(args), opname)
        with open_tape(close=False) as tape:  # closed after the sweep, below
            try:
                targs, records = _trace_inputs(tape, args, nums, opname)
                out = f(*targs, **kwargs)
            except BaseException:
                tape.close(keep=False)
                raise
        try:
            value, aux, cts = _sweep_scalar(tape, out, has_aux, opname)
        finally:
            tape.close(keep=False)
        grads = _collect(records, cts, single, sparse)
        return ((value, aux), grads) if has_aux else (value, grads)
    return value_and_grad_f


def _split_aux(out, tape, has_aux, opname, what):
    """``(output, aux)`` of a ``has_aux`` function, aux lowered off ``tape``
    (it carries no derivative); ``(out, None)`` otherwise."""
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(f"tapestry.{opname}(has_aux=True): the function must "
                        f"return a pair ({what}, aux).")
    out, aux = out
    return out, tree_map(lambda v: _lower(v, tape), aux)


def _sweep_scalar(tape, out, has_aux, opname):
    """Check ``f``'s output (a scalar, or ``(scalar, aux)``) and sweep the
    tape from it: ``(value, aux, cotangents by tape position)``."""
    out, aux = _split_aux(out, tape, has_aux, opname, "scalar_output")
    value, dtype = _check_scalar_output(out, tape, opname)
    idx = _output_node(out, tape)
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


def _lower(v, tape):
    """Drop one tracing level (``tape``'s) from an output leaf."""
    return v._value if v.__class__ is Var and v._tape is tape else v


def _trace(f, primals, opname, has_aux, nodes=None):
    """Trace ``f(*primals)`` on a new tape (whose node list is ``nodes`` if
    given); return ``(tape, records, out_leaves, out_td, aux)``."""
    with open_tape() as tape:
        if nodes is not None:
            tape.nodes = nodes
        targs, records = _trace_inputs(tape, primals, tuple(range(len(primals))), opname)
        if nodes is not None:
            nodes.seed(records)
        out = f(*targs)
    out, aux = _split_aux(out, tape, has_aux, opname, "output")
    out_leaves, out_td = tree_flatten(out)
    for v in out_leaves:
        _check_output_leaf(unwrap_all(v), opname)
    return tape, records, out_leaves, out_td, aux


def _check_output_leaf(x, opname):
    """Output leaves are numbers or numeric arrays: a string or an object
    would otherwise fail deep inside a sweep, or count as a constant."""
    if isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "biufc":
        return
    if isinstance(x, (int, float, complex)) or hasattr(x, "todense"):
        return
    raise TypeError(f"tapestry.{opname}: the function returned a value of type "
                    f"{type(x).__name__}{f' (dtype {x.dtype})' if hasattr(x, 'dtype') else ''}"
                    " among its outputs; outputs must be arrays or numbers (pytrees of them).")


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
        return _collect(self.records, self.sweep([(k, c)]), False, sparse=False)

    def __call__(self, ct):
        n = len(self.out_leaves)
        leaves = _cotangent_leaves(ct, self.out_td, n)
        pairs = [(k, _as_cotangent(c, self.values[k], k)) for k, c in enumerate(leaves)]
        return _collect(self.records, self.sweep(pairs), False)


def vjp(f, *primals, has_aux=False):
    """Return ``(f(*primals), pullback)`` (and ``aux`` with ``has_aux``);
    ``pullback(ct)`` gives one cotangent per primal and may be called many
    times.  ``ct`` has the output's structure; its leaves may be any
    array-like (Python floats, lists) and are cast to the output's dtype."""
    tape, records, out_leaves, out_td, aux = _trace(f, primals, "vjp", has_aux)
    values = [_lower(v, tape) for v in out_leaves]
    y = out_td.unflatten(values)
    pullback = _Pullback(tape, records, out_leaves, out_td, values)
    return (y, pullback, aux) if has_aux else (y, pullback)


# --- forward mode -------------------------------------------------------------------
class _Recorder(TangentRecorder):
    """A jvp tape's node list that knows the input tangents."""

    __slots__ = ("primal_tangents",)

    def seed(self, records):
        for (td, rec), t in zip(records, self.primal_tangents):
            for (i, x), ti in zip(rec, _tangent_leaves(t, td, x_leaves=rec)):
                self.tangents[i] = ti


def _tangent_leaves(t, td, x_leaves):
    leaves, ttd = tree_flatten(t)
    if len(leaves) != len(x_leaves) and len(x_leaves) == 1:
        leaves = [t]  # an array-like tangent for an array primal
    if len(leaves) != len(x_leaves):
        raise ValueError(f"tapestry.jvp: the tangent has {len(leaves)} leaves, the "
                         f"primal {len(x_leaves)}; give tangents the primals' structure.")
    out = []
    for (i, x), ti in zip(x_leaves, leaves):
        if ti.__class__ is not Var:
            ti = np.asarray(ti)
            if ti.dtype != np.result_type(x):
                ti = ti.astype(np.result_type(x))
        if np.shape(ti) != np.shape(x):
            raise ValueError(f"tapestry.jvp: tangent shape {np.shape(ti)} does not match "
                             f"primal shape {np.shape(x)}.")
        out.append(ti)
    return out


def _out_tangent(v, value, tape, tangents, batch=None):
    t = tangents[v._index] if v.__class__ is Var and v._tape is tape else None
    if t is None:
        lead = () if batch is None else (batch,)
        return np.zeros(lead + np.shape(value), np.result_type(unwrap_all(value)))
    if type(t) is np.ndarray and not t.flags.writeable:
        t = np.array(t)  # a broadcast view: give the caller its own array
    return t


def jvp(f, primals, tangents, has_aux=False):
    """Forward mode: ``(f(*primals), J v)`` for tangents ``v`` (JAX's jvp).

    ``primals`` and ``tangents`` are tuples of pytrees of the same structure;
    the output tangent has the output's.  The tangent of each operation is
    computed as it runs, so no intermediate is kept.
    """
    primals, tangents = _as_tuple(primals, "primals"), _as_tuple(tangents, "tangents")
    if len(primals) != len(tangents):
        raise ValueError(f"tapestry.jvp: {len(primals)} primals but {len(tangents)} "
                         "tangents; give one tangent per primal.")
    nodes = _Recorder()
    nodes.primal_tangents = tangents
    tape, _, out_leaves, out_td, aux = _trace(f, primals, "jvp", has_aux, nodes)
    values = [_lower(v, tape) for v in out_leaves]
    touts = [_out_tangent(v, x, tape, nodes.tangents) for v, x in zip(out_leaves, values)]
    y, ty = out_td.unflatten(values), out_td.unflatten(touts)
    return (y, ty, aux) if has_aux else (y, ty)


def _as_tuple(xs, what):
    if not isinstance(xs, (tuple, list)):
        raise TypeError(f"tapestry.jvp: {what} must be a tuple (or list) with one entry "
                        f"per argument of the function, got {type(xs).__name__}.")
    return tuple(xs)


class _Linearized:
    """``f_jvp`` of :func:`linearize`: pushes tangents through a kept tape."""

    def __init__(self, tape, records, out_leaves, out_td):
        self.tape, self.records = tape, records
        self.out_leaves, self.out_td = out_leaves, out_td
        self.values = [_lower(v, tape) for v in out_leaves]

    def push_leaves(self, seeds, batch=None):
        """Output tangent leaves for ``{tape position: tangent}`` (tangents
        with a leading axis of length ``batch``, if given)."""
        tangents = [None] * len(self.tape.nodes)
        for i, t in seeds.items():
            tangents[i] = t
        push(self.tape.nodes, tangents, batch=batch)
        return [_out_tangent(v, x, self.tape, tangents, batch)
                for v, x in zip(self.out_leaves, self.values)]

    def largest(self):
        """The most elements of any value on the tape (sizes the batches)."""
        n = 1
        for node in self.tape.nodes:
            if node is not None:
                for a in (node[2] if node[2].__class__ is tuple else (node[2],)):
                    n = max(n, int(np.prod(getattr(a, "shape", ()), dtype=np.int64)))
        return n

    def __call__(self, *tangents):
        if len(tangents) != len(self.records):
            raise ValueError(f"tapestry.linearize: f_jvp takes {len(self.records)} "
                             f"tangents, got {len(tangents)}.")
        seeds = {}
        for (td, rec), t in zip(self.records, tangents):
            for (i, _), ti in zip(rec, _tangent_leaves(t, td, rec)):
                seeds[i] = ti
        return self.out_td.unflatten(self.push_leaves(seeds))


def linearize(f, *primals, has_aux=False):
    """``(f(*primals), f_jvp)`` where ``f_jvp(*tangents)`` is the JVP at
    ``primals``; the trace is kept, so each call costs one tangent sweep."""
    tape, records, out_leaves, out_td, aux = _trace(f, primals, "linearize", has_aux)
    lin = _Linearized(tape, records, out_leaves, out_td)
    y = out_td.unflatten(lin.values)
    return (y, lin, aux) if has_aux else (y, lin)


# --- Jacobians and Hessians -------------------------------------------------------------
def _select(f, args, nums, kwargs):
    """``f`` as a function of the arguments at ``nums`` only (distinct)."""
    def selected(*sel):
        full = list(args)
        for a, s in zip(nums, sel):
            full[a] = s
        return f(*full, **kwargs)
    return selected


def _assemble(nums, uniq, records, out_td, blocks, single):
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


def _jac_setup(f, argnums, args, kwargs, opname):
    single, nums = _normalize_argnums(argnums, len(args), opname)
    uniq = list(dict.fromkeys(nums))  # a repeated argnum is one input
    return single, nums, uniq, _select(f, args, uniq, kwargs), [args[a] for a in uniq]


#: How many elements a batch of tangents may hold per value (jacfwd pushes
#: up to this many / the largest value's size basis vectors at once).
_BATCH_ELEMENTS = 1 << 22


def _columns(lin, i, x, chunk):
    """Per output leaf, the JVPs of every basis vector of input leaf ``x``
    (tape position ``i``), stacked on a leading axis; ``chunk`` at a time."""
    xs, dt = np.shape(x), np.result_type(x)
    n = int(np.prod(xs, dtype=np.int64))
    parts = []
    for s in range(0, n, chunk):
        b = min(chunk, n - s)
        seed = np.zeros((b, n), dt)
        seed[np.arange(b), s + np.arange(b)] = 1
        parts.append(lin.push_leaves({i: seed.reshape((b,) + xs)}, batch=b))
    cols = []
    for k, y in enumerate(lin.values):
        lead = np.zeros((0,) + np.shape(y), np.result_type(unwrap_all(y)))
        ps = [p[k] for p in parts]
        cols.append(lead if not ps else ps[0] if len(ps) == 1 else np.concatenate(ps))
    return cols


def jacfwd(f, argnums=0, has_aux=False):
    """The Jacobian by forward mode: one tangent sweep per input element, so
    it is the cheaper one when inputs are fewer than outputs (JAX's jacfwd).

    Pytrees in and out: the result has the output's structure, each leaf
    holding the input's structure (a tuple of them for tuple ``argnums``)
    with blocks of shape ``out_leaf.shape + in_leaf.shape``.
    """
    @functools.wraps(f)
    def jacfwd_f(*args, **kwargs):
        single, nums, uniq, g, sel = _jac_setup(f, argnums, args, kwargs, "jacfwd")
        tape, records, out_leaves, out_td, aux = _trace(g, sel, "jacfwd", has_aux)
        lin = _Linearized(tape, records, out_leaves, out_td)
        blocks = [dict() for _ in out_leaves]
        chunk = max(1, _BATCH_ELEMENTS // lin.largest())
        for u, (td, rec) in enumerate(records):
            for j, (i, x) in enumerate(rec):
                xs = np.shape(x)
                for k, block in enumerate(_columns(lin, i, x, chunk)):
                    ys = np.shape(lin.values[k])
                    blocks[k][(u, j)] = np.reshape(np.moveaxis(block, 0, -1), ys + xs)
        jac = _assemble(nums, uniq, records, out_td, blocks, single)
        return (jac, aux) if has_aux else jac
    return jacfwd_f


def jacrev(f, argnums=0, has_aux=False):
    """The Jacobian by reverse mode: one backward sweep per output element,
    so it is the cheaper one when outputs are fewer than inputs.  Same
    structure as :func:`jacfwd`.  ``tapestry.jacobian`` is this function."""
    @functools.wraps(f)
    def jacrev_f(*args, **kwargs):
        single, nums, uniq, g, sel = _jac_setup(f, argnums, args, kwargs, "jacrev")
        tape, records, out_leaves, out_td, aux = _trace(g, sel, "jacrev", has_aux)
        pb = _Pullback(tape, records, out_leaves, out_td,
                       [_lower(v, tape) for v in out_leaves])
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
        jac = _assemble(nums, uniq, records, out_td, blocks, single)
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
            _, nums = _normalize_argnums(argnums, len(args), "hessian")
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
        single, nums = _normalize_argnums(argnums, len(args), "hessian_vector_product")
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
        single, nums = _normalize_argnums(argnums, len(args), "elementwise_grad")
        uniq = list(dict.fromkeys(nums))
        y, pullback = vjp(_select(f, args, uniq, kwargs), *[args[a] for a in uniq])
        ones = tree_map(lambda l: np.ones(np.shape(l), np.result_type(unwrap_all(l))), y)
        g = pullback(ones)
        return g[uniq.index(nums[0])] if single else tuple(g[uniq.index(a)] for a in nums)
    return elementwise_grad_f
