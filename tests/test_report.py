"""The replay report: files written, every metric and final value named, valid PNGs.

The oracle for final values and firing/pending spans is a direct reading of the rows
written here by hand (the last row of each segment; firing -> resolved, pending ->
firing/resolved pairs); for the plots, the matplotlib Axes of the figures the report
draws (labels, lines, span patches and their colours); for threshold rule names,
:mod:`streameval.alerts` itself.
"""

import json
import math
import re
import sys
from datetime import datetime, timezone

import numpy as np
import pytest

from streameval import report
from streameval.report import (
    DPI,
    FIGSIZE,
    final_values,
    firing_spans,
    metric_names,
    pending_spans,
    plot_metric,
    read_jsonl,
    report_from_dir,
    write_report,
)

import matplotlib.colors
import matplotlib.image as mpimg  # streameval[report]; the test extra must include matplotlib


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


def test_report_files_metrics_and_final_values(tmp_path):
    rows = _rows()
    path = write_report(rows, ALERTS, tmp_path, title="drift <test>", summary={"events": 20000})
    assert path == tmp_path / "report.html"
    page = path.read_text(encoding="utf-8")

    # one PNG per metric, each referenced by the page; unsafe characters replaced
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["average_precision.png", "recall_sliding.png", "roc_auc.png"]
    for name in pngs:
        assert f'src="{name}"' in page

    # every metric named; the final values (last row per segment, by hand) shown
    last = {seg: [r for r in rows if r["segment"] == seg][-1] for seg in ("eu", "us")}
    for name in ("roc_auc", "recall@sliding", "average_precision"):
        assert name in page
        for seg in ("eu", "us"):
            assert f"{last[seg]['values'][name]:.6g}" in page
    assert "segment eu" in page and "segment us" in page
    # the title is escaped, the alert list carries every transition
    assert "drift &lt;test&gt;" in page
    assert page.count("<td>recall_low</td>") == 3
    assert page.count("<td>auc_drop</td>") == 1
    assert "20000" in page


def test_pngs_are_valid_images_of_the_stated_size(tmp_path):
    write_report(_rows(), ALERTS, tmp_path)
    width, height = round(FIGSIZE[0] * DPI), round(FIGSIZE[1] * DPI)
    for png in tmp_path.glob("*.png"):
        img = mpimg.imread(png)
        assert img.shape[:2] == (height, width), png.name
        # not blank: a plot has lines, text and the shaded spans in several colours
        assert len(np.unique(img.reshape(-1, img.shape[2]), axis=0)) > 20


def test_alert_span_is_drawn_where_it_fired(tmp_path):
    # one flat metric; a firing span from n=4000 to 6000 in a 10000-event stream
    rows = [{"n": n, "t": None, "segment": None, "values": {"recall": 0.5}}
            for n in range(0, 10001, 1000)]
    alerts = [{"rule": "r", "state": "firing", "n": 4000, "t": None, "value": 0.1, "segment": None},
              {"rule": "r", "state": "resolved", "n": 6000, "t": None, "value": 0.9, "segment": None}]
    write_report(rows, alerts, tmp_path / "with")
    write_report(rows, [], tmp_path / "without")
    a = mpimg.imread(tmp_path / "with" / "recall.png")[..., :3]
    b = mpimg.imread(tmp_path / "without" / "recall.png")[..., :3]
    # pixels that differ are the shading (and the legend), in the line's colour; the
    # columns that hold most of it lie between 40% and 60% of the axis width
    diff = np.abs(a - b).sum(axis=2) > 0.05
    cols = diff.sum(axis=0)
    shaded = np.flatnonzero(cols > 0.5 * cols.max())
    assert shaded.size > 0
    # axes span roughly [0.07, 0.98] of the figure; 4000..6000 of 0..10000 sits mid-figure
    lo, hi = shaded.min() / a.shape[1], shaded.max() / a.shape[1]
    assert 0.35 < lo < 0.5 and 0.5 < hi < 0.65, (lo, hi)


def test_final_values_keep_last_reported_and_undefined():
    rows = [
        {"n": 10, "t": None, "segment": None, "values": {"a": 0.1, "tumbling": 0.3}},
        {"n": 20, "t": 5.0, "segment": None, "values": {"a": None}},
    ]
    assert final_values(rows) == {None: {"n": 20, "t": 5.0, "values": {"a": None, "tumbling": 0.3}}}
    assert metric_names(rows) == ["a", "tumbling"]


