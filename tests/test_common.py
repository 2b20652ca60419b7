"""Protocol checks run over every registered metric (in the manner of scikit-learn's
``test_common.py``).

Each metric of ``streameval._registry``, its multiclass or binned cases, and the drift
tests' state types are built from a small table of constructors below; a test fails if
a registered metric has no constructor here, so a new metric cannot skip these checks. The checks, on seeded
streams drawn by hypothesis:

* ``update_many`` == a loop of ``update`` == ``update_trusted(*validate(...))``;
* ``revert`` and ``revert_many`` are exact inverses (equal to a metric that never saw
  the reverted events), where the metric has ``revert``;
* ``merge`` of two halves == one metric fed both (or the documented refusal:
  ``ValueError``, nothing changed; :data:`MERGE_REFUSED`);
* the JSON state round trip gives the same value, and the copy goes on identically;
* a bad element in a batch raises ``ValueError`` with its ``index`` attribute, and
  nothing is applied (the state is unchanged);
* ``get()`` is NaN (never a made-up 0 or 1) before the first event.

The oracle here is the metric's own loop of ``update`` (and brute-force re-feeding);
each family's module tests its values against scikit-learn or worked examples.
"""

from __future__ import annotations

import importlib

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streameval as se
from streameval import _registry, drift, sequential
from streameval.validation import ValidationError

SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------------------------------------------- the streams


def binary_stream(rng, n):
    y = rng.random(n) < 0.4
    s = np.round(rng.random(n), 2)  # ties on purpose
    w = np.round(rng.random(n) * 3, 1)  # zero weights included
    return y.tolist(), s.tolist(), w.tolist()


def proba_stream(rng, n):
    y, s, w = binary_stream(rng, n)
    return y, s, w


def multiclass_stream(rng, n):
    classes = ["a", "b", "c"]
    y = [classes[i] for i in rng.integers(0, 3, n)]
    p = rng.dirichlet(np.ones(3), n).round(2)
    preds = [dict(zip(classes, row.tolist())) for row in p]
    w = np.round(rng.random(n) * 3, 1).tolist()
    return y, preds, w


def multiclass_label_stream(rng, n):
    classes = ["a", "b", "c"]
    y = [classes[i] for i in rng.integers(0, 3, n)]
    p = [classes[i] for i in rng.integers(0, 3, n)]
    w = np.round(rng.random(n) * 3, 1).tolist()
    return y, p, w


def regression_stream(rng, n):
    y = np.round(rng.random(n) * 10 + 0.5, 2).tolist()
    p = np.round(rng.random(n) * 10 + 0.5, 2).tolist()
    w = np.round(rng.random(n) * 3, 1).tolist()
    return y, p, w


def retrieval_stream(rng, n):
    rels, scores = [], []
    for _ in range(n):
        m = int(rng.integers(1, 6))
        rels.append(rng.integers(0, 3, m).tolist())
        scores.append(np.round(rng.random(m), 1).tolist())
    w = np.round(rng.random(n) * 3, 1).tolist()
    return rels, scores, w


WORDS = "the cat sat on a mat dog ran far".split()


def text_stream(rng, n):
    hyps, refs = [], []
    for _ in range(n):
        hyps.append(" ".join(rng.choice(WORDS, int(rng.integers(1, 7)))))
        refs.append([" ".join(rng.choice(WORDS, int(rng.integers(1, 7))))
                     for _ in range(int(rng.integers(1, 3)))])
    w = rng.integers(1, 3, n).astype(float).tolist()  # BLEU takes integer weights
    return hyps, refs, w


#: a bad element of each stream kind, put at a chosen index of a batch
BAD = {
    "binary": ("y_pred", math.nan),
    "proba": ("y_pred", 1.5),
    "multiclass": ("y_pred", {"a": math.nan, "b": 0.5, "c": 0.5}),
    "multiclass_label": ("y_true", None),
    "regression": ("y_pred", math.inf),
    "retrieval": ("y_pred", [math.nan]),
    "text": ("y_pred", 7),  # references must be strings or token lists
}

STREAMS = {
    "binary": binary_stream,
    "proba": proba_stream,
    "multiclass": multiclass_stream,
    "multiclass_label": multiclass_label_stream,
    "regression": regression_stream,
    "retrieval": retrieval_stream,
    "text": text_stream,
}

