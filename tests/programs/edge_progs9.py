"""Programs that update a view of a traced array with augmented assignment
(``v = y[::2]; v += 1``): NumPy writes through the view into ``y``, and so
must tapestry (the view's new values written into ``y``'s object), never run
with ``y`` silently unchanged (tests/test_user_programs9.py)."""
import numpy as np

from . import Program, rng

#: name -> Program: a registry of their own (tests/test_user_programs9.py),
#: so that the main battery's tables (tests/test_user_programs.py) stay as they are.
PROGRAMS: dict = {}


def program(args):
    """Register the decorated loss in :data:`PROGRAMS` (see programs.program)."""
    def deco(fn):
        PROGRAMS[fn.__name__] = Program(fn.__name__, fn, args, module=fn.__module__)
        return fn
    return deco


@program(args=lambda: (rng(900).standard_normal(6),))
def even_entries_shifted_through_view(x):
    y = x.copy()
    v = y[::2]
    v += 1.0
    v *= x[1:4]
    return np.sum(y ** 2)


@program(args=lambda: (rng(901).standard_normal(6),))
def first_row_of_reshaped_buffer_updated(x):
    y = x * 1.0
    grid = y.reshape(2, 3)
    grid[0] += grid[1]
    return np.sum(y ** 2)


@program(args=lambda: (rng(902).standard_normal((4, 3)),))
def column_view_scaled_in_loop(W):
    W = W * 1.0
    for j in range(3):
        col = W[:, j]
        col /= np.sqrt(np.sum(col ** 2))
    return np.sum(W @ np.arange(3.0))


@program(args=lambda: (rng(903).standard_normal(5),))
def residual_view_in_place_then_base_used(r):
    r = r * 2.0
    tail = r[1:]
    tail -= 0.5 * r[:-1]
    return np.sum(np.tanh(r))


@program(args=lambda: (rng(904).standard_normal(6),))
def rebinding_accumulator_without_view(x):
    acc = x * 0.0
    for k in range(1, 4):
        acc += x ** k / k
    h = (x * 2.0).reshape(2, 3)
    h += 1.0
    return np.sum(acc ** 2) + np.sum(np.sin(h))
