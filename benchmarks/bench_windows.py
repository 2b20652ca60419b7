"""Sliding windows: streameval's exact windows against river's rolling metrics, one run.

Rows: sliding ROC AUC, average precision, precision and recall over windows of 1 000,
10 000 and 100 000 events, with ``get()`` after every event and every 1 000 events.
Peers, in the same run: river's ``RollingROCAUC``, ``RollingPRAUC`` and
``utils.Rolling(metrics.Precision / Recall)``. Each row times per-event ``update`` (+
``get``) on a full window and prints events/s, the ratio ours / river, and each
side's largest distance from scikit-learn on the final window (the scores are rounded
to 3 decimals by default, as logged model scores often are: many ties).

river's RollingROCAUC / RollingPRAUC recompute over the window on ``get``: at 100 000
with ``get`` after every event they are measured on a bounded number of events.

Results: ``benchmarks/results/bench_windows.json`` (``--json PATH`` writes elsewhere), shown on
the documentation's performance page with the parameters, machine and versions of the run.

    python benchmarks/bench_windows.py            # full run (a few minutes)
    python benchmarks/bench_windows.py --quick    # smaller, for a smoke test
    python benchmarks/bench_windows.py --scores continuous
    python benchmarks/bench_windows.py --batches   # update_many: rebuild vs revert

``--batches`` times ``Sliding(ROCAUC() / Precision(), size=W).update_many`` for batch
sizes given as fractions of the window, forcing a rebuild of the wrapped metric from the
window's contents, per-event reverts, or one ``revert_many`` per expired slice: the
rebuild/revert crossover is the reason for ``streameval.windows.REBUILD_FRACTION``
(applied to metrics without their own ``revert_many``).
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np
import river
from river import metrics as rm
from river import utils
from sklearn import metrics as skm

import _results as R
import streameval as se
from streameval import windows
from streameval.windows import Sliding

#: timed segments per row; the best is reported
REPEATS = 3


def make_stream(n, seed, scores, model=True):
    """Labels (30% positives) and scores: a model's (AUC about 0.86) or uniform noise."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    if model:
        s = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0.0, 1.0)
    else:
        s = rng.random(n)
    if scores == "rounded":
        s = np.round(s, 3)
    return y.tolist(), s.tolist()


def sk_value(kind, y, s):
    if kind == "auc":
        return skm.roc_auc_score(y, s)
    if kind == "ap":
        return skm.average_precision_score(y, s)
    pred = [v >= 0.5 for v in s]
    if kind == "precision":
        return skm.precision_score(y, pred, zero_division=np.nan)
    return skm.recall_score(y, pred, zero_division=np.nan)


def ours(kind, window):
    metric = {"auc": se.ROCAUC, "ap": se.AveragePrecision,
              "precision": se.Precision, "recall": se.Recall}[kind]()
    return Sliding(metric, size=window)


def theirs(kind, window):
    if kind == "auc":
        return rm.RollingROCAUC(window_size=window)
    if kind == "ap":
        return rm.RollingPRAUC(window_size=window)
    cls = rm.Precision if kind == "precision" else rm.Recall
    return utils.Rolling(cls, window_size=window)


def best(obj, y, s, start, count, every, river_style, repeats):
    """Best events/s over `repeats` consecutive segments of `count` events (timeit-style:
    the best run is the least disturbed by other processes on a shared machine)."""
    return max(run(obj, y, s, start + r * count, count, every, river_style) for r in range(repeats))


def run(obj, y, s, start, count, every, river_style):
    """Events/s of update (+ get every `every` events) on events [start, start+count)."""
    upd, get = obj.update, obj.get
    if river_style and isinstance(obj, utils.Rolling):
        # river's threshold metrics take the predicted label (same threshold, 0.5)
        pred = [v >= 0.5 for v in s[start:start + count]]
    else:
        pred = s[start:start + count]
    labels = y[start:start + count]
    t0 = time.perf_counter()
    if every == 1:
        for yi, si in zip(labels, pred):
            upd(yi, si)
            get()
    else:
        for i, (yi, si) in enumerate(zip(labels, pred), 1):
            upd(yi, si)
            if i % every == 0:
                get()
    dt = time.perf_counter() - t0
    get()
    return count / dt


