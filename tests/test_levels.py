"""metrics.levels: the numpy levels of big score orders.

Oracles: brute force over the multiset of stored events (per-score weights and counts,
every (positive, negative) pair for U) and scikit-learn's ``average_precision_score``.
The orders are forced into the levels layout at any size (``FLAT_MAX = 0``) with small
sides kept apart (``MIN_SIDE = 0``), so that a few dozen events already span several
sides, tombstones and merges (and no batch counts as "tiny", which would move the
order to blocks); ``_check()`` (every side's invariants, ``pn`` against a
recomputation, U against the pairs) runs after every operation.
"""

import gc
import json
import math
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, roc_auc_score

import streameval as se
from streameval.metrics import levels, scoreorder
from streameval.metrics.levels import Side, above, merge, own
from streameval.metrics.ranking import OrderView, _aggregate, _ap_bound, _pairs_bound
from streameval.metrics.scoreorder import ScoreOrder, coarse_key, coarse_keys

sys.path.insert(0, str(Path(__file__).parent))  # (the oracle's module, beside this one)
from ap_bound_support import ap_bound_of_bins  # noqa: E402

# before any test patches them
DEFAULTS = (scoreorder.FLAT_MAX, levels.MIN_SIDE, scoreorder.TRICKLE_ENTRIES)


@pytest.fixture(autouse=True)
def _levels_everywhere(monkeypatch):
    monkeypatch.setattr(scoreorder, "FLAT_MAX", 0)
    monkeypatch.setattr(levels, "MIN_SIDE", 0)
    monkeypatch.setattr(scoreorder, "TRICKLE_ENTRIES", 0)  # no batch is "tiny"


def brute(events):
    """Per-score (wp, wn, cp, cn) and U of a list of (score, positive, weight)."""
    table = {}
    for s, p, w in events:
        e = table.setdefault(s, [0.0, 0.0, 0, 0])
        e[0 if p else 1] += w
        e[2 if p else 3] += 1
    pos = [(s, w) for s, p, w in events if p]
    neg = [(s, w) for s, p, w in events if not p]
    u = sum(a * b * (1.0 if x > y else 0.5 if x == y else 0.0)
            for x, a in pos for y, b in neg)
    return table, u


def batch(order, events, sign):
    """Add (sign 1) or remove (sign -1) events as one aggregated batch."""
    if not events:
        return
    s = np.array([e[0] for e in events], dtype=float)
    y = np.array([e[1] for e in events], dtype=bool)
    w = np.array([e[2] for e in events], dtype=float)
    entries = _aggregate(y, s, w)
    (order.add_entries if sign > 0 else order.remove_entries)(*entries)


def assert_order(order, events, read_ap=False):
    order._check()
    table, u = brute(events)
    keys, wp, wn, cp, cn = order._levels.entries(keep=False) if order.levelled \
        else order.arrays()
    assert keys.tolist() == sorted(table)
    assert cp.tolist() == [table[k][2] for k in keys.tolist()]
    assert cn.tolist() == [table[k][3] for k in keys.tolist()]
    np.testing.assert_allclose(wp, [table[k][0] for k in keys.tolist()], atol=1e-9)
    np.testing.assert_allclose(wn, [table[k][1] for k in keys.tolist()], atol=1e-9)
    assert order.u == pytest.approx(u, rel=1e-12, abs=1e-9)
    if read_ap and order.levelled:
        y = np.array([p for _, p, _ in events], dtype=bool)
        w = np.array([w for _, _, w in events])
        if (w[y] > 0).any():
            s = np.array([e[0] for e in events])
            want = average_precision_score(y, s, sample_weight=w)
            got = max(0.0, order.ap_numerator() / order.pos_weight)
            assert got == pytest.approx(want, abs=1e-12)
        order._check()  # pn now kept by every positive side


def test_hand_example_spans_sides_and_tombstones():
    o = ScoreOrder()
    events = []
    for chunk in ([(0.9, True, 1.0), (0.8, False, 1.0)], [(0.3, False, 1.0), (0.9, False, 1.0)],
                  [(0.5, True, 1.0)], [(0.1, False, 1.0), (0.95, True, 1.0)]):
        batch(o, chunk, 1)
        events += chunk
        assert_order(o, events, read_ap=True)
    assert o.levelled
    # U by hand: 0.95 beats all 4 negatives; 0.9 beats 0.8, 0.3, 0.1 and ties 0.9;
    # 0.5 beats 0.3 and 0.1: 4 + 3.5 + 2 = 9.5 of 3 * 4 pairs
    assert o.u == 9.5 and o.auc() == 9.5 / 12
    batch(o, [(0.9, False, 1.0), (0.95, True, 1.0)], -1)  # tombstones
    events = [e for e in events if e not in ((0.9, False, 1.0), (0.95, True, 1.0))]
    assert_order(o, events, read_ap=True)
    assert o.u == 5.0 and o.auc() == 5.0 / 6


