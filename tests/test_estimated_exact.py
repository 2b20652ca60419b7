"""Exact sums behind the label-free estimates: every value is the correctly rounded value
of exact sums, so it does not depend on batching, reverts, merges or state round trips
(the expected AUC, float weights in a score order: within 1e-12 across batchings, and
the same bits after a binary state round trip).

Oracles: ``fractions.Fraction`` sums of the very float products the metric forms (``w *
p`` and ``w * p * p`` in IEEE double, as Python computes them), converted to float once
(``float(Fraction)`` is correctly rounded); for the invariants, the same events fed
uninterrupted, one by one, in one batch.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import streameval as se
from streameval.metrics.arraystate import array_state, from_array_state
from streameval.metrics.estimated import (
    EXACT_SCALE,
    EstimatedAccuracy,
    EstimatedConfusion,
    EstimatedF1,
    EstimatedPrecision,
    EstimatedRecall,
    EstimatedROCAUC,
    PredictedPositiveRate,
    as_float,
    exact,
    exact_sums,
    float_parts,
)

CONFUSION = (EstimatedConfusion, EstimatedAccuracy, EstimatedPrecision, EstimatedRecall,
             EstimatedF1, PredictedPositiveRate)

finite = st.floats(-1e300, 1e300, allow_nan=False, width=64)  # (sums stay finite)
prob = st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0, 5e-324, 1e-300, 0.5]))
weight = st.one_of(st.just(1.0), st.floats(0.0, 1e6), st.sampled_from([0.0, 1e-310, 3.0]))
events = st.lists(st.tuples(prob, weight), min_size=0, max_size=40)


def fr(x):
    return Fraction(float(x))


def oracle(s, w, threshold=0.5):
    """(expected cells as floats, variance terms as floats) from Fraction sums."""
    sums = [Fraction(0)] * 6
    for x, ww in zip(s, w):
        g = 0 if x >= threshold else 1
        wp = ww * x
        for q, v in enumerate((ww, wp, wp * x)):
            sums[3 * g + q] += fr(v)
    return ({"tp": float(sums[1]), "fp": float(sums[0] - sums[1]), "fn": float(sums[4]),
             "tn": float(sums[3] - sums[4])},
            {"tp": float(sums[1] - sums[2]), "fn": float(sums[4] - sums[5])})


def values(m):
    """Everything a reader sees, as exact bits (NaN compared as a string)."""
    out = [repr(m.get()), repr(m.interval(0.9))]
    if hasattr(m, "expected"):
        out += [repr(m.expected()), repr(m.variances())]
    return out


# ------------------------------------------------------------------ the helpers


@given(st.lists(finite, max_size=60), st.integers(1, 4), st.data())
@settings(max_examples=150, deadline=None)
def test_exact_sums_equal_fraction_sums_per_slot(xs, nslots, data):
    slots = data.draw(st.lists(st.integers(0, nslots - 1), min_size=len(xs),
                               max_size=len(xs)))
    x = np.array(xs, dtype=np.float64)
    got = exact_sums(x, np.array(slots, dtype=np.int64), nslots)
    for k in range(nslots):
        want = sum((fr(v) for v, s in zip(xs, slots) if s == k), Fraction(0))
        assert Fraction(got[k], 2 ** EXACT_SCALE) == want
        assert got[k] == sum(exact(v) for v, s in zip(xs, slots) if s == k)
        assert as_float(got[k]) == float(want)  # correctly rounded


@given(st.lists(finite, max_size=30))
@settings(max_examples=150, deadline=None)
def test_float_parts_hold_the_exact_sum(xs):
    total = sum(exact(v) for v in xs)
    parts = float_parts(total)
    assert all(math.isfinite(p) for p in parts)
    assert sum(fr(p) for p in parts) == Fraction(total, 2 ** EXACT_SCALE)
    assert parts[0] == float(Fraction(total, 2 ** EXACT_SCALE))
    assert json.loads(json.dumps(parts)) == parts


def test_exact_handles_the_extremes():
    for v in (0.0, 5e-324, 2.2250738585072014e-308, 1.0, 1.7976931348623157e308, -5e-324):
        assert Fraction(exact(v), 2 ** EXACT_SCALE) == fr(v)
    x = np.array([5e-324, 1e300, 0.1, 1e-300, -0.1])
    (total,) = exact_sums(x, np.zeros(5, dtype=np.int64), 1)
    assert as_float(total) == float(sum(fr(v) for v in x)) == 1e300


# ------------------------------------------------------------------ values


@given(events, st.sampled_from([0.0, 0.3, 0.5, 1.0]))
@settings(max_examples=100, deadline=None)
def test_expected_cells_are_the_correctly_rounded_exact_sums(evs, threshold):
    s = [e[0] for e in evs]
    w = [e[1] for e in evs]
    m = EstimatedConfusion(threshold=threshold).update_many(None, s, w)
    want, var = oracle(s, w, threshold)
    assert m.expected() == want
    v = m.variances()
    assert (v["tp"], v["fn"]) == (var["tp"], var["fn"])
    one = EstimatedConfusion(threshold=threshold)
    for x, ww in evs:
        one.update(None, x, ww)
    assert one.expected() == want


# ------------------------------------------------------------------ invariants


@pytest.mark.parametrize("cls", CONFUSION)
@given(evs=events, cuts=st.lists(st.integers(0, 40), max_size=4))
@settings(max_examples=40, deadline=None)
def test_batching_merge_state_and_revert_give_the_same_bits(cls, evs, cuts):
    s = np.array([e[0] for e in evs], dtype=np.float64)
    w = np.array([e[1] for e in evs], dtype=np.float64)
    n = len(s)
    bounds = sorted({0, n, *(min(c, n) for c in cuts)})
    whole = cls().update_many(None, s, w)
    ref = values(whole)
    # one by one
    one = cls()
    for x, ww in zip(s.tolist(), w.tolist()):
        one.update(None, x, ww)
    assert values(one) == ref
    # batches of any grouping, with a JSON state round trip at every cut
    part = cls()
    for a, b in zip(bounds, bounds[1:]):
        part = se.from_state(json.loads(json.dumps(part.to_state())))
        part.update_many(None, s[a:b], w[a:b])
    assert values(part) == ref
    # binary checkpoint form (the JSON state's shape)
    assert values(from_array_state(array_state(part))) == ref
    # merge of the pieces, in any grouping
    pieces = [cls().update_many(None, s[a:b], w[a:b]) for a, b in zip(bounds, bounds[1:])]
    merged = cls()
    for p in reversed(pieces):
        merged.merge(p)
    assert values(merged) == ref
    # revert the last piece, subtract the one before: the prefix's bits
    if len(bounds) >= 3:
        a, b = bounds[-2], bounds[-1]
        back = se.from_state(whole.to_state()).revert_many(None, s[a:b], w[a:b])
        assert values(back) == values(cls().update_many(None, s[:a], w[:a]))
        c = bounds[-3]
        sub = se.from_state(back.to_state()).subtract(cls().update_many(None, s[c:a], w[c:a]))
        assert values(sub) == values(cls().update_many(None, s[:c], w[:c]))
    whole._check()


@pytest.mark.parametrize("cls", CONFUSION)
def test_a_sliding_window_gives_the_same_bits_whatever_the_batches(cls):
    rng = np.random.default_rng(5)
    s = rng.random(3000)
    w = rng.random(3000) * 3
    a = se.Sliding(cls(), size=500)
    b = se.Sliding(cls(), size=500)
    c = se.Sliding(cls(), size=500)
    i = 0
    for k in rng.integers(1, 700, 12).tolist():
        k = min(k, 3000 - i)
        a.update_many(None, s[i:i + k], w[i:i + k])
        i += k
    b.update_many(None, s[:i], w[:i])
    for x, ww in zip(s[:i].tolist(), w[:i].tolist()):
        c.update(None, x, ww)
    fresh = cls().update_many(None, s[max(0, i - 500):i], w[max(0, i - 500):i])
    assert values(a) == values(b) == values(c) == values(fresh)[:2]


def test_a_state_written_with_compensated_sums_reads_as_their_exact_sum():
    m = EstimatedPrecision().update_many(None, [0.9, 0.6, 0.2], [1.0, 2.0, 0.5])
    state = m.to_state()
    # the earlier form: [sum, compensation] pairs (w, w p, w p^2 per group)
    state["data"]["sums"] = [[3.0, 0.0], [2.1, 1e-17], [1.53, 0.0],
                             [0.5, 0.0], [0.1, 0.0], [0.02, 0.0]]
    back = se.from_state(state)
    assert back.expected()["tp"] == float(fr(2.1) + fr(1e-17))
    with pytest.raises(ValueError, match="sum w p"):
        bad = m.to_state()
        bad["data"]["sums"][1] = [-1.0]
        se.from_state(bad)


def test_revert_of_an_event_never_added_is_refused_exactly():
    m = EstimatedRecall().update_many(None, [0.9, 0.2], [1.0, 1.0])
    before = values(m)
    with pytest.raises(ValueError, match="no such event"):
        m.revert(None, 0.95, 2.0)  # more weight than the group holds
    with pytest.raises(ValueError):
        m.revert_many(None, [0.9, 0.9])
    assert values(m) == before


# ------------------------------------------------------------------ expected AUC


def test_expected_auc_binary_state_resumes_to_the_bit():
    rng = np.random.default_rng(1)
    s = rng.random(6000)
    w = rng.random(6000) + 0.5
    a = EstimatedROCAUC()
    for i in range(0, 4000, 700):
        a.update_many(None, s[i:i + 700], w[i:i + 700])
    a.get()
    st_ = array_state(a)
    assert st_.get("arrays") == 1
    b = from_array_state(st_)
    assert b.get() == a.get() and b.interval(0.95) == a.interval(0.95)
    for i in range(4200, 6000, 450):
        a.update_many(None, s[i:i + 450], w[i:i + 450])
        b.update_many(None, s[i:i + 450], w[i:i + 450])
        assert b.get() == a.get()
    assert b.interval(0.95) == a.interval(0.95)
    from sklearn.metrics import roc_auc_score

    keep = np.r_[0:4200, 4200:6000]
    ss, ww = s[keep], w[keep]
    y = np.r_[np.ones(len(ss)), np.zeros(len(ss))]
    want = roc_auc_score(y, np.r_[ss, ss], sample_weight=np.r_[ww * ss, ww * (1 - ss)])
    assert b.get() == pytest.approx(want, abs=1e-12)
    bad = dict(st_, data={"order": {"load": "x"}})
    with pytest.raises(ValueError, match="score-order layout"):
        from_array_state(bad)
    with pytest.raises(ValueError, match="expected the key order"):
        from_array_state(dict(st_, data={}))


@pytest.mark.parametrize("weighted", [False, True])
def test_batching_moves_the_expected_auc_in_its_last_bits_only(weighted):
    """One batch, batches of 1 000 and one prediction at a time: the expected AUC (float
    weights in a score order) and its check differ at most in the last bits, each within
    1e-12 of scikit-learn's AUC of the pseudo-sample; the checks of the confusion
    estimates (exact sums; with unit weights, integer counts) are the same bits."""
    from sklearn.metrics import roc_auc_score

    from streameval.metrics.checked import EstimateCheck

    rng = np.random.default_rng(5)
    n = 2000
    s = rng.random(n)
    y = rng.random(n) < s
    w = rng.uniform(0.5, 2.0, n) if weighted else np.ones(n)
    kinds = ["roc_auc", "recall", "precision", "accuracy", "f1"]

    def fed(step):
        ms = {"estimated_roc_auc": EstimatedROCAUC(),
              **{k: EstimateCheck(k) for k in kinds}}
        for m in ms.values():
            if step == 1:
                for i in range(n):
                    m.update(bool(y[i]), float(s[i]), float(w[i]))
            else:
                for a in range(0, n, step):
                    m.update_many(y[a:a + step], s[a:a + step], w[a:a + step])
        return {k: m.get() for k, m in ms.items()}

    runs = [fed(n), fed(1000), fed(1)]
    want = roc_auc_score(np.r_[np.ones(n), np.zeros(n)], np.r_[s, s],
                         sample_weight=np.r_[w * s, w - w * s])
    realized = roc_auc_score(y, s, sample_weight=w)
    for r in runs:
        assert r["estimated_roc_auc"] == pytest.approx(want, abs=1e-12)
        assert r["roc_auc"] == pytest.approx(want - realized, abs=1e-12)
    for k in kinds[1:] if not weighted else ():
        assert runs[0][k] == runs[1][k] == runs[2][k], k
