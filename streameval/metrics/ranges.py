"""Exact score-order metrics composed over disjoint score ranges.

Exact ROC AUC, Gini, average precision and the ROC and PR curves keep one entry per
distinct score: over all-distinct float scores that state is as large as the data.
Cut the data instead into score ranges that are disjoint (equal scores share a range)
and ordered from high to low; each range sends a few totals, and the value is composed
from them, exactly:

* :func:`range_totals`: a range's positive and negative weight ``P_i``, ``N_i``, its own
  weighted Mann–Whitney statistic ``U_i`` (ties count 1/2), its number of distinct
  scores of non-zero weight and its highest and lowest score;
* :func:`compose`: from every range's totals, each range's offsets (the positive and
  negative weight above it, the curve points above it) and the whole's
  ``(P, N, U, points)``. Every positive of a higher range is above every negative of a
  lower one, so ``U = sum_i U_i + sum_i P_i * N_(below i)`` (two ranges:
  ``U = U_hi + U_lo + P_hi * N_lo``) and ``AUC = U / (P * N)``: Mann–Whitney's exact
  statistic;
* given its offsets ``T`` (positive weight above) and ``F`` (negative weight above):
  :func:`range_ap_sum`, ``sum_k wp_k (T + tp_k) / (T + F + tp_k + fp_k)`` over the
  range's distinct scores, high to low, so that ``AP = sum / P`` (scikit-learn's
  step-wise AP); and :func:`range_points`, the range's curve points in the global
  order (every ``step``-th kept, for plotting).

How each metric's value composes from these is a :class:`RangeComposition`, declared
by the metric (the ``ranges`` field of its
:class:`~streameval.metrics.base.Capabilities`): :data:`AUC`, :data:`GINI`, :data:`AP`,
:data:`ROC_CURVE`, :data:`PR_CURVE`. The values equal the single-process metric's up to
the order of float additions (the tests check 1e-12). :mod:`streameval.spark.evaluate`
runs the ranges on a cluster; memory beyond a range's sort is `O(ranges)` numbers.

Imports: numpy and the standard library only.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["RangeComposition", "AUC", "GINI", "AP", "ROC_CURVE", "PR_CURVE",
           "distinct_desc", "range_totals", "compose", "range_ap_sum", "range_points"]


# ------------------------------------------------------------------ per range


def distinct_desc(y, s, w):
    """A range's distinct scores, high to low, with their positive and negative
    weight: ``(keys, wp, wn)`` numpy arrays. ``y`` bool "is positive", ``s`` float64
    scores, ``w`` float64 weights or None (every weight 1).

    Runtime complexity: `O(m log(m))` (one numpy sort).

    >>> keys, wp, wn = distinct_desc(np.array([True, False, True]), np.array([.2, .9, .2]), None)
    >>> keys.tolist(), wp.tolist(), wn.tolist()
    ([0.9, 0.2], [0.0, 2.0], [1.0, 0.0])
    """
    if not len(s):
        return np.zeros(0), np.zeros(0), np.zeros(0)
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    ww = np.ones(len(ss)) if w is None else w[order]
    yy = y[order]
    start = np.flatnonzero(np.concatenate(([True], ss[1:] != ss[:-1])))
    keys = ss[start]
    wp = np.add.reduceat(np.where(yy, ww, 0.0), start)
    wn = np.add.reduceat(np.where(yy, 0.0, ww), start)
    return keys, wp, wn


def range_totals(y, s, w):
    """A range's totals ``(P, N, U, distinct scores of non-zero weight, highest score,
    lowest score)``; an empty range: ``(0.0, 0.0, 0.0, 0, None, None)``.
    ``U = sum over distinct scores of wp * (negative weight below + wn / 2)``.

    Runtime complexity: `O(m log(m))` (numpy).

    >>> range_totals(np.array([True, False, True, False]), np.array([.9, .8, .3, .3]), None)
    (2.0, 2.0, 2.5, 3, 0.9, 0.3)
    """
    keys, wp, wn = distinct_desc(y, s, w)
    if not len(keys):
        return 0.0, 0.0, 0.0, 0, None, None
    # negatives strictly below each distinct score (scores are high to low)
    below = np.concatenate((np.cumsum(wn[::-1])[::-1][1:], [0.0]))
    u = float(np.sum(wp * (below + 0.5 * wn)))
    nz = int(np.count_nonzero((wp > 0.0) | (wn > 0.0)))
    return float(wp.sum()), float(wn.sum()), u, nz, float(keys[0]), float(keys[-1])


def range_ap_sum(wp, wn, above_p, above_n):
    """A range's share of ``AP * P``: ``sum_k wp_k * precision_k`` over its distinct
    scores ``k`` (``wp``, ``wn`` from :func:`distinct_desc`, high to low), with
    ``above_p`` and ``above_n`` the positive and negative weight of the ranges above it
    (:func:`compose`'s offsets); a precision of ``0 / 0`` (zero weights at the top)
    counts 0. Runtime complexity: `O(k)` numpy."""
    tp = above_p + np.cumsum(wp)
    allw = above_p + above_n + np.cumsum(wp + wn)
    prec = tp / np.maximum(allw, 1e-300)
    return float(np.sum(wp * prec))


def range_points(keys, wp, wn, above_p, above_n, points_above, step=1):
    """A range's curve points in the global order: ``[thresholds, true positive
    weight, false positive weight]`` lists at its distinct scores of non-zero weight,
    high to low, with the weight of the ranges above (``above_p``, ``above_n``) added;
    ``points_above`` (:func:`compose`'s offset) numbers them globally, and with
    ``step > 1`` only every ``step``-th point and the range's last are kept (its last,
    so that the composed curve ends where the full one does).
    Runtime complexity: `O(k)` numpy."""
    tp = above_p + np.cumsum(wp)
    nz = (wp > 0.0) | (wn > 0.0)
    k, tpk, fpk = keys[nz], tp[nz], (above_n + np.cumsum(wn))[nz]
    g = points_above + np.arange(1, len(k) + 1)  # global point numbers (1-based)
    keep = (g % step == 0) if step > 1 else np.ones(len(k), bool)
    if len(k):
        keep[-1] = True  # a range's last point: kept, so the curve ends right
    return [k[keep].tolist(), tpk[keep].tolist(), fpk[keep].tolist()]


# ------------------------------------------------------------------ composing


def compose(parts, where="the data"):
    """Compose the ranges of one stream (or segment).

    ``parts``: ``[(range id, totals)]``, the totals of :func:`range_totals` (a tuple
    or a list read back from JSON), the ids in range order from the highest scores to
    the lowest. Returns ``(offsets, whole)``: ``offsets[range id] = (positive weight
    above, negative weight above, points above, P_i, N_i)`` and ``whole = (P, N, U,
    points)``, with ``U = sum_i U_i + sum_i P_i * N_(below i)`` and every total summed
    exactly (``math.fsum``). Ranges that overlap (a lowest score not above the next
    range's highest) raise ``RuntimeError`` naming ``where``.

    Runtime complexity: `O(r log(r))` for ``r`` ranges.

    >>> hi = range_totals(np.array([True, False]), np.array([.9, .8]), None)
    >>> lo = range_totals(np.array([True, False]), np.array([.4, .1]), None)
    >>> offsets, whole = compose([(0, hi), (1, lo)])
    >>> whole, offsets[1]
    ((2.0, 2.0, 3.0, 4), (1.0, 1.0, 2, 1.0, 1.0))
    >>> AUC.value(*whole[:3])
    0.75
    """
    parts = sorted(parts, key=lambda p: p[0])  # range order: high to low
    live = [(p, t) for p, t in parts if t[4] is not None]
    for (_, a), (_, b) in zip(live, live[1:]):
        if not a[5] > b[4]:  # ranges must be disjoint and descending
            raise RuntimeError(f"score ranges overlap in {where}: {a} then {b}")
    P = math.fsum(t[0] for _, t in parts)
    N = math.fsum(t[1] for _, t in parts)
    U_own = math.fsum(t[2] for _, t in parts)
    tp = fp = 0.0
    d = 0
    cross = []
    offsets = {}
    for p, t in parts:
        offsets[p] = (tp, fp, d, t[0], t[1])
        cross.append(t[0] * (N - fp - t[1]))  # its positives above every lower negative
        tp += t[0]
        fp += t[1]
        d += t[3]
    return offsets, (P, N, U_own + math.fsum(cross), d)


class RangeComposition:
    """How one metric's exact value composes from disjoint score ranges.

    ``second_pass``: what the value needs beyond :func:`compose`'s totals, from a
    second pass over the ranges given their offsets: None (AUC, Gini), ``"ap"`` (each
    range's :func:`range_ap_sum`) or ``"points"`` (each range's :func:`range_points`).
    :meth:`value` computes the metric's value; ``name`` is for messages and ``repr``.
    """

    __slots__ = ("name", "second_pass", "_value")

    def __init__(self, name, second_pass, value):
        if second_pass not in (None, "ap", "points"):
            raise ValueError(f"second_pass = {second_pass!r}: expected None, 'ap' or 'points'")
        self.name = name
        self.second_pass = second_pass
        self._value = value

    def value(self, P, N, U, ap_sums=None, points=None):
        """The metric's value from the whole's ``P``, ``N``, ``U`` (:func:`compose`),
        the ranges' AP sums (``second_pass == "ap"``: any order) or their curve points
        (``"points"``: :func:`range_points` lists in range order, high to low); the
        single-process metric's ``get()`` (NaN where it is undefined).
        Runtime complexity: `O(1)`, `O(ranges)` or `O(points)`."""
        return self._value(P, N, U, ap_sums, points)

    def __repr__(self):
        return f"RangeComposition({self.name})"


def _auc(P, N, U, ap_sums, points):
    return U / (P * N) if P > 0.0 and N > 0.0 else math.nan


def _gini(P, N, U, ap_sums, points):
    return 2.0 * _auc(P, N, U, ap_sums, points) - 1.0


def _ap(P, N, U, ap_sums, points):
    if not P > 0.0:
        return math.nan
    return min(1.0, max(0.0, math.fsum(ap_sums or []) / P))


def _joined(points):
    """The ranges' curve points joined, high to low: (thresholds, tps, fps) arrays."""
    keys, tps, fps = [], [], []
    for k, t, f in points or []:
        keys += k
        tps += t
        fps += f
    return np.asarray(keys, float), np.asarray(tps, float), np.asarray(fps, float)


def _roc_curve(P, N, U, ap_sums, points):
    keys, tps, fps = _joined(points)
    tps, fps = np.concatenate(([0.0], tps)), np.concatenate(([0.0], fps))
    fpr = fps / N if N > 0 else np.full(len(fps), np.nan)
    tpr = tps / P if P > 0 else np.full(len(tps), np.nan)
    return fpr, tpr, np.concatenate(([np.inf], keys))


def _pr_curve(P, N, U, ap_sums, points):
    # as the single-process PRCurve: ascending thresholds, ending with (1, 0)
    keys, tps, fps = _joined(points)
    ps = tps + fps
    precision = np.divide(tps, ps, out=np.zeros_like(tps), where=ps > 0.0)
    recall = tps / P if P > 0 else np.ones(len(tps))
    return (np.append(precision[::-1], 1.0), np.append(recall[::-1], 0.0), keys[::-1].copy())


#: ROC AUC: ``U / (P * N)`` (NaN without positive or negative weight)
AUC = RangeComposition("ROC AUC", None, _auc)
#: Gini: ``2 * AUC - 1``
GINI = RangeComposition("Gini", None, _gini)
#: average precision: the ranges' AP sums over ``P``, clipped to [0, 1]
AP = RangeComposition("average precision", "ap", _ap)
#: ROC curve ``(fpr, tpr, thresholds)``, as ``ROCCurve.get()`` over the points kept
ROC_CURVE = RangeComposition("ROC curve", "points", _roc_curve)
#: PR curve ``(precision, recall, thresholds)``, as ``PRCurve.get()`` over the points kept
PR_CURVE = RangeComposition("PR curve", "points", _pr_curve)
