"""Sliding and tumbling windows over any streameval metric.

A window is a metric too: it takes the same ``update(y_true, y_pred, w=1.0)`` as the
metric it wraps (plus the event time ``t=``) and its ``get()`` is the wrapped
metric's value over the window's events. It follows the trusted-path protocol too:
``validate`` (the wrapped metric's), ``update_trusted(y, s, w, t=)``, ``columns``
and ``score_bounds``, so a Monitor validates a batch once for all its windows.

* :class:`Sliding` keeps the last ``size`` events (:mod:`.count`), or the events of
  the last ``period`` seconds of event time (:mod:`.timed`), and removes expired
  events with the wrapped metric's ``revert``: exact for every metric that has
  ``revert``. Batches are validated once and stored as column chunks
  (:mod:`.chunks`).
* :class:`Tumbling` (:mod:`.tumbling`) cuts the stream into consecutive,
  non-overlapping windows of ``size`` events or ``period`` seconds and reports each
  closed window once. It never reverts, so it works with any metric.

Both have ``interval(level)`` over a metric that has one (see
:func:`streameval.metrics.base.has_interval`): the wrapped metric's interval over the
sliding window's events, or over the last closed tumbling window's.

Event times ``t`` are parsed by :mod:`streameval.events` (:func:`as_seconds`,
:func:`as_seconds_array`, re-exported here): epoch seconds (int or float),
:class:`datetime.datetime` (naive means UTC) or :class:`numpy.datetime64`.

Late events (``period`` windows): an event whose time is at most ``lateness`` seconds
behind the newest time seen is placed by its time; an older one is *refused*: it does
not enter the window, it is counted in ``late`` and passed to the ``on_late``
callback if one is given. Refused events are still validated: a bad event raises
``ValueError`` whether it is late or not.

Modules: :mod:`.common` (shared helpers), :mod:`.chunks` (the count window's
storage), :mod:`.sliding` (the :class:`Sliding` front), :mod:`.count` and
:mod:`.timed` (its two cases), :mod:`.tumbling`. This package may import numpy, the
standard library, :mod:`streameval.events`, :mod:`streameval.validation` and
:mod:`streameval.metrics`; it is imported by drift tests and the Monitor.
"""

from __future__ import annotations

from streameval.events import as_seconds, as_seconds_array
from streameval.windows import count, timed  # noqa: F401  (wire Sliding's cases)
from streameval.windows.common import REBUILD_FRACTION
from streameval.windows.sliding import Sliding
from streameval.windows.tumbling import Tumbling

__all__ = ["Sliding", "Tumbling", "as_seconds", "as_seconds_array", "REBUILD_FRACTION"]
