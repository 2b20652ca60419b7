"""Delayed labels and exactly-once ingestion over a real socket.

The oracle of the join is ``streameval replay`` of the same rows (one log file holding
the prediction and label rows in the order they were posted), with the same
``[input] label_ttl`` and ``on_duplicate``: the service's Monitor must equal the
replay's final values exactly, and its join counters (pending, expired, orphans,
duplicates) the replay's summary. A ``kill -9`` in the middle, and a crash injected
between the log's fsync and the response (``STREAMEVAL_CRASH_AFTER_COMMIT``, a real
``os._exit`` of the server process), must change none of that.
"""

from __future__ import annotations

import http.client
import json
import signal
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("starlette")

from streameval.cli import main as cli_main  # noqa: E402
from streameval.io.delayed import LabelJoiner  # noqa: E402
from streameval.events import events_to_batch  # noqa: E402
from streameval.service import BackgroundServer, build_engine  # noqa: E402
from streameval.service.engine import PENDING_BYTES  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))  # (the shared server helpers, beside this one)
from serve_support import start_cli, stop_cli  # noqa: E402

TTL = 300
MONITOR = """\
[monitor]
every = 50
group_by = "country"
every_seconds = 60  # the service's default with group_by, given here for replay too

[monitor.metrics]
auc = "roc_auc"
ap = "average_precision"
recall = "recall"
precision = "precision"
"auc@100" = { metric = "roc_auc", size = 100 }

[input]
label_ttl = 300
on_duplicate = "keep_first"
"""
JSON = {"Content-Type": "application/json"}


def write_config(tmp_path, serve=""):
    path = tmp_path / "config.toml"
    path.write_text(MONITOR + ("\n[serve]\n" + serve if serve else ""))
    return path


def delayed_stream(n=600, seed=0):
    """Prediction rows (1 s apart, continuous scores) and their label rows, merged by
    time: most labels come 1-400 s later (those after label_ttl find their prediction
    expired: orphans), some never (expired), some ids are predicted twice while waiting
    (duplicates), some labels name no prediction (orphans)."""
    rng = np.random.default_rng(seed)
    t0 = 1_700_000_000
    rows = []
    y = rng.random(n) < 0.3
    for i in range(n):
        pid = f"p{i}"
        score = float(np.clip(rng.normal(0.35 + 0.3 * y[i], 0.2), 0, 1))
        country = ["fr", "de", "us"][int(rng.integers(3))]
        rows.append((t0 + i, 0, {"id": pid, "ts": t0 + i, "score": score,
                                 "country": country}))
        if i % 37 == 5:  # predicted again while waiting: a duplicate
            rows.append((t0 + i + 0.5, 0, {"id": pid, "ts": t0 + i + 0.5,
                                           "score": 0.5, "country": country}))
        if rng.random() < 0.85:
            t = t0 + i + float(rng.integers(1, 400))
            rows.append((t, 1, {"id": pid, "ts": t, "label": int(y[i])}))
        if i % 53 == 0:  # a label of an unknown prediction
            rows.append((t0 + i + 0.25, 1, {"id": f"x{i}", "ts": t0 + i + 0.25, "label": 1}))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(kind, row) for _, kind, row in rows]


def batches_of(stream, size=40):
    """Runs of one kind (``"predictions"`` or ``"labels"``), at most ``size`` rows each."""
    out = []
    for kind, row in stream:
        name = "labels" if kind else "predictions"
        if out and out[-1][0] == name and len(out[-1][1]) < size:
            out[-1][1].append(row)
        else:
            out.append((name, [row]))
    return out


