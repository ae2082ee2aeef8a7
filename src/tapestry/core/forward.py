"""Forward mode: tangents pushed through a recorded tape, node by node.

``jvp`` traces ``f`` the way ``grad`` does; every node appended to the tape
gets the tangent of its output from its parents' tangents at once (so the
tape keeps no primal intermediates; the tangents stay until ``jvp``
returns), and ``linearize`` keeps the tape to push many tangents later.

There is no second rule table to keep in step with the first: every JVP
comes from the VJP rules of ``tapestry.ops``, in one of three ways.

* **Transposition** (any node): a VJP rule ``g -> J_p^T g`` is linear in
  ``g``.  Traced on a fresh tape with ``g`` a leaf, its own VJP with the
  cotangent ``t_p`` is ``J_p t_p`` (docs/forward.md).  Exact for every
  rule, custom_vjp backward rules included, at the price of tracing the
  rule and one small reverse sweep.
* **Elementwise ufuncs** (``Primitive.elementwise``): the Jacobian of a real
  ufunc is diagonal (after broadcasting), hence symmetric, so the VJP rule
  applied to the broadcast tangent *is* the JVP: no tracing, one rule call.
* **Linear primitives** (``Primitive.linear_in``: ``matmul`` in each
  operand, ``sum``, ``reshape``, indexing, ...): the JVP of a map that is
  linear in an argument is the primitive itself applied to the tangent
  (with a batch of tangents, the primitive's batching rule).

The last two are the measured fast paths (benchmarks/forward_mode.py): on
W3's shapes transposing ``matmul`` costs two more GEMMs than applying it.
Each node holds its primitive, so the paths read its declared properties;
nothing is looked up by name.
"""
from __future__ import annotations

import numpy as np

from .backward import _FRESH, JointRule, Negated, _refcount, backward_sweep
from .staged import Staged
from .batched import Batched, BatchedConversionError, Unbatched, _combine, _item, handled, top_batch
from .primitive import dtype_of, shape_of
from .tape import LEAF, open_tape
from .var import TRANSPOSING as _TRANSPOSING, Var

#: Switch for benchmarks and tests: ``False`` sends every node through
#: transposition (the reference the fast paths are checked against).
USE_FAST_RULES = True


class _Meta:
    """Shape and dtype of an array a rule reads only the shape of."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))


def _broadcast(x, shape):
    if x.__class__ is Unbatched:  # vmap's proxy for an array shared by all items
        x = x._value
    if x.__class__ is Var or x.__class__ is Batched or type(x) is np.ndarray \
            or isinstance(x, np.generic) or x.__class__ is Staged:
        return x if shape_of(x) == shape else np.broadcast_to(x, shape)
    if hasattr(x, "todense"):  # a sparse cotangent the reverse pass recorded (a
        return _broadcast(x.todense(), shape)  # gather's): its values, densified
    if hasattr(x, "shape") and hasattr(x, "dtype"):  # the shape of an array not kept
        return _Meta(shape, x.dtype)
    return x  # a Python scalar: broadcasts by itself


def _align(t, shape, batch):
    """Tangent ``t`` broadcast to ``shape`` (``(batch,) + shape`` if batched:
    the batch axis stays first, the rest aligns from the right)."""
    if batch is None:
        return _broadcast(t, shape)
    inner = shape_of(t)[1:]
    if len(inner) < len(shape):
        t = np.reshape(t, (batch,) + (1,) * (len(shape) - len(inner)) + tuple(inner))
    return _broadcast(t, (batch,) + tuple(shape))


def _fast_tangent(prim, i, rule, t, ans, args, kwargs, batch):
    """The contribution of argument ``i``'s tangent ``t`` by a fast path, or
    ``NotImplemented`` when the node is outside what the paths cover."""
    if prim.elementwise and prim.n_outputs == 1:
        if dtype_of(ans).kind != "f" or dtype_of(t).kind == "c" or \
                any(a.__class__ is complex or (hasattr(a, "dtype") and dtype_of(a).kind == "c")
                    for a in args):
            # a complex operand: the rule's Jacobian is real-linear, not
            # symmetric (abs, sign), so the rule is no JVP: transposition
            return NotImplemented
        shape = shape_of(ans)
        full = shape if batch is None else (batch,) + tuple(shape)
        bargs = [_broadcast(a, full) for a in args]
        bt = _align(t, shape, batch)
        c = rule(bt, ans, *bargs, **kwargs) if kwargs else rule(bt, ans, *bargs)
        return c.value() if c.__class__ is Negated else c
    if i not in prim.linear_in:
        return NotImplemented
    full = list(args)
    full[i] = t
    if batch is None:
        return prim(*full, **kwargs) if kwargs else prim(*full)
    if prim.batch is None:
        return NotImplemented
    batched = [False] * len(full)
    batched[i] = True
    return prim.batch(prim, full, batched, kwargs or {})


def _fit(t, ans, batch=None):
    """The summed contributions as the output's tangent: full shape and the
    output's float dtype (a rule's float64 constant, e.g. erf's 2/sqrt(pi),
    would otherwise make a float32 output's tangent float64)."""
    if t is None or ans.__class__ is tuple:
        return t
    dt = dtype_of(ans)
    if dt.kind == "f" and getattr(t, "dtype", dt).kind == "c":
        # a real output reached from complex values: transposition treats
        # the rule's real cotangent as a leaf whose own cotangent is complex;
        # under the pairing Re(c * t) a real leaf's part is the real part
        t = np.real(t)
    if dt.kind in "fc" and getattr(t, "dtype", dt) != dt:
        t = t.astype(dt)
    shape = shape_of(ans)
    if batch is not None:
        shape = (batch,) + tuple(shape)
    if shape_of(t) != shape:
        t = np.broadcast_to(t, shape)
    return t


