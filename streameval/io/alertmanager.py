"""Alert transitions for Alertmanager: its API v2 and its webhook format.

:class:`AlertmanagerSink` pushes alerts to Alertmanager's ``POST /api/v2/alerts``, as a
Prometheus server does: a ``firing`` transition is sent at once and re-sent every
``resend_interval`` seconds while it fires (Alertmanager resolves an alert that is not
re-sent before its ``endsAt``), a ``resolved`` one is sent with ``endsAt`` = now;
``pending`` transitions are not sent (Prometheus does not send its pending alerts
either). Each alert carries

* ``labels``: ``alertname`` (the rule's name), ``severity`` (the rule's, ``warning``
  by default), ``metric`` (the metric the rule reads), ``segment`` (values joined by
  ``|`` for several fields; absent for the whole stream, since Alertmanager drops an
  empty label), ``segment_json`` (the segment's JSON text, for a segment whose
  ``segment`` text another could share: a number, a bool, ``""``, or several fields
  one of which is one of those or holds ``|``: :func:`segment_labels`), the static
  labels of the
  configuration (``model`` or ``job``), then the rule's own ``labels``;
* ``annotations``: ``summary``, ``description`` (the transition's explanation: the
  sentence of its ``message`` field, then the rule, the events and the event time;
  for a transition without one, the value, the rule and where it fired), the
  explanation's figures one per annotation (:func:`explanation_annotations`:
  ``expr``, ``observed``, ``threshold``, ``baseline``, ``change``, ``events``,
  ``change_start``, ``rates``, ``p_value``, where they apply), ``runbook_url`` when
  configured, then the rule's own ``annotations``;
* ``startsAt`` (wall-clock time it started firing), ``endsAt`` (now + 4 re-send
  intervals while firing, as Prometheus does; the resolution time once resolved) and
  ``generatorURL``.

Wall-clock times, not event times: Alertmanager compares them with its own clock. The
event time of the transition is in the ``description`` and the ``event_time``
annotation.

:func:`webhook_message` wraps alerts in the body Alertmanager itself posts to its
webhook receivers (``version`` 4), so that a receiver written for Alertmanager takes
streameval's webhooks unchanged (:class:`AlertmanagerWebhookSink`).

Imports: the standard library and :mod:`streameval.io.sinks`.
"""

from __future__ import annotations

import hashlib
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from streameval.io.sinks import Sink, WebhookSink, segment_id

__all__ = ["AlertmanagerSink", "AlertmanagerWebhookSink", "alert_for", "webhook_message",
           "DEFAULT_RESEND_INTERVAL", "segment_value", "segment_labels",
           "explanation_annotations"]

#: Seconds between re-sends of a firing alert (Prometheus' ``resend_delay`` is 1 min).
DEFAULT_RESEND_INTERVAL = 60.0


def segment_value(segment) -> str:
    """The ``segment`` label: ``""`` for the whole stream, ``a|b`` for several fields.

    >>> segment_value(None), segment_value("fr"), segment_value(["fr", None])
    ('', 'fr', 'fr|')
    """
    if segment is None:
        return ""
    if isinstance(segment, (list, tuple)):
        return "|".join("" if v is None else str(v) for v in segment)
    return str(segment)


def _plain(v) -> bool:
    """Whether ``v``'s label text names it alone among the values of its kind: a
    non-empty string (a number, a bool or ``""`` reads like a string or the whole
    stream)."""
    return isinstance(v, str) and v != ""


def segment_labels(segment) -> dict:
    """The labels that name a segment: ``segment`` (:func:`segment_value`; absent for
    the whole stream, as Alertmanager drops an empty label) and, when that text could
    be another segment's too (a number, a bool or ``""``; several fields one of which
    is one of those or holds ``|``), ``segment_json``: the segment's JSON text, so that
    two segments are never one alert.

    >>> segment_labels(None), segment_labels("fr"), segment_labels(3), segment_labels("3")
    ({}, {'segment': 'fr'}, {'segment': '3', 'segment_json': '3'}, {'segment': '3'})
    >>> segment_labels(["a|b", "c"])
    {'segment': 'a|b|c', 'segment_json': '["a|b","c"]'}
    """
    if segment is None:
        return {}
    out = {}
    text = segment_value(segment)
    if text:
        out["segment"] = text
    several = isinstance(segment, (list, tuple))
    if not (all(_plain(v) and "|" not in v for v in segment) if several else _plain(segment)):
        out["segment_json"] = segment_id(segment)
    return out


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _g(x) -> str:
    return "undefined" if x is None or x != x else f"{x:.4g}"


