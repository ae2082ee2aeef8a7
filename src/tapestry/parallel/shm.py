"""Arrays in shared memory, so process workers read big data without copies.

W6 at 100,000 groups ships ~48 MB of observations to worker processes on
every call; pickling, piping and unpickling that cost more than the whole
serial evaluation (x0.12).  ``share(a)`` copies ``a`` once into a file in
``/dev/shm`` and returns an ordinary ``ndarray`` mapped on it: serial and
thread executors use it as any array, and process executors on this
machine send a small reference (file, offset, shape, strides, dtype) for it
and for any view of it; workers map the file once and read it in place,
read-only.  Writes to the returned array are seen by later calls (it *is*
the memory the workers read).  The file is removed when the array and all
its views are garbage collected, or at exit; if this process is killed
first (SIGKILL, the OOM killer), Python's resource tracker -- a small
process of its own -- removes it (:func:`track`).
"""
from __future__ import annotations

import atexit
import itertools
import mmap
import os
import tempfile
import threading
import weakref
from collections import OrderedDict

import numpy as np

_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
_counter = itertools.count()
_owned: dict = {}  # caller side: id(root array) -> (weakref to it, path)
_lock = threading.Lock()


def track(path):
    """Register a file of ``/dev/shm`` with multiprocessing's resource
    tracker, which unlinks it if this process dies without doing so."""
    if _DIR == "/dev/shm":
        from multiprocessing import resource_tracker
        resource_tracker.register("/" + os.path.basename(path), "shared_memory")


def untrack(path):
    """Unlink ``path`` and tell the resource tracker it is gone."""
    try:
        os.unlink(path)
    except OSError:
        return
    if _DIR == "/dev/shm":
        from multiprocessing import resource_tracker
        resource_tracker.unregister("/" + os.path.basename(path), "shared_memory")


def share(a):
    """A copy of ``a`` in shared memory (see the module docstring)."""
    a = np.asarray(a)
    if a.dtype.hasobject:
        raise TypeError("tapestry.parallel.share: object arrays cannot live in shared "
                        "memory; pass numeric arrays.")
    path = os.path.join(_DIR, f"tapestry-{os.getpid()}-{next(_counter)}-{os.urandom(4).hex()}")
    with open(path, "w+b") as fh:
        track(path)
        fh.truncate(max(1, a.nbytes))
        mm = mmap.mmap(fh.fileno(), max(1, a.nbytes))
    root = np.frombuffer(mm, dtype=a.dtype, count=a.size)  # views chain to it
    out = root.reshape(a.shape)
    out[...] = a
    with _lock:
        _owned[id(root)] = (weakref.ref(root), path)
    weakref.finalize(root, _release, id(root), path)
    return out


def _release(key, path):
    with _lock:
        _owned.pop(key, None)
    untrack(path)


@atexit.register
def _release_all():
    for key, (_, path) in list(_owned.items()):
        _release(key, path)


class _Ref:
    """Where a shared array (or a view of one) lives."""

    __slots__ = ("path", "offset", "shape", "strides", "dtype")

    def __init__(self, path, offset, shape, strides, dtype):
        self.path, self.offset, self.shape = path, offset, shape
        self.strides, self.dtype = strides, dtype

    def __getstate__(self):
        return (self.path, self.offset, self.shape, self.strides, self.dtype)

    def __setstate__(self, s):
        self.path, self.offset, self.shape, self.strides, self.dtype = s


def _ref_of(x):
    root = x
    while isinstance(root.base, np.ndarray):
        root = root.base
    entry = _owned.get(id(root))
    if entry is None or entry[0]() is not root:
        return None
    offset = x.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return _Ref(entry[1], offset, x.shape, x.strides, x.dtype.str)


def leaf_ref(x):
    """A reference for a shared array (or a view of one), else ``None``."""
    if _owned and type(x) is np.ndarray and x.base is not None:
        return _ref_of(x)
    return None


def to_refs(obj):
    """``(obj with shared arrays replaced by references, whether any was)``;
    lists, tuples and dicts are walked, and nothing when none is shared."""
    if not _owned:
        return obj, False
    found = []

    def to_ref(x):
        r = leaf_ref(x)
        if r is None:
            return x
        found.append(r)
        return r
    out = _walk(obj, to_ref)
    return (out, True) if found else (obj, False)


def _walk(obj, leaf):
    t = type(obj)
    if t is list:
        return [_walk(v, leaf) for v in obj]
    if t is tuple:
        return tuple(_walk(v, leaf) for v in obj)
    if t is dict:
        return {k: _walk(v, leaf) for k, v in obj.items()}
    return leaf(obj)


# --- worker side -------------------------------------------------------------------------
_maps: OrderedDict = OrderedDict()  # (path, writable) -> mmap
_MAX_MAPS = 16


def mapping(path, writable=False):
    """Worker side: the file at ``path`` mapped once and kept (the last
    ``_MAX_MAPS``): read-only for shared arrays, read-write for a call's
    arena (tapestry.parallel.arena)."""
    key = (path, writable)
    mm = _maps.get(key)
    if mm is None:
        with open(path, "r+b" if writable else "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_WRITE if writable
                           else mmap.ACCESS_READ)
        _maps[key] = mm
        while len(_maps) > _MAX_MAPS:
            _maps.popitem(last=False)
    else:
        _maps.move_to_end(key)
    return mm


def from_refs(obj):
    """Worker side: references replaced by read-only arrays on the mapping."""
    return _walk(obj, _from_ref)


def _from_ref(x):
    if type(x) is _Ref:
        return np.ndarray(x.shape, np.dtype(x.dtype), buffer=mapping(x.path),
                          offset=x.offset, strides=x.strides)
    return x
