"""A long stream: CPU per million events, memory and error bounds as it grows.

A production monitor runs for months: at 1 000 events a second, 86 million a day. This
script feeds ``--events`` events (default 100 million) through a Monitor in batches of
1 000 (a model's scores, 30% positives) and prints, every ``--report`` events (default
10 million), the CPU seconds per million events over that stretch, the resident and
peak memory, and the error bounds of the cumulative AUC and AP (0 while exact):

* ``--config default``: ``Monitor.default()`` (cumulative and sliding AUC, AP,
  precision, recall, F1, accuracy, log loss; sequential detectors and their rules);
* ``--config custom``: cumulative and windowed (10 000 events) AUC, AP, precision and
  recall only.

Continuous scores (what models emit, nearly all distinct) and scores rounded to 3
decimals run side by side, each in its own process. (A replay of a long generated
log: ``bench_replay.py --long``.)

    python benchmarks/bench_longrun.py                          # 100 M events, both configs
    python benchmarks/bench_longrun.py --events 2000000 --report 500000

Results: ``benchmarks/results/bench_longrun.json`` (``--json PATH`` writes elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import _results as R

BATCH = 1000
SEED = 31


def _rss_mb():
    """Resident set size now (MB), from /proc (peak: getrusage)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:  # (not Linux: the peak instead)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def _batch(rng, m, kind):
    import numpy as np

    y = rng.random(m) < 0.3
    s = 1.0 / (1.0 + np.exp(-(2.0 * y + rng.standard_normal(m) - 1.0)))
    if kind == "rounded":
        s = np.round(s, 3)
    return y, s


def _monitor(config):
    import streameval as se

    if config == "default":
        return se.Monitor.default()
    metrics = {}
    for kind, cls in (("roc_auc", se.ROCAUC), ("average_precision", se.AveragePrecision),
                      ("precision", se.Precision), ("recall", se.Recall)):
        metrics[kind] = cls()
        metrics[f"{kind}@10000"] = se.Sliding(cls(), size=10_000)
    return se.Monitor(metrics)


def _shrink(mon, cap):
    """A short run in the bounded regime: the cumulative score orders' cap set to
    ``cap`` (and values held from ``cap`` events on), as a stream ``DEFAULT_MAX_SCORES /
    cap`` times longer would see them."""
    from streameval.metrics.ranking import _BinaryRanking
    from streameval.monitor import scopes

    scopes.HOLD_FROM = cap
    for m in mon.scopes()[0].metrics.values():
        if isinstance(m, _BinaryRanking) and m._cap is not None:
            m._cap, m._next_check = cap, 2 * cap


