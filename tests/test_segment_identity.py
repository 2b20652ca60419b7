"""Every place that writes per-segment entries keeps every segment: segments whose values
print alike (``1`` and ``"1"``, the whole stream and ``"null"`` or ``""``, a segment of
several fields and the string of its JSON, ``("a|b", "c")`` and ``("a", "b|c")``) stay
entries of their own, each with its own counts. The oracle is the number of events sent
to each segment, counted by hand.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict

import pytest

import streameval as se
from streameval.io.alertmanager import AlertmanagerSink, alert_for
from streameval.io.sinks import dumps, segment_id
from streameval.replay import replay
from streameval.report import final_values, report_data
from streameval.service.checks import segments_by_key, snapshot_json
from streameval.service.ui import Timeline

# (a segment of several fields with a None part: the monitor warns of the missing field)
pytestmark = pytest.mark.filterwarnings("ignore:group_by field")

#: segment value -> events sent to it (single group_by field)
SENT = {1: 6, "1": 4, "null": 3, "": 2, "true": 1}
#: several group_by fields: two pairs whose plain texts are alike
SENT_PAIRS = {("a|b", "c"): 5, ("a", "b|c"): 3, (None, "x"): 2, ("", "x"): 4}


def monitor_of(sent, group_by):
    mon = se.Monitor({"acc": se.Accuracy()}, group_by=group_by, every=1)
    for seg, k in sent.items():
        for i in range(k):
            mon.update(i % 2 == 0, 0.9, segment=seg)
    return mon


def test_segment_ids_are_distinct_and_a_tuple_is_its_list():
    values = [None, "null", 1, "1", True, "true", 1.5, "", ("a", None), '["a",null]',
              ("a|b", "c"), ("a", "b|c")]
    ids = [segment_id(v) for v in values]
    assert len(set(ids)) == len(values)
    assert segment_id(["a", None]) == segment_id(("a", None)) == '["a",null]'
    assert [json.loads(i) for i in ids[:4]] == [None, "null", 1, "1"]


def test_dumps_refuses_keys_that_would_write_as_one_instead_of_dropping_one():
    snap = monitor_of(SENT, "g").snapshot()
    assert {k: e["n"] for k, e in snap["segments"].items()} == {None: 16, **SENT}
    with pytest.raises(ValueError, match="both write as JSON key"):
        dumps(snap)
    assert json.loads(dumps({None: 1, 2: 3})) == {"null": 1, "2": 3}  # no collision: kept


@pytest.mark.parametrize("sent,group_by", [(SENT, "g"), (SENT_PAIRS, ["f1", "f2"])])
def test_the_served_snapshot_keeps_every_segment(sent, group_by):
    snap = monitor_of(sent, group_by).snapshot()
    served = json.loads(dumps(snapshot_json(snap)))
    got = [(e["segment"], e["n"]) for e in served["segments"]]
    want = [(None, sum(sent.values()))] + [
        (list(k) if isinstance(k, tuple) else k, n) for k, n in sent.items()]
    assert got == want
    assert {k: e["n"] for k, e in segments_by_key(served["segments"]).items()} == {
        None: sum(sent.values()), **sent}


class _Engine:  # what the collector reads: a function of the monitor and counters
    def __init__(self, monitor):
        self.monitor = monitor

    def read(self, fn):
        return fn(self.monitor, defaultdict(int))


def _series(monitor, family):
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from streameval.service.exposition import MonitorCollector

    reg = CollectorRegistry()
    reg.register(MonitorCollector(_Engine(monitor)))
    out = []
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            if s.name == family:
                out.append((s.labels, s.value))
    return out


@pytest.mark.parametrize("sent,group_by", [(SENT, "g"), (SENT_PAIRS, ["f1", "f2"])])
def test_prometheus_gives_every_segment_a_series_of_its_own(sent, group_by):
    pytest.importorskip("prometheus_client")
    from streameval.service.exposition import segment_label

    mon = monitor_of(sent, group_by)
    events = _series(mon, "streameval_segment_events")
    labels = [lab["segment"] for lab, _ in events]
    assert len(set(labels)) == len(labels) == len(sent) + 1
    assert sorted(v for _, v in events) == sorted([sum(sent.values()), *sent.values()])
    # the first of each look-alike group keeps its plain label; a later one gets a suffix
    by_label = dict((lab["segment"], v) for lab, v in events)
    first = {}
    for seg, k in [(None, sum(sent.values())), *sent.items()]:
        first.setdefault(segment_label(seg), k)
    for plain, k in first.items():
        assert by_label[plain] == k
    values = _series(mon, "streameval_metric")
    assert len({lab["segment"] for lab, _ in values}) == len(sent) + 1


def test_prometheus_active_alerts_carry_their_own_segment_label():
    pytest.importorskip("prometheus_client")
    mon = se.Monitor({"acc": se.Accuracy()}, rules=["acc < 0.5"], group_by="g", every=1)
    for seg in (1, "1"):
        for _ in range(3):
            mon.update(True, 0.1, segment=seg)  # wrong: accuracy 0
    labels = {lab["segment"] for lab, _ in _series(mon, "streameval_segment_events")}
    active = [lab["segment"] for lab, _ in _series(mon, "streameval_alert_active")]
    assert len(active) == 3 and len(set(active)) == 3  # the whole stream, 1 and "1"
    assert set(active) == labels


def test_alertmanager_keeps_segments_apart_in_labels_and_while_firing():
    def tr(state, seg):
        return {"rule": "acc < 0.5", "state": state, "n": 10, "t": None, "value": 0.1,
                "segment": seg}

    segs = [None, "", 3, "3", ("a|b", "c"), ("a", "b|c"), "fr"]
    label_sets = [json.dumps(alert_for(tr("firing", s), now=0.0)["labels"], sort_keys=True)
                  for s in segs]
    assert len(set(label_sets)) == len(segs)
    assert alert_for(tr("firing", "fr"), now=0.0)["labels"]["segment"] == "fr"
    assert "segment" not in alert_for(tr("firing", None), now=0.0)["labels"]
    # a sink whose Alertmanager is down still tracks what fires: both segments
    sink = AlertmanagerSink("http://127.0.0.1:9", retries=0, timeout=0.2,
                            resend_interval=3600)
    try:
        sink.write(tr("firing", 3))
        sink.write(tr("firing", "3"))
        assert sink.firing == [("acc < 0.5", 3), ("acc < 0.5", "3")]
        sink.write(tr("resolved", "3"))
        assert sink.firing == [("acc < 0.5", 3)]
    finally:
        sink.close()


ROWS_SEGS = [None, 1, "1", "null", ["a", "b"], '["a", "b"]']


def _rows():
    rows = []
    for j, seg in enumerate(ROWS_SEGS):
        for i in range(j + 1):
            rows.append({"n": 10 * (j + 1) + i, "t": None, "segment": seg,
                         "values": {"acc": j / 10}})
    return rows


def test_report_final_values_and_page_keep_every_segment():
    finals = final_values(_rows())
    assert len(finals) == len(ROWS_SEGS)
    # each segment's last row: n = 10 (j + 1) + j, value j / 10
    got = sorted((f["n"], f["values"]["acc"]) for f in finals.values())
    assert got == [(10 * (j + 1) + j, j / 10) for j in range(len(ROWS_SEGS))]
    assert ("a", "b") in finals and '["a", "b"]' in finals
    data = report_data(_rows())
    entries = data["segments"]
    assert len(entries) == len(ROWS_SEGS)
    assert len({e["label"] for e in entries}) == len(ROWS_SEGS)
    assert sorted(e["n"] for e in entries) == [10 * (j + 1) + j for j in range(len(ROWS_SEGS))]


def test_the_live_page_thins_each_segment_apart():
    rng = random.Random(1)
    tl = Timeline(max_rows=8)
    segs = [["a", "b"], "['a', 'b']"]  # (a list, and the text Python prints for it)
    last = {}
    for n in range(1, 60):
        seg = rng.choice(segs)
        tl.add_row({"n": n, "t": None, "segment": seg, "values": {"acc": rng.random()}})
        last[json.dumps(seg)] = n
    kept = {json.dumps(r["segment"]): r["n"] for r in tl.rows()}  # (the last one kept)
    assert kept == last


def _final_of_replay(tmp_path, rows, group_by):
    """``[(segment, n)]`` of the ``final`` entries of a replay's ``summary.json``."""
    log = tmp_path / "events.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = tmp_path / "monitor.toml"
    cfg.write_text(f'[monitor]\nevery = 5\ngroup_by = {json.dumps(group_by)}\n'
                   '[monitor.metrics]\naccuracy = "accuracy"\n')
    replay(log, tmp_path / "out", config=cfg, report=False)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    return [(f["segment"], f["n"]) for f in summary["final"]]


def test_replay_summary_keeps_every_segment(tmp_path):
    sent = {1: 30, "1": 20, "null": 10}
    segs = [seg for seg, k in sent.items() for _ in range(k)]
    rows = [{"ts": i, "label": i % 3 == 0, "score": (i % 7) / 7, "seg": seg}
            for i, seg in enumerate(segs)]
    assert _final_of_replay(tmp_path, rows, "seg") == [
        (None, 60), (1, 30), ("1", 20), ("null", 10)]


def test_replay_summary_writes_a_segment_of_several_fields_as_its_list(tmp_path):
    rows = [{"ts": i, "label": i % 2 == 0, "score": (i % 5) / 5, "a": "x", "b": i % 2}
            for i in range(40)]
    assert _final_of_replay(tmp_path, rows, ["a", "b"]) == [
        (None, 40), (["x", 0], 20), (["x", 1], 20)]
