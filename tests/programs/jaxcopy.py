"""The battery's programs re-run under ``jax.numpy``: each program module's
source is executed again with NumPy's names bound to JAX's, so the very same
program text gives JAX's gradient to compare with tapestry's.  Programs JAX
cannot run (in-place writes, tapestry-only helpers, SciPy functions JAX lacks)
are reported as skipped, never as failures."""
from __future__ import annotations

import importlib
import sys
import types

from . import MODULES


def _shim_tnp(jnp, jsp, jax):
    """What the programs use from tapestry.numpy, in JAX's terms."""
    return types.SimpleNamespace(logsumexp=jsp.special.logsumexp, softmax=jax.nn.softmax,
                                 log_softmax=jax.nn.log_softmax, array=jnp.array,
                                 asarray=jnp.asarray)


_REPLACE = (
    ("import numpy as np\n", "import jax.numpy as np\n"),
    ("import scipy.special as sp\n", "import jax.scipy.special as sp\n"),
    ("import scipy.stats as st\n", "import jax.scipy.stats as st\n"),
    ("import tapestry.numpy as tnp\n", "tnp = _TNP\n"),
    ("from . import program, rng\n", ""),
)


def jax_functions():
    """name -> the program's function with ``np`` bound to ``jax.numpy``."""
    import jax
    import jax.numpy as jnp
    import jax.scipy as jsp
    jax.config.update("jax_enable_x64", True)
    found = {}

    def program(*args, name=None, **kwargs):
        def deco(fn):
            found[name or fn.__name__] = fn
            return fn
        return deco

    for m in MODULES:
        real = importlib.import_module(f"{__package__}.{m}")
        src = open(real.__file__).read()
        for old, new in _REPLACE:
            src = src.replace(old, new)
        mod = types.ModuleType(f"{__package__}._jax_{m}")
        mod.__dict__.update(program=program, rng=real.rng, _TNP=_shim_tnp(jnp, jsp, jax))
        sys.modules[mod.__name__] = mod          # dataclasses look their module up
        exec(compile(src, real.__file__, "exec"), mod.__dict__)
    return found
