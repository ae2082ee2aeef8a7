"""``autograd.numpy`` is ``tapestry.numpy``: this module puts the very same
module object in its place, so ``import tapestry.autograd.numpy as np`` and
``import tapestry.numpy as np`` are interchangeable."""
import sys

import tapestry.numpy as _tnp

sys.modules[__name__] = _tnp
