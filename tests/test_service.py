"""The HTTP service, over real loopback sockets.

Oracles: scikit-learn on the events posted (and brute force over the last N events for
windows); a Monitor fed the same events directly, in the order the service
acknowledged them (``seq``), for everything else (rows, alerts, windows, segments);
an uninterrupted run for the kill-and-restart runs. Servers run in a thread
(:class:`BackgroundServer`, port 0) or, where a process must die, in a subprocess.
"""

from __future__ import annotations

import http.client
import json
import math
import random
import os
import selectors
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from sklearn.metrics import average_precision_score, precision_score, recall_score, roc_auc_score  # noqa: E402

from streameval.monitor import Monitor  # noqa: E402
from streameval.service import BackgroundServer, add_serve_arguments, build_engine  # noqa: E402
from streameval.service import load_config  # noqa: E402
from streameval.io.sinks import dumps  # noqa: E402
from streameval.service import snapshot_json  # noqa: E402
from streameval.service.engine import CHECKPOINT_FILE, WAL_FILE  # noqa: E402
from streameval.service.wal import StateMismatch  # noqa: E402

TOL = 1e-12
WINDOW = 40

#: A monitor with cumulative and windowed metrics, segments and an alert rule.
CONFIG = {
    "monitor": {
        "every": 25,
        "group_by": "country",
        "metrics": {
            "auc": "roc_auc",
            "ap": "average_precision",
            "precision": "precision",
            "recall": "recall",
            f"auc@{WINDOW}": {"metric": "roc_auc", "size": WINDOW},
            "recall@60s": {"metric": "recall", "period": 60},
        },
        "rules": ["precision < 0.55", f"auc@{WINDOW} < 0.75"],
    }
}


# ----------------------------------------------------------------------- helpers


