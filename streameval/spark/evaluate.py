"""Exact metric values over a Spark DataFrame, per segment, by merging metric states.

:func:`evaluate` runs the metrics on every partition with the single-process code
(validated columns, ``update_trusted``), ships each partition's state as the metric's
JSON state, and tree-merges the states on the executors (``treeReduce``, or
``reduceByKey`` per segment): the driver receives one state per segment. Every
streameval binary metric whose state is bounded (the confusion family, log loss,
Brier, and the score-order metrics with ``bins=N``) goes this way.

Exact score-order metrics that declare a composition over score ranges (the
``ranges`` of their :class:`~streameval.metrics.base.Capabilities`: ``ROCAUC``,
``Gini``, ``AveragePrecision``, ``ROCCurve``, ``PRCurve`` without ``bins``) keep one
entry per distinct score: over all-distinct float scores that state is as large as the
data, so it is never collected. The DataFrame is range-partitioned by (segment, score
descending) instead, and each partition sends its totals only; the arithmetic is
:mod:`streameval.metrics.ranges`, beside the metrics it composes:

* AUC: partition ``i`` of a segment sends its positive and negative weight ``P_i``,
  ``N_i`` and its own Mann–Whitney statistic ``U_i`` (ties count 1/2). Ranges are
  disjoint (equal scores share a partition), so every positive of a higher range is
  above every negative of a lower one: ``U = sum_i U_i + sum_i P_i * N_(below i)``, and
  ``AUC = U / (P * N)``, Mann–Whitney's exact statistic.
* AP: a second pass gives each partition the positive and negative weight above it
  (``T_i``, ``F_i``, from the first pass's totals); it sends
  ``sum_k wp_k * (T_i + tp_k) / (T_i + F_i + tp_k + fp_k)`` over its distinct scores
  ``k``, high to low, and ``AP = sum / P``: scikit-learn's step-wise AP.
* Curves: the same offsets place each partition's points; ``curve_points=K`` keeps
  about ``K`` of them, evenly spaced in the global order (for plotting).

Which metric goes which way, whether a binned one reports ``error_bound()`` beside its
value, and which metrics are refused is read from each metric's declared capabilities,
never from its class name.

Driver memory is `O(partitions x segments)` numbers for these metrics, whatever the
number of distinct scores (:func:`evaluate` records what it collected in ``stats``);
a partition holds its score range in memory while it sorts it.

Bad rows (a null or unknown label, a null or non-finite score, a score outside a
metric's range, a null or negative weight) fail the job with the single-process
message, the column, the row and the number of bad rows, before anything is merged;
``on_error="skip"`` leaves them out, counts them and gives them back as a DataFrame.

Metrics that declare a per-score state without a composition (``InterpolatedAP`` and
``ElevenPointAP``: their precision envelope is not composed over score ranges) are
refused.

It may import pyspark (on use), pandas, numpy, :mod:`streameval.metrics`,
:mod:`streameval.validation` and :mod:`streameval.spark.columns`.
"""

from __future__ import annotations

import json
from collections import namedtuple

import numpy as np

from streameval.metrics import ranges
from streameval.metrics.base import capabilities, from_state
from streameval.spark.columns import AGG_BAD as _AGG_BAD
from streameval.spark.columns import AGG_WEIGHT as _AGG_W
from streameval.spark.columns import Spec, columns, is_null, refusal
from streameval.validation import ValidationError

__all__ = ["evaluate", "Skipped", "ranged"]

#: ``evaluate(..., on_error="skip")`` returns this: the values, the DataFrame of the
#: rows left out (the input's columns read plus ``reason``) and their number.
Skipped = namedtuple("Skipped", ["values", "rejected", "n_rejected"])


def ranged(metric):
    """Whether ``metric`` is computed over score ranges: it declares a
    :class:`~streameval.metrics.ranges.RangeComposition` (an exact binary score-order
    metric, whose per-score state would grow with the data)."""
    return capabilities(metric).ranges is not None


# ------------------------------------------------------------------ partitions


