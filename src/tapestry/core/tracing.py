"""Tracing a function for a transformation: its inputs become leaves of a
tape, its outputs are checked and lowered off it, and cotangents come back
with the inputs' structure and dtypes.

Shared by the reverse API (:mod:`tapestry.core.api`) and the forward API
(:mod:`tapestry.core.api_forward`), so that both treat ``argnums``,
``has_aux``, pytrees, dtypes and bad outputs the same way.
"""
from __future__ import annotations

import numpy as np

from .batched import Batched, Unbatched
from .staged import Staged
from .pytree import aux_holding, leaf_paths, tree_flatten, tree_map
from .tape import ClosedNodes, open_tape
from .var import MASKED_HELP, Var, new_leaf, unwrap_all


def as_argnum(a, opname, argnums=None):
    """``a`` as a Python int: Python and NumPy integers are accepted; a bool
    (``argnums=True`` would silently mean argument 1) or a float is refused."""
    if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
        shown = a if argnums is None else argnums
        raise TypeError(f"tapestry.{opname}: argnums must be an int or a tuple of ints, "
                        f"got {shown!r} ({type(a).__name__}); pass argnums=0 or "
                        "argnums=(0, 1).")
    return int(a)


def split_argnums(argnums, opname):
    """``(single, nums)``: whether ``argnums`` is one int, and the ints."""
    if isinstance(argnums, (int, np.integer)) or isinstance(argnums, (bool, np.bool_)):
        return True, (as_argnum(argnums, opname),)
    if isinstance(argnums, np.ndarray) and argnums.ndim == 0:
        return True, (as_argnum(argnums.item(), opname),)
    try:
        nums = tuple(argnums)
    except TypeError:
        as_argnum(argnums, opname)  # raises, naming the type
        raise
    return False, tuple(as_argnum(a, opname, argnums) for a in nums)


def normalize_argnums(argnums, nargs, opname):
    """``(single, nums)`` with every argnum checked against ``nargs`` and
    made non-negative."""
    single, nums = split_argnums(argnums, opname)
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError(f"tapestry.{opname}: argnums={argnums!r} but the "
                             f"function was called with {nargs} positional arguments.")
    return single, tuple(a % nargs for a in nums)


def check_leaf(x, opname, argnum):
    if x.__class__ is Unbatched:  # an array vmap shares between items: differentiated as is
        x = x._value
    if type(x) is np.ndarray and x.dtype.kind in "fc":  # the common case
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"tapestry.{opname}: argument {argnum} {MASKED_HELP}")
    if isinstance(x, np.matrix):
        raise TypeError(f"tapestry.{opname}: argument {argnum} is an np.matrix, whose * "
                        "is a matrix product and whose reductions stay 2-D; pass "
                        "np.asarray(m) and use @ for matrix products.")
    if x.__class__ is Staged and x._value.__class__ in (float, complex):
        # a Python number under jit (weakly typed there): the plain call
        # differentiates it as a float64 (complex128) scalar, which float32
        # arrays promote to, so the replay must too (not stay float32)
        return x._rec.call(np.float64 if x._value.__class__ is float else np.complex128,
                           (x,), None)
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


def _at_leaf(err, td, j, argnum):
    """``err`` (a refused leaf of argument ``argnum``) naming the leaf's path
    when the argument is a container: "argument 0 has dtype int64" of a
    NamedTuple ``(W, k)`` did not say that ``k`` was meant."""
    path = leaf_paths(td)[j]
    if not path:
        return err
    msg = str(err).replace(f"argument {argnum} ", f"argument {argnum} at {path} ", 1)
    if "has dtype int" in msg or "has dtype uint" in msg or "has dtype bool" in msg:
        msg += (" An int field of a NamedTuple, a list or a registered class is a leaf "
                "like any other: pass it as a separate argument, or (an unregistered "
                "dataclass) its int fields are static already.")
    return type(err)(msg)


