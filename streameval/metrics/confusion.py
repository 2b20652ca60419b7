"""The confusion family: confusion matrix, accuracy, precision, recall, F-scores, MCC.

Binary metrics predict positive when ``score >= threshold`` (default 0.5) and keep a
binary :class:`ConfusionMatrix`: four weighted sums ``tp, fp, fn, tn`` and their event
counts. Multiclass metrics (``average=`` given, or ``multiclass=True``) keep a sparse
matrix of weighted cells keyed by ``(true class, predicted class)``; ``y_pred`` is the
predicted class or a dict of class probabilities (its argmax).

Every metric of the family reads one confusion matrix. ``Precision()`` makes its own;
``Precision(cm=cm)`` is a read-only *view* of a shared one, so that several metrics
cost one update (``cm.update``) without double counting: a view refuses ``update``,
``revert``, ``update_many``, ``merge`` and ``subtract`` with a :class:`TypeError`.
A Monitor shares one matrix among its binary metrics (and among its windows over
them) of one threshold and labels the same way: the others become read-only
:class:`CountsView` objects (:func:`counts_key` says which share), whose values and
states are those of unshared metrics.

Undefined values (a division by zero: precision with no predicted positive, any
metric before the first event, ...) are ``math.nan``, never 0. The proportions
(accuracy, error rate, precision, recall, FPR, specificity) have ``interval(level)``,
the Wilson score interval with continuity correction (weights as frequency weights); the
others have none. Values are equal to scikit-learn's wherever scikit-learn's are defined.

``Precision(...)`` returns an instance of a binary or a multiclass case class, both
subclasses of ``Precision`` (:class:`streameval.metrics.base.Cases`); their state
records the public name, so ``streameval.from_state`` rebuilds the right one.

Batches: binary metrics take the binary columns of the trusted path (``validate``
once, then ``update_trusted`` / ``revert_trusted``, vectorised); multiclass ones
validate into their own columns, the factorized classes. :class:`BinaryCounts` is the
binary matrix's counting, public so that the drift tests' counts
(:class:`streameval.drift.DriftCounts`) reuse it.

It may import numpy, :mod:`streameval.validation` and the metrics' ``base`` and
``common`` modules.
"""

from __future__ import annotations

import copy
import math
import sys

import numpy as np

from streameval.validation import (
    MAX_WEIGHT,
    Options,
    Real,
    ValidationError,
    each,
    as_weight_array,
    check_param,
    check_same_length,
    check_threshold,
    check_weight,
    fail,
    label_sets,
    overdrawn,
)

from .base import (BinaryMetric, Cases, Metric, MultiClassMetric, SharedView, batch_memo,
                   has_interval)
from .common import DENSE_LABEL_RANGE, as_class, factorize, no_binary_params

__all__ = [
    "ConfusionMatrix",
    "BinaryCounts",
    "Accuracy",
    "ErrorRate",
    "Precision",
    "Recall",
    "FPR",
    "Specificity",
    "FBeta",
    "F1",
    "FAlpha",
    "BalancedAccuracy",
    "MCC",
    "AVERAGES",
    "counts_key",
    "CountsView",
]

#: the accepted values of ``average=`` for multiclass metrics
AVERAGES = ("macro", "micro", "weighted")

_NAN = math.nan
_MAXF = sys.float_info.max


# --------------------------------------------------------------------- ConfusionMatrix


class ConfusionMatrix(Cases):
    """Weighted confusion matrix, binary (by a score threshold) or multiclass.

    Binary: an event is predicted positive when ``score >= threshold``; the matrix is
    the weighted sums ``tp, fp, fn, tn`` (and their event counts), and ``get()`` returns
    ``[[tn, fp], [fn, tp]]``, the layout of ``sklearn.metrics.confusion_matrix`` with
    labels ``[neg_label, pos_label]``. Multiclass (``multiclass=True``): the weighted
    cells ``(true class, predicted class)``; ``get()`` returns the matrix over the
    classes seen (sorted when sortable), rows true, columns predicted, as sklearn's,
    and :meth:`matrix` takes a label order.

    Share one matrix between metrics with ``cm=``: ``Precision(cm=cm)`` and
    ``Recall(cm=cm)`` read ``cm``, which is updated once per event.

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass
    (k classes).

    >>> from streameval import ConfusionMatrix
    >>> cm = ConfusionMatrix()
    >>> for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
    ...     cm.update(y, s)
    >>> cm.tp, cm.fp, cm.fn, cm.tn
    (1.0, 1.0, 0.0, 1.0)
    >>> cm.get()
    array([[1., 1.],
           [0., 1.]])
    >>> mc = ConfusionMatrix(multiclass=True)
    >>> for y, p in [("cat", "cat"), ("dog", "cat"), ("dog", {"cat": 0.2, "dog": 0.8})]:
    ...     mc.update(y, p)
    >>> mc.labels
    ['cat', 'dog']
    >>> mc.get()
    array([[1., 0.],
           [1., 1.]])

    Parameters
    ----------
    threshold
        Binary only: positive when ``score >= threshold``; default 0.5.
    pos_label, neg_label
        Binary only: the positive and negative labels (default True/1 and False/0).
    multiclass
        True for a multiclass matrix.
    """

    @classmethod
    def _case(cls, args, kwargs):
        return "multiclass" if kwargs.get("multiclass") else "binary"

    def __init__(self, *, threshold=None, pos_label=None, neg_label=None, multiclass=False):
        self.multiclass = bool(multiclass)
        self._setup(threshold, pos_label, neg_label)

    def _subtract(self, other):
        # both cases: the cells of their own layout (binary or multiclass)
        self._subtract_counts(other, f"the other {self._public_name}")


