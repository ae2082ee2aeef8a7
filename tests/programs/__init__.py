"""A battery of realistic NumPy programs, each differentiated by tapestry and
checked against finite differences (tests/test_user_programs.py).

Every program is plain NumPy code a scientist or ML engineer would write --
``import numpy as np``, Python loops, in-place accumulators, pytrees of
parameters -- registered with :func:`program` together with the inputs it is
called with.  The battery exists to find gradients that are silently wrong
and everyday code that is refused; it mirrors the hidden set of issue 9.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

#: name -> Program, filled by the modules in :data:`MODULES` on :func:`load`.
REGISTRY: dict = {}

MODULES = ("nn", "stats", "physics", "numerics", "linalg_progs", "spectral", "api_progs", "edge_progs", "branch_features", "special_progs", "science")


@dataclass
class Program:
    """One program: ``fn(*make_args())`` returns a scalar (or ``(scalar, aux)``
    for ``mode="aux"``).  ``argnums=None`` differentiates every float argument;
    ``mode="hessian"`` also checks ``tp.hessian`` of the first one."""
    name: str
    fn: Callable
    make_args: Callable
    mode: str = "grad"
    argnums: tuple | None = None
    jax: bool = True           # worth trying under jax.numpy in the cross-check
    note: str = ""
    module: str = field(default="")


def program(args, mode="grad", argnums=None, jax=True, name=None, note=""):
    """Register the decorated ``loss`` with ``args`` (a zero-argument callable
    returning the argument tuple, so every run gets fresh arrays)."""
    def deco(fn):
        key = name or fn.__name__
        if key in REGISTRY:
            raise ValueError(f"program {key!r} registered twice")
        REGISTRY[key] = Program(key, fn, args, mode, argnums, jax, note, fn.__module__)
        return fn
    return deco


def rng(seed=0):
    """The generator every program draws its inputs from (fixed seeds)."""
    return np.random.default_rng(seed)


def load():
    """Import every program module (idempotent) and return the registry."""
    for m in MODULES:
        importlib.import_module(f"{__name__}.{m}")
    return REGISTRY
