"""The replay report: plots of every metric over time, alert spans, final values.

A report is a function over plain rows, never over metric objects: the rows of
``metrics.jsonl`` (``{"n", "t", "segment", "values": {name: float or null}}``) and of
``alerts.jsonl`` (``{"rule", "state", "n", "t", "value", "segment"}``), the schemas of
DESIGN.md section 6. :func:`write_report` draws one PNG per metric (one line per
segment, x = events counted), shades the spans in which an alert was firing, and
writes ``report.html`` beside the PNGs with the final values and the alert list.

matplotlib is the optional extra ``streameval[report]``; it is imported only when a
report is drawn, and drawn with the Agg canvas through matplotlib's object API (no
``pyplot``, so no global backend state is touched). :func:`final_values`,
:func:`firing_spans` and :func:`read_jsonl` need only the standard library.

Imports: the standard library, and matplotlib (lazily, when a report is drawn); nothing
from streameval, so a report can be drawn from the output files alone.

>>> rows = [{"n": 10, "t": None, "segment": None, "values": {"recall": 0.5}},
...         {"n": 20, "t": None, "segment": None, "values": {"recall": 0.75}}]
>>> final_values(rows)
{None: {'n': 20, 't': None, 'values': {'recall': 0.75}}}
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from pathlib import Path

__all__ = [
    "write_report",
    "report_from_dir",
    "final_values",
    "firing_spans",
    "metric_names",
    "read_jsonl",
    "FIGSIZE",
    "DPI",
]

#: size of each metric's plot, in inches; with :data:`DPI` the PNGs are 900 x 330 px
FIGSIZE = (9.0, 3.3)
#: resolution of the PNGs (pixels per inch)
DPI = 100

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


# ---------------------------------------------------------------------- plain rows


def read_jsonl(path):
    """Return the JSON objects of a JSONL file, one per non-blank line (``[]`` if absent).

    >>> read_jsonl("/nonexistent/metrics.jsonl")
    []
    """
    path = Path(path)
    if not path.exists():
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
    return out


def metric_names(metric_rows):
    """The metric names in the rows, in order of first appearance.

    >>> metric_names([{"values": {"auc": 0.5}}, {"values": {"auc": 0.6, "ap": 0.2}}])
    ['auc', 'ap']
    """
    names = {}
    for row in metric_rows:
        for name in row.get("values", {}):
            names.setdefault(name, None)
    return list(names)


def final_values(metric_rows):
    """The last row of each segment: ``{segment: {"n", "t", "values"}}``, in order
    (plus ``"late"`` when the rows count late events).

    A value that a later row leaves out (a tumbling window between closes, say) keeps
    its last reported value; ``None`` stays ``None`` (undefined, e.g. no positives).

    >>> final_values([{"n": 5, "t": 1.0, "segment": "eu", "values": {"ap": None}},
    ...               {"n": 9, "t": 2.0, "segment": "us", "values": {"ap": 0.5}}])
    {'eu': {'n': 5, 't': 1.0, 'values': {'ap': None}}, 'us': {'n': 9, 't': 2.0, 'values': {'ap': 0.5}}}
    """
    out = {}
    for row in metric_rows:
        seg = _segment_key(row.get("segment"))
        last = out.setdefault(seg, {"n": None, "t": None, "values": {}})
        last["n"] = row.get("n")
        last["t"] = row.get("t")
        last["values"].update(row.get("values", {}))
        if "late" in row:  # windows by period: events refused as late, so far
            last["late"] = dict(row["late"])
    return out


def firing_spans(alert_rows, end_n=None):
    """The event ranges in which each alert was firing: ``[(rule, segment, n0, n1)]``.

    A span opens at a ``firing`` transition and closes at the next ``resolved`` one of
    the same rule and segment; one still open at the end of the rows closes at
    ``end_n`` (``None`` when not given).

    >>> firing_spans([{"rule": "r", "state": "pending", "n": 5, "segment": None},
    ...               {"rule": "r", "state": "firing", "n": 10, "segment": None},
    ...               {"rule": "r", "state": "resolved", "n": 30, "segment": None},
    ...               {"rule": "r", "state": "firing", "n": 50, "segment": None}], end_n=60)
    [('r', None, 10, 30), ('r', None, 50, 60)]
    """
    open_at = {}
    spans = []
    for row in alert_rows:
        key = (row.get("rule"), _segment_key(row.get("segment")))
        state = row.get("state")
        if state == "firing":
            open_at.setdefault(key, row.get("n"))
        elif state == "resolved" and key in open_at:
            spans.append((key[0], key[1], open_at.pop(key), row.get("n")))
    for key, n0 in open_at.items():
        spans.append((key[0], key[1], n0, end_n))
    spans.sort(key=lambda s: (s[2] if s[2] is not None else -1, str(s[0]), str(s[1])))
    return spans


def _segment_key(seg):
    # JSON objects keep segment values hashable (str, number, bool or None)
    if isinstance(seg, (list, dict)):
        return json.dumps(seg, sort_keys=True)
    return seg


def _fmt(value, digits=6):
    if value is None:
        return "undefined"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "undefined"
        return f"{value:.{digits}g}"
    return str(value)


def _seg_text(seg):
    return "" if seg is None else str(seg)


def _safe_filename(name, taken):
    stem = _SAFE.sub("_", str(name)).strip("._") or "metric"
    candidate, i = stem, 2
    while candidate.lower() in taken:
        candidate, i = f"{stem}_{i}", i + 1
    taken.add(candidate.lower())
    return f"{candidate}.png"


# ------------------------------------------------------------------------ drawing


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the report needs matplotlib: pip install 'streameval[report]' "
            "(or pass --no-report to skip the report)"
        ) from None
    return Figure, FigureCanvasAgg


def _plot_metric(name, metric_rows, spans, end_n, path, Figure, Canvas):
    """Draw one metric, one line per segment, firing spans shaded; save as PNG."""
    series = {}
    for row in metric_rows:
        values = row.get("values", {})
        if name not in values:
            continue
        v = values[name]
        xs, ys = series.setdefault(_segment_key(row.get("segment")), ([], []))
        xs.append(row.get("n"))
        ys.append(math.nan if v is None else float(v))

    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    Canvas(fig)
    ax = fig.add_subplot()
    for seg, (xs, ys) in series.items():
        label = "all events" if seg is None else f"segment {seg}"
        marker = "o" if len(xs) <= 30 else None
        ax.plot(xs, ys, linewidth=1.4, marker=marker, markersize=3, label=label)

    rules = sorted({str(s[0]) for s in spans})
    colours = ["tab:red", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive"]
    colour_of = {r: colours[i % len(colours)] for i, r in enumerate(rules)}
    labelled = set()
    for rule, seg, n0, n1 in spans:
        rule = str(rule)
        label = None
        if (rule, seg) not in labelled:
            labelled.add((rule, seg))
            label = f"alert {rule} firing" + ("" if seg is None else f" ({seg})")
        right = n1 if n1 is not None else end_n
        if n0 is None or right is None:
            continue
        if right <= n0:  # fired and resolved at one evaluation: still show a sliver
            right = n0 + max(1, (end_n or n0) // 500)
        ax.axvspan(n0, right, color=colour_of[rule], alpha=0.15, linewidth=0, label=label)

    ax.set_title(name)
    if str(name).endswith("p_value"):  # drift p-values: what matters is 0.01 vs 1e-6
        finite = [y for _, ys in series.values() for y in ys if y == y]
        if finite and min(finite) > 0:
            ax.set_yscale("log")
    ax.set_xlabel("events")
    ax.grid(True, alpha=0.3)
    if end_n:
        ax.set_xlim(left=0, right=end_n)
    if series or labelled:
        ax.legend(loc="best", fontsize="small", framealpha=0.8)
    fig.tight_layout()
    fig.savefig(path, format="png")


# -------------------------------------------------------------------------- report


def write_report(metric_rows, alert_rows, out_dir, *, title="streameval report", summary=None):
    """Write ``report.html`` and one PNG per metric into ``out_dir``; return the HTML path.

    Runtime complexity: `O(m + a)` for ``m`` metric rows and ``a`` alert rows, plus
    the drawing (one figure per metric).

    Parameters
    ----------
    metric_rows : iterable of dict
        Rows of ``metrics.jsonl``: ``{"n", "t", "segment", "values": {name: float or None}}``.
    alert_rows : iterable of dict
        Rows of ``alerts.jsonl``: ``{"rule", "state", "n", "t", "value", "segment"}``.
    out_dir : str or Path
        Directory for ``report.html`` and the PNGs (created if missing).
    title : str
        Heading of the page.
    summary : dict, optional
        Extra facts shown at the top, e.g. ``{"log": ..., "events": ..., "rejected": ...}``.

    Raises
    ------
    ImportError
        If matplotlib (``streameval[report]``) is not installed.
    """
    metric_rows = list(metric_rows)
    alert_rows = list(alert_rows)
    Figure, Canvas = _matplotlib()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    ns = [r.get("n") for r in metric_rows if isinstance(r.get("n"), (int, float))]
    ns += [r.get("n") for r in alert_rows if isinstance(r.get("n"), (int, float))]
    end_n = max(ns) if ns else None
    spans = firing_spans(alert_rows, end_n=end_n)
    names = metric_names(metric_rows)

    taken = set()
    images = []
    for name in names:
        filename = _safe_filename(name, taken)
        _plot_metric(name, metric_rows, spans, end_n, out_dir / filename, Figure, Canvas)
        images.append((name, filename))

    finals = final_values(metric_rows)
    page = _html(title, summary or {}, names, finals, alert_rows, spans, images)
    path = out_dir / "report.html"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    return path


def report_from_dir(out_dir, *, title="streameval report", summary=None):
    """Read ``metrics.jsonl`` and ``alerts.jsonl`` in ``out_dir`` and write the report there."""
    out_dir = Path(out_dir)
    return write_report(
        read_jsonl(out_dir / "metrics.jsonl"),
        read_jsonl(out_dir / "alerts.jsonl"),
        out_dir,
        title=title,
        summary=summary,
    )


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1000px; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.7em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f3f3f3; }
td.firing { color: #b00; font-weight: bold; }
img { display: block; margin: 0.5em 0 1.5em; max-width: 100%; }
.none { color: #777; }
"""


