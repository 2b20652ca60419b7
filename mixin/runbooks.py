"""Write the mixin's alerting rules with their runbook links under your documentation's
address.

Every alert's ``runbook_url`` in ``prometheus_alerts.yaml`` is
``<prefix>guides/monitoring/#<alert name in lower case>``: a section of the monitoring
guide. The committed file uses :data:`DEFAULT_PREFIX`; this script writes it with
another prefix (and changes nothing else)::

    python mixin/runbooks.py https://docs.example.org/streameval/ > prometheus_alerts.yaml

``tests/test_mixin.py`` checks that every link has this shape, names a section of the
guide, and that a rewrite changes only the links.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: the prefix of every runbook link in the committed ``prometheus_alerts.yaml``
DEFAULT_PREFIX = "https://streameval.example/"
#: where the runbooks are, under the prefix
GUIDE_PATH = "guides/monitoring/"
ALERTS = Path(__file__).resolve().parent / "prometheus_alerts.yaml"


def with_prefix(text: str, prefix: str) -> str:
    """``text`` (the alerting rules) with every runbook link under ``prefix``.

    Raises ``ValueError`` for a prefix that is not an http(s) URL ending in ``/``, or
    when a ``runbook_url`` line does not start with :data:`DEFAULT_PREFIX`.
    """
    if not re.fullmatch(r"https?://[^\s\"'#?]+/", prefix):
        raise ValueError(f"prefix {prefix!r}: must be an http(s) URL ending in '/'")
    line = re.compile(r"^(\s*runbook_url: )(\S+)$", re.M)

    def swap(m):
        url = m.group(2)
        if not url.startswith(DEFAULT_PREFIX):
            raise ValueError(f"runbook_url {url!r} does not start with {DEFAULT_PREFIX!r}")
        return m.group(1) + prefix + url[len(DEFAULT_PREFIX):]

    return line.sub(swap, text)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python mixin/runbooks.py PREFIX > prometheus_alerts.yaml",
              file=sys.stderr)
        return 2
    try:
        sys.stdout.write(with_prefix(ALERTS.read_text(), args[0]))
    except ValueError as e:
        print(f"runbooks.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
