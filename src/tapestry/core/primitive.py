"""Primitives: a NumPy function plus one VJP rule per differentiable argument.

A :class:`Primitive` is what gets recorded on the tape.  Calling it with no
traced argument runs the plain NumPy function and records nothing (activity
analysis at the cheapest possible point).  Otherwise it finds the highest
tape among its traced arguments, runs the function on the unwrapped values,
and appends one node that holds a rule for each *active* argument only, so
the backward pass never forms cotangents nobody asked for.

Rules have the signature ``rule(g, ans, *args, **kwargs) -> cotangent`` where
``g`` is the output cotangent, ``ans`` the forward result and ``args`` the
unwrapped arguments.  A rule may return ``None`` for a zero cotangent.
"""
from __future__ import annotations

import operator
import sys

import numpy as np

from . import batching
from .batching import shape_of  # noqa: F401  (rule modules import it from here)
from .backward import Negated, passed_on
from .batched import Batched, batched_above, batched_call, top_batch
from .registry import FAST_UFUNCS, FUNCTIONS, UFUNCS, register, register_nondiff
from .staged import Staged, staged_recorder
from .var import Var, held, innermost_tape, refuse_masked



# --- what a node keeps alive ---------------------------------------------------
KEEP_ALL = 0        # rules may read every argument and the result
KEEP_SHAPES = 1     # rules read only shapes/dtypes (add, subtract, sum, reshape)
KEEP_ANS = 2        # rules read the result only (exp, tanh, sqrt)
KEEP_OTHER = 3      # each active argument's rule reads the *other* operands (multiply, matmul)
#: Below this many elements, holding an array costs less than deciding not
#: to, and a plain multiply costs less than checking for a broadcast 1.
KEEP_MIN_SIZE = 4096


def _power(a, b):
    """``np.power(a, b)`` as ``a ** b`` (the operator's scalar shortcuts,
    ``x ** 2`` as ``np.square``, give np.power's numbers), except for a bool
    array ``a``: its square is int8, np.power's result int64."""
    if a.__class__ is np.ndarray and a.dtype.kind == "b":
        return np.power(a, b)
    return a ** b


_OPERATORS = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
              np.true_divide: operator.truediv, np.power: _power,
              np.negative: operator.neg, np.matmul: operator.matmul}


class ArrayMeta:
    """Stands in for an array a rule only needs the shape and dtype of."""

    __slots__ = ("shape", "dtype")

    def __init__(self, a):
        self.shape = a.shape
        self.dtype = a.dtype

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))


def _meta(a):
    return ArrayMeta(a) if type(a) is np.ndarray else a


def _apply_keep(keep, raw, ans, active):
    if keep == KEEP_SHAPES:
        return [_meta(a) for a in raw], ArrayMeta(ans)
    if keep == KEEP_ANS:
        return [_meta(a) for a in raw], ans
    needed = set(range(len(raw))) - set(active) if len(active) == 1 else None
    if needed is None:  # several active arguments read each other
        return raw, ArrayMeta(ans)
    return [a if i in needed else _meta(a) for i, a in enumerate(raw)], ArrayMeta(ans)


