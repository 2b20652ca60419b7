"""``subtract(other)``: the exact inverse of ``merge(other)``, for every metric with merge.

What a Spark driver does with per-time-bucket states: ``window.merge(new_bucket)`` then
``window.subtract(old_bucket)``. The properties, on seeded streams drawn by hypothesis,
each against an independent oracle:

1. ``a.merge(b).subtract(b)`` gives back ``a``: ``get()`` and the state (exactly for
   counts with unit or integer weights; the documented rounding otherwise);
2. ``(a merged with b).subtract(b)`` equals a fresh metric fed only ``a``'s events
   (exactly with integer weights, as ``revert``; float weights: the tolerance of the
   revert tests), and scikit-learn's ``roc_auc_score`` / ``average_precision_score``
   to 1e-12 for AUC and AP;
3. subtracting what was never merged (an extra event, more weight, a score never seen)
   raises ``ValueError`` saying so, and changes nothing;
4. another type or other parameters raise ``ValueError`` (as ``merge``), nothing
   changed; a shared view and a Monitor's shared order refuse with ``TypeError``.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, roc_auc_score

import streameval as se
from streameval import drift
from streameval.metrics import levels, scoreorder
from streameval.metrics.ranking import OrderView
from streameval.metrics.retrieval import ExactSum

SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ------------------------------------------------------------------- the streams
# (the generators of tests/test_common.py, with a choice of weights: none, integers
# or fractions, zero weights included; regression targets include zeros for MAPE)


def _weights(rng, n, mode, integral=False):
    if mode == "unit":
        return None
    if mode == "int" or integral:
        return rng.integers(0, 4, n).astype(float).tolist()
    return np.round(rng.random(n) * 3, 1).tolist()


def binary_stream(rng, n, mode):
    y = (rng.random(n) < 0.4).tolist()
    s = np.round(rng.random(n), 2).tolist()  # ties on purpose
    return y, s, _weights(rng, n, mode)


CLASSES = ["a", "b", "c"]


def multiclass_stream(rng, n, mode):
    y = [CLASSES[i] for i in rng.integers(0, 3, n)]
    p = rng.dirichlet(np.ones(3), n).round(2)
    return y, [dict(zip(CLASSES, row.tolist())) for row in p], _weights(rng, n, mode)


def multiclass_label_stream(rng, n, mode):
    y = [CLASSES[i] for i in rng.integers(0, 3, n)]
    p = [CLASSES[i] for i in rng.integers(0, 3, n)]
    return y, p, _weights(rng, n, mode)


def regression_stream(rng, n, mode):
    y = np.round(rng.random(n) * 10 + 0.5, 2)
    y[rng.random(n) < 0.1] = 0.0  # MAPE skips (and counts) these
    p = np.round(rng.random(n) * 10 + 0.5, 2)
    return y.tolist(), p.tolist(), _weights(rng, n, mode)


def retrieval_stream(rng, n, mode):
    rels, scores = [], []
    for _ in range(n):
        m = int(rng.integers(1, 6))
        rels.append(rng.integers(0, 3, m).tolist())
        scores.append(np.round(rng.random(m), 1).tolist())
    return rels, scores, _weights(rng, n, mode)


WORDS = "the cat sat on a mat dog ran far".split()


def text_stream(rng, n, mode, integral=False):
    hyps, refs = [], []
    for _ in range(n):
        hyps.append(" ".join(rng.choice(WORDS, int(rng.integers(1, 7)))))
        refs.append([" ".join(rng.choice(WORDS, int(rng.integers(1, 7))))
                     for _ in range(int(rng.integers(1, 3)))])
    return hyps, refs, _weights(rng, n, mode, integral)


STREAMS = {
    "binary": binary_stream,
    "multiclass": multiclass_stream,
    "multiclass_label": multiclass_label_stream,
    "regression": regression_stream,
    "retrieval": retrieval_stream,
    "text": text_stream,
}

# ------------------------------------------------------------- the metrics

#: (id, factory, stream kind, family, a factory with other parameters or None).
#: Families: "counts" (confusion cells, score orders, BLEU's integer statistics: the
#: state itself is restored exactly with integer weights), "exact" (exact running sums:
#: the value is restored bit for bit whatever the weights), "mean" (compensated
#: sums: the value to one rounding, as ``revert``).
CASES = [
    ("ConfusionMatrix", lambda: se.ConfusionMatrix(), "binary", "counts",
     lambda: se.ConfusionMatrix(threshold=0.3)),
    ("ConfusionMatrix-multiclass", lambda: se.ConfusionMatrix(multiclass=True),
     "multiclass_label", "counts", None),
    ("Accuracy", lambda: se.Accuracy(), "binary", "counts", lambda: se.Accuracy(threshold=0.7)),
    ("Accuracy-multiclass", lambda: se.Accuracy(multiclass=True), "multiclass", "counts", None),
    ("ErrorRate", lambda: se.ErrorRate(threshold=0.3), "binary", "counts",
     lambda: se.ErrorRate(threshold=0.4)),
    ("Precision", lambda: se.Precision(), "binary", "counts", lambda: se.Precision(threshold=0.2)),
    ("Precision-macro", lambda: se.Precision(average="macro"), "multiclass_label", "counts",
     lambda: se.Precision(average="micro")),
    ("Recall", lambda: se.Recall(), "binary", "counts", lambda: se.Recall(threshold=0.6)),
    ("Recall-weighted", lambda: se.Recall(average="weighted"), "multiclass", "counts",
     lambda: se.Recall(average="macro")),
    ("F1", lambda: se.F1(), "binary", "counts", lambda: se.F1(threshold=0.1)),
    ("F1-micro", lambda: se.F1(average="micro"), "multiclass_label", "counts", None),
    ("FBeta", lambda: se.FBeta(beta=2.0), "binary", "counts", lambda: se.FBeta(beta=0.5)),
    ("FAlpha", lambda: se.FAlpha(alpha=0.3), "binary", "counts", lambda: se.FAlpha(alpha=0.6)),
    ("MCC", lambda: se.MCC(), "binary", "counts", lambda: se.MCC(threshold=0.2)),
    ("MCC-multiclass", lambda: se.MCC(multiclass=True), "multiclass_label", "counts", None),
    ("BalancedAccuracy", lambda: se.BalancedAccuracy(), "binary", "counts",
     lambda: se.BalancedAccuracy(threshold=0.9)),
    ("FPR", lambda: se.FPR(), "binary", "counts", lambda: se.FPR(threshold=0.3)),
    ("Specificity", lambda: se.Specificity(), "binary", "counts",
     lambda: se.Specificity(threshold=0.3)),
    ("ROCAUC", lambda: se.ROCAUC(), "binary", "counts", lambda: se.ROCAUC(bins=10)),
    ("ROCAUC-bins", lambda: se.ROCAUC(bins=10), "binary", "counts", lambda: se.ROCAUC(bins=9)),
    ("ROCAUC-macro", lambda: se.ROCAUC(average="macro"), "multiclass", "counts",
     lambda: se.ROCAUC(average="weighted")),
    ("ROCAUC-micro", lambda: se.ROCAUC(average="micro"), "multiclass", "counts", None),
    ("Gini", lambda: se.Gini(), "binary", "counts", lambda: se.Gini(bins=4)),
    ("AveragePrecision", lambda: se.AveragePrecision(), "binary", "counts",
     lambda: se.AveragePrecision(bins=10)),
    ("AveragePrecision-bins", lambda: se.AveragePrecision(bins=16), "binary", "counts", None),
    ("AveragePrecision-weighted", lambda: se.AveragePrecision(average="weighted"),
     "multiclass", "counts", None),
    ("InterpolatedAP", lambda: se.InterpolatedAP(), "binary", "counts",
     lambda: se.InterpolatedAP(pos_label=0, neg_label=1)),
    ("ElevenPointAP", lambda: se.ElevenPointAP(), "binary", "counts", None),
    ("ROCCurve", lambda: se.ROCCurve(), "binary", "counts", None),
    ("PRCurve", lambda: se.PRCurve(), "binary", "counts", None),
    ("LogLoss", lambda: se.LogLoss(), "binary", "mean", None),
    ("Brier", lambda: se.Brier(), "binary", "mean", None),
    ("LogLoss-multiclass", lambda: se.LogLoss(multiclass=True), "multiclass", "mean", None),
    ("MAE", lambda: se.MAE(), "regression", "mean", None),
    ("MSE", lambda: se.MSE(), "regression", "mean", None),
    ("RMSE", lambda: se.RMSE(), "regression", "mean", None),
    ("RMSLE", lambda: se.RMSLE(), "regression", "mean", None),
    ("MAPE", lambda: se.MAPE(), "regression", "mean", None),
    ("PrecisionAtK", lambda: se.PrecisionAtK(k=3), "retrieval", "exact",
     lambda: se.PrecisionAtK(k=2)),
    ("RecallAtK", lambda: se.RecallAtK(k=3), "retrieval", "exact",
     lambda: se.RecallAtK(k=3, no_relevant="zero")),
    ("HitAtK", lambda: se.HitAtK(k=3), "retrieval", "exact", lambda: se.HitAtK(k=1)),
    ("APAtK", lambda: se.APAtK(k=3), "retrieval", "exact", None),
    ("MAPAtK", lambda: se.MAPAtK(k=3), "retrieval", "exact", None),
    ("MRR", lambda: se.MRR(), "retrieval", "exact", lambda: se.MRR(ignore_ties=True)),
    ("DCG", lambda: se.DCG(k=4), "retrieval", "exact", lambda: se.DCG(k=5)),
    ("NDCG", lambda: se.NDCG(k=4), "retrieval", "exact", None),
    ("BLEU", lambda: se.BLEU(), "text", "counts", lambda: se.BLEU(max_ngram_order=2)),
    ("ROUGE", lambda: se.ROUGE(), "text", "exact", None),
    ("METEOR", lambda: se.METEOR(stem=False), "text", "exact", None),
]
IDS = [c[0] for c in CASES]
SCORE_ORDERS = {"ROCAUC", "ROCAUC-bins", "Gini", "AveragePrecision", "AveragePrecision-bins",
                "InterpolatedAP", "ElevenPointAP", "ROCCurve", "PRCurve"}


def stream(name, kind, seed, n, mode):
    rng = np.random.default_rng(seed)
    if kind == "text":  # corpus BLEU adds integer n-gram counts: repeat counts only
        return text_stream(rng, n, mode, integral=name == "BLEU")
    return STREAMS[kind](rng, n, mode)


def fed(factory, events):
    yt, yp, w = events
    return factory().update_many(yt, yp, w)


def split(events, k):
    yt, yp, w = events
    return (yt[:k], yp[:k], None if w is None else w[:k]), \
           (yt[k:], yp[k:], None if w is None else w[k:])


def value(m):
    v = m.get()
    if isinstance(v, tuple):
        return [np.asarray(a, dtype=float) for a in v]
    return np.asarray(v, dtype=float)


def assert_same(got, want, tol=0.0):
    """Equal values (curves: arrays), NaN equal to NaN; ``tol`` 0: bit for bit."""
    g, w = value(got), value(want)
    if isinstance(g, list):
        assert len(g) == len(w)
        pairs = list(zip(g, w))
    else:
        pairs = [(g, w)]
    for x, y in pairs:
        assert x.shape == y.shape, (x, y)
        if tol:
            np.testing.assert_allclose(x, y, rtol=tol, atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(x, y)  # (NaN equals NaN here)


def dumped(m):
    return json.dumps(m.to_state(), sort_keys=True)


def comparable_state(m, family):
    """The state, with what is not canonical replaced by its value: an exact sum's
    partials by their (correctly rounded) total; a compensated sum by nothing (its
    value is compared through ``get``)."""
    state = json.loads(dumped(m))
    data = state["data"]
    if family == "exact":
        for key in ("wsum", "vsum"):
            if key in data:
                data[key] = math.fsum(data[key])
        if "sums" in data:
            data["sums"] = [math.fsum(p) for p in data["sums"]]
    elif family == "mean":
        data.pop("sum")
    return state


def tolerance(family, mode):
    """0 (bit for bit) where the inverse is exact; else the revert tests' tolerance
    (tests/test_common.py: 1e-9) for float weights, and one rounding of a compensated
    sum (1e-12) for the means."""
    if family == "exact":
        return 0.0
    if family == "mean":
        return 1e-12
    return 0.0 if mode != "float" else 1e-9


def check(m):
    m._check()


events_args = dict(seed=st.integers(0, 2**32 - 1), na=st.integers(0, 25),
                   nb=st.integers(0, 25), mode=st.sampled_from(["unit", "int", "float"]))


# ------------------------------------------------------- 1. merge then subtract


@pytest.mark.parametrize("name,factory,kind,family,alt", CASES, ids=IDS)
@SETTINGS
@given(**events_args)
def test_merge_then_subtract_gives_back_the_metric(name, factory, kind, family, alt,
                                                    seed, na, nb, mode):
    events = stream(name, kind, seed, na + nb, mode)
    ea, eb = split(events, na)
    a, b = fed(factory, ea), fed(factory, eb)
    before_state = comparable_state(a, family)
    before = fed(factory, ea)  # (a twin: a's own value is read after the merge)
    b_state = dumped(b)
    assert a.merge(b) is a
    assert a.subtract(b) is a
    check(a)
    assert dumped(b) == b_state  # the other is only read
    assert_same(a, before, tolerance(family, mode))
    # (one-vs-rest: a class first seen in b stays known, with no event, as after
    # ``revert``: every class is in every event here, so only when a is empty)
    if (mode != "float" or family == "exact") and not (kind == "multiclass" and not na
                                                       and family == "counts"):
        assert comparable_state(a, family) == before_state
    # and a keeps going as the metric it was
    more = stream(name, kind, seed + 1, 5, mode)
    a.update_many(*more)
    before.update_many(*more)
    assert_same(a, before, tolerance(family, mode))


# ------------------------------------- 2. the union less one part is the other part


@pytest.mark.parametrize("name,factory,kind,family,alt", CASES, ids=IDS)
@SETTINGS
@given(**events_args, b_first=st.booleans(), via_json=st.booleans())
def test_union_less_one_part_equals_a_metric_fed_the_other(name, factory, kind, family, alt,
                                                           seed, na, nb, mode, b_first,
                                                           via_json):
    events = stream(name, kind, seed, na + nb, mode)
    ea, eb = split(events, na)
    a, b = fed(factory, ea), fed(factory, eb)
    union = factory()
    for part in ((b, a) if b_first else (a, b)):
        union.merge(part)
    if via_json:  # states shipped as JSON (a Spark bucket): the same result
        b = se.from_state(json.loads(json.dumps(b.to_state())))
        union = se.from_state(json.loads(json.dumps(union.to_state())))
    union.subtract(b)
    check(union)
    tol = tolerance(family, mode)
    if b_first and name.startswith(("ROCAUC-", "AveragePrecision-")) and not tol:
        # classes in another order of first appearance: the per-class average sums
        # the same values in another order
        tol = 1e-15
    assert_same(union, a, tol)
    # the same with the events fed straight into one metric (not merged)
    fed_both = fed(factory, events)
    fed_both.subtract(b)
    check(fed_both)
    assert_same(fed_both, a, tolerance(family, mode) or (1e-15 if "-" in name else 0.0))
    # scikit-learn where the metric is its
    if name in ("ROCAUC", "AveragePrecision") and na:
        yt, yp, w = ea
        ws = np.ones(na) if w is None else np.asarray(w)
        y = np.asarray(yt)
        if ws[y].sum() > 0 and ws[~y].sum() > 0:
            oracle = roc_auc_score if name == "ROCAUC" else average_precision_score
            assert abs(union.get() - oracle(y, yp, sample_weight=ws)) <= 1e-12


# ----------------------------------------------- 3. what was never merged is refused


def weighs(name, kind, y_true):
    """Whether an event's weight is counted (MAPE skips ``y_true == 0``; the retrieval
    metrics that skip a query without relevant candidates skip it)."""
    if name == "MAPE":
        return y_true != 0
    if name in ("RecallAtK", "APAtK", "MAPAtK"):
        return any(r > 0 for r in y_true)
    return True


def _refused_unchanged(m, other, match="never merged"):
    before, value_before = dumped(m), value(m)
    with pytest.raises(ValueError, match=match):
        m.subtract(other)
    assert dumped(m) == before
    got = value(m)
    for x, y in (zip(got, value_before) if isinstance(got, list) else [(got, value_before)]):
        np.testing.assert_array_equal(x, y)
    check(m)


@pytest.mark.parametrize("name,factory,kind,family,alt", CASES, ids=IDS)
@SETTINGS
@given(**events_args)
def test_subtracting_what_was_never_merged_is_refused_and_changes_nothing(
        name, factory, kind, family, alt, seed, na, nb, mode):
    events = stream(name, kind, seed, na + nb + 1, mode)
    union = fed(factory, events)
    yt, yp, w = events
    # one event more than the union holds
    extra = fed(factory, events)
    extra.update(yt[0], yp[0], 1.0)
    _refused_unchanged(union, extra)
    # a part of the union, one of its (counted) events with far more weight
    _, eb = split(events, na)
    byt, byp, bw = eb
    bw = [1.0] * len(byt) if bw is None else list(bw)
    i = next((j for j in range(len(byt)) if weighs(name, kind, byt[j])), None)
    if i is not None:
        bw[i] += 1000.0
        _refused_unchanged(union, fed(factory, (byt, byp, bw)))
    # the union itself can go (all of it was merged: from a fresh metric), and then
    # nothing more
    whole = factory().merge(union)
    union.subtract(whole)
    check(union)
    assert_same(union, factory())
    _refused_unchanged(union, fed(factory, (yt[:1], yp[:1], [1.0])))


@pytest.mark.parametrize("name", sorted(SCORE_ORDERS))
@SETTINGS
@given(**events_args)
def test_a_score_never_merged_is_refused(name, seed, na, nb, mode):
    factory = dict((c[0], c[1]) for c in CASES)[name]
    events = stream(name, "binary", seed, na + nb + 1, mode)
    union = fed(factory, events)
    yt, yp, w = events
    score, match = 0.123456, "score 0.123456 holds 0"
    if "bins" in name:  # a bin that no event of the union fell in
        bins = union._bins
        free = sorted(set(range(bins)) - {min(int(x * bins), bins - 1) for x in yp})
        if not free:
            return
        score, match = (free[0] + 0.5) / bins, f"bin {free[0]} holds 0"
    _refused_unchanged(union, factory().update_many(yt[:1], [score]), match=match)


def test_refusal_messages_name_what_is_missing():
    cm = se.ConfusionMatrix().update_many([1, 1, 1], [0.9, 0.8, 0.7])
    other = se.ConfusionMatrix().update_many([1] * 5, [0.9] * 5)
    with pytest.raises(ValueError, match=r"^subtract: the tp cell holds 3 events here but 5 "
                                         r"in the other ConfusionMatrix: it was never merged$"):
        cm.subtract(other)
    heavy = se.ConfusionMatrix().update_many([1], [0.9], [7.0])
    with pytest.raises(ValueError, match="the tp cell holds weight 3.0 here but 7.0"):
        cm.subtract(heavy)
    mc = se.ConfusionMatrix(multiclass=True).update_many(["a"], ["b"])
    with pytest.raises(ValueError, match=r"the cell \(y_true='b', y_pred='a'\) holds 0 events"):
        mc.subtract(se.ConfusionMatrix(multiclass=True).update_many(["b"], ["a"]))
    auc = se.ROCAUC().update_many([1, 0], [0.9, 0.1])
    with pytest.raises(ValueError, match="score 0.9 holds 1 positive event here but 2 in "
                                         "the other ROCAUC"):
        auc.subtract(se.ROCAUC().update_many([1, 1], [0.9, 0.9]))
    with pytest.raises(ValueError, match="0 negative events of weight 0 here but 1"):
        auc.subtract(se.ROCAUC().update_many([0], [0.1], [0.0]))
    ovr = se.ROCAUC(average="macro").update_many(["a", "b"], [{"a": .6, "b": .4}] * 2)
    with pytest.raises(ValueError, match="class 'z' of the other ROCAUC is unknown here"):
        ovr.subtract(se.ROCAUC(average="macro").update_many(["z"], [{"z": 1.0}]))
    mape = se.MAPE().update_many([0.0, 1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="1 skipped events .* here but 2"):
        mape.subtract(se.MAPE().update_many([0.0, 0.0], [1.0, 1.0]))
    mae = se.MAE().update_many([1.0, 2.0], [1.5, 2.5])
    with pytest.raises(ValueError, match="2 events here but 3 in the other MAE"):
        mae.subtract(se.MAE().update_many([1.0] * 3, [1.0] * 3))
    with pytest.raises(ValueError, match="weighted loss sum 1.0 here but 9.0"):
        mae.subtract(se.MAE().update_many([1.0], [10.0]))
    p = se.PrecisionAtK(k=2).update([1, 0], [0.9, 0.1])
    with pytest.raises(ValueError, match=r"weight 1.0 here but 2.0 in the other PrecisionAtK "
                                         r"\(no query left\)"):
        p.subtract(se.PrecisionAtK(k=2).update([1, 0], [0.9, 0.1], w=2.0))
    bleu = se.BLEU().update("the cat", ["the cat"])
    with pytest.raises(ValueError, match="hyp_len is 2 here but 3 in the other BLEU"):
        bleu.subtract(se.BLEU().update("a b c", ["the cat"]))


# ------------------------------------------------- 4. type and parameter mismatches


@pytest.mark.parametrize("name,factory,kind,family,alt", CASES, ids=IDS)
def test_other_types_and_parameters_are_refused(name, factory, kind, family, alt):
    events = stream(name, kind, 7, 12, "int")
    m = fed(factory, events)
    stranger = se.MSE() if name != "MSE" else se.MAE()
    before = dumped(m)
    with pytest.raises(ValueError, match=r"^cannot subtract a \w+ from a \w+$"):
        m.subtract(stranger)
    assert dumped(m) == before
    if alt is not None:
        other = alt()
        assert type(other) is not type(m) or other._params() != m._params()
        with pytest.raises(ValueError, match="cannot subtract"):
            m.subtract(other)
        assert dumped(m) == before


def test_shared_views_and_order_views_refuse_with_type_error():
    cm = se.ConfusionMatrix().update_many([1, 0], [0.9, 0.2])
    p = se.Precision(cm=cm)
    with pytest.raises(TypeError, match="subtract from the ConfusionMatrix itself"):
        p.subtract(se.Precision())
    # the matrix itself takes it, and every view reads the result
    cm.subtract(se.ConfusionMatrix().update_many([0], [0.2]))
    assert (cm.tp, cm.tn, p.get()) == (1.0, 0.0, 1.0)
    # an owning metric may take out a view's events (the view reads the other matrix)
    own = se.Precision().update_many([1, 0, 1], [0.9, 0.8, 0.1])
    own.subtract(se.Precision(cm=se.ConfusionMatrix().update_many([0], [0.8])))
    assert own.get() == 1.0
    # a view of the metric's own matrix: all of it goes
    mine = se.Precision(average="macro").update_many(["a", "b"], ["a", "a"])
    mine.subtract(se.Precision(average="macro", cm=mine.cm))
    assert mine.cm.n == 0 and math.isnan(mine.get())
    # a Monitor's shared order
    auc = se.ROCAUC().update_many([1, 0], [0.9, 0.2])
    view = OrderView(se.AveragePrecision(), auc)
    with pytest.raises(TypeError, match="read-only"):
        view.subtract(se.AveragePrecision())
    assert auc.get() == 1.0


def test_metrics_without_subtract_say_so():
    for m in (drift.DriftCounts(), se.Sliding(se.ROCAUC(), size=3)):
        with pytest.raises(NotImplementedError, match="cannot be subtracted"):
            m.subtract(m)


# --------------------------------------------------------------------- the rest


@pytest.mark.parametrize("name,factory,kind,family,alt", CASES, ids=IDS)
def test_subtracting_itself_empties_and_an_empty_other_changes_nothing(name, factory, kind,
                                                                       family, alt):
    events = stream(name, kind, 11, 15, "float" if name != "BLEU" else "int")
    m = fed(factory, events)
    before = dumped(m)
    m.subtract(factory())
    assert dumped(m) == before
    m.subtract(m)
    check(m)
    assert_same(m, factory())
    m.update_many(*events)
    assert_same(m, fed(factory, events), tolerance(family, "float"))


@pytest.mark.parametrize("name,factory,kind,family,alt", CASES, ids=IDS)
def test_a_sliding_window_of_buckets(name, factory, kind, family, alt):
    """What the Spark driver does: the window is the merge of its last 3 buckets,
    kept by one merge and one subtract per bucket; equal to merging the 3 afresh."""
    mode = "int"
    buckets = [fed(factory, stream(name, kind, 100 + i, 6, mode)) for i in range(8)]
    window = factory()
    for i, bucket in enumerate(buckets):
        window.merge(bucket)
        if i >= 3:
            window.subtract(buckets[i - 3])
        check(window)
        expected = factory()
        for b in buckets[max(0, i - 2):i + 1]:
            expected.merge(b)
        tol = tolerance(family, mode) or (1e-15 if "-" in name else 0.0)
        assert_same(window, expected, tol)


@pytest.fixture(params=["blocks", "flat", "levels"])
def order_path(request, monkeypatch):
    """Every removal path of the score order: entry by entry in blocks, one numpy
    subtraction of flat arrays, tombstone levels (see tests/conftest.py ``layout``)."""
    if request.param == "blocks":
        for name in ("REBUILD_RATIO", "REMOVE_REBUILD_RATIO"):
            monkeypatch.setattr(scoreorder, name, 0)
    elif request.param == "flat":
        for name in ("REBUILD_RATIO", "REMOVE_REBUILD_RATIO"):
            monkeypatch.setattr(scoreorder, name, 10**9)
    else:
        monkeypatch.setattr(scoreorder, "FLAT_MAX", 0)
        monkeypatch.setattr(scoreorder, "TRICKLE_ENTRIES", 0)
        monkeypatch.setattr(levels, "MIN_SIDE", 0)
    return request.param


@pytest.mark.parametrize("make", [se.ROCAUC, se.AveragePrecision, se.PRCurve],
                         ids=["ROCAUC", "AveragePrecision", "PRCurve"])
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), na=st.integers(0, 60), nb=st.integers(1, 60),
       mode=st.sampled_from(["unit", "int", "float"]), decimals=st.sampled_from([1, 2, 6]))
def test_score_orders_on_every_removal_path(order_path, make, seed, na, nb, mode, decimals):
    rng = np.random.default_rng(seed)
    n = na + nb
    y = rng.random(n) < 0.4
    s = np.round(rng.random(n), decimals)
    w = _weights(rng, n, mode)
    w = None if w is None else np.asarray(w)
    def feed(lo, hi):
        ww = None if w is None else w[lo:hi]
        m = make()
        if order_path != "blocks":
            return m.update_many(y[lo:hi], s[lo:hi], ww)
        for i in range(lo, hi):  # one by one (fewer than DEFER_AFTER): blocks
            m.update(bool(y[i]), float(s[i]), 1.0 if w is None else float(w[i]))
        assert not m._so.bulk
        return m

    a, b, union = feed(0, na), feed(na, n), feed(0, n)
    union.subtract(b)
    check(union)
    ws = np.ones(na) if w is None else w[:na]
    if make is se.PRCurve:
        assert_same(union, a, 0.0 if mode != "float" else 1e-12)
    else:
        if mode != "float" and order_path != "levels":
            assert_same(union, a)  # the same per-score integers: bit for bit
        auc = make is se.ROCAUC
        if ws[y[:na]].sum() > 0 and (ws[~y[:na]].sum() > 0 or not auc):
            oracle = roc_auc_score if auc else average_precision_score
            assert abs(union.get() - oracle(y[:na], s[:na], sample_weight=ws)) <= 1e-12
        else:  # no positive weight (AUC: or no negative weight): undefined
            assert math.isnan(union.get())
    if mode != "float":
        assert union.to_state() == a.to_state()
    a.merge(b).subtract(b)
    check(a)
    assert_same(a, feed(0, na), 0.0 if mode != "float" and order_path != "levels" else 1e-12)


def test_deferred_events_are_merged_before_subtracting():
    """Events buffered by a metric updated without reads (ranking's deferred events)
    are in the state subtracted, on either side."""
    rng = np.random.default_rng(5)
    y, s = rng.random(400) < 0.5, np.round(rng.random(400), 3)
    a = se.ROCAUC()
    b = se.ROCAUC()
    for yy, ss in zip(y[:200], s[:200]):
        a.update(bool(yy), float(ss))
    for yy, ss in zip(y[200:], s[200:]):
        b.update(bool(yy), float(ss))
        a.update(bool(yy), float(ss))
    assert a._ps and b._ps  # both deferred some
    a.subtract(b)
    check(a)
    assert a.get() == pytest.approx(roc_auc_score(y[:200], s[:200]), abs=1e-12)


def test_exact_sum_subtract_is_the_inverse_of_merge():
    s, t = ExactSum([0.1, 1e16]), ExactSum([0.7, -3e-20])
    total = s.value()
    s.merge(t)
    s.subtract(t)
    assert s.value() == total
    s.subtract(s)
    assert s.value() == 0.0


def test_multiclass_classes_first_seen_in_the_other_part():
    """A class only the subtracted part knew: its events go, the class stays known
    (as after ``revert``); the averages equal a metric fed the rest."""
    for average in ("macro", "weighted", "micro"):
        a = se.ROCAUC(average=average).update_many(
            ["a", "b", "a", "b"], [{"a": .7, "b": .3}, {"a": .2, "b": .8},
                                   {"a": .6, "b": .4}, {"a": .5, "b": .5}])
        b = se.ROCAUC(average=average).update_many(["c", "a"], [{"c": .9}, {"a": .1, "c": .2}])
        union = a.clone().merge(a).merge(b)
        union.subtract(b)
        check(union)
        assert union.classes == ["a", "b", "c"]
        if average == "micro":
            # class c's order keeps a's events as negatives at score 0 (as revert
            # does): the micro order holds them too, so compare with that
            expected = a.clone().merge(a).merge(b)
            expected.revert_many(["c", "a"], [{"c": .9}, {"a": .1, "c": .2}])
            assert union.get() == expected.get()
        else:
            assert union.get() == a.get()
