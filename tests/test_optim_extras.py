"""RMSprop, lr schedules, clipping by global norm (sparse-aware) and
state_dict round trips: against PyTorch where installed, and against the
dense path / a NumPy reference always."""
import re

import numpy as np
import pytest

import tapestry as tp
from tapestry.sparse import AxisSparse

from test_optim import IDX_ALL, IDX_SOME, N, D, _grads, _run, _torch_run, torch

RMS = [dict(), dict(momentum=0.9), dict(centered=True, weight_decay=0.1),
       dict(alpha=0.9, centered=True, momentum=0.5)]


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("kw", RMS)
def test_rmsprop_dense_matches_pytorch(kw):
    g = _grads(4, IDX_SOME)
    ours = _run(tp.optim.RMSprop(lr=0.05, **kw), g, False)
    assert np.allclose(ours, _torch_run(lambda p: torch.optim.RMSprop(p, lr=0.05, **kw), g))


def _rmsprop_reference(g_list, lr=0.05, alpha=0.99, eps=1e-8):
    W = np.linspace(-1, 1, N * D).reshape(N, D)
    v = np.zeros_like(W)
    for _, d in g_list:
        v = alpha * v + (1 - alpha) * d * d
        W = W - lr * d / (np.sqrt(v) + eps)
    return W


def test_rmsprop_dense_matches_the_formula():
    g = _grads(4, IDX_SOME)
    assert np.allclose(_run(tp.optim.RMSprop(lr=0.05), g, False), _rmsprop_reference(g))


@pytest.mark.parametrize("kw", RMS)
def test_rmsprop_sparse_is_lazy_and_exact_when_every_row_is_touched(kw):
    g = _grads(4, IDX_ALL)
    make = lambda: tp.optim.RMSprop(lr=0.05, **kw)  # noqa: E731
    assert np.allclose(_run(make(), g, True), _run(make(), g, False))
    g = _grads(4, IDX_SOME)
    Ws = _run(make(), g, True)
    W0 = np.linspace(-1, 1, N * D).reshape(N, D)
    assert np.array_equal(Ws[[1, 2, 4]], W0[[1, 2, 4]])


def test_schedule_is_called_with_the_step_count():
    seen = []

    def sched(step):
        seen.append(step)
        return 0.1 / (1 + step)
    g = _grads(4, IDX_SOME)
    W = _run(tp.optim.SGD(lr=sched), g, False)
    assert seen == [0, 1, 2, 3]
    ref = np.linspace(-1, 1, N * D).reshape(N, D)
    for k, (_, d) in enumerate(g):
        ref = ref - 0.1 / (1 + k) * d
    assert np.allclose(W, ref)


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_schedule_matches_pytorch_lambda_lr():
    g = _grads(4, IDX_SOME)
    ours = _run(tp.optim.Adam(lr=lambda t: 0.1 * 0.5 ** t), g, False)
    W = torch.tensor(np.linspace(-1, 1, N * D).reshape(N, D), requires_grad=True)
    opt = torch.optim.Adam([W], lr=0.1)
    sch = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 ** t)
    for _, d in g:
        W.grad = torch.tensor(d)
        opt.step()
        sch.step()
    assert np.allclose(ours, W.detach().numpy())


def test_bad_schedule_values_are_refused():
    opt = tp.optim.SGD(lr=lambda t: -1.0)
    W = np.ones(3)
    with pytest.raises(ValueError, match="schedule returned -1.0 at step 0"):
        opt.update([W], [np.ones(3)])
    assert np.array_equal(W, np.ones(3))


def test_clip_by_global_norm_dense_and_sparse_without_densifying():
    s = AxisSparse(0, np.array([1, 1, 3]), np.array([[3.0, 0.0], [0.0, 0.0], [0.0, 4.0]]),
                   (5, 2))
    d = np.array([0.0, 12.0])
    (cs, cd), norm = tp.optim.clip_by_global_norm([s, d], 1.0)
    assert np.isclose(norm, 13.0)                    # sqrt(3^2 + 4^2 + 12^2)
    assert isinstance(cs, AxisSparse) and len(cs.indices) == 2  # coalesced, still sparse
    total = np.sqrt(np.sum(np.asarray(cs) ** 2) + np.sum(cd ** 2))
    assert np.isclose(total, 1.0, atol=1e-6)
    assert np.allclose(np.asarray(cs), s.todense() / (13.0 + 1e-6))
    (same,), n = tp.optim.clip_by_global_norm([d], 100.0)
    assert same is not None and np.array_equal(same, d) and np.isclose(n, 12.0)


