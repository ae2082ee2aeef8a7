"""tests/programs/edge_progs13.py: round-13 programs (Kalman filters and RTS
smoothers, Gaussian processes with jitter, HMC leapfrog with an inner
gradient, RK4 with in-place state buffers, mixtures with logsumexp and
masks, masked attention, k-means with argmin-selected centres, splines,
FFT convolutions, eigh/svd in losses, dataclass/NamedTuple/dict pytrees,
float32, 0-d and empty edge cases) under grad, jvp, vmap and jit in both
orders; and the defects the round found, each with the test that failed
before its fix."""
import dataclasses
import warnings
from typing import NamedTuple

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

from programs.edge_progs13 import PROGRAMS as REGISTRY
from programs.runner import (CORRECT, REFUSED, check_every_order, classify, classify_forward,
                             float_argnums)

NAMES = sorted(REGISTRY)

#: Refused by design: a traced value written into a plain np.zeros buffer
#: (the message names the write and the fix, np.zeros_like).
REFUSED_BY_DESIGN = {"ar_process_lfilter_style_loop_buffer", "heat_equation_explicit_inplace_laplacian"}
#: Python branches on values inside the mapped function, refused by name under vmap.
NOT_VMAPPED = {"tnp_vectorize_scalar_branch_function", "histogram_weights_density_edges"}


def test_module_has_programs():
    assert len(NAMES) >= 100 and REFUSED_BY_DESIGN < set(NAMES) and NOT_VMAPPED < set(NAMES)


@pytest.fixture(scope="module")
def outcomes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {n: (classify(REGISTRY[n]), classify_forward(REGISTRY[n])) for n in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_program_reverse_and_forward(name, outcomes):
    rev, fwd = outcomes[name]
    if name in REFUSED_BY_DESIGN:
        assert rev.status == REFUSED and fwd.status == REFUSED, (rev.reason, fwd.reason)
        assert "zeros_like" in rev.reason or "np.stack" in rev.reason
    else:
        assert rev.status == CORRECT, (rev.status, rev.reason, rev.where)
        assert fwd.status == CORRECT, (fwd.status, fwd.reason, fwd.where)


SMOOTH = [n for n in NAMES if n not in REFUSED_BY_DESIGN and float_argnums(REGISTRY[n].make_args())]


@pytest.mark.parametrize("name", SMOOTH)
def test_every_order_of_jit_vmap_and_grad_matches_the_loop(name):
    """vmap(grad f), jit(vmap(grad f)), vmap(jit(grad f)), jit(grad f) and
    grad(jit f) against grad f item by item."""
    check_every_order(REGISTRY[name], vmapped=name not in NOT_VMAPPED)


# --- defects found by this round -----------------------------------------------------
X3 = np.array([1.0, 2.0, 3.0])

#: Casts to dtypes that hold no derivative, and what each program computes in NumPy.
NON_NUMERIC_CASTS = {
    "object": lambda x: np.sum(x.astype(object) ** 2),
    "str_and_back": lambda x: np.sum(x.astype(str).astype(float) ** 2),
    "structured_field": lambda x: np.sum(x.astype([("a", "f8")])["a"] * x),
    "np_astype_object": lambda x: np.sum(np.astype(x, object) ** 2),
    "subarray": lambda x: np.sum(x.astype(np.dtype((np.float64, (1,)))) ** 2),
    "void_bytes": lambda x: np.sum(x.astype("V8").view(np.float64) * x),
}


@pytest.mark.parametrize("how", ["grad", "jvp", "jit_grad", "grad_jit", "vmap_grad"])
@pytest.mark.parametrize("case", sorted(NON_NUMERIC_CASTS))
def test_casts_to_non_numeric_dtypes_are_refused_not_zero(case, how):
    """Before: x.astype(object / str / a structured or subarray dtype) of a
    traced x returned a plain array, so the values converted back carried
    no derivative: grad of sum(x.astype(object) ** 2) was [0, 0, 0] (right:
    2x = [2, 4, 6]); jit(grad) of the structured-field program gave x, not 2x."""
    f = NON_NUMERIC_CASTS[case]
    f(X3)                                                 # NumPy runs it
    run = {"grad": lambda: tp.grad(f)(X3), "jvp": lambda: tp.jvp(f, (X3,), (X3,)),
           "jit_grad": lambda: tp.jit(tp.grad(f))(X3), "grad_jit": lambda: tp.grad(tp.jit(f))(X3),
           "vmap_grad": lambda: tp.vmap(tp.grad(f))(np.stack([X3, X3 + 1]))}[how]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match=r"tapestry: x\.astype\(.*carries no derivative"):
            run()