def _html(title, summary, names, finals, alert_rows, spans, images):
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
    ]
    if summary:
        parts.append("<table>")
        for key, value in summary.items():
            parts.append(f"<tr><th>{e(str(key))}</th><td>{e(_fmt(value))}</td></tr>")
        parts.append("</table>")

    parts.append("<h2>Final values</h2>")
    if not finals:
        parts.append('<p class="none">No metric rows.</p>')
    else:
        segs = list(finals)
        parts.append("<table><tr><th>metric</th>")
        for seg in segs:
            head = "all events" if seg is None else f"segment {seg}"
            parts.append(f"<th>{e(head)}</th>")
        parts.append("</tr><tr><td>events (n)</td>")
        for seg in segs:
            parts.append(f"<td>{e(_fmt(finals[seg]['n']))}</td>")
        parts.append("</tr>")
        for name in names:
            parts.append(f"<tr><td>{e(str(name))}</td>")
            for seg in segs:
                value = finals[seg]["values"].get(name)
                parts.append(f"<td>{e(_fmt(value))}</td>")
            parts.append("</tr>")
        parts.append("</table>")

    parts.append("<h2>Alerts</h2>")
    if not alert_rows:
        parts.append('<p class="none">No alert fired.</p>')
    else:
        parts.append(f"<p>{len(spans)} firing span(s), {len(alert_rows)} transition(s).</p>")
        parts.append(
            "<table><tr><th>rule</th><th>state</th><th>n</th><th>t</th>"
            "<th>value</th><th>segment</th></tr>"
        )
        for row in alert_rows:
            state = str(row.get("state"))
            cls = ' class="firing"' if state == "firing" else ""
            parts.append(
                f"<tr><td>{e(str(row.get('rule')))}</td><td{cls}>{e(state)}</td>"
                f"<td>{e(_fmt(row.get('n')))}</td><td>{e(_fmt(row.get('t'), 12))}</td>"
                f"<td>{e(_fmt(row.get('value')))}</td><td>{e(_seg_text(row.get('segment')))}</td></tr>"
            )
        parts.append("</table>")

    parts.append("<h2>Metrics over time</h2>")
    if not images:
        parts.append('<p class="none">No metric rows.</p>')
    for name, filename in images:
        parts.append(f"<h3>{e(str(name))}</h3>")
        parts.append(f'<img src="{e(filename)}" alt="{e(str(name))} over time">')
    parts.append("</body></html>\n")
    return "\n".join(parts)
