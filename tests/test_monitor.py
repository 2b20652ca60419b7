"""The Monitor: rows at evaluation points, segments, batch path, alerts, state, validation.

Oracles: scikit-learn on the events seen so far at each evaluation point (and on each
segment's events, and on the last N events / last P seconds for windows); evaluation
points recomputed from their definition (multiples of `every`, a new period of event
time); alert transitions recomputed by feeding those sklearn values to a fresh rule
(rules are tested on their own in test_alerts.py); the per-event path for the batch path.
"""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.metrics import (
    accuracy_score, average_precision_score, f1_score, log_loss, precision_score,
    recall_score, roc_auc_score,
)

import streameval as se
from streameval.alerts import Drop, Threshold
from streameval.monitor import Monitor

TOL = 1e-12


# ----------------------------------------------------------------------- helpers


def _stream(n, seed=0, weights=False, segments=None, dt=None):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    s = np.clip(np.round(rng.normal(0.35 + 0.3 * y, 0.2), 2), 0.01, 0.99)   # ties
    w = np.round(rng.uniform(0.5, 2.0, n), 1) if weights else None
    seg = rng.choice(segments, n) if segments else None
    t = None
    if dt is not None:
        t = 1_700_000_000.0 + np.cumsum(rng.integers(0, dt + 1, n)).astype(float)
    return y, s, w, t, seg


def _collect(mon):
    rows, alerts = [], []
    mon.on_metrics.append(rows.append)
    mon.on_alert.append(alerts.append)
    return rows, alerts


def _per_event(mon, y, s, w=None, t=None, seg=None, flush=True):
    for i in range(len(y)):
        mon.update(bool(y[i]), float(s[i]), 1.0 if w is None else float(w[i]),
                   t=None if t is None else float(t[i]),
                   segment=None if seg is None else seg[i])
    if flush:
        mon.flush()


def _batches(mon, y, s, w=None, t=None, seg=None, cuts=(), flush=True):
    bounds = [0] + sorted(c for c in set(cuts) if 0 < c < len(y)) + [len(y)]
    for a, b in zip(bounds, bounds[1:]):
        mon.update_many(y[a:b], s[a:b], None if w is None else w[a:b],
                        t=None if t is None else t[a:b],
                        segment=None if seg is None else list(seg[a:b]))
    if flush:
        mon.flush()


def _sk(fn, y, s, w, **kw):
    """sklearn's value, NaN where our definition is undefined (one class only)."""
    if fn in (roc_auc_score, average_precision_score) and len(set(y.tolist())) < 2:
        return math.nan
    return fn(y, s, sample_weight=w, **kw)


def _expected_values(y, s, w, threshold=0.5):
    p = s >= threshold
    out = {
        "auc": _sk(roc_auc_score, y, s, w),
        "ap": _sk(average_precision_score, y, s, w),
        "acc": accuracy_score(y, p, sample_weight=w),
        "ll": log_loss(y, s, sample_weight=w, labels=[False, True]),
    }
    out["precision"] = precision_score(y, p, sample_weight=w, zero_division=np.nan)
    out["recall"] = recall_score(y, p, sample_weight=w, zero_division=np.nan)
    out["f1"] = f1_score(y, p, sample_weight=w, zero_division=np.nan)
    return out


def _assert_close(got, expected, where):
    for name, e in expected.items():
        g = got[name]
        if isinstance(e, float) and math.isnan(e):
            assert g is None, (where, name, g)
        else:
            assert g is not None and abs(g - e) <= TOL, (where, name, g, e)


def _metrics(window=None):
    m = {"auc": se.ROCAUC(), "ap": se.AveragePrecision(), "precision": se.Precision(),
         "recall": se.Recall(), "f1": se.F1(), "acc": se.Accuracy(), "ll": se.LogLoss()}
    if window:
        m.update({f"{k}@w": se.Sliding(v.clone(), size=window) for k, v in list(m.items())})
    return m


def _same_rows(a, b):
    assert len(a) == len(b)
    for r1, r2 in zip(a, b):
        assert (r1["n"], r1["t"], r1["segment"]) == (r2["n"], r2["t"], r2["segment"])
        assert r1["values"].keys() == r2["values"].keys()
        for k, v1 in r1["values"].items():
            v2 = r2["values"][k]
            assert (v1 is None) == (v2 is None), (k, v1, v2)
            if v1 is not None:
                assert abs(v1 - v2) <= TOL, (r1["n"], k, v1, v2)


#: the keys every alert transition had before the explanation's fields
CORE = ("rule", "state", "n", "t", "value", "segment")


def _core(alerts):
    return [{k: a[k] for k in CORE if k in a} for a in alerts]


def _close(u, v):
    """Equal, floats (and lists of them) within TOL."""
    if isinstance(u, float) or isinstance(v, float):
        return u is not None and v is not None and abs(u - v) <= TOL
    if isinstance(u, list) and isinstance(v, list):
        return len(u) == len(v) and all(_close(p, q) for p, q in zip(u, v))
    return u == v


def _same_alerts(a, b):
    # the explanation's floats (and its sentence, which prints them) may differ in the
    # last bits between the two paths, as values do
    assert [sorted(x) for x in a] == [sorted(x) for x in b]
    for x, z in zip(a, b):
        for k in x:
            if k == "message":
                continue
            assert (x[k] is None) == (z[k] is None), (k, x[k], z[k])
            if x[k] is not None:
                assert _close(x[k], z[k]), (k, x[k], z[k])


# ------------------------------------------------------------- rows against sklearn


def test_rows_equal_sklearn_at_every_evaluation_point():
    y, s, w, _, _ = _stream(1500, seed=1, weights=True)
    mon = Monitor(_metrics(window=300), every=97)
    rows, _ = _collect(mon)
    _batches(mon, y, s, w, cuts=[5, 400, 401, 1000])
    assert [r["n"] for r in rows] == list(range(97, 1500, 97)) + [1500]
    for r in rows:
        n = r["n"]
        assert r["t"] is None and r["segment"] is None
        _assert_close(r["values"], _expected_values(y[:n], s[:n], w[:n]), n)
        lo = max(0, n - 300)
        win = _expected_values(y[lo:n], s[lo:n], w[lo:n])
        _assert_close(r["values"], {f"{k}@w": v for k, v in win.items()}, n)


def test_undefined_values_are_none():
    mon = Monitor({"auc": se.ROCAUC(), "precision": se.Precision()}, every=2)
    rows, _ = _collect(mon)
    mon.update_many([1, 1, 0], [0.2, 0.3, 0.1])   # one class, then nothing predicted positive
    mon.flush()
    assert [(r["n"], r["values"]) for r in rows] == [
        (2, {"auc": None, "precision": None}),
        (3, {"auc": 1.0, "precision": None}),
    ]


def test_time_based_evaluation_points_and_period_windows():
    y, s, _, t, _ = _stream(800, seed=2, dt=7)
    E, P = 300.0, 120.0
    mon = Monitor({"auc": se.ROCAUC(), "recall@2m": se.Sliding(se.Recall(), period=P)},
                  every=250, every_seconds=E)
    rows, _ = _collect(mon)
    _batches(mon, y, s, t=t, cuts=[1, 99, 500])
    # evaluation points by definition: after each 250th event, and before an event whose
    # time enters a new period of E seconds; the last row at the end
    expected = {n for n in range(250, 801, 250)}
    for j in range(1, 800):
        if t[j] // E > t[:j].max() // E:
            expected.add(j)
    expected.add(800)
    assert [r["n"] for r in rows] == sorted(expected)
    for r in rows:
        n = r["n"]
        tmax = t[:n].max()
        assert r["t"] == tmax
        assert abs(r["values"]["auc"] - roc_auc_score(y[:n], s[:n])) <= TOL
        inside = (t[:n] > tmax - P)
        exp = recall_score(y[:n][inside], s[:n][inside] >= 0.5, zero_division=np.nan)
        _assert_close(r["values"], {"recall@2m": exp}, n)


