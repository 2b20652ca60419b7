"""Sliding and Tumbling windows against brute-force recomputation on the window contents.

Oracles: a window's contents are recomputed from the whole stream by the rules of
DESIGN.md section 4 (last N events; events in ``(newest - P, newest]``; aligned tumbling
windows), and the metric over those contents is scikit-learn's (ROC AUC, average
precision, precision, recall) or, for the generic window machinery, an exact multiset
metric defined here whose value is a correctly rounded function of its contents.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import metrics as river_metrics
from sklearn import metrics as skm

import streameval
from streameval.metrics.base import Metric, capabilities, check_real, check_weight, from_state
from streameval.windows import Sliding, Tumbling, as_seconds, as_seconds_array

HYP = settings(max_examples=60, deadline=None)


# ------------------------------------------------------------- an exact test metric


class WindowTestBag(Metric):
    """Keeps the multiset of its events; value: the correctly rounded weighted mean of
    ``score * (+1 if positive else -1)``. Exact under update/revert in any order."""

    def __init__(self):
        self._bag = collections.Counter()

    def update(self, y_true, y_pred, w=1.0):
        if y_true not in (0, 1):
            raise ValueError(f"y_true = {y_true!r}: label must be 0 or 1")
        self._bag[(bool(y_true), check_real(y_pred), check_weight(w))] += 1

    def revert(self, y_true, y_pred, w=1.0):
        key = (bool(y_true), check_real(y_pred), check_weight(w))
        assert self._bag[key] > 0, f"reverting an event never added: {key}"
        self._bag[key] -= 1
        if not self._bag[key]:
            del self._bag[key]

    def get(self):
        return _bag_value([(y, s, w) for (y, s, w), c in self._bag.items() for _ in range(c)])

    def _get_data(self):
        return [[y, s, w, c] for (y, s, w), c in sorted(self._bag.items())]

    def _set_data(self, data):
        self._bag = collections.Counter({(bool(y), s, w): c for y, s, w, c in data})

    def _merge(self, other):
        self._bag.update(other._bag)


def _bag_value(events):
    """Oracle of WindowTestBag over a list of (y_true, score, w)."""
    total = math.fsum(float(w) for _, _, w in events)
    if not events or total == 0:
        return math.nan
    return math.fsum(float(w) * float(s) * (1 if y else -1) for y, s, w in events) / total


def same(a, b, tol=1e-12):
    if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
        return isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol


# ---------------------------------------------------------------------- streams


def stream(seed, n, *, ties=True, weights=True, dyadic=True):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.4).astype(int).tolist()
    s = rng.random(n)
    if ties:
        s = np.round(s, 1)  # many tied scores
    s = s.tolist()
    if not weights:
        w = [1.0] * n
    elif dyadic:
        w = rng.choice([0.0, 0.25, 0.5, 1.0, 2.0, 3.0], size=n).tolist()  # sums exact
    else:
        w = rng.uniform(0.1, 3.0, size=n).tolist()
    return y, s, w


def timed_stream(seed, n, jitter=5.0, step=1.0):
    """Event times mostly increasing, with out-of-order events (some very late)."""
    rng = np.random.default_rng(seed)
    y, s, w = stream(seed + 1000, n)
    base = np.cumsum(rng.exponential(step, n))
    back = np.where(rng.random(n) < 0.3, rng.exponential(jitter, n), 0.0)
    t = np.round(base - back, 2).tolist()  # rounding makes equal times frequent
    return y, s, w, t


def oracle_count(events, size):
    return events[-size:]


def oracle_time(events, period, lateness):
    """Accepted events and the window contents, by the documented rules."""
    accepted, late = [], 0
    newest = -math.inf
    for e in events:
        t = e[0]
        if t < newest and (t < newest - lateness or t <= newest - period):
            late += 1
            continue
        accepted.append(e)
        newest = max(newest, t)
    inside = [e for e in accepted if e[0] > newest - period]
    return inside, late, newest


# ------------------------------------------------------------------ sklearn oracles


def sk_auc(y, s, w):
    y = np.asarray(y)
    if len(set(y.tolist())) < 2 or sum(wi for yi, wi in zip(y, w) if yi) == 0 or \
            sum(wi for yi, wi in zip(y, w) if not yi) == 0:
        return math.nan
    return skm.roc_auc_score(y, s, sample_weight=w)


def sk_ap(y, s, w):
    if sum(wi for yi, wi in zip(y, w) if yi) == 0:
        return math.nan
    return skm.average_precision_score(y, s, sample_weight=w)


def sk_precision(y, s, w, threshold=0.5):
    pred = [int(si >= threshold) for si in s]
    if sum(wi for pi, wi in zip(pred, w) if pi) == 0:
        return math.nan
    return skm.precision_score(y, pred, sample_weight=w, zero_division=np.nan)


def sk_recall(y, s, w, threshold=0.5):
    pred = [int(si >= threshold) for si in s]
    if sum(wi for yi, wi in zip(y, w) if yi) == 0:
        return math.nan
    return skm.recall_score(y, pred, sample_weight=w, zero_division=np.nan)


# ======================================================================= Sliding


def test_sliding_count_matches_brute_force_with_ties_and_weights():
    y, s, w = stream(1, 3000)
    win = Sliding(WindowTestBag(), size=97)
    seen = []
    for i, (yi, si, wi) in enumerate(zip(y, s, w)):
        win.update(yi, si, w=wi)
        seen.append((yi, si, wi))
        inside = oracle_count(seen, 97)
        assert len(win) == len(inside)
        assert same(win.get(), _bag_value(inside))
        if i % 250 == 0:
            win._check()
    assert [tuple(e) for e in win.events()] == inside


def test_sliding_time_with_out_of_order_events_matches_brute_force():
    y, s, w, t = timed_stream(2, 3000)
    late_seen = []
    win = Sliding(WindowTestBag(), period=30.0, lateness=4.0, on_late=late_seen.append)
    seen = []
    for i, (yi, si, wi, ti) in enumerate(zip(y, s, w, t)):
        win.update(yi, si, w=wi, t=ti)
        seen.append((ti, yi, si, wi))
        if i % 3:
            continue
        inside, late, newest = oracle_time(seen, 30.0, 4.0)
        assert len(win) == len(inside)
        assert win.late == late == len(late_seen)
        assert win.newest == newest
        assert same(win.get(), _bag_value([e[1:] for e in inside]))
        if i % 250 == 0:
            win._check()
    # the window holds the events sorted by time, ties in arrival order
    inside, late, _ = oracle_time(seen, 30.0, 4.0)
    assert win.late == late
    assert win.events() == sorted(inside, key=lambda e: e[0])
    assert late > 100  # the stream does exercise refusals
    assert all(r["t"] < r["newest"] - 4.0 or r["t"] <= r["newest"] - 30.0 for r in late_seen)


def test_sliding_time_boundary_is_half_open():
    win = Sliding(WindowTestBag(), period=10, lateness=10)
    win.update(1, 0.5, t=0)
    win.update(1, 0.25, t=10)  # (0, 10]: the event at t=0 has expired
    assert len(win) == 1 and win.get() == 0.25
    win.update(0, 0.5, t=0)  # within lateness, but t <= newest - period: refused
    assert win.late == 1 and len(win) == 1
    win.update(0, 0.5, t=0.001)  # inside (0, 10]
    assert len(win) == 2


def test_sliding_time_lateness_boundary():
    win = Sliding(WindowTestBag(), period=100, lateness=5)
    win.update(1, 0.5, t=50)
    win.update(1, 0.5, t=45)  # exactly lateness behind: accepted
    assert win.late == 0 and len(win) == 2
    win.update(1, 0.5, t=44.999)  # just beyond: refused
    assert win.late == 1 and len(win) == 2


def test_sliding_accepts_datetimes_naive_as_utc_and_datetime64():
    win = Sliding(WindowTestBag(), period=dt.timedelta(minutes=1))
    t0 = dt.datetime(2024, 5, 1, 12, 0, 0)
    win.update(1, 0.5, t=t0)
    win.update(1, 0.25, t=dt.datetime(2024, 5, 1, 12, 0, 30, tzinfo=dt.timezone.utc))
    win.update(1, 0.75, t=np.datetime64("2024-05-01T12:01:00"))
    assert win.newest == dt.datetime(2024, 5, 1, 12, 1, tzinfo=dt.timezone.utc).timestamp()
    assert len(win) == 2  # 12:00:00 is not in (12:00:00, 12:01:00]
    assert same(win.get(), _bag_value([(1, 0.25, 1.0), (1, 0.75, 1.0)]))
    tz = dt.timezone(dt.timedelta(hours=2))
    assert as_seconds(dt.datetime(2024, 5, 1, 14, 0, tzinfo=tz)) == as_seconds(dt.datetime(2024, 5, 1, 12))
    arr = as_seconds_array(np.array(["1970-01-01T00:00:01.5"], dtype="datetime64[ms]"))
    assert arr.tolist() == [1.5]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "12:00", None, True, [1.0]])
def test_bad_event_time_raises_and_changes_nothing(bad):
    win = Sliding(WindowTestBag(), period=60)
    win.update(1, 0.5, t=10.0)
    before = win.to_state()
    with pytest.raises(ValueError, match="t = "):
        win.update(1, 0.5, t=bad)
    assert win.to_state() == before


def test_bad_event_time_in_batch_names_index():
    win = Sliding(WindowTestBag(), period=60)
    with pytest.raises(ValueError, match=r"t\[2\] = nan"):
        win.update_many([1, 0, 1], [0.1, 0.2, 0.3], t=[1.0, 2.0, float("nan")])
    with pytest.raises(ValueError, match=r"t\[1\] = 'x'"):
        win.update_many([1, 0], [0.1, 0.2], t=[dt.datetime(2024, 1, 1), "x"])
    assert len(win) == 0


def test_sliding_bad_event_is_atomic_even_when_late():
    win = Sliding(WindowTestBag(), size=3)
    for i in range(5):
        win.update(1, i / 10)
    before = win.to_state()
    with pytest.raises(ValueError, match="y_pred = nan"):
        win.update(1, float("nan"))
    with pytest.raises(ValueError, match="w = -1"):
        win.update(1, 0.5, w=-1)
    assert win.to_state() == before
    tw = Sliding(WindowTestBag(), period=10)
    tw.update(1, 0.5, t=100)
    with pytest.raises(ValueError, match="y_pred = nan"):
        tw.update(1, float("nan"), t=1)  # late *and* bad: the error wins, not counted
    assert tw.late == 0


def test_sliding_batch_error_names_index_and_changes_nothing():
    for win in (Sliding(WindowTestBag(), size=4), Sliding(WindowTestBag(), period=5.0)):
        win.update_many([1, 0, 1], [0.1, 0.2, 0.3], t=[1.0, 2.0, 3.0])
        before = win.to_state()
        for n in (3, 10):  # smaller and larger than the window
            s = [0.5] * n
            s[n - 2] = float("nan")
            with pytest.raises(ValueError, match=rf"y_pred\[{n - 2}\] = nan|event {n - 2}: y_pred = nan"):
                win.update_many([1] * n, s, t=[4.0 + i for i in range(n)])
            assert win.to_state() == before


def test_sliding_needs_revert_and_one_of_size_period():
    class NoRevert:
        def update(self, y_true, y_pred, w=1.0):
            pass

        def get(self):
            return 0.0

    with pytest.raises(ValueError, match="revert"):
        Sliding(NoRevert(), size=10)
    with pytest.raises(ValueError, match="exactly one"):
        Sliding(WindowTestBag())
    with pytest.raises(ValueError, match="exactly one"):
        Sliding(WindowTestBag(), size=3, period=3)
    with pytest.raises(ValueError, match="size = 0"):
        Sliding(WindowTestBag(), size=0)
    with pytest.raises(ValueError, match="lateness = 20.0 > period"):
        Sliding(WindowTestBag(), period=10, lateness=20)
    with pytest.raises(ValueError, match="lateness = -1"):
        Sliding(WindowTestBag(), period=10, lateness=-1)
    with pytest.raises(ValueError, match="only period"):
        Sliding(WindowTestBag(), size=10, lateness=1)
    with pytest.raises(ValueError, match="needs the event time"):
        Sliding(WindowTestBag(), period=10).update(1, 0.5)


def test_sliding_wraps_river_metrics():
    y, s, _ = stream(3, 500, weights=False)
    win = Sliding(river_metrics.Accuracy(), size=50)
    for i, (yi, si) in enumerate(zip(y, s)):
        win.update(bool(yi), si >= 0.5)
        if i % 9:
            continue
        inside = list(zip(y, s))[max(0, i - 49): i + 1]
        expected = skm.accuracy_score([a for a, _ in inside], [b >= 0.5 for _, b in inside])
        assert win.get() == pytest.approx(expected, abs=1e-12)



def test_time_window_over_a_river_metric_expires_batches():
    # a metric without the trusted path: batches expire through a loop of its revert
    y, s, _ = stream(4, 400, weights=False)
    t = np.cumsum(np.random.default_rng(4).exponential(1.0, 400))
    win = Sliding(river_metrics.Accuracy(), period=30.0)
    for a in range(0, 400, 23):
        b = min(400, a + 23)
        win.update_many([bool(v) for v in y[a:b]], [v >= 0.5 for v in s[a:b]], t=t[a:b])
        inside = np.flatnonzero((t > t[b - 1] - 30.0) & (np.arange(400) < b))
        expected = skm.accuracy_score(np.asarray(y)[inside].astype(bool),
                                      np.asarray(s)[inside] >= 0.5)
        assert win.get() == pytest.approx(expected, abs=1e-12)
        assert len(win) == len(inside)


# -- update_many equals a loop of update ---------------------------------------------


def _loop_vs_batch(make, batches, timed):
    a, b = make(), make()
    for y, s, w, t in batches:
        for i in range(len(y)):
            a.update(y[i], s[i], w=w[i], t=t[i] if timed else None)
        b.update_many(y, s, w=w, t=t if timed else None)
        assert len(a) == len(b)
        assert [tuple(e) for e in a.events()] == [tuple(e) for e in b.events()]
        assert same(a.get(), b.get())
        assert a.late == b.late
        b._check()


@HYP
@given(seed=st.integers(0, 10**6), size=st.integers(1, 40),
       sizes=st.lists(st.integers(0, 90), min_size=1, max_size=6))
def test_sliding_count_update_many_equals_loop(seed, size, sizes):
    y, s, w = stream(seed, sum(sizes))
    batches, i = [], 0
    for n in sizes:
        batches.append((y[i:i + n], np.array(s[i:i + n]), np.array(w[i:i + n]), None))
        i += n
    _loop_vs_batch(lambda: Sliding(WindowTestBag(), size=size), batches, timed=False)


@HYP
@given(seed=st.integers(0, 10**6), period=st.sampled_from([1.0, 7.5, 20.0]),
       frac=st.sampled_from([0.0, 0.3, 1.0]),
       sizes=st.lists(st.integers(0, 80), min_size=1, max_size=6))
def test_sliding_time_update_many_equals_loop(seed, period, frac, sizes):
    y, s, w, t = timed_stream(seed, sum(sizes), jitter=4.0)
    batches, i = [], 0
    for n in sizes:
        batches.append((np.array(y[i:i + n]), s[i:i + n], w[i:i + n], np.array(t[i:i + n])))
        i += n
    _loop_vs_batch(lambda: Sliding(WindowTestBag(), period=period, lateness=frac * period),
                   batches, timed=True)


def test_sliding_update_many_without_weights_and_rebuild_paths():
    y, s, _ = stream(5, 2000, weights=False)
    for size in (10, 300, 1000):
        a, b = Sliding(WindowTestBag(), size=size), Sliding(WindowTestBag(), size=size)
        i = 0
        for n in (5, 1, 250, 40, 1100, 3, 600):  # small batches revert, large ones rebuild
            b.update_many(y[i:i + n], s[i:i + n])
            for j in range(i, i + n):
                a.update(y[j], s[j])
            i += n
            assert a.events() == b.events() and same(a.get(), b.get())
            b._check()


# -- state and merge -------------------------------------------------------------------


def test_sliding_state_round_trip_through_json_then_continue():
    y, s, w, t = timed_stream(7, 800)
    for make in (lambda: Sliding(WindowTestBag(), size=60),
                 lambda: Sliding(WindowTestBag(), period=25.0, lateness=3.0)):
        a = make()
        for i in range(400):
            a.update(y[i], s[i], w=w[i], t=t[i])
        b = from_state(json.loads(json.dumps(a.to_state())))
        # one case class per kind of window, both instances of Sliding
        assert isinstance(b, Sliding) and type(b) is type(a)
        assert b.events() == a.events() and b.late == a.late
        b._check()
        for i in range(400, 800):
            a.update(y[i], s[i], w=w[i], t=t[i])
            b.update(y[i], s[i], w=w[i], t=t[i])
            assert same(a.get(), b.get())
        assert a.to_state() == b.to_state()


def test_state_keeps_tuples_dicts_and_arrays_in_events():
    class Echo(WindowTestBag):
        """Accepts river probability dicts and tuples as scores."""

        def _s(self, p):
            return p[True] if isinstance(p, dict) else float(p[0]) if isinstance(p, (tuple, np.ndarray)) else p

        def update(self, y_true, y_pred, w=1.0):
            super().update(y_true, self._s(y_pred), w)

        def revert(self, y_true, y_pred, w=1.0):
            super().revert(y_true, self._s(y_pred), w)

    win = Sliding(Echo(), size=5)
    win.update(1, {True: 0.75, False: 0.25})
    win.update(0, (0.5, "x"))
    win.update(1, np.array([0.25]))
    state = json.loads(json.dumps(win.to_state()))
    back = from_state(state)
    (_, p0, _), (_, p1, _), (_, p2, _) = back.events()
    assert p0 == {True: 0.75, False: 0.25} and p1 == (0.5, "x")
    assert isinstance(p2, np.ndarray) and p2.tolist() == [0.25]
    for _ in range(5):
        back.update(0, 0.0)  # reverting the restored events works
    back._check()


def test_state_of_a_window_over_a_river_metric_is_refused_clearly():
    win = Sliding(river_metrics.Accuracy(), size=3)
    with pytest.raises(ValueError, match="no to_state"):
        win.to_state()


def test_sliding_count_merge_is_concatenation():
    y, s, w = stream(8, 300)
    a, b, whole = (Sliding(WindowTestBag(), size=50) for _ in range(3))
    for i in range(300):
        (a if i < 200 else b).update(y[i], s[i], w=w[i])
        whole.update(y[i], s[i], w=w[i])
    a.merge(b)
    assert a.events() == whole.events() and same(a.get(), whole.get())
    a._check()


def test_sliding_time_merge_is_union_by_time():
    y, s, w, t = timed_stream(9, 600)
    a = Sliding(WindowTestBag(), period=40.0, lateness=5.0)
    b = Sliding(WindowTestBag(), period=40.0, lateness=5.0)
    for i in range(600):
        (a if i % 3 else b).update(y[i], s[i], w=w[i], t=t[i])
    newest = max(a.newest, b.newest)
    expected = sorted([e for e in a.events() + b.events() if e[0] > newest - 40.0], key=lambda e: e[0])
    late = a.late + b.late
    a.merge(b)
    assert sorted(a.events()) == sorted(expected) and a.late == late
    assert same(a.get(), _bag_value([e[1:] for e in expected]))
    a._check()
    with pytest.raises(ValueError, match="cannot merge"):
        a.merge(Sliding(WindowTestBag(), period=41.0))


# ================================================================ real metrics


METRICS = {
    "ROCAUC": (lambda: streameval.ROCAUC(), sk_auc),
    "AveragePrecision": (lambda: streameval.AveragePrecision(), sk_ap),
    "Precision": (lambda: streameval.Precision(), sk_precision),
    "Recall": (lambda: streameval.Recall(), sk_recall),
}


@pytest.mark.parametrize("name", list(METRICS))
def test_sliding_count_over_real_metrics_equals_sklearn(name):
    make, oracle = METRICS[name]
    y, s, w = stream(11, 1500)
    win = Sliding(make(), size=150)
    for i in range(len(y)):
        win.update(y[i], s[i], w=w[i])
        if i % 23 == 0 or i < 40:
            lo = max(0, i - 149)
            expected = oracle(y[lo:i + 1], s[lo:i + 1], w[lo:i + 1])
            assert same(win.get(), expected), (i, win.get(), expected)
    win._check()


@pytest.mark.parametrize("name", list(METRICS))
def test_sliding_time_over_real_metrics_equals_sklearn(name):
    make, oracle = METRICS[name]
    y, s, w, t = timed_stream(12, 1500, jitter=6.0)
    win = Sliding(make(), period=60.0, lateness=8.0)
    seen = []
    for i in range(len(y)):
        win.update(y[i], s[i], w=w[i], t=t[i])
        seen.append((t[i], y[i], s[i], w[i]))
        if i % 23 == 0:
            inside, late, _ = oracle_time(seen, 60.0, 8.0)
            expected = oracle(*zip(*[e[1:] for e in inside])) if inside else math.nan
            assert same(win.get(), expected), (i, win.get(), expected)
            assert win.late == late
    win._check()


@pytest.mark.parametrize("name", ["ROCAUC", "AveragePrecision"])
def test_sliding_ranking_float_weights(name):
    make, oracle = METRICS[name]
    y, s, w = stream(13, 3000, dyadic=False)
    win = Sliding(make(), size=200)
    for i in range(len(y)):
        win.update(y[i], s[i], w=w[i])
        if i % 50 == 0:
            lo = max(0, i - 199)
            assert same(win.get(), oracle(y[lo:i + 1], s[lo:i + 1], w[lo:i + 1]), tol=1e-9)


@pytest.mark.parametrize("name", ["ROCAUC", "AveragePrecision"])
def test_full_count_window_of_a_ranking_metric_swaps_events_exactly(name):
    """A full count window over a ranking metric takes each new event and expires the
    oldest in one call (the ``swap`` its metric declares): after a batch (expiring from its chunk, labels
    decoded) and after single events, with string labels, ties and weights, the value
    is scikit-learn's on the last ``size`` events; a refused new event changes nothing;
    an old event that is not stored is refused and changes nothing."""
    make, oracle = METRICS[name]
    metric = {"ROCAUC": streameval.ROCAUC, "AveragePrecision": streameval.AveragePrecision}[name]
    y, s, w = stream(21, 900)
    labels = ["spam" if v else "ham" for v in y]
    win = Sliding(metric(pos_label="spam", neg_label="ham"), size=120)
    assert capabilities(win.metric).swap is not None
    win.update_many(labels[:300], s[:300], w[:300])  # batch: a chunk expires first
    for i in range(300, len(y)):
        win.update(labels[i], s[i], w=w[i])
        if i % 17 == 0 or i < 310:
            assert same(win.get(), oracle(y[i - 119:i + 1], s[i - 119:i + 1], w[i - 119:i + 1]))
    win._check()
    before = (win.get(), json.dumps(win.to_state()))
    with pytest.raises(ValueError, match="y_pred"):
        win.update("spam", float("nan"))
    with pytest.raises(ValueError, match="y_true"):
        win.update("eggs", 0.5)
    assert (win.get(), json.dumps(win.to_state())) == before
    m = win.metric
    with pytest.raises(ValueError, match="no such event"):
        capabilities(m).swap("spam", 0.25, 1.0, "ham", 12.5, 1.0)  # 12.5 was never added
    assert (win.get(), json.dumps(win.to_state())) == before


@pytest.mark.parametrize("name", list(METRICS))
def test_sliding_update_many_over_real_metrics(name):
    make, oracle = METRICS[name]
    y, s, w, t = timed_stream(14, 4000)
    y, s, w, t = np.array(y), np.array(s), np.array(w), np.array(t)
    cw, tw = Sliding(make(), size=500), Sliding(make(), period=200.0, lateness=10.0)
    seen = []
    i = 0
    for n in (10, 700, 3, 40, 2000, 1, 300, 946):
        part = slice(i, i + n)
        cw.update_many(y[part], s[part], w[part])
        tw.update_many(y[part], s[part], w[part], t=t[part])
        seen.extend(zip(t[part].tolist(), y[part].tolist(), s[part].tolist(), w[part].tolist()))
        i += n
        lo = max(0, i - 500)
        assert same(cw.get(), oracle(y[lo:i], s[lo:i], w[lo:i]))
        inside, late, _ = oracle_time(seen, 200.0, 10.0)
        assert same(tw.get(), oracle(*zip(*[e[1:] for e in inside])))
        assert tw.late == late
    cw._check()
    tw._check()


def test_sliding_auc_equals_sklearn_where_river_rolling_does_not():
    """Heavily tied scores: river's RollingROCAUC differs from sklearn, ours does not."""
    y, s, _ = stream(15, 3000, weights=False)
    ours = Sliding(streameval.ROCAUC(), size=1000)
    theirs = river_metrics.RollingROCAUC(window_size=1000)
    worst_river = 0.0
    for i in range(len(y)):
        ours.update(y[i], s[i])
        theirs.update(y[i], s[i])
        if i % 100 == 99:
            lo = max(0, i - 999)
            expected = skm.roc_auc_score(y[lo:i + 1], s[lo:i + 1])
            assert same(ours.get(), expected)
            worst_river = max(worst_river, abs(theirs.get() - expected))
    assert worst_river > 1e-3  # the point of the exercise: river's is not exact on ties


