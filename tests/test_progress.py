"""The one progress display: a plain line on stderr when not on a terminal."""
from tapestry.progress import Progress


def test_plain_line_counts_to_the_end(capsys):
    with Progress("train", 3, fields={"loss": 1.0}) as bar:
        for k in range(3):
            bar.advance(loss=0.5 / (k + 1))
    err = capsys.readouterr().err
    assert "train: 3/3" in err and err.endswith("\n") and "loss 0.1667" in err


def test_disabled_progress_is_silent(capsys):
    with Progress("x", 5, enabled=False) as bar:
        for _ in range(5):
            bar.advance()
    assert bar.done == 5 and capsys.readouterr().err == ""


def test_interrupted_progress_ends_its_line(capsys):
    with Progress("work", 10) as bar:
        bar.advance(2)
    assert capsys.readouterr().err.endswith("\n")