def test_numeric_casts_still_differentiate_or_stay_constant():
    g = tp.grad(lambda x: np.sum(x.astype(np.float32).astype(np.float64) * x))(X3 + 0.1)
    np.testing.assert_allclose(g, 2 * (X3 + 0.1), rtol=1e-6)
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(x.astype(int) * x))(X3 + 0.5), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(x.astype(bool) * x))(X3), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(x.astype("m8[s]").astype(float) * x))(X3), X3)
    # plain vmap (nothing differentiated) of a cast to object keeps NumPy's values
    out = tp.vmap(lambda x: x.astype(object))(np.stack([X3, X3]))
    assert out.dtype == object and out.tolist() == [[1.0, 2.0, 3.0]] * 2


ATTRIBUTE_WRITES = {
    "shape": (lambda x: _set(x * 2, "shape", (3, 1)), r"y\.shape = \(3, 1\).*y = y\.reshape\(\(3, 1\)\)"),
    "dtype": (lambda x: _set(x * 2, "dtype", np.int64), r"y\.dtype = int64.*y = y\.astype\(int64\)"),
    "real": (lambda x: _set(x * (1 + 1j), "real", x ** 2), r"y\.real = v.*y = v \+ 1j \* y\.imag"),
    "imag": (lambda x: _set(x * (1 + 1j), "imag", x ** 2), r"y\.imag = v.*y = y\.real \+ 1j \* v"),
    "tobytes": (lambda x: np.sum(np.frombuffer((x * 2).tobytes())), r"y\.tobytes\(\.\.\.\) reads the memory"),
    "byteswap": (lambda x: np.sum((x * 2).byteswap()), r"y\.byteswap.*newbyteorder"),
    "getfield": (lambda x: np.sum((x * 2).getfield(np.float64)), r"y\.getfield.*astype"),
}


def _set(y, name, v):
    setattr(y, name, v)
    return np.sum(np.abs(y))


@pytest.mark.parametrize("case", sorted(ATTRIBUTE_WRITES))
def test_ndarray_attribute_writes_and_memory_reads_name_the_fix(case):
    """Before: Python's bare AttributeError ("property 'shape' of 'Var'
    object has no setter", "'Var' object has no attribute 'tobytes'"),
    which names neither tapestry nor what to write instead."""
    f, message = ATTRIBUTE_WRITES[case]
    f(X3)                                                 # NumPy runs it
    with pytest.raises(TypeError, match=r"^tapestry: " + message):
        tp.grad(f)(X3)
    with pytest.raises(TypeError, match=r"^tapestry: " + message):
        tp.jit(tp.grad(f))(X3)
    if case in ("shape", "dtype"):                        # a batched value says the same
        with pytest.raises(TypeError, match=r"^tapestry: " + message):
            tp.vmap(f)(np.stack([X3, X3]))


@tp.custom_vjp
def _clip_gradient(x):
    return x


_clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (np.clip(g, -0.1, 0.1),))


@tp.custom_vjp
def _scaled_gradient(x, s):
    return x


_scaled_gradient.defvjp(lambda x, s: (x, s), lambda s, g: (g * s, None))


@pytest.mark.parametrize("bwd", ["clip", "abs", "square", "maximum"])
@pytest.mark.parametrize("how", ["jvp", "jacfwd", "linearize", "jit_jvp", "vmap_jvp", "jvp_of_jit",
                                 "vmap_jacfwd"])
