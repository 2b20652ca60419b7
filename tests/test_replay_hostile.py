"""``streameval replay`` against hostile input (issue 15): rows a metric refuses, logs
that cannot be read, and a fuzz of arbitrary JSON rows.

Oracles: scikit-learn over the rows that were not rejected (``roc_auc_score``,
``log_loss``, with weights); a replay of the log with the rejected lines removed
(outputs equal byte for byte: a skipped row leaves no trace); the log's own line
numbers; an uninterrupted run for a resumed one.
"""

import bz2
import gzip
import json
import lzma
import os
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import log_loss, roc_auc_score

from streameval.cli import Replay, main, replay
from streameval.io.checkpoint import load_checkpoint

T0 = 1_700_000_000


def _rows(n, seed=0, weights=False, segments=None):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = np.clip(np.round(1 / (1 + np.exp(-(1.2 * (y - 0.5) + rng.standard_normal(n)))), 3), 0, 1)
    rows = []
    for i in range(n):
        r = {"ts": T0 + i, "label": int(y[i]), "score": float(s[i])}
        if weights:
            r["weight"] = float(rng.choice([0.5, 1.0, 2.0]))
        if segments:
            r["seg"] = segments[i % len(segments)]
        rows.append(r)
    return rows


def _write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for x in lines:
            f.write((x if isinstance(x, str) else json.dumps(x)) + "\n")
    return path


def _jsonl(path):
    return [json.loads(x) for x in open(path, encoding="utf-8")]


def _final(out, segment=None):
    return [r for r in _jsonl(out / "metrics.jsonl") if r["segment"] == segment][-1]


LOGLOSS_CONFIG = """
[monitor]
every = 5000
[monitor.metrics]
roc_auc = "roc_auc"
log_loss = "log_loss"
"recall@3000" = { metric = "recall", size = 3000 }
[[monitor.rules]]
name = "recall_low"
metric = "recall@3000"
op = "<"
value = 0.9
"""


# ------------------------------------------------------------- rows a metric refuses


@pytest.fixture(scope="module")
def proba_log(tmp_path_factory):
    """70 000 rows (two batches of the default 65 536) with scores log loss refuses at
    known lines, on both sides of the batch boundary."""
    d = tmp_path_factory.mktemp("proba")
    rows = _rows(70_000, seed=1, weights=True)
    bad = {5: 1.5, 65_536: -0.25, 65_537: 1.0000001, 69_999: 7.0}
    lines = []
    for i, r in enumerate(rows, start=1):
        if i in bad:
            r = dict(r, score=bad[i])
        lines.append(r)
    cfg = d / "cfg.toml"
    cfg.write_text(LOGLOSS_CONFIG)
    return _write(d / "log.jsonl", lines), cfg, lines, bad


def test_skip_rejects_scores_a_metric_refuses_and_goes_on(proba_log, tmp_path):
    log, cfg, lines, bad = proba_log
    out = tmp_path / "out"
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(out), "--on-error",
                 "skip", "--no-report", "-q"]) == 0
    rejected = _jsonl(out / "rejected.jsonl")
    assert [r["line"] for r in rejected] == sorted(bad)
    for r in rejected:
        v = bad[r["line"]]
        assert r["reason"] == (f"score = {v!r}: probability must be in [0, 1] "
                               "(metric 'log_loss' needs probabilities)")
        assert json.loads(r["raw"]) == lines[r["line"] - 1]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["rows"], summary["events"], summary["rejected"]) == (70_000, 70_000 - 4, 4)
    good = [r for i, r in enumerate(lines, start=1) if i not in bad]
    y = [r["label"] for r in good]
    s = [r["score"] for r in good]
    w = [r["weight"] for r in good]
    final = _final(out)
    assert final["n"] == len(good)
    assert final["values"]["roc_auc"] == pytest.approx(roc_auc_score(y, s, sample_weight=w), abs=1e-12)
    assert final["values"]["log_loss"] == pytest.approx(log_loss(y, s, sample_weight=w), rel=1e-9)
    # a skipped row leaves no trace: the outputs of the log without those lines
    clean = _write(tmp_path / "clean.jsonl", good)
    ref = tmp_path / "ref"
    assert main(["replay", str(clean), "--config", str(cfg), "--out", str(ref),
                 "--no-report", "-q"]) == 0
    for name in ("metrics.jsonl", "alerts.jsonl"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name


def test_fail_names_the_file_and_line_a_metric_refuses(proba_log, tmp_path, capsys):
    log, cfg, _, _ = proba_log
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(tmp_path / "o"),
                 "--no-report", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert (f"{log}: line 5: score = 1.5: probability must be in [0, 1] "
            "(metric 'log_loss' needs probabilities)") in err
    assert "y_pred" not in err and "--on-error skip" in err


def test_fail_after_the_first_batch_names_the_line_not_the_index(tmp_path, capsys):
    rows = _rows(70_000, seed=2)
    rows[65_540] = dict(rows[65_540], score=1.25)  # line 65 541, index 4 of batch 2
    log = _write(tmp_path / "log.jsonl", rows)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(LOGLOSS_CONFIG)
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(tmp_path / "o"),
                 "--no-report", "-q"]) == 2
    err = capsys.readouterr().err
    assert f"{log}: line 65541: score = 1.25: probability must be in [0, 1]" in err
    assert "[4]" not in err


FUTURE_CONFIG = """
[monitor]
every = 500
[monitor.metrics]
"precision@1h" = { metric = "precision", period = 3600, lateness = 60 }
roc_auc = "roc_auc"
"""