def make_events(n, seed=0, start=0, weights=True, countries=("fr", "de", "us")):
    """Events with tied scores, weights, increasing times and a segment field."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    s = np.clip(np.round(rng.normal(0.35 + 0.3 * y, 0.2), 2), 0.01, 0.99)
    w = np.round(rng.uniform(0.5, 2.0, n), 1)
    c = rng.choice(countries, n)
    out = []
    for i in range(n):
        e = {"ts": 1_700_000_000 + start + i, "label": int(y[i]), "score": float(s[i]),
             "country": str(c[i]), "id": f"e{start + i}"}
        if weights:
            e["weight"] = float(w[i])
        out.append(e)
    return out


def columns(events):
    y = np.array([bool(e["label"]) for e in events])
    s = np.array([e["score"] for e in events], dtype=float)
    w = np.array([e.get("weight", 1.0) for e in events], dtype=float)
    t = np.array([e["ts"] for e in events], dtype=float)
    seg = [e.get("country") for e in events]
    return y, s, w, t, seg


def direct_monitor(config, batches):
    """A Monitor fed the batches directly (the oracle for the service's state), built
    from the config as the service builds it (with ``group_by``, evaluated every
    ``SEGMENT_EVERY_SECONDS`` of event time too)."""
    mon = load_config(config)[0]
    alerts = []
    mon.on_alert.append(alerts.append)
    for events in batches:
        y, s, w, t, seg = columns(events)
        mon.update_many(y, s, w=w, t=t, segment=seg if config is not None else None)
    return mon, alerts


JSON = {"Content-Type": "application/json"}


def call(url, method, path, body=None, headers=None):
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def post(url, events, token=None, ndjson=False, path="/events"):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if ndjson:
        body = "\n".join(json.dumps(e) for e in events).encode()
        headers["Content-Type"] = "application/x-ndjson"
    else:
        body = json.dumps(events).encode()
        headers["Content-Type"] = "application/json"
    status, _, data = call(url, "POST", path, body, headers)
    return status, json.loads(data)


def get_json(url, path, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    status, _, data = call(url, "GET", path, headers=headers)
    assert status == 200, data
    return json.loads(data)


def values_by_segment(snap):
    return {e["segment"]: e["values"] for e in snap["segments"]}


def covered(sub, n, pending):
    """The events of a segment (``sub``, in order) that its values cover: the first
    ``n`` (its last row's), the other ``pending`` waiting for its next row."""
    assert n + pending == len(sub), (n, pending, len(sub))
    return sub[:n]


def assert_same_state(served, mon):
    """The service's JSON snapshot equals the direct Monitor's (values exactly)."""
    expected = json.loads(json.dumps(snapshot_json(mon.snapshot())))
    assert served["n"] == expected["n"] == mon.n
    assert served["t"] == expected["t"]
    assert [e["segment"] for e in served["segments"]] == [e["segment"] for e in expected["segments"]]
    assert values_by_segment(served) == values_by_segment(expected)
    assert [e["n"] for e in served["segments"]] == [e["n"] for e in expected["segments"]]
    assert served["alerts"] == expected["alerts"]


def sk_values(events):
    """scikit-learn's values over ``events`` (the oracle for cumulative metrics)."""
    y, s, w, _, _ = columns(events)
    out = {}
    if 0 < y.sum() < len(y):
        out["auc"] = roc_auc_score(y, s, sample_weight=w)
    else:
        out["auc"] = math.nan
    out["ap"] = average_precision_score(y, s, sample_weight=w) if y.any() else math.nan
    pred = s >= 0.5
    out["precision"] = precision_score(y, pred, sample_weight=w, zero_division=np.nan)
    out["recall"] = recall_score(y, pred, sample_weight=w, zero_division=np.nan)
    return out


def assert_close(a, b, what):
    if b is None or (isinstance(b, float) and math.isnan(b)):
        assert a is None or math.isnan(a), what
    else:
        assert a is not None and abs(a - b) <= TOL, (what, a, b)


@pytest.fixture
def server(tmp_path):
    started = []

    def start(config=CONFIG, **kw):
        srv = BackgroundServer(config, **kw).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


# ----------------------------------------------------------------------- ingestion


def test_formats_object_array_ndjson_equal_sklearn_and_direct_monitor(server):
    srv = server()
    events = make_events(300, seed=1)
    for e in events[:20]:  # one JSON object per request
        status, _, data = call(srv.url, "POST", "/events", json.dumps(e).encode(), JSON)
        assert status == 200 and json.loads(data)["accepted"] == 1
    assert post(srv.url, events[20:100]) == (200, {"accepted": 80, "n": 100, "seq": 21})
    status, body = post(srv.url, events[100:200], ndjson=True)
    assert (status, body["accepted"], body["n"]) == (200, 100, 200)
    # NDJSON sent as application/json, blank lines and a trailing newline
    text = "\n\n".join(json.dumps(e) for e in events[200:]) + "\n"
    status, _, data = call(srv.url, "POST", "/events", text.encode(), JSON)
    assert status == 200 and json.loads(data)["accepted"] == 100

    snap = get_json(srv.url, "/snapshot")
    assert snap["n"] == 300
    vals = values_by_segment(snap)
    entries = {e["segment"]: e for e in snap["segments"]}
    for seg in (None, "fr", "de", "us"):
        sub = [e for e in events if seg is None or e["country"] == seg]
        # a segment shows its last row's values (evaluated each minute of event time)
        sub = covered(sub, entries[seg]["n"], entries[seg].get("pending", 0))
        assert len(sub) >= 50
        for name, expected in sk_values(sub).items():
            assert_close(vals[seg][name], expected, (seg, name))
        tail = sub[-WINDOW:]  # brute force over the last WINDOW events of the segment
        assert_close(vals[seg][f"auc@{WINDOW}"], sk_values(tail)["auc"], (seg, "window"))
    batches = [[e] for e in events[:20]] + [events[20:100], events[100:200], events[200:]]
    mon, _ = direct_monitor(CONFIG, batches)
    assert_same_state(snap, mon)
    assert get_json(srv.url, "/alerts")["alerts"] == snap["alerts"] == mon.active_alerts()


def test_events_without_time_are_refused_unless_arrival_time_is_stamped(server):
    """An event without ts is a 400 naming it (the wall clock would move the stream's
    clock and every later alert's time); with [input] stamp_arrival_time = true it gets
    its time of arrival. Custom labels and field names work either way."""
    monitor = {"pos_label": "spam", "neg_label": "ham",
               "metrics": {"auc": "roc_auc", "precision": "precision"}}
    events = [{"verdict": "spam" if i % 3 else "ham", "p": (i * 7 % 10) / 10} for i in range(30)]
    strict = server({"monitor": monitor, "input": {"label": "verdict", "score": "p"}})
    timed = [dict(e, ts=1_700_000_000 + i) for i, e in enumerate(events)]
    status, body = post(strict.url, timed[:5] + events[5:])
    assert status == 400 and body["index"] == 5 and body["reason"] == "missing field 'ts'"
    assert get_json(strict.url, "/snapshot")["n"] == 0
    assert post(strict.url, timed)[0] == 200
    assert get_json(strict.url, "/snapshot")["t"] == 1_700_000_029

    srv = server({"monitor": monitor,
                  "input": {"label": "verdict", "score": "p", "stamp_arrival_time": True}})
    before = time.time()
    status, body = post(srv.url, events)
    assert status == 200 and body["accepted"] == 30
    snap = get_json(srv.url, "/snapshot")
    assert before - 1 <= snap["t"] <= time.time() + 1
    y = [e["verdict"] == "spam" for e in events]
    s = [e["p"] for e in events]
    assert_close(values_by_segment(snap)[None]["auc"], roc_auc_score(y, s), "auc")
    status, body = post(srv.url, [{"verdict": "spam", "p": 0.1}, {"verdict": 1, "p": 0.5}])
    assert status == 400 and body["index"] == 1 and "unknown label 1" in body["reason"]


def test_default_monitor_without_config(server):
    srv = server(None)
    assert srv.url.startswith("http://127.0.0.1:")
    events = make_events(200, seed=2, weights=False)
    for e in events:
        e.pop("country")
    assert post(srv.url, events)[0] == 200
    vals = values_by_segment(get_json(srv.url, "/snapshot"))[None]
    for name in ("roc_auc", "average_precision", "precision", "recall", "f1", "accuracy",
                 "log_loss"):
        assert name in vals
    ref = sk_values(events)
    assert_close(vals["roc_auc"], ref["auc"], "roc_auc")
    assert_close(vals["average_precision"], ref["ap"], "average_precision")
    mon, _ = direct_monitor(None, [events])
    assert_same_state(get_json(srv.url, "/snapshot"), mon)


# ----------------------------------------------------------------------- prometheus


def scrape(url, headers=None):
    status, hdrs, data = call(url, "GET", "/metrics", headers=headers)
    assert status == 200
    return hdrs, {f.name: f for f in text_string_to_metric_families(data.decode())}


def test_prometheus_exposition_parses_back_to_the_values(server):
    srv = server()
    events = make_events(150, seed=3)
    # a segment whose events are all negatives: its AUC is undefined (NaN)
    events += [{"ts": 1_700_001_000 + i, "label": 0, "score": 0.3, "country": "jp"}
               for i in range(5)]
    assert post(srv.url, events)[0] == 200
    hdrs, fams = scrape(srv.url)
    assert hdrs["content-type"].startswith("text/plain")
    samples = {(s.labels["metric"], s.labels["window"], s.labels["segment"]): s.value
               for s in fams["streameval_metric"].samples}
    per_seg = {s.labels["segment"]: s.value for s in fams["streameval_segment_events"].samples}
    waiting = {s.labels["segment"]: s.value
               for s in fams["streameval_segment_pending_events"].samples}
    for seg, label in ((None, ""), ("fr", "fr"), ("de", "de"), ("us", "us")):
        sub = [e for e in events if seg is None or e.get("country") == seg]
        sub = covered(sub, int(per_seg[label]), int(waiting[label]))  # its last row's
        assert len(sub) >= 30
        ref = sk_values(sub)
        for name in ("auc", "ap", "precision", "recall"):
            assert_close(samples[(name, "cumulative", label)], ref[name], (seg, name))
        assert_close(samples[(f"auc@{WINDOW}", f"sliding_size_{WINDOW}", label)],
                     sk_values(sub[-WINDOW:])["auc"], (seg, "window"))
        assert ("recall@60s", "sliding_period_60s", label) in samples
    assert math.isnan(samples[("auc", "cumulative", "jp")])
    (total,) = fams["streameval_events"].samples
    assert total.name == "streameval_events_total" and total.value == 155
    assert per_seg[""] == 155 and per_seg["jp"] + waiting["jp"] == 5
    assert sum(per_seg[c] + waiting[c] for c in ("fr", "de", "us", "jp")) == 155
    assert waiting[""] == 0
    active = {(s.labels["rule"], s.labels["segment"], s.labels["state"])
              for s in fams["streameval_alert_active"].samples}
    alerts = get_json(srv.url, "/alerts")["alerts"]
    assert active == {(a["rule"], a["segment"] or "", a["state"]) for a in alerts}
    assert fams["streameval_event_time_seconds"].samples[0].value == 1_700_001_004
    assert fams["streameval_ingest_seconds"].type == "histogram"


def test_openmetrics_on_request(server):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om

    srv = server()
    assert post(srv.url, make_events(30, seed=4))[0] == 200
    status, hdrs, data = call(srv.url, "GET", "/metrics",
                              headers={"Accept": "application/openmetrics-text"})
    assert status == 200 and hdrs["content-type"].startswith("application/openmetrics-text")
    fams = {f.name: f for f in om(data.decode())}
    assert fams["streameval_events"].samples[0].value == 30


# ----------------------------------------------------------------------- bad input


BAD = [
    (b'[{"label": 1, "score": 0.5, "ts": 1}, {"label": 1, ', None, None, "malformed JSON"),
    (b'{"label": 1, "score": 0.5, "ts": 1}\n{"label": 1 "score": 0.5}\n', None, 1,
     "malformed JSON"),
    (b'[{"label": 1, "score": 0.5, "ts": 1}, {"label": 0, "score": 0.2, "ts": 2}, '
     b'{"label": 3, "score": 0.5, "ts": 3}]', None, 2, "unknown label 3"),
    (b'{"label": 1, "score": 0.5, "ts": 1}\n{"label": 1, "score": NaN, "ts": 2}',
     "application/x-ndjson", 1, "score is NaN"),
    (b'[{"label": 1, "score": 0.5, "ts": 1, "weight": -2}]', None, 0, "weight is negative"),
    (b'[{"label": 1, "score": "__import__(\'os\').getcwd()", "ts": 1}]', None, 0,
     "score is not a number"),
    (b'[{"score": 0.5, "ts": 1}]', None, 0, "missing field 'label'"),
    (b'[{"label": 1, "score": 0.5, "ts": 1}, 7]', None, 1, "not a JSON object"),
    (b'[{"label": 1, "score": 0.5, "ts": "yesterday"}]', None, 0, "unparseable time"),
    (b"42", None, None, "expected a JSON object"),
    (b"   ", None, None, "empty body"),
    # a non-finite segment value (the Monitor could not key a segment by it)
    (b'[{"label": 1, "score": 0.5, "ts": 1, "country": "fr"}, '
     b'{"label": 1, "score": 0.5, "ts": 2, "country": Infinity}]', None, 1, "country is infinite"),
]


def test_bad_bodies_get_400_naming_the_event_and_change_nothing(server, tmp_path):
    srv = server(state_dir=tmp_path / "state")
    good = make_events(60, seed=5)
    assert post(srv.url, good)[0] == 200
    before = get_json(srv.url, "/snapshot")
    for body, ctype, index, reason in BAD:
        status, hdrs, data = call(srv.url, "POST", "/events", body,
                                  {"Content-Type": ctype or "application/json"})
        err = json.loads(data)
        assert status == 400, (body, err)
        assert hdrs["content-type"] == "application/json"
        assert err["index"] == index, (body, err)
        assert reason in err["reason"], (body, err)
        if index is not None:
            assert err["error"].startswith(f"event {index}: ")
    after = get_json(srv.url, "/snapshot")
    assert after["service"]["rejected_requests"] == len(BAD)
    for snap in (before, after):
        snap.pop("service")
    assert after == before
    # nothing of the refused batches is left in the write-ahead log
    with sqlite3.connect(tmp_path / "state" / WAL_FILE) as db:
        assert db.execute("SELECT COUNT(*), SUM(n) FROM batches").fetchone() == (1, 60)


def test_body_over_the_limit_gets_413(server):
    srv = server(max_body=2000)
    small = json.dumps(make_events(10, seed=6, weights=False)).encode()
    assert len(small) < 2000
    big = json.dumps(make_events(40, seed=6)).encode()
    assert len(big) > 2000
    status, _, data = call(srv.url, "POST", "/events", big, JSON)
    assert status == 413 and json.loads(data)["limit"] == 2000
    # no Content-Length (chunked): refused while reading
    u = urlsplit(srv.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("POST", "/events", body=iter([big[:1500], big[1500:]]), encode_chunked=True,
                 headers={"Transfer-Encoding": "chunked", **JSON})
    r = conn.getresponse()
    assert r.status == 413 and "over the limit" in json.loads(r.read())["error"]
    conn.close()
    assert get_json(srv.url, "/healthz")["n"] == 0
    status, _, data = call(srv.url, "POST", "/events", small, JSON)
    assert status == 200 and json.loads(data)["accepted"] == 10


def test_wrong_methods_and_paths(server):
    srv = server()
    status, hdrs, data = call(srv.url, "GET", "/events")
    assert status == 405 and hdrs["allow"] == "POST" and "error" in json.loads(data)
    for path in ("/metrics", "/snapshot", "/alerts", "/healthz"):
        status, hdrs, _ = call(srv.url, "POST", path, b"{}")
        assert status == 405 and "GET" in hdrs["allow"]
    status, _, data = call(srv.url, "GET", "/nope")
    assert status == 404 and json.loads(data) == {"error": "Not Found"}
    assert call(srv.url, "DELETE", "/events")[0] == 405
    assert get_json(srv.url, "/healthz")["status"] == "ok"


# ----------------------------------------------------------------------- security


def test_bearer_token_guards_ingestion_and_admin(server, tmp_path):
    srv = server(token="s3cret-s3cret-s3cret", state_dir=tmp_path / "s")
    events = make_events(20, seed=7)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-s3cret-s3cret"}):
        status, hdrs, data = call(srv.url, "POST", "/events", json.dumps(events).encode(), headers)
        assert status == 401 and hdrs["www-authenticate"].startswith("Bearer")
        assert call(srv.url, "POST", "/checkpoint", b"", headers)[0] == 401
    assert get_json(srv.url, "/healthz")["n"] == 0  # nothing applied
    assert post(srv.url, events, token="s3cret-s3cret-s3cret")[0] == 200
    status, _, data = call(srv.url, "POST", "/checkpoint", b"",
                           {"Authorization": "Bearer s3cret-s3cret-s3cret", **JSON})
    assert status == 200 and json.loads(data)["written"] is True
    assert (tmp_path / "s" / CHECKPOINT_FILE).exists()
    # with a token, reads need it too (unless public_reads)
    assert call(srv.url, "GET", "/metrics")[0] == 401
    assert get_json(srv.url, "/snapshot", token="s3cret-s3cret-s3cret")["n"] == 20


def test_reads_are_guarded_by_default_and_public_reads_opens_them(server):
    guarded = server(token="tok-tok-tok-tok-tok")
    with pytest.warns(DeprecationWarning, match="protect_reads is deprecated"):
        alias = server(token="tok-tok-tok-tok-tok", protect_reads=True)  # the deprecated no-op alias
    public = server(token="tok-tok-tok-tok-tok", public_reads=True)
    for path in ("/metrics", "/snapshot", "/alerts"):
        for srv in (guarded, alias):
            assert call(srv.url, "GET", path)[0] == 401
            assert call(srv.url, "GET", path, headers={"Authorization": "Bearer tok-tok-tok-tok-tok"})[0] == 200
        assert call(public.url, "GET", path)[0] == 200
    for srv in (guarded, alias, public):
        assert call(srv.url, "GET", "/healthz")[0] == 200
        assert call(srv.url, "POST", "/events", b"{}", JSON)[0] == 401


def test_binds_loopback_by_default():
    import argparse

    args = add_serve_arguments(argparse.ArgumentParser()).parse_args([])
    assert args.host == "127.0.0.1" and args.port == 8000 and args.state_dir is None


# ----------------------------------------------------------------------- concurrency


def test_concurrent_clients_lose_no_update(server):
    srv = server()
    clients, per_client, size = 4, 20, 30
    events = make_events(clients * per_client * size, seed=8)
    acked = {}  # seq -> batch
    errors = []

    def client(k):
        try:
            for j in range(per_client):
                lo = (k * per_client + j) * size
                batch = events[lo:lo + size]
                status, body = post(srv.url, batch, ndjson=bool(j % 2))
                assert status == 200 and body["accepted"] == size
                acked[body["seq"]] = batch
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(acked) == list(range(1, clients * per_client + 1))
    snap = get_json(srv.url, "/snapshot")
    assert snap["n"] == len(events)
    mon, _ = direct_monitor(CONFIG, [acked[k] for k in sorted(acked)])
    assert_same_state(snap, mon)
    ref = sk_values(events)  # cumulative values do not depend on the order
    assert_close(values_by_segment(snap)[None]["auc"], ref["auc"], "auc")


# ----------------------------------------------------------------------- alerts


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_alert_transitions_go_to_the_webhook(server):
    hook = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    hook.received = []
    t = threading.Thread(target=hook.serve_forever, daemon=True)
    t.start()
    try:
        srv = server(webhooks=[f"http://127.0.0.1:{hook.server_port}/alerts"])
        events = make_events(200, seed=9)
        batches = [events[i:i + 50] for i in range(0, 200, 50)]
        for b in batches:
            assert post(srv.url, b)[0] == 200
        srv.stop()  # drains the alert queue
        _, expected = direct_monitor(CONFIG, batches)
        assert expected, "the scenario must produce alert transitions"
        assert hook.received == json.loads(json.dumps(expected))
    finally:
        hook.shutdown()
        hook.server_close()


# ----------------------------------------------------------------------- durability


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


def wal_rows(state_dir):
    with sqlite3.connect(Path(state_dir) / WAL_FILE) as db:
        return db.execute("SELECT COUNT(*) FROM batches").fetchone()[0]


def test_checkpoints_by_count_and_by_time(server, tmp_path):
    by_count = server(state_dir=tmp_path / "a", checkpoint_every=100, checkpoint_seconds=0)
    for i in range(5):
        assert post(by_count.url, make_events(50, seed=10, start=50 * i))[0] == 200
    assert wait_for(lambda: get_json(by_count.url, "/healthz")["checkpoint_seq"] >= 4)
    # two generations are kept; the log holds the rows since the older one
    prev = json.loads((tmp_path / "a" / "checkpoint.prev.json").read_text())["state"]["seq"]
    newest = json.loads((tmp_path / "a" / CHECKPOINT_FILE).read_text())["state"]["seq"]
    assert 2 <= prev < newest >= 4
    with sqlite3.connect(tmp_path / "a" / WAL_FILE) as db:
        seqs = [r[0] for r in db.execute("SELECT seq FROM batches ORDER BY seq")]
    assert seqs == list(range(prev + 1, 6))
    by_time = server(state_dir=tmp_path / "b", checkpoint_every=0, checkpoint_seconds=0.2)
    assert post(by_time.url, make_events(10, seed=11))[0] == 200
    assert wait_for(lambda: get_json(by_time.url, "/healthz")["checkpoint_seq"] == 1)
    assert wal_rows(tmp_path / "b") == 1  # no older generation yet: the row stays


def test_state_dir_belongs_to_one_config(tmp_path):
    eng = build_engine(CONFIG, state_dir=tmp_path, checkpoint_seconds=0)
    eng.ingest(make_events(10, seed=12))
    eng.close()
    other = {"monitor": dict(CONFIG["monitor"], every=7)}
    with pytest.raises(StateMismatch, match="another monitor configuration"):
        build_engine(other, state_dir=tmp_path)
    eng = build_engine(CONFIG, state_dir=tmp_path, checkpoint_seconds=0)  # same config: fine
    assert eng.monitor.n == 10
    eng.close()


def start_process(config_path, state_dir, *extra, cli=False):
    prog = [sys.executable, "-m", "streameval.cli", "serve"] if cli else \
        [sys.executable, "-m", "streameval.service"]
    cmd = [*prog, "--config", str(config_path), "--port", "0", "--state-dir", str(state_dir),
           *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout=60):
        proc.kill()
        raise AssertionError("the server did not start: " + proc.stderr.read().decode())
    line = proc.stdout.readline().decode()
    sel.close()
    assert "listening on http://127.0.0.1:" in line, line + proc.stderr.read().decode()
    url = line.split("listening on ", 1)[1].split()[0]
    replayed = int(line.split("replayed ", 1)[1].split()[0])
    return proc, url, replayed


def toml_config(tmp_path):
    lines = ["[monitor]", f"every = {CONFIG['monitor']['every']}",
             f"group_by = \"{CONFIG['monitor']['group_by']}\"",
             f"rules = {json.dumps(CONFIG['monitor']['rules'])}", "[monitor.metrics]"]
    for name, spec in CONFIG["monitor"]["metrics"].items():
        if isinstance(spec, str):
            lines.append(f'"{name}" = "{spec}"')
        else:
            inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in spec.items())
            lines.append(f'"{name}" = {{ {inner} }}')
    path = tmp_path / "monitor.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_kill_9_and_restart_loses_no_acknowledged_event(tmp_path, server):
    config_path = toml_config(tmp_path)
    state = tmp_path / "state"
    events = make_events(900, seed=13)
    batches = [events[i:i + 60] for i in range(0, 900, 60)]  # 15 batches
    # checkpoints every 200 events: at each kill some batches are only in the WAL
    proc, url, replayed = start_process(config_path, state, "--checkpoint-events", "200",
                                        "--checkpoint-seconds", "0")
    assert replayed == 0
    kills, replays = 0, []
    for k, batch in enumerate(batches):
        status, body = post(url, batch)
        assert status == 200 and body["accepted"] == 60
        # between two batches, where the WAL holds 120 and 180 events (checkpoints
        # are due at 240 events since the last): kill -9, then restart
        if k in (5, 10):
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            kills += 1
            proc, url, replayed = start_process(config_path, state, "--checkpoint-events",
                                                "200", "--checkpoint-seconds", "0")
            replays.append(replayed)
            assert get_json(url, "/healthz")["n"] == 60 * (k + 1)
    served = get_json(url, "/snapshot")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert kills == 2 and all(r > 0 for r in replays), replays  # the WAL was needed
    mon, _ = direct_monitor(CONFIG, batches)
    assert_same_state(served, mon)
    # and the same as a run that was never killed
    srv = server()
    for batch in batches:
        assert post(srv.url, batch)[0] == 200
    unkilled = get_json(srv.url, "/snapshot")
    for snap in (served, unkilled):
        snap.pop("service")
    assert served == unkilled


def test_sigterm_writes_a_final_checkpoint_and_exits_0(tmp_path):
    """Through the ``streameval serve`` command, with a token file."""
    config_path = toml_config(tmp_path)
    state = tmp_path / "state"
    (tmp_path / "token").write_text("t0ken-t0ken-t0ken\n")
    token = ("--token-file", str(tmp_path / "token"))
    proc, url, _ = start_process(config_path, state, "--checkpoint-seconds", "0", *token,
                                 cli=True)
    events = make_events(120, seed=14)
    assert post(url, events[:70])[0] == 401
    assert post(url, events[:70], token="t0ken-t0ken-t0ken")[0] == 200
    assert post(url, events[70:], ndjson=True, token="t0ken-t0ken-t0ken")[0] == 200
    before = get_json(url, "/snapshot", token="t0ken-t0ken-t0ken")  # reads need the token too
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    assert "stopped" in proc.stdout.read().decode()
    # the final checkpoint is the only generation: the log keeps the rows it covers
    assert (state / CHECKPOINT_FILE).exists() and wal_rows(state) == 2
    assert not (state / "checkpoint.prev.json").exists()
    proc, url, replayed = start_process(config_path, state, *token, "--public-reads", cli=True)
    try:
        assert replayed == 0
        after = get_json(url, "/snapshot")  # --public-reads
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    for snap in (before, after):
        snap.pop("service")
    assert after == before
    mon, _ = direct_monitor(CONFIG, [events[:70], events[70:]])
    assert_same_state(after, mon)


def test_kill_9_under_concurrent_load_keeps_every_acknowledged_batch(tmp_path):
    config_path = toml_config(tmp_path)
    state = tmp_path / "state"
    size = 40
    events = make_events(size * 400, seed=15)
    proc, url, _ = start_process(config_path, state, "--checkpoint-events", "2000",
                                 "--checkpoint-seconds", "0")
    acked, stop = [], threading.Event()

    def client(k):
        for j in range(k, 400, 4):
            if stop.is_set():
                return
            try:
                status, body = post(url, events[j * size:(j + 1) * size])
            except (OSError, http.client.HTTPException, ValueError):
                return  # the server died under us: this batch was not acknowledged
            if status == 200:
                acked.append(body["seq"])

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    assert wait_for(lambda: len(acked) >= 60, timeout=60)
    proc.send_signal(signal.SIGKILL)  # with requests in flight
    proc.wait(10)
    stop.set()
    for t in threads:
        t.join(30)
    proc, url, replayed = start_process(config_path, state)
    try:
        health = get_json(url, "/healthz")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    # the log is a prefix of the applied batches that holds every acknowledged one
    assert max(acked) <= health["seq"]
    assert sorted(acked) == sorted(set(acked))
    assert health["n"] == size * health["seq"]


class _FailingLog:
    """The real write-ahead log whose disk 'fails' on the k-th append (fault injection)."""

    def __init__(self, wal, k):
        self._wal, self._k = wal, k

    def append(self, seq, batch, *key):
        self._k -= 1
        if self._k == 0:
            raise OSError(28, "No space left on device")
        self._wal.append(seq, batch, *key)

    def __getattr__(self, name):
        return getattr(self._wal, name)


class _FailingSync:
    """The real write-ahead log whose k-th commit (the fsync) fails: the disk filled."""

    def __init__(self, wal, k):
        self._wal, self._k = wal, k

    def commit(self):
        self._k -= 1
        if self._k == 0:
            raise OSError(28, "No space left on device")
        self._wal.commit()

    def __getattr__(self, name):
        return getattr(self._wal, name)


def test_a_failed_sync_leaves_the_memory_state_at_the_acknowledged_batches(tmp_path):
    """The disk fills at a commit: the batch it would have made durable is refused with
    a 503 and is not in the Monitor either; /snapshot, /metrics and a restart all show
    exactly the acknowledged batches (the Monitor used to count it before the sync)."""
    events = make_events(150, seed=21)
    batches = [events[i:i + 50] for i in range(0, 150, 50)]
    eng = build_engine(CONFIG, state_dir=tmp_path, checkpoint_seconds=0)
    eng._wal = _FailingSync(eng._wal, 3)
    mon, _ = direct_monitor(CONFIG, batches[:2])
    with BackgroundServer(engine=eng) as srv:
        assert [post(srv.url, b)[0] for b in batches[:2]] == [200, 200]
        status, body = post(srv.url, batches[2])
        assert status == 503 and "No space left" in body["error"]
        snap = get_json(srv.url, "/snapshot")
        assert snap["n"] == 100 and snap["service"]["events"] == 100
        assert_same_state(snap, mon)
        events_total = scrape(srv.url)[1]["streameval_events"].samples[0].value
        assert events_total == 100
    eng = build_engine(CONFIG, state_dir=tmp_path, checkpoint_seconds=0)
    try:
        assert eng.replayed == (2, 100)
        assert_same_state(json.loads(json.dumps(snapshot_json(eng.snapshot()))), mon)
    finally:
        eng.close()


def test_the_committer_path_applies_in_sequence_and_calls_back_once(tmp_path):
    """``begin_body`` / ``when_applied`` / ``finish`` (what the HTTP route does): six
    threads begin 60 batches at once; every callback is called once, without error,
    when its batch is applied; commits are shared; the state equals a Monitor fed the
    batches in their ``seq`` order, and equals it again after a restart (the log)."""
    import threading

    events = make_events(600, seed=31)
    batches = [events[i:i + 10] for i in range(0, 600, 10)]
    eng = build_engine(CONFIG, state_dir=tmp_path, checkpoint_seconds=0)
    calls, results, lock = {}, [], threading.Lock()

    def client(part):
        for batch in part:
            result, seq = eng.begin_body(json.dumps(batch).encode(), "application/json")
            done = threading.Event()

            def callback(error, seq=seq, done=done):
                with lock:
                    calls[seq] = calls.get(seq, 0) + 1
                    assert error is None and eng._applied >= seq
                done.set()

            eng.when_applied(seq, callback)
            assert done.wait(30)
            with lock:
                results.append((seq, eng.finish(result), batch))

    try:
        threads = [threading.Thread(target=client, args=(batches[k::6],)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(calls) == list(range(1, 61)) and set(calls.values()) == {1}
        results.sort(key=lambda r: r[0])
        assert [r[1]["accepted"] for r in results] == [10] * 60
        assert all(r[1]["n"] >= 10 * r[0] for r in results)  # applied when answered
        assert eng.stats["log_commits"] <= 60
        mon, _ = direct_monitor(CONFIG, [r[2] for r in results])
        assert_same_state(json.loads(json.dumps(snapshot_json(eng.snapshot()))), mon)
    finally:
        eng.close()
    assert eng._committer is None  # ended with the engine
    eng = build_engine(CONFIG, state_dir=tmp_path, checkpoint_seconds=0)
    try:
        assert_same_state(json.loads(json.dumps(snapshot_json(eng.snapshot()))), mon)
    finally:
        eng.close()


def test_the_committer_path_reports_a_failed_sync_to_its_callbacks(tmp_path):
    """The commit fails: the waiting callbacks get the error (the route's 503), the
    batch is not applied, and a later batch is refused (the engine has stopped)."""
    from streameval.service.engine import Unavailable

    events = make_events(30, seed=32)
    eng = build_engine(CONFIG, state_dir=tmp_path, checkpoint_seconds=0)
    eng._wal = _FailingSync(eng._wal, 2)
    try:
        got = []
        for batch in (events[:10], events[10:20]):
            result, seq = eng.begin_body(json.dumps(batch).encode(), "application/json")
            box = []
            eng.when_applied(seq, box.append)
            deadline = time.monotonic() + 30
            while not box and time.monotonic() < deadline:
                time.sleep(0.01)
            got.append(box)
        assert got[0] == [None]
        assert len(got[1]) == 1 and isinstance(got[1][0], Unavailable)
        assert "No space left" in str(got[1][0])
        assert eng.monitor.n == 10
        with pytest.raises(Unavailable, match="restart the service"):
            eng.begin_body(json.dumps(events[20:]).encode(), "application/json")
    finally:
        eng.close()


def test_a_log_failure_stops_ingestion_and_a_restart_recovers_the_acknowledged(tmp_path):
    events = make_events(200, seed=16)
    batches = [events[i:i + 50] for i in range(0, 200, 50)]
    eng = build_engine(CONFIG, state_dir=tmp_path, checkpoint_seconds=0)
    eng._wal = _FailingLog(eng._wal, 3)
    app_srv = BackgroundServer(engine=eng).start()
    try:
        assert post(app_srv.url, batches[0])[0] == 200
        assert post(app_srv.url, batches[1])[0] == 200
        status, body = post(app_srv.url, batches[2])
        assert status == 503 and "No space left" in body["error"]
        status, body = post(app_srv.url, batches[3])  # refused: the engine has stopped
        assert status == 503 and "restart the service" in body["error"]
        status, _, data = call(app_srv.url, "GET", "/healthz")
        assert status == 503 and json.loads(data)["status"] == "failed"
    finally:
        app_srv.stop()  # no final checkpoint: the memory state holds the refused batch
    assert not (tmp_path / CHECKPOINT_FILE).exists()
    eng = build_engine(CONFIG, state_dir=tmp_path, checkpoint_seconds=0)
    try:
        mon, _ = direct_monitor(CONFIG, batches[:2])
        assert eng.replayed == (2, 100)
        assert_same_state(json.loads(json.dumps(snapshot_json(eng.snapshot()))), mon)
    finally:
        eng.close()


# ----------------------------------------------------------------------- properties

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

SMALL = {"monitor": {"every": 7, "group_by": "country",
                     "metrics": {"auc": "roc_auc", "recall@15": {"metric": "recall", "size": 15}},
                     "rules": ["auc < 0.6"]}}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(1, 25), min_size=1, max_size=8),
    bad=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 24)), max_size=3),
    restarts=st.sets(st.integers(0, 7), max_size=3),
    crash=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_engine_state_equals_a_direct_monitor_of_the_accepted_batches(sizes, bad, restarts,
                                                                      crash, seed):
    """Any split into batches, bad batches refused whole, restarts (clean or crash)."""
    import tempfile

    events = make_events(sum(sizes), seed=seed)
    state = tempfile.mkdtemp()
    eng = build_engine(SMALL, state_dir=state, checkpoint_every=20, checkpoint_seconds=0)
    accepted, pos = [], 0
    try:
        for k, size in enumerate(sizes):
            batch = [dict(e) for e in events[pos:pos + size]]
            pos += size
            hits = [i for b, i in bad if b == k and i < size]
            for i in hits:
                batch[i]["score"] = "oops"
            try:
                eng.ingest(batch)
            except ValueError as e:
                assert hits and e.index == min(hits)
            else:
                assert not hits
                accepted.append(batch)
            if k in restarts:
                if crash:  # no final checkpoint, log left as a crash leaves it
                    eng._stop.set()
                    eng._wake.set()
                    eng._outbox.put(None)
                    for t in eng._threads:
                        t.join(10)
                    eng._wal.close()
                    eng._release_lock()  # as the kernel does for a process that died
                else:
                    eng.close()
                eng = build_engine(SMALL, state_dir=state, checkpoint_every=20,
                                   checkpoint_seconds=0)
        mon, _ = direct_monitor(SMALL, accepted)
        assert_same_state(json.loads(json.dumps(snapshot_json(eng.snapshot()))), mon)
    finally:
        eng.close()


