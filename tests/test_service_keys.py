"""The engine's idempotency keys (:class:`streameval.service.engine.IdempotencyKeys` in
memory, :class:`streameval.service.engine.LoggedKeys` in the write-ahead log).

The oracle is :class:`DictModel`: the keys as a plain dict ``key -> (seq, n, digest,
at)`` in insertion order, the oldest dropped first past the cap or the window (and, for
a durable engine, at each checkpoint and start), each key's batch digest kept whole.
Both tables must answer every lookup as the model does, after any sequence of batches
(new, retried, conflicting), clock steps (forward and back), cap evictions, checkpoints
and restarts; the log must hold no row of a key the model forgot.
"""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
import tracemalloc
from pathlib import Path

import pytest

pytest.importorskip("starlette")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from streameval.monitor import Monitor  # noqa: E402
from streameval.service.body import BadRequest  # noqa: E402
from streameval.service.engine import (KEY_BYTES, LOGGED_KEY_BYTES, WAL_FILE, Engine,  # noqa: E402
                                       IdempotencyKeys, LoggedKeys)
from streameval.service.wal import digest  # noqa: E402
from streameval.events import events_to_batch  # noqa: E402

KEYS = ["a", "b", "c", "d", "é-ключ", "k" * 255]
DIGESTS = [hashlib.sha256(bytes([i])).hexdigest() for i in range(3)]


class DictModel:
    """The keys as a plain dict, oldest first (the semantics the table must keep)."""

    def __init__(self, window, cap):
        self.window, self.cap, self.d = window, cap, {}

    def __len__(self):
        return len(self.d)

    def find(self, key, dig):
        e = self.d.get(key)
        return None if e is None else (e[0], e[1], e[2] == dig)

    def put(self, key, seq, n, dig, at):
        self.d[key] = (seq, n, dig, at)

    def remember(self, key, seq, n, dig, at):
        self.put(key, seq, n, dig, at)
        horizon = at - self.window
        while self.d:
            oldest = next(iter(self.d))
            if len(self.d) > self.cap or self.d[oldest][3] < horizon:
                del self.d[oldest]
            else:
                break

    def expire(self, horizon):
        """A checkpoint or a start: the oldest keys past the window are dropped."""
        while self.d and next(iter(self.d.values()))[3] < horizon:
            del self.d[next(iter(self.d))]


def _same(table, model):
    assert len(table) == len(model)
    for key in KEYS:
        for dig in DIGESTS:
            assert table.find(key, dig) == model.find(key, dig), (key, dig)


# a restored key may carry any digest the log's table holds ("": one no batch has)
restored = st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(DIGESTS + ["", "xyz"]),
                              st.integers(1, 300),
                              st.integers(-100, 0) | st.floats(-100, 0)), max_size=6)
# integer steps and windows: keys exactly at the window's edge (kept) are common
batches = st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(DIGESTS),
                             st.integers(1, 300), st.integers(-5, 40) | st.floats(-5, 40)),
                   max_size=40)


@settings(max_examples=300, deadline=None)
@given(window=st.integers(1, 60) | st.floats(1, 60), cap=st.integers(1, 5), restored=restored,
       batches=batches)
def test_the_table_answers_as_a_plain_dict(window, cap, restored, batches):
    """A start restores keys (put, nothing dropped), then batches arrive as the engine
    handles them: a known key is a retry or a conflict, a new one is remembered."""
    table, model = IdempotencyKeys(window, cap), DictModel(window, cap)
    seq = 0
    for key, dig, n, at in restored:  # the log's table (a key may repeat: put again)
        seq += 1
        for t in (table, model):
            t.put(key, seq, n, dig, at)
    _same(table, model)
    now = 0.0
    for key, dig, n, step in batches:
        now += step
        hit = model.find(key, dig)
        assert table.find(key, dig) == hit
        if hit is None:
            seq += 1
            for t in (table, model):
                t.remember(key, seq, n, dig, now)
        _same(table, model)
        assert len(table) <= max(cap, len(restored))


