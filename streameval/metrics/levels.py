"""Sorted numpy runs ("levels") of a score order: the bulk layout of big ``ScoreOrder``s.

The events are aggregated per distinct score and class. Each class keeps its own list
of :class:`Side` s, sorted runs of distinct scores of different sizes (a log-structured
merge layout): a batch becomes a new side, and a side is merged into the one below it
when that one is at most :data:`GROWTH` times bigger. A side holds

- ``k``: its ascending distinct scores;
- ``w``: its weight at or above each score (a running sum from the top);
- ``c``: its event count at or above each, kept only once a weight other than 1 was
  added (with unit weights counts equal weights, and ``None`` stands for them);
- ``ow``: the weight at each score itself, kept only once a weight that is not an
  integer was added (integer running sums are exact, and their differences give each
  score's weight back; float ones are not, and a state must round-trip exactly).

Every running sum has one element more than its keys, a trailing 0, so that
``w[searchsorted(k, s)]`` reads "at or above ``s``" for any ``s``. Values are float64;
with integer weights they are exact integers (below ``2**53``).

Why this shape:

- a rank count is one ``searchsorted`` and a read: the negative weight at or above
  ``s`` is ``w[searchsorted(k, s)]`` summed over the negative sides; `O(m log(n))` for
  a batch of ``m`` scores, and each class's scores are searched only among the other
  class's sides;
- two sides of comparable sizes (what the merge rule makes) merge by one stable sort
  of both: numpy's timsort merges two sorted runs in linear time, cheaper than
  searching one in the other (`O(n + m)` against `O(m log n)` plus the placement); with one event of weight 1 per score (all-distinct
  scores) the running sum of the result is a countdown and needs no pass at all. A
  small side merging into a big one (AP's compaction) adds a step function to the big
  one's running sums (``np.repeat``) and inserts the new scores instead: a few `O(n)`
  numpy passes, no cumulative sum over the big side (see :data:`SORT_SHARE`);
- average precision, ``sum over positive scores of (weight there) * T / A`` (``T``,
  ``A``: positive and total weight at or above the score), reads the positive sides
  only: while it is read, the biggest positive side keeps ``pn``, the negative weight
  at or above each of its scores, which every negative batch updates with one step
  function. Its cost follows the scores that hold positives, a tenth of them at a 10%
  positive rate, and it never merges the negative sides.

Memory with unit weights: 16 bytes per stored (score, class) entry, plus 8 per score of
the biggest positive side while average precision is read: at most 24 bytes per
distinct score when scores are distinct (what models emit), 40 for a score that holds
both classes. Counts add 8 bytes per entry, fractional weights 8 more. While average
precision is read, the biggest positive side also keeps where the other positive
sides' scores fall among its own (a memo, see ``Levels._tail_bounds``: 16 bytes per
score of those sides, which hold fewer than a quarter as many), at most 4 bytes more
per score of the biggest side: 28 bytes per distinct positive score at most.

Removals are "tombstones": a side of negated entries, whose counts and weights cancel
those of the side holding the events when the two are merged. An entry whose count and
weight both cancel is dropped then; one whose count cancels but not its weight (a
zero-weight event removed where a weighted one came in) stays while other sides of its
class may hold that score's events, and goes with the class's last merge into one side
(its weight then is rounding; see :func:`merge`). A side's own counts may hence be
negative or zero; the sums over all sides are the order's.

No ``np.dot`` here: for long vectors OpenBLAS runs it on several threads, which then
spin and take CPU time from everything around; products are summed by
numpy itself (pairwise summation, also more accurate).

Imports: numpy only. :mod:`streameval.metrics.scoreorder` keeps a :class:`Levels`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Side", "Levels", "above", "GROWTH", "AP_RENT"]

_F8 = np.float64
_I8 = np.int64

#: A new side is merged into the one below it while that one is at most this many
#: times bigger: side sizes then fall by this factor from the oldest to the newest,
#: ``log(n / m) / log(GROWTH)`` sides for batches of ``m``, and each entry is rewritten
#: about ``GROWTH`` times per side (amortised). Measured with ``bench_ranking.py``: 2 to
#: 16 are within 10% of each other on a million distinct scores.
GROWTH = 4

#: Sides smaller than this are merged whatever their sizes: merging them costs little,
#: and every side costs a search per batch.
MIN_SIDE = 4096

#: Two sides merge by one stable sort of both (:func:`_merge_sorted`: two sorted runs,
#: which numpy's timsort merges in linear time, in few numpy calls) when the bigger
#: holds at most this many entries, or the smaller at least a :data:`SORT_SHARE`-th of
#: the bigger's, or both hold one event of weight 1 per score without ``pn`` (then the
#: sorted scores alone make the side). Otherwise the smaller side's scores are placed
#: among the bigger's by searches (:func:`_merge_placed`: fewer passes over the bigger
#: side's arrays). Measured on all-distinct scores (``benchmarks/bench_ranking.py`` and
#: a direct comparison): sorting is 2-5x faster from a quarter of the size up, and up
#: to 2x slower below a sixteenth with AP's ``pn`` or weights other than 1.
SMALL_MERGE = 8192
SORT_SHARE = 4

#: A binary checkpoint gives the arrays of a side in pieces of this many entries (the
#: same bounds every time, so that a piece written once is referenced by later
#: checkpoints and by the first one after a restart).
PIECE = 1 << 17

#: A side of at least this many entries made by a merge of integer weights is given to
#: a checkpoint as its merge (the two sides it was merged from, which earlier
#: checkpoints wrote, and the merge's flag: the loader merges them again, the same
#: bits) until its own arrays have been given, a few pieces per checkpoint (see
#: :meth:`Levels.to_layout`): a big merge adds :data:`PIECE_BUDGET` bytes to a
#: checkpoint, not the whole merged side.
DEFER_MIN = 1 << 18

#: Bytes of the pieces of merged sides one :meth:`Levels.to_layout` gives at least (or
#: 1.5 times the pieces' bytes merges made per call on average, over at least 4 calls,
#: if more: the debt is paid faster than it grows). The biggest side goes first, so that
#: the merges a load does again stay few. (Paying twice the average made the worst
#: increment bigger in ``bench_state.py --parts length``.)
PIECE_BUDGET = 4 << 20

#: Merges of sides given as their merges nest at most this deep (a merge deeper is
#: given whole): what a load merges again, and what memory the sources hold while
#: checkpoints are rare, stay bounded. A pending side keeps its sources and they keep
#: theirs, down to this depth: when checkpoints come seldom against the merges (none
#: for millions of events after a first one), the sources can hold about as much again
#: as the order itself; frequent checkpoints write the pieces and release them.
MAX_CHAIN = 6

#: Average precision reads the biggest positive side in numpy passes and the other
#: positive sides with searches (about 20 times dearer per entry). Once the entries
#: outside the biggest side, summed over the reads since it last changed, times this
#: reach its size, they are merged into it (rent or buy).
AP_RENT = 4


def above(w, ints):
    """Running sums "at or above" of per-entry values ``w`` (ascending scores): an
    array one longer than ``w``, ending with 0. ``ints``: the values are integers whose
    sums stay below ``2**53``, so the sums run in int64 (exact, and cheaper than
    a float64 ``cumsum``)."""
    n = len(w)
    out = np.empty(n + 1)
    if not n:
        out[0] = 0.0
    elif ints:
        c = np.cumsum(w, dtype=_I8)
        t = c[-1]
        out[0] = t
        np.subtract(t, c, out=out[1:])
    else:
        out[n] = 0.0
        out[:n] = np.cumsum(w[::-1])[::-1]
    return out


def _countdown(n):
    """The running sum "at or above" of ``n`` entries of weight 1: ``n, ..., 1, 0``."""
    return np.arange(n, -1, -1, dtype=_F8)


def own(c):
    """Per-entry values of a running sum "at or above" (its differences)."""
    return c[:-1] - c[1:]


def _bounds(K, q):
    """``searchsorted(K, q, "left")`` and ``"right"`` for distinct ascending ``K``, with
    one search (the right bound is the left one past an equal key)."""
    if len(q) < 256:  # few queries: a second search is cheaper than four numpy calls
        return K.searchsorted(q), K.searchsorted(q, "right")
    lo = K.searchsorted(q)
    return lo, _right_of(K, q, lo)


def _right_of(K, q, lo):
    """``searchsorted(K, q, "right")`` from the left bounds ``lo`` (distinct ``K``)."""
    hi = lo.copy()
    if len(K):
        hi += K[np.minimum(lo, len(K) - 1)] == q
    return hi


def _runs(hi, n):
    """Run lengths of the step function "entries of the small side strictly below each
    of the ``n`` big keys", from the small keys' right bounds ``hi`` among them."""
    runs = np.empty(len(hi) + 1, dtype=_I8)
    if len(hi):
        runs[0] = hi[0]
        np.subtract(hi[1:], hi[:-1], out=runs[1:-1])
        runs[-1] = n - hi[-1]
    else:
        runs[0] = n
    return runs


