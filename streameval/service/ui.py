"""The service's live page: ``GET /ui`` (``GET /`` redirects there) and ``GET /ui/data``.

The page is the replay report's (:func:`streameval.report.render_html`, the same
script and plotly.js inline, so it needs no network beyond the service): segments by
trouble, one plot per metric (interval bands where rows carry them), alert lanes,
volume and label coverage, the alert table, and ROC/PR,
confusion matrix, score distribution and reliability views. It holds no data of its
own: every 2 seconds it fetches ``/ui/data`` (:func:`streameval.report.report_data`
over the service's timeline) and redraws, keeping the zoom.

``/ui/data`` is guarded like ``/snapshot`` (the bearer token when one is set, unless
``public_reads``); the page itself carries no data and is served without it. When the
data answers 401, the page asks for the token once and sends it as
``Authorization: Bearer`` (kept in the page's memory only).

**The timeline** (:class:`Timeline`) is the Monitor's metric rows and alert
transitions since the service started (``Monitor.on_metrics`` and ``on_alert``
sinks), in memory and bounded: past ``max_rows`` rows, each segment's rows are
thinned as the report downsamples (:func:`streameval.report.downsample`: per bucket
the first, last, lowest and highest value of every metric, and the rows at alert
transitions), to half the bound; past ``max_alerts`` transitions, the oldest go (and
are counted). A restart starts an empty timeline; ``/snapshot`` and the checkpoint keep
the Monitor's state.

Cost: a row costs one append under the ingestion lock; ``/ui/data`` is `O(r log r)`
for ``r`` rows kept outside the lock, plus the score summaries (`O(d)` for ``d``
distinct scores, under the lock, at most once per :data:`CURVES_SECONDS`).

Imports: the standard library, numpy and :mod:`streameval.report`.
"""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np

from streameval.report import (
    format_time,
    downsample,
    monitor_curves,
    render_html,
    report_data,
    segment_key,
)

__all__ = ["Timeline", "LivePage", "MAX_ROWS", "TIMELINE_BYTES", "MAX_ALERTS", "CURVES_SECONDS",
           "POLL_PATH"]

#: metric rows the live timeline keeps (thinned to half past it): with the report's
#: point budget, a page that draws in well under a second. A row of the default
#: monitor takes about 4.4 KB (its values and intervals as dicts), so the timeline
#: holds at most :data:`TIMELINE_BYTES` for it: memory that rises and falls as rows come
#: and are thinned, but does not grow with the stream
MAX_ROWS = 10_000
#: what a full timeline of the default monitor's rows holds at most, in bytes
TIMELINE_BYTES = 48_000_000
#: alert transitions the live timeline keeps (the oldest dropped, and counted)
MAX_ALERTS = 5_000
#: the score summaries (curves) are recomputed at most this often, in seconds: each
#: costs `O(distinct scores)` under the ingestion lock
CURVES_SECONDS = 10.0
#: where the page fetches its data, relative to ``/ui`` (so it works under a prefix)
POLL_PATH = "ui/data"


