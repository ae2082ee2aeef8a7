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


def test_log_gets_a_line_per_quarter_not_carriage_returns(capsys):
    """Not a terminal (capsys): 30 quick steps give the 25/50/75/100% lines,
    each a line of its own, never a carriage return that would run them
    together in a log file."""
    with Progress("train", 30, fields={"loss": 1.0}) as bar:
        for _ in range(30):
            bar.advance(loss=0.5)
    err = capsys.readouterr().err
    assert "\r" not in err and err.endswith("\n")
    lines = err.splitlines()
    assert [line.split(":")[1].split()[0] for line in lines] == ["8/30", "15/30", "23/30",
                                                                 "30/30"]


def test_log_lines_are_at_most_one_per_interval_between_quarters(monkeypatch, capsys):
    from tapestry import progress
    clock = iter(range(0, 10_000, 2))  # each reading 2 s after the previous one
    monkeypatch.setattr(progress.time, "perf_counter", lambda: float(next(clock)))
    with Progress("slow", 100) as bar:
        for _ in range(20):   # 40 s, all inside the first quarter
            bar.advance()
    lines = capsys.readouterr().err.splitlines()
    # one line per LOG_INTERVAL_S (5 s) of 2 s steps = every 3rd step, then close's line
    assert 6 <= len(lines) <= 9 and lines[-1].startswith("slow: 20/100")
    assert all("\r" not in line for line in lines)


def test_log_close_does_not_repeat_the_last_line(capsys):
    with Progress("work", 4) as bar:
        bar.advance()          # 25%: written; close has nothing new to say
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("work: 1/4")


def test_terminal_without_rich_rewrites_one_line(monkeypatch):
    import io

    from tapestry import progress

    class Tty(io.StringIO):
        def isatty(self):
            return True
    err = Tty()
    monkeypatch.setattr(progress.sys, "stderr", err)
    monkeypatch.setattr(progress, "_rich_bar", lambda *a: None)
    with Progress("train", 3) as bar:
        for _ in range(3):
            bar.advance()
    text = err.getvalue()
    assert text.startswith("\rtrain: 1/3") and text.endswith("\n") and text.count("\n") == 1
