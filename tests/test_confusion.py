"""The confusion family against scikit-learn, plus the worked examples of DESIGN.md.

Oracles: ``sklearn.metrics`` (``confusion_matrix``, ``accuracy_score``,
``precision_score``, ..., ``multilabel_confusion_matrix`` for one-vs-rest FPR and
specificity) with ``sample_weight`` and ``zero_division=np.nan``, recomputed from the
whole prefix of events. Where sklearn warns or raises for an undefined value (no
predicted positive, no weight at all, a zero MCC denominator) we assert NaN; the
condition is decided from sklearn's own confusion matrix.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import streameval
from streameval import (
    MCC,
    F1,
    FPR,
    Accuracy,
    BalancedAccuracy,
    ConfusionMatrix,
    ErrorRate,
    FAlpha,
    FBeta,
    Precision,
    Recall,
    Specificity,
)

# sklearn is the slow part: each example calls it once per metric
HYP = settings(max_examples=30, deadline=None)
TOL = 1e-12


def close(a, b, tol=TOL):
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return not (isinstance(b, float) and math.isnan(b)) and abs(a - b) <= tol * max(1.0, abs(b))


# ---------------------------------------------------------------- binary oracle


def binary_cm(y, pred, w):
    """sklearn's [[tn, fp], [fn, tp]] (all zeros for no events)."""
    if not len(y) or np.sum(w) == 0:
        return np.zeros((2, 2))  # sklearn refuses all-zero weights
    return skm.confusion_matrix(y, pred, labels=[False, True], sample_weight=w).astype(float)


def sk_binary(name, y, scores, w, threshold=0.5, beta=None, alpha=None):
    """The expected value of a binary metric on these events, from sklearn."""
    y = np.asarray(y, dtype=bool)
    pred = np.asarray(scores, dtype=float) >= threshold
    w = np.asarray(w, dtype=float)
    (tn, fp), (fn, tp) = binary_cm(y, pred, w)
    if tn + fp + fn + tp == 0:
        return math.nan  # sklearn raises: no weight at all
    kw = dict(sample_weight=w, zero_division=np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "Accuracy":
            return skm.accuracy_score(y, pred, sample_weight=w)
        if name == "ErrorRate":
            return skm.zero_one_loss(y, pred, sample_weight=w)
        if name == "Precision":
            return skm.precision_score(y, pred, **kw)
        if name == "Recall":
            return skm.recall_score(y, pred, **kw)
        if name == "Specificity":
            return skm.recall_score(y, pred, pos_label=False, labels=[False, True], **kw)
        if name == "FPR":
            return 1.0 - skm.recall_score(y, pred, pos_label=False, labels=[False, True], **kw)
        if name == "F1":
            return skm.f1_score(y, pred, **kw)
        if name == "FBeta":
            return skm.fbeta_score(y, pred, beta=beta, **kw)
        if name == "FAlpha":
            return skm.fbeta_score(y, pred, beta=math.sqrt(1.0 / alpha - 1.0), **kw)
        if name == "BalancedAccuracy":
            if tp + fn == 0 or tn + fp == 0:
                return math.nan  # sklearn warns and averages the class it has
            return skm.balanced_accuracy_score(y, pred, sample_weight=w)
        if name == "MCC":
            if 0 in (tp + fp, tp + fn, tn + fp, tn + fn):
                return math.nan  # sklearn returns 0 for a zero denominator
            return skm.matthews_corrcoef(y, pred, sample_weight=w)
    raise AssertionError(name)


BINARY = [
    ("Accuracy", Accuracy, {}),
    ("ErrorRate", ErrorRate, {}),
    ("Precision", Precision, {}),
    ("Recall", Recall, {}),
    ("Specificity", Specificity, {}),
    ("FPR", FPR, {}),
    ("F1", F1, {}),
    ("FBeta", FBeta, {"beta": 2.0}),
    ("FBeta", FBeta, {"beta": 0.5}),
    ("FAlpha", FAlpha, {"alpha": 0.3}),
    ("BalancedAccuracy", BalancedAccuracy, {}),
    ("MCC", MCC, {}),
]

SCORES = st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.5, 0.7, 0.9, 1.0])
# weights of very different magnitudes (1e-228 next to 1) make sklearn's MCC lose all
# precision (its covariance form cancels), so random weights stay in [0.01, 10]
WEIGHTS = st.one_of(st.just(1.0), st.sampled_from([0.0, 0.5, 2.0, 3.0]), st.floats(0.01, 10.0))
BINARY_EVENTS = st.lists(st.tuples(st.booleans(), SCORES, WEIGHTS), max_size=40)


def random_binary(rng, n, weighted=True):
    y = rng.random(n) < 0.4
    s = np.round(rng.random(n), 1)  # ties, some exactly at the threshold
    w = rng.choice([0.0, 0.5, 1.0, 1.0, 2.0, 3.3], n) if weighted else np.ones(n)
    return y, s, w


@pytest.mark.parametrize("name, cls, kw", BINARY, ids=lambda v: str(v) if not callable(v) else "")
def test_binary_equals_sklearn_after_every_event(name, cls, kw):
    rng = np.random.default_rng(7)
    y, s, w = random_binary(rng, 50)
    m = cls(**kw)
    assert close(m.get(), math.nan)
    for i in range(len(y)):
        m.update(bool(y[i]), float(s[i]), float(w[i]))
        m._check()
        expected = sk_binary(name, y[: i + 1], s[: i + 1], w[: i + 1], **kw)
        assert close(m.get(), expected), (i, m.get(), expected)


