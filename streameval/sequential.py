"""Anytime-valid detection of a change in a proportion or in AUC: an e-detector.

:class:`SequentialDrift` watches the per-event indicator stream of a proportion metric
(recall: each actual positive is 1 if predicted positive, else 0; precision, accuracy,
error rate, FPR, specificity likewise) or, for ``"roc_auc"``, disjoint
(positive, negative) pairs (1 if the positive scores higher, 1/2 on a tie), and says
when its mean has changed. Unlike a drift test repeated at every evaluation, its
false-alarm guarantee holds over the whole stream.

The guarantee
-------------
Assume the indicator observations are independent with one common mean before the
change (a stationary stream of independent events; the AUC pairs share no event, so
they are independent too). Then, whatever that mean is::

    P(a false alarm within the first `horizon` events) <= alpha

and more generally ``P(a false alarm within the first k * horizon events) <= k * alpha``.
Nothing is assumed about the reference rate: it is estimated from the stream, and the
statistic pays for that estimate's uncertainty (the history before a candidate change
enters as a mixture over its rate), so the guarantee holds however short or unlucky
that history is. The construction follows the e-detectors of Shin,
Ramdas and Rinaldo ("E-detectors: a nonparametric framework for sequential change
detection", New England Journal of Statistics in Data Science, 2023), with
universal inference (Wasserman, Ramdas and Balakrishnan, PNAS 2020) for the unknown
pre-change mean:

* Every ``block`` indicator observations a *candidate* change point ``j`` is opened.
  Its e-process at time ``t`` is ::

      E_j(t) = KT(x[r:j]) * Q(x[j:t] | x[r:j]) / max_p L_p(x[r:t])

  where ``r`` is the start of the history (the stream's start, or the last detected
  change), ``KT`` the Krichevsky–Trofimov (Beta(1/2, 1/2)) mixture likelihood of the
  history before ``j``, ``Q`` an equal-weight mixture of Beta-binomial likelihoods of
  what follows ``j``: under the flat Beta(1/2, 1/2) prior and under Beta priors
  centred on the history's rate with concentrations 10, 100, ..., 100 000 (changes of
  any size, in either direction), and the denominator the best single-rate
  likelihood of all of it. For every rate
  ``p``, ``E_j`` is at most ``Q_j / L_p``, a nonnegative martingale of mean 1 (a
  probability over the observations divided by the true one).
* The candidate's share of the error budget is ``pi_j = (events since the previous
  candidate) / horizon``, so the shares of the candidates opened within the first
  ``horizon`` events sum to at most 1. The shares depend only on *when* observations
  arrive, which under the assumptions is independent of their values; given those
  times, ``sum_j pi_j E_j`` is at most a nonnegative martingale that starts at 1.
* The detector alarms when ``sum_j pi_j E_j(t) >= 1 / alpha`` (Ville's inequality:
  probability at most ``alpha``, a Shiryaev–Roberts-type e-detector); its
  anytime-valid p-value is ``1 / sum_j pi_j E_j`` (:meth:`report`). It then records
  a :class:`Change` (direction, rates before and after, the estimated start: the
  candidate with the largest term) and starts its history again there, so it can see
  the next change (a recovery is a "rise").
* Candidates are checked at block boundaries and thinned like an exponential
  histogram (``keep`` per doubling of age): leaving terms out of the sum, or checking
  it less often, can only delay the first alarm, never bring it forward (after a
  restart the history differs, so later alarms are another matter).

Indicator values of 1/2 (AUC ties) keep every bound (each likelihood ratio is convex
in the observation). Weights: with unit weights the counts are exact; otherwise they
are Kish's effective counts (``n_eff = (sum w)^2 / sum w^2``, as the drift tests), an
approximation: a few heavy events do not pass for many independent ones.

Cost: ``update`` is `O(1)`; a block boundary `O(keep * log(n / block))` (numpy); a
batch `O(m)` numpy plus one boundary per ``block`` observations. Memory:
`O(keep * log(n / block))`.

Imports: numpy, :mod:`streameval.validation`, :mod:`streameval.events` (event times)
and :mod:`streameval.metrics.base` (the binary protocol); the Monitor and config
import it.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from streameval.events import as_seconds, as_seconds_array
from streameval.metrics.base import BinaryMetric, check_weight
from streameval.validation import Integer, Options, check_level, check_param, check_threshold

__all__ = ["SequentialDrift", "Change", "METRICS", "DEFAULT_HORIZON", "DEFAULT_BLOCK",
           "DEFAULT_KEEP"]

#: the guarantee's horizon by default: one million events
DEFAULT_HORIZON = 1_000_000
#: indicator observations between candidate change points (and checks): 100 keeps a
#: check cheap per observation and loses at most 100 observations of delay; a larger
#: block spends the budget over fewer candidates (measured in bench_alerts.py)
DEFAULT_BLOCK = 100
#: candidates kept per doubling of age (an exponential histogram, as ADWIN's buckets)
DEFAULT_KEEP = 8

#: concentrations of the Beta priors mixed in ``Q``, centred on the history's rate:
#: a prior of concentration k has a standard deviation of about sqrt(p (1 - p) / k),
#: so 10 ... 100 000 cover changes from about 0.15 down to 0.002 (plus the flat
#: Beta(1/2, 1/2) for anything larger); a continuous mixture, not a grid of
#: alternatives, whose cost would grow with the observations after the change
CONCENTRATIONS = (10.0, 100.0, 1_000.0, 10_000.0, 100_000.0)
_LOG_K = math.log(len(CONCENTRATIONS) + 1)
_LOG_PI = math.log(math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: from this argument on, _lg uses Stirling's series (its next term is below 1e-13);
#: below it, math.lgamma
_STIRLING_FROM = 15.0


def _lg(x):
    """``lgamma`` of an array of positive numbers, vectorised: Stirling's series to
    the ``x^-7`` term from 15 on (relative error below 1e-13; checked against
    ``math.lgamma`` in the tests), ``math.lgamma`` below. Runtime complexity:
    `O(len(x))`."""
    y = np.asarray(x, dtype=np.float64)
    small = y < _STIRLING_FROM
    few = small.any()
    z = np.where(small, _STIRLING_FROM, y) if few else np.ascontiguousarray(y)
    inv = 1.0 / z
    inv2 = inv * inv
    series = inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 / 1680)))
    out = (z - 0.5) * np.log(z) - z + _HALF_LOG_2PI + series
    if few:
        idx = np.flatnonzero(small)
        out[idx] = [math.lgamma(v) for v in y[idx].tolist()]
    return out


def _lg_list(x):
    """:func:`_lg` of a short list of positive floats, as a list: the same operations
    on each element in Python floats (the logarithm by numpy, over the same array),
    so the same values, without a dozen numpy calls on a handful of numbers.
    Runtime complexity: `O(len(x))`."""
    z = [_STIRLING_FROM if v < _STIRLING_FROM else v for v in x]
    out = []
    for v, zz, lz in zip(x, z, np.log(np.array(z)).tolist()):
        if v < _STIRLING_FROM:
            out.append(math.lgamma(v))
        else:
            inv = 1.0 / zz
            inv2 = inv * inv
            series = inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 / 1680)))
            out.append((zz - 0.5) * lz - zz + _HALF_LOG_2PI + series)
    return out


# the indicator of each event code (2 * actual positive + predicted positive);
# -1: the event is not an observation of this metric
_INDICATORS = {
    "recall": (-1, -1, 0, 1),
    "precision": (-1, 0, -1, 1),
    "accuracy": (1, 0, 0, 1),
    "error_rate": (0, 1, 1, 0),
    "fpr": (0, 1, -1, -1),
    "specificity": (1, 0, -1, -1),
}
#: the metrics a :class:`SequentialDrift` can watch
METRICS = tuple(_INDICATORS) + ("roc_auc",)


@dataclasses.dataclass(frozen=True)
class Change:
    """A change detected by a :class:`SequentialDrift`.

    ``index``: 0-based position of the event on which it was detected; ``t``: the
    newest event time then (or None); ``start``: the event index where the changed
    stretch is estimated to begin (the best candidate); ``direction``: ``"drop"`` or
    ``"rise"``; ``before`` and ``after``: the rates of the history before ``start``
    and of the stretch after it; ``p_value``: the anytime-valid p-value at detection.
    """

    index: int
    t: float | None
    start: int
    direction: str
    before: float
    after: float
    p_value: float

    def to_dict(self):
        return dataclasses.asdict(self)


def _running_max(start, t, stop):
    """The newest time after the first ``stop`` times ``t`` from ``start``: the last
    element of ``np.maximum.accumulate`` over ``start`` then ``t[:stop]`` (a NaN, an
    unknown time, stays NaN), in one reduction unless the maximum is 0 (where the
    first of the equal values, 0.0 or -0.0, must win) or NaN."""
    if start != start:
        return start
    top = t[:stop].max()
    if top and top == top:  # the maximum's value and bits are those of the running one
        return top if top > start else start
    return np.maximum.accumulate(np.concatenate(([start], t[:stop])))[-1]


def _counts(W, X, Q):
    """``(successes, trials)`` of observations with weight sum ``W``, weighted sum
    ``X`` and squared-weight sum ``Q``: the counts for unit weights (``Q == W``),
    Kish's effective counts otherwise."""
    if W <= 0.0:
        return 0.0, 0.0
    if Q == W:
        return min(max(X, 0.0), W), W
    n = W * W / Q
    return min(max(X / W, 0.0), 1.0) * n, n


