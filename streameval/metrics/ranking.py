"""Exact online ROC AUC, average precision and their curves; binary and one-vs-rest.

Every metric here keeps a :class:`~streameval.metrics.scoreorder.ScoreOrder`: the
weighted positive and negative totals per distinct score, in score order, and the
weighted Mann–Whitney statistic ``U``. From it:

- :class:`ROCAUC` ``= U / (P * N)`` (ties count one half), `O(1)`; :class:`Gini`
  ``= 2 * AUC - 1``; both with ``interval(level)``, a logit-scale interval from DeLong's
  variances, exact from the score order in one numpy pass and moderated toward the
  Hanley-McNeil model's (:func:`_auc_parts`), cached until the next change;
- :class:`AveragePrecision` ``= sum_n (R_n - R_{n-1}) P_n`` over the distinct scores
  from high to low, one numpy pass, cached until the next change;
  :class:`InterpolatedAP` (area under the precision envelope) and
  :class:`ElevenPointAP` (PASCAL VOC 2007);
- :class:`ROCCurve` and :class:`PRCurve`, as scikit-learn's ``roc_curve`` and
  ``precision_recall_curve`` with ``drop_intermediate=False``.

``update`` and ``revert`` cost `O(log(n))` (``n`` distinct scores). Batches take the
trusted path of :mod:`streameval.metrics.base`: ``update_many`` is ``validate`` then
``update_trusted``, which sorts the batch with numpy and merges it (`O(m log(n))` on
big orders: :mod:`streameval.metrics.scoreorder`); ``revert_many``
(``revert_trusted``: a window's expired slice)
aggregates the batch per score, checks it against the stored counts (atomic: an event
never added is refused by index) and removes it entry by entry or in bulk;
``merge``, its inverse ``subtract`` and ``to_state`` are exact. A
metric updated many times without being read defers the events and merges them in
bulk at the next read (:data:`DEFER_AFTER`); one read after every event never defers.
A count window's expired events are deferred the same way where that gives the same
bits (the declared ``revert_later``: weights of 1, a small order), so that a window fed batches
and read every few of them rebuilds its order once per read.
Memory grows with distinct scores, not with events, up to a cap: ``ROCAUC``, ``Gini``
and ``AveragePrecision`` (binary) take ``max_scores`` (default
:data:`~streameval.metrics.scoreorder.DEFAULT_MAX_SCORES`; None: exact and unbounded).
At ``2 * max_scores`` events and every ``max_scores`` more, an order with more distinct
scores coarsens its keys (mantissa truncation, :meth:`ScoreOrder.coarsen`) down to at
most ``max_scores``; ``get()`` is then the exact value of the coarse keys and
``error_bound()`` its proven distance to the exact one (0 while exact): for AUC half the
weight of the (positive, negative) pairs that share a key over ``P * N`` (their true
credit is 0, 1/2 or 1, counted 1/2), for AP the larger distance to the values with each
key's positives first and last (:func:`_ap_bound`). ``bins=N`` bounds memory to ``N``
equal-width bins over ``[0, 1]`` from the first event, with the same bounds.

Multiclass: ``ROCAUC(average=...)`` and ``AveragePrecision(average=...)`` with
``average="macro" | "weighted" | "micro"`` are one-vs-rest over the classes seen; each
event's ``y_pred`` is a dict of class probabilities (a missing class scores 0).
``ROCAUC`` and ``AveragePrecision`` are :class:`~streameval.metrics.base.Cases` fronts:
``ROCAUC(average="macro")`` is an instance of ``ROCAUC`` (of its multiclass case).

What windows and Spark use beyond the protocol is declared in each metric's
``capabilities`` (:class:`~streameval.metrics.base.Capabilities`): a count window's
``swap``, ``revert_joined`` and ``revert_later`` and its rebuild crossover (every binary
metric here), and for Spark the composition over score ranges
(:mod:`streameval.metrics.ranges`: exact ``ROCAUC``, ``Gini``, ``AveragePrecision``,
``ROCCurve``, ``PRCurve``), the refusal of the others' per-score state, and the error
bound of binned ones.

Imports: numpy, :mod:`streameval.validation`, :mod:`streameval.metrics.base`,
:mod:`streameval.metrics.ranges` and :mod:`streameval.metrics.scoreorder`.
"""

from __future__ import annotations

import math

import numpy as np

from streameval.metrics.base import (
    BinaryMetric,
    Capabilities,
    Cases,
    Metric,
    MultiClassMetric,
    SharedView,
    check_unmerge_totals,
    has_interval,
)
from streameval.metrics import ranges, scoreorder
from streameval.metrics.scoreorder import (
    DEFAULT_MAX_SCORES,
    ScoreOrder,
    coarse_key,
    delong_components,
    delong_variance,
)
from streameval.validation import REVERT_SLACK as _SLACK
from streameval.validation import (
    MAX_WEIGHT,
    Integer,
    Options,
    ValidationError,
    each,
    as_weight_array,
    check_param,
    check_same_length,
    check_weight,
    fail,
)

__all__ = [
    "ROCAUC",
    "Gini",
    "AveragePrecision",
    "InterpolatedAP",
    "ElevenPointAP",
    "ROCCurve",
    "PRCurve",
    "order_key",
    "OrderView",
    "DEFAULT_MAX_SCORES",
]

_NAN = math.nan
_AVERAGES = ("macro", "weighted", "micro")

#: After this many ``update`` calls without a read (``get``, ``revert``, ``merge``,
#: state...), further events are deferred: kept in lists and merged at the next read,
#: as one numpy batch when they are many relative to the stored scores. A metric read
#: after every event (windows, dashboards) never defers; a cumulative one read every
#: k events does the same work in bulk. Measured (bench_ranking.py): 1 000 000 events
#: read once, 3x faster with all-distinct scores.
DEFER_AFTER = 64

#: Deferred events are merged when they reach this many, or half the stored scores
#: if more: bounded memory (about 50 bytes per deferred event, as a stored score), and
#: each merge (`O(n)` at worst) is paid by at least ``n / 2`` events.
DEFER_LIMIT = 1 << 16

#: Deferred events are merged one by one (``ScoreOrder.add``, about 2.5 us each) when
#: fewer than the stored scores divided by this, else as one batch (about 85 ns per
#: stored score to rebuild): measured crossover, bench_ranking.py --tune.
DEFER_REBUILD_RATIO = 30


# --------------------------------------------------------------------------- helpers


def _empty(dtype):
    a = np.zeros(0, dtype=dtype)
    a.flags.writeable = False
    return a


#: no deferred events, as a binary state gives them: read-only, so that a checkpoint
#: writer references the one it wrote rather than writing an empty array again
_NO_SCORES, _NO_LABELS = _empty(np.float64), _empty(bool)


def _check_max_scores(max_scores):
    """``max_scores``: None or 0 (exact, unbounded; 0 is what a TOML config can say)
    or the cap, an integer >= 16. Returns the cap or None."""
    if max_scores == 0 and type(max_scores) is int:
        return None
    return check_param("max_scores", max_scores, Integer(16, allow_none=True))


def _check_bins(bins):
    """``bins``: None (exact) or the number of bins, an integer >= 1."""
    return check_param("bins", bins, Integer(1, allow_none=True))


def _binary_labels_only(pos_label, neg_label):
    if pos_label is not True or neg_label is not None:
        raise ValueError(
            f"pos_label = {pos_label!r}, neg_label = {neg_label!r}: labels apply to the binary "
            "metric; with average= every class is a positive in its own one-vs-rest"
        )


def _bin_of(s, bins):
    """Bin index (as a float key) of score ``s``: ``floor(s * bins)`` clamped into
    ``[0, bins - 1]``; scores outside ``[0, 1]`` go to the edge bins."""
    if s <= 0.0:
        return 0.0
    if s >= 1.0:
        return float(bins - 1)
    k = int(s * bins)
    return float(k if k < bins else bins - 1)


def _bin_array(scores, bins):
    return np.minimum(np.floor(np.clip(scores, 0.0, 1.0) * bins), bins - 1)


def _aggregate(positive, scores, weights):
    """Batch -> ascending distinct scores with per-class weight and count sums, and
    the number of zero-weight positives and negatives."""
    n = len(scores)
    order = np.argsort(scores)
    s = scores[order]
    pos = positive[order]
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    if first.all():  # all distinct (float scores): nothing to add up
        keys = s
        cp = pos.astype(np.int64)
        cn = 1 - cp
        if weights is None:
            return keys, cp.astype(np.float64), cn.astype(np.float64), cp, cn, 0, 0
        w = weights[order]
        wp = np.where(pos, w, 0.0)
        zero = w == 0.0
        zp = int(np.count_nonzero(zero & pos))
        return keys, wp, w - wp, cp, cn, zp, int(np.count_nonzero(zero)) - zp
    idx = np.flatnonzero(first)
    keys = s[idx]
    cp = np.add.reduceat(pos.astype(np.int64), idx)
    cn = np.diff(np.append(idx, n)) - cp
    if weights is None:
        wp = cp.astype(np.float64)
        wn = cn.astype(np.float64)
        zp = zn = 0
    else:
        w = weights[order]
        wpos = np.where(pos, w, 0.0)
        wp = np.add.reduceat(wpos, idx)
        wn = np.add.reduceat(w - wpos, idx)
        zero = w == 0.0
        zp = int(np.count_nonzero(zero & pos))
        zn = int(np.count_nonzero(zero)) - zp
    return keys, wp, wn, cp, cn, zp, zn


def _first_refused(order, positive, scores, events, zero=None, weights=None):
    """Index of the first event a loop of ``revert`` would refuse (``None`` if none).

    ``positive``, ``scores`` and ``events`` (each entry's event index, ascending in
    its own order of removal) describe the entries removed from ``order``; ``zero``
    marks the zero-weight ones. An entry is refused when the entries before it with the
    same score and class (earlier events first) already use up the stored count, or when
    it is a zero-weight entry beyond the stored zero-weight events of its class (or a
    weighted one beyond the weighted ones), or when, with the entries before it, it takes
    more weight (``weights``) than its score and class hold, as
    :meth:`ScoreOrder.remove` refuses. Only run on the error path: `O(m log(m) + n)`.
    """
    m = len(scores)
    if not m:
        return None
    idx = np.lexsort((events, positive, scores))  # by score, class, then removal order
    s, p = scores[idx], positive[idx]
    start = np.ones(m, dtype=bool)
    start[1:] = (s[1:] != s[:-1]) | (p[1:] != p[:-1])
    starts = np.flatnonzero(start)
    group = np.cumsum(start) - 1
    rank = np.arange(m) - starts[group]  # earlier entries in the same (score, class)
    sp, sn, wsp, wsn = order.stored_counts(s[starts], weights=True)  # keys ascending
    avail = np.where(p[starts], sp, sn)
    over = events[idx[rank >= avail[group]]]
    refused = [over.min()] if len(over) else []
    if weights is not None:
        # as a loop of ``revert``: each removal's weight against what its score and class
        # still hold, the class total (the slack's scale) less the removals before it
        w = weights[idx]
        cum = np.cumsum(w)
        taken = cum - (cum[starts] - w[starts])[group]  # within the group, inclusive
        byev = np.argsort(events, kind="stable")
        ew, ep = weights[byev], positive[byev]
        before = np.empty(m)
        for cls, total in ((True, order.pos_weight), (False, order.neg_weight)):
            sel = ep == cls
            c = np.cumsum(np.where(sel, ew, 0.0))
            before[byev[sel]] = total - (c - ew)[sel]
        scale = before[idx]
        left = np.where(p[starts], wsp, wsn)[group] - taken
        over_w = events[idx[left < -(1e-9 * w + _SLACK * scale)]]
        if len(over_w):
            refused.append(over_w.min())
    if zero is None:
        zero = np.zeros(m, dtype=bool)
    for cls, zeros, others in ((True, order.z_pos, order.n_pos - order.z_pos),
                               (False, order.z_neg, order.n_neg - order.z_neg)):
        for mask, stored in ((zero, zeros), (~zero, others)):
            z = np.flatnonzero(mask & (positive == cls))
            if len(z) > stored:
                refused.append(np.sort(events[z])[stored])
    return int(min(refused)) if refused else None


