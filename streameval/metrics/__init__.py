"""streameval's metrics, one module per family; see ``streameval.__all__`` for names.

The modules import :mod:`streameval.metrics.base`, :mod:`streameval.validation` and
numpy (``base`` also river), never windows, drift or the Monitor.
"""