@HYP
@given(BINARY_EVENTS, st.sampled_from([0.5, 0.3, 0.0, 1.0]))
def test_binary_all_metrics_equal_sklearn(events, threshold):
    y = [e[0] for e in events]
    s = [e[1] for e in events]
    w = [e[2] for e in events]
    cm = ConfusionMatrix(threshold=threshold)
    views = [(name, cls(cm=cm, **kw), kw) for name, cls, kw in BINARY]
    for e in events:
        cm.update(*e)
    cm._check()
    assert np.allclose(cm.get(), binary_cm(np.array(y, bool), np.array(s) >= threshold, w),
                       rtol=TOL, atol=TOL)
    for name, view, kw in views:
        assert close(view.get(), sk_binary(name, y, s, w, threshold=threshold, **kw)), name


@HYP
@given(BINARY_EVENTS)
def test_binary_update_many_equals_sklearn(events):
    y = np.array([e[0] for e in events], dtype=bool)
    s = np.array([e[1] for e in events])
    w = np.array([e[2] for e in events])
    for name, cls, kw in BINARY:
        m = cls(**kw).update_many(y, s, w)
        assert close(m.get(), sk_binary(name, y, s, w, **kw), 1e-12), name


# -------------------------------------------------------------- worked examples


def _events_from_counts(tp, fp, fn, tn):
    return ([True] * tp + [False] * fp + [True] * fn + [False] * tn,
            [0.9] * tp + [0.9] * fp + [0.1] * fn + [0.1] * tn)


def test_worked_example_tp20_fp30_fn0_tn50():
    y, s = _events_from_counts(20, 30, 0, 50)
    cm = ConfusionMatrix()
    acc, prec, rec, f1 = (Accuracy(cm=cm), Precision(cm=cm), Recall(cm=cm), F1(cm=cm))
    cm.update_many(y, s)
    assert (cm.tp, cm.fp, cm.fn, cm.tn) == (20.0, 30.0, 0.0, 50.0)
    assert acc.get() == pytest.approx(0.70, abs=1e-12)
    assert prec.get() == pytest.approx(0.40, abs=1e-12)
    assert rec.get() == 1.0
    assert round(f1.get(), 6) == 0.571429
    assert f1.get() == pytest.approx(2 * 0.4 * 1.0 / 1.4, abs=1e-12)


def test_worked_example_three_class_matrix_accuracy():
    rows = [[43, 5, 2], [2, 45, 3], [0, 1, 49]]
    classes = ["a", "b", "c"]
    y_true = [classes[i] for i in range(3) for j in range(3) for _ in range(rows[i][j])]
    y_pred = [classes[j] for i in range(3) for j in range(3) for _ in range(rows[i][j])]
    cm = ConfusionMatrix(multiclass=True)
    acc = Accuracy(cm=cm)
    for t, p in zip(y_true, y_pred):
        cm.update(t, p)
    assert round(acc.get(), 6) == 0.913333
    assert acc.get() == pytest.approx(137 / 150, abs=1e-12)
    assert np.array_equal(cm.get(), np.array(rows, dtype=float))


def test_worked_example_threshold_half():
    # labels [T, F, F], scores [0.7, 0.3, 0.5], threshold 0.5: 0.5 counts as positive
    p, r = Precision(threshold=0.5), Recall(threshold=0.5)
    for y, s in zip([True, False, False], [0.7, 0.3, 0.5]):
        p.update(y, s)
        r.update(y, s)
    assert p.get() == 0.5
    assert r.get() == 1.0


# ------------------------------------------------------------- undefined values


def test_undefined_values_are_nan_not_zero():
    p = Precision()
    p.update(True, 0.1)  # a positive predicted negative: no predicted positive
    assert math.isnan(p.get())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert skm.precision_score([True], [False]) == 0.0  # sklearn's default
    assert caught  # ... with a warning: that is where we say NaN
    r = Recall()
    r.update(False, 0.9)
    assert math.isnan(r.get())
    f = F1()
    f.update(False, 0.1)  # tp + fp + fn == 0
    assert math.isnan(f.get())
    f.update(True, 0.1)  # precision undefined, recall 0: F is 0 (as sklearn)
    assert f.get() == 0.0 == skm.f1_score([False, True], [False, False], zero_division=np.nan)
    for cls in (Accuracy, ErrorRate, MCC, BalancedAccuracy, Specificity, FPR):
        assert math.isnan(cls().get())
    m = MCC()
    m.update_many([True, True], [0.9, 0.1])  # no negative: zero denominator
    assert math.isnan(m.get())
    assert skm.matthews_corrcoef([1, 1], [1, 0]) == 0.0


def test_zero_weight_events_leave_values_undefined():
    a = Accuracy()
    a.update(True, 0.9, 0.0)
    assert math.isnan(a.get())
    with pytest.raises(ValueError):
        skm.accuracy_score([1], [1], sample_weight=[0.0])  # sklearn refuses; we say NaN


def test_revert_everything_leaves_exact_zeros_with_float_weights():
    rng = np.random.default_rng(3)
    y, s, w = random_binary(rng, 200)
    w = rng.random(200) * 3.1
    cm = ConfusionMatrix()
    p = Precision(cm=cm)
    for e in zip(y.tolist(), s.tolist(), w.tolist()):
        cm.update(*e)
    for e in zip(y.tolist(), s.tolist(), w.tolist()):
        cm.revert(*e)
        cm._check()
    assert (cm.tp, cm.fp, cm.fn, cm.tn, cm.n) == (0.0, 0.0, 0.0, 0.0, 0)
    assert math.isnan(p.get())


# ---------------------------------------------------------- labels and thresholds