def node_tangent(node, ts, batch=None):
    """The tangent of ``node``'s output given its parents' tangents ``ts``
    (``None`` means zero).  Multi-output nodes get a list.  With ``batch``,
    every tangent has a leading axis of that length (many tangents at once,
    for ``jacfwd``); nodes without a batched path loop over it."""
    parents, rules, ans, args, kwargs, prim = node
    if rules.__class__ is JointRule:
        custom = getattr(rules.fn, "custom_jvp", None)
        if batch is not None:  # a rule that says it takes batched tangents gets them
            if getattr(custom, "batched", False):
                return custom.tangent(ts, batch)
            return _loop(node, ts, batch)
        if custom is not None:
            return custom.tangent(ts)
        return _per_item_if_read(_transposed_joint, rules.fn, ts, ans, args, kwargs or {})
    selects = getattr(rules[0], "selects", None) if len(rules) == 1 else None
    if selects is not None:  # output k of a multi-output node: slot k of its tangent
        t = ts[0][selects]
        return None if t is None else _fit(t, ans, batch)
    # The argument position of each rule, so the primitive's properties
    # apply (None: unknown, e.g. a select node; transposition then).
    positions = prim.active_of(rules) if prim is not None and USE_FAST_RULES else None
    out, slow, fresh = None, [], False
    for k, (rule, t) in enumerate(zip(rules, ts)):
        if t is None:
            continue
        c = NotImplemented
        if positions is not None:
            try:
                c = _fast_tangent(prim, positions[k], rule, t, ans, args, kwargs, batch)
            except BatchedConversionError as e:  # the rule branches on a batched value:
                handled(e)
                c = NotImplemented          # the general path runs it per item
        if c is NotImplemented:
            slow.append((rule, t))
        elif c is not None:
            if out is None:
                out = c
                # a buffer only this node holds takes a second contribution in place
                # (W3's jvp: ``t_w1 @ x + w1 @ t_x`` without a third (h, bs) buffer)
                fresh = type(c) is np.ndarray and c.base is None and _refcount(c) == _FRESH
                continue
            out = _sum2(out, c, fresh)
    if slow:
        if batch is not None:
            c = _loop((parents, [r for r, _ in slow], ans, args, kwargs, prim),
                      [t for _, t in slow], batch)
        else:
            c = _per_item_if_read(_transposed, None, slow, ans, args, kwargs or {})
        if c is not None:
            out = c if out is None else _add(out, c)
    return _fit(out, ans, batch)


class ForwardComplexError(NotImplementedError):
    """A complex case forward mode refuses: the second derivative of a real
    function of complex inputs (``hessian``), which is no complex matrix."""


