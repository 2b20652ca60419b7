"""Label-free performance estimates from calibrated scores: the expected confusion
matrix, estimated precision, recall, F1, accuracy and ROC AUC, and the predicted
positive rate, each with a confidence interval.

The model: each event's label is an independent Bernoulli draw whose probability is
the event's calibrated score ``p`` (the score itself, or ``calibration.transform`` of
it). Under that model (calibration holds, no concept shift) the realized confusion
matrix at a threshold is a sum of independent Bernoulli variables, a Poisson-binomial
(confidence-based performance estimation, CBPE; Kivimäki et al., arXiv 2407.08649 and
2505.05295), and for the events held (``w`` a frequency weight, ``pp`` the predicted
positives ``score >= threshold``, ``pn`` the others):

    E[TP] = sum_pp w p        E[FP] = sum_pp w (1 - p)
    E[FN] = sum_pn w p        E[TN] = sum_pn w (1 - p)
    Var[TP] = Var[FP] = sum_pp w p (1 - p),   Var[FN] = Var[TN] = sum_pn w p (1 - p)

(``TP`` and ``FN`` are independent: they count disjoint events). The estimates:

* precision ``E[TP] / W_pp`` (``W_pp`` the predicted-positive weight, known):
  unbiased, variance ``Var[TP] / W_pp^2``, exact;
* accuracy ``(E[TP] + E[TN]) / W``: unbiased, variance ``(Var[TP] + Var[FN]) / W^2``,
  exact;
* recall ``E[TP] / (E[TP] + E[FN])`` and F1 ``2 E[TP] / (E[TP] + W_pp + E[FN])``:
  ratios of expectations (CBPE's estimator), variance by the delta method (first-order
  Taylor expansion in ``TP`` and ``FN`` around their expectations);
* ROC AUC: the weighted Mann–Whitney statistic of the pseudo-sample in which every
  event is a positive of weight ``w p`` and a negative of weight ``w (1 - p)`` at its
  score (ties, the event's own pair included, count one half), exact and incremental
  on a :class:`~streameval.metrics.scoreorder.ScoreOrder`; its interval is DeLong's
  variance of that pseudo-sample (a stated approximation: it also counts the
  variability of the scores, so it is wider than the label-only variance).

Intervals are normal, ``value +- z sqrt(Var)`` clipped to ``[0, 1]``
(:func:`~streameval.metrics.base.interval_of`, parts ``["normal", ...]``);
:class:`PredictedPositiveRate` (``W_pp / W``, no model needed) has a Wilson interval.

Every class here has ``needs_labels = False``: the label is ignored (``y_true`` may be
None, in ``update`` and in batches), so windows, segments and checkpoints treat them as
any binary metric. The threshold applies to the raw score (the model's decision, as
:class:`~streameval.Precision` applies it); ``calibration`` maps raw scores to
probabilities and is a fixed parameter of the metric (a window's revert must see the
map its update saw; refitting means new metrics). Without a calibration, scores must
be probabilities in ``[0, 1]``.

Sums are compensated (Neumaier, per event and per batch total) and a group left
without events is exactly zero, so windows revert without drift.

It may import numpy, :mod:`streameval.validation` and the metrics' ``base``,
``common``, ``scoreorder`` and (to rebuild a map from a state) ``calibration``
modules.
"""

from __future__ import annotations

import math

import numpy as np

from streameval.validation import (
    MAX_WEIGHT,
    ValidationError,
    as_float_array,
    as_weight_array,
    check_threshold,
    check_weight,
    fail,
    overdrawn,
)

from .base import BinaryMetric, batch_memo, check_bounds
from .scoreorder import ScoreOrder, delong_variance

__all__ = [
    "LabelFree",
    "EstimatedConfusion",
    "EstimatedPrecision",
    "EstimatedRecall",
    "EstimatedF1",
    "EstimatedAccuracy",
    "PredictedPositiveRate",
    "EstimatedROCAUC",
    "calibrated",
]

_NAN = math.nan


def _calibration_param(calibration):
    """A calibration object from a parameter: None, an object with ``transform``, or
    its state (a dict, from a metric's state)."""
    if calibration is None:
        return None
    if isinstance(calibration, dict):  # a map's state (from a metric's state)
        if calibration.get("type") == "IsotonicCalibration":
            from .calibration import IsotonicCalibration

            return IsotonicCalibration.from_state(calibration)
        raise ValidationError("calibration", calibration,
                              "a state of an unknown calibration map (a map of your own: "
                              "give the object itself)")
    if not callable(getattr(calibration, "transform", None)):
        raise ValidationError("calibration", calibration,
                              "must have transform(scores) -> probabilities, or be None")
    return calibration