def test_pos_label_strings_and_river_dicts():
    m = Recall(pos_label="spam", neg_label="ham")
    m.update("spam", {"spam": 0.8, "ham": 0.2})
    m.update("spam", {"spam": 0.2, "ham": 0.8})
    m.update("ham", 0.9)
    assert m.get() == 0.5
    with pytest.raises(ValueError, match="neg_label"):
        Recall(pos_label="spam")
    with pytest.raises(ValueError, match=r"y_true = 'eggs'"):
        m.update("eggs", 0.4)
    p = Precision()
    p.update(True, {True: 0.7, False: 0.3})
    p.update(False, {})  # an untrained river model: positive probability 0
    p.update(1, True)  # a predicted label
    p.update(0, np.float32(0.6))
    assert p.get() == pytest.approx(2 / 3, abs=1e-12)


def test_threshold_is_inclusive_and_any_real():
    m = Recall(threshold=-1.5)
    m.update(True, -1.5)
    m.update(True, -1.6)
    assert m.get() == 0.5
    with pytest.raises(ValueError, match="threshold"):
        Recall(threshold=float("nan"))
    with pytest.raises(ValueError, match="threshold"):
        Recall(threshold="0.5")


def test_parameter_checks():
    with pytest.raises(ValueError, match="average = 'samples'"):
        Precision(average="samples")
    with pytest.raises(ValueError, match="beta = -1"):
        FBeta(beta=-1)
    with pytest.raises(ValueError, match="alpha = 0"):
        FAlpha(alpha=0)
    with pytest.raises(ValueError, match="alpha = 1.5"):
        FAlpha(alpha=1.5)
    with pytest.raises(ValueError, match="threshold = 0.3: applies to a binary Precision"):
        Precision(average="macro", threshold=0.3)
    with pytest.raises(ValueError, match="pos_label"):
        ConfusionMatrix(multiclass=True, pos_label=1)
    assert FAlpha(alpha=1.0, average="micro").alpha == 1.0
    assert FBeta(0).beta == 0.0  # beta 0 is precision


def test_falpha_extremes():
    y, s = _events_from_counts(3, 2, 4, 5)
    a1 = FAlpha(alpha=1.0).update_many(y, s)
    p = Precision().update_many(y, s)
    assert a1.get() == pytest.approx(p.get(), abs=1e-15)
    half = FAlpha(alpha=0.5).update_many(y, s)
    f1 = F1().update_many(y, s)
    assert half.get() == pytest.approx(f1.get(), abs=1e-15)
    # F_a = 1 / (a / P + (1 - a) / R) by the definition
    a = 0.2
    fa = FAlpha(alpha=a).update_many(y, s)
    P, R = 3 / 5, 3 / 7
    assert fa.get() == pytest.approx(1 / (a / P + (1 - a) / R), abs=1e-12)


# ---------------------------------------------------------------- multiclass

CLASSES = ["a", "b", "c", "d"]


