"""User-defined derivative rules: ``custom_vjp`` (a reverse rule), ``custom_jvp``
(a forward rule, transposed for reverse mode) and ``checkpoint``."""
from __future__ import annotations

import functools
import inspect
import threading

import numpy as np

from . import rng, staged
from .api import vjp
from .backward import JointRule
from .forward import check_linear_in_cotangent, transposing
from .primitive import dtype_of, record, shape_of
from .pytree import _LEAF, StructureMismatch, child_key, match_leaves, tree_flatten
from .staged import Staged
from .tracing import of_leaves
from .var import Var, held_each, innermost_tape, traced_from


def _signature(fun):
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):  # builtins without a signature
        return None


def _positional(kind, name, sig, args, kwargs):
    """``args`` with keyword arguments (and then defaults) bound to positions,
    so that rules see every argument in one place (custom_vjp and custom_jvp
    share this, so both accept the same calls)."""
    if not kwargs:
        return _with_defaults(sig, args)
    if sig is None:
        raise TypeError(f"tapestry.{kind}: {name} has no signature to bind keyword "
                        "arguments to; pass them positionally.")
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"tapestry.{kind}: {name}: {e}") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"tapestry.{kind}: {name} takes keyword-only or **kwargs "
                        f"arguments ({sorted(bound.kwargs)}); {kind} functions need "
                        "every argument to have a position.")
    return bound.args


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _with_defaults(sig, args):
    """``args`` with the defaults of omitted positional parameters appended,
    as JAX binds them: ``f(x)`` for ``def f(x, y=2.0)`` gives the rules
    ``(x, 2.0)`` exactly as ``f(x=x)`` and ``f(x, 2.0)`` do (the rules saw one
    argument or two depending on how f was called, and nondiff_argnums
    pointing at an omitted default was refused)."""
    if sig is None:
        return args
    params = [q for q in sig.parameters.values() if q.kind in _POSITIONAL]
    rest = params[len(args):]
    if not rest or any(q.default is inspect.Parameter.empty for q in rest):
        return args  # nothing omitted, or a call that fun itself will refuse
    return tuple(args) + tuple(q.default for q in rest)


def _closure_error(kind, name, fix=""):
    return TypeError(
        f"tapestry.{kind}: {name} uses a value that is being differentiated but is not "
        "one of its arguments (it reads it from a closure, a global or an attribute). "
        "Its custom rule gives derivatives for its arguments only, so that value's "
        f"derivative cannot be computed. Pass the value to {name} as an argument{fix}.")


def dense_cotangent(g):
    """A sparse cotangent (``tapestry.sparse``) as the dense array that user
    rules expect (they may hand it to numba, torch or np.asarray)."""
    return g.todense() if hasattr(g, "todense") else g


def _batch_above_tapes(leaves):
    """The vmap trace that must handle a custom-rule call on ``leaves``: the
    highest level among them is a batched value, and something is being
    differentiated (inside a batched value: ``grad(vmap(f))``; or beside it:
    a shared parameter).  ``None`` otherwise: with nothing traced, the plain
    function on batched values is right."""
    from .batched import NESTED, Batched, top_batch
    trace = top_batch(leaves)
    if trace is None:
        return None
    traced = any(x.__class__ is Var or (x.__class__ is Batched and x._value.__class__ in NESTED)
                 for x in leaves)
    return trace if traced else None


def _batch_axes(args, trace):
    """Per-argument pytrees of in_axes (0 for the leaves batched by
    ``trace``, None for the others) and the arguments with those leaves'
    batch axes exposed (their values, batch axis first)."""
    from .batched import Batched
    from .pytree import tree_map
    is_b = lambda x: x.__class__ is Batched and x._trace is trace  # noqa: E731
    axes = tuple(tree_map(lambda x: 0 if is_b(x) else None, a) for a in args)
    raw = tuple(tree_map(lambda x: x._value if is_b(x) else x, a) for a in args)
    return axes, raw


def _rebatch(out, trace):
    """``vmap``'s outputs (batch axis first) as values batched by ``trace``."""
    from .batched import Batched
    from .pytree import tree_map
    return tree_map(lambda y: Batched(y, trace), out)


def _holds_batched(out, trace):
    """Whether ``out`` (a rule mapped over ``trace``'s batch, run on the
    values with their batch axes exposed) holds a value batched by ``trace``
    itself: the user's function read one from a closure, a global or an
    attribute instead of through its arguments, and the mapped call mixed
    that value's items with the batch it was given."""
    from .batched import Batched
    for x in tree_flatten(out)[0]:
        while x.__class__ is Var or x.__class__ is Batched:
            if x.__class__ is Batched and x._trace is trace:
                return True
            x = x._value
    return False


def _batch_traces(xs):
    """The vmap traces of the batched values in ``xs`` (through wrappers)."""
    from .batched import Batched
    found = set()
    for x in tree_flatten(list(xs))[0]:
        while x.__class__ is Var or x.__class__ is Batched:
            if x.__class__ is Batched:
                found.add(x._trace)
            x = x._value
    return found


def _batched_inside(xs, level, given=()):
    """Whether ``xs`` (what a rule run on values of the differentiation of
    ``level`` returned) hold a value batched by a vmap opened inside that
    differentiation (``grad(lambda w: vmap(g)(...))``) that did not come in
    with ``given`` (the rule's inputs: ``vmap(pullback)`` hands it batched
    cotangents): the rule got it from a closure.  Its item-by-item values
    would escape that vmap (a tangent of an unbatched output), or be read
    after it returned (a backward pass)."""
    allowed = _batch_traces(given)
    return any(t.level > level and t not in allowed for t in _batch_traces(xs))


def _inner_trace(traces, level, given=()):
    """The open vmap, among ``traces``, that runs inside the differentiation
    of ``level`` and whose values did not come in with ``given``: the one
    a custom rule read a per-item value of from a closure (the innermost if
    several), or None."""
    allowed = _batch_traces(given)
    found = [t for t in traces if t.level > level and t.open and t not in allowed]
    return max(found, key=lambda t: t.level) if found else None


def _held(f):
    """What ``f`` visibly holds: a ``functools.partial``'s bound arguments
    and its function's closure cells (empty cells skipped)."""
    held = []
    while isinstance(f, functools.partial):
        held += [f.args, f.keywords]
        f = f.func
    for cell in getattr(f, "__closure__", None) or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    return held


def _closure_traces(fns):
    """The vmap traces of the batched values that the functions ``fns`` (a
    custom function and its rules) visibly hold in their closure cells or a
    ``functools.partial``'s bound arguments: a cheap look before running, so
    that the vmap can still run the function item by item (the output
    checks stay for what the look misses)."""
    held = [v for f in fns for v in _held(f)]
    try:
        return _batch_traces(held)
    except Exception:  # noqa: BLE001  (an object that does not flatten: look no further)
        return set()