def test_segments_equal_sklearn_on_each_segments_events():
    y, s, w, _, seg = _stream(900, seed=4, weights=True, segments=["de", "fr", "us"])
    seg = seg.astype(object)
    seg[::37] = None                  # no segment: counted in the whole stream only
    mon = Monitor(_metrics(window=100), group_by="country", every=130)
    rows, _ = _collect(mon)
    _batches(mon, y, s, w, seg=seg, cuts=[10, 450])
    first_seen = []
    for v in seg:
        if v is not None and v not in first_seen:
            first_seen.append(v)
    # the whole stream writes a row every 130 of the stream's events; a segment every
    # 130 of its own events (its cadence), and at the end for the events since its last
    expected, count, at_row = [], dict.fromkeys(first_seen, 0), dict.fromkeys(first_seen, 0)
    for i, g in enumerate(seg, 1):
        due = []
        if g is not None:
            count[g] += 1
            if count[g] - at_row[g] == 130:
                due, at_row[g] = [g], count[g]
        if i % 130 == 0 or due:
            expected += [(i, None)] * (i % 130 == 0) + [(i, g) for g in due]
    expected += [(900, None)] * (900 % 130 != 0) + [
        (900, g) for g in first_seen if count[g] > at_row[g]]
    # a segment row's n is its own events', stream_n the stream's position
    assert [(r.get("stream_n", r["n"]), r["segment"]) for r in rows] == expected
    assert sum(r["segment"] is not None for r in rows) == sum(-(-k // 130) for k in count.values())
    for r in rows:
        n, g = r.get("stream_n", r["n"]), r["segment"]
        assert r["n"] == (n if g is None else sum(1 for v in seg[:n] if v == g)), r
        assert ("stream_n" in r) == (g is not None), r
        mask = np.ones(n, bool) if g is None else np.array([v == g for v in seg[:n]])
        yy, ss, ww = y[:n][mask], s[:n][mask], w[:n][mask]
        _assert_close(r["values"], _expected_values(yy, ss, ww), (n, g))
        win = _expected_values(yy[-100:], ss[-100:], ww[-100:])
        _assert_close(r["values"], {f"{k}@w": v for k, v in win.items()}, (n, g))
    snap = mon.snapshot()
    assert list(snap["segments"]) == [None] + first_seen
    assert snap["segments"][None]["n"] == 900
    assert snap["segments"]["fr"]["n"] == sum(1 for v in seg if v == "fr")
    assert mon.segments == first_seen


def test_several_group_by_fields_and_no_overall():
    y, s, _, _, _ = _stream(200, seed=5)
    seg = [("v1", "fr") if i % 3 else ("v2", "fr") for i in range(200)]
    mon = Monitor({"auc": se.ROCAUC()}, group_by=["model", "country"], every=0, overall=False)
    rows, _ = _collect(mon)
    _per_event(mon, y, s, seg=seg)
    assert [r["segment"] for r in rows] == [["v2", "fr"], ["v1", "fr"]]
    for r in rows:
        mask = np.array([list(v) == r["segment"] for v in seg])
        assert abs(r["values"]["auc"] - roc_auc_score(y[mask], s[mask])) <= TOL
    assert list(mon.snapshot()["segments"]) == [("v2", "fr"), ("v1", "fr")]
    json.dumps(rows)


# ------------------------------------------------------------------ batch == events


def _monitor_for_equivalence(every, every_seconds, grouped, window):
    metrics = {"auc": se.ROCAUC(), "recall": se.Recall(), "f1@w": se.Sliding(se.F1(), size=window),
               "auc@w": se.Sliding(se.ROCAUC(), size=window)}
    if every_seconds:
        metrics["precision@p"] = se.Sliding(se.Precision(), period=every_seconds * 2, lateness=3)
    # thresholds no ratio of small weight sums can equal: weighted sums added in another
    # order may differ in the last bit, which must not decide an alert
    rules = [Threshold("f1@w", "<", 0.5537, for_=2, min_samples=5),
             Drop("auc", 0.0213, baseline="best"), Threshold("recall", ">=", 0.6123, cooldown=30)]
    return Monitor(metrics, rules=rules, every=every, every_seconds=every_seconds,
                   group_by="g" if grouped else None)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(0, 250), every=st.sampled_from([0, 1, 7, 50]),
       every_seconds=st.sampled_from([None, 20.0]), grouped=st.booleans(), weighted=st.booleans(),
       window=st.sampled_from([5, 40]), cuts=st.lists(st.integers(1, 249), max_size=6))
def test_batch_path_equals_event_path(seed, n, every, every_seconds, grouped, weighted, window, cuts):
    y, s, w, t, seg = _stream(n, seed, weights=weighted, segments=["a", "b"] if grouped else None,
                              dt=4 if every_seconds else None)
    if t is not None and n > 3:
        t[::4] -= 2.0        # a little out of order, within the windows' lateness
    a, b = (_monitor_for_equivalence(every, every_seconds, grouped, window) for _ in range(2))
    rows_a, alerts_a = _collect(a)
    rows_b, alerts_b = _collect(b)
    _per_event(a, y, s, w, t, seg)
    _batches(b, y, s, w, t, seg, cuts=cuts)
    _same_rows(rows_a, rows_b)
    _same_alerts(alerts_a, alerts_b)
    assert a.n == b.n == n and a.t == b.t
    _same_alerts(a.active_alerts(), b.active_alerts())


# --------------------------------------------------------------------------- alerts


def test_alerts_follow_the_rule_on_sklearn_values():
    # recall of the last 200 events degrades after event 1200 (the model misses positives)
    rng = np.random.default_rng(7)
    n = 3000
    y = rng.random(n) < 0.5
    s = np.where(y, rng.uniform(0.45, 1.0, n), rng.uniform(0.0, 0.55, n))
    s[1200:2200] = np.where(y[1200:2200], rng.uniform(0.2, 0.7, 1000), s[1200:2200])
    rule = dict(metric="recall@200", op="<", value=0.75, for_=3, min_samples=400, cooldown=300)
    mon = Monitor({"recall@200": se.Sliding(se.Recall(), size=200)},
                  rules=[Threshold(**rule)], every=100)
    rows, alerts = _collect(mon)
    _batches(mon, y, s, cuts=range(0, n, 333))
    oracle = Threshold(**rule)
    expected = []
    for k in range(100, n + 1, 100):
        value = recall_score(y[k - 200:k] if k >= 200 else y[:k],
                             (s[k - 200:k] if k >= 200 else s[:k]) >= 0.5)
        tr = oracle.evaluate(value, n=k, samples=k)
        if tr is not None:
            expected.append(dict(tr, segment=None))
    assert [a["state"] for a in expected][:3] == ["pending", "firing", "resolved"]
    _same_alerts(_core(alerts), expected)   # (the explanation's fields: test_alerts.py)
    assert _core(mon.active_alerts()) == (
        [] if oracle.active is None else [dict(oracle.active, segment=None)])
    assert all(a["expr"] == "recall@200 < 0.75" for a in mon.active_alerts())


def test_each_segment_has_its_own_rule_instance():
    # segment "b" has recall 0 (scores all low), "a" recall 1
    y = np.array([True] * 40)
    s = np.array([0.9, 0.1] * 20)
    seg = ["a", "b"] * 20
    mon = Monitor({"recall": se.Recall()}, rules=["recall < 0.5"], group_by="g", every=10)
    rows, alerts = _collect(mon)
    _batches(mon, y, s, seg=seg)
    # a segment is evaluated at its own cadence: "b" reaches its 10th event at the
    # stream's 20th (the transition's n is the stream's clock)
    assert [(a["state"], a["n"], a["segment"]) for a in alerts] == [("firing", 20, "b")]
    assert _core(mon.active_alerts()) == [
        {"rule": "recall < 0.5", "state": "firing", "n": 20, "t": None, "value": 0.0, "segment": "b"}]
    assert mon.active_alerts() == alerts  # with the explanation the transition had
    assert mon.snapshot()["alerts"] == mon.active_alerts()
    # the whole stream's recall is 0.5: no alert there
    assert [r["values"]["recall"] for r in rows if r["segment"] is None] == [0.5] * 4


# ---------------------------------------------------------------------- flush, state


def test_flush_leaves_the_final_state_once():
    mon = Monitor({"auc": se.ROCAUC()}, every=2)
    rows, _ = _collect(mon)
    mon.flush()                                   # empty stream: one row, n = 0
    assert rows == [{"n": 0, "t": None, "segment": None, "values": {"auc": None}}]
    mon.update_many([1, 0], [0.9, 0.1])           # evaluated at n = 2 ...
    mon.flush()                                   # ... so flush adds nothing
    mon.flush()
    assert [r["n"] for r in rows] == [0, 2]
    mon.update(1, 0.2)
    mon.flush()
    mon.flush()
    assert [r["n"] for r in rows] == [0, 2, 3]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), cut=st.integers(0, 400), grouped=st.booleans())
