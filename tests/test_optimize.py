"""tapestry.optimize: pytree parameters through scipy.optimize, checked
against known optima (an independent Newton solve for logistic regression,
all ones for Rosenbrock) and against finite-difference-free closed forms."""
import re

import numpy as np
import pytest

import tapestry as tp

pytest.importorskip("scipy")
from tapestry.examples import optimize_fit as ex  # noqa: E402
from tapestry.optimize import least_squares, minimize  # noqa: E402


def _logistic_newton(x, y, l2, iters=50):
    """The optimum by Newton's method with hand-written gradient and Hessian."""
    X = np.hstack([x, np.ones((len(x), 1))])
    theta = np.zeros(X.shape[1])
    reg = np.full(X.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-X @ theta))
        g = X.T @ (p - y) / len(y) + reg * theta
        H = (X * (p * (1 - p))[:, None]).T @ X / len(y) + np.diag(reg)
        theta -= np.linalg.solve(H, g)
    return theta


def test_logistic_regression_lbfgsb_reaches_the_optimum():
    rng = np.random.default_rng(0)
    x, y = ex.logistic_data(rng)
    params, res = ex.fit_logistic(x, y, l2=1e-2)
    assert res.success and set(params) == {"w", "b"}
    assert params["w"].shape == (5,) and np.shape(params["b"]) == ()
    theta = _logistic_newton(x, y, 1e-2)
    np.testing.assert_allclose(params["w"], theta[:-1], atol=1e-5)
    np.testing.assert_allclose(params["b"], theta[-1], atol=1e-5)


def test_rosenbrock_100_newton_cg_with_hessp_reaches_all_ones():
    sol, res = ex.fit_rosenbrock(100)
    assert res.success and res.nhev > 0          # Hessian-vector products were used
    np.testing.assert_allclose(sol, np.ones(100), atol=1e-6)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # trust-krylov's solver
@pytest.mark.parametrize("method", ["trust-ncg", "trust-krylov", "trust-exact", "dogleg",
                                    "BFGS", "trust-constr"])
def test_other_methods_reach_the_2d_rosenbrock_optimum(method):
    sol, res = minimize(ex.rosenbrock, np.array([-1.2, 1.0]), method=method, tol=1e-10,
                        options={"maxiter": 2000})
    np.testing.assert_allclose(sol, [1.0, 1.0], atol=1e-4)


def test_hessp_is_the_exact_hessian_product():
    x = np.array([-1.2, 1.0, 0.3])
    v = np.array([0.5, -1.0, 2.0])
    from tapestry.optimize.bridge import _hessp
    hv = _hessp(ex.rosenbrock, lambda z: z, ())(x, v)
    H = np.array([[1200 * x[0] ** 2 - 400 * x[1] + 2, -400 * x[0], 0],
                  [-400 * x[0], 200 + 1200 * x[1] ** 2 - 400 * x[2] + 2, -400 * x[1]],
                  [0, -400 * x[1], 200]])
    np.testing.assert_allclose(hv, H @ v, rtol=1e-12)


def test_bounds_as_pytrees_and_dtypes_kept():
    p0 = {"a": np.zeros(2), "b": np.ones(3, np.float32)}
    f = lambda p: np.sum((p["a"] - 3.0) ** 2) + np.sum((p["b"] + 1.0) ** 2)  # noqa: E731
    res = minimize(f, p0, method="L-BFGS-B", lower={"a": 0.0, "b": None},
                   upper={"a": np.array([2.0, 5.0]), "b": None})
    np.testing.assert_allclose(res.x["a"], [2.0, 3.0], atol=1e-6)
    np.testing.assert_allclose(res.x["b"], -1.0, atol=1e-5)
    assert res.x["b"].dtype == np.float32
    with pytest.raises(TypeError, match=r"one \(low, high\) pair per number in params \(5 "
                                        r"here.*pass lower=\.\.\. and upper="):
        minimize(f, p0, bounds=[0.0, 1.0])
    with pytest.raises(TypeError, match="A \\(lower, upper\\) pair of pytrees is not read"):
        minimize(f, p0, bounds=({"a": 0.0, "b": None}, {"a": 2.0, "b": None}))
    with pytest.raises(ValueError, match="lower= does not match"):
        minimize(f, p0, method="L-BFGS-B", lower={"a": 0.0})
    with pytest.raises(TypeError, match="not both"):
        minimize(f, p0, bounds=[(0, 1)] * 5, lower={"a": 0.0, "b": 0.0})
    with pytest.raises(ValueError, match=re.escape("bounds of params['a'][1] are [3.0, 2.0]")):
        minimize(f, p0, lower={"a": np.array([0.0, 3.0]), "b": None}, upper=2.0)
    with pytest.raises(ValueError, match=re.escape("lower= for params['b'] must be numbers")):
        minimize(f, p0, lower={"a": 0.0, "b": (0.0, None, 1.0)})


