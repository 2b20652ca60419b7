"""ScoreOrder: the weighted score order behind exact AUC/AP.

Oracle: brute force over the multiset of stored events (every (positive, negative)
pair for U, per-score sums for the weights). Small loads force many block splits,
deletions and group boundaries; ``_check()`` runs after every operation.
"""

import json
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streameval.metrics import scoreorder
from streameval.metrics.scoreorder import ScoreOrder, mann_whitney_u


# every test here in both bulk layouts of the score order (see conftest.layout)
pytestmark = pytest.mark.usefixtures("layout")


def brute_u(events):
    """U over all (positive, negative) pairs of a list of (score, positive, weight)."""
    pos = [(s, w) for s, p, w in events if p]
    neg = [(s, w) for s, p, w in events if not p]
    return sum(wp * wn * (1.0 if sp > sn else 0.5 if sp == sn else 0.0)
               for sp, wp in pos for sn, wn in neg)


def brute_table(events):
    table = {}
    for s, p, w in events:
        e = table.setdefault(s, [0.0, 0.0, 0, 0])
        e[0 if p else 1] += w
        e[2 if p else 3] += 1
    keys = sorted(table)
    return (np.array(keys), np.array([table[k][0] for k in keys]),
            np.array([table[k][1] for k in keys]), np.array([table[k][2] for k in keys]),
            np.array([table[k][3] for k in keys]))


def assert_matches(order, events, tol=1e-9):
    order._check()
    keys, wp, wn, cp, cn = order.arrays()
    bk, bwp, bwn, bcp, bcn = brute_table(events)
    assert keys.tolist() == bk.tolist()
    assert cp.tolist() == bcp.tolist() and cn.tolist() == bcn.tolist()
    np.testing.assert_allclose(wp, bwp, rtol=0, atol=tol)
    np.testing.assert_allclose(wn, bwn, rtol=0, atol=tol)
    assert order.u == pytest.approx(brute_u(events), rel=1e-12, abs=tol)
    assert order.n_pos == sum(p for _, p, _ in events)
    assert order.n_neg == sum(not p for _, p, _ in events)
    assert len(order) == len(bk)


def test_empty_order():
    o = ScoreOrder()
    o._check()
    assert len(o) == 0 and math.isnan(o.auc())
    assert [a.tolist() for a in o.arrays()] == [[], [], [], [], []]
    assert [a.tolist() for a in o.weights()] == [[], []]
    assert not o.contains(0.5, True)
    with pytest.raises(KeyError):
        o.remove(0.5, True, 1.0)


def test_hand_example():
    # positives 0.9, 0.4; negatives 0.9, 0.3: pairs (0.9,0.9) tie, (0.9,0.3) win,
    # (0.4,0.9) loss, (0.4,0.3) win -> U = 2.5 of 4
    o = ScoreOrder()
    for s, p in [(0.9, True), (0.9, False), (0.3, False), (0.4, True)]:
        o.add(s, p, 1.0)
    o._check()
    assert o.u == 2.5 and o.auc() == 0.625
    assert o.arrays()[0].tolist() == [0.3, 0.4, 0.9]


@pytest.mark.parametrize("load", [4, 5, 8])
@pytest.mark.parametrize("seed", range(3))
def test_random_adds_and_removes_small_blocks(load, seed):
    """Many blocks (load 4: > 64 blocks, so several groups), random removals."""
    rng = random.Random(seed)
    o = ScoreOrder(load=load)
    events = []
    for step in range(2500):
        if events and rng.random() < 0.3:
            e = events.pop(rng.randrange(len(events)))
            o.remove(*e)
        else:
            e = (rng.choice([round(rng.random(), 2), rng.random()]), rng.random() < 0.4,
                 float(rng.choice([1, 2, 3])))
            events.append(e)
            o.add(*e)
        if step % 100 == 0:
            assert_matches(o, events)
    assert load > 4 or len(o._keys) > 64  # several groups were exercised
    assert_matches(o, events)
    while events:  # drain: everything deleted, exact zeros
        o.remove(*events.pop(rng.randrange(len(events))))
    o._check()
    assert len(o) == 0 and o.u == 0.0 and o.pos_weight == 0.0 and o.neg_weight == 0.0


def test_ascending_and_descending_inserts_split_blocks():
    o = ScoreOrder(load=4)
    events = [(float(i), i % 3 == 0, 1.0) for i in range(300)]
    for e in events:
        o.add(*e)
        o._check()
    for e in reversed(events):
        o.add(e[0] - 1000.0, not e[1], 2.0)
    o._check()
    events += [(e[0] - 1000.0, not e[1], 2.0) for e in reversed(events)]
    assert_matches(o, events)


