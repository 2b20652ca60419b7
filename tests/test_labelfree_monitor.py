"""Every prediction counts when it is made: the Monitor's prediction path.

``Monitor.predict``/``predict_many`` feed the label-free metrics (``needs_labels =
False``) of every scope at the prediction's time; ``update(..., predicted=True)`` feeds
the labels to the labelled metrics only; the label join passes predictions on
(``LabelJoiner(predictions=True)``) and replay gives them to the Monitor. Oracles: the
same label-free metrics fed the same scores directly (per segment), scikit-learn for the
realized metrics over the labelled events, a brute-force join for the label coverage.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import recall_score

import streameval as se
from streameval.cli import main as cli_main
from streameval.events import (
    KIND_EVENT,
    KIND_EXPIRED,
    KIND_LABEL,
    KIND_PREDICTION,
    KIND_REPLACED,
    events_to_batch,
)
from streameval.io.delayed import LabelJoiner
from streameval.metrics.checked import EstimateCheck

sys.path.insert(0, str(Path(__file__).parent))  # (the stand-ins' module, beside this one)
from labelfree_support import LfExpectedRecall, LfPositiveRate  # noqa: E402

SEGMENTS = ("fr", "de", "us")


def monitor(every=7, size=20, group_by="country"):
    return se.Monitor({
        "ppr": LfPositiveRate(threshold=0.5),
        f"ppr@{size}": se.Sliding(LfPositiveRate(threshold=0.5), size=size),
        "erecall": LfExpectedRecall(threshold=0.5),
        "recall": se.Recall(),
        f"recall@{size}": se.Sliding(se.Recall(), size=size),
    }, every=every, group_by=group_by)


def stream(n=300, seed=0):
    """Predictions (id, time, score, weight, segment) and, for most, a label later."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1).round(3)  # ties on purpose
    w = rng.integers(1, 4, n).astype(float)
    seg = [SEGMENTS[i] for i in rng.integers(0, 3, n)]
    labelled = rng.random(n) < 0.8
    return y, s, w, seg, labelled


def direct(cls, s, w, **kw):
    m = cls(**kw)
    for si, wi in zip(s, w):
        m.update(None, float(si), float(wi))
    return m.get()


def expected_values(y, s, w, seg, done, size=20):
    """The brute-force values, per segment (None: the whole stream): label-free over all
    predictions, realized over the labelled ones (``done``: their indices, in label
    order)."""
    out = {}
    for key in (None,) + SEGMENTS:
        pi = [i for i in range(len(s)) if key is None or seg[i] == key]
        li = [i for i in done if key is None or seg[i] == key]
        v = {"ppr": direct(LfPositiveRate, s[pi], w[pi]),
             "erecall": direct(LfExpectedRecall, s[pi], w[pi]),
             "ppr@20": direct(LfPositiveRate, s[pi][-size:], w[pi][-size:])}
        yl, sl, wl = y[li], s[li], w[li]
        v["recall"] = recall_score(yl, sl >= 0.5, sample_weight=wl) if yl.any() else math.nan
        yw, sw, ww = yl[-size:], sl[-size:], wl[-size:]
        v["recall@20"] = (recall_score(yw, sw >= 0.5, sample_weight=ww) if yw.any()
                          else math.nan)
        out[key] = v
    return out


def assert_values(snap, expected):
    for key, exp in expected.items():
        got = snap["segments"][key]["values"]
        for name, v in exp.items():
            g = got[name]
            if v != v:
                assert g is None, (key, name, g)
            else:
                assert g == pytest.approx(v, rel=1e-12, abs=1e-12), (key, name)


def test_predictions_then_labels_equal_the_metrics_fed_directly():
    y, s, w, seg, labelled = stream()
    m = monitor()
    for i in range(len(s)):
        m.predict(float(s[i]), w=float(w[i]), t=float(i), segment=seg[i])
    order = np.random.default_rng(5).permutation(np.flatnonzero(labelled))
    for j, i in enumerate(order):  # labels in another order than the predictions
        m.update(bool(y[i]), float(s[i]), w=float(w[i]), t=1000.0 + j, segment=seg[i],
                 predicted=True)
    # coverage counts events when they are counted: right before the segments' rows
    # (their buffered events show as ``pending``, the values as of their last rows)
    check_coverage(m.snapshot(), s, seg, order)
    m.evaluate()
    snap = m.snapshot()
    check_coverage(snap, s, seg, order)
    assert_values(snap, expected_values(y, s, w, seg, order.tolist()))
    assert not any("pending" in v for v in snap["segments"].values())