# ------------------------------------------------------------- the constructors

#: (id, factory, stream kind); every registered metric name must appear at least once
CASES = [
    ("ConfusionMatrix", lambda: se.ConfusionMatrix(), "binary"),
    ("ConfusionMatrix-multiclass", lambda: se.ConfusionMatrix(multiclass=True), "multiclass_label"),
    ("Accuracy", lambda: se.Accuracy(), "binary"),
    ("Accuracy-multiclass", lambda: se.Accuracy(multiclass=True), "multiclass"),
    ("ErrorRate", lambda: se.ErrorRate(threshold=0.3), "binary"),
    ("Precision", lambda: se.Precision(), "binary"),
    ("Precision-macro", lambda: se.Precision(average="macro"), "multiclass_label"),
    ("Recall", lambda: se.Recall(), "binary"),
    ("Recall-weighted", lambda: se.Recall(average="weighted"), "multiclass"),
    ("FPR", lambda: se.FPR(), "binary"),
    ("Specificity", lambda: se.Specificity(), "binary"),
    ("FBeta", lambda: se.FBeta(beta=2.0), "binary"),
    ("F1", lambda: se.F1(), "binary"),
    ("F1-micro", lambda: se.F1(average="micro"), "multiclass_label"),
    ("FAlpha", lambda: se.FAlpha(alpha=0.3), "binary"),
    ("BalancedAccuracy", lambda: se.BalancedAccuracy(), "binary"),
    ("MCC", lambda: se.MCC(), "binary"),
    ("MCC-multiclass", lambda: se.MCC(multiclass=True), "multiclass_label"),
    ("ROCAUC", lambda: se.ROCAUC(), "binary"),
    ("ROCAUC-bins", lambda: se.ROCAUC(bins=16), "binary"),
    ("ROCAUC-macro", lambda: se.ROCAUC(average="macro"), "multiclass"),
    ("Gini", lambda: se.Gini(), "binary"),
    ("AveragePrecision", lambda: se.AveragePrecision(), "binary"),
    ("AveragePrecision-bins", lambda: se.AveragePrecision(bins=16), "binary"),
    ("AveragePrecision-micro", lambda: se.AveragePrecision(average="micro"), "multiclass"),
    ("InterpolatedAP", lambda: se.InterpolatedAP(), "binary"),
    ("ElevenPointAP", lambda: se.ElevenPointAP(), "binary"),
    ("ROCCurve", lambda: se.ROCCurve(), "binary"),
    ("PRCurve", lambda: se.PRCurve(), "binary"),
    ("LogLoss", lambda: se.LogLoss(), "proba"),
    ("Brier", lambda: se.Brier(), "proba"),
    ("MAE", lambda: se.MAE(), "regression"),
    ("MSE", lambda: se.MSE(), "regression"),
    ("RMSE", lambda: se.RMSE(), "regression"),
    ("RMSLE", lambda: se.RMSLE(), "regression"),
    ("MAPE", lambda: se.MAPE(), "regression"),
    ("PrecisionAtK", lambda: se.PrecisionAtK(k=3), "retrieval"),
    ("RecallAtK", lambda: se.RecallAtK(k=3), "retrieval"),
    ("HitAtK", lambda: se.HitAtK(k=3), "retrieval"),
    ("APAtK", lambda: se.APAtK(k=3), "retrieval"),
    ("MAPAtK", lambda: se.MAPAtK(k=3), "retrieval"),
    ("MRR", lambda: se.MRR(), "retrieval"),
    ("DCG", lambda: se.DCG(k=4), "retrieval"),
    ("NDCG", lambda: se.NDCG(k=4), "retrieval"),
    ("BLEU", lambda: se.BLEU(), "text"),
    ("ROUGE", lambda: se.ROUGE(), "text"),
    ("METEOR", lambda: se.METEOR(stem=False), "text"),
    # the drift tests' state types (not exported by ``streameval``; the Monitor builds
    # them from a config): the same protocol, min_count=1 so small streams are tested
    ("DriftCounts", lambda: drift.DriftCounts(threshold=0.4), "binary"),
    ("PrecisionRecallDrift", lambda: drift.PrecisionRecallDrift(
        metric="recall", size=6, min_count=1), "binary"),
    ("PrecisionRecallDrift-previous", lambda: drift.PrecisionRecallDrift(
        metric="precision", reference="previous", size=5, min_count=1), "binary"),
    ("ChangePointDetector", lambda: drift.ChangePointDetector(indicator="recall"), "binary"),
    # blocks of 2 observations, so that small streams open, thin and check candidates
    # (alpha = 0.9: some of them alarm and restart)
    ("SequentialDrift", lambda: sequential.SequentialDrift(
        "recall", alpha=0.9, block=2, keep=1, horizon=10), "binary"),
    ("SequentialDrift-auc", lambda: sequential.SequentialDrift(
        "roc_auc", alpha=0.9, block=2, keep=2, horizon=10), "binary"),
]
# label-free estimates (the label is ignored; scores taken as probabilities)
CASES += [(name, getattr(importlib.import_module("streameval.metrics.estimated"), name), "proba")
          for name in ("EstimatedConfusion", "EstimatedPrecision", "EstimatedRecall",
                       "EstimatedF1", "EstimatedAccuracy", "EstimatedROCAUC",
                       "PredictedPositiveRate")]
