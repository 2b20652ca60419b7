"""Arbitrary JSON posted to the service, over a real loopback socket: whatever the
events hold, every response is a 200 or a 4xx with a JSON body, the reads
(``/snapshot``, ``/metrics``) and a checkpoint keep working, and a restart from the
state directory serves the same state.

Oracles: a Monitor fed directly the batches the service acknowledged (its snapshot
must equal the served one, before and after the restart), the validation rules of
:mod:`streameval.events` (a batch is accepted exactly when every event is valid), and
the byte limits counted here (an id over 1 024 UTF-8 bytes, a segment value or a label
string over 256 refuse the batch).
The regression this guards: one event with a lone surrogate in its segment (valid
JSON, ``"\\ud800"``) was accepted and then broke every export and checkpoint for
good, including after a restart, which replayed it from the write-ahead log.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import math
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from streameval.events import EventError, events_to_batch  # noqa: E402
from streameval.service import BackgroundServer  # noqa: E402
from streameval.service import load_config, snapshot_json  # noqa: E402

CONFIG = {
    "monitor": {
        "every": 7,
        "group_by": "country",
        "max_segments": 5,
        "metrics": {
            "auc": "roc_auc",
            "ap": "average_precision",
            "recall": "recall",
            "log_loss": "log_loss",
            "auc@5": {"metric": "roc_auc", "size": 5},
            "precision@1h": {"metric": "precision", "period": 3600, "lateness": 60},
        },
        "rules": ["recall < 0.5"],
    },
    "input": {"id": "id", "weight": "weight"},
}

NOW = time.time()

#: Any JSON value, with the values that broke things before: lone surrogates, the
#: largest floats, huge integers, deep-ish nesting, empty containers.
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, 0.5, 1e308, -1e308, 1e12, 1e13, 5e-324, NOW, NOW + 1e9, NOW - 7200]),
    st.text(max_size=6),
    st.sampled_from(["\ud800", "a\udfff", "\ud83d\ude00", "de", "fr", "", "2024-01-01T00:00:00Z"]),
)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=6)
ORJSON = importlib.util.find_spec("orjson") is not None
FIELDS = ["ts", "label", "score", "weight", "id", "country"]
#: The service's byte limits on string values, by field (the defaults of [serve]).
BYTE_LIMITS = {"id": 1024, "country": 256, "label": 256}


def over_byte_limit(event) -> bool:
    return isinstance(event, dict) and any(
        isinstance(event.get(f), str) and len(event[f].encode("utf-8", "surrogatepass")) > n
        for f, n in BYTE_LIMITS.items())


@st.composite
def events(draw):
    """An event: mostly valid fields, each replaced by arbitrary JSON now and then."""
    good = {
        "ts": draw(st.floats(NOW - 3000, NOW)),
        "label": draw(st.sampled_from([0, 1, True, False])),
        "score": draw(st.floats(0, 1)),
        "weight": draw(st.sampled_from([1, 0.5, 2, 0, 1e12])),
        "id": draw(st.sampled_from(["a", "b", 7])),
        "country": draw(st.sampled_from(["de", "fr", "us", "br", "jp", "in", "mx"])),
    }
    for f in FIELDS:
        choice = draw(st.integers(0, 11))
        if choice == 0:
            good[f] = draw(JSON)
        elif choice == 1:
            del good[f]
        elif choice == 2 and f in BYTE_LIMITS:  # about its byte limit, in any script
            limit = BYTE_LIMITS[f]
            good[f] = draw(st.text(min_size=limit // 4 - 2, max_size=limit + 2))
    if draw(st.integers(0, 19)) == 0:
        return draw(JSON)  # not an object at all
    return good


def request(conn, method, path, body=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    return r.status, r.getheader("content-type", ""), data


def clock():
    """The servers' clock: fixed, so that the oracle stamps events without a time as
    the service does (their time of arrival) and knows where max_future ends."""
    return NOW


def stamped(batch, fields):
    b = events_to_batch(batch, fields)
    b.ts[:] = [NOW if t != t else t for t in b.ts.tolist()]
    return b


def valid(batch, fields):
    """Whether the service must take the batch: every event valid, no time beyond
    max_future, and nothing a metric refuses (log_loss: a score outside [0, 1])."""
    from streameval.monitor import Monitor

    if any(map(over_byte_limit, batch)):
        return False
    # orjson reads integers outside [-2**63, 2**64) as floats: such an id is refused
    if ORJSON and any(isinstance(e, dict) and type(e.get("id")) is int
                      and not -(2**63) <= e["id"] < 2**64 for e in batch):
        return False
    try:
        b = stamped(batch, fields)
        Monitor.from_config(CONFIG["monitor"]).validate(b.label, b.score, b.weight)
    except (EventError, ValueError):
        return False
    return not (len(b.ts) and (b.ts > NOW + 3600).any())


def json_body(status, ctype, data):
    assert ctype.startswith("application/json"), (status, ctype, data[:200])
    return json.loads(data)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(events(), min_size=1, max_size=6), min_size=1, max_size=6))
@example(batches=[  # at and over the byte limits
    [{"ts": NOW, "label": 1, "score": 0.5, "country": "é" * 128, "id": "i" * 1024}],
    [{"ts": NOW, "label": 1, "score": 0.5, "country": "é" * 129}],
    [{"ts": NOW, "label": 1, "score": 0.5, "id": "\ud800" * 342}],
])
@example(batches=[  # the reported wedge: a lone surrogate as the segment, then good events
    [{"ts": 1, "label": 1, "score": 0.5, "country": "\ud800"}],
    [{"ts": NOW, "label": 1, "score": 0.5, "country": "de", "weight": 1e308}],
    [{"ts": 1e12, "label": 1, "score": 0.5}],
    [{"ts": NOW, "label": 0, "score": -1, "country": "de"}],  # log_loss refuses it
    [{"ts": NOW, "label": 1, "score": 0.5, "country": "de", "id": "\udfff"}],
    [{"ts": NOW - 7200, "label": 0, "score": 0.25, "country": "fr"},
     {"ts": NOW, "label": 1, "score": 0.75, "country": "fr"},
     {"ts": NOW - 7200, "label": 1, "score": 0.5, "country": "fr"}],
])
def test_arbitrary_json_never_breaks_the_service(tmp_path_factory, batches):
    from streameval.monitor import Monitor

    state = tmp_path_factory.mktemp("state")
    accepted = []
    with BackgroundServer(CONFIG, port=0, state_dir=state, checkpoint_seconds=0,
                          checkpoint_every=0, clock=clock) as srv:
        fields = srv.engine.fields
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        for batch in batches:
            # json.dumps writes lone surrogates as \ud800 escapes: valid JSON, as a client sends
            body = json.dumps(batch).encode()
            # what the server reads: a JSON escaped surrogate pair decodes to one code
            # point (valid), a lone one stays lone (refused)
            batch = json.loads(body)
            status, ctype, data = request(conn, "POST", "/events", body)
            doc = json_body(status, ctype, data)
            assert status in (200, 400), (status, doc)
            assert (status == 200) == valid(batch, fields), (batch, doc)
            if status == 200:
                accepted.append(batch)
            else:
                assert doc["index"] is None or 0 <= doc["index"] < len(batch)
        status, ctype, data = request(conn, "GET", "/snapshot")
        assert status == 200
        served = json_body(status, ctype, data)
        status, ctype, data = request(conn, "GET", "/metrics")
        assert status == 200
        families = {f.name for f in text_string_to_metric_families(data.decode())}
        assert "streameval_metric" in families and "streameval_late_events" in families
        status, ctype, data = request(conn, "POST", "/checkpoint", b"{}")
        assert status == 200 and json_body(status, ctype, data)["failed"] is None
        status, ctype, data = request(conn, "GET", "/healthz")
        assert status == 200 and json_body(status, ctype, data)["status"] == "ok"
        conn.close()

    # the oracle: a Monitor (built from the config as the service builds it) fed the
    # acknowledged batches directly
    direct = load_config(CONFIG)[0]
    for batch in accepted:
        b = stamped(batch, fields)
        direct.update_many(b.label, b.score, w=b.weight, t=b.ts, segment=b.segment)
    expected = json.loads(json.dumps(snapshot_json(direct.snapshot())))
    served.pop("service")
    assert served == expected

    # a restart from the state directory serves the same state, and stays healthy
    with BackgroundServer(CONFIG, port=0, state_dir=state, checkpoint_seconds=0,
                          checkpoint_every=0, clock=clock) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        status, ctype, data = request(conn, "GET", "/snapshot")
        again = json_body(status, ctype, data)
        again.pop("service")
        assert again == expected
        status, ctype, data = request(conn, "GET", "/metrics")
        assert status == 200
        conn.close()
    assert not math.isnan(direct.n)
