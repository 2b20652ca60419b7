"""Windows on the trusted path: ``update_trusted(*validate(...), t=...)`` against
``update_many`` and a brute-force recomputation with scikit-learn; one validation per
batch, atomic refusal with the bad element's index; the ``Sliding`` dispatch; the one
event-time parser shared with :mod:`streameval.events`.

Oracles: scikit-learn's metrics over the window contents computed by the documented
rules (last N events; events in ``(newest - P, newest]``), and plain loops of
``update``.
"""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import streameval
from streameval import events as ev
from streameval.metrics.base import from_state
from streameval.validation import ValidationError
from streameval.windows import Sliding, Tumbling, as_seconds, as_seconds_array
from streameval.windows.chunks import Chunk, EventRun

HYP = settings(max_examples=30, deadline=None)


def stream(seed, n):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    s = np.round(rng.random(n), 2)
    w = rng.choice([0.5, 1.0, 2.0], size=n)
    t = np.round(np.cumsum(rng.exponential(1.0, n)) - np.where(rng.random(n) < 0.3,
                                                              rng.exponential(4.0, n), 0.0), 1)
    return y, s, w, t


def sk_recall(y, s, w):
    y = np.asarray(y, dtype=bool)
    w = np.asarray(w, dtype=float)
    if not len(y) or w[y].sum() == 0:
        return math.nan
    return skm.recall_score(y, np.asarray(s) >= 0.5, sample_weight=w)


def sk_mae(y, s, w):
    if not len(y) or np.sum(w) == 0:
        return math.nan
    return skm.mean_absolute_error(y, s, sample_weight=w)


def same(a, b, tol=1e-9):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol


def contents_time(ts, period, lateness, upto):
    """Indices of the accepted events in the window after the first ``upto`` events."""
    newest = -math.inf
    accepted, late = [], 0
    for i in range(upto):
        t = ts[i]
        if t < newest and (t < newest - lateness or t <= newest - period):
            late += 1
            continue
        accepted.append(i)
        newest = max(newest, t)
    return [i for i in accepted if ts[i] > newest - period], late


# ---------------------------------------------------------------- trusted path


@HYP
@given(seed=st.integers(0, 10**6), size=st.integers(1, 50),
       sizes=st.lists(st.integers(0, 70), min_size=1, max_size=6))
def test_count_update_trusted_equals_update_many_and_sklearn(seed, size, sizes):
    y, s, w, _ = stream(seed, sum(sizes))
    a = Sliding(streameval.Recall(), size=size)
    b = Sliding(streameval.Recall(), size=size)
    i = 0
    for n in sizes:
        part = slice(i, i + n)
        a.update_many(y[part].astype(int), s[part], w[part])
        b.update_trusted(*b.validate(y[part].astype(int), s[part], w[part]))
        i += n
        lo = max(0, i - size)
        assert len(a) == len(b) == i - lo
        assert same(a.get(), b.get()) and same(b.get(), sk_recall(y[lo:i], s[lo:i], w[lo:i]))
        b._check()


@HYP
@given(seed=st.integers(0, 10**6), period=st.sampled_from([3.0, 15.0]),
       frac=st.sampled_from([0.0, 0.5, 1.0]),
       sizes=st.lists(st.integers(0, 70), min_size=1, max_size=6))
def test_time_update_trusted_equals_update_many_and_sklearn(seed, period, frac, sizes):
    y, s, w, t = stream(seed, sum(sizes))
    late_a, late_b = [], []
    a = Sliding(streameval.Recall(), period=period, lateness=frac * period, on_late=late_a.append)
    b = Sliding(streameval.Recall(), period=period, lateness=frac * period, on_late=late_b.append)
    i = 0
    for n in sizes:
        part = slice(i, i + n)
        a.update_many(y[part].astype(int), s[part], w[part], t=t[part])
        b.update_trusted(*b.validate(y[part].astype(int), s[part], w[part]),
                         t=as_seconds_array(t[part]))
        i += n
        inside, late = contents_time(t.tolist(), period, frac * period, i)
        assert len(a) == len(b) == len(inside)
        assert a.late == b.late == late == len(late_a) == len(late_b)
        assert a.events() == b.events()
        assert same(b.get(), sk_recall(y[inside], s[inside], w[inside]))
        b._check()
    # on_late: update_many passes the values as given, update_trusted the validated ones
    for ra, rb in zip(late_a, late_b):
        assert ra["t"] == rb["t"] and ra["y_pred"] == rb["y_pred"] and ra["w"] == rb["w"]
        assert bool(ra["y_true"]) == rb["y_true"] and type(rb["y_true"]) is bool


