"""A shared sweeper for rule tests: random inputs in a domain, every dtype and
memory layout, shapes from hypothesis.

``check_all(f, *args)`` runs :func:`tapestry.testing.check_grads` on ``f`` in
float64 and float32 and with C-contiguous and non-contiguous inputs, so one
line per op covers the matrix the project asks of every rule.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tapestry.testing import check_grads

#: Settings for rule sweeps: few examples (the machine is shared), no deadline.
SWEEP = settings(max_examples=20, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow])

DTYPES = (np.float64, np.float32)

#: Input domains: name -> (low, high) of a uniform draw, or "normal".
DOMAINS = {
    "normal": None,
    "pos": (0.5, 2.0),        # log, sqrt, reciprocal, power base
    "unit": (-0.9, 0.9),      # arcsin, arccos, arctanh
    "gt1": (1.2, 3.0),        # arccosh
    "away": (0.3, 2.0),       # sign-symmetric, kept away from 0 (abs, cbrt)
}


def rand(shape, domain="normal", seed=0, dtype=np.float64):
    """A random array of ``shape`` in ``domain`` (see :data:`DOMAINS`)."""
    rng = np.random.default_rng(seed)
    lim = DOMAINS[domain]
    if lim is None:
        x = rng.standard_normal(shape)
    else:
        x = rng.uniform(*lim, size=shape)
        if domain == "away":
            x = x * rng.choice([-1.0, 1.0], size=shape)
    return np.asarray(x, dtype=dtype)


def crand(shape, domain="normal", seed=0, dtype=np.complex128):
    """A random complex array: the real part drawn as :func:`rand` draws it
    in ``domain`` (so "pos" keeps clear of the negative real axis, the branch
    cut of log, sqrt and power; "unit" of the cuts of arcsin, arctanh and the
    poles of tan), the imaginary part uniform in (-0.5, 0.5) ("normal":
    standard normal)."""
    re = rand(shape, domain, seed)
    rng = np.random.default_rng(seed + 1000)
    im = rng.standard_normal(shape) if domain == "normal" else rng.uniform(-0.5, 0.5, shape)
    return np.asarray(re + 1j * im, dtype=dtype)


def noncontig(x):
    """The same values in a strided (non-contiguous) view."""
    x = np.asarray(x)
    if x.ndim == 0:
        return x
    big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    big[..., ::2] = x
    view = big[..., ::2]
    assert x.size == 0 or not view.flags.c_contiguous or x.shape[-1] <= 1
    return view


def variants(args):
    """``args`` as float64, float32, and non-contiguous float64 (complex
    arrays: complex128, complex64, non-contiguous complex128)."""
    f64 = tuple(a.astype(_WIDE[a.dtype.kind]) if _is_float(a) else a for a in args)
    yield f64
    yield tuple(a.astype(_NARROW[a.dtype.kind]) if _is_float(a) else a for a in f64)
    yield tuple(noncontig(a) if _is_float(a) else a for a in f64)


_WIDE = {"f": np.float64, "c": np.complex128}
_NARROW = {"f": np.float32, "c": np.complex64}


def _is_float(a):
    return isinstance(a, np.ndarray) and a.dtype.kind in "fc"


def check_all(f, *args, order=1, **kw):
    """check_grads over every dtype and layout of ``args``, and
    :func:`check_vmap` on the float64 ones."""
    for vs in variants(args):
        check_grads(f, vs, order=order, **kw)
    check_vmap(f, args)
    check_jit(f, args)


def _other_item(a):
    """Another item from the same domain: ``a``'s values in reverse order."""
    return np.array(a.ravel()[::-1].reshape(a.shape))


def check_vmap(f, args):
    """``tapestry.vmap(f)`` on a batch of two items (the float arguments and
    their values reversed; other arguments shared) gives what ``f`` gives on
    each item: the batching rule of every op the sweep reaches, or its
    fallback loop, against the op itself."""
    import tapestry as tp
    batched = [_is_float(a) for a in args]
    if not any(batched):
        return
    expected = [f(*args)]
    try:  # values reversed; arguments that must stay ordered (bins) get scaled instead
        items = [args, tuple(_other_item(a) if b else a for a, b in zip(args, batched))]
        expected.append(f(*items[1]))
    except (ValueError, np.linalg.LinAlgError):
        items = [args, tuple(a * 0.97 if b else a for a, b in zip(args, batched))]
        expected.append(f(*items[1]))
    stacked = tuple(np.stack([items[0][k], items[1][k]]) if b else a
                    for k, (a, b) in enumerate(zip(args, batched)))
    axes = tuple(0 if b else None for b in batched)
    got = tp.vmap(f, in_axes=axes)(*stacked)
    exp_leaves, exp_td = tp.tree_flatten(expected[0])
    got_leaves, got_td = tp.tree_flatten(got)
    assert got_td == exp_td, (got_td, exp_td)
    for k, g in enumerate(got_leaves):
        want = np.stack([np.asarray(tp.tree_flatten(e)[0][k]) for e in expected])
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-10, atol=1e-12,
                                   equal_nan=True, err_msg="tapestry.vmap against a loop")


