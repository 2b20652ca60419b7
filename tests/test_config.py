"""Monitor configuration: the TOML [monitor] schema -> metrics, windows, drift, rules.

Oracles: scikit-learn for the values a configured monitor reports (so that every
parameter really reaches its metric), brute force over the last N events for windows,
and the schema of streameval/config.py for the error messages (each names its key).
"""

import numpy as np
import pytest
from sklearn.metrics import (
    accuracy_score, fbeta_score, log_loss, precision_score, recall_score, roc_auc_score,
)

import streameval as se
from streameval import config
from streameval.alerts import Alarm, Drift, Drop, Threshold
from streameval.sequential import SequentialDrift
from streameval.monitor import Monitor

DEFAULT_NAMES = ["roc_auc", "average_precision", "precision", "recall", "f1", "accuracy",
                 "log_loss"]


def _stream(n=600, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    s = np.clip(np.round(rng.normal(0.35 + 0.3 * y, 0.2), 2), 0.01, 0.99)
    return y, s


def test_build_defaults():
    kw = config.build({})
    assert list(kw["metrics"]) == DEFAULT_NAMES + [f"{k}@10000" for k in DEFAULT_NAMES]
    assert kw["every"] == 1000
    assert sorted(kw["drift"]) == ["fpr", "precision", "recall"]
    assert [r.name for r in kw["rules"]] == ["recall alarm", "precision alarm",
                                             "fpr alarm on rise"]
    assert all(type(r) is Alarm for r in kw["rules"])
    # recall and FPR page; precision reports (severity info)
    assert [r.severity for r in kw["rules"]] == ["warning", "info", "warning"]
    # each paging detector gets half the default monitor's 1% over a million events
    # (precision's report has a share of its own)
    assert all(type(d) is SequentialDrift and d.alpha == 0.005 and d.horizon == 1_000_000
               for d in kw["drift"].values())
    win = kw["metrics"]["recall@10000"]
    assert isinstance(win, se.Sliding) and win.size == 10_000 and win.metric.threshold == 0.5
    kw = config.build({"threshold": 0.3, "window": 500})
    assert "roc_auc@500" in kw["metrics"] and kw["metrics"]["precision"].threshold == 0.3


def test_giving_metrics_replaces_default_metrics_drift_and_rules():
    kw = config.build({"metrics": {"auc": "roc_auc"}})
    assert list(kw["metrics"]) == ["auc"] and kw["drift"] == {} and kw["rules"] == []
    # rules alone keep the default metrics and drift tests, and replace the default rules
    kw = config.build({"rules": ["recall@10000 < 0.8"]})
    assert len(kw["metrics"]) == 14 and sorted(kw["drift"]) == ["fpr", "precision", "recall"]
    assert [r.name for r in kw["rules"]] == ["recall@10000 < 0.8"]


def test_metric_tables_and_windows():
    kw = config.build({"threshold": 0.4, "metrics": {
        "auc": "ROCAUC",
        "recall@100": {"size": 100},
        "f2": {"metric": "fbeta", "beta": 2, "threshold": 0.3},
        "p@1h": {"metric": "precision", "period": 3600, "lateness": 60},
        "acc_daily": {"metric": "accuracy", "window": "tumbling", "period": 86400},
        "acc_chunks": {"metric": "accuracy", "window": "tumbling", "size": 50},
    }})
    m = kw["metrics"]
    assert type(m["auc"]).__name__ == "ROCAUC"
    assert isinstance(m["recall@100"], se.Sliding) and m["recall@100"].size == 100
    assert m["recall@100"].metric.threshold == 0.4               # the monitor's default
    assert m["f2"].beta == 2 and m["f2"].threshold == 0.3       # its own
    assert (m["p@1h"].period, m["p@1h"].lateness) == (3600.0, 60.0)
    assert type(m["acc_daily"]) is se.Tumbling and m["acc_daily"].period == 86400.0
    assert type(m["acc_chunks"]) is se.Tumbling and m["acc_chunks"].size == 50


@pytest.mark.parametrize("table, message", [
    ({"evrey": 5}, r"^monitor: unknown key 'evrey'; expected one of \["),
    ({"every": -1}, r"^monitor.every = -1: must be an integer >= 0"),
    ({"every": "10"}, r"^monitor.every = '10'"),
    ({"every_seconds": 0}, r"^monitor.every_seconds = 0: must be a number > 0"),
    ({"group_by": 3}, r"^monitor.group_by = 3"),
    ({"group_by": ["a", "a"]}, r"^monitor.group_by = \['a', 'a'\]"),
    ({"overall": "yes"}, r"^monitor.overall = 'yes'"),
    ({"threshold": "high"}, r"^monitor.threshold = 'high'"),
    ({"window": 0}, r"^monitor.window = 0"),
    ({"metrics": {}}, r"^monitor.metrics: must be a table"),
    ({"metrics": {"auc": "roc"}}, r"^monitor.metrics.auc.metric = 'roc': unknown metric kind"),
    ({"metrics": {"auc": 3}}, r"^monitor.metrics.auc = 3: must be a metric kind or a table"),
    ({"metrics": {"x": {"size": 5}}}, r"^monitor.metrics.x: needs metric = \"<kind>\""),
    ({"metrics": {"recall@100": {"sise": 100}}},
     r"^monitor.metrics.\"recall@100\": unknown key 'sise'; expected one of"),
    ({"metrics": {"r": {"metric": "recall", "size": 10, "period": 5}}},
     r"^monitor.metrics.r: a window needs either size \(events\) or period \(seconds\)"),
    ({"metrics": {"r": {"metric": "recall", "size": 10, "lateness": 5}}},
     r"^monitor.metrics.r.lateness: only a window by period"),
    ({"metrics": {"r": {"metric": "recall", "size": 0}}}, r"^monitor.metrics.r.size = 0"),
    ({"metrics": {"r": {"metric": "recall", "window": "hopping", "size": 3}}},
     r"^monitor.metrics.r.window = 'hopping'"),
    ({"metrics": {"r": {"metric": "recall", "pos_label": 1}}},
     r"^monitor.metrics.r.pos_label: labels are set once for the monitor"),
    ({"metrics": {"r": {"metric": "recall", "average": "macro"}}},
     r"^monitor.metrics.r: unknown key 'average'"),
    ({"metrics": {"r": {"metric": "fbeta", "beta": -1}}}, r"^monitor.metrics.r: .*beta"),
    ({"rules": "recall < 0.8"}, r"^monitor.rules: must be an array"),
    ({"rules": [{"metric": "recall", "op": "<", "value": 0.8, "fro": 3}]},
     r"^monitor.rules\[0\]: unknown key 'fro' for a threshold rule"),
    ({"rules": ["recall@10000 < 0.8", "recall =< 0.8"]}, r"^monitor.rules\[1\]: .*not understood"),
    ({"drift": {"recall": {"metric": "recall", "sise": 10}}},
     r"^monitor.drift.recall: unknown key 'sise'"),
])
def test_errors_name_the_bad_key(table, message):
    with pytest.raises(ValueError, match=message):
        Monitor.from_config(table)


def test_rule_on_a_missing_metric_is_refused_by_name():
    with pytest.raises(ValueError, match=r"rule 'recal < 0.8': 'recal' is not one of the monitor's metrics"):
        Monitor.from_config({"rules": ["recal < 0.8"]})
    with pytest.raises(ValueError, match=r"'auc' is not one of the monitor's drift tests"):
        Monitor.from_config({"rules": [{"drift": "auc"}]})


def test_configured_values_equal_sklearn():
    y, s = _stream()
    mon = Monitor.from_config({"every": 0, "threshold": 0.45, "metrics": {
        "auc": "roc_auc", "p": "precision", "r": {"metric": "recall", "threshold": 0.3},
        "f2": {"metric": "fbeta", "beta": 2}, "acc": "accuracy", "ll": "log_loss",
        "auc@100": {"metric": "roc_auc", "size": 100},
    }})
    rows = []
    mon.on_metrics.append(rows.append)
    mon.update_many(y, s)
    mon.flush()
    (row,) = rows
    v = row["values"]
    assert v["auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert v["p"] == pytest.approx(precision_score(y, s >= 0.45), abs=1e-12)
    assert v["r"] == pytest.approx(recall_score(y, s >= 0.3), abs=1e-12)
    assert v["f2"] == pytest.approx(fbeta_score(y, s >= 0.45, beta=2), abs=1e-12)
    assert v["acc"] == pytest.approx(accuracy_score(y, s >= 0.45), abs=1e-12)
    assert v["ll"] == pytest.approx(log_loss(y, s), abs=1e-12)
    assert v["auc@100"] == pytest.approx(roc_auc_score(y[-100:], s[-100:]), abs=1e-12)


def test_pos_label_reaches_every_metric():
    y, s = _stream(300, seed=3)
    labels = np.where(y, "spam", "ham")
    mon = Monitor.from_config({"pos_label": "spam", "neg_label": "ham", "every": 0,
                               "metrics": {"auc": "roc_auc", "r@50": {"metric": "recall", "size": 50}}})
    mon.update_many(labels, s)
    v = mon.snapshot()["segments"][None]["values"]
    assert v["auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert v["r@50"] == pytest.approx(recall_score(y[-50:], s[-50:] >= 0.5), abs=1e-12)
    with pytest.raises(ValueError, match=r"y_true\[0\] = 'eggs'"):
        mon.update_many(["eggs"], [0.5])


def test_from_toml(tmp_path):
    path = tmp_path / "monitor.toml"
    path.write_text('''
[fields]                       # another tool's table: ignored by the monitor
label = "is_fraud"

[monitor]
every = 200
group_by = "country"

[monitor.metrics]
roc_auc = "roc_auc"
"recall@100" = { metric = "recall", size = 100 }

[[monitor.rules]]
metric = "recall@100"
op = "<"
value = 0.5
for = 2
min_samples = 100
cooldown = 400

[[monitor.rules]]
rule = "roc_auc drops by 0.05"
name = "auc_drop"
''')
    mon = Monitor.from_toml(path)
    assert list(mon.metrics) == ["roc_auc", "recall@100"]
    assert mon.every == 200 and mon.group_by == "country"
    r0, r1 = mon.rules
    assert (type(r0), r0.for_, r0.min_samples, r0.cooldown) == (Threshold, 2, 100, 400)
    assert (type(r1), r1.name, r1.by) == (Drop, "auc_drop", 0.05)

    bad = tmp_path / "bad.toml"
    bad.write_text("[monitor]\nevery = \n")
    with pytest.raises(ValueError, match=r"bad.toml: not valid TOML"):
        Monitor.from_toml(bad)
    with pytest.raises(ValueError, match="no such file"):
        Monitor.from_toml(tmp_path / "missing.toml")
    top = tmp_path / "top.toml"
    top.write_text('every = 7\n[metrics]\nauc = "roc_auc"\n')   # no [monitor]: the file is the table
    assert Monitor.from_toml(top).every == 7


def test_default_monitor_matches_design():
    mon = Monitor.default()
    assert list(mon.metrics) == DEFAULT_NAMES + [f"{k}@10000" for k in DEFAULT_NAMES]
    assert [r.name for r in mon.rules] == ["recall alarm", "precision alarm",
                                           "fpr alarm on rise"]
    assert mon.every == 1000 and mon.group_by is None
    mon = Monitor.default(threshold=0.2, window=50, every=10, group_by="country")
    assert mon.metrics["f1@50"].metric.threshold == 0.2 and mon.every == 10
    with pytest.raises(TypeError, match="evrey"):
        Monitor.default(evrey=3)


def test_config_tables_and_field_map_shared_by_replay_and_serve():
    """One reading of [monitor]/[input] for replay and serve; only require_ts's default differs."""
    from streameval.config import config_tables, field_map
    from streameval.monitor import Monitor

    doc = {"monitor": {"group_by": ["model", "country"]}, "input": {"ts": "time", "label": "y"}}
    table, inp = config_tables(doc)
    assert table == doc["monitor"] and inp == doc["input"]
    assert config_tables({"every": 10}) == ({"every": 10}, {})   # a bare [monitor] table
    assert config_tables({}) == (None, {})                        # the default monitor
    with pytest.raises(ValueError, match=r"unknown table\(s\) output; expected \[monitor\], \[input\], \[serve\]"):
        config_tables({"monitor": {}, "output": {}})
    with pytest.raises(ValueError, match=r"^input = 3: must be a table"):
        config_tables({"input": 3})
    mon = Monitor.from_config(table)
    f = field_map(inp, mon)
    assert (f.ts, f.label, f.score, f.segment, f.require_ts) == ("time", "y", "score", ("model", "country"), True)
    assert field_map(inp, mon, require_ts=False).require_ts is False
    assert field_map({"require_ts": True}, mon, require_ts=False).require_ts is True
    with pytest.raises(ValueError, match=r"^input.score = '': must be a field name"):
        field_map({"score": ""}, mon)
    with pytest.raises(ValueError, match=r"^input.require_ts = 'yes': must be true or false"):
        field_map({"require_ts": "yes"}, mon)


def test_monitor_size_is_the_default_windows_size_and_window_its_alias():
    from streameval.config import build

    by_size = build({"size": 50})
    by_window = build({"window": 50})
    assert sorted(by_size["metrics"]) == sorted(by_window["metrics"])
    assert "recall@50" in by_size["metrics"]
    assert by_size["metrics"]["recall@50"].size == 50
    with pytest.raises(ValueError, match="give size .* or its alias window, not both"):
        build({"size": 50, "window": 50})
    with pytest.raises(ValueError, match=r"^monitor.size = 0: must be an integer >= 1"):
        build({"size": 0})


def test_default_builders_take_size_with_window_as_its_older_name():
    # issue 10: one name (size) everywhere, window= kept where it was public
    from streameval import config

    assert config.DEFAULT_SIZE == config.DEFAULT_WINDOW == 10_000
    assert "recall@10000" in config.default_metrics()
    assert "recall@300" in config.default_metrics(size=300)
    assert "recall@300" in config.default_metrics(window=300)
    assert "recall@300" in config.default_metrics(0.5, 300)  # positional, as before
    assert sorted(config.default_metrics(window=None)) == sorted(
        config.default_metrics(size=0)) == ["accuracy", "average_precision", "f1",
                                            "log_loss", "precision", "recall", "roc_auc"]
    # the default detectors have no window; size is still checked, as before
    assert config.default_drift()["recall"].metric == "recall"
    assert config.default_drift(size=40)["precision"].metric == "precision"
    assert config.default_drift(window=40)["precision"].alpha == 0.005
    with pytest.raises(ValueError, match="give size= or its alias window=, not both"):
        config.default_metrics(size=5, window=5)
    with pytest.raises(ValueError, match=r"^monitor.window = None: must be an integer >= 1"):
        config.default_drift(window=None)
    with pytest.raises(ValueError, match=r"^monitor.size = 0: must be an integer >= 1"):
        config.default_drift(size=0)


def test_overall_rules_and_hysteresis_keys_from_toml():
    import tomllib

    doc = tomllib.loads("""
[monitor]
group_by = "country"
overall_rules = true
[monitor.metrics]
"recall@500" = { metric = "recall", size = 500 }
[[monitor.rules]]
rule = "recall@500 < 0.8 with confidence 0.99"
resolve = 0.85
keep_firing_for = 2
""")
    mon = Monitor.from_config(doc)
    (rule,) = mon.rules
    assert (mon.overall_rules, rule.resolve, rule.keep_firing_for, rule.confidence) == (
        True, 0.85, 2, 0.99)
    # a monitor state keeps the setting; a state without it (written before the key
    # existed) evaluates the whole stream's rules, as that monitor did
    state = mon.to_state()
    assert Monitor.from_state(state).overall_rules is True
    del state["params"]["overall_rules"]
    assert Monitor.from_state(state).overall_rules is True
    default = Monitor.from_config({"monitor": {"group_by": "country"}})
    assert default.overall_rules is False
    assert Monitor.from_state(default.to_state()).overall_rules is False
    with pytest.raises(ValueError, match=r"monitor.overall_rules = 'yes'"):
        config.build({"group_by": "c", "overall_rules": "yes"})
    # the whole stream's detectors: off for the default monitor with group_by, kept by
    # its state; a state without the key (written before it existed) runs them
    assert default.overall_drift is False and mon.overall_drift is True
    assert Monitor.from_state(default.to_state()).overall_drift is False
    assert Monitor.from_array_state(default.to_array_state()).overall_drift is False
    old = default.to_state()
    del old["params"]["overall_drift"]
    assert Monitor.from_state(old).overall_drift is True
    on = Monitor.from_config({"monitor": {"group_by": "country", "overall_drift": True}})
    assert (on.overall_rules, on.overall_drift) == (False, True)
    with pytest.raises(ValueError, match=r"monitor.overall_drift = 'no'"):
        config.build({"group_by": "c", "overall_drift": "no"})
    with pytest.raises(ValueError, match=r"monitor.rules\[0\]: keep_firing_for = -1: must be"):
        config.build({"metrics": {"r": "recall"},
                      "rules": [{"rule": "r < 0.5", "keep_firing_for": -1}]})


def test_keep_firing_for_seconds_needs_event_times_up_front():
    mon = Monitor({"r": se.Recall()}, rules=[{"rule": "r < 0.5", "keep_firing_for_seconds": 60}])
    with pytest.raises(ValueError, match=r"needs event times \(rule 'r < 0.5'\)"):
        mon.update_many([1, 0], [0.9, 0.1])
    assert mon.n == 0
