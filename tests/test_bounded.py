"""Bounded cumulative score orders: coarse keys, their error bounds, and how a Monitor
reports them (held values, idle segments, restarts).

Oracles: scikit-learn on the exact scores (within the reported bound) and on the
coarse keys (to 1e-12), brute force over the arrangements inside each key, and a
Monitor fed without interruption."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, roc_auc_score

import streameval as se
from streameval.metrics.scoreorder import DEFAULT_MAX_SCORES, coarse_key, coarse_keys
from streameval.monitor import scopes as scopes_mod

sys.path.insert(0, str(Path(__file__).parent))  # (the oracle's module, beside this one)
from ap_bound_support import ap_bound_of_bins  # noqa: E402

# ----------------------------------------------------------------------- the key map

finite = st.floats(allow_nan=False, allow_infinity=False)


@given(st.lists(finite, min_size=2, max_size=40), st.integers(0, 52), st.integers(0, 52))
def test_coarse_key_is_monotone_nested_and_the_same_per_event_and_per_batch(xs, b, c):
    b, c = max(b, c), min(b, c)
    xs = sorted(xs)
    keys = [coarse_key(x, b) for x in xs]
    assert keys == sorted(keys)  # monotone
    np.testing.assert_array_equal(coarse_keys(np.array(xs), b), np.array(keys))
    # nested: coarsening a coarse key again is coarsening the score
    assert [coarse_key(k, c) for k in keys] == [coarse_key(x, c) for x in xs]
    # a key never moves away from zero, and keeps its sign and binade
    for x, k in zip(xs, keys):
        assert abs(k) <= abs(x) and (k == 0 or (k > 0) == (x > 0))
        assert k == 0 or math.frexp(k)[1] == math.frexp(x)[1]


def test_coarse_key_by_hand():
    # 0.7 = 0.10110011..b: 3 significant bits give 0.101b = 0.625
    assert coarse_key(0.7, 2) == 0.625
    assert coarse_key(0.7, 52) == 0.7
    assert coarse_key(-0.7, 2) == -0.625
    assert coarse_key(-0.0, 3) == 0.0 and math.copysign(1, coarse_key(-0.0, 3)) == 1.0
    assert coarse_key(5e-324, 0) == 5e-324  # the smallest subnormal is its own key


# ------------------------------------------------- values against sklearn, within bound

events = st.lists(
    st.tuples(st.booleans(), st.floats(0.0, 1.0, allow_nan=False),
              st.sampled_from([1.0, 1.0, 2.0, 0.5, 3.0])),
    min_size=2, max_size=300)


def _feed(metric, ev, batch):
    y = np.array([e[0] for e in ev])
    s = np.array([e[1] for e in ev])
    w = np.array([e[2] for e in ev])
    if batch:
        for a in range(0, len(ev), 37):
            metric.update_many(y[a:a + 37], s[a:a + 37], w[a:a + 37])
    else:
        for yy, ss, ww in ev:
            metric.update(yy, ss, ww)
    return y, s, w


@given(events, st.booleans(), st.integers(16, 40))
def test_bounded_auc_and_ap_within_their_bound_of_sklearn(ev, batch, cap):
    # scores on a grid of 1/64 and free ones: ties, and more distinct scores than cap
    auc = se.ROCAUC(max_scores=cap)
    ap = se.AveragePrecision(max_scores=cap)
    y, s, w = _feed(auc, ev, batch)
    _feed(ap, ev, batch)
    auc._check()
    ap._check()
    if not (y.any() and (~y).any()):
        return
    bits = auc._so.bits
    assert bits == ap._so.bits  # the same events, the same checks: the same keys
    exact_auc = roc_auc_score(y, s, sample_weight=w)
    exact_ap = average_precision_score(y, s, sample_weight=w)
    if bits is None:  # not coarsened: exact
        assert auc.error_bound() == 0.0 and ap.error_bound() == 0.0
        assert abs(auc.get() - exact_auc) <= 1e-12
        assert abs(ap.get() - exact_ap) <= 1e-12
        return
    assert len(auc) <= 2 * cap
    keys = coarse_keys(s, bits)
    # the value is the exact one of the coarse keys (ties count one half)...
    assert abs(auc.get() - roc_auc_score(y, keys, sample_weight=w)) <= 1e-12
    assert abs(ap.get() - average_precision_score(y, keys, sample_weight=w)) <= 1e-12
    # ...and within its bound of the exact one
    assert abs(auc.get() - exact_auc) <= auc.error_bound() + 1e-12
    assert abs(ap.get() - exact_ap) <= ap.error_bound() + 1e-12


def test_batches_and_single_events_coarsen_at_the_same_counts():
    rng = np.random.default_rng(3)
    y = rng.random(3000) < 0.3
    s = rng.random(3000)
    one, many = se.ROCAUC(max_scores=64), se.ROCAUC(max_scores=64)
    for yy, ss in zip(y.tolist(), s.tolist()):
        one.update(yy, ss)
    for a in range(0, 3000, 250):
        many.update_many(y[a:a + 250], s[a:a + 250])
    assert one._so.bits == many._so.bits is not None
    assert one.get() == many.get() and one.error_bound() == many.error_bound()
    assert one.to_state() == many.to_state()


# ------------------------------------------------------- the bound against brute force


def _arranged(y, s, bits, w, positives_first):
    """Scores that keep the order between keys and break every tie inside a key with
    the positives above (or below) the negatives: an exact arrangement the coarse keys
    cannot tell from the real one."""
    keys = coarse_keys(s, bits)
    rank = np.unique(keys, return_inverse=True)[1].astype(float)
    inside = np.where(y == positives_first, 0.5, 0.0)  # positives first: above
    return rank + inside


def test_bound_is_attained_with_all_scores_in_one_key():
    # every score in [0.5, 0.75): one key at 1 bit; positives all above the negatives
    n = 200
    y = np.arange(n) < 60
    s = np.where(y, 0.7, 0.55) + np.linspace(0, 0.01, n)
    auc = se.ROCAUC().update_many(y, s)
    auc._so.coarsen_to(1)  # (what a cap forces on a wider stream)
    assert len(auc) == 1
    assert roc_auc_score(y, s) == 1.0 and auc.get() == 0.5
    assert auc.error_bound() == 0.5  # attained: |0.5 - 1| = 1/2 of the pairs
    ap = se.AveragePrecision().update_many(y, s)
    ap._so.coarsen_to(1)
    assert ap.get() == pytest.approx(60 / 200)
    assert abs(average_precision_score(y, s) - ap.get()) <= ap.error_bound()
    # the other extreme (positives below) is inside the bound too
    assert abs(average_precision_score(y, -s) - ap.get()) <= ap.error_bound() + 1e-12


@pytest.mark.parametrize("seed", range(6))
def test_bound_covers_every_arrangement_inside_the_keys(seed):
    rng = np.random.default_rng(seed)
    n = 400
    y = rng.random(n) < 0.4
    # ties at key edges: scores exactly on the keys' edges and just below them
    edges = np.array([0.5, 0.625, 0.75, 0.875])
    s = np.concatenate([rng.choice(edges, n // 4) - rng.choice([0.0, 1e-9], n // 4),
                        0.5 + 0.5 * rng.random(n - n // 4)])  # (more scores than the cap)
    w = rng.choice([1.0, 2.0, 0.5], n)
    auc = se.ROCAUC(max_scores=16).update_many(y, s, w)
    ap = se.AveragePrecision(max_scores=16).update_many(y, s, w)
    bits = auc._so.bits
    assert bits is not None
    for first in (True, False):
        s2 = _arranged(y, s, bits, w, first)
        assert abs(roc_auc_score(y, s2, sample_weight=w) - auc.get()) <= auc.error_bound() + 1e-12
        assert abs(average_precision_score(y, s2, sample_weight=w) - ap.get()) <= \
            ap.error_bound() + 1e-12
    # the AUC bound is attained by one of the two arrangements
    worst = max(abs(roc_auc_score(y, _arranged(y, s, bits, w, f), sample_weight=w) - auc.get())
                for f in (True, False))
    assert worst == pytest.approx(auc.error_bound(), abs=1e-12)


def test_unbounded_orders_stay_exact():
    rng = np.random.default_rng(1)
    y = rng.random(5000) < 0.3
    s = rng.random(5000)
    for cap in (None, 0):
        auc = se.ROCAUC(max_scores=cap).update_many(y, s)
        assert auc._so.bits is None and len(auc) == 5000 and auc.error_bound() == 0.0
        assert abs(auc.get() - roc_auc_score(y, s)) <= 1e-12
        assert se.from_state(json.loads(json.dumps(auc.to_state())))._cap is None
    with pytest.raises(ValueError, match="max_scores"):
        se.ROCAUC(max_scores=3)


# ------------------------------------------------------------------------------- state


def test_coarsened_state_round_trips_through_json_and_continues_as_the_direct_one():
    rng = np.random.default_rng(2)
    y = rng.random(4000) < 0.3
    s = rng.random(4000)
    direct = se.AveragePrecision(max_scores=32).update_many(y[:2500], s[:2500])
    state = json.loads(json.dumps(direct.to_state()))
    assert state["data"]["bits"] == direct._so.bits is not None
    restored = se.from_state(state)
    assert restored.get() == direct.get() and restored.error_bound() == direct.error_bound()
    for m in (direct, restored):
        m.update_many(y[2500:], s[2500:])
    assert restored.to_state() == direct.to_state()
    # a state whose keys are not keys at its bits is refused
    state["data"]["scores"][0] += 1e-12
    with pytest.raises(ValueError, match="not keys"):
        se.from_state(state)


def test_merge_takes_the_coarser_keys():
    rng = np.random.default_rng(5)
    y = rng.random(3000) < 0.3
    s = rng.random(3000)
    coarse = se.ROCAUC(max_scores=16).update_many(y[:1500], s[:1500])
    fine = se.ROCAUC(max_scores=16).update_many(y[1500:1520], s[1500:1520])
    assert fine._so.bits is None and coarse._so.bits is not None
    fine.merge(coarse)
    assert fine._so.bits == coarse._so.bits
    both = np.concatenate([s[:1500], s[1500:1520]])
    yb = np.concatenate([y[:1500], y[1500:1520]])
    assert abs(fine.get() - roc_auc_score(yb, coarse_keys(both, fine._so.bits))) <= 1e-12


# ---------------------------------------------------------------------- the Monitor


def _monitor(**kw):
    return se.Monitor({"auc": se.ROCAUC(max_scores=32), "ap": se.AveragePrecision(max_scores=32),
                       "ap_exact": se.AveragePrecision(max_scores=None),
                       "recall": se.Recall()}, **kw)


def test_monitor_rows_carry_error_bounds_and_held_values_and_restart_identically(monkeypatch):
    monkeypatch.setattr(scopes_mod, "HOLD_FROM", 100)
    monkeypatch.setattr(scopes_mod, "READ_RATIO", 8)  # (held for n / 8 events)
    rng = np.random.default_rng(7)
    n = 6000
    y = rng.random(n) < 0.3
    s = rng.random(n)
    direct = _monitor(every=100)
    rows = []
    direct.on_metrics.append(rows.append)
    direct.update_many(y[:3050], s[:3050])
    state = json.loads(json.dumps(direct.to_state()))
    restored = se.Monitor.from_state(state)
    rows2 = []
    restored.on_metrics.append(rows2.append)
    cut = len(rows)
    for m in (direct, restored):
        m.update_many(y[3050:], s[3050:])
        m.flush()
    assert rows[cut:] == rows2
    assert restored.to_state() == direct.to_state()
    held = [r for r in rows if "as_of" in r]
    assert held, "values held at a cadence past HOLD_FROM"
    for r in rows:
        for name, bound in r.get("error_bounds", {}).items():
            upto = r.get("as_of", {}).get(name, r["n"])
            exact = (roc_auc_score if name == "auc" else average_precision_score)(y[:upto], s[:upto])
            assert abs(r["values"][name] - exact) <= bound + 1e-12
        for name, upto in r.get("as_of", {}).items():  # a held value is right for its count
            if name not in r.get("error_bounds", {}):
                exact = average_precision_score(y[:upto], s[:upto])
                assert abs(r["values"][name] - exact) <= 1e-12
    last = rows[-1]
    assert "as_of" not in last and last["n"] == n  # the end of the stream: fresh
    assert last["error_bounds"]["auc"] > 0
    snap = direct.snapshot()["segments"][None]
    assert snap["error_bounds"] == last["error_bounds"]
    assert snap["values"]["auc"] == last["values"]["auc"]


def test_idle_segments_write_no_row_and_keep_their_last_one():
    # every 2 events: the whole stream's rows at 2, 4, ...; a segment's at its own 2nd,
    # 4th, ... event
    mon = se.Monitor({"auc": se.ROCAUC(), "recall": se.Recall()}, group_by="g", every=2,
                     rules=["recall < 0.5"])
    rows, alerts = [], []
    mon.on_metrics.append(rows.append)
    mon.on_alert.append(alerts.append)
    mon.update_many([1, 0, 1, 0], [0.9, 0.1, 0.8, 0.2], segment=["a", "a", "b", "b"])
    assert [(r.get("stream_n", r["n"]), r["segment"]) for r in rows] == [
        (2, None), (2, "a"), (4, None), (4, "b")]
    b_row = rows[-1]
    mon.update_many([1, 0, 1, 1], [0.9, 0.1, 0.7, 0.6], segment=["a"] * 4)
    assert [r["segment"] for r in rows[4:]] == [None, "a", None, "a"]  # "b" idle: no row
    # its last row is what a fresh read gives now
    assert mon.snapshot()["segments"]["b"]["values"] == b_row["values"]
    # a segment whose rule fires keeps being evaluated while idle (its alert can resolve
    # only with new events, but its pending `for` count advances)
    mon2 = se.Monitor({"recall": se.Recall()}, group_by="g", every=2,
                      rules=[{"rule": "recall < 0.5", "for": 2}])
    tr = []
    mon2.on_alert.append(tr.append)
    mon2.update_many([1, 1], [0.1, 0.2], segment=["b", "b"])  # b: recall 0, pending
    assert [(a["segment"], a["state"]) for a in tr] == [(None, "pending"), ("b", "pending")]
    mon2.update_many([1, 1], [0.9, 0.9], segment=["a", "a"])  # b idle, still pending
    assert ("b", "firing") in [(a["segment"], a["state"]) for a in tr]


def test_prometheus_error_bound_series_only_for_values_that_are_not_exact():
    pytest.importorskip("prometheus_client")
    from collections import defaultdict

    from prometheus_client import CollectorRegistry, generate_latest

    from streameval.service.exposition import MonitorCollector

    class Engine:  # what the collector reads: a function of the monitor and counters
        def __init__(self, monitor):
            self.monitor = monitor

        def read(self, fn):
            return fn(self.monitor, defaultdict(int))

    def text(monitor):
        reg = CollectorRegistry()
        reg.register(MonitorCollector(Engine(monitor)))
        return generate_latest(reg).decode()

    rng = np.random.default_rng(9)
    y = rng.random(500) < 0.3
    s = rng.random(500)
    exact = se.Monitor({"auc": se.ROCAUC()})
    exact.update_many(y, s)
    assert "error_bound" not in text(exact)
    bounded = se.Monitor({"auc": se.ROCAUC(max_scores=16)})
    bounded.update_many(y, s)
    want = bounded.segment_metrics()["auc"].error_bound()
    assert want > 0
    line = [x for x in text(bounded).splitlines()
            if x.startswith("streameval_metric_error_bound{")]
    assert line == [f'streameval_metric_error_bound{{metric="auc",segment="",window="cumulative"}} '
                    f'{want!r}']


def test_config_key_max_scores_zero_keeps_metrics_exact():
    import tomllib

    from streameval.config import build

    kw = build({"metrics": tomllib.loads(
        'roc_auc = { max_scores = 0 }\n'
        'ap = { metric = "average_precision", max_scores = 16 }\n'
        'auc_default = "roc_auc"\n')})
    caps = {name: m._cap for name, m in kw["metrics"].items()}
    assert caps == {"roc_auc": None, "ap": 16, "auc_default": DEFAULT_MAX_SCORES}
    mon = se.Monitor(**kw)
    rng = np.random.default_rng(4)
    y, s = rng.random(400) < 0.4, rng.random(400)
    mon.update_many(y, s)
    snap = mon.snapshot()["segments"][None]
    assert snap["values"]["roc_auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert set(snap["error_bounds"]) == {"ap"}


def test_restart_with_idle_segments_writes_the_rows_of_a_direct_monitor(monkeypatch):
    monkeypatch.setattr(scopes_mod, "HOLD_FROM", 50)
    rng = np.random.default_rng(11)
    n = 4000
    y = rng.random(n) < 0.3
    s = rng.random(n)
    # segment "c" only in the first half: idle afterwards; "b" rare
    seg = np.where(np.arange(n) < n // 2, rng.choice(["a", "b", "c"], n, p=[0.6, 0.1, 0.3]),
                   rng.choice(["a", "b"], n, p=[0.95, 0.05])).astype(object)

    def monitor():
        return se.Monitor({"auc": se.ROCAUC(max_scores=16),
                           "ap": se.AveragePrecision(max_scores=None),
                           "recall": se.Recall()}, group_by="g", every=100,
                          rules=["recall < 0.2"])

    direct = monitor()
    rows, alerts = [], []
    direct.on_metrics.append(rows.append)
    direct.on_alert.append(alerts.append)
    cut_at = 2345
    direct.update_many(y[:cut_at], s[:cut_at], segment=seg[:cut_at])
    restored = se.Monitor.from_state(json.loads(json.dumps(direct.to_state())))
    rows2, alerts2 = [], []
    restored.on_metrics.append(rows2.append)
    restored.on_alert.append(alerts2.append)
    cut, cut_alerts = len(rows), len(alerts)
    for m in (direct, restored):
        for a in range(cut_at, n, 300):
            m.update_many(y[a:a + 300], s[a:a + 300], segment=seg[a:a + 300])
        m.flush()
    assert rows[cut:] == rows2 and alerts[cut_alerts:] == alerts2
    assert restored.to_state() == direct.to_state()
    # "c" wrote rows at its own points (every 100 of its events) while it had events;
    # the events after its last point waited in its buffer through the restart, and the
    # end of the stream wrote its last row, its final value; none in between (idle)
    c_rows = [r for r in rows if r["segment"] == "c"]
    total_c = int((seg[: n // 2] == "c").sum())
    assert total_c % 100 and [r["n"] for r in c_rows] == list(range(100, total_c, 100)) + [
        total_c]
    assert all(r["stream_n"] <= n // 2 for r in c_rows[:-1]) and c_rows[-1]["stream_n"] == n
    last_c = c_rows[-1]["values"]
    assert last_c["recall"] == direct.snapshot()["segments"]["c"]["values"]["recall"]


def _ap_bound_from_bins(y, keys, w):
    """The AP bound written out from the events: per coarse key (bin), high to low, the
    positive and negative weights, and the bound's formula over them."""
    bins, inv = np.unique(keys, return_inverse=True)
    p = np.bincount(inv, weights=np.where(y, w, 0.0), minlength=len(bins))[::-1].copy()
    n = np.bincount(inv, weights=np.where(y, 0.0, w), minlength=len(bins))[::-1].copy()
    return ap_bound_of_bins(p, n)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ap_bound_of_a_big_coarsened_order_is_its_formula_bit_for_bit(seed):
    """A Monitor-sized bounded order (levels, integer weights, fed in batches, read
    between them): the AP bound equals the formula over its bins, to the last bit."""
    rng = np.random.default_rng(seed)
    ap = se.AveragePrecision(max_scores=1 << 15)
    ys, ss, ws = [], [], []
    levels = 0
    for _ in range(14):
        k = int(rng.integers(5_000, 40_000))
        y = rng.random(k) < rng.uniform(0.05, 0.5)
        s = 1.0 / (1.0 + np.exp(-(2.0 * y + rng.standard_normal(k) - 1.0)))
        w = rng.integers(0, 3, k).astype(float) if seed == 2 else np.ones(k)
        ap.update_many(y, s, w)
        ys.append(y), ss.append(s), ws.append(w)
        bits = ap._so.bits
        if bits is None:
            continue
        y_all, s_all, w_all = np.concatenate(ys), np.concatenate(ss), np.concatenate(ws)
        want = _ap_bound_from_bins(y_all, coarse_keys(s_all, bits), w_all)
        assert ap.error_bound() == want
        levels += ap._so.at_positive_keys() is not None
    assert levels   # (the big order's layout was read: its levels)
