"""streameval: a streaming evaluation engine for classifiers in production.

Exact, incremental and mergeable metrics (AUC and average precision equal to
scikit-learn's), windows over any metric, drift tests, alert rules, log replay and a
monitoring service. Public names are imported lazily, on first use, so that
``import streameval`` stays cheap and each layer loads only what it needs.

Imports: :mod:`streameval._registry` (the one list of names) and, on first use of a
name, the module the registry says defines it.
"""

from __future__ import annotations

import importlib

from streameval import _registry

__version__ = "0.1.0"

#: public name -> module that defines it (from the one registry of names)
_LAZY = _registry.public_modules()

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