def test_an_event_time_in_the_future_is_a_rejected_row_and_never_moves_the_clock(tmp_path,
                                                                                   capsys):
    """A row stamped 1e12 (year 33 658) used to move every period window's clock there:
    every later row was late for good, silently. It is now refused (more than
    max_future, default 3 600 s, ahead of the wall clock), named with its line, counted
    in the summary's "future", and the rows after it are counted as usual. Oracle:
    the replay of the log without that row, byte for byte."""
    rows = _rows(2_000, seed=4)
    rows[700] = dict(rows[700], ts=1e12)
    rows[900] = dict(rows[900], ts=time.time() + 7200)  # two hours ahead of the wall clock
    log = _write(tmp_path / "log.jsonl", rows)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(FUTURE_CONFIG)
    out = tmp_path / "out"
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(out), "--on-error",
                 "skip", "--no-report", "-q"]) == 0
    rejected = _jsonl(out / "rejected.jsonl")
    assert [r["line"] for r in rejected] == [701, 901]
    assert rejected[0]["reason"].startswith("ts = 1000000000000.0 is ")
    assert rejected[0]["reason"].endswith(" s ahead of the clock (max_future = 3600 s)")
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["rejected"], summary["future"], summary["events"]) == (2, 2, 1_998)
    final = _final(out)
    assert final["late"] == {"precision@1h": 0}  # nothing after the bad rows is late
    clean = _write(tmp_path / "clean.jsonl", [r for i, r in enumerate(rows) if i not in (700, 900)])
    ref = tmp_path / "ref"
    assert main(["replay", str(clean), "--config", str(cfg), "--out", str(ref),
                 "--no-report", "-q"]) == 0
    assert (out / "metrics.jsonl").read_bytes() == (ref / "metrics.jsonl").read_bytes()
    # --on-error fail names the line
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(tmp_path / "f"),
                 "--no-report", "-q"]) == 2
    assert f"{log}: line 701: ts = 1000000000000.0 is " in capsys.readouterr().err
    # max_future = 0: no limit; the row moves the clock and the later rows are late
    cfg.write_text(FUTURE_CONFIG + "[input]\nmax_future = 0\n")
    off = tmp_path / "off"
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(off), "--no-report",
                 "-q"]) == 0
    assert _final(off)["late"] == {"precision@1h": 2_000 - 701}  # every row after it
    summary = json.loads((off / "summary.json").read_text())
    assert (summary["future"], summary["final"][0]["late"]) == (0, {"precision@1h": 1_299})
    cfg.write_text(FUTURE_CONFIG + "[input]\nmax_future = -1\n")
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(off), "--no-report",
                 "-q"]) == 2
    assert "input.max_future = -1" in capsys.readouterr().err