class Timeline:
    """The service's metric rows and alert transitions, bounded (see the module).

    ``add_row`` and ``add_alert`` are the Monitor's ``on_metrics`` and ``on_alert``
    sinks; :meth:`rows` and :meth:`alerts` copy what is kept (thread-safe).

    >>> tl = Timeline(max_rows=8)
    >>> for n in range(1, 21):
    ...     tl.add_row({"n": n, "t": None, "segment": None, "values": {"auc": 1 / n}})
    >>> rows = tl.rows()
    >>> len(rows) <= 8, rows[0]["n"], rows[-1]["n"]
    (True, 1, 20)
    """

    def __init__(self, max_rows=MAX_ROWS, max_alerts=MAX_ALERTS):
        if not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 4:
            raise ValueError(f"max_rows = {max_rows!r}: must be an int >= 4")
        if not isinstance(max_alerts, int) or isinstance(max_alerts, bool) or max_alerts < 1:
            raise ValueError(f"max_alerts = {max_alerts!r}: must be an int >= 1")
        self.max_rows = max_rows
        self._rows = []
        self._alerts = deque(maxlen=max_alerts)
        self._lock = threading.Lock()
        #: rows thinned away and alert transitions dropped so far
        self.thinned = 0
        self.dropped_alerts = 0

    def add_row(self, row):
        """Keep one metric row (``Monitor.on_metrics`` sink). Amortised `O(1)`."""
        with self._lock:
            self._rows.append(row)
            if len(self._rows) > self.max_rows:
                self._thin()

    def add_alert(self, transition):
        """Keep one alert transition (``Monitor.on_alert`` sink)."""
        with self._lock:
            if len(self._alerts) == self._alerts.maxlen:
                self.dropped_alerts += 1
            self._alerts.append(dict(transition))

    def rows(self):
        """The rows kept, in order."""
        with self._lock:
            return list(self._rows)

    def alerts(self):
        """The alert transitions kept, in order."""
        with self._lock:
            return list(self._alerts)

    def _thin(self):
        """Thin every segment's rows to about half of :attr:`max_rows` in all: the
        first, last, lowest and highest value of each metric per bucket, and the rows
        at alert transitions and at each segment's end."""
        rows = self._rows
        by_seg = {}
        for i, row in enumerate(rows):
            by_seg.setdefault(segment_key(row.get("segment")), []).append(i)
        bounds = np.array(sorted({a.get("n") for a in self._alerts
                                  if isinstance(a.get("n"), (int, float))}), dtype=float)
        keep = []
        for idx in by_seg.values():
            names = {name for i in idx for name in rows[i].get("values", {})}
            share = max(4, (self.max_rows // 2) // len(by_seg))
            buckets = max(1, share // (4 * max(1, len(names))))
            x = np.array([float(rows[i].get("stream_n", rows[i].get("n")) or 0) for i in idx])
            pins = np.searchsorted(x, bounds, side="right") if len(bounds) else np.array([], int)
            chosen = [np.array([0, len(idx) - 1]), pins - 1, pins]
            for name in names:
                y = [rows[i].get("values", {}).get(name) for i in idx]
                y = np.array([np.nan if v is None else float(v) for v in y], dtype=float)
                chosen.append(downsample(y, buckets))
            sel = np.unique(np.concatenate(chosen).astype(np.int64))
            sel = sel[(sel >= 0) & (sel < len(idx))]
            if len(sel) > share:  # many metrics: thin evenly, ends kept
                even = np.unique(np.linspace(0, len(sel) - 1, share).round().astype(np.int64))
                sel = sel[even]
            keep.extend(idx[i] for i in sel.tolist())
        keep.sort()
        half = self.max_rows // 2
        if len(keep) > half:  # more segments than the bound allows each: thin evenly,
            # keeping each segment's last row (the most recent segments' first)
            last = sorted(idx[-1] for idx in by_seg.values())[-half:]
            room = half - len(last)
            even = [keep[i] for i in np.linspace(0, len(keep) - 1, room).round().astype(int)] \
                if room > 0 else []
            keep = sorted(set(even) | set(last))
        self.thinned += len(rows) - len(keep)
        self._rows = [rows[i] for i in keep]


class LivePage:
    """The live page of a service :class:`~streameval.service.engine.Engine`.

    Attaches a :class:`Timeline` to the engine's Monitor; :meth:`page` is the HTML
    (built once), :meth:`data` what ``/ui/data`` answers (a :func:`report_data`
    dict with the service's counters as its facts).
    """

    def __init__(self, engine, *, title="streameval serve: live", max_rows=MAX_ROWS,
                 max_alerts=MAX_ALERTS):
        self.engine = engine
        self.title = title
        self.timeline = Timeline(max_rows=max_rows, max_alerts=max_alerts)
        self._page = None
        self._curves = ((None, None), -1.0, None)  # ((n, segments), when, curves)
        self._curves_lock = threading.Lock()
        engine.read(self._attach)

    def _attach(self, monitor, info):
        monitor.on_metrics.append(self.timeline.add_row)
        monitor.on_alert.append(self.timeline.add_alert)

    def page(self) -> bytes:
        """The page (UTF-8), the same for every request: plotly.js and the script."""
        if self._page is None:
            self._page = render_html({"title": self.title}, live=POLL_PATH).encode("utf-8")
        return self._page

    def _read(self, monitor, info):
        rules = [r.to_config() for r in monitor.rules]
        return monitor.n, monitor.t, rules, dict(info)

    def _score_summaries(self, alerting):
        segments = [None] + [s for s in alerting if s is not None]
        with self._curves_lock:
            key, when, curves = self._curves
            now = time.monotonic()
            n = self.engine.monitor.n
            if curves is not None and key[1] == segments and (
                    key[0] == n or now - when < CURVES_SECONDS):
                return curves
            curves = self.engine.read(lambda m, info: monitor_curves(m, segments, label="now"))
            self._curves = ((n, segments), now, curves)
            return curves

    def data(self) -> dict:
        """What the page draws now: :func:`report_data` over the timeline, with the
        service's counters, the active alerts and the score summaries of the whole
        stream and of the segments with alerts."""
        n, t, rules, info = self.engine.read(self._read)
        rows = self.timeline.rows()
        alerts = self.timeline.alerts()
        alerting = list(dict.fromkeys(a.get("segment") for a in alerts
                                      if a.get("state") == "firing"))[:8]
        facts = {"events": n, "last event time": format_time(t) or None,
                 "batches applied": info.get("seq"),
                 "rejected events": info.get("rejected"), "checkpoints": info.get("checkpoints"),
                 "timeline rows kept": len(rows), "timeline rows thinned": self.timeline.thinned}
        if self.timeline.dropped_alerts:
            facts["alert transitions dropped"] = self.timeline.dropped_alerts
        join = info.get("join")
        if join:
            for key in ("pending", "joined", "expired", "orphans"):
                facts[f"labels {key}"] = join.get(key)
        facts = {k: v for k, v in facts.items() if v is not None}
        data = report_data(rows, alerts, title=self.title, summary=facts, rules=rules,
                           curves=self._score_summaries(alerting))
        data["active_alerts"] = self.engine.active_alerts()
        return data
