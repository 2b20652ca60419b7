"""The replay report: plots of every metric over time, alert spans, final values.

A report is a function over plain rows, never over metric objects: the rows of
``metrics.jsonl`` (``{"n", "t", "segment", "values": {name: float or null}}``, a
segment's row with ``"stream_n"`` too) and of ``alerts.jsonl`` (``{"rule", "state",
"n", "t", "value", "segment"}``), the schemas of DESIGN.md section 6.
:func:`write_report` draws one PNG per metric (:func:`plot_metric`) and writes
``report.html`` beside the PNGs with the final values and the alert list.

A plot has one line per segment against the stream's events counted (a row's
``stream_n``, or its ``n`` where it has none, so that segment lines line up with the
alerts' ``n``); the metric's name on the y axis; each rule's firing spans shaded and
its pending spans hatched, in one colour per rule and segment (the segment line's
colour for the first rule of that segment); and a dashed line at each fixed
threshold of a rule on that metric (``metric op value`` rules and drift rules' ``p <
p_below`` on ``drift.<name>.p_value``). Thresholds are read from the rule tables
passed as ``rules`` (as in a config's ``rules``, or :meth:`Rule.to_config`) and from
the alert transitions' rule names when those are in the rule grammar (``recall@6h <
0.8``), so a report drawn from the output files alone still shows them. Tables give
event times as UTC dates and each segment's own ``n``.

matplotlib is the optional extra ``streameval[report]``; it is imported only when a
report is drawn, and drawn with the Agg canvas through matplotlib's object API (no
``pyplot``, so no global backend state is touched). :func:`final_values`,
:func:`firing_spans`, :func:`pending_spans` and :func:`read_jsonl` need only the
standard library.

Imports: the standard library, and matplotlib (lazily, when a report is drawn); nothing
from streameval, so a report can be drawn from the output files alone.

>>> rows = [{"n": 10, "t": None, "segment": None, "values": {"recall": 0.5}},
...         {"n": 20, "t": None, "segment": None, "values": {"recall": 0.75}}]
>>> final_values(rows)
{None: {'n': 20, 't': None, 'values': {'recall': 0.75}}}
"""

from __future__ import annotations

import html
import io
import json
import math
import os
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path

__all__ = [
    "write_report",
    "report_from_dir",
    "plot_metric",
    "final_values",
    "firing_spans",
    "pending_spans",
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

# rule names in the grammar of streameval.alerts.parse_rule that carry a fixed threshold
_NAME = r"[A-Za-z_][A-Za-z0-9_.@:\-]*"
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RE_THRESHOLD = re.compile(
    rf"^\s*({_NAME})\s*(<=|>=|<|>)\s*({_NUM})(?:\s+with\s+confidence\s+({_NUM}))?\s*$")
_RE_DRIFT = re.compile(rf"^\s*({_NAME})\s+drift\s+p\s*<\s*({_NUM})(?:\s+\((rise|any)\))?\s*$")

# line and span colours: tab10 (matplotlib's default cycle), then darker extras
_PALETTE = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
            "tab:pink", "tab:gray", "tab:olive", "tab:cyan",
            "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")


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
    return _spans(alert_rows, end_n, "firing", ("resolved",))


def pending_spans(alert_rows, end_n=None):
    """The event ranges in which each alert was pending: ``[(rule, segment, n0, n1)]``.

    A span opens at a ``pending`` transition and closes at the next ``firing`` or
    ``resolved`` one of the same rule and segment; one still open at the end of the
    rows closes at ``end_n`` (``None`` when not given).

    >>> pending_spans([{"rule": "r", "state": "pending", "n": 5, "segment": None},
    ...                {"rule": "r", "state": "firing", "n": 10, "segment": None},
    ...                {"rule": "r", "state": "resolved", "n": 30, "segment": None},
    ...                {"rule": "r", "state": "pending", "n": 50, "segment": None}], end_n=60)
    [('r', None, 5, 10), ('r', None, 50, 60)]
    """
    return _spans(alert_rows, end_n, "pending", ("firing", "resolved"))


def _spans(alert_rows, end_n, opening, closing):
    open_at = {}
    spans = []
    for row in alert_rows:
        key = (row.get("rule"), _segment_key(row.get("segment")))
        state = row.get("state")
        if state == opening:
            open_at.setdefault(key, row.get("n"))
        elif state in closing and key in open_at:
            spans.append((key[0], key[1], open_at.pop(key), row.get("n")))
    for key, n0 in open_at.items():
        spans.append((key[0], key[1], n0, end_n))
    spans.sort(key=lambda s: (s[2] if s[2] is not None else -1, str(s[0]), str(s[1])))
    return spans


