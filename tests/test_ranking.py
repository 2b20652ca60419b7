"""ROCAUC, Gini, AveragePrecision, InterpolatedAP, ElevenPointAP, ROCCurve, PRCurve.

Oracles: scikit-learn (``roc_auc_score``, ``average_precision_score``, ``roc_curve``,
``precision_recall_curve``) on the live events after every update; the interpolated
variants from scikit-learn's PR curve through an independent loop; the worked examples
of DESIGN.md section 3; brute force for the binned bounds.
"""

import json
import math
import random
import warnings
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import (
    average_precision_score,
    precision_recall_curve,
    roc_auc_score,
    roc_curve,
)

import streameval
from streameval import (
    ROCAUC,
    AveragePrecision,
    ElevenPointAP,
    Gini,
    InterpolatedAP,
    PRCurve,
    ROCCurve,
    from_state,
)
from streameval.metrics import scoreorder, ranking as ranking_module
from streameval.metrics.base import Metric
from streameval.validation import ValidationError

TOL = 1e-12


@pytest.fixture(autouse=True)
def _quiet_sklearn():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# every test here in both bulk layouts of the score order (see conftest.layout)
pytestmark = pytest.mark.usefixtures("layout")


# ------------------------------------------------------------------ oracles


def sk_curve_points(y, s, w):
    """(precision, recall) at each distinct threshold, high to low (sklearn's points
    without its appended (1, 0) end)."""
    precision, recall, _ = precision_recall_curve(y, s, sample_weight=w)
    return precision[:-1][::-1], recall[:-1][::-1]


def oracle_interpolated_ap(y, s, w=None):
    precision, recall = sk_curve_points(y, s, w)
    total, prev_r = 0.0, 0.0
    for j in range(len(recall)):
        best = max(precision[j:])  # best precision at this or any higher recall
        total += (recall[j] - prev_r) * best
        prev_r = recall[j]
    return total


def oracle_eleven_point(y, s, w=None):
    precision, recall = sk_curve_points(y, s, w)
    total = 0.0
    for k in range(11):
        reach = [p for p, r in zip(precision, recall) if r >= k / 10 - 1e-12]  # (RECALL_SLACK)
        total += max(reach) if reach else 0.0
    return total / 11


def oracle(name, y, s, w=None):
    """The reference value of metric ``name`` on the events, or None if undefined."""
    y = np.asarray(y, dtype=bool)
    s = np.asarray(s, dtype=float)
    w = None if w is None else np.asarray(w, dtype=float)
    wt = np.ones(len(y)) if w is None else w
    has_pos, has_neg = (wt[y] > 0).any(), (wt[~y] > 0).any()
    if name in ("ROCAUC", "Gini"):
        if not (has_pos and has_neg):
            return None
        auc = roc_auc_score(y, s, sample_weight=w)
        return auc if name == "ROCAUC" else 2 * auc - 1
    if not has_pos:
        return None
    if name == "AveragePrecision":
        return average_precision_score(y, s, sample_weight=w)
    if name == "InterpolatedAP":
        return oracle_interpolated_ap(y, s, w)
    if name == "ElevenPointAP":
        return oracle_eleven_point(y, s, w)
    raise AssertionError(name)


SCALARS = [ROCAUC, Gini, AveragePrecision, InterpolatedAP, ElevenPointAP]


def assert_value(metric, y, s, w=None):
    expected = oracle(type(metric).__name__, y, s, w)
    got = metric.get()
    if expected is None:
        assert math.isnan(got), (type(metric).__name__, got)
    else:
        assert abs(got - expected) <= TOL, (type(metric).__name__, got, expected)


def assert_curves(roc, pr, y, s, w=None):
    y = np.asarray(y, dtype=bool)
    fpr, tpr, thr = roc.get()
    efpr, etpr, ethr = roc_curve(y, s, sample_weight=w, drop_intermediate=False)
    np.testing.assert_array_equal(thr, ethr)
    np.testing.assert_allclose(fpr, efpr, rtol=0, atol=TOL)
    np.testing.assert_allclose(tpr, etpr, rtol=0, atol=TOL)
    p, r, t = pr.get()
    ep, er, et = precision_recall_curve(y, s, sample_weight=w, drop_intermediate=False)
    np.testing.assert_array_equal(t, et)
    np.testing.assert_allclose(p, ep, rtol=0, atol=TOL)
    np.testing.assert_allclose(r, er, rtol=0, atol=TOL)


def stream(seed, n, decimals=2, weighted=False, p_pos=0.3):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < p_pos
    s = np.round(rng.random(n), decimals)
    w = np.round(rng.uniform(0.0, 3.0, n), 2) if weighted else None
    return y, s, w


# ------------------------------------------------------------- worked examples


def test_worked_example_auc_and_ap():
    y = [1, 0, 0, 0, 1, 0, 1, 0]
    s = [.9, .8, .3, .1, .4, .9, .66, .7]
    auc, ap = ROCAUC(), AveragePrecision()
    for yi, si in zip(y, s):
        auc.update(yi, si)
        ap.update(yi, si)
    assert round(auc.get(), 6) == 0.566667
    assert round(ap.get(), 6) == 0.466667
    # by hand: 15 pairs; positive .9 beats 4, ties 1; .4 beats 2; .66 beats 2 -> 8.5/15
    assert auc.get() == pytest.approx(8.5 / 15, abs=TOL)
    assert Gini().update_many(y, s).get() == pytest.approx(2 * 8.5 / 15 - 1, abs=TOL)


def test_worked_example_perfect_ranking():
    m = ROCAUC()
    for yi, si in zip([1, 0, 1, 0, 0, 0], [.9, .7, .8, .6, .5, .4]):
        m.update(yi, si)
    assert m.get() == 1.0


def test_worked_example_ranked_items_ap():
    relevant = {1, 2, 4, 6, 10}
    m = AveragePrecision()
    for rank in range(1, 11):
        m.update(rank in relevant, 1.0 - rank / 100)
    # (1/1 + 2/2 + 3/4 + 4/6 + 5/10) / 5
    assert m.get() == pytest.approx((1 + 1 + 0.75 + 4 / 6 + 0.5) / 5, abs=TOL)
    assert round(m.get(), 6) == 0.783333


def test_interpolated_by_hand():
    # labels by rank 1,0,1,1,0: precisions 1, 1/2, 2/3, 3/4, 3/5
    y, s = [1, 0, 1, 1, 0], [.9, .8, .7, .6, .5]
    assert AveragePrecision().update_many(y, s).get() == pytest.approx((1 + 2 / 3 + .75) / 3)
    assert InterpolatedAP().update_many(y, s).get() == pytest.approx((1 + .75 + .75) / 3)
    # recall 1/3 covers r = 0..0.3 (precision 1), 2/3 covers .4-.6 (.75), 1 covers .7-1
    assert ElevenPointAP().update_many(y, s).get() == pytest.approx((4 + 7 * .75) / 11)


def test_eleven_point_recall_on_a_level_reaches_it_however_the_sums_were_rounded():
    """Decimal weights: the positives 1.7 and 1.9 of 4.5 give a recall of exactly 0.8,
    computed as 0.7999999999999999 from fresh sums and as 0.8 after other events at
    the same scores were added and reverted (hypothesis found it: revert was not the
    exact inverse). Oracle: the 11-point AP in exact fractions of the decimal weights."""
    from fractions import Fraction as F
    y = [False, True, False, True, False, False, False, False, True, False]
    s = [0.23, 0.75, 0.2, 0.34, 0.14, 0.68, 0.03, 0.18, 0.64, 0.44]
    w = ["1.3", "1.7", "2.2", "0.9", "2.5", "1.8", "1.9", "2.7", "1.9", "1.5"]
    order = sorted(range(len(s)), key=lambda i: -s[i])  # distinct scores
    P = sum(F(w[i]) for i in range(len(y)) if y[i])
    tp = fp = F(0)
    points = []
    for i in order:
        tp, fp = (tp + F(w[i]), fp) if y[i] else (tp, fp + F(w[i]))
        points.append((tp / P, tp / (tp + fp)))
    want = sum(max([p for r, p in points if r >= F(k, 10)], default=0) for k in range(11)) / 11
    wf = [float(v) for v in w]
    fresh = ElevenPointAP().update_many(y, s, wf)
    churned = ElevenPointAP().update_many(y, s, wf)
    extra = [(True, 0.64, 0.3), (False, 0.64, 0.7), (True, 0.75, 0.1), (False, 0.34, 2.9)]
    for yi, si, wi in extra:
        churned.update(yi, si, wi)
    for yi, si, wi in reversed(extra):
        churned.revert(yi, si, wi)
    assert fresh.get() == pytest.approx(float(want), abs=1e-12)
    assert churned.get() == pytest.approx(float(want), abs=1e-12)


# ----------------------------------------------------- prefix equality, sklearn