_TINY = np.finfo(np.float64).tiny


def _precision(tps, fps):
    ps = tps + fps
    return np.divide(tps, ps, out=np.zeros_like(tps), where=ps > 0.0)


def _desc_precision(order):
    """``(wp, precision)`` at the distinct scores from high to low, in one pass each
    of a few numpy operations (AP's ``get`` runs this after every change). With
    integer weights (``ScoreOrder.exact_ints``) the prefix sums run in int64: exact,
    and cheaper than numpy's float64 ``cumsum``."""
    wp, wn = order.weights()  # fresh arrays: reused in place below
    wp = wp[::-1]
    tot = wn[::-1]
    tot += wp
    if order.exact_ints():
        prec = np.cumsum(wp.astype(np.int64)).astype(np.float64)
        tot = np.cumsum(tot.astype(np.int64)).astype(np.float64)
    else:
        np.cumsum(tot, out=tot)  # weight at or above each score
        prec = np.cumsum(wp)  # positive weight at or above each score
    np.maximum(tot, _TINY, out=tot)  # 0 / 0 at the top (zero weights) -> precision 0
    prec /= tot
    return wp, prec


def _average_precision(order):
    if not order.nz_pos:
        return _NAN
    if order.levelled:
        return min(1.0, max(0.0, order.ap_numerator() / order.pos_weight))
    if order.exact_ints():
        return _average_precision_ints(order)
    wp, prec = _desc_precision(order)
    prec *= wp  # not np.dot: on reversed views it is 20x slower (measured)
    return min(1.0, max(0.0, float(prec.sum() / wp.sum())))


def _average_precision_ints(order):
    """AP with integer weights, in ascending order (no reversed views): the weight at or
    above score ``k`` is the total less the exclusive prefix sum below ``k``; every sum
    exact in int64. About ten numpy passes over the ``n`` distinct scores: `O(n)`, with no reversed
    views (reading the positive scores only takes more numpy calls, which do not pay on
    orders this small).
    Big orders are in levels and take :meth:`ScoreOrder.ap_numerator` instead."""
    wp, wn = order.weights(copy=False)
    n = len(wp)
    ip = wp.astype(np.int64)
    above_p = np.empty(n, dtype=np.int64)  # positive weight at or above each score
    above_p[0] = 0
    np.cumsum(ip[:-1], out=above_p[1:])
    np.subtract(round(order.pos_weight), above_p, out=above_p)
    it = wn.astype(np.int64)
    it += ip
    above = np.empty(n, dtype=np.int64)  # all weight at or above each score
    above[0] = 0
    np.cumsum(it[:-1], out=above[1:])
    np.subtract(round(order.pos_weight + order.neg_weight), above, out=above)
    if order.z_pos or order.z_neg:  # zero weight at and above the top: precision 0
        np.maximum(above, 1, out=above)
    prec = np.divide(above_p, above)
    prec *= wp
    return min(1.0, max(0.0, float(prec.sum() / order.pos_weight)))


def _interpolated_precision(order):
    """(wp, recall, envelope) per distinct score, high to low; envelope = best
    precision at this or any higher recall."""
    wp, prec = _desc_precision(order)
    envelope = np.maximum.accumulate(prec[::-1])[::-1]
    tps = np.cumsum(wp)
    return wp, tps / tps[-1], envelope


def _auc_bound(order):
    """Half the weight of (positive, negative) pairs sharing a bin, over P * N."""
    if not (order.nz_pos and order.nz_neg):
        return _NAN
    w = order.weights()
    return 0.5 * float(np.dot(w[0], w[1])) / (order.pos_weight * order.neg_weight)


def _pairs_bound(order):
    """:func:`_auc_bound` of a coarsened order, from the weight of the pairs sharing a
    key that the order keeps up to date (:meth:`ScoreOrder.pairs`: `O(1)` after a batch
    merged into its levels with integer weights, else one numpy pass; products summed
    by numpy, no ``np.dot``: see :mod:`streameval.metrics.levels`)."""
    if not (order.nz_pos and order.nz_neg):
        return _NAN
    return 0.5 * order.pairs() / (order.pos_weight * order.neg_weight)


def _delong(order, auc):
    """DeLong's variance of ``auc``, the AUC of ``order`` (read as ``get`` reads it:
    after merging deferred events and :meth:`ScoreOrder.refresh`), from its per-score
    weights and its totals: one numpy pass (see
    :func:`streameval.metrics.scoreorder.delong_variance`). NaN when undefined."""
    p, n = order.pos_weight, order.neg_weight
    if not (p > 1.0 and n > 1.0) or auc != auc:
        return _NAN
    wp, wn = order.weights(copy=False)  # (only read below)
    return delong_variance(wp, wn, auc, p, n, order.exact_ints())


#: Prior degrees of freedom of the AUC interval's variance (see :func:`_auc_parts`): the
#: DeLong variances are pulled toward the Hanley-McNeil model's as if it were this many
#: observations of each class. Of 2, 5 and 10, the smallest whose worst cell in
#: ``benchmarks/bench_coverage.py`` (``--prior-df`` compares values) keeps 94% coverage
#: at 95% with a margin for the benchmark's noise; larger values widen the interval at
#: few positives and change nothing at many.
AUC_PRIOR_DF = 10.0


def _auc_parts(order, auc):
    """``(variance, df, m)`` of the AUC interval of ``order`` (``auc`` its AUC, read as
    ``get`` reads it), or None when undefined (``P <= 1`` or ``N <= 1``, or no AUC):

    DeLong's two sample variances (:func:`streameval.metrics.scoreorder.delong_components`:
    ``S10`` over the positives, ``S01`` over the negatives) each moderated toward the
    variance the Hanley-McNeil model gives at ``auc`` (Hanley and McNeil 1982:
    ``Q2 - A^2 = A^2 (1 - A) / (1 + A)`` for the positives, ``Q1 - A^2 = A (1 - A)^2 /
    (2 - A)`` for the negatives) with :data:`AUC_PRIOR_DF` prior degrees of freedom, as
    an empirical-Bayes moderated variance (Smyth 2004, "Linear models and empirical
    Bayes methods for assessing differential expression in microarray experiments"):
    ``S10' = ((P - 1) S10 + d0 H10) / (P - 1 + d0)``; then ``Var = S10' / P + S01' / N``
    on ``df = min(P, N) - 1 + d0`` degrees of freedom, and ``m = min(P, N)``, the number
    of disjoint (positive, negative) pairs. With few positives the sample variance of
    their components is small exactly when no low-scored positive was drawn, which is
    when the AUC is overestimated; the prior keeps that from shrinking the interval.
    With many of both, ``Var`` is DeLong's. Weights are frequency weights."""
    p, n = order.pos_weight, order.neg_weight
    if not (p > 1.0 and n > 1.0) or auc != auc:
        return None
    wp, wn = order.weights(copy=False)  # (only read below)
    if not len(wp):
        return None
    s10, s01 = delong_components(wp, wn, auc, p, n, order.exact_ints())
    d0 = AUC_PRIOR_DF
    h10 = auc * auc * (1.0 - auc) / (1.0 + auc)
    h01 = auc * (1.0 - auc) * (1.0 - auc) / (2.0 - auc)
    s10 = ((p - 1.0) * s10 + d0 * h10) / (p - 1.0 + d0)
    s01 = ((n - 1.0) * s01 + d0 * h01) / (n - 1.0 + d0)
    m = min(p, n)
    return s10 / p + s01 / n, m - 1.0 + d0, m


def _ap_bound(order):
    """Guaranteed bound on |AP(exact scores) - AP(bins)| from per-bin weights.

    Within a bin the order of events is unknown; other bins' contributions depend
    only on the bin's totals. For a bin with positive weight p, negative weight n and
    T, F the positive and negative weight of the bins above, its positives contribute
    at most ``p (T + p) / (T + p + F)`` (every positive above every negative) and at
    least ``integral_0^p (T + x) / (T + x + F + n) dx`` (every negative above every
    positive, positives split finely); the binned value treats the bin as one tie.
    """
    if not order.nz_pos:
        return _NAN
    parts = order.at_positive_keys()  # (levels, integer weights: no sort of both classes)
    if parts is not None:
        # the bins that hold positives only, high to low: the same exact integers as
        # the running sums below give them, in the same order
        # (high to low as views: each array computed from them is a fresh one in that
        # order, so the sums below add the same values in the same order as over copies)
        p, tps, fps, f = (x[::-1] for x in parts)
        has = p > 0.0
        if not has.all():
            p, f, tps, fps = p[has], f[has], tps[has], fps[has]
        t = tps - p
        n = fps - f
    else:
        p, n = order.weights()
        p = p[::-1]
        n = n[::-1]
        tps = np.cumsum(p)
        fps = np.cumsum(n)
        t = tps - p  # positive weight strictly above the bin
        f = fps - n
        has = p > 0.0
        p, n, t, f, tps, fps = p[has], n[has], t[has], f[has], tps[has], fps[has]
    pt = p * tps    # (what p * tps / x computes first)
    binned = float((pt / (tps + fps)).sum())
    upper = float((pt / (tps + f)).sum())
    # integral_0^p (T + x) / (T + x + F') dx = p - F' log(1 + p / (T + F')), F' = f + n;
    # T + F' = 0 (top bin without negatives) means precision 1 throughout: p
    base = t + f + n
    safe = np.where(base > 0.0, base, 1.0)
    lower = float(np.where(base > 0.0, p - (f + n) * np.log1p(p / safe), p).sum())
    return max(upper - binned, binned - lower, 0.0) / float(tps[-1])


# ------------------------------------------------------------------------ binary