def _segment_groups(pdf, group_by, integral=()):
    """``[(segment key tuple, row positions)]``, one per segment of the partition
    (``integral``: the integer columns, which pandas reads as floats where they hold a
    null)."""
    if not group_by:
        return [((), np.arange(len(pdf)))]
    groups = pdf.groupby(list(group_by), dropna=False, sort=False).indices
    out = []
    for key, idx in groups.items():
        key = key if isinstance(key, tuple) else (key,)
        key = tuple(None if is_null(k) else (k.item() if hasattr(k, "item") else k)
                    for k in key)
        key = tuple(int(k) if c in integral and isinstance(k, float) else k
                    for k, c in zip(key, group_by))
        out.append((key, np.asarray(idx, dtype=np.int64)))
    return out


def _partition_segments(batches, spec):
    """A partition's rows as ``(partition id, frame, (y, s, w, bad), [(segment key,
    rows)])``, or None when it is empty: what both passes start from."""
    import pandas as pd
    from pyspark import TaskContext

    frames = list(batches)
    pdf = pd.concat(frames, ignore_index=True) if frames else None
    if pdf is None or not len(pdf):
        return None
    return (TaskContext.get().partitionId(), pdf, columns(pdf, spec),
            _segment_groups(pdf, spec.group_by, spec.integral))


def _first_pass(spec, templates, want_ranked):
    """The ``mapInPandas`` function of the first pass: per segment of the partition,
    the states of the mergeable metrics, the totals of the ranged ones, the bad rows."""
    import pandas as pd

    def run(batches):
        got = _partition_segments(batches, spec)
        if got is None:
            return
        part, pdf, (y, s, w, bad), groups = got
        out = []
        for key, idx in groups:
            sb = bad[idx]
            nbad = int(sb.sum())
            first = None
            if nbad:
                i = int(idx[int(np.argmax(sb))])
                arg, col, value, reason = refusal(pdf, i, spec)
                row = {c: _plain(pdf.iloc[i][c]) for c in spec.names()}
                first = json.dumps({"arg": arg, "column": col, "value": repr(value),
                                    "reason": reason,
                                    "row": repr(row), "partition": part, "index": i})
                idx = idx[~sb]
            yy, ss = y[idx], s[idx]
            ww = None if w is None else w[idx]
            states = {}
            for name, m in templates.items():
                states[name] = m.clone().update_trusted(yy, ss, ww).to_state()
            tot = ranges.range_totals(yy, ss, ww) if want_ranked else None
            out.append({"part": part, "segment": json.dumps(list(key)),
                        "states": json.dumps(states), "totals": json.dumps(tot),
                        "rows": int(len(idx)), "bad": nbad, "first_bad": first})
        yield pd.DataFrame(out, columns=["part", "segment", "states", "totals", "rows",
                                         "bad", "first_bad"])

    return run


_FIRST_SCHEMA = ("part long, segment string, states string, totals string, rows long, "
                 "bad long, first_bad string")


def _second_pass(spec, offsets, want_ap, curves, step):
    """The ``mapInPandas`` function of the second pass: given the weight above each
    (partition, segment), its AP sum and its curve points."""
    import pandas as pd

    def run(batches):
        got = _partition_segments(batches, spec)
        if got is None:
            return
        part, _, (y, s, w, bad), groups = got
        out = []
        for key, idx in groups:
            seg = json.dumps(list(key))
            off = offsets.get((part, seg))
            if off is None:
                if len(idx[~bad[idx]]):
                    raise RuntimeError(f"score range {part} of segment {seg} was empty in the "
                                       "first pass: the range-partitioned data was recomputed "
                                       "differently; persist the input DataFrame and retry")
                continue
            t0, f0, d0, p_i, n_i = off
            idx = idx[~bad[idx]]
            keys, wp, wn = ranges.distinct_desc(y[idx], s[idx], None if w is None else w[idx])
            if float(wp.sum()) != p_i or float(wn.sum()) != n_i:
                raise RuntimeError(
                    f"score range {part} of segment {seg} changed between the two passes "
                    f"(positive/negative weight {p_i}/{n_i}, now {wp.sum()}/{wn.sum()}): the "
                    "range-partitioned data was recomputed differently; persist the input "
                    "DataFrame (or make its row order deterministic) and retry")
            ap = ranges.range_ap_sum(wp, wn, t0, f0) if want_ap else None
            pts = ranges.range_points(keys, wp, wn, t0, f0, d0, step) if curves else None
            out.append({"part": part, "segment": seg, "ap": ap,
                        "points": None if pts is None else json.dumps(pts)})
        yield pd.DataFrame(out, columns=["part", "segment", "ap", "points"])

    return run


