"""``autograd.scipy.stats`` is ``tapestry.scipy.stats``: this module puts
that package and its submodules in its place, so ``import
tapestry.autograd.scipy.stats.norm`` and ``tapestry.scipy.stats.norm`` are
one module."""
import sys

import tapestry.scipy.stats as _stats

for _name in _stats.__all__:
    sys.modules[f"{__name__}.{_name}"] = getattr(_stats, _name)
sys.modules[__name__] = _stats
