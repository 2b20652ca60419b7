"""A score order's levels in chains of binary checkpoints: big merged sides given as
their merge (sources, flag, probe) and in pieces under a byte budget.

Oracle: the in-memory order itself, array by array (``tobytes``: the same bits), at
every checkpoint of a chain, and brute force over the events for the loaded order's
entries. The constants are shrunk so that a few hundred events make merged sides
given as their merge, several pieces each, over several checkpoints.
"""

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streameval.io.checkpoint import load_checkpoint
from streameval.io.statefile import StateWriter
from streameval.metrics import levels, scoreorder
from streameval.metrics.levels import Levels
from streameval.metrics.scoreorder import ScoreOrder


@pytest.fixture(autouse=True)
def _small(monkeypatch):
    monkeypatch.setattr(scoreorder, "FLAT_MAX", 0)
    monkeypatch.setattr(scoreorder, "TRICKLE_ENTRIES", 0)
    monkeypatch.setattr(levels, "MIN_SIDE", 0)
    monkeypatch.setattr(levels, "DEFER_MIN", 48)
    monkeypatch.setattr(levels, "PIECE", 16)
    monkeypatch.setattr(levels, "PIECE_BUDGET", 3 * 16 * 8)


def same_levels(a, b):
    """Every side of ``a`` and ``b``: the same arrays, bit for bit, and flags."""
    for name in ("pos", "neg"):
        xs, ys = getattr(a, name), getattr(b, name)
        assert [s.size for s in xs] == [s.size for s in ys], name
        for x, y in zip(xs, ys):
            for key in ("k", "w", "c", "ow", "pn"):
                u, v = getattr(x, key), getattr(y, key)
                assert (u is None) == (v is None), (name, key)
                if u is not None:
                    assert u.dtype == v.dtype and u.tobytes() == v.tobytes(), (name, key)
            assert x.ones == y.ones


def entries_of(events):
    """Brute force: sorted (score, wp, wn) of a multiset {(score, positive): count}."""
    table = {}
    for (s, p), c in events.items():
        if c:
            e = table.setdefault(s, [0.0, 0.0])
            e[0 if p else 1] += c
    return sorted((s, wp, wn) for s, (wp, wn) in table.items())


def apply(order, events, batch, sign):
    s = np.array([e[0] for e in batch])
    y = np.array([e[1] for e in batch], dtype=bool)
    keys, inv = np.unique(s, return_inverse=True)
    cp = np.bincount(inv, weights=y, minlength=len(keys)).astype(np.int64)
    cn = np.bincount(inv, weights=~y, minlength=len(keys)).astype(np.int64)
    (order.add_entries if sign > 0 else order.remove_entries)(
        keys, cp.astype(float), cn.astype(float), cp, cn)
    for e in batch:
        events[e] = events.get(e, 0) + sign


def save_and_load(tmp, writer, order):
    path = os.path.join(tmp, "c.json")
    writer.write({"order": order.to_layout()}, kind="t")
    fresh = StateWriter(path)
    state = load_checkpoint(path, writer=fresh)
    return ScoreOrder.from_layout(state["order"]), fresh


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 32 - 1), steps=st.integers(5, 40))
def test_hypothesis_a_chain_of_checkpoints_loads_the_order_bit_for_bit(tmp_path_factory, seed,
                                                                       steps):
    """Random batches in (distinct scores and ties), removals of stored events, AP reads
    and checkpoints at random points: each load gives the in-memory levels bit for bit
    (merged sides given as their merge included), the brute-force entries, and, fed on
    with the same batches, the same levels as the order that was never saved."""
    tmp = str(tmp_path_factory.mktemp("chain"))
    rng = np.random.default_rng(seed)
    order = ScoreOrder()
    events = {}
    writer = StateWriter(os.path.join(tmp, "c.json"))
    merges_given = 0
    for _ in range(steps):
        r = rng.random()
        stored = [e for e, c in events.items() if c > 0]
        if r < 0.15 and stored:
            pick = rng.choice(len(stored), size=min(len(stored), int(rng.integers(1, 20))),
                              replace=False)
            apply(order, events, [stored[i] for i in pick], -1)
        else:
            n = int(rng.integers(1, 60))
            s = np.round(rng.random(n), 2 if rng.random() < 0.3 else 12)
            apply(order, events, [(float(x), bool(p)) for x, p in
                                  zip(s, rng.random(n) < 0.3)], 1)
        if rng.random() < 0.3 and order.pos_weight > 0:
            order.ap_numerator()
        if rng.random() < 0.4:
            lay = order.to_layout()
            merges_given += json.dumps(lay, default=lambda a: None).count('"merge"')
            loaded, fresh = save_and_load(tmp, writer, order)
            loaded._check()
            same_levels(order._levels, loaded._levels)
            keys, wp, wn, _, _ = loaded._levels.entries(keep=False)
            assert list(zip(keys.tolist(), wp.tolist(), wn.tolist())) == entries_of(events)
            if rng.random() < 0.3:  # the loaded order goes on: a restart
                order, writer = loaded, fresh
    # fed on alike, a loaded order and the one never saved stay the same
    loaded, _ = save_and_load(tmp, writer, order)
    for _ in range(5):
        n = int(rng.integers(1, 60))
        batch = [(float(x), bool(p)) for x, p in zip(rng.random(n), rng.random(n) < 0.3)]
        apply(order, dict(events), batch, 1)
        apply(loaded, events, batch, 1)
        same_levels(order._levels, loaded._levels)
        assert order.u == loaded.u
        if order.pos_weight:
            assert order.ap_numerator() == loaded.ap_numerator()