CASES += [(name, getattr(importlib.import_module("streameval.metrics.calibration"), name), "proba")
          for name in ("ExpectedCalibrationError", "BrierDecomposition", "BrierReliability",
                       "BrierResolution", "BrierUncertainty", "ReliabilityCurve")]
CASES += [  # score drift against a given reference (a learned one is not reverted)
    ("ScoreDrift", lambda: importlib.import_module(
        "streameval.metrics.scoredrift").ScoreDrift(reference=[0.1, 0.3, 0.5, 0.7, 0.9]),
     "binary"),
    ("ScoreDriftDetector", lambda: importlib.import_module(
        "streameval.metrics.scoredrift").ScoreDriftDetector(reference=4, window=3, every=2),
     "binary"),
    ("EstimateCheck", lambda: importlib.import_module(  # an estimate against the labels
        "streameval.metrics.checked").EstimateCheck(of="recall"), "proba"),
    # a calibration refit schedule (refits every 3 labels on the last 5) and a field of it
    ("CalibrationRefit", lambda: importlib.import_module(
        "streameval.metrics.calibration").CalibrationRefit(every=3, window=5), "binary"),
    ("CalibrationField", lambda: importlib.import_module(
        "streameval.metrics.calibration").CalibrationField("fit_to"), "binary")]

IDS = [c[0] for c in CASES]


def _value(m):
    v = m.get()
    if isinstance(v, tuple):
        return [np.asarray(a, dtype=float) for a in v]
    return np.asarray(v, dtype=float)


def assert_same(a, b, tol=1e-9):
    va, vb = _value(a), _value(b)
    if isinstance(va, list):
        assert len(va) == len(vb)
        for x, y in zip(va, vb):
            np.testing.assert_allclose(x, y, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_allclose(va, vb, rtol=tol, atol=tol, equal_nan=True)


def _stream(kind, seed, n):
    return STREAMS[kind](np.random.default_rng(seed), n)


def _reverts(factory, kind):
    m = factory()
    yt, yp, w = _stream(kind, 0, 1)
    m.update(yt[0], yp[0], w[0])
    try:
        m.revert(yt[0], yp[0], w[0])
    except (NotImplementedError, AttributeError):
        return False
    return True


def _front(name):
    """The registered class a case id names (public or a drift state type)."""
    entry = next(e for e in _registry.ENTRIES if e.name == name.split("-")[0])
    return _registry.state_class(entry.name)


def test_every_registered_metric_is_checked_here():
    metric_names = {e.name for e in _registry.ENTRIES if e.state
                    and e.name not in ("Sliding", "Tumbling", "Monitor")}
    covered = {c[0].split("-")[0] for c in CASES}
    assert metric_names <= covered, sorted(metric_names - covered)


@pytest.mark.parametrize("name,factory,kind", CASES, ids=IDS)
def test_undefined_before_the_first_event_is_nan(name, factory, kind):
    m = factory()
    if name.startswith("ConfusionMatrix"):
        assert m.n == 0
        return
    if name == "ChangePointDetector":  # a count of changes: none yet
        assert m.get() == 0 and m.changes == []
        return
    v = m.get()
    if isinstance(v, tuple):  # a curve: no threshold before the first event
        assert not np.isfinite(np.asarray(v[-1], dtype=float)).any(), v
    else:
        assert math.isnan(v), v


@pytest.mark.parametrize("name,factory,kind", CASES, ids=IDS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), weighted=st.booleans())
def test_update_many_equals_loop_and_trusted_path(name, factory, kind, seed, n, weighted):
    yt, yp, w = _stream(kind, seed, n)
    if not weighted:
        w = None
    loop = factory()
    for i in range(n):
        if w is None:
            loop.update(yt[i], yp[i])
        else:
            loop.update(yt[i], yp[i], w[i])
    batch = factory().update_many(yt, yp, w)
    assert_same(batch, loop)
    trusted = factory()
    assert trusted.update_trusted(*trusted.validate(yt, yp, w)) is trusted
    assert_same(trusted, loop)
    # validate changes nothing
    probe = factory()
    before = json.dumps(probe.to_state(), sort_keys=True)
    probe.validate(yt, yp, w)
    assert json.dumps(probe.to_state(), sort_keys=True) == before


