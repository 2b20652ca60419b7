"""Weighted score order: the state behind exact ROC AUC, average precision and curves.

:class:`ScoreOrder` keeps, for every distinct score, the summed weight and the count
of positive and of negative events at that score, in score order, together with the
weighted Mann–Whitney statistic ``U`` of everything stored:

    U = sum over (positive i, negative j) of w_i * w_j * ([s_i > s_j] + 1/2 [s_i == s_j])

so that ``AUC = U / (P * N)`` (``P``, ``N``: total positive and negative weight) is
available at any time in `O(1)` (a flat order, below, computes ``U`` from its arrays at
the first read after a batch changed them: one numpy pass, once).

It keeps them in one of three layouts, chosen by the work that comes in (each
converts to another in `O(n)`, only when the work changes):

- **blocks**, for events one at a time with reads in between (a sliding window updated
  per event, a service fed single events): the layout of ``SortedList`` (sorted
  sublists, "blocks", of at most ``2 * load`` distinct scores and the ``_maxes`` of the
  blocks, both searched with ``bisect``) with parallel per-block weights and counts,
  plus two levels of totals: per block, and per group of :data:`GROUP` consecutive
  blocks. Why not a plain ``sortedcontainers.SortedList``: adding a positive with score
  ``s`` adds ``w * (W_neg(< s) + 1/2 W_neg(= s))`` to ``U``, a *weighted* prefix sum,
  which ``SortedList`` cannot give without walking its sublists. Here it is three
  ``sum`` calls over slices (groups before, blocks before in the group, scores before
  in the block), which run in C; an update adds the weight to one entry, one block
  total and one group total. `O(log(n))` searches plus
  `O(load + n / (load * GROUP) + GROUP)` C-level additions, about 150 at n = 10**6;
  this is cheaper than a Fenwick tree over the blocks, whose walks run in
  Python. Every block is an ``array.array`` of C doubles (or 64-bit counts): 8 bytes per
  value, no garbage-collector tracking, and numpy reads whole blocks at once.
- **flat** numpy arrays (scores, weights and counts per class; with unit weights the
  counts are the weights' arrays), for batches while the order holds at most
  :data:`FLAT_MAX` distinct scores (rounded scores, windows of a few thousand events):
  a batch is merged in (or subtracted) in one numpy pass and ``U`` recomputed, few
  numpy calls.
- **levels** (:mod:`streameval.metrics.levels`), for batches on bigger orders (distinct
  float scores, what models emit): sorted numpy runs per class of geometric sizes; a
  batch of ``m`` becomes a run, its pairs with every run counted by ``searchsorted``
  (`O(m log(n))`), runs merged when their sizes come close (amortised
  `O(log(n / m))` numpy passes per entry); a removal is a run of negated entries. AP's
  ``get`` reads the runs holding positives only.

Batches: :meth:`ScoreOrder.add_entries` and :meth:`ScoreOrder.remove_entries` take
events aggregated per distinct score. In blocks, few entries go one by one; more
(:data:`REBUILD_RATIO`, :data:`REMOVE_REBUILD_RATIO`) move the order to a bulk layout. In
levels, a run of tiny batches (the per-event pattern again) moves it back to blocks once
their numpy calls have cost about what the conversion does (:data:`TRICKLE_RATIO`).

Memory per distinct score with unit weights (tracemalloc, ``tests/test_levels.py`` and
``benchmarks/bench_ranking.py``): at most 24 bytes in the bulk layouts (levels: 16 per
stored (score, class) entry plus 8 per positive score while AP is read; flat: score and
one weight per class), 28 with AP's memo (up to 4 more per positive score while AP is
read: where the newer positive scores fall, see :mod:`streameval.metrics.levels`);
about 47 in blocks (five 8-byte values and block overhead: the price of the per-event
path). Weights other than 1 add the counts (8 bytes per entry),
fractional ones each score's exact weight (8 more).

Memory grows with distinct scores, not with events: a score whose last event is
reverted is deleted. A bounded order (:meth:`ScoreOrder.coarsen`, what the metrics'
``max_scores`` drives) stores each score under a coarser key, its mantissa truncated to
:attr:`ScoreOrder.bits` bits (:func:`coarse_key`: monotone, exact, nested), so that it
holds at most a given number of keys; ``U`` is then the statistic of the keys (pairs
inside a key count one half) and its state records ``bits``. The weight of those pairs,
``sum over keys of wp * wn`` (:meth:`ScoreOrder.pairs`, what the AUC's error bound is
made of), is then kept up to date as batches merge into the levels with integer
weights, `O(1)` to read. Exactness: with integer weights (the usual ``w=1``) every sum is an
integer and ``U`` a multiple of 1/2, exact while ``P * N < 2**52`` (about 10**8 events);
with fractional weights the sums carry the rounding of their additions (a few ulps per
operation: 50 000 events with reverts stay within 1e-12 of scikit-learn, tested), and a
class's totals and ``U`` are reset to exactly zero when its last event of non-zero
weight goes. Like any running float sum, weights spanning many orders of magnitude
(1e12 added, then reverted, next to weights of 1) lose the small ones' precision.

Imports: numpy, :mod:`streameval.metrics.levels` and :mod:`streameval.validation` only;
:mod:`streameval.metrics.ranking` builds its metrics on it.
"""

from __future__ import annotations

import itertools
import math
from array import array
from bisect import bisect_left

import numpy as np

from streameval.metrics.levels import Levels
from streameval.validation import REVERT_SLACK as _SLACK

__all__ = ["ScoreOrder", "DEFAULT_LOAD", "DEFAULT_MAX_SCORES", "coarse_key", "coarse_keys", "GROUP", "REBUILD_RATIO", "REMOVE_REBUILD_RATIO",
           "FLAT_MAX", "TRICKLE_ENTRIES", "TRICKLE_RATIO", "mann_whitney_u",
           "delong_variance", "delong_components"]

#: Target block size. A block holds between ``load / 2`` and ``2 * load`` distinct
#: scores (small blocks join a neighbour, as in ``SortedList``). Each event sums part of
#: one block and inserts into it (cost grows with the load); each split recomputes the
#: group totals after it (amortised cost shrinks with the load). Measured with
#: ``benchmarks/bench_ranking.py --tune``: 128 is among the fastest for all-distinct
#: scores and within 15% of the best (48-64) for 3-decimal scores.
DEFAULT_LOAD = 128

#: Blocks per group: the middle level of the prefix sums (``add`` and ``remove`` write
#: ``k >> 6`` for ``k // GROUP``).
GROUP = 64
_SHIFT = 6

#: A batch goes in entry by entry (`O(m log(n))`) when its distinct scores are fewer
#: than the stored ones divided by this; otherwise the stored arrays are extracted, the
#: batch inserted with numpy and the blocks rebuilt (`O(n + m)`). Measured with
#: ``--tune`` at n = 200 000: an entry costs about 8 us, a rebuild about 85 ns per stored
#: score, so the two meet near n / m = 100.
REBUILD_RATIO = 100

#: The same crossover for removing a batch (:meth:`ScoreOrder.remove_entries`): removing
#: an entry costs about 4.8 us at n = 100 000 (fewer Python steps than adding one), a
#: rebuild about 90 ns per stored score (``bench_ranking.py``, section 4): they meet
#: near n / m = 50.
REMOVE_REBUILD_RATIO = 50

#: Bulk layouts: up to this many distinct scores the order is flat numpy arrays (one
#: score per element, merged with a batch in one pass: few numpy calls, cheap while
#: the order is small); beyond, numpy levels (:mod:`streameval.metrics.levels`) whose
#: batch merges cost `O(m log(n))`, not `O(n)`, at the price of more numpy calls.
FLAT_MAX = 16384

#: In the bulk layout, a batch of fewer entries than this is "tiny": a numpy call per
#: level costs more than adding its entries one by one in blocks.
TRICKLE_ENTRIES = 16

#: After this many tiny batches per stored entry... precisely: once the number of tiny
#: batches added in the bulk layout times this reaches the stored entries, the order
#: moves to blocks (an `O(n)` conversion, paid for by the numpy calls it saves: the
#: rent-or-buy rule, never more than twice the cheaper choice in hindsight).
TRICKLE_RATIO = 2048

_F8 = np.float64
_I8 = np.int64

#: The default cap of a bounded order (:meth:`ScoreOrder.coarsen`): once it holds more
#: than twice this many entries, its keys are coarsened until at most this many distinct
#: keys are left. Chosen so that a stream of continuous scores in ``(0, 1)`` saturates
#: at 18 mantissa bits (about 2.4 million keys over the binades that hold events):
#: the AUC bound is then about ``2**-19 * (share of mixed pairs)``, at most 7e-7 for
#: uniform scores with no skill at 30% positives, about 3e-7 for a model that
#: separates the classes (``benchmarks/bench_longrun.py`` prints it). Memory: at most
#: about ``2 * DEFAULT_MAX_SCORES`` entries of 16 to 28 bytes (see the module notes).
DEFAULT_MAX_SCORES = 1 << 22


def coarse_key(s, bits):
    """The key of score ``s`` with its mantissa truncated to ``bits`` bits (toward zero;
    the leading bit is kept, so ``bits + 1`` significant bits): a monotone map
    (``s <= t`` gives ``coarse_key(s) <= coarse_key(t)``), exact (no rounding), the
    identity at 52 bits, and nested: ``coarse_key(coarse_key(s, b), c) ==
    coarse_key(s, c)`` for ``c <= b``, so lowering ``bits`` merges runs of adjacent
    keys. Floats have more keys near 0 (each binade ``[2**e, 2**(e+1))`` gets ``2**bits``
    keys), which suits skewed scores. ``-0.0`` becomes ``0.0``.

    >>> coarse_key(0.7, 2), coarse_key(0.74, 2), coarse_key(0.76, 2), coarse_key(-0.3, 1)
    (0.625, 0.625, 0.75, -0.25)
    """
    m, e = math.frexp(s)
    return math.ldexp(math.trunc(math.ldexp(m, bits + 1)), e - bits - 1) + 0.0


def coarse_keys(s, bits):
    """:func:`coarse_key` of every element of the float64 array ``s`` (numpy): the low
    ``52 - bits`` bits of each float's stored mantissa cleared (for a normal float that
    is its mantissa truncated toward zero, keeping ``bits + 1`` significant bits);
    subnormals (whose leading bit is not at the top of the field), NaN and infinities
    take :func:`coarse_key`'s ``frexp`` route. A fresh array.

    Runtime complexity: `O(n)`, a few integer passes."""
    out = np.array(s, dtype=_F8)  # (a copy)
    out += 0.0  # -0.0 -> 0.0
    if bits >= 52:
        return out
    u = out.view(np.uint64)
    e = u & _EXP_BITS
    odd = np.flatnonzero(((e == 0) & (u != 0)) | (e == _EXP_BITS))
    u &= ~np.uint64((1 << (52 - bits)) - 1)
    if len(odd):
        out[odd] = _coarse_keys_frexp(np.asarray(s, dtype=_F8)[odd], bits)
    return out


#: the exponent field of a float64 (all zeros: zero or subnormal; all ones: inf, NaN)
_EXP_BITS = np.uint64(0x7FF0000000000000)


def _coarse_keys_frexp(s, bits):
    """:func:`coarse_keys` by ``frexp``/``ldexp`` (every float, subnormals included)."""
    m, e = np.frexp(s)
    out = np.ldexp(np.trunc(np.ldexp(m, bits + 1)), e - bits - 1)
    out += 0.0
    return out


def _count_keys(keys, bits):
    """Distinct keys of the ascending ``keys`` at ``bits`` (the map is monotone)."""
    if not len(keys):
        return 0
    k = coarse_keys(keys, bits)
    return 1 + int(np.count_nonzero(k[1:] != k[:-1]))


def _key_counter(keys):
    """``count(bits)``: :func:`_count_keys` of the ascending ``keys`` at any ``bits``,
    each call one comparison pass. Two neighbours share their key at ``bits`` when the
    XOR of their bit patterns is below ``2**(52 - bits)`` (no differing bit among those
    kept), so the XORs, computed once, answer every ``bits``; keys holding a subnormal,
    ``-0.0``, NaN or an infinity (:func:`_unusual_keys`) count by :func:`_count_keys`.
    Memory: one uint64 per key."""
    n = len(keys)
    if n < 2:
        return lambda bits: n
    if _unusual_keys(keys):
        return lambda bits: _count_keys(keys, bits)
    u = np.ascontiguousarray(keys, dtype=_F8).view(np.uint64)
    d = u[1:] ^ u[:-1]
    del u

    def count(bits):
        if bits >= 52:
            return 1 + int(np.count_nonzero(d))
        return 1 + int(np.count_nonzero(d >= np.uint64(1 << (52 - bits))))

    return count


def _unusual_keys(keys):
    """Whether the ascending ``keys`` hold a subnormal, ``-0.0``, NaN or an infinity
    (what the bit-pattern shortcuts of coarsening leave to the general path). Two
    searches and a look at the keys below the smallest normal float."""
    n = len(keys)
    if not n:
        return False
    if not (np.isfinite(keys[0]) and np.isfinite(keys[-1])):
        return True
    a, b = keys.searchsorted(-_TINY, "right"), keys.searchsorted(_TINY)
    tiny = keys[a:b]  # |key| < the smallest normal: only +0.0 is usual
    return bool(len(tiny)) and not (len(tiny) == 1 and tiny.view(np.uint64)[0] == 0)


#: the smallest normal float64
_TINY = np.finfo(np.float64).tiny


def _coarse_runs(side, bits):
    """``(coarse keys, weights, counts)`` of one class's merged side at ``bits``: its
    keys' runs that share a coarse key (neighbours whose bit patterns differ only
    below the ``bits`` kept), each run's weight and count from the side's running
    sums "at or above" (exact for integer weights)."""
    k = side.k
    n = len(k)
    u = k.view(np.uint64)
    change = (u[1:] ^ u[:-1]) >= np.uint64(1 << (52 - bits)) if bits < 52 else u[1:] != u[:-1]
    starts = np.empty(int(np.count_nonzero(change)) + 1, dtype=_I8)
    starts[0] = 0
    starts[1:] = np.flatnonzero(change)
    starts[1:] += 1
    del change
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1] = n
    w = side.w
    c = w if side.c is None else side.c
    return (coarse_keys(k[starts], bits), w[starts] - w[ends],
            (c[starts] - c[ends]).astype(_I8))


