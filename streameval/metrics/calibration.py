"""Calibration with labels: expected calibration error, the Brier score's
decomposition, the reliability curve, and an isotonic calibration map.

Binned metrics (:class:`ExpectedCalibrationError`, :class:`BrierDecomposition` and its
three components, :class:`ReliabilityCurve`) share one state: ``bins`` equal-width bins
over ``[0, 1]`` with scikit-learn's edges (``calibration_curve(strategy="uniform")``:
bin ``k`` holds ``edges[k] < p <= edges[k + 1]``, the first also ``p = 0``), and per
bin the weight ``W_k``, ``sum w p``, ``sum w y``, ``sum w p^2`` and ``sum w p y``
(compensated sums; a bin left without events is exactly zero). From them:

* ECE ``= sum_k (W_k / W) |o_k - f_k|`` (``f_k`` the bin's mean score, ``o_k`` its
  observed positive rate, weighted);
* Murphy's (1973) decomposition of the Brier score over the bins,
  ``reliability = sum_k W_k (f_k - o_k)^2 / W``, ``resolution = sum_k W_k (o_k - o)^2
  / W``, ``uncertainty = o (1 - o)`` (``o`` the overall rate), and the two within-bin
  terms of Stephenson et al. (2008) that make it exact for scores that vary inside a
  bin: ``brier = reliability - resolution + uncertainty + wbv - 2 wbc``
  (``wbv = sum w (p - f_k)^2 / W``, ``wbc = sum w (p - f_k)(y - o_k) / W``); with
  scores constant within each bin the last two are 0;
* the reliability curve: per non-empty bin, mean score, observed rate and weight.

Weights are frequency weights. ``update``/``revert`` cost `O(log(bins))`,
``update_many`` `O(m)` numpy, ``get`` `O(bins)`.

:class:`IsotonicCalibration` learns a monotone map from scores to probabilities by
pool-adjacent-violators (equal to ``sklearn.isotonic.IsotonicRegression`` with
``out_of_bounds="clip"``) for the label-free estimates
(:mod:`streameval.metrics.estimated`); :class:`CalibrationRefit` refits one every
``every`` joined labels on the last ``window`` of them, and :func:`apply_refits` gives a
Monitor scope's estimates the new map at its next row.

It may import numpy, :mod:`streameval.validation` and the
metrics' ``base`` and ``common`` modules.
"""

from __future__ import annotations

import math
from bisect import bisect_left

import numpy as np

from streameval.validation import (
    MAX_WEIGHT,
    ValidationError,
    as_binary_labels,
    as_float_array,
    as_weight_array,
    check_same_length,
    check_weight,
    fail,
    label_sets,
)

from .base import BinaryMetric
from .common import sum2

__all__ = [
    "ExpectedCalibrationError",
    "BrierDecomposition",
    "BrierReliability",
    "BrierResolution",
    "BrierUncertainty",
    "ReliabilityCurve",
    "IsotonicCalibration",
    "CalibrationRefit",
    "CalibrationField",
    "recalibrate",
    "apply_refits",
    "pav",
]

_NAN = math.nan
#: per-bin sums: weight, w p, w y, w p^2, w p y
_Q = 5


def _check_bins(bins):
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= 10_000:
        raise ValidationError("bins", bins, "must be an int in 1..10000")
    return bins


