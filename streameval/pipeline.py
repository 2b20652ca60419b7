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

A source is any iterable of :class:`~streameval.events.EventBatch` objects; to be
resumed it also has ``to_state()``, ``restore(state)`` and ``counts()`` (rows read,
rows rejected, ...), and a ``rejected`` attribute (callback of bad rows).

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

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from streameval.io.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from streameval.io.sinks import JsonlSink, rejected_callback
from streameval.validation import Integer, check_param

__all__ = ["Pipeline", "COUNTS", "DEFAULT_CHECKPOINT_EVERY", "CheckpointError", "as_writer"]

#: checkpoint every 100 000 events: a checkpoint of the default monitor costs a few
#: tens of ms (its sorted score stores), so this keeps the overhead near 1% while a
#: resume redoes at most a fraction of a second of work
DEFAULT_CHECKPOINT_EVERY = 100_000

#: the counters of a run (:meth:`Pipeline.counts`)
COUNTS = ("rows", "events", "rejected", "expired", "orphans", "unlabeled")

#: the JSONL outputs a pipeline can own, and where each is connected
OUTPUTS = ("metrics", "alerts", "rejected")


class Pipeline:
    """Feed a source's batches to a Monitor; write sinks; checkpoint; resume.

    Runtime complexity: `O(rows)` reading plus the Monitor's cost per event, plus
    `O(size of the state)` per checkpoint.

    Parameters
    ----------
    monitor : Monitor
        The monitor (replaced by the checkpoint's on :meth:`resume`).
    source : iterable of EventBatch, optional
        None: batches come through :meth:`feed` only.
    outputs : dict, optional
        JSONL files this pipeline writes, by role: ``"metrics"`` (the Monitor's rows),
        ``"alerts"`` (its alert transitions), ``"rejected"`` (the source's bad rows).
        Opened fresh, or, after a resume, cut back to the sizes in the checkpoint.
    sinks : sequence
        More receivers of alert transitions: io sinks (with ``write``) or callables.
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
    """

    def __init__(self, monitor, source=None, *, outputs: dict | None = None, sinks=(),
                 checkpoint: str | os.PathLike | None = None,
                 checkpoint_every: int | None = DEFAULT_CHECKPOINT_EVERY, kind: str = "replay",
                 fingerprint: str | None = None,
                 on_batch: Callable[["Pipeline", Any], Any] | None = None) -> None:
        checkpoint_every = check_param("checkpoint_every", checkpoint_every,
                                       Integer(1, allow_none=True))
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

    # ------------------------------------------------------------------ resume
    def resume(self) -> dict | None:
        """Load the checkpoint if there is one; restore the Monitor, the source's
        position, the counters and the output sizes. Returns the checkpoint's state
        (None: no checkpoint, a fresh start).

        Raises :class:`~streameval.io.CheckpointError` for a damaged checkpoint or one
        of another kind or configuration, and ``KeyError``/``TypeError``/``ValueError``
        for a state this pipeline cannot use.
        """
        if self._opened:
            raise RuntimeError("resume() must come before the pipeline is opened")
        if self.checkpoint_path is None:
            return None
        try:
            state = load_checkpoint(self.checkpoint_path, expected_kind=self.kind,
                                    expected_fingerprint=self.fingerprint)
        except FileNotFoundError:
            return None
        monitor = type(self.monitor).from_state(state["monitor"])
        if self.source is not None:
            counts = {k: state["counts"][k] for k in state["counts"]}
            self.source.restore(state["source"])
            offsets = {k: int(v) for k, v in state["outputs"].items()} if self.outputs else None
            self._base.update(counts)
            self._offsets = offsets
            self._source0 = self._source_counts()
            self.done = bool(state.get("done"))
        self.monitor = monitor
        self.resumed = True
        return state

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
        if "rejected" in self._writers and self.source is not None:
            self.source.rejected = rejected_callback(self._writers["rejected"])

    def close(self) -> None:
        """Close the outputs this pipeline opened (not the other sinks)."""
        for w in self._writers.values():
            w.close()

    # ------------------------------------------------------------------ running
    def feed(self, batch) -> None:
        """Give one validated batch (``label`` "is positive" bools, ``score``,
        ``weight``, ``ts``, ``segment``) to the Monitor, all or nothing.

        Weights all 1 are passed as None and event times all unknown (NaN) as None,
        so the Monitor takes its fast paths. ``ValueError`` (with ``index`` when the
        Monitor names one) if the Monitor refuses the batch; nothing is counted then.
        """
        if not self._opened:
            self.open()
        w = batch.weight
        if w is not None and not (w != 1.0).any():
            w = None
        ts = batch.ts
        if ts is not None and ts.dtype.kind == "f" and np.isnan(ts).all():
            ts = None  # a log without event times
        self.monitor.update_many(batch.label, batch.score, w, ts, batch.segment)

    def run(self) -> dict:
        """Feed the whole source, checkpointing on the way; return :meth:`counts`.

        A run resumed from a finished checkpoint reads nothing. After the source ends
        the Monitor is flushed (its last rows written) and the final checkpoint saved.
        """
        if self.source is None:
            raise ValueError("this pipeline has no source; give it batches with feed()")
        if not self._opened:
            if not self.resumed and self.checkpoint_path is not None:
                self.resume()
            self.open()
        try:
            if not self.done:
                self._loop()
        finally:
            self.close()
        return self.counts()

    def _loop(self) -> None:
        every = self.checkpoint_every or DEFAULT_CHECKPOINT_EVERY
        ckpt = self.checkpoint_path is not None
        next_ckpt = (self.monitor.n // every + 1) * every if ckpt else None
        on_batch = self.on_batch
        feed = self.feed
        for batch in self.source:
            feed(batch)
            if on_batch is not None and on_batch(self, batch) is False:
                self.stopped = True
                return
            if ckpt and self.monitor.n >= next_ckpt:
                self.checkpoint()
                next_ckpt = (self.monitor.n // every + 1) * every
        self.monitor.flush()
        self.done = True
        if ckpt:
            self.checkpoint(done=True)

    # ------------------------------------------------------------------ state
    def _source_counts(self) -> dict:
        counts = getattr(self.source, "counts", None)
        return dict(counts()) if callable(counts) else {}

    def counts(self) -> dict:
        """``{"rows", "events", "rejected", "expired", "orphans", "unlabeled"}`` since
        the start of the run, across resumes."""
        c = dict(self._base)
        now = self._source_counts()
        for k, v in now.items():
            c[k] = c.get(k, 0) + v - self._source0.get(k, 0)
        c["events"] = self.monitor.n
        return c

    def state(self, done: bool = False) -> dict:
        """The checkpoint state: the Monitor's, plus, with a source, its position, the
        output sizes, the counters and whether the run is done."""
        state: dict = {"monitor": self.monitor.to_state()}
        if self.source is not None:
            state["source"] = self.source.to_state()
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
        save_checkpoint(self.checkpoint_path, state, kind=self.kind, fingerprint=self.fingerprint)


def as_writer(sink):
    """A callable taking one transition: ``sink.write`` for io sinks, else ``sink``
    (the pipeline's alert sinks, and the service engine's)."""
    write = getattr(sink, "write", None)
    if callable(write):
        return write
    if callable(sink):
        return sink
    raise ValueError(f"alert sink {sink!r} is neither callable nor has write()")
