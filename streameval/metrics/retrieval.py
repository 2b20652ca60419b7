"""Ranking and retrieval metrics, one event per query, averaged over queries.

Each event is one query: the relevances of its candidates and the model's scores for
them (``update(relevances, scores)``), or the relevances alone, already in ranked
order, top first (``update(relevances)``). A candidate is *relevant* when its
relevance is > 0; graded relevances feed the gains of :class:`DCG` and :class:`NDCG`.

``get()`` is the mean of the per-query values, weighted by ``w``; ``math.nan`` before
any query. The sums behind it are kept exactly (a list of non-overlapping partial
sums, as in :func:`math.fsum`), so ``revert`` restores the previous value bit for bit
and a sliding window never drifts.

Ties in scores (``ignore_ties=False``, the default): a group of candidates with the
same score occupies its ranks in an unknown order, and the metric is the expected
value over all orders of each tied group. For DCG and NDCG this is
``sklearn.metrics.dcg_score`` / ``ndcg_score``'s tie averaging; the other metrics
follow McSherry & Najork, "Computing information retrieval performance measures
efficiently in the presence of tied scores" (ECIR 2008). A model that gives every
candidate the same score is then scored as a random ranking, whatever the order of
the log. ``ignore_ties=True`` ranks tied candidates in their given order (faster).

Queries with no relevant candidate (an empty candidate list included) make recall
and AP undefined (0/0); ``no_relevant="zero"`` counts them as 0, ``"skip"`` leaves
them out of the mean and counts them in ``skipped``. Defaults: ``"skip"`` for
:class:`RecallAtK`, :class:`APAtK` and :class:`MAPAtK` (trec_eval's convention),
``"zero"`` elsewhere (sklearn's ``ndcg_score`` gives 0 to an all-zero query; P@K,
Hit@K, reciprocal rank and DCG are naturally 0 there).

Batches (``update_many``) rank every query at once with numpy (one ``lexsort``
over the concatenated candidates, per-query sums with ``bincount``), with the same
per-query values, bit for bit, as a loop of ``update``. ``update_many`` is
``validate`` (which returns the batch's columns: per-query float64 relevances, scores
or None, float64 weights or None) then ``update_trusted``; ``revert_many`` is
``validate`` then ``revert_trusted``, so a window validates a batch once.

:class:`ExactSum` (the exact running sum) is public for the text metrics, which keep
their sums the same way; it is not a name of ``streameval``.

Imports: numpy, :mod:`streameval.validation` and :mod:`streameval.metrics.base`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from streameval.metrics.base import Metric
from streameval.validation import (
    Integer,
    Options,
    Real,
    ValidationError,
    as_weight_array,
    check_param,
    check_weight,
)

__all__ = [
    "PrecisionAtK",
    "RecallAtK",
    "HitAtK",
    "APAtK",
    "MAPAtK",
    "MRR",
    "DCG",
    "NDCG",
]

_Number = (numbers.Real, np.bool_)


# ------------------------------------------------------------------- exact sums


class ExactSum:
    """An exact running sum of floats: non-overlapping partials (Shewchuk's msum).

    ``add(x)`` then ``add(-x)`` leaves the partials summing to exactly what they did
    before, so a reverted event leaves no rounding residue; ``value()`` is the
    correctly rounded total (:func:`math.fsum`). Runtime complexity of ``add``:
    `O(p)` with ``p`` the number of partials (a handful in practice).

    >>> s = ExactSum()
    >>> for x in (1e16, 1.0, -1e16):
    ...     s.add(x)
    >>> s.value()
    1.0
    """

    __slots__ = ("p",)

    def __init__(self, partials=()):
        self.p = [float(x) for x in partials]

    def add(self, x):
        p = self.p
        i = 0
        for y in p:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                p[i] = lo
                i += 1
            x = hi
        # a top partial cancelled to 0 is dropped (a trailing 0.0 would break the
        # partials' increasing magnitudes, which ``_check`` asserts)
        p[i:] = [x] if x or not i else []

    def add_array(self, arr):
        """Add every element of a float array exactly, without a Python loop over it.

        ``math.fsum`` gives the correctly rounded total ``s``; adding ``-s`` to the
        terms and summing again gives the (exact) remainder's rounding, and so on
        until the remainder is zero: two or three C-level passes in practice.
        """
        terms = arr.tolist() if isinstance(arr, np.ndarray) else list(arr)
        while terms:
            s = math.fsum(terms)
            if not s:
                break
            self.add(s)
            terms.append(-s)

    def value(self):
        return math.fsum(self.p)

    def merge(self, other):
        for y in other.p:
            self.add(y)

    def subtract(self, other):
        """Take out ``other``'s total, exactly: the inverse of :meth:`merge` (the
        partials then sum to exactly what they did before ``other`` was merged).

        >>> s, t = ExactSum([0.1, 1e16]), ExactSum([0.7])
        >>> s.merge(t)
        >>> s.subtract(t)
        >>> s.value() == math.fsum([0.1, 1e16])
        True
        """
        for y in list(other.p):
            self.add(-y)

    def copy(self):
        """An independent copy (the same partials)."""
        return ExactSum(self.p)

    def minus(self, other, what, name, left, unit):
        """A new sum: this one less ``other`` (merged here earlier), exactly; this one
        is not changed. Refused (``ValueError``) if ``other`` was never merged here: the
        rest is below 0 (the sums are of values >= 0), or not 0 with ``left == 0``
        items (``unit``: ``"query"``...) left. ``what`` names this sum and ``name``
        the other metric in the message."""
        rest = self.copy()
        rest.subtract(other)
        if rest.value() < 0.0 or (not left and rest.value()):
            raise ValueError(
                f"subtract: {what} {self.value()!r} here but {other.value()!r} in "
                f"{name}{'' if left else f' (no {unit} left)'}: it was never merged")
        return rest


# ------------------------------------------------------------------- validation


def _as_vector(values, name, what):
    """``values`` as a 1-D float64 array of finite numbers, or a ValueError naming it."""
    if isinstance(values, np.ndarray):
        arr = values
    else:
        if isinstance(values, (str, bytes, dict, set)) or not hasattr(values, "__len__"):
            raise ValueError(f"{name} = {values!r:.80}: must be a sequence of numbers")
        try:
            arr = np.asarray(values)
        except ValueError:
            arr = np.empty(len(values), dtype=object)
            arr[:] = list(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind in "fiub":
        arr = arr.astype(np.float64, copy=False)
    else:
        out = np.empty(len(arr), dtype=np.float64)
        # the caller's own values (numpy would have turned ``[1, "a"]`` into strings)
        vals = arr.tolist() if values is arr else list(values)
        for i, v in enumerate(vals):
            if isinstance(v, _Number):
                out[i] = float(v)
            else:
                raise ValueError(f"{name}[{i}] = {v!r}: {what} must be a finite number")
        arr = out
    if arr.size and not np.isfinite(arr).all():
        i = int(np.argmax(~np.isfinite(arr)))
        raise ValueError(f"{name}[{i}] = {arr[i].item()!r}: {what} must be a finite number")
    return arr




def _refuse(q, message):
    """The error for query ``q`` of a batch: ``"query <q>: <message>"``, ``index=q``."""
    return ValidationError(None, None, message, q, message=f"query {q}: {message}")


def _where(i, offsets):
    """(query, position) of flat index ``i`` in a concatenation with ``offsets``."""
    q = int(np.searchsorted(offsets, i, side="right")) - 1
    return q, i - int(offsets[q])


def _concat(lists, name, what):
    """Concatenate a batch of per-query vectors: (flat float64 array, int64 lengths).

    Errors name the query and the position within it.
    """
    if isinstance(lists, np.ndarray) and lists.ndim == 2:
        nq, m = lists.shape
        lengths = np.full(nq, m, dtype=np.int64)
        flat = lists.reshape(-1)
    else:
        if isinstance(lists, (str, bytes, dict)) or not hasattr(lists, "__len__"):
            raise ValueError(f"{name} = {lists!r:.80}: must be a sequence of per-query sequences")
        arrs = []
        for q, r in enumerate(lists):
            if isinstance(r, np.ndarray):
                a = r
            elif isinstance(r, (str, bytes, dict, set)) or not hasattr(r, "__len__"):
                raise _refuse(q, f"{name} = {r!r:.80}: must be a sequence of numbers")
            else:
                try:
                    a = np.asarray(r)
                except ValueError:
                    a = np.empty(len(r), dtype=object)
                    a[:] = list(r)
            if a.ndim != 1:
                raise _refuse(q, f"{name} must be one-dimensional, got shape {a.shape}")
            arrs.append(a)
        lengths = np.fromiter((a.size for a in arrs), dtype=np.int64, count=len(arrs))
        if not arrs:
            return np.empty(0), lengths
        flat = np.concatenate(arrs)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if flat.dtype.kind in "fiub":
        flat = flat.astype(np.float64, copy=False)
    else:
        if isinstance(lists, np.ndarray):
            vals = flat.tolist()
        else:  # the caller's own values (numpy would have turned 1 into "1")
            vals = [v for r in lists for v in (r.tolist() if isinstance(r, np.ndarray) else r)]
        out = np.empty(len(vals), dtype=np.float64)
        for i, v in enumerate(vals):
            if isinstance(v, _Number):
                out[i] = float(v)
            else:
                q, j = _where(i, offsets)
                raise _refuse(q, f"{name}[{j}] = {v!r}: {what} must be a finite number")
        flat = out
    if flat.size and not np.isfinite(flat).all():
        i = int(np.argmax(~np.isfinite(flat)))
        q, j = _where(i, offsets)
        raise _refuse(q, f"{name}[{j}] = {flat[i].item()!r}: {what} must be a finite number")
    return flat, lengths


def _split(flat, lengths, offsets):
    """Per-query columns of a validated batch: a 2-D array if every query has the same
    number of candidates, else a list of 1-D views of ``flat``; None stays None."""
    if flat is None:
        return None
    nq = len(lengths)
    if nq and (lengths == lengths[0]).all():
        return flat.reshape(nq, int(lengths[0]))
    return [flat[offsets[q]:offsets[q + 1]] for q in range(nq)]


def _join(column):
    """(flat float64 array, int64 lengths) of a per-query column from :func:`_split`
    (or :func:`~streameval.validation.take_columns` of one)."""
    if isinstance(column, np.ndarray):
        nq = column.shape[0]
        return column.reshape(-1), np.full(nq, column.shape[1] if column.ndim == 2 else 0,
                                           dtype=np.int64)
    lengths = np.fromiter((a.size for a in column), dtype=np.int64, count=len(column))
    if not column:
        return np.empty(0), lengths
    return np.concatenate(column), lengths


# ---------------------------------------------------------------- the ranking


def _seg_cumprod(a, seg_first):
    """Inclusive cumulative product of ``a`` within segments (Hillis–Steele scan).

    ``seg_first[i]`` is the index where element ``i``'s segment starts. `O(n log L)`
    for the longest segment ``L``, all in numpy.
    """
    out = a
    idx = np.arange(len(a))
    d = 1
    while True:
        src = idx - d
        ok = src >= seg_first
        if not ok.any():
            return out
        nxt = out.copy()
        nxt[ok] = out[ok] * out[src[ok]]
        out = nxt
        d *= 2


_ZERO = np.zeros(1, dtype=np.int64)


class _Ranking:
    """Every query of a batch ranked at once: sorted positions, ranks, tie groups."""

    __slots__ = ("nq", "n", "qid", "qstart", "rank", "rel", "single",
                 "gid", "gstart", "gsize")

    def __init__(self, rel, score, lengths, ignore_ties):
        nq = len(lengths)
        n = rel.size
        if nq == 1:  # one query (every ``update``): the same arrays, built cheaply
            qstart = _ZERO
            qid = np.zeros(n, dtype=np.intp)
            rank = np.arange(n)
            if score is not None and n > 1:
                order = np.argsort(-score, kind="stable")
                rel = rel[order]
                score = score[order]
        else:
            qstart = np.zeros(nq, dtype=np.int64)
            np.cumsum(lengths[:-1], out=qstart[1:])
            qid = np.repeat(np.arange(nq), lengths)
            if score is not None and n > 1:
                # a stable sort by (query, score high to low): the same permutation as
                # the single-query argsort, whichever way it is computed
                if lengths.min() == lengths.max():  # a rectangular batch: sort rows
                    m = int(lengths[0])
                    order = np.argsort(-score.reshape(nq, m), axis=1, kind="stable")
                    order += qstart[:, None]
                    order = order.reshape(-1)
                else:
                    order = np.lexsort((-score, qid))
                rel = rel[order]
                score = score[order]
            rank = np.arange(n) - qstart[qid]
        self.nq, self.n, self.qid, self.qstart, self.rank, self.rel = nq, n, qid, qstart, rank, rel
        # tie groups: runs of equal scores within a query; else one group per position
        self.single = score is None or ignore_ties or n < 2
        if not self.single:
            new = np.empty(n, dtype=bool)
            new[0] = True
            np.not_equal(score[1:], score[:-1], out=new[1:])
            if nq > 1:
                new[1:] |= rank[1:] == 0
            gstart = np.flatnonzero(new)
            if gstart.size == n:
                self.single = True
            else:
                self.gid = np.cumsum(new) - 1
                self.gstart = gstart
                gsize = np.empty(gstart.size, dtype=np.int64)
                np.subtract(gstart[1:], gstart[:-1], out=gsize[:-1])
                gsize[-1] = n - gstart[-1]
                self.gsize = gsize

    def group_mean(self, x):
        """Each position's value replaced by the mean over its tie group."""
        if self.single:
            return x
        return (np.bincount(self.gid, x) / self.gsize)[self.gid]

    def per_query(self, terms, mask=None):
        """Sum of ``terms`` per query (sequential per query: batch-independent)."""
        if mask is None:
            return np.bincount(self.qid, terms, minlength=self.nq)
        return np.bincount(self.qid[mask], terms, minlength=self.nq)

    def first_relevant(self, relb):
        """Positions of each query's first group holding a relevant candidate, with
        the probability that the first relevant candidate sits there.

        Returns (positions, probabilities). In a group of ``g`` candidates of which
        ``r`` are relevant, the first relevant one is at the group's ``j``-th place
        with probability ``prod_{i<j-1} (g-r-i)/(g-i) * r/(g-j+1)``.
        """
        if self.single:
            pos = np.flatnonzero(relb)
            if pos.size:
                q = self.qid[pos]
                keep = np.empty(pos.size, dtype=bool)
                keep[0] = True
                np.not_equal(q[1:], q[:-1], out=keep[1:])
                pos = pos[keep]
            return pos, np.ones(pos.size)
        gr = np.bincount(self.gid, relb)
        rg = np.flatnonzero(gr > 0)
        if not rg.size:
            return rg, np.ones(0)
        gq = self.qid[self.gstart[rg]]
        keep = np.empty(rg.size, dtype=bool)
        keep[0] = True
        np.not_equal(gq[1:], gq[:-1], out=keep[1:])
        fg = rg[keep]
        lens = self.gsize[fg]
        first = np.repeat(np.cumsum(lens) - lens, lens)
        within = np.arange(int(lens.sum())) - first
        pos = np.repeat(self.gstart[fg], lens) + within
        g = np.repeat(lens, lens).astype(np.float64)
        r = np.repeat(gr[fg], lens)
        # a[j] = factor carried into place j: 1 at the group's first place
        f = np.maximum(g - r - within, 0.0) / (g - within)
        a = np.ones(within.size)
        a[1:] = f[:-1]
        a[within == 0] = 1.0
        surv = _seg_cumprod(a, first)
        return pos, surv * r / (g - within)


