"""``autograd.numpy`` is ``tapestry.numpy``: this module puts the very same
module object in its place, and its submodules under the matching names, so
``import tapestry.autograd.numpy.linalg`` and ``import tapestry.numpy.linalg``
give one module (never a second copy loaded from ``tapestry.numpy``'s path)."""
import sys

import tapestry.numpy as _tnp

for _name in ("linalg", "fft", "random"):
    sys.modules[f"{__name__}.{_name}"] = getattr(_tnp, _name)
sys.modules[__name__] = _tnp
