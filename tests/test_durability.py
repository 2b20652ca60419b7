"""Durable state under faults: real processes, real sockets, real files.

The checkpoint writer (a forked child) holds nothing of its server and dies with it; a
restart on the same port after a ``kill -9`` during checkpoints serves at once; damage
to any state file is refused with a next step, or accepted and counted, never silently
short. Oracles: a Monitor fed the acknowledged batches directly, and the batch counts
the clients know they had acknowledged.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from streameval.io.checkpoint import CheckpointFallback, load_checkpoint, save_checkpoint  # noqa: E402
from streameval.monitor import Monitor  # noqa: E402
from streameval.service import build_engine  # noqa: E402
from streameval.service.engine import (  # noqa: E402
    CHECKPOINT_FILE,
    PREVIOUS_CHECKPOINT_FILE,
    WAL_FILE,
    DataLoss,
    StateDirError,
)
from streameval.service.wal import Batch, _encode  # noqa: E402

CONFIG = {"monitor": {"every": 50, "metrics": {"roc_auc": "roc_auc", "precision": "precision",
                                                "recall": "recall", "log_loss": "log_loss"}}}
JSON = {"Content-Type": "application/json"}


def make_events(n, seed, start=0):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = np.round(np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1), 3)
    return [{"ts": 1_700_000_000 + start + i, "label": bool(y[i]), "score": float(s[i])}
            for i in range(n)]


def direct(batches):
    mon = Monitor.from_config(CONFIG["monitor"])
    for b in batches:
        mon.update_many([e["label"] for e in b], [e["score"] for e in b],
                        t=[e["ts"] for e in b])
    return mon


def same_values(engine, batches):
    """The engine's Monitor equals a direct one fed ``batches`` (every metric value)."""
    want = direct(batches).snapshot()
    got = engine.monitor.snapshot()
    assert got["n"] == want["n"]
    assert values(got) == pytest.approx(values(want), rel=1e-12, nan_ok=True)


def values(snap):
    """The whole stream's metric values of a snapshot (in memory or its JSON)."""
    segs = snap["segments"]
    (seg,) = segs.values() if isinstance(segs, dict) else segs
    return seg["values"]


def engine(state, **kw):
    return build_engine(CONFIG, state_dir=state, checkpoint_every=0, checkpoint_seconds=0, **kw)


def crash_copy(eng, state, to):
    """The state directory as a ``kill -9`` leaves it (copied while the engine runs)."""
    shutil.copytree(state, to, ignore=shutil.ignore_patterns("lock"))
    return to


# ----------------------------------------------------------------------- the writer


def _children(pid):
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _checkpoint_call(port):
    try:
        _call(port, "POST", "/checkpoint", timeout=60)
    except (OSError, http.client.HTTPException):
        pass  # the server was killed meanwhile: that is the test


def _end(proc, sig=signal.SIGKILL):
    proc.send_signal(sig)
    try:
        return proc.wait(30)
    finally:
        proc.stdout.close()
        proc.stderr.close()


def _held(pid):
    """What the descriptors above 2 of process ``pid`` point to (None: it is gone)."""
    try:
        out = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            if int(fd) > 2:
                try:
                    out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
                except OSError:
                    pass
        return out
    except OSError:
        return None


def _start(state, port=0, *extra):
    cmd = [sys.executable, "-m", "streameval", "serve", "--port", str(port), "--state-dir",
           str(state), "--checkpoint-seconds", "0", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline().decode()
    if "listening on http://" not in line:
        proc.kill()
        raise AssertionError(f"no start: {line!r} {proc.stderr.read().decode()}")
    return proc, int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])


def _config_file(tmp_path):
    p = tmp_path / "config.toml"
    p.write_text("[monitor]\nevery = 50\n[monitor.metrics]\n"
                 + "".join(f'{k} = "{v}"\n' for k, v in CONFIG["monitor"]["metrics"].items()))
    return str(p)