def _loop(node, ts, batch):
    """A batched tangent one slice at a time (nodes without a batched path)."""
    ans = node[2]
    cols = [node_tangent(node, [None if t is None else _slice(t, b) for t in ts])
            for b in range(batch)]
    if ans.__class__ is tuple:
        return [_stack_cols([c[k] if c is not None else None for c in cols], a)
                for k, a in enumerate(ans)]
    return _stack_cols(cols, ans)


def _slice(t, b):
    return [None if x is None else x[b] for x in t] if t.__class__ is list else t[b]


def _stack_cols(cols, ans):
    if all(c is None for c in cols):
        return None
    z = None
    out = []
    for c in cols:
        if c is None:
            z = np.zeros(shape_of(ans), dtype_of(ans)) if z is None else z
            c = z
        out.append(c)
    return np.stack(out)


def _sum2(out, c, fresh):
    """``out + c``, in place when ``out`` is a buffer this node just made."""
    if fresh and type(out) is np.ndarray and type(c) is np.ndarray and out.shape == c.shape \
            and out.dtype == np.result_type(out.dtype, c.dtype):
        return np.add(out, c, out=out)
    return out + c


def _add(a, b):
    if a.__class__ is list:
        return [y if x is None else x if y is None else x + y for x, y in zip(a, b)]
    return a + b


# --- transposition --------------------------------------------------------------
#: ``[count, message]``: transpositions that made a tangent NaN because it is
#: undefined there (eigenvectors at repeated eigenvalues: a rule cannot tell
#: whether the output is used).  The forward APIs compare the count before
#: and after their sweep: a non-finite result tangent then raises the message
#: (the NaN reached the result), an unused one costs nothing.
UNDEFINED = [0, ""]


def mark_undefined(message):
    """Record that a transposed rule gave an undefined (NaN) tangent."""
    UNDEFINED[0] += 1
    UNDEFINED[1] = message


def transposing(g):
    """Whether the cotangent ``g`` a VJP rule got is (taken from) a seed of
    forward mode's transposition: its values are placeholder zeros, so a rule
    must not decide anything from them (a zero there would say "unused" of
    every output and drop its tangent silently; the ids are var.TRANSPOSING,
    which also refuses a comparison or bool() of them: var.refuse_seed_read)."""
    return g.__class__ is Var and id(g._tape) in _TRANSPOSING


def _seed(ans, tape):
    """A traced zero cotangent for ``ans`` (a list of them for a tuple)."""
    if ans.__class__ is tuple:
        return [_seed(a, tape) for a in ans]
    z = np.zeros(shape_of(ans), dtype=dtype_of(ans))
    tape.nodes.append(LEAF)
    return Var(z, tape, len(tape.nodes) - 1)


def _pull(tape, c, t, acc):
    """Add the VJP of ``c`` (traced on ``tape``) with cotangent ``t`` into
    ``acc``, the cotangents of the seed leaves (tape positions 0..n-1)."""
    if c is None or t is None:
        return
    if c.__class__ in (list, tuple):
        for ck, tk in zip(c, t):
            _pull(tape, ck, tk, acc)
        return
    if hasattr(c, "todense"):  # a sparse cotangent (AxisSparse)
        c = c.todense()
    if c.__class__ is not Var or c._tape is not tape:
        if c.__class__ is Var or isinstance(c, (np.ndarray, np.generic, int, float, complex)):
            return  # does not depend on the seed: a zero contribution
        raise TypeError(
            f"tapestry forward mode (jvp / jacfwd / hessian): a backward rule returned a "
            f"cotangent of type {type(c).__name__}, which transposing the rule cannot read "
            f"(taking it as zero would be silently wrong). Give the operation a forward rule "
            f"(a custom_jvp attribute on its joint rule, or tapestry.custom_jvp).")
    cts = backward_sweep(tape, c._index, t, release=False)
    for j in range(len(acc)):
        ct = cts[j]
        if ct is not None:
            if hasattr(ct, "todense"):
                ct = ct.todense()
            acc[j] = ct if acc[j] is None else acc[j] + ct


def _collect_seed(acc, ans):
    if ans.__class__ is tuple:
        return [_scalar_like(t, a) for t, a in zip(acc, ans)]
    return _scalar_like(acc[0], ans)