event = st.tuples(st.sampled_from([0.1, 0.2, 0.25, 0.5, 0.7, 0.9]) | st.floats(0, 1),
                  st.booleans(), st.sampled_from([1.0, 1.0, 1.0, 2.0, 0.0, 0.25, 0.1]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(event, min_size=1, max_size=12)),
                min_size=1, max_size=14),
       st.sampled_from([2, 4, 16]), st.booleans(), st.data())
def test_hypothesis_batches_in_and_out_equal_brute_force(steps, growth, read_ap, data):
    """Batches in and (earlier events) out, in any order, with unit, integer, zero and
    fractional weights: the same per-score table, U and AP as brute force."""
    levels_growth = levels.GROWTH
    levels.GROWTH = growth
    try:
        o = ScoreOrder()
        live = []
        for add, chunk in steps:
            if add or not live:
                batch(o, chunk, 1)
                live += chunk
            else:
                k = data.draw(st.integers(1, len(live)))
                idx = sorted(data.draw(st.permutations(range(len(live))))[:k])
                out = [live[i] for i in idx]
                batch(o, out, -1)
                live = [e for i, e in enumerate(live) if i not in set(idx)]
            assert_order(o, live, read_ap)
    finally:
        levels.GROWTH = levels_growth


def test_removing_a_zero_weight_event_where_a_weighted_one_comes_in_keeps_the_weight():
    """A tombstone of a zero-weight event and a new event of weight 1 at the same score
    cancel in count, not in weight, while another side holds the score's other
    events: the merged entry stays (count 0, weight 1) until the class has one side."""
    o = ScoreOrder()
    batch(o, [(0.5, True, 1.0), (0.5, True, 1.0), (0.5, True, 0.0)] +
          [(x / 100, False, 1.0) for x in range(40)], 1)
    batch(o, [(0.5, True, 0.0)], -1)
    batch(o, [(0.5, True, 1.0)], 1)
    live = [(0.5, True, 1.0)] * 3 + [(x / 100, False, 1.0) for x in range(40)]
    assert_order(o, live, read_ap=True)
    assert o.pos_weight == 3.0


def test_precision_at_a_score_whose_events_left_is_not_nan():
    """The top score's only event removed by a tombstone while its side still holds
    it: T = A = 0 there, precision 0, and AP is scikit-learn's."""
    o = ScoreOrder()
    events = [(x / 100, x % 3 == 0, 1.0) for x in range(60)]
    batch(o, events, 1)
    o.ap_numerator()  # AP read: positive sides keep pn
    batch(o, [(0.99, True, 1.0)], 1)
    batch(o, [(0.99, True, 1.0)], -1)
    assert len(o._levels.pos) > 1  # the tombstone has not met its event yet
    assert_order(o, events, read_ap=True)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(-3, 3).filter(bool),
                          st.integers(0, 8)), max_size=25),
       st.lists(st.tuples(st.integers(0, 30), st.integers(-3, 3).filter(bool),
                          st.integers(0, 8)), max_size=25),
       st.booleans(), st.booleans())
