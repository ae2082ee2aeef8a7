"""Functions refused by name: differentiable (or partly so) NumPy and
scipy.special functions that have no rule yet.

Without an entry here a traced call of such a function would already raise
("no gradient rule for ..."); listing it makes the refusal a reviewed
decision with a reason, and puts it in the op table (docs/ops.md, built by
:mod:`tapestry.ops.table`).  A refusal is registered through the registry
like a rule, so dispatch finds it; it raises ``NotImplementedError`` naming
the function, saying why, and pointing to ``tapestry.custom_vjp``.

A refusal never replaces a rule: it is registered only for functions that
have none when this module runs (it is imported last in ``tapestry.ops``),
and the op-table test fails on a function that is both refused and ruled,
so adding a rule means deleting its line here.

``PENDING`` is transitional: functions whose rules are being written on
other lines of work (issue 9's complex numbers, FFT, linear algebra and
numerics).  They are left unclassified until those land; the merge empties
the set (the op-table test fails on a pending function that got a rule).
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import def_nondiff, implements
from ..core.registry import FUNCTIONS, NONDIFF, UFUNCS, add_loader, register_nondiff

_HELP = ("Write it with differentiable NumPy operations, or supply the rule with "
         "@tapestry.custom_vjp (see docs/guide.md).")

_INPLACE = ("writes into an existing array in place, which cannot be differentiated; "
            "build a new array")
_SETS = "returns selected input values (differentiable like np.unique, which has no rule yet)"

#: NumPy functions refused on traced arrays: name -> one-line reason.
NUMPY = {
    "np.apply_along_axis": "calls a Python function per slice and fills a preallocated array; "
                           "loop and np.stack the results",
    "np.apply_over_axes": "calls a Python function per axis; call it in a loop",
    "np.astype": "use x.astype(dtype), which is differentiable for float dtypes",
    "np.block": "use np.concatenate / np.stack, which are differentiable",
    "np.choose": "use np.where or take_along_axis, which are differentiable",
    "np.compress": "use boolean indexing x[mask] or np.take, which are differentiable",
    "np.delete": "use boolean indexing or np.take, which are differentiable",
    "np.divmod": "two outputs (piecewise-constant quotient, differentiable remainder); "
                 "use np.floor_divide and np.remainder",
    "np.extract": "use boolean indexing x[mask]",
    "np.fill_diagonal": _INPLACE,
    "np.frexp": "mantissa and exponent: no rule (the mantissa is differentiable almost everywhere)",
    "np.i0": "no rule yet (its derivative is the Bessel function i1)",
    "np.insert": "use np.concatenate of slices",
    "np.intersect1d": _SETS,
    "np.ix_": "builds index arrays; index with integer arrays instead of traced values",
    "np.ldexp": "no rule yet; use x * 2.0 ** e",
    "np.modf": "two outputs (fractional part differentiable); use x - np.trunc(x)",
    "np.nextafter": "no rule (the result moves with x by one ulp)",
    "np.place": _INPLACE,
    "np.polydiv": "no rule yet (polynomial division)",
    "np.polyfit": "no rule yet; solve the least-squares problem with np.linalg.solve",
    "np.put": _INPLACE,
    "np.put_along_axis": _INPLACE,
    "np.putmask": _INPLACE + " (np.where)",
    "np.resize": "no rule yet; use np.tile and reshape",
    "np.roots": "no rule (eigenvalues of the companion matrix)",
    "np.setdiff1d": _SETS,
    "np.setxor1d": _SETS,
    "np.trim_zeros": "the result's length depends on the values; slice instead",
    "np.union1d": _SETS,
    "np.unstack": "no rule yet; use x[i] or np.split",
    "np.unwrap": "no rule yet (the derivative is 1 away from the jumps); "
                 "write it with np.diff and np.cumsum",
}

#: NumPy functions whose results are piecewise constant (integers, bools,
#: types, dates, files), declared here because no rule family owns them.
NUMPY_CONSTANT = (
    "np.bitwise_count", "np.gcd", "np.lcm", "np.packbits", "np.unpackbits",
    "np.busday_count", "np.busday_offset", "np.is_busday", "np.datetime_as_string",
    "np.common_type", "np.min_scalar_type", "np.einsum_path", "np.linalg.matrix_rank",
    "np.save", "np.savez", "np.savez_compressed", "np.savetxt",
)

_NO_RULE = "differentiable; no rule yet: "
#: scipy.special ufuncs refused on traced arrays, by family: reason -> names.
SPECIAL = {
    _NO_RULE + "Bessel, Struve, Kelvin and Airy functions "
               "(derivatives are recurrences in the order)":
        "airy airye bei beip ber berp besselpoly hankel1 hankel1e hankel2 hankel2e i0 i0e i1 i1e "
        "it2i0k0 it2j0y0 it2struve0 itairy iti0k0 itj0y0 itmodstruve0 itstruve0 iv ive j0 j1 jn jv "
        "jve k0 k0e k1 k1e kei keip kelvin ker kerp kn kv kve modstruve struve y0 y1 yn yv yve",
    _NO_RULE + "probability distributions (CDFs, survival functions and their inverses)":
        "bdtr bdtrc bdtri bdtrik bdtrin btdtria btdtrib chdtr chdtrc chdtri chdtriv chndtr "
        "chndtridf chndtrinc chndtrix fdtr fdtrc fdtri fdtridfd gdtr gdtrc gdtria gdtrib gdtrix "
        "kolmogi kolmogorov nbdtr nbdtrc nbdtri nbdtrik nbdtrin ncfdtr ncfdtri ncfdtridfd "
        "ncfdtridfn ncfdtrinc nctdtr nctdtridf nctdtrinc nctdtrit ndtri ndtri_exp nrdtrimn "
        "nrdtrisd owens_t pdtr pdtrc pdtri pdtrik smirnov smirnovi stdtr stdtridf stdtrit tklmbda",
    _NO_RULE + "gamma, beta and zeta family":
        "beta betainc betaincc betainccinv betaincinv betaln binom gamma gammainc gammaincc "
        "gammainccinv gammaincinv loggamma poch rgamma zetac",
    _NO_RULE + "orthogonal polynomials":
        "eval_chebyc eval_chebys eval_chebyt eval_chebyu eval_gegenbauer eval_genlaguerre "
        "eval_hermite eval_hermitenorm eval_jacobi eval_laguerre eval_legendre eval_sh_chebyt "
        "eval_sh_chebyu eval_sh_jacobi eval_sh_legendre lpmv",
    _NO_RULE + "elliptic integrals and functions":
        "agm ellipe ellipeinc ellipj ellipk ellipkinc ellipkm1 elliprc elliprd elliprf elliprg "
        "elliprj",
    _NO_RULE + "hypergeometric, parabolic-cylinder, Mathieu and spheroidal wave functions":
        "hyp0f1 hyp1f1 hyp2f1 hyperu mathieu_a mathieu_b mathieu_cem mathieu_modcem1 "
        "mathieu_modcem2 mathieu_modsem1 mathieu_modsem2 mathieu_sem obl_ang1 obl_ang1_cv obl_cv "
        "obl_rad1 obl_rad1_cv obl_rad2 obl_rad2_cv pbdv pbvv pbwa pro_ang1 pro_ang1_cv pro_cv "
        "pro_rad1 pro_rad1_cv pro_rad2 pro_rad2_cv",
    _NO_RULE + "error, exponential and trigonometric integrals, Fresnel and related":
        "dawsn erfcinv erfcx erfi erfinv exp1 expi expn fresnel modfresnelm modfresnelp shichi "
        "sici spence voigt_profile wofz wright_bessel log_wright_bessel wrightomega",
    _NO_RULE + "elementary functions (use the NumPy equivalent where there is one)":
        "boxcox boxcox1p cbrt cosdg cosm1 cotdg entr exp10 exp2 expm1 exprel huber inv_boxcox "
        "inv_boxcox1p kl_div log1p powm1 pseudo_huber radian rel_entr sindg tandg",
}

#: scipy.special ufuncs whose results are piecewise constant.
SPECIAL_CONSTANT = ("round", "gammasgn")

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
    def_nondiff(*[f for f in map(resolve, NUMPY_CONSTANT) if f is not None])


def special_refusals():
    """name -> reason for every scipy.special ufunc refused above."""
    return {f"scipy.special.{n}": reason for reason, names in SPECIAL.items()
            for n in names.split()}


def _load_special():
    """Loader: scipy.special's refusals and constants, after its rules."""
    try:
        import scipy.special  # noqa: F401
    except ImportError:
        return
    for name, reason in special_refusals().items():
        _refuse(name, reason)
    register_nondiff([f for f in (resolve(f"scipy.special.{n}") for n in SPECIAL_CONSTANT)
                      if f is not None and f not in UFUNCS])


_register_numpy()
add_loader(_load_special)
