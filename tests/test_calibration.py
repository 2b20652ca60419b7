"""Calibration metrics (streameval.metrics.calibration) against scikit-learn and numpy.

Oracles: ``sklearn.calibration.calibration_curve`` for the bins and the reliability
curve, ``sklearn.metrics.brier_score_loss`` for the sum of the decomposition, direct
numpy sums per bin for ECE and each component (weights included), and
``sklearn.isotonic.IsotonicRegression`` for the isotonic map (hypothesis: ties,
weights).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.calibration import calibration_curve
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import brier_score_loss

import streameval as se
from streameval import config
from streameval.metrics.base import check_invariants
from streameval.metrics.calibration import (
    BrierDecomposition,
    BrierReliability,
    BrierResolution,
    BrierUncertainty,
    ExpectedCalibrationError,
    IsotonicCalibration,
    ReliabilityCurve,
    pav,
)
from streameval.metrics.estimated import EstimatedPrecision, EstimatedROCAUC

BINNED = (ExpectedCalibrationError, BrierDecomposition, BrierReliability, BrierResolution,
          BrierUncertainty, ReliabilityCurve)


def direct(y, p, w, bins):
    """Per-bin weight, mean score and rate with sklearn's edges, and the components."""
    y = np.asarray(y, float)
    p = np.asarray(p, float)
    w = np.ones(len(p)) if w is None else np.asarray(w, float)
    edges = np.linspace(0, 1, bins + 1)
    k = np.searchsorted(edges[1:-1], p, side="left")
    W = w.sum()
    rate = (w * y).sum() / W
    ece = rel = res = wbv = wbc = 0.0
    for b in range(bins):
        m = (k == b) & (w > 0)
        if not m.any():
            continue
        wk = w[m].sum()
        f = (w[m] * p[m]).sum() / wk
        o = (w[m] * y[m]).sum() / wk
        ece += wk / W * abs(o - f)
        rel += wk * (f - o) ** 2 / W
        res += wk * (o - rate) ** 2 / W
        wbv += (w[m] * (p[m] - f) ** 2).sum() / W
        wbc += (w[m] * (p[m] - f) * (y[m] - o)).sum() / W
    return {"ece": ece, "reliability": rel, "resolution": res,
            "uncertainty": rate * (1 - rate), "wbv": wbv, "wbc": wbc,
            "brier": float((w * (p - y) ** 2).sum() / W)}


@st.composite
def labelled(draw):
    n = draw(st.integers(1, 60))
    p = draw(st.lists(st.one_of(st.sampled_from([0.0, 0.1, 0.2, 0.5, 0.95, 1.0]),
                                st.floats(0.0, 1.0)), min_size=n, max_size=n))
    y = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    w = draw(st.one_of(st.none(), st.lists(st.one_of(st.just(0.0), st.floats(0.01, 4.0)),
                                           min_size=n, max_size=n)))
    return y, p, w


@settings(max_examples=120, deadline=None)
@given(labelled(), st.sampled_from([1, 3, 10, 15]))
def test_ece_and_brier_decomposition_equal_direct_sums(data, bins):
    y, p, w = data
    if w is not None and sum(w) == 0:
        w[0] = 1.0
    ref = direct(y, p, w, bins)
    m = BrierDecomposition(bins=bins).update_many(y, p, w)
    one = ExpectedCalibrationError(bins=bins)
    for i in range(len(p)):
        one.update(y[i], p[i], 1.0 if w is None else w[i])
    check_invariants(m)
    check_invariants(one)
    d = m.decomposition()
    for key in ("reliability", "resolution", "uncertainty", "wbv", "wbc", "brier"):
        assert d[key] == pytest.approx(ref[key], abs=1e-9), key
    assert one.get() == pytest.approx(ref["ece"], abs=1e-9)
    assert ExpectedCalibrationError(bins=bins).update_many(y, p, w).get() == \
        pytest.approx(ref["ece"], abs=1e-9)
    # the decomposition sums to the Brier score (sklearn)
    total = d["reliability"] - d["resolution"] + d["uncertainty"] + d["wbv"] - 2 * d["wbc"]
    assert total == pytest.approx(brier_score_loss(y, p, sample_weight=w), abs=1e-9)


def test_forecasts_constant_in_each_bin_give_murphys_three_terms():
    rng = np.random.default_rng(0)
    p = rng.choice([0.05, 0.25, 0.45, 0.65, 0.85], 2000)
    y = rng.random(2000) < p
    d = BrierDecomposition(bins=5).update_many(y, p).decomposition()
    assert d["wbv"] == pytest.approx(0.0, abs=1e-12)
    assert d["wbc"] == pytest.approx(0.0, abs=1e-12)
    assert d["reliability"] - d["resolution"] + d["uncertainty"] == \
        pytest.approx(brier_score_loss(y, p), abs=1e-12)
    for cls, key in ((BrierReliability, "reliability"), (BrierResolution, "resolution"),
                     (BrierUncertainty, "uncertainty")):
        assert cls(bins=5).update_many(y, p).get() == pytest.approx(d[key], abs=1e-15)


