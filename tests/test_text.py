"""Text metrics against their reference implementations.

Oracles: sacrebleu's corpus BLEU (``tokenize="none"``) for ``ref_length="closest"``;
TensorFlow NMT's ``compute_bleu`` (reimplemented below from
nmt/scripts/bleu.py, since it is not on PyPI) for ``ref_length="shortest"``;
Google's ``rouge-score`` on the same tokens; NLTK's ``meteor_score`` with a WordNet
that has no synsets.
"""

from __future__ import annotations

import collections
import json
import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.translate.meteor_score import meteor_score
from rouge_score import rouge_scorer, tokenizers
from sacrebleu.metrics import BLEU as SacreBLEU

import streameval
from streameval.metrics.base import Metric
from streameval.validation import ValidationError, take_columns
from streameval.metrics.text import BLEU, METEOR, ROUGE, _lcs_length


# ------------------------------------------------------------------ oracles


def tf_compute_bleu(reference_corpus, translation_corpus, max_order=4, smooth=False):
    """TensorFlow NMT's compute_bleu (nmt/scripts/bleu.py), as published."""

    def _get_ngrams(segment, max_order):
        ngram_counts = collections.Counter()
        for order in range(1, max_order + 1):
            for i in range(0, len(segment) - order + 1):
                ngram = tuple(segment[i:i + order])
                ngram_counts[ngram] += 1
        return ngram_counts

    matches_by_order = [0] * max_order
    possible_matches_by_order = [0] * max_order
    reference_length = 0
    translation_length = 0
    for (references, translation) in zip(reference_corpus, translation_corpus):
        reference_length += min(len(r) for r in references)
        translation_length += len(translation)
        merged_ref_ngram_counts = collections.Counter()
        for reference in references:
            merged_ref_ngram_counts |= _get_ngrams(reference, max_order)
        translation_ngram_counts = _get_ngrams(translation, max_order)
        overlap = translation_ngram_counts & merged_ref_ngram_counts
        for ngram in overlap:
            matches_by_order[len(ngram) - 1] += overlap[ngram]
        for order in range(1, max_order + 1):
            possible_matches = len(translation) - order + 1
            if possible_matches > 0:
                possible_matches_by_order[order - 1] += possible_matches
    precisions = [0] * max_order
    for i in range(0, max_order):
        if smooth:
            precisions[i] = (matches_by_order[i] + 1.0) / (possible_matches_by_order[i] + 1.0)
        else:
            if possible_matches_by_order[i] > 0:
                precisions[i] = float(matches_by_order[i]) / possible_matches_by_order[i]
            else:
                precisions[i] = 0.0
    if min(precisions) > 0:
        p_log_sum = sum((1.0 / max_order) * math.log(p) for p in precisions)
        geo_mean = math.exp(p_log_sum)
    else:
        geo_mean = 0
    ratio = float(translation_length) / reference_length
    if ratio > 1.0:
        bp = 1.0
    else:
        bp = math.exp(1 - 1.0 / ratio)
    return geo_mean * bp


def sacre(hyps, refs, **kw):
    """sacrebleu corpus BLEU / 100 over string hypotheses and per-event reference lists."""
    width = max(len(r) for r in refs)
    streams = [[r[i] if i < len(r) else None for r in refs] for i in range(width)]
    return SacreBLEU(tokenize="none", **kw).corpus_score(hyps, streams).score / 100.0


class Whitespace(tokenizers.Tokenizer):
    def tokenize(self, text):
        return text.split()


class NoSynsets:
    """A WordNet without synsets: NLTK's METEOR then matches exact words and stems."""

    def synsets(self, word):
        return []


class Identity:
    def stem(self, word):
        return word


def rouge_oracle(rouge_type, hyp, refs):
    scorer = rouge_scorer.RougeScorer([rouge_type], tokenizer=Whitespace())
    return scorer.score_multi(refs, hyp)[rouge_type]


def meteor_oracle(hyp, refs, stem=True, **kw):
    extra = {} if stem else {"stemmer": Identity()}
    return meteor_score([r.split() for r in refs], hyp.split(), wordnet=NoSynsets(), **extra, **kw)


def close(a, b, tol=1e-12):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(b))


# --------------------------------------------------------------- strategies

VOCAB = ["the", "a", "cat", "cats", "dog", "dogs", "sat", "sits", "sitting", "on", "mat",
         "running", "runs", "run", "quickly", "quick", "The", "Cat"]
sentence = st.lists(st.sampled_from(VOCAB), max_size=14).map(" ".join)
event = st.tuples(sentence, st.lists(sentence, min_size=1, max_size=3),
                  st.sampled_from([1, 1, 1, 2, 3]))