def test_forward_mode_refuses_a_backward_rule_not_linear_in_its_cotangent(bwd, how):
    """Before: tp.jvp of a gradient-clipping custom_vjp (bwd np.clip(g, -c, c))
    transposed the rule at its placeholder zero cotangent, where clip is the
    identity: jvp(sum(clip_gradient(x) ** 2), x, 1) gave 2 sum(x) = 1.27, a
    value the rule never gives (grad is clip(2x) = 0.1 each, summing to 0.3)."""
    rule = {"clip": lambda g: np.clip(g, -0.1, 0.1), "abs": np.abs, "square": lambda g: g * g,
            "maximum": lambda g: np.maximum(g, 0.0)}[bwd]

    @tp.custom_vjp
    def f(x):
        return x
    f.defvjp(lambda x: (x, None), lambda res, g: (rule(g),))

    def loss(x):
        return np.sum(f(x) ** 2)
    x = np.array([0.3, -0.4, 0.7])
    tp.grad(loss)(x)                                      # reverse mode uses the rule as given
    v = np.ones(3)
    run = {"jvp": lambda: tp.jvp(loss, (x,), (v,)), "jacfwd": lambda: tp.jacfwd(loss)(x),
           "linearize": lambda: tp.linearize(loss, x)[1](v),
           "jit_jvp": lambda: tp.jit(lambda x: tp.jvp(loss, (x,), (v,))[1])(x),
           "vmap_jvp": lambda: tp.vmap(lambda x: tp.jvp(loss, (x,), (v,))[1])(np.stack([x, -x])),
           "jvp_of_jit": lambda: tp.jvp(tp.jit(loss), (x,), (v,)),      # the jit's pullback, transposed
           "vmap_jacfwd": lambda: tp.vmap(tp.jacfwd(loss))(np.stack([x, -x]))}[how]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match=r"^tapestry forward mode.*backward rule of custom_vjp "
                                            r"function 'f' is not linear in its cotangent.*"
                                            r"tapestry\.custom_jvp"):
            run()


def test_forward_mode_keeps_linear_custom_backward_rules():
    """Rules linear in the cotangent (a scaled or masked gradient, float32,
    several outputs, nested in a hessian) still differentiate in forward mode."""
    x = np.array([0.3, -0.4, 0.7])
    loss = lambda x: np.sum(np.sin(_scaled_gradient(x, 0.5)) * x)     # noqa: E731
    v = np.array([1.0, 2.0, -1.0])
    np.testing.assert_allclose(tp.jvp(loss, (x,), (v,))[1], tp.grad(loss)(x) @ v)
    x32 = x.astype(np.float32)
    out = tp.jvp(loss, (x32,), (v.astype(np.float32),))[1]
    np.testing.assert_allclose(out, tp.grad(loss)(x) @ v, rtol=1e-5)

    @tp.custom_vjp
    def two(x):
        return np.sin(x), x ** 2

    def two_fwd(x):
        return two(x), x

    def two_bwd(x, gs):
        ga, gb = gs
        return (np.where(x > 0, ga * np.cos(x), 0.0) + 2 * x * gb,)
    two.defvjp(two_fwd, two_bwd)
    loss2 = lambda x: np.sum(two(x)[0] * two(x)[1])                      # noqa: E731
    np.testing.assert_allclose(tp.jvp(loss2, (x,), (v,))[1], tp.grad(loss2)(x) @ v)
    np.testing.assert_allclose(tp.jacfwd(tp.grad(loss))(x), tp.hessian(loss)(x), atol=1e-12)
    # an implicit-function rule through an ill-conditioned solve (cond 1e11):
    # linear, though its rounding is far above double precision's
    r = np.random.default_rng(0)
    U = np.linalg.qr(r.standard_normal((6, 6)))[0]
    A = U @ np.diag(np.logspace(0, -11, 6)) @ U.T

    @tp.custom_vjp
    def solved(b):
        return np.linalg.solve(A, b)
    solved.defvjp(lambda b: (solved(b), None), lambda res, g: (np.linalg.solve(A.T, g),))
    b, v6 = r.standard_normal(6), np.ones(6)
    got = tp.jvp(lambda b: np.sum(np.sin(solved(b) * 1e-11)), (b,), (v6,))[1]
    want = tp.jvp(lambda b: np.sum(np.sin(np.linalg.solve(A, b) * 1e-11)), (b,), (v6,))[1]
    np.testing.assert_allclose(got, want, rtol=1e-6)


