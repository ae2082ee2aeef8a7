"""A reusable shared-memory file that carries one call's arrays to process
workers on this machine and brings their gradients back.

Measured on W4 (64 models, 2 loky workers): pickling the 1.1 MB of model
arrays, piping them to the workers and the gradients back cost ~4 ms of a
~25 ms call (a loky round trip of two 560 KB payloads: 3.7 ms, against
1.1 ms for empty ones), and the caller's pickling competes with the
workers for the same two cores.  Instead, the caller copies every array of
the call's chunks into an arena (one ``memcpy`` each) and sends only
``(offset, shape, dtype)``; workers map the arena once and read the arrays
in place.  Each group of chunks also gets a result region sized for the
gradients of its active leaves: workers write gradient arrays there and
send references back, and the caller copies them out before the arena is
reused (it is reused by the next call, so nothing handed to the user may
point into it).

Arenas are files in ``/dev/shm`` kept in a small bounded pool (at most
``_MAX_POOLED`` arenas and ``MAX_POOLED_BYTES`` in all; a bigger arena is
removed when its call ends); a call takes the smallest that fits and gives
it back when its results are in.  Each file is registered with Python's
resource tracker, which removes it if the caller is killed.  Calls from several threads
take different arenas.  A retried task reads the same inputs and rewrites
its own result region, so tasks stay stateless.
"""
from __future__ import annotations

import atexit
import mmap
import os
import threading

import numpy as np

from .shm import _DIR, mapping, track, untrack

#: Arrays smaller than this are pickled with the task (a reference costs
#: about as much to pickle as a small array).
MIN_BYTES = 1024
_ALIGN = 64
_MIN_CAPACITY = 1 << 20
_MAX_POOLED = 2
#: Pooled arenas hold at most this much ``/dev/shm`` between calls.
MAX_POOLED_BYTES = 64 << 20

_pool: list = []  # caller side: free arenas
_all: dict = {}   # path -> Arena, for cleanup at exit
_lock = threading.Lock()


class Arena:
    """Caller side: one shared file mapped read-write, used as a bump allocator."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.path = os.path.join(_DIR, f"tapestry-arena-{os.getpid()}-{os.urandom(6).hex()}")
        with open(self.path, "w+b") as fh:
            track(self.path)
            fh.truncate(capacity)
            self.mm = mmap.mmap(fh.fileno(), capacity)
        self.used = 0

    def alloc(self, nbytes):
        """Offset of a fresh block of ``nbytes`` (aligned)."""
        off = self.used
        self.used = off + block_bytes(nbytes)
        if self.used > self.capacity:
            raise MemoryError("tapestry.parallel arena overflow")  # sizes are computed first
        return off

    def put(self, x):
        """Copy array ``x`` in; its reference (an ``(offset, shape, dtype)``
        tuple, see below)."""
        ref = (self.alloc(x.nbytes), x.shape, x.dtype.str)
        _array(self.mm, ref)[...] = x
        return ref

    def take(self, leaves):
        """Leaves with result references replaced by copies (the arena will
        be reused, so nothing returned may point into it)."""
        mm = self.mm
        return [_array(mm, x).copy() if type(x) is tuple else x for x in leaves]

    def close(self):
        try:
            self.mm.close()
        except BufferError:  # a view is still alive somewhere; the mapping goes with it
            pass
        untrack(self.path)


def acquire(nbytes):
    """The smallest pooled arena with room for ``nbytes`` (emptied), or a new one."""
    with _lock:
        fits = [a for a in _pool if a.capacity >= nbytes]
        if fits:
            a = min(fits, key=lambda x: x.capacity)
            _pool.remove(a)
            a.used = 0
            return a
    cap = _MIN_CAPACITY
    while cap < nbytes:
        cap *= 2
    a = Arena(cap)
    with _lock:
        _all[a.path] = a
    return a


def release(a):
    """Give an arena back to the pool; past the pool's bounds the largest
    (over the byte bound) or smallest (over the count) are removed."""
    drop = []
    with _lock:
        _pool.append(a)
        while len(_pool) > _MAX_POOLED or sum(x.capacity for x in _pool) > MAX_POOLED_BYTES:
            over_bytes = sum(x.capacity for x in _pool) > MAX_POOLED_BYTES
            d = (max if over_bytes else min)(_pool, key=lambda x: x.capacity)
            _pool.remove(d)
            _all.pop(d.path, None)
            drop.append(d)
    for d in drop:
        d.close()


def discard(a):
    """Drop an arena that tasks may still write to (after an error)."""
    with _lock:
        _all.pop(a.path, None)
    a.close()


@atexit.register
def _close_all():
    for a in list(_all.values()):
        a.close()
    _all.clear()


def placeable(x):
    """Whether ``x`` travels through the arena rather than pickled."""
    return type(x) is np.ndarray and x.nbytes >= MIN_BYTES and not x.dtype.hasobject


def block_bytes(nbytes):
    return -(-max(nbytes, 1) // _ALIGN) * _ALIGN


# A reference to an array in the arena is the tuple ``(offset, shape, dtype
# string)``.  It travels in a flat list of pytree leaves, where a tuple can
# never be a leaf (tuples are tree nodes), so no marker class is needed, and
# the C pickler handles tuples without calling back into Python (a class
# with ``__getstate__`` cost ~2 us per array).


# --- worker side: the arena is mapped once per worker (shm.mapping) ---------------------
def _array(b, ref):
    """The array a reference points to in mapping ``b`` (no copy)."""
    return np.ndarray(ref[1], ref[2], buffer=b, offset=ref[0])


def resolve(path, leaves):
    """Worker side: references replaced by arrays on the arena (no copy:
    the arena holds this call's private copy of the inputs)."""
    b = mapping(path, writable=True)
    return [_array(b, x) if type(x) is tuple else x for x in leaves]


def put_results(path, region, leaves):
    """Worker side: result arrays written into ``region = (offset, end)``
    while they fit, replaced by references; the rest stays as is."""
    b = mapping(path, writable=True)
    off, end = region
    out = []
    for x in leaves:
        if placeable(x) and off + x.nbytes <= end:
            ref = (off, x.shape, x.dtype.str)
            _array(b, ref)[...] = x
            off += block_bytes(x.nbytes)
            x = ref
        out.append(x)
    return out