REAL = [
    ("It is a guide to action which ensures that the military always obeys the commands of the party .",
     ["It is a guide to action that ensures that the military will forever heed Party commands .",
      "It is the guiding principle which guarantees the military forces always being under the command of the Party .",
      "It is the practical guide for the army always to heed the directions of the party ."]),
    ("It is to insure the troops forever hearing the activity guidebook that party direct .",
     ["It is a guide to action that ensures that the military will forever heed Party commands .",
      "It is the guiding principle which guarantees the military forces always being under the command of the Party ."]),
    ("he read the book because he was interested in world history",
     ["he was interested in world history because he read the book"]),
    ("The dog bit the man .", ["The dog bit the man .", "The dog had bit the man ."]),
    ("It was not unexpected .", ["No one was surprised .", "It wasn't surprising at all ."]),
    ("The man bit him first .", ["The man had bitten the dog .", "The man had just bitten him ."]),
    ("", ["an empty hypothesis is legal"]),
]


# ---------------------------------------------------------------------- BLEU


def test_bleu_equals_sacrebleu_on_real_sentences_after_every_update():
    for kw in ({}, {"smooth_method": "none"}, {"smooth_method": "floor", "smooth_value": 0.2},
               {"smooth_method": "add-k"}, {"effective_order": True}, {"lowercase": True}):
        bleu = BLEU(**kw)
        for i, (hyp, refs) in enumerate(REAL):
            bleu.update(hyp, refs)
            bleu._check()
            expect = sacre([h for h, _ in REAL[: i + 1]], [r for _, r in REAL[: i + 1]], **kw)
            assert close(bleu.get(), expect), (kw, i, bleu.get(), expect)


@settings(max_examples=80, deadline=None)
@given(events=st.lists(event, min_size=1, max_size=8),
       kw=st.sampled_from([{}, {"smooth_method": "none"}, {"smooth_method": "floor"},
                           {"smooth_method": "add-k", "smooth_value": 2},
                           {"effective_order": True}, {"max_ngram_order": 2},
                           {"smooth_method": "none", "effective_order": True}]))
def test_bleu_prefix_equals_sacrebleu(events, kw):
    bleu = BLEU(**kw)
    for i, (hyp, refs, w) in enumerate(events):
        bleu.update(hyp, refs, w=w)
        prefix = events[: i + 1]
        hyps = [h for h, _, w in prefix for _ in range(w)]
        refs_ = [r for _, r, w in prefix for _ in range(w)]
        assert close(bleu.get(), sacre(hyps, refs_, **kw))


@settings(max_examples=60, deadline=None)
@given(events=st.lists(st.tuples(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=14),
                                 st.lists(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=14),
                                          min_size=1, max_size=3)),
                       min_size=1, max_size=8))
def test_bleu_shortest_equals_tensorflow_nmt_compute_bleu(events):
    bleu = BLEU(ref_length="shortest", smooth_method="none")
    for i, (hyp, refs) in enumerate(events):
        bleu.update(hyp, [list(r) for r in refs])  # token lists
        expect = tf_compute_bleu([r for _, r in events[: i + 1]], [h for h, _ in events[: i + 1]])
        assert close(bleu.get(), expect)


def test_bleu_details_and_edge_cases():
    assert math.isnan(BLEU().get())
    assert BLEU().update("", ["a b c"]).get() == sacre([""], [["a b c"]]) == 0.0
    assert BLEU().update("a b c", [""]).get() == sacre(["a b c"], [[""]])
    d = BLEU().update("the cat sat", ["the cat sat down"]).details()
    assert d["matches"] == [3, 2, 1, 0] and d["totals"] == [3, 2, 1, 0]
    assert (d["hyp_len"], d["ref_len"]) == (3, 4)
    assert abs(d["bp"] - math.exp(1 - 4 / 3)) < 1e-15
    # closest reference length: ties go to the shorter one (sacrebleu)
    assert BLEU().update("a b c d", ["a b c", "a b c d e"]).details()["ref_len"] == 3
    assert BLEU(ref_length="shortest").update("a b", ["a b c", "a b c d e"]).details()["ref_len"] == 3


# --------------------------------------------------------------------- ROUGE


@pytest.mark.parametrize("rouge_type", ["rouge1", "rouge2", "rouge3", "rougeL"])
def test_rouge_equals_rouge_score_on_real_sentences(rouge_type):
    metrics = {m: ROUGE(rouge_type, measure=m) for m in ("precision", "recall", "fmeasure")}
    seen = []
    for hyp, refs in REAL:
        expect = rouge_oracle(rouge_type, hyp, refs)
        seen.append(expect)
        for m, metric in metrics.items():
            metric.update(hyp, refs)
            assert close(metric.get(), math.fsum(getattr(s, m) for s in seen) / len(seen))
    all_ = metrics["fmeasure"].get_all()
    assert close(all_["recall"], metrics["recall"].get())