def check_coverage(snap, s, seg, order):
    for key in (None,) + SEGMENTS:
        preds = sum(1 for i in range(len(s)) if key is None or seg[i] == key)
        lab = sum(1 for i in order if key is None or seg[i] == key)
        assert snap["segments"][key]["coverage"] == {
            "predictions": preds, "labelled": lab, "pending": preds - lab, "expired": 0}
    assert snap["n"] == len(order) and snap["predicted"] == len(s)


def test_predict_many_and_update_many_are_a_loop_of_predict_and_update():
    y, s, w, seg, labelled = stream(200, seed=3)
    li = np.flatnonzero(labelled)
    one, many = monitor(), monitor()
    rows1, rows2 = [], []
    one.on_metrics.append(rows1.append)
    many.on_metrics.append(rows2.append)
    for i in range(len(s)):
        one.predict(float(s[i]), w=float(w[i]), t=float(i), segment=seg[i])
    for i in li:
        one.update(bool(y[i]), float(s[i]), w=float(w[i]), t=500.0 + i, segment=seg[i],
                   predicted=True)
    for a in range(0, len(s), 23):
        b = min(a + 23, len(s))
        many.predict_many(s[a:b], w[a:b], np.arange(a, b, dtype=float), seg[a:b])
    many.update_many(y[li], s[li], w[li], 500.0 + li, [seg[i] for i in li], predicted=True)
    one.flush()
    many.flush()
    assert rows1 == rows2
    assert any("coverage" in r and r["coverage"]["pending"] for r in rows1)


def test_complete_events_feed_the_label_free_metrics_too():
    y, s, w, seg, _ = stream(150, seed=4)
    m = monitor()
    m.update_many(y, s, w, np.arange(len(s), dtype=float), seg)
    m.evaluate()  # (the segments' rows: their buffered events fed)
    snap = m.snapshot()
    assert_values(snap, expected_values(y, s, w, seg, list(range(len(s)))))
    assert "coverage" not in snap["segments"][None]  # every prediction complete


def test_a_bad_prediction_counts_nothing():
    m = monitor()
    m.predict_many([0.2, 0.4], t=[1.0, 2.0], segment=["fr", "de"])
    before = m.to_state()
    with pytest.raises(ValueError, match=r"y_score\[1\] = nan"):
        m.predict_many([0.3, math.nan], t=[3.0, 4.0], segment=["fr", "fr"])
    with pytest.raises(ValueError, match="weight"):
        m.predict(0.3, w=-1.0, segment="fr")
    assert m.to_state() == before


def test_the_join_passes_predictions_on_and_coverage_equals_a_brute_force_join():
    rng = np.random.default_rng(7)
    rows, truth = [], {}
    t = 0.0
    for i in range(400):
        t += 1
        pid = f"p{i - 1}" if i % 13 == 7 else f"p{i}"  # predicted again: duplicates
        rows.append({"id": pid, "ts": t, "score": float(rng.random()),
                     "country": SEGMENTS[i % 3]})
        if rng.random() < 0.6:
            lag = float(rng.integers(1, 90))
            rows.append({"id": pid, "ts": t + lag, "label": int(rng.random() < 0.4)})
    rows.sort(key=lambda r: (r["ts"], "label" in r))
    ttl = 50
    j = LabelJoiner(ttl, on_duplicate="keep_last", predictions=True)
    m = monitor(every=10)
    out_kinds = []
    for a in range(0, len(rows), 64):
        batch = events_to_batch(rows[a:a + 64], se.events.FieldMap(segment="country"),
                                partial=True)
        out = j.process(batch)
        out_kinds += out.kind.tolist()
        m.apply(m.admit(out))
    # brute force: walk the rows with a dict of waiting predictions
    waiting, cov = {}, {k: dict(predictions=0, labelled=0, expired=0, replaced=0)
                        for k in (None,) + SEGMENTS}
    clock = -math.inf
    kinds = []

    def bump(seg, what):
        cov[None][what] += 1
        cov[seg][what] += 1

    def expire_upto(now):
        for pid, (pt, seg) in sorted(waiting.items(), key=lambda kv: kv[1][0]):
            if now - pt > ttl:
                del waiting[pid]
                bump(seg, "expired")
                kinds.append(KIND_EXPIRED)

    for r in rows:
        if "label" in r:
            if r["ts"] > clock:
                clock = r["ts"]
                expire_upto(clock)
            if r["id"] in waiting:
                _, seg = waiting.pop(r["id"])
                bump(seg, "labelled")
                kinds.append(KIND_LABEL)
        else:
            if r["id"] in waiting:
                bump(waiting[r["id"]][1], "replaced")
                kinds.append(KIND_REPLACED)
            bump(r["country"], "predictions")
            kinds.append(KIND_PREDICTION)
            waiting[r["id"]] = (r["ts"], r["country"])
    assert out_kinds == kinds
    assert KIND_EVENT not in kinds
    snap = m.snapshot()
    for key, c in cov.items():
        want = {"predictions": c["predictions"], "labelled": c["labelled"],
                "pending": c["predictions"] - c["labelled"] - c["expired"] - c["replaced"],
                "expired": c["expired"]}
        if c["replaced"]:
            want["replaced"] = c["replaced"]
        assert snap["segments"][key]["coverage"] == want, key
    assert cov[None]["replaced"] > 0 and cov[None]["expired"] > 0
    assert snap["segments"][None]["coverage"]["pending"] == j.n_pending
    assert cov[None]["expired"] == j.n_expired


