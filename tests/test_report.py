"""The replay report: files written, every metric and final value named, valid PNGs.

The oracle for final values and firing spans is a direct reading of the rows written
here by hand (the last row of each segment; firing -> resolved pairs).
"""

import json
import math
import re
import sys

import numpy as np
import pytest

from streameval import report
from streameval.report import (
    DPI,
    FIGSIZE,
    final_values,
    firing_spans,
    metric_names,
    read_jsonl,
    report_from_dir,
    write_report,
)

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
    # pixels that differ are the shading (and the legend): a reddish tint, and the
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