def test_state_round_trip_mid_stream_continues_identically(seed, cut, grouped):
    y, s, w, t, seg = _stream(400, seed, weights=True, segments=["x", "y"] if grouped else None, dt=3)

    def make():
        return Monitor({"auc": se.ROCAUC(), "ap@w": se.Sliding(se.AveragePrecision(), size=50),
                        "recall@p": se.Sliding(se.Recall(), period=40.0, lateness=5)},
                       rules=[Threshold("ap@w", "<", 0.7, for_=2, cooldown=20, min_samples=30),
                              Drop("auc", 0.03)],
                       every=23, every_seconds=100.0, group_by="g" if grouped else None)

    whole = make()
    rows_w, alerts_w = _collect(whole)
    _batches(whole, y, s, w, t, seg, cuts=[cut])

    first = make()
    rows_1, alerts_1 = _collect(first)
    _batches(first, y[:cut], s[:cut], w[:cut], t[:cut], None if seg is None else seg[:cut], flush=False)
    state = json.loads(json.dumps(first.to_state()))
    second = Monitor.from_state(state)
    assert se.from_state(state).to_state() == state
    second.on_metrics.append(rows_1.append)
    second.on_alert.append(alerts_1.append)
    _batches(second, y[cut:], s[cut:], w[cut:], t[cut:], None if seg is None else seg[cut:])
    _same_rows(rows_1, rows_w)
    _same_alerts(alerts_1, alerts_w)
    assert second.to_state()["data"]["n"] == 400


def test_templates_are_never_updated():
    auc = se.ROCAUC()
    mon = Monitor({"auc": auc}, every=0)
    mon.update_many([1, 0], [0.8, 0.2])
    assert math.isnan(auc.get())
    assert mon.segment_metrics()["auc"].get() == 1.0


# ----------------------------------------------------------------------- validation


@pytest.mark.parametrize("kwargs, message", [
    ({"y_true": [1, 0, 2]}, r"y_true\[2\] = 2: label must be"),
    ({"y_pred": [0.5, float("nan"), 0.1]}, r"y_pred\[1\] = nan"),
    ({"y_pred": [0.5, 0.2, "x"]}, r"y_pred\[2\] = 'x'"),
    ({"w": [1.0, -1.0, 1.0]}, r"w\[1\] = -1.0"),
    ({"t": [1.0, float("inf"), 2.0]}, r"t\[1\] = inf"),
    ({"t": [1.0, "noon", 2.0]}, r"t\[1\] = 'noon'"),
    ({"segment": ["a", ["b"], "c"]}, r"segment\[1\] = \['b'\]: segment value of 'g'"),
    ({"segment": "abc"}, r"segment = 'abc'.*one segment value per event"),
    ({"y_pred": [0.5, 0.2]}, r"y_true has 3 elements but y_pred has 2"),
])
def test_bad_batch_raises_naming_index_and_changes_nothing(kwargs, message):
    mon = Monitor({"auc": se.ROCAUC(), "r@2": se.Sliding(se.Recall(), size=2)}, group_by="g", every=1)
    rows, _ = _collect(mon)
    mon.update_many([1, 0], [0.9, 0.1], segment=["a", "b"])
    before = json.dumps(mon.to_state(), sort_keys=True)
    args = {"y_true": [1, 0, 1], "y_pred": [0.5, 0.2, 0.1], "w": None, "t": None,
            "segment": ["a", "b", "a"]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        mon.update_many(**args)
    assert json.dumps(mon.to_state(), sort_keys=True) == before
    # only the first batch's evaluations (n = 1: whole stream and "a"; n = 2: whole
    # stream and "b", "a" idle since its row)
    assert len(rows) == 2 + 2


@pytest.mark.parametrize("args, kwargs, message", [
    ((2, 0.5), {}, r"y_true = 2: label must be"),
    ((1, float("inf")), {}, r"y_pred = inf"),
    ((1, {True: "x"}), {}, r"y_pred = \{True: 'x'\}"),
    ((1, 0.5), {"w": -2}, r"w = -2"),
    ((1, 0.5), {"t": "noon"}, r"t = 'noon'"),
    ((1, 0.5), {"segment": ["a"]}, r"segment = \['a'\]: segment value of 'g'"),
])
def test_bad_event_raises_and_changes_nothing(args, kwargs, message):
    mon = Monitor({"auc": se.ROCAUC()}, group_by="g", every=1)
    mon.update(1, 0.5, segment="a")
    before = json.dumps(mon.to_state(), sort_keys=True)
    with pytest.raises(ValueError, match=message):
        mon.update(*args, **kwargs)
    assert json.dumps(mon.to_state(), sort_keys=True) == before


def test_event_times_required_when_the_monitor_needs_them():
    mon = Monitor({"r@1m": se.Sliding(se.Recall(), period=60)}, every=10)
    with pytest.raises(ValueError, match=r"t = None: this monitor needs event times \('r@1m'"):
        mon.update(1, 0.5)
    with pytest.raises(ValueError, match=r"t\[1\] = nan: this monitor needs event times"):
        mon.update_many([1, 0], [0.5, 0.5], t=[1.0, float("nan")])
    assert mon.n == 0
    mon = Monitor({"auc": se.ROCAUC()}, every_seconds=60)
    with pytest.raises(ValueError, match=r"every_seconds"):
        mon.update_many([1], [0.5])
    # a monitor that does not need times takes events without (t is then None)
    mon = Monitor({"auc": se.ROCAUC()}, every=1)
    rows, _ = _collect(mon)
    mon.update_many([1, 0], [0.5, 0.4], t=[float("nan"), 5.0])
    assert [r["t"] for r in rows] == [None, 5.0]


def test_constructor_errors():
    with pytest.raises(ValueError, match="metrics must be a non-empty dict"):
        Monitor({})
    with pytest.raises(ValueError, match=r"metric name 'a b'"):
        Monitor({"a b": se.ROCAUC()})
    auc = se.ROCAUC()
    with pytest.raises(ValueError, match="same object as another"):
        Monitor({"a": auc, "b": auc})
    with pytest.raises(ValueError, match=r"'c' \(ROCCurve\) does not give a single number"):
        Monitor({"c": se.ROCCurve()})
    with pytest.raises(ValueError, match=r"'r' uses labels pos_label='spam'"):
        Monitor({"r": se.Recall(pos_label="spam", neg_label="ham")})
    with pytest.raises(ValueError, match=r"two rules are named 'auc < 0.5'"):
        Monitor({"auc": se.ROCAUC()}, rules=["auc < 0.5", "auc < 0.5"])
    with pytest.raises(ValueError, match=r"every = -1"):
        Monitor({"auc": se.ROCAUC()}, every=-1)
    with pytest.raises(ValueError, match="overall=False needs group_by"):
        Monitor({"auc": se.ROCAUC()}, overall=False)
    mon = Monitor({"auc": se.ROCAUC()})
    with pytest.raises(ValueError, match=r"segment = 'fr': this monitor has no group_by"):
        mon.update(1, 0.5, segment="fr")


def test_bool_arrays_mean_is_positive_with_other_labels():
    y, s, _, _, _ = _stream(300, seed=8)
    a = Monitor({"auc": se.ROCAUC(pos_label="spam", neg_label="ham"),
                 "r@50": se.Sliding(se.Recall(pos_label="spam", neg_label="ham"), size=50)},
                pos_label="spam", neg_label="ham", every=100)
    b = Monitor.from_state(a.to_state())
    rows_a, _ = _collect(a)
    rows_b, _ = _collect(b)
    a.update_many(np.where(y, "spam", "ham"), s)
    b.update_many(y, s)                       # bool array: True = positive
    _same_rows(rows_a, rows_b)
    assert abs(rows_b[-1]["values"]["auc"] - roc_auc_score(y, s)) <= TOL
    with pytest.raises(ValueError, match=r"y_true\[0\] = True: label must be 'spam'"):
        b.update_many([True], [0.5])          # a list is read as labels, strictly


# ---------------------------------------------------------------------------- drift


def _pooled_p(x1, n1, x2, n2):
    """Two-sided pooled two-proportion z-test (DESIGN.md section 5), by hand."""
    p = (x1 + x2) / (n1 + n2)
    se_ = math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2))
    return 1.0 if se_ == 0 else math.erfc(abs((x2 / n2 - x1 / n1) / se_) / math.sqrt(2))


