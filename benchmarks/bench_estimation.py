"""Label-free estimates against the truth, beside NannyML's CBPE, and what they cost.

Streams with a known truth: a scikit-learn logistic regression trained on a source
distribution (``x ~ N(0, I)`` in 5 dimensions, ``y | x ~ Bernoulli(sigmoid(beta . x +
b))``, about 30% positives; well specified, so its scores are calibrated on the source),
then scored on windows (chunks) of a target distribution:

* ``none``: the source itself;
* ``covariate``: ``x ~ N(delta, I)`` with ``P(y | x)`` unchanged (estimates stay valid);
* ``prior``: the class shares halved (positives drawn at half their rate from the
  source's class-conditional distributions: ``P(x | y)`` unchanged, so the scores are no
  longer calibrated);
* ``concept``: ``P(y | x)`` changed (one coefficient's sign flipped; estimates fail).

For every case, ``--windows`` seeded windows of ``--chunk`` events (a new model and new
data per seed): the realized precision, recall, F1, accuracy and ROC AUC at threshold 0.5
from the labels, streameval's estimate (``streameval.metrics.estimated``, scores taken as
probabilities) with its 95% interval; CBPE's published method re-run (the same estimates
after an isotonic calibration fitted on a labelled reference sample of the source: what
NannyML's CBPE does); and NannyML's CBPE itself on the same chunks and reference when
``--nannyml PYTHON`` points to a Python that has ``nannyml`` (run in a subprocess). Reported: mean error (bias), mean absolute error, and the interval's
coverage (share of windows whose realized value lies inside).

Throughput: the default monitor and the default label-free monitor (``Monitor.default(
label_free=True)``: the estimates, their checks and the score detector besides), on
continuous scores in batches of 1000, events/s in one run.

Score drift: the sequential detector's false alarms on stationary streams and its
delays on planted shifts of the score distribution (``--drift-streams``).

Usage::

    python benchmarks/bench_estimation.py                         # full size
    python benchmarks/bench_estimation.py --quick                 # small, to check it runs
    python benchmarks/bench_estimation.py --nannyml /tmp/nm/bin/python
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _results  # noqa: E402

from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import (  # noqa: E402
    accuracy_score, f1_score, precision_score, recall_score, roc_auc_score,
)

from streameval import Monitor  # noqa: E402
from streameval.metrics.estimated import (  # noqa: E402
    EstimatedAccuracy, EstimatedF1, EstimatedPrecision, EstimatedRecall, EstimatedROCAUC,
)
from streameval.metrics.calibration import IsotonicCalibration  # noqa: E402
from streameval.metrics.scoredrift import ScoreDriftDetector  # noqa: E402

DIM = 5
BETA = np.array([1.2, -0.8, 0.6, 0.4, -0.3])
BIAS = -1.2
CASES = ("none", "covariate", "prior", "concept")
METRICS = {
    "precision": (EstimatedPrecision, lambda y, s: precision_score(y, s >= 0.5, zero_division=np.nan)),
    "recall": (EstimatedRecall, lambda y, s: recall_score(y, s >= 0.5, zero_division=np.nan)),
    "f1": (EstimatedF1, lambda y, s: f1_score(y, s >= 0.5, zero_division=np.nan)),
    "accuracy": (EstimatedAccuracy, lambda y, s: accuracy_score(y, s >= 0.5)),
    "roc_auc": (EstimatedROCAUC, lambda y, s: roc_auc_score(y, s) if 0 < y.sum() < len(y) else np.nan),
}


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def source(rng, n, beta=BETA, shift=0.0):
    x = rng.normal(size=(n, DIM))
    x[:, :2] += shift
    y = rng.random(n) < _sigmoid(x @ beta + BIAS)
    return x, y


def target(rng, case, n):
    """A window of the target distribution of ``case``: ``(x, y)``."""
    if case == "none":
        return source(rng, n)
    if case == "covariate":
        return source(rng, n, shift=0.6)
    if case == "concept":
        beta = BETA.copy()
        beta[1] = -beta[1]
        return source(rng, n, beta=beta)
    if case == "prior":  # positives kept with probability 1/2: P(x | y) unchanged
        xs, ys = [], []
        got = 0
        while got < n:
            x, y = source(rng, 2 * n)
            keep = ~y | (rng.random(2 * n) < 0.5)
            xs.append(x[keep])
            ys.append(y[keep])
            got += int(keep.sum())
        return np.concatenate(xs)[:n], np.concatenate(ys)[:n]
    raise ValueError(case)


def run_accuracy(args, nannyml):
    cases = {c: {m: {"err": [], "cover": [], "nm_err": [], "cbpe_err": [], "cbpe_cover": []}
                 for m in METRICS} for c in CASES}
    nm_jobs = []
    for case in CASES:
        for seed in range(args.windows):
            rng = np.random.default_rng([seed, CASES.index(case)])
            xt, yt = source(rng, args.train)
            model = LogisticRegression(C=100.0).fit(xt, yt)
            xr, yr = source(rng, args.chunk)  # NannyML's labelled reference
            x, y = target(rng, case, args.chunk)
            s = model.predict_proba(x)[:, 1]
            # CBPE's published method re-run: scores calibrated on the labelled
            # reference (isotonic), then the expected confusion matrix
            cal = IsotonicCalibration().fit(yr, model.predict_proba(xr)[:, 1])
            for name, (cls, realized_of) in METRICS.items():
                real = realized_of(y, s)
                if not math.isfinite(real):
                    continue
                for key, est in (("", cls(threshold=0.5)),
                                 ("cbpe_", cls(threshold=0.5, calibration=cal))):
                    value = est.update_many(None, s).get()
                    if not math.isfinite(value):
                        continue
                    lo, hi = est.interval(0.95)
                    cases[case][name][key + "err"].append(value - real)
                    cases[case][name][key + "cover"].append(lo <= real <= hi)
            if nannyml:
                nm_jobs.append((case, seed, model.predict_proba(xr)[:, 1], yr, s, y))
    if nannyml:
        for (case, seed, nm) in run_nannyml(nannyml, nm_jobs, args.chunk):
            for name, v in nm.items():
                if name in METRICS and v.get("estimate") is not None:
                    real = v["realized"]
                    if real is not None and math.isfinite(real):
                        cases[case][name]["nm_err"].append(v["estimate"] - real)
    t = _results.table(
        "accuracy", "Estimate minus realized value, per window (threshold 0.5)",
        ["case", "metric", "windows", "bias", "MAE", "95% coverage",
         "CBPE (re-run) MAE", "CBPE (re-run) coverage", "NannyML CBPE MAE"],
        note="bias: mean error; MAE: mean absolute error; coverage: share of windows whose "
             "realized value lies in the 95% interval. Scores taken as probabilities; "
             "CBPE (re-run): the same estimates after an isotonic calibration fitted on a "
             "labelled reference sample of the source (CBPE's published method); NannyML "
             "CBPE: NannyML's own, same chunks and reference (empty when not run).")
    for case in CASES:
        for name in METRICS:
            d = cases[case][name]
            err = np.array(d["err"])
            cb = np.array(d["cbpe_err"])
            nm = np.array(d["nm_err"])
            t.add(case, name, len(err), _r(err.mean()) if len(err) else None,
                  _r(np.abs(err).mean()) if len(err) else None,
                  _r(np.mean(d["cover"])) if d["cover"] else None,
                  _r(np.abs(cb).mean()) if len(cb) else None,
                  _r(np.mean(d["cbpe_cover"])) if d["cbpe_cover"] else None,
                  _r(np.abs(nm).mean()) if len(nm) else None)
            print(f"{case:10s} {name:10s} n={len(err):4d} bias={err.mean():+.4f} "
                  f"MAE={np.abs(err).mean():.4f} cover={np.mean(d['cover']):.3f}  "
                  f"CBPE re-run MAE={np.abs(cb).mean():.4f} cover={np.mean(d['cbpe_cover']):.3f}"
                  + (f"  NannyML MAE={np.abs(nm).mean():.4f}" if len(nm) else ""))
    return cases


def _r(v, k=4):
    return None if v is None or not math.isfinite(v) else round(float(v), k)


NANNYML_SCRIPT = r"""
import json, sys
import numpy as np, pandas as pd
import nannyml as nml
from sklearn.metrics import precision_score, recall_score, f1_score, accuracy_score, roc_auc_score
jobs = json.load(open(sys.argv[1]))
out = []
for job in jobs:
    ref = pd.DataFrame({"y_pred_proba": job["ref_s"], "y_true": np.array(job["ref_y"], int)})
    ref["y_pred"] = (ref["y_pred_proba"] >= 0.5).astype(int)
    ana = pd.DataFrame({"y_pred_proba": job["s"]})
    ana["y_pred"] = (ana["y_pred_proba"] >= 0.5).astype(int)
    est = nml.CBPE(y_pred_proba="y_pred_proba", y_pred="y_pred", y_true="y_true",
                   problem_type="classification_binary", chunk_size=len(ana),
                   metrics=["roc_auc", "f1", "precision", "recall", "accuracy"])
    est.fit(ref)
    res = est.estimate(ana).filter(period="analysis").to_df()
    y = np.array(job["y"], int); s = np.array(job["s"]); p = s >= 0.5
    realized = {"precision": precision_score(y, p, zero_division=np.nan),
                "recall": recall_score(y, p, zero_division=np.nan),
                "f1": f1_score(y, p, zero_division=np.nan), "accuracy": accuracy_score(y, p),
                "roc_auc": roc_auc_score(y, s) if 0 < y.sum() < len(y) else float("nan")}
    vals = {}
    for m in realized:
        v = float(res[(m, "value")].iloc[0])
        vals[m] = {"estimate": v if np.isfinite(v) else None,
                   "realized": float(realized[m]) if np.isfinite(realized[m]) else None}
    out.append([job["case"], job["seed"], vals])