class _Binned(BinaryMetric):
    """Per-bin sums of probabilities and labels (see the module notes)."""

    _abstract = True
    score_bounds = (0.0, 1.0)
    #: ``bins`` is part of the definition (ECE over 10 bins), not an approximation of
    #: an exact value: no error bound to report
    bins_define_value = True

    def __init__(self, bins=10, strategy="uniform", pos_label=True, neg_label=None):
        BinaryMetric.__init__(self, pos_label, neg_label)
        self.bins = _check_bins(bins)
        if strategy != "uniform":
            raise ValidationError("strategy", strategy, 'must be "uniform" (equal-width '
                                  "bins over [0, 1]: quantile edges move with the data, "
                                  "so they cannot be kept exactly in a stream)")
        self.strategy = strategy
        self._edges = np.linspace(0.0, 1.0, bins + 1)
        self._inner = self._edges[1:-1].tolist()
        self._n = np.zeros(bins, dtype=np.int64)
        self._s = np.zeros((_Q, bins))
        self._c = np.zeros((_Q, bins))

    @property
    def bigger_is_better(self):
        return False

    # -- updates ----------------------------------------------------------------
    def _one(self, y_true, y_pred, w):
        y = self._label(y_true)
        s = self._score(y_pred)
        if not 0.0 <= s <= 1.0:
            fail("y_pred", y_pred, "probability must be in [0, 1]")
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
            w = check_weight(w)
        return y, s, w

    def _fold(self, k, x):
        """Add the column ``x`` (length ``_Q``) to bin ``k``'s compensated sums."""
        for q in range(_Q):
            s = self._s[q, k]
            v = x[q]
            t = s + v
            self._c[q, k] += (s - t) + v if abs(s) >= abs(v) else (v - t) + s
            self._s[q, k] = t

    def update(self, y_true, y_pred, w=1.0):
        """Add one event. Runtime complexity: `O(log(bins))`."""
        y, p, w = self._one(y_true, y_pred, w)
        k = bisect_left(self._inner, p)
        wy = w if y else 0.0
        self._fold(k, (w, w * p, wy, w * p * p, wy * p))
        self._n[k] += 1

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event added earlier; ``ValueError`` (no change) if its bin holds
        no event. Runtime complexity: `O(log(bins))`."""
        y, p, w = self._one(y_true, y_pred, w)
        k = bisect_left(self._inner, p)
        if not self._n[k]:
            raise ValueError(f"revert(y_true={y_true!r}, y_pred={y_pred!r}): no such "
                             "event was added")
        self._n[k] -= 1
        if not self._n[k]:
            self._s[:, k] = self._c[:, k] = 0.0
            return
        wy = w if y else 0.0
        self._fold(k, (-w, -w * p, -wy, -w * p * p, -wy * p))

    def _batch(self, y, s, w):
        """``(bin of each event, per-bin counts, per-bin sums and errors)``."""
        k = np.searchsorted(self._edges[1:-1], s, side="left")
        w = np.ones(len(s)) if w is None else w
        wy = np.where(y, w, 0.0)
        cols = (w, w * s, wy, w * s * s, wy * s)
        counts = np.bincount(k, minlength=self.bins)
        sums = np.zeros((_Q, self.bins))
        errs = np.zeros((_Q, self.bins))
        order = np.argsort(k, kind="stable")
        ks = k[order]
        starts = np.searchsorted(ks, np.arange(self.bins), side="left")
        ends = np.searchsorted(ks, np.arange(self.bins), side="right")
        for b in np.flatnonzero(counts):
            idx = order[starts[b]:ends[b]]
            for q in range(_Q):
                sums[q, b], errs[q, b] = sum2(cols[q][idx])
        return counts, sums, errs

    def update_trusted(self, y, s, w=None):
        """Add validated columns. Runtime complexity: `O(m)` numpy (plus `O(bins)`)."""
        if not len(s):
            return self
        counts, sums, errs = self._batch(y, s, w)
        for b in np.flatnonzero(counts):
            self._fold(b, sums[:, b])
            self._fold(b, errs[:, b])
        self._n += counts
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove validated columns added earlier; atomic (``ValidationError`` naming
        the first event of a bin that holds fewer events, no change)."""
        if not len(s):
            return self
        counts, sums, errs = self._batch(y, s, w)
        over = counts > self._n
        if over.any():
            b = int(np.argmax(over))
            k = np.searchsorted(self._edges[1:-1], s, side="left")
            i = int(np.flatnonzero(k == b)[self._n[b]])
            raise ValidationError.at(i, f"revert of (y_pred={float(s[i])!r}): no such event "
                                        "was added")
        self._n -= counts
        for b in np.flatnonzero(counts):
            if not self._n[b]:
                self._s[:, b] = self._c[:, b] = 0.0
            else:
                self._fold(b, -sums[:, b])
                self._fold(b, -errs[:, b])
        return self

    # -- values -----------------------------------------------------------------
    def _sums(self):
        """Per-bin sums (``_Q`` rows), compensated, and the mask of non-empty bins."""
        return self._s + self._c, self._n > 0

    def _parts(self):
        """``(W_k, f_k, o_k, W)`` over the bins with weight, or None without weight."""
        t, live = self._sums()
        wk = t[0]
        live = live & (wk > 0.0)
        total = float(wk[live].sum())
        if not total > 0.0:
            return None
        wk = wk[live]
        return wk, t[1][live] / wk, t[2][live] / wk, total, t[:, live]

    def decomposition(self):
        """``{"brier", "reliability", "resolution", "uncertainty", "wbv", "wbc"}``
        (NaN before any weight): ``brier = reliability - resolution + uncertainty +
        wbv - 2 wbc``. Runtime complexity: `O(bins)`."""
        parts = self._parts()
        if parts is None:
            return dict.fromkeys(("brier", "reliability", "resolution", "uncertainty",
                                  "wbv", "wbc"), _NAN)
        wk, f, o, total, t = parts
        rate = float(t[2].sum()) / total
        # sum w (p - y)^2 = sum w p^2 - 2 sum w p y + sum w y  (y^2 = y)
        brier = float((t[3] - 2.0 * t[4] + t[2]).sum()) / total
        rel = float(np.sum(wk * (f - o) ** 2)) / total
        res = float(np.sum(wk * (o - rate) ** 2)) / total
        # within-bin variance and covariance: sum w (p - f)^2, sum w (p - f)(y - o)
        wbv = float(np.sum(t[3] - wk * f * f)) / total
        wbc = float(np.sum(t[4] - wk * f * o)) / total
        return {"brier": max(brier, 0.0), "reliability": rel, "resolution": res,
                "uncertainty": rate * (1.0 - rate), "wbv": max(wbv, 0.0), "wbc": wbc}

    def __len__(self):
        return int(self._n.sum())

    # -- merge and state -----------------------------------------------------------
    def _merge(self, other):
        for b in np.flatnonzero(other._n):
            self._fold(b, other._s[:, b])
            self._fold(b, other._c[:, b])
        self._n += other._n

    def _subtract(self, other):
        over = other._n > self._n
        if over.any():
            b = int(np.argmax(over))
            raise ValueError(f"subtract: bin {b} holds {int(self._n[b])} events here but "
                             f"{int(other._n[b])} in the other {self._public_name}: they "
                             "were never merged")
        self._n -= other._n
        for b in np.flatnonzero(other._n):
            if not self._n[b]:
                self._s[:, b] = self._c[:, b] = 0.0
            else:
                self._fold(b, -other._s[:, b])
                self._fold(b, -other._c[:, b])

    def _get_data(self):
        return {"n": self._n.tolist(), "sums": self._s.tolist(), "errors": self._c.tolist()}

    def _set_data(self, data):
        try:
            n = np.asarray(data["n"], dtype=np.int64)
            s = np.asarray(data["sums"], dtype=np.float64)
            c = np.asarray(data["errors"], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a {self._public_name} state: {e}") from None
        shape = (_Q, self.bins)
        if n.shape != (self.bins,) or s.shape != shape or c.shape != shape or (n < 0).any() \
                or not (np.isfinite(s).all() and np.isfinite(c).all()):
            raise ValueError(f"not a {self._public_name} state of {self.bins} bins")
        self._n, self._s, self._c = n, s, c

    def _check(self):
        assert self._n.shape == (self.bins,) and (self._n >= 0).all()
        empty = self._n == 0
        assert (self._s[:, empty] == 0.0).all() and (self._c[:, empty] == 0.0).all()
        t = self._s + self._c
        assert (t[0] >= -1e-9 * max(1.0, float(t[0].sum()))).all()


class ExpectedCalibrationError(_Binned):
    """Expected calibration error ``sum_k (W_k / W) |o_k - f_k|`` over ``bins``
    equal-width bins of ``[0, 1]`` (scikit-learn's edges; see the module notes): the
    weighted mean gap between a bin's mean score ``f_k`` and its observed positive
    rate ``o_k``. NaN before any weight. Costs: see the module notes.

    >>> from streameval.metrics.calibration import ExpectedCalibrationError
    >>> m = ExpectedCalibrationError(bins=2)
    >>> round(m.update_many([1, 0, 1, 1], [0.9, 0.2, 0.8, 0.3]).get(), 12)  # |1-.85|/2 + |.5-.25|/2
    0.2
    """

    _public_name = "ExpectedCalibrationError"

    def get(self):
        parts = self._parts()
        if parts is None:
            return _NAN
        wk, f, o, total, _ = parts
        return float(np.sum(wk * np.abs(o - f))) / total


class BrierDecomposition(_Binned):
    """Murphy's (1973) decomposition of the Brier score over ``bins`` equal-width
    bins, exact with the within-bin terms of Stephenson et al. (2008): ``get()`` is
    the ``component`` named (``"reliability"``, the default: lower is better
    calibrated; ``"resolution"``; ``"uncertainty"``), :meth:`decomposition` all of
    them. NaN before any weight.

    >>> from streameval.metrics.calibration import BrierDecomposition
    >>> m = BrierDecomposition(bins=2).update_many([1, 0, 1, 1], [0.9, 0.2, 0.8, 0.3])
    >>> d = m.decomposition()
    >>> round(d["reliability"] - d["resolution"] + d["uncertainty"]
    ...       + d["wbv"] - 2 * d["wbc"], 12), round(d["brier"], 12)
    (0.145, 0.145)
    """

    _public_name = "BrierDecomposition"
    _components = ("reliability", "resolution", "uncertainty")

    def __init__(self, bins=10, component="reliability", strategy="uniform", pos_label=True,
                 neg_label=None):
        super().__init__(bins, strategy, pos_label, neg_label)
        if component not in self._components:
            raise ValidationError("component", component,
                                  f"must be one of {', '.join(self._components)}")
        self.component = component

    @property
    def bigger_is_better(self):
        return self.component == "resolution"

    def get(self):
        return self.decomposition()[self.component]


class BrierReliability(BrierDecomposition):
    """The reliability (calibration) term of :class:`BrierDecomposition`."""

    _public_name = "BrierReliability"

    def __init__(self, bins=10, strategy="uniform", pos_label=True, neg_label=None):
        super().__init__(bins, "reliability", strategy, pos_label, neg_label)


class BrierResolution(BrierDecomposition):
    """The resolution term of :class:`BrierDecomposition` (bigger is better)."""

    _public_name = "BrierResolution"

    def __init__(self, bins=10, strategy="uniform", pos_label=True, neg_label=None):
        super().__init__(bins, "resolution", strategy, pos_label, neg_label)


class BrierUncertainty(BrierDecomposition):
    """The uncertainty term ``o (1 - o)`` of :class:`BrierDecomposition`."""

    _public_name = "BrierUncertainty"

    def __init__(self, bins=10, strategy="uniform", pos_label=True, neg_label=None):
        super().__init__(bins, "uncertainty", strategy, pos_label, neg_label)


class ReliabilityCurve(_Binned):
    """The reliability curve over ``bins`` equal-width bins: ``get()`` returns
    ``(mean score, observed rate, weight)`` arrays over the non-empty bins, in bin
    order; the first two are ``sklearn.calibration.calibration_curve``'s
    ``(prob_pred, prob_true)`` (swapped to score first), weights included.

    >>> from streameval.metrics.calibration import ReliabilityCurve
    >>> f, o, w = ReliabilityCurve(bins=2).update_many([1, 0, 1, 1], [0.9, 0.2, 0.8, 0.3]).get()
    >>> f.tolist(), o.tolist(), w.tolist()
    ([0.25, 0.8500000000000001], [0.5, 1.0], [2.0, 2.0])
    """

    _public_name = "ReliabilityCurve"

    def get(self):
        parts = self._parts()
        if parts is None:
            e = np.zeros(0)
            return e, e.copy(), e.copy()
        wk, f, o, _, _ = parts
        return f, o, wk


# ------------------------------------------------------------------ isotonic map


def pav(y, w):
    """Pool-adjacent-violators: the non-decreasing fit minimising ``sum w (fit -
    y)^2`` of values ``y`` in their order with weights ``w > 0`` (numpy arrays).
    Runtime complexity: `O(n)` (one pass with a stack of blocks).

    >>> pav(np.array([1.0, 3.0, 2.0, 4.0]), np.ones(4)).tolist()
    [1.0, 2.5, 2.5, 4.0]
    """
    n = len(y)
    means = []
    weights = []
    sizes = []
    for v, wt in zip(y.tolist(), w.tolist()):
        m, ww, k = v, wt, 1
        while means and means[-1] >= m:
            pw = weights.pop()
            pm = means.pop()
            m = (pm * pw + m * ww) / (pw + ww)
            ww += pw
            k += sizes.pop()
        means.append(m)
        weights.append(ww)
        sizes.append(k)
    out = np.repeat(np.asarray(means, dtype=np.float64), np.asarray(sizes, dtype=np.int64))
    assert len(out) == n
    return out


class IsotonicCalibration:
    """A monotone (non-decreasing) map from scores to probabilities, learned from
    labelled events by pool-adjacent-violators: equal to
    ``sklearn.isotonic.IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1)``.

    :meth:`fit` groups the events by distinct score (weighted mean label), runs
    :func:`pav` over them and keeps the fitted value per distinct score;
    :meth:`transform` interpolates linearly between them and clips outside the fitted
    range. An unfitted map raises ``ValueError`` in :meth:`transform`.

    Which labels to learn from: the labelled events of a declared reference period
    (a baseline where the model is known to be good) for a map that should not move;
    a map refit on recent labels (:class:`CalibrationRefit`, a Monitor's
    ``[monitor.calibration]``) follows the model, and absorbs a concept shift once the
    labels show it.

    Runtime complexity: :meth:`fit` `O(n log(n))` (a sort, then `O(n)`);
    :meth:`transform` `O(m log(k))` for ``k`` fitted points.

    >>> from streameval.metrics.calibration import IsotonicCalibration
    >>> cal = IsotonicCalibration().fit([0, 1, 0, 1], [0.1, 0.2, 0.3, 0.9])
    >>> cal.transform([0.1, 0.25, 0.9, 2.0]).tolist()
    [0.0, 0.5, 1.0, 1.0]
    """

    _public_name = "IsotonicCalibration"
    _state_version = 1

    def __init__(self, pos_label=True, neg_label=None):
        self.pos_label = pos_label
        self.neg_label = neg_label
        self._pos_set, self._neg_set = label_sets(pos_label, neg_label)
        self.x = None  # fitted distinct scores, ascending
        self.y = None  # fitted probability at each
        self.n = 0  # events learned from

    @property
    def fitted(self):
        """Whether :meth:`fit` has run on at least one event of weight > 0."""
        return self.x is not None

    def fit(self, y_true, y_score, w=None):
        """Learn the map from labelled events (validated: labels, finite scores,
        weights >= 0; events of weight 0 are ignored). Returns ``self``."""
        n = check_same_length(y_true=y_true, y_score=y_score, w=w)
        y = as_binary_labels(y_true, self._pos_set, self._neg_set)
        s = as_float_array(y_score, name="y_score")
        weights = as_weight_array(w, n)
        weights = np.ones(n) if weights is None else weights
        keep = weights > 0
        if not keep.any():
            raise ValueError("fit: no event of weight > 0 to learn from")
        y, s, weights = y[keep].astype(np.float64), s[keep], weights[keep]
        keys, inv = np.unique(s, return_inverse=True)
        ww = np.bincount(inv, weights=weights, minlength=len(keys))
        wy = np.bincount(inv, weights=weights * y, minlength=len(keys))
        fit = np.clip(pav(wy / ww, ww), 0.0, 1.0)
        self.x, self.y, self.n = keys, fit, int(keep.sum())
        return self

    def transform(self, scores):
        """The probability of each score: linear interpolation between the fitted
        points, clipped to the first and last outside them."""
        if self.x is None:
            raise ValueError("IsotonicCalibration.transform: the map is not fitted "
                             "(call fit(y_true, y_score) first)")
        s = np.asarray(scores, dtype=np.float64)
        if len(self.x) == 1:
            return np.full(s.shape, float(self.y[0]))
        return np.interp(s, self.x, self.y)

    def to_state(self):
        """JSON-serialisable state (:meth:`from_state` rebuilds it; an estimate's state
        holds its map's)."""
        return {"type": self._public_name, "version": self._state_version,
                "params": {"pos_label": self.pos_label, "neg_label": self.neg_label},
                "data": {"x": None if self.x is None else self.x.tolist(),
                         "y": None if self.y is None else self.y.tolist(), "n": self.n}}

    @classmethod
    def from_state(cls, state):
        """Rebuild a map from :meth:`to_state` (checked: ``ValueError`` if bad)."""
        if not isinstance(state, dict) or state.get("type") != cls._public_name:
            raise ValueError(f"not an IsotonicCalibration state: {state!r:.200}")
        if state.get("version") != cls._state_version:
            raise ValueError(f"state of IsotonicCalibration has version "
                             f"{state.get('version')!r}; this streameval reads version "
                             f"{cls._state_version}")
        obj = cls(**state["params"])
        data = state["data"]
        try:
            x, y, n = data["x"], data["y"], int(data["n"])
            if x is not None:
                x = np.asarray(x, dtype=np.float64)
                y = np.asarray(y, dtype=np.float64)
                if (x.ndim != 1 or x.shape != y.shape or not len(x)
                        or not np.isfinite(x).all() or (np.diff(x) <= 0).any()
                        or (np.diff(y) < 0).any() or (y < 0).any() or (y > 1).any()):
                    raise ValueError("x must increase, y be non-decreasing in [0, 1]")
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not an IsotonicCalibration state: {e}") from None
        obj.x, obj.y, obj.n = x, y, n
        return obj

    def __eq__(self, other):
        return isinstance(other, IsotonicCalibration) and self.to_state() == other.to_state()

    __hash__ = None

    def __repr__(self):
        k = 0 if self.x is None else len(self.x)
        return f"IsotonicCalibration({k} points from {self.n} events)"



# ---------------------------------------------------------------- refit schedule

#: What a :class:`CalibrationRefit` reports in rows (:meth:`CalibrationRefit.get`).
REFIT_OUTPUTS = ("version", "fit_from", "fit_to")


def _check_count(name, value, lo, none_ok=False):
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValidationError(name, value, f"must be an int >= {lo}"
                              + (" or None" if none_ok else ""))
    return value


class CalibrationRefit(BinaryMetric):
    """An isotonic calibration map refit on a schedule of joined labels, for the
    label-free estimates of a Monitor.

    A labelled metric: it keeps the last ``window`` labelled events (score, label,
    weight) in a ring, and after every ``every`` labels it counted (the ``every``-th,
    the ``2 every``-th, ...) it fits an :class:`IsotonicCalibration` on the events the
    ring holds at that label: the labels ``fit_from`` (0-based, inclusive) to
    ``fit_to`` (exclusive) in the order they joined. Refits happen at label counts, never
    at a time of day, so a replay, a service restarted from a checkpoint, and any
    batching of the same events make the same refits.

    Why a recent window of the labels joined, and not a fixed reference period: the
    estimates are needed for the predictions whose labels have not come, and the best
    description of how the model's scores map to outcomes is the most recent one the
    labels give; a window bounds the memory (24 bytes per label held) and lets the map
    follow a slow change of calibration. The price: once labels reveal a concept shift,
    the next refit absorbs it, and the estimates of newer predictions assume the shifted
    calibration (which the labels then support). Labels that join early are a biased
    sample when fast labels differ (chargebacks come before the quiet "no fraud" of a
    legitimate payment): with a label delay, set ``every`` and ``window`` to span more
    than the delay, or give a declared reference period's map instead.

    In a Monitor (``[monitor.calibration]``) the new map is applied at the row after the
    refit (:meth:`apply`): every label-free estimate of the scope (``estimated_*``, their
    windows, the estimate checks) takes it: a cumulative estimate counts the predictions
    after that row with the new map (those before keep the map they were counted with), a
    window re-reads the predictions it holds with the new map. Rows carry the version
    applied (``get()``: 0 before the first refit, NaN before the first label) and, with
    ``output="fit_from"`` or ``"fit_to"``, the fit range of the map applied
    (:class:`CalibrationField`).

    Runtime complexity: ``update_many`` `O(m)` numpy, plus a fit `O(window log(window))`
    at each refit; ``get`` `O(1)`. Memory: the ring, ``24 window`` bytes, and the map
    (one point per distinct score held).

    >>> import numpy as np
    >>> from streameval.metrics.calibration import CalibrationRefit
    >>> r = CalibrationRefit(every=4, window=4)
    >>> r.update_many([0, 0, 1, 1, 0, 1], [0.1, 0.6, 0.4, 0.9, 0.2, 0.8]).versions
    [{'version': 1, 'fit_from': 0, 'fit_to': 4, 'points': 4}]
    >>> r.fitted.transform([0.1, 0.5, 0.9]).tolist()
    [0.0, 0.5, 1.0]

    Parameters
    ----------
    every
        Labels between two refits (the first after ``every`` labels).
    window
        Labels the fit uses, the last ones joined (None: every label so far; memory
        then grows with the labels).
    pos_label, neg_label
        As for every binary metric.
    """

    _public_name = "CalibrationRefit"
    needs_labels = True

    def __init__(self, every=10_000, window=50_000, pos_label=True, neg_label=None):
        BinaryMetric.__init__(self, pos_label, neg_label)
        self.every = _check_count("every", every, 1)
        self.window = _check_count("window", window, 1, none_ok=True)
        self._reset()

    def _reset(self):
        self.n = 0  # labels counted
        cap = self.window if self.window is not None else 1024
        self._rs = np.zeros(cap)
        self._ry = np.zeros(cap)
        self._rw = np.zeros(cap)
        self._held = 0  # events in the ring
        self._pos = 0  # next slot
        #: the refits made: ``{"version", "fit_from", "fit_to", "points"}``, oldest first
        self.versions = []
        #: the newest fitted map (None before the first refit)
        self.fitted = None
        #: the version applied to the estimates (0: none)
        self.applied = 0

    @property
    def bigger_is_better(self):
        return False

    score_bounds = None

    # -- the ring -------------------------------------------------------------
    def _push(self, s, y, w):
        m = len(s)
        if self.window is None:
            need = self._held + m
            if need > len(self._rs):
                cap = max(need, 2 * len(self._rs))
                for name in ("_rs", "_ry", "_rw"):
                    a = np.zeros(cap)
                    a[:self._held] = getattr(self, name)[:self._held]
                    setattr(self, name, a)
            self._rs[self._held:need] = s
            self._ry[self._held:need] = y
            self._rw[self._held:need] = w
            self._held = self._pos = need
            return
        size = self.window
        if m >= size:
            self._rs[:], self._ry[:], self._rw[:] = s[m - size:], y[m - size:], w[m - size:]
            self._pos, self._held = 0, size
            return
        p = self._pos
        first = min(m, size - p)
        for ring, col in ((self._rs, s), (self._ry, y), (self._rw, w)):
            ring[p:p + first] = col[:first]
            if first < m:
                ring[:m - first] = col[first:]
        self._pos = (p + m) % size
        self._held = min(size, self._held + m)

    def held(self):
        """The labelled events the ring holds, oldest first: ``(scores, labels as 0/1
        floats, weights)`` (copies)."""
        k = self._held
        if self.window is None or k < self.window:
            return self._rs[:k].copy(), self._ry[:k].copy(), self._rw[:k].copy()
        p = self._pos
        return tuple(np.concatenate((a[p:], a[:p])) for a in (self._rs, self._ry, self._rw))

    def _refit(self):
        s, y, w = self.held()
        keep = w > 0
        if not keep.any():  # (weights 0 only: nothing to learn, no new version)
            return
        cal = IsotonicCalibration(self.pos_label, self.neg_label)
        cal.fit(y[keep] != 0.0, s[keep], w[keep])
        self.fitted = cal
        self.versions.append({"version": len(self.versions) + 1,
                              "fit_from": self.n - self._held, "fit_to": self.n,
                              "points": len(cal.x)})

    # -- updates --------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0):
        """Add one labelled event; a refit when it is the ``every``-th since the last.
        Runtime complexity: `O(1)`, plus the refit."""
        y = self._label(y_true)
        s = self._score(y_pred)
        w = check_weight(w)
        return self.update_trusted(np.array([y]), np.array([s]), np.array([w]))

    def update_trusted(self, y, s, w=None):
        """Add validated columns: the ring takes them in runs that end at the refit
        points, each refit on the ring as it stands at its label (the same refits
        whatever the batching). Runtime complexity: `O(m)` numpy plus the refits."""
        self.check_columns(y, s, w)
        m = len(s)
        s = np.asarray(s, dtype=np.float64)
        y = np.asarray(y, dtype=bool).astype(np.float64)
        w = np.ones(m) if w is None else np.asarray(w, dtype=np.float64)
        i = 0
        while i < m:
            to_refit = self.every - self.n % self.every
            j = min(m, i + to_refit)
            self._push(s[i:j], y[i:j], w[i:j])
            self.n += j - i
            i = j
            if self.n % self.every == 0:
                self._refit()
        return self

    def check_columns(self, y, s, w=None):
        """Refuse (``ValidationError`` naming the first bad weight, nothing changed) the
        weights a refit's isotonic fit refuses, whether or not this batch refits: the
        same columns are refused at any point of the schedule."""
        if w is not None:
            as_weight_array(w, len(s))

    def revert(self, *args, **kwargs):
        raise NotImplementedError("a calibration refit schedule cannot revert a label")

    def revert_trusted(self, *args, **kwargs):
        raise NotImplementedError("a calibration refit schedule cannot revert a label")

    def merge(self, other):
        """Fold in a schedule that saw no labels (``ValueError`` if both did: refits
        depend on the order of the labels)."""
        self._check_same_kind(other, "merge", "into", "schedules")
        if other.n == 0:
            return self
        if self.n:
            raise ValueError("cannot merge two calibration refit schedules that both saw "
                             "labels")
        self._set_data(other._get_data())
        return self

    # -- values ---------------------------------------------------------------
    def get(self):
        """The version of the map applied to the estimates (0.0: none yet; NaN before
        the first label, like every metric before its first event)."""
        if not self.n and not self.applied:
            return _NAN
        return float(self.applied)

    def fit_range(self):
        """``(fit_from, fit_to)`` of the map applied: the labels it was fitted on, by
        their order of joining (0-based, end exclusive); ``(nan, nan)`` before one."""
        if not self.applied:
            return _NAN, _NAN
        v = self.versions[self.applied - 1]
        return float(v["fit_from"]), float(v["fit_to"])

    def __len__(self):
        return self.n

    def apply(self, metrics):
        """Give the newest map, when it is newer than the one applied, to the label-free
        estimates among ``metrics`` (a Monitor scope's: see :func:`recalibrate`), and set
        the :class:`CalibrationField` values among them. Returns whether a new map was
        applied. Runtime complexity: `O(metrics)`, plus each window's re-read of the
        predictions it holds when a map is new."""
        new = len(self.versions) > self.applied and self.fitted is not None
        if new:
            for m in metrics.values():
                recalibrate(m, self.fitted)
            self.applied = len(self.versions)
        lo, hi = self.fit_range()
        for m in metrics.values():
            if isinstance(m, CalibrationField):
                m.value = {"version": float(self.applied), "fit_from": lo, "fit_to": hi}[m.output]
        return new

    # -- state ----------------------------------------------------------------
    def _params(self):
        return {"every": self.every, "window": self.window, "pos_label": self.pos_label,
                "neg_label": self.neg_label}

    def _get_data(self):
        s, y, w = self.held()
        return {"n": self.n, "held": [s.tolist(), y.tolist(), w.tolist()],
                "versions": [dict(v) for v in self.versions],
                "fitted": None if self.fitted is None else self.fitted.to_state(),
                "applied": self.applied}

    def _set_data(self, data):
        try:
            n = int(data["n"])
            s, y, w = (np.asarray(c, dtype=np.float64) for c in data["held"])
            versions = [{"version": int(v["version"]), "fit_from": int(v["fit_from"]),
                         "fit_to": int(v["fit_to"]), "points": int(v["points"])}
                        for v in data["versions"]]
            fitted = (None if data["fitted"] is None
                      else IsotonicCalibration.from_state(data["fitted"]))
            applied = int(data["applied"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a CalibrationRefit state: {e}") from None
        cap = self.window if self.window is not None else max(len(s), 1)
        if (s.ndim != 1 or s.shape != y.shape or s.shape != w.shape or len(s) > cap
                or len(s) > n or not np.isfinite(s).all() or not np.isin(y, (0.0, 1.0)).all()
                or not (np.isfinite(w).all() and (w >= 0).all())
                or not 0 <= applied <= len(versions) or (versions and fitted is None)
                or any(v["version"] != i + 1 for i, v in enumerate(versions))):
            raise ValueError("not a CalibrationRefit state: the ring, versions or applied "
                             "version are inconsistent")
        self._reset()
        self.n = n - len(s)
        if len(s):
            self._push(s, y, w)
        self.n = n
        self.versions, self.fitted, self.applied = versions, fitted, applied

    def _check(self):
        assert 0 <= self._held <= self.n
        assert 0 <= self.applied <= len(self.versions)
        assert len(self.versions) <= self.n // self.every


def recalibrate(obj, calibration):
    """Give ``calibration`` to a Monitor's object if it is a label-free estimate (it
    declares ``recalibrates``), or a window over one, or an estimate check; anything else
    is left alone. A metric that never reverts (cumulative) counts the predictions that
    follow with the new map (:meth:`~streameval.metrics.estimated.LabelFree.set_calibration`);
    a window (it declares ``replace_metric``) gets a new metric with the new map, fed the
    events it holds, so that it reverts each event with the map it was counted with. A
    read-only view (it declares ``owner``) follows its owner. Returns whether ``obj``
    took the map.

    Runtime complexity: `O(1)`; a window's: one ``update_many`` of the events it holds.
    """
    if getattr(obj, "owner", None) is not None:  # (a shared view reads its owner)
        return False
    inner = getattr(obj, "metric", None)
    if inner is not None and inner is not obj:
        if not getattr(inner, "recalibrates", False):
            return False
        replace = getattr(obj, "replace_metric", None)
        if replace is None:  # (a tumbling window: it keeps the map it was built with)
            return False
        replace(inner.clone({"calibration": calibration}))
        return True
    if getattr(obj, "recalibrates", False):
        obj.set_calibration(calibration)
        return True
    return False


def apply_refits(metrics):
    """At a Monitor scope's row: each :class:`CalibrationRefit` among ``metrics`` applies
    its newest map to the others (:meth:`CalibrationRefit.apply`). Returns whether a new
    map was applied. Runtime complexity: `O(metrics)`."""
    new = False
    for m in metrics.values():
        if type(m) is CalibrationRefit:
            new = m.apply(metrics) or new
    return new


class CalibrationField(BinaryMetric):
    """What a Monitor's :class:`CalibrationRefit` applied, as a row value: ``output``
    ``"version"``, ``"fit_from"`` or ``"fit_to"`` (see :meth:`CalibrationRefit.fit_range`).
    Passive: it counts nothing (its events are ignored); the schedule of its scope sets
    its value at each row. NaN before any map is applied. `O(1)`."""

    _public_name = "CalibrationField"
    needs_labels = True

    def __init__(self, output="fit_to", pos_label=True, neg_label=None):
        BinaryMetric.__init__(self, pos_label, neg_label)
        if output not in REFIT_OUTPUTS:
            raise ValidationError("output", output, f"must be one of {REFIT_OUTPUTS}")
        self.output = output
        self.value = _NAN

    def update(self, y_true, y_pred, w=1.0):
        return self

    def update_trusted(self, y, s, w=None):
        return self

    def revert(self, *args, **kwargs):
        raise NotImplementedError("a calibration field counts no event")

    revert_trusted = revert

    def get(self):
        return self.value

    def merge(self, other):
        self._check_same_kind(other, "merge", "into")
        return self

    def _get_data(self):
        return {"value": None if self.value != self.value else self.value}

    def _set_data(self, data):
        v = data.get("value") if isinstance(data, dict) else _NAN
        self.value = _NAN if v is None else float(v)
