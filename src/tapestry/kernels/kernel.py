"""``tapestry.kernel(spec)``: a differentiable index-notation kernel.

    dist = tapestry.kernel("y[i,j] := (w[k,i] - x[k,j])**2")
    y = dist(w, x)            # or dist(w=w, x=x); inputs in order of first use

Indices on the left are the output's; every other index is reduced (``sum``
by default, or ``(max)`` / ``(min)`` before the output).  Top-level terms
of the body that use no reduced index are added once, outside the
reduction: ``y[i,j] := w[k,i]*x[k,j] + b[i]`` is ``sum_k w x + b``.  A
``|> f`` suffix applies ``f`` to the reduced result: ``y[i] := exp(x[i,k])
|> log`` is a log-sum-exp.  Index ranges come from the input shapes; an
index used only in shifts (``x[i+a]``) gets the largest range that keeps
every access in bounds ("valid" convolution).
"""
from __future__ import annotations

import numpy as np

from .derive import IR, ZERO, split_terms
from .parse import KernelSyntaxError, affine_str, index_vars, parse, refs, to_str
from .plan import LOOP_PLANS, LoopKernel, choose, contract_terms

_FINALIZERS = {"relu": lambda y: np.maximum(y, 0.0),
               "sigmoid": lambda y: 1.0 / (1.0 + np.exp(-y)),
               "square": lambda y: y * y,
               "abs": np.abs}


class Kernel:
    """A parsed kernel with its plans; call it like a function."""

    def __init__(self, spec, reduce=None, plan=None):
        self.spec = parse(spec)
        self.reduce = reduce or self.spec.reduce
        if self.reduce not in ("sum", "max", "min"):
            raise ValueError(f"tapestry.kernel: reduce={reduce!r}; choose sum, max or min.")
        body = self.spec.body
        self.inputs = tuple(dict.fromkeys(r[1] for r in refs(body)))
        rhs = index_vars(body)
        missing = [v for v in self.spec.out_vars if v not in rhs]
        if missing:
            raise KernelSyntaxError(
                f"tapestry.kernel: output index {missing[0]!r} appears nowhere on the right "
                f"side of {spec!r}, so its range cannot be inferred.")
        self.red_vars = tuple(v for v in rhs if v not in self.spec.out_vars)
        reduced, outer = split_terms(body, self.red_vars)
        self.parts = []
        if reduced != ZERO:
            self.parts.append(IR(self.spec.out_vars, self.red_vars, reduced, self.reduce))
        if outer != ZERO:
            self.parts.append(IR(self.spec.out_vars, (), outer))
        self.plans = []
        for ir in self.parts:
            name, poly = choose(ir, plan)
            loop = LoopKernel(ir, name) if name in LOOP_PLANS else None
            if loop is not None:
                loop.grads()  # derive now: unsupported gradients fail at definition
            self.plans.append((name, poly, loop))
        self._ranges = {}

    # --- calling -------------------------------------------------------------------
    def bind(self, args, kwargs):
        """Inputs by position (order of first appearance) or by name."""
        if len(args) > len(self.inputs):
            raise TypeError(f"tapestry.kernel: {self.spec.text!r} takes "
                            f"{len(self.inputs)} inputs {self.inputs}, got {len(args)}.")
        bound = dict(zip(self.inputs, args))
        for k, v in kwargs.items():
            if k not in self.inputs:
                raise TypeError(f"tapestry.kernel: unknown input {k!r}; inputs are "
                                f"{self.inputs}.")
            if k in bound:
                raise TypeError(f"tapestry.kernel: input {k!r} given twice.")
            bound[k] = v
        absent = [n for n in self.inputs if n not in bound]
        if absent:
            raise TypeError(f"tapestry.kernel: missing input(s) {absent}; inputs are "
                            f"{self.inputs} (positional, in order of first appearance).")
        return {k: v if hasattr(v, "shape") else np.asarray(v) for k, v in bound.items()}

    def __call__(self, *args, **kwargs):
        bound = self.bind(args, kwargs)
        ranges = self.ranges({k: tuple(v.shape) for k, v in bound.items()})
        out_shape = tuple(ranges[v][1] - ranges[v][0] + 1 for v in self.spec.out_vars)
        y = None
        for ir, (name, poly, loop) in zip(self.parts, self.plans):
            if loop is None:
                part = contract_terms(ir, poly, bound, ranges)
            else:
                part = loop([bound[n] for n in ir.inputs], {}, ranges)
            y = part if y is None else y + part
        if np.shape(y) != out_shape:
            y = np.broadcast_to(y, out_shape)
        f = self.spec.finalizer
        if f is not None:
            y = _FINALIZERS[f](y) if f in _FINALIZERS else getattr(np, f)(y)
        return y

    # --- index ranges ------------------------------------------------------------------
    def ranges(self, shapes):
        """``{index: (lo, hi)}`` for these input shapes (cached per shapes)."""
        key = tuple(sorted(shapes.items()))
        r = self._ranges.get(key)
        if r is None:
            r = self._ranges[key] = infer_ranges(self.spec, shapes)
        return r

    # --- introspection ---------------------------------------------------------------
    def explain(self):
        """The plan of each part and, for loop plans, each gradient kernel."""
        lines = [f"kernel {self.spec.text}",
                 f"  inputs (positional order): {', '.join(self.inputs)}",
                 f"  reduction: {self.reduce} over {', '.join(self.red_vars) or '(none)'}"]
        for ir, (name, poly, loop) in zip(self.parts, self.plans):
            what = "reduced part" if ir.red_vars else "outer part (added once)"
            lines.append(f"  {what}: {to_str(ir.body)}")
            if loop is None:
                lines.append(f"    plan ({'a' if name == 'einsum' else 'b'}) {name}: "
                             f"{len(poly)} contraction(s) via opt_einsum/BLAS")
                for mono, c in poly.items():
                    f = " * ".join(to_str(r) + (f"**{n}" if n > 1 else "") for r, n in mono)
                    lines.append(f"      {c:+g} * {f or '1'}")
                lines.append("    gradients: einsum VJPs (each a contraction)")
            else:
                lines.append(f"    plan ({'c' if name == 'numba' else 'd'}) {name}: "
                             f"forward {ir}")
                for inp, gks in loop.grads().items():
                    for gk, _ in gks:
                        lines.append(f"    d/d{inp}: {inp}_bar{gk.ir}")
        if self.spec.finalizer:
            lines.append(f"  finalizer: {self.spec.finalizer} (elementwise, traced)")
        return "\n".join(lines)

    def __repr__(self):
        return f"<tapestry.kernel {self.spec.text!r}>"