def test_sliding_state_round_trip_with_real_metric():
    y, s, w = stream(16, 600)
    win = Sliding(streameval.ROCAUC(), size=100)
    win.update_many(y[:300], s[:300], w[:300])
    back = from_state(json.loads(json.dumps(win.to_state())))
    for i in range(300, 600):
        win.update(y[i], s[i], w=w[i])
        back.update(y[i], s[i], w=w[i])
    assert same(back.get(), sk_auc(y[500:], s[500:], w[500:]))
    back._check()


# ======================================================================= Tumbling


def oracle_tumbling_count(events, size, flush):
    out = []
    for k in range(0, len(events), size):
        chunk = events[k:k + size]
        if len(chunk) == size or flush:
            out.append((k // size, k, k + len(chunk), len(chunk), chunk))
    return out


def oracle_tumbling_time(events, period, lateness, origin, flush):
    """Records of an aligned tumbling window, by the documented rules."""
    newest = -math.inf
    groups, late = {}, 0
    for e in events:
        t = e[0]
        if t < newest - lateness:
            late += 1
            continue
        k = math.floor((t - origin) / period)
        groups.setdefault(k, []).append(e)
        newest = max(newest, t)
    closed_upto = math.floor((newest - lateness - origin) / period) - 1
    keys = sorted(k for k in groups if flush or k <= closed_upto)
    return [(k, origin + k * period, origin + k * period + period, groups[k]) for k in keys], late


def test_tumbling_count_reports_each_window_once_and_flushes_partial():
    y, s, w = stream(20, 1003)
    records = []
    tum = Tumbling(WindowTestBag(), size=100, on_close=records.append)
    for i in range(len(y)):
        tum.update(y[i], s[i], w=w[i])
        if i % 100 == 99:
            assert same(tum.get(), _bag_value(list(zip(y, s, w))[i - 99:i + 1]))
        tum._check()
    assert math.isclose(tum.partial(), _bag_value(list(zip(y, s, w))[1000:]))
    assert len(records) == 10
    tum.flush()
    tum.flush()  # nothing left to close: no second report
    expected = oracle_tumbling_count(list(zip(y, s, w)), 100, flush=True)
    assert len(records) == len(expected) == 11
    for r, (k, start, end, n, chunk) in zip(records, expected):
        assert (r["index"], r["start"], r["end"], r["n"]) == (k, start, end, n)
        assert same(r["value"], _bag_value(chunk))
    assert list(tum.closed()) == []  # with a callback nothing queues


def test_tumbling_time_with_lateness_matches_brute_force():
    y, s, w, t = timed_stream(21, 3000, jitter=6.0)
    late_seen = []
    tum = Tumbling(WindowTestBag(), period=50.0, lateness=5.0, origin=3.0, on_late=late_seen.append)
    got = []
    seen = []
    for i in range(len(y)):
        tum.update(y[i], s[i], w=w[i], t=t[i])
        seen.append((t[i], y[i], s[i], w[i]))
        got.extend(tum.closed())
        if i % 300 == 0:
            tum._check()
            expected, late = oracle_tumbling_time(seen, 50.0, 5.0, 3.0, flush=False)
            assert [r["index"] for r in got] == [k for k, *_ in expected]
            assert tum.late == late == len(late_seen)
    tum.flush()
    got.extend(tum.closed())
    expected, late = oracle_tumbling_time(seen, 50.0, 5.0, 3.0, flush=True)
    assert len(got) == len(expected) > 30
    for r, (k, start, end, events) in zip(got, expected):
        assert (r["index"], r["start"], r["end"], r["n"]) == (k, start, end, len(events))
        assert same(r["value"], _bag_value([e[1:] for e in events]))
    assert tum.late == late > 50
    # after a flush, events for the flushed windows are refused
    n_late = tum.late
    tum.update(1, 0.5, t=seen[-1][0])
    assert tum.late == n_late + 1


def test_tumbling_time_windows_are_aligned_half_open():
    tum = Tumbling(WindowTestBag(), period=60)
    tum.update(1, 0.5, t=dt.datetime(2024, 1, 1, 10, 0, 59))
    tum.update(1, 0.25, t=dt.datetime(2024, 1, 1, 10, 1, 0))  # next minute: first closes
    (r,) = tum.closed()
    assert r["start"] == dt.datetime(2024, 1, 1, 10, 0, tzinfo=dt.timezone.utc).timestamp()
    assert r["end"] - r["start"] == 60 and r["n"] == 1 and r["value"] == 0.5
    assert tum.get() == 0.5 and tum.partial() == 0.25


def test_tumbling_nan_value_and_gaps():
    tum = Tumbling(streameval.Recall(), period=10)
    assert math.isnan(tum.get()) and math.isnan(tum.partial())
    tum.update(0, 0.9, t=1)  # no positives: recall undefined
    tum.update(1, 0.9, t=55)  # windows 1..4 have no events: no records
    (r,) = tum.closed()
    assert r["index"] == 0 and math.isnan(r["value"])
    tum.flush()
    (r,) = tum.closed()
    assert r["index"] == 5 and r["value"] == 1.0


@HYP
@given(seed=st.integers(0, 10**6), size=st.integers(1, 30),
       sizes=st.lists(st.integers(0, 70), min_size=1, max_size=6), flush=st.booleans())
def test_tumbling_count_update_many_equals_loop(seed, size, sizes, flush):
    y, s, w = stream(seed, sum(sizes))
    a, b = Tumbling(WindowTestBag(), size=size), Tumbling(WindowTestBag(), size=size)
    i = 0
    for n in sizes:
        for j in range(i, i + n):
            a.update(y[j], s[j], w=w[j])
        b.update_many(np.array(y[i:i + n]), s[i:i + n], w[i:i + n])
        i += n
        assert list(a.closed()) == list(b.closed())
        b._check()
    if flush:
        a.flush()
        b.flush()
    ra, rb = list(a.closed()), list(b.closed())
    assert [(r["index"], r["start"], r["end"], r["n"]) for r in ra] == \
        [(r["index"], r["start"], r["end"], r["n"]) for r in rb]
    assert all(same(p["value"], q["value"]) for p, q in zip(ra, rb))


@HYP
@given(seed=st.integers(0, 10**6), period=st.sampled_from([2.0, 10.0, 30.0]),
       lateness=st.sampled_from([0.0, 3.0, 40.0]),
       sizes=st.lists(st.integers(0, 80), min_size=1, max_size=6))
def test_tumbling_time_update_many_equals_loop(seed, period, lateness, sizes):
    y, s, w, t = timed_stream(seed, sum(sizes), jitter=5.0)
    a = Tumbling(WindowTestBag(), period=period, lateness=lateness)
    b = Tumbling(WindowTestBag(), period=period, lateness=lateness)
    i = 0
    for n in sizes:
        for j in range(i, i + n):
            a.update(y[j], s[j], w=w[j], t=t[j])
        b.update_many(y[i:i + n], np.array(s[i:i + n]), w[i:i + n], t=t[i:i + n])
        i += n
        ra, rb = list(a.closed()), list(b.closed())
        assert [(r["index"], r["n"]) for r in ra] == [(r["index"], r["n"]) for r in rb]
        assert all(same(p["value"], q["value"]) for p, q in zip(ra, rb))
        assert a.late == b.late
        b._check()


def test_tumbling_state_round_trip_and_no_merge():
    y, s, w, t = timed_stream(22, 900)
    for make in (lambda: Tumbling(WindowTestBag(), size=70),
                 lambda: Tumbling(WindowTestBag(), period=40.0, lateness=10.0)):
        a = make()
        for i in range(450):
            a.update(y[i], s[i], w=w[i], t=t[i])
        b = from_state(json.loads(json.dumps(a.to_state())))
        b._check()
        for i in range(450, 900):
            a.update(y[i], s[i], w=w[i], t=t[i])
            b.update(y[i], s[i], w=w[i], t=t[i])
        a.flush()
        b.flush()
        ra, rb = list(a.closed()), list(b.closed())
        assert len(ra) == len(rb) > 5
        assert all(p["index"] == q["index"] and same(p["value"], q["value"]) for p, q in zip(ra, rb))
        with pytest.raises(ValueError, match="cannot be merged"):
            a.merge(b)


def test_tumbling_state_keeps_nan_values():
    tum = Tumbling(streameval.Recall(), size=1)
    tum.update(0, 0.5)
    back = from_state(json.loads(json.dumps(tum.to_state(), allow_nan=False)))
    assert math.isnan(back.get()) and math.isnan(next(back.closed())["value"])


def test_tumbling_batch_is_atomic():
    tum = Tumbling(WindowTestBag(), size=3)
    tum.update_many([1, 1], [0.5, 0.5])
    before = tum.to_state()
    with pytest.raises(ValueError, match=r"y_pred\[4\] = nan|event 4: y_pred = nan"):
        tum.update_many([1] * 6, [0.1, 0.2, 0.3, 0.4, float("nan"), 0.6])
    assert tum.to_state() == before


@pytest.mark.parametrize("name", list(METRICS))
def test_tumbling_over_real_metrics_equals_sklearn(name):
    make, oracle = METRICS[name]
    y, s, w, t = timed_stream(23, 3000, jitter=3.0)
    tum = Tumbling(make(), period=100.0, lateness=5.0)
    tum.update_many(y[:1500], s[:1500], w[:1500], t=t[:1500])
    for i in range(1500, 3000):
        tum.update(y[i], s[i], w=w[i], t=t[i])
    tum.flush()
    expected, _ = oracle_tumbling_time(list(zip(t, y, s, w)), 100.0, 5.0, 0.0, flush=True)
    got = list(tum.closed())
    assert len(got) == len(expected)
    for r, (_, _, _, events) in zip(got, expected):
        assert same(r["value"], oracle(*zip(*[e[1:] for e in events])))


# ================================================== retrieval and text metrics


def _fresh_value(make, events):
    m = make()
    for a, b, w in events:
        m.update(a, b, w=w)
    return m.get()


def test_sliding_over_retrieval_and_text_metrics_equals_recomputation():
    """Windows forward any two-argument update: queries for retrieval metrics,
    (hypothesis, references) for text metrics; the oracle recomputes from scratch."""
    rng = np.random.default_rng(30)
    words = "the cat sat on a mat with dog".split()
    cases = [
        (lambda: streameval.NDCG(k=3),
         lambda: (rng.integers(0, 4, 6).tolist(), np.round(rng.random(6), 1).tolist())),
        (lambda: streameval.PrecisionAtK(k=2),
         lambda: (rng.integers(0, 2, 5).tolist(), rng.random(5).tolist())),
        (lambda: streameval.BLEU(),
         lambda: (" ".join(rng.choice(words, 6)), [" ".join(rng.choice(words, 6)), " ".join(rng.choice(words, 7))])),
    ]
    for make, draw in cases:
        win = Sliding(make(), size=7)
        seen = []
        for i in range(60):
            a, b = draw()
            w = float(rng.choice([1.0, 2.0, 3.0]))
            win.update(a, b, w=w)
            seen.append((a, b, w))
            assert same(win.get(), _fresh_value(make, seen[-7:]), tol=1e-9)
        back = from_state(json.loads(json.dumps(win.to_state())))
        for i in range(10):
            a, b = draw()
            win.update(a, b)
            back.update(a, b)
            seen.append((a, b, 1.0))
        assert same(back.get(), _fresh_value(make, seen[-7:]), tol=1e-9)
        back._check()


# ========================================== count windows: column chunks, revert_many


def sk_log_loss(y, s, w):
    if not len(y) or sum(w) == 0:
        return math.nan
    return skm.log_loss(np.asarray(y, dtype=int), np.asarray(s, dtype=float),
                        sample_weight=w, labels=[0, 1])


def sk_mae(y, s, w):
    if not len(y) or sum(w) == 0:
        return math.nan
    return skm.mean_absolute_error(np.asarray(y, dtype=float), s, sample_weight=w)


def sk_f1(y, s, w):
    pred = [int(si >= 0.5) for si in s]
    tp = sum(wi for yi, pi, wi in zip(y, pred, w) if yi and pi)
    if 2 * tp + sum(wi for yi, pi, wi in zip(y, pred, w) if yi != pi) == 0:
        return math.nan
    return skm.f1_score(y, pred, sample_weight=w, zero_division=np.nan)


VECTORISED = {
    "Precision": (lambda: streameval.Precision(), sk_precision),
    "F1": (lambda: streameval.F1(), sk_f1),
    "LogLoss": (lambda: streameval.LogLoss(), sk_log_loss),
    "MAE": (lambda: streameval.MAE(), sk_mae),
    "ROCAUC": (lambda: streameval.ROCAUC(), sk_auc),
}


@pytest.mark.parametrize("name", list(VECTORISED))
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), size=st.integers(1, 60),
       steps=st.lists(st.tuples(st.sampled_from(["event", "array", "list", "unweighted"]),
                                st.integers(0, 90)), min_size=1, max_size=8))