def replay(tmp_path, rows, name):
    """``streameval replay`` of the rows in order: (final values by segment, summary)."""
    log = tmp_path / f"{name}.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for _, r in rows))
    cfg = tmp_path / "replay.toml"
    cfg.write_text(MONITOR)
    out = tmp_path / f"out-{name}"
    assert cli_main(["replay", str(log), "--config", str(cfg), "--out", str(out), "--quiet",
                     "--no-report", "--no-progress", "--on-error", "skip"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    return {f["segment"]: f["values"] for f in summary["final"]}, summary


def post(url_or_port, path, body, headers=None):
    port = url_or_port if isinstance(url_or_port, int) else int(url_or_port.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", path, body=data, headers={**JSON, **(headers or {})})
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def snapshot(port):
    status, data = get(port, "/snapshot")
    assert status == 200
    return json.loads(data)


def served_values(snap):
    return {e["segment"]: e["values"] for e in snap["segments"]}


def assert_equal_to_replay(snap, values, summary):
    """The whole stream's served values are replay's final ones; a segment's (as of its
    last row: its later events wait in its buffer, ``pending``) are those of replay's row
    of that segment at the same count (rows do not depend on batch boundaries)."""
    assert snap["n"] == summary["events"]
    served = served_values(snap)
    assert served[None] == values[None]  # exactly: the same events in the same order
    rows = [json.loads(x) for x in
            (Path(summary["out"]) / "metrics.jsonl").read_text().splitlines()]
    for seg in snap["segments"]:
        key = seg["segment"]
        if key is None or seg["n"] == 0:
            continue
        at = [r["values"] for r in rows if r["segment"] == key and r["n"] == seg["n"]]
        assert at and at[-1] == seg["values"], key
        if not seg.get("pending"):
            assert seg["values"] == values[key]
    join = snap["service"]["join"]
    assert join["pending"] == summary["unlabeled"]
    assert join["expired"] == summary["expired"]
    assert join["orphans"] == summary["orphans"]
    assert join["duplicates"] == summary["rejected"]


# ----------------------------------------------------------------------- the join


def test_predictions_and_labels_join_as_replay_does(tmp_path):
    stream = delayed_stream(600, seed=1)
    with BackgroundServer(write_config(tmp_path), state_dir=tmp_path / "s") as srv:
        port = srv.port
        for kind, rows in batches_of(stream):
            status, body = post(port, f"/{kind}", rows)
            assert status == 200 and body["accepted"] == len(rows), body
            assert "pending" in body
        snap = snapshot(port)
        status, metrics = get(port, "/metrics")
    values, summary = replay(tmp_path, stream, "all")
    assert summary["orphans"] > 10 and summary["expired"] > 10 and summary["rejected"] > 10
    assert_equal_to_replay(snap, values, summary)
    text = metrics.decode()
    join = snap["service"]["join"]
    for outcome in ("joined", "expired", "orphans", "duplicates"):
        assert f'streameval_label_join_total{{outcome="{outcome}"}} {float(join[outcome])}' \
            in text, outcome
    assert f"streameval_predictions_pending {float(join['pending'])}" in text


def test_rows_of_the_wrong_kind_and_a_service_without_label_ttl_are_refused(tmp_path):
    with BackgroundServer(write_config(tmp_path)) as srv:
        pred = {"id": "a", "ts": 1_700_000_000, "score": 0.4}
        status, body = post(srv.url, "/predictions", [pred, {**pred, "id": "b", "label": 1}])
        assert status == 400 and body["index"] == 1 and "complete events go to /events" \
            in body["reason"]
        status, body = post(srv.url, "/labels", [{"id": "a", "ts": 1_700_000_001,
                                                  "label": 1}, {"id": "b", "ts": 1}])
        assert status == 400 and body["index"] == 1
        status, body = post(srv.url, "/predictions", [{"ts": 1_700_000_000, "score": 0.4}])
        assert status == 400 and body["index"] == 0 and "'id'" in body["reason"]
        assert snapshot(srv.port)["service"]["join"]["predictions"] == 0
    with BackgroundServer(None) as srv:
        status, body = post(srv.url, "/predictions", [pred])
        assert status == 404 and "label_ttl" in body["error"]
    # on_duplicate without label_ttl would say nothing: refused at start, as replay does
    config = tmp_path / "dup.toml"
    config.write_text('[input]\non_duplicate = "keep_last"\n')
    with pytest.raises(ValueError, match="on_duplicate needs input.label_ttl"):
        BackgroundServer(config)
    with pytest.raises(ValueError, match=r"on_duplicate = 'error': not supported by serve \(supported by replay, run\)"):
        BackgroundServer({"input": {"label_ttl": 60, "on_duplicate": "error"}})


def test_the_pending_cap_answers_429_and_drops_nothing(tmp_path):
    cfg = write_config(tmp_path, serve="max_pending = 10\n")
    t0 = 1_700_000_000
    preds = [{"id": f"p{i}", "ts": t0 + i, "score": i / 20} for i in range(16)]
    with BackgroundServer(cfg) as srv:
        assert post(srv.url, "/predictions", preds[:8])[0] == 200
        status, body = post(srv.url, "/predictions", preds[8:11])
        assert status == 429 and body["pending"] == 8 and body["max_pending"] == 10
        assert "over max_pending = 10" in body["reason"]
        join = snapshot(srv.port)["service"]["join"]
        assert join["pending"] == 8 and join["predictions"] == 8  # nothing of it applied
        assert snapshot(srv.port)["service"]["pending_refusals"] == 1
        labels = [{"id": f"p{i}", "ts": t0 + 20, "label": i % 2} for i in range(4)]
        assert post(srv.url, "/labels", labels)[1]["pending"] == 4
        status, body = post(srv.url, "/predictions", preds[8:14])  # 4 + 6 = 10: fits
        assert status == 200 and body["pending"] == 10
        assert snapshot(srv.port)["n"] == 4


def test_memory_per_pending_prediction_is_as_stated():
    """PENDING_BYTES bounds what one waiting prediction takes in the joiner (a short
    string id, no segment): measured with tracemalloc over 100 000 of them."""
    n = 100_000
    rows = [{"id": f"req-{i:08d}", "ts": 1_700_000_000 + i, "score": (i % 997) / 997}
            for i in range(n)]
    batch = events_to_batch(rows, partial=True)
    joiner = LabelJoiner(label_ttl=10 * n)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    joiner.process(batch)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert joiner.n_pending == n
    per = used / n
    assert 100 < per <= PENDING_BYTES, per


def test_kill_9_in_a_delayed_label_stream_keeps_the_acknowledged_join(tmp_path):
    """The server is killed (SIGKILL) after the first 60% of the batches were
    acknowledged, with checkpoints every 300 rows (so the last ones are only in the
    write-ahead log): after the restart the join state equals a replay of the
    acknowledged rows, and after the rest of the stream a replay of all of them."""
    stream = delayed_stream(500, seed=2)
    batches = batches_of(stream, size=25)
    cut = int(len(batches) * 0.6)
    cfg = write_config(tmp_path)
    state = tmp_path / "state"
    proc, port = start_cli("--config", cfg, "--state-dir", state, "--checkpoint-events", 300)
    try:
        for kind, rows in batches[:cut]:
            assert post(port, f"/{kind}", rows)[0] == 200
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(20)
    acked = [(0 if k == "predictions" else 1, r) for k, rows in batches[:cut] for r in rows]
    proc, port = start_cli("--config", cfg, "--state-dir", state)
    try:
        snap = snapshot(port)
        assert snap["service"]["replayed_batches"] > 0  # the log was needed
        values, summary = replay(tmp_path, acked, "acked")
        assert_equal_to_replay(snap, values, summary)
        for kind, rows in batches[cut:]:
            assert post(port, f"/{kind}", rows)[0] == 200
        snap = snapshot(port)
    finally:
        assert stop_cli(proc) == 0
    values, summary = replay(tmp_path, stream, "all")
    assert_equal_to_replay(snap, values, summary)


# ----------------------------------------------------------------------- exactly once


def test_a_retried_key_is_acknowledged_again_and_counted_once(tmp_path):
    t0 = 1_700_000_000
    batch = [{"ts": t0 + i, "label": i % 2, "score": i / 10} for i in range(10)]
    other = [{"ts": t0 + 20, "label": 1, "score": 0.9}]
    with BackgroundServer(None, state_dir=tmp_path / "s") as srv:
        s1, b1 = post(srv.url, "/events", batch, {"Idempotency-Key": "k-1"})
        assert s1 == 200 and b1["seq"] == 1 and b1["n"] == 10 and "retried" not in b1
        s2, b2 = post(srv.url, "/events", batch, {"Idempotency-Key": "k-1"})
        assert s2 == 200 and b2 == {"accepted": 10, "seq": 1, "retried": True, "n": 10}
        # the same key with another batch: 422, nothing counted
        s3, b3 = post(srv.url, "/events", other, {"Idempotency-Key": "k-1"})
        assert s3 == 422 and b3["seq"] == 1 and "another batch" in b3["error"]
        # a batch id in the query string is the same thing
        s4, b4 = post(srv.url, "/events?batch_id=b-7", other)
        s5, b5 = post(srv.url, "/events?batch_id=b-7", other)
        assert (s4, s5) == (200, 200) and b4["seq"] == b5["seq"] == 2 and b5["retried"]
        s6, b6 = post(srv.url, "/events?batch_id=x", other, {"Idempotency-Key": "y"})
        assert s6 == 400 and "differ" in b6["error"]
        snap = snapshot(srv.port)
        assert snap["n"] == 11 and snap["service"]["retried_batches"] == 2
        assert snap["service"]["idempotency_keys"] == 2
    # the keys outlive a restart (they are in the log's database)
    with BackgroundServer(None, state_dir=tmp_path / "s") as srv:
        s7, b7 = post(srv.url, "/events", batch, {"Idempotency-Key": "k-1"})
        assert s7 == 200 and b7["seq"] == 1 and b7["retried"] and b7["n"] == 11


def test_keys_are_forgotten_after_the_window(tmp_path):
    now = [1_800_000_000.0]
    eng = build_engine(None, state_dir=tmp_path, checkpoint_seconds=0, clock=lambda: now[0],
                       idempotency_window=60, max_idempotency_keys=3)
    try:
        ev = [{"ts": 1_799_999_000, "label": 1, "score": 0.5}]
        assert eng.ingest(ev, key="a")["seq"] == 1
        now[0] += 61  # past the window: "a" is a new batch again
        assert eng.ingest(ev, key="b")["seq"] == 2
        r = eng.ingest(ev, key="a")
        assert r["seq"] == 3 and "retried" not in r
        for k in "cde":  # at most 3 keys: the oldest go first
            eng.ingest(ev, key=k)
        assert eng.snapshot()["service"]["idempotency_keys"] == 3
        for seq, k in enumerate("cde", start=4):  # kept: retried
            assert eng.ingest(ev, key=k) == {"accepted": 1, "seq": seq, "retried": True, "n": 6}
        eng.checkpoint()
        assert [k for k, *_ in eng._wal.keys()] == ["c", "d", "e"]
    finally:
        eng.close()


def test_a_crash_between_the_fsync_and_the_response_is_retried_exactly_once(tmp_path):
    """The server process exits (os._exit, as kill -9) right after the third log
    commit, before answering: the client sees no response, retries the batch with its
    key on the restarted server, gets the original seq, and the batch counts once --
    in the snapshot, which equals a replay of the three batches. The same retry
    without a key would count it twice (the reason for keys)."""
    t0 = 1_700_000_000
    rng = np.random.default_rng(4)
    batches = [[{"ts": t0 + 100 * b + i, "label": int(rng.random() < 0.3),
                 "score": float(rng.random())} for i in range(50)] for b in range(3)]
    state = tmp_path / "state"
    proc, port = start_cli("--state-dir", state, env={"STREAMEVAL_CRASH_AFTER_COMMIT": "3"})
    try:
        for k, b in enumerate(batches[:2]):
            assert post(port, "/events", b, {"Idempotency-Key": f"batch-{k}"})[1]["seq"] == k + 1
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            post(port, "/events", batches[2], {"Idempotency-Key": "batch-2"})
        assert proc.wait(20) == 137
    finally:
        if proc.poll() is None:
            proc.kill()
    proc, port = start_cli("--state-dir", state)
    try:
        status, body = post(port, "/events", batches[2], {"Idempotency-Key": "batch-2"})
        assert status == 200 and body["seq"] == 3 and body["retried"] is True
        snap = snapshot(port)
    finally:
        assert stop_cli(proc) == 0
    assert snap["n"] == 150 and snap["service"]["replayed_batches"] == 3
    rows = [(0, r) for b in batches for r in b]
    log = tmp_path / "events.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for _, r in rows))
    out = tmp_path / "out"
    assert cli_main(["replay", str(log), "--out", str(out), "--quiet", "--no-report",
                     "--no-progress"]) == 0
    final = json.loads((out / "summary.json").read_text())["final"][0]["values"]
    assert served_values(snap)[None] == final


# ------------------------------------------------------------- before the labels

LABEL_FREE_CONFIG = """\
[monitor]
every = 50
size = 100
group_by = "country"

[input]
label_ttl = 300
on_duplicate = "keep_first"
"""


def label_free_oracle(rows, label_free):
    """A Monitor of the same configuration fed directly: each prediction that enters the
    join (the first of its id while it waits: keep_first) at its own time with
    ``predict``; what the label-free metrics give then, per segment, the number of
    predictions per segment, and per segment the values after each of its first k
    predictions (k from 0)."""
    from streameval import Monitor

    direct = Monitor.default(size=100, every=50, group_by="country", label_free=True)
    waiting = set()
    scores: dict = {}
    counts: dict = {None: 0}
    for kind, r in rows:
        if kind:  # a label: its prediction no longer waits (or it was an orphan)
            waiting.discard(r["id"])
            continue
        if r["id"] in waiting:
            continue  # a duplicate while waiting: refused (keep_first)
        waiting.add(r["id"])
        direct.predict(r["score"], t=r["ts"], segment=r["country"])
        scores.setdefault(r["country"], []).append((r["score"], r["ts"]))
        counts[None] += 1
        counts[r["country"]] = counts.get(r["country"], 0) + 1
    direct.evaluate()  # (the segments' buffered predictions fed)
    snap = direct.snapshot()
    # each segment's values after each of its first k predictions (a Monitor of the
    # segment alone, read after every prediction)
    prefixes = {}
    for key in counts:
        if key is None:
            continue
        alone = Monitor.default(size=100, every=0, label_free=True)
        vals = [alone.snapshot()["segments"][None]["values"]]
        for s, t in scores[key]:
            alone.predict(s, t=t)
            vals.append(alone.snapshot()["segments"][None]["values"])
        prefixes[key] = [{k: v[k] for k in label_free} for v in vals]
    return ({seg["segment"]: {k: seg["values"][k] for k in label_free}
             for seg in snap["segments"].values()}, counts, prefixes)


def assert_label_free(snap, rows):
    label_free = [k for k in snap["segments"][0]["values"]
                  if k.startswith(("predicted_positive_rate", "estimated_"))]
    assert "predicted_positive_rate" in label_free and "estimated_recall@100" in label_free
    want, counts, prefixes = label_free_oracle(rows, label_free)
    for seg in snap["segments"]:
        key = seg["segment"]
        got = {k: seg["values"][k] for k in label_free}
        assert seg["coverage"]["predictions"] == counts[key]  # (counted when they come)
        if key is None:
            for k, v in want[key].items():
                assert got[k] == pytest.approx(v, rel=1e-9, abs=1e-12), (key, k)
            continue
        # a segment's values are as of its last row: those of the predictions it had
        # then, at most its ``pending`` (buffered events of either kind) short of all
        close = [k for k in range(max(0, counts[key] - seg.get("pending", 0)),
                                  counts[key] + 1)
                 if all(got[name] == pytest.approx(v, rel=1e-9, abs=1e-12)
                        for name, v in prefixes[key][k].items())]
        assert close, key


def test_every_prediction_counts_when_it_is_made_and_after_a_kill_9(tmp_path):
    """Predictions and labels through a real socket, the server killed (SIGKILL) after
    60% of the batches (checkpoints every 300 rows: the rest only in the write-ahead
    log), then restarted: the label-free values equal a Monitor fed the acknowledged
    predictions directly, before and after the rest of the stream; a retried batch
    (same Idempotency-Key) counts once."""
    stream = delayed_stream(500, seed=4)
    batches = batches_of(stream, size=25)
    cut = int(len(batches) * 0.6)
    cfg = tmp_path / "lf.toml"
    cfg.write_text(LABEL_FREE_CONFIG)
    state = tmp_path / "state"
    proc, port = start_cli("--config", cfg, "--state-dir", state,
                                      "--checkpoint-events", 300)
    try:
        for k, (kind, rows) in enumerate(batches[:cut]):
            assert post(port, f"/{kind}", rows, {"Idempotency-Key": f"b{k}"})[0] == 200
        kind, rows = batches[cut - 1]  # retried: acknowledged again, counted once
        status, body = post(port, f"/{kind}", rows, {"Idempotency-Key": f"b{cut - 1}"})
        assert status == 200 and body.get("retried")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(20)
    acked = [(0 if k == "predictions" else 1, r) for k, rows in batches[:cut] for r in rows]
    proc, port = start_cli("--config", cfg, "--state-dir", state)
    try:
        snap = snapshot(port)
        assert snap["service"]["replayed_batches"] > 0  # the log was needed
        assert_label_free(snap, acked)
        for k, (kind, rows) in enumerate(batches[cut:], cut):
            assert post(port, f"/{kind}", rows, {"Idempotency-Key": f"b{k}"})[0] == 200
        snap = snapshot(port)
        status, metrics = get(port, "/metrics")
    finally:
        assert stop_cli(proc) == 0
    assert_label_free(snap, stream)
    text = metrics.decode()
    assert "estimated_recall@100" in text and "predicted_positive_rate" in text
    whole = next(s for s in snap["segments"] if s["segment"] is None)
    cov = whole["coverage"]
    assert cov["labelled"] == snap["n"]
    assert cov["pending"] == snap["service"]["join"]["pending"]
    assert cov["expired"] == snap["service"]["join"]["expired"]
    for state in ("predictions", "labelled", "pending", "expired"):
        assert (f'streameval_label_coverage{{segment="",state="{state}"}} '
                f'{float(cov[state])}') in text, state