class _BinaryRanking(BinaryMetric):
    """Shared state and protocol of the binary ranking metrics (a score order)."""

    _abstract = True

    #: A sliding window (``streameval.windows``) whose batch expires more than this
    #: fraction of it rebuilds the metric from the events left instead of calling
    #: ``revert_many``. Measured (window 20 000, read after each batch): with 3-decimal
    #: scores ``revert_many`` is faster up to 0.2 (1.7x at 0.1), a rebuild at 0.5 (1.3x);
    #: with all-distinct scores they tie at 0.01 and a rebuild wins above (1.3x at 0.1,
    #: 3.5x at 0.5).
    _window_rebuild_fraction = 0.25
    #: how the exact value composes over score ranges (:mod:`streameval.metrics.ranges`),
    #: declared by each kind that does; None: it does not (see ``_per_score``)
    _ranges = None
    #: why an exact metric of this kind is not composed over score ranges, and what to
    #: use instead (Spark's refusal of its per-score state); None where it is
    _per_score = None

    def __init__(self, pos_label=True, neg_label=None, bins=None, max_scores=None):
        super().__init__(pos_label, neg_label)
        self._bins = _check_bins(bins)
        #: the bounded order's cap (see :meth:`_bound`): None, exact and unbounded
        cap = _check_max_scores(max_scores)
        self._cap = None if self._bins else cap
        # the count of events (stored and deferred) at which the cap is next checked
        self._next_check = None if self._cap is None else 2 * self._cap
        self._bound_key = None  # (order, stamp) of the cached error bound
        self._bound_value = _NAN
        self._so = ScoreOrder()
        # bound methods on the instance: one attribute lookup less per event
        self._add = self._so.add
        self._remove = self._so.remove
        # deferred events (validated), see DEFER_AFTER: one by one (scores, labels,
        # weights) and batches (label, score, weight arrays)
        self._ps, self._py, self._pw = [], [], []
        self._chunks = []
        self._nchunked = 0  # events in _chunks
        # a count window's expired slices (label, score arrays; weights 1) whose removal
        # is deferred with the events above, see _revert_later; only while _chunks holds
        # events too, so every check for deferred events sees these
        self._gone = []
        self._limit = DEFER_LIMIT  # merge when this many are deferred
        self._streak = 0  # updates since the last read or revert
        self._cached_stamp = -1
        self._cached = None

    @property
    def capabilities(self):
        """What this metric declares beyond the protocol (see
        :class:`~streameval.metrics.base.Capabilities`): a count window's ``swap``
        (:meth:`_swap`), ``revert_joined`` (:meth:`_revert_joined`), ``revert_later``
        (:meth:`_revert_later`) and rebuild crossover; without ``bins``, its composition
        over score ranges (or why there is none); with ``bins``, its error bound."""
        binned = bool(self._bins)
        return Capabilities(
            swap=self._swap, revert_joined=self._revert_joined,
            revert_later=self._revert_later,
            rebuild_fraction=self._window_rebuild_fraction,
            ranges=None if binned else self._ranges,
            per_score=None if binned else self._per_score,
            error_bound=binned)

    def _params(self):
        # the default cap is left out of states: they stay as without one, and a
        # state without it loads with the default
        params = super()._params()
        if params.get("max_scores", 0) == DEFAULT_MAX_SCORES:
            del params["max_scores"]
        return params

    def _events(self):
        """Events stored and deferred (what the cap's checks count)."""
        so = self._so
        return so.n_pos + so.n_neg + len(self._ps) + self._nchunked

    def _bound(self):
        """Keep the order within its cap, at fixed event counts: at ``2 * max_scores``
        events, then every ``max_scores`` more, the deferred events are merged and the
        keys coarsened until at most ``max_scores`` distinct keys are left
        (:meth:`ScoreOrder.coarsen`), so the order never holds more than twice
        ``max_scores`` distinct keys. The checks fall at the same counts however the
        events came in (one by one, batches, deferred, a state restored), so the
        result depends on the events only. Amortised `O(1)` numpy work per event: a
        check costs `O(n log(bits))` and comes every ``max_scores`` events."""
        so = self._order  # (merges the deferred events)
        so.coarsen(self._cap)
        self._next_check = so.n_pos + so.n_neg + self._cap

    @property
    def exact(self):
        """Whether ``get()`` is the exact value (the order's keys are the scores
        themselves: no ``bins``, not coarsened)."""
        return not self._bins and self._so.bits is None

    def read_size(self):
        """At most how many entries a fresh ``get()`` and ``error_bound()`` read
        together: 0 when both are `O(1)` (an exact ``ROCAUC``), else the events stored
        and deferred, at most twice ``max_scores``: what a Monitor's evaluator weighs to
        decide how often to recompute a cumulative value (see
        :mod:`streameval.monitor.scopes`). A function of the events counted, not of the
        order's layout. (A coarsened ``ROCAUC``'s value and bound are `O(1)` too, but its
        fresh read merges the deferred events into levels of up to that many entries,
        shared with the AP read from the same order: held, one merge per held stretch
        instead of one per evaluation.)"""
        n = self._events()
        return n if self._cap is None else min(n, 2 * self._cap)

    def _cached_bound(self, compute):
        """``compute(order)``, cached until the order changes."""
        o = self._order
        key = self._bound_key
        if key is None or key[0] is not o or key[1] != o.stamp:
            self._bound_value = compute(o)
            self._bound_key = (o, o.stamp)
        return self._bound_value

    @property
    def _order(self):
        """The score order, with any deferred events merged in (a read), its ``U`` and
        totals recomputed if big removals could have left rounding in them
        (:meth:`ScoreOrder.refresh`)."""
        if self._ps or self._chunks:
            self._flush()
        self._streak = 0
        so = self._so
        if so._shed_p or so._shed_n:
            so.refresh()
        return so

    def _flush(self):
        """Merge the deferred events: as one numpy batch when the order is in its bulk
        layout or they are many relative to the stored scores, else one by one into
        the blocks (the cheaper of the two); with deferred removals (:meth:`_revert_later`)
        one replacement of both."""
        ps, py, pw, chunks = self._ps, self._py, self._pw, self._chunks
        so = self._so
        if self._gone:
            gone = self._gone
            removed = _aggregate(np.concatenate([g[0] for g in gone]),
                                 np.concatenate([g[1] for g in gone]), None)
            try:
                so.replace_entries(_aggregate(*self._pending()), removed)
            except KeyError:  # (nothing changed; only a window's own events come here)
                raise RuntimeError("deferred removal of events that were never added") \
                    from None
        elif so.bulk or chunks or len(ps) * DEFER_REBUILD_RATIO >= so.size():
            so.add_entries(*_aggregate(*self._pending()))
        else:
            add = self._add
            if so.bits is not None:
                bits = so.bits
                ps = [coarse_key(x, bits) for x in ps]
            for e in zip(ps, py, pw):
                add(*e)
        self._forget_pending(so.size())

    def _pending(self):
        """The deferred events as one batch: (labels, scores, weights or None)."""
        ps, py, pw, chunks = self._ps, self._py, self._pw, list(self._chunks)
        if ps:
            w = np.array(pw)
            chunks.append((np.array(py, dtype=bool), np.array(ps),
                           None if (w == 1.0).all() else w))
        labels = np.concatenate([c[0] for c in chunks])
        scores = self._so.keys_of(np.concatenate([c[1] for c in chunks]))
        weights = None
        if any(c[2] is not None for c in chunks):
            weights = np.concatenate([np.ones(len(c[1])) if c[2] is None else c[2]
                                      for c in chunks])
        return labels, scores, weights

    def _forget_pending(self, n):
        self._ps.clear()
        self._py.clear()
        self._pw.clear()
        self._chunks.clear()
        self._gone.clear()
        self._nchunked = 0
        self._limit = max(DEFER_LIMIT, n >> 1)

    def update(self, y_true, y_pred, w=1.0):
        """Add one event. Runtime complexity: `O(log(n))`, ``n`` distinct scores."""
        if type(y_pred) is not float or y_pred - y_pred:
            y_pred = self._score(y_pred)
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
            w = check_weight(w)
        try:
            if y_true in self._pos_set:
                positive = True
            elif y_true in self._neg_set:
                positive = False
            else:
                positive = self._label(y_true)
        except TypeError:
            positive = self._label(y_true)
        if self._bins:
            y_pred = _bin_of(y_pred, self._bins)
        if self._gone:  # (deferred removals come before any other change)
            self._flush()
        if self._streak < DEFER_AFTER and self._so._levels is None:  # (not levelled)
            self._streak += 1
            bits = self._so.bits
            if bits is not None:
                y_pred = coarse_key(y_pred, bits)
            self._add(y_pred, positive, w)
        else:
            ps = self._ps
            ps.append(y_pred)
            self._py.append(positive)
            self._pw.append(w)
            if len(ps) >= self._limit:
                self._flush()
        if self._next_check is not None and self._events() >= self._next_check:
            self._bound()

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event added earlier. Runtime complexity: `O(log(n))`.

        Raises ``ValueError`` (state unchanged) if no such event is stored.
        """
        s = y_pred
        if type(s) is not float or s - s:
            s = self._score(s)
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
            w = check_weight(w)
        try:
            if y_true in self._pos_set:
                positive = True
            elif y_true in self._neg_set:
                positive = False
            else:
                positive = self._label(y_true)
        except TypeError:
            positive = self._label(y_true)
        if self._bins:
            s = _bin_of(s, self._bins)
        if self._ps or self._chunks:
            self._flush()
        self._streak = 0
        if self._so.bits is not None:
            s = coarse_key(s, self._so.bits)
        try:
            self._remove(s, positive, w)
        except KeyError:
            raise ValueError(
                f"revert(y_true={y_true!r}, y_pred={y_pred!r}): no such event was added"
            ) from None

    def _swap(self, y_true, y_pred, w, y_old, s_old, w_old):
        """``update(y_true, y_pred, w)`` then ``revert(y_old, s_old, w_old)`` in one call:
        a count window's step, the event that expires added earlier (and so valid).
        The same checks and result as the two calls, with one layer of calls less per
        event; if the old event is not stored, nothing changes (``ValueError``)."""
        so = self._so
        if (self._bins or self._ps or self._chunks or so._levels is not None
                or so.bits is not None):
            self.update(y_true, y_pred, w)
            self.revert(y_old, s_old, w_old)
            return
        if type(y_pred) is not float or y_pred - y_pred:
            y_pred = self._score(y_pred)
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
            w = check_weight(w)
        if type(s_old) is not float or s_old - s_old:
            s_old = self._score(s_old)
        if type(w_old) is not float or not 0.0 <= w_old <= MAX_WEIGHT:
            w_old = check_weight(w_old)
        pos, neg = self._pos_set, self._neg_set
        try:
            positive = True if y_true in pos else False if y_true in neg else self._label(y_true)
        except TypeError:
            positive = self._label(y_true)
        try:
            old_positive = True if y_old in pos else False if y_old in neg else self._label(y_old)
        except TypeError:
            old_positive = self._label(y_old)
        self._streak = 0
        so.add(y_pred, positive, w)
        try:
            so.remove(s_old, old_positive, w_old)
        except KeyError:
            so.remove(y_pred, positive, w)
            raise ValueError(
                f"revert(y_true={y_old!r}, y_pred={s_old!r}): no such event was added"
            ) from None

    def update_trusted(self, y, s, w=None):
        """Add validated columns (bool "is positive" labels, float64 scores, float64
        weights or None; see :meth:`validate`), unchecked: same result as a loop of
        ``update``. ``update_many`` is ``validate`` then this.

        Runtime complexity: `O(m log(m))` to sort the batch (numpy), then a merge with
        the stored scores: `O(m log(n))` one by one if the batch is small, else
        `O(n + m)`. Batches are deferred until the next read (or until the deferred
        events reach half the stored scores), so that many small batches cost one merge.
        """
        m = len(s)
        nxt = self._next_check
        if nxt is not None and m and self._events() + m >= nxt:
            # the cap's check falls inside this batch: at its exact count
            j = max(nxt - self._events(), 0)
            if j:
                self._take(y[:j], s[:j], None if w is None else w[:j])
            self._bound()
            if j < m:
                self.update_trusted(y[j:], s[j:], None if w is None else w[j:])
            return self
        return self._take(y, s, w)

    def _take(self, y, s, w):
        m = len(s)
        if m:
            if self._bins:
                s = _bin_array(s, self._bins)
            if self._gone and (w is not None or self._so.size() + self._nchunked + m
                               > scoreorder.FLAT_MAX):
                self._flush()  # (deferred removals only among unit weights, flat)
            self._chunks.append((y, s, w))
            self._nchunked += m
            if self._nchunked + len(self._ps) >= self._limit:
                self._flush()
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove validated columns added earlier: same result as a loop of ``revert``,
        atomic. ``revert_many`` is ``validate`` then this.

        The batch is aggregated per distinct score with numpy and checked against the
        stored counts before anything changes; an event that was never added raises
        :class:`~streameval.validation.ValidationError` with the ``index`` of the first
        event a loop of ``revert`` would refuse, nothing changed.
        Then ``U`` loses the pairs with at least one member in the batch (see
        :meth:`ScoreOrder.remove_entries`): exact, equal to the loop with integer
        weights.

        Runtime complexity: `O(m log(m))` to sort the batch, then `O(m log(n))` if it is
        small relative to the ``n`` stored scores, else `O(n + m)` (numpy).

        >>> from streameval import ROCAUC
        >>> auc = ROCAUC().update_many([1, 0, 1, 0], [.9, .8, .3, .1])
        >>> auc.revert_many([1, 0], [.3, .8]).get()
        1.0
        >>> auc.revert_many([1, 1], [.9, .9])
        Traceback (most recent call last):
        ...
        streameval.validation.ValidationError: event 1: revert(y_true=True, y_pred=0.9): no such event was added
        """
        m = len(s)
        if not m:
            return self
        if self._gone:  # deferred removals first (the same bits: see _revert_later)
            self._flush()
        keys = self._so.keys_of(_bin_array(s, self._bins) if self._bins else s)
        removed = _aggregate(y, keys, w)
        if self._ps or self._chunks:
            # deferred events (a window's new batch) and this slice out in one go (a
            # small order: one merge and one rebuild for both)
            try:
                self._so.replace_entries(_aggregate(*self._pending()), removed)
                self._forget_pending(self._so.size())
                self._streak = 0
                return self
            except KeyError:
                pass  # refused: state unchanged; the path below names the event
        bits = self._so.bits
        order = self._order  # merges deferred events: they may be among those reverted
        if order.bits != bits:  # (that merge coarsened the keys)
            keys = order.keys_of(keys)
            removed = _aggregate(y, keys, w)
        try:
            order.remove_entries(*removed)
        except KeyError:
            i = _first_refused(order, y, keys, np.arange(m),
                               None if w is None else w == 0.0,
                               np.ones(m) if w is None else w)
            i = 0 if i is None else i
            raise ValidationError.at(
                i, f"revert(y_true={self.label_of(bool(y[i]))!r}, y_pred={float(s[i])!r}): "
                "no such event was added") from None
        return self

    def _revert_joined(self, slices):
        """Revert a count window's expired chunk slices (validated columns, oldest
        first) in one :meth:`revert_trusted`, and return True, where that leaves
        exactly the state that reverting them one after another would: every weight 1
        (here, among the deferred events and in the slices) and a flat order that stays
        flat, so that every count and sum is an exact integer and ``U`` is computed
        from the arrays. Otherwise, or if an event was never added, nothing changes and
        the result is False (the window then reverts the slices one by one). One
        rebuild of the order instead of one per slice: `O(n + m)` numpy."""
        so = self._so
        most = so.size() + self._nchunked  # (stored and deferred: the largest size)
        if (self._bins or self._ps or so._arrays is None or not so.unit or so.bits is not None
                or most > scoreorder.FLAT_MAX or (most >> 1) > DEFER_LIMIT
                or any(c[2] is not None for c in self._chunks)
                or any(w is not None for _, _, w in slices)):
            return False
        y = np.concatenate([sl[0] for sl in slices])
        s = np.concatenate([sl[1] for sl in slices])
        try:
            self.revert_trusted(y, s)
        except ValidationError:
            return False
        return True

    def _revert_later(self, slices):
        """Defer the removal of a count window's expired chunk slices (validated
        columns, oldest first) until the next read, and return True, where that leaves
        exactly the state that reverting them at once would; otherwise change nothing
        and return False (the window then reverts them now).

        The slices must be events this metric holds and has not reverted: a window's
        own expired events (they are not checked here; a window hands over only those).

        Why: a window of a few thousand events updated by batches keeps a flat order,
        and each revert rebuilds it (`O(n)` numpy passes,
        :meth:`ScoreOrder.replace_entries`) while the window is read far less often (a
        Monitor: every 1000 events, batches of a few hundred). Deferred, the batches in
        and out between two reads cost one rebuild. The same bits: with every weight 1
        (deferred events and slices) and a flat order that stays flat (the stored and
        deferred events fit in :data:`~streameval.metrics.scoreorder.FLAT_MAX`), the
        flat arrays are exact per-score event counts whatever the order of the
        additions and removals, ``U`` and the totals are computed from them, and a flat
        order is nothing but its arrays. Every other change (an event added or reverted
        one at a time, a weighted batch, a batch that could take the order past
        ``FLAT_MAX``, a read, ``merge``, state) merges the deferred work first."""
        so = self._so
        most = so.size() + self._nchunked  # (stored and deferred: the largest size)
        if (self._bins or self._ps or not self._chunks or so._arrays is None
                or so.bits is not None
                or not so.unit or most > scoreorder.FLAT_MAX
                or any(c[2] is not None for c in self._chunks)
                or any(w is not None for _, _, w in slices)):
            return False
        self._gone.extend((y, s) for y, s, _ in slices)
        self._streak = 0
        return True

    def _merge(self, other):
        self._order.merge(other._order)
        if self._next_check is not None and self._events() >= self._next_check:
            self._bound()

    def _subtract(self, other):
        # both orders read through ``_order``: deferred events merged in first
        theirs = other._order
        bins = self._bins
        self._order.subtract(theirs, f"the other {self._public_name}",
                             (lambda k: f"bin {int(k)}") if bins else None)

    def _get_data(self):
        data = self._order.to_data()
        if self._next_check is not None and self._next_check != 2 * self._cap:
            data["next_check"] = self._next_check  # (after the first check only)
        return data

    def _set_data(self, data):
        self._cached_stamp = -1
        for pending in (self._ps, self._py, self._pw, self._chunks, self._gone):
            pending.clear()
        self._nchunked = 0
        self._order.set_data(data)
        if self._cap is not None:
            nxt = data.get("next_check", 2 * self._cap)
            if type(nxt) is not int or nxt < 0:
                self._order.clear()
                raise ValueError(f"bad state: next_check = {nxt!r}")
            self._next_check = nxt
        if self._bins and len(self._order) and not np.isin(
            self._order.arrays()[0], np.arange(self._bins, dtype=np.float64)
        ).all():
            self._order.clear()
            raise ValueError(f"bad state: keys must be bin indices 0..{self._bins - 1}")

    def _check(self):
        assert len(self._ps) == len(self._py) == len(self._pw) < self._limit
        assert self._nchunked == sum(len(c[1]) for c in self._chunks) < self._limit
        assert not self._gone or (self._chunks and not self._ps)
        self._order._check()

    def __len__(self):
        """Number of distinct scores (or occupied bins) stored."""
        return len(self._order)

    def _weights_cached(self, compute):
        stamp = self._order.stamp
        if stamp != self._cached_stamp:
            self._cached = compute(self._order)
            self._cached_stamp = stamp
        return self._cached

    # ------------------------------------------------------------------ binary state
    def _get_array_data(self):
        """The data of a binary checkpoint, without changing anything (``to_state``
        merges deferred events first): the score order as it is laid out
        (:meth:`ScoreOrder.to_layout`), the deferred events and expired slices as
        they are (numpy columns), and the cached values still valid (AP's value,
        ROCAUC's DeLong variance), so that a restored metric does the same work at the
        same reads: the same bits. Runtime complexity: `O(deferred events)` plus the
        order's :meth:`~ScoreOrder.to_layout`."""
        so = self._so

        def col(x):
            return None if x is None else np.array(x, copy=True)

        cached = self._cached if self._cached_stamp == so.stamp else None
        key = getattr(self, "_delong_key", None)
        return {
            "order": so.to_layout(),
            # (none deferred, what most captures meet: null, no array to reference)
            "ps": np.array(self._ps, dtype=np.float64) if self._ps else None,
            "py": np.array(self._py, dtype=bool) if self._py else None,
            "pw": None if all(w is None for w in self._pw) else
            np.array([1.0 if w is None else w for w in self._pw], dtype=np.float64),
            "pw_none": [w is None for w in self._pw] if any(w is None for w in self._pw)
            and not all(w is None for w in self._pw) else None,
            "chunks": [[col(c[0]), col(c[1]), col(c[2])] for c in self._chunks],
            "gone": [[col(g[0]), col(g[1])] for g in self._gone],
            "nchunked": int(self._nchunked), "limit": int(self._limit),
            "streak": int(self._streak),
            "cached": cached if isinstance(cached, float) else None,
            "delong": float(self._delong_var) if key is not None and key[0] is so
            and key[1] == so.stamp else None,
            "next_check": self._next_check,  # (a bounded order's next cap check)
        }

    def state_token(self):
        """A cheap token that changes whenever :meth:`_get_array_data` would (events
        counted, values cached, a read that reshapes the order's layout): a Monitor
        reuses the last binary state of a scope whose tokens did not change. `O(1)`."""
        so = self._so
        lv = getattr(so, "_levels", None)
        key = getattr(self, "_delong_key", None)
        return (id(so), so.stamp, self._cached_stamp, len(self._ps), len(self._chunks),
                len(self._gone), None if key is None else (id(key[0]), key[1]),
                None if lv is None else (lv.rent, lv.ap, len(lv.pos), len(lv.neg),
                                         tuple(id(x.k) for x in lv.pos)))

    def to_array_state(self):
        """The binary checkpoint's state (see :mod:`streameval.metrics.arraystate`):
        ``to_state()``'s shape with :meth:`_get_array_data` as its data."""
        params = self.__dict__.get("_array_params")
        if params is None:  # (constructor parameters never change: read them once)
            params = self.__dict__["_array_params"] = self._params()
        return {"type": self._public_name, "version": self._state_version,
                "params": dict(params), "data": self._get_array_data(), "arrays": 1}

    def _set_array_data(self, data):
        """Restore :meth:`_get_array_data` (checked; ``ValueError`` if bad)."""
        keys = {"order", "ps", "py", "pw", "pw_none", "chunks", "gone", "nchunked", "limit",
                "streak", "cached", "delong"}
        if not isinstance(data, dict) or set(data) - {"next_check"} != keys:
            raise ValueError(f"bad {self._public_name} state: expected keys "
                             + ", ".join(sorted(keys)))
        so = ScoreOrder.from_layout(data["order"])
        nxt = data.get("next_check")
        if self._cap is None:
            nxt = None
        elif nxt is None:
            nxt = 2 * self._cap
        elif type(nxt) is not int or nxt < 0:
            raise ValueError(f"bad {self._public_name} state: next_check = {nxt!r:.40}")
        ps, py, pw = data["ps"], data["py"], data["pw"]
        if ps is None and py is None:  # (no deferred event)
            ps, py = _NO_SCORES, _NO_LABELS
        if not (isinstance(ps, np.ndarray) and isinstance(py, np.ndarray)
                and ps.ndim == py.ndim == 1 and len(ps) == len(py)
                and (pw is None or (isinstance(pw, np.ndarray) and pw.shape == ps.shape))):
            raise ValueError(f"bad {self._public_name} state: deferred events of "
                             "different lengths")
        for name in ("nchunked", "limit", "streak"):
            if type(data[name]) is not int or data[name] < 0:
                raise ValueError(f"bad {self._public_name} state: {name} is not an int >= 0")
        chunks = []
        for c in data["chunks"] if isinstance(data["chunks"], list) else [None]:
            if not (isinstance(c, list) and len(c) == 3 and all(
                    isinstance(x, np.ndarray) for x in c[:2])
                    and (c[2] is None or isinstance(c[2], np.ndarray))):
                raise ValueError(f"bad {self._public_name} state: a deferred batch is not "
                                 "three columns")
            chunks.append(tuple(c))
        gone = []
        for g in data["gone"] if isinstance(data["gone"], list) else [None]:
            if not (isinstance(g, list) and len(g) == 2
                    and all(isinstance(x, np.ndarray) for x in g)):
                raise ValueError(f"bad {self._public_name} state: an expired slice is not "
                                 "two columns")
            gone.append(tuple(g))
        if sum(len(c[1]) for c in chunks) != data["nchunked"]:
            raise ValueError(f"bad {self._public_name} state: nchunked does not match")
        self._so = so
        self._add, self._remove = so.add, so.remove
        self._ps = [float(x) for x in ps]
        self._py = [bool(x) for x in py]
        none = data["pw_none"]
        if pw is None:
            self._pw = [None] * len(ps)
        elif none is not None:
            self._pw = [None if n else float(w) for w, n in zip(pw, none)]
        else:
            self._pw = [float(w) for w in pw]
        self._chunks = chunks
        self._gone = gone
        self._nchunked = data["nchunked"]
        self._limit = data["limit"]
        self._streak = data["streak"]
        self._next_check = nxt
        cached = data["cached"]
        if cached is not None:
            self._cached, self._cached_stamp = float(cached), so.stamp
        else:
            self._cached, self._cached_stamp = None, -1
        if data["delong"] is not None:
            self._delong_var, self._delong_key = float(data["delong"]), (so, so.stamp)
        return self


