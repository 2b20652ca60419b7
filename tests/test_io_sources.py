"""Log sources: JSONL, CSV, Parquet, stdin, in real files.

Oracles: each file is written with the standard writer of its format
(json.dumps, csv.writer, pyarrow) and read back independently (json.loads
loop, csv.reader, pyarrow's to_pylist); expected values are converted by
straightforward code in this file.
"""

import calendar
import csv
import gzip
import io
import json
import math
import random
import subprocess
import sys
import time

import numpy as np
import pytest

from streameval.events import EventError, FieldMap
from streameval.io.sources import EventSource, detect_format, read_events

try:  # Parquet is an optional extra: only its tests need pyarrow
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # pragma: no cover
    pa = pq = None

needs_pyarrow = pytest.mark.skipif(pa is None, reason="pyarrow not installed (streameval[parquet])")


def random_rows(n, seed=0, iso=False):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        ts = 1_700_000_000 + i * 0.5
        row = {"id": f"e{i}", "ts": ts, "label": rng.random() < 0.3, "score": rng.random(),
               "seg": rng.choice(["a", "b", "c"])}
        if iso:
            row["ts"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(ts)))
        if rng.random() < 0.2:
            row["weight"] = rng.choice([0.5, 2.0, 3])
        rows.append(row)
    return rows


def write_jsonl(path, rows, blank_every=None):
    with open(path, "w") as f:
        for i, r in enumerate(rows):
            if blank_every and i % blank_every == 0:
                f.write("\n")
            f.write(r if isinstance(r, str) else json.dumps(r))
            f.write("\n")


def oracle_jsonl(path, fields=FieldMap(segment="seg")):
    """(line, label, score, ts, weight, id, seg) of every row, from a json.loads loop."""
    out = []
    with open(path) as f:
        for k, text in enumerate(f, 1):
            if not text.strip():
                continue
            o = json.loads(text)
            out.append((k, bool(o[fields.label]), float(o[fields.score]), float(o[fields.ts]),
                        float(o.get("weight", 1.0)), o.get("id"), o.get("seg")))
    return out


def flatten(src):
    rows = []
    for b in src:
        n = len(b)
        ids = b.id or [None] * n
        segs = b.segment or [None] * n
        rows.extend(zip(b.line.tolist(), b.label.tolist(), b.score.tolist(), b.ts.tolist(),
                        b.weight.tolist(), ids, segs))
    return rows


# ------------------------------------------------------------------ format detection


def test_detect_format():
    assert [detect_format(p) for p in ["a.jsonl", "a.NDJSON", "a.json", "a.csv", "a.csv.gz",
                                       "a.parquet", "a.jsonl.gz"]] == [
        "jsonl", "jsonl", "jsonl", "csv", "csv", "parquet", "jsonl"]
    with pytest.raises(ValueError, match="pass format="):
        detect_format("events.txt")


# ------------------------------------------------------------------ JSONL


@pytest.mark.parametrize("batch_size", [1, 7, 1000])
def test_jsonl_matches_json_loads_oracle(tmp_path, batch_size):
    p = tmp_path / "log.jsonl"
    write_jsonl(p, random_rows(300), blank_every=50)  # blank lines shift line numbers
    src = EventSource(p, FieldMap(segment="seg"), batch_size=batch_size)
    got = flatten(src)
    assert got == oracle_jsonl(p)
    assert src.n_events == src.n_rows == 300 and src.n_rejected == 0
    assert src.position == 306
    assert all(len(b) <= batch_size for b in src)


def test_jsonl_types(tmp_path):
    p = tmp_path / "log.jsonl"
    write_jsonl(p, random_rows(10))
    (b,) = list(EventSource(p, FieldMap(segment="seg")))
    assert (b.label.dtype, b.score.dtype, b.ts.dtype, b.weight.dtype, b.line.dtype) == (
        np.bool_, np.float64, np.float64, np.float64, np.int64)
    assert isinstance(b.id, list) and isinstance(b.segment, list)


def test_jsonl_iso_times(tmp_path):
    p = tmp_path / "log.jsonl"
    rows = random_rows(20, iso=True)
    write_jsonl(p, rows)
    b = EventSource(p).read_all()
    expected = [calendar.timegm(time.strptime(r["ts"], "%Y-%m-%dT%H:%M:%SZ")) for r in rows]
    assert b.ts.tolist() == expected