def _call(port, method, path, body=b"", headers=None, timeout=30):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or JSON)
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        conn.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_stalled_writer_holds_nothing_dies_with_its_server_and_the_port_is_free(tmp_path):
    """The checkpoint writer is a thread of the server: no process appears while
    checkpoints are written (none can outlive the server or hold its socket). A server
    stopped (SIGSTOP) in the middle of checkpoints and killed restarts at once on the
    same port, and on another one, with every acknowledged event."""
    state = tmp_path / "state"
    proc, port = _start(state)
    acked = 0
    try:
        for k in range(30):
            body = json.dumps(make_events(2000, seed=k, start=2000 * k)).encode()
            assert _call(port, "POST", "/events", body)[0] == 200
            acked += 2000
            t = threading.Thread(target=_checkpoint_call, args=(port,), daemon=True)
            t.start()
            time.sleep(0.002 * (k % 7))
            assert _children(proc.pid) == []  # (no forked writer, ever)
            if k == 20:  # stopped with a checkpoint under way, then killed
                os.kill(proc.pid, signal.SIGSTOP)
                time.sleep(0.2)
                break
            t.join()
    finally:
        _end(proc)
    t0 = time.monotonic()
    proc, port2 = _start(state, port)
    try:
        assert port2 == port and time.monotonic() - t0 < 20
        status, health = _call(port, "GET", "/healthz")
        assert status == 200 and health["n"] == acked and health["lost_batches"] == 0
        assert not [p for p in os.listdir(state) if p.endswith(".tmp")]
        body = json.dumps(make_events(500, seed=77, start=10**6)).encode()
        assert _call(port, "POST", "/events", body)[0] == 200
        acked += 500
        os.kill(proc.pid, signal.SIGSTOP)  # stalled, then killed; restarted elsewhere
    finally:
        _end(proc)
    proc, port3 = _start(state, 0)
    try:
        status, health = _call(port3, "GET", "/healthz")
        assert status == 200 and health["n"] == acked and health["lost_batches"] == 0
    finally:
        assert _end(proc, signal.SIGTERM) == 0


def test_kill_9_at_random_points_with_8_retrying_clients_loses_and_doubles_nothing(tmp_path):
    """8 clients send keyed batches and retry until answered; the server is killed (-9)
    three times at random moments while batches are still unanswered (checkpoints every
    300 events: some kills fall during one), and restarted on the same port. At the end
    every batch counts exactly once."""
    state = tmp_path / "state"
    proc, port = _start(state, 0, "--checkpoint-events", "300", "--config", _config_file(tmp_path))
    per_client, size = 25, 40
    plan = {c: [make_events(size, seed=1000 * c + k, start=(c * per_client + k) * size)
                for k in range(per_client)] for c in range(8)}
    retried, done = [0], threading.Event()
    answered = [0]  # batches answered 200 (a list: the clients' threads add to it)
    lock = threading.Lock()

    def client(c):
        for k, batch in enumerate(plan[c]):
            body = json.dumps(batch).encode()
            while True:
                try:
                    status, out = _call(port, "POST", "/events", body,
                                        {**JSON, "Idempotency-Key": f"c{c}-b{k}"}, timeout=10)
                except (OSError, http.client.HTTPException):
                    time.sleep(0.05)  # the server is down: retry with the same key
                    continue
                if status == 200:
                    with lock:
                        retried[0] += bool(out.get("retried"))
                        answered[0] += 1
                    break
                assert status == 503, (status, out)
                time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(8)]
    for t in threads:
        t.start()
    rng = random.Random(7)
    total = 8 * per_client
    kills = 0  # kills while batches were still unanswered
    try:
        # killed at random moments past 15%, 40% and 60% of the batches answered: the
        # progress, not the clock, places them, so a fast machine cannot finish first
        for share in (0.15, 0.40, 0.60):
            while answered[0] < share * total and any(t.is_alive() for t in threads):
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.03))
            kills += answered[0] < total
            _end(proc)
            proc, _ = _start(state, port, "--checkpoint-events", "300", "--config",
                             _config_file(tmp_path))
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
        done.set()
        status, health = _call(port, "GET", "/healthz")
        assert status == 200 and health["lost_batches"] == 0
        assert health["n"] == 8 * per_client * size  # none lost, none counted twice
        snap = _call(port, "GET", "/snapshot")[1]
    finally:
        _end(proc)
    assert kills >= 2
    # the same state as a Monitor fed every batch once (any order of batches gives the
    # same cumulative AUC/precision/recall; log loss to rounding)
    mon = direct([b for c in plan for b in plan[c]])
    want = mon.snapshot()
    assert snap["n"] == want["n"]
    for name in ("roc_auc", "precision", "recall", "log_loss"):
        assert values(snap)[name] == pytest.approx(values(want)[name], rel=1e-12)


