"""Exact online ROC AUC and average precision against river and scikit-learn, one run.

Sections (each prints a table):

0. A monitor's pattern: batches of 1 000 read after each (a monitor's pattern), ROCAUC,
   AveragePrecision and the pair sharing one order, both score kinds, river's
   ``ROCAUC`` read every 1 000 events in the same run; then AP's ``get`` alone after one
   more batch, at about 10**6 distinct scores (median of 20, wall clock).
1. Cumulative, 1 000 000 events: per-event ``update`` of streameval's exact
   ``ROCAUC`` / ``AveragePrecision`` against river's approximate ``ROCAUC`` (events/s,
   ratio, and each side's distance from scikit-learn at the end), and ``update_many``
   over numpy arrays (one batch, and batches of 10 000).
2. ``get()`` after every event over 100 000 events against scikit-learn recomputing
   the prefix every 1 000 events (total time of each, and the time per value).
3. Memory per stored event (tracemalloc): exact (distinct and rounded scores) and
   binned, against the arrays scikit-learn needs.

Two score streams: ``rounded`` (a model's scores logged with 3 decimals: at most 1 001
distinct values, many ties) and ``continuous`` (float64, all distinct: the worst case
for memory and for the per-event search). Labels: 30% positives; scores: a model with
AUC about 0.86 (as benchmarks/bench_windows.py). Times are CPU time
(``time.process_time``), the best of a few runs where a run is short, so that other
processes on a shared machine disturb them less.

4. ``revert_many`` of ``m`` events out of ``n`` stored against a loop of ``revert``, and
   a sliding window's step (``update_many`` of the new events, ``revert_many`` of the
   expired ones, ``get``).

Results: ``benchmarks/results/bench_ranking.json`` (``--json PATH`` writes elsewhere), shown on
the documentation's performance page with the parameters, machine and versions of the run.

    python benchmarks/bench_ranking.py            # full run (about five minutes)
    python benchmarks/bench_ranking.py --quick    # smaller, for a smoke test
    python benchmarks/bench_ranking.py --tune     # block load and batch crossover
"""

from __future__ import annotations

import argparse
import gc
import platform
import time
import tracemalloc

import numpy as np
import river
import sklearn
from river import metrics as rm
from sklearn import metrics as skm

import streameval as se
import _results as R
from streameval.metrics import scoreorder
from streameval.metrics.scoreorder import ScoreOrder

clock = time.process_time