def _batched_closure_error(kind, name, fix, trace=None):
    """The refusal; with ``trace`` (the vmap whose per-item value was read,
    still running), that vmap runs its function once per item instead
    (:func:`~tapestry.core.api_vmap.vmap`), where the value is a constant."""
    err = _batched_closure_refusal(kind, name, fix)
    err.batch_trace = trace
    if trace is not None:  # (see batched.refusing)
        trace.refused, err.refused_by = err, trace
    return err


def _batched_closure_refusal(kind, name, fix):
    return TypeError(
        f"tapestry.{kind}: {name} uses a value batched by the enclosing vmap that is not "
        "one of its arguments (it reads it from a closure, a global or an attribute), "
        "and it is differentiated inside that vmap (grad, jvp or vjp of a function that "
        "calls vmap). Its rules are mapped over the batch through its arguments only, "
        f"so they cannot see that value item by item. Pass the value to {name} as an "
        f"argument{fix}.")


def _mapped_rule(rule, kind, name, fix, trace=None):
    """``rule`` run where a value it reads from a closure may be a batched
    value of a vmap that has returned (a backward pass after
    ``grad(vmap(...))``): the error above, which names the function and the
    fix, instead of the escaped-value error that names neither.  With
    ``trace``, the rule is mapped over that vmap's batch, and a result
    holding one of its values (read while it runs: ``jvp(vmap(...))``) is
    the same error."""
    from .batched import EscapedBatchError

    @functools.wraps(rule)
    def run(*args):
        try:
            out = rule(*args)
        except EscapedBatchError:
            raise _batched_closure_error(kind, name, fix) from None
        if trace is not None and _holds_batched(out, trace):
            raise _batched_closure_error(kind, name, fix)
        return out
    return run


_VJP_FIX = " (listed in nondiff_argnums if it is not differentiated)"


def _rule_watch(rule, also=(), slot=None):
    """What ``rule`` (a custom_vjp's bwd, a custom_jvp's rule) reads besides
    its arguments, to check before the backward pass runs it (``empty``
    where it reads nothing that can change), or ``None`` where it cannot be
    walked.  The walk is kept in ``slot`` (a :class:`_WatchSlot` of the
    custom_vjp, the custom_jvp, the checkpointed function: it lives as long
    as the rule) and reused while the bindings it followed are unchanged: a
    call costs an identity test per binding and a look at each array the
    rule reaches (:meth:`RuleWatch.take`)."""
    if slot is not None and slot.rule is rule and (slot.watch is False or slot.watch.still()):
        return slot.watch or None
    watch = staged.rule_watch(rule, also)
    if slot is not None:
        slot.rule, slot.watch = rule, False if watch is None else watch
    return watch


class _WatchSlot:
    """Where a custom rule's walk is kept (:func:`_rule_watch`): one object
    for the life of its owner, so the owner's attributes do not change
    with it, and without a ``__dict__``, so jit's walk of the owner does
    not look inside."""

    __slots__ = ("rule", "watch")

    def __init__(self):
        self.rule = self.watch = None

    def __reduce__(self):  # (pickled empty: the receiving process walks anew)
        return _WatchSlot, ()


def _slot_of(owner):
    """``owner``'s :class:`_WatchSlot` (made once: an unpickled one has none)."""
    slot = owner.__dict__.get("_rule_cache")
    if slot is None:
        slot = owner._rule_cache = _WatchSlot()
    return slot


def _without_rule_cache(obj):
    """``obj.__dict__`` for pickling, without the walk kept on it (it holds
    compiled checks, and the receiving process walks its own)."""
    state = dict(obj.__dict__)
    state.pop("_rule_cache", None)
    return state


class _Watched:
    """One call's watch: what its rule read at the end of the forward pass."""

    __slots__ = ("watch", "snaps")

    def __init__(self, watch):
        self.watch, self.snaps = watch, watch.take()

    def run(self, rule, refusal):
        """``rule()`` after checking that what it reads is as at the forward
        (``refusal(why)`` is raised otherwise); what it writes into itself is
        its workspace from then on."""
        why = self.watch.changed(self.snaps)
        if why is not None:
            raise refusal(why)
        out = rule()
        self.watch.note_writes(self.snaps)
        return out


def _stale_rule_error(kind, name, rule, why, fix):
    when = ("when the pullback is called" if kind == "custom_vjp" else
            "when the backward pass transposes it or a linearized function calls it")
    return RuntimeError(
        f"tapestry.{kind}({name}): its rule {getattr(rule, '__qualname__', rule)!r} runs "
        f"again after the forward pass ({when}) and reads state besides its arguments, "
        f"but {why} since the forward pass (by the caller, or by a later call of the "
        "function), so the rule would give the derivative at other values than the "
        "forward used. Pass that "
        f"state to {name} as an argument{fix}, or keep it unchanged until the backward "
        "pass has run.")


def _owned_tree(tree, top):
    """``tree`` with its plain arrays replaced by ``top``'s copies
    (``_own_constants``)."""
    leaves, td = tree_flatten(tree)
    if not any(x.__class__ is np.ndarray for x in leaves):
        return tree
    _own_constants(leaves, top, ())
    return td.unflatten(leaves)


def _unaliased(residuals, watch):
    """``residuals`` with the arrays the rules reach from their environment
    (``fwd`` returning a closed-over ``W``) replaced by copies: the backward
    pass then reads them as they were at the forward, whatever the caller
    does to ``W`` meanwhile."""
    if not watch.roots:
        return residuals
    leaves, td = tree_flatten(residuals)
    if not any(x.__class__ is np.ndarray and watch.aliases(x) for x in leaves):
        return residuals
    return td.unflatten([x.copy() if x.__class__ is np.ndarray and watch.aliases(x) else x
                         for x in leaves])


def _tapes_of(tree):
    return {x._tape for x in tree_flatten(tree)[0] if x.__class__ is Var}


