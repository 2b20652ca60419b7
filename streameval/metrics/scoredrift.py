"""Score drift without labels: the two-sample Kolmogorov–Smirnov statistic, PSI and
Jensen–Shannon between current scores and a reference, and a sequential detector of a
shift with a stream-wide false-alarm guarantee.

The reference is a sample of scores: given (``reference=`` scores, e.g. a declared
baseline period), or the first ``baseline`` events the metric sees (learned once, then
a parameter of the metric: clones and windows' rebuilds keep it, and only metrics with
the same reference merge).

Exact KS in bounded memory. The current scores are kept as weights in the ``2k + 1``
cells that the ``k`` distinct reference scores ``r_1 < ... < r_k`` cut the line into
(below ``r_1``, at ``r_1``, between ``r_1`` and ``r_2``, ...). Between two reference
points the reference's distribution function is constant and the current one
monotone, so the supremum of their distance is reached at a cell's edge:

    KS = max_j max(|C(< r_j) - R(< r_j)|, |C(<= r_j) - R(<= r_j)|)

(``C``, ``R`` the weighted empirical distribution functions), which is exactly
``scipy.stats.ks_2samp``'s statistic (unweighted) at `O(k)` per read and `O(log(k))`
per event, whatever the number of current events.

PSI and Jensen–Shannon on reference-quantile bins: the edges are the reference's
weighted quantiles at ``1/bins, ..., (bins-1)/bins`` (reference points, repeated ones
merged, so rounded scores give fewer bins); a score ``x`` falls in the bin ``[e_i,
e_{i+1})``. With reference and current bin shares ``r_i`` and ``c_i``:
``PSI = sum (c_i - r_i) ln(c_i / r_i)`` on shares smoothed by adding half an event to
every bin (``(W_i + 1/2) / (W + bins/2)``, so that an empty bin is finite), and
``JS = (KL(c || m) + KL(r || m)) / 2`` with ``m = (c + r) / 2``, natural logarithm
(between 0 and ``ln 2``), unsmoothed.

:class:`ScoreDriftDetector`: the guarantee is DKW's. For a reference of effective size
``m`` and a window of effective size ``n`` from one continuous distribution
(Dvoretzky–Kiefer–Wolfowitz with Massart's constant, each sample against the common
distribution, the distance split in proportion ``sqrt(n) : sqrt(m)``):

    P(KS > eps) <= 4 exp(-2 eps^2 m n / (sqrt(m) + sqrt(n))^2)

Every ``every`` events (once the window is full) the detector tests at level
``alpha_k = alpha * every / horizon``, so by the union bound, on a stationary stream of
independent scores, ``P(a false alarm within the first horizon events) <= alpha``
(``k * alpha`` within ``k * horizon``), however the windows overlap. Ties (rounded
scores) make KS smaller, so the bound still holds. After an alarm the window becomes
the new reference (the history since the change) and the budget starts again.
Weights: Kish's effective sizes (exact for unit weights, an approximation otherwise).

It may import numpy, :mod:`streameval.validation` and the metrics' ``base`` and
``estimated`` modules.
"""

from __future__ import annotations

import collections
import math
from bisect import bisect_left

import numpy as np

from streameval.validation import (
    MAX_WEIGHT,
    ValidationError,
    check_weight,
)

from .base import BinaryMetric
from .estimated import LabelFree

__all__ = [
    "ScoreDrift",
    "ScoreDriftDetector",
    "ks_2samp_weighted",
    "quantile_edges",
    "psi_js",
    "ks_threshold",
]

_NAN = math.nan
#: additive smoothing of PSI's bin shares, in events per bin
PSI_SMOOTHING = 0.5