def trace_inputs(tape, args, nums, opname, keep=False):
    """Replace args[nums] by traced leaves; return new args and leaf records.

    A repeated argnum (``argnums=(0, 0)``) is traced once and its record
    shared, so every position gets the same gradient.  With ``keep`` (a
    trace that outlives the call: ``vjp``'s pullback, ``linearize``'s
    ``f_jvp``) the caller's arrays are copied in, see :func:`own_input`."""
    args = list(args)
    by_num = {}  # argnum -> (treedef, [(index, primal), ...])
    for a in nums:
        if a in by_num:
            continue
        leaves, td = tree_flatten(args[a])
        traced, rec = [], []
        for j, x in enumerate(leaves):
            try:
                x = check_leaf(x, opname, a)
            except TypeError as e:
                raise _at_leaf(e, td, j, a) from None
            v = new_leaf(tape, own_input(x) if keep else x)
            rec.append((v._index, v._value))
            traced.append(v)
        args[a] = td.unflatten(traced)
        by_num[a] = (td, rec)
    return args, [by_num[a] for a in nums]


def own_input(x):
    """The value a kept trace holds for the caller's leaf ``x``: a copy of a
    NumPy array that could change under it.  Rules keep references to their
    inputs (``sin``'s rule reads ``x``), so without it ``x += lr * g`` (what
    tapestry.optim does to parameters) after ``vjp`` or ``linearize`` would
    move the point the pullback or ``f_jvp`` differentiates at; JAX's arrays
    are immutable, so there it cannot happen.  Only ``vjp`` and
    ``linearize`` copy: every other transform is done with its trace before
    it returns.  An array that is read-only and owns its memory is kept as
    it is (nothing can write to it); scalars are immutable."""
    if type(x) is np.ndarray and (x.flags.writeable or x.base is not None):
        return x.copy(order="K")  # (laid out as x: sums over it add in x's order)
    return x


def own_output(y):
    """An output leaf returned by a transform whose trace is kept: a copy,
    since the trace holds the same array (``exp``'s and ``tanh``'s rules read
    their result), and ``y *= 2`` by the caller must not change the
    derivative.  The copy is laid out as ``y`` (a sum over it adds in the
    order a sum over ``y`` adds, as under jit, which copies only what the
    caller already holds)."""
    if type(y) is np.ndarray:
        return y.copy(order="K")
    if y.__class__ is Staged and y._slot in y._rec.external:
        # inside jit: an argument or an array of the environment (a view
        # of one) would be handed back as it is; a result of the program
        # is fresh at every replay already
        return y.copy(order="K")
    return y


_F8 = np.dtype(np.float64)


#: ``sparse=`` of :func:`cast_like` for a chunk of ``parallel_sum`` run as a
#: jitted program (tapestry.parallel.staged): the cotangents as the chunk's
#: child tape hands them on (``parallel.work._grads``): a sparse one as it
#: is, in its own dtype, no cotangent as ``None``.
AS_SWEPT = "as swept"


def cast_like(ct, x, sparse="auto"):
    """The leaf's cotangent as the gradient: same shape and dtype as ``x``."""
    if sparse is AS_SWEPT and (ct is None or hasattr(ct, "todense")):
        return ct
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
        return np.zeros_like(unwrap_all(x)) if x.__class__ not in (Var, Batched) else x * 0.0
    if ct.__class__ is Var or ct.__class__ is Batched or ct.__class__ is Staged:
        # traced: grad in jvp, hessian, ...; staged: inside jit
        return _cast_traced(ct, x)
    if type(ct) is np.ndarray or isinstance(ct, np.generic):
        dt = np.result_type(x)
        if ct.dtype != dt or ct.shape != np.shape(x) or type(ct) is not np.ndarray:
            ct = np.asarray(ct, dtype=dt).reshape(np.shape(x))
    return ct


def _cast_traced(ct, x):
    """A traced cotangent gets the cast a plain one gets, as a traced
    ``astype``: the gradient of a float32 input stays float32 at every
    nesting level (hessian, grad inside jvp), not float64 wherever a float64
    constant met it."""
    dt = np.result_type(unwrap_all(x))
    if np.result_type(unwrap_all(ct)) != dt:
        ct = ct.astype(dt)
    if np.shape(ct) != np.shape(x) and np.size(ct) == np.size(x):
        ct = np.reshape(ct, np.shape(x))
    elif ct.__class__ is Staged and type(ct._value) is not np.ndarray:
        ct = ct._rec.call(np.asarray, (ct,), None)  # an array, as the plain path returns
    return ct


def collect(records, cts, single, sparse="auto", tape=None, opname="grad", allowed=()):
    """The gradients (one tree per record) from cotangents by tape position;
    with ``tape``, each is checked not to be a value traced there
    (:func:`returned`)."""
    kept = {}
    grads = []
    for td, rec in records:
        leaves = [cast_like(cts[i], x, sparse) for i, x in rec]
        if tape is not None:
            leaves = [returned(g, tape, opname, allowed) for g in leaves]
        grads.append(td.unflatten(unshared(leaves, kept)))
    return grads[0] if single else tuple(grads)


