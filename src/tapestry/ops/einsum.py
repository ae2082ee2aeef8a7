"""``np.einsum`` on traced arrays, and ``tapestry.einsum``.

The forward runs an ``opt_einsum`` contraction expression, built once per
(spec, shapes) and cached, so pairwise contractions go to BLAS (``tensordot``).
The VJP for operand ``k`` is itself an einsum -- the output cotangent
contracted with the other operands onto operand ``k``'s subscripts -- so it
is optimized the same way and is differentiable again (higher derivatives).

Specs are normalized before anything is recorded: ``...`` becomes explicit
letters, size-1 dimensions that broadcast against a longer one are squeezed
out of their operand (by a traced reshape, so their cotangent is summed back
automatically), and an implicit output (no ``->``) becomes explicit.  The
primitive then only sees specs where every letter has one size.
"""
from __future__ import annotations

import functools
import string

import numpy as np
import opt_einsum

from ..core.primitive import Primitive, implements
from ..core.var import reject_out
from ..core.batched import TRACED

_LETTERS = string.ascii_letters


# --- spec normalization -----------------------------------------------------------
def _split_spec(spec, n_operands):
    spec = spec.replace(" ", "")
    if "->" in spec:
        lhs, out = spec.split("->")
    else:
        lhs, out = spec, None
    ins = lhs.split(",")
    if len(ins) != n_operands:
        raise ValueError(f"tapestry.einsum: spec {spec!r} names {len(ins)} operands "
                         f"but {n_operands} were given.")
    for s in ins + ([out] if out is not None else []):
        bad = set(s.replace("...", "")) - set(_LETTERS)
        if bad:
            raise ValueError(f"tapestry.einsum: invalid subscript(s) {sorted(bad)} in "
                             f"{spec!r}; use letters a-z, A-Z and '...'.")
    return ins, out


