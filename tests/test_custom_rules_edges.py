"""Edge cases of the custom-rule extension points: custom_vjp / custom_jvp /
checkpoint over closures, backward rules checked by structure (not by
position), static non-float arguments, dense cotangents for user rules."""
import functools

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

rng = np.random.default_rng(5)
W0 = rng.standard_normal((3, 3))
H0 = rng.standard_normal(3)


def _plain_loss(W, h):
    return np.sum(np.tanh(h @ W))


# --- 1. custom_vjp over a closure ---------------------------------------------------
def _closure_vjp_loss(W, h):
    @tp.custom_vjp
    def f(h):
        return np.tanh(h @ W)

    def f_fwd(h):
        y = np.tanh(h @ W)
        return y, (y,)

    def f_bwd(res, g):
        (y,) = res
        return ((g * (1 - y ** 2)) @ W.T,)
    f.defvjp(f_fwd, f_bwd)
    return np.sum(f(h))


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_custom_vjp_closing_over_a_differentiated_value_is_refused(argnums):
    if argnums == 1:  # W is a constant here: the rule covers everything
        g = tp.grad(_closure_vjp_loss, argnums)(W0, H0)
        np.testing.assert_allclose(g, tp.grad(_plain_loss, 1)(W0, H0), rtol=1e-12)
        return
    with pytest.raises(TypeError, match=r"custom_vjp: f uses a value .*not one of its "
                                        r"arguments.*Pass the value to f as an argument"):
        tp.grad(_closure_vjp_loss, argnums)(W0, H0)


def test_custom_vjp_whose_bwd_alone_closes_over_a_traced_value_is_refused():
    def loss(W, h):
        @tp.custom_vjp
        def f(h):
            return h * 2.0
        f.defvjp(lambda h: (h * 2.0, None), lambda r, g: (g * np.sum(W),))
        return np.sum(f(h))
    with pytest.raises(TypeError, match="backward rule returned a traced value"):
        tp.grad(loss, (0, 1))(W0, H0)


def test_custom_vjp_closing_over_an_outer_level_value_nests():
    # W belongs to the outer differentiation: the inner rule's arithmetic on
    # it is recorded there, which is exactly d/dW of the inner gradient.
    def outer(W):
        return np.sum(tp.grad(lambda h: _closure_vjp_loss(W, h))(H0) ** 2)

    def outer_plain(W):
        return np.sum(tp.grad(lambda h: _plain_loss(W, h))(H0) ** 2)
    np.testing.assert_allclose(tp.grad(outer)(W0), tp.grad(outer_plain)(W0), rtol=1e-10)
    check_grads(outer, (W0,))


# --- 3. backward structure checked by key path --------------------------------------
def _dict_rule(ct_of):
    @tp.custom_vjp
    def f(p):
        return p["w"] * p["x"]
    f.defvjp(lambda p: (f(p), p), lambda p, g: (ct_of(p, g),))
    return f


def test_bwd_dict_with_other_keys_is_an_error_not_applied_by_position():
    f = _dict_rule(lambda p, g: {"x": g * p["w"], "y": g * p["x"]})
    p = {"w": np.ones(2), "x": np.full(2, 3.0)}
    with pytest.raises(ValueError, match=r"f returned a cotangent whose structure does "
                                         r"not match argument 0 \('p'\).*keys \['w', 'x'\]"
                                         r".*keys \['x', 'y'\]"):
        tp.grad(lambda p: np.sum(f(p)))(p)


def test_bwd_mismatch_names_the_key_path():
    @tp.custom_vjp
    def f(x, p):
        return x * p["a"]["w"]
    f.defvjp(lambda x, p: (f(x, p), p),
             lambda p, g: (None, {"a": {"w": g, "v": g}}))
    p = {"a": {"w": np.ones(2)}}
    with pytest.raises(ValueError, match=r"argument 1 \('p'\) at \['a'\]: expected keys "
                                         r"\['w'\], got keys \['v', 'w'\]"):
        tp.grad(lambda p: np.sum(f(np.ones(2), p)))(p)
    f.defvjp(lambda x, p: (f(x, p), p), lambda p, g: (None, {"a": [g]}))
    with pytest.raises(ValueError, match=r"at \['a'\]: expected a dict, got a list"):
        tp.grad(lambda p: np.sum(f(np.ones(2), p)))(p)