def test_the_join_without_predictions_is_unchanged():
    rows = [{"id": "a", "ts": 0, "score": 0.9}, {"id": "b", "ts": 1, "score": 0.2},
            {"id": "a", "ts": 30, "label": True}, {"id": "c", "ts": 100, "label": False}]
    plain = LabelJoiner(60).process(events_to_batch(rows, partial=True))
    passing = LabelJoiner(60, predictions=True).process(events_to_batch(rows, partial=True))
    assert plain.kind is None
    keep = passing.kind == KIND_LABEL
    assert passing.kind.tolist() == [KIND_PREDICTION, KIND_PREDICTION, KIND_LABEL,
                                     KIND_EXPIRED]
    assert plain.label.tolist() == passing.label[keep].tolist()
    assert plain.ts.tolist() == passing.ts[keep].tolist()
    assert plain.pred_ts.tolist() == passing.pred_ts[keep].tolist()


@pytest.mark.parametrize("how", ["json", "arrays"])
def test_a_state_saved_in_the_middle_goes_on_as_if_never_saved(how):
    y, s, w, seg, labelled = stream(240, seed=9)
    li = np.flatnonzero(labelled)

    def feed(m, part):
        a, b = part
        m.predict_many(s[a:b], w[a:b], np.arange(a, b, dtype=float), seg[a:b])
        ix = li[(li >= a) & (li < b)]
        m.update_many(y[ix], s[ix], w[ix], 1000.0 + ix, [seg[i] for i in ix],
                      predicted=True)

    full, rows_full = monitor(), []
    full.on_metrics.append(rows_full.append)
    for part in ((0, 120), (120, 240)):
        feed(full, part)
    full.flush()
    first, rows = monitor(), []
    first.on_metrics.append(rows.append)
    feed(first, (0, 120))
    if how == "json":
        state = json.loads(json.dumps(first.to_state()))
        second = se.Monitor.from_state(state)
    else:
        second = se.Monitor.from_array_state(first.to_array_state())
    second.on_metrics.append(rows.append)
    feed(second, (120, 240))
    second.flush()
    assert rows == rows_full
    assert second.snapshot()["segments"]["fr"]["coverage"] == \
        full.snapshot()["segments"]["fr"]["coverage"]


def test_an_old_state_without_predictions_still_loads():
    m = monitor()
    m.update_many([True, False], [0.9, 0.1], segment=["fr", "de"])
    state = m.to_state()
    assert "predictions" not in state["data"]
    assert all("coverage" not in (s.get("evaluation") or {}) for s in state["data"]["segments"])
    back = se.Monitor.from_state(state)
    back.predict(0.7, segment="fr")
    assert back.snapshot()["segments"]["fr"]["coverage"] == {
        "predictions": 2, "labelled": 1, "pending": 1, "expired": 0}


# ------------------------------------------------------------- estimates checked


def test_estimate_check_against_brute_force():
    rng = np.random.default_rng(11)
    y = rng.random(300) < 0.35
    s = np.clip(rng.normal(0.3 + 0.35 * y, 0.2), 0, 1)
    err = EstimateCheck("recall", estimate="LfExpectedRecall", output="error")
    cov = EstimateCheck("recall", estimate="LfExpectedRecall", output="covered")
    win = se.Sliding(EstimateCheck("recall", estimate="LfExpectedRecall", output="covered"),
                     size=40)
    for k, (yi, si) in enumerate(zip(y, s)):
        for c in (err, cov, win):
            c.update(bool(yi), float(si))
        if k % 37 == 36:
            est = LfExpectedRecall()
            for v in s[:k + 1]:
                est.update(None, float(v))
            real = recall_score(y[:k + 1], s[:k + 1] >= 0.5)
            assert err.get() == pytest.approx(est.get() - real, abs=1e-12)
            lo, hi = est.interval(0.95)
            assert cov.get() == (1.0 if lo <= real <= hi else 0.0)
            ew = LfExpectedRecall()
            for v in s[max(0, k - 39):k + 1]:
                ew.update(None, float(v))
            yw = y[max(0, k - 39):k + 1]
            rw = recall_score(yw, s[max(0, k - 39):k + 1] >= 0.5) if yw.any() else math.nan
            lo, hi = ew.interval(0.95)
            want = math.nan if rw != rw else (1.0 if lo - 1e-12 <= rw <= hi + 1e-12 else 0.0)
            got = win.get()
            assert (got != got and want != want) or got == want
    back = se.from_state(json.loads(json.dumps(err.to_state())))
    assert back.get() == err.get()
    with pytest.raises(ValueError, match="label-free"):
        EstimateCheck("recall", estimate="precision")
    with pytest.raises(ValueError, match="output"):
        EstimateCheck("recall", estimate="LfExpectedRecall", output="both")


