"""The tape: nodes appended in forward order, swept once in reverse.

A tape is Stan's "chainable stack" in Python.  Each recorded operation
appends one node; the reverse pass is a single loop from the output back to
the start (see :mod:`tapestry.core.backward`).  There is no graph walk and no
topological sort: the append order *is* a valid reverse topological order.

Nesting (``grad(grad(f))``, checkpointed regions, parallel chunks) is handled
by giving every tape a unique, increasing ``level``.  A tape created inside
another computation always has a higher level than the tapes that existed
when it was made, so when an operation sees traced inputs from several tapes
it records on the highest one and treats the others as constants at that
level; their own tape records the arithmetic done on them, which is what
makes higher derivatives work (the lineage is HIPS autograd's trace ids).
"""
from __future__ import annotations

import itertools
import threading
import weakref

# ``next()`` on an itertools.count is atomic under the GIL and uses an
# internal lock on free-threaded builds, so levels are unique across threads.
_levels = itertools.count(1)

#: Marker stored in ``Tape.nodes`` for an input (leaf) position.
LEAF = None


class EscapedTracerError(RuntimeError):
    """A traced value was used after the ``grad``/``vjp`` call that traced it ended."""


class ClosedNodes(list):
    """The nodes of a finished tape: readable (pullbacks sweep them again),
    but appending -- recording an operation on a value that escaped its
    ``grad`` call through a global, a closure or an aux output -- raises.
    A list subclass, so checking costs the recording hot path nothing."""

    __slots__ = ()

    def append(self, node):
        raise EscapedTracerError(
            "tapestry: a traced value was used after the tapestry.grad / vjp call "
            "that traced it had returned (it escaped through a global, a closure, "
            "an attribute or an aux output). Its tape is closed, so the operation "
            "cannot be differentiated. Store tapestry.stop_gradient(value) instead, "
            "or do this computation inside the function being differentiated.")


_CLOSED_EMPTY = ClosedNodes()


class Tape:
    """A linear record of operations.

    ``nodes[i]`` is ``LEAF`` for an input, or a tuple
    ``(parents, rules, ans, args, kwargs, prim)``: the tape positions of the
    active inputs, one VJP rule per active input, what the rules need, and
    the primitive recorded (see ``tapestry.core.primitive.record``).
    A tape nested in another computation (a parallel chunk, a checkpointed
    region, an inner ``grad``) needs no link to it: its higher ``level``
    is what orders them.
    """

    __slots__ = ("nodes", "level", "owned", "copies", "__weakref__")

    def __init__(self):
        self.nodes: list = []
        self.level = next(_levels)
        #: ``{}`` for a trace that outlives its call (vjp, linearize): its
        #: pullback may run later, and more than once.
        self.owned = None
        #: The copies of plain arrays the nodes keep, by id (``own_constant``).
        self.copies = None

    def own_constant(self, x):
        """The copy a node keeps of the plain array ``x`` that an operation
        met beside a traced value (a closed-over weight, a scratch buffer):
        rules read their constants at the backward sweep, after the rest of
        the function (and, for a kept trace, the caller) ran.  A write into
        ``x`` in between (``buf[:] = 7`` after ``a = x * buf``; ``W -= lr * g``
        between ``vjp`` and its pullback) would otherwise move the gradient
        to the new values without a word.  One copy per array and value: a
        later operation on ``x`` compares it with the copy (``memcmp``) and
        shares it when equal, and gets a copy of its own when ``x`` was
        written in between.  Beyond ``COPY_ALWAYS`` bytes, read-only memory
        of its own is kept as is."""
        n = x.nbytes
        if n <= COPY_ALWAYS:
            # (laid out as x: a rule summing over it adds in x's memory order,
            # as jit's program, which reads x itself, does)
            return x.copy(order="K")  # cheaper than finding the copy of an earlier use
        if not (x.flags.writeable or x.base is not None):
            return x  # read-only memory of its own: nothing can change it
        copies = self.copies
        if copies is None:
            copies = self.copies = {}
        got = copies.get(id(x))
        if got is not None and got[0]() is x:  # (another array may have x's old id)
            copy = got[1]
            if copy.shape == x.shape and copy.dtype == x.dtype and got[2](x, n):
                return copy
        copy = x.copy(order="K")
        # x by weak reference: the node holds the copy, and x is freed when
        # the function drops it (a fresh array per loop step keeps one copy)
        copies[id(x)] = (weakref.ref(x), copy, _unchanged(x, copy))
        return copy

    def __len__(self):
        return len(self.nodes)

    def close(self, keep=True):
        """Finish recording: later appends raise :class:`EscapedTracerError`.
        With ``keep`` the nodes stay readable for later sweeps (pullbacks;
        one pointer copy per node); without, they are dropped."""
        if self.nodes.__class__ is not ClosedNodes:
            self.nodes = ClosedNodes(self.nodes) if keep else _CLOSED_EMPTY

    def __repr__(self):
        return f"<Tape level={self.level} nodes={len(self.nodes)}>"