def order_key(metric):
    """What decides a binary score-order metric's score order (its labels and bins),
    as a hashable key, or None for any other metric: two metrics with the same key fed
    the same events hold the same order (cumulative AUC and AP, ROC and PR curves...),
    so a Monitor keeps one and reads it for both (:class:`OrderView`)."""
    if isinstance(metric, _BinaryRanking):
        return (metric.pos_label, metric.neg_label, metric._bins, metric._cap)
    return None


class OrderView(SharedView):
    """A read-only score-order metric that reads another one's order.

    ``template`` is an empty metric (or a window over one, as the Monitor holds it)
    of the view's kind, ``owner`` an object of the same structure whose metric has the
    same :func:`order_key` and is fed the same events (a Monitor's ``roc_auc`` and
    ``average_precision``; their ``@10000`` windows). ``inner`` maps such an object to
    its score-order metric (the object itself, or a window's current ``metric``).

    ``get()`` is the template kind's value on the owner's order, and ``to_state()`` is
    exactly the state the template would have if it had been fed the owner's events
    (so checkpoints do not change and load into unshared metrics). Nothing updates a
    view: ``update``, ``update_many``, ``update_trusted``, ``revert``, ``merge`` and
    ``subtract`` raise ``TypeError`` (the owner is updated instead; sharing never
    double counts). Other attributes (``size``, ``late``, ``newest``...) are the
    owner's; ``clone()`` is a fresh, unshared copy of the template.

    Runtime complexity: ``get`` is the template kind's ``get`` on the owner's order
    (AP: one numpy pass, cached until the order changes; AUC: `O(1)`).
    """

    key_of = staticmethod(order_key)
    what = "order"
    mismatch = "an OrderView reads a score-order metric of the same labels and bins"
    refusal = "a shared score-order view is read-only: its owner is updated"

    def _linked(self):
        """The template's metric, reading the owner's current (merged) order."""
        so = self._inner(self.owner)._order
        m = self._metric
        if m._so is not so:
            m._so = so
            m._cached_stamp = -1
            m._delong_key = None  # (ROCAUC's cached variance: let the old order go)
            m._iv_key = m._iv_parts = None  # (and its interval's)
        return m

    @property
    def _has_interval(self):
        return has_interval(self._metric)

    def error_bound(self):
        """The template kind's ``error_bound()`` on the owner's order."""
        return self._linked().error_bound()

    def read_size(self):
        """The template kind's :meth:`_BinaryRanking.read_size` on the owner's order,
        from the owner's event count: `O(1)`, it merges none of the owner's deferred
        events (a read that is held does not pay for them)."""
        n = self._inner(self.owner)._events()
        cap = self._metric._cap
        return n if cap is None else min(n, 2 * cap)

    @property
    def exact(self):
        return self._linked().exact

    def to_state(self):
        mine = self._metric.to_state()
        mine["data"] = self._inner(self.owner)._get_data()
        return self._window_state(mine)

    def to_array_state(self):
        """A binary checkpoint's state of this view: the template's state (an empty
        metric or window) and what its metric has cached (``{"view": {...}}``), not the
        owner's order,
        which the owner's own state holds. A Monitor shares the order again when it
        loads (:func:`~streameval.monitor.scopes.share_orders`) and gives the view its
        cache back (:meth:`restore_view_cache`)."""
        m = self._metric
        so = self._inner(self.owner)._so
        cached = m._cached if m._so is so and m._cached_stamp == so.stamp else None
        key = getattr(m, "_delong_key", None)
        template = self.__dict__.get("_template_state")
        if template is None:  # (the template never changes: its state is read once)
            template = self.__dict__["_template_state"] = self.template.clone().to_state()
        return {"template": template,
                "view": {"cached": cached if isinstance(cached, float) else None,
                         "delong": float(m._delong_var) if key is not None and key[0] is so
                         and key[1] == so.stamp else None}}

    def state_token(self):
        """What :meth:`to_array_state` depends on, cheaply (see
        :meth:`_BinaryRanking.state_token`): the view's cached values."""
        m = self._metric
        key = getattr(m, "_delong_key", None)
        return (id(m._so), m._cached_stamp, None if key is None else (id(key[0]), key[1]))

    def restore_view_cache(self, view):
        """Give this view the cache of :meth:`to_array_state`'s ``view`` part, linked to
        the owner's order as it is (nothing merged): the same reads then do the same
        work as in the process that saved it."""
        if not isinstance(view, dict) or set(view) != {"cached", "delong"}:
            raise ValueError("bad shared-view state: expected keys cached, delong")
        m = self._metric
        so = self._inner(self.owner)._so
        m._so = so
        for k in ("cached", "delong"):
            if view[k] is not None and type(view[k]) is not float:
                raise ValueError(f"bad shared-view state: {k} is not a float")
        if view["cached"] is not None:
            m._cached, m._cached_stamp = view["cached"], so.stamp
        else:
            m._cached_stamp = -1
        if view["delong"] is not None:
            m._delong_var, m._delong_key = view["delong"], (so, so.stamp)
        else:
            m._delong_key = None


