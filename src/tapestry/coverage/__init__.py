"""What tapestry differentiates, holds constant, or refuses: the refusals
(registered last, by name, with a reason each) and the op table
(docs/ops.md) that classifies every public NumPy and scipy.special
function.  Tooling beside the rules of :mod:`tapestry.ops`."""