@pytest.mark.parametrize("sparse", [True, False])
def test_clip_norm_in_update_matches_clipping_first(sparse):
    g = _grads(4, IDX_SOME)
    clipped = []
    for s, d in g:
        (cs,), _ = tp.optim.clip_by_global_norm([s], 0.5)
        clipped.append((cs, np.asarray(cs)))
    a = _run(tp.optim.Adam(lr=0.1, clip_norm=0.5), g, sparse)
    b = _run(tp.optim.Adam(lr=0.1), clipped, sparse)
    assert np.allclose(a, b)


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_clip_norm_matches_pytorch_clip_grad_norm():
    g = _grads(4, IDX_SOME)
    ours = _run(tp.optim.SGD(lr=0.1, momentum=0.9, clip_norm=0.3), g, False)
    W = torch.tensor(np.linspace(-1, 1, N * D).reshape(N, D), requires_grad=True)
    opt = torch.optim.SGD([W], lr=0.1, momentum=0.9)
    for _, d in g:
        W.grad = torch.tensor(d)
        torch.nn.utils.clip_grad_norm_([W], 0.3)
        opt.step()
    assert np.allclose(ours, W.detach().numpy())


OPTS = [lambda: tp.optim.SGD(lr=0.1, momentum=0.9), lambda: tp.optim.Adam(lr=0.1),
        lambda: tp.optim.AdamW(lr=lambda t: 0.1 / (1 + t)),
        lambda: tp.optim.Adagrad(lr=0.1), lambda: tp.optim.RMSprop(lr=0.1, centered=True,
                                                                   momentum=0.5)]


@pytest.mark.parametrize("make", OPTS)
def test_state_dict_round_trips_through_npz(make, tmp_path):
    g = _grads(4, IDX_SOME)
    full = _run(make(), g, True)
    W = np.linspace(-1, 1, N * D).reshape(N, D)
    opt = make()
    for s, _ in g[:2]:
        opt.update({"W": W}, {"W": s})
    np.savez(tmp_path / "opt.npz", **opt.state_dict())
    resumed = make().load_state_dict(np.load(tmp_path / "opt.npz"))
    assert resumed.t == 2
    for s, _ in g[2:]:
        resumed.update({"W": W}, {"W": s})
    assert np.array_equal(W, full)


def test_load_state_dict_errors():
    with pytest.raises(ValueError, match="not an optimizer state"):
        tp.optim.Adam().load_state_dict({"x": np.ones(2)})
    opt = tp.optim.Adam(lr=0.1)
    opt.update([np.ones(2), np.ones(2)], [np.ones(2), np.ones(2)])
    other = tp.optim.Adam().load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match=re.escape("saved only: ['params[1]']")):
        other.update([np.ones(2)], [np.ones(2)])
    with pytest.raises(ValueError, match="clip_norm must be positive"):
        tp.optim.SGD(clip_norm=0)
    with pytest.raises(ValueError, match="alpha"):
        tp.optim.RMSprop(alpha=1.0)


@pytest.mark.parametrize("make", OPTS)
def test_sparse_steps_with_clipping_never_densify(make):
    W = np.zeros((10_000, D))
    s = AxisSparse(0, np.array([5, 9, 5]), np.ones((3, D)), W.shape)
    tp.debug.reset_densify_counts()
    opt = make()
    opt.clip_norm = 0.1
    opt.update({"W": W}, {"W": s})
    assert tp.debug.densify_counts() == {}
    touched = np.flatnonzero(np.any(W != 0, axis=1))
    assert set(touched) <= {5, 9}


def test_none_gradients_skip_their_parameter():
    params = {"a": np.ones(2), "b": np.ones(3)}
    opt = tp.optim.Adam(lr=0.1)
    opt.update(params, {"a": np.ones(2), "b": None})
    assert np.array_equal(params["b"], np.ones(3)) and not np.allclose(params["a"], 1.0)
    assert opt.state_dict()["n_leaves"] == 2


def _nested():
    return {"layers": [{"b": np.zeros(2), "w": np.ones((2, 2))}]}


def _step(opt, params):
    opt.update(params, tp.tree_util.tree_map(lambda p: np.full_like(p, 0.5), params))


def test_state_names_its_class_and_leaves_by_path():
    opt = tp.optim.Adam(lr=0.1)
    _step(opt, _nested())
    sd = opt.state_dict()
    assert str(sd["optimizer"]) == "Adam"
    assert list(sd["paths"]) == ["params['layers'][0]['b']", "params['layers'][0]['w']"]
    assert sd["params['layers'][0]['w'].m"].shape == (2, 2)
    single = tp.optim.SGD(lr=0.1, momentum=0.9)
    single.update(np.ones(3), np.ones(3))
    assert set(single.state_dict()) == {"t", "n_leaves", "optimizer", "paths", "params.buf"}


@pytest.mark.parametrize("target,match", [
    (lambda: tp.optim.SGD(momentum=0.9), "saved by Adam, not SGD; load it into a "
                                         "tapestry.optim.Adam"),
    (lambda: tp.optim.AdamW(), "saved by Adam, not AdamW")])
