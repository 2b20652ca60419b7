"""Text-generation metrics, one event per (hypothesis, references).

Tokenisation: a string is split on white space (``str.split()``); a list or tuple of
strings is taken as the tokens. ``references`` is a list of references (each a
string or a token list), or a single string for a single reference; so a tokenised
single reference is ``[["the", "cat"]]`` (``["the", "cat"]`` is two references).
An empty hypothesis or reference is legal and scores as the oracles score it;
``references=[]``, ``None`` and non-string tokens raise ``ValueError``.

- :class:`BLEU` is corpus BLEU: it keeps the corpus's sufficient statistics (clipped
  n-gram matches and n-gram totals for n = 1..4, hypothesis and reference lengths) as
  integers, so after N events it equals corpus BLEU over those N sentences, exactly
  under ``revert``.
- :class:`ROUGE` and :class:`METEOR` are sentence-level scores averaged over events
  (weighted by ``w``): the mean rouge-score / NLTK would report sentence by sentence
  (rouge-score's ``BootstrapAggregator`` mid without the bootstrap).

Porter stemming (METEOR's stem stage, ``ROUGE(stem=True)``) uses NLTK's
``PorterStemmer``, the one both oracles use: the optional extra
``pip install 'streameval[text]'``. Everything else needs no extra package.

Batches: ``update_many`` is ``validate`` (which tokenises and scores every event, and
returns the columns ``(per-event statistics, None, weights)``) then ``update_trusted``
(which only adds them); ``revert_many`` is ``validate`` then ``revert_trusted``. A
window validates a batch once and adds or removes its statistics without scoring again.

Imports: numpy, :mod:`streameval.validation`, :mod:`streameval.metrics.base` and
:class:`streameval.metrics.retrieval.ExactSum` (exact running sums).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np

from streameval.metrics.base import Metric
from streameval.metrics.retrieval import ExactSum
from streameval.validation import Integer, Options, Real, ValidationError, check_param, check_weight

__all__ = ["BLEU", "ROUGE", "METEOR"]


# ------------------------------------------------------------------ tokens


def _tokens(x, name, lower):
    if isinstance(x, str):
        toks = x.split()
    elif isinstance(x, (list, tuple)):
        for i, t in enumerate(x):
            if not isinstance(t, str):
                raise ValueError(f"{name}[{i}] = {t!r}: a token must be a string")
        toks = list(x)
    else:
        raise ValueError(f"{name} = {x!r:.80}: must be a string (split on white space) "
                         "or a list of string tokens")
    if lower:
        toks = [t.lower() for t in toks]
    return toks


def _references(refs, lower):
    if isinstance(refs, str):
        return [_tokens(refs, "references", lower)]
    if not isinstance(refs, (list, tuple)):
        raise ValueError(f"references = {refs!r:.80}: must be a list of references "
                         "(strings or token lists) or one string")
    if not refs:
        raise ValueError("references = []: at least one reference is needed")
    return [_tokens(r, f"references[{i}]", lower) for i, r in enumerate(refs)]


def _porter():
    try:
        from nltk.stem.porter import PorterStemmer
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Porter stemming (METEOR's stem stage, ROUGE(stem=True)) uses NLTK's "
            "PorterStemmer: pip install 'streameval[text]' (or nltk), or pass stem=False"
        ) from None
    return PorterStemmer()


class _Stems:
    """NLTK's Porter stemmer with a bounded memo (stemming is the slow part)."""

    MAX_CACHE = 200_000  # distinct words kept; cleared when full

    def __init__(self):
        self._stem = _porter().stem
        self._cache = {}

    def __call__(self, word):
        c = self._cache
        s = c.get(word)
        if s is None:
            if len(c) >= self.MAX_CACHE:
                c.clear()
            s = c[word] = self._stem(word)
        return s


def _check_batch(hypotheses, references, w):
    for name, v in (("hypotheses", hypotheses), ("references", references), ("w", w)):
        if v is not None and (isinstance(v, (str, bytes, dict)) or not hasattr(v, "__len__")):
            what = "weight" if name == "w" else "item"
            reason = f"must be a sequence with one {what} per event"
            raise ValidationError(name, v, reason, message=f"{name} = {v!r:.80}: {reason}")
    n = len(hypotheses)
    for name, v in (("references", references), ("w", w)):
        if v is not None and len(v) != n:
            raise ValidationError(name, len(v), "lengths differ",
                                  message=f"hypotheses has {n} elements but {name} has {len(v)}")
    return n


