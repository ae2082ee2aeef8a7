"""``import tapestry.scipy.stats as tst``: differentiable log densities and
distribution functions with ``scipy.stats``'s names and signatures
(``tst.norm.logpdf(x, loc, scale)``, ``tst.poisson.logpmf(k, mu)``,
``tst.multivariate_normal.logpdf(x, mean, cov)``, ...).

Why a namespace: ``scipy.stats.norm.logpdf`` converts its arguments with
``np.asarray`` before anything else, which a traced array refuses (NEP 18
reaches NumPy's own functions only).  These are written with NumPy and
``scipy.special``'s ufuncs, so they trace; the CDFs are scipy.special's
distribution functions (stdtr, betainc, chdtr, gammainc, ndtr), whose rules
are tapestry's.  On plain arrays they give SciPy's values (to rounding).
``tapestry.autograd.scipy.stats`` (HIPS autograd's set) is this package.
"""
from . import (beta, chi2, dirichlet, gamma, multivariate_normal, norm,  # noqa: F401
               poisson, t)

__all__ = ["beta", "chi2", "dirichlet", "gamma", "multivariate_normal", "norm", "poisson", "t"]
