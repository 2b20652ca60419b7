"""The one list of streameval's names: public names, config kinds and state types.

Everything that names metrics derives from :data:`ENTRIES`:

* ``streameval.__all__`` and its lazy imports (:func:`public_modules`);
* the metric kinds of a TOML config, ``kind = "roc_auc"`` (:func:`config_kinds`);
* the state loaders of :func:`streameval.from_state` (:func:`state_class`), which
  import the defining module on demand, so a checkpoint loads in a fresh process
  without importing the package root.

Classes register themselves when their module is imported
(``streameval.metrics.base.Metric.__init_subclass__`` calls :func:`add_class`);
:func:`state_class` refuses a class whose name is not an entry, so a metric exists
(of streameval's own) only once it is listed here. Adding a metric is one class plus one line below;
``tests/test_registry.py`` checks that the views agree.

This module is the ground floor: it imports nothing from streameval (only
:mod:`importlib`, lazily, to load a module named here).
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

__all__ = ["Entry", "ENTRIES", "public_modules", "config_kinds", "state_module",
           "state_class", "add_class", "registered"]


class Entry(NamedTuple):
    """One name: where it is defined, its config kind, whether it is public (exported
    by ``streameval``) and whether it has a state (``to_state``/``from_state``)."""

    name: str
    module: str
    kind: str | None = None
    public: bool = True
    state: bool = True


_C = "streameval.metrics.confusion"
_P = "streameval.metrics.probabilistic"
_R = "streameval.metrics.regression"
_K = "streameval.metrics.ranking"
_Q = "streameval.metrics.retrieval"
_T = "streameval.metrics.text"
_E = "streameval.metrics.estimated"
_CAL = "streameval.metrics.calibration"
_SD = "streameval.metrics.scoredrift"

#: Every public name and every state type, in the order of DESIGN.md section 2.
ENTRIES = (
    Entry("ConfusionMatrix", _C),
    Entry("Accuracy", _C, "accuracy"),
    Entry("ErrorRate", _C, "error_rate"),
    Entry("Precision", _C, "precision"),
    Entry("Recall", _C, "recall"),
    Entry("FPR", _C, "fpr"),
    Entry("Specificity", _C, "specificity"),
    Entry("FBeta", _C, "fbeta"),
    Entry("F1", _C, "f1"),
    Entry("FAlpha", _C, "falpha"),
    Entry("BalancedAccuracy", _C, "balanced_accuracy"),
    Entry("MCC", _C, "mcc"),
    Entry("ROCAUC", _K, "roc_auc"),
    Entry("Gini", _K, "gini"),
    Entry("AveragePrecision", _K, "average_precision"),
    Entry("InterpolatedAP", _K, "interpolated_ap"),
    Entry("ElevenPointAP", _K, "eleven_point_ap"),
    Entry("ROCCurve", _K),
    Entry("PRCurve", _K),
    Entry("LogLoss", _P, "log_loss"),
    Entry("Brier", _P, "brier"),
    Entry("MAE", _R),
    Entry("MSE", _R),
    Entry("RMSE", _R),
    Entry("RMSLE", _R),
    Entry("MAPE", _R),
    Entry("PrecisionAtK", _Q),
    Entry("RecallAtK", _Q),
    Entry("HitAtK", _Q),
    Entry("APAtK", _Q),
    Entry("MAPAtK", _Q),
    Entry("MRR", _Q),
    Entry("DCG", _Q),
    Entry("NDCG", _Q),
    Entry("BLEU", _T),
    Entry("ROUGE", _T),
    Entry("METEOR", _T),
    Entry("Sliding", "streameval.windows"),
    Entry("Tumbling", "streameval.windows"),
    Entry("Monitor", "streameval.monitor"),
    Entry("from_state", "streameval.metrics.base", state=False),
    # state types that are not public names of ``streameval``
    Entry("PrecisionRecallDrift", "streameval.drift", public=False),
    Entry("ChangePointDetector", "streameval.drift", public=False),
    Entry("DriftCounts", "streameval.drift", public=False),
    Entry("SequentialDrift", "streameval.sequential", public=False),
    # label-free estimates, score drift and calibration: config kinds, not public names
    Entry("EstimatedConfusion", _E, public=False),
    Entry("EstimatedPrecision", _E, "estimated_precision", public=False),
    Entry("EstimatedRecall", _E, "estimated_recall", public=False),
    Entry("EstimatedF1", _E, "estimated_f1", public=False),
    Entry("EstimatedAccuracy", _E, "estimated_accuracy", public=False),
    Entry("EstimatedROCAUC", _E, "estimated_roc_auc", public=False),
    Entry("PredictedPositiveRate", _E, "predicted_positive_rate", public=False),
    Entry("ExpectedCalibrationError", _CAL, "ece", public=False),
    Entry("BrierDecomposition", _CAL, public=False),
    Entry("BrierReliability", _CAL, "brier_reliability", public=False),
    Entry("BrierResolution", _CAL, "brier_resolution", public=False),
    Entry("BrierUncertainty", _CAL, "brier_uncertainty", public=False),
    Entry("ReliabilityCurve", _CAL, public=False),
    Entry("CalibrationRefit", _CAL, public=False),
    Entry("CalibrationField", _CAL, public=False),
    Entry("ScoreDrift", _SD, "score_drift", public=False),
    Entry("ScoreDriftDetector", _SD, public=False),
    Entry("EstimateCheck", "streameval.metrics.checked", public=False),
)

_BY_NAME = {e.name: e for e in ENTRIES}

#: classes registered by their modules at import: public type name -> class
_CLASSES: dict[str, type] = {}


def public_modules():
    """``{public name: defining module}``: what ``import streameval`` exports."""
    return {e.name: e.module for e in ENTRIES if e.public}


def config_kinds():
    """``{config kind: public class name}`` (``"roc_auc": "ROCAUC"``)."""
    return {e.kind: e.name for e in ENTRIES if e.kind is not None}


def state_module(name):
    """The module defining state type ``name``, or None if it is not one."""
    e = _BY_NAME.get(name) if isinstance(name, str) else None
    return e.module if e is not None and e.state else None


def add_class(cls, name):
    """Record ``cls`` as the class of state type ``name`` (called at class creation)."""
    _CLASSES[name] = cls


def registered():
    """The classes registered so far, ``{name: class}`` (tests compare with ENTRIES)."""
    return dict(_CLASSES)


def state_class(name):
    """The class that rebuilds states of type ``name``, importing its module on first
    use; None for an unknown name. A class defined outside streameval (a user's own
    metric) is found once its module has been imported."""
    if not isinstance(name, str):
        return None
    cls = _CLASSES.get(name)
    module = state_module(name)
    if cls is None and module is not None:
        importlib.import_module(module)
        cls = _CLASSES.get(name)
    return cls