def coarsened(arrays, bits):
    """The per-score arrays ``(keys, wp, wn, cp, cn)`` (ascending) with their keys
    mapped by :func:`coarse_key` at ``bits`` and the entries of one key summed (one
    ``np.add.reduceat`` per column over the runs: the map is monotone)."""
    keys, wp, wn, cp, cn = arrays
    if not len(keys):
        return arrays
    k = coarse_keys(keys, bits)
    starts = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
    if len(starts) == len(k):
        return k, wp, wn, cp, cn
    return (k[starts], np.add.reduceat(wp, starts), np.add.reduceat(wn, starts),
            np.add.reduceat(cp, starts), np.add.reduceat(cn, starts))


def mann_whitney_u(wp, wn, ints=False):
    """``U`` of per-score weights ``wp``, ``wn`` in ascending score order (numpy).

    ``ints``: the weights are integers with a total below ``2**53``, so the prefix sums
    run in int64 (the same values, cheaper than a float64 ``cumsum``).

    >>> float(mann_whitney_u(np.array([0.0, 1.0, 1.0]), np.array([1.0, 1.0, 0.0])))
    3.5
    """
    if len(wp) == 0:
        return 0.0
    if ints:
        below = np.cumsum(wn.astype(np.int64)).astype(np.float64)
        below -= wn
    else:
        below = np.cumsum(wn) - wn  # negative weight strictly below each score
    below += 0.5 * wn
    below *= wp  # (not np.dot: OpenBLAS threads spin, see metrics.levels)
    return float(below.sum())


def delong_variance(wp, wn, auc, pos_weight, neg_weight, ints=False):
    """DeLong's variance of the AUC ``auc`` from per-score weights ``wp``, ``wn`` in
    ascending score order (numpy), ``pos_weight`` and ``neg_weight`` (``P``, ``N``) the
    class totals; NaN when ``P <= 1`` or ``N <= 1`` (no variance estimate) or ``auc`` is
    NaN. One vectorised pass over the distinct scores.

    For each distinct score ``s``, the structural components of DeLong, DeLong and
    Clarke-Pearson (1988), "Comparing the areas under two or more correlated ROC
    curves": a positive's share of the negatives it beats (ties 1/2),
    ``V10(s) = (W_neg(< s) + W_neg(= s) / 2) / N``, and a negative's share of the
    positives above it, ``V01(s) = (W_pos(> s) + W_pos(= s) / 2) / P``; then
    ``S10 = sum_s wp(s) (V10(s) - auc)^2 / (P - 1)``,
    ``S01 = sum_s wn(s) (V01(s) - auc)^2 / (N - 1)`` and ``Var = S10 / P + S01 / N``:
    the classic estimator with unit weights, weights as frequency weights otherwise.
    Equal to the pairwise definition, every event's component computed over all pairs,
    with events grouped per score (events at one score share their component).

    ``ints``: the weights are integers with a total below ``2**53``: prefix sums in
    int64 (exact, faster; as :func:`mann_whitney_u`).

    >>> wp, wn = np.array([0.0, 1.0, 0.0, 1.0]), np.array([1.0, 0.0, 1.0, 0.0])
    >>> delong_variance(wp, wn, 0.75, 2.0, 2.0)  # V10 = 1/2, 1; V01 = 1, 1/2
    0.125
    """
    p, n = pos_weight, neg_weight
    if not (p > 1.0 and n > 1.0) or auc != auc or not len(wp):
        return math.nan
    s10, s01 = delong_components(wp, wn, auc, p, n, ints)
    return s10 / p + s01 / n


def delong_components(wp, wn, auc, pos_weight, neg_weight, ints=False):
    """DeLong's ``(S10, S01)``: the weighted sample variances of the positives' and of the
    negatives' structural components (see :func:`delong_variance`, whose variance is
    ``S10 / P + S01 / N``), for a caller that treats the two sides apart. ``P > 1``,
    ``N > 1`` and a defined ``auc`` are the caller's to check.

    >>> wp, wn = np.array([0.0, 1.0, 0.0, 1.0]), np.array([1.0, 0.0, 1.0, 0.0])
    >>> delong_components(wp, wn, 0.75, 2.0, 2.0)
    (0.125, 0.125)
    """
    p, n = pos_weight, neg_weight
    if ints:
        below = np.cumsum(wn.astype(np.int64)).astype(np.float64)
        above = np.cumsum(wp.astype(np.int64)).astype(np.float64)
    else:
        below = np.cumsum(wn)
        above = np.cumsum(wp)
    # V10: negative weight at or below, less half the weight at the score
    below -= 0.5 * wn
    below /= n
    below -= auc
    below *= below
    below *= wp  # (not np.dot: OpenBLAS threads spin, see metrics.levels)
    s10 = float(below.sum()) / (p - 1.0)
    # V01: positive weight above (the total less the weight at or below), half at
    above = above[-1] - above
    above += 0.5 * wp
    above /= p
    above -= auc
    above *= above
    above *= wn
    s01 = float(above.sum()) / (n - 1.0)
    return s10, s01


def _groups(totals, start=0):
    """Group totals of the block totals ``totals`` from group ``start`` on."""
    return array("d", [sum(totals[a : a + GROUP])
                       for a in range(start << _SHIFT, len(totals), GROUP)])


def _flat(blocks, dtype):
    """One (writable) numpy array of a list of ``array.array`` blocks: a single
    ``bytearray.join``: one copy, instead of a ``frombuffer`` and a concatenation per
    block."""
    return np.frombuffer(bytearray().join(blocks), dtype=dtype)


_EXACT = float(2**53)
#: :meth:`ScoreOrder.refresh` recomputes ``U`` and the totals once removals have
#: taken out this many times what they hold: their rounding is then at most about
#: ``REFRESH * 1e-16`` of the value (1e-13), and the `O(n)` recomputation is spread
#: over that many removals' worth.
REFRESH = 512.0

#: the attributes of the block layout (built lazily after a bulk rebuild)
_BLOCKS = ("_keys", "_wp", "_wn", "_cp", "_cn", "_maxes", "_tp", "_tn", "_gp", "_gn")


def _pairs_sum(wp, wn, integral):
    """``sum(wp * wn)``: with integer weights the exact integer (int64 products and sum
    while the class totals' product stays below ``2**62``, Python integers beyond), else
    numpy's float sum of the products."""
    if not integral:
        prod = wp * wn
        return float(prod.sum())
    ip, iN = wp.astype(_I8), wn.astype(_I8)
    if float(wp.sum()) * float(wn.sum()) < 2.0**62:
        ip *= iN
        return int(ip.sum())
    return sum(map(int.__mul__, ip.tolist(), iN.tolist()))


def _integers(x):
    """Whether every value of the float array ``x`` is an integer."""
    return bool(np.all(np.floor(x) == x))


def _merged(stored, keys, wp, wn, cp, cn, inplace=True):
    """``stored`` (writable arrays) plus ascending distinct entries, by numpy: scores
    already stored are added (in place unless ``inplace`` is false: then ``stored`` is
    left as it was), the others inserted, `O(n + m)`."""
    k0, p0, n0, c0, d0 = stored
    n = len(k0)
    if not n:  # (copies: the order keeps what this returns, and writes to it)
        return keys.copy(), wp.copy(), wn.copy(), cp.copy(), cn.copy()
    pos = np.searchsorted(k0, keys)
    hit = pos < n
    hit[hit] = k0[pos[hit]] == keys[hit]
    at = pos[hit]  # scores already stored: add
    unit = c0 is p0  # unit weights: the counts are the weights (one array each)
    if len(at):
        if not inplace:
            p0, n0 = p0.copy(), n0.copy()
            c0, d0 = (p0, n0) if unit else (c0.copy(), d0.copy())
        p0[at] += wp[hit]
        n0[at] += wn[hit]
        if not unit:
            c0[at] += cp[hit]
            d0[at] += cn[hit]
    new = ~hit  # the others: insert at their positions
    k = int(new.sum())
    if not k:
        return k0, p0, n0, c0, d0
    # one placement for the arrays (np.insert would recompute it for each)
    slots = pos[new] + np.arange(k)  # where the inserted entries land
    old = np.ones(n + k, dtype=bool)
    old[slots] = False
    out = []
    cols = ((k0, keys), (p0, wp), (n0, wn)) + (() if unit else ((c0, cp), (d0, cn)))
    for stored_col, col in cols:
        merged = np.empty(n + k, dtype=stored_col.dtype)
        merged[old] = stored_col
        merged[slots] = col[new]
        out.append(merged)
    if unit:
        out += out[1:3]
    return tuple(out)


def _subtracted(stored, keys, wp, wn, cp, cn, scale_p, scale_n):
    """``stored`` (writable arrays) less ascending distinct entries, by numpy, or
    ``KeyError(bad)`` (``bad``: the entries with more events than stored, or more
    weight beyond rounding, ``scale_*`` the class totals) before any write. A class's
    weight at a score whose last event goes is set to exactly 0, and scores left
    without events are dropped. Only the touched scores are looked at, then one
    compaction."""
    k0, p0, n0, c0, d0 = stored
    n, m = len(k0), len(keys)
    if not n:
        raise KeyError(np.ones(m, dtype=bool))
    unit = c0 is p0  # unit weights: the counts are the weights (one array each)
    pos = np.minimum(np.searchsorted(k0, keys), n - 1)
    hit = k0[pos] == keys
    wsp, wsn = p0[pos], n0[pos]
    sp, sn = (wsp, wsn) if unit else (c0[pos], d0[pos])
    bad = ~hit | (cp > sp) | (cn > sn)
    if not unit:
        bad |= _overdrawn(wsp, wp, scale_p)
        bad |= _overdrawn(wsn, wn, scale_n)
    if bad.any():
        raise KeyError(bad)
    if not unit:
        sp -= cp
        sn -= cn
        c0[pos] = sp
        d0[pos] = sn
    wsp -= wp
    wsn -= wn
    if not unit:
        wsp[sp == 0] = 0.0  # last event of a class at a score: no rounding left
        wsn[sn == 0] = 0.0
    p0[pos] = wsp
    n0[pos] = wsn
    gone = pos[(sp + sn) == 0]
    if len(gone):
        keep = np.ones(n, dtype=bool)
        keep[gone] = False
        k0, p0, n0 = k0[keep], p0[keep], n0[keep]
        if unit:
            return k0, p0, n0, p0, n0
        return k0, p0, n0, c0[keep], d0[keep]
    return k0, p0, n0, c0, d0


def _replaced_unit(stored, added, removed):
    """A flat order's unit-weight arrays ``stored`` with the entries ``added`` merged in
    and ``removed`` taken out (``(keys, wp, wn, cp, cn)`` each, every weight 1), as
    :func:`_subtracted` of :func:`_merged` gives them, or None where that is not the
    simple case this handles: every added score new to ``stored``, every removed one
    stored there with at least the events removed (then the two functions run instead,
    and refuse what they refuse).

    Why: a sliding window's batch in and its expired events out, every batch, on the
    flat order. The two functions make two `O(n)` passes per column (insert, then
    compact) and search the removed scores in the merged arrays; here the removed
    scores are searched in the stored ones and each column is one gather through one
    index. The same bits: with weights of 1 every value is an exact integer count, and
    each output value is the stored or added one, or the stored one less the removed
    one, the same subtraction."""
    k0, p0, n0 = stored[:3]
    ak, ap, an = added[:3]
    rk, rp, rn = removed[:3]
    n, a = len(k0), len(ak)
    if not n:
        return None
    pa = k0.searchsorted(ak)
    if (k0[np.minimum(pa, n - 1)] == ak).any():  # an added score is stored: add to it
        return None
    pr = k0.searchsorted(rk)
    if pr[-1] >= n or (k0[pr] != rk).any():  # a removed score is not stored
        return None
    sp = p0[pr] - rp
    sn = n0[pr] - rn
    if (sp < 0.0).any() or (sn < 0.0).any():  # more removed than stored: refused
        return None
    left = (sp + sn) != 0.0
    gone = pr[~left]  # scores left without events (ascending)
    # the output is the kept stored entries and the added ones, in score order: each
    # added entry lands after the kept stored entries below it and the added before it
    g = len(gone)
    size = n - g + a
    src = np.empty(size, dtype=_I8)  # per output entry: its index in (stored, added)
    dest = pa + np.arange(a)
    if g:
        dest -= gone.searchsorted(pa)
        keep = np.ones(n, dtype=bool)
        keep[gone] = False
        kept = np.flatnonzero(keep)
    else:
        kept = np.arange(n)
    fresh = np.zeros(size, dtype=bool)
    fresh[dest] = True
    src[~fresh] = kept
    src[dest] = np.arange(n, n + a)
    p = np.concatenate((p0, ap))
    q = np.concatenate((n0, an))
    if left.any():  # scores that keep events of one class or both: what is left there
        at = pr[left]
        p[at] = sp[left]
        q[at] = sn[left]
    keys = np.concatenate((k0, ak))[src]
    p, q = p[src], q[src]
    return keys, p, q, p, q


def _count(k, cls):
    """``"1 positive event"``, ``"3 negative events"`` (for messages)."""
    return f"{int(k)} {cls} event" + ("" if k == 1 else "s")


def _zeros(n):
    return array("d", bytes(8 * n))


def _overdrawn(at, w, scale):
    """Whether taking weight ``w`` from a class's stored weight ``at`` at one score goes
    further below zero than rounding explains (base ``overdrawn``'s rule, ``scale`` the
    class's total weight): the events removed were never added with that weight.
    Elementwise on numpy arrays."""
    return at - w < -(1e-9 * w + _SLACK * scale)


