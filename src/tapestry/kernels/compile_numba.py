"""Plan (c): a generated loop nest compiled with numba.

One nest per kernel (the forward, or one input's gradient): parallel
(``prange``) over the first output index, the other output indices next,
the reduction innermost accumulating in a register, one write per output
element -- no atomics, no temporaries.  Inputs are passed transposed so the
innermost loop walks contiguous memory.  Guards of gradient kernels become
loop bounds (``a`` runs only where ``p - a`` is a valid ``i``).

The source is written to a file under the cache directory and compiled with
``cache=True``, so numba keeps the machine code on disk across processes.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
from pathlib import Path

import numpy as np

from .render import affine_src, render
from .parse import refs

_HELPERS = '''
@njit(inline="always", cache=True)
def _sigmoid(u):
    return DT(1) / (DT(1) + np.exp(-u))

@njit(inline="always", cache=True)
def _relu(u):
    return u if u > DT(0) else DT(0) * u

@njit(inline="always", cache=True)
def _square(u):
    return u * u

@njit(inline="always", cache=True)
def _step(u):
    return DT(1) if u > DT(0) else DT(0)

@njit(inline="always", cache=True)
def _tie(a, b):
    return DT(1) if a > b else (DT(0.5) if a == b else DT(0))

@njit(inline="always", cache=True)
def _eq(a, b):
    return DT(1) if a == b else DT(0)
'''


def available():
    """numba importable and not disabled with ``TAPESTRY_NO_NUMBA=1``."""
    if os.environ.get("TAPESTRY_NO_NUMBA", "") not in ("", "0"):
        return False
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def cache_dir(sub="kernels"):
    """Where generated modules go (``TAPESTRY_CACHE_DIR``, else
    ``~/.cache/tapestry/<sub>``): kernels here, jit's fused loops in "jit"."""
    d = os.environ.get("TAPESTRY_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tapestry", sub)
    Path(d).mkdir(parents=True, exist_ok=True)
    return d


def layout(ir):
    """Loop order and, per input occurrence, the axis order that puts the
    innermost loop's index last: ``(loop_vars, guard_vars, params)``."""
    loop = list(ir.out_vars) + list(ir.red_vars)
    depth = {v: i for i, v in enumerate(loop)}
    params, seen = [], {}
    for r in refs(ir.body):
        d = [max((depth[v] for v, _ in a[0]), default=-1) for a in r[2]]
        perm = tuple(sorted(range(len(r[2])), key=lambda k: d[k]))
        key = (r[1], perm)
        if key not in seen:
            seen[key] = len(params)
            params.append(key)
    guard_vars = sorted({v for _, v in ir.guards} - set(loop))
    return loop, guard_vars, params


def source(ir, dtype, fastmath):
    """Python source of the nest for ``ir``; the function is ``kern``.
    Returns ``(source, loop_vars, guard_vars, params)``."""
    loop, guard_vars, params = layout(ir)
    lines = _signature_lines(ir, loop, guard_vars, params)
    tight, conds = _guard_bounds(ir, loop)
    body = render(ir.body, _ref_renderer(loop, params))
    lines += _loop_lines(ir, loop, tight, conds, body)
    par = "True" if ir.out_vars else "False"
    fm = '{"reassoc", "nsz", "arcp", "contract"}' if fastmath else "False"
    head = ["import numpy as np", "from numba import njit, prange",
            f"DT = np.{np.dtype(dtype).name}", _HELPERS,
            f"@njit(parallel={par}, cache=True, fastmath={fm}, error_model='numpy')"]
    return "\n".join(head + lines) + "\n", loop, guard_vars, params


def _var(v):
    return f"v_{v}"


def _signature_lines(ir, loop, guard_vars, params):
    """``def kern(out, cnt, a0.., b):`` and the unpacking of ``b``: loop and
    guard bounds, then each input's and the output's index offsets."""
    lines = [f"def kern(out, cnt, {', '.join(f'a{n}' for n in range(len(params)))}"
             f"{', ' if params else ''}b):"]
    k = 0
    for v in loop + guard_vars:
        lines.append(f"    lo_{v} = b[{k}]; hi_{v} = b[{k + 1}]")
        k += 2
    for n, (name, perm) in enumerate(params):
        for d in range(len(perm)):
            lines.append(f"    o{n}_{d} = b[{k}]")
            k += 1
    for d in range(len(ir.out_vars)):
        lines.append(f"    oo_{d} = b[{k}]")
        k += 1
    return lines


def _ref_renderer(loop, params):
    """How an input reference renders: ``a<n>[<affine index> - offset, ...]``
    with the axes in the order :func:`layout` chose."""
    pid = {key: n for n, key in enumerate(params)}

    def ref(r):
        n = pid[(r[1], _perm_of(r, loop))]
        perm = params[n][1]
        idx = ", ".join(f"{affine_src(r[2][d], _var)} - o{n}_{j}" for j, d in enumerate(perm))
        return f"a{n}[{idx}]"
    return ref


def _guard_bounds(ir, loop):
    """Guards as tightened loop bounds where the deepest variable's
    coefficient is +-1 (no branch in the loop), else as conditions."""
    tight = {v: ([f"lo_{v}"], [f"hi_{v}"]) for v in loop}
    conds = []
    pos = {v: i for i, v in enumerate(loop)}
    for aff, gv in ir.guards:
        terms = dict(aff[0])
        deepest = max(terms, key=lambda v: pos[v])
        c = terms[deepest]
        rest = (tuple((u, cu) for u, cu in aff[0] if u != deepest), aff[1])
        rs = affine_src(rest, _var)
        if c == 1:
            tight[deepest][0].append(f"lo_{gv} - ({rs})")
            tight[deepest][1].append(f"hi_{gv} - ({rs})")
        elif c == -1:
            tight[deepest][0].append(f"({rs}) - hi_{gv}")
            tight[deepest][1].append(f"({rs}) - lo_{gv}")
        else:
            conds.append(f"lo_{gv} <= {affine_src(aff, _var)} <= hi_{gv}")
    return tight, conds