def test_regression_and_custom_labels_on_the_trusted_path():
    rng = np.random.default_rng(3)
    yt, yp, w = rng.normal(size=300), rng.normal(size=300), rng.choice([1.0, 2.0], 300)
    win = Sliding(streameval.MAE(), size=40)
    for k in range(0, 300, 70):
        win.update_trusted(*win.validate(yt[k:k + 70], yp[k:k + 70], w[k:k + 70]))
        hi = min(300, k + 70)
        assert same(win.get(), sk_mae(yt[max(0, hi - 40):hi], yp[max(0, hi - 40):hi],
                                      w[max(0, hi - 40):hi]))
        win._check()
    # custom labels: the window stores bools, gives the configured labels back
    y, s, w, t = stream(4, 200)
    labels = np.where(y, "spam", "ham").tolist()
    win = Sliding(streameval.Recall(pos_label="spam", neg_label="ham"), size=50)
    win.update_many(labels[:120], s[:120], w[:120])
    for i in range(120, 200):  # per-event updates revert batch events one at a time
        win.update(labels[i], s[i], w=w[i])
    assert {e[0] for e in win.events()} <= {"spam", "ham"}
    assert same(win.get(), sk_recall(y[150:], s[150:], w[150:]))
    win._check()
    back = from_state(json.loads(json.dumps(win.to_state())))
    assert back.events() == win.events()
    back._check()


def test_window_protocol_mirrors_the_metric_and_nests():
    win = Sliding(streameval.LogLoss(), period=60)
    assert win.columns == "binary" and win.score_bounds == streameval.LogLoss().score_bounds
    assert Sliding(streameval.MAE(), size=3).columns == "regression"
    assert isinstance(Sliding(streameval.Recall(), period=60), Sliding)
    assert isinstance(Sliding(streameval.Recall(), size=5), Sliding)
    assert type(Sliding(streameval.Recall(), size=5)) is not type(Sliding(streameval.Recall(), period=5))
    assert type(Sliding(streameval.Recall(), size=5).clone({"size": None, "period": 9.0})) \
        is type(Sliding(streameval.Recall(), period=5))
    # a window over a window: tumbling windows of a count sliding window
    y, s, w, _ = stream(5, 200)
    a = Tumbling(Sliding(streameval.Recall(), size=7), size=20)
    b = Tumbling(Sliding(streameval.Recall(), size=7), size=20)
    a.update_many(y.astype(int), s, w)
    for i in range(200):
        b.update(int(y[i]), s[i], w=w[i])
    ra, rb = list(a.closed()), list(b.closed())
    assert len(ra) == len(rb) == 10
    for k, (p, q) in enumerate(zip(ra, rb)):
        hi = 20 * (k + 1)
        assert same(p["value"], q["value"]) and same(p["value"], sk_recall(y[hi - 7:hi], s[hi - 7:hi], w[hi - 7:hi]))


def test_tumbling_update_trusted_equals_update_many():
    y, s, w, t = stream(6, 600)
    a = Tumbling(streameval.Recall(), period=20.0, lateness=3.0)
    b = Tumbling(streameval.Recall(), period=20.0, lateness=3.0)
    for k in range(0, 600, 150):
        a.update_many(y[k:k + 150].astype(int), s[k:k + 150], w[k:k + 150], t=t[k:k + 150])
        b.update_trusted(*b.validate(y[k:k + 150], s[k:k + 150], w[k:k + 150]), t=t[k:k + 150])
        b._check()
    a.flush()
    b.flush()
    ra, rb = list(a.closed()), list(b.closed())
    assert [(r["index"], r["n"]) for r in ra] == [(r["index"], r["n"]) for r in rb]
    assert all(same(p["value"], q["value"]) for p, q in zip(ra, rb)) and a.late == b.late > 0