# ----------------------------------------------------------------------- locking, leftovers


def test_one_service_per_state_directory_and_leftovers_are_removed(tmp_path):
    eng = engine(tmp_path)
    try:
        with pytest.raises(StateDirError, match=r"in use by another streameval serve \(pid "
                                                rf"{os.getpid()}"):
            engine(tmp_path)
    finally:
        eng.close()
    # a killed writer's temporary file is removed at start
    left = tmp_path / f".{CHECKPOINT_FILE}.abc123.tmp"
    left.write_text("{partial")
    eng = engine(tmp_path)
    assert not left.exists()
    eng.close()


def test_an_older_checkpoint_is_never_installed_over_a_newer_one(tmp_path):
    eng = engine(tmp_path)
    try:
        eng.ingest(make_events(30, seed=1))
        assert eng.checkpoint()
        newest = (tmp_path / CHECKPOINT_FILE).read_bytes()
        with pytest.raises(RuntimeError, match="not newer than the installed generation 1"):
            eng._write({"monitor": eng.monitor.to_array_state()}, 1, 1)
        assert (tmp_path / CHECKPOINT_FILE).read_bytes() == newest
    finally:
        eng.close()


# ----------------------------------------------------------------------- damage


def _run(tmp_path, nbatches=12, keys=False):
    """A state directory after ``nbatches`` batches and two checkpoints, as a kill -9
    leaves it: (directory, batches)."""
    state = tmp_path / "live"
    eng = engine(state)
    batches = [make_events(50, seed=k, start=50 * k) for k in range(nbatches)]
    for k, b in enumerate(batches):
        eng.ingest(b, key=f"k{k}" if keys else None)
        if k in (3, 7):
            assert eng.checkpoint()
    crashed = crash_copy(eng, state, tmp_path / "crashed")
    eng.close()
    return crashed, batches


def test_a_sound_crash_copy_recovers_everything(tmp_path):
    state, batches = _run(tmp_path)
    eng = engine(state)
    try:
        same_values(eng, batches)
        assert eng.health()["recovered_from"] == CHECKPOINT_FILE
    finally:
        eng.close()


def _flip_wal_frame(state, frame):
    wal = state / (WAL_FILE + "-wal")
    data = bytearray(wal.read_bytes())
    page = int.from_bytes(data[8:12], "big")
    data[32 + (frame - 1) * (24 + page) + 24 + 100] ^= 0x01
    wal.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["flip early frame", "cut 7 bytes", "flip last frame"])