def _weighted_sum(out):
    """A scalar that depends on every element of every output leaf, with
    weights fixed by the leaf's shape (so the replay's gradient is checked
    element by element, not only in sum)."""
    import tapestry as tp
    total = 0.0
    for leaf in tp.tree_leaves(out):
        if getattr(leaf, "dtype", np.dtype(float)).kind not in "fc":
            continue
        w = np.cos(np.arange(np.size(leaf), dtype=np.float64)).reshape(np.shape(leaf))
        total = total + np.sum(np.real(leaf) * w)
    return total


#: ops whose jit trace ran uncompiled (a warning), by the reason given
JIT_UNCOMPILED: dict = {}
#: functions whose jit result was not bit-identical to the plain call
JIT_INEXACT: list = []
#: Sweep tests (pytest node id, with its parameters for one op, or without
#: for all of them) whose jit replay may differ from the plain call in the
#: last bits, with the reason; they are held to rtol=1e-13 instead.  Every
#: other op is compared bit for bit.  Empty: no op needs it.
JIT_NOT_BITWISE: dict = {}


def _report():
    import os
    path = os.environ.get("TAPESTRY_JIT_SWEEP_REPORT")
    if path:
        with open(path, "w") as fh:
            for k, v in sorted(JIT_UNCOMPILED.items(), key=lambda kv: -kv[1]):
                fh.write(f"UNCOMPILED {v} {k}\n")
            for k in JIT_INEXACT:
                fh.write(f"INEXACT {k}\n")


import atexit  # noqa: E402

atexit.register(_report)


def check_jit(f, args):
    """``tapestry.jit`` of ``f`` and of the gradient of a weighted sum of its
    outputs give, bit for bit, what the uncompiled calls give: on the
    traced arguments, then replayed on other values of the same shapes."""
    import os
    import warnings

    import tapestry as tp
    nums = tuple(i for i, a in enumerate(args) if _is_float(a))
    if not nums:
        return
    try:
        other = tuple(_other_item(a) if _is_float(a) else a for a in args)
        f(*other)
    except (ValueError, np.linalg.LinAlgError):
        other = tuple(a * 0.97 if _is_float(a) else a for a in args)
    g = tp.grad(lambda *a: _weighted_sum(f(*a)), argnums=nums)
    for fun in (f, g):
        try:
            expected = [fun(*args), fun(*other)]
        except (TypeError, ValueError, NotImplementedError):
            continue  # not differentiable here (integer outputs): f alone is checked
        jf = tp.jit(fun)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", tp.JitWarning)
            got = [jf(*args), jf(*other)]
        for w in caught:
            if issubclass(w.category, tp.JitWarning):
                key = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0] + " " + str(w.message)
                JIT_UNCOMPILED[key] = JIT_UNCOMPILED.get(key, 0) + 1
        for e, r in zip(expected, got):
            el, etd = tp.tree_flatten(e)
            gl, gtd = tp.tree_flatten(r)
            assert gtd == etd, (gtd, etd)
            for a, b in zip(el, gl):
                a, b = np.asarray(a), np.asarray(b)
                if a.shape == b.shape and a.dtype == b.dtype and \
                        a.tobytes() == b.tobytes():
                    continue
                test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
                JIT_INEXACT.append(test)
                assert test in JIT_NOT_BITWISE or test.split("[")[0] in JIT_NOT_BITWISE, (
                    f"tapestry.jit of {'the gradient' if fun is g else 'the function'} "
                    f"is not bit-identical to the plain call: "
                    f"{np.array2string(b, precision=17)} ({b.dtype}) against "
                    f"{np.array2string(a, precision=17)} ({a.dtype})")
                np.testing.assert_allclose(b, a, rtol=1e-13, atol=0, equal_nan=True,
                                           err_msg="tapestry.jit against the plain call")


# --- hypothesis strategies ------------------------------------------------------
def shapes(min_dims=0, max_dims=3, min_side=0, max_side=4):
    """Array shapes including 0-d and (with ``min_side=0``) size-0 ones."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims,
                            min_side=min_side, max_side=max_side)


def broadcast_pair(max_dims=3, max_side=4, min_side=0):
    """Two mutually broadcastable shapes."""
    return hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=max_dims,
                                             min_side=min_side, max_side=max_side
                                             ).map(lambda r: r.input_shapes)


@st.composite
def shape_and_axis(draw, min_dims=1, max_dims=3, max_side=4, min_side=0):
    """A shape and an ``axis`` argument for it: None, an int (maybe negative)
    or a tuple of distinct axes."""
    shape = draw(shapes(min_dims, max_dims, min_side, max_side))
    nd = len(shape)
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none" or nd == 0:
        return shape, None
    if kind == "int":
        return shape, draw(st.integers(-nd, nd - 1))
    axes = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
    return shape, tuple(axes)