def explanation_annotations(transition: Mapping) -> dict:
    """The figures of a transition's explanation fields as Alertmanager annotations
    (strings), for templates and receivers: ``expr`` (the rule as written),
    ``observed`` (what the value is, the value and its interval), ``threshold``,
    ``baseline`` and ``change`` (drop and rise rules), ``events`` (the labelled
    events the value rests on), ``change_start`` (stream event and event time) and
    ``rates`` (before -> after) for a detector's alarm, ``p_value``. Empty for a
    transition without explanation fields.

    >>> explanation_annotations({"value": 0.71, "expr": "recall@1000 < 0.8",
    ...     "kind": "threshold", "value_label": "recall@1000", "op": "<", "threshold": 0.8,
    ...     "interval": [0.66, 0.76], "interval_level": 0.99, "events": 1000})
    {'expr': 'recall@1000 < 0.8', 'observed': 'recall@1000 = 0.71 (99% interval 0.66 to 0.76)', 'threshold': '< 0.8', 'events': '1000'}
    """
    if "expr" not in transition:
        return {}
    tr = transition
    out = {"expr": str(tr["expr"])}
    observed = f"{tr.get('value_label') or tr.get('metric')} = {_g(tr.get('value'))}"
    iv, level = tr.get("interval"), tr.get("interval_level")
    if iv and level is not None:
        observed += f" ({level * 100:.4g}% interval {_g(iv[0])} to {_g(iv[1])})"
    out["observed"] = observed
    if tr.get("threshold") is not None:
        out["threshold"] = f"{tr.get('op')} {_g(tr['threshold'])}"
    if tr.get("baseline") is not None:
        out["baseline"] = f"{_g(tr['baseline'])} ({tr.get('baseline_rule')})"
    if tr.get("change") is not None:
        unit = " (relative)" if tr.get("relative") else ""
        out["change"] = f"{_g(tr['change'])}{unit}, rule: at least {_g(tr.get('by'))}"
    if tr.get("events") is not None:
        out["events"] = str(tr["events"])
    if tr.get("change_start_n") is not None:
        start = f"event {tr['change_start_n']}"
        if tr.get("change_start_t") is not None:
            start += f" ({_iso(float(tr['change_start_t']))})"
        out["change_start"] = start
    if tr.get("before") is not None and tr.get("after") is not None:
        out["rates"] = f"{_g(tr['before'])} -> {_g(tr['after'])}"
    if tr.get("p_value") is not None:
        out["p_value"] = _g(tr["p_value"])
    return out


def alert_for(transition: Mapping, rule: Any = None, *, labels: Mapping[str, str] | None = None,
              runbook_url: str | None = None, generator_url: str = "",
              starts_at: float | None = None, now: float | None = None,
              resend_interval: float = DEFAULT_RESEND_INTERVAL) -> dict:
    """The Alertmanager API v2 alert of a ``firing`` or ``resolved`` transition.

    ``rule`` (a :class:`~streameval.alerts.Rule`, or None) gives ``metric``,
    ``severity`` and its own labels and annotations; ``labels`` are the configuration's
    static ones (``model``, ``job``). ``starts_at``: when the alert started firing
    (default ``now``).

    >>> a = alert_for({"rule": "recall < 0.8", "state": "firing", "n": 500, "t": 0.0,
    ...                "value": 0.71, "segment": "fr"}, labels={"model": "fraud-v3"},
    ...               now=60.0, generator_url="http://monitor:8000/alerts")
    >>> a["labels"], a["startsAt"], a["endsAt"]
    ({'alertname': 'recall < 0.8', 'severity': 'warning', 'metric': 'recall', 'segment': 'fr', 'model': 'fraud-v3'}, '1970-01-01T00:01:00.000Z', '1970-01-01T00:05:00.000Z')
    >>> a["annotations"]["description"]
    'recall = 0.71 breaks the rule recall < 0.8 in segment fr (500 events, event time 1970-01-01T00:00:00.000Z)'
    """
    now = time.time() if now is None else now
    name = str(transition.get("rule"))
    metric = getattr(rule, "metric", None) or name.split(" ", 1)[0]
    seg = segment_value(transition.get("segment"))
    out_labels = {"alertname": name, "severity": getattr(rule, "severity", "warning"),
                  "metric": str(metric)}
    # (Alertmanager drops empty labels: the whole stream has none)
    out_labels.update(segment_labels(transition.get("segment")))
    out_labels.update(labels or {})
    out_labels.update(getattr(rule, "labels", None) or {})
    value, t = transition.get("value"), transition.get("t")
    where = f"segment {seg}" if seg else "the whole stream"
    shown = "undefined" if value is None or value != value else f"{value:.4g}"
    when = f"{transition.get('n')} events"
    if t is not None:
        when += f", event time {_iso(float(t))}"
    annotations = {
        "summary": f"{name} ({where})",
        "description": f"{metric} = {shown} breaks the rule {name} in {where} ({when})",
    }
    if t is not None:
        annotations["event_time"] = _iso(float(t))
    explained = transition.get("message")
    if explained:
        annotations["description"] = f"{explained}. Rule {name}, {where}, {when}."
        annotations.update(explanation_annotations(transition))
    if runbook_url:
        annotations["runbook_url"] = runbook_url
    annotations.update(getattr(rule, "annotations", None) or {})
    if transition.get("state") == "resolved":
        annotations["description"] = (
            f"{explained}: the rule {name} holds again in {where} ({when})" if explained
            else f"{metric} = {shown}: the rule {name} holds again in {where} ({when})")
        ends = now
    else:
        ends = now + 4 * resend_interval
    return {"labels": out_labels, "annotations": annotations,
            "startsAt": _iso(now if starts_at is None else starts_at), "endsAt": _iso(ends),
            "generatorURL": generator_url}


