"""The metric protocol on every metric of the confusion, probabilistic and regression
families: update/revert/update_many/merge invariants (hypothesis), JSON state
round-trips, atomic validation, ``from_state`` refusals, and river integration
(``progressive_val_score`` with real river models, ``utils.Rolling``) checked against
scikit-learn on the same predictions.

Oracles: for the invariants, the same metric fed the equivalent event sequence (the
remaining events after a revert, the concatenation for a merge, a loop for a batch);
for river, sklearn on the predictions river produced.
"""

from __future__ import annotations

import itertools
import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import datasets, evaluate, linear_model, naive_bayes, preprocessing, utils
from sklearn import metrics as skm

import streameval
from streameval import (
    MAE,
    MAPE,
    MCC,
    MSE,
    RMSE,
    RMSLE,
    F1,
    FPR,
    Accuracy,
    BalancedAccuracy,
    Brier,
    ConfusionMatrix,
    ErrorRate,
    FAlpha,
    FBeta,
    LogLoss,
    Precision,
    Recall,
    Specificity,
)
from streameval import _registry

HYP = settings(max_examples=30, deadline=None)
NAN = float("nan")
INF = float("inf")

# weights that are multiples of 1/2: every sum is exact, so confusion metrics must be
# bit-for-bit equal whatever the order of additions
WEIGHTS = st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0, 3.5])
PROBS = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])
MC_DICTS = st.builds(lambda a, b, c: {0: a, 1: b, 2: c}, PROBS, PROBS, PROBS)
ABC_DICTS = st.sampled_from([
    {"a": 1.0}, {"a": 0.2, "b": 0.3, "c": 0.5}, {"b": 0.5, "c": 0.5}, {"a": 0.0, "c": 1.0},
    {"a": 0.9, "b": 0.05, "c": 0.05},
])
REAL = st.one_of(st.sampled_from([0.0, 1.0, 2.5, -3.0]), st.floats(-100, 100))
POSITIVE = st.one_of(st.sampled_from([0.0, 1.0, 2.5]), st.floats(-0.99, 100))

FAMILIES = {
    "binary": (st.tuples(st.booleans(), PROBS, WEIGHTS), [
        ((2, 0.5, 1.0), "y_true = 2"), (("x", 0.5, 1.0), "y_true = 'x'"),
        ((True, NAN, 1.0), "y_pred = nan"), ((True, INF, 1.0), "y_pred = inf"),
        ((True, "0.5", 1.0), "y_pred = '0.5'"), ((True, None, 1.0), "y_pred = None"),
        ((True, 0.5, -1.0), "w = -1.0"), ((True, 0.5, NAN), "w = nan"),
        ((True, 0.5, 1e16), r"w = 1e\+16"), ((True, 0.5, 1e308), r"w = 1e\+308"),
        (([1], 0.5, 1.0), r"y_true = \[1\]"), ((True, {True: NAN}, 1.0), "y_pred"),
    ]),
    "multiclass": (st.tuples(st.sampled_from([0, 1, 2]),
                             st.one_of(st.sampled_from([0, 1, 2]), MC_DICTS), WEIGHTS), [
        ((None, 1, 1.0), "y_true = None"), ((NAN, 1, 1.0), "y_true = nan"),
        ((1, {}, 1.0), "y_pred = {}"), ((1, {1: NAN}, 1.0), "y_pred"),
        (([1], 1, 1.0), r"y_true = \[1\]"), ((1, None, 1.0), "y_pred = None"),
        ((1, 1, -1.0), "w = -1.0"), ((1, 1, 1e155), r"w = 1e\+155"),
    ]),
    "proba": (st.tuples(st.sampled_from(["a", "b", "c"]), ABC_DICTS, WEIGHTS), [
        (("a", 0.5, 1.0), "y_pred = 0.5"), (("a", {"a": 1.5}, 1.0), "y_pred"),
        ((None, {"a": 1.0}, 1.0), "y_true = None"), (("a", {"a": 1.0}, -1.0), "w = -1.0"),
        (("a", {"a": 1.0}, 2e16), r"w = 2e\+16"),
    ]),
    "regression": (st.tuples(REAL, REAL, WEIGHTS), [
        ((NAN, 1.0, 1.0), "y_true = nan"), ((1.0, INF, 1.0), "y_pred = inf"),
        (("1", 1.0, 1.0), "y_true = '1'"), ((1.0, 1.0, -1.0), "w = -1.0"),
        ((1.0, 1.0, 1e300), r"w = 1e\+300"),
    ]),
    "positive": (st.tuples(POSITIVE, POSITIVE, WEIGHTS), [
        ((-1.0, 1.0, 1.0), "y_true = -1.0"), ((1.0, -2.0, 1.0), "y_pred = -2.0"),
        ((NAN, 1.0, 1.0), "y_true = nan"),
    ]),
}

