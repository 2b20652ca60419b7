"""Prometheus exposition of a service's Monitor: a custom collector over its snapshot.

The collector reads the Monitor under the service's lock at scrape time; nothing is
kept in prometheus-client's global default registry (each app builds its own
:class:`~prometheus_client.CollectorRegistry`).

Families:

* ``streameval_metric{metric, window, segment}`` -- each metric's current value
  (``NaN`` where undefined: no positives, empty window, ...);
* ``streameval_metric_error_bound{metric, window, segment}`` -- for a value that is
  not exact (a cumulative AUC or AP past its ``max_scores`` distinct scores, bins), its
  guaranteed bound: ``|value - exact| <= bound`` (the family is absent while every
  value is exact);
* ``streameval_segment_events{segment}`` -- events counted per segment (those its
  values cover: a segment's values are those of its last row);
  ``streameval_segment_pending_events{segment}`` -- events and predictions of a segment
  that wait for its next row (0 when none);
* ``streameval_late_events_total{metric, window, segment}`` -- events each window by
  period refused as late; ``streameval_other_segment_events_total`` -- events of new
  segment values counted under ``__other__`` once ``max_segments`` was reached;
* ``streameval_events_total`` / ``streameval_batches_total`` -- acknowledged events
  and batches; ``streameval_rejected_requests_total{reason}`` -- refused requests, by
  reason (``invalid``, ``idempotency_conflict``, ``too_large``, ``timeout``: the
  engine's ``REJECT_REASONS``; ``unrecorded`` for those a restored state counted without
  a reason);
  ``streameval_future_events_total`` -- events refused for a time too far ahead;
* ``streameval_event_time_seconds`` -- the newest event time seen;
* ``streameval_alert_active{rule, segment, state, severity}`` -- 1 for each active
  alert (``pending`` or ``firing``), with its rule's ``severity``;
  ``streameval_alert_transitions_total``;
* ``streameval_wal_failed`` -- 1 once a batch could not be made durable or applied
  (the service refuses events until it is restarted; ``/healthz`` says 503);
* ``streameval_info{model, version}`` -- always 1: ``[serve] model`` (``""`` without
  one) and streameval's version;
* ``streameval_checkpoints_total``, ``streameval_last_checkpoint_timestamp_seconds``,
  ``streameval_events_since_checkpoint``; ``streameval_checkpoint_errors_total`` --
  checkpoint attempts that failed (periodic or ``POST /checkpoint``);
  ``streameval_lost_batches_total`` / ``streameval_lost_events_total`` -- acknowledged
  batches and events that a start with ``accept_loss`` found damaged or missing;
* ``streameval_retried_batches_total`` -- batches retried with a known idempotency key;
* ``streameval_checkpoint_failing`` -- 1 while the last checkpoint attempt failed
  (the service still takes events: ``/healthz`` says 200, with the failure in its
  warnings);
* with delayed labels: ``streameval_label_join_total{outcome}`` (``joined``,
  ``expired``, ``orphans``, ``duplicates``), ``streameval_predictions_pending``,
  ``streameval_predictions_pending_max`` and ``streameval_pending_refusals_total``;
  when the Monitor counts predictions before their labels (label-free metrics),
  ``streameval_label_coverage{segment, state}`` (``predictions``, ``labelled``,
  ``pending``, ``expired``, and ``replaced`` when some were);
* ``streameval_missing_segment_field_total{field}`` -- events that lacked a segment
  field, per field, when the Monitor's snapshot counts them
  (``missing_segment_fields``).

The segment label is ``""`` for the whole stream (no ``group_by``) and, for a segment
made of several fields, their values joined by ``"|"``. Two segments never share a
label: one whose label an earlier segment already has (``1`` after ``"1"``, ``""``
beside the whole stream, ``("a", "b|c")`` after ``("a|b", "c")``) gets ``~`` and 16 hex
digits of the SHA-256 of its JSON text after it (:func:`segment_labels`). A label
value is escaped by prometheus-client (backslash, double quote, line feed) and bounded: one longer than
:data:`MAX_LABEL_VALUE_BYTES` is cut and ends with ``~`` and 16 hex digits of its
SHA-256, so that two long values stay two series. The service refuses segment values
over ``[serve] max_segment_bytes`` (256 bytes by default) anyway; the bound holds for a
Monitor fed otherwise too.

What bounds a scrape: the series are the Monitor's metrics times its segments (at most
``max_segments`` + 1 with ``__other__``, plus the whole stream) for
``streameval_metric`` and ``streameval_late_events_total``, one per segment for
``streameval_segment_events``, one per active alert, plus a fixed few; each series
line holds at most three label values of :data:`MAX_LABEL_VALUE_BYTES`. The default
monitor with 1 000 segments of 256-byte values renders in a few MB.

The ``window`` label is what each metric declares (the ``window_kind`` of its
:class:`~streameval.metrics.base.Capabilities`), never its class name.

Imports: prometheus-client, :mod:`streameval.metrics.base` (a metric's declared
capabilities), :func:`streameval.io.sinks.segment_id` (a segment's typed JSON text) and
the package's ``__version__``; it reads the Monitor's plain snapshots
and rules' names and severities, never metric internals.
"""

