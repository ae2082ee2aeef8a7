"""The bridge to ``scipy.optimize`` (SciPy is an optional extra:
``pip install 'tapestry[scipy]'``).

``minimize(fun, params)`` and ``least_squares(residuals, params)`` take
parameters as any pytree (a dict of arrays, a dataclass, ...), ravel them
into the flat float64 vector SciPy works on, supply the exact derivatives
SciPy asks for (the gradient from ``value_and_grad``, Hessian-vector
products for the Newton and trust-region methods, the Jacobian of the
residuals), and return one :class:`OptimizeResult` whose ``x`` is the
solution with the structure, shapes and dtypes of ``params`` (it also
unpacks as ``x, res = minimize(...)``).  Bounds are SciPy's flat form in
``bounds=`` or pytrees in ``lower=`` / ``upper=``.
"""
from .bridge import OptimizeResult, least_squares, minimize

__all__ = ["minimize", "least_squares", "OptimizeResult"]