class Primitive:
    """A differentiable operation: its forward function, one VJP rule per
    differentiable argument, and the properties the transformations read,
    all fixed where it is declared.

    ``vjps`` lists the rules by argument position (``None`` where an
    argument has none); ``vjp_argnum(argnum, g, ans, args, kwargs)`` serves
    every argument without its own rule (variadic ops: concatenate,
    einsum).  Differentiating an argument with no rule raises when the
    operation is recorded, naming it.

    Properties (read by forward mode and vmap; never looked up by name):

    - ``linear_in``: the argument positions in which the operation is
      linear, the others held fixed (``matmul``: ``(0, 1)``; ``sum``:
      ``(0,)``).  Forward mode then applies the primitive itself to a
      tangent instead of transposing its rule (JAX's ``deflinear``).  Only
      exactly linear maps belong here: forward mode trusts it.
    - ``batch``: the batching rule, ``batch(prim, args, batched, kwargs) -> out``:
      ``args`` are the primitive's arguments where ``batched[i]`` says that
      argument ``i`` carries an extra leading batch axis; the rule returns
      the result with a leading batch axis (a tuple of them for several
      outputs), computed by calling the primitive once on rearranged
      arguments, or ``NotImplemented`` for a combination it does not cover
      (the caller then loops over the batch).

    ``module`` and ``line`` say where it was declared.  A Primitive is
    registered for NumPy's dispatch with :func:`implements`, or called
    directly.
    """

    __slots__ = ("fun", "call_positional", "name", "vjps", "vjp_argnum", "n_outputs",
                 "keep", "reads_values", "linear_in", "batch", "elementwise", "module", "line",
                 "_rules0", "_rules1", "_rules01", "_rule_sets", "_positions")

    def __init__(self, fun, name=None, *, vjps=(), vjp_argnum=None, n_outputs=1,
                 keep=KEEP_ALL, linear_in=(), batch=None):
        self.module, self.line = declaration_site()
        self.linear_in = tuple(linear_in)
        #: An elementwise ufunc (no core dimensions): its Jacobian is diagonal
        #: and its batching rule is derived (``core.batching.elementwise``).
        self.elementwise = isinstance(fun, np.ufunc) and fun.signature is None
        self.batch = batching.elementwise if batch is None and self.elementwise else batch
        if not _dispatches(fun):
            fun = _reentering(self, fun)
        self.fun = fun
        # The same function for calls without keyword arguments; the Python
        # operator for arithmetic, which NumPy scalars run ~10x faster than
        # the ufunc call.
        self.call_positional = _OPERATORS.get(fun, fun)
        # What the node must hold for its rules (see ``KEEP_*``): dropping
        # the arrays the rules never read lets them be freed during forward.
        self.keep = keep
        #: Whether the rules may read a constant argument's values (not only
        #: its shape): the node then keeps a copy of a plain array argument.
        self.reads_values = keep not in (KEEP_SHAPES, KEEP_ANS)
        self.name = name or getattr(fun, "__name__", repr(fun))
        self.vjps = dict((i, r) for i, r in enumerate(vjps) if r is not None) \
            if not isinstance(vjps, dict) else dict(vjps)
        self.vjp_argnum = vjp_argnum
        self.n_outputs = n_outputs
        # Rule tuples by the positions of the active arguments, made once each
        # (recording allocates none), and the way back from a node's rule
        # tuple to those positions (forward mode reads the properties of the
        # arguments: ``active_of``).  The one- and two-argument hot paths use
        # the first three directly (None: no rule).
        self._rule_sets, self._positions = {}, {}
        r0, r1 = self._rule_or_none(0), self._rule_or_none(1)
        self._rules0 = None if r0 is None else self._remember((0,), (r0,))
        self._rules1 = None if r1 is None else self._remember((1,), (r1,))
        self._rules01 = None if r0 is None or r1 is None else self._remember((0, 1), (r0, r1))

    def __repr__(self):
        return f"<Primitive {self.name} ({self.module}:{self.line})>"

    def _rule_or_none(self, i):
        rule = self.vjps.get(i)
        if rule is None and self.vjp_argnum is not None:
            f = self.vjp_argnum
            rule = lambda g, ans, *args, **kwargs: f(i, g, ans, args, kwargs)  # noqa: E731
        return rule

    def _rule(self, i):
        rule = self._rule_or_none(i)
        if rule is None:
            raise NotImplementedError(
                f"tapestry: {self.name} is not differentiable in argument {i}. "
                "Pass it as a constant (tapestry.stop_gradient) or define the rule "
                "with tapestry.custom_vjp.")
        return rule

    #: Bound on the rule tuples remembered per primitive (variadic ops with
    #: many operands could otherwise make one per subset of active operands).
    _MAX_RULE_SETS = 64

    def _remember(self, active, rules):
        if len(self._rule_sets) < self._MAX_RULE_SETS:
            self._rule_sets[active] = rules
            self._positions[id(rules)] = active
        return rules

    def _rules_of(self, active):
        """The rule tuple for the active argument positions; raises if one is
        missing."""
        active = tuple(active)
        rules = self._rule_sets.get(active)
        if rules is None:
            rules = self._remember(active, tuple(self._rule(i) for i in active))
        return rules

    def active_of(self, rules):
        """The argument positions of a rule tuple this primitive recorded
        (``None`` if not remembered: callers then treat the node generally)."""
        return self._positions.get(id(rules))

    def __call__(self, *args, **kwargs):
        if not kwargs and self.n_outputs == 1:
            if len(args) == 2:
                return self._call2(args[0], args[1])
            if len(args) == 1:
                return self._call1(args[0])
        return self._call(args, kwargs)

    # The one- and two-argument paths are the hot loop of every elementwise
    # program (W5 in WORKLOADS.md); they are ``_call`` unrolled, and build
    # the node tuple of :func:`record` inline.
    def _call1(self, a):
        if a.__class__ is not Var:
            if a.__class__ is Batched:
                return batched_call(self, (a,), _NO_KWARGS, a._trace)
            return self.call_positional(a)
        tape = a._tape
        try:
            ans = self.call_positional(a._value)
        except (ValueError, TypeError) as e:
            raise _named(self, e) from e
        rules = self._rules0 or self._rules_of((0,))
        raw = (a._value,)
        kept = ans
        if type(ans) is np.ndarray and self.keep and ans.size >= KEEP_MIN_SIZE:
            raw, kept = _apply_keep(self.keep, raw, ans, (0,))
        nodes = tape.nodes
        nodes.append(((a._index,), rules, kept, raw, None, self))
        return Var(ans, tape, len(nodes) - 1)

    def _call2(self, a, b):
        if a.__class__ is Var:
            if b.__class__ is Var:
                ta, tb = a._tape, b._tape
                if ta is not tb:  # different nesting levels: the higher one records
                    return self._call((a, b), _NO_KWARGS)
                raw = (a._value, b._value)
                parents, active = (a._index, b._index), (0, 1)
                rules = self._rules01 or self._rules_of(active)
                const = None
            else:
                ta, raw, const = a._tape, (a._value, b), None
                if b.__class__ not in _SCALARS:  # one test on the hot path (x * 2.0)
                    raw = self._other_operand(ta, raw, 1)
                    if raw is None:
                        return self._with_batched(a, b, 1)
                    const = 1
                parents, active = (a._index,), (0,)
                rules = self._rules0 or self._rules_of(active)
        elif b.__class__ is Var:
            if a.__class__ is complex and isinstance(b._value, (float, complex)):
                # complex.__mul__(np.float64) gives a Python complex; with an
                # array (float32 included) the Python complex stays weak, as
                # in NumPy: 1j * float32 is complex64
                a = np.complex128(a)
            ta, raw, const = b._tape, (a, b._value), None
            if a.__class__ not in _SCALARS:
                raw = self._other_operand(ta, raw, 0)
                if raw is None:
                    return self._with_batched(a, b, 0)
                const = 0
            parents, active = (b._index,), (1,)
            rules = self._rules1 or self._rules_of(active)
        elif a.__class__ is Batched or b.__class__ is Batched or \
                b.__class__ is tuple and batched_above(b, 0):
            return batched_call(self, (a, b), _NO_KWARGS)
        else:
            return self.call_positional(a, b)
        try:
            ans = self.call_positional(raw[0], raw[1])
        except (ValueError, TypeError) as e:
            raise _named(self, e) from e
        kept = ans
        if type(ans) is np.ndarray and self.keep and ans.size >= KEEP_MIN_SIZE:
            raw, kept = _apply_keep(self.keep, raw, ans, active)
        if const is not None:  # the node's copy of a plain array or key (_kept_constant)
            c = raw[const].__class__
            if c is tuple or c is list:
                raw = _kept_constant(ta, raw, const)
            elif self.reads_values and (c is np.ndarray or issubclass(c, np.ndarray)):
                raw = (ta.own_constant(raw[0]), raw[1]) if const == 0 else \
                    (raw[0], ta.own_constant(raw[1]))  # (inlined: the hot path)
        nodes = ta.nodes
        nodes.append((parents, rules, kept, raw, None, self))
        return Var(ans, ta, len(nodes) - 1)

    def _with_batched(self, a, b, k):
        """``self(a, b)`` where argument ``k`` is batched by a vmap above the
        other's tape (``beta * x`` in a vmapped item, ``beta`` differentiated).
        For an elementwise primitive whose traced operand has no more axes
        than an item, the arrays broadcast as the items do: this is the
        elementwise batching rule's result, without the general dispatch."""
        c = b if k else a
        if c.__class__ is Batched and self.batch is batching.elementwise:
            trace, v = c._trace, c._value
            if trace.open and trace.size and \
                    len((a if k else b).shape) < len(v.shape):
                return Batched(self._call2(a, v) if k else self._call2(v, b), trace)
        return batched_call(self, (a, b), _NO_KWARGS)

    def _other_operand(self, tape, raw, k):
        """The checks ``_call2`` makes on the untraced operand ``raw[k]`` when
        it is not a plain scalar: a masked array is refused, and ``None`` says
        a batched value above the tape must handle the call (vmap).  (The
        node keeps its own copy of a plain array, once the forward ran:
        ``_kept_constant``.)"""
        c = raw[k]
        if c.__class__ is Batched:
            return None if c._trace.level > tape.level else raw
        if (c.__class__ is tuple or c.__class__ is list) and batched_above(c, tape.level):
            return None  # an index key holding a per-item index (np.take's a[:, i])
        if c.__class__ not in _UNMASKED and isinstance(c, _MASKED):
            refuse_masked(c, self.name)
        return raw

    def _call(self, args, kwargs):
        batch = top_batch(args, kwargs)
        if batch is not None:  # a vmap level above every tape: its batching rule
            return batched_call(self, args, kwargs, batch)
        top = innermost_tape(args)
        if top is None:
            return self.fun(*args, **kwargs)
        raw = list(args)
        parents, active = [], []
        for i, a in enumerate(args):
            if a.__class__ is Var:
                if a._tape is top:
                    raw[i] = a._value
                    parents.append(a._index)
                    active.append(i)
                else:  # a constant here, traced by an enclosing level (var.held)
                    raw[i] = held(a)
            elif isinstance(a, _MASKED):
                refuse_masked(a, self.name)
        rules = self._rules_of(active)
        for k, v in kwargs.items():
            if v.__class__ is Var:
                raise TypeError(
                    f"tapestry: {self.name} got a traced array as keyword "
                    f"argument {k!r}; pass it positionally.")
        try:
            ans = self.fun(*raw, **kwargs)
        except (ValueError, TypeError) as e:
            raise _named(self, e) from e
        if isinstance(ans, _MASKED):  # a masked constant inside a list argument
            refuse_masked(ans, self.name)
        if self.n_outputs != 1:
            return record(top, ans, parents, rules, _kept_constants(top, raw, args, self),
                          _kept_keywords(top, kwargs) if kwargs else kwargs,
                          self.n_outputs, prim=self)
        kept = ans
        if self.keep and type(ans) is np.ndarray and ans.size >= KEEP_MIN_SIZE:
            raw, kept = _apply_keep(self.keep, raw, ans, active)
        if kwargs:
            kwargs = _kept_keywords(top, kwargs)
        return record(top, kept, parents, rules, _kept_constants(top, raw, args, self),
                      kwargs, value=ans, prim=self)


