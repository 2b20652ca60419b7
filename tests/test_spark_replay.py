"""``streameval.spark.replay`` (and ``replay --engine spark``) on a real local
SparkSession, against the single-process replay of the same log and config: the same
metrics.jsonl rows (values to 1e-12, everything else equal) and identical alerts."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from streameval.cli import ReplayError, main
from streameval.cli import replay as local_replay

pytest.importorskip("pandas")

CONFIG = {"monitor": {
    "every": 0, "every_seconds": 3600, "group_by": "country",
    "metrics": {
        "auc": "roc_auc", "ap": "average_precision", "recall": "recall",
        "log_loss": "log_loss",
        "recall@2h": {"metric": "recall", "period": 7200, "lateness": 600},
        "auc@3h": {"metric": "roc_auc", "period": 10800},
        "precision@6h": {"metric": "precision", "window": "tumbling", "period": 21600,
                         "lateness": 300},
    },
    "rules": ["recall@2h < 0.75", "auc drops by 0.02",
              {"metric": "auc@3h", "op": "<", "value": 0.8, "confidence": 0.9, "for": 2}],
}}


def _log(path, n=5000, seed=1, weights=False, extra=()):
    """A day and a half of events, some out of order (a few beyond the windows'
    lateness), a recall drop two thirds in, three countries."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.random(n) * 86400 * 1.5) + 1.7e9
    t = t + rng.normal(0, 900, n) * (rng.random(n) < 0.1)
    y = rng.random(n) < 0.3
    drop = np.arange(n) > 2 * n // 3
    s = np.round(np.clip(0.35 * y + rng.random(n) * 0.65 - 0.3 * (y & drop), 0, 1), 3)
    g = rng.choice(["us", "de", "br"], n, p=[0.5, 0.3, 0.2])
    rows = []
    for i in range(n):
        r = {"ts": float(t[i]), "label": int(y[i]), "score": float(s[i]), "country": str(g[i])}
        if weights:
            r["weight"] = float(rng.integers(1, 4))
        rows.append(r)
    for i, r in extra:
        rows.insert(i, r)
    with open(path, "w") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return rows


def _jsonl(path):
    return [json.loads(line) for line in open(path)]


def _same(one, two):
    """Metric rows equal: values to 1e-12 (sums merged in another order), the rest exactly."""
    a, b = _jsonl(Path(one) / "metrics.jsonl"), _jsonl(Path(two) / "metrics.jsonl")
    assert len(a) == len(b) and len(a) > 10
    for x, y in zip(a, b):
        assert {k: v for k, v in x.items() if k not in ("values", "intervals")} == \
            {k: v for k, v in y.items() if k not in ("values", "intervals")}
        assert list(x["values"]) == list(y["values"])
        for k, v in x["values"].items():
            w = y["values"][k]
            assert (v is None) == (w is None), (x["n"], x["segment"], k, v, w)
            if v is not None:
                assert math.isclose(v, w, rel_tol=0, abs_tol=1e-12), (x["n"], k, v, w)
        ivx, ivy = x.get("intervals", {}), y.get("intervals", {})
        assert list(ivx) == list(ivy), (x["n"], x["segment"], ivx, ivy)
        for k, iv in ivx.items():
            assert np.allclose(iv, ivy[k], rtol=0, atol=1e-12), (x["n"], k, iv, ivy[k])
    alerts = _jsonl(Path(one) / "alerts.jsonl")
    assert alerts == _jsonl(Path(two) / "alerts.jsonl")
    return a, alerts


@pytest.fixture
def small_splits(spark):
    """Many splits per file and many Arrow batches per split: positions, running
    maxima and line numbers must carry across both."""
    old = {k: spark.conf.get(k) for k in ("spark.sql.files.maxPartitionBytes",
                                          "spark.sql.execution.arrow.maxRecordsPerBatch")}
    spark.conf.set("spark.sql.files.maxPartitionBytes", "40000")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "300")
    yield spark
    for k, v in old.items():
        spark.conf.set(k, v)


def _spark_replay(*args, **kwargs):
    from streameval.spark import replay

    return replay(*args, **kwargs)


