"""Alarm rules evaluated at the event where their detector detects a change.

The whole stream's change detectors that rules read take each slice of events first and
stop at their first new change; the Monitor evaluates there (a row and the alerts) and
goes on. The oracle is the detector fed alone, event by event: the alert opens at the
event of its change. Rows and alerts must not depend on how the events were batched,
nor on a stop and resume through a checkpoint.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import streameval as se
from streameval.sequential import SequentialDrift, update_until_change


def _drop_stream(n=24_000, at=12_000, seed=5, p=0.3, before=0.9, after=0.6):
    """Labels (30% positives) and scores whose recall falls from ``before`` to
    ``after`` at event ``at``; FPR 0.1 throughout."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < p
    rate = np.where(np.arange(n) < at, before, after)
    hit = rng.random(n) < np.where(y, rate, 0.1)
    s = np.where(hit, 0.5 + 0.5 * rng.random(n), 0.5 * rng.random(n))
    return y, s


def _run(y, s, batch, seg=None, **kw):
    mon = se.Monitor.default(**kw)
    rows, alerts = [], []
    mon.on_metrics.append(rows.append)
    mon.on_alert.append(alerts.append)
    if batch == 1:
        for i in range(len(y)):
            mon.update(bool(y[i]), float(s[i]), segment=None if seg is None else seg[i])
    else:
        for a in range(0, len(y), batch):
            mon.update_many(y[a:a + batch], s[a:a + batch],
                            segment=None if seg is None else seg[a:a + batch])
    mon.flush()
    return mon, rows, alerts


def _alone(y, s, metric):
    """The stream positions (1-based ``n``) where a lone default detector detects a
    change, fed one event at a time."""
    d = SequentialDrift(metric)
    return [i + 1 for i in range(len(y)) if d.update(bool(y[i]), float(s[i]))]


def test_the_alert_opens_at_the_event_the_detector_detected_the_drop():
    y, s = _drop_stream()
    changes = _alone(y, s, "recall")
    assert changes and 12_000 < changes[0] < 14_000
    _, rows, alerts = _run(y, s, 1000)
    firing = [a for a in alerts if a["rule"] == "recall alarm" and a["state"] == "firing"]
    assert firing, alerts
    first = firing[0]
    assert first["n"] in changes
    # emitted by an evaluation at that very event: a row of the whole stream there, and
    # the transition comes right after it (not at the next multiple of every)
    assert first["n"] % 1000 != 0
    assert any(r["n"] == first["n"] and r["segment"] is None for r in rows)


def test_rows_and_alerts_do_not_depend_on_the_batches():
    y, s = _drop_stream(n=12_000, at=6_000)
    _, rows1, alerts1 = _run(y, s, 1)
    assert alerts1
    for batch in (7, 100, 1000, 4096):
        _, rows, alerts = _run(y, s, batch)
        assert alerts == alerts1, batch
        assert rows == rows1, batch


def test_segments_and_the_whole_stream_with_rules_do_not_depend_on_the_batches():
    """group_by with the whole stream's rules on: the whole stream evaluates at its
    detections, the segments at their own points, the same for every batching."""
    y, s = _drop_stream(n=10_000, at=5_000, seed=11)
    seg = np.array(["a", "b", "c"])[np.random.default_rng(2).integers(0, 3, len(y))]
    seg = seg.tolist()
    out = [_run(y, s, b, seg, group_by="g", overall_rules=True)[1:] for b in (1, 7, 1000)]
    assert out[0] == out[1] == out[2]
    rows, alerts = out[0]
    whole = [a for a in alerts if a["segment"] is None and a["state"] == "firing"]
    assert whole and whole[0]["n"] in _alone(y, s, "recall") + _alone(y, s, "fpr") \
        + _alone(y, s, "precision")
    assert any(a["segment"] is not None for a in alerts)


