"""Regression metrics: weighted means of a per-event loss (MAE, MSE, RMSE, RMSLE, MAPE).

Each metric keeps ``sum(w * loss)``, ``sum(w)`` and the event count. The loss sum is
compensated (Neumaier), so that ``revert`` undoes ``update`` to within one rounding
of the current sum even after large losses have come and gone (a sliding window over
heavy-tailed errors would otherwise keep their rounding residue); ``update_many``
sums a batch with the exact error of every addition, for the same reason. The weight
sum is plain (exact for integer weights; after reverts its relative error is about
machine epsilon times the largest total weight seen over the current one), and an
emptied metric, or one left holding only events of weight 0, is reset to exact zeros. With weight 0 in total the mean is undefined:
``get()`` returns NaN. With ``sample_weight`` the values
are scikit-learn's (``mean_absolute_error``, ``mean_squared_error``, ...).

:class:`_WeightedMean` is shared with :mod:`streameval.metrics.probabilistic`.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from .base import Metric, RegressionMetric, fail, check_real, check_weight, overdrawn

__all__ = ["MAE", "MSE", "RMSE", "RMSLE", "MAPE"]

_NAN = math.nan
_MAXF = sys.float_info.max
_EPS = sys.float_info.epsilon
_log1p = math.log1p


class _WeightedMean(Metric):
    """The weighted mean of a per-event loss, ``sum(w * loss) / sum(w)``.

    Subclasses define ``_loss(y_true, y_pred)`` (validate one event, return its loss;
    a NaN or infinite loss is caught afterwards and explained by ``_explain``) and
    ``_losses(y_true, y_pred)`` (validate a batch, return the losses as an array and
    the mask of the events to count, or None for all).
    """

    def _reset(self):
        self._n = 0  # events counted
        self._s = 0.0  # sum of w * loss ...
        self._c = 0.0  # ... and its Neumaier compensation
        self._w = 0.0  # sum of w
        self._z = 0  # events of weight 0 among the counted: when only they are left,
        # the sums are exactly 0 (not the rounding residue of the weights taken out)

    def get(self):
        """The weighted mean loss; NaN before any weight.

        Runtime complexity: `O(1)`.
        """
        w = self._w
        if not self._n or w <= 0.0:
            return _NAN
        return (self._s + self._c) / w

    # -- per event --------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0):
        """Add one event with weight ``w``.

        Runtime complexity: `O(1)`.
        """
        x = self._loss(y_true, y_pred)
        if type(w) is not float or not 0.0 <= w <= _MAXF:
            w = check_weight(w)
        x *= w
        if not x <= _MAXF:
            self._explain(y_true, y_pred, w)
        s = self._s
        t = s + x
        self._c += (s - t) + x if s >= x else (x - t) + s
        self._s = t
        self._w += w
        self._n += 1
        if not w:
            self._z += 1

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event added earlier (exact inverse of :meth:`update`).

        Runtime complexity: `O(1)`.
        """
        x = self._loss(y_true, y_pred)
        if type(w) is not float or not 0.0 <= w <= _MAXF:
            w = check_weight(w)
        x *= w
        if not x <= _MAXF:
            self._explain(y_true, y_pred, w)
        if not self._remove(x, w):
            raise ValueError(
                f"revert of (y_true={y_true!r}, y_pred={y_pred!r}, w={w!r}): no such event "
                f"was added ({self._n} events of total weight {self._w!r})"
            )

    def _remove(self, x, w):
        """Take out a weighted loss ``x`` of weight ``w``; False (and no change) if there
        is no such event to take out."""
        n = self._n - 1
        if n < 0 or overdrawn(self._w - w, w, self._w):
            return False
        self._n = n
        z = self._z
        if not w and z:
            self._z = z = z - 1
        if n <= z:  # empty, or only weight 0 left: exactly zero, no rounding residue
            self._s = self._c = self._w = 0.0
            self._z = n
            return True
        s = self._s
        t = s - x
        self._c += (s - t) - x if s >= x else (-x - t) + s
        self._s = t
        self._w -= w
        return True

    def _explain(self, y_true, y_pred, w):
        check_weight(w)
        check_real(y_true, "y_true", "target")
        check_real(y_pred, "y_pred", "prediction")
        raise ValueError(
            f"(y_true={y_true!r}, y_pred={y_pred!r}, w={w!r}): the weighted loss overflows"
        )

    # -- batches ----------------------------------------------------------------
    def update_many(self, y_true, y_pred, w=None):
        """Add a batch; same result as a loop of :meth:`update` (validated first).

        Runtime complexity: `O(n)`, vectorised.
        """
        a, b, weights = self._batch(y_true, y_pred, w)
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is checked below
            losses = self._losses(a, b)
            wx = losses if weights is None else losses * weights
        keep = self._keep(a)
        if keep is not None:
            wx = np.where(keep, wx, 0.0)
        bad = ~np.isfinite(wx)
        if bad.any():
            i = int(np.argmax(bad))
            fail("y_pred", b[i].item(), "the weighted loss overflows", i)
        total, error = _sum2(wx)
        if not math.isfinite(total):
            raise ValueError("the sum of the batch's weighted losses overflows")
        n = len(wx) if keep is None else int(np.count_nonzero(keep))
        if weights is None:
            weight = float(n)
        else:
            weight = float(weights.sum() if keep is None else weights[keep].sum())
        self._fold(n, total, weight, error)
        self._z += _zeros(weights, keep)
        if keep is not None:
            self._skip(len(wx) - n)
        return self

    def revert_many(self, y_true, y_pred, w=None):
        """Remove a batch added earlier; same result as a loop of :meth:`revert`.

        The batch's weighted losses are summed as in :meth:`update_many` (with the
        exact error of every addition) and taken out of the compensated sum in one
        step; emptied, the metric is reset to exact zeros. Validated before any
        change: a bad event, or one that was never added (more events, or more
        weight, than the metric holds), raises ``ValueError`` naming its index.

        Runtime complexity: `O(n)`, vectorised.
        """
        a, b, weights = self._batch(y_true, y_pred, w)
        with np.errstate(over="ignore", invalid="ignore"):
            losses = self._losses(a, b)
            wx = losses if weights is None else losses * weights
        keep = self._keep(a)
        if keep is not None:
            wx = np.where(keep, wx, 0.0)
        bad = ~np.isfinite(wx)
        if bad.any():
            i = int(np.argmax(bad))
            fail("y_pred", b[i].item(), "the weighted loss overflows", i)
        m = len(wx)
        n = m if keep is None else int(np.count_nonzero(keep))
        if weights is None:
            weight = float(n)
        else:
            weight = float(weights.sum() if keep is None else weights[keep].sum())
        if keep is not None:
            self._check_unskip(m - n, keep)
        if n > self._n or (n and overdrawn(self._w - weight, weight, self._w)):
            self._not_added(a, b, weights, keep)
        total, error = _sum2(wx)
        if n == self._n:  # emptied: exactly zero, no rounding residue
            self._s = self._c = self._w = 0.0
            self._n = self._z = 0
        else:
            self._fold(-n, -total, -weight, -error)
            self._z = max(self._z - _zeros(weights, keep), 0)
            if self._n <= self._z:  # only weight 0 left: exactly zero
                self._s = self._c = self._w = 0.0
                self._z = self._n
        if keep is not None:
            self._skip(n - m)
        return self

    def _not_added(self, a, b, weights, keep):
        """Raise for the first event of a batch that a loop of ``revert`` would refuse."""
        idx = np.arange(len(a)) if keep is None else np.flatnonzero(keep)
        ws = np.ones(len(idx)) if weights is None else weights[idx]
        left = self._w - np.cumsum(ws)
        bad = (np.arange(1, len(idx) + 1) > self._n) | overdrawn(left, ws, self._w)
        i = int(idx[int(np.argmax(bad))])
        raise ValueError(
            f"event {i}: revert of (y_true={_item(a[i])!r}, y_pred={_item(b[i])!r}, "
            f"w={1.0 if weights is None else float(weights[i])!r}): no such event was added "
            f"({self._n} events of total weight {self._w!r})"
        )

    def _check_unskip(self, k, keep):
        """Hook of metrics that skip events (MAPE): refuse uncounting more than counted."""

    @staticmethod
    def _keep(a):
        """Mask of the batch's events to count (None: all)."""
        return None

    def _fold(self, n, total, weight, compensation=0.0):
        for x in (total, compensation):
            s = self._s
            t = s + x
            self._c += (s - t) + x if abs(s) >= abs(x) else (x - t) + s
            self._s = t
        self._w += weight
        self._n += n

    # -- state ------------------------------------------------------------------
    def _merge(self, other):
        self._fold(other._n, other._s, other._w, other._c)
        self._z += other._z

    def _get_data(self):
        data = {"n": self._n, "sum": [self._s, self._c], "weight": self._w}
        if self._z:  # only where events of weight 0 are held (older states lack it)
            data["zero"] = self._z
        return data

    def _set_data(self, data):
        try:
            n = int(data["n"])
            s, c = (float(v) for v in data["sum"])
            w = float(data["weight"])
            z = int(data.get("zero", 0))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a {self._public_name} state: {data!r:.200} ({e})") from None
        if n < 0 or not all(math.isfinite(v) for v in (s, c, w)) or w < 0 or not 0 <= z <= n:
            raise ValueError(f"not a {self._public_name} state: {data!r:.200}")
        self._n, self._s, self._c, self._w, self._z = n, s, c, w, z

    def _check(self):
        assert type(self._n) is int and self._n >= 0, self._n
        for v in (self._s, self._c, self._w):
            assert type(v) is float and math.isfinite(v), v
        assert type(self._z) is int and 0 <= self._z <= self._n, (self._z, self._n)
        if self._n == self._z:
            assert self._s == self._c == self._w == 0.0, (self._s, self._c, self._w)
        assert not overdrawn(self._w, 0.0, max(1.0, abs(self._w))), self._w
        total = self._s + self._c
        assert total >= -1e-9 * max(1.0, abs(self._s)), total

    def __repr__(self):
        return f"{self._public_name}: {self.get():.6f}"

    __str__ = __repr__