def _average_of(args, kwargs):
    """The ``average`` argument of ``ROCAUC(bins, average, ...)`` and
    ``AveragePrecision(bins, average, ...)``, given by name or position."""
    if "average" in kwargs:
        return kwargs["average"]
    return args[1] if len(args) > 1 else None


class _RankingFront(Cases):
    """What the :class:`ROCAUC` and :class:`AveragePrecision` fronts share: their
    public signature and the dispatch on ``average`` (None: binary, else multiclass
    one-vs-rest)."""

    def __init__(self, bins=None, average=None, pos_label=True, neg_label=None,
                 max_scores=DEFAULT_MAX_SCORES):
        """The public signature (configs and ``help`` read it); ``__new__`` returns a
        case class's object, whose own ``__init__`` (same parameters) runs instead."""

    @classmethod
    def _case(cls, args, kwargs):
        return "binary" if _average_of(args, kwargs) is None else "multiclass"


class ROCAUC(_RankingFront):
    """Exact area under the ROC curve, updated online (Mann–Whitney).

    ``AUC = U / (P * N)`` with ``U = sum over (positive i, negative j) of
    w_i w_j ([s_i > s_j] + 1/2 [s_i = s_j])``, ``P`` and ``N`` the total positive and
    negative weight: equal to ``sklearn.metrics.roc_auc_score`` (ties and
    ``sample_weight`` included). ``NaN`` without positive or without negative weight.

    Runtime complexity: `O(log(n))` for ``update`` and ``revert`` (``n`` distinct
    scores), `O(1)` for ``get`` (a metric left unread for more than
    :data:`DEFER_AFTER` updates merges them at its next read, in bulk);
    ``update_many`` of ``m`` events `O(m log(n))` numpy on a million distinct scores
    (the score order's numpy levels, see :mod:`streameval.metrics.scoreorder`). Memory
    with unit weights (tracemalloc, ``benchmarks/bench_ranking.py``): at most 24 bytes
    per distinct score stored when events come in batches or unread (with AP read from
    the same order, at most 28 per distinct positive score), about 47 when the order is
    read after every single event (its per-event layout); repeated scores cost
    nothing.

    >>> from streameval import ROCAUC
    >>> auc = ROCAUC()
    >>> for y, s in zip([1, 0, 0, 0, 1, 0, 1, 0], [.9, .8, .3, .1, .4, .9, .66, .7]):
    ...     auc.update(y, s)
    >>> auc.get()
    0.566666...
    >>> auc.revert(0, .9)
    >>> round(auc.get(), 6)
    0.666667

    With ``bins``, memory is bounded and ``error_bound()`` says how far the value can
    be from the exact one (only pairs sharing a bin have an unknown order):

    >>> coarse = ROCAUC(bins=4)
    >>> coarse.update_many([1, 0, 1, 0], [.9, .6, .7, .1])
    ROCAUC: 0.875000
    >>> coarse.error_bound()
    0.125

    With ``average=`` it is the one-vs-rest multiclass AUC (see :class:`ROCAUC`'s
    ``average`` parameter and ``sklearn.metrics.roc_auc_score(multi_class="ovr")``).

    Parameters
    ----------
    bins
        None (exact) or the number of equal-width bins over ``[0, 1]`` (bounded memory:
        at most ``bins`` entries). Scores outside ``[0, 1]`` are clamped into the edge
        bins; ``error_bound()`` stays guaranteed since it counts every pair that shares
        a bin.
    average
        None (binary) or ``"macro"``, ``"weighted"`` (by positive weight of each
        class) or ``"micro"``: one-vs-rest multiclass, ``y_pred`` a dict of class
        probabilities.
    pos_label, neg_label
        The positive and negative labels (binary).
    max_scores
        The binary order's cap (default
        :data:`~streameval.metrics.scoreorder.DEFAULT_MAX_SCORES`): past ``2 *
        max_scores`` events on more distinct scores, keys are coarsened to at most
        ``max_scores`` and ``error_bound()`` bounds the distance to the exact value.
        None (or 0) keeps it exact and unbounded: 16 to 28 bytes per distinct score.
        One-vs-rest orders are always exact.
    """


class _BinaryROCAUC(ROCAUC, _BinaryRanking, case="binary"):
    """Binary :class:`ROCAUC` (``average=None``): ``U / (P * N)`` from the score order."""

    _ranges = ranges.AUC  # U = U_hi + U_lo + P_hi * N_lo over score ranges

    def __init__(self, bins=None, average=None, pos_label=True, neg_label=None,
                 max_scores=DEFAULT_MAX_SCORES):
        _BinaryRanking.__init__(self, pos_label, neg_label, bins, max_scores)
        self.bins = self._bins
        self.average = None
        self.max_scores = max_scores

    def get(self):
        """``U / (P * N)``, or NaN. Runtime complexity: `O(1)` (after merging any
        deferred events, see :data:`DEFER_AFTER`; a small order changed by a batch
        computes ``U`` at this first read, one numpy pass)."""
        if self._ps or self._chunks:
            self._flush()
        self._streak = 0
        o = self._so
        if o._shed_p or o._shed_n:  # removals of weights other than 1 (see refresh)
            o.refresh()
        if o.pos_weight > 0.0 and o.neg_weight > 0.0:
            return o.u / (o.pos_weight * o.neg_weight)
        return _NAN

    # -- confidence interval (logit-scale DeLong) ---------------------------------
    _has_interval = True
    #: (score order, its stamp) of the cached DeLong variance, see :meth:`_delong`
    _delong_key = None
    _delong_var = _NAN

    def _delong(self):
        """``(AUC, DeLong variance)``, the variance cached until the score order changes
        (keyed by the order and its stamp: an :class:`OrderView` may point this
        metric at another order)."""
        auc = _BinaryROCAUC.get(self)  # merges deferred events, refreshes U and totals
        o = self._so
        key = self._delong_key
        if key is None or key[0] is not o or key[1] != o.stamp:
            self._delong_var = _delong(o, auc)
            self._delong_key = (o, o.stamp)
        return auc, self._delong_var

    #: (score order, its stamp) of the cached interval parts, see :meth:`_auc_interval`
    _iv_key = None
    _iv_parts = None

    def _auc_interval(self):
        """``(AUC, (variance, df, m) or None)`` of :func:`_auc_parts`, cached until the
        score order changes (keyed as :meth:`_delong`)."""
        auc = _BinaryROCAUC.get(self)  # merges deferred events, refreshes U and totals
        o = self._so
        key = self._iv_key
        if key is None or key[0] is not o or key[1] != o.stamp:
            self._iv_parts = _auc_parts(o, auc)
            self._iv_key = (o, o.stamp)
        return auc, self._iv_parts

    def _interval_parts(self):
        auc, parts = self._auc_interval()
        if parts is None:
            return None
        var, df, m = parts
        return ["logit", auc, var, df, m, 0.0, 1.0]

    def interval(self, level=0.95):
        """Confidence interval ``(low, high)`` of the AUC at confidence ``level``: on the
        logit scale, from DeLong's variances moderated toward the Hanley-McNeil model's,
        with a Student t critical value, and within the largest variance an AUC can have.
        It covers at its level with few positives (20 among 2 000 events), where DeLong's
        normal interval ``AUC +- z sqrt(Var)`` does not (80% at 95% for an AUC of 0.97:
        the sample variance of 20 positives' components is small exactly when no
        low-scored positive was drawn, which is when the AUC is overestimated).

        DeLong's variances (DeLong, DeLong and Clarke-Pearson 1988), exact, from the
        score order: with ``P``, ``N`` the positive and negative weight, for each
        distinct score ``s``, ``V10(s) = (W_neg(< s) + W_neg(= s) / 2) / N`` and
        ``V01(s) = (W_pos(> s) + W_pos(= s) / 2) / P``;
        ``S10 = sum_s W_pos(= s) (V10(s) - AUC)^2 / (P - 1)``,
        ``S01 = sum_s W_neg(= s) (V01(s) - AUC)^2 / (N - 1)`` (DeLong's variance is
        ``S10 / P + S01 / N``). Each is moderated (Smyth 2004) toward the variance of
        the Hanley-McNeil model at the AUC ``A`` (Hanley and McNeil 1982:
        ``A^2 (1 - A) / (1 + A)`` for the positives, ``A (1 - A)^2 / (2 - A)`` for the
        negatives) with ``d0 =`` :data:`AUC_PRIOR_DF` prior degrees of freedom:
        ``S10' = ((P - 1) S10 + d0 H10) / (P - 1 + d0)``, and ``Var = S10' / P + S01' / N``.
        The interval is ``logit(A) +- t sqrt(Var) / (A (1 - A))`` mapped back (the
        logit-transformed DeLong interval of Pohar Perme and Manevski 2018, "Confidence
        intervals for the Mann-Whitney test"), ``t`` Student's critical value on
        ``min(P, N) - 1 + d0`` degrees of freedom, intersected with the score interval of
        the largest variance, ``A (1 - A) / min(P, N)`` (van Dantzig 1951; Birnbaum and
        Klose 1957), which is the interval at ``A = 0`` or ``1`` and near them (see
        :func:`streameval.metrics.base.logit_interval`). With many positives and
        negatives it is DeLong's interval on the logit scale. Assumes independent
        events.

        Weights are frequency weights (an event of weight 2 counts as two events, as
        scikit-learn's ``sample_weight``): integer weights give exactly the interval of
        the stream with rows repeated. ``(nan, nan)`` when the AUC is undefined or
        ``P <= 1`` or ``N <= 1`` (no variance estimate). With ``bins``, the interval of
        the binned AUC (scores replaced by their bins; ``error_bound()`` is not added).
        ``ValueError`` for a ``level`` that is not a number in ``(0, 1)``.

        Runtime complexity: one numpy pass over the ``n`` distinct scores, `O(n)`,
        cached until the next change (then `O(1)`).

        >>> from streameval import ROCAUC
        >>> y = [1, 0, 1, 1, 0, 1, 0, 0, 1, 0]
        >>> auc = ROCAUC().update_many(y, [.95, .9, .85, .8, .7, .6, .5, .4, .3, .2])
        >>> auc.get(), [round(v, 6) for v in auc.interval(0.95)]
        (0.68, [0.284524, 0.919062])

        Parameters
        ----------
        level
            The confidence level, a real number in ``(0, 1)``; default 0.95.
        """
        return Metric.interval(self, level)

    def error_bound(self):
        """Guaranteed bound on ``|get() - exact AUC|``: 0 when exact; with bins, half
        the weight of the (positive, negative) pairs that share a bin over ``P * N``
        (the binned value counts them as ties; their true order is the only unknown, the
        idea of Tatti, "Efficient estimation of AUC in a sliding window", ECML-PKDD
        2018). Attained when every bin has its positives above (or below) its
        negatives. NaN when the AUC is undefined. Runtime complexity: `O(bins)`; with
        ``max_scores``, coarsened, the same bound over the coarse keys in `O(1)` with
        integer weights (kept up to date as batches merge:
        :meth:`~streameval.metrics.scoreorder.ScoreOrder.pairs`), else one pass over
        the keys, cached until the order changes."""
        if not self._bins:
            o = self._order
            if o.bits is None:
                return 0.0 if o.nz_pos and o.nz_neg else _NAN
            return self._cached_bound(_pairs_bound)
        return _auc_bound(self._order)