def calibrated(calibration, scores):
    """The probabilities of float64 ``scores`` under ``calibration`` (None: the scores
    themselves), checked to lie in ``[0, 1]``: ``ValidationError`` naming the first
    score whose probability does not (a score outside ``[0, 1]`` without calibration).

    Runtime complexity: `O(m)` plus the map's ``transform``.
    """
    if calibration is None:
        p = scores
        if len(p):
            check_bounds(p, (0.0, 1.0), why=" (scores are taken as probabilities: "
                                          "give calibration= to map them)")
        return p
    p = np.asarray(calibration.transform(scores), dtype=np.float64)
    if p.shape != scores.shape:
        raise ValueError(f"calibration.transform returned shape {p.shape} for "
                         f"{scores.shape} scores")
    bad = ~((p >= 0.0) & (p <= 1.0))
    if bad.any():
        i = int(np.argmax(bad))
        fail("y_pred", float(scores[i]),
             f"calibrated to {float(p[i])!r}, not a probability in [0, 1]", i)
    return p


class LabelFree(BinaryMetric):
    """Base of the label-free metrics (here and in
    :mod:`streameval.metrics.scoredrift`): ``needs_labels = False``, validation that
    ignores the label (None allowed), the ``threshold`` and ``calibration``
    parameters."""

    _abstract = True
    #: the label is ignored: a Monitor feeds this metric every prediction
    needs_labels = False
    _state_exclude = ("cm",)
    #: whether the (calibrated) scores must be probabilities (score drift: any score)
    _probabilities_needed = True

    def __init__(self, threshold=0.5, calibration=None):
        BinaryMetric.__init__(self)
        self.threshold = check_threshold(threshold)
        self._calibration = _calibration_param(calibration)

    @property
    def calibration(self):
        """The calibration map (None: scores are probabilities)."""
        return self._calibration

    @property
    def score_bounds(self):
        """``(0.0, 1.0)`` without a calibration (scores are probabilities), else None."""
        return (0.0, 1.0) if self._calibration is None else None

    def _params(self):
        params = super()._params()
        cal = self._calibration
        params["calibration"] = None if cal is None else cal.to_state()
        return params

    def clone(self, new_params=None, include_attributes=False):
        params = self._params()
        params["calibration"] = self._calibration  # (the same map, not a copy)
        if new_params:
            params.update(new_params)
        return type(self)(**params)

    def validate(self, y_true, y_pred, w=None):
        """Validate a batch: ``(labels, float64 scores, float64 weights or None)``.
        The labels are ignored (None allowed): an all-False column of the batch's
        length stands for them. Scores must be finite (and probabilities in ``[0, 1]``
        without calibration; with one, their calibrated values must be).

        Runtime complexity: `O(m)`, numpy, plus the calibration's ``transform``."""
        scores = as_float_array(y_pred, scalar=lambda v, i: self._score(v, name=f"y_pred[{i}]"))
        n = len(scores)
        if y_true is not None and len(y_true) != n:
            raise ValueError(f"y_true has {len(y_true)} elements but y_pred has {n}")
        weights = as_weight_array(w, n)
        if self._probabilities_needed:
            calibrated(self._calibration, scores)
        return np.zeros(n, dtype=bool), scores, weights

    def _one(self, y_pred, w):
        """``(score, probability, weight)`` of one event, checked."""
        if type(y_pred) is not float or y_pred - y_pred:
            y_pred = self._score(y_pred)
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
            w = check_weight(w)
        cal = self._calibration
        if cal is None:
            if not 0.0 <= y_pred <= 1.0:
                fail("y_pred", y_pred, "probability must be in [0, 1] (scores are taken "
                                       "as probabilities: give calibration= to map them)")
            return y_pred, y_pred, w
        p = float(calibrated(cal, np.array([y_pred]))[0])
        return y_pred, p, w

    def _probabilities(self, s):
        return s if self._calibration is None else calibrated(self._calibration, s)


# ---------------------------------------------------------------- confusion sums

#: the sums kept per group (predicted positive, predicted negative): weight, sum of
#: w p, sum of w p^2; index ``3 * group + quantity``
_W, _A, _B = 0, 1, 2