def bad_file(tmp_path):
    rows = [json.dumps(r) for r in random_rows(20)]
    rows[3] = '{"ts": 1, "label": true, "score": 0.5'               # line 4
    rows[8] = '{"ts": 1, "score": 0.5}'                             # line 9
    rows[11] = '{"ts": 1, "label": "maybe", "score": 0.5}'          # line 12
    rows[2] = '{"ts": "2024-13-45", "label": 1, "score": 0.5}'      # line 3
    rows[16] = json.dumps({"ts": 1, "label": 1, "score": math.nan})  # line 17, NaN
    rows[18] = '[1, 2]'                                             # line 19
    p = tmp_path / "bad.jsonl"
    write_jsonl(p, rows)
    return p


EXPECTED_REJECTS = [
    (3, "unparseable time '2024-13-45'"),
    (4, "bad JSON: Expecting ',' delimiter (column 38)"),  # the line is 37 characters long
    (9, "missing field 'label'"),
    (12, "unknown label 'maybe' (expected one of true, false, 1 or 0)"),
    (17, "score is NaN"),
    (19, "not a JSON object: '[1, 2]'"),
]


@pytest.mark.parametrize("batch_size", [5, 100])
def test_jsonl_fail_names_first_bad_line(tmp_path, batch_size):
    p = bad_file(tmp_path)
    src = EventSource(p, batch_size=batch_size)
    seen = []
    with pytest.raises(EventError) as ei:
        for b in src:
            seen.extend(b.line.tolist())
    assert str(ei.value) == "line 3: unparseable time '2024-13-45'"
    assert ei.value.line == 3 and ei.value.reason == "unparseable time '2024-13-45'"
    assert ei.value.raw == '{"ts": "2024-13-45", "label": 1, "score": 0.5}'
    assert all(line < 3 for line in seen)  # nothing from the bad batch was yielded


def test_jsonl_fail_messages_each_kind(tmp_path):
    for line, reason in EXPECTED_REJECTS:
        rows = [json.dumps(r) for r in random_rows(line)]
        rows[-1] = open(bad_file(tmp_path)).read().splitlines()[line - 1]
        p = tmp_path / f"one{line}.jsonl"
        write_jsonl(p, rows)
        with pytest.raises(EventError) as ei:
            list(EventSource(p))
        assert str(ei.value) == f"line {line}: {reason}"


@pytest.mark.parametrize("batch_size", [3, 100])
def test_jsonl_skip_reports_every_bad_row(tmp_path, batch_size):
    p = bad_file(tmp_path)
    rejected = []
    src = EventSource(p, on_error="skip", batch_size=batch_size,
                      rejected=lambda line, reason, raw: rejected.append((line, reason, raw)))
    got = flatten(src)
    assert [(line, reason) for line, reason, _ in rejected] == EXPECTED_REJECTS
    raw_lines = open(p).read().splitlines()
    assert [raw for _, _, raw in rejected] == [raw_lines[line - 1] for line, _ in EXPECTED_REJECTS]
    bad = {line for line, _ in EXPECTED_REJECTS}
    expected = [r for r in random_rows(20) if True]
    assert [g[0] for g in got] == [k for k in range(1, 21) if k not in bad]
    assert [g[2] for g in got] == [expected[k - 1]["score"] for k in range(1, 21) if k not in bad]
    assert src.n_rejected == 6 and src.n_events == 14 and src.n_rows == 20


def test_skip_without_callback_logs_and_counts(tmp_path, caplog):
    p = bad_file(tmp_path)
    src = EventSource(p, on_error="skip")
    with caplog.at_level("WARNING", logger="streameval.io"):
        n = sum(len(b) for b in src)
    assert n == 14 and src.n_rejected == 6
    assert "rejected line 17: score is NaN" in caplog.text


def test_jsonl_bom_gzip_and_resume(tmp_path):
    rows = random_rows(40)
    text = "\ufeff" + "".join(json.dumps(r) + "\n" for r in rows)
    p = tmp_path / "log.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write(text)
    b = EventSource(p, batch_size=16).read_all()
    assert b.score.tolist() == [r["score"] for r in rows]
    # resume after line 25: only lines 26.. are read
    src = EventSource(p, batch_size=16, resume_after=25)
    b = src.read_all()
    assert b.line.tolist() == list(range(26, 41))
    assert b.score.tolist() == [r["score"] for r in rows[25:]]
    assert src.position == 40