def one(config, kind, events, report, cap=None):
    """Feed one monitor; one record per ``report`` events (printed as JSON lines)."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    mon = _monitor(config)
    if cap:
        _shrink(mon, cap)
    rows = [0]

    def count(_row):
        rows[0] += 1

    mon.on_metrics.append(count)
    done = 0
    mark = 0
    cpu0 = time.process_time()
    while done < events:
        m = min(BATCH, events - done)
        y, s = _batch(rng, m, kind)
        mon.update_many(y, s)
        done += m
        if done - mark >= report or done == events:
            cpu = time.process_time()
            metrics = mon.segment_metrics()
            auc, ap = metrics["roc_auc"], metrics["average_precision"]
            rec = {"config": config, "scores": kind, "events": done,
                   "cpu_per_million": (cpu - cpu0) * 1e6 / (done - mark),
                   "rss_mb": _rss_mb(),
                   "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
                   "auc_bound": float(auc.error_bound()), "ap_bound": float(ap.error_bound()),
                   "rows": rows[0]}
            print(json.dumps(rec), flush=True)
            mark = done
            cpu0 = time.process_time()  # (the reads above are not counted)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=100_000_000, help="events per stream")
    p.add_argument("--report", type=int, default=10_000_000,
                   help="print a row every this many events")
    p.add_argument("--config", nargs="+", default=["default", "custom"],
                   choices=["default", "custom"])
    p.add_argument("--scores", nargs="+", default=["continuous", "rounded"],
                   choices=["continuous", "rounded"])
    p.add_argument("--max-scores", type=int, default=None,
                   help="shrink the cumulative orders' cap to this (a quick look at the "
                        "bounded regime: a run of N events then stands for one of "
                        "N * 4194304 / MAX_SCORES)")
    p.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    R.add_json_argument(p, __file__)
    args = p.parse_args(argv)
    if args.one:
        one(args.one[0], args.one[1], args.events, args.report, args.max_scores)
        return 0
    res = R.start(__file__, args)
    tab = R.table("longrun", "CPU per million events, memory and error bounds along one "
                  "stream (batches of 1 000, evaluations every 1 000 events)",
                  ["config", "scores", "events", "CPU s per million", "RSS MB",
                   "peak RSS MB", "AUC bound", "AP bound"],
                  note="CPU over the stretch since the previous row; each stream in its "
                       "own process")
    print(f"{'config':>8} {'scores':>11} {'events':>12} {'CPU s/M':>8} {'RSS MB':>8} "
          f"{'peak MB':>8} {'AUC bound':>10} {'AP bound':>10}")
    curves = {}
    for config in args.config:
        for kind in args.scores:
            proc = subprocess.Popen(
                [sys.executable, __file__, "--one", config, kind, "--events", str(args.events),
                 "--report", str(args.report), "--json", "-"]
                + ([] if args.max_scores is None else ["--max-scores", str(args.max_scores)]),
                stdout=subprocess.PIPE, text=True)
            recs = []
            for line in proc.stdout:
                r = json.loads(line)
                recs.append(r)
                tab.add(config, kind, r["events"], r["cpu_per_million"], r["rss_mb"],
                        r["peak_rss_mb"], r["auc_bound"], r["ap_bound"])
                print(f"{config:>8} {kind:>11} {r['events']:>12,} {r['cpu_per_million']:>8.2f} "
                      f"{r['rss_mb']:>8,.0f} {r['peak_rss_mb']:>8,.0f} {r['auc_bound']:>10.2e} "
                      f"{r['ap_bound']:>10.2e}", flush=True)
            if proc.wait():
                raise SystemExit(f"{config} {kind}: exit status {proc.returncode}")
            curves[f"{config}, {kind}"] = recs
            if len(recs) >= 2:
                # the stretch that ends at the second million (the first holds the
                # warm-up) against the last 10 million events (or the last stretch)
                second = next((r for r in recs if r["events"] >= 2_000_000), recs[-1])
                end = recs[-1]["events"]
                tail = [r for r in recs if r["events"] > end - 10_000_000] or recs[-1:]
                span = [r["events"] - p["events"] for p, r in zip([{"events": 0}] + recs, recs)
                        if r in tail]
                last = sum(r["cpu_per_million"] * d for r, d in zip(tail, span)) / sum(span)
                res.figure(f"cpu_growth_{config}_{kind}",
                           f"CPU per million over the last 10 M events against the second "
                           f"million ({config}, {kind})",
                           last / second["cpu_per_million"], "x", better="lower")
                # resident memory moves in a sawtooth as deferred events merge into
                # levels, so one reading is a point on it. Peak: the highest reading of
                # the last 10 million events against that of the 10 million ending at
                # 10 M (the bounded order's first coarsening falls in it). Mean: the last
                # 10 million against the 10 million after 10 M (the mean of a stretch
                # that starts at 0 holds the warm-up).
                ten = next((r for r in recs if r["events"] >= 10_000_000), recs[0])
                t = ten["events"]
                before = [r["rss_mb"] for r in recs if t - 10_000_000 < r["events"] <= t]
                after = [r["rss_mb"] for r in recs if t < r["events"] <= t + 10_000_000]
                last_rss = [r["rss_mb"] for r in tail]
                res.figure(f"rss_growth_peak_{config}_{kind}",
                           f"peak RSS over the last 10 M events against the 10 M ending "
                           f"at {t:,} ({config}, {kind})",
                           max(last_rss) / max(before), "x", better="lower")
                if after:
                    res.figure(f"rss_growth_mean_{config}_{kind}",
                               f"mean RSS over the last 10 M events against the 10 M "
                               f"after {t:,} ({config}, {kind})",
                               sum(last_rss) / len(last_rss) / (sum(after) / len(after)),
                               "x", better="lower")
    if curves:
        xs = [r["events"] for r in next(iter(curves.values()))]
        R.curve("cpu_per_million", "CPU seconds per million events along the stream",
                "events", "CPU s per million", xs,
                {k: [r["cpu_per_million"] for r in v] for k, v in curves.items()})
        R.curve("rss", "Resident memory along the stream", "events", "MB", xs,
                {k: [r["rss_mb"] for r in v] for k, v in curves.items()})
    res.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