_SECOND_SCHEMA = "part long, segment string, ap double, points string"


def _plain(v):
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and v != v:
        return float("nan")
    return v


# ------------------------------------------------------------------ merging


def _merge_pair(a, b):
    """Merge ``(states, listed totals)`` pairs: states merged, totals listed."""
    return (_merge_states(a[0], b[0]), a[1] + b[1])


def _merge_states(a, b):
    """Merge two JSON state maps ``{name: state}`` (on the executors)."""
    x, y = json.loads(a), json.loads(b)
    for name, st in y.items():
        x[name] = from_state(x[name]).merge(from_state(st)).to_state()
    return json.dumps(x)


# ------------------------------------------------------------------ the driver


def _refuse(first, total):
    """Raise the single-process message of the first bad row, with where it was."""
    d = json.loads(first)
    message = (f"{d['arg']} = {d['value']}: {d['reason']} (column {d['column']!r}, row "
               f"{d['row']}: partition {d['partition']}, row {d['index']} of it; {total} "
               f"bad row{'s' if total != 1 else ''} in the DataFrame; nothing was merged)")
    raise ValidationError(d["column"], d["value"], d["reason"], message=message) from None


def evaluate(df, metrics, label="label", score="score", weight=None, group_by=None, *,
             on_error="fail", partitions=None, curve_points=None, aggregate="auto",
             stats=None):
    """The values of ``metrics`` over the rows of a Spark DataFrame.

    Exact: each value equals the single-process metric fed every row (AUC and AP equal
    scikit-learn's, ties and weights included), up to the order of float additions
    (the tests check 1e-12; see the Spark guide).

    Runtime complexity: one pass over the data for the mergeable metrics (each
    partition's ``update_trusted``, then a tree-merge of states); with exact
    score-order metrics, a range shuffle, a sort of each range and a second pass (AP
    and curves). Driver memory: one merged state per segment, plus
    `O(partitions x segments)` totals; never per-score state of exact metrics.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        One row per event.
    metrics : dict
        ``{name: streameval binary metric}``: templates (their type and parameters;
        they are not changed). All must share one label pair.
    label, score, weight : str
        Column names; ``weight=None``: every row weighs 1.
    group_by : str or list of str, optional
        Segment columns: the result is then a DataFrame with one row per segment (a
        null segment value is a segment of its own), the segment columns first and one
        column per metric.
    on_error : {"fail", "skip"}
        A bad row fails the job (``ValidationError`` with the single-process reason, the
        column, the value, the row and the count of bad rows; nothing is merged), or is
        left out: the result is then a :data:`Skipped` ``(values, rejected, n_rejected)``.
    partitions : int, optional
        Number of score ranges for exact score-order metrics (default: the session's
        ``spark.sql.shuffle.partitions``).
    curve_points : int, optional
        ``ROCCurve``/``PRCurve``: keep about this many points, evenly spaced, plus the
        first and each score range's last (at most ``curve_points + partitions + 1``);
        None: all.
    aggregate : {"auto", True, False}
        Sum the weight of equal (segment, label, score) rows on the JVM first (Spark's
        map-side partial aggregation), so that Python sees one row per distinct score
        instead of one per event: the values are the same (a metric's value depends on
        the weight at each score), far faster where scores repeat (rounded scores).
        ``"auto"``: when the first 20 000 rows hold at most 5% distinct scores. A
        DataFrame with bad rows is then evaluated row by row (for the messages).
    stats : dict, optional
        Filled with what reached the driver: ``driver_rows``, ``driver_bytes``,
        ``passes``, ``partitions``, ``aggregated``.

    Returns
    -------
    dict or DataFrame or Skipped
        ``{name: value}`` (curves: their arrays; a metric with ``bins`` adds
        ``"<name>_error_bound"``, its guaranteed bound on the distance to the exact
        value), or with ``group_by`` a DataFrame of the same columns per segment.
    """
    if not isinstance(metrics, dict) or not metrics:
        raise ValueError("metrics must be a non-empty dict {name: metric}")
    if on_error not in ("fail", "skip"):
        raise ValueError(f"on_error = {on_error!r}: expected 'fail' or 'skip'")
    if isinstance(group_by, str):
        group_by = [group_by]
    group_by = list(group_by or [])
    spec = Spec(metrics, label, score, weight, group_by)
    missing = [c for c in spec.names() if c not in df.columns]
    if missing:
        raise ValueError(f"columns {missing} are not in the DataFrame (it has {df.columns})")
    _check_types(df, spec)
    if curve_points is not None and (isinstance(curve_points, bool)
                                     or not isinstance(curve_points, int) or curve_points < 2):
        raise ValueError(f"curve_points = {curve_points!r}: expected an integer >= 2 or None")
    for n, m in metrics.items():
        why = capabilities(m).per_score
        if why:
            raise ValueError(f"metric {n!r}: {type(m).__name__} would ship one entry per "
                             f"distinct score to the driver {why}")
    if aggregate not in ("auto", True, False):
        raise ValueError(f"aggregate = {aggregate!r}: expected 'auto', True or False")
    if aggregate == "auto":
        aggregate = _few_distinct(df, score)
    if aggregate:
        out = _evaluate_aggregated(df, metrics, spec, partitions, curve_points, stats)
        if out is not None:
            return Skipped(out, _rejected(df, spec), 0) if on_error == "skip" else out
        # bad rows: evaluated row by row below, for the single-process messages
    return _evaluate(df, metrics, spec, on_error, partitions, curve_points, stats)


