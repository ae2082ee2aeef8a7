"""``autograd.numpy.linalg`` is ``tapestry.numpy.linalg`` (the same module object)."""
import sys

import tapestry.numpy.linalg as _mod

sys.modules[__name__] = _mod
