"""The service's core: one Monitor behind one lock, a write-ahead log, checkpoints.

No web framework here: :class:`Engine` takes decoded request bodies and returns plain
dicts, so that its durability and atomicity can be read (and tested) on their own.

Ingestion of a batch, in order:

1. validate every event (:func:`streameval.events.events_to_batch`), outside the lock;
   a bad event refuses the whole batch, naming its index;
2. under the lock: apply the batch to the Monitor with ``update_many`` (which validates
   it in full first: a refused batch changes nothing), give it the next sequence
   number and append it to the write-ahead log;
3. outside the lock: wait for a log commit (fsync) covering it -- one commit serves
   every batch appended meanwhile (group commit), and the Monitor works on the next
   batch while the disk syncs;
4. acknowledge (the HTTP 200) only then.

The Monitor, its alert sinks and its checkpoint file are a
:class:`streameval.pipeline.Pipeline` without a source: batches are given to
:meth:`Pipeline.feed`, checkpoints written with :meth:`Pipeline.save`, and the start
resumes with :meth:`Pipeline.resume`. A refused batch's error names its event by the
``index`` attribute of the error (validation errors carry it); an error without one
is still a 400, naming no event.

This module may import :mod:`streameval.pipeline`, :mod:`streameval.events`,
:mod:`streameval.io` and the service's own modules (``body``, ``wal``).

The log is therefore always a prefix of the applied batches, in order. If the log
cannot be written or synced, the engine stops accepting events (503) and writes no
more checkpoints: a restart recovers exactly the acknowledged batches.

A state directory that cannot be used at start (not creatable, not writable, its log
not an SQLite database) raises :class:`StateDirError`, one line naming the directory
and the reason. A checkpoint that fails later (disk full, a file in the way) is counted
(``stats["checkpoint_errors"]``), its reason kept in :meth:`Engine.health` until one
succeeds, and retried; the log keeps every acknowledged batch meanwhile.

A checkpoint (every ``checkpoint_every`` events or ``checkpoint_seconds`` seconds, on
``POST /checkpoint`` and at shutdown) writes the Monitor's whole state with the
sequence number of the last batch it covers, atomically, then deletes the log rows it
covers. Starting on a state directory loads the checkpoint and replays the rows after
it: no acknowledged event is lost by a ``kill -9``.

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

import json
import logging
import os
import queue
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from streameval.events import DEFAULT_MAX_FUTURE, EventError, FieldMap, events_to_batch
from streameval.io.checkpoint import fingerprint
from streameval.pipeline import Pipeline, as_writer
from streameval.service.body import BadRequest, decode_events
from streameval.service.wal import Batch, StateMismatch, WriteAheadLog

__all__ = ["Engine", "Unavailable", "StateMismatch", "StateDirError", "CHECKPOINT_FILE",
           "WAL_FILE"]

#: File names inside the state directory.
CHECKPOINT_FILE = "checkpoint.json"
WAL_FILE = "wal.sqlite3"
#: ``kind`` of the service's checkpoints (:func:`streameval.io.save_checkpoint`).
CHECKPOINT_KIND = "service"

_log = logging.getLogger("streameval.service")


class Unavailable(RuntimeError):
    """The service cannot accept events now (closed, or its log cannot be written)."""


class StateDirError(OSError):
    """The state directory cannot be used (one line: the directory and the reason)."""


class Engine:
    """A Monitor fed by HTTP batches, serialised by one lock, made durable by a WAL.

    Runtime complexity: `ingest` is the Monitor's ``update_many`` (vectorised) plus
    `O(n)` validation and at most one fsync (shared with concurrent batches);
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
    ``stats["future_events"]``; None: no limit).
    """

    def __init__(self, monitor, *, fields=None, state_dir=None, checkpoint_every=100_000,
                 checkpoint_seconds=60.0, sinks=(), config_id=None, synchronous="FULL",
                 clock=time.time, max_future=DEFAULT_MAX_FUTURE):
        if checkpoint_every is not None and (not isinstance(checkpoint_every, int) or checkpoint_every < 1):
            raise ValueError(f"checkpoint_every = {checkpoint_every!r}: must be an int >= 1 or None")
        if checkpoint_seconds is not None and not (
            isinstance(checkpoint_seconds, (int, float)) and checkpoint_seconds > 0
        ):
            raise ValueError(f"checkpoint_seconds = {checkpoint_seconds!r}: must be > 0 or None")
        self.fields = fields if fields is not None else _fields_for(monitor)
        self.state_dir = None if state_dir is None else Path(state_dir)
        self.checkpoint_every = checkpoint_every
        self.checkpoint_seconds = checkpoint_seconds
        self.sinks = list(sinks)
        self._writers = [as_writer(s) for s in self.sinks]
        self.serve_options: dict = {}
        self.config_id = fingerprint(config_id)
        # the Monitor and its checkpoint file; alert transitions go to the delivery queue
        self.pipeline = Pipeline(
            monitor, sinks=[self._on_alert], checkpoint_every=None, kind=CHECKPOINT_KIND,
            fingerprint=self.config_id,
            checkpoint=None if self.state_dir is None else self.state_dir / CHECKPOINT_FILE)
        self._clock = clock
        self._synchronous = synchronous
        self._lock = threading.Lock()  # the Monitor, the sequence and the counters
        self._db_lock = threading.Lock()  # the write-ahead log's connection
        self._ckpt_lock = threading.Lock()  # one checkpoint at a time
        self._durable_cv = threading.Condition()  # group commit
        self._durable = 0  # last batch made durable by a log commit
        self._appended = 0  # last batch appended to the log (under _db_lock)
        self._committing = False
        self._closed = False
        self.failed: str | None = None  # why the log failed (the engine then refuses events)
        self._seq = 0  # last applied batch
        self._acked = 0  # events acknowledged since start (plus replayed ones)
        self._ckpt_seq = 0
        self._ckpt_acked = 0
        self._ckpt_time = clock()
        self._ckpt_count = 0
        self.replayed = (0, 0)  # (batches, events) replayed from the WAL at start
        self.max_future = max_future
        self.stats = {"batches": 0, "events": 0, "rejected_requests": 0, "alerts": 0,
                      "sink_errors": 0, "future_events": 0, "checkpoint_errors": 0}
        self.checkpoint_error: str | None = None  # why the last checkpoint failed
        self.export_errors: dict = {}  # route -> why its last rendering failed
        self.started = clock()
        self._wal = None
        self._outbox: queue.Queue = queue.Queue()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def monitor(self):
        """The Monitor (the checkpoint's after a restart)."""
        return self.pipeline.monitor

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
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            # a file can be created and synced there (the checkpoint's temporary file)
            fd, probe = tempfile.mkstemp(dir=self.state_dir, prefix=".probe.")
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(probe)
            # the log first: it refuses another configuration with StateMismatch
            self._wal = WriteAheadLog(self.state_dir / WAL_FILE, self.config_id,
                                      self._synchronous)
        except (OSError, sqlite3.Error) as e:
            raise StateDirError(_unusable(self.state_dir, e)) from None
        try:
            ckpt = self.pipeline.resume()
        except (OSError, sqlite3.Error) as e:
            self._wal.close()
            raise StateDirError(_unusable(self.state_dir, e)) from None
        except BaseException:
            self._wal.close()
            raise
        if ckpt is not None:
            self._seq = self._ckpt_seq = int(ckpt["seq"])
            self.stats.update(ckpt.get("stats", {}))
        self.pipeline.open()
        batches = events = 0
        for seq, batch in self._wal.after(self._seq):
            try:
                self._apply(batch)
            except ValueError as e:  # applied once, so only another streameval refuses it
                self._wal.close()
                raise ValueError(
                    f"{self.state_dir / WAL_FILE}: batch {seq} of the write-ahead log is "
                    f"refused on replay ({e}); was the state written by another version?"
                ) from None
            self._seq = seq
            batches += 1
            events += len(batch)
        self.stats["batches"] += batches
        self.stats["events"] += events
        self._wal.truncate_through(self._ckpt_seq)
        self.replayed = (batches, events)
        self._durable = self._appended = self._seq
        self._acked = events
        self._ckpt_acked = 0

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
        if error is not None:  # closed all the same; the caller learns why
            raise error

    # ------------------------------------------------------------------ ingestion
    def ingest_body(self, body: bytes, content_type: str | None = None) -> dict:
        """Decode a request body (:func:`decode_events`) and :meth:`ingest` it."""
        try:
            events = decode_events(body, content_type)
        except BadRequest:
            self._count_rejected()
            raise
        return self.ingest(events)

    def ingest(self, events: list) -> dict:
        """Validate and apply a batch of event dicts, all or nothing.

        Returns ``{"accepted", "n", "seq"}``; raises :class:`BadRequest` (naming the
        first bad event) with nothing applied, or :class:`Unavailable`.
        """
        try:
            batch = self._validate(events)
        except BadRequest:
            self._count_rejected()
            raise
        n = len(batch)
        with self._lock:
            if self._closed or self.failed:
                raise Unavailable(self.failed or "the service is shutting down")
            if n == 0:
                return {"accepted": 0, "n": self.monitor.n, "seq": self._seq}
            try:
                self._apply(batch)  # validates the whole batch before changing anything
            except ValueError as e:
                self.stats["rejected_requests"] += 1  # under the lock already
                # validation errors carry the event's index; one without it names none
                raise BadRequest(str(e), index=getattr(e, "index", None)) from None
            except BaseException as e:  # a bug half-way: the memory state is suspect
                self._fail(f"the Monitor failed on a batch: {e!r}")
                raise
            seq = self._seq = self._seq + 1
            if self._wal is not None:
                try:
                    with self._db_lock:
                        self._wal.append(seq, batch)
                        self._appended = seq
                except Exception as e:
                    self._fail(f"could not write the write-ahead log: {e}")
                    raise Unavailable(self.failed) from e
            self._acked += n
            self.stats["batches"] += 1
            self.stats["events"] += n
            total = self.monitor.n
            due = self.checkpoint_every is not None and (
                self._acked - self._ckpt_acked >= self.checkpoint_every
            )
        if self._wal is not None:
            self._make_durable(seq)
        if due:
            self._wake.set()
        return {"accepted": n, "n": total, "seq": seq}

    def _count_rejected(self) -> None:
        with self._lock:
            self.stats["rejected_requests"] += 1

    def _make_durable(self, seq: int) -> None:
        """Return once a log commit covers batch ``seq`` (group commit: one caller
        commits for everyone waiting, the others wait for it)."""
        cv = self._durable_cv
        with cv:
            while self._durable < seq:
                if self.failed:
                    raise Unavailable(self.failed)
                if not self._committing:
                    self._committing = True
                    break
                cv.wait()
            else:
                return
        covered = 0
        try:
            with self._db_lock:
                covered = self._appended  # every row up to it is in the transaction
                self._wal.commit()
        except Exception as e:
            self._fail(f"could not sync the write-ahead log: {e}")
            covered = 0
        finally:
            with cv:
                self._committing = False
                self._durable = max(self._durable, covered)
                cv.notify_all()
        if self.failed:
            raise Unavailable(self.failed)

    def _fail(self, reason: str) -> None:
        """Stop accepting events: the memory state may hold batches the log has not."""
        if self.failed is None:
            self.failed = reason + "; restart the service (it recovers the acknowledged events)"
        with self._durable_cv:
            self._durable_cv.notify_all()

    def _validate(self, events) -> Batch:
        try:
            eb = events_to_batch(events, self.fields)
        except EventError as e:
            raise BadRequest(e.reason, index=e.index) from None
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
        return Batch(eb.label, eb.score, w, ts, eb.segment)

    def _apply(self, batch: Batch) -> None:
        # "is positive" bools: the Monitor reads them as its own labels ("spam"/"ham")
        self.pipeline.feed(batch)

    # ------------------------------------------------------------------ reading
    def snapshot(self) -> dict:
        """The Monitor's snapshot plus a ``service`` section (counters, checkpoint)."""
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
        ``checkpoint_error`` why the last checkpoint attempt failed (None once one
        succeeds); ``export_errors`` maps ``/metrics`` or ``/snapshot`` to why its last
        rendering failed (removed once one succeeds).
        """
        return {"n": self.monitor.n, "seq": self._seq, "checkpoint_seq": self._ckpt_seq,
                "durable": self._wal is not None, "closed": self._closed, "failed": self.failed,
                "checkpoint_error": self.checkpoint_error,
                "checkpoint_errors": self.stats["checkpoint_errors"],
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
        return {
            "seq": self._seq,
            "checkpoint_seq": self._ckpt_seq,
            "checkpoints": self._ckpt_count,
            "last_checkpoint": self._ckpt_time,
            "events_since_checkpoint": self._acked - self._ckpt_acked,
            "replayed_batches": self.replayed[0],
            "replayed_events": self.replayed[1],
            "started": self.started,
            "durable": self._wal is not None,
            **self.stats,
        }

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self) -> bool:
        """Write the whole state atomically and drop the log rows it covers.

        Returns False when nothing changed since the last checkpoint (or there is no
        state directory, or the engine has failed). Runtime complexity: `O(size of the
        Monitor's state)`; the state is serialised under the ingestion lock, written
        outside it. A failure is counted in ``stats["checkpoint_errors"]``, kept as
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
        with self._ckpt_lock:
            with self._lock:
                seq = self._seq
                if self.failed:  # the memory state may hold batches that were refused a 200
                    return False
                if seq == self._ckpt_seq and (self.state_dir / CHECKPOINT_FILE).exists():
                    return False
                acked = self._acked
                stats = dict(self.stats)
                # serialised under the lock: the live Monitor cannot change the copy that
                # is written outside it
                text = json.dumps(self.pipeline.state(), separators=(",", ":"))
            state = {"seq": seq, "stats": stats, **json.loads(text)}
            self.pipeline.save(state)
            with self._lock:
                if self._wal is not None:
                    with self._db_lock:
                        self._wal.truncate_through(seq)
                self._ckpt_seq = seq
                self._ckpt_acked = acked
                self._ckpt_time = self._clock()
                self._ckpt_count += 1
        return True

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


def _unusable(state_dir: Path, e: BaseException) -> str:
    """One line: the state directory and why it cannot be used."""
    reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    where = getattr(e, "filename", None) or (
        state_dir / WAL_FILE if isinstance(e, sqlite3.Error) else None)
    what = "" if where is None or Path(where) == state_dir else f" ({where})"
    return f"state directory {state_dir}: cannot be used{what}: {reason}"


def _fields_for(monitor) -> FieldMap:
    """The default event fields, with the Monitor's labels and its ``group_by`` as the
    segment field; events without an event time get the time of arrival."""
    return FieldMap(segment=monitor.group_by, pos_label=monitor.pos_label,
                    neg_label=monitor.neg_label, require_ts=False)
