"""Exact AUC and AP on Spark: ``streameval.spark.evaluate`` against Spark's
``BinaryClassificationMetrics`` and scikit-learn, 10 000 000 rows, ``local[2]``.

Methods, each timed in a fresh subprocess (its own SparkSession and JVM, so that peak
RSS is that method's alone), from the Parquet read to the values on the driver:

* ``streameval``: ``streameval.spark.evaluate`` of ROCAUC, AveragePrecision and the
  confusion family at threshold 0.5 (precision, recall, F1, accuracy) in one call;
* ``spark_exact``: ``pyspark.mllib.evaluation``'s ``BinaryClassificationMetrics`` with
  ``numBins=0`` (exact curves), ``areaUnderROC`` and ``areaUnderPR``;
* ``spark_binned``: the same with ``numBins=1000`` (Spark's default; approximate);
* ``spark_pyrdd``: PySpark's own wrapper, ``BinaryClassificationMetrics(rdd)`` over a
  Python RDD of ``(score, label)`` tuples, as its documentation shows;
* ``sklearn``: ``roc_auc_score`` and ``average_precision_score`` on the rows collected
  to the driver with ``toPandas()`` (arrow); the wall time includes the collection, and
  the calls alone are reported beside it.

Spark's two modes. PySpark's wrapper takes no ``numBins``: it builds a DataFrame and
calls the Scala constructor that takes one, which uses the default of 1000 bins, so
``BinaryClassificationMetrics(rdd)`` from Python is the *binned* mode (checked here
with ``numBins()`` on the Java object), and its rows are pickled through Python
workers. ``spark_exact`` and ``spark_binned`` therefore build the ``RDD[(score,
label)]`` on the JVM (``Dataset.as(Encoders.tuple(...)).rdd()``) and call the
``(RDD, numBins)`` constructor through py4j: Spark's fastest path, no Python workers.
Spark's ``areaUnderROC`` is a trapezoid over the distinct thresholds: exact with
``numBins=0`` (ties get half credit, as Mann-Whitney). Its ``areaUnderPR`` is a
trapezoid too, starting from (recall 0, precision of the first point), not average
precision: its distance from scikit-learn's AP is a different definition, not a
rounding error.

Data: generated inside Spark (``spark.range`` with ``rand``/``randn`` columns, the
driver never holds it): label 1 with probability 0.3, score
``sigmoid(-1 + 1.5 * label + N(0, 1))`` (AUC about 0.855): all-distinct doubles, and
the same rows with the score rounded to 3 decimals (at most 1 001 distinct values).
Each dataset is written once to Parquet (16 files) and every method reads it back:
each starts from the same on-disk data with a fresh JVM and no Spark cache (the OS
page cache is warm after the first read: cache-cold-ish). ``--weighted`` adds a float
weight column ``0.5 + 2 * rand`` used by every method.

Session: ``local[2]`` on a 2-core machine, ``spark.driver.memory=8g``,
``spark.sql.shuffle.partitions=16`` and ``spark.default.parallelism=16`` (streameval's
16 score ranges; Spark's ``combineByKey``/``sortByKey`` take 16 partitions too), arrow
on, UI off. One run per cell (10M rows is slow), wall clock: expect +-10-20% between
runs on a shared machine.

Memory columns: ``driver MB`` is the Python driver's peak RSS (``ru_maxrss`` of the
subprocess); ``JVM MB`` is the peak RSS (``VmHWM``) of the java process, which in local
mode is the driver JVM *and* the executors (shuffles, caches, sorts all land there);
``worker MB`` is the largest peak RSS of one Python worker (``mapInPandas``, the
Python RDD), two of which run at a time. The JVM's RSS follows its heap's growth
(garbage collection decides when to reclaim), so it says what the JVM took, not what
it needed.

At 10**10 rows (on paper, from the shuffle sizes and memory measured at 10**7). The
data is then about 80 GB of Parquet (78 MB at 10**7, all-distinct scores) and every
method needs a cluster. streameval's exact AUC/AP shuffles every row once, by score range
(``repartitionByRange``: 101 MB written at 10**7 all-distinct rows, 50 MB with
3-decimal scores, so about 100 GB and 50 GB at 10**10), caches the ranged
rows (``persist``: memory and disk, about the size of the data) and reads them twice
(first pass: per-range totals and ``U_i``; second pass: AP given the weight above each
range). The driver receives ``O(ranges x segments)`` numbers (3 KB for 16 ranges here,
about 190 bytes a range: 2 MB for 10 000 ranges) and one merged confusion state,
whatever the number of distinct scores; the Python driver stayed at 183 MB from 10**6
to 10**7 rows. The limit moves to the executors: each range is concatenated and sorted
in one Python worker (about 120 bytes a row above the worker's 155 MB of imports:
229 MB at 625 000 rows a range), so the number of ranges must grow with the data: the
default, ``spark.sql.shuffle.partitions`` (200 on most clusters), would put 5 x 10**7
rows (~6 GB) in each worker; ``partitions=10_000`` keeps them at 10**6 rows (~120 MB).
Equal scores share a range, so 3-decimal scores give at most 1 001 non-empty ranges
whatever ``partitions`` is: 10**7 rows a range on average, and the most frequent value
alone (0.18% of the rows here) puts 1.8 x 10**7 rows (~2 GB) in one worker. Spark's
exact mode (``numBins=0``) shuffles twice (``combineByKey`` by score, then
``sortByKey``: 128 + 117 MB at 10**7 all-distinct rows, so ~250 GB at 10**10) and
keeps one Java object per distinct score in the executors (its JVM grew to 7.5 GB at
10**7 rows, against 1.2 GB for streameval's); with 3-decimal scores its map-side
combine leaves at most 1 001 keys per task and it shuffles almost nothing, at any
size. Its driver collects one cumulative count per partition (``O(partitions)``).
Binned mode (1 000 bins) bins after the same ``combineByKey`` and ``sortByKey``: it
saves the curve's size, not the shuffle. scikit-learn needs every row in one process
(1.16 GB of driver RSS at 10**7 rows, about 115 bytes a row: ~1.2 TB at 10**10):
impossible, and what ``evaluate`` exists to avoid.

Results: ``benchmarks/results/bench_spark.json`` (``--json PATH`` writes elsewhere), shown on
the documentation's performance page with the parameters, machine and versions of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _results as R

SEED = 20240611
#: score ranges of ``evaluate`` and shuffle width of every method (8 per core: each
#: range of 10M all-distinct rows is then 625 000 rows, sorted in one Python worker)
PARTITIONS = 16
DRIVER_MEMORY = "8g"
FILES = 16
THRESHOLD = 0.5
METHODS = ("streameval", "spark_exact", "spark_binned", "spark_pyrdd", "sklearn")
#: methods run at every size of ``--rows`` (the others at the largest only); sklearn
#: is the reference of every size's distances
SCALING = ("streameval", "spark_exact", "sklearn")
KINDS = {"distinct": "all-distinct scores", "dec3": "3-decimal scores"}
EXACT_TOL = 1e-12
LABELS = {
    "streameval": "streameval.spark.evaluate (AUC+AP+confusion)",
    "spark_exact": "Spark BinaryClassificationMetrics numBins=0",
    "spark_binned": "Spark BinaryClassificationMetrics numBins=1000",
    "spark_pyrdd": "PySpark BinaryClassificationMetrics(rdd) [1000]",
    "sklearn": "sklearn on toPandas() (arrow)",
}


# ----------------------------------------------------------------- in a subprocess


def session():
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench_spark")
        .config("spark.driver.memory", DRIVER_MEMORY)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(PARTITIONS))
        .config("spark.default.parallelism", str(PARTITIONS))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _proc_table():
    """``{pid: (ppid, comm, cmdline)}`` of every process (from /proc)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        out[int(d)] = (ppid, comm, cmd)
    return out