from __future__ import annotations

import hashlib
import math

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from streameval.io.sinks import segment_id
from streameval.metrics.base import capabilities

__all__ = ["MonitorCollector", "window_label", "segment_label", "segment_labels",
           "bounded_label", "MAX_LABEL_VALUE_BYTES"]

#: UTF-8 bytes of an exported label value at most: two segment fields of the default
#: ``max_segment_bytes`` (256) and their separator fit whole.
MAX_LABEL_VALUE_BYTES = 528


def bounded_label(value: str, limit: int = MAX_LABEL_VALUE_BYTES) -> str:
    """``value`` if its UTF-8 encoding is at most ``limit`` bytes, else its longest
    prefix that leaves room for ``~`` and the first 16 hex digits of the value's
    SHA-256 (distinct long values stay distinct series).

    >>> bounded_label("fr")
    'fr'
    >>> v = bounded_label("x" * 10_000, 40)
    >>> v[:24], len(v)
    ('xxxxxxxxxxxxxxxxxxxxxxx~', 40)
    """
    data = value.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return value
    digest = hashlib.sha256(data).hexdigest()[:16]
    head = data[: limit - 17].decode("utf-8", "ignore")  # no character cut in two
    return f"{head}~{digest}"


def segment_label(segment) -> str:
    """The Prometheus label value of a segment (bounded: :func:`bounded_label`).

    >>> segment_label(None), segment_label("fr"), segment_label(("fr", "ios")), segment_label(3)
    ('', 'fr', 'fr|ios', '3')
    """
    if segment is None:
        return ""
    if isinstance(segment, (tuple, list)):
        return bounded_label("|".join("" if s is None else str(s) for s in segment))
    return bounded_label(str(segment))