def test_jsonl_custom_fields_and_labels(tmp_path):
    p = tmp_path / "log.ndjson"
    rows = [{"when": "2024-01-01T00:00:00+01:00", "y": "spam", "p": 0.9, "w": 2},
            {"when": 1704067200, "y": "ham", "p": 0.1}]
    write_jsonl(p, rows)
    fm = FieldMap(ts="when", label="y", score="p", weight="w", pos_label="spam", neg_label="ham")
    b = EventSource(p, fm).read_all()
    assert b.label.tolist() == [True, False]
    assert b.ts.tolist() == [1704063600.0, 1704067200.0]
    assert b.weight.tolist() == [2.0, 1.0] and b.id is None


def test_large_log_read_in_batches_equals_its_rows(tmp_path):
    """200 000 JSONL rows through the batched fast path (speed: benchmarks/bench_replay.py)."""
    p = tmp_path / "big.jsonl"
    rng = np.random.default_rng(1)
    scores = rng.random(200_000)
    labels = rng.random(200_000) < 0.3
    with open(p, "w") as f:
        f.writelines(f'{{"id": "e{i}", "ts": {1.7e9 + i}, "label": {"true" if y else "false"}, '
                     f'"score": {s!r}}}\n' for i, (s, y) in enumerate(zip(scores.tolist(), labels.tolist())))
    b = EventSource(p).read_all()
    assert np.array_equal(b.score, scores) and np.array_equal(b.label, labels)
    assert b.line.tolist() == list(range(1, 200_001))


# ------------------------------------------------------------------ CSV


def write_csv(path, header, rows, **kw):
    with open(path, "w", newline="", **kw) as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


@pytest.mark.parametrize("batch_size", [4, 1000])
def test_csv_matches_csv_reader_oracle(tmp_path, batch_size):
    rows = random_rows(100)
    header = ["id", "ts", "label", "score", "seg", "weight"]
    cells = [[r["id"], repr(r["ts"]), random.Random(i).choice(["1", "true", "TRUE"]) if r["label"]
              else random.Random(i).choice(["0", "false", "False"]), repr(r["score"]), r["seg"],
              r.get("weight", "")] for i, r in enumerate(rows)]
    p = tmp_path / "log.csv"
    write_csv(p, header, cells)
    src = EventSource(p, FieldMap(segment="seg"), batch_size=batch_size)
    got = flatten(src)
    expected = []
    with open(p, newline="") as f:
        reader = csv.reader(f)
        next(reader)
        for c in reader:
            d = dict(zip(header, c))
            expected.append((reader.line_num, d["label"].lower() in ("1", "true"),
                             float(d["score"]), float(d["ts"]),
                             float(d["weight"]) if d["weight"] else 1.0, d["id"], d["seg"]))
    assert got == expected and src.n_events == 100


def test_csv_multiline_fields_blank_lines_and_bad_rows(tmp_path):
    p = tmp_path / "log.csv"
    text = ("ts,label,score,note\r\n"                      # 1
            "1,1,0.9,plain\r\n"                            # 2
            '2,0,0.1,"two\r\nlines"\r\n'                   # 3-4
            "\r\n"                                         # 5 (blank)
            "3,1,0.8,x,extra\r\n"                          # 6 wrong count
            '4,0,nan,"a\nb\nc"\r\n'                        # 7-9, NaN score
            "5,true,0.7,ok\r\n"                            # 10
            "2024-01-01T00:00:00Z,false,0.2,\r\n")         # 11
    p.write_text(text, newline="")
    rejected = []
    for bs in (1, 2, 100):
        rejected.clear()
        src = EventSource(p, batch_size=bs, on_error="skip",
                          rejected=lambda *r: rejected.append(r))
        b = src.read_all()
        assert b.line.tolist() == [2, 3, 10, 11]
        assert b.ts.tolist() == [1, 2, 5, 1704067200.0]
        assert b.label.tolist() == [True, False, True, False]
        assert rejected == [(6, "expected 4 fields, got 5", "3,1,0.8,x,extra"),
                            (7, "score is NaN", '4,0,nan,"a\nb\nc"')]
        assert src.position == 11 and src.n_rows == 6
    with pytest.raises(EventError, match=r"^line 6: expected 4 fields, got 5$"):
        list(EventSource(p))


def test_csv_header_errors_and_bom(tmp_path):
    p = tmp_path / "log.csv"
    write_csv(p, ["ts", "label", "prob"], [["1", "1", "0.5"]])
    with pytest.raises(EventError, match=r"^line 1: no column 'score' in the CSV header "
                                         r"\(columns: ts, label, prob\)$"):
        list(EventSource(p, on_error="skip"))
    write_csv(p, ["ts", "label", "score"], [["1", "1", "0.5"], ["", "0", "0.25"]],
              encoding="utf-8-sig")
    with pytest.raises(EventError, match=r"^line 3: missing field 'ts'$"):
        list(EventSource(p))
    b = EventSource(p, FieldMap(require_ts=False)).read_all()
    assert b.ts[0] == 1.0 and math.isnan(b.ts[1]) and b.score.tolist() == [0.5, 0.25]


