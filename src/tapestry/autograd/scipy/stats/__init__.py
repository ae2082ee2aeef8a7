"""``autograd.scipy.stats``: log densities and distribution functions
written with differentiable NumPy and ``scipy.special`` ufuncs, so they
trace; SciPy supplies the forward values of the CDFs (whose derivatives in
``x`` are the densities, see :mod:`._cdf`)."""
from . import (beta, chi2, dirichlet, gamma, multivariate_normal, norm,  # noqa: F401
               poisson, t)