#: :func:`_sum2` works on chunks of this many elements, so that its temporaries stay
#: in cache: 1e6 elements in 3 ms, against 11 ms for 4096 or the whole array at once
SUM_CHUNK = 65536


def _sum2(x):
    """``(s, e)``: the float sum of ``x`` and the sum of its rounding errors.

    Pairwise summation that keeps the exact error of every addition (Knuth's TwoSum,
    vectorised), so ``s + e`` is the exact sum up to ``O(eps^2 sum|x| log(n))``: a
    batch's events can later be reverted one by one (sliding windows) without leaving
    the rounding residue of a plain ``np.sum``. About 15x the cost of ``np.sum``.

    >>> _sum2(np.array([1e16, 1.0, -1e16]))
    (0.0, 1.0)
    """
    s = e = 0.0
    for i in range(0, len(x), SUM_CHUNK):
        cs, ce = _pairwise2(x[i:i + SUM_CHUNK])
        e += ce
        t = s + cs
        e += (s - t) + cs if abs(s) >= abs(cs) else (cs - t) + s
        s = t
    return s, e


def _pairwise2(x):
    e = 0.0
    rest = []
    while len(x) > 1:
        if len(x) & 1:
            rest.append(float(x[-1]))
            x = x[:-1]
        a = x[0::2]
        b = x[1::2]
        t = a + b
        bb = t - a
        e += float(((a - (t - bb)) + (b - bb)).sum())
        x = t
    if len(x):
        rest.append(float(x[0]))
    s = 0.0
    for v in rest:  # Neumaier, for the few leftovers
        t = s + v
        e += (s - t) + v if abs(s) >= abs(v) else (v - t) + s
        s = t
    return s, e


