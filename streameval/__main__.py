"""``python -m streameval``: the same as the ``streameval`` command.

It imports :mod:`streameval.cli` only.
"""

import sys

from streameval.cli import main

if __name__ == "__main__":
    sys.exit(main())
