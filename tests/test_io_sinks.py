"""Sinks: JSON lines files, stdout, and a webhook against a real HTTP server.

Oracles: files are read back with json.loads; the webhook target is a real
http.server.ThreadingHTTPServer on 127.0.0.1 that fails the first N requests
and records the bodies it accepts.
"""

import io
import json
import math
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from streameval.io.sinks import JsonlSink, StdoutSink, WebhookSink, dumps, rejected_callback


def test_dumps_nan_numpy_and_nesting():
    obj = {"n": np.int64(5), "t": 1.5, "values": {"auc": math.nan, "ap": np.float64("inf"),
                                                  "f1": np.float32(0.5)},
           "curve": np.array([0.1, np.nan]), "seg": ("fr", 2), "ok": np.bool_(True)}
    text = dumps(obj)
    assert "\n" not in text and "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"n": 5, "t": 1.5, "values": {"auc": None, "ap": None, "f1": 0.5},
                                "curve": [0.1, None], "seg": ["fr", 2], "ok": True}
    with pytest.raises(TypeError, match="cannot write a object as JSON"):
        dumps({"x": object()})


def test_jsonl_sink_appends_and_flushes(tmp_path):
    p = tmp_path / "out" / "metrics.jsonl"
    rows = [{"n": i, "t": float(i), "segment": None, "values": {"auc": math.nan if i == 0 else i / 10}}
            for i in range(5)]
    s = JsonlSink(p)
    for r in rows[:3]:
        s.write(r)
    # flushed: visible to an independent reader before close
    assert [json.loads(x) for x in open(p)] == [
        {**r, "values": {"auc": None if i == 0 else i / 10}} for i, r in enumerate(rows[:3])]
    s.close()
    with JsonlSink(p) as s2:  # append mode keeps earlier rows
        assert s2.write_many(rows[3:]) == 2
    got = [json.loads(x) for x in open(p)]
    assert [g["n"] for g in got] == [0, 1, 2, 3, 4] and s.count == 3 and s2.count == 2
    with JsonlSink(p, mode="w") as s3:
        s3.write({"n": 9})
    assert [json.loads(x) for x in open(p)] == [{"n": 9}]


def test_jsonl_sink_truncate_to_checkpoint_offset(tmp_path):
    p = tmp_path / "alerts.jsonl"
    with JsonlSink(p) as s:
        s.write({"rule": "a"})
        offset = s.offset
        s.write({"rule": "written after the checkpoint"})
    assert offset == len(b'{"rule":"a"}\n')
    with JsonlSink(p, truncate_at=offset) as s:
        s.write({"rule": "b"})
    assert [json.loads(x)["rule"] for x in open(p)] == ["a", "b"]
    with pytest.raises(ValueError, match="not the file the checkpoint was taken with"):
        JsonlSink(p, truncate_at=10_000)