def sk_multiclass(name, y, p, w, average=None, beta=None, alpha=None):
    """Expected value of a multiclass metric from sklearn (NaN where undefined)."""
    y = np.asarray(y, dtype=object)
    p = np.asarray(p, dtype=object)
    w = np.asarray(w, dtype=float)
    if not len(y) or w.sum() == 0:
        return math.nan
    kw = dict(sample_weight=w, zero_division=np.nan)
    labels = sorted(set(y) | set(p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mcm = skm.multilabel_confusion_matrix(y, p, sample_weight=w, labels=labels)
    mcm = mcm.astype(float)
    tn, fp, fn, tp = mcm[:, 0, 0], mcm[:, 0, 1], mcm[:, 1, 0], mcm[:, 1, 1]
    support = tp + fn

    def averaged(num, den, per_class_defined_support=None):
        # one-vs-rest brute force: macro nanmean, weighted by support, micro from sums
        if average == "micro":
            return num.sum() / den.sum() if den.sum() else math.nan
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(den != 0, num / np.where(den != 0, den, 1), np.nan)
        ok = ~np.isnan(v)
        if not ok.any():
            return math.nan
        if average == "macro":
            return float(v[ok].mean())
        return float((v[ok] * support[ok]).sum() / support[ok].sum()) if support[ok].sum() else math.nan

    def weighted_guard(value, per_class):
        # sklearn falls back to an unweighted mean when the classes with a defined value
        # have no support at all; that average is undefined for us
        ok = ~np.isnan(per_class)
        if average == "weighted" and ok.any() and support[ok].sum() == 0:
            return math.nan
        return value

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "Accuracy":
            return skm.accuracy_score(y, p, sample_weight=w)
        if name == "ErrorRate":
            return skm.zero_one_loss(y, p, sample_weight=w)
        if name in ("Precision", "Recall", "F1", "FBeta", "FAlpha"):
            func = {"Precision": skm.precision_score, "Recall": skm.recall_score,
                    "F1": skm.f1_score}.get(name)
            extra = {}
            if name == "FBeta":
                func, extra = skm.fbeta_score, {"beta": beta}
            if name == "FAlpha":
                func, extra = skm.fbeta_score, {"beta": math.sqrt(1 / alpha - 1)}
            value = func(y, p, average=average, **extra, **kw)
            per_class = func(y, p, average=None, labels=labels, **extra, **kw)
            return weighted_guard(value, np.asarray(per_class, dtype=float))
        if name == "FPR":
            return averaged(fp, fp + tn)
        if name == "Specificity":
            return averaged(tn, fp + tn)
        if name == "BalancedAccuracy":
            return skm.balanced_accuracy_score(y, p, sample_weight=w)
        if name == "MCC":
            C = skm.confusion_matrix(y, p, sample_weight=w, labels=labels).astype(float)
            t, q, s = C.sum(1), C.sum(0), C.sum()
            if (s * s - q @ q) * (s * s - t @ t) == 0:
                return math.nan
            return skm.matthews_corrcoef(y, p, sample_weight=w)
    raise AssertionError(name)


AVERAGED = [
    ("Precision", Precision, {}),
    ("Recall", Recall, {}),
    ("F1", F1, {}),
    ("FBeta", FBeta, {"beta": 2.0}),
    ("FAlpha", FAlpha, {"alpha": 0.3}),
    ("FPR", FPR, {}),
    ("Specificity", Specificity, {}),
]
WHOLE = [
    ("Accuracy", Accuracy, {}),
    ("ErrorRate", ErrorRate, {}),
    ("BalancedAccuracy", BalancedAccuracy, {}),
    ("MCC", MCC, {}),
]
MULTI_EVENTS = st.lists(
    st.tuples(st.sampled_from(CLASSES), st.sampled_from(CLASSES), WEIGHTS), max_size=40
)


def multiclass_metrics(cm):
    out = [(name, cls(multiclass=True, cm=cm, **kw), {**kw}) for name, cls, kw in WHOLE]
    for average in ("macro", "micro", "weighted"):
        out += [(name, cls(average=average, cm=cm, **kw), {**kw, "average": average})
                for name, cls, kw in AVERAGED]
    return out


@settings(max_examples=25, deadline=None)
@given(MULTI_EVENTS)
def test_multiclass_all_metrics_equal_sklearn(events):
    y = [e[0] for e in events]
    p = [e[1] for e in events]
    w = [e[2] for e in events]
    cm = ConfusionMatrix(multiclass=True)
    views = multiclass_metrics(cm)
    for e in events:
        cm.update(*e)
    cm._check()
    if events:
        assert cm.labels == sorted(set(y) | set(p))
    if sum(w) > 0:  # sklearn refuses all-zero weights
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "a single label was found"
            expected = skm.confusion_matrix(y, p, labels=cm.labels, sample_weight=w)
        assert np.allclose(cm.get(), expected, rtol=TOL, atol=TOL)
    for name, view, kw in views:
        assert close(view.get(), sk_multiclass(name, y, p, w, **kw)), (name, kw)


def test_multiclass_after_every_event():
    rng = np.random.default_rng(11)
    n = 30
    y = rng.choice(CLASSES, n, p=[0.5, 0.3, 0.15, 0.05]).tolist()
    p = rng.choice(CLASSES, n).tolist()
    w = rng.choice([0.0, 1.0, 2.5], n).tolist()
    cm = ConfusionMatrix(multiclass=True)
    views = multiclass_metrics(cm)
    for i in range(n):
        cm.update(y[i], p[i], w[i])
        for name, view, kw in views:
            expected = sk_multiclass(name, y[: i + 1], p[: i + 1], w[: i + 1], **kw)
            assert close(view.get(), expected), (i, name, kw)


def test_multiclass_probability_dicts_use_argmax():
    m = Accuracy(multiclass=True)
    m.update("cat", {"cat": 0.6, "dog": 0.4})
    m.update("dog", {"cat": 0.6, "dog": 0.4})
    m.update("dog", {"cat": 0.5, "dog": 0.5})  # tie: the first maximum, as max() and river
    assert m.get() == pytest.approx(1 / 3, abs=1e-15)
    assert m.cm.matrix(["cat", "dog"]).tolist() == [[1.0, 0.0], [2.0, 0.0]]
    with pytest.raises(ValueError, match="empty probability dict"):
        m.update("cat", {})
    with pytest.raises(ValueError, match="finite"):
        m.update("cat", {"cat": float("nan")})


def test_multiclass_matrix_in_given_order_and_unseen_labels():
    cm = ConfusionMatrix(multiclass=True)
    cm.update_many([2, 0, 1, 1], [2, 1, 1, 0], [1.0, 2.0, 3.0, 4.0])
    order = [1, 0, 5, 2]
    expected = skm.confusion_matrix([2, 0, 1, 1], [2, 1, 1, 0], labels=order,
                                    sample_weight=[1.0, 2.0, 3.0, 4.0])
    assert np.array_equal(cm.matrix(order), expected)
    assert cm.labels == [0, 1, 2]


def test_multiclass_labels_of_mixed_types_and_numpy():
    cm = ConfusionMatrix(multiclass=True)
    cm.update_many(["a", 1, 1.0, True], ["a", "a", 1, 2])  # 1, 1.0 and True: one class
    assert cm.n == 4
    assert cm.matrix(["a", 1, 2]).tolist() == [[1, 0, 0], [1, 1, 1], [0, 0, 0]]
    loop = ConfusionMatrix(multiclass=True)
    for t, p in zip(["a", 1, 1.0, True], ["a", "a", 1, 2]):
        loop.update(t, p)
    assert np.array_equal(loop.matrix(["a", 1, 2]), cm.matrix(["a", 1, 2]))
    # a list mixing str and int is not turned into strings by numpy
    m = ConfusionMatrix(multiclass=True).update_many(["1", 1], [1, "1"])
    assert m.matrix(["1", 1]).tolist() == [[0, 1], [1, 0]]
    with pytest.raises(ValueError, match=r"y_true\[2\] = None"):
        ConfusionMatrix(multiclass=True).update_many(["a", "b", None], ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"y_pred\[1\] = nan"):
        ConfusionMatrix(multiclass=True).update_many([1, 2], np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match=r"y_pred\[1\]"):
        ConfusionMatrix(multiclass=True).update_many([1, 2], [{1: 0.5}, {}])


@HYP
@given(MULTI_EVENTS)
def test_multiclass_update_many_equals_loop_and_sklearn(events):
    y = np.array([e[0] for e in events], dtype=str if events else float)
    p = [e[1] for e in events]
    w = np.array([e[2] for e in events])
    loop = ConfusionMatrix(multiclass=True)
    for e in events:
        loop.update(*e)
    batch = ConfusionMatrix(multiclass=True).update_many(y, p, w)
    batch._check()
    assert batch.labels == loop.labels
    assert np.allclose(batch.get(), loop.get(), rtol=TOL, atol=TOL)
    assert batch.n == loop.n == len(events)
    for name, cls, kw in AVERAGED:
        m = cls(average="macro", **kw).update_many(y, p, w)
        assert close(m.get(), sk_multiclass(name, y.tolist(), p, w, average="macro", **kw))


# ------------------------------------------------------------------ sharing


def test_shared_matrix_counts_each_event_once():
    cm = ConfusionMatrix(threshold=0.4)
    p, r, f = Precision(cm=cm), Recall(cm=cm), F1(cm=cm)
    assert p.threshold == r.threshold == 0.4
    rng = np.random.default_rng(5)
    y, s, w = random_binary(rng, 300)
    cm.update_many(y, s, w)
    assert close(p.get(), sk_binary("Precision", y, s, w, threshold=0.4))
    assert close(r.get(), sk_binary("Recall", y, s, w, threshold=0.4))
    assert close(f.get(), sk_binary("F1", y, s, w, threshold=0.4))
    assert cm.n == 300


@pytest.mark.parametrize("op", ["update", "revert", "update_many", "merge"])
def test_views_refuse_to_write(op):
    cm = ConfusionMatrix()
    p = Precision(cm=cm)
    cm.update(True, 0.9)
    before = cm.to_state()
    args = {"update": (True, 0.9), "revert": (True, 0.9), "update_many": ([True], [0.9]),
            "merge": (Precision(),)}[op]
    with pytest.raises(TypeError, match="shared ConfusionMatrix"):
        getattr(p, op)(*args)
    assert cm.to_state() == before


def test_view_parameters_must_match_the_shared_matrix():
    cm = ConfusionMatrix(threshold=0.3, pos_label="y", neg_label="n")
    v = Recall(cm=cm)
    assert (v.threshold, v.pos_label, v.neg_label) == (0.3, "y", "n")
    Recall(cm=cm, threshold=0.3, pos_label="y")  # the same: fine
    with pytest.raises(ValueError, match="threshold = 0.5 differs"):
        Recall(cm=cm, threshold=0.5)
    with pytest.raises(ValueError, match="pos_label = 'n'"):
        Recall(cm=cm, pos_label="n", neg_label="y")
    with pytest.raises(ValueError, match="needs a binary ConfusionMatrix"):
        Recall(cm=ConfusionMatrix(multiclass=True))
    with pytest.raises(ValueError, match=r"needs a ConfusionMatrix\(multiclass=True\)"):
        Recall(average="macro", cm=cm)
    with pytest.raises(ValueError, match="needs a binary ConfusionMatrix"):
        Accuracy(multiclass=False, cm=ConfusionMatrix(multiclass=True))
    # multiclass=None follows the shared matrix
    assert Accuracy(cm=ConfusionMatrix(multiclass=True)).multiclass is True


def test_view_state_restores_a_standalone_metric():
    cm = ConfusionMatrix()
    p = Precision(cm=cm)
    cm.update_many([True, False, True], [0.9, 0.8, 0.1])
    state = json.loads(json.dumps(p.to_state()))
    assert "cm" not in state["params"]
    q = streameval.from_state(state)
    assert type(q) is type(p) and q.get() == p.get() == 0.5
    q.update(True, 0.9)  # it owns its matrix
    assert q.get() == pytest.approx(2 / 3) and p.get() == 0.5


def test_dispatch_types_names_and_isinstance():
    b, m = Precision(), Precision(average="weighted")
    assert isinstance(b, Precision) and isinstance(m, Precision)
    assert type(b) is not type(m)
    assert type(b).__name__ == type(m).__name__ == "Precision"
    assert isinstance(b, streameval.metrics.base.BinaryMetric)
    assert isinstance(m, streameval.metrics.base.MultiClassMetric)
    assert repr(b) == "Precision: nan"
    assert m.to_state()["params"] == {"average": "weighted"}
    assert b.to_state()["params"] == {"threshold": 0.5, "pos_label": True, "neg_label": None}
    f = FBeta(2, average="micro")
    assert streameval.from_state(f.to_state()).to_state() == f.to_state()
    assert b.requires_labels is False and m.requires_labels is True
    assert ErrorRate().bigger_is_better is False and FPR().bigger_is_better is False
    assert MCC().bigger_is_better is True


@pytest.mark.parametrize("kind", ["dense int", "sparse int", "uint64", "bool", "float",
                                  "str late classes", "object"])
def test_multiclass_batch_grouping_paths_equal_the_loop(kind):
    rng = np.random.default_rng(13)
    n = 3000
    base = rng.integers(0, 5, n)
    y = {
        "dense int": base,
        "sparse int": base * 10**12 - 7,
        "uint64": base.astype(np.uint64) + np.uint64(2**63),
        "bool": base > 2,
        "float": base / 4.0,
        # classes first seen after the first 1024 elements
        "str late classes": np.where(np.arange(n) > 2000, "late" + base.astype(str),
                                     base.astype(str)),
        "object": np.array([("t", int(b)) if b else None or "x" for b in base], dtype=object),
    }[kind]
    p = np.roll(y, 1)
    w = rng.choice([0.5, 1.0, 2.0], n)
    batch = ConfusionMatrix(multiclass=True).update_many(y, p, w)
    loop = ConfusionMatrix(multiclass=True)
    for a, b, c in zip(y.tolist(), p.tolist(), w.tolist()):
        loop.update(a, b, c)
    labels = loop.labels
    assert batch.labels == labels
    assert np.array_equal(batch.matrix(labels), loop.matrix(labels))
    assert batch.n == loop.n == n


def test_multiclass_numpy_scalar_labels_are_stored_as_python_values():
    cm = ConfusionMatrix(multiclass=True)
    cm.update(np.int64(1), np.int64(2))
    cm.update(np.str_("a"), {np.str_("a"): 0.9})
    cm.update(1, 2)
    state = json.loads(json.dumps(cm.to_state()))  # numpy scalars would not serialise
    assert state["data"]["cells"] == [[1, 2, 2.0, 2], ["a", "a", 1.0, 1]]
    assert type(streameval.from_state(state)._cells[(1, 2)]) is list


@pytest.mark.parametrize("multiclass", [False, True])
def test_rounding_residue_of_a_long_weighted_history_is_not_a_refusal(multiclass):
    """1M float-weighted events added, then taken out in slices and one by one: the
    cells' rounding residue (far above 1e-9 of one weight) must not look like a
    revert of an event that was never counted; the emptied matrix is exactly zero."""
    rng = np.random.default_rng(7)
    n = 1_000_000
    y = rng.random(n) < 0.3
    s = rng.random(n)
    w = rng.random(n) * 2.0
    if multiclass:
        y = y.astype(np.int64) + (rng.random(n) < 0.2)
        s = np.minimum((s * 3).astype(np.int64), 2)
        m = ConfusionMatrix(multiclass=True)
    else:
        m = ConfusionMatrix()
    m.update_many(y, s, w)
    for a in range(0, n - 50, 1000):
        b = min(a + 1000, n - 50)
        m.revert_many(y[a:b], s[a:b], w[a:b])
    for i in range(n - 50, n):
        m.revert(y[i].item(), s[i].item(), w[i].item())
    m._check()
    if multiclass:
        assert m.n == 0 and not m.labels
    else:
        assert np.asarray(m.get()).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    with pytest.raises(ValueError, match="no such event"):
        m.revert(y[0].item(), s[0].item(), w[0].item())


@pytest.mark.parametrize("multiclass", [False, True])
@pytest.mark.parametrize("batch", [False, True])
def test_reverted_weights_leave_no_negative_residue(multiclass, batch):
    """0.1 + 0.7 - 0.7 - 0.1 is -2.8e-17 in floats: with a zero-weight event still
    counted, the cell must read 0 (weights are >= 0), not a negative residue that made
    MCC's square root raise and precision read 1. sklearn sees weight 0 only: every
    value is undefined (NaN)."""
    kw = {"multiclass": True} if multiclass else {}
    cm = ConfusionMatrix(**kw)
    avg = {"average": "macro"} if multiclass else {}
    metrics = [MCC(cm=cm), Precision(cm=cm, **avg), Recall(cm=cm, **avg),
               BalancedAccuracy(cm=cm), F1(cm=cm, **avg)]
    yt, yp = (1, 1) if multiclass else (True, 0.9)
    for w in (0.1, 0.7, 0.0):
        cm.update(yt, yp, w)
    if batch:
        cm.revert_many([yt], [yp], [0.7])
        cm.revert_many([yt], [yp], [0.1])
    else:
        cm.revert(yt, yp, 0.7)
        cm.revert(yt, yp, 0.1)
    cm._check()
    assert cm.n == 1
    assert float(np.asarray(cm.get()).min()) == 0.0  # sklearn's matrix of weight 0
    for m in metrics:
        assert math.isnan(m.get()), (m, m.get())


@pytest.mark.parametrize("multiclass", [False, True])
@pytest.mark.parametrize("how", ["loop", "batch", "merged", "state"])
@pytest.mark.parametrize("weights", [(0.1, 0.2), (0.3, 0.1), (0.1, 0.7)])
def test_only_zero_weights_left_in_a_cell_read_zero(multiclass, how, weights):
    """0.1 + 0.2 - 0.2 - 0.1 is +2.8e-17 in floats: a cell left holding only
    zero-weight events must weigh exactly 0, so that precision and friends are
    undefined (sklearn's matrix of weight 0), not 1. The next events count as sklearn
    says."""
    kw = {"multiclass": True} if multiclass else {}
    avg = {"average": "macro"} if multiclass else {}
    yt, yp = (1, 1) if multiclass else (True, 0.9)
    w = [*weights, 0.0]
    cm = ConfusionMatrix(**kw)
    if how == "batch":
        cm.update_many([yt] * 3, [yp] * 3, w)
        cm.revert_many([yt] * 2, [yp] * 2, w[:2])
    else:
        for v in w[:2]:
            cm.update(yt, yp, v)
        if how == "merged":
            other = ConfusionMatrix(**kw)
            other.update(yt, yp, 0.0)
            cm.merge(other)
        else:
            cm.update(yt, yp, 0.0)
        if how == "state":
            cm = streameval.from_state(json.loads(json.dumps(cm.to_state())))
        cm.revert(yt, yp, w[1])
        cm.revert(yt, yp, w[0])
    cm._check()
    assert cm.n == 1
    assert np.asarray(cm.get()).tolist() == ([[0.0]] if multiclass else [[0.0, 0.0], [0.0, 0.0]])
    for cls in (Precision, Recall, F1):
        assert math.isnan(cls(cm=cm, **avg).get())
    for cls in (MCC, BalancedAccuracy, Accuracy):
        assert math.isnan(cls(cm=cm).get())
    # the next events: sklearn on the whole history (the zero-weight event included)
    ny, npred, nw = ([1, 2], [1, 1], [0.5, 1.5]) if multiclass else ([True, False], [0.9, 0.8], [0.5, 1.5])
    cm.update_many(ny, npred, nw)
    cm._check()
    if multiclass:
        want = skm.precision_score([yt, *ny], [yp, *npred], sample_weight=[0.0, *nw],
                                   average="macro", zero_division=np.nan)
    else:
        want = skm.precision_score([yt, *ny], [True, True, True], sample_weight=[0.0, *nw],
                                   zero_division=np.nan)
    assert close(Precision(cm=cm, **avg).get(), want)


def test_state_with_a_negative_cell_is_refused_and_a_residue_reads_zero():
    """A cell's weight is >= 0: a state saying otherwise is refused (it made MCC's
    square root raise), and the -2.8e-17 residue that older versions could save loads
    as 0 (with one zero-weight event, as sklearn: every value undefined)."""
    state = MCC().to_state()
    state["data"].update(tp=-1.0, counts=[1, 0, 0, 0])
    with pytest.raises(ValueError, match="not a binary ConfusionMatrix state"):
        streameval.from_state(state)
    state["data"].update(tp=-2.7755575615628914e-17)
    m = streameval.from_state(state)
    m._check()
    assert m.cm.tp == 0.0 and math.isnan(m.get())
    mc = MCC(multiclass=True).to_state()
    mc["data"]["cells"] = [[1, 1, -1.0, 1]]
    with pytest.raises(ValueError, match="not a multiclass ConfusionMatrix state"):
        streameval.from_state(mc)
    mc["data"]["cells"] = [[1, 1, -2.7755575615628914e-17, 1], [2, 1, 3.0, 2]]
    m = streameval.from_state(mc)
    m._check()
    assert m.cm.get().tolist() == [[0.0, 0.0], [3.0, 0.0]]


# ------------------------------------------------------------- the trusted path


CONFUSION_FRONTS = [ConfusionMatrix, Accuracy, ErrorRate, Precision, Recall, FPR, Specificity,
                    F1, BalancedAccuracy, MCC]


def _make(cls, multiclass=False, **kw):
    if cls is FBeta:
        kw["beta"] = 2.0
    if cls is FAlpha:
        kw["alpha"] = 0.3
    if multiclass:
        if cls in (ConfusionMatrix, Accuracy, ErrorRate, BalancedAccuracy, MCC):
            kw["multiclass"] = True
        else:
            kw["average"] = "macro"
    return cls(**kw)


def _value(m):
    v = m.get()
    return v.tolist() if isinstance(v, np.ndarray) else v


@pytest.mark.parametrize("cls", CONFUSION_FRONTS + [FBeta, FAlpha])
@HYP
@given(events=BINARY_EVENTS, threshold=st.sampled_from([0.3, 0.5]))
def test_binary_update_trusted_equals_update_many_loop_and_sklearn(cls, events, threshold):
    y = [e[0] for e in events]
    s = [e[1] for e in events]
    w = [e[2] for e in events]
    trusted = _make(cls, threshold=threshold)
    trusted.update_trusted(*trusted.validate(y, s, w))
    many = _make(cls, threshold=threshold).update_many(y, s, w)
    loop = _make(cls, threshold=threshold)
    for a, b, c in zip(y, s, w):
        loop.update(a, b, c)
    assert trusted.to_state() == many.to_state()
    assert close_all(_value(trusted), _value(loop))
    if cls is ConfusionMatrix:
        expected = binary_cm(np.array(y, dtype=bool), np.array(s) >= threshold, np.array(w))
        assert np.allclose(trusted.get(), expected, rtol=1e-12, atol=1e-12)
    else:
        kw = {"beta": 2.0} if cls is FBeta else {"alpha": 0.3} if cls is FAlpha else {}
        assert close(trusted.get(), sk_binary(cls.__name__, y, s, w, threshold, **kw))
    trusted._check()


def close_all(a, b):
    if isinstance(a, list):
        return np.allclose(a, b, rtol=1e-12, atol=1e-12)
    return close(a, b)


@pytest.mark.parametrize("cls", CONFUSION_FRONTS + [FBeta, FAlpha])
@HYP
@given(events=st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("abc"), WEIGHTS),
                       max_size=30))
