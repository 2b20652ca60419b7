"""Binary checkpoints of segmented monitors: the count windows' runs of batches packed
together, across windows and segments, into columns they share, their liveness bound,
and the older per-window form still read.

Oracles: a monitor fed the same events and never saved (its rows, alerts, snapshot and
JSON state), each window's own events (``Sliding.events()``) against its part of the
shared columns, the arrays a capture gives (their identity and sizes, counted by hand),
and damage made by editing the state or the real files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streameval as se
import streameval.windows.count as count
from streameval.io.checkpoint import (
    CheckpointError,
    CheckpointFallback,
    load_checkpoint,
    read_state,
)
from streameval.io.statefile import StateWriter, pack_dir
from streameval.monitor import Monitor
from streameval.windows.count import RUN_GROUP_LIVE

NAMES = [f"s{i}" for i in range(8)]


def metrics(size=40):
    return {"auc": se.ROCAUC(), "auc@w": se.Sliding(se.ROCAUC(), size=size),
            "recall@w": se.Sliding(se.Recall(), size=size),
            "ll@w": se.Sliding(se.LogLoss(), size=size)}


def monitor(size=40):
    return Monitor(metrics(size), group_by="segment", every=25)


def feed(mon, rng, segments, k, t0, weights=False):
    y = rng.random(k) < 0.4
    seg = [segments[i] for i in rng.integers(0, len(segments), k)]
    w = rng.uniform(0.5, 2.0, k) if weights else None
    mon.update_many(y, rng.random(k) * 0.6 + 0.3 * y, w=w,
                    t=t0 + np.arange(k, dtype=float), segment=seg)
    return t0 + k


def collected(mon):
    rows, alerts = [], []
    mon.on_metrics.append(rows.append)
    mon.on_alert.append(alerts.append)
    return rows, alerts


def runs(tree):
    """``[(segment, metric name, run state)]`` of the count windows in a captured tree."""
    out = []
    for s in tree["data"]["segments"]:
        s = s["$b"]
        for name, m in s["metrics"]["$b"].items():
            if isinstance(m, dict) and m.get("type") == "Sliding":
                out.extend((s["segment"], name, r) for r in m["data"]["store"])
    return out


def group(tree, run):
    """The shared columns ``(y, s, w, sizes)`` of a run's group, from the Monitor's own
    data."""
    g = tree["data"]["window_groups"][str(run["g"])]
    return g["y"], g["s"], g["w"], g["sizes"]


def loads_equal(path, mon):
    """Whether the checkpoint at ``path`` loads as a monitor equal to ``mon`` (their
    JSON states)."""
    back = Monitor.from_array_state(load_checkpoint(path))
    return json.dumps(back.to_state()) == json.dumps(mon.to_state())


def full_loads_equal(path, mon):
    """Whether a fresh writer's full checkpoint of ``mon`` at ``path`` loads equal."""
    StateWriter(path).write(mon.to_array_state(), kind="monitor")
    return loads_equal(path, mon)


def window_of(mon, segment, name):
    return next(s for s in mon.scopes() if s.key == segment).metrics[name]


def test_every_window_captured_together_shares_one_group_of_columns():
    """A capture after every segment counted events: the runs of all windows of all
    segments are parts of one labels, one scores and one sizes array (not three per
    window); each window's live events are exactly its part from ``first``/``lo`` on,
    and the windows of one segment (the same batches) share one part."""
    rng = np.random.default_rng(1)
    mon = monitor(size=10_000)
    feed(mon, rng, NAMES, 3000, 0)
    mon.evaluate()
    tree = mon.to_array_state()
    got = runs(tree)
    assert {(seg, name) for seg, name, _ in got} == {
        (seg, name) for seg in [None, *NAMES] for name in ("auc@w", "recall@w", "ll@w")}
    assert {r["g"] for _, _, r in got} == {0} and list(tree["data"]["window_groups"]) == ["0"]
    Y, S, W, SZ = group(tree, got[0][2])
    assert not (Y.flags.writeable or S.flags.writeable or SZ.flags.writeable)
    assert W is None
    parts = {}
    for seg, name, r in got:
        e0, e1, b0, b1 = r["at"]
        assert SZ[b0:b1].sum() == e1 - e0
        # (the oracle: the window's own events, oldest first)
        lo = int(SZ[b0:b0 + r["first"]].sum()) + r["lo"]
        events = window_of(mon, seg, name).events()
        assert Y[e0 + lo:e1].tolist() == [e[0] for e in events]
        assert S[e0 + lo:e1].tolist() == [e[1] for e in events]
        parts.setdefault(seg, set()).add(tuple(r["at"]))
    assert all(len(p) == 1 for p in parts.values())  # (one part per segment)
    # (each segment's events once: 3000 for the segments, 3000 for the whole stream;
    # the parts tile the columns)
    assert len(Y) == 6000
    tiles = sorted(p for ps in parts.values() for p in ps)
    assert [(a[1], a[3]) for a in tiles[:-1]] == [(b[0], b[2]) for b in tiles[1:]]
    assert tiles[0][::2] == (0, 0) and tiles[-1][1::2] == (len(Y), len(SZ))