def test_sliding_count_mixes_events_and_batches_exactly(name, seed, size, steps):
    """Events one at a time (list chunks) and batches (numpy or list chunks), expired a
    slice at a time with revert_many: sklearn on the last ``size`` events after every
    step, the same events as a window fed one event at a time."""
    make, oracle = VECTORISED[name]
    y, s, w = stream(seed, sum(n for _, n in steps))
    win, loop = Sliding(make(), size=size), Sliding(make(), size=size)
    i = 0
    for how, n in steps:
        part = slice(i, i + n)
        if how == "unweighted":
            w[part] = [1.0] * n
        if how == "event":
            for j in range(i, i + n):
                win.update(y[j], s[j], w=w[j])
        elif how == "array":
            win.update_many(np.array(y[part]), np.array(s[part]), np.array(w[part]))
        elif how == "list":
            win.update_many(y[part], s[part], w[part])
        else:
            win.update_many(np.array(y[part], dtype=bool), np.array(s[part]))
        for j in range(i, i + n):
            loop.update(y[j], s[j], w=w[j])
        i += n
        lo = max(0, i - size)
        assert len(win) == i - lo
        assert [tuple(e) for e in win.events()] == [tuple(e) for e in loop.events()]
        assert same(win.get(), oracle(y[lo:i], s[lo:i], w[lo:i]), tol=1e-9), (how, n)
        win._check()