class custom_vjp:
    """A function with a user-supplied reverse rule (``jax.custom_vjp``'s semantics).

    ::

        @tapestry.custom_vjp
        def f(x, y): ...
        def f_fwd(x, y): return f(x, y), residuals
        def f_bwd(residuals, out_bar): return (x_bar, y_bar)   # one per argument
        f.defvjp(f_fwd, f_bwd)

    Arguments and outputs may be pytrees; ``bwd`` returns one cotangent
    pytree (or ``None`` for zero) per positional argument, with that
    argument's structure (``None`` also stands for a zero subtree).  Keyword
    arguments are bound to their positions first (with them, defaults are
    filled in), so
    ``fwd`` receives them positionally and ``bwd`` returns one cotangent for
    them too.  ``nondiff_argnums`` (``functools.partial(custom_vjp,
    nondiff_argnums=(1,))`` or ``custom_vjp(nondiff_argnums=(1,))``) marks
    arguments that are not differentiated (flags, callables): ``bwd`` is
    then called as ``bwd(*nondiff_args, residuals, out_bar)`` and returns
    cotangents for the other arguments only.  The rule runs only when an
    argument is being differentiated; a cotangent of the wrong shape,
    dtype or structure is an error naming the function, the argument and
    the key path.

    ``out_bar`` is dense (plain arrays) unless ``sparse_cotangents=True``:
    then an output read through gathers (``f(x)[0]``) may hand ``bwd`` a
    ``tapestry.AxisSparse``.  The function must not use a value being
    differentiated other than through its arguments (a closure over one is
    an error: its rule could not give that value's gradient).  What ``bwd``
    reads besides its arguments (a closed-over array, a global, an
    attribute) must be as it was at the forward when the pullback runs it
    (checked, :func:`_rule_watch`: a change raises); array arguments and a
    closed-over array returned as a residual are the trace's own copies.
    """

    #: the custom_vjp whose ``fwd``/``bwd`` a call watches where it is not
    #: this one (the user's, for a call mapped over a vmap)
    _watched = None
    _rule_cache = None  # (see _rule_watch)

    def __getstate__(self):
        return _without_rule_cache(self)

    def __new__(cls, fun=None, nondiff_argnums=(), sparse_cotangents=False):
        if fun is None:  # custom_vjp(nondiff_argnums=...) used as a decorator
            return functools.partial(cls, nondiff_argnums=nondiff_argnums,
                                     sparse_cotangents=sparse_cotangents)
        return super().__new__(cls)

    def __getnewargs__(self):
        """Unpickling calls ``__new__`` with these: without ``fun`` it would
        return the decorator's ``partial`` (cloudpickle ships a custom_vjp
        defined in ``__main__`` by value to process and Dask workers)."""
        return (self.fun,)

    def __init__(self, fun, nondiff_argnums=(), sparse_cotangents=False):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd = None
        self.bwd = None
        self.sparse_cotangents = bool(sparse_cotangents)
        self.nondiff_argnums = tuple(sorted(set(
            (nondiff_argnums,) if isinstance(nondiff_argnums, int) else nondiff_argnums)))
        self._signature = _signature(fun)
        self._rule_cache = _WatchSlot()

    def defvjp(self, fwd, bwd):
        if not (callable(fwd) and callable(bwd)):
            raise TypeError(f"tapestry.custom_vjp: {self._name()}.defvjp(fwd, bwd) takes two "
                            "functions.")
        self.fwd, self.bwd = fwd, bwd
        return self

    def _name(self):
        return getattr(self, "__name__", repr(self.fun))

    def _positional(self, args, kwargs):
        return _positional("custom_vjp", self._name(), self._signature, args, kwargs)

    def _arg_name(self, i):
        if self._signature is not None:
            params = list(self._signature.parameters)
            if i < len(params):
                return f"argument {i} ({params[i]!r})"
        return f"argument {i}"

    def __call__(self, *args, **kwargs):
        args = self._positional(args, kwargs)
        nondiff = self.nondiff_argnums
        for i in nondiff:
            if not 0 <= i < len(args):
                raise ValueError(f"tapestry.custom_vjp: {self._name()} has nondiff_argnums="
                                 f"{nondiff} but was called with {len(args)} arguments.")
        diff = [i for i in range(len(args)) if i not in nondiff]
        trace = _batch_above_tapes(tree_flatten(list(args))[0])
        if trace is not None:
            return self._under_vmap(args, diff, trace)
        leaves, td = tree_flatten([args[i] for i in diff])
        top = innermost_tape(leaves if not nondiff else tree_flatten(list(args))[0])
        if top is None:
            return self._call_constant(args)
        if self.fwd is None:
            raise TypeError(f"tapestry.custom_vjp: {self._name()} has no rule; "
                            "call .defvjp(fwd, bwd) before differentiating it.")
        self._check_nondiff_constant(args, top)
        return self._record(args, diff, leaves, td, top)

    def _under_vmap(self, args, diff, trace):
        """The call inside a ``vmap`` that runs inside the differentiation:
        one custom_vjp of the whole batch, whose ``fun``, ``fwd`` and ``bwd``
        are the user's mapped over it (as JAX batches custom_vjp).  An
        argument shared by every item gets the sum of its items' cotangents."""
        from .api_vmap import vmap
        if self.fwd is None:
            raise TypeError(f"tapestry.custom_vjp: {self._name()} has no rule; "
                            "call .defvjp(fwd, bwd) before differentiating it.")
        if trace in _closure_traces((self.fun, self.fwd, self.bwd)):
            raise _batched_closure_error("custom_vjp", self._name(), _VJP_FIX, trace)
        axes, raw = _batch_axes(args, trace)
        nondiff_axes = tuple(axes[i] for i in self.nondiff_argnums)
        fwd_items, bwd_rule = _residuals_passed_through(self.fwd, self.bwd)
        bwd_items = _mapped_rule(vmap(bwd_rule, in_axes=nondiff_axes + (0, 0)),
                                 "custom_vjp", self._name(), _VJP_FIX, trace)
        primal_tds = [tree_flatten(raw[i])[1] for i in diff]

        def bwd(*a):
            cts = bwd_items(*a)
            cts = cts if isinstance(cts, tuple) else (cts,)
            if len(cts) != len(diff):
                return cts  # the check of the batched call names the mismatch
            return tuple(_sum_shared(c, td, axes[i]) for c, td, i in zip(cts, primal_tds, diff))

        batched = custom_vjp(vmap(self.fun, in_axes=axes), nondiff_argnums=self.nondiff_argnums)
        batched.__name__ = self._name()
        batched.defvjp(vmap(fwd_items, in_axes=axes), bwd)
        batched._watched = self._watched or self
        out = batched(*raw)
        if _holds_batched(out, trace):
            raise _batched_closure_error("custom_vjp", self._name(), _VJP_FIX, trace)
        return _rebatch(out, trace)

    def _call_constant(self, args):
        """``fun`` on constant arguments; a traced output then came from a
        closure, which the rule cannot differentiate (JAX refuses it too)."""
        out = self.fun(*args)
        if self.fwd is not None and traced_from(tree_flatten(out)[0], 0) is not None:
            raise _closure_error("custom_vjp", self._name(),
                                 " (and return its cotangent from bwd)")
        return out

    def _check_nondiff_constant(self, args, top):
        for i in self.nondiff_argnums:
            for x in tree_flatten(args[i])[0]:
                if x.__class__ is Var and x._tape is top:
                    raise TypeError(
                        f"tapestry.custom_vjp: {self._name()}'s {self._arg_name(i)} is in "
                        "nondiff_argnums but is being differentiated; remove it from "
                        "nondiff_argnums (and return its cotangent from bwd).")

    def _record(self, args, diff, leaves, td, top):
        """Run ``fwd`` on the plain values and record one node whose rule is ``bwd``."""
        active = [k for k, x in enumerate(leaves) if x.__class__ is Var and x._tape is top]
        raw = [x._value if x.__class__ is Var and x._tape is top else x
               for x in held_each(leaves, top)]
        _own_constants(raw, top, active)
        full = list(args)
        for i, a in zip(diff, td.unflatten(raw)):
            full[i] = a
        for i in self.nondiff_argnums:  # bwd reads them later too
            full[i] = _owned_tree(args[i], top)
        inner = _inner_trace(_closure_traces((self.fun, self.fwd, self.bwd)), top.level, full)
        if inner is not None:
            raise _batched_closure_error("custom_vjp", self._name(), _VJP_FIX, inner)
        # fwd gets the caller's arrays (and the tape's values): one it writes
        # into is a copy of its own, as the traced x *= 2 rebinds x
        flat, ftd = tree_flatten(full)
        pair = _forward_untouched(lambda *r: self.fwd(*ftd.unflatten(list(r))), flat)
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(f"tapestry.custom_vjp: the forward rule of {self._name()} must "
                            "return a pair (output, residuals), got "
                            f"{type(pair).__name__}.")
        out, residuals = pair
        out_leaves, out_td = tree_flatten(out)
        if traced_from(out_leaves + tree_flatten(residuals)[0], top.level) is not None:
            raise _closure_error("custom_vjp", self._name(),
                                 " (and return its cotangent from bwd)")
        if _batched_inside(out_leaves + tree_flatten(residuals)[0], top.level, full):
            raise _batched_closure_error("custom_vjp", self._name(), _VJP_FIX, _inner_trace(
                _batch_traces(out_leaves + tree_flatten(residuals)[0]), top.level, full))
        n_out = len(out_leaves)
        nondiff_vals = [full[i] for i in self.nondiff_argnums]
        primals = [(i, tree_flatten(full[i])) for i in diff]
        sparse_ok = self.sparse_cotangents
        owner = self._watched or self
        bwd_rule = owner.bwd
        watch = _rule_watch(bwd_rule, (owner.fwd,), _slot_of(owner))
        if watch is not None:
            residuals = _unaliased(residuals, watch)
        watched = None if watch is None or watch.empty else _Watched(watch)

        def custom_pullback(g, ans):
            if n_out == 1:
                g = [g]
            g = [np.zeros(shape_of(a), dtype_of(a)) if c is None
                 else c if sparse_ok else dense_cotangent(c) for a, c in zip(ans, g)]
            bwd = _mapped_rule(self.bwd, "custom_vjp", self._name(), _VJP_FIX)
            if any(transposing(c) for c in g):  # forward mode: g are placeholders
                check_linear_in_cotangent(
                    lambda gs: _residuals_untouched(
                        lambda res: bwd(*nondiff_vals, res, out_td.unflatten(gs)), residuals),
                    g, f"custom_vjp function {self._name()!r}")
            run = lambda: _residuals_untouched(  # noqa: E731
                lambda res: bwd(*nondiff_vals, res, out_td.unflatten(g)), residuals)
            cts = run() if watched is None else watched.run(run, lambda why: _stale_rule_error(
                "custom_vjp", self._name(), bwd_rule, why,
                _VJP_FIX + " or return a copy of it from fwd as a residual"))
            flat = self._check_cotangents(cts, primals, top.level, _tapes_of(g))
            if _batched_inside([c for c in flat if c is not None], top.level,
                               (g, residuals, nondiff_vals)):
                raise _batched_closure_error("custom_vjp", self._name(), _VJP_FIX)
            return [flat[k] for k in active]

        parents = [leaves[k]._index for k in active]
        ans = tuple(out_leaves)
        rule = (lambda g, a: custom_pullback(g, (a,))) if n_out == 1 else custom_pullback
        if n_out == 1:
            outs = (record(top, ans[0], parents, JointRule(rule), (), {}),)
        else:
            outs = record(top, ans, parents, JointRule(rule), (), {}, n_out)
        return out_td.unflatten(list(outs))

    def _check_cotangents(self, cts, primals, level, allowed):
        """Flat cotangent leaves of the differentiated arguments, checked
        against the primals' structures (containers and keys, not just the
        leaf count), shapes and dtypes."""
        if not isinstance(cts, tuple):  # a list is one cotangent (of a list argument)
            cts = (cts,)
        if len(cts) != len(primals):
            raise ValueError(f"tapestry.custom_vjp: the backward rule of {self._name()} "
                             f"returned {len(cts)} cotangents for {len(primals)} "
                             "differentiable arguments; return a tuple with one "
                             "cotangent (or None) per argument not in nondiff_argnums.")
        flat = []
        for (i, (p_leaves, p_td)), c in zip(primals, cts):
            c_leaves = []
            try:
                match_leaves(p_td.node, c, "", c_leaves)
            except StructureMismatch as e:
                at = f" at {e.where}" if e.where else ""
                raise ValueError(
                    f"tapestry.custom_vjp: the backward rule of {self._name()} returned a "
                    f"cotangent whose structure does not match {self._arg_name(i)}{at}: "
                    f"expected {e.expected}, got {e.got} (argument structure {p_td}). "
                    "Return the argument's structure, with None for zero parts."
                ) from None
            paths = _key_paths(p_td.node, "")
            for p, ct, where in zip(p_leaves, c_leaves, paths):
                if ct is not None:
                    self._check_leaf(i, where, p, ct, level, allowed)
            flat.extend(c_leaves)
        return flat

    def _check_leaf(self, i, where, p, ct, level, allowed):
        what = f"{self._arg_name(i)}{f' at {where}' if where else ''}"
        if np.shape(ct) != np.shape(p):
            raise ValueError(
                f"tapestry.custom_vjp: the backward rule of {self._name()} returned "
                f"a cotangent of shape {np.shape(ct)} for {what}, whose shape is "
                f"{np.shape(p)}.")
        dt = np.result_type(_unwrapped(ct))
        if dt.kind not in "iufc":
            raise TypeError(
                f"tapestry.custom_vjp: the backward rule of {self._name()} returned "
                f"a cotangent of dtype {dt} for {what} (dtype {np.result_type(_unwrapped(p))}); "
                "cotangents are float (or complex) arrays.")
        if traced_from([ct], level, allowed) is not None:
            raise _closure_error("custom_vjp", self._name(),
                                 " (and return its cotangent from bwd); its backward "
                                 f"rule returned a traced value for {what}")