@dataclasses.dataclass
class _Layer:
    W: np.ndarray
    b: np.ndarray
    name: str = "layer"


class _NT(NamedTuple):
    W: np.ndarray
    b: np.ndarray


def _layer_loss(p, x):
    return np.sum(np.tanh(x @ p.W + p.b) ** 2)


def test_vmap_in_axes_given_as_a_dataclass_prefix():
    """Before: in_axes=(_Layer(W=0, b=None), None) raised "does not match the
    structure of the arguments ... a _Layer with fields ['b'] expected": the
    int 0 of an unregistered dataclass is a static field, so the axes were
    swallowed by the spec's structure."""
    r = np.random.default_rng(0)
    X = r.standard_normal((5, 3))
    Ws = r.standard_normal((4, 3, 2))
    b = r.standard_normal(2)
    g = tp.grad(_layer_loss)
    got = tp.vmap(g, in_axes=(_Layer(0, None), None))(_Layer(Ws, b), X)
    want = [g(_Layer(W, b), X) for W in Ws]
    np.testing.assert_allclose(got.W, np.stack([w.W for w in want]))
    np.testing.assert_allclose(got.b, np.stack([w.b for w in want]))
    assert got.name == "layer"
    got = tp.jit(tp.vmap(g, in_axes=(_Layer(0, None), None)))(_Layer(Ws, b), X)
    np.testing.assert_allclose(got.W, np.stack([w.W for w in want]))
    # out_axes as a dataclass prefix; both fields mapped; a namedtuple beside it
    out = tp.vmap(lambda p: _Layer(p.W * 2, p.b), in_axes=(_Layer(0, None),),
                  out_axes=_Layer(2, None))(_Layer(Ws, b))
    np.testing.assert_allclose(out.W, np.moveaxis(Ws * 2, 0, 2))
    np.testing.assert_allclose(out.b, b)
    bs = r.standard_normal((4, 2))
    got = tp.vmap(lambda p, q: _layer_loss(p, X) + np.sum(q.W), in_axes=(_Layer(0, 0), _NT(None, 0)))(
        _Layer(Ws, bs), _NT(np.ones(2), bs))
    np.testing.assert_allclose(got, [_layer_loss(_Layer(W, c), X) + 2 for W, c in zip(Ws, bs)])
    with pytest.raises(TypeError, match="in_axes must be an int or None"):
        tp.vmap(g, in_axes=(_Layer(0, "a"), None))(_Layer(Ws, b), X)


#: Functions of the values of eigh / svd (written with the vectors' function).
_VALUES_ONLY = {
    "eigh_values": lambda S: np.sum(np.linalg.eigh(S)[0] ** 3),
    "svd_values": lambda S: np.sum(np.linalg.svd(S)[1] ** 2),
    "svd_reduced_values": lambda S: np.sum(np.linalg.svd(S, full_matrices=False)[1] ** 3),
}
_USES_VECTORS = {
    "eigh_matrix_exp": lambda S: np.sum(((lambda w, V: (V * np.exp(w)) @ V.T)(*np.linalg.eigh(S)))
                                        * np.arange(9.0).reshape(3, 3)),
    "svd_left_vectors": lambda S: np.sum(np.linalg.svd(S)[0] ** 3 * np.arange(9.0).reshape(3, 3)),
}
_DEGENERATE = {"identity": 2.0 * np.eye(3), "pair": np.diag([1.0, 1.0, 3.0])}