def _step(c, runs):
    """A small side's running sum ``c`` read at each key of a big side."""
    return np.repeat(c, runs)


class Side:
    """One sorted run of one class's aggregated events (see the module notes)."""

    __slots__ = ("k", "w", "c", "ow", "pn", "size", "ones", "places", "src", "done",
                 "track")

    def __init__(self, k, w, c, ow, pn=None, ones=False):
        self.k, self.w, self.c, self.ow = k, w, c, ow
        self.pn = pn  # a positive side, while AP is read: negative weight at or above
        # the biggest positive side, while AP is read: (keys, lo), the other positive
        # sides' scores at the last read and where they fall among its own (see
        # Levels._tail_bounds); a side's keys never change, so neither do these
        self.places = None
        self.size = len(k)
        # every score holds exactly one event of weight 1 (distinct scores, unit
        # weights, no tombstone): AP's per-score weights are all 1
        self.ones = ones
        # a big side of a merge, until a checkpoint has given all its arrays: the sides
        # it was merged from, the merge's flag and the depth of such merges below it,
        # ``(x, y, final, depth)`` (see Levels.to_layout)
        self.src = None
        self.done = 0  # pieces of its arrays given so far (see Levels.to_layout)
        self.track = False  # made while checkpoints are taken: its merges keep sources

    @classmethod
    def build(cls, keys, w, c, unit, ints, integral):
        """A side of ascending distinct ``keys`` with their weights ``w`` and counts
        ``c`` (float64 and int64 numpy arrays; counts may be negative: a tombstone)."""
        s = above(w, ints)
        return cls(keys, s, None if unit else above(c, True), None if integral else w,
                   ones=unit and s[0] == len(keys) and bool((c > 0).all()))

    def weights(self):
        """The weight at each score."""
        return own(self.w) if self.ow is None else self.ow

    def counts(self):
        """The event count at each score (float64)."""
        return own(self.w if self.c is None else self.c)

    def with_counts(self):
        if self.c is not None:
            return self
        return Side(self.k, self.w, self.w.copy(), self.ow, self.pn)  # (not ones now)

    def with_weights(self):
        if self.ow is not None:
            return self
        return Side(self.k, self.w, self.c, own(self.w), self.pn)

    def at_or_above(self, q):
        """This side's weight at or above each of the ascending scores ``q``."""
        return self.w[self.k.searchsorted(q)]

    def check(self, unit, integral):
        k = self.k
        assert k.dtype == _F8 and k.ndim == 1
        assert (np.diff(k) > 0).all() and np.isfinite(k).all()
        for c in (self.w, self.c):
            if c is not None:
                assert c.dtype == _F8 and len(c) == len(k) + 1 and c[-1] == 0.0
        assert (self.c is None) == unit and (self.ow is None) == integral
        if self.ow is not None:
            scale = max(1.0, float(np.abs(self.ow).sum()))
            assert np.allclose(own(self.w), self.ow, rtol=0, atol=1e-9 * scale)
        else:
            assert (own(self.w) == np.round(own(self.w))).all()
        # only scores holding events of the class, or weight whose events other sides
        # still hold (see merge)
        assert ((self.counts() != 0) | (self.weights() != 0)).all()
        assert self.size == len(k)
        if self.ones:
            assert self.c is None and (self.counts() == 1.0).all()