def test_state_of_another_optimizer_class_is_refused_at_load(target, match):
    opt = tp.optim.Adam(lr=0.1)
    _step(opt, _nested())
    with pytest.raises(ValueError, match=match):
        target().load_state_dict(opt.state_dict())


def test_state_of_other_hyperparameters_or_another_tree_is_refused():
    opt = tp.optim.SGD(lr=0.1, momentum=0.9)
    _step(opt, _nested())
    with pytest.raises(ValueError, match=r"holds 'buf' but this SGD keeps no state"):
        tp.optim.SGD(lr=0.1).load_state_dict(opt.state_dict())
    rms = tp.optim.RMSprop()
    _step(rms, _nested())
    with pytest.raises(ValueError, match="holds 'square_avg' but this RMSprop keeps "
                                         "'grad_avg', 'square_avg'"):
        tp.optim.RMSprop(centered=True).load_state_dict(rms.state_dict())
    renamed = {"layers": [{"c": np.zeros(2), "w": np.ones((2, 2))}]}
    other = tp.optim.SGD(momentum=0.9).load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match=re.escape("""saved only: ["params['layers'][0]['b']"]""")):
        _step(other, renamed)
    wider = {"layers": [{"b": np.zeros(3), "w": np.ones((2, 2))}]}
    other = tp.optim.SGD(momentum=0.9).load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match=re.escape(
            "state 'buf' of params['layers'][0]['b'] has shape (2,) but the parameter has (3,)")):
        _step(other, wider)
    assert np.array_equal(wider["layers"][0]["b"], np.zeros(3))


def test_index_keyed_state_still_loads_and_is_checked():
    params, ref = _nested(), _nested()
    opt, cont = tp.optim.Adam(lr=0.1), tp.optim.Adam(lr=0.1)
    for _ in range(2):
        _step(opt, params)
        _step(cont, ref)
    new = opt.state_dict()
    legacy = {"t": new["t"], "n_leaves": new["n_leaves"]}
    for k, path in enumerate(new["paths"]):
        for slot in ("m", "v"):
            legacy[f"{k}.{slot}"] = new[f"{path}.{slot}"]
    resumed = tp.optim.Adam(lr=0.1).load_state_dict(legacy)
    _step(resumed, params)
    _step(cont, ref)
    assert all(np.array_equal(a, b) for a, b in zip(tp.tree_util.tree_leaves(params),
                                                    tp.tree_util.tree_leaves(ref)))
    with pytest.raises(ValueError, match=r"state of leaf 0 holds 'm', 'v' but this SGD "
                                         r"keeps 'buf'"):
        tp.optim.SGD(momentum=0.9).load_state_dict(legacy)


@pytest.mark.parametrize("t", [-1, 2.5, np.nan])
def test_a_damaged_step_count_is_refused_at_load(t):
    # t = -5 gave Adam's bias correction 1 - b**t < 0: NaN parameters, silently
    opt = tp.optim.Adam(lr=0.1)
    opt.update({"a": np.ones(2)}, {"a": np.ones(2)})
    state = dict(opt.state_dict(), t=np.array(t))
    with pytest.raises(ValueError, match=r"Adam.load_state_dict: 't' \(steps taken\) must be "
                                         r"an integer >= 0"):
        tp.optim.Adam(lr=0.1).load_state_dict(state)


@pytest.mark.parametrize("make", [lambda: tp.optim.Adam(lr=0.1),
                                  lambda: tp.optim.SGD(lr=0.1, momentum=0.9)])
def test_a_parameter_resized_after_the_first_update_is_refused(make):
    opt = make()
    opt.update({"w": np.ones(2)}, {"w": np.ones(2)})
    for shape in [(3,), (1,)]:  # (1,) broadcast against the (2,) state, silently
        p = {"w": np.ones(shape)}
        with pytest.raises(ValueError, match=r"update: params\['w'\] has shape .* but its "
                                             r"state '.*' was made for \(2,\)"):
            opt.update(p, {"w": np.ones(shape)})
        np.testing.assert_array_equal(p["w"], 1.0)  # refused before any change


@pytest.mark.parametrize("g, match", [
    (np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0]), "masked array"),
    (np.array([1.0, 2.0, 3.0]) * (1 + 1j), "complex but its parameter is real"),
])
def test_masked_or_complex_gradients_of_real_parameters_are_refused(g, match):
    # they were cast with np.asarray: the masked entry's data stepped, the
    # imaginary part was dropped with only NumPy's ComplexWarning
    p = {"w": np.ones(3)}
    with pytest.raises(TypeError, match=match):
        tp.optim.SGD(lr=0.1).update(p, {"w": g})
    np.testing.assert_array_equal(p["w"], 1.0)
