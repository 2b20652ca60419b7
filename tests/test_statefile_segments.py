"""Binary checkpoints of segmented monitors: detector columns shared by the segments
captured together, their bound, and references written by the JSON encoder.

Oracles: the JSON state (``to_state()``) of the monitor against the one loaded back, a
fresh writer's full checkpoint, the arrays a capture gives (their identity and sizes,
counted by hand), and damage made by editing the real files.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streameval.io.checkpoint import (
    CheckpointError,
    CheckpointFallback,
    canonical,
    load_checkpoint,
    read_state,
)
from streameval.io.statefile import StateWriter, pack_dir
from streameval.monitor import Monitor
from streameval.monitor.facade import DRIFT_GROUP_LIVE

NAMES = [f"s{i}" for i in range(8)]


def feed(mon, rng, segments, k, t0):
    y = rng.random(k) < 0.3
    seg = [segments[i] for i in rng.integers(0, len(segments), k)]
    mon.update_many(y, rng.random(k) * 0.6 + 0.3 * y, t=t0 + np.arange(k, dtype=float),
                    segment=seg)
    return t0 + k


def scopes(tree):
    """``{segment: scope state}`` of a captured tree (its subtrees opened)."""
    out = {}
    for s in tree["data"]["segments"]:
        s = s["$b"]
        out[s["segment"]] = dict(s, drift=s["drift"]["$b"])
    return out


def columns(scope):
    """The detector columns a scope's drift tests reference (one pair: they share it)."""
    pairs = {tuple(id(c) for c in d["data"]["columns"]) for d in scope["drift"].values()}
    assert len(pairs) == 1, pairs
    d = next(iter(scope["drift"].values()))
    return d["data"]["columns"]


def test_every_segment_captured_together_shares_one_pair_of_columns(tmp_path):
    """A capture after every segment counted events gives one float64 and one int64
    array for all their detectors (not a pair per segment), each detector's part of it
    being exactly what its own ``columns_states`` gives; a load equals the monitor."""
    rng = np.random.default_rng(1)
    mon = Monitor.default(group_by="segment")
    feed(mon, rng, NAMES, 4000, 0)
    mon.evaluate()
    tree = mon.to_array_state()
    sc = scopes(tree)
    assert set(sc) == set(NAMES) | {None}
    # (the whole stream runs no detectors in the default monitor with group_by)
    assert sc[None]["drift"] == {}
    pairs = {tuple(id(c) for c in columns(s)) for s in sc.values() if s["drift"]}
    assert len(pairs) == 1
    F, I = columns(sc["s3"])
    assert F.dtype == np.float64 and I.dtype == np.int64
    assert not F.flags.writeable and not I.flags.writeable
    # (the oracle: each segment's detectors captured alone, by the class's own hook)
    seg = next(s for s in mon.scopes() if s.key == "s3")
    kind = type(next(iter(seg.drift.values())))
    alone = kind.columns_states(list(seg.drift.values()))
    f1, i1 = alone[0]["data"]["columns"]
    ends = [st_["data"]["at"] for st_ in alone[1:]] + [[len(f1), len(i1)]]
    for name, st_, end in zip(seg.drift, alone, ends):
        mine = sc["s3"]["drift"][name]["data"]
        (f0, i0), (g0, j0) = mine["at"], st_["data"]["at"]
        nf, ni = end[0] - g0, end[1] - j0
        assert nf > 0 and ni > 0
        assert np.array_equal(F[f0:f0 + nf], f1[g0:g0 + nf], equal_nan=True), name
        assert np.array_equal(I[i0:i0 + ni], i1[j0:j0 + ni]), name
        assert mine["changes"] == st_["data"]["changes"]
        assert st_["params"] == sc["s3"]["drift"][name]["params"]
    total_f = sum(len(type(next(iter(s.drift.values()))).columns_states(
        list(s.drift.values()))[0]["data"]["columns"][0]) for s in mon.scopes() if s.drift)
    assert len(F) == total_f
    w = StateWriter(tmp_path / "c.json")
    w.write(tree, kind="monitor")
    back = Monitor.from_array_state(load_checkpoint(tmp_path / "c.json"))
    assert json.dumps(back.to_state()) == json.dumps(mon.to_state())