_BOOL = Options(True, False)


class _TextMetric(Metric):
    _abstract = True
    #: ``validate`` returns (per-event statistics, None, weights): the scored events
    columns = None

    @property
    def bigger_is_better(self):
        return True

    def _event(self, hypothesis, references):
        raise NotImplementedError

    def validate(self, hypotheses, references, w=None):
        """Check and score a whole batch without changing anything; return its columns
        ``(statistics, None, weights)``, one entry per event, for
        :meth:`update_trusted` and :meth:`revert_trusted`. A bad event raises
        :class:`~streameval.validation.ValidationError` with its ``index``
        (``"event <i>: ..."``). Runtime complexity: as many ``update`` calls (text is
        tokenised and scored sentence by sentence)."""
        n = _check_batch(hypotheses, references, w)
        out, ws = [], []
        for i in range(n):
            try:
                out.append(self._event(hypotheses[i], references[i]))
                ws.append(self._weight(1.0 if w is None else w[i]))
            except ValueError as e:
                raise ValidationError.at(i, str(e)) from None
        return out, None, ws

    def _weight(self, w):
        return check_weight(w)


# -------------------------------------------------------------------- BLEU

_SMOOTH_DEFAULTS = {"none": None, "floor": 0.1, "add-k": 1, "exp": None}


