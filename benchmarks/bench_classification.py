"""Per-event ``update`` and batch ``update_many`` of the confusion family, LogLoss, Brier
and the regression metrics, against river's equivalents (and sklearn's function on
the whole batch), in one run.

Targets (DESIGN.md): per-event ``update`` at least as fast as river's equivalent
metric; ``update_many`` at least 20x a Python loop of ``update``.

Run: ``python benchmarks/bench_classification.py [--quick]``. Times are the best of
``--repeat`` runs; river gets its intended input (predicted labels for its label
metrics, probabilities for LogLoss), streameval a score it thresholds itself.

The batch table also times ``revert_many`` on slices of 1000 events of a filled metric
(how a sliding window expires a monitor's slices).

Results: ``benchmarks/results/bench_classification.json`` (``--json PATH`` writes
elsewhere), shown on the documentation's performance page.
"""

from __future__ import annotations

import argparse
import gc
import platform
import time

import numpy as np
import river
import sklearn
from river import metrics as rm
from sklearn import metrics as skm

import streameval as se
from _results import Results, add_json_argument


def best_time(func, repeat):
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - t0)
    return best


def per_event(factory, ys, ps, repeat):
    """Seconds per ``update`` call of a fresh metric over the events."""
    def run():
        m = factory()
        update = m.update
        for y, p in zip(ys, ps):
            update(y, p)
    return best_time(run, repeat) / len(ys)


def per_revert(factory, ys, ps, repeat):
    """Seconds per ``revert`` call, removing the events from a filled metric."""
    best = float("inf")
    for _ in range(repeat):
        m = factory()
        for y, p in zip(ys, ps):
            m.update(y, p)
        revert = m.revert
        gc.collect()
        t0 = time.perf_counter()
        for y, p in zip(ys, ps):
            revert(y, p)
        best = min(best, time.perf_counter() - t0)
    return best / len(ys)


def revert_slices(factory, arrays, repeat, k=1000):
    """Seconds to remove a filled metric's events with ``revert_many`` on slices of
    ``k`` events (how a sliding window expires a monitor's slices)."""
    n = len(arrays[0])
    best = float("inf")
    for _ in range(repeat):
        m = factory().update_many(*arrays)
        gc.collect()
        t0 = time.perf_counter()
        for a in range(0, n, k):
            m.revert_many(*(x[a:a + k] for x in arrays))
        best = min(best, time.perf_counter() - t0)
    return best


