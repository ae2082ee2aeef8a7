"""``python -m tapestry``: the command line of :mod:`tapestry.cli`."""
import sys

from .cli import main

sys.exit(main())
