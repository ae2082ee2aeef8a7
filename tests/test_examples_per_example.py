"""The vmap demo (tapestry demo vmap): per-example gradients equal a loop
of grad calls (the demo raises otherwise), and DP-SGD's clipped noisy mean
lowers the loss of the two-cloud problem."""
from tapestry.examples import per_example


def test_per_example_demo_runs_and_learns(capsys):
    final = per_example.main(quick=True)
    out = capsys.readouterr().out
    first = float(out.split("loss ")[1].split()[0])
    assert final < first
