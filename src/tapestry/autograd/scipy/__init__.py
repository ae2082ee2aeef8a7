"""autograd's ``scipy`` namespace: ``special``, ``stats``, ``linalg``,
``signal``, ``integrate``.  Importing it imports SciPy (the ``scipy`` extra)."""
from . import integrate, linalg, signal, special, stats  # noqa: F401
