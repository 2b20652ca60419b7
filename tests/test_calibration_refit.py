"""The calibration refit schedule (CalibrationRefit, ``[monitor.calibration]``).

Oracles: ``sklearn.isotonic.IsotonicRegression(out_of_bounds="clip")`` fitted afresh on
the labels of each refit's range (the last ``window`` labels at the ``k * every``-th
label); estimates recomputed by brute force (numpy sums over the predictions with the
map that applied to each); the same stream in other batchings, and resumed from JSON
and binary states, for determinism.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.isotonic import IsotonicRegression

import streameval as se
from streameval.metrics.base import check_invariants
from streameval.metrics.calibration import (
    CalibrationField,
    CalibrationRefit,
    IsotonicCalibration,
    recalibrate,
)
from streameval.metrics.estimated import EstimatedPrecision, EstimatedRecall


def sk_map(y, s, w=None):
    return IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(
        s, y, sample_weight=w)


def cuts(rng, n, most):
    """Random batch boundaries over ``n`` events (batches of 1 to ``most``)."""
    out, i = [], 0
    while i < n:
        j = min(n, i + int(rng.integers(1, most + 1)))
        out.append((i, j))
        i = j
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.one_of(st.none(), st.integers(1, 60)), st.integers(0, 2**32 - 1),
       st.booleans(), st.integers(1, 25))
def test_refits_at_label_counts_equal_sklearn_on_the_window(every, window, seed, weighted,
                                                           most):
    rng = np.random.default_rng(seed)
    n = 150
    s = np.round(rng.random(n), int(rng.integers(1, 4)))  # (ties)
    y = rng.random(n) < s
    w = rng.integers(0, 4, n).astype(float) if weighted else None
    r = CalibrationRefit(every=every, window=window)
    for a, b in cuts(rng, n, most):
        r.update_many(y[a:b], s[a:b], None if w is None else w[a:b])
        check_invariants(r)
    # one refit at every k * every labels (unless its window held no weight)
    expected_points = [k * every for k in range(1, n // every + 1)]
    fit_to = [v["fit_to"] for v in r.versions]
    assert set(fit_to) <= set(expected_points)
    q = np.linspace(-0.1, 1.1, 57)
    for k in expected_points:
        lo = 0 if window is None else max(0, k - window)
        ww = np.ones(k - lo) if w is None else w[lo:k]
        keep = ww > 0
        if not keep.any():
            assert k not in fit_to
            continue
        v = r.versions[fit_to.index(k)]
        assert (v["fit_from"], v["fit_to"]) == (lo, k)
    # the newest map (each one is checked at its point below)
    if r.versions:
        v = r.versions[-1]
        lo, k = v["fit_from"], v["fit_to"]
        ww = np.ones(k - lo) if w is None else w[lo:k]
        keep = ww > 0
        ref = sk_map(y[lo:k][keep].astype(float), s[lo:k][keep], ww[keep])
        np.testing.assert_allclose(r.fitted.transform(q), ref.predict(q), rtol=0, atol=1e-12)


def test_each_refit_map_equals_sklearn_at_its_point():
    rng = np.random.default_rng(7)
    n, every, window = 5000, 700, 1600
    s = rng.random(n)
    y = rng.random(n) < s ** 2
    r = CalibrationRefit(every=every, window=window)
    q = rng.random(300)
    k = 0
    for a, b in cuts(rng, n, 333):
        r.update_many(y[a:b], s[a:b])
        if len(r.versions) > k:
            assert len(r.versions) == k + 1  # (batches shorter than every)
            k += 1
            v = r.versions[-1]
            assert v["fit_to"] == k * every and v["fit_from"] == max(0, k * every - window)
            ref = sk_map(y[v["fit_from"]:v["fit_to"]].astype(float),
                         s[v["fit_from"]:v["fit_to"]])
            np.testing.assert_allclose(r.fitted.transform(q), ref.predict(q), rtol=0,
                                       atol=1e-12)
    assert k == n // every


def test_state_round_trip_continues_to_the_same_refits():
    rng = np.random.default_rng(11)
    s = rng.random(900)
    y = rng.random(900) < s
    a = CalibrationRefit(every=100, window=250)
    a.update_many(y[:430], s[:430])
    b = se.from_state(json.loads(json.dumps(a.to_state())))
    assert b.to_state() == a.to_state()
    a.update_many(y[430:], s[430:])
    b.update_many(y[430:], s[430:])
    assert a.to_state() == b.to_state()
    assert a.versions[-1] == {"version": 9, "fit_from": 650, "fit_to": 900, "points": 250}
    # every label kept (window None): the fit spans all of them
    c = CalibrationRefit(every=300, window=None).update_many(y, s)
    assert [(v["fit_from"], v["fit_to"]) for v in c.versions] == [(0, 300), (0, 600), (0, 900)]
    d = se.from_state(json.loads(json.dumps(c.to_state())))
    assert d.to_state() == c.to_state()


def test_bad_parameters_and_states_refused():
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="every"):
            CalibrationRefit(every=bad)
    with pytest.raises(ValueError, match="window"):
        CalibrationRefit(window=0)
    with pytest.raises(ValueError, match="output"):
        CalibrationField("points")
    st_ = CalibrationRefit(every=2, window=3).update_many([0, 1, 1], [0.2, 0.4, 0.9]).to_state()
    st_["data"]["applied"] = 5
    with pytest.raises(ValueError, match="CalibrationRefit"):
        se.from_state(st_)
    with pytest.raises(NotImplementedError):
        CalibrationRefit().revert(1, 0.5)
    with pytest.raises(ValueError, match="y_true"):
        CalibrationRefit().update_many([0, 7], [0.1, 0.2])


def test_recalibrate_rebuilds_windows_and_switches_cumulative_metrics():
    rng = np.random.default_rng(5)
    s = rng.random(400)
    cal = IsotonicCalibration().fit(rng.random(200) < s[:200] ** 2, s[:200])
    cum = EstimatedRecall()
    win = se.Sliding(EstimatedPrecision(), size=150)
    cum.update_many(None, s[:250])
    win.update_many(None, s[:250])
    assert recalibrate(cum, cal) and recalibrate(win, cal)
    cum.update_many(None, s[250:])
    win.update_many(None, s[250:])
    # the window: its last 150 predictions, all with the new map
    p = cal.transform(s[-150:])
    pp = s[-150:] >= 0.5
    assert win.get() == pytest.approx(p[pp].sum() / pp.sum(), abs=1e-15)
    assert win.get() == EstimatedPrecision(calibration=cal).update_many(None, s[-150:]).get()
    # the cumulative one: the first 250 as they were counted, the rest with the map
    q = np.r_[s[:250], cal.transform(s[250:])]
    pos = s >= 0.5
    assert cum.get() == pytest.approx(q[pos].sum() / q.sum(), abs=1e-15)
    # reverting the window's events goes on exactly (each with the map it was counted by)
    win.update_many(None, rng.random(300))
    check_invariants(win.metric)
    # not estimates: left alone
    assert not recalibrate(se.Recall(), cal)
    assert not recalibrate(se.Sliding(se.ROCAUC(), size=5), cal)


def _stream(seed=3, n=6000, delay=300, run=400):
    """A fixed order of prediction runs and label runs: predictions in runs of ``run``,
    each label ``delay`` predictions after its prediction (scores not calibrated: the
    positive rate at score s is s^2)."""
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    y = rng.random(n) < s ** 2
    steps, i, lab = [], 0, 0
    while i < n or lab < n:
        if i < n:
            steps.append(("p", i, min(n, i + run)))
            i = min(n, i + run)
        upto = n if i >= n else max(0, i - delay)
        if upto > lab:
            steps.append(("l", lab, upto))
            lab = upto
    return s, y, steps


CFG = {"every": 500, "calibration": {"refit_every": 1000, "window": 1500},
       "metrics": {"er": "estimated_recall",
                   "er@800": {"metric": "estimated_recall", "size": 800},
                   "ep@800": {"metric": "estimated_precision", "size": 800},
                   "recall": "recall"}}


def _run(s, y, steps, most, rng, restore=None, binary=False):
    m = se.Monitor.from_config(CFG)
    rows = []
    m.on_metrics = [rows.append]
    for k, (kind, a, b) in enumerate(steps):
        for c, d in cuts(rng, b - a, most):
            if kind == "p":
                m.predict_many(s[a + c:a + d])
            else:
                m.update_many(y[a + c:a + d], s[a + c:a + d], predicted=True)
        if restore is not None and k == restore:
            sinks = m.on_metrics
            if binary:
                m = se.Monitor.from_array_state(m.to_array_state())
            else:
                m = se.Monitor.from_state(json.loads(json.dumps(m.to_state())))
            m.on_metrics = sinks
    m.flush()
    return rows, m


def test_monitor_refits_are_the_same_whatever_the_batching_and_restarts():
    s, y, steps = _stream()
    base, m = _run(s, y, steps, 10**9, np.random.default_rng(0))
    # (the 6th refit, at the last label, takes effect after the last row)
    assert max(r["values"]["calibration.version"] for r in base) == 5
    for seed, most, restore, binary in ((1, 37, None, False), (2, 1000, 5, False),
                                        (3, 250, 11, True)):
        rows, _ = _run(s, y, steps, most, np.random.default_rng(seed), restore, binary)
        assert rows == base


def test_monitor_estimates_after_a_refit_equal_brute_force():
    s, y, steps = _stream()
    rows, m = _run(s, y, steps, 10**9, np.random.default_rng(0))
    # a row reads the values before the refit made since the last row takes effect: its
    # version and fit range are those of the map its estimates used; a window re-reads
    # the predictions it holds with each new map, so all of them used that map
    checked = 0
    for row in rows:
        v = row["values"]
        ver = int(v["calibration.version"])
        preds = row["coverage"]["predictions"]
        if not ver:
            assert v["calibration.fit_from"] is None
            continue
        f, t = int(v["calibration.fit_from"]), int(v["calibration.fit_to"])
        assert t == ver * 1000 and f == max(0, t - 1500)
        assert t <= row["n"]  # (fitted on labels already joined)
        p = sk_map(y[f:t].astype(float), s[f:t]).predict(s[max(0, preds - 800):preds])
        pos = s[max(0, preds - 800):preds] >= 0.5
        assert v["er@800"] == pytest.approx(p[pos].sum() / p.sum(), abs=1e-12)
        assert v["ep@800"] == pytest.approx(p[pos].mean(), abs=1e-12)
        checked += 1
    assert checked > 10
    assert m.segment_metrics()["calibration.version"].get() == 6.0


def test_config_errors_name_the_key():
    for bad, match in (({"refit_every": 0}, "refit_every"), ({"window": "x"}, "window"),
                       ({"every": 5}, "unknown key 'every'"), (5, "must be a table")):
        with pytest.raises(ValueError, match=match):
            se.Monitor.from_config({"calibration": bad})
    m = se.Monitor.from_config({"calibration": {}})
    refit = m.metrics["calibration.version"]
    assert (refit.every, refit.window) == (10_000, 50_000)


def test_the_default_label_free_monitor_checks_estimates_with_the_refit_map():
    s, y, steps = _stream(seed=9, n=4000)
    m = se.Monitor.from_config({"every": 500, "size": 800,
                                "calibration": {"refit_every": 1000, "window": 1500}},
                               label_free=True)
    rows = []
    m.on_metrics = [rows.append]
    for kind, a, b in steps:
        if kind == "p":
            m.predict_many(s[a:b])
        else:
            m.update_many(y[a:b], s[a:b], predicted=True)
    checked = 0
    for row in rows:
        v = row["values"]
        ver, n = int(v["calibration.version"]), row["n"]
        if not ver or n < 800:
            continue
        f, t = int(v["calibration.fit_from"]), int(v["calibration.fit_to"])
        p = sk_map(y[f:t].astype(float), s[f:t]).predict(s[n - 800:n])
        pos, yy = s[n - 800:n] >= 0.5, y[n - 800:n]
        est = p[pos].sum() / p.sum()
        real = (yy & pos).sum() / yy.sum()
        assert v["estimation_error.recall@800"] == pytest.approx(est - real, abs=1e-12)
        checked += 1
    assert checked >= 3


def test_recalibrate_a_time_window():
    rng = np.random.default_rng(2)
    s, t = rng.random(300), np.arange(300.0)
    cal = IsotonicCalibration().fit(rng.random(300) < s ** 2, s)
    w = se.Sliding(EstimatedRecall(), period=100.0, lateness=5.0)
    w.update_many(None, s[:200], t=t[:200])
    assert recalibrate(w, cal)
    w.update_many(None, s[200:], t=t[200:])
    assert w.get() == EstimatedRecall(calibration=cal).update_many(None, s[200:]).get()
    w.update_many(None, s[:50], t=t[:50] + 400)  # (every event before expires)
    assert w.get() == EstimatedRecall(calibration=cal).update_many(None, s[:50]).get()