def test_columns_few_segments_still_use_are_captured_again_with_the_new(tmp_path):
    """Feeding one segment at a time: each capture's new pair holds the segments that
    changed; an older pair fewer than a quarter of whose segments still reference it is
    dropped, its segments' detectors joining the new pair. The pairs referenced stay
    few, their floats within 1 / DRIFT_GROUP_LIVE times the live ones plus the new
    pair, and every checkpoint of the chain loads equal to the monitor."""
    rng = np.random.default_rng(2)
    mon = Monitor.default(group_by="segment")
    names = NAMES[:6]
    t = feed(mon, rng, names, 1500, 0)
    mon.evaluate()
    w = StateWriter(tmp_path / "c.json")
    w.write(mon.to_array_state(), kind="monitor")
    rejoined = 0
    for step in range(9):
        name = names[step % len(names)]
        t = feed(mon, rng, [name], 200, t)
        mon.evaluate()
        before = {k: v[3][1] for k, v in mon.__dict__["_captured"].items()}
        tree = mon.to_array_state()
        after = {k: v[3][1] for k, v in mon.__dict__["_captured"].items()}
        changed = {k for k in after if before.get(k) is not after[k]}
        # (segments whose detectors did not change but were captured again)
        rejoined += len(changed - {name, None})
        sc = scopes(tree)
        groups = {}
        for s in sc.values():
            if not s["drift"]:  # (the whole stream's scope: no detectors)
                continue
            F = columns(s)[0]
            groups.setdefault(id(F), [F, 0])[1] += 1
        live = sum(len(type(next(iter(s.drift.values()))).columns_states(
            list(s.drift.values()))[0]["data"]["columns"][0]) for s in mon.scopes()
            if s.drift)
        kept = sum(len(F) for F, _ in groups.values())
        assert kept <= live / DRIFT_GROUP_LIVE + live, (kept, live)
        w.write(tree, kind="monitor")
        if step % 3 == 2:
            back = Monitor.from_array_state(load_checkpoint(tmp_path / "c.json"))
            assert json.dumps(back.to_state()) == json.dumps(mon.to_state()), step
    assert rejoined > 0
    StateWriter(tmp_path / "f.json").write(mon.to_array_state(), kind="monitor")
    full = Monitor.from_array_state(load_checkpoint(tmp_path / "f.json"))
    assert json.dumps(full.to_state()) == json.dumps(mon.to_state())


def test_a_damaged_shared_column_is_refused_and_the_previous_generation_loaded(tmp_path):
    """One flipped byte in the columns every fed segment shares is refused by its
    CRC-32 naming the pack (every segment referencing it is then unreadable), and the
    previous generation loads instead, equal to the monitor as it was then."""
    rng = np.random.default_rng(3)
    mon = Monitor.default(group_by="segment")
    t = feed(mon, rng, NAMES, 3000, 0)
    mon.evaluate()
    path = tmp_path / "c.json"
    w = StateWriter(path)
    w.write(mon.to_array_state(), kind="monitor")
    first = json.dumps(mon.to_state())
    feed(mon, rng, NAMES[:5], 2000, t)
    mon.evaluate()
    w.write(mon.to_array_state(), kind="monitor")
    env = json.loads(path.read_text())
    d = Path(pack_dir(path))

    def read(ref):
        return json.loads((d / ref[0]).read_bytes()[ref[1]:ref[1] + ref[2]])

    refs = {}
    for x in env["state"]["data"]["segments"]:
        s = read(x["$b"])
        drift = read(s["drift"]["$b"])
        if not drift:  # (the whole stream's scope: no detectors)
            continue
        refs[s["segment"]] = [tuple(c["$a"][:3]) for c in drift["recall"]["data"]["columns"]]
    fed = [refs[n] for n in NAMES[:5]]
    assert all(r == fed[0] for r in fed)  # (one pair for the five fed segments)
    assert all(refs[n] != fed[0] for n in NAMES[5:])  # (the idle ones: the older pair)
    saved = tmp_path.parent / (tmp_path.name + "-saved")
    shutil.copytree(tmp_path, saved)
    for name, offset, nbytes in fed[0]:
        pack = d / name
        raw = bytearray(pack.read_bytes())
        raw[offset + nbytes - 3] ^= 0x01
        pack.write_bytes(bytes(raw))
        with pytest.raises(CheckpointError, match="an array of pack .* CRC-32") as e:
            read_state(path, json.loads(path.read_text()))
        assert e.value.damaged and str(pack) in str(e.value)
        with pytest.warns(CheckpointFallback):
            prev = load_checkpoint(path, expected_kind="monitor")
        assert json.dumps(Monitor.from_array_state(prev).to_state()) == first
        shutil.rmtree(tmp_path)
        shutil.copytree(saved, tmp_path)
    back = Monitor.from_array_state(load_checkpoint(path, expected_kind="monitor"))
    assert json.dumps(back.to_state()) == json.dumps(mon.to_state())


