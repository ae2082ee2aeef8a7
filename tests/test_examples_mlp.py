from tapestry.examples import mlp


def test_mlp_demo_loss_goes_down(capsys):
    first, last = mlp.main(quick=True, steps=60)
    assert last < 0.8 * first
    assert "loss" in capsys.readouterr().out