GOOD = {
    "binary": [(True, 0.75, 1.0), (False, 0.25, 2.0), (True, 0.5, 0.5)],
    "multiclass": [(0, 0, 1.0), (1, {0: 0.25, 1: 0.75, 2: 0.0}, 2.0), (2, 1, 0.5)],
    "proba": [("a", {"a": 1.0}, 1.0), ("b", {"a": 0.2, "b": 0.3, "c": 0.5}, 2.0),
              ("c", {"b": 0.5, "c": 0.5}, 0.5)],
    "regression": [(1.0, 2.0, 1.0), (-3.0, 0.5, 2.0), (2.5, 2.5, 0.5)],
    "positive": [(1.0, 2.0, 1.0), (0.0, 0.5, 2.0), (2.5, 2.5, 0.5)],
}

METRICS = [
    ("binary", ConfusionMatrix), ("binary", Accuracy), ("binary", ErrorRate),
    ("binary", Precision), ("binary", Recall), ("binary", FPR), ("binary", Specificity),
    ("binary", lambda: FBeta(2.0)), ("binary", F1), ("binary", lambda: FAlpha(0.3)),
    ("binary", BalancedAccuracy), ("binary", MCC),
    ("binary", lambda: Precision(threshold=0.25, pos_label=1)),
    ("binary", LogLoss), ("binary", Brier),
    ("multiclass", lambda: ConfusionMatrix(multiclass=True)),
    ("multiclass", lambda: Accuracy(multiclass=True)),
    ("multiclass", lambda: ErrorRate(multiclass=True)),
    ("multiclass", lambda: Precision(average="macro")),
    ("multiclass", lambda: Recall(average="weighted")),
    ("multiclass", lambda: FPR(average="micro")),
    ("multiclass", lambda: Specificity(average="macro")),
    ("multiclass", lambda: FBeta(2.0, average="weighted")),
    ("multiclass", lambda: F1(average="micro")),
    ("multiclass", lambda: FAlpha(0.3, average="macro")),
    ("multiclass", lambda: BalancedAccuracy(multiclass=True)),
    ("multiclass", lambda: MCC(multiclass=True)),
    ("proba", lambda: LogLoss(multiclass=True)),
    ("proba", lambda: Brier(multiclass=True)),
    ("proba", lambda: LogLoss(multiclass=True, labels=["a", "b", "c"])),
    ("regression", MAE), ("regression", MSE), ("regression", RMSE), ("regression", MAPE),
    ("positive", RMSLE),
]
IDS = [f"{fam}-{i}-{f().to_state()['type']}" for i, (fam, f) in enumerate(METRICS)]
EXACT = ("binary", "multiclass")  # weights of 1/2 multiples: exact sums


def is_probabilistic(metric):
    return isinstance(metric, (LogLoss, Brier))


def value(metric):
    v = metric.get()
    if isinstance(metric, ConfusionMatrix):
        labels = metric.labels
        return metric.matrix(labels) if metric.multiclass else v
    return v


def same(a, b, exact):
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and (np.array_equal(a, b) if exact
                                       else np.allclose(a, b, rtol=1e-12, atol=1e-12))
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b if exact else abs(a - b) <= 1e-12 * max(1.0, abs(b))


