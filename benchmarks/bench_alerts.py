"""Alerts: the default monitor's false-alarm share and detection delay, cell by cell.

Every *cell* is a kind of stream (:data:`CELLS`, a registry: :func:`register` adds
one) run on ``--seeds`` seeded streams of ``--events`` events; cells that need another driver
(many segments through a Monitor) bring their own (``Cell.run``). What a cell measures
depends on its group:

* **healthy** (nothing changes in the model over long stretches): the share of streams on which the default
  monitor's detectors (``SequentialDrift`` on recall and on precision at alpha 0.005
  each, horizon one million events: what ``recall alarm`` and ``precision alarm``
  read) detect anything, with its Clopper-Pearson 95% interval; the alarms per million
  events (the detectors restart after each) and the first alarm's event; river's
  ADWIN (defaults) on the same indicator streams beside it. Cells: independent events
  at 30% and 1% positives; labels in bursts (a two-state Markov chain with 30%
  positives whose runs, alternating, average 5, 20 and 50 events; scores independent
  given the label: the model is healthy, the labels are not independent); errors in
  bursts (labels independent; the model alternates between hard and easy stretches
  averaging 20 and 50 events, which shift every logit by -0.6 or +0.6: the correctness
  indicators are autocorrelated, their long-run rates constant).
* **drop** (a planted drop after ``--pre`` healthy events, 500 000 by default, on
  streams of up to ``--drop-events`` events, fed until the drop is detected): median
  and 90th percentile
  of the delay (events from the change to the first alarm after it), the share found
  within the stream, alarms before the change; for the default detectors, for the
  default *rules* (run in a Monitor evaluated every 1 000 events and at each
  detection, the alarm against the first stretch's level: the evaluation that
  emitted the alert), for the watched detector at the budget that matches ADWIN's
  false-alarm share, and for ADWIN at the deltas that match the detector's. Cells: recall 0.85 -> 0.80 and
  -> 0.70, precision 0.60 -> 0.50, AUC 0.90 -> 0.85 (the AUC detector), at 30% and 1%
  positives.
* **recovery**: recall rises 0.85 -> 0.90 at ``--pre`` for 200 000 events, then returns:
  the share of streams where the rise is detected, and where a *drop* is detected after
  the return (the return to a level held before, which a drop alarm would page on).

**Matched false-alarm share.** ADWIN alone is run on ``--adwin-seeds`` healthy
streams per independent cell (500 by default: its share per delta with a
Clopper-Pearson interval narrow enough to match on), every delta of
:data:`ADWIN_DELTAS` (river's default 0.002, larger ones that alarm more and detect
sooner, and smaller ones). Four matches, per metric and rate: (1) the detector at
ADWIN's share, by the detector's proven bound: the largest budget ``b`` of
:data:`BUDGETS` whose bound on the false-alarm share of a stream of ``--events``
events, ``b x events / 1 000 000``, does not exceed ADWIN's measured share at its
default delta (or, where ADWIN has none, the upper end of its 95% interval). A budget
``b`` is the alarm level of a detector at "alpha" ``b`` over a million events (``b >
1``: at most ``b`` false alarms expected per million by the bound); a budget's
detector that crossed before the change alarmed falsely and counts as a miss. (A
budget matched by its bound needs no healthy streams of the detector, which at the
shares in question would take thousands to tell apart; the bound is far above the
detector's share on independent streams, so this match favours ADWIN.) (2) ADWIN at the default
monitor's stated level: the largest delta whose measured share (its point estimate on
the ``--adwin-seeds`` streams; its Clopper-Pearson interval shown) is at most 1% per
million events, scaled to the streams' length; that level is at least the detector's
true share, so this match favours ADWIN (its point estimate, not its interval's upper
end, favours it further). (3) ADWIN at the detector's measured share
(alpha 0.005, on the cell's streams). (4) Both at the stated level by measurement:
ADWIN at the delta of (2), the detector at the largest budget whose measured share
(its traced crossings on the cell's ``--seeds`` healthy streams, a point estimate) is
at most that level. Each shows the medians and their ratio, detector / ADWIN.

**How it runs.** The detectors are driven directly on each metric's indicator stream
(recall: the positives' hits; precision: the predicted positives' labels; AUC: the
disjoint positive/negative pairs, paired with numpy): a ``SequentialDrift`` fed a
stream of observations makes exactly the statistic the Monitor's detector makes on the
events (a check at the start compares them on one stream). One traced detector per
metric and stream records its anytime p-value at every block of 50 observations
(:func:`traced`: every check a detector at any budget makes, and the blocks between
candidates that one far from its level skips); a detector at budget ``b`` alarms at
the first check with ``p <= b`` (until its first alarm, after which a real detector
restarts; the trace's first crossing is at or before its own). A delay counts the events from the change to the
event on which the detector crossed its level; for a rule, that event (the alert's
``n``) and the evaluation that emitted the alert are both shown. ADWIN runs as a Python loop over the indicator
values, stopped at its first alarm where only that matters. Streams: binormal logits,
``score = sigmoid(mu_y + N(0, 1))`` (continuous floats), threshold 0.5, recall 0.85,
precision 0.60; numpy, one seed per stream: reproducible.

    python benchmarks/bench_alerts.py --seeds 20 --events 300000 --jobs 2  # reduced
    python benchmarks/bench_alerts.py                              # 100 seeds x 1M events
    python benchmarks/bench_alerts.py --cells bursty               # cells whose name has it

Results: ``benchmarks/results/bench_alerts.json`` (``--json PATH`` writes elsewhere);
the documentation's calibration section shows its tables. With the environment
variable ``BENCH_ALERTS_RAW`` naming a file, the streams' results are saved there, and
a later run with the same arguments makes its tables from that file instead of
running the streams again. The file records the arguments, not the code: the tables
are the current code's, made from the streams as that run left them (and the results'
machine and versions are the current ones).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import pickle
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import _results as R

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import norm

RECALL, PRECISION = 0.85, 0.60
HORIZON = 1_000_000
ALPHA = 0.005                  # the default monitor's alpha per detector
EVERY = 1000                   # the default monitor evaluates every 1 000 events
THRESHOLD = 0.5
#: alarm levels of the traced detector: alpha below 1, expected false alarms per
#: million events (the bound's) above
BUDGETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500,
           1000, 2000, 5000, 10_000, 100_000)
#: river's ADWIN default, and the deltas the matched comparison chooses from (smaller:
#: fewer false alarms, later detections; those above the default give ADWIN its
#: fastest delta where its measured share allows one, as on sparse streams)
ADWIN_DELTA = 0.002
ADWIN_DELTAS = (0.05, 0.02, 0.01, 0.005, 0.002, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
SQRT2 = math.sqrt(2.0)
DEFAULT = ("recall", "precision")   # the default monitor's detectors


# ----------------------------------------------------------------------- the model
def means(rate, recall=RECALL, precision=PRECISION):
    """Logit means (mu_0, mu_1) for recall and precision at threshold 0.5."""
    fpr = rate * recall * (1 - precision) / (precision * (1 - rate))
    return float(norm.ppf(fpr)), float(norm.ppf(recall))


def auc_means(auc):
    """(mu_0, mu_1) with recall 0.85 and the given AUC."""
    mu1 = float(norm.ppf(RECALL))
    return mu1 - SQRT2 * float(norm.ppf(auc)), mu1


def scores(rng, y, mu0, mu1):
    logit = np.where(y, mu1, mu0) + rng.standard_normal(len(y))
    return 1.0 / (1.0 + np.exp(-logit))


def markov_labels(rng, n, rate, run):
    """Labels in bursts: runs alternate between the labels; positive runs average
    ``2 run rate`` events and negative ones ``2 run (1 - rate)`` (geometric), so runs
    average ``run`` events and ``rate`` of the events are positive."""
    out = np.empty(n, dtype=bool)
    cur, i = bool(rng.random() < rate), 0
    m1, m0 = 2 * run * rate, 2 * run * (1 - rate)
    while i < n:
        k = 2 * (n - i) // int(run) + 16
        l1 = rng.geometric(1 / m1, k) if m1 > 1 else np.ones(k, dtype=np.int64)
        l0 = rng.geometric(1 / m0, k)
        lens = np.empty(2 * k, dtype=np.int64)
        lens[0::2], lens[1::2] = (l1, l0) if cur else (l0, l1)
        vals = np.zeros(2 * k, dtype=bool)
        vals[0::2] = cur
        vals[1::2] = not cur
        y = np.repeat(vals, lens)
        take = min(len(y), n - i)
        out[i:i + take] = y[:take]
        i += take
    return out


# stream makers: (seed, n, **params) -> (y, s); module level, so that workers pickle them
def independent(seed, n, rate):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < rate
    return y, scores(rng, y, *means(rate))


def bursty(seed, n, rate, run):
    rng = np.random.default_rng(seed)
    y = markov_labels(rng, n, rate, run)
    return y, scores(rng, y, *means(rate))


#: the logit shift of the hard and easy stretches of bursty_errors
ERROR_SHIFT = 0.6


def bursty_errors(seed, n, rate, run):
    """Errors in bursts: labels independent, but the model goes through hard and easy
    stretches (a two-state Markov chain, half the time each, runs averaging ``run``
    events) that shift every logit by -ERROR_SHIFT or +ERROR_SHIFT: the hits and false
    positives come in bursts, the rates over any long stretch are constant."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < rate
    hard = markov_labels(rng, n, 0.5, run)
    mu0, mu1 = means(rate)
    logit = np.where(y, mu1, mu0) + np.where(hard, -ERROR_SHIFT, ERROR_SHIFT)
    return y, 1.0 / (1.0 + np.exp(-(logit + rng.standard_normal(n))))


