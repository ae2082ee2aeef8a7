"""The jit_parallel demo: every way of writing the sum agrees with the plain call."""
from tapestry.examples import jit_parallel


def test_jit_parallel_demo_agrees_with_the_plain_call(capsys):
    jit_parallel.main(quick=True)
    out = capsys.readouterr().out
    assert "parallel_sum(jit(group_logp)), threads" in out
    assert "jit(value_and_grad(parallel_sum(..., threads)))" in out