def _kept_constant(tape, raw, k):
    """``raw`` (a node's two arguments) with the plain array ``raw[k]``, or
    the arrays in the index key ``raw[k]``, replaced by the tape's copies
    (``Tape.own_constant``): the node's rules read them at the backward
    sweep, after the function may have written into them (``buf[:] = 7``
    after ``x * buf``; ``idx[:] = 0`` after ``x[idx]``)."""
    c = _own(tape, raw[k])
    return (c, raw[1]) if k == 0 else (raw[0], c)


def _own(tape, c):
    if isinstance(c, np.ndarray):
        return tape.own_constant(c)
    for a in c:  # a key: (idx, 0), (mask,), [rows, cols]
        if isinstance(a, np.ndarray):
            return c.__class__(tape.own_constant(a) if isinstance(a, np.ndarray) else a
                               for a in c)
    return c


def _kept_constants(tape, raw, args, prim):
    """:func:`_kept_constant` for every argument of a general call that is
    the caller's own plain array or key (``args[i]`` itself: a traced
    argument's value, or a stand-in of ``KEEP_*``, is not copied; nor is an
    array whose values the rules never read, ``Primitive.reads_values``)."""
    for i, a in enumerate(raw):
        if a is args[i] and (a.__class__ is tuple or a.__class__ is list or
                             prim.reads_values and isinstance(a, np.ndarray)):
            raw[i] = _own(tape, a)
    return raw