def _fingerprint(labels: Mapping[str, str]) -> str:
    h = hashlib.sha256()
    for k in sorted(labels):
        h.update(k.encode() + b"\xff" + labels[k].encode() + b"\xff")
    return h.hexdigest()[:16]


def webhook_message(alerts: list, *, receiver: str = "streameval", external_url: str = "") -> dict:
    """Alertmanager's webhook body (``version`` 4) for API v2 ``alerts`` (one group).

    >>> a = {"labels": {"alertname": "r", "severity": "warning"}, "annotations": {},
    ...      "startsAt": "1970-01-01T00:00:00.000Z", "endsAt": "1970-01-01T00:00:00.000Z",
    ...      "generatorURL": ""}
    >>> m = webhook_message([a])
    >>> m["version"], m["status"], m["alerts"][0]["status"], m["commonLabels"]
    ('4', 'resolved', 'resolved', {'alertname': 'r', 'severity': 'warning'})
    """
    now = _iso(time.time())
    out = []
    for a in alerts:
        status = "resolved" if a["endsAt"] <= now else "firing"
        out.append({"status": status, "labels": dict(a["labels"]),
                    "annotations": dict(a["annotations"]), "startsAt": a["startsAt"],
                    "endsAt": a["endsAt"] if status == "resolved" else "0001-01-01T00:00:00Z",
                    "generatorURL": a.get("generatorURL", ""),
                    "fingerprint": _fingerprint(a["labels"])})
    common_labels = _common([a["labels"] for a in out])
    return {
        "version": "4",
        "groupKey": "{}:" + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(
            {"alertname": common_labels.get("alertname", "")}.items())) + "}",
        "truncatedAlerts": 0,
        "status": "firing" if any(a["status"] == "firing" for a in out) else "resolved",
        "receiver": receiver,
        "groupLabels": {k: common_labels[k] for k in ("alertname",) if k in common_labels},
        "commonLabels": common_labels,
        "commonAnnotations": _common([a["annotations"] for a in out]),
        "externalURL": external_url,
        "alerts": out,
    }


def _common(tables: list) -> dict:
    if not tables:
        return {}
    first = tables[0]
    return {k: v for k, v in first.items() if all(t.get(k) == v for t in tables[1:])}


class _Alerts:
    """The transitions as Alertmanager alerts, and the firing ones to re-send."""

    def __init__(self, rules, labels, runbook_url, generator_url, resend_interval, clock):
        self.rules = rules
        self.labels = dict(labels or {})
        self.runbook_url = runbook_url
        self.generator_url = generator_url
        self.resend_interval = float(resend_interval)
        self.clock = clock
        self.firing: dict = {}  # (rule, segment_id(segment)) -> (transition, startsAt)
        self.lock = threading.Lock()

    def rule(self, name):
        rules = self.rules() if callable(self.rules) else self.rules
        return (rules or {}).get(name)

    def of(self, transition) -> dict | None:
        state = transition.get("state")
        if state not in ("firing", "resolved"):
            return None
        # (by the segment's typed JSON text: segments 1 and "1" are two alerts)
        key = (transition.get("rule"), segment_id(transition.get("segment")))
        now = self.clock()
        with self.lock:
            if state == "firing":
                self.firing[key] = (dict(transition), now)
                starts = now
            else:
                previous = self.firing.pop(key, None)
                if previous is None:  # resolved from pending: Alertmanager never saw it
                    return None
                starts = previous[1]
        return alert_for(transition, self.rule(transition.get("rule")), labels=self.labels,
                         runbook_url=self.runbook_url, generator_url=self.generator_url,
                         starts_at=starts, now=now, resend_interval=self.resend_interval)

    def still_firing(self) -> list:
        now = self.clock()
        with self.lock:
            items = list(self.firing.values())
        return [alert_for(t, self.rule(t.get("rule")), labels=self.labels,
                          runbook_url=self.runbook_url, generator_url=self.generator_url,
                          starts_at=starts, now=now, resend_interval=self.resend_interval)
                for t, starts in items]


