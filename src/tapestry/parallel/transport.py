"""How chunk tasks travel to worker processes and their results come back.

Measured on W4 (64 models, 2 workers): cloudpickling every task group cost
the caller ~5 ms per call (cloudpickle's Python-level hook runs on every
small array and dict), and that caller CPU competes with the two workers
for the same two cores.  So a call is packed in two parts:

* a **head**, ``(fn, f, shared)``, cloudpickled once per call (``f`` may be
  a lambda) and tagged with a content token; a worker keeps the last few
  heads it unpickled, so it skips ``loads`` when the same head comes again;
* a **body** per group, the chunks' items with the C pickler (protocol 5),
  falling back to cloudpickle only when plain pickle refuses an item.

Results come back pre-pickled by the worker with the C pickler, so loky's
own (cloudpickle) result channel carries one ``bytes`` object.  Arrays in
shared memory (:func:`tapestry.parallel.share`) travel as references.

Every task is still stateless and retryable: a head always travels with
its task; the cache only saves unpickling it again.
"""
from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict

from .shm import from_refs, to_refs
from .work import Task

_HEADS: OrderedDict = OrderedDict()  # worker side: token -> (fn, f, shared)
_MAX_HEADS = 4


class Packed:
    """One group's payload: ``(token, head bytes, body bytes, refs)``;
    ``refs`` says whether the body holds shared-memory references."""

    __slots__ = ("token", "head", "body", "refs")

    def __init__(self, token, head, body, refs):
        self.token, self.head, self.body, self.refs = token, head, body, refs

    def __getstate__(self):
        return (self.token, self.head, self.body, self.refs)

    def __setstate__(self, s):
        self.token, self.head, self.body, self.refs = s


def _cloudpickle():
    try:
        import cloudpickle
    except ImportError as e:
        raise ImportError("tapestry.parallel: process and Dask executors need "
                          "cloudpickle; pip install 'tapestry[processes]'.") from e
    return cloudpickle


def _dumps_data(obj):
    """C pickler first (fast on many small arrays), cloudpickle if refused."""
    try:
        return b"p" + pickle.dumps(obj, protocol=5)
    except Exception:
        return b"c" + _cloudpickle().dumps(obj, protocol=5)


def _loads_data(b):
    return pickle.loads(memoryview(b)[1:])  # cloudpickle output loads with pickle


def pack(fn, groups, local=True):
    """One :class:`Packed` per group of tasks (all tasks of one call share
    ``f`` and ``shared``), lazily, so the first group can be submitted while
    the next is packed.  ``local``: the workers run on this machine, so
    shared-memory arrays travel as references."""
    t0 = groups[0][0]
    shared = to_refs(t0.shared)[0] if local else t0.shared
    head = _cloudpickle().dumps((fn, t0.f, shared), protocol=5)
    token = hashlib.blake2b(head, digest_size=16).digest()
    for g in groups:
        rows, refs = [(t.start, t.chunk, t.active, t.batched) for t in g], False
        if local:
            rows, refs = to_refs(rows)
        yield Packed(token, head, _dumps_data(rows), refs)


def _head(p):
    h = _HEADS.get(p.token)
    if h is None:
        fn, f, shared = pickle.loads(p.head)
        h = _HEADS[p.token] = (fn, f, from_refs(shared))
        while len(_HEADS) > _MAX_HEADS:
            _HEADS.popitem(last=False)
    else:
        _HEADS.move_to_end(p.token)
    return h


def run_packed(p):
    """Worker side: run a group's chunks in order; results pre-pickled."""
    fn, f, shared = _head(p)
    rows = _loads_data(p.body)
    if p.refs:
        rows = from_refs(rows)
    return _dumps_data([fn(Task(f, s, c, shared, a, b)) for s, c, a, b in rows])


def unpack(result):
    """Caller side: the list of chunk results of one group."""
    return _loads_data(result)
