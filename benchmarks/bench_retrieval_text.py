"""Retrieval and text metrics: events/s of streaming updates against recomputation.

A monitor needs the current value after every event. The peers have no streaming
form, so the peer's way to get it is to recompute over the whole prefix at every
step (cost growing with the stream); they are also timed once over everything (the
floor for a batch answer at the end only, no timeline).

* NDCG@10 over queries of 100 candidates (graded relevance 0..3, scores rounded to
  2 decimals so ties occur): ``NDCG(k=10)`` ``update`` + ``get`` per query, and
  ``update_many`` over all; ``sklearn.metrics.ndcg_score`` recomputed on the prefix at
  every step, and once over all.
* Corpus BLEU over sentences of 30 tokens (one reference): ``BLEU`` ``update`` +
  ``get`` per sentence; ``sacrebleu`` (``tokenize="none"``) ``corpus_score`` on the
  prefix at every step, and once over all.
* ROUGE-L and METEOR are per-sentence means, so their peers' per-sentence calls
  (rouge-score's ``score``, NLTK's ``meteor_score``) are the fair comparison.

Recomputation is timed on the first ``--recompute`` steps only (its cost is
quadratic); its events/s there is an upper bound for longer streams. Every pair's
final values are checked equal (to 1e-12) before the table is printed.

    python benchmarks/bench_retrieval_text.py           # 2000 queries / sentences
    python benchmarks/bench_retrieval_text.py --quick   # a few seconds
"""

from __future__ import annotations

import argparse
import math
import time

import _results as R

import numpy as np

SEED = 20240601
VOCAB_SIZE = 2000


