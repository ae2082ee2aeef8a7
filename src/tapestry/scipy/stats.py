"""``import tapestry.scipy.stats as tst``: differentiable log densities and
distribution functions with ``scipy.stats``'s names and signatures
(``tst.norm.logpdf(x, loc, scale)``, ``tst.poisson.logpmf(k, mu)``,
``tst.multivariate_normal.logpdf(x, mean, cov)``, ...).

Why a namespace: ``scipy.stats.norm.logpdf`` converts its arguments with
``np.asarray`` before anything else, which a traced array refuses (NEP 18
reaches NumPy's own functions only).  These are written with NumPy and
``scipy.special``'s ufuncs, so they trace; on plain arrays they give
SciPy's values (to rounding).  They are the modules of
``tapestry.autograd.scipy.stats`` (HIPS autograd's set), under this name
for code that is not a port from autograd.
"""
from ..autograd.scipy.stats import (beta, chi2, dirichlet, gamma,  # noqa: F401
                                    multivariate_normal, norm, poisson, t)

__all__ = ["beta", "chi2", "dirichlet", "gamma", "multivariate_normal", "norm", "poisson", "t"]