def test_fractional_weights_settle_to_exact_zero():
    o = ScoreOrder(load=4)
    events = [(0.5, True, 0.1), (0.5, True, 0.2), (0.7, False, 0.3), (0.1, True, 0.7)]
    for e in events:
        o.add(*e)
    for e in events:
        if e[1]:
            o.remove(*e)
    o._check()
    assert o.pos_weight == 0.0 and o.u == 0.0 and math.isnan(o.auc())
    assert o.arrays()[1].tolist() == [0.0]


def test_zero_weight_events_are_stored_but_weigh_nothing():
    o = ScoreOrder()
    o.add(0.4, True, 0.0)
    o.add(0.2, False, 1.0)
    assert o.nz_pos == 0 and math.isnan(o.auc())  # only a zero-weight positive
    o.add(0.6, True, 2.0)
    assert o.auc() == 1.0
    o.remove(0.6, True, 2.0)
    o._check()
    assert o.pos_weight == 0.0 and math.isnan(o.auc()) and len(o) == 2


def test_remove_unknown_event_leaves_state_unchanged():
    o = ScoreOrder()
    o.add(0.4, True, 1.0)
    before = o.to_data()
    for bad in [(0.5, True), (0.4, False), (1.0, True)]:
        with pytest.raises(KeyError):
            o.remove(bad[0], bad[1], 1.0)
    assert o.to_data() == before
    assert o.contains(0.4, True) and not o.contains(0.4, False)
    assert not o.contains(0.4, True, count=2)


@pytest.mark.parametrize("ratio", [0, 10**9, None])  # force one by one, rebuild, default
@pytest.mark.parametrize("stored,batch", [(0, 500), (2000, 10), (2000, 1500), (50, 50)])
def test_add_entries_both_paths_match_one_by_one(stored, batch, ratio, monkeypatch):
    """Few entries go one by one, many trigger the numpy merge: same state."""
    if ratio is not None:
        monkeypatch.setattr(scoreorder, "REBUILD_RATIO", ratio)
    rng = np.random.default_rng(stored + batch)
    base = [(float(s), bool(p), float(w)) for s, p, w in zip(
        rng.random(stored).round(3), rng.random(stored) < 0.3, rng.integers(1, 4, stored))]
    new = [(float(s), bool(p), float(w)) for s, p, w in zip(
        rng.random(batch).round(3), rng.random(batch) < 0.3, rng.integers(0, 4, batch))]
    o = ScoreOrder(load=8)
    for e in base:
        o.add(*e)
    keys, wp, wn, cp, cn = brute_table(new)
    zp = sum(1 for s, p, w in new if p and w == 0)
    zn = sum(1 for s, p, w in new if not p and w == 0)
    o.add_entries(keys, wp, wn, cp, cn, zp, zn)
    assert_matches(o, base + new)
    assert o.z_pos == zp and o.z_neg == zn


def test_merge_equals_one_order():
    rng = random.Random(7)
    events = [(round(rng.random(), 2), rng.random() < 0.5, rng.choice([0.5, 1.0, 2.5]))
              for _ in range(900)]
    whole = ScoreOrder(load=6)
    parts = [ScoreOrder(load=6) for _ in range(3)]
    for j, e in enumerate(events):
        whole.add(*e)
        parts[j % 3].add(*e)
    parts[0].merge(parts[1])
    parts[0].merge(parts[2])
    assert_matches(parts[0], events)
    assert parts[0].u == pytest.approx(whole.u, rel=1e-12)


def test_state_round_trip_is_exact():
    rng = random.Random(3)
    o = ScoreOrder(load=4)
    events = [(rng.random(), rng.random() < 0.5, rng.random()) for _ in range(200)]
    for e in events:
        o.add(*e)
    data = json.loads(json.dumps(o.to_data()))
    p = ScoreOrder(load=4)
    p.set_data(data)
    p._check()
    assert p.to_data() == o.to_data()
    assert p.u == o.u and p.auc() == o.auc()
    for e in events[:50]:  # and it keeps working
        p.remove(*e)
        o.remove(*e)
    assert p.u == pytest.approx(o.u, rel=1e-12)


