"""Drift of precision and recall: two-proportion tests and change-point detection.

* :func:`two_proportion_test` and :func:`one_proportion_test`: the tests, on counts.
* :class:`PrecisionRecallDrift`: a current window of a stream compared with a reference
  (a baseline window after warm-up, the previous window, or a fixed value); its
  :meth:`~PrecisionRecallDrift.report` is a :class:`DriftReport`.
* :class:`ChangePointDetector`: river's drift detectors (ADWIN, Page-Hinkley, ...)
  run on the per-event indicator stream of recall, precision or error, recording the
  event index and time of each detected change.

The proportions and their denominators: recall is TP / (TP + FN), a proportion of the
actual positives; precision is TP / (TP + FP), a proportion of the predicted positives.
The tests use exactly those denominators.

Statistics (two-sided, level ``alpha``):

* p-value: the pooled two-proportion z-test,
  ``z = (p_cur - p_ref) / sqrt(p (1 - p) (1/n_ref + 1/n_cur))`` with the pooled
  ``p = (x_ref + x_cur) / (n_ref + n_cur)``, ``p_value = erfc(|z| / sqrt(2))``.
  Against a fixed value ``p0``: the score test ``z = (p_cur - p0) / sqrt(p0 (1 - p0) / n)``.
* Confidence interval of ``delta = current - reference`` at level ``1 - alpha``:
  Newcombe's hybrid score interval (Newcombe 1998, method 10: from the two Wilson
  intervals), which keeps its coverage near 0 and 1 where precision and recall often
  live; ``ci="wald"`` gives the unpooled Wald interval. Against a fixed value: the
  Wilson interval of the current proportion, minus ``p0``.
* ``drifted`` is decided by the p-value: ``p_value < alpha`` (the interval and the test
  can disagree at the margin; the test is the decision).

Weights: a weighted proportion is ``sum(w x) / sum(w)`` and its sample size is Kish's
effective size ``n_eff = sum(w)^2 / sum(w^2)`` (so ``x = p n_eff``): with unit weights
these are the plain counts; a few heavy events do not pass for many independent ones.

The false-alarm rate of one test on a stationary stream is at most ``alpha`` (up to the
normal approximation; hence ``min_count``). Evaluating the same drift test after every
event tests heavily overlapping windows again and again: the chance that *some*
evaluation crosses ``alpha`` is much larger. Evaluate on window boundaries, or require
the alarm to persist (the alert rules' ``for``), or lower ``alpha``.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import statistics

import numpy as np

from streameval.metrics.base import check_weight, from_state, register
from streameval.metrics.confusion import CELLS, BinaryCounts
from streameval.windows import Sliding, _as_seq, _take, as_seconds, as_seconds_array

__all__ = [
    "DriftReport",
    "two_proportion_test",
    "one_proportion_test",
    "PrecisionRecallDrift",
    "ChangePoint",
    "ChangePointDetector",
    "DriftCounts",
]

_NAN = math.nan
_SQRT2 = math.sqrt(2.0)
# event codes: bit 1 = actual positive, bit 0 = predicted positive
_TN, _FP, _FN, _TP = 0, 1, 2, 3


# ------------------------------------------------------------------------ the tests


@dataclasses.dataclass(frozen=True)
class DriftReport:
    """The result of a drift test of a proportion (recall, precision, ...).

    ``delta = current - reference``; ``[ci_low, ci_high]`` is its confidence interval at
    level ``1 - alpha``; ``drifted`` is ``p_value < alpha`` (and, for
    :class:`PrecisionRecallDrift`, the report is ``ready`` and both sample sizes reach
    ``min_count``). Undefined values are ``nan``; ``n_reference`` is ``None`` against a
    fixed reference value. :meth:`to_dict` gives the mapping that alert rules read
    (``"p_value"`` and ``"delta"``).
    """

    metric: str | None
    reference: float
    current: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    n_reference: float | None
    n_current: float
    drifted: bool
    alpha: float
    ready: bool = True
    n: int | None = None
    t: float | None = None

    def to_dict(self):
        """A plain dict of the fields (JSON-ready but for ``nan``).

        The fields are plain values: a shallow dict (``dataclasses.asdict`` deep-copies,
        at a cost the monitor pays per drift test and evaluation).
        """
        return {name: getattr(self, name) for name in _REPORT_FIELDS}


_REPORT_FIELDS = tuple(f.name for f in dataclasses.fields(DriftReport))


def _z(alpha):
    return statistics.NormalDist().inv_cdf(1.0 - alpha / 2.0)


def _wilson(x, n, z):
    """Wilson score interval of x / n."""
    p = x / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denom
    half = z / denom * math.sqrt(max(p * (1.0 - p) / n + z2 / (4.0 * n * n), 0.0))
    return center - half, center + half


def _check_alpha(alpha):
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha = {alpha!r}: must be a number in (0, 1)")
    return float(alpha)


def _check_count(x, n, name):
    for label, v in ((f"x_{name}", x), (f"n_{name}", n)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{label} = {v!r}: must be a finite number >= 0")
    if x > n * (1 + 1e-12):
        raise ValueError(f"x_{name} = {x!r} > n_{name} = {n!r}: more successes than trials")
    return float(min(x, n)), float(n)


def _undefined(metric, reference, current, n_ref, n_cur, alpha, **extra):
    return DriftReport(metric, reference, current, _NAN, _NAN, _NAN, _NAN, n_ref, n_cur,
                       False, alpha, **extra)


def two_proportion_test(x_ref, n_ref, x_cur, n_cur, alpha=0.05, ci="newcombe", metric=None):
    """Test whether the proportion ``x_cur / n_cur`` differs from ``x_ref / n_ref``.

    The p-value is the pooled two-proportion z-test (two-sided); the interval of
    ``delta = p_cur - p_ref`` is Newcombe's hybrid score interval (``ci="newcombe"``)
    or the unpooled Wald interval (``ci="wald"``), at level ``1 - alpha``. Counts may be
    fractional (effective sizes of weighted samples). Undefined (``nan``) when a sample
    is empty; ``p_value = 1`` when both proportions are 0 or both are 1.

    Runtime complexity: `O(1)`.

    >>> r = two_proportion_test(170, 200, 140, 200, alpha=0.01)
    >>> round(r.delta, 4), round(r.p_value, 6), r.drifted
    (-0.15, 0.000328, True)
    >>> round(r.ci_low, 4), round(r.ci_high, 4)
    (-0.2538, -0.0424)

    Parameters
    ----------
    x_ref, n_ref : float
        Successes and trials of the reference sample.
    x_cur, n_cur : float
        Successes and trials of the current sample.
    alpha : float
        Significance level of the test and ``1 -`` the interval's level.
    ci : str
        ``"newcombe"`` or ``"wald"``.
    metric : str
        Name carried into the report.
    """
    alpha = _check_alpha(alpha)
    if ci not in ("newcombe", "wald"):
        raise ValueError(f'ci = {ci!r}: must be "newcombe" or "wald"')
    x1, n1 = _check_count(x_ref, n_ref, "ref")
    x2, n2 = _check_count(x_cur, n_cur, "cur")
    p1 = x1 / n1 if n1 > 0 else _NAN
    p2 = x2 / n2 if n2 > 0 else _NAN
    if n1 <= 0 or n2 <= 0:
        return _undefined(metric, p1, p2, n1, n2, alpha)
    delta = p2 - p1
    pooled = (x1 + x2) / (n1 + n2)
    se0 = math.sqrt(max(pooled * (1.0 - pooled), 0.0) * (1.0 / n1 + 1.0 / n2))
    if se0 == 0.0:  # both proportions 0, or both 1: identical
        p_value = 1.0
    else:
        p_value = math.erfc(abs(delta / se0) / _SQRT2)
    z = _z(alpha)
    if ci == "newcombe":
        l1, u1 = _wilson(x1, n1, z)
        l2, u2 = _wilson(x2, n2, z)
        lo = delta - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
        hi = delta + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    else:
        se = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
        lo, hi = delta - z * se, delta + z * se
    return DriftReport(metric, p1, p2, delta, lo, hi, p_value, n1, n2, p_value < alpha, alpha)


def one_proportion_test(x_cur, n_cur, p0, alpha=0.05, metric=None):
    """Test whether the proportion ``x_cur / n_cur`` differs from a fixed value ``p0``.

    The p-value is the score test ``z = (p - p0) / sqrt(p0 (1 - p0) / n)``
    (two-sided); the interval of ``delta = p - p0`` is the Wilson interval of ``p``
    minus ``p0``. With ``p0`` equal to 0 or 1 the p-value is 1 if ``p == p0``, else 0.

    Runtime complexity: `O(1)`.

    >>> r = one_proportion_test(140, 200, 0.85, alpha=0.01)
    >>> round(r.delta, 4), r.p_value < 1e-8, r.n_reference is None
    (-0.15, True, True)

    Parameters
    ----------
    x_cur, n_cur : float
        Successes and trials.
    p0 : float
        The reference proportion, in [0, 1].
    alpha : float
        Significance level.
    metric : str
        Name carried into the report.
    """
    alpha = _check_alpha(alpha)
    if isinstance(p0, bool) or not isinstance(p0, (int, float)) or not 0.0 <= p0 <= 1.0:
        raise ValueError(f"reference = {p0!r}: a fixed reference must be a proportion in [0, 1]")
    x, n = _check_count(x_cur, n_cur, "cur")
    p0 = float(p0)
    if n <= 0:
        return _undefined(metric, p0, _NAN, None, n, alpha)
    p = x / n
    delta = p - p0
    se0 = math.sqrt(p0 * (1.0 - p0) / n)
    if se0 == 0.0:
        p_value = 1.0 if p == p0 else 0.0
    else:
        p_value = math.erfc(abs(delta / se0) / _SQRT2)
    lo, hi = _wilson(x, n, _z(alpha))
    return DriftReport(metric, p0, p, delta, lo - p0, hi - p0, p_value, None, n, p_value < alpha, alpha)


# -------------------------------------------------------- counts for the drift test


class DriftCounts(BinaryCounts):
    """Weighted confusion counts with the sums of squared weights (for Kish's
    effective sample size). ``get()`` is the recall.

    The counts are the binary confusion matrix's
    (:class:`streameval.metrics.confusion.BinaryCounts`: weighted cells, event
    counts, exact zeros when a cell empties); this adds per cell the sum of squared
    weights. Event codes (:meth:`codes`, the state's order): TN=0, FP=1, FN=2, TP=3.

    An internal building block of :class:`PrecisionRecallDrift` (windows of it), kept
    public so that its state can be saved. Runtime complexity of ``update``/``revert``:
    `O(1)`; of ``update_trusted``/``revert_trusted``: `O(m)`, vectorised.

    >>> c = DriftCounts()
    >>> for y, p in [(1, 0.9), (1, 0.2), (0, 0.7)]:
    ...     c.update(y, p)
    >>> c.proportion("recall"), c.proportion("precision")
    ((1.0, 2.0), (1.0, 2.0))
    """

    # version 2: {"w", "w2", "n"} by event code (TN, FP, FN, TP), optional "zeros"
    _state_version = 2
    #: a revert is refused only for an event never added (by count), as before
    #: DriftCounts reused the confusion counts; a cell's weight still stays >= 0
    _by_weight = False

    def __init__(self, threshold=0.5, pos_label=True, neg_label=None):
        self._setup(threshold, True if pos_label is None else pos_label, neg_label)
        # sum of squared weights per cell, in the cells' order (tp, fp, fn, tn)
        self._sq = [0.0, 0.0, 0.0, 0.0]

    def _code(self, y_true, y_pred):
        """The event code (validated): 2 * actual positive + predicted positive."""
        return 2 * self._label(y_true) + (self._score(y_pred) >= self.threshold)

    def codes(self, y_true, y_pred, w=None):
        """Validated batch: (codes as an int array, weights as float64 or None)."""
        labels, scores, weights = self.validate(y_true, y_pred, w)
        return 2 * labels.astype(np.int64) + (scores >= self.threshold), weights

    # -- per event: the confusion counts, then the squared weight ------------------
    def update(self, y_true, y_pred, w=1.0):
        cell = _BY_CODE[self._code(y_true, y_pred)]  # the code's cell (validated)
        w = check_weight(w)
        BinaryCounts.update(self, y_true, y_pred, w)
        self._sq[cell] += w * w

    def revert(self, y_true, y_pred, w=1.0):
        cell = _BY_CODE[self._code(y_true, y_pred)]
        w = check_weight(w)
        BinaryCounts.revert(self, y_true, y_pred, w)  # refuses an event never added
        self._settle_sq(cell, w * w)

    def _settle_sq(self, cell, sq):
        name = _CELL_NAMES[cell]
        if getattr(self, "_n" + name) and getattr(self, name) > 0.0:
            v = self._sq[cell] - sq
            self._sq[cell] = v if v > 0.0 else 0.0
        else:  # emptied, or only weight 0 left: exactly 0
            self._sq[cell] = 0.0

    def _refusal(self, cell, y_true, y_pred, w, index=None):
        code = _BY_CODE[_CELL_NAMES.index(cell)]
        if index is None:
            return (f"revert(y_true={y_true!r}, y_pred={y_pred!r}, w={w!r}): no such event "
                    f"was added (no event of confusion code {code} left)")
        return (f"y_true[{index}] = {y_true!r}, y_pred[{index}] = {y_pred!r}: no such event "
                f"was added (no event of confusion code {code} left)")

    # -- validated batches ---------------------------------------------------------
    def update_trusted(self, y, s, w=None):
        BinaryCounts.update_trusted(self, y, s, w)
        sq = self._squares(y, s, w)
        for c in range(4):
            self._sq[c] += sq[c]
        return self

    def revert_trusted(self, y, s, w=None):
        BinaryCounts.revert_trusted(self, y, s, w)  # atomic: refuses before any change
        sq = self._squares(y, s, w)
        for c in range(4):
            self._settle_sq(c, sq[c])
        return self

    def _squares(self, y, s, w):
        idx = self._cells_of(y, s)
        return np.bincount(idx, weights=None if w is None else w * w, minlength=4).tolist()

    # -- the drift test's view -----------------------------------------------------
    # by event code (TN, FP, FN, TP), as the state; settable, for a difference of counts
    @property
    def _w(self):
        return [self.tn, self.fp, self.fn, self.tp]

    @_w.setter
    def _w(self, values):
        self.tn, self.fp, self.fn, self.tp = values

    @property
    def _w2(self):
        return _by_code(self._sq)

    @_w2.setter
    def _w2(self, values):
        self._sq = _by_code(values)

    @property
    def _n(self):
        return [self._ntn, self._nfp, self._nfn, self._ntp]

    @_n.setter
    def _n(self, values):
        self._ntn, self._nfp, self._nfn, self._ntp = values

    def proportion(self, metric):
        """``(x_eff, n_eff)`` of recall or precision (Kish effective sizes)."""
        other = self.fn if metric == "recall" else self.fp
        other2 = self._sq[2] if metric == "recall" else self._sq[1]
        return _effective(self.tp, self.tp + other, self._sq[0] + other2)

    def get(self):
        x, n = self.proportion("recall")
        return x / n if n > 0 else _NAN

    # -- state ---------------------------------------------------------------------
    def _get_data(self):
        data = {"w": self._w, "w2": self._w2, "n": self._n}
        if self._zn:  # only where events of weight 0 are held (older states lack it)
            data["zeros"] = _by_code(self._z)
        return data

    def _set_data(self, data):
        self._load(data, lambda: (_by_code(data["w"]), _by_code(data["n"]),
                                  _by_code(data.get("zeros", (0, 0, 0, 0)))))
        try:
            sq = _by_code([float(v) for v in data["w2"]])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a DriftCounts state: {data!r:.200} ({e})") from None
        if len(sq) != 4 or not all(math.isfinite(v) for v in sq):
            raise ValueError(f"not a DriftCounts state: {data!r:.200}")
        for c in range(4):  # the residue of sliding sums is 0, an empty cell exactly 0
            name = _CELL_NAMES[c]
            if not (getattr(self, "_n" + name) and sq[c] > 0.0 and getattr(self, name) > 0.0):
                sq[c] = 0.0
        self._sq = sq

    def _merge(self, other):
        BinaryCounts._merge(self, other)
        self._sq = [a + b for a, b in zip(self._sq, other._sq)]

    def _check(self):
        BinaryCounts._check(self)
        assert len(self._sq) == 4 and all(v >= 0.0 for v in self._sq), self._sq

    def __repr__(self):
        return f"DriftCounts(w={self._w!r}, w2={self._w2!r}, n={self._n!r})"

    __str__ = __repr__


#: the binary cells in the order of ``DriftCounts._sq`` (tp, fp, fn, tn)
_CELL_NAMES = CELLS
#: the cell of each event code (TN, FP, FN, TP), and the code of each cell
_BY_CODE = (3, 1, 2, 0)


def _by_code(values):
    """Four values by cell as four by code, or back (the permutation is its own
    inverse)."""
    if len(values) != 4:
        raise ValueError(f"expected four values, got {values!r:.80}")
    return [values[i] for i in _BY_CODE]


def _effective(sw_num, sw, sw2):
    """(x_eff, n_eff) from weighted sums; clean up float residue of sliding sums."""
    if sw <= 1e-12 or sw2 <= 0.0:
        return 0.0, 0.0
    n_eff = sw * sw / sw2
    p = min(max(sw_num / sw, 0.0), 1.0)
    return p * n_eff, n_eff


def _difference(a, b):
    """Counts of a window minus a sub-window (the previous window)."""
    d = DriftCounts.__new__(DriftCounts)
    d._n = [max(x - y, 0) for x, y in zip(a._n, b._n)]
    d._w = [max(x - y, 0.0) if k else 0.0 for x, y, k in zip(a._w, b._w, d._n)]
    d._w2 = [max(x - y, 0.0) if k else 0.0 for x, y, k in zip(a._w2, b._w2, d._n)]
    return d


# ------------------------------------------------------------ PrecisionRecallDrift


class PrecisionRecallDrift:
    """Compare recall (or precision) over a current window with a reference.

    The current window is the last ``window`` events (or the events of the last
    ``period`` seconds, ``(newest - period, newest]``, with out-of-order events
    within ``lateness`` placed by time, as :class:`~streameval.Sliding`). The reference
    is

    * ``"baseline"``: the ``window`` events after the first ``warmup`` events (time
      windows: the events with ``t`` in ``[t0 + warmup, t0 + warmup + period)``, ``t0``
      the first event's time), frozen;
    * ``"previous"``: the window just before the current one (events
      ``[n - 2 window, n - window)``, or ``t`` in ``(newest - 2 period, newest - period]``);
    * a number in [0, 1]: a fixed value (e.g. the recall measured at validation).

    :meth:`report` returns a :class:`DriftReport`. It is ``ready`` once the windows do
    not overlap each other nor the warm-up (baseline: ``warmup + 2 window`` events or
    ``newest >= t0 + warmup + 2 period``; previous: the same; fixed value:
    ``warmup + window`` events or ``newest >= t0 + warmup + period``); before that its
    values are ``nan`` and ``drifted`` is False. ``drifted`` also needs both effective
    sample sizes (actual positives for recall, predicted positives for precision) to
    reach ``min_count``.

    Runtime complexity of ``update``: `O(1)` (two or three window updates); of
    ``report``: `O(1)`.

    Recall 360/400 = 0.9 in the previous window, 280/400 = 0.7 in the current one:

    >>> d = PrecisionRecallDrift("recall", reference="previous", window=400, alpha=0.01)
    >>> hits = [True] * 360 + [False] * 40 + [True] * 280 + [False] * 120
    >>> _ = d.update_many([1] * 800, [0.9 if h else 0.1 for h in hits])
    >>> r = d.report()
    >>> r.reference, round(r.current, 6), r.n_current, r.p_value < 1e-11, r.drifted
    (0.9, 0.7, 400.0, True, True)

    Parameters
    ----------
    metric : str
        ``"recall"`` or ``"precision"``.
    reference : str or float
        ``"baseline"``, ``"previous"`` or a fixed proportion.
    window : int
        Window length in events. Give ``window`` or ``period``.
    period : float
        Window length in seconds of event time (``update`` then needs ``t=``).
    warmup : int or float
        Events (or seconds, with ``period``) ignored at the start of the stream.
    alpha : float
        Significance level.
    threshold : float
        Scores ``>= threshold`` are predicted positive.
    lateness : float
        With ``period``: how late an event may arrive and still be placed.
    pos_label, neg_label
        Labels, as for every binary metric.
    ci : str
        ``"newcombe"`` (default) or ``"wald"``: the interval of the difference.
    min_count : float
        Smallest effective sample size for which ``drifted`` may be True.
    """

    _public_name = "PrecisionRecallDrift"
    _state_version = 1

    def __init__(self, metric="recall", reference="baseline", window=None, period=None,
                 warmup=0, alpha=0.01, threshold=0.5, lateness=0.0, pos_label=True,
                 neg_label=None, ci="newcombe", min_count=30):
        if metric not in ("recall", "precision"):
            raise ValueError(f'metric = {metric!r}: must be "recall" or "precision"')
        if isinstance(reference, str):
            if reference not in ("baseline", "previous"):
                raise ValueError(f'reference = {reference!r}: must be "baseline", "previous" or a number in [0, 1]')
        elif isinstance(reference, bool) or not isinstance(reference, (int, float)) or not 0 <= reference <= 1:
            raise ValueError(f'reference = {reference!r}: must be "baseline", "previous" or a number in [0, 1]')
        if (window is None) == (period is None):
            raise ValueError(f"give exactly one of window= (events) and period= (seconds); got window={window!r}, period={period!r}")
        if isinstance(warmup, bool) or not isinstance(warmup, (int, float)) or not math.isfinite(warmup) or warmup < 0:
            raise ValueError(f"warmup = {warmup!r}: must be a number >= 0")
        if window is not None and (isinstance(warmup, float) and not warmup.is_integer()):
            raise ValueError(f"warmup = {warmup!r}: with window= it counts events (an integer)")
        if window is not None:
            warmup = int(warmup)  # an event count: it slices batches
        if ci not in ("newcombe", "wald"):
            raise ValueError(f'ci = {ci!r}: must be "newcombe" or "wald"')
        if isinstance(min_count, bool) or not isinstance(min_count, (int, float)) or min_count < 0:
            raise ValueError(f"min_count = {min_count!r}: must be a number >= 0")
        self.metric = metric
        self.reference = reference
        self.window = window
        self.period = period
        self.warmup = warmup
        self.alpha = _check_alpha(alpha)
        self.threshold = threshold
        self.lateness = lateness
        self.pos_label = pos_label
        self.neg_label = neg_label
        self.ci = ci
        self.min_count = min_count
        counts = DriftCounts(threshold, pos_label, neg_label)
        if window is not None:
            self._cur = Sliding(counts, size=window)
            self._both = Sliding(counts, size=2 * window) if reference == "previous" else None
        else:
            self._cur = Sliding(counts, period=period, lateness=lateness)
            self._both = (Sliding(counts, period=2 * self._cur.period, lateness=lateness)
                          if reference == "previous" else None)
        self._baseline = DriftCounts(threshold, pos_label, neg_label) if reference == "baseline" else None
        #: events accepted, and events refused as late (time windows)
        self.n = 0
        self.late = 0
        self._t0 = None
        self._newest = -math.inf

    # -- updates -----------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0, t=None):
        """Add one event (validated first: a bad event raises and changes nothing)."""
        if self.period is not None:
            if t is None:
                raise ValueError("t = None: a period drift test needs the event time t=")
            tt = as_seconds(t)
            if tt < self._newest - self.lateness:
                self._cur.metric.clone().update(y_true, y_pred, w=w)  # validate
                self.late += 1
                return
            self._cur.update(y_true, y_pred, w=w, t=tt)  # validates
            if self._both is not None:
                self._both.update(y_true, y_pred, w=w, t=tt)
            if self._t0 is None:
                self._t0 = tt
            if tt > self._newest:
                self._newest = tt
            if self._baseline is not None:
                b0 = self._t0 + self.warmup
                if b0 <= tt < b0 + self._cur.period:
                    self._baseline.update(y_true, y_pred, w=w)
            self.n += 1
            return
        self._cur.update(y_true, y_pred, w=w)  # validates
        if self._both is not None:
            self._both.update(y_true, y_pred, w=w)
        if self._baseline is not None and self.warmup <= self.n < self.warmup + self.window:
            self._baseline.update(y_true, y_pred, w=w)
        self.n += 1

    def update_many(self, y_true, y_pred, w=None, t=None):
        """Add a batch; same result as a loop of :meth:`update`, validated first.

        Runtime complexity: `O(n)`, vectorised.
        """
        y_true, y_pred = _as_seq(y_true), _as_seq(y_pred)
        w = None if w is None else _as_seq(w)
        n = len(y_true)
        if self.period is None:
            # the window's update_many validates the whole batch before any change
            self._cur.update_many(y_true, y_pred, w)
            if self._both is not None:
                self._both.update_many(y_true, y_pred, w)
            if self._baseline is not None:
                lo = max(self.warmup - self.n, 0)
                hi = min(self.warmup + self.window - self.n, n)
                if hi > lo:
                    self._baseline.update_many(y_true[lo:hi], y_pred[lo:hi], None if w is None else w[lo:hi])
            self.n += n
            return self
        if t is None:
            raise ValueError("t = None: a period drift test needs the event times t=")
        ts = as_seconds_array(t, n)
        if not n:
            return self
        before = np.maximum.accumulate(np.concatenate(([self._newest], ts)))[:-1]
        idx = np.flatnonzero(~(ts < before - self.lateness))
        self._cur.metric.codes(y_true, y_pred, w)  # validate everything before any change
        yt, yp = _take(_as_seq(y_true), idx), _take(_as_seq(y_pred), idx)
        ww = None if w is None else _take(_as_seq(w), idx)
        tacc = ts[idx]
        if len(idx):
            self._cur.update_many(yt, yp, ww, t=tacc)
            if self._both is not None:
                self._both.update_many(yt, yp, ww, t=tacc)
            if self._t0 is None:
                self._t0 = float(tacc[0])
            self._newest = max(self._newest, float(tacc.max()))
            if self._baseline is not None:
                b0 = self._t0 + self.warmup
                inb = np.flatnonzero((tacc >= b0) & (tacc < b0 + self._cur.period))
                if len(inb):
                    self._baseline.update_many(_take(yt, inb), _take(yp, inb),
                                               None if ww is None else _take(ww, inb))
        self.n += len(idx)
        self.late += n - len(idx)
        return self

    def clone(self):
        """A fresh drift test with the same parameters and no data."""
        return type(self)(**self._params())

    # -- the report ----------------------------------------------------------------
    @property
    def ready(self):
        """Whether the windows are complete and disjoint (see the class docstring)."""
        fixed = not isinstance(self.reference, str)
        if self.period is None:
            need = self.warmup + (1 if fixed else 2) * self.window
            return self.n >= need
        if self._t0 is None:
            return False
        span = (1 if fixed else 2) * self._cur.period
        return self._newest >= self._t0 + self.warmup + span

    def counts(self):
        """``((x_ref, n_ref), (x_cur, n_cur))`` effective counts; the reference is
        ``None`` for a fixed value."""
        cur = self._cur.metric.proportion(self.metric)
        if self.reference == "baseline":
            ref = self._baseline.proportion(self.metric)
        elif self.reference == "previous":
            ref = _difference(self._both.metric, self._cur.metric).proportion(self.metric)
        else:
            ref = None
        return ref, cur

    def report(self):
        """The :class:`DriftReport` of the current window against the reference.

        Runtime complexity: `O(1)`.
        """
        t = None if self._newest == -math.inf else self._newest
        extra = {"ready": False, "n": self.n, "t": t}
        ref, (x2, n2) = self.counts()
        if not self.ready:
            value = self.reference if not isinstance(self.reference, str) else _NAN
            return _undefined(self.metric, value, _NAN, None if ref is None else _NAN, _NAN,
                              self.alpha, **extra)
        if ref is None:
            r = one_proportion_test(x2, n2, self.reference, self.alpha, metric=self.metric)
            n1 = math.inf
        else:
            x1, n1 = ref
            r = two_proportion_test(x1, n1, x2, n2, self.alpha, self.ci, metric=self.metric)
        drifted = r.drifted and n1 >= self.min_count and n2 >= self.min_count
        return dataclasses.replace(r, drifted=drifted, ready=True, n=self.n, t=t)

    # -- state -----------------------------------------------------------------------
    def _params(self):
        return {"metric": self.metric, "reference": self.reference, "window": self.window,
                "period": self.period, "warmup": self.warmup, "alpha": self.alpha,
                "threshold": self.threshold, "lateness": self.lateness,
                "pos_label": self.pos_label, "neg_label": self.neg_label, "ci": self.ci,
                "min_count": self.min_count}

    def to_state(self):
        """JSON-serialisable state: the windows' events and counts, the baseline."""
        return {
            "type": self._public_name,
            "version": self._state_version,
            "params": self._params(),
            "data": {
                "cur": self._cur.to_state(),
                "both": None if self._both is None else self._both.to_state(),
                "baseline": None if self._baseline is None else self._baseline.to_state(),
                "n": self.n,
                "late": self.late,
                "t0": self._t0,
                "newest": None if self._newest == -math.inf else self._newest,
            },
        }

    @classmethod
    def _from_state(cls, state):
        obj = cls(**state["params"])
        d = state["data"]
        obj._cur = from_state(d["cur"])
        obj._both = None if d["both"] is None else from_state(d["both"])
        obj._baseline = None if d["baseline"] is None else from_state(d["baseline"])
        obj.n, obj.late, obj._t0 = int(d["n"]), int(d["late"]), d["t0"]
        obj._newest = -math.inf if d["newest"] is None else float(d["newest"])
        return obj

    def _check(self):
        self._cur._check()
        if self._both is not None:
            self._both._check()

    def __repr__(self):
        r = self.report()
        return (f"PrecisionRecallDrift({self.metric}, reference={self.reference!r}): "
                f"current={r.current:.6f} reference={r.reference:.6f} p={r.p_value:.3g}")


register(PrecisionRecallDrift)


# ------------------------------------------------------------- ChangePointDetector


@dataclasses.dataclass(frozen=True)
class ChangePoint:
    """A change detected by a :class:`ChangePointDetector`.

    ``index``: 0-based position of the event (among all events given to the detector)
    on which the change was detected; ``t``: its event time (or ``None``);
    ``n_indicator``: how many indicator values the river detector had seen then (the
    detection is on the ``n_indicator``-th); ``indicator``: ``"recall"``,
    ``"precision"`` or ``"error"``.
    """

    index: int
    t: float | None
    n_indicator: int
    indicator: str

    def to_dict(self):
        return dataclasses.asdict(self)


def _make_detector(detector, params):
    from river import drift

    if isinstance(detector, str):
        makers = {"adwin": drift.ADWIN, "page_hinkley": drift.PageHinkley}
        if detector not in makers:
            raise ValueError(f'detector = {detector!r}: must be "adwin", "page_hinkley" or a river drift detector')
        return makers[detector](**(params or {}))
    if params:
        raise ValueError("detector_params apply to a detector given by name, not to an instance")
    if not (callable(getattr(detector, "update", None)) and hasattr(detector, "drift_detected")):
        raise ValueError(f"detector = {detector!r}: not a river drift detector")
    return detector.clone()


class ChangePointDetector:
    """River's drift detectors on the per-event indicator stream of a metric.

    Indicators: ``"recall"`` feeds 1 for each actual positive predicted positive and
    0 for each one missed (only actual positives); ``"precision"`` feeds 1 for each
    predicted positive that is actually positive and 0 otherwise (only predicted
    positives); ``"error"`` feeds 1 for each misclassified event and 0 otherwise (all
    events). Each detection is recorded as a :class:`ChangePoint` (event index and
    time) in :attr:`changes`, and passed to ``on_change``.

    River's detectors are unweighted: each event counts once whatever its weight
    (weights are validated; events of weight 0 are skipped).

    Runtime complexity of ``update``: `O(1)` plus one river ``detector.update``
    (ADWIN: amortised `O(log W)`).

    >>> cpd = ChangePointDetector("page_hinkley", indicator="recall",
    ...                           detector_params={"threshold": 20, "min_instances": 100})
    >>> rng = np.random.default_rng(1)
    >>> hit = rng.random(2000) < np.r_[np.full(1000, 0.95), np.full(1000, 0.5)]
    >>> _ = cpd.update_many(np.ones(2000, dtype=bool), np.where(hit, 0.9, 0.1))
    >>> [(c.index > 1000, c.index < 1200) for c in cpd.changes][:1]
    [(True, True)]

    Parameters
    ----------
    detector : str or river drift detector
        ``"adwin"``, ``"page_hinkley"``, or a river detector instance (used as a
        template: cloned).
    indicator : str
        ``"recall"``, ``"precision"`` or ``"error"``.
    threshold : float
        Scores ``>= threshold`` are predicted positive.
    detector_params : dict
        Parameters of a detector given by name (e.g. ``{"delta": 0.002}`` for ADWIN).
    pos_label, neg_label
        Labels, as for every binary metric.
    on_change : callable
        Called with each :class:`ChangePoint`. Not part of the saved state.

    Notes
    -----
    State (:meth:`to_state`): Page-Hinkley's state is a few numbers, saved exactly.
    ADWIN's bucket structure lives in river's compiled extension; its state is saved
    as river's own binary serialisation of it (base64), which only the same river
    version can read back (loading it under another version raises ``ValueError``).
    Other detectors cannot be saved (``to_state`` raises ``ValueError``).
    """

    _public_name = "ChangePointDetector"
    _state_version = 1

    def __init__(self, detector="adwin", indicator="recall", threshold=0.5,
                 detector_params=None, pos_label=True, neg_label=None, on_change=None):
        if indicator not in ("recall", "precision", "error"):
            raise ValueError(f'indicator = {indicator!r}: must be "recall", "precision" or "error"')
        if on_change is not None and not callable(on_change):
            raise ValueError(f"on_change = {on_change!r}: must be a callable or None")
        self.detector = detector
        self.indicator = indicator
        self.threshold = threshold
        self.detector_params = dict(detector_params) if detector_params else None
        self.pos_label = pos_label
        self.neg_label = neg_label
        self.on_change = on_change
        self._counts = DriftCounts(threshold, pos_label, neg_label)  # validation only
        self._det = _make_detector(detector, self.detector_params)
        #: detected changes, oldest first
        self.changes = []
        #: events seen, indicator values fed
        self.n = 0
        self.n_indicator = 0
        # code -> indicator value, or None when the event is not in the indicator stream
        self._map = {
            "recall": (None, None, 0, 1),
            "precision": (None, 0, None, 1),
            "error": (0, 1, 1, 0),
        }[indicator]

    def clone(self):
        """A fresh detector with the same parameters, no data and the same callback."""
        return type(self)(self.detector, self.indicator, self.threshold, self.detector_params,
                          self.pos_label, self.neg_label, self.on_change)

    @property
    def river_detector(self):
        """The river detector instance in use."""
        return self._det

    def update(self, y_true, y_pred, w=1.0, t=None):
        """Add one event; return True if a change was detected on it."""
        c = self._counts
        code = c._code(y_true, y_pred)
        w = check_weight(w)
        tt = None if t is None else as_seconds(t)
        index = self.n
        self.n += 1
        x = self._map[code]
        if x is None or w == 0.0:
            return False
        return self._feed(x, index, tt)

    def _feed(self, x, index, tt):
        det = self._det
        det.update(x)
        self.n_indicator += 1
        if det.drift_detected:
            cp = ChangePoint(index, tt, self.n_indicator, self.indicator)
            self.changes.append(cp)
            if self.on_change is not None:
                self.on_change(cp)
            return True
        return False

    def update_many(self, y_true, y_pred, w=None, t=None):
        """Add a batch (validated first); the detector sees the relevant events in order.

        Runtime complexity: `O(n)`; the indicator stream is computed with numpy, river's
        detector is then called once per indicator value.
        """
        codes, weights = self._counts.codes(y_true, y_pred, w)
        n = len(codes)
        ts = None if t is None else as_seconds_array(t, n)
        table = np.array([-1 if v is None else v for v in self._map])
        xs = table[codes]
        keep = xs >= 0
        if weights is not None:
            keep &= weights > 0
        base = self.n
        self.n += n
        feed = self._feed
        for i, x in zip(np.flatnonzero(keep).tolist(), xs[keep].tolist()):
            feed(x, base + i, None if ts is None else float(ts[i]))
        return self

    # -- state -----------------------------------------------------------------------
    def _params(self):
        det = self._det
        name = self.detector if isinstance(self.detector, str) else self._detector_name(det)
        params = self.detector_params
        if not isinstance(self.detector, str):
            params = det._get_params()
        return {"detector": name, "indicator": self.indicator, "threshold": self.threshold,
                "detector_params": params, "pos_label": self.pos_label, "neg_label": self.neg_label}

    @staticmethod
    def _detector_name(det):
        from river import drift

        if type(det) is drift.ADWIN:
            return "adwin"
        if type(det) is drift.PageHinkley:
            return "page_hinkley"
        raise ValueError(
            f"cannot save the state of a {type(det).__name__} detector: "
            "only ADWIN and PageHinkley states can be saved"
        )

    def to_state(self):
        """JSON-serialisable state (ADWIN and Page-Hinkley only; see the class notes)."""
        import river

        det = self._det
        kind = self._params()["detector"]
        if kind == "adwin":
            det_state = {"river": river.__version__,
                         "helper": base64.b64encode(det._helper.__getstate__()).decode("ascii")}
        else:
            det_state = {"n": det._x_mean.n, "mean": det._x_mean._mean,
                         "sum_increase": det._sum_increase, "sum_decrease": det._sum_decrease,
                         "min_increase": _enc_float(det._min_increase),
                         "max_decrease": _enc_float(det._max_decrease)}
        det_state["drift_detected"] = bool(det._drift_detected)
        return {
            "type": self._public_name,
            "version": self._state_version,
            "params": self._params(),
            "data": {"detector": det_state, "n": self.n, "n_indicator": self.n_indicator,
                     "changes": [c.to_dict() for c in self.changes]},
        }

    @classmethod
    def _from_state(cls, state):
        import river

        obj = cls(**state["params"])
        d = state["data"]
        det, s = obj._det, d["detector"]
        if state["params"]["detector"] == "adwin":
            if s["river"] != river.__version__:
                raise ValueError(
                    f"this ADWIN state was saved with river {s['river']}; river "
                    f"{river.__version__} cannot read it (ADWIN's buckets are river's binary format)"
                )
            det._helper.__setstate__(base64.b64decode(s["helper"]))
        else:
            det._x_mean.n = s["n"]
            det._x_mean._mean = s["mean"]
            det._sum_increase = s["sum_increase"]
            det._sum_decrease = s["sum_decrease"]
            det._min_increase = _dec_float(s["min_increase"])
            det._max_decrease = _dec_float(s["max_decrease"])
        det._drift_detected = bool(s["drift_detected"])
        obj.n, obj.n_indicator = int(d["n"]), int(d["n_indicator"])
        obj.changes = [ChangePoint(**c) for c in d["changes"]]
        return obj

    def __repr__(self):
        return (f"ChangePointDetector({type(self._det).__name__}, {self.indicator}): "
                f"{len(self.changes)} change(s) in {self.n} events")


def _enc_float(v):
    return v if math.isfinite(v) else repr(float(v))


def _dec_float(v):
    return float(v)


register(ChangePointDetector)
