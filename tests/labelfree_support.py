"""Label-free stand-in metrics for the prediction-path tests.

The prediction path (``Monitor.predict``, the joiner passing predictions on, replay and
the service) feeds every metric that declares ``needs_labels = False``; what the metric
computes is not its business. These stand-ins are small label-free metrics with a
brute-force meaning, installed under the registry kinds ``predicted_positive_rate`` and
``estimated_recall`` only where no such kind exists yet (the estimation module's classes
take precedence), so that the default monitor's label-free rows, replay and a server in a
subprocess can be tested end to end. The tests compare the values reached through each
path with the same metrics fed the same scores directly, so they hold for any label-free
metric installed under these kinds.
"""

from __future__ import annotations

import math

import streameval
from streameval import _registry, config
from streameval.metrics.base import Metric


class LfPositiveRate(Metric):
    """Weighted share of predictions with ``score >= threshold`` (labels ignored)."""

    needs_labels = False

    def __init__(self, threshold=0.5, pos_label=True, neg_label=None):
        self.threshold = threshold
        self.pos_label = pos_label
        self.neg_label = neg_label
        self.k = 0
        self.w = 0.0
        self.wp = 0.0

    def update(self, y_true, y_pred, w=1.0):
        self.k += 1
        self.w += w
        self.wp += w * (y_pred >= self.threshold)
        return self

    def revert(self, y_true, y_pred, w=1.0):
        self.k -= 1
        self.w -= w
        self.wp -= w * (y_pred >= self.threshold)
        if not self.k:
            self.w = self.wp = 0.0
        return self

    def get(self):
        return self.wp / self.w if self.w > 0 else math.nan

    def _get_data(self):
        return [self.k, self.w, self.wp]

    def _set_data(self, d):
        self.k, self.w, self.wp = d

    def _merge(self, o):
        self.k += o.k
        self.w += o.w
        self.wp += o.wp


class LfExpectedRecall(Metric):
    """Expected recall from calibrated scores: ``sum w s [s >= t] / sum w s``, with a
    normal interval of ``sum w s`` effective positives (labels ignored)."""

    needs_labels = False

    def __init__(self, threshold=0.5, pos_label=True, neg_label=None):
        self.threshold = threshold
        self.pos_label = pos_label
        self.neg_label = neg_label
        self.k = 0
        self.tp = 0.0
        self.p = 0.0

    def update(self, y_true, y_pred, w=1.0):
        self.k += 1
        self.p += w * y_pred
        self.tp += w * y_pred * (y_pred >= self.threshold)
        return self

    def revert(self, y_true, y_pred, w=1.0):
        self.k -= 1
        self.p -= w * y_pred
        self.tp -= w * y_pred * (y_pred >= self.threshold)
        if not self.k:
            self.p = self.tp = 0.0
        return self

    def get(self):
        return self.tp / self.p if self.p > 0 else math.nan

    def interval(self, level=0.95):
        v = self.get()
        if v != v:
            return (math.nan, math.nan)
        z = {0.95: 1.959963984540054}.get(level, 1.959963984540054)
        half = z * math.sqrt(max(v * (1 - v), 0.0) / self.p)
        return (max(0.0, v - half), min(1.0, v + half))

    def _get_data(self):
        return [self.k, self.tp, self.p]

    def _set_data(self, d):
        self.k, self.tp, self.p = d

    def _merge(self, o):
        self.k += o.k
        self.tp += o.tp
        self.p += o.p


STAND_INS = {"predicted_positive_rate": LfPositiveRate, "estimated_recall": LfExpectedRecall}


def install(monkeypatch=None):
    """Register the stand-ins under their kinds where those kinds are not registered
    (undone after the test with ``monkeypatch``). Returns the kinds installed."""
    have = _registry.config_kinds()
    done = []
    for kind, cls in STAND_INS.items():
        if kind in have:
            continue
        name = cls.__name__
        entries = _registry.ENTRIES + (_registry.Entry(name, __name__, kind, public=False),)
        if monkeypatch is None:
            _registry.ENTRIES = entries
            config.KINDS[kind] = name
            config._CLASS_TO_KIND[name] = kind
            setattr(streameval, name, cls)
        else:
            monkeypatch.setattr(_registry, "ENTRIES", entries)
            monkeypatch.setitem(config.KINDS, kind, name)
            monkeypatch.setitem(config._CLASS_TO_KIND, name, kind)
            monkeypatch.setattr(streameval, name, cls, raising=False)
        done.append(kind)
    return done
