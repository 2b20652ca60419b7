"""Probabilistic metrics: log loss and Brier score, binary and multiclass.

Both are weighted means of a per-event loss (see
:class:`streameval.metrics.common.WeightedMean`: compensated sums, exact ``revert``,
NaN before any weight). Scores must be probabilities in ``[0, 1]``.

Binary (default): ``y_pred`` is the positive class's probability, or a river
probability dict ``{True: p, False: 1 - p}``. Multiclass (``multiclass=True``):
``y_pred`` is a dict ``{class: probability}`` (an absent class has probability 0);
with ``labels=[...]`` (the column order), ``update_many`` also takes a 2-D array of
probabilities, vectorised.

Binary metrics take the binary columns of the trusted path (``score_bounds = (0.0,
1.0)``: a Monitor checks probabilities once); multiclass ones validate into their own
columns (the events, or 2-D probabilities with their true columns).
``LogLoss(...)`` and ``Brier(...)`` return an instance of a binary or a multiclass
case class, both subclasses of the public class
(:class:`streameval.metrics.base.Cases`).

It may import numpy, :mod:`streameval.validation` and the metrics' ``base`` and
``common`` modules.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from streameval.validation import as_weight_array, check_same_length, fail

from .base import BinaryMetric, Cases, MultiClassMetric
from .common import WeightedMean, factorize, no_binary_params

__all__ = ["LogLoss", "Brier"]

_NAN = math.nan
_MAXF = sys.float_info.max
#: probabilities are clipped to [EPS, 1 - EPS], as ``sklearn.metrics.log_loss`` (1.9)
#: does for float64 (the machine epsilon of the dtype)
EPS = float(np.finfo(np.float64).eps)
_ONE = 1.0 - EPS
_log = math.log


class _Probabilistic(WeightedMean, Cases):
    """Front of LogLoss and Brier: ``multiclass=False`` (binary) or True."""

    #: losses of probabilities are bounded (log loss by ``-ln(eps)``, Brier by 2 or
    #: the number of classes): only huge weights can overflow
    _bounded_loss = True

    @classmethod
    def _case(cls, args, kwargs):
        return "multiclass" if kwargs.get("multiclass") else "binary"

    def __init__(self, *, pos_label=None, neg_label=None, multiclass=False, labels=None):
        self.multiclass = isinstance(self, MultiClassMetric)
        self._reset()
        self._setup(pos_label, neg_label, labels)

    @property
    def bigger_is_better(self):
        return False

    @property
    def requires_labels(self):
        # river then passes predict_proba_one's dict
        return False

    def __repr__(self):
        return f"{self._public_name}: {self.get():.6f}"

    __str__ = __repr__


class _BinaryProbabilistic(_Probabilistic, BinaryMetric):
    _state_exclude = ("cm", "multiclass", "labels")
    score_bounds = (0.0, 1.0)

    def _setup(self, pos_label, neg_label, labels):
        if labels is not None:
            raise ValueError(
                f"labels = {labels!r}: applies to a multiclass {self._public_name} only"
            )
        self.labels = None
        BinaryMetric.__init__(self, True if pos_label is None else pos_label, neg_label)
        (pos,) = self._pos_set
        (neg,) = self._neg_set
        self._labels = {pos: True, neg: False}

    def _proba(self, y_pred, name="y_pred"):
        s = self._score(y_pred, name)
        if not 0.0 <= s <= 1.0:
            fail(name, y_pred, "probability must be in [0, 1]")
        return s

    def _event(self, a, b, i):
        return self.label_of(bool(a[i])), b[i]

    def _explain(self, y_true, y_pred, w):  # pragma: no cover - losses are bounded
        raise ValueError(f"(y_true={y_true!r}, y_pred={y_pred!r}, w={w!r}): loss overflows")


class _MultiClassProbabilistic(_Probabilistic, MultiClassMetric):
    _state_exclude = ("cm", "pos_label", "neg_label")

    def _setup(self, pos_label, neg_label, labels):
        no_binary_params(self._public_name, None, pos_label, neg_label)
        if labels is not None:
            labels = list(labels)
            for i, v in enumerate(labels):
                MultiClassMetric._class(v, f"labels[{i}]")
            if not labels or len(set(labels)) != len(labels):
                raise ValueError(f"labels = {labels!r}: must be distinct classes, at least one")
            self._columns = {v: i for i, v in enumerate(labels)}
        self.labels = labels

    def _check_event(self, y_true, y_pred, name=""):
        """Validate one event: ``(y_true, probability dict)``."""
        t = type(y_true)
        if t is not str and t is not int:
            MultiClassMetric._class(y_true, "y_true" + name)
        if self.labels is not None and y_true not in self._columns:
            fail("y_true" + name, y_true, f"not one of labels {self.labels!r}")
        if type(y_pred) is not dict:
            fail("y_pred" + name, y_pred,
                  f"a multiclass {self._public_name} needs a dict {{class: probability}}")
        columns = self.labels is not None and self._columns
        for c, v in y_pred.items():
            if type(v) is not float or not 0.0 <= v <= 1.0:
                if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not (
                    0.0 <= v <= 1.0
                ):
                    fail("y_pred" + name, y_pred, "probabilities must be numbers in [0, 1]")
            if columns and c not in columns:
                fail("y_pred" + name, y_pred, f"class {c!r} is not one of labels {self.labels!r}")

    def validate(self, y_true, y_pred, w=None):
        """Check a batch without changing anything; return its columns: ``(true
        classes, probability dicts, weights)``, or for a 2-D array of probabilities
        (which needs ``labels``) ``((probabilities, true columns), None, weights)``.

        Runtime complexity: `O(m k)` for `k` classes per event.
        """
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        weights = as_weight_array(w, n)
        if isinstance(y_pred, np.ndarray) and y_pred.ndim == 2:
            columns = self._matrix_batch(y_true, y_pred, n), None, weights
        else:
            check = self._check_event
            for i in range(n):
                check(y_true[i], y_pred[i], f"[{i}]")
            columns = list(y_true), list(y_pred), weights
        self._check_columns(*columns)
        return columns

    _batch = validate

    def _event(self, a, b, i):
        if b is None:  # 2-D probabilities and their true columns
            proba, cols = a
            return self.labels[int(cols[i])], proba[i].tolist()
        return a[i], b[i]

    @staticmethod
    def _length(a, b):
        return len(a[0]) if b is None else len(a)

    def _matrix_batch(self, y_true, proba, n):
        if self.labels is None:
            raise ValueError(
                f"y_pred is a {proba.shape} array: a multiclass {self._public_name} takes "
                "2-D probabilities only with labels= (their column order)"
            )
        if proba.shape != (n, len(self.labels)):
            raise ValueError(
                f"y_pred has shape {proba.shape}; expected ({n}, {len(self.labels)}) "
                f"for labels {self.labels!r}"
            )
        proba = proba.astype(np.float64, copy=False)
        bad = ~((proba >= 0.0) & (proba <= 1.0)).all(axis=1)
        if bad.any():
            i = int(np.argmax(bad))
            fail("y_pred", proba[i].tolist(), "probabilities must be numbers in [0, 1]", i)
        classes, codes = factorize(y_true, "y_true")
        columns = self._columns
        lookup = np.empty(len(classes), dtype=np.int64)
        for j, c in enumerate(classes):
            col = columns.get(c)
            if col is None:
                i = int(np.argmax(codes == j))
                fail("y_true", c, f"not one of labels {self.labels!r}", i)
            lookup[j] = col
        return proba, lookup[codes]

    def _losses(self, y_true, y_pred):
        if y_pred is None:  # 2-D probabilities and their true columns
            proba, cols = y_true
            return self._matrix_loss(proba, cols)
        loss = self._dict_loss  # events validated by validate
        return np.fromiter((loss(t, p) for t, p in zip(y_true, y_pred)), dtype=np.float64,
                           count=len(y_true))

    def _loss(self, y_true, y_pred):
        self._check_event(y_true, y_pred)
        return self._dict_loss(y_true, y_pred)

    def _explain(self, y_true, y_pred, w):  # pragma: no cover - losses are bounded
        raise ValueError(f"(y_true={y_true!r}, y_pred={y_pred!r}, w={w!r}): loss overflows")


# --------------------------------------------------------------------------- LogLoss


class LogLoss(_Probabilistic):
    """Log loss (cross-entropy), weighted: ``-sum(w ln p_y) / sum(w)``.

    ``p_y`` is the probability given to the true class (binary: ``p`` for a positive,
    ``1 - p`` for a negative), clipped to ``[eps, 1 - eps]`` with ``eps`` the machine
    epsilon of float64, as ``sklearn.metrics.log_loss`` (1.9) does; equal to it
    (with ``sample_weight``; multiclass with ``labels=`` the classes). Multiclass
    probability dicts are not renormalised (sklearn warns when rows do not sum to 1
    and does not renormalise either).

    Runtime complexity: `update` `O(1)` (`O(k)` multiclass); `get` `O(1)`.

    >>> from streameval import LogLoss
    >>> m = LogLoss()
    >>> for y, p in zip([True, False, False, True], [0.9, 0.1, 0.2, 0.65]):
    ...     m.update(y, p)
    >>> round(m.get(), 6)
    0.216162
    >>> m = LogLoss(multiclass=True)
    >>> m.update("cat", {"cat": 0.5, "dog": 0.5})
    >>> round(m.get(), 6)
    0.693147

    Parameters
    ----------
    pos_label, neg_label
        Binary: the positive and negative labels; default True/1 and False/0.
    multiclass
        True for the multiclass log loss (``y_pred`` a dict of class probabilities).
    labels
        Multiclass, optional: the classes, in the column order of 2-D probability
        arrays given to ``update_many``; ``y_true`` must then be one of them.
    """


class _BinaryLogLoss(LogLoss, _BinaryProbabilistic, case="binary"):

    _sums_by_class = True  # (the losses of the columns alone: see WeightedMean)

    def _loss(self, y_true, y_pred):
        try:
            y = self._labels[y_true]
        except (KeyError, TypeError):
            y = self._label(y_true)
        if type(y_pred) is not float or not 0.0 <= y_pred <= 1.0:
            y_pred = self._proba(y_pred)
        p = y_pred if y else 1.0 - y_pred
        if p < EPS:
            p = EPS
        elif p > _ONE:
            p = _ONE
        return -_log(p)

    @staticmethod
    def _losses(labels, scores):
        p = scores - ~labels  # s for a positive, s - 1 = -(1 - s) exactly for a negative
        np.abs(p, out=p)  # in place: a new 8 MB array per step costs more than the step
        np.clip(p, EPS, _ONE, out=p)
        np.log(p, out=p)
        return np.negative(p, out=p)


class _MultiClassLogLoss(LogLoss, _MultiClassProbabilistic, case="multiclass"):

    @staticmethod
    def _dict_loss(y_true, y_pred):
        p = y_pred.get(y_true, 0.0)
        if p < EPS:
            p = EPS
        elif p > _ONE:
            p = _ONE
        return -_log(p)

    @staticmethod
    def _matrix_loss(proba, cols):
        p = np.clip(proba[np.arange(len(cols)), cols], EPS, _ONE)
        return -np.log(p)



# ----------------------------------------------------------------------------- Brier


class Brier(_Probabilistic):
    """Brier score, weighted: the mean squared distance of the probabilities to the truth.

    Binary: ``sum(w (p - y)^2) / sum(w)`` with ``y`` 1 for a positive and ``p`` the
    positive probability, in ``[0, 1]``; equal to ``sklearn.metrics.brier_score_loss``.
    Multiclass: Brier's original score ``sum(w sum_c (p_c - [y = c])^2) / sum(w)``
    over all classes, in ``[0, 2]`` (not halved); equal to ``brier_score_loss(...,
    labels=classes, scale_by_half=False)``. With two classes it is twice the binary
    score.

    Runtime complexity: `update` `O(1)` (`O(k)` multiclass); `get` `O(1)`.

    >>> from streameval import Brier
    >>> m = Brier()
    >>> for y, p in zip([0, 1, 1, 0], [0.1, 0.9, 0.8, 0.3]):
    ...     m.update(y, p)
    >>> round(m.get(), 6)
    0.0375
    >>> m = Brier(multiclass=True)
    >>> m.update("eggs", {"eggs": 0.8, "ham": 0.1, "spam": 0.1})
    >>> round(m.get(), 6)  # 0.2^2 + 0.1^2 + 0.1^2
    0.06

    Parameters
    ----------
    pos_label, neg_label
        Binary: the positive and negative labels; default True/1 and False/0.
    multiclass
        True for the multiclass score (``y_pred`` a dict of class probabilities).
    labels
        Multiclass, optional: the classes, in the column order of 2-D probability
        arrays given to ``update_many``; ``y_true`` must then be one of them.
    """


class _BinaryBrier(Brier, _BinaryProbabilistic, case="binary"):

    _sums_by_class = True  # (the losses of the columns alone: see WeightedMean)

    def _loss(self, y_true, y_pred):
        try:
            y = self._labels[y_true]
        except (KeyError, TypeError):
            y = self._label(y_true)
        if type(y_pred) is not float or not 0.0 <= y_pred <= 1.0:
            y_pred = self._proba(y_pred)
        d = 1.0 - y_pred if y else y_pred
        return d * d

    @staticmethod
    def _losses(labels, scores):
        d = scores - labels
        return d * d


class _MultiClassBrier(Brier, _MultiClassProbabilistic, case="multiclass"):

    @staticmethod
    def _dict_loss(y_true, y_pred):
        loss = 0.0 if y_true in y_pred else 1.0
        for c, p in y_pred.items():
            d = 1.0 - p if c == y_true else p
            loss += d * d
        return loss

    @staticmethod
    def _matrix_loss(proba, cols):
        d = proba.copy()
        d[np.arange(len(cols)), cols] -= 1.0
        return np.einsum("ij,ij->i", d, d)

