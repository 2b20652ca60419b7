"""The evaluator: where a stream is evaluated, and what an evaluation writes.

:func:`evaluation_points` finds, for a batch about to be counted, the positions after
which the Monitor evaluates (every ``every`` events; before the first event of each new
period of ``every_seconds`` of event time). :class:`Evaluator` turns a list of scopes
(:class:`~streameval.monitor.scopes.Scope`) into one metrics row per scope and the alert
transitions of their rules, and sends them to its sinks (``on_metrics``, ``on_alert``).
It keeps no state of its own beyond its sinks: the Monitor calls it at its evaluation
points, and Spark's replay calls it with scopes whose metrics it merged from partition
states.

Row and transition formats are described in :mod:`streameval.monitor`.

Imports: numpy, the standard library, :mod:`streameval.monitor.explain` (the
explanation fields of a transition), :func:`streameval.metrics.base.has_interval` and
:func:`streameval.metrics.calibration.apply_refits` (a scope's calibration refits take
effect at its rows); it reads scopes through their public methods, and drops a scope's
cached values when a refit changed them.
"""

from __future__ import annotations

import numpy as np

from streameval.metrics.base import has_interval
from streameval.metrics.calibration import apply_refits
from streameval.monitor.explain import alarm_input, explain

__all__ = ["Evaluator", "evaluation_points", "row_intervals", "ROW_INTERVAL_LEVEL"]

#: confidence level of the ``"intervals"`` a metrics row carries
ROW_INTERVAL_LEVEL = 0.95


def row_intervals(metrics, values, as_of):
    """``{name: [lo, hi]}``: the :data:`ROW_INTERVAL_LEVEL` confidence interval of each
    metric that has one (:func:`~streameval.metrics.base.has_interval`: Wilson with
    continuity correction for the proportions, DeLong on the logit scale for ROCAUC and
    Gini, their windows), for the values computed now
    (a held value, in ``as_of``, has none) and defined; empty when none is.

    A cumulative metric whose read costs `O(d)` (it declares ``read_size``: a Monitor's
    cumulative ROCAUC or Gini, where DeLong's variance is another pass over the ``d``
    distinct scores) has none in rows: ``interval(level)`` on the metric, or the
    Monitor's snapshot, gives it on demand; its windows' intervals are in the rows.

    Runtime complexity: one ``interval`` per metric that gets one (`O(1)` for a
    proportion; a window's over its events).

    >>> import streameval as se
    >>> r = se.Recall().update_many([1, 1, 0], [0.9, 0.2, 0.7])
    >>> {k: [round(v, 4) for v in iv] for k, iv in row_intervals({"recall": r}, {"recall": 0.5}, {}).items()}
    {'recall': [0.0267, 0.9733]}
    """
    out = {}
    for name, m in metrics.items():
        if name in as_of or values.get(name) is None or not has_interval(m):
            continue
        if getattr(m, "read_size", None) is not None:
            continue
        lo, hi = m.interval(ROW_INTERVAL_LEVEL)
        if lo == lo and hi == hi:  # (NaN: no variance estimate)
            out[name] = [lo, hi]
    return out


def evaluation_points(n, t, times, m, every, every_seconds):
    """The evaluation points inside a batch of ``m`` events: the sorted, distinct ``p``
    such that the stream is evaluated after the batch's first ``p`` events.

    ``n`` and ``t`` are the stream's count and newest event time (None: none yet)
    before the batch, ``times`` its event times (float64, NaN: unknown; None: no
    times). A point ``p`` from ``every`` is a multiple of ``every`` in ``n + p``; a
    point from ``every_seconds`` is before the first event whose time enters a new
    period of the running newest time (periods aligned to multiples of
    ``every_seconds``). Two triggers at the same ``p`` give one point.

    Runtime complexity: `O(m)`, numpy.

    >>> evaluation_points(3, None, None, 10, every=4, every_seconds=None)
    [1, 5, 9]
    >>> import numpy as np
    >>> evaluation_points(0, 5.0, np.array([6.0, 11.0, 12.0, 25.0]), 4, every=0, every_seconds=10)
    [1, 3]
    """
    points = []
    if every:
        first = every - n % every
        points.append(np.arange(first, m + 1, every))
    if every_seconds is not None:
        prev = np.nan if t is None else t
        before = np.fmax.accumulate(np.concatenate(([prev], times[:-1])))
        with np.errstate(invalid="ignore"):
            trig = np.floor_divide(times, every_seconds) > np.floor_divide(before, every_seconds)
        points.append(np.flatnonzero(trig))
    if len(points) > 1:
        return np.unique(np.concatenate(points)).tolist()
    # (one trigger: its points are distinct and ascending already)
    return points[0].tolist() if points else []


