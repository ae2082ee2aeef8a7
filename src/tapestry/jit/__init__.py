"""``tapestry.jit``: trace once per input signature, replay a straight-line
NumPy program after (docs/jit.md).

- ``api.py``: the ``jit`` object: signatures, the bounded cache, guards
  failing and tracing again, running uncompiled with one warning, explain.
- ``program.py``: a recorded trace lowered to Python source and compiled.
- ``env.py``: what the function reads besides its arguments (closures,
  globals, attributes), guarded before every replay; random state.

The staged value that records the trace is part of the engine
(``tapestry.core.staged``), as ``Var`` and ``Batched`` are.
"""
from .api import JitError, JitWarning, jit
from .program import GuardFailed

__all__ = ["jit", "JitError", "JitWarning", "GuardFailed"]
