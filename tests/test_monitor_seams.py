"""The Monitor's public seams: admit -> apply, refused, the evaluator, scopes, and no
private access from outside its package.

Oracles: a loop of ``Monitor.update`` (the per-event path, checked against scikit-learn
in tests/test_monitor.py), scikit-learn itself, and hand-written expectations of which
rows a monitor refuses and why.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import streameval as se
from streameval.alerts import Threshold
from streameval.events import Batch, EventBatch, events_to_batch, segment_codes
from streameval.monitor import (
    Admitted,
    Evaluator,
    Monitor,
    Scope,
    evaluation_points,
)
from streameval.validation import ValidationError

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "streameval" / "monitor"
T0 = 1_700_000_000.0


def _monitor(**kw):
    kw.setdefault("every", 50)
    return Monitor({"auc": se.ROCAUC(), "recall": se.Recall(), "ll": se.LogLoss(),
                    "auc@100": se.Sliding(se.ROCAUC(), size=100),
                    "recall@60s": se.Sliding(se.Recall(), period=60.0)},
                   rules=[Threshold("recall@60s", "<", 0.7, min_samples=20)], **kw)


def _events(n, seed, segments=("fr", "de", None)):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = np.clip(rng.normal(0.45 + 0.2 * y, 0.2), 0.0, 1.0)
    out = []
    for i in range(n):
        e = {"ts": T0 + 3.0 * i, "label": int(y[i]), "score": float(s[i]),
             "weight": float(1 + i % 3)}
        seg = segments[i % len(segments)]
        if seg is not None:
            e["segment"] = seg
        out.append(e)
    return out


def _run(events, feed, **kw):
    mon = _monitor(**kw)
    rows, alerts = [], []
    mon.on_metrics.append(rows.append)
    mon.on_alert.append(alerts.append)
    feed(mon, events)
    mon.flush()
    return mon, rows, alerts


def _loop(mon, events):
    for e in events:
        mon.update(bool(e["label"]), e["score"], e["weight"], e["ts"], e.get("segment"))


def _fields():
    from streameval.events import FieldMap

    return FieldMap(segment="segment")


# ------------------------------------------------------------------ admit -> apply


@pytest.mark.parametrize("chunk", [1, 37, 400, 2000])
def test_apply_of_admit_equals_a_loop_of_update(chunk):
    events = _events(1200, seed=chunk)

    def batched(mon, evs):
        for a in range(0, len(evs), chunk):
            mon.apply(mon.admit(events_to_batch(evs[a:a + chunk], _fields())))

    def columns(mon, evs):
        for a in range(0, len(evs), chunk):
            part = evs[a:a + chunk]
            mon.update_many([e["label"] for e in part], [e["score"] for e in part],
                            [e["weight"] for e in part], [e["ts"] for e in part],
                            [e.get("segment") for e in part])

    loop, rows0, alerts0 = _run(events, _loop, group_by="segment")
    got, rows1, alerts1 = _run(events, batched, group_by="segment")
    cols, rows2, alerts2 = _run(events, columns, group_by="segment")
    assert rows1 == rows0 == rows2 and alerts1 == alerts0 == alerts2
    assert loop.n == got.n == 1200 and loop.segments == got.segments == ["fr", "de"]
    # the batch path's state (its windows keep batches as chunks) is update_many's
    assert json.dumps(got.to_state()) == json.dumps(cols.to_state())
    # and the oracle: scikit-learn on the whole stream and on one segment
    y = np.array([e["label"] for e in events])
    s = np.array([e["score"] for e in events])
    w = np.array([e["weight"] for e in events])
    assert got.segment_metrics()["auc"].get() == pytest.approx(
        roc_auc_score(y, s, sample_weight=w), abs=1e-12)
    fr = np.array([e.get("segment") == "fr" for e in events])
    assert got.segment_metrics("fr")["auc"].get() == pytest.approx(
        roc_auc_score(y[fr], s[fr], sample_weight=w[fr]), abs=1e-12)


def test_update_many_is_apply_of_admitted_columns_and_check_many_counts_nothing():
    events = _events(500, seed=3)
    y = np.array([e["label"] for e in events])
    s = np.array([e["score"] for e in events])
    t = np.array([e["ts"] for e in events])
    seg = [e.get("segment") for e in events]
    a, _, _ = _run(events, lambda m, _: m.update_many(y, s, None, t, seg), group_by="segment")
    b = _monitor(group_by="segment")
    b.check_many(y, s, None, t, seg)
    assert b.n == 0 and b.segments == []
    b.apply(b.admit(Batch(y.astype(bool), s, t, None, np.arange(1, 501), segment=seg)))
    b.flush()
    assert json.dumps(b.to_state()) == json.dumps(a.to_state())


def test_an_admitted_batch_applies_on_a_later_state_and_concatenates():
    """The service admits a batch when it arrives and applies it once durable, maybe
    grouped with others: the segment cap is applied then, on the state of that time."""
    events = _events(300, seed=5, segments=("a", "b", "c", "d"))
    parts = [events[:100], events[100:200], events[200:]]
    loop, rows0, _ = _run(events, _loop, group_by="segment", max_segments=2)
    mon = _monitor(group_by="segment", max_segments=2)
    rows = []
    mon.on_metrics.append(rows.append)
    admitted = [mon.admit(events_to_batch(p, _fields())) for p in parts]  # before any apply
    with pytest.warns(RuntimeWarning, match="max_segments"):
        mon.apply(admitted[0])
        mon.apply(Admitted.concat(admitted[1:]))
    mon.flush()
    assert rows == rows0
    assert mon.other_events == loop.other_events == 150
    assert mon.segments == loop.segments == ["a", "b", "__other__"]
    # the state is that of update_many fed the same two batches
    cols = _monitor(group_by="segment", max_segments=2)
    with pytest.warns(RuntimeWarning, match="max_segments"):
        for part in (events[:100], events[100:]):
            cols.update_many([e["label"] for e in part], [e["score"] for e in part],
                             [e["weight"] for e in part], [e["ts"] for e in part],
                             [e["segment"] for e in part])
    cols.flush()
    assert json.dumps(mon.to_state()) == json.dumps(cols.to_state())


def test_admitted_concat_renumbers_keys_and_fills_weights_and_times():
    a = Admitted(np.array([True, False]), np.array([0.1, 0.2]), None, np.array([1.0, 2.0]),
                 np.array([0, 1]), ("x", "y"))
    b = Admitted(np.array([True]), np.array([0.3]), np.array([2.0]), None,
                 np.array([0]), ("y",))
    c = Admitted.concat([a, b])
    assert c.keys == ("x", "y") and c.codes.tolist() == [0, 1, 1]
    assert c.weight.tolist() == [1.0, 1.0, 2.0]
    assert c.time[:2].tolist() == [1.0, 2.0] and math.isnan(c.time[2])
    with pytest.raises(AttributeError):
        c.score = None


def test_apply_takes_only_what_admit_returns():
    mon = _monitor()
    with pytest.raises(TypeError, match="admit"):
        mon.apply(events_to_batch(_events(3, seed=1, segments=(None,))))


def test_admit_runs_only_the_monitors_checks_and_names_the_first_refused_event():
    mon = _monitor(group_by="segment", max_segments=5)
    good = _events(6, seed=2)
    batch = events_to_batch(good, _fields())
    # a probability out of range (the log loss needs [0, 1]) at index 4
    bad = dataclasses.replace(batch, score=np.where(np.arange(6) == 4, 1.5, batch.score))
    with pytest.raises(ValidationError, match=r"y_pred\[4\] = 1.5: probability must be in "
                       r"\[0, 1\] \(metric 'll' needs probabilities\)") as e:
        mon.admit(bad)
    assert e.value.index == 4
    # an unknown event time, where a window by period needs one, at index 2
    ts = batch.ts.copy()
    ts[2] = math.nan
    with pytest.raises(ValidationError, match=r"this monitor needs event times") as e:
        mon.admit(dataclasses.replace(batch, ts=ts))
    assert e.value.index == 2
    # the reserved segment at index 1
    seg = list(batch.segment)
    seg[1] = "__other__"
    with pytest.raises(ValidationError, match=r"segment\[1\] = '__other__': '__other__' is "
                       "reserved") as e:
        mon.admit(dataclasses.replace(batch, segment=seg))
    assert e.value.index == 1
    assert mon.n == 0 and mon.segments == []


def test_refused_lists_every_refused_row_with_its_first_reason():
    mon = _monitor(group_by="segment", max_segments=5)
    batch = events_to_batch(_events(10, seed=4), _fields())
    score = batch.score.copy()
    score[[1, 7]] = [1.5, -0.25]
    ts = batch.ts.copy()
    ts[[3, 7]] = math.nan          # row 7: a bad score first, so that is its reason
    seg = list(batch.segment)
    seg[5] = "__other__"
    seg[8] = "__other__"
    bad = dataclasses.replace(batch, score=score, ts=ts, segment=seg)
    got = [(j, e.name, e.index) for j, e in mon.refused(bad)]
    assert got == [(1, "y_pred", 1), (3, "t", 3), (5, "segment", 5), (7, "y_pred", 7),
                   (8, "segment", 8)]
    reasons = dict(mon.refused(bad))
    assert str(reasons[7]) == ("y_pred[7] = -0.25: probability must be in [0, 1] "
                               "(metric 'll' needs probabilities)")
    assert str(reasons[8]).startswith("segment[8] = '__other__': '__other__' is reserved")
    # each error is the one admit() raises for that row alone
    for j, err in mon.refused(bad):
        with pytest.raises(ValidationError) as e:
            mon.admit(bad.select(np.arange(10) == j))
        assert e.value.name == err.name
        assert str(e.value).split(" = ", 1)[1] == str(err).split(" = ", 1)[1]
    # the other rows are admitted together
    keep = np.ones(10, bool)
    keep[[1, 3, 5, 7, 8]] = False
    assert len(mon.admit(bad.select(keep))) == 5
    assert mon.refused(batch) == []


def test_refused_finds_rows_a_metric_check_refuses_one_by_one():
    """A weighted log loss that would overflow (weights past what a source admits, in a
    batch built by hand): check_columns refuses, refused() names each such row."""
    mon = Monitor({"ll": se.LogLoss(), "auc": se.ROCAUC()}, every=0)
    n = 8
    w = np.ones(n)
    w[[2, 5]] = 1e307
    s = np.full(n, 0.5)
    s[[2, 5]] = 1e-300  # a loss over 30 (clipped): times 1e307 overflows
    b = Batch(np.ones(n, bool), s, np.arange(n, dtype=float), w, np.arange(1, n + 1))
    with pytest.raises(ValidationError) as e:
        mon.admit(b)
    assert e.value.index == 2
    got = mon.refused(b)
    assert [j for j, _ in got] == [2, 5]
    assert [err.index for _, err in got] == [2, 5]
    keep = np.ones(n, bool)
    keep[[2, 5]] = False
    mon.apply(mon.admit(b.select(keep)))
    assert mon.n == 6 and mon.segment_metrics()["ll"].get() == pytest.approx(math.log(2))


# ------------------------------------------------------------------ evaluator


def test_evaluation_points_equal_a_loop_of_update():
    rng = np.random.default_rng(9)
    for _ in range(50):
        every = int(rng.integers(0, 7))
        E = None if rng.random() < 0.3 else float(rng.integers(1, 9))
        if not every and E is None:
            every = 3
        n0 = int(rng.integers(0, 20))
        t0 = None if rng.random() < 0.3 else float(rng.integers(0, 30))
        m = int(rng.integers(1, 40))
        times = np.sort(rng.integers(0, 60, m)).astype(float) if E is not None else None
        if times is not None and rng.random() < 0.5:
            times = rng.permutation(times)
        # brute force: the event path's rule, event by event
        want, n, t = [], n0, t0
        for i in range(m):
            ti = None if times is None else times[i]
            if E is not None and t is not None and ti // E > t // E:
                want.append(i)
            n += 1
            if ti is not None and (t is None or ti > t):
                t = ti
            if every and n % every == 0:
                want.append(i + 1)
        assert evaluation_points(n0, t0, times, m, every, E) == sorted(set(want))


def test_evaluator_writes_rows_then_transitions_for_given_scopes():
    sinks_rows, sinks_alerts = [], []
    ev = Evaluator([sinks_rows.append], [sinks_alerts.append], late=["recall@60s"])
    mon = _monitor(group_by="segment")
    scopes = [mon.new_scope(None), mon.new_scope("fr")]
    y = np.array([True, True, True, False])
    s = np.array([0.9, 0.2, 0.3, 0.1])
    t = T0 + np.arange(4.0)
    for sc in scopes:
        sc.update_many(y, s, None, t, lambda v: v)
    scopes[1].n = 4
    rule = scopes[1].rules[0]
    rule.min_samples = 1
    ev.evaluate(scopes, n=10, t=float(t[-1]))
    assert [r["segment"] for r in sinks_rows] == [None, "fr"]
    assert sinks_rows[0]["n"] == 10 and sinks_rows[1]["n"] == 4
    assert sinks_rows[1]["stream_n"] == 10
    assert sinks_rows[0]["values"]["recall"] == pytest.approx(1 / 3)
    assert sinks_rows[0]["values"]["auc"] == pytest.approx(roc_auc_score(y, s))
    assert sinks_rows[0]["late"] == {"recall@60s": 0}
    assert [(a["rule"], a["state"], a["segment"], a["n"]) for a in sinks_alerts] == [
        ("recall@60s < 0.7", "firing", "fr", 10)]


def test_the_monitor_evaluates_through_its_evaluator():
    mon = _monitor()
    assert mon.on_metrics is mon.evaluator.on_metrics
    rows = []
    mon.on_metrics = [rows.append]   # a new list of sinks is the evaluator's too
    mon.update_many([1, 0] * 30, [0.8, 0.3] * 30, t=T0 + np.arange(60.0))
    assert [r["n"] for r in rows] == [50]


def test_a_read_only_scope_takes_values_from_its_owner():
    """Spark's replay merges partition states into a scope's objects; a read-only
    scope (feed=False) only reads them, with ``get`` alone."""

    class Value:
        def __init__(self, v):
            self.v = v

        def get(self):
            return self.v

    sc = Scope("x", "x", {"a": Value(0.25), "b": Value(math.nan)}, {}, [], share=False,
               feed=False)
    assert sc.values({}) == {"a": 0.25, "b": None}


def test_segment_codes_of_a_batch():
    codes, distinct = segment_codes(["a", None, "b", "a", ("x", 1), ("x", 1), None])
    assert codes.tolist() == [0, 1, 2, 0, 3, 3, 1]
    assert distinct == ["a", None, "b", ("x", 1)]
    c1, d1 = segment_codes([1, True, 1.0, 2])  # equal values share the first's code
    assert c1.tolist() == [0, 0, 0, 1] and d1 == [1, 2] and type(d1[0]) is int
    c2, d2 = segment_codes([["u"], "v", ["u"], "v"])  # unhashable: one code each
    assert c2.tolist() == [0, 1, 2, 1] and d2 == [["u"], "v", ["u"]]
    b = events_to_batch([{"label": 1, "score": 0.5, "ts": 1, "segment": "q"}],
                        _fields())
    assert b.segment_codes()[1] == ["q"]
    assert EventBatch is Batch
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.score = np.zeros(1)


# ------------------------------------------------------------------ private access


def _monitor_private_names():
    """Private attribute and method names of the Monitor's package's classes."""
    names = set()
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
            for node in ast.walk(cls):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                        node.name.startswith("_") and not node.name.startswith("__"):
                    names.add(node.name)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                        and node.value.id in ("self", "mon", "seg", "cls") \
                        and isinstance(node.ctx, ast.Store) and node.attr.startswith("_") \
                        and not node.attr.startswith("__"):
                    names.add(node.attr)
                if isinstance(node, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
                    for elt in getattr(node.value, "elts", ()):
                        if isinstance(elt, ast.Constant) and str(elt.value).startswith("_"):
                            names.add(elt.value)
    return names


#: names a registered class of any kind has (the registry reads them on every class)
_SHARED_CONVENTIONS = {"_public_name", "_state_version", "_from_state", "_params"}
#: the public API of named tuples (``Capabilities._fields``): a Monitor's private name
#: of the same spelling is flagged only on a Monitor-like receiver
_NAMEDTUPLE_API = {"_fields", "_replace", "_asdict", "_make", "_field_defaults"}
#: receivers that hold a Monitor or one of its scopes where the name alone is ambiguous
_MONITORISH = {"monitor", "mon", "probe", "seg", "segment", "scope", "sc", "back",
               "loop", "got", "self.monitor", "pipeline.monitor", "p.monitor", "eng.monitor"}


def _other_private_names(monitor_names):
    """The private names that classes outside the Monitor's package define too (a
    metric's ``_pos_set``): for those, only a Monitor-like receiver is flagged."""
    out = set()
    for path in (ROOT / "streameval").rglob("*.py"):
        if PACKAGE in path.parents:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.name in monitor_names:
                out.add(node.name)
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and node.attr in monitor_names and isinstance(node.value, ast.Name) \
                    and node.value.id == "self":
                out.add(node.attr)
    return out


