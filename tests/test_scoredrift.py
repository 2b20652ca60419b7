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


# ------------------------------------------------------------- the detector, exactly


def naive_alarms(scores, reference, window, every, alpha, horizon):
    """The detector as its docstring states it, on unit weights, with scipy's KS: the
    first ``reference`` scores make the reference; after each score, once ``window``
    scores followed it, every ``every``-th compares the last ``window`` with it at
    level ``alpha * every / horizon``; an alarm makes the window the new reference."""
    level = alpha * every / horizon
    ref, win, since, out, checks = [], [], 0, [], []
    for n, x in enumerate(scores, 1):
        if len(ref) < reference:
            ref.append(x)
            continue
        win.append(x)
        win = win[-window:]
        if len(win) < window:
            continue
        since += 1
        if since < every:
            continue
        since = 0
        ks = ks_2samp(ref, win).statistic
        checks.append((n, ks))
        if ks > ks_threshold(len(ref), len(win), level):
            out.append(n)
            ref, win = list(win), []
    return out, checks


@pytest.mark.filterwarnings("ignore:ks_2samp")
@pytest.mark.parametrize("seed", range(4))
def test_detector_alarms_where_the_stated_test_does(seed):
    rng = np.random.default_rng(seed)
    # rounded scores (ties), a shift at 1500 and another at 3200
    s = np.round(np.r_[rng.beta(2, 5, 1500), rng.beta(4, 4, 1700), rng.beta(2, 5, 1300)], 2)
    kw = dict(reference=300, window=250, every=50, alpha=0.05, horizon=10_000)
    want, checks = naive_alarms(s.tolist(), **kw)
    d = ScoreDriftDetector(**kw)
    for x in s.tolist():
        d.update(None, x)
    assert [c["n"] for c in d.changes] == want and len(want) >= 2
    ks_at = dict(checks)
    for c in d.changes:
        assert c["ks"] == pytest.approx(ks_at[c["n"]], abs=1e-12)
        assert c["start"] == c["n"] - kw["window"]
    # the checks without an alarm: the last one's statistic
    last = max(n for n, _ in checks)
    if last not in want:
        assert d.get() == pytest.approx(ks_at[last], abs=1e-12)
    rep = d.report()
    assert rep["drops"] + rep["rises"] == rep["changes"] == len(want)
    assert d.changes[0]["direction"] == "rise" and 1500 < d.changes[0]["n"] < 1800
    assert any(c["direction"] == "drop" and c["n"] > 3200 for c in d.changes)


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(0, 3000), max_size=6), weighted=st.booleans(),
       seed=st.integers(0, 5))
def test_detector_batches_and_states_give_the_same_bits(cuts, weighted, seed):
    rng = np.random.default_rng(seed)
    s = np.r_[rng.beta(2, 5, 1600), rng.beta(3, 3, 1400)]
    w = rng.random(3000) * 2 if weighted else None
    kw = dict(reference=400, window=300, every=70, alpha=0.05, horizon=10_000)
    one = ScoreDriftDetector(**kw)
    for i, x in enumerate(s.tolist()):
        one.update(None, x, 1.0 if w is None else float(w[i]))
    bounds = sorted({0, 3000, *cuts})
    part = ScoreDriftDetector(**kw)
    for a, b in zip(bounds, bounds[1:]):
        part = se.from_state(json.loads(json.dumps(part.to_state())))
        part.update_many(None, s[a:b], None if w is None else w[a:b])
    assert json.dumps(part.report(), sort_keys=True) == json.dumps(one.report(), sort_keys=True)
    assert part.changes == one.changes and len(one.changes) >= 1
    assert json.dumps(part.to_state()) == json.dumps(one.to_state())


# ------------------------------------------------------- the default label-free monitor