def _few_distinct(df, score, sample=20_000, share=0.05):
    """Whether the first ``sample`` rows hold at most ``share`` distinct scores."""
    # collect() of a limit takes the rows from the first partition(s) only (Spark's
    # incremental take), where an aggregate over the limit would shuffle from every one
    head = [r[0] for r in df.select(score).limit(sample).collect()]
    return len(head) >= 1000 and len(set(head)) <= share * len(head)




def _evaluate_aggregated(df, metrics, spec, partitions, curve_points, stats):
    """:func:`evaluate` over rows pre-aggregated by (segment, label, score) on the JVM;
    None if a group holds a bad row (the caller then goes row by row)."""
    from pyspark.sql import functions as F

    from streameval.validation import MAX_WEIGHT

    if spec.weight:
        w = F.col(spec.weight)
        bad_w = w.isNull() | F.isnan(w) | (w < 0) | (w > MAX_WEIGHT)
        wsum = F.sum(F.when(bad_w, F.lit(0.0)).otherwise(w.cast("double")))
        nbad = F.sum(F.when(bad_w, 1).otherwise(0))
    else:
        wsum, nbad = F.count(F.lit(1)).cast("double"), F.lit(0).cast("long")
    keys = list(spec.group_by) + [spec.label, spec.score]
    # not persisted: a cached plan keeps all its shuffle partitions (adaptive execution
    # does not coalesce them), so the take below would run one job per few partitions;
    # the rare case of more than DRIVER_SCORES groups scans the input again instead
    agg = df.groupBy(*keys).agg(wsum.alias(_AGG_W), nbad.alias(_AGG_BAD))
    aspec = Spec(metrics, spec.label, spec.score, _AGG_W, spec.group_by)
    aspec.integral, aspec.aggregated = spec.integral, True
    st = {}
    try:
        curves = any(_second_pass_of(m) == "points" for m in metrics.values())
        out = None
        if not (curves and curve_points):
            out = _on_driver(agg, df, metrics, aspec, st)
        if out is None:
            out = _evaluate(agg, metrics, aspec, "fail", partitions, curve_points, st)
    except ValidationError:
        return None
    if stats is not None:
        stats.update(st, aggregated=True)
    return out


