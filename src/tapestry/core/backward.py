"""The backward pass: one reverse loop over a tape, and cotangent accumulation."""
from __future__ import annotations

import sys
import threading

import numpy as np

from .batched import BatchedConversionError, handled, rule_per_item
from .tape import LEAF


def _calibrate_fresh():
    """The reference count ``sys.getrefcount`` reports for an array held
    only by one local variable, or ``None`` where counts cannot be trusted
    that way (other interpreters; CPython 3.14+ may borrow references, so a
    lower count would no longer prove that nothing else holds the array)."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 14) \
            or not getattr(sys, "_is_gil_enabled", lambda: True)():
        return None
    c = np.empty(2)
    fresh = sys.getrefcount(c)
    held = [c]
    return fresh if sys.getrefcount(held[0]) == fresh + 1 else None


#: See :func:`_calibrate_fresh`.  A rule's result with this count, owning
#: its memory (``base is None``), was just made by the rule and is seen by
#: nobody else: the engine may add later contributions into it in place
#: (W6: the cotangent of ``eta`` gets ``-exp(eta)`` and then ``y``; adding
#: ``y`` into the fresh ``-exp(eta)`` saves a buffer and a write pass).
_FRESH = _calibrate_fresh()
#: The same for a fresh array passed on once more (``accumulate``'s ``c``).
_FRESH_ARG = None if _FRESH is None else _FRESH + 1
_refcount = sys.getrefcount


#: Per thread, the ids of the arrays the running sweep's rules handed on as
#: cotangents unchanged (see :func:`passed_on`).
_PASSED = threading.local()


def passed_on(y):
    """``y`` as a cotangent, unchanged: a rule's ``g * y`` where ``g`` is a
    broadcast 1 (:func:`~tapestry.core.primitive.scale_cotangent`).  ``y``
    is a value of the forward pass -- a closed-over weight, another
    argument, an output handed back as aux -- so a gradient that is ``y``
    (or a view of it) is copied when the sweep ends: the caller updating
    the gradient in place (``g /= norm``) must not change their weight."""
    ids = getattr(_PASSED, "ids", None)
    if ids is not None and type(y) is np.ndarray:  # (a staged y is jit's, not the caller's)
        ids.add(id(_root(y)))
    return y


def _root(a):
    """The array whose memory ``a`` views (``a`` itself if it owns it)."""
    while type(a.base) is np.ndarray:
        a = a.base
    return a


def _unaliased(cts, owned, ids):
    """The leaves' cotangents, each that is (a view of) an array a rule
    passed on (:func:`passed_on`) replaced by a copy."""
    for p, c in enumerate(cts):
        if type(c) is np.ndarray and p not in owned and id(_root(c)) in ids:
            cts[p] = c.copy()


class Negated:
    """The cotangent ``-a``, not yet computed.

    ``- exp(eta)`` in W6 hands ``eta`` the cotangent ``-exp(eta)``, and
    ``y * eta`` then adds ``y``: computing ``-a`` first costs a pass over
    memory that ``y - a`` does not.  Rules that negate a plain array (the
    right side of a subtraction, a ``sum``'s broadcast -1 times something)
    return this instead; the sweep subtracts when it meets another
    contribution, and computes ``-a`` only when the cotangent is used alone
    (as a rule's input, or as a gradient).  ``y - a`` and ``y + (-a)`` are
    the same floating-point operation, so the bits do not change.
    """

    __slots__ = ("a",)

    def __init__(self, a):
        self.a = a

    @property
    def shape(self):
        return self.a.shape

    @property
    def dtype(self):
        return self.a.dtype

    def value(self):
        return np.negative(self.a)


def backward_sweep(tape, out_index, seed, release=True, stop=0, more=()):
    """Propagate ``seed`` from node ``out_index`` back to the tape's start.

    ``more``: further ``(index, seed)`` pairs at positions up to
    ``out_index`` (a function's other outputs), seeded before the sweep
    starts, so that several outputs cost one sweep, not one each.  Seeds are
    the caller's arrays: the engine never adds into them in place.

    Returns the list of cotangents indexed by tape position; only leaf
    positions are kept (intermediate cotangents are dropped as soon as their
    node has been processed, so peak memory follows the tape's live set).
    With ``release`` the nodes are freed as they are consumed, which drops
    the stored intermediates early; pass ``release=False`` to sweep the same
    tape again (``vjp`` pullbacks, ``jacobian``).
    """
    nodes = tape.nodes
    if not release and nodes.__class__ is not list:
        nodes = list(nodes)  # a closed tape's nodes: a plain list indexes ~2x faster
    cts = [None] * len(nodes)
    cts[out_index] = seed
    for i, extra in more:
        cts[i] = extra if cts[i] is None else accumulate(cts[i], extra, i, set())
    owned = set()
    negated = []  # positions that got a Negated cotangent first
    outer, _PASSED.ids = getattr(_PASSED, "ids", None), set()
    try:
        _sweep(nodes, cts, out_index, stop, release, owned, negated)
        if _PASSED.ids:
            _unaliased(cts, owned, _PASSED.ids)
    finally:
        _PASSED.ids = outer
    return cts


def _sweep(nodes, cts, out_index, stop, release, owned, negated):
    """The loop of :func:`backward_sweep`, filling ``cts`` in place."""
    consumed = _CONSUMED
    for i in range(out_index, stop - 1, -1):
        g = cts[i]
        if g is None:
            continue
        node = nodes[i]
        if node is LEAF:
            continue
        cts[i] = None
        if g.__class__ is Negated:  # used alone: compute it now
            g = g.value()
        if release:
            nodes[i] = consumed
        parents, rules, ans, args, kwargs, _ = node
        if rules.__class__ is JointRule:  # one call yields every parent's cotangent
            try:
                joint = rules.fn(g, ans, *args, **kwargs)
            except BatchedConversionError as e:  # the rule reads values in Python: per item
                handled(e)
                joint = rule_per_item(rules.fn, g, ans, args, kwargs)
            rules = [_const(c) for c in joint]
            args, kwargs = (), {}
        # One parent is the common case: unrolled, without the zip.  Its store
        # block is the loop's below, repeated on purpose (one loop for both
        # measured W5 ~4-12% slower per op); change both together.
        if len(parents) == 1:
            rule = rules[0]
            try:
                c = rule(g, ans, *args, **kwargs) if kwargs else rule(g, ans, *args)
            except BatchedConversionError as e:  # the rule reads values in Python: per item
                handled(e)
                c = rule_per_item(rule, g, ans, args, kwargs)
            if c is not None:
                p = parents[0]
                prev = cts[p]
                if prev is None:
                    cts[p] = c
                    if c.__class__ is np.ndarray:
                        if c.base is None and _refcount(c) == _FRESH:
                            owned.add(p)
                    elif c.__class__ is Negated:
                        negated.append(p)
                else:
                    cts[p] = accumulate(prev, c, p, owned)
            continue
        for p, rule in zip(parents, rules):
            try:
                c = rule(g, ans, *args, **kwargs) if kwargs else rule(g, ans, *args)
            except BatchedConversionError as e:
                handled(e)
                c = rule_per_item(rule, g, ans, args, kwargs)
            if c is None:
                continue
            prev = cts[p]
            if prev is None:
                cts[p] = c
                if c.__class__ is np.ndarray:
                    if c.base is None and _refcount(c) == _FRESH:
                        owned.add(p)
                elif c.__class__ is Negated:
                    negated.append(p)
            else:
                cts[p] = accumulate(prev, c, p, owned)
    for p in negated:  # leaves (the rest were used by their nodes above)
        if cts[p].__class__ is Negated:
            cts[p] = cts[p].value()


class JointRule:
    """A node rule that returns the cotangents of all its parents at once
    (custom VJPs, parallel chunks): ``fn(g, ans, *args) -> [ct, ...]``."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn


def _const(c):
    return lambda *_, **__: c


# A consumed node: not a leaf, and has no parents.
_CONSUMED = ((), (), None, (), {}, None)


def _accumulate_negated(prev, c, p, owned):
    """``prev + c`` where one or both are :class:`Negated`: one subtraction."""
    if prev.__class__ is Negated and c.__class__ is Negated:
        if type(prev.a) is np.ndarray and type(c.a) is np.ndarray \
                and prev.shape == c.shape:
            owned.add(p)
            total = np.add(prev.a, c.a)
            return np.negative(total, out=total)
        return accumulate(prev.value(), c.value(), p, owned)
    if c.__class__ is Negated:
        if type(prev) is np.ndarray and type(c.a) is np.ndarray and prev.shape == c.shape:
            if p in owned and (c.dtype == prev.dtype
                               or np.can_cast(c.dtype, prev.dtype, "safe")):
                return np.subtract(prev, c.a, out=prev)
            owned.add(p)
            return np.subtract(prev, c.a)
        return accumulate(prev, c.value(), p, owned)
    if type(c) is np.ndarray and type(prev.a) is np.ndarray and prev.shape == c.shape:
        owned.add(p)
        return np.subtract(c, prev.a)
    return accumulate(prev.value(), c, p, owned)


def accumulate(prev, c, p, owned):
    """Add cotangent ``c`` into ``prev`` (the running total for position ``p``).

    The first contribution is stored as is.  If a rule just made it (see
    ``_FRESH``), ``p`` is in ``owned`` already and every later contribution
    adds into it in place; otherwise it may alias a user array or another
    node's buffer, so the second allocates a buffer the engine owns and
    records ``p`` in ``owned``; later ones add into that in place.
    """
    if c.__class__ is Negated or prev.__class__ is Negated:
        return _accumulate_negated(prev, c, p, owned)
    if type(prev) is np.ndarray and type(c) is np.ndarray and prev.shape == c.shape:
        if p in owned and (c.dtype == prev.dtype or np.can_cast(c.dtype, prev.dtype, "safe")):
            np.add(prev, c, out=prev)
            return prev
        owned.add(p)
        if c.base is None and _refcount(c) == _FRESH_ARG and \
                (prev.dtype == c.dtype or np.can_cast(prev.dtype, c.dtype, "safe")):
            # ``c`` was just made by its rule: reuse it (``prev`` first, as
            # every other branch and jit's sweep add: a nan's sign and
            # payload come from the first operand)
            np.add(prev, c, out=c)
            return c
        return np.add(prev, c)
    if type(prev) is list:  # multi-output node: slot-wise
        return [a if b is None else b if a is None else accumulate(a, b, None, set())
                for a, b in zip(prev, c)]
    # Sparse cotangents (``scatter_add_into(dense) -> dense``, in place) meet
    # a dense total: scatter into the engine's own buffer, copying only once.
    if type(prev) is np.ndarray and hasattr(c, "scatter_add_into") and prev.shape == c.shape:
        if c.staged():  # inside jit, onto a constant: the sum is a step of the program
            return prev + c
        if p not in owned or not np.can_cast(c.dtype, prev.dtype, "same_kind"):
            prev = np.array(prev, dtype=np.result_type(prev.dtype, c.dtype))
            owned.add(p)
        return c.scatter_add_into(prev)
    if type(c) is np.ndarray and hasattr(prev, "scatter_add_into") and prev.shape == c.shape:
        if prev.staged():
            return prev + c
        owned.add(p)
        return prev.scatter_add_into(np.array(c, dtype=np.result_type(c.dtype, prev.dtype)))
    add = getattr(c, "__accumulate_into__", None)
    if add is not None:  # other cotangent types know how to add themselves
        return add(prev)
    return prev + c