def _x(row):
    """Where a metrics row sits on the x axis: the stream's events counted at its
    evaluation (``stream_n`` in a segment's row, ``n`` in the whole stream's)."""
    return row.get("stream_n", row.get("n"))


def _num_text(x):
    # a number as the rule grammar writes it (0.8, 5000, 1e-05): as in rule names
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


def _threshold_of(rule):
    """``(metric, threshold, rule name)`` of a rule with a fixed threshold, else None.

    ``rule`` is a rule table (``{"metric", "op", "value"}``, ``{"drift", "p_below"}``
    or ``{"rule": "<string>"}``, each with an optional ``"name"``), a rule string, or
    an object with ``to_config()`` returning such a table.
    """
    if hasattr(rule, "to_config"):
        rule = rule.to_config()
    name = None
    if isinstance(rule, dict):
        name = rule.get("name")
        if isinstance(rule.get("rule"), str):
            rule = rule["rule"]
    if isinstance(rule, str):
        m = _RE_THRESHOLD.match(rule)
        if m:
            metric, op, value, conf = m.group(1), m.group(2), float(m.group(3)), m.group(4)
            table = {"metric": metric, "op": op, "value": value}
            if conf is not None:
                table["confidence"] = float(conf)
        else:
            m = _RE_DRIFT.match(rule)
            if not m:
                return None
            table = {"drift": m.group(1), "p_below": float(m.group(2))}
            if m.group(3):
                table["direction"] = m.group(3)
        return _threshold_of({**table, "name": name} if name else table)
    if not isinstance(rule, dict):
        return None
    try:
        if "op" in rule and "value" in rule and "metric" in rule:
            value = float(rule["value"])
            default = f"{rule['metric']} {rule['op']} {_num_text(value)}"
            if rule.get("confidence") is not None:
                default += f" with confidence {_num_text(float(rule['confidence']))}"
            return str(rule["metric"]), value, str(name or default)
        if "drift" in rule and "p_below" in rule:
            value = float(rule["p_below"])
            default = f"{rule['drift']} drift p < {_num_text(value)}"
            if rule.get("direction", "drop") != "drop":
                default += f" ({rule['direction']})"
            return f"drift.{rule['drift']}.p_value", value, str(name or default)
    except (TypeError, ValueError):
        return None
    return None


def _thresholds(alert_rows, rules):
    """``{metric: [(rule name, threshold)]}`` from the rule tables and from the rule
    names of the alert transitions (those in the rule grammar), without repeats."""
    out = {}
    found = [_threshold_of(r) for r in (rules or ())]
    names = dict.fromkeys(r["rule"] for r in alert_rows if isinstance(r.get("rule"), str))
    found += [_threshold_of(name) for name in names]
    for item in found:
        if item is not None:
            metric, value, name = item
            lines = out.setdefault(metric, [])
            if (name, value) not in lines:
                lines.append((name, value))
    return out


def _colours(metric_rows, alert_rows):
    """Colours of the segment lines and of each ``(rule, segment)``'s alert spans.

    Segments get the palette in order of first appearance. The first rule that alerts
    on a segment with a line takes that line's colour; every other ``(rule,
    segment)`` takes the next colour that no line and no other span uses.
    """
    seg_colour = {}
    for row in metric_rows:
        seg = _segment_key(row.get("segment"))
        if seg not in seg_colour:
            seg_colour[seg] = _PALETTE[len(seg_colour) % len(_PALETTE)]
    used = set(seg_colour.values())
    claimed = set()
    span_colour = {}
    spare = (c for c in _PALETTE if c not in used)
    for row in alert_rows:
        key = (str(row.get("rule")), _segment_key(row.get("segment")))
        if key in span_colour:
            continue
        if key[1] in seg_colour and key[1] not in claimed:
            claimed.add(key[1])
            span_colour[key] = seg_colour[key[1]]
        else:
            colour = next(spare, None)
            if colour is None:  # palette spent: cycle through it again
                colour = _PALETTE[len(span_colour) % len(_PALETTE)]
            span_colour[key] = colour
    return seg_colour, span_colour


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


def _fmt_time(t):
    """Event time (epoch seconds) as a UTC date, ``"2024-03-02 23:59:43 UTC"``; ``""``
    when there is none (None or NaN)."""
    if t is None or (isinstance(t, float) and math.isnan(t)):
        return ""
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        return str(t)
    try:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):  # beyond the dates datetime knows
        return _fmt(t)


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