# --------------------------------------------------------------- atomic refusal


@pytest.mark.parametrize("make", [
    lambda: Sliding(streameval.Recall(), period=10.0, lateness=2.0),
    lambda: Sliding(streameval.Recall(), size=5),
    lambda: Tumbling(streameval.Recall(), period=10.0, lateness=2.0),
])
def test_bad_element_in_a_batch_raises_with_index_and_changes_nothing(make):
    win = make()
    win.update_many([1, 0, 1, 1], [0.9, 0.2, 0.6, 0.4], t=[100.0, 101.0, 102.0, 103.0])
    before = json.dumps(win.to_state())
    # element 3 is bad; element 1 is late (refused) and must not be counted either
    with pytest.raises(ValidationError) as e:
        win.update_many([1, 1, 0, 1, 0], [0.5, 0.5, 0.5, float("nan"), 0.5],
                        t=[104.0, 50.0, 105.0, 106.0, 107.0])
    assert e.value.index == 3 and e.value.name == "y_pred"
    with pytest.raises(ValidationError) as e:
        win.update_many([1, 2], [0.5, 0.5], t=[104.0, 105.0])
    assert e.value.index == 1 and "label must be" in str(e.value)
    if win.period is not None:  # count windows ignore t
        with pytest.raises(ValidationError) as e:
            win.update_many([1, 1], [0.5, 0.5], t=[104.0, float("inf")])
        assert e.value.index == 1 and str(e.value).startswith("t[1] = inf: event time")
    assert json.dumps(win.to_state()) == before
    assert win.late == 0
    win._check()


def test_late_single_event_is_validated_with_the_per_event_message():
    win = Sliding(streameval.Recall(), period=10.0)
    win.update(1, 0.5, t=100.0)
    with pytest.raises(ValueError, match=r"^y_pred = nan: score must be a finite number$"):
        win.update(1, float("nan"), t=1.0)
    with pytest.raises(ValueError, match=r"^w = -1(\.0)?: weight must be"):
        win.update(1, 0.5, w=-1, t=1.0)
    assert win.late == 0
    win.update(1, 0.5, t=1.0)
    assert win.late == 1


# ------------------------------------------------------------------ chunks


def test_chunk_and_event_run_interface():
    ch = Chunk(np.array([True, False, True, True]), np.array([0.1, 0.2, 0.3, 0.4]),
               np.array([1.0, 2.0, 3.0, 4.0]))
    assert len(ch) == 4
    ch.pop_front(1)
    y, s, w = ch.front(2)
    assert y.tolist() == [False, True] and s.tolist() == [0.2, 0.3] and w.tolist() == [2.0, 3.0]
    assert ch.front(1, skip=2)[1].tolist() == [0.4] and len(ch) == 3
    ch.check()
    run = EventRun([(1, 0.5, 1.0), (0, 0.25, 2.0), (1, 0.75, 1.0)])
    assert run.front(2, skip=1) == ([0, 1], [0.25, 0.75], [2.0, 1.0])
    run.pop_front(2)
    assert list(run) == [(1, 0.75, 1.0)] and len(run) == 1
    run.check()


def test_old_count_state_with_list_chunks_loads():
    """A state written by the single-module windows (list chunks, default layout)."""
    old = {"type": "Sliding", "version": 1, "params": {"size": 4, "period": None, "lateness": 0.0},
           "data": {"metric": streameval.Recall().update_many([1, 0, 1, 1], [0.9, 0.8, 0.3, 0.6]).to_state(),
                    "events": [[1, 0.9, 1.0], [0, 0.8, 1.0], [1, 0.3, 1.0], [1, 0.6, 1.0]],
                    "newest": None, "late": 0, "chunks": [[2, False], [2, True]]}}
    win = from_state(json.loads(json.dumps(old)))
    assert isinstance(win, Sliding) and len(win) == 4 and type(win._chunks[0]) is Chunk
    win._check()
    win.update(0, 0.1)
    win.update(1, 0.7)  # the two batch events expire
    assert same(win.get(), sk_recall([1, 1, 0, 1], [0.3, 0.6, 0.1, 0.7], [1.0] * 4))
    win._check()


