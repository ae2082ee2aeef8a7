"""``vmap``: a function of one item applied to a batch, with JAX's semantics.

``vmap(f, in_axes, out_axes, axis_size)(*args)`` moves each batched
argument's batch axis to the front, wraps it as a
:class:`~tapestry.core.batched.Batched` value and calls ``f`` once: every
NumPy operation inside runs on the whole batch through its batching rule
(see :mod:`tapestry.core.batched`).  The outputs' batch axes are moved to
``out_axes``.
"""
from __future__ import annotations

import dataclasses

import numpy as np

import warnings

from .batched import FALLBACKS, BatchTrace, Batched, Unbatched, VmapFallbackWarning
from .pytree import (aux_holding, dataclass_prefix_as_tuples, flatten_up_to, map_aux,
                     tree_flatten, tree_structure)
from .staged import Staged
from .tape import _levels
from .tracing import array_of, check_static_aux
from .var import Var


def _check_axis_spec(spec, where):
    if spec is not None and (isinstance(spec, bool) or
                             not isinstance(spec, (int, np.integer))):
        raise TypeError(f"tapestry.vmap: {where} must be an int or None (or a pytree of "
                        f"them matching the arguments), got {spec!r}.")


class _AxisSpec:
    """An ``in_axes`` / ``out_axes`` spec, read once when ``vmap`` is called:
    an int or ``None`` for every leaf, or a pytree prefix of the arguments
    holding them.  The axes per leaf are cached per tree structure, so a
    vmapped function called again on the same structure pays one flatten."""

    __slots__ = ("spec", "where", "flat", "cache", "dataclasses")

    def __init__(self, spec, where):
        self.spec, self.where, self.cache = spec, where, {}
        self.dataclasses = False
        if spec is None or isinstance(spec, (int, np.integer)):
            _check_axis_spec(spec, where)
            self.flat = None
        else:
            self.flat = tree_flatten(spec, is_leaf=lambda x: x is None)
            self.dataclasses = _holds_dataclass(spec)
            for ax in self.flat[0] if not self.dataclasses else ():  # those: in _expand
                _check_axis_spec(ax, where)

    def per_leaf(self, tree):
        """``(leaves, treedef, axes)``: one axis (int or None) per leaf of ``tree``."""
        leaves, td = tree_flatten(tree)
        if self.flat is None:
            return leaves, td, [self.spec] * len(leaves)
        axes = self.cache.get(td)
        if axes is None:
            # shared by every vmap with this spec: ``tp.vmap(f, in_axes=...)(x)``
            # written inside a loss makes a new vmap on every call
            key = (self.flat[1], tuple(self.flat[0]), td)
            axes = _EXPANDED.get(key)
            if axes is None:
                axes = self._expand(tree)
                if len(_EXPANDED) >= _EXPANDED_SIZE:
                    _EXPANDED.clear()
                _EXPANDED[key] = axes
            if len(self.cache) < _SPEC_CACHE_SIZE:
                self.cache[td] = axes
        return leaves, td, axes

    def _expand(self, tree):
        spec_leaves, spec_td = self.flat
        given = tree
        if self.dataclasses:  # their int fields read as axes, not as structure
            spec, tree = dataclass_prefix_as_tuples(self.spec, tree)
            spec_leaves, spec_td = tree_flatten(spec, is_leaf=lambda x: x is None)
            for ax in spec_leaves:
                _check_axis_spec(ax, self.where)
        try:
            subtrees = flatten_up_to(spec_td, tree)
        except ValueError as e:
            what = "outputs" if self.where == "out_axes" else "arguments"
            raise ValueError(f"tapestry.vmap: {self.where}={self.spec!r} does not match the "
                             f"structure of the {what} ({tree_structure(given)}): {e}") from None
        axes = []
        for ax, sub in zip(spec_leaves, subtrees):
            axes += [ax] * len(tree_flatten(sub)[0])
        return axes


def _holds_dataclass(spec):
    """Whether an axis spec holds a dataclass instance (see
    :func:`~tapestry.core.pytree.dataclass_prefix_as_tuples`)."""
    if dataclasses.is_dataclass(spec) and not isinstance(spec, type):
        return True
    if isinstance(spec, (tuple, list)):
        return any(_holds_dataclass(s) for s in spec)
    if isinstance(spec, dict):
        return any(_holds_dataclass(s) for s in spec.values())
    return False


