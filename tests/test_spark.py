"""streameval.spark.evaluate on a real local SparkSession (the ``spark`` fixture),
against scikit-learn and the single-process metrics fed the same rows."""

import math
import re

import numpy as np
import pytest

import streameval as se

pd = pytest.importorskip("pandas")
skm = pytest.importorskip("sklearn.metrics")


def _data(seed, n=3000, distinct=True, weights=True, segments=("a", "b", "c")):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = rng.random(n) * 0.6 + 0.3 * y
    if not distinct:
        s = np.round(s, 2)  # many ties, within and across partitions
    w = rng.integers(0, 4, n).astype(float) if weights else np.ones(n)
    if weights == "float":
        w = rng.random(n) * 3
    g = rng.choice(list(segments), n)
    return y, s, w, g


def _frame(spark, **cols):
    return spark.createDataFrame(pd.DataFrame(cols))


def _evaluate(*args, **kwargs):
    from streameval.spark import evaluate

    return evaluate(*args, **kwargs)


ALL = {
    "auc": lambda: se.ROCAUC(), "gini": lambda: se.Gini(),
    "ap": lambda: se.AveragePrecision(), "recall": lambda: se.Recall(),
    "precision": lambda: se.Precision(threshold=0.4), "f1": lambda: se.F1(),
    "mcc": lambda: se.MCC(), "accuracy": lambda: se.Accuracy(),
    "log_loss": lambda: se.LogLoss(), "brier": lambda: se.Brier(),
}


@pytest.mark.parametrize("distinct", [True, False], ids=["distinct", "ties"])
@pytest.mark.parametrize("weights", [False, True, "float"], ids=["unweighted", "int", "float"])
def test_exact_values_equal_sklearn_and_single_process(spark, distinct, weights):
    y, s, w, _ = _data(7, distinct=distinct, weights=weights)
    df = _frame(spark, label=y, score=s, w=w)
    stats = {}
    got = _evaluate(df, {k: f() for k, f in ALL.items()}, weight="w", partitions=5, stats=stats,
                    aggregate=False)  # the score ranges (pre-aggregation: tested below)
    assert list(got) == list(ALL)
    assert got["auc"] == pytest.approx(skm.roc_auc_score(y, s, sample_weight=w), abs=1e-12)
    assert got["ap"] == pytest.approx(
        skm.average_precision_score(y, s, sample_weight=w), abs=1e-12)
    for name, make in ALL.items():
        want = make().update_many(y, s, w).get()
        assert got[name] == pytest.approx(want, abs=1e-12), name
    assert stats["passes"] == 2 and stats["partitions"] >= 2


@pytest.mark.parametrize("partitions", [1, 2, 7])
def test_any_number_of_score_ranges_gives_the_same_values(spark, partitions):
    y, s, w, _ = _data(partitions, n=1500, distinct=False)
    df = _frame(spark, label=y, score=s, w=w)
    got = _evaluate(df, {"auc": se.ROCAUC(), "ap": se.AveragePrecision()}, weight="w",
                    partitions=partitions, aggregate=False)
    assert got["auc"] == pytest.approx(skm.roc_auc_score(y, s, sample_weight=w), abs=1e-12)
    assert got["ap"] == pytest.approx(
        skm.average_precision_score(y, s, sample_weight=w), abs=1e-12)


def test_curves_equal_the_single_process_curves_and_downsample(spark):
    y, s, w, _ = _data(3, n=2000, distinct=False)
    df = _frame(spark, label=y, score=s, w=w)
    got = _evaluate(df, {"roc": se.ROCCurve(), "pr": se.PRCurve()}, weight="w", partitions=4)
    for name, m in (("roc", se.ROCCurve()), ("pr", se.PRCurve())):
        want = m.update_many(y, s, w).get()
        for a, b in zip(got[name], want):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    fpr, tpr, thr = skm.roc_curve(y, s, sample_weight=w, drop_intermediate=False)
    np.testing.assert_allclose(got["roc"][0], fpr, atol=1e-12)
    np.testing.assert_allclose(got["roc"][1], tpr, atol=1e-12)
    # down-sampled: a subset of the full curve's points, first and last kept
    small = _evaluate(df, {"roc": se.ROCCurve()}, weight="w", partitions=4, curve_points=10)
    full = dict(zip(got["roc"][2].tolist(), zip(got["roc"][0], got["roc"][1])))
    f2, t2, th2 = small["roc"]
    assert 3 <= len(th2) <= 10 + 4 + 1 < len(thr)
    assert th2[0] == np.inf and th2[-1] == thr[-1]
    for th, a, b in zip(th2.tolist(), f2, t2):
        assert full[th] == pytest.approx((a, b), abs=1e-12)