@pytest.mark.parametrize("name,factory,kind", CASES, ids=IDS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 40), data=st.data())
def test_revert_is_the_exact_inverse(name, factory, kind, seed, n, data):
    if not _reverts(factory, kind):
        pytest.skip(f"{name} has no revert")
    yt, yp, w = _stream(kind, seed, n)
    k = data.draw(st.integers(1, n - 1))
    full = factory().update_many(yt, yp, w)
    expected = factory().update_many(yt[:k], yp[:k], w[:k])
    by_loop = factory().update_many(yt, yp, w)
    for i in range(n - 1, k - 1, -1):
        by_loop.revert(yt[i], yp[i], w[i])
    assert_same(by_loop, expected)
    full.revert_many(yt[k:], yp[k:], w[k:])
    assert_same(full, expected)
    trusted = factory().update_many(yt, yp, w)
    trusted.revert_trusted(*trusted.validate(yt[k:], yp[k:], w[k:]))
    assert_same(trusted, expected)


@pytest.mark.parametrize("name,factory,kind", CASES, ids=IDS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 40), data=st.data())
def test_merge_equals_one_metric_fed_both(name, factory, kind, seed, n, data):
    yt, yp, w = _stream(kind, seed, n)
    k = data.draw(st.integers(0, n))
    a = factory().update_many(yt[:k], yp[:k], w[:k])
    b = factory().update_many(yt[k:], yp[k:], w[k:])
    refused = MERGE_REFUSED.get(name)
    if refused is not None and refused(a, b):
        before = json.dumps(a.to_state(), sort_keys=True)
        with pytest.raises(ValueError, match="cannot merge"):
            a.merge(b)
        assert json.dumps(a.to_state(), sort_keys=True) == before
        return
    assert a.merge(b) is a
    assert_same(a, factory().update_many(yt, yp, w))


#: the documented cases where merge refuses (ValueError, nothing changed), by case id
MERGE_REFUSED = {
    # river's detectors have no merge
    "ChangePointDetector": lambda a, b: True,
    # the merged stream's baseline window is known only once the first test's baseline
    # is complete (or either test is empty)
    "PrecisionRecallDrift": lambda a, b: 0 < a.n < a.warmup + a.size and b.n > 0,
    # alarms depend on the order of events: only a detector and an empty one combine
    "SequentialDrift": lambda a, b: a.n > 0 and b.n > 0,
    "SequentialDrift-auc": lambda a, b: a.n > 0 and b.n > 0,
    # refits depend on the order of the labels: only a schedule and an empty one combine
    "CalibrationRefit": lambda a, b: a.n > 0 and b.n > 0,
    "ScoreDriftDetector": lambda a, b: a.n > 0 and b.n > 0,
}


@pytest.mark.parametrize("name,factory,kind", CASES, ids=IDS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 30))
def test_state_round_trip_resumes_identically(name, factory, kind, seed, n):
    yt, yp, w = _stream(kind, seed, 2 * n + 1)
    m = factory().update_many(yt[:n], yp[:n], w[:n])
    copy = se.from_state(json.loads(json.dumps(m.to_state())))
    assert isinstance(copy, type(m)) and type(copy) is type(m)
    assert copy.to_state() == m.to_state()
    assert_same(copy, m)
    m.update_many(yt[n:], yp[n:], w[n:])
    copy.update_many(yt[n:], yp[n:], w[n:])
    assert_same(copy, m, tol=1e-12)