def test_weighted_and_unweighted_runs_form_their_own_groups(tmp_path):
    """Segments fed with weights and others without: two groups (the weighted one with
    a weights column), and a load equals the monitor."""
    rng = np.random.default_rng(2)
    mon = monitor()
    t = feed(mon, rng, NAMES[:3], 500, 0, weights=True)
    feed(mon, rng, NAMES[3:5], 500, t)
    mon.evaluate()
    tree = mon.to_array_state()
    groups = {r["g"]: group(tree, r)[2] is None for seg, _, r in runs(tree)
              if seg is not None}
    assert sorted(groups.values()) == [False, True]
    assert sorted(tree["data"]["window_groups"]) == sorted(str(g) for g in groups)
    StateWriter(tmp_path / "c.json").write(tree, kind="monitor")
    assert loads_equal(tmp_path / "c.json", mon)


def test_groups_few_events_still_reference_are_packed_again(tmp_path):
    """Feeding all segments but one, or one segment, at a time (the others idle): each
    capture's new group holds the fed segments' runs; a group whose referenced events
    fall under RUN_GROUP_LIVE of its own has its runs (idle segments' too) packed again
    with the new ones. The
    events the groups hold stay within 1 / RUN_GROUP_LIVE times the referenced ones
    plus the newest group, and every checkpoint of the chain loads equal."""
    rng = np.random.default_rng(3)
    mon = monitor(size=300)
    names = NAMES[:6]
    t = feed(mon, rng, names, 1500, 0)
    mon.evaluate()
    w = StateWriter(tmp_path / "c.json")
    w.write(mon.to_array_state(), kind="monitor")
    repacked = 0
    for step in range(12):
        fed = names[:5] if step % 2 else [names[step % len(names)]]
        t = feed(mon, rng, fed, 200, t)
        mon.evaluate()
        tree = mon.to_array_state()
        got = runs(tree)
        groups, live = {}, {}
        assert sorted(tree["data"]["window_groups"]) == sorted({str(r["g"]) for _, _, r in got})
        for seg, _, r in got:
            groups[r["g"]] = len(group(tree, r)[0])
            live.setdefault(r["g"], {})[r["at"][0]] = r["at"][1] - r["at"][0]
        newest = groups[max(groups)]
        referenced = sum(sum(v.values()) for v in live.values())
        assert sum(groups.values()) <= referenced / RUN_GROUP_LIVE + newest
        # (idle segments whose runs moved to the newest group)
        last = max(groups)
        repacked += len({seg for seg, _, r in got if seg not in fed and seg is not None
                         and r["g"] == last})
        w.write(tree, kind="monitor")
        if step % 4 == 3:
            assert loads_equal(tmp_path / "c.json", mon), step
    assert repacked > 0
    assert full_loads_equal(tmp_path / "f.json", mon)


def test_a_capture_of_an_unchanged_monitor_gives_the_same_state():
    """Two captures with no event between them give the same subtree objects (a
    checkpoint writer references them), stale groups or not."""
    rng = np.random.default_rng(4)
    mon = monitor(size=100)
    t = feed(mon, rng, NAMES, 800, 0)
    for name in NAMES * 2:
        t = feed(mon, rng, [name], 150, t)
        mon.evaluate()
        mon.to_array_state()
    a, b = mon.to_array_state(), mon.to_array_state()
    assert all(x is y for x, y in zip(a["data"]["segments"], b["data"]["segments"]))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1),
       steps=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 400), st.booleans(),
                                st.sampled_from(["write", "restore", "none"])),
                      min_size=2, max_size=7))