def _root(a):
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def unshared(leaves, kept, given=()):
    """``leaves`` with each array that overlaps an array in ``kept`` (a dict
    root id -> arrays already handed out, updated here) or in ``given`` (the
    caller's own arrays) replaced by a copy.  A rule may pass one cotangent
    or tangent on unchanged to several places (``x + y`` gives both the same
    array; ``(x, x)`` the same tangent twice; the identity the caller's own
    tangent), and the caller updating one result in place (``gx += wd * x``)
    must not change another.  A read-only leaf (a broadcast view) is copied
    too: every result is the caller's to write into."""
    for a in given:
        v = array_of(a)
        if v is not None:
            kept.setdefault(id(_root(v)), []).append(v)
    out = []
    for a in leaves:
        v = array_of(a)
        if v is not None:
            same = kept.setdefault(id(_root(v)), [])
            if not v.flags.writeable:
                # a broadcast view a rule made (the gradient of a sum of a
                # sum): the caller gets a writeable array of its own, laid
                # out as np.array lays it out (staged: a step of jit's program)
                a = np.array(a) if a is v else a.copy(order="K")
                v = array_of(a)
                same = kept.setdefault(id(_root(v)), [])
            elif any(np.may_share_memory(v, b) for b in same):
                a = a.copy()  # (staged: the copy is a step of jit's program)
                v = array_of(a)
            same.append(v)
        out.append(a)
    return out


def array_of(a):
    """The plain array ``a`` is, or holds as a value staged by ``jit``
    (whose concrete array is the memory a replay's result shares: an
    argument handed back, a view of one); ``None`` for anything else.  The
    copies that keep a transformation's results apart from the caller's
    arrays and from each other are decided on it, so ``jit(vjp(...))``,
    ``jit(jvp(...))`` and ``jit(vmap(...))`` copy where the plain call
    copies instead of handing back the caller's own array."""
    if type(a) is np.ndarray:
        return a
    if a.__class__ is Staged and type(a._value) is np.ndarray:
        return a._value
    return None


def output_node(out, tape):
    """Tape index of a traced scalar output, or None if it is constant."""
    if out.__class__ is Var and out._tape is tape:
        return out._index
    return None


def require_complex(values, opname, what):
    """``holomorphic=True`` (JAX's flag): every differentiated input (or
    output) must be complex, as JAX requires; a real one is refused."""
    for v in tree_flatten(values)[0]:
        if np.result_type(unwrap_all(v)).kind != "c":
            fix = ("cast them with x.astype(complex)" if what == "inputs" else
                   "a holomorphic function returns complex values")
            raise TypeError(
                f"tapestry.{opname}(holomorphic=True) requires complex {what}, got "
                f"dtype {np.result_type(unwrap_all(v))}: {fix}, or leave "
                "holomorphic=False for a real function.")


def check_scalar_output(out, tape, opname, holomorphic=False):
    """``out``'s value (one tracing level lowered) and dtype, after checking
    that it is a float with one element: a forgotten ``return`` (``None``)
    or a string must not become a zero gradient.  Any size-1 shape is
    accepted (``x @ w`` of shape (1, 1)), as in HIPS autograd."""
    value = out._value if out.__class__ is Var and out._tape is tape else out
    plain = unwrap_all(value)
    if plain is None or isinstance(plain, (str, bytes, bool, np.bool_)) or not (
            isinstance(plain, (np.ndarray, np.generic, int, float, complex, Batched, Staged))):
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
    if holomorphic:
        require_complex(plain, opname, "outputs")
        return value, dtype
    if dtype.kind == "c":
        raise TypeError(
            f"tapestry.{opname}: the function returns a complex scalar; a gradient needs "
            "a real output. Return np.real(...), np.abs(...) ** 2 or similar, or use "
            "holomorphic=True (or tapestry.vjp) for the derivative of a holomorphic "
            "function (docs/complex.md).")
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
    check_static_aux(tree_flatten(aux)[1], lambda v: v.__class__ is Var and v._tape is tape,
                     opname, "aux output", "a value being differentiated")
    return out, tree_map(lambda v: lower(v, tape, opname), aux)