def test_multiclass_update_trusted_equals_update_many_and_loop(cls, events):
    y = [e[0] for e in events]
    p = [e[1] for e in events]
    w = [e[2] for e in events]
    trusted = _make(cls, multiclass=True)
    trusted.update_trusted(*trusted.validate(y, p, w))
    many = _make(cls, multiclass=True).update_many(y, p, w)
    loop = _make(cls, multiclass=True)
    for a, b, c in zip(y, p, w):
        loop.update(a, b, c)
    assert close_all(_value(trusted), _value(many)) and close_all(_value(trusted), _value(loop))
    # the oracle: sklearn's confusion matrix over the classes seen
    cm = trusted.cm if hasattr(trusted, "cm") else trusted
    labels = cm.labels
    if labels and sum(w) > 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # one class only: we pass labels
            expected = skm.confusion_matrix(y, p, labels=labels, sample_weight=w)
        assert np.allclose(cm.matrix(labels), expected, rtol=1e-12, atol=1e-12)
    trusted._check()


@pytest.mark.parametrize("multiclass", [False, True])
def test_revert_trusted_refuses_atomically_naming_the_event(multiclass):
    rng = np.random.default_rng(5)
    if multiclass:
        y = rng.choice(["a", "b", "c"], 50).tolist()
        s = rng.choice(["a", "b", "c"], 50).tolist()
    else:
        y = (rng.random(50) < 0.5).tolist()
        s = rng.random(50).tolist()
    w = rng.choice([0.5, 1.0, 2.0], 50).tolist()
    for cls in CONFUSION_FRONTS:
        m = _make(cls, multiclass=multiclass)
        m.update_many(y, s, w)
        before = m.to_state()
        # events 0..9 were added, event 10 never was (a fresh pair of a cell reverted twice)
        gone_y, gone_s, gone_w = y[:10] + [y[0]] * 60, s[:10] + [s[0]] * 60, w[:10] + [w[0]] * 60
        cols = m.validate(gone_y, gone_s, gone_w)
        with pytest.raises(ValueError) as info:
            m.revert_trusted(*cols)
        # the oracle: a loop of revert on a copy refuses the same event first
        probe = streameval.from_state(before)
        first = None
        for i, (a, b, c) in enumerate(zip(gone_y, gone_s, gone_w)):
            try:
                probe.revert(a, b, c)
            except ValueError:
                first = i
                break
        assert info.value.index == first and first is not None
        assert str(info.value).startswith(f"event {first}: revert of")
        assert m.to_state() == before