#: pre-aggregated rows (one per segment, label and distinct score) up to this many are
#: evaluated on the driver by the single-process metrics: bounded by the distinct
#: scores, never by the rows (tens of MB at most)
DRIVER_SCORES = 200_000


def _on_driver(agg, df, metrics, spec, stats):
    """The values from at most :data:`DRIVER_SCORES` pre-aggregated rows, collected
    (Arrow) and fed to the single-process metrics, weighted by their summed weights;
    None if there are more (the caller takes the score ranges); ``ValidationError`` if
    one holds a bad row (the caller then goes row by row)."""
    import pandas as pd

    # collect(), not toPandas(): Arrow would first move the limited rows to one
    # partition (one more stage); these are few rows of plain values
    rows = agg.limit(DRIVER_SCORES + 1).collect()
    if len(rows) > DRIVER_SCORES:
        return None
    pdf = pd.DataFrame.from_records(rows, columns=agg.columns)
    y, s, w, bad = columns(pdf, spec) if len(pdf) else (None, None, None, np.zeros(0, bool))
    if bad.any():
        raise ValidationError(spec.score, None, "bad rows", message="bad rows")
    results = {}
    for key, idx in (_segment_groups(pdf, spec.group_by, spec.integral) if len(pdf) else []):
        results[json.dumps(list(key))] = _values(
            {name: m.clone().update_trusted(y[idx], s[idx], w[idx])
             for name, m in metrics.items()})
    stats.update(driver_rows=len(pdf), driver_bytes=int(pdf.memory_usage(deep=True).sum()),
                 passes=1, partitions=0)
    segments = _segments_in_order([{"segment": k} for k in results], spec.group_by)
    return _result(df, spec, metrics, segments, results)


def _values(objs):
    """``{name: value}`` of metric objects, a binned one's bound beside its value."""
    out = {}
    for name, obj in objs.items():
        out[name] = _value(obj)
        if capabilities(obj).error_bound:
            out[f"{name}_error_bound"] = float(obj.error_bound())
    return out


def _result(df, spec, metrics, segments, results):
    """What :func:`evaluate` returns from ``{segment: {name: value}}``: the tidy
    DataFrame with ``group_by``, else the values of the one segment (of a fresh metric
    when the DataFrame was empty)."""
    names = _names(metrics)
    if spec.group_by:
        return _frame(df.sparkSession, df, list(spec.group_by), segments, results, names,
                      metrics)
    got = results.get(json.dumps([]))
    return {n: got[n] for n in names} if got else {n: _empty_value(metrics[n]) for n in metrics}


def _names(metrics):
    """Result columns: the metrics' order, each bound beside its binned value."""
    names = []
    for n in metrics:
        names.append(n)
        if capabilities(metrics[n]).error_bound:
            names.append(f"{n}_error_bound")
    return names