def _axis_spec(spec, where):
    """The :class:`_AxisSpec` of ``spec``, one per spec written with plain
    ints and ``None`` (a tuple of them, the common case): ``tp.vmap(f,
    in_axes=(0, None))(x, w)`` inside a loss builds a vmap on every call,
    and each would read the spec again.  Keyed by value and type, so that
    ``False`` (refused) never finds ``0``'s entry."""
    if not (spec is None or type(spec) is int or type(spec) is tuple and
            all(a is None or type(a) is int for a in spec)):
        return _AxisSpec(spec, where)
    key = (where, spec)
    found = _SPECS.get(key)
    if found is None:
        found = _AxisSpec(spec, where)
        if len(_SPECS) >= _SPECS_SIZE:
            _SPECS.clear()
        _SPECS[key] = found
    return found


#: (where, spec) -> its _AxisSpec, for specs of plain ints and None.
_SPECS: dict = {}
_SPECS_SIZE = 256
_SPEC_CACHE_SIZE = 32
#: (spec structure, spec axes, tree structure) -> axes per leaf, for all vmaps.
_EXPANDED: dict = {}
_EXPANDED_SIZE = 1024
#: Keyword arguments of the mapped function: every one over its axis 0 (JAX).
_KEYWORDS_SPEC = _AxisSpec(0, "in_axes")


def _batch_size(leaves, axes, axis_size, leaf_names):
    """The batch length; ``leaf_names()`` names the leaves in a message."""
    if axis_size is None:  # the common case: every batched leaf has the same length
        size = None
        for x, ax in zip(leaves, axes):
            if ax is not None:
                shape = x.shape if x.__class__ is np.ndarray else None
                if shape is None or not -len(shape) <= ax < len(shape) or \
                        (size is not None and shape[ax] != size):
                    break
                size = shape[ax]
        else:
            if size is not None:
                return size
    names = leaf_names()
    sizes = {}
    for k, (x, ax) in enumerate(zip(leaves, axes)):
        if ax is None:
            continue
        nd = np.ndim(x)
        if not -nd <= ax < nd:
            raise ValueError(f"tapestry.vmap: in_axes={ax} for {names[k]} of shape "
                             f"{np.shape(x)}: no such axis.")
        sizes[names[k]] = np.shape(x)[ax]
    distinct = set(sizes.values())
    if len(distinct) > 1:
        listing = ", ".join(f"{n}: {s}" for n, s in sizes.items())
        raise ValueError(f"tapestry.vmap: the batched arguments disagree on the batch size "
                         f"({listing}); every axis in in_axes must have one length.")
    if not distinct:
        if axis_size is None:
            raise ValueError("tapestry.vmap: no argument is batched (every in_axes is None); "
                             "pass axis_size= to say how many items to make.")
        return int(axis_size)
    size = distinct.pop()
    if axis_size is not None and axis_size != size:
        raise ValueError(f"tapestry.vmap: axis_size={axis_size} but the batched arguments "
                         f"have {size} items.")
    return size


def _leaf_names(args, kwargs=None):
    """Readable names of the arguments' leaves, for messages."""
    names = []
    for i, a in enumerate(args):
        n = len(tree_flatten(a)[0])
        names += [f"argument {i}"] if n == 1 else [f"argument {i} (leaf {j})" for j in range(n)]
    for k in sorted(kwargs or ()):  # (the order the keyword leaves flatten in)
        names += [f"keyword argument {k!r} (keywords map over axis 0; pass a shared value "
                  "positionally with in_axes None)"] * len(tree_flatten(kwargs[k])[0])
    return names


def _to_front(x, ax, trace):
    # a staged array (jit(vmap(f))) stays staged: np.asarray would read its
    # value, a guard that makes jit trace again for every new input
    keep = isinstance(x, (Var, Batched, np.ndarray)) or \
        (x.__class__ is Staged and x._value.__class__ is np.ndarray)
    x = x if keep else np.asarray(x)
    if ax != 0:
        x = np.moveaxis(x, ax, 0)
    b = Batched(x, trace)
    b._input = True  # x[i] = v into it refuses: NumPy's loop writes into the caller's array
    return b