@pytest.mark.parametrize("decimals", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_prefix_equality_after_every_update(decimals, weighted):
    y, s, w = stream(decimals * 10 + weighted, 200, decimals, weighted)
    metrics = [cls() for cls in SCALARS]
    roc, pr = ROCCurve(), PRCurve()
    for i in range(len(y)):
        wi = 1.0 if w is None else float(w[i])
        for m in metrics + [roc, pr]:
            m.update(bool(y[i]), float(s[i]), wi)
        wp = None if w is None else w[: i + 1]
        for m in metrics:
            assert_value(m, y[: i + 1], s[: i + 1], wp)
        if y[: i + 1].any() and (~y[: i + 1]).any() and (wp is None or wp.sum() > 0):
            assert_curves(roc, pr, y[: i + 1], s[: i + 1], wp)
    for m in metrics:
        m._check()


@pytest.mark.parametrize("weighted", [False, True])
def test_prefix_equality_with_random_reverts(weighted):
    y, s, w = stream(5 + weighted, 600, 2, weighted)
    metrics = [cls() for cls in SCALARS]
    rng = random.Random(11)
    live = []
    for i in range(len(y)):
        ev = (bool(y[i]), float(s[i]), 1.0 if w is None else float(w[i]))
        live.append(ev)
        for m in metrics:
            m.update(*ev)
        if live and rng.random() < 0.35:
            gone = live.pop(rng.randrange(len(live)))
            for m in metrics:
                m.revert(*gone)
        if i % 3 == 0:
            ly, ls, lw = (np.array(c) for c in zip(*live)) if live else ([], [], [])
            for m in metrics:
                assert_value(m, ly, ls, lw if weighted else None)
    for m in metrics:
        m._check()


def test_long_stream_with_interleaved_reverts_stays_exact():
    """50 000 events, a third reverted at random, fractional weights: still 1e-12."""
    rng = np.random.default_rng(2024)
    n = 50_000
    y = rng.random(n) < 0.2
    s = np.round(rng.random(n), 3)
    w = rng.uniform(0.05, 4.0, n)
    auc, ap = ROCAUC(), AveragePrecision()
    alive = np.zeros(n, dtype=bool)
    order = rng.permutation(n)
    removals = set(order[: n // 3].tolist())
    pending = []
    for i in range(n):
        auc.update(bool(y[i]), float(s[i]), float(w[i]))
        ap.update(bool(y[i]), float(s[i]), float(w[i]))
        alive[i] = True
        if i in removals:
            pending.append(i)
        if pending and rng.random() < 0.5:
            j = pending.pop(0)
            auc.revert(bool(y[j]), float(s[j]), float(w[j]))
            ap.revert(bool(y[j]), float(s[j]), float(w[j]))
            alive[j] = False
        if i % 5000 == 4999:
            a = alive
            assert abs(auc.get() - roc_auc_score(y[a], s[a], sample_weight=w[a])) <= TOL
            assert abs(ap.get() - average_precision_score(y[a], s[a], sample_weight=w[a])) <= TOL
    auc._check()


def test_unit_weights_are_exact_integers():
    """With w=1 the state is integer arithmetic: U is exactly the pair count."""
    y, s, _ = stream(3, 4000, 2)
    m = ROCAUC().update_many(y, s)
    pos, neg = s[y], s[~y]
    u = sum(float((p > neg).sum()) + 0.5 * float((p == neg).sum()) for p in pos)
    assert m._order.u == u
    assert m.get() == u / (len(pos) * len(neg))


# -------------------------------------------------------------- batches


@pytest.mark.parametrize("cls", SCALARS + [ROCCurve, PRCurve])
@pytest.mark.parametrize("weighted", [False, True])
def test_update_many_equals_loop(cls, weighted):
    y, s, w = stream(8, 700, 2, weighted)
    loop = cls()
    for i in range(len(y)):
        loop.update(bool(y[i]), float(s[i]), 1.0 if w is None else float(w[i]))
    # one batch into an empty metric, then batches of several sizes into a filled one
    one = cls().update_many(y, s, w)
    parts = cls()
    for a, b in [(0, 3), (3, 400), (400, 410), (410, 700)]:
        parts.update_many(y[a:b], s[a:b], None if w is None else w[a:b])
    for m in (one, parts):
        m._check()
        got, want = m.get(), loop.get()
        if isinstance(want, tuple):
            for g, e in zip(got, want):
                np.testing.assert_allclose(g, e, rtol=0, atol=TOL)
        else:
            assert got == pytest.approx(want, abs=TOL)
    if cls in (ROCAUC, Gini, AveragePrecision):
        assert_value(one, y, s, w)


def test_update_many_accepts_lists_bools_and_proba_dicts():
    y = [True, False, True, False]
    probas = [{True: .8, False: .2}, {True: .3, False: .7}, {True: .6, False: .4}, {}]
    m = ROCAUC().update_many(y, probas)
    assert m.get() == roc_auc_score(y, [.8, .3, .6, 0.0])
    assert ROCAUC().update_many(np.array([1, 0]), np.array([0.2, 0.1])).get() == 1.0
    assert math.isnan(ROCAUC().update_many([], []).get())


def test_update_many_large_batch_matches_sklearn():
    rng = np.random.default_rng(0)
    y = rng.random(200_000) < 0.1
    s = rng.random(200_000)  # all distinct: the no-duplicates path
    w = rng.uniform(0, 2, 200_000)
    assert abs(ROCAUC().update_many(y, s).get() - roc_auc_score(y, s)) <= TOL
    assert abs(ROCAUC().update_many(y, s, w).get()
               - roc_auc_score(y, s, sample_weight=w)) <= TOL
    assert abs(AveragePrecision().update_many(y, s, w).get()
               - average_precision_score(y, s, sample_weight=w)) <= TOL


# -------------------------------------------------------------- validation


@pytest.mark.parametrize("cls", SCALARS + [ROCCurve, PRCurve])
def test_bad_events_raise_and_change_nothing(cls):
    m = cls()
    m.update_many([1, 0, 1], [.2, .4, .9])
    before = json.dumps(m.to_state())
    bad_calls = [
        ("update", (1, float("nan")), "y_pred = nan"),
        ("update", (1, float("inf")), "y_pred = inf"),
        ("update", (1, "0.3"), "y_pred = '0.3'"),
        ("update", (1, None), "y_pred = None"),
        ("update", (2, 0.3), "y_true = 2"),
        ("update", ("yes", 0.3), "y_true = 'yes'"),
        ("update", ([1], 0.3), r"y_true = \[1\]"),
        ("update", (1, 0.3, -1.0), "w = -1.0"),
        ("update", (1, 0.3, float("nan")), "w = nan"),
        ("update", (1, 0.3, 1e16), r"w = 1e\+16: weight must be a finite number between 0 and 1e\+12"),
        ("update", (1, {True: float("nan")}), "y_pred"),
        ("revert", (1, 0.3), "no such event"),
        ("revert", (0, 0.9), "no such event"),
        ("revert", (1, float("nan")), "y_pred = nan"),
        ("update_many", ([1, 0, 2], [.1, .2, .3]), r"y_true\[2\] = 2"),
        ("update_many", ([1, 0, 1], [.1, float("nan"), .3]), r"y_pred\[1\] = nan"),
        ("update_many", ([1, 0], [.1, .2], [1.0, -2.0]), r"w\[1\] = -2.0"),
        ("update_many", ([1, 0], [.1, .2], [1.0, 1e155]), r"w\[1\] = 1e\+155"),
        ("update_many", ([1, 0], [.1]), "2 elements"),
    ]
    for method, args, msg in bad_calls:
        with pytest.raises(ValueError, match=msg):
            getattr(m, method)(*args)
        assert json.dumps(m.to_state()) == before, (method, args)
    m._check()


def test_custom_labels():
    m = ROCAUC(pos_label="spam", neg_label="ham")
    m.update_many(["spam", "ham", "ham", "spam"], [.9, .1, .8, .3])
    assert m.get() == roc_auc_score([1, 0, 0, 1], [.9, .1, .8, .3])
    with pytest.raises(ValueError, match="'eggs'"):
        m.update("eggs", 0.5)
    with pytest.raises(ValueError, match="neg_label"):
        ROCAUC(pos_label="spam")


def test_bad_parameters():
    with pytest.raises(ValueError, match="bins"):
        ROCAUC(bins=0)
    with pytest.raises(ValueError, match="bins"):
        AveragePrecision(bins=2.5)
    with pytest.raises(ValueError, match="average"):
        ROCAUC(average="samples")


# ------------------------------------------------------------ undefined cases


@pytest.mark.parametrize("cls", SCALARS)
def test_undefined_cases_are_nan(cls):
    assert math.isnan(cls().get())  # empty
    only_neg = cls().update_many([0, 0], [.3, .7])
    assert math.isnan(only_neg.get())
    only_pos = cls().update_many([1, 1], [.3, .7])
    if cls in (ROCAUC, Gini):
        assert math.isnan(only_pos.get())
    else:  # AP of positives only is 1, as scikit-learn says
        assert only_pos.get() == 1.0 == average_precision_score([1, 1], [.3, .7])
    zero_weight_pos = cls().update_many([1, 0], [.3, .7], [0.0, 1.0])
    assert math.isnan(zero_weight_pos.get())
    # back to undefined after reverting the last positive
    m = cls()
    m.update(1, .4)
    m.update(0, .2)
    m.revert(1, .4)
    assert math.isnan(m.get())
    m._check()


def test_curves_when_undefined():
    fpr, tpr, thr = ROCCurve().update_many([1, 1], [.2, .5]).get()
    assert np.isnan(fpr).all() and tpr.tolist() == [0.0, 0.5, 1.0]
    assert thr.tolist() == [np.inf, .5, .2]
    p, r, t = PRCurve().update_many([0, 0], [.2, .5]).get()
    ep, er, et = precision_recall_curve([0, 0], [.2, .5])
    assert p.tolist() == ep.tolist() and r.tolist() == er.tolist() and t.tolist() == et.tolist()
    p, r, t = PRCurve().get()
    assert p.tolist() == [1.0] and r.tolist() == [0.0] and t.tolist() == []


def test_zero_weight_events_are_not_thresholds():
    y, s, w = [1, 0, 1, 0], [.9, .5, .3, .1], [1.0, 0.0, 2.0, 1.0]
    fpr, tpr, thr = ROCCurve().update_many(y, s, w).get()
    efpr, etpr, ethr = roc_curve(y, s, sample_weight=w, drop_intermediate=False)
    assert thr.tolist() == ethr.tolist() and np.allclose(fpr, efpr) and np.allclose(tpr, etpr)
    p, r, t = PRCurve().update_many(y, s, w).get()
    ep, er, et = precision_recall_curve(y, s, sample_weight=w)
    assert t.tolist() == et.tolist() and np.allclose(p, ep) and np.allclose(r, er)


# ------------------------------------------------------------ merge and state


@pytest.mark.parametrize("cls", SCALARS + [ROCCurve, PRCurve])
def test_merge_of_partitions_equals_one_metric(cls):
    y, s, w = stream(21, 900, 2, weighted=True)
    whole = cls().update_many(y, s, w)
    parts = [cls() for _ in range(4)]
    for i in range(len(y)):
        parts[i % 4].update(bool(y[i]), float(s[i]), float(w[i]))
    merged = parts[0].merge(parts[1]).merge(parts[2].merge(parts[3]))
    merged._check()
    got, want = merged.get(), whole.get()
    if isinstance(want, tuple):
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=0, atol=TOL)
    else:
        assert abs(got - want) <= TOL


def test_merge_refuses_other_types_and_parameters():
    with pytest.raises(ValueError, match="cannot merge"):
        ROCAUC().merge(AveragePrecision())
    with pytest.raises(ValueError, match="parameters"):
        ROCAUC().merge(ROCAUC(bins=10))
    with pytest.raises(ValueError, match="parameters"):
        ROCAUC().merge(ROCAUC(pos_label=0))


@pytest.mark.parametrize("make", [
    ROCAUC, Gini, AveragePrecision, InterpolatedAP, ElevenPointAP, ROCCurve, PRCurve,
    lambda: ROCAUC(bins=16), lambda: AveragePrecision(bins=8), lambda: Gini(bins=4),
    lambda: ROCAUC(pos_label="a", neg_label="b"),
])
def test_state_round_trip(make):
    m = make()
    y, s, w = stream(4, 300, 3, weighted=True)
    if m.pos_label == "a":
        y = np.where(y, "a", "b")
    m.update_many(y, s, w)
    state = json.loads(json.dumps(m.to_state()))
    assert state["type"] == type(m).__name__ and state["version"] == 1
    back = from_state(state)
    assert type(back) is type(m)
    back._check()
    assert back.to_state() == m.to_state()
    got, want = back.get(), m.get()
    if isinstance(want, tuple):
        for g, e in zip(got, want):
            np.testing.assert_array_equal(g, e)
    else:
        assert got == want
    # and both continue identically
    m.revert(y[0], float(s[0]), float(w[0]))
    back.revert(y[0], float(s[0]), float(w[0]))
    assert back.to_state() == m.to_state()


def test_bad_state_is_refused():
    state = ROCAUC(bins=4).update_many([1, 0], [.9, .1]).to_state()
    state["data"]["scores"] = [0.5, 3.0]
    with pytest.raises(ValueError, match="bin"):
        from_state(state)
    state = ROCAUC().to_state()
    state["data"] = {"scores": [1.0]}
    with pytest.raises(ValueError, match="bad score-order state"):
        from_state(state)
    # multiclass: a micro state without its micro order, or not a dict at all
    state = ROCAUC(average="micro").update_many(["a", "b"], [{"a": .9}, {"b": .8}]).to_state()
    del state["data"]["micro"]
    with pytest.raises(ValueError, match="bad multiclass state"):
        from_state(state)
    state["data"] = None
    with pytest.raises(ValueError, match="bad multiclass state"):
        from_state(state)


# ------------------------------------------------------------------- binned


def test_binned_equals_exact_auc_of_binned_scores():
    y, s, w = stream(31, 2000, 4, weighted=True)
    for bins in (1, 3, 10, 100):
        b = np.minimum(np.floor(s * bins), bins - 1)
        auc = ROCAUC(bins=bins).update_many(y, s, w)
        ap = AveragePrecision(bins=bins).update_many(y, s, w)
        assert abs(auc.get() - roc_auc_score(y, b, sample_weight=w)) <= TOL
        assert abs(ap.get() - average_precision_score(y, b, sample_weight=w)) <= TOL
        assert len(auc) <= bins and len(ap) <= bins


def auc_bound_holds(y, s, w, bins):
    m = ROCAUC(bins=bins).update_many(y, s, w)
    exact = roc_auc_score(y, s, sample_weight=w)
    assert abs(m.get() - exact) <= m.error_bound() + TOL
    return m, exact


def ap_bound_holds(y, s, w, bins):
    m = AveragePrecision(bins=bins).update_many(y, s, w)
    exact = average_precision_score(y, s, sample_weight=w)
    assert abs(m.get() - exact) <= m.error_bound() + TOL, (m.get(), exact, m.error_bound())
    return m, exact


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("bins", [2, 7, 50])
def test_binned_bounds_hold_on_random_streams(seed, bins):
    y, s, w = stream(seed, 800, 6, weighted=bool(seed % 2))
    auc_bound_holds(y, s, w, bins)
    ap_bound_holds(y, s, w, bins)


@pytest.mark.parametrize("bins", [1, 4, 10])
def test_binned_bounds_hold_and_are_attained_on_adversarial_streams(bins):
    """Inside every bin, all positives above all negatives (then below): the order
    the bins cannot see. The AUC bound is attained exactly."""
    rng = np.random.default_rng(bins)
    n_per = 30
    lo = np.arange(bins) / bins
    width = 1.0 / bins
    for positives_on_top in (True, False):
        ys, ss = [], []
        for k in range(bins):
            pos = rng.integers(1, n_per)
            neg = n_per - pos
            top = lo[k] + width * np.linspace(0.55, 0.95, n_per)[:pos]
            bottom = lo[k] + width * np.linspace(0.05, 0.45, n_per)[:neg]
            if not positives_on_top:
                top, bottom = bottom, top
            ys += [True] * pos + [False] * neg
            ss += list(top) + list(bottom)
        y, s = np.array(ys), np.array(ss)
        m, exact = auc_bound_holds(y, s, None, bins)
        assert abs(m.get() - exact) == pytest.approx(m.error_bound(), abs=1e-12)
        ap_bound_holds(y, s, None, bins)


def test_binned_clamps_out_of_range_scores_and_bound_still_holds():
    rng = np.random.default_rng(9)
    y = rng.random(1000) < 0.4
    s = rng.normal(0.5, 1.5, 1000)  # margin-like scores, most outside [0, 1]
    m, _ = auc_bound_holds(y, s, None, 10)
    ap_bound_holds(y, s, None, 10)
    assert len(m) <= 10
    one = ROCAUC(bins=10)
    one.update(True, 7.0)  # clamped into the top bin
    one.update(False, -7.0)  # and the bottom one
    assert one.get() == 1.0 and one.error_bound() == 0.0


def test_binned_memory_is_fixed_on_a_long_stream():
    rng = np.random.default_rng(1)
    m = AveragePrecision(bins=64)
    for _ in range(20):
        m.update_many(rng.random(5000) < 0.3, rng.random(5000))
    assert len(m) <= 64 and len(m.to_state()["data"]["scores"]) <= 64


def test_exact_mode_error_bound_is_zero():
    m = ROCAUC().update_many([1, 0], [.6, .4])
    assert m.error_bound() == 0.0
    assert math.isnan(ROCAUC().error_bound()) and math.isnan(AveragePrecision().error_bound())
    same_bin = Gini(bins=2).update_many([1, 0], [.6, .9])
    assert same_bin.get() == 0.0 and same_bin.error_bound() == 1.0  # order unknown


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.floats(-0.2, 1.2), st.sampled_from([0.5, 1.0, 3.0])),
                min_size=2, max_size=60), st.integers(1, 12))
