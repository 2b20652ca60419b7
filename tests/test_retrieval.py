"""Retrieval metrics against scikit-learn and brute-force recomputation.

Oracles: ``sklearn.metrics.dcg_score`` / ``ndcg_score`` (ties, ``k``, weights);
for the other metrics a direct Python computation on the ranked list, averaged over
every order of each tied group (``itertools.permutations``), so that the tie
handling is checked against its definition, not against our closed forms.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import dcg_score, ndcg_score

import streameval
from streameval.metrics.base import Metric
from streameval.validation import ValidationError, take_columns
from streameval.metrics.retrieval import (
    APAtK,
    DCG,
    MAPAtK,
    MRR,
    NDCG,
    HitAtK,
    PrecisionAtK,
    RecallAtK,
    ExactSum,
)

ALL = [PrecisionAtK, RecallAtK, HitAtK, APAtK, MAPAtK, MRR, DCG, NDCG]


# ------------------------------------------------------------------ the oracle


def _rel(x):
    return 1 if x > 0 else 0


def o_precision(ranked, k):
    top = ranked if k is None else ranked[:k]
    den = len(ranked) if k is None else k
    return Fraction(sum(_rel(r) for r in top), den)


def o_recall(ranked, k):
    top = ranked if k is None else ranked[:k]
    return Fraction(sum(_rel(r) for r in top), sum(_rel(r) for r in ranked))


def o_hit(ranked, k):
    top = ranked if k is None else ranked[:k]
    return Fraction(int(any(_rel(r) for r in top)))


def o_rr(ranked, k):
    top = ranked if k is None else ranked[:k]
    for i, r in enumerate(top):
        if _rel(r):
            return Fraction(1, i + 1)
    return Fraction(0)


def o_ap(ranked, k):
    top = ranked if k is None else ranked[:k]
    total = sum(_rel(r) for r in ranked)
    den = total if k is None else min(total, k)
    s, hits = Fraction(0), 0
    for i, r in enumerate(top):
        if _rel(r):
            hits += 1
            s += Fraction(hits, i + 1)
    return s / den


def o_dcg(ranked, k, gain="linear", discount="log", b=2):
    top = ranked if k is None else ranked[:k]
    s = 0.0
    for i, r in enumerate(top, start=1):
        g = r if gain == "linear" else 2.0**r - 1.0
        if discount == "log":
            d = 1.0 / math.log(i + 1, b)
        else:
            d = 1.0 if i < b else 1.0 / math.log(i, b)
        s += g * d
    return s


def o_ndcg(ranked, k, gain="linear", discount="log", b=2):
    ideal = o_dcg(sorted(ranked, reverse=True), k, gain, discount, b)
    return o_dcg(ranked, k, gain, discount, b) / ideal


ORACLE = {PrecisionAtK: o_precision, RecallAtK: o_recall, HitAtK: o_hit, APAtK: o_ap,
          MAPAtK: o_ap, MRR: o_rr, DCG: o_dcg, NDCG: o_ndcg}


def orders(rels, scores, ignore_ties):
    """Every ranked list of relevances the tie rule allows (one if ignore_ties)."""
    if scores is None:
        return [list(rels)]
    idx = sorted(range(len(rels)), key=lambda i: -scores[i])  # stable: given order
    if ignore_ties:
        return [[rels[i] for i in idx]]
    groups = [list(g) for _, g in itertools.groupby(idx, key=lambda i: scores[i])]
    out = []
    for combo in itertools.product(*(itertools.permutations(g) for g in groups)):
        out.append([rels[i] for g in combo for i in g])
    return out


def oracle_query(cls, rels, scores, k, ignore_ties=False, **kw):
    """Per-query value (expected over tie orders), or None when undefined."""
    if not any(_rel(r) for r in rels):
        return None
    fn = ORACLE[cls]
    vals = [fn(o, k, **kw) for o in orders(rels, scores, ignore_ties)]
    if isinstance(vals[0], Fraction):
        return float(sum(vals) / len(vals))
    return math.fsum(vals) / len(vals)


def oracle_mean(cls, queries, k, no_relevant, ignore_ties=False, **kw):
    num = den = 0.0
    nums, dens = [], []
    for rels, scores, w in queries:
        v = oracle_query(cls, rels, scores, k, ignore_ties, **kw)
        if v is None:
            if no_relevant == "skip":
                continue
            v = 0.0
        nums.append(w * v)
        dens.append(w)
    if not dens:
        return math.nan
    num, den = math.fsum(nums), math.fsum(dens)
    return math.nan if den == 0 else num / den


def make(cls, k, **kw):
    if cls in (DCG, NDCG):
        return cls(k=k, **kw)
    return cls(k=k, **{key: v for key, v in kw.items() if key in ("ignore_ties", "no_relevant")})


def close(a, b, tol=1e-12):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(b))


# ------------------------------------------------------------ worked examples


def test_design_dcg_ndcg_worked_example():
    rel = [3, 2, 3, 0, 0, 1, 2, 2, 3, 0]
    assert round(DCG(k=10).update(rel).get(), 6) == 8.318753
    assert round(NDCG(k=10).update(rel).get(), 6) == 0.916809
    assert round(DCG(k=10, discount="jk").update(rel).get(), 6) == 9.605118
    # the same ranking given as scores, checked against sklearn
    scores = np.arange(10, 0, -1, dtype=float)
    assert abs(DCG(k=10).update(rel, scores).get() - dcg_score([rel], [scores], k=10)) < 1e-12
    assert abs(NDCG(k=10).update(rel, scores).get() - ndcg_score([rel], [scores], k=10)) < 1e-12


def test_design_ap_and_map_worked_examples():
    ranked = [0] * 10
    for r in (1, 2, 4, 6, 10):
        ranked[r - 1] = 1
    assert round(APAtK(k=None).update(ranked).get(), 6) == 0.783333
    q1, q2 = [1, 0, 1, 0, 1], [0, 1, 0, 0, 0]
    m = MAPAtK(k=5)
    assert round(m.update(q1).get(), 6) == 0.755556
    assert round(m.update(q2).get(), 6) == 0.627778


def test_ties_hand_computed():
    # two candidates tied at the top, one relevant: P@1 = 1/2, RR = (1 + 1/2) / 2
    assert PrecisionAtK(k=1).update([1, 0], [0.5, 0.5]).get() == 0.5
    assert MRR().update([1, 0], [0.5, 0.5]).get() == 0.75
    assert HitAtK(k=1).update([1, 0, 0], [1, 1, 1]).get() == pytest.approx(1 / 3, abs=1e-15)
    # ignore_ties keeps the given order
    assert MRR(ignore_ties=True).update([0, 1], [0.5, 0.5]).get() == 0.5
    # a constant scorer is a random ranking, whatever the order of the log
    a = APAtK(k=None).update([1, 1, 0, 0], [0, 0, 0, 0]).get()
    b = APAtK(k=None).update([0, 0, 1, 1], [0, 0, 0, 0]).get()
    assert a == b


# ------------------------------------------------------ sklearn, real-looking


@pytest.mark.parametrize("k", [None, 1, 5, 10, 150])
@pytest.mark.parametrize("rounding", [None, 1])
def test_dcg_ndcg_equal_sklearn_on_realistic_batches(k, rounding):
    rng = np.random.default_rng(7)
    nq, m = 60, 100
    rel = rng.choice([0, 0, 0, 1, 1, 2, 3], size=(nq, m)).astype(float)
    scores = rel + rng.normal(0, 1.5, size=(nq, m))
    if rounding is not None:
        scores = scores.round(rounding)  # many ties
    w = rng.uniform(0.1, 3.0, nq)
    for cls, fn in ((DCG, dcg_score), (NDCG, ndcg_score)):
        metric = cls(k=k)
        for i in range(nq):
            metric.update(rel[i], scores[i], w=w[i])
            if i % 10 == 9:  # the prefix equals sklearn on the prefix
                expect = fn(rel[: i + 1], scores[: i + 1], k=k, sample_weight=w[: i + 1])
                assert abs(metric.get() - expect) < 1e-12
        batch = cls(k=k).update_many(rel, scores, w)
        assert batch.get() == metric.get()
        assert abs(batch.get() - fn(rel, scores, k=k, sample_weight=w)) < 1e-12
        no_ties = cls(k=k, ignore_ties=True).update_many(rel, scores, w)
        if rounding is None:
            assert abs(no_ties.get() - fn(rel, scores, k=k, sample_weight=w,
                                          ignore_ties=True)) < 1e-12


def test_ndcg_all_zero_query_is_zero_like_sklearn():
    y = np.array([[0, 0, 0], [1, 0, 2]], dtype=float)
    s = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
    metric = NDCG().update_many(y, s)
    assert abs(metric.get() - ndcg_score(y, s)) < 1e-12
    assert metric.skipped == 0
    skip = NDCG(no_relevant="skip").update_many(y, s)
    assert abs(skip.get() - ndcg_score(y[1:], s[1:])) < 1e-12 and skip.skipped == 1


def test_log_base_and_exponential_gain_match_the_definition():
    rel = [3, 0, 2, 1, 0, 3]
    scores = [0.9, 0.8, 0.8, 0.3, 0.2, 0.1]
    for kw in ({"gain": "exponential"}, {"log_base": 10}, {"discount": "jk", "log_base": 3}):
        for cls in (DCG, NDCG):
            got = cls(k=4, **kw).update(rel, scores).get()
            exp = oracle_query(cls, rel, scores, 4, gain=kw.get("gain", "linear"),
                               discount=kw.get("discount", "log"), b=kw.get("log_base", 2))
            assert close(got, exp)
    assert close(DCG(log_base=10).update(rel, scores).get(),
                 dcg_score([rel], [scores], log_base=10))


# ----------------------------------------------------- property-based checks

query = st.integers(0, 6).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([0, 0, 1, 2, 3]), min_size=n, max_size=n),
        st.one_of(st.none(), st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, -2.0]),
                                      min_size=n, max_size=n)),
        st.sampled_from([1.0, 1.0, 0.5, 2.0, 3.0, 0.1]),
    )
)
params = st.fixed_dictionaries({
    "cls": st.sampled_from(ALL),
    "k": st.sampled_from([None, 1, 2, 3, 5]),
    "ignore_ties": st.booleans(),
    "no_relevant": st.sampled_from(["zero", "skip"]),
    "gain": st.sampled_from(["linear", "exponential"]),
    "discount": st.sampled_from(["log", "jk"]),
})


def build(p):
    cls = p["cls"]
    kw = {"ignore_ties": p["ignore_ties"], "no_relevant": p["no_relevant"]}
    if cls in (DCG, NDCG):
        kw.update(gain=p["gain"], discount=p["discount"])
    return cls(k=p["k"], **kw)


def oracle_kw(p):
    return {"gain": p["gain"], "discount": p["discount"]} if p["cls"] in (DCG, NDCG) else {}


@settings(max_examples=100, deadline=None)
@given(p=params, queries=st.lists(query, max_size=8))
def test_prefix_equals_brute_force_after_every_update(p, queries):
    metric = build(p)
    for i, (rels, scores, w) in enumerate(queries):
        metric.update(rels, scores, w=w)
        metric._check()
        expect = oracle_mean(p["cls"], queries[: i + 1], p["k"], p["no_relevant"],
                             p["ignore_ties"], **oracle_kw(p))
        assert close(metric.get(), expect), (metric.get(), expect)


@settings(max_examples=100, deadline=None)
@given(p=params, queries=st.lists(query, max_size=10), data=st.data())
def test_revert_is_exact(p, queries, data):
    metric = build(p)
    for rels, scores, w in queries:
        metric.update(rels, scores, w=w)
    drop = data.draw(st.sets(st.integers(0, max(len(queries) - 1, 0))) if queries else st.just(set()))
    for i in sorted(drop):
        metric.revert(*queries[i][:2], w=queries[i][2])
        metric._check()
    fresh = build(p)
    for i, (rels, scores, w) in enumerate(queries):
        if i not in drop:
            fresh.update(rels, scores, w=w)
    a, b = metric.get(), fresh.get()
    assert (math.isnan(a) and math.isnan(b)) or a == b  # bit for bit
    assert (metric.n, metric.skipped) == (fresh.n, fresh.skipped)


@settings(max_examples=100, deadline=None)
@given(p=params, queries=st.lists(query, max_size=10), cut=st.integers(0, 10))
def test_merge_and_update_many_equal_the_loop(p, queries, cut):
    loop = build(p)
    for rels, scores, w in queries:
        loop.update(rels, scores, w=w)
    left, right = build(p), build(p)
    for rels, scores, w in queries[:cut]:
        left.update(rels, scores, w=w)
    for rels, scores, w in queries[cut:]:
        right.update(rels, scores, w=w)
    merged = left.merge(right)
    batch = build(p)
    if queries and all(s is None for _, s, _ in queries):
        batch.update_many([q[0] for q in queries], None, [q[2] for q in queries])
    elif queries and all(s is not None for _, s, _ in queries):
        batch.update_many([q[0] for q in queries], [q[1] for q in queries],
                          [q[2] for q in queries])
    else:
        for rels, scores, w in queries:  # mixed: two batches
            batch.update_many([rels], None if scores is None else [scores], [w])
    for other in (merged, batch):
        a, b = other.get(), loop.get()
        assert (math.isnan(a) and math.isnan(b)) or a == b
        assert (other.n, other.skipped) == (loop.n, loop.skipped)
    state = json.loads(json.dumps(loop.to_state()))
    back = streameval.from_state(state)
    assert type(back) is type(loop) and back._params() == loop._params()
    a, b = back.get(), loop.get()
    assert (math.isnan(a) and math.isnan(b)) or a == b
    back._check()


@settings(max_examples=60, deadline=None)
@given(xs=st.lists(st.floats(-1e300, 1e300) | st.floats(-1, 1), max_size=30))
def test_exact_sum(xs):
    s = ExactSum()
    for x in xs:
        s.add(x)
    assert s.value() == math.fsum(xs)
    t = ExactSum()
    t.add_array(np.array(xs, dtype=float))
    assert t.value() == math.fsum(xs)
    for x in xs:
        s.add(-x)
    assert s.value() == 0.0


def test_exact_sum_partials_stay_non_overlapping_when_a_term_cancels():
    # 1 + 1e-20 - 1: the cancelled top partial must go, not stay as a trailing 0.0
    s = ExactSum()
    for x in (1.0, 1e-20, -1.0):
        s.add(x)
    assert s.value() == 1e-20
    assert all(abs(a) < abs(b) for a, b in zip(s.p, s.p[1:])), s.p
    m = PrecisionAtK(k=3)
    m.update([1, 0, 0], [3, 2, 1], w=1.0)
    m.update([1, 0, 0], [3, 2, 1], w=1e-20)
    m.revert([1, 0, 0], [3, 2, 1], w=1.0)
    m._check()
    assert m.get() == 1 / 3


def test_sliding_window_by_revert_equals_recomputation():
    rng = np.random.default_rng(3)
    qs = [(rng.integers(0, 3, 20), rng.random(20).round(1)) for _ in range(200)]
    size = 25
    metric = NDCG(k=5)
    for i, (r, s) in enumerate(qs):
        metric.update(r, s)
        if i >= size:
            metric.revert(*qs[i - size])
        window = qs[max(0, i - size + 1): i + 1]
        expect = ndcg_score(np.array([q[0] for q in window]), np.array([q[1] for q in window]), k=5)
        assert abs(metric.get() - expect) < 1e-12


def test_update_many_accepts_ragged_lists_and_arrays():
    rng = np.random.default_rng(5)
    rels = [rng.integers(0, 3, n).tolist() for n in (0, 3, 7, 1, 12)]
    scores = [rng.random(len(r)).round(1).tolist() for r in rels]
    for cls in ALL:
        loop = cls()
        for r, s in zip(rels, scores):
            loop.update(r, s)
        batch = cls().update_many(rels, scores)
        assert batch.get() == loop.get() and batch.skipped == loop.skipped
    y = rng.integers(0, 3, (5, 8))
    s = rng.random((5, 8))
    a = APAtK(k=3).update_many(y, s)
    b = APAtK(k=3).update_many(list(y), list(s))
    assert a.get() == b.get()


# --------------------------------------------------------------- bad input


@pytest.mark.parametrize("cls", ALL)
def test_bad_input_raises_and_changes_nothing(cls):
    metric = cls().update([1, 0, 2], [0.3, 0.2, 0.1])
    before = json.dumps(metric.to_state())
    cases = [
        (([1, 0], [0.5, float("nan")]), "scores[1] = nan"),
        (([1, 0, 1], [0.5, 0.1]), "relevances has 3 elements but scores has 2"),
        (([1, -1], [0.5, 0.1]), "relevances[1] = -1.0"),
        (([1, "a"], None), "relevances[1] = 'a'"),
        (([1, 0], [0.5, None]), "scores[1] = None"),
        (("10", None), "must be a sequence"),
        (([1, float("inf")], None), "relevances[1] = inf"),
    ]
    for args, msg in cases:
        with pytest.raises(ValueError, match=msg.replace("[", r"\[").replace("]", r"\]")):
            metric.update(*args)
        with pytest.raises(ValueError):
            metric.revert(*args)
    with pytest.raises(ValueError, match="w = -1"):
        metric.update([1, 0], [0.1, 0.2], w=-1)
    # batches name the query and position, and apply nothing
    with pytest.raises(ValueError, match=r"query 2: scores\[1\] = nan"):
        metric.update_many([[1], [0], [1, 1]], [[0.1], [0.2], [0.3, float("nan")]])
    with pytest.raises(ValueError, match=r"query 1: relevances\[0\] = -2.0"):
        metric.update_many([[1], [-2]], None)
    with pytest.raises(ValueError, match=r"query 1: relevances has 2 elements but scores has 1"):
        metric.update_many([[1], [1, 0]], [[0.1], [0.2]])
    with pytest.raises(ValueError, match=r"w\[1\] = -1.0"):
        metric.update_many([[1], [1, 0]], None, [1.0, -1.0])
    # a scalar where one weight per query is expected: a ValueError, not a TypeError
    with pytest.raises(ValueError, match="w = True"):
        metric.update([1, 0], [0.1, 0.2], w=True)
    with pytest.raises(ValueError, match=r"w\[1\] = None"):
        metric.update_many([[1], [1, 0]], None, [1.0, None])
    with pytest.raises(ValueError, match="w = 2.0"):
        metric.update_many([[1], [1, 0]], None, 2.0)
    assert json.dumps(metric.to_state()) == before


def test_bad_parameters():
    with pytest.raises(ValueError, match="k = 0"):
        PrecisionAtK(k=0)
    with pytest.raises(ValueError, match="no_relevant = 'drop'"):
        NDCG(no_relevant="drop")
    with pytest.raises(ValueError, match="gain = 'cubic'"):
        DCG(gain="cubic")
    with pytest.raises(ValueError, match="log_base = 1"):
        DCG(log_base=1)
    with pytest.raises(ValueError, match="relevances\\[0\\] = 2000.0"):
        DCG(gain="exponential").update([2000.0])
    with pytest.raises(ValueError, match="cannot merge"):
        NDCG(k=3).merge(NDCG(k=4))
    with pytest.raises(ValueError, match="more reverts than updates"):
        MRR().revert([1])


def test_empty_and_nan():
    assert math.isnan(NDCG().get())
    m = RecallAtK()
    m.update([], [])
    assert math.isnan(m.get()) and m.skipped == 1
    assert PrecisionAtK(k=None).update([]).get() == 0.0
    # weight zero everywhere: undefined, not 0
    assert math.isnan(MRR().update([1], w=0.0).get())


@pytest.mark.parametrize("cls", ALL)
def test_bad_state_is_refused_with_a_value_error(cls):
    good = cls().update([1, 0, 2], [0.3, 0.2, 0.1]).to_state()
    bad_datas = [{}, {**good["data"], "n": "x"}, {**good["data"], "n": -1},
                 {**good["data"], "vsum": None}, {**good["data"], "wsum": [float("nan")]}]
    for data in bad_datas:
        with pytest.raises(ValueError, match=f"bad {cls.__name__} state"):
            streameval.from_state({**good, "data": data})
    assert streameval.from_state(json.loads(json.dumps(good))).get() == cls().update(
        [1, 0, 2], [0.3, 0.2, 0.1]).get()


# ------------------------------------------------------------ the trusted path


def _batch_args(queries):
    rels = [q[0] for q in queries]
    scores = None if any(q[1] is None for q in queries) else [q[1] for q in queries]
    if scores is None:  # relevances in ranked order (the scores' order otherwise)
        rels = [q[0] if q[1] is None else [r for _, r in sorted(
            zip(q[1], q[0]), key=lambda t: -t[0])] for q in queries]
    return rels, scores, [q[2] for q in queries]


@settings(max_examples=100, deadline=None)
@given(p=params, queries=st.lists(query, max_size=10), data=st.data())
def test_validate_then_trusted_equals_update_many_the_loop_and_brute_force(p, queries, data):
    """update_trusted(*validate(...)) == update_many == a loop of update; a subset taken
    from the validated columns (as a window takes its expired events) reverts exactly,
    and one query too many is refused at the index a loop of revert refuses."""
    p = {**p, "ignore_ties": True}  # the ranked-order rewrite below fixes tied orders
    rels, scores, w = _batch_args(queries)
    trusted, many, loop = build(p), build(p), build(p)
    cols = trusted.validate(rels, scores, w)
    assert trusted.update_trusted(*cols) is trusted
    many.update_many(rels, scores, w)
    for i in range(len(rels)):
        loop.update(rels[i], None if scores is None else scores[i], w=w[i])
    ranked = [(r, None, wi) for r, wi in zip(rels, w)] if scores is None else queries
    expect = oracle_mean(p["cls"], ranked, p["k"], p["no_relevant"], True, **oracle_kw(p))
    for m in (trusted, many):
        a, b = m.get(), loop.get()
        assert (math.isnan(a) and math.isnan(b)) or a == b  # bit for bit
        assert (m.n, m.skipped) == (loop.n, loop.skipped)
        assert close(a, expect), (a, expect)
    # revert a subset through the validated columns: equal to building the rest
    drop = sorted(data.draw(st.sets(st.integers(0, max(len(rels) - 1, 0)))) if rels else [])
    trusted.revert_trusted(*take_columns(cols, np.array(drop, dtype=np.int64)))
    trusted._check()
    rest = build(p)
    for i in range(len(rels)):
        if i not in drop:
            rest.update(rels[i], None if scores is None else scores[i], w=w[i])
    a, b = trusted.get(), rest.get()
    assert (math.isnan(a) and math.isnan(b)) or a == b
    assert (trusted.n, trusted.skipped) == (rest.n, rest.skipped)
    # everything again: the loop refuses at some query; revert_trusted names the same one
    state = trusted.to_state()
    try:
        Metric.revert_trusted(rest, rels, [None] * len(rels) if scores is None else scores, w)
        expected = None
    except ValueError as e:
        expected = e.index
    try:
        trusted.revert_trusted(*cols)
        got = None
    except ValidationError as e:
        got = e.index
        assert "more reverts than updates" in str(e)
        assert trusted.to_state() == state
    assert got == expected


def test_validation_errors_carry_the_query_index():
    m = NDCG()
    with pytest.raises(ValidationError) as e:
        m.update_many([[1, 0], [0, 2, 1], [1, -2.0]])
    assert e.value.index == 2 and str(e.value).startswith("query 2: relevances[1] = -2.0")
    with pytest.raises(ValidationError) as e:
        m.validate([[1, 0], [0, 1]], [[0.5, 0.1], [0.2]])
    assert e.value.index == 1
    assert np.isnan(m.get()) and m.n == 0
    cols = m.validate(np.array([[1, 0, 2], [0, 0, 1]]), None, [1.0, 2.0])
    assert isinstance(cols[0], np.ndarray) and cols[0].shape == (2, 3) and cols[1] is None
    expected = np.average([ndcg_score([[1, 0, 2]], [[3, 2, 1]]),
                           ndcg_score([[0, 0, 1]], [[3, 2, 1]])], weights=[1.0, 2.0])
    assert close(m.update_trusted(*cols).get(), expected)


def test_declared_parameter_checks():
    for bad in (0, 1.5, True, "3"):
        with pytest.raises(ValidationError, match=r"k = .*: must be an integer >= 1 or None"):
            PrecisionAtK(k=bad)
    with pytest.raises(ValidationError, match="ignore_ties = 1: must be one of True, False"):
        MRR(ignore_ties=1)
    with pytest.raises(ValidationError, match="discount = 'exp'"):
        DCG(discount="exp")
    assert PrecisionAtK(k=np.int64(3)).k == 3
