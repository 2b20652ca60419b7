"""Drift tests of precision and recall, and change points with river's detectors.

Oracles: statsmodels for the test statistics (pooled z-test, Newcombe and Wald
intervals, score test and Wilson interval), brute-force window counts recomputed from
the raw stream, river's detectors fed by hand with independently computed indicator
streams. Statistical honesty: the false-alarm rate over many seeded stationary streams,
and the power on a planted recall drop.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import drift as river_drift
from statsmodels.stats.proportion import (
    confint_proportions_2indep,
    proportion_confint,
    proportions_ztest,
)

from streameval.drift import (
    ChangePointDetector,
    DriftReport,
    PrecisionRecallDrift,
    one_proportion_test,
    two_proportion_test,
)
from streameval.metrics.base import from_state

HYP = settings(max_examples=100, deadline=None)


# ------------------------------------------------------------------- the tests


@HYP
@given(n1=st.integers(1, 5000), n2=st.integers(1, 5000), f1=st.floats(0, 1), f2=st.floats(0, 1),
       alpha=st.sampled_from([0.001, 0.01, 0.05, 0.2]))
def test_two_proportion_test_equals_statsmodels(n1, n2, f1, f2, alpha):
    x1, x2 = round(f1 * n1), round(f2 * n2)
    r = two_proportion_test(x1, n1, x2, n2, alpha=alpha)
    assert r.reference == x1 / n1 and r.current == x2 / n2
    assert r.delta == pytest.approx(x2 / n2 - x1 / n1, abs=1e-15)
    assert (r.n_reference, r.n_current) == (n1, n2)
    if 0 < x1 + x2 < n1 + n2:
        _, p = proportions_ztest([x2, x1], [n2, n1])  # pooled variance by default
        assert r.p_value == pytest.approx(p, rel=1e-9, abs=1e-300)
    else:
        assert r.p_value == 1.0  # both 0 or both 1: no difference at all
    lo, hi = confint_proportions_2indep(x2, n2, x1, n1, method="newcomb", compare="diff", alpha=alpha)
    assert (r.ci_low, r.ci_high) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    assert r.drifted == (r.p_value < alpha)
    w = two_proportion_test(x1, n1, x2, n2, alpha=alpha, ci="wald")
    lo, hi = confint_proportions_2indep(x2, n2, x1, n1, method="wald", compare="diff", alpha=alpha)
    assert (w.ci_low, w.ci_high) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))


@HYP
@given(n=st.integers(1, 5000), f=st.floats(0, 1), p0=st.floats(0.01, 0.99),
       alpha=st.sampled_from([0.001, 0.01, 0.05]))
def test_one_proportion_test_equals_statsmodels(n, f, p0, alpha):
    x = round(f * n)
    r = one_proportion_test(x, n, p0, alpha=alpha)
    _, p = proportions_ztest(x, n, value=p0, prop_var=p0)  # score test: null variance
    assert r.p_value == pytest.approx(p, rel=1e-9, abs=1e-300)
    lo, hi = proportion_confint(x, n, alpha=alpha, method="wilson")
    assert r.ci_low == pytest.approx(lo - p0, abs=1e-12) and r.ci_high == pytest.approx(hi - p0, abs=1e-12)
    assert r.reference == p0 and r.n_reference is None and r.n_current == n


def test_tests_edge_cases_and_errors():
    r = two_proportion_test(0, 0, 5, 10)
    assert math.isnan(r.p_value) and math.isnan(r.delta) and not r.drifted
    assert one_proportion_test(10, 10, 1.0).p_value == 1.0
    assert one_proportion_test(9, 10, 1.0).p_value == 0.0
    with pytest.raises(ValueError, match="x_cur = 11 > n_cur = 10"):
        two_proportion_test(1, 10, 11, 10)
    with pytest.raises(ValueError, match="n_ref = -1"):
        two_proportion_test(1, -1, 1, 10)
    with pytest.raises(ValueError, match="alpha = 0"):
        two_proportion_test(1, 10, 1, 10, alpha=0)
    with pytest.raises(ValueError, match="ci = 'exact'"):
        two_proportion_test(1, 10, 1, 10, ci="exact")
    with pytest.raises(ValueError, match="reference = 1.5"):
        one_proportion_test(1, 10, 1.5)


# ------------------------------------------------------------ streams and oracles


def make_stream(seed, n, recall=0.8, precision_noise=0.1, prevalence=0.4, weights=False, at_threshold=0.05):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < prevalence
    hit = rng.random(n) < recall
    false_alarm = rng.random(n) < precision_noise
    pred = np.where(y, hit, false_alarm)
    s = np.where(pred, rng.uniform(0.5, 1.0, n), rng.uniform(0.0, 0.5, n))
    s[rng.random(n) < at_threshold] = 0.5  # exactly at the threshold: predicted positive
    w = rng.choice([0.5, 1.0, 2.0, 4.0], size=n) if weights else None
    return y, s, w


def props(y, s, w, metric, threshold=0.5):
    """Brute force: (x_eff, n_eff) of recall or precision over the given events."""
    y, s = np.asarray(y, bool), np.asarray(s)
    w = np.ones(len(y)) if w is None else np.asarray(w, float)
    pred = s >= threshold
    den = y if metric == "recall" else pred
    num = y & pred
    sw, sw2 = w[den].sum(), (w[den] ** 2).sum()
    if sw == 0:
        return 0.0, 0.0
    p = w[num].sum() / sw
    n_eff = sw * sw / sw2
    return p * n_eff, n_eff


def expected_report(ref, cur, alpha):
    (x1, n1), (x2, n2) = ref, cur
    _, p = proportions_ztest([x2, x1], [n2, n1])
    lo, hi = confint_proportions_2indep(x2, n2, x1, n1, method="newcomb", compare="diff", alpha=alpha)
    return x1 / n1, x2 / n2, p, lo, hi


def assert_report(r, ref, cur, alpha):
    p1, p2, p, lo, hi = expected_report(ref, cur, alpha)
    assert r.ready
    assert r.reference == pytest.approx(p1, abs=1e-12) and r.current == pytest.approx(p2, abs=1e-12)
    assert r.n_reference == pytest.approx(ref[1], rel=1e-12) and r.n_current == pytest.approx(cur[1], rel=1e-12)
    assert r.p_value == pytest.approx(p, rel=1e-7, abs=1e-300)
    assert r.ci_low == pytest.approx(lo, abs=1e-9) and r.ci_high == pytest.approx(hi, abs=1e-9)


# ------------------------------------------------------------ PrecisionRecallDrift


@pytest.mark.parametrize("metric", ["recall", "precision"])
@pytest.mark.parametrize("weights", [False, True])
def test_count_windows_against_brute_force(metric, weights):
    y, s, w = make_stream(1, 3000, weights=weights)
    N, warm = 400, 150
    base = PrecisionRecallDrift(metric, "baseline", window=N, warmup=warm, alpha=0.05)
    prev = PrecisionRecallDrift(metric, "previous", window=N, warmup=warm, alpha=0.05)
    fixed = PrecisionRecallDrift(metric, 0.7, window=N, warmup=warm, alpha=0.05)
    for i in range(len(y)):
        wi = 1.0 if w is None else w[i]
        for d in (base, prev, fixed):
            d.update(bool(y[i]), s[i], w=wi)
        n = i + 1
        if n % 97 == 0:
            W = (lambda lo, hi: None if w is None else w[lo:hi])
            cur = props(y[n - N:n], s[n - N:n], W(n - N, n), metric)
            rb, rp, rf = base.report(), prev.report(), fixed.report()
            if n >= warm + 2 * N:
                assert_report(rb, props(y[warm:warm + N], s[warm:warm + N], W(warm, warm + N), metric), cur, 0.05)
                assert_report(rp, props(y[n - 2 * N:n - N], s[n - 2 * N:n - N], W(n - 2 * N, n - N), metric), cur, 0.05)
            else:
                assert not rb.ready and not rp.ready and math.isnan(rb.p_value) and not rb.drifted
            if n >= warm + N:
                _, p = proportions_ztest(cur[0], cur[1], value=0.7, prop_var=0.7)
                assert rf.ready and rf.p_value == pytest.approx(p, rel=1e-7, abs=1e-300)
            else:
                assert not rf.ready
    base._check()
    prev._check()


def test_denominators_are_actual_positives_for_recall_and_predicted_positives_for_precision():
    # labels [T, F, F], scores [0.7, 0.3, 0.5] at threshold 0.5: precision 1/2, recall 1 (DESIGN)
    y = [1, 0, 0] * 200
    s = [0.7, 0.3, 0.5] * 200
    rec = PrecisionRecallDrift("recall", 1.0, window=300)
    pre = PrecisionRecallDrift("precision", 0.5, window=300)
    rec.update_many(y, s)
    pre.update_many(y, s)
    r, p = rec.report(), pre.report()
    assert (r.current, r.n_current, r.p_value) == (1.0, 100.0, 1.0)
    assert (p.current, p.n_current, p.p_value) == (0.5, 200.0, 1.0)


@pytest.mark.parametrize("reference", ["baseline", "previous", 0.8])
def test_time_windows_with_late_events_against_brute_force(reference):
    y, s, _ = make_stream(2, 4000)
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.exponential(1.0, 4000))
    t = np.round(t - np.where(rng.random(4000) < 0.2, rng.exponential(4.0, 4000), 0.0), 1)
    P, L, warm = 300.0, 5.0, 100.0
    loop = PrecisionRecallDrift("recall", reference, period=P, lateness=L, warmup=warm)
    batch = PrecisionRecallDrift("recall", reference, period=P, lateness=L, warmup=warm)
    newest, accepted, late = -math.inf, [], 0
    for lo in range(0, 4000, 500):
        for i in range(lo, lo + 500):
            loop.update(int(y[i]), s[i], t=t[i])
            if t[i] < newest - L:
                late += 1
            else:
                accepted.append(i)
                newest = max(newest, t[i])
        batch.update_many(y[lo:lo + 500], s[lo:lo + 500], t=t[lo:lo + 500])
        acc = np.array(accepted)
        ta = t[acc]
        t0 = t[accepted[0]]
        cur = acc[(ta > newest - P)]
        cur_p = props(y[cur], s[cur], None, "recall")
        for d in (loop, batch):
            r = d.report()
            assert d.late == late and d.n == len(accepted)
            if reference == "baseline":
                ready = newest >= t0 + warm + 2 * P
                ref = acc[(ta >= t0 + warm) & (ta < t0 + warm + P)]
            elif reference == "previous":
                ready = newest >= t0 + warm + 2 * P
                ref = acc[(ta > newest - 2 * P) & (ta <= newest - P)]
            else:
                ready = newest >= t0 + warm + P
            assert r.ready == ready
            if ready and reference != 0.8:
                assert_report(r, props(y[ref], s[ref], None, "recall"), cur_p, 0.01)
            elif ready:
                assert r.current == pytest.approx(cur_p[0] / cur_p[1], abs=1e-12)
        assert late > 0 or lo == 0


@HYP
@given(seed=st.integers(0, 10**6), sizes=st.lists(st.integers(0, 300), min_size=1, max_size=5),
       reference=st.sampled_from(["baseline", "previous", 0.6]),
       metric=st.sampled_from(["recall", "precision"]))
def test_update_many_equals_loop(seed, sizes, reference, metric):
    y, s, w = make_stream(seed, sum(sizes), weights=True)
    a = PrecisionRecallDrift(metric, reference, window=100, warmup=30)
    b = PrecisionRecallDrift(metric, reference, window=100, warmup=30)
    i = 0
    for n in sizes:
        for j in range(i, i + n):
            a.update(y[j], s[j], w=w[j])
        b.update_many(y[i:i + n], s[i:i + n], w[i:i + n])
        i += n
        ra, rb = a.report(), b.report()
        assert ra.ready == rb.ready and ra.n == rb.n
        for f in ("reference", "current", "p_value", "ci_low", "ci_high"):
            va, vb = getattr(ra, f), getattr(rb, f)
            assert (math.isnan(va) and math.isnan(vb)) or va == pytest.approx(vb, rel=1e-9, abs=1e-12)


def test_state_round_trip_then_continue():
    y, s, w = make_stream(4, 2000, weights=True)
    t = np.arange(2000) * 0.5
    for kw in ({"window": 300}, {"period": 100.0, "lateness": 2.0}):
        for reference in ("baseline", "previous", 0.75):
            a = PrecisionRecallDrift("precision", reference, warmup=50, **kw)
            a.update_many(y[:1000], s[:1000], w[:1000], t=t[:1000])
            b = from_state(json.loads(json.dumps(a.to_state())))
            for i in range(1000, 2000):
                a.update(y[i], s[i], w=w[i], t=t[i])
                b.update(y[i], s[i], w=w[i], t=t[i])
            assert a.report() == b.report()
            assert a.report().ready


def test_bad_events_raise_and_change_nothing():
    d = PrecisionRecallDrift("recall", "previous", window=10)
    d.update_many([1, 0, 1], [0.9, 0.1, 0.2])
    before = d.to_state()
    with pytest.raises(ValueError, match="y_pred = nan"):
        d.update(1, float("nan"))
    with pytest.raises(ValueError, match="y_true = 2"):
        d.update(2, 0.5)
    with pytest.raises(ValueError, match=r"y_pred\[1\] = inf"):
        d.update_many([1, 1], [0.5, float("inf")])
    assert d.to_state() == before
    td = PrecisionRecallDrift("recall", "previous", period=10)
    with pytest.raises(ValueError, match="needs the event time"):
        td.update(1, 0.5)
    with pytest.raises(ValueError, match=r"exactly one of size= \(events; alias window=\) and period="):
        PrecisionRecallDrift("recall")
    with pytest.raises(ValueError, match="metric = 'f1'"):
        PrecisionRecallDrift("f1", window=10)
    with pytest.raises(ValueError, match="reference = 'first'"):
        PrecisionRecallDrift("recall", "first", window=10)


def test_report_feeds_the_drift_alert_rule():
    from streameval.alerts import Drift

    d = PrecisionRecallDrift("recall", "previous", window=4000, alpha=0.01)
    y, s, _ = make_stream(5, 4000, recall=0.85, prevalence=0.5)
    d.update_many(y, s)
    y, s, _ = make_stream(6, 4000, recall=0.70, prevalence=0.5)
    d.update_many(y, s)
    report = d.report()
    assert report.drifted and report.delta < 0
    transition = Drift("recall", 0.01).evaluate(report.to_dict(), n=report.n)
    assert transition["state"] == "firing"


# -------------------------------------------------------------- statistical honesty


def _exact_stream(rng, n_pos, n_neg, recall, fpr=0.1):
    """A window with exactly n_pos positives, each detected with probability `recall`."""
    y = np.r_[np.ones(n_pos, bool), np.zeros(n_neg, bool)]
    pred = np.where(y, rng.random(n_pos + n_neg) < recall, rng.random(n_pos + n_neg) < fpr)
    order = rng.permutation(n_pos + n_neg)
    return y[order], np.where(pred, 0.9, 0.1)[order]


@pytest.mark.parametrize("reference", ["baseline", "previous", 0.8])
@pytest.mark.parametrize("metric", ["recall", "precision"])
def test_false_alarm_rate_at_most_alpha_on_stationary_streams(reference, metric):
    alpha, seeds = 0.05, 600
    alarms = 0
    for seed in range(seeds):
        rng = np.random.default_rng([seed, 7])
        y, s, _ = make_stream(rng.integers(2**32), 1500, recall=0.8, precision_noise=0.25,
                              prevalence=0.5, at_threshold=0.0)
        if reference == 0.8 and metric == "precision":
            ref = 0.8 / (0.8 + 0.25)  # the stream's true precision at prevalence 0.5
        else:
            ref = reference
        d = PrecisionRecallDrift(metric, ref, window=600, warmup=100, alpha=alpha)
        d.update_many(y, s)
        r = d.report()
        assert r.ready and r.n_current > 200
        alarms += r.drifted
    # at most alpha, up to 3 binomial standard errors of the estimate
    assert alarms / seeds <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / seeds), alarms


def test_false_alarm_rate_of_the_bare_test_is_at_most_alpha():
    rng = np.random.default_rng(11)
    alpha, reps = 0.01, 20000
    x1 = rng.binomial(500, 0.9, reps)
    x2 = rng.binomial(700, 0.9, reps)
    rate = np.mean([two_proportion_test(a, 500, b, 700, alpha=alpha).drifted for a, b in zip(x1, x2)])
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)
    assert rate >= alpha / 3  # and not absurdly conservative either


@pytest.mark.parametrize("reference", ["baseline", "previous"])
def test_planted_recall_drop_of_015_with_2000_positives_is_detected(reference):
    for seed in range(10):
        rng = np.random.default_rng([seed, 99])
        d = PrecisionRecallDrift("recall", reference, window=4000, alpha=0.001)
        y, s = _exact_stream(rng, 2000, 2000, recall=0.85)
        d.update_many(y, s)
        y, s = _exact_stream(rng, 2000, 2000, recall=0.70)
        d.update_many(y, s)
        r = d.report()
        assert r.n_reference == 2000 and r.n_current == 2000
        assert r.p_value < 0.001 and r.drifted
        assert r.ci_low < r.delta < r.ci_high < 0
        assert abs(r.delta + 0.15) < 0.05


def test_a_small_drop_with_few_positives_is_not_a_certain_alarm():
    # power sanity: 0.02 drop on 200 positives is well within noise
    d = PrecisionRecallDrift("recall", "previous", window=400, alpha=0.01)
    rng = np.random.default_rng(5)
    y, s = _exact_stream(rng, 200, 200, recall=0.85)
    d.update_many(y, s)
    y, s = _exact_stream(rng, 200, 200, recall=0.83)
    d.update_many(y, s)
    assert d.report().p_value > 0.01


# ------------------------------------------------------------- ChangePointDetector


def indicators(y, s, which, threshold=0.5):
    """Brute force: (event index, indicator value) pairs fed to the detector."""
    out = []
    for i, (yi, si) in enumerate(zip(y, s)):
        pred = si >= threshold
        if which == "recall" and yi:
            out.append((i, int(pred)))
        elif which == "precision" and pred:
            out.append((i, int(bool(yi))))
        elif which == "error":
            out.append((i, int(pred != bool(yi))))
    return out


def drifting_stream(seed, n=6000, at=3000):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.5
    recall = np.where(np.arange(n) < at, 0.9, 0.6)
    pred = np.where(y, rng.random(n) < recall, rng.random(n) < np.where(np.arange(n) < at, 0.05, 0.3))
    return y, np.where(pred, 0.8, 0.2)


@pytest.mark.parametrize("detector", ["adwin", "page_hinkley"])
@pytest.mark.parametrize("which", ["recall", "precision", "error"])
def test_change_points_equal_river_fed_by_hand(detector, which):
    y, s = drifting_stream(1)
    t = 1000.0 + np.arange(len(y)) * 2.0
    cpd = ChangePointDetector(detector, indicator=which)
    for i in range(len(y)):
        cpd.update(bool(y[i]), s[i], t=t[i])
    oracle = river_drift.ADWIN() if detector == "adwin" else river_drift.PageHinkley()
    expected = []
    for k, (i, x) in enumerate(indicators(y, s, which)):
        oracle.update(x)
        if oracle.drift_detected:
            expected.append((i, t[i], k + 1))
    got = [(c.index, c.t, c.n_indicator) for c in cpd.changes]
    assert got == expected
    assert got and got[0][0] > 3000  # the planted change is found, after it happens
    first = got[0][0]
    assert first < 3000 + 1500
    # the batch path gives the same change points
    batch = ChangePointDetector(detector, indicator=which)
    batch.update_many(y[:2500], s[:2500], t=t[:2500])
    batch.update_many(y[2500:], s[2500:], t=t[2500:])
    assert [(c.index, c.t, c.n_indicator) for c in batch.changes] == expected


def test_change_point_detector_with_instance_params_callback_and_weights():
    y, s = drifting_stream(2)
    seen = []
    cpd = ChangePointDetector(river_drift.PageHinkley(threshold=25.0), indicator="recall", on_change=seen.append)
    w = np.where(np.arange(len(y)) % 10 == 0, 0.0, 3.0)  # weight 0: skipped
    cpd.update_many(y, s, w=w)
    oracle = river_drift.PageHinkley(threshold=25.0)
    expected = []
    for i, x in indicators(y, s, "recall"):
        if i % 10 == 0:
            continue
        oracle.update(x)
        if oracle.drift_detected:
            expected.append(i)
    assert [c.index for c in cpd.changes] == expected == [c.index for c in seen]
    assert cpd.changes[0].t is None
    named = ChangePointDetector("page_hinkley", detector_params={"threshold": 25.0})
    named.update_many(y, s, w=w)
    assert [c.index for c in named.changes] == expected


@pytest.mark.parametrize("detector", ["adwin", "page_hinkley"])
def test_change_point_state_round_trip_resumes_exactly(detector):
    y, s = drifting_stream(3, n=8000, at=5000)
    whole = ChangePointDetector(detector, indicator="error")
    whole.update_many(y, s)
    part = ChangePointDetector(detector, indicator="error")
    part.update_many(y[:4990], s[:4990])
    back = from_state(json.loads(json.dumps(part.to_state())))
    back.update_many(y[4990:], s[4990:])
    assert back.changes == whole.changes and back.n == whole.n
    assert len(whole.changes) >= 1


def test_adwin_state_from_another_river_version_is_refused():
    cpd = ChangePointDetector("adwin")
    cpd.update(1, 0.9)
    state = cpd.to_state()
    state["data"]["detector"]["river"] = "0.0.1"
    with pytest.raises(ValueError, match="river 0.0.1"):
        from_state(state)
    with pytest.raises(ValueError, match="only ADWIN and PageHinkley"):
        ChangePointDetector(river_drift.KSWIN()).to_state()


def test_change_point_detector_validation():
    cpd = ChangePointDetector("adwin")
    with pytest.raises(ValueError, match="y_pred = nan"):
        cpd.update(1, float("nan"))
    with pytest.raises(ValueError, match=r"y_true\[1\] = 3"):
        cpd.update_many([1, 3], [0.1, 0.2])
    assert cpd.n == 0 and cpd.n_indicator == 0
    with pytest.raises(ValueError, match="detector = 'cusum'"):
        ChangePointDetector("cusum")
    with pytest.raises(ValueError, match="indicator = 'auc'"):
        ChangePointDetector("adwin", indicator="auc")


def test_report_dataclass_is_plain_data():
    r = two_proportion_test(3, 10, 5, 10, metric="recall")
    assert isinstance(r, DriftReport)
    d = r.to_dict()
    assert d["metric"] == "recall" and set(d) >= {"reference", "current", "delta", "ci_low", "ci_high",
                                                   "p_value", "n_reference", "n_current", "drifted"}


def test_clone_is_fresh_with_the_same_parameters():
    y, s, _ = make_stream(8, 1000)
    d = PrecisionRecallDrift("precision", 0.7, window=200, warmup=10, alpha=0.02, threshold=0.4)
    d.update_many(y, s)
    c = d.clone()
    assert c.n == 0 and not c.report().ready and c._params() == d._params()
    c.update_many(y, s)
    assert c.report() == d.report()
    cpd = ChangePointDetector("page_hinkley", indicator="error", detector_params={"threshold": 30.0})
    cpd.update_many(y, s)
    fresh = cpd.clone()
    assert fresh.n == 0 and fresh.changes == [] and fresh.river_detector.threshold == 30.0


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_drift_counts_revert_many_equals_a_loop_of_revert(data):
    from streameval.drift import DriftCounts

    events = data.draw(st.lists(st.tuples(st.booleans(), st.sampled_from([0.1, 0.5, 0.9]),
                                          st.sampled_from([0.5, 1.0, 2.0, 3.0])), max_size=40))
    k = data.draw(st.integers(0, len(events)))
    gone = events[:k]
    loop, batch = DriftCounts(), DriftCounts()
    for e in events:
        loop.update(*e)
        batch.update(*e)
    for e in gone:
        loop.revert(*e)
    batch.revert_many(np.array([e[0] for e in gone], dtype=bool),
                      np.array([e[1] for e in gone]), np.array([e[2] for e in gone]))
    # dyadic weights: every sum exact; the oracle is a direct count of the rest
    kept = events[k:]
    for metric in ("recall", "precision"):
        assert batch.proportion(metric) == loop.proportion(metric)
    tp = sum(w for y, s, w in kept if y and s >= 0.5)
    fn = sum(w for y, s, w in kept if y and s < 0.5)
    assert batch._w[3] == tp and batch._w[2] == fn
    before = batch.to_state()
    with pytest.raises(ValueError, match=r"y_pred\[1\]"):
        batch.revert_many([True, True], [0.5, float("nan")])
    assert batch.to_state() == before


@pytest.mark.parametrize("reference", [0.5, "previous"])
@pytest.mark.parametrize("seed", range(6))
def test_a_window_without_positives_has_undefined_recall_after_fractional_weights(seed, reference):
    # Fractional weights of ~1000 leave float residue in the window's weighted sums
    # once every actual positive has expired; brute force over the window's events
    # says there is no actual positive, so the current recall is undefined (nan).
    rng = np.random.default_rng(seed)
    N = 1000
    y = np.r_[rng.random(2000) < 0.5, np.zeros(N, dtype=bool)]
    s = rng.random(len(y))
    w = rng.random(len(y)) * 1000 + 0.1
    d = PrecisionRecallDrift("recall", reference, window=N, min_count=0)
    d.update_many(y[:1500], s[:1500], w[:1500])
    for i in range(1500, len(y)):
        d.update(bool(y[i]), float(s[i]), w=float(w[i]))
    assert not y[-N:].any()
    r = d.report()
    assert r.ready and math.isnan(r.current) and r.n_current == 0.0, r
    assert math.isnan(r.p_value) and not r.drifted
    assert math.isnan(d._cur.metric.get())
    if reference == "previous":
        # the previous window's recall equals brute force over its events
        ref = props(y[-2 * N:-N], s[-2 * N:-N], w[-2 * N:-N], "recall")
        assert r.n_reference == pytest.approx(ref[1], rel=1e-9)
        # the restored state reports the same
        r2 = from_state(json.loads(json.dumps(d.to_state()))).report()
        assert math.isnan(r2.current) and r2.n_reference == r.n_reference


def test_drift_counts_refuse_to_revert_an_event_never_added():
    from streameval.drift import DriftCounts

    c = DriftCounts()
    c.update(1, 0.9, w=0.3)
    c.update(0, 0.2, w=0.7)
    before = c.to_state()
    with pytest.raises(ValueError, match="no such event"):
        c.revert(1, 0.1)  # a false negative: none was added
    with pytest.raises(ValueError, match=r"y_true\[2\]"):
        c.revert_many([1, 0, 0], [0.9, 0.2, 0.3])  # the second true negative
    assert c.to_state() == before
    c.revert_many([1, 0], [0.9, 0.2], [0.3, 0.7])
    assert c._w == [0.0] * 4 and c._w2 == [0.0] * 4 and math.isnan(c.get())


def test_an_integral_float_warmup_counts_events_in_batches_too():
    # warmup = 150.0 is accepted for a count window (an integral number of events);
    # update_many sliced the batch with it and crashed half-applied
    y, s, w = make_stream(3, 1200, weights=True)
    N, warm = 400, 150
    d = PrecisionRecallDrift("recall", "baseline", window=N, warmup=float(warm), alpha=0.05)
    d.update_many(y[:700], s[:700], w[:700])
    d.update_many(y[700:], s[700:], w[700:])
    ref = props(y[warm:warm + N], s[warm:warm + N], w[warm:warm + N], "recall")
    cur = props(y[-N:], s[-N:], w[-N:], "recall")
    assert_report(d.report(), ref, cur, 0.05)
    assert d.n == len(y)


# ------------------------------------------- the metric protocol (issue 10): one boundary

from streameval.config import make_drift  # noqa: E402
from streameval.validation import ValidationError  # noqa: E402


def brute_drift(y, s, w, t, metric, reference, size=None, period=None, warmup=0, lateness=0.0):
    """Brute force over the raw stream: (ready, ref counts or None, cur counts, n, late)."""
    n_all = len(y)
    if period is None:
        idx = np.arange(n_all)
        n, late = n_all, 0
        cur = idx[max(n - size, 0):]
        if reference == "baseline":
            ref = idx[warmup:warmup + size]
        elif reference == "previous":
            ref = idx[max(n - 2 * size, 0):max(n - size, 0)]
        else:
            ref = None
        ready = n >= warmup + (1 if ref is None else 2) * size
    else:
        newest, acc = -math.inf, []
        for i in range(n_all):
            if t[i] >= newest - lateness:
                acc.append(i)
                newest = max(newest, t[i])
        acc = np.array(acc, dtype=int)
        n, late = len(acc), n_all - len(acc)
        ta = t[acc]
        cur = acc[ta > newest - period]
        t0 = t[acc[0]] if n else math.nan
        if reference == "baseline":
            ref = acc[(ta >= t0 + warmup) & (ta < t0 + warmup + period)]
        elif reference == "previous":
            ref = acc[(ta > newest - 2 * period) & (ta <= newest - period)]
        else:
            ref = None
        ready = bool(n) and newest >= t0 + warmup + (1 if ref is None else 2) * period
    W = (lambda ix: None if w is None else w[ix])
    cur_c = props(y[cur], s[cur], W(cur), metric)
    ref_c = None if ref is None else props(y[ref], s[ref], W(ref), metric)
    return ready, ref_c, cur_c, n, late


def assert_matches_brute_force(d, y, s, w, t, metric, reference, **kw):
    ready, ref, cur, n, late = brute_drift(y, s, w, t, metric, reference, **kw)
    r = d.report()
    assert (r.ready, d.n, d.late) == (ready, n, late)
    x2, n2 = cur
    got = d.get()
    assert (math.isnan(got) and n2 == 0) or got == pytest.approx(x2 / n2, abs=1e-9)
    if not ready or n2 == 0:
        return
    if ref is None:
        p0 = reference
        if 0 < p0 < 1:
            _, p = proportions_ztest(x2, n2, value=p0, prop_var=p0)
            assert r.p_value == pytest.approx(p, rel=1e-6, abs=1e-300)
        return
    x1, n1 = ref
    pooled = (x1 + x2) / (n1 + n2) if n1 > 0 else 0.0
    if n1 > 0 and 1e-9 < pooled < 1 - 1e-9:
        assert_report(r, ref, cur, d.alpha)


def assert_same_drift(a, b):
    ra, rb = a.report(), b.report()
    assert (ra.ready, ra.n, a.late) == (rb.ready, rb.n, b.late)
    for f in ("reference", "current", "p_value", "ci_low", "ci_high", "n_current"):
        va, vb = getattr(ra, f), getattr(rb, f)
        assert (math.isnan(va) and math.isnan(vb)) or va == pytest.approx(vb, rel=1e-9, abs=1e-12), f
    ga, gb = a.get(), b.get()
    assert (math.isnan(ga) and math.isnan(gb)) or ga == pytest.approx(gb, rel=1e-9, abs=1e-12)


@HYP
@given(seed=st.integers(0, 10**6), sizes=st.lists(st.integers(0, 120), min_size=1, max_size=4),
       reference=st.sampled_from(["baseline", "previous", 0.6]),
       metric=st.sampled_from(["recall", "precision"]), timed=st.booleans(),
       custom=st.booleans(), weighted=st.booleans())
def test_update_many_loop_and_trusted_path_agree_with_brute_force(
        seed, sizes, reference, metric, timed, custom, weighted):
    total = sum(sizes)
    y, s, w = make_stream(seed, total, weights=weighted)
    rng = np.random.default_rng(seed + 1)
    t = np.round(np.cumsum(rng.exponential(1.0, total))
                 - np.where(rng.random(total) < 0.2, rng.exponential(4.0, total), 0.0), 1)
    labels = np.where(y, "spam", "ham").astype(object) if custom else y.astype(int)
    lab = {"pos_label": "spam", "neg_label": "ham"} if custom else {}
    kw = {"period": 30.0, "lateness": 3.0, "warmup": 5.0} if timed else {"size": 40, "warmup": 10}
    loop, many, trusted = (PrecisionRecallDrift(metric, reference, **kw, **lab) for _ in range(3))
    i = 0
    for n in sizes:
        sl = slice(i, i + n)
        for j in range(i, i + n):
            loop.update(labels[j], s[j], w=1.0 if w is None else w[j], t=t[j] if timed else None)
        tt = t[sl] if timed else None
        many.update_many(labels[sl], s[sl], None if w is None else w[sl], t=tt)
        trusted.update_trusted(*trusted.validate(labels[sl], s[sl], None if w is None else w[sl]), tt)
        i += n
        for d in (loop, many, trusted):
            assert_matches_brute_force(d, y[:i], s[:i], None if w is None else w[:i], t[:i],
                                       metric, reference, **kw)
        assert_same_drift(loop, many)
        assert_same_drift(loop, trusted)
    for d in (loop, many, trusted):
        d._check()


def test_validate_returns_binary_columns_with_decoded_labels():
    d = PrecisionRecallDrift("recall", size=5, pos_label="spam", neg_label="ham")
    assert d.columns == "binary"
    y, s, w = d.validate(["spam", "ham"], [0.25, {"spam": 0.75}], [1, 2])
    assert y.dtype == np.bool_ and y.tolist() == [True, False]
    assert s.dtype == np.float64 and s.tolist() == [0.25, 0.75]
    assert w.dtype == np.float64 and w.tolist() == [1.0, 2.0]
    assert d.validate(["ham"], [0.5])[2] is None and d.n == 0


@pytest.mark.parametrize("kw", [{"size": 4}, {"period": 10.0}])
@pytest.mark.parametrize("bad, index, what", [
    (("y_true", 2, "pos"), 2, r"y_true\[2\] = 'pos'"),
    (("y_pred", 3, math.nan), 3, r"y_pred\[3\] = nan"),
    (("w", 1, -1.0), 1, r"w\[1\] = -1.0"),
])
def test_a_bad_element_raises_with_its_index_and_changes_nothing(kw, bad, index, what):
    d = PrecisionRecallDrift("recall", "previous", **kw, pos_label="spam", neg_label="ham")
    d.update_many(["spam", "ham", "spam"], [0.9, 0.1, 0.2], t=[0.0, 1.0, 2.0])
    before = json.dumps(d.to_state())
    cols = {"y_true": ["spam", "ham", "spam", "ham", "spam"], "y_pred": [0.9, 0.4, 0.6, 0.3, 0.7],
            "w": [1.0] * 5}
    name, i, value = bad
    cols[name][i] = value
    with pytest.raises(ValidationError, match=what) as e:
        d.update_many(cols["y_true"], cols["y_pred"], cols["w"], t=[3.0, 4.0, 5.0, 6.0, 7.0])
    assert e.value.index == index
    assert json.dumps(d.to_state()) == before
    cpd = ChangePointDetector("page_hinkley", pos_label="spam", neg_label="ham")
    with pytest.raises(ValidationError) as e:
        cpd.update_many(cols["y_true"], cols["y_pred"], cols["w"])
    assert e.value.index == index and cpd.n == 0


def test_size_and_its_alias_window():
    a = PrecisionRecallDrift("recall", "previous", size=10)
    b = PrecisionRecallDrift("recall", "previous", window=10)
    c = PrecisionRecallDrift("recall", "previous", 10)
    assert a._params() == b._params() == c._params() and a._params()["size"] == 10
    assert a.size == a.window == 10
    with pytest.raises(ValueError, match="window is an alias of size; give one of them"):
        PrecisionRecallDrift("recall", size=10, window=10)
    with pytest.raises(ValueError, match="^window = 0: must be an integer >= 1"):
        PrecisionRecallDrift("recall", window=0)
    with pytest.raises(ValueError, match="^size = 2.5: must be an integer >= 1"):
        PrecisionRecallDrift("recall", size=2.5)
    with pytest.raises(ValueError, match=r"^alpha = 1: must be a number in \(0, 1\)"):
        PrecisionRecallDrift("recall", size=5, alpha=1)
    with pytest.raises(ValueError, match="^period = -1: must be a number > 0"):
        PrecisionRecallDrift("recall", period=-1)
    with pytest.raises(ValueError, match="^lateness = -1: must be a number >= 0"):
        PrecisionRecallDrift("recall", period=10, lateness=-1)
    # drift tables: window stays the public key, size is accepted too
    assert make_drift({"window": 7}, name="recall").size == 7
    assert make_drift({"size": 7}, name="precision")._params() == \
        PrecisionRecallDrift("precision", size=7)._params()
    with pytest.raises(ValueError, match="^monitor.drift.recall: give size or its alias window, not both"):
        make_drift({"window": 7, "size": 7}, name="recall")
    with pytest.raises(ValueError, match="^monitor.drift.recall.size = 0: must be an integer >= 1"):
        make_drift({"size": 0}, name="recall")
    with pytest.raises(ValueError, match="^monitor.drift.recall.period = 0: must be a number > 0"):
        make_drift({"period": 0}, name="recall")


def test_get_is_the_current_windows_proportion_and_changes_are_counted():
    d = PrecisionRecallDrift("precision", 0.5, size=4)
    assert math.isnan(d.get())  # no predicted positives: undefined
    d.update_many([1, 0, 1, 0, 1], [0.9, 0.8, 0.2, 0.1, 0.7])
    # last 4 events: predicted positives (0.8, neg), (0.7, pos): precision 1/2
    assert d.get() == 0.5 and isinstance(d.get(), float)
    cpd = ChangePointDetector("page_hinkley", detector_params={"threshold": 5, "min_instances": 10})
    assert cpd.get() == 0
    cpd.update_many([1] * 400, [0.9] * 200 + [0.1] * 200)
    assert cpd.get() == len(cpd.changes) >= 1


# old states as the code before issue 10 wrote them (params with "window", windows and
# counts carrying the custom labels, probability dicts as scores)
OLD_COUNT_STATE = '{"type": "PrecisionRecallDrift", "version": 1, "params": {"metric": "recall", "reference": "previous", "window": 3, "period": null, "warmup": 0, "alpha": 0.01, "threshold": 0.5, "lateness": 0.0, "pos_label": "spam", "neg_label": "ham", "ci": "newcombe", "min_count": 30}, "data": {"cur": {"type": "Sliding", "version": 1, "params": {"size": 3, "period": null, "lateness": 0.0}, "data": {"metric": {"type": "DriftCounts", "version": 2, "params": {"threshold": 0.5, "pos_label": "spam", "neg_label": "ham"}, "data": {"w": [1.0, 0.0, 1.0, 3.0], "w2": [1.0, 0.0, 1.0, 9.0], "n": [1, 0, 1, 1]}}, "events": [["spam", {"$d": [["spam", 0.8], ["ham", 0.19999999999999996]]}, 3.0], ["ham", {"$d": [["spam", 0.4], ["ham", 0.6]]}, 1.0], ["spam", {"$d": [["spam", 0.3], ["ham", 0.7]]}, 1.0]], "newest": null, "late": 0, "chunks": [[3, true]]}}, "both": {"type": "Sliding", "version": 1, "params": {"size": 6, "period": null, "lateness": 0.0}, "data": {"metric": {"type": "DriftCounts", "version": 2, "params": {"threshold": 0.5, "pos_label": "spam", "neg_label": "ham"}, "data": {"w": [2.0, 0.0, 1.5, 4.0], "w2": [2.0, 0.0, 1.25, 10.0], "n": [2, 0, 2, 2]}}, "events": [["spam", 0.2, 0.5], ["spam", 0.6, 1.0], ["ham", 0.1, 1.0], ["spam", {"$d": [["spam", 0.8], ["ham", 0.19999999999999996]]}, 3.0], ["ham", {"$d": [["spam", 0.4], ["ham", 0.6]]}, 1.0], ["spam", {"$d": [["spam", 0.3], ["ham", 0.7]]}, 1.0]], "newest": null, "late": 0, "chunks": [[3, false], [3, true]]}}, "baseline": null, "n": 8, "late": 0, "t0": null, "newest": null}}'
OLD_TIME_STATE = '{"type": "PrecisionRecallDrift", "version": 1, "params": {"metric": "precision", "reference": "baseline", "window": null, "period": 4.0, "warmup": 1.0, "alpha": 0.01, "threshold": 0.5, "lateness": 1.0, "pos_label": "spam", "neg_label": "ham", "ci": "newcombe", "min_count": 30}, "data": {"cur": {"type": "Sliding", "version": 1, "params": {"size": null, "period": 4.0, "lateness": 1.0}, "data": {"metric": {"type": "DriftCounts", "version": 2, "params": {"threshold": 0.5, "pos_label": "spam", "neg_label": "ham"}, "data": {"w": [1.0, 0.0, 1.0, 3.0], "w2": [1.0, 0.0, 1.0, 9.0], "n": [1, 0, 1, 1]}}, "events": [[5.5, "ham", 0.4, 1.0], [6.0, "spam", 0.8, 3.0], [9.0, "spam", 0.3, 1.0]], "newest": 9.0, "late": 0, "chunks": null}}, "both": null, "baseline": {"type": "DriftCounts", "version": 2, "params": {"threshold": 0.5, "pos_label": "spam", "neg_label": "ham"}, "data": {"w": [1.0, 2.0, 0.5, 1.0], "w2": [1.0, 4.0, 0.25, 1.0], "n": [1, 1, 1, 1]}}, "n": 8, "late": 0, "t0": 0.0, "newest": 9.0}}'
OLD_DEFAULT_STATE = '{"type": "PrecisionRecallDrift", "version": 1, "params": {"metric": "recall", "reference": "baseline", "window": 3, "period": null, "warmup": 0, "alpha": 0.01, "threshold": 0.5, "lateness": 0.0, "pos_label": true, "neg_label": null, "ci": "newcombe", "min_count": 30}, "data": {"cur": {"type": "Sliding", "version": 1, "params": {"size": 3, "period": null, "lateness": 0.0}, "data": {"metric": {"type": "DriftCounts", "version": 2, "params": {"threshold": 0.5, "pos_label": true, "neg_label": null}, "data": {"w": [2.0, 0.0, 0.0, 3.0], "w2": [2.0, 0.0, 0.0, 9.0], "n": [2, 0, 0, 1]}}, "events": [[0, 0.1, 1.0], [1, 0.8, 3.0], [0, 0.4, 1.0]], "newest": null, "late": 0, "chunks": [[3, false]]}}, "both": null, "baseline": {"type": "DriftCounts", "version": 2, "params": {"threshold": 0.5, "pos_label": true, "neg_label": null}, "data": {"w": [0.0, 2.0, 0.5, 1.0], "w2": [0.0, 4.0, 0.25, 1.0], "n": [0, 1, 1, 1]}}, "n": 7, "late": 0, "t0": null, "newest": null}}'
OLD_EVENTS = (["spam", "ham", "spam", "spam", "ham", "spam", "ham", "spam"],
              [0.9, 0.7, 0.2, 0.6, 0.1, 0.8, 0.4, 0.3],
              [1.0, 2.0, 0.5, 1.0, 1.0, 3.0, 1.0, 1.0],
              [0.0, 1.0, 2.5, 2.0, 4.0, 6.0, 5.5, 9.0])


@pytest.mark.parametrize("text, kw", [
    (OLD_COUNT_STATE, {"metric": "recall", "reference": "previous", "size": 3,
                       "pos_label": "spam", "neg_label": "ham"}),
    (OLD_TIME_STATE, {"metric": "precision", "reference": "baseline", "period": 4.0,
                      "lateness": 1.0, "warmup": 1.0, "pos_label": "spam", "neg_label": "ham"}),
    (OLD_DEFAULT_STATE, {"metric": "recall", "reference": "baseline", "size": 3}),
])
def test_old_states_load_and_continue_like_a_fresh_replay(text, kw):
    state = json.loads(text)
    assert state["version"] == 1 and "window" in state["params"]
    old = from_state(state)
    ys, ss, ws, ts = OLD_EVENTS
    custom = "pos_label" in kw
    labels = ys if custom else [int(v == "spam") for v in ys]
    n = state["data"]["n"]
    fresh = PrecisionRecallDrift(**kw)
    timed = "period" in kw
    fresh.update_many(labels[:n], ss[:n], ws[:n], t=ts[:n] if timed else None)
    old._check()
    assert_same_drift(old, fresh)
    assert old._params() == fresh._params()
    more = [(labels[i % 8], ss[i % 8], ws[i % 8], 10.0 + i) for i in range(12)]
    for y, s, w, t in more:
        old.update(y, s, w=w, t=t)
        fresh.update(y, s, w=w, t=t)
        assert_same_drift(old, fresh)
    again = from_state(json.loads(json.dumps(old.to_state())))
    assert again.to_state()["params"]["size"] == kw.get("size")
    assert_same_drift(again, fresh)


# ---------------------------------------------------------------------------- merge


@pytest.mark.parametrize("reference", ["baseline", "previous", 0.7])
def test_merge_of_count_tests_is_as_if_the_events_had_been_sent_here(reference):
    y, s, w = make_stream(11, 900, weights=True)
    a = PrecisionRecallDrift("recall", reference, size=100, warmup=20)
    b = a.clone()
    whole = a.clone()
    a.update_many(y[:600], s[:600], w[:600])
    b.update_many(y[600:], s[600:], w[600:])
    whole.update_many(y, s, w)
    a.merge(b)
    a._check()
    assert_same_drift(a, whole)
    assert_matches_brute_force(a, y, s, w, None, "recall", reference, size=100, warmup=20)


def test_merge_refuses_what_it_cannot_do():
    a = PrecisionRecallDrift("recall", "baseline", size=100)
    b = PrecisionRecallDrift("recall", "baseline", size=100)
    a.update_many([1] * 50, [0.9] * 50)
    b.update_many([1] * 50, [0.9] * 50)
    before = a.to_state()
    with pytest.raises(ValueError, match="baseline of the merged stream"):
        a.merge(b)
    assert a.to_state() == before
    with pytest.raises(ValueError, match="different parameters"):
        a.merge(PrecisionRecallDrift("recall", "baseline", size=50))
    with pytest.raises(ValueError, match="cannot merge change-point detectors"):
        ChangePointDetector().merge(ChangePointDetector())
    empty = PrecisionRecallDrift("recall", "baseline", size=100)
    empty.merge(a)  # an empty test takes the other's baseline
    assert empty.to_state() == before


def test_change_point_detector_update_many_equals_loop_and_trusted_path():
    rng = np.random.default_rng(5)
    n = 1500
    y = rng.random(n) < 0.5
    hit = rng.random(n) < np.r_[np.full(700, 0.9), np.full(800, 0.4)]
    s = np.where(y == hit, 0.8, 0.2)
    w = rng.choice([0.0, 1.0, 2.0], size=n)
    t = np.arange(n) * 2.0
    made = [ChangePointDetector("page_hinkley", "error", pos_label="a", neg_label="b",
                                detector_params={"threshold": 10, "min_instances": 50})
            for _ in range(3)]
    labels = np.where(y, "a", "b").astype(object)
    loop, many, trusted = made
    for i in range(n):
        loop.update(labels[i], s[i], w=w[i], t=t[i])
    for lo in range(0, n, 400):
        sl = slice(lo, lo + 400)
        many.update_many(labels[sl], s[sl], w[sl], t=t[sl])
        trusted.update_trusted(*trusted.validate(labels[sl], s[sl], w[sl]), t[sl])
    # oracle: river's detector fed by hand with the error indicator of weighted events
    det = river_drift.PageHinkley(threshold=10, min_instances=50)
    expected = []
    for i in range(n):
        if w[i] == 0:
            continue
        det.update(int(y[i] != (s[i] >= 0.5)))
        if det.drift_detected:
            expected.append((i, t[i]))
    assert expected
    for d in made:
        assert [(c.index, c.t) for c in d.changes] == expected
        assert d.n == n and d.get() == len(expected)
