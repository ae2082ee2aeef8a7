"""``const_graph``: autograd caches a traced graph to replay it; tapestry
records a fresh tape on every call (cheap), so the wrapper only binds the
fixed arguments.  Results are the same as autograd's."""
from __future__ import annotations

import functools

__all__ = ["const_graph"]


def const_graph(fun, *args, **kwargs):
    """``fun`` with ``args``/``kwargs`` bound (autograd's graph-caching wrapper)."""
    partial_fun = functools.partial(fun, *args, **kwargs)

    @functools.wraps(fun)
    def wrapped(*more_args):
        return partial_fun(*more_args)
    return wrapped
