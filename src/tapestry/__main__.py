"""``python -m tapestry``: the command line of :mod:`tapestry.cli`."""
import sys

from .cli import main

if __name__ == "__main__":  # importing the module (tools, tests) runs nothing
    sys.exit(main())