@pytest.mark.parametrize("point", sorted(_DEGENERATE))
@pytest.mark.parametrize("name", sorted(_VALUES_ONLY))
def test_forward_mode_of_eigenvalues_at_repeated_eigenvalues(name, point):
    """Before: jvp / jacfwd / linearize / hessian of sum(eigh(S)[0] ** 3) at
    S = 2I raised "two eigenvalues coincide ... Differentiate a function of
    the eigenvalues only" although it is one: forward mode transposes the
    whole rule, vectors' placeholder included, and the gap matrix refused.
    Reverse mode (grad) differentiated it all along."""
    f, S = _VALUES_ONLY[name], _DEGENERATE[point]
    E = np.random.default_rng(0).standard_normal((3, 3))
    E = E + E.T
    fd = (f(S + 1e-6 * E) - f(S - 1e-6 * E)) / 2e-6
    g = tp.grad(f)(S)
    np.testing.assert_allclose(np.sum(g * E), fd, rtol=1e-6)
    np.testing.assert_allclose(tp.jvp(f, (S,), (E,))[1], fd, rtol=1e-6)
    np.testing.assert_allclose(np.sum(tp.jacfwd(f)(S) * E), fd, rtol=1e-6)
    np.testing.assert_allclose(tp.linearize(f, S)[1](E), fd, rtol=1e-6)
    # the Hessian goes through the gradient's rule, which reads the vectors:
    # still refused by name there (never NaN), as before
    with pytest.raises(ValueError, match="coincide"):
        tp.hessian(f)(S)
    items = np.stack([S, S + np.diag([0.0, 0.5, 0.0])])
    got = tp.vmap(lambda s: tp.jvp(f, (s,), (E,))[1])(items)
    np.testing.assert_allclose(got, [np.sum(tp.grad(f)(s) * E) for s in items], rtol=1e-10)
    np.testing.assert_allclose(tp.jit(lambda s: tp.jvp(f, (s,), (E,))[1])(S), fd, rtol=1e-6)


@pytest.mark.parametrize("how", ["grad", "jvp", "jacfwd", "linearize", "hessian", "vmap_jvp", "jit_jvp"])
@pytest.mark.parametrize("name", sorted(_USES_VECTORS))
def test_vectors_at_repeated_eigenvalues_stay_refused_in_every_mode(name, how):
    """The vectors' derivative does not exist there: every mode still raises
    the ValueError naming the function (never a NaN or a number)."""
    f, S = _USES_VECTORS[name], _DEGENERATE["identity"]
    E = np.eye(3)
    run = {"grad": lambda: tp.grad(f)(S), "jvp": lambda: tp.jvp(f, (S,), (E,)),
           "jacfwd": lambda: tp.jacfwd(f)(S), "linearize": lambda: tp.linearize(f, S)[1](E),
           "hessian": lambda: tp.hessian(f)(S),
           "vmap_jvp": lambda: tp.vmap(lambda s: tp.jvp(f, (s,), (E,))[1])(np.stack([S, S])),
           "jit_jvp": lambda: tp.jit(lambda s: tp.jvp(f, (s,), (E,))[1])(S)}[how]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"np\.linalg\.(eigh|svd): two (eigenvalues|singular "
                                             r"values) coincide"):
            run()


def test_structured_and_masked_arrays_are_refused_naming_the_fix():
    """A field of a structured array and np.ma's functions cannot hold a
    traced value: refused with messages that name what to write instead."""
    def field_write(x):
        rec = np.zeros(3, dtype=[("m", "f8"), ("v", "f8")])
        rec["m"] = x
        return np.sum(rec["m"] ** 2)

    def masked(x):
        return np.ma.sum(np.ma.masked_array(x, mask=[0, 1, 0]) ** 2)
    assert field_write(X3) == 14.0 and masked(X3) == 10.0
    with pytest.raises(TypeError, match=r"structured array \(rec\['f'\] = v\).*separate arrays"):
        tp.grad(field_write)(X3)
    with pytest.raises(TypeError, match=r"np\.ma's functions.*np\.where\(mask, 0, x\)"):
        tp.grad(masked)(X3)
    # the fix the messages name: fields as a dict, the mask as weights
    def fields(x):
        rec = {"m": x, "v": np.zeros(3)}
        return np.sum(rec["m"] ** 2)
    np.testing.assert_allclose(tp.grad(fields)(X3), 2 * X3)
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(np.where([True, False, True], x, 0) ** 2))(X3),
                               [2.0, 0.0, 6.0])


