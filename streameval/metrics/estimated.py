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
probabilities and is a parameter of the metric: a window's revert must see the map its
update saw, so a new map (a Monitor's refit schedule,
:class:`~streameval.metrics.calibration.CalibrationRefit`) goes to a cumulative metric
for the events that follow (:meth:`LabelFree.set_calibration`) and to a window as a new
metric fed the events it holds. Without a calibration, scores must be probabilities in
``[0, 1]``.

The expected confusion matrix's sums are exact (:func:`exact_sums`: integers at a scale
where every float64 is one), so its estimates do not depend on how their events were
batched, reverted, merged or checkpointed: a window reverts without drift, and a monitor
resumed from a checkpoint gives the bits of one that never stopped. Each value read is
the correctly rounded value of its exact sums. The expected ROC AUC is the exception:
its score order holds float weights and a float Mann–Whitney sum, so the same events in
other batches differ in the last bits (within 1e-12; :class:`EstimatedROCAUC`).

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
    "map_token",
]

_NAN = math.nan

# ------------------------------------------------------------------ exact sums
#: An exact sum is a Python int ``S``, the value ``S / 2**EXACT_SCALE``: every finite
#: float64 is an integer multiple of ``2**-1074``, so sums of them are exact integers at
#: this scale (56 more bits keep every shift below non-negative), whatever their order
#: or grouping; ``float(S / 2**EXACT_SCALE)`` is the correctly rounded value.
EXACT_SCALE = 1130
_DEN = 1 << EXACT_SCALE
#: exponents per bin of :func:`exact_sums` (a mantissa shifted by at most 7 bits fits
#: in an int64)
_SPAN = 8
_NBINS = (1024 + 1077) // _SPAN + 1
#: events per :func:`exact_sums` pass: 30-bit halves of 60-bit integers, summed in
#: float64, stay exact below ``2**53``
_CHUNK = 1 << 22


def exact(x):
    """The exact integer of one finite float at :data:`EXACT_SCALE`."""
    n, d = float(x).as_integer_ratio()
    return n << (EXACT_SCALE + 1 - d.bit_length())


def exact_sums(x, slot, nslots):
    """Exact sums of the finite float64 ``x`` per ``slot`` (ints in ``[0, nslots)``), as
    ints at :data:`EXACT_SCALE`. Each value is ``mi * 2**(e - 53)`` (``np.frexp``);
    values are binned by ``e`` in runs of 8 exponents, each shifted to its bin's lowest
    exponent (at most 60 bits), split in 30-bit halves whose sums per bin ``np.bincount``
    forms exactly in float64; Python adds the bins' integers. Runtime complexity:
    `O(m)` numpy plus `O(bins holding a value)` Python integer additions."""
    out = [0] * nslots
    for a in range(0, len(x), _CHUNK):
        xs, ss = x[a:a + _CHUNK], slot[a:a + _CHUNK]
        m, e = np.frexp(xs)
        mi = (m * 9007199254740992.0).astype(np.int64)  # |mi| < 2**53: exact
        q = e.astype(np.int64) + 1077  # x = mi * 2**(q - 1130), q >= 4 for subnormals
        v = mi << (q & (_SPAN - 1))
        code = ss * _NBINS + (q >> 3)
        size = nslots * _NBINS
        hi = np.bincount(code, weights=(v >> 30).astype(np.float64), minlength=size)
        lo = np.bincount(code, weights=(v & 0x3FFFFFFF).astype(np.float64), minlength=size)
        nz = np.flatnonzero((hi != 0.0) | (lo != 0.0))
        for c, h, low in zip(nz.tolist(), hi[nz].tolist(), lo[nz].tolist()):
            k, b = divmod(c, _NBINS)
            out[k] += ((int(h) << 30) + int(low)) << (_SPAN * b)
    return out


def as_float(total):
    """The correctly rounded float of an exact sum."""
    return total / _DEN


def float_parts(total):
    """Floats whose exact sum is ``total`` (at :data:`EXACT_SCALE`), largest first: the
    exact sum's JSON form (one float when it is representable, two or three usually)."""
    out = []
    while True:
        f = total / _DEN
        out.append(f)
        total -= exact(f)
        if not total:
            return out


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