def _issue_objective(x):
    return np.sum((x - np.array([2.0, 3.0])) ** 2)   # with x0 <= 1, x1 <= 2: the optimum is [1, 2]


@pytest.mark.parametrize("form", ["pairs", "list", "zip", "array", "Bounds", "trees"])
def test_scipy_bounds_read_as_scipy_reads_them(form):
    import scipy.optimize as so
    make = {"pairs": lambda: ((0, 1), (0, 2)), "list": lambda: [(0, 1), (None, 2)],
            "zip": lambda: zip([0, 0], [1, 2]),
            "array": lambda: np.array([[0.0, 1.0], [0.0, 2.0]]),
            "Bounds": lambda: so.Bounds([0, 0], [1, 2]), "trees": lambda: None}[form]
    kw = {"lower": 0.0, "upper": np.array([1.0, 2.0])} if form == "trees" else {}
    res = minimize(_issue_objective, np.zeros(2), bounds=make(), **kw)
    ref = so.minimize(_issue_objective, np.zeros(2), bounds=make() if form != "trees"
                      else so.Bounds([0, 0], [1, 2]))
    np.testing.assert_allclose(res.x, [1.0, 2.0], atol=1e-8)
    np.testing.assert_allclose(res.x, ref.x, atol=1e-8)


def test_ambiguous_or_misordered_scipy_bounds_are_refused():
    with pytest.raises(ValueError, match="ambiguous"):
        minimize(_issue_objective, np.zeros(2), bounds=(np.zeros(2), np.array([1.0, 2.0])))
    with pytest.raises(ValueError, match=re.escape("bounds of params[1] are [2.0, 0.0]")):
        minimize(_issue_objective, np.zeros(2), bounds=[(0, 1), (2, 0)])
    with pytest.raises(ValueError, match="Bounds have lb"):
        import scipy.optimize as so
        minimize(_issue_objective, np.zeros(2), bounds=so.Bounds([0, 0, 0], [1, 1, 1]))


@pytest.mark.parametrize("kw,what", [({"bounds": [(0, 1), (0, 2)]}, "bounds"),
                                     ({"constraints": [{"type": "ineq",
                                                        "fun": lambda x: 1 - x[0]}]},
                                      "constraints")])
def test_bounds_or_constraints_a_method_would_ignore_are_refused(kw, what):
    with pytest.raises(ValueError, match=f"method 'bfgs' ignores {what}"):
        minimize(_issue_objective, np.zeros(2), method="BFGS", **kw)


def test_callback_receives_the_pytree():
    seen = []
    minimize(lambda p: np.sum(p["x"] ** 2), {"x": np.ones(2)}, method="BFGS",
             callback=lambda p: seen.append(set(p)))
    assert seen and seen[0] == {"x"}


def test_integer_parameters_are_refused():
    with pytest.raises(TypeError, match="float arrays"):
        minimize(lambda p: np.sum(p), np.arange(3))