# ---------------------------------------------------------------- the metrics


_NO_RELEVANT = ("zero", "skip")


class _QueryMetric(Metric):
    """Mean over queries of a per-query value; exact sums, weights, skip policy."""

    _abstract = True
    _default_no_relevant = "zero"

    def __init__(self, k=None, ignore_ties=False, no_relevant=None):
        k = check_param("k", k, Integer(1, allow_none=True))  # None: all candidates
        check_param("ignore_ties", ignore_ties, Options(True, False))
        if no_relevant is None:
            no_relevant = self._default_no_relevant
        check_param("no_relevant", no_relevant, Options(*_NO_RELEVANT))
        self.k = k
        self.ignore_ties = ignore_ties
        self.no_relevant = no_relevant
        self._n = 0
        self.skipped = 0
        self._wsum = ExactSum()
        self._vsum = ExactSum()

    @property
    def bigger_is_better(self):
        return True

    @property
    def n(self):
        """Number of queries in the mean (skipped ones excluded)."""
        return self._n

    # -- per-query values (subclasses) -------------------------------------------
    def _bad_relevance(self, rel):
        """Index and reason of the first unacceptable relevance, or None."""
        if rel.size and rel.min() < 0.0:
            return int(np.argmax(rel < 0.0)), "relevance must be a finite number >= 0"
        return None

    def _values(self, rk, relb):
        """(values, defined) per query of the ranking ``rk``; ``relb`` = rel > 0."""
        raise NotImplementedError

    def _compute(self, rel, score, lengths):
        rk = _Ranking(rel, score, lengths, self.ignore_ties)
        relb = (rk.rel > 0.0).astype(np.float64)
        values, defined = self._values(rk, relb)
        if self.no_relevant == "zero":
            values = np.where(defined, values, 0.0)
        return values, defined

    # -- protocol ----------------------------------------------------------------
    def _one(self, relevances, scores):
        rel = _as_vector(relevances, "relevances", "relevance")
        bad = self._bad_relevance(rel)
        if bad is not None:
            i, reason = bad
            raise ValueError(f"relevances[{i}] = {rel[i].item()!r}: {reason}")
        if scores is None:
            return self._compute(rel, None, np.array([rel.size]))
        sc = _as_vector(scores, "scores", "score")
        if sc.size != rel.size:
            raise ValueError(f"relevances has {rel.size} elements but scores has {sc.size}")
        return self._compute(rel, sc, np.array([rel.size]))

    def update(self, relevances, scores=None, w=1.0):
        """Add one query: its candidates' relevances and scores (or ranked relevances)."""
        w = check_weight(w)
        values, defined = self._one(relevances, scores)
        if defined[0] or self.no_relevant == "zero":
            self._n += 1
            self._wsum.add(w)
            self._vsum.add(w * float(values[0]))
        else:
            self.skipped += 1
        return self

    def revert(self, relevances, scores=None, w=1.0):
        """Remove one query added earlier with the same arguments (exact inverse)."""
        w = check_weight(w)
        values, defined = self._one(relevances, scores)
        if defined[0] or self.no_relevant == "zero":
            if self._n < 1:
                raise ValueError("revert: no query to remove (more reverts than updates)")
            self._n -= 1
            self._wsum.add(-w)
            self._vsum.add(-(w * float(values[0])))
        else:
            if self.skipped < 1:
                raise ValueError("revert: no skipped query to remove (more reverts than updates)")
            self.skipped -= 1
        return self

    columns = None  # validate returns (per-query relevances, scores or None, weights)

    def validate(self, relevances, scores=None, w=None):
        """Check a batch of queries without changing anything; return its columns.

        ``relevances`` is a sequence of per-query sequences (lengths may differ) or a
        2-D array (one row per query, no per-query conversion); ``scores`` the same or
        None (relevances in ranked order). Returns ``(relevances, scores, weights)``:
        a 2-D float64 array or a list of 1-D float64 arrays for each of the first two
        (None for no scores), float64 weights or None; one entry per query, so a window
        can take any of them (:func:`streameval.validation.take_columns`). A bad query
        raises :class:`~streameval.validation.ValidationError` with its ``index``
        (``"query <q>: ..."``, naming the position within it).

        Runtime complexity: `O(m)` for ``m`` candidates in all (numpy), plus `O(q)`
        Python steps for ``q`` queries given as lists.
        """
        rel, lengths = _concat(relevances, "relevances", "relevance")
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        bad = self._bad_relevance(rel)
        if bad is not None:
            i, reason = bad
            q, j = _where(i, offsets)
            raise _refuse(q, f"relevances[{j}] = {rel[i].item()!r}: {reason}")
        nq = len(lengths)
        sc = None
        if scores is not None:
            if len(scores) != nq:
                raise ValidationError(
                    "scores", len(scores), "lengths differ",
                    message=f"relevances has {nq} queries but scores has {len(scores)}")
            sc, slen = _concat(scores, "scores", "score")
            if not np.array_equal(slen, lengths):
                q = int(np.argmax(slen != lengths))
                raise _refuse(q, f"relevances has {lengths[q]} elements "
                                 f"but scores has {slen[q]}")
        wa = None
        if w is not None:
            if isinstance(w, (str, bytes, dict)) or not hasattr(w, "__len__"):
                raise ValidationError(
                    "w", w, "must be a sequence with one weight per query",
                    message=f"w = {w!r:.80}: must be a sequence with one weight per query")
            if len(w) != nq:
                raise ValidationError("w", len(w), "lengths differ",
                                      message=f"relevances has {nq} queries but w has {len(w)}")
            wa = as_weight_array(w, nq)  # the rules of ``check_weight`` (no bools)
        return _split(rel, lengths, offsets), _split(sc, lengths, offsets), wa

    def update_trusted(self, relevances, scores=None, w=None):
        """Add the columns of :meth:`validate`, unchecked: same result as a loop of
        ``update``. Runtime complexity: `O(m log m)` for ``m`` candidates in all."""
        values, counted, wa = self._batch_values(relevances, scores, w)
        if values is None:
            return self
        nc = int(counted.sum())
        self.skipped += len(counted) - nc
        self._n += nc
        self._wsum.add_array(wa[counted])
        self._vsum.add_array((wa * values)[counted])
        return self

    def revert_trusted(self, relevances, scores=None, w=None):
        """Remove the columns of :meth:`validate`, added earlier: same result as a loop
        of ``revert``. More queries than stored raise
        :class:`~streameval.validation.ValidationError` with the ``index`` of the
        query a loop of ``revert`` would refuse, nothing changed."""
        values, counted, wa = self._batch_values(relevances, scores, w)
        if values is None:
            return self
        nc = int(counted.sum())
        if nc > self._n or len(counted) - nc > self.skipped:
            refused = []
            for mask, stored, what in ((counted, self._n, "query"),
                                       (~counted, self.skipped, "skipped query")):
                over = np.flatnonzero(np.cumsum(mask) > stored)
                if over.size:
                    refused.append((int(over[0]), what))
            i, what = min(refused)
            raise ValidationError.at(
                i, f"revert: no {what} to remove (more reverts than updates)")
        self.skipped -= len(counted) - nc
        self._n -= nc
        self._wsum.add_array(-wa[counted])
        self._vsum.add_array(-(wa * values)[counted])
        return self

    def update_many(self, relevances, scores=None, w=None):
        """Add a batch of queries (``scores`` may be left out: relevances in ranked
        order); same result as a loop of ``update``: :meth:`validate` (errors name the
        query and position, nothing changed) then :meth:`update_trusted`."""
        return self.update_trusted(*self.validate(relevances, scores, w))

    def revert_many(self, relevances, scores=None, w=None):
        """Remove a batch of queries added earlier: :meth:`validate` then
        :meth:`revert_trusted` (atomic)."""
        return self.revert_trusted(*self.validate(relevances, scores, w))

    def _batch_values(self, relevances, scores, w):
        """(values, counted, weights) per query of validated columns; (None, ...) for
        an empty batch."""
        rel, lengths = _join(relevances)
        nq = len(lengths)
        if not nq:
            return None, None, None
        sc = None if scores is None else _join(scores)[0]
        values, defined = self._compute(rel, sc, lengths)
        counted = defined if self.no_relevant == "skip" else np.ones(nq, dtype=bool)
        return values, counted, np.ones(nq) if w is None else w

    def get(self):
        """Weighted mean of the per-query values; ``nan`` with no query counted.

        Runtime complexity: `O(1)`.
        """
        if not self._n:
            return math.nan
        wsum = self._wsum.value()
        if not wsum:
            return math.nan
        return self._vsum.value() / wsum

    # -- state ---------------------------------------------------------------------
    def _get_data(self):
        return {"n": self._n, "skipped": self.skipped,
                "wsum": list(self._wsum.p), "vsum": list(self._vsum.p)}

    def _set_data(self, data):
        try:
            n, skipped = int(data["n"]), int(data["skipped"])
            wsum, vsum = ExactSum(data["wsum"]), ExactSum(data["vsum"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"bad {type(self).__name__} state: {e!r}") from None
        if n < 0 or skipped < 0 or not all(map(math.isfinite, wsum.p + vsum.p)):
            raise ValueError(f"bad {type(self).__name__} state: negative counts or "
                             "non-finite sums")
        self._n, self.skipped, self._wsum, self._vsum = n, skipped, wsum, vsum

    def _merge(self, other):
        self._n += other._n
        self.skipped += other.skipped
        self._wsum.merge(other._wsum)
        self._vsum.merge(other._vsum)

    def _subtract(self, other):
        """Take out ``other``'s queries and exact sums (merged earlier): bit for bit
        the sums before the merge. Refused (``ValueError``, nothing changed) for more
        queries or skipped queries than held here, or more weight or weighted value:
        the sums are exact, so what is left is never below 0, and exactly 0 once no
        query is left."""
        name = f"the other {self._public_name}"
        for what, mine, theirs in (("queries", self._n, other._n),
                                   ("skipped queries", self.skipped, other.skipped)):
            if theirs > mine:
                raise ValueError(f"subtract: {mine} {what} here but {theirs} in {name}: "
                                 "they were never merged")
        n = self._n - other._n
        wsum = self._wsum.minus(other._wsum, "weight", name, n, "query")
        vsum = self._vsum.minus(other._vsum, "weighted sum of values", name, n, "query")
        self._n = n
        self.skipped -= other.skipped
        self._wsum, self._vsum = wsum, vsum

    def _check(self):
        assert self._n >= 0 and self.skipped >= 0
        for s in (self._wsum, self._vsum):
            assert all(math.isfinite(x) for x in s.p)
            # partials are non-overlapping and increasing in magnitude
            for a, b in zip(s.p, s.p[1:]):
                assert abs(a) < abs(b)
        if not self._n:
            assert self._wsum.value() == 0.0 and self._vsum.value() == 0.0


def _cutoff(rk, k):
    return None if k is None else rk.rank < k


class PrecisionAtK(_QueryMetric):
    """Precision at K: the share of the top ``k`` candidates that are relevant.

    ``P@K = #{relevant among the top K} / K`` (with ``k=None``: over all candidates,
    divided by their number), averaged over queries. A query with fewer than ``k``
    candidates still divides by ``k``. With tied scores: the expected value over the
    orders of each tied group.

    Runtime complexity: `update` `O(m log m)` for ``m`` candidates, `get` `O(1)`.

    >>> from streameval import PrecisionAtK
    >>> metric = PrecisionAtK(k=2)
    >>> metric.update([1, 0, 1], [0.9, 0.8, 0.1]).get()
    0.5
    >>> metric.update([0, 1, 1], [0.9, 0.8, 0.7]).get()
    0.5

    Parameters
    ----------
    k : int or None, default 10
    ignore_ties : bool, default False
        Rank tied candidates in their given order instead of averaging over orders.
    no_relevant : {"zero", "skip"}, default "zero"
        What a query without relevant candidates counts as (see the module doc).
    """

    def __init__(self, k=10, ignore_ties=False, no_relevant="zero"):
        super().__init__(k, ignore_ties, no_relevant)

    def _values(self, rk, relb):
        mask = _cutoff(rk, self.k)
        x = rk.group_mean(relb)
        hits = rk.per_query(x if mask is None else x[mask], mask)
        total = rk.per_query(relb)
        if self.k is None:
            lengths = np.bincount(rk.qid, minlength=rk.nq)
            return hits / np.maximum(lengths, 1), total > 0
        return hits / self.k, total > 0


class RecallAtK(_QueryMetric):
    """Recall at K: the share of the query's relevant candidates in the top ``k``.

    ``R@K = #{relevant among the top K} / #{relevant}`` (the denominator counts all
    the relevant candidates of the query), averaged over queries. Undefined for a
    query without relevant candidates: skipped by default (``no_relevant``).

    Runtime complexity: `update` `O(m log m)` for ``m`` candidates, `get` `O(1)`.

    >>> from streameval import RecallAtK
    >>> metric = RecallAtK(k=2)
    >>> metric.update([1, 0, 1], [0.9, 0.8, 0.1]).get()
    0.5
    >>> metric.update([0, 0, 0], [0.9, 0.8, 0.1]).get(), metric.skipped
    (0.5, 1)

    Parameters
    ----------
    k : int or None, default 10
    ignore_ties : bool, default False
    no_relevant : {"zero", "skip"}, default "skip"
    """

    _default_no_relevant = "skip"

    def __init__(self, k=10, ignore_ties=False, no_relevant="skip"):
        super().__init__(k, ignore_ties, no_relevant)

    def _values(self, rk, relb):
        mask = _cutoff(rk, self.k)
        x = rk.group_mean(relb)
        hits = rk.per_query(x if mask is None else x[mask], mask)
        total = rk.per_query(relb)
        return hits / np.maximum(total, 1.0), total > 0


class HitAtK(_QueryMetric):
    """Hit rate at K: 1 if a relevant candidate is in the top ``k``, else 0.

    Averaged over queries (the share of queries with a hit). With tied scores at the
    cut-off: the probability of a hit over the orders of the tied group,
    ``1 - C(g-r, m) / C(g, m)`` for ``m`` of its ``g`` places (``r`` relevant) above
    the cut-off.

    Runtime complexity: `update` `O(m log m)` for ``m`` candidates, `get` `O(1)`.

    >>> from streameval import HitAtK
    >>> metric = HitAtK(k=1)
    >>> metric.update([0, 1], [0.9, 0.2]).get()
    0.0
    >>> metric.update([0, 1], [0.5, 0.5]).get()
    0.25

    Parameters
    ----------
    k : int or None, default 10
    ignore_ties : bool, default False
    no_relevant : {"zero", "skip"}, default "zero"
    """

    def __init__(self, k=10, ignore_ties=False, no_relevant="zero"):
        super().__init__(k, ignore_ties, no_relevant)

    def _values(self, rk, relb):
        pos, p = rk.first_relevant(relb)
        if self.k is not None:
            keep = rk.rank[pos] < self.k
            pos, p = pos[keep], p[keep]
        hit = np.bincount(rk.qid[pos], p, minlength=rk.nq)
        return hit, rk.per_query(relb) > 0


class MRR(_QueryMetric):
    """Mean reciprocal rank: the mean over queries of ``1 / rank`` of the first
    relevant candidate (0 if none is relevant, or none in the top ``k`` if given).

    With tied scores: the expected reciprocal rank over the orders of the tied group
    where the first relevant candidate falls.

    Runtime complexity: `update` `O(m log m)` for ``m`` candidates, `get` `O(1)`.

    >>> from streameval import MRR
    >>> metric = MRR()
    >>> metric.update([0, 0, 1], [0.9, 0.5, 0.7]).get()
    0.5
    >>> metric.update([1, 0, 0]).get()
    0.75

    Parameters
    ----------
    k : int or None, default None
    ignore_ties : bool, default False
    no_relevant : {"zero", "skip"}, default "zero"
    """

    def __init__(self, k=None, ignore_ties=False, no_relevant="zero"):
        super().__init__(k, ignore_ties, no_relevant)

    def _values(self, rk, relb):
        pos, p = rk.first_relevant(relb)
        ranks = rk.rank[pos]
        if self.k is not None:
            keep = ranks < self.k
            pos, p, ranks = pos[keep], p[keep], ranks[keep]
        rr = np.bincount(rk.qid[pos], p / (ranks + 1.0), minlength=rk.nq)
        return rr, rk.per_query(relb) > 0


class APAtK(_QueryMetric):
    """Average precision at K, averaged over queries (MAP@K).

    ``AP@K = sum_{i<=K} P(i) rel(i) / min(#relevant, K)`` with ``P(i)`` the precision
    at rank ``i`` and ``rel(i)`` 1 if the candidate at rank ``i`` is relevant;
    ``k=None`` gives the classic (uncut) average precision. Undefined without
    relevant candidates: skipped by default. With tied scores: the expected value
    over the orders of each tied group (McSherry & Najork 2008): a place ``j`` of a
    group of ``g`` candidates, ``r`` relevant, after ``R`` relevant ones, adds
    ``(r/g) (R + 1 + (j-1)(r-1)/(g-1)) / i``.

    Runtime complexity: `update` `O(m log m)` for ``m`` candidates, `get` `O(1)`.

    >>> from streameval import APAtK
    >>> metric = APAtK(k=None)
    >>> rel = [1, 1, 0, 1, 0, 1, 0, 0, 0, 1]  # relevant at ranks 1, 2, 4, 6, 10
    >>> round(metric.update(rel).get(), 6)
    0.783333

    Parameters
    ----------
    k : int or None, default 10
    ignore_ties : bool, default False
    no_relevant : {"zero", "skip"}, default "skip"
    """

    _default_no_relevant = "skip"

    def __init__(self, k=10, ignore_ties=False, no_relevant="skip"):
        super().__init__(k, ignore_ties, no_relevant)

    def _values(self, rk, relb):
        total = rk.per_query(relb)
        k = self.k
        rank = rk.rank
        # relevant candidates strictly before each position (over the whole batch),
        # with one slot past the end so that empty queries index safely
        excl = np.zeros(rk.n + 1)
        np.cumsum(relb, out=excl[1:])
        before_q = excl[rk.qstart]  # before each query
        if rk.single:
            # relevant count up to and including each position, within its query
            term = relb * (excl[1:] - before_q[rk.qid]) / (rank + 1.0)
        else:
            gid, gsize = rk.gid, rk.gsize
            gr = np.bincount(gid, relb)
            gq = rk.qid[rk.gstart]
            before_g = excl[rk.gstart] - before_q[gq]  # in the query, before the group
            g = gsize[gid].astype(np.float64)
            r = gr[gid]
            j1 = rank - rank[rk.gstart][gid]  # place within the group, from 0
            extra = np.where(g > 1.0, j1 * (r - 1.0) / np.maximum(g - 1.0, 1.0), 0.0)
            term = (r / g) * (before_g[gid] + 1.0 + extra) / (rank + 1.0)
        if k is None:
            s = rk.per_query(term)
            denom = total
        else:
            mask = rank < k
            s = rk.per_query(term[mask], mask)
            denom = np.minimum(total, float(k))
        return s / np.maximum(denom, 1.0), total > 0


class MAPAtK(APAtK):
    """Mean average precision at K: the same metric as :class:`APAtK` (the mean of
    AP@K over queries), under the name people search for.

    Runtime complexity: `update` `O(m log m)` for ``m`` candidates, `get` `O(1)`.

    >>> from streameval import MAPAtK
    >>> metric = MAPAtK(k=5)
    >>> round(metric.update([1, 0, 1, 0, 1]).get(), 6)
    0.755556
    >>> round(metric.update([0, 1, 0, 0, 0]).get(), 6)  # mean of 0.755556 and 0.5
    0.627778

    Parameters
    ----------
    k : int or None, default 10
    ignore_ties : bool, default False
    no_relevant : {"zero", "skip"}, default "skip"
    """


_GAINS = ("linear", "exponential")
_DISCOUNTS = ("log", "jk")


class DCG(_QueryMetric):
    """Discounted cumulative gain at K, averaged over queries.

    ``DCG@K = sum_{i<=K} gain(rel_i) * d(i)`` with ``gain = rel`` (``"linear"``, as
    ``sklearn.metrics.dcg_score``) or ``2**rel - 1`` (``"exponential"``), and the
    discount ``d(i) = 1 / log_b(i + 1)`` (``"log"``, sklearn's) or Järvelin and
    Kekäläinen's ``d(i) = 1`` for ``i < b``, ``1 / log_b(i)`` after (``"jk"``: with
    ``b = 2`` the first rank is undiscounted). Tied scores: the gains of a tied group
    are averaged over its places (sklearn's ``ignore_ties=False``).

    Runtime complexity: `update` `O(m log m)` for ``m`` candidates, `get` `O(1)`.

    >>> from streameval import DCG
    >>> rel = [3, 2, 3, 0, 0, 1, 2, 2, 3, 0]  # in rank order
    >>> round(DCG(k=10).update(rel).get(), 6)
    8.318753
    >>> round(DCG(k=10, discount="jk").update(rel).get(), 6)
    9.605118

    Parameters
    ----------
    k : int or None, default None
    gain : {"linear", "exponential"}, default "linear"
    discount : {"log", "jk"}, default "log"
    log_base : float, default 2
    ignore_ties : bool, default False
    no_relevant : {"zero", "skip"}, default "zero"
    """

    def __init__(self, k=None, gain="linear", discount="log", log_base=2,
                 ignore_ties=False, no_relevant="zero"):
        super().__init__(k, ignore_ties, no_relevant)
        check_param("gain", gain, Options(*_GAINS))
        check_param("discount", discount, Options(*_DISCOUNTS))  # jk: Järvelin–Kekäläinen
        check_param("log_base", log_base, Real(1, open_low=True))
        self.gain = gain
        self.discount = discount
        self.log_base = log_base
        self._table = np.empty(0)

    def _discounts(self, ranks):
        """Discount of each 0-based rank, from a table grown with ``math.log`` (so that
        a rank's discount never depends on the batch it came in)."""
        need = int(ranks.max()) + 1 if ranks.size else 0
        t = self._table
        if need > t.size:
            lb = math.log(self.log_base)
            size = max(need, 2 * t.size, 16)
            if self.k is not None:  # ranks >= k are never asked for
                size = max(need, min(size, self.k))
            if self.discount == "log":
                vals = [1.0 / (math.log(i + 2) / lb) for i in range(size)]
            else:
                b = self.log_base
                vals = [1.0 if i + 1 < b else 1.0 / (math.log(i + 1) / lb) for i in range(size)]
            t = self._table = np.array(vals)
        return t[ranks]

    def _gains(self, rel):
        return rel if self.gain == "linear" else np.exp2(rel) - 1.0

    def _bad_relevance(self, rel):
        bad = super()._bad_relevance(rel)
        if bad is None and self.gain == "exponential" and rel.size and rel.max() > 1000.0:
            bad = int(np.argmax(rel > 1000.0)), "too large for exponential gain (2**rel overflows)"
        return bad

    def _dcg(self, rk):
        gains = rk.group_mean(self._gains(rk.rel))
        if self.k is None:
            return rk.per_query(gains * self._discounts(rk.rank))
        mask = rk.rank < self.k
        return rk.per_query(gains[mask] * self._discounts(rk.rank[mask]), mask)

    def _values(self, rk, relb):
        return self._dcg(rk), rk.per_query(relb) > 0


class NDCG(DCG):
    """Normalised DCG at K: DCG@K divided by the DCG@K of the ideal ranking,
    averaged over queries; equal to ``sklearn.metrics.ndcg_score`` with linear gain.

    ``NDCG@K = DCG@K / IDCG@K``; a query without relevant candidates has
    ``IDCG = 0`` and counts as 0, as in sklearn (``no_relevant="skip"`` leaves it
    out). Gains, discounts and ties as in :class:`DCG`.

    Runtime complexity: `update` `O(m log m)` for ``m`` candidates, `get` `O(1)`.

    >>> from streameval import NDCG
    >>> rel = [3, 2, 3, 0, 0, 1, 2, 2, 3, 0]  # in rank order
    >>> round(NDCG(k=10).update(rel).get(), 6)
    0.916809
    >>> round(NDCG().update([0, 1, 2], [0.1, 0.5, 0.5]).get(), 6)  # tie averaged
    0.929859

    Parameters
    ----------
    k : int or None, default None
    gain : {"linear", "exponential"}, default "linear"
    discount : {"log", "jk"}, default "log"
    log_base : float, default 2
    ignore_ties : bool, default False
    no_relevant : {"zero", "skip"}, default "zero"
    """

    def _values(self, rk, relb):
        dcg = self._dcg(rk)
        # the ideal ranking: relevances sorted high to low within each query
        if rk.nq == 1:
            ideal_rel = np.sort(rk.rel)[::-1]
        else:
            ideal_rel = rk.rel[np.lexsort((-rk.rel, rk.qid))]
        gains = self._gains(ideal_rel)
        if self.k is None:
            idcg = rk.per_query(gains * self._discounts(rk.rank))
        else:
            mask = rk.rank < self.k
            idcg = rk.per_query(gains[mask] * self._discounts(rk.rank[mask]), mask)
        defined = idcg > 0.0
        return dcg / np.where(defined, idcg, 1.0), defined
