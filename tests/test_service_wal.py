"""The write-ahead log gives back the disk space of rows its checkpoints covered.

Oracles: SQLite's own page counts (``PRAGMA page_count``/``freelist_count``), the file's
size on disk, and the batches appended (what remains readable is exactly what was not
truncated)."""

import os
import sqlite3

import numpy as np
import pytest

from streameval.service import wal as W
from streameval.service.wal import Batch, WriteAheadLog

N_ROWS, PER_ROW = 300, 2000


def _batch(rng, n=PER_ROW):
    return Batch(rng.random(n) < 0.3, rng.random(n), np.arange(n, dtype=float), None, None)


def _fill(log, rng):
    batches = {}
    for seq in range(1, N_ROWS + 1):
        batches[seq] = _batch(rng)
        log.append(seq, batches[seq])
        if seq % 20 == 0:
            log.commit()
    log.commit()
    return batches


def _pages(path):
    with sqlite3.connect(path) as db:
        return (db.execute("PRAGMA page_count").fetchone()[0],
                db.execute("PRAGMA page_size").fetchone()[0],
                db.execute("PRAGMA auto_vacuum").fetchone()[0])


def _same(log, batches, after):
    got = list(log.after(after))
    assert [seq for seq, _ in got] == sorted(s for s in batches if s > after)
    for seq, b in got:
        np.testing.assert_array_equal(b.score, batches[seq].score)
        np.testing.assert_array_equal(b.label, batches[seq].label)


def _truncate_and_reclaim(log, through):
    log.truncate_through(through)  # (gives back its first share itself)
    rounds = 1
    while log.reclaim():
        rounds += 1
    return rounds


@pytest.mark.parametrize("old_file", [False, True], ids=["new log", "log without vacuum"])
def test_covered_rows_give_their_disk_space_back(tmp_path, monkeypatch, old_file):
    monkeypatch.setattr(W, "RECLAIM_MIN_PAGES", 256)  # (a 10 MB log in a test)
    path = str(tmp_path / "wal.sqlite3")
    if old_file:  # a log file created before incremental vacuum: its tables exist
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        assert _pages(path)[2] == 0
    rng = np.random.default_rng(5)
    log = WriteAheadLog(path, fingerprint="t")
    batches = _fill(log, rng)
    full = _pages(path)[0] * _pages(path)[1]
    assert full > 8_000_000  # 600 000 events of at least 17 bytes each
    rounds = _truncate_and_reclaim(log, N_ROWS - 5)
    pages, size, vacuum = _pages(path)
    assert vacuum == 2  # incremental, converted if it was not
    assert os.path.getsize(path) == pages * size
    # what is left: 5 rows of 2 000 events, and room for SQLite's own pages
    assert os.path.getsize(path) < full / 10, (full, os.path.getsize(path))
    assert os.path.getsize(path + "-wal") <= W.JOURNAL_SIZE_LIMIT
    if not old_file:  # in steps of at most RECLAIM_PAGES, counted
        assert rounds >= 2 and log.reclaimed_pages > W.RECLAIM_PAGES
    _same(log, batches, N_ROWS - 5)
    assert log.recover(N_ROWS - 5).damage == []
    log.close()
    reopened = WriteAheadLog(path, fingerprint="t")
    _same(reopened, batches, N_ROWS - 5)
    reopened.close()


def test_a_steady_log_is_not_vacuumed(tmp_path, monkeypatch):
    """Free pages under half of the file are left to new rows (no vacuum's cost)."""
    monkeypatch.setattr(W, "RECLAIM_MIN_PAGES", 256)
    path = str(tmp_path / "wal.sqlite3")
    rng = np.random.default_rng(6)
    log = WriteAheadLog(path, fingerprint="t")
    batches = _fill(log, rng)
    log.truncate_through(N_ROWS // 3)
    with sqlite3.connect(path) as db:
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        total = db.execute("PRAGMA page_count").fetchone()[0]
    assert W.RECLAIM_MIN_PAGES <= free < total / 2
    assert log.reclaim() == 0 and log.reclaimed_pages == 0
    assert _pages(path)[0] == total
    # new rows reuse the free pages: the file does not grow
    for seq in range(N_ROWS + 1, N_ROWS + 41):
        batches[seq] = _batch(rng)
        log.append(seq, batches[seq])
    log.commit()
    assert _pages(path)[0] == total
    _same(log, batches, N_ROWS // 3)
    log.close()


def test_not_inside_an_open_transaction(tmp_path, monkeypatch):
    """Rows appended and not yet committed are never committed by a reclaim."""
    monkeypatch.setattr(W, "RECLAIM_MIN_PAGES", 256)
    path = str(tmp_path / "wal.sqlite3")
    rng = np.random.default_rng(7)
    log = WriteAheadLog(path, fingerprint="t")
    batches = _fill(log, rng)
    with sqlite3.connect(path) as db:  # (the deletion, without the reclaim)
        db.execute("DELETE FROM batches WHERE seq <= ?", (N_ROWS - 1,))
    log.append(N_ROWS + 1, _batch(rng))
    assert log.reclaim() == 0
    with sqlite3.connect(path) as db:  # another connection sees no uncommitted row
        assert db.execute("SELECT max(seq) FROM batches").fetchone()[0] == N_ROWS
    log.commit()
    assert log.reclaim() > 0
    assert [s for s, _ in log.after(0)] == [N_ROWS, N_ROWS + 1]
    log.close()
