"""What an alert transition rests on: the scope's side of an alert's explanation.

A rule knows its own parameters and what it read (:meth:`streameval.alerts.Rule.explain`);
the scope knows the rest: what the rule's metric covers (its window, in words), the
labelled events its value rests on, and the value's interval. :func:`explain` reads
them from the scope's objects, only when a rule makes a transition (never per
evaluation), and returns the new fields of the transition's record.

An alarm rule reads more than its detector's report at every evaluation
(:func:`alarm_input`): the scope's cumulative confusion counts (:func:`scope_counts`),
from which it learns a
declared baseline period and, at a transition, what the traffic did (prevalence,
recall and FPR before and after the change).

Imports: the standard library, :mod:`streameval.windows` (to tell a window's kind);
it reads the scope and the rule through their public attributes.
"""

from __future__ import annotations

import math

from streameval.windows import Tumbling

__all__ = ["explain", "describe_window", "events_behind", "DEFAULT_LEVEL", "alarm_input",
           "scope_counts", "check_alarm"]

#: the level of the interval shown beside a value when the rule has no ``confidence``
DEFAULT_LEVEL = 0.95


def _n(x):
    return x if isinstance(x, int) else int(x)


def describe_window(obj):
    """What a metric (or window, or drift test) covers, in words: ``"all events"``,
    ``"last 10000 events"``, ``"last 21600 s of event time"``, ``"tumbling windows
    of 3600 s"``.

    >>> import streameval as se
    >>> describe_window(se.Recall()), describe_window(se.Sliding(se.Recall(), size=500))
    ('all events', 'last 500 events')
    """
    size, period = getattr(obj, "size", None), getattr(obj, "period", None)
    if isinstance(obj, Tumbling) or callable(getattr(obj, "closed", None)):
        span = f"{size} events" if size else f"{period:g} s of event time"
        return f"the last closed tumbling window of {span}"
    if size:
        return f"last {size} events"
    if period is not None:
        return f"last {period:g} s of event time"
    return "all events"


def events_behind(obj, scope_n):
    """The labelled events a metric's value rests on: a window's events (the last
    closed one for a tumbling window), the scope's events (``scope_n``) for a
    cumulative metric; None where the object does not say."""
    size, period = getattr(obj, "size", None), getattr(obj, "period", None)
    if callable(getattr(obj, "closed", None)):
        last = getattr(obj, "last", None)
        return _n(last["n"]) if isinstance(last, dict) and "n" in last else None
    if size or period is not None:
        try:
            return _n(len(obj))
        except TypeError:
            return None
    return _n(scope_n)


def _interval(obj, level):
    fn = getattr(obj, "interval", None)
    if not callable(fn):
        return None
    try:
        lo, hi = fn(level)
    except (NotImplementedError, ValueError, TypeError, ZeroDivisionError):
        return None
    lo, hi = float(lo), float(hi)
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None


def explain(rule, record, scope, reports):
    """The explanation fields of ``record``, a transition ``rule`` made in ``scope``
    (``reports``: the scope's drift reports at this evaluation). New keys only.

    Runtime complexity: one ``interval`` of the rule's metric (when it has one), plus
    `O(1)`; called once per transition.
    """
    kind = rule.kind
    kw = {"segment_n": scope.n}
    if kind in ("drift", "alarm"):
        obj = scope.drift.get(rule.metric)
        kw["report"] = reports.get(rule.metric)
        if kind == "alarm":
            kw["peers"] = {k: v for k, v in reports.items() if k != rule.metric}
        if kind == "drift" and obj is not None:
            kw["window"] = describe_window(obj)
    else:
        obj = scope.metrics.get(rule.metric)
        if obj is not None:
            kw["window"] = describe_window(obj)
            kw["events"] = events_behind(obj, scope.n)
            if getattr(rule, "confidence", None) is None:
                kw["interval"] = _interval(obj, DEFAULT_LEVEL)
                kw["interval_level"] = DEFAULT_LEVEL
    return rule.explain(record, **kw)


def scope_counts(scope, threshold):
    """The scope's cumulative confusion counts ``{"tp", "fp", "fn", "tn"}`` at a score
    ``threshold``: read from its first metric over all events whose matrix counts at
    that threshold (precision, recall, ... share one); None when it has none.

    Runtime complexity: `O(metrics)` to find it, `O(1)` to read it.
    """
    for obj in scope.metrics.values():
        if getattr(obj, "size", None) or getattr(obj, "period", None) is not None:
            continue
        cm = getattr(obj, "cm", None)
        if cm is None or getattr(cm, "threshold", None) != threshold:
            continue
        try:
            return {"tp": float(cm.tp), "fp": float(cm.fp), "fn": float(cm.fn),
                    "tn": float(cm.tn)}
        except (AttributeError, TypeError, ValueError):
            continue
    return None


def alarm_input(rule, scope, report):
    """What an alarm rule reads at an evaluation: its detector's ``report``, with the
    scope's confusion counts at the detector's threshold (``counts``, or None) for an
    alarm on precision (its traffic explanation) or with a baseline period.

    Runtime complexity: `O(metrics)`.
    """
    det = scope.drift.get(rule.metric)
    out = dict(report)
    if report.get("metric") == "precision" or isinstance(getattr(rule, "baseline", None), dict):
        out["counts"] = scope_counts(scope, getattr(det, "threshold", None))
    return out


def check_alarm(rule, metrics, detector):
    """Refuse an alarm rule with a baseline period that the monitor cannot measure: the
    period's rate is read from the cumulative confusion counts at the detector's
    threshold, so the detector must watch a proportion and the monitor must count at
    that threshold. ``ValueError`` naming the rule."""
    if not isinstance(getattr(rule, "baseline", None), dict):
        return

    class _Scope:  # the templates, as a scope holds them
        pass

    sc = _Scope()
    sc.metrics = metrics
    watched = getattr(detector, "metric", None)
    if watched == "roc_auc" or scope_counts(sc, getattr(detector, "threshold", None)) is None:
        raise ValueError(
            f"rule {rule.name!r}: a baseline period is measured from the monitor's "
            "cumulative confusion counts at the detector's threshold; give a detector of "
            "a proportion and a cumulative precision, recall, ... metric at its threshold, "
            "or a fixed baseline"
        )
