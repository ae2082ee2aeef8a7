"""tests/programs/edge_progs12.py: round-12 programs (integrators with
in-place state, filters, GPs, HMM/CRF, transformer blocks, stride-trick
convolutions, optimal transport, n-body and springs, option pricing,
kinematics, signal processing, survival, mixtures, scatter on indices,
sorting, ties, linear-algebra variants, einsum, padding, complex values,
dtypes) under grad, jvp, vmap and jit(grad); and the defects the round
found, each with the test that failed before its fix."""
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

from programs.edge_progs12 import PROGRAMS as REGISTRY
from programs.runner import CORRECT, REFUSED, classify, classify_forward, float_argnums

NAMES = sorted(REGISTRY)

#: Refused by design (tests/test_user_programs.py's REFUSED_BY_DESIGN gives the classes).
REFUSED_BY_DESIGN = {
    # scipy.special.logsumexp / softmax convert their input: tnp.logsumexp, tapestry.scipy.special
    "hmm_forward_logsumexp_scipy", "sinkhorn_log_domain", "gmm_diag_logsumexp_b_weights",
    "mixture_em_step_responsibilities_stop",
    # numpy.polynomial's series functions convert their coefficients (np.array(c, copy=...))
    "numpy_polynomial_polyval_chebval",
    # out= on traced arrays: refused by name (docs/ops.md)
    "explicit_out_on_traced_arrays",
    # np.pad(reflect_type='odd') has no rule: refused naming the option
    "pad_reflect_odd_extrapolation",
}
#: Finite differences in float64 cannot see through float16 rounding.
CAST_NOISE = {"float16_mean_cumsum_softmax"}
#: sqrt at the exact 0 of the diagonal: inf * 0 = nan in reverse mode, as in JAX.
NAN_AS_JAX = {"nbody_fill_diagonal_on_traced_distances"}
#: Evaluated at exact ties, where the derivative is a convention (docs/ops.md:
#: maximum splits 1/2 : 1/2, clip's closed interval, the sort's order) that
#: central differences along a random direction need not reproduce.
AT_TIES = {"max_with_tie_and_argmax_gather", "maximum_minimum_clip_exact_ties",
           "median_and_quantiles_with_tied_values"}
SPECIAL = REFUSED_BY_DESIGN | CAST_NOISE | NAN_AS_JAX | AT_TIES


def test_module_has_programs():
    assert len(NAMES) >= 95 and SPECIAL < set(NAMES)


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
    elif name in SPECIAL:
        assert rev.status != REFUSED and fwd.status != REFUSED
    else:
        assert rev.status == CORRECT, (rev.status, rev.reason, rev.where)
        assert fwd.status == CORRECT, (fwd.status, fwd.reason, fwd.where)


def _stacked(args, argnums, t):
    """Two items: the program's arguments and a perturbed copy, stacked."""
    def moved(a):
        return tp.tree_map(lambda l: (np.asarray(l) + t * np.cos(np.arange(np.size(l))).reshape(np.shape(l)))
                           .astype(np.result_type(l)), a)
    return [tp.tree_map(lambda u, v: np.stack([np.asarray(u), np.asarray(v)]), a, moved(a))
            if i in argnums else a for i, a in enumerate(args)]


#: vmap of a per-item mask in np.copyto (refused by name under vmap).
NOT_VMAPPED = {"copyto_putmask_place_on_traced", "cov_average_weighted_rowvar_false"}
SMOOTH = [n for n in NAMES if n not in SPECIAL - AT_TIES and float_argnums(REGISTRY[n].make_args())]