def test_a_compaction_moving_an_array_of_a_new_subtree_writes_its_new_place(
        tmp_path, monkeypatch):
    """A subtree given anew (its JSON written by the encoder, references in place) that
    holds an array written by an earlier checkpoint into a pack the compaction moves:
    the subtree is encoded again with the array's new place, and loads back equal."""
    import streameval.io.statefile as sf

    monkeypatch.setattr(sf, "COMPACT_RATIO", 1.0)
    monkeypatch.setattr(sf, "COMPACT_STEP", 1)
    keep = np.arange(1000, dtype=np.float64)
    keep.flags.writeable = False
    path = tmp_path / "c.json"
    w = StateWriter(path)
    big = np.ones(200_000)
    big.flags.writeable = False
    w.write({"a": {"$b": {"x": keep, "n": 1}}, "big": big}, kind="t")
    first = json.loads(path.read_text())
    old_pack = first["state"]["big"]["$a"][0]
    # (the big array gone: the first pack is nearly all dead, and compacted)
    tree = {"a": {"$b": {"x": keep, "n": 2, "f": [1.5, None]}}}
    w.write(tree, kind="t")
    assert w.last["compacted"] > 0
    env = json.loads(path.read_text())
    assert old_pack not in env["packs"]
    got = load_checkpoint(path)
    assert np.array_equal(got["a"]["x"], keep) and got["a"]["n"] == 2
    assert got["a"]["f"] == [1.5, None]
    # (the subtree's JSON names the array's new pack)
    ref = env["state"]["a"]["$b"]
    raw = (Path(pack_dir(path)) / ref[0]).read_bytes()[ref[1]:ref[1] + ref[2]]
    assert json.loads(raw)["x"]["$a"][0] == ref[0] != old_pack


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1),
       steps=st.lists(st.tuples(st.integers(1, 6), st.booleans()), min_size=3, max_size=6))
def test_a_chain_feeding_a_few_segments_at_a_time_equals_the_monitor(
        tmp_path_factory, seed, steps):
    """Events on a few segments per step (with or without their rows written), one
    writer saving after each: column pairs made, shared, dropped and joined again; each
    load equals the monitor then, and the chain equals a fresh writer's full
    checkpoint."""
    rng = np.random.default_rng(seed)
    d = tmp_path_factory.mktemp("fewchain")
    mon = Monitor.default(group_by="segment")
    w = StateWriter(d / "c.json")
    t = 0
    for k, evaluate in steps:
        names = list(rng.choice(NAMES[:6], k, replace=False))
        t = feed(mon, rng, names, int(rng.integers(50, 800)), t)
        if evaluate:
            mon.evaluate()
        w.write(mon.to_array_state(), kind="monitor")
        got = Monitor.from_array_state(load_checkpoint(d / "c.json"))
        assert json.dumps(got.to_state()) == json.dumps(mon.to_state())
    StateWriter(d / "f.json").write(mon.to_array_state(), kind="monitor")
    full = Monitor.from_array_state(load_checkpoint(d / "f.json"))
    assert json.dumps(full.to_state()) == json.dumps(mon.to_state())