def _layout(metric_rows, alert_rows, rules):
    """What every plot of one report shares: x range, spans, colours, thresholds."""
    ns = [_x(r) for r in metric_rows] + [r.get("n") for r in alert_rows]
    ns = [n for n in ns if isinstance(n, (int, float)) and not isinstance(n, bool)]
    end_n = max(ns) if ns else None
    seg_colour, span_colour = _colours(metric_rows, alert_rows)
    return {
        "end_n": end_n,
        "firing": firing_spans(alert_rows, end_n=end_n),
        "pending": pending_spans(alert_rows, end_n=end_n),
        "seg_colour": seg_colour,
        "span_colour": span_colour,
        "thresholds": _thresholds(alert_rows, rules),
    }


def plot_metric(name, metric_rows, alert_rows=(), *, rules=None):
    """Draw one metric over the stream; return the matplotlib ``Figure`` (Agg canvas).

    One line per segment at x = the stream's events counted (``stream_n``, else
    ``n``); y labelled with the metric's name; each alert's firing spans shaded and
    its pending spans hatched, one colour and legend entry per rule and segment; a
    dashed line, labelled with the rule's name, at each fixed threshold of a rule on
    this metric (see the module docstring). :func:`write_report` saves one per metric.

    Runtime complexity: `O(m + a)` for ``m`` metric rows and ``a`` alert rows, plus
    the drawing.

    Parameters
    ----------
    name : str
        The metric (a key of the rows' ``values``).
    metric_rows, alert_rows : iterable of dict
        Rows of ``metrics.jsonl`` and ``alerts.jsonl``.
    rules : iterable, optional
        Rule tables (``{"metric", "op", "value"}``, ``{"drift", "p_below"}``, ``{"rule":
        "recall < 0.8"}``, each with an optional ``"name"``), rule strings, or objects
        with ``to_config()``; their thresholds are drawn even if they never fired.

    Raises
    ------
    ImportError
        If matplotlib (``streameval[report]``) is not installed.
    """
    metric_rows = list(metric_rows)
    alert_rows = list(alert_rows)
    Figure, Canvas = _matplotlib()
    return _plot_metric(name, metric_rows, _layout(metric_rows, alert_rows, rules), Figure, Canvas)


