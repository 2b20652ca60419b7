"""Coverage of the confidence intervals: how often ``interval(level)`` holds the true value.

Each cell draws ``--samples`` seeded streams of ``--events`` events, feeds them to
``ROCAUC``, ``Precision`` and ``Recall``, and counts the streams whose interval at 95% and
at 99% holds the population value; the coverage is printed with its Wilson 95% interval
(over the samples), the mean interval width, and the misses on each side. Each metric's
interval (``new``) is shown beside the textbook one it replaces (``old``): DeLong's
variance with a normal interval clipped to [0, 1] for the AUC, the plain Wilson score
interval for precision and recall.

Cells: positives at 1%, 5% and 30% of the events (the count of positives binomial), and
exactly 20 positives among the events. Scenarios (every assumption of the run):

- events independent and identically distributed; labels Bernoulli at the cell's share;
- ``binormal AUC A``: scores of negatives N(0, 1), of positives N(mu, 1), with
  ``A = Phi(mu / sqrt(2))`` the population AUC (continuous scores: no ties);
- ``two kinds AUC 0.83``: 15% of the positives scored as negatives (a kind of positive
  the model misses), the others N(mu, 1): placement values with a second mode, the case
  where a model of the variance is wrong;
- the model's score is passed as the probability ``1 / (1 + exp(-s))``; precision and
  recall at the threshold ``s >= 1.5``; their population values are
  ``TPR = P(s >= 1.5 | positive)`` and ``p TPR / (p TPR + (1 - p) FPR)``, ``p`` the
  cell's share of positives (20 / events for the fixed count).

    python benchmarks/bench_coverage.py            # full run: 1 000 samples per cell
    python benchmarks/bench_coverage.py --quick    # 100 samples, for a smoke test

Results: ``benchmarks/results/bench_coverage.json`` (``--json PATH`` writes elsewhere),
shown on the documentation's confidence-interval guide.
"""

from __future__ import annotations

import argparse
import math
import time
from statistics import NormalDist

import _results as R
import numpy as np

import streameval as se
from streameval.metrics import ranking
from streameval.metrics.base import critical_value, interval_of, wilson_interval
from streameval.metrics.scoreorder import delong_variance

LEVELS = (0.95, 0.99)
CELLS = ("1%", "5%", "30%", "20 positives")
THRESHOLD = 1.5
MISSED = 0.15  # share of the positives scored as negatives in the "two kinds" scenario
_PHI = NormalDist()


def _mu_for(auc, missed=0.0):
    """The positives' mean giving the population AUC ``auc`` (bisection)."""
    lo, hi = 0.0, 20.0
    for _ in range(200):
        mid = (lo + hi) / 2
        got = missed * 0.5 + (1 - missed) * _PHI.cdf(mid / math.sqrt(2))
        lo, hi = (mid, hi) if got < auc else (lo, mid)
    return (lo + hi) / 2


def scenarios(aucs):
    out = [(f"binormal AUC {a:.2f}", a, _mu_for(a), 0.0) for a in aucs]
    out.append(("two kinds AUC 0.83", 0.83, _mu_for(0.83, MISSED), MISSED))
    return out


def truths(auc, mu, missed, share):
    tpr = missed * (1 - _PHI.cdf(THRESHOLD)) + (1 - missed) * (1 - _PHI.cdf(THRESHOLD - mu))
    fpr = 1 - _PHI.cdf(THRESHOLD)
    return {"AUC": auc, "recall": tpr, "precision": share * tpr / (share * tpr + (1 - share) * fpr)}


def draw(rng, cell, events, mu, missed):
    if cell == "20 positives":
        y = np.zeros(events, dtype=bool)
        y[rng.choice(events, 20, replace=False)] = True
    else:
        y = rng.random(events) < float(cell.rstrip("%")) / 100
    s = rng.normal(0.0, 1.0, events)
    kept = y & (rng.random(events) >= missed)
    s[kept] += mu
    return y, 1.0 / (1.0 + np.exp(-s))


