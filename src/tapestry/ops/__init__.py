"""Differentiation rules, one module per NumPy family.  Importing this
package fills the registries in :mod:`tapestry.core.registry` (once, at
import); scipy.special's rules are loaded on the first traced call of a
ufunc that has no rule (importing SciPy at ``import tapestry`` would cost
~0.3 s, and a program that calls a SciPy ufunc has imported SciPy already)."""
from ..core.registry import add_loader
from . import constant, elementwise, complex, indexing, linalg, reductions, shape  # noqa: F401
from . import einsum as _einsum_ops  # noqa: F401
from . import sorting, fft, nanfunctions, statistics, setops, polynomial  # noqa: F401
from . import creation, differences, signal, ufunc_methods, functional  # noqa: F401


def _load_special_rules():
    from . import special
    special.register_rules()


add_loader(_load_special_rules)
add_loader(constant.load_special_constants)
# Last: refusals by name, only for functions that got no rule above.
from ..coverage import refused  # noqa: E402,F401
