"""``streameval.spark.streaming.MonitorSink`` on a real local SparkSession: a file
source read one file per micro-batch, against a single-process Monitor fed the same
events in the same order; interrupted runs (Spark replaying a batch, a crash between
writing rows and saving the checkpoint) against an uninterrupted one; bad rows with the
single-process messages."""

import json
import logging
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from streameval.events import EventError, FieldMap
from streameval.io.checkpoint import load_checkpoint
from streameval.io.sinks import dumps
from streameval.io.sources import EventSource
from streameval.monitor import Monitor
from streameval.pipeline import Pipeline

pytest.importorskip("pyarrow")

from streameval.spark.streaming import KIND, MonitorSink  # noqa: E402

SCHEMA = "ts double, label long, score double, weight double, id long, country string"

CONFIG = {"monitor": {
    "every": 100, "group_by": "country",
    "metrics": {"auc": "roc_auc", "recall": "recall", "precision": "precision",
                "log_loss": "log_loss", "recall@200": {"metric": "recall", "size": 200}},
    "rules": [{"metric": "recall@200", "op": "<", "value": 0.6, "for": 2,
               "min_samples": 100}],
}}

N_FILES, ROWS = 6, 250


def _rows(k, n=ROWS, seed=0):
    """File ``k``: ``n`` events with distinct increasing times; positives are scored
    lower from file 4 on (a recall drop)."""
    rng = np.random.default_rng(seed + k)
    y = rng.random(n) < 0.4
    s = np.round(np.clip(0.35 * y + rng.random(n) * 0.65 - 0.3 * y * (k >= 4), 0, 1), 3)
    g = rng.choice(["us", "de"], n, p=[0.6, 0.4])
    w = rng.choice([1.0, 2.0], n, p=[0.8, 0.2])
    return [{"ts": 1000.0 + k * n + i, "label": int(y[i]), "score": float(s[i]),
             "weight": float(w[i]), "id": k * n + i, "country": str(g[i])} for i in range(n)]