@pytest.mark.parametrize("bins", [2, 5, 10])
def test_reliability_curve_and_ece_bins_are_sklearns(bins):
    rng = np.random.default_rng(bins)
    p = np.r_[rng.random(500), np.linspace(0, 1, 11)]  # edges included
    y = rng.random(len(p)) < p ** 1.5
    prob_true, prob_pred = calibration_curve(y, p, n_bins=bins, strategy="uniform")
    f, o, wk = ReliabilityCurve(bins=bins).update_many(y, p).get()
    np.testing.assert_allclose(f, prob_pred, atol=1e-12)
    np.testing.assert_allclose(o, prob_true, atol=1e-12)
    # ECE from sklearn's curve and the bin counts
    k = np.searchsorted(np.linspace(0, 1, bins + 1)[1:-1], p, side="left")
    counts = np.bincount(k, minlength=bins)
    counts = counts[counts > 0]
    assert wk.tolist() == counts.astype(float).tolist()
    ece = float(np.sum(counts / counts.sum() * np.abs(prob_true - prob_pred)))
    assert ExpectedCalibrationError(bins=bins).update_many(y, p).get() == \
        pytest.approx(ece, abs=1e-12)


@pytest.mark.parametrize("cls", BINNED)
def test_windows_state_and_merge(cls):
    rng = np.random.default_rng(2)
    p = np.round(rng.random(200), 2)
    y = rng.random(200) < p
    win = se.Sliding(cls(bins=7), size=40)
    for i in range(200):
        win.update(bool(y[i]), float(p[i]))
    ref = cls(bins=7).update_many(y[-40:], p[-40:])
    got, want = win.get(), ref.get()
    if isinstance(want, tuple):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, atol=1e-9)
    else:
        assert got == pytest.approx(want, abs=1e-9)
    copy = se.from_state(json.loads(json.dumps(win.to_state())))
    assert str(copy.get()) == str(win.get())
    a = cls(bins=7).update_many(y[:100], p[:100])
    b = cls(bins=7).update_many(y[100:], p[100:])
    whole = cls(bins=7).update_many(y, p)
    a.merge(b)
    if not isinstance(whole.get(), tuple):
        assert a.get() == pytest.approx(whole.get(), abs=1e-12)
        a.subtract(b)
        assert a.get() == pytest.approx(cls(bins=7).update_many(y[:100], p[:100]).get(),
                                        abs=1e-12)
    check_invariants(a)


def test_bad_input_refused():
    m = ExpectedCalibrationError().update_many([1, 0], [0.9, 0.1])
    before = m.to_state()
    with pytest.raises(ValueError, match=r"y_pred\[1\] = 1.2"):
        m.update_many([1, 1], [0.5, 1.2])
    with pytest.raises(ValueError, match=r"y_true\[0\] = 2"):
        m.update_many([2], [0.5])
    with pytest.raises(ValueError, match="no such event"):
        m.revert_many([1, 1], [0.55, 0.56])
    assert m.to_state() == before
    with pytest.raises(ValueError, match="strategy"):
        ExpectedCalibrationError(strategy="quantile")
    with pytest.raises(ValueError, match="bins"):
        ExpectedCalibrationError(bins=0)
    assert math.isnan(ExpectedCalibrationError().get())


def test_config_kinds():
    for kind, cls in (("ece", ExpectedCalibrationError), ("brier_reliability", BrierReliability),
                      ("brier_resolution", BrierResolution),
                      ("brier_uncertainty", BrierUncertainty)):
        assert isinstance(config.make_metric({"metric": kind, "bins": 5}, name=kind), cls)


# ------------------------------------------------------------------ isotonic


@settings(max_examples=150, deadline=None)
@given(labelled())
def test_isotonic_equals_sklearn(data):
    y, s, w = data
    if w is not None and sum(w) == 0:
        w[0] = 1.0
    s = [10 * v - 3 for v in s]  # any finite scores, not only probabilities
    cal = IsotonicCalibration().fit(y, s, w)
    ref = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(
        np.asarray(s), np.asarray(y, float), sample_weight=w)
    probe = np.r_[np.asarray(s), np.linspace(-5, 10, 31)]
    np.testing.assert_allclose(cal.transform(probe), ref.predict(probe), atol=1e-12)


def test_pav_is_the_weighted_least_squares_monotone_fit():
    y = np.array([0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    w = np.array([1.0, 3.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0])
    fit = pav(y, w)
    assert (np.diff(fit) >= 0).all()
    # [1 (w3), 0, 0] pool to 3/5
    assert fit.tolist()[:4] == [0.0, 0.6, 0.6, 0.6]


def test_isotonic_state_and_use_in_an_estimate():
    rng = np.random.default_rng(4)
    s = rng.random(2000)
    y = rng.random(2000) < s ** 2  # scores overconfident: true rate s^2
    cal = IsotonicCalibration().fit(y, s)
    assert IsotonicCalibration.from_state(json.loads(json.dumps(cal.to_state()))) == cal
    m = EstimatedPrecision(calibration=cal).update_many(None, s)
    raw = EstimatedPrecision().update_many(None, s)
    realized = y[s >= 0.5].mean()
    assert abs(m.get() - realized) < abs(raw.get() - realized)
    copy = se.from_state(json.loads(json.dumps(m.to_state())))
    assert copy.get() == m.get() and copy.calibration == cal
    win = se.Sliding(EstimatedROCAUC(calibration=cal), size=100).update_many(None, s)
    wcopy = se.from_state(json.loads(json.dumps(win.to_state())))
    assert wcopy.get() == win.get()
    with pytest.raises(ValueError, match="not fitted"):
        IsotonicCalibration().transform([0.5])
    with pytest.raises(ValueError, match="weight > 0"):
        IsotonicCalibration().fit([1], [0.5], [0.0])
