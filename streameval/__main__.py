"""``python -m streameval``: the same as the ``streameval`` command."""

import sys

from streameval.cli import main

if __name__ == "__main__":
    sys.exit(main())
