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
(:mod:`streameval.metrics.estimated`).

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
    (a baseline where the model is known to be good), not the labels joined so far:
    labels that join early are a biased sample (fast labels are often the
    positives, e.g. chargebacks), and a map refit on recent labels absorbs the very
    concept shift the estimates are there to show. Refit by fitting a new map on a new
    reference period and building new estimate metrics with it (an estimate's map is
    fixed for its life, so that its windows revert exactly).

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