def _from_front(y, ax, trace, where):
    if y.__class__ is Unbatched:
        y = y._value
    if y.__class__ is Batched and y._trace is trace:
        v = y._value
        if ax is None:
            raise ValueError(f"tapestry.vmap: out_axes is None at {where} but that output "
                             "depends on the batched inputs (it differs between items).")
        return v if ax == 0 else np.moveaxis(v, 0, ax)
    if ax is None:
        return y
    # Not batched: the same value for every item, broadcast (as JAX does).
    traced = y.__class__ in (Var, Batched)
    if not traced and not (y.__class__ is Staged and np.result_type(y).kind in "biufc"):
        y = _as_output_array(y, where)  # (staged by jit: np.asarray would pin its value)
    v = np.broadcast_to(y, (trace.size,) + tuple(y.shape))
    if not traced:
        v = v.copy()  # a writeable array of its own, like every other output
    return v if ax == 0 else np.moveaxis(v, 0, ax)


def _as_output_array(y, where):
    """An unbatched output leaf as an array to broadcast.  An object that
    is not an array or a number (an instance of an unregistered class, a
    set, a function, an object array) is refused: broadcast, every item
    would get the same object, and one that holds a batched value (a
    closure, an attribute, out[i] = x into an object array) would hold the
    whole batch, not its item's value."""
    a = np.asarray(y)
    if a.dtype == object:
        what = "an array of dtype object" if isinstance(y, np.ndarray) else \
            f"a {type(y).__name__} object"
        raise TypeError(
            f"tapestry.vmap: {where} is {what}, not an array or a "
            "number: vmap returns arrays (one per item, stacked), and an object that may "
            "hold a batched value cannot be split into items. Return arrays, numbers, or "
            "pytrees of them (tuples, lists, dicts, or a class registered with "
            "tapestry.tree_util.register_pytree_node / register_dataclass).")
    return a


def _own(r, inputs):
    """A batched output that is (a view of) an input array -- ``f`` returned
    its argument, a slice or a reshape of it -- copied: a loop over the
    items stacks its results into a new array, so writing into the output
    must not write into the caller's input."""
    v = array_of(r)  # (inside jit: the staged value's array; the copy is a step)
    if v is None or (v.base is None and not any(v is array_of(a) for a in inputs)):
        return r
    for a in inputs:
        a = array_of(a)
        if a is not None and np.may_share_memory(v, a):
            return r.copy()
    return r


def _wrapped(v):
    return v.__class__ is Batched or v.__class__ is Unbatched


def _unproxied(v):
    """An array shared by every item (``in_axes=None``) as the caller's own,
    not the proxy ``f`` saw it through."""
    return v._value if v.__class__ is Unbatched else v


# --- item by item: where NumPy itself must read a batched value -----------------------
def _item_by_item(f, items, axes, n_pos, td, ktd, size, out_spec, name, err):
    """``f`` run once per item, the results stacked: the answer of a loop
    over the items, for a function that did what a batch cannot (``err``):
    NumPy converted a batched value -- a plain array read from a closure or
    made inside ``f`` indexed with a per-item index (``np.eye(n)[label]``,
    ``table[i]``, ``W[:, i]``), ``np.array([a, b])``, a library that
    converts its inputs -- or would write one into a plain array
    (``np.full(shape, x)``, ``np.add.at(out, i, x)``), or a ``custom_vjp`` /
    ``custom_jvp`` differentiated inside the vmap read a per-item value from
    a closure.  NumPy indexes, converts and writes plain arrays without
    asking tapestry, so no batching rule can see those calls; each item's
    own values can be read.  ``items``: each leaf with its batch axis first
    (``None`` axes: the leaf itself)."""
    key = f"{name}: item by item"
    FALLBACKS[key] += 1
    code = getattr(f, "__code__", f)  # once per function (every lambda is a "<lambda>")
    if code not in _WARNED_ITEMS:
        _WARNED_ITEMS.add(code)
        warnings.warn(f"tapestry.vmap: {name} runs once per item, with a loop's results, "
                      f"because of: {str(err)[:200]}... For one call per operation, pass "
                      "tables as arguments with in_axes=None, build arrays with np.stack, "
                      "and pass a custom rule's values as its arguments.",
                      VmapFallbackWarning, stacklevel=3)

    def call(vals):
        args = td.unflatten(vals[:n_pos])
        out = f(*args, **ktd.unflatten(vals[n_pos:])) if ktd is not None else f(*args)
        leaves, otd, oaxes = out_spec.per_leaf(out)
        # a copy of each plain result: f may return a buffer it writes again
        return [v.copy() if v.__class__ is np.ndarray else v for v in leaves], otd, oaxes

    if size == 0:
        # the made-up item's run must not write into in_axes=None arrays: a
        # loop over no items writes nothing
        kept = [(x, x.copy()) for x, ax in zip(items, axes)
                if ax is None and isinstance(x, np.ndarray) and x.flags.writeable]
        try:
            return _empty_outputs(call, items, axes)
        finally:
            for x, c in kept:
                np.copyto(x, c)
    results = [call([x if ax is None else _item(x, i) for x, ax in zip(items, axes)])
               for i in range(size)]
    _, otd, oaxes = results[0]
    for _, td_i, _ in results[1:]:
        if td_i != otd:
            raise ValueError(f"tapestry.vmap: {name} returns outputs of different structures "
                             f"for different items ({otd} and {td_i}); a batch needs one.")
    out = [_stack_items([r[0][k] for r in results], ax, f"output leaf {k}")
           for k, ax in enumerate(oaxes)]
    return otd.unflatten(out)