def _log_kt(s, n):
    """log of the Krichevsky–Trofimov mixture likelihood of ``s`` successes in ``n``."""
    return math.lgamma(s + 0.5) + math.lgamma(n - s + 0.5) - math.lgamma(n + 1.0) - _LOG_PI


def _log_max(s, n):
    """log of the best single-rate likelihood of ``s`` successes in ``n``."""
    f = n - s
    out = 0.0
    if s > 0.0:
        out += s * math.log(s / n)
    if f > 0.0:
        out += f * math.log(f / n)
    return out


def _column(matrix, j, width=None):
    """A property reading (and writing) column ``j`` of a candidates' matrix, or the
    ``width`` columns from ``j`` on."""
    def get(self):
        m = getattr(self, matrix)
        return m[:, j] if width is None else m[:, j:j + width]

    def set_(self, value):
        get(self)[...] = value

    return property(get, set_)


class _Candidates:
    """The open candidate change points, as numpy columns (a few dozen rows): the
    float columns are views of one matrix and the integer ones of another, so that
    opening a candidate or thinning them is two numpy calls, not one per column."""

    __slots__ = ("f", "i")

    _K = len(CONCENTRATIONS)
    W = _column("f", 0)                  # sums of the history before it
    X = _column("f", 1)
    Q = _column("f", 2)
    log_pi = _column("f", 3)             # log of its share of the budget
    pre = _column("f", 4)                # log KT of the history before it
    a = _column("f", 5, _K)              # Q's Beta(a, c) priors around its rate
    c = _column("f", 5 + _K, _K)
    norm = _column("f", 5 + 2 * _K, _K)  # log B(a, c)
    b = _column("i", 0)                  # block number since the restart
    e = _column("i", 1)                  # events counted when it opened

    def __init__(self):
        self.f = np.zeros((0, 5 + 3 * self._K))
        self.i = np.zeros((0, 2), dtype=np.int64)

    def __len__(self):
        return len(self.i)

    def floats(self):
        """The float columns, in one call: ``W, X, Q, log_pi, pre, a, c, norm``."""
        f, k = self.f, self._K
        return (f[:, 0], f[:, 1], f[:, 2], f[:, 3], f[:, 4], f[:, 5:5 + k],
                f[:, 5 + k:5 + 2 * k], f[:, 5 + 2 * k:])

    def take(self, idx):
        self.f = self.f[idx]
        self.i = self.i[idx]

    def add(self, b, W, X, Q, log_pi, e):
        pre, a, cc, norm = _prior(W, X, Q)
        self.f = np.concatenate((self.f, [[W, X, Q, log_pi, pre, *a, *cc, *norm]]))
        self.i = np.concatenate((self.i, [(b, e)]))

    def rebase(self, W, X, Q, b):
        """The history now starts at a candidate with these sums and block number."""
        self.W = self.W - W
        self.X = self.X - X
        self.Q = self.Q - Q
        self.b = self.b - b
        for i in range(len(self.b)):
            self.pre[i], self.a[i], self.c[i], self.norm[i] = _prior(
                self.W[i], self.X[i], self.Q[i])