def _array_like(v):
    from .batched import Batched, Unbatched
    from .staged import Staged
    return v.__class__ in (Var, Batched, Unbatched, Staged) \
        or isinstance(v, (np.ndarray, np.generic)) or hasattr(v, "todense")


def _residuals_passed_through(fwd, bwd):
    """``fwd`` and ``bwd`` for mapping over a batch, with the residuals that
    are not arrays (a string, a callable, a Python number, a shape, an
    object) kept aside and handed to ``bwd`` as they were: ``vmap`` returns
    only arrays, and would stack a number or refuse an object, where the
    plain rule (and a loop over the items) gets them as ``fwd`` made them.  The mapped ``fwd`` runs once
    for the whole batch, so such a value is every item's (Python cannot make
    one per item)."""
    kept = {}

    def fwd_items(*args):
        out, residuals = fwd(*args)
        leaves, td = tree_flatten(residuals)
        kept["td"] = td
        kept["objects"] = {k: v for k, v in enumerate(leaves) if not _array_like(v)}
        return out, [v for k, v in enumerate(leaves) if k not in kept["objects"]]

    def bwd_rule(*args):
        *nondiff, arrays, g = args
        it = iter(arrays)
        objects = kept["objects"]
        leaves = [objects[k] if k in objects else next(it) for k in range(kept["td"].n_leaves)]
        return bwd(*nondiff, kept["td"].unflatten(leaves), g)
    return fwd_items, bwd_rule