def segment_labels(segments) -> dict:
    """``{segment_id(segment): label}`` for ``segments`` in their order (the whole
    stream's first, then the segments' in order of first appearance): each the
    :func:`segment_label`, except that a segment whose label an earlier one has (the
    segments ``1`` and ``"1"``, ``("a|b", "c")`` and ``("a", "b|c")``, the whole stream
    and the segment ``""``) gets ``~`` and 16 hex digits of the SHA-256 of its JSON text
    after it (:func:`~streameval.io.sinks.segment_id`): two segments are never one
    series, and since a Monitor's segments keep their order, a label once given never
    changes. Runtime complexity: `O(segments)`.

    >>> labels = segment_labels([None, 1, "1", "2"])
    >>> [labels[segment_id(s)] for s in (None, 1, "2")], labels[segment_id("1")][:2]
    (['', '1', '2'], '1~')
    """
    out = {}
    taken = set()
    for seg in segments:
        sid = segment_id(seg)
        if sid in out:
            continue
        label = segment_label(seg)
        if label in taken:
            digest = hashlib.sha256(sid.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            label = bounded_label(f"{label}~{digest}")
        taken.add(label)
        out[sid] = label
    return out


def window_label(metric) -> str:
    """A short description of the window of a Monitor metric, from the window kind it
    declares (:func:`streameval.metrics.base.capabilities`) and its ``size`` or
    ``period``.

    ``"cumulative"`` for a bare metric (or any object that declares no window kind);
    ``"sliding_size_10000"``, ``"sliding_period_3600s"``, ``"tumbling_size_1000"`` for
    windows.

    >>> import streameval as se
    >>> window_label(se.ROCAUC()), window_label(se.Sliding(se.ROCAUC(), period=3600))
    ('cumulative', 'sliding_period_3600s')
    """
    kind = capabilities(metric).window_kind
    if kind is None:
        return "cumulative"
    size = getattr(metric, "size", None)
    if size is not None:
        return f"{kind}_size_{size}"
    period = getattr(metric, "period", None)
    if period is not None:
        p = float(period)
        return f"{kind}_period_{int(p) if p.is_integer() else p}s"
    return kind


def _value(v) -> float:
    return math.nan if v is None else float(v)


class MonitorCollector(Collector):
    """Collects the metric families above from an :class:`~.engine.Engine`.

    Runtime complexity: one Monitor ``snapshot`` per scrape, `O(metrics x segments)`.
    """

    def __init__(self, engine):
        self.engine = engine

    def collect(self):
        snap, info, windows, severities = self.engine.read(_gather)
        metric = GaugeMetricFamily(
            "streameval_metric", "Current value of a monitored metric (NaN when undefined)",
            labels=["metric", "window", "segment"],
        )
        seg_events = GaugeMetricFamily(
            "streameval_segment_events", "Events counted per segment", labels=["segment"]
        )
        seg_pending = GaugeMetricFamily(
            "streameval_segment_pending_events",
            "Events and predictions of a segment waiting for its next row (its values "
            "are those of its last row)", labels=["segment"],
        )
        late = CounterMetricFamily(
            "streameval_late_events",
            "Events a window by period refused as late (older than its lateness allows)",
            labels=["metric", "window", "segment"],
        )
        bounds = GaugeMetricFamily(
            "streameval_metric_error_bound",
            "Guaranteed bound on the distance of a metric's value to the exact one",
            labels=["metric", "window", "segment"],
        )
        coverage = GaugeMetricFamily(
            "streameval_label_coverage",
            "Predictions per segment by label state: predictions (all made), labelled, "
            "pending (label may still come), expired (never labelled); with delayed labels",
            labels=["segment", "state"],
        )
        covered = False
        bounded = False
        segs = _segments(snap)
        labels = segment_labels(seg for seg, _ in segs)
        for seg, entry in segs:
            label = labels[segment_id(seg)]
            for name, v in (entry.get("values") or {}).items():
                metric.add_metric([name, windows.get(name, "cumulative"), label], _value(v))
            for name, b in (entry.get("error_bounds") or {}).items():
                bounds.add_metric([name, windows.get(name, "cumulative"), label], float(b))
                bounded = True
            if entry.get("n") is not None:
                seg_events.add_metric([label], float(entry["n"]))
                seg_pending.add_metric([label], float(entry.get("pending", 0)))
            for name, k in (entry.get("late") or {}).items():
                late.add_metric([name, windows.get(name, "cumulative"), label], float(k))
            for state, k in (entry.get("coverage") or {}).items():
                coverage.add_metric([label, state], float(k))
                covered = True
        yield metric
        if covered:
            yield coverage
        if bounded:
            yield bounds
        yield seg_events
        yield seg_pending
        yield late
        yield CounterMetricFamily(
            "streameval_other_segment_events",
            "Events of new segment values counted under __other__ (max_segments reached)",
            value=float(snap.get("other_events") or 0),
        )
        yield CounterMetricFamily(
            "streameval_events", "Events acknowledged by the service (replayed ones included)",
            value=float(snap.get("n") or 0),
        )
        yield CounterMetricFamily(
            "streameval_batches", "Batches acknowledged by the service", value=float(info["batches"])
        )
        rejected = CounterMetricFamily(
            "streameval_rejected_requests",
            "Requests refused, by reason: invalid (a bad body or event), "
            "idempotency_conflict, too_large (over max_body), timeout (body_timeout)",
            labels=["reason"],
        )
        by_reason = {k[len("rejected_"):]: float(v) for k, v in info.items()
                     if k.startswith("rejected_") and k != "rejected_requests"}
        for reason, k in by_reason.items():
            rejected.add_metric([reason], k)
        rest = float(info["rejected_requests"]) - sum(by_reason.values())
        if rest > 0:  # counted by a state that kept no reasons
            rejected.add_metric(["unrecorded"], rest)
        yield rejected
        yield CounterMetricFamily(
            "streameval_future_events",
            "Events refused for a time further ahead of the server's clock than max_future",
            value=float(info.get("future_events", 0)),
        )
        t = snap.get("t")
        yield GaugeMetricFamily(
            "streameval_event_time_seconds", "Newest event time seen (epoch seconds)",
            value=_value(t),
        )
        active = GaugeMetricFamily(
            "streameval_alert_active",
            "1 for each active (pending or firing) alert, with its rule's severity",
            labels=["rule", "segment", "state", "severity"],
        )
        for a in snap.get("alerts") or ():
            rule = str(a.get("rule"))
            active.add_metric(
                [bounded_label(rule),
                 labels.get(segment_id(a.get("segment"))) or segment_label(a.get("segment")),
                 str(a.get("state")),
                 severities.get(rule, "warning")], 1.0
            )
        yield active
        yield GaugeMetricFamily(
            "streameval_wal_failed",
            "1 once a batch could not be made durable or applied (write-ahead log write or "
            "sync, the committer, the Monitor): events are refused until a restart",
            value=float(bool(getattr(self.engine, "failed", None))),
        )
        build = GaugeMetricFamily(
            "streameval_info", "Always 1: the model served (serve.model) and streameval's version",
            labels=["model", "version"],
        )
        model = (getattr(self.engine, "serve_options", None) or {}).get("model") or ""
        build.add_metric([bounded_label(str(model)), _version()], 1.0)
        yield build
        yield CounterMetricFamily(
            "streameval_alert_transitions", "Alert transitions emitted since start",
            value=float(info["alerts"]),
        )
        yield CounterMetricFamily(
            "streameval_checkpoints", "Checkpoints written since start",
            value=float(info["checkpoints"]),
        )
        yield CounterMetricFamily(
            "streameval_checkpoint_errors", "Checkpoint attempts that failed since start",
            value=float(info.get("checkpoint_errors", 0)),
        )
        yield GaugeMetricFamily(
            "streameval_checkpoint_failing",
            "1 while the last checkpoint attempt failed (events are still taken and logged)",
            value=float(bool(getattr(self.engine, "checkpoint_error", None))),
        )
        yield CounterMetricFamily(
            "streameval_lost_batches",
            "Acknowledged batches found damaged or missing at a start that accepted the loss",
            value=float(info.get("lost_batches", 0)),
        )
        yield CounterMetricFamily(
            "streameval_lost_events",
            "Events of those batches (where a damaged record still says how many)",
            value=float(info.get("lost_events", 0)),
        )
        yield GaugeMetricFamily(
            "streameval_last_checkpoint_timestamp_seconds",
            "Wall-clock time of the last checkpoint (start time before the first)",
            value=float(info["last_checkpoint"]),
        )
        yield GaugeMetricFamily(
            "streameval_events_since_checkpoint",
            "Acknowledged events held only in the write-ahead log",
            value=float(info["events_since_checkpoint"]),
        )
        yield CounterMetricFamily(
            "streameval_log_commits",
            "Commits (fsyncs) of the write-ahead log; batches per commit is group commit's gain",
            value=float(info.get("log_commits", 0)),
        )
        yield CounterMetricFamily(
            "streameval_retried_batches",
            "Batches retried with an idempotency key already seen (answered, not counted)",
            value=float(info.get("retried_batches", 0)),
        )
        join = info.get("join")
        if join is not None:
            outcomes = CounterMetricFamily(
                "streameval_label_join",
                "Delayed labels: predictions joined to their label, expired unlabeled "
                "(label_ttl), orphan labels (no waiting prediction), duplicate prediction ids",
                labels=["outcome"],
            )
            for outcome in ("joined", "expired", "orphans", "duplicates"):
                outcomes.add_metric([outcome], float(join[outcome]))
            yield outcomes
            yield GaugeMetricFamily(
                "streameval_predictions_pending", "Predictions waiting for their label",
                value=float(join["pending"]),
            )
            yield GaugeMetricFamily(
                "streameval_predictions_pending_max",
                "Most predictions that may wait (max_pending; more get 429)",
                value=float(join["max_pending"]),
            )
            yield CounterMetricFamily(
                "streameval_pending_refusals",
                "Batches of predictions refused with 429 at max_pending",
                value=float(info.get("pending_refusals", 0)),
            )
        missing = snap.get("missing_segment_fields")
        if missing is not None:
            family = CounterMetricFamily(
                "streameval_missing_segment_field",
                "Events without a segment field (counted in the whole stream only)",
                labels=["field"],
            )
            for field, k in missing.items():
                family.add_metric([bounded_label(str(field))], float(k))
            yield family


def _gather(monitor, info):
    snap = monitor.snapshot()
    metrics = getattr(monitor, "metrics", None) or {}
    windows = {name: window_label(m) for name, m in metrics.items()}
    severities = {r.name: getattr(r, "severity", "warning") for r in getattr(monitor, "rules", ())}
    return snap, info, windows, severities


def _version():
    from streameval import __version__

    return __version__


def _segments(snap):
    segs = snap.get("segments") or {}
    if isinstance(segs, dict):
        return list(segs.items())
    return [(e.get("segment"), e) for e in segs]