class Watcher(threading.Thread):
    """Samples the peak RSS (``VmHWM``) of this process's descendants every 0.2 s:
    the java process (driver JVM and executors in local mode) and the Python workers
    (which may exit before the end)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peaks = {}  # pid -> (kind, peak kB)
        self.stop = threading.Event()

    def sample(self):
        me = os.getpid()
        table = _proc_table()
        children = {}
        for pid, (ppid, _, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        todo, seen = list(children.get(me, [])), set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            todo += children.get(pid, [])
            _, comm, cmd = table[pid]
            kind = ("java" if comm == "java" else
                    "worker" if "pyspark" in cmd and ("daemon" in cmd or "worker" in cmd) else
                    None)
            if kind is None:
                continue
            kb = R.proc_status_kb(pid, "VmHWM").get("VmHWM")
            if kb is not None:
                old = self.peaks.get(pid, (kind, 0))[1]
                self.peaks[pid] = (kind, max(old, kb))

    def run(self):
        while not self.stop.wait(0.2):
            self.sample()

    def result(self):
        self.stop.set()
        self.sample()
        jvm = [kb for k, kb in self.peaks.values() if k == "java"]
        work = [kb for k, kb in self.peaks.values() if k == "worker"]
        return (max(jvm) / 1024 if jvm else None, max(work) / 1024 if work else None,
                len(work))


def _stage_times(spark):
    """Every stage's name, wall seconds, summed task seconds, shuffle bytes (the
    status store: what the UI would show, with the UI off)."""
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    store = sc._jsc.sc().statusStore()
    out = []
    jobs = sorted(tracker.getJobIdsForGroup(None))
    sids = sorted({s for j in jobs for s in (tracker.getJobInfo(j).stageIds or [])})
    for sid in sids:
        try:
            s = store.lastStageAttempt(sid)
        except Exception:  # never run (skipped: its shuffle output was reused)
            continue
        sub, done = s.submissionTime(), s.completionTime()
        if sub.isEmpty() or done.isEmpty():
            continue
        out.append({"id": sid, "name": s.name(), "tasks": s.numTasks(),
                    "status": str(s.status()),
                    "wall": (done.get().getTime() - sub.get().getTime()) / 1e3,
                    "task_s": s.executorRunTime() / 1e3,
                    "shuffle_write_mb": s.shuffleWriteBytes() / 2**20,
                    "shuffle_read_mb": s.shuffleReadBytes() / 2**20,
                    "input_mb": s.inputBytes() / 2**20})
    return out


def generate(root, n, weighted):
    """Write ``root/distinct`` and ``root/dec3`` (Parquet, the same rows): ``{kind:
    facts}``."""
    from pyspark.sql import functions as F

    spark = session()
    t0 = time.perf_counter()
    base = spark.range(n, numPartitions=FILES)
    label = (F.rand(SEED) < 0.3).cast("int")
    df = base.select(label.alias("label"), F.randn(SEED + 1).alias("z"),
                     *([(0.5 + 2.0 * F.rand(SEED + 2)).alias("w")] if weighted else []))
    score = 1.0 / (1.0 + F.exp(-(F.lit(-1.0) + 1.5 * F.col("label") + F.col("z"))))
    cols = ["label", score.alias("score")] + (["w"] if weighted else [])
    df.select(*cols).write.mode("overwrite").parquet(str(root / "distinct"))
    src = spark.read.parquet(str(root / "distinct"))
    src.select("label", F.round("score", 3).alias("score"), *(["w"] if weighted else [])) \
        .write.mode("overwrite").parquet(str(root / "dec3"))
    facts = {}
    for kind in KINDS:
        d = spark.read.parquet(str(root / kind))
        r = d.agg(F.count("*").alias("n"), F.sum("label").alias("pos"),
                  F.countDistinct("score").alias("distinct")).collect()[0]
        size = sum(p.stat().st_size for p in (root / kind).glob("*.parquet"))
        facts[kind] = {"rows": r["n"], "positives": r["pos"], "distinct": r["distinct"],
                       "mb": size / 2**20}
    facts["seconds"] = time.perf_counter() - t0
    spark.stop()
    return facts


def _metrics():
    import streameval as se

    t = THRESHOLD
    return {"auc": se.ROCAUC(), "ap": se.AveragePrecision(),
            "precision": se.Precision(threshold=t), "recall": se.Recall(threshold=t),
            "f1": se.F1(threshold=t), "accuracy": se.Accuracy(threshold=t)}


def _spark_jvm_metrics(spark, df, bins, weighted):
    """Spark's BinaryClassificationMetrics(RDD[(score, label[, weight])], bins), the RDD
    built on the JVM (no Python rows)."""
    from pyspark.sql import functions as F

    jvm = spark._jvm
    E = jvm.org.apache.spark.sql.Encoders
    cols = [F.col("score").cast("double"), F.col("label").cast("double")]
    encs = [E.scalaDouble(), E.scalaDouble()]
    if weighted:
        cols.append(F.col("w").cast("double"))
        encs.append(E.scalaDouble())
    jdf = df.select(*cols)._jdf
    jrdd = getattr(jdf, "as")(E.tuple(*encs)).rdd()
    m = jvm.org.apache.spark.mllib.evaluation.BinaryClassificationMetrics(jrdd, bins)
    assert m.numBins() == bins
    out = {"auc": m.areaUnderROC(), "ap": m.areaUnderPR(), "num_bins": m.numBins()}
    m.unpersist()
    return out


def _time_actions():
    """Time the driver's Spark actions (``DataFrame.collect``, ``RDD.collect``,
    ``treeReduce``, ...), outermost calls only: where a method's wall time goes, without
    touching its code. Returns the list the timings are appended to."""
    import functools

    from pyspark.rdd import RDD
    from pyspark.sql.classic.dataframe import DataFrame

    log, depth = [], [0]
    # the wrapper's code is compiled under a file name in pyspark's directory, so that
    # PySpark's call sites (the stages' names) still name the caller, not this file
    import pyspark

    src = (
        "def make(orig, label, log, depth, clock, wraps):\n"
        "    @wraps(orig)\n"
        "    def NAME(self, *a, **k):\n"
        "        depth[0] += 1\n"
        "        t0 = clock()\n"
        "        try:\n"
        "            return orig(self, *a, **k)\n"
        "        finally:\n"
        "            depth[0] -= 1\n"
        "            if depth[0] == 0:\n"
        "                log.append((label, clock() - t0))\n"
        "    return NAME\n")
    where = os.path.join(os.path.dirname(pyspark.__file__), "_bench_timer.py")

    def wrap(cls, name):
        ns = {}
        exec(compile(src.replace("NAME", name), where, "exec"), ns)
        setattr(cls, name, ns["make"](getattr(cls, name), f"{cls.__name__}.{name}", log,
                                      depth, time.perf_counter, functools.wraps))

    for name in ("collect", "toPandas", "count", "first", "take"):
        wrap(DataFrame, name)
    for name in ("collect", "treeReduce", "reduce", "isEmpty", "count", "first", "take"):
        wrap(RDD, name)
    return log


def _compute(spark, method, path, weighted, extra):
    """``(values, DataFrame read)`` of one method, from the Parquet read on."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    df = spark.read.parquet(path)
    if method == "streameval":
        from streameval.spark import evaluate

        st = {}
        vals = evaluate(df, _metrics(), label="label", score="score",
                        weight="w" if weighted else None, stats=st)
        extra["stats"] = st
    elif method == "spark_exact":
        vals = _spark_jvm_metrics(spark, df, 0, weighted)
    elif method == "spark_binned":
        vals = _spark_jvm_metrics(spark, df, 1000, weighted)
    elif method == "spark_pyrdd":
        from pyspark.mllib.evaluation import BinaryClassificationMetrics

        cols = [F.col("score").cast("double"), F.col("label").cast("double")]
        if weighted:
            cols.append(F.col("w").cast("double"))
        m = BinaryClassificationMetrics(df.select(*cols).rdd.map(tuple))
        vals = {"auc": m.areaUnderROC, "ap": m.areaUnderPR,
                "num_bins": m._java_model.numBins()}
        m.unpersist()
    elif method == "sklearn":
        import numpy as np
        from sklearn import metrics as skm

        pdf = df.toPandas()
        t1 = time.perf_counter()
        y = pdf["label"].to_numpy()
        s = pdf["score"].to_numpy()
        w = pdf["w"].to_numpy() if weighted else None
        del pdf
        vals = {"auc": skm.roc_auc_score(y, s, sample_weight=w),
                "ap": skm.average_precision_score(y, s, sample_weight=w)}
        t2 = time.perf_counter()
        extra["collect_s"] = t1 - t0
        extra["calls_s"] = t2 - t1
        pred = (s >= THRESHOLD).astype(np.int8)
        vals.update(precision=skm.precision_score(y, pred, sample_weight=w),
                    recall=skm.recall_score(y, pred, sample_weight=w),
                    f1=skm.f1_score(y, pred, sample_weight=w),
                    accuracy=skm.accuracy_score(y, pred, sample_weight=w))
    else:
        raise SystemExit(f"unknown method {method!r}")
    return vals, df