#: Arrays up to this many bytes are copied at every use: a copy costs less
#: than looking up and comparing the copy an earlier use made.
COPY_ALWAYS = 4096


def _unchanged(x, copy):
    """A test ``unchanged(x, nbytes)``: whether ``x`` still holds the bits
    of ``copy`` (made from it; the caller compares shapes and dtypes).  The
    copy's address is read once here (``.ctypes.data`` costs a
    microsecond); ``x``'s at each test (``x.resize`` may move its buffer)."""
    cmp = _memcmp()
    if cmp and x.flags.c_contiguous and copy.flags.c_contiguous and not x.dtype.hasobject:
        pb = copy.ctypes.data
        return lambda x, n: x.flags.c_contiguous and cmp(x.ctypes.data, pb, n) == 0
    return lambda x, n: same_bits(x, copy)


def same_bits(a, copy):
    """Whether the array ``a`` holds the bits of ``copy``, an array of its
    shape and dtype made as a copy of it (object arrays: the same objects)."""
    import numpy as np
    if a.shape != copy.shape or a.dtype != copy.dtype:
        return False
    if a.dtype.hasobject:
        return all(x is y for x, y in zip(a.flat, copy.flat))
    if a.size == 0 or a.dtype.itemsize == 0:
        return True
    cmp = _memcmp()
    if cmp and a.flags.c_contiguous and copy.flags.c_contiguous:
        return cmp(a.ctypes.data, copy.ctypes.data, a.nbytes) == 0
    return bool(np.array_equal(np.ascontiguousarray(a).reshape(-1).view(np.uint8),
                               np.ascontiguousarray(copy).reshape(-1).view(np.uint8)))


_libc_memcmp = None


def _memcmp():
    """The C library's ``memcmp`` (``False`` where there is none)."""
    global _libc_memcmp
    if _libc_memcmp is None:
        try:
            import ctypes
            f = ctypes.CDLL(None).memcmp
            f.restype = ctypes.c_int
            f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
            _libc_memcmp = f
        except (OSError, AttributeError):  # pragma: no cover - no libc
            _libc_memcmp = False
    return _libc_memcmp


class open_tape:
    """``with open_tape() as tape``: a new tape, closed when the block ends
    (so a value that escapes the computation cannot record on it).

    No stack of open tapes is kept, per thread or otherwise: which tape
    records an operation is decided by its traced arguments' levels alone,
    so a worker thread or a nested ``grad`` simply opens its own tape.  A
    class rather than a generator context manager: this runs once per
    gradient call and per parallel chunk (~0.5 us instead of ~2 us).
    """

    __slots__ = ("tape", "close")

    def __init__(self, close=True):
        self.tape = Tape()
        # ``close=False``: the caller sweeps the still-plain node list (the
        # fastest to index and release) and closes the tape itself after.
        self.close = close

    def __enter__(self):
        refused_float.err = None  # (only this computation's refusals explain its errors)
        return self.tape

    def __exit__(self, kind, err, tb):
        if self.close:
            self.tape.close()
        if kind is ValueError:
            named = written_into_plain(err)
            if named is not None:
                raise named from err
        return False


#: The last ``float()`` of a traced value refused on this thread
#: (``.err``): ``out.flat[i] = v`` replaces that refusal by NumPy's
#: "Error setting single item of array." with no cause attached.
refused_float = threading.local()
_FLAT_SET = "Error setting single item of array."


def written_into_plain(err):
    """A ``TypeError`` that names the write, for NumPy's ``ValueError``
    ("setting an array element with a sequence") raised by ``out[i] = v``
    with a traced 0-d ``v`` and a plain float array ``out``: NumPy converts
    ``v`` with ``float()``, which tapestry refuses, and puts its own message,
    which names neither the write nor what to do, on top (``out.flat[i] =
    v`` even drops the refusal: then the refusal this thread saw last is
    the cause).  ``None`` for any other error (the function's own
    ``ValueError`` passes unchanged)."""
    last = getattr(refused_float, "err", None)
    refused_float.err = None
    if not getattr(err.__cause__, "traced_float", False) and \
            not (last is not None and err.__cause__ is None and err.args == (_FLAT_SET,)):
        return None
    return TypeError(
        "tapestry: writing a traced array into a plain NumPy array (out[i] = v into "
        "an array made by np.zeros / np.empty, out.fill(v), np.fromiter): NumPy converts "
        "v with float(), which would drop its gradient. Make the buffer from a traced input, "
        "which tapestry then follows: out = np.zeros_like(x, shape=(n,)) for out = np.zeros(n) "
        "(also np.empty_like, np.full_like); or build the array from the values: collect "
        "them in a list and np.stack it (out = np.stack(rows)), or use np.where / "
        "np.concatenate.")