def test_a_damaged_wal_file_is_refused_or_accepted_and_counted(tmp_path, damage):
    state, batches = _run(tmp_path)
    wal = state / (WAL_FILE + "-wal")
    assert wal.stat().st_size > 4096
    if damage == "flip early frame":
        _flip_wal_frame(state, 1)
    elif damage == "cut 7 bytes":
        wal.write_bytes(wal.read_bytes()[:-7])
    else:
        page = int.from_bytes(wal.read_bytes()[8:12], "big")
        _flip_wal_frame(state, (wal.stat().st_size - 32) // (24 + page))
    before = {p.name: p.read_bytes() for p in state.iterdir() if p.is_file()}
    with pytest.raises(DataLoss) as e:
        engine(state)
    msg = str(e.value)
    assert f"{WAL_FILE}-wal" in msg and "At risk: batches from seq" in msg
    assert "--accept-loss" in msg and "\n" not in msg
    # nothing changed by the refusal
    assert {p.name: p.read_bytes() for p in state.iterdir() if p.name != "lock" and p.is_file()} == {
        k: v for k, v in before.items() if k != "lock"}
    eng = engine(state, accept_loss=True)
    try:
        h = eng.health()
        assert h["damage_accepted"] >= 1 and eng.monitor.n <= 600
        assert f"{WAL_FILE}-wal" in " ".join(h["recovery_notes"])
    finally:
        eng.close()
    eng = engine(state)  # the next start is clean
    assert eng.health()["damage_accepted"] >= 1  # the count is kept
    eng.close()


def test_a_flipped_bit_in_a_logged_score_is_caught_by_the_record_checksum(tmp_path):
    state, batches = _run(tmp_path)
    with sqlite3.connect(state / WAL_FILE) as db:
        seq, score = db.execute("SELECT seq, score FROM batches ORDER BY seq DESC").fetchone()
        b = bytearray(score)
        b[8 * 3] ^= 0x01  # the lowest mantissa bit of the 4th score
        db.execute("UPDATE batches SET score = ? WHERE seq = ?", (bytes(b), seq))
    with pytest.raises(DataLoss, match=rf"record seq {seq} fails its checksum.*At risk: "
                                       rf"batch seq {seq}\."):
        engine(state)
    eng = engine(state, accept_loss=True)
    try:
        h = eng.health()
        assert (h["lost_batches"], h["lost_events"]) == (1, 50)
        same_values(eng, batches[:seq - 1] + batches[seq:])  # all but the damaged one
    finally:
        eng.close()


def test_a_gap_and_a_damaged_key_are_refused(tmp_path):
    state, _ = _run(tmp_path, keys=True)
    gap = tmp_path / "gap"
    shutil.copytree(state, gap)
    with sqlite3.connect(gap / WAL_FILE) as db:
        db.execute("DELETE FROM batches WHERE seq = 10")
    with pytest.raises(DataLoss, match=r"records seq 10-10 are missing"):
        engine(gap)
    with sqlite3.connect(state / WAL_FILE) as db:
        db.execute("UPDATE keys SET digest = 'x' || substr(digest, 2) WHERE key = 'k11'")
    with pytest.raises(DataLoss, match=r"idempotency key of batch seq 12 fails its checksum"):
        engine(state)


@pytest.mark.parametrize("how", ["deleted", "flipped byte", "truncated"])
def test_a_lost_newest_checkpoint_falls_back_to_the_previous_one_and_the_log(tmp_path, how):
    state, batches = _run(tmp_path)
    newest = state / CHECKPOINT_FILE
    if how == "deleted":
        newest.unlink()
    elif how == "flipped byte":
        data = bytearray(newest.read_bytes())
        data[len(data) // 2] ^= 0x04
        newest.write_bytes(bytes(data))
    else:
        newest.write_bytes(newest.read_bytes()[:-7])
    eng = engine(state)
    try:
        same_values(eng, batches)  # nothing lost
        h = eng.health()
        assert h["recovered_from"] == PREVIOUS_CHECKPOINT_FILE and h["lost_batches"] == 0
        eng.ingest(make_events(10, seed=77, start=10_000))
        assert eng.checkpoint()
    finally:
        eng.close()
    eng = engine(state)
    try:
        same_values(eng, batches + [make_events(10, seed=77, start=10_000)])
    finally:
        eng.close()


def test_both_checkpoints_lost_is_refused_naming_the_range(tmp_path):
    state, batches = _run(tmp_path)
    (state / CHECKPOINT_FILE).unlink()
    (state / PREVIOUS_CHECKPOINT_FILE).unlink()
    with pytest.raises(DataLoss, match=r"batches up to seq 4 were deleted as covered by a "
                                       r"checkpoint.*At risk: batches seq 1-4\."):
        engine(state)
    eng = engine(state, accept_loss=True)
    try:
        assert eng.health()["lost_batches"] == 4
        same_values(eng, batches[4:])
    finally:
        eng.close()


def test_a_state_directory_of_the_previous_format_still_loads(tmp_path):
    """One checkpoint.json without generation, a log without checksum columns."""
    eng = engine(tmp_path / "new")
    fp = eng.config_id
    eng.close()
    old = tmp_path / "old"
    old.mkdir()
    batches = [make_events(40, seed=k, start=40 * k) for k in range(5)]
    mon = direct(batches[:2])
    state = {"seq": 2, "stats": {"batches": 2, "events": 80}, "monitor": mon.to_state()}
    save_checkpoint(old / CHECKPOINT_FILE, state, kind="service", fingerprint=fp,
                    keep_previous=False)
    with sqlite3.connect(old / WAL_FILE) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('fingerprint', ?)", (fp,))
        db.execute("CREATE TABLE batches (seq INTEGER PRIMARY KEY, n INTEGER NOT NULL, "
                   "label BLOB NOT NULL, score BLOB NOT NULL, weight BLOB, ts BLOB NOT NULL, "
                   "segment TEXT, kind INTEGER NOT NULL DEFAULT 0, ids TEXT)")
        db.execute("CREATE TABLE keys (key TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
                   "n INTEGER NOT NULL, digest TEXT NOT NULL, at REAL NOT NULL)")
        for seq, b in enumerate(batches[2:], start=3):
            batch = Batch(label=np.array([e["label"] for e in b]),
                          score=np.array([e["score"] for e in b]), weight=None,
                          ts=np.array([float(e["ts"]) for e in b]), segment=None,
                          line=np.arange(1, len(b) + 1))
            db.execute("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (seq, *_encode(batch)))
    eng = engine(old)
    try:
        same_values(eng, batches)
        assert eng.replayed == (3, 120)
    finally:
        eng.close()


# ----------------------------------------------------------------------- replay's checkpoints


def test_replay_checkpoints_fall_back_and_refuse_hand_edits_with_exit_2(tmp_path):
    from streameval.cli import main

    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in make_events(600, seed=3)))
    ckpt = tmp_path / "ck.json"
    # a whole run, for the oracle
    assert main(["replay", str(log), "--out", str(tmp_path / "whole"), "-q"]) == 0
    out = tmp_path / "o"
    assert main(["replay", str(log), "--out", str(out), "--checkpoint", str(ckpt),
                 "--checkpoint-every", "100", "-q"]) == 0
    prev = tmp_path / "ck.prev.json"
    assert prev.exists()
    # a flipped byte in the newest: the previous generation is used, with a warning
    data = bytearray(ckpt.read_bytes())
    data[len(data) // 3] ^= 0x02
    ckpt.write_bytes(bytes(data))
    # and a replay resumed from it ends with the outputs of one uninterrupted run
    with pytest.warns(CheckpointFallback, match="loaded its previous generation"):
        assert main(["replay", str(log), "--out", str(out), "--checkpoint", str(ckpt),
                     "-q"]) == 0
    assert (tmp_path / "ck.json.damaged").exists()
    assert load_checkpoint(ckpt, expected_kind="replay")["counts"]["events"] == 600
    assert (out / "metrics.jsonl").read_text() == (tmp_path / "whole" / "metrics.jsonl").read_text()
    # deep nesting: a clear refusal (exit 2), never a traceback
    env = json.loads(prev.read_text())
    text = json.dumps(env)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    ckpt.write_text(text)
    prev.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "streameval", "replay", str(log), "--out",
                           str(tmp_path / "o"), "--checkpoint", str(ckpt), "-q"],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "nested deeper" in proc.stderr
    assert "restore them from a backup, or remove both" in proc.stderr


def test_a_log_that_cannot_be_written_is_refused_at_start_in_one_line(tmp_path, monkeypatch):
    """SQLite opens the log read-only (as it does for a file without write permission,
    which root ignores): the start is refused, naming the file, with no traceback."""
    import streameval.service.wal as wal_module

    eng = engine(tmp_path)
    eng.ingest(make_events(10, seed=5))
    eng.close()
    real = sqlite3.connect

    def read_only(path, *args, **kwargs):
        return real(f"file:{path}?mode=ro", *args, uri=True, **kwargs)

    monkeypatch.setattr(wal_module.sqlite3, "connect", read_only)
    with pytest.raises(StateDirError) as e:
        engine(tmp_path)
    msg = str(e.value)
    assert str(tmp_path / WAL_FILE) in msg and "readonly database" in msg and "\n" not in msg
    monkeypatch.undo()
    eng = engine(tmp_path)  # nothing lost
    assert eng.monitor.n == 10
    eng.close()


# ----------------------------------------------------------------------- full disk, read-only


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 2 MiB tmpfs (root only; skipped elsewhere)."""
    d = tmp_path / "small"
    d.mkdir()
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(d)],
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.decode(errors='replace')}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_a_full_disk_or_a_read_only_state_directory_loses_nothing(tmp_path, small_tmpfs, fault):
    """Checkpoints that fail for want of space or of write access are counted and said
    (``checkpoint_error``), the generations installed stay sound, and every batch
    acknowledged before is there after a restart where there is room."""
    state = small_tmpfs / "state"
    eng = engine(state)
    sent, acked = [], 0
    try:
        eng.ingest(make_events(500, seed=0))
        sent.append(make_events(500, seed=0))
        acked = 500
        assert eng.checkpoint()
        if fault == "read-only":  # new files cannot be made there (the open log stays)
            subprocess.run(["mount", "--bind", str(state), str(state)], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", str(state)], check=True)
        k = 1
        failed = None
        while failed is None and k < 400:
            batch = make_events(500, seed=k, start=500 * k)
            try:
                eng.ingest(batch)
            except Exception as e:  # the log cannot grow: refused, not acknowledged
                failed = e
                break
            sent.append(batch)
            acked += 500
            k += 1
            try:
                eng.checkpoint()
            except OSError as e:
                failed = e
        assert failed is not None, "the tmpfs never filled"
        reason = str(failed).lower()
        assert ("space" in reason or "full" in reason or "read-only" in reason
                or "readonly" in reason), failed
        if isinstance(failed, OSError):
            assert eng.stats["checkpoint_errors"] >= 1 and eng.checkpoint_error
    finally:
        try:
            eng.close()
        except Exception:
            pass
    if fault == "read-only":
        subprocess.run(["umount", "-l", str(state)], check=True)
    # where there is room again: every acknowledged batch, none twice
    roomy = tmp_path / "roomy"
    shutil.copytree(state, roomy, ignore=shutil.ignore_patterns("lock"))
    eng = engine(roomy)
    try:
        assert eng.health()["lost_batches"] == 0
        assert eng.monitor.n >= acked
        n = eng.monitor.n
        assert n % 500 == 0
        same_values(eng, sent + [make_events(500, seed=len(sent), start=500 * len(sent))]
                    if n > acked else sent)
    finally:
        eng.close()


def test_sigterm_finishes_well_within_10_s_after_many_events(tmp_path):
    """Graceful shutdown writes one incremental checkpoint: seconds, not minutes."""
    state = tmp_path / "state"
    proc, port = _start(state)
    try:
        for k in range(40):
            body = json.dumps(make_events(5000, seed=k, start=5000 * k)).encode()
            assert _call(port, "POST", "/events", body)[0] == 200
        t0 = time.monotonic()
    finally:
        code = _end(proc, signal.SIGTERM)
    assert code == 0 and time.monotonic() - t0 < 10
    proc, port = _start(state)
    try:
        status, health = _call(port, "GET", "/healthz")
        assert status == 200 and health["n"] == 200_000 and health["lost_batches"] == 0
        assert health["recovered_from"] == CHECKPOINT_FILE
    finally:
        assert _end(proc, signal.SIGTERM) == 0


@pytest.mark.parametrize("big", [True, False])
def test_frame_checksums_vectorised_equal_sqlites_loop(big):
    """The numpy checksums of whole -wal frames equal the word-by-word recurrence
    (SQLite's algorithm, written as its documentation gives it) for random frames."""
    from streameval.service.wal import _checksum, _frame_checksums

    rng = np.random.default_rng(5)
    page, count = 1024, 6
    data = bytes(32) + rng.integers(0, 256, count * (24 + page), dtype=np.uint8).tobytes()
    seeds = rng.integers(0, 2**32, (count, 2), dtype=np.uint64)
    got = _frame_checksums(data, big, page, count, seeds)
    for i in range(count):
        off = 32 + i * (24 + page)
        want = _checksum(data[off:off + 8] + data[off + 24:off + 24 + page], big,
                         int(seeds[i, 0]), int(seeds[i, 1]))
        assert (int(got[i, 0]), int(got[i, 1])) == want


def test_kill_9_with_8_clients_sending_predictions_then_labels_loses_and_doubles_nothing(
        tmp_path):
    """Delayed labels under kills: 8 clients each send their predictions, then the
    labels, in keyed batches retried until answered; the server is killed (-9) at random
    moments (checkpoints every 300 rows) and restarted on the same port. At the end
    every prediction is joined once: the state equals a Monitor fed the labelled
    events directly."""
    cfg = tmp_path / "delayed.toml"
    cfg.write_text("[monitor]\nevery = 50\n[monitor.metrics]\n"
                   + "".join(f'{k} = "{v}"\n' for k, v in CONFIG["monitor"]["metrics"].items())
                   + "[input]\nlabel_ttl = 100000000\n")
    state = tmp_path / "state"
    args = ("--checkpoint-events", "300", "--config", str(cfg))
    proc, port = _start(state, 0, *args)
    per_client, size = 6, 40
    plans = {}
    for c in range(8):
        events = make_events(per_client * size, seed=500 + c, start=c * per_client * size)
        preds = [{"id": f"c{c}-{i}", "ts": e["ts"], "score": e["score"]}
                 for i, e in enumerate(events)]
        labels = [{"id": f"c{c}-{i}", "ts": e["ts"] + 1, "label": e["label"]}
                  for i, e in enumerate(events)]
        plans[c] = (events, [("predictions", preds[k:k + size]) for k in range(0, len(preds), size)]
                    + [("labels", labels[k:k + size]) for k in range(0, len(labels), size)])

    def client(c):
        for k, (kind, rows) in enumerate(plans[c][1]):
            body = json.dumps(rows).encode()
            while True:
                try:
                    status, out = _call(port, "POST", f"/{kind}", body,
                                        {**JSON, "Idempotency-Key": f"d{c}-{k}"}, timeout=10)
                except (OSError, http.client.HTTPException):
                    time.sleep(0.05)
                    continue
                if status == 200:
                    break
                assert status == 503, (status, out)
                time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(8)]
    for t in threads:
        t.start()
    rng = random.Random(17)
    kills = 0
    try:
        while any(t.is_alive() for t in threads) and kills < 3:
            time.sleep(rng.uniform(0.3, 1.2))
            _end(proc)
            kills += 1
            proc, _ = _start(state, port, *args)
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
        status, health = _call(port, "GET", "/healthz")
        assert status == 200 and health["lost_batches"] == 0
        snap = _call(port, "GET", "/snapshot")[1]
    finally:
        _end(proc)
    assert kills >= 1
    mon = direct([plans[c][0] for c in plans])
    want = mon.snapshot()
    assert snap["n"] == want["n"] == 8 * per_client * size  # none lost, none twice
    for name in ("roc_auc", "precision", "recall", "log_loss"):
        assert values(snap)[name] == pytest.approx(values(want)[name], rel=1e-12)
