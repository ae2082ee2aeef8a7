"""Forward mode on the program battery: ``tp.jvp`` of every program along a
random direction against the float64 central difference
(tests/programs/runner.py, ``classify_forward``).  Programs listed in
test_user_programs.py's tables are judged there; forward mode must not be
wrong or crash where reverse mode is right, and a forward-only refusal is
listed here, with the same "now correct" tightening."""
import pytest

from programs import load
from programs.runner import CORRECT, REFUSED, classify_forward
from test_user_programs import EXPECTED_BROKEN, EXPECTED_REFUSED, REFUSED_BY_DESIGN

PROGRAMS = load()

#: Programs forward mode refuses where reverse mode differentiates them.
#: Empty: complex values (FFTs, phasors, complex solves: 33 programs listed
#: here before) are differentiated in forward mode as in reverse mode.
FORWARD_REFUSES_COMPLEX = frozenset()


@pytest.fixture(scope="module")
def outcomes():
    return {name: classify_forward(prog) for name, prog in PROGRAMS.items()}


def _verdict(name, o):
    detail = o.reason + (f" [{o.where}]" if o.where else "")
    if name in FORWARD_REFUSES_COMPLEX:
        if o.status == CORRECT:
            return "now correct in forward mode: remove it from FORWARD_REFUSES_COMPLEX"
        return "" if o.status == REFUSED else f"{o.status}: {detail}"
    if name in EXPECTED_BROKEN:
        return ""                                  # diagnosed with reverse mode
    if name in EXPECTED_REFUSED or name in REFUSED_BY_DESIGN:
        return "" if o.status in (REFUSED, CORRECT) else f"{o.status}: {detail}"
    return "" if o.status == CORRECT else f"{o.status}: {detail}"


def test_forward_table_names_existing_programs():
    assert sorted(FORWARD_REFUSES_COMPLEX - set(PROGRAMS)) == []


def test_forward_mode_on_the_battery(outcomes):
    bad = [f"{n}: {v}" for n, o in sorted(outcomes.items()) if (v := _verdict(n, o))]
    assert not bad, f"{len(bad)} program(s) off their expected forward outcome:\n" + "\n".join(bad)
