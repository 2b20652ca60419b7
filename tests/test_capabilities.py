"""Declared capabilities (``streameval.metrics.base.Capabilities``): what windows, the
Monitor, Spark and the exposition need from a metric beyond the protocol.

* Every registered metric, window and drift detector declares what it implements:
  a declared ``swap``, ``revert_joined`` or ``revert_later`` gives the bits of the
  protocol calls it replaces, and the value of a brute-force recomputation;
  ``takes_time`` is what its ``update``/``update_trusted`` take; ``error_bound``,
  ``per_score``, ``rebuild_fraction`` and ``window_kind`` hold where declared.
* No module outside ``streameval/metrics/`` reaches a metric's private hooks by name,
  dispatches on a class-name string or reads a signature to decide on ``t``
  (an ``ast`` scan, shown to catch the patterns it forbids).
* The range composition Spark runs (``streameval.metrics.ranges``) equals
  scikit-learn on random splits of random data into score ranges (hypothesis: ties,
  zero, integer and fractional weights).

Oracles: the protocol calls a fast path replaces (``update`` then ``revert``;
``revert_trusted`` slice by slice), with states compared as JSON, bit for bit; a fresh
metric fed the events left; scikit-learn's ``roc_auc_score``,
``average_precision_score``, ``roc_curve`` and ``precision_recall_curve``; the
signatures the Monitor read before ``needs_time``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import math
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import streameval as se
from streameval import _registry
from streameval.drift import ChangePointDetector, DriftCounts, PrecisionRecallDrift
from streameval.metrics import ranges
from streameval.metrics.base import (
    NO_CAPABILITIES,
    Capabilities,
    Metric,
    capabilities,
    needs_time,
)
from streameval.sequential import SequentialDrift
from streameval.windows.common import rebuild_fraction

ROOT = pathlib.Path(se.__file__).parent
HYP = settings(max_examples=80, deadline=None)

#: every registered class (but the Monitor), with one or more instances of each case
FACTORIES = {
    "ConfusionMatrix": [se.ConfusionMatrix, lambda: se.ConfusionMatrix(multiclass=True)],
    "Accuracy": [se.Accuracy, lambda: se.Accuracy(multiclass=True)],
    "ErrorRate": [se.ErrorRate],
    "Precision": [se.Precision, lambda: se.Precision(average="macro")],
    "Recall": [se.Recall, lambda: se.Recall(average="weighted")],
    "FPR": [se.FPR], "Specificity": [se.Specificity],
    "FBeta": [lambda: se.FBeta(2.0)], "F1": [se.F1], "FAlpha": [lambda: se.FAlpha(0.3)],
    "BalancedAccuracy": [se.BalancedAccuracy], "MCC": [se.MCC],
    "ROCAUC": [se.ROCAUC, lambda: se.ROCAUC(bins=8), lambda: se.ROCAUC(average="macro"),
               lambda: se.ROCAUC(pos_label="spam", neg_label="ham")],
    "Gini": [se.Gini, lambda: se.Gini(bins=8)],
    "AveragePrecision": [se.AveragePrecision, lambda: se.AveragePrecision(bins=8),
                         lambda: se.AveragePrecision(average="micro")],
    "InterpolatedAP": [se.InterpolatedAP], "ElevenPointAP": [se.ElevenPointAP],
    "ROCCurve": [se.ROCCurve], "PRCurve": [se.PRCurve],
    "LogLoss": [se.LogLoss, lambda: se.LogLoss(multiclass=True)], "Brier": [se.Brier],
    "MAE": [se.MAE], "MSE": [se.MSE], "RMSE": [se.RMSE], "RMSLE": [se.RMSLE],
    "MAPE": [se.MAPE],
    "PrecisionAtK": [se.PrecisionAtK], "RecallAtK": [se.RecallAtK], "HitAtK": [se.HitAtK],
    "APAtK": [se.APAtK], "MAPAtK": [se.MAPAtK], "MRR": [se.MRR], "DCG": [se.DCG],
    "NDCG": [se.NDCG], "BLEU": [se.BLEU], "ROUGE": [se.ROUGE], "METEOR": [se.METEOR],
    "Sliding": [lambda: se.Sliding(se.ROCAUC(), size=50),
                lambda: se.Sliding(se.Recall(), period=60.0, lateness=5.0),
                lambda: se.Sliding(se.BLEU(), size=5)],
    "Tumbling": [lambda: se.Tumbling(se.AveragePrecision(), size=10),
                 lambda: se.Tumbling(se.MAE(), period=3600)],
    "PrecisionRecallDrift": [lambda: PrecisionRecallDrift(size=100)],
    "ChangePointDetector": [ChangePointDetector],
    "DriftCounts": [DriftCounts],
    "SequentialDrift": [SequentialDrift],
}
FACTORIES.update({  # label-free estimates (streameval.metrics.estimated)
    name: [getattr(importlib.import_module("streameval.metrics.estimated"), name)]
    for name in ("EstimatedConfusion", "EstimatedPrecision", "EstimatedRecall",
                 "EstimatedF1", "EstimatedAccuracy", "EstimatedROCAUC",
                 "PredictedPositiveRate")})
FACTORIES.update({  # calibration (streameval.metrics.calibration)
    name: [getattr(importlib.import_module("streameval.metrics.calibration"), name)]
    for name in ("ExpectedCalibrationError", "BrierDecomposition", "BrierReliability",
                 "BrierResolution", "BrierUncertainty", "ReliabilityCurve")})
FACTORIES.update({  # a calibration refit schedule and a field of it (metrics.calibration)
    "CalibrationRefit": [lambda: importlib.import_module(
        "streameval.metrics.calibration").CalibrationRefit(every=3, window=5)],
    "CalibrationField": [lambda: importlib.import_module(
        "streameval.metrics.calibration").CalibrationField("fit_to")]})
FACTORIES.update({  # score drift (streameval.metrics.scoredrift)
    name: [getattr(importlib.import_module("streameval.metrics.scoredrift"), name)]
    for name in ("ScoreDrift", "ScoreDriftDetector")})
FACTORIES["EstimateCheck"] = [  # an estimate checked against the labels (metrics.checked)
    lambda: importlib.import_module("streameval.metrics.checked").EstimateCheck(of="recall")]

INSTANCES = [(name, i, make) for name, makes in FACTORIES.items()
             for i, make in enumerate(makes)]
IDS = [f"{name}-{i}" for name, i, _ in INSTANCES]


def _takes_t(method):
    """What the Monitor and Spark replay read before ``needs_time``: the signature."""
    return "t" in inspect.signature(method).parameters


def test_the_factories_cover_every_registered_class():
    registered = {e.name for e in _registry.ENTRIES if e.state} - {"Monitor"}
    assert set(FACTORIES) == registered
    for name, makes in FACTORIES.items():
        cls = _registry.state_class(name)
        for make in makes:
            assert isinstance(make(), cls), name


# ----------------------------------------------------------------- event times


@pytest.mark.parametrize("name, i, make", INSTANCES, ids=IDS)
def test_needs_time_is_what_update_and_update_trusted_take(name, i, make):
    obj = make()
    assert isinstance(obj.capabilities, Capabilities)  # declared on the object itself
    assert needs_time(obj) is _takes_t(obj.update)
    if callable(getattr(obj, "update_trusted", None)):
        assert needs_time(obj) is _takes_t(obj.update_trusted)


def test_windows_and_detectors_need_time_and_metrics_do_not():
    assert needs_time(se.Sliding(se.ROCAUC(), size=10))  # a count window accepts t
    assert needs_time(se.Tumbling(se.Recall(), size=10))
    assert needs_time(PrecisionRecallDrift(size=100)) and needs_time(SequentialDrift())
    assert not needs_time(se.ROCAUC()) and not needs_time(DriftCounts())


def test_objects_that_declare_nothing_are_read_from_their_update():
    from river import metrics as rm

    class Timed:
        def update(self, y_true, y_pred, w=1.0, t=None):
            pass

    class Plain:
        def update(self, y_true, y_pred, w=1.0):
            pass

    class Declared:  # declares, whatever its signature says
        capabilities = Capabilities(takes_time=True)

        def update(self, *args, **kwargs):
            pass

    class Broken(Plain):  # a lookup of capabilities that fails declares nothing
        def __getattr__(self, name):
            raise RuntimeError(name)

    assert needs_time(Timed()) and not needs_time(Plain()) and needs_time(Declared())
    assert not needs_time(rm.ROCAUC()) and not needs_time(Broken())
    assert capabilities(Plain()) is NO_CAPABILITIES
    assert capabilities(Timed()) == Capabilities(takes_time=True)
    assert capabilities(rm.ROCAUC()).swap is None


def test_a_shared_view_declares_no_fast_path_and_its_templates_window():
    from streameval.metrics.ranking import OrderView

    owner = se.Sliding(se.ROCAUC(), size=20)
    view = OrderView(se.Sliding(se.AveragePrecision(), size=20), owner,
                     lambda obj: obj.metric)
    caps = capabilities(view)
    assert caps.swap is None and caps.revert_joined is None and not needs_time(view)
    assert caps.window_kind == "sliding"
    assert capabilities(OrderView(se.AveragePrecision(), se.ROCAUC())) is NO_CAPABILITIES


# ----------------------------------------------------------------- fast paths


HOOKS = {"swap": "_swap", "revert_joined": "_revert_joined", "revert_later": "_revert_later"}


@pytest.mark.parametrize("name, i, make", INSTANCES, ids=IDS)
def test_fast_paths_are_declared_exactly_where_implemented(name, i, make):
    obj = make()
    caps = capabilities(obj)
    for field, hook in HOOKS.items():
        declared = getattr(caps, field)
        implemented = getattr(obj, hook, None)
        if implemented is None:
            assert declared is None, (name, field)
        else:  # the implementation, bound to this very object
            assert declared == implemented and declared.__self__ is obj, (name, field)
    fraction = caps.rebuild_fraction
    assert fraction is None or 0.0 < fraction <= 1.0
    if fraction is not None:
        assert rebuild_fraction(obj) == fraction  # what a window over it reads


def _swappable():
    out = []
    for name, i, make in INSTANCES:
        if capabilities(make()).swap is not None:
            out.append(pytest.param(make, id=f"{name}-{i}"))
    assert len(out) >= 10  # every binary score-order metric, binned ones included
    return out


def _value_equal(a, b):
    if isinstance(a, tuple):
        return all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))
    return a == b or (math.isnan(a) and math.isnan(b))


def _labels(metric, y):
    pos = "spam" if metric.pos_label == "spam" else True
    neg = "ham" if metric.pos_label == "spam" else False
    return [pos if v else neg for v in y]


def _brute(make, events):
    fresh = make()
    if events:
        y, s, w = zip(*events)
        fresh.update_many(list(y), list(s), list(w))
    return fresh.get()


def _close(a, b, tol=1e-12):
    if isinstance(a, tuple):
        return all(np.allclose(x, y, rtol=0, atol=tol, equal_nan=True) for x, y in zip(a, b))
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol


@pytest.mark.parametrize("make", _swappable())
@pytest.mark.parametrize("seed", [1, 2])
def test_a_declared_swap_is_update_then_revert(make, seed):
    """A full window's step: ``swap(new, oldest)`` leaves the state (JSON) and value of
    ``update(new)`` then ``revert(oldest)``, bit for bit, and the value of a fresh
    metric fed the events left; a batch first leaves deferred events (the swap then
    takes the two calls), ties and dyadic weights make every sum exact."""
    rng = np.random.default_rng(seed)
    a, b = make(), make()
    n, size = 400, 60
    y = _labels(a, rng.random(n) < 0.4)
    s = np.round(rng.random(n), 1 + seed).tolist()
    w = rng.choice([0.0, 0.5, 1.0, 2.0], n).tolist() if seed == 2 else [1.0] * n
    a.update_many(y[:size], s[:size], w[:size])
    b.update_many(y[:size], s[:size], w[:size])
    swap = capabilities(a).swap
    for i in range(size, n):
        j = i - size
        swap(y[i], s[i], w[i], y[j], s[j], w[j])
        b.update(y[i], s[i], w[i])
        b.revert(y[j], s[j], w[j])
        if i % 23 == 0 or i == n - 1:
            assert json.dumps(a.to_state()) == json.dumps(b.to_state())
            assert _value_equal(a.get(), b.get())
            window = list(zip(y, s, w))[j + 1:i + 1]
            assert _close(a.get(), _brute(make, window))
    a._check()
    if getattr(a, "bins", None) is None and isinstance(a, se.ROCAUC):  # scikit-learn on the last window
        yy = np.array([v in (True, "spam") for v in y[-size:]])
        auc = skm.roc_auc_score(yy, s[-size:], sample_weight=w[-size:])
        want = 2 * auc - 1 if isinstance(a, se.Gini) else auc
        assert a.get() == pytest.approx(want, abs=1e-12)
    if getattr(a, "bins", None) is None:  # (a binned order holds every score's bin)
        before = json.dumps(a.to_state())
        with pytest.raises(ValueError, match="no such event"):
            swap(y[0], 0.5, 1.0, y[0], 12.5, 1.0)  # 12.5 was never added
        assert json.dumps(a.to_state()) == before


def _chunks(metric, rng, k, m, weighted):
    """``k`` validated chunks of ``m`` events (as a count window stores them)."""
    out = []
    for _ in range(k):
        y = rng.random(m) < 0.4
        s = np.round(rng.random(m), 2)
        w = rng.choice([0.5, 1.0, 2.0], m) if weighted else None
        out.append(metric.validate(_labels(metric, y), s, w))
    return out


def _declaring(field):
    out = []
    for name, i, make in INSTANCES:
        if getattr(capabilities(make()), field) is not None:
            out.append(pytest.param(make, id=f"{name}-{i}"))
    assert out
    return out


def _events(chunks, skip):
    """The events of ``chunks`` after the first ``skip``, as ``(y, s, w)`` tuples."""
    ev = []
    for y, s, w in chunks:
        ev.extend(zip(y.tolist(), s.tolist(), [1.0] * len(y) if w is None else w.tolist()))
    return ev[skip:]


def _slices(chunks, k):
    """The ``k`` oldest events as chunk slices, oldest first."""
    out = []
    for y, s, w in chunks:
        m = min(k, len(y))
        out.append((y[:m], s[:m], None if w is None else w[:m]))
        k -= m
        if not k:
            break
    return out


@pytest.mark.parametrize("make", _declaring("revert_joined"))
@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "weighted"])
@pytest.mark.parametrize("seed", [3, 4])
def test_a_declared_revert_joined_is_reverting_slice_by_slice(make, weighted, seed):
    rng = np.random.default_rng(seed)
    a, b = make(), make()
    chunks = _chunks(a, rng, 5, 40, weighted)
    for cols in chunks:
        a.update_trusted(*cols)
        b.update_trusted(*cols)
    a.get(), b.get()  # read: the order merged, as a window read between batches
    expired = 95  # two whole chunks and part of a third
    slices = _slices(chunks, expired)
    done = capabilities(a).revert_joined(slices)
    if done:
        for sl in slices:
            b.revert_trusted(*sl)
    assert done is (not weighted and getattr(a, "bins", None) is None)  # exact with weights of 1 only
    assert json.dumps(a.to_state()) == json.dumps(b.to_state())  # (unchanged if refused)
    assert _value_equal(a.get(), b.get())
    left = _events(chunks, expired if done else 0)
    y, s, w = zip(*left)
    assert _close(a.get(), _brute(make, list(zip(_labels(a, y), s, w))), tol=1e-9)
    a._check()


@pytest.mark.parametrize("make", _declaring("revert_later"))
@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "weighted"])
@pytest.mark.parametrize("seed", [5, 6])
def test_a_declared_revert_later_is_reverting_at_once(make, weighted, seed):
    """A count window's batch: the new chunk in (deferred until the next read), the
    expired slices handed over; read, they equal reverting them at once."""
    rng = np.random.default_rng(seed)
    a, b = make(), make()
    chunks = _chunks(a, rng, 4, 50, weighted)
    for cols in chunks[:3]:
        a.update_trusted(*cols)
        b.update_trusted(*cols)
    a.get(), b.get()
    a.update_trusted(*chunks[3])  # deferred until the next read
    b.update_trusted(*chunks[3])
    slices = _slices(chunks, 70)
    done = capabilities(a).revert_later(slices)
    if done:
        for sl in slices:
            b.revert_trusted(*sl)
    assert done is (not weighted and getattr(a, "bins", None) is None)
    assert _value_equal(a.get(), b.get())
    assert json.dumps(a.to_state()) == json.dumps(b.to_state())
    left = _events(chunks, 70 if done else 0)
    y, s, w = zip(*left)
    assert _close(a.get(), _brute(make, list(zip(_labels(a, y), s, w))), tol=1e-9)
    a._check()


@pytest.mark.parametrize("name, i, make", INSTANCES, ids=IDS)
def test_error_bounds_are_declared_where_values_are_binned(name, i, make):
    obj = make()
    caps = capabilities(obj)
    binned = bool(getattr(obj, "bins", None)) and isinstance(obj, Metric) \
        and not hasattr(obj, "classes") and not getattr(obj, "bins_define_value", False)
    assert caps.error_bound is binned, name
    if binned:  # the binned value is within its bound of the exact one
        rng = np.random.default_rng(i)
        y = rng.random(500) < 0.3
        s = rng.random(500) * 0.7 + 0.3 * y
        w = rng.choice([0.5, 1.0, 3.0], 500)
        obj.update_many(y, s, w)
        exact = type(obj)(pos_label=obj.pos_label).update_many(y, s, w).get()
        assert not capabilities(type(obj)()).error_bound  # exact: no bound to report
        if isinstance(obj, se.ROCAUC):
            auc = skm.roc_auc_score(y, s, sample_weight=w)
            want = 2 * auc - 1 if isinstance(obj, se.Gini) else auc
            assert exact == pytest.approx(want, abs=1e-12)
        else:
            assert exact == pytest.approx(skm.average_precision_score(y, s, sample_weight=w),
                                          abs=1e-12)
        assert abs(obj.get() - exact) <= obj.error_bound() + 1e-12


@pytest.mark.parametrize("name, i, make", INSTANCES, ids=IDS)
def test_per_score_refusals_and_range_compositions_are_exclusive(name, i, make):
    obj = make()
    caps = capabilities(obj)
    assert not (caps.per_score and caps.ranges)
    if caps.per_score or caps.ranges:  # an exact binary score order: per-score state
        y, s = [True, False, True, False], [0.9, 0.4, 0.4, 0.1]
        obj.update_many(_labels(obj, y), s)
        assert len(obj) == 3  # one entry per distinct score
        assert not caps.error_bound


# ----------------------------------------------------------------- window kinds


@pytest.mark.parametrize("name, i, make", INSTANCES, ids=IDS)
def test_window_kinds_are_declared_by_windows_only(name, i, make):
    kind = capabilities(make()).window_kind
    assert kind == {"Sliding": "sliding", "Tumbling": "tumbling"}.get(name)


def test_the_exposition_labels_windows_by_their_declared_kind():
    pytest.importorskip("prometheus_client")
    from streameval.service.exposition import window_label

    cases = {
        "cumulative": se.ROCAUC(), "sliding_size_10000": se.Sliding(se.ROCAUC(), size=10000),
        "sliding_period_3600s": se.Sliding(se.Recall(), period=3600),
        "sliding_period_1.5s": se.Sliding(se.Recall(), period=1.5),
        "tumbling_size_1000": se.Tumbling(se.F1(), size=1000),
        "tumbling_period_60s": se.Tumbling(se.F1(), period=60.0),
    }
    for label, obj in cases.items():
        assert window_label(obj) == label

    class Sliding:  # a user's class of that name declares nothing: cumulative
        size = 10

    assert window_label(Sliding()) == "cumulative"

    class Mine:
        capabilities = Capabilities(window_kind="sliding")
        size = 7

    assert window_label(Mine()) == "sliding_size_7"


# ------------------------------------------------------- composition over score ranges


@st.composite
def ranged_data(draw):
    n = draw(st.integers(1, 80))
    if draw(st.booleans()):  # ties, within and across ranges
        s = draw(st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]),
                          min_size=n, max_size=n))
    else:
        s = draw(st.lists(st.floats(-5.0, 5.0, allow_nan=False), min_size=n, max_size=n))
    y = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    kind = draw(st.sampled_from(["none", "int", "float"]))
    if kind == "none":
        w = None
    elif kind == "int":
        w = draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0]), min_size=n, max_size=n))
    else:
        # (normal floats: a subnormal weight, below 2.2e-308, underflows to 0 in the
        # composed sums, where it is halved for a tie or multiplied by another weight)
        w = draw(st.lists(st.floats(0.0, 3.0, allow_subnormal=False), min_size=n, max_size=n))
    cuts = draw(st.lists(st.floats(-6.0, 6.0, allow_nan=False), max_size=5))
    return (np.array(y, bool), np.array(s, float), None if w is None else np.array(w, float),
            sorted(set(cuts), reverse=True))


def _compose(y, s, w, cuts):
    """What Spark does with the score ranges cut at ``cuts`` (high to low): totals per
    range, composed, then each range's AP sum and curve points given its offsets."""
    edges = [math.inf] + cuts + [-math.inf]
    parts, members = [], []
    for r, (hi, lo) in enumerate(zip(edges, edges[1:])):
        m = (s <= hi) & (s > lo)  # equal scores share a range
        members.append(m)
        if m.any():  # an empty range sends nothing
            parts.append((r, ranges.range_totals(y[m], s[m], None if w is None else w[m])))
    offsets, whole = ranges.compose(parts[::-1])  # in any order
    sums, points = [], []
    for r, _ in parts:
        m = members[r]
        keys, wp, wn = ranges.distinct_desc(y[m], s[m], None if w is None else w[m])
        t0, f0, d0, p_i, n_i = offsets[r]
        assert (float(wp.sum()), float(wn.sum())) == (p_i, n_i)
        sums.append(ranges.range_ap_sum(wp, wn, t0, f0))
        points.append(ranges.range_points(keys, wp, wn, t0, f0, d0))
    return whole, sums, points


