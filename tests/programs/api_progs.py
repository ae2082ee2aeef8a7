"""Programs that exercise the calling conventions users rely on: pytrees of
parameters (dict, list, tuple, namedtuple, dataclass), has_aux, argnums
tuples, Hessians, float32 and 0-d inputs, Python builtins on traced values,
arrays built from traced scalars, and in-place idioms."""
from collections import namedtuple
from dataclasses import dataclass

import numpy as np

import tapestry.numpy as tnp

from . import program, rng


@program(args=lambda: ({"w": rng(600).standard_normal(3), "b": 0.5}, rng(601).standard_normal((6, 3)),
                       rng(602).standard_normal(6)), argnums=(0,))
def dict_params_linear_regression(params, X, y):
    pred = X @ params["w"] + params["b"]
    return np.mean((pred - y) ** 2)


Layer = namedtuple("Layer", ["W", "b"])


@program(args=lambda: ([Layer(rng(603).standard_normal((3, 4)) * 0.5, np.zeros(4)),
                        Layer(rng(604).standard_normal((4, 1)) * 0.5, np.zeros(1))],
                       rng(605).standard_normal((5, 3))), argnums=(0,))
def namedtuple_layers(layers, x):
    h = x
    for layer in layers[:-1]:
        h = np.tanh(h @ layer.W + layer.b)
    out = h @ layers[-1].W + layers[-1].b
    return np.sum(out ** 2)


@dataclass
class GaussianParams:
    mean: np.ndarray
    log_std: np.ndarray


@program(args=lambda: (GaussianParams(np.array([0.1, -0.3]), np.array([0.2, -0.1])), rng(606).standard_normal((8, 2))),
         argnums=(0,))
def dataclass_params_nll(p, data):
    z = (data - p.mean) / np.exp(p.log_std)
    return np.sum(0.5 * z ** 2 + p.log_std)


@program(args=lambda: ((rng(607).standard_normal(3), rng(608).standard_normal(3)), 2.0), argnums=(0,))
def tuple_params_python_scale(ab, scale):
    a, b = ab
    return scale * np.dot(a, b) + np.sum(a ** 2)


@program(args=lambda: (rng(609).standard_normal((3, 2)), rng(610).standard_normal((4, 3))), mode="aux")
def has_aux_returns_predictions(W, x):
    pred = np.tanh(x @ W)
    loss = np.mean(pred ** 2)
    return loss, {"pred": pred, "acc": np.mean(pred > 0)}


@program(args=lambda: (rng(611).standard_normal(3), rng(612).standard_normal(3), rng(613).standard_normal(3)),
         argnums=(0, 2))
def argnums_tuple_skip_middle(a, b, c):
    return np.sum(a * b * c) + np.sum(np.sin(a) * c ** 2)


@program(args=lambda: (rng(614).standard_normal(3),), mode="hessian")
def hessian_quartic(x):
    A = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 3.0]])
    return 0.5 * x @ A @ x + 0.25 * np.sum(x ** 4) + np.prod(np.cos(x))


@program(args=lambda: (rng(615).standard_normal(4),), mode="hessian")
def hessian_logsumexp_softmax(x):
    return np.log(np.sum(np.exp(x))) + np.sum(x) ** 2


@program(args=lambda: (np.array([0.3, -0.2]), rng(616).standard_normal((5, 2))), mode="hessian")
def hessian_logistic_nll(w, X):
    z = X @ w
    return np.sum(np.log1p(np.exp(-z))) + 0.5 * w @ w


@program(args=lambda: (np.float32(0.7), rng(617).standard_normal(5).astype(np.float32)))
def float32_scalar_and_vector(a, x):
    return np.sum(np.exp(a * x) / (1 + x ** 2))


@program(args=lambda: (np.array(0.3),))
def zero_d_array_input(t):
    return np.sin(t) ** 2 + np.exp(-t) * t


@program(args=lambda: (0.3, 1.2))
def python_float_inputs(a, b):
    return np.exp(a) * np.sin(b) + a ** b


@program(args=lambda: (rng(618).standard_normal(4),))
def builtin_sum_abs_pow(x):
    terms = [xi ** 2 for xi in x]
    return sum(terms) + abs(x[0]) + pow(x[1], 2) + x[3] ** 3


@program(args=lambda: (rng(619).standard_normal(3),))
def size_one_array_output(w):
    X = rng(620).standard_normal((1, 3))
    return X @ w[:, None]               # shape (1, 1)


@program(args=lambda: (rng(621).standard_normal(3),))
def tnp_array_from_traced_scalars(x):
    a, b, c = x
    v = tnp.array([a, b * 2, c])
    M = tnp.array([[x[0], x[1]], [x[1], x[0]]])
    return np.sum(v ** 2) + np.linalg.det(M)


@program(args=lambda: (rng(622).standard_normal(3),))
def np_array_from_traced_scalars(x):
    v = np.array([x[0], x[1] * 2, x[2]])
    return np.sum(v ** 2)


@program(args=lambda: (np.array([0.7]),))
def full_like_traced_fill(s):
    base = np.ones(4)
    filled = np.full_like(base, s[0])
    return np.sum(filled * np.arange(4.0)) + np.sum(np.full(3, s[0]) ** 2)


@program(args=lambda: (rng(623).standard_normal(4),))
def inplace_augmented_assignment(x):
    y = x * 2
    y += 1.0
    y *= x
    y -= np.mean(y)
    y /= 2.0
    y **= 2
    return np.sum(y)


