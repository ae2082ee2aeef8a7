"""Pytree utilities, named as in ``jax.tree_util``: flatten any nested
container of arrays, map over several trees at once, register your own
container classes, and ravel a tree into one flat vector (the shape
``scipy.optimize`` wants).  See docs/guide.md, "Pytrees"."""
from .core.pytree import (TreeDef, flatten_up_to, ravel_pytree, register_dataclass,
                          register_pytree_node, tree_flatten, tree_leaves, tree_map,
                          tree_reduce, tree_structure, tree_unflatten)

PyTreeDef = TreeDef  # JAX's name

__all__ = ["TreeDef", "PyTreeDef", "tree_flatten", "tree_unflatten", "tree_leaves",
           "tree_structure", "tree_map", "tree_reduce", "flatten_up_to",
           "register_pytree_node", "register_dataclass", "ravel_pytree"]