@pytest.mark.parametrize("cls", CONFUSION_FRONTS + [FBeta, FAlpha])
def test_every_confusion_metric_dispatches_to_a_subclass_of_its_front(cls):
    b, m = _make(cls), _make(cls, multiclass=True)
    for metric, base in ((b, streameval.metrics.base.BinaryMetric),
                         (m, streameval.metrics.base.MultiClassMetric)):
        assert isinstance(metric, cls) and isinstance(metric, base)
        assert type(metric) is not cls and type(metric).__name__ == cls.__name__
        assert metric.to_state()["type"] == cls.__name__
        again = streameval.from_state(json.loads(json.dumps(metric.to_state())))
        assert type(again) is type(metric)
    assert type(b) is not type(m)
    assert b.columns == "binary" and m.columns is None


@pytest.mark.parametrize("op", ["update_trusted", "revert_trusted"])
def test_views_refuse_the_trusted_path_and_owned_ones_delegate(op):
    cm = ConfusionMatrix()
    cm.update_many([True, False], [0.9, 0.8])
    before = cm.to_state()
    view = Precision(cm=cm)
    cols = view.validate([True], [0.9])
    with pytest.raises(TypeError, match="shared ConfusionMatrix"):
        getattr(view, op)(*cols)
    assert cm.to_state() == before
    own = Precision().update_many([True, False], [0.9, 0.8])
    assert getattr(own, op)(*cols) is own
    assert own.cm.tp == (2.0 if op == "update_trusted" else 0.0)


