"""The bridge to ``scipy.optimize`` (SciPy is an optional extra:
``pip install 'tapestry[scipy]'``).

``minimize(fun, params)`` and ``least_squares(residuals, params)`` take
parameters as any pytree (a dict of arrays, a dataclass, ...), ravel them
into the flat float64 vector SciPy works on, supply the exact derivatives
SciPy asks for (the gradient from ``value_and_grad``, Hessian-vector
products for the Newton and trust-region methods, the Jacobian of the
residuals), and return the solution with the structure, shapes and dtypes
of ``params`` next to SciPy's ``OptimizeResult``.
"""
from .bridge import least_squares, minimize

__all__ = ["minimize", "least_squares"]