json.dump(out, sys.stdout)
"""


def run_nannyml(python, jobs, chunk):
    """NannyML's CBPE on the same chunks, in a subprocess of ``python``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "jobs.json")
        with open(path, "w") as f:
            json.dump([{"case": c, "seed": seed, "ref_s": rs.tolist(), "ref_y": ry.tolist(),
                        "s": s.tolist(), "y": y.tolist()}
                       for c, seed, rs, ry, s, y in jobs], f)
        script = os.path.join(tmp, "cbpe.py")
        Path(script).write_text(NANNYML_SCRIPT)
        done = subprocess.run([python, script, path], capture_output=True, text=True,
                              check=False)
        if done.returncode:
            print(f"NannyML failed: {done.stderr[-2000:]}", file=sys.stderr)
            return []
        return json.loads(done.stdout)


def run_throughput(args):
    rng = np.random.default_rng(0)
    n = args.events
    s = rng.random(n)
    y = rng.random(n) < s
    t = np.arange(n, dtype=float)
    size = args.size

    def monitor(label_free):
        # the default monitor, and the default of a stream whose predictions come before
        # their labels: the label-free rows, the estimates' checks and the score detector
        return Monitor.default(size=size, every=10_000, label_free=label_free)

    out = {}
    for label, flag in (("default monitor", False), ("default label-free monitor", True)):
        best = math.inf
        for _ in range(args.repeat):
            mon = monitor(flag)
            t0 = time.perf_counter()
            for i in range(0, n, 1000):
                mon.update_many(y[i:i + 1000], s[i:i + 1000], t=t[i:i + 1000])
            mon.flush()
            best = min(best, time.perf_counter() - t0)
        out[label] = n / best
    tab = _results.table(
        "throughput", "The default monitor, with and without the label-free rows (continuous scores)",
        ["monitor", "events/s", "relative"],
        note=f"{n} labelled events in batches of 1000, windows of {size}; best of "
             f"{args.repeat}. The label-free monitor adds the label-free rows (estimates, "
             "predicted-positive rate, score drift), the estimates' checks against the "
             "realized values and the score detector.")
    base = out["default monitor"]
    for label, v in out.items():
        tab.add(label, round(v), _r(v / base, 3))
        print(f"{label:28s} {v:12,.0f} events/s  ({v / base:.2f}x)")
    _results.figure("estimates_cost", "Default label-free monitor",
                    round(out["default label-free monitor"]),
                    "events/s", peer="default monitor", peer_value=round(base), better="higher")


