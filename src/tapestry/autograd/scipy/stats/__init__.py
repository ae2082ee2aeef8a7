"""``autograd.scipy.stats``: log densities and distribution functions
written with differentiable NumPy and ``scipy.special`` ufuncs, so they
trace; the CDFs are scipy.special's distribution functions (stdtr,
betainc, chdtr, gammainc, ndtr), whose rules are tapestry's."""
from . import (beta, chi2, dirichlet, gamma, multivariate_normal, norm,  # noqa: F401
               poisson, t)