class BinaryCounts(BinaryMetric):
    """The counting of a binary confusion matrix, by a score threshold: four weighted
    sums ``tp, fp, fn, tn``, their event counts, and the events of weight 0 per cell
    (a cell left with only those weighs exactly 0, not a rounding residue).

    The binary :class:`ConfusionMatrix` is this with its matrix views (``get``,
    ``matrix``, ``labels``); :class:`streameval.drift.DriftCounts` adds the sums of
    squared weights. Not a metric by itself (``get`` is the subclass's).

    Runtime complexity: `update` and `revert` `O(1)`; `update_trusted` and
    `revert_trusted` `O(m)`, vectorised.
    """

    _abstract = True
    #: whether a revert is refused for more weight than its cell holds too (not only
    #: for an event never counted); a refused cell's weight never goes below 0
    _by_weight = True

    def _setup(self, threshold, pos_label, neg_label):
        self.threshold = check_threshold(threshold)
        BinaryMetric.__init__(self, True if pos_label is None else pos_label, neg_label)
        (pos,) = self._pos_set
        (neg,) = self._neg_set
        self._labels = {pos: True, neg: False}
        self.tp = self.fp = self.fn = self.tn = 0.0
        self._ntp = self._nfp = self._nfn = self._ntn = 0
        # events of weight 0 per cell (tp, fp, fn, tn) and in all: a cell left with
        # only those weighs exactly 0, not the rounding residue of what was reverted
        self._z = [0, 0, 0, 0]
        self._zn = 0

    @property
    def n(self):
        """Number of events counted."""
        return self._ntp + self._nfp + self._nfn + self._ntn

    # -- per event --------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0):
        """Count one event: positive prediction when ``y_pred >= threshold``.

        Runtime complexity: `O(1)`.
        """
        try:
            y = self._labels[y_true]
        except (KeyError, TypeError):
            y = self._label(y_true)
        if type(y_pred) is not float or y_pred - y_pred:
            y_pred = self._score(y_pred)
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
            w = check_weight(w)
        if y_pred >= self.threshold:
            if y:
                self.tp += w
                self._ntp += 1
            else:
                self.fp += w
                self._nfp += 1
        elif y:
            self.fn += w
            self._nfn += 1
        else:
            self.tn += w
            self._ntn += 1
        if not w:
            c = _cell(y, y_pred >= self.threshold)
            self._z[c] += 1
            self._zn += 1

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event counted earlier (exact inverse of :meth:`update`).

        Runtime complexity: `O(1)`.
        """
        try:
            y = self._labels[y_true]
        except (KeyError, TypeError):
            y = self._label(y_true)
        if type(y_pred) is not float or y_pred - y_pred:
            y_pred = self._score(y_pred)
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
            w = check_weight(w)
        # an emptied cell is exactly 0 (no rounding residue of float weights), and a
        # residue below 0 (0.1 + 0.7 - 0.7 - 0.1 < 0) is 0: a cell's weight is >= 0
        if y_pred >= self.threshold:
            if y:
                k = self._ntp - 1
                v = self.tp - w
                if k < 0 or (v < -1e-9 * w and self._by_weight and overdrawn(v, w, self._total())):
                    self._not_counted("tp", y_true, y_pred, w)
                self._ntp = k
                self.tp = v if k and v > 0.0 else 0.0
            else:
                k = self._nfp - 1
                v = self.fp - w
                if k < 0 or (v < -1e-9 * w and self._by_weight and overdrawn(v, w, self._total())):
                    self._not_counted("fp", y_true, y_pred, w)
                self._nfp = k
                self.fp = v if k and v > 0.0 else 0.0
        elif y:
            k = self._nfn - 1
            v = self.fn - w
            if k < 0 or (v < -1e-9 * w and self._by_weight and overdrawn(v, w, self._total())):
                self._not_counted("fn", y_true, y_pred, w)
            self._nfn = k
            self.fn = v if k and v > 0.0 else 0.0
        else:
            k = self._ntn - 1
            v = self.tn - w
            if k < 0 or (v < -1e-9 * w and self._by_weight and overdrawn(v, w, self._total())):
                self._not_counted("tn", y_true, y_pred, w)
            self._ntn = k
            self.tn = v if k and v > 0.0 else 0.0
        if self._zn:
            self._settle(_cell(y, y_pred >= self.threshold), 0 if w else 1)

    def _settle(self, c, gone):
        """Take ``gone`` zero-weight events out of cell ``c``'s count of them; a cell
        left with only such events weighs exactly 0."""
        name = CELLS[c]
        k = getattr(self, "_n" + name)
        z = self._z[c]
        left = min(max(z - gone, 0), k)
        self._z[c] = left
        self._zn += left - z
        if left and left == k:
            setattr(self, name, 0.0)

    def _total(self):
        return self.tp + self.fp + self.fn + self.tn

    def _not_counted(self, cell, y_true, y_pred, w):
        raise ValueError(self._refusal(cell, y_true, y_pred, w))

    # -- batches ----------------------------------------------------------------
    def _cells_of(self, y, s):
        """Each event's cell, an index into :data:`CELLS` (0 tp, 1 fp, 2 fn, 3 tn)."""
        return (~y).view(np.uint8) + np.uint8(2) * (s < self.threshold).view(np.uint8)

    def update_trusted(self, y, s, w=None):
        """Count validated binary columns (from :meth:`validate`), unchecked; same
        result as a loop of :meth:`update`.

        Runtime complexity: `O(m)`, vectorised.
        """
        counts, sums, zc = self._cells_memo(y, s, w)
        self.tp += float(sums[0])
        self.fp += float(sums[1])
        self.fn += float(sums[2])
        self.tn += float(sums[3])
        self._ntp += counts[0]
        self._nfp += counts[1]
        self._nfn += counts[2]
        self._ntn += counts[3]
        if zc is not None:
            for c, z in enumerate(zc):
                self._z[c] += z
                self._zn += z
        return self

    def _cells_memo(self, y, s, w):
        """:meth:`_batch_cells`, computed once per batch of a
        :class:`~streameval.metrics.base.shared_batch` (the matrices of one threshold
        count a batch alike: a Monitor's and its window's; a window's batch when it
        comes in and when it expires)."""
        return batch_memo((type(self)._cells_of, self.threshold, "cells"), y, s, w,
                          lambda: self._batch_cells(y, s, w))

    def _batch_cells(self, y, s, w):
        """``(event count, weight, zero-weight count or None)`` per cell of a batch of
        validated columns, in :data:`CELLS` order, as lists."""
        idx = self._cells_of(y, s)
        counts = np.bincount(idx, minlength=4).tolist()
        # (unweighted: each cell's count as its weight, exactly)
        sums = counts if w is None else np.bincount(idx, weights=w, minlength=4).tolist()
        return counts, sums, _zero_counts(idx, w)

    def revert_trusted(self, y, s, w=None):
        """Remove validated binary columns counted earlier; same result as a loop of
        :meth:`revert`.

        Each cell loses the batch's weight in it in one subtraction (as
        :meth:`update_trusted` adds it); an emptied cell is exactly 0. An event that
        was never counted raises a ``ValidationError`` with its ``index`` (the first
        that a loop of ``revert`` would refuse), and nothing changes.

        Runtime complexity: `O(m)`, vectorised.
        """
        counts, sums, zc = self._cells_memo(y, s, w)
        old = [self.tp, self.fp, self.fn, self.tn]
        held = [self._ntp, self._nfp, self._nfn, self._ntn]
        new = [v - float(x) for v, x in zip(old, sums)]
        left = [k - c for k, c in zip(held, counts)]
        if min(left) < 0 or min(new) < 0.0:
            self._check_revert_batch(self._cells_of(y, s), y, s, w, old, held)
        # emptied: exactly 0; a rounding residue below 0 is 0 (a cell's weight is >= 0)
        self.tp, self.fp, self.fn, self.tn = (
            v if k and v > 0.0 else 0.0 for v, k in zip(new, left))
        self._ntp, self._nfp, self._nfn, self._ntn = left
        if self._zn:
            zc = zc or (0, 0, 0, 0)
            for c in range(4):
                self._settle(c, zc[c])
        return self

    def _check_revert_batch(self, idx, y, s, w, old, held):
        """Raise for the first event that a loop of ``revert`` would refuse, if any."""
        n = len(idx)
        ws = np.ones(n) if w is None else w
        first = n
        for c in range(4):
            sel = np.flatnonzero(idx == c)
            if not len(sel):
                continue
            left = old[c] - np.cumsum(ws[sel])
            bad = np.arange(1, len(sel) + 1) > held[c]
            if self._by_weight:
                bad |= overdrawn(left, ws[sel], sum(old))
            if bad.any():
                first = min(first, int(sel[int(np.argmax(bad))]))
        if first < n:
            raise ValidationError.at(first, self._refusal(
                CELLS[int(idx[first])], self.label_of(bool(y[first])), float(s[first]),
                float(ws[first]), first))

    def _refusal(self, cell, y_true, y_pred, w, index=None):
        """The reason a revert of this event is refused (``cell`` holds no such event)."""
        return (f"revert of (y_true={y_true!r}, y_pred={y_pred!r}, w={w!r}): no such event "
                f"was counted (the {cell} cell holds {getattr(self, cell)!r} from "
                f"{getattr(self, '_n' + cell)} events)")

    # -- state ------------------------------------------------------------------
    def _merge(self, other):
        for cell in ("tp", "fp", "fn", "tn"):
            setattr(self, cell, getattr(self, cell) + getattr(other, cell))
            setattr(self, "_n" + cell, getattr(self, "_n" + cell) + getattr(other, "_n" + cell))
        self._z = [a + b for a, b in zip(self._z, other._z)]
        self._zn += other._zn

    def _subtract_counts(self, other, name):
        """Take out the cells of ``other`` (merged earlier), as a ``revert_trusted`` of
        its events would: each cell loses ``other``'s events and weight in one
        subtraction; an emptied cell, or one left with only events of weight 0, is
        exactly 0. Refused (``ValueError`` naming the cell and ``name``, the other
        metric; nothing changed) if a cell of ``other`` holds more events than here, or
        more weight beyond rounding (:func:`~streameval.validation.overdrawn`).

        Not the ``_subtract`` hook of this class, so that a subclass with more state
        (:class:`streameval.drift.DriftCounts`) does not inherit a partial inverse."""
        total = self._total()
        for cell in CELLS:
            k, theirs = getattr(self, "_n" + cell), getattr(other, "_n" + cell)
            v, x = getattr(self, cell), getattr(other, cell)
            if theirs > k:
                raise ValueError(
                    f"subtract: the {cell} cell holds {_events(k)} here but {theirs} in "
                    f"{name}: it was never merged")
            if self._by_weight and overdrawn(v - x, x, total):
                raise ValueError(
                    f"subtract: the {cell} cell holds weight {v!r} here but {x!r} in "
                    f"{name}: it was never merged")
        for c, cell in enumerate(CELLS):
            k = getattr(self, "_n" + cell) - getattr(other, "_n" + cell)
            v = getattr(self, cell) - getattr(other, cell)
            z = min(max(self._z[c] - other._z[c], 0), k)
            # emptied, or only weight 0 left: exactly 0; a residue below 0 is 0
            setattr(self, cell, v if k > z and v > 0.0 else 0.0)
            setattr(self, "_n" + cell, k)
            self._z[c] = z
        self._zn = sum(self._z)

    def _get_data(self):
        data = {
            "tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn,
            "counts": [self._ntp, self._nfp, self._nfn, self._ntn],
        }
        if self._zn:  # only where events of weight 0 are held (older states lack it)
            data["zeros"] = list(self._z)
        return data

    def _set_data(self, data):
        self._load(data, lambda: (
            [data[c] for c in CELLS], data["counts"], data.get("zeros", (0, 0, 0, 0))))

    def _load(self, data, read):
        """Set the cells from ``read()``: ``(weights, counts, zero-weight counts)`` in
        :data:`CELLS` order; refuse (naming ``data``) anything that is not such."""
        what = f"not a binary {self._public_name} state: {data!r:.200}"
        try:
            values, counts, zeros = read()
            values = [float(v) for v in values]
            counts = [int(k) for k in counts]
            zeros = [int(z) for z in zeros]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{what} ({e})") from None
        if (len(values) != 4 or len(counts) != 4 or min(counts) < 0
                or not all(math.isfinite(v) for v in values)
                or len(zeros) != 4 or not all(0 <= z <= k for z, k in zip(zeros, counts))
                or _negative(values)):
            raise ValueError(what)
        # a rounding residue below 0 (older versions kept it) is 0: a weight is >= 0;
        # a cell without events weighs exactly 0
        self.tp, self.fp, self.fn, self.tn = (
            v if v > 0.0 and k else 0.0 for v, k in zip(values, counts))
        self._ntp, self._nfp, self._nfn, self._ntn = counts
        self._z, self._zn = zeros, sum(zeros)

    def _check(self):
        total = abs(self.tp) + abs(self.fp) + abs(self.fn) + abs(self.tn)
        for cell in ("tp", "fp", "fn", "tn"):
            v, k = getattr(self, cell), getattr(self, "_n" + cell)
            assert type(v) is float and math.isfinite(v), (cell, v)
            assert type(k) is int and k >= 0, (cell, k)
            assert not overdrawn(v, 0.0, max(total, 1.0)), (cell, v)
            assert k or v == 0.0, (cell, v, k)
            z = self._z[CELLS.index(cell)]
            assert 0 <= z <= k and (z < k or v == 0.0), (cell, v, k, z)
        assert self._zn == sum(self._z), (self._zn, self._z)