def intervals(y, p):
    """{metric: {(method, level): (low, high)}} for one sample."""
    out = {}
    auc = se.ROCAUC().update_many(y, p)
    a = auc.get()
    wp, wn = auc._so.weights()  # (the old interval: DeLong's variance, normal, clipped)
    var = delong_variance(wp, wn, a, auc._so.pos_weight, auc._so.neg_weight)
    t = 1.0 / (1.0 + math.exp(-THRESHOLD))
    prec = se.Precision(threshold=t).update_many(y, p)
    rec = se.Recall(threshold=t).update_many(y, p)
    pred = p >= t
    counts = {"precision": (int((y & pred).sum()), int(pred.sum())),
              "recall": (int((y & pred).sum()), int(y.sum()))}
    for level in LEVELS:
        z = critical_value(level)
        out.setdefault("AUC", {})[("new", level)] = auc.interval(level)
        out["AUC"][("old", level)] = (interval_of(["normal", a, var, 0.0, 1.0], z)
                                      if not math.isnan(var) else (math.nan, math.nan))
        for name, m in (("precision", prec), ("recall", rec)):
            x, n = counts[name]
            out.setdefault(name, {})[("new", level)] = m.interval(level)
            if n:
                lo, hi = wilson_interval(x, n, z)
                out[name][("old", level)] = (max(0.0, lo), min(1.0, hi))
            else:
                out[name][("old", level)] = (math.nan, math.nan)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=1000, help="streams per cell")
    ap.add_argument("--events", type=int, default=2000, help="events per stream")
    ap.add_argument("--aucs", default="0.90,0.97", help="population AUCs of the binormal scenarios")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prior-df", type=float, default=None,
                    help="the AUC interval's prior degrees of freedom "
                         "(streameval.metrics.ranking.AUC_PRIOR_DF; default: as shipped)")
    ap.add_argument("--quick", action="store_true", help="100 samples per cell")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    if args.quick:
        args.samples = 100
    if args.prior_df is not None:
        ranking.AUC_PRIOR_DF = args.prior_df
    args.prior_df = ranking.AUC_PRIOR_DF
    res = R.Results(__file__, args)
    aucs = [float(a) for a in args.aucs.split(",")]
    z95 = critical_value(0.95)
    tables = {level: res.table(
        f"coverage_{round(level * 100)}", f"Coverage at {level:.0%} nominal "
        f"({args.samples} samples of {args.events} events per cell)",
        ["scenario", "positives", "metric", "method", "coverage %", "Wilson 95% low",
         "Wilson 95% high", "mean width", "truth below", "truth above", "undefined"],
        note="old: DeLong's normal interval (AUC) and the plain Wilson interval; new: "
             "what interval() gives") for level in LEVELS}
    worst = {}
    t0 = time.perf_counter()
    print(f"{'level':>5} {'scenario':<20} {'positives':<13} {'metric':<9} {'method':<4} "
          f"{'coverage %':>10} {'[Wilson 95%]':>15} {'width':>7} {'below':>5} {'above':>5}")
    for si, (scen, auc, mu, missed) in enumerate(scenarios(aucs)):
        for ci, cell in enumerate(CELLS):
            share = 20 / args.events if cell == "20 positives" else float(cell.rstrip("%")) / 100
            truth = truths(auc, mu, missed, share)
            rng = np.random.default_rng([args.seed, si, ci])
            tally = {}
            for _ in range(args.samples):
                y, p = draw(rng, cell, args.events, mu, missed)
                for metric, ivs in intervals(y, p).items():
                    for key, (lo, hi) in ivs.items():
                        c = tally.setdefault((metric,) + key, [0, 0, 0.0, 0, 0, 0])
                        if math.isnan(lo) or math.isnan(hi):
                            c[5] += 1
                            continue
                        v = truth[metric]
                        c[0] += lo <= v <= hi
                        c[1] += 1
                        c[2] += hi - lo
                        c[3] += v < lo
                        c[4] += v > hi
            for level in LEVELS:
                for metric in ("AUC", "precision", "recall"):
                    for method in ("old", "new"):
                        hit, n, width, below, above, undef = tally[(metric, method, level)]
                        cov = hit / n if n else math.nan
                        lo, hi = wilson_interval(hit, n, z95) if n else (math.nan, math.nan)
                        mw = width / n if n else math.nan
                        tables[level].add(scen, cell, metric, method, round(100 * cov, 1),
                                          round(100 * lo, 1), round(100 * hi, 1),
                                          round(mw, 4), below, above, undef)
                        print(f"{level:>5} {scen:<20} {cell:<13} {metric:<9} {method:<4} "
                              f"{100 * cov:>10.1f} [{100 * lo:5.1f}, {100 * hi:5.1f}] "
                              f"{mw:>7.4f} {below:>5} {above:>5}", flush=True)
                        key = (metric, method, level)
                        worst[key] = min(worst.get(key, 2.0), cov)
    for metric in ("AUC", "precision", "recall"):
        for level in LEVELS:
            res.figure(f"worst_{metric.lower()}_{round(level * 100)}",
                       f"Lowest coverage of the {metric} interval at {level:.0%} over every cell",
                       round(100 * worst[(metric, "new", level)], 1), "%",
                       peer="DeLong's normal interval" if metric == "AUC" else "plain Wilson",
                       peer_value=round(100 * worst[(metric, "old", level)], 1))
    print(f"({time.perf_counter() - t0:.0f} s)")
    res.write(args.json)


if __name__ == "__main__":
    main()