def test_jsonl_replay_equals_the_single_process_replay(small_splits, tmp_path):
    log = tmp_path / "log.jsonl"
    _log(log)
    local_replay(log, tmp_path / "one", config=CONFIG, report=False, progress=False)
    stats = {}
    summary = _spark_replay(log, tmp_path / "two", CONFIG, spark=small_splits, report=False,
                            stats=stats)
    rows, alerts = _same(tmp_path / "one", tmp_path / "two")
    assert stats["buckets"] == len({r.get("stream_n", r["n"]) for r in rows}) > 30
    assert {a["state"] for a in alerts} >= {"firing", "resolved"}
    assert {r["segment"] for r in rows} == {None, "us", "de", "br"}
    assert any(r["late"]["recall@2h"] > 0 for r in rows)  # late events were refused
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert summary["events"] == one["events"] == 5000
    assert summary["alerts_fired"] == one["alerts_fired"] > 0
    assert [f["segment"] for f in summary["final"]] == [f["segment"] for f in one["final"]]
    for a, b in zip(summary["final"], one["final"]):
        assert a.keys() == b.keys()
        for k, v in a.items():
            if isinstance(v, float):
                assert math.isclose(v, b[k], rel_tol=0, abs_tol=1e-12), (k, v, b[k])
            else:
                assert v == b[k], k


def test_weights_a_segment_cap_and_no_whole_stream(spark, tmp_path):
    log = tmp_path / "log.jsonl"
    _log(log, n=3000, seed=4, weights=True)
    cfg = json.loads(json.dumps(CONFIG))
    cfg["monitor"].update(max_segments=2, overall=False)
    cfg["monitor"]["rules"] = ["recall < 0.7"]
    with pytest.warns(RuntimeWarning, match="max_segments"):
        local_replay(log, tmp_path / "one", config=cfg, report=False, progress=False)
    summary = _spark_replay(log, tmp_path / "two", cfg, spark=spark, report=False)
    rows, _ = _same(tmp_path / "one", tmp_path / "two")
    assert "__other__" in {r["segment"] for r in rows} and None not in {r["segment"] for r in rows}
    assert summary["other_events"] > 0


def test_parquet_and_dataframe_logs(spark, tmp_path):
    pd = pytest.importorskip("pandas")
    rows = _log(tmp_path / "log.jsonl", n=2500, seed=9)
    frame = pd.DataFrame(rows)
    frame.to_parquet(tmp_path / "log.parquet", row_group_size=400)
    local_replay(tmp_path / "log.parquet", tmp_path / "one", config=CONFIG, report=False,
                 progress=False)
    _spark_replay(str(tmp_path / "log.parquet"), tmp_path / "two", CONFIG, spark=spark,
                  report=False)
    _same(tmp_path / "one", tmp_path / "two")
    # a DataFrame in any partitioning, with the column that orders it
    frame["line"] = np.arange(1, len(frame) + 1)
    df = spark.createDataFrame(frame.sample(frac=1.0, random_state=0)).repartition(3)
    _spark_replay(df, tmp_path / "three", CONFIG, spark=spark, order_by="line", report=False)
    _same(tmp_path / "one", tmp_path / "three")


BAD = [
    (17, '{"ts": 1700000100.0, "label": 1, "score": NaN, "country": "us"}'),
    (40, '{"ts": 1700000200.0, "label": 7, "score": 0.5, "country": "de"}'),
    (41, "this is not json"),
    (90, '{"ts": 1700000300.0, "label": 0, "score": 1.5, "country": "us"}'),  # log loss
    (95, ""),  # a blank line: skipped, still counted
]


def test_bad_rows_fail_with_the_single_process_message_or_go_to_rejected(small_splits, tmp_path):
    log = tmp_path / "log.jsonl"
    _log(log, n=1500, seed=2, extra=BAD)
    with pytest.raises(ReplayError) as one:
        local_replay(log, tmp_path / "one", config=CONFIG, report=False, progress=False)
    from streameval.events import EventError

    with pytest.raises(EventError) as two:
        _spark_replay(log, tmp_path / "two", CONFIG, spark=small_splits, report=False)
    assert str(one.value) == f"{log}: {two.value} (use --on-error skip to set bad rows aside)"
    assert "line 18" in str(two.value)
    assert not (tmp_path / "two" / "metrics.jsonl").exists()  # nothing written
    # skip: the same rejected rows, reasons and outputs
    local_replay(log, tmp_path / "one", config=CONFIG, report=False, progress=False,
                 on_error="skip")
    summary = _spark_replay(log, tmp_path / "two", CONFIG, spark=small_splits, report=False,
                            on_error="skip")
    _same(tmp_path / "one", tmp_path / "two")
    rej1 = _jsonl(tmp_path / "one" / "rejected.jsonl")
    rej2 = _jsonl(tmp_path / "two" / "rejected.jsonl")
    assert [(r["line"], r["reason"]) for r in rej1] == [(r["line"], r["reason"]) for r in rej2]
    assert len(rej1) == 4 and summary["rejected"] == 4
    assert summary["rows"] == json.loads((tmp_path / "one" / "summary.json").read_text())["rows"]