def test_estimate_diverges_under_concept_shift():
    """Calibrated scores, then the same scores with the labels of a shifted concept: the
    realized recall leaves the estimate's interval and the rule fires, only then."""
    m = se.Monitor.default(size=500, every=250, label_free=True)
    alerts = []
    m.on_alert.append(alerts.append)
    rng = np.random.default_rng(3)
    s = rng.random(6000)
    y = rng.random(6000) < s  # calibrated
    y[3000:] = rng.random(3000) < 0.5 * s[3000:] ** 3  # concept shift: fewer hits high up
    m.update_many(y, s)
    fired = [a for a in alerts if a["rule"] == "estimate diverged" and a["state"] == "firing"]
    assert fired and fired[0]["n"] > 3000
    assert m.snapshot()["segments"][None]["values"]["estimate_covered.recall@500"] == 0.0


def test_the_default_monitor_with_label_free_rows():
    m = se.Monitor.default(size=100, label_free=True)
    names = set(m.metrics)
    for k in ("predicted_positive_rate", "estimated_recall"):
        assert {k, f"{k}@100"} <= names
    assert {"estimation_error.recall", "estimation_error.recall@100",
            "estimate_covered.recall", "estimate_covered.recall@100"} <= names
    assert "estimate diverged" in {r.name for r in m.rules}
    assert set(m.label_free) >= {"predicted_positive_rate", "estimated_recall@100"}
    plain = se.Monitor.default(size=100)
    assert not plain.label_free and set(plain.metrics) < names


# ------------------------------------------------------------------- replay


