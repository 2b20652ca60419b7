"""One set of rules for every format: JSONL, CSV, Parquet, stdin and HTTP.

The same rows, written in each format the way a producer would write them (JSON values
as they are, CSV cells as their text, Parquet columns typed where a column holds one
type and as text otherwise, HTTP as posted JSON), must give the same accepted rows, the
same rejected rows and the same counts. The oracle is the formats themselves, against
each other, and a hand-written reading of the documented rule (:func:`rule`) for the
values each accepted row carries.
"""

from __future__ import annotations

import csv
import http.client
import io
import json
import math
from urllib.parse import urlsplit

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from streameval.events import MISSING, EventError, FieldMap, build_batch, parse_event
from streameval.io.sources import EventSource

T0 = 1_700_000_000
FIELDS = ("ts", "label", "score", "weight")

_TEXT = st.text(alphabet=" 0123456789.eE+-truefalsnTRUEFALSNx", max_size=6)
VALUES = {
    "ts": st.one_of(st.integers(0, 50).map(lambda i: T0 + i),
                    st.integers(0, 50).map(lambda i: T0 + i + 0.5),
                    st.integers(0, 50).map(lambda i: f" {T0 + i} "),
                    st.sampled_from(["2023-11-14T22:13:20Z", "2023-11-14 22:13:20", "", "  ",
                                     None, MISSING, "abc", True, math.nan]),
                    _TEXT),
    "label": st.one_of(st.sampled_from([True, False, 1, 0, 1.0, 0.0, "1", "0", "true", "FALSE",
                                        " 1 ", "1.0", "0e0", "yes", 2, "", None, MISSING, 0.5,
                                        "nan"]),
                       _TEXT),
    "score": st.one_of(st.floats(0, 1), st.integers(0, 1),
                       st.sampled_from(["0.5", " 0.25 ", "1e-1", "x", "", None, MISSING, True,
                                        1.5, -0.1, math.nan, math.inf, "nan", "-inf", 1e308,
                                        "1_0"]),
                       _TEXT),
    "weight": st.one_of(st.sampled_from([MISSING, None, 1, 2.5, "2", " 3 ", "", "-1", -1, "x",
                                         0, True, 1e13, "1e12", math.nan]),
                        _TEXT),
}
#: values every format accepts, drawn as often as all the others together
GOOD = {
    "ts": st.one_of(st.integers(0, 50).map(lambda i: T0 + i),
                    st.integers(0, 50).map(lambda i: str(T0 + i))),
    "label": st.sampled_from([True, False, 1, 0, "1", "0", "true", "false"]),
    "score": st.one_of(st.floats(0, 1), st.floats(0, 1).map(repr)),
    "weight": st.sampled_from([MISSING, MISSING, 1, 0.5, "2"]),
}
ROWS = st.lists(st.fixed_dictionaries({k: st.one_of(GOOD[k], GOOD[k], VALUES[k]) for k in VALUES}),
                min_size=1, max_size=12)


def cell(v):
    """A value as a CSV producer writes it: its text; absent as an empty cell."""
    if v is MISSING or v is None:
        return ""
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def jsonl(rows):
    return "".join(json.dumps({k: v for k, v in r.items() if v is not MISSING}) + "\n"
                   for r in rows).encode()