def test_drift_tests_and_count_windows_take_the_events_in_order(small_splits, tmp_path):
    log = tmp_path / "log.jsonl"
    _log(log, n=4000, seed=3)
    cfg = json.loads(json.dumps(CONFIG))
    m = cfg["monitor"]
    m["metrics"]["recall@500"] = {"metric": "recall", "size": 500}
    m["metrics"]["auc_per_700"] = {"metric": "roc_auc", "size": 700, "window": "tumbling"}
    m["drift"] = {"recall_seq": {"test": "sequential", "metric": "recall", "alpha": 0.05},
                  "recall_win": {"metric": "recall", "size": 400}}
    m["rules"] = m["rules"] + [{"alarm": "recall_seq"}, {"drift": "recall_win", "p_below": 0.01},
                               "recall@500 < 0.7"]
    local_replay(log, tmp_path / "one", config=cfg, report=False, progress=False)
    stats = {}
    _spark_replay(log, tmp_path / "two", cfg, spark=small_splits, report=False, stats=stats)
    rows, alerts = _same(tmp_path / "one", tmp_path / "two")
    fired = {a["rule"] for a in alerts if a["state"] == "firing"}
    assert {"recall_seq alarm", "recall@500 < 0.7"} <= fired, fired
    assert any(r["values"]["drift.recall_win.p_value"] is not None for r in rows)


@pytest.mark.parametrize("change,message", [
    ({"every": 1000}, "every = 1000: the Spark engine evaluates at every period"),
    ({"every_seconds": None}, "needs [monitor] every_seconds"),
])
def test_what_the_spark_engine_refuses(spark, tmp_path, change, message):
    from streameval.spark.replay import SparkReplayError

    log = tmp_path / "log.jsonl"
    _log(log, n=50)
    cfg = json.loads(json.dumps(CONFIG))
    cfg["monitor"].update(change)
    cfg["monitor"] = {k: v for k, v in cfg["monitor"].items() if v is not None}
    if "metrics" in change:
        cfg["monitor"]["rules"] = []
    with pytest.raises(SparkReplayError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _spark_replay(log, tmp_path / "out", cfg, spark=spark)


def test_the_cli_engine_option(spark, tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    _log(log, n=1200, seed=5)
    cfg = tmp_path / "c.toml"
    cfg.write_text("""
[monitor]
every = 0
every_seconds = 7200
metrics = { auc = "roc_auc", recall = "recall", "recall@4h" = { metric = "recall", period = 14400 } }
rules = ["recall@4h < 0.7"]
""")
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(tmp_path / "one"),
                 "--no-report", "-q", "--no-progress"]) == 0
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(tmp_path / "two"),
                 "--no-report", "-q", "--engine", "spark"]) == 0
    _same(tmp_path / "one", tmp_path / "two")
    assert (tmp_path / "two" / "summary.json").exists()
    # a config the engine cannot take: exit status 2, one line
    assert main(["replay", str(log), "--out", str(tmp_path / "x"), "-q",
                 "--engine", "spark"]) == 2
    err = capsys.readouterr().err
    assert "every = 1000: the Spark engine evaluates at every period of event time" in err
    assert main(["replay", str(log), "--config", str(cfg), "--engine", "spark",
                 "--checkpoint", str(tmp_path / "ck")]) == 2


def test_delayed_labels_are_refused(spark, tmp_path):
    from streameval.spark.replay import SparkReplayError

    log = tmp_path / "log.jsonl"
    _log(log, n=20)
    cfg = json.loads(json.dumps(CONFIG))
    cfg["input"] = {"label_ttl": 3600}
    with pytest.raises(SparkReplayError, match="delayed labels"):
        _spark_replay(log, tmp_path / "out", cfg, spark=spark)


