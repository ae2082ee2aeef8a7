"""Run one program under tapestry and classify the outcome.

CORRECT      value equals NumPy's and the gradient matches central finite
             differences in float64 along random directions;
REFUSED      NotImplementedError / TypeError whose message starts "tapestry"
             (the library declined by name, as issue 9 allows);
SILENT-WRONG no error, but the value or the gradient is wrong;
CRASH        any other exception, or a gradient of the wrong shape, dtype or
             type (an unhelpful failure is a bug too).
"""
from __future__ import annotations

import traceback
import warnings
from dataclasses import dataclass

import numpy as np

import tapestry as tp

CORRECT, REFUSED, WRONG, CRASH = "CORRECT", "REFUSED", "SILENT-WRONG", "CRASH"

#: Accept AxisSparse gradient leaves for small inputs too (densified for the
#: check).  Off: below SPARSE_MIN_SIZE elements a user's program must get plain
#: arrays back (issue 9, item 8; main's sparse="auto").  ``python -m programs
#: --allow-sparse`` turns it on to test branches made before that rule.
ALLOW_SPARSE = False
SPARSE_MIN_SIZE = 32768


@dataclass
class Outcome:
    name: str
    status: str
    reason: str = ""
    where: str = ""          # innermost tapestry frame of an exception
    warnings: tuple = ()


def _leaves(x):
    return tp.tree_flatten(x)[0]


def _is_float_leaf(x):
    if isinstance(x, bool) or isinstance(x, (int, np.integer)):
        return False
    return np.result_type(x).kind == "f"


def float_argnums(args):
    """Every argument whose leaves are all floats (ints, bools, masks stay data)."""
    return tuple(i for i, a in enumerate(args)
                 if _leaves(a) and all(_is_float_leaf(leaf) for leaf in _leaves(a)))


def _with(args, argnums, new):
    full = list(args)
    for i, n in zip(argnums, new):
        full[i] = n
    return tuple(full)


def _scalar(out, mode):
    out = out[0] if mode == "aux" else out
    return float(np.asarray(out, dtype=np.float64).reshape(()))