class _BinaryConfusionMatrix(ConfusionMatrix, BinaryCounts, case="binary"):
    _state_exclude = ("cm", "multiclass")

    @property
    def labels(self):
        """``[neg_label, pos_label]``: the row and column order of :meth:`get`."""
        (pos,) = self._pos_set
        (neg,) = self._neg_set
        return [neg, pos]

    def get(self):
        """``[[tn, fp], [fn, tp]]`` as a float array (sklearn's layout)."""
        return np.array([[self.tn, self.fp], [self.fn, self.tp]])

    def matrix(self, labels=None):
        """The matrix with rows and columns in ``labels`` order (default ``[neg, pos]``)."""
        m = self.get()
        if labels is None:
            return m
        order = [self.labels.index(v) if v in self.labels else -1 for v in labels]
        out = np.zeros((len(order), len(order)))
        for a, i in enumerate(order):
            for b, j in enumerate(order):
                if i >= 0 and j >= 0:
                    out[a, b] = m[i, j]
        return out

    def __repr__(self):
        return (f"ConfusionMatrix(tp={self.tp!r}, fp={self.fp!r}, "
                f"fn={self.fn!r}, tn={self.tn!r})")

    __str__ = __repr__


class _MultiClassConfusionMatrix(ConfusionMatrix, MultiClassMetric, case="multiclass"):
    _state_exclude = ("cm", "threshold", "pos_label", "neg_label")

    def _setup(self, threshold, pos_label, neg_label):
        no_binary_params("ConfusionMatrix", threshold, pos_label, neg_label)
        # (true class, predicted class) -> [weight, event count]; no empty cells
        self._cells = {}
        # cell -> its events of weight 0, where any: a cell left with only those
        # weighs exactly 0, not the rounding residue of what was reverted
        self._zeros = {}

    @property
    def n(self):
        """Number of events counted."""
        return sum(c[1] for c in self._cells.values())

    @property
    def labels(self):
        """The classes seen (as true or predicted class), sorted when sortable."""
        seen = {}
        for t, p in self._cells:
            seen[t] = None
            seen[p] = None
        try:
            return sorted(seen)
        except TypeError:
            return list(seen)

    def get(self):
        """The matrix over :attr:`labels`: rows true class, columns predicted class."""
        return self.matrix()

    def matrix(self, labels=None):
        """The weighted matrix with rows and columns in ``labels`` order.

        Classes not in ``labels`` are left out; labels never seen give zero rows and
        columns (as ``sklearn.metrics.confusion_matrix(labels=...)``).
        """
        if labels is None:
            labels = self.labels
        index = {v: i for i, v in enumerate(labels)}
        out = np.zeros((len(index), len(index)))
        for (t, p), (w, _) in self._cells.items():
            i = index.get(t)
            j = index.get(p)
            if i is not None and j is not None:
                out[i, j] += w
        return out

    def _sums(self):
        """Per class (in :attr:`labels` order, so that averages do not depend on the
        order events came in): labels, tp, predicted and true weight."""
        labels = self.labels
        index = {v: i for i, v in enumerate(labels)}
        k = len(index)
        tp = np.zeros(k)
        pred = np.zeros(k)
        true = np.zeros(k)
        for (t, p), (w, _) in self._cells.items():
            i = index[t]
            j = index[p]
            true[i] += w
            pred[j] += w
            if i == j:
                tp[i] += w
        return labels, tp, pred, true

    # -- per event --------------------------------------------------------------
    @staticmethod
    def _argmax(proba, name="y_pred"):
        if not proba:
            fail(name, proba, "an empty probability dict has no predicted class")
        for v in proba.values():
            if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not (
                -_MAXF <= v <= _MAXF
            ):
                fail(name, proba, "probabilities must be finite numbers")
        return as_class(max(proba, key=proba.get), name)

    def update(self, y_true, y_pred, w=1.0):
        """Count one event; ``y_pred`` is a class or a probability dict (argmax).

        Runtime complexity: `O(1)` (`O(k)` for a probability dict).
        """
        t = type(y_true)
        if t is not str and t is not int:
            y_true = as_class(y_true, "y_true")
        t = type(y_pred)
        if t is dict:
            y_pred = self._argmax(y_pred)
        elif t is not str and t is not int:
            y_pred = as_class(y_pred, "y_pred")
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
            w = check_weight(w)
        key = (y_true, y_pred)
        cell = self._cells.get(key)
        if cell is None:
            self._cells[key] = [w, 1]
        else:
            cell[0] += w
            cell[1] += 1
        if not w:
            zeros = self._zeros
            zeros[key] = zeros.get(key, 0) + 1

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event counted earlier (exact inverse of :meth:`update`).

        Runtime complexity: `O(1)` (`O(k)` for a probability dict).
        """
        t = type(y_true)
        if t is not str and t is not int:
            y_true = as_class(y_true, "y_true")
        t = type(y_pred)
        if t is dict:
            y_pred = self._argmax(y_pred)
        elif t is not str and t is not int:
            y_pred = as_class(y_pred, "y_pred")
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
            w = check_weight(w)
        key = (y_true, y_pred)
        cell = self._cells.get(key)
        if cell is None or (cell[0] - w < -1e-9 * w
                             and overdrawn(cell[0] - w, w, self._weight_total())):
            raise ValueError(
                f"revert of (y_true={key[0]!r}, y_pred={key[1]!r}, w={w!r}): "
                f"no such event was counted (cell holds {cell!r})"
            )
        if cell[1] == 1:
            del self._cells[key]  # an empty cell is gone, its weight exactly 0
            if self._zeros:
                self._zeros.pop(key, None)
        else:
            v = cell[0] - w
            cell[0] = v if v > 0.0 else 0.0  # a rounding residue below 0 is 0
            cell[1] -= 1
            if self._zeros:
                self._settle(key, cell, 0 if w else 1)

    def _settle(self, key, cell, gone):
        """Take ``gone`` zero-weight events out of ``cell``'s count of them; a cell
        left with only such events weighs exactly 0."""
        zeros = self._zeros
        z = min(max(zeros.get(key, 0) - gone, 0), cell[1])
        if z:
            zeros[key] = z
            if z == cell[1]:
                cell[0] = 0.0
        else:
            zeros.pop(key, None)

    # -- batches ----------------------------------------------------------------
    def validate(self, y_true, y_pred, w=None):
        """Check a batch without changing anything; return its columns, the factorized
        classes: ``((true classes, their codes), (predicted classes, their codes),
        weights)``. Probability dicts give their argmax. Numpy arrays (or lists) of
        ints, strings or floats are factorized in numpy; dicts go through a Python loop.

        Runtime complexity: `O(m log(k))` for `k` classes.
        """
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        weights = as_weight_array(w, n)
        if not isinstance(y_pred, np.ndarray) or y_pred.dtype.kind == "O":
            if any(type(v) is dict for v in y_pred):
                argmax = self._argmax
                y_pred = each(lambda v, where: argmax(v, where) if type(v) is dict else v,
                              y_pred, "y_pred")
        return factorize(y_true, "y_true"), factorize(y_pred, "y_pred"), weights

    @staticmethod
    def _grouped(true, pred, weights):
        """Validated columns grouped by cell: ``(keys, weight sums, event counts,
        zero-weight counts or None, each event's cell code, the codes of keys)``."""
        (ut, ct), (up, cp) = true, pred
        k = max(len(up), 1)
        codes = ct * np.int64(k) + cp
        n = len(codes)
        cells_max = len(ut) * k
        zero = None if weights is None else weights == 0.0
        if zero is not None and not zero.any():
            zero = None
        zc = None
        if cells_max <= max(DENSE_LABEL_RANGE, n):  # few classes: count every cell
            counts = np.bincount(codes, minlength=cells_max)
            pairs = np.flatnonzero(counts)
            sums = counts if weights is None else np.bincount(
                codes, weights=weights, minlength=cells_max)
            if zero is not None:
                zc = np.bincount(codes[zero], minlength=cells_max)[pairs]
            counts = counts[pairs]
            sums = sums[pairs].astype(np.float64)
        else:
            pairs, inverse = np.unique(codes, return_inverse=True)
            counts = np.bincount(inverse)
            sums = counts.astype(np.float64) if weights is None else np.bincount(
                inverse, weights=weights)
            if zero is not None:
                zc = np.bincount(inverse[zero], minlength=len(pairs))
        keys = [(ut[c // k], up[c % k]) for c in pairs.tolist()]
        return (keys, sums.tolist(), counts.tolist(), None if zc is None else zc.tolist(),
                codes, pairs)

    def update_trusted(self, y, s, w=None):
        """Count validated columns (from :meth:`validate`), unchecked; same result as
        a loop of :meth:`update`.

        Runtime complexity: `O(m)` (`O(m log(m))` with many classes).
        """
        keys, sums, counts, zc, _, _ = self._grouped(y, s, w)
        cells = self._cells
        for key, x, c in zip(keys, sums, counts):
            cell = cells.get(key)
            if cell is None:
                cells[key] = [x, c]
            else:
                cell[0] += x
                cell[1] += c
        if zc is not None:
            zeros = self._zeros
            for key, z in zip(keys, zc):
                if z:
                    zeros[key] = zeros.get(key, 0) + z
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove validated columns counted earlier; same result as a loop of
        :meth:`revert`. An event that was never counted raises a ``ValidationError``
        with its ``index`` (the first that a loop of ``revert`` would refuse), and
        nothing changes.

        Runtime complexity: `O(m)` (`O(m log(m))` with many classes).
        """
        keys, sums, counts, zc, codes, pairs = self._grouped(y, s, w)
        cells = self._cells
        for key, x, c in zip(keys, sums, counts):
            cell = cells.get(key)
            if cell is None or cell[1] < c or cell[0] - x < 0.0:
                self._check_revert_batch(keys, np.searchsorted(pairs, codes), w)
                break
        zeros = self._zeros
        for g, (key, x, c) in enumerate(zip(keys, sums, counts)):
            cell = cells[key]
            if cell[1] == c:
                del cells[key]  # an empty cell is gone, its weight exactly 0
                if zeros:
                    zeros.pop(key, None)
            else:
                v = cell[0] - x
                cell[0] = v if v > 0.0 else 0.0  # a rounding residue below 0 is 0
                cell[1] -= c
                if zeros:
                    self._settle(key, cell, 0 if zc is None else zc[g])
        return self

    def _weight_total(self):
        """The total weight in the matrix (the scale of its rounding residue)."""
        return sum(cell[0] for cell in self._cells.values())

    def _check_revert_batch(self, keys, inverse, weights):
        """Raise for the first event that a loop of ``revert`` would refuse, if any
        (``inverse``: each event's index in ``keys``)."""
        total = self._weight_total()
        first = None
        for g, key in enumerate(keys):
            sel = np.flatnonzero(inverse == g)
            ws = np.ones(len(sel)) if weights is None else weights[sel]
            held = self._cells.get(key) or (0.0, 0)
            bad = (np.arange(1, len(sel) + 1) > held[1]) | overdrawn(
                held[0] - np.cumsum(ws), ws, total)
            if bad.any():
                i = int(sel[int(np.argmax(bad))])
                first = i if first is None else min(first, i)
        if first is not None:
            key = keys[inverse[first]]
            raise ValidationError.at(
                first, f"revert of (y_true={key[0]!r}, y_pred={key[1]!r}): no such event "
                f"was counted (cell holds {self._cells.get(key)!r})")

    # -- state ------------------------------------------------------------------
    def _merge(self, other):
        cells = self._cells
        for key, (w, c) in other._cells.items():
            cell = cells.get(key)
            if cell is None:
                cells[key] = [w, c]
            else:
                cell[0] += w
                cell[1] += c
        zeros = self._zeros
        for key, z in other._zeros.items():
            zeros[key] = zeros.get(key, 0) + z

    def _subtract_counts(self, other, name):
        """Take out the cells of ``other`` (merged earlier), as a ``revert_trusted`` of
        its events would: each cell loses ``other``'s events and weight; an emptied
        cell is gone (its weight exactly 0), one left with only events of weight 0
        weighs exactly 0. Refused (``ValueError`` naming the cell and ``name``, the
        other metric; nothing changed) if a cell of ``other`` is absent here, holds
        more events, or more weight beyond rounding."""
        cells = self._cells
        total = self._weight_total()
        for key, (x, c) in other._cells.items():
            cell = cells.get(key)
            where = f"the cell (y_true={key[0]!r}, y_pred={key[1]!r})"
            held = 0 if cell is None else cell[1]
            if c > held:
                raise ValueError(
                    f"subtract: {where} holds {_events(held)} here but {c} in {name}: "
                    "it was never merged")
            if overdrawn(cell[0] - x, x, total):
                raise ValueError(
                    f"subtract: {where} holds weight {cell[0]!r} here but {x!r} in "
                    f"{name}: it was never merged")
        zeros, theirs = self._zeros, other._zeros
        for key, (x, c) in other._cells.items():
            cell = cells[key]
            if cell[1] == c:
                del cells[key]  # an empty cell is gone, its weight exactly 0
                zeros.pop(key, None)
                continue
            v = cell[0] - x
            cell[0] = v if v > 0.0 else 0.0  # a rounding residue below 0 is 0
            cell[1] -= c
            z = min(max(zeros.get(key, 0) - theirs.get(key, 0), 0), cell[1])
            if z:
                zeros[key] = z
                if z == cell[1]:  # only weight 0 left: exactly 0
                    cell[0] = 0.0
            else:
                zeros.pop(key, None)

    def _get_data(self):
        data = {"cells": [[t, p, w, c] for (t, p), (w, c) in self._cells.items()]}
        if self._zeros:  # only where events of weight 0 are held (older states lack it)
            data["zeros"] = [[t, p, z] for (t, p), z in self._zeros.items()]
        return data

    def _set_data(self, data):
        cells = {}
        try:
            for t, p, w, c in data["cells"]:
                MultiClassMetric._class(t, "y_true")
                MultiClassMetric._class(p, "y_pred")
                w = float(w)
                if not math.isfinite(w) or int(c) < 1:
                    raise ValueError(f"bad cell {[t, p, w, c]!r}")
                cells[(t, p)] = [w, int(c)]
            zeros = {}
            for t, p, z in data.get("zeros", ()):
                z = int(z)
                if not 0 < z <= cells[(t, p)][1]:
                    raise ValueError(f"bad zero-weight count {[t, p, z]!r}")
                zeros[(t, p)] = z
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"not a multiclass ConfusionMatrix state: {data!r:.200} ({e})"
            ) from None
        if _negative([cell[0] for cell in cells.values()]):
            raise ValueError(f"not a multiclass ConfusionMatrix state: {data!r:.200} "
                             "(a cell's weight is below 0)")
        for cell in cells.values():  # a rounding residue below 0 (older versions) is 0
            if cell[0] < 0.0:
                cell[0] = 0.0
        self._cells = cells
        self._zeros = zeros

    def _check(self):
        total = sum(abs(c[0]) for c in self._cells.values())
        for key, cell in self._cells.items():
            w, c = cell
            assert type(w) is float and math.isfinite(w), (key, cell)
            assert type(c) is int and c >= 1, (key, cell)
            assert not overdrawn(w, 0.0, max(total, 1.0)), (key, cell)
            z = self._zeros.get(key, 0)
            assert 0 <= z <= c and (z < c or w == 0.0), (key, cell, z)
        assert all(z > 0 and key in self._cells for key, z in self._zeros.items()), self._zeros

    def __repr__(self):
        return f"ConfusionMatrix(multiclass=True, labels={self.labels!r}, n={self.n})"

    __str__ = __repr__


#: the binary cells in the order of the state's ``counts`` (and of
#: :meth:`BinaryCounts._cells_of`)
CELLS = ("tp", "fp", "fn", "tn")


def _cell(y, predicted_positive):
    """Index in :data:`CELLS` of an event's cell."""
    if predicted_positive:
        return 0 if y else 1
    return 2 if y else 3


def _events(k):
    """``"1 event"``, ``"3 events"`` (for messages)."""
    return f"{k} event" if k == 1 else f"{k} events"


def _negative(weights):
    """Whether any of a matrix's cell weights is further below 0 than rounding explains."""
    total = max(sum(abs(v) for v in weights), 1.0)
    return any(overdrawn(v, 0.0, total) for v in weights)


def _zero_counts(idx, weights):
    """Zero-weight events of a batch per cell, in :data:`CELLS` order (None: none);
    ``idx`` is the batch's cell index in :data:`CELLS`."""
    if weights is None:
        return None
    zero = weights == 0.0
    if not zero.any():
        return None
    return np.bincount(idx[zero], minlength=4).tolist()



# --------------------------------------------------------------------------- views


class _View(Metric):
    """A metric reading a confusion matrix: its own (``cm=None``) or a shared one."""

    def _own(self, cm):
        self.cm = cm
        self._shared = False
        # the metric's per-event methods are the matrix's (one call, no delegation)
        self.update = cm.update
        self.revert = cm.revert

    def _writable(self, what):
        if self._shared:
            raise TypeError(
                f"{self._public_name}(cm=...) reads a shared ConfusionMatrix: {what} the "
                "ConfusionMatrix itself (once per event), not each metric built on it"
            )
        return self.cm

    def update(self, y_true, y_pred, w=1.0):
        """Count one event in this metric's confusion matrix.

        Runtime complexity: `O(1)`.
        """
        self._writable("update").update(y_true, y_pred, w)

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event counted earlier (exact inverse of :meth:`update`).

        Runtime complexity: `O(1)`.
        """
        self._writable("revert").revert(y_true, y_pred, w)

    def validate(self, y_true, y_pred, w=None):
        """Check a batch (as the confusion matrix does); return its columns."""
        return self.cm.validate(y_true, y_pred, w)

    def update_trusted(self, y, s, w=None):
        """Count validated columns in this metric's confusion matrix."""
        self._writable("update").update_trusted(y, s, w)
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove validated columns counted earlier from this metric's matrix."""
        self._writable("revert").revert_trusted(y, s, w)
        return self

    def update_many(self, y_true, y_pred, w=None):
        """Count a batch; same result as a loop of :meth:`update` (validated first)."""
        self._writable("update_many on")
        return super().update_many(y_true, y_pred, w)

    def revert_many(self, y_true, y_pred, w=None):
        """Remove a batch counted earlier; same result as a loop of :meth:`revert`."""
        self._writable("revert_many on")
        return super().revert_many(y_true, y_pred, w)

    def merge(self, other):
        """Fold in ``other``'s events (same type and parameters); return ``self``."""
        self._writable("merge into")
        return super().merge(other)

    def _merge(self, other):
        self.cm._merge(other.cm)

    def subtract(self, other):
        """Take out ``other``'s events, merged earlier (the exact inverse of
        :meth:`merge`, see :meth:`streameval.metrics.base.Metric.subtract`); return
        ``self``. A view of a shared matrix refuses it with a ``TypeError``."""
        self._writable("subtract from")
        return super().subtract(other)

    def _subtract(self, other):
        theirs = other.cm
        if theirs is self.cm:  # (a view of this metric's own matrix: take out a copy)
            theirs = copy.deepcopy(theirs)
        self.cm._subtract_counts(theirs, f"the other {self._public_name}")

    def _get_data(self):
        return self.cm._get_data()

    def _set_data(self, data):
        self._writable("restore")._set_data(data)

    def _check(self):
        self.cm._check()


class _BinaryView(_View, BinaryMetric):
    _state_exclude = ("cm", "average", "multiclass")

    def _attach(self, cm, threshold, pos_label, neg_label):
        if cm is None:
            cm = _BinaryConfusionMatrix(
                threshold=threshold, pos_label=pos_label, neg_label=neg_label)
            self._own(cm)
        else:
            if not isinstance(cm, _BinaryConfusionMatrix):
                raise ValueError(
                    f"cm = {cm!r}: a binary {self._public_name} needs a binary "
                    f"ConfusionMatrix{self._multiclass_hint}"
                )
            if threshold is not None and check_threshold(threshold) != cm.threshold:
                raise ValueError(
                    f"threshold = {threshold!r} differs from the shared cm's {cm.threshold!r}"
                )
            if pos_label is not None or neg_label is not None:
                sets = label_sets(
                    cm.pos_label if pos_label is None else pos_label,
                    cm.neg_label if neg_label is None else neg_label,
                )
                if sets != (cm._pos_set, cm._neg_set):
                    raise ValueError(
                        f"pos_label = {pos_label!r}, neg_label = {neg_label!r} differ from "
                        f"the shared cm's {cm.pos_label!r}, {cm.neg_label!r}"
                    )
            self.cm = cm
            self._shared = True
        self.threshold = cm.threshold
        BinaryMetric.__init__(self, cm.pos_label, cm.neg_label)


class _MultiView(_View, MultiClassMetric):
    _state_exclude = ("cm", "threshold", "pos_label", "neg_label")

    def _attach(self, cm, threshold, pos_label, neg_label):
        no_binary_params(self._public_name, threshold, pos_label, neg_label)
        if cm is None:
            self._own(_MultiClassConfusionMatrix(multiclass=True))
        else:
            if not isinstance(cm, _MultiClassConfusionMatrix):
                raise ValueError(
                    f"cm = {cm!r}: a multiclass {self._public_name} needs a "
                    "ConfusionMatrix(multiclass=True)"
                )
            self.cm = cm
            self._shared = True


#: ``average=``: None (binary) or one of :data:`AVERAGES` (multiclass)
_AVERAGE = Options(None, *AVERAGES)


class _Averaged(_View, Cases):
    """Front of the metrics that average per-class values: ``average=None`` is binary."""

    _multiclass_hint = " (pass average='macro', 'micro' or 'weighted' to read a multiclass one)"

    @classmethod
    def _case(cls, args, kwargs):
        return "binary" if kwargs.get("average") is None else "multiclass"

    def __init__(self, *, threshold=None, pos_label=None, neg_label=None, average=None,
                 cm=None):
        self.average = check_param("average", average, _AVERAGE)
        self._attach(cm, threshold, pos_label, neg_label)


class _Whole(_View, Cases):
    """Front of the metrics of the whole matrix: ``multiclass=None`` follows ``cm``."""

    _multiclass_hint = " (pass multiclass=True to read a multiclass one)"

    @classmethod
    def _case(cls, args, kwargs):
        multiclass = kwargs.get("multiclass")
        if multiclass is None:
            multiclass = getattr(kwargs.get("cm"), "multiclass", False)
        return "multiclass" if multiclass else "binary"

    def __init__(self, *, threshold=None, pos_label=None, neg_label=None, multiclass=None,
                 cm=None):
        self.multiclass = isinstance(self, MultiClassMetric)
        self._attach(cm, threshold, pos_label, neg_label)


def counts_key(metric):
    """What decides a binary metric's confusion counts (its threshold and labels), as
    a hashable key, for a metric of this module that counts in its own binary matrix;
    None for any other (a view of a shared matrix, a multiclass metric, a subclass
    defined elsewhere): two metrics with the same key fed the same events hold the same
    counts (precision, recall, F1, accuracy...), so a Monitor keeps one matrix and
    reads it for all of them (:class:`CountsView`)."""
    if (isinstance(metric, _BinaryView) and type(metric).__module__ == __name__
            and not metric._shared and type(metric.cm) is _BinaryConfusionMatrix):
        cm = metric.cm
        return (cm.threshold, cm.pos_label, cm.neg_label)
    return None


class CountsView(SharedView):
    """A read-only binary metric of the confusion family that reads another one's matrix.

    ``template`` is an empty metric (or a window over one, as the Monitor holds it)
    of the view's kind, ``owner`` an object of the same structure whose metric has the
    same :func:`counts_key` and is fed the same events (a Monitor's ``precision``,
    ``recall``, ``f1`` and ``accuracy``; their ``@10000`` windows). ``inner`` maps such
    an object to its metric (the object itself, or a window's current ``metric``).

    ``get()`` and ``interval(level)`` are the template's on the owner's matrix, and
    ``to_state()`` is exactly the state the template would have if it had been fed the
    owner's events (so checkpoints do not change and load into unshared metrics).
    Nothing updates a view: ``update``, ``update_many``, ``update_trusted``, ``revert``,
    ``merge`` and ``subtract`` raise ``TypeError`` (the owner is updated instead;
    sharing never double counts). Other attributes (``size``, ``late``, ``newest``...)
    are the owner's; ``clone()`` is a fresh, unshared copy of the template.

    Runtime complexity: ``get`` and ``interval`` are the template kind's, `O(1)`.
    """

    key_of = staticmethod(counts_key)
    what = "matrix"
    mismatch = ("a CountsView reads a binary confusion-family metric of the same "
                "threshold and labels")
    refusal = "a shared confusion-matrix view is read-only: its owner is updated"

    def _linked(self):
        """The template, its metric reading the owner's current matrix."""
        cm = self._inner(self.owner).cm
        m = self._metric
        if m.cm is not cm:
            m.cm = cm
        return self.template

    @property
    def _has_interval(self):
        return has_interval(self.template)

    def to_state(self):
        self._linked()
        return self._window_state(self._metric.to_state())


def _div(a, b):
    return a / b if b else _NAN


def _average(values, support, average):
    """Mean of the defined per-class values (macro) or weighted by support (weighted)."""
    defined = ~np.isnan(values)
    if not defined.any():
        return _NAN
    values = values[defined]
    if average == "macro":
        return float(np.mean(values))
    weights = support[defined]
    total = weights.sum()
    return float(np.dot(values, weights) / total) if total > 0 else _NAN


def _per_class(num, den):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1.0), np.nan)



def _f_binary(cm, b2):
    tp = cm.tp
    return _div((1.0 + b2) * tp, (1.0 + b2) * tp + b2 * cm.fn + cm.fp)


def _f_multiclass(cm, b2, average):
    _, tp, pred, true = cm._sums()
    if average == "micro":
        tp, pred, true = tp.sum(), pred.sum(), true.sum()
        return _div((1.0 + b2) * tp, b2 * true + pred)
    return _average(_per_class((1.0 + b2) * tp, b2 * true + pred), true, average)


_PARAMS_AVERAGED = """
    Parameters
    ----------
    threshold
        Binary: positive when ``score >= threshold``; default 0.5 (or the shared cm's).
    pos_label, neg_label
        Binary: the positive and negative labels; default True/1 and False/0.
    average
        None (default): binary. ``"macro"`` (mean over classes of the defined per-class
        values), ``"micro"`` (from the summed counts) or ``"weighted"`` (mean weighted
        by each class's true weight): multiclass, as sklearn's ``average=`` with
        ``zero_division=np.nan``.
    cm
        A shared :class:`ConfusionMatrix` to read (this metric is then a read-only view).
"""

_PARAMS_WHOLE = """
    Parameters
    ----------
    threshold
        Binary: positive when ``score >= threshold``; default 0.5 (or the shared cm's).
    pos_label, neg_label
        Binary: the positive and negative labels; default True/1 and False/0.
    multiclass
        True for the multiclass metric; default: as ``cm``, else binary.
    cm
        A shared :class:`ConfusionMatrix` to read (this metric is then a read-only view).
"""


def _with_params(params, **first):
    """Append the shared parameters section (after ``first``: name -> text) to a docstring."""
    extra = "".join(f"    {k}\n        {v}\n" for k, v in first.items())
    head = "    Parameters\n    ----------\n"

    def decorate(cls):
        cls.__doc__ = cls.__doc__.rstrip() + "\n" + params.replace(head, head + extra)
        return cls

    return decorate


# ------------------------------------------------------------- confidence intervals


def _proportion_parts(self):
    """The interval parts (:func:`streameval.metrics.base.interval_of`) of a
    proportion metric, from its case's ``_counts()``: ``(x, n)``, one proportion (binary,
    multiclass accuracy, micro averages), gives the Wilson score interval with continuity
    correction of ``x / n``;
    ``(num, den, support)`` per class (macro and weighted averages) gives a normal
    interval around the metric's value whose variance combines the classes' Wilson
    variances, weighted as :func:`_average` weighs the classes (``1/K`` over the ``K``
    defined classes; ``support / total``), as if the classes' proportions were
    independent. None (``(nan, nan)``) wherever ``get()`` is nan."""
    counts = self._counts()
    if len(counts) == 2:
        x, n = counts
        return ["wilson", float(x), float(n)] if n > 0 else None
    num, den, support = counts
    value = _average(_per_class(num, den), support, self.average)
    if value != value:
        return None
    defined = den != 0
    if self.average == "macro":
        a = np.full(int(defined.sum()), 1.0 / int(defined.sum()))
    else:
        w = support[defined]
        a = w / w.sum()
    return ["wilson_mean", value, a.tolist(), num[defined].tolist(), den[defined].tolist()]


class _Proportion:
    """What the proportion metrics add to their fronts: ``interval(level)``, the
    Wilson score interval with continuity correction (see :func:`_proportion_parts`)."""

    _has_interval = True
    _interval_parts = _proportion_parts


# -------------------------------------------------------------------------- Accuracy


@_with_params(_PARAMS_WHOLE)
class Accuracy(_Proportion, _Whole):
    """Accuracy: the weighted share of events predicted right.

    Binary ``(tp + tn) / (tp + fp + fn + tn)``; multiclass ``sum_c C[c, c] / sum C``.
    Equal to ``sklearn.metrics.accuracy_score``; NaN before any weight.

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass.

    >>> from streameval import Accuracy
    >>> m = Accuracy()
    >>> for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
    ...     m.update(y, s)
    >>> round(m.get(), 6)
    0.666667

    ``interval(level)``: the continuity-corrected Wilson score interval of ``x / n``, ``x = tp + tn``, ``n``
    the total weight (multiclass: the weight on the diagonal over the total); weights
    are frequency weights; see :meth:`~streameval.metrics.base.Metric.interval`.

    >>> [round(v, 6) for v in m.interval(0.95)]
    [0.125334, 0.982347]
    """


class _BinaryAccuracy(Accuracy, _BinaryView, case="binary"):

    def get(self):
        cm = self.cm
        right = cm.tp + cm.tn
        return _div(right, right + cm.fp + cm.fn)

    def _counts(self):
        cm = self.cm
        x = cm.tp + cm.tn
        return x, x + cm.fp + cm.fn


class _MultiClassAccuracy(Accuracy, _MultiView, case="multiclass"):

    def get(self):
        _, tp, _, true = self.cm._sums()
        return _div(tp.sum(), true.sum())

    def _counts(self):
        _, tp, _, true = self.cm._sums()
        return tp.sum(), true.sum()



@_with_params(_PARAMS_WHOLE)
class ErrorRate(_Proportion, _Whole):
    """Error rate: the weighted share of events predicted wrong, ``1 - accuracy``.

    Binary ``(fp + fn) / (tp + fp + fn + tn)``; multiclass ``1 - sum_c C[c, c] / sum C``.
    Equal to ``sklearn.metrics.zero_one_loss``; NaN before any weight.

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass.

    >>> from streameval import ErrorRate
    >>> m = ErrorRate()
    >>> for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
    ...     m.update(y, s)
    >>> round(m.get(), 6)
    0.333333

    ``interval(level)``: the continuity-corrected Wilson score interval of ``x / n``, ``x = fp + fn``, ``n``
    the total weight (multiclass: the weight off the diagonal over the total); weights
    are frequency weights; see :meth:`~streameval.metrics.base.Metric.interval`.

    >>> [round(v, 6) for v in m.interval(0.95)]
    [0.017653, 0.874666]
    """

    @property
    def bigger_is_better(self):
        return False


class _BinaryErrorRate(ErrorRate, _BinaryView, case="binary"):

    def get(self):
        cm = self.cm
        wrong = cm.fp + cm.fn
        return _div(wrong, wrong + cm.tp + cm.tn)

    def _counts(self):
        cm = self.cm
        x = cm.fp + cm.fn
        return x, x + cm.tp + cm.tn


class _MultiClassErrorRate(ErrorRate, _MultiView, case="multiclass"):

    def get(self):
        _, tp, _, true = self.cm._sums()
        total = true.sum()
        return _div(total - tp.sum(), total)

    def _counts(self):
        _, tp, _, true = self.cm._sums()
        total = true.sum()
        return total - tp.sum(), total



# --------------------------------------------------------------- precision and recall


@_with_params(_PARAMS_AVERAGED)
class Precision(_Proportion, _Averaged):
    """Precision: the weighted share of predicted positives that are positive.

    Binary ``tp / (tp + fp)``, NaN with no predicted positive. Multiclass: per class
    ``C[c, c] / sum_t C[t, c]``, averaged by ``average``. Equal to
    ``sklearn.metrics.precision_score`` where that is defined.

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass.

    >>> from streameval import Precision
    >>> m = Precision()
    >>> for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
    ...     m.update(y, s)
    >>> m.get()
    0.5
    >>> m = Precision(average="macro")
    >>> for y, p in [("cat", "cat"), ("dog", "cat"), ("dog", "dog")]:
    ...     m.update(y, p)
    >>> m.get()  # (1/2 + 1/1) / 2
    0.75

    ``interval(level)``: the continuity-corrected Wilson score interval of ``x / n`` with ``x = tp`` and
    ``n = tp + fp`` (weights are frequency weights; see
    :meth:`~streameval.metrics.base.Metric.interval`). Multiclass: ``micro`` is one
    proportion of the summed counts (Wilson); ``macro`` and ``weighted`` a normal
    interval around the average whose variance combines the classes' Wilson
    variances as if they were independent.

    >>> [round(v, 6) for v in m.interval(0.95)]  # the macro precision's
    [0.466365, 1.0]
    """


class _BinaryPrecision(Precision, _BinaryView, case="binary"):

    def get(self):
        cm = self.cm
        tp = cm.tp
        return _div(tp, tp + cm.fp)

    def _counts(self):
        cm = self.cm
        x = cm.tp
        return x, x + cm.fp


class _MultiClassPrecision(Precision, _MultiView, case="multiclass"):

    def get(self):
        _, tp, pred, true = self.cm._sums()
        if self.average == "micro":
            return _div(tp.sum(), pred.sum())
        return _average(_per_class(tp, pred), true, self.average)

    def _counts(self):
        _, tp, pred, true = self.cm._sums()
        if self.average == "micro":
            return tp.sum(), pred.sum()
        return tp, pred, true



@_with_params(_PARAMS_AVERAGED)
class Recall(_Proportion, _Averaged):
    """Recall (true positive rate): the weighted share of positives predicted positive.

    Binary ``tp / (tp + fn)``, NaN with no positive. Multiclass: per class
    ``C[c, c] / sum_p C[c, p]``, averaged by ``average``. Equal to
    ``sklearn.metrics.recall_score`` where that is defined.

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass.

    >>> from streameval import Recall
    >>> m = Recall()
    >>> for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
    ...     m.update(y, s)
    >>> m.get()
    1.0

    ``interval(level)``: the continuity-corrected Wilson score interval of ``x / n`` with ``x = tp`` and
    ``n = tp + fn`` (weights are frequency weights; see
    :meth:`~streameval.metrics.base.Metric.interval`). Multiclass: ``micro`` is one
    proportion of the summed counts (Wilson); ``macro`` and ``weighted`` a normal
    interval around the average whose variance combines the classes' Wilson
    variances as if they were independent.

    >>> [round(v, 6) for v in m.interval(0.95)]
    [0.054621, 1.0]
    """


class _BinaryRecall(Recall, _BinaryView, case="binary"):

    def get(self):
        cm = self.cm
        tp = cm.tp
        return _div(tp, tp + cm.fn)

    def _counts(self):
        cm = self.cm
        x = cm.tp
        return x, x + cm.fn


class _MultiClassRecall(Recall, _MultiView, case="multiclass"):

    def get(self):
        _, tp, _, true = self.cm._sums()
        if self.average == "micro":
            return _div(tp.sum(), true.sum())
        return _average(_per_class(tp, true), true, self.average)

    def _counts(self):
        _, tp, _, true = self.cm._sums()
        if self.average == "micro":
            return tp.sum(), true.sum()
        return tp, true, true



def _negatives(cm):
    """Per class (one-vs-rest): false positives, true negatives and true weight."""
    _, tp, pred, true = cm._sums()
    total = true.sum()
    fp = pred - tp
    tn = total - true - pred + tp
    return fp, tn, true


@_with_params(_PARAMS_AVERAGED)
class FPR(_Proportion, _Averaged):
    """False positive rate: the weighted share of negatives predicted positive.

    Binary ``fp / (fp + tn)``, NaN with no negative. Multiclass: one-vs-rest per class
    ``fp_c / (fp_c + tn_c)``, averaged by ``average`` (micro: ``sum fp / sum (fp + tn)``).
    Equal to ``1 - recall_score(pos_label=neg_label)``; multiclass to the same formula
    over ``sklearn.metrics.multilabel_confusion_matrix``.

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass.

    >>> from streameval import FPR
    >>> m = FPR()
    >>> for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
    ...     m.update(y, s)
    >>> m.get()
    0.5

    ``interval(level)``: the continuity-corrected Wilson score interval of ``x / n`` with ``x = fp`` and
    ``n = fp + tn`` (weights are frequency weights; see
    :meth:`~streameval.metrics.base.Metric.interval`). Multiclass: ``micro`` is one
    proportion of the summed counts (Wilson); ``macro`` and ``weighted`` a normal
    interval around the average whose variance combines the classes' Wilson
    variances as if they were independent.
    (``micro`` counts each event once per class it is a negative of, ``k - 1``
    times with ``k`` classes, as its value does: a narrower interval than the
    events alone would give.)

    >>> [round(v, 6) for v in m.interval(0.95)]
    [0.026677, 0.973323]
    """

    @property
    def bigger_is_better(self):
        return False


class _BinaryFPR(FPR, _BinaryView, case="binary"):

    def get(self):
        cm = self.cm
        fp = cm.fp
        return _div(fp, fp + cm.tn)

    def _counts(self):
        cm = self.cm
        x = cm.fp
        return x, x + cm.tn


class _MultiClassFPR(FPR, _MultiView, case="multiclass"):

    def get(self):
        fp, tn, true = _negatives(self.cm)
        if self.average == "micro":
            return _div(fp.sum(), fp.sum() + tn.sum())
        return _average(_per_class(fp, fp + tn), true, self.average)

    def _counts(self):
        fp, tn, true = _negatives(self.cm)
        if self.average == "micro":
            return fp.sum(), fp.sum() + tn.sum()
        return fp, fp + tn, true



@_with_params(_PARAMS_AVERAGED)
class Specificity(_Proportion, _Averaged):
    """Specificity (true negative rate): the weighted share of negatives predicted negative.

    Binary ``tn / (tn + fp)``, NaN with no negative. Multiclass: one-vs-rest per class
    ``tn_c / (tn_c + fp_c)``, averaged by ``average`` (micro: ``sum tn / sum (tn + fp)``).
    Equal to ``sklearn.metrics.recall_score(pos_label=neg_label)``.

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass.

    >>> from streameval import Specificity
    >>> m = Specificity()
    >>> for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
    ...     m.update(y, s)
    >>> m.get()
    0.5

    ``interval(level)``: the continuity-corrected Wilson score interval of ``x / n`` with ``x = tn`` and
    ``n = tn + fp`` (weights are frequency weights; see
    :meth:`~streameval.metrics.base.Metric.interval`). Multiclass: ``micro`` is one
    proportion of the summed counts (Wilson); ``macro`` and ``weighted`` a normal
    interval around the average whose variance combines the classes' Wilson
    variances as if they were independent.
    (``micro`` counts each event once per class it is a negative of, ``k - 1``
    times with ``k`` classes, as its value does: a narrower interval than the
    events alone would give.)

    >>> [round(v, 6) for v in m.interval(0.95)]
    [0.026677, 0.973323]
    """


class _BinarySpecificity(Specificity, _BinaryView, case="binary"):

    def get(self):
        cm = self.cm
        tn = cm.tn
        return _div(tn, tn + cm.fp)

    def _counts(self):
        cm = self.cm
        x = cm.tn
        return x, x + cm.fp


class _MultiClassSpecificity(Specificity, _MultiView, case="multiclass"):

    def get(self):
        fp, tn, true = _negatives(self.cm)
        if self.average == "micro":
            return _div(tn.sum(), fp.sum() + tn.sum())
        return _average(_per_class(tn, fp + tn), true, self.average)

    def _counts(self):
        fp, tn, true = _negatives(self.cm)
        if self.average == "micro":
            return tn.sum(), fp.sum() + tn.sum()
        return tn, fp + tn, true



# -------------------------------------------------------------------------- F-scores


@_with_params(_PARAMS_AVERAGED, beta="Weight of recall, a finite number >= 0 (0 gives precision).")
class FBeta(_Averaged):
    """F-beta score: the weighted harmonic mean of precision and recall.

    ``F_b = (1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp)``, i.e.
    ``(1 + b^2) P R / (b^2 P + R)``; recall counts ``b`` times as much as precision.
    NaN when ``tp + fp + fn == 0``; 0 when ``tp == 0`` otherwise (even if precision is
    undefined), as ``sklearn.metrics.fbeta_score``. Multiclass: per class, averaged.

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass.

    >>> from streameval import FBeta
    >>> m = FBeta(beta=2.0)
    >>> for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
    ...     m.update(y, s)
    >>> round(m.get(), 6)  # 5 * 1 / (5 * 1 + 4 * 0 + 1)
    0.833333
    """

    def __init__(self, beta, *, threshold=None, pos_label=None, neg_label=None,
                 average=None, cm=None):
        self.beta = check_param("beta", beta, Real(0))
        self._b2 = self.beta * self.beta
        super().__init__(threshold=threshold, pos_label=pos_label, neg_label=neg_label,
                         average=average, cm=cm)


class _BinaryFBeta(FBeta, _BinaryView, case="binary"):

    def get(self):
        return _f_binary(self.cm, self._b2)


class _MultiClassFBeta(FBeta, _MultiView, case="multiclass"):

    def get(self):
        return _f_multiclass(self.cm, self._b2, self.average)



@_with_params(_PARAMS_AVERAGED)
class F1(_Averaged):
    """F1 score: the harmonic mean of precision and recall, ``FBeta(beta=1)``.

    ``F1 = 2 tp / (2 tp + fn + fp)``; NaN when ``tp + fp + fn == 0``. Equal to
    ``sklearn.metrics.f1_score`` where that is defined.

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass.

    >>> from streameval import F1
    >>> m = F1()
    >>> for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
    ...     m.update(y, s)
    >>> round(m.get(), 6)
    0.666667
    """

    _b2 = 1.0


class _BinaryF1(F1, _BinaryView, case="binary"):

    def get(self):
        return _f_binary(self.cm, 1.0)


class _MultiClassF1(F1, _MultiView, case="multiclass"):

    def get(self):
        return _f_multiclass(self.cm, 1.0, self.average)



@_with_params(_PARAMS_AVERAGED, alpha="Weight of precision, in ``(0, 1]`` (1 gives precision, 1/2 F1).")
class FAlpha(_Averaged):
    """F-alpha score (van Rijsbergen): ``F_a = 1 / (a / P + (1 - a) / R)``.

    The same as ``FBeta(beta)`` with ``beta^2 = 1/a - 1``, computed as
    ``tp / (tp + a fp + (1 - a) fn)``: ``a = 1`` is precision, ``a = 1/2`` is F1, and a
    smaller ``a`` weighs recall more. NaN when undefined (as :class:`FBeta`).

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass.

    >>> from streameval import FAlpha
    >>> m = FAlpha(alpha=0.2)
    >>> for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
    ...     m.update(y, s)
    >>> round(m.get(), 6)  # 1 / (0.2 / 0.5 + 0.8 / 1.0)
    0.833333
    """

    def __init__(self, alpha, *, threshold=None, pos_label=None, neg_label=None,
                 average=None, cm=None):
        self.alpha = check_param("alpha", alpha, Real(0, 1, open_low=True))
        self._b2 = 1.0 / self.alpha - 1.0
        super().__init__(threshold=threshold, pos_label=pos_label, neg_label=neg_label,
                         average=average, cm=cm)


def _f_alpha(tp, fp, fn, a):
    return _div(tp, tp + a * fp + (1.0 - a) * fn)


class _BinaryFAlpha(FAlpha, _BinaryView, case="binary"):

    def get(self):
        cm = self.cm
        return _f_alpha(cm.tp, cm.fp, cm.fn, self.alpha)


class _MultiClassFAlpha(FAlpha, _MultiView, case="multiclass"):

    def get(self):
        _, tp, pred, true = self.cm._sums()
        a = self.alpha
        if self.average == "micro":
            tp, pred, true = tp.sum(), pred.sum(), true.sum()
            return _f_alpha(tp, pred - tp, true - tp, a)
        fp, fn = pred - tp, true - tp
        return _average(_per_class(tp, tp + a * fp + (1.0 - a) * fn), true, self.average)



# ----------------------------------------------------------- balanced accuracy and MCC


@_with_params(_PARAMS_WHOLE)
class BalancedAccuracy(_Whole):
    """Balanced accuracy: the mean of the per-class recalls.

    Binary ``(tp / (tp + fn) + tn / (tn + fp)) / 2``, NaN unless both classes have
    weight. Multiclass: the mean of ``C[c, c] / sum_p C[c, p]`` over the classes with
    true weight (NaN if none). Equal to ``sklearn.metrics.balanced_accuracy_score``
    where that is defined (sklearn averages over the classes it finds, so with one
    class absent it returns the other's recall, with a warning; we return NaN).

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass.

    >>> from streameval import BalancedAccuracy
    >>> m = BalancedAccuracy()
    >>> for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
    ...     m.update(y, s)
    >>> m.get()  # (1 + 1/2) / 2
    0.75
    """


class _BinaryBalancedAccuracy(BalancedAccuracy, _BinaryView, case="binary"):

    def get(self):
        cm = self.cm
        tp, tn = cm.tp, cm.tn
        pos, neg = tp + cm.fn, tn + cm.fp
        if not pos or not neg:
            return _NAN
        return (tp / pos + tn / neg) / 2.0


class _MultiClassBalancedAccuracy(BalancedAccuracy, _MultiView, case="multiclass"):

    def get(self):
        _, tp, _, true = self.cm._sums()
        present = true != 0
        if not present.any():
            return _NAN
        return float(np.mean(tp[present] / true[present]))



@_with_params(_PARAMS_WHOLE)
class MCC(_Whole):
    """Matthews correlation coefficient: the correlation of true and predicted classes.

    Binary ``(tp tn - fp fn) / sqrt((tp + fp)(tp + fn)(tn + fp)(tn + fn))``.
    Multiclass (Gorodkin's R_K), with ``t_c`` true and ``p_c`` predicted weight per
    class, ``c`` the weight right and ``s`` the total:
    ``(c s - sum t_c p_c) / sqrt((s^2 - sum p_c^2)(s^2 - sum t_c^2))``.
    NaN when the denominator is 0 (sklearn's ``matthews_corrcoef`` returns 0 there);
    otherwise equal to it.

    Runtime complexity: `update` `O(1)`; `get` `O(1)` binary, `O(k^2)` multiclass.

    >>> from streameval import MCC
    >>> m = MCC()
    >>> for y, s in zip([True, True, False, False], [0.7, 0.2, 0.3, 0.5]):
    ...     m.update(y, s)
    >>> m.get()
    0.0
    """


class _BinaryMCC(MCC, _BinaryView, case="binary"):

    def get(self):
        cm = self.cm
        tp, fp, fn, tn = cm.tp, cm.fp, cm.fn, cm.tn
        sqrt = math.sqrt  # one root per factor: no underflow or overflow of the product
        den = sqrt(tp + fp) * sqrt(tp + fn) * sqrt(tn + fp) * sqrt(tn + fn)
        return _div(tp * tn - fp * fn, den)


class _MultiClassMCC(MCC, _MultiView, case="multiclass"):

    def get(self):
        _, tp, pred, true = self.cm._sums()
        s = true.sum()
        cov_tp = tp.sum() * s - np.dot(true, pred)
        cov_pp = s * s - np.dot(pred, pred)
        cov_tt = s * s - np.dot(true, true)
        den = cov_pp * cov_tt
        return float(cov_tp / math.sqrt(den)) if den > 0 else _NAN

