"""``tnp.einsum`` that also takes NumPy's interleaved form.

``np.einsum(a, [0, 1], b, [1, 2], [0, 2])`` is the same contraction as
``np.einsum('ab,bc->ac', a, b)``; the interleaved form is translated to the
subscript string before the call, so traced operands reach tapestry's
einsum rule either way (plain operands get NumPy's result unchanged).
"""
from __future__ import annotations

import string

import numpy as _np

# Upper case first: implicit-mode output labels are sorted by character code,
# which then matches the interleaved form's order by integer label.
_LETTERS = string.ascii_uppercase + string.ascii_lowercase


def _subscripts(labels):
    out = []
    for lab in labels:
        if lab is Ellipsis:
            out.append("...")
        else:
            out.append(_LETTERS[int(lab)])
    return "".join(out)


def interleaved_to_string(operands):
    """``(spec, arrays)`` for NumPy's interleaved einsum arguments."""
    ops, specs = list(operands[0::2]), list(operands[1::2])
    out = None
    if len(operands) % 2 == 1:  # a trailing output sublist
        ops, out = ops[:-1], operands[-1]
    spec = ",".join(_subscripts(s) for s in specs)
    if out is not None:
        spec += "->" + _subscripts(out)
    return spec, ops


def einsum(*operands, **kwargs):
    """``np.einsum``, with the interleaved form accepted for traced operands."""
    if operands and not isinstance(operands[0], str):
        spec, ops = interleaved_to_string(operands)
        return _np.einsum(spec, *ops, **kwargs)
    return _np.einsum(*operands, **kwargs)
