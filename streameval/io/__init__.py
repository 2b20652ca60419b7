"""The input/output edge: log sources, delayed-label join, sinks, checkpoints.

Sources (:mod:`.sources`) turn JSONL, CSV and Parquet logs into validated
:class:`~streameval.events.EventBatch` objects (a growing file followed like
``tail -F``, and logs recognised on resume: :mod:`.follow`); :mod:`.delayed` joins
prediction rows to label rows that arrive later; :mod:`.sinks` write JSON
lines, stdout and webhooks; :mod:`.checkpoint` saves state atomically.
Names are imported on first use so ``import streameval.io`` stays cheap.

Imports: its own submodules, on first use of a name. The submodules may import
:mod:`streameval.events`, :mod:`streameval.validation` and the standard library (and
optional extras: orjson, pyarrow), never the Monitor, the pipeline or the CLI.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "EventSource": "streameval.io.sources",
    "read_events": "streameval.io.sources",
    "detect_format": "streameval.io.sources",
    "Follow": "streameval.io.sources",
    "Tail": "streameval.io.follow",
    "LogChangedError": "streameval.io.follow",
    "log_identity": "streameval.io.follow",
    "LabelJoiner": "streameval.io.delayed",
    "DelayedSource": "streameval.io.delayed",
    "read_delayed": "streameval.io.delayed",
    "JsonlSink": "streameval.io.sinks",
    "StdoutSink": "streameval.io.sinks",
    "WebhookSink": "streameval.io.sinks",
    "dumps": "streameval.io.sinks",
    "rejected_callback": "streameval.io.sinks",
    "save_atomic": "streameval.io.checkpoint",
    "save_checkpoint": "streameval.io.checkpoint",
    "load_checkpoint": "streameval.io.checkpoint",
    "fingerprint": "streameval.io.checkpoint",
    "CheckpointError": "streameval.io.checkpoint",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'streameval.io' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
