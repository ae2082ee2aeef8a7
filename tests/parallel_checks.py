"""Shared checks for the parallel tests: same bits, and calls from several
threads at once."""
from __future__ import annotations

import threading

import numpy as np

import tapestry as tp


def assert_bits(a, b):
    """``a`` and ``b`` (pytrees) hold the same arrays, bit for bit."""
    la, lb = tp.tree_flatten(a)[0], tp.tree_flatten(b)[0]
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        assert np.array_equal(np.asarray(u), np.asarray(v))


def run_concurrently(fn, n=4):
    """``[fn() ...]`` from ``n`` threads started together; an exception in
    any of them is raised here, never swallowed."""
    results, errors = [None] * n, []

    def run(k):
        try:
            results[k] = fn()
        except Exception as e:  # reported below
            errors.append(e)
    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