def test_a_server_that_cannot_bind_releases_its_engine(tmp_path):
    """BackgroundServer on a port already taken raises, and leaves no engine threads and
    no open write-ahead log behind (its engine, built here, is closed)."""
    def engine_threads():
        return [t for t in threading.enumerate() if t.name.startswith("streameval-")
                and t.name != "streameval-serve" and t.is_alive()]

    with BackgroundServer(port=0) as srv:
        before = len(engine_threads())
        with pytest.raises(OSError):
            BackgroundServer(port=srv.port, state_dir=tmp_path / "state")
        deadline = time.monotonic() + 5
        while len(engine_threads()) > before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(engine_threads()) == before


def test_snapshot_route_is_the_monitor_snapshot_through_the_documented_conversion(server):
    """``GET /snapshot`` is ``snapshot_json(Monitor.snapshot())`` plus its ``service``
    section (segments as a list, each with its value; a segment of several fields a
    list), and ``segments_by_key`` gives the Monitor's dict back."""
    from streameval.service import segments_by_key

    config = {"monitor": {"group_by": ["country", "device"]}}
    srv = server(config)
    rng = random.Random(3)
    events = [{"ts": 1_700_000_000 + i, "label": rng.random() < 0.3, "score": rng.random(),
               "country": rng.choice(["fr", "de"]), "device": rng.choice([1, 2, "ios"])}
              for i in range(300)]
    assert post(srv.url, events)[0] == 200
    served = get_json(srv.url, "/snapshot")
    service = served.pop("service")
    assert service["events"] == 300
    direct = srv.engine.monitor.snapshot()
    assert served == json.loads(dumps(snapshot_json(direct)))
    # the oracle: segments and their counts, by brute force over the events
    counts = {None: len(events)}
    for e in events:
        key = (e["country"], e["device"])
        counts[key] = counts.get(key, 0) + 1
    # (a segment's n counts what its last row covers, pending what waits for the next)
    assert {(tuple(e["segment"]) if e["segment"] else None): e["n"] + e.get("pending", 0)
            for e in served["segments"]} == counts
    back = segments_by_key(served["segments"])
    assert list(back) == list(direct["segments"]) and set(back) == set(counts)
    for key, entry in back.items():
        assert entry["segment"] == key
        assert entry["n"] + entry.get("pending", 0) == counts[key]
        assert entry["values"] == json.loads(dumps(direct["segments"][key]["values"]))