def test_hypothesis_merge_of_two_sides(a, b, fractional, final):
    """merge against a dict: per-score counts and weights added, running sums equal to
    the per-score weights, entries whose count and weight both cancel dropped (with
    ``final``, every entry whose count cancels)."""
    def side(entries):
        d = {}
        for k, c, w in entries:
            d[float(k)] = (c, w / 4.0 if fractional else float(w))
        keys = np.array(sorted(d))
        c = np.array([d[k][0] for k in keys.tolist()], dtype=np.int64)
        w = np.array([d[k][1] for k in keys.tolist()])
        return Side.build(keys, w, c, False, not fractional, not fractional), d
    x, dx = side(a)
    y, dy = side(b)
    want = {}
    for d in (dx, dy):
        for k, (c, w) in d.items():
            C, W = want.get(k, (0, 0.0))
            want[k] = (C + c, W + w)
    want = {k: v for k, v in want.items() if v[0] != 0 or (v[1] != 0 and not final)}
    big, small = (x, y) if x.size >= y.size else (y, x)
    placed = levels._merge_placed(big, small, final)
    for got in (merge(x, y, final=final), levels._merge_sorted(big, small, final),
                levels._final(placed) if final else placed):
        assert got.k.tolist() == sorted(want)
        assert got.counts().tolist() == [want[k][0] for k in got.k.tolist()]
        np.testing.assert_allclose(got.weights(), [want[k][1] for k in got.k.tolist()],
                                   atol=1e-12)
        np.testing.assert_allclose(own(got.w), got.weights(), atol=1e-12)
        assert got.w[-1] == 0.0
        got.check(False, not fractional)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), max_size=40, unique=True),
       st.lists(st.floats(0, 1), max_size=40, unique=True), st.booleans(), st.booleans())
def test_hypothesis_merge_of_sides_of_unit_events_keeps_pn_and_ones(a, b, with_pn, final):
    """Sides of one event of weight 1 per score (``ones``: the running sum counts down)
    merged by the sort and by placement: the union of the scores, a count of 2 where
    both held one, ``ones`` only without such a score, and ``pn`` carried through."""
    def side(keys):
        k = np.array(sorted(keys))
        s = Side.build(k, np.ones(len(k)), np.ones(len(k), dtype=np.int64), True, True, True)
        if with_pn:  # any per-score values: pn is a function of the score
            s.pn = np.append(k * 10.0, 0.0)
        return s
    x, y = side(a), side(b)
    assert x.ones and y.ones
    big, small = (x, y) if x.size >= y.size else (y, x)
    placed = levels._merge_placed(big, small, final)
    union = sorted(set(a) | set(b))
    for got in (levels._merge_sorted(big, small, final),
                levels._final(placed) if final else placed):
        assert got.k.tolist() == union
        assert got.counts().tolist() == [(u in a) + (u in b) for u in union]
        assert got.ones == (not set(a) & set(b))
        if with_pn and got.size:
            np.testing.assert_array_equal(got.pn, np.append(np.array(union) * 10.0, 0.0))
        else:
            assert got.pn is None or not got.size
        got.check(True, True)


def test_above_is_exact_in_int64_and_matches_float():
    w = np.arange(1.0, 1001.0)
    a = above(w, True)
    assert a[0] == w.sum() and a[-1] == 0.0 and (own(a) == w).all()
    np.testing.assert_allclose(above(w, False), a)


def test_tiny_batches_move_the_order_to_blocks_and_stay_exact(monkeypatch):
    """Rent or buy: tiny batches in the levels layout cost a numpy call each; after
    size / TRICKLE_RATIO of them the order goes to blocks (per-event path)."""
    monkeypatch.setattr(scoreorder, "TRICKLE_RATIO", 64)
    monkeypatch.setattr(scoreorder, "TRICKLE_ENTRIES", 16)
    o = ScoreOrder()
    rng = np.random.default_rng(5)
    events = [(float(s), bool(p), 1.0) for s, p in zip(rng.random(640), rng.random(640) < .3)]
    batch(o, events, 1)
    assert o.levelled
    for i in range(12):
        e = (float(rng.random()), bool(i % 2), 1.0)
        batch(o, [e], 1)
        events.append(e)
    assert not o.bulk  # blocks now
    assert_order(o, events)


def test_auc_and_ap_equal_sklearn_on_a_long_distinct_stream():
    """A cumulative ROCAUC/AP pair read after every batch of 1 000 (the Monitor's
    pattern): sides, tails, AP's rent and pn all at work; sklearn after every batch."""
    rng = np.random.default_rng(11)
    n = 30_000
    y = rng.random(n) < 0.1
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1)
    auc, ap = se.ROCAUC(), se.AveragePrecision()
    for a in range(0, n, 1000):
        auc.update_many(y[a:a + 1000], s[a:a + 1000])
        ap.update_many(y[a:a + 1000], s[a:a + 1000])
        assert auc.get() == pytest.approx(roc_auc_score(y[:a + 1000], s[:a + 1000]), abs=1e-12)
        assert ap.get() == pytest.approx(
            average_precision_score(y[:a + 1000], s[:a + 1000]), abs=1e-12)
    assert auc._so.levelled and ap._so.levelled
    auc._check()
    ap._check()