def test_segments_past_the_cap_are_counted_in_the_summary(tmp_path):
    """max_segments = 2: the third and later segment values count under "__other__";
    the summary says how many events, the final rows hold the __other__ segment, and
    the warning is printed once. Oracle: the rows planted."""
    rows = _rows(300, seed=6, segments=["a", "b", "c", "d", "a"])
    log = _write(tmp_path / "log.jsonl", rows)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[monitor]\nevery = 100\ngroup_by = "seg"\nmax_segments = 2\n'
                   '[monitor.metrics]\nrecall = "recall"\n')
    out = tmp_path / "out"
    with pytest.warns(RuntimeWarning, match="max_segments = 2 reached"):
        assert main(["replay", str(log), "--config", str(cfg), "--out", str(out),
                     "--no-report", "-q"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["other_events"] == 120  # "c" and "d": 2 of every 5 rows
    # (in the order of each segment's first row: a segment writes at its own cadence)
    assert sorted(f["segment"] or "" for f in summary["final"]) == ["", "__other__", "a", "b"]


def test_resume_after_a_kill_keeps_the_rows_a_metric_refused(tmp_path):
    """Killed twice and resumed from its checkpoint, a skip replay whose rows log loss
    refuses ends with the outputs of an uninterrupted run, rejected.jsonl included."""
    rows = _rows(12_000, seed=10)
    bad = set(range(250, 12_000, 777)) | {3_000, 3_001, 3_002}
    lines = [dict(r, score=1.0 + i / 1e4) if i in bad else r for i, r in enumerate(rows, start=1)]
    log = _write(tmp_path / "log.jsonl", lines)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(LOGLOSS_CONFIG.replace("every = 5000", "every = 700"))
    opts = dict(config=cfg, on_error="skip", report=False, progress=False)
    ref = tmp_path / "ref"
    replay(log, ref, **opts)
    out, ckpt = tmp_path / "out", tmp_path / "ck.json"
    for stop in (3_500, 7_000):
        job = Replay(log, out, checkpoint=ckpt, checkpoint_every=1_000, **opts)

        def kill(pipeline, batch, stop=stop):
            if pipeline.monitor.n >= stop:
                raise KeyboardInterrupt

        job.pipeline.on_batch = kill
        with pytest.raises(KeyboardInterrupt):
            job.run()
    summary = replay(log, out, checkpoint=ckpt, checkpoint_every=1_000, **opts)
    for name in ("metrics.jsonl", "alerts.jsonl", "rejected.jsonl"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    assert [r["line"] for r in _jsonl(out / "rejected.jsonl")] == sorted(bad)
    assert summary["rejected"] == len(bad) and summary["events"] == 12_000 - len(bad)
    assert summary["resumed"]


PERIOD_CONFIG = """
[input]
require_ts = false
[monitor]
every = 50
group_by = "seg"
[monitor.metrics]
roc_auc = "roc_auc"
"auc_1h" = { metric = "roc_auc", period = 3600, lateness = 60 }
"""


def test_rows_without_the_time_a_window_needs_are_rejected(tmp_path):
    """``require_ts = false`` lets a row without time through the event checks, but a
    window by period needs one: the Monitor refuses it, and with skip it is a rejected
    row, naming the field; the other rows give sklearn's AUC, overall and per segment."""
    rows = _rows(2_000, seed=3, segments=["eu", "us", "apac"])
    no_ts = set(range(7, 2_000, 13)) | {1, 2, 1_999}
    lines = []
    for i, r in enumerate(rows, start=1):
        if i in no_ts:
            r = {k: v for k, v in r.items() if k != "ts"}
            if i % 2:
                r["ts"] = None
        lines.append(r)
    log = _write(tmp_path / "log.jsonl", lines)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(PERIOD_CONFIG)
    out = tmp_path / "out"
    summary = replay(log, out, config=cfg, on_error="skip", report=False, progress=False,
                     checkpoint=tmp_path / "ck.json", checkpoint_every=300)
    rejected = _jsonl(out / "rejected.jsonl")
    assert [r["line"] for r in rejected] == sorted(no_ts)
    assert all(r["reason"].startswith("ts is missing: this monitor needs event times")
               for r in rejected)
    assert summary["rejected"] == len(no_ts) and summary["events"] == 2_000 - len(no_ts)
    good = [r for i, r in enumerate(lines, start=1) if i not in no_ts]
    for seg in (None, "eu", "us", "apac"):
        sub = [r for r in good if seg is None or r["seg"] == seg]
        assert _final(out, seg)["values"]["roc_auc"] == pytest.approx(
            roc_auc_score([r["label"] for r in sub], [r["score"] for r in sub]), abs=1e-12)
    with pytest.raises(Exception, match="line 1: ts is missing"):
        replay(log, tmp_path / "o2", config=cfg, report=False, progress=False)


# ----------------------------------------------------------- many refusals in a batch


class _OneBatch:
    """A source yielding one batch, recording its rejected rows."""

    on_error = "skip"

    def __init__(self, batch):
        from streameval.events import FieldMap

        self.batch, self.fields, self.got = batch, FieldMap(), []
        self.rejected = lambda line, reason, raw: self.got.append((line, reason))

    def __iter__(self):
        yield self.batch


def _counting(monitor):
    """Count the calls and rows the Monitor's validate and update_many are given."""
    calls = {"validate": [0, 0], "update_many": [0, 0]}
    for name in calls:
        fn = getattr(monitor, name)

        def wrapped(*a, _fn=fn, _c=calls[name], **k):
            _c[0] += 1
            _c[1] += len(a[1])
            return _fn(*a, **k)

        setattr(monitor, name, wrapped)
    return calls


@pytest.mark.parametrize("kind", ["score", "weight"])
def test_a_batch_with_ten_percent_refused_rows_costs_linear_work(kind):
    """65 536 rows, 10% refused by the Monitor: a score outside [0, 1] (found in one
    vectorised pass) or a weight over the maximum (found one by one: the rows before
    a refused one are fed next, then a part doubling after each success). The work
    given to the Monitor stays a small multiple of the batch, never rows x refusals;
    the refused rows are exactly the bad ones; the metrics are sklearn's on the rest."""
    from streameval.events import EventBatch
    from streameval.monitor import Monitor
    from streameval.pipeline import Pipeline

    n = 65_536
    rng = np.random.default_rng(4)
    y = rng.random(n) < 0.3
    s = rng.random(n)
    w = np.ones(n)
    bad = rng.random(n) < 0.10
    if kind == "score":
        s[bad] = 1.0 + rng.random(bad.sum())
    else:
        w[bad] = 1e13
    batch = EventBatch(y, s, T0 + np.arange(n, dtype=float), w, np.arange(1, n + 1))
    monitor = Monitor.from_config({"every": 1000, "metrics": {
        "roc_auc": "roc_auc", "log_loss": "log_loss",
        "auc_1h": {"metric": "roc_auc", "period": 3600, "lateness": 60}}})
    calls = _counting(monitor)
    src = _OneBatch(batch)
    p = Pipeline(monitor, src)
    t = time.perf_counter()
    p.run()
    elapsed = time.perf_counter() - t
    k = int(bad.sum())
    assert [line for line, _ in src.got] == (np.flatnonzero(bad) + 1).tolist()
    assert p.counts()["rejected"] == k and p.monitor.n == n - k
    rows_probed = calls["validate"][1] + calls["update_many"][1]
    # (update_many calls validate: those calls are counted in both)
    if kind == "score":
        assert calls["update_many"][0] <= 3 and calls["validate"][0] <= 6
        assert src.got[0][1].startswith("score = ")
    else:
        assert calls["update_many"][0] <= 3  # the validation sweep found them all
        assert calls["validate"][0] <= 4 * k
        assert src.got[0][1].startswith("weight = 10000000000000.0: ")
    assert rows_probed <= 8 * n, rows_probed
    values = p.monitor.snapshot()["segments"][None]["values"]
    assert values["roc_auc"] == pytest.approx(roc_auc_score(y[~bad], s[~bad]), abs=1e-12)
    assert values["log_loss"] == pytest.approx(log_loss(y[~bad], s[~bad]), rel=1e-9)


def test_a_sink_failing_mid_batch_is_not_taken_for_a_bad_row():
    """A ValueError after the Monitor counted part of a batch (here a metrics sink
    failing at the second evaluation) is no refusal of a row: setting a row aside and
    feeding the batch again would count events twice. The run stops instead."""
    from streameval.events import EventBatch
    from streameval.monitor import Monitor
    from streameval.pipeline import Pipeline

    n = 500
    rng = np.random.default_rng(8)
    batch = EventBatch(rng.random(n) < 0.5, rng.random(n), T0 + np.arange(n, dtype=float),
                       np.ones(n), np.arange(1, n + 1))
    monitor = Monitor.from_config({"every": 100, "metrics": {"roc_auc": "roc_auc"}})
    seen = []

    def sink(row):
        seen.append(row["n"])
        if len(seen) == 2:
            raise ValueError("disk says no")

    monitor.on_metrics.append(sink)
    with pytest.raises(RuntimeError, match=r"counted 200 event\(s\) of a batch it refused "
                                           r"\(lines 1\.\.500\): ValueError: disk says no"):
        Pipeline(monitor, _OneBatch(batch)).run()
    assert seen == [100, 200]


def test_delayed_labels_a_refused_joined_event_is_a_rejected_row(tmp_path, capsys):
    """With delayed labels the Monitor sees the joined event when its label arrives: a
    prediction whose score log loss refuses is rejected at its label row's line."""
    rows = []
    for i in range(60):
        rows.append({"id": f"p{i}", "ts": T0 + i, "score": 1.5 if i == 10 else (i % 10) / 10})
        if i >= 3:
            rows.append({"id": f"p{i - 3}", "ts": T0 + i, "label": (i - 3) % 2})
    log = _write(tmp_path / "log.jsonl", rows)
    label_line = 1 + rows.index({"id": "p10", "ts": T0 + 13, "label": 0})
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[input]\nlabel_ttl = 100\n" + LOGLOSS_CONFIG)
    out = tmp_path / "out"
    summary = replay(log, out, config=cfg, on_error="skip", report=False, progress=False)
    assert [(r["line"], r["reason"], r["raw"]["id"]) for r in _jsonl(out / "rejected.jsonl")] == [
        (label_line, "score = 1.5: probability must be in [0, 1] (metric 'log_loss' needs "
                     "probabilities)", "p10")]
    assert (summary["events"], summary["rejected"], summary["unlabeled"]) == (56, 1, 3)
    joined = [j for j in range(57) if j != 10]  # the labelled predictions but p10
    assert _final(out)["values"]["roc_auc"] == pytest.approx(
        roc_auc_score([j % 2 for j in joined], [(j % 10) / 10 for j in joined]), abs=1e-12)
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(tmp_path / "o"),
                 "--no-report", "-q"]) == 2
    assert f"{log}: line {label_line}: score = 1.5" in capsys.readouterr().err


def test_an_internal_error_exits_3_not_1(tmp_path, capsys, monkeypatch):
    """Exit status 1 says "an alert fired": a bug must not look like one."""
    import streameval.pipeline

    def boom(self, batch):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(streameval.pipeline.Pipeline, "take", boom)
    log = _write(tmp_path / "log.jsonl", _rows(10))
    assert main(["replay", str(log), "--out", str(tmp_path / "o"), "--no-report", "-q"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError: a bug" in err
    assert err.rstrip().endswith("internal error (a bug; the traceback above says where)")


# ------------------------------------------------------------ logs that cannot be read


def _data(n=3_000, seed=5):
    return "".join(json.dumps(r) + "\n" for r in _rows(n, seed=seed)).encode()


def _csv(n=3_000, seed=5):
    return ("ts,label,score\n" + "".join(f"{r['ts']},{r['label']},{r['score']}\n"
                                          for r in _rows(n, seed=seed))).encode()


def _truncated(comp):
    return lambda d: comp(_data())[: len(comp(_data())) * 2 // 3]


def _crc_flipped(d):
    z = bytearray(gzip.compress(_data()))
    z[-6] ^= 0xFF  # the CRC-32 in the trailer
    return bytes(z)


def _deflate_damaged(d):
    z = bytearray(gzip.compress(_data()))
    z[10:20] = b"\xff" * 10  # the first deflate block's header: "invalid block type"
    return bytes(z)


UNREADABLE = {
    "truncated.jsonl.gz": (_truncated(gzip.compress), "the compressed data ends early"),
    "truncated.csv.gz": (lambda d: gzip.compress(_csv())[:2000],
                         "the compressed data ends early"),
    "crc.jsonl.gz": (_crc_flipped, "bad gzip data: CRC check failed"),
    "damaged.jsonl.gz": (_deflate_damaged, "corrupt compressed data (Error -3"),
    "not-gzip.jsonl.gz": (lambda d: b"plain text, not gzip\n", "bad gzip data: Not a gzipped file"),
    "truncated.jsonl.bz2": (_truncated(bz2.compress), "the compressed data ends early"),
    "garbage.jsonl.bz2": (lambda d: b"BZh9" + b"\x00" * 200, "corrupt compressed data"),
    "truncated.jsonl.xz": (_truncated(lzma.compress), "the compressed data ends early"),
    "garbage.jsonl.xz": (lambda d: b"\xfd7zXZ\x00" + b"\x01" * 100, "corrupt compressed data"),
    "damaged.parquet": (lambda d: b"PAR1" + b"\x00" * 64, "Parquet"),
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_a_log_that_cannot_be_read_exits_2_with_one_line(tmp_path, capsys, name, on_error):
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    make, reason = UNREADABLE[name]
    log = tmp_path / name
    log.write_bytes(make(None))
    status = main(["replay", str(log), "--out", str(tmp_path / "o"), "--no-report", "-q",
                   "--on-error", on_error])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"streameval replay: error: {log}: cannot read")
    assert reason in err


def test_a_directory_and_an_io_error_exit_2_naming_the_file(tmp_path, capsys):
    d = tmp_path / "logs.jsonl"
    d.mkdir()
    assert main(["replay", str(d), "--out", str(tmp_path / "o"), "--no-report"]) == 2
    assert capsys.readouterr().err == (
        f"streameval replay: error: {d}: is a directory, not a log file\n")
    # an I/O error even root gets (permissions do not stop root): /proc/self/mem at 0
    if not os.path.exists("/proc/self/mem"):
        pytest.skip("no /proc/self/mem here")
    mem = tmp_path / "mem.jsonl"
    mem.symlink_to("/proc/self/mem")
    assert main(["replay", str(mem), "--out", str(tmp_path / "o"), "--no-report"]) == 2
    assert capsys.readouterr().err == (
        f"streameval replay: error: {mem}: cannot read: Input/output error\n")


def test_unreadable_labels_file_is_named(tmp_path, capsys):
    log = _write(tmp_path / "pred.jsonl", [{"id": i, "ts": T0 + i, "score": 0.5} for i in range(10)])
    labels = tmp_path / "labels.jsonl.gz"
    labels.write_bytes(gzip.compress(b'{"id": 1, "ts": 1700000005, "label": 1}\n' * 400)[:100])
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[input]\nlabel_ttl = 100\nlabels = "{labels.name}"\n')
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(tmp_path / "o"),
                 "--no-report"]) == 2
    err = capsys.readouterr().err
    assert err == (f"streameval replay: error: {labels}: cannot read: "
                   "the compressed data ends early (truncated file?)\n")


def test_truncated_log_leaves_what_was_read_and_no_summary(tmp_path, capsys):
    """The choice for a log that breaks mid-way: exit 2 naming the last line read
    whole; metrics.jsonl holds the rows of the events read before (a prefix of the
    rows of a whole run); the last checkpoint stays loadable; no summary.json, and
    that of a former run in the same --out is gone (it would describe other outputs)."""
    rows = _rows(4_000, seed=6)
    whole = "".join(json.dumps(r) + "\n" for r in rows).encode()
    ref = tmp_path / "ref"
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(whole)
    assert main(["replay", str(plain), "--out", str(ref), "--no-report", "-q",
                 "--checkpoint-every", "500", "--checkpoint", str(tmp_path / "ref.ck")]) == 0
    gz = gzip.compress(whole)
    log = tmp_path / "log.jsonl.gz"
    log.write_bytes(gz[: len(gz) * 3 // 4])
    out, ckpt = tmp_path / "out", tmp_path / "ck.json"
    assert main(["replay", str(plain), "--out", str(out), "--no-report", "-q"]) == 0
    assert (out / "summary.json").exists()
    assert main(["replay", str(log), "--out", str(out), "--no-report", "-q",
                 "--checkpoint", str(ckpt), "--checkpoint-every", "500"]) == 2
    err = capsys.readouterr().err
    position = int(err.split("cannot read past line ")[1].split(":")[0])
    assert 0 < position < 4_000 and position % 500 == 0
    assert not (out / "summary.json").exists()
    got = (out / "metrics.jsonl").read_bytes()
    assert got and (ref / "metrics.jsonl").read_bytes().startswith(got)
    assert _jsonl(out / "metrics.jsonl")[-1]["n"] <= position
    state = load_checkpoint(ckpt)
    assert not state["done"] and state["counts"]["events"] <= position


def test_bz2_and_xz_logs_are_read(tmp_path):
    rows = _rows(3_000, seed=7)
    text = "".join(json.dumps(r) + "\n" for r in rows).encode()
    csv_text = ("ts,label,score\n" + "".join(f"{r['ts']},{r['label']},{r['score']}\n"
                                            for r in rows)).encode()
    expected = roc_auc_score([r["label"] for r in rows], [r["score"] for r in rows])
    for name, data in (("a.jsonl.bz2", bz2.compress(text)), ("b.jsonl.xz", lzma.compress(text)),
                       ("c.csv.xz", lzma.compress(csv_text)), ("d.CSV.BZ2", bz2.compress(csv_text))):
        log = tmp_path / name
        log.write_bytes(data)
        out = tmp_path / (name + ".out")
        summary = replay(log, out, report=False, progress=False)
        assert summary["events"] == 3_000, name
        assert _final(out)["values"]["roc_auc"] == pytest.approx(expected, abs=1e-12), name


def test_csv_bytes_that_are_not_utf8_are_bad_rows(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_bytes(b"ts,label,score,note\n1,1,0.9,ok\n2,0,0.\xe9,x\n3,0,0.2,caf\xe9\n4,1,0.7,\n")
    out = tmp_path / "out"
    assert main(["replay", str(log), "--out", str(out), "--no-report", "-q",
                 "--on-error", "skip"]) == 0
    # the unread column "note" may hold anything; the score cell may not
    assert _jsonl(out / "rejected.jsonl") == [
        {"line": 3, "reason": "not valid UTF-8", "raw": "2,0,0.\ufffd,x"}]
    assert json.loads((out / "summary.json").read_text())["events"] == 3
    assert main(["replay", str(log), "--out", str(out), "--no-report", "-q"]) == 2
    assert f"{log}: line 3: not valid UTF-8" in capsys.readouterr().err
    bad_header = tmp_path / "h.csv"
    bad_header.write_bytes(b"ts,lab\xffel,score\n1,1,0.5\n")
    assert main(["replay", str(bad_header), "--out", str(out), "--no-report", "-q"]) == 2
    assert "line 1: bad CSV header: not valid UTF-8" in capsys.readouterr().err


@pytest.mark.parametrize("parser", ["orjson", "json"])
def test_json_lines_no_parser_can_hold_are_bad_rows(tmp_path, monkeypatch, parser):
    """Lines nested deeper than the parsers go (orjson stops at 1 024 levels, json at
    the recursion limit) and integers of more than 4 300 digits are bad JSON with
    their line, not a crash or a stop without a line; with and without orjson."""
    import streameval.io.sources as sources

    if parser == "json":
        monkeypatch.setattr(sources, "_loads", json.loads)
    rows = _rows(20, seed=9)
    lines = [json.dumps(r) for r in rows]
    lines.insert(3, '{"ts": 1, "label": 1, "score": 0.5, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    lines.insert(7, "[" * 50_000)
    lines.insert(11, '{"ts": 1, "label": 1, "score": ' + "7" * 5_000 + "}")
    log = _write(tmp_path / "log.jsonl", lines)
    out = tmp_path / "out"
    summary = replay(log, out, on_error="skip", report=False, progress=False)
    assert [(r["line"], r["reason"]) for r in _jsonl(out / "rejected.jsonl")] == [
        (4, "bad JSON: nested too deeply"), (8, "bad JSON: nested too deeply"),
        (12, "bad JSON: Exceeds the limit (4300 digits) for integer string conversion: "
             "value has 5000 digits")]
    assert summary["events"] == 20
    assert _final(out)["values"]["roc_auc"] == pytest.approx(
        roc_auc_score([r["label"] for r in rows], [r["score"] for r in rows]), abs=1e-12)


# --------------------------------------------------------------------------- fuzz

NASTY_STRINGS = ["", " ", "\ud800", "a\udfffb", "\udc80\ud800", "NaN", "1e400", "-1",
                 "2023-11-14T22:13:20Z", "2023-02-30T00:00:00", "null", "\x00", "é", "0.5",
                 "true", "1", "seg\nment"]
HUGE = [1e308, -1e308, 10**400, -(10**30), 1e-320, 5e-324, 2**63, 1e12, 1e13, 1e300]
scalars = (st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(HUGE)
           | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(NASTY_STRINGS)
           | st.text(max_size=4))
any_json = st.recursive(scalars, lambda c: st.lists(c, max_size=3)
                        | st.dictionaries(st.text(max_size=3), c, max_size=3), max_leaves=6)
MISSING = object()


def _field(draw, plausible, missing=1):
    """A field's value: out of 20 draws, ``missing`` absent, 1 arbitrary JSON, the
    rest plausible (which still holds hostile values)."""
    k = draw(st.integers(0, 19))  # hypothesis favours small k: plausible ones
    if k >= 20 - missing:
        return MISSING
    if k == 19 - missing:
        return draw(any_json)
    return draw(plausible)


@st.composite
def rows(draw):
    row = {}
    values = {
        "ts": (st.one_of(st.integers(0, 200).map(lambda i: T0 + i * 30.0),
                         st.integers(T0 - 7200, T0 + 7200).map(float),  # late, far ahead
                         st.sampled_from(["2023-11-14T22:13:20Z", "2023-11-14T23:13:20+01:00"])), 1),
        "label": (st.sampled_from([0, 1, True, False, 1.0, "1", 2]), 1),
        "score": (st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, 1.5, -0.1, 1e308])), 1),
        "weight": (st.sampled_from([0.0, 0.5, 1, 2.5, 1e12, 1e13, -1, 1e308]), 10),
        "id": (st.one_of(st.integers(0, 5), st.sampled_from(["a", "b", "\ud800", 2**70])), 10),
        "seg": (st.sampled_from(["eu", "us", 7, 2.5, True, "\ud800", "x\udfff", float("nan")]), 6),
    }
    for name, (plausible, missing) in values.items():
        v = _field(draw, plausible, missing)
        if v is not MISSING:
            row[name] = v
    return row


class Raw(str):
    """A line written as it is (not as JSON)."""


def _line(x):
    if isinstance(x, Raw):
        return str(x)
    return json.dumps(x, ensure_ascii=True)  # lone surrogates as \ud800 escapes; NaN tokens


good_rows = st.fixed_dictionaries(
    {"ts": st.integers(0, 200).map(lambda i: T0 + i * 30.0), "label": st.sampled_from([0, 1]),
     "score": st.floats(0, 1)},
    optional={"weight": st.sampled_from([0.0, 0.5, 1, 2.5]), "id": st.integers(0, 5),
              "seg": st.sampled_from(["eu", "us", 7])})

line_strategy = st.one_of(
    good_rows, good_rows, good_rows, rows(), rows(),
    st.sampled_from(["", "   ", "[1, 2]", "null", "{", '{"ts": 1', "\x00", "\ufeff{}",
                     '{"label": 1, "score": 0.5, "label": 0, "ts": 1700000000}',
                     '{"ts": 1700000000, "label": 1, "score": 1e999}',
                     '{"ts": 1e999, "label": 1, "score": 0.5}', "[" * 3_000 + "]" * 3_000,
                     '{"ts": 1700000000, "label": 1, "score": 1%s}' % ("0" * 5_000)]).map(Raw),
    any_json,
)

FUZZ_CONFIGS = {
    "default": None,  # the default monitor: default metrics, sliding windows, drift rules
    "segments": """
[input]
require_ts = false
[monitor]
every = 3
every_seconds = 600
group_by = "seg"
[monitor.metrics]
roc_auc = "roc_auc"
average_precision = "average_precision"
log_loss = "log_loss"
brier = "brier"
f1 = "f1"
"recall@5" = { metric = "recall", size = 5 }
"auc_1h" = { metric = "roc_auc", period = 3600, lateness = 120 }
"precision_10m" = { metric = "precision", window = "tumbling", period = 600 }
[[monitor.rules]]
name = "auc_low"
metric = "roc_auc"
op = "<"
value = 0.6
[[monitor.rules]]
name = "recall_low"
metric = "recall@5"
op = "<"
value = 0.5
""",
}


def _strict_json(text):
    def no_constants(c):
        raise ValueError(f"{c} in an output")

    return json.loads(text, parse_constant=no_constants)


def _check_outputs(out):
    for name in ("metrics.jsonl", "alerts.jsonl", "rejected.jsonl"):
        data = (out / name).read_bytes().decode("utf-8")  # strict: valid UTF-8
        assert data == "" or data.endswith("\n")
        for x in data.split("\n")[:-1]:
            _strict_json(x)
    return _strict_json((out / "summary.json").read_bytes().decode("utf-8"))


def _killed_after_first_checkpoint(log, out, **opts):
    job = Replay(log, out, **opts)
    ckpt = Path(opts["checkpoint"])

    def stop(pipeline, batch):
        return not ckpt.exists()  # stop at the batch after the first checkpoint

    job.pipeline.on_batch = stop
    job.run()
    return job.pipeline.stopped


@pytest.mark.parametrize("config", sorted(FUZZ_CONFIGS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(line_strategy, min_size=1, max_size=40))
def test_fuzz_replay_skip_never_fails_and_accounts_for_every_row(tmp_path_factory, config, lines):
    """Arbitrary JSON in every field (lone surrogates, 1e308, 10**400, NaN, nested
    values, missing fields, lines that are not objects): ``replay --on-error skip``
    exits 0 or 1, never 2 or an exception; each non-blank row is counted or rejected
    (with its line), exactly once; the outputs are strict JSON in valid UTF-8; the
    accepted lines alone replay (with fail) to the same outputs; a checkpoint written
    mid-way loads, and resuming from it gives the outputs of an uninterrupted run."""
    d = tmp_path_factory.mktemp("fuzz")
    text = [_line(x) for x in lines]
    log = d / "log.jsonl"
    log.write_text("".join(t + "\n" for t in text), encoding="utf-8")
    argv = ["replay", str(log), "--out", str(d / "out"), "--on-error", "skip", "--no-report",
            "-q", "--fail-on-alert", "--checkpoint", str(d / "ck.json"), "--checkpoint-every", "4",
            "--allow-empty"]  # (a log of rejected rows only: its own test says exit 2)
    cfg = FUZZ_CONFIGS[config]
    if cfg is not None:
        (d / "cfg.toml").write_text(cfg)
        argv += ["--config", str(d / "cfg.toml")]
    status = main(argv)
    assert status in (0, 1)
    out = d / "out"
    summary = _check_outputs(out)
    nonblank = [k for k, t in enumerate(text, start=1) if t.strip()]
    rejected = [r["line"] for r in _jsonl(out / "rejected.jsonl")]
    assert len(rejected) == len(set(rejected)) == summary["rejected"]
    assert set(rejected) <= set(nonblank)
    assert summary["rows"] == len(nonblank)
    assert summary["events"] + summary["rejected"] == len(nonblank)
    metric_rows = _jsonl(out / "metrics.jsonl")
    last = metric_rows[-1]  # a segment row's n is its own; stream_n the stream's
    assert last.get("stream_n", last["n"]) == summary["events"]
    state = load_checkpoint(d / "ck.json")
    assert state["done"] and state["counts"]["events"] == summary["events"]

    # the accepted rows: plausible values, and sklearn's AUC over them
    kept = [json.loads(text[k - 1]) for k in nonblank if k not in set(rejected)]
    for r in kept:  # numbers as strings are numbers (the one rule of every format)
        for key in ("label", "score", "weight"):
            v = r.get(key)
            if isinstance(v, str):
                v = v.strip().lower()
                r[key] = None if not v else {"true": 1, "false": 0}.get(v) or float(v)
    for r in kept:  # both monitors have log_loss: probabilities
        assert r["label"] in (0, 1) and 0 <= r["score"] <= 1, r
    y = [bool(r["label"]) for r in kept]
    if 0 < sum(y) < len(y):
        w = [float(r.get("weight", 1) if r.get("weight") is not None else 1) for r in kept]
        final = [r for r in metric_rows if r["segment"] is None][-1]["values"]["roc_auc"]
        if sum(wi for wi, yi in zip(w, y) if yi) > 0 and sum(wi for wi, yi in zip(w, y) if not yi) > 0:
            expected = roc_auc_score(y, [r["score"] for r in kept], sample_weight=w)
            assert final == pytest.approx(expected, abs=1e-9)

    # the accepted lines alone, with --on-error fail: the same outputs
    clean = d / "clean.jsonl"
    clean.write_text("".join(text[k - 1] + "\n" for k in nonblank if k not in set(rejected)),
                     encoding="utf-8")
    ref = d / "ref"
    argv2 = ["replay", str(clean), "--out", str(ref), "--no-report", "-q", "--allow-empty"]
    if cfg is not None:
        argv2 += ["--config", str(d / "cfg.toml")]
    assert main(argv2) == 0
    for name in ("metrics.jsonl", "alerts.jsonl"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name

    # killed after the first checkpoint, then resumed: the uninterrupted outputs
    opts = dict(config=(d / "cfg.toml") if cfg else None, on_error="skip", report=False,
                progress=False, checkpoint=d / "ck2.json", checkpoint_every=4,
                allow_empty=True)
    if _killed_after_first_checkpoint(log, d / "out2", **opts):
        mid = load_checkpoint(d / "ck2.json")
        assert not mid["done"]
        replay(log, d / "out2", **opts)
        for name in ("metrics.jsonl", "alerts.jsonl", "rejected.jsonl"):
            assert (d / "out2" / name).read_bytes() == (out / name).read_bytes(), name


# ------------------------------------------------ bounded memory, bounded time, no loss


def _limited(limit=1 << 30):
    """preexec_fn: the replay's address space capped (1 GiB: Python, numpy and river fit,
    a line or a decompressed file of several GiB does not)."""
    import resource

    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return set_limit


def _replay_limited(argv, cwd, stdin=None, feed=None):
    """Run ``streameval replay`` in a subprocess under a memory limit; ``feed(pipe)``
    writes its stdin from a thread. Returns (status, stderr, seconds)."""
    import subprocess
    import sys
    import threading

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1]),
                                           os.environ.get("PYTHONPATH", "")]))
    t = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "streameval", "replay", *argv], cwd=cwd,
                         stdin=subprocess.PIPE if feed else stdin, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, preexec_fn=_limited(), env=env)
    if feed:
        def write():
            try:
                feed(p.stdin)
            except BrokenPipeError:
                pass
            finally:
                try:
                    p.stdin.close()
                except BrokenPipeError:
                    pass
        threading.Thread(target=write, daemon=True).start()
    err = p.stderr.read().decode()
    status = p.wait(timeout=600)
    return status, err, time.monotonic() - t


