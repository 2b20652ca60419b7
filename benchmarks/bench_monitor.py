"""The default Monitor on synthetic events: events/s, peak memory, and river in the same run.

Seeded synthetic stream (labels ~ Bernoulli(0.1), scores separated by label, rounded to
``--decimals`` as production logs often are; ``--decimals -1`` keeps full floats, i.e.
one distinct score per event). Measured, each in the same process one after the other:

* ``Monitor.default().update_many`` over the whole stream in batches of ``--batch``
  events (the replay path: 7 cumulative metrics, their 7 sliding versions over 10 000
  events, 2 drift tests and 2 rules, evaluated every ``--every`` events);
* ``Monitor.update`` per event over the first ``--per-event`` events (the service's
  single-event path);
* river: the same metrics as river objects (``ROCAUC``, ``Precision``, ``Recall``,
  ``F1``, ``Accuracy``, ``LogLoss``, ``RollingROCAUC``, ``RollingPRAUC`` in place of AP,
  and ``utils.Rolling`` for the sliding confusion/log-loss metrics) fed in a Python loop
  over the first ``--river-events`` events, with ``get()`` every ``--every`` events;
* peak traced memory (``tracemalloc``) of a separate ``update_many`` run, per event.

Prints one table. Timings are wall-clock on whatever machine runs it; compare rows of
one run, not runs.

    python benchmarks/bench_monitor.py                      # 1 000 000 events
    python benchmarks/bench_monitor.py --events 200000 --decimals -1
    python benchmarks/bench_monitor.py --compare --batch 1000 --baseline-src /tmp/old
    python benchmarks/bench_monitor.py --growth --events 6000000 --batch 800

Results: ``benchmarks/results/bench_monitor.json`` (``--json PATH`` writes elsewhere), shown on
the documentation's performance page with the parameters, machine and versions of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

import _results as R

SEED = 20240601


def make_stream(n, decimals=4, seed=SEED):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.1
    margin = 2.5 * (y - 0.5)
    s = 1.0 / (1.0 + np.exp(-(margin + rng.standard_normal(n) - 1.0)))
    if decimals >= 0:
        s = np.round(s, decimals)
    t = 1_700_000_000 + np.cumsum(rng.exponential(0.05, n))
    return y, s, t


def run_batches(y, s, t, every, batch):
    from streameval.monitor import Monitor

    mon = Monitor.default(every=every)
    rows, alerts = [], []
    mon.on_metrics.append(rows.append)
    mon.on_alert.append(alerts.append)
    for a in range(0, len(y), batch):
        mon.update_many(y[a:a + batch], s[a:a + batch], t=t[a:a + batch])
    mon.flush()
    return mon, rows, alerts


def run_events(y, s, t, every):
    from streameval.monitor import Monitor

    mon = Monitor.default(every=every)
    update = mon.update
    for yy, ss, tt in zip(y.tolist(), s.tolist(), t.tolist()):
        update(yy, ss, t=tt)
    mon.flush()
    return mon


def run_river(y, s, every, window=10_000):
    from river import metrics, utils

    cumulative = [metrics.ROCAUC(), metrics.LogLoss()]
    labels = [metrics.Precision(), metrics.Recall(), metrics.F1(), metrics.Accuracy()]
    rolling_scores = [metrics.RollingROCAUC(window_size=window), metrics.RollingPRAUC(window_size=window),
                      utils.Rolling(metrics.LogLoss, window_size=window)]
    rolling_labels = [utils.Rolling(type(m), window_size=window) for m in labels]
    by_score = cumulative + rolling_scores
    by_label = labels + rolling_labels
    everything = by_score + by_label
    values = []
    for i, (yy, ss) in enumerate(zip(y.tolist(), s.tolist()), 1):
        p = ss >= 0.5
        for m in by_score:
            m.update(yy, ss)
        for m in by_label:
            m.update(yy, p)
        if i % every == 0:
            values.append([m.get() for m in everything])
    return values


COMPARE_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from bench_monitor import make_stream
from streameval.monitor import Monitor
n, decimals, labels, batch, every = (int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
                                     int(sys.argv[5]), int(sys.argv[6]))
y, s, t = make_stream(n, decimals)
kw = {}
if labels == "spam":
    import numpy as np
    y = np.where(y, "spam", "ham").astype(object)
    kw = {"pos_label": "spam", "neg_label": "ham"}
mon = Monitor.default(every=every, **kw)
out = []
mon.on_metrics.append(out.append)
mon.on_alert.append(out.append)
c0 = time.process_time()
for a in range(0, n, batch):
    mon.update_many(y[a:a + batch], s[a:a + batch], t=t[a:a + batch])
mon.flush()
cpu = time.process_time() - c0
import hashlib
digest = hashlib.sha256(json.dumps([out, mon.to_state()], sort_keys=True).encode()).hexdigest()
print(json.dumps({"cpu": cpu, "digest": digest}))
"""


