"""The jit demo trains, and checks each reported step against the uncompiled call."""
from tapestry.examples import jit_training


def test_jit_demo_trains_and_replays(capsys):
    final = jit_training.main(quick=True)
    out = capsys.readouterr().out
    assert final < 0.05
    assert "traces: 1 for" in out and "2 traces" in out
