"""The service's write-ahead log: acknowledged batches since the last checkpoint.

Each applied batch is stored as one row of an SQLite table; the service acknowledges
it only after a :meth:`WriteAheadLog.commit` that covers it has returned (with
``synchronous=FULL``, after SQLite's fsync). Commits are shared: rows appended by
several requests while one commit runs are made durable together by the next one
(*group commit*), so concurrent clients do not pay one fsync each. A checkpoint
records the sequence number it covers; rows up to it are then deleted. On start the
service loads the checkpoint and replays the committed rows after it, so a ``kill -9``
loses no acknowledged event. SQLite gives the atomic, torn-write-safe append that a
hand-made log file would have to reimplement (checksums, partial last records).

Rows hold the validated columns of a :class:`streameval.events.Batch` (the one batch type
from a source to the Monitor), never code: labels as bytes, scores, weights and event
times as little-endian float64 bytes, segments and ids as JSON lists, and the batch's
kind (events, predictions waiting for their label, or labels). Nothing read back is
evaluated or unpickled.

A batch sent with an idempotency key is stored with its key in the ``keys`` table, in
the same transaction: a retried key is recognised after a ``kill -9`` exactly when its
batch is durable. Keys older than the service's window are deleted at checkpoints.

Imports: numpy, the standard library (sqlite3, json) and :mod:`streameval.events` (the
batch type) only; the engine (:mod:`streameval.service.engine`) uses it.

>>> import tempfile, numpy as np
>>> d = tempfile.mkdtemp()
>>> wal = WriteAheadLog(d + "/wal.sqlite3", fingerprint="demo")
>>> wal.append(1, Batch(np.array([True, False]), np.array([0.9, 0.2]), np.array([5.0, 6.0]), None,
...                     np.array([1, 2])))
>>> wal.commit()
>>> [(seq, b.label.tolist(), b.score.tolist()) for seq, b in wal.after(0)]
[(1, [True, False], [0.9, 0.2])]
>>> wal.truncate_through(1); list(wal.after(0))
[]
>>> wal.close()
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Iterator

import numpy as np

from streameval.events import Batch

__all__ = ["Batch", "WriteAheadLog", "StateMismatch", "EVENTS", "PREDICTIONS", "LABELS",
           "digest"]

#: Kinds of batch: complete events, predictions waiting for a label, labels.
EVENTS, PREDICTIONS, LABELS = 0, 1, 2

_F8 = np.dtype("<f8")


class StateMismatch(ValueError):
    """The state directory was written by a service with another configuration."""


def _kind(batch: Batch) -> int:
    """The kind of a batch (one for all its rows: the service logs each kind apart)."""
    if batch.kind is None or not len(batch.kind):
        return EVENTS
    kind = int(batch.kind[0])
    if (batch.kind != kind).any():
        raise ValueError("a write-ahead log row holds one kind of rows")
    return kind


def _encode(batch: Batch) -> tuple:
    seg = batch.segment
    kind = _kind(batch)
    w = batch.weight
    ids = None if kind == EVENTS else batch.id
    return (
        len(batch.score),
        np.ascontiguousarray(batch.label, dtype=np.bool_).tobytes(),
        np.ascontiguousarray(batch.score, dtype=_F8).tobytes(),
        None if w is None or not (w != 1.0).any() else np.ascontiguousarray(w, dtype=_F8).tobytes(),
        np.ascontiguousarray(batch.ts, dtype=_F8).tobytes(),
        None if seg is None else json.dumps(seg, separators=(",", ":")),
        kind,
        None if ids is None else json.dumps(ids, separators=(",", ":")),
    )


def digest(batch: Batch) -> str:
    """SHA-256 of a batch's stored columns: a retried key must carry the same batch."""
    h = hashlib.sha256()
    for part in _encode(batch):
        h.update(repr(part).encode() if not isinstance(part, bytes) else part)
        h.update(b"\x00")
    return h.hexdigest()


def _decode(n, label, score, weight, ts, segment, kind=EVENTS, ids=None) -> Batch:
    kind = EVENTS if kind is None else int(kind)
    b = Batch(
        np.frombuffer(label, dtype=np.bool_).copy(),
        np.frombuffer(score, dtype=_F8).astype(np.float64),
        np.frombuffer(ts, dtype=_F8).astype(np.float64),
        None if weight is None else np.frombuffer(weight, dtype=_F8).astype(np.float64),
        np.arange(1, n + 1, dtype=np.int64),
        None if ids is None else json.loads(ids),
        None if segment is None else [tuple(s) if isinstance(s, list) else s for s in json.loads(segment)],
        None if kind == EVENTS else np.full(n, kind, np.int8),
    )
    if not (len(b.label) == len(b.score) == len(b.ts) == n):
        raise ValueError(f"write-ahead log row of {n} events has columns of other lengths")
    return b