def test_hypothesis_binned_bounds(events, bins):
    y = np.array([e[0] for e in events])
    s = np.array([e[1] for e in events])
    w = np.array([e[2] for e in events])
    if y.all() or not y.any():
        return
    auc_bound_holds(y, s, w, bins)
    ap_bound_holds(y, s, w, bins)


# ---------------------------------------------------------- hypothesis laws

label_score_weight = st.tuples(
    st.booleans(), st.sampled_from([0.0, 0.1, 0.2, 0.5, 0.55, 0.9, 1.0]),
    st.sampled_from([0.0, 0.25, 1.0, 2.0, 3.5]))


def value_of(m):
    v = m.get()
    return tuple(np.asarray(a) for a in v) if isinstance(v, tuple) else v


def same(a, b):
    if isinstance(a, tuple):
        return all(np.allclose(x, y, rtol=0, atol=1e-9, equal_nan=True) for x, y in zip(a, b))
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9


ALL = [ROCAUC, Gini, AveragePrecision, InterpolatedAP, ElevenPointAP, ROCCurve, PRCurve,
       lambda: ROCAUC(bins=5), lambda: AveragePrecision(bins=5)]


@settings(max_examples=80, deadline=None)
@given(st.lists(label_score_weight, max_size=40), st.lists(label_score_weight, max_size=20),
       st.sampled_from(range(len(ALL))), st.booleans())
def test_hypothesis_update_revert_merge_batch(base, extra, which, defer):
    with pytest.MonkeyPatch.context() as mp:
        if defer:  # every update deferred, flushed every 5
            mp.setattr(ranking_module, "DEFER_AFTER", 0)
            mp.setattr(ranking_module, "DEFER_LIMIT", 5)
        check_laws(ALL[which], base, extra)


def check_laws(make, base, extra):
    a = make()
    for e in base:
        a.update(*e)
    if base:
        y, s, w = zip(*base)
        b = make().update_many(list(y), list(s), list(w))  # batch == loop
        assert same(value_of(a), value_of(b))
        if isinstance(a, (ROCAUC, AveragePrecision)) and not isinstance(a, Gini):
            assert_value(a, y, s, w) if a.bins is None else None
    # update then revert is the identity
    for e in extra:
        a.update(*e)
    for e in reversed(extra):
        a.revert(*e)
    a._check()
    c = make()
    for e in base:
        c.update(*e)
    assert same(value_of(a), value_of(c))
    # merge == one metric fed everything, in either order
    d1, d2 = make(), make()
    for e in base:
        d1.update(*e)
    for e in extra:
        d2.update(*e)
    whole = make()
    for e in base + extra:
        whole.update(*e)
    left = make().merge(d1).merge(d2)
    right = make().merge(d2).merge(d1)
    assert same(value_of(left), value_of(whole)) and same(value_of(right), value_of(whole))
    assert same(value_of(from_state(json.loads(json.dumps(whole.to_state())))),
                value_of(whole))


