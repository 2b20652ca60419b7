"""The replay report: one interactive, offline HTML page over the rows a replay writes.

A report is a function over plain rows, never over metric objects: the rows of
``metrics.jsonl`` (``{"n", "t", "segment", "values": {name: float or null}}``, a
segment's row with ``"stream_n"`` too) and of ``alerts.jsonl`` (``{"rule", "state",
"n", "t", "value", "segment"}`` plus whatever explanation fields the alert carries),
the schemas of DESIGN.md section 6, and, optionally, score summaries
(:func:`score_summary`: ROC and PR curves, confusion matrix, score distribution,
reliability curve) taken from a Monitor at the end of a stream, when alerts fired and
at geometrically spaced counts through the stream (:func:`monitor_curves`,
:class:`CurveRecorder`).

:func:`report_data` turns the rows into one JSON-serialisable dict (what the page
draws); :func:`render_html` writes it into a page with `Plotly <https://plotly.com/javascript/>`_
(plotly.js, bundled inline from the ``plotly`` package: the page opens offline, with no
CDN); :func:`write_report` does both and writes ``report.html``. The live page of
``streameval serve`` (:mod:`streameval.service.ui`) draws the same data with the same
script.

What the page shows, top to bottom: the run's facts; the segments sorted by trouble
(:func:`trouble_order`: most firing alerts first, then the largest drop) with their
final values; one zoomable plot per metric (one line per segment, interval bands where
rows carry ``"intervals": {name: [lo, hi]}``, dashed threshold lines of the rules on
that metric, and shading only for the alerts of rules on that metric); one lane per
alert (rule and segment: pending and firing spans) under the plots; events per
evaluation per segment (and the labelled share of predictions where rows carry
``"coverage"``); an ``estimated_<metric>`` drawn dashed in ``<metric>``'s plot when both
exist; the alert table with each transition's explanation; and, where score summaries
were given, ROC and PR curves, the confusion matrix, score distributions by class and
the reliability curve, for a segment picked and a time picked on a slider. The x axis is event time when every row has one
(a switch shows events counted instead), and all timeline plots zoom together.

Timelines are downsampled (:func:`downsample`): per series, equal-count buckets each
keep their first, last, lowest and highest value, and the rows at every alert
transition and at every change between defined and undefined values are kept too. So
every extreme and every alert boundary survives while the page holds a bounded number
of points (:data:`POINT_BUDGET` over all series). The page holds the timelines of the
:data:`TIMELINE_SEGMENTS` most troubled segments and draws the 10 most troubled; a
picker shows others (all segments stay in the tables). Cost: `O(m log m)` for ``m``
metric rows, read in one pass (an iterable of rows is not held whole).

Imports: the standard library, numpy, :mod:`streameval.io.sinks` (:func:`write_atomic`:
the page is written beside and renamed in; :func:`segment_id`) and plotly (lazily, for
its bundled plotly.js, when a page is rendered); it reads plain rows, never metric or Monitor internals, so a
report can be drawn from the output files alone. :func:`plot_metric` draws one metric as a static matplotlib figure
(matplotlib, imported lazily).

>>> rows = [{"n": 10, "t": None, "segment": None, "values": {"recall": 0.5}},
...         {"n": 20, "t": None, "segment": None, "values": {"recall": 0.75}}]
>>> final_values(rows)
{None: {'n': 20, 't': None, 'values': {'recall': 0.75}}}
"""

from __future__ import annotations

import functools
import html
import json
import math
import re
import time
from datetime import datetime, timezone
from array import array
from pathlib import Path

import numpy as np

from streameval.io.sinks import segment_id, write_atomic

__all__ = [
    "write_report",
    "report_from_dir",
    "report_data",
    "render_html",
    "downsample",
    "trouble_order",
    "score_summary",
    "monitor_curves",
    "CurveRecorder",
    "plot_metric",
    "final_values",
    "segment_key",
    "firing_spans",
    "pending_spans",
    "metric_names",
    "read_jsonl",
    "iter_jsonl",
    "plotly_js",
    "FIGSIZE",
    "DPI",
    "POINT_BUDGET",
    "TIMELINE_SEGMENTS",
    "MAX_LANES",
    "CURVE_POINTS",
    "format_time",
]

#: size of :func:`plot_metric`'s figure, in inches; with :data:`DPI`, 900 x 330 px
FIGSIZE = (9.0, 3.3)
#: resolution of :func:`plot_metric`'s figure (pixels per inch)
DPI = 100
#: points kept over all timeline series of a page: a page of this many points draws in
#: well under a second in a browser (``benchmarks/bench_report.py`` measures it); each
#: series gets ``POINT_BUDGET / series / 4`` buckets, between 16 and 1 000
POINT_BUDGET = 200_000
#: timelines drawn for this many segments (the most troubled; the whole stream besides)
TIMELINE_SEGMENTS = 50
#: alert lanes drawn at most (the most troubled segments' first)
MAX_LANES = 200
#: points kept per ROC or PR curve (the curve's corners, evenly spread along it)
CURVE_POINTS = 400

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")

# rule names in the grammar of streameval.alerts.parse_rule that carry a fixed threshold
_NAME = r"[A-Za-z_][A-Za-z0-9_.@:\-]*"
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RE_THRESHOLD = re.compile(
    rf"^\s*({_NAME})\s*(<=|>=|<|>)\s*({_NUM})(?:\s+with\s+confidence\s+({_NUM}))?\s*$")
_RE_DRIFT = re.compile(rf"^\s*({_NAME})\s+drift\s+p\s*<\s*({_NUM})(?:\s+\((rise|any)\))?\s*$")
_RE_LEAD = re.compile(rf"^\s*({_NAME})\b")

# metrics whose fall is an improvement (by base name, before any "@window")
_LOWER_IS_BETTER = frozenset({
    "log_loss", "brier", "mae", "mse", "rmse", "rmsle", "mape", "error_rate", "fpr",
})

# line colours (tab10), used for segment lines in the matplotlib figure
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


def iter_jsonl(path):
    """The JSON objects of a JSONL file, one per non-blank line, read as they are
    iterated (nothing if the file is absent); a bad line raises ``ValueError`` naming
    the file and line.

    >>> list(iter_jsonl("/nonexistent/metrics.jsonl"))
    []
    """
    path = Path(path)
    if not path.exists():
        return
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None


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
        seg = segment_key(row.get("segment"))
        last = out.setdefault(seg, {"n": None, "t": None, "values": {}})
        last["n"] = row.get("n")
        last["t"] = row.get("t")
        last["values"].update(row.get("values", {}))
        if "late" in row:  # windows by period: events refused as late, so far
            last["late"] = dict(row["late"])
        for key in ("error_bounds", "as_of"):  # (the last row's: absent when exact, fresh)
            if key in row:
                last[key] = dict(row[key])
            else:
                last.pop(key, None)
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


def _spans(alert_rows, end_n, opening, closing, with_t=False):
    open_at = {}
    spans = []
    for row in alert_rows:
        key = (row.get("rule"), segment_key(row.get("segment")))
        state = row.get("state")
        if state == opening:
            open_at.setdefault(key, (row.get("n"), row.get("t")))
        elif state in closing and key in open_at:
            (n0, t0) = open_at.pop(key)
            spans.append((key[0], key[1], n0, row.get("n"), t0, row.get("t")))
    for key, (n0, t0) in open_at.items():
        spans.append((key[0], key[1], n0, end_n, t0, None))
    spans.sort(key=lambda s: (s[2] if s[2] is not None else -1, str(s[0]), str(s[1])))
    return spans if with_t else [s[:4] for s in spans]


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


def _rule_metrics(alert_rows, rules, names):
    """``{rule name: metric}``: the metric each alerting rule is about, among the
    plotted ``names``; from an alert's own ``"metric"`` field, the rule tables (their
    ``metric``, or ``drift.<name>.p_value`` for drift rules) or the rule name's leading
    metric name (``recall@6h < 0.8``, ``roc_auc drops by 0.05``)."""
    known = set(names)
    out = {}
    for rule in rules or ():
        table = rule.to_config() if hasattr(rule, "to_config") else rule
        if not isinstance(table, dict):
            table = {"rule": table}
        found = _threshold_of(table)
        metric = found[0] if found else table.get("metric")
        name = found[2] if found else table.get("name") or table.get("rule")
        if metric in known and isinstance(name, str):
            out.setdefault(name, metric)
    for row in alert_rows:
        rule = row.get("rule")
        if not isinstance(rule, str) or rule in out:
            continue
        metric = row.get("metric")
        if metric not in known:
            found = _threshold_of(rule)
            metric = found[0] if found else None
        if metric not in known:
            m = _RE_LEAD.match(rule)
            metric = m.group(1) if m else None
            drift = f"drift.{metric}.p_value"
            if " drift " in rule and drift in known:
                metric = drift
        if metric in known:
            out[rule] = metric
    return out


def segment_key(seg):
    """A row's segment as a hashable key that no other segment shares: the value itself
    (None, a string, number or bool), a tuple for the list of a segment of several
    fields (never equal to a string, so ``["a", "b"]`` and ``'["a", "b"]'`` stay two).

    >>> segment_key(["fr", "ios"]), segment_key('["fr", "ios"]'), segment_key(None)
    (('fr', 'ios'), '["fr", "ios"]', None)
    """
    if isinstance(seg, list):
        return tuple(segment_key(v) for v in seg)
    if isinstance(seg, dict):  # (not a segment a Monitor makes: kept apart, as text)
        return ("{}", json.dumps(seg, sort_keys=True))
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


def format_time(t):
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
    if isinstance(seg, tuple):
        return f"segment {json.dumps(list(seg))}"
    return "all events" if seg is None else f"segment {seg}"


def _unique_labels(segs):
    """Give each segment entry a label of its own: a label two segments would share
    (the segments ``1`` and ``"1"``) becomes the segment's JSON text (``segment 1``,
    ``segment "1"``)."""
    seen = {}
    for s in segs:
        seen[s["label"]] = seen.get(s["label"], 0) + 1
    for s in segs:
        if seen[s["label"]] > 1 and s["key"] is not None:
            s["label"] = f"segment {segment_id(s['segment'])}"


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ------------------------------------------------------------------- downsampling


