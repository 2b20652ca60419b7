"""The replay report: the page, the data it draws, downsampling, trouble order, curves.

Oracles: for final values and spans, a direct reading of the rows written here by
hand; for downsampling and the trouble order, brute force over the same rows; for the
ROC/PR curves, the confusion matrix, the histogram and the reliability curve,
scikit-learn and numpy; for threshold rule names, :mod:`streameval.alerts` itself. What
the page shows in a browser is tested in ``tests/test_browser.py``.
"""

import json
import math
import re
import sys
from datetime import datetime, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.calibration import calibration_curve
from sklearn.metrics import (
    average_precision_score,
    confusion_matrix,
    precision_recall_curve,
    roc_auc_score,
    roc_curve,
)

from streameval import Monitor
from streameval import report
from streameval.report import (
    CurveRecorder,
    downsample,
    final_values,
    firing_spans,
    metric_names,
    monitor_curves,
    pending_spans,
    plot_metric,
    read_jsonl,
    report_data,
    report_from_dir,
    score_summary,
    trouble_order,
    write_report,
)


def _rows():
    rng = np.random.default_rng(7)
    rows = []
    for n in range(500, 20001, 500):
        for seg in ("eu", "us"):
            drop = 0.25 if (seg == "eu" and n > 12000) else 0.0
            rows.append({
                "n": n,
                "t": 1_700_000_000.0 + n,
                "segment": seg,
                "values": {
                    "roc_auc": 0.91 - drop + float(rng.normal(0, 0.005)),
                    "recall@sliding": 0.8 - drop + float(rng.normal(0, 0.01)),
                    # undefined at first (no positives yet), then defined
                    "average_precision": None if n < 2000 else 0.6 + n / 1e6,
                },
            })
    return rows


ALERTS = [
    {"rule": "recall_low", "state": "pending", "n": 12500, "t": None, "value": 0.55, "segment": "eu"},
    {"rule": "recall_low", "state": "firing", "n": 13000, "t": None, "value": 0.55, "segment": "eu"},
    {"rule": "recall_low", "state": "resolved", "n": 17000, "t": None, "value": 0.81, "segment": "eu"},
    {"rule": "auc_drop", "state": "firing", "n": 15000, "t": None, "value": 0.66, "segment": "eu"},
]


def page_data(path):
    """The JSON the page embeds (what its script draws)."""
    page = path.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="se-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


# ----------------------------------------------------------------------- the page


def test_report_is_one_self_contained_page_with_every_metric_and_final_value(tmp_path):
    rows = _rows()
    path = write_report(rows, ALERTS, tmp_path, title="drift <test>", summary={"events": 20000})
    assert path == tmp_path / "report.html"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # nothing beside it
    page = path.read_text(encoding="utf-8")
    # offline: plotly.js inline, no external script, style sheet or image
    assert "<title>drift &lt;test&gt;</title>" in page
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"(?!data:)", page)
    assert "Plotly" in page and len(page) > 3_000_000
    data = page_data(path)
    assert data["title"] == "drift <test>" and data["summary"] == {"events": 20000}
    assert data["metrics"] == ["roc_auc", "recall@sliding", "average_precision"]
    # the final values: the last row of each segment, read by hand
    last = {seg: [r for r in rows if r["segment"] == seg][-1] for seg in ("eu", "us")}
    by_label = {s["label"]: s for s in data["segments"]}
    for seg in ("eu", "us"):
        s = by_label[f"segment {seg}"]
        assert s["n"] == last[seg]["n"] and s["t"] == last[seg]["t"]
        assert s["values"] == last[seg]["values"]
    # every transition is in the alert table, fields as written
    assert data["alerts"] == ALERTS