@settings(max_examples=80, deadline=None)
@given(events=st.lists(event, min_size=1, max_size=6),
       rouge_type=st.sampled_from(["rouge1", "rouge2", "rougeL"]),
       measure=st.sampled_from(["precision", "recall", "fmeasure"]))
def test_rouge_prefix_equals_rouge_score_mean(events, rouge_type, measure):
    metric = ROUGE(rouge_type, measure=measure)
    num, den = [], []
    for hyp, refs, w in events:
        metric.update(hyp, refs, w=w)
        num.append(w * getattr(rouge_oracle(rouge_type, hyp, refs), measure))
        den.append(w)
        assert close(metric.get(), math.fsum(num) / math.fsum(den))


def test_rouge_reference_ties_on_f_take_the_first_like_rouge_score():
    # both references give F = 1/2: (P, R) = (1/2, 1/2) and (1, 1/3)
    for refs in (["a c", "a b x y z w"], ["a b x y z w", "a c"]):
        expect = rouge_oracle("rouge1", "a b", refs)
        got = ROUGE("rouge1").update("a b", refs).get_all()
        assert (got["precision"], got["recall"]) == (expect.precision, expect.recall)
    assert ROUGE(measure="precision").update("a b", ["a c", "a b x y z w"]).get() == 0.5


def test_rouge_stemming_equals_rouge_score_default_tokenizer():
    # lowercase alphanumeric tokens: rouge-score's own tokenizer gives the same tokens
    pairs = [("the cats were running quickly", ["a cat runs quick", "the cat is running"]),
             ("generalization of abilities", ["generalize the ability"]),
             ("running dogs sitting", ["run dog sits"])]
    for rouge_type in ("rouge1", "rouge2", "rougeL"):
        scorer = rouge_scorer.RougeScorer([rouge_type], use_stemmer=True)
        metric = ROUGE(rouge_type, stem=True)
        expect = []
        for hyp, refs in pairs:
            metric.update(hyp, refs)
            expect.append(scorer.score_multi(refs, hyp)[rouge_type].fmeasure)
        assert close(metric.get(), math.fsum(expect) / len(expect))
        assert metric.get() > ROUGE(rouge_type).update_many(
            [p[0] for p in pairs], [p[1] for p in pairs]).get()


@settings(max_examples=100, deadline=None)
@given(a=st.lists(st.sampled_from("abcde"), max_size=40), b=st.lists(st.sampled_from("abcde"), max_size=40))
def test_bit_parallel_lcs_equals_dynamic_programming(a, b):
    table = rouge_scorer._lcs_table(a, b)
    assert _lcs_length(a, b) == table[-1][-1]


# -------------------------------------------------------------------- METEOR


def test_meteor_equals_nltk_on_real_sentences():
    for kw in ({}, {"alpha": 0.8, "beta": 2.0, "gamma": 0.3}, {"alpha": 1.0, "gamma": 0.0}):
        metric = METEOR(**kw)
        seen = []
        for hyp, refs in REAL:
            metric.update(hyp, refs)
            seen.append(meteor_oracle(hyp, refs, **kw))
            assert close(metric.get(), math.fsum(seen) / len(seen))
    # the NLTK docstring's example
    hyp = ("It is a guide to action which ensures that the military always obeys "
           "the commands of the party")
    ref = "It is a guide to action that ensures that the military will forever heed Party commands"
    assert round(METEOR().update(hyp, [ref]).get(), 4) == 0.6944


@settings(max_examples=80, deadline=None)
@given(events=st.lists(event, min_size=1, max_size=6), stem=st.booleans(),
       lowercase=st.booleans())
def test_meteor_prefix_equals_nltk_mean(events, stem, lowercase):
    metric = METEOR(stem=stem, lowercase=lowercase)
    kw = {} if lowercase else {"preprocess": lambda s: s}
    num, den = [], []
    for hyp, refs, w in events:
        metric.update(hyp, refs, w=w)
        num.append(w * meteor_oracle(hyp, refs, stem=stem, **kw))
        den.append(w)
        assert close(metric.get(), math.fsum(num) / math.fsum(den))


# ------------------------------------------------- protocol: revert, merge, state