def delayed_log(tmp_path, n=400, seed=2, stop=None):
    rng = np.random.default_rng(seed)
    preds, labels = [], []
    for i in range(n):
        y = bool(rng.random() < 0.3)
        s = float(np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1))
        preds.append({"id": f"p{i}", "ts": i, "score": s, "country": SEGMENTS[i % 3]})
        if (stop is None or i < stop) and rng.random() < 0.9:
            labels.append({"id": f"p{i}", "ts": i + int(rng.integers(1, 60)),
                           "label": int(y)})
    labels.sort(key=lambda r: r["ts"])
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in preds))
    (tmp_path / "l.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))
    return preds, labels


def test_replay_with_a_labels_file_counts_every_prediction_when_it_is_made(tmp_path):
    preds, labels = delayed_log(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[input]\nlabel_ttl = 45\nlabels = "l.jsonl"\n'
                   '[monitor]\ngroup_by = "country"\nsize = 50\nevery = 40\n')
    out = tmp_path / "out"
    assert cli_main(["replay", str(tmp_path / "p.jsonl"), "--config", str(cfg), "--out",
                     str(out), "--quiet", "--no-report", "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    finals = {f["segment"]: f for f in summary["final"]}
    s = np.array([p["score"] for p in preds])
    w = np.ones(len(s))
    seg = [p["country"] for p in preds]
    for key in (None,) + SEGMENTS:
        ix = [i for i in range(len(s)) if key is None or seg[i] == key]
        vals = finals[key]["values"]
        assert vals["predicted_positive_rate"] == pytest.approx(
            direct(LfPositiveRate, s[ix], w[ix]), rel=1e-12)
        assert vals["estimated_recall@50"] == pytest.approx(
            direct(LfExpectedRecall, s[ix][-50:], w[ix][-50:]), rel=1e-12)
    # coverage: a brute-force join (labels within 45 s of their prediction, on the
    # labels' clock; the rest expire or are still pending at the end)
    cov = finals[None]["coverage"]
    assert cov["predictions"] == len(preds)
    label_of = {r["id"]: r["ts"] for r in labels}
    last = max(r["ts"] for r in labels)
    joined = expired = 0
    clock = -math.inf
    events = sorted([(p["ts"], 0, p["id"]) for p in preds]
                    + [(r["ts"], 1, r["id"]) for r in labels])
    waiting = {}
    for ts, is_label, pid in events:
        if is_label:
            clock = max(clock, ts)
            for q, pt in list(waiting.items()):
                if clock - pt > 45:
                    del waiting[q]
                    expired += 1
            if pid in waiting:
                del waiting[pid]
                joined += 1
        else:
            waiting[pid] = ts
    assert (cov["labelled"], cov["expired"], cov["pending"]) == (joined, expired,
                                                                 len(waiting))
    assert summary["events"] == joined and summary["expired"] == expired
    assert label_of and last  # (the log has labels)


def test_the_labels_stop_scenario_shows_the_bad_deploy_from_the_predictions(tmp_path):
    """scenarios/labels_stop.toml: the label feed breaks on day 4, a bad deploy on day 6;
    the label-free rules fire (at n = the labels counted before the break), the
    realized one cannot, and the coverage counts what the log holds."""
    from streameval.replay import run_scenario

    root = Path(__file__).resolve().parent.parent
    summary, failures = run_scenario(root / "scenarios" / "labels_stop.toml", tmp_path / "o",
                                     report=False, progress=False)
    assert failures == []
    alerts = [json.loads(x) for x in (tmp_path / "o" / "alerts.jsonl").read_text().split("\n")
              if x]
    fired = {a["rule"]: a for a in alerts if a["state"] == "firing"}
    assert set(fired) == {"positive_rate_low", "estimated_recall_low"}
    deploy = 1_700_000_000 + 6 * 86400
    for a in fired.values():  # before the 1000-prediction windows (16.7 h) turn over
        assert deploy < a["t"] < deploy + 1000 * 60 and a["n"] == 2884
    rows = gzip_rows(root / "scenarios" / "data" / "labels_stop.jsonl.gz")
    n_pred = sum("score" in r for r in rows)
    n_lab = sum("label" in r for r in rows)
    cov = {f["segment"]: f for f in summary["final"]}[None]["coverage"]
    assert cov == {"predictions": n_pred, "labelled": n_lab, "pending": n_pred - n_lab,
                   "expired": 0}


def gzip_rows(path):
    import gzip

    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


#: values kept as float sums whose grouping follows the batches read (the expected AUC's
#: score order); the confusion-family estimates keep exact sums: equal to the bit
FLOAT_SUMS = {"estimated_roc_auc", "estimation_error.roc_auc"}


def test_a_replay_resumed_from_its_checkpoint_equals_one_uninterrupted(tmp_path):
    """Predictions and labels in one log that grows: a replay checkpointed on the first
    part (every 150 events or predictions), resumed on the whole log, writes the rows and
    alerts of one uninterrupted replay, label-free rows and coverage included."""
    from streameval.replay import replay

    preds, labels = delayed_log(tmp_path, n=900, seed=8, stop=600)
    rows = sorted(preds + labels, key=lambda r: (r["ts"], "label" in r))
    lines = [json.dumps(r) + "\n" for r in rows]
    cfg = {"input": {"label_ttl": 45},
           "monitor": {"group_by": "country", "size": 100, "every": 60}}
    whole = tmp_path / "whole.jsonl"
    whole.write_text("".join(lines))
    ref = tmp_path / "ref"
    replay(whole, ref, config=cfg, report=False, progress=False)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(lines[:700]))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    replay(log, out, config=cfg, report=False, progress=False, checkpoint=ckpt,
           checkpoint_every=150)
    log.write_text("".join(lines))  # the log grew
    summary = replay(log, out, config=cfg, report=False, progress=False, checkpoint=ckpt,
                     checkpoint_every=150)
    assert summary["resumed"]
    assert (out / "alerts.jsonl").read_text() == (ref / "alerts.jsonl").read_text()
    # realized values, coverage and the confusion-family estimates (exact sums) are
    # byte-identical; the expected AUC sums float weights in its score order, grouped by
    # the batches read, and the first run's last batch ended where that log did: equal
    # to 1e-12
    rows_out = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    rows_ref = [json.loads(x) for x in (ref / "metrics.jsonl").read_text().splitlines()]
    assert len(rows_out) == len(rows_ref)
    for got, want in zip(rows_out, rows_ref):
        assert {k: v for k, v in got.items() if k not in ("values", "intervals")} == {
            k: v for k, v in want.items() if k not in ("values", "intervals")}
        assert got["values"].keys() == want["values"].keys()
        for name, v in want["values"].items():
            if name.split("@")[0] in FLOAT_SUMS:
                assert (v is None) == (got["values"][name] is None), name
                assert v is None or abs(got["values"][name] - v) <= 1e-12, name
            else:
                assert got["values"][name] == v, name
    assert any("predicted_positive_rate@100" in r["values"] for r in rows_out)
    last = [r for r in rows_out if r["segment"] is None][-1]
    assert last["coverage"]["predictions"] == 900


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["predict", "label", "close", "event"]),
                              st.integers(0, 2), st.integers(0, 20), st.booleans()),
                    max_size=60),
       every=st.integers(0, 5))