def test_the_default_label_free_monitor_has_the_score_drift_alarms():
    m = se.Monitor.default(size=200, label_free=True)
    det = m.drift[config.SCORE_DETECTOR]
    assert isinstance(det, ScoreDriftDetector)
    assert (det.alpha, det.horizon, det.reference, det.window, det.every) == (
        config.SCORE_ALPHA, config.DEFAULT_HORIZON, config.SCORE_WINDOW, config.SCORE_WINDOW,
        config.SCORE_EVERY)
    rules = {r.name: r for r in m.rules}
    assert rules["score drift"].metric == rules["score drift on rise"].metric == "score_shift"
    assert (rules["score drift"].direction, rules["score drift on rise"].direction) == (
        "drop", "rise")
    assert "score_drift@200 > 0.1" not in rules and config.SCORE_DETECTOR in m.label_free
    # a drift table of one's own replaces the detector, and its alarms go with it
    kw = config.build_label_free({"drift": {"recall": {"test": "sequential"}}})
    assert set(kw["drift"]) == {"recall"}
    assert not any(r.name.startswith("score drift") for r in kw["rules"])
    # rules of one's own replace the default rules; the detector stays (rows, snapshot)
    kw = config.build_label_free({"rules": ["recall < 0.5"]})
    assert config.SCORE_DETECTOR in kw["drift"] and [r.name for r in kw["rules"]] == [
        "recall < 0.5"]
    # metrics of one's own: no label-free defaults at all
    kw = config.build_label_free({"metrics": {"recall": "recall"}})
    assert kw["drift"] == {} and kw["rules"] == []


@pytest.mark.parametrize("group_by", [None, "country"])
def test_the_score_drift_rule_fires_at_the_first_evaluation_after_its_detection(group_by):
    rng = np.random.default_rng(11)
    n0, n1 = 12_000, 6000
    s = np.r_[rng.beta(2, 5, n0), rng.beta(2, 9, n1)]  # the scores fall at 12 000
    t = np.arange(n0 + n1, dtype=float)
    m = se.Monitor.default(size=1000, every=1000, label_free=True,
                           **({} if group_by is None else {"group_by": group_by}))
    alerts = []
    m.on_alert.append(alerts.append)
    seg = None if group_by is None else ["fr"] * len(s)
    for i in range(0, n0 + n1, 1000):
        m.predict_many(s[i:i + 1000], t=t[i:i + 1000],
                       segment=None if seg is None else seg[i:i + 1000])
    m.flush()
    direct = ScoreDriftDetector(alpha=config.SCORE_ALPHA, horizon=config.DEFAULT_HORIZON,
                                reference=config.SCORE_WINDOW, window=config.SCORE_WINDOW,
                                every=config.SCORE_EVERY).update_many(None, s)
    (first,) = [c["n"] for c in direct.changes]
    assert n0 < first < n0 + 2000
    fired = [a for a in alerts if a["state"] == "firing"]
    assert [a["rule"] for a in fired] == ["score drift"]
    assert fired[0]["t"] == -(-first // 1000) * 1000 - 1  # the evaluation that saw it
    assert fired[0]["segment"] == (None if group_by is None else "fr")
    # explained in predictions (the detector's clock), not in labelled events
    a, start, seen = fired[0], direct.changes[0]["start"], -(-first // 1000) * 1000
    assert (a["clock"], a["change_start_n"], a["detected_n"]) == ("predictions", None, None)
    assert (a["change_start_segment_n"], a["detected_segment_n"]) == (start, first)
    assert f"from about prediction {start:,}".replace(",", " ") in a["message"]
    assert f"; {seen - start:,} predictions since".replace(",", " ") in a["message"]
    assert f"; detected at prediction {first:,}".replace(",", " ") in a["message"]
    assert "labelled" not in a["message"]
    key = None if group_by is None else "fr"
    rep = m.snapshot()["segments"][key]["drift"][config.SCORE_DETECTOR]
    assert rep["last_change"]["n"] == first and rep["drops"] == 1
    copy = se.Monitor.from_state(json.loads(json.dumps(m.to_state())))
    assert copy.snapshot() == m.snapshot()