def _kept_keywords(tape, kwargs):
    """``kwargs`` with each plain array (``where=mask``) the tape's copy."""
    if not any(isinstance(v, np.ndarray) for v in kwargs.values()):
        return kwargs
    return {k: tape.own_constant(v) if isinstance(v, np.ndarray) else v
            for k, v in kwargs.items()}
_NO_KWARGS = {}
#: Masked arrays: values that skip masked entries, derivatives that would not.
_MASKED = np.ma.MaskedArray
#: Constant types checked without isinstance on the hot path.
_UNMASKED = frozenset({float, int, np.ndarray, np.float64, np.float32})
#: Operands that need no check at all: Python and NumPy scalars.
_SCALARS = frozenset({float, int, np.float64, np.float32})


def _dispatches(fun):
    """Whether NumPy's dispatch reaches tapestry when ``fun`` is called with
    traced arguments (a ufunc, or a function NumPy dispatches by NEP 18)."""
    return isinstance(fun, np.ufunc) or hasattr(fun, "_implementation")


def _reentering(prim, fun):
    """``fun`` as a primitive's forward that stays one operation at every
    nesting level.

    A primitive unwraps its own level only; under nested differentiation
    (``grad(grad(f))``, ``hessian``) its forward then receives values traced
    by the enclosing levels.  A NumPy function or ufunc dispatches those back
    to the registry; any other forward (a lambda, SciPy's Python wrappers, a
    user's function) would run on them as a black box, so here the forward
    calls the primitive again instead: each level records one node with the
    declared rules, and ``fun`` itself only sees plain values."""
    def forward(*args, **kwargs):
        rec, nested = None, False
        for a in args:
            c = a.__class__
            if c is Var or c is Batched or c is tuple and batched_above(a, 0):  # x[j], j batched
                return prim._call(args, kwargs)
            if c is Staged:
                rec = a._rec
            elif c is tuple or c is list:
                nested = True
        if rec is None and (nested or kwargs):  # a staged value in a list or a keyword
            rec = staged_recorder(args, kwargs)
        if rec is not None:  # inside jit: the forward is one step of the program
            return rec.call(fun, args, kwargs)
        return fun(*args, **kwargs)
    forward.__name__ = getattr(fun, "__name__", "forward")
    forward.__wrapped__ = fun
    return forward


