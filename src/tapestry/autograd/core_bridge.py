"""The pieces of tapestry's core the autograd layer builds on, in one place."""
from __future__ import annotations

from ..core.primitive import Primitive, unbroadcast  # noqa: F401
from ..core.var import Var


def leveled_primitive(fun, name, vjps=(), vjp_argnum=None):
    """A :class:`Primitive` that stays one operation at every nesting level.

    A Primitive unwraps the innermost level only; under nested
    differentiation its forward function then receives values traced by the
    outer levels.  Here the forward re-enters the Primitive in that case, so
    each level records one node with the declared rules (what autograd does
    for its primitives), and ``fun`` itself only ever sees plain values.
    """
    def forward(*args, **kwargs):
        if any(a.__class__ is Var for a in args):
            return prim(*args, **kwargs)
        return fun(*args, **kwargs)
    prim = Primitive(forward, name, vjps=vjps, vjp_argnum=vjp_argnum)
    return prim