def _scalar_like(t, ans):
    """A 0-d array tangent of a NumPy scalar output as a NumPy scalar, as
    the output's own rules give it (``jvp(jit(f))`` of a sum returns what
    ``jvp(f)`` returns)."""
    if t.__class__ is np.ndarray and t.ndim == 0 and isinstance(ans, np.generic):
        return t[()]
    if t.__class__ is Staged and t._value.__class__ is np.ndarray and t._value.ndim == 0 \
            and isinstance(ans._value if ans.__class__ is Staged else ans, np.generic):
        return t[()]  # inside jit: the same conversion, a step of the program
    return t


def _per_item_if_read(transpose, fn, ts, ans, args, kwargs):
    """``transpose`` (:func:`_transposed` or :func:`_transposed_joint`) on
    the node; when a rule reads a batched value in Python (a branch, a
    conversion: the node runs inside a vmap outside this forward pass), the
    transposition runs once per item of that batch, results stacked, as
    reverse mode does (``rule_per_item``)."""
    call = (lambda t, a, r, k: transpose(t, a, r, k)) if fn is None else \
        (lambda t, a, r, k: transpose(fn, t, a, r, k))
    try:
        return call(ts, ans, args, kwargs)
    except BatchedConversionError as e:
        trace = top_batch((ans, args, ts), kwargs)
        if trace is None:
            raise
        handled(e)
        per = [call(_item(ts, i, trace), _item(ans, i, trace), _item(args, i, trace),
                    _item(kwargs, i, trace)) for i in range(trace.size)]
        return _combine(per, trace, "a forward-mode rule")


def _transposed(pairs, ans, args, kwargs):
    """``sum_p J_p t_p`` for ``(rule_p, t_p)`` pairs, by transposing the rules."""
    with open_tape() as tape:
        _TRANSPOSING.add(id(tape))
        try:
            g = _seed(ans, tape)
            outs = [(rule(g, ans, *args, **kwargs), t) for rule, t in pairs]
        finally:
            _TRANSPOSING.discard(id(tape))
    acc = [None] * (len(ans) if ans.__class__ is tuple else 1)
    for c, t in outs:
        _pull(tape, c, t, acc)
    return _collect_seed(acc, ans)


def _transposed_joint(fn, ts, ans, args, kwargs):
    """The same for a node whose rule returns every parent's cotangent at
    once (custom_vjp, parallel chunks): the user's backward rule is traced,
    so it must itself be written with differentiable NumPy."""
    with open_tape() as tape:
        g = _seed(ans, tape)
        _TRANSPOSING.add(id(tape))
        try:
            cs = fn(g, ans, *args, **kwargs)
        except NonlinearRuleError:
            raise
        except Exception as e:
            raise type(e)(
                f"tapestry forward mode (jvp / jacfwd / hessian) pushes tangents "
                f"through the backward rule of {_owner_name(fn)} by differentiating "
                f"it, and that rule failed on traced input: {e}. Write its bwd with "
                "differentiable NumPy operations, or give the function a forward "
                "rule with tapestry.custom_jvp.") from e
        finally:
            _TRANSPOSING.discard(id(tape))
    acc = [None] * (len(ans) if ans.__class__ is tuple else 1)
    for c, t in zip(cs, ts):
        _pull(tape, c, t, acc)
    return _collect_seed(acc, ans)


def _real_plain(x):
    """``x`` as a real float64 ndarray, ``None`` for a zero, or
    ``NotImplemented`` where the check below does not apply (a complex
    value).  A batched value is every item's (batch axis first: the identity
    summed over the items holds as each item's does); a staged one (jit) is
    its value at the trace."""
    if x is None:
        return None
    if hasattr(x, "todense"):
        x = x.todense()
    while x.__class__ is Var or x.__class__ is Batched or x.__class__ is Staged:
        x = x._value
    if not isinstance(x, (np.ndarray, np.generic, int, float)) or np.iscomplexobj(x):
        return NotImplemented
    return np.asarray(x, dtype=np.float64)


class NonlinearRuleError(TypeError):
    """A custom backward rule that is not linear in its cotangent, met by
    forward mode (raised as it is, not wrapped as a rule's failure)."""