def _write(directory, k, rows):
    """One JSONL file of the stream; modification times give Spark's file order."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"part-{k:03d}.jsonl"
    with open(path, "w") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    os.utime(path, (1.6e9 + k, 1.6e9 + k))
    return path


def _stream(spark, src, ckpt, sink):
    """Run the query over every file in ``src`` (one file per micro-batch) to the end."""
    q = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))
         .writeStream.foreachBatch(sink).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    return q


def _jsonl(path):
    return [json.loads(line) for line in open(path)] if Path(path).exists() else []


def _oracle(files):
    """The single-process Monitor fed each file's events in order (time), a batch per
    file, then flushed: its rows and alerts as the JSONL outputs hold them."""
    m = Monitor.from_config(CONFIG["monitor"])
    rows, alerts = [], []
    m.on_metrics.append(rows.append)
    m.on_alert.append(alerts.append)
    for events in files:
        events = sorted(events, key=lambda r: r["ts"])
        m.update_many([bool(r["label"]) for r in events], [r["score"] for r in events],
                      [r["weight"] for r in events], [r["ts"] for r in events],
                      [r["country"] for r in events])
    m.flush()
    return [json.loads(dumps(r)) for r in rows], [json.loads(dumps(a)) for a in alerts]


@pytest.fixture(scope="module")
def files():
    return [_rows(k) for k in range(N_FILES)]


@pytest.fixture(scope="module")
def uninterrupted(spark, files, tmp_path_factory):
    """The uninterrupted run over every file: its output directory and sink."""
    d = tmp_path_factory.mktemp("uninterrupted")
    for k, rows in enumerate(files):
        _write(d / "in", k, rows)
    sink = MonitorSink.from_config(CONFIG, d / "monitor.ckpt", outputs=d / "out")
    _stream(spark, d / "in", d / "spark", sink)
    sink.flush()
    sink.close()
    return d, sink


def _same_outputs(a, b):
    for name in ("metrics.jsonl", "alerts.jsonl"):
        assert (Path(a) / name).read_bytes() == (Path(b) / name).read_bytes(), name


def test_uninterrupted_equals_single_process(uninterrupted, files):
    d, sink = uninterrupted
    rows, alerts = _oracle(files)
    assert _jsonl(d / "out" / "metrics.jsonl") == rows
    assert _jsonl(d / "out" / "alerts.jsonl") == alerts
    # 15 whole-stream rows and a segment's every 100 of its own events: more than 25
    assert len(rows) > 25 and any(a["state"] == "firing" for a in alerts)
    total = N_FILES * ROWS
    assert sink.counts() == dict(sink.counts(), rows=total, events=total, rejected=0,
                                 batch_id=N_FILES - 1)
    state = load_checkpoint(d / "monitor.ckpt", expected_kind=KIND)
    assert state["batch_id"] == N_FILES - 1 and state["monitor"]["data"]["n"] == total


def test_replays_gaps_empty_batches_and_pickling(spark, files, tmp_path, caplog):
    """Direct calls: a replayed batch id is a no-op, an empty batch commits its id, a
    gap is refused, a new (or unpickled) sink resumes from the checkpoint."""
    _write(tmp_path / "in", 0, files[0])
    _write(tmp_path / "in1", 1, files[1])
    df0 = spark.read.schema(SCHEMA).json(str(tmp_path / "in"))
    df1 = spark.read.schema(SCHEMA).json(str(tmp_path / "in1"))
    ckpt, out = tmp_path / "monitor.ckpt", tmp_path / "out"
    sink = MonitorSink.from_config(CONFIG, ckpt, outputs=out)
    sink(df0, 0)
    size, n = (out / "metrics.jsonl").stat().st_size, sink.monitor.n
    assert n == ROWS and size > 0
    sink(df0, 0)  # Spark replays batch 0: already counted
    sink(df0.limit(0), 1)  # an empty micro-batch
    assert (sink.batch_id, sink.monitor.n, (out / "metrics.jsonl").stat().st_size) == (1, n, size)
    assert load_checkpoint(ckpt, expected_kind=KIND)["batch_id"] == 1
    with pytest.raises(ValueError, match=r"batches 2\.\.2 were committed by Spark"):
        sink(df1, 3)
    assert (sink.batch_id, sink.monitor.n) == (1, n)

    again = MonitorSink.from_config(CONFIG, ckpt, outputs=out)
    assert (again.batch_id, again.monitor.n) == (1, n)
    with caplog.at_level(logging.WARNING, logger="streameval.spark"):
        again(df1, 0)  # older than the checkpoint: skipped, with a warning
    assert again.monitor.n == n and "is it the checkpoint of this query" in caplog.text
    again.close()
    copy = pickle.loads(pickle.dumps(again))
    copy(df1, 2)
    assert (copy.batch_id, copy.monitor.n) == (2, 2 * ROWS)
    copy.close()
    with pytest.raises(ValueError, match="another configuration"):
        MonitorSink.from_config({"monitor": {**CONFIG["monitor"], "every": 50}}, ckpt)


def test_interrupted_with_spark_replay_equals_uninterrupted(spark, files, uninterrupted,
                                                           tmp_path):
    """Stop after three files, make Spark replay its last batch (its commit removed),
    restart with a new sink on the same checkpoints: the same outputs."""
    k = 3
    for i in range(k):
        _write(tmp_path / "in", i, files[i])
    ckpt, out, spark_ckpt = tmp_path / "monitor.ckpt", tmp_path / "out", tmp_path / "spark"
    first = MonitorSink.from_config(CONFIG, ckpt, outputs=out)
    _stream(spark, tmp_path / "in", spark_ckpt, first)
    assert first.batch_id == k - 1
    # a replay of the last batch, by hand: nothing happens
    sizes = [(out / n).stat().st_size for n in ("metrics.jsonl", "alerts.jsonl")]
    last = spark.read.schema(SCHEMA).json(str(tmp_path / "in" / f"part-{k - 1:03d}.jsonl"))
    first(last, k - 1)
    assert [(out / n).stat().st_size for n in ("metrics.jsonl", "alerts.jsonl")] == sizes
    first.close()
    # ... and by Spark: without its commit, batch k - 1 runs again after the restart
    for name in (f"{k - 1}", f".{k - 1}.crc"):
        (spark_ckpt / "commits" / name).unlink(missing_ok=True)
    for i in range(k, N_FILES):
        _write(tmp_path / "in", i, files[i])
    second = MonitorSink.from_config(CONFIG, ckpt, outputs=out)
    seen = []

    def recording(df, batch_id):
        seen.append(batch_id)
        second(df, batch_id)

    _stream(spark, tmp_path / "in", spark_ckpt, recording)
    assert seen == list(range(k - 1, N_FILES))
    second.flush()
    _same_outputs(out, uninterrupted[0] / "out")
    assert second.counts() == uninterrupted[1].counts()


class Crash(Exception):
    pass


def test_crash_between_rows_and_checkpoint_equals_uninterrupted(spark, files, uninterrupted,
                                                               tmp_path):
    """A crash after batch 3's rows were written and before its checkpoint: the files
    as the crash left them, a new sink cuts them back, Spark redoes batch 3."""
    for i in range(N_FILES):
        _write(tmp_path / "in", i, files[i])
    ckpt, out, spark_ckpt = tmp_path / "monitor.ckpt", tmp_path / "out", tmp_path / "spark"
    left = tmp_path / "left"

    def crash(sink, batch_id, batch):
        if batch_id == 3:
            shutil.copytree(out, left)  # the outputs a killed process leaves
            raise Crash("planted crash after the rows of batch 3")

    first = MonitorSink.from_config(CONFIG, ckpt, outputs=out, on_batch=crash)
    with pytest.raises(Exception, match="planted crash"):
        _stream(spark, tmp_path / "in", spark_ckpt, first)
    assert first.batch_id == 2 and first.monitor.n == 3 * ROWS  # back to its checkpoint
    first.close()
    shutil.rmtree(out)
    shutil.copytree(left, out)
    state = load_checkpoint(ckpt, expected_kind=KIND)
    assert (out / "metrics.jsonl").stat().st_size > state["outputs"]["metrics"]
    second = MonitorSink.from_config(CONFIG, ckpt, outputs=out)
    assert (out / "metrics.jsonl").stat().st_size == state["outputs"]["metrics"]
    _stream(spark, tmp_path / "in", spark_ckpt, second)
    second.flush()
    _same_outputs(out, uninterrupted[0] / "out")


# ---------------------------------------------------------------- bad input

BAD = {  # a bad row of the second file: the single-process reason
    "nan score": ('{"ts": 1300.5, "label": 1, "score": NaN}', "score is NaN"),
    "null score": ('{"ts": 1300.5, "label": 1, "score": null}', "score is null"),
    "label outside the pair": ('{"ts": 1300.5, "label": 2, "score": 0.4}',
                               "unknown label 2 (expected one of true, false, 1 or 0)"),
    "negative weight": ('{"ts": 1300.5, "label": 0, "score": 0.4, "weight": -1.5}',
                        "weight is negative: -1.5"),
    "null label": ('{"ts": 1300.5, "label": null, "score": 0.4}', "label is null"),
    "score outside [0, 1] (log loss)": ('{"ts": 1300.5, "label": 1, "score": 1.5}',
                                        "score = 1.5: probability must be in [0, 1]"),
}


def _bad_file(directory, files, row):
    """File 1 with ``row`` after its 50th event (its time between theirs)."""
    rows = [json.dumps(r) for r in files[1]]
    rows.insert(51, row)
    return _write(directory, 1, rows)


def _single_process(paths, fields, on_error):
    """The single-process pipeline over the files as one log: its error (fail), or its
    rejected rows, counts and metric rows (skip)."""
    log = paths[0].parent.parent / "log.jsonl"
    log.write_bytes(b"".join(p.read_bytes() for p in paths))
    rejected = []
    src = EventSource(log, fields, on_error=on_error,
                      rejected=lambda line, reason, raw: rejected.append((line, reason)))
    pipe = Pipeline(Monitor.from_config(CONFIG["monitor"]), src,
                    outputs={"metrics": log.parent / "sp-metrics.jsonl"})
    try:
        counts = pipe.run()
    except EventError as e:
        return e
    return rejected, counts, _jsonl(log.parent / "sp-metrics.jsonl")


@pytest.mark.parametrize("case", list(BAD))
def test_bad_row_fails_the_batch_with_the_single_process_message(spark, files, tmp_path, case):
    row, reason = BAD[case]
    p0 = _write(tmp_path / "in0", 0, files[0])
    p1 = _bad_file(tmp_path / "in1", files, row)
    ckpt, out = tmp_path / "monitor.ckpt", tmp_path / "out"
    sink = MonitorSink.from_config(CONFIG, ckpt, outputs=out)
    sink(spark.read.schema(SCHEMA).json(str(p0)), 0)
    size = (out / "metrics.jsonl").stat().st_size
    with pytest.raises(EventError) as info:
        sink(spark.read.schema(SCHEMA).json(str(p1)), 1)
    expected = _single_process([p0, p1], sink.fields, "fail")
    assert isinstance(expected, EventError) and expected.reason.startswith(reason)
    e = info.value
    assert e.reason == expected.reason and e.line == expected.line == ROWS + 52
    assert str(e).startswith(f"batch 1, row {ROWS + 52} (") and str(e).endswith(e.reason)
    assert e.raw["ts"] == 1300.5
    # nothing of batch 1: the Monitor, the checkpoint and the outputs are those of batch 0
    assert (sink.batch_id, sink.monitor.n) == (0, ROWS)
    assert load_checkpoint(ckpt, expected_kind=KIND)["monitor"]["data"]["n"] == ROWS
    assert (out / "metrics.jsonl").stat().st_size == size
    sink.close()


def test_bad_rows_stop_the_query_then_skip_sets_them_aside(spark, files, tmp_path):
    """The query fails on the first bad row (nothing of its batch counted); restarted
    with on_error="skip" on the same checkpoints it redoes that batch: the bad rows are
    in rejected.jsonl, the rest equals the single-process replay with skip."""
    times = [1300.5 + i for i in range(len(BAD))]
    rows = [json.dumps(r) for r in files[1]]
    for i, (row, _) in enumerate(BAD.values()):  # all of them, in time order
        rows.insert(51 + 2 * i, row.replace('"ts": 1300.5', f'"ts": {times[i]}'))
    p0 = _write(tmp_path / "in", 0, files[0])
    p1 = _write(tmp_path / "in", 1, rows)
    p2 = _write(tmp_path / "in", 2, files[2])
    ckpt, out, spark_ckpt = tmp_path / "monitor.ckpt", tmp_path / "out", tmp_path / "spark"
    failing = MonitorSink.from_config(CONFIG, ckpt, outputs=out)
    with pytest.raises(Exception, match=r"batch 1, row \d+ .*score is NaN"):
        _stream(spark, tmp_path / "in", spark_ckpt, failing)
    assert (failing.batch_id, failing.monitor.n) == (0, ROWS)
    assert load_checkpoint(ckpt, expected_kind=KIND)["batch_id"] == 0
    failing.close()

    skipping = MonitorSink.from_config(CONFIG, ckpt, outputs=out, on_error="skip")
    _stream(spark, tmp_path / "in", spark_ckpt, skipping)
    skipping.flush()
    rejected, counts, metric_rows = _single_process([p0, p1, p2], skipping.fields, "skip")
    got = _jsonl(out / "rejected.jsonl")
    assert [(r["line"], r["reason"]) for r in got] == rejected
    assert len(got) == len(BAD) and [r["raw"]["ts"] for r in got] == times
    assert [reason for _, reason in rejected][:1] == ["score is NaN"]
    c = skipping.counts()
    assert (c["rows"], c["events"], c["rejected"], c["batch_id"]) == (
        counts["rows"], counts["events"], counts["rejected"], 2)
    assert c["rejected"] == len(BAD) and c["events"] == 3 * ROWS
    assert _jsonl(out / "metrics.jsonl") == metric_rows
    skipping.close()


def test_config_and_columns_are_checked(spark, files, tmp_path):
    with pytest.raises(ValueError, match="delayed labels are not supported"):
        MonitorSink.from_config({"input": {"label_ttl": 60}}, tmp_path / "c.ckpt")
    with pytest.raises(ValueError, match="group_by"):
        MonitorSink(Monitor.default(group_by="country"), tmp_path / "c.ckpt",
                    fields=FieldMap())
    sink = MonitorSink.from_config({"monitor": CONFIG["monitor"], "input": {"score": "p"}},
                                   tmp_path / "c.ckpt")
    df = spark.read.schema(SCHEMA).json(str(_write(tmp_path / "in", 0, files[0][:5])))
    with pytest.raises(ValueError, match=r"no column 'p' \(the score field\)"):
        sink(df, 0)
    assert sink.batch_id is None and not (tmp_path / "c.ckpt").exists()


def test_order_within_a_batch_does_not_depend_on_partitioning(spark, files, tmp_path):
    """Rows arriving in any order (shuffled partitions), with tied event times, reach
    the Monitor in one order: event time, then the other columns read."""
    from pyspark.sql import functions as F

    rows = [dict(r, ts=float(r["ts"] // 10)) for r in files[0] + files[1]]  # ties
    df = spark.read.schema(SCHEMA).json(str(_write(tmp_path / "in", 0, rows)))
    outs = []
    for i, frame in enumerate([df, df.repartition(3).orderBy(F.rand(7)),
                               df.repartition(4, "country").sortWithinPartitions(F.desc("id"))]):
        out = tmp_path / f"out{i}"
        sink = MonitorSink.from_config(CONFIG, tmp_path / f"m{i}.ckpt", outputs=out)
        sink(frame, 0)
        sink.flush()
        sink.close()
        outs.append(out)
    _same_outputs(outs[0], outs[1])
    _same_outputs(outs[0], outs[2])
    key = ("ts", "label", "score", "weight", "id", "country")
    ordered = [sorted(rows, key=lambda r: tuple(r[k] for k in key))]
    assert _jsonl(outs[0] / "metrics.jsonl") == _oracle(ordered)[0]
