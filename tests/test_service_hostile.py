"""The HTTP service against hostile input and hostile clients (issue 15), over real sockets.

Servers run in a thread (:class:`BackgroundServer`, port 0) or, where memory, CPU or
the exit status of the process is measured, as ``python -m streameval serve`` in a
subprocess. Faults are real where they can be (a state directory under a regular
file, a checkpoint path taken by a directory: both fail for root too); the few
injected ones (a collector or a Monitor method that raises) stand for bugs, and only
the code around them is under test.
"""

from __future__ import annotations

import http.client
import json
import os
import selectors
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from streameval.service import (  # noqa: E402
    BackgroundServer,
    add_serve_arguments,
    build_engine,
    main,
)
from streameval.service.body import JSON_TYPES, MAX_DEPTH, NDJSON_TYPES  # noqa: E402
from streameval.service.engine import CHECKPOINT_FILE, WAL_FILE, StateDirError  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))  # (the shared server helpers, beside this one)
from serve_support import start_cli, stop_cli  # noqa: E402

JSON = {"Content-Type": "application/json"}


# ----------------------------------------------------------------------- helpers


def events(n, start=0):
    return [{"ts": 1_700_000_000 + start + i, "label": i % 3 == 0, "score": (i % 10) / 10}
            for i in range(n)]