def planted(seed, n, rate, kind, after, pre, until=None):
    """A drop (or a rise) of ``kind`` ("recall", "precision", "auc") to ``after`` at
    event ``pre``, back to the healthy model at ``until`` (None: never)."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < rate
    if kind == "auc":
        a0, a1 = auc_means(0.90)
        d0, d1 = SQRT2 * norm.ppf(0.90), SQRT2 * norm.ppf(after)
        h = (d0 - d1) / 2                 # half of the separation lost on each side
        b0, b1 = a0 + h, a1 - h
    else:
        a0, a1 = means(rate)
        b0, b1 = (a0, float(norm.ppf(after))) if kind == "recall" else (
            means(rate, precision=after)[0], a1)
    end = n if until is None else until
    mu0 = np.full(n, a0)
    mu1 = np.full(n, a1)
    mu0[pre:end], mu1[pre:end] = b0, b1
    logit = np.where(y, mu1, mu0) + rng.standard_normal(n)
    return y, 1.0 / (1.0 + np.exp(-logit))


# ----------------------------------------------------------------------- the cells
@dataclasses.dataclass(frozen=True)
class Cell:
    """One kind of stream. ``make(seed, n, pre)`` returns ``(labels, scores)``;
    ``group``: "healthy", "drop" or "recovery"; ``metrics``: the detectors watched
    (the default monitor's, or the one metric a drop targets); ``change``: where the
    planted change sits, as a function of ``pre`` (None: nothing planted);
    ``matched``: the healthy cell whose false-alarm shares set the matched budget;
    ``run``: a driver ``(cell, seed, n, pre) -> {metric: result}`` replacing
    :func:`run_stream`'s for cells that need another (a Monitor over many segments),
    returning what it returns (a healthy cell's table reads ``alarms``, ``adwin``,
    ``min_p`` and ``variance_factor`` of the metrics in :data:`DEFAULT`)."""

    name: str
    group: str
    make: object
    metrics: tuple = DEFAULT
    rate: float = 0.30
    planted: bool = False
    matched: str | None = None
    note: str = ""
    run: object = None


#: the cells run, in table order; register() adds more (prevalence and volume cycles,
#: segments): a healthy cell's row shows the default monitor's false-alarm share
CELLS: list[Cell] = []


def register(cell):
    """Add a cell to :data:`CELLS` (names are unique); returns it."""
    if any(c.name == cell.name for c in CELLS):
        raise ValueError(f"cell {cell.name!r} is registered already")
    if cell.group not in ("healthy", "drop", "recovery"):
        raise ValueError(f"cell {cell.name!r}: group {cell.group!r}")
    CELLS.append(cell)
    return cell


def _stream(fn, **kw):
    return functools.partial(_call, fn, kw)


def _call(fn, kw, seed, n, pre):
    return fn(seed, n, **{k: (pre if v == "pre" else v) for k, v in kw.items()})


for _rate in (0.30, 0.01):
    register(Cell(f"independent, {_rate:.0%} positives", "healthy",
                  _stream(independent, rate=_rate), DEFAULT + ("roc_auc",), _rate,
                  note="events independent"))
for _run in (5, 20, 50):
    register(Cell(f"bursty labels, mean run {_run}, 30% positives", "healthy",
                  _stream(bursty, rate=0.30, run=_run), DEFAULT, 0.30,
                  note="labels a two-state Markov chain; scores independent given the label"))
register(Cell("errors in bursts, mean run 50, 30% positives", "healthy",
              _stream(bursty_errors, rate=0.30, run=50), DEFAULT, 0.30,
              note="labels independent; hard and easy stretches shift every logit"))
for _rate in (0.30, 0.01):
    for _kind, _metric, _after, _label in (
            ("recall", "recall", 0.80, "recall 0.85 -> 0.80"),
            ("recall", "recall", 0.70, "recall 0.85 -> 0.70"),
            ("precision", "precision", 0.50, "precision 0.60 -> 0.50"),
            ("auc", "roc_auc", 0.85, "AUC 0.90 -> 0.85")):
        register(Cell(f"{_label}, {_rate:.0%} positives", "drop",
                      _stream(planted, rate=_rate, kind=_kind, after=_after, pre="pre"),
                      (_metric,), _rate, planted=True,
                      matched=f"independent, {_rate:.0%} positives"))


def _make_recovery(seed, n, pre):
    return planted(seed, n, 0.30, "recall", 0.90, pre, until=pre + RISE)


#: events the improvement of the recovery cell lasts
RISE = 200_000
register(Cell("recall 0.85 -> 0.90 for 200 000 events, then back, 30% positives", "recovery",
              _make_recovery, ("recall",), 0.30, planted=True))
# (registered after the others, so that their seeds stay what they were)
register(Cell("errors in bursts, mean run 20, 30% positives", "healthy",
              _stream(bursty_errors, rate=0.30, run=20), DEFAULT, 0.30,
              note="labels independent; hard and easy stretches shift every logit"))


# ----------------------------------------------------------------- indicator streams
def indicators(metric, y, s):
    """(event indices, indicator values) of a SequentialDrift on ``metric``."""
    if metric == "recall":
        ev = np.flatnonzero(y)
        return ev, (s[ev] >= THRESHOLD).astype(np.float64)
    if metric == "precision":
        ev = np.flatnonzero(s >= THRESHOLD)
        return ev, y[ev].astype(np.float64)
    return auc_pairs(y, s)


def auc_pairs(y, s):
    """SequentialDrift's disjoint AUC pairs, vectorised: at most one event is pending
    (one of the other class closes the pair, one of the same class replaces it), so a
    pair is (event i - 1, event i) where the label switches at i, except that a switch
    right after a pair's closing event opens a new pending event: in a run of
    consecutive switches the 1st, 3rd, ... close pairs."""
    n = len(y)
    if n < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    sw = np.zeros(n, dtype=bool)
    sw[1:] = y[1:] != y[:-1]
    idx = np.arange(n)
    start = sw.copy()
    start[1:] &= ~sw[:-1]
    last = np.maximum.accumulate(np.where(start, idx, 0))
    ev = np.flatnonzero(sw & ((idx - last) % 2 == 0))
    yp = y[ev]
    pos = np.where(yp, s[ev], s[ev - 1])
    neg = np.where(yp, s[ev - 1], s[ev])
    return ev, np.where(pos > neg, 1.0, np.where(pos == neg, 0.5, 0.0))


def observer(alpha=ALPHA, horizon=HORIZON):
    """A SequentialDrift fed an indicator stream directly (:func:`as_events`): its
    "recall" observations are the indicator values."""
    from streameval.sequential import SequentialDrift

    return SequentialDrift("recall", alpha=alpha, horizon=horizon, threshold=0.75)


def as_events(n, ev, xs):
    """The indicator stream as ``n`` events for :func:`observer`: event ``ev[i]`` is an
    observation (label 1) of value ``xs[i]`` (0 or 1: the scores are continuous, so
    AUC pairs never tie), the others are not observations (label 0). The budget
    shares count events, so the events between observations are kept."""
    if np.any(xs == 0.5):
        raise ValueError("a tied AUC pair: the streams' scores should be continuous")
    y = np.zeros(n, dtype=bool)
    y[ev] = True
    x = np.zeros(n)
    x[ev] = xs
    return y, x


def feed(det, events, a, b):
    """Events ``a:b`` of :func:`as_events`'s stream into a detector."""
    if b > a:
        y, x = events
        det.update_trusted(y[a:b], x[a:b])


def traced():
    """A detector that never alarms (alpha 1e-300, horizon 1) and records the
    event index and its p-value over HORIZON events at each check: the p-value of
    a detector with horizon HORIZON (the horizon only scales the budget shares).

    It checks at every block boundary, between candidates too: a detector at a budget
    checks the blocks between candidates only while its last check's bound came within
    NEAR nats of its alarm level, so the trace checks every block that a detector at
    any budget of BUDGETS checks, and some more. A budget's first crossing in the trace
    is then at or before the detector's own: the two differ only where the detector,
    far from its level at its check before, skipped a block at which the trace
    crossed (it then crosses later, or never). The trace's delays are at most the
    detector's and its shares of healthy streams with a crossing at least the
    detector's."""
    from streameval.sequential import SequentialDrift

    class Traced(SequentialDrift):
        def __init__(self):
            super().__init__("recall", alpha=1e-300, horizon=1, threshold=0.75)
            self.trace_i, self.trace_p = [], []

        def _boundary(self):
            prev = self._stat
            super()._boundary()
            if self._stat is not prev:
                self.trace_i.append(self.n - 1)
                self.trace_p.append(self._stat[0] * HORIZON)
            # the next block is checked, as near its level (the base class has just
            # found it far from 1e-300, and would skip the blocks up to the next
            # candidate)
            self._near = True

        def _far_checks(self, *args):
            # every check is recorded: a batch's checks are never left out as far from
            # this detector's own alarm level (1e-300, which every check is far from)
            return 0

    return Traced()


def adwin_alarms(xs, stop_after=-1, delta=ADWIN_DELTA):
    """Observation indices where river's ADWIN (defaults, or this ``delta``) fires, up to
    and including the first one past ``stop_after``."""
    from river import drift

    d = drift.ADWIN(delta=delta)
    upd = d.update
    hits = []
    for i, v in enumerate(xs.tolist()):
        upd(v)
        if d.drift_detected:
            hits.append(i)
            if i > stop_after:
                break
    return hits


# ---------------------------------------------------------------------- the workers
def adwin_share_task(cell, seed, n):
    """ADWIN alone on one healthy stream of ``cell``: per watched metric and delta of
    :data:`ADWIN_DELTAS`, the event of its first alarm (None: none within the ``n``
    events), each delta stopped at its first alarm."""
    y, s = cell.make(seed, n, n)
    out = {}
    for metric in cell.metrics:
        ev, xs = indicators(metric, y, s)
        firsts = {}
        for delta in ADWIN_DELTAS:
            hits = adwin_alarms(xs, stop_after=-1, delta=delta)
            firsts[delta] = int(ev[hits[0]]) if hits else None
        out[metric] = firsts
    return out


def run_stream(cell, seed, n, pre):
    """One stream of a cell: per watched metric, the traced p-values (first crossing
    of every budget, before and after the change), the alarms of a real detector at
    the default alpha (with its restarts), and ADWIN's alarms; as event indices."""
    if cell.run is not None:
        return cell.run(cell, seed, n, pre)
    y, s = cell.make(seed, n, pre)
    out = {}
    for metric in cell.metrics:
        ev, xs = indicators(metric, y, s)
        events = as_events(n, ev, xs)
        cut = pre if cell.planted else n
        tr = traced()
        real = observer()
        if cell.group == "drop":
            # before the change, then growing chunks until the default alpha has crossed
            feed(tr, events, 0, cut)
            a, step = cut, 5000
            while a < n:
                b = min(n, a + step)
                feed(tr, events, a, b)
                if any(i >= cut and p <= ALPHA for i, p in zip(tr.trace_i, tr.trace_p)):
                    break
                a, step = b, step * 2
        else:
            feed(tr, events, 0, n)
            if min(tr.trace_p, default=math.inf) <= ALPHA:
                # it alarms (the traced path is the real one until then): run it for
                # real to count its alarms, restarts included
                feed(real, events, 0, n)
        first = {}
        early = {}
        ti = np.asarray(tr.trace_i, dtype=np.int64)
        tp = np.asarray(tr.trace_p)
        for b in BUDGETS:
            hit = ti[tp <= b]
            early[b] = bool(len(hit) and hit[0] < cut) if cell.planted else None
            # the traced path is a budget's detector only up to its first crossing: one
            # that crossed before the change alarmed falsely (and restarted), so it has
            # no delay here (counted as a miss)
            after = hit[hit >= cut] if cell.planted and not early[b] else (
                hit[:0] if cell.planted else hit)
            first[b] = int(after[0]) if len(after) else None
        rule = rule_alert(y, s, metric, cut, n) if cell.group == "drop" else None
        real_ev = [c.index for c in real.changes]
        dirs = [c.direction for c in real.changes]
        adw = adwin_alarms(xs, stop_after=int(np.searchsorted(ev, pre)) - 1
                           if cell.planted else -1)
        # ADWIN at smaller deltas (the matched comparison): the first alarm (after the
        # change, and whether one came before it), on the independent and drop cells
        grid = {}
        if cell.planted or cell.name.startswith("independent"):
            start = int(np.searchsorted(ev, pre)) if cell.planted else 0
            for delta in ADWIN_DELTAS:
                hits = (adw if delta == ADWIN_DELTA else
                        adwin_alarms(xs, stop_after=start - 1, delta=delta))
                after = [i for i in hits if i >= start]
                grid[delta] = {"first": int(ev[after[0]]) if after else None,
                               "early": any(i < start for i in hits)}
        out[metric] = {
            "adwin_grid": grid,
            "first": first, "early": early, "alarms": real_ev, "directions": dirs,
            "min_p": float(tp.min()) if len(tp) else math.inf,
            "adwin": [int(ev[i]) for i in adw],
            "variance_factor": tr.report()["variance_factor"],
            "rule": rule,
        }
    return out


def rule_alert(y, s, metric, cut, n):
    """The default rule on a planted drop, run for real: a Monitor (evaluated every
    EVERY events) with the metric's SequentialDrift at the default alpha and its alarm
    (reference: the first stretch), fed up to the change, then in growing chunks until
    the alarm fires after it. Returns ``{"n": the firing transition's n, "evaluated_n":
    the evaluation that emitted it}`` (None: not found within the stream)."""
    import streameval as se
    from streameval.alerts import Alarm
    from streameval.monitor import Monitor
    from streameval.sequential import SequentialDrift

    name = "auc" if metric == "roc_auc" else metric
    mon = Monitor({"precision": se.Precision()}, every=EVERY,
                  drift={name: SequentialDrift(metric, alpha=ALPHA, threshold=THRESHOLD)},
                  rules=[Alarm(name)])
    fired = []
    mon.on_alert.append(lambda a: fired.append(a) if a["state"] == "firing" else None)
    mon.update_many(y[:cut], s[:cut])
    a, step = cut, 5000
    while a < n and not any(f["n"] > cut for f in fired):
        b = min(n, a + step)
        mon.update_many(y[a:b], s[a:b])
        a, step = b, step * 2
    after = [f for f in fired if f["n"] > cut]
    return {"n": after[0]["n"], "evaluated_n": after[0]["evaluated_n"]} if after else None


def check_task(seed, n):
    """A SequentialDrift on the events (what the Monitor's rule reads) against the
    observer fed the indicator stream, on a bursty stream with a drop: the same changes
    at the same events; and the numpy AUC pairing against the detector's own."""
    from streameval.sequential import SequentialDrift

    y, s = planted(seed, n, 0.30, "precision", 0.45, n // 2)
    rng = np.random.default_rng(seed)
    yb = markov_labels(rng, n, 0.30, 20)
    ok = True
    for yy in (y, yb):
        for metric in ("recall", "precision"):
            d = SequentialDrift(metric, alpha=0.05, threshold=THRESHOLD).update_many(yy, s)
            ev, xs = indicators(metric, yy, s)
            o = observer(alpha=0.05)
            feed(o, as_events(n, ev, xs), 0, n)
            ok &= d.changes == o.changes
            ok &= d.to_state()["data"] == o.to_state()["data"]
    det = SequentialDrift("roc_auc")
    sr = np.round(s[:20000], 2)
    ev0, x0, _ = det._pairs_of(y[:20000], sr, None)
    ev1, x1 = auc_pairs(y[:20000], sr)
    return ok and np.array_equal(ev0, ev1) and np.array_equal(x0, x1)


# ----------------------------------------------------------------------- summaries
def cp(k, n, level=0.95):
    """Clopper-Pearson interval of k successes in n."""
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta_dist.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta_dist.ppf(1 - a, k + 1, n - k))
    return lo, hi


def pct(x):
    return f"{100 * x:.1f}%" if x >= 0.001 or x == 0 else f"{100 * x:.2f}%"


def share_cell(k, n):
    lo, hi = cp(k, n)
    return f"{k}/{n} = {pct(k / n)} [{pct(lo)}, {pct(hi)}]"


def quantile(delays, q):
    """Nearest-rank quantile; None (missed) is infinite."""
    v = sorted(math.inf if d is None else d for d in delays)
    if not v:
        return math.nan
    return v[max(0, math.ceil(q * len(v)) - 1)]


def fmt_delay(d):
    if d is None or (isinstance(d, float) and math.isnan(d)):
        return "-"
    return "missed" if d == math.inf else f"{d:,.0f}"


def table(key, title, head, rows, note=""):
    t = R.table(key, title, list(head), note)
    for r in rows:
        t.add(*r)
    print(f"## {title}\n")
    if note:
        print(note + "\n")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    print("\n".join(lines) + "\n", flush=True)


def ratio(a, b):
    if not (0 < b < math.inf) or not a < math.inf:
        return math.nan
    return a / b


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=100, help="streams per cell")
    ap.add_argument("--events", type=int, default=1_000_000, help="events per stream")
    ap.add_argument("--drop-events", type=int, default=2_000_000,
                    help="events per stream with a planted change (drops: fed until detected)")
    ap.add_argument("--pre", type=int, default=500_000,
                    help="healthy events before a planted change (the history a drop is "
                         "compared with: at 1%% positives, 5 000 positives)")
    ap.add_argument("--cells", default="", help="run only the cells whose name contains this")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--adwin-seeds", type=int, default=500,
                    help="healthy streams per independent cell on which ADWIN alone is run "
                         "(its false-alarm share per delta, for the matched comparisons)")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    pre = args.pre
    R.start(__file__, args)
    R.param(pre=pre)
    t0 = time.perf_counter()
    cells = [c for c in CELLS if args.cells in c.name]
    # the matched cells come along with the drops that need them
    need = {c.matched for c in cells if c.matched}
    cells = [c for c in CELLS if c in cells or c.name in need]
    N, n = args.seeds, args.events
    print("# Alerts: false alarms and detection delays, cell by cell\n")
    print(f"{N} seeds x {n:,} events per healthy cell; planted changes at event {pre:,} "
          f"of {args.drop_events:,} (drops: fed until detected); "
          f"{args.jobs} worker processes.\n")

    raw = os.environ.get("BENCH_ALERTS_RAW")
    if raw and os.path.exists(raw):
        # the streams of an earlier run with these arguments (its tables again)
        with open(raw, "rb") as f:
            saved_args, res, ares, started, elapsed = pickle.load(f)
        if saved_args != (N, n, args.drop_events, pre, args.cells, args.adwin_seeds):
            raise SystemExit(f"{raw} holds a run with other arguments: {saved_args}")
        R.current().started, R.current().elapsed = started, elapsed
        t0 = time.perf_counter() - elapsed
        print(f"(the streams of {raw}, run at {started:%Y-%m-%d %H:%M} UTC)\n")
    else:
        res, ares = _run_streams(args, cells, N, n, pre)
        if raw:
            with open(raw, "wb") as f:
                pickle.dump(((N, n, args.drop_events, pre, args.cells, args.adwin_seeds),
                             res, ares, R.current().started, time.perf_counter() - t0), f)
    return _tables(args, cells, res, ares, N, n, pre, t0)


