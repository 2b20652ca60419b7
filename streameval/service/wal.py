"""The service's write-ahead log: acknowledged batches since the older kept checkpoint.

Each applied batch is stored as one row of an SQLite table; the service acknowledges
it only after a :meth:`WriteAheadLog.commit` that covers it has returned (with
``synchronous=FULL``, after SQLite's fsync). Commits are shared: rows appended by
several requests while one commit runs are made durable together by the next one
(*group commit*), so concurrent clients do not pay one fsync each. The service keeps
two checkpoint generations; rows up to the older one's sequence number are deleted
(:meth:`WriteAheadLog.truncate_through`), so a damaged newest checkpoint can fall back
to the older one plus the log. On start the service loads a checkpoint and replays the
rows after it, so a ``kill -9`` loses no acknowledged event.

**Damage is never silent.** As in PostgreSQL's WAL, every record carries its own
checksum: a CRC-32 (:func:`zlib.crc32`, the IEEE polynomial) over its sequence number
and its encoded columns, stored beside the row; idempotency keys carry one too, and the
stored SHA-256 digest of a keyed batch is compared with its batch. :meth:`recover`
checks, at start: SQLite's ``PRAGMA quick_check``; every record's checksum and
decoding; that sequence numbers run without a gap from the checkpoint's up (a gap
below the last deletion means a checkpoint is missing); and the keys. Before SQLite
opens the file, :func:`inspect_files` checks what SQLite itself would silently skip:
a main file that is not a whole number of pages, and, in its ``-wal`` file, committed
frames after one whose checksum fails (SQLite stops at the first bad frame and drops
every later commit) or a commit frame cut short. A frame cut short or left without its
commit frame by a ``kill -9`` during a write was never acknowledged, and is not damage.
What is found is returned as :class:`Damage` (the reason, the sequence numbers at
risk, what is known lost); the service refuses to start on it unless told to accept
the loss.

The log gives its disk space back: rows a checkpoint covers are deleted without
overwriting them (``secure_delete=FAST``), and once free pages are over half of the
file a few are returned to the file system at each checkpoint
(:meth:`WriteAheadLog.reclaim`, SQLite's incremental vacuum), so a burst of events does
not keep its disk space for ever.

Rows hold the validated columns of a :class:`streameval.events.Batch` (the one batch type
from a source to the Monitor), never code: labels as bytes, scores, weights and event
times as little-endian float64 bytes, segments and ids as JSON lists, and the batch's
kind (events, predictions waiting for their label, or labels). Nothing read back is
evaluated or unpickled.

A batch sent with an idempotency key is stored with its key in the ``keys`` table, in
the same transaction: a retried key is recognised after a ``kill -9`` exactly when its
batch is durable. The table is where the service looks keys up (:meth:`find_key`, by
its primary key), so that the service's memory holds only the sequence numbers and
times of the keys it remembers; the keys it has forgotten (past its window or its cap)
are deleted at checkpoints, by sequence number (:meth:`forget_keys`, an index range).

Logs written before checksums (no ``crc`` columns, ``user_version`` 0) open as they
are: their columns are added (``ALTER TABLE``), their old rows are read without a
check, new rows carry one.

Imports: numpy, the standard library (sqlite3, array, json, zlib, struct) and
:mod:`streameval.events` (the batch type) only; the engine
(:mod:`streameval.service.engine`) uses it.

>>> import tempfile, numpy as np
>>> d = tempfile.mkdtemp()
>>> wal = WriteAheadLog(d + "/wal.sqlite3", fingerprint="demo")
>>> wal.append(1, Batch(np.array([True, False]), np.array([0.9, 0.2]), np.array([5.0, 6.0]), None,
...                     np.array([1, 2])))
>>> wal.commit()
>>> [(seq, b.label.tolist(), b.score.tolist()) for seq, b in wal.after(0)]
[(1, [True, False], [0.9, 0.2])]
>>> wal.recover(0).damage
[]
>>> wal.truncate_through(1); list(wal.after(0)), wal.truncated_through
([], 1)
>>> wal.close()
"""

