"""Validated columns from a pandas partition, with the single-process checks.

Spark hands a Python worker its partition as pandas DataFrames. :func:`columns`
turns one into the binary columns the metrics' trusted path takes (``y`` bool "is
positive", ``s`` float64 scores, ``w`` float64 weights or None) and a mask of the bad
rows: a null or unknown label, a null, NaN or infinite score, a score outside the
metrics' range (log loss, Brier: probabilities), a null, negative, NaN or infinite
weight. The rows the mask keeps then go through every metric's ``check_columns``
(what their trusted path would still refuse, e.g. a weighted loss that overflows);
:func:`refusal` gives the single-process message for a bad row, from the metric's own
``validate``. Column types the mask cannot judge value by value (strings or decimals
as scores) are refused before any job by :func:`streameval.spark.evaluate.evaluate`.

It may import numpy, pandas and :mod:`streameval` (validation, metrics); it is
imported by the Spark modules only.
"""

from __future__ import annotations

import math

import numpy as np

from streameval.validation import MAX_WEIGHT, ValidationError, label_flags

__all__ = ["Spec", "columns", "refusal", "is_null", "NULL_SCORE", "NULL_WEIGHT", "AGG_WEIGHT", "AGG_BAD"]

#: extra bool columns of the projection: the score (weight) was null, not NaN
NULL_SCORE, NULL_WEIGHT = "__streameval_null_score", "__streameval_null_weight"
#: pre-aggregated rows (one per segment, label and score): summed weight, bad weights
AGG_WEIGHT, AGG_BAD = "__streameval_weight_sum", "__streameval_bad_weights"


class Spec:
    """What the partitions read: column names, labels, score range, and the metric
    whose ``validate`` states the single-process rules (picklable: shipped to the
    workers with the function that uses it)."""

    def __init__(self, metrics, label, score, weight=None, group_by=()):
        binary = [m for m in metrics.values() if getattr(m, "columns", None) == "binary"]
        if len(binary) != len(metrics):
            bad = [n for n, m in metrics.items() if getattr(m, "columns", None) != "binary"]
            raise ValueError(
                f"metrics {bad}: streameval.spark takes binary classification metrics "
                "(a label and a score column); multiclass, regression, ranking-at-k and text "
                "metrics are not supported here")
        labels = {(m.pos_label, m.neg_label) for m in binary}
        sets = {(frozenset(m._pos_set), frozenset(m._neg_set)) for m in binary}
        if len(sets) > 1:
            raise ValueError(f"metrics with different labels {sorted(map(repr, labels))}: "
                             "evaluate them in separate calls")
        bounds = [m.score_bounds for m in binary if m.score_bounds is not None]
        self.lo = max((b[0] for b in bounds), default=-math.inf)
        self.hi = min((b[1] for b in bounds), default=math.inf)
        # the metric with the narrowest range validates: its message is the one a
        # single-process update_many of every metric would give first
        narrow = [m for m in binary if m.score_bounds is not None
                  and tuple(m.score_bounds) == (self.lo, self.hi)]
        self.probe = (narrow or binary)[0].clone()
        self.checks = [m.clone() for m in binary]
        ((pos_set, neg_set),) = sets
        (self.pos,) = pos_set
        (self.neg,) = neg_set
        self.pos_set, self.neg_set = set(pos_set), set(neg_set)
        self.label, self.score, self.weight = label, score, weight
        self.group_by = tuple(group_by)
        self.integral = set()  # group columns of integers (set from the schema)

    def names(self):
        """The DataFrame columns read, in order."""
        out = [self.label, self.score] + ([self.weight] if self.weight else [])
        return out + [g for g in self.group_by if g not in out]

    def flags(self):
        """``[(flag column, column)]``: which nulls the partitions are told about (a
        null double reaches pandas as NaN; the message must say None, as for a null)."""
        out = [(NULL_SCORE, self.score)]
        if self.weight:
            out.append((NULL_WEIGHT, self.weight))
        return out

    def column_of(self, arg):
        """The DataFrame column of a metric argument name (``y_true``, ``y_pred``, ``w``)."""
        return {"y_true": self.label, "y_pred": self.score, "w": self.weight}.get(arg, arg)