def _run_streams(args, cells, N, n, pre):
    """Every stream of the chosen cells, and ADWIN alone on the independent ones."""
    with ProcessPoolExecutor(max_workers=args.jobs) as ex:
        check = ex.submit(check_task, 77, min(n, 200_000))
        futs = {c.name: [ex.submit(run_stream, c, 1_000_000 * (k + 1) + i,
                                   args.drop_events if c.planted else n, pre)
                         for i in range(N)] for k, c in enumerate(CELLS) if c in cells}
        # ADWIN alone on many healthy streams (its first ``seeds`` are the cell's own)
        afuts = {c.name: [ex.submit(adwin_share_task, c, 1_000_000 * (k + 1) + i, n)
                          for i in range(args.adwin_seeds)]
                 for k, c in enumerate(CELLS)
                 if c in cells and c.name.startswith("independent")}
        print("Check: the detector on the events = the detector on the indicator stream "
              f"(changes, sums), numpy AUC pairing = the detector's: "
              f"{'yes' if check.result() else 'NO'}\n", flush=True)
        res = {name: [f.result() for f in fs] for name, fs in futs.items()}
        ares = {name: [f.result() for f in fs] for name, fs in afuts.items()}
    return res, ares


def _tables(args, cells, res, ares, N, n, pre, t0):
    """The tables and targets of :func:`main` from its streams' results."""

    # ---- healthy cells: false alarms
    targets = []
    rows = []
    shares = {}   # (cell, metric) -> (ADWIN share, {budget: share})
    for c in cells:
        if c.group != "healthy":
            continue
        rs = res[c.name]
        k = sum(any(r[m]["alarms"] for m in DEFAULT) for r in rs)
        per_m = sum(len(r[m]["alarms"]) for r in rs for m in DEFAULT) / (len(rs) * n / 1e6)
        firsts = [min((r[m]["alarms"][0] for m in DEFAULT if r[m]["alarms"]), default=None)
                  for r in rs]
        firsts = [f for f in firsts if f is not None]
        ka = sum(any(r[m]["adwin"] for m in DEFAULT) for r in rs)
        vf = float(np.median([r["precision"]["variance_factor"] for r in rs]))
        targets.append((f"{c.name}: false-alarm share <= 1% (the stated level)",
                        k / len(rs) <= 0.01, share_cell(k, len(rs))))
        rows.append((c.name, share_cell(k, len(rs)), f"{per_m:.2f}",
                     f"{min(firsts):,}" if firsts else "-", f"{vf:.2f}",
                     share_cell(ka, len(rs))))
        for m in c.metrics:
            ka_m = sum(bool(r[m]["adwin"]) for r in rs)
            shares[c.name, m] = (ka_m, len(rs), {b: sum(r[m]["min_p"] <= b for r in rs)
                                                 for b in BUDGETS})
    table("healthy", "False alarms of the default monitor on healthy streams",
          ("stream", "share of streams with an alarm (95% CI)", "alarms per million events",
           "earliest alarm (event)", "variance factor (median, precision)",
           "ADWIN recall or precision: share with an alarm"),
          rows, note=f"Default monitor: SequentialDrift on recall and on precision, alpha "
                     f"{ALPHA} each over {HORIZON:,} events (stated level: 1% per million "
                     f"events). Clopper-Pearson 95% intervals.")

    # ---- ADWIN alone on many healthy streams: its false-alarm share per delta
    level = 0.01 * n / HORIZON    # the default monitor's stated level for streams of n events
    ash = {}    # (cell, metric) -> {delta: streams with an alarm}, streams
    rows = []
    for cname, rs in ares.items():
        for m in rs[0]:
            by_d = {d: sum(r[m][d] is not None for r in rs) for d in ADWIN_DELTAS}
            ash[cname, m] = (by_d, len(rs))
            rows.append((cname, m, *(share_cell(by_d[d], len(rs)) for d in ADWIN_DELTAS)))
    if rows:
        table("adwin_shares", "ADWIN's false-alarm share per delta on independent healthy streams",
              ("stream", "metric", *(f"delta {d:g}" for d in ADWIN_DELTAS)), rows,
              note=f"ADWIN alone on {args.adwin_seeds} healthy streams of {n:,} events per "
                   "cell (the first of them the cell's own), each delta stopped at its first "
                   "alarm: the share of streams with an alarm, Clopper-Pearson 95% "
                   "intervals.")

    # ---- the matched budgets: the detector at ADWIN's (default delta) share, by the
    # detector's proven bound (a budget b bounds the share of streams of n events with a
    # false alarm by b n / HORIZON)
    rows = []
    chosen = {}
    for (cname, m), (ka_unused, cnt, by_b) in shares.items():
        if not cname.startswith("independent") or (cname, m) not in ash:
            continue
        by_d, na = ash[cname, m]
        ka = by_d[ADWIN_DELTA]
        allow = ka / na if ka else cp(0, na)[1]
        ok = [b for b in BUDGETS if b * n / HORIZON <= allow]
        chosen[cname, m] = max(ok, default=None)
        rows.append((cname, m, share_cell(ka, na), pct(allow),
                     "none" if chosen[cname, m] is None else f"{chosen[cname, m]:g}",
                     pct(chosen[cname, m] * n / HORIZON) if chosen[cname, m] else "-",
                     share_cell(by_b[chosen[cname, m]], cnt) if chosen[cname, m] else "-"))
    if rows:
        table("matched", "Budgets at ADWIN's false-alarm share",
              ("stream", "metric", f"ADWIN (delta {ADWIN_DELTA:g}): share with an alarm",
               "allowance", "matched budget", "its proven bound",
               "SequentialDrift at that budget"), rows,
              note="The largest budget whose proven bound on the false-alarm share of a "
                   f"stream of {n:,} events (budget x {n:,} / {HORIZON:,}) is within "
                   f"ADWIN's measured share at its default delta (on {args.adwin_seeds} "
                   "streams; with none, the upper end of ADWIN's 95% interval). The "
                   f"detector's measured share at that budget ({N} streams per cell) is "
                   "shown beside it.")

    # ---- the detector at the stated level by its measured share (the largest budget
    # whose share of the cell's healthy streams with a crossing is at most the level):
    # matched to ADWIN at the same level by the same rule (below)
    det_stated = {}
    for (cname, m), (ka_unused, cnt, by_b) in shares.items():
        if cname.startswith("independent"):
            det_stated[cname, m] = max((b for b in BUDGETS if by_b[b] / cnt <= level),
                                       default=None)

    # ---- ADWIN at the detector's level: the stated one, and the measured share
    rows = []
    adwin_chosen, adwin_stated = {}, {}
    for c in cells:
        if not c.name.startswith("independent"):
            continue
        rs = res[c.name]
        for m in c.metrics:
            if (c.name, m) not in ash:
                continue
            by_d, na = ash[c.name, m]
            k_det = sum(bool(r[m]["alarms"]) for r in rs)
            ok = [d for d in ADWIN_DELTAS if by_d[d] / na <= k_det / len(rs)]
            adwin_chosen[c.name, m] = dm = max(ok, default=None)
            ok = [d for d in ADWIN_DELTAS if by_d[d] / na <= level]
            adwin_stated[c.name, m] = ds = max(ok, default=None)
            bs = det_stated.get((c.name, m))
            cnt, by_b = shares[c.name, m][1:]
            rows.append((c.name, m, share_cell(k_det, len(rs)),
                         "none" if ds is None else f"{ds:g}",
                         share_cell(by_d[ds], na) if ds is not None else "-",
                         "none" if bs is None else f"{bs:g}",
                         share_cell(by_b[bs], cnt) if bs is not None else "-",
                         "none" if dm is None else f"{dm:g}",
                         share_cell(by_d[dm], na) if dm is not None else "-"))
    if rows:
        table("adwin_matched", "ADWIN deltas at the default detector's false-alarm level",
              ("stream", "metric", "SequentialDrift (alpha 0.005): share with an alarm",
               f"delta at the stated level ({pct(level)})", "ADWIN at that delta",
               "detector's budget at the stated level", "the detector at that budget",
               "delta at the detector's measured share", "ADWIN at that delta"), rows,
              note="The largest delta whose measured false-alarm share (its point "
                   f"estimate: ADWIN alone, {args.adwin_seeds} streams per cell) is at "
                   "most: the default "
                   f"monitor's stated level for streams of {n:,} events ({pct(level)}: 1% "
                   "per million events, at least the detector's true share, so this match "
                   "favours ADWIN); or the detector's measured share on the cell's "
                   f"{N} streams (a point estimate; 0 matches the smallest share). "
                   f"river's default delta is {ADWIN_DELTA:g}. The detector's budget at "
                   "the stated level is chosen by the same rule: the largest budget "
                   "whose measured share (its traced crossings on the cell's "
                   f"{N} streams, an upper bound of its own) is at most that level.")

    # ---- drops: delays
    rows = []
    for c in cells:
        if c.group != "drop":
            continue
        (m,) = c.metrics
        rs = res[c.name]
        b = chosen.get((c.matched, m))

        def delays(events):
            """Events from the change to each first alarm after it (None: missed)."""
            return [None if e is None else e - pre + 1 for e in events]

        def adwin_at(d):
            """Delays of ADWIN at delta ``d`` and its streams with an alarm before."""
            if d is None:
                return [None] * len(rs), 0
            return (delays([r[m]["adwin_grid"][d]["first"] for r in rs]),
                    sum(r[m]["adwin_grid"][d]["early"] for r in rs))

        d_def = delays([r[m]["first"][ALPHA] for r in rs])
        # the rule, run in a Monitor: the emitted alert (the evaluation that emitted it)
        d_emit = [None if r[m]["rule"] is None else r[m]["rule"]["evaluated_n"] - pre
                  for r in rs]
        d_adw = delays([next((i for i in r[m]["adwin"] if i >= pre), None) for r in rs])
        d_b = delays([r[m]["first"][b] if b is not None else None for r in rs])
        early_b = sum(bool(r[m]["early"][b]) for r in rs) if b is not None else 0
        dm = adwin_chosen.get((c.matched, m))
        ds = adwin_stated.get((c.matched, m))
        d_adm, early_adm = adwin_at(dm)
        d_ads, early_ads = adwin_at(ds)
        bs = det_stated.get((c.matched, m))
        d_bs = delays([r[m]["first"][bs] if bs is not None else None for r in rs])
        early_bs = sum(bool(r[m]["early"][bs]) for r in rs) if bs is not None else 0
        early_def = sum(bool(r[m]["early"][ALPHA]) for r in rs)
        early_adw = sum(any(i < pre for i in r[m]["adwin"]) for r in rs)
        med = {k: quantile(v, 0.5) for k, v in
               (("def", d_def), ("emit", d_emit), ("adw", d_adw),
                ("b", d_b), ("adm", d_adm), ("ads", d_ads), ("bs", d_bs))}
        found = sum(d is not None for d in d_def) / len(rs)
        rows.append((c.name, fmt_delay(med["def"]), fmt_delay(quantile(d_def, 0.9)),
                     pct(found), f"{early_def}/{len(rs)}", fmt_delay(med["emit"]),
                     fmt_delay(med["adw"]), f"{early_adw}/{len(rs)}",
                     "none" if b is None else f"{b:g}", fmt_delay(med["b"]),
                     f"{early_b}/{len(rs)}", f"{ratio(med['b'], med['adw']):.2f}",
                     "none" if ds is None else f"{ds:g}", fmt_delay(med["ads"]),
                     f"{early_ads}/{len(rs)}", f"{ratio(med['def'], med['ads']):.2f}",
                     "none" if dm is None else f"{dm:g}", fmt_delay(med["adm"]),
                     f"{early_adm}/{len(rs)}", f"{ratio(med['def'], med['adm']):.2f}",
                     "none" if bs is None else f"{bs:g}", fmt_delay(med["bs"]),
                     f"{early_bs}/{len(rs)}", f"{ratio(med['bs'], med['ads']):.2f}",
                     f"{ratio(med['def'], med['adw']):.2f}"))
        targets.append((f"{c.name}: found on every stream", found == 1.0, pct(found)))
        r = ratio(med["def"], med["ads"])
        targets.append(((f"{c.name}: median delay at alpha 0.005 <= 1.3 x ADWIN's at "
                         "the stated level (ADWIN's delta at 1% per million: favours "
                         "ADWIN)"), r <= 1.3, f"{r:.2f}"))
        r = ratio(med["def"], med["adm"])
        targets.append(((f"{c.name}: median delay at alpha 0.005 <= 1.3 x ADWIN's at "
                         "the detector's measured share"), r <= 1.3, f"{r:.2f}"))
        r = ratio(med["b"], med["adw"])
        targets.append(((f"{c.name}: median delay <= 1.3 x ADWIN's at a matched "
                         "false-alarm share (the detector's budget at ADWIN's share)"),
                        r <= 1.3, f"{r:.2f}"))
        r = ratio(med["bs"], med["ads"])
        targets.append(((f"{c.name}: median delay <= 1.3 x ADWIN's, both at the stated "
                         "level by their measured shares"), r <= 1.3, f"{r:.2f}"))
    if rows:
        table("drops", "Detection delay on planted drops",
              ("drop", "median delay (detector, alpha 0.005)", "p90", "found",
               "alarms before the change",
               "median delay (rule: its alert emitted)",
               f"ADWIN median (delta {ADWIN_DELTA:g})", "ADWIN alarms before",
               "matched budget", "median at matched budget", "its alarms before",
               "ratio to ADWIN (matched budget)",
               "ADWIN delta at the stated level", "ADWIN median there", "its alarms before",
               "ratio at alpha 0.005 to ADWIN at the stated level",
               "ADWIN delta at the measured share", "ADWIN median there",
               "its alarms before", "ratio at alpha 0.005 to ADWIN at the measured share",
               "detector's budget at the stated level (measured)", "its median",
               "its alarms before",
               "ratio to ADWIN, both at the stated level (measured)",
               f"ratio at alpha 0.005 to ADWIN at delta {ADWIN_DELTA:g}"),
              rows, note="Delay: events from the change to the first alarm after it "
                         "(nearest-rank median and 90th percentile, a miss counting as "
                         "infinite). The rule's delay is to the event at which the "
                         "Monitor emitted its alert (it evaluates at each detection). A "
                         "budget whose traced detector crossed before the change counts "
                         "as a miss there (it alarmed falsely; the trace is its path "
                         "only up to that). Ratios are of medians: detector / ADWIN.")

    # ---- recovery
    rows = []
    for c in cells:
        if c.group != "recovery":
            continue
        rs = res[c.name]
        back = pre + RISE
        rise = sum(any(i >= pre and d == "rise" for i, d in
                       zip(r["recall"]["alarms"], r["recall"]["directions"])) for r in rs)
        drop_after = sum(any(i >= back and d == "drop" for i, d in
                             zip(r["recall"]["alarms"], r["recall"]["directions"]))
                         for r in rs)
        rows.append((c.name, share_cell(rise, len(rs)), share_cell(drop_after, len(rs))))
    if rows:
        table("recovery", "Recovery after an improvement",
              ("stream", "rise detected", "drop detected after the return"), rows,
              note="The return to the level held before the rise is a real change of "
                   "the rate: the detector reports it as a drop.")

    if targets:
        table("targets", "Targets", ("target", "met", "measured"),
              [(t, "yes" if ok else "no", v) for t, ok, v in targets])
    print(f"Total wall time: {time.perf_counter() - t0:,.0f} s")
    R.current().write(args.json)
    return 0