def test_rows_of_few_points_are_drawn_whole_at_stream_n(tmp_path):
    rows = []
    for i, n in enumerate(range(1000, 10001, 1000)):
        t = 1_709_000_000.0 + 60 * i
        rows.append({"n": n, "t": t, "segment": None, "values": {"recall": 0.8}})
        rows.append({"n": n // 4, "stream_n": n, "t": t, "segment": "eu", "values": {"recall": 0.6}})
        rows.append({"n": n - n // 4, "stream_n": n, "t": t, "segment": "us",
                     "values": {"recall": 0.9}})
    data = report_data(rows, [])
    labels = [s["label"] for s in data["segments"]]
    xs = {labels[s["seg"]]: s["x"] for s in data["series"]["recall"]}
    stream = list(range(1000, 10001, 1000))
    assert xs == {"all events": stream, "segment eu": stream, "segment us": stream}
    assert data["time_axis"] is True
    ts = {labels[s["seg"]]: s["t"] for s in data["series"]["recall"]}
    assert ts["segment eu"] == [1_709_000_000.0 + 60 * i for i in range(10)]
    # each segment's own n in the tables
    assert {s["label"]: s["n"] for s in data["segments"]} == {
        "all events": 10000, "segment eu": 2500, "segment us": 7500}
    # rows without stream_n sit at their own n; without times there is no time axis
    plain = [{k: v for k, v in r.items() if k != "stream_n"} | {"t": None} for r in rows]
    data = report_data(plain, [])
    xs = {data["segments"][s["seg"]]["label"]: s["x"] for s in data["series"]["recall"]}
    assert xs["segment eu"] == [n // 4 for n in stream] and data["time_axis"] is False
    assert "t" not in data["series"]["recall"][0]


def test_a_value_left_out_is_not_drawn_and_undefined_is_a_gap():
    rows = [{"n": 1, "t": None, "segment": None, "values": {"a": 0.1, "tumbling": 0.3}},
            {"n": 2, "t": None, "segment": None, "values": {"a": None}},
            {"n": 3, "t": None, "segment": None, "values": {"a": 0.2, "tumbling": 0.4}}]
    data = report_data(rows, [])
    (a,), (tumbling,) = data["series"]["a"], data["series"]["tumbling"]
    assert (a["x"], a["y"]) == ([1, 2, 3], [0.1, None, 0.2])
    assert (tumbling["x"], tumbling["y"]) == ([1, 3], [0.3, 0.4])


def test_alert_lanes_one_per_rule_and_segment_and_spans_on_their_metric_only():
    rows = [{"n": n, "t": None, "segment": seg,
             "values": {"recall@6h": 0.9, "precision": 0.8, "drift.recall.p_value": 0.5}}
            for n in range(1000, 10001, 1000) for seg in (None, "br")]
    alerts = [
        {"rule": "recall@6h < 0.7", "state": "pending", "n": 3000, "t": None, "value": 0.6, "segment": "br"},
        {"rule": "recall@6h < 0.7", "state": "firing", "n": 4000, "t": None, "value": 0.6, "segment": "br"},
        {"rule": "recall@6h < 0.7", "state": "resolved", "n": 6000, "t": None, "value": 0.8, "segment": "br"},
        {"rule": "recall@6h < 0.7", "state": "firing", "n": 5000, "t": None, "value": 0.6, "segment": None},
        {"rule": "recall drift p < 0.01", "state": "firing", "n": 7000, "t": None, "value": 0.001,
         "segment": None},
        {"rule": "custom", "state": "firing", "n": 8000, "t": None, "value": 1.0, "segment": None,
         "metric": "precision"},  # an alert that names its metric
        {"rule": "mystery", "state": "firing", "n": 9000, "t": None, "value": 1.0, "segment": None},
    ]
    data = report_data(rows, alerts)
    labels = [s["label"] for s in data["segments"]]
    lanes = {(ln["rule"], labels[ln["seg"]]): ln for ln in data["lanes"]}
    assert sorted(lanes) == sorted([("recall@6h < 0.7", "segment br"), ("recall@6h < 0.7", "all events"),
                                    ("recall drift p < 0.01", "all events"), ("custom", "all events"),
                                    ("mystery", "all events")])
    br = lanes[("recall@6h < 0.7", "segment br")]
    assert [(s["state"], s["x0"], s["x1"]) for s in br["spans"]] == [
        ("pending", 3000, 4000), ("firing", 4000, 6000)]
    # still firing at the end: the span closes at the last n
    assert [(s["state"], s["x0"], s["x1"]) for s in lanes[("recall@6h < 0.7", "all events")]["spans"]] \
        == [("firing", 5000, 10000)]
    assert {k: ln["metric"] for k, ln in lanes.items()} == {
        ("recall@6h < 0.7", "segment br"): "recall@6h", ("recall@6h < 0.7", "all events"): "recall@6h",
        ("recall drift p < 0.01", "all events"): "drift.recall.p_value",
        ("custom", "all events"): "precision", ("mystery", "all events"): None}
    # the same spans as the pure functions give
    assert firing_spans(alerts, 10000)[0] == ("recall@6h < 0.7", "br", 4000, 6000)


def test_threshold_lines_from_rules_and_rule_names():
    rows = [{"n": n, "t": None, "segment": None,
             "values": {"recall@6h": 0.9 - n / 40000, "drift.recall.p_value": 0.5, "auc": 0.8}}
            for n in range(1000, 10001, 1000)]
    alerts = [
        {"rule": "recall@6h < 0.7", "state": "firing", "n": 9000, "t": None, "value": 0.675, "segment": None},
        {"rule": "recall drift p < 0.01", "state": "firing", "n": 5000, "t": None, "value": 0.001,
         "segment": None},
        {"rule": "auc_low", "state": "firing", "n": 5000, "t": None, "value": 0.1, "segment": None},
    ]
    rules = [
        {"metric": "recall@6h", "op": "<", "value": 0.5, "name": "recall_floor"},  # never fired
        {"metric": "recall@6h", "op": "<", "value": 0.7},  # the same as the transitions' rule
        {"metric": "auc", "drop": 0.05},                   # no fixed threshold: no line
        "auc > 0.99 with confidence 0.9",
    ]
    th = report_data(rows, alerts, rules=rules)["thresholds"]
    assert sorted(map(tuple, th["recall@6h"])) == [("recall@6h < 0.7", 0.7), ("recall_floor", 0.5)]
    assert th["drift.recall.p_value"] == [["recall drift p < 0.01", 0.01]]
    assert th["auc"] == [["auc > 0.99 with confidence 0.9", 0.99]]
    # without rules, the rule names of the transitions alone give their lines
    th = report_data(rows, alerts)["thresholds"]
    assert th["recall@6h"] == [["recall@6h < 0.7", 0.7]] and "auc" not in th


def test_threshold_rule_names_are_those_of_the_rules():
    from streameval.alerts import rule_from_config

    tables = [
        {"metric": "recall@10000", "op": "<", "value": 0.8},
        {"metric": "log_loss", "op": ">=", "value": 2, "for": 3},
        {"metric": "recall", "op": "<", "value": 1e-5, "confidence": 0.99},
        {"drift": "recall", "p_below": 0.01},
        {"drift": "precision", "p_below": 0.05, "direction": "any"},
        {"metric": "recall", "op": "<", "value": 0.8, "name": "recall_low"},
        {"rule": "recall@6h<0.75", "name": "named"},
        {"rule": "roc_auc < 0.7 with confidence 0.95"},
    ]
    for table in tables:
        rule = rule_from_config(table)
        metric = f"drift.{rule.metric}.p_value" if "drift" in table else rule.metric
        threshold = rule.p_below if "drift" in table else rule.value
        assert report._threshold_of(table) == (metric, threshold, rule.name), table
        assert report._threshold_of(rule) == (metric, threshold, rule.name), table
        # the name alone, as alerts.jsonl holds it, gives the same line when it parses
        if "name" not in table:
            assert report._threshold_of(rule.name) == (metric, threshold, rule.name)


def test_report_from_dir_reads_the_files(tmp_path):
    rows = _rows()
    with open(tmp_path / "metrics.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    data = page_data(report_from_dir(tmp_path))
    assert data["alerts"] == [] and data["lanes"] == []
    assert data["downsample"]["rows"] == len(rows)


def test_clear_error_without_plotly(tmp_path, monkeypatch):
    for mod in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "plotly", None)
    report.plotly_js.cache_clear()  # the bundle is read once per process
    with pytest.raises(ImportError, match=re.escape("pip install 'streameval[report]'")):
        write_report(_rows(), [], tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_the_page_survives_hostile_names(tmp_path):
    rows = [{"n": 1, "t": None, "segment": "</script><script>alert(1)</script>",
             "values": {"<!--x": 0.5}}]
    path = write_report(rows, [], tmp_path)
    page = path.read_text()
    assert page.count("</script>") == 4  # plotly, data, config, the drawing script
    assert page_data(path)["segments"][0]["segment"] == rows[0]["segment"]


# ------------------------------------------------------------------ downsampling


def _brute_extremes(y, buckets):
    """Per equal-count bucket: (start, end, nanmin, nanmax), by brute force."""
    n = len(y)
    size = -(-n // buckets)
    out = []
    for start in range(0, n, size):
        part = [v for v in y[start:start + size] if not math.isnan(v)]
        out.append((start, min(start + size, n), min(part) if part else None,
                    max(part) if part else None))
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.floats(-5, 5), st.just(math.nan)), min_size=1, max_size=300),
       st.integers(1, 20), st.lists(st.integers(-3, 310), max_size=6))
def test_downsample_keeps_bucket_extremes_pins_and_gaps(y, buckets, pinned):
    y = np.array(y, dtype=float)
    keep = downsample(y, buckets, pinned)
    kept = set(keep.tolist())
    assert keep.tolist() == sorted(kept) and all(0 <= i < len(y) for i in kept)
    if len(y) <= 4 * buckets:
        assert kept == set(range(len(y)))
        return
    for start, end, lo, hi in _brute_extremes(y, buckets):
        inside = [y[i] for i in kept if start <= i < end]
        assert start in kept and end - 1 in kept
        if lo is not None:
            assert lo in inside and hi in inside
    assert {p for p in pinned if 0 <= p < len(y)} <= kept
    nan = np.isnan(y)
    for i in range(1, len(y)):
        if nan[i] != nan[i - 1]:
            assert {i - 1, i} <= kept
    changes = int((nan[1:] != nan[:-1]).sum())
    assert len(keep) <= 4 * buckets + len(pinned) + 2 * changes


def test_report_timelines_keep_extremes_and_alert_boundaries_of_long_streams():
    rng = np.random.default_rng(3)
    n_rows = 20_000
    rows = [{"n": (i + 1) * 10, "t": None, "segment": None,
             "values": {"auc": float(v)}} for i, v in enumerate(rng.normal(0.8, 0.05, n_rows))]
    alerts = [{"rule": "auc < 0.6", "state": "firing", "n": 55_555, "t": None, "value": 0.5, "segment": None},
              {"rule": "auc < 0.6", "state": "resolved", "n": 123_450, "t": None, "value": 0.7,
               "segment": None}]
    data = report_data(rows, alerts, point_budget=2_000)
    (s,) = data["series"]["auc"]
    assert len(s["x"]) <= 2_000 + 4 and data["downsample"]["points"] == len(s["x"])
    ys = [r["values"]["auc"] for r in rows]
    assert float(f"{max(ys):.6g}") in s["y"] and float(f"{min(ys):.6g}") in s["y"]
    # the rows on both sides of each boundary (55 550 / 55 560; 123 450 itself / 123 460)
    assert {55_550, 55_560, 123_450, 123_460} <= set(s["x"])
    assert s["x"][0] == 10 and s["x"][-1] == n_rows * 10


def test_many_segments_stay_within_the_point_budget():
    rows = []
    for k in range(1, 301):
        for seg in range(120):
            rows.append({"n": k * 10, "stream_n": k * 1200, "t": None, "segment": f"s{seg}",
                         "values": {"auc": 0.8 + (seg % 7) / 100 - (0.3 if seg == 77 and k > 150 else 0),
                                    "recall": 0.7}})
    alerts = [{"rule": "auc < 0.6", "state": "firing", "n": 182_400, "t": None, "value": 0.5,
               "segment": "s77"}]
    data = report_data(rows, alerts, point_budget=20_000, timeline_segments=10)
    assert data["segments"][0]["label"] == "segment s77"  # the alert: most troubled
    assert data["downsample"]["segments_drawn"] == 10 and len(data["segments"]) == 120
    assert data["downsample"]["points"] <= 20_000
    assert {s["seg"] for s in data["series"]["auc"]} == set(data["drawn"]) == set(range(10))


# ----------------------------------------------------------------------- trouble


def _brute_drop(ys, ns):
    """The largest fall from an earlier peak after the first 5 % of events, O(n^2)."""
    pts = [(y, n) for y, n in zip(ys, ns) if n >= 0.05 * ns[-1] and y is not None]
    return max([0.0] + [pts[i][0] - pts[j][0] for i in range(len(pts))
                        for j in range(i + 1, len(pts))])


def test_segments_sorted_by_alerts_then_drop():
    rng = np.random.default_rng(11)
    curves = {"calm": 0.9 + rng.normal(0, 0.01, 40),
              "dip": np.r_[np.full(20, 0.9), np.full(20, 0.6)] + rng.normal(0, 0.01, 40),
              "small": np.r_[np.full(30, 0.9), np.full(10, 0.85)] + rng.normal(0, 0.01, 40),
              "alerted": 0.9 + rng.normal(0, 0.01, 40)}
    rows = [{"n": (i + 1) * 100, "stream_n": (i + 1) * 400, "t": None, "segment": seg,
             "values": {"auc": float(ys[i]), "log_loss": 0.3}}
            for i in range(40) for seg, ys in curves.items()]
    alerts = [{"rule": "r", "state": "firing", "n": 2000, "t": None, "value": 0.1, "segment": "alerted"},
              {"rule": "r", "state": "resolved", "n": 3000, "t": None, "value": 0.1, "segment": "alerted"}]
    data = report_data(rows, alerts)
    assert [s["label"] for s in data["segments"]] == [
        "segment alerted", "segment dip", "segment small", "segment calm"]
    ns = [(i + 1) * 100 for i in range(40)]
    for s in data["segments"]:
        ys = curves[s["segment"]].tolist()
        assert s["drop"] == pytest.approx(_brute_drop(ys, ns), abs=1e-6)
    assert [s["alerts"] for s in data["segments"]] == [1, 0, 0, 0]
    # a rising log loss is a drop; drift p-values are not
    assert report._drop("log_loss@100", [0.2, 0.5, 0.3], [1, 2, 3]) == pytest.approx(0.3)
    assert report._drop("drift.recall.p_value", [1.0, 0.0], [1, 2]) == 0.0
    assert trouble_order([{"alerts": 0, "drop": 0.0, "n": 5}, {"alerts": 0, "drop": 0.0, "n": 9}]) == [1, 0]


# ----------------------------------------------------------------- score summaries


def _weights_per_score(y, s, w):
    keys = np.unique(s)
    idx = np.searchsorted(keys, s)
    return keys, np.bincount(idx, w * (y == 1), len(keys)), np.bincount(idx, w * (y == 0), len(keys))


@pytest.mark.parametrize("rounded", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_score_summary_equals_scikit_learn(rounded, weighted):
    rng = np.random.default_rng(5)
    n = 3000
    y = rng.integers(0, 2, n)
    s = np.clip(0.35 * y + rng.uniform(0, 0.65, n), 0, 1)
    if rounded:
        s = s.round(2)
    w = rng.uniform(0.2, 3.0, n) if weighted else np.ones(n)
    summary = score_summary(*_weights_per_score(y, s, w), threshold=0.5, points=100_000)
    fpr, tpr, thr = roc_curve(y, s, sample_weight=w, drop_intermediate=False)
    np.testing.assert_allclose(summary["roc"]["fpr"], fpr, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(summary["roc"]["tpr"], tpr, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(summary["roc"]["thr"][1:], thr[1:], rtol=1e-5)
    assert summary["auc"] == pytest.approx(roc_auc_score(y, s, sample_weight=w), abs=1e-12)
    p, r, t = precision_recall_curve(y, s, sample_weight=w, drop_intermediate=False)
    np.testing.assert_allclose(summary["pr"]["precision"], p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(summary["pr"]["recall"], r, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(summary["pr"]["thr"][:-1], t, rtol=1e-5)
    # AP from the curve's points, as scikit-learn defines it
    pr = np.array(summary["pr"]["precision"]), np.array(summary["pr"]["recall"])
    ap = -np.sum(np.diff(pr[1]) * pr[0][:-1])
    assert ap == pytest.approx(average_precision_score(y, s, sample_weight=w), abs=1e-5)
    tn, fp, fn, tp = confusion_matrix(y, s >= 0.5, sample_weight=w).ravel()
    c = summary["confusion"]
    assert (c["tp"], c["fp"], c["fn"], c["tn"]) == pytest.approx((tp, fp, fn, tn), rel=1e-9)
    edges = np.linspace(s.min(), s.max(), 21)
    pos, _ = np.histogram(s[y == 1], bins=edges, weights=w[y == 1])
    neg, _ = np.histogram(s[y == 0], bins=edges, weights=w[y == 0])
    np.testing.assert_allclose(summary["hist"]["pos"], pos, rtol=1e-5)
    np.testing.assert_allclose(summary["hist"]["neg"], neg, rtol=1e-5)
    if not weighted:  # calibration_curve takes no weights
        rate, mean = calibration_curve(y, s, n_bins=20, strategy="uniform")
        np.testing.assert_allclose(summary["calibration"]["rate"], rate, rtol=1e-5)
        np.testing.assert_allclose(summary["calibration"]["score"], mean, rtol=1e-5)


def test_thinned_curves_are_points_of_the_exact_curve():
    rng = np.random.default_rng(9)
    y = rng.integers(0, 2, 5000)
    s = rng.uniform(size=5000)
    summary = score_summary(*_weights_per_score(y, s, np.ones(5000)), points=200)
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    got = np.c_[summary["roc"]["fpr"], summary["roc"]["tpr"]]
    assert len(got) == 200
    for point in got:  # each a point of the exact curve (6 significant digits)
        assert np.abs(np.c_[fpr, tpr] - point).max(axis=1).min() < 1e-6
    assert got[0].tolist() == [0.0, 0.0] and got[-1].tolist() == [1.0, 1.0]
    assert summary["auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)  # from every point
    # scores outside [0, 1]: no reliability curve
    assert score_summary([-1.0, 2.0], [1, 0], [0, 1])["calibration"] is None


def test_monitor_curves_and_recorder_read_the_monitors_score_order():
    rng = np.random.default_rng(2)
    n = 4000
    y = rng.integers(0, 2, n)
    s = np.clip(0.3 * y + rng.uniform(0, 0.7, n), 0, 1).round(3)
    seg = np.where(rng.uniform(size=n) < 0.4, "eu", "us")
    mon = Monitor.from_config({"metrics": {"auc": "roc_auc", "recall": "recall"},
                               "group_by": "country", "every": 500, "rules": ["recall < 0.01"]})
    rec = CurveRecorder(mon)
    mon.on_alert.append(rec)
    mon.update_many(y, s, segment=seg)
    mon.evaluate()  # (a segment counts its buffered events at its own evaluation points)
    got = {c["segment"]: c for c in rec.curves(["eu"])}
    assert set(got) == {None, "eu"}
    for key, mask in ((None, np.ones(n, bool)), ("eu", seg == "eu")):
        assert got[key]["auc"] == pytest.approx(roc_auc_score(y[mask], s[mask]), abs=1e-12)
        tn, fp, fn, tp = confusion_matrix(y[mask], s[mask] >= 0.5).ravel()
        c = got[key]["confusion"]
        assert (c["tp"], c["fp"], c["fn"], c["tn"]) == (tp, fp, fn, tn)
        assert got[key]["events"] == mask.sum() and got[key]["stream_n"] == n
    # a Monitor without a score-order metric gives none
    assert monitor_curves(Monitor.from_config({"metrics": {"recall": "recall"}}), [None]) == []


def test_recorder_takes_summaries_when_alerts_fire():
    mon = Monitor.from_config({"metrics": {"auc": "roc_auc", "recall": "recall"}, "every": 100,
                               "rules": ["recall < 0.5"]})
    rec = CurveRecorder(lambda: mon, limit=1)
    mon.on_alert.append(rec)
    y = np.r_[np.tile([0, 1], 250), np.ones(500, int)]
    s = np.r_[np.tile([0.2, 0.8], 250), np.full(500, 0.1)]
    mon.update_many(y, s)
    (taken,) = rec.taken
    assert taken["label"] == "when recall < 0.5 fired"
    k = taken["stream_n"]
    assert 500 < k < 1000
    assert taken["auc"] == pytest.approx(roc_auc_score(y[:k], s[:k]), abs=1e-12)


def _scored_log(tmp_path, seed, n):
    """A JSONL log of ``n`` events a second apart, labels 0/1 at random and scores
    rounded to 4 decimals that rank positives higher: ``(labels, scores, path)``."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = np.clip(0.3 * y + rng.uniform(0, 0.7, n), 0, 1).round(4)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"ts": 1_700_000_000 + i, "label": int(y[i]),
                                       "score": float(s[i])}) + "\n" for i in range(n)))
    return y, s, log


def test_replay_report_carries_curves_equal_to_scikit_learn(tmp_path):
    from streameval.replay import replay

    y, s, log = _scored_log(tmp_path, seed=4, n=3000)
    summary = replay(str(log), tmp_path / "out", progress=False)
    data = page_data(tmp_path / "out" / "report.html")
    end = next(c for c in data["curves"] if c["segment"] is None and c["label"] == "end of stream")
    assert end["auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert data["time_axis"] is True
    assert summary["report"] == str(tmp_path / "out" / "report.html")


# ----------------------------------------------------------------- pure functions


def test_final_values_keep_last_reported_and_undefined():
    rows = [
        {"n": 10, "t": None, "segment": None, "values": {"a": 0.1, "tumbling": 0.3}},
        {"n": 20, "t": 5.0, "segment": None, "values": {"a": None}},
    ]
    assert final_values(rows) == {None: {"n": 20, "t": 5.0, "values": {"a": None, "tumbling": 0.3}}}
    assert metric_names(rows) == ["a", "tumbling"]
    data = report_data(rows, [])
    assert data["segments"][0]["values"] == {"a": None, "tumbling": 0.3}


def test_firing_spans_pairs_transitions_per_rule_and_segment():
    alerts = [
        {"rule": "r", "state": "firing", "n": 10, "segment": "a"},
        {"rule": "r", "state": "firing", "n": 12, "segment": "b"},
        {"rule": "r", "state": "resolved", "n": 20, "segment": "a"},
        {"rule": "q", "state": "pending", "n": 25, "segment": None},
        {"rule": "q", "state": "resolved", "n": 26, "segment": None},  # never fired
    ]
    assert firing_spans(alerts, end_n=100) == [("r", "a", 10, 20), ("r", "b", 12, 100)]


def test_pending_spans_pair_pending_with_firing_or_resolved():
    alerts = [
        {"rule": "r", "state": "pending", "n": 10, "segment": "a"},
        {"rule": "r", "state": "firing", "n": 15, "segment": "a"},
        {"rule": "q", "state": "pending", "n": 25, "segment": None},
        {"rule": "q", "state": "resolved", "n": 26, "segment": None},
        {"rule": "q", "state": "pending", "n": 40, "segment": None},
    ]
    assert pending_spans(alerts, end_n=50) == [("r", "a", 10, 15), ("q", None, 25, 26),
                                               ("q", None, 40, 50)]


def test_read_jsonl_names_the_bad_line(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"n": 1}\n\n{"n": \n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:3: not valid JSON"):
        read_jsonl(p)


def test_values_nan_formatting():
    assert report._fmt(math.nan) == "undefined"
    assert report._fmt(None) == "undefined"
    assert report._fmt(0.123456789) == "0.123457"


def test_time_formatting():
    assert report.format_time(0) == "1970-01-01 00:00:00 UTC"
    t = datetime(2024, 3, 2, 23, 59, 43, tzinfo=timezone.utc).timestamp()
    assert report.format_time(t + 0.9) == "2024-03-02 23:59:43 UTC"
    assert report.format_time(None) == "" and report.format_time(math.nan) == ""
    assert report.format_time(1e20) == "1e+20"  # beyond datetime: the number itself


def test_plot_metric_draws_its_rules_spans_and_thresholds_only():
    rows = [{"n": n, "t": None, "segment": None, "values": {"f1": 0.5, "auc": 0.7}}
            for n in (10, 20, 30)]
    alerts = [{"rule": "f1 < 0.6", "state": "firing", "n": 20, "t": None, "value": 0.5, "segment": None},
              {"rule": "auc < 0.8", "state": "firing", "n": 10, "t": None, "value": 0.7, "segment": None}]
    fig = plot_metric("f1", rows, alerts)
    (ax,) = fig.axes
    assert ax.get_ylabel() == "f1" and ax.get_title() == "f1"
    dashed = [(line.get_label(), float(line.get_ydata()[0])) for line in ax.get_lines()
              if line.get_linestyle() == "--"]
    assert dashed == [("f1 < 0.6", 0.6)]
    labels = [p.get_label() for p in ax.patches]
    assert labels == ["alert f1 < 0.6 firing"]  # not the auc rule's span


# ----------------------------------------------------------------- the live timeline


def test_live_timeline_is_bounded_and_keeps_extremes_and_alert_rows():
    from streameval.service.ui import Timeline

    rng = np.random.default_rng(8)
    tl = Timeline(max_rows=400)
    tl.add_alert({"rule": "r", "state": "firing", "n": 3_885, "segment": "a"})
    ys = {seg: rng.normal(0.8, 0.05, 3000) for seg in ("a", "b")}
    for i in range(3000):
        for seg in ("a", "b"):
            tl.add_row({"n": i + 1, "stream_n": 2 * (i + 1), "t": None, "segment": seg,
                        "values": {"auc": float(ys[seg][i])}})
    rows = tl.rows()
    assert len(rows) <= 400 and tl.thinned == 6000 - len(rows)
    for seg in ("a", "b"):
        mine = [r for r in rows if r["segment"] == seg]
        assert [r["n"] for r in mine] == sorted(r["n"] for r in mine)
        kept = [r["values"]["auc"] for r in mine]
        assert max(ys[seg]) in kept and min(ys[seg]) in kept  # the extremes, always
        assert mine[-1]["n"] == 3000
    # the rows on both sides of the alert (stream_n 3 884 / 3 886) survive every thinning
    assert {3_884, 3_886} <= {r["stream_n"] for r in rows if r["segment"] == "a"}
    with pytest.raises(ValueError, match="max_rows"):
        Timeline(max_rows=2)


def test_explained_alerts_give_marks_points_and_times():
    """The fields an alert may carry to explain itself (message, metric, interval, an
    alarm's change start) reach the page: a change-start mark on its lane, the value
    and interval on its metric's plot, event times interpolated where missing."""
    rows = [{"n": n, "t": 1_000.0 + n / 10, "segment": "br", "values": {"recall": 0.8}}
            for n in range(1000, 10001, 1000)]
    alarm = {"rule": "recall alarm", "state": "firing", "n": 6000, "t": None, "value": 0.51,
             "segment": "br", "metric": "recall", "interval": [0.45, 0.57],
             "change_start_n": 4050, "change_start_t": None,
             "message": "recall of segment br fell from 0.89 to 0.51 from about event 4050"}
    data = report_data(rows, [alarm])
    (lane,) = data["lanes"]
    assert lane["metric"] == "recall"
    # times by linear interpolation between the rows' (n, t): t = 1000 + n / 10
    assert lane["marks"] == [{"x": 4050, "t": pytest.approx(1405.0), "text": alarm["message"]}]
    assert lane["spans"][0]["t0"] == pytest.approx(1600.0)
    assert lane["spans"][0]["t1"] == pytest.approx(2000.0)  # open at the end: the last row's
    (point,) = data["alert_points"]
    assert (point["metric"], point["x"], point["value"], point["lo"], point["hi"]) == (
        "recall", 6000, 0.51, 0.45, 0.57)
    assert point["t"] == pytest.approx(1600.0)
    assert data["alerts"][0]["message"] == alarm["message"]


def test_live_timeline_of_the_default_monitor_holds_at_most_its_stated_bytes():
    """A timeline full of the default monitor's rows (real rows, each its own objects
    as the monitor makes them) and thinned holds at most TIMELINE_BYTES (tracemalloc)."""
    import tracemalloc

    from streameval.service.ui import MAX_ROWS, TIMELINE_BYTES, Timeline

    made = []
    mon = Monitor.default()
    mon.on_metrics.append(made.append)
    rng = np.random.default_rng(3)
    y = rng.random(60_000) < 0.3
    mon.update_many(y, np.clip(rng.normal(0.3 + 0.4 * y, 0.2), 0, 1),
                    t=1.7e9 + np.arange(60_000.0))
    texts = [json.dumps(r) for r in made]
    assert len(made) == 60 and "intervals" in made[-1]
    tl = Timeline()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(MAX_ROWS + 1):  # the last one thins
        row = json.loads(texts[i % len(texts)])
        row["n"] = 1_000 * (i + 1)
        tl.add_row(row)
        if i == MAX_ROWS - 1:
            full = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert tl.thinned > 0 and len(tl.rows()) <= MAX_ROWS // 2
    assert 0.5 * TIMELINE_BYTES < full <= TIMELINE_BYTES, full


def test_live_timeline_stays_bounded_with_more_segments_than_rows():
    from streameval.service.ui import Timeline

    tl = Timeline(max_rows=40)
    for i in range(2000):
        tl.add_row({"n": i + 1, "t": None, "segment": f"s{i % 300}", "values": {"auc": 0.5}})
    rows = tl.rows()
    assert len(rows) <= 40 and rows[-1]["n"] == 2000
    assert tl.thinned == 2000 - len(rows)


# ------------------------------------------------- intervals, coverage, curves in time


def _wilson(k, n):
    # the proportions' interval: Wilson with continuity correction (scipy's wilsoncc)
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(0.95, method="wilsoncc")
    return ci.low, ci.high


def test_rows_carry_intervals_and_the_report_draws_them_as_bands():
    from scipy.stats import norm

    assert norm.ppf(0.975) == pytest.approx(1.959963984540054, abs=1e-12)
    rng = np.random.default_rng(11)
    n = 600
    y = rng.integers(0, 2, n)
    s = np.clip(0.3 * y + rng.uniform(0, 0.7, n), 0, 1).round(3)
    mon = Monitor.from_config({"metrics": {"recall": "recall", "auc": "roc_auc",
                                           "auc@200": {"metric": "roc_auc", "size": 200}},
                               "every": 100})
    rows = []
    mon.on_metrics.append(rows.append)
    mon.update_many(y, s)
    for row in rows:
        k = row["n"]
        tp = int(((s[:k] >= 0.5) & (y[:k] == 1)).sum())
        lo, hi = _wilson(tp, int(y[:k].sum()))
        assert row["intervals"]["recall"] == pytest.approx([lo, hi], abs=1e-12)
        # the cumulative AUC's DeLong interval is one pass over its scores: not in rows;
        # the window's is, and it holds the window's value
        assert "auc" not in row["intervals"]
        wlo, whi = row["intervals"]["auc@200"]
        assert wlo <= row["values"]["auc@200"] <= whi
        assert row["values"]["auc@200"] == pytest.approx(
            roc_auc_score(y[max(0, k - 200):k], s[max(0, k - 200):k]), abs=1e-12)
    data = report_data(rows, [])
    (recall,) = data["series"]["recall"]
    assert recall["lo"] == [r["intervals"]["recall"][0] for r in rows]
    assert recall["hi"] == [r["intervals"]["recall"][1] for r in rows]
    assert "lo" not in data["series"]["auc"][0]
    # an empty interval (no positives yet) is absent, and a row without one has no band
    empty = Monitor.from_config({"metrics": {"recall": "recall"}, "every": 2})
    got = []
    empty.on_metrics.append(got.append)
    empty.update_many([0, 0, 1, 1], [0.1, 0.9, 0.8, 0.2])
    assert "intervals" not in got[0] and got[1]["intervals"]["recall"] == pytest.approx(
        list(_wilson(1, 2)), abs=1e-12)


def test_volume_and_label_coverage_panel_per_segment():
    rows = []
    for k in range(1, 201):
        for seg, rate in (("eu", 0.9), ("br", 0.3 if k > 100 else 0.9)):
            pred = 50 * k
            lab = int(pred * rate)
            rows.append({"n": pred, "stream_n": 100 * k, "t": None, "segment": seg,
                         "values": {"recall": 0.8},
                         "coverage": {"predictions": pred, "labelled": lab,
                                      "pending": pred - lab - k, "expired": k}})
    data = report_data(rows, [], point_budget=100)
    vols = {data["segments"][v["seg"]]["segment"]: v for v in data["volume"]}
    assert set(vols) == {"eu", "br"}
    for seg, v in vols.items():
        assert all(e == 50 for e in v["events"][1:])  # events per evaluation
        cov = v["coverage"]
        assert len(cov) < 200  # downsampled with the timelines
        for c in cov:
            k = c["x"] // 100
            row = next(r for r in rows if r["stream_n"] == c["x"] and r["segment"] == seg)
            assert c["share"] == pytest.approx(row["coverage"]["labelled"] / (50 * k), abs=1e-12)
            assert (c["pending"], c["expired"]) == (row["coverage"]["pending"], k)
    # the labelled share's extremes survive: br's fall after half the stream
    shares = [c["share"] for c in vols["br"]["coverage"]]
    assert min(shares) == pytest.approx(0.3, abs=0.01) and max(shares) == pytest.approx(0.9, abs=0.01)
    # without the key: volume only
    plain = report_data([{k: v for k, v in r.items() if k != "coverage"} for r in rows], [])
    assert all("coverage" not in v for v in plain["volume"])


def test_estimated_metrics_share_their_metrics_plot():
    rows = [{"n": n, "t": None, "segment": None,
             "values": {"precision": 0.7, "estimated_precision": 0.72, "estimated_auc": 0.8}}
            for n in (10, 20, 30)]
    data = report_data(rows, [])
    # estimated_auc has no realized auc beside it: it keeps a plot of its own
    assert data["estimated"] == {"precision": "estimated_precision"}
    assert data["series"]["estimated_precision"][0]["y"] == [0.72, 0.72, 0.72]
    page = report.render_html(data)
    assert "function plotted(D)" in page


def test_recorder_with_segments_takes_the_whole_stream_at_its_own_rows():
    """With group_by, the timed summaries are taken at the whole stream's rows only (a
    segment's row may fall between two of its evaluation points, before its scope is
    fed): each equals scikit-learn on the first ``stream_n`` events."""
    rng = np.random.default_rng(6)
    n = 2000
    y = rng.integers(0, 2, n)
    s = np.round(rng.random(n) * 0.6 + 0.4 * y, 3)
    seg = rng.choice(["a", "b", "c"], n, p=[0.7, 0.2, 0.1])
    mon = Monitor.from_config({"metrics": {"auc": "roc_auc"}, "every": 500, "group_by": "g"})
    rec = CurveRecorder(mon, first_step=10, ratio=1.01)
    mon.on_metrics.append(rec.on_row)
    mon.update_many(y, s, segment=list(seg))
    assert [c["stream_n"] for c in rec.timed] == [500, 1000, 1500, 2000]
    for c in rec.timed:
        k = c["stream_n"]
        assert c["auc"] == pytest.approx(roc_auc_score(y[:k], s[:k]), abs=1e-12)
        assert c["confusion"]["tp"] + c["confusion"]["fn"] == int(y[:k].sum())


def test_recorder_keeps_curves_at_bounded_times_equal_to_scikit_learn():
    rng = np.random.default_rng(5)
    n = 5000
    y = rng.integers(0, 2, n)
    s = np.clip(0.35 * y + rng.uniform(0, 0.65, n), 0, 1).round(2)  # whole curves
    mon = Monitor.from_config({"metrics": {"auc": "roc_auc", "recall": "recall"}, "every": 100})
    rec = CurveRecorder(mon, times=5, first_step=100)
    mon.on_metrics.append(rec.on_row)
    for a in range(0, n, 700):  # batches of any size: the same rows, the same times
        mon.update_many(y[a:a + 700], s[a:a + 700])
        assert len(rec.timed) <= 5
    times = [c["stream_n"] for c in rec.timed]
    # the rule: the first evaluation (every 100) at or after 100, 200, 400, ... events,
    # the latest 5 kept; brute force over the evaluation points
    due, want = 100, []
    for k in range(100, n + 1, 100):
        if k >= due:
            want.append(k)
            while due <= k:
                due *= 2
    assert want == [100, 200, 400, 800, 1600, 3200] and times == want[-5:]
    assert rec.next_at == 6400
    for c in rec.timed:
        k = c["stream_n"]
        fpr, tpr, thr = roc_curve(y[:k], s[:k], drop_intermediate=False)
        assert len(fpr) <= report.CURVE_POINTS
        assert c["roc"]["fpr"] == pytest.approx(fpr.tolist(), abs=1e-5)
        assert c["roc"]["tpr"] == pytest.approx(tpr.tolist(), abs=1e-5)
        assert c["auc"] == pytest.approx(roc_auc_score(y[:k], s[:k]), abs=1e-12)
        p, r, _ = precision_recall_curve(y[:k], s[:k], drop_intermediate=False)
        assert c["pr"]["precision"] == pytest.approx(p.tolist(), abs=1e-5)
        assert c["pr"]["recall"] == pytest.approx(r.tolist(), abs=1e-5)
        tn, fp, fn, tp = confusion_matrix(y[:k], s[:k] >= 0.5).ravel()
        m = c["confusion"]
        assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (tp, fp, fn, tn)
    # the report's curves: end of stream first, then the times, labelled
    curves = rec.curves()
    assert curves[0]["label"] == "end of stream" and curves[0]["stream_n"] == n
    assert [c["label"] for c in curves[1:]] == [f"at event {k}" for k in times if k != n]
    data = report_data([], [], curves=curves)
    assert [c["stream_n"] for c in data["curves"]] == [n] + [k for k in times if k != n]
    with pytest.raises(ValueError, match="times = 0"):
        CurveRecorder(mon, times=0)
    with pytest.raises(ValueError, match="ratio = 1"):
        CurveRecorder(mon, ratio=1)


def test_replay_records_curves_through_the_stream(tmp_path):
    from streameval.replay import replay

    y, s, log = _scored_log(tmp_path, seed=6, n=6000)
    replay(str(log), tmp_path / "out", progress=False)
    data = page_data(tmp_path / "out" / "report.html")
    timed = [c for c in data["curves"] if c["label"].startswith("at event")]
    assert [c["stream_n"] for c in timed] == [1000, 2000, 4000]
    for c in timed:
        k = c["stream_n"]
        assert c["auc"] == pytest.approx(roc_auc_score(y[:k], s[:k]), abs=1e-12)