def growth(args):
    """CPU per event against the stream's length: the default monitor on the stream of
    ``bench_service.py`` (labels ~ Bernoulli(0.2), scores a full-precision logistic of
    ``2 y - 1`` plus a standard normal: one distinct score per event, AUC about 0.8),
    fed batches of ``--batch``, evaluated every ``--every`` events and, for
    comparison, every 10x as many; the evaluations' share timed around
    the monitor's evaluator (``Monitor.evaluator.evaluate``). Exact cumulative AUC/AP cost `O(positive scores)` per
    evaluation, so the per-event cost grows linearly with the stream."""
    from streameval.monitor import Monitor

    n, step = args.events, args.growth_step
    rng = np.random.default_rng(SEED)
    y = rng.random(n) < 0.2
    s = 1.0 / (1.0 + np.exp(1.0 - 2.0 * y - rng.standard_normal(n)))
    t = 1_700_000_000 + np.cumsum(rng.exponential(0.05, n))
    print(f"default monitor, bench_service.py's stream, batches of {args.batch}: CPU us "
          f"per event over each {step:,} events (of which evaluations)")
    everies = (args.every, 10 * args.every)
    print(f"{'events':>10} " + " ".join(f"{f'every={e}':>22}" for e in everies))
    tab = R.table("growth", f"CPU per event against the stream's length, default monitor, "
                  f"continuous scores, batches of {args.batch}", ["events"] + [
                      x for e in everies for x in (f"us/event, every={e}",
                                                   f"of which evaluations, every={e}")])
    xs, ys = [], {f"every={e}": [] for e in everies}
    mons, spent = [], []
    for e in everies:
        mon = Monitor.default(every=e)
        box = [0.0]

        class Timed(type(mon.evaluator)):  # the monitor's evaluator, its calls timed
            __slots__ = ()

            def evaluate(self, *a, box=box):
                c = time.process_time()
                super().evaluate(*a)
                box[0] += time.process_time() - c
        mon.evaluator.__class__ = Timed
        mons.append(mon)
        spent.append(box)
    for a in range(0, n, step):
        cells, vals = [], []
        for mon, box in zip(mons, spent):
            before, c = box[0], time.process_time()
            for b in range(a, min(n, a + step), args.batch):
                c2 = min(n, a + step, b + args.batch)
                mon.update_many(y[b:c2], s[b:c2], t=t[b:c2])
            cpu = time.process_time() - c
            k = min(n, a + step) - a
            cells.append(f"{cpu / k * 1e6:>9.1f} ({(box[0] - before) / k * 1e6:>9.1f})")
            vals.extend([cpu / k * 1e6, (box[0] - before) / k * 1e6])
        print(f"{min(n, a + step):>10,} " + " ".join(f"{c:>22}" for c in cells), flush=True)
        tab.add(min(n, a + step), *vals)
        xs.append(min(n, a + step))
        for i, e in enumerate(everies):
            ys[f"every={e}"].append(vals[2 * i])
    R.curve("growth", "Default monitor: CPU per event against the stream's length "
            "(continuous scores)", "events in the stream", "CPU us per event", xs, ys)