def _tapestry_frame(exc):
    """'file:line in func' of the innermost frame inside src/tapestry."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/tapestry/" in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"{f.filename.split('/src/')[-1]}:{f.lineno} in {f.name}"


def _first_line(exc):
    msg = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {msg[0] if msg else ''}"[:300]


def run_tapestry(prog, args, argnums):
    """(value, aux, grads) from tapestry, grads a tuple over ``argnums``."""
    vg = tp.value_and_grad(prog.fn, argnums=argnums, has_aux=prog.mode == "aux")
    out, grads = vg(*args)
    value, aux = (out if prog.mode == "aux" else (out, None))
    return value, aux, grads


def _check_structure(args, argnums, grads):
    """A reason string if a gradient leaf has the wrong type, shape or dtype."""
    for i, g in zip(argnums, grads):
        xl, gl = _leaves(args[i]), _leaves(g)
        if len(xl) != len(gl):
            return f"argument {i}: gradient has {len(gl)} leaves, input {len(xl)}"
        for x, gx in zip(xl, gl):
            if hasattr(gx, "todense") and (ALLOW_SPARSE or np.size(x) >= SPARSE_MIN_SIZE):
                gx = np.asarray(gx)             # large tables may stay sparse: it must densify
            if isinstance(x, np.ndarray) and not isinstance(gx, np.ndarray):
                return f"argument {i}: gradient leaf is {type(gx).__name__}, not ndarray"
            if np.shape(gx) != np.shape(x):
                return f"argument {i}: gradient shape {np.shape(gx)} != input shape {np.shape(x)}"
            if np.result_type(gx) != np.result_type(x) and isinstance(x, np.ndarray):
                return (f"argument {i}: gradient dtype {np.result_type(gx)} != input dtype "
                        f"{np.result_type(x)}")
    return ""


def _f64(x):
    return np.asarray(x, dtype=np.float64) if _is_float_leaf(x) else x


def directional_fd(prog, args, argnums, direction, eps=1e-5):
    """Central difference of the program along ``direction`` (float64)."""
    def at(t):
        new = []
        for i, d in zip(argnums, direction):
            leaves, td = tp.tree_flatten(args[i])
            new.append(td.unflatten([_f64(l) + t * v for l, v in zip(leaves, d)]))
        return _scalar(prog.fn(*_with(args, argnums, new)), prog.mode)
    return (at(eps) - at(-eps)) / (2 * eps)


def _low_precision(args, argnums):
    return any(np.result_type(l) == np.float32 for i in argnums for l in _leaves(args[i]))


def check_gradient(prog, args, argnums, grads, n_directions=3, seed=0):
    """A reason string if ``grads`` disagrees with finite differences."""
    r = np.random.default_rng(seed)
    rtol = 5e-3 if _low_precision(args, argnums) else 1e-4
    f0 = abs(_scalar(prog.fn(*args), prog.mode))
    for k in range(n_directions):
        direction = [[r.standard_normal(np.shape(l)) for l in _leaves(args[i])] for i in argnums]
        analytic, norm_g = 0.0, 0.0
        for d, g in zip(direction, grads):
            for v, gl in zip(d, _leaves(g)):
                gd = np.asarray(gl.todense() if hasattr(gl, "todense") else gl, dtype=np.float64)
                analytic += float(np.sum(gd * v))
                norm_g += float(np.sum(gd * gd))
        numeric = directional_fd(prog, args, argnums, direction)
        n_v = np.sqrt(sum(float(np.sum(v * v)) for d in direction for v in d))
        tol = rtol * max(abs(numeric), 0.05 * np.sqrt(norm_g) * n_v) + 1e-7 * (1 + f0)
        if not np.isfinite(analytic) or abs(analytic - numeric) > tol:
            return (f"direction {k}: tapestry <g, v> = {analytic:.6g}, finite differences "
                    f"{numeric:.6g}")
    return ""


def check_hessian(prog, args):
    """tp.hessian of the first argument against differences of tp.grad."""
    H = np.asarray(tp.hessian(prog.fn, argnums=0)(*args), dtype=np.float64)
    x = np.asarray(args[0], dtype=np.float64)
    g = tp.grad(prog.fn, argnums=0)
    v = np.random.default_rng(1).standard_normal(x.shape)
    eps = 1e-5
    fd = (np.asarray(g(x + eps * v, *args[1:])) - np.asarray(g(x - eps * v, *args[1:]))) / (2 * eps)
    hv = np.tensordot(H.reshape(x.shape + x.shape), v, axes=v.ndim) if x.ndim else H * v
    if not np.allclose(hv, fd, rtol=1e-4, atol=1e-6 * (1 + np.abs(fd).max())):
        return f"hessian-vector product {np.ravel(hv)[:3]} != differences of grad {np.ravel(fd)[:3]}"
    return ""


def _is_refusal(exc):
    return isinstance(exc, (NotImplementedError, TypeError)) and str(exc).startswith("tapestry")


def classify(prog):
    """Run ``prog`` under tapestry and return its :class:`Outcome`."""
    args = prog.make_args()
    plain = prog.fn(*prog.make_args())          # the program itself must run in NumPy
    argnums = prog.argnums if prog.argnums is not None else float_argnums(args)
    caught = []
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            value, aux, grads = run_tapestry(prog, args, argnums)
            reason = _check_values(prog, args, argnums, plain, value, aux, grads)
            status = WRONG if reason.startswith("value") or reason.startswith("direction") \
                or reason.startswith("hessian") or reason.startswith("aux") else CRASH
            caught = tuple(sorted({f"{x.category.__name__}: {str(x.message)[:120]}" for x in w}))
    except Exception as exc:  # noqa: BLE001 -- every failure is classified, none hidden
        status = REFUSED if _is_refusal(exc) else CRASH
        return Outcome(prog.name, status, _first_line(exc), _tapestry_frame(exc))
    return Outcome(prog.name, CORRECT if not reason else status, reason, "", caught)


def _check_values(prog, args, argnums, plain, value, aux, grads):
    """'' if everything matches, else a one-line reason."""
    ref = _scalar(plain, prog.mode)
    got = float(np.asarray(value, dtype=np.float64).reshape(()))
    low = _low_precision(args, argnums)
    if not np.isclose(got, ref, rtol=1e-3 if low else 1e-9, atol=1e-12):
        return f"value {got!r} != NumPy's {ref!r}"
    if prog.mode == "aux":
        for a, b in zip(_leaves(aux), _leaves(plain[1])):
            if not np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float)):
                return "aux output differs from NumPy's"
    reason = _check_structure(args, argnums, grads)
    if reason:
        return reason
    reason = check_gradient(prog, args, argnums, grads)
    if not reason and prog.mode == "hessian":
        reason = check_hessian(prog, args)
    return reason


def classify_forward(prog, seed=3):
    """Forward mode on the same program: ``tp.jvp`` along a random direction
    against ``<grad, v>`` from reverse mode (itself checked by :func:`classify`)
    and the float64 central difference.  Returns an :class:`Outcome`."""
    args = prog.make_args()
    argnums = prog.argnums if prog.argnums is not None else float_argnums(args)
    if not argnums:
        return Outcome(prog.name, CORRECT)
    r = np.random.default_rng(seed)
    direction = [[r.standard_normal(np.shape(l)) for l in _leaves(args[i])] for i in argnums]
    tangents = tuple(tp.tree_flatten(args[i])[1].unflatten(
        [np.asarray(v, dtype=np.result_type(l)) if isinstance(l, np.ndarray) else float(v)
         if np.ndim(v) == 0 else v for l, v in zip(_leaves(args[i]), d)])
        for i, d in zip(argnums, direction))

    def selected(*sel):
        return prog.fn(*_with(args, argnums, sel))
    try:
        out = tp.jvp(selected, tuple(args[i] for i in argnums), tangents, has_aux=prog.mode == "aux")
        tangent = out[1]
        jv = float(np.asarray(tangent, dtype=np.float64).reshape(()))
    except Exception as exc:  # noqa: BLE001 -- every failure is classified, none hidden
        status = REFUSED if _is_refusal(exc) else CRASH
        return Outcome(prog.name, status, _first_line(exc), _tapestry_frame(exc))
    numeric = directional_fd(prog, args, argnums, direction)
    rtol = 5e-3 if _low_precision(args, argnums) else 1e-4
    f0 = abs(_scalar(prog.fn(*args), prog.mode))
    if not np.isfinite(jv) or abs(jv - numeric) > rtol * max(abs(numeric), 1e-3) + 1e-7 * (1 + f0):
        return Outcome(prog.name, WRONG, f"jvp {jv:.6g}, finite differences {numeric:.6g}")
    return Outcome(prog.name, CORRECT)


# --- every order of jit, vmap and grad against the per-item loop -------------------------
def _stacked_items(args, argnums, t):
    """Two items: the program's arguments and a perturbed copy, stacked
    along a new axis 0 (the other arguments as they are)."""
    def moved(a):
        return tp.tree_map(lambda l: (np.asarray(l) + t * np.cos(np.arange(np.size(l))).reshape(
            np.shape(l))).astype(np.result_type(l)), a)
    return [tp.tree_map(lambda u, v: np.stack([np.asarray(u), np.asarray(v)]), a, moved(a))
            if i in argnums else a for i, a in enumerate(args)]


def check_every_order(prog, vmapped=True):
    """``vmap(grad f)``, ``jit(vmap(grad f))``, ``vmap(jit(grad f))`` (unless
    ``vmapped`` is false: a program that branches on its values), ``jit(grad
    f)`` and ``grad(jit f)`` against ``grad f`` item by item, on two items;
    raises ``AssertionError`` where one differs."""
    args = prog.make_args()
    an = float_argnums(args)
    axes = tuple(0 if i in an else None for i in range(len(args)))
    low = any(np.result_type(l) in (np.float32, np.float16)
              for i in an for l in tp.tree_leaves(args[i]))
    tol = dict(rtol=1e-3 if low else 1e-7, atol=1e-6)
    g = tp.grad(prog.fn, argnums=an)
    items = _stacked_items(args, an, 0.01)
    one = [tuple(tp.tree_map(lambda l, k=k: np.asarray(l)[k], a) if i in an else a
                 for i, a in enumerate(items)) for k in (0, 1)]
    want = [tp.tree_leaves(g(*a)) for a in one]

    def same(got_stacked):
        for k, leaf in enumerate(tp.tree_leaves(got_stacked)):
            np.testing.assert_allclose(leaf, np.stack([want[0][k], want[1][k]]), **tol)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if vmapped:
            np.testing.assert_allclose(tp.vmap(prog.fn, in_axes=axes)(*items),
                                       [prog.fn(*a) for a in one], **tol)
            same(tp.vmap(g, in_axes=axes)(*items))
            same(tp.jit(tp.vmap(g, in_axes=axes))(*items))
            same(tp.vmap(tp.jit(g), in_axes=axes)(*items))
        jf, jg, gj = tp.jit(prog.fn), tp.jit(g), tp.grad(tp.jit(prog.fn), argnums=an)
        for k, a in enumerate(one):
            np.testing.assert_allclose(jf(*a), prog.fn(*a), **tol)
            for u, v, w in zip(tp.tree_leaves(jg(*a)), tp.tree_leaves(gj(*a)), want[k]):
                np.testing.assert_allclose(u, w, **tol)
                np.testing.assert_allclose(v, w, **tol)
