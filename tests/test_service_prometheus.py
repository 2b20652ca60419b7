"""The service with a real Prometheus and a real Alertmanager (Debian packages
``prometheus`` and ``prometheus-alertmanager``; ``.ci/run`` installs them).

Prometheus scrapes ``streameval serve`` every second and a PromQL query returns the
AUC the service computed (to the bit: the exposition writes floats in full); the
service pushes its alerts to Alertmanager's API v2, and Alertmanager's own API shows
the alert firing, with the rule's severity, labels and annotations, then resolved.
Prometheus loads the monitoring mixin's rules (``mixin/``): its recorded count of firing
alerts equals the service's, and every rule evaluates without error.
Skipped where the binaries are missing, unless ``STREAMEVAL_REQUIRE_PROMETHEUS=1``
(CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import threading

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

pytest.importorskip("starlette")

from streameval.service import BackgroundServer  # noqa: E402

MIXIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mixin")

PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
if not (PROMETHEUS and ALERTMANAGER):
    if os.environ.get("STREAMEVAL_REQUIRE_PROMETHEUS") == "1":
        raise RuntimeError("prometheus and prometheus-alertmanager are required "
                           "(apt-get install prometheus prometheus-alertmanager)")
    pytest.skip("prometheus or prometheus-alertmanager is not installed",
                allow_module_level=True)


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def wait_for(fn, timeout=60.0, every=0.25):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except (OSError, ValueError, KeyError, IndexError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out; last: {last!r}")


def start(cmd, log):
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def stop(proc):
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        proc.kill()


def post_events(url, events):
    req = urllib.request.Request(url + "/events", data=json.dumps(events).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def events(n, t0, seed, good=True):
    """Continuous scores: informative (AUC ~0.9) or inverted (AUC ~0.1)."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    s = np.clip(rng.normal(0.35 + (0.3 if good else -0.3) * y, 0.15), 0, 1)
    return [{"ts": t0 + i, "label": int(y[i]), "score": float(s[i])} for i in range(n)]


class _Receiver(BaseHTTPRequestHandler):
    """An Alertmanager webhook receiver: keeps the bodies Alertmanager posts."""

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def stack(tmp_path, prometheus, free_port):
    """Alertmanager (routing to a local webhook receiver), then streameval pushing to
    it, then Prometheus scraping streameval; yields their URLs."""
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    receiver.received = []
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    am_port = free_port()
    (tmp_path / "alertmanager.yml").write_text(f"""\
route:
  receiver: streameval-test
  group_by: [alertname, segment]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: streameval-test
    webhook_configs:
      - url: http://127.0.0.1:{receiver.server_address[1]}/hook
        send_resolved: true
""")
    log = open(tmp_path / "stack.log", "w")
    am = start([ALERTMANAGER, f"--config.file={tmp_path / 'alertmanager.yml'}",
                f"--storage.path={tmp_path / 'am'}", f"--web.listen-address=127.0.0.1:{am_port}",
                "--cluster.listen-address=",
                # "Notify success" / "attempt failed" lines: the webhook receiver's check
                # has timed out now and then with nothing at info level (stack.log)
                "--log.level=debug"], log)
    am_url = f"http://127.0.0.1:{am_port}"
    config = {
        "monitor": {
            "every": 50,
            "metrics": {"auc": "roc_auc", "auc@100": {"metric": "roc_auc", "size": 100}},
            "rules": [{"rule": "auc@100 < 0.6", "severity": "critical",
                       "labels": {"team": "fraud"},
                       "annotations": {"runbook_url": "https://runbooks.example/auc"}}],
        },
        "serve": {"alertmanager": [am_url], "alertmanager_resend": 1, "model": "fraud-v3"},
    }
    srv = BackgroundServer(config).start()
    target = srv.url.split("://", 1)[1]
    prom = prometheus(f"""\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {os.path.join(MIXIN, "prometheus_rules.yaml")}
  - {os.path.join(MIXIN, "prometheus_alerts.yaml")}
scrape_configs:
  - job_name: streameval
    static_configs:
      - targets: ["{target}"]
""")
    try:
        wait_for(lambda: get_json(am_url + "/api/v2/status"))
        yield {"service": srv, "am": am_url, "prom": prom,
               "received": receiver.received, "log": tmp_path / "stack.log"}
    finally:
        srv.stop()
        stop(am)
        receiver.shutdown()
        log.close()