def check_linear_in_cotangent(call, g, owner, message=None):
    """Refuse a custom backward rule that is not linear in its cotangent.

    Forward mode transposes a backward rule (docs/forward.md), which gives
    the rule's own Jacobian only when the rule is linear in its cotangent
    ``g`` (a true VJP is).  A rule that clips, squares or takes the absolute
    value of ``g`` (gradient clipping: ``np.clip(g, -c, c)``) is not; its
    transposition is the derivative at the placeholder zero cotangent, and
    ``jvp`` was silently the unclipped derivative.  ``call(gs)`` runs the
    rule on a list of cotangents (one per output, like ``g``, whose values
    are a transposition's placeholders); the rule must give ``L(c g1) =
    c L(g1)`` for a random ``g1`` with magnitudes over six decades and
    ``c = -2.5``.  Complex values are not checked."""
    rng = np.random.default_rng(12345)
    g1 = []
    for c in g:
        dt = dtype_of(c)
        if not np.issubdtype(dt, np.floating):
            return
        shape = shape_of(c)
        g1.append((rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, shape)).astype(dt))
    scale = -2.5
    a = _leaves_of(call(g1))
    b = _leaves_of(call([(scale * x).astype(x.dtype) for x in g1]))
    if a is None or b is None or len(a) != len(b):
        return
    low = any(np.finfo(dtype_of(c)).bits < 64 for c in g)
    tol = 2e-2 if low else 1e-4   # a linear rule's rounding grows with its conditioning
    for x, y in zip(a, b):
        x = 0.0 if x is None else scale * x
        y = 0.0 if y is None else y
        if np.linalg.norm(np.ravel(y - x)) > tol * (np.linalg.norm(np.ravel(x)) +
                                                    np.linalg.norm(np.ravel(y))) + 1e-300:
            raise NonlinearRuleError(message or
                f"tapestry forward mode (jvp / jacfwd / linearize): the backward rule of "
                f"{owner} is not linear in its cotangent (np.clip(g, ...), np.abs(g), "
                f"g ** 2, np.maximum(g, ...)), so it is no vector-Jacobian product and has "
                f"no transpose: forward mode would silently give the derivative of the rule "
                f"at a zero cotangent. Give the function a forward rule with "
                f"tapestry.custom_jvp, or differentiate it in reverse mode only (grad / vjp).")


def _leaves_of(cts):
    """The rule's cotangents as real float64 arrays (``None`` for a zero),
    or ``None`` where one is complex or not an array."""
    from .pytree import tree_flatten
    out = []
    for c in tree_flatten(cts, is_leaf=lambda x: x is None)[0]:
        c = _real_plain(c)
        if c is NotImplemented:
            return None
        out.append(c)
    return out


def _owner_name(fn, depth=3):
    """The name of the custom_vjp function a joint rule belongs to, found in
    the rule's closure (for the error message only)."""
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if v.__class__.__name__ == "custom_vjp":
            return f"custom_vjp function {getattr(v, '__name__', '?')!r}"
        if callable(v) and depth > 0 and hasattr(v, "__closure__"):
            name = _owner_name(v, depth - 1)
            if not name.startswith("a custom"):
                return name
    return "a custom rule"


# --- the tangent sweep --------------------------------------------------------------
def forward_sweep(nodes, tangents, start=0, batch=None):
    """Fill ``tangents[i]`` for every node from ``start`` on (leaves keep
    theirs); ``tangents`` is a list as long as ``nodes``.  ``batch``: the
    length of the tangents' leading batch axis, if they have one."""
    for i in range(start, len(nodes)):
        node = nodes[i]
        if node is LEAF:
            continue
        parents = node[0]
        if len(parents) == 1:
            t = tangents[parents[0]]
            tangents[i] = None if t is None else node_tangent(node, (t,), batch)
            continue
        ts = [tangents[p] for p in parents]
        tangents[i] = None if all(t is None for t in ts) else node_tangent(node, ts, batch)
    return tangents


class TangentRecorder(list):
    """Tape nodes for ``jvp``: each node appended gets its output's tangent
    at once and only a placeholder is kept, so a forward-mode trace holds no
    primal intermediates (the tangents are kept until the trace ends: which
    of them a later operation will read is not known in advance)."""

    __slots__ = ("tangents",)

    def __init__(self):
        super().__init__()
        self.tangents = []

    def append(self, node):
        tangents = self.tangents
        if node is LEAF:
            tangents.append(None)
            list.append(self, LEAF)
            return
        parents = node[0]
        ts = [tangents[p] for p in parents]
        tangents.append(None if all(t is None for t in ts) else node_tangent(node, ts))
        list.append(self, _DONE)


_DONE = ((), (), None, (), None)