def test_serve_byte_limit_defaults_are_the_validation_limits():
    from streameval import runconfig, validation

    serve = runconfig.SECTIONS["serve"]
    assert serve.key("max_id_bytes").default == validation.MAX_ID_BYTES
    assert serve.key("max_segment_bytes").default == validation.MAX_SEGMENT_BYTES
    assert serve.key("max_label_bytes").default == validation.MAX_LABEL_BYTES


def _quickstart(page):
    """The serve quickstart's bash block of ``page`` (README.md or a docs page)."""
    text = (Path(__file__).resolve().parents[1] / page).read_text()
    blocks = [b for b in text.split("```bash\n")[1:] if "streameval serve --config" in b]
    assert len(blocks) == 1, page
    return blocks[0].split("\n```", 1)[0]


@pytest.mark.parametrize("page", ["README.md", "docs/guides/service.md"])
def test_the_serve_quickstart_runs_as_written(page, tmp_path):
    """The block runs whole in an empty directory (the pip line aside, a free port for
    8000, and a wait for the server instead of a fixed sleep): it writes the files it
    uses, the service starts with them, and the curl lines get their answers."""
    import shutil

    if shutil.which("curl") is None:
        pytest.skip("needs curl")
    block = _quickstart(page)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    lines = [ln for ln in block.splitlines() if not ln.startswith("python -m pip install")]
    script = "\n".join(lines).replace("8000", port).replace(
        "sleep 3", f"for i in $(seq 300); do curl -s -o /dev/null 127.0.0.1:{port}/healthz "
                   "&& break; sleep 0.1; done")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    out = subprocess.run(["bash", "-e", "-c", script + "\nwait"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    token = (tmp_path / "token.txt").read_text().strip()
    assert len(token.encode()) >= 16 and (tmp_path / "monitor.toml").exists()
    assert '"accepted":' in out.stdout and "listening on" in out.stdout, out.stdout
    if page == "README.md":
        assert 'metric="roc_auc"' in out.stdout and 'segment="fr"' in out.stdout
    else:
        assert '"status":"ok"' in out.stdout and (tmp_path / "state").is_dir()
