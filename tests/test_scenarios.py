"""Scenarios: streams built as described (river's own prequential loop as the oracle),
deterministic by seed, delayed-label rows consistent, expectations checked, bad files
refused by key. The bundled scenarios run end to end with ``--check`` in test_cli.py.
"""

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import recall_score

from streameval import scenarios
from streameval.scenarios import check, generate, iter_rows, load, materialize, write_log

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"


def _write(tmp_path, text, name="s.toml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


# ----------------------------------------------------------------- stream building


def test_river_dataset_is_scored_prequentially_like_river_does(tmp_path):
    from river import datasets, evaluate, linear_model, metrics, preprocessing

    sc = load(_write(tmp_path, """
        [stream]
        kind = "river_dataset"
        dataset = "Phishing"
        model = "linear_model.LogisticRegression"
        preprocessing = ["preprocessing.StandardScaler"]
        n = 400
        [[expect]]
        none = true
    """))
    cols = generate(sc)
    # oracle: river's own progressive validation loop, predictions yielded
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    steps = list(evaluate.iter_progressive_val_score(
        datasets.Phishing().take(400), model, metrics.LogLoss(), yield_predictions=True))
    expected = [s["Prediction"].get(True, 0.0) for s in steps]
    labels = [y for _, y in datasets.Phishing().take(400)]
    assert len(cols["score"]) == 400
    np.testing.assert_allclose(cols["score"], expected, rtol=0, atol=1e-15)
    assert cols["label"].tolist() == labels
    assert cols["id"].tolist() == list(range(1, 401))
    np.testing.assert_array_equal(np.diff(cols["ts"]), 1.0)


def test_planted_drift_drops_recall_of_a_frozen_model(tmp_path):
    sc = load(_write(tmp_path, """
        [stream]
        kind = "river_generator"
        generator = "SEA"
        params = {variant = 3, seed = 1}
        n = 8000
        model = "linear_model.LogisticRegression"
        preprocessing = "preprocessing.StandardScaler"
        learn_until = 2000
        [stream.drift]
        params = {variant = 2, seed = 2}
        position = 4000
        width = 100
        seed = 3
        [[expect]]
        none = true
    """))
    cols = generate(sc)
    y, pred = cols["label"], cols["score"] >= 0.5
    before = recall_score(y[2000:3800], pred[2000:3800])
    after = recall_score(y[4200:], pred[4200:])
    # SEA 9.5 -> 7: positives with att1 + att2 in (7, 9.5] are missed after the drift
    assert before > 0.9
    assert after < before - 0.15
    # a second build is identical (seeded generator, deterministic model)
    again = generate(load(sc.path))
    np.testing.assert_array_equal(again["score"], cols["score"])
    np.testing.assert_array_equal(again["label"], cols["label"])


def test_stationary_stream_statistics_and_determinism(tmp_path):
    p = _write(tmp_path, """
        [stream]
        kind = "stationary"
        n = 20000
        seed = 5
        prevalence = 0.2
        separation = 3.0
        decimals = 2
        segments = ["eu", "us"]
        start = 1000
        interval = 0.5
        [[expect]]
        none = true
    """)
    a, b = generate(load(p)), generate(load(p))
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert abs(a["label"].mean() - 0.2) < 0.02
    assert set(a["segment"].tolist()) == {"eu", "us"}
    np.testing.assert_array_equal(a["score"], np.round(a["score"], 2))   # ties, as logged
    assert a["ts"][0] == 1000 and a["ts"][-1] == 1000 + 0.5 * 19999
    # stationary: the first and second halves have the same separation, roughly
    from sklearn.metrics import roc_auc_score
    h = 10000
    auc1 = roc_auc_score(a["label"][:h], a["score"][:h])
    auc2 = roc_auc_score(a["label"][h:], a["score"][h:])
    assert abs(auc1 - auc2) < 0.02 and auc1 > 0.9
    # another seed gives another stream
    c = generate(load(_write(tmp_path, p.read_text().replace("seed = 5", "seed = 6"), "c.toml")))
    assert not np.array_equal(a["score"], c["score"])


def test_delayed_rows_pair_each_prediction_with_a_later_label(tmp_path):
    text = """
        [stream]
        kind = "stationary"
        n = 3000
        seed = 2
        interval = 10
        [stream.delay]
        min = 30
        max = 600
        missing = 0.1
        [[expect]]
        none = true
    """
    sc = load(_write(tmp_path, text))
    assert sc.delayed
    rows = list(iter_rows(sc))
    events = generate(sc)
    preds = [r for r in rows if "score" in r]
    labels = [r for r in rows if "label" in r]
    assert all(("score" in r) != ("label" in r) for r in rows)
    assert len(preds) == 3000
    # predictions: the events themselves, in order
    assert [r["id"] for r in preds] == events["id"].tolist()
    assert [r["score"] for r in preds] == events["score"].tolist()
    # labels: at most one per id, the event's label, 30..600 s after its prediction
    by_id = {r["id"]: r for r in preds}
    assert len({r["id"] for r in labels}) == len(labels)
    truth = dict(zip(events["id"].tolist(), events["label"].tolist()))
    for r in labels:
        assert r["label"] == truth[r["id"]]
        assert 30 <= r["ts"] - by_id[r["id"]]["ts"] <= 600
    assert 0.07 < 1 - len(labels) / 3000 < 0.13
    # the log is in time order
    ts = [r["ts"] for r in rows]
    assert ts == sorted(ts)
    # the same events as without delay (the delay draws do not disturb them)
    plain = load(_write(tmp_path, text.replace("[stream.delay]", "[x]"), "plain.toml"))
    assert [r["score"] for r in iter_rows(plain)] == [r["score"] for r in preds]


def test_write_log_round_trips_and_gzip(tmp_path):
    sc = load(_write(tmp_path, """
        [stream]
        kind = "stationary"
        n = 50
        seed = 1
        [[expect]]
        none = true
    """))
    for name in ("log.jsonl", "log.jsonl.gz"):
        assert write_log(sc, tmp_path / name) == 50
    import gzip
    a = [json.loads(x) for x in open(tmp_path / "log.jsonl")]
    b = [json.loads(x) for x in gzip.open(tmp_path / "log.jsonl.gz", "rt")]
    assert a == b == [json.loads(json.dumps(r)) for r in iter_rows(sc)]
    assert materialize(sc, tmp_path / "out") == tmp_path / "out" / "stream.jsonl"


def test_log_scenario_replays_its_bundled_file(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.jsonl").write_text('{"ts": 1, "label": 1, "score": 0.5}\n')
    sc = load(_write(tmp_path, """
        [stream]
        kind = "log"
        path = "data/x.jsonl"
        [[expect]]
        none = true
    """))
    assert materialize(sc, tmp_path / "out") == tmp_path / "data" / "x.jsonl"
    with pytest.raises(ValueError, match="not generated"):
        generate(sc)


# ---------------------------------------------------------------------- checking


def _sc(expect, strict=True):
    return scenarios.Scenario(Path("s.toml"), "s", "", {"kind": "stationary"}, {}, expect, strict)


def test_check_ranges_states_segments_and_strictness():
    alerts = [
        {"rule": "recall_low", "state": "pending", "n": 900, "segment": "eu"},
        {"rule": "recall_low", "state": "firing", "n": 1100, "segment": "eu"},
        {"rule": "recall_low", "state": "resolved", "n": 3000, "segment": "eu"},
        {"rule": "auc_drop", "state": "firing", "n": 5000, "segment": None},
    ]
    ok = [{"rule": "recall_low", "n_min": 1000, "n_max": 1200, "segment": "eu"},
          {"rule": "recall_low", "state": "resolved", "n_min": 2000},
          {"rule": "auc_drop", "n_min": 4000, "n_max": 6000}]
    assert check(_sc(ok), alerts) == []
    # out of range, wrong segment, and a firing no expectation covers
    bad = [{"rule": "recall_low", "n_min": 1200, "n_max": 1500},
           {"rule": "recall_low", "segment": "us"}]
    failures = check(_sc(bad), alerts)
    assert failures == [
        "expected recall_low to be firing with n in [1200, 1500]; it was firing at n=1100",
        "expected recall_low in segment 'us' to be firing with n in [0, end]; it was never firing",
        "unexpected alert: recall_low (segment eu) fired at n=1100 (no [[expect]] covers it)",
        "unexpected alert: auc_drop fired at n=5000 (no [[expect]] covers it)",
    ]
    assert len(check(_sc(bad, strict=False), alerts)) == 2
    # none = true: any firing fails, a pending that never fired does not
    assert check(_sc([{"none": True}]), alerts[:1]) == []
    assert len(check(_sc([{"none": True}]), alerts)) == 2


@pytest.mark.parametrize("body, message", [
    ('[stream]\nkind = "nope"\n[[expect]]\nnone = true', "kind = 'nope': expected one of"),
    ('[[expect]]\nnone = true', r"missing the \[stream\] table"),
    ('[stream]\nkind = "stationary"\nn = 10', r"needs at least one \[\[expect\]\]"),
    ('[stream]\nkind = "stationary"\nn = 10\ncolour = 1\n[[expect]]\nnone = true',
     r"\[stream\] has unknown key\(s\) colour"),
    ('[stream]\nkind = "stationary"\nn = -3\n[[expect]]\nnone = true', r"\[stream\] n = -3: must be an integer"),
    ('[stream]\nkind = "stationary"\nn = 10\n[[expect]]\nrule = "r"\nstate = "on"',
     "state = 'on': expected one of"),
    ('[stream]\nkind = "stationary"\nn = 10\n[[expect]]\nrule = "r"\nn_min = 5\nn_max = 2',
     r"n_max = 2: must be an integer in \[5"),
    ('[stream]\nkind = "stationary"\nn = 10\n[[expect]]\nnone = true\n[[expect]]\nrule = "r"',
     "cannot be combined"),
    ('[stream]\nkind = "river_generator"\ngenerator = "SEA"\nn = 10\nmodel = "linear_model.LogisticRegression"\n'
     '[stream.drift]\nposition = 10000\nwidth = 1\n[[expect]]\nnone = true', "width >= 58"),
    ('[stream]\nkind = "stationary"\nn = 10\n[[expect]]\nnone = true\n[stream.delay]\nmin = 5\nmax = 1',
     r"\[stream.delay\] max = 1"),
    ('[stream\nkind=', "not valid TOML"),
])
def test_bad_scenario_files_are_refused_naming_the_key(tmp_path, body, message):
    with pytest.raises(ValueError, match=message):
        load(_write(tmp_path, body))


@pytest.mark.parametrize("stream, message", [
    ('kind = "river_dataset"\ndataset = "Nope"\nmodel = "linear_model.LogisticRegression"',
     "dataset = 'Nope': no such dataset"),
    ('kind = "river_dataset"\ndataset = "CreditCard"\nmodel = "linear_model.LogisticRegression"',
     "downloaded at run time"),
    ('kind = "river_dataset"\ndataset = "TrumpApproval"\nmodel = "linear_model.LogisticRegression"',
     "not a binary classification"),
    ('kind = "river_dataset"\ndataset = "Phishing"\nmodel = "linear_model.Nope"',
     "model = 'linear_model.Nope': no such class in river"),
    ('kind = "river_generator"\ngenerator = "Nope"\nn = 5\nmodel = "linear_model.LogisticRegression"',
     "generator = 'Nope': no such generator"),
])
def test_bad_river_names_are_refused_when_built(tmp_path, stream, message):
    sc = load(_write(tmp_path, f"[stream]\n{stream}\n[[expect]]\nnone = true\n"))
    with pytest.raises(ValueError, match=message):
        generate(sc)


def test_bundled_scenarios_parse_and_describe_themselves():
    files = sorted(SCENARIO_DIR.glob("*.toml"))
    names = {p.stem for p in files}
    assert {"phishing", "sea_drift", "stationary", "delayed_labels"} <= names
    kinds = set()
    for p in files:
        sc = load(p)
        kinds.add(sc.kind)
        assert sc.description, p.name
        assert "monitor" in sc.config, p.name
    assert {"river_dataset", "river_generator", "stationary", "log"} <= kinds
    assert any(load(p).delayed for p in files)
    for p in files:
        sc = load(p)
        if sc.kind == "log":  # bundled logs live in scenarios/data/
            assert (p.parent / sc.stream["path"]).parent == SCENARIO_DIR / "data"
            assert (p.parent / sc.stream["path"]).exists()


def test_the_checkout_scenario_alert_explains_itself_by_the_log(tmp_path):
    """The bundled checkout log's alert ("recall@6h < 0.5" for "br"): the scenario still
    passes, and the explanation's value, events and interval are those of the br
    payments of the last six hours of event time, recomputed from the log (weighted
    recall by scikit-learn; the interval is the metric's own, checked in
    test_intervals.py)."""
    import gzip
    import json
    from datetime import datetime

    import numpy as np
    from sklearn.metrics import recall_score

    from streameval.replay import run_scenario

    root = Path(__file__).resolve().parent.parent / "scenarios"
    summary, failures = run_scenario(root / "checkout_log.toml", tmp_path / "out", check=True,
                                     report=False, progress=False)
    assert failures == []
    alerts = [json.loads(x) for x in open(tmp_path / "out" / "alerts.jsonl")]
    (a,) = [x for x in alerts if x["state"] == "firing"]
    rows = [json.loads(x) for x in gzip.open(root / "data" / "checkout.jsonl.gz", "rt")]
    ts = np.array([datetime.fromisoformat(r["ts"].replace("Z", "+00:00")).timestamp()
                   for r in rows])
    br = np.array([r["country"] == "br" for r in rows])
    upto = np.arange(len(rows)) < a["n"]
    # a segment's window by time ends at the segment's newest event
    window = br & upto & (ts > ts[br & upto].max() - 21600)
    y = np.array([r["label"] for r in rows])[window]
    s = np.array([r["score"] for r in rows])[window]
    w = np.array([r["weight"] for r in rows])[window]
    assert (a["segment"], a["rule"], a["expr"], a["window"]) == (
        "br", "recall_low", "recall@6h < 0.5", "last 21600 s of event time")
    assert a["events"] == window.sum()
    assert a["segment_n"] == (br & upto).sum()
    assert a["value"] == pytest.approx(recall_score(y, s >= 0.5, sample_weight=w), abs=1e-12)
    assert a["interval"][0] < a["value"] < a["interval"][1] and a["interval_level"] == 0.95
    assert summary["fired"][0]["message"] == a["message"]