def test_memory_is_at_most_24_bytes_per_distinct_score_with_unit_weights(monkeypatch):
    """tracemalloc over a cumulative ROCAUC and AP sharing one order (the Monitor's
    pair), 200 000 distinct float scores read after every batch of 1 000, in the
    default layout: at most 24 bytes per stored distinct score, AP's ``pn`` included."""
    monkeypatch.setattr(scoreorder, "FLAT_MAX", DEFAULTS[0])
    monkeypatch.setattr(levels, "MIN_SIDE", DEFAULTS[1])
    rng = np.random.default_rng(3)
    n = 200_000
    y = rng.random(n) < 0.3
    s = rng.random(n)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        auc = se.ROCAUC()
        ap = OrderView(se.AveragePrecision(), auc)
        for a in range(0, n, 1000):
            auc.update_many(y[a:a + 1000], s[a:a + 1000])
            auc.get()
            ap.get()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    used = sum(d.size_diff for d in after.compare_to(before, "filename"))
    assert auc._so.levelled
    assert ap.get() == pytest.approx(average_precision_score(y, s), abs=1e-12)
    assert used / len(np.unique(s)) <= 24.0


def test_constants_are_sane():
    assert levels.GROWTH >= 2 and levels.AP_RENT >= 1 and DEFAULTS[1] >= 0
    assert DEFAULTS[0] >= 0 and DEFAULTS[2] >= 1
    assert scoreorder.TRICKLE_RATIO >= 1


# ---------------------------------------------------------- review regressions (issue 11)


def test_ap_compaction_of_the_tail_keeps_weight_whose_events_the_big_side_holds(monkeypatch):
    """AP merges the positive sides outside the biggest into one: not a final merge (the
    biggest remains), so an entry whose count cancels but not its weight stays. Default
    layout: an event of weight 1 at 0.5 in a big batch, one of weight 2 at 0.5 in the
    next (batches merged, AP not read yet), the weight-1 one reverted, then AP read."""
    monkeypatch.setattr(scoreorder, "FLAT_MAX", DEFAULTS[0])
    monkeypatch.setattr(levels, "MIN_SIDE", DEFAULTS[1])
    rng = np.random.default_rng(0)
    y1, s1, w1 = rng.random(100_000) < 0.7, rng.random(100_000) * 0.4, np.ones(100_000)
    y1[0], s1[0] = True, 0.5
    y2, s2, w2 = np.ones(10_000, bool), 0.6 + rng.random(10_000) * 0.4, np.ones(10_000)
    s2[0], w2[0] = 0.5, 2.0
    ap = se.AveragePrecision()
    ap.update_many(y1, s1, w1)
    ap._order  # merged, not read
    ap.update_many(y2, s2, w2)
    ap._order
    ap.revert_many([True], [0.5], [1.0])
    assert len(ap._so._levels.pos) >= 3  # the biggest, the second batch, the tombstone
    y, s, w = np.r_[y1[1:], y2], np.r_[s1[1:], s2], np.r_[w1[1:], w2]
    assert ap.get() == pytest.approx(average_precision_score(y, s, sample_weight=w), abs=1e-12)
    ap._check()
    ap.revert(True, 0.5, 2.0)  # the weight-2 event is still there
    keep = np.ones(len(y), bool)
    keep[len(y1) - 1] = False
    assert ap.get() == pytest.approx(
        average_precision_score(y[keep], s[keep], sample_weight=w[keep]), abs=1e-12)


def test_a_tiny_batch_into_an_emptied_order_stores_no_phantom_event(monkeypatch):
    """An order emptied in levels, then given a batch of two events: exactly those two
    (the blocks seeded for the first entry hold no event of their own)."""
    monkeypatch.setattr(scoreorder, "FLAT_MAX", DEFAULTS[0])
    monkeypatch.setattr(scoreorder, "TRICKLE_ENTRIES", DEFAULTS[2])
    rng = np.random.default_rng(1)
    y, s = rng.random(20_000) < 0.5, rng.random(20_000)
    m = se.ROCAUC().update_many(y, s)
    assert m.get() == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    m.revert_many(y, s)
    m.update_many([1, 0], [0.9, 0.1])
    assert m.get() == 1.0 and m._so.n_pos == 1 and m._so.n_neg == 1
    with pytest.raises(ValueError, match="no such event"):
        m.revert(1, 0.1)
    m._check()
    o = ScoreOrder()  # and straight on the order: entries into empty blocks
    o.add(0.3, True, 1.0)
    o.remove(0.3, True, 1.0)
    o._add_entry(0.7, 2.0, 1.0, 2, 1)
    assert (o.n_pos, o.n_neg, o.pos_weight, o.neg_weight) == (2, 1, 2.0, 1.0)
    assert o.arrays()[3].tolist() == [2] and o.u == 1.0  # the two ties: 2 * 1 / 2