if __name__ == "__main__" and sys.argv[1:2] not in (["traffic"], ["score"]):
    sys.exit(main())


# =====================================================================================
# Traffic, recoveries and segments: the default monitor's paging rules on healthy
# streams whose traffic moves, after an improvement, and over many segments.
#
#     python benchmarks/bench_alerts.py traffic --quick     # smoke run, a few minutes
#     python benchmarks/bench_alerts.py traffic             # 100 seeds x 1M events per cell
#
# Results: benchmarks/results/bench_alerts_traffic.json (the alerts guide's calibration
# section shows its tables).
#
# Cells (every stream from its own seed; shares with Wilson 95% intervals):
# * prevalence cycle: positives 30% +- 10% over a "day" of DAY events, the model
#   unchanged (the same score distribution per class: recall 0.89, FPR fixed);
#   the earlier default (recall and precision alarms against the level before the last
#   change) against the default (recall and FPR alarms page, precision reports): the
#   share of streams with a paging alert and with a traffic report; and the same
#   streams with recall dropping 0.89 -> 0.80 half-way (found, median delay).
# * volume cycle: events per second following a daily cycle (x1 to x5), evaluated every
#   VOLUME_EVERY_SECONDS of event time; otherwise stationary.
# * recovery after an improvement: recall 0.89, then 0.94 for IMPROVED events (a fifth
#   of a shorter stream) from a fifth of the stream on, then 0.89 again; the share of streams where the recall alarm fires after the return
#   (and, with a further drop to 0.84 after it, how soon that is found).
# * segments: K = 100, 1 000 and 10 000 segments of equal traffic, healthy (the share
#   of streams with any paging alert within --events events of the whole stream), and
#   one segment whose recall drops 0.89 -> 0.50 after 1 000 to 1 999 of its events (the
#   drop anywhere between two of its rows): the delay of its detection in its own
#   events and in the stream's at its share of the traffic, and of the alert's
#   emission (its next row: every 1 000 of its events, or with the service's period of
#   a minute at 1 000 stream events/s). A check first runs the segment among 10 of a
#   group_by monitor and compares.
# =====================================================================================
T_RECALL = 0.89
T_RATE = 0.30
DAY = 100_000
IMPROVED = 200_000
VOLUME_EVERY_SECONDS = 600.0
SEGMENT_COUNTS = (100, 1000, 10_000)
#: the dropped segment's own events before its drop (plus a phase of 0 to EVERY - 1)
#: and after it
SEG_BEFORE, SEG_AFTER = 1000, 2000
#: the service's period under group_by (streameval.service.SEGMENT_EVERY_SECONDS) and
#: the whole stream's event rate the segments' emission delays in seconds assume
SEGMENT_SECONDS = 60.0
STREAM_RATE = 1000.0
#: segments of the group_by monitor that checks the one-segment runs
CHECK_SEGMENTS = 10
SEG_DROP_TO = 0.50
PAGING = ("recall alarm", "fpr alarm on rise")