def test_csv_custom_labels_and_empty_optional_cells(tmp_path):
    p = tmp_path / "log.csv"
    write_csv(p, ["t", "y", "p", "id", "w"],
              [["1", "spam", "0.9", "", "2"], ["2", "ham", "0.2", "k", ""]])
    fm = FieldMap(ts="t", label="y", score="p", weight="w", pos_label="spam", neg_label="ham")
    b = EventSource(p, fm).read_all()
    assert b.label.tolist() == [True, False] and b.weight.tolist() == [2.0, 1.0]
    assert b.id == [None, "k"]


# ------------------------------------------------------------------ Parquet


@needs_pyarrow
def test_parquet_matches_pyarrow_oracle(tmp_path):
    rows = random_rows(250)
    for r in rows:
        r.setdefault("weight", None)
    table = pa.Table.from_pylist(rows)
    p = tmp_path / "log.parquet"
    pq.write_table(table, p, row_group_size=64)
    src = EventSource(p, FieldMap(segment="seg"), batch_size=50)
    got = flatten(src)
    expected = [(i + 1, bool(r["label"]), r["score"], r["ts"],
                 1.0 if r["weight"] is None else float(r["weight"]), r["id"], r["seg"])
                for i, r in enumerate(pq.read_table(p).to_pylist())]
    assert got == expected and src.position == 250


@needs_pyarrow
def test_parquet_timestamps_strings_nulls_and_errors(tmp_path):
    ts = pa.array([1_700_000_000_000_000, 1_700_000_001_500_000, None, 1_700_000_003_000_000],
                  pa.timestamp("us", tz="UTC"))
    table = pa.table({"ts": ts, "label": pa.array(["spam", "ham", "spam", "eggs"]),
                      "score": pa.array([0.5, 0.25, 0.75, 1.0])})
    p = tmp_path / "log.parquet"
    pq.write_table(table, p)
    fm = FieldMap(pos_label="spam", neg_label="ham")
    rejected = []
    b = EventSource(p, fm, on_error="skip", rejected=lambda *r: rejected.append(r)).read_all()
    assert b.ts.tolist() == [1_700_000_000.0, 1_700_000_001.5]
    assert b.label.tolist() == [True, False] and b.line.tolist() == [1, 2]
    assert [(r[0], r[1]) for r in rejected] == [
        (3, "ts is null"), (4, "unknown label 'eggs' (expected one of 'spam'/'ham')")]
    assert rejected[1][2]["label"] == "eggs"
    # naive timestamps are UTC
    table = pa.table({"ts": pa.array([0, 86_400_000], pa.timestamp("ms")),
                      "label": [True, False], "score": [0.1, 0.2]})
    pq.write_table(table, p)
    assert EventSource(p).read_all().ts.tolist() == [0.0, 86400.0]
    table = pa.table({"label": [True], "score": [0.1]})
    pq.write_table(table, p)
    with pytest.raises(EventError, match="no column 'ts' in the Parquet file"):
        list(EventSource(p))


def test_parquet_without_pyarrow_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r"pip install streameval\[parquet\]"):
        EventSource(tmp_path / "x.parquet")


# ------------------------------------------------------------------ streams and stdin


def test_binary_stream_sniffs_format():
    rows = random_rows(5)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    src = read_events(io.BytesIO(data))
    assert src.format == "jsonl"
    assert src.read_all().score.tolist() == [r["score"] for r in rows]
    buf = io.BytesIO(b"ts,label,score\n1,1,0.5\n2,0,0.25\n")
    src = read_events(buf)
    assert src.format == "csv" and src.read_all().score.tolist() == [0.5, 0.25]
    assert not buf.closed  # the caller's stream stays open