class _Placement:
    """Where the keys ``k`` of a small side land among the keys ``K`` of a big one."""

    __slots__ = ("pos", "hit", "runs", "at", "mask", "slots", "size")

    def __init__(self, K, k):
        n = len(K)
        pos, right = _bounds(K, k)
        hit = right != pos
        self.pos, self.hit = pos, hit
        self.runs = _runs(right, n)  # entries of k strictly below each K[i]
        self.at = at = pos[~hit]  # insertion points of the new keys
        self.size = n + len(at)
        self.slots = at + np.arange(len(at))
        if len(at):
            mask = np.ones(self.size, dtype=bool)
            mask[self.slots] = False
            self.mask = mask
        else:
            self.mask = None

    def place(self, big, new_values, tail=True):
        """Values over the merged keys: ``big`` (the big side's, updated) and those of
        the new keys; a running sum gets its trailing 0 (``tail``)."""
        out = np.empty(self.size + tail)
        body = out
        if tail:
            out[-1] = 0.0
            body = out[:-1]
        if self.mask is None:
            body[:] = big
        else:
            body[self.mask] = big
            body[self.slots] = new_values
        return out

    def running(self, big, small):
        """The merged running sum "at or above" of the big side's ``big`` and the small
        side's ``small``: the small one's read at each big key (a step function) added to
        the big one's, and the new keys' values (the big one's at their insertion point
        plus their own)."""
        new = ~self.hit
        return self.place(big[:-1] + _step(small, self.runs), big[self.at] + small[:-1][new])

    def merged_index(self):
        """Indices, among the merged keys, of the big side's entries that were hit."""
        i = self.pos[self.hit]
        return i + np.searchsorted(self.at, i, "right")


def merge(x, y, final=False):
    """One side holding the events of sides ``x`` and ``y``.

    An entry whose count and weight both cancel (a tombstone meeting its events) is
    dropped. One whose count cancels but not its weight is kept while other sides of the
    class may hold events at its score (a zero-weight event removed where one of weight
    1 was added: count 0, weight 1, the other side holding the rest). With ``final``
    (the result is the class's only side) every entry without events goes, and the
    weight left there (rounding) with it; with fractional weights the running sums are
    then recomputed from each score's weight, so that the rounding of step functions
    added over many merges does not build up. Cost: a few numpy passes over the bigger
    side plus `O(m log(n))` searches for the smaller (placed), or one sort of both."""
    big, small = (x, y) if x.size >= y.size else (y, x)
    if (big.size <= SMALL_MERGE or small.size * SORT_SHARE >= big.size
            or (big.ones and small.ones and (big.pn is None or small.pn is None))):
        out = _merge_sorted(big, small, final)
    else:
        out = _merge_placed(big, small, final)
        if final:
            out = _final(out)
    out.track = x.track or y.track
    if out.track and out.size >= DEFER_MIN and big.ow is None and small.ow is None:
        # (integer weights: every sum exact, so the merge done again gives the same bits)
        depth = 1 + max(x.src[3] if x.src else 0, y.src[3] if y.src else 0)
        if depth <= MAX_CHAIN:
            out.src = (_source(x), _source(y), bool(final), depth)
    return out


def _source(s):
    """What a merged side's checkpoint needs of an input side: its keys and running
    sums (none for one event of weight 1 per score: a countdown), not ``pn``."""
    w = None if s.ones and s.c is None else s.w
    out = Side(s.k, w, s.c, s.ow, None, s.ones)
    out.size, out.src, out.done, out.track = s.size, s.src, s.done, True
    return out


def _merge_sorted(big, small, final):
    """``merge`` by one stable sort of both sides' scores (two sorted runs: numpy's
    timsort merges them in linear time, faster than searching the smaller side's
    scores in the bigger one once it holds more than a few of them), each score's
    values gathered through the sort and summed where both sides hold the score, and
    the running sums recomputed from them (int64 sums with integer weights). With
    ``Side.ones`` on both sides and no ``pn``, the sorted scores alone make the side
    (its running sum counts down from its size)."""
    cat = np.concatenate((big.k, small.k))
    with_pn = big.pn is not None and small.pn is not None
    ones = big.ones and small.ones
    if ones and not with_pn:
        k = np.sort(cat, kind="stable")
        if not (k[1:] == k[:-1]).any():
            return Side(k, _countdown(len(k)), None, None, ones=True)
    order = np.argsort(cat, kind="stable")
    k = cat[order]
    starts = None
    same = k[1:] == k[:-1]
    if same.any():  # a score in both sides: its two entries are neighbours
        first = np.empty(len(k), dtype=bool)
        first[0] = True
        np.logical_not(same, out=first[1:])
        k = k[first]
        starts = np.flatnonzero(first)
    elif ones:  # (with pn: gathered through the sort)
        pn = np.empty(len(k) + 1)
        pn[-1] = 0.0
        np.take(np.concatenate((big.pn[:-1], small.pn[:-1])), order, out=pn[:-1])
        return Side(k, _countdown(len(k)), None, None, pn, ones=True)

    def gathered(x, y):
        v = np.concatenate((x, y))[order]
        return v if starts is None else np.add.reduceat(v, starts)

    w = gathered(big.weights(), small.weights())
    c = None if big.c is None else gathered(big.counts(), small.counts())
    pn = None
    if with_pn:  # (the same at a score in both: the first of the two)
        pn = np.concatenate((big.pn[:-1], small.pn[:-1]))[order]
        if starts is not None:
            pn = pn[starts]
    # entries without events: those whose count and weight both cancel; with final,
    # every one whose count is 0 (only where a count is stored: else it is the weight)
    drop = None
    if c is not None and final:
        drop = c == 0.0
    elif starts is not None:
        drop = w == 0.0
        if c is not None:
            drop &= c == 0.0
    if drop is not None and drop.any():
        keep = ~drop
        k, w = k[keep], w[keep]
        c = None if c is None else c[keep]
        pn = None if pn is None else pn[keep]
    if pn is not None:
        pn = np.append(pn, 0.0)
    ints = big.ow is None
    return Side(k, above(w, ints), None if c is None else above(c, True),
                None if ints else w, pn, ones=big.ones and small.ones and starts is None)