# what happens between batches: nothing, a checkpoint, or a restart (durable engines)
steps = st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(DIGESTS),
                           st.integers(1, 30), st.integers(-5, 40) | st.floats(-5, 40),
                           st.sampled_from(["", "", "", "checkpoint", "restart"])),
                 max_size=30)


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "state-dir"])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(window=st.integers(1, 60), cap=st.integers(1, 4), steps=steps)
def test_the_engine_answers_as_a_plain_dict(durable, window, cap, steps):
    """The engine's ingestion path: a new key gets the next seq, a retry its original
    seq and count (not applied again), a conflict a 422 naming the original seq. With a
    state directory the keys are looked up in the log, a checkpoint forgets the keys
    past the window, and a restart keeps the others."""
    now = [1_800_000_000.0]
    with tempfile.TemporaryDirectory() as d:
        opts = dict(state_dir=d if durable else None, checkpoint_seconds=None,
                    checkpoint_every=None, clock=lambda: now[0],
                    idempotency_window=window, max_idempotency_keys=cap)
        eng = Engine.open(Monitor.default(), **opts)
        model = DictModel(window, cap)
        try:
            seq = events = 0
            for key, which, n, step, then in steps:
                now[0] += step
                body = [{"ts": 1_700_000_000 + i, "label": i % 2,
                         "score": (DIGESTS.index(which) + 1) / 10} for i in range(n)]
                dig = digest(events_to_batch(body))
                hit = model.find(key, dig)
                if hit is None:
                    r = eng.ingest(body, key=key)
                    seq, events = seq + 1, events + n
                    assert r == {"accepted": n, "seq": seq, "n": events}
                    model.remember(key, seq, n, dig, now[0])
                elif hit[2]:
                    r = eng.ingest(body, key=key)
                    assert r == {"accepted": hit[1], "seq": hit[0], "retried": True,
                                 "n": events}
                else:
                    with pytest.raises(BadRequest) as e:
                        eng.ingest(body, key=key)
                    assert e.value.status == 422 and f"seq {hit[0]}" in str(e.value)
                assert eng.snapshot()["service"]["idempotency_keys"] == len(model)
                if durable and then == "checkpoint":
                    eng.checkpoint()  # written or not (no batch since), it forgets
                    model.expire(now[0] - window)
                elif durable and then == "restart":
                    eng.close()  # its final checkpoint forgets, and so does the start
                    model.expire(now[0] - window)
                    eng = Engine.open(Monitor.default(), **opts)
                    assert eng.snapshot()["service"]["idempotency_keys"] == len(model)
                    if len(model):  # the log holds no row of a forgotten key
                        oldest = next(iter(model.d.values()))[0]
                        with sqlite3.connect(Path(d) / WAL_FILE) as db:
                            rows = db.execute("SELECT count(*), min(seq) FROM keys").fetchone()
                        assert rows == (len(model), oldest)
        finally:
            eng.close()


def test_keys_are_restored_from_the_log_within_the_window(tmp_path):
    """Keys outlive a restart; those past the window at the restart are new batches."""
    now = [1_800_000_000.0]
    ev = [{"ts": 1_799_999_000, "label": 1, "score": 0.5}]
    other = [{"ts": 1_799_999_000, "label": 0, "score": 0.5}]
    opts = dict(state_dir=tmp_path, checkpoint_seconds=None, checkpoint_every=None,
                clock=lambda: now[0], idempotency_window=60, max_idempotency_keys=10)
    eng = Engine.open(Monitor.default(), **opts)
    assert eng.ingest(ev, key="old")["seq"] == 1
    now[0] += 30
    assert eng.ingest(ev, key="new")["seq"] == 2
    eng.close()
    now[0] += 40  # "old" is 70 s old, "new" 40 s
    eng = Engine.open(Monitor.default(), **opts)
    try:
        assert eng.snapshot()["service"]["idempotency_keys"] == 1
        assert eng.ingest(ev, key="new") == {"accepted": 1, "seq": 2, "retried": True, "n": 2}
        with pytest.raises(BadRequest) as e:
            eng.ingest(other, key="new")
        assert e.value.status == 422
        assert eng.ingest(ev, key="old") == {"accepted": 1, "seq": 3, "n": 3}
    finally:
        eng.close()