def prefill(obj, y, s, window, river_style):
    if river_style:
        upd = obj.update
        if isinstance(obj, utils.Rolling):
            for yi, si in zip(y[:window], s[:window]):
                upd(yi, si >= 0.5)
        else:
            for yi, si in zip(y[:window], s[:window]):
                upd(yi, si)
        obj.get()
    else:
        obj.update_many(y[:window], s[:window])


def bench_batches(window, quick):
    """update_many events/s per batch fraction: rebuild, per-event reverts, one
    revert_many per expired slice, and the default choice; ROCAUC and Precision inside.
    The window is read after each batch, as a monitor evaluating per batch would: the
    ranking metrics defer unread events, so without a read a rebuild would be free."""
    fractions = [0.01, 0.05, 0.1, 0.2, 0.5, 2.0]
    span = 4 * window if quick else 10 * window
    y, s = make_stream(window + span + 4 * window, seed=1, scores="rounded")
    y, s = np.array(y), np.array(s)
    se.ROCAUC().update_many(y[:10], s[:10])  # first-call imports out of the timing
    saved = windows.REBUILD_FRACTION
    # the window's crossover (its _rebuild_fraction, read at every batch): forced
    # rebuild (0), forced revert of the expired slice (inf), and the default
    modes = [0.0, math.inf, None]
    for name, make in (("ROCAUC", se.ROCAUC), ("Precision", se.Precision)):
        print(f"\nSliding({name}, size={window}).update_many, events/s "
              f"(REBUILD_FRACTION = {saved}: rebuild above it, for metrics without a "
              "vectorised revert)")
        print(f"{'batch/window':>12} {'rebuild':>10} {'revert':>10} {'default':>10}")
        for frac in fractions:
            b = max(1, int(frac * window))
            row = []
            for forced in modes:
                runs = []
                for _ in range(REPEATS):  # best of REPEATS fresh runs
                    win = Sliding(make(), size=window)
                    win.update_many(y[:window], s[:window])
                    if forced is not None:
                        win._rebuild_fraction = forced
                    i, t0 = window, time.perf_counter()
                    while i < window + span:
                        win.update_many(y[i:i + b], s[i:i + b])
                        win.get()  # read per batch (a monitor's evaluation): a
                        i += b  # deferred merge (ranking metrics) is paid, not skipped
                    runs.append((i - window) / (time.perf_counter() - t0))
                row.append(max(runs))
            print(f"{frac:>12g} {row[0]:>10,.0f} {row[1]:>10,.0f} {row[2]:>10,.0f}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer events per row")
    ap.add_argument("--scores", choices=["rounded", "continuous", "both"], default="both",
                    help="rounded: 3 decimals (many ties); continuous: all distinct")
    ap.add_argument("--noise", action="store_true",
                    help="uniform random scores (AUC 0.5) instead of a model's")
    ap.add_argument("--windows", default="1000,10000,100000")
    ap.add_argument("--kinds", default="auc,ap,precision,recall")
    ap.add_argument("--batches", action="store_true", help="only the update_many table")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    res = R.start(__file__, args)
    if args.batches:
        bench_batches(2_000 if args.quick else 20_000, args.quick)
        return  # printed only
    windows = [int(w) for w in args.windows.split(",")]
    kinds = args.kinds.split(",")
    ours_events = 2_000 if args.quick else 10_000
    # river's O(window) get: bound its events so the row takes seconds, not hours
    river_budget = 400_000 if args.quick else 3_000_000  # window * events, for get-every-1
    R.param(events_timed=ours_events, repeats=REPEATS, river_budget=river_budget)
    score_kinds = ["rounded", "continuous"] if args.scores == "both" else [args.scores]
    tab = R.table("sliding", "Sliding windows, events/s with get() after every event "
                  "(get 1) or every 1 000 events", [
                      "metric", "scores", "window", "get every", "streameval events/s",
                      "river events/s", "ratio (x)", "river events timed",
                      "abs(streameval - sklearn)", "abs(river - sklearn)"])
    eps_by = {}
    print(f"python {platform.python_version()}, numpy {np.__version__}, river {river.__version__}, "
          f"scores {', '.join(score_kinds)}, "
          f"{'uniform noise' if args.noise else 'a model (AUC ~0.86)'}")
    header = (f"{'metric':<10} {'window':>7} {'get':>5} {'streameval ev/s':>16} {'river ev/s':>12} "
              f"{'ratio':>7} {'river n':>8} {'|ours-sk|':>10} {'|river-sk|':>10}")
    print(header)
    print("-" * len(header))
    for kind, scores in [(k, sc) for sc in score_kinds for k in kinds]:
        peer_name = {"auc": "RollingROCAUC", "ap": "RollingPRAUC"}.get(kind, f"Rolling({kind.title()})")
        for window in windows:
            total = window + REPEATS * ours_events
            y, s = make_stream(total, seed=window, scores=scores, model=not args.noise)
            for every in (1, 1000):
                a = ours(kind, window)
                prefill(a, y, s, window, river_style=False)
                ours_eps = best(a, y, s, window, ours_events, every, False, REPEATS)
                b = theirs(kind, window)
                prefill(b, y, s, window, river_style=True)
                n_river = ours_events
                if every == 1 and kind in ("auc", "ap"):
                    n_river = max(300, min(ours_events, river_budget // window))
                river_eps = best(b, y, s, window, n_river, every, True, REPEATS)
                # distance from sklearn on each side's final window
                end_a, end_b = window + REPEATS * ours_events, window + REPEATS * n_river
                sk_a = sk_value(kind, y[end_a - window:end_a], s[end_a - window:end_a])
                sk_b = sk_value(kind, y[end_b - window:end_b], s[end_b - window:end_b])
                err_a, err_b = abs(a.get() - sk_a), abs(b.get() - sk_b)
                print(f"{kind:<10} {window:>7} {every:>5} {ours_eps:>16,.0f} {river_eps:>12,.0f} "
                      f"{ours_eps / river_eps:>7.1f} {n_river:>8} {err_a:>10.2e} {err_b:>10.2e}",
                      flush=True)
                tab.add(kind, scores, window, every, ours_eps, river_eps, ours_eps / river_eps,
                        n_river, err_a, err_b)
                if every == 1:
                    eps_by[(kind, scores, window)] = (ours_eps, river_eps)
                if every == 1 and kind == "auc" and scores == "continuous" \
                        and window == max(windows):
                    R.figure("sliding_auc_continuous",
                             f"Exact sliding `ROCAUC`, window {format(window, ',').replace(',', ' ')}, `get()` after every "
                             "event, continuous scores", ours_eps, "events/s",
                             peer="river `RollingROCAUC`", peer_value=river_eps)
        print(f"  (peer: river {peer_name})")
    assert all(math.isfinite(v) for v in (ours_eps, river_eps))
    for scores in score_kinds:
        lines = {}
        for kind in kinds:
            if all((kind, scores, w) in eps_by for w in windows):
                lines[f"streameval {kind}"] = [eps_by[(kind, scores, w)][0] for w in windows]
                lines[f"river {kind}"] = [eps_by[(kind, scores, w)][1] for w in windows]
        if len(windows) > 1 and lines:
            R.curve(f"window_size_{scores}", f"Cost against window size ({scores} scores, "
                    "get() after every event)", "window (events)", "events/s", windows, lines,
                    log_x=True, log_y=True)
    res.write(args.json)


if __name__ == "__main__":
    main()