class Evaluator:
    """Rows and alert transitions of given scopes, sent to sinks.

    ``on_metrics`` and ``on_alert`` are lists of callables, each called with a fresh
    JSON-ready dict per row or transition; ``late`` names the windows by period whose
    late counts the rows carry (``"late": {name: count}``).

    Runtime complexity: :meth:`evaluate` is one ``get`` per metric and one ``report``
    per drift test of each scope that counted events since its last row, plus `O(1)`
    per rule; a segment that counted none (idle) costs `O(rules)` and writes no row (its
    last row still holds). A cumulative value whose read costs `O(n)` is recomputed at a
    cadence on long streams (:data:`~streameval.monitor.scopes.HOLD_FROM`): rows then
    carry ``as_of`` ``{name: n}``, the count the value covers; values that are not exact
    (a coarsened score order, bins) carry ``error_bounds`` ``{name: bound}``; values with
    a confidence interval carry it in ``intervals`` ``{name: [lo, hi]}``
    (:data:`ROW_INTERVAL_LEVEL`, :func:`row_intervals`).

    >>> import streameval as se
    >>> from streameval.alerts import Threshold
    >>> from streameval.monitor.scopes import Scope
    >>> sc = Scope(None, None, {"recall": se.Recall()}, {}, [Threshold("recall", "<", 0.6)])
    >>> sc.update(True, 0.9, 1.0, None); sc.update(True, 0.1, 1.0, None)
    >>> rows, alerts = [], []
    >>> Evaluator([rows.append], [alerts.append]).evaluate([sc], n=2, t=None)
    >>> [(k, v) for k, v in rows[0].items() if k != "intervals"]
    [('n', 2), ('t', None), ('segment', None), ('values', {'recall': 0.5})]
    >>> [round(v, 4) for v in rows[0]["intervals"]["recall"]], [(a["state"], a["n"]) for a in alerts]
    ([0.0267, 0.9733], [('firing', 2)])
    """

    __slots__ = ("on_metrics", "on_alert", "late")

    def __init__(self, on_metrics=None, on_alert=None, late=()):
        self.on_metrics = [] if on_metrics is None else on_metrics
        self.on_alert = [] if on_alert is None else on_alert
        self.late = list(late)

    def rows(self, scopes, n, t, fresh=False):
        """``(rows, values, reports)``: one metrics row per scope (the whole stream's
        ``n`` is ``n``; a segment's is its own, with ``stream_n``), and each scope's
        values and drift reports, read once."""
        reports = [sc.reports() for sc in scopes]
        late = self.late
        rows = []
        values = []
        for sc, reps in zip(scopes, reports):
            vals, bounds, as_of = sc.read(reps, fresh)
            if apply_refits(sc.metrics):  # (a new calibration map, from this row on)
                sc.forget_read()
            values.append(vals)
            # a segment row counts the segment's events; stream_n places it in the stream
            row = ({"n": n, "t": t, "segment": None, "values": vals} if sc.key is None else
                   {"n": sc.n, "stream_n": n, "t": t, "segment": sc.label, "values": vals})
            if late:
                row["late"] = sc.late(late)
            coverage = sc.coverage()
            if coverage is not None:  # (predictions counted before their labels)
                row["coverage"] = coverage
            if bounds:
                row["error_bounds"] = bounds
            if as_of:
                row["as_of"] = as_of
            ivs = row_intervals(sc.metrics, vals, as_of)
            if ivs:
                row["intervals"] = ivs
            if sc.idle():
                row["idle"] = True  # (read for its rules only: evaluate drops the row)
            rows.append(row)
            sc.eval_n = sc.n
        return rows, values, reports

    def transitions(self, scopes, values, reports, n, t):
        """The alert transitions of every scope's rules at ``n`` and ``t`` (each rule
        evaluated once, in order: scope by scope, rule by rule)."""
        return list(self._transitions(scopes, values, reports, n, t))

    @staticmethod
    def _transitions(scopes, values, reports, n, t):
        for sc, vals, reps in zip(scopes, values, reports):
            for rule in sc.rules:
                kind = rule.kind
                if kind == "drift":
                    value = sc.rule_input(rule.metric, reps[rule.metric])
                elif kind == "alarm":
                    value = alarm_input(rule, sc, reps[rule.metric])
                elif getattr(rule, "confidence", None) is not None:
                    lo, hi = sc.metrics[rule.metric].interval(rule.confidence)
                    value = {"value": vals[rule.metric], "low": lo, "high": hi}
                else:
                    value = vals[rule.metric]
                tr = rule.evaluate(value, n=n, t=t, samples=sc.n)
                if tr is not None:
                    tr["segment"] = sc.label
                    tr.update(explain(rule, tr, sc, reps))  # the explanation fields
                    yield tr

    def evaluate(self, scopes, n, t, fresh=False):
        """One evaluation point: a row per scope to ``on_metrics`` (every row first), then
        the rules' transitions to ``on_alert``. ``n`` is the stream's count, ``t`` its
        newest event time (None: none); ``fresh``: every value computed now (the end of
        a stream), none held."""
        # idle segments (no event since their last row) write no row; their rules are
        # evaluated only while one is pending or firing (their inputs did not change)
        scopes = [sc for sc in scopes if not sc.idle()
                  or any(r.active is not None for r in sc.rules)]
        rows, values, reports = self.rows(scopes, n, t, fresh)
        rows = [row for row in rows if not row.pop("idle", False)]
        for row in rows:
            for cb in self.on_metrics:
                cb(dict(row, values=dict(row["values"])))
        for tr in self._transitions(scopes, values, reports, n, t):  # sent as they occur
            for cb in self.on_alert:
                cb(dict(tr))