def test_a_gzip_log_and_the_formats_refused(spark, tmp_path):
    import gzip
    import shutil

    from streameval.spark.replay import SparkReplayError

    log = tmp_path / "log.jsonl"
    _log(log, n=1500, seed=8)
    with open(log, "rb") as f, gzip.open(tmp_path / "log.jsonl.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    local_replay(tmp_path / "log.jsonl.gz", tmp_path / "one", config=CONFIG, report=False,
                 progress=False)
    _spark_replay(tmp_path / "log.jsonl.gz", tmp_path / "two", CONFIG, spark=spark, report=False)
    _same(tmp_path / "one", tmp_path / "two")
    (tmp_path / "log.csv").write_text("ts,label,score\n1,1,0.5\n")
    with pytest.raises(SparkReplayError, match="reads JSONL and Parquet logs"):
        _spark_replay(tmp_path / "log.csv", tmp_path / "x", CONFIG, spark=spark)
    with pytest.raises(SparkReplayError, match="no such file"):
        _spark_replay(tmp_path / "missing.jsonl", tmp_path / "x", CONFIG, spark=spark)


def test_odd_lines_reserved_segments_and_an_empty_log(small_splits, tmp_path):
    spark = small_splits
    cfg = json.loads(json.dumps(CONFIG))
    extra = [
        (30, b'{"ts": 1700000100.0, "label": 1, "score": 0.5, "country": "\xff\xfe"}'),
        (60, '{"ts": 1700000200.0, "label": 1,\r "score": 0.5, "country": "us"}'),
        (90, '{"ts": 1700000300.0, "label": 0, "score": 0.5, "country": "__other__"}'),
    ]
    log = tmp_path / "log.jsonl"
    rows = _log(log, n=1200, seed=6)
    lines = [json.dumps(r).encode() for r in rows]
    for i, line in extra:
        lines.insert(i, line if isinstance(line, bytes) else line.encode())
    log.write_bytes(b"\n".join(lines) + b"\n")
    local_replay(log, tmp_path / "one", config=cfg, report=False, progress=False,
                 on_error="skip")
    _spark_replay(log, tmp_path / "two", cfg, spark=spark, report=False, on_error="skip")
    _same(tmp_path / "one", tmp_path / "two")
    rej1 = _jsonl(tmp_path / "one" / "rejected.jsonl")
    rej2 = _jsonl(tmp_path / "two" / "rejected.jsonl")
    assert rej1 == rej2 and [r["line"] for r in rej1] == [31, 91]
    assert "reserved" in rej1[1]["reason"] and "UTF-8" in rej1[0]["reason"]
    # a log without events: the one row of the local replay's flush
    (tmp_path / "empty.jsonl").write_text("\n")
    from streameval.replay import ReplayError
    from streameval.spark.replay import SparkReplayError

    for engine in ("local", "spark"):  # refused by both unless accepted
        error = ReplayError if engine == "local" else SparkReplayError
        with pytest.raises(error, match="no events: no rows"):
            if engine == "local":
                local_replay(tmp_path / "empty.jsonl", tmp_path / "e0", config=cfg,
                             report=False, progress=False)
            else:
                _spark_replay(tmp_path / "empty.jsonl", tmp_path / "e0", cfg, spark=spark,
                              report=False)
    local_replay(tmp_path / "empty.jsonl", tmp_path / "e1", config=cfg, report=False,
                 progress=False, allow_empty=True)
    _spark_replay(tmp_path / "empty.jsonl", tmp_path / "e2", cfg, spark=spark, report=False,
                  allow_empty=True)
    assert _jsonl(tmp_path / "e1" / "metrics.jsonl") == _jsonl(tmp_path / "e2" / "metrics.jsonl")
    assert len(_jsonl(tmp_path / "e2" / "metrics.jsonl")) == 1


def test_segments_that_print_alike_stay_apart(spark, tmp_path):
    """The segments 1 and "1", "null" and "None" beside the whole stream: each its own
    rows and final entry, as in the single-process replay (the per-split facts are keyed
    by each segment's JSON text)."""
    looks = [1, "1", "null", "None"]
    rows = _log(tmp_path / "base.jsonl", n=2000, seed=7)
    for i, r in enumerate(rows):
        r["country"] = looks[i % 4]
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    local_replay(log, tmp_path / "one", config=CONFIG, report=False, progress=False)
    summary = _spark_replay(log, tmp_path / "two", CONFIG, spark=spark, report=False)
    got, _ = _same(tmp_path / "one", tmp_path / "two")
    assert [r["segment"] for r in got if r["segment"] is not None][:4] == looks
    assert [(f["segment"], f["n"]) for f in summary["final"]] == [
        (None, 2000), (1, 500), ("1", 500), ("null", 500), ("None", 500)]