from __future__ import annotations

import array
import hashlib
import json
import os
import shutil
import sqlite3
import struct
import tempfile
import uuid
import zlib
from typing import Iterator, NamedTuple

import numpy as np

from streameval.events import Batch

__all__ = ["Batch", "WriteAheadLog", "KeyDamaged", "StateMismatch", "EVENTS", "PREDICTIONS", "LABELS",
           "digest", "Damage", "Recovered", "inspect_files", "SCHEMA_VERSION"]

#: Free pages given back to the file system per checkpoint, at most (``PRAGMA
#: incremental_vacuum``), once they are over half of the file and over
#: ``RECLAIM_MIN_PAGES``: a burst the checkpoints have covered does not keep its disk
#: space for ever, and a steady log (its free pages reused by new rows) never pays for it.
RECLAIM_PAGES = 2048
RECLAIM_MIN_PAGES = 4096
#: The ``-wal`` file is cut back to this size after SQLite's own checkpoints.
JOURNAL_SIZE_LIMIT = 64 << 20

#: ``PRAGMA user_version`` of a log whose records carry checksums.
SCHEMA_VERSION = 2

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


class Damage(NamedTuple):
    """Damage found in the log at start: ``reason`` (one sentence), the sequence
    numbers at risk (``first`` to ``last``; ``last`` None: every batch after
    ``first - 1`` that may have been acknowledged), and what is known lost for certain
    (``batches`` and ``events``; 0 where the damage hides how many)."""

    reason: str
    first: int
    last: int | None
    batches: int = 0
    events: int = 0

    def span(self) -> str:
        """The sequence numbers at risk, in words."""
        if self.last is None:
            return f"batches from seq {self.first} on"
        return (f"batch seq {self.first}" if self.first == self.last
                else f"batches seq {self.first}-{self.last}")


class KeyDamaged(sqlite3.DatabaseError):
    """A stored idempotency key's record fails its CRC."""


class Recovered(NamedTuple):
    """What :meth:`WriteAheadLog.recover` read: the good ``batches`` after the
    checkpoint, as ``(seq, Batch)`` in order; the ``damage`` found; the highest
    sequence number the log holds (``last_seq``, damaged records included); the
    idempotency keys that may be trusted, as their batches' sequence numbers
    (``key_seqs``, ascending) and the times they were stored (``key_times``), two
    arrays of 16 bytes a key together (the keys themselves stay in the log); the keys
    left out (``refused_keys``: their record is damaged or their batch lost; None: all
    of them, the table could not be read to its end); and the
    ``lost`` sequence numbers (damaged or missing records after the checkpoint)."""

    batches: list
    damage: list
    last_seq: int
    key_seqs: np.ndarray
    key_times: np.ndarray
    refused_keys: list
    lost: set


def _crc(seq: int, parts) -> int:
    """CRC-32 of a record: its sequence number and its columns, each tagged and
    length-prefixed (so that moving bytes between columns changes it)."""
    c = zlib.crc32(struct.pack("<q", seq))
    for part in parts:
        if part is None:
            c = zlib.crc32(b"N", c)
        elif isinstance(part, (bytes, str)):
            b = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
            c = zlib.crc32(b"B" + struct.pack("<q", len(b)), c)
            c = zlib.crc32(b, c)
        elif isinstance(part, float):
            c = zlib.crc32(b"F" + struct.pack("<d", part), c)
        else:
            c = zlib.crc32(b"I" + struct.pack("<q", int(part)), c)
    return c


def _key_crc(key: str, seq: int, n: int, dig: str, at) -> int:
    """CRC-32 of an idempotency key's record (what :meth:`WriteAheadLog.append` stores
    beside it and every reader checks)."""
    return _crc(seq, (key, n, dig, float(at)))


#: How a key's record is written (:func:`_key_row`'s values), by append and adopt alike
_PUT_KEY = "INSERT OR REPLACE INTO keys VALUES (?, ?, ?, ?, ?, ?)"