def feed(metric, events):
    for e in events:
        metric.update(*e)
    return metric


def exactness(family, metric):
    return family in EXACT and not is_probabilistic(metric)


def columns(events):
    return [e[0] for e in events], [e[1] for e in events], [e[2] for e in events]


def events_for(data, family, max_size=30):
    return data.draw(st.lists(FAMILIES[family][0], max_size=max_size))


@pytest.mark.parametrize("family, factory", METRICS, ids=IDS)
@HYP
@given(data=st.data())
def test_update_many_equals_loop(family, factory, data):
    events = events_for(data, family)
    loop = feed(factory(), events)
    batch = factory().update_many(*columns(events))
    batch._check()
    assert same(value(batch), value(loop), exactness(family, loop))
    if family in ("binary", "regression", "positive"):  # numpy arrays too
        yt, yp, w = columns(events)
        arrays = factory().update_many(np.array(yt), np.array(yp, dtype=float), np.array(w))
        assert same(value(arrays), value(loop), exactness(family, loop))


@pytest.mark.parametrize("family, factory", METRICS, ids=IDS)
@HYP
@given(data=st.data())
def test_revert_is_the_exact_inverse(family, factory, data):
    events = events_for(data, family)
    gone = data.draw(st.lists(st.sampled_from(range(len(events))), unique=True)
                     if events else st.just([]))
    order = data.draw(st.permutations(gone))
    m = feed(factory(), events)
    for i in order:
        m.revert(*events[i])
        m._check()
    kept = [e for i, e in enumerate(events) if i not in set(gone)]
    assert same(value(m), value(feed(factory(), kept)), exactness(family, m))
    if not kept and not isinstance(m, ConfusionMatrix):
        assert math.isnan(m.get())


@pytest.mark.parametrize("family, factory", METRICS, ids=IDS)
@HYP
@given(data=st.data())
def test_revert_many_equals_a_loop_of_revert(family, factory, data):
    events = events_for(data, family)
    gone = data.draw(st.lists(st.sampled_from(range(len(events))), unique=True)
                     if events else st.just([]))
    batch = [events[i] for i in gone]
    loop = feed(factory(), events)
    for e in batch:
        loop.revert(*e)
    m = feed(factory(), events)
    assert m.revert_many(*columns(batch)) is m
    m._check()
    kept = [e for i, e in enumerate(events) if i not in set(gone)]
    exact = exactness(family, m)
    assert same(value(m), value(loop), exact)
    assert same(value(m), value(feed(factory(), kept)), exact)
    if not kept and not isinstance(m, ConfusionMatrix):
        assert math.isnan(m.get())
    if family in ("binary", "regression", "positive"):  # numpy arrays too
        yt, yp, w = columns(batch)
        arrays = feed(factory(), events).revert_many(
            np.array(yt, dtype=bool if family == "binary" else float),
            np.array(yp, dtype=float), np.array(w, dtype=float))
        arrays._check()
        assert same(value(arrays), value(loop), exact)
        unweighted = feed(factory(), [(y, p, 1.0) for y, p, _ in events])
        unweighted.revert_many(yt, yp)  # w=None: every weight 1
        assert same(value(unweighted), value(feed(factory(), [(y, p, 1.0) for y, p, _ in kept])),
                    exactness(family, m))


@pytest.mark.parametrize("family, factory", METRICS, ids=IDS)
def test_revert_many_is_atomic(family, factory):
    _, bad_events = FAMILIES[family]
    good = GOOD[family]
    m = feed(factory(), good)
    before = m.to_state()
    for bad, match in bad_events:
        with pytest.raises(ValueError, match=r"\[3\]"):
            m.revert_many(*columns(good + [bad] + good))
        assert m.to_state() == before, bad
    # an event never added (its cell, or the metric, would go below zero): refused with
    # its index, nothing removed
    with pytest.raises(ValueError, match=r"event 3\b.*no such|event 3\b.*only 0 such"):
        m.revert_many(*columns(good + [good[0]]))
    assert m.to_state() == before
    with pytest.raises(ValueError, match="elements"):
        m.revert_many([good[0][0]] * 2, [good[0][1]])
    assert m.to_state() == before
    assert m.revert_many(*columns(good))._check() is None
    assert m.to_state() == factory().to_state()


