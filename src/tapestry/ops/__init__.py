"""Differentiation rules, one module per family.  Importing this package
fills the registries in :mod:`tapestry.core.registry` (once, at import)."""
from . import constant, elementwise, indexing, linalg, reductions, shape  # noqa: F401
from . import einsum as _einsum_ops  # noqa: F401,E402
from . import sorting  # noqa: F401,E402