def _key_row(key: str, seq: int, n: int, dig: str, at) -> tuple:
    """The values of :data:`_PUT_KEY` for an idempotency key's record, its CRC last."""
    at = float(at)
    return key, seq, n, dig, at, _key_crc(key, seq, n, dig, at)


class WriteAheadLog:
    """An SQLite table of acknowledged batches, keyed by sequence number, each with a
    CRC-32.

    Runtime complexity: `append` is `O(n)` in the batch size (one CRC pass over the
    encoded columns); `commit` one fsync, shared by every row appended since the last
    one; `recover` `O(size of the log)`.

    Not thread-safe by itself: the service calls it under a lock.

    Parameters: ``path`` of the database file; ``fingerprint`` identifies the monitor
    configuration; opening a log written with another fingerprint raises
    :class:`StateMismatch` (a state directory belongs to one configuration).
    ``synchronous`` is SQLite's setting: ``"FULL"`` (default) survives power loss,
    ``"NORMAL"`` survives a process crash only.

    ``log_id`` is a random identifier made when the log is created: checkpoints record
    it, so that a log replaced by another (deleted, restored from elsewhere) is not
    taken for the one whose records they rely on.
    """

    def __init__(self, path, fingerprint: str, synchronous: str = "FULL"):
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous = {synchronous!r}: must be 'FULL' or 'NORMAL'")
        self.path = str(path)
        self._unsaved = False  # rows appended and not yet committed
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            self._setup(fingerprint, synchronous)
        except BaseException:
            self._db.close()
            raise

    def _setup(self, fingerprint: str, synchronous: str) -> None:
        db = self._db
        if db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is None:
            # (only a file without tables can take it without a VACUUM)
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={synchronous}")
        # deleted rows are covered by a checkpoint: SQLite's default here (overwriting
        # them with zeros) writes every freed page to the -wal file once more
        db.execute("PRAGMA secure_delete=FAST")
        db.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute(
            "CREATE TABLE IF NOT EXISTS batches (seq INTEGER PRIMARY KEY, n INTEGER NOT NULL, "
            "label BLOB NOT NULL, score BLOB NOT NULL, weight BLOB, ts BLOB NOT NULL, segment TEXT, "
            "kind INTEGER NOT NULL DEFAULT 0, ids TEXT, crc INTEGER)"
        )
        db.execute("CREATE TABLE IF NOT EXISTS keys (key TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
                   "n INTEGER NOT NULL, digest TEXT NOT NULL, at REAL NOT NULL, crc INTEGER)")
        # keys are forgotten oldest first, by sequence number (an index range, not a scan)
        db.execute("CREATE INDEX IF NOT EXISTS keys_by_seq ON keys (seq)")
        # logs of earlier versions: add the columns they lack (old rows keep NULL there)
        for table, wanted in (("batches", (("kind", "INTEGER NOT NULL DEFAULT 0"),
                                           ("ids", "TEXT"), ("crc", "INTEGER"))),
                              ("keys", (("crc", "INTEGER"),))):
            columns = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
            for name, decl in wanted:
                if name not in columns:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
        if db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if "fingerprint" not in meta:
            db.execute("INSERT INTO meta VALUES ('fingerprint', ?)", (fingerprint,))
        elif meta["fingerprint"] != fingerprint:
            raise StateMismatch(
                f"{self.path} was written by a service with another monitor configuration "
                f"(fingerprint {meta['fingerprint'][:12]}, now {fingerprint[:12]}); "
                "use another --state-dir or remove this one"
            )
        self.log_id = meta.get("log_id") or uuid.uuid4().hex
        self.reclaimed_pages = 0
        # a write at every open: a log that cannot be written is refused now, not at the
        # first batch (and the meta row says which process opened it last)
        db.execute("INSERT OR REPLACE INTO meta VALUES ('log_id', ?)", (self.log_id,))
        db.execute("INSERT OR REPLACE INTO meta VALUES ('opened_by', ?)", (str(os.getpid()),))
        try:
            self.truncated_through = int(meta.get("truncated_through", 0))
        except ValueError:
            self.truncated_through = 0  # reported by recover() (a damaged meta row)
        self._meta_damage = None if str(self.truncated_through) == meta.get(
            "truncated_through", "0") else meta.get("truncated_through")

    def append(self, seq: int, batch: Batch, key: str | None = None, digest: str = "",
               at: float = 0.0) -> None:
        """Add ``batch`` under ``seq`` to the open transaction (durable after :meth:`commit`),
        with its checksum and its idempotency ``key`` (``digest``: :func:`digest`, ``at``:
        wall-clock time)."""
        db = self._db
        self._begin()
        self._unsaved = True
        cols = _encode(batch)
        db.execute("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (seq, *cols, _crc(seq, cols)))
        if key is not None:
            db.execute(_PUT_KEY, _key_row(key, seq, len(batch), digest, at))

    def keys(self) -> list:
        """The stored idempotency keys, oldest first: ``(key, seq, n, digest, at)``
        (unchecked; :meth:`recover` returns the checked ones). Read from the table
        itself, not through the ``seq`` index, so that a damaged index alone does not
        keep a damaged log's keys from being carried over (:meth:`adopt`)."""
        return self._db.execute(
            "SELECT key, seq, n, digest, at FROM keys NOT INDEXED ORDER BY seq").fetchall()

    def find_key(self, key: str):
        """``(seq, n, digest, at)`` stored with the idempotency ``key``, or None.

        Raises :class:`KeyDamaged` when the stored record fails its CRC. Runtime
        complexity: `O(log keys)` (the table's primary key)."""
        row = self._db.execute("SELECT seq, n, digest, at, crc FROM keys WHERE key = ?",
                               (key,)).fetchone()
        if row is None:
            return None
        seq, n, dig, at, crc = row
        if crc is not None and _key_crc(key, seq, n, dig, at) != crc:
            raise KeyDamaged(f"{os.path.basename(self.path)}: the idempotency key of batch "
                             f"seq {seq} fails its checksum")
        return seq, n, dig, at

    def forget_keys(self, before_seq: int) -> None:
        """Delete the keys of the batches numbered below ``before_seq``; commits.
        Runtime complexity: `O(log keys + deleted)` (the ``seq`` index)."""
        db = self._db
        self._begin()
        db.execute("DELETE FROM keys WHERE seq < ?", (before_seq,))
        self._commit_open()

    def drop_keys(self, keys) -> None:
        """Delete the given idempotency keys (their batches were lost); commits."""
        db = self._db
        self._begin()
        db.executemany("DELETE FROM keys WHERE key = ?", [(k,) for k in keys])
        self._commit_open()

    def quick_check(self) -> list:
        """SQLite's ``PRAGMA quick_check``: ``["ok"]``, or the problems found."""
        try:
            return [r[0] for r in self._db.execute("PRAGMA quick_check(5)").fetchall()]
        except sqlite3.DatabaseError as e:
            return [str(e)]

    def adopt(self, log_id: str, keys) -> None:
        """Take over ``log_id`` and the idempotency ``keys`` (``(key, seq, n, digest,
        at)``) of a log this new one replaces (its damaged file moved aside); commits."""
        db = self._db
        self._begin()
        db.execute("UPDATE meta SET value = ? WHERE key = 'log_id'", (log_id,))
        db.executemany(_PUT_KEY, (_key_row(*k) for k in keys))
        self._commit_open()
        self.log_id = log_id

    def commit(self) -> None:
        """Make every appended row durable (one fsync with ``synchronous=FULL``).

        Raises ``sqlite3.OperationalError`` when rows were appended but their
        transaction is gone (SQLite rolls a whole transaction back on some errors, a
        full disk among them): they are not in the log, and must not be acknowledged."""
        self._commit_open()

    def _begin(self) -> None:
        """Open a transaction unless one is open; refused (see :meth:`commit`) when
        appended rows were rolled back with theirs: a new one must not hide that."""
        if not self._db.in_transaction:
            self._refuse_rolled_back()
            self._db.execute("BEGIN")

    def _commit_open(self) -> None:
        """Commit the open transaction, if any; see :meth:`commit`."""
        if self._db.in_transaction:
            self._db.execute("COMMIT")
            self._unsaved = False
        else:
            self._refuse_rolled_back()

    def _refuse_rolled_back(self) -> None:
        """No transaction is open: raise if rows were appended since the last commit
        (SQLite rolled them back with their transaction)."""
        if self._unsaved:
            raise sqlite3.OperationalError(
                "rows appended to the write-ahead log were rolled back with their "
                "transaction before they were committed")

    def truncate_through(self, seq: int) -> None:
        """Delete every batch up to and including ``seq`` (covered by the older kept
        checkpoint) and record that they were; commits."""
        db = self._db
        self._begin()
        db.execute("DELETE FROM batches WHERE seq <= ?", (seq,))
        high = max(self.truncated_through, int(seq))
        db.execute("INSERT OR REPLACE INTO meta VALUES ('truncated_through', ?)", (str(high),))
        self._commit_open()
        self.truncated_through = high
        self.reclaim()

    def reclaim(self, pages: int = RECLAIM_PAGES) -> int:
        """Give at most ``pages`` free pages back to the file system, when over half of
        the file and over :data:`RECLAIM_MIN_PAGES` pages are free (after a burst the
        checkpoints have since covered); returns the pages given back. A log file
        created without incremental vacuum is converted first (one ``VACUUM``, in time
        proportional to its live rows). Not inside an open transaction (returns 0)."""
        db = self._db
        if db.in_transaction:
            return 0
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        total = db.execute("PRAGMA page_count").fetchone()[0]
        if free < RECLAIM_MIN_PAGES or 2 * free < total:
            return 0
        if db.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            db.execute("VACUUM")
        else:
            db.executescript(f"PRAGMA incremental_vacuum({int(pages)})")  # (steps to the end)
        # the main file shrinks when the -wal file's pages are copied back into it
        db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        freed = total - db.execute("PRAGMA page_count").fetchone()[0]
        self.reclaimed_pages += freed
        return freed

    def after(self, seq: int) -> Iterator[tuple[int, Batch]]:
        """The stored batches after ``seq``, in order, as ``(seq, Batch)`` (unchecked;
        :meth:`recover` checks them)."""
        cur = self._db.execute(
            "SELECT seq, n, label, score, weight, ts, segment, kind, ids FROM batches "
            "WHERE seq > ? ORDER BY seq",
            (seq,),
        )
        for row in cur.fetchall():
            yield row[0], _decode(*row[1:])

    def recover(self, after: int) -> Recovered:
        """Read and check the log for a start from a checkpoint covering ``after``.

        Checks SQLite's ``quick_check``, each record's CRC and decoding, that the
        records run from ``after + 1`` without a gap (and that no record past ``after``
        was deleted), each key's CRC, and each keyed batch's digest. Never raises for
        damage: returns it. Runtime complexity: `O(size of the log)`.
        """
        db, name = self._db, os.path.basename(self.path)
        damage: list = []
        lost: set = set()
        good: list = []
        if self._meta_damage is not None:
            damage.append(Damage(f"{name}: its record of deleted batches is damaged "
                                 f"({self._meta_damage!r})", after + 1, None))
        problems = self.quick_check()
        if problems != ["ok"]:
            damage.append(Damage(f"{name} fails SQLite's integrity check "
                                 f"({'; '.join(map(str, problems))[:300]})", after + 1, None))
        if self.truncated_through > after:  # deleted as covered by a checkpoint we lack
            damage.append(Damage(
                f"{name}: batches up to seq {self.truncated_through} were deleted as covered "
                f"by a checkpoint, and the checkpoint loaded covers only up to seq {after}",
                after + 1, self.truncated_through, self.truncated_through - after))
            lost.update(range(after + 1, self.truncated_through + 1))
        expected = max(after, self.truncated_through) + 1
        last = after
        bad: list = []  # (seq, n) of damaged records
        try:
            cur = db.execute("SELECT seq, n, label, score, weight, ts, segment, kind, ids, crc "
                             "FROM batches WHERE seq > ? ORDER BY seq", (after,))
            for row in cur:
                seq, cols, crc = row[0], row[1:9], row[9]
                if not isinstance(seq, int):
                    continue
                if seq > expected:  # a gap: records between are missing
                    damage.append(Damage(f"{name}: records seq {expected}-{seq - 1} are "
                                         "missing", expected, seq - 1, seq - expected))
                    lost.update(range(expected, seq))
                last = max(last, seq)
                expected = max(expected, seq + 1)
                if crc is not None and _crc(seq, cols) != crc:
                    bad.append((seq, cols[0], "fails its checksum"))
                    continue
                try:
                    batch = _decode(*cols)
                except (ValueError, TypeError) as e:
                    bad.append((seq, cols[0], f"cannot be decoded ({e})"))
                    continue
                good.append((seq, batch))
        except sqlite3.DatabaseError as e:
            damage.append(Damage(f"{name}: the records after seq {last} cannot be read ({e})",
                                 last + 1, None))
        for seq, n, why in bad:
            damage.append(Damage(f"{name}: record seq {seq} {why}", seq, seq, 1,
                                 n if isinstance(n, int) and n >= 0 else 0))
            lost.add(seq)
        seqs, times, refused = self._checked_keys(name, after, dict(good), lost, damage)
        return Recovered(good, damage, last, seqs, times, refused, lost)

    def _checked_keys(self, name, after, batches, lost, damage) -> tuple:
        """The keys whose record passes its CRC and whose batch (when the log still
        holds it) matches its digest, as ``(seqs, times, refused)`` (see
        :class:`Recovered`); the others are reported and left out, as is a key whose
        batch comes after the checkpoint (``after``) and is not in the log. Read row by
        row: memory `O(keys)` at 16 bytes a key, besides the refused ones. When the
        table cannot be read to its end, no key is trusted (``refused`` is None: all
        of them)."""
        seqs = array.array("q")
        times = array.array("d")
        refused: list = []
        try:
            cur = self._db.execute("SELECT key, seq, n, digest, at, crc FROM keys ORDER BY seq")
            for key, seq, n, dig, at, crc in cur:
                if crc is not None and _key_crc(key, seq, n, dig, at) != crc:
                    damage.append(Damage(f"{name}: the idempotency key of batch seq {seq} "
                                         "fails its checksum", seq, seq))
                    refused.append(key)
                    continue
                if seq in lost:
                    refused.append(key)  # its batch is lost: it may come again under its key
                    continue
                b = batches.get(seq)
                if b is None and seq > after:  # its batch should be in the log
                    damage.append(Damage(f"{name}: batch seq {seq}, stored with its "
                                         "idempotency key, is not in the log", seq, seq))
                    refused.append(key)
                    continue
                if b is not None and dig and digest(b) != dig:
                    damage.append(Damage(f"{name}: batch seq {seq} does not match the "
                                         "digest stored with its idempotency key", seq, seq))
                    refused.append(key)
                    continue
                seqs.append(seq)
                times.append(float(at))
        except sqlite3.DatabaseError as e:
            damage.append(Damage(f"{name}: the idempotency keys cannot be read ({e})", 1, None))
            return np.zeros(0, np.int64), np.zeros(0, np.float64), None
        return (np.frombuffer(seqs, dtype=np.int64).copy(),
                np.frombuffer(times, dtype=np.float64).copy(), refused)

    def close(self) -> None:
        """Close the database (rows not committed are dropped)."""
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
        self._db.close()


# --------------------------------------------------------------------- the -wal file

_WAL_MAGIC = (0x377F0682, 0x377F0683)


def _checksum(data: bytes, big: bool, s0: int, s1: int) -> tuple[int, int]:
    """SQLite's WAL checksum (two 32-bit Fibonacci-weighted sums) of ``data``."""
    words = struct.unpack((">" if big else "<") + f"{len(data) // 4}I", data)
    m = 0xFFFFFFFF
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & m
        s1 = (s1 + words[i + 1] + s0) & m
    return s0, s1


_M32 = np.uint64(0xFFFFFFFF)


def _step_powers(n: int) -> np.ndarray:
    """``M^0 .. M^n`` (mod 2**64) of SQLite's checksum step ``M = [[1, 1], [1, 2]]``:
    one step over words ``(a, b)`` maps ``(s0, s1)`` to ``M (s0, s1) + (a, a + b)``."""
    m = np.array([[1, 1], [1, 2]], dtype=np.uint64)
    out = np.empty((n + 1, 2, 2), dtype=np.uint64)
    out[0] = np.eye(2, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            out[j + 1] = m @ out[j]
    return out


def _frame_checksums(data: bytes, big: bool, page: int, count: int, seeds) -> np.ndarray:
    """The checksums SQLite expects for ``count`` whole frames from byte 32 of ``data``,
    each seeded with ``seeds[i]`` (the stored checksum of the frame before): the same
    values as :func:`_checksum` of each frame's first 8 bytes and page, computed for all
    frames at once with numpy (the recurrence is linear: a sum of matrix powers times
    the words, mod 2**32). Runtime complexity: `O(bytes)` numpy, no Python loop over
    words."""
    size = 24 + page
    frames = np.frombuffer(data, dtype=np.uint8, count=count * size, offset=32)
    frames = frames.reshape(count, size)
    summed = np.concatenate((frames[:, :8], frames[:, 24:]), axis=1)
    words = summed.view(">u4" if big else "<u4").astype(np.uint64)
    n = words.shape[1] // 2
    a, b = words[:, 0::2], words[:, 1::2]
    powers = _step_powers(n)
    rev = powers[n - 1::-1] if n else powers[:0]  # M^(n-1-k) for step k
    seeds = np.asarray(seeds, dtype=np.uint64).reshape(count, 2)
    with np.errstate(over="ignore"):
        c1 = a + b
        s0 = (a * rev[:, 0, 0]).sum(axis=1) + (c1 * rev[:, 0, 1]).sum(axis=1)
        s1 = (a * rev[:, 1, 0]).sum(axis=1) + (c1 * rev[:, 1, 1]).sum(axis=1)
        mn = powers[n]
        s0 += mn[0, 0] * seeds[:, 0] + mn[0, 1] * seeds[:, 1]
        s1 += mn[1, 0] * seeds[:, 0] + mn[1, 1] * seeds[:, 1]
    return np.stack((s0 & _M32, s1 & _M32), axis=1)


def _wal_file_damage(wal_path: str) -> str | None:
    """What SQLite would silently drop from its ``-wal`` file, or None.

    SQLite replays the frames of its ``-wal`` file up to the first one whose checksum
    fails, and keeps only whole transactions (up to the last commit frame): that is
    right after a crash during a write, wrong when the bytes were damaged later. A
    ``kill -9`` stops the writes of a transaction between two ``write`` calls: what it
    leaves after the last commit is whole frames of the transaction (checksums right,
    no commit frame) and perhaps one frame without its page. So these are damage: a
    frame that is whole but fails its checksum, a commit frame after it, and a commit
    frame whose page is cut short. Frames of an older generation of the file (other
    salts) are left-overs SQLite ignores by design.
    """
    try:
        with open(wal_path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    if len(data) <= 32:
        return None  # empty, or a header being written: no frame was ever committed
    magic, _, page, _, salt1, salt2, c0, c1 = struct.unpack(">8I", data[:32])
    name = os.path.basename(wal_path)
    if magic not in _WAL_MAGIC:
        return f"{name}: its header is damaged (every commit in it is unreadable)"
    big = magic & 1 == 1
    page = 65536 if page == 1 else page
    if page < 512 or page > 65536 or page & (page - 1):
        return f"{name}: its header is damaged (page size {page})"
    if _checksum(data[:24], big, 0, 0) != (c0, c1):
        return f"{name}: its header fails its checksum (every commit in it is unreadable)"
    size = 24 + page
    s = (c0, c1)
    off, frame, broken = 32, 0, None
    # every whole frame's expected checksum at once, seeded with the stored checksum of
    # the frame before (what the loop below chains): numpy, not a loop over words
    whole = (len(data) - 32) // size
    expected = None
    if whole:
        heads = np.frombuffer(data, dtype=">u4", count=whole * size // 4, offset=32)
        heads = heads.reshape(whole, size // 4)
        seeds = np.empty((whole, 2), dtype=np.uint64)
        seeds[0] = (c0, c1)
        seeds[1:] = heads[:-1, 4:6]
        step = max(1, (8 << 20) // size)  # (about 8 MB of frames per numpy pass)
        view = memoryview(data)
        expected = np.concatenate([
            _frame_checksums(view[i * size:], big, page, min(step, whole - i),
                             seeds[i:i + step])
            for i in range(0, whole, step)])
    while off + 24 <= len(data):
        pgno, commit, fs1, fs2, k0, k1 = struct.unpack(">6I", data[off:off + 24])
        if (fs1, fs2) != (salt1, salt2):
            break  # a frame of an older generation of the file: SQLite's end of log
        frame += 1
        if off + size > len(data):  # the last frame, cut short
            if commit and len(data) > off + 24:
                return (f"{name}: its last commit (frame {frame}) is cut short "
                        f"({len(data) - off - 24} of {page} bytes of its page)")
            break
        if expected is not None and frame - 1 < len(expected):
            expect = (int(expected[frame - 1, 0]), int(expected[frame - 1, 1]))
        else:
            expect = _checksum(data[off:off + 8] + data[off + 24:off + size], big, *s)
        if expect != (k0, k1):
            if broken is None:
                broken = frame
            # the frames after are checked from this one's stored checksum
        elif broken is not None and commit:
            return (f"{name}: frame {broken} fails its checksum, and commit frames after "
                    f"it (frame {frame}) hold acknowledged batches SQLite would drop")
        s = (k0, k1)
        off += size
    if broken is not None:
        return f"{name}: frame {broken} is whole but fails its checksum"
    return None


def inspect_files(path) -> list:
    """Damage in an SQLite log's files that SQLite itself would skip without a word,
    checked before SQLite opens them: a main file that is not a whole number of pages,
    and a damaged ``-wal`` file (:func:`_wal_file_damage`). Returns reasons (strings);
    empty when the files are sound or absent. Runtime complexity: `O(size of the
    -wal file)`, a Python loop over its 32-bit words (its size is bounded by SQLite's
    automatic checkpoint, 1 000 pages by default).
    """
    path = str(path)
    out = []
    try:
        with open(path, "rb") as f:
            header = f.read(100)
        size = os.path.getsize(path)
    except FileNotFoundError:
        header, size = b"", 0
    if len(header) >= 18 and header.startswith(b"SQLite format 3\x00"):
        page = int.from_bytes(header[16:18], "big")
        page = 65536 if page == 1 else page
        if page and size % page:
            out.append(f"{os.path.basename(path)}: {size} bytes, not a whole number of "
                       f"{page}-byte pages (cut short or extended)")
    wal = _wal_file_damage(path + "-wal")
    if wal:
        out.append(wal)
    return out


def readable_through(path) -> int:
    """The highest sequence number SQLite can read from the log at ``path``, read
    from a copy (SQLite rewrites the files it opens; these stay as they are for the
    operator). 0 when none can be read."""
    with tempfile.TemporaryDirectory(prefix="streameval-log-") as d:
        copy = os.path.join(d, "wal.sqlite3")
        for suffix in ("", "-wal"):
            if os.path.exists(path + suffix):
                shutil.copyfile(path + suffix, copy + suffix)
        try:
            db = sqlite3.connect(copy)
            try:
                row = db.execute("SELECT MAX(seq) FROM batches").fetchone()
            finally:
                db.close()
        except sqlite3.Error:
            return 0
        return int(row[0] or 0)
