"""Symbolic derivatives of kernel bodies, and the gradient kernels built
from them.

``grad_ir(ir, ref)`` returns the kernel that computes the cotangent of one
input occurrence ``ref`` = ``A[e_0, e_1, ...]``::

    A_bar[p_0, p_1, ...] := sum over the other indices of  g[out] * d body / d A[...]

Each index ``e_d`` is solved for one of its variables (coefficient +-1), so
the gradient kernel runs over ``A``'s own positions, with the reduction
innermost and no scatter (no atomics).  Eliminated variables keep their
original range through a *guard* ``lo_v <= expr <= hi_v``; a shifted index
such as ``x[i+a]`` thus becomes ``x_bar[p] := sum_a g[p-a] * h[a]`` over the
``a`` for which ``p-a`` is a valid ``i``.

For ``max``/``min`` reductions the cotangent of an output element is split
evenly between all positions that attain it (ties): the seed is
``g[out] * _eq(body, y[out]) / count[out]``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .parse import KernelSyntaxError, refs, to_str, affine_str, is_plain

ZERO, ONE = ("num", 0.0), ("num", 1.0)


@dataclass(frozen=True)
class IR:
    """A kernel ready to plan: ``out[out_vars] := reduce over red_vars of body``,
    skipping the terms where a guard ``lo[var] <= affine <= hi[var]`` fails."""
    out_vars: tuple
    red_vars: tuple
    body: tuple
    reduce: str = "sum"
    guards: tuple = ()

    @property
    def inputs(self):
        return tuple(dict.fromkeys(r[1] for r in refs(self.body)))

    def __str__(self):
        red = f" over {','.join(self.red_vars)}" if self.red_vars else ""
        g = "".join(f" if {affine_str(a)} in range({v})" for a, v in self.guards)
        return f"[{','.join(self.out_vars)}] := {self.reduce}{red} {to_str(self.body)}{g}"


# --- simplifying constructors ------------------------------------------------------
def num(v):
    return ("num", float(v))


def add(a, b):
    if a == ZERO:
        return b
    if b == ZERO:
        return a
    if a[0] == b[0] == "num":
        return num(a[1] + b[1])
    return ("bin", "+", a, b)


def sub(a, b):
    if b == ZERO:
        return a
    if a[0] == b[0] == "num":
        return num(a[1] - b[1])
    if a == ZERO:
        return mul(num(-1), b)
    return ("bin", "-", a, b)


def mul(a, b):
    if a == ZERO or b == ZERO:
        return ZERO
    if a == ONE:
        return b
    if b == ONE:
        return a
    if a[0] == b[0] == "num":
        return num(a[1] * b[1])
    if b[0] == "num":
        a, b = b, a
    if a[0] == "num" and b[0] == "bin" and b[1] == "*" and b[2][0] == "num":
        return mul(num(a[1] * b[2][1]), b[3])   # fold constant factors
    return ("bin", "*", a, b)


def div(a, b):
    if a == ZERO:
        return ZERO
    if b == ONE:
        return a
    return ("bin", "/", a, b)


def power(a, b):
    if b == ONE:
        return a
    if b == ZERO:
        return ONE
    return ("bin", "**", a, b)


def call(f, *args):
    return ("call", f, tuple(args))


# --- d/d ref ----------------------------------------------------------------------
def _d_call(f, args, dargs):
    u = args[0]
    du = dargs[0]
    if f in ("sign", "_step", "_tie", "_eq"):
        return ZERO
    if f in ("maximum", "minimum"):
        a, b = args
        wa, wb = (call("_tie", a, b), call("_tie", b, a)) if f == "maximum" else \
                 (call("_tie", b, a), call("_tie", a, b))
        return add(mul(wa, dargs[0]), mul(wb, dargs[1]))
    local = {
        "exp": lambda: call("exp", u),
        "expm1": lambda: call("exp", u),
        "log": lambda: div(ONE, u),
        "log1p": lambda: div(ONE, add(ONE, u)),
        "sqrt": lambda: div(num(0.5), call("sqrt", u)),
        "tanh": lambda: sub(ONE, power(call("tanh", u), num(2))),
        "sin": lambda: call("cos", u),
        "cos": lambda: mul(num(-1), call("sin", u)),
        "abs": lambda: call("sign", u),
        "sigmoid": lambda: mul(call("sigmoid", u), sub(ONE, call("sigmoid", u))),
        "relu": lambda: call("_step", u),
        "square": lambda: mul(num(2), u),
    }[f]
    return ZERO if du == ZERO else mul(local(), du)


def diff(e, target):
    """d e / d target, where ``target`` is a ``('ref', ...)`` node."""
    k = e[0]
    if k == "num":
        return ZERO
    if k == "ref":
        return ONE if e == target else ZERO
    if k == "call":
        return _d_call(e[1], e[2], [diff(a, target) for a in e[2]])
    op, a, b = e[1], e[2], e[3]
    da, db = diff(a, target), diff(b, target)
    if op == "+":
        return add(da, db)
    if op == "-":
        return sub(da, db)
    if op == "*":
        return add(mul(da, b), mul(a, db))
    if op == "/":
        return sub(div(da, b), div(mul(a, db), power(b, num(2))))
    # a ** b
    if b[0] == "num":
        return mul(mul(b, power(a, num(b[1] - 1))), da) if da != ZERO else ZERO
    return add(mul(mul(b, power(a, sub(b, ONE))), da),
               mul(mul(call("log", a), e), db))


# --- affine substitution ---------------------------------------------------------------
def _aff_sub(aff, var, repl):
    """Replace ``var`` by the affine ``repl`` inside ``aff``."""
    terms, const = aff
    coef = dict(terms).get(var)
    if coef is None:
        return aff
    out = {v: c for v, c in terms if v != var}
    for v, c in repl[0]:
        out[v] = out.get(v, 0) + coef * c
    return (tuple(sorted((v, c) for v, c in out.items() if c)), const + coef * repl[1])


def substitute(e, var, repl):
    k = e[0]
    if k == "ref":
        return ("ref", e[1], tuple(_aff_sub(a, var, repl) for a in e[2]))
    if k == "call":
        return ("call", e[1], tuple(substitute(a, var, repl) for a in e[2]))
    if k == "bin":
        return ("bin", e[1], substitute(e[2], var, repl), substitute(e[3], var, repl))
    return e


def fresh(used, base):
    name, n = base, 0
    while name in used:
        n += 1
        name = f"{base}{n}"
    return name


def seed_names(ir):
    """Names for the cotangent, the forward output and the tie count."""
    used = set(ir.inputs)
    g = fresh(used, "_g")
    y = fresh(used | {g}, "_y")
    c = fresh(used | {g, y}, "_c")
    return g, y, c


def grad_ir(ir, target):
    """The gradient kernel of input occurrence ``target`` (see module doc).

    Returns ``(IR, pivots)`` or ``None`` when the body does not depend on it.
    """
    d = diff(ir.body, target)
    if d == ZERO:
        return None
    g, y, c = seed_names(ir)
    out_idx = tuple(((( v, 1),), 0) for v in ir.out_vars)
    seed = ("ref", g, out_idx)
    if ir.reduce != "sum":
        seed = div(mul(seed, call("_eq", ir.body, ("ref", y, out_idx))), ("ref", c, out_idx))
    body = mul(seed, d)
    guards = list(ir.guards)
    eliminated = []
    all_vars = list(ir.out_vars) + list(ir.red_vars)
    used = set(all_vars)
    new_out = []
    for dim, aff in enumerate(target[2]):
        for v, _ in eliminated:
            aff = _aff_sub(aff, v, dict(eliminated)[v])
        terms = dict(aff[0])
        cands = [v for v in terms if v in all_vars and abs(terms[v]) == 1
                 and v not in dict(eliminated) and v not in new_out]
        if not cands:
            raise KernelSyntaxError(
                f"tapestry.kernel: cannot derive the gradient of {to_str(target)}: index "
                f"{affine_str(aff)} needs its own index variable with coefficient +1 or -1 "
                "(diagonals like x[i,i] need a product body, which runs as einsum).")
        if is_plain(aff):
            new_out.append(cands[0])
            continue
        v = cands[0]
        p = fresh(used, f"_p{dim}")
        used.add(p)
        cv = terms[v]
        # v = cv * (p - (aff - cv*v))
        rest = {u: -cv * cu for u, cu in terms.items() if u != v}
        rest[p] = cv
        repl = (tuple(sorted((u, cu) for u, cu in rest.items() if cu)), -cv * aff[1])
        eliminated.append((v, repl))
        new_out.append(p)
    for v, repl in eliminated:
        body = substitute(body, v, repl)
        guards = [(_aff_sub(a, v, repl), gv) for a, gv in guards]
        guards.append((repl, v))
    elim = dict(eliminated)
    red = tuple(v for v in all_vars if v not in elim and v not in new_out)
    return IR(tuple(new_out), red, body, "sum", tuple(guards)), elim


# --- polynomial expansion -----------------------------------------------------------------
MAX_MONOMIALS = 16


def polynomial(e):
    """``e`` as ``{monomial: coef}`` with monomial = sorted ((ref, power), ...),
    or ``None`` if it is not a (small) polynomial in its refs."""
    k = e[0]
    if k == "num":
        return {(): e[1]}
    if k == "ref":
        return {((e, 1),): 1.0}
    if k == "call":
        return None
    op, a, b = e[1], e[2], e[3]
    pa = polynomial(a)
    if pa is None:
        return None
    if op == "**":
        if b[0] != "num" or b[1] != int(b[1]) or not 0 <= b[1] <= 8:
            return None
        out = {(): 1.0}
        for _ in range(int(b[1])):
            out = _pmul(out, pa)
            if out is None:
                return None
        return out
    if op == "/":
        if b[0] != "num" or b[1] == 0:
            return None
        return {m: c / b[1] for m, c in pa.items()}
    pb = polynomial(b)
    if pb is None:
        return None
    if op == "*":
        return _pmul(pa, pb)
    sign = 1.0 if op == "+" else -1.0
    out = dict(pa)
    for m, c in pb.items():
        out[m] = out.get(m, 0.0) + sign * c
    out = {m: c for m, c in out.items() if c != 0}
    return out if len(out) <= MAX_MONOMIALS else None


def _pmul(pa, pb):
    out = {}
    for ma, ca in pa.items():
        for mb, cb in pb.items():
            powers = dict(ma)
            for r, n in mb:
                powers[r] = powers.get(r, 0) + n
            m = tuple(sorted(powers.items()))
            out[m] = out.get(m, 0.0) + ca * cb
    out = {m: c for m, c in out.items() if c != 0}
    return out if len(out) <= MAX_MONOMIALS else None


def split_terms(body, red_vars):
    """Top-level additive terms with and without reduction indices:
    ``(reduced, outer)``; the outer part is added once, outside the reduction."""
    terms = []

    def flat(e, sign):
        if e[0] == "bin" and e[1] in "+-":
            flat(e[2], sign)
            flat(e[3], sign if e[1] == "+" else -sign)
        else:
            terms.append(e if sign > 0 else mul(num(-1), e))
    flat(body, 1)
    red, outer = ZERO, ZERO
    rv = set(red_vars)
    for t in terms:
        uses = {v for r in refs(t) for a in r[2] for v, _ in a[0]}
        if uses & rv:
            red = add(red, t)
        else:
            outer = add(outer, t)
    return red, outer