def _named(prim, e):
    """The same error, saying which traced operation raised it."""
    msg = str(e)
    if msg.startswith("tapestry"):
        return e
    return type(e)(f"tapestry: {prim.name} failed on traced inputs: {msg}")


def record(tape, ans, parents, rules, args, kwargs, n_outputs=1, value=None,
           select_rule=None, prim=None):
    """Append a node to ``tape`` and return the traced result(s).

    The node layout, in one place: ``(parents, rules, ans, args, kwargs,
    prim)``: the tape positions of the active inputs, one VJP rule per
    active input (or a :class:`~tapestry.core.backward.JointRule`), what the
    rules read (``ans`` may be a stand-in, see ``KEEP_*``; ``value`` is then
    the traced result), and the :class:`Primitive` that made it (``None``
    for custom rules, parallel chunks and the select nodes below).  For an operation with several outputs, ``ans`` is a
    tuple; the node's cotangent is then a list (``None`` for outputs that
    got none) and each output is a one-parent "select" node that writes its
    slot.  ``select_rule(k, n)`` makes another kind of slot cotangent (any
    type with ``__accumulate_into__``; parallel_map's are dicts); its rule
    carries ``selects = k``, which forward mode reads (the output's tangent
    is slot ``k`` of the node's list of tangents).
    """
    nodes = tape.nodes
    nodes.append((parents, rules, ans, args, kwargs, prim))
    index = len(nodes) - 1
    if n_outputs == 1 and select_rule is None:
        return Var(ans if value is None else value, tape, index)
    outs = []
    n = len(ans)
    select_rule = select_rule or _select_rule
    for k in range(n):
        nodes.append(((index,), (select_rule(k, n),), ans[k], (), {}, None))
        outs.append(Var(ans[k], tape, len(nodes) - 1))
    return tuple(outs)