def make_stream(n, seed, scores):
    """Labels (30% positives) and a model's scores (AUC about 0.86)."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0.0, 1.0)
    if scores == "rounded":
        s = np.round(s, 3)
    return y, s


def best_of(runs, f):
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        t0 = clock()
        f()
        best = min(best, clock() - t0)
    return best


def per_event(metric, y, s, read_every=None):
    """CPU seconds of ``update`` per event, reading ``get()`` every ``read_every``
    events (None: once, at the end; 1: after every event)."""
    update, get = metric.update, metric.get
    t0 = clock()
    if read_every is None:
        for yi, si in zip(y, s):
            update(yi, si)
    elif read_every == 1:
        for yi, si in zip(y, s):
            update(yi, si)
            get()
    else:
        for i, (yi, si) in enumerate(zip(y, s)):
            update(yi, si)
            if i % read_every == 0:
                get()
    get()
    return clock() - t0


# ----------------------------------------------------------------- section 0


def batches_read_each(n, kinds, batch=1000):
    """A monitor's pattern: batches of ``batch`` events, ``get()`` after each (what a
    monitor does), AUC and AP, both score kinds, river in the same run; and AP's
    ``get`` at n distinct scores after one more batch."""
    print(f"\n0. Batches of {batch:,}, get() after each, {n:,} events: events/s "
          "(error = |value - sklearn| at the end; target: all-distinct scores)")
    header = (f"{'scores':>10} {'what':<52} {'events/s':>12} {'vs river':>9} "
              f"{'error':>9} {'target':>10}")
    print(header)
    print("-" * len(header))
    tab = R.table("batches_read_each", f"Cumulative AUC and AP in batches of {batch:,}, "
                  f"get() after each, {n:,} events",
                  ["scores", "what", "events/s", "vs river ROCAUC (x)", "abs error vs sklearn"])
    for kind in kinds:
        y, s = make_stream(n, 10, kind)
        sk_auc, sk_ap = skm.roc_auc_score(y, s), skm.average_precision_score(y, s)
        rows = []
        yl, sl = y.tolist(), s.tolist()
        river_auc = rm.ROCAUC()
        t_river = per_event(river_auc, yl, sl, batch)
        rows.append(("river ROCAUC.update, get every 1 000 (approximate)", t_river,
                     abs(river_auc.get() - sk_auc), ""))
        for name, cls, sk, target in (("ROCAUC", se.ROCAUC, sk_auc, 1_000_000),
                                      ("AveragePrecision", se.AveragePrecision, sk_ap,
                                       200_000)):
            def run(cls=cls):
                m = cls()
                for a in range(0, n, batch):
                    m.update_many(y[a : a + batch], s[a : a + batch])
                    m.get()
                run.m = m
            t = best_of(2, run)
            ok = "" if kind != "continuous" else (
                f">={target / 1e6:g}M ok" if n / t >= target else f">={target / 1e6:g}M MISS")
            rows.append((f"streameval {name}.update_many + get", t, abs(run.m.get() - sk), ok))
        # the Monitor's pair: one order, AUC and AP read after each batch
        from streameval.metrics.ranking import OrderView

        def pair():
            auc = se.ROCAUC()
            ap = OrderView(se.AveragePrecision(), auc)
            for a in range(0, n, batch):
                auc.update_many(y[a : a + batch], s[a : a + batch])
                auc.get()
                ap.get()
            pair.ap = ap
        t = best_of(2, pair)
        rows.append(("streameval ROCAUC + AveragePrecision, one order", t,
                     abs(pair.ap.get() - sk_ap), ""))
        for what, t, err, ok in rows:
            print(f"{kind:>10} {what:<52} {n / t:>12,.0f} {t_river / t:>8.2f}x {err:>9.1e} "
                  f"{ok:>10}", flush=True)
            tab.add(kind, what, n / t, t_river / t, err)
        if kind == "continuous":
            R.figure("auc_batches_continuous",
                     f"Exact cumulative `ROCAUC`, batches of {format(batch, ',').replace(',', ' ')} read after each, "
                     "continuous scores", n / rows[1][1], "events/s",
                     peer="river `ROCAUC` (approximate), read every 1 000",
                     peer_value=n / t_river)
        # AP's get at n distinct scores: one more batch, then get (cache invalidated)
        ap = se.AveragePrecision().update_many(y, s)
        ap.get()
        extra_y, extra_s = make_stream(batch * 20, 11, kind)
        times = []
        for a in range(0, len(extra_y), batch):
            ap.update_many(extra_y[a : a + batch], extra_s[a : a + batch])
            ap._order  # merge the batch first: time the get alone
            t0 = time.perf_counter()
            ap.get()
            times.append(time.perf_counter() - t0)
        stored = len(ap._so)
        ms = float(np.median(times)) * 1e3
        ok = "" if kind != "continuous" else ("<=2 ms ok" if ms <= 2.0 else "<=2 ms MISS")
        print(f"{kind:>10} {'AveragePrecision.get() after a batch, at ' + f'{stored:,}' + ' scores':<52} "
              f"{ms:>9.2f} ms (median of {len(times)}, wall) {ok:>10}", flush=True)
        R.table(f"ap_get_{kind}", f"AveragePrecision.get() after one more batch, {kind} scores",
                ["distinct scores", "ms per get (median)", "reads"]).add(stored, ms, len(times))


# ----------------------------------------------------------------- section 1


def cumulative(n, kinds):
    print(f"\n1. Cumulative exact AUC and AP, {n:,} events: events/s "
          "(error = |value - sklearn| at the end)")
    header = (f"{'scores':>10} {'what':<50} {'events/s':>12} {'vs river':>9} "
              f"{'error':>9}")
    print(header)
    print("-" * len(header))
    for kind in kinds:
        y, s = make_stream(n, 1, kind)
        yl, sl = y.tolist(), s.tolist()
        sk_auc = skm.roc_auc_score(y, s)
        sk_ap = skm.average_precision_score(y, s)
        rows = []

        def row(what, make, read_every=None, sk=sk_auc):
            m = make()
            t = per_event(m, yl, sl, read_every)
            rows.append((what, t, abs(m.get() - sk)))

        row("river ROCAUC.update (approximate)", rm.ROCAUC)
        t_river = rows[0][1]
        row("streameval ROCAUC.update, get once", se.ROCAUC)
        row("streameval ROCAUC.update, get every 1 000", se.ROCAUC, 1000)
        row("streameval ROCAUC.update, get after each", se.ROCAUC, 1)
        row("streameval AveragePrecision.update, get once", se.AveragePrecision, None, sk_ap)
        batch = se.ROCAUC()
        t = best_of(3, lambda: batch.__init__() or batch.update_many(y, s).get())
        rows.append(("streameval ROCAUC.update_many (1 batch)", t, abs(batch.get() - sk_auc)))
        step = 10_000
        chunks = [(y[a : a + step], s[a : a + step]) for a in range(0, n, step)]

        def batches():
            m = se.ROCAUC()
            for cy, cs in chunks:
                m.update_many(cy, cs)
            m.get()
            batches.m = m

        t = best_of(2, batches)
        rows.append((f"streameval ROCAUC.update_many ({step:,}/batch)", t,
                     abs(batches.m.get() - sk_auc)))
        ap_batch = se.AveragePrecision()
        t = best_of(3, lambda: ap_batch.__init__() or ap_batch.update_many(y, s).get())
        rows.append(("streameval AveragePrecision.update_many, get", t,
                     abs(ap_batch.get() - sk_ap)))
        t = best_of(3, lambda: skm.roc_auc_score(y, s))
        rows.append(("sklearn roc_auc_score (whole array, once)", t, 0.0))
        tab = R.table(f"cumulative_{kind}", f"Cumulative exact AUC and AP, {n:,} events, "
                      f"{kind} scores", ["what", "events/s", "vs river ROCAUC.update (x)",
                                         "abs error vs sklearn"])
        for what, t, err in rows:
            print(f"{kind:>10} {what:<50} {n / t:>12,.0f} {t_river / t:>8.2f}x {err:>9.1e}",
                  flush=True)
            tab.add(what, n / t, t_river / t, err)


# ----------------------------------------------------------------- section 2


def get_every_event(n, kinds, every=1000):
    print(f"\n2. get() after every event over {n:,} events, against sklearn recomputing "
          f"the prefix every {every:,} events")
    header = (f"{'scores':>10} {'what':<40} {'values':>8} {'total s':>9} "
              f"{'us/value':>10} {'speed-up':>9}")
    print(header)
    print("-" * len(header))
    tab = R.table("get_every_event", f"get() after every event over {n:,} events, against "
                  f"scikit-learn recomputing the prefix every {every:,} events",
                  ["scores", "what", "values", "total s", "us per value", "speed-up (x)"])
    for kind in kinds:
        y, s = make_stream(n, 2, kind)
        yl, sl = y.tolist(), s.tolist()
        for name, cls, sk in (("ROCAUC", se.ROCAUC, skm.roc_auc_score),
                              ("AveragePrecision", se.AveragePrecision,
                               skm.average_precision_score)):
            # AP's get() is one pass over the distinct scores: with all-distinct
            # scores time the last events only, at full size
            timed = n if (name == "ROCAUC" or kind == "rounded") else min(n, 2000)
            m = cls()
            if timed < n:
                m.update_many(y[: n - timed], s[: n - timed])
            update, get = m.update, m.get
            t0 = clock()
            for yi, si in zip(yl[n - timed :], sl[n - timed :]):
                update(yi, si)
                get()
            t_ours = clock() - t0
            checks = range(every, n + 1, every)
            if timed < n:
                checks = range(n - timed + every, n + 1, every)
            t0 = clock()
            for i in checks:
                sk(y[:i], s[:i])
            t_sk = clock() - t0
            per_ours = t_ours / timed * 1e6
            per_sk = t_sk / len(checks) * 1e6
            label = f"streameval {name} update+get" + (" (last events)" if timed < n else "")
            print(f"{kind:>10} {label:<40} {timed:>8,} {t_ours:>9.2f} {per_ours:>10.1f} "
                  f"{per_sk / per_ours:>8.0f}x", flush=True)
            print(f"{kind:>10} {'sklearn ' + sk.__name__ + ' on prefix':<40} {len(checks):>8,} "
                  f"{t_sk:>9.2f} {per_sk:>10.1f} {'':>9}", flush=True)
            tab.add(kind, label, timed, t_ours, per_ours, per_sk / per_ours)
            tab.add(kind, "sklearn " + sk.__name__ + " on prefix", len(checks), t_sk, per_sk,
                    None)


# ----------------------------------------------------------------- section 3


def traced(build):
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    obj = build()
    if hasattr(obj, "get"):
        obj.get()  # a read: deferred events merged, as a monitor would see it
    size = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return obj, size


def memory(n):
    print(f"\n3. Memory (tracemalloc), {n:,} events")
    header = f"{'what':<58} {'stored':>10} {'bytes':>12} {'B/stored':>9} {'B/event':>8}"
    print(header)
    print("-" * len(header))
    rows = []
    from streameval.metrics.ranking import OrderView

    for kind in ("continuous", "rounded"):
        y, s = make_stream(n, 3, kind)
        m, b = traced(lambda: se.ROCAUC().update_many(y, s))
        rows.append((f"ROCAUC exact, {kind} scores, update_many", len(m), b))

        def pair():  # the Monitor's pair, read after each batch (AP's pn included)
            auc = se.ROCAUC()
            ap = OrderView(se.AveragePrecision(), auc)
            for a in range(0, n, 1000):
                auc.update_many(y[a : a + 1000], s[a : a + 1000])
                auc.get()
                ap.get()
            pair.keep = ap
            return auc

        m, b = traced(pair)
        rows.append((f"ROCAUC + AP (one order), {kind}, batches read", len(m), b))
        small = min(n, 200_000)
        yl, sl = y[:small].tolist(), s[:small].tolist()

        def loop():
            m = se.ROCAUC()
            for yi, si in zip(yl, sl):
                m.update(yi, si)
            return m

        m, b = traced(loop)
        rows.append((f"ROCAUC exact, {kind} scores, update x {small:,}", len(m), b, small))
    y, s = make_stream(n, 3, "continuous")
    for bins in (100, 1000):
        m, b = traced(lambda: se.ROCAUC(bins=bins).update_many(y, s))
        rows.append((f"ROCAUC(bins={bins}), continuous scores", len(m), b))
    _, b = traced(lambda: (np.array(y), np.array(s)))
    rows.append(("sklearn's input: bool labels + float64 scores", n, b))
    river_auc, b = traced(lambda: rm.ROCAUC())
    rows.append(("river ROCAUC (10 thresholds, approximate, fixed)", 0, b))
    tab = R.table("memory", f"Memory (tracemalloc), {n:,} events",
                  ["what", "stored", "bytes", "bytes per stored", "bytes per event"])
    for row in rows:
        what, stored, size = row[:3]
        events = row[3] if len(row) > 3 else n
        per = f"{size / stored:>9.1f}" if stored else f"{'-':>9}"
        print(f"{what:<58} {stored:>10,} {size:>12,} {per} {size / events:>8.2f}", flush=True)
        tab.add(what, stored, size, size / stored if stored else None, size / events)


# ----------------------------------------------------------------- section 4


def revert_batches(sizes, kinds):
    print("\n4. revert_many of m events out of n stored (ROCAUC), against a loop of revert "
          "(ms, best of 5; 'window' = update_many of m new events, then revert_many of the "
          "m oldest, then get: a sliding window's step)")
    header = (f"{'scores':>10} {'n':>8} {'m':>7} {'revert loop':>12} {'revert_many':>12} "
              f"{'speed-up':>9} {'window step':>12}")
    print(header)
    print("-" * len(header))
    tab = R.table("revert_batches", "revert_many of m events out of n stored (ROCAUC), "
                  "ms, best of 5", ["scores", "n", "m", "revert loop", "revert_many",
                                    "speed-up (x)", "window step"])
    for kind in kinds:
        for n, m in sizes:
            y, s = make_stream(n + m, 7, kind)
            yl, sl = y[:m].tolist(), s[:m].tolist()
            times = []
            for how in ("loop", "many", "window"):
                best = float("inf")
                fresh = [se.ROCAUC().update_many(y[:n], s[:n]) for _ in range(5)]
                for metric in fresh:
                    metric.get()
                for metric in fresh:  # best of 5 (process_time: others' load excluded)
                    t0 = clock()
                    if how == "loop":
                        revert = metric.revert
                        for yi, si in zip(yl, sl):
                            revert(yi, si)
                    elif how == "many":
                        metric.revert_many(y[:m], s[:m])
                    else:
                        metric.update_many(y[n:], s[n:])
                        metric.revert_many(y[:m], s[:m])
                    metric.get()
                    best = min(best, clock() - t0)
                assert abs(metric.get() - skm.roc_auc_score(
                    *((y[m:n], s[m:n]) if how != "window" else (y[m:], s[m:])))) < 1e-12
                times.append(best * 1e3)
            print(f"{kind:>10} {n:>8,} {m:>7,} {times[0]:>12.2f} {times[1]:>12.2f} "
                  f"{times[0] / times[1]:>8.1f}x {times[2]:>12.2f}", flush=True)
            tab.add(kind, n, m, times[0], times[1], times[0] / times[1], times[2])


# ----------------------------------------------------------------- tuning


def tune(n):
    print(f"\nTuning: per-event ScoreOrder.add, ns/event over {n:,} events, by block load")
    for kind in ("rounded", "continuous"):
        y, s = make_stream(n, 4, kind)
        yl, sl = y.tolist(), s.tolist()
        cells = []
        for load in (48, 64, 96, 128, 192, 256):
            def run():
                o = ScoreOrder(load)
                add = o.add
                for yi, si in zip(yl, sl):
                    add(si, yi, 1.0)

            cells.append(f"{load}: {best_of(2, run) / n * 1e9:,.0f}")
        print(f"{kind:>10}  " + "   ".join(cells), flush=True)
    print("\nTuning: add_entries of m entries into n stored scores, one by one vs rebuild "
          "(ms); the crossover m/n is REBUILD_RATIO's inverse")
    rng = np.random.default_rng(5)
    stored = n
    base_y, base_s = make_stream(stored, 6, "continuous")
    keep = scoreorder.REBUILD_RATIO
    try:
        for m in (stored // 200, stored // 100, stored // 50, stored // 25, stored // 10):
            keys = np.sort(rng.random(m))
            ones = np.ones(m)
            entries = (keys, ones, ones, np.ones(m, dtype=np.int64), np.ones(m, dtype=np.int64))
            times = []
            for ratio in (0, 10**9):  # force one by one, then force the rebuild
                scoreorder.REBUILD_RATIO = ratio
                o = se.ROCAUC().update_many(base_y, base_s)._order

                def go(o=o):
                    o.add_entries(*entries)

                t0 = clock()
                go()
                times.append((clock() - t0) * 1e3)
            print(f"  n={stored:,} m={m:,} (n/m={stored // m}): one by one {times[0]:.1f}, "
                  f"rebuild {times[1]:.1f}", flush=True)
    finally:
        scoreorder.REBUILD_RATIO = keep


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    parser.add_argument("--tune", action="store_true", help="only the tuning tables")
    parser.add_argument("--scores", choices=["rounded", "continuous", "both"], default="both")
    R.add_json_argument(parser, __file__)
    args = parser.parse_args(argv)
    res = R.start(__file__, args)
    kinds = ["rounded", "continuous"] if args.scores == "both" else [args.scores]
    print(f"python {platform.python_version()}, numpy {np.__version__}, river "
          f"{river.__version__}, scikit-learn {sklearn.__version__}, "
          f"{platform.machine()}; CPU seconds")
    if args.tune:
        tune(20_000 if args.quick else 200_000)
        return  # tuning tables are printed only
    quick = args.quick
    batches_read_each(50_000 if quick else 1_000_000, kinds)
    cumulative(50_000 if quick else 1_000_000, kinds)
    get_every_event(10_000 if quick else 100_000, kinds)
    memory(50_000 if quick else 1_000_000)
    sizes = [(10_000, 100), (10_000, 1_000), (100_000, 1_000), (100_000, 10_000)]
    revert_batches(sizes[:2] if quick else sizes, kinds)
    res.write(args.json)


if __name__ == "__main__":
    main()