def test_jsonl_sink_threads(tmp_path):
    p = tmp_path / "x.jsonl"
    s = JsonlSink(p)
    threads = [threading.Thread(target=lambda k=k: [s.write({"k": k, "i": i}) for i in range(200)])
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s.close()
    got = [json.loads(x) for x in open(p)]
    assert sorted((g["k"], g["i"]) for g in got) == [(k, i) for k in range(4) for i in range(200)]


def test_stdout_sink_and_rejected_callback(capsys, tmp_path):
    s = StdoutSink()
    s.write({"a": math.nan})
    assert capsys.readouterr().out == '{"a":null}\n'
    buf = io.StringIO()
    cb = rejected_callback(StdoutSink(buf))
    cb(17, "score is NaN", '{"score": NaN}')
    assert json.loads(buf.getvalue()) == {"line": 17, "reason": "score is NaN",
                                          "raw": '{"score": NaN}'}


# ------------------------------------------------------------------ webhook


class Recorder:
    """A real HTTP server failing the first ``fail`` requests with ``status``."""

    def __init__(self, fail=0, status=500, delay=0.0):
        self.fail, self.status, self.delay = fail, status, delay
        self.requests = 0
        self.bodies = []
        self.headers = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                rec.requests += 1
                if rec.delay:
                    time.sleep(rec.delay)
                if rec.requests <= rec.fail:
                    self.send_response(rec.status)
                    self.end_headers()
                    self.wfile.write(b"nope")
                    return
                rec.bodies.append(json.loads(body))
                rec.headers.append(dict(self.headers))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that timed out and left: expected in the timeout test

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_webhook_retries_5xx_then_delivers():
    alert = {"rule": "recall_low", "state": "firing", "n": 1000, "t": 1.7e9, "value": math.nan,
             "segment": None}
    with Recorder(fail=2) as srv:
        s = WebhookSink(srv.url, retries=3, backoff=0.05, headers={"X-Token": "abc"})
        t = time.perf_counter()
        assert s.write(alert) is True
        elapsed = time.perf_counter() - t
    assert srv.requests == 3 and s.attempts == 3
    assert srv.bodies == [{**alert, "value": None}]
    assert srv.headers[0]["X-Token"] == "abc"
    assert srv.headers[0]["Content-Type"] == "application/json"
    assert elapsed >= 0.05 + 0.1  # backoff 0.05, then 0.1
    assert (s.count, s.failures, s.last_error) == (1, 0, None)


def test_webhook_gives_up_and_reports(caplog):
    with Recorder(fail=100) as srv:
        s = WebhookSink(srv.url, retries=2, backoff=0.01)
        with caplog.at_level("ERROR", logger="streameval.io"):
            assert s.write({"x": 1}) is False
    assert srv.requests == 3 and s.failures == 1 and s.count == 0
    assert s.last_error == "HTTP 500 Internal Server Error"
    assert "delivery failed after 3 attempt(s): HTTP 500" in caplog.text


def test_webhook_does_not_retry_client_errors():
    with Recorder(fail=100, status=400) as srv:
        s = WebhookSink(srv.url, retries=3, backoff=0.01)
        assert s.write({"x": 1}) is False
    assert srv.requests == 1 and s.last_error.startswith("HTTP 400")


def test_webhook_connection_refused_and_timeout():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens here now
    s = WebhookSink(f"http://127.0.0.1:{port}/", retries=1, backoff=0.01)
    assert s.write({"x": 1}) is False
    assert s.attempts == 2 and s.failures == 1 and "Refused" in s.last_error
    with Recorder(delay=0.6) as srv:
        s = WebhookSink(srv.url, retries=0, timeout=0.2)
        assert s.write({"x": 1}) is False
    assert "timed out" in s.last_error.lower() or "timeout" in s.last_error.lower()


def test_webhook_background_queue():
    with Recorder(fail=1) as srv:
        s = WebhookSink(srv.url, retries=2, backoff=0.01, background=True)
        for i in range(5):
            assert s.write({"i": i}) is True
        assert s.flush(timeout=10)
        s.close()
    assert [b["i"] for b in srv.bodies] == [0, 1, 2, 3, 4]
    assert s.count == 5 and s.failures == 0 and s.attempts == 6


def test_webhook_background_write_after_close_is_delivered():
    """After close() the worker is gone: a write is delivered in the caller's thread
    (and its result returned), never queued where nothing will send it."""
    with Recorder() as srv:
        s = WebhookSink(srv.url, retries=0, background=True)
        assert s.write({"i": 0}) is True
        s.close()
        assert s.write({"i": 1}) is True
        assert s.flush(timeout=1)
    assert [b["i"] for b in srv.bodies] == [0, 1] and s.count == 2


def test_webhook_bad_arguments():
    with pytest.raises(ValueError, match="http"):
        WebhookSink("ftp://x")
    with pytest.raises(ValueError, match="retries"):
        WebhookSink("http://x", retries=-1)


def test_dumps_writes_every_dict_key_as_json_does_and_tuples_joined():
    """Scalar keys as json.dumps writes them; a several-field segment key joined by '|'
    (the service's snapshot and the sinks share this)."""
    obj = {None: 1, True: 2, 3: 3, 1.5: 4, np.int64(7): 5, ("fr", "ios"): float("nan")}
    expected = json.dumps({None: 1, True: 2, 3: 3, 1.5: 4, 7: 5})[:-1] + ', "fr|ios": null}'
    assert json.loads(dumps(obj)) == json.loads(expected)