GOOD = [{"ts": T0, "label": 1, "score": 0.75}, {"ts": T0 + 1, "label": 0, "score": 0.25}]


def test_a_2gib_line_is_a_rejected_row_under_a_memory_limit(tmp_path):
    """One line of 2 GiB between two good rows, on stdin (never written to disk), under
    a 1 GiB address-space limit: with skip, exit 0, the line is one rejected row named
    with its size, the good rows count; with fail, exit 2 naming line 2."""
    def feed(pipe):
        pipe.write((json.dumps(GOOD[0]) + "\n").encode())
        chunk = b"a" * (1 << 20)
        for _ in range(2048):
            pipe.write(chunk)
        pipe.write(("\n" + json.dumps(GOOD[1]) + "\n").encode())

    status, err, _ = _replay_limited(["-", "--out", "o", "--no-report", "-q", "--on-error",
                                      "skip"], tmp_path, feed=feed)
    assert status == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (summary["rows"], summary["events"], summary["rejected"]) == (3, 2, 1)
    (rej,) = _jsonl(tmp_path / "o" / "rejected.jsonl")
    assert rej["line"] == 2 and rej["reason"] == (
        f"line is {2 << 30} bytes, more than the limit of {1 << 20} bytes "
        "([input] max_line_bytes)")
    assert rej["raw"].startswith("aaaa") and len(rej["raw"]) < 300
    status, err, _ = _replay_limited(["-", "--out", "o2", "--no-report", "-q"], tmp_path,
                                     feed=feed)
    assert status == 2 and err.count("\n") == 1
    assert f"line 2: line is {2 << 30} bytes" in err