@pytest.mark.parametrize("fmt,data", [
    ("jsonl", '{"ts": 1, "label": 1, "score": 0.5}\n{"ts": 2, "label": 0, "score": 0.25}\n'),
    ("csv", "ts,label,score\n1,1,0.5\n2,0,0.25\n"),
])
def test_stdin_in_a_real_process(fmt, data):
    code = ("from streameval.io.sources import EventSource\n"
            "s = EventSource('-')\n"
            "b = s.read_all()\n"
            "print(s.format, b.score.tolist(), b.line.tolist())\n")
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True,
                         text=True, timeout=60, check=True)
    expected_lines = [1, 2] if fmt == "jsonl" else [2, 3]
    assert out.stdout.strip() == f"{fmt} [0.5, 0.25] {expected_lines}"


def test_bad_options(tmp_path):
    with pytest.raises(ValueError, match="on_error"):
        EventSource(tmp_path / "a.jsonl", on_error="ignore")
    with pytest.raises(ValueError, match="batch_size"):
        EventSource(tmp_path / "a.jsonl", batch_size=0)
    with pytest.raises(ValueError, match="unknown format"):
        EventSource(tmp_path / "a.jsonl", format="xml")


def test_same_results_without_orjson(tmp_path, monkeypatch):
    import streameval.io.sources as sources

    p = bad_file(tmp_path)

    def run():
        rejected = []
        got = flatten(EventSource(p, on_error="skip", batch_size=4,
                                  rejected=lambda *r: rejected.append(r)))
        return got, rejected

    with_orjson = run()
    monkeypatch.setattr(sources, "_loads", json.loads)
    assert run() == with_orjson


@needs_pyarrow
@pytest.mark.parametrize("typ, unit", [(pa and pa.date32(), 86_400), (pa and pa.date64(), 86_400),
                                       (pa and pa.timestamp("ns"), 1)])
def test_parquet_time_column_with_a_null_keeps_its_other_rows(tmp_path, typ, unit):
    """A null in a date or timestamp column refuses that row only ("ts is null"); the
    other rows keep their time (epoch seconds of the date at midnight UTC)."""
    import datetime as dt

    days = [dt.date(2024, 1, 1), None, dt.date(2024, 1, 3)]
    if unit == 1:
        values = [None if d is None else dt.datetime(d.year, d.month, d.day) for d in days]
    else:
        values = days
    table = pa.table({"ts": pa.array(values, typ), "label": [True, False, True],
                      "score": [0.9, 0.1, 0.3]})
    p = tmp_path / "log.parquet"
    pq.write_table(table, p)
    rejected = []
    b = EventSource(p, on_error="skip", rejected=lambda *r: rejected.append(r)).read_all()
    day0 = (dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
            - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)).total_seconds()
    assert b.ts.tolist() == [day0, day0 + 2 * 86_400]
    assert b.line.tolist() == [1, 3]
    assert [(r[0], r[1]) for r in rejected] == [(2, "ts is null")]


# ------------------------------------------------------------- bounded line reading

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

_piece = st.sampled_from([b"", b"\r", b"abc", b"  ", b"x" * 25, b'{"a": 1}', b"\xef\xbb\xbf"])


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (set each time)
@given(pieces=st.lists(_piece, max_size=40), end=st.booleans(), limit=st.integers(1, 30),
       chunk=st.integers(1, 64), take=st.integers(1, 5))
def test_line_reader_matches_splitting_the_whole_file(monkeypatch, pieces, end, limit, chunk,
                                                      take):
    """Brute force: the file split on ``\\n`` at once. Whatever the size of the pieces
    read, LineReader gives every non-blank line with its number, an over-long line as
    (number, size), and at each block the byte offset just after its last line."""
    import streameval.io.sources as S

    monkeypatch.setattr(S, "READ_CHUNK", chunk)
    data = b"\n".join(pieces) + (b"\n" if end else b"")
    phys = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        phys = phys[:-1]
    if phys and phys[0].startswith(b"\xef\xbb\xbf"):  # a BOM at the very start is dropped
        bom = True
        phys[0] = phys[0][3:]
    else:
        bom = False
    reader = S.LineReader(io.BytesIO(data), limit)
    got, got_long = [], []
    while True:
        lines, nums, long, last, offset = reader.take(take)
        if not lines and not long:
            break
        expected_offset = sum(len(p) + 1 for p in phys[:last]) + 3 * bom
        if last == len(phys) and not data.endswith(b"\n"):
            expected_offset -= 1
        assert offset == expected_offset
        got += list(zip(nums, lines))
        got_long += [(n, size) for n, size, _ in long]
    want = [(i, p) for i, p in enumerate(phys, 1) if p not in (b"", b"\r") and len(p) <= limit]
    want_long = [(i, len(p)) for i, p in enumerate(phys, 1) if len(p) > limit]
    assert got == want and sorted(got_long) == want_long
