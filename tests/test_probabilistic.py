"""LogLoss and Brier against scikit-learn (``log_loss``, ``brier_score_loss``).

Oracles are recomputed from the whole prefix with ``sample_weight``; probabilities of
exactly 0 and 1 check that we clip as sklearn 1.9 does (to machine epsilon). Where
sklearn refuses (all weights zero) we assert NaN.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from streameval import Brier, LogLoss
from streameval.metrics.probabilistic import EPS

HYP = settings(max_examples=50, deadline=None)
TOL = 1e-12
CLASSES = ["a", "b", "c"]


def close(a, b, tol=TOL):
    if math.isnan(b):
        return math.isnan(a)
    return abs(a - b) <= tol * max(1.0, abs(b))


def sk_binary(name, y, p, w):
    if not len(y) or sum(w) == 0:
        return math.nan
    if name == "LogLoss":
        return skm.log_loss(y, p, sample_weight=w, labels=[False, True])
    return skm.brier_score_loss(y, p, sample_weight=w, pos_label=True)


def sk_multiclass(name, y, dicts, w, labels=CLASSES):
    if not len(y) or sum(w) == 0:
        return math.nan
    proba = np.array([[d.get(c, 0.0) for c in labels] for d in dicts])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rows that do not sum to one
        if name == "LogLoss":
            return skm.log_loss(y, proba, sample_weight=w, labels=labels)
        return skm.brier_score_loss(y, proba, sample_weight=w, labels=labels,
                                    scale_by_half=False)


def test_sklearn_clips_to_machine_epsilon():
    # the clipping we copy: sklearn 1.9 clips to [eps, 1 - eps] of float64
    assert EPS == np.finfo(np.float64).eps
    assert skm.log_loss([1, 0], [0.0, 1.0]) == pytest.approx(-math.log(EPS), rel=1e-15)


@pytest.mark.parametrize("name, cls", [("LogLoss", LogLoss), ("Brier", Brier)])
def test_binary_equals_sklearn_after_every_event(name, cls):
    rng = np.random.default_rng(1)
    n = 60
    y = (rng.random(n) < 0.5).tolist()
    p = rng.random(n)
    p[[3, 7, 11, 19]] = [0.0, 1.0, 1e-17, 1.0 - 1e-17]  # clipped by sklearn and by us
    w = rng.choice([0.0, 0.5, 1.0, 2.0], n)
    m = cls()
    assert math.isnan(m.get())
    for i in range(n):
        m.update(y[i], float(p[i]), float(w[i]))
        m._check()
        assert close(m.get(), sk_binary(name, y[: i + 1], p[: i + 1], w[: i + 1])), i


#: weights drawn as normal floats: with a subnormal weight (below 2.2e-308) the weighted
#: loss w * loss underflows (5e-324 * 0.5625 is 5e-324), so the mean is 1 where
#: scikit-learn's (which divides differently) is 0.5; both are meaningless there
WEIGHTS = st.floats(0.0, 5.0, allow_subnormal=False)


@HYP
@given(st.lists(st.tuples(st.booleans(), st.floats(0.0, 1.0), WEIGHTS), max_size=50))
def test_binary_loop_and_batch_equal_sklearn(events):
    y = [e[0] for e in events]
    p = [e[1] for e in events]
    w = [e[2] for e in events]
    for name, cls in (("LogLoss", LogLoss), ("Brier", Brier)):
        loop = cls()
        for e in events:
            loop.update(*e)
        batch = cls().update_many(np.array(y, dtype=bool), np.array(p), np.array(w))
        expected = sk_binary(name, y, p, w)
        assert close(loop.get(), expected, 1e-11), name
        assert close(batch.get(), expected, 1e-11), name


def test_binary_river_dicts_and_pos_label():
    m = LogLoss(pos_label="spam", neg_label="ham")
    m.update("spam", {"spam": 0.8, "ham": 0.2})
    m.update("ham", {"spam": 0.3, "ham": 0.7})
    expected = skm.log_loss(["spam", "ham"], [0.8, 0.3], labels=["ham", "spam"])
    assert close(m.get(), expected)
    b = Brier(pos_label=0)  # 0 is the positive label, 1 the negative
    b.update(0, 0.9)
    b.update(1, 0.2)
    assert close(b.get(), skm.brier_score_loss([0, 1], [0.9, 0.2], pos_label=0))


@pytest.mark.parametrize("cls", [LogLoss, Brier])
def test_binary_validation_is_atomic(cls):
    m = cls()
    m.update(True, 0.3)
    before = m.to_state()
    for bad, match in [((True, 1.5), r"y_pred = 1.5: probability must be in \[0, 1\]"),
                       ((True, -0.1), r"y_pred = -0.1"),
                       ((True, float("nan")), "y_pred = nan"),
                       ((True, {True: 2.0}), r"y_pred = \{True: 2.0\}"),
                       ((2, 0.5), "y_true = 2"),
                       ((True, 0.5, -1.0), "w = -1.0")]:
        with pytest.raises(ValueError, match=match):
            m.update(*bad)
        assert m.to_state() == before
    with pytest.raises(ValueError, match=r"y_pred\[2\] = 1.25"):
        m.update_many([True, False, True], [0.5, 0.5, 1.25])
    with pytest.raises(ValueError, match=r"y_true\[1\] = 3"):
        m.update_many([True, 3, True], [0.5, 0.5, 0.5])
    assert m.to_state() == before


def test_zero_weights_give_nan_where_sklearn_refuses():
    m = LogLoss()
    m.update(True, 0.4, 0.0)
    assert math.isnan(m.get())
    with pytest.raises(ValueError):
        skm.log_loss([1, 0], [0.4, 0.4], sample_weight=[0.0, 0.0])


# ---------------------------------------------------------------- multiclass

DICTS = st.one_of(
    st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3).map(
        lambda v: {c: x / sum(v) if sum(v) else 1 / 3 for c, x in zip(CLASSES, v)}),
    st.sampled_from([{"a": 1.0}, {"b": 0.5, "c": 0.5}, {"a": 0.0, "b": 1.0, "c": 0.0}]),
)
MULTI_EVENTS = st.lists(st.tuples(st.sampled_from(CLASSES), DICTS, WEIGHTS), max_size=40)


@HYP
@given(MULTI_EVENTS)
def test_multiclass_equals_sklearn(events):
    y = [e[0] for e in events]
    d = [e[1] for e in events]
    w = [e[2] for e in events]
    for name, cls in (("LogLoss", LogLoss), ("Brier", Brier)):
        loop = cls(multiclass=True)
        for e in events:
            loop.update(*e)
        loop._check()
        expected = sk_multiclass(name, y, d, w)
        assert close(loop.get(), expected, 1e-11), name
        batch = cls(multiclass=True).update_many(y, d, w)
        assert close(batch.get(), expected, 1e-11), name
        matrix = np.array([[x.get(c, 0.0) for c in CLASSES] for x in d]).reshape(-1, 3)
        arr = cls(multiclass=True, labels=CLASSES).update_many(np.array(y, dtype=object), matrix,
                                                                np.array(w))
        assert close(arr.get(), expected, 1e-11), name


def test_multiclass_brier_is_twice_binary_with_two_classes():
    rng = np.random.default_rng(2)
    p = rng.random(30)
    y = rng.random(30) < 0.5
    b = Brier().update_many(y, p)
    m = Brier(multiclass=True)
    for yi, pi in zip(y.tolist(), p.tolist()):
        m.update(yi, {True: pi, False: 1 - pi})
    assert close(m.get(), 2 * b.get())


def test_multiclass_validation():
    m = LogLoss(multiclass=True)
    m.update("a", {"a": 0.7, "b": 0.3})
    before = m.to_state()
    with pytest.raises(ValueError, match="needs a dict"):
        m.update("a", 0.7)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        m.update("a", {"a": 1.2})
    with pytest.raises(ValueError, match="y_true = None"):
        m.update(None, {"a": 1.0})
    with pytest.raises(ValueError, match=r"y_pred\[1\]"):
        m.update_many(["a", "b"], [{"a": 1.0}, {"b": float("nan")}])
    with pytest.raises(ValueError, match="labels="):
        m.update_many(["a"], np.array([[1.0, 0.0]]))
    assert m.to_state() == before
    fixed = Brier(multiclass=True, labels=["a", "b"])
    with pytest.raises(ValueError, match=r"y_true = 'c': not one of labels"):
        fixed.update("c", {"a": 1.0})
    with pytest.raises(ValueError, match="class 'c' is not one of labels"):
        fixed.update("a", {"a": 0.5, "c": 0.5})
    with pytest.raises(ValueError, match=r"y_true\[1\] = 'z'"):
        fixed.update_many(["a", "z"], np.array([[1.0, 0.0], [0.5, 0.5]]))
    with pytest.raises(ValueError, match=r"y_pred\[0\]"):
        fixed.update_many(["a"], np.array([[1.5, 0.0]]))
    with pytest.raises(ValueError, match=r"shape \(1, 3\)"):
        fixed.update_many(["a"], np.array([[1.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="labels"):
        LogLoss(labels=["a", "b"])
    with pytest.raises(ValueError, match="distinct"):
        LogLoss(multiclass=True, labels=["a", "a"])
    with pytest.raises(ValueError, match="pos_label"):
        LogLoss(multiclass=True, pos_label="a")


def test_worked_example_sklearn_docstring():
    # sklearn's log_loss docstring: 0.21616...
    m = LogLoss(multiclass=True)
    for y, p in zip(["spam", "ham", "ham", "spam"], [.9, .1, .2, .65]):
        m.update(y, {"ham": 1 - p, "spam": p})
    assert round(m.get(), 5) == 0.21616
    b = Brier(multiclass=True)
    for y, p in zip(["eggs", "ham", "spam"],
                    [[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.2, 0.2, 0.6]]):
        b.update(y, dict(zip(["eggs", "ham", "spam"], p)))
    # sklearn's docstring prints 0.146...; by hand: (0.06 + 0.14 + 0.24) / 3
    assert b.get() == pytest.approx(0.44 / 3, abs=1e-12)


@pytest.mark.parametrize("cls", [LogLoss, Brier])
@pytest.mark.parametrize("multiclass", [False, True])
@pytest.mark.parametrize("batch", [False, True])
def test_only_zero_weights_left_is_nan_not_a_residue(cls, multiclass, batch):
    """0.1 + 0.2 - 0.2 - 0.1 is 2.8e-17 in floats: with only a zero-weight event left
    the value is undefined (NaN, where sklearn refuses), not 0.0; the next event then
    counts alone, as sklearn says."""
    if multiclass:
        y, p = ["a", "b", "c"], [{"a": 0.7, "b": 0.3}, {"b": 0.4, "c": 0.6}, {"c": 0.2, "a": 0.8}]
        nxt, sk = ("b", {"b": 0.9, "a": 0.1}), sk_multiclass
    else:
        y, p = [True, False, True], [0.8, 0.4, 0.3]
        nxt, sk = (False, 0.35), sk_binary
    w = [0.1, 0.2, 0.0]
    m = cls(multiclass=multiclass)
    if batch:
        m.update_many(y, p, w)
        m.revert_many(y[:2], p[:2], w[:2])
    else:
        for e in zip(y, p, w):
            m.update(*e)
        m.revert(y[1], p[1], w[1])
        m.revert(y[0], p[0], w[0])
    m._check()
    assert math.isnan(sk(cls.__name__, y[2:], p[2:], w[2:]))
    assert math.isnan(m.get()), m.to_state()
    m.update(*nxt, 0.5)
    assert close(m.get(), sk(cls.__name__, [y[2], nxt[0]], [p[2], nxt[1]], [0.0, 0.5]))


# ------------------------------------------------------------- the trusted path

PROBS = st.sampled_from([0.0, 0.05, 0.3, 0.5, 0.9, 1.0])
TRUSTED_EVENTS = st.lists(st.tuples(st.booleans(), PROBS, st.sampled_from([0.0, 0.5, 1.0, 3.0])),
                          min_size=1, max_size=30)


@pytest.mark.parametrize("cls", [LogLoss, Brier])
@settings(max_examples=40, deadline=None)
@given(events=TRUSTED_EVENTS)
def test_binary_update_trusted_equals_update_many_loop_and_sklearn(cls, events):
    y = [e[0] for e in events]
    p = [e[1] for e in events]
    w = [e[2] for e in events]
    m = cls()
    assert m.score_bounds == (0.0, 1.0) and m.columns == "binary"
    m.update_trusted(*m.validate(y, p, w))
    many = cls().update_many(y, p, w)
    loop = cls()
    for a, b, c in zip(y, p, w):
        loop.update(a, b, c)
    assert m.to_state() == many.to_state()
    if sum(w) == 0:
        assert math.isnan(m.get()) and math.isnan(loop.get())
        return
    assert m.get() == pytest.approx(loop.get(), rel=1e-12, abs=1e-15)
    if cls is LogLoss:
        expected = skm.log_loss(y, p, sample_weight=w, labels=[False, True])
    else:
        expected = skm.brier_score_loss(y, p, sample_weight=w, pos_label=True)
    assert m.get() == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("cls", [LogLoss, Brier])
def test_multiclass_update_trusted_takes_its_own_columns(cls):
    y = ["a", "b", "a", "c"]
    p = [{"a": 0.7, "b": 0.3}, {"b": 0.5, "c": 0.5}, {"a": 0.2, "c": 0.8}, {"c": 1.0}]
    w = [1.0, 2.0, 0.5, 1.0]
    m = cls(multiclass=True)
    assert m.columns is None
    m.update_trusted(*m.validate(y, p, w))
    loop = cls(multiclass=True)
    for a, b, c in zip(y, p, w):
        loop.update(a, b, c)
    proba = np.array([[d.get(k, 0.0) for k in "abc"] for d in p])
    if cls is LogLoss:
        expected = skm.log_loss(y, proba, sample_weight=w, labels=list("abc"))
    else:  # Brier's original score over all classes: sum_c (p_c - [y = c])^2
        onehot = np.array([[k == t for k in "abc"] for t in y], dtype=float)
        expected = np.average(((proba - onehot) ** 2).sum(axis=1), weights=w)
    assert m.get() == pytest.approx(loop.get(), rel=1e-12)
    assert m.get() == pytest.approx(expected, rel=1e-9)
    matrix = cls(multiclass=True, labels=list("abc"))
    matrix.update_trusted(*matrix.validate(y, proba, w))
    assert matrix.get() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("cls", [LogLoss, Brier])
@pytest.mark.parametrize("multiclass", [False, True])
def test_revert_trusted_refuses_atomically_naming_the_event(cls, multiclass):
    if multiclass:
        m = cls(multiclass=True)
        y, p = ["a", "b", "a"], [{"a": 0.6}, {"b": 0.9}, {"a": 0.1}]
    else:
        m = cls()
        y, p = [True, False, True], [0.6, 0.2, 0.9]
    m.update_many(y, p, [1.0, 1.0, 1.0])
    before = m.to_state()
    # a loop of revert would take out events 0 and 1, then find no weight for event 2
    cols = m.validate(y, p, [1.0, 1.0, 1.5])
    with pytest.raises(ValueError) as info:
        m.revert_trusted(*cols)
    assert info.value.index == 2 and str(info.value).startswith("event 2: revert of")
    assert m.to_state() == before


def test_overflowing_weighted_loss_names_its_event_on_every_batch_path():
    """Weights whose products with the losses would overflow (-log(0.1) * 1e308 is inf)
    are over MAX_WEIGHT: update_many and the Monitor refuse them as weights, naming
    event 0; update_trusted (columns validated elsewhere) still names the overflowing
    loss, its last line of defence; the metric is unchanged. Within MAX_WEIGHT no
    loss can overflow: clipped at 1e-15, a log loss is at most 34.6."""
    from streameval import Monitor
    from streameval.validation import MAX_WEIGHT, ValidationError

    y, s, w = [True, False, True], [0.1, 0.2, 0.3], [1e308, 1e308, 1.0]
    assert math.isinf(-math.log(0.1) * 1e308)
    m = LogLoss()
    with pytest.raises(ValidationError, match=r"^w\[0\] = 1e\+308: weight must be") as a:
        m.update_many(y, s, w)
    cols = (np.array(y), np.array(s), np.array(w))
    with pytest.raises(ValidationError, match=r"^y_pred\[0\] = 0\.1: the weighted loss overflows$") as b:
        m.update_trusted(*cols)
    assert a.value.index == b.value.index == 0
    assert m._n == 0 and math.isnan(m.get())
    with pytest.raises(ValidationError, match=r"^w\[0\] = 1e\+308: weight must be") as c:
        Monitor.default(window=10).update_many(y, s, w)
    assert c.value.index == 0
    m.update_many([True, False], [0.0, 1.0], [MAX_WEIGHT, MAX_WEIGHT])
    assert m.get() == pytest.approx(skm.log_loss([1, 0], [0.0, 1.0], sample_weight=[MAX_WEIGHT] * 2))