def test_any_interleaving_counts_as_brute_force(ops, every):
    """Predictions, labels of waiting ones, closes and complete events in any order, one
    at a time or in batches of one: label-free values over every prediction, labelled
    ones over the labels, coverage as a brute-force tally."""
    m = se.Monitor({"ppr": LfPositiveRate(), "recall": se.Recall()}, every=every,
                   group_by="g")
    preds = {k: [] for k in (None,) + SEGMENTS}
    labelled = {k: [] for k in (None,) + SEGMENTS}
    tally = {k: dict(predictions=0, labelled=0, expired=0, replaced=0)
             for k in (None,) + SEGMENTS}
    waiting = []
    for what, g, x, flag in ops:
        seg, score = SEGMENTS[g], x / 20
        keys = (None, seg)
        if what == "predict":
            if flag:
                m.predict(score, segment=seg)
            else:
                m.predict_many([score], segment=[seg])
            waiting.append((seg, score))
            for k in keys:
                preds[k].append(score)
                tally[k]["predictions"] += 1
        elif what in ("label", "close") and waiting:
            seg, score = waiting.pop(x % len(waiting))
            keys = (None, seg)
            if what == "label":
                m.update(flag, score, segment=seg, predicted=True)
                for k in keys:
                    labelled[k].append((flag, score))
                    tally[k]["labelled"] += 1
            else:
                m.unlabelled(1, seg, expired=flag)
                for k in keys:
                    tally[k]["expired" if flag else "replaced"] += 1
        elif what == "event":
            m.update_many([flag], [score], segment=[seg])
            for k in keys:
                preds[k].append(score)
                labelled[k].append((flag, score))
                tally[k]["predictions"] += 1
                tally[k]["labelled"] += 1
    # coverage counts events when counted, values cover what the segments' rows fed
    before = m.snapshot()["segments"]
    m.evaluate()
    snap = m.snapshot()["segments"]
    for k in (None,) + SEGMENTS:
        assert before.get(k, {}).get("coverage") == snap.get(k, {}).get("coverage")
        if k not in snap:
            assert not preds[k] and not tally[k]["expired"] + tally[k]["replaced"]
            continue
        v = snap[k]["values"]
        p = preds[k]
        want_ppr = sum(s >= 0.5 for s in p) / len(p) if p else None
        assert v["ppr"] == (None if want_ppr is None else pytest.approx(want_ppr))
        pos = [(y, s) for y, s in labelled[k] if y]
        want_rec = sum(s >= 0.5 for _, s in pos) / len(pos) if pos else None
        assert v["recall"] == (None if want_rec is None else pytest.approx(want_rec))
        t = tally[k]
        only_complete = t["predictions"] == t["labelled"] and not (t["expired"] + t["replaced"])
        cov = snap[k].get("coverage")
        if cov is None:
            assert only_complete
            continue
        want = {"predictions": t["predictions"], "labelled": t["labelled"],
                "pending": t["predictions"] - t["labelled"] - t["expired"] - t["replaced"],
                "expired": t["expired"]}
        if t["replaced"]:
            want["replaced"] = t["replaced"]
        assert cov == want


# ------------------------------------------------------- segments at their own cadence

def brute_label_free(s, w, size=20):
    """The label-free stand-ins by their formulas (not their code): weighted share of
    scores >= 0.5, ``sum w s [s >= 0.5] / sum w s``, and the share over the last
    ``size`` predictions."""
    s, w = np.asarray(s, float), np.asarray(w, float)

    def share(s, w):
        return float((w * (s >= 0.5)).sum() / w.sum()) if w.sum() > 0 else math.nan

    p = (w * s).sum()
    return {"ppr": share(s, w), f"ppr@{size}": share(s[-size:], w[-size:]),
            "erecall": float((w * s * (s >= 0.5)).sum() / p) if p > 0 else math.nan}


def interleaved(n=240, seed=11):
    """Ops in time order: predictions (one or a batch of a few), their labels later
    (most; one or a batch), and a few complete events, over three segments."""
    y, s, w, seg, labelled = stream(n, seed)
    rng = np.random.default_rng(seed + 1)
    timed = []
    for i in range(n):
        if i % 17 == 3:  # a complete event
            timed.append((float(i), 2, i))
            continue
        timed.append((float(i), 0, i))
        if labelled[i]:
            timed.append((i + float(rng.integers(1, 60)) + 0.5, 1, i))
    timed.sort()
    ops, k = [], 0
    while k < len(timed):  # runs of one kind, in batches of 1 to 4
        kind = timed[k][1]
        run = [timed[k]]
        while (k + len(run) < len(timed) and timed[k + len(run)][1] == kind
               and len(run) < int(rng.integers(1, 5))):
            run.append(timed[k + len(run)])
        ops.append((kind, [(t, i) for t, _, i in run]))
        k += len(run)
    return y, s, w, seg, ops


