"""Alertmanager's formats, over real sockets: the API v2 push (with re-sends) and the
webhook body, against a local HTTP receiver; rules' severity, labels and annotations.
The real Alertmanager is in tests/test_service_prometheus.py."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from streameval.alerts import Rule, rule_from_config
from streameval.io.alertmanager import AlertmanagerSink, AlertmanagerWebhookSink, alert_for


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.path, json.loads(body), time.time()))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    srv.received = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()


def url_of(srv):
    return f"http://127.0.0.1:{srv.server_address[1]}"


def ts(iso):
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


RULE = rule_from_config({"rule": "recall@1h < 0.8", "severity": "page",
                         "labels": {"team": "fraud"},
                         "annotations": {"runbook_url": "https://rb.example/recall"}})


def transition(state, n, value=0.7, segment="fr"):
    return {"rule": RULE.name, "state": state, "n": n, "t": 1_700_000_000.0 + n,
            "value": value, "segment": segment}


def test_rule_severity_labels_and_annotations_round_trip_and_are_checked():
    assert RULE.severity == "page" and RULE.labels == {"team": "fraud"}
    cfg = RULE.to_config()
    assert cfg["severity"] == "page" and cfg["annotations"]["runbook_url"].endswith("/recall")
    back = Rule.from_state(RULE.to_state())
    assert (back.severity, back.labels, back.annotations) == (
        RULE.severity, RULE.labels, RULE.annotations)
    assert RULE.clone().labels == {"team": "fraud"}
    assert rule_from_config("recall < 0.8").to_config() == {"metric": "recall", "op": "<",
                                                            "value": 0.8}
    with pytest.raises(ValueError, match="labels.severity is set by streameval"):
        rule_from_config({"rule": "recall < 0.8", "labels": {"severity": "x"}})
    with pytest.raises(ValueError, match="must be a table of strings"):
        rule_from_config({"rule": "recall < 0.8", "annotations": {"runbook_url": 3}})


def test_api_v2_push_sends_firing_resends_it_and_then_its_resolution(receiver):
    sink = AlertmanagerSink(url_of(receiver), {RULE.name: RULE}, labels={"model": "m1"},
                            generator_url="http://svc/alerts", resend_interval=0.2)
    try:
        assert sink.write(transition("pending", 100))  # pending: not sent
        time.sleep(0.3)
        assert receiver.received == []
        t_fire = time.time()
        assert sink.write(transition("firing", 200))
        time.sleep(0.75)  # about three re-sends
        assert sink.firing == [(RULE.name, "fr")]
        assert sink.write(transition("resolved", 300, value=0.9))
        t_end = time.time()
        time.sleep(0.5)  # no re-send after the resolution
    finally:
        sink.close()
    paths = {p for p, _, _ in receiver.received}
    assert paths == {"/api/v2/alerts"}
    bodies = [b for _, b, _ in receiver.received]
    assert all(len(b) == 1 for b in bodies)
    alerts = [b[0] for b in bodies]
    first, last = alerts[0], alerts[-1]
    assert 3 <= len(alerts) - 2 <= 5, len(alerts)  # the re-sends between the two
    assert first["labels"] == {"alertname": "recall@1h < 0.8", "severity": "page",
                               "metric": "recall@1h", "segment": "fr", "model": "m1",
                               "team": "fraud"}
    assert first["annotations"]["runbook_url"] == "https://rb.example/recall"
    assert first["annotations"]["summary"] == "recall@1h < 0.8 (segment fr)"
    assert first["annotations"]["description"] == (
        "recall@1h = 0.7 breaks the rule recall@1h < 0.8 in segment fr (200 events, "
        "event time 2023-11-14T22:16:40.000Z)")  # 1 700 000 200
    assert first["generatorURL"] == "http://svc/alerts"
    assert abs(ts(first["startsAt"]) - t_fire) < 0.1
    assert abs(ts(first["endsAt"]) - (t_fire + 0.8)) < 0.1  # 4 re-send intervals ahead
    # every re-send: the same alert, the same start, a later end
    for a, b in zip(alerts[:-2], alerts[1:-1]):
        assert b["labels"] == a["labels"] and b["startsAt"] == first["startsAt"]
        assert ts(b["endsAt"]) > ts(a["endsAt"])
    assert last["startsAt"] == first["startsAt"] and abs(ts(last["endsAt"]) - t_end) < 0.1
    assert "holds again" in last["annotations"]["description"]
    assert sink.failures == 0 and sink.count == 2


def test_webhook_in_alertmanager_format(receiver):
    sink = AlertmanagerWebhookSink(url_of(receiver) + "/hook", {RULE.name: RULE},
                                   labels={"job": "streameval"}, receiver="ops")
    sink.write(transition("pending", 100))
    sink.write(transition("firing", 200, segment=None))
    sink.write(transition("resolved", 300, segment=None))
    sink.write(transition("resolved", 400, segment="de"))  # never fired: not sent
    sink.close()
    (p1, fire, _), (p2, res, _) = receiver.received
    assert p1 == p2 == "/hook"
    assert fire["version"] == "4" and fire["status"] == "firing" and fire["receiver"] == "ops"
    assert fire["groupLabels"] == {"alertname": "recall@1h < 0.8"}
    assert fire["commonLabels"] == fire["alerts"][0]["labels"] == {
        "alertname": "recall@1h < 0.8", "severity": "page", "metric": "recall@1h",
        "job": "streameval", "team": "fraud"}
    assert fire["alerts"][0]["endsAt"] == "0001-01-01T00:00:00Z"
    assert res["status"] == "resolved" and res["alerts"][0]["status"] == "resolved"
    assert res["alerts"][0]["fingerprint"] == fire["alerts"][0]["fingerprint"]
    assert res["commonAnnotations"]["runbook_url"] == "https://rb.example/recall"


def test_the_service_sends_the_alertmanager_webhook_format(receiver):
    pytest.importorskip("starlette")
    import urllib.request

    from streameval.service import BackgroundServer

    config = {"monitor": {"every": 10, "metrics": {"recall": "recall"},
                          "rules": [{"rule": "recall < 0.5", "severity": "critical"}]},
              "serve": {"webhooks": [url_of(receiver) + "/am"], "webhook_format": "alertmanager",
                        "model": "fraud-v3"}}
    events = [{"ts": 1_700_000_000 + i, "label": 1, "score": 0.2} for i in range(10)]
    with BackgroundServer(config) as srv:
        req = urllib.request.Request(srv.url + "/events", data=json.dumps(events).encode(),
                                     headers={"Content-Type": "application/json"})
        assert json.load(urllib.request.urlopen(req))["accepted"] == 10
        deadline = time.time() + 10
        while not receiver.received and time.time() < deadline:
            time.sleep(0.05)
    (path, body, _), = receiver.received
    assert path == "/am" and body["status"] == "firing"
    assert body["alerts"][0]["labels"] == {"alertname": "recall < 0.5", "severity": "critical",
                                           "metric": "recall", "model": "fraud-v3",
                                           "job": "streameval"}
    assert body["alerts"][0]["generatorURL"] == srv.url + "/alerts"
    ann = body["alerts"][0]["annotations"]
    # the explanation of the Monitor's transition: 10 positives all missed, so recall 0
    # over all 10 events (the continuity-corrected Wilson 95% interval of 0 in 10, scipy's
    # binomtest(0, 10).proportion_ci(method="wilsoncc"): [0, 0.3445])
    assert ann["description"].startswith(
        "recall of the whole stream is 0 (95% interval 0 to 0.345), below the threshold 0.5; "
        "10 labelled events (all events). Rule recall < 0.5, the whole stream, 10 events")
    assert (ann["expr"], ann["threshold"], ann["events"]) == ("recall < 0.5", "< 0.5", "10")


def test_alert_for_a_rule_unknown_to_the_sink_still_names_its_metric():
    a = alert_for({"rule": "auc < 0.7", "state": "firing", "n": 5, "t": None,
                   "value": float("nan"), "segment": ["fr", "ios"]}, now=0.0)
    assert a["labels"] == {"alertname": "auc < 0.7", "severity": "warning", "metric": "auc",
                           "segment": "fr|ios"}
    assert a["annotations"]["description"] == (
        "auc = undefined breaks the rule auc < 0.7 in segment fr|ios (5 events)")