class AlertmanagerSink(Sink):
    """Push alert transitions to Alertmanager (``POST {url}/api/v2/alerts``).

    Parameters: ``url`` (Alertmanager's base URL, ``http://alertmanager:9093``),
    ``rules`` (a mapping of rule name to :class:`~streameval.alerts.Rule`, or a callable
    returning one: ``metric``, ``severity``, labels and annotations come from it),
    ``labels`` (static labels: ``model``, ``job``), ``runbook_url``, ``generator_url``
    (a link back, e.g. the service's ``/alerts``), ``resend_interval`` (seconds,
    :data:`DEFAULT_RESEND_INTERVAL`; firing alerts are re-sent from a thread),
    ``retries``/``timeout`` of each POST (:class:`~streameval.io.WebhookSink`'s).
    :meth:`write` returns False when a delivery failed (counted in ``failures``).
    """

    def __init__(self, url: str, rules: Mapping | Callable[[], Mapping] | None = None, *,
                 labels: Mapping[str, str] | None = None, runbook_url: str | None = None,
                 generator_url: str = "", resend_interval: float = DEFAULT_RESEND_INTERVAL,
                 retries: int = 3, backoff: float = 0.5, timeout: float = 5,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        if not isinstance(resend_interval, (int, float)) or isinstance(resend_interval, bool) \
                or not resend_interval > 0:
            raise ValueError(f"resend_interval = {resend_interval!r}: must be a number of "
                             "seconds > 0")
        self.url = url.rstrip("/") + "/api/v2/alerts"
        self._post = WebhookSink(self.url, retries=retries, backoff=backoff, timeout=timeout)
        self._alerts = _Alerts(rules, labels, runbook_url, generator_url, resend_interval, clock)
        self._stop = threading.Event()
        self._resender = threading.Thread(target=self._resend_loop, name="streameval-alertmanager",
                                          daemon=True)
        self._resender.start()

    @property
    def failures(self) -> int:
        """Deliveries that failed after every retry."""
        return self._post.failures

    @property
    def firing(self) -> list:
        """The (rule, segment) pairs firing now (re-sent every ``resend_interval``)."""
        with self._alerts.lock:
            return [(t.get("rule"), t.get("segment")) for t, _ in self._alerts.firing.values()]

    def __repr__(self) -> str:
        return f"AlertmanagerSink({self.url!r}, sent={self.count}, failures={self.failures})"

    def write(self, obj: Any) -> bool:
        """Send a firing or resolved transition (pending ones are not sent)."""
        alert = self._alerts.of(obj)
        if alert is None:
            return True
        ok = self._post.write([alert])
        if ok:
            with self._lock:
                self.count += 1
        return ok

    def resend(self) -> bool:
        """Re-send every firing alert now (the thread does it every interval)."""
        alerts = self._alerts.still_firing()
        return not alerts or self._post.write(alerts)

    def _resend_loop(self) -> None:
        while not self._stop.wait(self._alerts.resend_interval):
            self.resend()

    def close(self) -> None:
        """Stop re-sending (the firing alerts then resolve at their ``endsAt``)."""
        self._stop.set()
        self._resender.join(timeout=5)
        self._post.close()


class AlertmanagerWebhookSink(Sink):
    """A webhook that posts Alertmanager's webhook body (:func:`webhook_message`) for
    each firing or resolved transition, so receivers written for Alertmanager work.

    Takes ``url`` and the arguments of :class:`AlertmanagerSink` (but sends once, no
    re-sends) and of :class:`~streameval.io.WebhookSink` (``retries``, ``backoff``,
    ``timeout``, ``headers``).
    """

    def __init__(self, url: str, rules=None, *, labels=None, runbook_url=None,
                 generator_url: str = "", receiver: str = "streameval", retries: int = 3,
                 backoff: float = 0.5, timeout: float = 5, headers=None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.url = url
        self.receiver = receiver
        self._post = WebhookSink(url, retries=retries, backoff=backoff, timeout=timeout,
                                 headers=headers)
        self._alerts = _Alerts(rules, labels, runbook_url, generator_url,
                               DEFAULT_RESEND_INTERVAL, clock)

    @property
    def failures(self) -> int:
        return self._post.failures

    def write(self, obj: Any) -> bool:
        alert = self._alerts.of(obj)
        if alert is None:
            return True
        ok = self._post.write(webhook_message([alert], receiver=self.receiver,
                                              external_url=self._alerts.generator_url))
        if ok:
            with self._lock:
                self.count += 1
        return ok

    def close(self) -> None:
        self._post.close()
