"""Per-event ``update`` of every binary and regression metric, against an older checkout.

The per-event path must not slow down when code changes around it. This script times a
Python loop of ``update(y, s, w)`` for each metric on the same seeded stream, in two
fresh subprocesses per metric: this checkout, and ``--baseline-src DIR`` (an older
checkout, put first on ``PYTHONPATH``), and prints the ratio. Each
metric is timed on continuous float scores (nearly all distinct, what models emit)
and on scores rounded to 3 decimals; with ``get()`` only at the end. CPU seconds, best
of ``--repeat`` runs in each of ``--rounds`` processes per checkout, the two checkouts'
processes alternating (the machine is shared, and one process's memory layout alone
moves a loop of 100 000 calls by 5-10%).

    git worktree add /tmp/baseline <commit>
    python benchmarks/bench_update.py --baseline-src /tmp/baseline
    python benchmarks/bench_update.py --events 50000          # this checkout only
    python benchmarks/bench_update.py --baseline-src /tmp/baseline --metrics "ROCAUC()" \
        --read-every 1 --window 100000 --events 300000     # update + revert + get per event

Results: ``benchmarks/results/bench_update.json`` (``--json``), shown on the
documentation's performance page.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import _results as R

HERE = Path(__file__).resolve().parent.parent

METRICS = [
    "Precision()", "Recall()", "F1()", "Accuracy()", "MCC()", "ConfusionMatrix()",
    "ROCAUC()", "AveragePrecision()", "ROCAUC(bins=1000)", "LogLoss()", "Brier()",
    "MAE()", "MSE()",
]

CHILD = r"""
import json, sys, time
import numpy as np
import streameval as se
spec, n, decimals, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
read_every, window = int(sys.argv[5]), int(sys.argv[6])
rng = np.random.default_rng(7)
y = (rng.random(n) < 0.3).tolist()
s = rng.random(n)
if decimals >= 0:
    s = np.round(s, decimals)
s = s.tolist()
if spec.startswith(("MAE", "MSE")):
    y = [float(v) for v in y]
best = float("inf")
for _ in range(repeat):
    m = eval("se." + spec)
    upd, rev, get = m.update, m.revert, m.get
    t0 = time.process_time()
    if not (read_every or window):
        for a, b in zip(y, s):
            upd(a, b, 1.0)
    else:
        for i, (a, b) in enumerate(zip(y, s)):
            upd(a, b, 1.0)
            if window and i >= window:
                rev(y[i - window], s[i - window], 1.0)
            if read_every and i % read_every == 0:
                get()
    m.get()
    best = min(best, time.process_time() - t0)
print(json.dumps({"cpu": best}))
"""


def time_one(src, spec, n, decimals, repeat, read_every=0, window=0):
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([sys.executable, "-c", CHILD, spec, str(n), str(decimals), str(repeat),
                          str(read_every), str(window)],
                         env=env, capture_output=True, text=True, check=True, cwd=src)
    return json.loads(out.stdout)["cpu"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3,
                    help="processes per checkout and metric (alternating); best is kept")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="a checkout of the older code to compare with")
    ap.add_argument("--read-every", type=int, default=0,
                    help="get() every K events (1: after each; 0: once, at the end)")
    ap.add_argument("--window", type=int, default=0,
                    help="revert the event W updates back after each update (a sliding "
                         "window's per-event work, without the window object)")
    ap.add_argument("--metrics", default=None,
                    help="comma-separated subset, e.g. ROCAUC(),AveragePrecision()")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    res = R.start(__file__, args)
    metrics = METRICS if args.metrics is None else args.metrics.split(",")
    cols = ["metric", "scores", "events/CPU s (this)"]
    if args.baseline_src:
        cols += ["events/CPU s (baseline)", "this / baseline"]
    rows = []
    tab = R.table("update", f"Per-event update, {args.events:,} events, get() "
                  + ("at the end" if not args.read_every else f"every {args.read_every}")
                  + (f", revert of the event {args.window:,} back" if args.window else "")
                  + f"; CPU, best of {args.repeat} x {args.rounds} processes",
                  ["metric", "scores", "events per CPU s"]
                  + (["baseline events per CPU s", "speed-up (x)"] if args.baseline_src else []))
    for spec in metrics:
        for decimals, label in ((-1, "continuous"), (3, "3 decimals")):
            cur = base = float("inf")
            for _ in range(max(1, args.rounds)):
                extra = (args.read_every, args.window)
                cur = min(cur, time_one(HERE, spec, args.events, decimals, args.repeat, *extra))
                if args.baseline_src:
                    base = min(base, time_one(args.baseline_src, spec, args.events, decimals,
                                              args.repeat, *extra))
            row = [spec, label, f"{args.events / cur:,.0f}"]
            if args.baseline_src:
                row += [f"{args.events / base:,.0f}", f"{base / cur:.2f}x"]
            rows.append(row)
            tab.add(spec, label, args.events / cur,
                    *([args.events / base, base / cur] if args.baseline_src else []))
            print(" | ".join(row), flush=True)
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    print()
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)))
    res.write(args.json)


if __name__ == "__main__":
    main()