@pytest.mark.parametrize("name,factory,kind", CASES, ids=IDS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30), data=st.data())
def test_a_bad_element_is_refused_with_its_index_and_nothing_applied(name, factory, kind,
                                                                     seed, n, data):
    yt, yp, w = _stream(kind, seed, n)
    m = factory().update_many(yt, yp, w)
    before = json.dumps(m.to_state(), sort_keys=True)
    i = data.draw(st.integers(0, n - 1))
    field, bad = BAD[kind]
    yt2, yp2 = list(yt), list(yp)
    (yp2 if field == "y_pred" else yt2)[i] = bad
    with pytest.raises(ValueError) as info:
        m.update_many(yt2, yp2, w)
    assert getattr(info.value, "index", None) == i, str(info.value)
    assert isinstance(info.value, ValidationError)
    assert json.dumps(m.to_state(), sort_keys=True) == before
    # a bad weight too
    w2 = list(w)
    w2[i] = -1.0
    with pytest.raises(ValueError) as info:
        m.update_many(yt, yp, w2)
    assert getattr(info.value, "index", None) == i
    assert json.dumps(m.to_state(), sort_keys=True) == before


@pytest.mark.parametrize("name,factory,kind", CASES, ids=IDS)
def test_the_dispatching_front_is_the_type(name, factory, kind):
    m = factory()
    front = _front(name)
    assert isinstance(m, front)
    assert type(m).__name__ == front.__name__
    assert m.to_state()["type"] == front.__name__


@pytest.mark.parametrize("name,factory,kind", CASES, ids=IDS)
def test_pickle_and_deepcopy_keep_the_case(name, factory, kind):
    import copy
    import pickle

    yt, yp, w = _stream(kind, 3, 12)
    m = factory().update_many(yt, yp, w)
    for twin in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        assert type(twin) is type(m)
        assert_same(twin, m, tol=0)


# ----------------------------------------------- check_columns before update_trusted

OVERFLOW_COLUMNS = {
    # -log(0.1) * 1e308 and (0.9 - 1)^2 ... * 1e308 * 2: weighted losses or their sum overflow
    "binary": (np.array([True, False, True]), np.array([0.1, 0.5, 0.9]), np.array([1e308, 1e308, 1.0])),
    "proba": (np.array([True, False, True]), np.array([0.1, 0.5, 0.9]), np.array([1e308, 1e308, 1.0])),
    "regression": (np.array([1.0, 2.0, 3.0]), np.array([1e200, 2.0, 3.5]), np.array([1e200, 1.0, 1.0])),
}


@pytest.mark.parametrize("window", [None, "sliding", "tumbling"])
@pytest.mark.parametrize("name,factory,kind", [c for c in CASES if c[2] in OVERFLOW_COLUMNS],
                         ids=[c[0] for c in CASES if c[2] in OVERFLOW_COLUMNS])
def test_check_columns_refuses_what_update_trusted_refuses(name, factory, kind, window):
    """A caller that validated a batch itself (a Monitor, once for all its metrics)
    calls check_columns on each metric first: it refuses, with the same error and
    changing nothing, exactly the columns that update_trusted refuses (the weighted
    losses overflow), so that no metric is left half-applied."""
    def make():
        m = factory()
        if window == "sliding":
            return se.Sliding(m, size=5)
        if window == "tumbling":
            return se.Tumbling(m, size=5)
        return m

    cols = OVERFLOW_COLUMNS[kind]
    try:
        make().update_trusted(*cols)
        refused = None
    except ValidationError as e:
        refused = e
    m = make()
    before = json.dumps(m.to_state(), sort_keys=True)
    if refused is None:
        m.check_columns(*cols)
    else:
        with pytest.raises(ValidationError) as info:
            m.check_columns(*cols)
        assert (str(info.value), info.value.index) == (str(refused), refused.index)
    assert json.dumps(m.to_state(), sort_keys=True) == before
    if name in ("LogLoss", "MSE", "RMSE", "MAE"):  # these do overflow
        assert refused is not None and refused.index == 0
