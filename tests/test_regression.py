"""Regression metrics against scikit-learn, with weights, and exactness under revert.

Oracles: ``mean_absolute_error``, ``mean_squared_error``, ``root_mean_squared_error``,
``root_mean_squared_log_error`` and ``mean_absolute_percentage_error`` (on the events
with ``y_true != 0``, which MAPE skips) with ``sample_weight``, recomputed from the
whole prefix; for windows, a brute-force recomputation of the events still inside.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from streameval import MAE, MAPE, MSE, RMSE, RMSLE
from streameval.validation import ValidationError

HYP = settings(max_examples=50, deadline=None)
TOL = 1e-12

SK = {
    "MAE": skm.mean_absolute_error,
    "MSE": skm.mean_squared_error,
    "RMSE": skm.root_mean_squared_error,
    "RMSLE": skm.root_mean_squared_log_error,
    "MAPE": skm.mean_absolute_percentage_error,
}
CLASSES = {"MAE": MAE, "MSE": MSE, "RMSE": RMSE, "RMSLE": RMSLE, "MAPE": MAPE}


def close(a, b, tol=TOL):
    if math.isnan(b):
        return math.isnan(a)
    return abs(a - b) <= tol * max(1.0, abs(b))


def expected(name, y, p, w):
    y, p, w = (np.asarray(v, dtype=float) for v in (y, p, w))
    if name == "MAPE":
        keep = y != 0
        y, p, w = y[keep], p[keep], w[keep]
    if not len(y) or w.sum() == 0:
        return math.nan
    return SK[name](y, p, sample_weight=w)


@pytest.mark.parametrize("name", list(SK))
def test_equals_sklearn_after_every_event(name):
    rng = np.random.default_rng(4)
    n = 60
    y = np.round(rng.normal(3, 2, n), 1)
    y[[2, 9]] = 0.0  # MAPE skips these
    p = y + rng.normal(0, 1, n)
    if name == "RMSLE":
        y, p = np.abs(y), np.abs(p)
    w = rng.choice([0.0, 0.5, 1.0, 3.0], n)
    m = CLASSES[name]()
    assert math.isnan(m.get())
    for i in range(n):
        m.update(float(y[i]), float(p[i]), float(w[i]))
        m._check()
        assert close(m.get(), expected(name, y[: i + 1], p[: i + 1], w[: i + 1])), i
    if name == "MAPE":
        assert m.skipped == int(np.count_nonzero(y == 0)) >= 2


VALUES = st.one_of(st.sampled_from([0.0, 1.0, -2.5, 3.0]), st.floats(-1e3, 1e3))
EVENTS = st.lists(st.tuples(VALUES, VALUES, st.floats(0.0, 10.0)), max_size=50)


@HYP
@given(EVENTS)
def test_loop_and_batch_equal_sklearn(events):
    y = [e[0] for e in events]
    p = [e[1] for e in events]
    w = [e[2] for e in events]
    for name, cls in CLASSES.items():
        if name == "RMSLE":
            yy, pp = [abs(v) for v in y], [abs(v) for v in p]
        else:
            yy, pp = y, p
        loop = cls()
        for a, b, c in zip(yy, pp, w):
            loop.update(a, b, c)
        batch = cls().update_many(np.array(yy), np.array(pp), np.array(w))
        want = expected(name, yy, pp, w)
        assert close(loop.get(), want, 1e-10), name
        assert close(batch.get(), want, 1e-10), name
        if name == "MAPE":
            assert loop.skipped == batch.skipped == sum(v == 0 for v in y)


def test_worked_example_sklearn_docstrings():
    y, p = [3, -0.5, 2, 7], [2.5, 0.0, 2, 8]
    assert MAE().update_many(y, p).get() == 0.5
    assert MSE().update_many(y, p).get() == 0.375
    assert RMSE().update_many(y, p).get() == pytest.approx(math.sqrt(0.375), abs=1e-15)


def test_mape_skips_zero_targets_and_reverts_them():
    m = MAPE()
    m.update(0, 5.0)
    assert math.isnan(m.get()) and m.skipped == 1
    m.update(2.0, 3.0)
    assert m.get() == 0.5
    m.revert(0, 5.0)
    assert m.skipped == 0 and m.get() == 0.5
    with pytest.raises(ValueError, match="no skipped event"):
        m.revert(0.0, 1.0)
    with pytest.raises(ValueError, match="y_pred = nan"):
        m.update(0, float("nan"))  # skipped events are validated all the same
    with pytest.raises(ValueError, match="w = -1"):
        m.update(0, 1.0, -1)
    assert m.skipped == 0
    # sklearn divides by machine epsilon instead: a huge number, not a skipped event
    assert skm.mean_absolute_percentage_error([0.0, 2.0], [5.0, 3.0]) > 1e15


def test_rmsle_domain():
    m = RMSLE()
    m.update(0.5, 1.0)
    before = m.to_state()
    with pytest.raises(ValueError, match=r"y_true = -1.0: RMSLE needs values greater than -1"):
        m.update(-1.0, 1.0)
    with pytest.raises(ValueError, match=r"y_pred = -3"):
        m.update(1.0, -3)
    with pytest.raises(ValueError, match=r"y_pred\[1\] = -2.0"):
        m.update_many([1.0, 2.0], [1.0, -2.0])
    assert m.to_state() == before
    with pytest.raises(ValueError, match="-1"):
        skm.root_mean_squared_log_error([-1.0], [1.0])  # sklearn refuses too
    m.update(-0.5, 0.0)  # between -1 and 0 is fine, as in sklearn
    assert close(m.get(), skm.root_mean_squared_log_error([0.5, -0.5], [1.0, 0.0]))


@pytest.mark.parametrize("cls", [MAE, MSE, RMSE, MAPE])
def test_validation_is_atomic(cls):
    m = cls()
    m.update(1.0, 2.0)
    before = m.to_state()
    for bad, match in [((float("nan"), 1.0), "y_true = nan"),
                       ((1.0, float("inf")), "y_pred = inf"),
                       (("1", 1.0), "y_true = '1'"),
                       ((1.0, None), "y_pred = None"),
                       ((1.0, 1.0, float("nan")), "w = nan"),
                       ((1.0, 1.0, True), "w = True")]:
        with pytest.raises(ValueError, match=match):
            m.update(*bad)
        assert m.to_state() == before
    with pytest.raises(ValueError, match=r"y_true\[2\] = nan"):
        m.update_many([1.0, 2.0, float("nan")], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"w\[0\] = -2.0"):
        m.update_many([1.0], [1.0], [-2.0])
    with pytest.raises(ValueError, match="3 elements but y_pred has 2"):
        m.update_many([1.0, 2.0, 3.0], [1.0, 2.0])
    assert m.to_state() == before


def test_overflowing_loss_is_refused():
    m = MSE()
    with pytest.raises(ValueError, match="overflows"):
        m.update(-1e200, 1e200)
    with pytest.raises(ValueError, match=r"y_pred\[1\].*overflows"):
        m.update_many([0.0, -1e200], [0.0, 1e200])
    assert m._n == 0


def test_revert_after_huge_errors_is_exact():
    """A window over heavy-tailed errors: once the outliers leave, the mean of what is
    left equals a brute-force recomputation; a plain running sum would keep their
    rounding residue (shown on the same data)."""
    rng = np.random.default_rng(9)
    y = rng.normal(0, 1, 400)
    p = y + rng.normal(0, 1, 400)
    p[:20] += 1e8  # squared errors ~1e16 among errors ~1
    w = rng.random(400) + 0.5
    m = MSE()
    naive = 0.0
    for i in range(400):
        m.update(float(y[i]), float(p[i]), float(w[i]))
        naive += w[i] * (p[i] - y[i]) ** 2
    for i in range(200):  # the window slides past the outliers
        m.revert(float(y[i]), float(p[i]), float(w[i]))
        naive -= w[i] * (p[i] - y[i]) ** 2
        m._check()
    want = skm.mean_squared_error(y[200:], p[200:], sample_weight=w[200:])
    assert close(m.get(), want, 1e-12)
    naive_mean = naive / w[200:].sum()
    assert abs(naive_mean - want) > 1e-6 * want  # the test can fail without compensation


def test_revert_everything_leaves_exact_zero():
    m = MAE()
    events = [(0.1, 0.7, 0.3), (2.0, -1.0, 1.7), (5.5, 5.0, 0.1)]
    for e in events:
        m.update(*e)
    for e in reversed(events):
        m.revert(*e)
    assert m.to_state()["data"] == {"n": 0, "sum": [0.0, 0.0], "weight": 0.0}
    with pytest.raises(ValueError, match="no such event"):
        m.revert(1.0, 1.0)


def test_merge_and_bigger_is_better():
    a = MAE().update_many([1.0, 2.0], [2.0, 4.0], [1.0, 2.0])
    b = MAE().update_many([3.0], [0.0], [4.0])
    a.merge(b)
    assert close(a.get(), skm.mean_absolute_error([1, 2, 3], [2, 4, 0], sample_weight=[1, 2, 4]))
    assert MAE().bigger_is_better is False
    with pytest.raises(ValueError, match="cannot merge"):
        MAE().merge(MSE())


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(CLASSES)), st.floats(1e3, 1e9), st.floats(0.01, 100.0),
       st.floats(0.5, 10.0), st.floats(0.01, 3.0))
def test_update_then_revert_of_a_huge_event_restores_the_value(name, big, w, y, w0):
    """``revert`` must remove exactly the weighted loss ``update`` added (computed the
    same way, bit for bit), or the residue of a huge loss would swamp what is left."""
    m = CLASSES[name]()
    m.update(y, y + 0.25, w0)
    m.update(y + 1.0, y, 1.0)
    before = m.get()
    m.update(y, y + big, w)  # fast path (floats) ...
    m.revert(np.float64(y), np.float64(y + big), np.float64(w))  # ... and slow path
    assert abs(m.get() - before) <= 1e-12 * before


@pytest.mark.parametrize("name", ["MAE", "MSE", "MAPE"])
def test_batch_then_revert_one_by_one_is_exact(name):
    """A sliding window adds a batch with ``update_many`` and later reverts its events
    one by one: the batch's sum must be as exact as the per-event sums."""
    rng = np.random.default_rng(12)
    y = rng.normal(1, 1, 1000)
    p = y + rng.normal(0, 1, 1000)
    p[:30] += 1e9  # huge errors, all among the events that leave
    w = rng.random(1000) + 0.5
    m = CLASSES[name]().update_many(y, p, w)
    for i in range(500):
        m.revert(float(y[i]), float(p[i]), float(w[i]))
    assert close(m.get(), expected(name, y[500:], p[500:], w[500:]), 1e-12)