@pytest.mark.parametrize("family, factory", METRICS, ids=IDS)
@HYP
@given(data=st.data())
def test_merge_equals_one_stream(family, factory, data):
    events = events_for(data, family)
    k = data.draw(st.integers(0, len(events)))
    a, b = feed(factory(), events[:k]), feed(factory(), events[k:])
    assert a.merge(b) is a
    a._check()
    assert same(value(a), value(feed(factory(), events)), exactness(family, a))


@pytest.mark.parametrize("family, factory", METRICS, ids=IDS)
@HYP
@given(data=st.data())
def test_state_round_trips_through_json(family, factory, data):
    events = events_for(data, family)
    more = events_for(data, family, max_size=5)
    m = feed(factory(), events)
    state = m.to_state()
    assert state["type"] == type(m).__name__ and state["version"] == 1
    restored = streameval.from_state(json.loads(json.dumps(state)))
    assert type(restored) is type(m)
    assert restored.to_state() == state
    restored._check()
    assert same(value(restored), value(m), exact=True)
    # and it goes on exactly as the original
    assert same(value(feed(restored, more)), value(feed(m, more)), exact=True)


@pytest.mark.parametrize("family, factory", METRICS, ids=IDS)
def test_validation_is_atomic(family, factory):
    _, bad_events = FAMILIES[family]
    good = GOOD[family]
    m = feed(factory(), good)
    before = m.to_state()
    for bad, match in bad_events:
        if family == "binary" and is_probabilistic(m) and bad[1] == {True: NAN}:
            match = "y_pred"
        with pytest.raises(ValueError, match=match):
            m.update(*bad)
        assert m.to_state() == before, bad
        with pytest.raises(ValueError, match=match):
            m.revert(*bad)
        assert m.to_state() == before, bad
        batch = good + [bad] + good
        with pytest.raises(ValueError, match=r"\[3\]"):
            m.update_many(*columns(batch))
        assert m.to_state() == before, bad
    with pytest.raises(ValueError, match="elements"):
        m.update_many([good[0][0]] * 2, [good[0][1]])
    assert m.to_state() == before


@pytest.mark.parametrize("bad", ["x", [1]])
def test_batch_names_the_first_bad_label_among_bools(bad):
    with pytest.raises(ValueError, match=r"y_true\[2\] = "):
        Precision().update_many([True, False, bad], [0.1, 0.2, 0.3])


@pytest.mark.parametrize("family, factory", METRICS, ids=IDS)
def test_revert_of_an_event_never_added_is_refused(family, factory):
    m = factory()
    e = GOOD[family][0]
    with pytest.raises(ValueError, match="no such event|no skipped event"):
        m.revert(*e)
    assert m.to_state() == factory().to_state()


@pytest.mark.parametrize("family, factory", METRICS, ids=IDS)
def test_clone_and_merge_refusals(family, factory):
    m = feed(factory(), GOOD[family])
    c = m.clone()
    assert type(c) is type(m) and c.to_state()["params"] == m.to_state()["params"]
    assert c.to_state() == factory().to_state()
    with pytest.raises(ValueError, match="cannot merge"):
        m.merge(MAE() if not isinstance(m, MAE) else MSE())


def test_merge_refuses_other_parameters():
    with pytest.raises(ValueError, match="different parameters"):
        Precision(threshold=0.3).merge(Precision(threshold=0.4))
    with pytest.raises(ValueError, match="cannot merge"):
        Precision(average="macro").merge(Precision())  # multiclass and binary
    with pytest.raises(ValueError, match="different parameters"):
        FBeta(2, average="macro").merge(FBeta(2, average="micro"))


# ------------------------------------------------------------------ from_state