def _floats(col):
    """A pandas column as float64 (nulls as NaN); None if it holds non-numbers."""
    try:
        return col.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        return None


def columns(pdf, spec):
    """``(y, s, w, bad)`` for a pandas DataFrame: the binary columns of every row (bad
    rows hold placeholders) and the bool mask of the rows the single-process path
    refuses. ``w`` is None when there is no weight column."""
    m = len(pdf)
    labels = pdf[spec.label].to_numpy()
    is_pos, is_neg = label_flags(labels, spec.pos_set, spec.neg_set)
    bad = ~(is_pos | is_neg)
    s = _floats(pdf[spec.score])
    if s is None:  # strings among the scores: refused one by one below
        s = np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan
                      for v in pdf[spec.score].tolist()], dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bad |= ~np.isfinite(s) | ~((s >= spec.lo) & (s <= spec.hi))
    w = None
    if spec.weight:
        w = _floats(pdf[spec.weight])
        if w is None:
            w = np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool)
                          else np.nan for v in pdf[spec.weight].tolist()], dtype=np.float64)
        with np.errstate(invalid="ignore"):
            if AGG_BAD in pdf.columns:  # summed weights: the rows' own were checked
                bad |= ~np.isfinite(w) | (w < 0) | (pdf[AGG_BAD].to_numpy() > 0)
            else:
                bad |= ~np.isfinite(w) | (w < 0) | (w > MAX_WEIGHT)
    if m and not bad.all():
        # what the mask lets through must pass the single-process checks too
        keep = ~bad
        y_ok, s_ok = is_pos[keep], s[keep]
        w_ok = None if w is None else w[keep]
        for check in spec.checks:
            try:
                check.check_columns(y_ok, s_ok, w_ok)
            except ValidationError as e:  # e.g. a weighted loss that overflows
                idx = np.flatnonzero(keep)[e.index or 0]
                bad[idx] = True
    return is_pos, s, w, bad


def refusal(pdf, i, spec):
    """``(argument, column, value, reason)`` of bad row ``i``: the single-process
    ``validate``'s words for that row alone (``argument``: y_true, y_pred or w)."""
    row = pdf.iloc[i]
    y = row[spec.label]
    s = row[spec.score]
    w = row[spec.weight] if spec.weight else None
    y = None if is_null(y) else (y.item() if hasattr(y, "item") else y)
    s = s.item() if hasattr(s, "item") else s
    if NULL_SCORE in pdf.columns and bool(row[NULL_SCORE]) or s is None:
        s = None
    if spec.weight:
        w = w.item() if hasattr(w, "item") else w
        if NULL_WEIGHT in pdf.columns and bool(row[NULL_WEIGHT]) or w is None:
            w = None
    try:
        spec.probe.validate([y], [s], None if not spec.weight else [w])
        for check in spec.checks:
            check.check_columns(*check.validate([y], [s], None if not spec.weight else [w]))
    except ValidationError as e:
        name = (e.name or "y_pred").split("[")[0]
        return name, spec.column_of(name), e.value, e.reason
    except (TypeError, ValueError) as e:
        return "y_pred", spec.score, s, str(e)
    return "y_pred", spec.score, s, "refused"  # pragma: no cover - mask and validate agree


def is_null(v):
    """A null as pandas holds it: None, NaN (an integer column with a null read as
    floats; NaN itself) or ``pd.NA`` (a nullable integer or boolean column)."""
    import pandas as pd

    if v is None or v is pd.NA:
        return True
    try:
        return bool(v != v)  # NaN of any float type
    except Exception:
        return False
