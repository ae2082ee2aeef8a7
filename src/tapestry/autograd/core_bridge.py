"""The pieces of tapestry's core the autograd layer builds on, in one place."""
from __future__ import annotations

# A Primitive stays one operation at every nesting level (what autograd does
# for its primitives): it re-enters itself when its forward meets values of
# an enclosing level, so a user's function only ever sees plain values.
from ..core.primitive import Primitive, unbroadcast  # noqa: F401