class BLEU(_TextMetric):
    """Corpus BLEU over the events so far, from streaming sufficient statistics.

    ``BLEU = BP * exp(sum_n log p_n / N)`` with ``p_n`` the clipped n-gram precision
    over the corpus (matches clipped by the highest count in any one reference) and
    ``BP = exp(1 - r/c)`` when the hypotheses' total length ``c`` is below the
    references' ``r`` (else 1). ``r`` sums, per sentence, the reference length
    closest to the hypothesis's (ties: the shorter; sacrebleu's) or the shortest one
    (``ref_length="shortest"``, the classic ``compute_bleu`` of TensorFlow NMT).
    Smoothing as sacrebleu's: ``"none"``, ``"floor"`` (zero counts become
    ``smooth_value``, 0.1), ``"add-k"`` (``k`` added to counts and totals for n > 1),
    ``"exp"`` (NIST: the i-th zero precision becomes ``1 / (2**i * total)``).
    The value is in [0, 1]: sacrebleu's score divided by 100 (with
    ``tokenize="none"``; tokens are ours, see the module doc). ``w`` must be a whole
    number (a repeat count), since corpus BLEU adds integer counts.

    Runtime complexity: `update` `O(N (h + r))` for a hypothesis of ``h`` and
    references of ``r`` tokens in all, `get` `O(N)`.

    >>> from streameval import BLEU
    >>> bleu = BLEU()
    >>> round(bleu.update("the cat sat on the mat", ["the cat sat on a mat"]).get(), 6)
    0.537285
    >>> round(bleu.update("a dog", ["a dog barked"]).get(), 6)
    0.492782

    Parameters
    ----------
    max_ngram_order : int, default 4
    smooth_method : {"exp", "none", "floor", "add-k"}, default "exp"
    smooth_value : float or None, default None (0.1 for floor, 1 for add-k)
    ref_length : {"closest", "shortest"}, default "closest"
    effective_order : bool, default False
        Leave out the orders with no n-gram at all (sacrebleu's option).
    lowercase : bool, default False
    """

    def __init__(self, max_ngram_order=4, smooth_method="exp", smooth_value=None,
                 ref_length="closest", effective_order=False, lowercase=False):
        max_ngram_order = check_param("max_ngram_order", max_ngram_order, Integer(1))
        check_param("smooth_method", smooth_method, Options(*_SMOOTH_DEFAULTS))
        check_param("smooth_value", smooth_value, Real(0, allow_none=True))
        check_param("ref_length", ref_length, Options("closest", "shortest"))
        check_param("effective_order", effective_order, _BOOL)
        check_param("lowercase", lowercase, _BOOL)
        self.max_ngram_order = max_ngram_order
        self.smooth_method = smooth_method
        self.smooth_value = smooth_value
        self.ref_length = ref_length
        self.effective_order = effective_order
        self.lowercase = lowercase
        self._n = 0
        # [hyp_len, ref_len, matches_1..N, totals_1..N]
        self._stats = [0] * (2 + 2 * max_ngram_order)

    # -- one event --------------------------------------------------------------
    def _weight(self, w):
        w = check_weight(w)
        if not w.is_integer():
            raise ValueError(f"w = {w!r}: BLEU weights must be whole numbers (a repeat "
                             "count), since corpus BLEU adds integer n-gram counts")
        return int(w)

    def _event(self, hypothesis, references):
        lower = self.lowercase
        hyp = _tokens(hypothesis, "hypothesis", lower)
        refs = _references(references, lower)
        order = self.max_ngram_order
        h = len(hyp)
        if self.ref_length == "closest":
            # sacrebleu: the closest length, the shorter one on a tie
            r = min((abs(h - len(x)), len(x)) for x in refs)[1]
        else:
            r = min(len(x) for x in refs)
        matches = [0] * order
        totals = [0] * order
        for n in range(1, order + 1):
            if h < n:
                break
            hc = Counter(hyp) if n == 1 else Counter(zip(*[hyp[i:] for i in range(n)]))
            rc = None
            for x in refs:
                c = Counter(x) if n == 1 else Counter(zip(*[x[i:] for i in range(n)]))
                if rc is None:
                    rc = c
                else:
                    for g, v in c.items():
                        if v > rc[g]:
                            rc[g] = v
            get = rc.get
            m = 0
            for g, v in hc.items():
                rv = get(g)
                if rv:
                    m += v if v < rv else rv
            matches[n - 1] = m
            totals[n - 1] = h - n + 1
        return [h, r, *matches, *totals]

    def _add(self, stats, m):
        s = self._stats
        for i, v in enumerate(stats):
            s[i] += m * v

    def update(self, hypothesis, references, w=1.0):
        """Add one sentence: its hypothesis and its references."""
        m = self._weight(w)
        stats = self._event(hypothesis, references)
        self._add(stats, m)
        self._n += m
        return self

    def revert(self, hypothesis, references, w=1.0):
        """Remove a sentence added earlier with the same arguments (exact inverse)."""
        m = self._weight(w)
        stats = self._event(hypothesis, references)
        if self._n < m or any(s < m * v for s, v in zip(self._stats, stats)):
            raise ValueError("revert: this sentence was not added (more reverts than updates)")
        self._add(stats, -m)
        self._n -= m
        return self

    def update_trusted(self, events, _=None, w=None):
        """Add the columns of :meth:`validate` (per-event statistics and repeat counts),
        unchecked: same result as a loop of ``update``. Runtime complexity: `O(N)` per
        event for ``max_ngram_order`` N."""
        for i, stats in enumerate(events):
            m = 1 if w is None else w[i]
            self._add(stats, m)
            self._n += m
        return self

    def revert_trusted(self, events, _=None, w=None):
        """Remove the columns of :meth:`validate`, added earlier: same result as a loop
        of ``revert``; an event beyond the stored counts raises
        :class:`~streameval.validation.ValidationError` with the ``index`` a loop of
        ``revert`` would refuse, nothing changed."""
        left = list(self._stats)
        n = self._n
        for i, stats in enumerate(events):
            m = 1 if w is None else w[i]
            if n < m or any(s < m * v for s, v in zip(left, stats)):
                raise ValidationError.at(
                    i, "revert: this sentence was not added (more reverts than updates)")
            n -= m
            left = [s - m * v for s, v in zip(left, stats)]
        self._stats, self._n = left, n
        return self

    # -- value ------------------------------------------------------------------
    def _score(self):
        """(score in [0, 100], precisions, brevity penalty), sacrebleu's arithmetic."""
        order = self.max_ngram_order
        sys_len, ref_len = self._stats[0], self._stats[1]
        correct = list(self._stats[2:2 + order])
        total = list(self._stats[2 + order:])
        method = self.smooth_method
        value = self.smooth_value
        if value is None:
            value = _SMOOTH_DEFAULTS[method]
        bp = 1.0
        if sys_len < ref_len:
            bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
        precisions = [0.0] * order
        if not any(correct):
            return 0.0, precisions, bp
        smooth_mteval = 1.0
        eff_order = order
        for n in range(1, order + 1):
            if method == "add-k" and n > 1:
                correct[n - 1] += value
                total[n - 1] += value
            if total[n - 1] == 0:
                break
            if self.effective_order:
                eff_order = n
            if correct[n - 1] == 0:
                if method == "exp":
                    smooth_mteval *= 2
                    precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1])
                elif method == "floor":
                    precisions[n - 1] = 100.0 * value / total[n - 1]
            else:
                precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1]
        if min(precisions[:eff_order]) == 0.0:
            return 0.0, precisions, bp
        score = bp * math.exp(sum(math.log(p) for p in precisions[:eff_order]) / eff_order)
        return score, precisions, bp

    def get(self):
        """Corpus BLEU in [0, 1]; ``nan`` before any sentence.

        Runtime complexity: `O(N)` for ``max_ngram_order`` N.
        """
        if not self._n:
            return math.nan
        return self._score()[0] / 100.0

    def details(self):
        """The statistics behind the value: n-gram precisions (in [0, 1]), brevity
        penalty, hypothesis and reference lengths, matches and totals per order."""
        score, precisions, bp = self._score()
        order = self.max_ngram_order
        return {
            "bleu": self.get(),
            "precisions": [p / 100.0 for p in precisions],
            "bp": bp,
            "hyp_len": self._stats[0],
            "ref_len": self._stats[1],
            "matches": self._stats[2:2 + order],
            "totals": self._stats[2 + order:],
        }

    # -- state ------------------------------------------------------------------
    def _get_data(self):
        return {"n": self._n, "stats": list(self._stats)}

    def _set_data(self, data):
        try:
            stats = [int(v) for v in data["stats"]]
            n = int(data["n"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"bad BLEU state: {e!r}") from None
        if len(stats) != 2 + 2 * self.max_ngram_order:
            raise ValueError(f"bad BLEU state: {len(stats)} statistics; "
                             f"max_ngram_order={self.max_ngram_order} needs "
                             f"{2 + 2 * self.max_ngram_order}")
        if n < 0 or min(stats) < 0:
            raise ValueError("bad BLEU state: negative counts")
        self._n = n
        self._stats = stats

    def _merge(self, other):
        self._add(other._stats, 1)
        self._n += other._n

    def _subtract(self, other):
        """Take out ``other``'s integer statistics (merged earlier): exact. Refused
        (``ValueError``, nothing changed) if ``other`` holds more sentences, or more
        of any statistic, than here, or would leave matches above totals or
        statistics without sentences."""
        name = f"the other {self._public_name}"
        if other._n > self._n:
            raise ValueError(f"subtract: {self._n} sentences here but {other._n} in "
                             f"{name}: they were never merged")
        order = self.max_ngram_order
        names = ["hyp_len", "ref_len", *(f"matches_{n}" for n in range(1, order + 1)),
                 *(f"totals_{n}" for n in range(1, order + 1))]
        left = [a - b for a, b in zip(self._stats, other._stats)]
        bad = [i for i, v in enumerate(left) if v < 0]
        bad += [2 + i for i in range(order) if left[2 + i] > left[2 + order + i]]
        if not bad and other._n == self._n and any(left):
            bad = [next(i for i, v in enumerate(left) if v)]
        if bad:
            i = bad[0]
            raise ValueError(
                f"subtract: {names[i]} is {self._stats[i]} here but {other._stats[i]} in "
                f"{name}: it was never merged")
        self._stats = left
        self._n -= other._n

    def _check(self):
        order = self.max_ngram_order
        assert self._n >= 0 and all(v >= 0 for v in self._stats)
        for n in range(order):
            assert self._stats[2 + n] <= self._stats[2 + order + n]  # matches <= totals
        if not self._n:
            assert not any(self._stats)


# --------------------------------------------------------- averaged scores


class _MeanScore(_TextMetric):
    """A weighted mean of per-sentence scores, kept as exact sums."""

    _abstract = True
    _fields = ("value",)

    def _init_sums(self):
        self._n = 0
        self._wsum = ExactSum()
        self._sums = [ExactSum() for _ in self._fields]

    @property
    def n(self):
        """Number of sentences in the mean."""
        return self._n

    def update(self, hypothesis, references, w=1.0):
        """Add one sentence: its hypothesis and its references."""
        w = check_weight(w)
        values = self._event(hypothesis, references)
        self._n += 1
        self._wsum.add(w)
        for s, v in zip(self._sums, values):
            s.add(w * v)
        return self

    def revert(self, hypothesis, references, w=1.0):
        """Remove a sentence added earlier with the same arguments (exact inverse)."""
        w = check_weight(w)
        values = self._event(hypothesis, references)
        if self._n < 1:
            raise ValueError("revert: no sentence to remove (more reverts than updates)")
        self._n -= 1
        self._wsum.add(-w)
        for s, v in zip(self._sums, values):
            s.add(-(w * v))
        return self

    def update_trusted(self, events, _=None, w=None):
        """Add the columns of :meth:`validate` (per-event scores and weights),
        unchecked: same result as a loop of ``update``. Runtime complexity: `O(m)`."""
        return self._add_batch(events, w, 1.0)

    def revert_trusted(self, events, _=None, w=None):
        """Remove the columns of :meth:`validate`, added earlier: same result as a loop
        of ``revert``. More events than stored raise
        :class:`~streameval.validation.ValidationError` with the ``index`` a loop of
        ``revert`` would refuse (the first beyond the count), nothing changed."""
        if len(events) > self._n:
            raise ValidationError.at(
                self._n, "revert: no sentence to remove (more reverts than updates)")
        return self._add_batch(events, w, -1.0)

    def _add_batch(self, events, w, sign):
        m = len(events)
        if not m:
            return self
        wa = np.ones(m) if w is None else np.asarray(w, dtype=np.float64)
        vals = np.array(events, dtype=np.float64).reshape(m, len(self._fields))
        self._n += m if sign > 0 else -m
        self._wsum.add_array(sign * wa)
        for j, s in enumerate(self._sums):
            s.add_array(sign * (wa * vals[:, j]))
        return self

    def _mean(self, j):
        if not self._n:
            return math.nan
        wsum = self._wsum.value()
        if not wsum:
            return math.nan
        return self._sums[j].value() / wsum

    def _get_data(self):
        return {"n": self._n, "wsum": list(self._wsum.p),
                "sums": [list(s.p) for s in self._sums]}

    def _set_data(self, data):
        name = type(self).__name__
        try:
            n = int(data["n"])
            wsum = ExactSum(data["wsum"])
            sums = [ExactSum(p) for p in data["sums"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"bad {name} state: {e!r}") from None
        if len(sums) != len(self._fields):
            raise ValueError(f"bad {name} state: {len(sums)} sums, expected {len(self._fields)}")
        if n < 0 or not all(math.isfinite(x) for s in (wsum, *sums) for x in s.p):
            raise ValueError(f"bad {name} state: negative count or non-finite sums")
        self._n, self._wsum, self._sums = n, wsum, sums

    def _merge(self, other):
        self._n += other._n
        self._wsum.merge(other._wsum)
        for s, o in zip(self._sums, other._sums):
            s.merge(o)

    def _subtract(self, other):
        """Take out ``other``'s sentences and exact sums (merged earlier): bit for bit
        the sums before the merge. Refused (``ValueError``, nothing changed) for more
        sentences, or more weight or weighted score, than held here (the sums are
        exact and the scores >= 0: what is left is never below 0, and exactly 0 once
        no sentence is left)."""
        name = f"the other {self._public_name}"
        if other._n > self._n:
            raise ValueError(f"subtract: {self._n} sentences here but {other._n} in "
                             f"{name}: they were never merged")
        n = self._n - other._n
        left = [mine.minus(theirs, what, name, n, "sentence")
                for what, mine, theirs in (("weight", self._wsum, other._wsum),
                                           *((f"weighted {f} sum", s, o) for f, s, o in zip(
                                               self._fields, self._sums, other._sums)))]
        self._n = n
        self._wsum, self._sums = left[0], left[1:]

    def _check(self):
        assert self._n >= 0
        for s in (self._wsum, *self._sums):
            assert all(math.isfinite(x) for x in s.p)
        if not self._n:
            assert self._wsum.value() == 0.0


# -------------------------------------------------------------------- ROUGE


def _lcs_length(a, b):
    """Length of the longest common subsequence of two token lists.

    Bit-parallel (Allison & Dix 1986; Hyyrö 2004): one row of the DP table is one
    Python int, so each token of ``b`` costs a few big-int operations. Runtime
    complexity: `O(len(b) * len(a) / 64)`.
    """
    if len(a) < len(b):
        a, b = b, a
    masks = {}
    for i, t in enumerate(b):
        masks[t] = masks.get(t, 0) | (1 << i)
    full = (1 << len(b)) - 1
    v = full
    get = masks.get
    for t in a:
        u = v & get(t, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - v.bit_count()


def _fmeasure(p, r):
    # rouge-score's scoring.fmeasure
    if p + r > 0:
        return 2 * p * r / (p + r)
    return 0.0


_ROUGE_TYPES = tuple(f"rouge{i}" for i in range(1, 10)) + ("rougeL",)
_MEASURES = ("precision", "recall", "fmeasure")


class ROUGE(_MeanScore):
    """ROUGE-N or ROUGE-L (precision, recall or F), averaged over sentences.

    ROUGE-N: ``P = overlap / #hypothesis n-grams``, ``R = overlap / #reference
    n-grams`` with ``overlap`` the clipped count of shared n-grams; ROUGE-L: the same
    with the longest common subsequence (0 if either side is empty); ``F = 2PR/(P+R)``.
    With several references, the one with the best F counts (rouge-score's
    ``score_multi``). Equal to Google's ``rouge-score`` package on the same tokens
    (its default tokenizer lowercases and drops punctuation: pass
    ``lowercase=True`` and clean tokens for the same result). ``stem=True`` stems
    tokens longer than 3 characters with the Porter stemmer, as rouge-score does.

    Runtime complexity: `update` `O(h + r)` for ROUGE-N, `O(h r / 64)` for ROUGE-L
    (bit-parallel LCS) for ``h`` and ``r`` tokens; `get` `O(1)`.

    >>> from streameval import ROUGE
    >>> rouge = ROUGE("rougeL")
    >>> round(rouge.update("the cat was found under the bed",
    ...                    ["the cat was under the bed"]).get(), 6)
    0.923077
    >>> {k: round(v, 6) for k, v in rouge.get_all().items()}
    {'precision': 0.857143, 'recall': 1.0, 'fmeasure': 0.923077}

    Parameters
    ----------
    rouge_type : {"rouge1", ..., "rouge9", "rougeL"}, default "rouge1"
    measure : {"fmeasure", "precision", "recall"}, default "fmeasure"
        What ``get()`` returns; ``get_all()`` gives all three.
    stem : bool, default False
    lowercase : bool, default False
    """

    _fields = _MEASURES

    def __init__(self, rouge_type="rouge1", measure="fmeasure", stem=False, lowercase=False):
        check_param("rouge_type", rouge_type, Options(*_ROUGE_TYPES))
        check_param("measure", measure, Options(*_MEASURES))
        check_param("stem", stem, _BOOL)
        check_param("lowercase", lowercase, _BOOL)
        self.rouge_type = rouge_type
        self.measure = measure
        self.stem = stem
        self.lowercase = lowercase
        self._stems = _Stems() if stem else None
        self._order = None if rouge_type == "rougeL" else int(rouge_type[5:])
        self._j = _MEASURES.index(measure)
        self._init_sums()

    def _prep(self, toks):
        st = self._stems
        if st is None:
            return toks
        return [st(t) if len(t) > 3 else t for t in toks]

    def _ngrams(self, toks):
        n = self._order
        return Counter(toks) if n == 1 else Counter(zip(*[toks[i:] for i in range(n)]))

    def _event(self, hypothesis, references):
        hyp = self._prep(_tokens(hypothesis, "hypothesis", self.lowercase))
        refs = [self._prep(r) for r in _references(references, self.lowercase)]
        best = None
        if self._order is None:
            for ref in refs:
                if not ref or not hyp:
                    s = (0.0, 0.0, 0.0)
                else:
                    lcs = _lcs_length(ref, hyp)
                    p, r = lcs / len(hyp), lcs / len(ref)
                    s = (p, r, _fmeasure(p, r))
                if best is None or s[2] > best[2]:
                    best = s
        else:
            hc = self._ngrams(hyp)
            hn = sum(hc.values())
            get = hc.get
            for ref in refs:
                rc = self._ngrams(ref)
                inter = 0
                for g, v in rc.items():
                    hv = get(g)
                    if hv:
                        inter += v if v < hv else hv
                p = inter / max(hn, 1)
                r = inter / max(sum(rc.values()), 1)
                s = (p, r, _fmeasure(p, r))
                if best is None or s[2] > best[2]:
                    best = s
        return best

    def get(self):
        """Mean of the chosen measure over sentences; ``nan`` before any.

        Runtime complexity: `O(1)`.
        """
        return self._mean(self._j)

    def get_all(self):
        """Mean precision, recall and F over sentences."""
        return {m: self._mean(j) for j, m in enumerate(_MEASURES)}


# ------------------------------------------------------------------- METEOR


def _match(hyp, ref):
    """NLTK's ``_match_enums``: hypothesis words from the last, each matched to the
    last unused reference word equal to it. Returns (matches, rest_hyp, rest_ref)."""
    positions = defaultdict(list)
    for j, (_, w) in enumerate(ref):
        positions[w].append(j)
    matches = []
    used_h = set()
    used_r = set()
    for i in range(len(hyp) - 1, -1, -1):
        p = positions.get(hyp[i][1])
        if p:
            j = p.pop()
            used_h.add(i)
            used_r.add(j)
            matches.append((hyp[i][0], ref[j][0]))
    if not matches:
        return matches, hyp, ref
    return (matches,
            [x for i, x in enumerate(hyp) if i not in used_h],
            [x for j, x in enumerate(ref) if j not in used_r])


class METEOR(_MeanScore):
    """METEOR with exact and Porter-stem matching, averaged over sentences.

    Words are aligned as NLTK's ``meteor_score`` aligns them (exact matches first,
    then stems; no WordNet synonyms). With ``m`` matches, ``P = m / #hypothesis``,
    ``R = m / #reference``, ``Fmean = P R / (alpha P + (1 - alpha) R)``, ``ch`` the
    fewest chunks of adjacent matches in the same order, and
    ``METEOR = (1 - gamma (ch / m)**beta) Fmean`` (0 without a match); with several
    references, the best. Equal to ``nltk.translate.meteor_score.meteor_score``
    given a WordNet without synsets. Words are lowercased first (NLTK's default).

    Runtime complexity: `update` `O(h + r)` for ``h`` and ``r`` tokens (stems
    memoised), `get` `O(1)`.

    >>> from streameval import METEOR
    >>> meteor = METEOR()
    >>> round(meteor.update("the cats sat on the mat", ["the cat sat on a mat"]).get(), 6)
    0.743333

    Parameters
    ----------
    alpha : float, default 0.9
        Relative weight of precision and recall in ``Fmean``.
    beta : float, default 3.0
        Shape of the fragmentation penalty.
    gamma : float, default 0.5
        Weight of the fragmentation penalty.
    stem : bool, default True
        Match Porter stems after exact words (needs ``streameval[text]``).
    lowercase : bool, default True
    """

    def __init__(self, alpha=0.9, beta=3.0, gamma=0.5, stem=True, lowercase=True):
        check_param("alpha", alpha, Real(0, 1))
        check_param("beta", beta, Real(0))
        check_param("gamma", gamma, Real(0, 1))
        check_param("stem", stem, _BOOL)
        check_param("lowercase", lowercase, _BOOL)
        self.alpha = alpha
        self.beta = beta
        self.gamma = gamma
        self.stem = stem
        self.lowercase = lowercase
        self._stems = _Stems() if stem else None
        self._init_sums()

    def _single(self, hyp, ref):
        """NLTK's ``single_meteor_score``, same arithmetic."""
        h, r = len(hyp), len(ref)
        if not h or not r:
            return 0.0
        eh = list(enumerate(hyp))
        er = list(enumerate(ref))
        matches, eh, er = _match(eh, er)
        st = self._stems
        if st is not None and eh and er:
            more, _, _ = _match([(i, st(w)) for i, w in eh], [(j, st(w)) for j, w in er])
            matches += more
        m = len(matches)
        if not m:
            return 0.0
        matches.sort()
        chunks = 1
        for (a, b), (c, d) in zip(matches, matches[1:]):
            if not (c == a + 1 and d == b + 1):
                chunks += 1
        alpha = self.alpha
        precision = float(m) / h
        recall = float(m) / r
        fmean = (precision * recall) / (alpha * precision + (1 - alpha) * recall)
        frag_frac = float(chunks) / m
        penalty = self.gamma * frag_frac**self.beta
        return (1 - penalty) * fmean

    def _event(self, hypothesis, references):
        hyp = _tokens(hypothesis, "hypothesis", self.lowercase)
        refs = _references(references, self.lowercase)
        return (max(self._single(hyp, ref) for ref in refs),)

    def get(self):
        """Mean METEOR over sentences; ``nan`` before any.

        Runtime complexity: `O(1)`.
        """
        return self._mean(0)