def _plot_metric(name, metric_rows, layout, Figure, Canvas):
    """Draw one metric as :func:`plot_metric` says, with the report's shared layout."""
    from matplotlib.colors import to_rgba

    series = {}
    for row in metric_rows:
        values = row.get("values", {})
        if name not in values:
            continue
        v = values[name]
        xs, ys = series.setdefault(_segment_key(row.get("segment")), ([], []))
        xs.append(_x(row))
        ys.append(math.nan if v is None else float(v))

    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    Canvas(fig)
    ax = fig.add_subplot()
    for seg, (xs, ys) in series.items():
        label = "all events" if seg is None else f"segment {seg}"
        marker = "o" if len(xs) <= 30 else None
        ax.plot(xs, ys, linewidth=1.4, marker=marker, markersize=3, label=label,
                color=layout["seg_colour"].get(seg))

    end_n = layout["end_n"]
    labelled = set()
    for state, spans in (("pending", layout["pending"]), ("firing", layout["firing"])):
        for rule, seg, n0, n1 in spans:
            rule = str(rule)
            right = n1 if n1 is not None else end_n
            if n0 is None or right is None:
                continue
            if right <= n0:  # opened and closed at one evaluation: still show a sliver
                right = n0 + max(1, (end_n or n0) // 500)
            label = None
            if (rule, seg, state) not in labelled:
                labelled.add((rule, seg, state))
                label = f"alert {rule} {state}" + ("" if seg is None else f" ({seg})")
            colour = layout["span_colour"].get((rule, seg), "tab:red")
            if state == "firing":
                ax.axvspan(n0, right, facecolor=to_rgba(colour, 0.22), edgecolor="none",
                           linewidth=0, label=label)
            else:  # pending: lighter, hatched in the same colour
                ax.axvspan(n0, right, facecolor=to_rgba(colour, 0.05),
                           edgecolor=to_rgba(colour, 0.45), hatch="//", linewidth=0,
                           label=label)

    for rule, value in layout["thresholds"].get(name, ()):
        ax.axhline(value, color="0.25", linestyle="--", linewidth=1.0, label=rule)
        ax.annotate(rule, xy=(1.0, value), xycoords=("axes fraction", "data"),
                    xytext=(-3, 2), textcoords="offset points", ha="right", va="bottom",
                    fontsize="x-small", color="0.25")

    ax.set_title(name)
    if str(name).endswith("p_value"):  # drift p-values: what matters is 0.01 vs 1e-6
        finite = [y for _, ys in series.values() for y in ys if y == y]
        if finite and min(finite) > 0:
            ax.set_yscale("log")
    ax.set_ylabel(str(name))
    ax.set_xlabel("events counted (whole stream)")
    ax.grid(True, alpha=0.3)
    if end_n:
        ax.set_xlim(left=0, right=end_n)
    entries = len(ax.get_legend_handles_labels()[0])
    if entries:
        ax.legend(loc="best", fontsize="small", framealpha=0.8, ncol=1 if entries <= 6 else 2)
    fig.tight_layout()
    return fig


# -------------------------------------------------------------------------- report


def write_report(metric_rows, alert_rows, out_dir, *, title="streameval report", summary=None,
                 rules=None):
    """Write ``report.html`` and one PNG per metric into ``out_dir``; return the HTML path.

    Runtime complexity: `O(m + a)` for ``m`` metric rows and ``a`` alert rows, plus
    the drawing (one figure per metric).

    Parameters
    ----------
    metric_rows : iterable of dict
        Rows of ``metrics.jsonl``: ``{"n", "t", "segment", "values": {name: float or None}}``
        (a segment's with ``"stream_n"`` too, or not).
    alert_rows : iterable of dict
        Rows of ``alerts.jsonl``: ``{"rule", "state", "n", "t", "value", "segment"}``.
    out_dir : str or Path
        Directory for ``report.html`` and the PNGs (created if missing).
    title : str
        Heading of the page.
    summary : dict, optional
        Extra facts shown at the top, e.g. ``{"log": ..., "events": ..., "rejected": ...}``.
    rules : iterable, optional
        The monitor's alert rules (tables, strings or objects with ``to_config()``, as
        :func:`plot_metric` takes them), for their threshold lines; without them,
        only the thresholds named by the alert transitions' rule names are drawn.

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

    layout = _layout(metric_rows, alert_rows, rules)
    spans = layout["firing"]
    names = metric_names(metric_rows)

    taken = set()
    images = []
    for name in names:
        filename = _safe_filename(name, taken)
        fig = _plot_metric(name, metric_rows, layout, Figure, Canvas)
        png = io.BytesIO()  # written beside and renamed in: never through a link
        fig.savefig(png, format="png")
        _replace(out_dir / filename, png.getvalue())
        images.append((name, filename))

    finals = final_values(metric_rows)
    page = _html(title, summary or {}, names, finals, alert_rows, spans, images)
    path = out_dir / "report.html"
    _replace(path, page.encode("utf-8"))
    return path


def _replace(path, data):
    """Write ``data`` as ``path``: a new file beside it renamed in (a symbolic link at
    ``path`` is replaced, never written through)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def report_from_dir(out_dir, *, title="streameval report", summary=None, rules=None):
    """Read ``metrics.jsonl`` and ``alerts.jsonl`` in ``out_dir`` and write the report there
    (``rules``: as :func:`write_report` takes them)."""
    out_dir = Path(out_dir)
    return write_report(
        read_jsonl(out_dir / "metrics.jsonl"),
        read_jsonl(out_dir / "alerts.jsonl"),
        out_dir,
        title=title,
        summary=summary,
        rules=rules,
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
        for seg in segs:  # a segment's own events (the whole stream's in its column)
            parts.append(f"<td>{e(_fmt(finals[seg]['n']))}</td>")
        parts.append("</tr>")
        if any(finals[seg]["t"] is not None for seg in segs):
            parts.append("<tr><td>last event time (t)</td>")
            for seg in segs:
                parts.append(f"<td>{e(_fmt_time(finals[seg]['t']))}</td>")
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
            "<table><tr><th>rule</th><th>state</th><th>n</th><th>event time</th>"
            "<th>value</th><th>segment</th></tr>"
        )
        for row in alert_rows:
            state = str(row.get("state"))
            cls = ' class="firing"' if state == "firing" else ""
            parts.append(
                f"<tr><td>{e(str(row.get('rule')))}</td><td{cls}>{e(state)}</td>"
                f"<td>{e(_fmt(row.get('n')))}</td><td>{e(_fmt_time(row.get('t')))}</td>"
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