def ks_2samp_weighted(a, b, wa=None, wb=None):
    """The two-sample KS statistic ``sup |A(x) - B(x)|`` of weighted empirical
    distribution functions, by direct evaluation at every distinct point (the oracle
    and the batch path; ``scipy.stats.ks_2samp(a, b).statistic`` without weights).
    NaN if either side has no weight. Runtime complexity: `O((n + m) log(n + m))`.

    >>> ks_2samp_weighted([0.1, 0.2, 0.3], [0.25, 0.35, 0.45])
    0.6666666666666667
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    wa = np.ones(len(a)) if wa is None else np.asarray(wa, dtype=np.float64)
    wb = np.ones(len(b)) if wb is None else np.asarray(wb, dtype=np.float64)
    ta, tb = wa.sum(), wb.sum()
    if not (ta > 0 and tb > 0):
        return _NAN
    pts = np.unique(np.r_[a, b])
    oa, ob = np.argsort(a), np.argsort(b)
    ca = np.r_[0.0, np.cumsum(wa[oa])]
    cb = np.r_[0.0, np.cumsum(wb[ob])]
    fa = ca[np.searchsorted(a[oa], pts, side="right")] / ta
    fb = cb[np.searchsorted(b[ob], pts, side="right")] / tb
    return float(np.max(np.abs(fa - fb)))


def quantile_edges(keys, weights, bins):
    """The inner bin edges of PSI and JS: the reference's weighted quantiles at ``i /
    bins`` (the smallest reference score whose cumulative share reaches ``i / bins``),
    repeated ones merged, the smallest reference score left out (no bin below it).
    ``keys`` ascending distinct reference scores, ``weights`` their weights."""
    cum = np.cumsum(weights)
    total = cum[-1]
    qs = np.arange(1, bins) / bins * total
    idx = np.searchsorted(cum, qs * (1 - 1e-12), side="left")
    idx = np.minimum(idx + 1, len(keys) - 1)  # the bin starts after the quantile point
    edges = np.unique(keys[idx])
    return edges[edges > keys[0]]


def psi_js(ref_shares_w, cur_shares_w):
    """``(PSI, JS)`` from per-bin weights of the reference and the current scores
    (see the module notes for the smoothing); NaN without weight on either side."""
    r = np.asarray(ref_shares_w, dtype=np.float64)
    c = np.asarray(cur_shares_w, dtype=np.float64)
    tr, tc = r.sum(), c.sum()
    if not (tr > 0 and tc > 0):
        return _NAN, _NAN
    k = len(r)
    rs = (r + PSI_SMOOTHING) / (tr + PSI_SMOOTHING * k)
    cs = (c + PSI_SMOOTHING) / (tc + PSI_SMOOTHING * k)
    psi = float(np.sum((cs - rs) * np.log(cs / rs)))
    p, q = c / tc, r / tr
    m = (p + q) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_p = np.where(p > 0, p * np.log(p / m), 0.0)
        kl_q = np.where(q > 0, q * np.log(q / m), 0.0)
    return psi, float(max(0.0, 0.5 * (kl_p.sum() + kl_q.sum())))


def ks_threshold(m, n, level):
    """The KS distance above which a reference of effective size ``m`` and a sample of
    ``n`` differ at ``level`` (two-sample DKW, see the module notes):
    ``eps = sqrt(ln(4 / level) (sqrt(m) + sqrt(n))^2 / (2 m n))``.

    >>> round(ks_threshold(5000, 5000, 0.005 * 1000 / 1_000_000), 4)
    0.0737
    """
    return math.sqrt(math.log(4.0 / level) * (math.sqrt(m) + math.sqrt(n)) ** 2
                     / (2.0 * m * n))


def _ks_p_value(d, m, n):
    """``4 exp(-2 d^2 m n / (sqrt(m) + sqrt(n))^2)``, at most 1."""
    return min(1.0, 4.0 * math.exp(-2.0 * d * d * m * n / (math.sqrt(m) + math.sqrt(n)) ** 2))


class _Reference:
    """A frozen reference sample: distinct scores, weights, distribution function at
    and below each, and the PSI bins."""

    __slots__ = ("keys", "weights", "lt", "le", "total", "edges", "bin_w", "n_eff", "klist")

    def __init__(self, keys, weights, bins):
        self.keys = np.asarray(keys, dtype=np.float64)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.klist = self.keys.tolist()
        cum = np.cumsum(self.weights)
        self.total = float(cum[-1])
        self.le = cum / self.total
        self.lt = (cum - self.weights) / self.total
        self.edges = quantile_edges(self.keys, self.weights, bins)
        b = np.searchsorted(self.edges, self.keys, side="right")
        self.bin_w = np.bincount(b, weights=self.weights, minlength=len(self.edges) + 1)
        self.n_eff = self.total ** 2 / float(np.sum(self.weights ** 2)) if self.total else 0.0

    @classmethod
    def of(cls, scores, weights, bins):
        keys, inv = np.unique(np.asarray(scores, dtype=np.float64), return_inverse=True)
        w = np.bincount(inv, weights=np.asarray(weights, dtype=np.float64), minlength=len(keys))
        keep = w > 0
        if not keep.any():
            return None
        obj = cls(keys[keep], w[keep], bins)
        obj.n_eff = float(np.sum(weights)) ** 2 / float(np.sum(np.square(weights)))
        return obj

    def cells(self, s):
        """Cell index of each score (``2j`` below ``r_j``, ``2j + 1`` at it)."""
        j = np.searchsorted(self.keys, s, side="left")
        at = np.zeros(len(s), dtype=bool)
        inside = j < len(self.keys)
        at[inside] = self.keys[j[inside]] == s[inside]
        return 2 * j + at

    def cell(self, s):
        j = bisect_left(self.klist, s)
        return 2 * j + (1 if j < len(self.klist) and self.klist[j] == s else 0)

    def ks(self, cell_w):
        """KS between the reference and current weights per cell (see the notes)."""
        total = float(cell_w.sum())
        if not total > 0.0:
            return _NAN
        cum = np.cumsum(cell_w) / total
        below = cum[0::2][:len(self.keys)]  # C(< r_j): through cell 2j
        at = cum[1::2]  # C(<= r_j): through cell 2j + 1
        return float(max(np.max(np.abs(below - self.lt)), np.max(np.abs(at - self.le))))

    def bins_of_cells(self, cell_w):
        """Current weight per PSI bin from weights per cell."""
        k = len(self.keys)
        # a cell's lower reference point: cell 2j lies in (r_{j-1}, r_j), cell 2j+1 at r_j
        j = np.arange(2 * k + 1) // 2
        point = np.where(np.arange(2 * k + 1) % 2 == 1, self.keys[np.minimum(j, k - 1)],
                         np.where(j > 0, self.keys[np.maximum(j - 1, 0)], -np.inf))
        # (an open cell (r_{j-1}, r_j) falls in the bin of r_{j-1}: edges are reference
        # points, so no edge lies strictly inside it)
        b = np.searchsorted(self.edges, point, side="right")
        return np.bincount(b, weights=cell_w, minlength=len(self.edges) + 1)

    def to_data(self):
        return {"scores": self.keys.tolist(), "weights": self.weights.tolist(),
                "n_eff": self.n_eff}


def _reference_param(reference, bins):
    if reference is None:
        return None
    if isinstance(reference, dict):
        try:
            keys = np.asarray(reference["scores"], dtype=np.float64)
            w = np.asarray(reference["weights"], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as e:
            raise ValidationError("reference", reference, f"not a reference ({e})") from None
        if (keys.ndim != 1 or keys.shape != w.shape or not len(keys)
                or not np.isfinite(keys).all() or (np.diff(keys) <= 0).any()
                or not np.isfinite(w).all() or (w <= 0).any()):
            raise ValidationError("reference", "{...}", "scores must be finite and "
                                  "increasing, weights finite and > 0")
        ref = _Reference(keys, w, bins)
        if "n_eff" in reference:
            ref.n_eff = float(reference["n_eff"])
        return ref
    s = np.asarray(reference, dtype=np.float64)
    if s.ndim != 1 or not len(s):
        raise ValidationError("reference", reference, "must be a non-empty sequence of scores")
    bad = ~np.isfinite(s)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValidationError("reference", float(s[i]), "score must be a finite number", i)
    return _Reference.of(s, np.ones(len(s)), bins)


def _check_int(name, value, lo):
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValidationError(name, value, f"must be an int >= {lo}")
    return value


class ScoreDrift(LabelFree):
    """How far the current score distribution is from a reference: the two-sample
    Kolmogorov–Smirnov statistic (``get()``, exact, weighted), with PSI and
    Jensen–Shannon on reference-quantile bins (:meth:`report`); ``statistic=`` picks
    which one ``get()`` returns. NaN until the reference is known (the first
    ``baseline`` events, unless ``reference`` is given) and without current weight.
    Labels are ignored (``needs_labels = False``); any finite score is accepted.

    The current scores are every event the metric holds (a window's: the window's),
    those that built the reference included.

    Runtime complexity: ``update``/``revert`` `O(log(k))` for ``k`` distinct
    reference scores (`O(1)` while learning); ``update_many`` `O(m log(k))` numpy;
    ``get`` `O(k)` numpy. Memory: `O(k)` (plus the held events while learning).

    >>> from streameval.metrics.scoredrift import ScoreDrift
    >>> m = ScoreDrift(reference=[0.1, 0.2, 0.3])
    >>> m.update_many(None, [0.25, 0.35, 0.45]).get()
    0.6666666666666667

    Parameters
    ----------
    reference
        Reference scores (a sequence; or a state's ``{"scores", "weights"}``), or None
        to learn it from the first ``baseline`` events.
    baseline
        How many events make the learned reference.
    bins
        PSI and JS bins (reference quantiles).
    statistic
        ``"ks"`` (default), ``"psi"`` or ``"js"``: what ``get()`` returns.
    """

    _public_name = "ScoreDrift"
    score_bounds = None
    _probabilities_needed = False
    #: ``bins`` defines PSI and JS (and KS is exact): no error bound to report
    bins_define_value = True

    def __init__(self, reference=None, baseline=1000, bins=10, statistic="ks"):
        BinaryMetric.__init__(self)
        self.threshold = 0.5
        self._calibration = None
        self.baseline = _check_int("baseline", baseline, 1)
        self.bins = _check_int("bins", bins, 2)
        if statistic not in ("ks", "psi", "js"):
            raise ValidationError("statistic", statistic, 'must be "ks", "psi" or "js"')
        self.statistic = statistic
        self._ref = _reference_param(reference, bins)
        self._learn = {}  # while learning: score -> reference weight
        self._learn_n = 0
        self._held = collections.Counter()  # while learning: (score, w) -> events held
        self._cells = None if self._ref is None else np.zeros(2 * len(self._ref.keys) + 1)
        self._counts = None if self._ref is None else np.zeros(2 * len(self._ref.keys) + 1,
                                                               dtype=np.int64)
        # events of weight 0 per cell: a cell whose other events are gone is exactly 0
        self._zeros = None if self._counts is None else np.zeros_like(self._counts)

    @property
    def bigger_is_better(self):
        return False

    @property
    def reference(self):
        """The reference as ``{"scores", "weights", "n_eff"}`` (None until learned)."""
        return None if self._ref is None else self._ref.to_data()

    @property
    def ready(self):
        """Whether the reference is known."""
        return self._ref is not None

    def _params(self):
        return {"reference": self.reference, "baseline": self.baseline, "bins": self.bins,
                "statistic": self.statistic}

    def clone(self, new_params=None, include_attributes=False):
        params = self._params()
        if new_params:
            params.update(new_params)
        return type(self)(**params)

    def _one(self, y_pred, w):
        if type(y_pred) is not float or y_pred - y_pred:
            y_pred = self._score(y_pred)
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
            w = check_weight(w)
        return y_pred, w

    # -- learning -------------------------------------------------------------------
    def _freeze(self):
        keys = np.array(sorted(self._learn))
        w = np.array([self._learn[k] for k in keys.tolist()])
        ref = _Reference.of(keys, w, self.bins) if len(keys) else None
        if ref is None:  # only weight 0 so far: keep learning
            return
        self._ref = ref
        size = 2 * len(ref.keys) + 1
        self._cells = np.zeros(size)
        self._counts = np.zeros(size, dtype=np.int64)
        self._zeros = np.zeros(size, dtype=np.int64)
        for (s, w), c in self._held.items():
            k = ref.cell(s)
            self._cells[k] += w * c
            self._counts[k] += c
            if not w:
                self._zeros[k] += c
        self._learn = {}
        self._held = collections.Counter()

    def _learn_batch(self, s, w):
        """Feed scores to the reference under construction; returns how many were
        taken (the rest go to the cells once it is frozen)."""
        take = min(len(s), self.baseline - self._learn_n)
        learn = self._learn
        ws = [1.0] * take if w is None else w[:take].tolist()
        for v, ww in zip(s[:take].tolist(), ws):
            learn[v] = learn.get(v, 0.0) + ww
        self._learn_n += take
        return take

    # -- updates ----------------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0):
        """Add one score (``y_true`` ignored). Runtime complexity: `O(log(k))`."""
        s, w = self._one(y_pred, w)
        if self._ref is None:
            self._learn[s] = self._learn.get(s, 0.0) + w
            self._learn_n += 1
            self._held[(s, w)] += 1
            if self._learn_n >= self.baseline:
                self._freeze()
            return
        k = self._ref.cell(s)
        self._cells[k] += w
        self._counts[k] += 1
        if not w:
            self._zeros[k] += 1

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one score added earlier (the reference, once learned, stays);
        ``ValueError`` (no change) if it was not. Runtime complexity: `O(log(k))`."""
        s, w = self._one(y_pred, w)
        if self._ref is None:
            if not self._held[(s, w)]:
                del self._held[(s, w)]
                raise ValueError(f"revert(y_pred={y_pred!r}, w={w!r}): no such event was added")
            self._held[(s, w)] -= 1
            if not self._held[(s, w)]:
                del self._held[(s, w)]
            return
        k = self._ref.cell(s)
        if not self._counts[k]:
            raise ValueError(f"revert(y_pred={y_pred!r}): no such event was added")
        self._counts[k] -= 1
        if not w:
            self._zeros[k] -= 1
        self._cells[k] = 0.0 if self._counts[k] == self._zeros[k] else self._cells[k] - w

    def validate(self, y_true, y_pred, w=None):
        """Validate a batch (labels ignored; any finite score)."""
        return super().validate(y_true, y_pred, w)

    def update_trusted(self, y, s, w=None):
        """Add validated columns. Runtime complexity: `O(m log(k))` numpy."""
        i = 0
        while i < len(s) and self._ref is None:
            j = i + self._learn_batch(s[i:], None if w is None else w[i:])
            ws = [1.0] * (j - i) if w is None else w[i:j].tolist()
            self._held.update(zip(s[i:j].tolist(), ws))
            i = j
            if self._learn_n >= self.baseline:
                self._freeze()
            else:
                break
        if i < len(s) and self._ref is not None:
            rest = s[i:]
            cells = self._ref.cells(rest)
            n = len(self._cells)
            self._cells += np.bincount(cells, weights=None if w is None else w[i:], minlength=n)
            self._counts += np.bincount(cells, minlength=n)
            if w is not None:
                self._zeros += np.bincount(cells[w[i:] == 0.0], minlength=n)
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove validated columns added earlier; atomic."""
        if not len(s):
            return self
        if self._ref is None:
            ws = [1.0] * len(s) if w is None else w.tolist()
            need = collections.Counter(zip(s.tolist(), ws))
            for i, (key, c) in enumerate(zip(s.tolist(), ws)):
                if self._held[(key, c)] < need[(key, c)]:
                    raise ValidationError.at(i, f"revert of (y_pred={key!r}): no such event "
                                                "was added")
            self._held.subtract(need)
            self._held = +self._held
            return self
        cells = self._ref.cells(s)
        n = len(self._cells)
        counts = np.bincount(cells, minlength=n)
        over = counts > self._counts
        if over.any():
            i = int(np.argmax(np.isin(cells, np.flatnonzero(over))))
            raise ValidationError.at(i, f"revert of (y_pred={float(s[i])!r}): no such event "
                                        "was added")
        zeros = np.zeros(n, dtype=np.int64) if w is None else np.bincount(cells[w == 0.0],
                                                                          minlength=n)
        if (zeros > self._zeros).any():
            i = int(np.argmax(np.isin(cells, np.flatnonzero(zeros > self._zeros))))
            raise ValidationError.at(i, f"revert of (y_pred={float(s[i])!r}, w=0.0): no such "
                                        "event was added")
        self._cells -= np.bincount(cells, weights=None if w is None else w, minlength=n)
        self._counts -= counts
        self._zeros -= zeros
        self._cells[self._counts == self._zeros] = 0.0
        return self

    # -- values -------------------------------------------------------------------------
    def report(self):
        """``{"ks", "psi", "js", "n", "ready"}`` (NaN while undefined)."""
        if self._ref is None or not (self._counts > self._zeros).any():
            return {"ks": _NAN, "psi": _NAN, "js": _NAN, "n": len(self),
                    "ready": self._ref is not None}
        ks = self._ref.ks(self._cells)
        psi, js = psi_js(self._ref.bin_w, self._ref.bins_of_cells(self._cells))
        return {"ks": ks, "psi": psi, "js": js, "n": len(self), "ready": True}

    def get(self):
        """The statistic named by ``statistic`` (KS by default). Runtime complexity:
        `O(k)` numpy."""
        if self._ref is None or not (self._counts > self._zeros).any():
            return _NAN
        if self.statistic == "ks":
            return self._ref.ks(self._cells)
        psi, js = psi_js(self._ref.bin_w, self._ref.bins_of_cells(self._cells))
        return psi if self.statistic == "psi" else js

    def __len__(self):
        if self._ref is None:
            return sum(self._held.values())
        return int(self._counts.sum())

    # -- merge and state ----------------------------------------------------------------
    def _merge(self, other):
        if self._ref is None or other._ref is None:
            raise ValueError("cannot merge score drift metrics whose reference is still "
                             "being learned")
        self._cells += other._cells
        self._counts += other._counts
        self._zeros += other._zeros

    def _subtract(self, other):
        if self._ref is None or other._ref is None:
            raise ValueError("cannot subtract score drift metrics whose reference is still "
                             "being learned")
        if (other._counts > self._counts).any() or (other._zeros > self._zeros).any():
            raise ValueError("subtract: the other ScoreDrift holds events not held here: "
                             "they were never merged")
        self._cells -= other._cells
        self._counts -= other._counts
        self._zeros -= other._zeros
        self._cells[self._counts == self._zeros] = 0.0

    def _get_data(self):
        if self._ref is None:
            return {"learn": [[k, v] for k, v in self._learn.items()],
                    "learn_n": self._learn_n,
                    "held": [[s, w, c] for (s, w), c in self._held.items()]}
        return {"cells": self._cells.tolist(), "counts": self._counts.tolist(),
                "zeros": self._zeros.tolist()}

    def _set_data(self, data):
        try:
            if self._ref is None:
                self._learn = {float(k): float(v) for k, v in data["learn"]}
                self._learn_n = int(data["learn_n"])
                self._held = collections.Counter(
                    {(float(s), float(w)): int(c) for s, w, c in data["held"]})
            else:
                cells = np.asarray(data["cells"], dtype=np.float64)
                counts = np.asarray(data["counts"], dtype=np.int64)
                zeros = np.asarray(data["zeros"], dtype=np.int64)
                if (cells.shape != self._cells.shape or counts.shape != cells.shape
                        or zeros.shape != cells.shape or (zeros > counts).any()):
                    raise ValueError("cells do not match the reference")
                self._cells, self._counts, self._zeros = cells, counts, zeros
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a ScoreDrift state: {e}") from None

    def _check(self):
        if self._ref is not None:
            assert (self._counts >= self._zeros).all() and (self._zeros >= 0).all()
            assert (self._cells[self._counts == self._zeros] == 0.0).all()
        else:
            assert self._learn_n < self.baseline or not self._learn


# ------------------------------------------------------------------ the detector


class ScoreDriftDetector(BinaryMetric):
    """A sequential detector of a shift in the score distribution, with a stream-wide
    false-alarm guarantee: on a stationary stream of independent scores,
    ``P(a false alarm within the first horizon events) <= alpha`` (see the module
    notes: a two-sample DKW bound, the budget spent evenly over the checks).

    The first ``reference`` events make the reference; then every ``every`` events,
    once ``window`` events followed it, the KS statistic between the reference and the
    last ``window`` events is compared with :func:`ks_threshold` at level
    ``alpha * every / horizon``. An alarm records the change (the KS statistic, the
    mean score before and after, where the window started) and makes the window the
    new reference. Labels are ignored.

    :meth:`report` gives what rows, snapshots and rules read, as
    :class:`~streameval.sequential.SequentialDrift` does: ``p_value`` (anytime-valid:
    the smallest level at which a check since the last change would have alarmed,
    ``min_k 4 exp(...) * horizon / every``, at most 1), ``change`` (``"rise"`` or
    ``"drop"``: the direction of the mean score at the last alarm; None before one),
    ``last_change`` (``n``: the events counted at the check that alarmed, ``start``:
    the window's first event, 0-based, ``ks``, ``threshold``, ``p_value``, ``before`` and
    ``after``: the mean score of the reference and of the window, ``n_before`` and
    ``n_after``: their effective sizes, ``direction``), ``changes``, ``drops`` and
    ``rises`` (the alarms by direction), ``ks`` (at the last check) and ``threshold``
    (the KS distance that alarms).

    Runtime complexity: ``update`` `O(log(k))` (``k`` distinct reference scores);
    ``update_many`` `O(m log(k))` numpy (the events between two checks go in as one
    run); a check `O(window + k)` numpy, its window's cell weights summed afresh, oldest
    first, so that ``update`` and any batching give the same bits. Memory: the reference
    and a ring of the window's scores, weights and cells (24 bytes per event).

    >>> import numpy as np
    >>> from streameval.metrics.scoredrift import ScoreDriftDetector
    >>> rng = np.random.default_rng(0)
    >>> d = ScoreDriftDetector(reference=500, window=500, every=100)
    >>> d.update_many(None, rng.beta(2, 5, 3000)).report()["changes"]
    0
    >>> d.update_many(None, rng.beta(5, 2, 1000)).report()["change"]
    'rise'
    """

    _public_name = "ScoreDriftDetector"
    needs_labels = False
    _probabilities_needed = False

    def __init__(self, alpha=0.005, horizon=1_000_000, reference=5000, window=5000,
                 every=1000):
        BinaryMetric.__init__(self)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
            raise ValidationError("alpha", alpha, "must be a number in (0, 1)")
        self.alpha = float(alpha)
        self.horizon = _check_int("horizon", horizon, 1)
        self.reference = _check_int("reference", reference, 2)
        self.window = _check_int("window", window, 2)
        self.every = _check_int("every", every, 1)
        if self.every > self.horizon:
            raise ValidationError("every", every, f"must be at most horizon = {horizon}")
        self._reset()

    def _reset(self):
        self.n = 0
        self.changes = []
        self._restart([], [])

    def _restart(self, scores, weights):
        """Start a new reference from the given events (the window after an alarm)."""
        self._ref_s = list(scores)
        self._ref_w = list(weights)
        self._ref = None
        self._since = 0  # events since the last check
        self._min_p = 1.0
        self._ks = _NAN
        self._wlen = self._wpos = 0  # the window: events held, next slot of the ring
        if len(self._ref_s) >= self.reference:
            self._build()

    @property
    def level(self):
        """The level of each check: ``alpha * every / horizon``."""
        return self.alpha * self.every / self.horizon

    def _build(self):
        ref = _Reference.of(self._ref_s, self._ref_w, 2)
        if ref is None:  # weights 0 only: keep collecting
            return
        self._ref = ref
        self._ref_mean = float(np.dot(self._ref_s, self._ref_w) / np.sum(self._ref_w))
        self._alloc()
        self._ref_s = []
        self._ref_w = []

    def _alloc(self):
        """An empty window: a ring of the last ``window`` events' scores, weights and
        cells."""
        self._bs = np.zeros(self.window)
        self._bw = np.zeros(self.window)
        self._bk = np.zeros(self.window, dtype=np.int64)
        self._wlen = self._wpos = 0

    def update(self, y_true, y_pred, w=1.0):
        """Add one score (``y_true`` ignored). Runtime complexity: `O(log(k))`, plus a
        check every ``every`` events."""
        if type(y_pred) is not float or y_pred - y_pred:
            y_pred = self._score(y_pred)
        if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
            w = check_weight(w)
        self._add(y_pred, w)

    def _add(self, s, w):
        self.n += 1
        ref = self._ref
        if ref is None:
            self._ref_s.append(s)
            self._ref_w.append(w)
            if len(self._ref_s) >= self.reference:
                self._build()
            return
        p = self._wpos
        self._bs[p] = s
        self._bw[p] = w
        self._bk[p] = ref.cell(s)
        self._wpos = (p + 1) % self.window
        if self._wlen < self.window:
            self._wlen += 1
        if self._wlen >= self.window:
            self._since += 1
            if self._since >= self.every:
                self._since = 0
                self._check_now()

    def _push(self, s, w, k):
        """Write a run of events into the window's ring (only the last ``window``
        stay)."""
        size, m = self.window, len(s)
        if m >= size:
            self._bs[:] = s[m - size:]
            self._bw[:] = w[m - size:]
            self._bk[:] = k[m - size:]
            self._wpos, self._wlen = 0, size
            return
        p = self._wpos
        first = min(m, size - p)
        self._bs[p:p + first] = s[:first]
        self._bw[p:p + first] = w[:first]
        self._bk[p:p + first] = k[:first]
        if first < m:
            self._bs[:m - first] = s[first:]
            self._bw[:m - first] = w[first:]
            self._bk[:m - first] = k[first:]
        self._wpos = (p + m) % size
        self._wlen = min(size, self._wlen + m)

    def _window(self):
        """The window's ``(scores, weights, cells)``, oldest first (copies)."""
        if self._ref is None or not self._wlen:
            e = np.zeros(0)
            return e, e, np.zeros(0, dtype=np.int64)
        if self._wlen < self.window:
            n = self._wlen
            return self._bs[:n].copy(), self._bw[:n].copy(), self._bk[:n].copy()
        p = self._wpos
        return (np.concatenate((self._bs[p:], self._bs[:p])),
                np.concatenate((self._bw[p:], self._bw[:p])),
                np.concatenate((self._bk[p:], self._bk[:p])))

    def _check_now(self):
        """One check: the window's cell weights summed afresh (oldest first), so a check
        gives the same bits whatever batches brought its events."""
        ref = self._ref
        s, w, k = self._window()
        cells = np.bincount(k, weights=w, minlength=2 * len(ref.keys) + 1)
        ks = ref.ks(cells)
        self._ks = ks
        if ks != ks:
            return
        ws = float(cells.sum())
        w2 = float(np.dot(w, w))
        n = ws * ws / w2 if ws > 0 and w2 > 0 else 0.0
        m = ref.n_eff
        if not (n > 0 and m > 0):
            return
        p = min(1.0, _ks_p_value(ks, m, n) * self.horizon / self.every)
        self._min_p = min(self._min_p, p)
        if ks > ks_threshold(m, n, self.level):
            after = float(np.dot(s, w) / max(ws, 1e-300))
            self.changes.append({
                "n": self.n, "start": self.n - len(s), "ks": ks,
                "threshold": ks_threshold(m, n, self.level), "p_value": self._min_p,
                "before": self._ref_mean, "after": after, "n_before": m, "n_after": n,
                "direction": "rise" if after >= self._ref_mean else "drop"})
            self._restart(s.tolist(), w.tolist())

    def update_many(self, y_true, y_pred, w=None):
        """Add a batch (validated first; labels ignored); the same result as a loop of
        :meth:`update`."""
        _, s, weights = LabelFree.validate(self, y_true, y_pred, w)
        return self.update_trusted(None, s, weights)

    def validate(self, y_true, y_pred, w=None):
        return LabelFree.validate(self, y_true, y_pred, w)

    _calibration = None

    def update_trusted(self, y, s, w=None):
        """Add validated columns: numpy runs between checks, each check on the window
        as :meth:`update` leaves it (the same bits). Runtime complexity: `O(m log(k))`
        numpy plus `O(window + k)` per check."""
        s = np.asarray(s, dtype=np.float64)
        w = np.ones(len(s)) if w is None else np.asarray(w, dtype=np.float64)
        i, m = 0, len(s)
        while i < m:
            if self._ref is None:
                need = max(self.reference - len(self._ref_s), 1)
                j = min(m, i + need)
                self._ref_s.extend(s[i:j].tolist())
                self._ref_w.extend(w[i:j].tolist())
                self.n += j - i
                i = j
                if len(self._ref_s) >= self.reference:
                    self._build()
                continue
            fill = max(self.window - self._wlen - 1, 0)  # events before the window is full
            j = min(m, i + fill + self.every - self._since)
            run = s[i:j]
            self._push(run, w[i:j], self._ref.cells(run))
            self.n += j - i
            self._since += max(j - i - fill, 0)
            i = j
            if self._since >= self.every:
                self._since = 0
                self._check_now()
        return self

    def revert(self, *args, **kwargs):
        raise NotImplementedError("a sequential detector cannot revert an event")

    def revert_trusted(self, *args, **kwargs):
        raise NotImplementedError("a sequential detector cannot revert an event")

    @property
    def change(self):
        """The direction of the last alarm's mean-score change, or None."""
        return self.changes[-1]["direction"] if self.changes else None

    def get(self):
        """The KS statistic at the last check (NaN before one)."""
        return self._ks

    def report(self):
        """The detector's state (see the class notes). Runtime complexity:
        `O(window)`."""
        ready = self._ref is not None
        m = self._ref.n_eff if ready else _NAN
        _, w, _ = self._window()
        ws, w2 = float(w.sum()), float(np.dot(w, w))
        n = ws * ws / w2 if ready and w2 > 0 else _NAN
        thr = ks_threshold(m, n, self.level) if ready and n == n and n > 0 else _NAN
        last = self.changes[-1] if self.changes else None
        drops = sum(c["direction"] == "drop" for c in self.changes)
        return {"metric": "score_drift", "p_value": self._min_p, "ks": self._ks,
                "threshold": thr, "change": self.change, "last_change": last,
                "changes": len(self.changes), "drops": drops,
                "rises": len(self.changes) - drops,
                "change_p_value": None if last is None else last["p_value"],
                "delta": _NAN if last is None else last["after"] - last["before"],
                "alpha": self.alpha, "horizon": self.horizon, "ready": ready, "n": self.n}

    def merge(self, other):
        """Fold in a detector that saw no events (``ValueError`` if both did: alarms
        depend on the order of the events)."""
        self._check_same_kind(other, "merge", "into", "detectors")
        if other.n == 0:
            return self
        if self.n:
            raise ValueError("cannot merge two sequential detectors that both saw events")
        self.__dict__.update(type(self)._from_state(other.to_state()).__dict__)
        return self

    def _params(self):
        return {"alpha": self.alpha, "horizon": self.horizon, "reference": self.reference,
                "window": self.window, "every": self.every}

    def _get_data(self):
        d = {"n": self.n, "changes": self.changes, "since": self._since,
             "min_p": self._min_p, "ks": None if self._ks != self._ks else self._ks}
        if self._ref is None:
            d["pending"] = [list(self._ref_s), list(self._ref_w)]
        else:
            s, w, _ = self._window()
            d["reference"] = self._ref.to_data()
            d["reference_mean"] = self._ref_mean
            d["window"] = [s.tolist(), w.tolist()]
        return d

    def _set_data(self, data):
        try:
            self.n = int(data["n"])
            self.changes = [dict(c) for c in data["changes"]]
            if "pending" in data:
                self._restart(*data["pending"])
            else:
                ref = data["reference"]
                self._ref_s, self._ref_w = [], []
                self._ref = _Reference(ref["scores"], ref["weights"], 2)
                self._alloc()
                self._ref.n_eff = float(ref["n_eff"])
                self._ref_mean = float(data["reference_mean"])
                s = np.asarray(data["window"][0], dtype=np.float64)
                w = np.asarray(data["window"][1], dtype=np.float64)
                if s.ndim != 1 or s.shape != w.shape or len(s) > self.window:
                    raise ValueError(f"a window of at most {self.window} scores and weights")
                if len(s):
                    self._push(s, w, self._ref.cells(s))
            self._since = int(data["since"])
            self._min_p = float(data["min_p"])
            self._ks = _NAN if data["ks"] is None else float(data["ks"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a ScoreDriftDetector state: {e}") from None

    def __len__(self):
        return self.n
