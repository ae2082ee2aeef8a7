"""The battery of realistic programs (tests/programs/) under ``tapestry.jit``:
``jit(value_and_grad(f))`` on the program's inputs, then replayed on the same
inputs and on nearby ones, gives what the uncompiled ``value_and_grad`` gives,
bit for bit -- or runs uncompiled with a JitWarning (then the result is the
plain call's by construction; the programs that do are listed below with
the reason, so a regression from compiled to uncompiled fails)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapestry as tp
from programs import load
from programs.runner import float_argnums

PROGRAMS = load()

#: Programs that run uncompiled under jit, and why (a reason they cannot be replayed).
UNCOMPILED = {}


def _leaves(x):
    return [np.asarray(v.todense() if hasattr(v, "todense") else v)
            for v in tp.tree_leaves(x)]


def _nearby(args, argnums):
    """The same arguments with their float leaves scaled by 1 + 1e-3."""
    out = list(args)
    for i in argnums:
        out[i] = tp.tree_map(lambda v: v * (1 + 1e-3) if isinstance(v, np.ndarray)
                             and v.dtype.kind == "f" else v, args[i])
    return tuple(out)


def _run(fn, args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 -- compared with the plain call's
        return None, type(e)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_under_jit(name):
    prog = PROGRAMS[name]
    args = prog.make_args()
    argnums = prog.argnums if prog.argnums is not None else float_argnums(args)
    if not argnums:
        pytest.skip("no float argument")
    vg = tp.value_and_grad(prog.fn, argnums=argnums, has_aux=prog.mode == "aux")
    plain, err = _run(vg, args)
    if err is not None:
        pytest.skip(f"refused uncompiled too ({err.__name__})")
    jvg = tp.jit(vg, fuse=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for call in (args, args, _nearby(args, argnums)):
            want, werr = _run(vg, call)
            got, gerr = _run(jvg, call)
            assert gerr == werr, (name, gerr, werr)
            if werr is not None:
                continue
            a, b = _leaves(got), _leaves(want)
            assert len(a) == len(b)
            for x, y in zip(a, b):
                assert x.shape == y.shape and x.dtype == y.dtype, (name, x.dtype, y.dtype)
                if x.dtype.kind in "fc":  # a nan's sign bit may differ: both are nan
                    nan = np.isnan(x) & np.isnan(y)
                    x, y = np.where(nan, 0, x), np.where(nan, 0, y)
                assert x.tobytes() == y.tobytes(), (name, np.max(np.abs(x - y)))
    uncompiled = [str(w.message) for w in caught if issubclass(w.category, tp.JitWarning)]
    if name in UNCOMPILED:
        assert uncompiled, f"{name} now compiles: remove it from UNCOMPILED"
    else:
        assert not uncompiled, uncompiled
