"""autograd's ``tracer`` names: ``primitive``, ``isbox``, ``getval``."""
from __future__ import annotations

from ..core.api import stop_gradient
from ..core.var import Var
from .extend import Box, notrace_primitive, primitive  # noqa: F401

__all__ = ["isbox", "getval", "Box", "notrace_primitive", "primitive"]


def isbox(x):
    """Is ``x`` a traced value (autograd's Box)?"""
    return x.__class__ is Var


def getval(x):
    """``x`` without tracing (its value; batched values stay batched)."""
    return stop_gradient(x)
