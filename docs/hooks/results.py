"""mkdocs hook: benchmark results into pages, from ``benchmarks/results/*.json``.

A page line ``<!-- results: bench_windows -->`` becomes that run's facts (command, date,
machine, versions, parameters), its tables and its plots; ``<!-- results: bench_alerts
tables=t1,t2 plots=no -->`` keeps the named tables only; ``<!-- headline -->`` is the
README's table of headline figures. A missing result file or table fails the build.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import _report  # noqa: E402

MARK = re.compile(r"^<!-- (results: (?P<name>\w+)(?P<opts>[^>]*)|headline) -->$", re.M)


def _render(m):
    if m.group(0) == "<!-- headline -->":
        return _report.headline_table({name: _report.load(name) for name, _ in _report.HEADLINE})
    result = _report.load(m.group("name"))
    opts = dict(kv.split("=", 1) for kv in m.group("opts").split())
    if "tables" in opts:
        keys = opts["tables"].split(",")
        by_key = {t["key"]: t for t in result["tables"]}
        missing = [k for k in keys if k not in by_key]
        if missing:
            raise KeyError(f"{m.group('name')}.json has no table {missing[0]!r}; "
                           f"it has {sorted(by_key)}")
        result = dict(result, tables=[by_key[k] for k in keys])
    return _report.render_result(result, level=int(opts.get("level", 3)),
                                 plots=opts.get("plots", "yes") != "no")


def on_page_markdown(markdown, page, config, files):
    return MARK.sub(_render, markdown)
