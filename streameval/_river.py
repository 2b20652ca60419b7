"""river's metric base classes, imported without paying for ``scipy.stats`` up front.

streameval's metrics subclass river's metric base classes (DESIGN.md: drop-in
compatible with river), so importing streameval imports ``river.metrics``. That package
imports every river metric, and two of them import SciPy submodules at module level:
``GeometricMean`` (``from scipy import stats``, about 0.35 s of CPU, most of the cost of
starting ``streameval replay``) and ``ROCAUC`` (``from scipy import integrate``).
streameval itself uses SciPy only for Student's t quantile of the AUC interval
(``scipy.special``, imported on the first such interval).

:func:`metric_bases` imports ``river.metrics.base`` with those two submodules made lazy
by the standard library's :class:`importlib.util.LazyLoader`: the module object is
created (and bound as ``scipy.stats`` / ``scipy.integrate``) but only executed on first
attribute access, so river's ``GeometricMean().get()`` and a later ``import
scipy.stats`` work exactly as before, and pay the import when they first need it. A
submodule already imported, or any error while preparing the lazy module, leaves the
normal eager import in place.

Imports: the standard library, SciPy's package root and river's metric package; nothing
from streameval.
"""

from __future__ import annotations

import importlib.util
import sys

#: SciPy submodules that ``river.metrics`` imports at module level and streameval never uses.
LAZY_SCIPY = ("scipy.stats", "scipy.integrate")


def _defer(name):
    """Put a lazily-executed module for ``name`` in ``sys.modules`` and on its parent."""
    if name in sys.modules:
        return
    try:
        parent_name, _, child = name.rpartition(".")
        parent = importlib.import_module(parent_name)
        if child in vars(parent):
            return
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return
        loader = importlib.util.LazyLoader(spec.loader)
        spec.loader = loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        loader.exec_module(module)
        setattr(parent, child, module)
    except Exception:  # pragma: no cover - any surprise: fall back to the eager import
        sys.modules.pop(name, None)


def metric_bases():
    """``river.metrics.base``, imported with :data:`LAZY_SCIPY` deferred."""
    if "river.metrics" not in sys.modules:
        for name in LAZY_SCIPY:
            _defer(name)
    from river.metrics import base

    return base