def _receiver(node):
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover
        return ""


def private_uses(source, monitor_names, ambiguous):
    """``[(line, text)]``: reads, writes and calls of a Monitor's or a scope's private
    name in ``source`` (not on ``self``/``cls``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or node.attr not in monitor_names:
            continue
        recv = _receiver(node.value)
        if recv in ("self", "cls") or recv.startswith("super("):
            continue
        if node.attr in ambiguous and recv.split(".")[-1] not in _MONITORISH \
                and recv not in _MONITORISH:
            continue
        found.append((node.lineno, node.col_offset, f"{recv}.{node.attr}"))
    return [(line, what) for line, _, what in sorted(found)]


def _scan_setup():
    names = _monitor_private_names() - _SHARED_CONVENTIONS
    return names, _other_private_names(names) | (_NAMEDTUPLE_API & names)


def test_the_scanner_knows_the_monitors_private_names_and_catches_their_use():
    names, ambiguous = _scan_setup()
    assert {"_evaluate", "_segments", "_overall", "_new_segment", "_intake", "_bind",
            "_feed_segment", "_last_eval_n"} <= names
    snippet = (
        "monitor._evaluate()\n"
        "monitor.n = 3\n"                       # public: not flagged
        "seg = monitor._new_segment('x')\n"
        "mon._segments = {}\n"
        "x = pipeline.monitor._overall.metrics\n"
        "self._evaluate()\n"                    # its own: not flagged
        "scope._bind()\n"
    )
    got = [what for _, what in private_uses(snippet, names, ambiguous)]
    assert got == ["monitor._evaluate", "monitor._new_segment", "mon._segments",
                   "pipeline.monitor._overall", "scope._bind"]


def test_nothing_outside_the_monitor_package_touches_its_private_names():
    names, ambiguous = _scan_setup()
    bad = []
    here = Path(__file__).resolve()
    for top in ("streameval", "tests"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if PACKAGE in path.parents or path.resolve() == here:
                continue
            for line, what in private_uses(path.read_text(), names, ambiguous):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not bad, "\n".join(bad)


def test_a_batch_built_by_hand_cannot_break_a_metric():
    """The source's rules are not checked again, but a score that is not finite or a
    weight out of range (a Batch built by hand) is refused by one vectorised pass, with
    the message update_many gives."""
    mon = Monitor({"auc": se.ROCAUC()}, every=0)
    s = np.array([0.1, math.nan, 0.3, 0.4])
    w = np.array([1.0, 1.0, -2.0, 1e13])
    b = Batch(np.array([True, False, True, False]), s, np.zeros(4), w, np.arange(1, 5))
    with pytest.raises(ValidationError, match=r"y_pred\[1\] = nan: score must be a finite"):
        mon.admit(b)
    got = [(j, str(e)) for j, e in mon.refused(b)]
    assert [j for j, _ in got] == [1, 2, 3]
    with pytest.raises(ValidationError) as e:
        mon.update_many([True], [0.4], [1e13])
    assert got[2][1] == str(e.value).replace("w[0]", "w[3]")
    assert mon.n == 0