def _zeros(weights, keep):
    """How many of a batch's counted events have weight 0."""
    if weights is None:
        return 0
    zero = weights == 0.0
    if keep is not None:
        zero &= keep
    return int(np.count_nonzero(zero))


def _item(v):
    return v.item() if isinstance(v, np.generic) else v


def _reals(y_true, y_pred):
    """Both values as floats, validated (the per-event slow path)."""
    return check_real(y_true, "y_true", "target"), check_real(y_pred, "y_pred", "prediction")


class _RegressionMean(_WeightedMean, RegressionMetric):
    def __init__(self):
        self._reset()


class MAE(_RegressionMean):
    """Mean absolute error, weighted: ``sum(w |y - p|) / sum(w)``.

    Equal to ``sklearn.metrics.mean_absolute_error`` (with ``sample_weight``).

    Runtime complexity: `update` `O(1)`; `get` `O(1)`.

    >>> from streameval import MAE
    >>> m = MAE()
    >>> for y, p in zip([3, -0.5, 2, 7], [2.5, 0.0, 2, 8]):
    ...     m.update(y, p)
    >>> m.get()
    0.5
    """

    def _loss(self, y_true, y_pred):
        if type(y_true) is not float or type(y_pred) is not float:
            y_true, y_pred = _reals(y_true, y_pred)
        return abs(y_pred - y_true)

    def update(self, y_true, y_pred, w=1.0):
        """Add one event with weight ``w``.

        Runtime complexity: `O(1)`.
        """
        # _WeightedMean.update inlined for floats (the common case): no _loss call
        # an infinite weight makes x infinite or NaN: _explain names it
        if type(y_true) is float and type(y_pred) is float and type(w) is float and w >= 0.0:
            x = w * abs(y_pred - y_true)
            if not x <= _MAXF:  # NaN or infinite input, or overflow
                self._explain(y_true, y_pred, w)
            s = self._s
            t = s + x
            self._c += (s - t) + x if s >= x else (x - t) + s
            self._s = t
            self._w += w
            self._n += 1
            if not w:
                self._z += 1
        else:
            _WeightedMean.update(self, y_true, y_pred, w)

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event added earlier (exact inverse of :meth:`update`).

        Runtime complexity: `O(1)`.
        """
        if type(y_true) is float and type(y_pred) is float and type(w) is float and w >= 0.0:
            x = w * abs(y_pred - y_true)
            if x <= _MAXF and self._remove(x, w):
                return
        _WeightedMean.revert(self, y_true, y_pred, w)  # slow path, or the error

    @staticmethod
    def _losses(yt, yp):
        return np.abs(yp - yt)


class MSE(_RegressionMean):
    """Mean squared error, weighted: ``sum(w (y - p)^2) / sum(w)``.

    Equal to ``sklearn.metrics.mean_squared_error`` (with ``sample_weight``).

    Runtime complexity: `update` `O(1)`; `get` `O(1)`.

    >>> from streameval import MSE
    >>> m = MSE()
    >>> for y, p in zip([3, -0.5, 2, 7], [2.5, 0.0, 2, 8]):
    ...     m.update(y, p)
    >>> m.get()
    0.375
    """

    def _loss(self, y_true, y_pred):
        if type(y_true) is not float or type(y_pred) is not float:
            y_true, y_pred = _reals(y_true, y_pred)
        d = y_pred - y_true
        return d * d

    @staticmethod
    def _losses(yt, yp):
        d = yp - yt
        return d * d

    def update(self, y_true, y_pred, w=1.0):
        """Add one event with weight ``w``.

        Runtime complexity: `O(1)`.
        """
        # _WeightedMean.update inlined for floats (the common case): no _loss call
        # an infinite weight makes x infinite or NaN: _explain names it
        if type(y_true) is float and type(y_pred) is float and type(w) is float and w >= 0.0:
            x = y_pred - y_true
            x = x * x * w  # bit for bit what revert subtracts: (d * d) * w
            if not x <= _MAXF:  # NaN or infinite input, or overflow
                self._explain(y_true, y_pred, w)
            s = self._s
            t = s + x
            self._c += (s - t) + x if s >= x else (x - t) + s
            self._s = t
            self._w += w
            self._n += 1
            if not w:
                self._z += 1
        else:
            _WeightedMean.update(self, y_true, y_pred, w)

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event added earlier (exact inverse of :meth:`update`).

        Runtime complexity: `O(1)`.
        """
        if type(y_true) is float and type(y_pred) is float and type(w) is float and w >= 0.0:
            x = y_pred - y_true
            x = x * x * w
            if x <= _MAXF and self._remove(x, w):
                return
        _WeightedMean.revert(self, y_true, y_pred, w)  # slow path, or the error