def _item(x, i):
    """Item ``i`` of a batched leaf: a copy where it is a plain array, so
    that ``f`` writing into its argument (``v -= v.mean()``, ``v.sort()``)
    does not write into the caller's array (vmap never does)."""
    v = x[i]
    return v.copy() if v.__class__ is np.ndarray else v


#: The functions already warned about (their code objects).
_WARNED_ITEMS: set = set()


def _stack_items(vals, ax, where):
    """One output leaf of every item as the batched output (``out_axes``
    ``ax``); for ``ax`` None, the one value every item gave."""
    if ax is None:
        first = vals[0]
        if all(v is first for v in vals) or (
                all(v.__class__ not in (Var, Batched, Staged) for v in vals)
                and all(np.array_equal(first, v) for v in vals[1:])):
            return first
        raise ValueError(f"tapestry.vmap: out_axes is None at {where} but that output "
                         "depends on the batched inputs (it differs between items).")
    vals = [v if v.__class__ in (Var, Batched, Staged) else _as_output_array(v, where)
            for v in vals]  # (an object per item is refused, as a batched one is)
    y = np.stack(vals)
    return y if ax == 0 else np.moveaxis(y, 0, ax)


def _empty_outputs(call, items, axes):
    """The outputs for a batch of no items: their shapes and dtypes from one
    made-up item (zeros, else ones), as JAX takes them from an abstract one."""
    error = None
    for fill in (0, 1):
        vals = [x if ax is None else np.full(np.shape(x)[1:], fill, _dtype(x))
                for x, ax in zip(items, axes)]
        try:
            leaves, otd, oaxes = call(vals)
            break
        except Exception as e:  # noqa: BLE001 (the made-up item is not a valid input: next)
            error = e
    else:
        raise error
    out = []
    for y, ax in zip(leaves, oaxes):
        e = np.empty((0,) + np.shape(y), _dtype(y))
        out.append(y if ax is None else e if ax == 0 else np.moveaxis(e, 0, ax))
    return otd.unflatten(out)


def _batch_trace_of(e):
    """The vmap an error says needs its items (see :func:`_item_by_item`),
    or None: its own mark, or that of the error NumPy chained its own to
    (``out[i] = x`` with a 0-d batched ``x``: NumPy's ValueError, caused
    by ``float(x)``; Python's own ``float(x)`` in ``f`` stays refused)."""
    trace = getattr(e, "batch_trace", None)
    if trace is None and isinstance(e, (ValueError, TypeError)):
        cause = e.__cause__ or e.__context__
        trace = getattr(cause, "batch_trace", None) or getattr(cause, "item_trace", None)
    return trace


def _swallowed(trace, e):
    """Whether ``f`` caught a refusal to read one of ``trace``'s values (it
    is still pending) and raised ``e``, another error: its own (``except
    IndexError: raise KeyError(...) from e``) or NumPy's, chained to the
    refusal (``out[i] = x`` with a 0-d ``x``).  A loop's items each take
    their own branch; so does a run per item.  The refusal itself, uncaught,
    is raised (``float(x)``: refused by name)."""
    return trace.refused is not None and trace.refused is not e


