"""The one piece the ``tapestry.numpy`` submodules share: module-level
``__getattr__`` / ``__dir__`` that forward to NumPy's own submodule, so
names ``import *`` leaves out (private helpers, aliases) resolve to NumPy's
objects and nothing is replaced or reloaded."""
from __future__ import annotations


def forwarding(module):
    """``(__getattr__, __dir__)`` for a module re-exporting ``module``."""
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(module, name)

    def __dir__(namespace):
        return sorted(set(namespace) | {n for n in dir(module) if not n.startswith("_")})
    return __getattr__, __dir__
