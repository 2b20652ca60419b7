"""The ``streameval`` command end to end: in-process ``main(argv)`` and real subprocesses.

Oracles: scikit-learn on the whole log (final ``roc_auc`` and ``average_precision`` of
``metrics.jsonl``, ties and weights included), the log's own rows for bad-input line
numbers and ``rejected.jsonl``, an uninterrupted run for checkpoint/resume (byte for
byte), and the scenarios' own ``[[expect]]`` tables for ``run --check``.
"""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from streameval.cli import main
from streameval.io.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml"))


def _events(n, seed=0, segments=None, weights=False):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.25
    s = np.round(1 / (1 + np.exp(-(1.5 * (y - 0.5) + rng.standard_normal(n)))), 2)  # ties
    ts = 1_700_000_000 + np.arange(n) * 0.5
    rows = []
    for i in range(n):
        r = {"ts": float(ts[i]), "id": i + 1, "label": int(y[i]), "score": float(s[i])}
        if weights:
            r["weight"] = float(rng.choice([0.5, 1.0, 2.0, 3.0]))
        if segments:
            r["segment"] = segments[i % len(segments)]
        rows.append(r)
    return rows


def _write(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return path


def _rows(path):
    return [json.loads(x) for x in open(path)]


def _last(metric_rows, segment=None):
    return [r for r in metric_rows if r["segment"] == segment][-1]


METRICS_CONFIG = """
[monitor]
every = 1000
{extra}
[monitor.metrics]
roc_auc = "roc_auc"
average_precision = "average_precision"
"recall@2000" = {{ metric = "recall", size = 2000 }}

[[monitor.rules]]
name = "recall_low"
metric = "recall@2000"
op = "<"
value = {threshold}
"""


# ---------------------------------------------------------------- replay, oracle


@pytest.fixture(scope="module")
def weighted_log(tmp_path_factory):
    d = tmp_path_factory.mktemp("weighted")
    rows = _events(12_000, seed=1, weights=True)
    return _write(d / "events.jsonl", rows), rows


def test_default_monitor_final_auc_ap_equal_sklearn(weighted_log, tmp_path, capsys):
    log, rows = weighted_log
    out = tmp_path / "out"
    assert main(["replay", str(log), "--out", str(out), "--no-report"]) == 0
    metric_rows = _rows(out / "metrics.jsonl")
    final = _last(metric_rows)
    y = np.array([r["label"] for r in rows])
    s = np.array([r["score"] for r in rows])
    w = np.array([r["weight"] for r in rows])
    assert final["n"] == len(rows)
    assert final["values"]["roc_auc"] == pytest.approx(roc_auc_score(y, s, sample_weight=w), abs=1e-12)
    assert final["values"]["average_precision"] == pytest.approx(
        average_precision_score(y, s, sample_weight=w), abs=1e-12)
    # the sliding window of the default monitor: the last 10 000 events
    tail = slice(len(rows) - 10_000, None)
    assert final["values"]["roc_auc@10000"] == pytest.approx(
        roc_auc_score(y[tail], s[tail], sample_weight=w[tail]), abs=1e-12)
    # the default monitor reports at least these (DESIGN.md section 6)
    for name in ("roc_auc", "average_precision", "precision", "recall", "f1", "accuracy", "log_loss"):
        assert name in final["values"] and f"{name}@10000" in final["values"]
    # one row per 1000 events plus none extra (12 000 is a multiple), n increasing
    assert [r["n"] for r in metric_rows] == list(range(1000, 12_001, 1000))
    # the summary table names the counts and the final values
    printed = capsys.readouterr().out
    assert "12,000" in printed and "roc_auc" in printed
    assert f"{final['values']['roc_auc']:.6g}" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["events"] == summary["rows"] == 12_000 and summary["rejected"] == 0


def test_every_metrics_row_matches_sklearn_on_the_prefix(tmp_path):
    rows = _events(5_000, seed=2)
    log = _write(tmp_path / "log.jsonl", rows)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(METRICS_CONFIG.format(extra="", threshold=0.0))
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(tmp_path / "o"),
                 "--quiet", "--no-report"]) == 0
    y = np.array([r["label"] for r in rows])
    s = np.array([r["score"] for r in rows])
    out_rows = _rows(tmp_path / "o" / "metrics.jsonl")
    assert [r["n"] for r in out_rows] == [1000, 2000, 3000, 4000, 5000]
    for r in out_rows:
        k = r["n"]
        assert r["t"] == rows[k - 1]["ts"]
        assert r["values"]["roc_auc"] == pytest.approx(roc_auc_score(y[:k], s[:k]), abs=1e-12)
        assert r["values"]["average_precision"] == pytest.approx(
            average_precision_score(y[:k], s[:k]), abs=1e-12)
        lo = max(0, k - 2000)
        pos = y[lo:k] == 1
        assert r["values"]["recall@2000"] == pytest.approx((s[lo:k][pos] >= 0.5).mean(), abs=1e-12)