def _old_default(W, every):
    """The default monitor before the sequential detectors: window drift tests (the
    last W events against the first W) and the rules 'recall drift p < 0.01'."""
    return Monitor.from_config({
        "every": every, "size": W,
        "drift": {k: {"size": W, "reference": "baseline", "alpha": 0.01}
                  for k in ("recall", "precision")},
        "rules": [{"drift": k, "p_below": 0.01} for k in ("recall", "precision")],
    })


def test_window_drift_rules_on_a_planted_recall_drop():
    # the model starts missing positives after event 1500
    rng = np.random.default_rng(11)
    n, W = 3000, 200
    y = rng.random(n) < 0.5
    s = np.where(y, rng.uniform(0.4, 1.0, n), rng.uniform(0.0, 0.6, n))
    s[1500:] = np.where(y[1500:], rng.uniform(0.1, 0.8, n - 1500), s[1500:])
    mon = _old_default(W, 100)
    rows, alerts = _collect(mon)
    _batches(mon, y, s, cuts=range(0, n, 777))
    pred = s >= 0.5
    oracle = {"recall": se.alerts.Drift("recall", 0.01), "precision": se.alerts.Drift("precision", 0.01)}
    expected = []
    for r in rows:
        k = r["n"]
        for name, num, den in (("recall", y & pred, y), ("precision", y & pred, pred)):
            got = r["values"][f"drift.{name}.p_value"]
            if k < 2 * W:
                assert got is None                       # the test is not ready yet
                continue
            x1, n1 = num[:W].sum(), den[:W].sum()        # baseline: the first window
            x2, n2 = num[k - W:k].sum(), den[k - W:k].sum()
            p = _pooled_p(x1, n1, x2, n2)
            assert got == pytest.approx(p, rel=1e-9, abs=1e-300)
            assert r["values"][f"drift.{name}.delta"] == pytest.approx(x2 / n2 - x1 / n1, abs=TOL)
            enough = min(n1, n2) >= 30
            tr = oracle[name].evaluate({"p_value": p if enough else None, "delta": x2 / n2 - x1 / n1},
                                       n=k, samples=k)
            if tr is not None:
                expected.append(dict(tr, segment=None))
    assert any(a["rule"] == "recall drift p < 0.01" and a["state"] == "firing" for a in expected)
    key = lambda a: (a["n"], a["rule"])
    got = sorted(alerts, key=key)
    expected = sorted(expected, key=key)
    assert [{k: v for k, v in a.items() if k != "value"} for a in _core(got)] == \
        [{k: v for k, v in a.items() if k != "value"} for a in expected]
    for a, e in zip(got, expected):
        assert a["value"] == pytest.approx(e["value"], rel=1e-9, abs=1e-300)


