"""``streameval replay --follow``: a log read as it grows, like ``tail -F``.

Real subprocesses follow real files while this test appends to them (in chunks, with
half lines and half CSV records), rotates them (renamed and created again) or
truncates them, then stops them with SIGTERM. Oracle: an ordinary replay of the
final file (or, after a rotation, of the files one after the other), whose
``metrics.jsonl`` and ``alerts.jsonl`` the followed run must equal byte for byte:
an event read twice, lost, or read half written would change them.
"""

import csv
import io
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from streameval.cli import main
from streameval.io.checkpoint import load_checkpoint

CONFIG = """
[monitor]
every = 1
[monitor.metrics]
roc_auc = "roc_auc"
average_precision = "average_precision"
"recall@40" = { metric = "recall", size = 40 }

[[monitor.rules]]
name = "recall_low"
metric = "recall@40"
op = "<"
value = 0.6
min_samples = 20
"""

TIMEOUT = 60


def _rows(n, seed=0):
    """Events with a recall drop in the middle (rows 150-299), so that an alert fires and
    resolves; scores rounded (ties)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        y = bool(rng.random() < 0.4)
        s = float(np.clip(0.5 + (0.3 if y else -0.2) + 0.25 * rng.standard_normal(), 0, 1))
        if y and 150 <= i < 300:
            s *= 0.4
        out.append({"ts": 1_700_000_000 + i, "label": int(y), "score": round(s, 2)})
    return out


def _jsonl(rows):
    return [json.dumps(r) + "\n" for r in rows]


def _csv(rows, header=True):
    """CSV lines (a list of records as text); every 7th record has a quoted note
    holding a line break, a comma and a quote."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    recs = []
    if header:
        w.writerow(["ts", "label", "score", "note"])
        recs.append(buf.getvalue())
    for i, r in enumerate(rows):
        buf.seek(0)
        buf.truncate()
        note = f'line one, "{i}"\nline two' if i % 7 == 0 else f"n{i}"
        w.writerow([r["ts"], r["label"], r["score"], note])
        recs.append(buf.getvalue())
    return recs