def _evaluate(df, metrics, spec, on_error, partitions, curve_points, stats):
    """:func:`evaluate` after the checks: one row per event, or per aggregated score."""
    from pyspark.sql import functions as F

    group_by, score = list(spec.group_by), spec.score
    exact = {n: m for n, m in metrics.items() if ranged(m)}
    mergeable = {n: m.clone() for n, m in metrics.items() if n not in exact}
    stats = stats if stats is not None else {}
    spark = df.sparkSession
    extra = [_AGG_BAD] if getattr(spec, "aggregated", False) else []
    data = df.select(*spec.names(), *extra,
                     *[F.isnull(c).alias(f) for f, c in spec.flags()])
    passes = 1
    if exact:
        k = partitions or int(spark.conf.get("spark.sql.shuffle.partitions"))
        keys = [F.col(g).asc_nulls_first() for g in group_by] + [F.col(score).desc_nulls_last()]
        data = data.repartitionByRange(int(k), *keys)
        data = data.persist()
    try:
        first = data.mapInPandas(_first_pass(spec, mergeable, bool(exact)), _FIRST_SCHEMA)
        # one job: per segment, the states tree-merged on the executors, with the
        # per-range totals and bad-row counts beside them (not merged: listed)
        pairs = first.rdd.map(lambda r: (r["segment"], (r["states"], [
            (r["part"], r["totals"], r["rows"], r["bad"], r["first_bad"])])))
        if group_by:
            merged = dict(pairs.reduceByKey(_merge_pair).collect())
        else:
            try:
                key, value = pairs.treeReduce(lambda a, b: (a[0], _merge_pair(a[1], b[1])))
                merged = {key: value}
            except ValueError as e:  # an empty DataFrame: no partition sent anything
                if "empty RDD" not in str(e):
                    raise
                merged = {}
        summary = [{"segment": seg, "part": part, "totals": tot, "rows": rows, "bad": nbad,
                    "first_bad": fb}
                   for seg, (_, listed) in merged.items()
                   for part, tot, rows, nbad, fb in listed]
        nbytes = sum(len(st) + sum(len(x[1] or "") + 40 for x in listed)
                     for st, listed in merged.values())
        bad = sum(r["bad"] for r in summary)
        if bad and on_error == "fail":
            firsts = [r for r in summary if r["bad"]]
            firsts.sort(key=lambda r: (r["part"], json.loads(r["first_bad"])["index"]))
            _refuse(firsts[0]["first_bad"], bad)
        merged = {seg: st for seg, (st, _) in merged.items()}
        segments = _segments_in_order(summary, group_by)
        results = {}
        for seg in segments:
            st = json.loads(merged[seg]) if seg in merged else {}
            results[seg] = _values({name: from_state(st[name]) if name in st else m.clone()
                                    for name, m in mergeable.items()})
        if exact:
            offsets, totals = _offsets(summary)
            want_ap = any(_second_pass_of(m) == "ap" for m in exact.values())
            curves = any(_second_pass_of(m) == "points" for m in exact.values())
            sums, points = {}, {}
            if want_ap or curves:
                passes += 1
                step = _step(curve_points, totals) if curves else 1
                rows = data.mapInPandas(_second_pass(spec, offsets, want_ap, curves, step),
                                        _SECOND_SCHEMA).collect()
                for r in rows:
                    nbytes += 40 + len(r["points"] or "")
                    if r["ap"] is not None:
                        sums.setdefault(r["segment"], []).append(r["ap"])
                    if r["points"] is not None:
                        points.setdefault(r["segment"], []).append((r["part"], r["points"]))
            for seg in segments:
                P, N, U, _ = totals.get(seg, (0.0, 0.0, 0.0, 0))
                pts = [json.loads(blob) for _, blob in sorted(points.get(seg) or [])]
                for name, m in exact.items():
                    results[seg][name] = capabilities(m).ranges.value(P, N, U, sums.get(seg),
                                                                      pts)
        stats.update(driver_rows=len(summary), driver_bytes=nbytes, passes=passes,
                     partitions=len({r["part"] for r in summary}), aggregated=False)
    finally:
        if exact:
            data.unpersist()
    out = _result(df, spec, metrics, segments, results)
    if on_error == "skip":
        return Skipped(out, _rejected(df, spec), bad)
    return out


_NUMBERS = ("ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType")
_KEYS = ("StringType", "ByteType", "ShortType", "IntegerType", "LongType", "BooleanType")


def _check_types(df, spec):
    """Refuse, before any job, columns the single-process path would refuse value by
    value: scores and weights that are not numbers (strings, decimals), and segment
    columns whose values a JSON row cannot hold as such (dates, decimals, floats:
    NaN and null would be one segment)."""
    types = {f.name: type(f.dataType).__name__ for f in df.schema.fields}
    for col, what in ((spec.score, "scores"), (spec.weight, "weights")):
        if col and types[col] not in _NUMBERS:
            raise ValueError(
                f"column {col!r} is {types[col].replace('Type', '').lower()}: {what} must be "
                "numbers (integer or floating-point columns; update_many refuses a string "
                "or a decimal score: 'score must be a finite number'); cast it")
    for col in spec.group_by:
        if types[col] not in _KEYS:
            raise ValueError(
                f"group_by column {col!r} is {types[col].replace('Type', '').lower()}: segment "
                "columns must be strings, integers or booleans (as the Monitor's segments); "
                "cast it")
    spec.integral = {c for c in spec.group_by
                     if types[c] in ("ByteType", "ShortType", "IntegerType", "LongType")}