def test_rounding_residue_of_a_long_weighted_history_is_not_a_refusal():
    """As for the confusion matrix: counts decide whether an event is there; the
    weight sum's rounding residue after 1M float-weighted events is not a refusal."""
    rng = np.random.default_rng(8)
    n = 1_000_000
    yt = rng.random(n) * 10
    yp = yt + rng.standard_normal(n)
    w = rng.random(n) * 2.0
    m = MAE()
    m.update_many(yt, yp, w)
    for a in range(0, n - 50, 1000):
        b = min(a + 1000, n - 50)
        m.revert_many(yt[a:b], yp[a:b], w[a:b])
    assert m.get() == pytest.approx(
        np.average(np.abs(yt[-50:] - yp[-50:]), weights=w[-50:]), rel=1e-6)
    for i in range(n - 50, n):
        m.revert(yt[i].item(), yp[i].item(), w[i].item())
    m._check()
    assert math.isnan(m.get())
    with pytest.raises(ValueError, match="no such event"):
        m.revert(1.0, 2.0, 1.0)


@pytest.mark.parametrize("name", list(CLASSES))
@pytest.mark.parametrize("how", ["loop", "batch", "merged"])
@pytest.mark.parametrize("weights", [(0.1, 0.2), (0.3, 0.1), (0.1, 0.7)])
def test_only_zero_weights_left_is_nan_not_a_residue(name, how, weights):
    """0.1 + 0.2 - 0.2 - 0.1 is 2.8e-17 in floats: with only zero-weight events left,
    the weight sum must be exactly 0 and the mean undefined (NaN, as the oracle:
    sklearn refuses all-zero weights), not 0.0 or the residue's ratio."""
    y, p = [2.0, 3.0, 4.0], [2.5, 1.0, 7.0]
    w = [*weights, 0.0]
    m = CLASSES[name]()
    if how == "loop":
        for e in zip(y, p, w):
            m.update(*e)
        m.revert(y[1], p[1], w[1])
        m.revert(y[0], p[0], w[0])
    elif how == "batch":
        m.update_many(y, p, w)
        m.revert_many(y[:2], p[:2], w[:2])
    else:
        m.update_many(y[:2], p[:2], w[:2])
        m.merge(CLASSES[name]().update_many(y[2:], p[2:], w[2:]))
        m.revert(y[1], p[1], w[1])
        m.revert(y[0], p[0], w[0])
    m._check()
    assert math.isnan(expected(name, y[2:], p[2:], w[2:]))
    assert math.isnan(m.get()), m.to_state()
    m.update(1.0, 2.0, 0.5)  # and the next event counts alone
    assert close(m.get(), expected(name, [y[2], 1.0], [p[2], 2.0], [0.0, 0.5]))