def test_equal_arrays_are_written_once_and_load_as_their_own_arrays(tmp_path):
    """Two read-only arrays with the same bytes (at least SAME_BYTES_FROM) in one
    checkpoint: the bytes are written once, the second referenced as a copy (a seventh
    value in its reference); a load gives two arrays, equal, not one; smaller arrays,
    writable ones and arrays of another dtype are written as they are; after a restart
    both are referenced, and a flipped byte in the shared bytes is refused."""
    from streameval.io.statefile import SAME_BYTES_FROM

    n = SAME_BYTES_FROM // 8
    x = np.arange(n, dtype=np.float64)
    y = x.copy()
    small = np.arange(n // 2, dtype=np.float64)
    small2 = small.copy()
    as_int = np.arange(n, dtype=np.int64)
    live = x.copy()  # (writable: changes in place, never referenced as a copy)
    for a in (x, y, small, small2, as_int):
        a.flags.writeable = False
    path = tmp_path / "c.json"
    w = StateWriter(path)
    tree = {"x": x, "y": y, "s": [small, small2], "i": as_int, "live": live,
            "sub": {"$b": {"again": y.copy()}}}
    tree["sub"]["$b"]["again"].flags.writeable = False
    w.write(tree, kind="t")
    # (x once; y and the subtree's copy reference it; small twice; the int64 and the
    # writable array written; then the subtree's JSON)
    assert w.last["arrays"] == 5, w.last
    env = json.loads(path.read_text())
    rx, ry = env["state"]["x"]["$a"], env["state"]["y"]["$a"]
    assert len(rx) == 6 and len(ry) == 7 and ry[:6] == rx and ry[6] == 1
    assert len(env["state"]["live"]["$a"]) == 6
    assert [len(r["$a"]) for r in env["state"]["s"]] == [6, 6]
    got = load_checkpoint(path)
    assert got["x"] is not got["y"] and got["y"] is not got["sub"]["again"]
    for k in ("x", "y", "live"):
        assert np.array_equal(got[k], x)
    assert np.array_equal(got["sub"]["again"], x)
    assert np.array_equal(got["i"], as_int) and got["i"].dtype == np.int64
    # (a restart: the loaded arrays are known to the writer, nothing written again)
    w2 = StateWriter(path)
    state = load_checkpoint(path, writer=w2)
    for k in ("x", "y", "i"):
        state[k].flags.writeable = False
    w2.write({"x": state["x"], "y": state["y"], "i": state["i"]}, kind="t")
    assert w2.last["arrays"] == 0 and w2.last["bytes"] == 0
    env2 = json.loads(path.read_text())
    assert env2["state"]["y"]["$a"] == ry
    back = load_checkpoint(path)
    assert back["x"] is not back["y"] and np.array_equal(back["y"], x)
    # (damage to the shared bytes: both references are refused by their CRC-32)
    pack = Path(pack_dir(path)) / rx[0]
    raw = bytearray(pack.read_bytes())
    raw[rx[1] + 3] ^= 0x04
    pack.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="CRC-32"):
        read_state(path, json.loads(path.read_text()))


@pytest.mark.parametrize("bad", [[0], ["1"], [-1], [1, 2]])
def test_a_copy_reference_of_the_wrong_shape_is_refused(tmp_path, bad):
    """A seventh value that is not a count from 1, or an eighth, is damage."""
    path = tmp_path / "c.json"
    x = np.arange(200, dtype=np.float64)
    y = x.copy()
    x.flags.writeable = y.flags.writeable = False
    StateWriter(path).write({"x": x, "y": y}, kind="t")
    env = json.loads(path.read_text())
    env["state"]["y"]["$a"] = env["state"]["y"]["$a"][:6] + bad
    env["sha256"] = hashlib.sha256(canonical(env["state"])).hexdigest()  # (sound JSON)
    with pytest.raises(CheckpointError, match="reference of the wrong shape"):
        read_state(path, env)


