"""autograd's ``misc``: ``flatten``, ``optimizers``, ``const_graph``,
``fixed_points``."""
from .flatten import flatten, flatten_func  # noqa: F401
from .tracers import const_graph  # noqa: F401

__all__ = ["flatten", "flatten_func", "const_graph"]
