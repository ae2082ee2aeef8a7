"""SLIDE example: data generator, LSH families and tables, the sampled loss's
gradients, and a tiny training run (seconds)."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.examples.lsh import DWTA, LSHTables, SimHash
from tapestry.examples.slide import (SlideConfig, SlideNet, dense_loss, precision_at_1,
                                     run, slide_loss)
from tapestry.examples.xc_data import make_extreme_classification, zipf_labels
from tapestry.testing import check_grads


def test_data_generator_dense_and_sparse():
    d = make_extreme_classification(n_classes=1000, n_features=16, n_train=500, n_test=50)
    assert d.X_train.shape == (500, 16) and d.X_train.dtype == np.float32
    assert np.allclose(np.linalg.norm(d.X_test, axis=1), 1, atol=1e-5)
    assert d.y_train.max() < 1000 and d.y_test.shape == (50,)
    s = make_extreme_classification(n_classes=1000, n_features=10_000, n_train=100,
                                    n_test=10, features="sparse", nnz=8)
    idx, val = s.X_train
    assert idx.shape == (100, 8) and idx.max() < 10_000 and val.dtype == np.float32
    with pytest.raises(ValueError, match="features='bogus'"):
        make_extreme_classification(features="bogus")


def test_zipf_labels_are_long_tailed():
    y = zipf_labels(np.random.default_rng(0), 20_000, 10_000, 1.0)
    counts = np.sort(np.bincount(y, minlength=10_000))[::-1]
    assert counts[0] > 50 * np.median(counts[counts > 0]) and (counts == 0).sum() > 1000


@pytest.mark.parametrize("family", [SimHash, DWTA])
def test_lsh_retrieves_the_most_similar_rows(family):
    rng = np.random.default_rng(0)
    W = rng.standard_normal((2000, 32)).astype(np.float32)
    q = W[[7, 1234]] + 0.05 * rng.standard_normal((2, 32)).astype(np.float32)
    tables = LSHTables(family(32, 4 if family is DWTA else 8, 12, rng), 2000)
    tables.build(W)
    ids = tables.query(q, max_active=50)
    assert {7, 1234} <= set(ids.tolist()) and ids.size <= 50
    assert 99999 in tables.query(q, 10, always=[99999])


def test_incremental_rebuild_equals_full_rebuild():
    rng = np.random.default_rng(1)
    W = rng.standard_normal((500, 16)).astype(np.float32)
    fam = SimHash(16, 6, 4, rng)
    t1, t2 = LSHTables(fam, 500), LSHTables(fam, 500)
    t1.build(W)
    rows = np.array([3, 77, 400])
    W[rows] += 1.0
    t1.build(W, rows)
    t2.build(W)
    assert np.array_equal(t1.codes, t2.codes) and np.array_equal(t1.sorted, t2.sorted)
    assert np.array_equal(t1.order, t2.order)


def _tiny(**kw):
    base = dict(n_classes=300, n_features=12, hidden=16, batch=32, steps=80,
                dense_steps=80, max_hidden=12, max_out=64, L_out=6, L_hidden=4,
                rebuild_every=20, n_train=2000, n_test=300, lr=1e-2)
    return SlideConfig(**{**base, **kw})


def test_sampled_loss_gradients_are_sparse_and_correct():
    rng = np.random.default_rng(2)
    cfg = _tiny()
    params = [p.astype(np.float64) for p in SlideNet(cfg).params]
    x = rng.standard_normal((5, cfg.n_features))
    S1, S2 = np.array([0, 3, 9]), np.array([2, 40, 41, 299])
    target = np.eye(4)[[0, 1, 1, 3, 2]]
    grads = tp.grad(slide_loss, sparse=True)(params, x, S1, S2, target)
    assert all(isinstance(g, tp.AxisSparse) for g in grads)
    dense = tp.grad(slide_loss, sparse=False)(params, x, S1, S2, target)
    for g, d in zip(grads, dense):
        assert np.allclose(g.todense(), d)
    check_grads(lambda W1, W2: slide_loss([W1, params[1], W2, params[3]], x, S1, S2, target),
                (params[0], params[2]))
    check_grads(lambda W2: dense_loss([params[0], params[1], W2, params[3]], x,
                                      np.array([1, 5, 5, 0, 2])), (params[2],))


def test_a_step_touches_only_the_sampled_rows():
    cfg = _tiny()
    net = SlideNet(cfg)
    data = make_extreme_classification(cfg.n_classes, cfg.n_features, 64, 10)
    x, y = data.X_train[:32], data.y_train[:32]
    S1, S2 = net.active(x, y)
    assert set(y.tolist()) <= set(S2.tolist())
    W2_before = net.params[2].copy()
    net.step(x, y)
    untouched = np.setdiff1d(np.arange(cfg.n_classes), np.concatenate(net.touched[1]))
    assert np.array_equal(net.params[2][untouched], W2_before[untouched])


def test_tiny_training_run_learns_and_tracks_the_baseline():
    cfg = _tiny(steps=150)
    res = run(cfg, dense=True)
    chance = 1 / cfg.n_classes
    assert res["slide_p1"] > 20 * chance and res["dense_p1"] > 20 * chance
    assert res["slide_p1"] > res["dense_p1"] - 0.2
    assert set(res["densify"]) <= {"getitem (cotangent of the gathered array)"}