def t_wilson(k, n, z=1.959963984540054):
    if n == 0:
        return math.nan, math.nan
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(c - h, 0.0), min(c + h, 1.0)


def t_share(k, n):
    lo, hi = t_wilson(k, n)
    return f"{k}/{n} = {pct(k / n)} [{pct(lo)}, {pct(hi)}]"


def t_model(rate=T_RATE, recall=T_RECALL):
    """Logit means (mu_0, mu_1) of the healthy model: recall 0.89, precision 0.60 at 30%."""
    return means(rate, recall=recall)


def t_stream(n, seed, rate=None, mu1=None, nseg=0):
    """Labels, scores and segments: ``rate`` and ``mu1`` arrays (or None: healthy)."""
    rng = np.random.default_rng(seed)
    mu0, h1 = t_model()
    rate = np.full(n, T_RATE) if rate is None else rate
    mu1 = np.full(n, h1) if mu1 is None else mu1
    y = rng.random(n) < rate
    logit = np.where(y, mu1, mu0) + rng.standard_normal(n)
    seg = rng.integers(0, nseg, n) if nseg else None
    return y, 1.0 / (1.0 + np.exp(-logit)), seg


def t_monitor(old=False, group_by=None, every_seconds=None, every=None, segments=None):
    """The default monitor's detectors and rules on one cheap metric (its counts feed
    the traffic explanation); ``old``: recall and precision alarms against the level
    before the last change (the earlier default)."""
    import streameval as se
    from streameval import config
    from streameval.alerts import Alarm
    from streameval.monitor import Monitor

    drift = config.default_drift()
    if old:
        drift.pop("fpr")
        rules = [Alarm("recall", baseline="previous"), Alarm("precision", baseline="previous")]
    else:
        rules = config.default_rules()
    kw = {"every": 0, "every_seconds": every_seconds} if every_seconds else {}
    if every is not None:
        kw["every"] = every
    if segments is not None and segments > 1000:
        kw["max_segments"] = segments   # (the default cap is 1 000 segments)
    return Monitor({"precision": se.Precision()}, drift=drift, rules=rules,
                   group_by=group_by, overall_rules=False if group_by else True, **kw)