def promql(prom, query):
    data = get_json(prom + "/api/v1/query?" + urllib.parse.urlencode({"query": query}))
    assert data["status"] == "success", data
    return data["data"]["result"]


def test_prometheus_scrapes_the_auc_and_alertmanager_gets_firing_then_resolved(stack):
    srv, prom, am = stack["service"], stack["prom"], stack["am"]
    t0 = 1_700_000_000
    good = events(400, t0, seed=1)
    post_events(srv.url, good)
    want = roc_auc_score([e["label"] for e in good], [e["score"] for e in good])

    def scraped():
        res = promql(prom, 'streameval_metric{metric="auc",window="cumulative",segment=""}')
        return res and float(res[0]["value"][1]) == want and res[0]
    sample = wait_for(scraped)
    assert sample["metric"]["job"] == "streameval"
    # the windowed AUC of bad events falls under 0.6: the rule fires
    post_events(srv.url, events(150, t0 + 400, seed=2, good=False))

    def firing():
        alerts = get_json(am + "/api/v2/alerts?active=true")
        return [a for a in alerts if a["labels"].get("alertname") == "auc@100 < 0.6"]
    (alert,) = wait_for(firing)
    assert alert["labels"] == {"alertname": "auc@100 < 0.6", "severity": "critical",
                               "metric": "auc@100", "model": "fraud-v3",
                               "job": "streameval", "team": "fraud"}
    ann = alert["annotations"]
    assert ann["runbook_url"] == "https://runbooks.example/auc"
    assert ann["summary"] == "auc@100 < 0.6 (the whole stream)"
    # the explanation: the sentence, then the figures one per annotation
    assert ann["description"].startswith("auc@100 of the whole stream is 0.")
    assert "below the threshold 0.6" in ann["description"]
    assert "100 labelled events (last 100 events)" in ann["description"]
    assert (ann["expr"], ann["threshold"], ann["events"]) == ("auc@100 < 0.6", "< 0.6", "100")
    assert ann["observed"].startswith("auc@100 = 0.") and "95% interval" in ann["observed"]
    assert alert["generatorURL"] == srv.url + "/alerts"
    assert alert["status"]["state"] == "active"
    # re-sent every second: Alertmanager's endsAt moves forward
    ends = alert["endsAt"]
    later = wait_for(lambda: [a for a in firing() if a["endsAt"] > ends])
    assert later[0]["startsAt"] == alert["startsAt"]
    # PromQL sees the same alert as active
    active = wait_for(lambda: promql(prom, 'streameval_alert_active{state="firing"}'))
    assert active[0]["metric"]["rule"] == "auc@100 < 0.6"
    # the mixin's recorded count of firing alerts is the service's own count
    snap_firing = sum(a["state"] == "firing" for a in get_json(srv.url + "/snapshot")["alerts"])
    recorded = wait_for(lambda: [r for r in promql(prom, "instance:streameval_alerts_firing:count")
                                 if float(r["value"][1]) == 1])
    assert float(recorded[0]["value"][1]) == snap_firing == 1
    groups = get_json(prom + "/api/v1/rules")["data"]["groups"]
    assert {g["name"] for g in groups} >= {"streameval.rules", "streameval.quality"}
    for rule in (r for g in groups for r in g["rules"]):
        assert rule["health"] in ("ok", "unknown"), (rule["name"], rule.get("lastError"))

    # Alertmanager notifies its receiver of the firing alert (group_wait): resolving it
    # before would let its first flush see it resolved, and it sends nothing then
    wait_for(lambda: [m for m in stack["received"] if m["status"] == "firing"], timeout=90)
    # good events again: resolved, and Alertmanager ends the alert
    post_events(srv.url, events(200, t0 + 550, seed=3))

    def resolved():
        alerts = [a for a in get_json(am + "/api/v2/alerts")
                  if a["labels"].get("alertname") == "auc@100 < 0.6"]
        now = datetime.now(timezone.utc)
        return all(datetime.fromisoformat(a["endsAt"].replace("Z", "+00:00")) <= now
                   for a in alerts)  # (none left counts as ended)
    wait_for(resolved)
    assert not firing()
    # Alertmanager notified its webhook receiver of the firing and of the resolution
    received = stack["received"]
    statuses = wait_for(lambda: (s := [m["status"] for m in received]) and "resolved" in s
                        and s, timeout=90)
    assert statuses[0] == "firing" and statuses[-1] == "resolved"
    assert received[0]["alerts"][0]["labels"]["severity"] == "critical"