MINE = ["ConfusionMatrix", "Accuracy", "ErrorRate", "Precision", "Recall", "FPR",
        "Specificity", "FBeta", "F1", "FAlpha", "BalancedAccuracy", "MCC", "LogLoss",
        "Brier", "MAE", "MSE", "RMSE", "RMSLE", "MAPE"]


@pytest.mark.parametrize("name", MINE)
def test_public_names_are_registered_under_their_name(name):
    cls = getattr(streameval, name)
    assert _registry.state_class(name) is cls
    assert name in streameval.__all__


def test_from_state_refusals():
    state = Precision().to_state()
    with pytest.raises(ValueError, match="unknown state type 'Precisionn'"):
        streameval.from_state({**state, "type": "Precisionn"})
    with pytest.raises(ValueError, match="version 2"):
        streameval.from_state({**state, "version": 2})
    with pytest.raises(ValueError, match="not a streameval state"):
        streameval.from_state({"data": {}})
    with pytest.raises(ValueError, match="lacks"):
        streameval.from_state({"type": "Precision", "version": 1})
    with pytest.raises(ValueError, match="not a binary ConfusionMatrix state"):
        streameval.from_state({**state, "data": {"tp": 1.0}})
    with pytest.raises(ValueError, match="not a binary ConfusionMatrix state"):
        streameval.from_state({**state, "data": {**state["data"], "counts": [0, -1, 0, 0]}})
    mc = Precision(average="macro").to_state()
    with pytest.raises(ValueError, match="not a multiclass ConfusionMatrix state"):
        streameval.from_state({**mc, "data": {"cells": [[None, 1, 1.0, 1]]}})
    mae = MAE().to_state()
    with pytest.raises(ValueError, match="not a MAE state"):
        streameval.from_state({**mae, "data": {"n": -1, "sum": [0.0, 0.0], "weight": 0.0}})
    with pytest.raises(ValueError, match="average"):
        streameval.from_state({**mc, "params": {"average": "samples"}})


# ----------------------------------------------------------------- river integration


def phishing_predictions(metric, every=125):
    """Run river's progressive validation of a logistic regression on Phishing with
    ``metric``; return (labels, positive-class probabilities, [(step, metric value)])."""
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    ys = [y for _, y in datasets.Phishing()]
    probs, values = [], []
    for step, state in enumerate(evaluate.iter_progressive_val_score(
            datasets.Phishing(), model, metric, step=1, yield_predictions=True), 1):
        probs.append(state["Prediction"].get(True, 0.0))
        if step % every == 0:
            values.append((step, state[type(metric).__name__].get()))
    return np.array(ys), np.array(probs), values


def sk_threshold(name, y, p):
    pred = p >= 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "Precision": lambda: skm.precision_score(y, pred),
            "Recall": lambda: skm.recall_score(y, pred),
            "F1": lambda: skm.f1_score(y, pred),
            "Accuracy": lambda: skm.accuracy_score(y, pred),
            "MCC": lambda: skm.matthews_corrcoef(y, pred),
            "BalancedAccuracy": lambda: skm.balanced_accuracy_score(y, pred),
            "LogLoss": lambda: skm.log_loss(y, p, labels=[False, True]),
            "Brier": lambda: skm.brier_score_loss(y, p, pos_label=True),
        }[name]()


@pytest.mark.parametrize("cls", [Precision, Recall, F1, Accuracy, MCC, BalancedAccuracy,
                                 LogLoss, Brier])
def test_river_progressive_val_score_phishing(cls):
    metric = cls()
    y, p, values = phishing_predictions(metric)
    assert len(values) == 10 and len(y) == len(p) == 1250
    for step, v in values:
        expected = sk_threshold(cls.__name__, y[:step], p[:step])
        assert v == pytest.approx(expected, rel=1e-12, abs=1e-12), step
    # and the plain progressive_val_score returns the metric it was given, as river's
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    out = evaluate.progressive_val_score(datasets.Phishing(), model, cls())
    assert out.get() == pytest.approx(values[-1][1], rel=1e-12)