def t_run(mon, y, s, seg=None, t=None, chunk=100_000):
    out = []
    mon.on_alert.append(out.append)
    for i in range(0, len(y), chunk):
        kw = {}
        if seg is not None:
            kw["segment"] = seg[i:i + chunk]
        if t is not None:
            kw["t"] = t[i:i + chunk]
        mon.update_many(y[i:i + chunk], s[i:i + chunk], **kw)
    return [a for a in out if a["state"] == "firing"]


def t_first(alerts, rules, after=0):
    ns = [a["n"] for a in alerts if a["rule"] in rules and a["n"] > after]
    return min(ns) if ns else None


def t_prevalence_task(n, seed):
    from scipy.stats import norm

    i = np.arange(n)
    rate = T_RATE + 0.10 * np.sin(2 * np.pi * i / DAY)
    y, s, _ = t_stream(n, seed, rate=rate)
    out = {}
    for key, old in (("old", True), ("new", False)):
        al = t_run(t_monitor(old=old), y, s)
        paging = ("recall alarm from previous", "precision alarm from previous") if old \
            else PAGING
        out[key] = {"paged": any(a["rule"] in paging for a in al),
                    "reports": sum(a["rule"] == "precision alarm" for a in al),
                    "traffic": sum(a.get("cause") == "traffic" for a in al
                                   if a["rule"] == "precision alarm")}
    mu1 = np.full(n, t_model()[1])
    mu1[n // 2:] = norm.ppf(0.80)
    y, s, _ = t_stream(n, seed, rate=rate, mu1=mu1)
    al = t_run(t_monitor(), y, s)
    first = t_first(al, ("recall alarm",), after=n // 2)
    out["drop"] = {"delay": None if first is None else first - n // 2,
                   "early": any(a["rule"] in PAGING and a["n"] <= n // 2 for a in al)}
    return out


def t_volume_task(n, seed):
    y, s, _ = t_stream(n, seed)
    rng = np.random.default_rng(seed + 7)
    # events per second 1 + 4 (1 + sin) / 2 over a day of 86 400 s: gaps of 1 / rate
    day = 86_400.0
    t = np.empty(n)
    now = 0.0
    gaps = rng.exponential(1.0, n)
    for i in range(n):  # (a thinning-free inhomogeneous Poisson process, step by step)
        lam = 0.2 * (1.0 + 2.0 * (1.0 + math.sin(2 * math.pi * now / day)))
        now += gaps[i] / lam
        t[i] = now
    al = t_run(t_monitor(every_seconds=VOLUME_EVERY_SECONDS), y, s, t=t)
    return {"paged": any(a["rule"] in PAGING for a in al)}


def t_recovery_task(n, seed):
    from scipy.stats import norm

    pre = n // 5
    back = pre + min(IMPROVED, n // 5)
    mu1 = np.full(n, t_model()[1])
    mu1[pre:back] = norm.ppf(T_RECALL + 0.05)
    y, s, _ = t_stream(n, seed, mu1=mu1)
    out = {}
    for key, old in (("old", True), ("new", False)):
        al = t_run(t_monitor(old=old), y, s)
        rule = "recall alarm from previous" if old else "recall alarm"
        out[key] = {"paged_after_return": any(a["rule"] == rule and a["n"] > back for a in al),
                    "paged": any(a["rule"] == rule for a in al)}
    # a real drop after the return: 0.89 -> 0.84 from the middle of the rest
    drop = back + (n - back) // 2
    mu1[drop:] = norm.ppf(T_RECALL - 0.05)
    y, s, _ = t_stream(n, seed, mu1=mu1)
    al = t_run(t_monitor(), y, s)
    first = t_first(al, ("recall alarm",), after=drop)
    out["drop"] = {"delay": None if first is None else first - drop,
                   "early": any(a["rule"] == "recall alarm" and a["n"] <= drop for a in al)}
    return out


def t_segments_task(n, seed, k):
    y, s, seg = t_stream(n, seed, nseg=k)
    al = t_run(t_monitor(group_by="seg", segments=k), y, s, seg=seg.astype(str))
    return {"healthy": any(a["rule"] in PAGING for a in al)}


def t_segment_events(seed, before):
    """One segment's own events: ``before`` healthy, then recall SEG_DROP_TO for
    SEG_AFTER more, and EVERY more after them (so that a detection within SEG_AFTER
    reaches the row that emits it)."""
    from scipy.stats import norm

    m = before + SEG_AFTER + EVERY
    mu1 = np.full(m, t_model()[1])
    mu1[before:] = norm.ppf(SEG_DROP_TO)
    y, s, _ = t_stream(m, seed, mu1=mu1)
    return y, s


def t_segment_before(seed):
    """The dropped segment's healthy events: SEG_BEFORE plus a phase drawn from the seed
    (0 to EVERY - 1), so that the drop falls anywhere between two of its rows."""
    return SEG_BEFORE + int(np.random.default_rng(seed + 3).integers(0, EVERY))


def t_segment_drop_task(seed, k):
    """One segment of ``k`` with equal traffic, its own events only: healthy for
    :func:`t_segment_before` events, then recall SEG_DROP_TO. It runs as the one
    segment of a ``group_by`` monitor: a segment's detectors, rows and rules see its
    events only, and it writes a row every EVERY of its own events
    (:func:`t_segment_check` runs it among other segments against this). The alert's
    ``detected_segment_n`` is the detection (its delay), ``evaluated_n`` the row that
    emitted it (what a replay waits for). With ``every_seconds`` = SEGMENT_SECONDS
    (what the service sets under ``group_by``) and the whole stream at STREAM_RATE
    events per second, the segment's events come every ``k / STREAM_RATE`` seconds,
    and a row is also written at each new period, which the other segments' events
    open at its start: here a second segment's events just before and just after each
    period's start stand for them (its alerts are not counted). The emission's lag in
    seconds is from the detected event's time to the emitting row's ``evaluated_t``."""
    before = t_segment_before(seed)
    y, s = t_segment_events(seed, before)
    t = np.arange(1, len(y) + 1) * (k / STREAM_RATE)
    seg = np.zeros(len(y), dtype=np.int64).astype(str)
    # the other segments' clock: events 1 ms either side of each period's start
    starts = np.arange(1, int(t[-1] // SEGMENT_SECONDS) + 2) * SEGMENT_SECONDS
    tc = np.sort(np.concatenate([starts - 1e-3, starts + 1e-3]))
    yc, sc, _ = t_stream(len(tc), seed + 13)
    order = np.argsort(np.concatenate([t, tc]), kind="stable")
    runs = {"count": (None, y, s, seg, t),
            "seconds": (SEGMENT_SECONDS, np.concatenate([y, yc])[order],
                        np.concatenate([s, sc])[order],
                        np.concatenate([seg, np.full(len(tc), "clock")])[order],
                        np.concatenate([t, tc])[order])}
    out = {"before": before}
    for key, (secs, yy, ss, gg, tt) in runs.items():
        mon = t_monitor(group_by="seg", every_seconds=secs, every=EVERY)
        al = t_run(mon, yy, ss, seg=gg, t=tt, chunk=100)
        mine = [a for a in al if a["segment"] == "0"]
        hit = [a for a in mine if a["rule"] == "recall alarm"
               and before < a["detected_segment_n"] <= before + SEG_AFTER]
        a0 = hit[0] if hit else None
        d = a0["detected_segment_n"] - before if a0 else None
        out[key] = {
            "delay": d,
            "emitted": a0["evaluated_n"] - before if a0 and secs is None else None,
            "lag_seconds": a0["evaluated_t"] - t[before + d - 1] if a0 else None,
            "early": any(a["rule"] in PAGING and a["detected_segment_n"] <= before
                         for a in mine if a.get("detected_segment_n") is not None)}
    return out


def t_segment_check(seed, k=CHECK_SEGMENTS):
    """The simulation of :func:`t_segment_drop_task` (by count) against a real
    ``group_by`` monitor: ``k`` segments of equal traffic (events assigned at random),
    segment "0" given the same own events as the simulation; its recall alarm's
    detection and the row that emits it, in its own events, must be the simulation's."""
    before = t_segment_before(seed)
    y0, s0 = t_segment_events(seed, before)
    m = len(y0)
    rng = np.random.default_rng(seed + 11)
    seg = rng.integers(0, k, m * k)
    while np.count_nonzero(seg == 0) < m:   # (segment 0 gets all its own events)
        seg = np.concatenate([seg, rng.integers(0, k, m)])
    mine = np.flatnonzero(seg == 0)[:m]
    seg = seg[:mine[-1] + 1]
    yo, so, _ = t_stream(len(seg), seed + 12)
    yo[mine], so[mine] = y0, s0
    # the stream's events of segment 0: its own count at each stream event
    own = np.cumsum(seg == 0)
    mon = t_monitor(group_by="seg")
    al = t_run(mon, yo, so, seg=seg.astype(str), chunk=1000)
    hit = [a for a in al if a["rule"] == "recall alarm" and a["segment"] == "0"
           and before < a["detected_segment_n"] <= before + SEG_AFTER]
    sim = t_segment_drop_task(seed, k)["count"]
    if not hit or sim["delay"] is None:
        return not hit and sim["delay"] is None
    a = hit[0]
    return (a["detected_segment_n"] - before == sim["delay"]
            and int(own[a["evaluated_n"] - 1]) - before == sim["emitted"])


_T_TITLE = [""]
_T_KEYS = iter(range(1_000))


def heading(text):
    """Print a section heading; the tables after it carry its title."""
    print(text)
    _T_TITLE[0] = text.strip("#\n ")


def t_table(head, rows):
    """Record a table of the traffic run (keys t0, t1, ...) and return it as Markdown."""
    t = R.table(f"t{next(_T_KEYS)}", _T_TITLE[0], list(head))
    for r in rows:
        t.add(*r)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def traffic_main(argv=None):
    ap = argparse.ArgumentParser(description="bench_alerts traffic: prevalence and volume "
                                 "cycles, recoveries, segments")
    ap.add_argument("--streams", type=int, default=100, help="seeds per cell")
    ap.add_argument("--events", type=int, default=1_000_000, help="events per stream")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--quick", action="store_true", help="4 seeds x 200 000 events")
    R.add_json_argument(ap, __file__.replace("bench_alerts.py", "bench_alerts_traffic.py"))
    args = ap.parse_args(argv)
    if args.quick:
        args.streams, args.events = 4, 200_000
    run = R.start(__file__.replace("bench_alerts.py", "bench_alerts_traffic.py"), args)
    # (the results file is named for the section; the command is this script's)
    run.command = run.command.replace("bench_alerts_traffic.py", "bench_alerts.py", 1)
    n, m = args.events, args.streams
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as ex:
        prev = [ex.submit(t_prevalence_task, n, 50_000_000 + i) for i in range(m)]
        vol = [ex.submit(t_volume_task, n, 51_000_000 + i) for i in range(m)]
        rec = [ex.submit(t_recovery_task, n, 52_000_000 + i) for i in range(m)]
        seg = {k: [ex.submit(t_segments_task, n, 53_000_000 + 100_000 * j + i, k)
                   for i in range(m)] for j, k in enumerate(SEGMENT_COUNTS)}
        sdrop = {k: [ex.submit(t_segment_drop_task, 54_000_000 + 100_000 * j + i, k)
                     for i in range(m)] for j, k in enumerate(SEGMENT_COUNTS)}
        seg_check = all(ex.map(t_segment_check, range(55_000_000, 55_000_000 + 10)))
        prev = [f.result() for f in prev]
        vol = [f.result() for f in vol]
        rec = [f.result() for f in rec]
        seg = {k: [f.result() for f in v] for k, v in seg.items()}
        sdrop = {k: [f.result() for f in v] for k, v in sdrop.items()}
    R.param(segment_check=f"a segment among {CHECK_SEGMENTS} of a group_by monitor, 10 "
                          f"seeds: {'same' if seg_check else 'NOT the same'} detection "
                          "and emitting row as alone")

    heading("## Traffic changes: what pages\n")
    rows = []
    for key, label in (("old", "recall and precision alarms, reference: the level before "
                        "the last change"),
                       ("new", "default: recall and FPR alarms page, precision reports")):
        k = sum(r[key]["paged"] for r in prev)
        rep = sum(r[key]["reports"] > 0 for r in prev)
        rows.append(("prevalence cycle 20-40%", label, t_share(k, m),
                     t_share(rep, m) if key == "new" else "-"))
    k = sum(r["paged"] for r in vol)
    rows.append(("volume cycle x1-x5", "default", t_share(k, m), "-"))
    print(t_table(("stream", "rules", "streams with a paging alert",
                 "streams with a traffic report"), rows))
    d = [r["drop"]["delay"] for r in prev]
    found = sum(x is not None for x in d)
    print()
    print(t_table(("stream", "found", "median delay (events)", "p90 delay",
                 "paged before the drop"),
                [("prevalence cycle, recall 0.89 -> 0.80 half-way", t_share(found, m),
                  fmt_delay(quantile(d, 0.5)), fmt_delay(quantile(d, 0.9)),
                  t_share(sum(r["drop"]["early"] for r in prev), m))]))

    heading("## Recovery after an improvement\n")
    rows = []
    for key, label in (("old", "reference: the level before the last change"),
                       ("new", "default reference: the first stretch's level")):
        rows.append((label, t_share(sum(r[key]["paged_after_return"] for r in rec), m),
                     t_share(sum(r[key]["paged"] for r in rec), m)))
    print(t_table(("recall alarm", "paged after the return to 0.89", "paged at all"), rows))
    d = [r["drop"]["delay"] for r in rec]
    print()
    print(t_table(("stream", "found", "median delay (events)", "p90 delay",
                 "paged before the drop"),
                [("after the return, recall 0.89 -> 0.84",
                  t_share(sum(x is not None for x in d), m), fmt_delay(quantile(d, 0.5)),
                  fmt_delay(quantile(d, 0.9)),
                  t_share(sum(r["drop"]["early"] for r in rec), m))]))

    heading("## Segments: one guarantee for the whole monitor\n")
    print(f"Check: a segment among {CHECK_SEGMENTS} of a group_by monitor detects and emits "
          f"its drop at the same own events as alone: {'yes' if seg_check else 'NO'}\n")
    rows = []
    for k in SEGMENT_COUNTS:
        cnt = [r["count"] for r in sdrop[k]]
        d = [r["delay"] for r in cnt]
        med = quantile(d, 0.5)
        # the evaluation lag: from the detection to the row that emits its alert
        em = quantile([r["emitted"] - r["delay"] for r in cnt if r["delay"] is not None],
                      0.5)
        secs = quantile([r["seconds"]["lag_seconds"] for r in sdrop[k]
                         if r["seconds"]["delay"] is not None], 0.5)
        rows.append((k, t_share(sum(r["healthy"] for r in seg[k]), m),
                     t_share(sum(x is not None for x in d), m), fmt_delay(med),
                     fmt_delay(quantile(d, 0.9)),
                     fmt_delay(med * k) if med == med else "-",
                     fmt_delay(em) if em == em else "-",
                     f"{secs:,.0f} s" if secs == secs else "-",
                     t_share(sum(r["count"]["early"] or r["seconds"]["early"]
                                 for r in sdrop[k]), m)))
    print(t_table(("segments", f"healthy: streams with a paging alert in {n:,} events",
                 f"one segment's recall 0.89 -> {SEG_DROP_TO:.2f}: found within "
                 f"{SEG_AFTER:,} of its events",
                 "median detection delay (its own events)", "p90 (its own events)",
                 "median detection delay (stream events, at its share)",
                 f"median lag from detection to the alert, a row every {EVERY:,} of its "
                 f"events (its own events)",
                 f"the same with every_seconds = {SEGMENT_SECONDS:g} at "
                 f"{STREAM_RATE:,.0f} stream events/s",
                 "paged before the drop"),
                rows))
    print(f"\nTotal wall time: {time.perf_counter() - t0:,.0f} s")
    run.write(args.json)
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["traffic"]:
    sys.exit(traffic_main(sys.argv[2:]))


# =====================================================================================
# Score drift: the default label-free monitor's `score drift` alarms (the sequential
# detector of the score distribution, streameval.config.default_label_free_drift) on
# stationary score streams and on planted score shifts, beside the KS threshold rule
# `score_drift@10000 > 0.1 for 3 evaluations` (a window of 10 000 predictions against
# the first 1 000, evaluated every 1 000: no stream-wide guarantee).
#
#     python benchmarks/bench_alerts.py score --quick   # smoke run, a minute
#     python benchmarks/bench_alerts.py score           # 200 seeds x 1M predictions
#
# Results: benchmarks/results/bench_alerts_score.json (the estimation guide shows its
# tables).
#
# Streams: binormal logits (recall 0.85, precision 0.60 at the rate's positives, as
# above), score = sigmoid(logit), continuous floats; "rounded" keeps 2 decimals (ties).
# Stationary cells: the share of streams with any alarm within --events predictions
# (Wilson 95% interval) and the bound alpha * events / horizon. A daily prevalence
# cycle (30% +- 10% positives over DAY predictions) moves the score distribution
# itself: its row says how often the detector reports that traffic change. Planted
# shifts after S_PRE healthy predictions, fed S_AFTER more: the share found, the
# median and 90th percentile delay of the detector (predictions from the shift to the
# check that alarmed) and of the rule (the Monitor evaluates every 1 000 predictions:
# the first evaluation at or after the detection), alarms before the shift.
# =====================================================================================
S_PRE = 20_000
S_AFTER = 100_000
S_KS_SIZE, S_KS_BASELINE, S_KS_VALUE, S_KS_FOR = 10_000, 1000, 0.1, 3
#: stationary streams: (label, positives, decimals or None)
S_STATIONARY = (("30% positives", 0.30, None), ("1% positives", 0.01, None),
                ("30% positives, rounded to 2 decimals", 0.30, 2))
#: planted shifts at 30% positives: (label, logit scale, logit shift of all, of
#: positives only, positives after)
S_SHIFTS = (("bad deploy: logits x 0.5", 0.5, 0.0, 0.0, None),
            ("all logits -0.5", 1.0, -0.5, 0.0, None),
            ("all logits -0.2", 1.0, -0.2, 0.0, None),
            ("all logits +0.2", 1.0, 0.2, 0.0, None),
            ("positives' logits -1 (recall 0.85 -> 0.61)", 1.0, 0.0, -1.0, None),
            ("prevalence 30% -> 40%", 1.0, 0.0, 0.0, 0.40))


def s_stream(seed, n, rate, scale=1.0, shift=0.0, pos_shift=0.0, after=None,
             rate_after=None, decimals=None):
    """Scores of one stream; the change (``scale``, ``shift``, ``pos_shift``,
    ``rate_after``) applies from prediction ``after`` on (None: a rate array's cycle or
    no change)."""
    rng = np.random.default_rng(seed)
    mu0, mu1 = means(rate if np.isscalar(rate) else 0.30)  # (a cycle: the model at 30%)
    r = np.full(n, rate) if np.isscalar(rate) else rate
    if rate_after is not None:
        r = r.copy()
        r[after:] = rate_after
    y = rng.random(n) < r
    logit = np.where(y, mu1, mu0) + rng.standard_normal(n)
    if after is not None:
        tail = logit[after:]
        tail *= scale
        tail += shift + pos_shift * y[after:]
    s = 1.0 / (1.0 + np.exp(-logit))
    return s if decimals is None else np.round(s, decimals)


def s_detector():
    from streameval import config

    (det,) = config.default_label_free_drift().values()
    return det


def s_first_alarm(det, after=0):
    """The event (1-based count) of the detector's first alarm after ``after``."""
    for c in det.changes:
        if c["n"] > after:
            return c["n"]
    return None


def s_ks_rule(s, after=0):
    """The KS threshold rule on the same predictions: the evaluation (count) at which
    ``score_drift@10000 > 0.1`` has held for 3 evaluations, the first after ``after``;
    and whether it fired at or before ``after``."""
    from streameval import config

    m = config.make_metric({"metric": "score_drift", "baseline": S_KS_BASELINE,
                            "size": S_KS_SIZE}, name="score_drift@10000")
    streak, early = 0, False
    for i in range(0, len(s), EVERY):
        m.update_many(None, s[i:i + EVERY])
        v = m.get()
        streak = streak + 1 if v == v and v > S_KS_VALUE else 0
        if streak >= S_KS_FOR:
            n = i + EVERY
            if n > after:
                return n, early
            early = True
            streak = -10**9  # (fired: counted once, as an alert that stays firing)
    return None, early


def s_stationary_task(seed, n, rate, decimals, ks_rule=True):
    s = s_stream(seed, n, rate, decimals=decimals)
    det = s_detector().update_many(None, s)
    ks_n = s_ks_rule(s)[0] if ks_rule else None
    return {"alarmed": bool(det.changes), "alarms": len(det.changes),
            "ks_fired": ks_n is not None}


def s_cycle_task(seed, n):
    day = 100_000
    rate = 0.30 + 0.10 * np.sin(2 * np.pi * np.arange(n) / day)
    s = s_stream(seed, n, rate)
    det = s_detector().update_many(None, s)
    return {"alarmed": bool(det.changes), "alarms": len(det.changes),
            "ks_fired": s_ks_rule(s)[0] is not None}


def s_shift_task(seed, scale, shift, pos_shift, rate_after):
    n = S_PRE + S_AFTER
    s = s_stream(seed, n, 0.30, scale, shift, pos_shift, S_PRE, rate_after)
    det = s_detector().update_many(None, s)
    first = s_first_alarm(det, S_PRE)
    early = any(c["n"] <= S_PRE for c in det.changes)
    ks_n, ks_early = s_ks_rule(s, S_PRE)
    return {"delay": None if first is None else first - S_PRE,
            "rule_delay": None if first is None else -(-first // EVERY) * EVERY - S_PRE,
            "early": early, "ks_delay": None if ks_n is None else ks_n - S_PRE,
            "ks_early": ks_early}


def score_main(argv=None):
    ap = argparse.ArgumentParser(description="bench_alerts score: the score drift alarms' "
                                 "false alarms and delays")
    ap.add_argument("--streams", type=int, default=200, help="seeds per cell")
    ap.add_argument("--events", type=int, default=1_000_000,
                    help="predictions per stationary stream")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--quick", action="store_true", help="8 seeds x 100 000 predictions")
    R.add_json_argument(ap, __file__.replace("bench_alerts.py", "bench_alerts_score.py"))
    args = ap.parse_args(argv)
    if args.quick:
        args.streams, args.events = 8, 100_000
    run = R.start(__file__.replace("bench_alerts.py", "bench_alerts_score.py"), args)
    # (the results file is named for the section; the command is this script's)
    run.command = run.command.replace("bench_alerts_score.py", "bench_alerts.py", 1)
    det = s_detector()
    R.param(alpha=det.alpha, horizon=det.horizon, reference=det.reference,
            window=det.window, every=det.every, pre=S_PRE, after=S_AFTER)
    n, m = args.events, args.streams
    bound = det.alpha * n / det.horizon
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as ex:
        stat = {lab: [ex.submit(s_stationary_task, 60_000_000 + 100_000 * j + i, n, rate,
                                dec) for i in range(m)]
                for j, (lab, rate, dec) in enumerate(S_STATIONARY)}
        cyc = [ex.submit(s_cycle_task, 61_000_000 + i, n) for i in range(m)]
        shifts = {lab: [ex.submit(s_shift_task, 62_000_000 + 100_000 * j + i, *spec)
                        for i in range(m)]
                  for j, (lab, *spec) in enumerate(S_SHIFTS)}
        stat = {k: [f.result() for f in v] for k, v in stat.items()}
        cyc = [f.result() for f in cyc]
        shifts = {k: [f.result() for f in v] for k, v in shifts.items()}

    print("# Score drift: false alarms and delays\n")
    print(f"Detector: alpha {det.alpha} over {det.horizon:,} predictions, reference and "
          f"window {det.window:,}, a check every {det.every:,}; {m} streams per cell; "
          f"{args.jobs} worker processes.\n")
    rows = [(lab, t_share(sum(r["alarmed"] for r in res), m), f"{pct(bound)}",
             t_share(sum(r["ks_fired"] for r in res), m)) for lab, res in stat.items()]
    rows.append(("prevalence cycle 20-40% (the scores move)",
                 t_share(sum(r["alarmed"] for r in cyc), m), "-",
                 t_share(sum(r["ks_fired"] for r in cyc), m)))
    table("score_stationary", f"Stationary streams of {n:,} predictions",
          ("stream", "streams with a score drift alarm", "bound",
           "streams where the KS > 0.1 rule fired"), rows,
          note="Wilson 95% intervals. The bound holds for independent scores from one "
               "distribution; a prevalence cycle changes the distribution.")
    rows = []
    for lab, res in shifts.items():
        d = [r["delay"] for r in res]
        rd = [r["rule_delay"] for r in res]
        kd = [r["ks_delay"] for r in res]
        rows.append((lab, t_share(sum(x is not None for x in d), m),
                     fmt_delay(quantile(d, 0.5)), fmt_delay(quantile(d, 0.9)),
                     fmt_delay(quantile(rd, 0.5)),
                     t_share(sum(r["early"] for r in res), m),
                     t_share(sum(x is not None for x in kd), m), fmt_delay(quantile(kd, 0.5))))
    table("score_shifts", f"Planted score shifts after {S_PRE:,} predictions (30% positives)",
          ("shift", "found", "median delay", "p90 delay", "median delay of the rule",
           "alarmed before the shift", "KS > 0.1 rule: found", "its median delay"), rows,
          note=f"Delays in predictions from the shift; {S_AFTER:,} predictions after it. "
               "The rule fires at the Monitor's first evaluation (every 1 000) at or after "
               "the detection.")
    deploy = shifts[S_SHIFTS[0][0]]
    R.figure("score_deploy_delay", "score drift alarm: median delay on a bad deploy",
             quantile([r["rule_delay"] for r in deploy], 0.5), "predictions",
             peer="KS > 0.1 rule", peer_value=quantile([r["ks_delay"] for r in deploy], 0.5),
             better="lower")
    print(f"Total wall time: {time.perf_counter() - t0:,.0f} s")
    run.write(args.json)
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["score"]:
    sys.exit(score_main(sys.argv[2:]))