def play(m, y, s, w, seg, ops, only=None):
    """Feed ``ops`` to ``m`` (``only``: that segment's events, without segments)."""
    for kind, run in ops:
        run = [(t, i) for t, i in run if only is None or seg[i] == only]
        if not run:
            continue
        ix = [i for _, i in run]
        ts = [t for t, _ in run]
        g = None if only is not None else [seg[i] for i in ix]
        if kind == 0:
            if len(run) == 1:
                m.predict(float(s[ix[0]]), w=float(w[ix[0]]), t=ts[0],
                          segment=None if g is None else g[0])
            else:
                m.predict_many(s[ix], w=w[ix], t=ts, segment=g)
        elif len(run) == 1:
            m.update(bool(y[ix[0]]), float(s[ix[0]]), w=float(w[ix[0]]), t=ts[0],
                     segment=None if g is None else g[0], predicted=kind == 1)
        else:
            m.update_many(y[ix], s[ix], w[ix], ts, g, predicted=kind == 1)


def test_a_segment_counts_predictions_and_labels_as_a_monitor_of_it_alone():
    """Predictions, their labels later and complete events of three segments,
    interleaved, one at a time and in batches: each segment's rows (written at its own
    cadence, counting predictions and labels alike) hold the values of the events it
    counted up to then, by brute force; after ``evaluate`` each segment's label-free and
    labelled values equal those of a Monitor fed that segment alone."""
    y, s, w, seg, ops = interleaved()
    m = monitor(every=5)
    rows = []
    m.on_metrics.append(rows.append)
    play(m, y, s, w, seg, ops)
    # each segment's arrivals in order: (kind, index); kind 0 prediction, 1 label, 2 both
    arrivals = {k: [] for k in SEGMENTS}
    for kind, run in ops:
        for _, i in run:
            arrivals[seg[i]].append((kind, i))
    seg_rows = [r for r in rows if r["segment"] is not None]
    assert {r["segment"] for r in seg_rows} == set(SEGMENTS)
    for r in seg_rows:
        # the row's counts: labelled events n, predictions (complete ones included)
        got_n, got_p = r["n"], r["coverage"]["predictions"]
        preds, labs = [], []
        for kind, i in arrivals[r["segment"]]:
            if len(labs) == got_n and len(preds) == got_p:
                break
            if kind != 1:
                preds.append(i)
            if kind != 0:
                labs.append(i)
        assert (len(labs), len(preds)) == (got_n, got_p)
        want = brute_label_free(s[preds], w[preds])
        yl, sl, wl = y[labs], s[labs], w[labs]
        want["recall"] = (recall_score(yl, sl >= 0.5, sample_weight=wl) if yl.any()
                          else math.nan)
        for name, v in want.items():
            g = r["values"][name]
            assert (g is None) if v != v else g == pytest.approx(v, rel=1e-12), (r, name)
    # no row of a segment repeats its counts: it writes one only when it counted
    counts = [(r["segment"], r["n"], r["coverage"]["predictions"]) for r in seg_rows]
    assert len(counts) == len(set(counts))
    m.evaluate()
    snap = m.snapshot()["segments"]
    for key in SEGMENTS:
        alone = monitor(every=5, group_by=None)
        play(alone, y, s, w, seg, ops, only=key)
        ref = alone.snapshot()["segments"][None]
        assert snap[key]["values"] == ref["values"], key
        assert snap[key]["n"] == ref["n"] and snap[key]["coverage"] == ref["coverage"]
        preds = [i for kind, i in arrivals[key] if kind != 1]
        want = brute_label_free(s[preds], w[preds])
        for name, v in want.items():
            assert snap[key]["values"][name] == pytest.approx(v, rel=1e-12), (key, name)