def _gzip_members(payload, copies):
    """A gzip file of ``copies`` members of ``payload`` (compressed once): GiB of output
    from a few MB, built in well under a second."""
    return gzip.compress(payload, 9) * copies


def test_a_compression_bomb_stops_quickly_under_a_memory_limit(tmp_path):
    """4 GiB of one byte in 4 MB of gzip (named .jsonl: recognised by its magic bytes):
    exit 2 with one line naming the expansion, long before 4 GiB are read, under a
    1 GiB limit, with either --on-error."""
    log = tmp_path / "bomb.jsonl"
    log.write_bytes(gzip.compress((json.dumps(GOOD[0]) + "\n").encode())
                    + _gzip_members(b"a" * (64 << 20), 64))
    for mode in ("skip", "fail"):
        status, err, seconds = _replay_limited([str(log), "--out", "o", "--no-report", "-q",
                                                "--on-error", mode], tmp_path)
        assert status == 2 and err.count("\n") == 1, err
        assert err.startswith(f"streameval replay: error: {log}: cannot read")
        assert "expands more than 100 times" in err and "compression bomb" in err
        assert seconds < 120


def test_a_gigabyte_of_newlines_costs_seconds(tmp_path):
    """1 GiB of blank lines around two rows: through a pipe they are counted in bulk
    (the rows keep their line numbers); gzipped, the expansion guard stops it early."""
    def feed(pipe):
        pipe.write((json.dumps(GOOD[0]) + "\n").encode())
        chunk = b"\n" * (1 << 20)
        for _ in range(1024):
            pipe.write(chunk)
        pipe.write((json.dumps(GOOD[1]) + "\n" + "{bad\n").encode())

    status, err, seconds = _replay_limited(["-", "--out", "o", "--no-report", "-q",
                                            "--on-error", "skip"], tmp_path, feed=feed)
    assert status == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (summary["rows"], summary["events"], summary["rejected"]) == (3, 2, 1)
    assert [r["line"] for r in _jsonl(tmp_path / "o" / "rejected.jsonl")] == [(1 << 30) + 3]
    assert seconds < 300
    log = tmp_path / "blank.jsonl.gz"
    log.write_bytes(gzip.compress((json.dumps(GOOD[0]) + "\n").encode())
                    + _gzip_members(b"\n" * (64 << 20), 16))
    status, err, seconds = _replay_limited([str(log), "--out", "o", "--no-report", "-q"],
                                           tmp_path)
    assert status == 2 and "expands more than 100 times" in err and seconds < 120


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_max_line_bytes_from_the_config(tmp_path, fmt):
    """``[input] max_line_bytes``: a longer line is a rejected row (skip) or names its
    line (fail); the others are read; CSV fields past 128 KiB (the csv module's own
    limit) are read when the line limit allows them."""
    big = "x" * 200_000
    if fmt == "jsonl":
        lines = [json.dumps(GOOD[0]), json.dumps({**GOOD[1], "note": big}),
                 json.dumps(GOOD[1])]
        long_line = 2
    else:
        lines = ["ts,label,score,note", f"{T0},1,0.75,a", f"{T0 + 1},0,0.25,{big}",
                 f"{T0 + 1},0,0.25,b"]
        long_line = 3
    log = _write(tmp_path / f"log.{fmt}", lines)
    cfg = tmp_path / "cfg.toml"
    for limit, rejected in ((100_000, [long_line]), (1 << 20, [])):
        cfg.write_text(f"[input]\nmax_line_bytes = {limit}\n")
        out = tmp_path / f"o{limit}"
        assert main(["replay", str(log), "--config", str(cfg), "--out", str(out),
                     "--no-report", "-q", "--on-error", "skip"]) == 0
        got = _jsonl(out / "rejected.jsonl")
        assert [r["line"] for r in got] == rejected
        summary = json.loads((out / "summary.json").read_text())
        assert summary["events"] + summary["rejected"] == 3