def test_declared_parameter_checks_name_what_is_accepted():
    with pytest.raises(ValueError, match=r"average = 'samples': must be one of None, 'macro'"):
        F1(average="samples")
    with pytest.raises(ValueError, match=r"beta = -1: must be a number >= 0"):
        FBeta(beta=-1)
    with pytest.raises(ValueError, match=r"beta = True"):
        FBeta(beta=True)
    with pytest.raises(ValueError, match=r"alpha = 0: must be a number in \(0, 1\]"):
        FAlpha(alpha=0)
    with pytest.raises(ValueError, match="threshold = inf: must be a finite number"):
        ConfusionMatrix(threshold=float("inf"))


# ------------------------------------------------------ DriftCounts reuses the matrix


def test_drift_counts_are_the_binary_matrix_with_squared_weights():
    from streameval.drift import DriftCounts

    rng = np.random.default_rng(3)
    y = rng.random(200) < 0.4
    s = rng.random(200)
    w = rng.choice([0.5, 1.0, 3.0], 200)
    c = DriftCounts(threshold=0.4)
    c.update_trusted(*c.validate(y, s, w))
    cm = ConfusionMatrix(threshold=0.4).update_many(y, s, w)
    assert (c.tp, c.fp, c.fn, c.tn) == (cm.tp, cm.fp, cm.fn, cm.tn)
    # brute force: recall's Kish counts
    pos = y
    sw, sw2 = w[pos].sum(), (w[pos] ** 2).sum()
    x = w[pos & (s >= 0.4)].sum()
    assert c.proportion("recall") == pytest.approx((x / sw * sw * sw / sw2, sw * sw / sw2))
    c.revert_trusted(*c.validate(y[:50], s[:50], w[:50]))
    rest = DriftCounts(threshold=0.4).update_many(y[50:], s[50:], w[50:])
    for metric in ("recall", "precision"):
        assert c.proportion(metric) == pytest.approx(rest.proportion(metric), rel=1e-12)


def test_a_version_2_drift_counts_state_loads_and_gives_the_same_results():
    # written by the DriftCounts before it reused the confusion matrix: by code TN, FP, FN, TP
    state = {"type": "DriftCounts", "version": 2,
             "params": {"threshold": 0.5, "pos_label": True, "neg_label": None},
             "data": {"w": [4.0, 1.0, 2.0, 3.0], "w2": [6.0, 1.0, 4.0, 5.0], "n": [3, 1, 1, 2]}}
    c = streameval.from_state(json.loads(json.dumps(state)))
    # recall: x = 3 of sw = 5 (TP + FN), sw2 = 9; precision: 3 of 4 (TP + FP), sw2 = 6
    assert c.proportion("recall") == pytest.approx((3 / 5 * 25 / 9, 25 / 9))
    assert c.proportion("precision") == pytest.approx((3 / 4 * 16 / 6, 16 / 6))
    assert c.get() == pytest.approx(3 / 5)
    assert (c.tn, c.fp, c.fn, c.tp) == (4.0, 1.0, 2.0, 3.0)
    assert c.to_state() == state
    c.revert(True, 0.9, 1.0)
    assert c._n == [3, 1, 1, 1] and c._w2 == [6.0, 1.0, 4.0, 4.0]