# ------------------------------------------------------------ one time parser


def test_one_time_parser_in_events():
    assert as_seconds is ev.as_seconds and as_seconds_array is ev.as_seconds_array
    vals = [5, 2.5, np.int64(7), np.float32(1.5), dt.datetime(1970, 1, 1, 0, 1),
            dt.datetime(1970, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            np.datetime64("1970-01-01T00:00:03")]
    expected = [5.0, 2.5, 7.0, 1.5, 60.0, 0.0, 3.0]
    assert [as_seconds(v) for v in vals] == expected
    assert [ev.parse_time(v) for v in vals] == expected  # events reads the same values
    assert as_seconds_array(np.array(vals, dtype=object)).tolist() == expected
    assert ev.parse_time("1970-01-01T00:01:00Z") == 60.0  # and strings, for log rows
    for bad in ("60", True, None, float("nan"), np.datetime64("NaT"), 10**400):
        with pytest.raises(ValidationError, match="event time must be finite epoch seconds"):
            as_seconds(bad)
    with pytest.raises(ValidationError) as e:
        as_seconds_array([1.0, dt.datetime(2024, 1, 1), "x"])
    assert e.value.index == 2 and str(e.value).startswith("t[2] = 'x': event time")
    with pytest.raises(ValidationError) as e:
        as_seconds_array(np.array(["2024-01-01", "NaT"], dtype="datetime64[s]"))
    assert e.value.index == 1
    with pytest.raises(ValueError, match="y_true has 3 elements but t has 2"):
        as_seconds_array([1, 2], 3)


# ------------------------------------- metrics whose validated columns are their own


TEXT_HYP = ["the cat sat on the mat", "a dog ran on a mat", "the cat ran", "on the mat sat a dog",
            "a cat sat", "the dog sat on the cat", "mat on the dog", "the the cat"]
TEXT_REF = ["the cat sat on a mat", "a dog ran", "the cat sat", "a dog sat on the mat",
            "the cat sat on the mat", "the dog sat", "the mat", "the cat"]


@pytest.mark.parametrize("make", [
    lambda m: Sliding(m, size=3),
    lambda m: Sliding(m, period=2.5),
], ids=["count", "time"])
@pytest.mark.parametrize("metric", [streameval.BLEU, streameval.ROUGE])
def test_window_trusted_path_over_text_metric(make, metric):
    """Text metrics validate into per-event statistics (not their inputs): a window's
    update_trusted keeps events it can expire, and equals update_many and a fresh
    metric fed exactly the window's events (brute force)."""
    a, b = make(metric()), make(metric())
    n = len(TEXT_HYP)
    t = np.arange(n, dtype=float)
    timed = a.period is not None
    for lo, hi in [(0, 2), (2, 5), (5, 6), (6, 8)]:
        kw = {"t": t[lo:hi]} if timed else {}
        a.update_trusted(*a.validate(TEXT_HYP[lo:hi], TEXT_REF[lo:hi]), **kw)
        b.update_many(TEXT_HYP[lo:hi], TEXT_REF[lo:hi], **kw)
        keep = [i for i in range(hi) if t[i] > t[hi - 1] - 2.5] if timed else \
            list(range(max(0, hi - 3), hi))
        oracle = metric()
        for i in keep:
            oracle.update(TEXT_HYP[i], TEXT_REF[i])
        assert same(a.get(), oracle.get()) and same(b.get(), oracle.get())
        assert a.to_state() == b.to_state()
        assert same(from_state(a.to_state()).get(), oracle.get())


def counting(monkeypatch, cls):
    """Count the ``validate``, ``update_many`` and ``revert_many`` calls on instances of
    the metric class ``cls`` (wrappers around the real methods: a spy, the metric itself
    runs)."""
    calls = {"validate": 0, "update_many": 0, "revert_many": 0}
    for name in calls:
        method = getattr(cls, name)

        def spy(self, *args, _name=name, _method=method, **kwargs):
            calls[_name] += 1
            return _method(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, spy)
    return calls


@pytest.mark.parametrize("labels", [None, ("spam", "ham")])
@pytest.mark.parametrize("kind", ["count", "time"])
def test_batches_are_validated_once_and_expire_on_the_trusted_path(kind, labels, monkeypatch):
    y, s, w, t = stream(11, 600)
    t = np.sort(t)
    metric = (streameval.Recall() if labels is None
              else streameval.Recall(pos_label=labels[0], neg_label=labels[1]))
    calls = counting(monkeypatch, type(metric))
    yl = y if labels is None else np.where(y, labels[0], labels[1]).tolist()
    win = Sliding(metric, size=90) if kind == "count" else Sliding(metric, period=20.0)
    batches = 0
    for a in range(0, 600, 37):
        win.update_many(yl[a:a + 37], s[a:a + 37], w[a:a + 37],
                        t=None if kind == "count" else t[a:a + 37])
        batches += 1
        hi = min(600, a + 37)
        inside = (np.arange(600)[max(0, hi - 90):hi] if kind == "count"
                  else np.flatnonzero((t > t[min(a + 36, 599)] - 20.0)
                                      & (np.arange(600) < a + 37)))
        assert same(win.get(), sk_recall(y[inside], s[inside], w[inside]))
    assert calls == {"validate": batches, "update_many": 0, "revert_many": 0}


@pytest.mark.parametrize("pos,neg,single", [
    ("spam", "ham", None),  # flags in the store, decoded at the edge
    (0, 1, True),  # labels equal to bools: stored decoded; a single True means 1 (neg)
    (False, True, None),
    (1, 0, None),
])
def test_time_window_mixing_single_events_and_batches_with_custom_labels(pos, neg, single,
                                                                         monkeypatch):
    # single events are kept as given (a numpy float score, a label that only equals
    # the configured one): they expire through the validating path, batch events
    # through the trusted one; same values either way, and after a state round trip
    y, s, w, t = stream(12, 400)
    t = np.sort(t)
    labels = [pos if v else neg for v in y.tolist()]
    win = Sliding(streameval.Recall(pos_label=pos, neg_label=neg), period=15.0)
    i = 0
    while i < 400:
        if (i // 50) % 2:
            given = labels[i]
            if single is not None and given == single:
                given = bool(single)  # the same label as a bool (True == 1)
            win.update(given, np.float64(s[i]), w=w[i], t=t[i])
            i += 1
        else:
            win.update_many(labels[i:i + 25], s[i:i + 25], w[i:i + 25], t=t[i:i + 25])
            i += 25
        inside = np.flatnonzero((t > t[i - 1] - 15.0) & (np.arange(400) < i))
        assert same(win.get(), sk_recall(y[inside], s[inside], w[inside]))
        if i == 200:
            state = json.loads(json.dumps(win.to_state()))
            # the state holds the configured labels (as before), never the flags
            assert {type(e[1]) for e in state["data"]["events"]} <= {type(pos), bool}
            assert all(e[1] in (pos, neg) for e in state["data"]["events"])
            win = from_state(state)
    assert {e[1] for e in win.events()} <= {pos, neg}
    win._check()
    # restored, the store expires every event on the trusted path (the state's
    # configured labels become flags again, its scores plain floats)
    calls = counting(monkeypatch, type(win.metric))
    win = from_state(json.loads(json.dumps(win.to_state())))
    later = t[:30] + 1e6
    win.update_many(labels[:30], s[:30], w[:30], t=later)
    last = np.flatnonzero(later > later[29] - 15.0)
    assert same(win.get(), sk_recall(y[last], s[last], w[last]))
    if isinstance(pos, str):  # (bool-like labels kept as given take revert_many)
        assert calls["validate"] == 1 and calls["revert_many"] == 0


def test_time_window_flag_store_reads_old_states():
    # a state written before flags were stored: configured labels in the events
    old = {"type": "Sliding", "version": 1,
           "params": {"size": None, "period": 10.0, "lateness": 0.0},
           "data": {"metric": streameval.Recall(pos_label="spam", neg_label="ham")
                    .update_many(["spam", "ham", "spam"], [0.9, 0.8, 0.1]).to_state(),
                    "newest": 3.0, "late": 0, "chunks": None,
                    "events": [[1.0, "spam", 0.9, 1.0], [2.0, "ham", 0.8, 1.0],
                               [3.0, "spam", 0.1, 1.0]]}}
    win = from_state(old)
    assert win.events() == [(1.0, "spam", 0.9, 1.0), (2.0, "ham", 0.8, 1.0),
                            (3.0, "spam", 0.1, 1.0)]
    assert win.get() == 0.5
    win.update_many(["ham"], [0.3], t=[12.5])  # expires the first two events
    assert win.events() == [(3.0, "spam", 0.1, 1.0), (12.5, "ham", 0.3, 1.0)]
    # stored as bool "is positive" flags: no decoding into label objects and back
    assert [e[1] for e in win._events] == [True, False]
    assert win.get() == 0.0
    win._check()



@pytest.mark.parametrize("seed", [0, 1])
def test_count_window_defers_expired_ranking_events_to_the_next_read(seed):
    # a window of exact AUC (and AP sharing its order) fed batches and read every few:
    # the expired events' removal waits for the read (the metric's _gone); every read
    # equals scikit-learn over the window's events, whatever came in between (single
    # events, weighted batches, state round trips), and so does a window fed the same
    # events without deferral (a read after every batch)
    from streameval.monitor import share_orders

    def shared(win):  # AP over the window's order (as a Monitor builds it)
        return share_orders({"auc": win, "ap": Sliding(streameval.AveragePrecision(),
                                                       size=size)})["ap"]

    rng = np.random.default_rng(seed)
    n, size = 12000, 2000
    y = rng.random(n) < 0.2
    s = 1.0 / (1.0 + np.exp(1.0 - 2.0 * y - rng.standard_normal(n)))
    if seed:
        s = np.round(s, 3)  # ties
    w = np.ones(n)
    win = Sliding(streameval.ROCAUC(), size=size)
    ap = shared(win)
    eager = Sliding(streameval.ROCAUC(), size=size)
    deferred = 0
    a = 0
    while a < n:
        kind = rng.random()
        b = min(n, a + int(rng.choice([1, 5, 150, 400, 700])))
        if kind < 0.1:
            for i in range(a, b):
                win.update(bool(y[i]), float(s[i]))
        elif kind < 0.2:  # weights given: all 1, then (late: no deferral after) 1 or 2
            if a > 2 * n // 3:
                w[a:b] = rng.integers(1, 3, b - a)
            win.update_many(y[a:b], s[a:b], w[a:b])
        else:
            win.update_many(y[a:b], s[a:b])
        eager.update_many(y[a:b], s[a:b], None if (w[a:b] == 1).all() else w[a:b])
        deferred += bool(win.metric._gone)
        if rng.random() < 0.05:
            win = from_state(json.loads(json.dumps(win.to_state())))
            ap = shared(win)
        a = b
        if rng.random() < 0.3 or a == n:
            lo = max(0, a - size)
            yy, ss, ww = y[lo:a], s[lo:a], w[lo:a]
            assert win.get() == pytest.approx(skm.roc_auc_score(yy, ss, sample_weight=ww),
                                              abs=1e-12)
            assert ap.get() == pytest.approx(
                skm.average_precision_score(yy, ss, sample_weight=ww), abs=1e-12)
            assert win.get() == eager.get()
            assert win.metric.to_state() == eager.metric.to_state()
            assert not win.metric._gone
            win._check()
    assert deferred > 5