def test_group_by_gives_one_row_per_segment(spark):
    y, s, w, g = _data(11, n=3000, distinct=False)
    g2 = np.where(np.arange(len(y)) % 2 == 0, 1, 2)
    df = _frame(spark, label=y, score=s, w=w, g=g, h=g2)
    out = _evaluate(df, {"auc": se.ROCAUC(), "ap": se.AveragePrecision(),
                         "recall": se.Recall()}, weight="w", group_by=["g", "h"], partitions=3,
                    aggregate=False)
    assert out.columns == ["g", "h", "auc", "ap", "recall"]
    rows = out.collect()
    assert len(rows) == 6
    for r in rows:
        m = (g == r["g"]) & (g2 == r["h"])
        assert r["auc"] == pytest.approx(
            skm.roc_auc_score(y[m], s[m], sample_weight=w[m]), abs=1e-12)
        assert r["ap"] == pytest.approx(
            skm.average_precision_score(y[m], s[m], sample_weight=w[m]), abs=1e-12)
        assert r["recall"] == pytest.approx(se.Recall().update_many(y[m], s[m], w[m]).get(),
                                            abs=1e-12)


def test_a_null_segment_is_a_segment_and_an_undefined_value_is_null(spark):
    df = spark.createDataFrame(
        [(True, 0.9, "a"), (False, 0.2, "a"), (True, 0.4, None), (True, 0.7, None)],
        "label boolean, score double, g string")
    rows = {r["g"]: r for r in _evaluate(df, {"auc": se.ROCAUC(), "recall": se.Recall()},
                                         group_by="g").collect()}
    assert rows["a"]["auc"] == 1.0
    assert rows[None]["auc"] is None  # no negatives: undefined, as get() is NaN
    assert rows[None]["recall"] == 0.5


def test_binned_mode_reports_its_bound_beside_the_value(spark):
    y, s, w, _ = _data(5, n=3000)
    df = _frame(spark, label=y, score=s, w=w)
    got = _evaluate(df, {"auc": se.ROCAUC(bins=20), "ap": se.AveragePrecision(bins=20),
                         "exact": se.ROCAUC()}, weight="w")
    assert list(got) == ["auc", "auc_error_bound", "ap", "ap_error_bound", "exact"]
    one = se.ROCAUC(bins=20).update_many(y, s, w)
    assert got["auc"] == pytest.approx(one.get(), abs=1e-12)
    assert got["auc_error_bound"] == pytest.approx(one.error_bound(), abs=1e-12)
    assert abs(got["auc"] - got["exact"]) <= got["auc_error_bound"]
    ap = skm.average_precision_score(y, s, sample_weight=w)
    assert abs(got["ap"] - ap) <= got["ap_error_bound"] + 1e-12


def test_driver_data_does_not_grow_with_distinct_scores(spark):
    sizes = {}
    for n in (2000, 40000):
        rng = np.random.default_rng(n)
        y = rng.random(n) < 0.5
        s = rng.random(n)  # all distinct
        df = _frame(spark, label=y, score=s)
        stats = {}
        got = _evaluate(df, {"auc": se.ROCAUC(), "ap": se.AveragePrecision()},
                        partitions=4, stats=stats)
        assert got["auc"] == pytest.approx(skm.roc_auc_score(y, s), abs=1e-12)
        sizes[n] = stats["driver_bytes"]
        assert stats["driver_rows"] == 4
    assert sizes[40000] < 1.2 * sizes[2000] < 5000  # 20x the scores, same driver data


def test_string_labels_and_an_empty_frame(spark):
    df = spark.createDataFrame([("spam", 0.9), ("ham", 0.3), ("spam", 0.2), ("ham", 0.1)],
                               "label string, score double")
    got = _evaluate(df, {"auc": se.ROCAUC(pos_label="spam", neg_label="ham"),
                         "r": se.Recall(pos_label="spam", neg_label="ham")})
    assert got == {"auc": 0.75, "r": 0.5}
    empty = df.limit(0)
    got = _evaluate(empty, {"auc": se.ROCAUC(pos_label="spam", neg_label="ham"),
                            "ap": se.AveragePrecision(pos_label="spam", neg_label="ham")})
    assert math.isnan(got["auc"]) and math.isnan(got["ap"])


BAD = [
    ("a NaN score", (1, float("nan"), 1.0), "y_pred = nan: score must be a finite number"),
    ("a null score", (1, None, 1.0), "y_pred = None: score must be a finite number"),
    ("a label outside the pair", (2, 0.5, 1.0), "y_true = 2: label must be True (positive) "
     "or False (negative)"),
    ("a null label", (None, 0.5, 1.0), "y_true = None: label must be True"),
    ("a negative weight", (1, 0.5, -1.0), "w = -1.0: weight must be a finite number"),
]


