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

The weighted mean itself is :class:`streameval.metrics.common.WeightedMean`, shared
with :mod:`streameval.metrics.probabilistic`. A batch is checked by ``validate``
(targets and predictions finite, RMSLE's ``> -1``, no overflow of the weighted
losses) and added or removed by ``update_trusted`` / ``revert_trusted``, vectorised.

It may import numpy, :mod:`streameval.validation` and the metrics' ``base`` and
``common`` modules.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from streameval.validation import MAX_WEIGHT, ValidationError, check_real, check_weight, fail

from .base import RegressionMetric
from .common import WeightedMean

__all__ = ["MAE", "MSE", "RMSE", "RMSLE", "MAPE"]

_NAN = math.nan
_MAXF = sys.float_info.max
_EPS = sys.float_info.epsilon
_log1p = math.log1p


def _reals(y_true, y_pred):
    """Both values as floats, validated (the per-event slow path)."""
    return check_real(y_true, "y_true", "target"), check_real(y_pred, "y_pred", "prediction")


class _RegressionMean(WeightedMean, RegressionMetric):
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
        # WeightedMean.update inlined for floats (the common case): no _loss call
        # an infinite weight makes x infinite or NaN: _explain names it
        if type(y_true) is float and type(y_pred) is float and type(w) is float and w <= MAX_WEIGHT and w >= 0.0:
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
            WeightedMean.update(self, y_true, y_pred, w)

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event added earlier (exact inverse of :meth:`update`).

        Runtime complexity: `O(1)`.
        """
        if type(y_true) is float and type(y_pred) is float and type(w) is float and w <= MAX_WEIGHT and w >= 0.0:
            x = w * abs(y_pred - y_true)
            if x <= _MAXF and self._remove(x, w):
                return
        WeightedMean.revert(self, y_true, y_pred, w)  # slow path, or the error

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
        # WeightedMean.update inlined for floats (the common case): no _loss call
        # an infinite weight makes x infinite or NaN: _explain names it
        if type(y_true) is float and type(y_pred) is float and type(w) is float and w <= MAX_WEIGHT and w >= 0.0:
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
            WeightedMean.update(self, y_true, y_pred, w)

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event added earlier (exact inverse of :meth:`update`).

        Runtime complexity: `O(1)`.
        """
        if type(y_true) is float and type(y_pred) is float and type(w) is float and w <= MAX_WEIGHT and w >= 0.0:
            x = y_pred - y_true
            x = x * x * w
            if x <= _MAXF and self._remove(x, w):
                return
        WeightedMean.revert(self, y_true, y_pred, w)  # slow path, or the error


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

    def _check_columns(self, yt, yp, weights):
        for name, a in (("y_true", yt), ("y_pred", yp)):
            bad = ~(a > -1.0)
            if bad.any():
                i = int(np.argmax(bad))
                fail(name, float(a[i]), "RMSLE needs values greater than -1", i)
        super()._check_columns(yt, yp, weights)

    @staticmethod
    def _losses(yt, yp):
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
            raise ValidationError.at(
                i, f"revert of an event with y_true == 0: only {self.skipped} "
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

    def _check_unmerge(self, other, name):
        if other.skipped > self.skipped:
            raise ValueError(
                f"subtract: {self.skipped} skipped events (y_true == 0) here but "
                f"{other.skipped} in {name}: they were never merged")

    def _subtract(self, other):
        super()._subtract(other)  # (checks the skipped events too, before any change)
        self.skipped -= other.skipped

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