# ------------------------------------------------------------- the trusted path


TRUSTED = st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.5, 10.0]),
                             st.sampled_from([0.0, 0.25, 1.0, 3.0, 9.5]),
                             st.sampled_from([0.0, 0.5, 1.0, 4.0])), min_size=1, max_size=30)
SK_TRUSTED = {"MAE": skm.mean_absolute_error, "MSE": skm.mean_squared_error,
      "RMSE": lambda a, b, sample_weight: math.sqrt(skm.mean_squared_error(a, b, sample_weight=sample_weight)),
      "RMSLE": lambda a, b, sample_weight: math.sqrt(skm.mean_squared_log_error(a, b, sample_weight=sample_weight))}


@pytest.mark.parametrize("cls", [MAE, MSE, RMSE, RMSLE, MAPE])
@settings(max_examples=40, deadline=None)
@given(events=TRUSTED)
def test_update_trusted_equals_update_many_loop_and_sklearn(cls, events):
    y = [e[0] for e in events]
    p = [e[1] for e in events]
    w = [e[2] for e in events]
    m = cls()
    assert m.columns == "regression"
    m.update_trusted(*m.validate(y, p, w))
    many = cls().update_many(y, p, w)
    loop = cls()
    for a, b, c in zip(y, p, w):
        loop.update(a, b, c)
    assert m.to_state() == many.to_state()
    kept = [(a, b, c) for a, b, c in events if not (cls is MAPE and a == 0.0)]
    if sum(c for _, _, c in kept) == 0:
        assert math.isnan(m.get()) and math.isnan(loop.get())
        return
    assert m.get() == pytest.approx(loop.get(), rel=1e-12, abs=1e-15)
    ya, pa, wa = (np.array(col) for col in zip(*kept))
    if cls is MAPE:
        expected = float(np.average(np.abs(pa - ya) / np.abs(ya), weights=wa))
    else:
        expected = SK_TRUSTED[cls.__name__](ya, pa, sample_weight=wa)
    assert m.get() == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("cls", [MAE, MSE, RMSLE, MAPE])
def test_revert_trusted_refuses_atomically_naming_the_event(cls):
    m = cls().update_many([1.0, 2.0, 3.0], [1.5, 2.0, 2.0])
    before = m.to_state()
    cols = m.validate([1.0, 2.0, 3.0, 4.0], [1.5, 2.0, 2.0, 1.0])  # event 3 never added
    with pytest.raises(ValidationError) as info:
        m.revert_trusted(*cols)
    assert info.value.index == 3 and str(info.value).startswith("event 3: revert of")
    assert m.to_state() == before


def test_validate_holds_the_domain_and_overflow_checks():
    with pytest.raises(ValidationError, match=r"y_pred\[1\] = -2.0: RMSLE needs") as info:
        RMSLE().validate([1.0, 2.0], [1.0, -2.0])
    assert info.value.index == 1
    with pytest.raises(ValidationError, match=r"y_pred\[1\].*overflows") as info:
        MSE().validate([0.0, 0.0], [1.0, 1e200])
    assert info.value.index == 1