def test_memory_per_key_is_as_stated():
    """KEY_BYTES bounds what one remembered key takes, whatever its length: measured
    with tracemalloc over 100 000 keys of 255 characters (the longest allowed)."""
    n = 100_000
    table = IdempotencyKeys(86_400, 10 * n)
    dig = DIGESTS[0]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        table.remember(f"{i:0255d}", i, 100, dig, i / 1000)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(table) == n
    per = used / n
    assert 100 < per <= KEY_BYTES, per


def test_memory_per_logged_key_is_as_stated():
    """With a state directory, memory holds LOGGED_KEY_BYTES per key (the keys stay in
    the log): measured with tracemalloc over 100 000 keys, besides one chunk's slack."""
    n = 100_000
    table = LoggedKeys(86_400, 10 * n, lookup=lambda key: None)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        table.remember(f"{i:0255d}", i, 100, DIGESTS[0], i / 1000)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(table) == n
    slack = 4096 * LOGGED_KEY_BYTES
    assert n * LOGGED_KEY_BYTES <= used <= n * LOGGED_KEY_BYTES + slack + 4096, used / n


def test_a_damaged_key_in_the_log_stops_the_service_and_the_start_reports_it(tmp_path):
    """A key's row altered on disk while the service runs: its retry cannot be told from
    a new batch, so the service stops (503) instead of counting the batch again; the
    next start finds the damage and refuses to start without accept_loss."""
    from streameval.service.engine import DataLoss, Unavailable

    ev = [{"ts": 1_700_000_000, "label": 1, "score": 0.5}]
    opts = dict(state_dir=tmp_path, checkpoint_seconds=None, checkpoint_every=None)
    eng = Engine.open(Monitor.default(), **opts)
    try:
        assert eng.ingest(ev, key="k1")["seq"] == 1
        assert eng.ingest(ev, key="k2")["seq"] == 2
        with sqlite3.connect(tmp_path / WAL_FILE) as db:
            db.execute("UPDATE keys SET n = 7 WHERE key = 'k1'")
        assert eng.ingest(ev, key="k2")["retried"] is True
        with pytest.raises(Unavailable, match="k1.*fails its checksum"):
            eng.ingest(ev, key="k1")
        assert eng.monitor.n == 2
        with pytest.raises(Unavailable):
            eng.ingest(ev, key="k3")
    finally:
        eng.close()
    with pytest.raises(DataLoss, match="idempotency key of batch seq 1 fails its checksum"):
        Engine.open(Monitor.default(), **opts)
    eng = Engine.open(Monitor.default(), accept_loss=True, **opts)
    try:  # the damaged key is forgotten (its batch is kept); the sound one is remembered
        assert eng.snapshot()["service"]["idempotency_keys"] == 1
        assert eng.ingest(ev, key="k2")["retried"] is True
        assert eng.ingest(ev, key="k1") == {"accepted": 1, "seq": 3, "n": 3}
    finally:
        eng.close()


def test_a_start_keeps_at_most_the_cap_of_the_keys_the_log_holds(tmp_path):
    """Started again with a lower max_idempotency_keys, the engine remembers only the
    newest keys within it; the older are new batches again."""
    ev = [{"ts": 1_700_000_000, "label": 1, "score": 0.5}]
    opts = dict(state_dir=tmp_path, checkpoint_seconds=None, checkpoint_every=None)
    eng = Engine.open(Monitor.default(), max_idempotency_keys=5, **opts)
    for i in range(5):
        assert eng.ingest(ev, key=f"k{i}")["seq"] == i + 1
    eng.close()
    eng = Engine.open(Monitor.default(), max_idempotency_keys=2, **opts)
    try:
        assert eng.snapshot()["service"]["idempotency_keys"] == 2
        assert eng.ingest(ev, key="k4")["retried"] is True
        assert eng.ingest(ev, key="k3")["retried"] is True
        assert eng.ingest(ev, key="k2") == {"accepted": 1, "seq": 6, "n": 6}
    finally:
        eng.close()


