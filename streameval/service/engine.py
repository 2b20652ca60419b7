"""The service's core: one Monitor behind one lock, a write-ahead log, checkpoints.

No web framework here: :class:`Engine` takes decoded request bodies and returns plain
dicts, so that its durability and atomicity can be read (and tested) on their own.

Ingestion of a batch, in order:

1. validate every event into one :class:`streameval.events.Batch`
   (:func:`streameval.events.events_to_batch`), then let the Monitor admit it
   (:meth:`Monitor.admit <streameval.monitor.Monitor.admit>`: its own checks, once),
   outside the lock; a bad event refuses the whole batch, naming its index;
2. under the lock: give it the next sequence number, append it to the write-ahead log
   (with its idempotency key, if any) and queue it;
3. outside the lock: wait for a log commit (fsync) covering it. One commit serves every
   batch appended meanwhile (*group commit*; the caller that commits first waits up to
   :data:`COMMIT_DELAY` for the requests still being validated): it then applies all
   the batches made durable, in sequence order, to the Monitor
   (:meth:`Monitor.apply <streameval.monitor.Monitor.apply>` of the admitted batch;
   consecutive unweighted event batches as one);
4. acknowledge (the HTTP 200) only once the batch is durable and applied.

:meth:`Engine.ingest` does all four on its caller's thread, blocking it in step 3. The
HTTP service splits them instead: :meth:`Engine.begin_body` (steps 1-2, on the event
loop's thread for small bodies), :meth:`Engine.when_applied` (step 3 by the engine's
committer thread, which commits and applies for every waiting batch and calls back),
:meth:`Engine.finish` (the answer). No thread waits per request: with the GIL, each
thread hop and wake-up costs CPU that group commit alone does not save (``benchmarks/bench_service.py`` measures the
server's CPU per request).

So the Monitor (and everything read from it: ``/metrics``, ``/snapshot``, alerts)
never holds a batch that is not durable: a log that cannot be written or synced leaves
the batches it did not cover unapplied, and the engine stops accepting events (503).
A restart recovers exactly the acknowledged batches.

**Delayed labels.** With ``label_ttl``, ``POST /predictions`` batches (``id``, ``ts``,
``score``, weight and segment) wait in a :class:`~streameval.io.LabelJoiner` until
``POST /labels`` brings their label (``id``, ``ts``, ``label``); the joined event
counts then, at the label's time, as in ``streameval replay``. Predictions and labels
are logged like events and the joiner's state is in the checkpoint, so the join state
after a ``kill -9`` is exactly the acknowledged one. Expired predictions, orphan
labels and duplicate prediction ids are counted (``on_duplicate``: ``keep_first``
by default, or ``keep_last``; a batch already durable cannot be refused for it).
At most ``max_pending`` predictions wait: a batch that would pass it gets 429.

**Idempotency.** A batch may carry a key (the ``Idempotency-Key`` header or
``?batch_id=``). The key is stored with the batch, in the same log transaction, and
kept ``idempotency_window`` seconds (at most ``max_idempotency_keys`` keys, the oldest
dropped first): a batch retried with its key, even after a ``kill -9``, is answered
with its original ``seq`` and not counted again; the same key with another batch is a
422. With a state directory the keys stay in the log, where they are looked up, and
memory holds only the order they were remembered in (:class:`LoggedKeys`,
:data:`LOGGED_KEY_BYTES` per key); without one they are held in memory, compactly
(:class:`IdempotencyKeys`: 128-bit digests of the key and of its batch,
:data:`KEY_BYTES` per key at most).

The Monitor, its alert sinks and its checkpoint file are a
:class:`streameval.pipeline.Pipeline` without a source: batches are given to
:meth:`Pipeline.feed`, checkpoints written with :meth:`Pipeline.save`, and the start
resumes with :meth:`Pipeline.resume`.

This module may import :mod:`streameval.pipeline`, :mod:`streameval.events`,
:mod:`streameval.monitor` (its public ``Admitted`` batch), :mod:`streameval.io`,
:mod:`streameval.validation` (parameter checks) and the service's own modules (``body``,
``wal``).

A state directory that cannot be used at start (not creatable, not writable, its log
not an SQLite database, another service holding it) raises :class:`StateDirError`, one
line naming the directory and the reason. A checkpoint that fails later (disk full, a
file in the way) is counted (``stats["checkpoint_errors"]``), its reason kept in
:meth:`Engine.health` until one succeeds, and retried; the log keeps every acknowledged
batch meanwhile.

**Checkpoints.** A checkpoint (every ``checkpoint_every`` events or
``checkpoint_seconds`` seconds, on ``POST /checkpoint`` and at shutdown) writes the
Monitor's and the joiner's state with the sequence number of the last batch they hold
and a generation number, in the binary incremental format of
:mod:`streameval.io.statefile`: under the ingestion lock the state tree is taken in
`O(objects)` (arrays that never change, a score order's levels and a window's batches,
as read-only views; the few that change in place copied), then the checkpoint thread
writes, outside the lock, the arrays no earlier checkpoint wrote, and renames the
manifest in. No process is forked: the writer is a thread of the server, so it holds
nothing a restart needs once the server is gone and cannot outlive it. It renames a
manifest in only if its generation and sequence number are above those of the
checkpoint installed (an older checkpoint never replaces a newer one). The process
holds an exclusive ``flock`` on ``lock`` in the state directory for its whole life, so
two services never share one; temporary files and packs a killed server left are
removed at the next start.

Two generations are kept, ``checkpoint.json`` and ``checkpoint.prev.json``
(:func:`streameval.io.checkpoint.previous_path`), and the log keeps its rows since the
older one: a damaged or deleted newest checkpoint falls back to the previous one plus
the log, without loss (``recovered_from`` in :meth:`Engine.health`).

**Damage is never silent.** At start the log is checked
(:meth:`~streameval.service.wal.WriteAheadLog.recover`,
:func:`~streameval.service.wal.inspect_files`): record checksums, keyed batches'
digests, a gap in sequence numbers, SQLite's integrity, commits SQLite would drop
from its ``-wal`` file, a log that is not the one the checkpoint relies on. On damage
the engine refuses to start (:class:`DataLoss`: the file, the sequence numbers at risk
and the next step), leaving the damaged files as they are, unless ``accept_loss`` is set: it then starts
from what can be read, counts what was lost (``lost_batches``, ``lost_events`` in
:meth:`Engine.health` and the Prometheus counters), forgets the lost batches'
idempotency keys (so that clients can send them again), writes a checkpoint, and
drops the damaged records.

For tests of that claim, the environment variable ``STREAMEVAL_CRASH_AFTER_COMMIT=K``
makes the process exit at once (``os._exit(137)``, as a ``kill -9``) right after its
K-th log commit, before any acknowledgement: a fault between the fsync and the response.

>>> import tempfile
>>> from streameval.monitor import Monitor
>>> d = tempfile.mkdtemp()
>>> eng = Engine.open(Monitor.default(), state_dir=d, checkpoint_seconds=None)
>>> eng.ingest([{"label": 1, "score": 0.9, "ts": 1}, {"label": 0, "score": 0.4, "ts": 2}])["accepted"]
2
>>> eng.close()                     # final checkpoint
>>> eng = Engine.open(Monitor.default(), state_dir=d, checkpoint_seconds=None)
>>> eng.monitor.n, eng.ingest([{"label": 0, "score": 0.1, "ts": 3}])["n"]
(2, 3)
>>> eng.close()
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import queue
import sqlite3
import struct
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np

from streameval.events import (
    DEFAULT_MAX_FUTURE,
    KIND_LABEL,
    KIND_PREDICTION,
    Batch,
    EventError,
    FieldMap,
    events_to_batch,
)
from streameval.io.checkpoint import (
    CheckpointError,
    fingerprint,
    previous_path,
    read_checkpoint,
)
from streameval.io.statefile import StateWriter, pack_dir, referenced_packs, remove_unreferenced
from streameval.io.delayed import LabelJoiner
from streameval.monitor import Admitted
from streameval.pipeline import Pipeline, as_writer
from streameval.service.body import BadRequest, decode_events
from streameval.service.wal import (
    EVENTS,
    LABELS,
    PREDICTIONS,
    StateMismatch,
    WriteAheadLog,
    digest,
    inspect_files,
    readable_through,
)
from streameval.service.wal import Damage as _Damage
from streameval.validation import Integer, Real, check_param

__all__ = ["Engine", "Unavailable", "StateMismatch", "StateDirError", "DataLoss",
           "CHECKPOINT_FILE", "PREVIOUS_CHECKPOINT_FILE", "LOCK_FILE", "WAL_FILE", "DEFAULT_MAX_PENDING", "DEFAULT_IDEMPOTENCY_WINDOW",
           "DEFAULT_MAX_IDEMPOTENCY_KEYS", "PENDING_BYTES", "KEY_BYTES", "LOGGED_KEY_BYTES",
           "REJECT_REASONS", "IdempotencyKeys", "LoggedKeys"]

#: File names inside the state directory.
CHECKPOINT_FILE = "checkpoint.json"
#: The previous checkpoint generation (the log keeps its rows since this one).
PREVIOUS_CHECKPOINT_FILE = os.path.basename(previous_path(CHECKPOINT_FILE))
WAL_FILE = "wal.sqlite3"
#: Held with an exclusive ``flock`` while a service uses the directory (holds its pid).
LOCK_FILE = "lock"
#: ``kind`` of the service's checkpoints (:func:`streameval.io.save_checkpoint`).
CHECKPOINT_KIND = "service"
#: Predictions waiting for their label, at most (``max_pending``): at most
#: :data:`PENDING_BYTES` each, so 1 000 000 take at most 0.4 GB.
DEFAULT_MAX_PENDING = 1_000_000
#: Memory per waiting prediction, a bound: 334 bytes measured (tracemalloc, a 12-character
#: string id, no segment; tests/test_service_delayed.py): the id, the joiner's dict
#: entry and tuple, its heap entry and floats. A segment value adds its own size.
PENDING_BYTES = 400
#: Seconds an idempotency key is remembered (a day, as Stripe's), and at most how many.
DEFAULT_IDEMPOTENCY_WINDOW = 86_400
#: Seconds the committing caller waits for the batches still being validated, so that
#: they share its commit and its Monitor update (PostgreSQL's ``commit_delay``).
COMMIT_DELAY = 0.005
#: why an ingestion request was refused (the ``reason`` label of
#: ``streameval_rejected_requests_total``): a body or event that failed validation, an
#: Idempotency-Key reused for another batch (422), a body over ``max_body`` (413), a
#: body not received within ``body_timeout`` (408)
REJECT_REASONS = ("invalid", "idempotency_conflict", "too_large", "timeout")
DEFAULT_MAX_IDEMPOTENCY_KEYS = 1_000_000
#: Memory per remembered idempotency key, a bound: 172 to 183 bytes measured (tracemalloc,
#: :class:`IdempotencyKeys` of 100 000 and 1 000 000 keys, ``benchmarks/bench_idempotency.py``):
#: a 16-byte digest of the key, a 40-byte record, their dict entry and a reference in
#: the queue of the oldest; whatever the key's length. So 1 000 000 keys (the default
#: cap) take at most 0.2 GB. This is an engine without a state directory; with one, the
#: keys stay in its log and memory holds :data:`LOGGED_KEY_BYTES` per key.
KEY_BYTES = 200
#: Memory per remembered idempotency key of an engine with a state directory
#: (:class:`LoggedKeys`: its batch's sequence number and time), besides a chunk of
#: 4 096 keys' slack.
LOGGED_KEY_BYTES = 16

_log = logging.getLogger("streameval.service")


class Unavailable(RuntimeError):
    """The service cannot accept events now (closed, or its log cannot be written)."""


class StateDirError(OSError):
    """The state directory cannot be used (one line: the directory and the reason)."""


class DataLoss(StateDirError):
    """The state directory is damaged: acknowledged batches may be lost. One line: the
    file, the sequence numbers at risk, and the next step (a backup, or
    ``accept_loss``). The damaged files and records are left as they are."""


class IdempotencyKeys:
    """The idempotency keys an engine remembers, oldest first, in compact memory.

    Each key is held as the 16-byte BLAKE2b digest of its UTF-8 text, mapped to a
    40-byte record: the sequence number and event count of its batch, the time it was
    remembered and the first 16 bytes of the batch's SHA-256
    (:func:`streameval.service.wal.digest`). :meth:`remember` adds a key and then drops
    the oldest while there are more than ``cap`` or the oldest was remembered more than
    ``window`` seconds before the new one; :meth:`put` adds one without dropping any;
    :meth:`find` looks one up. (It holds the keys of an engine without a state
    directory, which starts with none.)
    A key put again keeps its place in the order, its record replaced (as a dict's).

    Two distinct keys share a digest with probability at most ``k**2 / 2**129`` among
    ``k`` keys (below ``2**-89`` for 1 000 000): such a key would be answered as a
    retry of the other's batch if the batches' truncated digests agree too (a further
    ``2**-128``), as a conflict (422) otherwise. A key retried with another batch is
    taken for the same batch with probability ``2**-128``.

    Runtime complexity: :meth:`find` and :meth:`put` `O(1)`, :meth:`remember`
    `O(1)` amortised (each key is dropped once). Memory: :data:`KEY_BYTES` per key at
    most.
    """

    __slots__ = ("window", "cap", "_records", "_by_age")

    _RECORD = struct.Struct("<qqd16s")  # seq, n, at, the batch digest's first 16 bytes

    def __init__(self, window: float, cap: int):
        self.window = window
        self.cap = cap
        self._records: dict = {}  # key digest -> record
        self._by_age: deque = deque()  # key digests, oldest first

    def __len__(self) -> int:
        return len(self._records)

    @staticmethod
    def _key(key: str) -> bytes:
        return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    @staticmethod
    def _short(batch_digest: str) -> bytes:
        """The first 16 bytes of a SHA-256 hex digest (anything else, which no
        streameval writes, is hashed whole)."""
        try:
            return bytes.fromhex(batch_digest[:32])
        except ValueError:
            return hashlib.blake2b(batch_digest.encode("utf-8", "surrogatepass"),
                                   digest_size=16).digest()

    def find(self, key: str, batch_digest: str):
        """``(seq, n, same)`` of a remembered ``key`` (``same``: its batch had the SHA-256
        hex digest ``batch_digest``), or None."""
        record = self._records.get(self._key(key))
        if record is None:
            return None
        seq, n, _, short = self._RECORD.unpack(record)
        return seq, n, short == self._short(batch_digest)

    def put(self, key: str, seq: int, n: int, batch_digest: str, at: float) -> None:
        """Remember ``key`` for batch ``seq`` of ``n`` events with SHA-256 hex digest
        ``batch_digest``, at time ``at``; nothing is dropped."""
        k = self._key(key)
        if k not in self._records:
            self._by_age.append(k)
        self._records[k] = self._RECORD.pack(seq, n, at, self._short(batch_digest))

    def remember(self, key: str, seq: int, n: int, batch_digest: str, at: float) -> None:
        """:meth:`put`, then drop the oldest keys past the cap or the window."""
        self.put(key, seq, n, batch_digest, at)
        horizon = at - self.window
        records, order = self._records, self._by_age
        while order:
            oldest = order[0]
            if len(records) > self.cap or self._at(records[oldest]) < horizon:
                order.popleft()
                del records[oldest]
            else:
                break

    def _at(self, record: bytes) -> float:
        return self._RECORD.unpack_from(record)[2]


class _KeyAges:
    """The sequence numbers and times of remembered keys, oldest first: a queue of
    numpy chunks, 16 bytes a key (and one chunk's slack)."""

    __slots__ = ("_chunks", "_head", "_tail", "_n")

    CHUNK = 4096
    _DTYPE = np.dtype([("seq", "<i8"), ("at", "<f8")])

    def __init__(self, seqs=None, times=None):
        self._chunks: deque = deque()
        self._head = 0  # the oldest's index in the first chunk
        self._tail = self.CHUNK  # the next free index in the last chunk
        self._n = 0
        if seqs is not None and len(seqs):
            for lo in range(0, len(seqs), self.CHUNK):
                c = np.empty(self.CHUNK, self._DTYPE)
                part = slice(lo, lo + self.CHUNK)
                k = len(seqs[part])
                c["seq"][:k] = seqs[part]
                c["at"][:k] = times[part]
                self._chunks.append(c)
                self._tail = k
            self._n = len(seqs)

    def __len__(self) -> int:
        return self._n

    def append(self, seq: int, at: float) -> None:
        if self._tail == self.CHUNK:
            self._chunks.append(np.empty(self.CHUNK, self._DTYPE))
            self._tail = 0
        self._chunks[-1][self._tail] = (seq, at)
        self._tail += 1
        self._n += 1

    def oldest(self) -> tuple:
        """``(seq, at)`` of the oldest (the queue is not empty)."""
        seq, at = self._chunks[0][self._head].item()
        return seq, at

    def popleft(self) -> None:
        self._head += 1
        self._n -= 1
        if self._n == 0:
            self._chunks.clear()
            self._head, self._tail = 0, self.CHUNK
        elif self._head == self.CHUNK:
            self._chunks.popleft()
            self._head = 0


class LoggedKeys:
    """The idempotency keys of an engine with a write-ahead log: the keys stay in the
    log's ``keys`` table (written with their batch, in the same transaction), and memory
    holds only the order in which they were remembered, as the sequence numbers and
    times of their batches (16 bytes a key, :data:`LOGGED_KEY_BYTES`).

    The same answers as :class:`IdempotencyKeys`: :meth:`remember` adds the key of a
    batch just appended to the log and drops the oldest while there are more than
    ``cap`` or the oldest was remembered more than ``window`` seconds before the new
    one; :meth:`find` reads the key from the log (``lookup``: key -> ``(seq, n, digest,
    at)`` or None) and answers for it only while its batch's sequence number is still
    in the queue, so a key dropped from memory is forgotten at once, before the next
    checkpoint deletes its row (:meth:`expire` tells which rows may go). Each key is
    remembered once (a retried key is found, not remembered again), so the queue holds
    increasing sequence numbers and its oldest tells the remembered from the forgotten.

    Runtime complexity: :meth:`find` one lookup by primary key, `O(log keys)`;
    :meth:`remember` `O(1)` amortised. Memory: :data:`LOGGED_KEY_BYTES` per key.
    """

    __slots__ = ("window", "cap", "_lookup", "_ages")

    def __init__(self, window: float, cap: int, lookup, seqs=None, times=None):
        self.window = window
        self.cap = cap
        self._lookup = lookup
        self._ages = _KeyAges(seqs, times)

    def __len__(self) -> int:
        return len(self._ages)

    def find(self, key: str, batch_digest: str):
        """``(seq, n, same)`` of a remembered ``key`` (``same``: its batch had the SHA-256
        hex digest ``batch_digest``), or None."""
        ages = self._ages
        if not len(ages):
            return None
        row = self._lookup(key)
        if row is None or row[0] < ages.oldest()[0]:
            return None
        seq, n, dig, _ = row
        return seq, n, dig == batch_digest

    def remember(self, key: str, seq: int, n: int, batch_digest: str, at: float) -> None:
        """Remember the key of batch ``seq`` (its row already in the log), then drop the
        oldest keys past the cap or the window."""
        ages = self._ages
        ages.append(seq, at)
        self._drop(at - self.window)

    def _drop(self, horizon: float) -> None:
        ages, cap = self._ages, self.cap
        while len(ages) and (len(ages) > cap or ages.oldest()[1] < horizon):
            ages.popleft()

    def expire(self, horizon: float) -> int | None:
        """Drop the keys remembered before ``horizon``; the sequence number below which
        every key is forgotten (the oldest remembered one's, or ``None`` when none
        is)."""
        self._drop(horizon)
        return self._ages.oldest()[0] if len(self._ages) else None


class Engine:
    """A Monitor fed by HTTP batches, serialised by one lock, made durable by a WAL.

    Runtime complexity: `ingest` is `O(n)` validation (the events, then the Monitor's
    ``admit``), at most one fsync (shared with concurrent batches) and the Monitor's
    ``apply`` (vectorised, shared too);
    `snapshot` is the Monitor's ``snapshot``; `checkpoint` is `O(size of the state)`.

    Build it with :meth:`open` (which recovers from ``state_dir``). Parameters:
    ``monitor`` (a fresh :class:`~streameval.monitor.Monitor`, used when the state
    directory holds no checkpoint), ``fields`` (a :class:`~streameval.events.FieldMap`;
    its segment field defaults to the Monitor's ``group_by``), ``state_dir`` (None:
    nothing durable), ``checkpoint_every`` events and ``checkpoint_seconds`` (None
    disables either), ``sinks`` (callables, or :mod:`streameval.io` sinks with ``write``,
    receiving each alert transition from one delivery thread, in order, so that a slow
    webhook never holds up ingestion), ``config_id`` (anything JSON-like identifying the
    configuration; a state directory refuses to open under another one),
    ``synchronous`` (the log's SQLite setting: ``"FULL"`` survives power loss,
    ``"NORMAL"`` a process crash only), ``max_future`` (seconds an event time may be
    ahead of the server's clock, :data:`streameval.events.DEFAULT_MAX_FUTURE`; a batch
    holding a later one is refused with a 400 naming it, and its events counted in
    ``stats["future_events"]``; None: no limit), ``stamp_arrival_time`` (an event
    without ``ts`` gets its time of arrival; False, the default: it is refused, since
    the wall clock would move the stream's clock), ``label_ttl`` (seconds of event time
    a prediction waits for its label; None: no ``/predictions`` and ``/labels``),
    ``on_duplicate`` (``"keep_first"`` or ``"keep_last"``), ``max_pending``
    (predictions waiting at most, :data:`DEFAULT_MAX_PENDING`), ``idempotency_window``
    (seconds a key is remembered, :data:`DEFAULT_IDEMPOTENCY_WINDOW`) and
    ``max_idempotency_keys`` (:data:`DEFAULT_MAX_IDEMPOTENCY_KEYS`). ``accept_loss``
    (False: a damaged state directory is refused with :class:`DataLoss`) starts from
    what can be read instead, counting what was lost (see the module docs).
    """

    def __init__(self, monitor, *, fields=None, state_dir=None, checkpoint_every=100_000,
                 checkpoint_seconds=60.0, sinks=(), config_id=None, synchronous="FULL",
                 clock=time.time, max_future=DEFAULT_MAX_FUTURE, stamp_arrival_time=False,
                 label_ttl=None, on_duplicate="keep_first", max_pending=None,
                 idempotency_window=None, max_idempotency_keys=None, accept_loss=False):
        if checkpoint_every is not None and (not isinstance(checkpoint_every, int) or checkpoint_every < 1):
            raise ValueError(f"checkpoint_every = {checkpoint_every!r}: must be an int >= 1 or None")
        if checkpoint_seconds is not None and not (
            isinstance(checkpoint_seconds, (int, float)) and checkpoint_seconds > 0
        ):
            raise ValueError(f"checkpoint_seconds = {checkpoint_seconds!r}: must be > 0 or None")
        if not isinstance(stamp_arrival_time, bool):
            raise ValueError(f"stamp_arrival_time = {stamp_arrival_time!r}: must be true or false")
        if not isinstance(accept_loss, bool):
            raise ValueError(f"accept_loss = {accept_loss!r}: must be true or false")
        self.accept_loss = accept_loss
        self.stamp_arrival_time = stamp_arrival_time
        fields = fields if fields is not None else _fields_for(monitor)
        # an event without ts is refused unless its arrival time may stand in for it
        self.fields = dataclasses.replace(fields, require_ts=not stamp_arrival_time)
        self.state_dir = None if state_dir is None else Path(state_dir)
        self.checkpoint_every = checkpoint_every
        self.checkpoint_seconds = checkpoint_seconds
        self.sinks = list(sinks)
        self._writers = [as_writer(s) for s in self.sinks]
        self.serve_options: dict = {}
        self.config_id = fingerprint(config_id)
        # the Monitor and its checkpoint file; alert transitions go to the delivery queue
        self.pipeline = self._make_pipeline(monitor)
        # delayed labels
        if on_duplicate not in ("keep_first", "keep_last"):
            raise ValueError(
                f"on_duplicate = {on_duplicate!r}: the service takes 'keep_first' or "
                "'keep_last' (a batch is durable before its predictions are joined, so it "
                "cannot be refused for a duplicate id; duplicates are counted)")
        # a Monitor with label-free metrics gets every prediction when it is made (the
        # joiner passes it on, in the order of the log: recovery replays the same)
        self.joiner = None if label_ttl is None else LabelJoiner(
            label_ttl, on_duplicate=on_duplicate,
            predictions=bool(getattr(monitor, "label_free", ())))
        self.max_pending = check_param(
            "max_pending", DEFAULT_MAX_PENDING if max_pending is None else max_pending,
            Integer(1))
        self.idempotency_window = check_param(
            "idempotency_window",
            DEFAULT_IDEMPOTENCY_WINDOW if idempotency_window is None else idempotency_window,
            Real(0, open_low=True))
        self.max_idempotency_keys = check_param(
            "max_idempotency_keys",
            DEFAULT_MAX_IDEMPOTENCY_KEYS if max_idempotency_keys is None else max_idempotency_keys,
            Integer(1))
        self._keys = IdempotencyKeys(self.idempotency_window, self.max_idempotency_keys)
        self._expired_by: dict = {}  # seq -> predictions its batch made expire
        self._clock = clock
        self._synchronous = synchronous
        self._lock = threading.Lock()  # the Monitor, the joiner, the sequence, the counters
        self._db_lock = threading.Lock()  # the write-ahead log's connection
        self._ckpt_lock = threading.Lock()  # one checkpoint at a time
        group = threading.RLock()
        self._durable_cv = threading.Condition(group)  # group commit: the waiters
        # the committer waiting for the requests still arriving (the same lock: their
        # departure wakes it alone, not every waiter)
        self._quiet = threading.Condition(group)
        # the committer thread of the asynchronous path (begin / when_applied): it waits
        # here for batches to commit, and keeps the callbacks of the batches it owes
        self._work = threading.Condition(group)
        self._waiters: list = []  # (seq, callback), under the same lock
        self._committer: threading.Thread | None = None
        self._applied = 0  # last batch applied to the Monitor (durable, acknowledged)
        self._durable = 0  # last batch a log commit covered
        self._appended = 0  # last batch appended to the log (under _db_lock)
        self._queue: list = []  # (seq, Batch, Admitted or None) appended, not applied yet
        self._queued_predictions = 0
        self._committing = False
        self._arriving = 0  # requests between their start and their log append (under cv)
        self._closed = False
        self.failed: str | None = None  # why the log failed (the engine then refuses events)
        self._seq = 0  # last sequenced batch
        self._acked = 0  # events applied since start (plus replayed ones)
        self._ckpt_seq = 0
        self._ckpt_acked = 0
        self._ckpt_time = clock()
        self._ckpt_count = 0
        self._commits = 0
        self._crash_after = _crash_after()
        self.replayed = (0, 0)  # (batches, events) replayed from the WAL at start
        self.max_future = max_future
        self.stats = {"batches": 0, "events": 0, "rejected_requests": 0, "alerts": 0,
                      "sink_errors": 0, "future_events": 0, "checkpoint_errors": 0,
                      "retried_batches": 0, "pending_refusals": 0, "log_commits": 0,
                      "monitor_updates": 0, "lost_batches": 0, "lost_events": 0,
                      "damage_accepted": 0,
                      # refused requests by reason (their sum is rejected_requests)
                      **{f"rejected_{r}": 0 for r in REJECT_REASONS}}
        self.checkpoint_error: str | None = None  # why the last checkpoint failed
        self.export_errors: dict = {}  # route -> why its last rendering failed
        self.started = clock()
        self._wal = None
        self._lock_fd: int | None = None  # the state directory's flock
        self._gen = 0  # generation of the newest checkpoint installed
        self._newest: tuple | None = None  # (generation, seq) of checkpoint.json on disk
        self._prev: tuple | None = None  # (generation, seq) of checkpoint.prev.json
        self.recovered_from: str | None = None  # the checkpoint file the start loaded
        self._state_writer: StateWriter | None = None  # writes the binary checkpoints
        #: what the last checkpoint wrote (bytes, arrays, seconds; see StateWriter.last)
        self.last_checkpoint: dict = {}
        self.recovery_notes: list = []  # what the start fell back from or accepted
        self._outbox: queue.Queue = queue.Queue()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def monitor(self):
        """The Monitor (the checkpoint's after a restart)."""
        return self.pipeline.monitor

    def _make_pipeline(self, monitor) -> Pipeline:
        return Pipeline(
            monitor, sinks=[self._on_alert], checkpoint_every=None, kind=CHECKPOINT_KIND,
            fingerprint=self.config_id,
            checkpoint=None if self.state_dir is None else self.state_dir / CHECKPOINT_FILE)

    # ------------------------------------------------------------------ life cycle
    @classmethod
    def open(cls, monitor, *, state_dir=None, **kwargs) -> "Engine":
        """Build an engine, recover its state from ``state_dir``, start its threads."""
        eng = cls(monitor, state_dir=state_dir, **kwargs)
        eng._recover()
        eng._start_threads()
        return eng

    def _recover(self) -> None:
        if self.state_dir is None:
            self.pipeline.open()
            return
        d = self.state_dir
        try:
            d.mkdir(parents=True, exist_ok=True)
            self._take_lock()
            self._remove_temporaries()
            # a file can be created and synced there (the checkpoint's temporary file)
            fd, probe = tempfile.mkstemp(dir=d, prefix=".probe.")
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(probe)
        except StateDirError:
            self._release_lock()
            raise
        except (OSError, sqlite3.Error) as e:
            self._release_lock()
            raise StateDirError(_unusable(d, e)) from None
        try:
            self._recover_locked()
        except BaseException:
            if self._wal is not None:
                self._wal.close()
                self._wal = None
            self._release_lock()
            raise

    def _recover_locked(self) -> None:
        d = self.state_dir
        wal_path = d / WAL_FILE
        # what SQLite would drop without a word, checked before SQLite touches the files
        try:
            file_damage = inspect_files(wal_path)
        except OSError as e:
            raise StateDirError(_unusable(d, e)) from None
        if file_damage and not self.accept_loss:
            last = readable_through(str(wal_path))
            raise DataLoss(_loss_message(d, WAL_FILE, "; ".join(file_damage),
                                         f"batches from seq {last + 1} on (the log reads "
                                         f"up to seq {last})"))
        try:
            # the log first: it refuses another configuration with StateMismatch
            self._wal = WriteAheadLog(wal_path, self.config_id, self._synchronous)
            ckpt, notes = self._load_checkpoint()
            after = 0 if ckpt is None else int(ckpt["seq"])
            rec = self._wal.recover(after)
        except (OSError, sqlite3.Error) as e:
            raise StateDirError(_unusable(d, e)) from None
        damage = list(rec.damage)
        log_id = None if ckpt is None else ckpt.get("log_id")
        if log_id is not None and log_id != self._wal.log_id:
            damage.append(_Damage(f"{WAL_FILE} is not the log {CHECKPOINT_FILE} relies on "
                                  "(it was replaced or recreated)", after + 1, None))
        if damage and not self.accept_loss:
            unbounded = [x for x in damage if x.last is None]
            span = (f"batches from seq {min(x.first for x in unbounded)} on" if unbounded
                    else ", ".join(x.span() for x in damage))
            raise DataLoss(_loss_message(
                d, WAL_FILE, "; ".join([*notes, *(x.reason for x in damage)]), span))
        # -- from here on the start goes ahead (nothing lost, or the loss accepted)
        self.recovery_notes = notes + file_damage + [x.reason for x in damage]
        if self.recovered_from != CHECKPOINT_FILE:
            # a damaged newest checkpoint is set aside (kept for the operator), so that
            # the next checkpoint does not keep it as the older generation
            newest = d / CHECKPOINT_FILE
            if newest.is_file():
                os.replace(newest, d / "checkpoint.damaged.json")
            if self.recovered_from is None and (d / PREVIOUS_CHECKPOINT_FILE).is_file():
                os.replace(d / PREVIOUS_CHECKPOINT_FILE, d / "checkpoint.prev.damaged.json")
        if ckpt is not None:
            self._seq = self._ckpt_seq = after
            self._gen = int(ckpt.get("generation", 0))
            self.stats.update(ckpt.get("stats", {}))
        self.pipeline.open()
        # the keys the log holds, in the order they were remembered (their batches'),
        # dropped from the oldest as the running service would have dropped them
        self._keys = LoggedKeys(self.idempotency_window, self.max_idempotency_keys,
                                self._find_logged_key, rec.key_seqs, rec.key_times)
        self._keys.expire(self._clock() - self.idempotency_window)
        batches = events = 0
        for seq, batch in rec.batches:
            try:
                self._apply([(batch, None)])
            except ValueError as e:  # applied once, so only another streameval refuses it
                raise ValueError(
                    f"{d / WAL_FILE}: batch {seq} of the write-ahead log is "
                    f"refused on replay ({e}); was the state written by another version?"
                ) from None
            batches += 1
            events += len(batch)
        self._seq = max(self._seq, rec.last_seq, self._wal.truncated_through)
        self.stats["batches"] += batches
        self.stats["events"] += events
        self.replayed = (batches, events)
        self._applied = self._appended = self._durable = self._seq
        self._acked = events
        self._ckpt_acked = 0
        if self.recovery_notes and (damage or file_damage):
            lost_b = sum(x.batches for x in damage)
            lost_e = sum(x.events for x in damage)
            self.stats["lost_batches"] += lost_b
            self.stats["lost_events"] += lost_e
            self.stats["damage_accepted"] += len(damage) + len(file_damage)
            _log.warning("state directory %s: started with accept_loss over damage (%s); "
                         "lost %d batches, %d events known", d,
                         "; ".join(self.recovery_notes), lost_b, lost_e)
            try:
                self._settle_loss(rec)
            except (OSError, sqlite3.Error) as e:
                raise StateDirError(_unusable(d, e)) from None
        elif notes:
            _log.warning("state directory %s: %s", d, "; ".join(notes))

    def _settle_loss(self, rec) -> None:
        """After an accepted loss: forget the lost batches' keys, checkpoint everything
        applied, and drop the damaged records (a log SQLite still finds damaged is moved
        aside and started anew, under the same log id), so that the next start is
        clean."""
        wal = self._wal
        if rec.refused_keys is None:  # the key table could not be read: trust none
            wal.forget_keys(self._seq + 1)
        else:
            wal.drop_keys(rec.refused_keys)
        self._ckpt_seq = -1  # force the checkpoint
        self._checkpoint()
        if wal.quick_check() != ["ok"]:
            log_id, keys = wal.log_id, wal.keys()
            wal.close()
            self._wal = None
            stamp = time.strftime("%Y%m%dT%H%M%S")
            for suffix in ("", "-wal", "-shm"):
                src = self.state_dir / (WAL_FILE + suffix)
                if src.exists():
                    os.replace(src, self.state_dir / f"damaged-{stamp}.{WAL_FILE}{suffix}")
            wal = self._wal = WriteAheadLog(self.state_dir / WAL_FILE, self.config_id,
                                            self._synchronous)
            wal.adopt(log_id, keys)
        wal.truncate_through(self._seq)

    def _load_checkpoint(self) -> tuple:
        """The newest usable checkpoint's state (None: none) and notes on what was
        skipped. Falls back to the previous generation when the newest is damaged or
        absent; a sound checkpoint of another configuration or version is refused."""
        d, notes = self.state_dir, []
        newest, prev = d / CHECKPOINT_FILE, d / PREVIOUS_CHECKPOINT_FILE
        state = None
        for path in (newest, prev):
            try:
                if self._state_writer is None:
                    self._state_writer = StateWriter(newest)
                state = read_checkpoint(path, expected_kind=CHECKPOINT_KIND,
                                        expected_fingerprint=self.config_id,
                                        writer=self._state_writer)
            except FileNotFoundError:
                if path == newest and prev.exists():
                    notes.append(f"{CHECKPOINT_FILE} is missing")
                continue
            except CheckpointError as e:
                if not e.damaged:
                    raise
                notes.append(f"{path.name} is damaged ({e.reason})")
                continue
            try:
                seq = state["seq"]
                if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
                    raise ValueError(f"seq = {seq!r:.40}")
                cls = type(self.monitor)
                monitor = getattr(cls, "from_array_state", cls.from_state)(state["monitor"])
                joiner = (LabelJoiner.from_state(state["joiner"],
                                                 predictions=self.joiner.predictions)
                          if self.joiner is not None and state.get("joiner") else None)
            except (KeyError, TypeError, ValueError, RecursionError, AttributeError,
                    IndexError) as e:
                notes.append(f"{path.name} holds an unusable state ({type(e).__name__}: "
                             f"{str(e)[:200]})")
                state = None
                continue
            self.pipeline = self._make_pipeline(monitor)
            if joiner is not None:
                self.joiner = joiner
            self.recovered_from = path.name
            gen = int(state.get("generation", 0))
            if path == newest:
                self._newest = (gen, seq)
            else:  # the newest is set aside below; this one stays the older generation
                self._prev = (gen, seq)
            break
        if notes and state is not None and self.recovered_from == PREVIOUS_CHECKPOINT_FILE:
            notes.append(f"started from {PREVIOUS_CHECKPOINT_FILE} and the log")
        elif notes:
            notes.append("no checkpoint can be used")
        return state, notes

    def _take_lock(self) -> None:
        import fcntl

        path = self.state_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise StateDirError(
                f"state directory {self.state_dir}: in use by another streameval serve "
                f"(pid {holder}, holding {path}); stop it first, or use another "
                "--state-dir") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the last descriptor releases the flock
            self._lock_fd = None

    def _remove_temporaries(self) -> int:
        """Remove the temporary files of checkpoint writers that were killed (under the
        directory's lock, so none of them is being written). Returns how many."""
        # packs neither generation references (a writer killed while writing one)
        n = remove_unreferenced(pack_dir(self.state_dir / CHECKPOINT_FILE),
                                referenced_packs(self.state_dir / CHECKPOINT_FILE))
        for entry in os.scandir(self.state_dir):
            name = entry.name
            if (name.startswith("." + CHECKPOINT_FILE + ".") and name.endswith(".tmp")
                    or name.startswith(".probe.")) and entry.is_file(follow_symlinks=False):
                try:
                    os.unlink(entry.path)
                    n += 1
                except FileNotFoundError:
                    pass
        return n

    def _start_threads(self) -> None:
        t = threading.Thread(target=self._deliver_loop, name="streameval-alerts", daemon=True)
        t.start()
        self._threads.append(t)
        if self.state_dir is not None and (self.checkpoint_every or self.checkpoint_seconds):
            t = threading.Thread(target=self._checkpoint_loop, name="streameval-checkpoint",
                                 daemon=True)
            t.start()
            self._threads.append(t)

    def close(self) -> None:
        """Stop accepting events, write a final checkpoint, deliver pending alerts.

        A failed final checkpoint is raised after everything else is closed (the
        write-ahead log still holds the batches it would have covered)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        self._wake.set()
        with self._durable_cv:  # the committer ends once no callback waits
            self._work.notify_all()
        for t in self._threads:
            if t.name == "streameval-checkpoint":
                t.join()
        error = None
        if self.state_dir is not None and self.failed is None:
            try:
                self.checkpoint()
            except Exception as e:  # counted; the log keeps every acknowledged batch
                error = e
        self._outbox.put(None)
        for t in self._threads:
            t.join(timeout=30)
        for sink in self.sinks:
            close = getattr(sink, "close", None)
            if callable(close):
                close()
        if self._wal is not None:
            self._wal.close()
        self._release_lock()
        if error is not None:  # closed all the same; the caller learns why
            raise error

    # ------------------------------------------------------------------ ingestion
    def ingest_body(self, body: bytes, content_type: str | None = None, *,
                    kind: str = "events", key: str | None = None, limits: tuple = ()) -> dict:
        """Decode a request body (:func:`decode_events`, with its byte ``limits``) and
        :meth:`ingest` it."""
        return self._wait(*self.begin_body(body, content_type, kind=kind, key=key,
                                           limits=limits))

    def begin_body(self, body: bytes, content_type: str | None = None, *,
                   kind: str = "events", key: str | None = None, limits: tuple = ()) -> tuple:
        """The first half of :meth:`ingest_body`, on the caller's thread without waiting:
        decode, validate and log the batch. Returns ``(result, seq)``: with ``seq`` None
        the result is final (an empty batch), else pass ``seq`` to :meth:`when_applied`
        and the result to :meth:`finish` once it reports. Raises as :meth:`ingest`."""
        try:
            events = decode_events(body, content_type, limits)
        except BadRequest:
            self._count_rejected()
            raise
        return self._begin(events, kind, key)

    def when_applied(self, seq: int, callback) -> None:
        """Call ``callback(error)`` once batch ``seq`` is durable and applied (``error``
        None) or can no longer be (an :class:`Unavailable`): at once if it is already
        known, else from the committer thread, which commits and applies for every
        waiting batch (group commit without a thread per request)."""
        cv = self._durable_cv
        with cv:
            if self._applied < seq and not self.failed:
                self._waiters.append((seq, callback))
                if self._committer is None:
                    self._committer = threading.Thread(
                        target=self._commit_loop, name="streameval-commit", daemon=True)
                    self._committer.start()
                self._work.notify()
                return
            error = None if self._applied >= seq else Unavailable(self.failed)
        callback(error)

    def finish(self, result: dict) -> dict:
        """Complete the result of an applied batch (its ``n``, ``pending``), and wake
        the checkpointer when a checkpoint is due."""
        result["n"] = self.monitor.n
        if self.joiner is not None:
            result["pending"] = self.joiner.n_pending
            # predictions this batch's arrival made expire (0 for a retried batch)
            result["expired"] = self._expired_by.pop(result.get("seq"), 0)
        if self.checkpoint_every is not None and (
                self._acked - self._ckpt_acked >= self.checkpoint_every):
            self._wake.set()
        return result

    def _commit_loop(self) -> None:
        """The committer thread: while callbacks wait, make their batches durable and
        applied (:meth:`_make_durable`, shared with the threads of :meth:`ingest`), then
        call the callbacks whose batches it covered (all of them once the engine
        failed, those not applied with the error). It ends when the engine is closed
        and no callback waits."""
        cv = self._durable_cv
        while True:
            with cv:
                while not self._waiters:
                    if self._closed:
                        self._committer = None
                        return
                    self._work.wait(1.0)
                target = max(s for s, _ in self._waiters)
            try:
                self._make_durable(target)
            except Unavailable:
                pass
            except Exception as e:  # a bug: no waiter may hang on it
                self._fail(f"the committer failed: {e!r}")
            with cv:
                applied, failed = self._applied, self.failed
                if failed:
                    done, self._waiters = self._waiters, []
                else:
                    done = [w for w in self._waiters if w[0] <= applied]
                    self._waiters = [w for w in self._waiters if w[0] > applied]
            for s, callback in done:
                try:
                    callback(None if s <= applied else Unavailable(failed))
                except Exception:  # (an event loop closed meanwhile): the others still
                    _log.exception("an ingestion callback failed")

    def ingest(self, events: list, *, kind: str = "events", key: str | None = None) -> dict:
        """Validate, log and apply a batch of event dicts, all or nothing.

        ``kind`` is ``"events"`` (complete events), ``"predictions"`` or ``"labels"``
        (delayed labels: the engine needs ``label_ttl``). ``key`` is the batch's
        idempotency key (None: none). Returns ``{"accepted", "n", "seq"}`` (plus
        ``"retried": true`` for a key seen before, with the original ``accepted`` and
        ``seq``, and ``"pending"`` for delayed labels); raises :class:`BadRequest`
        (naming the first bad event; 429 past ``max_pending``, 422 for a key reused
        with another batch) with nothing applied, or :class:`Unavailable`.
        """
        return self._wait(*self._begin(events, kind, key))

    def _wait(self, result: dict, seq: int | None) -> dict:
        """The second half of :meth:`ingest` on the caller's thread: wait until batch
        ``seq`` (None: nothing to wait for) is durable and applied, then answer."""
        if seq is None:
            return result
        self._make_durable(seq)
        return self.finish(result)

    def _begin(self, events: list, kind: str, key: str | None) -> tuple:
        """Validate and log a batch, counted as arriving meanwhile (a committer waits
        for it): ``(result, seq to wait for or None)``."""
        cv = self._durable_cv
        with cv:
            self._arriving += 1
        try:
            return self._sequence(events, kind, key)
        finally:
            with cv:
                self._arriving -= 1
                if not self._arriving and self._committing:  # the committer waits for it
                    self._quiet.notify()

    def _sequence(self, events: list, kind: str, key: str | None):
        """Validate a batch and append it to the log: ``(result, seq to wait for)``,
        or ``(result, None)`` for an empty batch."""
        code = _KINDS.get(kind)
        if code is None:
            raise ValueError(f"kind = {kind!r}: must be one of {sorted(_KINDS)}")
        try:
            if key is not None:
                _check_key(key)
            if code != EVENTS and self.joiner is None:
                raise BadRequest(f"/{kind}: this service joins no delayed labels; set "
                                 "[input] label_ttl in its config, or post complete events "
                                 "to /events", status=404)
            batch, admitted = self._validate(events, code)
        except BadRequest:
            self._count_rejected()
            raise
        n = len(batch)
        dig = None if key is None else digest(batch)
        with self._lock:
            if self._closed or self.failed:
                raise Unavailable(self.failed or "the service is shutting down")
            hit = None if key is None else self._keys.find(key, dig)
            if hit is not None:
                seq, accepted, same = hit
                if not same:
                    self.stats["rejected_requests"] += 1
                    self.stats["rejected_idempotency_conflict"] += 1
                    raise BadRequest(f"Idempotency-Key {key!r} was used for another batch "
                                     f"(seq {seq}); use a new key for a new batch",
                                     status=422, seq=seq)
                self.stats["retried_batches"] += 1
                result = {"accepted": accepted, "seq": seq, "retried": True}
            elif n == 0:
                return {"accepted": 0, "n": self.monitor.n, "seq": self._applied}, None
            else:
                if code == PREDICTIONS:
                    waiting = self.joiner.n_pending + self._queued_predictions
                    if waiting + n > self.max_pending:
                        self.stats["pending_refusals"] += 1
                        raise BadRequest(
                            f"{waiting} predictions are waiting for their label and this "
                            f"batch adds {n}: over max_pending = {self.max_pending}; post "
                            "their labels, or let them expire (label_ttl), then retry",
                            status=429, pending=waiting, max_pending=self.max_pending)
                seq = self._seq + 1
                now = self._clock()
                if self._wal is not None:
                    try:
                        with self._db_lock:
                            self._wal.append(seq, batch, key, dig or "", now)
                            self._appended = seq
                    except Exception as e:
                        self._fail(f"could not write the write-ahead log: {e}")
                        raise Unavailable(self.failed) from e
                self._seq = seq
                self._queue.append((seq, batch, admitted))
                if code == PREDICTIONS:
                    self._queued_predictions += n
                if key is not None:
                    self._keys.remember(key, seq, n, dig, now)
                result = {"accepted": n, "seq": seq}
        return result, result["seq"]

    def _count_rejected(self, reason: str = "invalid") -> None:
        with self._lock:
            self.stats["rejected_requests"] += 1
            self.stats[f"rejected_{reason}"] += 1

    def count_refused_body(self, status: int) -> None:
        """Count a request refused before its body was read whole: 413 (too large) or
        408 (too slow); in ``rejected_requests`` and by reason (:data:`REJECT_REASONS`)."""
        self._count_rejected("too_large" if status == 413 else "timeout" if status == 408
                             else "invalid")

    def _make_durable(self, seq: int) -> None:
        """Return once batch ``seq`` is durable and applied (group commit: one caller
        commits for everyone waiting, then applies what its commit covered while the
        next caller may already be committing; the others wait)."""
        cv = self._durable_cv
        with cv:
            while self._applied < seq:
                if self.failed:
                    raise Unavailable(self.failed)
                if not self._committing and self._durable < seq:
                    self._committing = True
                    break
                cv.wait()
            else:
                return
            # batches being validated now will be in the log in a moment: wait for them
            # (at most COMMIT_DELAY) so that one commit and one update carry them all
            deadline = time.monotonic() + COMMIT_DELAY
            while self._arriving and not self.failed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._quiet.wait(left)
        covered = None
        try:
            if self._wal is not None:
                with self._db_lock:
                    appended = self._appended  # every row up to it is in the transaction
                    self._wal.commit()
                covered = appended  # only once the commit returned
                self._commits += 1
                self.stats["log_commits"] += 1  # batches / commits: what group commit saves
                if self._crash_after is not None and self._commits >= self._crash_after:
                    os._exit(137)  # STREAMEVAL_CRASH_AFTER_COMMIT: durable, not acknowledged
            else:
                with self._lock:
                    covered = self._seq
        except Exception as e:
            self._fail(f"could not sync the write-ahead log: {e}")
        finally:
            with cv:
                self._committing = False
                if covered is not None:
                    self._durable = max(self._durable, covered)
                # wake the waiters now only if one of them must commit next (a batch
                # appended after this commit began) or must fail; the others wait for
                # the apply below, whose notify_all wakes them (each wake-up of every
                # waiter costs CPU under the GIL)
                if covered is None or self._seq > covered or self.failed:
                    cv.notify_all()
        if covered is not None:
            try:
                self._apply_durable()  # in sequence order, whoever gets there first
            except Exception as e:
                self._fail(f"could not apply a batch: {e!r}")
            finally:
                with cv:
                    cv.notify_all()
        if self._applied < seq:
            raise Unavailable(self.failed or "the batch was not applied")

    def _apply_durable(self) -> None:
        """Apply the queued batches that a commit made durable, in order."""
        with self._lock:
            covered = self._durable
            queue_ = self._queue
            k = 0
            while k < len(queue_) and queue_[k][0] <= covered:
                k += 1
            if not k:
                return
            group = [(b, a) for _, b, a in queue_[:k]]
            try:
                self._apply(group, [s for s, _, _ in queue_[:k]])
            except BaseException as e:  # validated before: a bug; the memory state is suspect
                self._fail(f"the Monitor failed on a batch: {e!r}")
                raise
            del queue_[:k]
            self._queued_predictions -= sum(len(b) for b, _ in group
                                            if _kind(b) == PREDICTIONS)
            events = sum(len(b) for b, _ in group)
            self._applied = covered
            self._acked += events
            self.stats["batches"] += len(group)
            self.stats["events"] += events

    def _apply(self, batches: list, seqs=None) -> None:
        """Feed ``[(batch, admitted or None)]`` to the joiner and the Monitor, in order:
        an event batch as the Monitor admitted it when it arrived (None: admitted now, a
        batch read back from the log), a prediction or label batch through the joiner,
        whose joined events the Monitor admits then. Consecutive unweighted event
        batches go in as one ``apply`` (group commit's other half: the Monitor's cost
        per call is paid once per group); counts, score orders and windows are the same
        as batch by batch, and compensated sums (log loss) agree to the last bit but
        for a rounding tie. Weighted batches go one by one, so that their float sums
        keep the order of a Monitor fed batch by batch."""
        stats, pipeline = self.stats, self.pipeline
        admit = self.monitor.admit

        def apply(admitted):
            pipeline.apply(admitted)
            stats["monitor_updates"] += 1  # batches / updates: what grouping saves

        run: list = []
        for k, (b, admitted) in enumerate(batches):
            kind = _kind(b)
            if kind == EVENTS:
                if admitted is None:
                    admitted = admit(b)
                if b.weight is None:
                    run.append(admitted)
                    continue
            if run:
                apply(Admitted.concat(run))
                run = []
            if kind == EVENTS:
                apply(admitted)
                continue
            expired = self.joiner.n_expired
            joined = self.joiner.process(b)
            if seqs is not None and self.joiner.n_expired > expired:
                self._note_expired(seqs[k], self.joiner.n_expired - expired)
            if len(joined):
                stats["monitor_updates"] += 1
                pipeline.feed(joined)
        if run:
            apply(Admitted.concat(run))

    def _note_expired(self, seq: int, n: int) -> None:
        """Keep, for :meth:`finish`, how many predictions batch ``seq`` made expire (the
        1 000 newest batches at most: an answer never read is not kept for long)."""
        by = self._expired_by
        by[seq] = n
        if len(by) > 1000:
            del by[next(iter(by))]

    def _forget_keys(self) -> None:
        """Drop the keys past the window from memory and delete every forgotten key's
        row from the log (under the engine's lock; at each checkpoint, written or not).
        A forgotten key is never answered for again, so its row may go at any time."""
        if self._wal is None:
            return
        oldest = self._keys.expire(self._clock() - self.idempotency_window)
        with self._db_lock:
            self._wal.forget_keys(self._seq + 1 if oldest is None else oldest)

    def _find_logged_key(self, key: str):
        """The log's row of an idempotency key (under the engine's lock): ``(seq, n,
        digest, at)`` or None. A row that fails its checksum, or a log that cannot be
        read, stops the service (:meth:`_fail`): the key cannot be told from a new one."""
        try:
            with self._db_lock:
                return self._wal.find_key(key)
        except sqlite3.Error as e:
            self._fail(f"could not read the idempotency key {key!r:.80} from the "
                       f"write-ahead log: {e}")
            raise Unavailable(self.failed) from e

    def _fail(self, reason: str) -> None:
        """Stop accepting events: the log missed a batch the memory state may need."""
        if self.failed is None:
            self.failed = reason + "; restart the service (it recovers the acknowledged events)"
        with self._durable_cv:
            self._durable_cv.notify_all()
            self._quiet.notify_all()
            self._work.notify_all()

    def _validate(self, events, code: int) -> tuple:
        """``(batch, admitted)``: the events validated into one Batch (event times the
        arrival time where absent, weights None where all 1) and, for complete events,
        the Monitor's admitted form of it (None for predictions and labels: their
        joined events are admitted when they join). ``BadRequest`` naming the first bad
        event otherwise."""
        try:
            eb = events_to_batch(events, self.fields, partial=code != EVENTS)
        except EventError as e:
            raise BadRequest(e.reason, index=e.index) from None
        if code != EVENTS:
            want = KIND_PREDICTION if code == PREDICTIONS else KIND_LABEL
            wrong = np.flatnonzero(eb.kind != want)
            if len(wrong):
                i = int(wrong[0])
                what = ("has a label: complete events go to /events" if code == PREDICTIONS
                        else "has a score: complete events go to /events, predictions to "
                             "/predictions")
                if eb.kind[i] == (KIND_LABEL if code == PREDICTIONS else KIND_PREDICTION):
                    what = ("has no score" if code == PREDICTIONS else "has no label")
                raise BadRequest(f"this row {what}", index=i)
        ts = eb.ts
        now = self._clock()
        if len(ts) and np.isnan(ts).any():  # no event time: the time of arrival
            ts = np.where(np.isnan(ts), now, ts)
        if self.max_future is not None and len(ts):
            ahead = ts > now + self.max_future
            if ahead.any():  # it would move the windows' clock into the future for good
                i = int(np.argmax(ahead))
                with self._lock:
                    self.stats["future_events"] += int(ahead.sum())
                raise BadRequest(
                    f"ts = {float(ts[i])!r} is {float(ts[i]) - now:.0f} s ahead of the "
                    f"server's clock (max_future = {self.max_future:g} s)", index=i)
        w = eb.weight
        if w is not None and (w == 1.0).all():
            w = None
        batch = dataclasses.replace(eb, ts=ts, weight=w)
        # what the Monitor would refuse, refused now: a durable batch is always applied
        admitted = None
        if code != LABELS:
            try:
                admitted = self.monitor.admit(batch)
            except ValueError as e:
                raise BadRequest(str(e), index=getattr(e, "index", None)) from None
        return batch, (admitted if code == EVENTS else None)

    # ------------------------------------------------------------------ reading
    def snapshot(self) -> dict:
        """The Monitor's snapshot plus a ``service`` section (counters, checkpoint,
        the label join)."""
        with self._lock:
            snap = self.monitor.snapshot()
            snap["service"] = self._service_info()
        return snap

    def active_alerts(self) -> list:
        """The Monitor's active alerts."""
        with self._lock:
            return self.monitor.active_alerts()

    def health(self) -> dict:
        """Counters read without the lock (cheap; for ``/healthz``).

        ``failed`` is why the engine stopped accepting events (None: it accepts them);
        ``recovered_from`` the checkpoint file the start loaded (None: none),
        ``recovery_notes`` what it fell back from or accepted, ``lost_batches`` and
        ``lost_events`` what starts with ``accept_loss`` counted lost (events: those
        known; a damaged record may hide its size), ``damage_accepted`` the findings
        they accepted (a damaged ``-wal`` file hides how many batches it held);
        ``checkpoint_error`` why the last checkpoint attempt failed (None once one
        succeeds); ``export_errors`` maps ``/metrics`` or ``/snapshot`` to why its last
        rendering failed (removed once one succeeds).
        """
        return {"n": self.monitor.n, "seq": self._applied, "checkpoint_seq": self._ckpt_seq,
                "durable": self._wal is not None, "closed": self._closed, "failed": self.failed,
                "checkpoint_error": self.checkpoint_error,
                "checkpoint_errors": self.stats["checkpoint_errors"],
                "checkpoint_generation": self._gen, "recovered_from": self.recovered_from,
                "recovery_notes": list(self.recovery_notes),
                "lost_batches": self.stats["lost_batches"],
                "lost_events": self.stats["lost_events"],
                "damage_accepted": self.stats["damage_accepted"],
                "export_errors": dict(self.export_errors)}

    def record_export(self, route: str, error: BaseException | None) -> None:
        """Note that rendering ``route`` (``/metrics``, ``/snapshot``) succeeded (None)
        or failed with ``error``; :meth:`health` reports a failure until a success."""
        if error is None:
            self.export_errors.pop(route, None)
        else:
            self.export_errors[route] = f"{type(error).__name__}: {error}"

    def read(self, fn):
        """Call ``fn(monitor, service_info)`` under the lock (for exposition)."""
        with self._lock:
            return fn(self.monitor, self._service_info())

    def _service_info(self) -> dict:
        info = {
            "seq": self._applied,
            "checkpoint_seq": self._ckpt_seq,
            "checkpoints": self._ckpt_count,
            "last_checkpoint": self._ckpt_time,
            "events_since_checkpoint": self._acked - self._ckpt_acked,
            "replayed_batches": self.replayed[0],
            "replayed_events": self.replayed[1],
            "started": self.started,
            "durable": self._wal is not None,
            "idempotency_keys": len(self._keys),
            **self.stats,
        }
        j = self.joiner
        if j is not None:
            info["join"] = {"label_ttl": j.label_ttl, "pending": j.n_pending,
                            "max_pending": self.max_pending, "predictions": j.n_predictions,
                            "labels": j.n_labels, "joined": j.n_joined,
                            "expired": j.n_expired, "orphans": j.n_orphans,
                            "duplicates": j.n_duplicates,
                            "watermark": j.watermark if j.watermark > -np.inf else None}
        return info

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self) -> bool:
        """Write the whole state atomically and drop the log rows it covers.

        Returns False when nothing changed since the last checkpoint (or there is no
        state directory, or the engine has failed). Runtime complexity: `O(size of the
        state)`: copied under the ingestion lock, serialised and written outside it. A
        failure is counted in ``stats["checkpoint_errors"]``, kept as
        :attr:`checkpoint_error` until a checkpoint succeeds, and raised.
        """
        if self.state_dir is None:
            return False
        try:
            written = self._checkpoint()
        except Exception as e:
            with self._lock:
                self.stats["checkpoint_errors"] += 1
            if self.checkpoint_error is None:  # once per run of failures, not every retry
                _log.warning("checkpoint to %s failed (retried; the write-ahead log keeps "
                             "the events): %s: %s", self.state_dir, type(e).__name__, e)
            self.checkpoint_error = f"{type(e).__name__}: {e}"
            raise
        if written:
            self.checkpoint_error = None
        return written

    def _checkpoint(self) -> bool:
        path = self.state_dir / CHECKPOINT_FILE
        with self._ckpt_lock:
            with self._lock:
                seq = self._applied
                if self.failed:  # the log missed a batch: the checkpoint would too
                    return False
                if seq == self._ckpt_seq and path.exists():
                    self._forget_keys()
                    return False
                acked = self._acked
                gen = self._gen + 1
                head = {"seq": seq, "stats": dict(self.stats), "generation": gen,
                        "log_id": None if self._wal is None else self._wal.log_id}
                # the state at this point: the binary state tree (arrays that never change
                # as read-only views, the others copied), taken under the lock in
                # O(objects); ingestion goes on while this thread writes it
                state = self._state(head)
            self._write(state, gen, seq)
            with self._lock:
                if self._wal is not None:
                    with self._db_lock:
                        # keep the rows since the older kept generation
                        older = 0 if self._prev is None else self._prev[1]
                        if older > self._wal.truncated_through:
                            self._wal.truncate_through(older)
                self._forget_keys()
                self._ckpt_seq = seq
                self._ckpt_acked = acked
                self._ckpt_time = self._clock()
                self._ckpt_count += 1
        return True

    def _write(self, state: dict, gen: int, seq: int) -> None:
        """Write a captured state as the newest checkpoint (in this thread, under the
        checkpoint lock and the directory's flock): refused unless its generation and
        sequence number are above the installed checkpoint's. The one it replaces
        becomes the older generation. Only the arrays that changed since the last
        checkpoint are written (:class:`~streameval.io.statefile.StateWriter`)."""
        path = self.state_dir / CHECKPOINT_FILE
        if gen <= self._gen or (self._newest is not None and seq < self._newest[1]):
            raise RuntimeError(
                f"checkpoint generation {gen} (seq {seq}) is not newer than the "
                f"installed generation {self._gen}; not installed")
        moved = path.is_file() and not path.is_symlink()
        writer = self._state_writer
        if writer is None:
            writer = self._state_writer = StateWriter(path)
        writer.write(state, kind=CHECKPOINT_KIND, fingerprint=self.config_id, seq=gen)
        if moved:  # the older generation is what was the newest (unknown: keep all rows)
            self._prev = self._newest if self._newest is not None else (0, 0)
        self._newest = (gen, seq)
        self._gen = gen
        self.last_checkpoint = dict(writer.last)

    def _state(self, head: dict) -> dict:
        state = {**head, **self.pipeline.state()}
        if self.joiner is not None:  # (its waiting predictions as numpy columns)
            to_arrays = getattr(self.joiner, "to_array_state", None)
            state["joiner"] = to_arrays() if to_arrays is not None else self.joiner.to_state()
        return state

    def _checkpoint_loop(self) -> None:
        every, seconds = self.checkpoint_every, self.checkpoint_seconds
        tick = 1.0 if seconds is None else min(1.0, seconds)
        while not self._stop.is_set():
            self._wake.wait(tick)
            self._wake.clear()
            if self._stop.is_set():
                return
            pending = self._acked - self._ckpt_acked
            by_count = every is not None and pending >= every
            by_time = (seconds is not None and pending > 0
                       and self._clock() - self._ckpt_time >= seconds)
            if by_count or by_time:
                try:
                    self.checkpoint()
                except Exception:  # counted and kept for /healthz; retried next tick
                    pass

    # ------------------------------------------------------------------ alerts
    def _on_alert(self, transition) -> None:
        # called by the Monitor under the ingestion lock: only queue it here
        self.stats["alerts"] += 1
        self._outbox.put(dict(transition))

    def _deliver_loop(self) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                return
            for write in self._writers:
                try:
                    if write(item) is False:  # io sinks report a failed delivery
                        self.stats["sink_errors"] += 1
                except Exception:
                    self.stats["sink_errors"] += 1