def test_saved_restored_and_continued_equals_a_direct_run(tmp_path_factory, seed, steps):
    """Events on a few segments per step (new segments appearing after a checkpoint,
    windows expiring, weighted batches or not), checkpoints after some steps and, after
    some, a restart from the checkpoint that continues: the rows, alerts, snapshot and
    state equal those of a monitor fed the same events and never saved, and the chain of
    incremental checkpoints equals a fresh writer's full one."""
    rng = np.random.default_rng(seed)
    d = tmp_path_factory.mktemp("windows")
    direct, mon = monitor(), monitor()
    rows_d, alerts_d = collected(direct)
    rows, alerts = collected(mon)
    w = StateWriter(d / "c.json")
    t = 0
    for k, n, weighted, then in steps:
        names = NAMES[:k]
        state = rng.bit_generator.state
        feed(direct, rng, names, n, t, weights=weighted)
        rng.bit_generator.state = state
        t = feed(mon, rng, names, n, t, weights=weighted)
        if then == "none":
            continue
        w.write(mon.to_array_state(), kind="monitor")
        if then == "restore":
            w = StateWriter(d / "c.json")  # (adopting the loaded arrays)
            mon = Monitor.from_array_state(load_checkpoint(d / "c.json", writer=w))
            mon.on_metrics.append(rows.append)
            mon.on_alert.append(alerts.append)
    direct.evaluate()
    mon.evaluate()
    assert json.dumps(rows, default=str) == json.dumps(rows_d, default=str)
    assert json.dumps(alerts, default=str) == json.dumps(alerts_d, default=str)
    assert json.dumps(mon.snapshot(), default=str) == json.dumps(direct.snapshot(),
                                                                  default=str)
    assert json.dumps(mon.to_state()) == json.dumps(direct.to_state())
    w.write(mon.to_array_state(), kind="monitor")
    StateWriter(d / "f.json").write(mon.to_array_state(), kind="monitor")
    chain = Monitor.from_array_state(load_checkpoint(d / "c.json"))
    full = Monitor.from_array_state(load_checkpoint(d / "f.json"))
    assert json.dumps(chain.to_state()) == json.dumps(full.to_state()) == json.dumps(
        direct.to_state())


def test_the_per_window_form_still_loads_and_continues(tmp_path, monkeypatch):
    """A checkpoint whose windows packed their own runs (no shared columns, as written
    before they were packed together) loads equal; the next captures reference its runs
    and pack the new ones together; the chain loads equal to the monitor."""

    class alone:  # (no packer active: each window packs its own runs)
        def __init__(self, packer):
            pass

        def __enter__(self):
            return None

        def __exit__(self, *exc):
            return False

    rng = np.random.default_rng(5)
    mon = monitor(size=200)
    t = feed(mon, rng, NAMES, 2000, 0)
    mon.evaluate()
    monkeypatch.setattr(count, "packing_together", alone)
    old = mon.to_array_state()
    monkeypatch.undo()
    assert all("at" not in r for _, _, r in runs(old)) and "window_groups" not in old["data"]
    path = tmp_path / "c.json"
    StateWriter(path).write(old, kind="monitor")
    assert loads_equal(path, mon)
    back = Monitor.from_array_state(load_checkpoint(path))
    w = StateWriter(path)
    for step in range(3):
        t = feed(back, np.random.default_rng(step), NAMES[:3], 300, t)
        feed(mon, np.random.default_rng(step), NAMES[:3], 300, t - 300)
        back.evaluate()
        mon.evaluate()
        tree = back.to_array_state()
        forms = {"at" in r for _, _, r in runs(tree)}
        assert True in forms
        w.write(tree, kind="monitor")
    assert loads_equal(path, mon)


@pytest.mark.parametrize("change, match", [
    (lambda r, t: r.update(at=[0, 10**6, 0, 1]), "at = "),
    (lambda r, t: r.update(at=[0, 1, 0, 1]), "do not split"),
    (lambda r, t: r.update(at=[0, 1, 0]), "at = "),
    (lambda r, t: r.update(at=[0.0, 1, 0, 1]), "at = "),
    (lambda r, t: r.update(g=7), "no group"),
    (lambda r, t: r.update(g="0"), "no group"),
    (lambda r, t: r.update(extra=1), "expected packed columns"),
    (lambda r, t: t.update({"0": dict(t["0"], sizes=t["0"]["sizes"].astype(np.float64))}),
     "int64 sizes"),
    (lambda r, t: t.update({"0": dict(t["0"], s=t["0"]["s"][:-1])}), "one length"),
    (lambda r, t: t.update({"0": dict(t["0"], y=t["0"]["s"])}), "float64 labels"),
    (lambda r, t: t.update({"x": t["0"]}), "group number"),
    (lambda r, t: t.update({"0": [1]}), "group number"),
])
def test_a_malformed_shared_run_is_refused(change, match):
    """A run whose part ``at`` lies outside its columns, whose sizes do not add up to
    its events, naming no group of the state, or with an extra key; a group whose
    columns have the wrong types or lengths, or a key that is no number: ``ValueError``
    naming what, never another exception."""
    rng = np.random.default_rng(6)
    mon = monitor()
    feed(mon, rng, NAMES[:3], 600, 0)
    mon.evaluate()
    tree = mon.to_array_state()
    seg = next(s["$b"] for s in tree["data"]["segments"] if s["$b"]["segment"] == "s1")
    win = seg["metrics"]["$b"]["auc@w"]
    run = dict(win["data"]["store"][-1])
    table = dict(tree["data"]["window_groups"])
    change(run, table)
    win = dict(win, data=dict(win["data"], store=[*win["data"]["store"][:-1], run]))
    bad = dict(seg, metrics=dict(seg["metrics"]["$b"], **{"auc@w": win}))
    state = dict(tree, data=dict(tree["data"], window_groups=table, segments=[
        bad if s["$b"]["segment"] == "s1" else s for s in tree["data"]["segments"]]))
    with pytest.raises(ValueError, match=match):
        Monitor.from_array_state(state)