def run_one(method, path, weighted, stages, warm=False):
    """Time one method on the Parquet dataset at ``path``; a JSON-able dict."""
    actions = _time_actions() if stages else None
    watcher = Watcher()
    watcher.start()
    t_start = time.perf_counter()
    spark = session()
    t_session = time.perf_counter() - t_start
    extra = {}
    t0 = time.perf_counter()
    vals, df = _compute(spark, method, path, weighted, extra)
    wall = time.perf_counter() - t0
    if stages:
        extra["actions"] = list(actions)
        extra["stages"] = _stage_times(spark)
    if warm:  # the same again in this JVM: JIT compiled, Python workers started
        t1 = time.perf_counter()
        _compute(spark, method, path, weighted, {})
        extra["warm_wall"] = time.perf_counter() - t1
    jvm_mb, worker_mb, workers = watcher.result()
    extra["input_partitions"] = df.rdd.getNumPartitions()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    spark.stop()
    return {"method": method, "wall": wall, "session_s": t_session,
            "driver_mb": ru.ru_maxrss / 1024, "driver_cpu": ru.ru_utime + ru.ru_stime,
            "jvm_mb": jvm_mb, "worker_mb": worker_mb, "workers": workers,
            "values": {k: float(v) for k, v in vals.items()}, **extra}


