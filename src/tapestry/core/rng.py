"""Random state saved before a forward pass and replayed when the forward
is computed again (``tp.checkpoint``, ``parallel_map``'s recompute on
process and Dask workers).

A backward pass that recomputes ``f`` must see the random numbers the first
run drew, or the gradient belongs to a different function than the value
returned (dropout masks would differ).  What can be replayed: NumPy's
global ``np.random`` state, and every ``np.random.Generator`` or
``RandomState`` passed among the arguments (found as pytree leaves).  A
generator captured in a closure is invisible here and is *not* replayed.

Replaying is fork-like (as ``torch.random.fork_rng``): the states are set
to the saved ones for the recompute, then put back, so recomputing never
advances anyone's random stream.
"""
from __future__ import annotations

import numpy as np

from .pytree import tree_flatten

_KINDS = (np.random.Generator, np.random.RandomState)


def generators(tree):
    """The generators among the leaves of ``tree``, in leaf order."""
    return [x for x in tree_flatten(tree)[0] if isinstance(x, _KINDS)]


def _get(g):
    return g.bit_generator.state if isinstance(g, np.random.Generator) else g.get_state()


def _set(g, state):
    if isinstance(g, np.random.Generator):
        g.bit_generator.state = state
    else:
        g.set_state(state)


def capture(tree):
    """Picklable snapshot: the global state and each generator's of ``tree``."""
    return np.random.get_state(), [_get(g) for g in generators(tree)]


class replay:
    """Context: the random states of ``snapshot`` (from :func:`capture` on a
    tree with the same generators) for the body, the current ones after."""

    def __init__(self, snapshot, tree):
        self.snapshot, self.gens = snapshot, generators(tree)

    def __enter__(self):
        self.now = np.random.get_state(), [_get(g) for g in self.gens]
        _restore(self.snapshot, self.gens)

    def __exit__(self, *exc):
        _restore(self.now, self.gens)


def _restore(snapshot, gens):
    state, states = snapshot
    np.random.set_state(state)
    for g, s in zip(gens, states):
        _set(g, s)