class Gini(_BinaryROCAUC):
    """Gini coefficient of a scorer: ``2 * AUC - 1``, AUC exact as in :class:`ROCAUC`.

    Runtime complexity: `O(log(n))` for ``update`` and ``revert``, `O(1)` for ``get``.

    >>> from streameval import Gini
    >>> g = Gini()
    >>> g.update_many([1, 0, 1, 0, 0, 0], [.9, .7, .8, .6, .5, .4])
    Gini: 1.000000

    Parameters
    ----------
    bins
        As for :class:`ROCAUC`; ``error_bound()`` is twice the AUC's.
    pos_label, neg_label
        The positive and negative labels.
    max_scores
        As for :class:`ROCAUC`.
    """

    _ranges = ranges.GINI

    def __init__(self, bins=None, pos_label=True, neg_label=None,
                 max_scores=DEFAULT_MAX_SCORES):
        _BinaryRanking.__init__(self, pos_label, neg_label, bins, max_scores)
        self.bins = self._bins
        self.max_scores = max_scores

    def get(self):
        """``2 * AUC - 1``, or NaN. Runtime complexity: `O(1)`. (Doubling is exact in
        floating point, so this is bit for bit ``2 * U / (P * N) - 1``.)"""
        return 2.0 * _BinaryROCAUC.get(self) - 1.0

    def error_bound(self):
        """Guaranteed bound on ``|get() - exact Gini|`` (twice the AUC bound)."""
        return 2.0 * super().error_bound()

    def _interval_parts(self):
        auc, parts = self._auc_interval()
        if parts is None:
            return None
        var, df, m = parts
        return ["logit", 2.0 * auc - 1.0, 4.0 * var, df, m, -1.0, 1.0]

    def interval(self, level=0.95):
        """Confidence interval ``(low, high)`` of the Gini coefficient: ``2 * AUC
        interval - 1``, the AUC's interval (see :meth:`ROCAUC.interval`),
        clipped to ``[-1, 1]``. ``(nan, nan)`` when undefined.

        Runtime complexity: as :meth:`ROCAUC.interval`.

        >>> from streameval import Gini
        >>> y = [1, 0, 1, 1, 0, 1, 0, 0, 1, 0]
        >>> g = Gini().update_many(y, [.95, .9, .85, .8, .7, .6, .5, .4, .3, .2])
        >>> round(g.get(), 6), [round(v, 6) for v in g.interval(0.95)]
        (0.36, [-0.430952, 0.838125])

        Parameters
        ----------
        level
            The confidence level, a real number in ``(0, 1)``; default 0.95.
        """
        return Metric.interval(self, level)


class AveragePrecision(_RankingFront):
    """Exact average precision, updated online: ``AP = sum_n (R_n - R_{n-1}) P_n``.

    Over the distinct scores from high to low, ``P_n`` and ``R_n`` the precision and
    recall when predicting positive at score ``>=`` the n-th: a step function, no
    interpolation (trapezoids over-estimate the area under a PR curve). Equal to
    ``sklearn.metrics.average_precision_score`` (ties and ``sample_weight`` included).
    ``NaN`` without positive weight; 1.0 without negatives (as scikit-learn).

    Runtime complexity: `O(log(n))` for ``update`` and ``revert``; ``get`` is one numpy
    pass over the distinct scores that hold positives, `O(n)`, cached until the next
    change (in the score order's levels it reads a running sum of the negatives above
    each positive score, kept up to date by every batch; its sums run in int64 while
    every weight is an integer). ``benchmarks/bench_ranking.py`` (section 0) times it
    after a batch at 10**6 distinct scores. Memory:
    as :class:`ROCAUC`.

    >>> from streameval import AveragePrecision
    >>> ap = AveragePrecision()
    >>> for y, s in zip([1, 0, 0, 0, 1, 0, 1, 0], [.9, .8, .3, .1, .4, .9, .66, .7]):
    ...     ap.update(y, s)
    >>> ap.get()
    0.466666...

    Parameters
    ----------
    bins
        None (exact) or the number of equal-width bins over ``[0, 1]`` (bounded memory;
        out-of-range scores are clamped into the edge bins); ``error_bound()`` then
        bounds the distance to the exact AP (see :func:`_ap_bound`).
    average
        None (binary) or ``"macro"`` (mAP), ``"weighted"`` or ``"micro"``: one-vs-rest
        multiclass, equal to ``average_precision_score`` on one-hot labels.
    pos_label, neg_label
        The positive and negative labels (binary).
    max_scores
        As for :class:`ROCAUC` (``error_bound()`` then bounds the AP's distance to the
        exact one).
    """


class _BinaryAveragePrecision(AveragePrecision, _BinaryRanking, case="binary"):
    """Binary :class:`AveragePrecision` (``average=None``), from the score order."""

    _ranges = ranges.AP  # the ranges' sums of precision at each positive, over P

    def __init__(self, bins=None, average=None, pos_label=True, neg_label=None,
                 max_scores=DEFAULT_MAX_SCORES):
        _BinaryRanking.__init__(self, pos_label, neg_label, bins, max_scores)
        self.bins = self._bins
        self.average = None
        self.max_scores = max_scores

    def get(self):
        """AP, or NaN. Runtime complexity: `O(n)` numpy, `O(1)` if unchanged."""
        return self._weights_cached(_average_precision)

    def error_bound(self):
        """Guaranteed bound on ``|get() - exact AP|`` (0 when exact; NaN if undefined).

        Runtime complexity: `O(bins)`; coarsened, one pass over the keys that hold
        positives (with integer weights their places among the negative keys are
        searched, no sort of both classes), cached until the order changes.
        """
        if not self._bins:
            o = self._order
            if o.bits is None:
                return 0.0 if o.nz_pos else _NAN
            return self._cached_bound(_ap_bound)
        return _ap_bound(self._order)


#: why Spark does not compose the interpolated APs over score ranges (its refusal)
_ENVELOPE_NOT_RANGED = ("(its precision envelope is not composed over score ranges); use "
                        "AveragePrecision, exact over score ranges, or "
                        "AveragePrecision(bins=N)")


class InterpolatedAP(_BinaryRanking):
    """Interpolated average precision: area under the precision envelope.

    ``AP_interp = sum_n (R_n - R_{n-1}) max_{m >= n} P_m`` over the distinct scores
    from high to low: each precision is replaced by the best precision at the same or
    any higher recall (the "all points" AP of PASCAL VOC 2010 and later). NaN without
    positive weight.

    Runtime complexity: `O(log(n))` for ``update`` and ``revert``, `O(n)` numpy for
    ``get`` (cached until the next change).

    >>> from streameval import InterpolatedAP
    >>> m = InterpolatedAP()
    >>> m.update_many([1, 0, 1, 1, 0], [.9, .8, .7, .6, .5])
    InterpolatedAP: 0.833333

    Parameters
    ----------
    pos_label, neg_label
        The positive and negative labels.
    """

    _per_score = _ENVELOPE_NOT_RANGED

    def __init__(self, pos_label=True, neg_label=None):
        super().__init__(pos_label, neg_label)

    @staticmethod
    def _compute(order):
        if not order.nz_pos:
            return _NAN
        wp, _, envelope = _interpolated_precision(order)
        return float((wp * envelope).sum() / wp.sum())

    def get(self):
        """Interpolated AP, or NaN. Runtime complexity: `O(n)` numpy."""
        return self._weights_cached(self._compute)


#: ElevenPointAP: a recall this close below one of its levels reaches it (rounding of
#: fractional weights, about 1e-16 per operation; with integer weights a recall just
#: below a level is at least 1 / (10 P) below it, more than this while P < 10**11).
RECALL_SLACK = 1e-12


class ElevenPointAP(_BinaryRanking):
    """11-point interpolated average precision (PASCAL VOC 2007).

    ``AP_11 = 1/11 sum_{r in 0, 0.1, ..., 1} max {P_n : R_n >= r}`` (0 where no recall
    reaches r), over the distinct scores as thresholds; ``r`` is ``k / 10``. NaN without
    positive weight. A recall within :data:`RECALL_SLACK` below a level reaches it: with
    decimal weights a recall of exactly 0.8 (1.7 + 1.9 of 4.5) is computed as
    0.7999999999999999 or 0.8 depending on how the sums were rounded (the order of
    additions, reverts), and the value must not jump with it.

    Runtime complexity: `O(log(n))` for ``update`` and ``revert``, `O(n)` numpy for
    ``get`` (cached until the next change).

    >>> from streameval import ElevenPointAP
    >>> m = ElevenPointAP()
    >>> m.update_many([1, 0, 1, 1, 0], [.9, .8, .7, .6, .5])
    ElevenPointAP: 0.840909

    Parameters
    ----------
    pos_label, neg_label
        The positive and negative labels.
    """

    _levels = np.arange(11) / 10.0
    _per_score = _ENVELOPE_NOT_RANGED

    def __init__(self, pos_label=True, neg_label=None):
        super().__init__(pos_label, neg_label)

    @classmethod
    def _compute(cls, order):
        if not order.nz_pos:
            return _NAN
        _, recall, envelope = _interpolated_precision(order)
        idx = np.searchsorted(recall, cls._levels - RECALL_SLACK, side="left")
        ext = np.append(envelope, 0.0)
        return float(ext[idx].sum() / 11.0)

    def get(self):
        """11-point AP, or NaN. Runtime complexity: `O(n)` numpy."""
        return self._weights_cached(self._compute)


