"""The Pipeline on its own, with real files: replay = a Monitor fed directly, stop and
resume from a checkpoint byte for byte, the delayed-label join, one test per reader."""

from __future__ import annotations

import io
import json
import tomllib

import numpy as np
import pytest
from sklearn.metrics import recall_score, roc_auc_score

from streameval.events import EventError, FieldMap
from streameval.io.delayed import DelayedSource
from streameval.io.sinks import dumps
from streameval.io.sources import (
    CsvReader,
    EventSource,
    JsonlReader,
    ParquetReader,
    StdinReader,
)
from streameval.monitor import Monitor
from streameval.pipeline import Pipeline

CONFIG = tomllib.loads("""
every = 500
[metrics]
roc_auc = "roc_auc"
"recall@1000" = { metric = "recall", size = 1000 }

[[rules]]
name = "recall_low"
metric = "recall@1000"
op = "<"
value = 0.62
""")


def _monitor():
    return Monitor.from_config(CONFIG)


def _events(n, seed=0):
    """Seeded events whose quality drops in the middle (the recall rule fires, then resolves)."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = np.round(1 / (1 + np.exp(-(2.0 * (y - 0.5) + rng.standard_normal(n)))), 2)  # ties
    mid = slice(n // 3, n // 2)
    s[mid] = np.round(s[mid] * 0.6, 2)
    ts = 1_700_000_000 + np.arange(n) * 0.5
    return [{"ts": float(t), "label": bool(a), "score": float(b)} for t, a, b in zip(ts, y, s)]


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _run(log, out, **kwargs):
    out.mkdir(exist_ok=True)
    p = Pipeline(_monitor(), EventSource(log, batch_size=kwargs.pop("batch_size", 1000)),
                 outputs={"metrics": out / "metrics.jsonl", "alerts": out / "alerts.jsonl"},
                 **kwargs)
    return p, p.run()


def _rows(path):
    return [json.loads(x) for x in open(path)]


def test_replay_equals_a_monitor_fed_directly(tmp_path):
    rows = _events(6_000, seed=1)
    log = _write(tmp_path / "log.jsonl", rows)
    p, counts = _run(log, tmp_path / "out")
    assert counts == {"rows": 6_000, "events": 6_000, "rejected": 0, "expired": 0,
                      "orphans": 0, "unlabeled": 0, "future": 0, "other_events": 0,
                      "missing_segment_fields": {}, "warnings": []}

    direct, metrics, alerts = _monitor(), [], []
    direct.on_metrics.append(metrics.append)
    direct.on_alert.append(alerts.append)
    direct.update_many([r["label"] for r in rows], [r["score"] for r in rows],
                       t=[r["ts"] for r in rows])
    direct.flush()
    assert _rows(tmp_path / "out/metrics.jsonl") == [json.loads(dumps(r)) for r in metrics]
    assert _rows(tmp_path / "out/alerts.jsonl") == [json.loads(dumps(a)) for a in alerts]
    assert [a["state"] for a in alerts][:2] == ["firing", "resolved"] or \
        [a["state"] for a in alerts][:3] == ["pending", "firing", "resolved"]
    # independent oracles: sklearn on the whole log and on the last 1 000 events
    final = _rows(tmp_path / "out/metrics.jsonl")[-1]["values"]
    y, s = [r["label"] for r in rows], [r["score"] for r in rows]
    assert final["roc_auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert final["recall@1000"] == pytest.approx(
        recall_score(y[-1000:], [v >= 0.5 for v in s[-1000:]]), abs=1e-12)


@pytest.mark.parametrize("how", ["return", "raise"])
@pytest.mark.parametrize("stop", [700, 2_600, 5_999])
def test_stopped_and_resumed_run_is_byte_identical(tmp_path, how, stop):
    lines = [json.dumps(r) for r in _events(6_000, seed=2)]
    lines.insert(1234, '{"ts": 1, "label": 1, "score": NaN}')  # a bad row, set aside
    log = _write(tmp_path / "log.jsonl", lines)

    def run(out, on_batch=None):
        out.mkdir(exist_ok=True)
        src = EventSource(log, batch_size=800, on_error="skip")
        p = Pipeline(_monitor(), src, outputs={n: out / f"{n}.jsonl" for n in
                                              ("metrics", "alerts", "rejected")},
                     checkpoint=out / "ckpt.json", checkpoint_every=1_000, on_batch=on_batch)
        return p, p.run()

    ref, ref_counts = run(tmp_path / "ref")

    def kill(p, batch):
        if p.monitor.n >= stop:
            if how == "raise":
                raise KeyboardInterrupt
            return False

    out = tmp_path / "out"
    if how == "raise":
        with pytest.raises(KeyboardInterrupt):
            run(out, kill)
    else:
        p, _ = run(out, kill)
        assert p.stopped and not p.done
    p, counts = run(out)
    assert p.resumed is (stop >= 1_000)
    assert p.done and counts == ref_counts
    assert counts["rejected"] == 1 and counts["rows"] == 6_001
    for name in ("metrics.jsonl", "alerts.jsonl", "rejected.jsonl"):
        assert (out / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
    assert [(r["line"], r["reason"]) for r in _rows(out / "rejected.jsonl")] == [
        (1235, "score is NaN")]
    # a finished checkpoint: a third run reads on from the end (nothing new), flushes
    # again and changes nothing
    p, again = run(out)
    assert p.resumed and again == ref_counts
    assert (out / "metrics.jsonl").read_bytes() == (tmp_path / "ref/metrics.jsonl").read_bytes()


def test_finished_checkpoint_goes_on_in_a_log_that_grew(tmp_path):
    """The final checkpoint is the state before the flush: a run on the grown log reads
    the new rows only and gives the outputs of one run over the whole log."""
    lines = [json.dumps(r) for r in _events(5_000, seed=5)]

    def run(log, out):
        out.mkdir(exist_ok=True)
        p = Pipeline(_monitor(), EventSource(log, batch_size=700),
                     outputs={n: out / f"{n}.jsonl" for n in ("metrics", "alerts")},
                     checkpoint=out / "ckpt.json", checkpoint_every=1_000)
        return p, p.run()

    log = _write(tmp_path / "log.jsonl", lines[:3_100])
    run(log, tmp_path / "out")
    with open(log, "a") as f:
        f.write("".join(x + "\n" for x in lines[3_100:]))
    p, counts = run(log, tmp_path / "out")
    assert p.resumed and counts["events"] == counts["rows"] == 5_000
    assert p.source.n_rows == 1_900  # the appended rows only
    _, ref_counts = run(_write(tmp_path / "whole.jsonl", lines), tmp_path / "ref")
    assert counts == ref_counts
    for name in ("metrics.jsonl", "alerts.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()


def test_delayed_label_join_through_the_pipeline(tmp_path):
    """Labels 5..100 s after their prediction are joined; labels 1 000+ s late come after
    the prediction expired (label_ttl 300 s): expired predictions, orphan labels."""
    rng = np.random.default_rng(3)
    n = 3_000
    y = rng.random(n) < 0.3
    s = np.round(rng.random(n) * 0.6 + 0.3 * y, 3)
    late = rng.random(n) < 0.1
    delay = np.where(late, rng.uniform(1_000, 2_000, n), rng.uniform(5, 100, n))
    rows = [(float(i), 0, {"ts": float(i), "id": f"p{i}", "score": float(s[i])}) for i in range(n)]
    rows += [(i + delay[i], 1, {"ts": float(i + delay[i]), "id": f"p{i}", "label": bool(y[i])})
             for i in range(n)]
    rows.sort(key=lambda r: (r[0], r[1]))
    log = _write(tmp_path / "log.jsonl", [r[2] for r in rows])
    src = DelayedSource(log, FieldMap(id="id"), label_ttl=300, batch_size=500)
    p = Pipeline(_monitor(), src, outputs={"metrics": tmp_path / "metrics.jsonl"})
    counts = p.run()
    joined = ~late
    assert counts["events"] == int(joined.sum())
    assert counts["rows"] == 2 * n
    assert counts["expired"] == int(late.sum())  # the log ends 1 000+ s after the last one
    assert counts["orphans"] == int(late.sum()) and counts["unlabeled"] == 0
    final = _rows(tmp_path / "metrics.jsonl")[-1]["values"]
    assert final["roc_auc"] == pytest.approx(roc_auc_score(y[joined], s[joined]), abs=1e-12)


def test_feed_without_a_source(tmp_path):
    """The service's use: batches through feed(); weights all 1 and unknown times are
    the same as none."""
    rows = _events(1_500, seed=4)
    m = _monitor()
    p = Pipeline(m)
    src = EventSource(_write(tmp_path / "log.jsonl", rows), batch_size=400)
    for b in src:
        p.feed(b)
    y, s = [r["label"] for r in rows], [r["score"] for r in rows]
    assert p.monitor.n == 1_500 and p.counts()["events"] == 1_500
    assert m.snapshot()["segments"][None]["values"]["roc_auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    with pytest.raises(ValueError, match="no source"):
        p.run()


# ---------------------------------------------------------------------- readers


def _read(reader, skip=0):
    return [c for c in reader.chunks(skip)]


def test_jsonl_reader_columns_lines_and_a_bad_line(tmp_path):
    rows = [{"ts": i, "label": i % 2, "score": i / 10} for i in range(7)]
    lines = [json.dumps(r) for r in rows]
    lines.insert(3, "")  # blank: skipped, still counted
    lines.insert(5, '{"ts": 9, "label": 1,')  # bad JSON on line 6
    log = _write(tmp_path / "log.jsonl", lines)
    (chunk,) = _read(JsonlReader(str(log), FieldMap(), batch_size=100))
    assert chunk.lines.tolist() == [1, 2, 3, 5, 7, 8, 9]
    assert chunk.columns["score"] == [r["score"] for r in rows]
    assert [(line, reason.split(":")[0]) for line, reason, _ in chunk.rejects] == [(6, "bad JSON")]
    # the fast path (well-formed rows) gives the same columns; a field no row has is left out
    (fast,) = _read(JsonlReader(str(_write(tmp_path / "ok.jsonl", rows)), FieldMap(), batch_size=100))
    assert fast.columns == {k: [r[k] for r in rows] for k in ("ts", "label", "score")}
    with pytest.raises(EventError, match="line 6: bad JSON"):
        list(EventSource(log))
    # resume after line 6
    (tail,) = _read(JsonlReader(str(log), FieldMap(), batch_size=100), skip=6)
    assert tail.lines.tolist() == [7, 8, 9] and tail.rejects == []


def test_jsonl_rows_lacking_a_field_take_the_row_path(tmp_path):
    """A field some rows have and the first lacks (also spelled with a \\u escape) is
    read per row: missing where absent, its value where present."""
    lines = ['{"ts": 1, "label": 1, "score": 0.5}',
             '{"ts": 2, "label": 0, "score": 0.25, "weight": 2}',
             '{"ts": 3, "label": 0, "score": 0.75, "w\\u0065ight": 3}']
    b = EventSource(_write(tmp_path / "log.jsonl", lines), FieldMap(weight="weight")).read_all()
    assert b.weight.tolist() == [1.0, 2.0, 3.0]
    assert b.score.tolist() == [0.5, 0.25, 0.75]


def test_csv_reader_and_a_bad_row_line(tmp_path):
    text = 'ts,label,score\n1,1,0.9\n2,0,"0.4"\n3,0\n4,1,0.7\n'
    log = tmp_path / "log.csv"
    log.write_text(text)
    (chunk,) = _read(CsvReader(str(log), FieldMap(), batch_size=10))
    assert chunk.lines.tolist() == [2, 3, 5]
    assert chunk.columns == {"ts": ["1", "2", "4"], "label": ["1", "0", "1"],
                             "score": ["0.9", "0.4", "0.7"]}
    assert chunk.rejects == [(4, "expected 3 fields, got 2", "3,0")]
    with pytest.raises(EventError, match="line 4: expected 3 fields"):
        list(EventSource(log))
    log.write_text('ts,label,score\n1,1,0.9\n2,maybe,0.4\n')
    with pytest.raises(EventError, match="line 3: .*label"):
        list(EventSource(log))


def test_parquet_reader_rows_and_a_bad_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "log.parquet"
    table = pa.table({"ts": [1.0, 2.0, 3.0, 4.0], "label": [True, False, True, False],
                      "score": [0.9, 0.2, float("nan"), 0.4]})
    pq.write_table(table, path)
    (chunk,) = _read(ParquetReader(str(path), FieldMap(), batch_size=10))
    assert chunk.lines.tolist() == [1, 2, 3, 4]
    assert np.asarray(chunk.columns["ts"]).tolist() == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(EventError, match="line 3: score is NaN"):
        list(EventSource(path))
    b = EventSource(path, on_error="skip", rejected=lambda *a: None).read_all()
    assert b.line.tolist() == [1, 2, 4] and b.label.tolist() == [True, False, False]
    (tail,) = _read(ParquetReader(str(path), FieldMap(), batch_size=10), skip=2)
    assert tail.lines.tolist() == [3, 4]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_stdin_reader_sniffs_the_format_and_names_a_bad_line(fmt):
    if fmt == "jsonl":
        data = b'{"ts": 1, "label": 1, "score": 0.8}\n{"ts": 2, "label": 0, "score": 2e999}\n'
        reason = "score is infinite"
    else:
        data = b"ts,label,score\n1,1,0.8\n2,0,inf\n"
        reason = "score is infinite"
    reader = StdinReader(io.BufferedReader(io.BytesIO(data)), FieldMap(), batch_size=10)
    assert reader.format == fmt
    (chunk,) = _read(reader)
    assert chunk.lines.tolist() == ([1, 2] if fmt == "jsonl" else [2, 3])
    with pytest.raises(EventError, match=f"line {2 if fmt == 'jsonl' else 3}: {reason}"):
        list(EventSource(io.BufferedReader(io.BytesIO(data))))


@pytest.mark.parametrize("on_error", ["skip", "fail"])
def test_rows_the_monitor_refuses_are_named_in_the_logs_words(tmp_path, on_error):
    """Rows the source accepts but the Monitor refuses (a probability out of range for
    the log loss; no event time where a window by period needs one): skipped rows go to
    rejected.jsonl with the log's field names, the others are counted as a Monitor fed
    them alone would; with fail, the first refused line stops the run."""
    rows = []
    for i in range(300):
        r = {"when": 1_700_000_000 + i, "y": i % 3 == 0, "p": ((i * 37) % 100) / 100}
        if i in (7, 150, 200):
            r["p"] = 1.25
        if i in (40, 151, 200):
            del r["when"]
        rows.append(r)
    log = _write(tmp_path / "log.jsonl", rows)
    fm = FieldMap(ts="when", label="y", score="p", require_ts=False)
    mon = Monitor.from_config(tomllib.loads("""
        every = 100
        [metrics]
        log_loss = "log_loss"
        roc_auc = "roc_auc"
        "recall@60s" = { metric = "recall", period = 60 }
    """))
    rejected = []
    src = EventSource(log, fm, batch_size=128, on_error=on_error,
                      rejected=lambda line, reason, raw: rejected.append((line, reason)))
    p = Pipeline(mon, src, on_error=on_error)
    why_p = "p = 1.25: probability must be in [0, 1] (metric 'log_loss' needs probabilities)"
    why_t = "when is missing: this monitor needs event times ('recall@60s' (a window by period))"
    if on_error == "fail":
        with pytest.raises(EventError) as e:
            p.run()
        assert (e.value.line, e.value.reason) == (8, why_p)
        return
    counts = p.run()
    # line 201 has both: the score's reason, as admit() checks scores first
    assert rejected == [(8, why_p), (41, why_t), (151, why_p), (152, why_t), (201, why_p)]
    assert counts["rejected"] == 5 and counts["events"] == 295
    # the oracle: a Monitor fed the other rows directly
    good = [r for i, r in enumerate(rows) if i not in (7, 40, 150, 151, 200)]
    ref = Monitor.from_config(tomllib.loads("""
        every = 100
        [metrics]
        log_loss = "log_loss"
        roc_auc = "roc_auc"
        "recall@60s" = { metric = "recall", period = 60 }
    """))
    for r in good:
        ref.update(r["y"], r["p"], 1.0, r["when"])
    y = [r["y"] for r in good]
    assert p.monitor.segment_metrics()["roc_auc"].get() == pytest.approx(
        roc_auc_score(y, [r["p"] for r in good]), abs=1e-12)
    assert p.monitor.segment_metrics()["recall@60s"].get() == ref.segment_metrics()[
        "recall@60s"].get()