@pytest.mark.parametrize("what,row,message", BAD, ids=[b[0] for b in BAD])
def test_bad_rows_fail_with_the_single_process_message(spark, what, row, message):
    from streameval.validation import ValidationError

    rows = [(1, 0.9, 1.0), (0, 0.1, 2.0), (1, 0.4, 1.0)] * 20
    rows[37] = row
    rows[50] = row
    df = spark.createDataFrame(rows, "label long, score double, w double")
    y = [r[0] for r in rows]
    s = [r[1] for r in rows]
    w = [r[2] for r in rows]
    # the single-process message for the same rows, its index left out
    with pytest.raises(ValidationError) as single:
        se.ROCAUC().update_many(y, s, w)
    assert re.sub(r"\[37\]", "", str(single.value)).startswith(message)
    with pytest.raises(ValidationError) as err:
        _evaluate(df, {"auc": se.ROCAUC(), "recall": se.Recall()}, weight="w", partitions=3)
    text = str(err.value)
    assert text.startswith(message), text
    column = {"y_true": "label", "y_pred": "score", "w": "w"}[message.split(" ")[0]]
    assert f"column {column!r}" in text and "2 bad rows in the DataFrame" in text
    assert "nothing was merged" in text
    # skip: the other rows' values, the bad rows back with their reason
    res = _evaluate(df, {"auc": se.ROCAUC(), "recall": se.Recall()}, weight="w",
                    on_error="skip", partitions=3)
    keep = [i for i in range(len(rows)) if i not in (37, 50)]
    want = se.ROCAUC().update_many([y[i] for i in keep], [s[i] for i in keep],
                                   [w[i] for i in keep]).get()
    assert res.values["auc"] == pytest.approx(want, abs=1e-12)
    assert res.n_rejected == 2
    rejected = res.rejected.collect()
    assert len(rejected) == 2 and all(r["reason"].startswith(message) for r in rejected)


def test_a_probability_metric_refuses_scores_outside_0_1(spark):
    from streameval.validation import ValidationError

    df = spark.createDataFrame([(1, 0.9), (0, 1.5), (1, 0.2)], "label long, score double")
    with pytest.raises(ValidationError, match=r"y_pred = 1.5: probability must be in \[0, 1\]"):
        _evaluate(df, {"auc": se.ROCAUC(), "ll": se.LogLoss()})
    # without a probability metric the same score is fine
    assert _evaluate(df, {"auc": se.ROCAUC()})["auc"] == 0.0  # the negative is on top


def test_refusals_before_any_job(spark):
    df = spark.createDataFrame([(1, 0.9)], "label long, score double")
    with pytest.raises(ValueError, match="binary classification metrics"):
        _evaluate(df, {"mae": se.MAE()})
    with pytest.raises(ValueError, match=r"columns \['w'\] are not in the DataFrame"):
        _evaluate(df, {"auc": se.ROCAUC()}, weight="w")
    with pytest.raises(ValueError, match="different labels"):
        _evaluate(df, {"a": se.Recall(), "b": se.Recall(pos_label="x", neg_label="y")})
    with pytest.raises(ValueError, match="on_error"):
        _evaluate(df, {"a": se.Recall()}, on_error="ignore")
    with pytest.raises(ValueError, match="curve_points"):
        _evaluate(df, {"a": se.ROCCurve()}, curve_points=1)
    with pytest.raises(ValueError, match="InterpolatedAP would ship one entry per distinct score"):
        _evaluate(df, {"a": se.InterpolatedAP()})
    strings = spark.createDataFrame([(1, "0.9")], "label long, score string")
    with pytest.raises(ValueError, match="column 'score' is string: scores must be numbers"):
        _evaluate(strings, {"a": se.Recall()})
    with pytest.raises(ValueError, match="score must be a finite number"):
        se.Recall().update_many([1], ["0.9"])  # the single-process path refuses it too
    dates = spark.createDataFrame([(1, 0.9, None)], "label long, score double, d date")
    with pytest.raises(ValueError, match="group_by column 'd' is date"):
        _evaluate(dates, {"a": se.Recall()}, group_by="d")


def test_an_integer_segment_column_with_nulls_keeps_integer_keys(spark):
    df = spark.createDataFrame(
        [(1, 0.9, 1), (0, 0.3, None), (1, 0.4, None), (0, 0.8, 2), (1, 0.7, 2), (0, 0.1, 1)],
        "label int, score double, g long")
    rows = {r["g"]: r for r in _evaluate(df, {"r": se.Recall(), "auc": se.ROCAUC()},
                                         group_by="g", partitions=3).collect()}
    assert set(rows) == {None, 1, 2}
    assert rows[None]["auc"] == 1.0 and rows[None]["r"] == 0.0
    assert rows[1]["auc"] == 1.0 and rows[2]["auc"] == 0.0