# ------------------------------------------------------------ river interop


def test_progressive_val_score_with_a_river_model():
    from river import datasets, evaluate, linear_model, preprocessing

    dataset = list(datasets.Phishing().take(600))
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    metric = evaluate.progressive_val_score(dataset, model, ROCAUC())
    # the oracle: the same model replayed by hand, scored by sklearn
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    ys, ps = [], []
    for x, y in dataset:
        ps.append(model.predict_proba_one(x).get(True, 0.0))
        ys.append(y)
        model.learn_one(x, y)
    assert abs(metric.get() - roc_auc_score(ys, ps)) <= TOL


def test_river_rolling_window_is_exact():
    from river import utils

    y, s, _ = stream(13, 400, 2)
    rolling = utils.Rolling(ROCAUC, window_size=50)
    rolling_ap = utils.Rolling(AveragePrecision, window_size=50)
    for i in range(len(y)):
        rolling.update(bool(y[i]), float(s[i]))
        rolling_ap.update(bool(y[i]), float(s[i]))
        lo = max(0, i - 49)
        assert_value(rolling.obj, y[lo : i + 1], s[lo : i + 1])
        assert_value(rolling_ap.obj, y[lo : i + 1], s[lo : i + 1])


def test_public_names_and_repr():
    for name in ["ROCAUC", "Gini", "AveragePrecision", "InterpolatedAP", "ElevenPointAP",
                 "ROCCurve", "PRCurve"]:
        assert getattr(streameval, name).__module__ == "streameval.metrics.ranking"
    assert repr(ROCAUC().update_many([1, 0], [.8, .2])) == "ROCAUC: 1.000000"
    assert ROCAUC().bigger_is_better and not ROCAUC().requires_labels


# --------------------------------------------------------------- multiclass

CLASSES = ["a", "b", "c"]
# a few probability rows (sum to 1) so that many scores tie
ROWS = [(.7, .2, .1), (.2, .7, .1), (.1, .2, .7), (.4, .4, .2), (.2, .2, .6),
        (.5, .3, .2), (.3, .3, .4), (.1, .1, .8)]


def mc_stream(seed, n, weighted=False):
    rng = np.random.default_rng(seed)
    y = rng.choice(CLASSES, size=n, p=[.5, .3, .2])
    rows = np.array([ROWS[j] for j in rng.integers(0, len(ROWS), n)])
    w = np.round(rng.uniform(0, 3, n), 1) if weighted else None
    return y, rows, w


def dicts(rows, classes=CLASSES):
    return [dict(zip(classes, map(float, r))) for r in rows]


def mc_oracle(kind, average, y, rows, w):
    """sklearn on one-hot labels; None unless every class is present."""
    onehot = (np.asarray(y)[:, None] == np.array(CLASSES)[None, :]).astype(int)
    wt = np.ones(len(y)) if w is None else np.asarray(w)
    if not all(((onehot[:, j] == 1) & (wt > 0)).any() for j in range(len(CLASSES))):
        return None
    if kind == "auc":
        if average != "micro" and np.allclose(np.sum(rows, axis=1), 1):
            # the multiclass API itself (it insists that rows sum to 1)
            return roc_auc_score(y, rows, multi_class="ovr", average=average,
                                 labels=CLASSES, sample_weight=w)
        return roc_auc_score(onehot, rows, average=average, sample_weight=w)
    return average_precision_score(onehot, rows, average=average, sample_weight=w)


@pytest.mark.parametrize("average", ["macro", "weighted", "micro"])
@pytest.mark.parametrize("weighted", [False, True])
def test_multiclass_prefix_equality_with_reverts(average, weighted):
    y, rows, w = mc_stream(len(average) + weighted, 300, weighted)
    auc, ap = ROCAUC(average=average), AveragePrecision(average=average)
    rng = random.Random(5)
    live = []
    for i in range(len(y)):
        ev = (y[i], dict(zip(CLASSES, map(float, rows[i]))), 1.0 if w is None else float(w[i]))
        auc.update(*ev)
        ap.update(*ev)
        live.append(i)
        if rng.random() < 0.25:
            j = live.pop(rng.randrange(len(live)))
            gone = (y[j], dict(zip(CLASSES, map(float, rows[j]))),
                    1.0 if w is None else float(w[j]))
            auc.revert(*gone)
            ap.revert(*gone)
        if i % 4 == 0:
            idx = np.array(live, dtype=int)
            lw = None if w is None else w[idx]
            for kind, m in (("auc", auc), ("ap", ap)):
                want = mc_oracle(kind, average, y[idx], rows[idx], lw)
                if want is not None:
                    assert abs(m.get() - want) <= TOL, (kind, i, m.get(), want)
    auc._check()
    ap._check()


def test_multiclass_classes_appearing_late():
    """A class first seen late: earlier events scored it 0 (absent from their dicts)."""
    y, rows, _ = mc_stream(3, 240)
    y = np.where(np.arange(240) < 120, np.where(y == "c", "a", y), y)  # no "c" early
    rows = rows.copy()
    early = np.arange(240) < 120
    rows[early, 0] += rows[early, 2]  # early dicts lack "c": its mass goes to "a"
    rows[early, 2] = 0.0
    for average in ("macro", "weighted", "micro"):
        auc, ap = ROCAUC(average=average), AveragePrecision(average=average)
        batch = ROCAUC(average=average)
        for i in range(240):
            d = dict(zip(CLASSES, map(float, rows[i])))
            if i < 120:
                del d["c"]
            auc.update(y[i], d)
            ap.update(y[i], d)
        assert sorted(auc.classes) == CLASSES
        as_logged = [dict(zip(CLASSES, map(float, r))) for r in rows]
        for i in range(120):
            del as_logged[i]["c"]
        batch.update_many(list(y[:100]), as_logged[:100])
        batch.update_many(list(y[100:]), as_logged[100:])
        assert abs(auc.get() - mc_oracle("auc", average, y, rows, None)) <= TOL
        assert abs(ap.get() - mc_oracle("ap", average, y, rows, None)) <= TOL
        assert abs(batch.get() - auc.get()) <= TOL
        batch._check()


@pytest.mark.parametrize("average", ["macro", "weighted", "micro"])
def test_multiclass_batch_merge_state(average):
    y, rows, w = mc_stream(17, 500, weighted=True)
    ds = dicts(rows)
    for cls in (ROCAUC, AveragePrecision):
        loop = cls(average=average)
        for i in range(len(y)):
            loop.update(y[i], ds[i], float(w[i]))
        batch = cls(average=average).update_many(list(y), ds, w)
        # partitions with different class sets (one never sees "c" as a label)
        parts = [cls(average=average), cls(average=average)]
        for i in range(len(y)):
            only_ab = {k: v for k, v in ds[i].items() if k != "c"}
            if y[i] != "c" and i % 2:
                parts[1].update(y[i], only_ab if rows[i][2] == 0 else ds[i], float(w[i]))
            else:
                parts[0].update(y[i], ds[i], float(w[i]))
        merged = parts[0].merge(parts[1])
        back = from_state(json.loads(json.dumps(batch.to_state())))
        want = mc_oracle("auc" if cls is ROCAUC else "ap", average, y, rows, w)
        for m in (loop, batch, merged, back):
            m._check()
            assert abs(m.get() - want) <= TOL
        assert type(back) is type(batch) and back.to_state() == batch.to_state()


def test_multiclass_merge_with_disjoint_prediction_classes():
    """Each side's events score 0 for the classes only the other side knows."""
    left = ROCAUC(average="micro")
    right = ROCAUC(average="micro")
    whole = ROCAUC(average="micro")
    ev_left = [("a", {"a": .8, "b": .2}), ("b", {"a": .4, "b": .6})]
    ev_right = [("c", {"c": .9, "b": .1}), ("b", {"c": .3, "b": .7})]
    for e in ev_left:
        left.update(*e)
    for e in ev_right:
        right.update(*e)
    for e in ev_left + ev_right:
        whole.update(*e)
    left.merge(right)
    left._check()
    y = [e[0] for e in ev_left + ev_right]
    rows = [[e[1].get(c, 0.0) for c in CLASSES] for e in ev_left + ev_right]
    assert abs(left.get() - mc_oracle("auc", "micro", y, np.array(rows), None)) <= TOL
    assert abs(left.get() - whole.get()) <= TOL


def test_multiclass_validation_and_undefined():
    m = ROCAUC(average="macro")
    assert math.isnan(m.get())
    m.update("a", {"a": .6, "b": .4})
    assert math.isnan(m.get())  # one class present
    before = json.dumps(m.to_state())
    for args, msg in [(("a", 0.5), "dict of class probabilities"),
                      (("a", {"a": float("nan")}), "nan"),
                      (("a", {"a": "x"}), "'x'"),
                      ((None, {"a": .5}), "None"),
                      (("a", {"a": .5}, -1), "w = -1"),
                      ]:
        with pytest.raises(ValueError, match=msg):
            m.update(*args)
    for args in [("b", {"a": .6, "b": .4}), ("a", {"a": .5, "b": .5}), ("z", {"a": .6})]:
        with pytest.raises(ValueError, match="no such event"):
            m.revert(*args)
    with pytest.raises(ValueError, match=r"y_pred\[1\]"):
        m.update_many(["a", "b"], [{"a": 1.0}, {"b": float("inf")}])
    assert json.dumps(m.to_state()) == before
    m.update("b", {"a": .3, "b": .7})
    assert m.get() == 1.0 and m.error_bound() == 0.0
    assert not m.requires_labels and m.bigger_is_better


def test_multiclass_binned_bound_holds():
    y, rows, w = mc_stream(8, 600, weighted=True)
    rng = np.random.default_rng(0)
    rows = rows + rng.uniform(-0.05, 0.05, rows.shape)  # spread scores inside bins
    for average in ("macro", "weighted", "micro"):
        for cls, kind in ((ROCAUC, "auc"), (AveragePrecision, "ap")):
            m = cls(average=average, bins=5).update_many(list(y), dicts(rows), w)
            exact = mc_oracle(kind, average, y, rows, w)
            assert abs(m.get() - exact) <= m.error_bound() + TOL
            assert all(len(o) <= 5 for o in m._classes.values())


