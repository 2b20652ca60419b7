"""``python -m streameval.service``: the same as ``streameval serve``.

It imports :mod:`streameval.service` only.
"""

import sys

from streameval.service import main

if __name__ == "__main__":
    sys.exit(main())