_KINDS = {"events": EVENTS, "predictions": PREDICTIONS, "labels": LABELS}
#: Longest idempotency key (Stripe's limit too).
MAX_KEY_LENGTH = 255


def _loss_message(state_dir: Path, name: str, reason: str, span: str) -> str:
    """One line: what is damaged, what is at risk, and what to do."""
    return (f"state directory {state_dir}: {name}: acknowledged batches may be lost: "
            f"{reason}. At risk: {span}. The damaged files are left as they are. Restore "
            "the state directory from a backup, or start with --accept-loss ([serve] accept_loss = true) to go "
            "on from what can be read: the loss is counted (lost_batches, lost_events in "
            "/healthz; streameval_lost_events_total) and the lost batches' idempotency "
            "keys are forgotten, so that clients can send them again")


def _check_key(key) -> None:
    if (not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_LENGTH
            or not key.isprintable()):
        raise BadRequest(f"idempotency key {key!r:.80}: must be 1 to {MAX_KEY_LENGTH} "
                         "printable characters")


def _crash_after() -> int | None:
    raw = os.environ.get("STREAMEVAL_CRASH_AFTER_COMMIT")
    return int(raw) if raw else None


def _kind(batch: Batch) -> int:
    """The kind of a service batch (events, predictions or labels: one for all rows)."""
    return EVENTS if batch.kind is None or not len(batch.kind) else int(batch.kind[0])


def _unusable(state_dir: Path, e: BaseException) -> str:
    """One line: the state directory and why it cannot be used."""
    reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    where = getattr(e, "filename", None) or (
        state_dir / WAL_FILE if isinstance(e, sqlite3.Error) else None)
    what = "" if where is None or Path(where) == state_dir else f" ({where})"
    return f"state directory {state_dir}: cannot be used{what}: {reason}"


def _fields_for(monitor) -> FieldMap:
    """The default event fields, with the Monitor's labels and its ``group_by`` as the
    segment field (the engine sets ``require_ts`` from ``stamp_arrival_time``)."""
    return FieldMap(segment=monitor.group_by, pos_label=monitor.pos_label,
                    neg_label=monitor.neg_label)