class ROCCurve(_BinaryRanking):
    """The ROC curve of everything seen: ``get()`` returns ``(fpr, tpr, thresholds)``.

    As ``sklearn.metrics.roc_curve(..., drop_intermediate=False)``: thresholds are
    ``inf`` then the distinct scores of non-zero weight, high to low; ``fpr``/``tpr``
    are NaN arrays without negative/positive weight.

    Runtime complexity: `O(log(n))` for ``update`` and ``revert``, `O(n)` for ``get``.

    >>> from streameval import ROCCurve
    >>> roc = ROCCurve()
    >>> roc.update_many([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    ROCCurve: ...
    >>> fpr, tpr, thresholds = roc.get()
    >>> fpr.tolist(), tpr.tolist()
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0])

    Parameters
    ----------
    pos_label, neg_label
        The positive and negative labels.
    """

    _ranges = ranges.ROC_CURVE

    def __init__(self, pos_label=True, neg_label=None):
        super().__init__(pos_label, neg_label)

    def get(self):
        """``(fpr, tpr, thresholds)`` numpy arrays. Runtime complexity: `O(n)`."""
        keys, wp, wn, _, _ = self._order.arrays()
        keep = (wp > 0.0) | (wn > 0.0)
        keys, wp, wn = keys[keep][::-1], wp[keep][::-1], wn[keep][::-1]
        tps = np.concatenate(([0.0], np.cumsum(wp)))
        fps = np.concatenate(([0.0], np.cumsum(wn)))
        thresholds = np.concatenate(([np.inf], keys))
        fpr = fps / fps[-1] if fps[-1] > 0 else np.full(len(fps), np.nan)
        tpr = tps / tps[-1] if tps[-1] > 0 else np.full(len(tps), np.nan)
        return fpr, tpr, thresholds


class PRCurve(_BinaryRanking):
    """The precision–recall curve: ``get()`` returns ``(precision, recall, thresholds)``.

    As ``sklearn.metrics.precision_recall_curve(..., drop_intermediate=False)``:
    thresholds are the distinct scores of non-zero weight, ascending; precision and
    recall have one more element, ending with 1 and 0; recall is 1 everywhere
    without positive weight (as scikit-learn).

    Runtime complexity: `O(log(n))` for ``update`` and ``revert``, `O(n)` for ``get``.

    >>> from streameval import PRCurve
    >>> pr = PRCurve()
    >>> pr.update_many([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    PRCurve: ...
    >>> precision, recall, thresholds = pr.get()
    >>> recall.tolist(), thresholds.tolist()
    ([1.0, 1.0, 0.5, 0.5, 0.0], [0.1, 0.35, 0.4, 0.8])

    Parameters
    ----------
    pos_label, neg_label
        The positive and negative labels.
    """

    _ranges = ranges.PR_CURVE

    def __init__(self, pos_label=True, neg_label=None):
        super().__init__(pos_label, neg_label)

    def get(self):
        """``(precision, recall, thresholds)`` numpy arrays. Runtime complexity: `O(n)`."""
        keys, wp, wn, _, _ = self._order.arrays()
        keep = (wp > 0.0) | (wn > 0.0)
        keys, wp, wn = keys[keep][::-1], wp[keep][::-1], wn[keep][::-1]
        tps, fps = np.cumsum(wp), np.cumsum(wn)
        precision = _precision(tps, fps)
        if len(tps) and tps[-1] > 0:
            recall = tps / tps[-1]
        else:
            recall = np.ones(len(tps))
        return (np.append(precision[::-1], 1.0), np.append(recall[::-1], 0.0),
                keys[::-1].copy())


# -------------------------------------------------------------------- multiclass


