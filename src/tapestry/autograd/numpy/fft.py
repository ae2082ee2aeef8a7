"""``autograd.numpy.fft`` is ``tapestry.numpy.fft`` (the same module object)."""
import sys

import tapestry.numpy.fft as _mod

sys.modules[__name__] = _mod
