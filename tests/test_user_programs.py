"""Realistic NumPy programs (tests/programs/) differentiated by tapestry and
checked against central finite differences in float64.

Every program ends in one of four outcomes (tests/programs/runner.py):
CORRECT, REFUSED (a tapestry NotImplementedError/TypeError naming the
operation), SILENT-WRONG or CRASH.  The test fails on any SILENT-WRONG or
CRASH, and on any refusal, unless the program is listed below with the
reason; a listed program whose outcome improved fails too ("now correct:
remove it from ..."), so the tables shrink as rules land and never hide a fix.
Each entry says why; ``cd tests && python -m programs [name]`` prints the
current outcome of every program with its error and the tapestry frame.
"""
import pytest

from programs import load
from programs.runner import CORRECT, CRASH, REFUSED, WRONG, classify

PROGRAMS = load()

#: Refused today by name: a branch adds the rule, or no one has yet (reason given).
EXPECTED_REFUSED = {
    # scipy.special ufuncs beyond the common few: rules land with the special branch
}

#: Refused by design: NumPy gives tapestry no hook, or the operation writes in place.
REFUSED_BY_DESIGN = {
    "rnn_np_array_of_list": "np.array of traced values does not dispatch (NEP 18): np.stack / tnp.array",
    "np_array_from_traced_scalars": "np.array of traced values does not dispatch: np.stack / tnp.array",
    "asarray_at_function_entry": "np.asarray does not dispatch: tnp.asarray",
    "astype_and_copy_chain": "np.ascontiguousarray does not dispatch",
    "euler_writes_into_buffer": "writing a traced value into a plain np.zeros buffer",
    "zeros_then_fill_rows": "writing a traced value into a plain np.zeros buffer",
    "numpy_zeros_accumulator_iadd": "acc = np.zeros(3); acc += traced writes into the plain array",
    "full_like_traced_fill": "np.full_like(plain, traced) writes through np.copyto",
    "math_module_on_elements": "math.exp/float() of a traced value",
    "gmm_scipy_logsumexp": "scipy.special.logsumexp converts its input: tnp.logsumexp",
    "scipy_special_softmax": "scipy.special.softmax converts its input: tnp.softmax",
    "scipy_stats_norm_logpdf": "scipy.stats converts its inputs",
    "gp_scipy_linalg_cho_solve": "scipy.linalg converts its inputs: tapestry.scipy.linalg",
    "return_python_float": "float() of the traced result",
    "generator_permutation_of_traced": "np.random.Generator.permutation converts its input",
    "energy_returned_as_complex_dtype": "a complex-typed result (0j imaginary part) is refused, as in JAX",
}

#: Silently wrong or crashing today.  Each is diagnosed in the report; the
#: owner named here fixes it (or it is an open bug no branch owns yet).
EXPECTED_BROKEN = {
    "rbf_energy_sqrt_pairwise_with_diagonal": "np.sqrt at an exact 0 on the diagonal: inf * 0 = nan "
                                              "(JAX and PyTorch give nan too; np.linalg.norm is guarded)",
}

_TABLES = {"EXPECTED_REFUSED": EXPECTED_REFUSED, "REFUSED_BY_DESIGN": REFUSED_BY_DESIGN,
           "EXPECTED_BROKEN": EXPECTED_BROKEN}


@pytest.fixture(scope="module")
def outcomes():
    """Every program classified once (the battery takes a few seconds)."""
    return {name: classify(prog) for name, prog in PROGRAMS.items()}


def _verdict(name, o):
    """'' if the outcome is what the tables say, else a one-line reason."""
    table = next((t for t, d in _TABLES.items() if name in d), None)
    detail = f"{o.reason}" + (f" [{o.where}]" if o.where else "")
    if table is None:
        return "" if o.status == CORRECT else f"{o.status}: {detail}"
    if o.status == CORRECT:
        return f"now correct: remove it from {table}"
    if table == "EXPECTED_BROKEN":
        if o.status == REFUSED:
            return f"now refused by name: move it from EXPECTED_BROKEN to EXPECTED_REFUSED ({detail})"
        return ""
    return "" if o.status == REFUSED else f"{o.status} (listed in {table}): {detail}"


def test_tables_name_existing_programs():
    listed = [n for d in _TABLES.values() for n in d]
    assert sorted(set(listed) - set(PROGRAMS)) == []
    assert len(listed) == len(set(listed)), "a program is listed in two tables"


def test_battery_size():
    assert len(PROGRAMS) >= 120


def test_no_silent_wrong_or_crash(outcomes):
    """The whole battery in one failure message: one line per program."""
    bad = [f"{n}: {v}" for n, o in sorted(outcomes.items()) if (v := _verdict(n, o))]
    assert not bad, f"{len(bad)} program(s) off their expected outcome:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program(name, outcomes):
    verdict = _verdict(name, outcomes[name])
    assert not verdict, f"{name}: {verdict}"


def test_unlisted_outcomes_are_the_four_kinds(outcomes):
    assert {o.status for o in outcomes.values()} <= {CORRECT, REFUSED, WRONG, CRASH}
