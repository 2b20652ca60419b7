"""Brute-force label-free metrics for the prediction-path tests.

The prediction path (``Monitor.predict``, the joiner passing predictions on, replay and
the service) feeds every metric that declares ``needs_labels = False``; what the metric
computes is not its business. These are small label-free metrics whose meaning is a
plain weighted sum, so the tests can compare the values reached through each path with
the same metrics fed the same scores directly. Their formulas are those of the
registered kinds ``predicted_positive_rate`` and ``estimated_recall``, which the tests'
servers and default monitors use.
"""

from __future__ import annotations

import math

from streameval.metrics.base import Metric


class _WeightedSums(Metric):
    """A count of predictions and running weighted sums of ``_terms(score, weight)``."""

    needs_labels = False

    def __init__(self, threshold=0.5, pos_label=True, neg_label=None):
        self.threshold = threshold
        self.pos_label = pos_label
        self.neg_label = neg_label
        self.k = 0
        self.sums = [0.0, 0.0]

    def _terms(self, y_pred, w):
        raise NotImplementedError

    def update(self, y_true, y_pred, w=1.0):
        self.k += 1
        self.sums = [a + b for a, b in zip(self.sums, self._terms(y_pred, w))]
        return self

    def revert(self, y_true, y_pred, w=1.0):
        self.k -= 1
        self.sums = [a - b for a, b in zip(self.sums, self._terms(y_pred, w))]
        if not self.k:
            self.sums = [0.0, 0.0]
        return self

    def _ratio(self):
        den, num = self.sums
        return num / den if den > 0 else math.nan

    def _get_data(self):
        return [self.k, *self.sums]

    def _set_data(self, d):
        self.k, *self.sums = d

    def _merge(self, o):
        self.k += o.k
        self.sums = [a + b for a, b in zip(self.sums, o.sums)]


class LfPositiveRate(_WeightedSums):
    """Weighted share of predictions with ``score >= threshold`` (labels ignored)."""

    def _terms(self, y_pred, w):
        return w, w * (y_pred >= self.threshold)

    def get(self):
        return self._ratio()


class LfExpectedRecall(_WeightedSums):
    """Expected recall from calibrated scores: ``sum w s [s >= t] / sum w s``, with a
    normal interval of ``sum w s`` effective positives (labels ignored)."""

    def _terms(self, y_pred, w):
        return w * y_pred, w * y_pred * (y_pred >= self.threshold)

    def get(self):
        return self._ratio()

    def interval(self, level=0.95):
        v = self.get()
        if v != v:
            return (math.nan, math.nan)
        z = {0.95: 1.959963984540054}.get(level, 1.959963984540054)
        half = z * math.sqrt(max(v * (1 - v), 0.0) / self.sums[0])
        return (max(0.0, v - half), min(1.0, v + half))