def test_tumbling_windows_and_datetime64_times():
    y, s, _, t, _ = _stream(700, seed=12, dt=5)
    times = (t * 1e6).astype("datetime64[us]")
    mon = Monitor({"acc:100": se.Tumbling(se.Accuracy(), size=100),
                   "auc:10m": se.Tumbling(se.ROCAUC(), period=600)}, every=150)
    rows, _ = _collect(mon)
    mon.update_many(y[:333], s[:333], t=times[:333])
    for i in range(333, 700):
        mon.update(y[i], s[i], t=times[i])
    mon.flush()
    for r in rows:
        n = r["n"]
        assert r["t"] == pytest.approx(t[:n].max(), abs=1e-6)
        k = n // 100                                  # complete blocks of 100 events
        exp = accuracy_score(y[(k - 1) * 100:k * 100], s[(k - 1) * 100:k * 100] >= 0.5) if k else math.nan
        _assert_close(r["values"], {"acc:100": exp}, n)
        # the last 10-minute window (aligned to the epoch) that has closed
        cur = t[:n].max() // 600
        prev = [b for b in np.unique(t[:n] // 600) if b < cur]
        if prev:
            inside = (t[:n] // 600) == prev[-1]
            exp = _sk(roc_auc_score, y[:n][inside], s[:n][inside], None)
        else:
            exp = math.nan
        _assert_close(r["values"], {"auc:10m": exp}, n)


# ------------------------------------------------------------ one score order per stream


def _feed_batches(mon, y, s, w, t, step):
    for a in range(0, len(y), step):
        mon.update_many(y[a:a + step], s[a:a + step], w[a:a + step], t=t[a:a + step])


@pytest.mark.usefixtures("layout")  # small orders flat, and every order in levels
@pytest.mark.parametrize("scores", ["rounded", "continuous"])
@pytest.mark.parametrize("labels", ["bool", "spam"])
def test_score_order_metrics_share_one_order_and_equal_unshared_metrics(labels, scores):
    from sklearn.metrics import average_precision_score, roc_auc_score

    from streameval.metrics.ranking import OrderView

    rng = np.random.default_rng(11)
    n = 3000
    y = rng.random(n) < 0.3
    s = rng.random(n) * 0.6 + 0.4 * y
    if scores == "rounded":
        s = np.round(s, 3)
    w = rng.integers(0, 3, n).astype(float)
    t = np.arange(n, dtype=float)
    kw = {}
    yy = y
    if labels == "spam":
        kw = {"pos_label": "spam", "neg_label": "ham"}
        yy = np.where(y, "spam", "ham").astype(object)
    metrics = {
        "auc": se.ROCAUC(**kw), "ap": se.AveragePrecision(**kw), "iap": se.InterpolatedAP(**kw),
        "gini": se.Gini(**kw), "ap11": se.ElevenPointAP(**kw),
        "auc@500": se.Sliding(se.ROCAUC(**kw), size=500),
        "ap@500": se.Sliding(se.AveragePrecision(**kw), size=500),
        "ap@60s": se.Sliding(se.AveragePrecision(**kw), period=60.0),
        "auc@60s": se.Sliding(se.ROCAUC(**kw), period=60.0),
        "auc_bins": se.ROCAUC(bins=10, **kw), "ap_bins": se.AveragePrecision(bins=10, **kw),
    }
    mon = Monitor(metrics, every=250, **kw)
    seg = mon.scopes()[0]
    views = {k for k, v in seg.metrics.items() if isinstance(v, OrderView)}
    # one owner per (window, labels, bins, cap): the first of each group (the
    # interpolated APs keep exact orders: no cap)
    assert views == {"ap", "gini", "ap11", "ap@500", "auc@60s", "ap_bins"}
    unshared = {k: se.from_state(m.to_state()) for k, m in metrics.items()}  # empty copies
    rows = []
    mon.on_metrics.append(rows.append)
    _feed_batches(mon, yy, s, w, t, 137)
    mon.flush()
    # the monitor's slices: its batches cut at the evaluation points
    cuts = sorted(set(range(0, n, 137)) | set(range(0, n, 250)) | {n})
    for k, m in unshared.items():
        for a, b in zip(cuts, cuts[1:]):
            if isinstance(m, se.Sliding) and m.period is not None:
                m.update_many(yy[a:b], s[a:b], w[a:b], t=t[a:b])
            else:
                m.update_many(yy[a:b], s[a:b], w[a:b])
    for k, m in seg.metrics.items():
        assert m.get() == pytest.approx(unshared[k].get(), abs=1e-12), k
        # the state is the one an unshared metric writes (checkpoints do not change)
        assert m.to_state() == unshared[k].to_state(), k
    # and the oracle: sklearn on the events
    assert seg.metrics["auc"].get() == pytest.approx(roc_auc_score(y, s, sample_weight=w), abs=1e-12)
    assert seg.metrics["ap"].get() == pytest.approx(
        average_precision_score(y, s, sample_weight=w), abs=1e-12)
    tail = slice(n - 500, n)
    assert seg.metrics["ap@500"].get() == pytest.approx(
        average_precision_score(y[tail], s[tail], sample_weight=w[tail]), abs=1e-12)
    last = t > t[-1] - 60.0
    assert seg.metrics["auc@60s"].get() == pytest.approx(
        roc_auc_score(y[last], s[last], sample_weight=w[last]), abs=1e-12)
    # a view is read-only: it never double counts
    with pytest.raises(TypeError, match="read-only"):
        seg.metrics["ap"].update(True, 0.5)
    with pytest.raises(TypeError, match="read-only"):
        seg.metrics["ap@500"].update_many([True], [0.5])
    assert type(seg.metrics["ap"].clone()) is type(se.AveragePrecision(**kw))
    assert seg.metrics["ap@500"].clone().get() != seg.metrics["ap@500"].get()  # empty: nan
    assert len(seg.metrics["ap@500"]) == len(seg.metrics["auc@500"]) == 500
    # a checkpoint resumes with the same sharing and the same values
    back = Monitor.from_state(json.loads(json.dumps(mon.to_state())))
    assert {k for k, v in back.scopes()[0].metrics.items() if isinstance(v, OrderView)} == views
    for k, m in back.scopes()[0].metrics.items():
        assert m.to_state() == seg.metrics[k].to_state(), k


@pytest.mark.usefixtures("layout")
def test_curves_share_the_order_too_and_equal_unshared_curves():
    """ROC and PR curves are score-order metrics: share_orders makes them views of the
    cumulative AUC's order (a Monitor's rows take numbers, so curves live outside one)."""
    from streameval.metrics.ranking import OrderView
    from streameval.monitor import share_orders

    rng = np.random.default_rng(4)
    y = rng.random(2000) < 0.3
    s = rng.random(2000) * 0.5 + 0.5 * y
    # (curves keep exact orders: an AUC shares them when it has no cap either)
    shared = share_orders({"auc": se.ROCAUC(max_scores=None), "roc": se.ROCCurve(),
                           "pr": se.PRCurve()})
    assert isinstance(shared["roc"], OrderView) and isinstance(shared["pr"], OrderView)
    for a in range(0, 2000, 300):
        shared["auc"].update_many(y[a:a + 300], s[a:a + 300])
    for name, cls in (("roc", se.ROCCurve), ("pr", se.PRCurve)):
        want = cls().update_many(y, s).get()
        for got, ref in zip(shared[name].get(), want):
            np.testing.assert_array_equal(got, ref)


def test_default_size_and_its_alias_window():
    assert sorted(Monitor.default(size=50).metrics) == sorted(Monitor.default(window=50).metrics)
    assert Monitor.default(size=50).metrics["recall@50"].size == 50
    assert "recall@10000" in Monitor.default().metrics
    with pytest.raises(ValueError, match="size= or its alias window=, not both"):
        Monitor.default(size=50, window=50)
    with pytest.raises(ValueError, match=r"^monitor.every = 2.5: must be an integer >= 0"):
        Monitor.default(every=2.5)
    with pytest.raises(ValueError, match=r"every_seconds = 0: must be a number > 0"):
        Monitor.default(every_seconds=0)


def test_constructor_parameters_are_checked_by_the_declared_checks():
    with pytest.raises(ValueError, match=r"^every = -1: must be an integer >= 0"):
        Monitor({"r": se.Recall()}, every=-1)
    with pytest.raises(ValueError, match=r"^every_seconds = nan: must be a number > 0 or None"):
        Monitor({"r": se.Recall()}, every_seconds=float("nan"))
    assert Monitor({"r": se.Recall()}, every_seconds=60).every_seconds == 60.0


def test_a_batch_one_metric_would_refuse_is_applied_to_none():
    # log loss refuses a weighted loss that overflows; the monitor checks every metric's
    # columns before updating any, so precision does not count the batch either
    mon = Monitor({"p": se.Precision(), "ll": se.LogLoss(), "ll@5": se.Sliding(se.LogLoss(), size=5)},
                  every=0)
    mon.update_many([1, 0], [0.9, 0.2])
    before = json.dumps(mon.to_state(), sort_keys=True)
    with pytest.raises(ValueError) as info:
        mon.update_many([1, 0, 1], [0.9, 0.2, 1e-300], [1.0, 1.0, 1e308])
    assert info.value.index == 2 and "weight must be a finite number between 0 and 1e+12" in str(
        info.value)
    assert json.dumps(mon.to_state(), sort_keys=True) == before
    assert mon.n == 2


def test_a_bad_event_time_in_a_list_carries_its_index():
    mon = Monitor({"p": se.Sliding(se.Precision(), period=10.0)}, every=0)
    with pytest.raises(ValueError) as info:
        mon.update_many([1, 0, 1], [0.9, 0.2, 0.5], t=[1.0, 2.0, "yesterday"])
    assert info.value.index == 2
    assert mon.n == 0


def test_one_event_a_metric_would_refuse_is_applied_to_none():
    mon = Monitor({"p": se.Precision(), "ll": se.LogLoss()}, every=0)
    mon.update(1, 0.9)
    before = json.dumps(mon.to_state(), sort_keys=True)
    with pytest.raises(ValueError, match=r"w = 1e\+308: weight must be") as info:
        mon.update(1, 0.1, w=1e308)
    assert info.value.index is None
    assert json.dumps(mon.to_state(), sort_keys=True) == before
    mon.update(1, 0.1, w=1e12)  # the largest weight is counted
    assert mon.n == 2


def test_a_score_outside_a_metrics_range_is_refused_naming_the_metric():
    # the Monitor checks the narrowest score range of its metrics once (log loss:
    # probabilities) and names the metric that needs it; nothing is counted
    m = Monitor.default()
    with pytest.raises(ValueError) as info:
        m.update_many([True, False, True], [0.2, 1.5, 0.3])
    assert str(info.value) == ("y_pred[1] = 1.5: probability must be in [0, 1] "
                               "(metric 'log_loss' needs probabilities)")
    assert info.value.index == 1 and m.n == 0


# --------------------------------------------------------------- extreme input

EXTREME_SCORES = [-1.7e308, -1e300, 0.0, 0.5, 1.0, 1e300, 1.7e308]


def _finite_or_none(o, path="snapshot"):
    """Every number in a snapshot is finite (None stands for undefined)."""
    if isinstance(o, dict):
        for k, v in o.items():
            _finite_or_none(v, f"{path}.{k}")
    elif isinstance(o, (list, tuple)):
        for i, v in enumerate(o):
            _finite_or_none(v, f"{path}[{i}]")
    elif isinstance(o, float):
        assert math.isfinite(o), f"{path} = {o}"


def test_the_largest_weights_and_scores_keep_every_metric_finite_and_revert_exactly():
    """Any input the validation accepts leaves every metric finite: weights up to
    MAX_WEIGHT (1e12) and any finite score, on every config kind, cumulative and
    windowed, and the drift tests. Reverting the extreme events gives back the values
    of the ordinary events alone (sklearn on them is the oracle for AUC and AP)."""
    from streameval import _registry
    from streameval.validation import MAX_WEIGHT

    rng = np.random.default_rng(7)
    n = 400
    y = rng.random(n) < 0.3
    p = rng.random(n)  # probabilities, for log_loss and brier
    kinds = sorted(_registry.config_kinds())
    spec = {k: {"metric": k} for k in kinds}
    spec["falpha"]["alpha"] = 0.3
    spec["fbeta"]["beta"] = 2.0
    metrics = dict(spec)
    metrics.update({f"{k}@50": {**spec[k], "size": 50} for k in kinds})
    mon = Monitor.from_config({"metrics": metrics, "every": 100,
                               "drift": {"recall": {"metric": "recall", "size": 100}}})
    mon.update_many(y, p, w=np.ones(n), t=np.arange(n, dtype=float))
    # extreme events: the largest weight, scores at the ends of the float range where a
    # metric takes any score; probabilities where it needs them
    for i, s in enumerate(EXTREME_SCORES):
        prob = min(max(s, 0.0), 1.0)
        mon.update(bool(i % 2), prob, w=MAX_WEIGHT, t=float(n + i))
    _finite_or_none(mon.snapshot())
    # every metric kind on its own, with the extreme scores it accepts, reverted
    for kind in kinds:
        fresh = Monitor.from_config({"metrics": {kind: spec[kind]}}).metrics[kind]
        ref = fresh.clone().update_many(y, p)
        m = fresh.clone().update_many(y, p)
        added = []
        for i, s in enumerate(EXTREME_SCORES + [0.25, 0.75]):
            for w in (MAX_WEIGHT, 0.0, 1.0):
                ev = (bool(i % 2), s, w)
                try:
                    m.update(*ev)
                except ValueError:  # a probability metric refuses scores outside [0, 1]
                    continue
                added.append(ev)
                v = m.get()
                # (a metric still undefined on these events, such as a score drift whose
                # reference is not full yet, stays NaN: never an infinite value)
                undefined = isinstance(ref.get(), float) and math.isnan(ref.get())
                assert v is None or math.isfinite(v) or (undefined and math.isnan(v)), (
                    kind, ev, v)
        assert len(added) >= 9, kind
        for ev in reversed(added):
            m.revert(*ev)
        a, b = m.get(), ref.get()
        assert (a is None and b is None) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) \
            or (math.isnan(a) and math.isnan(b)), (kind, a, b)
    auc = Monitor.from_config({"metrics": {"roc_auc": "roc_auc"}}).metrics["roc_auc"]
    auc.update_many(y, p)
    for s in EXTREME_SCORES:
        auc.update(True, s, MAX_WEIGHT)
        auc.update(False, s, MAX_WEIGHT)
    for s in EXTREME_SCORES:
        auc.revert(True, s, MAX_WEIGHT)
        auc.revert(False, s, MAX_WEIGHT)
    assert abs(auc.get() - roc_auc_score(y, p)) <= 1e-12


# --------------------------------------------------------------- segment cap, late events


def _capped_events(seed, n=600, values=40):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    s = rng.random(n)
    seg = [f"s{v}" for v in rng.integers(0, values, n)]
    seg = [None if i % 11 == 0 else v for i, v in enumerate(seg)]
    return y, s, seg


@pytest.mark.parametrize("seed", [0, 1])
def test_max_segments_caps_new_segments_under_other_on_both_paths(seed):
    """Once max_segments segments exist, the events of new segment values count under
    "__other__": the first max_segments values met (in stream order) keep their own
    metrics. The batch path equals a loop of update (rows, counters, state), and the
    segments' values equal sklearn on their events (the oracle: each event's segment
    after the cap, computed here by hand)."""
    import warnings

    y, s, seg = _capped_events(seed)
    cap = 7
    kept, expected = [], []
    for v in seg:
        if v is not None and v not in kept and len(kept) < cap:
            kept.append(v)
        expected.append(v if v is None or v in kept else "__other__")
    mons, rows = [], []
    for batch in (False, True):
        mon = Monitor({"r": se.Recall(), "auc": se.ROCAUC()}, group_by="c", every=100,
                      max_segments=cap)
        out = []
        mon.on_metrics.append(out.append)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if batch:
                for a in range(0, len(y), 150):
                    mon.update_many(y[a:a + 150], s[a:a + 150], segment=seg[a:a + 150])
            else:
                for yi, si, gi in zip(y.tolist(), s.tolist(), seg):
                    mon.update(yi, si, segment=gi)
        mon.flush()
        msgs = [str(c.message) for c in caught if issubclass(c.category, RuntimeWarning)
                and "has no value in some events" not in str(c.message)]
        assert len(msgs) == 1 and "max_segments = 7 reached" in msgs[0], msgs
        # the events without a segment value are counted (not under __other__)
        assert mon.missing_segment_fields == ({"c": expected.count(None)}
                                              if None in expected else {})
        assert mon.segments == kept + ["__other__"]
        assert mon.other_events == sum(v == "__other__" for v in expected)
        snap = mon.snapshot()
        assert snap["other_events"] == mon.other_events and snap["max_segments"] == cap
        for key in kept + ["__other__"]:
            idx = [i for i, v in enumerate(expected) if v == key]
            assert snap["segments"][key]["n"] == len(idx)
            assert snap["segments"][key]["values"]["r"] == pytest.approx(
                recall_score(y[idx], s[idx] >= 0.5, zero_division=np.nan), nan_ok=True)
        mons.append(mon)
        rows.append(out)
    assert rows[0] == rows[1]
    assert json.dumps(mons[0].to_state(), sort_keys=True) == json.dumps(mons[1].to_state(),
                                                                        sort_keys=True)
    # the state keeps the cap and the counter; a new value after a resume is capped too
    again = Monitor.from_state(json.loads(json.dumps(mons[0].to_state())))
    assert again.max_segments == cap and again.other_events == mons[0].other_events
    again.update(True, 0.9, segment="brand-new")
    assert again.other_events == mons[0].other_events + 1 and "brand-new" not in again.segments


def test_max_segments_config_and_bad_values():
    mon = Monitor.from_config({"group_by": "c", "max_segments": 2, "metrics": {"r": "recall"}})
    assert mon.max_segments == 2
    assert Monitor.default().max_segments == 1000
    assert Monitor({"r": se.Recall()}, group_by="c", max_segments=None).max_segments is None
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(ValueError, match="max_segments"):
            Monitor.from_config({"group_by": "c", "max_segments": bad, "metrics": {"r": "recall"}})
    with pytest.raises(ValueError, match="max_segments = 0"):
        Monitor({"r": se.Recall()}, group_by="c", max_segments=0)
    # several group_by fields: the other segment is a tuple of "__other__"
    mon = Monitor({"r": se.Recall()}, group_by=["a", "b"], max_segments=1, every=0)
    with pytest.warns(RuntimeWarning, match="max_segments = 1"):
        mon.update_many([1, 0, 1], [0.9, 0.2, 0.7], segment=[("x", 1), ("y", 2), ("x", 1)])
    assert mon.segments == [("x", 1), ("__other__", "__other__")] and mon.other_events == 1


def test_late_events_are_counted_per_window_and_segment_in_rows_and_snapshot():
    """Windows by period refuse events older than their lateness allows: each row and
    the snapshot say how many, per window and segment. Oracle: a brute-force walk that
    keeps each segment's newest time and counts the events more than `lateness`
    older (the whole stream has its own clock)."""
    rng = np.random.default_rng(5)
    n = 500
    t = np.cumsum(rng.random(n) * 30)
    late_at = rng.random(n) < 0.1
    t = np.where(late_at, t - rng.choice([10, 200, 5000], n), t)
    y = rng.random(n) < 0.5
    s = rng.random(n)
    seg = rng.choice(["a", "b"], n).tolist()
    mon = Monitor({"p@1h": se.Sliding(se.Precision(), period=3600, lateness=60),
                   "p@2h": se.Sliding(se.Precision(), period=7200, lateness=300),
                   "r": se.Recall()}, group_by="c", every=100)
    rows = []
    mon.on_metrics.append(rows.append)
    mon.update_many(y, s, t=t, segment=seg)

    def brute(lateness, upto, key):
        newest, late = -np.inf, 0
        for i in range(upto):
            if key is not None and seg[i] != key:
                continue
            if t[i] < newest - lateness:
                late += 1
            newest = max(newest, t[i])
        return late

    assert rows
    for row in rows:
        key = row["segment"]
        assert set(row["late"]) == {"p@1h", "p@2h"}  # the windows by period only
        at = row.get("stream_n", row["n"])
        assert row["late"]["p@1h"] == brute(60, at, key), row
        assert row["late"]["p@2h"] == brute(300, at, key), row
    # a snapshot reads a segment as of its last row: the events since wait in its buffer
    # (counted in "pending") until its next evaluation point
    snap = mon.snapshot()
    for key in ("a", "b"):
        e = snap["segments"][key]
        where = [i for i in range(n) if seg[i] == key]
        assert e["n"] + e.get("pending", 0) == len(where) and e.get("pending", 0) > 0
        upto = where[e["n"] - 1] + 1 if e["n"] else 0
        assert e["late"] == {"p@1h": brute(60, upto, key), "p@2h": brute(300, upto, key)}
    mon.evaluate()  # every segment's buffer fed
    snap = mon.snapshot()
    for key in (None, "a", "b"):
        assert "pending" not in snap["segments"][key]
        assert snap["segments"][key]["late"] == {"p@1h": brute(60, n, key),
                                                 "p@2h": brute(300, n, key)}
    assert brute(60, n, None) > 20
    # a monitor without windows by period adds nothing to its rows
    plain = Monitor({"r": se.Recall()}, every=2)
    out = []
    plain.on_metrics.append(out.append)
    plain.update_many([1, 0], [0.9, 0.1])
    assert "late" not in out[0] and "late" not in plain.snapshot()["segments"][None]


def test_the_other_segment_is_reserved_and_unencodable_segments_are_refused():
    """An event may not name "__other__" while a cap exists (its events would mix with
    the overflow and be counted differently by the two paths), and a segment string
    that cannot be encoded as UTF-8 (a lone surrogate) is refused: it could be neither
    checkpointed nor exported. Both raise naming the value, and nothing is counted."""
    mon = Monitor({"r": se.Recall()}, group_by="c", max_segments=1, every=0)
    for bad, match in (("__other__", "reserved"), ("\ud800", "not valid Unicode")):
        with pytest.raises(ValueError, match=match):
            mon.update(True, 0.9, segment=bad)
        with pytest.raises(ValueError, match=match) as info:
            mon.update_many([True, False], [0.9, 0.1], segment=["a", bad])
        assert info.value.index == 1
        assert mon.n == 0 and mon.segments == []
    with pytest.warns(RuntimeWarning):
        mon.update_many([True, False, True], [0.9, 0.1, 0.8], segment=["a", "b", "c"])
    assert mon.segments == ["a", "__other__"] and mon.other_events == 2
    mon.evaluate()  # (the segments' buffered events fed)
    assert mon.segment_metrics("__other__")["r"].get() == 1.0  # readable by its name
    again = Monitor.from_state(json.loads(json.dumps(mon.to_state())))
    assert again.segments == ["a", "__other__"]
    # without a cap the name is an ordinary segment value
    free = Monitor({"r": se.Recall()}, group_by="c", max_segments=None, every=0)
    free.update(True, 0.9, segment="__other__")
    assert free.segments == ["__other__"] and free.other_events == 0


def test_default_alarm_rules_on_a_planted_recall_drop():
    """The default monitor's rules are 'recall alarm' and 'precision alarm' on
    sequential detectors: its rows and transitions equal standalone detectors fed the
    same events and read at the same evaluation points, with the Alarm rule applied."""
    from streameval.sequential import SequentialDrift

    rng = np.random.default_rng(5)
    n, every = 30_000, 500
    y = rng.random(n) < 0.5
    s = np.where(y, rng.uniform(0.3, 1.0, n), rng.uniform(0.0, 0.6, n))
    s[15_000:] = np.where(y[15_000:], rng.uniform(0.1, 0.8, n - 15_000), s[15_000:])
    mon = Monitor.default(every=every)
    assert [r.name for r in mon.rules] == ["recall alarm", "precision alarm",
                                           "fpr alarm on rise"]
    rows, alerts = _collect(mon)
    _batches(mon, y, s, cuts=range(0, n, 1777))
    mon.flush()
    dets = {k: SequentialDrift(k, alpha=0.005, horizon=1_000_000)
            for k in ("recall", "precision", "fpr")}
    rules = {k: se.alerts.Alarm(k, direction="rise" if k == "fpr" else "drop") for k in dets}
    expected, at = [], list(range(every, n + 1, every))
    prev = 0
    for k in at:
        for name, d in dets.items():
            d.update_many(y[prev:k], s[prev:k])
            rep = d.report()
            row = next(r for r in rows if r["n"] == k)
            assert row["values"][f"drift.{name}.p_value"] == pytest.approx(rep["p_value"], rel=1e-12)
            tr = rules[name].evaluate(rep, n=k, samples=k)
            if tr is not None:
                expected.append(dict(tr, segment=None))
        prev = k
    assert dets["recall"].changes and dets["recall"].changes[0].direction == "drop"
    assert 15_000 < dets["recall"].changes[0].index < 20_000
    assert any(a["rule"] == "recall alarm" and a["state"] == "firing" for a in expected)
    key = lambda a: (a["n"], a["rule"])
    assert _core(sorted(alerts, key=key)) == sorted(expected, key=key)


def test_a_checkpoint_from_before_the_sequential_detectors_still_loads_and_resumes():
    """A Monitor state written by the previous version (the old default: window
    drift tests and 'recall drift p < 0.01' rules, tests/data/, made by
    streameval 0ff265b) loads, keeps its own rules, and continues with exactly the
    rows and alerts that version wrote for the next events."""
    import gzip
    import json
    import pathlib

    path = pathlib.Path(__file__).parent / "data" / "monitor_state_0ff265b.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    mon = Monitor.from_state(doc["state"])
    assert [r.name for r in mon.rules] == ["recall drift p < 0.01", "precision drift p < 0.01"]
    rows, alerts = _collect(mon)
    ev = doc["events"]
    mon.update_many(np.array(ev["y"][500:]), np.array(ev["s"][500:]), segment=ev["segment"][500:])
    mon.flush()
    # the whole stream's rows are that version's, bit for bit
    # (rows carry the intervals of their values too: a key that version did not write)
    assert [{k: v for k, v in r.items() if k != "intervals"} for r in rows
            if r["segment"] is None] == [r for r in doc["rows_after"] if r["segment"] is None]
    # that version wrote a row for every segment at every point of the stream; a segment
    # now writes one every 100 of its own events (its count from the restored state on)
    # and at the end, where its values are that version's (the same events, fed in other
    # slices: equal to 1e-12) with its own count as n and the stream's as stream_n
    seg = ev["segment"]
    assert [(r.get("stream_n"), r["n"], r["segment"]) for r in rows if r["segment"]] == [
        (692, 350, "a"), (705, 350, "b"), (800, 393, "b"), (800, 407, "a")]
    for r in rows:
        if r["segment"] is not None:
            k = r["stream_n"]
            assert r["n"] == sum(1 for g in seg[:k] if g == r["segment"])
    final = {r["segment"]: r for r in rows if r["stream_n" if r["segment"] else "n"] == 800}
    for old in doc["rows_after"]:
        if old["n"] == 800 and old["segment"] is not None:
            got = final[old["segment"]]["values"]
            assert got.keys() == old["values"].keys()
            for name, v in old["values"].items():
                assert (v is None) == (got[name] is None), name
                assert v is None or abs(got[name] - v) <= 1e-12, (name, got[name], v)
    # that version's alert on "b" fired at 600 and resolved at 700, between two of b's
    # own points now (its rows at 705 and 800): the cost of evaluating a segment every
    # `every` of its own events is that an excursion shorter than that can pass unseen
    assert [a["segment"] for a in doc["alerts_after"]] == ["b", "b"] and _core(alerts) == []


def _delong_brute(y, s):
    """AUC and DeLong's variance by the pairwise definition (the oracle)."""
    pos, neg = s[y], s[~y]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    auc = psi.mean()
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    return auc, v10.var(ddof=1) / len(pos) + v01.var(ddof=1) / len(neg)


def test_confidence_rules_read_the_interval_of_the_window():
    """'recall@W < 0.8 with confidence 0.99' fires when the Wilson upper end (from
    statsmodels, over the window's events) is below 0.8; 'roc_auc@W drops by 0.05 with
    confidence 0.99' when (first full window's AUC - current AUC) minus the root sum
    of squares of both intervals' half-widths (DeLong by brute force) reaches 0.05.
    The transitions equal plain rules evaluated on those oracle values."""
    from statistics import NormalDist

    from statsmodels.stats.proportion import proportion_confint

    rng = np.random.default_rng(17)
    n, W, every = 6000, 400, 200
    y = rng.random(n) < 0.5
    drop = np.arange(n) >= 3000
    s = np.where(y, rng.normal(np.where(drop, 0.3, 1.2), 1.0), rng.normal(0.0, 1.0, n))
    s = np.round(s, 1)
    mon = Monitor({"recall@400": se.Sliding(se.Recall(threshold=0.0), size=W),
                   "roc_auc@400": se.Sliding(se.ROCAUC(), size=W)},
                  rules=["recall@400 < 0.8 with confidence 0.99",
                         {"rule": "roc_auc@400 drops by 0.05", "confidence": 0.99,
                          "min_samples": W}],
                  every=every)
    rows, alerts = _collect(mon)
    _batches(mon, y, s, cuts=range(0, n, 333))
    z = NormalDist().inv_cdf(0.995)
    floor = se.alerts.Threshold("recall_hi", "<", 0.8, name="recall@400 < 0.8 with confidence 0.99")
    expected, ref = [], None
    for k in range(every, n + 1, every):
        yw, sw = y[max(0, k - W):k], s[max(0, k - W):k]
        tp, p = int((yw & (sw >= 0.0)).sum()), int(yw.sum())
        lo, hi = proportion_confint(tp, p, alpha=0.01, method="wilson")
        tr = floor.evaluate(hi, n=k)
        if tr is not None:
            expected.append(dict(tr, value=tp / p, segment=None))
        if k >= W:
            auc, var = _delong_brute(yw, sw)
            h = z * math.sqrt(var)
            if ref is None:
                ref = (auc, h)
            cond = (ref[0] - auc) - math.sqrt(ref[1] ** 2 + h ** 2) >= 0.05
            expected.append(("auc", k, cond))
    got_floor = [a for a in alerts if a["rule"].startswith("recall")]
    assert got_floor and got_floor[0]["state"] == "firing" and got_floor[0]["n"] > 3000
    want_floor = [a for a in expected if isinstance(a, dict)]
    assert [(a["state"], a["n"]) for a in got_floor] == [(a["state"], a["n"]) for a in want_floor]
    for a, b in zip(got_floor, want_floor):
        assert a["value"] == pytest.approx(b["value"], abs=1e-12)
    # the drop rule: firing at the first evaluation where the oracle's condition holds
    auc_alerts = [a for a in alerts if a["rule"].startswith("roc_auc")]
    first = next(k for tag, k, cond in (e for e in expected if isinstance(e, tuple)) if cond)
    assert auc_alerts[0]["state"] == "firing" and auc_alerts[0]["n"] == first
    # without confidence the same drop rule fires earlier, on noise-sized differences too
    plain = Monitor({"roc_auc@400": se.Sliding(se.ROCAUC(), size=W)},
                    rules=[{"rule": "roc_auc@400 drops by 0.05", "min_samples": W}], every=every)
    _, plain_alerts = _collect(plain)
    _batches(plain, y, s)
    assert plain_alerts[0]["n"] < first


def test_confidence_needs_a_metric_with_an_interval():
    with pytest.raises(ValueError, match="has no confidence interval"):
        Monitor({"f1": se.F1()}, rules=["f1 < 0.5 with confidence 0.9"])
    with pytest.raises(ValueError, match=r"confidence = 1\.5: must be a number in \(0, 1\)"):
        Monitor({"recall": se.Recall()}, rules=[{"metric": "recall", "op": "<", "value": 0.5,
                                                  "confidence": 1.5}])


def test_a_group_by_field_without_values_is_warned_about_once():
    """group_by naming a field no event has (a typo): one RuntimeWarning, kept in
    ``warnings`` (snapshot and state), after GROUP_BY_PROBE events by update, by
    update_many (a batch across the boundary) and at flush for a shorter stream; a
    field met once among the first GROUP_BY_PROBE events, or a second field of two that
    has values, is not warned about."""
    import warnings as _w

    from streameval.monitor import GROUP_BY_PROBE

    rng = np.random.default_rng(5)
    n = GROUP_BY_PROBE + 500
    y, s = rng.random(n) < 0.3, rng.random(n)

    def run(segments, fields="contry", by_batch=None, upto=n):
        mon = Monitor(_metrics(), group_by=fields, every=0)
        with _w.catch_warnings(record=True) as caught:
            _w.simplefilter("always")
            if by_batch is None:
                for i in range(upto):
                    mon.update(bool(y[i]), float(s[i]), segment=segments[i])
            else:
                for a in range(0, upto, by_batch):
                    b = min(a + by_batch, upto)
                    mon.update_many(y[a:b], s[a:b], segment=segments[a:b])
            mon.flush()
        return mon, [str(c.message) for c in caught if c.category is RuntimeWarning]

    none = [None] * n
    expected = [f"group_by field 'contry' had no value in the first {GROUP_BY_PROBE} events: "
                "they count in the whole stream only (is the field name right?)"]
    # every event without a value is counted, and said at the first one
    first = ("group_by field 'contry' has no value in some events: they count in the whole "
             "stream only (snapshot()['missing_segment_fields'] counts them)")
    for by_batch in (None, 300, 7):
        mon, caught = run(none, by_batch=by_batch)
        assert caught == [first] + expected and mon.warnings == expected, by_batch
        assert mon.snapshot()["missing_segment_fields"] == {"contry": n}
        assert mon.snapshot()["warnings"] == expected + [
            f"group_by field 'contry' had no value in {n} of {n} events: they count in the "
            "whole stream only"]
        back = Monitor.from_state(mon.to_state())
        assert back.warnings == expected and back.missing_segment_fields == {"contry": n}
    # a shorter stream: at flush, naming its length
    mon, caught = run(none, upto=120)
    assert caught == [first, expected[0].replace(f"first {GROUP_BY_PROBE} ", "first 120 ")]
    # one value among the first GROUP_BY_PROBE (the last of them): no typo warning, but
    # the events without a value are counted and said
    late = list(none)
    late[GROUP_BY_PROBE - 1] = "fr"
    for by_batch in (None, 300, GROUP_BY_PROBE + 1):
        mon, caught = run(late, by_batch=by_batch)
        assert caught == [first], by_batch
        assert mon.missing_segment_fields == {"contry": n - 1}
    # ... but one only after them is warned about, by either path
    later = list(none)
    later[GROUP_BY_PROBE] = "fr"
    for by_batch in (None, 300, GROUP_BY_PROBE + 1):
        assert run(later, by_batch=by_batch)[1] == [first] + expected, by_batch
    # two fields: only the one without values is named
    pairs = [("fr", None)] * n
    mon, caught = run(pairs, fields=["country", "devise"], by_batch=250)
    assert caught == [first.replace("'contry'", "'devise'"),
                      expected[0].replace("'contry'", "'devise'")]
    assert mon.missing_segment_fields == {"devise": n}
    # a state saved before the probe's end resumes it
    mon = Monitor(_metrics(), group_by="contry", every=0)
    mon.update_many(y[:600], s[:600])
    back = Monitor.from_state(mon.to_state())
    with _w.catch_warnings(record=True) as caught:
        _w.simplefilter("always")
        back.update_many(y[600:1200], s[600:1200])
    assert [str(c.message) for c in caught] == expected


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_check_many_refuses_exactly_what_update_many_refuses(data):
    """check_many (the service checks a batch before making it durable) raises the
    error update_many raises, with the same message and index, and a batch it passes
    is counted by update_many; it changes nothing either way."""
    import math

    mon = Monitor(dict(_metrics(), p60=se.Sliding(se.Recall(), period=60)),
                  group_by="country", max_segments=2)
    mon.update_many([True, False], [0.4, 0.6], t=[1.0, 2.0], segment=["fr", "de"])
    before = mon.to_state()
    m = data.draw(st.integers(0, 6))
    value = st.one_of(st.floats(-1, 2), st.just(math.nan), st.just(math.inf),
                      st.sampled_from([None, "x", True]))
    y = data.draw(st.lists(st.sampled_from([True, False, 1, 0, 2, "a", None]), min_size=m,
                           max_size=m))
    s = data.draw(st.lists(value, min_size=m, max_size=m))
    w = data.draw(st.one_of(st.none(), st.lists(value, min_size=m, max_size=m)))
    t = data.draw(st.one_of(st.none(), st.lists(value, min_size=m, max_size=m)))
    seg = data.draw(st.one_of(st.none(), st.lists(
        st.sampled_from(["fr", "de", "us", None, "__other__", 3.5, math.nan, ("a",)]),
        min_size=m, max_size=m)))

    def outcome(fn):
        try:
            fn(y, s, w, t, seg)
        except ValueError as e:
            return ("error", str(e), getattr(e, "index", None))
        return ("ok",)

    checked = outcome(mon.check_many)
    assert mon.to_state() == before  # check_many counts nothing
    applied = outcome(mon.update_many)
    assert checked == applied


@pytest.mark.parametrize("restore", ["json", "arrays"])
def test_single_events_after_a_restore_keep_each_segments_evaluation_points(restore):
    """Segments evaluate after every ``every``-th of their own events. A monitor restored
    from its state and then given single events writes the rows of one never restored
    (the first event after the restore was counted twice towards its segment's point,
    which then came one event early)."""
    rng = np.random.default_rng(11)
    y, s = rng.random(1500) < 0.3, rng.random(1500)
    seg = list(rng.choice(["a", "b"], 1500))
    singles = [(bool(rng.random() < 0.3), float(rng.random()), "a" if rng.random() < 0.5
                else "b") for _ in range(400)]

    def run(cut):
        rows = []
        mon = Monitor.default(group_by="segment", every=100)
        mon.update_many(y, s, segment=seg)
        if cut:
            mon = (Monitor.from_state(json.loads(json.dumps(mon.to_state())))
                   if restore == "json" else Monitor.from_array_state(mon.to_array_state()))
        mon.on_metrics.append(rows.append)
        for yi, si, gi in singles[:3]:
            mon.update(yi, si, segment=gi)
        mon.update_many(y[:700], s[:700], segment=seg[:700])  # (a batch: its own path)
        for yi, si, gi in singles[3:]:
            mon.update(yi, si, segment=gi)
        return [(r["segment"], r["n"], r.get("stream_n")) for r in rows]

    direct, resumed = run(False), run(True)
    # (each segment's rows fall after every 100th of its events: counted by hand)
    for g in ("a", "b"):
        total = seg.count(g) + seg[:700].count(g) + sum(x[2] == g for x in singles)
        ns = [n for key, n, _ in direct if key == g]
        assert ns == [n for n in range(seg.count(g) + 1, total + 1) if n % 100 == 0], g
    assert resumed == direct
