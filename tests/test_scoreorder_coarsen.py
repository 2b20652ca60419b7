"""Coarsening a score order: the vectorised key map, the key counts of its bisection,
and the order it leaves.

Oracles: the scalar ``coarse_key`` (``math.frexp``/``ldexp``, one float at a time),
brute force (a set of coarse keys per ``bits``; per-key sums in a dict), and
scikit-learn's AUC over the coarse keys.
"""

import math
import sys
from collections import defaultdict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from streameval.metrics.scoreorder import ScoreOrder, _key_counter, coarse_key, coarse_keys

TINY = sys.float_info.min  # the smallest normal float64

ADVERSARIAL = np.concatenate([
    [0.0, -0.0, 5e-324, -5e-324, TINY, -TINY, np.nextafter(TINY, 0), 1.0, -1.0, 0.5,
     0.75, np.nextafter(1.0, 0), np.nextafter(0.5, 1), sys.float_info.max,
     -sys.float_info.max],
    np.ldexp(1.0, np.arange(-1074, 1024, 7)),  # powers of two: every key's edge
    np.nextafter(np.ldexp(1.0, np.arange(-1000, 1000, 13)), 0),  # just below an edge
    np.random.default_rng(0).random(300),
    -np.random.default_rng(1).random(100),
    np.random.default_rng(2).random(100) * 1e-310,  # subnormals
])


def test_coarse_keys_equal_the_scalar_map_at_every_bits():
    for bits in range(0, 53):
        got = coarse_keys(ADVERSARIAL, bits)
        want = np.array([coarse_key(float(x), bits) for x in ADVERSARIAL])
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), bits  # -0.0 too
    special = np.array([np.inf, -np.inf, np.nan])
    for bits in (0, 17, 51):
        got = coarse_keys(special, bits)
        assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])
    x = ADVERSARIAL.copy()
    coarse_keys(x, 3)
    assert np.array_equal(x, ADVERSARIAL)  # (the input is left as it was)


floats = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=200)
@given(st.lists(floats, min_size=0, max_size=60), st.integers(0, 52))
def test_key_counts_equal_a_set_of_coarse_keys(xs, bits):
    keys = np.unique(np.array(xs, dtype=np.float64) + 0.0)
    want = len({coarse_key(float(x), bits) for x in keys})
    assert _key_counter(keys)(bits) == want


def test_key_counts_on_adversarial_keys_every_bits():
    keys = np.unique(ADVERSARIAL + 0.0)
    normal = keys[(np.abs(keys) >= TINY) | (keys == 0)]  # (the XOR path)
    for ks in (keys, normal):
        count = _key_counter(ks)
        for bits in range(0, 53):
            assert count(bits) == len({coarse_key(float(x), bits) for x in ks}), bits


def _brute(events, bits):
    """Per coarse key: (positive weight, negative weight, positive count, negative count);
    ``bits`` None: per score as it is (``-0.0`` kept)."""
    acc = defaultdict(lambda: [0.0, 0.0, 0, 0])
    for s, pos, w in events:
        k = s if bits is None else coarse_key(s, bits)
        a = acc[k]
        if pos:
            a[0] += w
            a[2] += 1
        else:
            a[1] += w
            a[3] += 1
    return sorted(acc.items())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.25, 0.5, 0.625])),
                          st.booleans(), st.sampled_from([1.0, 2.0, 3.0])),
                min_size=2, max_size=400),
       st.integers(1, 40), st.integers(1, 50))
def test_coarsen_leaves_the_brute_force_order(events, target, chunk):
    o = ScoreOrder()
    for a in range(0, len(events), chunk):  # batches: levels, or blocks for small ones
        entries = _brute(events[a:a + chunk], 52)  # (one entry per distinct score)
        o.add_entries(*(np.array([k for k, _ in entries], dtype=np.float64),)
                      + tuple(np.array([v[j] for _, v in entries]) for j in range(4)))
    distinct = len({e[0] + 0.0 for e in events})
    changed = o.coarsen(target)
    assert changed == (distinct > target)
    if not changed:
        assert o.bits is None
        return
    # the largest bits at which at most target keys are left (or 0)
    want_bits = max([b for b in range(0, 52)
                     if len({coarse_key(e[0], b) for e in events}) <= target] or [0])
    assert o.bits == want_bits
    keys, wp, wn, cp, cn = o.arrays()
    want = _brute(events, want_bits)
    assert keys.tolist() == [k for k, _ in want]
    assert wp.tolist() == [v[0] for _, v in want] and wn.tolist() == [v[1] for _, v in want]
    assert cp.tolist() == [v[2] for _, v in want] and cn.tolist() == [v[3] for _, v in want]
    y = [e[1] for e in events]
    if 0 < sum(y) < len(y):  # U over the coarse keys: ties one half
        ck = [coarse_key(e[0], want_bits) for e in events]
        auc = roc_auc_score(y, ck, sample_weight=[e[2] for e in events])
        assert math.isclose(o.auc(), auc, rel_tol=0, abs_tol=1e-12)