class ScoreOrder:
    """Distinct scores in order with per-score positive/negative weights, and ``U``.

    Runtime complexity: `O(log(n))` for :meth:`add` and :meth:`remove` (``n`` distinct
    scores; see the module notes for the constant); for :meth:`add_entries` and
    :meth:`remove_entries` of ``m`` entries `O(m log(n))` numpy on a big order (plus
    amortised merges), `O(n + m)` numpy on a flat one; `O(1)` for :meth:`auc` (plus
    one numpy pass at the first read of ``U`` after a batch changed a flat order);
    `O(n)` (numpy) for :meth:`weights` and :meth:`arrays`.

    >>> o = ScoreOrder()
    >>> for s, y in [(0.9, True), (0.8, False), (0.3, False), (0.9, False)]:
    ...     o.add(s, y, 1.0)
    >>> o.auc()  # the positive beats 2 negatives and ties 1, out of 3 pairs
    0.8333333333333334
    >>> o.remove(0.9, False, 1.0)
    >>> o.auc(), len(o)
    (1.0, 3)

    Parameters
    ----------
    load
        Target block size (see :data:`DEFAULT_LOAD`).
    """

    __slots__ = ("_load", "_twice", "_keys", "_wp", "_wn", "_cp", "_cn", "_maxes", "_tp",
                 "_tn", "_gp", "_gn", "_u", "_u_from", "pos_weight", "neg_weight", "n_pos",
                 "n_neg", "z_pos", "z_neg", "stamp", "integral", "unit", "_levels", "_arrays",
                 "_trickle", "_shed_u", "_shed_p", "_shed_n", "bits", "_pairs", "_pairs_at",
                 "_layout_memo")

    def __init__(self, load=DEFAULT_LOAD):
        if not isinstance(load, int) or load < 4:
            raise ValueError(f"load = {load!r}: must be an int >= 4")
        self._load = load
        self._twice = 2 * load
        self.stamp = 0  # bumped at every change (lets callers cache derived values)
        self._layout_memo = None  # what to_layout gave of a flat order (_FlatLog)
        self.clear()

    def clear(self):
        """Forget every event."""
        self._levels = None  # the bulk layout of a big order (Levels), or None
        self._arrays = None  # the bulk layout of a small one (flat arrays), or None
        self._trickle = 0  # small bulk adds since the levels were last built
        self._keys = []  # blocks (array "d") of distinct scores, ascending
        self._wp = []  # blocks (array "d") of summed positive weights per score
        self._wn = []  # blocks (array "d") of summed negative weights per score
        self._cp = []  # blocks (array "q") of positive event counts per score
        self._cn = []  # blocks (array "q") of negative event counts per score
        self._maxes = array("d")  # last score of each block
        self._tp = array("d")  # positive weight of each block
        self._tn = array("d")  # negative weight of each block
        self._gp = array("d")  # positive weight of each group of GROUP blocks
        self._gn = array("d")  # negative weight of each group
        self.u = 0.0  # Mann–Whitney U (weighted)
        self.pos_weight = 0.0
        self.neg_weight = 0.0
        # bounds on what removals of weights other than 1 took out of U and the totals
        # since they were last computed from the per-score weights (see refresh)
        self._shed_u = self._shed_p = self._shed_n = 0.0
        self.n_pos = 0  # positive events
        self.n_neg = 0
        self.z_pos = 0  # positive events with weight 0
        self.z_neg = 0
        self.integral = True  # every weight ever added is an integer (see exact_ints)
        self.unit = True  # every weight ever added is 1: counts equal weights
        #: None: the keys are the exact scores; else the keys are the scores'
        #: :func:`coarse_key` at this many mantissa bits (see :meth:`coarsen`)
        self.bits = None
        # sum over keys of wp * wn (see pairs), valid while _pairs_at is the stamp
        self._pairs = 0.0
        self._pairs_at = -1
        self.stamp += 1

    def __len__(self):
        """Number of distinct scores stored. `O(n)` in the bulk layout (its levels are
        merged), `O(n / load)` in blocks."""
        if self._arrays is not None:
            return len(self._arrays[0])
        if self._levels is not None:
            return len(self._levels.entries()[0])
        return sum(map(len, self._keys))

    def size(self):
        """Entries stored: distinct scores in blocks; (score, class) entries of every
        level in the bulk layout (a score may be counted more than once there).
        `O(1)`-ish: what batch paths compare batch sizes with."""
        if self._arrays is not None:
            return len(self._arrays[0])
        if self._levels is not None:
            return self._levels.size
        return sum(map(len, self._keys))

    @property
    def bulk(self):
        """Whether the order is in a bulk layout (numpy) rather than blocks."""
        return self._levels is not None or self._arrays is not None

    @property
    def levelled(self):
        """Whether the order is in the bulk layout of big orders (numpy levels)."""
        return self._levels is not None

    def __getattr__(self, name):
        # the blocks after bulk work are built on first use (see _rebuild)
        if name in _BLOCKS and (self._levels is not None or self._arrays is not None):
            self._materialize()
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def u(self):
        """The weighted Mann–Whitney ``U`` of everything stored. A flat order's ``U``
        is computed from its arrays when first read after the batch that changed them
        (:meth:`_install`): a sliding window changes its order at every batch and may
        be read far less often. Runtime complexity: `O(1)`, or one numpy pass
        (:func:`mann_whitney_u`) for the first read after such a batch."""
        if self._u_from is not None:
            self._compute_u()
        return self._u

    @u.setter
    def u(self, value):
        self._u = value
        self._u_from = None

    def _compute_u(self):
        """``U`` from the arrays :meth:`_install` left it to (unchanged since: every
        path that writes to them installs new ones or sets ``U`` first)."""
        wp, wn, ints = self._u_from
        self._u = mann_whitney_u(wp, wn, ints)
        self._u_from = None

    @property
    def nz_pos(self):
        """Positive events with a weight > 0."""
        return self.n_pos - self.z_pos

    @property
    def nz_neg(self):
        """Negative events with a weight > 0."""
        return self.n_neg - self.z_neg

    # ------------------------------------------------------------------ one event
    def add(self, s, positive, w):
        """Add one event (score ``s``, a finite float; weight ``w`` >= 0).

        Runtime complexity: `O(log(n))`.
        """
        if w != 1.0:
            self.unit = False
            if w != int(w):
                self.integral = False
        maxes = self._maxes
        if not maxes:
            self._insert_first(s, positive, w)
            return
        k = bisect_left(maxes, s)
        if k == len(maxes):  # above every stored score: append to the last block
            k -= 1
            maxes[k] = s
            keys = self._keys[k]
            i = len(keys)
            found = False
        else:
            keys = self._keys[k]
            i = bisect_left(keys, s)
            found = keys[i] == s
        g = k >> 6  # k // GROUP
        if positive:
            # negative weight below s: groups before, blocks before, scores before
            other = self._wn[k]
            totals = self._tn
            if g:
                below = sum(self._gn[:g]) + sum(totals[g << 6 : k])
            else:
                below = sum(totals[:k])
            if i + i <= len(other):
                below += sum(other[:i])
            else:
                below += totals[k] - sum(other[i:])
            if found:
                self._u += w * (below + 0.5 * other[i])
                self._wp[k][i] += w
                self._cp[k][i] += 1
            else:
                self._u += w * below
                keys.insert(i, s)
                self._wp[k].insert(i, w)
                other.insert(i, 0.0)
                self._cp[k].insert(i, 1)
                self._cn[k].insert(i, 0)
            self._tp[k] += w
            self._gp[g] += w
            self.pos_weight += w
            self.n_pos += 1
            if not w:
                self.z_pos += 1
        else:
            other = self._wp[k]
            totals = self._tp
            if g:
                below = sum(self._gp[:g]) + sum(totals[g << 6 : k])
            else:
                below = sum(totals[:k])
            if i + i <= len(other):
                below += sum(other[:i])
            else:
                below += totals[k] - sum(other[i:])
            if found:
                self._u += w * (self.pos_weight - below - 0.5 * other[i])
                self._wn[k][i] += w
                self._cn[k][i] += 1
            else:
                self._u += w * (self.pos_weight - below)
                keys.insert(i, s)
                self._wn[k].insert(i, w)
                other.insert(i, 0.0)
                self._cn[k].insert(i, 1)
                self._cp[k].insert(i, 0)
            self._tn[k] += w
            self._gn[g] += w
            self.neg_weight += w
            self.n_neg += 1
            if not w:
                self.z_neg += 1
        self.stamp += 1
        if not found and len(keys) > self._twice:
            self._split(k)

    def remove(self, s, positive, w, _checked=False):
        """Remove one event added earlier (same score, label and weight).

        Raises ``KeyError`` (state unchanged) if no such event is stored: no event of
        this class at ``s``, or less weight there than ``w`` (beyond rounding).
        ``_checked``: the weight was checked already (a batch, before any change).
        Runtime complexity: `O(log(n))`.
        """
        maxes = self._maxes
        k = bisect_left(maxes, s)
        if k == len(maxes):
            raise KeyError(s)
        keys = self._keys[k]
        i = bisect_left(keys, s)
        if keys[i] != s:
            raise KeyError(s)
        # (one branch per class, each block array fetched once: this runs per event)
        g = k >> 6
        if positive:
            counts, mine, other, others = self._cp[k], self._wp[k], self._wn[k], self._cn[k]
            # no event of the class here; a zero-weight event where none is stored, or
            # a weighted one where all weigh 0; more weight than the class holds here
            # (beyond rounding; with weights of 1 only, the count is the weight)
            if not counts[i] or (self.z_pos == 0 if not w else self.n_pos == self.z_pos) or (
                    not (_checked or (w == 1.0 and self.unit))
                    and mine[i] - w < -(1e-9 * w + _SLACK * self.pos_weight)):
                raise KeyError(s)  # (``_overdrawn`` inlined)
            totals = self._tn
            if g:
                below = sum(self._gn[:g]) + sum(totals[g << 6 : k])
            else:
                below = sum(totals[:k])
            if i + i <= len(other):
                below += sum(other[:i])
            else:
                below += totals[k] - sum(other[i:])
            self._u -= w * (below + 0.5 * other[i])
            totals, groups = self._tp, self._gp
            self.pos_weight -= w
            self.n_pos -= 1
            if not w:
                self.z_pos -= 1
        else:
            counts, mine, other, others = self._cn[k], self._wn[k], self._wp[k], self._cp[k]
            if not counts[i] or (self.z_neg == 0 if not w else self.n_neg == self.z_neg) or (
                    not (_checked or (w == 1.0 and self.unit))
                    and mine[i] - w < -(1e-9 * w + _SLACK * self.neg_weight)):
                raise KeyError(s)
            totals = self._tp
            if g:
                below = sum(self._gp[:g]) + sum(totals[g << 6 : k])
            else:
                below = sum(totals[:k])
            if i + i <= len(other):
                below += sum(other[:i])
            else:
                below += totals[k] - sum(other[i:])
            self._u -= w * (self.pos_weight - below - 0.5 * other[i])
            totals, groups = self._tn, self._gn
            self.neg_weight -= w
            self.n_neg -= 1
            if not w:
                self.z_neg -= 1
        if w != 1.0:  # (a weight other than the one added would do it)
            self.unit = False
            if w != int(w):
                self.integral = False
            if positive:  # (what U lost is at most w times the other class's weight)
                self._shed_p += w
                self._shed_u += w * self.neg_weight
            else:
                self._shed_n += w
                self._shed_u += w * self.pos_weight
        c = counts[i] - 1
        counts[i] = c
        if c:
            delta = w
            mine[i] -= w
        else:  # last event of this class at s: drop the accumulated rounding too
            delta = mine[i]
            mine[i] = 0.0
        totals[k] -= delta
        groups[g] -= delta
        self.stamp += 1
        if not c and not other[i] and not others[i]:  # no event left at s
            if len(keys) > (self._load >> 1) + 1:  # (the common case of _delete, inlined)
                del keys[i], counts[i], mine[i], other[i], others[i]
                if i == len(keys):
                    maxes[k] = keys[-1]
            else:
                self._delete(k, i)
        if self.n_pos == self.z_pos or self.n_neg == self.z_neg:
            self._settle()

    def contains(self, s, positive, count=1, w=None):
        """Whether ``count`` events of this class with score ``s`` are stored (and, given
        a weight ``w``, as many of this class with weight 0, or > 0, as ``w`` is: what
        :meth:`remove` checks)."""
        k, i = self._find(s)
        if k < 0 or (self._cp if positive else self._cn)[k][i] < count:
            return False
        if w is None:
            return True
        if _overdrawn((self._wp if positive else self._wn)[k][i], count * w,
                      self.pos_weight if positive else self.neg_weight):
            return False
        n, z = (self.n_pos, self.z_pos) if positive else (self.n_neg, self.z_neg)
        return (z if not w else n - z) >= count

    def _find(self, s):
        maxes = self._maxes
        k = bisect_left(maxes, s)
        if k == len(maxes):
            return -1, -1
        keys = self._keys[k]
        i = bisect_left(keys, s)
        if keys[i] != s:
            return -1, -1
        return k, i

    def _below(self, k, i, positive_weights):
        """Weight of one class strictly below position ``(k, i)``."""
        groups, totals, blocks = ((self._gp, self._tp, self._wp) if positive_weights
                                  else (self._gn, self._tn, self._wn))
        g = k >> _SHIFT
        return sum(groups[:g]) + sum(totals[g << _SHIFT : k]) + sum(blocks[k][:i])

    # ------------------------------------------------------------------ structure
    def _insert_first(self, s, positive, w):
        self.stamp += 1  # (readers cache by stamp: the order was empty)
        self._set_blocks(
            np.array([s]),
            np.array([w if positive else 0.0]),
            np.array([0.0 if positive else w]),
            np.array([int(positive)]),
            np.array([int(not positive)]),
        )
        if positive:
            self.pos_weight += w
            self.n_pos += 1
            self.z_pos += not w
        else:
            self.neg_weight += w
            self.n_neg += 1
            self.z_neg += not w

    def _split(self, k):
        half = self._load
        for blocks in (self._keys, self._wp, self._wn, self._cp, self._cn):
            block = blocks[k]
            blocks.insert(k + 1, block[half:])
            del block[half:]
        self._maxes.insert(k, self._keys[k][-1])
        self._tp[k : k + 1] = array("d", [sum(self._wp[k]), sum(self._wp[k + 1])])
        self._tn[k : k + 1] = array("d", [sum(self._wn[k]), sum(self._wn[k + 1])])
        self._regroup(k >> _SHIFT)

    def _regroup(self, g):
        """Recompute the group totals from group ``g`` on (block indices shifted)."""
        self._gp[g:] = _groups(self._tp, g)
        self._gn[g:] = _groups(self._tn, g)

    def _delete(self, k, i):
        keys = self._keys[k]
        if len(keys) == 1:
            for seq in (self._keys, self._wp, self._wn, self._cp, self._cn,
                        self._maxes, self._tp, self._tn):
                del seq[k]
            self._regroup(k >> _SHIFT)
            return
        for blocks in (self._keys, self._wp, self._wn, self._cp, self._cn):
            del blocks[k][i]
        if i == len(keys):
            self._maxes[k] = keys[-1]
        if len(keys) <= self._load >> 1 and len(self._keys) > 1:
            # as SortedList: a small block joins its neighbour (keeps blocks >= load/2)
            if not k:
                k = 1
            prev = k - 1
            for blocks in (self._keys, self._wp, self._wn, self._cp, self._cn):
                blocks[prev].extend(blocks[k])
                del blocks[k]
            self._maxes[prev] = self._maxes[k]
            self._tp[prev] += self._tp[k]
            self._tn[prev] += self._tn[k]
            for seq in (self._maxes, self._tp, self._tn):
                del seq[k]
            self._regroup(prev >> _SHIFT)
            if len(self._keys[prev]) > self._twice:
                self._split(prev)

    def _settle(self):
        """Make ``U`` and an emptied class's totals exactly zero (no rounding left)."""
        self.u = self._shed_u = 0.0
        pos_empty, neg_empty = self.n_pos == self.z_pos, self.n_neg == self.z_neg
        if pos_empty:
            self._shed_p = 0.0
        if neg_empty:
            self._shed_n = 0.0
        if self._arrays is not None:
            if pos_empty:
                self._arrays[1][:] = 0.0
            if neg_empty:
                self._arrays[2][:] = 0.0
        elif self._levels is not None:
            if (pos_empty and self._levels.has(True)) or (
                    neg_empty and self._levels.has(False)):
                keys, wp, wn, cp, cn = self.arrays()
                if pos_empty:
                    wp[:] = 0.0
                if neg_empty:
                    wn[:] = 0.0
                self._rebuild(keys, wp, wn, cp, cn)
        else:
            for empty, blocks, totals, groups in (
                (pos_empty, self._wp, self._tp, self._gp),
                (neg_empty, self._wn, self._tn, self._gn),
            ):
                # (a block may hold rounding left over while the totals are exactly 0)
                if empty and (any(totals) or any(groups) or any(map(any, blocks))):
                    for b in blocks:
                        if any(b):
                            b[:] = _zeros(len(b))
                    totals[:] = _zeros(len(totals))
                    groups[:] = _zeros(len(groups))
        if pos_empty:
            self.pos_weight = 0.0
        if neg_empty:
            self.neg_weight = 0.0

    def _rebuild(self, keys, wp, wn, cp, cn):
        """Replace the contents by these ascending, distinct-score numpy arrays (which
        the order keeps: the caller hands over fresh ones), in a bulk layout: flat
        arrays up to :data:`FLAT_MAX` scores, else one level (``U`` and the totals are
        the caller's; ``integral`` and ``unit`` must describe the arrays already).

        The blocks are built lazily, on the first operation that needs them (a
        per-event ``add``/``remove``, few entries added one by one): between bulk
        operations (batches in and out, merges, AP's ``get``) the order stays in its
        bulk layout. Building the blocks later is `O(n)`."""
        keys = np.ascontiguousarray(keys, dtype=_F8)
        self._arrays = None
        if len(keys) <= FLAT_MAX:
            self._levels = None
            wp = np.ascontiguousarray(wp, dtype=_F8)
            wn = np.ascontiguousarray(wn, dtype=_F8)
            if self.unit:  # the counts are the weights: one array each (see _merged)
                self._arrays = (keys, wp, wn, wp, wn)
            else:
                self._arrays = (keys, wp, wn, np.ascontiguousarray(cp, dtype=_I8),
                                np.ascontiguousarray(cn, dtype=_I8))
        elif len(keys):
            ints = self.integral and float(np.abs(wp).sum() + np.abs(wn).sum()) < _EXACT
            self._levels = Levels.build(keys, np.asarray(wp, dtype=_F8),
                                        np.asarray(wn, dtype=_F8), np.asarray(cp, dtype=_I8),
                                        np.asarray(cn, dtype=_I8), self.unit, ints,
                                        self.integral)
        self._trickle = 0
        try:  # (the blocks' attributes are set and dropped all together)
            object.__getattribute__(self, _BLOCKS[0])
        except AttributeError:
            pass
        else:
            for name in _BLOCKS:
                object.__delattr__(self, name)
        self.stamp += 1

    def _levelize(self):
        """Blocks -> the bulk layout (one level). `O(n)`."""
        self._rebuild(*self.arrays())

    def _note_weights(self, wp, wn, cp, cn):
        """Clear ``unit`` / ``integral`` if a batch's weights are not the counts / not
        integers (weights equal to counts are both: one check in the common case)."""
        if (self.unit or self.integral) and not ((wp == cp).all() and (wn == cn).all()):
            if self.unit:
                self._not_unit()
            if self.integral and not (_integers(wp) and _integers(wn)):
                self._not_integral()

    def _not_integral(self):
        """A weight that is not an integer came in: levels keep each score's weight."""
        self.integral = False
        if self._levels is not None:
            self._levels.with_weights()

    def _not_unit(self):
        """A weight other than 1 came in: counts are kept apart from weights now."""
        self.unit = False
        if self._levels is not None:
            self._levels.with_counts()
        if self._arrays is not None and self._arrays[3] is self._arrays[1]:
            k, wp, wn, _, _ = self._arrays
            self._arrays = (k, wp, wn, wp.astype(_I8), wn.astype(_I8))

    def _materialize(self):
        """Build the blocks from the bulk layout."""
        if self._u_from is not None:  # (the blocks update U event by event)
            self._compute_u()
        self._set_blocks(*self._owned())

    def _set_blocks(self, keys, wp, wn, cp, cn):
        """Blocks holding these ascending distinct-score arrays."""
        self._levels = self._arrays = None
        keys, wp, wn = (np.asarray(x, dtype=_F8) for x in (keys, wp, wn))
        cp, cn = np.asarray(cp, dtype=_I8), np.asarray(cn, dtype=_I8)
        load = self._load
        n = len(keys)

        def blocks(x, code):
            mv = memoryview(np.ascontiguousarray(x)).cast("B")
            step = 8 * load
            out = []
            for a in range(0, 8 * n, step):
                b = array(code)
                b.frombytes(mv[a : a + step])
                out.append(b)
            return out

        self._keys = blocks(keys, "d")
        self._wp = blocks(wp, "d")
        self._wn = blocks(wn, "d")
        self._cp = blocks(cp, "q")
        self._cn = blocks(cn, "q")
        maxes = array("d")
        tp, tn = array("d"), array("d")
        if n:
            idx = np.arange(0, n, load)
            maxes.frombytes(keys[np.minimum(idx + load, n) - 1].tobytes())
            tp.frombytes(np.add.reduceat(wp, idx).tobytes())
            tn.frombytes(np.add.reduceat(wn, idx).tobytes())
        self._maxes, self._tp, self._tn = maxes, tp, tn
        self._gp = _groups(tp)
        self._gn = _groups(tn)

    # ------------------------------------------------------------------ bulk
    def arrays(self):
        """``(scores, wp, wn, cp, cn)``: numpy arrays in ascending score order (fresh
        copies: the caller may write to them).

        Runtime complexity: `O(n)` (the levels of the bulk layout are merged, and kept
        merged; blocks are copied).
        """
        if self._arrays is not None:
            k, wp, wn, cp, cn = self._arrays
            if cp is wp:  # unit weights: counts are the weights
                return k.copy(), wp.copy(), wn.copy(), wp.astype(_I8), wn.astype(_I8)
            return k.copy(), wp.copy(), wn.copy(), cp.copy(), cn.copy()
        if self._levels is not None:
            return self._levels.entries()
        return (_flat(self._keys, _F8), _flat(self._wp, _F8), _flat(self._wn, _F8),
                _flat(self._cp, _I8), _flat(self._cn, _I8))

    def _owned(self):
        """The flat arrays themselves when the order is flat (no copy: for an operation
        that checks everything before writing and then installs its result), else
        :meth:`arrays`."""
        return self._arrays if self._arrays is not None else self.arrays()

    def weights(self, copy=True):
        """``(wp, wn)``: positive and negative weight per distinct score, ascending
        (fresh copies; with ``copy=False`` a flat order's own arrays, to read only).

        Runtime complexity: `O(n)`.
        """
        if self._arrays is not None:
            if not copy:
                return self._arrays[1], self._arrays[2]
            return self._arrays[1].copy(), self._arrays[2].copy()
        if self._levels is not None:
            return self.arrays()[1:3]
        return _flat(self._wp, _F8), _flat(self._wn, _F8)

    def pairs(self):
        """``sum over keys of wp * wn``: the weight of the (positive, negative) pairs
        that share a key (what a coarsened order's AUC bound is made of).

        Runtime complexity: `O(1)` while it follows the batches: from the first read
        after the keys were coarsened, a batch merged into the levels with integer
        weights (the searches that give ``U``'s increment give the weight of the other
        class at each key of the batch; each batch's change an exact integer while its
        partial sums stay below ``2**53``, added to an exact Python integer). Otherwise
        (any other change, a restored state) one numpy pass over the merged levels,
        `O(n)`; with integer weights it leaves the layout as it is, so that the later
        work does not depend on whether the value was followed or recomputed
        (fractional weights are never followed: the levels are merged and kept so, as
        :meth:`weights` does). The same value either way: the exact integer, correctly
        rounded (with integer weights), or the pass's float sum."""
        if self._pairs_at != self.stamp:
            if self._levels is not None:
                wp, wn = self._levels.entries(keep=not self.integral)[1:3]
            else:
                wp, wn = self.weights(copy=False)
            self._pairs = _pairs_sum(wp, wn, self.integral)
            self._pairs_at = self.stamp
        return float(self._pairs)

    def at_positive_keys(self):
        """In the levels with integer weights, ``(p, tps, fps, f)`` at each key that
        holds positive entries, ascending (see
        :meth:`streameval.metrics.levels.Levels.at_positive_keys`: the levels of each
        class merged and kept so, as :meth:`arrays` leaves them; the positive keys
        searched among the negative ones); otherwise None (:meth:`weights` then).
        Runtime complexity: `O(n)` numpy."""
        if self._levels is None or not self.integral:
            return None
        return self._levels.at_positive_keys()

    def ap_numerator(self):
        """Average precision times the positive weight, in the bulk layout of big orders
        (see :meth:`streameval.metrics.levels.Levels.ap_numerator`): one numpy pass
        over the scores holding positives. Runtime complexity: `O(n_pos)` numpy."""
        return self._levels.ap_numerator()

    def add_entries(self, keys, wp, wn, cp, cn, z_pos=0, z_neg=0):
        """Add aggregated events: ascending distinct ``keys`` with their summed weights
        and counts per class (numpy arrays); ``z_*``: how many of them weigh 0.

        In blocks, few entries (relative to the stored scores, :data:`REBUILD_RATIO`) go
        in one by one, `O(m log(n))`; otherwise the order moves to its bulk layout and
        the batch becomes a new level: ``U`` gains the batch's own pairs and its pairs
        with each level (``searchsorted`` per level), `O(m log(n))` numpy, and levels of
        similar sizes are merged (:data:`streameval.metrics.levels.GROWTH`), amortised `O(log(n / m))` numpy
        passes per entry. In the bulk layout, a run of tiny batches (fewer than
        :data:`TRICKLE_ENTRIES` entries each) moves the order back to blocks once their
        count times :data:`TRICKLE_RATIO` reaches the stored entries (the per-event path
        is then cheaper than a numpy call per batch).
        """
        m = len(keys)
        if not m:
            return
        before = self.stamp
        self._note_weights(wp, wn, cp, cn)
        # the key pairs (see pairs) follow the batch while they are known, the keys
        # coarse and the batch goes into the levels with integer weights
        track = self._pairs_at == self.stamp and self.bits is not None
        dt = None
        if self._levels is None and self._arrays is None:
            if m * REBUILD_RATIO < self.size():
                self._add_one_by_one(keys, wp, wn, cp, cn)
            else:
                self._levelize()
        flat = self._arrays is not None
        if flat:  # small: one numpy merge (big: becomes a level)
            self._install(_merged(self._owned(), keys, wp, wn, cp, cn))
        elif self._levels is not None:
            if m < TRICKLE_ENTRIES and self.size():
                self._trickle += 1
                if self._trickle * TRICKLE_RATIO >= self.size():
                    self._materialize()
            if self._levels is not None:
                dt = self._add_level(keys, wp, wn, cp, cn, track)
            else:
                self._add_one_by_one(keys, wp, wn, cp, cn)
        self.z_pos += z_pos
        self.z_neg += z_neg
        stamp = self.stamp
        self._batch_done()
        if flat and self._layout_memo is not None:  # (the entries a checkpoint writes)
            self._layout_memo.touch(self, keys, before)
        if dt is not None and self.stamp == stamp + 1:
            self._pairs += int(dt)  # (a Python int: exact however long the stream)
            self._pairs_at = self.stamp

    def _batch_done(self):
        """After a batch in or out: readers' caches expire, and a class left with only
        zero-weight events is settled to exactly zero."""
        self.stamp += 1
        if self.n_pos == self.z_pos or self.n_neg == self.z_neg:
            self._settle()

    def _add_one_by_one(self, keys, wp, wn, cp, cn):
        add = self._add_entry
        for e in zip(keys.tolist(), wp.tolist(), wn.tolist(), cp.tolist(), cn.tolist()):
            add(*e)

    def _add_level(self, keys, wp, wn, cp, cn, track=False):
        """The bulk layout gains a level of these entries (negated ones: a removal).
        ``U`` gains the entries' own pairs and their pairs with every level; totals
        follow. Runtime complexity: `O(m log(n))` numpy, plus the merges.

        ``track``: return the change of :meth:`pairs` (the same searches give it), or
        None where it would not be exact: weights that are not integers, or a product
        of the class totals of ``2**53`` or more."""
        bp, bn = float(wp.sum()), float(wn.sum())
        ints = self.integral and (abs(self.pos_weight) + abs(self.neg_weight) + abs(bp)
                                  + abs(bn)) < _EXACT
        # (every partial sum of the change below 2**53: exact integers)
        track = track and ints and (abs(bp) * abs(self.neg_weight) + abs(bn) * (
            abs(self.pos_weight) + abs(bp))) < _EXACT
        du = mann_whitney_u(wp, wn, ints)
        keys = np.ascontiguousarray(keys, dtype=_F8)
        if track:
            du_levels, dt = self._levels.add(keys, wp, wn, cp, cn, ints, pairs=True)
            du += du_levels
            prod = wp * wn  # the entries' own pairs at each key
            dt += float(prod.sum())
        else:
            du += self._levels.add(keys, wp, wn, cp, cn, ints)
            dt = None
        if bp < 0.0 or bn < 0.0:  # a removal
            self._shed_p -= bp
            self._shed_n -= bn
            self._shed_u -= bp * self.neg_weight + bn * self.pos_weight
        self.u += du
        self.pos_weight += bp
        self.neg_weight += bn
        self.n_pos += int(cp.sum())
        self.n_neg += int(cn.sum())
        return dt

    def _add_entry(self, s, bp, bn, np_, nn):
        """Add ``np_`` positives of total weight ``bp`` and ``nn`` negatives of weight
        ``bn``, all with score ``s``. Runtime complexity: `O(log(n))`."""
        maxes = self._maxes
        if not maxes:  # an entry without events at s, which the lines below fill
            self._set_blocks(np.array([s]), np.zeros(1), np.zeros(1),
                             np.zeros(1, dtype=_I8), np.zeros(1, dtype=_I8))
            maxes = self._maxes
            k = i = 0
        else:
            k = bisect_left(maxes, s)
            if k == len(maxes):
                k -= 1
                maxes[k] = s
                i = len(self._keys[k])
            else:
                i = bisect_left(self._keys[k], s)
        keys, wp_b, wn_b = self._keys[k], self._wp[k], self._wn[k]
        if i == len(keys) or keys[i] != s:
            keys.insert(i, s)
            wp_b.insert(i, 0.0)
            wn_b.insert(i, 0.0)
            self._cp[k].insert(i, 0)
            self._cn[k].insert(i, 0)
        g = k >> _SHIFT
        below_p = sum(self._gp[:g]) + sum(self._tp[g << _SHIFT : k])
        below_n = sum(self._gn[:g]) + sum(self._tn[g << _SHIFT : k])
        if i + i <= len(keys):
            below_p += sum(wp_b[:i])
            below_n += sum(wn_b[:i])
        else:
            below_p += self._tp[k] - sum(wp_b[i:])
            below_n += self._tn[k] - sum(wn_b[i:])
        at_p, at_n = wp_b[i], wn_b[i]
        above_p = self.pos_weight - below_p - at_p
        self.u += bp * (below_n + 0.5 * at_n) + bn * (above_p + 0.5 * at_p) + 0.5 * bp * bn
        wp_b[i] = at_p + bp
        wn_b[i] = at_n + bn
        self._cp[k][i] += np_
        self._cn[k][i] += nn
        self._tp[k] += bp
        self._tn[k] += bn
        self._gp[g] += bp
        self._gn[g] += bn
        self.pos_weight += bp
        self.neg_weight += bn
        self.n_pos += np_
        self.n_neg += nn
        if len(keys) > self._twice:
            self._split(k)

    def stored_counts(self, keys, weights=False):
        """``(cp, cn)``: the positive and negative event counts stored at each of the
        ascending ``keys`` (numpy), 0 where a key is not stored; with ``weights``,
        ``(cp, cn, wp, wn)``, the stored weights too.

        Runtime complexity: `O(m log(n))`: in the bulk layout ``searchsorted`` per level;
        in blocks one lookup per key for few keys, else `O(n + m)` (numpy).
        """
        m = len(keys)
        if self._levels is not None:
            sp, sn, wsp, wsn = self._levels.counts_at(np.asarray(keys, dtype=_F8))
            return (sp, sn, wsp, wsn) if weights else (sp, sn)
        flat = self._arrays is not None
        sp = np.zeros(m, dtype=_I8)
        sn = np.zeros(m, dtype=_I8)
        wsp = np.zeros(m)
        wsn = np.zeros(m)
        out = (sp, sn, wsp, wsn) if weights else (sp, sn)
        n = self.size()
        if not (m and n):
            return out
        if not flat and m * REMOVE_REBUILD_RATIO < n:
            find, cps, cns, wps, wns = self._find, self._cp, self._cn, self._wp, self._wn
            for j, s in enumerate(keys.tolist()):
                k, i = find(s)
                if k >= 0:
                    sp[j] = cps[k][i]
                    sn[j] = cns[k][i]
                    wsp[j] = wps[k][i]
                    wsn[j] = wns[k][i]
            return out
        k0, wp0, wn0, cp0, cn0 = self._owned()
        pos = np.minimum(np.searchsorted(k0, keys), n - 1)
        hit = k0[pos] == keys
        sp[hit] = cp0[pos[hit]]
        sn[hit] = cn0[pos[hit]]
        if weights:
            wsp[hit] = wp0[pos[hit]]
            wsn[hit] = wn0[pos[hit]]
        return out

    def _refused(self, keys, wp, wn, cp, cn, added=None):
        """Mask of the entries that hold more events, or more weight (beyond rounding),
        than stored at their score (plus, given ``added``, the :meth:`add_entries`
        arguments of events about to come in)."""
        sp, sn, wsp, wsn = self.stored_counts(keys, weights=True)
        scale_p, scale_n = self.pos_weight, self.neg_weight
        if added is not None:
            ak, ap, an, acp, acn = added[:5]
            i = np.minimum(ak.searchsorted(keys), len(ak) - 1)
            hit = ak[i] == keys
            sp = sp + np.where(hit, acp[i], 0)
            sn = sn + np.where(hit, acn[i], 0)
            wsp = wsp + np.where(hit, ap[i], 0.0)
            wsn = wsn + np.where(hit, an[i], 0.0)
            scale_p, scale_n = scale_p + float(ap.sum()), scale_n + float(an.sum())
        return ((cp > sp) | (cn > sn) | _overdrawn(wsp, wp, scale_p)
                | _overdrawn(wsn, wn, scale_n))

    def _zeros_fit(self, cp, cn, z_pos, z_neg):
        """Whether the stored events include ``z_*`` of weight 0 and the rest of
        weight > 0, per class (as :meth:`remove` checks one event)."""
        return (z_pos <= self.z_pos and z_neg <= self.z_neg
                and int(cp.sum()) - z_pos <= self.n_pos - self.z_pos
                and int(cn.sum()) - z_neg <= self.n_neg - self.z_neg)

    def can_remove(self, keys, wp, wn, cp, cn, z_pos=0, z_neg=0):
        """Whether :meth:`remove_entries` with these arguments would succeed."""
        if not self._zeros_fit(cp, cn, z_pos, z_neg):
            return False
        return not self._refused(keys, wp, wn, cp, cn).any()

    def remove_entries(self, keys, wp, wn, cp, cn, z_pos=0, z_neg=0, _checked=False):
        """Remove aggregated events added earlier (the inverse of :meth:`add_entries`,
        same arguments): ascending distinct ``keys``, summed weights and counts.

        Atomic: raises ``KeyError(bad)`` with ``bad`` a boolean mask over the entries
        that have more events (or more weight, beyond rounding) than stored (``bad``
        all False when only the zero-weight counts ``z_*``, or the others, exceed the
        stored ones), state unchanged. As :meth:`remove`, a class's weight at a score
        whose last event goes is set to exactly 0. ``_checked``: :meth:`can_remove`
        has just accepted these arguments (a caller removing from several orders
        checks them all first), so the entry-by-entry path does not look them up twice.

        ``U`` after removing a batch ``R`` from the stored events ``S``:
        ``U(S) - pairs(R, S) + U(R)``. In blocks, few entries relative to the stored
        scores (:data:`REMOVE_REBUILD_RATIO`) are removed one by one, `O(m log(n))`;
        otherwise the order moves to its bulk layout and the removal is a level of
        negated entries (a tombstone, see :mod:`streameval.metrics.levels`) whose pairs
        with every level are counted with ``searchsorted``, `O(m log(n))` numpy; it
        cancels the events when the levels merge. With integer weights both are exact,
        equal to a loop of :meth:`remove`.
        """
        m = len(keys)
        if not m:
            return
        if not (_checked or self._zeros_fit(cp, cn, z_pos, z_neg)):
            raise KeyError(np.zeros(m, dtype=bool))
        if self._levels is None and self._arrays is None and (
                m * REMOVE_REBUILD_RATIO < self.size()):
            if not _checked:
                bad = self._refused(keys, wp, wn, cp, cn)
                if bad.any():
                    raise KeyError(bad)
            self._note_weights(wp, wn, cp, cn)
            # one event at a score (all-distinct scores): the single-event path (which
            # counts its own zero weight: given back first); several: one entry. The
            # zero-weight counts go first, so no class looks empty before it is.
            self.z_pos -= z_pos
            self.z_neg -= z_neg
            remove, remove_entry = self.remove, self._remove_entry
            for s, bp, bn, np_, nn in zip(keys.tolist(), wp.tolist(), wn.tolist(),
                                          cp.tolist(), cn.tolist()):
                if np_ + nn == 1:
                    if np_:
                        if not bp:
                            self.z_pos += 1
                        remove(s, True, bp, True)
                    else:
                        if not bn:
                            self.z_neg += 1
                        remove(s, False, bn, True)
                else:
                    remove_entry(s, bp, bn, np_, nn)
        else:
            if self._levels is None and self._arrays is None:
                self._levelize()
            self._note_weights(wp, wn, cp, cn)  # (flags and layout only: atomic)
            if self._arrays is not None:  # small: one numpy subtraction (checks first)
                self._install(_subtracted(self._owned(), keys, wp, wn, cp, cn,
                                          self.pos_weight, self.neg_weight))
            else:
                if not _checked:
                    bad = self._refused(keys, wp, wn, cp, cn)
                    if bad.any():
                        raise KeyError(bad)
                self._add_level(keys, -wp, -wn, -cp, -cn)
            self.z_pos -= z_pos
            self.z_neg -= z_neg
        self._batch_done()

    def replace_entries(self, added, removed):
        """Add the aggregated events ``added`` and remove ``removed`` (each a tuple of
        :meth:`add_entries` arguments; the removed ones may be among the added ones): a
        sliding window's batch in and its expired slice out. Atomic: ``KeyError`` (as
        :meth:`remove_entries`), nothing changed, if an event removed is neither
        stored nor added."""
        ak, ap, an, acp, acn, azp, azn = added
        rk, rp, rn, rcp, rcn, rzp, rzn = removed
        if not len(rk):
            self.add_entries(*added)
            return
        if not len(ak):
            self.remove_entries(*removed)
            return
        n_pos, n_neg = self.n_pos + int(acp.sum()), self.n_neg + int(acn.sum())
        z_pos, z_neg = self.z_pos + azp, self.z_neg + azn
        if not (rzp <= z_pos and rzn <= z_neg and int(rcp.sum()) - rzp <= n_pos - z_pos
                and int(rcn.sum()) - rzn <= n_neg - z_neg):
            raise KeyError(np.zeros(len(rk), dtype=bool))
        if self._arrays is not None:  # small: one merge, one subtraction, one rebuild
            self._note_weights(ap, an, acp, acn)  # (flags and layout only: atomic)
            self._note_weights(rp, rn, rcp, rcn)
            arrays = None
            if self.unit:  # (one pass for both, the common case: see _replaced_unit)
                arrays = _replaced_unit(self._arrays, added, removed)
            if arrays is None:
                merged = _merged(self._arrays, ak, ap, an, acp, acn, inplace=False)
                arrays = _subtracted(merged, rk, rp, rn, rcp, rcn,  # (checks first)
                                     self.pos_weight + float(ap.sum()),
                                     self.neg_weight + float(an.sum()))
            self._install(arrays)
            self.z_pos, self.z_neg = z_pos - rzp, z_neg - rzn
            self._batch_done()
            return
        bad = self._refused(rk, rp, rn, rcp, rcn, added)
        if bad.any():
            raise KeyError(bad)
        self.add_entries(*added)
        self.remove_entries(*removed, _checked=True)

    def _install(self, arrays):
        """Rebuild from ``(keys, wp, wn, cp, cn)``; ``U`` and totals recomputed (a flat
        order's ``U`` at its first read, see :attr:`u`)."""
        keys, wp, wn, cp, cn = arrays
        self.pos_weight = float(wp.sum())
        self.neg_weight = float(wn.sum())
        if cp is wp and cn is wn:  # unit weights: the counts are these same sums
            self.n_pos = int(self.pos_weight)
            self.n_neg = int(self.neg_weight)
        else:
            self.n_pos = int(cp.sum())
            self.n_neg = int(cn.sum())
        if len(keys) <= FLAT_MAX:  # flat (see _rebuild): U when first read
            self._u_from = (wp, wn, self.exact_ints())
        else:
            self.u = mann_whitney_u(wp, wn, self.exact_ints())
        self._shed_u = self._shed_p = self._shed_n = 0.0
        self._rebuild(keys, wp, wn, cp, cn)

    def refresh(self):
        """Recompute ``U`` and the class totals from the stored per-score weights when
        removals have taken out of them far more than they hold (:data:`REFRESH`
        times), so that the rounding those removals left could show.

        A float sum keeps a residue of about 1e-16 of the largest value that passed
        through it: a weight of 1e12 added, then reverted, leaves ``U`` off by about
        1e8 (and an AUC far outside [0, 1] when what is left holds 100 events). Each
        per-score weight only keeps the rounding of its own score, and a class's last
        event at a score takes that too. Removals of weight 1 are not counted: with
        weights of 1 the sums are exact integers. Amortised cost: a refresh is `O(n)`
        and comes after removals worth :data:`REFRESH` times the totals, so
        `O(n / REFRESH)` spread over at least that many removals. Readers of ``u``
        and the totals call it (`O(1)` when nothing is due)."""
        p, n = self.pos_weight, self.neg_weight
        if (self._shed_u > REFRESH * p * n or self._shed_p > REFRESH * p
                or self._shed_n > REFRESH * n):
            self._install(self.arrays())
            self.stamp += 1

    def _remove_entry(self, s, bp, bn, np_, nn):
        """Remove ``np_`` positives of total weight ``bp`` and ``nn`` negatives of weight
        ``bn``, all with score ``s`` and stored (checked by the caller).
        Runtime complexity: `O(log(n))`."""
        k, i = self._find(s)
        keys, wp_b, wn_b, cp_b, cn_b = self._keys[k], self._wp[k], self._wn[k], self._cp[k], self._cn[k]
        g = k >> _SHIFT
        below_p = sum(self._gp[:g]) + sum(self._tp[g << _SHIFT : k])
        below_n = sum(self._gn[:g]) + sum(self._tn[g << _SHIFT : k])
        if i + i <= len(keys):
            below_p += sum(wp_b[:i])
            below_n += sum(wn_b[:i])
        else:
            below_p += self._tp[k] - sum(wp_b[i:])
            below_n += self._tn[k] - sum(wn_b[i:])
        at_p, at_n = wp_b[i], wn_b[i]
        above_p = self.pos_weight - below_p - at_p
        # pairs of the removed events with everything stored, less those counted twice
        # (removed positive with removed negative, a tie: 1/2 each)
        self.u -= bp * (below_n + 0.5 * at_n) + bn * (above_p + 0.5 * at_p) - 0.5 * bp * bn
        self._shed_p += bp
        self._shed_n += bn
        self._shed_u += bp * self.neg_weight + bn * self.pos_weight
        c_p = cp_b[i] - np_
        c_n = cn_b[i] - nn
        cp_b[i] = c_p
        cn_b[i] = c_n
        dp = bp if c_p else at_p  # last event of a class here: drop its rounding too
        dn = bn if c_n else at_n
        wp_b[i] = at_p - dp
        wn_b[i] = at_n - dn
        self._tp[k] -= dp
        self._tn[k] -= dn
        self._gp[g] -= dp
        self._gn[g] -= dn
        self.pos_weight -= bp
        self.neg_weight -= bn
        self.n_pos -= np_
        self.n_neg -= nn
        if not (c_p or c_n):
            self._delete(k, i)

    # ------------------------------------------------------------------ bounded
    def coarsen(self, target):
        """Bound the order: merge its levels (or blocks) into one sorted run and, if it
        holds more than ``target`` distinct keys, lower :attr:`bits` to the largest
        number of mantissa bits at which at most ``target`` keys are left (found by
        bisection, one numpy pass per step) and merge the entries of each new key
        (:func:`coarsened`). ``U`` and the totals are recomputed from the merged
        entries: pairs of events that now share a key count as ties, one half. With 0
        bits the keys are signed powers of two (at most about 4 100): ``target`` below
        that may be exceeded. Callers then map every score they add or remove with
        :meth:`key` / :meth:`keys_of`. Returns whether the keys changed.

        Runtime complexity: `O(n log(bits))` numpy (``n`` entries stored): the bisection
        compares the XORs of neighbouring keys' bit patterns, computed once
        (:func:`_key_counter`). The bulk layout with integer weights (sums below
        ``2**53``) is coarsened class by class (:meth:`_coarsen_levels`): each class's
        entries are summed per new key from its running sums, and only the coarse keys
        of the two classes are merged, so the order's entries are never gathered in one
        set of arrays: beside the order, a few arrays of one 8-byte value per entry at
        a time, and the old levels are released before the new ones are built.
        """
        if self._arrays is None and self._levels is not None and self.exact_ints():
            done = self._coarsen_levels(target)
            if done is not None:
                return done
        return self._coarsen_merged(target)

    def _coarsen_merged(self, target):
        """:meth:`coarsen` over the merged arrays (:meth:`arrays`): any layout."""
        arrays = self.arrays()  # (levels: merged into one, and kept merged)
        keys = arrays[0]
        if len(keys) <= target:
            return False
        lo = self._most_bits(_key_counter(keys), target)
        if lo is None:
            return False
        self.coarsen_to(lo, arrays)
        return True

    def _most_bits(self, count, target):
        """The largest mantissa bits, below the current ones, whose coarse keys number
        at most ``target`` by ``count(bits)`` (0 if none does); None when the keys have
        no bit left to drop."""
        lo, hi = 0, (52 if self.bits is None else self.bits) - 1
        if hi < 0:
            return None
        while lo < hi:  # largest bits in [lo, hi] with at most target keys (or 0)
            mid = (lo + hi + 1) >> 1
            if count(mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _coarsen_levels(self, target):
        """:meth:`coarsen` of the bulk layout with integer weights whose sums stay below
        ``2**53`` (:meth:`exact_ints`), class by class; None
        when a key is a subnormal, ``-0.0``, NaN or infinite (the caller then takes
        :meth:`_coarsen_merged`). Each class's sides are merged first (as
        :meth:`arrays` leaves them). The keys of a class that fall in one coarse key
        are a run (the map is monotone); the run's weight is the difference of the
        side's running sums "at or above" at its two ends, exact with integer weights,
        so the result is the one :func:`coarsened` gives over the merged arrays."""
        lv = self._levels
        # (a class whose every event was removed has an empty side: absent here)
        sides = tuple(None if s is None or not s.size else s
                      for s in (lv._compacted(lv.pos), lv._compacted(lv.neg)))
        del lv
        keys = [s.k for s in sides if s is not None]
        if not keys or any(_unusual_keys(k) for k in keys):
            return None
        if len(keys) == 2:  # (the scores of both classes, for the counts of the union)
            every = np.concatenate(keys)
            every.sort(kind="stable")  # two sorted runs: a linear merge
        else:
            every = keys[0]
        count = _key_counter(every)
        del every
        if count(52) <= target:
            return False
        lo = self._most_bits(count, target)
        del count
        if lo is None:
            return False
        per_class = [None if s is None else _coarse_runs(s, lo) for s in sides]
        # (the old levels go now: the new ones are built from the per-class runs alone)
        del sides, keys
        self._levels = None
        ck = [c[0] for c in per_class if c is not None]
        union = np.unique(np.concatenate(ck)) if len(ck) == 2 else ck[0]
        m = len(union)
        wp, wn = np.zeros(m), np.zeros(m)
        cp, cn = np.zeros(m, dtype=_I8), np.zeros(m, dtype=_I8)
        for c, w_out, c_out in zip(per_class, (wp, wn), (cp, cn)):
            if c is not None:
                at = union.searchsorted(c[0])
                w_out[at] = c[1]
                c_out[at] = c[2]
        self.bits = lo
        merged = (union, wp, wn, cp, cn)
        if self.unit:  # (the rebuild keeps one array per class: weights are counts)
            merged = merged[:3] + merged[1:3]
        self._install(merged)
        self.stamp += 1
        return True

    def coarsen_to(self, bits, arrays=None):
        """Map the stored keys to :func:`coarse_key` at ``bits`` (no-op unless coarser
        than now) and merge the entries that share a key. `O(n)` numpy."""
        if self.bits is not None and bits >= self.bits:
            return
        if arrays is None:
            arrays = self.arrays()
        self.bits = bits
        merged = coarsened(arrays, bits)
        if len(merged[0]):
            if self.unit:  # (the rebuild keeps one array per class: weights are counts)
                merged = merged[:3] + merged[1:3]
            self._install(merged)
        self.stamp += 1

    def key(self, s):
        """The key score ``s`` is stored under: itself, or its :func:`coarse_key`."""
        return s if self.bits is None else coarse_key(s, self.bits)

    def keys_of(self, s):
        """:meth:`key` of every element of a float64 array (the array itself when
        exact)."""
        return s if self.bits is None else coarse_keys(s, self.bits)

    def _entries_of(self, other):
        """``other``'s arrays with its keys mapped to this order's :attr:`bits`; this
        order first coarsened to ``other``'s if that is coarser (merging a bounded
        order makes this one bounded as well)."""
        if other.bits is not None and (self.bits is None or other.bits < self.bits):
            self.coarsen_to(other.bits)
        arrays = other.arrays()
        if self.bits is not None and other.bits != self.bits:
            arrays = coarsened(arrays, self.bits)
        return arrays

    def merge(self, other):
        """Add every event stored in ``other`` (another :class:`ScoreOrder`). A bounded
        order's keys are coarse: the result has the coarser of the two key maps."""
        keys, wp, wn, cp, cn = self._entries_of(other)
        self.add_entries(keys, wp, wn, cp, cn, other.z_pos, other.z_neg)

    def subtract(self, other, name="the other ScoreOrder", describe=None):
        """Remove every event stored in ``other``, merged here earlier: the inverse of
        :meth:`merge`, by :meth:`remove_entries` (exact with integer weights; a class's
        weight at a score whose last event goes is exactly 0, as :meth:`remove`).

        Refused with a ``ValueError`` (what :meth:`subtract_refusal` says, ``name``
        the other order's name in it), nothing changed, if ``other`` holds events
        not stored here.

        Runtime complexity: that of :meth:`remove_entries` with ``other``'s distinct
        scores (plus `O(n)` for ``other``'s arrays)."""
        entries = (*self._entries_of(other), other.z_pos, other.z_neg)
        reason = self.subtract_refusal(entries, name, describe)
        if reason is not None:
            raise ValueError(reason)
        self.remove_entries(*entries, _checked=True)

    def subtract_refusal(self, entries, name, describe=None):
        """Why :meth:`remove_entries` would refuse ``entries`` (its arguments, with
        the zero-weight counts), as a message for :meth:`subtract` (``name``: what
        holds the entries; ``describe``: a score's name, default ``"score 0.5"``), or
        None if it would not. Changes nothing."""
        keys, wp, wn, cp, cn, z_pos, z_neg = entries
        if not len(keys):
            return None
        bad = self._refused(keys, wp, wn, cp, cn)
        if bad.any():
            i = int(np.argmax(bad))
            at = keys[i:i + 1]
            sp, sn, wsp, wsn = (v[0] for v in self.stored_counts(at, weights=True))
            s = float(keys[i])
            where = f"subtract: {f'score {s!r}' if describe is None else describe(s)}"
            for cls, held, theirs, w_held, w_theirs, scale in (
                    ("positive", sp, cp[i], wsp, wp[i], self.pos_weight),
                    ("negative", sn, cn[i], wsn, wn[i], self.neg_weight)):
                if theirs > held:
                    return (f"{where} holds {_count(held, cls)} here but {int(theirs)} in "
                            f"{name}: it was never merged")
                if _overdrawn(w_held, w_theirs, scale):
                    return (f"{where} holds {cls} weight {float(w_held)!r} here but "
                            f"{float(w_theirs)!r} in {name}: it was never merged")
            return f"{where} holds less here than in {name}: it was never merged"
        for cls, n, z, theirs_n, theirs_z in (
                ("positive", self.n_pos, self.z_pos, int(cp.sum()), z_pos),
                ("negative", self.n_neg, self.z_neg, int(cn.sum()), z_neg)):
            if theirs_z > z:
                return (f"subtract: {_count(z, cls)} of weight 0 here but {theirs_z} in "
                        f"{name}: they were never merged")
            if theirs_n - theirs_z > n - z:
                return (f"subtract: {_count(n - z, cls)} of weight > 0 here but "
                        f"{theirs_n - theirs_z} in {name}: they were never merged")
        return None

    # ------------------------------------------------------------------ values
    def exact_ints(self):
        """Whether every stored weight and every sum of them is an exact integer (all
        weights ever added are integers, the usual ``w=1``, and the total is below
        ``2**53``): then prefix sums can run in int64, exactly and cheaper than a
        float64 ``cumsum``."""
        return self.integral and self.pos_weight + self.neg_weight < _EXACT

    def auc(self):
        """``U / (P * N)``, or NaN without positive or negative weight. `O(1)` (see
        :attr:`u`)."""
        self.refresh()
        if self.pos_weight > 0.0 and self.neg_weight > 0.0:
            return self.u / (self.pos_weight * self.neg_weight)
        return float("nan")

    # ------------------------------------------------------------------ state
    def to_data(self):
        """JSON-serialisable state (lists of numbers)."""
        self.refresh()
        keys, wp, wn, cp, cn = self.arrays()
        data = {
            "scores": keys.tolist(), "wpos": wp.tolist(), "wneg": wn.tolist(),
            "npos": cp.tolist(), "nneg": cn.tolist(), "u": self.u,
            "pos_weight": self.pos_weight, "neg_weight": self.neg_weight,
            "zero_pos": self.z_pos, "zero_neg": self.z_neg,
        }
        if self.bits is not None:  # (exact orders: the state as it always was)
            data["bits"] = self.bits
        return data

    def set_data(self, data):
        """Restore :meth:`to_data` exactly (validated first; ``ValueError`` if bad)."""
        try:
            keys = np.asarray(data["scores"], dtype=_F8)
            wp = np.asarray(data["wpos"], dtype=_F8)
            wn = np.asarray(data["wneg"], dtype=_F8)
            cp = np.asarray(data["npos"], dtype=_I8)
            cn = np.asarray(data["nneg"], dtype=_I8)
            u, pw, nw = float(data["u"]), float(data["pos_weight"]), float(data["neg_weight"])
            zp, zn = int(data["zero_pos"]), int(data["zero_neg"])
            bits = data.get("bits")
            if bits is not None and (type(bits) is not int or not 0 <= bits <= 52):
                raise ValueError(f"bits = {bits!r}: must be an int in 0..52")
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            raise ValueError(f"bad score-order state: {e!r}") from None
        n = len(keys)
        if not (keys.ndim == 1 and wp.ndim == wn.ndim == cp.ndim == cn.ndim == 1
                and len(wp) == len(wn) == len(cp) == len(cn) == n):
            raise ValueError("bad score-order state: arrays of different lengths")
        if n and (not np.isfinite(keys).all() or (np.diff(keys) <= 0).any()):
            raise ValueError("bad score-order state: scores must be finite and increasing")
        if bits is not None and n and not np.array_equal(coarse_keys(keys, bits), keys):
            raise ValueError(f"bad score-order state: scores are not keys at bits = {bits}")
        if not (np.isfinite(wp).all() and np.isfinite(wn).all() and math.isfinite(u)
                and math.isfinite(pw) and math.isfinite(nw)):
            raise ValueError("bad score-order state: weights must be finite")
        if (wp < 0).any() or (wn < 0).any() or (cp < 0).any() or (cn < 0).any() or \
                ((cp + cn) == 0).any() or ((cp == 0) & (wp != 0)).any() or \
                ((cn == 0) & (wn != 0)).any() or not (0 <= zp <= cp.sum()) or \
                not (0 <= zn <= cn.sum()):
            raise ValueError("bad score-order state: negative or inconsistent weights or counts")
        # the stored totals and U must follow from the per-score weights (up to the
        # rounding a long float stream leaves: REVERT_SLACK of the totals, as reverts
        # allow); a class whose events all weigh 0 has exactly zero weight
        sp, sn = float(wp.sum()), float(wn.sum())
        tol_p, tol_n = _SLACK * max(1.0, sp), _SLACK * max(1.0, sn)
        if (abs(pw - sp) > tol_p or abs(nw - sn) > tol_n
                or abs(u - mann_whitney_u(wp, wn)) > tol_p * max(1.0, sn) + tol_n * max(1.0, sp)
                or (zp == cp.sum() and (pw or wp.any()))
                or (zn == cn.sum() and (nw or wn.any()))):
            raise ValueError("bad score-order state: U or totals inconsistent with the "
                             "per-score weights")
        self.integral = _integers(wp) and _integers(wn)
        self.unit = bool(np.array_equal(wp, cp) and np.array_equal(wn, cn))
        self._rebuild(keys, wp, wn, cp, cn)
        self.u, self.pos_weight, self.neg_weight = u, pw, nw
        self.n_pos, self.n_neg = int(cp.sum()), int(cn.sum())
        self.z_pos, self.z_neg = zp, zn
        self.bits = bits

    # ------------------------------------------------------------------ checks
    def _check(self, rtol=1e-9):
        """Assert every internal invariant (tests call this after each operation; it
        reads the state without changing its layout)."""
        if self._levels is not None or self._arrays is not None:
            if self._arrays is not None:
                keys, wp, wn, cp, cn = self._arrays
            else:
                self._levels.check()
                assert (self._levels.unit, self._levels.integral) == (self.unit, self.integral)
                keys, wp, wn, cp, cn = self._levels.entries(keep=False)
            assert (np.diff(keys) > 0).all()
            assert (cp >= 0).all() and (cn >= 0).all() and ((cp + cn) > 0).all()
            # a class's weight at a score without its events: none beyond rounding
            assert (np.abs(wp[cp == 0]) <= 1e-9).all() and (np.abs(wn[cn == 0]) <= 1e-9).all()
            assert (wp >= -1e-9).all() and (wn >= -1e-9).all()
            scale_p = max(1.0, float(np.abs(wp).sum()))
            scale_n = max(1.0, float(np.abs(wn).sum()))
            empty_p = empty_n = True
        else:
            nb = len(self._keys)
            for seq in (self._wp, self._wn, self._cp, self._cn, self._maxes, self._tp,
                        self._tn):
                assert len(seq) == nb
            assert len(self._gp) == len(self._gn) == (nb + GROUP - 1) // GROUP
            prev = -np.inf
            for k in range(nb):
                keys = self._keys[k]
                assert 0 < len(keys) <= self._twice
                assert all(len(x[k]) == len(keys) for x in (self._wp, self._wn, self._cp,
                                                             self._cn))
                assert keys[0] > prev and all(a < b for a, b in zip(keys, keys[1:]))
                assert self._maxes[k] == keys[-1]
                prev = keys[-1]
                for cp, cn, wp, wn in zip(self._cp[k], self._cn[k], self._wp[k], self._wn[k]):
                    assert cp >= 0 and cn >= 0 and cp + cn > 0
                    assert (cp or wp == 0.0) and (cn or wn == 0.0)
                    assert wp >= -1e-9 and wn >= -1e-9
            keys, wp, wn, cp, cn = self.arrays()
            scale_p = max(1.0, float(np.abs(wp).sum()))
            scale_n = max(1.0, float(np.abs(wn).sum()))
            for totals, blocks, groups, scale in ((self._tp, self._wp, self._gp, scale_p),
                                                  (self._tn, self._wn, self._gn, scale_n)):
                for k in range(nb):
                    assert abs(totals[k] - sum(blocks[k])) <= rtol * scale
                for g, got in enumerate(groups):
                    assert abs(got - sum(totals[g * GROUP : (g + 1) * GROUP])) <= rtol * scale
            empty_p, empty_n = not any(self._gp), not any(self._gn)
        assert self.n_pos == int(cp.sum()) and self.n_neg == int(cn.sum())
        assert 0 <= self.z_pos <= self.n_pos and 0 <= self.z_neg <= self.n_neg
        assert abs(self.pos_weight - wp.sum()) <= rtol * scale_p
        assert abs(self.neg_weight - wn.sum()) <= rtol * scale_n
        if self.n_pos == self.z_pos:
            assert self.pos_weight == 0.0 and not wp.any() and empty_p
        if self.n_neg == self.z_neg:
            assert self.neg_weight == 0.0 and not wn.any() and empty_n
        assert abs(self.u - mann_whitney_u(wp, wn)) <= rtol * scale_p * scale_n
        if self.bits is not None:  # every key is its own coarse key
            assert np.array_equal(coarse_keys(keys, self.bits), keys)
        if self._pairs_at == self.stamp:  # the pairs it follows: the recomputed ones
            want = _pairs_sum(wp, wn, self.integral)
            assert self._pairs == want, (self._pairs, want)
        memo = self._layout_memo
        if memo is not None:  # a flat order's log adds up to the arrays it gave last
            got = _stacked(_flat_replayed(memo.base, memo.runs, memo.unit), memo.unit)
            for a, b in zip(got, memo.prev):
                assert (a is None) == (b is None)
                assert a is None or (a.shape == b.shape and a.tobytes() == b.tobytes())
                assert b is None or not b.flags.writeable
            assert not any(a.flags.writeable for a in memo.base)
            assert not any(a.flags.writeable for r in memo.runs for a in r)
            assert memo.logged == sum(r[0].shape[1] for r in memo.runs)
            assert len(memo.runs) <= LAYOUT_RUNS

    # ------------------------------------------------------------------ binary state
    def to_layout(self):
        """The state as it is laid out, for a binary checkpoint: the scalars, and the
        arrays of its layout (flat, levels or blocks) as numpy arrays, without merging
        anything (:meth:`to_data` merges the levels: the sums after a restore would then
        group differently). Arrays that never change are read-only views (see
        :meth:`Levels.to_layout <streameval.metrics.levels.Levels.to_layout>`), the others
        copies. :meth:`from_layout` restores it exactly.

        A flat order is given as a log (layout ``"flat_runs"``, see :class:`_FlatLog`):
        the arrays given whole once (``flat``, read-only) and ``runs``, each the entries
        that changed between two calls (new scores, changed weights, and removed scores
        with zero counts), also read-only: a checkpoint writer references what it wrote
        for the earlier ones and writes the newest run only, `O(entries changed)` bytes
        rather than `O(n)`. The arrays are given whole again once the log reaches its own
        limit (between half of :data:`LAYOUT_RUNS` runs and all of them, and runs holding
        that share of the order's entries), so a log is at most about twice the order.
        With no run it is the plain ``"flat"`` layout.

        Runtime complexity: `O(1)` for levels (plus a copy of AP's ``pn``), `O(n)` numpy
        for flat arrays (a comparison with the arrays given last time, a copy) and
        blocks. Memory: a flat order keeps a read-only copy of the arrays it gave last
        (to compare with) besides its log."""
        d = {"load": self._load, "u": float(self.u), "pos_weight": float(self.pos_weight),
             "neg_weight": float(self.neg_weight), "n_pos": int(self.n_pos),
             "n_neg": int(self.n_neg), "z_pos": int(self.z_pos), "z_neg": int(self.z_neg),
             "integral": bool(self.integral), "unit": bool(self.unit),
             "trickle": int(self._trickle),
             "shed": [float(self._shed_u), float(self._shed_p), float(self._shed_n)]}
        if self.bits is not None:  # a coarsened order: its keys' mantissa bits
            d["bits"] = int(self.bits)
        if self._arrays is not None:
            base, runs = self._flat_log()
            d["layout"] = "flat_runs" if runs else "flat"
            d["flat"] = list(base)
            if runs:
                d["runs"] = [list(r) for r in runs]
            return d
        self._layout_memo = None  # (a flat order's log: rewritten whole if it comes back)
        if self._levels is not None:
            d["layout"] = "levels"
            d["levels"] = self._levels.to_layout()
        else:
            d["layout"] = "blocks"
            d["blocks"] = {
                "sizes": np.array([len(b) for b in self._keys], dtype=_I8),
                "keys": _flat(self._keys, _F8), "wp": _flat(self._wp, _F8),
                "wn": _flat(self._wn, _F8), "cp": _flat(self._cp, _I8),
                "cn": _flat(self._cn, _I8),
                **{name: np.frombuffer(bytes(getattr(self, "_" + name)), dtype=_F8)
                   for name in ("maxes", "tp", "tn", "gp", "gn")}}
        return d

    @classmethod
    def from_layout(cls, d):
        """A score order from :meth:`to_layout`, checked (types, dtypes, lengths,
        ascending scores, totals against the stored weights); ``ValueError`` naming
        what is wrong. Runtime complexity: `O(n)` numpy passes."""
        keys = {"load", "u", "pos_weight", "neg_weight", "n_pos", "n_neg", "z_pos",
                "z_neg", "integral", "unit", "trickle", "shed", "layout"}
        if not isinstance(d, dict) or not keys <= set(d):
            raise ValueError("bad score-order layout: expected keys " + ", ".join(sorted(keys)))
        for name in ("load", "n_pos", "n_neg", "z_pos", "z_neg", "trickle"):
            if type(d[name]) is not int or d[name] < 0:
                raise ValueError(f"bad score-order layout: {name} = {d[name]!r:.40} is not "
                                 "an int >= 0")
        for name in ("u", "pos_weight", "neg_weight"):
            if type(d[name]) not in (int, float) or not math.isfinite(d[name]):
                raise ValueError(f"bad score-order layout: {name} = {d[name]!r:.40} is not "
                                 "a finite number")
        for name in ("integral", "unit"):
            if not isinstance(d[name], bool):
                raise ValueError(f"bad score-order layout: {name} is not a bool")
        shed = d["shed"]
        if not (isinstance(shed, list) and len(shed) == 3
                and all(type(x) in (int, float) and math.isfinite(x) for x in shed)):
            raise ValueError("bad score-order layout: shed must be 3 finite numbers")
        bits = d.get("bits")
        if bits is not None and (type(bits) is not int or not 0 <= bits <= 52):
            raise ValueError(f"bad score-order layout: bits = {bits!r:.40} is not an int "
                             "from 0 to 52")
        so = cls(d["load"])
        so.integral, so.unit = d["integral"], d["unit"]
        so.bits = bits
        layout = d["layout"]
        memo = None
        if layout in ("flat", "flat_runs"):
            arrs = d.get("flat")
            if not isinstance(arrs, list) or len(arrs) != (3 if so.unit else 5):
                raise ValueError("bad score-order layout: flat must hold 3 arrays (unit "
                                 "weights) or 5")
            dts = (_F8, _F8, _F8, _I8, _I8)
            for i, a in enumerate(arrs):
                if not (isinstance(a, np.ndarray) and a.ndim == 1 and a.dtype == dts[i]
                        and len(a) == len(arrs[0])):
                    raise ValueError(f"bad score-order layout: flat[{i}] is not a 1-d "
                                     f"{np.dtype(dts[i]).name} array of {len(arrs[0])}")
            if len(arrs[0]) > FLAT_MAX:
                raise ValueError("bad score-order layout: a flat order holds at most "
                                 f"{FLAT_MAX} scores")
            base = tuple(_frozen(a) for a in arrs)
            runs = ()
            if layout == "flat_runs":
                k = arrs[0]
                if len(k) and (not np.isfinite(k).all() or (np.diff(k) <= 0).any()):
                    raise ValueError("bad score-order layout: scores must be finite and "
                                     "increasing")
                runs = _runs_of(d.get("runs"), so.unit)
                arrs = _flat_replayed(base, runs, so.unit)  # (fresh arrays)
                if len(arrs[0]) > FLAT_MAX:
                    raise ValueError("bad score-order layout: a flat order holds at most "
                                     f"{FLAT_MAX} scores")
            else:  # (the order writes to its arrays: not to those of its log)
                arrs = [a.copy() for a in arrs]
            prev = _stacked(arrs, so.unit)
            k, wp, wn = arrs[:3]
            cp, cn = (wp, wn) if so.unit else arrs[3:]
            entries = (k, wp, wn, cp.astype(_I8) if so.unit else cp,
                       cn.astype(_I8) if so.unit else cn)
            so._arrays = (k, wp, wn, cp, cn)
            so._levels = None
            memo = _FlatLog(base, runs, prev, sum(r[0].shape[1] for r in runs), so.unit)
        elif layout == "levels":
            so._levels = Levels.from_layout(d.get("levels"), so.unit, so.integral)
            so._arrays = None
            entries = None  # (each side checked; the totals below from the sides' tops)
        elif layout == "blocks":
            b = d.get("blocks")
            names = ("sizes", "keys", "wp", "wn", "cp", "cn", "maxes", "tp", "tn", "gp", "gn")
            if not isinstance(b, dict) or set(b) != set(names):
                raise ValueError("bad score-order layout: blocks must hold " + ", ".join(names))
            for name in names:
                a = b[name]
                dt = _I8 if name in ("sizes", "cp", "cn") else _F8
                if not (isinstance(a, np.ndarray) and a.ndim == 1 and a.dtype == dt):
                    raise ValueError(f"bad score-order layout: blocks.{name} is not a 1-d "
                                     f"{np.dtype(dt).name} array")
            sizes = b["sizes"]
            n, nb = len(b["keys"]), len(sizes)
            if ((sizes < 1).any() or int(sizes.sum()) != n
                    or any(len(b[x]) != n for x in ("wp", "wn", "cp", "cn"))
                    or any(len(b[x]) != nb for x in ("maxes", "tp", "tn"))
                    or len(b["gp"]) != len(b["gn"]) or len(b["gp"]) != (nb + GROUP - 1) // GROUP):
                raise ValueError("bad score-order layout: block arrays of inconsistent lengths")
            ends = np.cumsum(sizes)
            for name, code in (("keys", "d"), ("wp", "d"), ("wn", "d"), ("cp", "q"),
                               ("cn", "q")):
                col = np.ascontiguousarray(b[name])
                out = []
                for a, z in zip(ends - sizes, ends):
                    blk = array(code)
                    blk.frombytes(col[a:z].tobytes())
                    out.append(blk)
                object.__setattr__(so, "_" + name, out)
            for name in ("maxes", "tp", "tn", "gp", "gn"):
                blk = array("d")
                blk.frombytes(np.ascontiguousarray(b[name]).tobytes())
                object.__setattr__(so, "_" + name, blk)
            so._levels = so._arrays = None
            entries = (b["keys"], b["wp"], b["wn"], b["cp"], b["cn"])
            if n and not (b["maxes"] == b["keys"][ends - 1]).all():
                raise ValueError("bad score-order layout: block maxima do not match")
        else:
            raise ValueError(f"bad score-order layout: layout = {layout!r:.40}; expected "
                             "'flat', 'flat_runs', 'levels' or 'blocks'")
        if entries is None:  # levels: a side's running sums start with its totals
            lv = so._levels
            n_p = sum(float((s.w if s.c is None else s.c)[0]) for s in lv.pos if s.size)
            n_n = sum(float((s.w if s.c is None else s.c)[0]) for s in lv.neg if s.size)
            sp = sum(float(s.w[0]) for s in lv.pos if s.size)
            sn = sum(float(s.w[0]) for s in lv.neg if s.size)
        else:
            k, wp, wn, cp, cn = entries
            if len(k) and (not np.isfinite(k).all() or (np.diff(k) <= 0).any()):
                raise ValueError("bad score-order layout: scores must be finite and "
                                 "increasing")
            n_p, n_n = int(np.sum(cp)), int(np.sum(cn))
            sp, sn = float(np.sum(wp)), float(np.sum(wn))
        if n_p != d["n_pos"] or n_n != d["n_neg"] or not (
                d["z_pos"] <= d["n_pos"] and d["z_neg"] <= d["n_neg"]):
            raise ValueError("bad score-order layout: event counts do not match the stored "
                             "entries")
        pw, nw = float(d["pos_weight"]), float(d["neg_weight"])
        tol_p, tol_n = _SLACK * max(1.0, sp), _SLACK * max(1.0, sn)
        if abs(pw - sp) > tol_p or abs(nw - sn) > tol_n:
            raise ValueError("bad score-order layout: totals do not match the stored weights")
        so._u = float(d["u"])
        so._u_from = None
        so.pos_weight, so.neg_weight = pw, nw
        so.n_pos, so.n_neg, so.z_pos, so.z_neg = d["n_pos"], d["n_neg"], d["z_pos"], d["z_neg"]
        so._trickle = d["trickle"]
        so._shed_u, so._shed_p, so._shed_n = (float(x) for x in shed)
        if layout != "blocks":
            for name in _BLOCKS:  # (the blocks are built lazily from a bulk layout)
                try:
                    object.__delattr__(so, name)
                except AttributeError:
                    pass
        so.stamp += 1
        if memo is not None:  # (the next checkpoint writes what changed from here)
            memo.seen = (so.stamp, id(so._arrays))
            memo.restart(so.stamp)
            so._layout_memo = memo
        return so

    def _flat_log(self):
        """``(base, runs)`` of a flat order's log (see :meth:`to_layout`): the arrays
        and runs given last time, a new run appended if the arrays changed since, or the
        arrays given whole (a new log). Runtime complexity: `O(1)` if the order did not
        change since the last call, else `O(n)` numpy."""
        arrays = self._arrays
        unit = arrays[3] is arrays[1] and arrays[4] is arrays[2]
        seen = (self.stamp, id(arrays))
        memo = self._layout_memo
        if memo is not None and memo.unit == unit:
            if memo.seen == seen:
                return memo.base, memo.runs
            run = None
            if memo.touched and memo.span == (memo.seen[0], self.stamp):
                run, bits = _touched_run(arrays, memo.touched, unit)
            if run is None:
                run, bits = _flat_changes(memo.prev, arrays, unit)
            memo.restart(self.stamp)
            if run is None:
                memo.seen = seen
                return memo.base, memo.runs
            m = run[0].shape[1]
            if (len(memo.runs) < memo.most_runs
                    and memo.logged + m <= len(arrays[0]) * memo.most_runs / LAYOUT_RUNS):
                memo.runs = memo.runs + (run,)
                memo.logged += m
                memo.prev = bits
                memo.seen = seen
                return memo.base, memo.runs
        base = _frozen_copies(arrays, unit)
        self._layout_memo = _FlatLog(base, (), _stacked(base, unit), 0, unit)
        self._layout_memo.seen = seen
        self._layout_memo.restart(self.stamp)
        return base, ()


#: A flat order's log in a binary checkpoint (:meth:`ScoreOrder.to_layout`) holds at
#: most this many runs of changed entries before its arrays are given whole again: a
#: load replays them in one sort (a few numpy passes whatever their number), and each
#: run costs a checkpoint a reference in its manifest. Each log's own limit is between
#: half of it and all of it (and its runs' entries at most that share of the order's),
#: taken in turn as logs start, so that orders fed alike (the segments of one stream)
#: are not all given whole again at the same checkpoint.
LAYOUT_RUNS = 8

_log_serial = itertools.count()


class _FlatLog:
    """What :meth:`ScoreOrder.to_layout` gave of a flat order: ``base``, the arrays
    given whole (read-only: ``keys, wp, wn`` with unit weights, then ``cp, cn``
    otherwise), ``runs``, the runs of changed entries given since (read-only; see
    :func:`_flat_changes`), ``prev``, the arrays they add up to (their
    :func:`_stacked` bits), ``logged``, the entries of the runs, ``unit`` and
    ``seen``, the order's ``(stamp, id of its arrays)`` when they were last compared."""

    __slots__ = ("base", "runs", "prev", "logged", "unit", "seen", "most_runs", "touched",
                 "span", "n_touched")

    def __init__(self, base, runs, prev, logged, unit):
        self.base, self.runs, self.prev = base, runs, prev
        self.logged, self.unit, self.seen = logged, unit, None
        half = LAYOUT_RUNS // 2
        self.most_runs = half + next(_log_serial) % (LAYOUT_RUNS - half + 1)
        #: the keys of the batches merged into the flat arrays since the last capture
        #: (None: not known, compare the arrays), and ``span``, the order's stamps they
        #: cover: ``(stamp at the capture, stamp after the last of them)``
        self.touched, self.span, self.n_touched = None, None, 0

    def restart(self, stamp):
        """A capture at ``stamp``: the entries touched are noted from here."""
        self.touched, self.span, self.n_touched = [], (stamp, stamp), 0

    def touch(self, so, keys, before):
        """A batch of entries (ascending distinct ``keys``) was merged into the flat
        arrays of ``so``, whose stamp was ``before`` until then: noted, so that the next capture
        takes those entries rather than compares every entry with the last capture's.
        Anything else (another change between, a class settled to zero, more keys than
        the order holds) leaves the entries unknown: the next capture compares."""
        if self.touched is None:
            return
        arrays = so._arrays
        if (before != self.span[1] or arrays is None or so.n_pos == so.z_pos
                or so.n_neg == so.z_neg or self.n_touched + len(keys) > len(arrays[0])):
            self.touched = None
            return
        self.touched.append(np.array(keys, dtype=_F8))
        self.n_touched += len(keys)
        self.span = (self.span[0], so.stamp)


def _frozen(a):
    """A read-only view of ``a``: an array a checkpoint writer may write once and
    reference while it lives."""
    v = a.view()
    v.flags.writeable = False
    return v


def _frozen_copies(arrays, unit):
    """Read-only copies of a flat order's arrays (``keys, wp, wn``, and ``cp, cn``
    unless the weights are the counts)."""
    return tuple(_frozen(a.copy()) for a in (arrays[:3] if unit else arrays))


def _stacked(arrays, unit):
    """A flat order's arrays as read-only copies in at most two 2-D arrays: float64
    rows of ``keys, wp, wn``, and int64 rows of ``cp, cn`` (None with unit weights,
    where the weights are the counts); what :func:`_flat_changes` compares with, in one
    indexing, and what a run is made of."""
    k, wp, wn = arrays[0], arrays[1], arrays[2]
    vals = np.empty((3, len(k)), dtype=_F8)
    vals[0], vals[1], vals[2] = k, wp, wn
    vals.flags.writeable = False
    if unit:
        return vals, None
    counts = np.empty((2, len(k)), dtype=_I8)
    counts[0], counts[1] = arrays[3], arrays[4]
    counts.flags.writeable = False
    return vals, counts


def _flat_changes(prev, cur, unit):
    """The run of entries of the flat arrays ``cur`` that are not in ``prev`` (their
    :func:`_stacked` copies) bit for bit (new scores, changed weights or counts), and
    of the scores of ``prev`` that ``cur`` no longer holds (zero weights and counts: no
    stored score has both classes' counts 0), in score order, and ``cur``'s
    :func:`_stacked` copies; the run is None if nothing changed. A run is a tuple of
    read-only arrays: float64 ``(3, m)`` rows of scores, ``wp``, ``wn``, and, unless the
    weights are the counts, int64 ``(2, m)`` rows of ``cp``, ``cn``. Runtime
    complexity: `O(n log(n))` numpy (one search of the scores), a dozen numpy calls."""
    now = _stacked(cur, unit)
    vals, counts = now
    pv, pc = prev
    pk, k = pv[0], vals[0]
    n0 = len(pk)
    gone = None
    if n0 == 0:
        changed = np.ones(len(k), dtype=bool)
    else:
        pos = pk.searchsorted(k)
        np.minimum(pos, n0 - 1, out=pos)
        hit = pk[pos] == k  # (by value: 0.0 and -0.0 are one score, as in the order)
        # (bit for bit: a weight of -0.0 is not 0.0 here)
        changed = (pv.view(_I8).take(pos, axis=1) != vals.view(_I8)).any(axis=0)
        if counts is not None:
            changed |= (pc.take(pos, axis=1) != counts).any(axis=0)
        if np.count_nonzero(hit) < n0:
            gone = np.ones(n0, dtype=bool)
            gone[pos[hit]] = False
    at = np.flatnonzero(changed)
    if gone is None and not len(at):
        return None, now
    run = [vals.take(at, axis=1)] + ([] if counts is None else [counts.take(at, axis=1)])
    if gone is not None:  # (removed scores: zero weights and counts, in score order)
        dead = pk[gone]
        run[0] = np.concatenate((run[0], np.zeros((3, len(dead)), dtype=_F8)), axis=1)
        run[0][0, len(at):] = dead
        order = np.argsort(run[0][0], kind="stable")
        run = [x.take(order, axis=1) if x.shape[1] == len(order) else
               np.concatenate((x, np.zeros((2, len(dead)), dtype=_I8)), axis=1).take(
                   order, axis=1) for x in run]
    for x in run:
        x.flags.writeable = False
    return tuple(run), now


def _touched_run(cur, touched, unit):
    """The run of entries of the flat arrays ``cur`` at the scores ``touched`` (arrays of
    the keys merged in since the last capture: additions only, so each is stored), as
    :func:`_flat_changes` gives it (each entry touched changed: its count grew), and ``cur``'s
    :func:`_stacked` copies; ``(None, None)`` if a key is not stored (the caller then
    compares). Runtime complexity: `O(m log(n))` for ``m`` keys touched, plus a copy."""
    keys = np.unique(np.concatenate(touched)) if len(touched) > 1 else touched[0]
    now = _stacked(cur, unit)
    vals, counts = now
    k = vals[0]
    pos = k.searchsorted(keys)
    if len(pos) and (pos[-1] >= len(k) or not np.array_equal(k[pos], keys)):
        return None, None
    if not len(pos):
        return None, now
    run = [vals[:, pos]] + ([] if counts is None else [counts[:, pos]])
    for x in run:
        x.flags.writeable = False
    return tuple(run), now


def _runs_of(runs, unit):
    """The runs of a ``"flat_runs"`` layout, checked (``ValueError`` naming the run):
    a list of runs as :func:`_flat_changes` makes them, each of ascending finite scores,
    removed scores with zero weights."""
    if not isinstance(runs, list) or not runs:
        raise ValueError("bad score-order layout: runs must be a non-empty list")
    out = []
    for i, r in enumerate(runs):
        where = f"bad score-order layout: runs[{i}]"
        if not isinstance(r, list) or len(r) != (1 if unit else 2):
            raise ValueError(f"{where} must hold {'1 array (unit weights)' if unit else '2 arrays'}")
        vals = r[0]
        if not (isinstance(vals, np.ndarray) and vals.dtype == _F8 and vals.ndim == 2
                and vals.shape[0] == 3):
            raise ValueError(f"{where}[0] is not a float64 array of 3 rows")
        m = vals.shape[1]
        if not unit:
            c = r[1]
            if not (isinstance(c, np.ndarray) and c.dtype == _I8 and c.shape == (2, m)):
                raise ValueError(f"{where}[1] is not an int64 array of 2 rows of {m}")
        k = vals[0]
        if not np.isfinite(vals).all() or (m and (np.diff(k) <= 0).any()):
            raise ValueError(f"{where}: scores must be finite and increasing, weights finite")
        out.append(tuple(_frozen(a) for a in r))
    return tuple(out)


def _flat_replayed(base, runs, unit):
    """The flat arrays ``(keys, wp, wn[, cp, cn])`` of a log: the entries of ``base``
    replaced by those of the runs at the same scores, newer runs first, those with zero
    counts removed; fresh arrays, bit for bit what the order held. ``ValueError`` if a
    run removes a score not stored. Runtime complexity: `O(N log(N))` numpy, ``N`` the
    entries of the base and the runs (one sort of all of them)."""
    parts = [base] + [(r[0][0], r[0][1], r[0][2]) + (() if unit else (r[1][0], r[1][1]))
                      for r in runs]
    keys = np.concatenate([p[0] for p in parts])
    gen = np.repeat(np.arange(len(parts)), [len(p[0]) for p in parts])
    order = np.lexsort((gen, keys))  # by score, then the newest last
    sk = keys[order]
    n = len(sk)
    last = np.ones(n, dtype=bool)
    if n:
        np.not_equal(sk[1:], sk[:-1], out=last[:-1])
    first = np.ones(n, dtype=bool)
    first[1:] = last[:-1]
    pick = order[last]
    cols = [np.concatenate([p[i] for p in parts])[pick] for i in range(3 if unit else 5)]
    if unit:
        dead = (cols[1] == 0.0) & (cols[2] == 0.0)
    else:
        dead = (cols[3] == 0) & (cols[4] == 0)
    if (dead & first[last]).any():  # (a removal alone at its score: nothing to remove)
        raise ValueError("bad score-order layout: a run removes a score the order does not "
                         "hold")
    if dead.any():
        keep = ~dead
        cols = [c[keep] for c in cols]
    return cols