def _sum_shared(c, td, axes):
    """A mapped ``bwd``'s cotangent for one argument (batch axis first), with
    the leaves that every item shares (in_axes None) summed over the items."""
    if c is None:
        return None
    leaves = []
    try:
        match_leaves(td.node, c, "", leaves)
    except StructureMismatch:
        return c  # the check of the batched call reports it
    ax = tree_flatten(axes, is_leaf=lambda x: x is None)[0]
    return td.unflatten([None if ct is None else ct if a is not None else ct.sum(axis=0)
                         for ct, a in zip(leaves, ax)])


def _unwrapped(x):
    while x.__class__ is Var:
        x = x._value
    return x.dtype if hasattr(x, "todense") else x


def checkpoint(f):
    """``f`` that stores only its inputs; its backward pass reruns ``f`` on a
    child tape.  Trades one extra forward for the memory of intermediates.

    Only traced (differentiated) leaves of the arguments are replaced in the
    rerun; everything else -- ints, bools, strings, callables, index arrays,
    constants -- is passed through as it was (static, as in JAX).  A call
    whose ``f`` reads a value being differentiated from a closure is
    recorded as an ordinary call instead (exact derivatives, including the
    closed-over value's, but no memory saved for that call; pass such
    values as arguments to checkpoint them).  The rerun sees the random
    numbers of the first run: NumPy's global state and any generator among
    the arguments are replayed (:mod:`tapestry.core.rng`; a generator
    captured in a closure is not).  What ``f`` reads besides its arguments
    must be as it was at the forward when the backward pass runs it again
    (checked: a changed global, closure or attribute raises).  ``f`` may
    write into its arguments (``x *= 2``): its forward runs on read-only
    views (staged values under jit: read-only slots) and, if it writes, on
    copies, as its traced recompute sees them."""
    @functools.wraps(f)
    def checkpointed(*args, **kwargs):
        leaves, td = tree_flatten((args, kwargs))
        trace = _batch_above_tapes(leaves)
        if trace is not None:  # inside a vmap inside the differentiation
            from .api_vmap import vmap
            axes, raw = _batch_axes(args, trace)
            g = functools.partial(f, **kwargs) if kwargs else f
            snapshot = rng.capture(leaves)
            out = checkpoint(vmap(g, in_axes=axes))(*raw)
            if _holds_batched(out, trace):  # f reads a batched value from a closure:
                with rng.replay(snapshot, leaves):  # an ordinary call, as for a traced one
                    return f(*args, **kwargs)
            return _rebatch(out, trace)
        top = innermost_tape(leaves)
        if top is None:
            if _in_forward():  # inside an enclosing checkpoint's forward
                return _forward_untouched(lambda *r: _called(f, td, r), leaves)
            return f(*args, **kwargs)
        return _checkpoint_call(f, leaves, td, top, slot)
    slot = _WatchSlot()
    return checkpointed


#: ``depth``: how many checkpoints are running their function's forward on
#: plain values in this thread (:func:`_checkpoint_call`).  A checkpoint
#: called there gets plain values too, and runs its function as its traced
#: call in the recompute will: unable to write into its arguments (traced,
#: ``x *= 2`` rebinds ``x``), so the enclosing forward computes what the
#: recompute does.
_IN_FORWARD = threading.local()


def _in_forward():
    """Whether a checkpoint's forward runs in this thread (a function: the
    checkpointed wrapper, shipped to workers by value, names no thread-local)."""
    return getattr(_IN_FORWARD, "depth", 0) > 0


def _called(f, td, leaves):
    a, kw = td.unflatten(list(leaves))
    return f(*a, **kw)


def _own_constants(raw, top, traced):
    """The caller's plain arrays among ``raw`` (other than the ``traced``
    positions) replaced by the tape's copies (``Tape.own_constant``): the
    rules (a checkpoint's recompute, bwd's residuals) read them at the
    backward sweep, after the function (``c[:] = 0`` after the call) or,
    for a kept trace (vjp), the caller may have written into them."""
    for k, x in enumerate(raw):
        if x.__class__ is np.ndarray and k not in traced:
            raw[k] = top.own_constant(x)


def _captures_traced(f, level):
    """Whether ``f``'s closure cells (or a ``functools.partial``'s bound
    arguments) visibly hold a value traced at ``level`` or above.  Lets a
    checkpoint over such a closure skip the plain run that would otherwise
    reveal it (a cheap look, not a proof: the output check stays)."""
    try:
        return traced_from(tree_flatten(_held(f))[0], level) is not None
    except Exception:  # noqa: BLE001  (an object that does not flatten: look no further)
        return False


def _checkpoint_call(f, leaves, td, top, slot=None):
    """Run ``f`` on the plain values of ``top``'s leaves and record one node
    whose rule reruns it under ``vjp``; fall back to an ordinary traced call
    when the output shows that ``f`` read a traced value of ``top`` (or of an
    inner tape) other than through its arguments."""
    live = [k for k, x in enumerate(leaves) if x.__class__ is Var and x._tape is top]
    raw = held_each(leaves, top)
    for k in live:
        raw[k] = leaves[k]._value
    _own_constants(raw, top, live)
    if _captures_traced(f, top.level):  # known before running: record it as it is
        a, kw = td.unflatten(leaves)
        return f(*a, **kw)
    snapshot = rng.capture(leaves)  # the recompute must draw the same numbers
    state = state_watch(f, slot)  # ... from the same state

    f_raw = of_leaves(f, td, raw, live)
    _IN_FORWARD.depth = getattr(_IN_FORWARD, "depth", 0) + 1
    try:
        out = _forward_untouched(f_raw, [raw[k] for k in live])
    finally:
        _IN_FORWARD.depth -= 1
    out_leaves, out_td = tree_flatten(out)
    if traced_from(out_leaves, top.level) is not None \
            or _batched_inside(out_leaves, top.level, raw):
        # a closure over a traced value, or over a value batched inside the
        # differentiation (its recompute would run after that vmap returned)
        with rng.replay(snapshot, leaves):
            a, kw = td.unflatten(leaves)
            return f(*a, **kw)
    n_out = len(out_leaves)

    def checkpoint_pullback(g, ans):
        if n_out == 1:
            g = [g]
        check_same_state(state, f)
        with rng.replay(snapshot, leaves):
            again, pullback = vjp(f_raw, *[raw[k] for k in live])
        _check_same_run(again, out_leaves, f)
        # an output without a cotangent adds nothing, as without checkpoint
        # (a zero cotangent through the rules may give -0.0 where that gives 0.0)
        return list(pullback.given(list(g)))

    parents = [leaves[k]._index for k in live]
    ans = tuple(out_leaves)
    if n_out == 1:
        outs = (record(top, ans[0], parents, JointRule(
            lambda g, a: checkpoint_pullback(g, (a,))), (), {}),)
    else:
        outs = record(top, ans, parents, JointRule(checkpoint_pullback), (), {}, n_out)
    return out_td.unflatten(list(outs))