@program(args=lambda: (rng(624).standard_normal(5),))
def setitem_on_traced_copy(x):
    y = x.copy()
    y[0] = 0.0
    y[2] = x[1] * 3
    return np.sum(y ** 2)


@program(args=lambda: (rng(625).standard_normal((3, 3)),))
def zeros_then_fill_rows(A):
    out = np.zeros((3, 3))
    for i in range(3):
        out[i] = A[i] * (i + 1)
    return np.sum(out ** 2)


@program(args=lambda: (rng(627).standard_normal(3), rng(628).standard_normal((3, 3))))
def methods_dot_sum_T(x, A):
    return x.dot(A).dot(x) + A.T.sum() + A.mean(axis=0).max() + x.reshape(3, 1).T.squeeze().std() \
        + A.trace() + A.diagonal().prod() + A.cumsum(axis=1)[:, -1].sum() + x.clip(-0.5, 0.5).sum()


@program(args=lambda: (rng(629).standard_normal(4), rng(630).standard_normal(4)))
def inner_vdot_tensordot_matmul(a, b):
    A = np.outer(a, b)
    return (np.inner(a, b) + np.vdot(a, b) + np.tensordot(A, A, axes=2) + np.matmul(a, A) @ b
            + np.dot(A, b).sum())


@program(args=lambda: (rng(631).standard_normal(3),))
def closure_over_loop_variable(x):
    fs = [lambda v, k=k: np.sum(v ** k) for k in range(1, 4)]
    return sum(f(x) for f in fs)


@program(args=lambda: (rng(632).standard_normal(3),))
def recursion_power_tower(x):
    def f(v, n):
        return v if n == 0 else np.sin(f(v, n - 1)) + v
    return np.sum(f(x, 4))


@program(args=lambda: (rng(633).standard_normal(5),))
def early_stopping_python_branch(x):
    total = 0.0
    for xi in x:
        if xi > 0:
            total = total + xi ** 2
        else:
            total = total - xi
    return total


@program(args=lambda: (rng(634).standard_normal(4),))
def custom_vjp_clipped_identity(x):
    import tapestry as tp

    @tp.custom_vjp
    def soft_clip(v):
        return np.tanh(v)

    def fwd(v):
        t = np.tanh(v)
        return t, t

    def bwd(t, g):
        return (g * (1 - t ** 2),)

    soft_clip.defvjp(fwd, bwd)
    return np.sum(soft_clip(x) ** 2 * np.arange(1.0, 5.0))


@program(args=lambda: (rng(635).standard_normal((3, 3)) * 0.5, rng(636).standard_normal(3)))
def checkpointed_block(W, x):
    import tapestry as tp
    block = tp.checkpoint(lambda W, h: np.tanh(W @ h))
    h = x
    for _ in range(3):
        h = block(W, h)
    return np.sum(h ** 2)


@program(args=lambda: (rng(637).standard_normal(3), np.array([1, 2, 3])))
def int_array_data_mixed(x, counts):
    return np.sum(counts * x ** 2) + np.sum(x * counts.astype(float).mean())


@program(args=lambda: (rng(638).standard_normal((2, 3)).astype(np.float32), rng(639).standard_normal(3)))
def mixed_float32_float64(a, b):
    return np.sum(np.tanh(a) @ b)


@program(args=lambda: (rng(640).standard_normal(3),))
def math_module_on_elements(x):
    import math
    return math.exp(x[0]) + math.sin(x[1]) * x[2]


@program(args=lambda: (rng(641).standard_normal((4, 2)), rng(642).standard_normal(4)))
def linear_model_python_list_params(w_list, y):
    params = [w_list[:, 0], w_list[:, 1]]
    pred = params[0] * y + params[1]
    return np.sum(pred ** 2)


@program(args=lambda: (rng(643).standard_normal(6),))
def astype_and_copy_chain(x):
    y = x.astype(np.float64).copy()
    return np.sum(y ** 2) + np.sum(np.ascontiguousarray(x[::2]) ** 2)  # ascontiguousarray converts


@program(args=lambda: (rng(644).standard_normal(5), rng(645).standard_normal(5)))
def asarray_at_function_entry(x, y):
    x = np.asarray(x, dtype=float)       # the usual defensive first line
    y = np.asarray(y)
    return np.sum((x - y) ** 2)


@program(args=lambda: (rng(646).standard_normal(4),))
def print_and_assert_inside_loss(x):
    loss = np.sum(np.tanh(x) ** 2)
    print("loss", loss, "shape", x.shape, x.ndim, x.size, x.dtype)
    assert np.all(np.isfinite(x)), "inputs must be finite"
    if loss > 100:
        raise ValueError("diverged")
    return loss


@program(args=lambda: (rng(647).standard_normal(4),))
def fstring_progress_inside_loss(x):
    loss = np.sum(x ** 2)
    msg = f"loss={loss:.4f}"
    return loss + 0 * len(msg)


@program(args=lambda: (rng(648).standard_normal(4),))
def return_python_float(x):
    return float(np.sum(np.sin(x)))            # common in scipy.optimize objectives


@program(args=lambda: (rng(649).standard_normal(4),))
def noise_from_seeded_generator(x):
    noise = np.random.default_rng(0).normal(size=x.shape)
    return np.sum((x + 0.1 * noise) ** 2)


@program(args=lambda: (rng(650).standard_normal(4),))
def generator_permutation_of_traced(x):
    return np.sum(np.random.default_rng(1).permutation(x) * np.arange(4.0))