def lower(v, tape, opname="vjp"):
    """Drop one tracing level (``tape``'s) from an output leaf; what is
    left must not be traced there (:func:`returned`)."""
    if v.__class__ is Var:
        return returned(v._value if v._tape is tape else v, tape, opname)
    return v


def trace(f, primals, opname, has_aux, nodes=None, keep=False):
    """Trace ``f(*primals)`` on a new tape (whose node list is ``nodes`` if
    given); return ``(tape, records, out_leaves, out_td, aux)``.  ``keep``:
    the trace outlives the call, see :func:`trace_inputs`."""
    with open_tape() as tape:
        if nodes is not None:
            tape.nodes = nodes
        if keep:
            tape.owned = {}  # constants are copied too (Tape.own_constant)
        targs, records = trace_inputs(tape, primals, tuple(range(len(primals))), opname,
                                      keep)
        if nodes is not None:
            nodes.seed(records)
        out = f(*targs)
    out, aux = split_aux(out, tape, has_aux, opname, "output")
    if keep and has_aux:  # aux may be an intermediate the rules read (exp's result)
        aux_leaves, aux_td = tree_flatten(aux)
        aux = aux_td.unflatten([own_output(a) for a in aux_leaves])
    out_leaves, out_td = tree_flatten(out)
    for v in out_leaves:
        check_output_leaf(unwrap_all(v), opname)
    check_static_aux(out_td, lambda v: v.__class__ is Var and v._tape is tape, opname,
                     "output", "a value being differentiated")
    return tape, records, out_leaves, out_td, aux


def check_static_aux(td, pick, opname, what, source):
    """Refuse an output whose pytree aux data (a registered class's flatten
    aux, a dataclass's static field) holds a value ``pick`` selects: the
    transformation rebuilds the output with the aux data as it is, so the
    caller would get its internal wrapper instead of a value."""
    found = aux_holding(td, pick)
    if found is not None:
        where, cls = found
        raise TypeError(
            f"tapestry.{opname}: the function's {what}{f' at {where}' if where else ''} is a "
            f"{cls} whose aux data (the static part its flatten function returns, or a "
            f"static field) holds {source}. Aux data is passed through unchanged, not "
            "transformed; make that value one of the node's children (a data field) "
            "instead.")


def check_output_leaf(x, opname):
    """Output leaves are numbers or numeric arrays: a string or an object
    would otherwise fail deep inside a sweep, or count as a constant."""
    if isinstance(x, (np.ndarray, np.generic, Batched, Staged)) and x.dtype.kind in "biufc":
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


def of_leaves(f, td, leaves, positions):
    """``f`` as a function of the leaves at ``positions`` of its flattened
    ``(args, kwargs)`` (structure ``td``); the other leaves are fixed to
    ``leaves``' values."""
    def at(*values):
        full = list(leaves)
        for k, v in zip(positions, values):
            full[k] = v
        a, kw = td.unflatten(full)
        return f(*a, **kw)
    return at


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


# --- nothing traced leaves a transformation ------------------------------------
class LeakedTracerError(TypeError):
    """A transformation was about to return a traced value (a ``Var``)
    instead of a number: something inside recorded on a tape it does not
    own (a custom rule or a parallel ``f`` closing over a value being
    differentiated).  Returning it would hand the caller an object that
    is not an array, with its derivative silently lost."""


def returned(x, tape, opname, allowed=()):
    """``x``, a leaf about to be returned by ``tape``'s transformation,
    after checking that it is not traced at ``tape``'s level or above (nor
    on a finished tape).  A value traced on an *enclosing* tape that is
    still recording is legitimate: ``grad`` nested in a function being
    differentiated returns those.  So are values of the ``allowed`` tapes:
    those of traced cotangents or tangents handed to a pullback or a
    linearized map, which is then itself being differentiated."""
    if x.__class__ is Var and x._tape not in allowed and (
            x._tape.level >= tape.level or x._tape.nodes.__class__ is ClosedNodes):
        raise LeakedTracerError(
            f"tapestry.{opname}: the result holds a traced value instead of an array: a "
            "value being differentiated reached it other than through the arguments "
            "(a custom_vjp / custom_jvp / parallel_map function reading it from a "
            "closure, a global or an attribute, or a custom rule returning traced "
            "values), so its derivative would be lost. Pass that value to the "
            "function as an argument.")
    return x


def tapes_of(xs):
    """The tapes of the traced values among ``xs``."""
    return {x._tape for x in xs if x.__class__ is Var}
