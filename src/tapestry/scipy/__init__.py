"""``tapestry.scipy``: differentiable stand-ins for SciPy functions that
NumPy's dispatch cannot reach.

SciPy's special functions are ufuncs and dispatch on traced arrays by
themselves (``scipy.special.expit(x)`` just works, see ops/special.py).
``scipy.linalg``'s functions are not: they call ``np.asarray`` on their
inputs first, which a traced array refuses.  So they are reached through
this namespace instead -- ``import tapestry.scipy.linalg as tsl`` -- whose
functions run SciPy's own on plain arrays and tapestry's rules on traced
ones.  The few scipy.special functions that are Python wrappers rather
than ufuncs (``polygamma``, ``multigammaln``, ``spherical_jn``, ...) are
in ``tapestry.scipy.special`` for the same reason, and ``scipy.stats``'s
distributions (``norm.logpdf``, ...) in ``tapestry.scipy.stats``.  Importing ``tapestry``
does not import this package (nor SciPy).
"""