def test_a_checkpoint_holds_a_segment_buffer_of_predictions_and_labels():
    """A segment's buffered predictions and labels (with their kinds) survive
    ``to_state``/``from_state`` and the binary state: the rows after a restore are
    those of the monitor that was never stopped."""
    y, s, w, seg, ops = interleaved(160, seed=12)
    cut = len(ops) // 2
    ref = monitor(every=6)
    rows_ref = []
    ref.on_metrics.append(rows_ref.append)
    play(ref, y, s, w, seg, ops)
    ref.flush()
    for dump, load in ((se.Monitor.to_state, se.Monitor.from_state),
                       (se.Monitor.to_array_state, se.Monitor.from_array_state)):
        a = monitor(every=6)
        rows = []
        a.on_metrics.append(rows.append)
        play(a, y, s, w, seg, ops[:cut])
        assert any(v.get("pending") for v in a.snapshot()["segments"].values())
        state = dump(a)
        if dump is se.Monitor.to_state:  # (buffered events with their kinds)
            assert '"k": [' in json.dumps(state)
        b = load(state)
        b.on_metrics.append(rows.append)
        play(b, y, s, w, seg, ops[cut:])
        b.flush()
        assert rows == rows_ref


def test_checks_that_differ_in_what_they_report_share_one_pair_of_metrics():
    """``estimate_covered.<m>`` reads ``estimation_error.<m>``'s metrics (a CheckView):
    its values and state are those of an unshared check fed the same events (the
    oracle: standalone EstimateChecks), and the monitor's states round trip."""
    from streameval.metrics.checked import CheckView

    rng = np.random.default_rng(4)
    y = rng.random(3000) < 0.3
    s = np.clip(rng.normal(0.3 + 0.3 * y, 0.2), 0, 1)
    m = se.Monitor.default(size=500, every=400, label_free=True)
    for i in range(0, 3000, 700):
        m.update_many(y[i:i + 700], s[i:i + 700])
    m.flush()
    seg = m.scopes()[0]  # the whole stream's
    for k in ("precision", "recall", "f1", "roc_auc"):
        for suffix in ("", "@500"):
            cov = seg.metrics[f"estimate_covered.{k}{suffix}"]
            assert isinstance(cov, CheckView), (k, suffix)
            assert not isinstance(seg.metrics[f"estimation_error.{k}{suffix}"], CheckView)
            alone = EstimateCheck(k, output="covered")
            err = EstimateCheck(k, output="error")
            part = slice(2500, 3000) if suffix else slice(0, 3000)
            alone.update_many(y[part], s[part])
            err.update_many(y[part], s[part])
            got = cov.get()
            assert (got != got and alone.get() != alone.get()) or got == alone.get()
            assert seg.metrics[f"estimation_error.{k}{suffix}"].get() == pytest.approx(
                err.get(), abs=1e-12)
            if not suffix:
                assert cov.to_state()["params"] == alone.to_state()["params"]
                assert json.dumps(cov.to_state()["data"]["realized"]) == json.dumps(
                    alone.to_state()["data"]["realized"])
    snap = m.snapshot()
    assert se.Monitor.from_state(json.loads(json.dumps(m.to_state()))).snapshot() == snap
    assert se.Monitor.from_array_state(m.to_array_state()).snapshot() == snap
    with pytest.raises(TypeError, match="read-only"):
        seg.metrics["estimate_covered.recall"].update(True, 0.5)


def test_a_sustained_fall_raises_no_rise_unless_labels_count_the_scores_again():
    """Scores fall at prediction 20 000 and stay low; labels of all 40 000 come after.
    Sent as labels of earlier predictions (``predicted=True``) the score detector sees
    each score once: drops only (the first with a window that straddles the fall, a
    second once the window is all low), never a rise. Sent as complete events, every
    score counts a second time, the high scores of before the fall come back, and the
    detector rightly sees a rise: the `score drift on rise` reported after a sustained
    fall. Oracle: a ScoreDriftDetector fed the same scores directly."""
    from streameval.metrics.scoredrift import ScoreDriftDetector

    rng = np.random.default_rng(1)
    s = np.r_[rng.beta(2, 3, 20_000), rng.beta(1.2, 3.6, 20_000)]
    y = rng.random(len(s)) < s
    for predicted in (True, False):
        m = se.Monitor.default(label_free=True, every=500)
        fired = []
        m.on_alert = [lambda a: fired.append((a["rule"], a["state"]))]
        for a in range(0, len(s), 500):
            m.predict_many(s[a:a + 500])
        for a in range(0, len(s), 500):
            m.update_many(y[a:a + 500], s[a:a + 500], predicted=predicted)
        m.flush()
        rep = m.snapshot()["segments"][None]["drift"]["score_shift"]
        direct = ScoreDriftDetector(alpha=0.0025, reference=5000, window=5000, every=500)
        direct.update_many(None, s if predicted else np.r_[s, s])
        assert (rep["changes"], rep["rises"]) == (len(direct.changes),
                                                 sum(c["direction"] == "rise"
                                                     for c in direct.changes))
        if predicted:
            assert rep["rises"] == 0 and rep["drops"] >= 1
            assert ("score drift on rise", "firing") not in fired
        else:
            assert rep["rises"] >= 1
            assert ("score drift on rise", "firing") in fired
