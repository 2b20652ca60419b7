"""``python -m streameval.service``: the same as ``streameval serve``."""

import sys

from streameval.service import main

if __name__ == "__main__":
    sys.exit(main())
