"""Tables for the demos and ``tapestry bench``: rich's table when rich is
installed (the ``cli`` extra), else plain text in aligned columns, so a
core-only install prints the same rows (never raw dicts)."""
from __future__ import annotations

import sys

__all__ = ["print_table"]


def print_table(title, columns, rows, file=None):
    """Print ``rows`` (sequences of strings, one per column) under
    ``columns``; ``title`` above them."""
    file = sys.stdout if file is None else file
    rows = [[str(c) for c in r] for r in rows]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        file.write(plain_table(title, columns, rows))
        return
    t = Table(title=title)
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*r)
    # Piped output (CI logs, files) would otherwise wrap at 80 columns.
    Console(file=file, width=None if file.isatty() else 180).print(t)


def plain_table(title, columns, rows):
    """``title``, then the header, a rule and the rows, each column padded
    to its widest cell (text left-aligned, numbers right-aligned)."""
    widths = [max([len(c), *(len(r[k]) for r in rows)]) for k, c in enumerate(columns)]

    def line(cells):
        return "  ".join(c.rjust(w) if _numeric(c) else c.ljust(w)
                         for c, w in zip(cells, widths)).rstrip()
    out = [title, line(columns), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out) + "\n"


def _numeric(cell):
    head = cell.split()[0] if cell.split() else ""
    try:
        float(head.replace(",", "").rstrip("x"))
    except ValueError:
        return False
    return True
