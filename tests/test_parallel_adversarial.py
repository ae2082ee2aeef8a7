"""Edge cases of parallel_sum / parallel_map found by probing them against
the plain loop and tapestry.vmap: items with no rows, and the first
process-pool call made inside a jit trace."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.jit import JitWarning


def _f(x, w):
    return {"a": x * w, "b": (np.sum(x), np.float32(2.0) * x[0])}


def _same_tree(a, b):
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same_tree(a[k], b[k])
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same_tree(x, y)
    else:
        assert a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
@pytest.mark.parametrize("how", ["item", "vectorize", "batched"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_map_over_items_with_no_rows_gives_vmaps_empty_outputs(executor, how, dtype):
    # parallel_map stacks outputs "like vmap": 0 rows give f's outputs with 0
    # rows (this returned None, and grad then said "a missing return?")
    X, w = np.ones((0, 3), dtype), np.arange(3.0).astype(dtype)
    want = tp.vmap(_f, in_axes=(0, None))(X, w)
    kw = {"vectorize": True} if how == "vectorize" else {}
    f = _f
    if how == "batched":
        kw = {"batched": True}
        f = lambda xs, w: {"a": xs * w, "b": (np.sum(xs, axis=1),  # noqa: E731
                                              np.float32(2.0) * xs[:, 0])}
    out = tp.parallel_map(f, X, w, executor=executor, n_workers=2, **kw)
    _same_tree(out, want)
    g = tp.grad(lambda w: np.sum(tp.parallel_map(f, X, w, executor=executor, n_workers=2,
                                                 **kw)["a"]))(w)
    assert g.shape == w.shape and g.dtype == w.dtype and not np.any(g)
    # a pytree of arrays sliced together; a list of no items stays []
    out = tp.parallel_map(lambda it: it["u"] * it["v"], {"u": X, "v": X[:, 0]},
                          executor=executor, n_workers=2)
    assert out.shape == (0, 3) and out.dtype == dtype
    assert tp.parallel_map(lambda x: x, [], executor=executor) == []


def test_map_over_items_with_no_rows_names_what_failed():
    X = np.ones((0, 3))
    with pytest.raises(ValueError, match=r"0 rows.*f's outputs.*float\(\) of a batched"):
        tp.parallel_map(lambda x: float(x[0]), X)
    with pytest.raises(ValueError, match=r"one row per item.*shape \(3,\)"):
        tp.parallel_map(lambda xs: np.ones(3), X, batched=True)


def test_module_imported_inside_a_jit_trace_that_reads_entropy_is_compiled(tmp_path,
                                                                         monkeypatch):
    # a module's first import reading os.urandom (multiprocessing's authkey)
    # happens once, not at every plain call: the function still compiles
    (tmp_path / "parseq_entropy_mod.py").write_text(
        "import os\nKEY = os.urandom(8)\nSCALE = 3.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def f(x):
        import parseq_entropy_mod
        return x * parseq_entropy_mod.SCALE

    jf = tp.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        a = jf(np.arange(3.0))
        b = jf(np.arange(4.0) + 1)
    np.testing.assert_array_equal(a, np.arange(3.0) * 3)
    np.testing.assert_array_equal(b, (np.arange(4.0) + 1) * 3)


def test_first_process_call_inside_jit_compiles_without_a_false_random_warning():
    # in a fresh interpreter the first executor="processes" call imports
    # multiprocessing inside the trace; that read the OS's entropy and the
    # jitted function ran uncompiled "as it draws random numbers"
    code = textwrap.dedent("""
        import sys, warnings
        import numpy as np
        import tapestry as tp
        assert "multiprocessing.process" not in sys.modules
        X = np.linspace(0, 1, 16).reshape(8, 2)
        f = lambda x, w: np.sum(np.sin(x * w))
        L = lambda w: tp.parallel_sum(f, X, w, executor="processes", n_workers=2)
        J = tp.jit(tp.value_and_grad(L))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = J(0.5)
            b = J(0.7)
        print(len([w for w in caught if "uncompiled" in str(w.message)]))
        for got, want in ((a, tp.value_and_grad(L)(0.5)), (b, tp.value_and_grad(L)(0.7))):
            assert got[0] == want[0] and got[1] == want[1], (got, want)
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=240)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "0", run.stdout + run.stderr


@pytest.mark.parametrize("op", [tp.parallel_sum, tp.parallel_map])
@pytest.mark.parametrize("items", [np.ones((4, 2)), [np.ones(2)] * 3, []])
def test_chunk_size_true_is_refused_as_n_workers_true_is(op, items):
    for bad in (True, False):
        with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
            op(np.sum, items, chunk_size=bad)
    with pytest.raises(ValueError, match="n_workers must be a positive integer"):
        op(np.sum, items, n_workers=True, executor="threads")
    assert np.sum(op(np.sum, items, chunk_size=np.int64(2))) == 2.0 * len(items)


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
def test_an_error_in_a_nested_call_keeps_its_type_and_item(executor):
    # the inner ParallelItemError could not be pickled: the outer one said
    # "f raised RuntimeError" and its cause had no .index
    def inner(y, w):
        if y == 0.5:
            raise ZeroDivisionError("bad y")
        return np.sin(y * w)

    M = np.linspace(0, 1, 12).reshape(4, 3)
    M[2, 1] = 0.5
    outer = lambda row, w: tp.parallel_sum(inner, row, w, executor="threads")  # noqa: E731
    with pytest.raises(tp.parallel.ParallelItemError,
                       match=r"f raised ParallelItemError on item 2:.*"
                             r"ZeroDivisionError on item 1: bad y") as info:
        tp.grad(lambda w: tp.parallel_sum(outer, M, w, executor=executor, n_workers=2))(0.3)
    assert info.value.index == 2
    cause = info.value.__cause__
    assert type(cause) is tp.parallel.ParallelItemError and cause.index == 1
    assert "bad y" in cause.worker_traceback


def test_parallel_errors_pickle_with_their_attributes():
    import pickle
    from tapestry.parallel import ParallelTimeoutError, WorkerDiedError
    from tapestry.parallel.faults import ParallelItemError
    for e, attrs in [(ParallelItemError("m", "4..7", "tb"), ("index", "worker_traceback")),
                     (WorkerDiedError("m", range(2, 5)), ("items",)),
                     (ParallelTimeoutError("m", [range(0, 3)]), ("items",))]:
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == "m"
        assert all(getattr(back, a) == getattr(e, a) for a in attrs)