def test_an_id_over_the_byte_cap_is_a_rejected_row(tmp_path):
    """Ids, segment values and label strings are capped in bytes where a row is parsed
    (MAX_ID_BYTES, MAX_SEGMENT_BYTES, MAX_LABEL_BYTES), in every format; a refusal is
    counted like any bad row."""
    from streameval.validation import MAX_ID_BYTES, MAX_SEGMENT_BYTES

    rows = [{**GOOD[0], "id": "a" * MAX_ID_BYTES, "seg": "fr"},
            {**GOOD[1], "id": "a" * (MAX_ID_BYTES + 1), "seg": "fr"},
            {**GOOD[1], "id": "ok", "seg": "é" * (MAX_SEGMENT_BYTES // 2 + 1)},
            {**GOOD[1], "id": "ok2", "seg": "de", "label": "1" + " " * 300}]
    log = _write(tmp_path / "log.jsonl", rows)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[monitor]\ngroup_by = "seg"\n[monitor.metrics]\nroc_auc = "roc_auc"\n')
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(tmp_path / "o"),
                 "--no-report", "-q", "--on-error", "skip"]) == 0
    got = {r["line"]: r["reason"] for r in _jsonl(tmp_path / "o" / "rejected.jsonl")}
    assert got[2].startswith(f"id is {MAX_ID_BYTES + 1} bytes, more than the limit of "
                             f"{MAX_ID_BYTES} bytes")
    assert got[3].startswith(f"seg is {MAX_SEGMENT_BYTES + 2} bytes, more than the limit of "
                             f"{MAX_SEGMENT_BYTES} bytes")
    assert 4 not in got  # "1" and its blanks: 301 bytes, but the label is "1" stripped
    assert sorted(got) == [2, 3]


