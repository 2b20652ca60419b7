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

Imports: numpy, river (its detectors), :mod:`streameval.validation`,
:mod:`streameval.events` (event times), :mod:`streameval.metrics` (the binary confusion
counts) and :mod:`streameval.windows`; the Monitor and config import it.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import statistics

import numpy as np

from streameval.events import as_seconds, as_seconds_array
from streameval.metrics.base import (
    BinaryMetric,
    Capabilities,
    check_weight,
    from_state,
    wilson_interval,
)
from streameval.metrics.confusion import CELLS, BinaryCounts
from streameval.validation import (
    Integer,
    Options,
    Real,
    check_lateness,
    check_level,
    check_param,
    check_period,
    check_size,
    check_threshold,
    take_columns,
)
from streameval.windows import Sliding

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


def _check_alpha(alpha):
    return check_level(alpha, "alpha")


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
    check_param("ci", ci, Options("newcombe", "wald"))
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
        l1, u1 = wilson_interval(x1, n1, z)
        l2, u2 = wilson_interval(x2, n2, z)
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
    lo, hi = wilson_interval(x, n, _z(alpha))
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

    def _accepted(self, y_true, y_pred, w):
        """``(cell, w)`` of an event the confusion counts just accepted: its values are
        valid, so they are only read (label and score decoded, the weight as a float),
        not checked a second time."""
        try:
            y = self._labels[y_true]
        except (KeyError, TypeError):
            y = self._label(y_true)
        if type(y_pred) is not float:
            y_pred = self._score(y_pred)
        if type(w) is not float:
            w = check_weight(w)
        return _BY_CODE[2 * y + (y_pred >= self.threshold)], w

    def codes(self, y_true, y_pred, w=None):
        """Validated batch: (codes as an int array, weights as float64 or None)."""
        labels, scores, weights = self.validate(y_true, y_pred, w)
        return 2 * labels.astype(np.int64) + (scores >= self.threshold), weights

    # -- per event: the confusion counts (which validate), then the squared weight ---
    def update(self, y_true, y_pred, w=1.0):
        BinaryCounts.update(self, y_true, y_pred, w)  # refuses a bad event, unchanged
        cell, w = self._accepted(y_true, y_pred, w)
        self._sq[cell] += w * w

    def revert(self, y_true, y_pred, w=1.0):
        BinaryCounts.revert(self, y_true, y_pred, w)  # refuses an event never added
        cell, w = self._accepted(y_true, y_pred, w)
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


