"""``autograd.numpy.random`` is ``tapestry.numpy.random`` (the same module object)."""
import sys

import tapestry.numpy.random as _mod

sys.modules[__name__] = _mod