def _append(path, text):
    with open(path, "a", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()


def _metric_rows(out):
    p = out / "metrics.jsonl"
    if not p.exists():
        return []
    return [json.loads(x) for x in p.read_text().splitlines(keepends=True) if x.endswith("\n")]


def _wait_for_n(proc, out, n):
    """Wait until the followed run wrote its evaluation at ``n`` events."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        rows = _metric_rows(out)
        if rows and rows[-1]["n"] >= n:
            assert rows[-1]["n"] == n, f"read past the complete lines: {rows[-1]['n']} > {n}"
            return
        time.sleep(0.02)
    raise AssertionError(f"no evaluation at n={n} within {TIMEOUT} s")


def _follow(log, out, cfg, *extra):
    cmd = [sys.executable, "-m", "streameval", "replay", str(log), "--follow", "--poll", "0.05",
           "--config", str(cfg), "--out", str(out), "--no-report", *map(str, extra)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stop(proc):
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr
    return stdout, stderr


def _reference(tmp_path, log, cfg, name="ref"):
    ref = tmp_path / name
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(ref), "--no-report",
                 "-q"]) == 0
    return ref


def _same_outputs(out, ref):
    for name in ("metrics.jsonl", "alerts.jsonl"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    a = json.loads((out / "summary.json").read_text())
    b = json.loads((ref / "summary.json").read_text())
    for key in ("events", "rows", "rejected", "final", "fired", "evaluations"):
        assert a[key] == b[key], key


@pytest.fixture
def cfg(tmp_path):
    p = tmp_path / "cfg.toml"
    p.write_text(CONFIG)
    return p


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_follow_reads_appended_lines_waits_for_half_lines_and_stops_on_sigterm(
        tmp_path, cfg, fmt):
    rows = _rows(400, seed=1)
    recs = _jsonl(rows) if fmt == "jsonl" else _csv(rows)
    head = 0 if fmt == "jsonl" else 1  # the CSV header
    log = tmp_path / f"log.{fmt}"
    log.write_text("".join(recs[:head + 60]))
    out = tmp_path / "out"
    proc = _follow(log, out, cfg)
    try:
        _wait_for_n(proc, out, 60)
        done = 60
        for size in (40, 100, 31):  # chunks, each ending on a whole line
            _append(log, "".join(recs[head + done:head + done + size]))
            done += size
            _wait_for_n(proc, out, done)
        # half a record: the first part of row 231 (CSV: a note with a line break, cut
        # after its first line, inside the quoted field), then the rest
        nxt = recs[head + done]
        cut = nxt.index("\n") + 1 if fmt == "csv" else len(nxt) // 2
        assert fmt == "jsonl" or "\n" in nxt[:-1]
        _append(log, nxt[:cut])
        time.sleep(0.5)  # ten looks at the file: the half record must not be read
        assert _metric_rows(out)[-1]["n"] == done
        _append(log, nxt[cut:] + "".join(recs[head + done + 1:head + done + 10]))
        done += 10
        _wait_for_n(proc, out, done)
        _append(log, "".join(recs[head + done:head + 395]))
        _wait_for_n(proc, out, 395)
        # and half a line at the end, never completed: left unread
        _append(log, recs[head + 395][:7])
        time.sleep(0.3)
    finally:
        stdout, _ = _stop(proc)
    assert "alerts fired: 1" in stdout and "resolved at n=" in stdout
    # the oracle: an ordinary replay of the whole lines written
    final = tmp_path / f"final.{fmt}"
    final.write_text("".join(recs[:head + 395]))
    ref = _reference(tmp_path, final, cfg)
    _same_outputs(out, ref)
    assert _metric_rows(out)[-1]["n"] == 395
    states = [a["state"] for a in map(json.loads, (out / "alerts.jsonl").open())]
    assert "firing" in states and "resolved" in states


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_follow_with_checkpoint_restarts_where_it_stopped(tmp_path, cfg, fmt):
    rows = _rows(500, seed=2)
    if fmt == "jsonl":
        recs = _jsonl(rows)
    else:  # the header, then the records: recs[k] is row k again, the header before
        header, *recs = _csv(rows)
    log = tmp_path / f"log.{fmt}"
    log.write_text(("" if fmt == "jsonl" else header) + "".join(recs[:100]))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt.json"
    extra = ("--checkpoint", ckpt, "--checkpoint-every", 50)

    proc = _follow(log, out, cfg, *extra)
    try:
        _wait_for_n(proc, out, 100)
        _append(log, "".join(recs[100:230]))
        _wait_for_n(proc, out, 230)
        # checkpoints at the usual cadence while following
        state = load_checkpoint(ckpt)
        assert not state["done"] and 150 <= state["counts"]["events"] < 230
        _append(log, recs[230][:20])  # half a line when it stops
        time.sleep(0.2)
    finally:
        _stop(proc)
    state = load_checkpoint(ckpt)
    assert state["done"] and state["counts"]["events"] == 230
    lines = 230 if fmt == "jsonl" else 1 + sum(r.count("\n") for r in recs[:230])
    assert state["source"]["position"] == lines  # lines, records spanning two lines
    assert state["source"]["offset"] == log.stat().st_size - 20

    # lines written while nothing follows the log (the half line completed)
    _append(log, recs[230][20:] + "".join(recs[231:300]))
    proc = _follow(log, out, cfg, *extra)
    try:
        # a restart: the rows of the stop's last evaluation are cut, then written again
        _wait_for_n(proc, out, 300)
        _append(log, "".join(recs[300:500]))
        _wait_for_n(proc, out, 500)
    finally:
        stdout, _ = _stop(proc)
    assert "[resumed from checkpoint]" in stdout
    ref = _reference(tmp_path, log, cfg)
    _same_outputs(out, ref)
    assert load_checkpoint(ckpt)["counts"]["events"] == 500

    # an ordinary replay with the same checkpoint: nothing new, the same outputs
    assert main(["replay", str(log), "--config", str(cfg), "--out", str(out), "--no-report",
                 "-q", "--checkpoint", str(ckpt)]) == 0
    _same_outputs(out, ref)


@pytest.mark.parametrize("how", ["rotated", "truncated"])
def test_follow_goes_on_with_a_rotated_or_truncated_file(tmp_path, cfg, how):
    rows = _rows(360, seed=3)
    recs = _jsonl(rows)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(recs[:200]))
    out = tmp_path / "out"
    proc = _follow(log, out, cfg)
    try:
        _wait_for_n(proc, out, 200)
        if how == "rotated":
            # logrotate: the last lines go to the old file after it was renamed (the
            # writer still has it open), then a new file takes the name
            with open(log, "a") as old:
                log.rename(tmp_path / "log.jsonl.1")
                old.write("".join(recs[200:250]))
            new = "".join(recs[250:360])
            (tmp_path / "log.jsonl.tmp").write_text(new[:len(new) // 2])
            (tmp_path / "log.jsonl.tmp").rename(log)
            _append(log, new[len(new) // 2:])
            _wait_for_n(proc, out, 360)
        else:
            _append(log, "".join(recs[200:250]))
            _wait_for_n(proc, out, 250)
            with open(log, "w") as f:  # copytruncate: emptied, then written again
                f.write("".join(recs[250:300]))
            _wait_for_n(proc, out, 300)
            _append(log, "".join(recs[300:360]))
            _wait_for_n(proc, out, 360)
    finally:
        _, stderr = _stop(proc)
    assert ("following the new file" if how == "rotated" else "truncated") in stderr
    whole = tmp_path / "whole.jsonl"
    whole.write_text("".join(recs))
    _same_outputs(out, _reference(tmp_path, whole, cfg))


def test_follow_refuses_compressed_parquet_and_stdin(tmp_path, capsys):
    import gzip

    gz = tmp_path / "log.jsonl.gz"
    with gzip.open(gz, "wt") as f:
        f.write('{"ts": 1, "label": 1, "score": 0.5}\n')
    pq = tmp_path / "log.parquet"
    pq.write_bytes(b"PAR1")
    for log, words in ((gz, "compressed log (.gz) cannot be followed"),
                       (pq, "parquet file cannot be followed"),
                       ("-", "--follow follows a file by its name")):
        assert main(["replay", str(log), "--follow", "--out", str(tmp_path / "out"),
                     "--no-report", "-q"]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err
    assert main(["replay", str(gz), "--follow", "--engine", "spark",
                 "--out", str(tmp_path / "out")]) == 2
    assert "--follow" in capsys.readouterr().err


def test_follow_in_process_stops_with_replay_stop(tmp_path, cfg):
    """The library form: ``Replay(..., follow=True)`` in a thread, stopped by ``stop()``;
    a delayed-label log (prediction and label rows in one file) joins as it grows."""
    import threading

    from streameval.cli import Replay

    n = 120
    lines = []
    for i in range(n):  # a prediction, and the label of the one 5 rows before
        lines.append(json.dumps({"id": i, "ts": 1_700_000_000 + 2 * i,
                                 "score": round((i * 37 % 100) / 100, 2)}) + "\n")
        if i >= 5:
            j = i - 5
            lines.append(json.dumps({"id": j, "ts": 1_700_000_000 + 2 * i + 1,
                                     "label": int(j % 3 == 0)}) + "\n")
    dcfg = tmp_path / "delayed.toml"
    dcfg.write_text(CONFIG + "\n[input]\nlabel_ttl = 1000\n")
    log = tmp_path / "log.jsonl"
    log.write_text("".join(lines[:50]))
    out = tmp_path / "out"
    job = Replay(log, out, config=dcfg, report=False, progress=False, follow=True, poll=0.02)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("summary", job.run()))
    t.start()
    try:
        for k in range(50, len(lines), 37):
            time.sleep(0.05)
            _append(log, "".join(lines[k:k + 37]))
        deadline = time.monotonic() + TIMEOUT
        while job.pipeline.source.positions[0] < len(lines):
            assert time.monotonic() < deadline and t.is_alive()
            time.sleep(0.02)
    finally:
        job.stop()
        t.join(TIMEOUT)
    assert not t.is_alive()
    ref = tmp_path / "ref"
    assert main(["replay", str(log), "--config", str(dcfg), "--out", str(ref), "--no-report",
                 "-q"]) == 0
    for name in ("metrics.jsonl", "alerts.jsonl"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    assert result["summary"]["events"] == n - 5


def test_tail_gives_whole_lines_and_the_rest_of_a_replaced_file(tmp_path):
    from streameval.io.follow import Tail

    p = tmp_path / "a.log"
    p.write_bytes(b"one\ntw")
    t = Tail(str(p), poll=0.01, stop=lambda: False)
    assert list(t) == [b"one\n"] and t.offset == 4
    _append(p, "o\nthree")
    assert t.wait() and list(t) == [b"two\n"]
    p.rename(tmp_path / "a.log.1")
    p.write_bytes(b"new\n")
    assert t.wait()  # the rest of the old file, its last line without a newline
    assert list(t) == [b"three"] and t.ended and t.reason == "replaced"
    assert not t.wait()
    t.close()
    stop = {"now": False}
    t = Tail(str(p), poll=0.01, stop=lambda: stop["now"])
    assert list(t) == [b"new\n"]
    stop["now"] = True
    assert not t.wait() and t.stopped and not t.ended
    t.close()


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_followed_file_resumes_at_its_byte_offset_with_its_line_numbers(tmp_path, fmt):
    """A followed source stopped after some batches and restored from its state reads the
    rest of the file from the byte offset: the same events as one plain reading, and
    bad rows named by the same physical lines (CSV records spanning two lines)."""
    from streameval.io.sources import EventSource, Follow

    rows = _rows(300, seed=4)
    recs = _jsonl(rows) if fmt == "jsonl" else _csv(rows)
    for k in (40, 170, 260):  # bad rows: a score that is not a number
        recs[k] = recs[k].replace(str(rows[k - (fmt == "csv")]["score"]), "oops", 1)
    log = tmp_path / f"log.{fmt}"
    log.write_text("".join(recs))

    def read(src, stop_after=None):
        got, bad = [], []
        src.rejected = lambda line, reason, raw: bad.append(line)
        for b in src:
            got += b.ts.tolist()
            if stop_after is not None and src.n_rows >= stop_after:
                break
        return got, bad

    plain_ts, plain_bad = read(EventSource(log, on_error="skip"))
    assert len(plain_bad) == 3 and len(plain_ts) == 297
    first = EventSource(log, on_error="skip", batch_size=25,
                        follow=Follow(poll=0.01, stop=lambda: False))
    ts1, bad1 = read(first, stop_after=120)
    state = first.to_state()
    assert state["offset"] > 0 and state["position"] > 100
    second = EventSource(log, on_error="skip", batch_size=25,
                         follow=Follow(poll=0.01, stop=lambda: second.n_rows >= 300 - first.n_rows))
    second.restore(state)
    ts2, bad2 = read(second)
    assert ts1 + ts2 == plain_ts
    assert bad1 + bad2 == plain_bad


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_followed_file_bounds_its_lines_as_a_plain_reading_does(tmp_path, fmt):
    """A followed file holds at most ``max_line_bytes`` of a line: an over-long line
    (here 20 MB against a limit of 10 000 bytes) is a bad row named by its line, as in a
    plain reading of the same file, the events around it are the same, and the peak
    memory of reading it stays far below the line's size (tracemalloc)."""
    import tracemalloc

    from streameval.io.sources import EventSource, Follow

    rows = _rows(200, seed=5)
    recs = _jsonl(rows) if fmt == "jsonl" else _csv(rows)
    big = 20_000_000
    k = 120  # a record replaced by one over-long line
    recs[k] = ('{"label": 1, "score": 0.' + "1" * big + "}\n" if fmt == "jsonl"
               else "1," + "2" * big + ",3\n")
    log = tmp_path / f"log.{fmt}"
    log.write_text("".join(recs))

    def read(src):
        got, bad = [], []
        src.rejected = lambda line, reason, raw: bad.append((line, reason))
        for b in src:
            got += b.ts.tolist()
        return got, bad

    plain_ts, plain_bad = read(EventSource(log, on_error="skip", max_line_bytes=10_000))
    line = "".join(recs[:k]).count("\n") + 1  # (CSV records may span two lines)
    assert len(plain_bad) == 1 and plain_bad[0][0] == line
    assert "more than the limit of 10000 bytes" in plain_bad[0][1]
    assert len(plain_ts) == 199

    seen = {"events": 0, "bad": 0}

    def done():
        return seen["events"] + seen["bad"] >= len(plain_ts) + len(plain_bad)

    followed = EventSource(log, on_error="skip", batch_size=25, max_line_bytes=10_000,
                           follow=Follow(poll=0.01, stop=done))
    got, bad = [], []

    def rejected(line, reason, raw):
        bad.append((line, reason))
        seen["bad"] += 1

    followed.rejected = rejected
    tracemalloc.start()
    try:
        for b in followed:
            got += b.ts.tolist()
            seen["events"] += len(b.ts)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == plain_ts
    assert [line for line, _ in bad] == [line for line, _ in plain_bad]
    assert "more than the limit of 10000 bytes" in bad[0][1]
    assert peak < big / 4, peak