class _OVRRanking(MultiClassMetric):
    """One-vs-rest over the classes seen: one score order per class (and one for
    the micro average). A class first seen late counts every earlier event as a
    negative with score 0 (its probability was absent from their ``y_pred``). The
    macro and weighted averages run over the classes with positive weight (those
    scikit-learn finds in ``y_true``); NaN with fewer than two. For ``to_state``, class
    labels must be JSON scalars (str, int, float, bool)."""

    _abstract = True

    def __init__(self, average="macro", bins=None):
        self.average = check_param("average", average, Options(*_AVERAGES))
        self.bins = _check_bins(bins)
        self._classes = {}  # class -> ScoreOrder, in order of first appearance
        self._micro = ScoreOrder() if average == "micro" else None
        self._n = 0  # events stored
        self._w = 0.0  # their weight
        self._z = 0  # events with weight 0
        self._cached_stamp = None
        self._cached = None

    @property
    def requires_labels(self):
        # river must pass predict_proba_one's dict
        return False

    @property
    def classes(self):
        """The classes seen, in order of first appearance."""
        return list(self._classes)

    # -- validation ---------------------------------------------------------
    def _key(self, s):
        return _bin_of(s, self.bins) if self.bins else s

    def _probas(self, y_pred, name="y_pred"):
        if not isinstance(y_pred, dict):
            fail(name, y_pred, "a multiclass ranking metric needs a dict of class probabilities")
        out = {}
        for c, p in y_pred.items():
            self._class(c, f"{name} key")
            if type(p) is not float:
                if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
                    fail(f"{name}[{c!r}]", p, "probability must be a finite number")
                p = float(p)
            if p - p:
                fail(f"{name}[{c!r}]", p, "probability must be a finite number")
            out[c] = p
        return out

    def _new_order(self):
        o = ScoreOrder()
        if self._n:  # the events so far: negatives with score 0 for this class
            key = self._key(0.0)
            o.add_entries(np.array([key]), np.array([0.0]), np.array([self._w]),
                          np.array([0]), np.array([self._n]), 0, self._z)
        return o

    def _add_class(self, c):
        self._classes[c] = self._new_order()
        if self._micro is not None and self._n:
            key = self._key(0.0)
            self._micro.add_entries(np.array([key]), np.array([0.0]), np.array([self._w]),
                                    np.array([0]), np.array([self._n]), 0, self._z)

    # -- protocol -----------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0):
        """Add one event. Runtime complexity: `O(k log(n))` for ``k`` classes."""
        y_true = self._class(y_true)
        probas = self._probas(y_pred)
        w = check_weight(w)
        classes = self._classes
        for c in (y_true, *probas):
            if c not in classes:
                self._add_class(c)
        key = self._key
        micro = self._micro
        for c, order in classes.items():
            s = key(probas.get(c, 0.0))
            positive = c == y_true
            order.add(s, positive, w)
            if micro is not None:
                micro.add(s, positive, w)
        self._n += 1
        self._w += w
        self._z += not w

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event added earlier. Runtime complexity: `O(k log(n))`.

        Raises ``ValueError`` (state unchanged) if no such event is stored.
        """
        y_true = self._class(y_true)
        probas = self._probas(y_pred)
        w = check_weight(w)
        classes = self._classes
        unknown = [c for c in (y_true, *probas) if c not in classes]
        entries = [(order, self._key(probas.get(c, 0.0)), c == y_true)
                   for c, order in classes.items()]
        if unknown or not self._n or not all(o.contains(s, p, 1, w) for o, s, p in entries):
            raise ValueError(
                f"revert(y_true={y_true!r}, y_pred={y_pred!r}): no such event was added")
        if self._micro is not None:
            counts = {}
            for _, s, p in entries:
                counts[s, p] = counts.get((s, p), 0) + 1
            micro = self._micro
            need = {True: 0, False: 0}  # per class: events of this weight (zero or not)
            for (_, p), c in counts.items():
                need[p] += c
            if not all(micro.contains(s, p, c, w) for (s, p), c in counts.items()) or any(
                    (z if not w else n - z) < need[p] for p, n, z in (
                        (True, micro.n_pos, micro.z_pos), (False, micro.n_neg, micro.z_neg))):
                raise ValueError(
                    f"revert(y_true={y_true!r}, y_pred={y_pred!r}): no such event was added")
        for order, s, p in entries:
            order.remove(s, p, w)
            if self._micro is not None:
                self._micro.remove(s, p, w)
        self._n -= 1
        self._w = self._w - w if self._n else 0.0
        self._z -= not w

    def validate(self, y_true, y_pred, w=None):
        """Check a batch of labels and probability dicts without changing anything;
        return its columns: (class labels, probability dicts with float values, float64
        weights or None), for :meth:`update_trusted` and :meth:`revert_trusted`.
        A bad element raises :class:`~streameval.validation.ValidationError` naming it
        and its index. Runtime complexity: `O(m k)`, one Python pass over the dicts."""
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        weights = as_weight_array(w, n)
        labels = list(y_true)
        each(self._class, labels, "y_true")
        preds = each(self._probas, y_pred, "y_pred")
        return labels, preds, weights

    def update_trusted(self, y, s, w=None):
        """Add validated columns (see :meth:`validate`), unchecked: same result as a
        loop of ``update``. Runtime complexity: per class, a numpy sort and merge."""
        n = len(y)
        if not n:
            return self
        index = {c: j for j, c in enumerate(self._classes)}
        y_idx = np.empty(n, dtype=np.int64)
        for i, c in enumerate(y):
            j = index.get(c)
            if j is None:
                j = index[c] = len(index)
            y_idx[i] = j
        for d in s:
            for c in d:
                if c not in index:
                    index[c] = len(index)
        classes = list(index)
        scores = np.zeros((len(classes), n))
        for j, c in enumerate(classes):
            scores[j] = [d.get(c, 0.0) for d in s]
        for c in classes:
            if c not in self._classes:
                self._add_class(c)
        if self.bins:
            scores = _bin_array(scores, self.bins)
        for j, c in enumerate(classes):
            self._classes[c].add_entries(*_aggregate(y_idx == j, scores[j], w))
        if self._micro is not None:
            k = len(classes)
            flat_pos = (y_idx[None, :] == np.arange(k)[:, None]).ravel()
            flat_w = None if w is None else np.tile(w, k)
            self._micro.add_entries(*_aggregate(flat_pos, scores.ravel(), flat_w))
        self._n += n
        self._w += float(n if w is None else w.sum())
        self._z += 0 if w is None else int(np.count_nonzero(w == 0.0))
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove validated columns added earlier: same result as a loop of ``revert``,
        atomic.

        Aggregated per class (and for the micro order) with numpy and checked against
        the stored counts before anything changes; an event that was never added (a
        class never seen, or more events than stored) raises
        :class:`~streameval.validation.ValidationError` with the ``index`` of the first
        event a loop of ``revert`` would refuse. Runtime complexity: per class a numpy
        sort and a removal (see :meth:`ScoreOrder.remove_entries`).
        """
        n = len(y)
        if not n:
            return self
        index = {c: j for j, c in enumerate(self._classes)}
        refused = n  # first event naming a class never seen
        y_idx = np.empty(n, dtype=np.int64)
        for i, c in enumerate(y):
            j = index.get(c)
            if j is None:
                refused = min(refused, i)
                j = -1
            y_idx[i] = j
        for i, d in enumerate(s):
            if i < refused and any(c not in index for c in d):
                refused = i
        orders = list(self._classes.values())
        k = len(orders)
        scores = np.zeros((k, n))
        for j, c in enumerate(index):
            scores[j] = [d.get(c, 0.0) for d in s]
        if self.bins:
            scores = _bin_array(scores, self.bins)
        zero = None if w is None else w == 0.0
        events = np.arange(n)
        wts = np.ones(n) if w is None else w
        parts = [(o, y_idx == j, scores[j], events, zero, wts) for j, o in enumerate(orders)]
        if self._micro is not None and k:
            parts.append((self._micro, (y_idx[None, :] == np.arange(k)[:, None]).ravel(),
                          scores.ravel(), np.tile(events, k),
                          None if zero is None else np.tile(zero, k), np.tile(wts, k)))
        aggs = [_aggregate(pos, sc, None if w is None else np.tile(w, len(sc) // n))
                for _, pos, sc, _, _, _ in parts]
        if refused < n or n > self._n or not all(
                o.can_remove(*a) for (o, *_), a in zip(parts, aggs)):
            first = [refused]
            for part in parts:
                i = _first_refused(*part)
                if i is not None:
                    first.append(i)
            i = min(first) if min(first) < n else 0
            raise ValidationError.at(
                i, f"revert(y_true={y[i]!r}, y_pred={s[i]!r}): no such event was added")
        # validated (can_remove accepted every order's entries): now change state
        for (o, *_), a in zip(parts, aggs):
            o.remove_entries(*a, _checked=True)
        self._n -= n
        self._w = self._w - float(n if w is None else w.sum()) if self._n else 0.0
        self._z -= 0 if zero is None else int(np.count_nonzero(zero))
        return self

    def _merge(self, other):
        mine, theirs = set(self._classes), set(other._classes)
        key = self._key(0.0)
        for c in other._classes:
            if c not in self._classes:
                self._add_class(c)
        for c, order in self._classes.items():
            if c in other._classes:
                order.merge(other._classes[c])
            elif other._n:  # other's events are negatives with score 0 for c
                order.add_entries(np.array([key]), np.array([0.0]), np.array([other._w]),
                                  np.array([0]), np.array([other._n]), 0, other._z)
        if self._micro is not None:
            self._micro.merge(other._micro)
            missing = len(mine - theirs)  # other's events for classes only here
            if missing and other._n:
                self._micro.add_entries(
                    np.array([key]), np.array([0.0]), np.array([other._w * missing]),
                    np.array([0]), np.array([other._n * missing]), 0, other._z * missing)
        self._n += other._n
        self._w += other._w
        self._z += other._z

    def _subtract(self, other):
        """The inverse of :meth:`_merge`: every class's order loses ``other``'s order
        for that class, or, for a class ``other`` never saw, its events as negatives
        with score 0; the micro order the same. Everything is checked first (classes,
        events, weight, then every order's removal), then removed. A class stays known
        (as after ``revert``), with the events left."""
        name = f"the other {self._public_name}"
        unknown = [c for c in other._classes if c not in self._classes]
        if unknown:
            raise ValueError(f"subtract: class {unknown[0]!r} of {name} is unknown here: "
                             "it was never merged")
        check_unmerge_totals(self, other, name)
        key = self._key(0.0)

        def padding(k):  # other's events as negatives with score 0 for k classes
            return (np.array([key]), np.array([0.0]), np.array([other._w * k]),
                    np.array([0], dtype=np.int64), np.array([other._n * k], dtype=np.int64),
                    0, other._z * k)

        plan = []
        for c, order in self._classes.items():
            if c in other._classes:
                o = other._classes[c]
                plan.append((c, order, (*o.arrays(), o.z_pos, o.z_neg)))
            elif other._n:
                plan.append((c, order, padding(1)))
        if self._micro is not None:
            theirs = ScoreOrder()
            theirs.merge(other._micro)
            missing = len(self._classes) - len(other._classes)
            if missing and other._n:
                theirs.add_entries(*padding(missing))
            plan.append((None, self._micro, (*theirs.arrays(), theirs.z_pos, theirs.z_neg)))
        describe = (lambda k: f"bin {int(k)}") if self.bins else None
        for c, order, entries in plan:
            reason = order.subtract_refusal(entries, name, describe)
            if reason is not None:
                what = "the micro order" if c is None else f"class {c!r}"
                raise ValueError(f"subtract, {what}: {reason[len('subtract: '):]}")
        for _, order, entries in plan:
            order.remove_entries(*entries, _checked=True)
        self._n -= other._n
        self._w = self._w - other._w if self._n else 0.0
        self._z -= other._z

    def _get_data(self):
        return {
            "classes": [c.item() if isinstance(c, np.generic) else c for c in self._classes],
            "orders": [o.to_data() for o in self._classes.values()],
            "micro": None if self._micro is None else self._micro.to_data(),
            "n": self._n, "w": self._w, "zero": self._z,
        }

    def _set_data(self, data):
        try:
            classes, orders = list(data["classes"]), list(data["orders"])
            n, w, z = int(data["n"]), float(data["w"]), int(data["zero"])
            micro = data["micro"]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"bad multiclass state: {e!r}") from None
        if len(classes) != len(orders):
            raise ValueError("bad multiclass state: classes and orders differ in length")
        built = {}
        for c, d in zip(classes, orders):
            o = ScoreOrder()
            o.set_data(d)
            built[self._class(c, "class")] = o
        if self._micro is not None:
            self._micro.set_data(micro)
        self._classes, self._n, self._w, self._z = built, n, w, z
        self._cached_stamp = None

    def _check(self):
        for o in self._classes.values():
            o._check()
            assert o.n_pos + o.n_neg == self._n
        if self._micro is not None:
            self._micro._check()
            assert self._micro.n_pos + self._micro.n_neg == self._n * len(self._classes)

    # -- values -------------------------------------------------------------
    def _stamp(self):
        # (a read: big removals' rounding is recomputed away first, see ScoreOrder.refresh)
        for o in self._classes.values():
            o.refresh()
        if self._micro is not None:
            self._micro.refresh()
        return tuple(o.stamp for o in self._classes.values()) + (
            (self._micro.stamp,) if self._micro is not None else ())

    def _average(self, value_of):
        if self.average == "micro":
            return value_of(self._micro)
        present = [o for o in self._classes.values() if o.nz_pos]
        if len(present) < 2:  # one class present: one-vs-rest undefined
            return _NAN
        # exactly rounded sums (math.fsum): the average does not depend on the order
        # the classes were met in (a merge, a subtract or a revert can change it)
        values = [value_of(o) for o in present]
        if self.average == "macro":
            return math.fsum(values) / len(values)
        support = [o.pos_weight for o in present]
        return math.fsum(v * s for v, s in zip(values, support)) / math.fsum(support)

    def get(self):
        stamp = self._stamp()
        if stamp != self._cached_stamp:
            self._cached = self._average(self._value)
            self._cached_stamp = stamp
        return self._cached

    def error_bound(self):
        """Guaranteed bound on ``|get() - exact value|``: 0 when exact; with bins the
        average (macro, weighted) of the per-class bounds, or the micro order's bound."""
        if not self.bins:
            value = self.get()
            return _NAN if value != value else 0.0
        return self._average(self._bound)


class _MultiClassROCAUC(ROCAUC, _OVRRanking, case="multiclass"):
    """One-vs-rest ROC AUC (see :class:`ROCAUC`): per class, AUC of that class against
    the rest; averaged over the classes present (macro), weighted by their positive
    weight (weighted), or over all (event, class) pairs at once (micro). Equal to
    ``sklearn.metrics.roc_auc_score(multi_class="ovr", average=...)``.

    Runtime complexity: `O(k log(n))` for ``update``/``revert`` with ``k`` classes,
    `O(k)` for ``get``.

    >>> from streameval import ROCAUC
    >>> auc = ROCAUC(average="macro")
    >>> auc.update("cat", {"cat": .7, "dog": .2, "eel": .1})
    >>> auc.update("dog", {"cat": .3, "dog": .6, "eel": .1})
    >>> auc.update("eel", {"cat": .5, "dog": .1, "eel": .4})
    >>> auc.get()
    1.0
    """

    _state_exclude = ("cm", "pos_label", "neg_label", "max_scores")  # as the states of earlier versions
    _value = staticmethod(ScoreOrder.auc)
    _bound = staticmethod(_auc_bound)

    def __init__(self, bins=None, average="macro", pos_label=True, neg_label=None,
                 max_scores=DEFAULT_MAX_SCORES):
        _binary_labels_only(pos_label, neg_label)
        _OVRRanking.__init__(self, average, bins)
        # (one-vs-rest orders are kept exact: the cap applies to binary orders)
        self.max_scores = _check_max_scores(max_scores)

    # -- confidence interval (DeLong per class) ---------------------------------
    _has_interval = True
    _delong_key = None
    _delong_parts = None

    def _set_data(self, data):
        _OVRRanking._set_data(self, data)
        self._delong_key = self._delong_parts = None  # (let the old orders go)

    def _interval_parts(self):
        value = self.get()
        # the orders themselves are in the key: a restored state has new orders whose
        # stamps may repeat the old ones'
        key = (self._stamp(), tuple(self._classes.values()), self._micro)
        if key != self._delong_key:
            self._delong_parts = None if value != value else self._ovr_parts(value)
            self._delong_key = key
        return self._delong_parts

    def _ovr_parts(self, value):
        if self.average == "micro":
            o = self._micro
            parts = _auc_parts(o, o.auc())
            if parts is None:
                return None
            var, df, m = parts
        else:
            present = [o for o in self._classes.values() if o.nz_pos]
            each = [_auc_parts(o, o.auc()) for o in present]
            if not each or any(e is None for e in each):
                return None
            variances = np.array([e[0] for e in each])
            if self.average == "macro":
                a = np.full(len(present), 1.0 / len(present))
            else:
                support = np.array([o.pos_weight for o in present])
                a = support / support.sum()
            var = float(np.sum(a * a * variances))
            df, m = min(e[1] for e in each), min(e[2] for e in each)
        return None if var != var else ["logit", value, var, df, m, 0.0, 1.0]

    def interval(self, level=0.95):
        """Confidence interval ``(low, high)`` of the one-vs-rest AUC at ``level``.

        ``"macro"`` and ``"weighted"``: the logit-scale interval (as
        :meth:`ROCAUC.interval`) around the average, whose variance combines each present
        class's moderated variance with the average's weights (``1/K``; positive weight
        over the total), ``Var = sum_c a_c^2 Var_c``: the classes' AUCs taken as
        independent (they are not quite: they share the events); Student's ``t`` on the
        fewest degrees of freedom of the classes, and the largest-variance bound with
        ``m`` the smallest ``min(P_c, N_c)`` (a bound for the average too, by
        concavity). ``"micro"``: :meth:`ROCAUC.interval` of the AUC of all (event,
        class) pairs, taken as independent events. ``(nan, nan)`` when the AUC is
        undefined or a present class has no variance estimate (``P <= 1`` or
        ``N <= 1``). Weights are frequency weights.

        Runtime complexity: one numpy pass per class over its distinct scores, cached
        until the next change.

        >>> from streameval import ROCAUC
        >>> auc = ROCAUC(average="macro")
        >>> auc.update_many(["a", "b", "a", "b", "a", "b"],
        ...                 [{"a": .9, "b": .1}, {"a": .2, "b": .8}, {"a": .6, "b": .4},
        ...                  {"a": .7, "b": .3}, {"a": .3, "b": .7}, {"a": .1, "b": .9}])
        ROCAUC: 0.777778
        >>> [round(v, 6) for v in auc.interval(0.95)]
        [0.370403, 0.954175]

        Parameters
        ----------
        level
            The confidence level, a real number in ``(0, 1)``; default 0.95.
        """
        return Metric.interval(self, level)


class _MultiClassAveragePrecision(AveragePrecision, _OVRRanking, case="multiclass"):
    """One-vs-rest average precision (see :class:`AveragePrecision`); ``"macro"`` is
    the mean AP over the classes present (mAP). Equal to
    ``sklearn.metrics.average_precision_score`` on one-hot labels.

    Runtime complexity: `O(k log(n))` for ``update``/``revert``, `O(k n)` numpy for
    ``get`` (cached until the next change).

    >>> from streameval import AveragePrecision
    >>> m = AveragePrecision(average="macro")
    >>> m.update("cat", {"cat": .7, "dog": .3})
    >>> m.update("dog", {"cat": .8, "dog": .2})
    >>> m.update("cat", {"cat": .9, "dog": .1})
    >>> round(m.get(), 6)  # (cat: (1 + 2/3) / 2, dog: 1/2) / 2
    0.666667
    """

    _state_exclude = ("cm", "pos_label", "neg_label", "max_scores")
    _value = staticmethod(_average_precision)
    _bound = staticmethod(_ap_bound)

    def __init__(self, bins=None, average="macro", pos_label=True, neg_label=None,
                 max_scores=DEFAULT_MAX_SCORES):
        _binary_labels_only(pos_label, neg_label)
        _OVRRanking.__init__(self, average, bins)
        # (one-vs-rest orders are kept exact: the cap applies to binary orders)
        self.max_scores = _check_max_scores(max_scores)