def test_a_gzip_named_jsonl_is_read_by_its_content(tmp_path):
    rows = _rows(50, seed=3)
    log = tmp_path / "log.jsonl"
    log.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    out = tmp_path / "o"
    assert main(["replay", str(log), "--out", str(out), "--no-report", "-q"]) == 0
    assert json.loads((out / "summary.json").read_text())["events"] == 50
    plain = _write(tmp_path / "plain.jsonl", rows)
    assert main(["replay", str(plain), "--out", str(tmp_path / "p"), "--no-report", "-q"]) == 0
    assert _jsonl(out / "metrics.jsonl") == _jsonl(tmp_path / "p" / "metrics.jsonl")


@pytest.mark.parametrize("content,found", [
    ("", "no rows"), ("\n\n  \n", "no rows"), ("ts,label,score\n", "no rows"),
    ('{"ts": 1, "label": 1, "score": "x"}\n{"nope": 1}\n', "all 2 rows were rejected"),
])
def test_a_log_without_events_is_an_error_unless_allowed(tmp_path, capsys, content, found):
    """Empty, blank, header-only, or every row rejected (with skip): exit 2 and one
    line naming the log and what was found; --allow-empty (or [input] allow_empty)
    accepts it."""
    log = tmp_path / ("log.csv" if content.startswith("ts,") else "log.jsonl")
    log.write_text(content)
    argv = ["replay", str(log), "--out", str(tmp_path / "o"), "--no-report", "-q",
            "--on-error", "skip"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{log}: no events: {found}" in err
    assert "--allow-empty" in err
    assert main(argv + ["--allow-empty"]) == 0
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[input]\nallow_empty = true\n")
    assert main(argv + ["--config", str(cfg)]) == 0


def test_random_bytes_with_skip_exit_2(tmp_path, capsys):
    rng = np.random.default_rng(0)
    log = tmp_path / "noise.jsonl"
    log.write_bytes(rng.integers(0, 256, 2_000_000, dtype=np.uint8).tobytes())
    assert main(["replay", str(log), "--out", str(tmp_path / "o"), "--no-report", "-q",
                 "--on-error", "skip"]) == 2
    err = capsys.readouterr().err
    rejected = len(_jsonl(tmp_path / "o" / "rejected.jsonl"))
    assert rejected > 1000 and f"all {rejected:,} rows were rejected" in err


def test_a_header_typo_does_not_suggest_skip(tmp_path, capsys):
    log = _write(tmp_path / "log.csv", ["ts,label,scroe", f"{T0},1,0.5"])
    for mode in ("fail", "skip"):
        assert main(["replay", str(log), "--out", str(tmp_path / "o"), "--no-report", "-q",
                     "--on-error", mode]) == 2
        err = capsys.readouterr().err
        assert "no column 'score' in the CSV header" in err and "--on-error" not in err
    bad = _write(tmp_path / "bad.jsonl", [GOOD[0], '{"ts": 1, "label": 1, "score": "x"}'])
    assert main(["replay", str(bad), "--out", str(tmp_path / "o"), "--no-report", "-q"]) == 2
    assert "(use --on-error skip to set bad rows aside)" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["metrics.jsonl", "alerts.jsonl", "rejected.jsonl"])