@HYP
@given(ranged_data())
def test_range_composition_equals_scikit_learn(data):
    y, s, w, cuts = data
    (P, N, U, d), sums, points = _compose(y, s, w, cuts)
    ww = np.ones(len(y)) if w is None else w
    assert P == pytest.approx(ww[y].sum(), abs=1e-9)
    assert N == pytest.approx(ww[~y].sum(), abs=1e-9)
    auc = ranges.AUC.value(P, N, U)
    ap = ranges.AP.value(P, N, U, sums)
    roc = ranges.ROC_CURVE.value(P, N, U, None, points)
    pr = ranges.PR_CURVE.value(P, N, U, None, points)
    if P > 0 and N > 0:
        want = skm.roc_auc_score(y, s, sample_weight=ww)
        assert auc == pytest.approx(want, abs=1e-12)
        assert ranges.GINI.value(P, N, U) == pytest.approx(2 * want - 1, abs=1e-12)
        fpr, tpr, thr = skm.roc_curve(y, s, sample_weight=ww, drop_intermediate=False)
        np.testing.assert_allclose(roc[0], fpr, rtol=0, atol=1e-12)
        np.testing.assert_allclose(roc[1], tpr, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(roc[2], thr)
    else:
        assert math.isnan(auc) and math.isnan(ranges.GINI.value(P, N, U))
    if P > 0:
        assert ap == pytest.approx(skm.average_precision_score(y, s, sample_weight=ww),
                                   abs=1e-12)
        prec, rec, thr = skm.precision_recall_curve(y, s, sample_weight=ww,
                                                    drop_intermediate=False)
        np.testing.assert_allclose(pr[0], prec, rtol=0, atol=1e-12)
        np.testing.assert_allclose(pr[1], rec, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(pr[2], thr)
    else:
        assert math.isnan(ap)
    # the composition each metric declares equals its single-process value
    for make in (se.ROCAUC, se.Gini, se.AveragePrecision, se.ROCCurve, se.PRCurve):
        m = make().update_many(y, s, w)
        comp = capabilities(m).ranges
        got = comp.value(P, N, U, sums if comp.second_pass == "ap" else None,
                         points if comp.second_pass == "points" else None)
        assert _close(got, m.get(), tol=1e-12), make


def test_ranges_that_overlap_are_refused():
    a = ranges.range_totals(np.array([True]), np.array([0.5]), None)
    b = ranges.range_totals(np.array([False]), np.array([0.5]), None)
    with pytest.raises(RuntimeError, match="score ranges overlap in segment x"):
        ranges.compose([(0, a), (1, b)], where="segment x")


def test_the_two_range_formula_by_hand():
    # hi: positive 0.9, negative 0.8; lo: positive 0.4, negatives 0.4 and 0.1
    hi = ranges.range_totals(np.array([True, False]), np.array([0.9, 0.8]), None)
    lo = ranges.range_totals(np.array([True, False, False]), np.array([0.4, 0.4, 0.1]), None)
    assert hi[:3] == (1.0, 1.0, 1.0) and lo[:3] == (1.0, 2.0, 1.5)
    _, (P, N, U, d) = ranges.compose([(0, hi), (1, lo)])
    assert (P, N, U, d) == (2.0, 3.0, 1.0 + 1.5 + 1.0 * 2.0, 4)  # U_hi + U_lo + P_hi N_lo
    assert ranges.AUC.value(P, N, U) == 4.5 / 6


def test_spark_dispatches_on_the_declared_composition():
    pytest.importorskip("pandas")
    from streameval.spark.evaluate import ranged

    assert ranged(se.ROCAUC()) and ranged(se.PRCurve())
    assert not ranged(se.ROCAUC(bins=10)) and not ranged(se.Recall())
    assert not ranged(se.InterpolatedAP()) and capabilities(se.InterpolatedAP()).per_score

    class Mine:
        capabilities = Capabilities(ranges=ranges.AUC)

    assert ranged(Mine())


# ------------------------------------------------------------------ no reaching in


#: private hooks that the declarations replace: reached only inside streameval/metrics/
PRIVATE_HOOKS = {"_swap", "_revert_joined", "_revert_later", "_window_rebuild_fraction",
                 "_bins", "_order", "_so", "_ranges", "_per_score"}

def _class_name_expr(node):
    """Whether ``node`` is (a method call on) ``x.__name__`` or ``x._public_name`` of
    another object than ``self`` or ``cls`` (a class checking a state's type against
    its own name is not dispatching on another's)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return (isinstance(node, ast.Attribute) and node.attr in ("__name__", "_public_name")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")))


def reaching_in(source):
    """``[(line, what)]``: where ``source`` reaches a metric's private hook by name
    (``getattr``/``hasattr`` with a private name, an attribute in
    :data:`PRIVATE_HOOKS`, another object's ``_public_name``), compares a class name
    (directly or through a variable assigned from one), or tests ``"t"`` against a
    signature's parameters."""
    found = []
    tree = ast.parse(source)
    names = set()  # variables assigned from a class name
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _class_name_expr(node.value):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and node.args[1].value.startswith("_")
                and not node.args[1].value.startswith("__")):
            found.append((node.lineno, f"{node.func.id}(..., {node.args[1].value!r})"))
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_HOOKS:
            found.append((node.lineno, f".{node.attr}"))
        elif (isinstance(node, ast.Attribute) and node.attr == "_public_name"
              and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            found.append((node.lineno, "._public_name of another object"))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_class_name_expr(x) or (isinstance(x, ast.Name) and x.id in names)
                   for x in sides):
                found.append((node.lineno, "a class name compared"))
            if (isinstance(node.left, ast.Constant) and node.left.value == "t"
                    and any(isinstance(x, ast.Attribute) and x.attr == "parameters"
                            for x in node.comparators)):
                found.append((node.lineno, "'t' in a signature's parameters"))
    return found


def test_the_scan_catches_what_it_forbids():
    forbidden = [
        'self._swap = getattr(m, "_swap", None)',
        "def f(metric):\n    return metric._public_name in _RANGED",
        "def f(metric):\n    kind = type(metric).__name__.lower()\n"
        "    return kind not in ('sliding', 'tumbling')",
        'x = getattr(metric, "_bins", None)',
        "def f(m):\n    return m._revert_later",
        "import inspect\ndef f(u):\n    return 't' in inspect.signature(u).parameters",
        'if type(m).__name__ == "ROCAUC":\n    pass',
    ]
    for src in forbidden:
        assert reaching_in(src), src
    allowed = [
        "caps = capabilities(m)\nswap = caps.swap",
        'raise ValueError(f"not a {type(m).__name__}")',
        "def f(self):\n    return self._public_name",
        "def f(cls, state):\n    return state.get('type') != cls._public_name",
        'x = getattr(m, "__qualname__", None)',
    ]
    for src in allowed:
        assert not reaching_in(src), src


def test_no_module_outside_metrics_reaches_a_metrics_private_hooks():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).as_posix()
        if rel.startswith("streameval/metrics/"):
            continue
        for line, what in reaching_in(path.read_text()):
            bad.append(f"{rel}:{line}: {what}")
    assert not bad, "\n".join(bad)


def test_every_metrics_module_documents_its_capabilities_source():
    # the interface is documented once, in metrics/base.py, and reachable from there
    base = importlib.import_module("streameval.metrics.base")
    doc = inspect.getdoc(base.Capabilities)
    for field in Capabilities._fields:
        assert f"``{field}" in doc, field