@pytest.mark.parametrize("weights", [False, "float"], ids=["unweighted", "float"])
def test_pre_aggregated_scores_give_the_same_values(spark, weights):
    y, s, w, g = _data(21, n=4000, distinct=False, weights=weights)
    df = _frame(spark, label=y, score=s, w=w, g=g)
    ms = {k: f() for k, f in ALL.items()}
    ms["roc"] = se.ROCCurve()
    for agg in (True, False):
        stats = {}
        got = _evaluate(df, {k: m.clone() for k, m in ms.items()}, weight="w", partitions=3,
                        aggregate=agg, stats=stats)
        assert stats["aggregated"] is agg
        for name, m in ms.items():
            want = m.clone().update_many(y, s, w).get()
            if isinstance(want, tuple):
                for a, b in zip(got[name], want):
                    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
            else:
                assert got[name] == pytest.approx(want, abs=1e-12), (agg, name)
    out = _evaluate(df, {"auc": se.ROCAUC(), "recall": se.Recall()}, weight="w",
                    group_by="g", aggregate=True).collect()
    for r in out:
        m = g == r["g"]
        assert r["auc"] == pytest.approx(skm.roc_auc_score(y[m], s[m], sample_weight=w[m]),
                                         abs=1e-12)
    # "auto" chooses it for rounded scores, not for distinct ones
    auto = {}
    _evaluate(df, {"auc": se.ROCAUC()}, stats=auto)
    assert auto["aggregated"] is True
    y2, s2, _, _ = _data(22, n=4000)
    _evaluate(_frame(spark, label=y2, score=s2), {"auc": se.ROCAUC()}, stats=auto)
    assert auto["aggregated"] is False


@pytest.mark.parametrize("cap", [None, 50], ids=["on_driver", "over_the_cap"])
def test_aggregated_rows_keep_segment_and_label_types(spark, monkeypatch, cap):
    """Pre-aggregated rows collected to the driver (and, past DRIVER_SCORES groups, the
    score ranges over them): integer segments with nulls, string labels, float weights;
    every segment's values equal scikit-learn on that segment's rows."""
    import importlib

    ev = importlib.import_module("streameval.spark.evaluate")
    if cap is not None:
        monkeypatch.setattr(ev, "DRIVER_SCORES", cap)
    y, s, w, _ = _data(23, n=3000, distinct=False, weights="float")
    g = np.random.default_rng(24).choice([1, 2, 3], len(y)).astype(object)
    g[::7] = None
    df = spark.createDataFrame(
        [("fraud" if a else "ok", float(b), float(c), d) for a, b, c, d in zip(y, s, w, g)],
        "label string, score double, w double, g long")
    stats = {}
    lab = {"pos_label": "fraud", "neg_label": "ok"}
    metrics = {"auc": se.ROCAUC(**lab), "ap": se.AveragePrecision(**lab),
               "recall": se.Recall(**lab)}
    out = ev.evaluate(df, metrics, weight="w", group_by="g", aggregate=True, partitions=3,
                      stats=stats)
    assert stats["aggregated"] is True
    assert stats["partitions"] == (0 if cap is None else 3)
    rows = {r["g"]: r for r in out.collect()}
    assert set(rows) == {None, 1, 2, 3}
    for key, r in rows.items():
        m = np.array([v is None if key is None else v == key for v in g])
        assert r["auc"] == pytest.approx(
            skm.roc_auc_score(y[m], s[m], sample_weight=w[m]), abs=1e-12)
        assert r["ap"] == pytest.approx(
            skm.average_precision_score(y[m], s[m], sample_weight=w[m]), abs=1e-12)
        assert r["recall"] == pytest.approx(
            skm.recall_score(y[m], s[m] >= 0.5, sample_weight=w[m]), abs=1e-12)


def test_bad_rows_under_aggregation_get_the_row_by_row_message(spark):
    from streameval.validation import ValidationError

    rows = [(1, 0.5, 1.0), (0, 0.25, 2.0)] * 600
    rows[700] = (1, 0.5, -3.0)
    df = spark.createDataFrame(rows, "label long, score double, w double")
    with pytest.raises(ValidationError, match=r"^w = -3.0: weight must be .*1 bad row"):
        _evaluate(df, {"auc": se.ROCAUC()}, weight="w", aggregate=True)
    res = _evaluate(df, {"auc": se.ROCAUC()}, weight="w", aggregate=True, on_error="skip")
    assert res.n_rejected == 1 and res.values["auc"] == 1.0