builders = st.sampled_from([
    lambda: BLEU(), lambda: BLEU(smooth_method="none", ref_length="shortest"),
    lambda: ROUGE("rouge2", measure="recall"), lambda: ROUGE("rougeL"),
    lambda: METEOR(), lambda: METEOR(stem=False, alpha=0.5),
])


@settings(max_examples=100, deadline=None)
@given(make=builders, events=st.lists(event, max_size=8), data=st.data())
def test_revert_merge_update_many_and_state_are_exact(make, events, data):
    loop = make()
    for hyp, refs, w in events:
        loop.update(hyp, refs, w=w)
    loop._check()
    # revert a subset: equal to never having added it, bit for bit
    drop = data.draw(st.sets(st.integers(0, max(len(events) - 1, 0)))) if events else set()
    reverted = make()
    for hyp, refs, w in events:
        reverted.update(hyp, refs, w=w)
    for i in sorted(drop):
        reverted.revert(*events[i][:2], w=events[i][2])
        reverted._check()
    fresh = make()
    for i, (hyp, refs, w) in enumerate(events):
        if i not in drop:
            fresh.update(hyp, refs, w=w)
    # merge of two halves, and one batch
    cut = data.draw(st.integers(0, len(events)))
    left, right = make(), make()
    for hyp, refs, w in events[:cut]:
        left.update(hyp, refs, w=w)
    for hyp, refs, w in events[cut:]:
        right.update(hyp, refs, w=w)
    batch = make().update_many([e[0] for e in events], [e[1] for e in events],
                               [e[2] for e in events])
    back = streameval.from_state(json.loads(json.dumps(loop.to_state())))
    assert type(back) is type(loop) and back._params() == loop._params()
    for a, b in ((reverted, fresh), (left.merge(right), loop), (batch, loop), (back, loop)):
        x, y = a.get(), b.get()
        assert (math.isnan(x) and math.isnan(y)) or x == y
        if isinstance(a, BLEU):  # integer statistics: the very same state
            assert a.to_state()["data"] == b.to_state()["data"]
        else:
            assert a.n == b.n


def test_sliding_window_by_revert_equals_recomputation():
    rng = np.random.default_rng(11)
    events = [(" ".join(rng.choice(VOCAB, rng.integers(3, 12))),
               [" ".join(rng.choice(VOCAB, rng.integers(3, 12)))]) for _ in range(60)]
    size = 10
    bleu, meteor = BLEU(), METEOR()
    for i, (hyp, refs) in enumerate(events):
        bleu.update(hyp, refs)
        meteor.update(hyp, refs)
        if i >= size:
            bleu.revert(*events[i - size])
            meteor.revert(*events[i - size])
        window = events[max(0, i - size + 1): i + 1]
        assert close(bleu.get(), sacre([h for h, _ in window], [r for _, r in window]))
        assert close(meteor.get(), math.fsum(meteor_oracle(h, r) for h, r in window) / len(window))


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("make", [BLEU, ROUGE, METEOR])
def test_bad_input_raises_and_changes_nothing(make):
    metric = make().update("the cat sat", ["the cat sat down"])
    before = json.dumps(metric.to_state())
    cases = [
        (("the cat", []), r"references = \[\]: at least one reference"),
        ((None, ["the cat"]), "hypothesis = None"),
        ((["the", 3], ["the cat"]), r"hypothesis\[1\] = 3: a token must be a string"),
        (("the cat", [["the", None]]), r"references\[0\]\[1\] = None"),
        (("the cat", None), "references = None"),
        (("the cat", ["a", 5]), r"references\[1\] = 5"),
    ]
    for args, msg in cases:
        with pytest.raises(ValueError, match=msg):
            metric.update(*args)
        with pytest.raises(ValueError, match=msg):
            metric.revert(*args)
    with pytest.raises(ValueError, match="w = -1"):
        metric.update("a", ["a"], w=-1)
    with pytest.raises(ValueError, match=r"event 2: references = \[\]"):
        metric.update_many(["a", "b", "c"], [["a"], ["b"], []])
    with pytest.raises(ValueError, match="hypotheses has 2 elements but references has 1"):
        metric.update_many(["a", "b"], [["a"]])
    with pytest.raises(ValueError, match="w = 2.0"):  # not a TypeError from len()
        metric.update_many(["a"], [["a"]], 2.0)
    assert json.dumps(metric.to_state()) == before