def compare(args):
    """This checkout against ``--baseline-src`` (each case in a fresh subprocess):
    bool and string labels, rounded and continuous scores."""
    here = Path(__file__).resolve().parent
    srcs = [("this", here.parent)] + ([("baseline", args.baseline_src)] if args.baseline_src else [])
    print(f"Monitor.default().update_many, {args.events:,} events, batches of {args.batch}, "
          f"every={args.every}; CPU s (best of {args.repeat})")
    head = f"{'labels':<8} {'scores':<12}" + "".join(f" {name:>10}" for name, _ in srcs)
    print(head + ("   this/baseline" if len(srcs) > 1 else ""))
    tab = R.table("compare", f"Monitor.default().update_many, {args.events:,} events, "
                  f"batches of {args.batch}, CPU s (best of {args.repeat})",
                  ["labels", "scores"] + [name for name, _ in srcs]
                  + (["this / baseline"] if len(srcs) > 1 else []))
    best_of = {}
    same = True
    for decimals, sname in ((3, "3 decimals"), (4, "4 decimals"), (-1, "continuous")):
        for labels in ("bool", "spam"):
            cpu = [float("inf")] * len(srcs)
            digests = set()
            for _ in range(args.repeat):  # (this code and the baseline alternate)
                for i, (_, src) in enumerate(srcs):
                    out = subprocess.run(
                        [sys.executable, "-c", COMPARE_CHILD, str(here), str(args.events),
                         str(decimals), labels, str(args.batch), str(args.every)],
                        env=dict(os.environ, PYTHONPATH=str(src)), capture_output=True,
                        text=True, check=True, cwd=str(src))  # cwd: not another checkout
                    res = json.loads(out.stdout)
                    cpu[i] = min(cpu[i], res["cpu"])
                    digests.add(res.get("digest"))
            same = same and len(digests) == 1
            best_of[labels, decimals] = cpu[0]
            line = f"{labels:<8} {sname:<12}" + "".join(f" {c:>10.2f}" for c in cpu)
            if len(cpu) > 1:
                line += f"   {cpu[0] / cpu[1]:.2f}"
                line += "" if len(digests) == 1 else "   rows, alerts or state DIFFERENT"
            print(line, flush=True)
            tab.add(labels, sname, *cpu, *([cpu[0] / cpu[1]] if len(cpu) > 1 else []))
    if len(srcs) > 1:
        # rows, alerts and the final state of both codes, as one digest per case
        print("rows, alerts and state of this code and the baseline: "
              + ("identical" if same else "DIFFERENT"))
        R.param(baseline_outputs_identical=same)
    for labels in ("bool", "spam"):
        r = best_of[labels, 3] / best_of[labels, -1]
        print(f"{labels} labels: speed on continuous scores / speed on 3 decimals = {r:.2f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=65_536, help="events per update_many call")
    ap.add_argument("--decimals", type=int, default=4, help="round scores (-1: full floats)")
    ap.add_argument("--per-event", type=int, default=50_000, help="events for Monitor.update")
    ap.add_argument("--river-events", type=int, default=20_000, help="events for river")
    ap.add_argument("--memory-events", type=int, default=200_000, help="events traced for memory")
    ap.add_argument("--compare", action="store_true",
                    help="only the update_many path: bool and string labels, rounded and "
                         "continuous scores, in subprocesses (with --baseline-src: beside it)")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="a checkout of older code for --compare")
    ap.add_argument("--repeat", type=int, default=1, help="runs per --compare case (best)")
    ap.add_argument("--growth", action="store_true",
                    help="CPU per event against the stream's length (continuous scores)")
    ap.add_argument("--growth-step", type=int, default=500_000, help="events per --growth row")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    res = R.start(__file__, args)
    if args.growth:
        growth(args)
        res.write(str(args.json).replace(".json", "_growth.json"))
        return
    if args.compare:
        compare(args)
        res.write(str(args.json).replace(".json", "_compare.json"))
        return

    n = args.events
    y, s, t = make_stream(n, args.decimals)
    table = []

    t0, c0 = time.perf_counter(), time.process_time()
    mon, rows, alerts = run_batches(y, s, t, args.every, args.batch)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    table.append(("streameval Monitor.default().update_many", n, dt, cpu,
                  f"{len(rows)} rows, {len(alerts)} alert transitions"))

    k = min(args.per_event, n)
    t0, c0 = time.perf_counter(), time.process_time()
    run_events(y[:k], s[:k], t[:k], args.every)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    table.append(("streameval Monitor.default().update (per event)", k, dt, cpu, ""))

    k = min(args.river_events, n)
    t0, c0 = time.perf_counter(), time.process_time()
    run_river(y[:k], s[:k], args.every)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    table.append(("river: same metrics, Python loop", k, dt, cpu, "RollingPRAUC for AP"))

    k = min(args.memory_events, n)
    tracemalloc.start()
    run_batches(y[:k], s[:k], t[:k], args.every, args.batch)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    print(f"default monitor, {n:,} events, scores "
          f"{'full floats' if args.decimals < 0 else f'rounded to {args.decimals} decimals'}, "
          f"every={args.every}, batch={args.batch}")
    print(f"{'path':<50} {'events':>10} {'wall s':>8} {'CPU s':>8} {'events/CPU s':>13}  notes")
    tab = R.table("paths", f"Default monitor, {n:,} events, scores "
                  f"{'full floats' if args.decimals < 0 else f'rounded to {args.decimals} decimals'}"
                  f", every={args.every}, batch={args.batch}",
                  ["path", "events", "wall s", "CPU s", "events per CPU s", "notes"])
    for name, count, sec, cpu, note in table:
        print(f"{name:<50} {count:>10,} {sec:>8.2f} {cpu:>8.2f} {count / cpu:>13,.0f}  {note}")
        tab.add(name, count, sec, cpu, count / cpu, note)
    ours = table[0][1] / table[0][3]
    river = table[2][1] / table[2][3]
    print(f"update_many vs river per-event loop: {ours / river:.1f}x events per CPU second")
    print(f"peak traced memory of update_many over {k:,} events: {peak / 2**20:.1f} MiB "
          f"({peak / k:.0f} bytes/event; the windows hold 10 000 events each)")
    R.table("memory", "Peak traced memory of update_many", ["events", "MiB", "bytes per event"]
            ).add(k, peak / 2**20, peak / k)
    res.write(args.json)


if __name__ == "__main__":
    main()