def _prior(W, X, Q):
    """What a candidate keeps of the history before it: log KT, and the Beta priors
    of ``Q`` around its rate (the add-1/2 estimate) with their log normalisers (the
    priors as lists of floats, one per concentration)."""
    s, n = _counts(float(W), float(X), float(Q))
    p0 = (s + 0.5) / (n + 1.0)
    q0 = 1.0 - p0
    a = [kappa * p0 for kappa in CONCENTRATIONS]
    c = [kappa * q0 for kappa in CONCENTRATIONS]
    k = len(a)
    g = _lg_list(a + c + [u + v for u, v in zip(a, c)])
    return _log_kt(s, n), a, c, [g[i] + g[k + i] - g[2 * k + i] for i in range(k)]


class SequentialDrift(BinaryMetric):
    """Sequential change detection with a false-alarm guarantee over the whole stream.

    Watches recall, precision, accuracy, error rate, FPR, specificity (their per-event
    indicators) or AUC (disjoint positive/negative pairs) and detects a change of
    their rate in either direction. See the module docstring for the statistic and
    the guarantee: with independent events and a stationary stream before the
    change, ``P(a false alarm within the first horizon events) <= alpha`` (Shin,
    Ramdas & Rinaldo 2023, e-detectors; Ville's inequality).

    :meth:`report` gives the anytime-valid ``p_value`` and, at the best candidate,
    the rates ``reference`` (before) and ``current`` (after) and ``delta`` (after
    minus before), plus ``change``: the direction of the last detected change
    (``"drop"``, ``"rise"`` or None) that alert rules read (``recall alarm`` fires
    while the last change is a drop). :attr:`changes` lists every detection.
    :meth:`get` is the rate since the last detected change.

    Events cannot be reverted; :meth:`merge` only combines a detector with an empty
    one (alarms depend on the order of events). ``update_many`` equals a loop of
    ``update`` exactly (the same sums, in the same order, checked at the same block
    boundaries).

    Runtime complexity of ``update``: `O(1)`, plus `O(keep log n)` numpy work once
    per ``block`` observations.

    Recall 0.9 for 4 000 positives, then 0.7:

    >>> rng = np.random.default_rng(7)
    >>> hit = rng.random(8000) < np.r_[np.full(4000, 0.9), np.full(4000, 0.7)]
    >>> d = SequentialDrift("recall", alpha=0.01)
    >>> _ = d.update_many([1] * 8000, np.where(hit, 0.9, 0.1))
    >>> c = d.changes[0]
    >>> c.direction, 4000 < c.index < 4600, round(c.before, 2), c.after < 0.8
    ('drop', True, 0.9, True)
    >>> d.report()["change"]
    'drop'

    Parameters
    ----------
    metric : str
        ``"recall"``, ``"precision"``, ``"accuracy"``, ``"error_rate"``, ``"fpr"``,
        ``"specificity"`` or ``"roc_auc"``.
    alpha : float
        The false-alarm probability within ``horizon`` events, in (0, 1).
    horizon : int
        Events over which ``alpha`` holds (default one million); >= 1.
    threshold : float
        Scores ``>= threshold`` are predicted positive (not used by ``"roc_auc"``).
    block : int
        Indicator observations between candidate change points (and checks).
    keep : int
        Candidates kept per doubling of age.
    pos_label, neg_label
        Labels, as for every binary metric.
    """

    _public_name = "SequentialDrift"
    _state_version = 1

    def __init__(self, metric="recall", alpha=0.005, horizon=DEFAULT_HORIZON, threshold=0.5,
                 block=DEFAULT_BLOCK, keep=DEFAULT_KEEP, pos_label=True, neg_label=None):
        super().__init__(pos_label, neg_label)
        self.metric = check_param("metric", metric, Options(*METRICS))
        self.alpha = check_level(alpha, "alpha")
        self.horizon = check_param("horizon", horizon, Integer(1))
        self.threshold = check_threshold(threshold)
        self.block = check_param("block", block, Integer(1))
        self.keep = check_param("keep", keep, Integer(1))
        self._log_alarm = -math.log(self.alpha)
        self._pairs = self.metric == "roc_auc"
        self._table = None if self._pairs else _INDICATORS[self.metric]
        # the indicators as floats (the same values, no conversion per batch)
        self._np_table = None if self._pairs else np.array(self._table, dtype=np.float64)
        self._reset()

    def _reset(self):
        #: detected changes, oldest first
        self.changes = []
        self._drops = 0
        #: events seen (every event, observation of the metric or not)
        self.n = 0
        #: indicator observations since the stream's start
        self.n_indicator = 0
        self._t = None
        # the history since the restart: observations and their sums
        self._n = 0
        self._W = self._X = self._Q = 0.0
        self._last_e = 0
        self._cands = _Candidates()
        self._pending = [None, None]   # roc_auc: (score, weight) of a negative, a positive
        self._stat = None              # the last check: (p, before, after, n_before, n_after)

    # -- updates -------------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0, t=None):
        """Add one event (validated first: a bad event raises and changes nothing);
        return True if a change was detected on it."""
        y = self._label(y_true)
        s = self._score(y_pred)
        w = check_weight(w)
        tt = None if t is None else as_seconds(t)
        before = len(self.changes)
        self.n += 1
        if tt is not None and (self._t is None or tt > self._t):
            self._t = tt
        if w == 0.0:
            return False
        if self._pairs:
            x, w = self._pair(y, s, w)
            if x is None:
                return False
        else:
            x = self._table[2 * y + (s >= self.threshold)]
            if x < 0:
                return False
        self._W += w
        self._X += w * x
        self._Q += w * w
        self._n += 1
        self.n_indicator += 1
        if self._n % self.block == 0:
            self._boundary()
        return len(self.changes) > before

    def _pair(self, y, s, w):
        pending = self._pending
        other = pending[not y]
        if other is None:
            pending[y] = (s, w)
            return None, None
        pending[not y] = None
        so, wo = other
        pos, neg = (s, so) if y else (so, s)
        return (1.0 if pos > neg else 0.5 if pos == neg else 0.0), w * wo

    def revert(self, y_true, y_pred, w=1.0, t=None):
        """Not supported: a sequential detector cannot forget an event."""
        raise NotImplementedError("a sequential drift detector cannot revert an event")

    def update_many(self, y_true, y_pred, w=None, t=None):
        """Add a batch; the same result as a loop of :meth:`update`.

        Runtime complexity: `O(m)`, numpy, plus one check per ``block`` observations.
        """
        y, s, ww = self.validate(y_true, y_pred, w)
        ts = None if t is None else as_seconds_array(t, len(y))
        return self.update_trusted(y, s, ww, ts)

    def update_trusted(self, y, s, w=None, t=None):
        """Add validated binary columns (bool labels, float64 scores, float64 weights
        or None; ``t`` float64 epoch seconds or None), unchecked. Returns ``self``.

        Runtime complexity: `O(m)`, numpy, plus one check per ``block`` observations.
        """
        m = len(y)
        if not m:
            return self
        start = -math.inf if self._t is None else self._t  # (newest time before)
        if self._pairs:
            ev, xs, ws = self._pairs_of(y, s, w)
        else:
            predicted = s >= self.threshold
            if y.dtype == np.bool_:  # (the validated form: codes in bytes)
                codes = y.view(np.uint8) * np.uint8(2)
                codes += predicted.view(np.uint8)
            else:
                codes = 2 * y.astype(np.int64) + predicted
            xs = self._np_table.take(codes)
            keep = xs >= 0
            if w is not None:
                keep &= w > 0
            ev = keep.nonzero()[0]
            xs = xs[ev]
            ws = None if w is None else w[ev]
        base, ind0 = self.n, self.n_indicator
        i, k = 0, len(ev)
        while i < k:
            # the sums after each observation, from the current ones, in order (the
            # same additions as the event loop's): one running sum per row
            sums = np.empty((3, k - i + 1))
            sums[:, 0] = (self._W, self._X, self._Q)
            if ws is None:  # (weights of 1: w * x is x, w * w is 1)
                sums[0, 1:] = 1.0
                sums[1, 1:] = xs[i:]
                sums[2, 1:] = 1.0
            else:
                wi = ws[i:]
                sums[0, 1:] = wi
                np.multiply(wi, xs[i:], out=sums[1, 1:])
                np.multiply(wi, wi, out=sums[2, 1:])
            np.cumsum(sums, axis=1, out=sums)
            cW, cX, cQ = sums[:, 1:]
            n0 = self._n
            first = (-n0 - 1) % self.block       # offset of the next boundary
            restarted = False
            for j in range(first, k - i, self.block):
                e = int(ev[i + j])
                self._W, self._X, self._Q = float(cW[j]), float(cX[j]), float(cQ[j])
                self._n = n0 + j + 1
                self.n_indicator = ind0 + i + j + 1
                self.n = base + e + 1
                if t is not None:
                    newest = _running_max(start, t, e + 1)
                    if newest != -math.inf:
                        self._t = float(newest)
                found = len(self.changes)
                self._boundary()
                if len(self.changes) > found:   # restarted: the sums changed
                    i += j + 1
                    restarted = True
                    break
            if not restarted:
                self._W, self._X, self._Q = float(cW[-1]), float(cX[-1]), float(cQ[-1])
                self._n = n0 + (k - i)
                i = k
        self.n = base + m
        self.n_indicator = ind0 + k
        if t is not None:
            newest = _running_max(start, t, m)
            if newest != -math.inf:
                self._t = float(newest)
        return self

    def _pairs_of(self, y, s, w):
        """The AUC pairs a batch makes (the event loop's pairing): event indices,
        values and weights."""
        pending = self._pending
        ev, xs, ws = [], [], []
        wl = None if w is None else w.tolist()
        for i, (yy, ss) in enumerate(zip(y.tolist(), s.tolist())):
            wi = 1.0 if wl is None else wl[i]
            if wi == 0.0:
                continue
            other = pending[not yy]
            if other is None:
                pending[yy] = (ss, wi)
                continue
            pending[not yy] = None
            so, wo = other
            pos, neg = (ss, so) if yy else (so, ss)
            ev.append(i)
            xs.append(1.0 if pos > neg else 0.5 if pos == neg else 0.0)
            ws.append(wi * wo)
        return (np.array(ev, dtype=np.int64), np.array(xs, dtype=np.float64),
                None if w is None else np.array(ws, dtype=np.float64))
    # -- the check at a block boundary ----------------------------------------------
    def _boundary(self):
        """Check the open candidates (alarm: record the change and start the history
        again at the best one), then open a candidate here and thin the old ones."""
        c = self._cands
        if len(c):
            s_all, n_all = _counts(self._W, self._X, self._Q)
            cW, cX, cQ, clog_pi, cpre, ca, cc, cnorm = c.floats()
            W1, X1, Q1 = self._W - cW, self._X - cX, self._Q - cQ
            unit = Q1 == W1
            if unit.all():  # unit weights (the usual case): the counts are the sums
                n1, s1 = W1, X1
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    n1 = np.where(unit, W1, W1 * W1 / Q1)
                    s1 = np.where(unit, X1, X1 / W1 * n1)
            some = W1 > 0.0
            if not some.all():
                n1 = np.where(some, n1, 0.0)
                s1 = np.where(some, s1, 0.0)
            s1 = np.clip(s1, 0.0, n1)
            # Q: the Beta-binomial likelihoods of what follows each candidate, under
            # the flat prior and the priors around its history's rate, mixed equally
            f1 = n1 - s1
            s1c, f1c = s1[:, None], f1[:, None]
            # every lgamma of the check in one call: KT's three, then the priors' three
            m, k = ca.shape
            arg = np.empty(3 * m * (k + 1))
            np.add(s1, 0.5, out=arg[:m])
            np.add(f1, 0.5, out=arg[m:2 * m])
            np.add(n1, 1.0, out=arg[2 * m:3 * m])
            pa, pc, pac = arg[3 * m:].reshape(3, m, k)
            np.add(ca, s1c, out=pa)
            np.add(cc, f1c, out=pc)
            np.add(ca, cc, out=pac)
            pac += s1c
            pac += f1c
            g = _lg(arg)
            # per candidate: KT's log likelihood, then each prior's Beta-binomial one
            parts = np.empty((m, k + 1))
            kt, beta = parts[:, 0], parts[:, 1:]
            np.add(g[:m], g[m:2 * m], out=kt)
            kt -= g[2 * m:3 * m]
            kt -= _LOG_PI
            ga, gc, gac = g[3 * m:].reshape(3, m, k)
            np.add(ga, gc, out=beta)
            beta -= gac
            beta -= cnorm
            # (the reductions by their ufuncs: what ``max`` and ``sum`` call, one layer
            # of Python less on a few dozen numbers)
            top = np.maximum.reduce(parts, axis=1)
            mix = top + np.log(np.add.reduce(np.exp(parts - top[:, None]), axis=1)) - _LOG_K
            log_e = clog_pi + cpre + mix - _log_max(s_all, n_all)
            best = int(log_e.argmax())
            # the e-detector: the budget-weighted sum of the candidates' e-values
            total = float(log_e[best]) + math.log(
                float(np.add.reduce(np.exp(log_e - log_e[best]))))
            s0, n0 = _counts(float(cW[best]), float(cX[best]), float(cQ[best]))
            before = s0 / n0
            after = float(s1[best] / n1[best]) if n1[best] > 0 else math.nan
            p = math.exp(-total) if total > 0.0 else 1.0
            self._stat = (p, before, after, n0, float(n1[best]), total)
            if total >= self._log_alarm:
                self._drops += after < before
                self.changes.append(Change(
                    index=self.n - 1, t=self._t, start=int(c.e[best]),
                    direction="drop" if after < before else "rise",
                    before=before, after=after, p_value=p))
                bw, bx, bq, bb = float(cW[best]), float(cX[best]), float(cQ[best]), int(c.b[best])
                c.take(np.arange(best + 1, len(c)))
                c.rebase(bw, bx, bq, bb)
                self._W -= bw
                self._X -= bx
                self._Q -= bq
                self._n -= bb * self.block
                if self._Q <= 0.0 or self._W <= 0.0:  # float residue of weighted sums
                    self._W = self._X = self._Q = 0.0
        # a new candidate: its share of the budget is the events since the previous one
        c.add(self._n // self.block, self._W, self._X, self._Q,
              math.log((self.n - self._last_e) / self.horizon), self.n)
        self._last_e = self.n
        now = self._n // self.block
        # ages [0, 2 keep) keep every block, then every 2nd over [2 keep, 4 keep), ...:
        # ``keep`` candidates per doubling of age
        b = c.b
        age = (now - b) // self.keep
        bits = np.frexp(age.astype(np.float64))[1]        # bit_length of each age
        step = np.left_shift(1, np.maximum(bits - 1, 0).astype(np.int64))
        kept = np.flatnonzero(b % step == 0)
        if len(kept) < len(c):
            c.take(kept)

    # -- reading -------------------------------------------------------------------
    @property
    def change(self):
        """The direction of the last detected change (``"drop"``, ``"rise"``), or None."""
        return self.changes[-1].direction if self.changes else None

    def get(self):
        """The rate since the last detected change (since the start before any); nan
        before any observation.

        Runtime complexity: `O(1)`.
        """
        s, n = _counts(self._W, self._X, self._Q)
        return s / n if n > 0 else math.nan

    def report(self):
        """The state of the detector as a dict (what rows, snapshots and rules read).

        ``p_value``: anytime-valid, at the last check (1 before any), ``min(1, 1 /
        e_value)`` where ``e_value`` is the alarm statistic ``sum_j pi_j E_j``; ``reference``,
        ``current``, ``delta`` (current - reference), ``n_reference``, ``n_current``:
        the rates and effective sizes before and after the best candidate at the last
        check; ``change``: the last detected change's direction or None;
        ``changes``, ``drops``, ``rises``: how many changes (of each direction); ``alpha``, ``horizon``; ``n``, ``t``: events seen and
        the newest event time.

        Runtime complexity: `O(1)`.
        """
        if self._stat is None:
            p, before, after, n0, n1, log_e = 1.0, math.nan, math.nan, math.nan, math.nan, 0.0
        else:
            p, before, after, n0, n1, log_e = self._stat
        last = self.changes[-1].to_dict() if self.changes else None
        return {"metric": self.metric, "p_value": p, "e_value": math.exp(min(log_e, 700.0)),
                "delta": after - before,
                "reference": before, "current": after, "n_reference": n0, "n_current": n1,
                "change": self.change, "changes": len(self.changes), "last_change": last,
                "drops": self._drops, "rises": len(self.changes) - self._drops,
                "alpha": self.alpha, "horizon": self.horizon, "ready": True,
                "n": self.n, "t": self._t}

    # -- protocol ------------------------------------------------------------------
    def clone(self, new_params=None, include_attributes=False):
        """A fresh detector with the same parameters and no data."""
        params = self._params()
        if new_params:
            params.update(new_params)
        return type(self)(**params)

    def merge(self, other):
        """Fold in another detector with the same parameters, if either is empty;
        returns ``self``. Alarms depend on the order of the events, so two detectors
        that both saw events cannot be combined (``ValueError``).

        Runtime complexity: `O(size of the state)`.
        """
        self._check_same_kind(other, "merge", "into", "detectors")
        if other.n == 0:
            return self
        if self.n:
            raise ValueError(
                "cannot merge two sequential detectors that both saw events: their "
                "alarms depend on the order of the events (feed one stream to one detector)")
        self.__dict__.update(type(self)._from_state(other.to_state()).__dict__)
        return self

    def _params(self):
        return {"metric": self.metric, "alpha": self.alpha, "horizon": self.horizon,
                "threshold": self.threshold, "block": self.block, "keep": self.keep,
                "pos_label": self.pos_label, "neg_label": self.neg_label}

    def to_state(self):
        """JSON-serialisable state; :func:`streameval.from_state` resumes it exactly."""
        c = self._cands
        return {
            "type": self._public_name,
            "version": self._state_version,
            "params": self._params(),
            "data": {
                "n": self.n, "n_indicator": self.n_indicator, "t": self._t,
                "history": [self._n, self._W, self._X, self._Q], "last_e": self._last_e,
                "candidates": [[int(b), float(W), float(X), float(Q), float(lp), int(e)]
                               for b, W, X, Q, lp, e in zip(c.b, c.W, c.X, c.Q, c.log_pi, c.e)],
                "pending": [None if v is None else list(v) for v in self._pending],
                "stat": None if self._stat is None else [_enc(v) for v in self._stat],
                "changes": [ch.to_dict() for ch in self.changes],
            },
        }

    @classmethod
    def _from_state(cls, state):
        obj = cls(**state["params"])
        d = state["data"]
        try:
            obj.n, obj.n_indicator = int(d["n"]), int(d["n_indicator"])
            obj._t = None if d["t"] is None else float(d["t"])
            n, W, X, Q = d["history"]
            obj._n, obj._W, obj._X, obj._Q = int(n), float(W), float(X), float(Q)
            obj._last_e = int(d["last_e"])
            c = obj._cands
            for b, W, X, Q, lp, e in d["candidates"]:
                c.add(int(b), float(W), float(X), float(Q), float(lp), int(e))
            obj._pending = [None if v is None else (float(v[0]), float(v[1]))
                            for v in d["pending"]]
            obj._stat = None if d["stat"] is None else tuple(_dec(v) for v in d["stat"])
            obj.changes = [Change(**ch) for ch in d["changes"]]
            obj._drops = sum(ch.direction == "drop" for ch in obj.changes)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a SequentialDrift state: {d!r:.200} ({e})") from None
        obj._check()
        return obj

    def _check(self):
        c = self._cands
        assert self.n >= 0 and 0 <= self._n <= self.n_indicator <= self.n, (
            self.n, self._n, self.n_indicator)
        assert self._W >= 0.0 and self._Q >= 0.0, (self._W, self._Q)
        assert len(c.W) == len(c.b) == len(c.pre) == c.a.shape[0] == c.norm.shape[0], len(c)
        assert all(0 < b <= self._n // self.block for b in c.b.tolist()), (c.b, self._n)
        assert list(c.b) == sorted(c.b), c.b

    def __repr__(self):
        r = self.report()
        return (f"SequentialDrift({self.metric}): p={r['p_value']:.3g}, "
                f"{len(self.changes)} change(s) in {self.n} events")

    __str__ = __repr__


def _enc(v):
    return v if math.isfinite(v) else None


def _dec(v):
    return math.nan if v is None else float(v)