def _forward_untouched(f_raw, values):
    """``f_raw(*values)``, run so that it cannot write into the caller's
    arrays: traced, ``x *= 2`` in ``f`` rebinds ``x``, while run on the plain
    arrays it would change the caller's (and the recompute would then start
    from other values). The arrays go in read-only; if ``f`` writes into one,
    it runs again on copies of its own, which is what the traced ``f`` sees."""
    shown = [_read_only(v) for v in values]
    in_jit = [v for v in shown if v.__class__ is Staged]
    try:
        if in_jit:  # (jit's staged arrays: read-only slots)
            with staged.read_only_slots(in_jit):
                out = f_raw(*shown)
        else:
            out = f_raw(*shown)
    except ValueError as e:
        if "read-only" not in str(e):
            raise
        return f_raw(*[_copied(v) for v in values])
    # an argument handed back as it is stays the caller's array (writable)
    back = {id(r): v for r, v in zip(shown, values) if r is not v}
    if back:
        out_leaves, out_td = tree_flatten(out)
        out = out_td.unflatten([back.get(id(o), o) for o in out_leaves])
    return out


def _residuals_untouched(rule, residuals):
    """``rule(residuals)`` for a custom_vjp's bwd, run so that it cannot
    write into them: a residual may be the caller's own array (``fwd``
    returning ``x``), and the pullback of a ``vjp`` may run again on the same
    residuals.  As for checkpoint's forward, a bwd that writes into one runs
    again on copies of its own."""
    leaves, td = tree_flatten(residuals)
    return _forward_untouched(lambda *r: rule(td.unflatten(list(r))), leaves)


def _read_only(v):
    """``v`` as its function may see it without writing into it: a plain
    array as a read-only view; a value staged by a jit trace that gave up
    recording (the function runs on the values) as its value's read-only
    view; one being recorded as it is (:func:`staged.read_only_slots`)."""
    if v.__class__ is Staged and v._rec.refused is not None:
        v = v._value
    if v.__class__ is not np.ndarray or not v.flags.writeable:
        return v
    r = v.view()
    r.flags.writeable = False
    return r


def _copied(v):
    """A copy of an array (plain or staged) for a function that writes into it."""
    if v.__class__ is np.ndarray:
        return np.array(v, copy=True)
    if v.__class__ is Staged and v._value.__class__ is np.ndarray:
        return np.copy(v)
    return v


def state_watch(f, slot=None):
    """What ``f`` reads besides its arguments, at the forward of a function
    that the backward pass runs again (checkpoint; parallel_map on
    processes): the bindings it follows by identity, counters and lists
    included, and the arrays it reaches by content (``W *= 2`` rebinds
    nothing), one copy shared while they stay unchanged (:func:`_rule_watch`)."""
    content = _rule_watch(f, (), slot)
    return (staged.watched_environment(f),
            None if content is None or not content.arrays else _Watched(content))


_AGAIN_FIX = {
    "checkpoint": "or do not checkpoint it",
    "parallel_map": "or use threads (executor='threads'), whose chunks keep their tapes",
}


def check_same_state(state, f, kind="checkpoint"):
    """Refuse a recompute that would start from other state than the
    forward did: ``f`` read something (a global, a closed-over counter,
    list or array, an object's attribute) that was rebound or changed since,
    by ``f`` itself or by the caller.  Its value check cannot see a change
    that moves only the gradient (a counter choosing a straight-through
    mask, an array of them): the backward pass would differentiate another
    function than the one whose value was returned."""
    watch, content = state
    why = None if watch is None else watch.changed()
    if why is None and content is not None:
        why = content.watch.changed(content.snaps)
    if why is not None:
        raise RuntimeError(
            f"tapestry.{kind}({getattr(f, '__qualname__', 'f')}): the backward pass runs "
            f"it again, but {why} since the forward pass, so the gradient would be another "
            "function's than the value's. Pass that state as an argument (or keep it "
            f"unchanged until the backward pass), {_AGAIN_FIX[kind]}.")


def _check_same_run(again, out_leaves, f):
    """Refuse a recompute whose outputs are not the forward's: the gradient
    would belong to another function than the value returned (``f`` drew
    from a generator in its closure, which is not replayed, or changed
    state it reads).  Rounding may differ (a threaded BLAS): 1e-12 of
    the output's largest value is let pass."""
    for a, b in zip(tree_flatten(again)[0], out_leaves):
        if not (isinstance(a, (np.ndarray, np.generic, float)) and
                isinstance(b, (np.ndarray, np.generic, float))):
            continue  # (traced by an enclosing level: a derivative of the pullback)
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.kind not in "fc":
            continue
        d = np.abs(a - b)
        scale = np.max(np.abs(b), initial=0.0, where=np.isfinite(b))
        same_nan = np.array_equal(np.isnan(a), np.isnan(b))
        with np.errstate(invalid="ignore"):
            close = np.all((d <= 1e-12 * scale) | (a == b) | np.isnan(d))
        if not (same_nan and close):
            raise RuntimeError(
                f"tapestry.checkpoint({getattr(f, '__qualname__', 'f')}): running it again for "
                "the backward pass gave another value than the forward: it draws random "
                "numbers from a generator it closes over (only the global np.random state and "
                "generators passed as arguments are replayed) or changes state it reads. "
                "Pass the generator (or the state) as an argument, or do not checkpoint it.")


