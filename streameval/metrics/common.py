"""Helpers shared by the metric modules (public, so that no module imports another's
private names).

What it holds:

* :func:`factorize`: the classes and codes of a batch of class labels (the multiclass
  confusion matrix and the multiclass probabilistic metrics group batches with it),
  with :func:`as_class` and :func:`no_binary_params`;
* :class:`WeightedMean`: the weighted mean of a per-event loss, with compensated sums
  and an exact ``revert`` (the regression and probabilistic metrics), and its batch
  summation :func:`sum2`.

It may import numpy, :mod:`streameval.validation` and :mod:`streameval.metrics.base`.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from streameval.validation import (
    MAX_WEIGHT, ValidationError, check_real, check_weight, fail, overdrawn,
)

from .base import Metric, MultiClassMetric, batch_memo, check_unmerge_totals

__all__ = [
    "DENSE_LABEL_RANGE",
    "factorize",
    "as_class",
    "no_binary_params",
    "BINARY_ONLY",
    "WeightedMean",
    "SUM_CHUNK",
    "sum2",
]

_NAN = math.nan
_MAXF = sys.float_info.max

#: the parameters that only binary metrics take
BINARY_ONLY = ("threshold", "pos_label", "neg_label")


def no_binary_params(name, threshold, pos_label, neg_label):
    """Refuse binary-only parameters given to the multiclass ``name``."""
    for pname, value in zip(BINARY_ONLY, (threshold, pos_label, neg_label)):
        if value is not None:
            raise ValidationError(pname, value, f"applies to a binary {name} only "
                                  "(this one is multiclass)")


# ------------------------------------------------------------------- class labels


#: a batch of integer labels spanning at most this many values (or the batch's length,
#: if larger) is grouped with ``np.bincount`` (linear time) rather than by sorting
DENSE_LABEL_RANGE = 4096


def as_class(y, name):
    """A valid class label, numpy scalars as Python ones (as a batch's, and for JSON)."""
    MultiClassMetric._class(y, name)
    return y.item() if isinstance(y, np.generic) else y


def factorize(values, name):
    """``(classes, codes)`` of a batch of class labels; ValueError naming a bad one.

    ``classes[codes[i]] == values[i]``. Integer and boolean arrays over a dense range
    are grouped by ``np.bincount``; other numeric and string arrays by binary search
    among the classes of a sample (no full sort); anything else (mixed types, objects)
    element by element.
    """
    arr = values if isinstance(values, np.ndarray) else None
    if arr is None:
        try:
            arr = np.asarray(values)
        except (ValueError, TypeError):
            arr = None
        # numpy turns [1, "a"] into strings: only trust it for one Python type
        if arr is not None and arr.dtype.kind in "US" and len({type(v) for v in values}) != 1:
            arr = None
    if arr is not None and arr.ndim == 1 and arr.dtype.kind in "biufUS":
        kind = arr.dtype.kind
        if not len(arr):
            return [], np.zeros(0, dtype=np.int64)
        if kind == "f":
            bad = np.isnan(arr)
            if bad.any():
                i = int(np.argmax(bad))
                fail(name, float(arr[i]), "not a valid class label", i)
        if kind in "biu":
            lo, hi = int(arr.min()), int(arr.max())
            if hi - lo <= max(DENSE_LABEL_RANGE, len(arr)) and -2**62 < lo and hi < 2**62:
                shifted = arr.astype(np.int64) - lo
                present = np.bincount(shifted, minlength=hi - lo + 1) > 0
                classes = np.flatnonzero(present) + lo
                codes = (np.cumsum(present) - 1)[shifted]
                return (classes.astype(bool) if kind == "b" else classes).tolist(), codes
        return _searched(arr)
    items = list(values)
    table = {}
    codes = np.empty(len(items), dtype=np.int64)
    for i, v in enumerate(items):
        code = table.get(v) if _hashable(v) else None
        if code is None:
            try:
                MultiClassMetric._class(v, f"{name}[{i}]")  # raises for a bad label
            except ValidationError as e:
                e.index, e.name = i, name
                raise
            code = table[v] = len(table)
        codes[i] = code
    return list(table), codes


def _searched(arr, sample=1024):
    """Codes by binary search among the sorted classes of a sample, grown until every
    element is found: ``O(n log(k))`` with no sort of the whole batch."""
    classes = np.unique(arr[:sample])
    while True:
        codes = np.searchsorted(classes, arr)
        np.minimum(codes, len(classes) - 1, out=codes)
        missing = classes[codes] != arr
        if not missing.any():
            return classes.tolist(), codes.astype(np.int64, copy=False)
        classes = np.union1d(classes, arr[missing])


def _hashable(v):
    try:
        hash(v)
    except TypeError:
        return False
    return True


# ------------------------------------------------------------ weighted means


class WeightedMean(Metric):
    """The weighted mean of a per-event loss, ``sum(w * loss) / sum(w)``.

    Subclasses define ``_loss(y_true, y_pred)`` (validate one event, return its loss;
    a NaN or infinite loss is caught afterwards and explained by ``_explain``) and
    ``_losses(y, s)`` (the losses of validated columns, as an array, unchecked); a
    family's :meth:`validate` checks a batch (``_check_columns``: the weighted losses
    must not overflow) and :meth:`update_trusted` / :meth:`revert_trusted` add and
    remove its columns, vectorised.
    """

    _abstract = True

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
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
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
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
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
    #: True where every loss of validated inputs is at most about 1e8 (probabilities):
    #: a batch's weighted losses can then only overflow with weights summing over 1e300
    _bounded_loss = False

    def validate(self, y_true, y_pred, w=None):
        """Check a batch without changing anything (the family's columns, then
        :meth:`_check_columns`); return its validated columns.

        Runtime complexity: `O(m)`, vectorised.
        """
        columns = super().validate(y_true, y_pred, w)
        self._check_columns(*columns)
        return columns

    def check_columns(self, a, b, weights=None):
        """Refuse a batch whose weighted losses overflow (naming the first event)."""
        self._check_columns(a, b, weights)

    def _check_columns(self, a, b, weights):
        if self._bounded_loss:
            if weights is None:
                return
            with np.errstate(over="ignore"):  # a sum of weights over 1e308 is inf: checked
                if not float(weights.sum()) > 1e300:
                    return
        wx, _ = self._weighted_losses(a, b, weights)
        with np.errstate(over="ignore"):  # a sum past the float range is inf: refused
            total = float(np.sum(wx))
        if not np.isfinite(wx).all() or not math.isfinite(total):
            self._refuse_overflow(a, b, wx)

    def _weighted_losses(self, a, b, weights):
        """``(w * loss of each event, 0 for events not counted; the keep mask)``."""
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is refused after
            return self._weighted_losses_raw(a, b, weights)

    def _weighted_losses_raw(self, a, b, weights):
        """:meth:`_weighted_losses`, floating-point warnings left to the caller."""
        losses = self._losses(a, b)
        wx = losses if weights is None else losses * weights
        keep = self._keep(a)
        if keep is not None:
            wx = np.where(keep, wx, 0.0)
        return wx, keep

    def _refuse_overflow(self, a, b, wx):
        """Raise for weighted losses ``wx`` that overflow: the first infinite one
        (``ValidationError`` with its index), else their sum."""
        bad = ~np.isfinite(wx)
        if bad.any():
            i = int(np.argmax(bad))
            fail("y_pred", _item(self._event(a, b, i)[1]), "the weighted loss overflows", i)
        raise ValueError("the sum of the batch's weighted losses overflows")

    #: whether :meth:`_batch_sums` depends on the class and the columns only (its
    #: ``_losses`` and ``_keep`` read no parameter): metrics of such a class given one
    #: batch in a :class:`~streameval.metrics.base.shared_batch` (a Monitor's
    #: cumulative log loss and its window's) then sum it once. Read from the class's
    #: own body only: a subclass does not inherit it.
    _sums_by_class = False

    def _batch_sums(self, a, b, weights):
        """``(events counted, sum of w * loss, its rounding error, weight, keep mask)``;
        weighted losses that overflow are refused as by :meth:`validate` (columns
        validated by a caller that does not know this family's losses)."""
        cls = type(self)
        if cls.__dict__.get("_sums_by_class", False):
            return batch_memo((cls, "batch sums"), a, b, weights,
                              lambda: self._sum_batch(a, b, weights))
        return self._sum_batch(a, b, weights)

    def _sum_batch(self, a, b, weights):
        """:meth:`_batch_sums`, computed."""
        # (an overflow of a loss or of the sum is refused next)
        with np.errstate(over="ignore", invalid="ignore"):
            wx, keep = self._weighted_losses_raw(a, b, weights)
            total, error = sum2(wx)
        if not math.isfinite(total):
            self._refuse_overflow(a, b, wx)
        n = len(wx) if keep is None else int(np.count_nonzero(keep))
        if weights is None:
            weight = float(n)
        else:
            with np.errstate(over="ignore"):  # weights past the float range: refused
                weight = float(weights.sum() if keep is None else weights[keep].sum())
        return n, total, error, weight, keep

    def update_trusted(self, y, s, w=None):
        """Add validated columns (from :meth:`validate`), unchecked; same result as a
        loop of :meth:`update`.

        Runtime complexity: `O(m)`, vectorised.
        """
        n, total, error, weight, keep = self._batch_sums(y, s, w)
        self._fold(n, total, weight, error)
        self._z += _zeros(w, keep)
        if keep is not None:
            self._skip(len(keep) - n)
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove validated columns added earlier; same result as a loop of
        :meth:`revert`.

        The batch's weighted losses are summed as in :meth:`update_trusted` (with the
        exact error of every addition) and taken out of the compensated sum in one
        step; emptied, the metric is reset to exact zeros. An event that was never
        added (more events, or more weight, than the metric holds) raises a
        ``ValidationError`` with its ``index``, and nothing changes.

        Runtime complexity: `O(m)`, vectorised.
        """
        n, total, error, weight, keep = self._batch_sums(y, s, w)
        m = n if keep is None else len(keep)
        if keep is not None:
            self._check_unskip(m - n, keep)
        if n > self._n or (n and overdrawn(self._w - weight, weight, self._w)):
            self._not_added(y, s, w, keep)
        if n == self._n:  # emptied: exactly zero, no rounding residue
            self._s = self._c = self._w = 0.0
            self._n = self._z = 0
        else:
            self._fold(-n, -total, -weight, -error)
            self._z = max(self._z - _zeros(w, keep), 0)
            if self._n <= self._z:  # only weight 0 left: exactly zero
                self._s = self._c = self._w = 0.0
                self._z = self._n
        if keep is not None:
            self._skip(n - m)
        return self

    @staticmethod
    def _event(a, b, i):
        """``(y_true, y_pred)`` of event ``i`` of validated columns (for messages)."""
        return a[i], b[i]

    def _not_added(self, a, b, weights, keep):
        """Raise for the first event of a batch that a loop of ``revert`` would refuse."""
        idx = np.arange(self._length(a, b)) if keep is None else np.flatnonzero(keep)
        ws = np.ones(len(idx)) if weights is None else weights[idx]
        left = self._w - np.cumsum(ws)
        bad = (np.arange(1, len(idx) + 1) > self._n) | overdrawn(left, ws, self._w)
        i = int(idx[int(np.argmax(bad))])
        yt, yp = self._event(a, b, i)
        raise ValidationError.at(
            i, f"revert of (y_true={_item(yt)!r}, y_pred={_item(yp)!r}, "
            f"w={1.0 if weights is None else float(weights[i])!r}): no such event was added "
            f"({self._n} events of total weight {self._w!r})"
        )

    @staticmethod
    def _length(a, b):
        return len(a)

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

    def _subtract(self, other):
        """Take out ``other``'s sums (merged earlier) as :meth:`revert_trusted` takes
        out a batch's: one compensated subtraction; emptied, or left with only events
        of weight 0, the metric is exact zeros. Refused (``ValueError``, nothing
        changed) for more events, more weight or a larger loss sum (beyond rounding,
        :func:`~streameval.validation.overdrawn`) than held here."""
        name = f"the other {self._public_name}"
        check_unmerge_totals(self, other, name)
        mine, theirs = self._s + self._c, other._s + other._c
        if other._n and overdrawn(mine - theirs, abs(theirs), abs(mine)):
            raise ValueError(f"subtract: weighted loss sum {mine!r} here but {theirs!r} in "
                             f"{name}: it was never merged")
        self._check_unmerge(other, name)
        if other._n == self._n:  # emptied: exactly zero, no rounding residue
            self._s = self._c = self._w = 0.0
            self._n = self._z = 0
        elif other._n:
            self._fold(-other._n, -other._s, -other._w, -other._c)
            self._z = max(self._z - other._z, 0)
            if self._n <= self._z:  # only weight 0 left: exactly zero
                self._s = self._c = self._w = 0.0
                self._z = self._n

    def _check_unmerge(self, other, name):
        """Hook of metrics with more state (MAPE's skipped events): refuse, before
        :meth:`_subtract` changes anything, what ``other`` holds beyond this one."""

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


#: :func:`sum2` works on chunks of this many elements, so that its temporaries stay
#: in cache: 1e6 elements in 3 ms, against 11 ms for 4096 or the whole array at once
SUM_CHUNK = 65536


def sum2(x):
    """``(s, e)``: the float sum of ``x`` and the sum of its rounding errors.

    Pairwise summation that keeps the exact error of every addition (Knuth's TwoSum,
    vectorised), so ``s + e`` is the exact sum up to ``O(eps^2 sum|x| log(n))``: a
    batch's events can later be reverted one by one (sliding windows) without leaving
    the rounding residue of a plain ``np.sum``. Runtime complexity: `O(n)` numpy passes, a constant factor above ``np.sum``.

    >>> sum2(np.array([1e16, 1.0, -1e16]))
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
    levels = []  # (a, b, a + b) of each level of the pairwise sum
    while len(x) > 1:
        if len(x) & 1:
            rest.append(float(x[-1]))
            x = x[:-1]
        a = x[0::2]
        b = x[1::2]
        t = a + b
        levels.append((a, b, t))
        x = t
    if levels:
        # the exact error of every addition, all levels at once (TwoSum:
        # (a - (t - bb)) + (b - bb) with bb = t - a), then summed level by level
        a, b, t = (np.concatenate(col) for col in zip(*levels))
        bb = t - a
        err = t - bb
        np.subtract(a, err, out=err)
        np.subtract(b, bb, out=bb)
        err += bb
        lo = 0
        for level in levels:
            hi = lo + len(level[2])
            e += float(err[lo:hi].sum())
            lo = hi
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


