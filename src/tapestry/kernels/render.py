"""Turning a kernel body into Python source, shared by the numba loop nests
(scalar arithmetic) and the blocked NumPy evaluation (broadcast arrays)."""
from __future__ import annotations

#: body function -> NumPy name (works on scalars in numba and on arrays)
NP_NAMES = {"exp": "np.exp", "log": "np.log", "log1p": "np.log1p", "expm1": "np.expm1",
            "sqrt": "np.sqrt", "tanh": "np.tanh", "sin": "np.sin", "cos": "np.cos",
            "abs": "np.abs", "sign": "np.sign", "maximum": "np.maximum",
            "minimum": "np.minimum", "sigmoid": "_sigmoid", "relu": "_relu",
            "square": "_square", "_step": "_step", "_tie": "_tie", "_eq": "_eq"}


def render(e, ref_src, const=lambda v: f"DT({v!r})"):
    """Source of expression ``e``; ``ref_src(ref)`` renders one input access."""
    k = e[0]
    if k == "num":
        return const(e[1])
    if k == "ref":
        return ref_src(e)
    if k == "call":
        return f"{NP_NAMES[e[1]]}({', '.join(render(a, ref_src, const) for a in e[2])})"
    op, a, b = e[1], e[2], e[3]
    if op == "**" and b[0] == "num" and b[1] == 2:
        x = render(a, ref_src, const)
        return f"_square({x})"
    return f"({render(a, ref_src, const)} {op} {render(b, ref_src, const)})"


def affine_src(aff, var_src):
    """Source of an affine index; ``var_src(v)`` renders a variable."""
    terms, c = aff
    parts = []
    for v, k in terms:
        parts.append(var_src(v) if k == 1 else f"({k} * {var_src(v)})")
    s = " + ".join(parts) if parts else "0"
    return f"{s} + {c}" if c else s