def test_bad_parameters_and_weights():
    with pytest.raises(ValueError, match="w = 0.5: BLEU weights must be whole numbers"):
        BLEU().update("a", ["a"], w=0.5)
    with pytest.raises(ValueError, match="smooth_method = 'lin'"):
        BLEU(smooth_method="lin")
    with pytest.raises(ValueError, match="ref_length = 'longest'"):
        BLEU(ref_length="longest")
    with pytest.raises(ValueError, match="rouge_type = 'rougeLsum'"):
        ROUGE("rougeLsum")
    with pytest.raises(ValueError, match="alpha = 1.5"):
        METEOR(alpha=1.5)
    with pytest.raises(ValueError, match="more reverts than updates"):
        BLEU().revert("a", ["a"])
    with pytest.raises(ValueError, match="more reverts than updates"):
        METEOR().revert("a", ["a"])
    with pytest.raises(ValueError, match="cannot merge"):
        BLEU().merge(BLEU(max_ngram_order=2))


def test_missing_stemmer_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nltk.stem.porter", None)
    with pytest.raises(ImportError, match=r"streameval\[text\]"):
        METEOR()
    with pytest.raises(ImportError, match="stem=False"):
        ROUGE(stem=True)
    assert METEOR(stem=False).update("a b", ["a b"]).get() > 0.9  # no stemmer needed


@pytest.mark.parametrize("make", [BLEU, ROUGE, METEOR])
def test_bad_state_is_refused_with_a_value_error(make):
    good = make().update("the cat sat", ["the cat sat down"]).to_state()
    key = "stats" if make is BLEU else "sums"
    bad_datas = [{}, {**good["data"], "n": "x"}, {**good["data"], "n": -1},
                 {**good["data"], key: None}]
    if make is BLEU:
        bad_datas.append({**good["data"], "stats": [-1] * len(good["data"]["stats"])})
    else:
        bad_datas.append({**good["data"], "wsum": [float("inf")]})
    for data in bad_datas:
        with pytest.raises(ValueError, match=f"bad {make.__name__} state"):
            streameval.from_state({**good, "data": data})
    again = streameval.from_state(json.loads(json.dumps(good)))
    assert again.get() == make().update("the cat sat", ["the cat sat down"]).get()


# ------------------------------------------------------------ the trusted path


@settings(max_examples=40, deadline=None)
@given(events=st.lists(event, max_size=8), make=st.sampled_from([BLEU, ROUGE, METEOR]),
       data=st.data())
def test_validate_then_trusted_equals_update_many_and_the_loop(events, make, data):
    """update_trusted(*validate(...)) == update_many == a loop of update (and the
    oracles); a subset taken from the validated columns reverts exactly; one event too
    many is refused at the index a loop of revert refuses, nothing changed."""
    hyps, refs, ws = ([e[i] for e in events] for i in range(3))
    trusted, many, loop = make(), make(), make()
    cols = trusted.validate(hyps, refs, ws)
    assert trusted.update_trusted(*cols) is trusted
    many.update_many(hyps, refs, ws)
    for h, r, w in events:
        loop.update(h, r, w)
    for m in (trusted, many):
        assert close(m.get(), loop.get()) or (math.isnan(m.get()) and math.isnan(loop.get()))
    if make is BLEU and events:
        assert close(trusted.get(), sacre([h for h, _, w in events for _ in range(w)],
                                          [r for _, r, w in events for _ in range(w)]))
    drop = sorted(data.draw(st.sets(st.integers(0, max(len(events) - 1, 0)))) if events else [])
    trusted.revert_trusted(*take_columns(cols, np.array(drop, dtype=np.int64)))
    trusted._check()
    rest = make()
    for i, (h, r, w) in enumerate(events):
        if i not in drop:
            rest.update(h, r, w)
    assert close(trusted.get(), rest.get()) or (math.isnan(trusted.get()) and math.isnan(rest.get()))
    state = trusted.to_state()
    try:
        Metric.revert_trusted(rest, hyps, refs, ws)
        expected = None
    except ValueError as e:
        expected = e.index
    try:
        trusted.revert_trusted(*cols)
        got = None
    except ValidationError as e:
        got = e.index
        assert "more reverts than updates" in str(e) and trusted.to_state() == state
    assert got == expected


def test_validation_errors_carry_the_event_index():
    m = ROUGE()
    with pytest.raises(ValidationError) as e:
        m.update_many(["a", "b", "c"], [["a"], ["b"], []])
    assert e.value.index == 2 and str(e.value).startswith("event 2: references = []")
    with pytest.raises(ValidationError, match="max_ngram_order = 0: must be an integer >= 1"):
        BLEU(max_ngram_order=0)
    with pytest.raises(ValidationError, match="lowercase = 1: must be one of True, False"):
        ROUGE(lowercase=1)
    with pytest.raises(ValidationError, match="gamma = -0.5: must be a number in"):
        METEOR(gamma=-0.5)