def _rejected(trace, e):
    """Whether a library that type-checks its input rejected one of
    ``trace``'s batched values: its ``TypeError`` quotes the value
    (``np.random.default_rng(seed)`` with a per-item seed: "SeedSequence
    expects int or sequence of ints for entropy not Batched(batch of 4, ...,
    level=3)").  Each item's own value is what the library takes, as in a
    loop; an item that the library rejects too raises the loop's error.
    NumPy 2.5's seeding rejects ``default_rng([seed, 7])`` without quoting
    ("SeedSequence does not accept nested sequences"): a TypeError raised
    inside ``numpy.random`` while this vmap ran counts too (a generator
    cannot take a batch of seeds, so each item seeds its own)."""
    if e.__class__ is not TypeError:
        return False
    if f"level={trace.level})" in str(e) and "Batched(batch of " in str(e):
        return True
    return _raised_in_numpy_random(e)


def _raised_in_numpy_random(e):
    """Whether ``e``'s innermost frame is NumPy's random module (its
    Cython sources show as ``numpy/random/*.pyx``)."""
    tb = e.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    name = tb.tb_frame.f_code.co_filename.replace("\\", "/")
    return "numpy/random/" in name


def _dtype(x):
    d = getattr(x, "dtype", None)
    return np.asarray(x).dtype if d is None else d


def _vmapped_jit(f, in_axes, out_axes, axis_size):
    """``jit(vmap(f.fun))`` with the jit's options, made once per axes
    (kept on ``f``, a few at most): a new jit per ``vmap(f)`` call would
    start with no programs, and ``parallel_sum(jit(f), ...,
    vectorize=True)`` calls ``vmap`` once per call, so every call traced."""
    try:
        key = (_axes_key(in_axes), _axes_key(out_axes), axis_size)
        hash(key)
    except TypeError:  # (an axes pytree of an unhashable kind: made each time)
        key = None
    cache = f.__dict__.setdefault("_vmapped", {})
    made = cache.get(key) if key is not None else None
    if made is None:
        made = f._rewrap(lambda fun: vmap(fun, in_axes, out_axes, axis_size))
        if key is not None:
            if len(cache) >= _VMAPPED_KEPT:
                cache.pop(next(iter(cache)))
            cache[key] = made
    return made


#: Jits of ``vmap(jit(f))`` kept per ``f`` (one per distinct axes).
_VMAPPED_KEPT = 8


def _axes_key(axes):
    """A hashable form of an axes pytree (dicts as sorted items with their
    key order, lists as tuples): equal forms, equal axes."""
    c = axes.__class__
    if c is dict:
        return ("dict", tuple((k, _axes_key(v)) for k, v in axes.items()))
    if c in (tuple, list):
        return (c.__name__, tuple(_axes_key(v) for v in axes))
    if axes is None or c is int:
        return axes
    return (c.__qualname__, axes)  # (hash() refuses what cannot be a key)