def run_drift(args):
    """False alarms on stationary score streams; delays on planted shifts."""
    kw = dict(alpha=0.005, horizon=1_000_000, reference=args.drift_reference,
              window=args.drift_reference, every=args.drift_every)
    n = args.drift_events
    alarms = 0
    for seed in range(args.drift_streams):
        rng = np.random.default_rng([seed, 99])
        d = ScoreDriftDetector(**kw).update_many(None, rng.beta(2, 5, n))
        alarms += d.report()["changes"] > 0
    tab = _results.table(
        "score_drift", "Score drift detector: false alarms and delays",
        ["stream", "streams", "alarmed", "median delay", "90% delay"],
        note=f"alpha 0.005 over a horizon of 10^6 events; reference and window "
             f"{args.drift_reference}, a check every {args.drift_every}; stationary "
             f"streams of {n} Beta(2, 5) scores; shifts planted after {n // 2} events.")
    tab.add("stationary", args.drift_streams, alarms, None, None)
    print(f"stationary: {alarms}/{args.drift_streams} streams alarmed")
    for label, (a, b) in (("mean 0.29 to 0.33 (Beta(2.4, 5))", (2.4, 5)),
                          ("mean 0.29 to 0.38 (Beta(3, 5))", (3, 5)),
                          ("mean 0.29 to 0.50 (Beta(5, 5))", (5, 5))):
        delays = []
        for seed in range(args.drift_streams):
            rng = np.random.default_rng([seed, 7])
            d = ScoreDriftDetector(**kw).update_many(None, rng.beta(2, 5, n // 2))
            before = d.report()["changes"]
            d.update_many(None, rng.beta(a, b, n // 2))
            after = [c for c in d.changes[before:] if c["n"] > n // 2]
            if after:
                delays.append(after[0]["n"] - n // 2)
        tab.add(label, args.drift_streams, len(delays),
                int(np.median(delays)) if delays else None,
                int(np.percentile(delays, 90)) if delays else None)
        print(f"{label}: {len(delays)}/{args.drift_streams} detected, median delay "
              f"{np.median(delays) if delays else float('nan'):.0f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--windows", type=int, default=100, help="windows per case")
    ap.add_argument("--chunk", type=int, default=2000, help="events per window")
    ap.add_argument("--train", type=int, default=5000, help="training events per model")
    ap.add_argument("--events", type=int, default=1_000_000, help="throughput events")
    ap.add_argument("--size", type=int, default=10_000, help="window of the monitor")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--drift-streams", type=int, default=200)
    ap.add_argument("--drift-events", type=int, default=100_000)
    ap.add_argument("--drift-reference", type=int, default=5000)
    ap.add_argument("--drift-every", type=int, default=1000)
    ap.add_argument("--nannyml", metavar="PYTHON", default=None,
                    help="a Python interpreter with nannyml installed (CBPE beside ours)")
    ap.add_argument("--quick", action="store_true", help="small sizes, to check it runs")
    _results.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    if args.quick:
        args.windows, args.chunk, args.events, args.repeat = 20, 1000, 50_000, 1
        args.drift_streams, args.drift_events = 10, 20_000
        args.drift_reference, args.drift_every = 2000, 500
    res = _results.start(__file__, args)
    if args.nannyml:
        done = subprocess.run([args.nannyml, "-c", "import nannyml; print(nannyml.__version__)"],
                              capture_output=True, text=True, check=False)
        _results.param(nannyml_version=done.stdout.strip() or None)
    run_accuracy(args, args.nannyml)
    run_throughput(args)
    run_drift(args)
    res.write(args.json)


if __name__ == "__main__":
    main()