class WriteAheadLog:
    """An SQLite table of acknowledged batches, keyed by sequence number.

    Runtime complexity: `append` is `O(n)` in the batch size; `commit` one fsync,
    shared by every row appended since the last one.

    Not thread-safe by itself: the service calls it under a lock.

    Parameters: ``path`` of the database file; ``fingerprint`` identifies the monitor
    configuration; opening a log written with another fingerprint raises
    :class:`StateMismatch` (a state directory belongs to one configuration).
    ``synchronous`` is SQLite's setting: ``"FULL"`` (default) survives power loss,
    ``"NORMAL"`` survives a process crash only.
    """

    def __init__(self, path, fingerprint: str, synchronous: str = "FULL"):
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous = {synchronous!r}: must be 'FULL' or 'NORMAL'")
        self.path = str(path)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db = self._db
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={synchronous}")
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute(
            "CREATE TABLE IF NOT EXISTS batches (seq INTEGER PRIMARY KEY, n INTEGER NOT NULL, "
            "label BLOB NOT NULL, score BLOB NOT NULL, weight BLOB, ts BLOB NOT NULL, segment TEXT, "
            "kind INTEGER NOT NULL DEFAULT 0, ids TEXT)"
        )
        columns = {r[1] for r in db.execute("PRAGMA table_info(batches)")}
        for name, decl in (("kind", "INTEGER NOT NULL DEFAULT 0"), ("ids", "TEXT")):
            if name not in columns:  # a log written before delayed labels
                db.execute(f"ALTER TABLE batches ADD COLUMN {name} {decl}")
        db.execute("CREATE TABLE IF NOT EXISTS keys (key TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
                   "n INTEGER NOT NULL, digest TEXT NOT NULL, at REAL NOT NULL)")
        row = db.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
        if row is None:
            db.execute("INSERT INTO meta VALUES ('fingerprint', ?)", (fingerprint,))
        elif row[0] != fingerprint:
            db.close()
            raise StateMismatch(
                f"{self.path} was written by a service with another monitor configuration "
                f"(fingerprint {row[0][:12]}, now {fingerprint[:12]}); "
                "use another --state-dir or remove this one"
            )

    def append(self, seq: int, batch: Batch, key: str | None = None, digest: str = "",
               at: float = 0.0) -> None:
        """Add ``batch`` under ``seq`` to the open transaction (durable after :meth:`commit`),
        with its idempotency ``key`` (``digest``: :func:`digest`, ``at``: wall-clock time)."""
        db = self._db
        if not db.in_transaction:
            db.execute("BEGIN")
        db.execute("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (seq, *_encode(batch)))
        if key is not None:
            db.execute("INSERT OR REPLACE INTO keys VALUES (?, ?, ?, ?, ?)",
                       (key, seq, len(batch), digest, at))

    def keys(self) -> list:
        """The stored idempotency keys, oldest first: ``(key, seq, n, digest, at)``."""
        return self._db.execute("SELECT key, seq, n, digest, at FROM keys ORDER BY at, seq").fetchall()

    def forget_keys(self, before: float, keep: int) -> None:
        """Delete the keys stored before ``before`` and all but the newest ``keep``; commits."""
        db = self._db
        if not db.in_transaction:
            db.execute("BEGIN")
        db.execute("DELETE FROM keys WHERE at < ?", (before,))
        db.execute("DELETE FROM keys WHERE rowid NOT IN "
                   "(SELECT rowid FROM keys ORDER BY at DESC, seq DESC LIMIT ?)", (keep,))
        db.execute("COMMIT")

    def commit(self) -> None:
        """Make every appended row durable (one fsync with ``synchronous=FULL``)."""
        if self._db.in_transaction:
            self._db.execute("COMMIT")

    def truncate_through(self, seq: int) -> None:
        """Delete every batch up to and including ``seq`` (covered by a checkpoint); commits."""
        db = self._db
        if not db.in_transaction:
            db.execute("BEGIN")
        db.execute("DELETE FROM batches WHERE seq <= ?", (seq,))
        db.execute("COMMIT")

    def after(self, seq: int) -> Iterator[tuple[int, Batch]]:
        """The stored batches after ``seq``, in order, as ``(seq, Batch)``."""
        cur = self._db.execute(
            "SELECT seq, n, label, score, weight, ts, segment, kind, ids FROM batches "
            "WHERE seq > ? ORDER BY seq",
            (seq,),
        )
        for row in cur.fetchall():
            yield row[0], _decode(*row[1:])

    def close(self) -> None:
        """Close the database (rows not committed are dropped)."""
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
        self._db.close()