def test_a_stop_and_resume_through_a_checkpoint_gives_the_same_output():
    y, s = _drop_stream(n=10_000, at=5_000)
    _, rows, alerts = _run(y, s, 500)
    change = _alone(y, s, "recall")[0]
    for cut in (change - 3, change):  # just before the detection, and at it
        for binary in (False, True):
            mon = se.Monitor.default()
            r1, a1 = [], []
            mon.on_metrics.append(r1.append)
            mon.on_alert.append(a1.append)
            mon.update_many(y[:cut], s[:cut])
            if binary:
                mon2 = se.Monitor.from_array_state(mon.to_array_state())
            else:
                mon2 = se.Monitor.from_state(json.loads(json.dumps(mon.to_state())))
            mon2.on_metrics.append(r1.append)
            mon2.on_alert.append(a1.append)
            for a in range(cut, len(y), 777):
                mon2.update_many(y[a:a + 777], s[a:a + 777])
            mon2.flush()
            assert a1 == alerts, (cut, binary)
            assert r1 == rows, (cut, binary)


def test_update_until_change_stops_every_detector_at_the_first_change():
    """Against each detector fed alone: the first change of any of them is where all
    stop, each in the state it had there (its later events then give the same
    changes), including AUC pairs and weights."""
    y, s = _drop_stream(n=20_000, at=9_000, seed=3)
    w = np.random.default_rng(4).choice([0.5, 1.0, 2.0], len(y))
    for weights in (None, w):
        names = ("precision", "recall", "roc_auc", "fpr")
        alone = []
        for name in names:
            d = SequentialDrift(name)
            d.update_trusted(y, s, weights)
            alone.append(d)
        together = [SequentialDrift(name) for name in names]
        a, hits = 0, []
        while a < len(y):
            k, hit = update_until_change(together, y[a:], s[a:],
                                         None if weights is None else weights[a:])
            a += k
            assert all(d.n == a for d in together)
            if hit:
                hits.append(a)
        first = sorted({c.index + 1 for d in alone for c in d.changes})
        assert len(first) >= 2 and hits == first
        for d, ref in zip(together, alone):
            assert json.dumps(d.to_state()) == json.dumps(ref.to_state())


@pytest.mark.parametrize("kw", [{"every_seconds": 300},
                                {"every_seconds": 300, "group_by": "g", "overall_rules": True}])
def test_evaluation_by_event_time_and_alarms_do_not_depend_on_the_batches(kw):
    """Periods of event time as evaluation points beside the counts (and segments): the
    detections add their evaluations, the same for every batching."""
    y, s = _drop_stream(n=7_000, at=4_000)
    t = 1.7e9 + np.cumsum(np.random.default_rng(1).exponential(1.0, len(y)))
    seg = np.array(["a", "b"])[np.random.default_rng(2).integers(0, 2, len(y))].tolist()
    g = "group_by" in kw

    def run(batch):
        mon = se.Monitor.default(**kw)
        rows, alerts = [], []
        mon.on_metrics.append(rows.append)
        mon.on_alert.append(alerts.append)
        if batch == 1:
            for i in range(len(y)):
                mon.update(bool(y[i]), float(s[i]), t=float(t[i]), segment=seg[i] if g else None)
        else:
            for a in range(0, len(y), batch):
                mon.update_many(y[a:a + batch], s[a:a + batch], t=t[a:a + batch],
                                segment=seg[a:a + batch] if g else None)
        mon.flush()
        return rows, alerts

    out = [run(b) for b in (1, 7, 1000)]
    assert out[0] == out[1] == out[2]
    whole = [a for a in out[0][1] if a["segment"] is None and a["state"] == "firing"]
    assert whole and whole[0]["n"] in _alone(y, s, "recall") + _alone(y, s, "fpr")
    assert any(r["n"] == whole[0]["n"] for r in out[0][0])


def test_by_event_time_alone_the_alert_waits_for_the_period():
    """every = 0 (periods of event time only, what the Spark engine replays): no
    evaluation at the detection; the alert carries the detection's n and is written by
    the period's evaluation."""
    y, s = _drop_stream(n=7_000, at=4_000)
    t = 1.7e9 + np.arange(len(y), dtype=float)
    mon = se.Monitor.default(every=0, every_seconds=500)
    rows, alerts = [], []
    mon.on_metrics.append(rows.append)
    mon.on_alert.append(alerts.append)
    mon.update_many(y, s, t=t)
    mon.flush()
    change = _alone(y, s, "recall")[0]
    (a,) = [a for a in alerts if a["state"] == "firing"]
    assert a["n"] == change and a["evaluated_n"] == -(-change // 500) * 500
    assert {r["n"] for r in rows} == set(range(500, 7_001, 500))