def test_sliding_count_keeps_batches_as_numpy_columns_and_lists_for_other_metrics():
    y, s, w = stream(21, 300)
    win = Sliding(streameval.Recall(), size=100)
    win.update_many(np.array(y), np.array(s), np.array(w))
    (chunk,) = win._chunks
    assert isinstance(chunk.y, np.ndarray) and chunk.s.dtype == np.float64
    assert same(win.get(), sk_recall(y[-100:], s[-100:], w[-100:]))
    # not scalar arguments (retrieval): Python lists, as given
    ndcg = Sliding(streameval.NDCG(k=3), size=2)
    ndcg.update_many(np.array([[3, 2, 0], [0, 1, 2], [1, 1, 0]]),
                     np.array([[0.9, 0.5, 0.1], [0.8, 0.3, 0.2], [0.1, 0.2, 0.3]]))
    (chunk,) = ndcg._chunks
    assert chunk.y == [[0, 1, 2], [1, 1, 0]]
    expected = np.mean([skm.ndcg_score([r], [p], k=3) for r, p in
                        [([0, 1, 2], [0.8, 0.3, 0.2]), ([1, 1, 0], [0.1, 0.2, 0.3])]])
    assert same(ndcg.get(), expected)


def test_sliding_count_state_and_merge_with_chunks():
    y, s, w = stream(22, 900)
    ya, sa, wa = np.array(y), np.array(s), np.array(w)
    a = Sliding(streameval.Precision(), size=250)
    a.update_many(ya[:300], sa[:300], wa[:300])
    for j in range(300, 340):
        a.update(y[j], s[j], w=w[j])
    a.update_many(y[340:400], s[340:400], w[340:400])
    b = from_state(json.loads(json.dumps(a.to_state())))
    assert b.events() == a.events() and len(b) == 250
    b._check()
    for j in range(400, 600):
        a.update(y[j], s[j], w=w[j])
    b.update_many(ya[400:600], sa[400:600], wa[400:600])
    assert same(a.get(), b.get()) and same(b.get(), sk_precision(y[350:600], s[350:600], w[350:600]))
    # merge: the other window's events after this one's, the last 250 of both
    c = Sliding(streameval.Precision(), size=250)
    c.update_many(ya[600:700], sa[600:700], wa[600:700])
    a.merge(c)
    a._check()
    assert same(a.get(), sk_precision(y[450:700], s[450:700], w[450:700]))


def test_count_window_state_without_chunk_layout_still_loads():
    """States written before the chunk layout was recorded hold the events only."""
    y, s, w = stream(23, 200)
    a = Sliding(streameval.Recall(), size=50)
    a.update_many(np.array(y[:120]), np.array(s[:120]), np.array(w[:120]))
    state = json.loads(json.dumps(a.to_state()))
    del state["data"]["chunks"]
    b = from_state(state)
    b._check()
    assert b.events() == a.events()
    for j in range(120, 200):
        b.update(y[j], s[j], w=w[j])
    assert same(b.get(), sk_recall(y[150:200], s[150:200], w[150:200]))
    bad = json.loads(json.dumps(a.to_state()))
    bad["data"]["chunks"] = [[49, False]]
    with pytest.raises(ValueError, match="chunks"):
        from_state(bad)