def test_firing_spans_pairs_transitions_per_rule_and_segment():
    alerts = [
        {"rule": "r", "state": "firing", "n": 10, "segment": "a"},
        {"rule": "r", "state": "firing", "n": 12, "segment": "b"},
        {"rule": "r", "state": "resolved", "n": 20, "segment": "a"},
        {"rule": "q", "state": "pending", "n": 25, "segment": None},
        {"rule": "q", "state": "resolved", "n": 26, "segment": None},  # never fired
    ]
    assert firing_spans(alerts, end_n=100) == [("r", "a", 10, 20), ("r", "b", 12, 100)]


def test_report_from_dir_and_empty_alerts(tmp_path):
    rows = _rows()
    with open(tmp_path / "metrics.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    page = report_from_dir(tmp_path).read_text()
    assert "No alert fired." in page
    assert len(list(tmp_path.glob("*.png"))) == 3


def test_read_jsonl_names_the_bad_line(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"n": 1}\n\n{"n": \n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:3: not valid JSON"):
        read_jsonl(p)


def test_clear_error_without_matplotlib(tmp_path, monkeypatch):
    # make matplotlib unimportable (None in sys.modules blocks the import)
    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=re.escape("pip install 'streameval[report]'")):
        write_report(_rows(), [], tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_values_nan_formatting():
    assert report._fmt(math.nan) == "undefined"
    assert report._fmt(None) == "undefined"
    assert report._fmt(0.123456789) == "0.123457"


# ------------------------------------------------- plots: labels, thresholds, spans


@pytest.fixture
def figures(monkeypatch):
    """The figures write_report draws, by metric name (kept after saving)."""
    drawn = {}
    real = report._plot_metric

    def spy(name, *args, **kwargs):
        drawn[name] = fig = real(name, *args, **kwargs)
        return fig

    monkeypatch.setattr(report, "_plot_metric", spy)
    return drawn


def _span_x(patch):
    # data x range of an axvspan patch (a Rectangle since matplotlib 3.9, a Polygon before)
    xs = patch.get_path().transformed(patch.get_patch_transform()).vertices[:, 0]
    return float(xs.min()), float(xs.max())


def _spans_by_label(ax):
    """{legend label: [(x0, x1, facecolor rgba, hatch)]} of the span patches; the
    unlabelled continuations of a label are attributed to it by colour and hatch."""
    out = {}
    style = {}
    for p in ax.patches:
        key = (tuple(p.get_facecolor()), p.get_hatch())
        label = p.get_label()
        if not label.startswith("_"):
            style[key] = label
        out.setdefault(style[key], []).append(
            (*_span_x(p), tuple(p.get_facecolor()), p.get_hatch()))
    return out


def _thresholds(ax):
    return sorted((line.get_label(), float(line.get_ydata()[0])) for line in ax.get_lines()
                  if line.get_linestyle() == "--")


def test_every_plot_labels_its_axes(tmp_path, figures):
    write_report(_rows(), ALERTS, tmp_path)
    assert sorted(figures) == ["average_precision", "recall@sliding", "roc_auc"]
    for name, fig in figures.items():
        (ax,) = fig.axes
        assert ax.get_ylabel() == name
        assert "events" in ax.get_xlabel()


def test_threshold_lines_from_rules_and_rule_names(tmp_path, figures):
    rows = [{"n": n, "t": None, "segment": None,
             "values": {"recall@6h": 0.9 - n / 40000, "drift.recall.p_value": 0.5, "auc": 0.8}}
            for n in range(1000, 10001, 1000)]
    alerts = [  # unnamed rules: the name is the rule in the grammar, with its threshold
        {"rule": "recall@6h < 0.7", "state": "firing", "n": 9000, "t": None, "value": 0.675,
         "segment": None},
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
    write_report(rows, alerts, tmp_path, rules=rules)
    assert _thresholds(figures["recall@6h"].axes[0]) == [("recall@6h < 0.7", 0.7),
                                                         ("recall_floor", 0.5)]
    assert _thresholds(figures["drift.recall.p_value"].axes[0]) == [("recall drift p < 0.01", 0.01)]
    assert _thresholds(figures["auc"].axes[0]) == [("auc > 0.99 with confidence 0.9", 0.99)]
    # each line is labelled on the plot too, and lies within the y range shown
    ax = figures["recall@6h"].axes[0]
    assert {t.get_text() for t in ax.texts} == {"recall@6h < 0.7", "recall_floor"}
    assert ax.get_ylim()[0] < 0.5
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "recall_floor" in legend and "recall@6h < 0.7" in legend

    # without rules, the rule names of the transitions alone still give their lines
    figures.clear()
    write_report(rows, alerts, tmp_path / "no_rules")
    assert _thresholds(figures["recall@6h"].axes[0]) == [("recall@6h < 0.7", 0.7)]
    assert _thresholds(figures["auc"].axes[0]) == []


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
        assert report._threshold_of(rule) == (metric, threshold, rule.name)  # a Rule object
        if "name" not in table:  # a default name (as in transitions) gives the threshold
            assert report._threshold_of(rule.name) == (metric, threshold, rule.name)
    for no_line in ({"metric": "auc", "drop": 0.05}, {"alarm": "recall"}, "recall alarm",
                    "recall_low", {"metric": "x", "op": "<", "value": "high"}):
        assert report._threshold_of(no_line) is None


def test_pending_spans_pair_pending_with_firing_or_resolved():
    alerts = [
        {"rule": "r", "state": "pending", "n": 10, "segment": "a"},
        {"rule": "r", "state": "pending", "n": 12, "segment": "b"},
        {"rule": "r", "state": "firing", "n": 20, "segment": "a"},
        {"rule": "q", "state": "pending", "n": 25, "segment": None},
        {"rule": "q", "state": "resolved", "n": 26, "segment": None},  # never fired
        {"rule": "r", "state": "resolved", "n": 40, "segment": "a"},
    ]
    assert pending_spans(alerts, end_n=100) == [("r", "a", 10, 20), ("r", "b", 12, 100),
                                                ("q", None, 25, 26)]
    assert firing_spans(alerts, end_n=100) == [("r", "a", 20, 40)]


def test_pending_drawn_hatched_and_lighter_than_firing(tmp_path, figures):
    write_report(_rows(), ALERTS, tmp_path)
    spans = _spans_by_label(figures["roc_auc"].axes[0])
    (pend,) = spans["alert recall_low pending (eu)"]
    (fire,) = spans["alert recall_low firing (eu)"]
    assert pend[:2] == (12500, 13000) and fire[:2] == (13000, 17000)
    assert pend[3] and not fire[3]               # pending hatched, firing plain
    assert pend[2][:3] == fire[2][:3]            # in the same colour,
    assert pend[2][3] < fire[2][3]               # lighter


def test_overlapping_spans_get_distinct_colours_matching_segment_lines(tmp_path, figures):
    rows = [{"n": n, "t": None, "segment": seg, "values": {"recall": 0.5}}
            for n in range(1000, 10001, 1000) for seg in (None, "eu", "us")]
    alerts = [  # one rule firing on three segments at once, and a second rule on "eu"
        {"rule": "r", "state": "firing", "n": 3000, "t": None, "value": 0.1, "segment": None},
        {"rule": "r", "state": "firing", "n": 3000, "t": None, "value": 0.1, "segment": "eu"},
        {"rule": "r", "state": "firing", "n": 4000, "t": None, "value": 0.1, "segment": "us"},
        {"rule": "q", "state": "firing", "n": 5000, "t": None, "value": 0.1, "segment": "eu"},
    ]
    write_report(rows, alerts, tmp_path)
    ax = figures["recall"].axes[0]
    line_rgb = {line.get_label(): matplotlib.colors.to_rgb(line.get_color())
                for line in ax.get_lines()}
    spans = _spans_by_label(ax)
    assert sorted(spans) == ["alert q firing (eu)", "alert r firing",
                             "alert r firing (eu)", "alert r firing (us)"]
    rgb = {label: s[0][2][:3] for label, s in spans.items()}
    assert len(set(rgb.values())) == 4
    assert rgb["alert r firing"] == line_rgb["all events"]
    assert rgb["alert r firing (eu)"] == line_rgb["segment eu"]
    assert rgb["alert r firing (us)"] == line_rgb["segment us"]
    assert rgb["alert q firing (eu)"] not in line_rgb.values()
    assert spans["alert r firing (us)"][0][:2] == (4000, 10000)   # open: to the end
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert set(spans) <= legend


def test_plot_metric_returns_the_figure():
    rows = [{"n": n, "t": None, "segment": None, "values": {"f1": 0.5}} for n in (10, 20)]
    fig = plot_metric("f1", rows, [{"rule": "f1 < 0.6", "state": "pending", "n": 20,
                                    "t": None, "value": 0.5, "segment": None}])
    (ax,) = fig.axes
    assert ax.get_ylabel() == "f1" and ax.get_title() == "f1"
    assert _thresholds(ax) == [("f1 < 0.6", 0.6)]
    assert [p.get_hatch() for p in ax.patches] == ["//"]


# ------------------------------------------------- per-segment n, human-readable times


def _segment_rows():
    # the new metrics.jsonl: a segment's n is its own count, stream_n the stream's
    rows = []
    for i, n in enumerate(range(1000, 10001, 1000)):
        t = 1_709_000_000.0 + 60 * i
        rows.append({"n": n, "t": t, "segment": None, "values": {"recall": 0.8}})
        rows.append({"n": n // 4, "stream_n": n, "t": t, "segment": "eu",
                     "values": {"recall": 0.6}})
        rows.append({"n": n - n // 4, "stream_n": n, "t": t, "segment": "us",
                     "values": {"recall": 0.9}})
    return rows


def test_segment_rows_plot_at_stream_n_and_tables_show_own_n(tmp_path, figures):
    rows = _segment_rows()
    alerts = [{"rule": "r", "state": "firing", "n": 6000, "t": None, "value": 0.6, "segment": "eu"}]
    page = write_report(rows, alerts, tmp_path).read_text()
    ax = figures["recall"].axes[0]
    xs = {line.get_label(): list(line.get_xdata()) for line in ax.get_lines()}
    stream = list(range(1000, 10001, 1000))
    assert xs == {"all events": stream, "segment eu": stream, "segment us": stream}
    assert ax.get_xlim() == (0, 10000)
    assert _spans_by_label(ax)["alert r firing (eu)"][0][:2] == (6000, 10000)
    # final values: each segment's own n, not the stream's
    events_row = re.search(r"<td>events \(n\)</td>(.*?)</tr>", page, re.S).group(1)
    assert re.findall(r"<td>([^<]*)</td>", events_row) == ["10000", "2500", "7500"]


def test_rows_without_stream_n_still_plot_at_n(tmp_path, figures):
    rows = [{k: v for k, v in r.items() if k != "stream_n"} for r in _segment_rows()]
    write_report(rows, [], tmp_path)
    ax = figures["recall"].axes[0]
    xs = {line.get_label(): list(line.get_xdata()) for line in ax.get_lines()}
    assert xs["segment eu"] == [n // 4 for n in range(1000, 10001, 1000)]
    assert xs["all events"] == list(range(1000, 10001, 1000))


def test_tables_show_event_times_as_utc_dates(tmp_path):
    t = datetime(2024, 3, 2, 23, 59, 43, tzinfo=timezone.utc).timestamp()
    rows = [{"n": 10, "t": t - 3600, "segment": None, "values": {"recall": 0.5}},
            {"n": 20, "t": t, "segment": None, "values": {"recall": 0.4}}]
    alerts = [{"rule": "r", "state": "firing", "n": 10, "t": t - 3600, "value": 0.5,
               "segment": None},
              {"rule": "r", "state": "resolved", "n": 20, "t": None, "value": 0.9, "segment": None}]
    page = write_report(rows, alerts, tmp_path).read_text()
    assert "<td>last event time (t)</td>\n<td>2024-03-02 23:59:43 UTC</td>" in page
    assert "<td>2024-03-02 22:59:43 UTC</td>" in page  # the alert's
    assert str(int(t)) not in page and str(int(t) - 3600) not in page
    # no time: an empty cell; no times at all: no time row
    assert "<td>resolved</td><td>20</td><td></td>" in page
    no_t = write_report([{**r, "t": None} for r in rows], [], tmp_path / "no_t").read_text()
    assert "last event time" not in no_t


def test_time_formatting():
    assert report._fmt_time(0) == "1970-01-01 00:00:00 UTC"
    assert report._fmt_time(1709423983.9) == "2024-03-02 23:59:43 UTC"
    assert report._fmt_time(None) == "" and report._fmt_time(math.nan) == ""
    assert report._fmt_time(1e20) == "1e+20"  # beyond datetime: the number itself
