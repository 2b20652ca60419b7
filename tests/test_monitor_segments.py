"""Segments at their own cadence: a segment's events wait in its buffer and are fed in
one slice at its own evaluation points (its ``every``-th event since its last row, a new
period of event time, ``evaluate()``, ``flush()``). Oracles: scikit-learn on each
segment's events, a Monitor without ``group_by`` fed one segment's events alone (same
slices: the same bits), brute-force counts of the points, and a Monitor never saved for
restarts and snapshots."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, recall_score, roc_auc_score

import streameval as se
from streameval.monitor import Monitor, scopes as scopes_mod


def _metrics():
    return {"auc": se.ROCAUC(), "ap": se.AveragePrecision(), "recall": se.Recall(),
            "ll": se.LogLoss(), "auc@50": se.Sliding(se.ROCAUC(), size=50),
            "recall@50": se.Sliding(se.Recall(), size=50)}


def _stream(n, seed, segments=("a", "b", "c"), p=(0.6, 0.3, 0.1)):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    s = np.clip(np.where(y, rng.normal(0.6, 0.2, n), rng.normal(0.4, 0.2, n)), 0.001, 0.999)
    w = rng.uniform(0.5, 2.0, n)
    seg = rng.choice(list(segments), n, p=list(p)).astype(object)
    return y, s, w, seg


def _collect(mon):
    rows, alerts = [], []
    mon.on_metrics.append(rows.append)
    mon.on_alert.append(alerts.append)
    return rows, alerts


def _feed(mon, y, s, w, seg, step):
    for a in range(0, len(y), step):
        mon.update_many(y[a:a + step], s[a:a + step], w[a:a + step], segment=list(seg[a:a + step]))


def test_a_segments_rows_are_those_of_a_monitor_fed_its_events_alone():
    """Each segment's rows (n, values) are, bit for bit, those of a Monitor without
    group_by fed only that segment's events (fed in the same slices: ``every`` events),
    and equal scikit-learn's on the segment's first n events."""
    y, s, w, seg = _stream(2000, seed=1)
    every = 70
    mon = Monitor(_metrics(), group_by="g", every=every)
    rows, _ = _collect(mon)
    _feed(mon, y, s, w, seg, 333)
    mon.flush()
    for g in ("a", "b", "c"):
        mask = seg == g
        alone = Monitor(_metrics(), every=every)
        alone_rows, _ = _collect(alone)
        alone.update_many(y[mask], s[mask], w[mask])
        alone.flush()
        mine = [r for r in rows if r["segment"] == g]
        assert [(r["n"], r["values"]) for r in mine] == [
            (r["n"], r["values"]) for r in alone_rows]
        k = int(mask.sum())
        assert [r["n"] for r in mine] == list(range(every, k + 1, every)) + (
            [k] if k % every else [])
        for r in mine:
            yy, ss, ww = y[mask][:r["n"]], s[mask][:r["n"]], w[mask][:r["n"]]
            v = r["values"]
            assert abs(v["auc"] - roc_auc_score(yy, ss, sample_weight=ww)) <= 1e-12
            assert abs(v["ap"] - average_precision_score(yy, ss, sample_weight=ww)) <= 1e-12
            assert abs(v["recall"] - recall_score(yy, ss >= 0.5, sample_weight=ww)) <= 1e-12
            assert abs(v["auc@50"] - roc_auc_score(yy[-50:], ss[-50:],
                                                   sample_weight=ww[-50:])) <= 1e-12
            # its place in the stream: the position of its n-th event
            assert r["stream_n"] == int(np.flatnonzero(mask)[r["n"] - 1]) + 1 or (
                r["stream_n"] == len(y) and r is mine[-1])


def test_an_evaluation_reads_only_the_segments_that_changed(monkeypatch):
    """After the end of a stream (every segment fed and written), events of one segment
    and an evaluation read the whole stream and that segment only: the idle segments
    are neither read nor written."""
    y, s, w, seg = _stream(3000, seed=2, segments=[f"s{i}" for i in range(40)],
                           p=[1 / 40] * 40)
    mon = Monitor(_metrics(), group_by="g", every=100)
    rows, _ = _collect(mon)
    _feed(mon, y, s, w, seg, 1000)
    mon.flush()
    assert {r["segment"] for r in rows if r["stream_n" if r["segment"] else "n"] == 3000} \
        == set(seg) | {None}
    reads = []
    real = scopes_mod.Scope.read

    def counting(self, *args, **kwargs):
        reads.append(self.key)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(scopes_mod.Scope, "read", counting)
    del rows[:]
    mon.update_many([True, False, True], [0.9, 0.2, 0.7], segment=["s7"] * 3)
    mon.evaluate()
    assert reads == [None, "s7"]
    assert [(r["segment"], r["n"]) for r in rows] == [
        (None, 3003), ("s7", int((seg == "s7").sum()) + 3)]
    # a second evaluation at the same count writes nothing and reads nothing
    del reads[:], rows[:]
    mon.evaluate()
    assert reads == [] and rows == []


def test_snapshots_and_checkpoints_change_no_value():
    """A monitor whose state is saved (JSON and binary) and snapshotted after every batch
    writes exactly the rows and alerts of one never read; the buffered events are in
    the state (a restart from any of those states continues with the same rows).
    Unit weights: a weighted cumulative AUC read between two evaluations sums its
    deferred insertions in other slices, which may move its last bit."""
    y, s, _, seg = _stream(1500, seed=3)
    w = np.ones(len(y))

    def monitor():
        return Monitor(_metrics(), group_by="g", every=60, rules=["recall@50 < 0.7"])

    plain, read = monitor(), monitor()
    rows_p, alerts_p = _collect(plain)
    rows_r, alerts_r = _collect(read)
    restarts = []
    for a in range(0, 1500, 137):
        sl = slice(a, a + 137)
        plain.update_many(y[sl], s[sl], w[sl], segment=list(seg[sl]))
        read.update_many(y[sl], s[sl], w[sl], segment=list(seg[sl]))
        snap = read.snapshot()
        assert sum(e.get("pending", 0) for k, e in snap["segments"].items() if k) > 0
        assert all(e["n"] + e.get("pending", 0) == int((seg[:a + 137] == k).sum())
                   for k, e in snap["segments"].items() if k)
        state = read.to_state()
        read.to_array_state()
        restarts.append((a + 137, len(rows_r), len(alerts_r), json.loads(json.dumps(state))))
    plain.flush()
    read.flush()
    assert rows_p == rows_r and alerts_p == alerts_r and len(rows_p) > 40 and alerts_p
    for at, k_rows, k_alerts, state in restarts[::3]:
        mon = Monitor.from_state(state)
        rows, alerts = _collect(mon)
        for a in range(at, 1500, 137):
            sl = slice(a, a + 137)
            mon.update_many(y[sl], s[sl], w[sl], segment=list(seg[sl]))
        mon.flush()
        assert rows == rows_p[k_rows:] and alerts == alerts_p[k_alerts:], at


def test_a_restart_from_the_binary_state_keeps_the_buffers():
    y, s, w, seg = _stream(900, seed=4)
    t = np.arange(900, dtype=float) * 7.0
    direct = Monitor(_metrics(), group_by="g", every=80, every_seconds=2000)
    rows, _ = _collect(direct)
    direct.update_many(y[:500], s[:500], w[:500], t=t[:500], segment=list(seg[:500]))
    restored = Monitor.from_array_state(direct.to_array_state())
    assert [sc.pending for sc in restored.scopes()] == [sc.pending for sc in direct.scopes()]
    assert sum(sc.pending for sc in direct.scopes()) > 0
    cut = len(rows)
    rows2, _ = _collect(restored)
    for m in (direct, restored):
        m.update_many(y[500:], s[500:], w[500:], t=t[500:], segment=list(seg[500:]))
        m.flush()
    assert rows[cut:] == rows2
    assert restored.to_state() == direct.to_state()


def test_a_new_period_of_event_time_feeds_every_segment():
    """With every_seconds, each new period writes a row for every segment that counted
    events in the last one (whatever its own count), then the counts restart."""
    n = 600
    rng = np.random.default_rng(5)
    y, s = rng.random(n) < 0.5, rng.random(n)
    seg = rng.choice(["a", "b"], n, p=[0.8, 0.2]).astype(object)
    t = np.arange(n, dtype=float)
    mon = Monitor({"recall": se.Recall()}, group_by="g", every=100, every_seconds=150)
    rows, _ = _collect(mon)
    mon.update_many(y, s, t=t, segment=list(seg))
    mon.flush()
    # brute force: walk the events, a segment is due at its 100th event since its last
    # row; a new period (event 150, 300, 450) writes every segment with events since
    # (rows of one evaluation: segments in order of first appearance)
    first = list(dict.fromkeys(seg.tolist()))
    expected, since = [], {"a": 0, "b": 0}
    for i in range(n):
        if i and i % 150 == 0:
            expected += [(i, g) for g in first if since[g]]
            since = {"a": 0, "b": 0}
        since[seg[i]] += 1
        if since[seg[i]] == 100:
            expected.append((i + 1, seg[i]))
            since[seg[i]] = 0
    expected += [(n, g) for g in first if since[g]]
    assert [(r["stream_n"], r["segment"]) for r in rows if r["segment"]] == expected
    assert any(p % 150 == 0 and p < n for p, _ in expected)  # (period rows happened)
    assert any(p % 150 for p, _ in expected if p < n)  # (and own-cadence rows)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 300), every=st.sampled_from([1, 3, 25]),
       cuts=st.lists(st.integers(1, 299), max_size=5), snap_at=st.integers(0, 300))
def test_batches_events_and_restarts_agree(seed, n, every, cuts, snap_at):
    """The event path, any cut of batches, and a restart at any point write the same
    rows, bit for bit (the buffers fill and empty alike)."""
    rng = np.random.default_rng(seed)
    y, s = rng.random(n) < 0.5, np.round(rng.random(n), 2)
    w = rng.choice([1.0, 2.0, 0.5], n)
    seg = rng.choice(["a", "b", "c"], n).astype(object)

    def monitor():
        return Monitor({"auc": se.ROCAUC(), "recall@5": se.Sliding(se.Recall(), size=5)},
                       group_by="g", every=every, rules=["recall@5 < 0.3"])

    one, many = monitor(), monitor()
    rows1, alerts1 = _collect(one)
    for i in range(n):
        one.update(bool(y[i]), float(s[i]), float(w[i]), segment=seg[i])
        if i + 1 == snap_at:
            one = Monitor.from_state(json.loads(json.dumps(one.to_state())))
            one.on_metrics.append(rows1.append)
            one.on_alert.append(alerts1.append)
    one.flush()
    rows2, alerts2 = _collect(many)
    bounds = [0] + sorted(c for c in set(cuts) if c < n) + [n]
    for a, b in zip(bounds, bounds[1:]):
        many.update_many(y[a:b], s[a:b], w[a:b], segment=list(seg[a:b]))
    many.flush()
    assert rows1 == rows2 and alerts1 == alerts2


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), stash=st.sampled_from([1, 2, 3]),
       every=st.sampled_from([4, 9, 40]))
def test_stashed_events_of_every_layout_reach_their_segments_in_order(monkeypatch, seed,
                                                                       stash, every):
    """Many batches of different layouts (weights or none, predictions before their
    labels, the labels, complete events) over segments of very different traffic,
    whatever the number of batches the stash keeps before sorting them into the
    segments' buffers: the rows and alerts of a loop of single events, bit for bit (each
    segment's events taken from the stash in arrival order, once), and the state of a
    stash never sorted."""
    from streameval.metrics.estimated import PredictedPositiveRate
    from streameval.monitor import facade

    rng = np.random.default_rng(seed)
    ops = []
    for _ in range(30):
        m = int(rng.integers(1, 30))
        ops.append((rng.random(m) < 0.4, np.round(rng.random(m), 2),
                    rng.choice(["a", "b", "c", "d", "e"], m, p=[0.5, 0.3, 0.1, 0.07, 0.03]),
                    rng.choice([0.5, 1.0, 2.0], m) if rng.random() < 0.4 else None,
                    rng.choice(["events", "predictions", "labels"], p=[0.6, 0.2, 0.2])))

    def monitor():
        return Monitor({"auc": se.ROCAUC(), "recall": se.Recall(),
                        "recall@6": se.Sliding(se.Recall(), size=6),
                        "ppr": PredictedPositiveRate()},
                       group_by="g", every=every, rules=["recall@6 < 0.4"])

    def batches(mon):
        for y, sc, g, w, how in ops:
            if how == "predictions":
                mon.predict_many(sc, w, segment=list(g))
            else:
                mon.update_many(y, sc, w, segment=list(g), predicted=how == "labels")

    loop = monitor()
    want = _collect(loop)
    for y, sc, g, w, how in ops:
        for i in range(len(sc)):
            wi = 1.0 if w is None else float(w[i])
            if how == "predictions":
                loop.predict(float(sc[i]), wi, segment=g[i])
            else:
                loop.update(bool(y[i]), float(sc[i]), wi, segment=g[i],
                            predicted=how == "labels")
    monkeypatch.setattr(facade, "STASH_BATCHES", 10 ** 9)  # (never sorted)
    kept = monitor()
    batches(kept)
    monkeypatch.setattr(facade, "STASH_BATCHES", stash)
    batched = monitor()
    got = _collect(batched)
    batches(batched)
    assert got == want
    assert json.dumps(batched.to_state()) == json.dumps(kept.to_state())
    for mon in (batched, loop):
        mon.flush()
    assert got == want


def test_a_bad_buffer_in_a_state_is_refused_naming_it():
    mon = Monitor({"recall": se.Recall()}, group_by="g", every=10)
    mon.update_many([True, False], [0.9, 0.1], segment=["a", "a"])
    state = mon.to_state()
    seg = [x for x in state["data"]["segments"] if not x["overall"]][0]
    assert seg["evaluation"]["pending"]["s"] == [0.9, 0.1]
    seg["evaluation"]["pending"]["s"] = [0.9]
    with pytest.raises(ValueError, match="pending"):
        Monitor.from_state(state)


_EVENT = st.tuples(st.booleans(), st.sampled_from([0.1, 0.35, 0.5, 0.8, 0.95]),
                   st.sampled_from(["a", "b", "a", None]))
_OPS = st.lists(st.one_of(_EVENT.map(lambda e: [e]),  # one event: update
                          st.lists(_EVENT, min_size=2, max_size=12)),  # a batch
                min_size=1, max_size=30)


def _apply_op(mon, op, t0):
    y = [e[0] for e in op]
    s = [e[1] for e in op]
    g = [e[2] for e in op]
    t = [t0 + i for i in range(len(op))]
    if len(op) == 1:
        mon.update(y[0], s[0], t=t[0], segment=g[0])
    else:
        mon.update_many(y, s, t=t, segment=g)


@pytest.mark.filterwarnings("ignore:group_by field 'g' has no value")
@settings(max_examples=150, deadline=None)
@given(ops=_OPS, every=st.sampled_from([1, 2, 3, 5]), period=st.sampled_from([None, 17]),
       form=st.sampled_from(["json", "arrays"]), data=st.data())
def test_a_restore_at_any_point_continues_as_a_monitor_never_stopped(ops, every, period, form,
                                                                     data):
    """Single events and batches across segments (and events without one), a checkpoint
    and restore (JSON ``to_state`` or ``to_array_state``) between any two of them: the
    restored monitor, continued, writes the rows and alert transitions of a monitor
    that never stopped, bit for bit, and ends with the same snapshot (each segment's
    evaluation points, counted from its buffered events, fall where they would)."""
    from streameval.io.sinks import dumps
    from streameval.service.checks import snapshot_json

    def monitor():
        return Monitor({"auc": se.ROCAUC(), "recall": se.Recall(),
                        "recall@4": se.Sliding(se.Recall(), size=4)},
                       group_by="g", every=every, every_seconds=period,
                       rules=["recall@4 < 0.5"])

    starts = np.cumsum([0] + [len(op) for op in ops]).tolist()
    cut = data.draw(st.integers(0, len(ops)), label="cut")
    direct = monitor()
    rows1, alerts1 = _collect(direct)
    for op, t0 in zip(ops, starts):
        _apply_op(direct, op, t0)

    stopped = monitor()
    rows2, alerts2 = _collect(stopped)
    for op, t0 in zip(ops[:cut], starts):
        _apply_op(stopped, op, t0)
    if form == "json":
        resumed = Monitor.from_state(json.loads(json.dumps(stopped.to_state())))
    else:
        resumed = Monitor.from_array_state(stopped.to_array_state())
    resumed.on_metrics.append(rows2.append)
    resumed.on_alert.append(alerts2.append)
    for op, t0 in zip(ops[cut:], starts[cut:]):
        _apply_op(resumed, op, t0)

    assert rows2 == rows1 and alerts2 == alerts1
    assert dumps(snapshot_json(resumed.snapshot())) == dumps(snapshot_json(direct.snapshot()))
    direct.flush()
    resumed.flush()
    assert rows2 == rows1 and alerts2 == alerts1
