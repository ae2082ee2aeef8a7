"""Choosing and running an execution plan for a parsed kernel.

Plans, in order of preference (``Kernel.explain()`` shows the choice):

(a) ``einsum``  -- the body is one product of inputs: one ``tapestry.einsum``.
(b) ``expand``  -- the body is a polynomial: expanded into a sum of
    contractions (``(w-x)**2`` -> ``w**2 - 2 w x + x**2``, three BLAS-able
    einsums), each broadcast back to the output.  Gradients are the einsum
    VJPs: contractions again, differentiable to any order.
(c) ``numba``   -- anything else: generated loop nests (compile_numba.py).
(d) ``blocked`` -- (c) without numba: blocked NumPy under a memory budget.

For (c)/(d) each input's gradient is its own kernel derived symbolically
(derive.py), run by the same backend; those kernels are primitives too, so
higher derivatives work.
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import Primitive
from ..core.var import Var
from . import blocked, compile_numba
from .derive import grad_ir, polynomial, seed_names
from .parse import is_plain, refs

LOOP_PLANS = ("numba", "blocked")
PLANS = ("einsum", "expand") + LOOP_PLANS


def choose(ir, forced=None):
    """The plan for ``ir``: ``forced`` if given (checked), else the best one."""
    poly = None
    if ir.reduce == "sum" and not ir.guards and all(
            is_plain(a) for r in refs(ir.body) for a in r[2]):
        poly = polynomial(ir.body)
    product = poly is not None and len(poly) == 1 and all(
        n == 1 for n in dict(next(iter(poly))).values()) and next(iter(poly)) != ()
    if forced is not None:
        if forced not in PLANS:
            raise ValueError(f"tapestry.kernel: unknown plan {forced!r}; choose from {PLANS}.")
        if forced == "einsum" and not product:
            raise ValueError("tapestry.kernel: plan='einsum' needs a body that is one "
                             "product of inputs with plain indices and a sum reduction.")
        if forced == "expand" and poly is None:
            raise ValueError("tapestry.kernel: plan='expand' needs a polynomial body with "
                             "plain indices and a sum reduction.")
        if forced == "numba" and not compile_numba.available():
            raise ImportError("tapestry.kernel: plan='numba' needs numba: pip install "
                              "'tapestry[numba]' (or unset TAPESTRY_NO_NUMBA).")
        return forced, poly
    if product:
        return "einsum", poly
    if poly is not None:
        return "expand", poly
    return ("numba" if compile_numba.available() else "blocked"), None


# --- plans (a) and (b): contractions ------------------------------------------------
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def contract_terms(ir, poly, bound, ranges):
    """Evaluate the polynomial ``poly`` as a sum of einsums (traced)."""
    from ..ops.einsum import einsum
    total = None
    for factors, spec, scale, shape in _recipe(ir, poly, ranges):
        ops = [bound[name] if n == 1 else bound[name] ** n for name, n in factors]
        if spec is None:
            term = ops[0] if ops else np.full(shape, scale)  # a term used as it is (b[i])
        else:
            term = einsum(spec, *ops)
        if ops and scale != 1.0:
            term = term * scale
        if ops and np.shape(term) != shape:
            term = np.reshape(term, shape)
        total = term if total is None else total + term
    return total


_RECIPES: dict = {}


def _recipe(ir, poly, ranges):
    """Per term of ``poly``: its factors ``(input, power)``, the einsum spec
    (None where the term is one input already in output order), the scale
    (coefficient times the size of reduced indices the term does not use),
    and the shape that broadcasts it against the output.  Worked out once
    per polynomial and index ranges: a kernel called in a loop pays only
    for the contractions."""
    key = (id(poly), tuple(sorted(ranges.items())))
    hit = _RECIPES.get(key)
    if hit is not None and hit[0] is poly:
        return hit[1]
    letter = {v: _LETTERS[n] for n, v in enumerate(list(ir.out_vars) + list(ir.red_vars))}
    size = {v: hi - lo + 1 for v, (lo, hi) in ranges.items()}
    recipe = []
    for mono, coef in poly.items():
        factors, subs, used = [], [], set()
        for r, n in mono:
            factors.append((r[1], n))
            vs = [a_[0][0][0] for a_ in r[2]]
            subs.append("".join(letter[v] for v in vs))
            used.update(vs)
        scale = coef * float(np.prod([size[v] for v in ir.red_vars if v not in used]))
        target = "".join(letter[v] for v in ir.out_vars if v in used)
        spec = None if len(subs) <= 1 and subs == [target] or not subs else \
            ",".join(subs) + "->" + target
        shape = tuple(size[v] if v in used else 1 for v in ir.out_vars)
        recipe.append((tuple(factors), spec, scale, shape))
    if len(_RECIPES) > 256:
        _RECIPES.clear()
    _RECIPES[key] = (poly, recipe)
    return recipe


# --- plans (c) and (d): loop nests ----------------------------------------------------
def _float_dtype(arrays):
    dt = np.result_type(*[a.dtype for a in arrays]) if arrays else np.dtype(float)
    return dt if dt.kind == "f" else np.dtype(np.float64)


class LoopKernel:
    """One loop-nest kernel (a forward or a gradient) as a tapestry primitive.

    ``self(arrays, origins, ranges)``: ``arrays`` in ``ir.inputs`` order,
    ``origins[name]`` the index of each input's element 0 (nonzero for the
    cotangent of an output whose ranges start above 0), ``ranges[var]`` the
    inclusive ``(lo, hi)`` of every index.
    """

    def __init__(self, ir, backend):
        self.ir = ir
        self.backend = backend
        self.multi = ir.reduce != "sum"
        self.prim = Primitive(self._forward, f"kernel {ir}", vjp_argnum=self._vjp,
                              n_outputs=2 if self.multi else 1)
        self._grads = None

    def grads(self):
        """``{input: [(LoopKernel, target_ref), ...]}``, derived once."""
        if self._grads is None:
            gs = {}
            for r in refs(self.ir.body):
                d = grad_ir(self.ir, r)
                if d is not None:
                    gs.setdefault(r[1], []).append((LoopKernel(d[0], self.backend), r))
            self._grads = gs
        return self._grads

    def __call__(self, arrays, origins, ranges):
        res = self.prim(*arrays, meta=(origins, ranges))
        return res[0] if self.multi else res

    def _forward(self, *arrays, meta):
        if any(a.__class__ is Var for a in arrays):  # an outer tape's values
            return self.prim(*arrays, meta=meta)
        origins, ranges = meta
        dtype = _float_dtype(arrays)
        run = compile_numba.run if self.backend == "numba" else blocked.run
        out, cnt = run(self.ir, dict(zip(self.ir.inputs, arrays)), origins, ranges, dtype)
        return (out, cnt.astype(dtype)) if self.multi else out

    def _vjp(self, k, g, ans, args, kwargs):
        origins, ranges = kwargs["meta"]
        name = self.ir.inputs[k]
        y = cnt = None
        if self.multi:
            g, (y, cnt) = g[0], ans
            if g is None:
                return None
        gname, yname, cname = seed_names(self.ir)
        out_origin = tuple(ranges[v][0] for v in self.ir.out_vars)
        byname = dict(zip(self.ir.inputs, args))
        byname.update({gname: g, yname: y, cname: cnt})
        a = args[k]
        total = None
        for gk, target in self.grads().get(name, ()):
            o = origins.get(name, (0,) * len(a.shape))
            granges = dict(ranges)
            for v, od, n in zip(gk.ir.out_vars, o, a.shape):
                granges[v] = (od, od + n - 1)
            gorig = dict(origins)
            gorig.update({gname: out_origin, yname: out_origin, cname: out_origin})
            ct = gk([byname[n] for n in gk.ir.inputs], gorig, granges)
            total = ct if total is None else total + ct
        return total
