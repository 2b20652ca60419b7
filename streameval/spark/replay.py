"""``streameval replay --engine spark``: a segment timeline and its alerts from a
partitioned log, equal to the single-process replay's.

The single-process replay reads the log in order and evaluates its Monitor before the
first event of every new period of event time (``[monitor] every_seconds``; with
``every = 0``). The events between two evaluations are a *bucket*: bucket ``b`` holds
the events whose running maximum event time (in log order) lies in period ``b``. This
module builds each bucket's metric states in parallel and lets the driver walk the
buckets in time order with the Monitor's own segments and rules:

1. **Parse** (one pass, persisted): each split of the log is read with streameval's own
   reader and validator (:class:`~streameval.io.EventSource` on the split's lines,
   ``build_batch`` on Parquet/DataFrame columns) into one
   :class:`~streameval.events.Batch`, and the Monitor's own checks
   (:meth:`Monitor.refused <streameval.monitor.Monitor.refused>`), so bad rows get the
   single-process reasons (:func:`streameval.pipeline.refusal_reason`). Each split sends its line count, its largest
   event time, and per segment its largest time, first line and count.
2. **Buckets** (one pass): from the maxima of the splits before it, each event gets its
   bucket and, for every window by period, whether the window refuses it as late
   (``t < newest - lateness``, or past the window: the single-process rules, with
   ``newest`` the segment's running maximum). The driver receives per (bucket,
   segment) the largest time and the counts; it derives ``N_b``, the segment's newest
   time at each evaluation.
3. **States** (one pass): per (bucket, segment) the cumulative metrics' states; per
   sliding window the state of the events that *enter* at a bucket and of those that
   *leave* at a later one (an event leaves at the first evaluation where
   ``N_b - period >= t``); per tumbling window the state of each window, keyed by the
   evaluation at which it closes (``floor((N_b - lateness - origin) / period) - 1 >=
   k``). States are the metrics' JSON states, merged per key on the executors
   (``reduceByKey``) and streamed to the driver in bucket order (``toLocalIterator``).
   Drift tests (window tests, sequential detectors) and windows of ``size`` events follow
   single events in order: for them each bucket's events of each segment are shipped
   too, as packed columns, sorted by (split, position).
4. **Walk** (driver): at each evaluation, cumulative metrics ``merge`` their bucket's
   state; a sliding window merges what enters and ``subtract`` s what leaves (exact:
   :meth:`streameval.metrics.base.Metric.subtract`); a tumbling window shows its last
   closed window; drift tests and count windows take the bucket's events in log order
   (``update_trusted``, as the Monitor feeds them). The Monitor's own evaluation then
   writes the rows and runs the rules with the stream's ``n`` and ``t`` and each
   segment's count: ``metrics.jsonl`` and ``alerts.jsonl`` are those of the
   single-process replay.

Supported: evaluation by period of event time (``every = 0``, ``every_seconds``), every
metric, window, drift test and rule of a config. Refused with the reason: evaluation
every N events (``every``), delayed labels (``[input] label_ttl``). Driver memory: the
Monitor's state (as in the single-process replay) plus the records of one bucket; driver
work: merging states per bucket, plus `O(events)` when the config has drift tests or
count windows (they read every event, in order, as in the single-process replay). The
records reach the driver through ``toLocalIterator``, one partition of the sorted
records at a time (a partition may hold several buckets).

Logs: a JSONL or Parquet file, or a directory of them (one format, read in file-name
order: JSONL lines are numbered across the files, Parquet rows per file; the local
engine reads single files only). Lines end at ``\n`` only, as the local reader's, and
stay bytes until streameval's reader decodes them (a line that is not UTF-8 is a bad
row).

It may import pyspark (on use), pandas, pyarrow, numpy and any streameval module.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import time
from pathlib import Path

import numpy as np

from streameval.events import EventError

__all__ = ["replay", "SparkReplayError"]

_KIND_EVENT, _KIND_REJECT, _KIND_INFO = 0, 1, 2

_PARSED = ("file string, block long, pos long, kind int, label boolean, score double, "
           "weight double, ts double, seg string, reason string, raw string, info string")


class SparkReplayError(ValueError):
    """A configuration or input the Spark replay cannot take (the CLI's exit status 2)."""


# ------------------------------------------------------------------ the config


class _Plan:
    """What the executors need to know of the Monitor: metric templates by kind."""

    def __init__(self, monitor, fields):
        from streameval.windows import Sliding, Tumbling

        if monitor.every:
            raise SparkReplayError(
                f"[monitor] every = {monitor.every}: the Spark engine evaluates at every "
                "period of event time only; set every = 0 and every_seconds")
        if monitor.every_seconds is None:
            raise SparkReplayError("the Spark engine needs [monitor] every_seconds (and every = 0): "
                                   "it evaluates at every period of event time")
        self.E = float(monitor.every_seconds)
        self.cumulative, self.sliding, self.tumbling, self.ordered = {}, {}, {}, []
        for name, obj in monitor.metrics.items():
            if isinstance(obj, (Sliding, Tumbling)) and obj.period is None:
                self.ordered.append(name)  # a window of N events: fed in order on the driver
            elif isinstance(obj, Sliding):
                self.sliding[name] = (obj.metric.clone(), float(obj.period), float(obj.lateness))
            elif isinstance(obj, Tumbling):
                self.tumbling[name] = (obj._template.clone(), float(obj.period),
                                       float(obj.lateness), float(obj.origin))
            else:
                self.cumulative[name] = obj.clone()
        # drift tests and count windows follow single events: the driver gives them each
        # bucket's events in log order
        self.in_order = bool(self.ordered or monitor.drift)
        for name, (tpl, *_rest) in self.sliding.items():
            probe = tpl.clone()
            try:
                probe.subtract(tpl.clone())
            except NotImplementedError:
                raise SparkReplayError(f"metric {name!r}: {type(tpl).__name__} has no subtract(); "
                                       "a sliding window over buckets needs it") from None
        self.fields = fields
        self.group_by = monitor.group_by
        self.max_segments = monitor.max_segments
        self.overall = monitor.overall
        self.other_key = monitor.other_key
        self.probe = _probe_monitor(monitor)

    def windows(self):
        """``[(name, kind, period, lateness, origin)]`` of the windows by period."""
        out = [(n, "sliding", p, lt, 0.0) for n, (_, p, lt) in self.sliding.items()]
        out += [(n, "tumbling", p, lt, o) for n, (_, p, lt, o) in self.tumbling.items()]
        return out


def _probe_monitor(monitor):
    """A fresh copy of the Monitor (its ``refused`` and segment keys), picklable."""
    from streameval.monitor import Monitor

    return Monitor.from_state(monitor.to_state())


# ------------------------------------------------------------------ reading


def _read(spark, log, fmt, order_by):
    """``(DataFrame, kind)``: the log's rows with their order columns ``_file``,
    ``_block`` (split start), ``_pos`` (position: line within the split for text,
    row number for Parquet and frames); kind "text" (JSONL lines in ``value``) or
    "columns" (the fields as columns)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    if isinstance(log, DataFrame):
        if order_by is None:
            raise SparkReplayError("a DataFrame log needs order_by=: the column that gives "
                                   "the log's order (e.g. its line number)")
        if order_by not in log.columns:
            raise SparkReplayError(f"order_by = {order_by!r} is not a column ({log.columns})")
        df = log.withColumn("_file", F.lit("")).withColumn("_pos", F.col(order_by).cast("long"))
        n = max(1, int(spark.conf.get("spark.sql.shuffle.partitions")))
        df = df.repartitionByRange(n, "_pos").sortWithinPartitions("_pos")
        df = df.withColumn("_block", F.spark_partition_id().cast("long"))
        return df, "columns"
    from streameval.io.sources import FORMATS, detect_format

    path = str(log)
    p = Path(path)
    if not p.exists():
        raise SparkReplayError(f"{path}: no such file")
    files = ([f for f in sorted(p.iterdir()) if f.is_file() and not f.name.startswith((".", "_"))]
             if p.is_dir() else [p])
    if not files:
        raise SparkReplayError(f"{path}: an empty directory")
    try:
        found = {detect_format(f) for f in files} if fmt is None else {FORMATS.get(fmt, fmt)}
    except ValueError as e:
        raise SparkReplayError(str(e)) from None
    if len(found) > 1:
        raise SparkReplayError(f"{path}: files of several formats {sorted(found)}")
    (fmt,) = found
    if any(f.name.lower().endswith(".xz") for f in files):
        raise SparkReplayError(f"{path}: Spark cannot read .xz files; use .gz or .bz2, or the "
                               "local engine")
    if fmt == "csv":
        raise SparkReplayError(
            f"{path}: the Spark engine reads JSONL and Parquet logs (a CSV record may span "
            "lines, and Spark splits files at line ends); convert it, or use the local engine")
    if fmt in ("jsonl", "ndjson", "json"):
        # lines end at "\n" only (as the local reader's), and stay bytes: a line that is
        # not UTF-8 is a bad row there, not a failed job
        df = spark.read.option("lineSep", "\n").text(path).select(
            F.col("value").cast("binary").alias("value"),
            F.col("_metadata.file_path").alias("_file"),
            F.col("_metadata.file_block_start").alias("_block"))
        return df, "text"
    if fmt == "parquet":
        df = spark.read.parquet(path)
        df = df.select("*", F.col("_metadata.file_path").alias("_file"),
                       F.col("_metadata.file_block_start").alias("_block"),
                       (F.col("_metadata.row_index") + 1).alias("_pos"))
        return df, "columns"
    raise SparkReplayError(f"format {fmt!r}: the Spark engine reads JSONL and Parquet logs "
                           "(and DataFrames)")


def _parse_pass(plan, kind, names):
    """The ``mapInPandas`` function of the parse pass (see the module docstring). A
    split may reach it in several pandas frames (Arrow batches): positions of text
    lines continue across them."""
    fm = plan.fields
    probe = plan.probe

    def runs(pdf):
        keys = (pdf["_file"].astype(str) + "\0" + pdf["_block"].astype(str)).to_numpy()
        start = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        bounds = list(start) + [len(pdf)]
        for a, b in zip(bounds, bounds[1:]):
            yield pdf.iloc[a:b]

    def run(frames):
        seen = {}  # (file, block) -> lines read so far in this split
        for pdf in frames:
            for part in runs(pdf):
                key = (str(part["_file"].iloc[0]), int(part["_block"].iloc[0]))
                before = seen.get(key, 0)
                seen[key] = before + len(part)
                yield _parse_block(part, kind, names, fm, probe, before)

    return run


def _parse_block(blk, kind, names, fm, probe, before=0):
    import pandas as pd

    from streameval.io.sources import EventSource, arrow_column

    file = str(blk["_file"].iloc[0])
    block = int(blk["_block"].iloc[0])
    rejects = []
    batches = []
    if kind == "text":
        lines = [bytes(x) for x in blk["value"].tolist()]
        nlines = len(lines)
        data = b"\n".join(lines) + (b"\n" if lines else b"")
        src = EventSource(io.BytesIO(data), fm, format="jsonl", on_error="skip",
                          rejected=lambda line, reason, raw: rejects.append(
                              (line + before, reason, raw)))
        for b in src:
            batches.append(dataclasses.replace(b, line=b.line + before))  # within the split
        nrows = src.n_rows  # blank lines are not rows
        raws = lines
    else:
        import pyarrow as pa
        from streameval.events import build_batch

        present = [c for c in names if c in blk.columns]
        table = pa.Table.from_pandas(blk[present], preserve_index=False)
        columns, text = {}, set()
        for c in present:
            columns[c], is_text = arrow_column(table.column(c).combine_chunks())
            if is_text:
                text.add(c)
        linenos = blk["_pos"].to_numpy(np.int64)
        nlines = nrows = len(linenos)
        batch, errors = build_batch(columns, linenos, fm, text=text.__contains__)
        for i, reason in errors:
            rejects.append((int(linenos[i]), reason, _row(blk, i, present)))
        if len(batch):
            batches.append(batch)
        raws = None
    out_rows = []
    from streameval.events import EventBatch

    batch = EventBatch.concat(batches) if batches else None
    segs = None
    if batch is not None and len(batch):
        more = _monitor_refusals(batch, probe, fm)
        if more:
            keep = np.ones(len(batch), bool)
            keep[[j for j, _ in more]] = False
            more = [(int(batch.line[j]), reason) for j, reason in more]
            batch = batch.select(keep)
        segs = _segment_json(batch, probe)
        for line, reason in more:
            raw = _text(raws[line - 1 - before]) if raws is not None else _row(
                blk, int(np.searchsorted(blk["_pos"].to_numpy(), line)), None)
            rejects.append((line, reason, raw))
    info = {"lines": nlines, "rows": nrows}
    if batch is not None and len(batch):
        ts = batch.ts
        info["max_t"] = float(np.max(ts))
        per = {}
        for i, (s, t) in enumerate(zip(segs, ts.tolist())):
            d = per.get(s)
            if d is None:
                per[s] = [t, int(batch.line[i]), 1]
            else:
                if t > d[0]:
                    d[0] = t
                d[2] += 1
        info["segments"] = per
        out = pd.DataFrame({
            "file": file, "block": block, "pos": batch.line.astype(np.int64),
            "kind": np.int32(_KIND_EVENT), "label": batch.label.astype(bool),
            "score": batch.score,
            "weight": 1.0 if batch.weight is None else batch.weight, "ts": ts, "seg": segs,
            "reason": None, "raw": None, "info": None})
        out_rows.append(out)
    if rejects:
        out_rows.append(pd.DataFrame({
            "file": file, "block": block, "pos": [r[0] for r in rejects],
            "kind": np.int32(_KIND_REJECT), "label": None, "score": np.nan, "weight": np.nan,
            "ts": np.nan, "seg": None, "reason": [r[1] for r in rejects],
            "raw": [json.dumps(r[2], default=str) for r in rejects], "info": None}))
    out_rows.append(pd.DataFrame({
        "file": [file], "block": [block], "pos": [0], "kind": [np.int32(_KIND_INFO)],
        "label": [None], "score": [np.nan], "weight": [np.nan], "ts": [np.nan], "seg": [None],
        "reason": [None], "raw": [None], "info": [json.dumps(info)]}))
    frame = pd.concat(out_rows, ignore_index=True)
    frame["label"] = frame["label"].astype(object)
    return frame


def _text(line):
    """A raw JSONL line as the local reader reports it (``rejected.jsonl``'s ``raw``)."""
    return line.decode("utf-8", errors="replace").rstrip("\r\n")


def _row(blk, i, present):
    row = blk.iloc[i]
    cols = present if present is not None else [c for c in blk.columns if not c.startswith("_")]
    out = {}
    for c in cols:
        v = row[c]
        if hasattr(v, "item"):
            v = v.item()
        if isinstance(v, float) and v != v:
            v = None
        out[c] = v
    return out


def _monitor_refusals(batch, probe, fm):
    """``[(row, reason)]``: the rows of ``batch`` the Monitor refuses
    (:meth:`Monitor.refused <streameval.monitor.Monitor.refused>`: a score outside a
    probability metric's range, a segment value it cannot key, ...), with the
    single-process reason (:func:`streameval.pipeline.refusal_reason`)."""
    from streameval.pipeline import refusal_reason

    return [(j, refusal_reason(e, fm)) for j, e in probe.refused(batch)]


def _segment_json(batch, probe):
    """Each event's segment key as JSON (``null``: the whole stream only), for a batch
    whose segment values the Monitor admits. One key per distinct value."""
    if batch.segment is None:
        return ["null"] * len(batch)
    codes, values = batch.segment_codes()
    keys = []
    for v in values:
        key = probe.segment_key(v)
        keys.append(json.dumps(list(key) if isinstance(key, tuple) else key))
    return [keys[c] for c in codes.tolist()]


def _key_of(s):
    v = json.loads(s)
    return tuple(v) if isinstance(v, list) else v


# ------------------------------------------------------------------ passes 2 and 3


class _Cursor:
    """A task's walk through its splits in log order: per event, its evaluation
    bucket and, per scope ("*": the whole stream; a segment's JSON key, capped), the
    newest time before it. Splits may come in several frames: the running maxima
    carry over."""

    def __init__(self, blocks, E):
        self.blocks, self.E = blocks, E
        self.key = None

    def frames(self, frames):
        """``(frame part, bucket array, [[(scope, newest before)] per event])``."""
        for pdf in frames:
            if not len(pdf):
                continue
            keys = (pdf["file"].astype(str) + "\0" + pdf["block"].astype(str)).to_numpy()
            start = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
            bounds = list(start) + [len(pdf)]
            for a, b in zip(bounds, bounds[1:]):
                part = pdf.iloc[a:b]
                key = (str(part["file"].iloc[0]), int(part["block"].iloc[0]))
                if key != self.key:
                    info = self.blocks["by_block"][key]
                    self.key = key
                    self.top = info["prior"]
                    self.newest = dict(info["prior_scope"])
                yield (part, self.blocks["order"][key], *self._advance(part))

    def _advance(self, part):
        ts = part["ts"].to_numpy(np.float64)
        incl = np.maximum.accumulate(np.concatenate(([self.top], ts)))[1:]
        self.top = float(incl[-1])
        buckets = np.floor_divide(incl, self.E)
        target, overall = self.blocks["target"], self.blocks["overall"]
        newest = self.newest
        before = []
        for t, sg in zip(ts.tolist(), part["seg"].tolist()):
            row = []
            if overall:
                nb = newest.get("*", -math.inf)
                row.append(("*", nb))
                if t > nb:
                    newest["*"] = t
            if sg != "null":
                sc = target.get(sg, sg)
                nb = newest.get(sc, -math.inf)
                row.append((sc, nb))
                if t > nb:
                    newest[sc] = t
            before.append(row)
        return ts, buckets, before


def _late(t, nb, kind, period, lateness, origin):
    """Whether a window by period refuses an event at ``t`` when its newest time is
    ``nb`` (the single-process rules of ``Sliding`` and ``Tumbling``)."""
    if kind == "sliding":
        return t < nb - lateness or t <= nb - period
    k = math.floor((t - origin) / period)
    closed = (math.floor((nb - lateness - origin) / period) - 1) if nb != -math.inf else -math.inf
    return t < nb - lateness or k <= closed


def _bucket_pass(plan, blocks):
    """Pass 2: per (bucket, scope) the largest time, the count and the late counts
    (scope "#": every event, for the stream's ``n`` and ``t``)."""
    import pandas as pd

    windows = plan.windows()

    def run(frames):
        agg = {}
        for part, _, ts, buckets, before in _Cursor(blocks, plan.E).frames(frames):
            for t, b, row in zip(ts.tolist(), buckets.tolist(), before):
                for s, nb in [("#", -math.inf)] + row:
                    a = agg.get((b, s))
                    if a is None:
                        a = agg[(b, s)] = [t, 0, {}]
                    elif t > a[0]:
                        a[0] = t
                    a[1] += 1
                    if s == "#":
                        continue
                    for name, kind, period, lateness, origin in windows:
                        if _late(t, nb, kind, period, lateness, origin):
                            a[2][name] = a[2].get(name, 0) + 1
        if agg:
            yield pd.DataFrame({"bucket": [k[0] for k in agg], "scope": [k[1] for k in agg],
                                "max_t": [v[0] for v in agg.values()],
                                "n": [v[1] for v in agg.values()],
                                "late": [json.dumps(v[2]) for v in agg.values()]})

    return run


_BUCKET_SCHEMA = "bucket double, scope string, max_t double, n long, late string"


def _state_pass(plan, blocks, timeline):
    """Pass 3: the states, keyed by (evaluation index, scope, role, name, window)."""
    import pandas as pd

    def run(frames):
        for part, ordinal, ts, buckets, before in _Cursor(blocks, plan.E).frames(frames):
            rows = _state_rows(part, ordinal, ts, buckets, before, plan, timeline)
            if rows:
                yield pd.DataFrame(rows, columns=["idx", "scope", "role", "name", "k", "state"])

    return run


def _state_rows(part, ordinal, ts, buckets, before, plan, timeline):
    index = timeline["index"]
    eval_idx = [index[b] for b in buckets.tolist()]
    y = part["label"].to_numpy(bool)
    s = part["score"].to_numpy(np.float64)
    w = part["weight"].to_numpy(np.float64)
    groups = {}  # (evaluation index, scope, role, name, window index) -> event positions

    def put(key, i):
        groups.setdefault(key, []).append(i)

    pos = part["pos"].to_numpy(np.int64)
    for i, (t, e, row) in enumerate(zip(ts.tolist(), eval_idx, before)):
        for sc, nb in row:
            put((e, sc, "cum", "", 0), i)
            if plan.in_order:
                put((e, sc, "ord", "", None), i)
            for name, (_, period, lateness) in plan.sliding.items():
                if _late(t, nb, "sliding", period, lateness, 0.0):
                    continue
                A = timeline["expire"][(sc, name)]  # N_b - period at each evaluation
                x = max(int(np.searchsorted(A, t, side="left")), e)
                if x == e:
                    continue  # gone again before the evaluation: never seen
                put((e, sc, "add", name, 0), i)
                if x < len(A):
                    put((x, sc, "sub", name, 0), i)
            for name, (_, period, lateness, origin) in plan.tumbling.items():
                if _late(t, nb, "tumbling", period, lateness, origin):
                    continue
                k = math.floor((t - origin) / period)
                C = timeline["closed"][(sc, name)]  # last closed window at each evaluation
                x = int(np.searchsorted(C, k, side="left"))
                if x < len(C):
                    put((x, sc, "tum", name, k), i)
    rows = []
    weighted = not (w == 1.0).all()
    for (e, sc, role, name, k), idx in groups.items():
        idx = np.asarray(idx)
        cols = (y[idx], s[idx], w[idx] if weighted else None)
        if role == "ord":  # the events themselves, in log order: (split, position) sorts them
            k = (ordinal << 32) + int(pos[idx[0]])
            states = {"y": _pack(cols[0]), "s": _pack(cols[1]), "t": _pack(ts[idx]),
                      "w": None if cols[2] is None else _pack(cols[2])}
        elif role == "cum":
            states = {n: m.clone().update_trusted(*cols).to_state()
                      for n, m in plan.cumulative.items()}
        elif role in ("add", "sub"):
            states = plan.sliding[name][0].clone().update_trusted(*cols).to_state()
            states["events"] = len(idx)   # (what an alert's explanation counts)
        else:
            states = plan.tumbling[name][0].clone().update_trusted(*cols).to_state()
            states["events"] = len(idx)
        rows.append((int(e), sc, role, name, int(k), json.dumps(states)))
    return rows


_STATE_SCHEMA = "idx long, scope string, role string, name string, k long, state string"


def _pack(a):
    import base64

    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")


def _unpack(text, dtype):
    import base64

    return np.frombuffer(base64.b64decode(text), dtype=dtype).copy()


def _merge_payload(a, b):
    from streameval.metrics.base import from_state

    x, y = json.loads(a), json.loads(b)
    if "type" in x:  # one state (a window's: with the count of its events)
        out = from_state(x).merge(from_state(y)).to_state()
        if "events" in x:
            out["events"] = x["events"] + y["events"]
        return json.dumps(out)
    return json.dumps({n: from_state(x[n]).merge(from_state(y[n])).to_state() for n in x})


# ------------------------------------------------------------------ the driver's walk


class _WindowValue:
    """What a Monitor row and rule read of a window: ``get``, ``interval``, ``late``, and
    what an alert's explanation reads: ``period``, the events it holds (``len``; the
    last closed window's, ``last["n"]``, for a tumbling one)."""

    size = None

    def __init__(self, metric, period=None, tumbling=False):
        self.metric = metric
        self.late = 0
        self.period = period
        self.n = 0
        if tumbling:
            self.closed = lambda: ()
            self.last = None

    def __len__(self):
        return self.n

    def get(self):
        return math.nan if self.metric is None else self.metric.get()

    def interval(self, level=0.95):
        if self.metric is None:
            return (math.nan, math.nan)
        return self.metric.interval(level)

    @property
    def _has_interval(self):
        # as the window it stands for: read through has_interval (rows carry intervals)
        from streameval.metrics.base import has_interval

        return self.metric is not None and has_interval(self.metric)


def replay(log, out, config=None, *, spark=None, order_by=None, format=None,
           on_error="fail", report=True, title=None, config_dir=None, stats=None,
           allow_empty=False):
    """Replay a log on Spark: ``metrics.jsonl``, ``alerts.jsonl``, ``summary.json`` (and
    ``report.html``) in ``out``, equal to the single-process ``streameval replay``'s.

    Parameters
    ----------
    log : str, Path or pyspark.sql.DataFrame
        A JSONL or Parquet file (or a directory of them, read in file-name order), or a
        DataFrame of log rows with ``order_by``.
    out : str or Path
        Output directory (created).
    config : str, Path or dict, optional
        The replay's TOML config (``[monitor]`` with ``every = 0`` and ``every_seconds``,
        ``[input]``); see the module docstring for what the Spark engine takes.
    spark : SparkSession, optional
        Default: the active session, else a new local one.
    order_by : str, optional
        For a DataFrame: the column giving the log's order (integers; used as the line
        number in messages).
    on_error : {"fail", "skip"}
        A bad row stops the replay (:class:`~streameval.events.EventError` naming its
        line, the single-process message), or goes to ``rejected.jsonl``.
    stats : dict, optional
        Filled with ``buckets``, ``records`` (state records streamed to the driver),
        ``passes`` and ``seconds`` per phase.

    allow_empty : bool
        Accept a log without events (no rows, or every row rejected); without it (and
        without ``[input] allow_empty``) that is a :class:`SparkReplayError`, as in the
        single-process replay.

    Returns
    -------
    dict
        The summary (as :func:`streameval.replay.replay`'s).
    """
    from streameval import runconfig
    from streameval.replay import load_replay_config

    t0 = time.perf_counter()
    stats = stats if stats is not None else {}
    if on_error not in ("fail", "skip"):
        raise SparkReplayError(f"on_error = {on_error!r}: expected 'fail' or 'skip'")
    try:
        # edge "spark": the schema refuses what Spark does not do (delayed labels)
        monitor, fields, fmt0, _ = load_replay_config(config, config_dir, edge="spark")
        allow_empty = bool(allow_empty or runconfig.parse(config, "spark", config_dir)
                           .input.get("allow_empty"))
    except ValueError as e:
        raise SparkReplayError(f"{config if not isinstance(config, dict) else 'config'}: {e}") from None
    plan = _Plan(monitor, fields)
    spark = spark or _session()
    df, kind = _read(spark, log, format or fmt0, order_by)
    names = fields.columns()
    parsed = df.mapInPandas(_parse_pass(plan, kind, names), _PARSED).persist()
    try:
        return _run(spark, parsed, kind, plan, monitor, fields, log, Path(out), on_error, report,
                    title, stats, t0, allow_empty)
    finally:
        parsed.unpersist()


def _session():
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    return (SparkSession.builder.master("local[*]").appName("streameval replay")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())


def _run(spark, parsed, kind, plan, monitor, fields, log, out, on_error, report, title, stats,
         t0, allow_empty=False):
    from pyspark.sql import functions as F

    from streameval.io.sinks import JsonlSink, rejected_callback
    from streameval.pipeline import Pipeline

    t1 = time.perf_counter()
    infos = parsed.where(F.col("kind") == _KIND_INFO).select("file", "block", "info").collect()
    infos.sort(key=lambda r: (r["file"], r["block"]))
    blocks = _block_table(infos, plan, kind == "text")
    stats["parse_seconds"] = round(time.perf_counter() - t1, 3)
    # bad rows: the first (fail), or all in line order (skip)
    rows = (parsed.where(F.col("kind") == _KIND_REJECT)
            .select("file", "block", "pos", "reason", "raw").collect())
    n_rejected = len(rows)
    rejected_rows = []
    if n_rejected:
        rows = sorted(((blocks["order"][(r["file"], r["block"])], r["pos"], r) for r in rows),
                      key=lambda x: (x[0], x[1]))
        rejected_rows = [(_line(blocks, r["file"], r["block"], r["pos"]), r["reason"],
                          json.loads(r["raw"])) for _, _, r in rows]
        if on_error == "fail":
            line, reason, raw = rejected_rows[0]
            raise EventError(reason, line=line, raw=raw)
    events = parsed.where(F.col("kind") == _KIND_EVENT).drop("reason", "raw", "info")
    # pass 2: buckets
    t2 = time.perf_counter()
    agg = events.mapInPandas(_bucket_pass(plan, blocks), _BUCKET_SCHEMA)
    agg = agg.groupBy("bucket", "scope").agg(F.max("max_t").alias("max_t"),
                                             F.sum("n").alias("n"),
                                             F.collect_list("late").alias("late")).collect()
    timeline = _timeline(agg, plan)
    stats["bucket_seconds"] = round(time.perf_counter() - t2, 3)
    # pass 3: states, merged per key on the executors, streamed in evaluation order
    t3 = time.perf_counter()
    states = events.mapInPandas(_state_pass(plan, blocks, timeline), _STATE_SCHEMA)
    merged = (states.rdd.map(lambda r: ((r[0], r[1], r[2], r[3], r[4]), r[5]))
              .reduceByKey(_merge_payload)
              .map(lambda kv: (*kv[0], kv[1])))
    ordered = spark.createDataFrame(merged, _STATE_SCHEMA).orderBy(
        "idx", "k", "scope", "role", "name")
    out.mkdir(parents=True, exist_ok=True)
    for name in ("summary.json", "report.html"):
        (out / name).unlink(missing_ok=True)
    outputs = {"metrics": out / "metrics.jsonl", "alerts": out / "alerts.jsonl"}
    pipe = Pipeline(monitor, None, outputs=outputs)
    pipe.open()
    rejected_sink = None
    if on_error == "skip":
        rejected_sink = JsonlSink(out / "rejected.jsonl", mode="w")
        cb = rejected_callback(rejected_sink)
        for line, reason, raw in rejected_rows:
            cb(line, reason, raw)
        rejected_sink.close()
    records, n_events = _walk(monitor, plan, timeline, blocks, ordered.toLocalIterator())
    pipe.close()
    stats.update(buckets=len(timeline["buckets"]), records=records, passes=3,
                 state_seconds=round(time.perf_counter() - t3, 3))
    counts = {"rows": blocks["rows"], "events": n_events, "rejected": n_rejected,
              "expired": 0, "orphans": 0, "unlabeled": 0,
              "future": sum(1 for _, r, _ in rejected_rows if "ahead of" in r),
              "other_events": blocks["other_events"], "warnings": list(monitor.warnings)}
    if not allow_empty and counts["rows"] == counts["rejected"]:
        from streameval.replay import empty_message

        raise SparkReplayError(empty_message(log, counts))
    return _summary(out, log, counts, t0, report, title)


def _block_table(infos, plan, text):
    """From the parse pass's per-split facts: split order, line offsets (text logs count
    lines across splits), the maxima before each split, segments in order of first
    appearance and the cap (segments past ``max_segments`` count as ``"__other__"``)."""
    merged = {}
    for r in infos:  # a split read in several frames sends several facts
        key = (r["file"], int(r["block"]))
        info = json.loads(r["info"])
        m = merged.setdefault(key, {"lines": 0, "rows": 0, "segments": {}})
        m["lines"] += info["lines"]
        m["rows"] += info["rows"]
        if "max_t" in info:
            m["max_t"] = max(m.get("max_t", -math.inf), info["max_t"])
        for sg, (mt, line, n) in info.get("segments", {}).items():
            d = m["segments"].get(sg)
            m["segments"][sg] = [mt, line, n] if d is None else [
                max(d[0], mt), min(d[1], line), d[2] + n]
    keys = sorted(merged)
    order = {k: i for i, k in enumerate(keys)}
    offsets, first, counts = {}, {}, {}
    offset = 0
    for k in keys:
        offsets[k] = offset
        offset += merged[k]["lines"]
        for sg, (mt, line, n) in merged[k]["segments"].items():
            first.setdefault(sg, (order[k], line))
            counts[sg] = counts.get(sg, 0) + n
    segs = sorted((sg for sg in first if sg != "null"), key=lambda sg: first[sg])
    target, other_events = {}, 0
    if plan.max_segments is not None and len(segs) > plan.max_segments:
        key = plan.other_key
        other = json.dumps(list(key) if isinstance(key, tuple) else key)
        for sg in segs[plan.max_segments:]:
            target[sg] = other
            other_events += counts[sg]
    by_block = {}
    top = -math.inf
    newest = {}
    for k in keys:
        prior_scope = dict(newest)
        if plan.overall and top != -math.inf:
            prior_scope["*"] = top
        by_block[k] = {"prior": top, "prior_scope": prior_scope}
        top = max(top, merged[k].get("max_t", -math.inf))
        for sg, (mt, _, _) in merged[k]["segments"].items():
            if sg != "null":
                sc = target.get(sg, sg)
                newest[sc] = max(newest.get(sc, -math.inf), mt)
    # the order in which segments (capped) appear
    appear = {}
    for sg in segs:
        sc = target.get(sg, sg)
        if sc not in appear or first[sg] < appear[sc]:
            appear[sc] = first[sg]
    return {"order": order, "by_block": by_block, "target": target, "overall": plan.overall,
            "appear": appear, "offsets": offsets, "text": text,
            "rows": sum(m["rows"] for m in merged.values()),
            "other_events": other_events}


def _line(blocks, file, block, pos):
    """The log line (row) of position ``pos`` of a split."""
    return int(pos) + (blocks["offsets"][(file, int(block))] if blocks["text"] else 0)


def _timeline(agg, plan):
    """Evaluations (one per bucket with events, in time order) and, per scope, what the
    executors need: ``N_b - period`` per sliding window, the last closed tumbling window."""
    buckets = sorted({r["bucket"] for r in agg})
    index = {b: i for i, b in enumerate(buckets)}
    B = len(buckets)
    per = {}
    for r in agg:
        late = {}
        for blob in r["late"]:
            for k, v in json.loads(blob).items():
                late[k] = late.get(k, 0) + v
        per[(r["scope"], index[r["bucket"]])] = (r["max_t"], int(r["n"]), late)
    scopes = sorted({r["scope"] for r in agg})
    newest, counts, lates = {}, {}, {}
    for sc in scopes:
        N = np.full(B, -math.inf)
        n = np.zeros(B, dtype=np.int64)
        late = {name: np.zeros(B, dtype=np.int64) for name in list(plan.sliding) + list(plan.tumbling)}
        for i in range(B):
            v = per.get((sc, i))
            if v is not None:
                N[i] = v[0]
                n[i] = v[1]
                for name, c in v[2].items():
                    late[name][i] = c
        newest[sc] = np.maximum.accumulate(N)
        counts[sc] = np.cumsum(n)
        lates[sc] = {name: np.cumsum(a) for name, a in late.items()}
    expire, closed = {}, {}
    for sc in scopes:
        N = newest[sc]
        for name, (_, period, _) in plan.sliding.items():
            expire[(sc, name)] = N - period
        for name, (_, period, lateness, origin) in plan.tumbling.items():
            with np.errstate(invalid="ignore"):
                c = np.floor((N - lateness - origin) / period) - 1
            closed[(sc, name)] = np.where(np.isfinite(N), c, -math.inf)
    return {"buckets": buckets, "index": index, "newest": newest, "counts": counts,
            "late": lates, "expire": expire, "closed": closed, "scopes": scopes}


def _walk(monitor, plan, timeline, blocks, records):
    """Give scopes like the Monitor's each bucket's states and evaluate them with the
    Monitor's evaluator (see the module docstring); returns ``(records read, events
    counted)``."""
    from streameval.metrics.base import from_state, needs_time
    from streameval.monitor import Scope

    counts = timeline["counts"]
    appear = {}  # evaluation index -> [(first line, scope)] of segments appearing there
    for sc, first in blocks["appear"].items():
        n = counts.get(sc)
        if n is not None and n[-1] > 0:
            appear.setdefault(int(np.argmax(n > 0)), []).append((first, sc))
    scopes = {}  # scope name -> (its Scope, last closed tumbling window per name, feeds)
    order = []   # the Scopes in the Monitor's order: the whole stream, then by appearance
    windows = list(plan.sliding) + list(plan.tumbling)
    evaluator = monitor.evaluator

    def attach(key, sc):
        metrics = {}
        for name, obj in monitor.metrics.items():  # the config's order
            if name in plan.cumulative:
                metrics[name] = plan.cumulative[name].clone()
            elif name in plan.sliding:
                metrics[name] = _WindowValue(plan.sliding[name][0].clone(),
                                             period=plan.sliding[name][1])
            elif name in plan.tumbling:
                metrics[name] = _WindowValue(None, period=plan.tumbling[name][1],
                                             tumbling=True)
            else:  # a count window: the real one, fed the events in order
                metrics[name] = obj.clone()
        fresh = monitor.new_scope(key)  # the drift tests and rule instances of a new scope
        scope = Scope(key, fresh.label, metrics, fresh.drift, fresh.rules, share=False,
                      feed=False)
        feeds = [metrics[n] for n in plan.ordered] + list(scope.drift.values())
        scopes[sc] = (scope, {}, [(o.update_trusted, needs_time(o))
                                  for o in feeds])
        order.append(scope)

    last = [None]  # the count of the last evaluation: one per count, as the Monitor's

    def evaluate(n, t):
        if last[0] != n:
            last[0] = n
            evaluator.evaluate(order, n, t)

    if monitor.overall:
        attach(None, "*")
    n_events = 0
    if not timeline["buckets"]:  # no event: the local replay's flush still writes a row
        evaluate(0, None)
    it = iter(records)
    pending = next(it, None)
    nrec = 0
    for i in range(len(timeline["buckets"])):
        for _, sc in sorted(appear.get(i, [])):
            attach(_key_of(sc), sc)
        while pending is not None and pending["idx"] == i:
            r = pending
            nrec += 1
            scope, tum, feeds = scopes[r["scope"]]
            state = json.loads(r["state"])
            role = r["role"]
            if role == "cum":
                for name, st in state.items():
                    scope.metrics[name].merge(from_state(st))
            elif role == "add":
                scope.metrics[r["name"]].metric.merge(from_state(state))
                scope.metrics[r["name"]].n += state.get("events", 0)
            elif role == "sub":
                scope.metrics[r["name"]].metric.subtract(from_state(state))
                scope.metrics[r["name"]].n -= state.get("events", 0)
            elif role == "ord":
                y = _unpack(state["y"], bool)
                sc_ = _unpack(state["s"], np.float64)
                tt = _unpack(state["t"], np.float64)
                ww = None if state["w"] is None else _unpack(state["w"], np.float64)
                for update, timed in feeds:
                    if timed:
                        update(y, sc_, ww, t=tt)
                    else:
                        update(y, sc_, ww)
            elif r["k"] >= tum.get(r["name"], -math.inf):  # a tumbling window closed here
                tum[r["name"]] = r["k"]
                scope.metrics[r["name"]].metric = from_state(state)
                scope.metrics[r["name"]].last = {"n": state.get("events", 0)}
            pending = next(it, None)
        for sc, (scope, _, _) in scopes.items():
            scope.n = int(counts[sc][i])
            for name in windows:
                scope.metrics[name].late = int(timeline["late"][sc][name][i])
        n_events = int(counts["#"][i])
        evaluate(n_events, float(timeline["newest"]["#"][i]))
        for scope, _, _ in scopes.values():  # closed count windows: read by get(), not queued
            for name in plan.ordered:
                closed = getattr(scope.metrics[name], "closed", None)
                if callable(closed):
                    for _ in closed():
                        pass
    return nrec, n_events


def _summary(out, log, counts, t0, report, title):
    from streameval.replay import summarize

    return summarize(out, log, counts, t_start=t0, resumed=False, hooks=(), report=report,
                     title=title or f"streameval replay of {Path(str(log)).name} (Spark)",
                     delayed=None)