def test_a_segmented_checkpoint_writes_equal_runs_once_and_loads_equal(
        tmp_path, monkeypatch):
    """Segments whose windows have not expired an event yet: their windows' score orders
    equal the cumulative ones, whose arrays are then written once; the checkpoint is
    smaller than one written without copies, and both load equal to the monitor."""
    import streameval.io.statefile as sf

    rng = np.random.default_rng(4)
    mon = Monitor.default(group_by="segment")
    feed(mon, rng, NAMES, 6000, 0)
    mon.evaluate()
    tree = mon.to_array_state()
    StateWriter(tmp_path / "c.json").write(tree, kind="monitor")
    monkeypatch.setattr(sf, "SAME_BYTES_FROM", 1 << 62)
    plain = StateWriter(tmp_path / "p.json")
    plain.write(tree, kind="monitor")
    monkeypatch.undo()
    size = {n: sum(f.stat().st_size for f in Path(pack_dir(tmp_path / n)).iterdir())
            for n in ("c.json", "p.json")}
    assert size["c.json"] < 0.8 * size["p.json"], size
    for n in ("c.json", "p.json"):
        back = Monitor.from_array_state(load_checkpoint(tmp_path / n))
        assert json.dumps(back.to_state()) == json.dumps(mon.to_state())


def test_a_compaction_moving_only_empty_arrays_writes_their_new_place(
        tmp_path, monkeypatch):
    """An empty array (a score order's pending scores) of a subtree given anew, in a
    pack the compaction empties: the compaction moves no byte, yet the subtree names the
    array's new place, and the checkpoint loads (no reference to a pack it dropped)."""
    import streameval.io.statefile as sf

    monkeypatch.setattr(sf, "COMPACT_RATIO", 1.0)
    empty = np.empty(0)
    empty.flags.writeable = False
    path = tmp_path / "c.json"
    w = StateWriter(path)
    big = np.ones(50_000)
    big.flags.writeable = False
    w.write({"a": {"$b": {"ps": empty, "n": 1}}, "big": big}, kind="t")
    w.write({"a": {"$b": {"ps": empty, "n": 2}}}, kind="t")
    env = json.loads(path.read_text())
    ref = env["state"]["a"]["$b"]
    raw = (Path(pack_dir(path)) / ref[0]).read_bytes()[ref[1]:ref[1] + ref[2]]
    assert json.loads(raw)["ps"]["$a"][0] in env["packs"]
    got = load_checkpoint(path)
    assert got["a"]["n"] == 2 and got["a"]["ps"].shape == (0,)


@pytest.mark.parametrize("label", ["plain", 'quo"te', "back\\slash", "new\nline"])
def test_a_subtree_the_encoder_declines_writes_each_array_once(tmp_path, label):
    """A subtree whose JSON the encoder declines (a string with an escape) is walked
    instead: the arrays the encoder had placed keep their place, so the pack holds each
    array's bytes once (an array met twice: twice, as the walk alone writes it), and
    every one loads equal."""
    x = np.arange(100_000, dtype=np.float64)  # (writeable: 800 000 bytes)
    z = np.arange(7, dtype=np.int64)
    w = StateWriter(tmp_path / "c.json")
    w.write({"seg": {"$b": {"label": label, "x": x, "z": [z, z]}}}, kind="t")
    assert w.last["arrays"] == 3
    assert x.nbytes + 2 * z.nbytes <= w.last["bytes"] < x.nbytes + 2 * z.nbytes + 4096
    got = load_checkpoint(tmp_path / "c.json")
    assert got["seg"]["label"] == label
    assert np.array_equal(got["seg"]["x"], x)
    assert [list(v) for v in got["seg"]["z"]] == [list(range(7))] * 2
