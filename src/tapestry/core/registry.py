"""The rule registries, filled once at import by the ``tapestry.ops`` modules
and only read afterwards (safe under threads, including free-threaded builds).
"""
#: ufunc -> Primitive; consulted by ``Var.__array_ufunc__`` and operators.
UFUNCS: dict = {}
#: NumPy function -> callable taking NumPy's own arguments (NEP 18 dispatch).
FUNCTIONS: dict = {}
#: Functions and ufuncs whose outputs carry no derivative (comparisons,
#: rounding, argmax, shape queries): they run on plain values.
NONDIFF: set = set()