def test_multiclass_with_a_river_model():
    from river import datasets, evaluate, linear_model, preprocessing

    data = list(datasets.ImageSegments().take(400))
    metric = evaluate.progressive_val_score(
        data, preprocessing.StandardScaler() | linear_model.SoftmaxRegression(),
        ROCAUC(average="macro"))
    model = preprocessing.StandardScaler() | linear_model.SoftmaxRegression()
    ys, probas = [], []
    for x, y in data:
        p = model.predict_proba_one(x)
        if p:  # river skips events the model cannot predict yet
            probas.append(p)
            ys.append(y)
        model.learn_one(x, y)
    classes = sorted(set(ys) | {c for p in probas for c in p})
    onehot = (np.array(ys)[:, None] == np.array(classes)[None, :]).astype(int)
    scores = np.array([[p.get(c, 0.0) for c in classes] for p in probas])
    present = onehot.any(axis=0)
    want = roc_auc_score(onehot[:, present], scores[:, present], average="macro")
    assert abs(metric.get() - want) <= TOL


def test_multiclass_parameters_and_numpy_labels():
    with pytest.raises(ValueError, match="binary"):
        ROCAUC(average="macro", pos_label="a")
    m = AveragePrecision(average="weighted")
    m.update_many(np.array([0, 1, 2, 1]), [{0: .6, 1: .3, 2: .1}, {0: .2, 1: .5, 2: .3},
                                           {0: .1, 1: .1, 2: .8}, {0: .3, 1: .4, 2: .3}])
    back = from_state(json.loads(json.dumps(m.to_state())))
    assert back.classes == [0, 1, 2] and back.get() == m.get() == 1.0
    assert back.to_state() == m.to_state()


# ------------------------------------------------------------ deferred events


@pytest.fixture
def defer_at_once(monkeypatch):
    """Defer every update (no grace period) and flush every 7 events."""
    monkeypatch.setattr(ranking_module, "DEFER_AFTER", 0)
    monkeypatch.setattr(ranking_module, "DEFER_LIMIT", 7)


@pytest.mark.parametrize("weighted", [False, True])
def test_deferred_updates_are_exact_at_every_read(defer_at_once, weighted):
    y, s, w = stream(40 + weighted, 500, 2, weighted)
    metrics = [cls() for cls in SCALARS] + [ROCAUC(bins=7), AveragePrecision(bins=7)]
    roc, pr = ROCCurve(), PRCurve()
    rng = random.Random(2)
    live = []
    for i in range(len(y)):
        ev = (bool(y[i]), float(s[i]), 1.0 if w is None else float(w[i]))
        live.append(ev)
        for m in metrics + [roc, pr]:
            m.update(*ev)
        if rng.random() < 0.1:  # a revert while events are deferred
            gone = live.pop(rng.randrange(len(live)))
            for m in metrics + [roc, pr]:
                m.revert(*gone)
        if rng.random() < 0.05:  # an occasional read
            ly, ls, lw = (np.array(c) for c in zip(*live))
            lw = lw if weighted else None
            for m in metrics[:5]:
                assert_value(m, ly, ls, lw)
            assert_curves(roc, pr, ly, ls, lw)
            for m in metrics[5:]:
                exact = oracle(type(m).__name__, ly, ls, lw)
                assert abs(m.get() - exact) <= m.error_bound() + TOL
    assert any(m._ps for m in metrics)  # some events are still deferred here
    ly, ls, lw = (np.array(c) for c in zip(*live))
    lw = lw if weighted else None
    # every kind of read merges them first
    a, b, c, d = ROCAUC(), ROCAUC(), ROCAUC(), ROCAUC()
    for m in (a, b, c, d):
        for ev in live[:30]:
            m.update(*ev)
    assert len(a) == len(set(ls[:30].tolist())) and not a._ps
    state = b.to_state()
    assert sum(state["data"]["npos"]) + sum(state["data"]["nneg"]) == 30
    c.merge(d)
    assert not c._ps and not d._ps
    assert abs(c.get() - oracle("ROCAUC", np.r_[ly[:30], ly[:30]], np.r_[ls[:30], ls[:30]],
                                None if lw is None else np.r_[lw[:30], lw[:30]])) <= TOL
    for m in metrics:
        m._check()
        assert not m._ps


def test_reads_after_every_event_never_defer():
    m = AveragePrecision()
    y, s, _ = stream(1, 300, 2)
    for yi, si in zip(y.tolist(), s.tolist()):
        m.update(yi, si)
        m.get()
        assert not m._ps
    # a window: update then revert, no reads: never defers either
    w = ROCAUC()
    for i in range(300):
        w.update(bool(y[i]), float(s[i]))
        if i >= 10:
            w.revert(bool(y[i - 10]), float(s[i - 10]))
        assert not w._ps


def test_cumulative_updates_defer_and_stay_exact():
    y, s, w = stream(77, 5000, 3, weighted=True)
    m = AveragePrecision()
    for i in range(len(y)):
        m.update(bool(y[i]), float(s[i]), float(w[i]))
    assert m._ps  # deferred since DEFER_AFTER updates
    assert_value(m, y, s, w)
    assert not m._ps


def test_small_batches_are_deferred_and_exact():
    y, s, w = stream(78, 3000, 3, weighted=True)
    m, loop = ROCAUC(), ROCAUC()
    for a in range(0, 3000, 100):
        m.update_many(y[a : a + 100], s[a : a + 100], w[a : a + 100])
        if a == 1000:
            m.update(bool(y[0]), float(s[0]), float(w[0]))  # mixed with single events
            m.revert(bool(y[0]), float(s[0]), float(w[0]))
    assert m._chunks  # 30 batches, no read: still deferred
    m2 = from_state(json.loads(json.dumps(m.to_state())))  # a read: merged
    assert not m._chunks and m2.to_state() == m.to_state()
    assert_value(m, y, s, w)
    for a in range(0, 3000, 100):
        loop.update_many(y[a : a + 100], s[a : a + 100], w[a : a + 100])
    assert abs(loop.merge(m).get() - roc_auc_score(np.r_[y, y], np.r_[s, s],
                                                     sample_weight=np.r_[w, w])) <= TOL
    loop._check()


# ------------------------------------------------------------ revert_many
#
# Oracles: a loop of ``revert`` on a twin metric (the protocol's definition of
# ``revert_many``; exact equality of U with unit weights), scikit-learn on the events
# left, and a loop of ``revert`` undone on refusal (``loop_revert_many``, the protocol's
# per-event definition) for which event is refused.


def loop_revert_many(metric, y, s, w=None):
    """A loop of ``metric.revert`` over the batch; if an event is refused, the events
    already removed are put back and ``ValueError("event <i>: ...")`` names it (the
    base protocol's per-event ``Metric.revert_trusted``, not the metric's own)."""
    Metric.revert_trusted(metric, list(y), list(s), None if w is None else list(w))


def both_paths(monkeypatch, bulk):
    """Force ScoreOrder.remove_entries (and stored_counts) onto one path."""
    for name in ("REBUILD_RATIO", "REMOVE_REBUILD_RATIO"):
        monkeypatch.setattr(scoreorder, name, 10**9 if bulk else 0)