def downsample(y, buckets, pinned=()):
    """Indices of the points of ``y`` to keep, ascending: per bucket, its first, last,
    lowest and highest defined value; every index in ``pinned``; and both sides of every
    change between defined and undefined (NaN) values, so gaps stay gaps.

    Buckets are ``buckets`` runs of equal count (the last may be shorter); with
    ``len(y) <= 4 * buckets`` every index is kept. The result has at most
    ``4 * buckets + len(pinned) + 2 * changes`` indices, and it contains the index of
    every bucket's minimum and maximum (the first one where values tie), hence of the
    series' global extremes.

    Runtime complexity: `O(n + p log p)` for ``n`` values and ``p`` pinned indices.

    >>> downsample([0, 5, 1, 1, 9, 2, 3, 3, 0, 4], 2).tolist()
    [0, 4, 5, 8, 9]
    >>> downsample([0, 5, 1, 1, 9, 2, 3, 3, 0, 4], 2, pinned=[6]).tolist()
    [0, 4, 5, 6, 8, 9]
    """
    y = np.asarray(y, dtype=float)
    n = len(y)
    if buckets < 1:
        raise ValueError(f"buckets = {buckets!r}: must be >= 1")
    if n <= 4 * buckets:
        return np.arange(n)
    size = -(-n // buckets)
    rows = -(-n // size)
    pad = rows * size - n
    nan = np.isnan(y)
    lo = np.where(nan, np.inf, y)
    hi = np.where(nan, -np.inf, y)
    if pad:
        lo = np.concatenate((lo, np.full(pad, np.inf)))
        hi = np.concatenate((hi, np.full(pad, -np.inf)))
    base = np.arange(rows) * size
    imin = base + lo.reshape(rows, size).argmin(axis=1)
    imax = base + hi.reshape(rows, size).argmax(axis=1)
    keep = [base, np.minimum(base + size - 1, n - 1), imin[imin < n], imax[imax < n]]
    change = np.flatnonzero(nan[1:] != nan[:-1])
    if len(change):
        keep += [change, change + 1]
    pinned = np.asarray(list(pinned), dtype=np.int64)
    if len(pinned):
        keep.append(pinned[(pinned >= 0) & (pinned < n)])
    return np.unique(np.concatenate(keep))


def _pins(xs, boundaries):
    """Row indices at the alert boundaries: the last row at or before each boundary
    and the first after it (``xs`` ascending)."""
    if not len(boundaries) or not len(xs):
        return ()
    at = np.searchsorted(xs, boundaries, side="right")
    return np.concatenate((at - 1, at))


# ----------------------------------------------------------------------- trouble


def _drop(name, ys, ns):
    """The largest fall of a metric from an earlier peak (a rise for the metrics where
    lower is better), over the rows after the segment's first 5 % of events; 0 for
    drift p-values and without two defined values."""
    if name.startswith("drift.") or len(ys) < 2:
        return 0.0
    y = np.asarray(ys, dtype=float)
    n = np.asarray(ns, dtype=float)
    if len(n) and np.isfinite(n[-1]):
        y = y[n >= 0.05 * n[-1]]
    y = y[~np.isnan(y)]
    if len(y) < 2:
        return 0.0
    if name.split("@", 1)[0] in _LOWER_IS_BETTER:
        y = -y
    return float(max(0.0, np.max(np.maximum.accumulate(y) - y)))


def trouble_order(segments):
    """Segments sorted by trouble: most firing alerts first, then the largest drop,
    then the most events, then their first appearance.

    ``segments`` is a list of dicts with ``"alerts"`` (firing transitions), ``"drop"``
    (the largest fall of a metric from an earlier peak, see the module docstring) and
    ``"n"``; returns their indices in that order.

    >>> trouble_order([{"alerts": 0, "drop": 0.3, "n": 10}, {"alerts": 2, "drop": 0.0, "n": 5},
    ...                {"alerts": 0, "drop": 0.4, "n": 1}])
    [1, 2, 0]
    """
    def key(i):
        s = segments[i]
        return (-s["alerts"], -(s["drop"] or 0.0), -(s["n"] or 0), i)

    return sorted(range(len(segments)), key=key)


# ------------------------------------------------------------------ score summaries


def score_summary(scores, wpos, wneg, *, threshold=0.5, points=CURVE_POINTS, bins=20):
    """ROC and PR curves, confusion matrix, score histogram and reliability curve of a
    score order: per distinct score, the positive and negative weight.

    Returns ``{"roc": {"fpr", "tpr", "thr"}, "pr": {"precision", "recall", "thr"},
    "auc", "confusion": {"threshold", "tp", "fp", "fn", "tn"}, "hist": {"edges",
    "pos", "neg"}, "calibration": {"score", "rate", "weight"} or None, "events"}``
    (lists of floats). The curves are those of ``sklearn.metrics.roc_curve`` and
    ``precision_recall_curve`` (``drop_intermediate=False``), kept at most ``points``
    points each (the first and last, and points evenly spread in between); ``auc``
    is the exact area from every point. The confusion matrix predicts positive when
    ``score >= threshold``. The histogram has ``bins`` equal bins over the scores'
    range; the reliability curve (scores in [0, 1] only, else None) has ``bins``
    equal bins over [0, 1] with each non-empty bin's mean score and positive rate, as
    ``sklearn.calibration.calibration_curve(strategy="uniform")``.

    Runtime complexity: `O(d)` for ``d`` distinct scores.

    >>> s = score_summary([0.1, 0.35, 0.4, 0.8], [0, 1, 0, 1], [1, 0, 1, 0])
    >>> s["roc"]["fpr"], s["roc"]["tpr"], s["auc"]
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0], 0.75)
    >>> s["confusion"]
    {'threshold': 0.5, 'tp': 1.0, 'fp': 0.0, 'fn': 1.0, 'tn': 2.0}
    """
    keys = np.asarray(scores, dtype=float)
    wp = np.asarray(wpos, dtype=float)
    wn = np.asarray(wneg, dtype=float)
    keep = (wp > 0.0) | (wn > 0.0)
    keys, wp, wn = keys[keep], wp[keep], wn[keep]
    if len(keys) > 1 and np.any(np.diff(keys) < 0):
        order = np.argsort(keys, kind="stable")
        keys, wp, wn = keys[order], wp[order], wn[order]
    P, N = float(wp.sum()), float(wn.sum())
    # high to low: the cumulative counts at each threshold
    k, p, q = keys[::-1], wp[::-1], wn[::-1]
    tps = np.concatenate(([0.0], np.cumsum(p)))
    fps = np.concatenate(([0.0], np.cumsum(q)))
    thr = np.concatenate(([np.inf], k))
    fpr = fps / N if N > 0 else np.full(len(fps), np.nan)
    tpr = tps / P if P > 0 else np.full(len(tps), np.nan)
    auc = float(_trapezoid(tpr, fpr)) if P > 0 and N > 0 else None
    with np.errstate(invalid="ignore", divide="ignore"):
        prec = np.where(tps[1:] + fps[1:] > 0, tps[1:] / (tps[1:] + fps[1:]), 0.0)
    rec = tps[1:] / P if P > 0 else np.ones(len(tps) - 1)
    # as scikit-learn: ascending thresholds, then the (precision 1, recall 0) end
    prec = np.append(prec[::-1], 1.0)
    rec = np.append(rec[::-1], 0.0)
    pr_thr = keys.copy()

    at = keys >= threshold
    tp, fp = float(wp[at].sum()), float(wn[at].sum())
    out = {
        "events": P + N,
        "auc": auc,
        "roc": _thin({"fpr": fpr, "tpr": tpr, "thr": thr}, points),
        "pr": _thin({"precision": prec, "recall": rec, "thr": np.append(pr_thr, np.nan)},
                    points),
        "confusion": {"threshold": float(threshold), "tp": tp, "fp": fp,
                      "fn": P - tp, "tn": N - fp},
        "hist": None,
        "calibration": None,
    }
    if len(keys):
        lo, hi = float(keys[0]), float(keys[-1])
        edges = np.linspace(lo, hi, bins + 1) if hi > lo else np.array([lo - 0.5, lo + 0.5])
        idx = np.clip(np.searchsorted(edges, keys, side="right") - 1, 0, len(edges) - 2)
        m = len(edges) - 1
        out["hist"] = {"edges": _floats(edges),
                       "pos": _floats(np.bincount(idx, wp, m)),
                       "neg": _floats(np.bincount(idx, wn, m))}
        if lo >= 0.0 and hi <= 1.0:
            # calibration_curve's uniform bins: searchsorted on the inner edges
            inner = np.linspace(0.0, 1.0, bins + 1)[1:-1]
            b = np.searchsorted(inner, keys)
            w = np.bincount(b, wp + wn, bins)
            sw = np.bincount(b, keys * (wp + wn), bins)
            pw = np.bincount(b, wp, bins)
            nz = w > 0
            out["calibration"] = {"score": _floats(sw[nz] / w[nz]),
                                  "rate": _floats(pw[nz] / w[nz]),
                                  "weight": _floats(w[nz])}
    return out


_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy < 2 has only trapz


def _thin(curve, points):
    """At most ``points`` points of a curve (the first and last among them), as lists."""
    n = len(next(iter(curve.values())))
    if n > points:
        idx = np.unique(np.linspace(0, n - 1, points).round().astype(np.int64))
        curve = {k: v[idx] for k, v in curve.items()}
    return {k: _floats(v) for k, v in curve.items()}


def _floats(a):
    """JSON numbers rounded to 6 significant digits; None for NaN and infinities."""
    a = np.asarray(a, dtype=float)
    ok = np.isfinite(a)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where(ok & (a != 0), np.floor(np.log10(np.abs(np.where(ok, a, 1.0)))), 0.0)
        scale = 10.0 ** (5 - mag)
        r = np.where(ok, np.round(a * scale) / scale, 0.0)
    r = np.where(np.isfinite(r), r, a)  # beyond the range where scaling is exact
    out = r.tolist()
    for i in np.flatnonzero(~ok).tolist():
        out[i] = None
    return out


def _order_data(metric):
    """``(scores, wpos, wneg)`` of a cumulative score-order metric's state (an exact
    ``ROCAUC``, ``AveragePrecision``, ``ROCCurve`` or ``PRCurve``, or a view of one),
    read through its public ``to_state()``; None for others."""
    try:
        state = metric.to_state()
    except Exception:  # noqa: BLE001 - anything without a readable state is not one
        return None
    if not isinstance(state, dict) or state.get("type") not in (
            "ROCAUC", "AveragePrecision", "ROCCurve", "PRCurve"):
        return None
    data = state.get("data")
    if not isinstance(data, dict) or not {"scores", "wpos", "wneg"} <= set(data):
        return None
    return data["scores"], data["wpos"], data["wneg"]


def _threshold_param(metrics):
    """The ``threshold`` of the first metric that has one (a public parameter of the
    confusion metrics), else 0.5."""
    for metric in metrics.values():
        value = getattr(metric, "threshold", None)
        if _is_num(value):
            return float(value)
    return 0.5


def monitor_curves(monitor, segments=(None,), *, label="end of stream", points=CURVE_POINTS):
    """Score summaries (:func:`score_summary`) of a Monitor's segments, as the report
    takes them: ``[{"segment", "label", "stream_n", "t", ...summary}]`` (``stream_n``
    and ``t``: the monitor's events counted and event time).

    For each segment key in ``segments`` (None: the whole stream) that the monitor has
    and that holds an exact cumulative score-order metric (``roc_auc``,
    ``average_precision``...), read through the metrics' public ``to_state()``; the
    confusion matrix at the threshold of the segment's first threshold metric (0.5
    without one). Segments without such a metric are left out.

    Runtime complexity: `O(d)` per segment for ``d`` distinct scores.
    """
    out = []
    t = getattr(monitor, "t", None)
    for seg in segments:
        try:
            metrics = monitor.segment_metrics(seg)
        except KeyError:
            continue
        found = None
        for metric in metrics.values():
            found = _order_data(metric)
            if found is not None:
                break
        if found is None:
            continue
        summary = score_summary(*found, threshold=_threshold_param(metrics), points=points)
        out.append({"segment": seg, "label": label, "stream_n": monitor.n,
                    "t": t if _is_num(t) and math.isfinite(t) else None, **summary})
    return out


class CurveRecorder:
    """Score summaries of a Monitor through the stream: when alerts fire, and at times
    spaced geometrically through the stream.

    As an ``on_alert`` sink (``monitor.on_alert.append(recorder)``, or a Pipeline's
    ``sinks``), each ``firing`` transition records the summaries
    (:func:`monitor_curves`) of its segment, the first ``limit`` times. As an
    ``on_metrics`` sink (:meth:`on_row`; a Pipeline connects a sink's ``on_row`` to the
    Monitor's rows), it records the whole stream's summary at the first evaluation of
    the whole stream at or after ``first_step``, ``first_step * ratio``, ``first_step *
    ratio ** 2``, ... events of the stream, and keeps the latest ``times`` of them; the reader of the
    report picks one with the page's time slider.

    Cost: a recording reads the segment's score order, `O(d)` for ``d`` distinct
    scores (at most the events counted). The timed ones are taken at counts ``n_k`` whose
    sum stays below ``n / (ratio - 1)`` for a stream of ``n`` events (with the default
    ``ratio = 2``: at most one more read of the whole order, however long the stream),
    and there are about ``log(n / first_step) / log(ratio)`` of them. :attr:`seconds`
    is the time spent recording so far.

    >>> import streameval as se
    >>> mon = se.Monitor({"auc": se.ROCAUC()}, every=10)
    >>> rec = CurveRecorder(mon, times=3, first_step=10)
    >>> mon.on_metrics.append(rec.on_row)
    >>> _ = mon.update_many([i % 3 == 0 for i in range(100)], [i / 100 for i in range(100)])
    >>> [c["stream_n"] for c in rec.timed]  # at 10, 20, 40, 80: the latest 3 kept
    [20, 40, 80]
    """

    def __init__(self, monitor, limit=4, *, times=12, first_step=1000, ratio=2.0):
        for name, v, low in (("limit", limit, 0), ("times", times, 1), ("first_step", first_step, 1)):
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"{name} = {v!r}: must be an int >= {low}")
        if not _is_num(ratio) or not ratio > 1 or not math.isfinite(ratio):
            raise ValueError(f"ratio = {ratio!r}: must be a number > 1")
        self._monitor = monitor
        self.limit = limit
        self.times = times
        self.ratio = float(ratio)
        #: the stream's count at or after which the next timed summary is taken
        self.next_at = first_step
        #: the summaries taken when alerts fired
        self.taken = []
        #: the whole stream's summaries taken through the stream (the latest ``times``)
        self.timed = []
        #: seconds spent recording
        self.seconds = 0.0

    @property
    def monitor(self):
        """The Monitor (``monitor`` may be a function returning it: a pipeline's, which a
        resume replaces)."""
        m = self._monitor
        return m() if callable(m) and not hasattr(m, "segment_metrics") else m

    def __call__(self, transition):
        if transition.get("state") != "firing" or len(self.taken) >= self.limit:
            return
        seg = transition.get("segment")
        label = f"when {transition.get('rule')} fired"
        t0 = time.perf_counter()
        self.taken += monitor_curves(self.monitor, [seg], label=label)
        self.seconds += time.perf_counter() - t0

    def on_row(self, row):
        """Take the whole stream's summary when ``row`` (a metrics row of the whole
        stream) is the first at or after :attr:`next_at` events of the stream (see the
        class). A segment's row is passed over: the whole stream's scope is fed at its
        own evaluation points, and a segment's may fall between two of them."""
        if row.get("segment") is not None:
            return
        x = row.get("n")
        if not _is_num(x) or x < self.next_at:
            return
        while self.next_at <= x:
            self.next_at = max(self.next_at + 1, int(math.ceil(self.next_at * self.ratio)))
        t0 = time.perf_counter()
        got = monitor_curves(self.monitor, [None], label="")
        if got:
            self.timed.append(got[0])
            del self.timed[:-self.times]
        self.seconds += time.perf_counter() - t0

    def curves(self, end_segments=()):
        """The end of the stream's summaries (whole stream first, then
        ``end_segments``), then the timed ones (labelled "at event <n>"), then those
        recorded when alerts fired."""
        segs = [None] + [s for s in dict.fromkeys(end_segments) if s is not None]
        t0 = time.perf_counter()
        end = monitor_curves(self.monitor, segs)
        self.seconds += time.perf_counter() - t0
        end_n = end[0]["stream_n"] if end else None
        timed = [dict(c, label=f"at event {c['stream_n']}") for c in self.timed
                 if c["stream_n"] != end_n]
        return end + timed + self.taken


# ------------------------------------------------------------------------ the data


def _number(v):
    # a row's n, stream_n or value as a float: NaN for None and anything not a number
    return float(v) if _is_num(v) else math.nan


def _time_of(per):
    """A function from a stream position (events counted) to its event time, linear
    between the rows' (x, t) pairs, constant beyond them; None for None."""
    xs = np.concatenate([np.frombuffer(d["x"], dtype=float) for d in per.values()])
    ts = np.array([t for d in per.values() for t in d["t"]], dtype=float)
    ok = np.isfinite(xs) & np.isfinite(ts)
    order = np.argsort(xs[ok], kind="stable")
    xs, ts = xs[ok][order], ts[ok][order]

    def t_at(n):
        if not _is_num(n) or not len(xs):
            return None
        return float(np.interp(float(n), xs, ts))

    return t_at


def _columns(groups):
    """``{name: (row indices, values)}`` (ascending numpy arrays) from groups of rows
    with the same metric names: ``{names: (row indices, [value tuples])}``."""
    parts = {}
    for keys, (idx, tuples) in groups.items():
        idx = np.frombuffer(idx, dtype=np.int64)
        try:
            m = np.array(tuples, dtype=float)  # fast path: numbers only
        except (TypeError, ValueError):
            m = np.array([[_number(v) for v in t] for t in tuples], dtype=float)
        m = m.reshape(len(tuples), len(keys))
        for j, name in enumerate(keys):
            parts.setdefault(name, []).append((idx, m[:, j]))
    out = {}
    for name, pieces in parts.items():
        if len(pieces) == 1:
            out[name] = pieces[0]
            continue
        idx = np.concatenate([p[0] for p in pieces])
        vals = np.concatenate([p[1] for p in pieces])
        order = np.argsort(idx, kind="stable")
        out[name] = (idx[order], vals[order])
    return out



def report_data(metric_rows, alert_rows=(), *, title="streameval report", summary=None,
                rules=None, curves=None, point_budget=POINT_BUDGET,
                timeline_segments=TIMELINE_SEGMENTS):
    """What a report page draws, as one JSON-serialisable dict.

    Keys: ``title``, ``summary`` (facts), ``time_axis`` (every row has an event time),
    ``metrics`` (names), ``segments`` (``[{"key", "label", "n", "t", "alerts", "drop",
    "values", "late"}]`` sorted by trouble, :func:`trouble_order`), ``series``
    (``{metric: [{"seg", "x", "t", "y", "lo", "hi"}]}``, ``seg`` an index into
    ``segments``), ``volume`` (``[{"seg", "x", "t", "events", "coverage"}]``: the
    segment's events since its previous row), ``lanes`` (``[{"rule", "seg",
    "metric", "spans": [{"state", "x0", "x1", "t0", "t1"}], "marks"}]``, the marks an
    alarm's estimated change start, from its ``change_start_n``), ``alert_points``
    (each transition's ``value`` and ``interval`` on its metric's plot), ``thresholds``
    (``{metric: [[rule name, value]]}``), ``alerts`` (the transitions, with their
    extra fields), ``curves`` (score summaries), ``downsample`` (``{"method",
    "rows", "points"}``) and ``end_n``. Transitions without an event time get one
    interpolated from the rows' (events counted, time) pairs.

    Runtime complexity: `O(m log m + a)` for ``m`` metric rows and ``a`` alert rows.

    Parameters are those of :func:`write_report`, plus ``point_budget`` (points kept
    over all series) and ``timeline_segments`` (segments whose timelines are drawn).
    """
    alert_rows = list(alert_rows)
    # one pass over the rows (an iterable: a file's lines need not be held): per segment,
    # x, n and times, one compact (row index, value) column per metric, the last values
    names = {}
    per = {}
    order = []
    rows_seen = 0
    time_axis = True
    t_lo = t_hi = None
    _f, _i = float, int
    for row in metric_rows:
        rows_seen += 1
        seg = row.get("segment")
        d = per.get(seg) if seg.__class__ is str or seg is None else None
        if d is None:
            seg = segment_key(seg)
            d = per.get(seg)
            if d is None:
                d = per[seg] = {"x": array("d"), "t": [], "n": array("d"), "groups": {},
                                "iv": {}, "cov": [], "late": None,
                                "label": row.get("segment"),
                                "last": {"n": None, "t": None, "values": {}}}
                order.append(seg)
        i = len(d["x"])
        n, t = row.get("n"), row.get("t")
        x = row.get("stream_n", n)
        d["x"].append(x if x.__class__ is _f else _f(x) if x.__class__ is _i else _number(x))
        d["n"].append(n if n.__class__ is _f else _f(n) if n.__class__ is _i else _number(n))
        d["t"].append(t)
        if (t.__class__ is _f or t.__class__ is _i) and math.isfinite(t):
            if t_lo is None or t < t_lo:
                t_lo = t
            if t_hi is None or t > t_hi:
                t_hi = t
        else:
            time_axis = False
        values = row.get("values", {})
        last = d["last"]
        last["n"], last["t"] = n, t
        last["values"].update(values)
        # rows of one segment mostly carry the same metrics: one append per row, into
        # the group of rows with these names (columns are split out at the end)
        keys = tuple(values)
        group = d["groups"].get(keys)
        if group is None:
            group = d["groups"][keys] = (array("q"), [])
            for name in keys:
                names.setdefault(name, None)
        group[0].append(i)
        group[1].append(tuple(values.values()))
        if len(row) > 4:  # beyond n, t, segment, values (and a segment's stream_n)
            ivs = row.get("intervals")
            if isinstance(ivs, dict):
                for name, pair in ivs.items():
                    col = d["iv"].setdefault(name, {})
                    if isinstance(pair, (list, tuple)) and len(pair) == 2:
                        col[i] = pair
            cov = row.get("coverage")
            if isinstance(cov, dict):
                d["cov"].append((i, cov))
            if "late" in row:
                d["late"] = row["late"]
    for d in per.values():
        d["vals"] = _columns(d.pop("groups"))
    names = list(names)
    name_set = set(names)
    time_axis = time_axis and rows_seen > 0
    xs_all = [float(np.nanmax(d["x"])) for d in per.values()
              if len(d["x"]) and not np.isnan(d["x"]).all()]
    x_lo = [float(np.nanmin(d["x"])) for d in per.values()
            if len(d["x"]) and not np.isnan(d["x"]).all()]
    ns = xs_all + [r.get("n") for r in alert_rows if _is_num(r.get("n"))]
    end_n = max(ns) if ns else None
    if end_n is not None and float(end_n).is_integer():
        end_n = int(end_n)

    # alert spans and firing counts per segment
    firing_count = {}
    for r in alert_rows:
        if r.get("state") == "firing":
            k = segment_key(r.get("segment"))
            firing_count[k] = firing_count.get(k, 0) + 1
    boundaries = {}
    for r in alert_rows:
        if _is_num(r.get("n")):
            boundaries.setdefault(segment_key(r.get("segment")), []).append(r.get("n"))
    bounds = np.asarray(sorted({b for bs in boundaries.values() for b in bs}), dtype=float)

    # segments and their trouble
    segs = []
    for seg in order:
        d = per[seg]
        drop = 0.0
        seg_n = np.frombuffer(d["n"], dtype=float)
        for name, (idx, ys) in d["vals"].items():
            drop = max(drop, _drop(name, ys, seg_n[idx]))
        last = d["last"]
        segs.append({"key": seg, "label": _seg_text(seg), "segment": d["label"],
                     "n": last["n"], "t": last["t"],
                     "alerts": firing_count.get(seg, 0), "drop": round(drop, 6),
                     "values": {k: _json_num(v) for k, v in last["values"].items()},
                     "late": d["late"]})
    for seg, count in firing_count.items():  # alerts of segments without metric rows
        if seg not in per:
            segs.append({"key": seg, "label": _seg_text(seg), "segment": seg, "n": None,
                         "t": None, "alerts": count, "drop": 0.0, "values": {}, "late": None})
    _unique_labels(segs)
    ranked = trouble_order(segs)
    segs = [segs[i] for i in ranked]
    seg_index = {s["key"]: i for i, s in enumerate(segs)}

    # which segments get timelines: the whole stream and the most troubled others
    drawn = [s["key"] for s in segs if s["key"] is None and s["key"] in per]
    drawn += [s["key"] for s in segs if s["key"] is not None and s["key"] in per][:timeline_segments]
    n_series = sum(len(per[k]["vals"]) for k in drawn) or 1
    buckets = int(min(1000, max(16, point_budget // (4 * n_series))))

    series = {name: [] for name in names}
    volume = []
    points = 0
    for seg in drawn:
        d = per[seg]
        x = np.frombuffer(d["x"], dtype=float)
        t = d["t"]
        pins = _pins(x, bounds)
        for name in names:
            col = d["vals"].get(name)
            if col is None:
                continue
            idx, y = col
            sx = x[idx]
            keep = downsample(y, buckets, _pins(sx, bounds))
            points += len(keep)
            rows_kept = idx[keep].tolist()
            item = {"seg": seg_index[seg], "x": _nums(sx[keep]), "y": _floats(y[keep])}
            if time_axis:
                item["t"] = [t[i] for i in rows_kept]
            ivs = d["iv"].get(name)
            if ivs:
                item["lo"] = [_json_num(ivs[i][0]) if i in ivs else None for i in rows_kept]
                item["hi"] = [_json_num(ivs[i][1]) if i in ivs else None for i in rows_kept]
            series[name].append(item)
        ev = np.diff(np.frombuffer(d["n"], dtype=float), prepend=0.0)
        keep = downsample(ev, buckets, pins)
        vol = {"seg": seg_index[seg], "x": _nums(x[keep]), "events": _floats(ev[keep])}
        if time_axis:
            vol["t"] = [t[i] for i in keep.tolist()]
        if d["cov"]:
            vol["coverage"] = _coverage(d["cov"], x, t, buckets)
        volume.append(vol)

    # alert lanes: one per rule and segment, most troubled segments first
    rule_metric = _rule_metrics(alert_rows, rules, names)
    lanes = {}
    for state, spans in (("pending", _spans(alert_rows, end_n, "pending",
                                            ("firing", "resolved"), with_t=True)),
                         ("firing", _spans(alert_rows, end_n, "firing", ("resolved",),
                                           with_t=True))):
        for rule, seg, n0, n1, t0, t1 in spans:
            lane = lanes.setdefault((str(rule), seg), {
                "rule": str(rule), "seg": seg_index.get(seg), "segment": seg,
                "metric": rule_metric.get(rule), "spans": []})
            lane["spans"].append({"state": state, "x0": n0, "x1": n1, "t0": t0, "t1": t1})
    # event times of stream positions where a transition has none (interpolated from
    # the rows: alert transitions count the stream's events, as the rows' x does)
    t_at = _time_of(per) if time_axis else (lambda n: None)
    for r in alert_rows:  # an alarm's estimated change start: a mark on its lane
        start = r.get("change_start_n")
        lane = lanes.get((str(r.get("rule")), segment_key(r.get("segment"))))
        if lane is not None and r.get("state") == "firing" and _is_num(start):
            t = r.get("change_start_t")
            lane.setdefault("marks", []).append({
                "x": start, "t": t if _is_num(t) else t_at(start),
                "text": str(r.get("message") or f"estimated change start: event {start}")})
    lanes = sorted(lanes.values(), key=lambda ln: (ln["seg"] if ln["seg"] is not None else -1,
                                                   ln["rule"]))
    lane_total = len(lanes)
    lanes = lanes[:MAX_LANES]
    for lane in lanes:
        for s in lane["spans"]:
            for end in ("0", "1"):
                if not _is_num(s["t" + end]):
                    s["t" + end] = t_at(s["x" + end])
    # the observed value and its interval at each transition, on its metric's plot
    alert_points = []
    for r in alert_rows:
        metric = r.get("metric") if r.get("metric") in name_set else rule_metric.get(r.get("rule"))
        iv = r.get("interval")
        if metric is None or not _is_num(r.get("value")) or not _is_num(r.get("n")):
            continue
        lo, hi = (iv if isinstance(iv, (list, tuple)) and len(iv) == 2 else (None, None))
        t = r.get("t")
        alert_points.append({"metric": metric, "x": r["n"], "t": t if _is_num(t) else t_at(r["n"]),
                       "value": _json_num(r["value"]), "lo": _json_num(lo), "hi": _json_num(hi),
                       "state": r.get("state"), "rule": str(r.get("rule")),
                       "segment": _jsonable(r.get("segment"))})

    return {
        "title": str(title),
        "x_range": [min(0, min(x_lo)), end_n] if x_lo else None,
        "t_range": [t_lo, t_hi] if time_axis else None,
        "summary": {str(k): _jsonable(v) for k, v in (summary or {}).items()},
        "time_axis": time_axis,
        "end_n": end_n,
        "metrics": names,
        "estimated": {m: f"estimated_{m}" for m in names if f"estimated_{m}" in name_set},
        "segments": [{k: _jsonable(v) for k, v in s.items() if k != "key"} for s in segs],
        "drawn": [seg_index[k] for k in drawn],
        "series": series,
        "volume": volume,
        "lanes": lanes,
        "lanes_total": lane_total,
        "thresholds": {m: [[r, v] for r, v in lines]
                       for m, lines in _thresholds(alert_rows, rules).items()},
        "alerts": [{k: _jsonable(v) for k, v in r.items()} for r in alert_rows],
        "alert_points": alert_points,
        "curves": [_jsonable(c) for c in (curves or ())],
        "downsample": {
            "method": "min/max per bucket (first, last, lowest, highest of equal-count "
                      "buckets) with alert boundaries and gaps pinned",
            "rows": rows_seen, "points": points, "buckets": buckets,
            "segments_drawn": len(drawn), "segments": len(segs)},
    }


def _coverage(cov, x, t, buckets):
    """A segment's label coverage, downsampled as its timelines are (extremes of the
    labelled share kept): ``[{"x", "t", "share", "predictions", "labelled", "pending",
    "expired"}]`` from its rows' ``(row index, coverage dict)``; ``share`` is labelled
    over predictions (None before any prediction)."""
    def num(c, k):
        v = c.get(k)
        return float(v) if _is_num(v) else math.nan

    pred = np.array([num(c, "predictions") for _, c in cov])
    lab = np.array([num(c, "labelled") for _, c in cov])
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(pred > 0, lab / pred, np.nan)
    out = []
    for j in downsample(share, buckets).tolist():
        i, c = cov[j]
        item = {"x": _nums(x[i:i + 1])[0], "t": t[i], "share": _json_num(float(share[j]))}
        for k in ("predictions", "labelled", "pending", "expired"):
            item[k] = _json_num(c.get(k))
        out.append(item)
    return out


def _json_num(v):
    if _is_num(v):
        return v if math.isfinite(v) else None
    return v if v is None or isinstance(v, (str, bool)) else None


def _nums(a):
    """JSON numbers (integers where integral); None for NaN."""
    ok = np.isfinite(a)
    if ok.all() and (np.abs(a) < 2**53).all() and (a == np.round(a)).all():
        return a.astype(np.int64).tolist()
    return [None if not math.isfinite(v) else (int(v) if v.is_integer() else v)
            for v in a.tolist()]


def _jsonable(v):
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return _jsonable(v.tolist())
    if isinstance(v, (np.floating, np.integer)):
        return _jsonable(v.item())
    if v is None or isinstance(v, (str, int, bool)):
        return v
    return str(v)


# -------------------------------------------------------------------------- the page


@functools.lru_cache(maxsize=1)
def plotly_js():
    """The plotly.js bundle (minified) that ships with the ``plotly`` package.

    Raises
    ------
    ImportError
        If plotly (``streameval[report]``) is not installed.
    """
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the report needs plotly: pip install 'streameval[report]' "
            "(or pass --no-report to skip the report)"
        ) from None
    return get_plotlyjs()


def _script_json(data):
    # inside <script>: no "</script" or "<!--" can close or confuse the element
    return (json.dumps(data, separators=(",", ":"), allow_nan=False)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def render_html(data, *, live=None):
    """The page for :func:`report_data`'s ``data``: plotly.js and the drawing script
    inline, the data as JSON. With ``live`` (a URL, e.g. ``"ui/data"``), no data is
    embedded: the page fetches ``live`` every few seconds and redraws (keeping the
    zoom), as the service's live page does.

    Raises
    ------
    ImportError
        If plotly (``streameval[report]``) is not installed.
    """
    title = html.escape(str(data.get("title", "streameval report")))
    payload = "null" if live is not None else _script_json(data)
    config = _script_json({"live": live})
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',  # no favicon request
        f"<title>{title}</title><style>{_CSS}</style>",
        f'<script type="text/javascript">{plotly_js()}</script>',
        "</head><body>",
        f'<h1 id="se-title">{title}</h1>',
        '<div id="se-root"><p class="none">Loading...</p></div>',
        f'<script type="application/json" id="se-data">{payload}</script>',
        f'<script type="application/json" id="se-config">{config}</script>',
        f"<script>{_JS}</script>",
        "</body></html>\n",
    ])


def write_report(metric_rows, alert_rows, out_dir, *, title="streameval report", summary=None,
                 rules=None, curves=None):
    """Write ``report.html`` into ``out_dir`` (created if missing); return its path.

    One self-contained page (plotly.js inline: it opens offline); see the module
    docstring for what it shows and :func:`report_data` for the data behind it.

    Runtime complexity: `O(m log m + a)` for ``m`` metric rows and ``a`` alert rows;
    the page holds at most about :data:`POINT_BUDGET` timeline points however long
    the stream, plus plotly.js (about 4.8 MB).

    Parameters
    ----------
    metric_rows : iterable of dict
        Rows of ``metrics.jsonl``: ``{"n", "t", "segment", "values": {name: float or None}}``
        (a segment's with ``"stream_n"`` too, or not; optionally ``"intervals": {name:
        [lo, hi]}`` for interval bands and ``"coverage": {...}`` for label coverage).
    alert_rows : iterable of dict
        Rows of ``alerts.jsonl``: ``{"rule", "state", "n", "t", "value", "segment"}``;
        further fields (an alert's explanation) are shown in the alert table.
    out_dir : str or Path
        Directory for ``report.html``.
    title : str
        Heading of the page.
    summary : dict, optional
        Extra facts shown at the top, e.g. ``{"log": ..., "events": ..., "rejected": ...}``.
    rules : iterable, optional
        The monitor's alert rules (tables, strings or objects with ``to_config()``), for
        their threshold lines and for the metric each alert is about; without them,
        the rule names of the alert transitions give what they can.
    curves : list of dict, optional
        Score summaries (:func:`monitor_curves`, :class:`CurveRecorder`) for the ROC,
        PR, confusion, score-distribution and reliability views.

    Raises
    ------
    ImportError
        If plotly (``streameval[report]``) is not installed.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = report_data(metric_rows, alert_rows, title=title, summary=summary, rules=rules,
                       curves=curves)
    page = render_html(data)
    path = out_dir / "report.html"
    write_atomic(path, page.encode("utf-8"))  # renamed in: never a half-written page
    return path


def report_from_dir(out_dir, *, title="streameval report", summary=None, rules=None,
                    curves=None):
    """Read ``metrics.jsonl`` and ``alerts.jsonl`` in ``out_dir`` and write the report there
    (``rules``, ``curves``: as :func:`write_report` takes them)."""
    out_dir = Path(out_dir)
    return write_report(
        iter_jsonl(out_dir / "metrics.jsonl"),
        read_jsonl(out_dir / "alerts.jsonl"),
        out_dir,
        title=title,
        summary=summary,
        rules=rules,
        curves=curves,
    )


# ----------------------------------------------------------- a static figure (matplotlib)


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("plot_metric needs matplotlib: pip install matplotlib") from None
    return Figure, FigureCanvasAgg


def plot_metric(name, metric_rows, alert_rows=(), *, rules=None):
    """Draw one metric over the stream as a static figure; return the matplotlib
    ``Figure`` (Agg canvas, no ``pyplot``), e.g. to save a PNG for a slide.

    One line per segment at x = the stream's events counted (``stream_n``, else
    ``n``); y labelled with the metric's name; the firing spans of the alerts of rules
    on this metric shaded, their pending spans hatched; a dashed line, labelled with
    the rule's name, at each fixed threshold of a rule on this metric.

    Runtime complexity: `O(m + a)` for ``m`` metric rows and ``a`` alert rows, plus
    the drawing.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    """
    from matplotlib.colors import to_rgba

    metric_rows = list(metric_rows)
    alert_rows = list(alert_rows)
    Figure, Canvas = _matplotlib()
    series = {}
    for row in metric_rows:
        values = row.get("values", {})
        if name not in values:
            continue
        v = values[name]
        xs, ys = series.setdefault(segment_key(row.get("segment")), ([], []))
        xs.append(_x(row))
        ys.append(math.nan if v is None else float(v))
    ns = [_x(r) for r in metric_rows] + [r.get("n") for r in alert_rows]
    ns = [n for n in ns if _is_num(n)]
    end_n = max(ns) if ns else None
    about = _rule_metrics(alert_rows, rules, metric_names(metric_rows))

    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    Canvas(fig)
    ax = fig.add_subplot()
    for i, (seg, (xs, ys)) in enumerate(series.items()):
        ax.plot(xs, ys, linewidth=1.4, marker="o" if len(xs) <= 30 else None, markersize=3,
                label=_seg_text(seg), color=_PALETTE[i % len(_PALETTE)])
    for state, spans in (("pending", pending_spans(alert_rows, end_n)),
                         ("firing", firing_spans(alert_rows, end_n))):
        for rule, seg, n0, n1 in spans:
            if about.get(rule, name) != name or n0 is None or n1 is None:
                continue
            n1 = max(n1, n0 + max(1, (end_n or n0) // 500))
            label = f"alert {rule} {state}" + ("" if seg is None else f" ({seg})")
            if state == "firing":
                ax.axvspan(n0, n1, facecolor=to_rgba("tab:red", 0.18), linewidth=0, label=label)
            else:
                ax.axvspan(n0, n1, facecolor=to_rgba("tab:orange", 0.05),
                           edgecolor=to_rgba("tab:orange", 0.5), hatch="//", linewidth=0,
                           label=label)
    for rule, value in _thresholds(alert_rows, rules).get(name, ()):
        ax.axhline(value, color="0.25", linestyle="--", linewidth=1.0, label=rule)
    ax.set_title(name)
    ax.set_ylabel(str(name))
    ax.set_xlabel("events counted (whole stream)")
    ax.grid(True, alpha=0.3)
    if end_n:
        ax.set_xlim(left=0, right=end_n)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small", framealpha=0.8)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ page style, script

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.text { text-align: left; max-width: 40em; }
td.details { font-size: 0.8em; color: #555; max-width: 50em; }
th { background: #f3f3f3; }
td.firing { color: #b00; font-weight: bold; }
td.pending { color: #b60; }
.none { color: #777; }
.plot { width: 100%; max-width: 1200px; }
.controls { margin: 0.5em 0; }
.controls label { margin-right: 1.2em; }
.grid { display: flex; flex-wrap: wrap; gap: 0.5em; }
.grid > div { width: 560px; max-width: 100%; }
.scroll { max-height: 28em; overflow: auto; }
"""

_JS = r"""
(function () {
  "use strict";
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31"];
  var VISIBLE = 10;
  var TABLE_ROWS = 100;
  var state = {axis: null, curve: 0, timeline: [], syncing: false, data: null, token: null, drawing: []};

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "undefined";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }
  function fmtTime(t) {
    if (typeof t !== "number") return "";
    return new Date(t * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }
  function color(i) { return COLORS[i % COLORS.length]; }
  function section(root, title, id) {
    var s = el("section", {id: id}); s.appendChild(el("h2", null, title)); root.appendChild(s); return s;
  }
  function table(parent, head, rows, cls) {
    var t = el("table", cls ? {"class": cls} : null), tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", null, h)); });
    t.appendChild(tr);
    rows.forEach(function (r) {
      var tr = el("tr");
      r.forEach(function (c) {
        if (c && typeof c === "object" && "text" in c) {
          var td = el("td", c.cls ? {"class": c.cls} : null, c.text); tr.appendChild(td);
        } else tr.appendChild(el("td", null, c));
      });
      t.appendChild(tr);
    });
    parent.appendChild(t);
    return t;
  }
  function useTime(D) { return D.time_axis && state.axis !== "events"; }
  function xs(D, item, key) {
    if (useTime(D)) return (item[key || "t"] || []).map(function (t) { return t === null ? null : new Date(t * 1000); });
    return item[key === "t" || !key ? "x" : key];
  }
  function spanX(D, s, which) {
    if (useTime(D)) { var t = s["t" + which]; return t === null || t === undefined ? null : new Date(t * 1000); }
    return s["x" + which];
  }
  function xTitle(D) { return useTime(D) ? "event time (UTC)" : "events counted (whole stream)"; }

  function timeLayout(D, layout) {
    // every timeline plot: the same margins, legend place and initial x range, so
    // that they line up one above the other (and zoom together, see syncZoom)
    layout.margin = {l: 230, r: 190, t: 36, b: 56};
    layout.legend = {x: 1.01, y: 1, xanchor: "left"};
    var r = useTime(D) ? D.t_range : D.x_range;
    layout.xaxis = layout.xaxis || {};
    layout.xaxis.title = {text: xTitle(D)};
    layout.xaxis.type = useTime(D) ? "date" : "linear";
    if (state.zoom) layout.xaxis.range = state.zoom.slice();  // the reader's zoom, kept
    else if (r && r[0] !== null && r[1] !== null) {
      layout.xaxis.range = useTime(D) ? [new Date(r[0] * 1000), new Date(r[1] * 1000)] : [r[0], r[1]];
    }
    return layout;
  }
  function plot(div, traces, layout) {
    layout.uirevision = "keep";
    layout.margin = layout.margin || {l: 60, r: 20, t: 36, b: 40};
    layout.hovermode = layout.hovermode || "x unified";
    state.drawing.push(Plotly.react(div, traces, layout, {responsive: true, displaylogo: false}));
  }
  function drawn(started) {
    // the page is drawn when every Plotly.react of this render has resolved: then
    // data-rendered (a time stamp) and data-render-ms are set (tests and benchmarks wait
    // for them)
    var ps = state.drawing;
    state.drawing = [];
    Promise.all(ps).then(function () {
      document.body.setAttribute("data-rendered", String(Date.now()));
      document.body.setAttribute("data-render-ms", String(Math.round(performance.now() - started)));
    });
  }

  function syncZoom(div) {
    if (div._seSynced) return;
    div._seSynced = true;
    div.on("plotly_relayout", function (ev) {
      if (state.syncing) return;
      var upd = null;
      if ("xaxis.range[0]" in ev) upd = {"xaxis.range": [ev["xaxis.range[0]"], ev["xaxis.range[1]"]]};
      else if (ev["xaxis.range"]) upd = {"xaxis.range": ev["xaxis.range"].slice()};
      else if (ev["xaxis.autorange"]) upd = {"xaxis.autorange": true};
      if (!upd) return;
      state.zoom = upd["xaxis.range"] || null;
      state.syncing = true;
      var ps = state.timeline.filter(function (d) { return d !== div; }).map(function (d) { return Plotly.relayout(d, upd); });
      Promise.all(ps).then(function () { state.syncing = false; }, function () { state.syncing = false; });
    });
  }

  function shownSegments(D) {
    // the segments whose lines are drawn: the most troubled VISIBLE ones, or those
    // picked in the page (kept, by label, across the live page's redraws)
    if (state.shown) {
      var picked = D.drawn.filter(function (i) { return state.shown.indexOf(D.segments[i].label) >= 0; });
      if (picked.length) return picked;
    }
    return D.drawn.slice(0, VISIBLE);
  }
  function isShown(D, i) { return shownSegments(D).indexOf(i) >= 0; }

  function plotted(D) {
    // an estimated_<metric> is drawn in its metric's plot when both exist
    var est = D.estimated || {}, twins = {};
    Object.keys(est).forEach(function (m) { twins[est[m]] = true; });
    return D.metrics.filter(function (m) { return !twins[m]; });
  }

  function metricPlot(D, name, div) {
    var traces = [];
    var est = (D.estimated || {})[name];
    (est ? D.series[est] || [] : []).forEach(function (s) {
      if (!isShown(D, s.seg)) return;
      var seg = D.segments[s.seg], c = color(s.seg), x = xs(D, s);
      if (s.lo && s.hi) {
        traces.push({x: x, y: s.hi, mode: "lines", line: {width: 0}, showlegend: false,
                     hoverinfo: "skip", legendgroup: seg.label + " est"});
        traces.push({x: x, y: s.lo, mode: "lines", line: {width: 0}, fill: "tonexty",
                     fillcolor: c + "1a", showlegend: false, hoverinfo: "skip", legendgroup: seg.label + " est"});
      }
      traces.push({x: x, y: s.y, mode: "lines", name: seg.label + " (" + est + ")", legendgroup: seg.label + " est",
                   line: {color: c, width: 1.3, dash: "dash"}, connectgaps: false});
    });
    (D.series[name] || []).forEach(function (s) {
      if (!isShown(D, s.seg)) return;
      var seg = D.segments[s.seg], c = color(s.seg);
      var vis = true;
      var x = xs(D, s);
      // SVG, not WebGL: a browser without a GPU (headless, remote desktops) draws
      // scattergl traces as an empty plot; a timeline holds a few thousand points
      var kind = "scatter";
      if (s.lo && s.hi) {
        traces.push({x: x, y: s.hi, mode: "lines", line: {width: 0}, showlegend: false,
                     hoverinfo: "skip", legendgroup: seg.label, visible: vis, type: kind});
        traces.push({x: x, y: s.lo, mode: "lines", line: {width: 0}, fill: "tonexty",
                     fillcolor: c + "33", name: seg.label + " interval", legendgroup: seg.label,
                     showlegend: false, hoverinfo: "skip", visible: vis, type: kind});
      }
      traces.push({x: x, y: s.y, mode: "lines", name: seg.label, line: {color: c, width: 1.6},
                   legendgroup: seg.label, visible: vis, connectgaps: false, type: kind});
    });
    var shapes = [], ann = [];
    (D.thresholds[name] || []).forEach(function (th) {
      shapes.push({type: "line", xref: "paper", x0: 0, x1: 1, y0: th[1], y1: th[1],
                   line: {dash: "dash", color: "#444", width: 1}});
      ann.push({xref: "paper", x: 1, y: th[1], text: th[0], showarrow: false,
                xanchor: "right", yanchor: "bottom", font: {size: 10, color: "#444"}});
    });
    D.lanes.forEach(function (ln) {
      if (ln.metric !== name) return;
      ln.spans.forEach(function (s) {
        var x0 = spanX(D, s, 0), x1 = spanX(D, s, 1);
        if (x0 === null || x1 === null) return;
        shapes.push({type: "rect", xref: "x", yref: "paper", x0: x0, x1: x1, y0: 0, y1: 1,
                     fillcolor: s.state === "firing" ? "rgba(214,39,40,0.13)" : "rgba(255,127,14,0.07)",
                     line: {width: 0}, layer: "below"});
      });
    });
    var pts = (D.alert_points || []).filter(function (p) { return p.metric === name; });
    if (pts.length) {
      var withIv = pts.filter(function (p) { return p.lo !== null && p.hi !== null; });
      traces.push({x: pts.map(function (p) { return useTime(D) ? (p.t === null ? null : new Date(p.t * 1000)) : p.x; }),
                   y: pts.map(function (p) { return p.value; }), mode: "markers", name: "alert transitions",
                   marker: {symbol: "diamond", size: 8, color: pts.map(function (p) { return p.state === "firing" ? "#d62728" : p.state === "pending" ? "#ff9f40" : "#2ca02c"; })},
                   error_y: withIv.length ? {type: "data", symmetric: false, color: "#555",
                     array: pts.map(function (p) { return p.hi === null ? 0 : p.hi - p.value; }),
                     arrayminus: pts.map(function (p) { return p.lo === null ? 0 : p.value - p.lo; })} : undefined,
                   text: pts.map(function (p) { return p.rule + " " + p.state + (p.segment === null ? "" : " (" + p.segment + ")") +
                                                (p.lo !== null ? ": interval [" + fmt(p.lo) + ", " + fmt(p.hi) + "]" : ""); }),
                   hoverinfo: "text+y"});
    }
    D.lanes.forEach(function (ln) {
      if (ln.metric !== name || !ln.marks) return;
      ln.marks.forEach(function (m) {
        var x = useTime(D) ? (m.t === null ? null : new Date(m.t * 1000)) : m.x;
        if (x === null) return;
        shapes.push({type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1,
                     line: {dash: "dot", color: "#d62728", width: 1}});
      });
    });
    var log = /p_value$/.test(name);
    plot(div, traces, timeLayout(D, {title: {text: name, font: {size: 14}}, height: 290, shapes: shapes,
                       annotations: ann, yaxis: {title: {text: name}, type: log ? "log" : "linear"}}));
  }

  function lanePlot(D, div) {
    var traces = [], labels = [];
    D.lanes.forEach(function (ln, i) {
      var seg = ln.seg === null ? "" : " · " + D.segments[ln.seg].label;
      labels.push(ln.rule + seg);
    });
    ["pending", "firing"].forEach(function (st) {
      var x = [], y = [], text = [];
      D.lanes.forEach(function (ln, i) {
        ln.spans.forEach(function (s) {
          if (s.state !== st) return;
          var x0 = spanX(D, s, 0), x1 = spanX(D, s, 1);
          if (x0 === null || x1 === null) return;
          var h = ln.rule + (ln.seg === null ? "" : " (" + D.segments[ln.seg].label + ")") + ": " + st +
                  " from n=" + s.x0 + " to n=" + s.x1;
          x.push(x0, x1, null); y.push(i, i, null); text.push(h, h, null);
        });
      });
      traces.push({x: x, y: y, mode: "lines+markers", name: st, text: text, hoverinfo: "text",
                   marker: {size: 5, color: st === "firing" ? "#d62728" : "#ff9f40"},
                   line: {width: st === "firing" ? 9 : 5, color: st === "firing" ? "#d62728" : "#ff9f40"}});
    });
    var mx = [], my = [], mt = [];
    D.lanes.forEach(function (ln, i) {
      (ln.marks || []).forEach(function (m) {
        var x = useTime(D) ? (m.t === null ? null : new Date(m.t * 1000)) : m.x;
        if (x === null) return;
        mx.push(x); my.push(i); mt.push(m.text);
      });
    });
    if (mx.length) traces.push({x: mx, y: my, text: mt, hoverinfo: "text", mode: "markers", name: "estimated change start",
                                marker: {symbol: "triangle-right", size: 11, color: "#7b4173"}});
    plot(div, traces, timeLayout(D, {title: {text: "alerts (one lane per rule and segment)", font: {size: 14}},
                       height: 110 + 26 * Math.max(1, D.lanes.length), hovermode: "closest",
                       yaxis: {tickmode: "array", tickvals: labels.map(function (_, i) { return i; }),
                               ticktext: labels.map(function (l) { return l.length > 36 ? l.slice(0, 35) + "…" : l; }),
                               range: [labels.length - 0.5, -0.5], fixedrange: true}}));
  }

  function volumePlot(D, div) {
    var traces = [], anyCov = false;
    D.volume.forEach(function (v) {
      if (!isShown(D, v.seg)) return;
      var seg = D.segments[v.seg];
      traces.push({x: xs(D, v), y: v.events, mode: "lines", name: seg.label, line: {color: color(v.seg), width: 1.2}});
      if (v.coverage && v.coverage.length) {
        anyCov = true;
        var cx = v.coverage.map(function (c) { return useTime(D) ? (c.t === null ? null : new Date(c.t * 1000)) : c.x; });
        traces.push({x: cx, y: v.coverage.map(function (c) { return c.share; }), mode: "lines", yaxis: "y2",
                     name: seg.label + " labelled share", line: {color: color(v.seg), dash: "dot", width: 1.4},
                     text: v.coverage.map(function (c) {
                       return fmt(c.labelled) + " labelled of " + fmt(c.predictions) + " predictions; " +
                              fmt(c.pending) + " pending, " + fmt(c.expired) + " expired"; }),
                     hovertemplate: "%{y:.1%}: %{text}<extra>" + seg.label + "</extra>"});
      }
    });
    var lay = {title: {text: anyCov ? "volume (events per evaluation) and label coverage (labelled share of predictions), by segment"
                                    : "volume: events per evaluation, by segment", font: {size: 14}},
               height: 270, yaxis: {title: {text: "events"}, rangemode: "tozero"}};
    if (anyCov) lay.yaxis2 = {title: {text: "labelled share"}, overlaying: "y", side: "right", range: [0, 1.02], tickformat: ".0%"};
    plot(div, traces, timeLayout(D, lay));
  }

  function curves(D, root) {
    var s = section(root, "Curves, confusion matrix, score distribution, calibration", "se-curves");
    if (!D.curves || !D.curves.length) {
      s.appendChild(el("p", {"class": "none"}, "No score summaries (they come from a Monitor holding roc_auc or average_precision)."));
      return;
    }
    // a segment picker, and a slider over the times at which that segment's summaries
    // were taken (the end of the stream last)
    var groups = {}, segOrder = [];
    D.curves.forEach(function (c, i) {
      var k = JSON.stringify(c.segment);
      if (!(k in groups)) { groups[k] = []; segOrder.push(k); }
      groups[k].push(i);
    });
    segOrder.forEach(function (k) {
      groups[k].sort(function (a, b) { return (D.curves[a].stream_n - D.curves[b].stream_n) || (a - b); });
    });
    var ctl = el("div", {"class": "controls"}), lab = el("label", null, "segment: ");
    var sel = el("select", {id: "se-curve-segment"});
    var cur = JSON.stringify((D.curves[state.curve] || D.curves[0]).segment);
    segOrder.forEach(function (k) {
      var c = D.curves[groups[k][0]];
      var o = el("option", {value: k}, c.segment === null ? "all events" : "segment " + c.segment);
      if (k === cur) o.selected = true;
      sel.appendChild(o);
    });
    lab.appendChild(sel); ctl.appendChild(lab);
    var lab2 = el("label", null, "time: ");
    var slider = el("input", {type: "range", id: "se-curve-time", min: "0", step: "1"});
    var what = el("span", {id: "se-curve-label"});
    lab2.appendChild(slider); ctl.appendChild(lab2); ctl.appendChild(what); s.appendChild(ctl);
    function setSegment(k, keepLast) {
      var idx = groups[k];
      slider.max = String(idx.length - 1);
      var at = idx.indexOf(state.curve);
      if (at < 0 || keepLast) {  // the end of the stream: the latest summary
        at = idx.length - 1;
        for (var j = idx.length - 1; j >= 0; j--) if (/^end/.test(D.curves[idx[j]].label)) { at = j; break; }
      }
      slider.value = String(at);
      slider.disabled = idx.length < 2;
      state.curve = idx[at];
    }
    setSegment(cur, false);
    var grid = el("div", {"class": "grid"});
    var ids = ["se-roc", "se-pr", "se-confusion", "se-hist", "se-calibration"];
    ids.forEach(function (id) { grid.appendChild(el("div", {id: id})); });
    s.appendChild(grid);
    function draw() {
      var c = state.data.curves[state.curve];
      what.textContent = curveLabel(c);
      document.getElementById("se-curves").setAttribute("data-curve", String(state.curve));
      var small = {margin: {l: 55, r: 15, t: 36, b: 45}, height: 340, hovermode: "closest"};
      function L(o) { var r = {}; for (var k in small) r[k] = small[k]; for (k in o) r[k] = o[k]; return r; }
      plot(document.getElementById("se-roc"), [
        {x: c.roc.fpr, y: c.roc.tpr, mode: "lines", name: "ROC", text: c.roc.thr.map(function (t) { return "threshold " + fmt(t); })},
        {x: [0, 1], y: [0, 1], mode: "lines", line: {dash: "dot", color: "#999"}, name: "chance", hoverinfo: "skip"}],
        L({title: {text: "ROC (AUC " + fmt(c.auc) + ")", font: {size: 14}}, xaxis: {title: {text: "false positive rate"}}, yaxis: {title: {text: "true positive rate"}}}));
      plot(document.getElementById("se-pr"), [
        {x: c.pr.recall, y: c.pr.precision, mode: "lines", name: "PR", text: c.pr.thr.map(function (t) { return "threshold " + fmt(t); })}],
        L({title: {text: "precision-recall", font: {size: 14}}, xaxis: {title: {text: "recall"}}, yaxis: {title: {text: "precision"}}}));
      var m = c.confusion;
      plot(document.getElementById("se-confusion"), [{type: "heatmap", z: [[m.tp, m.fn], [m.fp, m.tn]],
        x: ["predicted positive", "predicted negative"], y: ["actual positive", "actual negative"],
        text: [["TP " + fmt(m.tp), "FN " + fmt(m.fn)], ["FP " + fmt(m.fp), "TN " + fmt(m.tn)]],
        texttemplate: "%{text}", colorscale: "Blues", reversescale: true, showscale: false}],
        L({title: {text: "confusion matrix (score >= " + fmt(m.threshold) + ")", font: {size: 14}},
           yaxis: {autorange: "reversed", automargin: true}}));
      if (c.hist) {
        var mids = c.hist.pos.map(function (_, i) { return (c.hist.edges[i] + c.hist.edges[i + 1]) / 2; });
        plot(document.getElementById("se-hist"), [
          {type: "bar", x: mids, y: c.hist.neg, name: "negatives", marker: {color: "#1f77b4"}, opacity: 0.7},
          {type: "bar", x: mids, y: c.hist.pos, name: "positives", marker: {color: "#d62728"}, opacity: 0.7}],
          L({title: {text: "score distribution by class", font: {size: 14}}, barmode: "overlay", bargap: 0,
             xaxis: {title: {text: "score"}}, yaxis: {title: {text: "events (weight)"}}}));
      }
      var cal = document.getElementById("se-calibration");
      if (c.calibration) {
        plot(cal, [
          {x: c.calibration.score, y: c.calibration.rate, mode: "lines+markers", name: "observed",
           text: c.calibration.weight.map(function (w) { return fmt(w) + " events"; })},
          {x: [0, 1], y: [0, 1], mode: "lines", line: {dash: "dot", color: "#999"}, name: "perfectly calibrated", hoverinfo: "skip"}],
          L({title: {text: "reliability (calibration)", font: {size: 14}}, xaxis: {title: {text: "mean score in bin"}, range: [0, 1]},
             yaxis: {title: {text: "share of positives"}, range: [0, 1]}}));
      } else { Plotly.purge(cal); cal.textContent = "No reliability curve: scores outside [0, 1]."; }
    }
    sel.addEventListener("change", function () { setSegment(sel.value, true); draw(); });
    slider.addEventListener("input", function () {
      state.curve = groups[sel.value][Number(slider.value)]; draw(); drawn(performance.now());
    });
    state.drawCurves = function () { setSegment(sel.value, false); draw(); };
    draw();
  }
  function curveLabel(c) {
    var seg = c.segment === null ? "all events" : "segment " + c.segment;
    return seg + ", " + c.label + " (" + fmt(c.events) + " events; stream at n=" + c.stream_n + (c.t ? ", " + fmtTime(c.t) : "") + ")";
  }

  function fillSummary(box, D) {
    box.textContent = "";
    if (D.summary && Object.keys(D.summary).length) {
      table(box, ["fact", "value"], Object.keys(D.summary).map(function (k) { return [k, fmt(D.summary[k])]; }), "se-summary");
    }
  }
  function fillSegments(box, D) {
    box.textContent = "";
    if (!D.segments.length) { box.appendChild(el("p", {"class": "none"}, "No metric rows.")); return; }
    var head = ["segment", "events (n)", "alerts fired", "largest drop"];
    var anyT = D.segments.some(function (s) { return typeof s.t === "number"; });
    if (anyT) head.push("last event time");
    var div = el("div", {"class": "scroll"});
    // the most troubled TABLE_ROWS segments, the others on demand: every plot drawn
    // after this table lays out the whole page again, so a table of a thousand rows
    // would cost each plot its layout
    var rows = state.allSegments ? D.segments : D.segments.slice(0, TABLE_ROWS);
    table(div, head.concat(D.metrics), rows.map(function (s) {
      var r = [s.label, fmt(s.n), {text: String(s.alerts), cls: s.alerts ? "firing" : ""}, fmt(s.drop)];
      if (anyT) r.push(fmtTime(s.t));
      return r.concat(D.metrics.map(function (m) { return fmt(s.values[m]); }));
    }), "se-segment-table");
    box.appendChild(div);
    if (rows.length < D.segments.length) {
      var more = el("button", {type: "button", id: "se-all-segments"},
                    "show all " + D.segments.length + " segments");
      more.addEventListener("click", function () { state.allSegments = true; fillSegments(box, state.data); });
      box.appendChild(el("p", {"class": "none"}, rows.length + " of " + D.segments.length +
                         " segments, the most troubled first. ")).appendChild(more);
    }
  }
  function fillAlerts(box, D) {
    box.textContent = "";
    if (!D.alerts.length) { box.appendChild(el("p", {"class": "none"}, "No alert fired.")); return; }
    // the transition's own fields; its explanation (message) in words; every other
    // field it carries (threshold, baseline, interval, change start...) as details
    var base = {rule: 1, state: 1, n: 1, t: 1, value: 1, segment: 1, message: 1};
    var anyMsg = D.alerts.some(function (a) { return a.message !== undefined; });
    var anyMore = D.alerts.some(function (a) { return Object.keys(a).some(function (k) { return !(k in base); }); });
    var div = el("div", {"class": "scroll"});
    var head = ["rule", "state", "n", "event time", "value", "segment"];
    if (anyMsg) head.push("explanation");
    if (anyMore) head.push("details");
    table(div, head, D.alerts.map(function (a) {
      var r = [a.rule, {text: a.state, cls: a.state}, fmt(a.n), fmtTime(a.t), fmt(a.value), a.segment === null ? "" : String(a.segment)];
      if (anyMsg) r.push({text: a.message === undefined ? "" : String(a.message), cls: "text"});
      if (anyMore) r.push({text: Object.keys(a).filter(function (k) { return !(k in base) && a[k] !== null; })
                               .map(function (k) { return k + ": " + fmt(a[k]); }).join("; "), cls: "text details"});
      return r;
    }), "se-alert-table");
    box.appendChild(div);
  }
  function dsNote(D) {
    var ds = D.downsample;
    return ds.rows + " rows drawn as " + ds.points + " points (" + ds.method + "); timelines of " +
        ds.segments_drawn + " of " + ds.segments + " segments (the most troubled), " + shownSegments(D).length +
        " shown: pick others above; click a legend entry to hide a line.";
  }
  function shapeKey(D) {
    // what the page's layout depends on: the same shape is redrawn in place
    return JSON.stringify([D.title, D.metrics, D.time_axis, D.lanes.length > 0, D.lanes_total > D.lanes.length,
      D.volume.length > 0, (D.curves || []).map(function (c) { return [c.segment, c.label]; }),
      D.drawn.map(function (i) { return D.segments[i].label; }), state.axis, state.shown]);
  }
  function update(D) {
    // new data of the same shape: tables refilled, plots redrawn in place (Plotly.react
    // keeps each plot's zoom), the curve picked kept
    state.data = D;
    fillSummary(document.getElementById("se-summary-box"), D);
    fillSegments(document.getElementById("se-segments-box"), D);
    fillAlerts(document.getElementById("se-alerts-box"), D);
    document.getElementById("se-ds-note").textContent = dsNote(D);
    plotted(D).forEach(function (name, i) { metricPlot(D, name, document.getElementById("se-metric-" + i)); });
    if (D.lanes.length) lanePlot(D, document.getElementById("se-lanes"));
    if (D.volume.length) volumePlot(D, document.getElementById("se-volume"));
    if (D.curves && D.curves.length) state.drawCurves();
  }

  function render(D) {
    var started = performance.now();
    var key = shapeKey(D);
    if (key === state.key) {
      update(D);
      drawn(started);
      return;
    }
    state.key = key;
    state.data = D;
    var root = document.getElementById("se-root");
    var scrollY = window.scrollY;
    state.timeline.forEach(function (d) { Plotly.purge(d); });
    state.timeline = [];
    root.textContent = "";
    document.getElementById("se-title").textContent = D.title;
    document.title = D.title;
    var sb = el("div", {id: "se-summary-box"});
    root.appendChild(sb); fillSummary(sb, D);
    var segs = section(root, "Segments, most troubled first", "se-segments");
    var gb = el("div", {id: "se-segments-box"});
    segs.appendChild(gb); fillSegments(gb, D);
    var tl = section(root, "Metrics over time", "se-timeline");
    var ctl = el("div", {"class": "controls"});
    if (D.time_axis) {
      var lab = el("label", null, "x axis: "), sel = el("select", {id: "se-axis"});
      [["time", "event time"], ["events", "events counted"]].forEach(function (o) {
        var op = el("option", {value: o[0]}, o[1]);
        if ((state.axis || "time") === o[0]) op.selected = true;
        sel.appendChild(op);
      });
      sel.addEventListener("change", function () {
        state.axis = sel.value; state.key = null; state.zoom = null; render(state.data);
      });
      lab.appendChild(sel); ctl.appendChild(lab);
    }
    if (D.drawn.length > 1) {
      var lab2 = el("label", null, "segments: "), pick = el("select", {id: "se-segments", multiple: "multiple", size: "4"});
      var shown = shownSegments(D);
      D.drawn.forEach(function (i) {
        var op = el("option", {value: D.segments[i].label}, D.segments[i].label + (D.segments[i].alerts ? " (" + D.segments[i].alerts + " alerts)" : ""));
        if (shown.indexOf(i) >= 0) op.selected = true;
        pick.appendChild(op);
      });
      pick.addEventListener("change", function () {
        state.shown = Array.from(pick.selectedOptions).map(function (o) { return o.value; });
        state.key = null;
        render(state.data);
      });
      lab2.appendChild(pick); ctl.appendChild(lab2);
    }
    ctl.appendChild(el("p", {"class": "none", id: "se-ds-note"}, dsNote(D)));
    tl.appendChild(ctl);
    if (!D.metrics.length) tl.appendChild(el("p", {"class": "none"}, "No metric rows."));
    plotted(D).forEach(function (name, i) {
      var d = el("div", {"class": "plot se-metric", id: "se-metric-" + i, "data-metric": name});
      tl.appendChild(d); metricPlot(D, name, d); state.timeline.push(d);
    });
    var lanes = el("div", {"class": "plot", id: "se-lanes"});
    tl.appendChild(lanes);
    if (D.lanes.length) {
      lanePlot(D, lanes); state.timeline.push(lanes);
      if (D.lanes_total > D.lanes.length) tl.appendChild(el("p", {"class": "none"}, D.lanes.length + " of " + D.lanes_total + " alert lanes shown."));
    } else lanes.appendChild(el("p", {"class": "none"}, "No alert fired."));
    if (D.volume.length) {
      var vol = el("div", {"class": "plot", id: "se-volume"});
      tl.appendChild(vol); volumePlot(D, vol); state.timeline.push(vol);
    }
    state.timeline.forEach(syncZoom);

    var al = section(root, "Alerts", "se-alerts");
    var ab = el("div", {id: "se-alerts-box"});
    al.appendChild(ab); fillAlerts(ab, D);
    if (state.curve >= (D.curves || []).length) state.curve = 0;
    curves(D, root);
    window.scrollTo(0, scrollY);
    drawn(started);
  }

  function askToken(url) {
    // the data needs the service's bearer token: asked once, kept in this page only
    var root = document.getElementById("se-root");
    root.textContent = "";
    var f = el("form", {id: "se-token-form"});
    f.appendChild(el("p", null, "This service needs its bearer token to show its data" +
                     (state.token ? " (the token given was refused)." : ".")));
    var input = el("input", {type: "password", id: "se-token", autocomplete: "off", size: "40"});
    f.appendChild(input);
    f.appendChild(el("button", {type: "submit", id: "se-token-go"}, "Show"));
    f.addEventListener("submit", function (ev) {
      ev.preventDefault();
      state.token = input.value;
      root.textContent = "";
      root.appendChild(el("p", {"class": "none"}, "Loading..."));
      poll(url);
    });
    root.appendChild(f);
    input.focus();
  }

  function poll(url) {
    var headers = {};
    if (state.token) headers.Authorization = "Bearer " + state.token;
    fetch(url, {headers: headers, cache: "no-store"}).then(function (r) {
      if (r.status === 401) { askToken(url); return "asked"; }
      if (!r.ok) throw new Error(url + ": HTTP " + r.status);
      return r.text();
    }).then(function (text) {
      if (text === "asked") return;
      var took = 0;
      if (text !== state.lastText) {  // unchanged data: nothing to redraw
        state.lastText = text;
        var t0 = performance.now();
        render(JSON.parse(text));
        took = performance.now() - t0;
      }
      // every 2 s, or less often when drawing takes long: the page stays usable
      setTimeout(function () { poll(url); }, Math.max(2000, 3 * took));
    }).catch(function (e) {
      var root = document.getElementById("se-root");
      var p = document.getElementById("se-error") || el("p", {id: "se-error", "class": "none"});
      p.textContent = String(e) + " (retrying)"; root.insertBefore(p, root.firstChild);
      setTimeout(function () { poll(url); }, 5000);
    });
  }

  var cfg = JSON.parse(document.getElementById("se-config").textContent);
  if (cfg.live) poll(cfg.live);
  else render(JSON.parse(document.getElementById("se-data").textContent));
})();
"""