def test_segments_and_csv_and_report(tmp_path):
    rows = _events(6_000, seed=3, segments=["eu", "us"])
    log = tmp_path / "events.csv"
    with open(log, "w") as f:
        f.write("ts,id,label,score,segment\n")
        for r in rows:
            f.write(f"{r['ts']},{r['id']},{r['label']},{r['score']},{r['segment']}\n")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(METRICS_CONFIG.format(extra='group_by = "segment"', threshold=0.0))
    out = tmp_path / "out"
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(out), "--quiet"]) == 0
    metric_rows = _rows(out / "metrics.jsonl")
    for seg in (None, "eu", "us"):
        sub = [r for r in rows if seg is None or r["segment"] == seg]
        y = [r["label"] for r in sub]
        s = [r["score"] for r in sub]
        final = _last(metric_rows, seg)
        assert final["values"]["roc_auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        assert final["values"]["average_precision"] == pytest.approx(
            average_precision_score(y, s), abs=1e-12)
    page = (out / "report.html").read_text()
    for name in ("roc_auc", "average_precision", "recall@2000", "segment eu", "segment us"):
        assert name in page
    assert not list(out.glob("*.png"))  # one self-contained page: plots drawn in the browser


def test_fail_on_alert_exit_status(weighted_log, tmp_path):
    log, _ = weighted_log
    cfg = tmp_path / "cfg.toml"
    # recall of the last 2000 events is ~0.7: a threshold of 0.99 fires, 0.01 never does
    for threshold, status, fired in ((0.99, 1, True), (0.01, 0, False)):
        cfg.write_text(METRICS_CONFIG.format(extra="", threshold=threshold))
        out = tmp_path / f"out{threshold}"
        argv = ["replay", str(log), "--config", str(cfg), "--out", str(out), "--quiet",
                "--no-report", "--fail-on-alert"]
        assert main(argv) == status
        alerts = _rows(out / "alerts.jsonl")
        assert any(a["state"] == "firing" for a in alerts) is fired
        # without --fail-on-alert the same run exits 0
        assert main(argv[:-1]) == 0


def test_alerts_go_to_a_webhook_and_stdout(weighted_log, tmp_path, capsys):
    """--webhook POSTs every transition to a real HTTP server on 127.0.0.1 (the first
    attempt gets a 500 and is retried); --print-alerts writes them to stdout; both equal
    alerts.jsonl."""
    import http.server
    import threading

    received, failures_left = [], [1]

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if failures_left[0]:
                failures_left[0] -= 1
                self.send_response(500)
            else:
                received.append(json.loads(body))
                self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        log, _ = weighted_log
        cfg = tmp_path / "cfg.toml"
        cfg.write_text(METRICS_CONFIG.format(extra="", threshold=0.99))
        out = tmp_path / "out"
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        assert main(["replay", str(log), "--config", str(cfg), "--out", str(out), "--no-report",
                     "--quiet", "--webhook", url, "--print-alerts"]) == 0
    finally:
        server.shutdown()
        server.server_close()
    alerts = _rows(out / "alerts.jsonl")
    assert any(a["state"] == "firing" for a in alerts)
    assert received == alerts
    printed = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert printed == alerts
    assert json.loads((out / "summary.json").read_text())["webhook_failures"] == 0


# -------------------------------------------------------------------- bad input

BAD = [
    ('{"ts": 5, "label": 1, "score": 0.5', "bad JSON"),
    ('{"ts": 5, "score": 0.5}', "missing field 'label'"),
    ('{"ts": 5, "label": 1}', "missing field 'score'"),
    ('{"ts": 5, "label": 1, "score": NaN}', "score is NaN"),
    ('{"ts": 5, "label": "maybe", "score": 0.5}', "unknown label 'maybe'"),
    ('{"ts": "next tuesday", "label": 1, "score": 0.5}', "unparseable time 'next tuesday'"),
]