class RMSE(MSE):
    """Root mean squared error, weighted: ``sqrt(sum(w (y - p)^2) / sum(w))``.

    Equal to ``sklearn.metrics.root_mean_squared_error`` (with ``sample_weight``).

    Runtime complexity: `update` `O(1)`; `get` `O(1)`.

    >>> from streameval import RMSE
    >>> m = RMSE()
    >>> for y, p in zip([3, -0.5, 2, 7], [2.5, 0.0, 2, 8]):
    ...     m.update(y, p)
    >>> round(m.get(), 6)
    0.612372
    """

    def get(self):
        """The root of the weighted mean squared error; NaN before any weight.

        Runtime complexity: `O(1)`.
        """
        mse = super().get()
        return math.sqrt(max(mse, 0.0)) if mse == mse else _NAN


class RMSLE(_RegressionMean):
    """Root mean squared logarithmic error: ``sqrt(sum(w (ln(1+y) - ln(1+p))^2) / sum(w))``.

    Targets and predictions must be greater than -1 (a ``ValueError`` names the first
    that is not, as ``sklearn.metrics.root_mean_squared_log_error`` refuses them).
    Equal to it (with ``sample_weight``).

    Runtime complexity: `update` `O(1)`; `get` `O(1)`.

    >>> from streameval import RMSLE
    >>> m = RMSLE()
    >>> for y, p in zip([3, 5, 2.5, 7], [2.5, 5, 4, 8]):
    ...     m.update(y, p)
    >>> round(m.get(), 6)
    0.199324
    """

    def _loss(self, y_true, y_pred):
        if type(y_true) is not float or type(y_pred) is not float:
            y_true, y_pred = _reals(y_true, y_pred)
        if not y_true > -1.0:
            fail("y_true", y_true, "RMSLE needs values greater than -1")
        if not y_pred > -1.0:
            fail("y_pred", y_pred, "RMSLE needs values greater than -1")
        d = _log1p(y_pred) - _log1p(y_true)
        return d * d

    @staticmethod
    def _losses(yt, yp):
        for name, a in (("y_true", yt), ("y_pred", yp)):
            bad = ~(a > -1.0)
            if bad.any():
                i = int(np.argmax(bad))
                fail(name, float(a[i]), "RMSLE needs values greater than -1", i)
        d = np.log1p(yp) - np.log1p(yt)
        return d * d

    def get(self):
        """The root of the weighted mean squared log error; NaN before any weight.

        Runtime complexity: `O(1)`.
        """
        msle = super().get()
        return math.sqrt(max(msle, 0.0)) if msle == msle else _NAN