def _select_rule(k, n):
    def select_pullback(g, ans):
        ct = [None] * n
        ct[k] = g
        return ct
    select_pullback.selects = k
    return select_pullback


def implements(*funs):
    """Register ``impl`` for these NumPy functions or ufuncs: the one way a
    rule reaches NumPy's dispatch.  ``impl`` is a :class:`Primitive` or an
    entry point taking NumPy's own arguments that normalizes them and calls
    primitives.  Usable as a decorator or as ``implements(np.exp)(prim)``.
    Where it was called from is recorded (``registry.DECLARED``: the op
    table's module column, and the message when a rule is declared twice)."""
    site = declaration_site()

    def register_impl(impl):
        for f in funs:
            if isinstance(f, np.ufunc):
                register(UFUNCS, f, impl, site)
                if impl.__class__ is Primitive and impl.n_outputs == 1:
                    register(FAST_UFUNCS, f, impl, site)
            else:
                register(FUNCTIONS, f, impl, site)
        return impl
    return register_impl


def def_nondiff(*funs):
    """Declare functions piecewise constant (derivative zero almost
    everywhere): on traced inputs they run on the plain values."""
    register_nondiff(funs, declaration_site())


#: Code objects of functions that declare rules on their caller's behalf
#: (``defunary``, ``define``, ...): a declaration site is their caller's.
_HELPERS: set = set()


def declares_rules(helper):
    """Mark ``helper`` as a function that declares primitives or registers
    rules for its caller, so that the recorded site is the caller's line."""
    _HELPERS.add(helper.__code__)
    return helper