@pytest.mark.parametrize("patch,msg", [
    ({"scores": [0.2, 0.1]}, "increasing"),
    ({"wpos": [1.0]}, "different lengths"),
    ({"wpos": [-1.0, 0.0]}, "negative"),
    ({"npos": [0, 0], "nneg": [0, 1]}, "inconsistent"),
    ({"u": "x"}, "bad score-order state"),
    ({"scores": [0.1, float("nan")]}, "finite"),
    # totals and U that do not follow from the per-score weights (AUC would be 1, or 1/5)
    ({"u": 1.0}, "U or totals"),
    ({"pos_weight": 5.0}, "U or totals"),
    # the only positive counted as zero-weight while it weighs 1
    ({"zero_pos": 1}, "U or totals"),
])
def test_set_data_refuses_bad_states(patch, msg):
    good = {"scores": [0.1, 0.2], "wpos": [1.0, 0.0], "wneg": [0.0, 1.0], "npos": [1, 0],
            "nneg": [0, 1], "u": 0.0, "pos_weight": 1.0, "neg_weight": 1.0,
            "zero_pos": 0, "zero_neg": 0}
    o = ScoreOrder()
    o.set_data(good)
    o._check()
    with pytest.raises(ValueError, match=msg):
        ScoreOrder().set_data({**good, **patch})


def test_mann_whitney_u_matches_brute_force():
    rng = random.Random(1)
    events = [(round(rng.random(), 1), rng.random() < 0.5, rng.random()) for _ in range(60)]
    _, wp, wn, _, _ = brute_table(events)
    assert mann_whitney_u(wp, wn) == pytest.approx(brute_u(events), rel=1e-12)


def test_load_is_validated():
    with pytest.raises(ValueError, match="load"):
        ScoreOrder(load=2)


event = st.tuples(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0, -3.0, 7.5]),
                  st.booleans(), st.sampled_from([0.0, 0.5, 1.0, 2.0]))


@settings(max_examples=80, deadline=None)
@given(st.lists(event, max_size=60), st.data())
def test_hypothesis_add_remove_inverse(events, data):
    o = ScoreOrder(load=4)
    for e in events:
        o.add(*e)
    assert_matches(o, events)
    order = data.draw(st.permutations(range(len(events))))
    kept = list(events)
    for j in order[: len(order) // 2]:
        o.remove(*events[j])
        kept.remove(events[j])
    assert_matches(o, kept)


@settings(max_examples=60, deadline=None)
@given(st.lists(event, max_size=40), st.lists(event, max_size=40))
def test_hypothesis_merge_and_entries(a, b):
    oa, ob = ScoreOrder(load=4), ScoreOrder(load=4)
    for e in a:
        oa.add(*e)
    for e in b:
        ob.add(*e)
    oa.merge(ob)
    assert_matches(oa, a + b)


def test_rebuild_ratio_constant_is_documented():
    assert scoreorder.REBUILD_RATIO > 1 and scoreorder.DEFAULT_LOAD >= 4


def table_of(events):
    """The aggregated (keys, wp, wn, cp, cn, z_pos, z_neg) of events, by brute force."""
    zp = sum(1 for _, p, w in events if p and w == 0.0)
    zn = sum(1 for _, p, w in events if not p and w == 0.0)
    return (*brute_table(events), zp, zn)


@pytest.mark.parametrize("load", [4, 8])
@pytest.mark.parametrize("ratio", [0, 10**9])  # entry by entry / bulk rebuild
def test_remove_entries_equals_brute_force_and_one_by_one(load, ratio, monkeypatch):
    monkeypatch.setattr(scoreorder, "REMOVE_REBUILD_RATIO", ratio)
    rng = random.Random(load + ratio)
    events = [(rng.choice([round(rng.random(), 2), rng.random()]), rng.random() < 0.4,
               float(rng.choice([0, 1, 2, 3]))) for _ in range(1500)]
    o, loop = ScoreOrder(load=load), ScoreOrder(load=load)
    for e in events:
        o.add(*e)
        loop.add(*e)
    rng.shuffle(events)
    while events:
        cut = rng.choice([1, 7, 100, 400])
        gone, events = events[:cut], events[cut:]
        o.remove_entries(*(np.asarray(x) for x in table_of(gone)[:5]), *table_of(gone)[5:])
        for e in gone:
            loop.remove(*e)
        assert_matches(o, events)
        assert o.u == loop.u  # integer weights: exact
        assert (o.n_pos, o.n_neg, o.z_pos, o.z_neg) == (loop.n_pos, loop.n_neg,
                                                        loop.z_pos, loop.z_neg)
    assert len(o) == 0 and o.u == 0.0 and o.pos_weight == 0.0 and o.neg_weight == 0.0


@pytest.mark.parametrize("ratio", [0, 10**9])
def test_remove_entries_refuses_and_changes_nothing(ratio, monkeypatch):
    monkeypatch.setattr(scoreorder, "REMOVE_REBUILD_RATIO", ratio)
    o = ScoreOrder(load=4)
    events = [(float(i % 50), i % 3 == 0, 1.0) for i in range(200)] + [(7.0, True, 0.0)]
    for e in events:
        o.add(*e)
    state = json.dumps(o.to_data())
    for gone, bad in [
        ([(1.5, True, 1.0)], [True]),  # a score never stored
        ([(0.0, True, 1.0)] * 2 + [(3.0, False, 1.0)] * 5, [False, True]),  # 5 > 2 stored
        ([(7.0, True, 0.0)] * 2, [False]),  # more zero-weight positives than stored
    ]:
        with pytest.raises(KeyError) as e:
            o.remove_entries(*table_of(gone))
        assert e.value.args[0].tolist() == bad
        assert json.dumps(o.to_data()) == state
        assert not o.can_remove(*table_of(gone))
    assert o.can_remove(*table_of(events))
    o.remove_entries(*table_of(events))
    assert len(o) == 0 and o.n_pos == o.z_pos == 0


def test_remove_refuses_a_weight_class_never_stored():
    o = ScoreOrder()
    o.add(0.5, True, 0.0)
    with pytest.raises(KeyError):
        o.remove(0.5, True, 1.0)  # only a zero-weight positive is stored
    o.add(0.5, False, 2.0)
    with pytest.raises(KeyError):
        o.remove(0.5, False, 0.0)  # only a weighted negative is stored
    o._check()
    assert (o.n_pos, o.z_pos, o.n_neg, o.z_neg) == (1, 1, 1, 0)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.booleans(),
                          st.sampled_from([0.0, 0.5, 1.0, 3.0])), max_size=40),
       st.data(), st.booleans())