def infer_ranges(spec, shapes):
    """Each index's inclusive range from the input shapes (see module doc)."""
    rs = refs(spec.body)
    for r in rs:
        if len(r[2]) != len(shapes[r[1]]):
            raise ValueError(f"tapestry.kernel: {r[1]} is used with {len(r[2])} indices in "
                             f"{spec.text!r} but has shape {shapes[r[1]]}.")
    ranges = _plain_ranges(rs, shapes, spec.text)
    _derived_ranges(rs, shapes, ranges, index_vars(spec.body), spec.text)
    _check_in_bounds(rs, shapes, ranges, spec.text)
    return ranges


def _plain_ranges(rs, shapes, text):
    """Ranges of indices used plainly (``x[i]``): the axis they run over;
    two axes of different lengths for one index is an error."""
    ranges, source = {}, {}
    for r in rs:
        for d, aff in enumerate(r[2]):
            terms, c = aff
            if len(terms) == 1 and terms[0][1] == 1 and c == 0:
                v, n = terms[0][0], shapes[r[1]][d]
                if v in ranges and ranges[v] != (0, n - 1):
                    raise ValueError(
                        f"tapestry.kernel: index {v!r} has range {ranges[v][1] + 1} from "
                        f"{source[v]} but {n} from {r[1]} (axis {d}) in {text!r}.")
                ranges[v] = (0, n - 1)
                source[v] = f"{r[1]} (axis {[a for a in r[2]].index(aff)})"
    return ranges


def _derived_ranges(rs, shapes, ranges, variables, text):
    """Ranges of indices used only inside affine expressions (``x[i+k]``):
    the values that keep every such access in bounds, found one index at a
    time from those already known."""
    todo = [v for v in variables if v not in ranges]
    while todo:
        progress = False
        for v in list(todo):
            bounds = _affine_bounds(v, rs, shapes, ranges)
            if bounds is not None:
                lo, hi = bounds
                ranges[v] = (int(lo), int(max(hi, lo - 1)))
                todo.remove(v)
                progress = True
        if not progress:
            raise ValueError(f"tapestry.kernel: cannot infer the range of index {todo[0]!r} "
                             f"in {text!r}; use it plainly (x[{todo[0]}]) in some input.")


def _affine_bounds(v, rs, shapes, ranges):
    """``(lo, hi)`` for ``v`` from the accesses whose other indices are
    known: 0 <= k*v + rest <= n-1 for every value of the rest.  None if no
    such access exists yet."""
    lo, hi, found = -np.inf, np.inf, False
    for r in rs:
        for d, (terms, c) in enumerate(r[2]):
            coefs = dict(terms)
            if v not in coefs or any(u not in ranges for u in coefs if u != v):
                continue
            found = True
            n = shapes[r[1]][d]
            rmin = c + sum(min(k * ranges[u][0], k * ranges[u][1]) for u, k in terms if u != v)
            rmax = c + sum(max(k * ranges[u][0], k * ranges[u][1]) for u, k in terms if u != v)
            k = coefs[v]
            a, b = ((-rmin) / k, (n - 1 - rmax) / k) if k > 0 else \
                ((n - 1 - rmax) / k, (-rmin) / k)
            lo, hi = max(lo, int(np.ceil(a))), min(hi, int(np.floor(b)))
    return (lo, hi) if found else None


def _check_in_bounds(rs, shapes, ranges, text):
    """Every access stays inside its input for every index value."""
    for r in rs:
        for d, aff in enumerate(r[2]):
            terms, c = aff
            if any(ranges[u][1] < ranges[u][0] for u, _ in terms):
                continue
            lo = c + sum(min(k * ranges[u][0], k * ranges[u][1]) for u, k in terms)
            hi = c + sum(max(k * ranges[u][0], k * ranges[u][1]) for u, k in terms)
            n = shapes[r[1]][d]
            if lo < 0 or hi > n - 1:
                raise ValueError(
                    f"tapestry.kernel: {r[1]}[..{affine_str(aff)}..] reaches index "
                    f"{lo if lo < 0 else hi}, outside {r[1]}'s axis {d} of length {n}, "
                    f"in {text!r}.")


def kernel(spec, reduce=None, plan=None):
    """A differentiable kernel from index notation (see :class:`Kernel`).

    ``plan`` forces ``'einsum'``, ``'expand'``, ``'numba'`` or ``'blocked'``;
    by default the best available is chosen (``kernel.explain()`` says which).
    ``TAPESTRY_NO_NUMBA=1`` makes the automatic choice skip numba.
    """
    return Kernel(spec, reduce, plan)