def test_final_merges_drop_every_entry_without_events_so_the_state_round_trips(monkeypatch):
    """Weights 0.1, 0.2 and 0.3 added at one score in three batches, then reverted:
    the score leaves (rounding and all) when its class is down to one side; len() and
    the state are right, and the state loads."""
    monkeypatch.setattr(scoreorder, "FLAT_MAX", DEFAULTS[0])
    monkeypatch.setattr(levels, "MIN_SIDE", DEFAULTS[1])
    rng = np.random.default_rng(0)
    y, s = rng.random(20_000) < 0.5, rng.random(20_000) * 0.4
    m = se.ROCAUC().update_many(y, s)
    m.get()
    for w in (0.1, 0.2, 0.3):
        m.update_many([1], [0.5], w=[w]).get()
    m.revert_many([1, 1, 1], [0.5] * 3, w=[0.1, 0.2, 0.3]).get()
    assert len(m) == len(np.unique(s))
    back = se.from_state(m.to_state())
    assert back.get() == m.get() == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    m._check()


def test_ap_with_rounding_below_zero_at_zero_weight_scores_is_sklearns():
    """Fractional weights added and removed around zero-weight positives at the top:
    running sums a few ulps below zero there give precision 0, not a huge ratio."""
    T, F = True, False
    o = ScoreOrder()
    batch(o, [(0.7, T, 2.0), (0.1, F, 1.0)], 1)
    batch(o, [(0.9, T, 0.6), (0.8, T, 0.7), (0.8, T, 1.1), (0.9, T, 0.0), (0.8, T, 0.0)], 1)
    batch(o, [(0.9, T, 0.7), (0.8, T, 0.1), (0.9, T, 0.3)], 1)
    for e in [(0.9, T, 0.3), (0.9, T, 0.7), (0.9, T, 0.6), (0.8, T, 1.1), (0.8, T, 0.7),
              (0.8, T, 0.1)]:
        batch(o, [e], -1)
    live = [(0.7, T, 2.0), (0.1, F, 1.0), (0.9, T, 0.0), (0.8, T, 0.0)]
    assert_order(o, live, read_ap=True)


def test_the_first_event_into_an_empty_order_invalidates_cached_reads():
    for cls, want in ((se.AveragePrecision, 1.0), (se.InterpolatedAP, 1.0)):
        m = cls()
        assert math.isnan(m.get())
        m.update(1, 0.9)
        assert m.get() == want


