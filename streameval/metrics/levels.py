"""Sorted numpy runs ("levels") of a score order: the bulk layout of ``ScoreOrder``.

A :class:`Level` holds events aggregated per distinct score, split by class:

- ``pk``: the ascending scores holding positive events; ``pt``: the level's positive
  weight at or above each of them; ``pa``: all the level's weight (positive and
  negative) at or above each of them;
- ``nk``: the ascending scores holding negative events; ``nn``: the level's negative
  weight at or above each of them;
- ``pc``, ``nc``: the event counts at or above, kept only once a weight other than 1
  was added (with unit weights counts equal weights, and ``None`` stands for them);
- ``pw``, ``nw``: the weight at each score itself, kept only once a weight that is
  not an integer was added. Integer running sums are exact, and their differences
  give each score's weight back; float ones are not, and a state must round-trip
  exactly.

Every running-sum array has one element more than its keys, a trailing 0, so that
``x[searchsorted(keys, s)]`` reads "at or above ``s``" for any ``s``. All values are
float64; with integer weights they are exact integers (below ``2**53``).

Why this shape:

- a rank count is one ``searchsorted`` and a read: the negative weight at or above
  ``s`` is ``nn[searchsorted(nk, s)]``; `O(m log(n))` for a batch of ``m`` scores;
- merging a small level into a big one adds a step function to the big one's running
  sums (``np.repeat``) and inserts the new scores: a few `O(n)` numpy passes, no
  cumulative sum over the big level;
- average precision sums over the scores with positive weight only,
  ``sum_j (pt_j - pt_{j+1}) * pt_j / pa_j`` (other levels add step functions), so its
  cost follows the scores that hold positives: a tenth of them at a 10% positive rate.

Memory with unit weights: 24 bytes per stored score with positive events (``pk``,
``pt``, ``pa``) and 16 per stored score with negative events (``nk``, ``nn``): at most
24 bytes per distinct score when scores are distinct (what models emit), 40 for a
score that holds both classes. Counts add 8 bytes per entry.

Removals are "tombstones": a level of negated entries, whose counts and weights cancel
those of the level holding the events when the two are merged (entries whose count
reaches zero are dropped then). A level's own counts may hence be negative; the sums
over all levels are the order's.

No ``np.dot`` here: for long vectors OpenBLAS runs it on several threads, which then
spin and double the CPU time of everything around (measured); products are summed by
numpy itself (pairwise summation, also more accurate).

Imports: numpy only. :mod:`streameval.metrics.scoreorder` keeps a list of levels.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Level", "above", "cross", "merge", "compact", "counts_at", "ap_sum"]

_F8 = np.float64
_I8 = np.int64
_TINY = np.finfo(np.float64).tiny


def above(w, ints):
    """Running sums "at or above" of per-entry values ``w`` (ascending scores): an
    array one longer than ``w``, ending with 0. ``ints``: the values are integers whose
    sums stay below ``2**53``, so the sums run in int64 (exact, and 10x faster than
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


def own(c):
    """Per-entry values of a running sum "at or above" (its differences)."""
    return c[:-1] - c[1:]


class Level:
    """One sorted run of aggregated events, split by class (see the module notes)."""

    __slots__ = ("pk", "pt", "pa", "pc", "pw", "nk", "nn", "nc", "nw")

    def __init__(self, pk, pt, pa, pc, pw, nk, nn, nc, nw):
        self.pk, self.pt, self.pa, self.pc, self.pw = pk, pt, pa, pc, pw
        self.nk, self.nn, self.nc, self.nw = nk, nn, nc, nw

    @classmethod
    def build(cls, keys, wp, wn, cp, cn, unit, ints, integral=True):
        """A level of ascending distinct ``keys`` with per-key weights and counts per
        class (counts may be negative: a tombstone). ``unit``: counts equal weights
        (not stored); ``ints``: integer weights with sums below ``2**53`` (see
        :func:`above`); ``integral``: integer weights (else each score's weight is
        kept too)."""
        ip = np.flatnonzero(cp)
        ineg = np.flatnonzero(cn)
        pk = keys[ip]
        nk = keys[ineg]
        pt = above(wp[ip], ints)
        nn = above(wn[ineg], ints)
        pa = np.empty(len(ip) + 1)
        pa[-1] = 0.0
        if len(ip) == len(keys):  # every score holds positives: no negative-only ones
            pa[:-1] = above(wp + wn, ints)[:-1]
        else:
            pa[:-1] = above(wp + wn, ints)[ip]
        pc = nc = pw = nw = None
        if not unit:
            pc = above(cp[ip], True)
            nc = above(cn[ineg], True)
        if not integral:
            pw = wp[ip]
            nw = wn[ineg]
        return cls(pk, pt, pa, pc, pw, nk, nn, nc, nw)

    @classmethod
    def empty(cls, unit, integral):
        z = np.zeros(1)
        e = np.empty(0)
        return cls(e, z, z, None if unit else z, None if integral else e,
                   e, z, None if unit else z, None if integral else e)

    def weights(self):
        """Each positive and each negative score's weight."""
        return (own(self.pt) if self.pw is None else self.pw,
                own(self.nn) if self.nw is None else self.nw)

    @property
    def size(self):
        """Stored entries: (score, class) pairs."""
        return len(self.pk) + len(self.nk)

    def with_counts(self):
        """The same level with its counts stored (they equal its weights so far)."""
        if self.pc is not None:
            return self
        return Level(self.pk, self.pt, self.pa, self.pt.copy(), self.pw, self.nk, self.nn,
                     self.nn.copy(), self.nw)

    def with_weights(self):
        """The same level with each score's weight stored (integers so far: exact)."""
        if self.pw is not None:
            return self
        return Level(self.pk, self.pt, self.pa, self.pc, own(self.pt), self.nk, self.nn,
                     self.nc, own(self.nn))

    def entries(self):
        """``(keys, wp, wn, cp, cn)`` per distinct score (ascending; fresh arrays,
        counts int64): the positive and negative sides joined."""
        pk, nk = self.pk, self.nk
        wp, wn = self.weights()
        wp, wn = wp.copy(), wn.copy()
        cp = (wp if self.pc is None else own(self.pc)).astype(_I8)
        cn = (wn if self.nc is None else own(self.nc)).astype(_I8)
        P, N = len(pk), len(nk)
        if not N:
            return pk.copy(), wp, np.zeros(P), cp, np.zeros(P, dtype=_I8)
        if not P:
            return nk.copy(), np.zeros(N), wn, np.zeros(N, dtype=_I8), cn
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
        sp, sn = slot[:P], slot[P:]
        out_wp[sp] = wp
        out_cp[sp] = cp
        out_wn[sn] = wn
        out_cn[sn] = cn
        return keys, out_wp, out_wn, out_cp, out_cn

    def check(self, unit, integral):
        """Assert the layout's invariants (tests)."""
        for keys, sums, w in ((self.pk, (self.pt, self.pa, self.pc), self.pw),
                              (self.nk, (self.nn, self.nc), self.nw)):
            assert keys.dtype == _F8 and keys.ndim == 1
            assert (np.diff(keys) > 0).all() and np.isfinite(keys).all()
            for c in sums:
                if c is not None:
                    assert c.dtype == _F8 and len(c) == len(keys) + 1 and c[-1] == 0.0
            if w is not None:
                assert w.dtype == _F8 and len(w) == len(keys)
                scale = max(1.0, float(np.abs(w).sum()))
                assert np.allclose(own(sums[0]), w, rtol=0, atol=1e-9 * scale)
        assert (self.pc is None) == (self.nc is None) == unit
        assert (self.pw is None) == (self.nw is None) == integral
        if integral:
            assert all((own(c) == np.round(own(c))).all() for c in (self.pt, self.nn))
        for counts in ((self.pc, self.nc) if not unit else (self.pt, self.nn)):
            assert (own(counts) != 0).all()  # only scores holding events of the class


def _bounds(K, q):
    """``searchsorted(K, q, "left")`` and ``"right"`` for distinct ascending ``K``, with
    one search (the right bound is the left one past an equal key)."""
    lo = K.searchsorted(q)
    hi = lo.copy()
    if len(K):
        hi += K[np.minimum(lo, len(K) - 1)] == q
    return lo, hi


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


def cross(s, level):
    """The Mann–Whitney pairs between the events of level ``s`` and those of
    ``level``: each positive of ``s`` with the negatives of ``level`` below it (ties
    one half), each negative of ``s`` with the positives above it. `O(m log(n))`."""
    total = 0.0
    if len(s.pk) and len(level.nk):
        nn = level.nn
        a, b = _bounds(level.nk, s.pk)
        lo = nn[a]
        lo += nn[b]
        lo *= -0.5
        lo += nn[0]  # negatives below + half those at: N - (at-or-above + above) / 2
        lo *= s.weights()[0]
        total += float(lo.sum())
    if len(s.nk) and len(level.pk):
        pt = level.pt
        a, b = _bounds(level.pk, s.nk)
        lo = pt[a]
        lo += pt[b]
        lo *= s.weights()[1]
        total += 0.5 * float(lo.sum())
    return total


class _Placement:
    """Where the keys ``k`` of a small side land among the keys ``K`` of a big one."""

    __slots__ = ("n", "m", "pos", "hit", "runs", "at", "mask", "slots", "size")

    def __init__(self, K, k):
        n, m = len(K), len(k)
        pos, right = _bounds(K, k)
        hit = right != pos
        self.n, self.m, self.pos, self.hit = n, m, pos, hit
        # entries of k strictly below each K[i]: a step function over i
        self.runs = _runs(right, n)
        new = ~hit
        self.at = pos[new]  # insertion points of the new keys
        self.size = n + len(self.at)
        self.slots = self.at + np.arange(len(self.at))
        if len(self.at):
            mask = np.ones(self.size, dtype=bool)
            mask[self.slots] = False
            self.mask = mask
        else:
            self.mask = None

    def keys(self, K, k):
        if self.mask is None:
            return K
        out = np.empty(self.size)
        out[self.mask] = K
        out[self.slots] = k[~self.hit]
        return out

    def place(self, big, new_values, tail=True):
        """Values over the merged keys: ``big`` (the big side's values, updated) and
        those of the new keys; a running sum gets its trailing 0 (``tail``)."""
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

    def own_values(self, big, small):
        """Per-score values (not running sums) over the merged keys: a hit adds."""
        b = big.copy()
        b[self.pos[self.hit]] += small[self.hit]
        return self.place(b, small[~self.hit], tail=False)


def _step(c, runs):
    """A small side's running sum ``c`` read at each key of the big side."""
    return np.repeat(c, runs)


def merge(x, y):
    """One level holding the events of levels ``x`` and ``y``; entries whose counts
    cancel (a tombstone meeting its events) are dropped. Cost: a few numpy passes over
    the bigger level plus `O(m log(n))` searches for the smaller."""
    big, small = (x, y) if x.size >= y.size else (y, x)
    if not small.size:
        return big
    unit = big.pc is None
    # positive side
    pp = _Placement(big.pk, small.pk)
    new = ~pp.hit
    at = pp.pos[new]
    pk = pp.keys(big.pk, small.pk)
    stp = _step(small.pt, pp.runs)
    pt = pp.place(big.pt[:-1] + stp, big.pt[at] + small.pt[:-1][new])
    # all weight at or above: the small level's positives and negatives below each key
    neg_runs = _runs(big.pk.searchsorted(small.nk, "right"), len(big.pk))
    pa_big = big.pa[:-1] + stp
    pa_big += _step(small.nn, neg_runs)
    pa_new = small.pa[:-1][new] + big.pt[at]
    pa_new += big.nn[big.nk.searchsorted(small.pk[new])]
    pa = pp.place(pa_big, pa_new)
    pc = pw = None
    if not unit:
        pc = pp.place(big.pc[:-1] + _step(small.pc, pp.runs),
                      big.pc[at] + small.pc[:-1][new])
    if big.pw is not None:
        pw = pp.own_values(big.pw, small.pw)
    # negative side
    pn = _Placement(big.nk, small.nk)
    newn = ~pn.hit
    atn = pn.pos[newn]
    nk = pn.keys(big.nk, small.nk)
    nn = pn.place(big.nn[:-1] + _step(small.nn, pn.runs), big.nn[atn] + small.nn[:-1][newn])
    nc = nw = None
    if not unit:
        nc = pn.place(big.nc[:-1] + _step(small.nc, pn.runs),
                      big.nc[atn] + small.nc[:-1][newn])
    if big.nw is not None:
        nw = pn.own_values(big.nw, small.nw)
    out = Level(pk, pt, pa, pc, pw, nk, nn, nc, nw)
    if pp.hit.any() or pn.hit.any():
        out = _drop_empty(out, pp, pn)
    return out


def _merged_index(pl):
    """Indices, among the merged keys, of the big side's entries that were hit."""
    i = pl.pos[pl.hit]
    return i + np.searchsorted(pl.at, i, "right")


def _drop_empty(level, pp, pn):
    """``level`` without the entries (only hit ones can) whose count is now zero. A
    score's weight left by rounding (fractional weights) leaves with it: the running
    sums at and below it lose it too, so the score's weight is exactly zero."""
    pos_idx = _merged_index(pp)
    neg_idx = _merged_index(pn)
    pc = level.pt if level.pc is None else level.pc
    nc = level.nn if level.nc is None else level.nc
    dp = pos_idx[(pc[pos_idx] - pc[pos_idx + 1]) == 0.0]
    dn = neg_idx[(nc[neg_idx] - nc[neg_idx + 1]) == 0.0]
    if not (len(dp) or len(dn)):
        return level
    pk, pt, pa, pcs, pw = level.pk, level.pt, level.pa, level.pc, level.pw
    nk, nn, ncs, nw = level.nk, level.nn, level.nc, level.nw
    if pw is not None:  # rounding left at the dropped scores
        rp, rn = pw[dp], nw[dn]
        if rp.any():
            step = _step(above(rp, False), _runs(dp + 1, len(pt)))
            pt = pt - step
            pa = pa - step
        if rn.any():
            nn = nn - _step(above(rn, False), _runs(dn + 1, len(nn)))
            below = pk.searchsorted(nk[dn], "right")  # positive scores at or below
            pa = pa - _step(above(rn, False), _runs(below, len(pa)))
    if len(dp):
        pk = np.delete(pk, dp)
        pt, pa = np.delete(pt, dp), np.delete(pa, dp)
        pcs = None if pcs is None else np.delete(pcs, dp)
        pw = None if pw is None else np.delete(pw, dp)
    if len(dn):
        nk = np.delete(nk, dn)
        nn = np.delete(nn, dn)
        ncs = None if ncs is None else np.delete(ncs, dn)
        nw = None if nw is None else np.delete(nw, dn)
    return Level(pk, pt, pa, pcs, pw, nk, nn, ncs, nw)


def compact(levels):
    """One level holding the events of all ``levels`` (merged smallest first)."""
    levels = list(levels)
    while len(levels) > 1:
        a = levels.pop()
        b = levels.pop()
        levels.append(merge(b, a))
    return levels[0]


def counts_at(levels, keys):
    """``(cp, cn, wp, wn)``: the counts and weights per class stored at each of the
    ascending ``keys``, summed over ``levels``. `O(m log(n))` per level."""
    m = len(keys)
    cp, cn = np.zeros(m), np.zeros(m)
    wp, wn = np.zeros(m), np.zeros(m)
    for lv in levels:
        lw = lv.weights()
        for k, w, c, out_c, out_w in ((lv.pk, lw[0], lv.pc, cp, wp),
                                      (lv.nk, lw[1], lv.nc, cn, wn)):
            if not len(k):
                continue
            i = np.minimum(k.searchsorted(keys), len(k) - 1)
            hit = k[i] == keys
            j = i[hit]
            got = w[j]
            out_w[hit] += got
            out_c[hit] += got if c is None else c[j] - c[j + 1]
    return cp.astype(_I8), cn.astype(_I8), wp, wn


def ap_sum(big, small=None):
    """``sum over scores with positive weight of (its positive weight) * T / A``, with
    ``T`` and ``A`` the positive and the total weight at or above the score over both
    levels: average precision times the positive weight. Passes over the scores that
    hold positives only; the small level's sums reach the big one's scores as step
    functions. A score whose ``A`` is 0 (zero weights at the top) has precision 0."""
    t = big.pt[:-1]
    a = big.pa[:-1]
    i = None
    if small is not None and small.size:
        i, right = _bounds(big.pk, small.pk)
        runs = _runs(right, len(big.pk))
        neg_runs = _runs(big.pk.searchsorted(small.nk, "right"), len(big.pk))
        stp = _step(small.pt, runs)
        t = t + stp
        a = a + stp
        a += _step(small.nn, neg_runs)
    else:
        a = a.copy()
    np.maximum(a, _TINY, out=a)
    ratio = np.divide(t, a, out=a)
    ratio *= big.weights()[0]
    total = float(ratio.sum())
    if i is not None and len(small.pk):
        ts = small.pt[:-1] + big.pt[i]
        as_ = small.pa[:-1] + big.pt[i]
        as_ += big.nn[big.nk.searchsorted(small.pk)]
        np.maximum(as_, _TINY, out=as_)
        total += float((small.weights()[0] * (ts / as_)).sum())
    return total