def call(url_or_port, method, path, body=None, headers=None, timeout=30):
    port = url_or_port if isinstance(url_or_port, int) else int(url_or_port.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def post(url, evs, headers=JSON, path="/events"):
    status, hdrs, data = call(url, "POST", path, json.dumps(evs).encode(), headers)
    assert hdrs["content-type"] == "application/json", (status, hdrs, data)
    return status, json.loads(data)


def healthz(url):
    status, _, data = call(url, "GET", "/healthz")
    return status, json.loads(data)


def scrape(url, headers=None):
    status, _, data = call(url, "GET", "/metrics", headers=headers)
    assert status == 200, data
    return {s.name: s.value for f in text_string_to_metric_families(data.decode())
            for s in f.samples}


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


def read_until_closed(sock, timeout):
    """Everything the server sends until it closes the connection (None: still open)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except socket.timeout:
        return None
    except ConnectionResetError:
        return data


# ----------------------------------------------------------------------- TCP_NODELAY


def test_accepted_connections_have_tcp_nodelay():
    """``_bind`` creates the socket with ``IPPROTO_TCP``, so that asyncio sets
    TCP_NODELAY on each accepted connection; without it every keep-alive response
    written in two pieces waited for the client's delayed ACK (about 40 ms; measured in
    benchmarks/bench_service.py, not here)."""
    with BackgroundServer() as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        try:
            for k in range(3):
                conn.request("POST", "/events", body=json.dumps(events(5, 5 * k)), headers=JSON)
                r = conn.getresponse()
                assert r.status == 200, r.read()
                r.read()
            protocols = list(srv._server.server_state.connections)
            assert len(protocols) == 1  # the keep-alive connection, still open
            sock = protocols[0].transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
            assert srv._sock.proto == socket.IPPROTO_TCP
        finally:
            conn.close()


def test_late_future_and_other_segment_events_are_counted_in_every_export():
    """Nothing refused is silent: events a period window refuses as late are counted per
    window and segment in /snapshot and /metrics; an event time more than max_future
    ahead of the server's clock refuses its batch (400 naming it), is counted, and never
    moves the windows' clock; events of segments past max_segments count under
    __other__. Oracle: the counts planted by hand."""
    now = 1_800_000_000.0
    cfg = {"monitor": {"group_by": "country", "max_segments": 2, "every": 0,
                       "metrics": {"p@1h": {"metric": "precision", "period": 3600,
                                            "lateness": 60},
                                   "recall": "recall"}}}
    with BackgroundServer(cfg, clock=lambda: now) as srv:
        ok = [{"ts": now - 10 * i, "label": 1, "score": 0.9, "country": c}
              for i, c in enumerate(["de", "fr", "de"])]
        assert post(srv.url, ok)[0] == 200
        # 2 h late: refused by the window, counted, in "de" and the whole stream
        assert post(srv.url, [{"ts": now - 7200, "label": 1, "score": 0.9, "country": "de"},
                              {"ts": now - 7300, "label": 0, "score": 0.2, "country": "de"}])[0] == 200
        status, doc = post(srv.url, [{"ts": now, "label": 1, "score": 0.9, "country": "fr"},
                                     {"ts": 1e12, "label": 1, "score": 0.9, "country": "fr"}])
        assert status == 400 and doc["index"] == 1 and "ahead of the server's clock" in doc["error"]
        # three new segments past the cap of 2: under __other__
        with pytest.warns(RuntimeWarning, match="max_segments = 2 reached"):
            assert post(srv.url, [{"ts": now, "label": 0, "score": 0.1, "country": c}
                                  for c in ("us", "br", "us")])[0] == 200
        # the clock did not move: an event 30 s old is still in time
        assert post(srv.url, [{"ts": now - 30, "label": 1, "score": 0.8, "country": "fr"}])[0] == 200
        # a segment counts its late events when its buffered events are fed, at its next
        # row: the next minute of event time (SEGMENT_EVERY_SECONDS) writes every row
        assert post(srv.url, [{"ts": now + 60, "label": 1, "score": 0.8, "country": "fr"}])[0] == 200
        status, _, data = call(srv.url, "GET", "/snapshot")
        snap = json.loads(data)
        late = {s["segment"]: s["late"]["p@1h"] for s in snap["segments"]}
        assert late == {None: 2, "de": 2, "fr": 0, "__other__": 0}
        assert snap["other_events"] == 3 and snap["service"]["future_events"] == 1
        assert snap["t"] == now + 60
        samples = scrape(srv.url)
        assert samples['streameval_future_events_total'] == 1.0
        assert samples['streameval_other_segment_events_total'] == 3.0
        families = text_string_to_metric_families(call(srv.url, "GET", "/metrics")[2].decode())
        got = {s.labels["segment"]: s.value for f in families if f.name == "streameval_late_events"
               for s in f.samples}
        assert got == {"": 2.0, "de": 2.0, "fr": 0.0, "__other__": 0.0}


def _with_host(port, method, path, host, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True)
        conn.putheader("Host", host)
        if body is not None:
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def test_a_loopback_service_answers_loopback_host_names_only():
    """DNS rebinding: a web page at evil.example whose name is made to resolve to
    127.0.0.1 is same-origin with the service, so it could post application/json
    without a preflight. It still sends ``Host: evil.example``: refused (400, JSON),
    nothing applied. Loopback names in any case and port are answered; --allow-host
    (or [serve] allowed_hosts) adds names, for a reverse proxy that passes its own."""
    body = json.dumps(events(3)).encode()
    with BackgroundServer() as srv:
        status, doc = _with_host(srv.port, "POST", "/events", f"evil.example:{srv.port}", body)
        assert status == 400 and "evil.example" in doc["error"]
        assert _with_host(srv.port, "GET", "/snapshot", "evil.example")[0] == 400
        assert srv.engine.monitor.n == 0
        for host in (f"127.0.0.1:{srv.port}", "LOCALHOST", "[::1]:8000", "localhost:1"):
            assert _with_host(srv.port, "GET", "/healthz", host)[0] == 200, host
        assert _with_host(srv.port, "POST", "/events", "localhost", body)[0] == 200
        assert srv.engine.monitor.n == 3
    with BackgroundServer({"serve": {"allowed_hosts": ["monitor.internal"]}}) as srv:
        assert _with_host(srv.port, "GET", "/healthz", "Monitor.Internal:443")[0] == 200
        assert _with_host(srv.port, "GET", "/healthz", "other.internal")[0] == 400
    with BackgroundServer(allowed_hosts=["a.example"]) as srv:
        assert _with_host(srv.port, "GET", "/healthz", "a.example")[0] == 200
    with pytest.raises(ValueError, match="serve.allowed_hosts"):
        BackgroundServer({"serve": {"allowed_hosts": "monitor.internal"}})
    args = add_serve_arguments(__import__("argparse").ArgumentParser()).parse_args(
        ["--allow-host", "x.example", "--allow-host", "y.example"])
    assert args.allowed_hosts == ["x.example", "y.example"]


# ----------------------------------------------------------------------- content type


def test_posts_need_a_json_or_ndjson_content_type(tmp_path):
    with BackgroundServer(state_dir=tmp_path / "s", checkpoint_seconds=0) as srv:
        body = json.dumps(events(3)).encode()
        for ctype in (None, "application/x-www-form-urlencoded", "text/plain",
                      "multipart/form-data; boundary=x", "application/jsonx", "json"):
            headers = {} if ctype is None else {"Content-Type": ctype}
            for path in ("/events", "/checkpoint"):
                status, hdrs, data = call(srv.url, "POST", path, body, headers)
                err = json.loads(data)
                assert status == 415 and hdrs["content-type"] == "application/json", data
                assert err["content_type"] == ctype
                assert err["accepted"] == sorted(JSON_TYPES)
                assert (repr(ctype) if ctype else "no Content-Type") in err["error"]
                assert path in err["error"]
        assert healthz(srv.url)[1]["n"] == 0  # nothing applied
        # the browsers' form encoding is what urllib sends by default, refused too
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(srv.url + "/events", data=body))
        assert e.value.code == 415
        # accepted: JSON with parameters, in any case, and the NDJSON family
        n = 0
        for ctype in ["application/json", "Application/JSON; charset=utf-8", *NDJSON_TYPES]:
            ndjson = ctype in NDJSON_TYPES
            evs = events(2, n)
            data = ("\n".join(json.dumps(e) for e in evs) if ndjson else json.dumps(evs))
            status, _, out = call(srv.url, "POST", "/events", data.encode(),
                                  {"Content-Type": ctype})
            assert status == 200 and json.loads(out)["accepted"] == 2, (ctype, out)
            n += 2
        # /checkpoint: the body is ignored, empty or not
        for payload in (b"", b"{}"):
            status, _, out = call(srv.url, "POST", "/checkpoint", payload, JSON)
            assert status == 200 and json.loads(out)["n"] == n


# ----------------------------------------------------------------------- auth


def test_bearer_scheme_in_any_case_guards_everything_but_healthz():
    tok = "s3cret-0123456789"
    with BackgroundServer(token=tok) as srv:
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
            auth = {"Authorization": f"{scheme} {tok}"}
            assert post(srv.url, events(1), {**auth, **JSON})[0] == 200
            for path in ("/metrics", "/snapshot", "/alerts"):
                assert call(srv.url, "GET", path, headers=auth)[0] == 200
            assert call(srv.url, "POST", "/checkpoint", b"", {**auth, **JSON})[0] == 200
        for auth in (f"Bearer {tok[:-1]}", f"Bearer {tok}2", f"Bearer {tok.upper()}",
                     f"Basic {tok}", tok, "Bearer", "", f"Bearer {tok} {tok}",
                     f"Bearer{tok}"):
            headers = {"Authorization": auth} if auth else {}
            status, hdrs, data = call(srv.url, "POST", "/events", b"{}", {**headers, **JSON})
            assert status == 401 and hdrs["www-authenticate"].startswith("Bearer"), auth
            assert json.loads(data) == {"error": "missing or wrong bearer token"}
            assert call(srv.url, "POST", "/checkpoint", b"", {**headers, **JSON})[0] == 401
            for path in ("/metrics", "/snapshot", "/alerts"):
                assert call(srv.url, "GET", path, headers=headers)[0] == 401, (path, auth)
        # the token is checked before the content type: a stranger learns nothing
        assert call(srv.url, "POST", "/events", b"{}", {"Content-Type": "text/plain"})[0] == 401
        status, health = healthz(srv.url)
        assert status == 200 and health["n"] == 4


def test_public_reads_from_the_config_and_protect_reads_false_is_refused():
    config = {"serve": {"public_reads": True}}
    with BackgroundServer(config, token="tok-tok-tok-tok-tok") as srv:
        for path in ("/metrics", "/snapshot", "/alerts"):
            assert call(srv.url, "GET", path)[0] == 200
        assert post(srv.url, events(1))[0] == 401  # writes still need it
    with pytest.raises(ValueError, match=r"serve\.protect_reads = False: .*public_reads"):
        BackgroundServer({"serve": {"protect_reads": False}}, token="tok-tok-tok-tok-tok")
    with pytest.raises(ValueError, match=r"serve\.public_reads = 'yes': must be true or false"):
        BackgroundServer({"serve": {"public_reads": "yes"}}, token="tok-tok-tok-tok-tok")
    # the deprecated flag of the command line, with its opposite: refused, exit 2
    assert main(["--port", "0", "--protect-reads", "--public-reads"]) == 2


def test_a_non_loopback_address_without_a_token_refuses_to_start(tmp_path):
    proc, _ = start_cli("--host", "0.0.0.0", expect_start=False)
    err = proc.stderr.read().decode()
    assert proc.returncode == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "reachable from other machines" in err and "--insecure" in err
    assert "--token-file" in err
    with pytest.raises(ValueError, match="insecure=True"):
        BackgroundServer(host="0.0.0.0")
    with BackgroundServer(host="0.0.0.0", insecure=True) as srv:  # said explicitly
        assert call(srv.port, "GET", "/healthz")[0] == 200
    with BackgroundServer(host="0.0.0.0", token="tok-tok-tok-tok-tok") as srv:  # or with a token
        assert call(srv.port, "POST", "/events", b"{}", JSON)[0] == 401


# ----------------------------------------------------------------------- clear failures


def test_an_unusable_state_directory_exits_2_with_one_line(tmp_path):
    (tmp_path / "file").write_text("not a directory\n")
    state = tmp_path / "file" / "sub"  # its parent is a regular file: fails for root too
    proc, _ = start_cli("--state-dir", state, expect_start=False)
    err = proc.stderr.read().decode()
    assert proc.returncode == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(state) in err and "Not a directory" in err
    # a log path that SQLite cannot open (sqlite3.OperationalError, not an OSError)
    (tmp_path / "s2" / WAL_FILE).mkdir(parents=True)
    with pytest.raises(StateDirError) as e:
        build_engine(None, state_dir=tmp_path / "s2")
    assert str(tmp_path / "s2" / WAL_FILE) in str(e.value)
    # (the log's files are read before SQLite opens them: the OS names the problem)
    assert "Is a directory" in str(e.value) and "\n" not in str(e.value)
    # a checkpoint path taken by a directory
    (tmp_path / "s3" / CHECKPOINT_FILE).mkdir(parents=True)
    with pytest.raises(StateDirError, match="Is a directory"):
        build_engine(None, state_dir=tmp_path / "s3")


def test_checkpoint_failures_are_json_counted_and_degrade_healthz_until_one_succeeds(tmp_path):
    """A failing checkpoint leaves the node serving: /healthz stays 200 (a load
    balancer keeps it), says "degraded" with the failure in its warnings and no
    filesystem path, and streameval_checkpoint_failing is 1 until one succeeds."""
    state = tmp_path / "state"
    ckpt = state / CHECKPOINT_FILE
    with BackgroundServer(state_dir=state, checkpoint_every=0, checkpoint_seconds=0.2) as srv:
        assert post(srv.url, events(10))[0] == 200
        assert wait_for(lambda: healthz(srv.url)[1]["checkpoint_seq"] == 1)
        # the disk "changes under us": the checkpoint's path becomes a directory, so
        # that the atomic rename fails (EISDIR, for root too)
        ckpt.unlink()
        ckpt.mkdir()
        assert post(srv.url, events(10, 10))[0] == 200
        # the periodic checkpoint fails, is counted, and /healthz says so (still 200)
        assert wait_for(lambda: healthz(srv.url)[1]["status"] == "degraded")
        status, hdrs, raw = call(srv.url, "GET", "/healthz")
        health = json.loads(raw)
        assert status == 200 and "reason" not in health
        assert any("the last checkpoint failed" in w and "Is a directory" in w
                   for w in health["warnings"]), health
        assert health["checkpoint_errors"] >= 1 and health["failed"] is None
        # no path: neither the state directory's nor any other (the checkpoint's
        # error names its file, cut to its last part)
        text = raw.decode()
        assert str(tmp_path) not in text and "/tmp" not in text, text
        assert "checkpoint.json" in health["checkpoint_error"]
        assert scrape(srv.url)["streameval_checkpoint_failing"] == 1.0
        # on demand: a JSON 500 naming the reason, counted too
        before = health["checkpoint_errors"]
        status, out = post(srv.url, {}, path="/checkpoint")
        assert status == 500 and out["error"].startswith("checkpoint failed: ")
        assert "Is a directory" in out["error"] and out["checkpoint_errors"] > before
        assert scrape(srv.url)["streameval_checkpoint_errors_total"] >= before + 1
        # events are still accepted (the write-ahead log holds them)
        assert post(srv.url, events(10, 20))[0] == 200
        # the path is free again: the next checkpoint succeeds, /healthz recovers
        ckpt.rmdir()
        status, out = post(srv.url, {}, path="/checkpoint")
        assert status == 200 and out["written"] is True and out["checkpoint_error"] is None
        status, health = healthz(srv.url)
        assert status == 200 and health["status"] == "ok" and health["checkpoint_seq"] == 3
        assert health["warnings"] == [] and scrape(srv.url)["streameval_checkpoint_failing"] == 0


class _BrokenLog:
    """The real write-ahead log whose disk fails on the first append (fault injection)."""

    def __init__(self, wal):
        self._wal = wal

    def append(self, seq, batch, *key):
        raise OSError(28, "No space left on device")

    def __getattr__(self, name):
        return getattr(self._wal, name)


def test_checkpoint_on_a_failed_engine_is_a_json_503(tmp_path):
    eng = build_engine(None, state_dir=tmp_path, checkpoint_seconds=0)
    eng._wal = _BrokenLog(eng._wal)
    with BackgroundServer(engine=eng) as srv:
        status, out = post(srv.url, events(3))
        assert status == 503 and "No space left" in out["error"]
        status, out = post(srv.url, {}, path="/checkpoint")
        assert status == 503 and out["error"].startswith("no checkpoint: could not write")
        # the node cannot take events: 503, the reason without a path
        status, _, raw = call(srv.url, "GET", "/healthz")
        health = json.loads(raw)
        assert status == 503 and health["status"] == "failed"
        assert "No space left" in health["reason"] and str(tmp_path) not in raw.decode()


def test_failed_exports_are_json_500s_and_degrade_healthz_until_a_success():
    class Broken:
        def collect(self):
            raise RuntimeError("collector exploded")

    with BackgroundServer() as srv:
        assert post(srv.url, events(5))[0] == 200
        registry = srv.app.state.registry
        broken = Broken()
        registry.register(broken)
        status, hdrs, data = call(srv.url, "GET", "/metrics")
        assert status == 500 and hdrs["content-type"] == "application/json"
        assert "collector exploded" in json.loads(data)["error"]
        status, health = healthz(srv.url)
        assert status == 200 and health["status"] == "degraded"
        assert [w for w in health["warnings"] if w.startswith("/metrics failed: ")]
        registry.unregister(broken)
        assert call(srv.url, "GET", "/metrics")[0] == 200
        assert healthz(srv.url)[1]["status"] == "ok"
        # /snapshot, then /alerts (no handler of its own: the catch-all's JSON 500)
        monitor = srv.engine.monitor
        monitor.snapshot = lambda: 1 / 0
        monitor.active_alerts = lambda: [][1]
        try:
            status, hdrs, data = call(srv.url, "GET", "/snapshot")
            assert status == 500 and "ZeroDivisionError" in json.loads(data)["error"]
            assert healthz(srv.url)[1]["export_errors"].keys() == {"/snapshot"}
            status, hdrs, data = call(srv.url, "GET", "/alerts")
            assert status == 500 and hdrs["content-type"] == "application/json"
            assert "IndexError" in json.loads(data)["error"]
        finally:
            del monitor.snapshot, monitor.active_alerts
        assert call(srv.url, "GET", "/snapshot")[0] == 200
        assert healthz(srv.url)[1]["status"] == "ok"


# ----------------------------------------------------------------------- nesting


def test_deep_nesting_is_a_400_naming_the_event_and_counted():
    ok = {"ts": 1, "label": 1, "score": 0.5}
    deep = {**ok, "extra": json.loads("[" * 40 + "]" * 40)}
    fine = {**ok, "extra": json.loads("[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2))}
    cases = [  # (body, content type, index)
        (b"[" * 1000, "application/json", None),  # json's RecursionError: was a text 500
        (b"[" * 1000 + b"]" * 1000, "application/json", 0),  # orjson parses it
        (b"[" * 200_000, "application/json", None),  # past orjson's limit of 1024
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, "application/json", None),
        (json.dumps([ok, ok, deep]).encode(), "application/json", 2),
        (json.dumps(deep).encode(), "application/json", 0),
        ((json.dumps(ok) + "\n" + json.dumps(deep)).encode(), "application/x-ndjson", 1),
        ((json.dumps(ok) + "\n" + "[" * 3000).encode(), "application/x-ndjson", 1),
    ]
    with BackgroundServer() as srv:
        for k, (body, ctype, index) in enumerate(cases):
            status, hdrs, data = call(srv.url, "POST", "/events", body, {"Content-Type": ctype})
            assert status == 400 and hdrs["content-type"] == "application/json", (k, data)
            err = json.loads(data)
            assert err["index"] == index, (k, err)
            assert f"nested deeper than {MAX_DEPTH} levels" in err["reason"], (k, err)
        # as deep as allowed (the array, the event, 30 levels inside it): accepted
        assert post(srv.url, [ok, fine])[0] == 200
        snap = json.loads(call(srv.url, "GET", "/snapshot")[2])
        assert snap["service"]["rejected_requests"] == len(cases) and snap["n"] == 2


# ----------------------------------------------------------------------- memory


def rss_mb(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def release_settled(port):
    """True once no refused body waits for its memory release (the service's
    releaser runs off the request path: read its gauge)."""
    status, _, data = call(port, "GET", "/metrics")
    assert status == 200
    values = {s.name: s.value for f in text_string_to_metric_families(data.decode())
              for s in f.samples}
    return values["streameval_memory_release_pending"] == 0.0


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux /proc")
def test_refused_bodies_give_their_memory_back(tmp_path):
    """Refused 15 MB bodies (parsed whole: the last event is bad) and refused 3 MB ones
    (10^6 empty objects) leave nothing behind: once the service's memory release has
    run after the last of them, its resident size is within 10% (plus one body's bytes)
    of what it was after a warm-up of three of each kind (the first ones pay for what
    large bodies need once and keep: ingestion threads, their malloc arenas, the
    parser's buffers), and 20 refused bodies of empty objects add nothing to what the 10
    before them left. What is measured is that memory does not accumulate with the
    refusals."""
    ev = b'{"ts":1700000000,"label":1,"score":0.5}'
    n = 15_000_000 // (len(ev) + 1)
    big = b"[" + b",".join([ev] * (n - 1)) + b',{"ts":1700000001,"label":3,"score":0.5}]'
    empties = b"[" + b",".join([b"{}"] * 1_000_000) + b"]"
    config = tmp_path / "monitor.toml"  # no wait between refused large bodies here
    config.write_text("[serve]\nrefusal_penalty = 0\n")
    proc, port = start_cli("--config", config)
    try:
        def send(body):
            # a connection per request: waiting for the release can outlast the
            # server's keep-alive, after which it closes an idle connection
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            try:
                conn.request("POST", "/events", body=body, headers=JSON)
                r = conn.getresponse()
                return r.status, json.loads(r.read())
            finally:
                conn.close()

        def settled_rss():
            assert wait_for(lambda: release_settled(port), timeout=30)
            return rss_mb(proc.pid)

        for k in range(5):  # warm-up: accepted batches, one refused of each kind
            assert send(json.dumps(events(100, 100 * k)).encode())[0] == 200
        for _ in range(3):
            assert send(big)[0] == 400 and send(empties)[0] == 400
        baseline = settled_rss()
        peak = 0.0
        for _ in range(12):
            status, err = send(big)
            assert status == 400 and err["index"] == n - 1, err
            peak = max(peak, rss_mb(proc.pid))
        after_big = settled_rss()
        for _ in range(10):
            status, err = send(empties)
            assert status == 400 and err["index"] == 0, err
        after_empties_10 = settled_rss()
        for _ in range(20):
            status, err = send(empties)
            assert status == 400 and err["index"] == 0, err
        after_empties = settled_rss()
    finally:
        stop_cli(proc)
    assert peak > baseline  # the bodies were parsed: memory was taken, then given back
    # what 12 (30) refusals would leave if each kept even a twelfth of its body exceeds
    # this: 10% of the baseline, plus one body's bytes of malloc arenas that a parse
    # under CPU load may not have returned yet when the release ran
    big_mb, empties_mb = len(big) / 2**20, len(empties) / 2**20
    assert after_big <= 1.10 * baseline + big_mb, (baseline, peak, after_big)
    # 10^6 empty objects parse into as many small dicts: freed, they return to Python's
    # small-object arenas, which go back to the system only when wholly empty, so the
    # first such refusals may leave a one-time step; 20 more must add nothing to it
    assert after_empties_10 <= 1.20 * baseline + empties_mb, (baseline, after_empties_10)
    assert after_empties <= after_empties_10 + 0.05 * baseline + empties_mb, (
        baseline, after_empties_10, after_empties)


# ----------------------------------------------------------------------- connections


def test_half_sent_headers_and_bodies_are_cut_off(tmp_path):
    with BackgroundServer(header_timeout=0.5, body_timeout=0.6, token="tok-tok-tok-tok-tok") as srv:
        addr = ("127.0.0.1", srv.port)
        # half the headers: 408 after the header timeout, then closed
        with socket.create_connection(addr) as s:
            s.sendall(b"POST /events HTTP/1.1\r\nHost: localhost\r\nContent-Type: appl")
            t0 = time.monotonic()
            data = read_until_closed(s, 5)
            took = time.monotonic() - t0
        assert data is not None and data.startswith(b"HTTP/1.1 408 "), data
        assert json.loads(data.split(b"\r\n\r\n", 1)[1])["error"].startswith("request headers")
        assert 0.45 <= took < 3, took
        # nothing at all: closed without a word
        with socket.create_connection(addr) as s:
            assert read_until_closed(s, 5) == b""
        # a keep-alive connection whose second request stalls half-way
        with socket.create_connection(addr) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            time.sleep(0.3)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHo")
            data = read_until_closed(s, 5)
        assert data is not None and b"HTTP/1.1 200 " in data and b"HTTP/1.1 408 " in data
        # a body that stops coming: 408 (JSON) after the body timeout, then closed
        auth = b"Authorization: Bearer tok-tok-tok-tok-tok\r\nContent-Type: application/json\r\n"
        with socket.create_connection(addr) as s:
            s.sendall(b"POST /events HTTP/1.1\r\nHost: localhost\r\n" + auth
                      + b"Content-Length: 1000\r\n\r\n[{\"label\": 1")
            t0 = time.monotonic()
            data = read_until_closed(s, 5)
            took = time.monotonic() - t0
        assert data is not None and data.startswith(b"HTTP/1.1 408 "), data
        head, body = data.split(b"\r\n\r\n", 1)
        assert b"connection: close" in head.lower()
        assert "not complete after 0.6 s (12 bytes received)" in json.loads(body)["error"]
        assert 0.5 <= took < 3, took
        # answered before its body (no token): the rest must come within the body timeout
        with socket.create_connection(addr) as s:
            s.sendall(b"POST /events HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
                      b"\r\nContent-Length: 100000\r\n\r\n[")
            s.settimeout(5)
            assert s.recv(65536).startswith(b"HTTP/1.1 401 ")
            t0 = time.monotonic()
            closed = False
            while time.monotonic() - t0 < 5 and not closed:
                try:
                    s.sendall(b" ")  # trickling: each byte resets no timer
                    time.sleep(0.05)
                    s.setblocking(False)
                    closed = s.recv(100) == b""
                except BlockingIOError:
                    pass
                except OSError:
                    closed = True
                finally:
                    s.setblocking(True)
            assert closed and time.monotonic() - t0 < 3
        assert healthz(srv.url)[1]["n"] == 0


def test_the_body_deadline_without_asyncio_timeout(monkeypatch):
    # Python 3.10 has no asyncio.timeout: the body's deadline is then checked per chunk
    import streameval.service.app as app_module

    monkeypatch.setattr(app_module, "_timeout", None)
    with BackgroundServer(body_timeout=0.6) as srv:
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            s.sendall(b"POST /events HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                      b"application/json\r\nContent-Length: 1000\r\n\r\n[{\"label\": 1")
            time.sleep(0.3)
            s.sendall(b", \"score\"")  # a second chunk, inside the deadline
            t0 = time.monotonic()
            data = read_until_closed(s, 5)
            took = time.monotonic() - t0
        assert data is not None and data.startswith(b"HTTP/1.1 408 "), data
        body = json.loads(data.split(b"\r\n\r\n", 1)[1])
        assert "not complete after 0.6 s (21 bytes received)" in body["error"]
        assert 0.2 <= took < 3, took
        assert post(srv.url, events(3))[0] == 200


def test_unexpected_errors_on_ingestion_are_logged_json_500s(monkeypatch, caplog):
    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    with BackgroundServer() as srv:
        with monkeypatch.context() as m:
            # in the engine: small bodies begin on the event loop, big ones in a thread
            m.setattr(srv.engine, "begin_body", boom)
            m.setattr(srv.engine, "ingest_body", boom)
            big = b"[" + b",".join([b"{}"] * 150_000) + b"]"  # over INLINE_BYTES
            for body in (b"[]", big):
                status, hdrs, data = call(srv.url, "POST", "/events", body, JSON)
                assert (status, hdrs["content-type"]) == (500, "application/json")
                assert json.loads(data) == {
                    "error": "internal error on /events: RuntimeError: boom"}
            # in the route itself (an answer that is not JSON): a JSON 500 all the same
            m.setattr(srv.engine, "begin_body", lambda *a, **k: ({"accepted": object()}, None))
            m.setattr(srv.engine, "ingest_body", lambda *a, **k: {"accepted": object()})
            for body in (b"[]", big):
                status, hdrs, data = call(srv.url, "POST", "/labels", body, JSON)
                assert (status, hdrs["content-type"]) == (500, "application/json")
                error = json.loads(data)["error"]
                assert error.startswith("internal error on /labels: TypeError: "), error
        assert "POST /labels failed" in caplog.text and "RuntimeError: boom" in caplog.text
        status, result = post(srv.url, events(3))
        assert status == 200 and result["n"] == 3


def test_unparseable_requests_get_a_json_400_and_are_closed():
    with BackgroundServer() as srv:
        oversized = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Long: " + b"a" * 20_000
        for pieces in ([b"NOT HTTP AT ALL\r\n\r\n"], [oversized[:10_000], oversized[10_000:]]):
            with socket.create_connection(("127.0.0.1", srv.port)) as s:
                for piece in pieces:  # headers over 16 KiB while incomplete
                    s.sendall(piece)
                    time.sleep(0.05)
                data = read_until_closed(s, 5)
            assert data is not None and data.startswith(b"HTTP/1.1 400 "), data
            head, body = data.split(b"\r\n\r\n", 1)
            assert b"content-type: application/json" in head
            assert json.loads(body) == {"error": "Invalid HTTP request received."}


def test_connections_past_the_cap_get_a_json_503():
    with BackgroundServer(max_connections=4) as srv:
        held = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(4)]
        try:
            assert wait_for(lambda: len(srv._server.server_state.connections) == 4)
            status, hdrs, data = call(srv.url, "GET", "/healthz")
            assert status == 503 and hdrs["content-type"] == "application/json"
            assert hdrs["retry-after"] == "1" and hdrs["connection"] == "close"
            assert "too many connections (the limit is 4)" in json.loads(data)["error"]
            held.pop().close()
            assert wait_for(lambda: len(srv._server.server_state.connections) == 3)
            assert call(srv.url, "GET", "/healthz")[0] == 200
        finally:
            for s in held:
                s.close()


class _Trickler:
    """``n`` connections that each send a request one byte every ``interval`` seconds
    (half of them their headers, half a body after complete headers), opening new ones
    as the server closes them, from one thread; records how long each one lived.
    ``hold`` stops the sending and the reopening (the open ones stay silent)."""

    HEADERS = (b"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
               b"\r\nX-Padding: " + b"a" * 2000 + b"\r\n\r\n")
    BODY_HEAD = (b"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                 b"\r\nContent-Length: 100000\r\n\r\n")

    def __init__(self, port, n, interval):
        self.port, self.n, self.interval = port, n, interval
        self.lifetimes: list[tuple[str, float]] = []  # (kind, seconds open)
        self.stop = threading.Event()
        self.hold = threading.Event()
        self.socks: dict = {}  # socket -> [kind, opened, bytes sent]
        self.sel = selectors.DefaultSelector()
        self.opened = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def connect(self):
        kind = "headers" if self.opened % 2 else "body"
        self.opened += 1
        s = socket.create_connection(("127.0.0.1", self.port))
        if kind == "body":
            s.sendall(self.BODY_HEAD)
        s.setblocking(False)
        self.socks[s] = [kind, time.monotonic(), 0]
        self.sel.register(s, selectors.EVENT_READ)

    def closed(self, s):
        kind, opened, _ = self.socks.pop(s)
        self.lifetimes.append((kind, time.monotonic() - opened))
        self.sel.unregister(s)
        s.close()

    def run(self):
        next_send = time.monotonic()
        while not self.stop.is_set():
            while not self.hold.is_set() and len(self.socks) < self.n:
                self.connect()
            wait = max(0.0, min(0.05, next_send - time.monotonic()))
            for key, _ in self.sel.select(timeout=wait):
                try:
                    if key.fileobj.recv(65536) == b"":
                        self.closed(key.fileobj)
                except BlockingIOError:
                    pass
                except OSError:
                    self.closed(key.fileobj)
            if time.monotonic() >= next_send:
                next_send += self.interval
                if self.hold.is_set():
                    continue
                for s, st in list(self.socks.items()):
                    byte = self.HEADERS[st[2] % len(self.HEADERS):][:1] if st[0] == "headers" \
                        else b" "
                    try:
                        st[2] += s.send(byte)
                    except OSError:
                        pass
        for s in list(self.socks):
            s.close()
        self.sel.close()


def _throughput_of(port, body, seconds, clients=2):
    """Requests per second of ``clients`` keep-alive connections posting ``body``."""
    done, errors = [], []
    deadline = time.monotonic() + seconds

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        n = 0
        try:
            while time.monotonic() < deadline:
                conn.request("POST", "/events", body=body, headers=JSON)
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    errors.append(r.status)
                    return
                n += 1
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            conn.close()
            done.append(n)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return sum(done) / (time.monotonic() - t0)


def _throughput(port, seconds, clients=3, size=100):
    """Batches of ``size`` events per second, from ``clients`` keep-alive connections."""
    return _throughput_of(port, json.dumps(events(size)).encode(), seconds, clients)


#: Pairs of phases (without, then with the trickling connections) and their length:
#: alternating short phases shares the noise of a busy machine between the two; more
#: pairs (up to MAX_PAIRS) when the median is not clear after PAIRS.
PAIRS, MAX_PAIRS, PHASE = 5, 11, 1.0


def _median(quiet, loud):
    ratios = sorted(b / a for a, b in zip(quiet, loud))
    return ratios[len(ratios) // 2]


def test_slow_loris_connections_are_cut_off_and_do_not_slow_normal_clients():
    """200 connections trickle their headers or bodies byte by byte (one byte every
    0.5 s each, new ones replacing those cut off) while 3 clients post batches of 100
    events: the clients' throughput stays within 20% of theirs without the trickling
    (the median of the ratios over alternating pairs of phases), and the server closes
    every trickling connection at its timeout."""
    timeout = 1.5
    proc, port = start_cli("--header-timeout", timeout, "--body-timeout", timeout)
    try:
        _throughput(port, 0.5)  # warm-up
        quiet, loud = [], []
        loris = _Trickler(port, 200, 0.5)
        loris.hold.set()
        loris.thread.start()
        while len(quiet) < PAIRS or (len(quiet) < MAX_PAIRS and _median(quiet, loud) < 0.8):
            quiet.append(_throughput(port, PHASE))
            loris.hold.clear()
            assert wait_for(lambda: len(loris.socks) == 200)
            time.sleep(0.1)  # they are all sending
            loud.append(_throughput(port, PHASE))
            loris.hold.set()  # silent: the server cuts them off within the timeout
        assert wait_for(lambda: not loris.socks, timeout=timeout + 3), len(loris.socks)
        loris.stop.set()
        loris.thread.join(10)
        assert _throughput(port, 0.3) > 0  # still serving
    finally:
        stop_cli(proc)
    assert _median(quiet, loud) >= 0.8, (quiet, loud)
    kinds = {k for k, _ in loris.lifetimes}
    assert kinds == {"headers", "body"}
    lives = [t for _, t in loris.lifetimes]
    assert len(lives) >= 400, len(lives)  # cut off and replaced, round after round
    assert min(lives) >= timeout - 0.1 and max(lives) <= timeout + 2.0, (min(lives), max(lives))


# ----------------------------------------------------------------------- options


def test_limits_from_the_command_line_and_the_config():
    import argparse

    args = add_serve_arguments(argparse.ArgumentParser()).parse_args(
        ["--header-timeout", "3", "--body-timeout", "4.5", "--max-connections", "7",
         "--public-reads", "--insecure"])
    assert (args.header_timeout, args.body_timeout, args.max_connections) == (3.0, 4.5, 7)
    assert args.public_reads is True and args.insecure is True
    defaults = add_serve_arguments(argparse.ArgumentParser()).parse_args([])
    assert defaults.public_reads is None and defaults.insecure is False
    config = {"serve": {"header_timeout": 2, "body_timeout": 3.5, "max_connections": 9,
                        "max_body": 1000}}
    with BackgroundServer(config, body_timeout=4) as srv:  # arguments override the file
        assert srv.options == {"public_reads": False, "max_body": 1000, "header_timeout": 2,
                               "body_timeout": 4, "max_connections": 9, "allowed_hosts": [],
                               "max_id_bytes": 1024, "max_segment_bytes": 256,
                               "max_label_bytes": 256, "refusal_penalty": 9.0}
        http_cls = srv._server.config.http_protocol_class
        assert (http_cls.header_timeout, http_cls.body_timeout, http_cls.max_connections) \
            == (2.0, 4.0, 9)
    for key, value, message in (("header_timeout", 0, "a number of seconds > 0"),
                                ("body_timeout", "1", "a number of seconds > 0"),
                                ("max_connections", 2.5, "an int >= 1"),
                                ("max_body", True, "an int >= 1")):
        with pytest.raises(ValueError, match=rf"serve\.{key} = .*: must be {message}"):
            BackgroundServer({"serve": {key: value}})
    with pytest.raises(ValueError, match=r"^max_connections = 0: must be an int >= 1"):
        BackgroundServer(max_connections=0)


# ----------------------------------------------------------------------- byte caps


def _utf8(v):
    return len(v.encode("utf-8"))


def test_ids_segment_values_and_labels_are_bounded_in_bytes_at_the_http_boundary():
    """Each bounded field at its limit is accepted and one byte over is a 400 naming the
    event, the field and the limit (UTF-8 bytes, not characters); the refusal is
    counted and nothing of its batch is applied; 1 MB ids never wait in the label join;
    [serve] raises a limit."""
    config = {"monitor": {"group_by": "seg"}, "input": {"label_ttl": 60}}
    ok = {"ts": 1_700_000_000, "label": 1, "score": 0.5, "seg": "fr", "id": "a"}
    cases = [  # (path, event, field, limit)
        ("/events", {**ok, "seg": "é" * 129}, "seg", 256),  # 258 bytes, 129 characters
        ("/events", {**ok, "seg": "x" * 1_000_000}, "seg", 256),
        ("/events", {**ok, "id": "i" * 1025}, "id", 1024),
        ("/events", {**ok, "label": "l" * 257}, "label", 256),
        ("/predictions", {"ts": 1_700_000_000, "score": 0.5, "id": "p" * 1_000_000},
         "id", 1024),
        ("/labels", {"ts": 1_700_000_000, "label": 1, "id": "€" * 342}, "id", 1024),
    ]
    with BackgroundServer(config) as srv:
        for k, (path, bad, field, limit) in enumerate(cases):
            size = _utf8(bad[field])
            assert size > limit  # the oracle: its UTF-8 bytes
            body = [dict(ok) if path == "/events" else
                    {kk: v for kk, v in bad.items() if kk != field} | {field: "z"}, bad]
            status, err = post(srv.url, body, path=path)
            assert status == 400, (k, err)
            assert (err["index"], err["field"], err["limit"]) == (1, field, limit), (k, err)
            assert f"{size} bytes, more than the limit of {limit} bytes" in err["reason"]
            assert len(err["error"]) < 300  # the value is shortened, never echoed whole
        snap = json.loads(call(srv.url, "GET", "/snapshot")[2])
        assert snap["n"] == 0 and snap["service"]["rejected_requests"] == len(cases)
        assert snap["service"]["join"]["pending"] == 0
        # at the limits exactly: accepted
        edge = {**ok, "seg": "é" * 128, "id": "i" * 1024, "label": 1}
        assert post(srv.url, [edge])[0] == 200
        pred = {"ts": 1_700_000_000, "score": 0.5, "id": "€" * 341 + "a", "seg": "s" * 256}
        assert _utf8(pred["id"]) == 1024
        status, out = post(srv.url, [pred], path="/predictions")
        assert status == 200 and out["pending"] == 1
        assert {e["segment"] for e in json.loads(call(srv.url, "GET", "/snapshot")[2])
                ["segments"]} >= {"é" * 128}
    # a deployment with longer ids says so
    with BackgroundServer({**config, "serve": {"max_id_bytes": 4096}}) as srv:
        assert post(srv.url, [{**ok, "id": "i" * 4096}])[0] == 200
        status, err = post(srv.url, [{**ok, "id": "i" * 4097}])
        assert status == 400 and err["limit"] == 4096
    with pytest.raises(ValueError, match=r"serve\.max_segment_bytes = 0: must be"):
        BackgroundServer({"serve": {"max_segment_bytes": 0}})


def test_metrics_label_values_are_escaped_and_bounded():
    """A Monitor fed around the HTTP limits (Python, or an old checkpoint) still
    exports bounded label values: a long segment value becomes its prefix, "~" and 16
    hex digits of its SHA-256 (two long values stay two series); quotes, backslashes
    and line feeds are escaped and read back as they were."""
    import hashlib

    from streameval.service.exposition import MAX_LABEL_VALUE_BYTES

    odd = 'a"b\nc\\d'
    long1, long2 = "x" * 100_000, "x" * 99_999 + "y"
    # (a deployment that raised the segment limit: the exposition still bounds them)
    with BackgroundServer({"monitor": {"group_by": "seg"},
                           "serve": {"max_segment_bytes": 200_000}}) as srv:
        srv.engine.ingest([{"ts": 1_700_000_000 + i, "label": i % 2, "score": i / 12,
                            "seg": seg} for i, seg in enumerate([odd, long1, long2] * 4)])
        status, _, data = call(srv.url, "GET", "/metrics")
        assert status == 200
        assert len(data) < 200_000  # 300 kB of segment values, each cut to 528 bytes
        segs = {s.labels["segment"] for f in text_string_to_metric_families(data.decode())
                if f.name == "streameval_segment_events" for s in f.samples}
    expected = {"", odd}  # the whole stream, and the three segments
    for v in (long1, long2):
        digest = hashlib.sha256(v.encode()).hexdigest()[:16]
        expected.add(v[: MAX_LABEL_VALUE_BYTES - 17] + "~" + digest)
    assert segs == expected
    assert max(map(_utf8, segs)) == MAX_LABEL_VALUE_BYTES


def test_missing_segment_fields_are_exported_when_the_snapshot_counts_them():
    with BackgroundServer({"monitor": {"group_by": "seg"}}) as srv:
        assert post(srv.url, [{"ts": 1, "label": 1, "score": 0.5, "seg": "a"}])[0] == 200
        monitor = srv.engine.monitor
        real = type(monitor).snapshot
        had = "missing_segment_fields" in real(monitor)
        if not had:  # the count may not be there: stand in for it
            monitor.snapshot = lambda: {**real(monitor),
                                        "missing_segment_fields": {"seg": 3, 'q"x': 1}}
        try:
            values = {(s.name, s.labels.get("field")): s.value
                      for f in text_string_to_metric_families(
                          call(srv.url, "GET", "/metrics")[2].decode())
                      for s in f.samples if f.name == "streameval_missing_segment_field"}
            expected = real(monitor)["missing_segment_fields"] if had else {"seg": 3, 'q"x': 1}
        finally:
            monitor.__dict__.pop("snapshot", None)
    assert values == {("streameval_missing_segment_field_total", k): float(v)
                      for k, v in expected.items()}


# ----------------------------------------------------------------------- small edges


def test_two_host_headers_are_refused():
    with BackgroundServer() as srv:
        for head in (b"Host: localhost\r\nHost: evil.example\r\n",
                     b"Host: localhost\r\nHost: localhost\r\n"):
            with socket.create_connection(("127.0.0.1", srv.port)) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\n" + head + b"\r\n")
                data = read_until_closed(s, 5)
            assert data.startswith(b"HTTP/1.1 400 "), data
            assert json.loads(data.split(b"\r\n\r\n", 1)[1])["error"].startswith("2 Host")
        # one Host: served; the refusals are counted
        assert call(srv.url, "GET", "/healthz")[0] == 200
        assert srv.engine.monitor.n == 0
        assert scrape(srv.url)["streameval_refused_host_requests_total"] == 2


def test_short_tokens_and_unreadable_token_files_are_refused_with_one_line(tmp_path):
    from streameval.service import MIN_TOKEN_BYTES

    with pytest.raises(ValueError, match=r"^token of 15 bytes: a token needs at least 16"):
        BackgroundServer(token="x" * 15)
    assert MIN_TOKEN_BYTES == 16
    with BackgroundServer(token="é" * 8) as srv:  # 16 bytes (8 characters): enough
        auth = {"Authorization": "Bearer " + "é" * 8}
        assert call(srv.url, "GET", "/snapshot",
                    headers={k: v.encode().decode("latin-1") for k, v in auth.items()})[0] == 200
    short = tmp_path / "short.txt"
    short.write_text("s3cret\n")
    for args, words in ((("--token-file", short), "the token of 6 bytes: a token needs at "
                                                   "least 16 bytes; make one with python -c"),
                        (("--token-file", tmp_path / "none.txt"), "no such file; make one")):
        proc, _ = start_cli(*args, expect_start=False)
        err = proc.stderr.read().decode()
        assert proc.returncode == 2, err
        assert err.count("\n") == 1 and words in err and "Errno" not in err, err


def test_expired_predictions_are_said_in_the_answer_and_in_healthz():
    """Predictions that a batch makes expire are counted in that batch's answer
    ("expired"), and /healthz warns (200, "degraded") while they are a large share of
    the predictions resolved recently."""
    config = {"input": {"label_ttl": 10}}
    t = 1_700_000_000
    with BackgroundServer(config) as srv:
        preds = [{"id": f"p{i}", "ts": t + i, "score": i / 10} for i in range(10)]
        status, out = post(srv.url, preds, path="/predictions")
        assert status == 200 and out["pending"] == 10 and out["expired"] == 0
        # two of them joined in time
        status, out = post(srv.url, [{"id": "p8", "ts": t + 9, "label": 1},
                                     {"id": "p9", "ts": t + 9, "label": 0}], path="/labels")
        assert status == 200 and out["expired"] == 0 and out["pending"] == 8
        assert healthz(srv.url)[1]["status"] == "ok"
        # a label far later: the 8 still waiting are more than label_ttl behind it
        status, out = post(srv.url, [{"id": "late", "ts": t + 1000, "label": 1}],
                           path="/labels")
        assert status == 200 and out["expired"] == 8 and out["pending"] == 0
        join = json.loads(call(srv.url, "GET", "/snapshot")[2])["service"]["join"]
        assert (join["expired"], join["joined"], join["orphans"]) == (8, 2, 1)
        status, health = healthz(srv.url)
        assert status == 200 and health["status"] == "degraded"
        assert health["expired_recently"] == 8
        assert any(w.startswith("8 of the 10 predictions resolved in the last 300 s expired")
                   for w in health["warnings"]), health
        # an answer that made nothing expire says 0
        status, out = post(srv.url, [{"id": "q", "ts": t + 1001, "score": 0.3}],
                           path="/predictions")
        assert status == 200 and out["expired"] == 0


def test_the_memory_releaser_runs_off_the_request_path_at_a_bounded_rate():
    """Requests in a loop get one release per max(interval, cost / duty); each
    request is covered by a release that started after it."""
    from streameval.service.app import MemoryReleaser

    runs = []

    def release():
        runs.append(time.monotonic())
        time.sleep(0.05)

    r = MemoryReleaser(release, interval=0.02, duty=0.25)  # 0.05 s, then 0.2 s apart
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 1.0:
            r.request()  # never waits for the release
            time.sleep(0.001)
        assert time.monotonic() - t0 < 1.2
        assert wait_for(lambda: not r.pending, timeout=2)
        last = runs[-1]
    finally:
        r.close()
    gaps = [b - a for a, b in zip(runs, runs[1:])]
    assert 3 <= len(runs) <= 6, runs  # 1 s / (0.05 s + 0.2 s), plus the first
    assert min(gaps) >= 0.25 - 0.01, gaps
    assert last > t0 + 0.9 and r.releases == len(runs)
    assert r.seconds >= 0.05 * len(runs)


def test_refusal_penalty_bounds_a_hosts_share_of_the_time():
    from streameval.service.app import RefusalPenalty

    now = [100.0]
    p = RefusalPenalty(9.0, clock=lambda: now[0], max_hosts=2)
    assert p.wait("a") == 0.0
    p.charge("a", 0.1)
    assert p.wait("a") == pytest.approx(0.9) and p.wait("b") == 0.0
    p.charge("a", 0.1)  # owed from the end of the wait already owed
    assert p.wait("a") == pytest.approx(1.8)
    now[0] += 1.0
    assert p.wait("a") == pytest.approx(0.8)
    p.charge("b", 0.01)
    now[0] += 1.0  # both waits over: a third host drops them
    p.charge("c", 0.01)
    assert set(p._until) == {"c"}


# ----------------------------------------------------------------------- attacks


class _Attacker:
    """Clients that post ``body`` in a loop on their own connection while ``on`` is
    set (each answer must be ``status``); counts the answers."""

    def __init__(self, port, bodies, status=400):
        self.port, self.bodies, self.status = port, bodies, status
        self.on, self.stop, self.sent, self.errors = threading.Event(), threading.Event(), 0, []
        self.threads = [threading.Thread(target=self._run, args=(b,), daemon=True)
                        for b in bodies]
        for t in self.threads:
            t.start()

    def _run(self, body):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            while not self.stop.is_set():
                if not self.on.wait(0.05):
                    continue
                conn.request("POST", "/events", body=body, headers=JSON)
                r = conn.getresponse()
                r.read()
                if r.status != self.status:
                    self.errors.append(r.status)
                self.sent += 1
        except Exception as e:  # pragma: no cover - reported by the test
            self.errors.append(e)
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)


def _segment_events(n, start=0, segments=1000):
    return [{"ts": 1_700_000_000 + start + i, "label": i % 3 == 0, "score": (i % 97) / 97,
             "seg": f"s{(i * 7) % segments}"} for i in range(n)]


def test_refused_bodies_in_a_loop_leave_good_traffic_its_throughput(tmp_path):
    """Over a real socket, a service with 1 000 segments: one client posts refused
    bodies just over 1 MiB in a loop (valid events but the last: parsed whole), another
    1 MB segment values and ids (refused by the byte limits), while two clients post
    batches of 100 good events. Their throughput stays at 80% or more of theirs without
    the attack (the median of the ratios over alternating pairs of phases, more pairs
    when the median is not clear: the machine may be shared), nothing of the attack is
    counted, and /metrics does not grow."""
    config = tmp_path / "monitor.toml"
    config.write_text('[monitor]\ngroup_by = "seg"\n')
    proc, port = start_cli("--config", config)
    ev = json.dumps(_segment_events(1)[0]).encode()
    n = (1 << 20) // (len(ev) + 1) + 10
    stall = b"[" + b",".join([ev] * n) + b',{"ts": 1, "label": 3, "score": 0.5}]'
    assert len(stall) > 1 << 20
    huge = [json.dumps([{**_segment_events(1)[0], "seg": "x" * 1_000_000}]).encode(),
            json.dumps([{**_segment_events(1)[0], "id": "i" * 1_000_000}]).encode()]
    good = json.dumps(_segment_events(100, 50_000)).encode()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for k in range(5):  # every segment has events
            conn.request("POST", "/events", json.dumps(_segment_events(2000, 2000 * k)), JSON)
            r = conn.getresponse()
            assert r.status == 200, r.read()
            r.read()
        conn.request("POST", "/events", stall, JSON)  # the first release (and freeze)
        r = conn.getresponse()
        assert r.status == 400
        r.read()
        conn.close()
        assert wait_for(lambda: release_settled(port), timeout=60)
        before = call(port, "GET", "/metrics")[2]
        n_before = json.loads(call(port, "GET", "/snapshot")[2])["n"]

        def throughput():
            return _throughput_of(port, good, PHASE)

        attack = _Attacker(port, [stall, huge[0], huge[1]])
        quiet, loud = [], []
        try:
            throughput()  # warm-up
            while len(quiet) < 3 or (len(quiet) < MAX_PAIRS and _median(quiet, loud) < 0.8):
                quiet.append(throughput())
                attack.on.set()
                time.sleep(0.2)  # every attacker is sending
                loud.append(throughput())
                attack.on.clear()
        finally:
            attack.close()
        assert not attack.errors, attack.errors[:5]
        assert attack.sent >= len(loud)
        after = call(port, "GET", "/metrics")[2]
        snap = json.loads(call(port, "GET", "/snapshot")[2])
    finally:
        stop_cli(proc)
    assert _median(quiet, loud) >= 0.8, (quiet, loud)
    # nothing of the attack was counted: only the good batches
    good_events = snap["n"] - n_before
    assert good_events % 100 == 0 and snap["service"]["rejected_requests"] == attack.sent + 1
    # /metrics: the same series, none longer (the segment values of the attack are refused)
    def series(text):
        return {s.split(" ")[0] for s in text.decode().splitlines() if not s.startswith("#")}
    new = series(after) - series(before)
    assert all("streameval_metric" not in s and "segment=" not in s for s in new), \
        sorted(new)[:5]
    assert len(after) <= 1.05 * len(before), (len(before), len(after))
