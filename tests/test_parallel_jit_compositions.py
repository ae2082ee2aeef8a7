"""``parallel_sum`` of a jitted ``f`` (item by item and ``batched=True``) and
``vectorize=True`` over a list of items, composed with every other
transformation in both orders, against the same code without jit (or with
stacked items): grad, hessian, jvp, jit on either side, vmap on either side,
float32, complex items, a closure over a differentiated value and items that
are differentiated themselves."""
import importlib
import warnings

import numpy as np
import pytest

import tapestry as tp

r = np.random.default_rng(0)
N, M = 12, 4
STACKED = {"x": r.normal(size=(N, M)), "j": np.arange(N) % 5}
LISTED = [{"x": STACKED["x"][i], "j": int(STACKED["j"][i])} for i in range(N)]
U = r.normal(size=5)
U2 = np.stack([U, 2 * U])


def batched_f(g, u, a):
    return np.sum(np.exp(a * g["x"] + u[g["j"]][:, None]))


def item_f(g, u, a):
    return np.sum(np.exp(a * g["x"] + u[g["j"]]))


def psum(f, items, batched=False, vectorize=False, ex="serial"):
    return lambda u, a: tp.parallel_sum(f, items, u, a, batched=batched, vectorize=vectorize,
                                        chunk_size=5, executor=ex)


#: How each composition is applied to a sum ``s(u, a)``.
COMPOSITIONS = {
    "value_and_grad": lambda s: tp.value_and_grad(s, argnums=(0, 1))(U, 0.3),
    "hessian": lambda s: tp.hessian(lambda u: s(u, 0.3))(U),
    "jit(grad)": lambda s: tp.jit(tp.grad(s))(U, 0.3),
    "grad(jit)": lambda s: tp.grad(tp.jit(s))(U, 0.3),
    "vmap(grad)": lambda s: tp.vmap(tp.grad(s), in_axes=(0, None))(U2, 0.3),
    "grad(vmap)": lambda s: tp.grad(lambda u: np.sum(
        tp.vmap(lambda uu: s(uu, 0.3))(np.stack([u, 2 * u]))))(U),
    "jvp": lambda s: tp.jvp(lambda u: s(u, 0.3), (U,), (np.ones(5),)),
}


CASES = {
    "batched, jitted": (lambda fuse: psum(tp.jit(batched_f, fuse=fuse), STACKED, True),
                        lambda fuse: psum(batched_f, STACKED, True)),
    "batched, jitted, threads": (
        lambda fuse: psum(tp.jit(batched_f, fuse=fuse), STACKED, True, ex="threads"),
        lambda fuse: psum(batched_f, STACKED, True)),
    "items, jitted": (lambda fuse: psum(tp.jit(item_f, fuse=fuse), LISTED),
                      lambda fuse: psum(item_f, LISTED)),
    "vectorize over a list": (lambda fuse: psum(item_f, LISTED, vectorize=True),
                              lambda fuse: psum(item_f, STACKED, vectorize=True)),
    "vectorize, jitted": (lambda fuse: psum(tp.jit(item_f, fuse=fuse), STACKED, vectorize=True),
                          lambda fuse: psum(item_f, STACKED, vectorize=True)),
}


def _close(got, want):
    lg, lw = tp.tree_util.tree_leaves(got), tp.tree_util.tree_leaves(want)
    assert len(lg) == len(lw)
    for x, y in zip(lg, lw):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("how", list(COMPOSITIONS))
def test_composed_both_orders(monkeypatch, case, how, fuse):
    if fuse and case == "vectorize over a list":
        pytest.skip("no jit in this case")
    if fuse:  # whole-program kernels kept whatever their timing (small items): the
        # items loop over a whole call is among what is composed
        monkeypatch.setattr(importlib.import_module("tapestry.jit.api"), "_faster",
                            lambda *a, **k: True)
    make_got, make_want = CASES[case]
    got = make_got(fuse)  # (called three times: the later calls replay, and a
    with warnings.catch_warnings():  # jitted item's whole call runs in one loop)
        warnings.simplefilter("ignore")  # (fused loops' "runs uncompiled" notes)
        want = COMPOSITIONS[how](make_want(fuse))
        for _ in range(3):
            _close(COMPOSITIONS[how](got), want)


@pytest.mark.parametrize("fuse", [False, True])
def test_float32_complex_closures_and_differentiated_items(fuse):
    jb = tp.jit(batched_f, fuse=fuse)
    st32 = {"x": STACKED["x"].astype(np.float32), "j": STACKED["j"]}
    u32 = U.astype(np.float32)
    got = tp.grad(psum(jb, st32, True))(u32, np.float32(0.3))
    want = tp.grad(psum(batched_f, st32, True))(u32, np.float32(0.3))
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5)
    stc = {"x": STACKED["x"] + 1j * STACKED["x"], "j": STACKED["j"]}

    def fc(g, u, a):
        return np.sum(np.exp(a * g["x"] + u[g["j"]][:, None])).real
    _close(tp.grad(psum(tp.jit(fc, fuse=fuse), stc, True))(U, 0.3),
           tp.grad(psum(fc, stc, True))(U, 0.3))

    def closing(f):
        return tp.grad(lambda a: tp.parallel_sum(f(a), STACKED, U, batched=True,
                                                 chunk_size=5))(0.3)
    _close(closing(lambda a: tp.jit(lambda g, u: np.sum(g["x"] * a * u[0]), fuse=fuse)),
           closing(lambda a: (lambda g, u: np.sum(g["x"] * a * u[0]))))

    def of_items(f):
        return tp.grad(lambda x: tp.parallel_sum(f, {"x": x, "j": STACKED["j"]}, U, 0.3,
                                                 batched=True, chunk_size=5))(STACKED["x"])
    _close(of_items(jb), of_items(batched_f))


def test_vectorize_over_list_items_traced_at_two_levels():
    def total(s, a, vectorize):
        items = [{"x": g["x"] * s * a, "j": g["j"]} for g in LISTED]
        return tp.parallel_sum(item_f, items, U, 0.3, vectorize=vectorize, chunk_size=5)
    got = tp.grad(lambda a: tp.grad(lambda s: total(s, a, True))(1.5))(0.7)
    want = tp.grad(lambda a: tp.grad(lambda s: total(s, a, False))(1.5))(0.7)
    _close(got, want)


def test_vectorize_of_a_jit_traces_once_across_calls():
    """Each call of ``parallel_sum(jit(f), ..., vectorize=True)`` maps ``f``
    afresh; the chunks of every call run the one ``jit(vmap(f))`` made for
    those axes (two chunk signatures here: 5, 5 and 2 items), with the
    replay's bits (``fuse=False``) of the uncompiled call."""
    jf = tp.jit(item_f)
    vg = tp.value_and_grad(psum(jf, STACKED, vectorize=True), argnums=(0, 1))
    plain = tp.value_and_grad(psum(item_f, STACKED, vectorize=True), argnums=(0, 1))
    for k in range(4):
        got, want = vg(U * (k + 1), 0.3), plain(U * (k + 1), 0.3)
        for x, y in zip(tp.tree_util.tree_leaves(got), tp.tree_util.tree_leaves(want)):
            assert np.array_equal(np.asarray(x), np.asarray(y))
    mapped = tp.vmap(jf, in_axes=(0, None, None))
    assert mapped.cache_info()["traces"] == 2  # (one per chunk size, whatever the calls)
