"""Optimizers: dense paths against PyTorch's formulas (when installed) and a
NumPy reference; sparse paths against the dense path where the semantics
match, and against lazy references (and torch.optim.SparseAdam) where not."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.sparse import AxisSparse

RNG = np.random.default_rng(2)
try:
    import torch
except ImportError:  # peers are optional
    torch = None

N, D = 7, 3


def _grads(steps, idx_sets):
    """Per step: a sparse gradient (repeats allowed) and its dense twin."""
    out = []
    for idx in idx_sets[:steps]:
        idx = np.asarray(idx)
        s = AxisSparse(0, idx, RNG.standard_normal((len(idx), D)), (N, D))
        out.append((s, s.todense()))
    return out


def _run(opt, g_list, sparse):
    W = np.linspace(-1, 1, N * D).reshape(N, D)
    for s, d in g_list:
        opt.update({"W": W}, {"W": s if sparse else d})
    return W


IDX_ALL = [np.arange(N)[::-1]] * 4
IDX_SOME = [[0, 3, 3], [3, 5], [0, 0, 6], [5]]

EXACT = [lambda: tp.optim.SGD(lr=0.1), lambda: tp.optim.Adagrad(lr=0.1),
         lambda: tp.optim.Adagrad(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.2)]
LAZY = [lambda: tp.optim.SGD(lr=0.1, momentum=0.9),
        lambda: tp.optim.SGD(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
        lambda: tp.optim.Adam(lr=0.1), lambda: tp.optim.Adam(lr=0.1, weight_decay=0.1),
        lambda: tp.optim.AdamW(lr=0.1, weight_decay=0.1)]


@pytest.mark.parametrize("make", EXACT)
def test_sparse_equals_dense_when_semantics_match(make):
    g = _grads(4, IDX_SOME)
    assert np.allclose(_run(make(), g, True), _run(make(), g, False))


@pytest.mark.parametrize("make", EXACT + LAZY)
def test_sparse_equals_dense_when_every_row_is_touched(make):
    g = _grads(4, IDX_ALL)
    assert np.allclose(_run(make(), g, True), _run(make(), g, False))


@pytest.mark.parametrize("make", LAZY)
def test_lazy_paths_leave_untouched_rows_alone(make):
    g = _grads(4, IDX_SOME)
    Ws, Wd = _run(make(), g, True), _run(make(), g, False)
    W0 = np.linspace(-1, 1, N * D).reshape(N, D)
    assert np.array_equal(Ws[[1, 2, 4]], W0[[1, 2, 4]])      # never touched: unchanged
    assert not np.allclose(Ws, Wd)                             # documented difference


def _torch_run(make_torch, g_list, sparse=False):
    W = torch.tensor(np.linspace(-1, 1, N * D).reshape(N, D), requires_grad=True)
    opt = make_torch([W])
    for s, d in g_list:
        c = s.coalesce()
        W.grad = (torch.sparse_coo_tensor(torch.tensor(c.indices[None]), torch.tensor(
                      c.values), (N, D), check_invariants=True) if sparse
                  else torch.tensor(d))
        opt.step()
    return W.detach().numpy()


PAIRS = [  # (tapestry, torch) with the same hyperparameters
    (lambda: tp.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01),
     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01)),
    (lambda: tp.optim.SGD(lr=0.1, momentum=0.5, nesterov=True),
     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5, nesterov=True)),
    (lambda: tp.optim.Adam(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1),
     lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1)),
    (lambda: tp.optim.AdamW(lr=0.05, weight_decay=0.1),
     lambda p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1)),
    (lambda: tp.optim.Adagrad(lr=0.1, lr_decay=0.01, weight_decay=0.1),
     lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=0.1)),
]


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("ours,theirs", PAIRS)
def test_dense_paths_match_pytorch(ours, theirs):
    g = _grads(4, IDX_SOME)
    assert np.allclose(_run(ours(), g, False), _torch_run(theirs, g))


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_lazy_adam_matches_torch_sparse_adam():
    g = _grads(4, IDX_SOME)
    ref = _torch_run(lambda p: torch.optim.SparseAdam(p, lr=0.1), g, sparse=True)
    assert np.allclose(_run(tp.optim.Adam(lr=0.1), g, True), ref)


def test_update_is_in_place_on_a_pytree_with_mixed_gradients():
    W, b = RNG.standard_normal((N, D)), RNG.standard_normal(D)
    params = {"emb": W, "head": [b]}
    W0, b0 = W.copy(), b.copy()
    S = np.array([1, 1, 4])
    x = RNG.standard_normal(D)
    loss = lambda p: np.sum(np.tanh(p["emb"][S] @ x + p["head"][0]))
    grads = tp.grad(loss, sparse=True)(params)
    assert isinstance(grads["emb"], AxisSparse) and type(grads["head"][0]) is np.ndarray
    dense = tp.grad(loss, sparse=False)(params)
    opt = tp.optim.SGD(lr=0.5)
    assert opt.update(params, grads) is params
    assert params["emb"] is W and np.allclose(W, W0 - 0.5 * dense["emb"])
    assert np.allclose(b, b0 - 0.5 * dense["head"][0])


def test_float32_parameters_stay_float32():
    W = RNG.standard_normal((N, D)).astype(np.float32)
    g = tp.grad(lambda W: np.sum(W[np.array([2, 2])] ** 2), sparse=True)(W)
    tp.optim.Adam(lr=0.1).update([W], [g])
    assert W.dtype == np.float32


def test_clear_errors():
    W = RNG.standard_normal((N, D))
    with pytest.raises(ValueError, match="lr must be positive"):
        tp.optim.Adam(lr=0)
    with pytest.raises(ValueError, match="betas"):
        tp.optim.Adam(betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="nesterov=True needs momentum"):
        tp.optim.SGD(nesterov=True)
    opt = tp.optim.SGD(lr=0.1)
    with pytest.raises(ValueError, match=r"grads do not have the structure of params \(1 leaves"):
        opt.update([W, W], [W])
    # same leaf count, different structure: the message names where they differ
    with pytest.raises(ValueError, match=r"at \[1\]: a tuple of length 1 expected, a list given"):
        opt.update([W, (W,)], [W, [W]])
    with pytest.raises(TypeError, match="float NumPy arrays"):
        opt.update([np.arange(3)], [np.ones(3)])
    with pytest.raises(ValueError, match="gradient shape"):
        opt.update([W], [np.ones(3)])
    opt.update({"a": W}, {"a": np.ones_like(W)})
    with pytest.raises(ValueError, match="changed structure"):
        opt.update({"b": W}, {"b": np.ones_like(W)})
    ro = np.ones(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        tp.optim.SGD().update([ro], [ro])


@pytest.mark.parametrize("make,match", [
    (lambda: tp.optim.SGD(lr=np.inf), "lr must be positive and finite"),
    (lambda: tp.optim.Adam(lr="1e-3"), "lr must be a real number"),
    (lambda: tp.optim.SGD(momentum=np.nan), "momentum must be a finite number >= 0"),
    (lambda: tp.optim.SGD(weight_decay=np.inf), "weight_decay"),
    (lambda: tp.optim.Adam(betas=(0.9, np.nan)), r"betas\[1\] must be .* in \[0, 1\)"),
    (lambda: tp.optim.AdamW(betas=(-0.1, 0.9)), r"betas\[0\]"),
    (lambda: tp.optim.Adam(betas=0.9), r"betas must be a pair"),
    (lambda: tp.optim.Adam(eps=np.nan), "eps must be a finite number > 0"),
    (lambda: tp.optim.Adam(weight_decay=np.nan), "weight_decay"),
    (lambda: tp.optim.Adagrad(lr_decay=np.inf), "lr_decay"),
    (lambda: tp.optim.Adagrad(eps=np.nan), "eps"),
    (lambda: tp.optim.RMSprop(eps=np.nan), "eps"),
    (lambda: tp.optim.RMSprop(momentum=np.inf), "momentum"),
    (lambda: tp.optim.RMSprop(alpha=np.nan), "alpha"),
    (lambda: tp.optim.SGD(clip_norm=np.nan), "clip_norm must be positive"),
])
def test_non_finite_or_out_of_range_hyperparameters_are_refused(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_hyperparameters_assigned_later_are_checked_at_update():
    W = np.ones(3)
    for attr, value, match in [("lr", -0.1, "lr must be positive"),
                               ("b2", 1.0, r"betas\[1\]"),
                               ("clip_norm", -1.0, "clip_norm must be positive")]:
        opt = tp.optim.Adam(lr=0.1, clip_norm=1.0)
        setattr(opt, attr, value)
        with pytest.raises(ValueError, match=match):
            opt.update([W], [np.ones(3)])
        assert np.array_equal(W, np.ones(3)) and opt.t == 0


@pytest.mark.parametrize("bad", [-1.0, 0.0, np.nan])
def test_clip_by_global_norm_refuses_what_clip_norm_refuses(bad):
    with pytest.raises(ValueError, match="max_norm must be positive"):
        tp.optim.clip_by_global_norm([np.array([3.0, 4.0])], bad)
    with pytest.raises(ValueError, match="clip_norm must be positive"):
        tp.optim.SGD(clip_norm=bad)


@pytest.mark.parametrize("first", [lambda: [np.ones(2)], lambda: {"w": np.ones(2)},
                                   lambda: np.ones(2), lambda: iter([np.ones(2)])])
def test_parameters_given_to_the_constructor_point_to_update(first):
    with pytest.raises(TypeError, match=r"take the parameters in update, not in the "
                                        r"constructor.*opt.update\(params, grads\)"):
        tp.optim.Adam(first(), lr=0.1)
    with pytest.raises(TypeError, match="not in the constructor"):
        tp.optim.SGD(first())
    assert tp.optim.SGD(0.1).lr == 0.1 and tp.optim.Adam(np.array(0.5)).lr == 0.5
    assert tp.optim.Adam(0.1, np.array([0.8, 0.9])).b2 == 0.9      # betas as an array


def test_swapped_update_arguments_are_refused_once_they_can_be_told():
    loss = lambda p: np.sum(p["W"] ** 2)  # noqa: E731
    params = {"W": np.ones(3)}
    opt = tp.optim.SGD(lr=0.1)
    opt.update(tp.grad(loss)(params), params)     # optax's order: the first call cannot tell
    W0 = params["W"].copy()
    with pytest.raises(ValueError, match=r"look swapped; tapestry's order is "
                                         r"update\(params, grads\)"):
        opt.update(tp.grad(loss)(params), params)
    assert np.array_equal(params["W"], W0)
    opt = tp.optim.Adam(lr=0.1)                   # a right first call, then swapped
    opt.update(params, tp.grad(loss)(params))
    with pytest.raises(ValueError, match="changed as params: the arguments look swapped"):
        opt.update(tp.grad(loss)(params), params)
    with pytest.raises(TypeError, match="optax's update"):
        opt.update(tp.grad(loss)(params), None, params)
    g = AxisSparse(0, np.array([1]), np.ones((1, 2)), (4, 2))
    with pytest.raises(TypeError, match="AxisSparse, a gradient: the arguments look swapped"):
        tp.optim.SGD().update([g], [np.ones((4, 2))])


def test_right_order_with_reused_gradients_or_fresh_params_is_accepted():
    fixed = [np.ones(3)]
    W = np.zeros(3)
    opt = tp.optim.SGD(lr=0.5)
    for _ in range(3):                              # the same gradient object each step
        opt.update([W], fixed)
    assert np.allclose(W, -1.5)
    opt = tp.optim.SGD(lr=0.5)
    for _ in range(3):                              # fresh params and fresh gradients
        W = W.copy()
        opt.update([W], [np.ones(3)])
    assert np.allclose(W, -3.0)


def test_an_optimizer_pickles_and_copies_after_updates():
    import copy
    import pickle
    opt = tp.optim.Adam(lr=0.1)
    W = np.ones(3)
    opt.update([W], [np.ones(3)])
    for clone in (pickle.loads(pickle.dumps(opt)), copy.deepcopy(opt)):
        V = W.copy()
        clone.update([V], [np.ones(3)])
        assert clone.t == 2 and np.allclose(clone.state[0]["m"], opt.state[0]["m"] * 0.9 + 0.1)


def test_a_subclass_taking_a_list_first_is_not_refused():
    class Layered(tp.optim.SGD):
        def __init__(self, groups, lr=0.1):
            super().__init__(lr)
            self.groups = groups
    assert Layered([np.ones(2)]).groups[0].shape == (2,)