_TOKENS = iter(range(1, 1 << 62))


def map_token(calibration):
    """A key of a calibration map that no other map ever has in this process (its
    ``id`` may be reused once it is freed): what batch memos of one map are found by.
    None for no map."""
    if calibration is None:
        return None
    try:
        tok = calibration.__dict__.get("_streameval_token")
        if tok is None:
            tok = calibration.__dict__["_streameval_token"] = next(_TOKENS)
        return tok
    except AttributeError:  # (a map without __dict__: its id, kept alive by the metric)
        return ("id", id(calibration))


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
    def recalibrates(self):
        """Whether a Monitor's calibration refit schedule gives this metric its maps
        (:func:`~streameval.metrics.calibration.recalibrate`): the estimates that read
        scores as probabilities."""
        return self._probabilities_needed

    def set_calibration(self, calibration):
        """Count the events that follow with ``calibration`` (None: scores are
        probabilities); those counted keep the map they were counted with, so only a
        metric that never reverts may change its map (a window is rebuilt instead:
        :func:`~streameval.metrics.calibration.recalibrate`). Runtime complexity:
        `O(1)`."""
        self._calibration = _calibration_param(calibration)
        self.__dict__.pop("_array_params", None)  # (the binary state's parameters)

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


def _over_square(v, d):
    """``v / d^2`` (``d > 0``), divided twice where ``d^2`` underflows to 0."""
    dd = d * d
    return v / dd if dd > 0.0 else v / d / d


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
        self._z = [0, 0]  # of which weight 0
        self._s = [0] * 6  # exact sums (ints at EXACT_SCALE): 3 per group

    # -- sums -----------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0):
        """Add one prediction (``y_true`` is ignored). Runtime complexity: `O(1)`."""
        s, p, w = self._one(y_pred, w)
        g = 0 if s >= self.threshold else 1
        o = 3 * g
        wp = w * p
        sums = self._s
        sums[o] += exact(w)
        sums[o + 1] += exact(wp)
        sums[o + 2] += exact(wp * p)
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
        x = (exact(w), exact(wp), exact(wp * p))
        if not self._n[g] or (not w and not self._z[g]) or self._overdrawn(g, x):
            raise ValueError(f"revert(y_pred={y_pred!r}, w={w!r}): no such event was added")
        self._n[g] -= 1
        if not w:
            self._z[g] -= 1
        for q in range(3):
            self._s[o + q] -= x[q]

    def _overdrawn(self, g, x):
        """Whether taking the exact sums ``x`` (weight, ``w p``, ``w p^2``) out of group
        ``g`` leaves a weight, expected positives, expected negatives or variance below
        zero: those events were never added (the sums are exact: no rounding slack)."""
        o = 3 * g
        left_w = self._s[o] - x[0]
        left_a = self._s[o + 1] - x[1]
        left_b = self._s[o + 2] - x[2]
        return left_w < 0 or left_a < 0 or left_b < 0 or left_a < left_b or left_w < left_a

    def _batch(self, y, s, w):
        """Per group: (events, exact sums of w, w p, w p^2, events of weight 0);
        computed once per batch for every estimate of the same threshold and
        calibration map in a Monitor's shared batch
        (:func:`~streameval.metrics.base.batch_memo`)."""
        key = ("estimated confusion", self.threshold, map_token(self._calibration))
        return batch_memo(key, y, s, w, lambda: self._sum_batch(s, w))

    def _sum_batch(self, s, w):
        p = self._probabilities(s)
        g = (s < self.threshold).view(np.int8).astype(np.int64)  # 0: predicted positive
        n = np.bincount(g, minlength=2)
        if w is None:
            z = (0, 0)
            x = np.concatenate((p, p * p))
            slot = np.concatenate((3 * g + 1, 3 * g + 2))
            sums = exact_sums(x, slot, 6)
            for k in (0, 1):  # a weight of 1 per event
                sums[3 * k] = int(n[k]) << EXACT_SCALE
        else:
            z = np.bincount(g[w == 0.0], minlength=2).tolist()
            wp = w * p
            x = np.concatenate((w, wp, wp * p))
            slot = np.concatenate((3 * g, 3 * g + 1, 3 * g + 2))
            sums = exact_sums(x, slot, 6)
        return [(int(n[k]), tuple(sums[3 * k:3 * k + 3]), int(z[k])) for k in (0, 1)]

    def update_trusted(self, y, s, w=None):
        """Add validated columns (the labels are ignored). Runtime complexity: `O(m)`
        numpy, plus the calibration's ``transform``."""
        for g, (n, sums, z) in enumerate(self._batch(y, s, w)):
            if n:
                for q in range(3):
                    self._s[3 * g + q] += sums[q]
                self._n[g] += n
                self._z[g] += z
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove validated columns added earlier; atomic (``ValidationError`` naming
        the first event of a group that holds fewer events, no change)."""
        batch = self._batch(y, s, w)
        for g, (n, sums, z) in enumerate(batch):
            if n > self._n[g] or z > self._z[g] or (n and self._overdrawn(g, sums)):
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
            for q in range(3):
                self._s[3 * g + q] -= sums[q]
        return self

    # -- values ---------------------------------------------------------------
    def _cells(self):
        """``(W_pp, A_pp, V_pp, W_pn, A_pn, V_pn)``: weights, expected positives and
        Poisson-binomial variances per group."""
        s = self._s
        return [s[0] / _DEN, s[1] / _DEN, (s[1] - s[2]) / _DEN,
                s[3] / _DEN, s[4] / _DEN, (s[4] - s[5]) / _DEN]

    def expected(self):
        """The expected confusion cells ``{"tp", "fp", "fn", "tn"}`` (weights), each the
        correctly rounded value of its exact sum."""
        s = self._s
        return {"tp": s[1] / _DEN, "fp": (s[0] - s[1]) / _DEN, "fn": s[4] / _DEN,
                "tn": (s[3] - s[4]) / _DEN}

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
        return (app + wpn - apn) / total, _over_square(vpp + vpn, total)

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
        self._s = [a + b for a, b in zip(self._s, other._s)]
        self._n = [a + b for a, b in zip(self._n, other._n)]
        self._z = [a + b for a, b in zip(self._z, other._z)]

    def _subtract(self, other):
        for g in (0, 1):
            if other._n[g] > self._n[g] or other._z[g] > self._z[g] \
                    or self._overdrawn(g, other._s[3 * g:3 * g + 3]):
                raise ValueError(f"subtract: {self._n[g]} events here but {other._n[g]} in "
                                 f"the other {self._public_name} ({('predicted positive', 'predicted negative')[g]}): "
                                 "they were never merged")
        self._n = [a - b for a, b in zip(self._n, other._n)]
        self._z = [a - b for a, b in zip(self._z, other._z)]
        self._s = [a - b for a, b in zip(self._s, other._s)]

    def _get_data(self):
        return {"n": list(self._n), "zero": list(self._z),
                "sums": [float_parts(v) for v in self._s]}

    def _set_data(self, data):
        """Restore :meth:`_get_data`: each sum a list of floats whose exact sum it is (a
        state written with compensated sums, ``[sum, compensation]``, reads the same
        way)."""
        try:
            n = [int(v) for v in data["n"]]
            z = [int(v) for v in data.get("zero", (0, 0))]
            parts = [[float(x) for x in pair] for pair in data["sums"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a {self._public_name} state: {data!r:.200} ({e})") from None
        if len(n) != 2 or len(z) != 2 or min(z) < 0 or z[0] > n[0] or z[1] > n[1] \
                or len(parts) != 6 or not all(
                math.isfinite(v) for pair in parts for v in pair):
            raise ValueError(f"not a {self._public_name} state: {data!r:.200}")
        sums = [sum(exact(x) for x in pair) for pair in parts]
        for g in (0, 1):
            w, a, b = sums[3 * g:3 * g + 3]
            if n[g] == z[g]:  # only events of weight 0
                sums[3 * g:3 * g + 3] = [0, 0, 0]
                continue
            # (a compensated state may be off by its rounding: 1e-9 of the weight at most)
            tol = (abs(w) >> 30) + 1
            if w < 0 or min(a, b) < -tol or b > a + tol or a > w + tol:
                raise ValueError(f"not a {self._public_name} state: sums of group {g} "
                                 "are not 0 <= sum w p^2 <= sum w p <= sum w")
            a = min(max(a, 0), w)
            sums[3 * g:3 * g + 3] = [w, a, min(max(b, 0), a)]
        self._n, self._z, self._s = n, z, sums

    def _check(self):
        for g in (0, 1):
            assert type(self._n[g]) is int and self._n[g] >= self._z[g] >= 0, (self._n, self._z)
            w, a, b = self._s[3 * g:3 * g + 3]
            assert all(type(v) is int for v in (w, a, b))
            assert 0 <= b <= a <= w, (w, a, b)
            if self._n[g] == self._z[g]:
                assert w == a == b == 0


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
        return app / wpp, _over_square(vpp, wpp)


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

    Its weights ``w p`` and ``w (1 - p)`` are not dyadic, so the order's per-score
    weights and its Mann–Whitney sum are float64 sums whose rounding follows the
    batches: the same events fed in one batch, in batches of 1 000 or one by one give
    values that differ in their last bits (within 1e-12 of each other and of
    scikit-learn's AUC of the pseudo-sample). A binary checkpoint
    (:meth:`to_array_state`) keeps the order as laid out, so a restored metric goes on
    with the bits of one that never stopped.

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

    def read_size(self):
        """0: ``get()`` is `O(1)`. Declared for a Monitor's evaluator, which then reads
        the value at every row but leaves out of the rows the interval of a cumulative
        estimate (DeLong's variance is a pass over every distinct score held, the
        dearest part of a row on a long stream), as for a cumulative ``ROCAUC``:
        :meth:`interval` gives it on demand; a window's interval is in
        the rows."""
        return 0

    #: (score order, its stamp) of the cached DeLong variance
    _delong_key = None
    _delong_var = _NAN

    def _interval_parts(self):
        so = self._so
        auc = so.auc()
        if auc != auc:
            return None
        key = self._delong_key
        if key is None or key[0] is not so or key[1] != so.stamp:
            wp, wn = so.weights(copy=False)  # (only read)
            self._delong_var = delong_variance(wp, wn, auc, so.pos_weight, so.neg_weight)
            self._delong_key = (so, so.stamp)
        var = self._delong_var
        if var != var:
            return None
        return ["normal", auc, var, 0.0, 1.0]

    def interval(self, level=0.95):
        """DeLong's normal interval of the pseudo-sample (expected positive weight
        ``sum w p``, negative ``sum w (1 - p)``), clipped to ``[0, 1]``; ``(nan, nan)``
        when either expected class weight is at most 1. Runtime complexity: one numpy
        pass over the distinct scores, cached until the order changes."""
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

    # -- binary state ---------------------------------------------------------
    def to_array_state(self):
        """The binary checkpoint's state (see :mod:`streameval.metrics.arraystate`):
        the score order as it is laid out (:meth:`ScoreOrder.to_layout
        <streameval.metrics.scoreorder.ScoreOrder.to_layout>`: nothing merged, so a
        restored metric sums what follows as this one does, to the bit). Runtime
        complexity: the order's ``to_layout`` (`O(1)` for its levels)."""
        params = self.__dict__.get("_array_params")
        if params is None:  # (constructor parameters never change: read them once)
            params = self.__dict__["_array_params"] = self._params()
        return {"type": self._public_name, "version": self._state_version,
                "params": dict(params), "data": {"order": self._so.to_layout()},
                "arrays": 1}

    def _set_array_data(self, data):
        """Restore :meth:`to_array_state`'s data (checked; ``ValueError`` if bad)."""
        if not isinstance(data, dict) or set(data) != {"order"}:
            raise ValueError(f"bad {self._public_name} state: expected the key order")
        self._so = ScoreOrder.from_layout(data["order"])

    def state_token(self):
        """A cheap token that changes whenever :meth:`to_array_state` would: the
        order's identity, change stamp and layout (a read may move it to another).
        `O(1)`."""
        so = self._so
        lv = so._levels
        return (map_token(self._calibration), id(so), so.stamp, id(so._arrays),
                None if lv is None else (id(lv), lv.rent, lv.ap, len(lv.pos), len(lv.neg),
                                         tuple(id(x.k) for x in lv.pos)))

    def _check(self):
        self._so._check()