def csv_bytes(rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(FIELDS)
    for r in rows:
        w.writerow([cell(r[k]) for k in FIELDS])
    return buf.getvalue().encode()


def parquet_bytes(rows):
    """Typed columns where every present value has one type (bool, int64, float64,
    string), text columns (the CSV cells) otherwise; absent values are nulls."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {}
    for k in FIELDS:
        vals = [None if r[k] is MISSING else r[k] for r in rows]
        types = {type(v) for v in vals if v is not None}
        if types == {bool}:
            arr = pa.array(vals, pa.bool_())
        elif types == {int} and all(-2**63 <= v < 2**63 for v in vals if v is not None):
            arr = pa.array(vals, pa.int64())
        elif types and types <= {int, float} and all(
                abs(v) < 2**53 for v in vals if type(v) is int):
            arr = pa.array([None if v is None else float(v) for v in vals], pa.float64())
        elif types == {str}:
            arr = pa.array(vals, pa.string())
        else:
            arr = pa.array([None if v is None else cell(v) for v in vals], pa.string())
        cols[k] = arr
    buf = io.BytesIO()
    pq.write_table(pa.table(cols), buf)
    return buf.getvalue()


def read(source, fmt=None):
    """(accepted lines, rejected lines, events as tuples) of a source read with skip."""
    rejected = []
    src = EventSource(source, FieldMap(), format=fmt, on_error="skip",
                      rejected=lambda line, reason, raw: rejected.append(line))
    b = src.read_all()
    events = list(zip(b.line.tolist(), b.label.tolist(), b.score.tolist(), b.ts.tolist(),
                      b.weights().tolist()))
    assert src.counts()["rows"] == len(events) + len(rejected)
    return [e[0] for e in events], sorted(rejected), events


def rule(r):
    """The documented rule, written out by hand: (label, score, ts, weight) or None."""
    def text(v):
        return v.strip() if isinstance(v, str) else v

    def absent(v):
        return v is MISSING or v is None or (isinstance(v, str) and not v.strip())

    def number(v):
        if absent(v) or isinstance(v, bool):
            return None
        try:
            x = float(text(v))
        except (TypeError, ValueError, OverflowError):
            return None
        return x if math.isfinite(x) else None

    lab = r["label"]
    if absent(lab):
        return None
    if isinstance(lab, str):
        key = lab.strip().lower()
        label = {"true": True, "false": False}.get(key)
        if label is None:
            x = number(key)
            label = {1.0: True, 0.0: False}.get(x)
    elif isinstance(lab, bool):
        label = lab
    else:
        label = {1.0: True, 0.0: False}.get(float(lab)) if lab == lab else None
    score = number(r["score"])
    ts = r["ts"]
    if absent(ts) or isinstance(ts, bool):
        t = None
    else:
        t = number(ts)
        if t is None and isinstance(ts, str):
            import datetime as dt

            try:
                d = dt.datetime.fromisoformat(ts.strip())
                t = d.replace(tzinfo=d.tzinfo or dt.timezone.utc).timestamp()
            except ValueError:
                t = None
    w = r["weight"]
    weight = 1.0 if absent(w) else number(w)
    if weight is not None and not 0 <= weight <= 1e12:
        weight = None
    if None in (label, score, t, weight):
        return None
    return label, score, t, weight


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=ROWS)
def test_files_and_stdin_accept_and_refuse_the_same_rows(rows):
    """JSONL, CSV, Parquet, and JSONL and CSV on a stream: the same accepted rows with
    the same values, the same rejected rows, the same counts, as the rule says."""
    pytest.importorskip("pyarrow")
    j = read(io.BytesIO(jsonl(rows)), "jsonl")
    c = read(io.BytesIO(csv_bytes(rows)), "csv")
    p = read(io.BytesIO(parquet_bytes(rows)), "parquet")
    s_j = read(io.BytesIO(jsonl(rows)))  # stdin-like: the format sniffed
    s_c = read(io.BytesIO(csv_bytes(rows)))
    # CSV line numbers count the header line
    c = ([x - 1 for x in c[0]], [x - 1 for x in c[1]], [(e[0] - 1,) + e[1:] for e in c[2]])
    s_c = ([x - 1 for x in s_c[0]], [x - 1 for x in s_c[1]],
           [(e[0] - 1,) + e[1:] for e in s_c[2]])
    assert j == c == p == s_j == s_c
    expected = [(i, *v) for i, r in enumerate(rows, 1) if (v := rule(r)) is not None]
    assert j[2] == expected


def test_the_rule_by_hand():
    """The choices, one by one: numbers as strings are numbers in every format,
    surrounding blanks are ignored, a blank string is absent, labels are true, false, 1
    or 0 (as JSON values or strings, any case), and every format's error says so in
    the same words."""
    ok = {"ts": f" {T0} ", "label": " TRUE ", "score": " 0.5 ", "weight": "2"}
    assert parse_event(ok) == parse_event({"ts": T0, "label": True, "score": 0.5, "weight": 2})
    assert parse_event({**ok, "weight": ""}).weight == 1.0
    assert parse_event({**ok, "label": "1.0"}).label is True
    for label in ("yes", 2, "2", 0.5):
        with pytest.raises(EventError) as ei:
            parse_event({**ok, "label": label})
        assert ei.value.reason == f"unknown label {label!r} (expected one of true, false, 1 or 0)"
        cols = {"ts": [str(T0)], "label": [str(label)], "score": ["0.5"]}
        _, errors = build_batch(cols, np.array([1]), FieldMap(), text=True)
        assert errors == [(0, f"unknown label {str(label)!r} (expected one of true, false, 1 or 0)")]
    with pytest.raises(EventError, match="^event: score is not a number: 'x'$"):
        parse_event({**ok, "score": "x"})
    _, errors = build_batch({"ts": [str(T0)], "label": ["1"], "score": ["x"]}, np.array([1]),
                            FieldMap(), text=True)
    assert errors == [(0, "score is not a number: 'x'")]


# ------------------------------------------------------------------- HTTP, in process


pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


def _post(url, events):
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request("POST", "/events", body=json.dumps(events).encode(),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


@pytest.fixture(scope="module")
def service():
    from streameval.service import BackgroundServer

    # metrics that add no check of their own: what the service accepts is the rule's
    srv = BackgroundServer({"monitor": {"every": 0, "metrics": {"roc_auc": "roc_auc"}}}).start()
    yield srv
    srv.stop()


@settings(max_examples=25, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rows=ROWS)
def test_http_accepts_and_refuses_the_rows_a_file_does(service, rows):
    """Each row posted alone to the service over a real socket: accepted (200) exactly
    when a JSONL file's reading accepts it, refused (400) with the same reason; the
    service counts the accepted ones."""
    accepted, rejected, _ = read(io.BytesIO(jsonl(rows)), "jsonl")
    reasons = {}
    src = EventSource(io.BytesIO(jsonl(rows)), format="jsonl", on_error="skip",
                      rejected=lambda line, reason, raw: reasons.setdefault(line, reason))
    src.read_all()
    n0 = service.engine.monitor.n
    got_ok, got_bad = [], []
    for i, r in enumerate(rows, 1):
        status, body = _post(service.url, [{k: v for k, v in r.items() if v is not MISSING}])
        if status == 200:
            got_ok.append(i)
        else:
            assert status == 400, body
            got_bad.append(i)
            assert body["reason"] == reasons[i], (r, body)
    assert (got_ok, got_bad) == (accepted, rejected)
    assert service.engine.monitor.n - n0 == len(accepted)
