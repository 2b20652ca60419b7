"""One pipeline: source -> (delayed-label join) -> Monitor -> sinks -> checkpoints.

This module holds :class:`Pipeline`, the one loop that feeds validated batches to a
:class:`~streameval.monitor.Monitor`, writes its rows and alert transitions to sinks,
saves checkpoints and resumes from them. The CLI's ``replay`` and ``run`` and the
service's engine configure it rather than re-implement it:

* ``streameval replay`` / ``run``: a file source (:class:`streameval.io.EventSource`,
  or :class:`streameval.io.DelayedSource` for the delayed-label join), JSONL outputs cut
  back to the checkpoint on resume, a checkpoint every N events;
* the service: no source (HTTP batches are given to :meth:`Pipeline.feed`), its own
  write-ahead log around it, :meth:`Pipeline.save` for its checkpoints.

It may import :mod:`streameval.monitor`, :mod:`streameval.io`, :mod:`streameval.validation`,
:mod:`streameval.events` and :mod:`streameval.config`; ``cli`` and ``service``
import it, never the reverse.

A source is any iterable of :class:`~streameval.events.Batch` objects; to be
resumed it also has ``to_state()``, ``restore(state)`` and ``counts()`` (rows read,
rows rejected, ...), and a ``rejected`` attribute (callback of bad rows); optionally
``fields`` (its :class:`~streameval.events.FieldMap`, for messages), ``on_error`` and
``raw(line)`` (the raw row of a line of the batch it yielded last). A source may
end when asked to rather than at the end of its data (a followed file,
``EventSource(..., follow=...)``): the run then ends as at the end of a log.

The end of a run is resumable too. The last checkpoint (``"done": true``) holds the
state *before* the Monitor's final flush (its last evaluation) and the output sizes
before the rows of that flush: resuming it reads on from where the source ended (a
log that grew since, a followed file restarted), then flushes again. A log that did
not grow gives the same outputs again, byte for byte; one that grew gives those of
one uninterrupted run over the whole of it.

Rows the Monitor refuses. The source validates each row (:class:`~streameval.events.Batch`),
and the Monitor adds its own checks once (:meth:`Monitor.admit
<streameval.monitor.Monitor.admit>`: a score outside a probability metric's range, an event
time missing where the monitor needs one, a segment value it cannot key). A batch goes
in as ``monitor.apply(monitor.admit(batch))``, all or nothing. When ``admit`` refuses it,
:meth:`Pipeline.take` asks the Monitor which rows it refuses and why
(:meth:`Monitor.refused <streameval.monitor.Monitor.refused>`), and, with
``on_error="skip"``, sends those rows to the ``rejected`` callback (its line, the reason
naming the log's field and the value, its raw row) and feeds the other rows of the batch,
in order: the Monitor's state and rows are those of the log without the refused rows.
With ``on_error="fail"`` the run stops with an :class:`~streameval.events.EventError`
naming the first refused row's line. Finding the refused rows of a batch of `m` costs
`O(m)` numpy work per check, plus a few calls per refused row.

>>> import json, os, tempfile
>>> from streameval.io import EventSource
>>> from streameval.monitor import Monitor
>>> d = tempfile.mkdtemp(); log = os.path.join(d, "log.jsonl")
>>> _ = open(log, "w").write("".join(
...     json.dumps({"ts": i, "label": i % 3 == 0, "score": (i % 7) / 7}) + "\\n" for i in range(50)))
>>> p = Pipeline(Monitor.default(), EventSource(log), outputs={"metrics": os.path.join(d, "m.jsonl")})
>>> counts = p.run()
>>> counts["events"], counts["rows"], p.monitor.n
(50, 50, 50)
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from streameval.events import EventError
from streameval.io.checkpoint import (
    CheckpointError,
    CheckpointFallback,
    load_checkpoint,
    previous_path,
    read_checkpoint,
    save_checkpoint,
)
from streameval.io.statefile import StateWriter
from streameval.io.follow import LogChangedError
from streameval.io.sinks import JsonlSink, rejected_callback
from streameval.validation import Integer, ValidationError, check_param

__all__ = ["Pipeline", "COUNTS", "DEFAULT_CHECKPOINT_EVERY", "CheckpointError", "as_writer",
           "refusal_reason", "field_name"]

#: checkpoint every 100 000 events: a checkpoint of the default monitor costs a few
#: tens of ms (its sorted score stores), so this keeps the overhead near 1% while a
#: resume redoes at most a fraction of a second of work
DEFAULT_CHECKPOINT_EVERY = 100_000

#: the counters of a run (:meth:`Pipeline.counts`)
COUNTS = ("rows", "events", "rejected", "expired", "orphans", "unlabeled", "future",
          "other_events")

#: the JSONL outputs a pipeline can own, and where each is connected
OUTPUTS = ("metrics", "alerts", "rejected")

logger = logging.getLogger("streameval.pipeline")

#: the Monitor's argument names -> the FieldMap attribute naming the log's field
_ARG_FIELDS = {"y_true": "label", "y_pred": "score", "w": "weight", "t": "ts", "segment": "segment"}


def field_name(arg: str, fields=None) -> str:
    """The log's name of a Monitor argument: ``"y_pred"`` -> the score field of
    ``fields`` (a :class:`~streameval.events.FieldMap`, or None: the default names
    ``label``, ``score``, ``weight``, ``ts``; the segment: its ``group_by`` fields
    joined by commas). Any other name is returned as it is.

    >>> field_name("y_pred"), field_name("t"), field_name("segment")
    ('score', 'ts', 'segment')
    """
    key = _ARG_FIELDS.get(arg)
    if key is None:
        return arg
    if key == "segment":
        names = getattr(fields, "segment_fields", ()) if fields is not None else ()
        return ",".join(names) or "segment"
    return (getattr(fields, key, None) if fields is not None else None) or key


def refusal_reason(err: ValueError, fields=None) -> str:
    """The reason a replay gives for a row the Monitor refuses (``rejected.jsonl``'s
    ``reason``), from the error :meth:`Monitor.refused
    <streameval.monitor.Monitor.refused>` gives it: the Monitor's message with the log's
    field name (:func:`field_name` of ``fields``) instead of the argument and the batch
    index (``y_pred[7] = 1.5: ...`` -> ``score = 1.5: ...``), an ``event 7: `` prefix
    dropped, and a missing event time said as missing (``ts is missing: ...``). Any
    other error gives its message unchanged. The single-process and Spark replays both
    use it, so their reasons are the same word for word.

    >>> from streameval.validation import ValidationError
    >>> refusal_reason(ValidationError("y_pred", 1.5, "probability must be in [0, 1]", 7))
    'score = 1.5: probability must be in [0, 1]'

    Runtime complexity: `O(length of the message)`.
    """
    if isinstance(err, ValidationError) and err.name == "t" and isinstance(
            err.value, float) and err.value != err.value:
        return f"{field_name('t', fields)} is missing: {err.reason}"
    msg = str(err)
    if isinstance(err, ValidationError) and err.index is not None:
        head = f"{err.name}[{err.index}]"
        if err.name is not None and msg.startswith(head):
            return field_name(err.name, fields) + msg[len(head):]
        head = f"event {err.index}: "
        if msg.startswith(head):
            return msg[len(head):]
    return msg


class Pipeline:
    """Feed a source's batches to a Monitor; write sinks; checkpoint; resume.

    Runtime complexity: `O(rows)` reading plus the Monitor's cost per event, plus
    `O(size of the state)` per checkpoint.

    Parameters
    ----------
    monitor : Monitor
        The monitor (replaced by the checkpoint's on :meth:`resume`).
    source : iterable of Batch, optional
        None: batches come through :meth:`feed` only.
    outputs : dict, optional
        JSONL files this pipeline writes, by role: ``"metrics"`` (the Monitor's rows),
        ``"alerts"`` (its alert transitions), ``"rejected"`` (the source's bad rows).
        Opened fresh, or, after a resume, cut back to the sizes in the checkpoint.
    sinks : sequence
        More receivers of alert transitions: io sinks (with ``write``) or callables; a
        sink with an ``on_row`` method receives the metrics rows there too.
    checkpoint : str or Path, optional
        Checkpoint file; :meth:`resume` reads it, :meth:`run` saves it every
        ``checkpoint_every`` events (at the end of the batch that reaches it) and at
        the end.
    kind, fingerprint : optional
        The checkpoint's kind and the fingerprint of the configuration it belongs to
        (:func:`streameval.io.fingerprint`); another one is refused on resume.
    on_batch : callable, optional
        ``on_batch(pipeline, batch)`` after each batch was fed (its rows written) and
        before its checkpoint. Returning False stops the run there, as a kill would
        (no final flush, no checkpoint); an exception propagates the same way.
    on_error : {"fail", "skip"}, optional
        What :meth:`run` does with a row the Monitor refuses (see the module
        docstring): stop with an :class:`~streameval.events.EventError` naming its
        line, or send it to the source's ``rejected`` callback, count it in
        ``rejected`` and go on. Default: the source's ``on_error``, else "fail".
    checkpoint_format : {"binary", "json"}, optional
        How checkpoints are written: "binary" (default; a JSON manifest and packs of
        numpy arrays, each checkpoint writing what changed since the last, see
        :mod:`streameval.io.statefile`) or "json" (one JSON file, the whole state each
        time). :meth:`resume` reads both.
    """

    def __init__(self, monitor, source=None, *, outputs: dict | None = None, sinks=(),
                 checkpoint: str | os.PathLike | None = None,
                 checkpoint_every: int | None = DEFAULT_CHECKPOINT_EVERY, kind: str = "replay",
                 fingerprint: str | None = None,
                 on_batch: Callable[["Pipeline", Any], Any] | None = None,
                 on_error: str | None = None, checkpoint_format: str = "binary") -> None:
        checkpoint_every = check_param("checkpoint_every", checkpoint_every,
                                       Integer(1, allow_none=True))
        if checkpoint_format not in ("binary", "json"):
            raise ValueError(f"checkpoint_format = {checkpoint_format!r}: expected 'binary' "
                             "or 'json'")
        if on_error is None:
            on_error = getattr(source, "on_error", "fail")
        if on_error not in ("fail", "skip"):
            raise ValueError(f"on_error = {on_error!r}: expected 'fail' or 'skip'")
        self.on_error = on_error
        self.n_refused = 0  # rows the Monitor refused (skip), since the start or resume
        outputs = dict(outputs or {})
        unknown = sorted(set(outputs) - set(OUTPUTS))
        if unknown:
            raise ValueError(f"outputs: unknown role(s) {unknown}; expected {list(OUTPUTS)}")
        self.monitor = monitor
        self.source = source
        self.outputs = {k: Path(v) for k, v in outputs.items()}
        self.sinks = list(sinks)
        self.checkpoint_path = None if checkpoint is None else Path(checkpoint)
        self.checkpoint_every = checkpoint_every
        self.kind = kind
        self.fingerprint = fingerprint
        self.on_batch = on_batch
        self.resumed = False
        self.done = False
        self.stopped = False
        self._writers: dict[str, JsonlSink] = {}
        self._offsets: dict | None = None
        self._base = dict.fromkeys(COUNTS, 0)
        self._source0 = self._source_counts()
        self._opened = False
        self.checkpoint_format = checkpoint_format
        self._writer = None

    # ------------------------------------------------------------------ resume
    def resume(self) -> dict | None:
        """Load the checkpoint if there is one; restore the Monitor, the source's
        position, the counters and the output sizes. Returns the checkpoint's state
        (None: no checkpoint, a fresh start).

        Raises :class:`~streameval.io.CheckpointError` for a damaged checkpoint, one
        of another kind or configuration, or one taken from a log that was truncated
        or rewritten since (the source's
        :class:`~streameval.io.follow.LogChangedError`), and
        ``KeyError``/``TypeError``/``ValueError`` for a state this pipeline cannot use.
        """
        if self._opened:
            raise RuntimeError("resume() must come before the pipeline is opened")
        if self.checkpoint_path is None:
            return None
        try:
            state = load_checkpoint(self.checkpoint_path, expected_kind=self.kind,
                                    expected_fingerprint=self.fingerprint,
                                    writer=self._state_writer())
        except FileNotFoundError:
            return None
        try:
            monitor, counts = self._restored(state)
        except ValueError as e:
            monitor, counts, state = self._restore_previous(e)
        if self.source is not None:
            try:
                self.source.restore(state["source"])
            except LogChangedError as e:
                what = ("was taken from a log whose last line was being written"
                        if e.kind == "partial" else "was taken from another log")
                raise CheckpointError(self.checkpoint_path, f"{what}: {e}; remove the "
                                      "checkpoint to replay the log from the start") from None
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                raise CheckpointError(self.checkpoint_path, f"malformed source position: "
                                      f"{type(e).__name__}: {e!s:.200}; remove the checkpoint "
                                      "to replay the log from the start") from None
            offsets = {k: int(v) for k, v in state["outputs"].items()} if self.outputs else None
            self._base.update(counts)
            self._offsets = offsets
            self._source0 = self._source_counts()
            self.done = bool(state.get("done"))
        self.monitor = monitor
        self.resumed = True
        return state

    def _restored(self, state):
        """The Monitor and counters of a loaded checkpoint state, every part checked:
        ``ValueError`` naming what is malformed (a count that is not an int, a missing
        key, wrong types or arrays), never another exception."""
        if not isinstance(state, dict) or "monitor" not in state:
            raise ValueError("the state has no 'monitor'")
        cls = type(self.monitor)
        load = getattr(cls, "from_array_state", None) or cls.from_state
        try:
            monitor = load(state["monitor"])
        except ValueError:
            raise
        except (TypeError, KeyError, AttributeError, IndexError, OverflowError,
                RecursionError) as e:
            raise ValueError(f"bad Monitor state: {type(e).__name__}: {e!s:.200}") from None
        counts = None
        if self.source is not None:
            counts = state.get("counts")
            if not isinstance(counts, dict):
                raise ValueError(f"counts = {counts!r:.60} is not an object")
            for k, v in counts.items():
                if k == "warnings":
                    if not isinstance(v, list):
                        raise ValueError(f"counts.warnings = {v!r:.60} is not a list")
                elif k == "missing_segment_fields":  # {field: events without a value}
                    if not isinstance(v, dict) or not all(
                            isinstance(f, str) and type(c) is int and c >= 0
                            for f, c in v.items()):
                        raise ValueError(f"counts.missing_segment_fields = {v!r:.60} is not "
                                         "an object of counts")
                elif type(v) is not int or v < 0:
                    raise ValueError(f"counts.{k} = {v!r:.60} is not an int >= 0")
            if counts.get("events", monitor.n) != monitor.n:
                raise ValueError(f"counts.events = {counts['events']} but the Monitor "
                                 f"counted {monitor.n}")
            outputs = state.get("outputs")
            if not isinstance(outputs, dict) or not all(
                    type(v) is int and v >= 0 for v in outputs.values()):
                raise ValueError(f"outputs = {outputs!r:.60} is not an object of sizes")
            if not isinstance(state.get("source"), dict) or not isinstance(
                    state.get("done", False), bool):
                raise ValueError("source must be an object and done a bool")
        return monitor, counts

    def _restore_previous(self, error):
        """The newest checkpoint is sound as a file but its state is malformed: restore
        the previous generation instead (a :class:`CheckpointFallback` warning), or raise
        :class:`CheckpointError` naming both and the next step."""
        path = self.checkpoint_path
        prev = previous_path(path)
        try:
            state = read_checkpoint(prev, expected_kind=self.kind,
                                    expected_fingerprint=self.fingerprint,
                                    writer=self._state_writer())
            monitor, counts = self._restored(state)
        except FileNotFoundError:
            raise CheckpointError(path, f"malformed state: {error}; no previous generation "
                                  f"({prev}) to fall back to: remove the checkpoint to "
                                  "replay the log from the start", damaged=True) from None
        except (CheckpointError, ValueError) as e:
            raise CheckpointError(path, f"malformed state: {error}; its previous generation "
                                  f"{prev} is unusable too ({e}): remove both to replay the "
                                  "log from the start", damaged=True) from None
        aside = str(path) + ".damaged"
        try:
            os.replace(path, aside)
        except OSError:
            aside = None
        warnings.warn(CheckpointFallback(
            f"checkpoint {path}: malformed state: {error}; loaded its previous generation "
            f"{prev} instead" + (f" (the damaged file is kept as {aside})" if aside else "")),
            stacklevel=3)
        return monitor, counts, state

    def _state_writer(self):
        """The binary checkpoint writer of this pipeline's checkpoint file (one per
        pipeline: it remembers what it wrote, so checkpoints are incremental)."""
        if self._writer is None and self.checkpoint_path is not None:
            self._writer = StateWriter(self.checkpoint_path)
        return self._writer

    def open(self) -> None:
        """Open the outputs (fresh, or cut back to the checkpoint) and connect them and
        the sinks to the Monitor and the source. ``ValueError`` if an output is shorter
        than the checkpoint says."""
        if self._opened:
            return
        for role, path in self.outputs.items():
            if self._offsets is None:
                self._writers[role] = JsonlSink(path, mode="w")
            else:
                self._writers[role] = JsonlSink(path, truncate_at=int(self._offsets.get(role, 0)))
        self._opened = True
        m = self.monitor
        if "metrics" in self._writers:
            m.on_metrics.append(self._writers["metrics"].write)
        if "alerts" in self._writers:
            m.on_alert.append(self._writers["alerts"].write)
        for sink in self.sinks:
            m.on_alert.append(as_writer(sink))
            if callable(getattr(sink, "on_row", None)):  # a sink of metrics rows too
                m.on_metrics.append(sink.on_row)
        if "rejected" in self._writers and self.source is not None:
            self.source.rejected = rejected_callback(self._writers["rejected"])

    def close(self) -> None:
        """Close the outputs this pipeline opened (not the other sinks)."""
        for w in self._writers.values():
            w.close()

    # ------------------------------------------------------------------ running
    def feed(self, batch) -> None:
        """Give one validated :class:`~streameval.events.Batch` to the Monitor, all or
        nothing: ``monitor.apply(monitor.admit(batch))``.

        ``ValueError`` (a :class:`~streameval.validation.ValidationError` with ``index``)
        if the Monitor refuses the batch; nothing is counted then.
        """
        if not self._opened:
            self.open()
        monitor = self.monitor
        monitor.apply(monitor.admit(batch))

    def apply(self, admitted) -> None:
        """Give the Monitor a batch it admitted already (:meth:`Monitor.admit
        <streameval.monitor.Monitor.admit>`, maybe on an earlier state: the service
        admits a batch when it arrives and applies it once it is durable)."""
        if not self._opened:
            self.open()
        self.monitor.apply(admitted)

    def run(self) -> dict:
        """Feed the whole source, checkpointing on the way; return :meth:`counts`.

        After the source ends the final checkpoint is saved (the state before the
        flush, see the module docstring), then the Monitor is flushed (its last rows
        written). A run resumed from a finished checkpoint reads on from where the
        source ended (nothing, unless the log grew) and flushes again.
        """
        if self.source is None:
            raise ValueError("this pipeline has no source; give it batches with feed()")
        if not self._opened:
            if not self.resumed and self.checkpoint_path is not None:
                self.resume()
            self.open()
        try:
            self._loop()
        finally:
            self.close()
        return self.counts()

    def _loop(self) -> None:
        every = self.checkpoint_every or DEFAULT_CHECKPOINT_EVERY
        ckpt = self.checkpoint_path is not None
        next_ckpt = (self.monitor.n // every + 1) * every if ckpt else None
        on_batch = self.on_batch
        take = self.take
        for batch in self.source:
            take(batch)
            if on_batch is not None and on_batch(self, batch) is False:
                self.stopped = True
                return
            if ckpt and self.monitor.n >= next_ckpt:
                self.checkpoint()
                next_ckpt = (self.monitor.n // every + 1) * every
        self.done = True
        if ckpt:  # before the flush: a resume reads on (the log may grow), then flushes
            self.checkpoint(done=True)
        self.monitor.flush()

    # ------------------------------------------------------------------ refusals
    def take(self, batch) -> None:
        """Feed a batch of the source as :meth:`run` does: all of it at once, or, if the
        Monitor refuses some of its rows, the others (``on_error="skip"``: the refused
        rows go to the source's ``rejected`` callback; ``"fail"``: the first one raises
        an :class:`~streameval.events.EventError` naming its line). The Structured
        Streaming sink feeds its micro-batches this way."""
        monitor = self.monitor
        n = monitor.n
        try:
            self.feed(batch)
            return
        except ValueError as e:
            _all_or_nothing(monitor, n, batch, e)
            err = e
        refused = monitor.refused(batch)
        if not refused:  # refused for a reason admit() does not name per row
            raise err
        reasons = [(j, self._refusal(e)) for j, e in refused]
        if self.on_error != "skip":
            j, reason = reasons[0]
            raise EventError(reason, line=int(batch.line[j]), raw=self._raw(batch, j)) from None
        keep = np.ones(len(batch), bool)
        keep[[j for j, _ in refused]] = False
        if keep.any():
            rest = batch.select(keep)
            try:
                monitor.apply(monitor.admit(rest))
            except ValueError as e:
                _all_or_nothing(monitor, n, batch, e)
                raise
        self._refuse(batch, reasons)

    def _refusal(self, err: ValueError) -> str:
        """The reason of a row the Monitor refuses, in the log's words
        (:func:`refusal_reason` with the source's field names)."""
        return refusal_reason(err, getattr(self.source, "fields", None))

    def _field(self, arg: str) -> str:
        """The log's name of a Monitor argument (:func:`field_name`)."""
        return field_name(arg, getattr(self.source, "fields", None))

    def _raw(self, batch, j: int):
        """The raw row of event ``j`` of ``batch``: the source's (``raw(line)``), else
        the event's validated fields by the log's names."""
        line = int(batch.line[j])
        raw_of = getattr(self.source, "raw", None)
        raw = raw_of(line) if callable(raw_of) else None
        if raw is not None:
            return raw
        fm = getattr(self.source, "fields", None)
        name = self._field
        row = {}
        if not np.isnan(batch.ts[j]):
            row[name("t")] = float(batch.ts[j])
        label = bool(batch.label[j])
        row[name("y_true")] = label if fm is None else (fm.pos_label if label else fm.neg_label)
        row[name("y_pred")] = float(batch.score[j])
        row[name("w")] = 1.0 if batch.weight is None else float(batch.weight[j])
        if batch.id is not None and batch.id[j] is not None:
            row[(getattr(fm, "id", None) or "id")] = batch.id[j]
        if batch.segment is not None and batch.segment[j] is not None:
            row[name("segment")] = batch.segment[j]
        return row

    def _refuse(self, batch, refused: list) -> None:
        """Send refused rows ``[(row, reason)]`` to the source's ``rejected`` callback
        and count them."""
        cb = getattr(self.source, "rejected", None)
        for j, reason in refused:
            line = int(batch.line[j])
            self.n_refused += 1
            if cb is not None:
                cb(line, reason, self._raw(batch, j))
            else:
                logger.warning("rejected line %d: %s", line, reason)

    # ------------------------------------------------------------------ state
    def _source_counts(self) -> dict:
        counts = getattr(self.source, "counts", None)
        return dict(counts()) if callable(counts) else {}

    def counts(self) -> dict:
        """``{"rows", "events", "rejected", "expired", "orphans", "unlabeled", "future",
        "other_events", "missing_segment_fields", "warnings"}`` since the start of the
        run, across resumes (``future``: rows refused for a time beyond ``max_future``;
        ``other_events``: events of segment values past the Monitor's ``max_segments``;
        ``missing_segment_fields``: ``{field: events without a value for it}``;
        ``warnings``: the Monitor's, a list of messages, one per such field with its
        count among them)."""
        c = dict(self._base)
        now = self._source_counts()
        for k, v in now.items():
            c[k] = c.get(k, 0) + v - self._source0.get(k, 0)
        c["rejected"] = c.get("rejected", 0) + self.n_refused
        c["events"] = self.monitor.n
        # events of segment values past max_segments, counted under "__other__"
        c["other_events"] = getattr(self.monitor, "other_events", 0)
        # events without a value for a group_by field (by field), and what the Monitor
        # warned about (a group_by field without values, ...), counts included
        c["missing_segment_fields"] = dict(getattr(self.monitor, "missing_segment_fields", {}))
        seg_warnings = getattr(self.monitor, "segment_warnings", None)
        c["warnings"] = list(getattr(self.monitor, "warnings", ())) + (
            seg_warnings() if callable(seg_warnings) else [])
        return c

    def state(self, done: bool = False) -> dict:
        """The checkpoint state: the Monitor's, plus, with a source, its position, the
        output sizes, the counters and whether the source ended (``done``: this state
        is then the one before the final flush)."""
        to_arrays = getattr(self.monitor, "to_array_state", None)
        binary = self.checkpoint_format == "binary" and to_arrays is not None
        state: dict = {"monitor": to_arrays() if binary else self.monitor.to_state()}
        if self.source is not None:
            to_source_arrays = getattr(self.source, "to_array_state", None) if binary else None
            state["source"] = (to_source_arrays() if to_source_arrays is not None
                               else self.source.to_state())
            state["outputs"] = {k: w.offset for k, w in self._writers.items()}
            state["counts"] = self.counts()
            state["done"] = done
        return state

    def checkpoint(self, done: bool = False) -> None:
        """Save :meth:`state` atomically to the checkpoint file."""
        self.save(self.state(done))

    def save(self, state: dict) -> None:
        """Save a state (from :meth:`state`, possibly extended) as this pipeline's
        checkpoint, with its kind and fingerprint."""
        if self.checkpoint_path is None:
            raise ValueError("this pipeline has no checkpoint file")
        if self.checkpoint_format == "binary":
            self._state_writer().write(state, kind=self.kind, fingerprint=self.fingerprint)
        else:
            save_checkpoint(self.checkpoint_path, state, kind=self.kind,
                            fingerprint=self.fingerprint)


def _all_or_nothing(monitor, n: int, batch, err: BaseException) -> None:
    """Raise ``RuntimeError`` if the Monitor counted events of a batch it refused
    (``n``: its count before): its state is no longer that of any prefix of the log,
    and no row can be set aside (a sink that failed while writing, say)."""
    if monitor.n != n:
        raise RuntimeError(
            f"the Monitor counted {monitor.n - n} event(s) of a batch it refused (lines "
            f"{int(batch.line[0])}..{int(batch.line[-1])}): {type(err).__name__}: {err}") from err


def as_writer(sink):
    """A callable taking one transition: ``sink.write`` for io sinks, else ``sink``
    (the pipeline's alert sinks, and the service engine's)."""
    write = getattr(sink, "write", None)
    if callable(write):
        return write
    if callable(sink):
        return sink
    raise ValueError(f"alert sink {sink!r} is neither callable nor has write()")