def distinct_order(n, batches, seed=0):
    rng = np.random.default_rng(seed)
    order = ScoreOrder()
    events = {}
    for _ in range(batches):
        s = rng.random(n)
        apply(order, events, [(float(x), bool(p)) for x, p in zip(s, rng.random(n) < 0.3)], 1)
    return order, events


def pending_sides(order):
    return [s for s in order._levels.pos + order._levels.neg if s.src is not None]


def test_a_big_merge_is_given_as_its_merge_and_its_pieces_over_several_checkpoints(tmp_path):
    """Distinct scores, one class: once a merge makes a side of DEFER_MIN entries or
    more, the next checkpoint writes the batch (its sources were written) and a budget
    of pieces, not the merged side; the side is given whole after a few checkpoints,
    each then writing no more than the budget plus the new batch's bytes."""
    writer = StateWriter(tmp_path / "c.json")
    order = ScoreOrder()
    events = {}
    rng = np.random.default_rng(3)
    sizes = []
    saw_merge = False
    for i in range(40):
        s = rng.random(12)
        apply(order, events, [(float(x), False) for x in s], 1)
        lay = order.to_layout()
        saw_merge |= "merge" in json.dumps(lay, default=lambda a: None)
        writer.write({"order": lay}, kind="t")
        if i:
            sizes.append(writer.last["bytes"])
        loaded = ScoreOrder.from_layout(load_checkpoint(tmp_path / "c.json")["order"])
        same_levels(order._levels, loaded._levels)
    assert saw_merge
    # 12 new keys (96 bytes), one side of them and the merges of small sides (below
    # DEFER_MIN = 48 entries: at most 2 * 48 * 8 bytes with GROWTH = 4), the pieces'
    # budget (3 * 16 * 8 bytes), and the JSON of a few subtrees: never the whole order
    assert max(sizes) <= 96 + 2 * 48 * 8 * 4 // 3 + 3 * 16 * 8 + 16 * 8
    assert sum(s.size for s in order._levels.neg) == 480
    assert not pending_sides(order) or max(sizes) < 480 * 8


def test_a_damaged_merge_reference_is_refused_on_load(tmp_path):
    """A side given as its merge whose sources are not the ones it was merged from (a
    reference swapped in the manifest, its checksum made to match): the loader merges
    them and refuses, naming the side; the same for a probe that does not match."""
    order, _ = distinct_order(20, 12, seed=1)
    order.to_layout()
    rng = np.random.default_rng(5)
    for _ in range(8):
        s = np.sort(rng.random(20)) + 3.0
        order.add_entries(s, np.zeros(20), np.ones(20), np.zeros(20, dtype=np.int64),
                          np.ones(20, dtype=np.int64))
        lay = order.to_layout()
        if "merge" in json.dumps(lay, default=lambda a: None):
            break
    else:
        pytest.fail("no side given as its merge")
    neg = lay["levels"]["neg"]
    i = next(j for j, d in enumerate(neg) if "merge" in d)
    ScoreOrder.from_layout(lay)  # as given: loads
    # a source replaced by the other one: another merge
    bad = dict(neg[i])
    x, _ = bad["merge"]
    bad["merge"] = [x, x]
    lay2 = dict(lay, levels=dict(lay["levels"], neg=neg[:i] + [bad] + neg[i + 1:]))
    with pytest.raises(ValueError, match=rf"levels.neg\[{i}\].*damaged or misplaced"):
        ScoreOrder.from_layout(lay2)
    # a probe that does not match
    bad = dict(neg[i], probe=[neg[i]["probe"][0], neg[i]["probe"][1],
                              neg[i]["probe"][2][:-1] + [9.0]])
    lay3 = dict(lay, levels=dict(lay["levels"], neg=neg[:i] + [bad] + neg[i + 1:]))
    with pytest.raises(ValueError, match="damaged or misplaced"):
        ScoreOrder.from_layout(lay3)
    # a damaged piece of the merged side
    bad = dict(neg[i])
    parts = dict(bad["parts"])
    if parts["k"]:
        k0 = parts["k"][0].copy()
        k0[0] = np.nextafter(k0[0], 1.0)
        parts["k"] = [k0] + parts["k"][1:]
        bad["parts"] = parts
        lay4 = dict(lay, levels=dict(lay["levels"], neg=neg[:i] + [bad] + neg[i + 1:]))
        with pytest.raises(ValueError, match=r"parts.k\[0\]: does not match"):
            ScoreOrder.from_layout(lay4)