def test_bwd_tuple_length_and_leaf_shape_and_dtype_are_checked():
    @tp.custom_vjp
    def f(t):
        return t[0] * t[1]
    x = (np.ones(2), np.full(2, 2.0))
    f.defvjp(lambda t: (f(t), t), lambda t, g: ((g * t[1],),))
    with pytest.raises(ValueError, match=r"expected a tuple of length 2, got length 1"):
        tp.grad(lambda t: np.sum(f(t)))(x)
    f.defvjp(lambda t: (f(t), t), lambda t, g: ((g * t[1], np.ones(3)),))
    with pytest.raises(ValueError, match=r"shape \(3,\) for argument 0 \('t'\) at \[1\]"):
        tp.grad(lambda t: np.sum(f(t)))(x)
    f.defvjp(lambda t: (f(t), t), lambda t, g: ((g * t[1], g > 0),))
    with pytest.raises(TypeError, match=r"dtype bool for argument 0 \('t'\) at \[1\]"):
        tp.grad(lambda t: np.sum(f(t)))(x)


def test_bwd_none_stands_for_a_zero_subtree():
    f = _dict_rule(lambda p, g: {"w": None, "x": g * p["w"]})
    p = {"w": np.full(2, 2.0), "x": np.full(2, 3.0)}
    g = tp.grad(lambda p: np.sum(f(p)))(p)
    np.testing.assert_array_equal(g["w"], 0.0)
    np.testing.assert_array_equal(g["x"], 2.0)


# --- 11. checkpoint: non-float arguments are static -----------------------------------
def _power(x, n):
    return np.sum(x ** n)


def _flagged(x, flag):
    return np.sum(np.sin(x)) if flag else np.sum(x)


def _named(x, s):
    return np.sum(x) * len(s)


def _applied(x, fn):
    return np.sum(fn(x))


def _gathered(x, idx):
    return np.sum(x[idx] ** 2)


def _mixed(p, x):
    return np.sum(x ** p["n"] * p["scale"]) if p["on"] else np.sum(x)