def test_a_key_whose_batch_is_missing_from_the_log_is_reported(tmp_path):
    """A key of a batch after the checkpoint that the log does not hold (its row gone):
    the start reports the loss instead of answering the key as a retry."""
    from streameval.service.engine import CHECKPOINT_FILE, PREVIOUS_CHECKPOINT_FILE, DataLoss

    ev = [{"ts": 1_700_000_000, "label": 1, "score": 0.5}]
    opts = dict(state_dir=tmp_path, checkpoint_seconds=None, checkpoint_every=None)
    eng = Engine.open(Monitor.default(), **opts)
    assert eng.ingest(ev, key="a")["seq"] == 1
    assert eng.ingest(ev, key="b")["seq"] == 2
    eng.close()
    for name in (CHECKPOINT_FILE, PREVIOUS_CHECKPOINT_FILE):  # the log alone covers all
        (tmp_path / name).unlink(missing_ok=True)
    with sqlite3.connect(tmp_path / WAL_FILE) as db:
        db.execute("DELETE FROM batches WHERE seq = 2")
    with pytest.raises(DataLoss, match="batch seq 2, stored with its idempotency key, "
                                       "is not in the log"):
        Engine.open(Monitor.default(), **opts)


def test_rows_rolled_back_with_their_transaction_are_never_committed_as_durable(tmp_path):
    """SQLite rolls a whole transaction back on some errors (a full disk): the log's
    commit then raises instead of returning as if the appended rows were durable, and
    no later transaction hides it."""
    from streameval.service.wal import WriteAheadLog

    wal = WriteAheadLog(tmp_path / "w.sqlite3", "fp")
    try:
        batch = events_to_batch([{"ts": 1_700_000_000, "label": 1, "score": 0.5}])
        wal.append(1, batch, "k", digest(batch), 1.0)
        wal.commit()  # durable
        wal.append(2, batch, "k2", digest(batch), 2.0)
        wal._db.execute("ROLLBACK")  # what SQLite does to the transaction on SQLITE_FULL
        for step in (wal.commit, lambda: wal.forget_keys(1), lambda: wal.append(3, batch)):
            with pytest.raises(sqlite3.OperationalError, match="rolled back"):
                step()
        assert wal.find_key("k")[0] == 1 and wal.find_key("k2") is None
    finally:
        wal.close()


def test_the_keys_are_read_for_salvage_past_a_damaged_seq_index(tmp_path):
    """The keys of a log whose ``seq`` index alone is damaged can still be read (what a
    start with accept_loss carries over to a new log), while a read through the index
    fails."""
    from streameval.service.wal import WriteAheadLog

    path = tmp_path / "w.sqlite3"
    wal = WriteAheadLog(path, "fp")
    batch = events_to_batch([{"ts": 1_700_000_000, "label": 1, "score": 0.5}])
    for i in range(1, 6):
        wal.append(i, batch, f"k{i}", digest(batch), float(i))
    wal.commit()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        root = db.execute("SELECT rootpage FROM sqlite_master "
                          "WHERE name = 'keys_by_seq'").fetchone()[0]
        size = db.execute("PRAGMA page_size").fetchone()[0]
    wal.close()
    with open(path, "r+b") as f:  # the index's only page: garbage
        f.seek((root - 1) * size)
        f.write(b"\xa5" * size)
    wal = WriteAheadLog(path, "fp")
    try:
        with pytest.raises(sqlite3.DatabaseError):
            wal._db.execute("SELECT seq FROM keys INDEXED BY keys_by_seq "
                            "WHERE seq > 0 ORDER BY seq").fetchall()
        assert [r[:2] for r in wal.keys()] == [(f"k{i}", i) for i in range(1, 6)]
    finally:
        wal.close()