def _merge_placed(big, small, final):
    """``merge`` by placing the smaller side's scores among the bigger's."""
    pl = _Placement(big.k, small.k)
    new = ~pl.hit
    k = big.k if pl.mask is None else pl.place(big.k, small.k[new], tail=False)
    w = pl.running(big.w, small.w)
    c = ow = None
    if big.c is not None:
        c = pl.running(big.c, small.c)
    if big.ow is not None:
        b = big.ow.copy()
        b[pl.pos[pl.hit]] += small.ow[pl.hit]
        ow = pl.place(b, small.ow[new], tail=False)
    pn = None
    if big.pn is not None and small.pn is not None:  # the same at a score in both
        pn = pl.place(big.pn[:-1], small.pn[:-1][new])
    out = Side(k, w, c, ow, pn, ones=big.ones and small.ones and not pl.hit.any())
    if not final and pl.hit.any():  # (final: _final drops every empty entry)
        idx = pl.merged_index()
        counts = w if c is None else c
        empty = (counts[idx] - counts[idx + 1]) == 0.0
        if c is not None:  # (unit weights: the weight is the count)
            empty &= (ow[idx] if ow is not None else w[idx] - w[idx + 1]) == 0.0
        if empty.any():
            out = _drop(out, idx[empty])
    return out


def _final(side):
    """A class's only side: without entries that hold no event (their leftover weight
    leaves the running sums too), and, with fractional weights, running sums
    recomputed from each score's weight. `O(n)`."""
    empty = np.flatnonzero(side.counts() == 0.0)
    if len(empty):
        side = _drop(side, empty)
    if side.ow is not None:
        side.w = above(side.ow, False)
    return side


def _drop(side, idx):
    """``side`` without the entries at ``idx`` (their count is zero): a weight left
    there (rounding of fractional weights) leaves with them, so the running sums at and
    below lose it too."""
    w = side.w
    r = side.ow[idx] if side.ow is not None else w[idx] - w[idx + 1]
    if r.any():
        w = w - _step(above(r, False), _runs(idx + 1, len(w)))
    return Side(np.delete(side.k, idx), np.delete(w, idx),
                None if side.c is None else np.delete(side.c, idx),
                None if side.ow is None else np.delete(side.ow, idx),
                None if side.pn is None else np.delete(side.pn, idx))


def _push(sides, s):
    """Add side ``s`` to a class's list (biggest first) and merge while the side below
    the newest is at most :data:`GROWTH` times bigger (or smaller than
    :data:`MIN_SIDE`)."""
    sides.append(s)
    while len(sides) > 1 and (sides[-2].size <= GROWTH * sides[-1].size
                              or sides[-2].size < MIN_SIDE):
        top = sides.pop()
        below = sides.pop()
        sides.append(merge(below, top, final=not sides))