def test_a_damaged_shared_window_column_is_refused_and_the_previous_loaded(tmp_path):
    """One flipped byte in the scores every fed window shares is refused by its CRC-32
    naming the pack, and the previous generation loads instead, equal to the monitor as
    it was then."""
    rng = np.random.default_rng(7)
    mon = monitor(size=5000)
    t = feed(mon, rng, NAMES, 3000, 0)
    mon.evaluate()
    path = tmp_path / "c.json"
    w = StateWriter(path)
    w.write(mon.to_array_state(), kind="monitor")
    first = json.dumps(mon.to_state())
    feed(mon, rng, NAMES[:5], 2000, t)
    mon.evaluate()
    tree = mon.to_array_state()
    w.write(tree, kind="monitor")
    S = group(tree, next(r for seg, _, r in runs(tree) if seg == "s1"))[1]
    env = json.loads(path.read_text())
    d = Path(pack_dir(path))
    # (the place of the newest group's scores: the pack this checkpoint wrote, found by
    # the bytes it holds)
    pack = d / sorted(env["packs"])[-1]
    raw = bytearray(pack.read_bytes())
    at = bytes(raw).find(S.tobytes())
    assert at >= 0
    raw[at + 5] ^= 0x01
    pack.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="CRC-32") as e:
        read_state(path, json.loads(path.read_text()))
    assert e.value.damaged and str(pack) in str(e.value)
    with pytest.warns(CheckpointFallback):
        prev = load_checkpoint(path, expected_kind="monitor")
    assert json.dumps(Monitor.from_array_state(prev).to_state()) == first


def test_a_window_captured_alone_after_a_monitor_packs_its_own_runs():
    """A window of a monitor whose runs were packed with others' (their columns held by
    the monitor's state), then captured alone: its runs are packed again on their own,
    and its state loads alone, equal to the window."""
    from streameval.metrics.arraystate import array_state, from_array_state

    rng = np.random.default_rng(8)
    mon = monitor(size=300)
    feed(mon, rng, NAMES[:3], 900, 0)
    mon.evaluate()
    mon.to_array_state()
    win = window_of(mon, "s1", "auc@w")
    state = array_state(win)
    assert state["data"]["store"] and all("g" not in r for r in state["data"]["store"])
    assert json.dumps(from_array_state(state).to_state()) == json.dumps(win.to_state())


def test_a_capture_in_another_thread_packs_its_own_runs():
    """A window captured in one thread while another thread's monitor capture has its
    packer open (two monitors checkpointed from two threads): its runs are its own
    (no group of the other capture's), and its state loads alone, equal to the window."""
    import threading

    from streameval.metrics.arraystate import array_state, from_array_state

    rng = np.random.default_rng(10)
    mon = monitor(size=300)
    feed(mon, rng, NAMES[:3], 900, 0)
    mon.evaluate()
    win = window_of(mon, "s1", "auc@w")
    got = {}
    with count.packing_together(count.RunPacker()):
        th = threading.Thread(target=lambda: got.setdefault("state", array_state(win)))
        th.start()
        th.join()
    state = got["state"]
    assert state["data"]["store"] and all("g" not in r for r in state["data"]["store"])
    assert json.dumps(from_array_state(state).to_state()) == json.dumps(win.to_state())


def test_a_ranking_metric_with_no_deferred_event_stores_none_and_loads_equal():
    """ROC AUC with no deferred event gives null pending columns (no array), with some
    gives them as arrays; both load equal to the metric (its JSON state and value), and
    the empty ones as a state written with empty arrays loads alike."""
    from streameval.metrics.arraystate import array_state, from_array_state

    rng = np.random.default_rng(9)
    m = se.ROCAUC()
    m.update_many(rng.random(500) < 0.4, rng.random(500))
    m.get()
    st = array_state(m)
    assert st["data"]["ps"] is None and st["data"]["py"] is None
    back = from_array_state(st)
    assert json.dumps(back.to_state()) == json.dumps(m.to_state()) and back.get() == m.get()
    old = dict(st, data=dict(st["data"], ps=np.zeros(0), py=np.zeros(0, dtype=bool)))
    assert json.dumps(from_array_state(old).to_state()) == json.dumps(m.to_state())
    with pytest.raises(ValueError, match="deferred events"):
        from_array_state(dict(st, data=dict(st["data"], ps=np.zeros(1))))