def test_single_events_after_a_batch_on_a_small_order_take_the_per_event_path(monkeypatch):
    """A flat order (small) fed one event at a time moves to blocks at the first event:
    each event is then O(log n), not a numpy merge of the whole order."""
    monkeypatch.setattr(scoreorder, "FLAT_MAX", DEFAULTS[0])
    rng = np.random.default_rng(2)
    y, s = rng.random(5_000) < 0.3, rng.random(5_000)
    m = se.AveragePrecision().update_many(y, s)
    assert m.get() == pytest.approx(average_precision_score(y, s), abs=1e-12)
    assert m._so.bulk and not m._so.levelled
    for yi, si in zip(y[:50].tolist(), (s[:50] + 1e-6).tolist()):
        m.update(yi, si)
        m.get()
    assert not m._so.bulk  # blocks
    yy, ss = np.r_[y, y[:50]], np.r_[s, s[:50] + 1e-6]
    assert m.get() == pytest.approx(average_precision_score(yy, ss), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ap_tail_bounds_memo_equals_a_full_search_and_sklearn(seed):
    # AP read after every batch: the other positive sides' places in the biggest one
    # come from the memo of the previous read (Levels._tail_bounds); _check() asserts
    # the memo against a search, AP and AUC are scikit-learn's
    rng = np.random.default_rng(seed)
    n = 6000
    y = rng.random(n) < 0.25
    s = rng.random(n) if seed != 2 else np.round(rng.random(n), 3)
    auc = se.ROCAUC()
    ap = OrderView(se.AveragePrecision(), auc)
    live = np.zeros(n, dtype=bool)
    batches = []
    memo_reads = 0
    a = 0
    while a < n:
        b = min(n, a + int(rng.integers(1, 300)))
        auc.update_many(y[a:b], s[a:b])
        live[a:b] = True
        batches.append((a, b))
        if rng.random() < 0.2 and len(batches) > 2:  # a removal: a tombstone side
            ra, rb = batches.pop(int(rng.integers(0, len(batches) - 1)))
            auc.revert_many(y[ra:rb], s[ra:rb])
            live[ra:rb] = False
        lv = auc._order._levels
        had = lv is not None and bool(lv.pos) and lv.pos[0].places is not None
        got = ap.get()
        assert got == pytest.approx(average_precision_score(y[live], s[live]), abs=1e-12)
        assert auc.get() == pytest.approx(roc_auc_score(y[live], s[live]), abs=1e-12)
        lv = auc._order._levels
        memo_reads += had and len(lv.pos) > 1
        auc._check()
        a = b
    assert memo_reads > 5


def test_tail_bounds_equal_bounds():
    rng = np.random.default_rng(4)
    big = Side.build(np.unique(rng.random(500)), np.ones(500), np.ones(500, dtype=np.int64),
                     True, True, True)
    keys = np.sort(rng.random(500))
    for step in range(6):
        tail_k = np.unique(np.concatenate([keys[: 60 * (step + 1)],
                                           big.k[rng.integers(0, big.size, 5)]]))
        tail = Side.build(tail_k, np.ones(len(tail_k)), np.ones(len(tail_k), dtype=np.int64),
                          True, True, True)
        for _ in range(2):  # a new tail, then the same one again
            lo, hi = levels.Levels._tail_bounds(big, tail)
            assert lo.tolist() == big.k.searchsorted(tail_k).tolist()
            assert hi.tolist() == big.k.searchsorted(tail_k, "right").tolist()


@pytest.mark.parametrize("max_scores", [None, 500])
def test_a_view_read_size_counts_the_owner_events_and_merges_nothing(max_scores):
    """A Monitor asks a shared view its read size at every evaluation, to decide whether
    to hold its value: the answer is the owner's events (deferred ones included, capped
    at twice max_scores) and asking merges none of the deferred events; the values read
    afterwards are still scikit-learn's."""
    rng = np.random.default_rng(5)
    y, s = rng.random(3000) < 0.3, rng.random(3000)
    auc = se.ROCAUC(max_scores=max_scores)
    ap = OrderView(se.AveragePrecision(max_scores=max_scores), auc)
    for a in range(0, 3000, 7):
        auc.update_many(y[a:a + 7], s[a:a + 7])
        deferred = (len(auc._ps), auc._nchunked)
        n = min(a + 7, 3000)
        assert ap.read_size() == auc.read_size() == (
            n if max_scores is None else min(n, 2 * max_scores))
        assert (len(auc._ps), auc._nchunked) == deferred  # nothing merged by asking
    if max_scores is None:
        assert ap.get() == pytest.approx(average_precision_score(y, s), abs=1e-12)
        assert auc.get() == pytest.approx(roc_auc_score(y, s), abs=1e-12)


# ------------------------------------------- a coarsened order: the pairs it follows


def _key_table(events, bits):
    """Per coarse key ``[wp, wn]`` of a list of (score, positive, weight)."""
    table = {}
    for s, p, w in events:
        e = table.setdefault(coarse_key(s, bits), [0.0, 0.0])
        e[0 if p else 1] += w
    return table


def _old_ap_bound(table):
    """The AP bound from the per-key weights by running sums over every key (high to
    low), as for an order that is not in levels: the reference of the levels' path."""
    keys = sorted(table, reverse=True)
    return ap_bound_of_bins(np.array([table[k][0] for k in keys]),
                            np.array([table[k][1] for k in keys]))


# scores that make every coarse key crowded: all in one key at 2 bits ([0.5, 0.625)),
# the edges of keys at 3 bits and the floats just below them, and free ones
_EDGES = [0.5, 0.5625, 0.625, 0.75, 0.875]
crowded = (st.sampled_from(_EDGES + [math.nextafter(e, 0.0) for e in _EDGES])
           | st.floats(0.5, 0.6249999) | st.floats(0.0, 1.0))
int_event = st.tuples(crowded, st.booleans(), st.sampled_from([1.0, 1.0, 1.0, 2.0, 3.0, 0.0]))


@settings(max_examples=40, deadline=None)
@given(st.lists(int_event, min_size=1, max_size=30),
       st.lists(st.tuples(st.booleans(), st.lists(int_event, min_size=1, max_size=15)),
                min_size=1, max_size=10),
       st.integers(0, 4), st.sampled_from([2, 4, 16]), st.data())
def test_hypothesis_coarse_pairs_followed_through_batches_equal_brute_force(
        first, steps, bits, growth, data):
    """A coarsened order in levels keeps ``sum over keys of wp * wn`` up to date as
    batches of integer weights come in (`O(1)` to read: followed, not recomputed), and
    after a removal (recomputed, then followed again): always the brute-force sum over
    the coarse keys, bit for bit; the AUC bound from it and the AP bound from the
    positive keys equal their recomputation from the per-key table, and the values lie
    within them of scikit-learn on the exact scores."""
    levels_growth = levels.GROWTH
    levels.GROWTH = growth
    try:
        o = ScoreOrder()
        batch(o, first, 1)
        o.coarsen_to(bits)
        live = list(first)
        for add, chunk in steps:
            if add or not live:
                followed = o._pairs_at == o.stamp
                keyed = [(coarse_key(s, bits), p, w) for s, p, w in chunk]
                batch(o, keyed, 1)
                live += chunk
                if followed and o.levelled and o.nz_pos and o.nz_neg:
                    # an add to the levels, no class left without weight: followed
                    assert o._pairs_at == o.stamp
            else:
                k = data.draw(st.integers(1, len(live)))
                idx = set(data.draw(st.permutations(range(len(live))))[:k])
                out = [(coarse_key(s, bits), p, w) for i, (s, p, w) in enumerate(live)
                       if i in idx]
                batch(o, out, -1)
                live = [e for i, e in enumerate(live) if i not in idx]
            table = _key_table(live, bits)
            want = sum(a * b for a, b in table.values())
            assert o.pairs() == want  # (exact integers: computed or followed)
            o._check()  # the followed value against a pass over the merged levels
            y = np.array([p for _, p, _ in live], dtype=bool)
            s = np.array([x for x, _, _ in live])
            w = np.array([x for _, _, x in live])
            if (w[y] > 0).any() and (w[~y] > 0).any():
                bound = _pairs_bound(o)
                assert bound == 0.5 * want / (o.pos_weight * o.neg_weight)
                assert abs(o.auc() - roc_auc_score(y, s, sample_weight=w)) <= bound + 1e-12
            if (w[y] > 0).any():
                got = _ap_bound(o)
                assert got == _old_ap_bound(table)
                ap = max(0.0, o.ap_numerator() / o.pos_weight)
                assert abs(ap - average_precision_score(y, s, sample_weight=w)) <= got + 1e-12
    finally:
        levels.GROWTH = levels_growth


def test_coarse_pairs_by_hand_all_scores_in_one_key():
    """Every score in one coarse key: every (positive, negative) pair is a tie, the
    AUC is 1/2 and its bound 1/2 (the true order inside the key is unknown); the pairs
    follow a batch into the levels: 3 positives and 2 negatives, then 1 and 2 more of
    weight 2: (3 + 2) * (2 + 4) = 30."""
    o = ScoreOrder()
    batch(o, [(0.51, True, 1.0), (0.52, True, 1.0), (0.53, True, 1.0),
              (0.54, False, 1.0), (0.55, False, 1.0)], 1)
    o.coarsen_to(1)  # [0.5, 0.75) is one key
    assert o.pairs() == 6.0 and _pairs_bound(o) == 0.5 and o.auc() == 0.5
    batch(o, [(0.5, True, 2.0), (0.5, False, 2.0), (0.5, False, 2.0)], 1)
    assert o._pairs_at == o.stamp and o.pairs() == 30.0
    assert _pairs_bound(o) == 0.5 and o.auc() == 0.5
    o._check()


def test_coarse_pairs_are_recomputed_without_changing_the_layout():
    """A restored (or otherwise changed) order recomputes the pairs in one pass that
    leaves its levels as they are: the layout, and hence every later value, does not
    depend on whether the pairs were followed or recomputed."""
    rng = np.random.default_rng(7)
    o = ScoreOrder()
    for m in (3000, 100, 100):  # (a big level and small ones above it)
        y = rng.random(m) < 0.3
        batch(o, list(zip(coarse_keys(rng.random(m), 12).tolist(), y.tolist(),
                          [1.0] * m)), 1)
        if o.bits is None:
            o.coarsen_to(12)
    sides = (len(o._levels.pos), len(o._levels.neg))
    assert sides[0] > 1 or sides[1] > 1
    o._pairs_at = -1  # (as after a restore)
    want = float(sum(a * b for a, b in zip(*o._levels.entries(keep=False)[1:3])))
    assert o.pairs() == want
    assert (len(o._levels.pos), len(o._levels.neg)) == sides


def test_coarse_pairs_stay_exact_integers_past_2_to_the_53():
    """Big integer weights: the weight of the tied pairs passes ``2**53`` (where a float
    sum of the products would round) and stays the exact integer, followed batch by
    batch and recomputed after a restore alike (the restart then reports the same
    bound). By hand: at key 0.5, negatives of weight ``2**32 + 1`` and, after k
    batches, positives of weight ``k (2**20 + 1)``; at key 0.25 one positive and no
    negative."""
    o = ScoreOrder()
    batch(o, [(0.5, False, 2.0**32), (0.3, True, 1.0), (0.7, False, 1.0)], 1)
    o.coarsen_to(1)
    assert o.pairs() == 0.0
    for k in range(1, 10):
        batch(o, [(coarse_key(0.6, 1), True, 2.0**20 + 1)], 1)  # (key 0.5)
        exact = k * (2**20 + 1) * (2**32 + 1)
        assert o._pairs_at == o.stamp and o.pairs() == float(exact)
        o._check()
    assert exact > 2**53 and exact % 2  # (odd: not a float)
    o._pairs_at = -1  # (as after a restore: recomputed from the levels)
    assert o.pairs() == float(exact)
    assert _pairs_bound(o) == 0.5 * float(exact) / (o.pos_weight * o.neg_weight)


@pytest.mark.parametrize("binary", [True, False])
def test_monitor_restart_in_the_levels_reports_what_a_direct_monitor_does(monkeypatch, binary):
    """A Monitor whose bounded AUC and AP share an order in the levels: restored
    mid-stream (binary checkpoint state or JSON), its order recomputes the tied pairs
    once where the direct one follows them, and every later row (values, error bounds,
    held values) is the direct one's, bit for bit; each value within its bound of
    scikit-learn for the events it covers."""
    from streameval.monitor import scopes as scopes_mod

    monkeypatch.setattr(scopes_mod, "HOLD_FROM", 100)
    monkeypatch.setattr(scopes_mod, "READ_RATIO", 1)  # (held for 400 events)
    rng = np.random.default_rng(11)
    n = 5000
    y = rng.random(n) < 0.3
    s = 1.0 / (1.0 + np.exp(-(2.0 * y + rng.standard_normal(n) - 1.0)))

    def monitor():
        return se.Monitor({"auc": se.ROCAUC(max_scores=200),
                           "ap": se.AveragePrecision(max_scores=200)}, every=100)

    direct = monitor()
    rows = []
    direct.on_metrics.append(rows.append)
    direct.update_many(y[:2550], s[:2550])
    so = direct.scopes()[0].metrics["auc"]._so
    assert so.levelled and so.bits is not None and so._pairs_at == so.stamp  # followed
    if binary:
        restored = se.Monitor.from_array_state(direct.to_array_state())
    else:
        restored = se.Monitor.from_state(json.loads(json.dumps(direct.to_state())))
    rows2 = []
    restored.on_metrics.append(rows2.append)
    cut = len(rows)
    for m in (direct, restored):
        for a in range(2550, n, 250):
            m.update_many(y[a:a + 250], s[a:a + 250])
        m.flush()
    assert rows[cut:] == rows2
    assert any("as_of" in r for r in rows2) and rows2[-1]["error_bounds"]["auc"] > 0
    for r in rows2:
        for name, bound in r["error_bounds"].items():
            upto = r.get("as_of", {}).get(name, r["n"])
            exact = (roc_auc_score if name == "auc" else average_precision_score)(
                y[:upto], s[:upto])
            assert abs(r["values"][name] - exact) <= bound + 1e-12