def declaration_site():
    """``(module, line)`` of the code declaring a rule: the first frame
    outside this module and outside the helpers marked with
    :func:`declares_rules`."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code in _HELPERS
                                 or frame.f_globals.get("__name__") == __name__):
        frame = frame.f_back
    if frame is None:
        return "?", 0
    return frame.f_globals.get("__name__", "?"), frame.f_lineno


def unbroadcast(g, shape):
    """Sum ``g`` over the axes that broadcasting added to reach ``shape``.

    The one place where NumPy broadcasting is undone; every binary rule goes
    through it.  Returns ``g`` unchanged (no copy) when shapes already match.
    The axes to sum are worked out once per pair of shapes, and a plain
    array is summed with one ``np.add.reduce`` (a 2x1 bias: 7.3 -> ~2 us).
    """
    gshape = g.shape
    if gshape == shape:
        return g
    if g.__class__ is Negated:
        g = g.value()
    axes = _UNBROADCAST.get((gshape, shape))
    if axes is None:
        axes = _unbroadcast_axes(gshape, shape)
    if type(g) is np.ndarray or g.__class__ is Staged:  # (jit: the same steps)
        if axes and axes[-1] == len(gshape) - 1:  # (a bias's axis 0 never is)
            s = batching.trailing_sum(g, axes)
            if s is not None:
                return np.reshape(s, shape)
        # (staged: the plain call's ufunc reduce, which a replay calls directly)
        return np.reshape(np.add.reduce(g, axis=axes), shape)
    return np.reshape(g.sum(axis=axes), shape)  # traced (higher derivatives) or other


_UNBROADCAST: dict = {}
#: Bound on the cache of shape pairs (a program has few distinct ones).
_UNBROADCAST_CACHE_SIZE = 4096


def _unbroadcast_axes(gshape, shape):
    """Axes of a ``gshape`` cotangent to sum for an input of ``shape``:
    the leading ones broadcasting added, and those where ``shape`` has 1."""
    extra = len(gshape) - len(shape)
    axes = tuple(range(extra)) + tuple(extra + i for i, n in enumerate(shape)
                                       if n == 1 and gshape[extra + i] != 1)
    if len(_UNBROADCAST) < _UNBROADCAST_CACHE_SIZE:
        _UNBROADCAST[(gshape, shape)] = axes
    return axes


def scale_cotangent(g, y):
    """``g * y``, skipping the pass when ``g`` is a broadcast 1 of ``y``'s
    shape and dtype -- the cotangent every ``sum`` hands its input -- in
    which case ``y`` itself is the answer (it is never written to: the
    engine only adds in place into buffers it allocated)."""
    if (type(g) is np.ndarray and g.size >= KEEP_MIN_SIZE and not any(g.strides)
            and (type(y) is np.ndarray or y.__class__ is Staged)  # (jit: staged y)
            and g.shape == y.shape and g.dtype == y.dtype):
        c = g.flat[0]
        if c == 1:
            return passed_on(y)
        if c == -1:
            return Negated(y)  # computed only if no other contribution comes
    elif (type(g) is np.ndarray and g.size >= KEEP_MIN_SIZE and type(y) is np.ndarray
          and g.strides[-1] == 0 and g.shape == y.shape and g.dtype == y.dtype
          and g.dtype.kind == "f" and _all_ones(g)):
        return passed_on(y)
    return g * y


def _all_ones(g):
    """Whether ``g``, broadcast along its trailing axes (a reduction's
    cotangent sent back over the reduced axes: every vmapped item's
    ``np.sum``, then summed), is 1 everywhere; reads only the array it
    broadcasts, one element per row.  ``1 * y`` is ``y``, bit for bit."""
    strides, k = g.strides, g.ndim
    while k and strides[k - 1] == 0:
        k -= 1
    if g.size < 2 * _prod(g.shape[:k]):  # (little broadcast: the product costs as much)
        return False
    base = g[(Ellipsis,) + (0,) * (g.ndim - k)]
    return bool((base == 1).all())


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def negate_cotangent(g):
    """``-g``; a broadcast constant (a sum's cotangent) stays a broadcast
    view instead of becoming a full array (one pass and one buffer saved),
    and a large plain array becomes a :class:`Negated` (computed only if no
    other contribution is added to it)."""
    if type(g) is np.ndarray and g.size >= KEEP_MIN_SIZE:
        if not any(g.strides):
            return np.broadcast_to(-g.flat[0], g.shape)
        return Negated(g)
    return -g


def dtype_of(x):
    """Dtype of an array, scalar or traced array."""
    d = getattr(x, "dtype", None)
    return np.result_type(x) if d is None else d