def binary_data(n, rng):
    y = rng.random(n) < 0.3
    s = rng.random(n)
    return y, s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    ap.add_argument("--repeat", type=int, default=None)
    add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    n_event = 20_000 if args.quick else 200_000
    n_batch = 100_000 if args.quick else 1_000_000
    repeat = args.repeat or (3 if args.quick else 5)
    rng = np.random.default_rng(0)
    res = Results(__file__, args, parameters={"events_per_event": n_event,
                                              "events_per_batch": n_batch, "repeat": repeat})
    t_event = res.table("per_event", "Per-event update and revert against river (ns per event)",
                        ["metric", "update", "river update", "ratio", "revert", "river revert",
                         "revert ratio"],
                        note="ratio = river / streameval: above 1, streameval is faster")

    print(f"python {platform.python_version()}, numpy {np.__version__}, river "
          f"{river.__version__}, sklearn {sklearn.__version__}; "
          f"{n_event:,} events per-event, {n_batch:,} per batch, best of {repeat}")

    # ------------------------------------------------------------- per event
    y, s = binary_data(n_event, rng)
    ys, ss = y.tolist(), s.tolist()
    labels = (s >= 0.5).tolist()  # river's label metrics take the predicted label
    classes = ["a", "b", "c", "d"]
    yc = rng.choice(classes, n_event).tolist()
    pc = rng.choice(classes, n_event).tolist()
    yr = rng.normal(0, 1, n_event)
    pr = (yr + rng.normal(0, 0.5, n_event)).tolist()
    yr = yr.tolist()
    cases = [
        ("ConfusionMatrix", se.ConfusionMatrix, rm.ConfusionMatrix, ys, ss, labels),
        ("Precision", se.Precision, rm.Precision, ys, ss, labels),
        ("Recall", se.Recall, rm.Recall, ys, ss, labels),
        ("F1", se.F1, rm.F1, ys, ss, labels),
        ("Accuracy", se.Accuracy, rm.Accuracy, ys, ss, labels),
        ("MCC", se.MCC, rm.MCC, ys, ss, labels),
        ("LogLoss", se.LogLoss, rm.LogLoss, ys, ss, ss),
        ("Precision macro", lambda: se.Precision(average="macro"), rm.MacroPrecision,
         yc, pc, pc),
        ("MAE", se.MAE, rm.MAE, yr, pr, pr),
        ("MSE", se.MSE, rm.MSE, yr, pr, pr),
    ]
    print()
    print("per-event update and revert (ns/event; ratio = river / streameval, "
          ">= 1 means streameval is faster)")
    print(f"{'metric':<18}{'update':>8}{'river':>8}{'ratio':>7}{'revert':>9}{'river':>8}"
          f"{'ratio':>7}")
    for name, ours, theirs, a, b, b_river in cases:
        t_ours = per_event(ours, a, b, repeat)
        t_river = per_event(theirs, a, b_river, repeat)
        r_ours = per_revert(ours, a, b, repeat)
        r_river = per_revert(theirs, a, b_river, repeat)
        print(f"{name:<18}{t_ours * 1e9:>8.0f}{t_river * 1e9:>8.0f}{t_river / t_ours:>7.2f}"
              f"{r_ours * 1e9:>9.0f}{r_river * 1e9:>8.0f}{r_river / r_ours:>7.2f}")
        t_event.add(name, t_ours * 1e9, t_river * 1e9, t_river / t_ours, r_ours * 1e9,
                    r_river * 1e9, r_river / r_ours)
        if name == "Precision":
            res.figure("precision_update", "`Precision.update`, one event", t_ours * 1e9,
                       "ns/event", peer="river `Precision.update`", peer_value=t_river * 1e9,
                       better="lower")

    # ------------------------------------------------------------- batches
    y, s = binary_data(n_batch, rng)
    w = rng.random(n_batch) * 2
    yc = rng.choice(np.array(classes), n_batch)
    pc = rng.choice(np.array(classes), n_batch)
    yi = rng.integers(0, 10, n_batch)
    pi = rng.integers(0, 10, n_batch)
    P = rng.dirichlet(np.ones(4), n_batch)
    yr = rng.normal(0, 1, n_batch)
    pr = yr + rng.normal(0, 0.5, n_batch)
    n_loop = min(n_batch, 50_000)
    batches = [
        ("Precision", se.Precision, (y, s), lambda: skm.precision_score(y, s >= 0.5)),
        ("Precision w", se.Precision, (y, s, w),
         lambda: skm.precision_score(y, s >= 0.5, sample_weight=w)),
        ("F1", se.F1, (y, s), lambda: skm.f1_score(y, s >= 0.5)),
        ("MCC", se.MCC, (y, s), lambda: skm.matthews_corrcoef(y, s >= 0.5)),
        ("LogLoss", se.LogLoss, (y, s), lambda: skm.log_loss(y, s)),
        ("Brier", se.Brier, (y, s), lambda: skm.brier_score_loss(y, s)),
        ("CM multi (str)", lambda: se.ConfusionMatrix(multiclass=True), (yc, pc),
         lambda: skm.confusion_matrix(yc, pc)),
        ("F1 macro (int)", lambda: se.F1(average="macro"), (yi, pi),
         lambda: skm.f1_score(yi, pi, average="macro")),
        ("LogLoss multi 2-D", lambda: se.LogLoss(multiclass=True, labels=classes), (yc, P),
         lambda: skm.log_loss(yc, P, labels=classes)),
        ("MAE", se.MAE, (yr, pr), lambda: skm.mean_absolute_error(yr, pr)),
        ("MSE w", se.MSE, (yr, pr, w), lambda: skm.mean_squared_error(yr, pr, sample_weight=w)),
        ("MAPE", se.MAPE, (yr, pr), lambda: skm.mean_absolute_percentage_error(yr, pr)),
    ]
    print()
    print("update_many over numpy arrays vs a Python loop of update, and revert_many on "
          "slices of 1000 events (M events/s)")
    print(f"{'metric':<20}{'update_many':>12}{'loop':>8}{'speedup':>9}{'sklearn fn':>12}"
          f"{'revert_many/1000':>18}")
    t_many = res.table("update_many", "update_many over numpy arrays (M events/s)",
                       ["metric", "update_many", "loop of update", "speed-up",
                        "sklearn function", "revert_many of 1 000"])
    for name, factory, arrays, sk in batches:
        t_batch = best_time(lambda: factory().update_many(*arrays), repeat)
        if name.startswith("LogLoss multi"):
            loop_args = (arrays[0][:n_loop].tolist(),
                         [dict(zip(classes, row)) for row in arrays[1][:n_loop].tolist()])
        else:
            loop_args = tuple(a[:n_loop].tolist() for a in arrays)

        def loop():
            m = factory()
            update = m.update
            for args in zip(*loop_args):
                update(*args)
        t_loop = best_time(loop, repeat) * n_batch / n_loop
        t_sk = best_time(sk, max(1, repeat // 2))
        t_rev = revert_slices(factory, arrays, max(1, repeat // 2))
        print(f"{name:<20}{n_batch / t_batch / 1e6:>12.1f}{n_batch / t_loop / 1e6:>8.2f}"
              f"{t_loop / t_batch:>8.0f}x{n_batch / t_sk / 1e6:>12.1f}{n_batch / t_rev / 1e6:>18.1f}")
        t_many.add(name, n_batch / t_batch / 1e6, n_batch / t_loop / 1e6, t_loop / t_batch,
                   n_batch / t_sk / 1e6, n_batch / t_rev / 1e6)
    res.write(args.json)


if __name__ == "__main__":
    main()
