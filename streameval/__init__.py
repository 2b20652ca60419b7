"""streameval: a streaming evaluation engine for classifiers in production.

Exact, incremental and mergeable metrics (AUC and average precision equal to
scikit-learn's), windows over any metric, drift tests, alert rules, log replay and a
monitoring service. Public names are imported lazily, on first use, so that
``import streameval`` stays cheap and each layer loads only what it needs.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> module that defines it
_LAZY = {
    **dict.fromkeys(
        ["ConfusionMatrix", "Accuracy", "ErrorRate", "Precision", "Recall", "FPR",
         "Specificity", "FBeta", "F1", "FAlpha", "BalancedAccuracy", "MCC"],
        "streameval.metrics.confusion",
    ),
    **dict.fromkeys(["LogLoss", "Brier"], "streameval.metrics.probabilistic"),
    **dict.fromkeys(["MAE", "MSE", "RMSE", "RMSLE", "MAPE"], "streameval.metrics.regression"),
    **dict.fromkeys(
        ["ROCAUC", "Gini", "AveragePrecision", "InterpolatedAP", "ElevenPointAP",
         "ROCCurve", "PRCurve"],
        "streameval.metrics.ranking",
    ),
    **dict.fromkeys(
        ["PrecisionAtK", "RecallAtK", "HitAtK", "APAtK", "MAPAtK", "MRR", "DCG", "NDCG"],
        "streameval.metrics.retrieval",
    ),
    **dict.fromkeys(["BLEU", "ROUGE", "METEOR"], "streameval.metrics.text"),
    **dict.fromkeys(["Sliding", "Tumbling"], "streameval.windows"),
    "Monitor": "streameval.monitor",
    "from_state": "streameval.metrics.base",
}

__all__ = list(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streameval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