def _levelled_order(batches, weights):
    """An order fed ``batches`` of ``(scores, is positive)`` as aggregated entries, in
    the bulk layout (levels)."""
    o = ScoreOrder()
    rng = np.random.default_rng(5)
    for s, y in batches:
        w = weights(rng, len(s))
        events = list(zip(s.tolist(), y.tolist(), w.tolist()))
        entries = _brute(events, None)
        o.add_entries(*(np.array([k for k, _ in entries], dtype=np.float64),)
                      + tuple(np.array([v[j] for _, v in entries]) for j in range(4)))
    return o, events


def _state(o):
    return (o.bits, [a.tolist() for a in o.arrays()], o.u, o.pos_weight, o.neg_weight,
            o.n_pos, o.n_neg, repr(o.auc()))


def test_class_by_class_equals_the_merged_path_in_levels():
    rng = np.random.default_rng(3)
    unit = lambda rng, n: np.ones(n)  # noqa: E731
    ints = lambda rng, n: rng.integers(1, 4, n).astype(float)  # noqa: E731
    cases = [
        ("continuous", [(rng.random(3000), rng.random(3000) < 0.3) for _ in range(6)], unit),
        ("integer weights", [(rng.random(3000), rng.random(3000) < 0.5) for _ in range(8)], ints),
        ("one class", [(rng.random(3000), np.ones(3000, bool)) for _ in range(8)], unit),
        ("ties across classes",  # the same scores in both classes, and at key edges
         [(np.round(rng.random(4000), 6), rng.random(4000) < 0.4) for _ in range(6)]
         + [(np.ldexp(1.0, -rng.integers(1, 30, 4000)), rng.random(4000) < 0.5)], unit),
        ("negative scores", [(rng.standard_normal(3000), rng.random(3000) < 0.3)
                             for _ in range(8)], ints),
    ]
    for name, batches, weights in cases:
        for target in (10, 700, 5000, 100_000):
            a, _ = _levelled_order(batches, weights)
            b, _ = _levelled_order(batches, weights)
            assert a.levelled and b.levelled, name
            fast, merged = a.coarsen(target), b._coarsen_merged(target)
            assert fast == merged, (name, target)
            assert _state(a) == _state(b), (name, target)
            if fast:  # and again, from coarse keys
                assert a.coarsen(target // 3) == b._coarsen_merged(target // 3)
                assert _state(a) == _state(b), (name, target)


def test_unusual_keys_take_the_merged_path():
    rng = np.random.default_rng(9)
    for odd in (5e-324, -0.0, -1e-310):
        batches = [(rng.random(5000), rng.random(5000) < 0.3) for _ in range(5)]
        batches[2][0][17] = odd
        a, _ = _levelled_order(batches, lambda r, n: np.ones(n))
        b, _ = _levelled_order(batches, lambda r, n: np.ones(n))
        assert a.levelled
        assert a._coarsen_levels(100) is None
        assert a.coarsen(100) == b._coarsen_merged(100)
        assert _state(a) == _state(b)


def _entries(events):
    """``add_entries``/``remove_entries`` arguments for ``events`` (one per score)."""
    entries = _brute(events, None)
    return (np.array([k for k, _ in entries], dtype=np.float64),) + tuple(
        np.array([v[j] for _, v in entries]) for j in range(4))


def test_coarsening_after_removals_in_levels_equals_brute_force():
    """Levels after removals (a window's evictions), down to a class with no event left:
    the coarsened order holds the per-key sums of the events still in it."""
    rng = np.random.default_rng(12)
    for drop in ("some positives", "every positive", "every negative"):
        o = ScoreOrder()
        held = []
        for _ in range(6):
            s, y = rng.random(4000), rng.random(4000) < 0.3
            ev = list(zip(s.tolist(), y.tolist(), [1.0] * 4000))
            o.add_entries(*_entries(ev))
            held += ev
        gone = [e for e in held if e[1]] if drop != "every negative" else \
            [e for e in held if not e[1]]
        if drop == "some positives":
            gone = gone[::3]
        o.remove_entries(*_entries(gone))
        gone = set(gone)
        left = [e for e in held if e not in gone]
        fresh = [(1000.0 + 1000.0 * x, False, 1.0) for x in rng.random(3000).tolist()]
        o.add_entries(*_entries(fresh))
        left += fresh
        assert o.levelled, drop
        assert o.coarsen(500), drop
        want_bits = max(b for b in range(0, 52)
                        if len({coarse_key(e[0], b) for e in left}) <= 500)
        assert o.bits == want_bits, drop
        keys, wp, wn, cp, cn = o.arrays()
        want = [(k, v) for k, v in _brute(left, want_bits)]
        assert keys.tolist() == [k for k, _ in want], drop
        assert wp.tolist() == [v[0] for _, v in want], drop
        assert wn.tolist() == [v[1] for _, v in want], drop
        assert cp.tolist() == [v[2] for _, v in want], drop
        assert cn.tolist() == [v[3] for _, v in want], drop
        y = [e[1] for e in left]
        if 0 < sum(y) < len(y):
            auc = roc_auc_score(y, [coarse_key(e[0], want_bits) for e in left])
            assert math.isclose(o.auc(), auc, rel_tol=0, abs_tol=1e-12), drop
        else:
            assert math.isnan(o.auc()), drop