def test_river_rolling_precision_against_sklearn_on_the_window():
    rng = np.random.default_rng(8)
    y = rng.random(400) < 0.4
    p = np.round(rng.random(400), 2)
    rolling = utils.Rolling(Precision, window_size=50)
    for i in range(400):
        rolling.update(y_true=bool(y[i]), y_pred=float(p[i]))
        lo = max(0, i + 1 - 50)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = skm.precision_score(y[lo:i + 1], p[lo:i + 1] >= 0.5,
                                           zero_division=np.nan)
        got = rolling.get()
        assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(
            expected, abs=1e-12), i


def test_river_rolling_in_progressive_val_score():
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    rolling = utils.Rolling(Precision, window_size=100)
    ys, probs = [], []
    for (x, yv), state in zip(datasets.Phishing(), evaluate.iter_progressive_val_score(
            datasets.Phishing(), model, rolling, step=1, yield_predictions=True)):
        ys.append(yv)
        probs.append(state["Prediction"].get(True, 0.0))
    expected = skm.precision_score(ys[-100:], np.array(probs[-100:]) >= 0.5)
    assert rolling.get() == pytest.approx(expected, abs=1e-12)
    assert repr(rolling).startswith("Precision: ")


@pytest.mark.parametrize("cls, sk", [(MAE, skm.mean_absolute_error),
                                     (RMSE, skm.root_mean_squared_error)])
def test_river_regression_progressive_val_score(cls, sk):
    model = preprocessing.StandardScaler() | linear_model.LinearRegression()
    metric = cls()
    ys, preds = [], []
    for (x, yv), state in zip(datasets.TrumpApproval(), evaluate.iter_progressive_val_score(
            datasets.TrumpApproval(), model, metric, step=1, yield_predictions=True)):
        ys.append(yv)
        preds.append(state["Prediction"])
    assert metric.get() == pytest.approx(sk(ys, preds), rel=1e-12)


def test_river_multiclass_progressive_val_score():
    n = 300
    data = list(itertools.islice(datasets.ImageSegments(), n))
    for metric, kind in [(Precision(average="macro"), "label"),
                         (F1(average="weighted"), "label"),
                         (LogLoss(multiclass=True), "proba")]:
        model = preprocessing.StandardScaler() | naive_bayes.GaussianNB()
        preds = [s["Prediction"] for s in evaluate.iter_progressive_val_score(
            data, model, metric, step=1, yield_predictions=True)]
        ys = [yv for _, yv in data]
        # river skips the metric update where the model has no prediction yet
        kept = [(yv, pr) for yv, pr in zip(ys, preds) if pr is not None and pr != {}]
        yk = [a for a, _ in kept]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if kind == "label":
                pk = [b for _, b in kept]
                func = skm.precision_score if isinstance(metric, Precision) else skm.f1_score
                avg = metric.average
                expected = func(yk, pk, average=avg, zero_division=np.nan)
            else:
                labels = sorted(set(yk) | {c for _, d in kept for c in d})
                proba = np.array([[d.get(c, 0.0) for c in labels] for _, d in kept])
                expected = skm.log_loss(yk, proba, labels=labels)
        assert metric.get() == pytest.approx(expected, rel=1e-12), metric


@pytest.mark.parametrize("family, factory", METRICS, ids=IDS)
def test_batch_of_a_scalar_is_a_value_error(family, factory):
    """A scalar where a batch belongs is bad input of the wrong type: a ValueError
    naming the argument (it was a TypeError from len()), and nothing changes."""
    good = GOOD[family]
    m = feed(factory(), good)
    before = m.to_state()
    y, p, _ = columns(good)
    with pytest.raises(ValueError, match=r"y_true = 1\.5: a batch must be a sequence"):
        m.update_many(1.5, p)
    with pytest.raises(ValueError, match=r"w = 2\.0: a batch must be a sequence"):
        m.update_many(y, p, 2.0)
    assert m.to_state() == before