class PrecisionRecallDrift(BinaryMetric):
    """Compare recall (or precision) over a current window with a reference.

    The current window is the last ``size`` events (or the events of the last
    ``period`` seconds, ``(newest - period, newest]``, with out-of-order events
    within ``lateness`` placed by time, as :class:`~streameval.Sliding`). The reference
    is

    * ``"baseline"``: the ``size`` events after the first ``warmup`` events (time
      windows: the events with ``t`` in ``[t0 + warmup, t0 + warmup + period)``, ``t0``
      the first event's time), frozen;
    * ``"previous"``: the window just before the current one (events
      ``[n - 2 size, n - size)``, or ``t`` in ``(newest - 2 period, newest - period]``);
    * a number in [0, 1]: a fixed value (e.g. the recall measured at validation).

    :meth:`report` returns a :class:`DriftReport`. It is ``ready`` once the windows do
    not overlap each other nor the warm-up (baseline: ``warmup + 2 size`` events or
    ``newest >= t0 + warmup + 2 period``; previous: the same; fixed value:
    ``warmup + size`` events or ``newest >= t0 + warmup + period``); before that its
    values are ``nan`` and ``drifted`` is False. ``drifted`` also needs both effective
    sample sizes (actual positives for recall, predicted positives for precision) to
    reach ``min_count``. :meth:`get` is the proportion over the current window's
    events (``nan`` without actual, resp. predicted, positives), ready or not.

    It follows the metric protocol on the binary columns (``columns = "binary"``):
    :meth:`validate` reads a batch once (labels decoded to bool "is positive"),
    :meth:`update_trusted` adds validated columns unchecked, and ``update_many`` is
    the two. The internal windows and counts always use the default labels
    (``pos_label=True``): labels are decoded once, here, never re-encoded. Events
    cannot be reverted (the windows expire them).

    Runtime complexity of ``update``: `O(1)` (two or three window updates); of
    ``report`` and ``get``: `O(1)`.

    Recall 360/400 = 0.9 in the previous window, 280/400 = 0.7 in the current one:

    >>> d = PrecisionRecallDrift("recall", reference="previous", size=400, alpha=0.01)
    >>> hits = [True] * 360 + [False] * 40 + [True] * 280 + [False] * 120
    >>> _ = d.update_many([1] * 800, [0.9 if h else 0.1 for h in hits])
    >>> r = d.report()
    >>> r.reference, round(r.current, 6), r.n_current, r.p_value < 1e-11, r.drifted
    (0.9, 0.7, 400.0, True, True)
    >>> round(d.get(), 6)
    0.7

    Parameters
    ----------
    metric : str
        ``"recall"`` or ``"precision"``.
    reference : str or float
        ``"baseline"``, ``"previous"`` or a fixed proportion.
    size : int
        Window length in events (alias ``window``, the drift table's key). Give
        ``size`` or ``period``.
    period : float or datetime.timedelta
        Window length in seconds of event time (``update`` then needs ``t=``).
    warmup : int or float
        Events (or seconds, with ``period``) ignored at the start of the stream.
    alpha : float
        Significance level, in (0, 1).
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
    window : int
        Alias of ``size`` (give one of them).
    """

    _public_name = "PrecisionRecallDrift"
    #: its update and update_trusted take the event time t= (see metrics.base.Capabilities)
    capabilities = Capabilities(takes_time=True)
    _state_version = 1

    def __init__(self, metric="recall", reference="baseline", size=None, period=None,
                 warmup=0, alpha=0.01, threshold=0.5, lateness=0.0, pos_label=True,
                 neg_label=None, ci="newcombe", min_count=30, window=None):
        size_name = "size"
        if window is not None:
            if size is not None:
                raise ValueError(
                    f"size = {size!r}, window = {window!r}: window is an alias of size; give one of them"
                )
            size, size_name = window, "window"
        super().__init__(pos_label, neg_label)
        metric = check_param("metric", metric, Options("recall", "precision"))
        reference = check_param("reference", reference, Options("baseline", "previous"),
                                Real(0, 1))
        if (size is None) == (period is None):
            raise ValueError(
                "give exactly one of size= (events; alias window=) and period= (seconds); "
                f"got size={size!r}, period={period!r}"
            )
        if size is not None:
            size = check_size(size, size_name)
        else:
            period = check_period(period)
        lateness = check_lateness(lateness)
        warmup = check_param("warmup", warmup, Real(0))
        if size is not None:
            if not float(warmup).is_integer():
                raise ValueError(f"warmup = {warmup!r}: with size= it counts events (an integer)")
            warmup = int(warmup)  # an event count: it slices batches
        self.metric = metric
        self.reference = reference
        self.size = size
        self.period = period
        self.warmup = warmup
        self.alpha = _check_alpha(alpha)
        self.threshold = check_threshold(threshold)
        self.lateness = lateness
        self.ci = check_param("ci", ci, Options("newcombe", "wald"))
        self.min_count = check_param("min_count", min_count, Integer(0), Real(0))
        # default labels inside: the drift test decodes labels once (see the docstring)
        counts = DriftCounts(self.threshold)
        if size is not None:
            self._cur = Sliding(counts, size=size)
            self._both = Sliding(counts, size=2 * size) if reference == "previous" else None
        else:
            self._cur = Sliding(counts, period=period, lateness=lateness)
            self._both = (Sliding(counts, period=2 * period, lateness=lateness)
                          if reference == "previous" else None)
        self._baseline = DriftCounts(self.threshold) if reference == "baseline" else None
        #: events accepted, and events refused as late (time windows)
        self.n = 0
        self.late = 0
        self._t0 = None
        self._newest = -math.inf

    @property
    def window(self):
        """Alias of :attr:`size` (the drift table's key)."""
        return self.size

    # -- updates -----------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0, t=None):
        """Add one event (validated first: a bad event raises and changes nothing)."""
        y = self._label(y_true)
        s = self._score(y_pred)
        w = check_weight(w)
        if self.period is None:
            self._cur.update(y, s, w)
            if self._both is not None:
                self._both.update(y, s, w)
            if self._baseline is not None and self.warmup <= self.n < self.warmup + self.size:
                self._baseline.update(y, s, w)
            self.n += 1
            return
        if t is None:
            raise ValueError("t = None: a period drift test needs the event time t=")
        tt = as_seconds(t)
        if tt < self._newest - self.lateness:
            self.late += 1
            return
        self._cur.update(y, s, w, t=tt)
        if self._both is not None:
            self._both.update(y, s, w, t=tt)
        if self._t0 is None:
            self._t0 = tt
        if tt > self._newest:
            self._newest = tt
        if self._baseline is not None:
            b0 = self._t0 + self.warmup
            if b0 <= tt < b0 + self.period:
                self._baseline.update(y, s, w)
        self.n += 1

    def update_many(self, y_true, y_pred, w=None, t=None):
        """Add a batch; same result as a loop of :meth:`update`: validated once
        (:meth:`validate`, and the times), then added by :meth:`update_trusted`.

        Runtime complexity: `O(n)`, vectorised.
        """
        y, s, ww = self.validate(y_true, y_pred, w)
        ts = None
        if self.period is not None:
            if t is None:
                raise ValueError("t = None: a period drift test needs the event times t=")
            ts = as_seconds_array(t, len(y))
        return self.update_trusted(y, s, ww, ts)

    def update_trusted(self, y, s, w=None, t=None):
        """Add validated binary columns (bool labels, float64 scores, float64 weights
        or None) and, for a period test, ``t``: float64 epoch seconds. Nothing is
        checked again. Returns ``self``.

        Runtime complexity: `O(n)`, vectorised.
        """
        n = len(y)
        if self.period is None:
            self._cur.update_trusted(y, s, w)
            if self._both is not None:
                self._both.update_trusted(y, s, w)
            if self._baseline is not None:
                lo = max(self.warmup - self.n, 0)
                hi = min(self.warmup + self.size - self.n, n)
                if hi > lo:
                    self._baseline.update_trusted(y[lo:hi], s[lo:hi], None if w is None else w[lo:hi])
            self.n += n
            return self
        if t is None:
            raise ValueError("t = None: a period drift test needs the event times t=")
        if not n:
            return self
        before = np.maximum.accumulate(np.concatenate(([self._newest], t)))[:-1]
        idx = np.flatnonzero(~(t < before - self.lateness))
        if len(idx) < n:
            y, s, w, t = take_columns((y, s, w, t), idx)
        if len(idx):
            self._cur.update_trusted(y, s, w, t=t)
            if self._both is not None:
                self._both.update_trusted(y, s, w, t=t)
            if self._t0 is None:
                self._t0 = float(t[0])
            self._newest = max(self._newest, float(t.max()))
            if self._baseline is not None:
                b0 = self._t0 + self.warmup
                inb = np.flatnonzero((t >= b0) & (t < b0 + self.period))
                if len(inb):
                    self._baseline.update_trusted(*take_columns((y, s, w), inb))
        self.n += len(idx)
        self.late += n - len(idx)
        return self

    def revert(self, y_true, y_pred, w=1.0, t=None):
        """Not supported: the drift test's windows expire their events on their own."""
        raise NotImplementedError("a drift test cannot revert an event; its windows expire events on their own")

    def get(self):
        """The proportion (recall or precision) over the current window's events;
        ``nan`` when the window has no actual (resp. predicted) positives.

        Runtime complexity: `O(1)`.
        """
        x, n = self._cur.metric.proportion(self.metric)
        return x / n if n > 0 else _NAN

    def clone(self, new_params=None, include_attributes=False):
        """A fresh drift test with the same parameters and no data."""
        params = self._params()
        if new_params:
            params.update(new_params)
        return type(self)(**params)

    def merge(self, other):
        """Fold in another drift test with the same parameters; returns ``self``.

        Count windows: as if ``other``'s events had been sent here after this test's
        events. Time windows: the union of both tests' events, placed by time (as
        :meth:`Sliding.merge <streameval.Sliding.merge>`). A ``"baseline"`` reference is
        kept only where the merged stream's baseline is known: either test is empty,
        or this test's baseline is complete and ``other``'s events all come after it
        (count windows: always; time windows: ``other``'s first time is past the
        baseline's end). Otherwise ``ValueError``: the baseline events of the merged
        stream were not kept by either test.

        Runtime complexity: `O(size)` (the windows' merge).
        """
        self._check_same_kind(other, "merge", "into", "drift tests")
        if other.n == 0 and other.late == 0:
            return self
        if self._baseline is not None and self.n:
            if self.period is None:
                complete = self.n >= self.warmup + self.size
                after = True
            else:
                end = self._t0 + self.warmup + self.period
                complete = self._newest >= end
                after = other._t0 is None or other._t0 >= end
            if not (complete and after):
                raise ValueError(
                    "cannot merge these drift tests: the baseline of the merged stream is "
                    "made of events neither test kept (merge once this test's baseline is "
                    "complete and the other's events come after it)"
                )
        self._cur.merge(other._cur)
        if self._both is not None:
            self._both.merge(other._both)
        if self._baseline is not None and not self.n:
            self._baseline = from_state(other._baseline.to_state())
        if self.period is not None and other._t0 is not None:
            self._t0 = other._t0 if self._t0 is None else min(self._t0, other._t0)
        self._newest = max(self._newest, other._newest)
        self.n += other.n
        self.late += other.late
        return self

    # -- the report ----------------------------------------------------------------
    @property
    def ready(self):
        """Whether the windows are complete and disjoint (see the class docstring)."""
        fixed = not isinstance(self.reference, str)
        if self.period is None:
            need = self.warmup + (1 if fixed else 2) * self.size
            return self.n >= need
        if self._t0 is None:
            return False
        span = (1 if fixed else 2) * self.period
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
        return {"metric": self.metric, "reference": self.reference, "size": self.size,
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
        """Rebuild from :meth:`to_state`; states with ``"window"`` in their params, and
        states whose windows and counts carry custom labels (written before the labels
        were decoded once), load too."""
        obj = cls(**state["params"])
        d = state["data"]
        obj._cur = obj._adopt(from_state(d["cur"]), obj._cur)
        if d["both"] is not None:
            obj._both = obj._adopt(from_state(d["both"]), obj._both)
        if d["baseline"] is not None:
            base = d["baseline"]
            if not _default_labels(base["params"]):
                # counts do not depend on the labels: the same data under default labels
                base = dict(base, params=dict(base["params"], pos_label=True, neg_label=None))
            obj._baseline = from_state(base)
        obj.n, obj.late, obj._t0 = int(d["n"]), int(d["late"]), d["t0"]
        obj._newest = -math.inf if d["newest"] is None else float(d["newest"])
        return obj

    def _adopt(self, win, empty):
        """A loaded internal window; one over custom-label counts (an old state) is
        rebuilt over default-label counts from its events."""
        inner = win.metric
        if _default_labels({"pos_label": getattr(inner, "pos_label", True),
                            "neg_label": getattr(inner, "neg_label", None)}):
            return win
        events = win.events()
        if events:
            cols = list(zip(*events))
            if win.period is not None:
                ts, cols = np.array(cols[0], dtype=np.float64), cols[1:]
                empty.update_trusted(*self.validate(*cols), t=ts)
            else:
                empty.update_trusted(*self.validate(*cols))
        empty.late = win.late
        return empty

    def _check(self):
        self._cur._check()
        if self._both is not None:
            self._both._check()
        if self._baseline is not None:
            self._baseline._check()
        assert self.n >= 0 and self.late >= 0, (self.n, self.late)

    def __repr__(self):
        r = self.report()
        return (f"PrecisionRecallDrift({self.metric}, reference={self.reference!r}): "
                f"current={r.current:.6f} reference={r.reference:.6f} p={r.p_value:.3g}")

    __str__ = __repr__


def _default_labels(params):
    return params.get("pos_label", True) is True and params.get("neg_label") is None


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


class ChangePointDetector(BinaryMetric):
    """River's drift detectors on the per-event indicator stream of a metric.

    Indicators: ``"recall"`` feeds 1 for each actual positive predicted positive and
    0 for each one missed (only actual positives); ``"precision"`` feeds 1 for each
    predicted positive that is actually positive and 0 otherwise (only predicted
    positives); ``"error"`` feeds 1 for each misclassified event and 0 otherwise (all
    events). Each detection is recorded as a :class:`ChangePoint` (event index and
    time) in :attr:`changes`, and passed to ``on_change``.

    River's detectors are unweighted: each event counts once whatever its weight
    (weights are validated; events of weight 0 are skipped).

    It follows the metric protocol on the binary columns (``columns = "binary"``):
    :meth:`validate` reads a batch once, :meth:`update_trusted` adds validated columns
    unchecked, ``update_many`` is the two; :meth:`get` is the number of changes
    detected. Events cannot be reverted, nor detectors merged (river's detectors have
    neither).

    Runtime complexity of ``update``: `O(1)` plus one river ``detector.update``
    (ADWIN: amortised `O(log W)`).

    >>> cpd = ChangePointDetector("page_hinkley", indicator="recall",
    ...                           detector_params={"threshold": 20, "min_instances": 100})
    >>> rng = np.random.default_rng(1)
    >>> hit = rng.random(2000) < np.r_[np.full(1000, 0.95), np.full(1000, 0.5)]
    >>> _ = cpd.update_many(np.ones(2000, dtype=bool), np.where(hit, 0.9, 0.1))
    >>> [(c.index > 1000, c.index < 1200) for c in cpd.changes][:1]
    [(True, True)]
    >>> cpd.get() == len(cpd.changes) >= 1
    True

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
    #: its update and update_trusted take the event time t= (see metrics.base.Capabilities)
    capabilities = Capabilities(takes_time=True)
    _state_version = 1

    def __init__(self, detector="adwin", indicator="recall", threshold=0.5,
                 detector_params=None, pos_label=True, neg_label=None, on_change=None):
        super().__init__(pos_label, neg_label)
        indicator = check_param("indicator", indicator, Options("recall", "precision", "error"))
        if on_change is not None and not callable(on_change):
            raise ValueError(f"on_change = {on_change!r}: must be a callable or None")
        self.detector = detector
        self.indicator = indicator
        self.threshold = check_threshold(threshold)
        self.detector_params = dict(detector_params) if detector_params else None
        self.on_change = on_change
        self._det = _make_detector(detector, self.detector_params)
        #: detected changes, oldest first
        self.changes = []
        #: events seen, indicator values fed
        self.n = 0
        self.n_indicator = 0
        # code (2 * actual positive + predicted positive) -> indicator value, or None
        # when the event is not in the indicator stream
        self._map = {
            "recall": (None, None, 0, 1),
            "precision": (None, 0, None, 1),
            "error": (0, 1, 1, 0),
        }[indicator]
        self._table = np.array([-1 if v is None else v for v in self._map])

    def clone(self, new_params=None, include_attributes=False):
        """A fresh detector with the same parameters, no data and the same callback."""
        if new_params:
            params = dict(self._init_args(), **new_params)
            return type(self)(**params)
        return type(self)(**self._init_args())

    def _init_args(self):
        return {"detector": self.detector, "indicator": self.indicator,
                "threshold": self.threshold, "detector_params": self.detector_params,
                "pos_label": self.pos_label, "neg_label": self.neg_label,
                "on_change": self.on_change}

    @property
    def river_detector(self):
        """The river detector instance in use."""
        return self._det

    def update(self, y_true, y_pred, w=1.0, t=None):
        """Add one event; return True if a change was detected on it."""
        code = 2 * self._label(y_true) + (self._score(y_pred) >= self.threshold)
        w = check_weight(w)
        tt = None if t is None else as_seconds(t)
        index = self.n
        self.n += 1
        x = self._map[code]
        if x is None or w == 0.0:
            return False
        return self._feed(x, index, tt)

    def revert(self, y_true, y_pred, w=1.0, t=None):
        """Not supported: river's detectors cannot forget an event."""
        raise NotImplementedError("a change-point detector cannot revert an event")

    def get(self):
        """The number of changes detected so far (``len(self.changes)``).

        Runtime complexity: `O(1)`.
        """
        return len(self.changes)

    def merge(self, other):
        """Not supported: river's detectors cannot be merged (``ValueError``)."""
        raise ValueError("cannot merge change-point detectors: river's detectors have no merge")

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
        """Add a batch: validated once (:meth:`validate`, and the times if given), then
        added by :meth:`update_trusted`; the detector sees the relevant events in order.

        Runtime complexity: `O(n)`; the indicator stream is computed with numpy, river's
        detector is then called once per indicator value.
        """
        y, s, ww = self.validate(y_true, y_pred, w)
        ts = None if t is None else as_seconds_array(t, len(y))
        return self.update_trusted(y, s, ww, ts)

    def update_trusted(self, y, s, w=None, t=None):
        """Add validated binary columns (and ``t``: float64 epoch seconds, or None),
        unchecked. Returns ``self``.

        Runtime complexity: `O(n)` plus one river ``update`` per indicator value.
        """
        n = len(y)
        codes = 2 * y.astype(np.int64) + (s >= self.threshold)
        xs = self._table[codes]
        keep = xs >= 0
        if w is not None:
            keep &= w > 0
        base = self.n
        self.n += n
        feed = self._feed
        for i, x in zip(np.flatnonzero(keep).tolist(), xs[keep].tolist()):
            feed(x, base + i, None if t is None else float(t[i]))
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

    __str__ = __repr__


def _enc_float(v):
    return v if math.isfinite(v) else repr(float(v))


def _dec_float(v):
    return float(v)