def _time(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def bench_ndcg(n, n_re, rows):
    from sklearn.metrics import ndcg_score

    from streameval import NDCG

    rng = np.random.default_rng(SEED)
    rel = rng.choice([0, 0, 0, 0, 1, 1, 2, 3], size=(n, 100)).astype(float)
    scores = np.round(rel * 0.2 + rng.random((n, 100)), 2)

    def per_event():
        m = NDCG(k=10)
        for i in range(n):
            m.update(rel[i], scores[i])
            m.get()
        return m.get()

    def batch():
        return NDCG(k=10).update_many(rel, scores).get()

    def recompute():
        v = math.nan
        for i in range(n_re):
            v = ndcg_score(rel[: i + 1], scores[: i + 1], k=10)
        return v

    def once():
        return ndcg_score(rel, scores, k=10)

    t_ev, v_ev = _time(per_event)
    t_b, v_b = _time(batch)
    t_re, _ = _time(recompute)
    t_1, v_1 = _time(once)
    assert abs(v_ev - v_1) < 1e-12 and abs(v_b - v_1) < 1e-12, (v_ev, v_b, v_1)
    ours = n / t_ev
    rows += [
        ("NDCG@10, 100 candidates", "streameval update+get per query", n, t_ev, ours),
        ("", "streameval update_many (one batch)", n, t_b, n / t_b),
        ("", f"sklearn ndcg_score on the prefix, every step (first {n_re})", n_re, t_re, n_re / t_re),
        ("", "sklearn ndcg_score once over all (no timeline)", n, t_1, n / t_1),
    ]
    R.figure("ndcg_stream", "`NDCG(k=10)`, value after every query of 100 candidates",
             ours, "queries/s", peer=f"scikit-learn `ndcg_score` on the prefix at every step "
             f"(first {n_re})", peer_value=n_re / t_re)
    return ours / (n_re / t_re)


def _sentences(rng, n, length):
    # Zipf-like word frequencies so that n-grams repeat as in real text
    p = 1.0 / np.arange(1, VOCAB_SIZE + 1)
    p /= p.sum()
    words = np.array([f"w{i}" for i in range(VOCAB_SIZE)])
    return [" ".join(words[rng.choice(VOCAB_SIZE, length, p=p)]) for _ in range(n)]


def bench_text(n, n_re, rows):
    from nltk.translate.meteor_score import meteor_score
    from rouge_score import rouge_scorer, tokenizers
    from sacrebleu.metrics import BLEU as SacreBLEU

    from streameval import BLEU, METEOR, ROUGE

    rng = np.random.default_rng(SEED + 1)
    hyps = _sentences(rng, n, 30)
    # references share about half of their words with the hypothesis, in order
    refs = []
    for h in hyps:
        toks = h.split()
        keep = rng.random(30) < 0.6
        other = _sentences(rng, 1, 30)[0].split()
        refs.append(" ".join(t if k else o for t, k, o in zip(toks, keep, other)))

    def per_event():
        m = BLEU()
        for h, r in zip(hyps, refs):
            m.update(h, [r])
            m.get()
        return m.get()

    sb = SacreBLEU(tokenize="none")

    def recompute():
        v = math.nan
        for i in range(n_re):
            v = sb.corpus_score(hyps[: i + 1], [refs[: i + 1]]).score
        return v

    def once():
        return sb.corpus_score(hyps, [refs]).score / 100.0

    t_ev, v_ev = _time(per_event)
    t_re, _ = _time(recompute)
    t_1, v_1 = _time(once)
    assert abs(v_ev - v_1) < 1e-12, (v_ev, v_1)
    ours = n / t_ev
    rows += [
        ("BLEU, 30-token sentences", "streameval update+get per sentence", n, t_ev, ours),
        ("", f"sacrebleu corpus_score on the prefix, every step (first {n_re})", n_re, t_re,
         n_re / t_re),
        ("", "sacrebleu corpus_score once over all (no timeline)", n, t_1, n / t_1),
    ]
    ratio = ours / (n_re / t_re)

    class Whitespace(tokenizers.Tokenizer):
        def tokenize(self, text):
            return text.split()

    scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=Whitespace())

    def rouge_ours():
        m = ROUGE("rougeL")
        for h, r in zip(hyps, refs):
            m.update(h, [r])
            m.get()
        return m.get()

    def rouge_peer():
        return math.fsum(scorer.score(r, h)["rougeL"].fmeasure for h, r in zip(hyps, refs)) / n

    class NoSynsets:
        def synsets(self, word):
            return []

    wn = NoSynsets()

    def meteor_ours():
        m = METEOR()
        for h, r in zip(hyps, refs):
            m.update(h, [r])
            m.get()
        return m.get()

    def meteor_peer():
        return math.fsum(meteor_score([r.split()], h.split(), wordnet=wn)
                         for h, r in zip(hyps, refs)) / n

    for name, ours_fn, peer_fn, peer in (
        ("ROUGE-L F, 30 tokens", rouge_ours, rouge_peer, "rouge-score score() per sentence"),
        ("METEOR, 30 tokens", meteor_ours, meteor_peer, "nltk meteor_score per sentence"),
    ):
        t_o, v_o = _time(ours_fn)
        t_p, v_p = _time(peer_fn)
        assert abs(v_o - v_p) < 1e-12, (name, v_o, v_p)
        rows += [(name, "streameval update+get per sentence", n, t_o, n / t_o),
                 ("", peer, n, t_p, n / t_p)]
    return ratio


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    ap.add_argument("--events", type=int, default=None, help="queries / sentences (default 2000)")
    ap.add_argument("--recompute", type=int, default=None,
                    help="steps of peer recomputation timed (default 300, quick 100)")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    n = args.events or (300 if args.quick else 2000)
    n_re = min(n, args.recompute or (100 if args.quick else 300))
    res = R.start(__file__, args, parameters={"events_used": n, "recompute_steps": n_re})
    rows = []
    r_ndcg = bench_ndcg(n, n_re, rows)
    r_bleu = bench_text(n, n_re, rows)
    w = max(len(r[1]) for r in rows)
    print(f"{'metric':<26} {'method':<{w}} {'events':>7} {'seconds':>9} {'events/s':>10}")
    tab = R.table("streaming", "Streaming updates against recomputation and the peers' "
                  "per-sentence calls", ["metric", "method", "events", "seconds", "events/s"],
                  note=f"recomputation timed on the first {n_re} steps (its cost grows with "
                       "the stream)")
    for metric, method, ev, sec, rate in rows:
        print(f"{metric:<26} {method:<{w}} {ev:>7} {sec:>9.3f} {rate:>10,.0f}")
        tab.add(metric, method, ev, sec, rate)
    print()
    print(f"streaming vs recompute-every-step (at {n_re} steps; grows with the stream): "
          f"NDCG@10 x{r_ndcg:,.0f}, BLEU x{r_bleu:,.0f}")
    R.table("speedup", f"Streaming against recomputing at every step (at {n_re} steps)",
            ["metric", "speed-up (x)"]).add("NDCG@10", r_ndcg).add("BLEU", r_bleu)
    res.write(args.json)


if __name__ == "__main__":
    main()
