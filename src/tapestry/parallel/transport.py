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

For workers on this machine, the chunks' other arrays travel through an
arena (:mod:`.arena`): copied once into shared memory by the caller, read
in place by the worker, and gradients come back the same way.

Every task is still stateless and retryable: a head always travels with
its task; the cache only saves unpickling it again.
"""
from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict

import numpy as np

from ..core.pytree import tree_flatten
from . import arena as _arena
from .shm import from_refs, leaf_ref, to_refs
from .work import Task

_HEADS: OrderedDict = OrderedDict()  # worker side: token -> (fn, f, shared)
_MAX_HEADS = 4


class Packed:
    """One group's payload: ``(token, head bytes, body bytes, refs, arena,
    region)``; ``refs`` says whether the body holds shared-memory
    references, ``arena`` is the path of the call's arena (or ``None``) and
    ``region`` the ``(offset, end)`` of the group's result space in it;
    ``flat``: the body is ``(treedef, leaves)`` (local workers)."""

    __slots__ = ("token", "head", "body", "refs", "arena", "region", "flat")

    def __init__(self, token, head, body, refs, arena=None, region=None, flat=False):
        self.token, self.head, self.body, self.refs = token, head, body, refs
        self.arena, self.region, self.flat = arena, region, flat

    def __getstate__(self):
        return (self.token, self.head, self.body, self.refs, self.arena, self.region,
                self.flat)

    def __setstate__(self, s):
        (self.token, self.head, self.body, self.refs, self.arena, self.region,
         self.flat) = s


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


class Call:
    """The packed groups of one call (:attr:`payloads`, an iterator) and
    the arena they use; :meth:`unpack` turns a group's result back into
    the list of its chunk results; :meth:`done` gives the arena back.

    For local workers a group's body is ``(treedef, leaves)``: one flatten
    of its rows, then one pass over the leaves that swaps shared arrays for
    their references and copies the other arrays into the arena.
    """

    def __init__(self, fn, groups, local=True):
        t0 = groups[0][0]
        shared = to_refs(t0.shared)[0] if local else t0.shared
        self.head = _cloudpickle().dumps((fn, t0.f, shared), protocol=5)
        self.token = hashlib.blake2b(self.head, digest_size=16).digest()
        rows = [[(t.start, t.chunk, t.active, t.batched) for t in g] for g in groups]
        self.arena = None
        if not local:
            self.payloads = (Packed(self.token, self.head, _dumps_data(r), False)
                             for r in rows)
            return
        flat = [tree_flatten(r) for r in rows]
        self.refs = [_swap_shared(leaves) for leaves, _ in flat]
        need = [sum(_arena.block_bytes(x.nbytes) for x in leaves if _arena.placeable(x))
                for leaves, _ in flat]
        out = [n + len(g) * _shared_grad_bytes(t0) for n, g in zip(need, groups)]
        if sum(need) + sum(out):
            self.arena = _arena.acquire(sum(need) + sum(out))
            regions = [(o, o + n) for n in out for o in (self.arena.alloc(n),)]
        else:
            regions = [None] * len(groups)
        self.payloads = self._payloads(flat, regions)

    def _payloads(self, flat, regions):
        """Lazily, so the first group can be submitted while the next is packed."""
        a = self.arena
        for (leaves, td), region, refs in zip(flat, regions, self.refs):
            if a is not None:
                for k, x in enumerate(leaves):
                    if _arena.placeable(x):
                        leaves[k] = a.put(x)
            yield Packed(self.token, self.head, _dumps_data((td, leaves)), refs,
                         a.path if a is not None else None, region, flat=True)

    def unpack(self, result):
        r = _loads_data(result)
        if type(r) is tuple:  # (treedef, leaves) from a local worker
            td, leaves = r
            if self.arena is not None:
                leaves = self.arena.take(leaves)
            return td.unflatten(leaves)
        return r

    def done(self, clean=True):
        """Return the arena to the pool; after an error (tasks may still be
        writing into it) drop it instead."""
        a, self.arena = self.arena, None
        if a is not None:
            _arena.release(a) if clean else _arena.discard(a)


def _swap_shared(leaves):
    """Replace arrays in shared memory by their references, in place;
    whether there were any."""
    found = False
    for k, x in enumerate(leaves):
        if type(x) is np.ndarray:
            r = leaf_ref(x)
            if r is not None:
                leaves[k], found = r, True
    return found


def _shared_grad_bytes(task):
    """Arena bytes for one chunk's gradients of the active shared arguments."""
    n_chunk = len(tree_flatten(task.chunk)[0])
    shared = tree_flatten(task.shared)[0]
    return sum(_arena.block_bytes(shared[k - n_chunk].nbytes) for k in task.active
               if k >= n_chunk and _arena.placeable(shared[k - n_chunk]))


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
    """Worker side: run a group's chunks in order; results pre-pickled
    (their arrays written to the arena's result region while they fit)."""
    fn, f, shared = _head(p)
    body = _loads_data(p.body)
    if not p.flat:  # workers elsewhere (Dask): plain rows, no shared memory
        return _dumps_data([fn(Task(f, s, c, shared, a, b)) for s, c, a, b in body])
    td, leaves = body
    if p.refs:
        leaves = from_refs(leaves)
    if p.arena is not None:
        leaves = _arena.resolve(p.arena, leaves)
    out = [fn(Task(f, s, c, shared, a, b)) for s, c, a, b in td.unflatten(leaves)]
    leaves, td = tree_flatten(out)
    if p.region is not None:
        leaves = _arena.put_results(p.arena, p.region, leaves)
    return _dumps_data((td, leaves))