def _bounds(tight, v):
    lo, hi = tight[v]
    lo = lo[0] if len(lo) == 1 else f"max({', '.join(lo)})"
    hi = hi[0] if len(hi) == 1 else f"min({', '.join(hi)})"
    return lo, hi


def _loop_lines(ir, loop, tight, conds, body):
    """The loop nest: the outermost output loop is a ``prange``; the
    accumulator lives in a register below the output loops."""
    lines, ind, out_ind = [], "    ", "    "
    start = {"sum": "0.0", "max": "-np.inf", "min": "np.inf"}[ir.reduce]
    init = [f"acc = DT({start})", "c_ = 0"]
    if not ir.out_vars:
        lines.extend(ind + l for l in init)
    for depth, v in enumerate(loop):
        lo, hi = _bounds(tight, v)
        if depth == 0 and ir.out_vars:
            lines.append(f"{ind}L_ = {lo}")
            lines.append(f"{ind}for t_ in prange({hi} - L_ + 1):")
            lines.append(f"{ind}    {_var(v)} = L_ + t_")
        else:
            lines.append(f"{ind}for {_var(v)} in range({lo}, {hi} + 1):")
        ind += "    "
        if depth == len(ir.out_vars) - 1:
            lines.extend(ind + l for l in init)
            out_ind = ind
    if conds:
        lines.append(f"{ind}if {' and '.join(conds)}:")
        ind += "    "
    lines += _accumulate_lines(ir.reduce, ind, body)
    oidx = ", ".join(f"{_var(v)} - oo_{d}" for d, v in enumerate(ir.out_vars)) or "0"
    lines.append(f"{out_ind}out[{oidx}] = acc")
    if ir.reduce != "sum":
        lines.append(f"{out_ind}cnt[{oidx}] = c_")
    return lines


def _accumulate_lines(reduce, ind, body):
    """``acc += body``, or a running max/min that counts ties (their
    gradient is shared evenly)."""
    if reduce == "sum":
        return [f"{ind}acc += {body}"]
    cmp = ">" if reduce == "max" else "<"
    return [f"{ind}val_ = {body}", f"{ind}if val_ {cmp} acc:", f"{ind}    acc = val_",
            f"{ind}    c_ = 1", f"{ind}elif val_ == acc:", f"{ind}    c_ += 1"]


def _perm_of(r, loop):
    depth = {v: i for i, v in enumerate(loop)}
    d = [max((depth[v] for v, _ in a[0]), default=-1) for a in r[2]]
    return tuple(sorted(range(len(r[2])), key=lambda k: d[k]))


def _init(reduce):
    return {"sum": 0.0, "max": float("-inf"), "min": float("inf")}[reduce]


_compiled = {}
_lock = threading.Lock()


def load_source(src, prefix, module, directory):
    """The module of generated source ``src``, written to the file
    ``<directory>/<prefix>_<hash>.py`` and imported as ``<module>_<hash>``
    (numba's ``cache=True`` keys its disk cache on a real file, and
    re-imports it by that name: it is registered in ``sys.modules``).  One
    module per source text, loaded once per process."""
    digest = hashlib.sha1(src.encode()).hexdigest()[:20]
    key = f"{prefix}_{digest}"
    with _lock:
        mod = _compiled.get(key)
        if mod is None:
            path = Path(directory) / f"{key}.py"
            if not path.exists():
                tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
                tmp.write_text(src)
                os.replace(tmp, path)
            spec = importlib.util.spec_from_file_location(f"{module}_{digest}", path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = mod
            spec.loader.exec_module(mod)
            _compiled[key] = mod
    return mod


def compiled(src):
    """Import the generated module from the on-disk cache and return ``kern``."""
    return load_source(src, "tk", "tapestry_kernel", cache_dir()).kern


def run(ir, arrays, origins, ranges, dtype):
    """Evaluate ``ir`` with numba: returns ``(out, count)``.

    ``arrays``/``origins``: per input name; ``ranges``: var -> (lo, hi)."""
    fastmath = ir.reduce == "sum" and not any(
        n[0] == "call" and n[1] == "_eq" for n in _nodes(ir.body))
    src, loop, guard_vars, params = source(ir, dtype, fastmath)
    kern = compiled(src)
    args = []
    b = []
    for v in loop + guard_vars:
        b.extend(ranges[v])
    for name, perm in params:
        a = arrays[name]
        if a.dtype != dtype:
            a = a.astype(dtype)
        a = np.ascontiguousarray(np.transpose(a, perm)) if perm != tuple(range(a.ndim)) \
            else np.ascontiguousarray(a)
        args.append(a)
        o = origins.get(name, (0,) * a.ndim)
        b.extend(o[d] for d in perm)
    b.extend(ranges[v][0] for v in ir.out_vars)
    shape = tuple(ranges[v][1] - ranges[v][0] + 1 for v in ir.out_vars)
    out = np.full(shape or (1,), _init(ir.reduce), dtype=dtype)
    cnt = np.zeros(shape or (1,), dtype=np.int64)
    kern(out, cnt, *args, np.asarray(b, dtype=np.int64))
    if not shape:
        out, cnt = out.reshape(()), cnt.reshape(())
    return out, cnt


def _nodes(e):
    from .parse import walk
    return walk(e)