def vmap(f, in_axes=0, out_axes=0, axis_size=None):
    """Map ``f`` over a batch axis of its arguments, in one call per operation.

    ``in_axes``: the batch axis of each positional argument -- an int for
    all of them, or a tuple with one entry per argument, each an int,
    ``None`` (not batched: the same value for every item) or a pytree
    matching that argument.  ``out_axes``: where the batch axis goes in
    each output (same forms; ``None`` for an output that is the same for
    every item).  ``axis_size``: the batch length when no argument is
    batched.  Keyword arguments are mapped over their axis 0, as in JAX.
    Composes with ``grad``, ``jacfwd``, ``hessian`` and itself in
    any order; see docs/vmap.md.
    """
    if not callable(f):
        raise TypeError(f"tapestry.vmap: expected a function, got {type(f).__name__}.")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    rewrap = getattr(type(f), "_rewrap", None)
    if rewrap is not None and getattr(f, "fun", None) is not None:
        # vmap(jit(f)) is jit(vmap(f)): the batch compiled as one program
        return _vmapped_jit(f, in_axes, out_axes, axis_size)
    in_spec, out_spec = _axis_spec(in_axes, "in_axes"), _axis_spec(out_axes, "out_axes")

    def batched_f(*args, **kwargs):
        spec = in_axes
        if isinstance(spec, tuple) and len(spec) != len(args):
            raise ValueError(f"tapestry.vmap: in_axes has {len(spec)} entries but the "
                             f"function was called with {len(args)} positional arguments.")
        leaves, td, axes = in_spec.per_leaf(tuple(args))
        if kwargs:  # as in JAX: every keyword argument is mapped over its axis 0
            kleaves, ktd, kaxes = _KEYWORDS_SPEC.per_leaf(kwargs)
            leaves, axes = leaves + kleaves, axes + kaxes
        size = _batch_size(leaves, axes, axis_size, lambda: _leaf_names(args, kwargs))
        trace = BatchTrace(next(_levels), size)
        wrapped = [(Unbatched(x) if type(x) is np.ndarray and x.ndim else x) if ax is None
                   else _to_front(x, ax, trace) for x, ax in zip(leaves, axes)]
        n = len(wrapped) - len(kleaves) if kwargs else len(wrapped)
        # (inside jit, while it records: how each staged in_axes=None array
        # was, to tell whether f wrote into it before needing its items)
        staged = [(x, x._value.copy()) for x, ax in zip(leaves, axes)
                  if ax is None and x.__class__ is Staged and x._value.__class__ is np.ndarray]
        needs_items = None
        try:
            if kwargs:
                out = f(*td.unflatten(wrapped[:n]), **ktd.unflatten(wrapped[n:]))
            else:
                out = f(*td.unflatten(wrapped))
        except Exception as e:  # noqa: BLE001 (re-raised unless it names this vmap)
            # NumPy converted one of this vmap's values (BatchedConversionError),
            # would write one into a plain array (PerItemWrite), or a custom
            # rule read one from a closure: each item's own values can do it
            if (_batch_trace_of(e) is not trace and not _swallowed(trace, e)
                    and not _rejected(trace, e)):
                raise
            needs_items = e
        finally:
            trace.open = False
        if needs_items is None and trace.refused is not None:
            # f caught a refusal to read one of this vmap's values itself and
            # went on (its except branch, for every item): a loop's items
            # each take their own branch
            needs_items = trace.refused
        if needs_items is not None:  # (outside the handler: errors of the items are their own)
            for w, x in zip(wrapped, leaves):  # the whole batch's writes into
                if w.__class__ is Unbatched and w is not x:  # in_axes=None arrays undone
                    w._restore()
            for x, was in staged:
                if x._value.tobytes() != was.tobytes():
                    raise TypeError(
                        f"tapestry.vmap: {batched_f.__name__} wrote into an array passed with "
                        "in_axes=None inside jit, then needs its items (it runs once per item: "
                        f"{str(needs_items)[:120]}); the whole batch's write cannot be undone in "
                        "the compiled program, and each item would see it once more than in a "
                        "loop. Write into a copy made inside f (w = w.copy()), or run "
                        "vmap outside jit.")
            items = [w._value if ax is not None else x for w, x, ax in zip(wrapped, leaves, axes)]
            return _item_by_item(f, items, axes, n, td, ktd if kwargs else None, size,
                                 out_spec, batched_f.__name__, needs_items)
        trace.open = True  # moving the outputs' axes still works on them
        try:
            if out.__class__ is Batched and out_spec.flat is None:
                # one batched output, one axis for it: the general steps below
                # (flatten, checks, rebuild) for a single leaf, done directly
                ax = out_spec.spec
                y = _from_front(out, ax, trace, "output leaf 0")
                return y if ax is None else _own(y, leaves)
            out_leaves, out_td, oaxes = out_spec.per_leaf(out)
            if aux_holding(out_td, _wrapped) is not None:  # (rare: one walk otherwise)
                check_static_aux(out_td, lambda v: v.__class__ is Batched and v._trace is trace,
                                 "vmap", "output", "a value that differs between items")
                out_td = map_aux(out_td, _unproxied)  # the caller's array, as a loop gives
            res = [_own(_from_front(y, ax, trace, f"output leaf {k}"), leaves) if ax is not None
                   else _from_front(y, ax, trace, f"output leaf {k}")
                   for k, (y, ax) in enumerate(zip(out_leaves, oaxes))]
        finally:
            trace.open = False
        return out_td.unflatten(res)

    batched_f.__name__ = f"vmap({getattr(f, '__name__', 'f')})"
    batched_f.__wrapped__ = f
    return batched_f