def test_a_refused_leaf_of_a_container_argument_is_named_by_its_path():
    """Before: grad of a NamedTuple (W, k) with an int k said "argument 0 has
    dtype int64", though argument 0 is the NamedTuple and W is float."""
    W = np.ones(2)
    cases = [(lambda p: np.sum(p.W ** p.k), _IntField(W, 2), r"argument 0 at \.k has dtype int64.*int field"),
             (lambda p: np.sum(p["W"] ** p["k"]), {"W": W, "k": np.array([2])},
              r"argument 0 at \['k'\] has dtype int64"),
             (lambda p: np.sum(p[0]), [W, "a"], r"argument 0 at \[1\] has a leaf of type str")]
    for f, arg, message in cases:
        with pytest.raises(TypeError, match=r"^tapestry\.grad: " + message):
            tp.grad(f)(arg)
        with pytest.raises(TypeError, match=r"^tapestry\.jvp: " + message):
            tp.jvp(f, (arg,), (arg,))
    with pytest.raises(TypeError, match=r"^tapestry\.grad: argument 0 has dtype int64"):
        tp.grad(lambda x: np.sum(x))(np.array([1, 2]))   # a bare argument: no path
    # the fix the message names: k as a separate, non-differentiated argument
    np.testing.assert_allclose(tp.grad(lambda w, k: np.sum(w ** k))(W * 3, 2), 6 * W)


class _IntField(NamedTuple):
    W: np.ndarray
    k: int


@pytest.mark.parametrize("how", ["grad", "vjp", "jit_grad", "vmap_grad", "hessian"])
def test_reverse_mode_refuses_a_tangent_rule_not_linear_in_its_tangent(how):
    """The mirror of the custom_vjp case: reverse mode transposes a
    custom_jvp rule, which a rule clipping its tangent does not allow.
    Before: grad of sum(f(x) * w) with the tangent rule clip(t, -.1, .1) cos(x)
    gave cos(x) w (the transpose at a zero tangent), silently."""
    @tp.custom_jvp
    def f(x):
        return np.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return np.sin(x), np.clip(t, -0.1, 0.1) * np.cos(x)
    w = np.array([1.0, 2.0, 3.0])

    def loss(x):
        return np.sum(f(x) * w)
    x = np.array([0.3, -0.4, 0.7])
    tp.jvp(loss, (x,), (np.ones(3),))                    # forward mode runs the rule as given
    run = {"grad": lambda: tp.grad(loss)(x), "vjp": lambda: tp.vjp(loss, x)[1](1.0),
           "jit_grad": lambda: tp.jit(tp.grad(loss))(x),
           "vmap_grad": lambda: tp.vmap(tp.grad(loss))(np.stack([x, -x])),
           "hessian": lambda: tp.hessian(loss)(x)}[how]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match=r"^tapestry reverse mode.*tangent rule of custom_jvp "
                                            r"function 'f' is not linear in its tangent"):
            run()


def test_linear_tangent_rules_still_transpose():
    """Rules linear in the tangents (the usual derivative-times-t, two inputs,
    float32, nondiff_argnums) keep their gradients."""
    @tp.custom_jvp
    def g(x, y):
        return x * np.exp(y)

    @g.defjvp
    def g_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        out = g(x, y)
        return out, tx * np.exp(y) + out * ty
    x, y = np.array([0.3, -0.4]), np.array([0.1, 0.2])
    check_grads(lambda x, y: np.sum(np.sin(g(x, y))), (x, y))
    gx = tp.grad(lambda x: np.sum(g(x, y.astype(np.float32))))(x.astype(np.float32))
    assert gx.dtype == np.float32
    np.testing.assert_allclose(gx, np.exp(y), rtol=1e-6)

    import functools

    @functools.partial(tp.custom_jvp, nondiff_argnums=(0,))
    def act(fn, x):
        return fn(x)

    @act.defjvp
    def act_jvp(fn, primals, tangents):
        (x,), (t,) = primals, tangents
        return fn(x), tp.grad(lambda z: np.sum(fn(z)))(x) * t
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(act(np.tanh, x)))(x), 1 - np.tanh(x) ** 2)