def test_least_squares_exponential_fit_and_pytree_residuals():
    t = np.linspace(0, 3, 40)
    y = 2.0 * np.exp(-1.3 * t)

    def res(p):
        return {"fit": p["A"] * np.exp(-p["k"] * t) - y, "prior": 1e-8 * (p["k"] - 1.3)}
    sol, r = least_squares(res, {"A": np.array(1.0), "k": np.array(1.0)})
    assert r.success
    np.testing.assert_allclose([sol["A"], sol["k"]], [2.0, 1.3], rtol=1e-8)
    # the Jacobian handed to SciPy is exact
    J_A = np.exp(-sol["k"] * t)
    np.testing.assert_allclose(r.jac[:40, 0], J_A, rtol=1e-10)


@pytest.mark.parametrize("mode", ["rev", "fwd", "auto"])
def test_least_squares_jacobian_modes(mode):
    sol, r = least_squares(lambda p: np.concatenate([p - 1.0, 0.1 * p ** 2]),
                           np.zeros(2), jac_mode=mode)
    np.testing.assert_allclose(r.jac, np.vstack([np.eye(2), np.diag(0.2 * sol)]),
                               rtol=1e-10, atol=1e-14)


def test_missing_scipy_names_the_extra(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_scipy(name, *a, **k):
        if name.startswith("scipy"):
            raise ImportError("no scipy")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_scipy)
    with pytest.raises(ImportError, match=r"tapestry\[scipy\]"):
        minimize(lambda p: np.sum(p ** 2), np.ones(2))


def test_gradient_free_methods_get_the_value_only():
    calls = []

    def f(p):
        calls.append(type(p["x"]).__name__)
        return np.sum((p["x"] - 2.0) ** 2)
    sol, res = minimize(f, {"x": np.zeros(2)}, method="Nelder-Mead",
                        options={"xatol": 1e-8, "fatol": 1e-12})
    np.testing.assert_allclose(sol["x"], 2.0, atol=1e-6)
    assert set(calls) == {"ndarray"}               # never traced


def test_dict_constraints_take_the_pytree_and_get_an_exact_jacobian():
    p0 = {"x": np.array([2.0, 0.0]), "y": np.array(1.0)}
    f = lambda p: np.sum(p["x"] ** 2) + p["y"] ** 2  # noqa: E731
    cons = [{"type": "eq", "fun": lambda p: np.sum(p["x"]) + p["y"] - 3.0},
            {"type": "ineq", "fun": lambda p, lo: p["x"] - lo, "args": (1.1,)}]
    sol, res = minimize(f, p0, method="SLSQP", constraints=cons,
                        options={"ftol": 1e-12})
    assert res.success
    np.testing.assert_allclose(sol["x"], [1.1, 1.1], atol=1e-7)
    np.testing.assert_allclose(sol["y"], 0.8, atol=1e-7)


def test_the_example_runs(capsys):
    ex.main()
    out = capsys.readouterr().out
    assert "L-BFGS-B" in out and "Newton-CG" in out


def test_newton_cg_on_dict_parameters_uses_pytree_hessian_products():
    A = np.array([[3.0, 1.0], [1.0, 2.0]])
    f = lambda p: 0.5 * p["u"] @ A @ p["u"] + np.sum((p["v"] - 1.5) ** 4) + p["u"][0]  # noqa
    sol, res = minimize(f, {"u": np.ones(2), "v": np.zeros(3)}, method="Newton-CG",
                        options={"xtol": 1e-12})
    assert res.nhev > 0
    np.testing.assert_allclose(sol["u"], np.linalg.solve(A, [-1.0, 0.0]), atol=1e-8)
    np.testing.assert_allclose(sol["v"], 1.5, atol=1e-2)   # quartic: flat minimum


def _quadratic(p):
    return np.sum((p["w"] - 1.0) ** 2) + (p["b"] + 2.0) ** 2


P0 = {"w": np.zeros(2), "b": np.array(0.0, np.float32)}


