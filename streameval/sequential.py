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
_KAPPA = np.array(CONCENTRATIONS)
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
    z = np.where(small, _STIRLING_FROM, y)
    inv = 1.0 / z
    inv2 = inv * inv
    series = inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 / 1680)))
    out = (z - 0.5) * np.log(z) - z + _HALF_LOG_2PI + series
    if small.any():
        idx = np.flatnonzero(small)
        out[idx] = [math.lgamma(v) for v in y[idx].tolist()]
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


class _Candidates:
    """The open candidate change points, as numpy columns (a few dozen rows)."""

    __slots__ = ("b", "W", "X", "Q", "log_pi", "e", "pre", "a", "c", "norm")

    def __init__(self):
        self.b = np.zeros(0, dtype=np.int64)        # block number since the restart
        self.W = np.zeros(0)                        # sums of the history before it
        self.X = np.zeros(0)
        self.Q = np.zeros(0)
        self.log_pi = np.zeros(0)                   # log of its share of the budget
        self.e = np.zeros(0, dtype=np.int64)        # events counted when it opened
        self.pre = np.zeros(0)                      # log KT of the history before it
        k = len(CONCENTRATIONS)
        self.a = np.zeros((0, k))                   # Q's Beta(a, c) priors around its rate
        self.c = np.zeros((0, k))
        self.norm = np.zeros((0, k))                # log B(a, c)

    def __len__(self):
        return len(self.b)

    def take(self, idx):
        for name in self.__slots__:
            setattr(self, name, getattr(self, name)[idx])

    def add(self, b, W, X, Q, log_pi, e):
        pre, a, cc, norm = _prior(W, X, Q)
        self.b = np.append(self.b, b)
        self.W = np.append(self.W, W)
        self.X = np.append(self.X, X)
        self.Q = np.append(self.Q, Q)
        self.log_pi = np.append(self.log_pi, log_pi)
        self.e = np.append(self.e, e)
        self.pre = np.append(self.pre, pre)
        self.a = np.vstack((self.a, a))
        self.c = np.vstack((self.c, cc))
        self.norm = np.vstack((self.norm, norm))

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
    of ``Q`` around its rate (the add-1/2 estimate) with their log normalisers."""
    s, n = _counts(float(W), float(X), float(Q))
    p0 = (s + 0.5) / (n + 1.0)
    a, c = _KAPPA * p0, _KAPPA * (1.0 - p0)
    g = _lg(np.concatenate((a, c, a + c))).reshape(3, -1)
    return _log_kt(s, n), a, c, g[0] + g[1] - g[2]


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
        self._np_table = None if self._pairs else np.array(self._table, dtype=np.int64)
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
        newest = None
        if t is not None:
            start = -math.inf if self._t is None else self._t
            newest = np.maximum.accumulate(np.concatenate(([start], t)))[1:]
        if self._pairs:
            ev, xs, ws = self._pairs_of(y, s, w)
        else:
            codes = 2 * y.astype(np.int64) + (s >= self.threshold)
            xs = self._np_table[codes]
            keep = xs >= 0
            if w is not None:
                keep &= w > 0
            ev = np.flatnonzero(keep)
            xs = xs[ev].astype(np.float64)
            ws = None if w is None else w[ev]
        base, ind0 = self.n, self.n_indicator
        i, k = 0, len(ev)
        while i < k:
            # the sums after each observation, from the current ones, in order (the
            # same additions as the event loop's)
            wi = np.ones(k - i) if ws is None else ws[i:]
            cW = np.cumsum(np.concatenate(([self._W], wi)))[1:]
            cX = np.cumsum(np.concatenate(([self._X], wi * xs[i:])))[1:]
            cQ = np.cumsum(np.concatenate(([self._Q], wi * wi)))[1:]
            n0 = self._n
            first = (-n0 - 1) % self.block       # offset of the next boundary
            restarted = False
            for j in range(first, k - i, self.block):
                e = int(ev[i + j])
                self._W, self._X, self._Q = float(cW[j]), float(cX[j]), float(cQ[j])
                self._n = n0 + j + 1
                self.n_indicator = ind0 + i + j + 1
                self.n = base + e + 1
                if newest is not None and newest[e] != -math.inf:
                    self._t = float(newest[e])
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
        if newest is not None and newest[-1] != -math.inf:
            self._t = float(newest[-1])
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
            W1, X1, Q1 = self._W - c.W, self._X - c.X, self._Q - c.Q
            unit = Q1 == W1
            with np.errstate(divide="ignore", invalid="ignore"):
                n1 = np.where(unit, W1, W1 * W1 / Q1)
                s1 = np.where(unit, X1, X1 / W1 * n1)
            n1 = np.where(W1 > 0.0, n1, 0.0)
            s1 = np.clip(np.where(W1 > 0.0, s1, 0.0), 0.0, n1)
            # Q: the Beta-binomial likelihoods of what follows each candidate, under
            # the flat prior and the priors around its history's rate, mixed equally
            f1 = n1 - s1
            s1c, f1c = s1[:, None], f1[:, None]
            # every lgamma of the check in one call: KT's three, then the priors' three
            m = len(c)
            g = _lg(np.concatenate((s1 + 0.5, f1 + 0.5, n1 + 1.0, (c.a + s1c).ravel(),
                                    (c.c + f1c).ravel(), (c.a + c.c + s1c + f1c).ravel())))
            k = c.a.shape[1]
            kt = g[:m] + g[m:2 * m] - g[2 * m:3 * m] - _LOG_PI
            beta = g[3 * m:].reshape(3, m, k)
            parts = np.column_stack((kt, beta[0] + beta[1] - beta[2] - c.norm))
            top = parts.max(axis=1)
            mix = top + np.log(np.exp(parts - top[:, None]).sum(axis=1)) - _LOG_K
            log_e = c.log_pi + c.pre + mix - _log_max(s_all, n_all)
            best = int(np.argmax(log_e))
            # the e-detector: the budget-weighted sum of the candidates' e-values
            total = float(log_e[best]) + math.log(float(np.exp(log_e - log_e[best]).sum()))
            s0, n0 = _counts(float(c.W[best]), float(c.X[best]), float(c.Q[best]))
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
                bw, bx, bq, bb = float(c.W[best]), float(c.X[best]), float(c.Q[best]), int(c.b[best])
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
        age = (now - c.b) // self.keep
        bits = np.frexp(age.astype(np.float64))[1]        # bit_length of each age
        step = np.left_shift(1, np.maximum(bits - 1, 0).astype(np.int64))
        kept = np.flatnonzero(c.b % step == 0)
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