def test_a_swapped_reference_in_the_file_is_refused(tmp_path):
    """The same through a checkpoint file: a merge source's array reference swapped for
    another array of the state (and the manifest's checksum recomputed, as a careful
    forger would) loads as a tree but is refused by the levels."""
    import hashlib

    from streameval.io.checkpoint import canonical

    order, _ = distinct_order(20, 12, seed=1)
    writer = StateWriter(tmp_path / "c.json")
    writer.write({"order": order.to_layout()}, kind="t")
    rng = np.random.default_rng(5)
    for _ in range(8):
        s = np.sort(rng.random(20)) + 3.0
        order.add_entries(s, np.zeros(20), np.ones(20), np.zeros(20, dtype=np.int64),
                          np.ones(20, dtype=np.int64))
        lay = order.to_layout()
        writer.write({"order": lay}, kind="t")
        if "merge" in json.dumps(lay, default=lambda a: None):
            break
    else:
        pytest.fail("no side given as its merge")
    env = json.loads((tmp_path / "c.json").read_text())
    neg = env["state"]["order"]["levels"]["neg"]
    i = next(j for j, d in enumerate(neg) if "merge" in d)
    src = neg[i]["merge"][1]
    other = neg[i]["merge"][0]
    # the smaller source's keys now reference the bigger source's first piece
    ks = other["k"]["$c"][0] if isinstance(other["k"], dict) and "$c" in other["k"] \
        else other["k"]
    src["k"] = ks
    env["state"]["order"]["levels"]["neg"][i]["merge"][1] = src
    env["sha256"] = hashlib.sha256(canonical(env["state"])).hexdigest()
    (tmp_path / "c.json").write_text(json.dumps(env))
    state = load_checkpoint(tmp_path / "c.json", fallback=False)
    with pytest.raises(ValueError, match=r"levels.neg\[\d+\]"):
        ScoreOrder.from_layout(state["order"])


def test_pieces_are_joined_into_one_array_and_referenced_after_a_restart(tmp_path):
    """A side longer than PIECE is given as {"$c": pieces}: the reader joins them into
    one array (the side's keys, one buffer), adopts each piece as a view of it, and the
    first checkpoint after the restart writes none of them again."""
    order, _ = distinct_order(40, 6)
    order.to_layout()
    writer = StateWriter(tmp_path / "c.json")
    writer.write({"order": order.to_layout()}, kind="t")
    fresh = StateWriter(tmp_path / "c.json")
    state = load_checkpoint(tmp_path / "c.json", writer=fresh)
    loaded = ScoreOrder.from_layout(state["order"])
    same_levels(order._levels, loaded._levels)
    big = max(loaded._levels.neg + loaded._levels.pos, key=lambda s: s.size)
    assert big.size > levels.PIECE and big.k.base is None or big.k.flags.owndata
    fresh.write({"order": loaded.to_layout()}, kind="t")
    assert fresh.last["arrays"] == 0 or fresh.last["bytes"] < levels.PIECE * 8


def test_a_levels_layout_of_fractional_weights_refuses_a_merge():
    """Merged sides are given as their merge only with integer weights (exact sums: the
    merge done again gives the same bits); a layout of fractional weights holding one is
    refused."""
    lv = Levels(True, False)
    d = {"merge": [None, None], "final": False, "probe": [0, 0.0, []],
         "parts": {"k": [], "w": None, "c": None, "ow": None}}
    with pytest.raises(ValueError, match="fractional"):
        Levels.from_layout({"ap": False, "rent": 0, "pos": [d], "neg": []}, lv.unit,
                           lv.integral)


def test_without_checkpoints_no_side_keeps_its_sources():
    """An order never given to a checkpoint keeps no merge sources (the memory of the
    levels is what it is without checkpoints); once it is, merges keep them, nested at
    most MAX_CHAIN deep however rarely checkpoints come."""
    order, _ = distinct_order(30, 40)
    assert not pending_sides(order)
    order.to_layout()
    rng = np.random.default_rng(9)
    deepest = 0
    for _ in range(60):
        s = np.sort(rng.random(30)) + 5.0
        order.add_entries(s, np.zeros(30), np.ones(30), np.zeros(30, dtype=np.int64),
                          np.ones(30, dtype=np.int64))
        for side in pending_sides(order):
            deepest = max(deepest, side.src[3])
    assert 1 <= deepest <= levels.MAX_CHAIN
    # and a checkpoint then loads bit for bit
    same_levels(order._levels, ScoreOrder.from_layout(order.to_layout())._levels)