@pytest.mark.parametrize("name", SMOOTH)
def test_vmap_grad_and_jit_grad_match_the_loop(name):
    """vmap(f), vmap(grad f) and jit(f), jit(grad f) against f and grad f item by item."""
    p = REGISTRY[name]
    args = p.make_args()
    an = float_argnums(args)
    axes = tuple(0 if i in an else None for i in range(len(args)))
    low = any(np.result_type(l) in (np.float32, np.float16) for i in an for l in tp.tree_leaves(args[i]))
    tol = dict(rtol=1e-3 if low else 1e-7, atol=1e-6)
    g = tp.grad(p.fn, argnums=an)
    items = _stacked(args, an, 0.01)
    one = [tuple(tp.tree_map(lambda l, k=k: np.asarray(l)[k], a) if i in an else a
                 for i, a in enumerate(items)) for k in (0, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name not in NOT_VMAPPED:
            np.testing.assert_allclose(tp.vmap(p.fn, in_axes=axes)(*items), [p.fn(*a) for a in one], **tol)
            want = [tp.tree_leaves(g(*a)) for a in one]
            for k, leaf in enumerate(tp.tree_leaves(tp.vmap(g, in_axes=axes)(*items))):
                np.testing.assert_allclose(leaf, np.stack([want[0][k], want[1][k]]), **tol)
        jf, jg = tp.jit(p.fn), tp.jit(g)
        for a in one:
            np.testing.assert_allclose(jf(*a), p.fn(*a), **tol)
            for u, v in zip(tp.tree_leaves(jg(*a)), tp.tree_leaves(g(*a))):
                np.testing.assert_allclose(u, v, **tol)


# --- defects found by this round -----------------------------------------------------
def _matrix(m, n, svals, seed, complex_=False):
    """U diag(svals) Vᴴ with random unitary U, V: singular values chosen."""
    r = np.random.default_rng(seed)

    def unitary(k):
        z = r.standard_normal((k, k)) + (1j * r.standard_normal((k, k)) if complex_ else 0)
        return np.linalg.qr(z)[0]
    S = np.zeros((m, n))
    S[np.arange(len(svals)), np.arange(len(svals))] = svals
    return unitary(m) @ S @ unitary(n).conj().T


def _weights(shape):
    return np.cos(np.arange(int(np.prod(shape)))).reshape(shape)


#: (matrix, rcond) where rcond drops a singular value that is not 0.
TRUNCATED = {
    "tall": (_matrix(5, 3, [3.0, 1.0, 0.05], 1), 0.1),
    "wide": (_matrix(3, 5, [3.0, 1.0, 0.05], 2), 0.1),
    "square_two_dropped": (_matrix(4, 4, [3.0, 2.0, 0.2, 0.05], 3), 0.1),
    "square_dropped_and_zero": (_matrix(4, 4, [3.0, 2.0, 0.2, 0.0], 4), 0.1),
    "one_kept": (_matrix(4, 3, [3.0, 1.0, 0.5], 5), 0.5),
}
_TRUNCATED_LOSSES = {
    "pinv": lambda A, rc: np.sum(np.linalg.pinv(A, rcond=rc) * _weights(A.shape[::-1])),
    "pinv_rtol": lambda A, rc: np.sum(np.linalg.pinv(A, rtol=rc) * _weights(A.shape[::-1])),
    "lstsq": lambda A, rc: np.sum(np.linalg.lstsq(A, _weights(A.shape[:1]), rcond=rc)[0] ** 2),
    "lstsq_2d": lambda A, rc: np.sum(np.linalg.lstsq(A, _weights((A.shape[0], 2)), rcond=rc)[0]
                                     * _weights((A.shape[1], 2))),
}


@pytest.mark.parametrize("loss", sorted(_TRUNCATED_LOSSES))
@pytest.mark.parametrize("case", sorted(TRUNCATED))
def test_pinv_and_lstsq_with_a_truncating_rcond(case, loss):
    """Before: Golub & Pereyra's rule, exact only where the dropped singular
    values are 0, was used for any rcond; a truncated SVD (rcond dropping
    0.05 of 3) got a gradient off by several percent (lstsq: 0.096 vs 0.049)."""
    A, rc = TRUNCATED[case]

    def f(a):
        return _TRUNCATED_LOSSES[loss](a, rc)
    check_grads(f, (A,))
    v = _weights(A.shape) * 0.3
    fd = (f(A + 1e-6 * v) - f(A - 1e-6 * v)) / 2e-6
    np.testing.assert_allclose(tp.jvp(f, (A,), (v,))[1], fd, rtol=1e-5, atol=1e-8)


def test_truncated_pinv_complex_stacked_vmapped_jitted_float32():
    Ac = _matrix(4, 3, [3.0, 1.0, 0.05], 6, complex_=True)
    check_grads(lambda a: np.sum(np.abs(np.linalg.pinv(a, rcond=0.1) * _weights((3, 4))) ** 2), (Ac,))
    check_grads(lambda re, im: np.sum(np.real(np.linalg.pinv(re + 1j * im, rcond=0.1)) * _weights((3, 4)))
                + np.sum(np.imag(np.linalg.pinv(re + 1j * im, rcond=0.1))), (Ac.real.copy(), Ac.imag.copy()))
    stack = np.stack([_matrix(4, 3, [3.0, 1.0, 0.05], 7), _matrix(4, 3, [3.0, 1.0, 0.5], 8)])
    for rc in (0.1, np.array([0.1, 0.01])):       # per-matrix cutoffs, as NumPy's
        check_grads(lambda a: np.sum(np.linalg.pinv(a, rcond=rc) * _weights((2, 3, 4))), (stack,))

    def f(a):
        return np.sum(np.linalg.pinv(a, rcond=0.1) * _weights((3, 4)))
    g = tp.grad(f)
    np.testing.assert_allclose(tp.vmap(g)(stack), np.stack([g(a) for a in stack]), rtol=1e-10)
    jg = tp.jit(g)
    for a in stack:
        np.testing.assert_allclose(jg(a), g(a), rtol=1e-10)
    g32 = g(stack[0].astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, g(stack[0]), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("how", ["hessian", "jacfwd_grad", "jacrev_grad"])
def test_truncated_pinv_second_derivative_refused_by_name(how):
    """The truncated rule is exact to first order; its own derivative has no
    rule, so a second derivative is refused naming pinv/lstsq (not taken as
    if the singular vectors were constants)."""
    A = TRUNCATED["tall"][0]

    def f(a):
        return np.sum(np.linalg.lstsq(a, _weights((5,)), rcond=0.1)[0] ** 2)
    op = {"hessian": tp.hessian, "jacfwd_grad": lambda h: tp.jacfwd(tp.grad(h)),
          "jacrev_grad": lambda h: tp.jacrev(tp.grad(h))}[how]
    with pytest.raises(NotImplementedError, match=r"np\.linalg\.pinv / np\.linalg\.lstsq with an rcond"):
        op(f)(A)


def test_exact_rank_deficiency_keeps_second_derivatives():
    """Dropped singular values that are 0 to working precision keep Golub &
    Pereyra's rule, differentiable to every order (in directions that keep
    the rank: A = B C with B, C perturbed)."""
    r = np.random.default_rng(9)
    B, C = r.standard_normal((5, 2)), r.standard_normal((2, 4))
    check_grads(lambda b, c: np.sum(np.linalg.pinv(b @ c, rcond=1e-8) * _weights((4, 5))), (B, C), order=2)


def test_hermitian_pinv_reads_only_the_lower_triangle():
    """Before: pinv(hermitian=True) inverts the Hermitian matrix of a's lower
    triangle (eigh), but the rule used a itself in I - A A⁺, so an input whose
    upper triangle differed got a gradient off by 100x (-8052 vs -73.8)."""
    r = np.random.default_rng(10)
    S = r.standard_normal((4, 4))
    S = S + S.T
    N = S + np.triu(r.standard_normal((4, 4)), 1)
    W = _weights((4, 4))
    check_grads(lambda a: np.sum(np.linalg.pinv(a, hermitian=True) * W), (N,), order=2)
    check_grads(lambda a: np.sum(np.linalg.pinv(a, rcond=0.05, hermitian=True) * W), (N,))
    H = _matrix(4, 4, [3.0, 2.0, 0.2, 0.05], 11, complex_=True)
    H = H + H.conj().T + np.triu(r.standard_normal((4, 4)) * 1j, 1)
    check_grads(lambda a: np.sum(np.abs(np.linalg.pinv(a, hermitian=True)) ** 2), (H,))
    g = tp.grad(lambda a: np.sum(np.linalg.pinv(a, hermitian=True) * W))(N)
    assert np.all(np.triu(g, 1) == 0)


def test_polyfit_with_a_truncating_rcond_in_x():
    """np.polyfit(rcond=...) solves by lstsq: the x gradient was off by 3%."""
    x = np.linspace(0, 1, 8)
    check_grads(lambda x, y: np.sum(np.polyfit(x, y, 4, rcond=0.05) * np.arange(5)), (x, np.sin(3 * x)))


def _rhs_into_empty_like(s):
    out = np.empty_like(s)
    out[:2] = s[2:]
    out[2:] = -s[:2] ** 3
    return np.sum(out ** 2)


def _rows_into_zeros(s):
    out = np.zeros((2, 4))
    out[1] = s
    return np.sum(out)


def _everything_into_zeros_like(s):
    out = np.zeros_like(s)
    out[...] = np.sin(s)
    return np.sum(out)


@pytest.mark.parametrize("f", [_rows_into_zeros])
@pytest.mark.parametrize("how", ["grad", "jvp", "jit_grad"])
def test_array_written_into_a_plain_buffer_names_the_write(f, how):
    """Before: "cannot convert a traced array to a NumPy array (np.asarray /
    np.array)", naming a conversion the program never wrote; now the item
    write, and what to start the buffer from."""
    x = np.arange(1.0, 5.0)
    run = {"grad": lambda: tp.grad(f)(x), "jvp": lambda: tp.jvp(f, (x,), (x,)),
           "jit_grad": lambda: tp.jit(tp.grad(f))(x)}[how]
    with pytest.raises(TypeError, match=r"y\[\.\.\.\] = v writes a traced array v into y, a plain"):
        run()


@pytest.mark.parametrize("f", [_rhs_into_empty_like, _everything_into_zeros_like])
def test_a_buffer_made_like_a_traced_value_differentiates(f):
    """np.empty_like / np.zeros_like of a traced value are traced (constants
    of its tape): the writes into them are item assignment."""
    x = np.arange(1.0, 5.0)
    check_grads(f, (x,), order=2)
    np.testing.assert_allclose(tp.jit(tp.grad(f))(x), tp.grad(f)(x), rtol=1e-14)


def test_the_suggested_traced_buffer_differentiates_and_asarray_keeps_its_message():
    def f(s):
        out = np.zeros_like(s)
        out[:2] = s[2:] ** 2
        out[2:] = -s[:2]
        return np.sum(out * np.arange(4))
    check_grads(f, (np.arange(1.0, 5.0),), order=2)
    with pytest.raises(TypeError, match="cannot convert a traced array to a NumPy array"):
        tp.grad(lambda s: np.sum(np.asarray(s)))(np.arange(1.0, 5.0))
    assert classify(REGISTRY["rk4_kepler_inplace_state"]).status == CORRECT


_A4 = np.random.default_rng(12).standard_normal((4, 4))
_V4 = np.random.default_rng(13).standard_normal(4)

#: NumPy 2's gufuncs with a keyword that changes the result: the forms here
#: dropped it (np.matvec(A, v, axes=...) gave A @ v: 14.08, not 10.56).
_GUFUNC_KEYWORDS = {
    "matvec_axes": lambda a: np.sum(np.matvec(a, _V4, axes=[(1, 0), 0, 0]) * np.arange(4)),
    "vecmat_axes": lambda a: np.sum(np.vecmat(_V4, a, axes=[0, (1, 0), 0]) * np.arange(4)),
    "vecdot_keepdims": lambda a: np.sum(np.vecdot(a, a[:1], keepdims=True) * np.arange(4)[:, None]),
    "vecdot_axes": lambda a: np.sum(np.vecdot(a, a[::-1], axes=[0, 0, ()]) * np.arange(4)),
    "matmul_axes": lambda a: np.sum(np.matmul(a, a[::-1], axes=[(1, 0), (0, 1), (0, 1)])),
}


@pytest.mark.parametrize("name", sorted(_GUFUNC_KEYWORDS))
@pytest.mark.parametrize("how", ["grad", "jvp", "vmap"])
def test_gufunc_keywords_are_refused_by_name_not_dropped(name, how):
    f = _GUFUNC_KEYWORDS[name]
    run = {"grad": lambda: tp.grad(f)(_A4), "jvp": lambda: tp.jvp(f, (_A4,), (_A4,)),
           "vmap": lambda: tp.vmap(f)(np.stack([_A4, 2 * _A4]))}[how]
    key = name.split("_")[1]
    with pytest.raises(NotImplementedError, match=rf"np\.{name.split('_')[0]}\(\.\.\., {key}=\.\.\.\)"):
        run()
    np.testing.assert_allclose(tp.jit(f)(_A4), f(_A4))       # jit replays NumPy's own call


#: A ufunc's dtype= / signature= / casting= / subok=: before, the forward ran
#: them and the backward rule got them as arguments (TypeError "_times_x() got
#: an unexpected keyword argument 'dtype'").
_UFUNC_KEYWORDS = {
    "exp_dtype": lambda x: np.sum(np.exp(x, dtype=np.float32)),
    "multiply_dtype": lambda x: np.sum(np.multiply(x, _V4, dtype=np.float32) * x),
    "power_dtype": lambda x: np.sum(np.power(x, 3, dtype=np.float32)),
    "logaddexp_signature": lambda x: np.sum(np.logaddexp(x, _V4, signature="ff->f")),
    "sin_signature_tuple": lambda x: np.sum(np.sin(x, signature=(np.float64, np.float64))),
    "add_casting_subok": lambda x: np.sum(np.add(x, _V4, casting="same_kind", subok=True) ** 2),
    "matmul_dtype": lambda x: np.sum(np.matmul(np.outer(x, x), x, dtype=np.float32)),
    "vecdot_dtype_axis": lambda x: np.sum(np.vecdot(np.outer(x, x), x[:, None], axis=0, dtype=np.float32)),
    "matvec_dtype": lambda x: np.sum(np.matvec(np.outer(x, _V4), x, dtype=np.float32)),
}


@pytest.mark.parametrize("name", sorted(_UFUNC_KEYWORDS))
def test_ufunc_dtype_and_casting_keywords_differentiate(name):
    f = _UFUNC_KEYWORDS[name]
    x = _V4.copy()
    value, g = tp.value_and_grad(f)(x)
    assert np.result_type(value) == np.result_type(f(x))
    np.testing.assert_allclose(value, f(x), rtol=1e-5)   # (float32: vecdot's summation order)
    # the same program with the cast written out: float32 rounding is in both
    cast = {"exp_dtype": lambda x: np.sum(np.exp(x.astype(np.float32))),
            "multiply_dtype": lambda x: np.sum(x.astype(np.float32) * _V4.astype(np.float32) * x),
            "power_dtype": lambda x: np.sum(x.astype(np.float32) ** 3),
            "logaddexp_signature": lambda x: np.sum(np.logaddexp(x.astype(np.float32), _V4.astype(np.float32))),
            "sin_signature_tuple": lambda x: np.sum(np.sin(x)),
            "add_casting_subok": lambda x: np.sum((x + _V4) ** 2),
            "matmul_dtype": lambda x: np.sum(np.outer(x, x).astype(np.float32) @ x.astype(np.float32)),
            "vecdot_dtype_axis": lambda x: np.sum(np.sum(np.outer(x, x).astype(np.float32)
                                                         * x.astype(np.float32)[:, None], axis=0)),
            "matvec_dtype": lambda x: np.sum(np.outer(x, _V4).astype(np.float32) @ x.astype(np.float32)),
            }[name]
    np.testing.assert_allclose(g, tp.grad(cast)(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tp.jvp(f, (x,), (np.ones(4),))[1], np.sum(g), rtol=1e-5)
    np.testing.assert_allclose(tp.vmap(f)(np.stack([x, 2 * x])), [f(x), f(2 * x)], rtol=1e-5)


def test_ufunc_keywords_numpy_checks_and_refusals():
    with pytest.raises(TypeError, match="casting rule 'no'"):
        tp.grad(lambda x: np.sum(np.add(x, x.astype(np.float32), casting="no")))(_V4)
    with pytest.raises(TypeError, match="casting rule 'safe'"):
        tp.grad(lambda x: np.sum(np.exp(x, dtype=np.float32, casting="safe")))(_V4)
    with pytest.raises(NotImplementedError, match=r"np\.sqrt\(\.\.\., order=\.\.\.\)"):
        tp.grad(lambda x: np.sum(np.sqrt(np.abs(x), order="F")))(_V4)
    with pytest.raises(NotImplementedError, match=r"dtype=int64"):
        tp.grad(lambda x: np.sum(np.add(x, x, dtype=np.int64, casting="unsafe")))(_V4)
    g = tp.grad(lambda x: np.sum(np.sqrt(np.abs(x) + 1, order="K")))(_V4)
    np.testing.assert_allclose(g, np.sign(_V4) * 0.5 / np.sqrt(np.abs(_V4) + 1))


def test_einsum_dtype_casting_and_order_are_applied_or_refused():
    """Before: np.einsum(..., dtype=np.float32, casting='same_kind') of float64
    operands gave a float64 result (NumPy's is float32), and dtype= alone
    (einsum's casting 'safe' refuses float64 -> float32) ran instead of raising."""
    x = np.linspace(0.1, 1.0, 4)

    def f(x):
        return np.einsum("i,j->ij", x, x ** 2, dtype=np.float32, casting="same_kind")
    out, t = tp.jvp(f, (x,), (np.ones(4),))
    assert out.dtype == np.float32 and t.dtype == np.float32
    np.testing.assert_array_equal(out, f(x))
    g = tp.grad(lambda x: np.sum(f(x)))(x)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(g, tp.grad(lambda x: np.sum(np.einsum("i,j->ij", x, x ** 2)))(x32), rtol=1e-6)
    with pytest.raises(TypeError, match="according to the rule 'safe'"):
        tp.grad(lambda x: np.sum(np.einsum("i,i->", x, x, dtype=np.float32)))(x)
    with pytest.raises(NotImplementedError, match=r"np\.einsum\(\.\.\., order='F'\)"):
        tp.grad(lambda x: np.sum(np.einsum("i,j->ij", x, x, order="F")))(x)
    np.testing.assert_allclose(tp.grad(lambda x: np.einsum("i,i->", x, x, dtype=np.float64))(x), 2 * x)


def test_pad_statistic_and_ramp_modes_differentiate():
    """Before: np.pad(mode='maximum' / 'minimum' / 'mean' / 'median' /
    'linear_ramp') was refused; they are reductions and linspaces of the
    entries NumPy pads from, axis by axis."""
    X = np.random.default_rng(14).standard_normal((4, 5))
    for mode, kw in (("maximum", {}), ("minimum", {"stat_length": ((1, 2), (3, 1))}),
                     ("mean", {"stat_length": 2}), ("median", {"stat_length": 100}),
                     ("linear_ramp", {"end_values": ((1.0, -1.0), (0.5, 3.0))})):
        for pw in ((2, 3), ((0, 2), (3, 0)), 7):
            def f(a):
                return np.pad(a, pw, mode=mode, **kw)
            want = f(X)
            W = np.cos(np.arange(want.size)).reshape(want.shape)
            check_grads(lambda a: np.sum(f(a) * W), (X,))
            out, t = tp.jvp(f, (X,), (X,))
            np.testing.assert_allclose(out, want, rtol=1e-12)
            np.testing.assert_allclose(tp.vmap(f)(np.stack([X, 2 * X])), np.stack([want, f(2 * X)]),
                                       rtol=1e-12)
            g = tp.grad(lambda a: np.sum(f(a) ** 2))
            np.testing.assert_allclose(tp.jit(g)(X), g(X), rtol=1e-12)
            X32 = X.astype(np.float32)
            assert tp.jvp(f, (X32,), (X32,))[0].dtype == np.float32
    with pytest.raises(TypeError, match="traced end_values"):
        tp.grad(lambda a: np.sum(np.pad(a, 2, mode="linear_ramp", end_values=(a[0], 1.0))))(X[0])
    with pytest.raises(TypeError, match="traced constant_values"):
        tp.grad(lambda a: np.sum(np.pad(a, 2, constant_values=(a[0], 1.0))))(X[0])


def _einsum_views(a):
    A = a.reshape(3, 3).copy()
    d = np.einsum("ii->i", A)        # NumPy: a writable view of A's diagonal
    d += 1.0                         # ... so this changes A
    A *= 2.0                         # ... and d shows this
    e = np.einsum("ij->ji", A)       # a view: the transpose
    A[0, 1] = 100.0 * a[0]           # e[1, 0] shows it
    d2 = d * 1.0
    e[2] += a[1:4] ** 2              # writes A[:, 2]
    S = np.stack([A, A.T])
    np.einsum("...ii->...i", S)[1] -= 3.0
    B = A * 1.0
    np.einsum(B, [0, 0], [0])[:] *= a[4:7]      # the interleaved form: a view too
    np.einsum(B, [1, 0])[0] += 1.0              # (implicit output: the transpose)
    return np.concatenate([A.ravel(), d2, e.ravel(), S.ravel(), B.ravel(), np.einsum("ii", A)[None]])


@pytest.mark.parametrize("how", ["value", "jvp", "vmap", "jit", "grad_jit"])
def test_einsum_views_write_through_as_numpys(how):
    """Before: np.einsum('ii->i', A) (one operand, nothing summed: a view
    in NumPy) was a copy, so d += 1 left A's diagonal unchanged: a silently
    different value (and A *= 2 did not show in d)."""
    a = np.arange(1.0, 10.0)
    want = _einsum_views(a.copy())
    W = np.cos(np.arange(want.size))
    if how == "value":
        np.testing.assert_array_equal(tp.value_and_grad(lambda a: np.sum(_einsum_views(a) * W))(a)[0],
                                      np.sum(want * W))
        check_grads(lambda a: np.sum(_einsum_views(a) * W), (a,), order=2)
    elif how == "jvp":
        np.testing.assert_array_equal(tp.jvp(_einsum_views, (a,), (a,))[0], want)
    elif how == "vmap":
        np.testing.assert_array_equal(tp.vmap(_einsum_views)(np.stack([a, 2 * a])),
                                      np.stack([want, _einsum_views(2 * a)]))
    elif how == "jit":
        np.testing.assert_array_equal(tp.jit(_einsum_views)(a), want)
    else:
        g = tp.grad(lambda a: np.sum(_einsum_views(a) * W))
        np.testing.assert_allclose(tp.jit(g)(a), g(a), rtol=1e-12)


def test_default_out_and_where_keywords_stay_accepted():
    """out=None and where=True are NumPy's defaults: no keyword to refuse."""
    x = np.arange(1.0, 4.0)
    for f in (lambda x: np.sum(np.multiply(x, 2, out=None)),
              lambda x: np.sum(np.exp(x, out=None, where=True)),
              lambda x: np.sum(np.matmul(x, x, out=None)),
              lambda x: np.sum(np.vecdot(x, x, out=None))):
        g = tp.grad(f)(x)
        check_grads(f, (x,))
        np.testing.assert_allclose(tp.vmap(f)(np.stack([x, 2 * x])), [f(x), f(2 * x)])
        np.testing.assert_allclose(tp.vmap(tp.grad(f))(np.stack([x, x])), np.stack([g, g]))


def test_numpy_polynomial_series_name_themselves_and_the_fix():
    """numpy.polynomial converts its coefficients (no dispatch): the refusal
    names the function and np.polyval, not a np.asarray the program never wrote."""
    from numpy.polynomial import chebyshev, polynomial
    for fn in (polynomial.polyval, chebyshev.chebval):
        with pytest.raises(TypeError, match=rf"numpy.polynomial's {fn.__name__} .*np.polyval"):
            tp.grad(lambda c: np.sum(fn(0.5, c)))(np.ones(3))
