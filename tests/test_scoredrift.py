"""Score drift (streameval.metrics.scoredrift) against scipy and direct computations.

Oracles: ``scipy.stats.ks_2samp`` (unweighted; integer weights as repeated scores) for
KS, in the cells over the reference and cumulative or windowed; a direct computation
of PSI and JS from the raw scores binned at the stated edges; and, for the detector,
its stated bound checked on stationary streams (false alarms) and planted shifts
(delays).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.stats import ks_2samp

import streameval as se
from streameval import config
from streameval.metrics.base import check_invariants
from streameval.metrics.scoredrift import (
    PSI_SMOOTHING,
    ScoreDrift,
    ScoreDriftDetector,
    ks_2samp_weighted,
    ks_threshold,
    quantile_edges,
)

values = st.one_of(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.0]), st.floats(-5, 5))


@pytest.mark.filterwarnings("ignore:ks_2samp")  # (scipy's p-value, not its statistic)
@settings(max_examples=200, deadline=None)
@given(st.lists(values, min_size=1, max_size=40), st.lists(values, min_size=1, max_size=40),
       st.lists(st.integers(1, 3), min_size=40, max_size=40))
def test_ks_equals_scipy(ref, cur, reps):
    want = ks_2samp(ref, cur).statistic
    m = ScoreDrift(reference=ref).update_many(None, cur)
    assert m.get() == pytest.approx(want, abs=1e-12)
    one = ScoreDrift(reference=ref)
    for v in cur:
        one.update(None, v)
    assert one.get() == pytest.approx(want, abs=1e-12)
    assert ks_2samp_weighted(ref, cur) == pytest.approx(want, abs=1e-12)
    # integer weights are repeated scores
    w = [float(r) for r in reps[:len(cur)]]
    weighted = ScoreDrift(reference=ref).update_many(None, cur, w)
    assert weighted.get() == pytest.approx(ks_2samp(ref, np.repeat(cur, reps[:len(cur)])).statistic,
                                           abs=1e-12)
    check_invariants(weighted)


def direct_psi_js(ref, cur, bins):
    ref, cur = np.asarray(ref, float), np.asarray(cur, float)
    keys, inv = np.unique(ref, return_inverse=True)
    edges = quantile_edges(keys, np.bincount(inv).astype(float), bins)
    r = np.bincount(np.searchsorted(edges, ref, side="right"), minlength=len(edges) + 1)
    c = np.bincount(np.searchsorted(edges, cur, side="right"), minlength=len(edges) + 1)
    k = len(r)
    rs = (r + PSI_SMOOTHING) / (r.sum() + PSI_SMOOTHING * k)
    cs = (c + PSI_SMOOTHING) / (c.sum() + PSI_SMOOTHING * k)
    psi = float(np.sum((cs - rs) * np.log(cs / rs)))
    p, q = c / c.sum(), r / r.sum()
    mid = (p + q) / 2
    js = 0.0
    for a in (p, q):
        nz = a > 0
        js += 0.5 * float(np.sum(a[nz] * np.log(a[nz] / mid[nz])))
    return psi, js, edges


@settings(max_examples=150, deadline=None)
@given(st.lists(values, min_size=2, max_size=60), st.lists(values, min_size=1, max_size=60),
       st.sampled_from([2, 4, 10]))
def test_psi_and_js_equal_a_direct_computation(ref, cur, bins):
    psi, js, edges = direct_psi_js(ref, cur, bins)
    rep = ScoreDrift(reference=ref, bins=bins).update_many(None, cur).report()
    assert rep["psi"] == pytest.approx(psi, abs=1e-12)
    assert rep["js"] == pytest.approx(js, abs=1e-12)
    assert 0.0 <= rep["js"] <= math.log(2) + 1e-12
    assert ScoreDrift(reference=ref, bins=bins, statistic="psi").update_many(None, cur).get() \
        == pytest.approx(psi, abs=1e-12)


def test_quantile_edges_cut_the_reference_in_equal_shares():
    ref = np.arange(1000) / 1000
    keys, inv = np.unique(ref, return_inverse=True)
    edges = quantile_edges(keys, np.ones(1000), 10)
    counts = np.bincount(np.searchsorted(edges, ref, side="right"))
    assert counts.tolist() == [100] * 10


def test_learned_reference_windows_and_states():
    rng = np.random.default_rng(0)
    s = rng.random(600)
    m = ScoreDrift(baseline=200)
    m.update_many(None, s[:150])
    assert math.isnan(m.get()) and not m.ready
    copy = se.from_state(json.loads(json.dumps(m.to_state())))
    m.update_many(None, s[150:])
    copy.update_many(None, s[150:])
    assert m.ready and m.get() == pytest.approx(ks_2samp(s[:200], s).statistic, abs=1e-12)
    assert copy.get() == m.get()
    win = se.Sliding(ScoreDrift(baseline=200), size=100)
    for v in s:
        win.update(None, float(v))
    assert win.get() == pytest.approx(ks_2samp(s[:200], s[-100:]).statistic, abs=1e-12)
    wb = se.Sliding(ScoreDrift(baseline=200), size=100)
    for k in range(0, 600, 70):
        wb.update_many(None, s[k:k + 70])
    assert wb.get() == pytest.approx(win.get(), abs=1e-12)
    wcopy = se.from_state(json.loads(json.dumps(wb.to_state())))
    assert wcopy.get() == wb.get()
    # merge and subtract: same reference only
    a = ScoreDrift(reference=s[:200]).update_many(None, s[200:400])
    b = ScoreDrift(reference=s[:200]).update_many(None, s[400:])
    assert a.merge(b).get() == pytest.approx(ks_2samp(s[:200], s[200:]).statistic, abs=1e-12)
    assert a.subtract(b).get() == pytest.approx(ks_2samp(s[:200], s[200:400]).statistic, abs=1e-12)
    with pytest.raises(ValueError, match="parameters"):
        a.merge(ScoreDrift(reference=s[:100]))


def test_bad_input_refused():
    m = ScoreDrift(reference=[0.1, 0.5]).update_many(None, [0.2, 0.3])
    before = m.to_state()
    with pytest.raises(ValueError, match=r"y_pred\[1\] = nan"):
        m.update_many(None, [0.2, math.nan])
    with pytest.raises(ValueError, match="no such event"):
        m.revert_many(None, [0.2, 0.7])
    assert m.to_state() == before
    with pytest.raises(ValueError, match="reference"):
        ScoreDrift(reference=[0.1, math.inf])
    with pytest.raises(ValueError, match="statistic"):
        ScoreDrift(statistic="kl")


def test_config_kind():
    m = config.make_metric({"metric": "score_drift", "baseline": 50, "size": 100}, name="sd")
    assert isinstance(m, se.Sliding) and isinstance(m.metric, ScoreDrift)


# ------------------------------------------------------------------ the detector


def test_threshold_formula():
    m = n = 5000
    level = 0.005 * 1000 / 1_000_000
    eps = ks_threshold(m, n, level)
    assert 4 * math.exp(-2 * eps ** 2 * m * n / (math.sqrt(m) + math.sqrt(n)) ** 2) == \
        pytest.approx(level, rel=1e-12)


def test_detector_no_false_alarm_on_stationary_streams_and_detects_shifts():
    alarms = 0
    delays = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        d = ScoreDriftDetector(alpha=0.05, horizon=20_000, reference=500, window=500,
                               every=100)
        d.update_many(None, rng.beta(2, 5, 6000))
        alarms += d.report()["changes"] > 0
        d.update_many(None, rng.beta(3, 5, 4000))  # the mean moves from .29 to .375
        ch = d.report()["last_change"]
        if ch is not None and ch["n"] > 6000:
            delays.append(ch["n"] - 6000)
    # stated: P(false alarm within the horizon) <= alpha: 20 streams, expect ~0
    assert alarms <= 2
    assert len(delays) >= 18 and np.median(delays) < 1000
    assert d.report()["change"] in ("rise", None)


def test_detector_state_resumes_exactly():
    rng = np.random.default_rng(3)
    s = np.r_[rng.random(3000), rng.random(3000) ** 2]
    a = ScoreDriftDetector(reference=500, window=500, every=100)
    a.update_many(None, s[:3210])
    b = se.from_state(json.loads(json.dumps(a.to_state())))
    a.update_many(None, s[3210:])
    b.update_many(None, s[3210:])
    assert json.dumps(a.report(), sort_keys=True) == json.dumps(b.report(), sort_keys=True)
    assert a.report()["changes"] >= 1 and a.report()["change"] == "drop"
    one = ScoreDriftDetector(reference=500, window=500, every=100)
    for v in s:
        one.update(None, float(v))
    assert one.report()["changes"] == a.report()["changes"]


def test_detector_in_a_monitor_from_config_pages_on_a_planted_shift():
    rng = np.random.default_rng(8)
    s = np.r_[rng.beta(5, 2, 6000), rng.beta(2, 5, 4000)]  # the scores fall at 6000
    y = rng.random(10_000) < s
    table = {"every": 500, "metrics": {"estimated_recall": "estimated_recall"},
             "drift": {"score_drift": {"test": "score", "reference": 1000, "window": 1000,
                                       "every": 200}},
             "rules": [{"alarm": "score_drift"},
                       {"alarm": "score_drift", "direction": "rise"}]}
    mon = se.Monitor.from_config(table)
    alerts = []
    mon.on_alert.append(alerts.append)
    mon.update_many(y[:6000], s[:6000])
    assert alerts == []  # nothing before the shift
    mon.update_many(y[6000:], s[6000:])
    firing = [a for a in alerts if a["state"] == "firing"]
    assert firing and firing[0]["rule"] == "score_drift alarm"
    assert 6000 < firing[0]["n"] <= 8000
    (whole,) = mon.snapshot()["segments"].values()
    rep = whole["drift"]["score_drift"]
    assert rep["last_change"]["before"] > rep["last_change"]["after"]
    copy = se.Monitor.from_state(json.loads(json.dumps(mon.to_state())))
    assert copy.snapshot() == mon.snapshot()
    with pytest.raises(ValueError, match="monitor.drift.score_drift"):
        config.make_drift({"test": "score", "every": 0}, name="score_drift")