@pytest.mark.parametrize("f, extra", [
    (_power, 3), (_flagged, True), (_named, "abc"), (_applied, np.tanh),
    (_gathered, np.array([0, 2, 2])), (_gathered, [1, 0]),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_checkpoint_passes_non_float_arguments_through(f, extra, dtype):
    x = rng.standard_normal(3).astype(dtype)
    ck = tp.checkpoint(f)
    ref = tp.grad(f)(x, extra)
    got = tp.grad(ck)(x, extra)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    check_grads(lambda x: ck(x, extra), (x,))


def test_checkpoint_mixed_pytree_argument_and_keyword():
    x = rng.standard_normal(4) ** 2 + 0.5
    p = {"n": 2, "on": True, "scale": 1.5}
    ck = tp.checkpoint(_mixed)
    ref = tp.grad(lambda x, s: _mixed(dict(p, scale=s), x), (0, 1))(x, 1.5)
    got = tp.grad(lambda x, s: ck(dict(p, scale=s), x=x), (0, 1))(x, 1.5)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-12)
    check_grads(lambda x: ck(p, x), (x,), order=2)


# --- 12. checkpoint and custom_jvp over closures --------------------------------------
def _ck_closure_loss(W, h):
    block = tp.checkpoint(lambda h: np.tanh(h @ W))
    return np.sum(block(block(h)) ** 2)


def _ck_plain_loss(W, h):
    def block(h):
        return np.tanh(h @ W)
    return np.sum(block(block(h)) ** 2)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_checkpoint_differentiates_through_a_closure(argnums):
    got = tp.grad(_ck_closure_loss, argnums)(W0, H0)
    ref = tp.grad(_ck_plain_loss, argnums)(W0, H0)
    for a, b in zip(tp.tree_flatten(got)[0], tp.tree_flatten(ref)[0]):
        assert type(a) is np.ndarray
        np.testing.assert_allclose(a, b, rtol=1e-12)
    check_grads(_ck_closure_loss, (W0, H0), order=2)


class _Layer:
    def __init__(self, W):
        self.W = W

    def block(self, h):  # reads the weight through self: no closure cell to see
        return np.tanh(h @ self.W)


@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_checkpoint_differentiates_through_an_attribute(argnums):
    def loss(W, h):
        return np.sum(tp.checkpoint(_Layer(W).block)(h) ** 2)
    got = tp.grad(loss, argnums)(W0, H0)
    ref = tp.grad(lambda W, h: np.sum(np.tanh(h @ W) ** 2), argnums)(W0, H0)
    for a, b in zip(tp.tree_flatten(got)[0], tp.tree_flatten(ref)[0]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_checkpoint_closure_under_vjp_jacrev_and_forward_mode():
    f = functools.partial(_ck_closure_loss)
    _, pb = tp.vjp(f, W0, H0)
    _, pb_ref = tp.vjp(_ck_plain_loss, W0, H0)
    for a, b in zip(pb(1.0), pb_ref(1.0)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(tp.jacrev(f)(W0, H0), tp.jacrev(_ck_plain_loss)(W0, H0))
    np.testing.assert_allclose(tp.hessian(f, 1)(W0, H0), tp.hessian(_ck_plain_loss, 1)(W0, H0),
                               rtol=1e-10)
    t = tp.jvp(lambda W: f(W, H0), (W0,), (np.ones_like(W0),))[1]
    t_ref = tp.jvp(lambda W: _ck_plain_loss(W, H0), (W0,), (np.ones_like(W0),))[1]
    np.testing.assert_allclose(t, t_ref, rtol=1e-12)


def _cjvp_closure_loss(W, h):
    @tp.custom_jvp
    def f(h):
        return np.sum(np.tanh(h @ W))

    @f.defjvp
    def f_jvp(primals, tangents):
        (h,), (th,) = primals, tangents
        y = np.tanh(h @ W)
        return np.sum(y), np.sum((1 - y ** 2) * (th @ W))
    return f(h)


@pytest.mark.parametrize("how", ["grad", "jvp"])
def test_custom_jvp_closing_over_a_differentiated_value_is_refused(how):
    match = r"custom_jvp: f uses a value .*Pass the value to f as an argument"
    with pytest.raises(TypeError, match=match):
        if how == "grad":
            tp.grad(_cjvp_closure_loss, (0, 1))(W0, H0)
        else:
            tp.jvp(_cjvp_closure_loss, (W0, H0), (W0, H0))
    with pytest.raises(TypeError, match=match):  # W traced, h constant
        tp.grad(_cjvp_closure_loss, 0)(W0, H0)
    g = tp.grad(_cjvp_closure_loss, 1)(W0, H0)  # W constant: the rule covers it
    np.testing.assert_allclose(g, tp.grad(_plain_loss, 1)(W0, H0), rtol=1e-12)


# --- 13. dense cotangents for custom rules --------------------------------------------
def _recording_identity(seen, **options):
    @tp.custom_vjp(**options)
    def f(x):
        return x * 2.0
    f.defvjp(lambda x: (x * 2.0, None), lambda r, g: (seen.append(g) or g * 2.0,))
    return f


@pytest.mark.parametrize("index", [0, np.array([0, 2]), slice(1, None)])
def test_custom_vjp_rule_gets_dense_cotangents(index):
    seen = []
    f = _recording_identity(seen)
    g = tp.grad(lambda x: np.sum(f(x)[index]), sparse=False)(np.ones(4))
    assert [type(s) for s in seen] == [np.ndarray]
    expected = np.zeros(4)
    np.add.at(expected, np.arange(4)[index], 2.0)
    np.testing.assert_array_equal(g, expected)


def test_custom_vjp_sparse_cotangents_opt_in():
    seen = []
    f = _recording_identity(seen, sparse_cotangents=True)
    g = tp.grad(lambda x: f(x)[0], sparse=False)(np.ones(4))
    assert hasattr(seen[0], "todense")  # an AxisSparse, as asked for
    np.testing.assert_array_equal(g, [2.0, 0, 0, 0])


# --- 15. custom_jvp: static arguments and keywords like custom_vjp --------------------
@tp.custom_jvp
def scaled_apply(x, fn, name, scale=2.0):
    return scale * fn(x) * len(name)


@scaled_apply.defjvp
def _scaled_apply_jvp(primals, tangents):
    x, fn, name, *scale = primals  # defaults are bound only when keywords are given
    tx, tfn, tname, *tscale = tangents
    scale, tscale = (scale[0], tscale[0]) if scale else (2.0, 0.0)
    assert tfn is None and tname is None  # static: no tangent
    dfn = tp.grad(lambda t: np.sum(fn(t)))  # elementwise fn
    return (scaled_apply(x, fn, name, scale),
            (scale * dfn(x) * tx + tscale * fn(x)) * len(name))


def test_custom_jvp_static_arguments_and_keywords():
    x = rng.standard_normal(3)
    ref = 3.0 * (1 - np.tanh(x) ** 2) * 2
    g = tp.grad(lambda x: np.sum(scaled_apply(x, np.tanh, "ab", scale=3.0)))(x)
    np.testing.assert_allclose(g, ref, rtol=1e-12)
    g = tp.grad(lambda x: np.sum(scaled_apply(x, name="ab", fn=np.tanh, scale=3.0)))(x)
    np.testing.assert_allclose(g, ref, rtol=1e-12)
    _, t = tp.jvp(lambda x, s: scaled_apply(x, np.tanh, "ab", scale=s), (x, 3.0),
                  (np.ones(3), 1.0))
    np.testing.assert_allclose(t, ref + np.tanh(x) * 2, rtol=1e-12)
    check_grads(lambda x, s: np.sum(scaled_apply(x, np.sin, "abc", scale=s)), (x, 1.5))
    check_grads(lambda x: np.sum(scaled_apply(x, np.sin, "abc")), (x.astype(np.float32),))


def test_custom_jvp_keyword_only_refused_like_custom_vjp():
    @tp.custom_jvp
    def f(x, *, k):
        return x * k
    f.defjvp(lambda p, t: (f(*p), t[0]))
    with pytest.raises(TypeError, match="custom_jvp: f takes keyword-only"):
        tp.grad(lambda x: np.sum(f(x, k=2.0)))(np.ones(2))


# --- the same class elsewhere: custom_jvp tangents matched by key, not by position ---
def test_custom_jvp_tangent_output_matched_by_key():
    @tp.custom_jvp
    def two(x):
        return {"a": x * 2.0, "b": x * 3.0}

    @two.defjvp
    def two_jvp(p, t):
        return two(*p), {"b": t[0] * 3.0, "c": t[0] * 2.0}
    with pytest.raises(ValueError, match=r"custom_jvp: the rule of two returned a tangent "
                                         r"whose structure does not match the output.*"
                                         r"keys \['a', 'b'\], got keys \['b', 'c'\]"):
        tp.grad(lambda x: np.sum(two(x)["a"]))(np.ones(2))

    @two.defjvp
    def two_jvp_ok(p, t):
        return two(*p), {"b": t[0] * 3.0, "a": None}  # None: a zero tangent
    np.testing.assert_array_equal(tp.grad(lambda x: np.sum(two(x)["b"]))(np.ones(2)), 3.0)


# --- custom_jvp tangents checked like custom_vjp cotangents: shape, dtype, a pair ---
def _sin_with_rule(rule):
    @tp.custom_jvp
    def s(x):
        return np.sin(x)
    s.defjvp(rule)
    return s


@pytest.mark.parametrize("bad", [lambda t: np.ones(3), lambda t: 1.0,
                                 lambda t: np.ones(1), lambda t: np.sum(t)])
@pytest.mark.parametrize("how", ["jvp", "jacfwd", "grad"])
def test_custom_jvp_tangent_of_another_shape_is_refused(bad, how):
    s = _sin_with_rule(lambda p, t: (np.sin(p[0]), bad(t[0])))
    x = np.array([0.5, 1.5])
    with pytest.raises(ValueError, match=r"custom_jvp: the rule of s returned a tangent of "
                                         r"shape \(\d?,?\) for the output, whose shape is \(2,\)"):
        if how == "jvp":
            tp.jvp(s, (x,), (np.ones(2),))
        elif how == "jacfwd":
            tp.jacfwd(s)(x)
        else:
            tp.grad(lambda x: np.sum(s(x)))(x)


def test_custom_jvp_tangent_dtype_is_the_outputs():
    x32 = np.array([0.5, 1.5], np.float32)
    s = _sin_with_rule(lambda p, t: (np.sin(p[0]), np.cos(p[0]).astype(np.float64) * t[0]))
    _, t = tp.jvp(s, (x32,), (np.ones(2, np.float32),))
    assert t.dtype == np.float32
    assert tp.jacfwd(s)(x32).dtype == np.float32
    s = _sin_with_rule(lambda p, t: (np.sin(p[0]), 1j * np.cos(p[0]) * t[0]))
    with pytest.raises(TypeError, match="custom_jvp: the rule of s returned a tangent of "
                                        "dtype complex128 for the output"):
        tp.jvp(s, (np.ones(2),), (np.ones(2),))
    s = _sin_with_rule(lambda p, t: (np.sin(p[0]), np.cos(p[0]) * t[0], None))
    with pytest.raises(TypeError, match=r"custom_jvp: the rule of s must return a pair "
                                        r"\(primal_out, tangent_out\), got 3 values"):
        tp.jvp(s, (np.ones(2),), (np.ones(2),))


# --- omitted defaults are filled in however the function is called (as JAX binds them) ---
def test_custom_vjp_rules_see_omitted_defaults_like_passed_ones():
    @tp.custom_vjp
    def f(x, y=2.0):
        return x * y
    f.defvjp(lambda x, y: (x * y, (x, y)), lambda r, g: (g * r[1], np.sum(g * r[0])))
    x = np.array([0.3, 1.2])
    for call in (lambda v: f(v), lambda v: f(v, 2.0), lambda v: f(x=v), lambda v: f(v, y=2.0)):
        np.testing.assert_array_equal(tp.grad(lambda v: np.sum(call(v)))(x), [2.0, 2.0])

    @functools.partial(tp.custom_vjp, nondiff_argnums=(1,))
    def power(x, n=3):
        return x ** n
    power.defvjp(lambda x, n: (x ** n, x), lambda n, r, g: (g * n * r ** (n - 1),))
    assert tp.grad(power)(2.0) == 12.0  # was refused: nondiff_argnums=(1,) but 1 argument


def test_custom_jvp_rule_sees_omitted_defaults():
    @tp.custom_jvp
    def f(x, y=2.0):
        return x * y
    f.defjvp(lambda p, t: (p[0] * p[1], t[0] * p[1] + p[0] * t[1]))  # t[1] was an IndexError
    x = np.array([0.3, 1.2])
    np.testing.assert_array_equal(tp.grad(lambda v: np.sum(f(v)))(x), [2.0, 2.0])
    check_grads(lambda v: np.sum(f(v) ** 2), (x,), order=2)


def test_constant_arguments_of_custom_rules_keep_the_point_of_a_kept_trace():
    # a checkpoint's recompute and bwd's residuals read their constant
    # arguments when the pullback runs: an in-place update in between moved them
    W0, x = np.array([1.0, 2.0]), np.array([0.3, 1.2])
    ref = np.cos(W0 * x) * W0

    @tp.custom_vjp
    def f(u, w):
        return np.sum(np.sin(w * u))
    f.defvjp(lambda u, w: (f(u, w), (u, w)), lambda r, g: (g * r[1] * np.cos(r[1] * r[0]), None))
    ck = tp.checkpoint(lambda u, w: np.sum(np.sin(w * u)))
    for rule in (f, ck):
        W = W0.copy()
        _, pb = tp.vjp(lambda v: rule(v, W), x)
        _, f_jvp = tp.linearize(lambda v: rule(v, W), x)
        W[:] = 0.0
        np.testing.assert_allclose(pb(1.0)[0], ref, rtol=1e-12)
        np.testing.assert_allclose([f_jvp(e) for e in np.eye(2)], ref, rtol=1e-12)


def test_checkpoint_output_without_a_cotangent_adds_nothing():
    """jacrev's row of one output, or a loss of one output of several: the
    others get no cotangent, and add nothing, as without checkpoint (a zero
    cotangent pushed through ``sin``'s rule at cos < 0 gave -0.0 there)."""
    def g(d):
        return {k: np.sin(v) * (i + 1) for i, (k, v) in enumerate(d.items())}
    x = np.arange(1.0, 4.0)
    d = {"a": x, "b": 2 * x}
    for T in (tp.jacrev, lambda f: tp.grad(lambda d: np.sum(f(d)["a"]))):
        want = tp.tree_flatten(T(g)(d))[0]
        got = tp.tree_flatten(T(tp.checkpoint(g))(d))[0]
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (a, b)


# --- checkpoint: state that changes only the gradient --------------------------------
class _Counter:
    def __init__(self):
        self.n = 0


_STEPS = [0]


def _straight_through_by_list(x):
    """A mask chosen by a counter the function steps: the value is the same
    either way, the gradient is not (the straight-through half)."""
    _STEPS[0] += 1
    y = x * 2.0
    return np.sum(y if _STEPS[0] % 2 else y * 0.0 + tp.stop_gradient(y))


def _state_kinds():
    box = _Counter()

    def by_attribute(x):
        box.n += 1
        y = x * 2.0
        return np.sum(y if box.n % 2 else y * 0.0 + tp.stop_gradient(y))
    n = 0

    def by_cell(x):
        nonlocal n
        n += 1
        y = x * 2.0
        return np.sum(y if n % 2 else y * 0.0 + tp.stop_gradient(y))
    return [_straight_through_by_list, by_attribute, by_cell]


@pytest.mark.parametrize("f", _state_kinds(), ids=lambda f: f.__name__)
def test_checkpoint_refuses_a_recompute_from_changed_state(f):
    """The recompute would see the counter stepped once more and
    differentiate the masked half (gradient 0) where the forward's value
    came from the live one (gradient 2): refused, naming the state."""
    x = np.arange(3.0)
    with pytest.raises(RuntimeError, match=r"checkpoint.*since the forward pass"):
        tp.grad(lambda x: tp.checkpoint(f)(x))(x)


def test_checkpoint_reading_unchanged_state_is_not_refused():
    scale = {"s": 3.0}
    table = np.arange(4.0)

    def f(x):
        return np.sum(np.sin(x) * scale["s"] + table[1:])
    x = np.linspace(0.1, 1.0, 3)
    got = tp.grad(lambda x: tp.checkpoint(f)(x))(x)
    np.testing.assert_allclose(got, 3.0 * np.cos(x), rtol=1e-14)
    scale["s"] = 5.0  # changed between calls, not within one: each call is its own
    np.testing.assert_allclose(tp.grad(lambda x: tp.checkpoint(f)(x))(x), 5.0 * np.cos(x),
                               rtol=1e-14)


def _activation_layer():
    """A JAX-style custom_jvp with a static activation in nondiff_argnums."""
    @functools.partial(tp.custom_jvp, nondiff_argnums=(1,))
    def layer(p, act, scale=1.0):
        z = scale * (p["W"] @ p["x"] + p["b"])
        return np.tanh(z) if act == "tanh" else z

    @layer.defjvp
    def _(act, primals, tangents):
        (p, scale), (t, t_scale) = primals, tangents
        u = p["W"] @ p["x"] + p["b"]
        du = t["W"] @ p["x"] + p["W"] @ t["x"] + t["b"]
        z, dz = scale * u, scale * du + t_scale * u
        if act == "tanh":
            y = np.tanh(z)
            return y, (1 - y ** 2) * dz
        return z, dz
    return layer


def test_custom_jvp_nondiff_argnums_under_every_transform():
    """Before: custom_jvp(nondiff_argnums=...) was a TypeError naming no
    operation; JAX programs use it for activations, tolerances, callables."""
    layer = _activation_layer()
    rng = np.random.default_rng(0)
    p = {"W": rng.standard_normal((3, 4)), "x": rng.standard_normal(4), "b": rng.standard_normal(3)}
    for act in ("tanh", "linear"):
        def loss(p, s):
            return np.sum(layer(p, act, s) ** 2)
        check_grads(loss, (p, 0.7), order=2)
        g = tp.grad(loss)(p, 0.7)
        jit_g = tp.jit(tp.grad(loss))(p, 0.7)
        for k in p:
            np.testing.assert_allclose(jit_g[k], g[k], rtol=1e-12)
        xs = rng.standard_normal((5, 4))
        per_item = np.stack([tp.grad(lambda x: loss({**p, "x": x}, 0.7))(x) for x in xs])
        np.testing.assert_allclose(tp.vmap(tp.grad(lambda x: loss({**p, "x": x}, 0.7)))(xs), per_item,
                                   rtol=1e-12)
        y, ty = tp.jvp(lambda x: layer({**p, "x": x}, act=act, scale=0.7), (p["x"],), (np.ones(4),))
        np.testing.assert_allclose(ty, tp.jacfwd(lambda x: layer({**p, "x": x}, act, 0.7))(p["x"]).sum(1))


def test_custom_jvp_nondiff_argnum_traced_is_refused():
    layer = _activation_layer()
    p = {"W": np.ones((2, 2)), "x": np.ones(2), "b": np.zeros(2)}
    with pytest.raises(TypeError, match="nondiff_argnums"):
        tp.grad(lambda a: np.sum(layer(p, a)))(np.ones(2))


def test_checkpoint_of_an_in_place_update_of_its_argument_leaves_the_callers_array():
    # its forward pass ran f on the caller's array, which x *= x changed; the
    # recompute then differed (refused, naming random draws) and the caller's
    # array stayed changed. Now f sees its arguments as the traced f does.
    def f(x):
        x *= x
        return np.sum(x)

    def g(x, out):
        x += 1.0
        out.append(x)
        return x   # handed back: stays the caller's (writable) array when unchanged

    for transform in (tp.grad, lambda h: (lambda x: tp.vjp(h, x)[0])):
        x = np.arange(3.0)
        r = transform(lambda x: tp.checkpoint(f)(x))(x)
        assert np.array_equal(x, np.arange(3.0))
        assert np.allclose(r, 2 * x if transform is tp.grad else np.sum(x * x))
    x = np.arange(3.0)
    assert np.allclose(tp.grad(lambda x: np.sum(tp.checkpoint(g)(x, []) ** 2))(x), 2 * (x + 1))
    assert np.array_equal(x, np.arange(3.0))
    y, _ = tp.vjp(tp.checkpoint(lambda x: x), x)
    assert y.flags.writeable