# ----------------------------------------------------------------- the main process


def _child(argv, timeout):
    p = subprocess.run([sys.executable, os.path.abspath(__file__), *argv],
                       capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, PYTHONHASHSEED="0"))
    if p.returncode != 0:
        tail = "\n".join(p.stderr.strip().splitlines()[-15:])
        return {"error": f"exit {p.returncode}: {tail}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _checkout():
    """The commit measured and whether streameval/spark/ differs from it (read-only)."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "streameval/spark"], capture_output=True, text=True).stdout
    except OSError:
        return "checkout: unknown (no git)"
    return f"checkout {head}" + (" + uncommitted changes in streameval/spark" if dirty.strip()
                                 else "")


def _mb(v):
    return "-" if v is None else f"{v:,.0f}"


def _err(v, ref):
    if v is None or ref is None:
        return "-"
    return f"{abs(v - ref):.1e}"


def print_kind_table(kind, results, sizes, data):
    print(f"\n### {KINDS[kind]}\n")
    for n in sizes:
        f = data[n][kind]
        print(f"- {n:,} rows: {f['positives']:,} positives, {f['distinct']:,} distinct "
              f"scores, Parquet {f['mb']:.0f} MB")
    print()
    print("| method | rows | wall s | driver RSS MB | JVM RSS MB | worker RSS MB | AUC | AP "
          "| \\|ΔAUC\\| vs sklearn | \\|ΔAP\\| vs sklearn |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        ref = results.get((n, kind, "sklearn"), {}).get("values", {})
        for m in METHODS:
            r = results.get((n, kind, m))
            if r is None:
                continue
            if "error" in r:
                print(f"| {LABELS[m]} | {n:,} | failed | | | | | | | |")
                continue
            v = r["values"]
            ap_note = "" if m in ("streameval", "sklearn") else " (trapezoid)"
            wall = f"{r['wall']:.1f}"
            if m == "sklearn":
                wall += f" ({r['collect_s']:.1f} + {r['calls_s']:.1f})"
            if "warm_wall" in r:
                wall += f"; warm {r['warm_wall']:.1f}"
            print(f"| {LABELS[m]} | {n:,} | {wall} | {_mb(r['driver_mb'])} | "
                  f"{_mb(r['jvm_mb'])} | {_mb(r['worker_mb'])} | {v['auc']:.12f} | "
                  f"{v['ap']:.12f}{ap_note} | {_err(v['auc'], ref.get('auc'))} | "
                  f"{_err(v['ap'], ref.get('ap'))} |")
    print("\nwall: from the Parquet read to the values on the driver, in a fresh JVM "
          "(session start excluded); sklearn's: (collection with toPandas + the two calls); "
          "warm: the same again in that JVM. Spark's AP column is areaUnderPR, a "
          "trapezoid: another definition than AP.")


def print_scaling(results, sizes, kinds):
    if len(sizes) < 2:
        return
    print("\n### Scaling (wall s; per 1M rows in brackets)\n")
    head = "| method | scores | " + " | ".join(f"{n:,}" for n in sizes) + \
        f" | {sizes[-1] // sizes[0]}x rows: time ratio |"
    print(head)
    print("|---|---|" + "---:|" * (len(sizes) + 1))
    for m in METHODS:
        for kind in kinds:
            rs = [results.get((n, kind, m)) for n in sizes]
            if not any(r and "wall" in r for r in rs):
                continue
            cells = [f"{r['wall']:.1f} ({r['wall'] / n * 1e6:.2f})" if r and "wall" in r
                     else "-" for r, n in zip(rs, sizes)]
            a, b = rs[0], rs[-1]
            ratio = f"{b['wall'] / a['wall']:.1f}x" if a and b and "wall" in a and "wall" in b \
                else "-"
            print(f"| {LABELS[m]} | {kind} | " + " | ".join(cells) + f" | {ratio} |")


def print_verdicts(results, sizes, kinds, data):
    print("\n### Targets\n")
    lines = []
    for n in sizes:
        for kind in kinds:
            se_ = results.get((n, kind, "streameval"))
            sk = results.get((n, kind, "sklearn"))
            ex = results.get((n, kind, "spark_exact"))
            bn = results.get((n, kind, "spark_binned"))
            where = f"{kind}, {n:,} rows"
            if se_ and sk and "values" in se_ and "values" in sk:
                v, r = se_["values"], sk["values"]
                worst = max(abs(v[k] - r[k]) for k in ("auc", "ap"))
                ok = worst <= EXACT_TOL
                lines.append(f"{'PASS' if ok else 'FAIL'} exact: streameval AUC and AP equal "
                             f"sklearn's within {EXACT_TOL:g} ({where}): |ΔAUC| = "
                             f"{abs(v['auc'] - r['auc']):.1e}, |ΔAP| = "
                             f"{abs(v['ap'] - r['ap']):.1e}")
                conf = max(abs(v[k] - r[k]) for k in ("precision", "recall", "f1", "accuracy"))
                lines.append(f"{'PASS' if conf <= EXACT_TOL else 'FAIL'} exact: streameval "
                             f"precision, recall, F1, accuracy at {THRESHOLD} equal sklearn's "
                             f"({where}): max |Δ| = {conf:.1e}")
                if bn and "values" in bn:
                    b = bn["values"]
                    d_auc, d_ap = abs(b["auc"] - r["auc"]), abs(b["ap"] - r["ap"])
                    ok = worst <= EXACT_TOL
                    why = ("" if d_auc > EXACT_TOL else
                           f"; Spark's 1000 bins are exact here too: "
                           f"{data[n][kind]['distinct']:,} distinct scores")
                    lines.append(f"{'PASS' if ok else 'FAIL'} exact where Spark is "
                                 f"approximate ({where}): Spark numBins=1000 |ΔAUC| = "
                                 f"{d_auc:.1e}, |areaUnderPR - AP| = {d_ap:.1e}; streameval "
                                 f"{worst:.1e}{why}")
            if se_ and ex and "wall" in se_ and "wall" in ex:
                ok = se_["wall"] <= ex["wall"]
                lines.append(f"{'PASS' if ok else 'FAIL'} speed: streameval {se_['wall']:.1f} s "
                             f"<= Spark exact {ex['wall']:.1f} s ({where}; ratio "
                             f"{se_['wall'] / ex['wall']:.2f})")
    for line in lines:
        print(line)


def print_stages(results, sizes, kinds):
    n = sizes[-1]
    for kind in kinds:
        for m in METHODS:
            r = results.get((n, kind, m))
            if not r or not r.get("stages"):
                continue
            print(f"\nStages of {LABELS[m]}, {kind}, {n:,} rows (wall s of the stage; task s "
                  f"summed over tasks; shuffle MB):\n")
            if r.get("actions"):
                print("driver actions (outermost, wall s): " + ", ".join(
                    f"{a} {t:.1f}" for a, t in r["actions"]) + "\n")
            print("| stage | name | tasks | wall s | task s | shuffle write MB | "
                  "shuffle read MB |")
            print("|---:|---|---:|---:|---:|---:|---:|")
            for s in r["stages"]:
                print(f"| {s['id']} | {s['name']} | {s['tasks']} | {s['wall']:.1f} | "
                      f"{s['task_s']:.1f} | {s['shuffle_write_mb']:.0f} | "
                      f"{s['shuffle_read_mb']:.0f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1000000,3000000,10000000",
                    help="comma-separated sizes; all methods at the largest, "
                         f"{', '.join(SCALING)} at each (default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="200 000 rows, a smoke run")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help=f"comma-separated, of {', '.join(METHODS)}")
    ap.add_argument("--scores", default=",".join(KINDS), help="distinct, dec3 or both")
    ap.add_argument("--weighted", action="store_true", help="a float weight column")
    ap.add_argument("--stages", action="store_true",
                    help="print the Spark stages (wall, task time, shuffle) of each method "
                         "at the largest size")
    ap.add_argument("--warm", action="store_true",
                    help="run each method a second time in the same JVM and report that "
                         "wall time too (JIT compiled, Python workers started)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the Parquet data in DIR")
    ap.add_argument("--timeout", type=float, default=3600.0,
                    help="seconds per method run (default %(default)s)")
    # internal: one method (or the data) in this process
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--path", default=None, help=argparse.SUPPRESS)
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)

    if args.one == "generate":
        facts = generate(Path(args.path), int(args.rows), args.weighted)
        print(json.dumps(facts))
        return
    if args.one is not None:
        print(json.dumps(run_one(args.one, args.path, args.weighted, args.stages,
                                 args.warm)))
        return

    sizes = [200_000] if args.quick else sorted(int(x) for x in args.rows.split(","))
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    kinds = [k.strip() for k in args.scores.split(",") if k.strip()]
    for m in methods:
        if m not in METHODS:
            ap.error(f"unknown method {m!r}: expected some of {', '.join(METHODS)}")
    for k in kinds:
        if k not in KINDS:
            ap.error(f"unknown scores {k!r}: expected some of {', '.join(KINDS)}")
    import platform

    import pyspark
    import sklearn

    res = R.start(__file__, args, parameters={"sizes": sizes, "partitions": PARTITIONS,
                                              "driver_memory": DRIVER_MEMORY,
                                              "master": "local[2]"},
                  extra_versions=("pyspark",))
    print(f"# {_checkout()}")
    print(f"# bench_spark: local[2], {os.cpu_count()} cores, driver memory {DRIVER_MEMORY}, "
          f"{PARTITIONS} shuffle partitions; Python {platform.python_version()}, "
          f"pyspark {pyspark.__version__}, scikit-learn {sklearn.__version__}"
          f"{'; weighted' if args.weighted else ''}", flush=True)
    t_all = time.perf_counter()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_spark_"))
    root.mkdir(parents=True, exist_ok=True)
    results, data = {}, {}
    try:
        for n in sizes:
            d = root / f"rows_{n}"
            extra = ["--weighted"] if args.weighted else []
            facts = _child(["--one", "generate", "--rows", str(n), "--path", str(d), *extra],
                           args.timeout)
            if "error" in facts:
                raise SystemExit(f"generating {n:,} rows failed:\n{facts['error']}")
            data[n] = facts
            print(f"generated {n:,} rows in {facts['seconds']:.1f} s", flush=True)
            todo = [m for m in methods if n == sizes[-1] or m in SCALING]
            for kind in kinds:
                for m in todo:
                    argv_ = ["--one", m, "--path", str(d / kind), *extra]
                    if args.stages and n == sizes[-1]:
                        argv_.append("--stages")
                    if args.warm:
                        argv_.append("--warm")
                    try:
                        r = _child(argv_, args.timeout)
                    except subprocess.TimeoutExpired:
                        r = {"error": f"timeout after {args.timeout:.0f} s"}
                    results[(n, kind, m)] = r
                    msg = r.get("error") or (f"{r['wall']:.1f} s, driver {r['driver_mb']:.0f} MB, "
                                             f"JVM {_mb(r['jvm_mb'])} MB, AUC "
                                             f"{r['values']['auc']:.12f}")
                    print(f"  {n:,} {kind:<8} {m:<13} {msg}", flush=True)
            if args.keep is None:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    for kind in kinds:
        print_kind_table(kind, results, sizes, data)
    print_scaling(results, sizes, kinds)
    print_verdicts(results, sizes, kinds, data)
    if args.stages:
        print_stages(results, sizes, kinds)
    se_stats = [r.get("stats") for (n, _, m), r in results.items() if m == "streameval"
                and r.get("stats")]
    if se_stats:
        s = se_stats[-1]
        print(f"\nstreameval stats at {sizes[-1]:,} rows: {s.get('driver_rows')} rows, "
              f"{s.get('driver_bytes'):,} bytes reached the driver, {s.get('passes')} passes, "
              f"{s.get('partitions')} score ranges")
    print(f"\ntotal run time: {time.perf_counter() - t_all:.0f} s", flush=True)
    for kind in kinds:
        tab = R.table(f"methods_{kind}", f"Exact AUC and AP over a DataFrame, {KINDS[kind]}",
                      ["method", "rows", "wall s", "driver RSS MB", "JVM RSS MB",
                       "abs(AUC - sklearn)", "abs(AP - sklearn)"],
                      note="wall: from the Parquet read to the values on the driver, in a "
                           "fresh JVM; Spark's AP is areaUnderPR, a trapezoid, not AP")
        for n in sizes:
            ref = results.get((n, kind, "sklearn"), {}).get("values", {})
            for m in METHODS:
                r = results.get((n, kind, m))
                if r is None or "error" in r:
                    continue
                v = r["values"]
                d = [abs(v[k] - ref[k]) if ref.get(k) is not None and v.get(k) is not None
                     else None for k in ("auc", "ap")]
                tab.add(LABELS[m], n, r["wall"], r["driver_mb"], r["jvm_mb"], *d)
        ours = results.get((sizes[-1], kind, "streameval"))
        peer = results.get((sizes[-1], kind, "spark_exact"))
        if kind == "distinct" and ours and peer and "wall" in ours and "wall" in peer:
            R.figure("spark_distinct", f"`streameval.spark.evaluate`, exact AUC + AP + "
                     f"confusion, {sizes[-1]:,} rows, all-distinct scores", ours["wall"],
                     "s (wall)", peer="Spark `BinaryClassificationMetrics`, `numBins=0`",
                     peer_value=peer["wall"], better="lower")
        lines = {}
        for m in SCALING:
            walls = [results.get((n, kind, m), {}).get("wall") for n in sizes]
            if all(w is not None for w in walls):
                lines[LABELS[m]] = walls
        if len(sizes) > 1 and lines:
            R.curve(f"scaling_{kind}", f"Wall time against rows, {KINDS[kind]}", "rows",
                    "wall s", sizes, lines, log_x=True, log_y=True)
    res.write(args.json)


if __name__ == "__main__":
    main()