def test_a_symlink_in_out_is_refused_not_followed(tmp_path, capsys, name):
    """An output that is a symbolic link (to a file outside --out, existing or not):
    exit 2 naming it; the target is neither created nor changed."""
    log = _write(tmp_path / "log.jsonl", _rows(30) + ["{bad"])
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (out / name).symlink_to(victim)
    missing = tmp_path / "nowhere.txt"
    assert main(["replay", str(log), "--out", str(out), "--no-report", "-q",
                 "--on-error", "skip"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{out / name}: is a symbolic link" in err
    assert victim.read_text() == "keep me\n"
    (out / name).unlink()
    (out / name).symlink_to(missing)
    assert main(["replay", str(log), "--out", str(out), "--no-report", "-q",
                 "--on-error", "skip"]) == 2
    assert not missing.exists()


def test_summary_and_report_replace_a_symlink_never_write_through_it(tmp_path):
    pytest.importorskip("matplotlib")
    log = _write(tmp_path / "log.jsonl", _rows(30))
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    for name in ("summary.json.tmp", "report.html.tmp", "roc_auc.png"):
        (out / name).symlink_to(victim)
    assert main(["replay", str(log), "--out", str(out), "-q"]) == 0
    assert victim.read_text() == "keep me\n"
    assert json.loads((out / "summary.json").read_text())["events"] == 30
    assert not (out / "roc_auc.png").is_symlink() or victim.read_text() == "keep me\n"


def test_rows_without_the_segment_field_are_counted_and_said(tmp_path):
    """Half the rows lack the group_by field: summary.json counts them per field
    (``missing_segment_fields``) and says so in ``warnings``; the segments' counts plus
    the missing ones make the whole stream."""
    rows = _rows(2000, seed=4)
    for i, r in enumerate(rows):
        if i % 2:
            r["country"] = "fr" if i % 4 == 1 else "de"
    log = _write(tmp_path / "log.jsonl", rows)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[monitor]\ngroup_by = "country"\nevery = 0\n'
                   '[monitor.metrics]\nrecall = {}\n')
    out = tmp_path / "o"
    with pytest.warns(RuntimeWarning, match="'country' has no value in some events"):
        assert main(["replay", str(log), "--config", str(cfg), "--out", str(out),
                     "--no-report", "-q"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["missing_segment_fields"] == {"country": 1000}
    assert summary["warnings"] == ["group_by field 'country' had no value in 1000 of 2000 "
                                   "events: they count in the whole stream only"]
    per_segment = {f["segment"]: f["n"] for f in summary["final"]}
    assert per_segment == {None: 2000, "fr": 500, "de": 500}