def _segments_in_order(summary, group_by):
    """Segment keys (JSON) in a stable order: sorted by their values (nulls first)."""
    segs = {r["segment"] for r in summary}
    if not group_by:
        return [json.dumps([])]
    return sorted(segs, key=lambda s: [(v is not None, repr(type(v)), v)
                                       for v in json.loads(s)])


def _second_pass_of(metric):
    """What a ranged metric needs from the second pass (None, "ap", "points"); None
    for a metric merged by its state."""
    composition = capabilities(metric).ranges
    return None if composition is None else composition.second_pass


def _offsets(summary):
    """``{(part, segment): (pos weight above, neg weight above, points above, P_i,
    N_i)}`` and ``{segment: (P, N, U, points)}`` from the first pass's per-range totals
    (:func:`streameval.metrics.ranges.compose`; partition ids follow the score ranges,
    high to low)."""
    by_seg = {}
    for r in summary:
        tot = json.loads(r["totals"]) if r["totals"] else None
        if tot is None:
            continue
        by_seg.setdefault(r["segment"], []).append((r["part"], tot))
    offsets, totals = {}, {}
    for seg, parts in by_seg.items():
        mine, totals[seg] = ranges.compose(parts, where=f"segment {seg}")
        offsets.update(((p, seg), off) for p, off in mine.items())
    return offsets, totals


def _step(curve_points, totals):
    if not curve_points:
        return 1
    most = max((t[3] for t in totals.values()), default=0)
    return max(1, -(-most // (curve_points - 1)))


def _value(obj):
    v = obj.get()
    if isinstance(v, tuple):
        return tuple(np.asarray(a) for a in v)
    return float(v)


def _empty_value(m):
    return _value(m.clone())


def _frame(spark, df, group_by, segments, results, names, metrics):
    """The tidy per-segment DataFrame: segment columns (their input types), then one
    column per value (double; curves: an array of three arrays)."""
    from pyspark.sql import types as T

    fields = [df.schema[g] for g in group_by]
    fields = [T.StructField(f.name, f.dataType, True) for f in fields]
    sample = results[segments[0]] if segments else {}
    for n in names:
        curve = isinstance(sample.get(n), tuple)
        fields.append(T.StructField(
            n, T.ArrayType(T.ArrayType(T.DoubleType())) if curve else T.DoubleType(), True))
    rows = []
    for seg in segments:
        vals = results[seg]
        row = list(json.loads(seg))
        for n in names:
            v = vals[n]
            if isinstance(v, tuple):
                row.append([np.asarray(a, float).tolist() for a in v])
            else:
                row.append(None if v != v else float(v))
        rows.append(row)
    return spark.createDataFrame(rows, T.StructType(fields))


def _rejected(df, spec):
    """The rows a run with ``on_error="skip"`` leaves out, with ``reason`` (lazy)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    names = spec.names()
    schema = T.StructType([df.schema[c] for c in names]
                          + [T.StructField("reason", T.StringType(), False)])

    def run(batches):
        for pdf in batches:
            if not len(pdf):
                continue
            _, _, _, bad = columns(pdf, spec)
            idx = np.flatnonzero(bad)
            if not len(idx):
                continue
            out = pdf.iloc[idx][names].copy()
            reasons = []
            for i in idx.tolist():
                arg, col, value, reason = refusal(pdf, i, spec)
                reasons.append(f"{arg} = {value!r}: {reason} (column {col!r})")
            out["reason"] = reasons
            yield out

    data = df.select(*names, *[F.isnull(c).alias(f) for f, c in spec.flags()])
    return data.mapInPandas(run, schema)