def test_minimize_returns_one_result_whose_x_is_the_pytree_and_which_unpacks():
    res = minimize(_quadratic, P0, method="BFGS")
    assert isinstance(res, tp.optimize.OptimizeResult)
    assert res.success and res.status == 0 and isinstance(res.message, str)
    assert res.nit > 0 and res.nfev > 0 and res.njev > 0 and res.hess_inv.shape == (3, 3)
    np.testing.assert_allclose(res.x["w"], 1.0, atol=1e-6)
    assert res.x["b"].dtype == np.float32 and np.isclose(res.x["b"], -2.0, atol=1e-5)
    assert np.isclose(res.fun, 0.0, atol=1e-10)
    assert res.grad is res.jac and set(res.jac) == {"w", "b"}
    np.testing.assert_allclose(res.jac["w"], res.scipy.jac[1:], rtol=1e-12)  # b first: sorted
    np.testing.assert_allclose(res.scipy.x, [-2.0, 1.0, 1.0], atol=1e-5)
    x, same = res
    assert x is res.x and same is res
    assert "success=True" in repr(res)
    assert minimize(_quadratic, P0, method="Nelder-Mead").jac is None


def test_trust_constr_result_grad_is_the_objective_gradient():
    res = minimize(_quadratic, P0, method="trust-constr")
    np.testing.assert_allclose(res.grad["w"], res.scipy.grad[1:], rtol=1e-12)
    np.testing.assert_allclose(res.x["w"], 1.0, atol=1e-5)


@pytest.mark.parametrize("kw", [{"jac": True}, {"jac": lambda x: 2 * x},
                                {"hess": lambda x: 2 * np.eye(2)}, {"hessp": lambda x, v: 2 * v}])
def test_hand_written_derivatives_are_refused_as_automatic(kw):
    name = next(iter(kw))
    with pytest.raises(TypeError, match=f"{name}= is not an argument here: .* from tapestry "
                                        f"automatically"):
        minimize(lambda x: np.sum(x ** 2), np.ones(2), method="Newton-CG", **kw)


def _decay_fit():
    t = np.linspace(0, 3, 40)
    y = 2.0 * np.exp(-1.3 * t)
    return (lambda p: {"fit": p["A"] * np.exp(-p["k"] * t) - y},
            {"A": np.array(1.0), "k": np.array(1.0)})


def test_least_squares_result_and_its_bounds_forms():
    import scipy.optimize as so
    res, p0 = _decay_fit()
    r = least_squares(res, p0, lower={"A": 0.0, "k": 0.0}, upper={"A": 1.5, "k": None})
    assert isinstance(r, tp.optimize.OptimizeResult) and np.isclose(r.x["A"], 1.5)
    np.testing.assert_allclose([r.grad["A"], r.grad["k"]], r.scipy.grad, rtol=1e-12)
    assert r.jac.shape == (40, 2) and r.fun.shape == (40,)     # SciPy's, flat
    x, same = r
    assert x is r.x and same is r
    for bounds in [([0.0, 0.0], [1.5, np.inf]), so.Bounds([0.0, 0.0], [1.5, np.inf])]:
        other = least_squares(res, p0, bounds=bounds)          # SciPy's (lb, ub), flat
        np.testing.assert_allclose([other.x["A"], other.x["k"]], [r.x["A"], r.x["k"]])
    with pytest.raises(TypeError, match="pass lower=... and upper="):
        least_squares(res, p0, bounds=({"A": 0.0, "k": 0.0}, {"A": 1.5, "k": None}))
    with pytest.raises(TypeError, match="jac= is not an argument here"):
        least_squares(res, p0, jac="3-point")


@pytest.mark.parametrize("method", [None, "Nelder-Mead", "Newton-CG"])
def test_objective_of_shape_one_is_a_scalar(method):
    # x @ w of shape (1,) is a scalar to tapestry.grad and to SciPy
    res = minimize(lambda x: (x - 3.0) ** 2, np.zeros(1), method=method)
    np.testing.assert_allclose(res.x, [3.0], atol=1e-4)
    with pytest.raises(TypeError, match=r"minimize: the objective must return a scalar, "
                                        r"got shape \(2,\)"):
        minimize(lambda x: (x - 3.0) ** 2, np.zeros(2), method="Nelder-Mead")