class MAPE(_RegressionMean):
    """Mean absolute percentage error, weighted: ``sum(w |y - p| / |y|) / sum(w)``.

    Undefined where ``y == 0``: those events are skipped and counted in
    :attr:`skipped` (``revert`` of such an event uncounts it). Otherwise equal to
    ``sklearn.metrics.mean_absolute_percentage_error`` (which divides by machine
    epsilon there instead) on the events with ``y != 0``. A fraction, not a percentage.

    Runtime complexity: `update` `O(1)`; `get` `O(1)`.

    >>> from streameval import MAPE
    >>> m = MAPE()
    >>> for y, p in zip([1.0, 0.0, 2.4, 7.0], [1.2, 0.1, 2.4, 8.0]):
    ...     m.update(y, p)
    >>> round(m.get(), 6), m.skipped
    (0.114286, 1)
    """

    def __init__(self):
        super().__init__()
        self.skipped = 0

    def _loss(self, y_true, y_pred):
        if type(y_true) is not float or type(y_pred) is not float:
            y_true, y_pred = _reals(y_true, y_pred)
        return abs(y_pred - y_true) / max(abs(y_true), _EPS)

    @staticmethod
    def _losses(yt, yp):
        return np.abs(yp - yt) / np.maximum(np.abs(yt), _EPS)

    @staticmethod
    def _keep(yt):
        keep = yt != 0.0
        return None if keep.all() else keep

    def _skip(self, k):
        self.skipped += k

    def _check_unskip(self, k, keep):
        if k > self.skipped:
            i = int(np.flatnonzero(~keep)[self.skipped])
            raise ValueError(
                f"event {i}: revert of an event with y_true == 0: only {self.skipped} "
                "such events were added"
            )

    def update(self, y_true, y_pred, w=1.0):
        """Add one event with weight ``w``; one with ``y_true == 0`` is only counted
        in :attr:`skipped`.

        Runtime complexity: `O(1)`.
        """
        if y_true == 0 and not isinstance(y_true, str):
            _reals(y_true, y_pred)
            check_weight(w)
            self.skipped += 1
        else:
            super().update(y_true, y_pred, w)

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event added earlier (exact inverse of :meth:`update`).

        Runtime complexity: `O(1)`.
        """
        if y_true == 0 and not isinstance(y_true, str):
            _reals(y_true, y_pred)
            check_weight(w)
            if not self.skipped:
                raise ValueError(
                    f"revert of (y_true={y_true!r}, y_pred={y_pred!r}): no skipped event "
                    "(y_true == 0) was added"
                )
            self.skipped -= 1
        else:
            super().revert(y_true, y_pred, w)

    def _merge(self, other):
        super()._merge(other)
        self.skipped += other.skipped

    def _get_data(self):
        data = super()._get_data()
        data["skipped"] = self.skipped
        return data

    def _set_data(self, data):
        super()._set_data(data)
        try:
            skipped = int(data["skipped"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a MAPE state: {data!r:.200} ({e})") from None
        if skipped < 0:
            raise ValueError(f"not a MAPE state: {data!r:.200}")
        self.skipped = skipped

    def _check(self):
        super()._check()
        assert type(self.skipped) is int and self.skipped >= 0, self.skipped