def test_hypothesis_remove_entries_inverse(events, data, bulk):
    with pytest.MonkeyPatch.context() as mp:
        for name in ("REBUILD_RATIO", "REMOVE_REBUILD_RATIO"):
            mp.setattr(scoreorder, name, 10**9 if bulk else 0)
        o = ScoreOrder(load=4)
        for e in events:
            o.add(*e)
        keep = data.draw(st.lists(st.booleans(), min_size=len(events), max_size=len(events)))
        gone = [e for e, k in zip(events, keep) if not k]
        left = [e for e, k in zip(events, keep) if k]
        if gone:
            o.remove_entries(*table_of(gone))
        assert_matches(o, left)
        assert o.u == brute_u(left)  # dyadic weights: exact


def test_integral_flag_follows_every_way_weights_come_in():
    o = ScoreOrder(load=4)
    for i in range(20):
        o.add(i / 20, i % 2 == 0, float(i % 3))
    assert o.integral and o.exact_ints()
    o.add(0.33, True, 0.5)
    assert not o.integral and not o.exact_ints()
    o.clear()
    assert o.integral
    o.add_entries(*(np.asarray(x) for x in brute_table([(0.1, True, 2.0), (0.2, False, 1.0)])))
    assert o.integral
    o.add_entries(*(np.asarray(x) for x in brute_table([(0.3, True, 0.25)])))
    assert not o.integral
    other = ScoreOrder()
    other.set_data(json.loads(json.dumps(o.to_data())))
    assert not other.integral
    other.set_data(json.loads(json.dumps(ScoreOrder().to_data())))
    assert other.integral
    big = ScoreOrder()
    big.add(0.5, True, 2.0**53)
    assert big.integral and not big.exact_ints()  # sums beyond 2**53 are not exact
    # a fractional weight removed (not the one added: misuse, but not integers either)
    o = ScoreOrder()
    o.add(0.5, True, 2.0)
    o.add(0.5, True, 1.0)
    o.remove(0.5, True, 0.5)
    assert not o.integral


def test_mann_whitney_u_int64_prefix_sums_equal_float():
    rng = np.random.default_rng(3)
    wp = rng.integers(0, 5, 300).astype(float)
    wn = rng.integers(0, 5, 300).astype(float)
    events = [(float(i), True, p) for i, p in enumerate(wp) if p] + \
             [(float(i), False, n) for i, n in enumerate(wn) if n]
    assert mann_whitney_u(wp, wn, ints=True) == mann_whitney_u(wp, wn) == brute_u(
        [(s, p, 1.0) for s, p, w in events for _ in range(int(w))])


