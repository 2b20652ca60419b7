"""A Structured Streaming ``foreachBatch`` sink that feeds a Monitor exactly once per
batch id.

:class:`MonitorSink` is a callable ``sink(batch_df, batch_id)`` for
``DataStreamWriter.foreachBatch``. Each micro-batch is collected to the driver, validated
with the single-process rules (:func:`streameval.events.build_batch`) and fed to a
:class:`~streameval.monitor.Monitor` through a :class:`~streameval.pipeline.Pipeline`,
which writes ``metrics.jsonl``, ``alerts.jsonl`` and ``rejected.jsonl``; then the
Monitor's state is checkpointed atomically together with the batch id.

.. code-block:: python

    from streameval.spark.streaming import MonitorSink

    sink = MonitorSink.from_config("monitor.toml", "state/monitor.ckpt", outputs="out/")
    query = (spark.readStream.schema("ts double, label long, score double")
             .option("maxFilesPerTrigger", 1).json("events/")
             .writeStream.foreachBatch(sink)
             .option("checkpointLocation", "state/spark")
             .start())
    query.awaitTermination()
    sink.flush()  # the stream is over for good: write the Monitor's last rows

Exactly once
------------
Per batch, in this order: the rows and transitions of the batch are written to the
outputs, then the checkpoint (the Monitor's state, the sizes of the outputs, the
counters and the batch id) is saved atomically, then the call returns and Spark commits
the batch in its own checkpoint (``checkpointLocation/commits/``). After a crash at any
point, a new sink on the same checkpoint (or the same sink, which reloads its checkpoint
after any error) resumes: the outputs are cut back to the sizes the checkpoint holds,
and Spark replays the last batch it had not committed.

* a batch id at most the checkpoint's is a batch already counted (Spark replays a batch
  that ran to the end here but whose commit it did not write): the call returns at once;
* the next batch id is counted;
* a batch id further ahead means batches Spark committed that were never counted here
  (a checkpoint of another query, or one restored from an older copy):
  ``ValueError``, nothing is counted. Without a checkpoint the first batch id may be
  any (a sink given to a query that ran before starts there).

An empty micro-batch commits its id too. The Spark checkpoint and the streameval
checkpoint belong together: a new ``checkpointLocation`` (batch ids from 0 again) needs
a new streameval checkpoint, else its first batches are taken for replays and skipped
(a warning is logged for every batch id below the checkpoint's). Alerts given to other
``sinks`` (webhooks...) are delivered at least once: a batch re-done after a crash
sends its transitions again.

Order of the events
-------------------
Spark's file source gives no order within a micro-batch (rows come in the order of the
partitions, which depends on file sizes and the configuration). The sink orders each
micro-batch on the driver by ``order_by`` (default: the event-time field), then by
every other column it reads (the FieldMap's fields, in :meth:`FieldMap.columns
<streameval.events.FieldMap.columns>` order) as tiebreaks: rows that still tie are equal
in everything the Monitor and the outputs see, so the Monitor's input, and with it
every row and alert, is the same whatever the partitioning, in a replayed batch as in
the first run. Nulls sort last. Batches reach the Monitor in batch-id order (Spark calls
``foreachBatch`` one batch at a time), so events of a later batch always come after
those of an earlier one, whatever their event times.

Rows are numbered across the stream like the lines of a log: row ``r`` is the ``r``-th
row the sink received (earlier batches first, then this batch in the order above);
``rejected.jsonl`` rows have it as ``line``, and errors name it with the batch id.

Bad rows
--------
Columns are validated as the single-process reader validates a Parquet file's columns
(the same :func:`~streameval.io.sources.arrow_column` and
:func:`~streameval.events.build_batch`): typed columns (numbers, booleans, timestamps)
by the JSON rules, string columns by the CSV rules. A null or unknown label, a null,
NaN or infinite score, a negative weight, a bad event time, and rows a metric of the
Monitor refuses (log loss: a score outside [0, 1]) are bad rows:

* ``on_error="fail"`` (default): the call raises :class:`~streameval.events.EventError`
  with the single-process reason, ``batch 3, row 2017 ({"ts": ..., "score": NaN}):
  score is NaN``; nothing of the batch is counted (the sink goes back to its
  checkpoint) and the query stops with that error. Restarted with
  ``on_error="skip"`` on the same checkpoints, the query redoes that batch and sets
  the bad rows aside;
* ``on_error="skip"``: bad rows go to the ``rejected`` output as ``{"line", "reason",
  "raw"}`` (``raw``: the row's values of the columns read) and are counted in
  :meth:`MonitorSink.counts`; the other rows are fed.

Cost
----
The sink runs on the driver (``foreachBatch`` does): per batch, one Spark job that
collects the columns read to the driver as Arrow (bound the batch size with
``maxFilesPerTrigger`` or ``maxOffsetsPerTrigger``), an `O(m log m)` sort and the
`O(m)` validation of its ``m`` rows, the Monitor's cost for them, and one checkpoint:
`O(size of the Monitor's state)`, a few tens of ms for the default monitor. The
checkpoint is saved after every batch: a batch that is counted and not checkpointed
would be lost or counted twice after a restart.

Classic PySpark: the sink object lives in the driver's Python process, and one sink
serves one query. The object is picklable (without its open files: it reloads its
checkpoint on first use); Spark Connect, whose server runs ``foreachBatch`` functions in
a Python process of its own, would need that, and paths on the server's file system
(not tested here).

It may import pyarrow (on use), numpy and any streameval module below the edges (its
config through :mod:`streameval.runconfig`); pyspark is never imported (the sink only
calls methods of the DataFrame it is given).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np

from streameval import runconfig
from streameval.events import FUTURE_MARK, EventBatch, EventError, FieldMap, build_batch
from streameval.io.checkpoint import fingerprint as _fingerprint
from streameval.io.sources import arrow_column
from streameval.monitor import Monitor
from streameval.pipeline import COUNTS, Pipeline

__all__ = ["MonitorSink", "KIND"]

#: the ``kind`` of the sink's checkpoints (a replay's checkpoint is refused, and back)
KIND = "spark-stream"

#: characters of a raw row shown in an error message
_RAW_SHOWN = 300

logger = logging.getLogger("streameval.spark")


class MonitorSink:
    """A ``foreachBatch`` sink feeding a Monitor exactly once per batch id.

    Runtime complexity, per micro-batch of `m` rows: `O(m log m)` on the driver (collect,
    sort, validation) plus the Monitor's cost for `m` events plus one checkpoint,
    `O(size of the Monitor's state)`. See the module docstring for the guarantees.

    Parameters
    ----------
    monitor : Monitor
        The monitor to start from when there is no checkpoint (the sink works on a copy:
        read it as :attr:`monitor`); with a checkpoint, the checkpoint's monitor is used,
        and ``monitor`` must have the same configuration.
    checkpoint : str or Path
        The sink's checkpoint file (kind :data:`KIND`), read when the sink is created
        and saved after every batch.
    fields : FieldMap, optional
        Column names and labels. Default: the CLI's defaults for ``monitor``
        (``ts``, ``label``, ``score``, ``id``, ``weight``; the segment field is the
        monitor's ``group_by``, the labels its labels).
    outputs : dict or path, optional
        JSONL files by role (``"metrics"``, ``"alerts"``, ``"rejected"``), as for
        :class:`~streameval.pipeline.Pipeline`; or a directory, meaning
        ``metrics.jsonl`` and ``alerts.jsonl`` in it, and ``rejected.jsonl`` with
        ``on_error="skip"``. Started afresh without a checkpoint, cut back to the
        checkpoint's sizes with one.
    sinks : sequence
        More receivers of alert transitions (io sinks with ``write``, or callables).
    on_error : {"fail", "skip"}
        Bad rows stop the query, or go to the ``rejected`` output (module docstring).
        Not part of the checkpoint's configuration: a failed query may be restarted
        with ``"skip"``.
    fingerprint : str, optional
        The configuration a checkpoint must belong to. Default: the fingerprint of the
        monitor's configuration, the fields and ``order_by``.
    order_by : str or sequence of str, optional
        Columns that order the rows of a micro-batch, before the tiebreaks. Default:
        the event-time field (none without one).
    on_batch : callable, optional
        ``on_batch(sink, batch_id, batch)`` after a batch's rows were written and before
        its checkpoint (``batch``: the validated :class:`~streameval.events.EventBatch`);
        an exception fails the batch as a crash would there.
    """

    def __init__(self, monitor, checkpoint: str | os.PathLike, *, fields: FieldMap | None = None,
                 outputs: dict | str | os.PathLike | None = None, sinks=(), on_error: str = "fail",
                 fingerprint: str | None = None, order_by: str | list | tuple | None = None,
                 on_batch: Callable[["MonitorSink", int, EventBatch], Any] | None = None) -> None:
        if on_error not in ("fail", "skip"):
            raise ValueError(f"on_error = {on_error!r}: expected 'fail' or 'skip'")
        if fields is None:
            fields = runconfig.field_map({}, monitor)
        elif not isinstance(fields, FieldMap):
            raise ValueError(f"fields must be a FieldMap, got {type(fields).__name__}")
        group = monitor.group_by
        group = () if group is None else (group,) if isinstance(group, str) else tuple(group)
        if fields.segment_fields != group:
            raise ValueError(f"fields.segment = {fields.segment!r} but the monitor's group_by "
                             f"is {monitor.group_by!r}: they must name the same field(s)")
        if order_by is None:
            order_by = () if fields.ts is None else (fields.ts,)
        elif isinstance(order_by, str):
            order_by = (order_by,)
        order_by = tuple(order_by)
        if not all(isinstance(c, str) and c for c in order_by):
            raise ValueError(f"order_by = {order_by!r}: expected column names")
        if outputs is not None and not isinstance(outputs, dict):
            out = Path(outputs)
            outputs = {"metrics": out / "metrics.jsonl", "alerts": out / "alerts.jsonl"}
            if on_error == "skip":
                outputs["rejected"] = out / "rejected.jsonl"
        self.checkpoint = Path(checkpoint)
        self.fields = fields
        self.outputs = {k: Path(v) for k, v in (outputs or {}).items()}
        self.sinks = list(sinks)
        self.on_error = on_error
        self.order_by = order_by
        self.on_batch = on_batch
        self._initial = monitor.to_state()
        self._monitor_type = type(monitor)
        if fingerprint is None:
            fingerprint = _fingerprint({"monitor": self._initial["params"],
                                        "fields": fields.to_dict(), "order_by": list(order_by)})
        self.fingerprint = fingerprint
        #: the last batch id counted (saved in the checkpoint); None before the first
        self.batch_id: int | None = None
        self._lock = threading.RLock()
        self._pipe: Pipeline | None = None
        self._rows: _Rows | None = None
        self._load()

    @classmethod
    def from_config(cls, config, checkpoint: str | os.PathLike, *, outputs=None, sinks=(),
                    on_error: str = "fail", order_by=None, on_batch=None) -> "MonitorSink":
        """A sink from a config file (a TOML path) or a parsed config document, read
        with the run schema (:mod:`streameval.runconfig`, edge ``spark``) as ``streameval
        replay --config`` reads it: the ``[monitor]`` table (absent: the default monitor)
        and the ``[input]`` table's field names, ``require_ts`` and ``max_future``
        (``format`` is ignored: Spark reads the stream). Delayed labels (``label_ttl``)
        are refused: join predictions and labels in Spark first."""
        if not isinstance(config, (dict, str, os.PathLike)):
            raise ValueError(f"config must be a TOML path or a dict, got {type(config).__name__}")
        run = runconfig.parse(config, "spark")
        monitor = Monitor.default() if run.monitor is None else Monitor.from_config(run.monitor)
        return cls(monitor, checkpoint, fields=run.fields(monitor), outputs=outputs,
                   sinks=sinks, on_error=on_error, order_by=order_by, on_batch=on_batch)

    # ------------------------------------------------------------------ state
    def _load(self) -> None:
        """(Re)build the pipeline from the checkpoint, or fresh without one: the outputs
        are opened (cut back to the checkpoint, or emptied)."""
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None
        rows = _Rows(self.fields, self.on_error)
        pipe = Pipeline(self._monitor_type.from_state(self._initial), rows,
                        outputs=self.outputs, sinks=self.sinks, checkpoint=self.checkpoint,
                        kind=KIND, fingerprint=self.fingerprint, on_error=self.on_error)
        state = pipe.resume()
        pipe.open()
        self._pipe, self._rows = pipe, rows
        self.batch_id = None if state is None else state.get("batch_id")

    def _ready(self) -> Pipeline:
        if self._pipe is None:
            self._load()
        return self._pipe

    def _recover(self) -> None:
        """After a failed batch: back to the checkpoint (the Monitor, the counters, the
        outputs cut back), so that nothing of the batch remains."""
        try:
            self._load()
        except Exception:  # the next call tries again, and raises if it still cannot
            logger.exception("cannot reload the checkpoint %s after a failed batch",
                             self.checkpoint)
            if self._pipe is not None:
                self._pipe.close()
            self._pipe = None

    @property
    def monitor(self):
        """The Monitor as of the last batch counted (that of the checkpoint)."""
        with self._lock:
            return self._ready().monitor

    def counts(self) -> dict:
        """``{"rows", "events", "rejected", "future", ...}`` (the counters of
        :meth:`Pipeline.counts <streameval.pipeline.Pipeline.counts>`) over the whole
        stream, across restarts, and ``"batch_id"``: the last batch id counted."""
        with self._lock:
            c = {k: v for k, v in self._ready().counts().items() if k in COUNTS}
            c["batch_id"] = self.batch_id
            return c

    def _save(self) -> None:
        pipe = self._pipe
        pipe.save(dict(pipe.state(), batch_id=self.batch_id))

    # ------------------------------------------------------------------ batches
    def __call__(self, batch_df, batch_id: int) -> None:
        """Count micro-batch ``batch_id`` once (see the module docstring)."""
        if isinstance(batch_id, bool) or not isinstance(batch_id, (int, np.integer)) \
                or batch_id < 0:
            raise ValueError(f"batch_id = {batch_id!r}: expected an integer >= 0")
        batch_id = int(batch_id)
        with self._lock:
            self._ready()
            last = self.batch_id
            if last is not None and batch_id <= last:
                if batch_id < last:
                    logger.warning(
                        "batch %d: skipped, the checkpoint %s has counted batches up to %d; "
                        "is it the checkpoint of this query (a new checkpointLocation needs "
                        "a new streameval checkpoint)?", batch_id, self.checkpoint, last)
                return
            if last is not None and batch_id > last + 1:
                raise ValueError(
                    f"batch {batch_id}: the checkpoint {self.checkpoint} has counted batches up "
                    f"to {last}, so batches {last + 1}..{batch_id - 1} were committed by Spark "
                    "but never counted here; is it the checkpoint of this query (and "
                    "checkpointLocation)?")
            try:
                self._count(batch_df, batch_id)
            except BaseException:
                self._recover()
                raise

    def _count(self, batch_df, batch_id: int) -> None:
        table = self._collect(batch_df)
        pipe, rows = self._pipe, self._rows
        first = pipe.counts()["rows"]  # rows of the batches before
        m = table.num_rows
        rows.start(batch_id, table, first)
        if m:
            columns, text = {}, set()
            for name in table.column_names:
                columns[name], is_text = arrow_column(table.column(name).combine_chunks())
                if is_text:
                    text.add(name)
            lines = np.arange(first + 1, first + m + 1, dtype=np.int64)
            batch, errors = build_batch(columns, lines, self.fields, text=text.__contains__)
            if errors and self.on_error == "fail":
                i, reason = errors[0]
                raise rows.error(reason, int(lines[i]))
            for i, reason in errors:
                rows.reject(int(lines[i]), reason)
        else:
            batch = EventBatch.empty()
        rows.n_rows += m
        if len(batch):
            try:
                pipe.take(batch)  # the Pipeline's refusals: Monitor-level bad rows
            except EventError as e:
                if e.line is None:
                    raise
                raise rows.error(e.reason, e.line) from None
        if self.on_batch is not None:
            self.on_batch(self, batch_id, batch)
        self.batch_id = batch_id  # (after a failure, the caller reloads the checkpoint's)
        self._save()

    def _collect(self, df):
        """The micro-batch's columns read, on the driver as one Arrow table, in the
        order of the module docstring."""
        import pyarrow.compute as pc  # the 'spark' extra brings pyarrow; the core needs none

        fm = self.fields
        have = list(df.columns)
        need = [("label", fm.label), ("score", fm.score)]
        if fm.ts is not None and fm.require_ts:
            need.append(("ts", fm.ts))
        for role, name in need:
            if name not in have:
                raise ValueError(f"the stream has no column {name!r} (the {role} field); its "
                                 f"columns are {have}: name the fields with fields= "
                                 "(or the config's [input] table)")
        for name in self.order_by:
            if name not in have:
                raise ValueError(f"order_by: the stream has no column {name!r}; its columns "
                                 f"are {have}")
        names = list(self.order_by) + [c for c in fm.columns()
                                       if c in have and c not in self.order_by]
        table = df.select(*[_quote(c) for c in names]).toArrow()
        if table.num_rows > 1:
            try:
                order = pc.sort_indices(table, sort_keys=[(c, "ascending") for c in names])
            except Exception as e:  # pyarrow.ArrowNotImplementedError: nested types
                raise ValueError(f"cannot order a micro-batch by {names}: {e}") from None
            table = table.take(order)
        return table

    # ------------------------------------------------------------------ end
    def flush(self) -> None:
        """End of the stream: the Monitor writes its final rows (unless the last
        evaluation was at its current count) and the checkpoint is saved. Call it once
        the query is over for good; a stream that goes on after a flush keeps the extra
        evaluation in its timeline."""
        with self._lock:
            pipe = self._ready()
            try:
                pipe.monitor.flush()
                self._save()
            except BaseException:
                self._recover()
                raise

    def close(self) -> None:
        """Close the outputs; the next use reloads the checkpoint."""
        with self._lock:
            if self._pipe is not None:
                self._pipe.close()
            self._pipe = None

    def __enter__(self) -> "MonitorSink":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_pipe"] = state["_rows"] = state["_lock"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"MonitorSink({str(self.checkpoint)!r}, batch_id={self.batch_id!r})"


def _quote(name: str) -> str:
    """A column name as Spark's ``select`` reads it literally (dots, spaces...)."""
    return "`" + name.replace("`", "``") + "`"


class _Rows:
    """The Pipeline's source: it yields nothing (the sink gives it the batches), counts
    the rows and the bad ones, and gives the raw row of a stream row number."""

    def __init__(self, fields: FieldMap, on_error: str) -> None:
        self.fields = fields
        self.on_error = on_error
        self.rejected = None  # set by Pipeline.open when there is a "rejected" output
        self.n_rows = self.n_rejected = self.n_future = 0
        self._table = None
        self._first = 0
        self._batch_id = None

    def __iter__(self):
        return iter(())

    def to_state(self) -> dict:
        return {}

    def restore(self, state: dict) -> None:
        """Nothing to restore: the counters are the Pipeline's, the batch id the sink's."""

    def counts(self) -> dict:
        return {"rows": self.n_rows, "rejected": self.n_rejected, "future": self.n_future}

    def start(self, batch_id: int, table, first: int) -> None:
        """The batch being counted: its ordered table, after ``first`` rows."""
        self._batch_id, self._table, self._first = batch_id, table, first

    def raw(self, line: int) -> Any:
        """The values of the columns read at stream row ``line`` of the current batch."""
        k = line - self._first - 1
        if self._table is None or not 0 <= k < self._table.num_rows:
            return None
        return self._table.slice(k, 1).to_pylist()[0]

    def reject(self, line: int, reason: str) -> None:
        self.n_rejected += 1
        if FUTURE_MARK in reason:
            self.n_future += 1
        cb = self.rejected
        if cb is not None:
            cb(line, reason, self.raw(line))
        elif self.n_rejected <= 20:
            logger.warning("batch %s, row %d: rejected: %s", self._batch_id, line, reason)

    def error(self, reason: str, line: int) -> EventError:
        """The error of a bad row (``on_error="fail"``), naming the batch, the row and
        its values."""
        raw = self.raw(line)
        shown = json.dumps(raw, default=str, ensure_ascii=False)
        if len(shown) > _RAW_SHOWN:
            shown = shown[:_RAW_SHOWN - 3] + "..."
        err = EventError(reason, line=line, raw=raw,
                         where=f"batch {self._batch_id}, row {line} ({shown})")
        err.batch_id = self._batch_id
        return err