class custom_jvp:
    """A function with a user-supplied forward rule (like ``jax.custom_jvp``)::

        @tapestry.custom_jvp
        def f(x, y): ...

        @f.defjvp
        def f_jvp(primals, tangents):        # tuples, one entry per argument
            x, y = primals; tx, ty = tangents
            return f(x, y), tangent_out        # tangent_out linear in the tangents

    Forward mode calls the rule; reverse mode transposes it (the map
    ``tangents -> tangent_out`` is linear, so its VJP is the reverse rule),
    so ``grad``, ``jvp`` and Hessians all use it.  Tangents of arguments
    that are not differentiated are passed as zeros; arguments that are not
    numbers or arrays (strings, callables, ``None``) are static and get the
    tangent ``None``.  Keyword arguments are bound to their positions, as
    for ``custom_vjp``.  The function must not use a value being
    differentiated other than through its arguments (its rule could not
    give that value's derivative): that is an error.  The backward pass
    (and a ``linearize`` function) runs the rule again later: what it reads
    besides its arguments must be as it was at the forward (checked, as for
    custom_vjp's ``bwd``).

    ``nondiff_argnums`` (as for ``jax.custom_jvp``) names arguments that are
    never differentiated (an activation's name, a tolerance, a callable):
    the rule then takes them first, ``jvp(*nondiff, primals, tangents)``,
    and ``primals``/``tangents`` hold the other arguments only.
    """

    #: the custom_jvp whose rule a call watches where it is not this one
    #: (the user's, for a call with nondiff_argnums or mapped over a vmap)
    _watched = None
    _rule_cache = None  # (see _rule_watch)

    def __getstate__(self):
        return _without_rule_cache(self)

    def __new__(cls, fun=None, nondiff_argnums=()):
        if fun is None:  # custom_jvp(nondiff_argnums=...) used as a decorator
            return functools.partial(cls, nondiff_argnums=nondiff_argnums)
        return super().__new__(cls)

    def __getnewargs__(self):
        """Unpickling calls ``__new__`` with these (see custom_vjp)."""
        return (self.fun,)

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.jvp = None
        self.nondiff_argnums = tuple(sorted(set(
            (nondiff_argnums,) if isinstance(nondiff_argnums, int) else nondiff_argnums)))
        self._signature = _signature(fun)
        self._rule_cache = _WatchSlot()

    def defjvp(self, jvp):
        self.jvp = jvp
        return jvp

    def _name(self):
        return getattr(self, "__name__", repr(self.fun))

    def __call__(self, *args, **kwargs):
        args = _positional("custom_jvp", self._name(), self._signature, args, kwargs)
        if self.nondiff_argnums:
            return self._with_nondiff(args)
        leaves, td = tree_flatten(list(args))
        trace = _batch_above_tapes(leaves)
        if trace is not None:
            return self._under_vmap(args, trace)
        top = innermost_tape(leaves)
        if top is None:
            out = self.fun(*args)
            if self.jvp is not None and traced_from(tree_flatten(out)[0], 0) is not None:
                raise _closure_error("custom_jvp", self._name())
            return out
        if self.jvp is None:
            raise TypeError(f"tapestry.custom_jvp: {self._name()} has no rule; "
                            "define it with @f.defjvp before differentiating it.")
        active = [k for k, x in enumerate(leaves) if x.__class__ is Var and x._tape is top]
        raw = list(leaves)
        for k in active:
            raw[k] = leaves[k]._value
        _own_constants(raw, top, active)  # the transposed rule reads them later
        inner = _inner_trace(_closure_traces((self.fun, self.jvp)), top.level, raw)
        if inner is not None:
            raise _batched_closure_error("custom_jvp", self._name(), "", inner)
        out = self._primal(td.unflatten(raw))
        out_leaves, out_td = tree_flatten(out)
        if traced_from(out_leaves, top.level) is not None:
            raise _closure_error("custom_jvp", self._name())
        if _batched_inside(out_leaves, top.level, raw):
            raise _batched_closure_error("custom_jvp", self._name(), "", _inner_trace(
                _batch_traces(out_leaves), top.level, raw))
        owner = self._watched or self
        watch = _rule_watch(owner.jvp, (), _slot_of(owner))
        tangent_of = _CustomTangent(self, raw, td, active, out_leaves, out_td, top.level,
                                    None if watch is None or watch.empty else _Watched(watch))

        def custom_jvp_pullback(g, ans):
            return tangent_of.pullback(g, ans)
        custom_jvp_pullback.custom_jvp = tangent_of  # node_tangent calls the rule itself
        parents = [leaves[k]._index for k in active]
        if len(out_leaves) == 1:
            outs = [record(top, out_leaves[0], parents, JointRule(custom_jvp_pullback), (), {})]
        else:
            outs = list(record(top, tuple(out_leaves), parents, JointRule(custom_jvp_pullback),
                               (), {}, len(out_leaves)))
        return out_td.unflatten(outs)


    def _primal(self, args):
        """The primal output for the innermost tape's plain values ``args``.
        Where they are still traced by an outer differentiation (hessian,
        grad of grad), it is this custom_jvp's call again, so the outer level
        differentiates it with the rule too, as JAX does: ``self.fun`` there
        would give the outer level ``fun``'s own derivative (0 for a
        straight-through ``np.round``)."""
        if any(x.__class__ is Var for x in tree_flatten(list(args))[0]):
            return self(*args)
        leaves, td = tree_flatten(list(args))  # traced, fun's x *= 2 rebinds x
        return _forward_untouched(lambda *r: self.fun(*td.unflatten(list(r))), leaves)

    def _with_nondiff(self, args):
        """The call with ``nondiff_argnums``: a custom_jvp of the other
        arguments whose function and rule see the nondiff ones as constants
        (a traced one is refused: its derivative would be dropped)."""
        bad = [i for i in self.nondiff_argnums if i >= len(args)]
        if bad:
            raise TypeError(f"tapestry.custom_jvp: {self._name()} has nondiff_argnums "
                            f"{self.nondiff_argnums} but was called with {len(args)} "
                            "argument(s).")
        from .batched import Batched
        for i in self.nondiff_argnums:
            if any(x.__class__ in (Var, Batched) for x in tree_flatten(args[i])[0]):
                raise TypeError(
                    f"tapestry.custom_jvp: argument {i} of {self._name()} is in "
                    "nondiff_argnums but is a traced (differentiated or vmapped) value; "
                    "remove it from nondiff_argnums and give its tangent in the rule.")
        nd = [args[i] for i in self.nondiff_argnums]
        keep = [i for i in range(len(args)) if i not in self.nondiff_argnums]

        def full(diff):
            out = list(args)
            for i, a in zip(keep, diff):
                out[i] = a
            return out

        top = innermost_tape([x for i in keep for x in tree_flatten(args[i])[0]])
        if top is not None:  # the transposed rule reads them later
            nd = [_owned_tree(a, top) for a in nd]
        inner = custom_jvp(lambda *diff: self.fun(*full(diff)))
        inner.__name__ = self._name()
        inner._watched = self._watched or self
        if self.jvp is not None:
            inner.defjvp(lambda primals, tangents: self.jvp(*nd, primals, tangents))
        return inner(*[args[i] for i in keep])

    def _under_vmap(self, args, trace):
        """The call inside a ``vmap`` that runs inside the differentiation:
        one custom_jvp of the whole batch whose ``fun`` and rule are the
        user's mapped over it (as JAX batches custom_jvp)."""
        from .api_vmap import vmap
        axes, raw = _batch_axes(args, trace)
        if self.jvp is None:
            raise TypeError(f"tapestry.custom_jvp: {self._name()} has no rule; "
                            "define it with @f.defjvp before differentiating it.")
        if trace in _closure_traces((self.fun, self.jvp)):
            raise _batched_closure_error("custom_jvp", self._name(), "", trace)
        batched = custom_jvp(vmap(self.fun, in_axes=axes))
        batched.__name__ = self._name()
        batched._watched = self._watched or self
        batched.defjvp(_mapped_rule(vmap(self.jvp, in_axes=(axes, axes)), "custom_jvp",
                                    self._name(), "", trace))
        out = batched(*raw)
        if _holds_batched(out, trace):
            raise _batched_closure_error("custom_jvp", self._name(), "", trace)
        return _rebatch(out, trace)


