"""Label-free estimates (streameval.metrics.estimated) against brute force.

Oracles: direct sums over the events for the expected confusion matrix; scikit-learn's
roc_auc_score of the pseudo-sample (every event twice: label 1 with weight w p, label 0
with weight w (1 - p)) for the expected AUC; the exact Poisson-binomial distribution,
every label outcome enumerated, for the variances; fresh metrics over a window's events
for windows; JSON round trips for states.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.stats import binomtest
from sklearn.metrics import roc_auc_score

import streameval as se
from streameval import config
from streameval.metrics.base import check_invariants
from streameval.metrics.estimated import (
    EstimatedAccuracy,
    EstimatedConfusion,
    EstimatedF1,
    EstimatedPrecision,
    EstimatedRecall,
    EstimatedROCAUC,
    PredictedPositiveRate,
)

CONFUSION = (EstimatedConfusion, EstimatedAccuracy, EstimatedPrecision, EstimatedRecall,
             EstimatedF1, PredictedPositiveRate)
ALL = CONFUSION + (EstimatedROCAUC,)


def cells(s, w, threshold, p=None):
    """Direct sums: expected cells and their Poisson-binomial variances."""
    s = np.asarray(s, float)
    p = s if p is None else np.asarray(p, float)
    w = np.ones(len(s)) if w is None else np.asarray(w, float)
    pp = s >= threshold
    tp = float(np.sum(w[pp] * p[pp]))
    fp = float(np.sum(w[pp] * (1 - p[pp])))
    fn = float(np.sum(w[~pp] * p[~pp]))
    tn = float(np.sum(w[~pp] * (1 - p[~pp])))
    vpp = float(np.sum(w[pp] * p[pp] * (1 - p[pp])))
    vpn = float(np.sum(w[~pp] * p[~pp] * (1 - p[~pp])))
    return tp, fp, fn, tn, vpp, vpn


def brute(cls, s, w, threshold):
    """(value, variance) of each estimate from direct sums."""
    tp, fp, fn, tn, vpp, vpn = cells(s, w, threshold)
    wpp, total = tp + fp, tp + fp + fn + tn
    nan = (math.nan, math.nan)
    if cls in (EstimatedAccuracy, EstimatedConfusion):
        return ((tp + tn) / total, (vpp + vpn) / total ** 2) if total > 0 else nan
    if cls is EstimatedPrecision:
        return (tp / wpp, vpp / wpp ** 2) if wpp > 0 else nan
    if cls is EstimatedRecall:
        d = tp + fn
        return (tp / d, ((fn / d) ** 2 * vpp + (tp / d) ** 2 * vpn) / d / d) if d > 0 else nan
    if cls is EstimatedF1:
        d = tp + wpp + fn
        return ((2 * tp / d, (4 * ((wpp + fn) / d) ** 2 * vpp + 4 * (tp / d) ** 2 * vpn) / d / d)
                if d > 0 else nan)
    if cls is PredictedPositiveRate:
        return (wpp / total, math.nan) if total > 0 else nan
    raise AssertionError(cls)


def pseudo_auc(s, w):
    s = np.asarray(s, float)
    w = np.ones(len(s)) if w is None else np.asarray(w, float)
    y = np.r_[np.ones(len(s)), np.zeros(len(s))]
    sw = np.r_[w * s, w * (1 - s)]
    keep = sw > 0
    if len(set(y[keep])) < 2:
        return math.nan
    return roc_auc_score(y[keep], np.r_[s, s][keep], sample_weight=sw[keep])


def close(a, b, tol=1e-12):
    if math.isnan(b):
        return math.isnan(a)
    return abs(a - b) <= tol * max(1.0, abs(b))


# scores drawn from few values (ties) or many; weights integral or not
# (no subnormal scores: a probability below 2.2e-308 makes the pair weight w p (1 - p')
# underflow to 0 in the weighted sums, as a subnormal weight does for ROCAUC)
scores_st = st.lists(st.one_of(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0]),
                               st.floats(0.0, 1.0, allow_subnormal=False)),
                     min_size=0, max_size=40)


@st.composite
def batches(draw):
    s = draw(scores_st)
    kind = draw(st.sampled_from(["none", "int", "float"]))
    if kind == "none":
        w = None
    elif kind == "int":
        w = draw(st.lists(st.integers(0, 4).map(float), min_size=len(s), max_size=len(s)))
    else:
        w = draw(st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 5.0)),
                          min_size=len(s), max_size=len(s)))
    return s, w


@settings(max_examples=150, deadline=None)
@given(batches(), st.sampled_from([0.0, 0.3, 0.5, 0.75, 1.0]))
def test_expected_confusion_and_estimates_equal_direct_sums(batch, threshold):
    s, w = batch
    tp, fp, fn, tn, vpp, vpn = cells(s, w, threshold)
    for cls in CONFUSION:
        bulk = cls(threshold=threshold).update_many(None, s, w)
        one = cls(threshold=threshold)
        for i, v in enumerate(s):
            one.update(None, v, 1.0 if w is None else w[i])
        for m in (bulk, one):
            check_invariants(m)
            exp = m.expected()
            assert all(close(a, b, 1e-9) for a, b in zip(
                (exp["tp"], exp["fp"], exp["fn"], exp["tn"]), (tp, fp, fn, tn)))
            var = m.variances()
            assert close(var["tp"], vpp, 1e-9) and close(var["fn"], vpn, 1e-9)
            value, variance = brute(cls, s, w, threshold)
            assert close(m.get(), value, 1e-9), (cls, m.get(), value)
            if cls is not PredictedPositiveRate and not math.isnan(value):
                lo, hi = m.interval(0.95)
                z = 1.959963984540054
                half = z * math.sqrt(max(variance, 0.0))
                assert close(lo, max(0.0, value - half), 1e-7)
                assert close(hi, min(1.0, value + half), 1e-7)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_expected_auc_is_sklearn_on_the_pseudo_sample(batch):
    s, w = batch
    bulk = EstimatedROCAUC().update_many(None, s, w)
    one = EstimatedROCAUC()
    for i, v in enumerate(s):
        one.update(None, v, 1.0 if w is None else w[i])
    expected = pseudo_auc(s, w)
    for m in (bulk, one):
        check_invariants(m)
        assert close(m.get(), expected, 1e-9), (m.get(), expected)


def test_expected_auc_worked_example():
    # scores .9 .6 .2 .1 as probabilities: U by hand over the pseudo-sample
    s = np.array([0.9, 0.6, 0.2, 0.1])
    wp, wn = s, 1 - s
    u = sum(wp[i] * wn[j] * (1.0 if s[i] > s[j] else 0.5 if i == j else 0.0)
            for i in range(4) for j in range(4))
    m = EstimatedROCAUC().update_many(None, s)
    assert m.get() == pytest.approx(u / (wp.sum() * wn.sum()), abs=1e-15)
    assert m.get() == pytest.approx(0.8535353535353535, abs=1e-15)


def exact_distribution(s, w, threshold):
    """Every label outcome of independent Bernoulli(p = s) labels, with its
    probability: arrays of TP, FN, FP, TN (weights as frequency weights: an event of
    integer weight k is k independent events)."""
    s_rep = np.repeat(np.asarray(s, float), np.asarray(w, int))
    n = len(s_rep)
    pp = s_rep >= threshold
    out = []
    for ys in itertools.product((0, 1), repeat=n):
        y = np.array(ys, bool)
        prob = float(np.prod(np.where(y, s_rep, 1 - s_rep)))
        out.append((prob, float(np.sum(y & pp)), float(np.sum(y & ~pp)),
                    float(np.sum(~y & pp)), float(np.sum(~y & ~pp))))
    return np.array(out)


@pytest.mark.parametrize("s, w", [
    ([0.9, 0.6, 0.2, 0.1, 0.55, 0.45, 0.8], [1, 1, 1, 1, 1, 1, 1]),
    ([0.3, 0.7, 0.51, 0.05, 0.95], [2, 1, 3, 1, 2]),
    ([0.5, 0.5, 0.5, 0.6, 0.4, 0.99], [1, 2, 1, 1, 3, 1]),
])
def test_variances_against_the_exact_poisson_binomial(s, w):
    threshold = 0.5
    d = exact_distribution(s, w, threshold)
    prob, tp, fn, fp, tn = d.T
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)

    def mean(x):
        return float(np.sum(prob * x))

    def var(x):
        return float(np.sum(prob * (x - mean(x)) ** 2))

    wf = [float(v) for v in w]
    conf = EstimatedConfusion(threshold=threshold).update_many(None, s, wf)
    exp, v = conf.expected(), conf.variances()
    for cell, x in (("tp", tp), ("fn", fn), ("fp", fp), ("tn", tn)):
        assert exp[cell] == pytest.approx(mean(x), abs=1e-12)
        assert v[cell] == pytest.approx(var(x), abs=1e-12)
    total = float(sum(w))
    wpp = float(np.sum(np.asarray(w)[np.asarray(s) >= threshold]))
    # precision and accuracy: the exact mean and variance of the realized value
    prec = EstimatedPrecision(threshold=threshold).update_many(None, s, wf)
    assert prec.get() == pytest.approx(mean(tp / wpp), abs=1e-12)
    assert prec._estimate()[1] == pytest.approx(var(tp / wpp), abs=1e-12)
    acc = EstimatedAccuracy(threshold=threshold).update_many(None, s, wf)
    assert acc.get() == pytest.approx(mean((tp + tn) / total), abs=1e-12)
    assert acc._estimate()[1] == pytest.approx(var((tp + tn) / total), abs=1e-12)
    # recall and F1: the delta method is the exact variance of the first-order
    # expansion around the expected cells
    a, b = mean(tp), mean(fn)
    rec = EstimatedRecall(threshold=threshold).update_many(None, s, wf)
    lin = a / (a + b) + (b * (tp - a) - a * (fn - b)) / (a + b) ** 2
    assert rec._estimate()[1] == pytest.approx(var(lin), abs=1e-12)
    f1 = EstimatedF1(threshold=threshold).update_many(None, s, wf)
    dd = a + wpp + b
    lin = 2 * a / dd + (2 * (wpp + b) * (tp - a) - 2 * a * (fn - b)) / dd ** 2
    assert f1._estimate()[1] == pytest.approx(var(lin), abs=1e-12)
    # ... and close to the exact variance of the ratio itself (where defined)
    ok = (tp + fn) > 0
    pr = prob[ok] / prob[ok].sum()
    r = tp[ok] / (tp[ok] + fn[ok])
    exact_var = float(np.sum(pr * (r - np.sum(pr * r)) ** 2))
    assert rec._estimate()[1] == pytest.approx(exact_var, rel=0.6)


@pytest.mark.parametrize("cls", ALL)
def test_sliding_windows_equal_a_fresh_metric_over_the_window(cls):
    rng = np.random.default_rng(3)
    s = np.round(rng.random(300), 2)
    w = rng.integers(0, 3, 300).astype(float)
    size = 37
    win = se.Sliding(cls(threshold=0.4), size=size)
    for i in range(len(s)):
        win.update(None, float(s[i]), float(w[i]))
        if i % 23 == 0 or i == len(s) - 1:
            lo = max(0, i + 1 - size)
            ref = cls(threshold=0.4).update_many(None, s[lo:i + 1], w[lo:i + 1])
            assert close(win.get(), ref.get(), 1e-9)
            for a, b in zip(win.interval(), ref.interval()):
                assert close(a, b, 1e-9)
    # batches through the window: the same as per-event updates
    batched = se.Sliding(cls(threshold=0.4), size=size)
    for k in range(0, 300, 29):
        batched.update_many(None, s[k:k + 29], w[k:k + 29])
    assert close(batched.get(), win.get(), 1e-9)
    check_invariants(batched.metric)


@pytest.mark.parametrize("cls", ALL)
def test_time_windows_and_tumbling(cls):
    s = [0.9, 0.2, 0.7, 0.4, 0.8, 0.65, 0.1]
    t = [0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0]
    win = se.Sliding(cls(), period=5)
    win.update_many(None, s, t=t)
    assert close(win.get(), cls().update_many(None, s[4:]).get())
    tum = se.Tumbling(cls(), size=3)
    tum.update_many(None, s)
    assert close(tum.get(), cls().update_many(None, s[3:6]).get())


@pytest.mark.parametrize("cls", ALL)
def test_state_round_trip_merge_and_subtract(cls):
    rng = np.random.default_rng(5)
    a_s, b_s = rng.random(50), rng.random(30)
    a = cls(threshold=0.3).update_many(None, a_s)
    b = cls(threshold=0.3).update_many(None, b_s)
    copy = se.from_state(json.loads(json.dumps(a.to_state())))
    assert type(copy) is cls and copy.get() == a.get()
    both = cls(threshold=0.3).update_many(None, np.r_[a_s, b_s])
    assert close(copy.merge(b).get(), both.get(), 1e-12)
    assert close(copy.subtract(b).get(), a.get(), 1e-9)
    check_invariants(copy)
    with pytest.raises(ValueError, match="parameters"):
        a.merge(cls(threshold=0.6))
    win = se.Sliding(cls(), size=20).update_many(None, a_s) if False else None
    assert win is None


@pytest.mark.parametrize("cls", ALL)
def test_window_state_round_trip(cls):
    win = se.Sliding(cls(), size=10)
    win.update_many(None, np.linspace(0, 1, 15))
    copy = se.from_state(json.loads(json.dumps(win.to_state())))
    assert close(copy.get(), win.get())
    copy.update(None, 0.5)
    win.update(None, 0.5)
    assert close(copy.get(), win.get())


@pytest.mark.parametrize("cls", ALL)
def test_bad_input_is_refused_atomically(cls):
    m = cls().update_many(None, [0.2, 0.8])
    before = m.to_state()
    with pytest.raises(ValueError, match=r"y_pred\[2\] = 1.5"):
        m.update_many(None, [0.3, 0.4, 1.5])
    with pytest.raises(ValueError, match="nan"):
        m.update(None, math.nan)
    with pytest.raises(ValueError, match="w"):
        m.update_many(None, [0.3], [-1.0])
    assert m.to_state() == before
    with pytest.raises(ValueError, match="no such event"):
        m.revert(None, 0.33)
    with pytest.raises(ValueError, match="no such event"):
        m.revert_many(None, [0.2, 0.8, 0.9])
    assert m.to_state() == before


def test_labels_are_ignored():
    s = [0.9, 0.3, 0.6]
    for cls in ALL:
        assert close(cls().update_many([1, 0, 0], s).get(), cls().update_many(None, s).get())
        m = cls()
        m.update(True, 0.9)
        m.update(None, 0.3)
        assert m.needs_labels is False


def test_predicted_positive_rate_wilson_interval():
    m = PredictedPositiveRate(threshold=0.5).update_many(None, [0.9] * 8 + [0.1] * 2)
    assert m.get() == 0.8
    # the proportions' interval: Wilson with continuity correction (scipy's wilsoncc)
    ci = binomtest(8, 10).proportion_ci(0.95, method="wilsoncc")
    assert close(m.interval(0.95)[0], ci.low, 1e-12) and close(m.interval(0.95)[1], ci.high, 1e-12)
    assert all(math.isnan(v) for v in PredictedPositiveRate().interval())


class Halve:
    """A calibration map (p = s / 2) for the tests."""

    def transform(self, s):
        return np.asarray(s, float) / 2.0


def test_calibration_is_applied_before_the_sums_but_not_to_the_threshold():
    s = [0.9, 0.6, 0.2, 1.4]
    m = EstimatedPrecision(threshold=0.5, calibration=Halve()).update_many(None, s)
    # predicted positives 0.9, 0.6, 1.4 (raw), probabilities 0.45, 0.3, 0.7
    assert m.get() == pytest.approx((0.45 + 0.3 + 0.7) / 3, abs=1e-15)
    assert m.score_bounds is None and EstimatedPrecision().score_bounds == (0.0, 1.0)
    with pytest.raises(ValueError, match=r"y_pred\[0\] = 2.5: calibrated to 1.25"):
        m.update_many(None, [2.5])


def test_config_kinds_build_the_estimates_and_windows():
    for kind, cls in [("estimated_precision", EstimatedPrecision),
                      ("estimated_recall", EstimatedRecall), ("estimated_f1", EstimatedF1),
                      ("estimated_accuracy", EstimatedAccuracy),
                      ("estimated_roc_auc", EstimatedROCAUC),
                      ("predicted_positive_rate", PredictedPositiveRate)]:
        assert isinstance(config.make_metric(kind, name=kind, threshold=0.3), cls)
        win = config.make_metric({"metric": kind, "size": 100}, name=kind + "@100")
        assert isinstance(win, se.Sliding) and isinstance(win.metric, cls)


def test_in_a_monitor_per_segment():
    rng = np.random.default_rng(11)
    s = rng.random(400)
    seg = np.where(rng.random(400) < 0.5, "a", "b")
    y = rng.random(400) < s
    mon = se.Monitor({"estimated_recall": EstimatedRecall(),
                      "estimated_recall@50": se.Sliding(EstimatedRecall(), size=50),
                      "estimated_roc_auc": EstimatedROCAUC()},
                     group_by="segment", every=10_000)
    mon.update_many(y, s, segment=seg)
    mon.evaluate()  # (a segment's metrics count its events at its own evaluation points)
    for name in ("a", "b"):
        mine = s[seg == name]
        got = mon.segment_metrics(name)
        assert close(got["estimated_recall"].get(),
                     EstimatedRecall().update_many(None, mine).get(), 1e-12)
        assert close(got["estimated_recall@50"].get(),
                     EstimatedRecall().update_many(None, mine[-50:]).get(), 1e-9)
        assert close(got["estimated_roc_auc"].get(), pseudo_auc(mine, None), 1e-9)
    copy = se.Monitor.from_state(json.loads(json.dumps(mon.to_state())))
    assert close(copy.segment_metrics("a")["estimated_roc_auc"].get(),
                 mon.segment_metrics("a")["estimated_roc_auc"].get())