@pytest.mark.parametrize("bad, reason", BAD, ids=[r for _, r in BAD])
def test_bad_row_fails_with_status_2_naming_line_and_reason(tmp_path, capsys, bad, reason):
    rows = [json.dumps(r) for r in _events(30, seed=4)]
    rows.insert(17, bad)  # line 18
    log = _write(tmp_path / "log.jsonl", rows)
    assert main(["replay", str(log), "--out", str(tmp_path / "o"), "--quiet", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "line 18" in err and reason in err
    assert "--on-error skip" in err


def test_bad_row_in_a_subprocess(tmp_path):
    rows = [json.dumps(r) for r in _events(10, seed=5)]
    rows.insert(6, BAD[3][0])  # line 7: NaN score
    log = _write(tmp_path / "log.jsonl", rows)
    p = subprocess.run([sys.executable, "-m", "streameval", "replay", str(log), "--out",
                        str(tmp_path / "o"), "--no-report"], capture_output=True, text=True)
    assert p.returncode == 2
    assert "line 7: score is NaN" in p.stderr


def test_skip_mode_writes_rejected_rows_and_counts_them(tmp_path, capsys):
    good = _events(3_000, seed=6)
    lines = [json.dumps(r) for r in good]
    bad_at = {}
    for k, (bad, reason) in enumerate(BAD):
        pos = 100 + 400 * k
        lines.insert(pos, bad)
        bad_at[pos + 1] = (bad, reason)
    log = _write(tmp_path / "log.jsonl", lines)
    out = tmp_path / "out"
    assert main(["replay", str(log), "--out", str(out), "--on-error", "skip", "--no-report"]) == 0
    rejected = _rows(out / "rejected.jsonl")
    assert [r["line"] for r in rejected] == sorted(bad_at)
    for r in rejected:
        bad, reason = bad_at[r["line"]]
        assert reason in r["reason"]
        assert r["raw"] == bad
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rejected"] == len(BAD)
    assert summary["events"] == len(good) and summary["rows"] == len(good) + len(BAD)
    assert f"rejected {len(BAD)}" in capsys.readouterr().out
    # the good rows alone make the metrics
    final = _last(_rows(out / "metrics.jsonl"))
    y = [r["label"] for r in good]
    s = [r["score"] for r in good]
    assert final["values"]["roc_auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)


@pytest.mark.parametrize("argv, message", [
    (["replay", "{tmp}/nope.jsonl"], "nope.jsonl: no such file"),
    (["replay", "{log}", "--config", "{tmp}/missing.toml"], "missing.toml: no such file"),
    (["replay", "{log}", "--config", "{cfg}"], "evrey"),
    (["run", "{tmp}/missing.toml"], "no such scenario file"),
])
def test_bad_arguments_exit_2_with_a_message(tmp_path, capsys, argv, message):
    log = _write(tmp_path / "log.jsonl", _events(10))
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[monitor]\nevrey = 5\n")
    argv = [a.format(tmp=tmp_path, log=log, cfg=cfg) for a in argv]
    assert main(argv + ["--out", str(tmp_path / "o"), "--no-report"]) == 2
    assert message in capsys.readouterr().err


def test_usage_errors_and_help(capsys):
    assert main(["replay"]) == 2
    assert main(["replay", "x.jsonl", "--on-error", "ignore"]) == 2
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "replay" in out and "run" in out


# -------------------------------------------------------------- checkpoint, resume


@pytest.fixture(scope="module")
def resume_setup(tmp_path_factory):
    """A 40 000-event log, a config with alerts that fire and resolve, a reference run."""
    d = tmp_path_factory.mktemp("resume")
    rows = _events(40_000, seed=7, segments=["a", "b", "c"])
    # a drop in recall in the middle, so that alerts fire (and resolve) mid-stream
    for r in rows[15_000:28_000]:
        if r["label"] == 1 and r["segment"] == "a":
            r["score"] = round(r["score"] * 0.5, 2)
    log = _write(d / "events.jsonl", rows)
    cfg = d / "cfg.toml"
    cfg.write_text(METRICS_CONFIG.format(extra='group_by = "segment"', threshold=0.6))
    ref = d / "ref"
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(ref), "--quiet",
                 "--no-report"]) == 0
    assert any(a["state"] == "firing" for a in _rows(ref / "alerts.jsonl"))
    assert any(a["state"] == "resolved" for a in _rows(ref / "alerts.jsonl"))
    return log, cfg, ref


def _stopped_replay(log, out, stop_after, **opts):
    """A replay killed once ``stop_after`` events were fed: the injected callback raises
    as a kill would, after the outputs of that batch were written and before its
    checkpoint."""
    from streameval.cli import Replay

    def kill(pipeline, batch):
        if pipeline.monitor.n >= stop_after:
            raise KeyboardInterrupt

    job = Replay(log, out, **opts)
    job.pipeline.on_batch = kill
    return job.run()


def _same_outputs(out, ref):
    for name in ("metrics.jsonl", "alerts.jsonl"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    a = json.loads((out / "summary.json").read_text())
    b = json.loads((ref / "summary.json").read_text())
    for key in ("events", "rows", "rejected", "final", "fired", "evaluations"):
        assert a[key] == b[key], key


@pytest.mark.parametrize("stop_after", [3_000, 18_000, 29_000, 39_999])
def test_interrupted_replay_resumes_to_identical_outputs(resume_setup, tmp_path, stop_after):
    from streameval.cli import replay

    log, cfg, ref = resume_setup
    out, ckpt = tmp_path / "out", tmp_path / "ckpt.json"
    opts = dict(config=cfg, checkpoint=ckpt, checkpoint_every=5_000, report=False, progress=False)
    with pytest.raises(KeyboardInterrupt):
        _stopped_replay(log, out, stop_after, **opts)
    # batches of 5 000 events; the stop comes after a batch's rows were written and
    # before its checkpoint: those rows are in the files, and the resume must cut them
    if stop_after > 5_000:
        state = load_checkpoint(ckpt)
        assert not state["done"] and state["counts"]["events"] < stop_after
    else:
        assert not ckpt.exists()
    summary = replay(log, out, **opts)
    assert summary["resumed"] is (stop_after > 5_000)
    _same_outputs(out, ref)
    assert load_checkpoint(ckpt)["done"]
    # a third run finds the replay done and changes nothing
    replay(log, out, **opts)
    _same_outputs(out, ref)


def test_killed_subprocess_resumes_to_identical_outputs(resume_setup, tmp_path):
    log, cfg, ref = resume_setup
    out, ckpt = tmp_path / "out", tmp_path / "ckpt.json"
    cmd = [sys.executable, "-m", "streameval", "replay", str(log), "--config", str(cfg),
           "--out", str(out), "--checkpoint", str(ckpt), "--checkpoint-every", "2000",
           "--no-report", "--quiet"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    killed_at = None
    while time.monotonic() < deadline and p.poll() is None:
        if ckpt.exists():
            try:
                state = load_checkpoint(ckpt)
            except Exception:
                state = None
            if state is not None and state["counts"]["events"] >= 8_000:
                p.send_signal(signal.SIGKILL)
                killed_at = state["counts"]["events"]
                break
        time.sleep(0.005)
    p.wait()
    assert killed_at is not None, "the replay ended before it could be killed"
    assert p.returncode == -signal.SIGKILL
    state = load_checkpoint(ckpt)
    assert not state["done"] and state["counts"]["events"] < 40_000
    # resume in a new process
    p2 = subprocess.run(cmd, capture_output=True, text=True)
    assert p2.returncode == 0, p2.stderr
    _same_outputs(out, ref)
    assert load_checkpoint(ckpt)["done"]


def test_corrupted_or_mismatched_checkpoint_is_refused(resume_setup, tmp_path, capsys):
    log, cfg, _ = resume_setup
    out, ckpt = tmp_path / "out", tmp_path / "ckpt.json"
    argv = ["replay", str(log), "--config", str(cfg), "--out", str(out), "--quiet",
            "--no-report", "--checkpoint", str(ckpt), "--checkpoint-every", "20000"]
    assert main(argv) == 0
    good = ckpt.read_bytes()

    # another config
    other = tmp_path / "other.toml"
    other.write_text(cfg.read_text().replace("every = 1000", "every = 500"))
    assert main([a if a != str(cfg) else str(other) for a in argv]) == 2
    assert "another configuration" in capsys.readouterr().err

    # another log of the same name: a shorter one, then one as long but rewritten
    log2 = _write(tmp_path / "events.jsonl", _events(100, seed=99))
    assert main([a if a != str(log) else str(log2) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "was taken from another log" in err and "fewer than" in err
    data = bytearray(log.read_bytes())
    data[10:14] = b"9999" if data[10:14] != b"9999" else b"8888"
    log2.write_bytes(bytes(data))
    assert main([a if a != str(log) else str(log2) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "was taken from another log" in err and "first 1,048,576 bytes" in err

    # a damaged file: truncated, or one byte of the state changed (without the previous
    # generation to fall back to: tests/test_durability.py covers the fallback)
    (tmp_path / "ckpt.prev.json").unlink()
    ckpt.write_bytes(good[: len(good) // 2])
    assert main(argv) == 2
    assert "corrupted" in capsys.readouterr().err
    env = json.loads(good)
    env["state"]["counts"]["events"] += 1  # valid JSON, but not the state that was saved
    ckpt.write_text(json.dumps(env))
    assert main(argv) == 2
    assert "checksum" in capsys.readouterr().err

    # outputs that are not the ones the checkpoint saw (shorter than its offsets)
    ckpt.write_bytes(good)
    (out / "metrics.jsonl").write_text("")
    assert main(argv) == 2
    assert "cannot truncate" in capsys.readouterr().err
    # refused runs never reset the checkpoint
    assert ckpt.read_bytes() == good


# ------------------------------------------------------------- a log that grew


def _write_rows(path, rows, fmt, append=False):
    """Rows of ``_events`` as JSONL, CSV (a header first) or gzipped JSONL (appending:
    another gzip member, as ``gzip -c more >> log.jsonl.gz`` does)."""
    if fmt == "csv":
        import csv

        with open(path, "a" if append else "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            if not append:
                w.writeheader()
            w.writerows(rows)
    elif fmt == "jsonl.gz":
        import gzip

        with gzip.open(path, "ab" if append else "wb") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows).encode())
    else:
        with open(path, "a" if append else "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _growing_rows():
    rows = _events(6_000, seed=13, segments=["a", "b"])
    for r in rows[2_000:4_000]:  # a recall drop: alerts fire, then resolve
        if r["label"] == 1 and r["segment"] == "a":
            r["score"] = round(r["score"] * 0.5, 2)
    return rows


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "jsonl.gz"])
@pytest.mark.parametrize("first", ["killed", "finished"])
def test_resume_after_the_log_grew_equals_one_uninterrupted_replay(tmp_path, fmt, first):
    """A checkpointed replay of a log shorter than the 1 MiB the fingerprint used to
    hash, killed or finished, then resumed after rows were appended (twice): the outputs
    of one uninterrupted replay of the whole grown log."""
    from streameval.cli import replay

    rows = _growing_rows()
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(METRICS_CONFIG.format(extra='group_by = "segment"', threshold=0.6)
                   .replace("every = 1000", "every = 250"))
    log = _write_rows(tmp_path / f"events.{fmt}", rows[:2_500], fmt)
    assert log.stat().st_size < 1 << 20
    out, ckpt = tmp_path / "out", tmp_path / "ckpt.json"
    opts = dict(config=cfg, checkpoint=ckpt, checkpoint_every=500, report=False, progress=False)
    if first == "killed":
        with pytest.raises(KeyboardInterrupt):
            _stopped_replay(log, out, 1_800, **opts)
        assert not load_checkpoint(ckpt)["done"]
    else:
        replay(log, out, **opts)
        assert load_checkpoint(ckpt)["done"]
    for k, end in enumerate((4_200, 6_000)):
        _write_rows(log, rows[{0: 2_500, 1: 4_200}[k]:end], fmt, append=True)
        summary = replay(log, out, **opts)
        assert summary["resumed"] and summary["events"] == end
        whole = _write_rows(tmp_path / f"whole{k}.{fmt}", rows[:end], fmt)
        ref = tmp_path / f"ref{k}"
        replay(whole, ref, config=cfg, report=False, progress=False)
        _same_outputs(out, ref)
        assert load_checkpoint(ckpt)["counts"]["events"] == end
    alerts = _rows(out / "alerts.jsonl")
    assert {"firing", "resolved"} <= {a["state"] for a in alerts}


def test_resume_refuses_a_small_log_truncated_or_rewritten_since(tmp_path, capsys):
    import gzip

    lines = [json.dumps(r) + "\n" for r in _events(3_000, seed=14)]
    log = tmp_path / "events.jsonl"
    log.write_text("".join(lines[:2_000]))
    ckpt = tmp_path / "ckpt.json"
    argv = ["replay", str(log), "--out", str(tmp_path / "out"), "--quiet", "--no-report",
            "--checkpoint", str(ckpt), "--checkpoint-every", "500"]
    assert main(argv) == 0
    good = ckpt.read_bytes()
    changed = list(lines)  # one label flipped: the same length, other bytes
    flip = {'"label": 0': '"label": 1', '"label": 1': '"label": 0'}
    old = next(k for k in flip if k in lines[700])
    changed[700] = lines[700].replace(old, flip[old])
    assert changed[700] != lines[700] and len(changed[700]) == len(lines[700])
    for text, words in (("".join(lines[:1_500]), "fewer than"),  # truncated
                        ("".join(changed[:2_000]), "first"),  # one row rewritten
                        ("".join(changed), "first")):  # rewritten, and longer
        log.write_text(text)
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "was taken from another log" in err and words in err, err
        assert ckpt.read_bytes() == good  # a refused run never resets the checkpoint

    # a compressed log compressed again as a whole (not appended to): refused
    gz = tmp_path / "events.jsonl.gz"
    gz.write_bytes(gzip.compress("".join(lines[:2_000]).encode(), mtime=1))
    argv_gz = [a if a != str(log) else str(gz) for a in argv]
    argv_gz[argv_gz.index(str(ckpt))] = str(tmp_path / "ckpt_gz.json")
    assert main(argv_gz) == 0
    gz.write_bytes(gzip.compress("".join(lines).encode(), mtime=1))
    assert main(argv_gz) == 2
    assert "was taken from another log" in capsys.readouterr().err


def test_a_last_line_read_half_written_is_refused_unless_only_its_newline_came(tmp_path, capsys):
    lines = [json.dumps(r) + "\n" for r in _events(2_000, seed=15)]
    lines.insert(1_600, '{"ts": 1, "label": 1, "score": NaN}\n')  # a bad row, set aside
    full = "".join(lines)
    ref = tmp_path / "ref"
    (tmp_path / "full.jsonl").write_text(full)
    assert main(["replay", str(tmp_path / "full.jsonl"), "--out", str(ref), "--quiet",
                 "--no-report", "--on-error", "skip"]) == 0

    # the last line whole but its newline not written yet: the resume goes on, with
    # the same line numbers
    log = tmp_path / "events.jsonl"
    ckpt, out = tmp_path / "ckpt.json", tmp_path / "out"
    argv = ["replay", str(log), "--out", str(out), "--quiet", "--no-report",
            "--on-error", "skip", "--checkpoint", str(ckpt), "--checkpoint-every", "400"]
    log.write_text("".join(lines[:1_000]) + lines[1_000].rstrip("\n"))
    assert main(argv) == 0
    log.write_text(full)
    assert main(argv) == 0
    for name in ("metrics.jsonl", "alerts.jsonl", "rejected.jsonl"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    assert [r["line"] for r in _rows(out / "rejected.jsonl")] == [1_601]

    # half a line read (a bad row then), the rest of it written since: refused
    ckpt.unlink()
    log.write_text("".join(lines[:1_000]) + lines[1_000][:15])
    assert main(argv) == 0
    assert [r["line"] for r in _rows(out / "rejected.jsonl")] == [1_001]
    log.write_text(full)
    assert main(argv) == 2
    assert "being written" in capsys.readouterr().err


# ----------------------------------------------------------- summary, pipes, extras


def _expected_episodes(alerts):
    """Brute force: each firing transition, and the n of the next transition of the same
    rule and segment if it is a resolution (None: none came)."""
    out = []
    for i, a in enumerate(alerts):
        if a["state"] != "firing":
            continue
        later = [b for b in alerts[i + 1:] if (b["rule"], b["segment"]) == (a["rule"], a["segment"])]
        end = later[0]["n"] if later and later[0]["state"] == "resolved" else None
        out.append((a["rule"], a["segment"], a["n"], end))
    return out


def test_summary_lists_when_each_fired_alert_resolved(resume_setup, tmp_path, capsys):
    from streameval.cli import main as cli_main

    log, cfg, _ = resume_setup
    # the recall drop of resume_setup lasts to the end here: some alerts still fire then
    rows = _rows(log)
    for r in rows[30_000:]:
        if r["label"] == 1 and r["segment"] == "a":
            r["score"] = round(r["score"] * 0.5, 2)
    log2 = _write(tmp_path / "events2.jsonl", rows)
    for lg, name in ((log, "out"), (log2, "out2")):
        out = tmp_path / name
        assert cli_main(["replay", str(lg), "--config", str(cfg), "--out", str(out),
                         "--no-report", "--no-progress"]) == 0
        printed = capsys.readouterr().out
        expected = _expected_episodes(_rows(out / "alerts.jsonl"))
        summary = json.loads((out / "summary.json").read_text())
        assert [(f["rule"], f["segment"], f["n"], f["resolved_n"]) for f in summary["fired"]] == expected
        resolved = sum(e[3] is not None for e in expected)
        assert summary["alerts_resolved"] == resolved
        assert (f"alerts fired: {len(expected)} ({resolved} resolved, "
                f"{len(expected) - resolved} still firing at the end)") in printed
        for rule, seg, n, end in expected[:10]:
            tail = "still firing at the end" if end is None else f"resolved at n={end:,}"
            where = "" if seg is None else f" [segment {seg}]"
            assert f"{rule}{where} at n={n:,}, {tail}" in printed
        if lg == log:
            assert all(e[3] is not None for e in expected) and expected
        else:
            assert any(e[3] is None for e in expected)


def test_scenario_summary_shows_the_resolution(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(ROOT / "scenarios" / "phishing.toml"), "--out", str(out),
                 "--no-report", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    [(rule, seg, n, end)] = _expected_episodes(_rows(out / "alerts.jsonl"))
    assert rule == "learning" and end is not None
    assert f"learning at n={n:,}, resolved at n={end:,}" in printed


def test_stdout_closed_early_exits_quietly_with_status_0(resume_setup, tmp_path):
    import os

    log, cfg, _ = resume_setup
    cmd = [sys.executable, "-m", "streameval", "replay", str(log), "--config", str(cfg),
           "--out", str(tmp_path / "out"), "--no-report", "--print-alerts"]
    # the reader gone before the first write
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(cmd, stdout=w, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(w)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "Broken pipe" not in p.stderr and "error" not in p.stderr
    # ``| head -n 1``: the reader takes one line and closes the pipe
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = json.loads(p.stdout.readline())
    p.stdout.close()
    stderr = p.stderr.read()
    p.wait(timeout=300)
    assert first["state"] in ("pending", "firing")
    assert p.returncode == 0, stderr
    assert "Traceback" not in stderr and "Broken pipe" not in stderr and "error" not in stderr


def test_serve_without_the_serve_extra_says_so_in_one_line(tmp_path):
    import os

    fake = tmp_path / "no_extra"
    for mod in ("starlette", "uvicorn"):  # importable no more, as if not installed
        (fake / mod).mkdir(parents=True)
        (fake / mod / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{mod}'\", name={mod!r})\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(fake)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    p = subprocess.run([sys.executable, "-m", "streameval", "serve", "--port", "0"],
                       capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1, p.stderr
    assert "pip install 'streameval[serve]'" in p.stderr and "starlette" in p.stderr
    assert p.stderr.startswith("streameval serve: ") and p.stdout == ""


# -------------------------------------------------------------------- delayed labels


def test_delayed_labels_join_expire_and_match_sklearn(tmp_path):
    n = 4_000
    log = _delayed_log(tmp_path / "log.jsonl", n, seed=8)
    # the same draws as _delayed_log, for the oracle
    rng = np.random.default_rng(8)
    y = rng.random(n) < 0.3
    s = np.round(rng.random(n) * 0.5 + 0.4 * y, 3)
    delay = rng.uniform(10, 500, n)
    missing = rng.random(n) < 0.05
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[input]\nlabel_ttl = 1000\n' + METRICS_CONFIG.format(extra="", threshold=0.0))
    out = tmp_path / "out"
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(out), "--no-report",
                 "--quiet"]) == 0
    labeled = ~missing
    final = _last(_rows(out / "metrics.jsonl"))
    assert final["n"] == labeled.sum()
    assert final["values"]["roc_auc"] == pytest.approx(roc_auc_score(y[labeled], s[labeled]), abs=1e-12)
    assert final["values"]["average_precision"] == pytest.approx(
        average_precision_score(y[labeled], s[labeled]), abs=1e-12)
    summary = json.loads((out / "summary.json").read_text())
    # every unlabeled prediction is either expired (older than label_ttl at the end) or
    # still waiting: none is lost
    last_t = max(i + delay[i] if not missing[i] else i for i in range(n))
    expired = sum(1 for i in np.flatnonzero(missing) if last_t - i > 1000)
    assert summary["expired"] == expired
    assert summary["unlabeled"] == missing.sum() - expired
    assert summary["orphans"] == 0


# ---------------------------------------------------------------------- scenarios


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_bundled_scenario_passes_its_check(scenario, tmp_path, capsys):
    from streameval import _registry

    if scenario.stem == "labels_stop" and "estimated_recall" not in _registry.config_kinds():
        pytest.skip("needs the label-free metric kinds (test_labelfree_monitor.py runs it "
                    "with stand-ins)")
    out = tmp_path / scenario.stem
    status = main(["run", str(scenario), "--check", "--out", str(out), "--no-report"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "check passed" in captured.out
    for name in ("metrics.jsonl", "alerts.jsonl", "summary.json"):
        assert (out / name).exists()


def test_run_check_fails_when_alerts_differ(tmp_path, capsys):
    text = (ROOT / "scenarios" / "phishing.toml").read_text()
    # expect the learning alert far later than it fires
    wrong = text.replace("n_min = 100\nn_max = 150", "n_min = 1000\nn_max = 1100")
    assert wrong != text
    p = tmp_path / "wrong.toml"
    p.write_text(wrong)
    assert main(["run", str(p), "--check", "--out", str(tmp_path / "o"), "--no-report", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "CHECK FAILED" in err and "expected learning to be firing with n in [1000, 1100]" in err
    # without --check the same run succeeds
    assert main(["run", str(p), "--out", str(tmp_path / "o"), "--no-report", "--quiet"]) == 0


def test_readme_first_command_in_a_subprocess(tmp_path):
    # the console script, as the README runs it (with the report)
    exe = Path(sys.executable).with_name("streameval")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "streameval"]
    p = subprocess.run(cmd + ["run", str(ROOT / "scenarios" / "phishing.toml"), "--check"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = tmp_path / "streameval-out" / "phishing"
    assert "check passed" in p.stdout
    page = (out / "report.html").read_text()
    assert "learning" in page and "roc_auc@250" in page
    assert "<script src=" not in page  # self-contained: it opens offline
    # no progress bar when stderr is not a terminal
    assert "ev/s" not in p.stderr and "\r" not in p.stderr


def test_progress_bar_only_on_a_terminal(tmp_path, monkeypatch):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    log = _write(tmp_path / "log.jsonl", _events(3_000, seed=9))
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(METRICS_CONFIG.format(extra="", threshold=0.0))
    argv = ["replay", str(log), "--config", str(cfg), "--no-report"]
    for stream, shown in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        assert main(argv + ["--out", str(tmp_path / f"o{shown}")]) == 0
        assert ("ev/s" in stream.getvalue()) is shown
    # --no-progress turns it off on a terminal too
    stream = Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    assert main(argv + ["--out", str(tmp_path / "o"), "--no-progress"]) == 0
    assert "ev/s" not in stream.getvalue()


def _delayed_log(path, n, seed):
    """Prediction rows and label rows (10..500 s later, 5% never), in time order."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = np.round(rng.random(n) * 0.5 + 0.4 * y, 3)
    delay = rng.uniform(10, 500, n)
    missing = rng.random(n) < 0.05
    rows = [(float(i), 0, {"ts": float(i), "id": f"p{i}", "score": float(s[i])}) for i in range(n)]
    rows += [(i + delay[i], 1, {"ts": float(i + delay[i]), "id": f"p{i}", "label": bool(y[i])})
             for i in range(n) if not missing[i]]
    rows.sort(key=lambda r: (r[0], r[1]))
    return _write(path, [r[2] for r in rows])


@pytest.mark.parametrize("kind", ["skip", "delayed"])
def test_resume_with_rejected_rows_and_delayed_labels(tmp_path, kind):
    from streameval.cli import replay

    cfg = tmp_path / "cfg.toml"
    body = METRICS_CONFIG.format(extra="", threshold=0.9)
    if kind == "skip":
        lines = [json.dumps(r) for r in _events(12_000, seed=10)]
        for k, (bad, _) in enumerate(BAD * 3):
            lines.insert(500 + 700 * k, bad)
        log = _write(tmp_path / "log.jsonl", lines)
        on_error = "skip"
    else:
        log = _delayed_log(tmp_path / "log.jsonl", 8_000, seed=11)
        body = "[input]\nlabel_ttl = 300\n" + body
        on_error = "fail"
    cfg.write_text(body)
    opts = dict(config=cfg, on_error=on_error, report=False, progress=False)
    ref = tmp_path / "ref"
    replay(log, ref, **opts)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt.json"
    stops = (3_500, 7_000) if kind == "skip" else (1_500, 3_200)  # delayed: ~4 500 joined
    for stop in stops:  # killed twice, resumed twice
        with pytest.raises(KeyboardInterrupt):
            _stopped_replay(log, out, stop, checkpoint=ckpt, checkpoint_every=1_000, **opts)
    replay(log, out, checkpoint=ckpt, checkpoint_every=1_000, **opts)
    _same_outputs(out, ref)
    a = json.loads((out / "summary.json").read_text())
    b = json.loads((ref / "summary.json").read_text())
    for key in ("expired", "orphans", "unlabeled", "rejected"):
        assert a[key] == b[key], key
    if kind == "skip":
        assert (out / "rejected.jsonl").read_bytes() == (ref / "rejected.jsonl").read_bytes()
        assert a["rejected"] == 3 * len(BAD)
    else:  # label_ttl 300 s < the longest delays: expired predictions and orphan labels
        assert a["expired"] > 0 and a["orphans"] > 0


def test_replay_from_stdin(tmp_path, monkeypatch):
    import io

    rows = _events(2_000, seed=12)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    out = tmp_path / "out"
    assert main(["replay", "-", "--out", str(out), "--no-report", "--quiet"]) == 0
    final = _last(_rows(out / "metrics.jsonl"))
    assert final["n"] == 2_000
    assert final["values"]["roc_auc"] == pytest.approx(
        roc_auc_score([r["label"] for r in rows], [r["score"] for r in rows]), abs=1e-12)


def test_skipped_duplicate_predictions_are_counted_as_rejected(tmp_path):
    """With delayed labels and --on-error skip, a second prediction for a waiting id goes
    to rejected.jsonl; the summary's ``rejected`` counts every row of that file, also
    across a resume from a checkpoint."""
    from streameval.cli import replay

    rows, n_dup, n_bad = [], 0, 0
    for i in range(3_000):
        rows.append({"ts": float(i), "id": f"p{i}", "score": (i % 97) / 97})
        if i % 250 == 0:  # the same id again while it waits: a duplicate (keep_first)
            rows.append({"ts": float(i), "id": f"p{i}", "score": 0.5})
            n_dup += 1
        if i % 400 == 7:
            rows.append('{"ts": %d, "id": "bad%d", "score": "x"}' % (i, i))
            n_bad += 1
        if i >= 20:
            rows.append({"ts": float(i), "id": f"p{i - 20}", "label": (i - 20) % 3 == 0})
    log = _write(tmp_path / "log.jsonl", rows)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[input]\nlabel_ttl = 1000\n" + METRICS_CONFIG.format(extra="", threshold=0.5))
    opts = dict(config=cfg, on_error="skip", report=False, progress=False)
    ref = tmp_path / "ref"
    s = replay(log, ref, **opts)
    rejected = _rows(ref / "rejected.jsonl")
    assert len(rejected) == n_dup + n_bad
    assert sum("duplicate prediction id" in r["reason"] for r in rejected) == n_dup
    assert s["rejected"] == n_dup + n_bad
    assert json.loads((ref / "summary.json").read_text())["rejected"] == n_dup + n_bad
    out, ckpt = tmp_path / "out", tmp_path / "ckpt.json"
    with pytest.raises(KeyboardInterrupt):
        _stopped_replay(log, out, 1_600, checkpoint=ckpt, checkpoint_every=500, **opts)
    s2 = replay(log, out, checkpoint=ckpt, checkpoint_every=500, **opts)
    assert s2["rejected"] == n_dup + n_bad
    assert len(_rows(out / "rejected.jsonl")) == n_dup + n_bad


def test_non_finite_segment_row_is_rejected_with_its_line(tmp_path):
    """A NaN segment (Python's json writes NaN) is a bad row: exit 2 naming the line, or
    with --on-error skip a rejected row; the other rows give sklearn's AUC per segment."""
    rows = _events(600, seed=13, segments=["eu", "us"])
    lines = [json.dumps(r) for r in rows]
    lines.insert(250, '{"ts": 1700000125.2, "label": 1, "score": 0.3, "segment": NaN}')
    log = _write(tmp_path / "log.jsonl", lines)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(METRICS_CONFIG.format(extra='group_by = "segment"', threshold=0.5))
    out = tmp_path / "out"
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(out),
                 "--no-report", "-q"]) == 2
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(out), "--no-report",
                 "-q", "--on-error", "skip"]) == 0
    assert [(r["line"], r["reason"]) for r in _rows(out / "rejected.jsonl")] == [
        (251, "segment is NaN")]
    metric_rows = _rows(out / "metrics.jsonl")
    for seg in ("eu", "us"):
        y = [r["label"] for r in rows if r["segment"] == seg]
        s = [r["score"] for r in rows if r["segment"] == seg]
        assert _last(metric_rows, seg)["values"]["roc_auc"] == pytest.approx(
            roc_auc_score(y, s), abs=1e-12)


def test_a_group_by_typo_is_warned_about_in_the_summary_and_on_stderr(tmp_path):
    """A config whose group_by names a field no row has: replay says so once on stderr
    and in summary.json's warnings; the right name gives none, and per-segment rows
    carry each segment's own count."""
    import subprocess
    import sys

    rows = [{"ts": 1_700_000_000 + i, "label": i % 3 == 0, "score": (i * 37 % 100) / 100,
             "country": "fr" if i % 4 else "de"} for i in range(1500)]
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for field, warned in (("contry", True), ("country", False)):
        cfg = tmp_path / f"{field}.toml"
        cfg.write_text(f'[monitor]\ngroup_by = "{field}"\nevery = 500\n'
                       '[monitor.metrics]\nrecall = {}\n')
        out = tmp_path / f"out-{field}"
        r = subprocess.run([sys.executable, "-m", "streameval", "replay", str(log),
                            "--config", str(cfg), "--out", str(out), "--no-report"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        summary = json.loads((out / "summary.json").read_text())
        msg = (f"group_by field {field!r} had no value in the first 1000 events: they "
               "count in the whole stream only (is the field name right?)")
        counted = (f"group_by field {field!r} had no value in 1500 of 1500 events: they "
                   "count in the whole stream only")
        assert summary["warnings"] == ([msg, counted] if warned else [])
        assert summary["missing_segment_fields"] == ({field: 1500} if warned else {})
        assert (msg in r.stderr) == warned and r.stderr.count("had no value") == int(warned)
        metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        # the whole stream's points (500, 1000, 1500), and each segment's own: "fr" at its
        # 500th and 1000th events, "de" (375 events) at the end only
        fr_at = [i + 1 for i, r in enumerate(rows) if r["country"] == "fr"]
        assert summary["evaluations"] == (3 if warned else len(
            {500, 1000, 1500, fr_at[499], fr_at[999]}))
        for m in metrics:
            at = m.get("stream_n", m["n"])
            want = at if m["segment"] is None else sum(
                1 for r in rows[:at] if r["country"] == m["segment"])
            assert m["n"] == want, m
        if not warned:
            assert {m["segment"] for m in metrics} == {None, "fr", "de"}
            # in the order of each segment's first row: "fr" wrote one at its 500th
            # event, "de" (fewer than 500 events) its only one at the end
            assert [f["n"] for f in summary["final"]] == [1500, 1125, 375]


def test_the_cli_reexports_the_replay_library():
    """The library moved to streameval.replay; its public names stay importable from
    streameval.cli as the same objects."""
    import streameval.cli as cli
    import streameval.replay as lib

    for name in ("Replay", "ReplayError", "replay", "summarize", "load_replay_config",
                 "run_scenario", "format_summary", "fired_and_resolved",
                 "DEFAULT_CHECKPOINT_EVERY", "DEFAULT_POLL"):
        assert getattr(cli, name) is getattr(lib, name), name
    assert set(cli.__all__) >= {"main", "build_parser", "replay", "Replay", "run_scenario",
                                "ReplayError", "summarize", "load_replay_config"}