def _replace_some(o, stored, added, data):
    """A window's step on ``o`` (holding ``stored``): ``added`` in, a drawn part of
    ``stored + added`` out; checks ``o`` against the events left, and returns them."""
    pool = stored + added
    keep = data.draw(st.lists(st.booleans(), min_size=len(pool), max_size=len(pool)))
    gone = [e for e, k in zip(pool, keep) if not k]
    left = [e for e, k in zip(pool, keep) if k]
    o.replace_entries(table_of(added), table_of(gone))
    assert_matches(o, left)
    return left


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 2.0]), st.booleans(),
                          st.sampled_from([0.0, 0.5, 1.0, 3.0])), max_size=40),
       st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.5, 2.0, 3.0]), st.booleans(),
                          st.sampled_from([0.0, 0.5, 1.0, 3.0])), max_size=20),
       st.data())
def test_hypothesis_replace_entries_equals_brute_force(stored, added, data):
    # a window's step: a batch in, a slice out (the slice may hold events of the batch)
    o = ScoreOrder(load=4)
    for e in stored:
        o.add(*e)
    left = _replace_some(o, stored, added, data)
    assert o.u == brute_u(left)  # dyadic weights: exact
    zp = sum(1 for _, p, w in left if p and w == 0.0)
    zn = sum(1 for _, p, w in left if not p and w == 0.0)
    assert (o.z_pos, o.z_neg) == (zp, zn)


def test_replace_entries_refuses_and_changes_nothing():
    o = ScoreOrder(load=4)
    for e in [(float(i % 30), i % 3 == 0, 1.0) for i in range(120)]:
        o.add(*e)
    o.add_entries(*table_of([(0.5, False, 1.0)] * 300))  # bulk: the order is flat arrays
    state = json.dumps(o.to_data())
    added = [(40.0, True, 1.0), (1.0, False, 2.0)]
    for gone, bad in [
        ([(41.0, True, 1.0)], [True]),  # neither stored nor added
        ([(40.0, True, 1.0)] * 2, [True]),  # one added, two removed
        ([(1.0, False, 2.0), (3.0, True, 1.0), (3.0, False, 9.0)], [False, True]),
        ([(0.0, True, 1.0)] * 5, [True]),  # 4 stored
    ]:
        with pytest.raises(KeyError) as e:
            o.replace_entries(table_of(added), table_of(gone))
        assert e.value.args[0].tolist() == bad
        assert json.dumps(o.to_data()) == state
    o.replace_entries(table_of(added), table_of([(40.0, True, 1.0), (0.5, False, 1.0)]))
    assert o.contains(1.0, False, 1, 2.0) and not o.contains(40.0, True)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 2.0]), st.booleans()),
                min_size=1, max_size=40),
       st.lists(st.tuples(st.sampled_from([0.1, 0.25, 0.6, 1.5, 2.0, 3.0]), st.booleans()),
                min_size=1, max_size=20),
       st.data())
def test_hypothesis_replace_entries_unit_weights_equals_brute_force(stored, added, data):
    # weights of 1 on a bulk order: the flat layout's one-pass replacement where it
    # applies (scores all new in, stored ones out), the merge and subtraction elsewhere
    stored = [(s, p, 1.0) for s, p in stored]
    added = [(s, p, 1.0) for s, p in added]
    o = ScoreOrder(load=4)
    o.add_entries(*table_of(stored))
    left = _replace_some(o, stored, added, data)
    assert o.u == brute_u(left)  # integer weights: exact
    assert o.unit


def test_replace_entries_unit_weights_window_steps_take_one_pass(monkeypatch, layout):
    # a sliding window's steps on a flat order of distinct scores (and some ties, some
    # scores keeping events of the other class): brute force after every step, and the
    # one-pass replacement is what ran on the flat layout
    taken = []
    real = scoreorder._replaced_unit

    def spy(*args):
        out = real(*args)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(scoreorder, "_replaced_unit", spy)
    rng = random.Random(11)
    stream = [(rng.choice([rng.random(), round(rng.random(), 2)]), rng.random() < 0.3, 1.0)
              for _ in range(3000)]
    o = ScoreOrder()
    o.add_entries(*table_of(stream[:600]))
    lo, hi = 0, 600
    while hi < len(stream):
        step = rng.choice([1, 7, 40, 150])
        gone = stream[lo:lo + step]
        o.replace_entries(table_of(stream[hi:hi + step]), table_of(gone))
        lo, hi = lo + step, hi + step
        assert_matches(o, stream[lo:hi])
        assert o.u == brute_u(stream[lo:hi])
    if layout == "flat":
        assert any(taken) and not o.levelled
    else:
        assert not taken