class Levels:
    """The positive and the negative sides of a big score order.

    ``pos``, ``neg``: lists of :class:`Side`, biggest first. ``ap``: average precision
    has been read, so every positive side keeps ``pn`` (the negative weight at or above
    each of its scores), which each negative batch updates with the searches its pairs
    need anyway. ``unit``, ``integral``: the order's flags (counts stored unless unit,
    each score's weight stored unless integral).
    """

    __slots__ = ("pos", "neg", "ap", "rent", "unit", "integral", "_debt")

    def __init__(self, unit, integral):
        self.pos, self.neg = [], []
        self.ap = False
        self.rent = 0  # entries outside pos[0], summed over AP's reads
        self.unit, self.integral = unit, integral
        # bytes of merged sides' pieces owed after the last to_layout, bytes owed anew
        # summed over the calls, calls (the pace of the pieces)
        self._debt = [0, 0, 0]

    @classmethod
    def build(cls, keys, wp, wn, cp, cn, unit, ints, integral):
        lv = cls(unit, integral)
        lv.add(keys, wp, wn, cp, cn, ints)
        return lv

    @property
    def size(self):
        """Stored (score, class) entries over all sides."""
        return sum(s.size for s in self.pos) + sum(s.size for s in self.neg)

    def add(self, keys, wp, wn, cp, cn, ints, pairs=False):
        """Add aggregated entries (negated ones: a removal); returns the pairs they
        make with the events stored before (``U``'s increment less their own pairs).

        The positives' scores are searched among the negative sides (negatives below
        each, ties one half) and the negatives' among the positive sides (positives
        above); the same searches give the positive sides' ``pn``. With ``pairs``,
        returns ``(du, dt)``: ``dt`` the weight of the pairs the entries make with the
        stored events of the other class at the same key (each entry's weight times the
        other class's weight stored at its key: the difference of the two searches),
        the change of ``sum over keys of wp * wn`` less the entries' own pairs."""
        ip = np.flatnonzero(cp != 0)  # (on a bool mask: 5x faster than on ints)
        ineg = np.flatnonzero(cn != 0)
        sp = sn = None
        du = 0.0
        dt = 0.0
        if len(ip):
            w = wp[ip]
            sp = Side.build(keys[ip], w, cp[ip], self.unit, ints, self.integral)
            sp.track = self._debt[2] > 0
            # negatives at or above and strictly above each new positive, summed over
            # the negative sides: U gains w * (N - (at_or_above + above) / 2)
            at_or_above = np.zeros(len(ip) + 1)
            strictly = np.zeros(len(ip))
            total = 0.0
            for s in self.neg:
                if s.size:
                    lo, hi = _bounds(s.k, sp.k)
                    at_or_above[:-1] += s.w[lo]
                    strictly += s.w[hi]
                    total += s.w[0]
            if pairs:  # negative weight at each new positive's key
                same = at_or_above[:-1] - strictly
                same *= w
                dt += float(same.sum())
            strictly += at_or_above[:-1]
            strictly *= -0.5
            strictly += total
            strictly *= w
            du += float(strictly.sum())
        if len(ineg):
            w = wn[ineg]
            sn = Side.build(keys[ineg], w, cn[ineg], self.unit, ints, self.integral)
            sn.track = self._debt[2] > 0
            # positives at or above plus strictly above each new negative: U gains
            # w * (at_or_above + above) / 2
            acc = np.zeros(len(ineg))
            same = np.zeros(len(ineg)) if pairs else None
            for s in self.pos:
                if s.size:
                    lo, hi = _bounds(s.k, sn.k)
                    acc += s.w[lo]
                    acc += s.w[hi]
                    if pairs:  # positive weight at each new negative's key
                        same += s.w[lo]
                        same -= s.w[hi]
                    if s.pn is not None:  # the new negatives above each of its scores
                        s.pn[:-1] += _step(sn.w, _runs(hi, s.size))
            acc *= w
            du += 0.5 * float(acc.sum())
            if pairs:
                same *= w
                dt += float(same.sum())
            _push(self.neg, sn)
        if sp is not None:
            if self.ap:
                if sn is not None:  # this batch's negatives at or above its positives
                    at_or_above[:-1] += sn.at_or_above(sp.k)
                sp.pn = at_or_above
            _push(self.pos, sp)
        return (du, dt) if pairs else du

    def _negatives_above(self, q):
        """Negative weight at or above each of the ascending scores ``q`` (a running
        sum with its trailing 0)."""
        out = np.zeros(len(q) + 1)
        for s in self.neg:
            out[:-1] += s.at_or_above(q)
        return out

    def counts_at(self, keys):
        """``(cp, cn, wp, wn)`` stored at each of the ascending ``keys``."""
        m = len(keys)
        out = [np.zeros(m), np.zeros(m), np.zeros(m), np.zeros(m)]
        for sides, c_out, w_out in ((self.pos, out[0], out[2]), (self.neg, out[1], out[3])):
            for s in sides:
                if not s.size:
                    continue
                i = np.minimum(s.k.searchsorted(keys), s.size - 1)
                hit = s.k[i] == keys
                j = i[hit]
                w_out[hit] += s.w[j] - s.w[j + 1] if s.ow is None else s.ow[j]
                c = s.w if s.c is None else s.c
                c_out[hit] += c[j] - c[j + 1]
        return out[0].astype(_I8), out[1].astype(_I8), out[2], out[3]

    @staticmethod
    def _compacted(sides, keep=True, final=True):
        """The sides merged into one (or None); with ``keep`` the list is replaced by
        it (else the layout is left as it is). ``final``: they are all the class's
        sides (else others remain: see :func:`merge`)."""
        if not keep:
            sides = list(sides)
        while len(sides) > 1:
            top = sides.pop()
            below = sides.pop()
            sides.append(merge(below, top, final=final and not sides))
        return sides[0] if sides else None

    def entries(self, keep=True):
        """``(keys, wp, wn, cp, cn)`` per distinct score, ascending (fresh arrays, counts
        int64); the sides of each class are merged (and, with ``keep``, kept so)."""
        p = self._compacted(self.pos, keep)
        n = self._compacted(self.neg, keep)
        e = np.empty(0)
        pk, pw, pc = (e, e, e) if p is None else (p.k, p.weights(), p.counts())
        nk, nw, nc = (e, e, e) if n is None else (n.k, n.weights(), n.counts())
        P, N = len(pk), len(nk)
        if not N:
            return pk.copy(), pw.copy(), np.zeros(P), pc.astype(_I8), np.zeros(P, dtype=_I8)
        if not P:
            return nk.copy(), np.zeros(N), nw.copy(), np.zeros(N, dtype=_I8), nc.astype(_I8)
        cat = np.concatenate((pk, nk))
        order = np.argsort(cat, kind="stable")  # two sorted runs: a linear merge
        s = cat[order]
        first = np.empty(len(s), dtype=bool)
        first[0] = True
        np.not_equal(s[1:], s[:-1], out=first[1:])
        keys = s[first]
        slot = np.empty(len(s), dtype=_I8)
        slot[order] = np.cumsum(first) - 1  # each input entry's distinct score
        k = len(keys)
        out_wp, out_wn = np.zeros(k), np.zeros(k)
        out_cp, out_cn = np.zeros(k, dtype=_I8), np.zeros(k, dtype=_I8)
        out_wp[slot[:P]] = pw
        out_cp[slot[:P]] = pc
        out_wn[slot[P:]] = nw
        out_cn[slot[P:]] = nc
        return keys, out_wp, out_wn, out_cp, out_cn

    def at_positive_keys(self):
        """``(p, tps, fps, f)`` at each score holding positive entries, ascending: the
        positive weight there, the positive and the negative weight at or above it, the
        negative weight strictly above it; or None without positive entries. The sides
        of each class are merged and kept so (as :meth:`entries`), and the positive
        scores searched among the negative ones: no sort of both classes together.
        `O(n)` numpy plus `O(n_pos log(n_neg))` searches. With integer weights every
        value is the exact integer that :meth:`entries` and cumulative sums give."""
        p = self._compacted(self.pos)
        n = self._compacted(self.neg)
        if p is None:
            return None
        tps = p.w[:-1]
        if n is None or not n.size:
            fps = np.zeros(p.size)
            return p.weights(), tps, fps, fps
        lo, hi = _bounds(n.k, p.k)
        return p.weights(), tps, n.w[lo], n.w[hi]

    def with_counts(self):
        self.unit = False
        self.pos = [s.with_counts() for s in self.pos]
        self.neg = [s.with_counts() for s in self.neg]

    def with_weights(self):
        self.integral = False
        self.pos = [s.with_weights() for s in self.pos]
        self.neg = [s.with_weights() for s in self.neg]

    def has(self, positive):
        """Whether any side of the class holds entries (tombstones included)."""
        return any(s.size for s in (self.pos if positive else self.neg))

    def ap_numerator(self):
        """``sum over positive scores of (weight there) * T / A``: average precision
        times the positive weight. One numpy pass over the biggest positive side (its
        ``T`` from the other positive sides by step functions, its ``A = T + pn``),
        searches for the scores of the other positive sides. A score whose ``A`` is 0
        (zero weights at the top, or events removed) has precision 0; with one event
        of weight 1 at every positive score (``Side.ones``) ``A >= T >= 1``."""
        pos = self.pos
        if not self.ap:
            self.ap = True
            for s in pos:
                s.pn = self._negatives_above(s.k)
        if not pos:
            return 0.0
        if len(pos) > 1:
            self.rent += sum(s.size for s in pos[1:])
            if self.rent * AP_RENT >= pos[0].size:
                self._compacted(pos)
                self.rent = 0
            elif len(pos) > 2:
                rest = pos[1:]
                del pos[1:]
                pos.append(self._compacted(rest, final=False))  # (pos[0] remains)
        big = pos[0]
        t = big.w[:-1]
        tail = pos[1] if len(pos) > 1 else None
        if tail is not None:
            lo, hi = self._tail_bounds(big, tail)
            # (the step function's fresh array takes the sum: one array of the size of
            # the big side less; float addition commutes, so the same bits)
            t = _step(tail.w, _runs(hi, big.size))
            t += big.w[:-1]
        a = big.pn[:-1] + t
        if all(s.ones for s in pos):  # one event of weight 1 per score: A >= T >= 1
            ratio = np.divide(t, a, out=a)
        else:  # zero weights or removals: A may be 0 (precision 0), or off by rounding
            ratio = np.divide(t, a, out=np.zeros(len(a)), where=a > 0.0)
            np.clip(ratio, 0.0, 1.0, out=ratio)
        if not big.ones:
            ratio *= big.weights()
        total = float(ratio.sum())
        if tail is not None:
            tt = tail.w[:-1] + big.w[lo]
            at = tt + tail.pn[:-1]
            if self.integral and big.ones and tail.ones:
                # integer weights: pn is an exact count >= 0, so A >= T >= 1 and the
                # guards below change nothing (the same values, fewer passes)
                tt = np.divide(tt, at, out=at)
            else:
                tt = np.divide(tt, at, out=np.zeros(len(at)), where=at > 0.0)
                np.clip(tt, 0.0, 1.0, out=tt)
                tt *= tail.weights()
            total += float(tt.sum())
        return total

    @staticmethod
    def _tail_bounds(big, tail):
        """``_bounds(big.k, tail.k)``: where the scores of the other positive sides (merged
        into ``tail``) fall among the biggest side's, for average precision.

        Why a memo: between two reads the tail usually gains one batch's positives
        (merged into it) while the big side stays; searching all the tail's scores in
        the big side (out of cache: several hundred ns each) was the dearest part of a
        read. The tail's scores at the last read are kept with their bounds on the big
        side (``Side.places``); the new tail's scores are searched among them (a small
        array), and only those not there among the big side's. The same integers as a
        full search. Memory: 16 bytes per score of the tail (its scores and left
        bounds), fewer than a quarter of the big side's scores (:data:`AP_RENT`)."""
        K, q = big.k, tail.k
        memo = big.places
        if memo is None or not len(memo[0]):
            lo = _bounds(K, q)[0]
        elif memo[0] is q:
            lo = memo[1]
        else:
            old, old_lo = memo
            j = np.minimum(old.searchsorted(q), len(old) - 1)
            hit = old[j] == q
            if hit.all():
                lo = old_lo[j]
            else:
                lo = np.empty(len(q), dtype=_I8)
                lo[hit] = old_lo[j[hit]]
                miss = ~hit
                lo[miss] = K.searchsorted(q[miss])
        big.places = (q, lo)
        return lo, _right_of(K, q, lo)

    def check(self):
        """Assert the layout's invariants (tests)."""
        for s in self.pos + self.neg:
            s.check(self.unit, self.integral)
            assert s.pn is None or s in self.pos
        for s in self.pos:
            assert (s.pn is not None) == self.ap
            if s.places is not None:  # (the memo of _tail_bounds)
                keys, lo = s.places
                assert s is self.pos[0]
                assert (lo == s.k.searchsorted(keys)).all()
            if s.pn is not None:
                want = self._negatives_above(s.k)
                scale = max(1.0, float(np.abs(want).max()))
                assert len(s.pn) == s.size + 1 and s.pn[-1] == 0.0
                assert np.allclose(s.pn, want, rtol=0, atol=1e-9 * scale)

    # ------------------------------------------------------------------ binary state
    def to_layout(self):
        """The layout as it is, for a binary checkpoint: ``{"ap", "rent", "pos",
        "neg"}``, each side a dict of its numpy arrays (see :meth:`from_layout`).

        A side's keys and running sums never change once built, so they are given as
        read-only views (zero-copy: a checkpoint writer may reference the file it wrote
        for them earlier), an array of more than :data:`PIECE` entries as
        ``{"$c": [pieces]}``, read-only views of its consecutive pieces (the same bounds
        each time), which a reader joins into one array; ``pn``, which each negative
        batch updates in place, is a copy. A side of one event of weight 1 per score
        (``ones``) leaves its running sum out (``None``): it counts down from the
        side's size. Restoring this layout, rather than the merged entries, keeps every
        later sum in the same grouping: the same bits.

        A side of at least :data:`DEFER_MIN` entries made by a merge (integer weights)
        is given as ``{"merge": [x, y], "final", "probe", "parts"}`` until all its
        pieces have been given: the two sides it was merged from (each a side of this
        layout, given before), the merge's flag, a probe of the result (its size and 65
        of its keys, checked when the loader merges again) and the pieces given so far.
        Each call gives the next pieces of such sides, the biggest first, up to
        :data:`PIECE_BUDGET` bytes (or 1.5 times the bytes such merges owed per call on
        average, if more), so that the bytes a checkpoint writes follow the events
        since the last one, not the length of the stream; the biggest side's sources
        (merged again at load: `O(n)` numpy) stay alive until then.

        With integer weights ``pn`` is left out (``None``): its values are exact
        integers, which :meth:`from_layout` computes again from the negative sides, bit
        for bit. With fractional weights it is a copy (its sums were grouped as the
        batches came). Runtime complexity: `O(sides + pieces)` with integer weights,
        else `O(size of pn)`."""
        derived = self.integral
        self._pay()
        pending = {id(s.k) for s in self.pos if s.src is not None}

        def side(s):
            if s.src is not None:
                return _pending_layout(s, side)
            pn = None if s.pn is None or derived else s.pn.copy()
            # one event of weight 1 per score: the running sum counts down from the
            # side's size, computed again at load (half the bytes of a new level)
            w = None if s.ones and s.c is None else _given(s.w)
            places = None
            if s.places is not None and id(s.places[0]) not in pending:
                # (the memo of a pending side's keys: left out, a load searches again)
                places = [_given(s.places[0]), _given(s.places[1])]
            return {"k": _given(s.k), "w": w, "c": _given(s.c),
                    "ow": _given(s.ow), "pn": pn, "ones": bool(s.ones), "places": places}
        return {"ap": bool(self.ap), "rent": int(self.rent),
                "pos": [side(s) for s in self.pos], "neg": [side(s) for s in self.neg]}

    def _pay(self):
        """Give the next pieces of the merged sides not yet given whole (the biggest
        first) up to this call's budget; a side all of whose pieces are given is given
        as itself from then on (its sources released)."""
        sides = sorted((s for s in self.pos + self.neg if s.src is not None),
                       key=lambda s: -s.size)
        debt = self._debt
        if not debt[2]:  # (the first call writes every side: sources would be more)
            for s in sides:
                s.src = None
            debt[2] = 1
            return
        owed = sum(_piece_bytes(s) * (_pieces(s) - s.done) for s in sides)
        debt[1] += max(0, owed - debt[0])
        debt[2] += 1
        budget = max(PIECE_BUDGET, 3 * debt[1] // (2 * max(debt[2], _PACE_CALLS)))
        for s in sides:
            per, n = _piece_bytes(s), _pieces(s)
            step = min(n - s.done, max(1, budget // per) if budget > 0 else 0)
            if step <= 0:
                break
            s.done += step
            budget -= step * per
            owed -= step * per
            if s.done >= n:
                s.src = None  # (its pieces are given: the side stands for itself)
        debt[0] = owed

    @classmethod
    def from_layout(cls, data, unit, integral):
        """The levels of :meth:`to_layout`, checked: dtypes, lengths, ascending finite
        keys, running sums ending in 0, ``pn`` exactly where average precision is read
        (or, with integer weights, left out: then computed from the negative sides, the
        same bits); a side given as its merge is merged again from its sources and
        checked against its probe and the pieces given. ``ValueError`` naming the side
        and array otherwise. Runtime complexity: `O(n)` numpy passes (merges included),
        plus `O(n log(n))` searches where ``pn`` is computed."""
        lv = cls(bool(unit), bool(integral))
        if not isinstance(data, dict) or set(data) != {"ap", "rent", "pos", "neg"}:
            raise ValueError(f"levels: expected keys ap, rent, pos, neg, got "
                             f"{sorted(data) if isinstance(data, dict) else type(data).__name__}")
        if not isinstance(data["ap"], bool) or type(data["rent"]) is not int or data["rent"] < 0:
            raise ValueError("levels: ap must be a bool and rent an int >= 0")
        lv.ap, lv.rent = data["ap"], data["rent"]
        for name in ("pos", "neg"):
            sides = data[name]
            if not isinstance(sides, list):
                raise ValueError(f"levels: {name} must be a list of sides")
            out = []
            for i, d in enumerate(sides):
                out.append(_side_of(d, f"levels.{name}[{i}]", lv.unit, lv.integral,
                                    lv.ap and name == "pos", first=i == 0))
            setattr(lv, name, out)
        for s in lv.pos:
            if s.pn is None and lv.ap:  # (integer weights: exact, the same bits)
                s.pn = lv._negatives_above(s.k)
        lv._debt[2] = 1  # (not a first call: its sources are written)
        lv._debt[0] = sum(_piece_bytes(s) * _pieces(s) for s in lv.pos + lv.neg
                          if s.src is not None)
        return lv


#: the pace of the pieces averages what merges owed over at least this many calls
_PACE_CALLS = 4


def _pieces(s):
    """Pieces of a side's arrays (those of its running sums: one entry more)."""
    return s.size // PIECE + 1


def _piece_bytes(s):
    """Bytes of one piece of each array a side gives."""
    arrays = 1 + (not (s.ones and s.c is None)) + (s.c is not None) + (s.ow is not None)
    return 8 * PIECE * arrays


def _given(a, upto=None):
    """How a checkpoint is given array ``a`` (None stays None): a read-only view, or
    with more than :data:`PIECE` entries ``{"$c": [...]}`` of read-only views of its
    pieces (the first ``upto`` pieces only: a list, for a side not yet given whole)."""
    if a is None:
        return None
    v = a.view()
    v.flags.writeable = False
    if upto is None and len(v) <= PIECE:
        return v
    parts = [v[i:i + PIECE] for i in range(0, len(v), PIECE)]
    return parts[:upto] if upto is not None else {"$c": parts}


#: the keys of a side given as its merge
_MERGE_KEYS = {"merge", "final", "probe", "parts"}

#: keys sampled by a merged side's probe
_PROBES = 65


def _probe(s):
    """A merged side's size and keys at :data:`_PROBES` spread positions (its
    running sum's top too): what a loader checks its merge against."""
    n = s.size
    at = np.unique(np.linspace(0, max(n - 1, 0), _PROBES).astype(_I8)) if n else []
    top = float((s.w if s.c is None else s.c)[0]) if s.w is not None else float(n)
    return [n, top, [float(s.k[i]) for i in at]]


def _pending_layout(s, side):
    x, y, final = s.src[:3]
    w = None if s.ones and s.c is None else s.w
    parts = {"k": _given(s.k, s.done), "w": _given(w, s.done),
             "c": _given(s.c, s.done), "ow": _given(s.ow, s.done)}
    return {"merge": [side(x), side(y)], "final": final, "probe": _probe(s),
            "parts": parts}


def _frozen(a):
    """A read-only view of ``a`` (None stays None): an array a binary checkpoint may
    write once and reference while it lives."""
    if a is None:
        return None
    v = a.view()
    v.flags.writeable = False
    return v


def _array(d, key, where, dtype, n=None):
    a = d.get(key)
    if isinstance(a, dict) and set(a) == {"$c"} and isinstance(a["$c"], list) and all(
            isinstance(p, np.ndarray) and p.dtype == dtype and p.ndim == 1 for p in a["$c"]):
        a = np.concatenate(a["$c"]) if a["$c"] else np.empty(0, dtype)  # (pieces)
    if not isinstance(a, np.ndarray) or a.dtype != dtype or a.ndim != 1:
        raise ValueError(f"{where}.{key}: expected a 1-d {np.dtype(dtype).name} array, got "
                         f"{getattr(a, 'dtype', type(a).__name__)}")
    if n is not None and len(a) != n:
        raise ValueError(f"{where}.{key}: {len(a)} values, expected {n}")
    return a


_SIDE_KEYS = {"k", "w", "c", "ow", "pn", "ones", "places"}


def _side_of(d, where, unit, integral, ap, first):
    """One :class:`Side` of :meth:`Levels.to_layout`, checked (``ValueError``)."""
    if isinstance(d, dict) and set(d) == _MERGE_KEYS:
        return _merged_of(d, where, unit, integral, ap, depth=0)
    if not isinstance(d, dict) or set(d) != _SIDE_KEYS:
        raise ValueError(f"{where}: expected keys {sorted(_SIDE_KEYS)}")
    k = _array(d, "k", where, _F8)
    n = len(k)
    if n and (not np.isfinite(k).all() or (np.diff(k) <= 0).any()):
        raise ValueError(f"{where}.k: scores must be finite and increasing")
    if d["w"] is None and d["ones"] is True and unit:  # (left out: one event per score)
        w = _countdown(n)
    else:
        w = _array(d, "w", where, _F8, n + 1)
    if w[-1] != 0.0 or not np.isfinite(w).all():
        raise ValueError(f"{where}.w: running sums must be finite and end with 0")
    c = None if unit else _array(d, "c", where, _F8, n + 1)
    if unit and d["c"] is not None:
        raise ValueError(f"{where}.c: counts in an order of unit weights")
    ow = None if integral else _array(d, "ow", where, _F8, n)
    if integral and d["ow"] is not None:
        raise ValueError(f"{where}.ow: per-score weights in an order of integer weights")
    pn = None
    if ap and (d["pn"] is not None or not integral):
        pn = _array(d, "pn", where, _F8, n + 1)
    elif d["pn"] is not None:
        raise ValueError(f"{where}.pn: present where average precision is not kept")
    if not isinstance(d["ones"], bool):
        raise ValueError(f"{where}.ones: expected a bool")
    side = Side(k, w, c, ow, pn, d["ones"])
    side.track = True  # (a checkpoint holds it: merges of it may be given as merges)
    places = d["places"]
    if places is not None:
        if not (first and ap and isinstance(places, list) and len(places) == 2):
            raise ValueError(f"{where}.places: a memo only on the biggest positive side")
        q = _array({"q": places[0]}, "q", where + ".places", _F8)
        lo = _array({"lo": places[1]}, "lo", where + ".places", _I8, len(q))
        if len(lo) and (lo.min() < 0 or lo.max() > n):
            raise ValueError(f"{where}.places: positions outside the side")
        side.places = (q, lo)
    return side


#: merges a side given as its merge may nest (a reader's guard; a layout nests a few)
_MAX_MERGE_DEPTH = 64


def _merged_of(d, where, unit, integral, ap, depth):
    """A side given as its merge (:func:`_pending_layout`): its sources read, merged
    again and checked against its probe and the pieces given (``ValueError`` naming
    the side otherwise); the side keeps them as its sources, as the merge did."""
    if not integral:
        raise ValueError(f"{where}: a side given as its merge in an order of fractional "
                         "weights")
    if depth > _MAX_MERGE_DEPTH:
        raise ValueError(f"{where}: merges nested deeper than {_MAX_MERGE_DEPTH}")
    srcs = d["merge"]
    if not isinstance(srcs, list) or len(srcs) != 2 or not isinstance(d["final"], bool):
        raise ValueError(f"{where}.merge: expected two sides and a bool final")
    sides = []
    for j, x in enumerate(srcs):
        at = f"{where}.merge[{j}]"
        if isinstance(x, dict) and set(x) == _MERGE_KEYS:
            sides.append(_merged_of(x, at, unit, integral, False, depth + 1))
        else:
            sides.append(_side_of(x, at, unit, integral, False, first=False))
    for x in sides:
        x.places = None
    out = merge(sides[0], sides[1], final=d["final"])
    probe = d["probe"]
    if out.src is None or not isinstance(probe, list) or _probe(out) != probe:
        raise ValueError(f"{where}: its sources merged do not give the side it stands for "
                         "(a damaged or misplaced reference)")
    parts = d["parts"]
    if not isinstance(parts, dict) or set(parts) != {"k", "w", "c", "ow"}:
        raise ValueError(f"{where}.parts: expected keys c, k, ow, w")
    for key in ("k", "w", "c", "ow"):
        got, have = parts[key], getattr(out, key)
        if key == "w" and out.ones and out.c is None:
            have = None
        if got is None and have is None:
            continue
        if have is None or not isinstance(got, list):
            raise ValueError(f"{where}.parts.{key}: pieces where the side has none, or "
                             "not a list")
        pos = 0
        for i, a in enumerate(got):
            a = _array({"p": a}, "p", f"{where}.parts.{key}[{i}]", _F8)
            if not np.array_equal(a, have[pos:pos + len(a)]) or (
                    len(a) != PIECE and pos + len(a) != len(have)):
                raise ValueError(f"{where}.parts.{key}[{i}]: does not match the side its "
                                 "sources merge into")
            pos += len(a)
    for x in sides:  # (what the merge kept of them: to_layout gives them again)
        if x.ones and x.c is None:
            x.w = None
        x.pn = None
    out.src = (sides[0], sides[1], d["final"], out.src[3])
    out.track = True
    out.done = 0  # (its pieces are given again, from its own arrays)
    if ap:
        out.pn = None  # (computed by from_layout from the negative sides)
    return out