def normalize(spec, shapes):
    """Explicit spec for ``shapes``, plus per-operand reshapes.

    Returns ``(spec, squeeze)`` where ``squeeze[k]`` is ``None`` or the shape
    operand ``k`` must be reshaped to (its broadcast size-1 axes removed).
    """
    ins, out = _split_spec(spec, len(shapes))
    used = set("".join(ins) + (out or ""))
    free = [c for c in _LETTERS if c not in used]
    n_ell = 0
    for s, shape in zip(ins, shapes):
        if "..." in s:
            n_ell = max(n_ell, len(shape) - (len(s) - 3))
    ell = "".join(free[:n_ell])
    terms = []
    for s, shape in zip(ins, shapes):
        if "..." in s:
            k = len(shape) - (len(s) - 3)
            if k < 0:
                raise ValueError(f"tapestry.einsum: operand with subscripts {s!r} has "
                                 f"only {len(shape)} dimensions.")
            s = s.replace("...", ell[n_ell - k:])
        if len(s) != len(shape):
            raise ValueError(f"tapestry.einsum: operand subscripts {s!r} do not match "
                             f"its shape {tuple(shape)}.")
        terms.append(s)
    if out is None:
        counts = {c: "".join(terms).count(c) for c in set("".join(terms))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        if out.count("...") and not n_ell and "..." not in "".join(ins):
            raise ValueError("tapestry.einsum: '...' in the output but not in the inputs.")
        out = out.replace("...", ell)
    sizes = _sizes(terms, shapes, spec)
    squeeze, new_terms = [], []
    for s, shape in zip(terms, shapes):
        keep = [i for i, c in enumerate(s) if not (shape[i] == 1 and sizes[c] != 1)]
        if len(keep) == len(s):
            squeeze.append(None)
            new_terms.append(s)
        else:
            squeeze.append(tuple(shape[i] for i in keep))
            new_terms.append("".join(s[i] for i in keep))
    for c in out:
        if c not in "".join(new_terms):
            raise ValueError(f"tapestry.einsum: output subscript {c!r} of {spec!r} "
                             "appears in no operand.")
    return ",".join(new_terms) + "->" + out, squeeze


def _sizes(terms, shapes, spec):
    sizes = {}
    for s, shape in zip(terms, shapes):
        for c, n in zip(s, shape):
            m = sizes.get(c, 1)
            if n != 1 and m != 1 and n != m:
                raise ValueError(f"tapestry.einsum: subscript {c!r} has sizes {m} and "
                                 f"{n} in {spec!r}.")
            sizes[c] = max(m, n)
    return sizes


# --- the primitive ----------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def _expression(spec, shapes):
    """opt_einsum's compiled contraction for a spec and operand shapes."""
    return opt_einsum.contract_expression(spec, *shapes, optimize="auto")


def _contract(spec, *operands):
    return _plan(spec, tuple(np.shape(o) for o in operands))(*operands)


@functools.lru_cache(maxsize=1024)
def _plan(spec, shapes):
    """The callable evaluating ``spec`` on operands of ``shapes``: a plain
    matrix product where the spec is one (``ki,kj->ij`` is ``a.T @ b``;
    kernels and every einsum VJP produce these), since opt_einsum's general
    route costs ~10 us of Python per call on top of the same BLAS call;
    otherwise opt_einsum's compiled contraction."""
    return _matmul_form(spec, shapes) or _expression(spec, shapes)


def _matmul_form(spec, shapes):
    """``spec`` as ``op(a) @ op(b)`` (``op``: transpose or not, result
    maybe transposed) for two matrices sharing one summed letter; or None."""
    ins, out = spec.split("->")
    terms = ins.split(",")
    if len(terms) != 2 or len(out) != 2 or any(len(t) != 2 or t[0] == t[1] for t in terms):
        return None
    (a, b), (sa, sb) = terms, shapes
    shared = set(a) & set(b)
    if len(shared) != 1 or out[0] == out[1]:
        return None
    k = shared.pop()
    row, col = a.replace(k, ""), b.replace(k, "")
    if k in out or {row, col} != set(out) or sa[a.index(k)] != sb[b.index(k)]:
        return None
    ta, tb, tout = a[0] == k, b[1] == k, out[0] == col

    def matmul(x, y):
        m = np.matmul(x.T if ta else x, y.T if tb else y)
        return m.T if tout else m
    return matmul


def _einsum_vjp(k, g, ans, args, kwargs):
    """Cotangent of operand ``k``; a real operand among complex ones gets its
    real part (the convention of docs/complex.md: no conjugation anywhere,
    the contraction is holomorphic in every operand)."""
    ct = _einsum_cotangent(k, g, args)
    if np.iscomplexobj(ct) and not np.iscomplexobj(args[k]):
        return np.real(ct)
    return ct


def _einsum_cotangent(k, g, args):
    """Cotangent of operand ``k``: ``g`` contracted with the other operands.

    d/dA_k sum(g * einsum(A_0..A_n)) = einsum(g, A_j (j != k)) onto A_k's
    subscripts.  Letters of A_k found nowhere else are broadcast back;
    repeated letters of A_k (a diagonal) are spread with identity factors.
    """
    spec, ops = args[0], args[1:]
    k -= 1
    ins, out = spec.split("->")
    terms = ins.split(",")
    target = terms[k]
    shape = np.shape(ops[k])
    dims = dict(zip(target, shape))
    others = [t for j, t in enumerate(terms) if j != k]
    other_ops = [o for j, o in enumerate(ops) if j != k]
    available = set(out + "".join(others))
    # letters the contraction can produce, each once, in target order
    uniq = "".join(dict.fromkeys(c for c in target if c in available))
    ct = einsum(",".join([out] + others) + "->" + uniq, g, *other_ops)
    if uniq == target:
        return ct
    # rebuild the target layout: diagonal letters via identities, missing
    # letters by broadcasting
    used = set(ins + out)
    free = iter(c for c in _LETTERS if c not in used)
    cols, eyes, eye_ops = [], [], []
    seen = {}
    for c in target:
        if c not in seen and (c in available or target.count(c) > 1):
            seen[c] = c
            cols.append(c)
        elif c not in seen:
            cols.append(None)
        else:
            d = next(free)
            eyes.append(c + d)
            eye_ops.append(np.eye(dims[c], dtype=ct.dtype))
            cols.append(d)
    present = "".join(c for c in cols if c is not None)
    if eyes:
        ct = einsum(",".join([uniq] + eyes) + "->" + present, ct, *eye_ops)
    if None in cols:
        expanded = tuple(1 if c is None else dims[target[i]] for i, c in enumerate(cols))
        ct = np.broadcast_to(np.reshape(ct, expanded), shape)
    return ct


def _batch_einsum(prim, args, batched, kwargs):
    """Batched operands gain a new leading letter, which the output keeps
    in front: the whole batch is one contraction (the spec is normalized:
    explicit output, no ellipsis)."""
    spec, ops = args[0], args[1:]
    if batched[0]:
        return NotImplemented
    ins, out = spec.split("->")
    letter = next((c for c in _LETTERS if c not in spec), None)
    if letter is None:
        return NotImplemented
    terms = [letter + t if b else t for t, b in zip(ins.split(","), batched[1:])]
    return prim(",".join(terms) + "->" + letter + out, *ops)


_einsum = Primitive(_contract, "einsum", vjp_argnum=_einsum_vjp, batch=_batch_einsum)


def einsum(*operands, optimize=True, **kwargs):
    """Einstein summation, differentiable in every operand.

    Same call as ``np.einsum(spec, *operands)``.  Contractions use
    ``opt_einsum`` paths (cached per spec and shapes) and BLAS; ``optimize``
    is accepted for NumPy compatibility and always on.
    """
    reject_out("einsum", kwargs.get("out"))
    unknown = set(kwargs) - {"out", "dtype", "order", "casting"}
    if unknown:
        raise TypeError(f"tapestry.einsum: unexpected keyword(s) {sorted(unknown)}.")
    if operands and not isinstance(operands[0], str):
        operands = _interleaved_to_string(operands)
    if not operands:
        raise TypeError("tapestry.einsum: pass the subscripts, e.g. einsum('ij,jk->ik', a, b).")
    spec, ops = operands[0], list(operands[1:])
    ops = [o if o.__class__ in TRACED or isinstance(o, np.ndarray) else np.asarray(o)
           for o in ops]
    ops = _cast_operands(ops, kwargs)
    shapes = tuple(tuple(o.shape) for o in ops)
    norm, squeeze = _normalized(spec, shapes)
    for k, s in enumerate(squeeze):
        if s is not None:
            ops[k] = np.reshape(ops[k], s)
    return _einsum(norm, *ops)


def _cast_operands(ops, kwargs):
    """np.einsum's ``dtype=`` / ``casting=`` / ``order=``: the operands cast to
    ``dtype`` under ``casting`` (einsum's default "safe": NumPy's error where
    it refuses), as NumPy's einsum computes in that type; an ``order`` other
    than "K" (the result's layout) is refused, not dropped."""
    order = kwargs.get("order", "K")
    if order not in ("K", None):
        raise NotImplementedError(f"tapestry: np.einsum(..., order={order!r}) on traced "
                                  "operands has no rule (it sets the layout of the result); drop it.")
    dtype = kwargs.get("dtype")
    casting = kwargs.get("casting", "safe")
    if dtype is None:
        if casting != "safe":  # NumPy's check of the operands' common type
            target = np.result_type(*[o.dtype for o in ops])
            bad = next((o.dtype for o in ops if not np.can_cast(o.dtype, target, casting)), None)
            if bad is not None:
                raise TypeError(f"Iterator operand dtype could not be cast from {bad!r} to "
                                f"{target!r} according to the rule {casting!r}")
        return ops
    dtype = np.dtype(dtype)
    for o in ops:
        if not np.can_cast(o.dtype, dtype, casting):
            raise TypeError(f"Iterator operand dtype could not be cast from {o.dtype!r} to "
                            f"{dtype!r} according to the rule {casting!r}")
    if dtype.kind not in "fc":
        raise NotImplementedError(f"tapestry: np.einsum(..., dtype={dtype.name}) on traced "
                                  "operands: an integer or boolean result has no rule.")
    return [o if o.dtype == dtype else o.astype(dtype) for o in ops]


def _sublist_letters(sub):
    """``[0, 1, Ellipsis]`` -> ``"ab..."`` (NumPy's interleaved subscripts)."""
    out = []
    for k in sub:
        if k is Ellipsis:
            out.append("...")
        elif isinstance(k, (int, np.integer)) and 0 <= k < 52:
            out.append(_INTERLEAVED[int(k)])
        else:
            raise ValueError(f"tapestry.einsum: subscript {k!r} in the interleaved form "
                             "must be an integer in [0, 52) or Ellipsis.")
    return "".join(out)


_INTERLEAVED = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _interleaved_to_string(operands):
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` -> ``("ab,bc->ac", a, b)``."""
    ops, subs = list(operands[0::2]), list(operands[1::2])
    out = None
    if len(operands) % 2 == 1:  # a trailing output sublist
        out = ops.pop()
    spec = ",".join(_sublist_letters(s) for s in subs)
    if out is not None:
        spec += "->" + _sublist_letters(out)
    return (spec, *ops)


@functools.lru_cache(maxsize=1024)
def _normalized(spec, shapes):
    return normalize(spec, shapes)


implements(np.einsum)(einsum)