@pytest.mark.parametrize("bulk", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("decimals", [2, 6])
def test_revert_many_equals_loop_and_sklearn(monkeypatch, bulk, weighted, decimals):
    both_paths(monkeypatch, bulk)
    y, s, w = stream(70 + decimals + weighted, 1200, decimals, weighted)
    if weighted:
        # quarters: every sum exact, so the batch equals the loop exactly even after
        # nearly all weight is gone (with weights such as 0.01 both carry the rounding
        # of a running sum: removing 1190 of 1200 events leaves ~1e-12 in either)
        w = np.round(w * 4) / 4
    wl = np.ones(len(y)) if w is None else w
    makers = SCALARS + [ROCCurve, PRCurve, lambda: ROCAUC(bins=9)]
    batch, looped = [m() for m in makers], [m() for m in makers]
    for a, b in zip(batch, looped):
        a.update_many(y, s, w)
        b.update_many(y, s, w)
    # remove slices in a shuffled order (not the order of addition), down to empty
    rng = np.random.default_rng(decimals)
    perm = rng.permutation(len(y))
    cuts = [0, 1, 40, 41, 300, 700, 1190, 1200]
    for lo, hi in zip(cuts, cuts[1:]):
        idx = perm[lo:hi]
        left = np.sort(perm[hi:])
        for a, b in zip(batch, looped):
            a.revert_many(y[idx], s[idx], None if w is None else w[idx])
            for i in idx:
                b.revert(y[i], s[i], wl[i])
            a._check()
            if isinstance(a, ROCAUC):
                assert a._so.u == b._so.u  # exact sums: equal, not merely close
            assert same(value_of(a), value_of(b)), (type(a).__name__, lo)
            assert len(a) == len(b)
            if isinstance(a, (ROCCurve, PRCurve)):
                continue
            if getattr(a, "bins", None):
                ys, ss = y[left], np.minimum(np.floor(s[left] * 9), 8)
                assert_value(ROCAUC().update_many(ys, ss, None if w is None else w[left]),
                             ys, ss, None if w is None else w[left])
                assert abs(a.get() - ROCAUC().update_many(
                    ys, ss, None if w is None else w[left]).get()) <= TOL or len(left) == 0
            else:
                assert_value(a, y[left], s[left], None if w is None else w[left])
    for a in batch:
        assert len(a) == 0 and a._so.u == 0.0 and a._so.pos_weight == 0.0


@pytest.mark.parametrize("bulk", [False, True])
def test_revert_many_refuses_atomically_naming_the_event(monkeypatch, bulk):
    both_paths(monkeypatch, bulk)
    y, s, w = stream(81, 400, 1, True)
    w[:50] = 0.0
    m = ROCAUC().update_many(y, s, w)
    before = (m.get(), m.to_state())

    def refused_by_loop(yb, sb, wb):
        twin = ROCAUC().update_many(y, s, w)
        with pytest.raises(ValueError) as e:
            loop_revert_many(twin, yb, sb, wb)
        return str(e.value).split(":")[0]  # "event <i>"

    cases = [
        # a score never added, after valid events
        (np.r_[y[:5], True], np.r_[s[:5], 0.123], np.r_[w[:5], 1.0]),
        # every event, then one of them again
        (np.r_[y, y[7]], np.r_[s, s[7]], np.r_[w, w[7]]),
        # one event reverted more times than it was added (tied scores: 0.1 decimals)
        (np.repeat(y[200:201], 400), np.repeat(s[200:201], 400), np.repeat(w[200:201], 400)),
    ]
    for yb, sb, wb in cases:
        with pytest.raises(ValueError, match="no such event was added") as e:
            m.revert_many(yb, sb, wb)
        assert str(e.value).split(":")[0] == refused_by_loop(yb, sb, wb)
        assert (m.get(), m.to_state()) == before
        m._check()
    # more zero-weight events of a class than were added
    zeros = np.flatnonzero((w == 0.0) & y)
    yb = np.r_[y[zeros], True]
    sb = np.r_[s[zeros], s[zeros[0]]]
    with pytest.raises(ValueError, match=f"event {len(zeros)}: "):
        m.revert_many(yb, sb, np.zeros(len(yb)))
    assert (m.get(), m.to_state()) == before
    # bad values: the usual validation, index named, nothing changed
    with pytest.raises(ValueError, match=r"y_pred\[2\] = nan"):
        m.revert_many(y[:3], [s[0], s[1], math.nan])
    with pytest.raises(ValueError, match=r"w\[1\] = -1"):
        m.revert_many(y[:2], s[:2], [1.0, -1.0])
    assert (m.get(), m.to_state()) == before
    assert ROCAUC().revert_many([], []).get() != ROCAUC().get()  # NaN, empty no-op


def test_revert_many_after_deferred_updates(defer_at_once):
    y, s, _ = stream(83, 300, 3)
    m, ap = ROCAUC(), AveragePrecision()
    for yi, si in zip(y, s):
        m.update(yi, si)
        ap.update(yi, si)
    m.revert_many(y[:120], s[:120])  # some of them still deferred
    ap.revert_many(y[:120], s[:120])
    assert_value(m, y[120:], s[120:])
    assert_value(ap, y[120:], s[120:])
    m._check()


@settings(max_examples=100, deadline=None)
@given(st.lists(label_score_weight, min_size=1, max_size=40), st.data(),
       st.sampled_from(range(len(ALL))), st.booleans(), st.booleans())
def test_hypothesis_revert_many(base, data, which, bulk, defer):
    """revert_many of any sub-multiset, in any order, equals a loop of revert; a batch
    with one event too many is refused at the index a revert loop refuses, unchanged.
    ``defer``: every update still deferred when the batch goes (one merged rebuild)."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("REBUILD_RATIO", "REMOVE_REBUILD_RATIO"):
            mp.setattr(scoreorder, name, 10**9 if bulk else 0)
        if defer:
            mp.setattr(ranking_module, "DEFER_AFTER", 0)
            mp.setattr(ranking_module, "DEFER_LIMIT", 10**6)
        a, b = ALL[which](), ALL[which]()
        for e in base:
            a.update(*e)
            b.update(*e)
        picks = data.draw(st.lists(st.sampled_from(range(len(base))), unique=True))
        # extra events: copies of stored ones (perhaps once too often) or new scores
        extra = data.draw(st.lists(st.one_of(st.sampled_from(base), st.tuples(
            st.booleans(), st.sampled_from([0.33, 0.77]), st.sampled_from([0.0, 1.0]))),
            max_size=3))
        batch = [base[i] for i in picks]
        if extra:  # possibly never added: refused exactly when a revert loop refuses
            batch = batch + extra
            yb, sb, wb = map(list, zip(*batch))
            twin = ALL[which]()
            for e in base:
                twin.update(*e)
            try:
                loop_revert_many(twin, yb, sb, wb)
                expected = None
            except ValueError as e:
                expected = str(e).split(":")[0]
            before = value_of(a)
            try:
                a.revert_many(yb, sb, wb)
                got = None
            except ValueError as e:
                got = str(e).split(":")[0]
            assert got == expected
            if got is None:
                # accepted: compare values unless the batch reverted a stored (score,
                # label) with another weight (undetectable misuse: both are garbage)
                if not Counter(batch) <= Counter(base):
                    return
                assert same(value_of(a), value_of(twin))
                a._check()
                return
            assert same(value_of(a), before)
            batch = batch[: len(batch) - len(extra)]
        if batch:
            yb, sb, wb = map(list, zip(*batch))
            a.revert_many(yb, sb, wb)
            for e in batch:
                b.revert(*e)
        a._check()
        assert same(value_of(a), value_of(b))
        if isinstance(a, ROCAUC) and all(e[2] in (0.0, 1.0, 2.0) for e in base):
            assert a._order.u == b._order.u


@pytest.mark.parametrize("average", ["macro", "weighted", "micro"])
@pytest.mark.parametrize("bulk", [False, True])
def test_multiclass_revert_many(monkeypatch, average, bulk):
    both_paths(monkeypatch, bulk)
    y, rows, w = mc_stream(90 + bulk, 400, weighted=True)
    d = dicts(rows)
    auc, ap = ROCAUC(average=average), AveragePrecision(average=average)
    twin = ROCAUC(average=average)
    for m in (auc, ap, twin):
        m.update_many(list(y), d, w)
    for lo, hi in [(0, 30), (30, 31), (31, 250)]:
        for m in (auc, ap):
            m.revert_many(list(y[lo:hi]), d[lo:hi], w[lo:hi])
            m._check()
        for i in range(lo, hi):
            twin.revert(y[i], d[i], w[i])
        assert same(auc.get(), twin.get())
        for kind, m in (("auc", auc), ("ap", ap)):
            expected = mc_oracle(kind, average, y[hi:], rows[hi:], w[hi:])
            assert expected is not None and abs(m.get() - expected) <= TOL
    before = (auc.get(), auc.to_state())
    bad = [
        # a class never seen
        (list(y[300:303]) + ["eel"], d[300:303] + [{"eel": 0.2}], list(w[300:303]) + [1.0]),
        # a score never added
        (list(y[300:303]), d[300:302] + [{"cat": 0.123}], list(w[300:303])),
        # every event left, then one of them again
        (list(y[250:]) + [y[260]], d[250:] + [d[260]], list(w[250:]) + [w[260]]),
    ]
    for yb, db, wb in bad:
        loop = ROCAUC(average=average).update_many(list(y[250:]), d[250:], w[250:])
        with pytest.raises(ValueError) as e:
            loop_revert_many(loop, yb, db, wb)
        with pytest.raises(ValueError, match="no such event was added") as got:
            auc.revert_many(yb, db, wb)
        assert str(got.value).split(":")[0] == str(e.value).split(":")[0]
        assert (auc.get(), auc.to_state()) == before
    auc.revert_many(list(y[250:]), d[250:], w[250:])
    assert math.isnan(auc.get()) and auc._n == 0 and auc._w == 0.0


@pytest.mark.parametrize("decimals", [2, 8])
def test_integer_weight_fast_path_equals_sklearn(decimals):
    """AP's prefix sums run in int64 while every weight is an integer (the usual w=1):
    equal to sklearn with zero and integer weights, before and after a fractional
    weight (which switches the float path on), and after reverts."""
    rng = np.random.default_rng(decimals)
    y, s, _ = stream(95 + decimals, 800, decimals)
    w = rng.integers(0, 4, len(y)).astype(float)
    metrics = [AveragePrecision(), InterpolatedAP(), ElevenPointAP()]
    pr = PRCurve()
    for m in metrics + [pr]:
        m.update_many(y[:400], s[:400], w[:400])
    for i in range(400, 800):
        for m in metrics + [pr]:
            m.update(y[i], s[i], w[i])
            if i % 50 == 0:
                m.revert(y[i - 300], s[i - 300], w[i - 300])
        if i % 50 == 0:
            w[i - 300] = -1.0  # reverted: out of the oracle
        live = w[: i + 1] >= 0
        if i % 37 == 0:
            assert metrics[0]._so.exact_ints()
            for m in metrics:
                assert_value(m, y[: i + 1][live], s[: i + 1][live], w[: i + 1][live])
            assert_curves(ROCCurve().update_many(y[: i + 1][live], s[: i + 1][live],
                                                 w[: i + 1][live]), pr,
                          y[: i + 1][live], s[: i + 1][live], w[: i + 1][live])
    ap = metrics[0]
    ap.update(True, 0.5, 0.5)
    assert not ap._so.exact_ints()
    live = w >= 0
    assert_value(ap, np.r_[y[live], True], np.r_[s[live], 0.5], np.r_[w[live], 0.5])
    # a total beyond 2**53 is not exact in int64 either: the float path (weights are at
    # most MAX_WEIGHT = 1e12, so it takes 9 008 of the largest)
    yb = np.tile([1, 0, 1], 4600)
    sb = np.round(rng.random(len(yb)), 3)
    wb = np.tile([1e12, 1.0, 1e12], 4600)
    assert wb.sum() > 2.0**53
    big = AveragePrecision().update_many(yb, sb, wb)
    big.get()
    assert not big._so.exact_ints()
    assert_value(big, yb, sb, wb)


@pytest.mark.parametrize("weighted", [False, True])
def test_revert_many_with_deferred_batch_is_one_rebuild_and_exact(weighted):
    """A window's pattern: a batch in (deferred), then the expired slice out, which may
    include events of the deferred batch: merged and removed in one rebuild."""
    y, s, w = stream(97 + weighted, 3000, 3, weighted)
    if weighted:
        w = np.round(w * 4) / 4  # exact sums: equal to the loop to the last bit
        w[::17] = 0.0
    wl = np.ones(len(y)) if w is None else w
    sub = (lambda a, b: None) if w is None else (lambda a, b: w[a:b])
    m, ap, loop = ROCAUC(), AveragePrecision(), ROCAUC()
    for x in (m, ap, loop):
        x.update_many(y[:1000], s[:1000], sub(0, 1000)).get()
    start = 0
    for end in range(1300, 3001, 300):
        for x in (m, ap, loop):
            x.update_many(y[end - 300:end], s[end - 300:end], sub(end - 300, end))
        assert m._chunks  # deferred
        cut = start + 300 if end < 3000 else end - 10  # the last slice eats new events
        m.revert_many(y[start:cut], s[start:cut], sub(start, cut))
        ap.revert_many(y[start:cut], s[start:cut], sub(start, cut))
        assert not m._chunks
        for i in range(start, cut):
            loop.revert(y[i], s[i], wl[i])
        m._check()
        assert m._so.u == loop._so.u and m.get() == loop.get()
        assert_value(m, y[cut:end], s[cut:end], sub(cut, end))
        assert_value(ap, y[cut:end], s[cut:end], sub(cut, end))
        start = cut
    # refused with events deferred: nothing changes, the event is named
    m.update_many(y[:5], s[:5], sub(0, 5))
    with pytest.raises(ValueError, match="event 5: "):
        m.revert_many(np.r_[y[:5], True], np.r_[s[:5], 0.1234], None if w is None else
                      np.r_[w[:5], 1.0])
    assert_value(m, np.r_[y[start:end], y[:5]], np.r_[s[start:end], s[:5]],
                 None if w is None else np.r_[w[start:end], w[:5]])


mc_event = st.tuples(
    st.sampled_from(CLASSES),
    st.fixed_dictionaries({}, optional={c: st.sampled_from([0.0, 0.2, 0.5, 0.8])
                                        for c in CLASSES}),
    st.sampled_from([0.0, 1.0, 2.0, 0.5]))


@settings(max_examples=60, deadline=None)
@given(st.lists(mc_event, min_size=1, max_size=25), st.data(),
       st.sampled_from(["macro", "weighted", "micro"]), st.booleans(), st.booleans())
def test_hypothesis_multiclass_revert_many(base, data, average, ap, bulk):
    """Multiclass revert_many of any sub-multiset equals a loop of revert (per-class and
    micro orders, classes first seen late); one event too many is refused at the index
    a revert loop refuses, state unchanged."""
    make = (lambda: AveragePrecision(average=average)) if ap else (
        lambda: ROCAUC(average=average))
    with pytest.MonkeyPatch.context() as mp:
        for name in ("REBUILD_RATIO", "REMOVE_REBUILD_RATIO"):
            mp.setattr(scoreorder, name, 10**9 if bulk else 0)
        a, b = make(), make()
        for e in base:
            a.update(*e)
            b.update(*e)
        picks = data.draw(st.lists(st.sampled_from(range(len(base))), unique=True))
        batch = [base[i] for i in picks]
        extra = data.draw(st.lists(st.sampled_from(base), max_size=2))
        if extra:
            yb, db, wb = map(list, zip(*(batch + extra)))
            twin = make()
            for e in base:
                twin.update(*e)
            try:
                loop_revert_many(twin, yb, db, wb)
                expected = None
            except ValueError as e:
                expected = str(e).split(":")[0]
            before = (value_of(a), a.to_state())
            try:
                a.revert_many(yb, db, wb)
                got = None
            except ValueError as e:
                got = str(e).split(":")[0]
            assert got == expected
            if got is not None:
                assert same(value_of(a), before[0]) and a.to_state() == before[1]
                a._check()
            return
        if batch:
            yb, db, wb = map(list, zip(*batch))
            a.revert_many(yb, db, wb)
            for e in batch:
                b.revert(*e)
        a._check()
        assert same(value_of(a), value_of(b))
        assert (a._n, a._z) == (b._n, b._z) and abs(a._w - b._w) <= 1e-9


@pytest.mark.parametrize("average", ["macro", "micro"])
def test_multiclass_revert_refuses_a_weight_never_added(average):
    """Only zero-weight events stored: reverting one of weight 1 is refused up front,
    in every per-class order and the micro order, nothing changed."""
    m = ROCAUC(average=average)
    m.update("cat", {"cat": 0.5}, 0.0)
    m.update("dog", {"dog": 0.5}, 0.0)
    state = m.to_state()
    for w in (1.0, 2.0):
        with pytest.raises(ValueError, match="no such event was added"):
            m.revert("dog", {"dog": 0.5}, w)
        with pytest.raises(ValueError, match="event 0: "):
            m.revert_many(["dog"], [{"dog": 0.5}], [w])
    assert m.to_state() == state
    m.revert("dog", {"dog": 0.5}, 0.0)
    m._check()
    assert m._n == 1 and m._z == 1


@pytest.mark.parametrize("bulk", [False, True])
@pytest.mark.parametrize("cls", [ROCAUC, AveragePrecision])
def test_revert_of_more_weight_than_stored_at_a_score_is_refused(monkeypatch, cls, bulk):
    """The event (1, 0.5, w=5) was never added (only w=1 at 0.5): refused, by revert and
    by revert_many (index named as a loop of revert names it), nothing changed; before,
    the count matched, the score's weight was zeroed and the class total went to -3."""
    both_paths(monkeypatch, bulk)
    y, s, w = [1, 1, 0, 0], [0.5, 0.7, 0.1, 0.6], [1.0, 1.0, 1.0, 2.0]
    m = cls().update_many(y, s, w)
    state = m.to_state()
    with pytest.raises(ValueError, match="no such event was added"):
        m.revert(1, 0.5, 5.0)
    with pytest.raises(ValueError, match="event 1: "):
        m.revert_many([0, 1], [0.1, 0.5], [1.0, 5.0])
    with pytest.raises(ValueError, match="event 1: "):  # 2 + 2 taken from the 2 at 0.6
        m.revert_many([0, 0], [0.6, 0.6], [2.0, 2.0])
    assert m.to_state() == state
    m._check()
    oracle = roc_auc_score if cls is ROCAUC else average_precision_score
    m.revert(1, 0.5, 1.0)  # the event that was added goes
    assert m.get() == pytest.approx(oracle([1, 0, 0], [0.7, 0.1, 0.6], sample_weight=[1, 1, 2]),
                                    abs=1e-12)


def test_multiclass_revert_of_more_weight_than_stored_is_refused():
    for average in ("macro", "weighted", "micro"):
        m = ROCAUC(average=average)
        m.update("cat", {"cat": 0.7, "dog": 0.3}, 1.0)
        m.update("dog", {"cat": 0.4, "dog": 0.6}, 1.0)
        state = m.to_state()
        with pytest.raises(ValueError, match="no such event was added"):
            m.revert("cat", {"cat": 0.7, "dog": 0.3}, 3.0)
        with pytest.raises(ValueError, match="event 0: "):
            m.revert_many(["cat"], [{"cat": 0.7, "dog": 0.3}], [3.0])
        assert m.to_state() == state
        m._check()


# ------------------------------------------------------------ the trusted path
#
# ``update_trusted(*validate(...))`` (what a Monitor or a window does after validating
# once) against ``update_many``, a loop of ``update`` and scikit-learn; ``revert_trusted``
# against a loop of ``revert`` (``loop_revert_many``) for the refused event's index.


@settings(max_examples=100, deadline=None)
@given(st.lists(label_score_weight, min_size=1, max_size=60),
       st.sampled_from(range(len(ALL))), st.booleans(), st.booleans())
def test_hypothesis_update_trusted_equals_update_many_loop_and_sklearn(
        events, which, weighted, defer):
    with pytest.MonkeyPatch.context() as mp:
        if defer:
            mp.setattr(ranking_module, "DEFER_AFTER", 0)
            mp.setattr(ranking_module, "DEFER_LIMIT", 7)
        y, s, w = (list(c) for c in zip(*events))
        w = w if weighted else None
        trusted, many, loop = ALL[which](), ALL[which](), ALL[which]()
        cols = trusted.validate(y, s, w)
        assert cols[0].dtype == np.bool_ and cols[1].dtype == np.float64
        assert trusted.update_trusted(*cols) is trusted
        many.update_many(y, s, w)
        for i in range(len(y)):
            loop.update(y[i], s[i], 1.0 if w is None else w[i])
        for m in (trusted, many, loop):
            m._check()
        assert same(value_of(trusted), value_of(many))
        assert same(value_of(trusted), value_of(loop))
        assert trusted.to_state() == loop.to_state()
        ww = None if w is None else np.array(w)
        yy = np.array(y)
        if type(trusted) is ROCAUC and not trusted.bins:
            pw = yy.astype(float) if ww is None else np.where(yy, ww, 0.0)
            nw = (~yy).astype(float) if ww is None else np.where(yy, 0.0, ww)
            if pw.sum() > 0 and nw.sum() > 0:
                assert abs(trusted.get() - roc_auc_score(yy, s, sample_weight=ww)) <= TOL
            else:
                assert math.isnan(trusted.get())
        if type(trusted) is AveragePrecision and not trusted.bins:
            pw = yy.astype(float) if ww is None else np.where(yy, ww, 0.0)
            if pw.sum() > 0:
                expected = average_precision_score(yy, s, sample_weight=ww)
                assert abs(trusted.get() - expected) <= TOL
            else:
                assert math.isnan(trusted.get())


@settings(max_examples=100, deadline=None)
@given(st.lists(label_score_weight, min_size=1, max_size=30), st.data(),
       st.sampled_from(range(len(ALL))), st.booleans())
def test_hypothesis_revert_trusted_refuses_atomically_at_the_loops_index(
        base, data, which, bulk):
    with pytest.MonkeyPatch.context() as mp:
        for name in ("REBUILD_RATIO", "REMOVE_REBUILD_RATIO"):
            mp.setattr(scoreorder, name, 10**9 if bulk else 0)
        a, twin = ALL[which](), ALL[which]()
        for e in base:
            a.update(*e)
            twin.update(*e)
        picks = data.draw(st.lists(st.sampled_from(range(len(base))), unique=True))
        extra = data.draw(st.lists(st.one_of(st.sampled_from(base), st.tuples(
            st.booleans(), st.sampled_from([0.33, 0.77]), st.sampled_from([0.0, 1.0]))),
            min_size=1, max_size=3))
        batch = [base[i] for i in picks] + extra
        yb, sb, wb = (list(c) for c in zip(*batch))
        try:
            loop_revert_many(twin, yb, sb, wb)
            expected = None
        except ValueError as e:
            expected = int(str(e).split(":")[0].split()[1])
        before = (value_of(a), a.to_state())
        cols = a.validate(yb, sb, wb)
        try:
            a.revert_trusted(*cols)
        except ValidationError as e:
            assert e.index == expected
            assert str(e).startswith(f"event {expected}: revert(y_true=")
            assert "no such event was added" in str(e)
            assert same(value_of(a), before[0]) and a.to_state() == before[1]
        else:
            assert expected is None
            if not Counter(batch) <= Counter(base):
                return  # a stored (score, label) reverted with another weight: garbage
        a._check()


def test_revert_trusted_names_the_configured_labels():
    m = ROCAUC(pos_label="spam", neg_label="ham")
    m.update_many(["spam", "ham"], [0.9, 0.2])
    cols = m.validate(["ham", "spam"], [0.2, 0.5])
    state = m.to_state()
    with pytest.raises(ValidationError) as e:
        m.revert_trusted(*cols)
    assert e.value.index == 1
    assert str(e.value) == "event 1: revert(y_true='spam', y_pred=0.5): no such event was added"
    assert m.to_state() == state
    with pytest.raises(ValidationError, match="event 0: revert.y_true='ham', y_pred=0.7.") as e:
        ROCAUC(bins=4, pos_label="spam", neg_label="ham").revert_many(["ham"], [0.7])
    assert e.value.index == 0


def test_multiclass_cases_are_instances_of_their_front():
    for front in (ROCAUC, AveragePrecision):
        binary = front()
        for average in ("macro", "weighted", "micro"):
            for m in (front(average=average), front(None, average), front(bins=4, average=average)):
                assert isinstance(m, front) and type(m) is not type(binary)
                assert type(m).__name__ == front.__name__ and repr(m).startswith(front.__name__)
                assert m.columns is None and m.average == average
                again = from_state(json.loads(json.dumps(m.to_state())))
                assert type(again) is type(m) and again._params() == m._params()
        assert isinstance(binary, front) and binary.columns == "binary"
        assert not isinstance(binary, type(front(average="macro")))
    assert isinstance(Gini(), ROCAUC) and not isinstance(Gini(), AveragePrecision)
    assert type(Gini()).__name__ == "Gini" and Gini().to_state()["type"] == "Gini"
    # the state layout of the one-vs-rest classes is unchanged: {average, bins}
    old = {"type": "ROCAUC", "version": 1, "params": {"average": "micro", "bins": None},
           "data": {"classes": ["a", "b"], "orders": [
               {"scores": [0.2, 0.8], "wpos": [0.0, 1.0], "wneg": [1.0, 0.0],
                "npos": [0, 1], "nneg": [1, 0], "u": 1.0, "pos_weight": 1.0,
                "neg_weight": 1.0, "zero_pos": 0, "zero_neg": 0},
               {"scores": [0.2, 0.8], "wpos": [0.0, 1.0], "wneg": [1.0, 0.0],
                "npos": [0, 1], "nneg": [1, 0], "u": 1.0, "pos_weight": 1.0,
                "neg_weight": 1.0, "zero_pos": 0, "zero_neg": 0}],
               "micro": None, "n": 2, "w": 2.0, "zero": 0}}
    old["params"]["average"] = "macro"
    m = from_state(old)
    assert isinstance(m, ROCAUC) and m.to_state() == old
    fresh = ROCAUC(average="macro")
    fresh.update("a", {"a": 0.8, "b": 0.2})
    fresh.update("b", {"a": 0.2, "b": 0.8})
    assert m.get() == fresh.get() == 1.0  # each class's one positive above its negative


def test_multiclass_validate_then_trusted_equals_update_many_and_sklearn():
    y, rows, w = mc_stream(123, 300, weighted=True)
    d = dicts(rows)
    for average in ("macro", "weighted", "micro"):
        for front, kind in ((ROCAUC, "auc"), (AveragePrecision, "ap")):
            a, b = front(average=average), front(average=average)
            a.update_trusted(*a.validate(list(y), d, w))
            b.update_many(list(y), d, w)
            assert a.to_state() == b.to_state()
            assert abs(a.get() - mc_oracle(kind, average, y, rows, w)) <= TOL
            with pytest.raises(ValidationError) as e:
                a.validate(list(y[:3]), d[:2] + [{"a": math.nan}], w[:3])
            assert e.value.index == 2 and "y_pred[2]" in str(e.value)


def test_declared_parameter_checks():
    for bad in (0, -1, 2.5, True, "4"):
        with pytest.raises(ValidationError, match=r"bins = .*: must be an integer >= 1 or None"):
            ROCAUC(bins=bad)
        with pytest.raises(ValidationError, match="bins"):
            AveragePrecision(average="macro", bins=bad)
    with pytest.raises(ValidationError, match="average = 'mean': must be one of 'macro', "
                                              "'weighted', 'micro'"):
        AveragePrecision(average="mean")
    assert ROCAUC(bins=np.int64(4)).bins == 4 and type(ROCAUC(bins=np.int64(4)).bins) is int


@pytest.mark.parametrize("bulk", [False, True])
def test_reverting_the_largest_weights_leaves_auc_exact(bulk):
    """A weight of MAX_WEIGHT added and reverted once left U off by about 1e8 (float
    rounding of the 1e24-sized pairs), so the AUC of the 300 events left was far outside
    [0, 1] (Gini -16 787). The score order now recomputes U and its totals from the
    per-score weights once removals took out far more than is left (ScoreOrder.refresh).
    Oracle: sklearn on the events left, decimal weights and ties included."""
    from streameval.validation import MAX_WEIGHT

    rng = np.random.default_rng(3)
    n = 300
    y = rng.random(n) < 0.4
    s = np.round(rng.random(n), 2)  # ties
    w = np.round(rng.random(n) * 3, 1)  # decimal weights
    big_y = np.array([True, False, True, False, True, False])
    big_s = np.array([0.505, 0.505, 0.995, 0.015, 0.305, 0.705])  # scores of their own
    big_w = np.array([MAX_WEIGHT, MAX_WEIGHT, 3e11, 7e11, 1e9, 5e10])
    _assert_extreme_weights_revert_exactly(y, s, w, big_y, big_s, big_w, bulk)
    # at scores shared with small events: exact where the small weights are binary
    # fractions (a per-score sum keeps the rounding of its own score only, about 1e-16
    # of the largest weight that passed through it: see ScoreOrder.refresh)
    w2 = np.round(rng.random(n) * 6) / 2
    _assert_extreme_weights_revert_exactly(y, s, w2, big_y, np.round(big_s, 2), big_w, bulk)


def _assert_extreme_weights_revert_exactly(y, s, w, big_y, big_s, big_w, bulk):
    for cls, oracle in ((ROCAUC, roc_auc_score),
                        (Gini, lambda *a, **k: 2 * roc_auc_score(*a, **k) - 1),
                        (AveragePrecision, average_precision_score)):
        m = cls()
        m.update_many(y, s, w)
        if bulk:
            m.update_many(big_y, big_s, big_w)
            assert math.isfinite(m.get())
            m.revert_many(big_y, big_s, big_w)
        else:
            for e in zip(big_y.tolist(), big_s.tolist(), big_w.tolist()):
                m.update(*e)
                assert -1e-12 <= m.get() + (cls is Gini) <= 1 + (cls is Gini) + 1e-12
            for e in zip(big_y.tolist(), big_s.tolist(), big_w.tolist()):
                m.revert(*e)
        expected = oracle(y, s, sample_weight=w)
        assert abs(m.get() - expected) <= 1e-12, (cls.__name__, bulk, m.get(), expected)
        m._check()
        # the state saved after the revert carries no residue either
        again = streameval.from_state(json.loads(json.dumps(m.to_state())))
        assert abs(again.get() - expected) <= 1e-12


def test_average_precision_is_exact_after_the_largest_weights_leave_a_big_order():
    """AP of the bulk (levelled) order read its running numerator and total without
    the refresh: 40 000 decimal-weight events, a pair of weight 1e12 added and
    reverted, left AP 1.8e-8 from sklearn. Oracle: sklearn on the events left."""
    from streameval.validation import MAX_WEIGHT

    rng = np.random.default_rng(1)
    n = 40_000
    y = rng.random(n) < 0.3
    s = rng.random(n)
    w = np.round(rng.random(n) * 3, 1)
    big = (np.array([True, False]), np.array([0.25, 0.75]), np.array([MAX_WEIGHT] * 2))
    m = AveragePrecision().update_many(y, s, w)
    m.update_many(*big)
    m.get()
    m.revert_many(*big)
    assert abs(m.get() - average_precision_score(y, s, sample_weight=w)) <= 1e-12
    win = streameval.Sliding(AveragePrecision(), size=20_000)
    win.update_many(y[:20_000], s[:20_000], w[:20_000])
    win.update_many(*big)
    win.get()
    win.update_many(y[20_000:], s[20_000:], w[20_000:])  # the big pair has left
    yy, ss, ww = y[20_000:], s[20_000:], w[20_000:]
    assert abs(win.get() - average_precision_score(yy, ss, sample_weight=ww)) <= 1e-12