def _zero_tangent(x):
    """The tangent of an argument leaf that is not differentiated: zeros for
    numbers and arrays, ``None`` for static leaves (strings, callables).  A
    leaf batched by a ``vmap`` inside the differentiation (``vmap(hessian(f))``
    with an argument not differentiated) is an array too: its item's zeros;
    so is vmap's proxy for an array shared by every item (``in_axes=None``)."""
    from .batched import Batched, Unbatched
    if x.__class__ in (Var, Batched, Unbatched) \
            or isinstance(x, (np.ndarray, np.generic, int, float, complex)):
        return np.zeros(shape_of(x), dtype_of(x))
    return None


class _CustomTangent:
    """The rule of one custom_jvp call: its tangent map and the transpose."""

    def __init__(self, cj, raw, td, active, out_leaves, out_td, level, watched=None):
        self.cj, self.raw, self.td, self.active = cj, raw, td, active
        self.out_leaves, self.out_td, self.n_out = out_leaves, out_td, len(out_leaves)
        self.level = level
        #: what the rule reads besides its arguments, as at the forward
        #: (:class:`_Watched`): the backward pass runs it later
        self.watched = watched

    def tangent(self, ts):
        """Output tangent(s) for active-leaf tangents ``ts`` (None: zero)."""
        full = [_zero_tangent(x) for x in self.raw]
        for k, t in zip(self.active, ts):
            if t is not None:
                full[k] = t
        rule = _mapped_rule(self.cj.jvp, "custom_jvp", self.cj._name(), "")
        tangents = tuple(self.td.unflatten(full))
        # the primals are the caller's arrays: a rule writing into one gets copies
        run = lambda: _forward_untouched(  # noqa: E731
            lambda *r: rule(tuple(self.td.unflatten(list(r))), tangents), list(self.raw))
        w = self.watched
        pair = run() if w is None else w.run(run, lambda why: _stale_rule_error(
            "custom_jvp", self.cj._name(), (self.cj._watched or self.cj).jvp, why, ""))
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise TypeError(f"tapestry.custom_jvp: the rule of {self.cj._name()} must return "
                            "a pair (primal_out, tangent_out), got "
                            + (f"{len(pair)} values." if isinstance(pair, (tuple, list))
                               else f"a {type(pair).__name__}."))
        t_out = pair[1]
        leaves = []
        try:
            match_leaves(self.out_td.node, t_out, "", leaves)
        except StructureMismatch as e:
            at = f" at {e.where}" if e.where else ""
            raise ValueError(f"tapestry.custom_jvp: the rule of {self.cj._name()} returned "
                             f"a tangent whose structure does not match the output{at}: "
                             f"expected {e.expected}, got {e.got} (output structure "
                             f"{self.out_td}).") from None
        paths = _key_paths(self.out_td.node, "")
        leaves = [np.zeros(shape_of(a), dtype_of(a)) if t is None else self._checked(a, t, w)
                  for a, t, w in zip(self.out_leaves, leaves, paths)]
        if traced_from(leaves, self.level, _tapes_of(ts)) is not None:
            raise _closure_error("custom_jvp", self.cj._name(),
                                 "; its rule returned a tangent traced through it")
        if _batched_inside(leaves, self.level, (ts, self.raw)):
            raise _batched_closure_error("custom_jvp", self.cj._name(), "")
        return leaves[0] if self.n_out == 1 else list(leaves)

    def _checked(self, y, t, where):
        """The rule's tangent ``t`` for output leaf ``y``, checked: the
        output's shape (a scalar or a broadcastable shape would be taken as
        the tangent of the whole output, silently: jacfwd's columns, the
        transposed rule's cotangent), a real tangent for a real output, in
        the output's precision (an integer or float64 tangent of a float32
        output is cast, as JAX's rules must match the output's dtype)."""
        what = f"the output{f' at {where}' if where else ''}"
        if tuple(shape_of(t)) != tuple(shape_of(y)):
            raise ValueError(f"tapestry.custom_jvp: the rule of {self.cj._name()} returned a "
                             f"tangent of shape {tuple(shape_of(t))} for {what}, whose shape "
                             f"is {tuple(shape_of(y))}; a tangent has its output's shape.")
        dt, want = np.dtype(dtype_of(t)), np.dtype(dtype_of(y))
        if dt.kind not in "iufc" or (dt.kind == "c" and want.kind != "c"):
            raise TypeError(f"tapestry.custom_jvp: the rule of {self.cj._name()} returned a "
                            f"tangent of dtype {dt} for {what} (dtype {want}); the tangent "
                            "of a real output is a real float array.")
        if dt != want and want.kind in "fc":
            t = t.astype(want) if hasattr(t, "astype") else np.asarray(t, want)
        return t

    def pullback(self, g, ans):
        """The VJP: the tangent map is linear, so its own VJP is the reverse rule.

        A rule that is not linear in its tangent (``np.clip(t, -c, c)``) has
        no transpose: the VJP of the map at a zero tangent silently was the
        unclipped derivative.  Checked once per function and signature (the
        rule must scale with a random tangent, as forward mode checks a
        custom_vjp's backward rule)."""
        zeros = [np.zeros(shape_of(self.raw[k]), dtype_of(self.raw[k])) for k in self.active]
        key = tuple((shape_of(z), dtype_of(z)) for z in zeros)
        checked = self.cj.__dict__.setdefault("_linear_checked", set())
        if key not in checked:
            name = self.cj._name()
            check_linear_in_cotangent(
                lambda ts: self.tangent(ts), zeros, name,
                f"tapestry reverse mode (grad / vjp / hessian): the tangent rule of custom_jvp "
                f"function {name!r} is not linear in its tangent (np.clip(t, ...), np.abs(t), "
                f"t ** 2), so it has no transpose: reverse mode would silently give the "
                f"derivative of the rule at a zero tangent. Write the rule linear in the "
                f"tangents (a derivative times t), or give the function a custom_vjp.")
            if len(checked) < 64:
                checked.add(key)
        _, pb = vjp(lambda *ts: self.tangent(ts), *zeros)
        if self.n_out == 1:
            return list(pb(g))
        g = [np.zeros(shape_of(a), dtype_of(a)) if c is None else c for a, c in zip(ans, g)]
        return list(pb(g))


def _key_paths(node, where):
    """Key paths of ``node``'s leaves, in leaf order (for error messages)."""
    if node is None:
        return []
    if node is _LEAF:
        return [where]
    k, _, meta, children = node
    out = []
    for i, c in enumerate(children):
        out.extend(_key_paths(c, where + child_key(k, meta, i)))
    return out