class EstimatedConfusion(LabelFree):
    """The expected confusion matrix at ``threshold`` from calibrated scores, with the
    Poisson-binomial variance of each cell (see the module notes for the formulas).

    ``get()`` is the expected accuracy (so the class is a metric like the others);
    :meth:`expected` gives the four expected cells and :meth:`variances` their
    variances. The estimated precision, recall, F1 and accuracy subclass it.

    Runtime complexity: ``update``/``revert`` `O(1)` (plus the calibration's
    ``transform`` of one score); ``update_many`` `O(m)` numpy; ``get`` `O(1)`.

    >>> from streameval.metrics.estimated import EstimatedConfusion
    >>> m = EstimatedConfusion(threshold=0.5)
    >>> m.update_many(None, [0.9, 0.6, 0.2, 0.1]).expected()
    {'tp': 1.5, 'fp': 0.5, 'fn': 0.30000000000000004, 'tn': 1.7}

    Parameters
    ----------
    threshold
        A score ``>= threshold`` is a predicted positive (the raw score).
    calibration
        None (scores are probabilities) or an object with ``transform(scores) ->
        probabilities`` and ``to_state()`` (e.g.
        :class:`~streameval.metrics.calibration.IsotonicCalibration`).
    """

    _public_name = "EstimatedConfusion"

    def __init__(self, threshold=0.5, calibration=None):
        super().__init__(threshold, calibration)
        self._n = [0, 0]  # events per group: predicted positive, predicted negative
        self._z = [0, 0]  # of which weight 0 (a group left with only these is exactly 0)
        self._s = [0.0] * 6  # compensated sums: 3 per group
        self._c = [0.0] * 6

    # -- sums -----------------------------------------------------------------
    def _add(self, k, x):
        s = self._s[k]
        t = s + x
        self._c[k] += (s - t) + x if abs(s) >= abs(x) else (x - t) + s
        self._s[k] = t

    def _sum(self, k):
        return self._s[k] + self._c[k]

    def _zero(self, g):
        for k in range(3 * g, 3 * g + 3):
            self._s[k] = self._c[k] = 0.0

    def update(self, y_true, y_pred, w=1.0):
        """Add one prediction (``y_true`` is ignored). Runtime complexity: `O(1)`."""
        s, p, w = self._one(y_pred, w)
        g = 0 if s >= self.threshold else 1
        o = 3 * g
        wp = w * p
        self._add(o, w)
        self._add(o + 1, wp)
        self._add(o + 2, wp * p)
        self._n[g] += 1
        if not w:
            self._z[g] += 1

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one prediction added earlier; ``ValueError`` (no change) if its group
        holds no event. Runtime complexity: `O(1)`."""
        s, p, w = self._one(y_pred, w)
        g = 0 if s >= self.threshold else 1
        o = 3 * g
        wp = w * p
        if not self._n[g] or (not w and not self._z[g]) or self._overdrawn(g, w, wp, wp * p):
            raise ValueError(f"revert(y_pred={y_pred!r}, w={w!r}): no such event was added")
        self._n[g] -= 1
        if not w:
            self._z[g] -= 1
        if self._n[g] == self._z[g]:
            self._zero(g)
            return
        self._add(o, -w)
        self._add(o + 1, -wp)
        self._add(o + 2, -wp * p)

    def _overdrawn(self, g, w, wp, wpp):
        """Whether taking weight ``w``, ``sum w p`` = ``wp`` and ``sum w p (1 - p)`` =
        ``wp - wpp`` out of group ``g`` leaves a sum below zero beyond rounding
        (:func:`~streameval.validation.overdrawn`): those events were never added."""
        o = 3 * g
        scale = self._sum(o)
        left_w = scale - w
        left_a = self._sum(o + 1) - wp
        left_v = (self._sum(o + 1) - self._sum(o + 2)) - (wp - wpp)
        return bool(overdrawn(left_w, w, scale) or overdrawn(left_a, w, scale)
                    or overdrawn(left_v, w, scale) or overdrawn(left_w - left_a, w, scale))

    def _batch(self, y, s, w):
        """Per group: (events, [(sum, error) of w, w p, w p^2]); computed once per
        batch for every estimate of the same threshold and calibration map in a
        Monitor's shared batch (:func:`~streameval.metrics.base.batch_memo`)."""
        key = ("estimated confusion", self.threshold, id(self._calibration))
        return batch_memo(key, y, s, w, lambda: self._sum_batch(s, w))

    def _sum_batch(self, s, w):
        p = self._probabilities(s)
        g = (s < self.threshold).view(np.int8)  # 0: predicted positive, 1: negative
        n = np.bincount(g, minlength=2)
        if w is None:
            z = np.zeros(2, dtype=np.int64)
            ws = n.astype(np.float64)
            wp = np.bincount(g, weights=p, minlength=2)
            wpp = np.bincount(g, weights=p * p, minlength=2)
        else:
            z = np.bincount(g[w == 0.0], minlength=2)
            ws = np.bincount(g, weights=w, minlength=2)
            x = w * p
            wp = np.bincount(g, weights=x, minlength=2)
            wpp = np.bincount(g, weights=x * p, minlength=2)
        return [(int(n[k]), [(float(ws[k]), 0.0), (float(wp[k]), 0.0), (float(wpp[k]), 0.0)],
                 int(z[k])) for k in (0, 1)]

    def update_trusted(self, y, s, w=None):
        """Add validated columns (the labels are ignored). Runtime complexity: `O(m)`
        numpy, plus the calibration's ``transform``."""
        for g, (n, sums, z) in enumerate(self._batch(y, s, w)):
            if n:
                for q, (total, err) in enumerate(sums):
                    self._add(3 * g + q, total)
                    self._add(3 * g + q, err)
                self._n[g] += n
                self._z[g] += z
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove validated columns added earlier; atomic (``ValidationError`` naming
        the first event of a group that holds fewer events, no change)."""
        batch = self._batch(y, s, w)
        for g, (n, sums, z) in enumerate(batch):
            (tw, ew), (ta, ea), (tb, eb) = sums
            if n > self._n[g] or z > self._z[g] or (
                    n and self._overdrawn(g, tw + ew, ta + ea, tb + eb)):
                pos = s >= self.threshold
                mask = pos if g == 0 else ~pos
                i = int(np.flatnonzero(mask)[min(self._n[g], n - 1)])
                raise ValidationError.at(i, f"revert of (y_pred={float(s[i])!r}): no such "
                                            "event was added")
        for g, (n, sums, z) in enumerate(batch):
            if not n:
                continue
            self._n[g] -= n
            self._z[g] -= z
            if self._n[g] == self._z[g]:
                self._zero(g)
                continue
            for q, (total, err) in enumerate(sums):
                self._add(3 * g + q, -total)
                self._add(3 * g + q, -err)
        return self

    # -- values ---------------------------------------------------------------
    def _cells(self):
        """``(W_pp, A_pp, V_pp, W_pn, A_pn, V_pn)``: weights, expected positives and
        Poisson-binomial variances per group."""
        out = []
        for g in (0, 1):
            if self._n[g] == self._z[g]:
                out += [0.0, 0.0, 0.0]
                continue
            o = 3 * g
            w, a, b = self._sum(o), self._sum(o + 1), self._sum(o + 2)
            a = min(max(a, 0.0), w)
            out += [w, a, max(a - b, 0.0)]
        return out

    def expected(self):
        """The expected confusion cells ``{"tp", "fp", "fn", "tn"}`` (weights)."""
        wpp, app, _, wpn, apn, _ = self._cells()
        return {"tp": app, "fp": wpp - app, "fn": apn, "tn": wpn - apn}

    def variances(self):
        """The Poisson-binomial variance of each cell ``{"tp", "fp", "fn", "tn"}``
        (``Var[TP] = Var[FP] = sum_pp w p (1 - p)``, the same for ``FN``/``TN`` over
        the predicted negatives)."""
        _, _, vpp, _, _, vpn = self._cells()
        return {"tp": vpp, "fp": vpp, "fn": vpn, "tn": vpn}

    def _estimate(self):
        """``(value, variance)`` of the estimate; value NaN when undefined."""
        wpp, app, vpp, wpn, apn, vpn = self._cells()
        total = wpp + wpn
        if not total > 0.0:
            return _NAN, _NAN
        return (app + wpn - apn) / total, (vpp + vpn) / (total * total)

    def get(self):
        """The estimate (NaN when undefined: no weight in its denominator).
        Runtime complexity: `O(1)`."""
        return self._estimate()[0]

    _has_interval = True

    def _interval_parts(self):
        value, var = self._estimate()
        if value != value:
            return None
        return ["normal", value, var, 0.0, 1.0]

    def interval(self, level=0.95):
        """A normal interval ``value +- z sqrt(Var)`` clipped to ``[0, 1]``, ``Var`` the
        Poisson-binomial variance of the estimate (exact for precision and accuracy,
        delta method for recall and F1; see the module notes); ``(nan, nan)`` when the
        estimate is undefined. Runtime complexity: `O(1)`."""
        return super().interval(level)

    def __len__(self):
        return self._n[0] + self._n[1]

    # -- merge and state ------------------------------------------------------
    def _merge(self, other):
        for k in range(6):
            self._add(k, other._s[k])
            self._add(k, other._c[k])
        self._n = [a + b for a, b in zip(self._n, other._n)]
        self._z = [a + b for a, b in zip(self._z, other._z)]

    def _subtract(self, other):
        for g in (0, 1):
            if other._n[g] > self._n[g] or other._z[g] > self._z[g]:
                raise ValueError(f"subtract: {self._n[g]} events here but {other._n[g]} in "
                                 f"the other {self._public_name} ({('predicted positive', 'predicted negative')[g]}): "
                                 "they were never merged")
        for g in (0, 1):
            self._n[g] -= other._n[g]
            self._z[g] -= other._z[g]
            if self._n[g] == self._z[g]:
                self._zero(g)
                continue
            for k in range(3 * g, 3 * g + 3):
                self._add(k, -other._s[k])
                self._add(k, -other._c[k])

    def _get_data(self):
        return {"n": list(self._n), "zero": list(self._z),
                "sums": [[s, c] for s, c in zip(self._s, self._c)]}

    def _set_data(self, data):
        try:
            n = [int(v) for v in data["n"]]
            z = [int(v) for v in data.get("zero", (0, 0))]
            sums = [(float(a), float(b)) for a, b in data["sums"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a {self._public_name} state: {data!r:.200} ({e})") from None
        if len(n) != 2 or len(z) != 2 or min(z) < 0 or z[0] > n[0] or z[1] > n[1] \
                or len(sums) != 6 or not all(
                math.isfinite(v) for pair in sums for v in pair):
            raise ValueError(f"not a {self._public_name} state: {data!r:.200}")
        self._n, self._z = n, z
        self._s = [a for a, _ in sums]
        self._c = [b for _, b in sums]

    def _check(self):
        for g in (0, 1):
            assert type(self._n[g]) is int and self._n[g] >= self._z[g] >= 0, (self._n, self._z)
            if self._n[g] == self._z[g]:
                assert all(self._s[k] == self._c[k] == 0.0 for k in range(3 * g, 3 * g + 3))
            w, a = self._sum(3 * g), self._sum(3 * g + 1)
            assert -1e-9 * max(1.0, w) <= a <= w + 1e-9 * max(1.0, w), (a, w)


class EstimatedAccuracy(EstimatedConfusion):
    """Estimated accuracy ``(E[TP] + E[TN]) / W`` from calibrated scores, unbiased
    under calibration, with the exact Poisson-binomial variance
    ``sum w p (1 - p) / W^2``. Costs as :class:`EstimatedConfusion`.

    >>> from streameval.metrics.estimated import EstimatedAccuracy
    >>> m = EstimatedAccuracy().update_many(None, [0.9, 0.6, 0.2, 0.1])
    >>> round(m.get(), 6), [round(v, 4) for v in m.interval(0.95)]
    (0.8, [0.4268, 1.0])
    """

    _public_name = "EstimatedAccuracy"


class EstimatedPrecision(EstimatedConfusion):
    """Estimated precision ``E[TP] / W_pp`` (``W_pp`` the weight of predicted
    positives, ``score >= threshold``), unbiased under calibration, with the exact
    Poisson-binomial variance ``sum_pp w p (1 - p) / W_pp^2``; NaN without predicted
    positives. Costs as :class:`EstimatedConfusion`.

    >>> from streameval.metrics.estimated import EstimatedPrecision
    >>> m = EstimatedPrecision().update_many(None, [0.9, 0.6, 0.2, 0.1])
    >>> round(m.get(), 6)
    0.75
    """

    _public_name = "EstimatedPrecision"

    def _estimate(self):
        wpp, app, vpp, _, _, _ = self._cells()
        if not wpp > 0.0:
            return _NAN, _NAN
        return app / wpp, vpp / (wpp * wpp)


class EstimatedRecall(EstimatedConfusion):
    """Estimated recall ``E[TP] / (E[TP] + E[FN])`` (a ratio of expectations), with
    the delta-method variance ``(E[FN]^2 Var[TP] + E[TP]^2 Var[FN]) / (E[TP] +
    E[FN])^4``; NaN without expected positives. Costs as :class:`EstimatedConfusion`.

    >>> from streameval.metrics.estimated import EstimatedRecall
    >>> m = EstimatedRecall().update_many(None, [0.9, 0.6, 0.2, 0.1])
    >>> round(m.get(), 6)
    0.833333
    """

    _public_name = "EstimatedRecall"

    def _estimate(self):
        _, app, vpp, _, apn, vpn = self._cells()
        d = app + apn
        if not d > 0.0:
            return _NAN, _NAN
        ra, rb = app / d, apn / d  # (divided first: d**4 would underflow)
        return ra, (rb * rb * vpp + ra * ra * vpn) / d / d


class EstimatedF1(EstimatedConfusion):
    """Estimated F1 ``2 E[TP] / (E[TP] + W_pp + E[FN])`` (``2TP + FP + FN = TP + W_pp
    + FN``; a ratio of expectations), with the delta-method variance
    ``(4 (W_pp + E[FN])^2 Var[TP] + 4 E[TP]^2 Var[FN]) / D^4``, ``D`` the
    denominator; NaN when ``D`` is 0. Costs as :class:`EstimatedConfusion`.

    >>> from streameval.metrics.estimated import EstimatedF1
    >>> m = EstimatedF1().update_many(None, [0.9, 0.6, 0.2, 0.1])
    >>> round(m.get(), 6)
    0.789474
    """

    _public_name = "EstimatedF1"

    def _estimate(self):
        wpp, app, vpp, _, apn, vpn = self._cells()
        d = app + wpp + apn
        if not d > 0.0:
            return _NAN, _NAN
        a = 2.0 * (wpp + apn) / d  # (divided first: d**4 would underflow)
        b = 2.0 * app / d
        return b, (a * a * vpp + b * b * vpn) / d / d


class PredictedPositiveRate(EstimatedConfusion):
    """The weighted share of predictions with ``score >= threshold``, ``W_pp / W``,
    with a Wilson score interval; needs no calibration (a ``calibration`` given is
    ignored by the value). NaN before any weight. Costs as
    :class:`EstimatedConfusion`.

    >>> from streameval.metrics.estimated import PredictedPositiveRate
    >>> m = PredictedPositiveRate().update_many(None, [0.9, 0.6, 0.2, 0.1])
    >>> m.get()
    0.5
    """

    _public_name = "PredictedPositiveRate"

    def _estimate(self):
        wpp, _, _, wpn, _, _ = self._cells()
        total = wpp + wpn
        if not total > 0.0:
            return _NAN, _NAN
        return wpp / total, _NAN

    def _interval_parts(self):
        wpp, _, _, wpn, _, _ = self._cells()
        total = wpp + wpn
        if not total > 0.0:
            return None
        return ["wilson", wpp, total]

    def interval(self, level=0.95):
        """The Wilson score interval of ``W_pp / W`` (weights as frequency weights);
        ``(nan, nan)`` before any weight. Runtime complexity: `O(1)`."""
        return super(EstimatedConfusion, self).interval(level)


# ---------------------------------------------------------------- expected AUC


class EstimatedROCAUC(LabelFree):
    """The expected ROC AUC from calibrated scores: the weighted Mann–Whitney
    statistic of the pseudo-sample in which each event is a positive of weight ``w p``
    and a negative of weight ``w (1 - p)`` at its score,

        AUC_e = sum_{i, j} w_i p_i w_j (1 - p_j) ([s_i > s_j] + 1/2 [s_i == s_j])
                / (sum_i w_i p_i * sum_j w_j (1 - p_j))

    (the pairs ``i == j`` are ties and count one half; equal to
    ``sklearn.metrics.roc_auc_score`` of every event twice, label 1 with weight
    ``w p`` and label 0 with weight ``w (1 - p)``). Ranking uses the raw score,
    probabilities the calibrated one. Exact, kept in a
    :class:`~streameval.metrics.scoreorder.ScoreOrder` (memory grows with distinct
    scores; windows bound it). ``threshold`` is accepted for a uniform signature and
    not used.

    Runtime complexity: ``update``/``revert`` `O(log(n))` (``n`` distinct scores);
    ``update_many`` `O(m log(m))` plus the order's merge; ``get`` `O(1)`; ``interval``
    one numpy pass over the distinct scores.

    >>> from streameval.metrics.estimated import EstimatedROCAUC
    >>> m = EstimatedROCAUC().update_many(None, [0.9, 0.6, 0.2, 0.1])
    >>> round(m.get(), 6)
    0.853535

    Parameters
    ----------
    threshold
        Not used (the AUC spans every threshold).
    calibration
        As :class:`EstimatedConfusion`.
    """

    _public_name = "EstimatedROCAUC"

    def __init__(self, threshold=0.5, calibration=None):
        super().__init__(threshold, calibration)
        self._so = ScoreOrder()

    def update(self, y_true, y_pred, w=1.0):
        """Add one prediction (``y_true`` ignored). Runtime complexity: `O(log(n))`."""
        s, p, w = self._one(y_pred, w)
        wp = w * p
        so = self._so
        so.add(s, True, wp)
        so.add(s, False, w - wp)

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one prediction added earlier; ``ValueError`` (no change) if it was
        not. Runtime complexity: `O(log(n))`."""
        s, p, w = self._one(y_pred, w)
        wp = w * p
        so = self._so
        try:
            so.remove(s, True, wp)
        except KeyError:
            raise ValueError(f"revert(y_pred={y_pred!r}): no such event was added") from None
        try:
            so.remove(s, False, w - wp)
        except KeyError:  # pragma: no cover - both halves go in together
            so.add(s, True, wp)
            raise ValueError(f"revert(y_pred={y_pred!r}): no such event was added") from None

    def _entries(self, s, w):
        p = self._probabilities(s)
        w = np.ones(len(s)) if w is None else w
        wp = w * p
        wn = w - wp
        keys, inv = np.unique(s, return_inverse=True)
        counts = np.bincount(inv, minlength=len(keys)).astype(np.int64)
        bp = np.bincount(inv, weights=wp, minlength=len(keys))
        bn = np.bincount(inv, weights=wn, minlength=len(keys))
        return (keys, bp, bn, counts, counts.copy(),
                int(np.count_nonzero(wp == 0.0)), int(np.count_nonzero(wn == 0.0)))

    def update_trusted(self, y, s, w=None):
        """Add validated columns (labels ignored). Runtime complexity:
        `O(m log(m))` numpy plus the order's merge."""
        if len(s):
            self._so.add_entries(*self._entries(s, w))
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove validated columns added earlier; atomic (``ValidationError``, no
        change, if any was not added)."""
        if not len(s):
            return self
        entries = self._entries(s, w)
        try:
            self._so.remove_entries(*entries)
        except KeyError as e:
            bad = e.args[0] if e.args and isinstance(e.args[0], np.ndarray) else None
            i = 0
            if bad is not None and bad.any():
                key = entries[0][int(np.argmax(bad))]
                i = int(np.argmax(s == key))
            raise ValidationError.at(i, f"revert of (y_pred={float(s[i])!r}): no such "
                                        "event was added") from None
        return self

    def get(self):
        """The expected AUC; NaN without expected positive or negative weight.
        Runtime complexity: `O(1)`."""
        return self._so.auc()

    _has_interval = True

    def _interval_parts(self):
        so = self._so
        auc = so.auc()
        if auc != auc:
            return None
        wp, wn = so.weights()
        var = delong_variance(wp, wn, auc, so.pos_weight, so.neg_weight)
        if var != var:
            return None
        return ["normal", auc, var, 0.0, 1.0]

    def interval(self, level=0.95):
        """DeLong's normal interval of the pseudo-sample (expected positive weight
        ``sum w p``, negative ``sum w (1 - p)``), clipped to ``[0, 1]``; ``(nan, nan)``
        when either expected class weight is at most 1. Runtime complexity: one numpy
        pass over the distinct scores."""
        return super().interval(level)

    def __len__(self):
        return self._so.n_pos

    def _merge(self, other):
        self._so.merge(other._so)

    def _subtract(self, other):
        self._so.subtract(other._so, name=f"the other {self._public_name}")

    def _get_data(self):
        return self._so.to_data()

    def _set_data(self, data):
        self._so.set_data(data)

    def _check(self):
        self._so._check()
