"""Functions refused by name: differentiable (or partly so) NumPy and
scipy.special functions that have no rule yet.

Without an entry here a traced call of such a function would already raise
("no gradient rule for ..."); listing it makes the refusal a reviewed
decision with a reason, and puts it in the op table (docs/ops.md, built by
:mod:`tapestry.coverage.table`).  A refusal is registered through the registry
like a rule, so dispatch finds it; it raises ``NotImplementedError`` naming
the function, saying why, and pointing to ``tapestry.custom_vjp``.

A refusal never replaces a rule: it is registered only for functions that
have none when this module runs (it is imported last by ``tapestry.ops``),
and the op-table test fails on a function that is both refused and ruled,
so adding a rule means deleting its line here.

``PENDING`` is transitional: functions whose rules are being written on
other lines of work (issue 9's complex numbers, FFT, linear algebra and
numerics).  They are left unclassified until those land; the merge empties
the set (the op-table test fails on a pending function that got a rule).
"""
from __future__ import annotations

import importlib.util

import numpy as np

from ..core.primitive import implements
from ..core.registry import FUNCTIONS, NONDIFF, UFUNCS, add_loader

_HELP = ("Write it with differentiable NumPy operations, or supply the rule with "
         "@tapestry.custom_vjp (see docs/guide.md).")

_INPLACE = ("writes into an existing array in place, which cannot be differentiated; "
            "build a new array")

#: NumPy functions refused on traced arrays: name -> one-line reason.
NUMPY = {
    "np.ix_": "builds index arrays; index with integer arrays instead of traced values",
    "np.nextafter": "no rule (the result moves with x by one ulp)",
}

if importlib.util.find_spec("scipy") is None:  # i0's rule needs scipy.special.i1
    NUMPY["np.i0"] = "its derivative is the Bessel function i1: install scipy for the rule"

_SHAPE_INVERSE = ("solves a CDF for its shape parameter (degrees of freedom, trials, shape or "
                  "noncentrality): the derivative needs the CDF's derivative in that parameter, "
                  "which has no closed form")
#: scipy.special ufuncs refused on traced arrays, by family: reason -> names.
SPECIAL = {
    _SHAPE_INVERSE:
        "bdtrik bdtrin btdtria btdtrib chdtriv chndtridf fdtridfd gdtrib nbdtrik nbdtrin "
        "ncfdtridfd ncfdtridfn ncfdtrinc nctdtridf nctdtrinc pdtrik stdtridf",
    "Carlson's R_D and R_J: no derivative formula in SciPy's functions holds "
    "everywhere (dR_D/dx = (R_D(y,z,x) - R_D(x,y,z)) / (2(x-z)) is 0/0 at x = z, and its "
    "limit needs R_{-5/2}, which SciPy lacks)":
        "elliprd elliprj",
    "zetac(x) = zeta(x) - 1: the derivative zeta'(x) has no SciPy function":
        "zetac",
    "characteristic values of the Mathieu and spheroidal wave equations: their derivatives "
    "in q (or c) have no closed form":
        "mathieu_a mathieu_b obl_cv pro_cv",
    "second-kind radial spheroidal functions: SciPy's values and derivative outputs do not "
    "satisfy the spheroidal equation (obl_rad2's derivative output disagrees with its values), "
    "so no rule built on them would be right":
        "obl_rad2 obl_rad2_cv pro_rad2 pro_rad2_cv",
}

#: Transitional: rules in progress on other lines of work (issue 9 Deliver 1-4),
#: left unclassified until they land.  name -> the work item.
PENDING: dict = {}


class Refused:
    """The registered stand-in for a refused function: raises when called
    (dispatch calls it only when an argument is traced)."""

    __slots__ = ("name", "reason")

    def __init__(self, name, reason):
        self.name = name
        self.reason = reason

    def __repr__(self):
        return f"<Refused {self.name}>"

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(
            f"tapestry: {self.name} has no gradient rule; it is refused on traced arrays "
            f"({self.reason}). {_HELP}")


def resolve(name):
    """The object a dotted name (``np.linalg.cond``, ``scipy.special.jv``)
    refers to, or None where this NumPy/SciPy lacks it."""
    head, *rest = name.split(".")
    obj = np if head == "np" else __import__(head)
    try:
        for part in rest:
            obj = getattr(obj, part)
    except AttributeError:
        return None
    return obj


def _refuse(name, reason):
    fun = resolve(name)
    if fun is None or fun in FUNCTIONS or fun in UFUNCS or fun in NONDIFF:
        return  # absent from this version, or it has a rule: the table test says so
    canonical = name.rsplit(".", 1)[0] + "." + getattr(fun, "__name__", "")
    implements(fun)(Refused(canonical if resolve(canonical) is fun else name, reason))


def _register_numpy():
    for name, reason in NUMPY.items():
        _refuse(name, reason)


def special_refusals():
    """name -> reason for every scipy.special ufunc refused above."""
    return {f"scipy.special.{n}": reason for reason, names in SPECIAL.items()
            for n in names.split()}


def _load_special():
    """Loader: scipy.special's refusals, after its rules and constants."""
    try:
        import scipy.special  # noqa: F401
    except ImportError:
        return
    for name, reason in special_refusals().items():
        _refuse(name, reason)


_register_numpy()
add_loader(_load_special)
