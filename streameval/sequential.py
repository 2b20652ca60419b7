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

* Every ``every`` blocks of ``block`` indicator observations (2 of 50 by default) a
  *candidate* change point ``j`` is opened.
  Its e-process at time ``t`` mixes two, ``E_j = (1 - w_j) U_j + w_j S_j``::

      U_j(t) = KT(h) * Q(a | h) / max_p L_p(h) L_p(a)
      S_j(t) = Q(a | h) / ((1 + C) * max_p L_p(a) min(1, L_p(h) / (C KT(h))))

  with ``h = x[r:j]`` the history before the candidate and ``a = x[j:t]`` what
  follows it, where ``r`` is the start of the history (the stream's start, or the
  last detected change), ``KT`` the Krichevsky–Trofimov (Beta(1/2, 1/2)) mixture
  likelihood of the history, ``Q`` a mixture (weights :data:`PRIOR_WEIGHTS`) of
  Beta-binomial likelihoods of what follows: under the flat Beta(1/2, 1/2) prior and
  under Beta priors
  centred on the history's rate with concentrations 10, 100, ..., 100 000 (changes of
  any size, in either direction), and ``U``'s denominator the best single-rate
  likelihood of all of it (universal inference). For every rate ``p``, ``U_j`` is at
  most ``KT(h) Q(a | h) / L_p(h) L_p(a)``, a nonnegative martingale of mean 1 (a
  probability over the observations divided by the true one). ``U`` pays for the
  unknown rate with the history's own likelihood, about ``log(n) / 2`` nats for a
  history of ``n`` observations: little for a short history, much for a long one.
  ``S`` (``C`` = :data:`C`) pays a fixed ``log(1 + C)`` instead and compares what
  follows with the rates the history finds plausible (those whose likelihood is at
  least ``C`` times the history's KT likelihood; rates outside are penalised by how
  far below they are): for every ``p``, ``S_j`` is at most
  ``Q(a | h) / L_p(a) * (1 + C KT(h) / L_p(h)) / (1 + C)`` (``1 / min(1, z)`` is at
  most ``1 + 1 / z``), again a nonnegative martingale of mean 1 (``KT(h) / L_p(h)``
  is one along the history). A long history makes ``S`` win, a short one ``U``: the
  weight ``w_j = n / (n + HISTORY_SCALE)`` (:data:`HISTORY_SCALE`) for a history of
  ``n`` observations follows that, and costs ``-log w_j`` (or ``-log(1 - w_j)``)
  against the term that wins. The weights depend only on how many observations came
  before the candidate, not on their values. ``S``'s maximum over ``p`` is
  exact: the function is concave, so it lies at the stretch's own rate, at an end of
  the plausible interval (its ends found by Newton's method), or at the rate of all
  of it.
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
* Candidates are checked at the block boundaries where a candidate opens, and at
  those between candidates while the last check's cheap bound came within
  :data:`NEAR` nats of the alarm level; they are thinned like an exponential
  histogram (``keep`` per doubling of age): leaving terms out of the sum, or checking
  it less often, can only delay the first alarm, never bring it forward (after a
  restart the history differs, so later alarms are another matter).

Dependent observations
----------------------
Labels (or errors) that come in bursts make neighbouring indicator values alike: ``n``
of them then vary like ``n / V`` independent ones, ``V`` the long-run variance factor
(``Var(sum) ~ V n sigma^2``). The detector estimates ``V`` online (:class:`_Dependence`:
the lag-1 autocorrelation as ``(1 + rho) / (1 - rho)`` and batch means over batches of
100 to 3 200 observations, each at a lower confidence bound, and the smallest batches'
estimate averaged with a prior factor (:func:`prior_factor`) that fades as their
differences arrive; the largest, at least 1) and divides every count of the statistic
by it (history, candidates' stretches and the whole), so ``n`` observations weigh as
``n / V``. For a fixed ``V >= 1`` the deflated e-value is at most the undeflated one to
the power ``1 / V`` (a mixture of likelihoods to the power ``1 / V`` is at least the
mixture of the powers, by Jensen's inequality; the best likelihood's power is the best
of the powers; for ``S``, the bound above with each likelihood ratio to the power
``1 / V``), a nonnegative supermartingale under independence: the guarantee above is
kept, and ``V`` is 1 on most independent streams once the prior has faded (then the
statistic is the one described above, bit for bit). Under dependence that dies out
within the largest batch the guarantee is approximate: it rests on sums of ``n``
observations behaving like ``n / V`` independent ones (a central limit theorem);
dependence that outlasts the batches (a slow wander, a cycle of the rate) is a change
of the rate to the detector. While the batch means are young the prior keeps ``V``
near the factor of bursts of :data:`DEPENDENCE_RUN` events (dependence the lag-1
autocorrelation understates, such as errors in bursts, is not taken for independence
before the batches can show it); on an independent stream it fades to within a few
percent of 1 over about 50 000 observations, and until then a change is found later
than ``V = 1`` would find it.

Indicator values of 1/2 (AUC ties) keep every bound (each likelihood ratio is convex
in the observation). Weights: with unit weights the counts are exact; otherwise they
are Kish's effective counts (``n_eff = (sum w)^2 / sum w^2``, as the drift tests), an
approximation: a few heavy events do not pass for many independent ones.

Cost: a check first bounds its statistic from above by the share-weighted two-sample
likelihood ratios of the candidates (a mixture of likelihoods is at most the best one),
a dozen numpy calls; while the bound is :data:`BOUND_MARGIN` below the alarm level no
alarm is possible, and the exact statistic waits, on a copy of its inputs, until
:meth:`SequentialDrift.report` (or the state) reads it: the same values, paid once per
read rather than once per block. A batch whose checks (three or more) all lie
:data:`NEAR` nats below the alarm level by one upper bound of their bounds (one numpy
pass over candidates times checks, :meth:`SequentialDrift._far_checks`) makes only its
last check, without its bound (that upper bound covers it too): the others would change
nothing that the last does not replace.
``update`` is `O(1)`; a block boundary `O(keep * log(n / block))` (numpy, plus
`O(DEPENDENCE_LEVELS)` for the variance factor, and with ``V > 1`` a few Newton steps
per candidate for the plausible rates of its deflated history); a batch `O(m)` numpy
plus one boundary per ``block`` observations. Memory: `O(keep * log(n / block))`.

Stopping at a change: :func:`update_until_change` feeds several detectors a batch up
to the first event on which one of them detects a change, each left as if the batch
had ended there (what a Monitor evaluates its alarm rules at; a detector declares it
in its capabilities as ``until_change``). Reading several detectors' reports at once:
:func:`report_many` (declared as ``report_many``).

Imports: numpy, :mod:`streameval.validation`, :mod:`streameval.events` (event times)
and :mod:`streameval.metrics.base` (the binary protocol); the Monitor and config
import it.
"""

from __future__ import annotations

import bisect
import dataclasses
import math

import numpy as np

from streameval.events import as_seconds, as_seconds_array
from streameval.metrics.base import BinaryMetric, Capabilities, check_weight
from streameval.validation import Integer, Options, check_level, check_param, check_threshold

__all__ = ["SequentialDrift", "Change", "update_until_change", "report_many", "METRICS",
           "DEFAULT_HORIZON", "DEFAULT_BLOCK", "DEFAULT_EVERY", "DEFAULT_KEEP"]

#: the guarantee's horizon by default: one million events
DEFAULT_HORIZON = 1_000_000
#: indicator observations between checks by default: near the alarm level (see
#: :data:`NEAR`) a check every 50 observations, which loses at most 50 observations of
#: delay there (a sizeable share of it for a large drop on a busy stream); far from it
#: one at each candidate, every 100, a dozen numpy calls each
DEFAULT_BLOCK = 50
#: checks between candidate change points with the default block: a candidate every
#: 100 observations. A candidate at every check would halve each one's share of the
#: budget (about 0.7 nats more evidence to alarm); one every 100 observations is
#: within 50 of any change, which a stretch of several hundred observations hardly
#: notices
DEFAULT_EVERY = 2
#: candidates kept per doubling of age (an exponential histogram, as ADWIN's buckets)
DEFAULT_KEEP = 8

#: concentrations of the Beta priors mixed in ``Q``, centred on the history's rate:
#: a prior of concentration k has a standard deviation of about sqrt(p (1 - p) / k),
#: so 10 ... 100 000 cover changes from about 0.15 down to 0.002 (plus the flat
#: Beta(1/2, 1/2) for anything larger); a continuous mixture, not a grid of
#: alternatives, whose cost would grow with the observations after the change
CONCENTRATIONS = (10.0, 100.0, 1_000.0, 10_000.0, 100_000.0)
#: the weights of ``Q``'s mixture: the flat prior, then each concentration. Most of
#: the mass goes to the drops that matter in production, about 1 to 15 points
#: (concentrations 10 to 1 000); a change found by a component costs ``-log(weight)``
#: nats of evidence (1.2 at 0.3, against 1.8 for six equal weights)
PRIOR_WEIGHTS = (0.10, 0.25, 0.30, 0.20, 0.10, 0.05)
_LOG_W = tuple(math.log(w) for w in PRIOR_WEIGHTS)
#: the constant C of the second e-value (module docstring): it costs ``log(1 + C)``
#: nats (0.10 for a tenth, 0.69 for 1), and the rates it holds plausible are those
#: whose history likelihood is at least ``C`` times the history's KT mixture
#: likelihood (a tenth widens the interval of a long history by a few percent, which
#: costs less than it saves)
C = 0.1
LOG_C = math.log(C)
_LOG_1C = math.log1p(C)
#: the history length (observations) at which the two e-values weigh half each: a
#: history of ``n`` gives ``n / (n + HISTORY_SCALE)`` to the second; about where
#: the second starts to win for a drop of 5 points
HISTORY_SCALE = 20_000.0
# the open interval (0, 1) in floats, and Newton's stopping rule (a step relative to
# the distance from the nearer edge: the log likelihood is steep there)
_TINY, _ONE = 5e-324, 1.0 - 2.0 ** -53
_NEWTON_TOL = 1e-13
#: Newton's steps at most per end (:func:`_region`, :func:`_region_one`). An end whose
#: x comes back to an earlier value is in a cycle (long histories, where the log
#: likelihood's rounding exceeds the tolerance: about one end in ten of histories of
#: 1e6 to 1e8 observations) and stops there, with the end the remaining steps would
#: leave: :func:`_region_one` remembers x from step ``_CYCLE_FROM`` on (most ends have
#: stopped by then), :func:`_region` compares with the last three steps at the steps
#: ``_CYCLE_CHECKS``
_NEWTON_STEPS = 60
_CYCLE_FROM = 3
_CYCLE_CHECKS = frozenset((6, 10, 16, 24, 36, 48))
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
    # (for speed: one reduction to see if any is small (fmin skips NaN as ``<`` does),
    # and the series computed in place: the same operations, in the same order, as
    # inv * (1/12 - inv2 * (1/360 - inv2 * (1/1260 - inv2 / 1680))) and
    # (z - 1/2) * log(z) - z + log(2 pi) / 2 + series)
    few = bool(y.size) and np.fmin.reduce(y, axis=None) < _STIRLING_FROM
    if few:
        small = y < _STIRLING_FROM
        z = np.where(small, _STIRLING_FROM, y)
    else:
        z = np.ascontiguousarray(y)
    inv = np.divide(1.0, z)
    inv2 = np.multiply(inv, inv)
    series = np.divide(inv2, 1680)
    np.subtract(1.0 / 1260, series, out=series)
    series *= inv2
    np.subtract(1.0 / 360, series, out=series)
    series *= inv2
    np.subtract(1.0 / 12, series, out=series)
    series *= inv
    out = np.subtract(z, 0.5)
    out *= np.log(z, out=inv)
    out -= z
    out += _HALF_LOG_2PI
    out += series
    if few:
        idx = small.nonzero()[0]
        out[idx] = [math.lgamma(v) for v in y[idx].tolist()]
    return out


def _lg_list(x):
    """:func:`_lg` of a short list of positive floats, as a list, in Python floats
    (the logarithm by ``math.log``): the same series, equal to :func:`_lg` to
    rounding, without a dozen numpy calls on a handful of numbers. Runtime
    complexity: `O(len(x))`."""
    out = []
    log, lgamma = math.log, math.lgamma
    for v in x:
        if v < _STIRLING_FROM:
            out.append(lgamma(v))
        else:
            inv = 1.0 / v
            inv2 = inv * inv
            series = inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 / 1680)))
            out.append((v - 0.5) * log(v) - v + _HALF_LOG_2PI + series)
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
# the same, on a batch of bool labels ``y`` and predictions ``p``: which events are
# observations (None: all of them) and their indicators as bools (a few numpy calls
# less per batch than looking the codes up)
_SELECT = {
    "recall": (lambda y, p: y, lambda y, p: p),
    "precision": (lambda y, p: p, lambda y, p: y),
    "accuracy": (None, np.equal),
    "error_rate": (None, np.not_equal),
    "fpr": (lambda y, p: ~y, lambda y, p: p),
    "specificity": (lambda y, p: ~y, lambda y, p: ~p),
}


@dataclasses.dataclass(frozen=True)
class Change:
    """A change detected by a :class:`SequentialDrift`.

    Positions count the detector's own events (every event it was given: for a
    Monitor's segment, the segment's events, not the stream's; an alert rule places
    them in the stream, see :class:`streameval.alerts.Alarm`).

    ``index``: 0-based position of the event on which it was detected; ``t``: the
    newest event time then (or None); ``start``: the number of events before the
    changed stretch is estimated to begin (the best candidate: the stretch starts
    at 0-based event ``start``); ``direction``: ``"drop"`` or ``"rise"``; ``before``
    and ``after``: the rates of the history before ``start`` and of the stretch after
    it; ``p_value``: the anytime-valid p-value at detection (the evidence for this
    change); ``start_t``: the newest event time when the stretch began (None without
    times, or in a state written before it was kept); ``n_before`` and ``n_after``:
    the indicator observations behind ``before`` and ``after`` (effective counts
    with weights).
    """

    index: int
    t: float | None
    start: int
    direction: str
    before: float
    after: float
    p_value: float
    start_t: float | None = None
    n_before: float | None = None
    n_after: float | None = None

    def to_dict(self):
        return dataclasses.asdict(self)


def _running_maxima(start, t):
    """The newest time after each of the first ``k`` times ``t`` from ``start``, for
    every ``k``: ``np.fmax.accumulate`` over ``start`` then ``t`` (a NaN, an unknown
    time, is passed over, as :meth:`SequentialDrift.update` passes over None; of equal
    values the first wins, 0.0 or -0.0, as its ``>`` keeps it), one pass for a batch."""
    return np.fmax.accumulate(np.concatenate(([start], t)))


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
        self.snap = None

    return property(get, set_)


class _Candidates:
    """The open candidate change points, oldest first, as numpy columns (a few dozen
    rows): the float columns are views of one matrix and the integer ones of another,
    so that thinning them is two numpy calls, not one per column. The matrices are the
    first rows of buffers with room to spare (opening a candidate writes a row in
    place instead of copying them). Besides its sums and share, each row keeps what
    the check reads of the candidate unchanged from one boundary to the next (all of
    it a function of its own sums and share), laid out as :meth:`SequentialDrift._boundary` uses
    it: ``lead``, and per lgamma of the check (KT's, then each prior's) the constant
    of its argument and the log normaliser it is divided by."""

    __slots__ = ("_fbuf", "_ibuf", "f", "i", "unit", "thinned", "blocks", "snap")

    _K = len(CONCENTRATIONS)
    _WIDTH = 6 + 2 * (_K + 1) + _K + (_K + 1) + 1 + 6   # the columns below
    W = _column("f", 0)                  # sums of the history before it
    X = _column("f", 1)
    Q = _column("f", 2)
    log_pi = _column("f", 3)             # log of its share of the budget
    pre = _column("f", 4)                # log KT of the history before it
    lead = _column("f", 5)               # log_pi + pre + log of the first term's weight
    # the successes' lgamma arguments less the successes: KT's 1/2, then Q's Beta(a, c)
    # priors around its rate; the failures' likewise (1/2, then c)
    base = _column("f", 6, 2 * _K + 2)
    a = _column("f", 7, _K)
    c = _column("f", 8 + _K, _K)
    ac = _column("f", 8 + 2 * _K, _K)    # a + c
    # what each log likelihood is divided by: KT's B(1/2, 1/2) = pi, then B(a, c) (logs),
    # each less the log of its weight in the mixture
    divide = _column("f", 8 + 3 * _K, _K + 1)
    norm = _column("f", 9 + 3 * _K, _K)
    t = _column("f", 9 + 4 * _K)         # the newest event time when it opened (NaN: none)
    # the history's counts and its plausible rates (see _region): successes, trials,
    # and the interval [lo, hi] (lo > hi: none); then log_pi + the log of the second
    # term's weight - log(1 + C); then the log of the history's best likelihood
    s0 = _column("f", 10 + 4 * _K)
    n0 = _column("f", 11 + 4 * _K)
    lo = _column("f", 12 + 4 * _K)
    hi = _column("f", 13 + 4 * _K)
    lead_s = _column("f", 14 + 4 * _K)
    lmax_h = _column("f", 15 + 4 * _K)   # log of the history's best likelihood
    b = _column("i", 0)                  # block number since the restart
    e = _column("i", 1)                  # events counted when it opened

    def __init__(self):
        self._fbuf = np.empty((16, self._WIDTH))
        self._ibuf = np.empty((16, 2), dtype=np.int64)
        self._resize(0)
        #: whether every candidate's sums have Q == W (finite): unit weights so far
        self.unit = True
        #: the block number at the last thinning, if every candidate passed its rule
        #: then and none was rebased since (see SequentialDrift._thin)
        self.thinned = None

    def _resize(self, m):
        #: the copy frozen() made of the rows, while they are unchanged (None: none)
        self.snap = None
        self.f = self._fbuf[:m]
        self.i = self._ibuf[:m]
        #: the block numbers, as a list (looked up by the thinning)
        self.blocks = self.i[:, 0].tolist()

    def __len__(self):
        return len(self.i)

    # (pickle and deepcopy would copy the views apart from their buffers)
    def __getstate__(self):
        return self.f.copy(), self.i.copy(), self.unit, self.thinned

    def __setstate__(self, state):
        self._fbuf, self._ibuf, self.unit, self.thinned = state
        self._resize(len(self._ibuf))

    def frozen(self):
        """A copy of the rows, for a check computed later (no thinning, no adding): the
        same copy while the rows are unchanged (checks between candidates share it)."""
        if self.snap is None:
            out = _Candidates.__new__(_Candidates)
            out._fbuf = out.f = self.f.copy()
            out._ibuf = out.i = self.i.copy()
            out.unit, out.thinned, out.blocks, out.snap = self.unit, None, [], None
            self.snap = out
        return self.snap

    def take(self, idx):
        m = len(idx)
        self._fbuf[:m] = self.f[idx]
        self._ibuf[:m] = self.i[idx]
        self._resize(m)

    def drop(self, r):
        """Close the candidate in row ``r`` (the rows after it move up)."""
        m = len(self.i)
        self.snap = None
        self._fbuf[r:m - 1] = self._fbuf[r + 1:m]   # (overlapping: numpy copies safely)
        self._ibuf[r:m - 1] = self._ibuf[r + 1:m]
        self.f = self._fbuf[:m - 1]
        self.i = self._ibuf[:m - 1]
        del self.blocks[r]

    def add(self, b, W, X, Q, log_pi, e, t=math.nan):
        m = len(self.i)
        self.snap = None
        if m == len(self._fbuf):
            self._fbuf = np.concatenate((self.f, np.empty((m + 16, self._WIDTH))))
            self._ibuf = np.concatenate((self.i, np.empty((m + 16, 2), dtype=np.int64)))
        self._fbuf[m] = _candidate_row(W, X, Q, log_pi, t)
        self._ibuf[m] = (b, e)
        self.f = self._fbuf[:m + 1]
        self.i = self._ibuf[:m + 1]
        self.blocks.append(b)
        self.unit = self.unit and Q == W and W < math.inf

    def rebase(self, W, X, Q, b):
        """The history now starts at a candidate with these sums and block number."""
        self.W = self.W - W
        self.X = self.X - X
        self.Q = self.Q - Q
        self.b = self.b - b
        self.blocks = self.b.tolist()
        self.thinned = None
        self.snap = None
        t = 9 + 4 * self._K
        for i, (Wi, Xi, Qi, lp) in enumerate(self.f[:, :4].tolist()):
            self.f[i, 3:t] = _row(Wi, Xi, Qi, lp)
            self.f[i, t + 1:] = _history(Wi, Xi, Qi, lp)


def _after(c, W, X, Q):
    """The counts ``(n1, s1)`` after each candidate of ``c`` (arrays: trials and
    successes, Kish's effective counts with weights; 0 where nothing came after) when
    the history's sums are ``W, X, Q``."""
    f = c.f
    W1 = W - f[:, 0]
    X1 = X - f[:, 1]
    if c.unit and Q == W and W < math.inf:
        # unit weights (the usual case): Q1 == W1, the counts are the sums
        n1, s1 = W1, X1
    else:
        Q1 = Q - f[:, 2]
        unit = Q1 == W1
        if unit.all():
            n1, s1 = W1, X1
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                n1 = np.where(unit, W1, W1 * W1 / Q1)
                s1 = np.where(unit, X1, X1 / W1 * n1)
    if not np.minimum.reduce(W1) > 0.0:  # (some W1 <= 0, or NaN)
        some = W1 > 0.0
        n1 = np.where(some, n1, 0.0)
        s1 = np.where(some, s1, 0.0)
    return n1, s1


#: with candidates every ``every`` blocks, the blocks between them are checked only
#: while the last check's bound (:func:`_bound`) was within this many nats of the
#: alarm level: about twice what a drop of 15 points adds per 100 observations, so
#: that a stretch that could cross the level before the next candidate is checked,
#: while a healthy stream (bounds far below the level) pays one check per candidate
NEAR = 8.0
#: the cheap bound of a check (:func:`_bound`) must stay this far (nats) below the
#: alarm level for the exact statistic to wait until it is read: room for the
#: rounding of both (far below a nat) and for the maximiser of the second e-value
BOUND_MARGIN = 1.0


_FLOOR = 1e-300
# what _far_checks adds to its upper bound for the rounding of both (nats; the margin
# of a decision made 8 nats below the alarm level)
_FAR_SLACK = 1e-3
# the checks of a batch from which _far_checks is worth its numpy pass (it saves the
# bounds of all but one)
_FAR_MIN = 3
# ... and up to which (a larger batch checks each: the pass's arrays, candidates times
# checks, stay a few hundred kilobytes)
_FAR_MAX = 64
# W, X, log_pi and lmax_h of a candidate's row (see _Candidates)
_FAR_COLUMNS = [0, 1, 3, 15 + 4 * len(CONCENTRATIONS)]
# per number q of checks: which of the q - 1 candidates the checks open are not open
# yet at each check (the one opened at check i is open from check i + 1 on)
_FAR_MASKS = {q: np.arange(q - 1)[None, :] >= np.arange(q)[:, None]
              for q in range(2, _FAR_MAX + 1)}


def _log_max_v(s, f, n):
    """:func:`_log_max` of arrays of successes ``s``, failures ``f`` and trials ``n``
    (``0 log 0 = 0``)."""
    # (a count of 0 times the log of a positive number: 0, without a mask)
    n = np.maximum(n, _FLOOR)
    out = np.maximum(s, _FLOOR)
    out /= n
    np.log(out, out=out)
    out *= s
    g = np.maximum(f, _FLOOR)
    g /= n
    np.log(g, out=g)
    g *= f
    out += g
    return out


def _bound(c, n1, s1, W, X, Q, V):
    """An upper bound of the log of ``sum_j pi_j E_j`` (the check's statistic) in a
    dozen numpy calls: each candidate's e-value is at most its share times the
    two-sample likelihood ratio ``max L(history) max L(after) / max L(both)`` with
    every count divided by ``V``. (A mixture of likelihoods is at most the best one:
    so are KT and ``Q``; the mixture weights of ``E_j`` sum to at most 1; the second
    e-value's denominator is at least its value at the pooled rate, where the two
    stretches' log likelihoods add up to the pooled maximum: with ``C <= 1`` that
    bounds it by the same ratio, with ``C > 1`` by ``C`` times it.) Runtime
    complexity: `O(len(c))` numpy."""
    s1 = np.clip(s1, 0.0, n1)
    f1 = n1 - s1
    a = _log_max_v(s1, f1, n1)
    a += c.lmax_h
    if c.unit and Q == W and W < math.inf:
        a -= _log_max(*_counts(W, X, Q))
    else:   # (effective counts: the pooled counts per candidate, and the whole's)
        s0, n0 = c.s0, c.n0
        sp, np_ = s0 + s1, n0 + n1
        a -= np.minimum(_log_max_v(sp, np_ - sp, np_), _log_max(*_counts(W, X, Q)))
    if V != 1.0:
        a /= V
    a += c.log_pi
    top = float(np.maximum.reduce(a))
    if not math.isfinite(top):
        return math.inf if top == top else top
    a -= top
    np.exp(a, out=a)
    return top + math.log(float(np.add.reduce(a))) + max(0.0, LOG_C)


def _row(W, X, Q, log_pi):
    """A candidate's row after its sums (see :class:`_Candidates`): its share, then
    what :func:`_prior` gives, as the check reads it."""
    pre, a, c, norm, n = _prior(W, X, Q)
    w = math.log(HISTORY_SCALE / (n + HISTORY_SCALE))
    return ([log_pi, pre, log_pi + pre + w, 0.5, *a, 0.5, *c]
            + [u + v for u, v in zip(a, c)]
            + [v - lw for v, lw in zip([_LOG_PI, *norm], _LOG_W)])


def _history(W, X, Q, log_pi):
    """A candidate's history columns: its counts, the interval of rates it finds
    plausible (:func:`_region`), and what the second e-value's log adds to the
    candidate's (its share, its weight, ``-log(1 + C)``)."""
    s, n = _counts(float(W), float(X), float(Q))
    w = math.log(n / (n + HISTORY_SCALE)) if n > 0.0 else -math.inf
    return [s, n, *_region_one(s, n, _log_kt(s, n) + LOG_C), log_pi + w - _LOG_1C,
            _log_max(s, n)]


def _candidate_row(W, X, Q, log_pi, t):
    """A new candidate's whole row: ``[W, X, Q] + _row(...) + [t] + _history(...)``,
    the same values, with the counts and the history's log KT computed once."""
    s, n = _counts(float(W), float(X), float(Q))
    # (_prior)
    p0 = (s + 0.5) / (n + 1.0)
    q0 = 1.0 - p0
    a = [kappa * p0 for kappa in CONCENTRATIONS]
    c = [kappa * q0 for kappa in CONCENTRATIONS]
    ac = [u + v for u, v in zip(a, c)]
    g = _lg_list(a + c + ac)
    k = len(a)
    pre = _log_kt(s, n)
    # (_row)
    w = math.log(HISTORY_SCALE / (n + HISTORY_SCALE))
    row = [W, X, Q, log_pi, pre, log_pi + pre + w, 0.5, *a, 0.5, *c, *ac, _LOG_PI - _LOG_W[0]]
    row += [g[i] + g[k + i] - g[2 * k + i] - _LOG_W[i + 1] for i in range(k)]
    # (_history)
    w = math.log(n / (n + HISTORY_SCALE)) if n > 0.0 else -math.inf
    row += [t, s, n, *_region_one(s, n, pre + LOG_C), log_pi + w - _LOG_1C, _log_max(s, n)]
    return row


def _kt_history_args(c, V):
    """The lgamma arguments of the log KT of each candidate's history in ``c`` with its
    counts divided by ``V`` (:func:`_kt_of_lg` finishes it): the successes' ``s + 1/2``,
    the failures' ``f + 1/2``, the trials' ``n + 1``, one after the other."""
    W, X, Q = c.W, c.X, c.Q
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = Q == W
        n0 = np.where(unit, W, W * W / Q)
        s0 = np.where(unit, X, X / W * n0)
    some = W > 0.0
    n0 = np.where(some, n0, 0.0) / V
    s0 = np.clip(np.where(some, s0, 0.0) / V, 0.0, n0)
    return np.concatenate((s0 + 0.5, n0 - s0 + 0.5, n0 + 1.0))


def _kt_of_lg(g):
    """The log KT of the histories from the lgammas of :func:`_kt_history_args`."""
    g = g.reshape(3, -1)
    return g[0] + g[1] - g[2] - _LOG_PI


def _deflated_counts(c, V):
    """The successes and trials of each candidate's history in ``c`` divided by ``V``
    (what its plausible rates are solved on)."""
    return np.minimum(c.s0 / V, c.n0 / V), c.n0 / V


def _settle(detectors):
    """Solve together what the waiting statistics of ``detectors`` need of their
    deflated histories (those whose last check left its statistic to be read with a
    variance factor ``V > 1``): every history's log KT in one :func:`_lg` call and its
    plausible rates in one :func:`_region` call, kept with the statistic for
    :meth:`SequentialDrift._evaluate`. Each element of both is computed on its own, so
    these are the values each detector would compute alone, bit for bit; a few dozen
    numpy calls in all instead of a few dozen per detector."""
    jobs = [d for d in detectors
            if d._lazy is not None and len(d._lazy) == 7 and d._lazy[6] != 1.0]
    if len(jobs) < 2:
        return
    cands = [(d._lazy[0], d._lazy[6]) for d in jobs]
    sizes = [len(c) for c, _ in cands]
    g = _lg(np.concatenate([_kt_history_args(c, V) for c, V in cands]))
    kts, s0, n0, at = [], [], [], 0
    for (c, V), m in zip(cands, sizes):
        kts.append(_kt_of_lg(g[at:at + 3 * m]))
        at += 3 * m
        s, n = _deflated_counts(c, V)
        s0.append(s)
        n0.append(n)
    lo, hi = _region(np.concatenate(s0), np.concatenate(n0),
                     np.concatenate(kts) + LOG_C)
    at = 0
    for d, kt, m in zip(jobs, kts, sizes):
        d._lazy = d._lazy + ((kt, lo[at:at + m], hi[at:at + m]),)
        at += m


def report_many(detectors):
    """Each detector's :meth:`SequentialDrift.report`, read together: the statistics
    their last checks left to be read are computed with their histories' deflated
    counts solved in one pass (:func:`_settle`): the same reports as reading each
    alone, for a few dozen numpy calls less per detector.

    >>> rng = np.random.default_rng(5)
    >>> y, s = rng.random(3000) < 0.3, rng.random(3000)
    >>> ds = [SequentialDrift(m) for m in ("recall", "precision", "fpr")]
    >>> for d in ds:
    ...     _ = d.update_many(y, s)
    >>> import copy
    >>> twins = copy.deepcopy(ds)
    >>> report_many(ds) == [d.report() for d in twins]
    True
    """
    _settle(detectors)
    return [d.report() for d in detectors]


def _ll(p, s, f):
    """``s log p + f log(1 - p)`` of Python floats, with ``0 log 0 = 0``."""
    out = 0.0
    if s > 0.0:
        out += s * math.log(p) if p > 0.0 else -math.inf
    if f > 0.0:
        out += f * math.log1p(-p) if p < 1.0 else -math.inf
    return out


def _region_one(s, n, K):
    """:func:`_region` of one history, in Python floats: the same method (Newton's
    on the signed root of the likelihood ratio from the Gaussian half-width, a step
    out of the end's side going half way), the same ends to machine precision."""
    f = n - s
    ph = s / n if n > 0.0 else 0.5
    top = _ll(ph, s, f)
    gap = top - K
    if not gap >= 0.0:
        return [1.0, 0.0]
    ra = math.sqrt(2.0 * gap)
    half = math.sqrt(2.0 * gap * ph * (1.0 - ph) / n) + 1e-12 if n > 0.0 else 1.0
    log, log1p, sqrt, isfinite = math.log, math.log1p, math.sqrt, math.isfinite
    ends = []
    for side, count in ((-1.0, s), (1.0, f)):
        if not count > 0.0:
            ends.append(0.0 if side < 0 else 1.0)   # (the likelihood is largest there)
            continue
        below, above = (0.0, ph) if side < 0 else (ph, 1.0)
        x = ph + side * half
        if not below < x < above:
            x = (ph + (1.0 if side > 0 else 0.0)) / 2.0
        stalled = False
        trail, seen = [], {}    # (x at the start of each step from _CYCLE_FROM, its step)
        for it in range(_NEWTON_STEPS):
            if not below < x < above:   # (halved to a float of the edge or the rate)
                break
            if it >= _CYCLE_FROM:
                j = seen.get(x)
                if j is not None:
                    # (x came back: a step is a function of x alone, so the steps from
                    # here repeat those since step j, none within the tolerance, up to
                    # the last; where that cycle stands then is the end they leave)
                    x = trail[j + (_NEWTON_STEPS - j) % (it - j) - _CYCLE_FROM]
                    stalled = True
                    break
                seen[x] = it
                trail.append(x)
            ll = 0.0
            if s > 0.0:
                ll += s * log(x)
            if f > 0.0:
                ll += f * log1p(-x)
            g = top - ll
            root = sqrt(2.0 * g) if g > 0.0 else 0.0
            d = s / x - f / (1.0 - x)
            try:
                step = (ra - root) * root / d
            except (ZeroDivisionError, OverflowError):
                break
            if not isfinite(step):
                break
            v = x - step
            if not below < v < above:   # (out of its side: half way instead)
                v = (x + (below if v <= below else above)) / 2.0
                step = x - v
            x = v
            y = 1.0 - x
            if not abs(step) > _NEWTON_TOL * (y if y < x else x):
                break
        else:
            stalled = True
        if stalled:
            # (the last step not within the tolerance: at a fixed point or a cycle below
            # the float's spacing, or short of the crossing when the steps ran out: then
            # the edge, a wider interval, never a narrower one)
            ll = (s * log(x) if s > 0.0 else 0.0) + (f * log1p(-x) if f > 0.0 else 0.0)
            if ll - K > 1e-9 * max(1.0, abs(K)):
                x = 0.0 if side < 0 else 1.0
        ends.append(x)
    return ends


def _loglik(p, s, f, sp=None, fp=None):
    """``s log p + f log(1 - p)``, elementwise, with ``0 log 0 = 0`` (``sp``, ``fp``:
    the masks ``s > 0``, ``f > 0`` when the caller has them)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _loglik_raw(p, s, f, s > 0.0 if sp is None else sp,
                           f > 0.0 if fp is None else fp)


def _loglik_raw(p, s, f, sp, fp):
    """:func:`_loglik` with its masks given, under the caller's ``np.errstate``."""
    a = np.where(sp, s * np.log(p), 0.0)
    a += np.where(fp, f * np.log1p(-p), 0.0)  # (a + b, into a: the same sum)
    return a


def _region(s, n, K):
    """The rates ``p`` whose log likelihood on a history of ``s`` successes in ``n``
    reaches ``K`` (an interval around ``s / n``, the likelihood being log-concave in
    ``p``): ``(lo, hi)`` arrays, ``lo > hi`` where there is none. Each end by Newton's
    method on the signed root of the likelihood ratio, from the Gaussian
    approximation, to machine precision (a relative step below ``_NEWTON_TOL``; a few
    steps); each end stops on its own, so it is the same whatever the other elements
    of the arrays (an end whose steps cycle, on long histories, stops at the cycle with
    the value all :data:`_NEWTON_STEPS` steps give). Runtime complexity: `O(len(s))`
    numpy, a few dozen calls."""
    s = np.asarray(s, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    f = n - s
    with np.errstate(divide="ignore", invalid="ignore"):
        ph = np.where(n > 0.0, s / n, 0.5)
    sp, fp = s > 0.0, f > 0.0
    top = _loglik(ph, s, f, sp, fp)
    gap = top - K
    empty = ~(gap >= 0.0)
    m = len(ph)
    lo = np.where(sp, ph, 0.0)
    hi = np.where(fp, ph, 1.0)
    todo = np.concatenate((fp & ~empty, sp & ~empty))
    if todo.any():
        # both ends at once: the upper end's elements first, then the lower end's (each
        # element's steps are its own, so each end is what it would be alone)
        def both(v):
            return np.concatenate((v, v))
        s2, f2, ph2, top2, sp2, fp2 = both(s), both(f), both(ph), both(top), both(sp), both(fp)
        K2 = both(np.broadcast_to(K, ph.shape))
        ones, zeros = np.ones(m), np.zeros(m)
        edge = np.concatenate((ones, zeros))
        below = np.concatenate((ph, zeros))
        above = np.concatenate((ones, ph))
        with np.errstate(divide="ignore", invalid="ignore"):
            ra = np.sqrt(np.multiply(both(gap), 2.0))
            # the start of each end: the Gaussian half-width (n = 0: the whole of [0, 1])
            half = np.sqrt(np.maximum(2.0 * gap, 0.0) * ph * (1.0 - ph) / n) + 1e-12
            x = np.concatenate((ph + half, ph - half))
            x = np.where((x > below) & (x < above), x, (ph2 + edge) / 2.0)
            x = np.where(todo, x, ph2)
            # Newton's method on the signed root of the likelihood ratio, ``sqrt(2 (top
            # - ll(x)))`` against ``sqrt(2 gap)`` (nearly linear in ``x``: fewer steps
            # than on the log likelihood itself); each end stops when its own step is
            # within the tolerance (a zero step from then on), so its value depends on
            # its own inputs alone
            active = todo.copy()
            stalled = None
            trail = []          # (x at the start of each step)
            for it in range(_NEWTON_STEPS):
                if it in _CYCLE_CHECKS:
                    # an active end back where it stood 1 to 3 steps ago is in a cycle
                    # (a step is a function of its x alone), none of whose steps is
                    # within the tolerance: it would step to the last one; where the
                    # cycle stands then is its end, and it stops here
                    for p in (1, 2, 3):
                        back = it - p
                        rep = active & (x == trail[back])
                        if rep.any():
                            x = np.where(rep, trail[back + (_NEWTON_STEPS - back) % p], x)
                            active &= ~rep
                            stalled = rep if stalled is None else stalled | rep
                    if not active.any():
                        break
                trail.append(x)
                g = _loglik_raw(x, s2, f2, sp2, fp2)
                np.subtract(top2, g, out=g)
                np.maximum(g, 0.0, out=g)
                g *= 2.0
                root = np.sqrt(g, out=g)
                y = np.subtract(1.0, x)
                d = np.divide(s2, x)
                d -= np.divide(f2, y, out=y)
                step = np.subtract(ra, root)
                step *= root
                step /= d
                ok = np.isfinite(step)
                ok &= active
                step = np.where(ok, step, 0.0)
                # (a step out of the end's side, between the history's rate and the
                # edge, goes half way to where it left it instead)
                new = np.subtract(x, step)
                out = new <= below
                out |= new >= above
                if out.any():
                    # (the step of an end that went out is what it moved; the others
                    # keep their own Newton step, as each end alone would)
                    new = np.where(out, (x + np.where(new <= below, below, above)) / 2.0,
                                   new)
                    step = np.where(out, np.subtract(x, new), step)
                x = new
                np.subtract(1.0, x, out=y)
                np.minimum(x, y, out=y)
                y *= _NEWTON_TOL
                np.abs(step, out=step)
                active &= np.greater(step, y, out=ok)
                if not active.any():
                    break
            if stalled is not None:
                active |= stalled
            if active.any():
                # (an end whose last step was not within the tolerance: at a fixed
                # point below its float's spacing, or short of the crossing when the
                # steps ran out, the gap too wide for them: then the edge, a wider
                # interval, never a narrower one)
                g = _loglik_raw(x, s2, f2, sp2, fp2)
                inner = active & (g - K2 > 1e-9 * np.maximum(1.0, np.abs(K2)))
                x = np.where(inner, edge, x)
        hi = np.where(todo[:m], x[:m], hi)
        lo = np.where(todo[m:], x[m:], lo)
    lo = np.where(empty, 1.0, lo)
    hi = np.where(empty, 0.0, hi)
    return lo, hi


def _log_e_local(mix, s1, f1, s0, f0, K, lo, hi):
    """log of each candidate's second e-value (module docstring) but ``-log(1 + C)``:
    ``mix`` (log Q of the stretch after it) less the log of the best ``L_p(after) *
    min(1, L_p(history) / (C KT(history)))`` over ``p``; ``s1, f1`` after it, ``s0,
    f0`` before it, ``K = log KT(history) + log C``, ``[lo, hi]`` where the history's
    log likelihood reaches ``K``.

    The maximised function is concave in ``p`` (a log likelihood plus the minimum of
    0 and another), so its maximum is at the stretch's own rate when the history finds
    it plausible, else at the near end of the interval or, beyond it, at the rate of
    all the observations."""
    # the rate of the stretch and of both stretches pooled (an empty one reads 0: any
    # plausible rate is then a maximum); then the maximum: the stretch's rate clipped
    # into the interval widened to the pooled rate (no interval: the pooled rate)
    pa = s1 / np.maximum(s1 + f1, _TINY)
    p_all = np.add(s0, s1)
    p_all /= np.maximum(s0 + f0 + s1 + f1, _TINY)
    b = np.clip(pa, np.minimum(lo, p_all), np.maximum(hi, p_all))
    # (the rates clipped into the open interval: 0 log 0 reads 0, and a rate of 0 or 1
    # moves by less than 1e-16)
    np.clip(b, _TINY, _ONE, out=b)
    lb, l1b = np.log(b), np.log1p(-b)
    g = s0 * lb
    g += f0 * l1b
    g -= K
    np.minimum(g, 0.0, out=g)
    g += s1 * lb
    g += f1 * l1b
    return mix - g


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
    return _log_kt(s, n), a, c, [g[i] + g[k + i] - g[2 * k + i] for i in range(k)], n


#: the smallest batch of the batch means, in indicator observations (rounded up to
#: whole blocks); the batches double ``DEPENDENCE_LEVELS - 1`` times from there
DEPENDENCE_BATCH = 100
#: batch sizes of the batch means: DEPENDENCE_BATCH, twice that, ..., 32 times
#: (3 200 observations with the default block): autocorrelation that has died out
#: well within the largest batch is measured
DEPENDENCE_LEVELS = 6
#: successive differences a batch size needs before its estimate is used
DEPENDENCE_MIN_DIFFS = 30
#: the estimates enter as lower confidence bounds, this many standard errors below
#: the estimate, so that an independent stream keeps a factor of 1 (no loss of
#: power) on most streams
DEPENDENCE_Z = 2.5
#: a successive difference of batch means is clipped at this many times the mean of
#: the earlier ones (from the 10th on), so that the jump of a real change does not
#: pass for dependence
DEPENDENCE_CLIP = 9.0
#: the largest prior factor of the smallest batches' estimate: before they have data,
#: the stream is presumed as dependent as this (errors in bursts of mean run 50 events,
#: the hidden dependence the lag-1 autocorrelation understates, have factors of 2 to 3)
DEPENDENCE_PRIOR = 3.0
#: the mean run length, in events, of the bursts the prior presumes (prior_factor)
DEPENDENCE_RUN = 50
#: how many successive differences the prior weighs as: ``(DEPENDENCE_PRIOR_DIFFS x
#: prior + d x estimate) / (DEPENDENCE_PRIOR_DIFFS + d)`` after ``d`` differences (one per
#: 100 observations): the weight at which bench_alerts.py's streams of errors in bursts
#: (mean run 50) stay quiet while their factor is unknown
DEPENDENCE_PRIOR_DIFFS = 30
#: the smallest batches' estimate enters the average this many standard errors below
#: its point estimate (less than DEPENDENCE_Z: the prior already leans cautious), so
#: that the average reaches 1 on an independent stream
DEPENDENCE_PRIOR_Z = 1.0


def prior_factor(share):
    """The prior variance factor when a ``share`` of the events are observations: the
    factor of a two-state Markov chain whose runs average :data:`DEPENDENCE_RUN` events
    (lag-1 autocorrelation ``rho = 1 - 2 / DEPENDENCE_RUN`` per event) seen at a random
    ``share`` of the events (``r = share rho / (1 - (1 - share) rho)`` per observation:
    ``(1 + r) / (1 - r)``), at most :data:`DEPENDENCE_PRIOR`. Sparse observations (1%
    positives) see little of bursts that short, so their prior is near 1."""
    rho = 1.0 - 2.0 / DEPENDENCE_RUN
    r = share * rho / (1.0 - (1.0 - share) * rho)
    return min(DEPENDENCE_PRIOR, (1.0 + r) / (1.0 - r))


class _Dependence:
    """Online estimate of the long-run variance factor ``V`` of an indicator stream:
    ``Var(sum of n observations) ~ V n sigma^2`` for long stretches (``V = 1`` for
    independent observations, ``(1 + rho) / (1 - rho)`` for a Markov chain whose
    lag-1 autocorrelation is ``rho``).

    Three estimates, and the largest wins, at least 1:

    * the lag-1 autocorrelation ``rho`` of all observations so far, as
      ``(1 + rho) / (1 - rho)``: available after a few hundred observations, exact
      for Markov dependence;
    * batch means (the variance of means of batches of ``B`` observations times
      ``B / sigma^2``), for ``B`` = ``DEPENDENCE_BATCH`` x 1, 2, 4, ..., 32, each from
      the mean squared successive difference of its batch means (a level shift adds
      one difference, clipped), once it has ``DEPENDENCE_MIN_DIFFS`` differences:
      any dependence that dies out within a batch;
    * the smallest batches' estimate from their first difference on, at
      ``DEPENDENCE_PRIOR_Z`` standard errors below, averaged with the prior factor
      (:func:`prior_factor`, at most ``DEPENDENCE_PRIOR``) weighing as
      ``DEPENDENCE_PRIOR_DIFFS`` differences: cautious while the batch means are young.

    The first two enter as lower confidence bounds (``DEPENDENCE_Z`` standard errors).

    It counts every observation once (unweighted values; the restarts of the detector
    do not reset it: dependence is a property of the stream). Runtime complexity:
    `O(1)` per observation, `O(DEPENDENCE_LEVELS)` per block."""

    __slots__ = ("n", "s1", "s2", "s11", "last", "mark", "base", "levels")

    def __init__(self, block):
        #: observations, sum, sum of squares, sum of lag-1 products, last value
        self.n = 0
        self.s1 = self.s2 = self.s11 = 0.0
        self.last = None
        #: s1 at the last closed block
        self.mark = 0.0
        #: blocks per batch at the first level
        self.base = max(1, -(-DEPENDENCE_BATCH // block))
        #: per level: [sum of the open batch, its blocks, previous batch mean or None,
        #: sum of squared successive differences, their number]
        self.levels = [[0.0, 0, None, 0.0, 0] for _ in range(DEPENDENCE_LEVELS)]

    def add(self, x):
        x = float(x)
        self.n += 1
        self.s1 += x
        self.s2 += x * x
        if self.last is not None:
            self.s11 += x * self.last
        self.last = x

    def close_block(self, block):
        """A block of ``block`` observations ended (``s1`` is counted up to it)."""
        total, self.mark = self.s1 - self.mark, self.s1
        size = block * self.base
        carry = total
        for k, lev in enumerate(self.levels):
            lev[0] += carry
            lev[1] += 1
            if lev[1] < (self.base if k == 0 else 2):
                return
            # a batch of this level is complete: its mean, and the next level's input
            carry, lev[0], lev[1] = lev[0], 0.0, 0
            mean = carry / (size << k)
            if lev[2] is not None:
                d2 = (mean - lev[2]) ** 2
                if lev[4] >= 10:
                    d2 = min(d2, DEPENDENCE_CLIP * lev[3] / lev[4])
                lev[3] += d2
                lev[4] += 1
            lev[2] = mean

    def factor(self, block, share=1.0):
        """The variance factor ``V >= 1`` the evidence is deflated by; ``share``: the
        observations' share of the events (it sets the prior, :func:`prior_factor`)."""
        n = self.n
        if n < 3:
            return 1.0
        m = self.s1 / n
        var = self.s2 / n - m * m
        if not var > 1e-12:
            return 1.0
        out = 1.0
        rho = (self.s11 / (n - 1) - m * m) / var - DEPENDENCE_Z / math.sqrt(n)
        if rho > 0.0:
            rho = min(rho, 0.999)
            out = (1.0 + rho) / (1.0 - rho)
        size = block * self.base
        for k, lev in enumerate(self.levels):
            nd = lev[4]
            if k == 0 and DEPENDENCE_PRIOR_DIFFS:
                # the smallest batches from their first difference: nd times their
                # estimate (DEPENDENCE_PRIOR_Z standard errors below), averaged with the
                # prior factor weighing as DEPENDENCE_PRIOR_DIFFS differences
                v = size * lev[3] / (2.0 * var)
                if nd:
                    v *= max(0.0, 1.0 - DEPENDENCE_PRIOR_Z * math.sqrt(3.0 / nd))
                v += DEPENDENCE_PRIOR_DIFFS * prior_factor(share)
                v /= DEPENDENCE_PRIOR_DIFFS + nd
                if v > out:
                    out = v
            if nd >= DEPENDENCE_MIN_DIFFS:
                v = (size << k) * lev[3] / (2.0 * nd) / var
                v *= 1.0 - DEPENDENCE_Z * math.sqrt(3.0 / nd)
                if v > out:
                    out = v
        return out

    def to_list(self):
        return [self.n, self.s1, self.s2, self.s11, self.last, self.mark,
                [list(lev) for lev in self.levels]]

    def load(self, data):
        n, s1, s2, s11, last, mark, levels = data
        self.n, self.s1, self.s2, self.s11 = int(n), float(s1), float(s2), float(s11)
        self.last = None if last is None else float(last)
        self.mark = float(mark)
        if len(levels) != DEPENDENCE_LEVELS:
            raise ValueError(f"{len(levels)} batch-means levels, expected {DEPENDENCE_LEVELS}")
        self.levels = [[float(a), int(b), None if c is None else float(c), float(d), int(e)]
                       for a, b, c, d, e in levels]


def _save(d):
    """What a detector's update can change, copied (for :func:`update_until_change`)."""
    return (d.__dict__.copy(), d._cands.__getstate__(), d._dep.to_list(), list(d.changes),
            list(d._pending))


def _restore(d, saved):
    state, cands, dep, changes, pending = saved
    d.__dict__.update(state)
    d._cands.__setstate__(cands)
    d._dep.load(dep)
    d.changes, d._pending = changes, pending


def update_until_change(detectors, y, s, w=None, t=None):
    """Feed several detectors validated binary columns (as ``update_trusted``) up to
    and including the first event on which any of them detects a change; return
    ``(k, hit)``: the events each took (all of them when none detected one) and
    whether one did. Every detector ends exactly as if the columns had ended at event
    ``k``, so a caller can evaluate there and feed the rest later, with the same
    results however the events were batched (a change is detected at a check, at an
    exact observation count).

    Each detector is fed with ``stop`` up to the earliest stop so far; one that went
    past a later detector's earlier stop is restored from a copy made before and fed
    up to it. Runtime complexity: one ``update_trusted`` per detector, a copy of the
    state of each but the last (`O(candidates)`), and, when a change is detected, a
    second feed of those that passed it.

    >>> rng = np.random.default_rng(3)
    >>> hit = rng.random(6000) < np.r_[np.full(3000, 0.9), np.full(3000, 0.6)]
    >>> y, s = np.ones(6000, bool), np.where(hit, 0.9, 0.1)
    >>> a, b = SequentialDrift("recall"), SequentialDrift("accuracy")
    >>> k, found = update_until_change([a, b], y, s)
    >>> found, a.n == b.n == k, a.changes[-1].index == k - 1 or b.changes[-1].index == k - 1
    (True, True, True)
    """
    k = len(y)
    fed = []    # (detector, its copy or None, events it took)
    hit = False
    last = len(detectors) - 1
    for i, d in enumerate(detectors):
        saved = _save(d) if i < last else None
        pending, found = list(d._pending), len(d.changes)
        took = d.update_trusted(y[:k], s[:k], None if w is None else w[:k],
                                None if t is None else t[:k], stop=True)
        if took < k and d._pairs:  # (the pairs it made of the events it did not take)
            d._pending = pending
            d._pairs_of(y[:took], s[:took], None if w is None else w[:took])
        if len(d.changes) > found:
            k, hit = took, True
        fed.append((d, saved, took))
    if not hit:
        return k, False
    for d, saved, took in fed:
        if took > k:
            _restore(d, saved)
            d.update_trusted(y[:k], s[:k], None if w is None else w[:k],
                             None if t is None else t[:k])
    return k, True


class SequentialDrift(BinaryMetric):
    """Sequential change detection with a false-alarm guarantee over the whole stream.

    Watches recall, precision, accuracy, error rate, FPR, specificity (their per-event
    indicators) or AUC (disjoint positive/negative pairs) and detects a change of
    their rate in either direction. See the module docstring for the statistic and
    the guarantee: with independent events and a stationary stream before the
    change, ``P(a false alarm within the first horizon events) <= alpha`` (Shin,
    Ramdas & Rinaldo 2023, e-detectors; Ville's inequality). Dependent events (labels
    in bursts) are weighed by their estimated long-run variance factor (``n``
    observations count as ``n / V``), which keeps the guarantee approximately.

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
        Indicator observations between checks (default :data:`DEFAULT_BLOCK`).
    keep : int
        Candidates kept per doubling of age (counted in blocks).
    pos_label, neg_label
        Labels, as for every binary metric.
    every : int
        Blocks between candidate change points: :data:`DEFAULT_EVERY` with the
        default block (a check every 50 observations, a candidate every 100), 1 when
        ``block`` is given (a candidate at every check).
    """

    _public_name = "SequentialDrift"
    #: its update and update_trusted take the event time t= (see metrics.base.Capabilities)
    capabilities = Capabilities(takes_time=True, until_change=update_until_change,
                                report_many=report_many)
    _state_version = 1
    _K1 = len(CONCENTRATIONS) + 1   # the parts of Q's mixture
    # checks ahead in the current batch known far from the alarm level (_far_checks)
    _skip = 0
    # whether the check after those is known far too (the last of the batch's stretch:
    # it leaves its statistic waiting without computing its bound)
    _far = False

    def __init__(self, metric="recall", alpha=0.005, horizon=DEFAULT_HORIZON, threshold=0.5,
                 block=None, keep=DEFAULT_KEEP, pos_label=True, neg_label=None, every=None):
        super().__init__(pos_label, neg_label)
        self.metric = check_param("metric", metric, Options(*METRICS))
        self.alpha = check_level(alpha, "alpha")
        self.horizon = check_param("horizon", horizon, Integer(1))
        self.threshold = check_threshold(threshold)
        if every is None:
            every = DEFAULT_EVERY if block is None else 1
        self.block = check_param("block", DEFAULT_BLOCK if block is None else block, Integer(1))
        self.every = check_param("every", every, Integer(1))
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
        # the last check's inputs while its exact statistic waits to be read (None: none)
        self._lazy = None
        #: whether the last check's bound came within NEAR of the alarm level (then the
        #: blocks between candidates are checked too; before any check: yes)
        self._near = True
        #: the dependence of the observations (their long-run variance factor)
        self._dep = _Dependence(self.block)

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
        self._dep.add(x)
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

    def update_trusted(self, y, s, w=None, t=None, stop=False):
        """Add validated binary columns (bool labels, float64 scores, float64 weights
        or None; ``t`` float64 epoch seconds or None), unchecked. Returns ``self``;
        with ``stop``, the events taken: up to and including the first on which a
        change is detected (``len(y)`` when none is), the state as if the columns had
        ended there.

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
            if y.dtype == np.bool_:  # (the validated form)
                which, value = _SELECT[self.metric]
                keep = None if which is None else which(y, predicted)
                if w is not None:
                    keep = w > 0 if keep is None else keep & (w > 0)
                ev = np.arange(m) if keep is None else keep.nonzero()[0]
                xs = value(y, predicted)
                xs = (xs if keep is None else xs[ev]).astype(np.float64)
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
        block, every = self.block, self.every
        i, k = 0, len(ev)
        # the newest time after each event (read at each check and at the end)
        newest_at = None if t is None else _running_maxima(start, t)
        # the dependence sums after each observation, in the event loop's order
        dep = self._dep
        if k:
            dsum = np.empty((3, k + 1))
            dsum[:, 0] = (dep.s1, dep.s2, dep.s11)
            dsum[0, 1:] = xs
            np.multiply(xs, xs, out=dsum[1, 1:])
            dsum[2, 1] = 0.0 if dep.last is None else xs[0] * dep.last
            np.multiply(xs[1:], xs[:-1], out=dsum[2, 2:])
            np.cumsum(dsum, axis=1, out=dsum)
            dn0 = dep.n
        while i < k:
            W0, X0 = self._W, self._X
            # unit weights and whole (or half) sums far below 2^51, the usual case: every
            # running sum is then exact, so that a numpy sum of the observations in any
            # order equals the event loop's additions (no running sums to build)
            exact = (ws is None and self._Q == W0 and W0.is_integer()
                     and (2.0 * X0).is_integer() and W0 + k < 2.0 ** 51
                     and abs(X0) + k < 2.0 ** 51)
            if not exact:
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
            if exact:
                # the running sums of the observations ahead: exact, so X0 plus one of
                # them is the event loop's sum
                cx = np.cumsum(xs[i:])
                if not self._near and len(self._cands) and self._cands.unit:
                    # the checks of this stretch that are known far from the alarm
                    # level (their bounds are not computed: see _far_checks)
                    self._skip = self._far_checks(cx, ev[i:], first, base, W0, X0)
                    self._far = self._skip > 0
            for j in range(first, k - i, block):
                if not self._near and ((n0 + j + 1) // block) % every:
                    # between candidates, far from the alarm level: the block closes
                    # and nothing is checked (_boundary's first case), so only the
                    # dependence's sum is read here (the rest is set at the next check
                    # or at the end of the batch)
                    dep.s1 = float(dsum[0, i + j + 1])
                    dep.close_block(block)
                    self._between(self._cands, (n0 + j + 1) // block)
                    continue
                e = int(ev[i + j])
                if exact:
                    self._W = self._Q = W0 + (j + 1)
                    self._X = X0 + float(cx[j])
                else:
                    self._W, self._X, self._Q = float(cW[j]), float(cX[j]), float(cQ[j])
                self._n = n0 + j + 1
                self.n_indicator = ind0 + i + j + 1
                self.n = base + e + 1
                dep.n = dn0 + i + j + 1
                dep.s1, dep.s2, dep.s11 = dsum[:, i + j + 1].tolist()
                dep.last = float(xs[i + j])
                if t is not None:
                    newest = newest_at[e + 1]
                    if newest != -math.inf:
                        self._t = float(newest)
                found = len(self.changes)
                self._boundary()
                if len(self.changes) > found:   # restarted: the sums changed
                    if stop:  # (every count and sum above stands at event e)
                        self._skip = 0
                        self._far = False
                        return e + 1
                    i += j + 1
                    restarted = True
                    break
            self._skip = 0
            self._far = False
            if not restarted:
                if exact:
                    self._X = X0 + float(cx[-1])
                    self._W = self._Q = W0 + (k - i)
                else:
                    self._W, self._X, self._Q = float(cW[-1]), float(cX[-1]), float(cQ[-1])
                self._n = n0 + (k - i)
                i = k
        self.n = base + m
        self.n_indicator = ind0 + k
        if k:
            dep.n = dn0 + k
            dep.s1, dep.s2, dep.s11 = dsum[:, k].tolist()
            dep.last = float(xs[k - 1])
        if t is not None:
            newest = newest_at[m]
            if newest != -math.inf:
                self._t = float(newest)
        return m if stop else self

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
        again at the best one), then open a candidate here and thin the old ones.

        The check first bounds the statistic from above (:meth:`_bound`, a dozen numpy
        calls); while the bound stays below the alarm level by :data:`BOUND_MARGIN`,
        no alarm is possible and the exact statistic (``_stat``: the p-value and
        rates that :meth:`report` shows) is computed from a copy of what it reads
        only when something reads it. Otherwise it is computed now."""
        c = self._cands
        m = len(c)
        dep = self._dep
        dep.close_block(self.block)
        every = self.every
        if (self._n // self.block) % every and not self._near:
            # between candidates, far from the alarm level: no check
            self._between(c, self._n // self.block)
            return
        if m and self._skip:
            # a check known far from the alarm level (_far_checks): its bound would
            # leave _near False and its statistic waiting, and a later check of the
            # same batch replaces what it would leave to be read
            self._skip -= 1
        elif m:
            V = dep.factor(self.block, self._share())
            W, X, Q = self._W, self._X, self._Q
            n1, s1 = _after(c, W, X, Q)
            if self._far:
                # the last check of a stretch known far (_far_checks: its upper bound
                # covers this check's bound too): the decision its bound would make
                self._far = False
                bound = -math.inf
            else:
                bound = _bound(c, n1, s1, W, X, Q, V)
            self._near = bound >= self._log_alarm - NEAR
            if bound < self._log_alarm - BOUND_MARGIN:
                self._lazy = (c.frozen(), n1, s1, W, X, Q, V)
            else:
                total, best, stat = self._evaluate(c, n1, s1, W, X, Q, V)
                self._stat = stat
                p, before, after, n0, nb, _ = stat
                bw, bx, bq = c.f[best, :3].tolist()
                if total >= self._log_alarm:
                    self._drops += after < before
                    st = float(c.t[best])
                    self.changes.append(Change(
                        index=self.n - 1, t=self._t, start=int(c.e[best]),
                        direction="drop" if after < before else "rise",
                        before=before, after=after, p_value=p,
                        start_t=st if st == st else None, n_before=n0, n_after=nb))
                    bb = int(c.b[best])
                    c.take(np.arange(best + 1, len(c)))
                    c.rebase(bw, bx, bq, bb)
                    self._W -= bw
                    self._X -= bx
                    self._Q -= bq
                    self._n -= bb * self.block
                    if self._Q <= 0.0 or self._W <= 0.0:  # float residue of weighted sums
                        self._W = self._X = self._Q = 0.0
        # a new candidate: its share of the budget is the events since the previous one
        now = self._n // self.block
        if now % every:
            self._between(c, now)
            return
        c.add(now, self._W, self._X, self._Q,
              math.log((self.n - self._last_e) / self.horizon), self.n,
              math.nan if self._t is None else self._t)
        self._last_e = self.n
        self._thin(now)

    def _far_checks(self, cx, ev, first, base, W0, X0):
        """How many of the checks ahead in a batch can be skipped: all but the last
        (whose bound is then known far too: it leaves its statistic waiting without
        computing it), when there are :data:`_FAR_MIN` to :data:`_FAR_MAX` of them and
        an upper bound of every one of their bounds (:func:`_bound`) is :data:`NEAR`
        below the alarm level, else none. ``cx``, ``ev``: the running sums of the batch's
        observations ahead and their event indices, ``first``: the offset of the next
        block boundary among them, ``base``: events counted before the batch, ``W0``,
        ``X0``: the history's sums before them (unit weights, exact sums, no check near
        the alarm level, candidates open: the caller's conditions).

        With no alarm and every bound far, the checks between candidates stay
        unchecked and every check leaves its statistic waiting (replaced by the next
        check's), so only the last check of the batch needs to be made: the state is the
        one that checking each would leave. The upper bound of a check's bound: each
        candidate's term ``G / V + log_pi`` (``G`` the two-sample log likelihood
        ratio) is at most ``max(G, 0) + log_pi`` (``V >= 1``), and the log-sum-exp of
        these over the candidates bounds the check's; the candidates are those
        open before the batch and those the batch opens before the check (thinned
        ones included: a larger set, a larger maximum). One numpy pass over candidates
        times checks, instead of a dozen numpy calls per check."""
        block, every = self.block, self.every
        n0 = self._n
        checks = [j for j in range(first, len(cx), block) if not ((n0 + j + 1) // block) % every]
        q = len(checks)
        if not _FAR_MIN <= q <= _FAR_MAX:
            return 0
        c = self._cands
        m0 = len(c)
        # per check: its sums (exact: any order of addition gives them), the log of the
        # best likelihood of them all; per candidate the checks but the last open
        # (after it): its sums, share and history's best likelihood
        Wk = [W0 + (j + 1) for j in checks]
        Xk = [X0 + x for x in cx[checks].tolist()]
        lall = [_log_max(*_counts(w, x, w)) for w, x in zip(Wk, Xk)]
        new = []
        prev, horizon = self._last_e, self.horizon
        for w, x, e, lm in zip(Wk, Xk, ev[checks[:-1]].tolist(), lall):
            ne = base + e + 1
            new.append((w, x, math.log((ne - prev) / horizon), lm))  # (its history: all)
            prev = ne
        rows = np.concatenate((c.f[:, _FAR_COLUMNS], new))
        Wk, Xk = np.array(Wk)[:, None], np.array(Xk)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            n1 = Wk - rows[:, 0]
            s1 = np.maximum(Xk - rows[:, 1], 0.0)
            np.minimum(s1, n1, out=s1)
            g = _log_max_v(s1, n1 - s1, n1)
            g += rows[:, 3]
            g -= np.array(lall)[:, None]
            np.maximum(g, 0.0, out=g)
            g += rows[:, 2]
            # (row r is open at check j when r < m0 + j)
            # (the reductions by their ufuncs: what ``max`` and ``sum`` call)
            np.copyto(g[:, m0:], -math.inf, where=_FAR_MASKS[q])
            top = np.maximum.reduce(g, axis=1)
            g -= top[:, None]
            np.exp(g, out=g)
            top += np.log(np.add.reduce(g, axis=1))
        worst = float(np.maximum.reduce(top)) + max(0.0, LOG_C)
        if not worst + _FAR_SLACK < self._log_alarm - NEAR:  # (NaN: not far)
            return 0
        return q - 1

    def _between(self, c, now):
        """A block boundary between candidates: thin them (with candidates every 2^e
        blocks none can fail the thinning rule here: one of block b, a multiple of
        2^e, fails it when now - b = keep 2^j with b not a multiple of 2^j, so j > e,
        and then now would be a multiple of 2^e too)."""
        every = self.every
        if every & (every - 1):
            self._thin(now)
        elif c.thinned == now - 1:
            c.thinned = now

    def _evaluate(self, c, n1, s1, W, X, Q, V, hist=None):
        """The exact statistic at a check: ``(log of sum_j pi_j E_j, the best
        candidate's row, (p, before, after, n_before, n_after, log total))`` of the
        candidates ``c`` with ``n1``, ``s1`` after each (:func:`_after`), the sums
        ``W, X, Q`` of the history and the variance factor ``V``; ``hist``: the
        histories' deflated log KT and plausible rates ``(kt, lo, hi)`` when
        :func:`_settle` solved them already (``V > 1``)."""
        # (for speed, a few dozen numpy calls in all, each on every candidate at once;
        # every value is computed by the same IEEE operations, in the same order, as
        # the formulas in the comments)
        m = len(c)
        s_all, n_all = _counts(W, X, Q)
        f = c.f
        # successes and failures after each candidate
        sf = np.empty((m, 2))
        s1 = np.clip(s1, 0.0, n1, out=sf[:, 0])
        np.subtract(n1, s1, out=sf[:, 1])  # (f1)
        raw, n1d = sf, n1
        if V != 1.0:
            raw, n1d = sf.copy(), n1 / V
            # dependent observations: n of them carry the evidence of n / V
            # independent ones (every count deflated, the history's KT again)
            sf /= V
            s_all, n_all = s_all / V, n_all / V
            kt_h = self._log_kt_history(c, V) if hist is None else hist[0]
            lead = c.lead - c.pre + kt_h
        else:
            lead = c.lead
        # every lgamma of the check in one call, per candidate: KT's and each
        # prior's for the successes (s1 + 1/2, a + s1), the failures (f1 + 1/2,
        # c + f1) and the trials (n1 + 1, a + c + s1 + f1)
        arg = np.empty((m, 3, self._K1))
        np.add(c.base.reshape(m, 2, self._K1), sf[:, :, None], out=arg[:, :2])
        total_args = arg[:, 2, 1:]
        np.add(c.ac, sf[:, :1], out=total_args)
        total_args += sf[:, 1:]
        np.add(n1d, 1.0, out=arg[:, 2, 0])
        g = _lg(arg.reshape(-1)).reshape(m, 3, self._K1)
        # Q: the Beta-binomial likelihoods of what follows each candidate, under
        # the flat prior and the priors around its history's rate, mixed with
        # PRIOR_WEIGHTS; per candidate: KT's log likelihood g(s1 + 1/2) +
        # g(f1 + 1/2) - g(n1 + 1) - log pi, then each prior's g(a + s1) + g(c + f1)
        # - g(a + c + n1) - norm, each plus the log of its weight
        parts = np.add(g[:, 0], g[:, 1])
        parts -= g[:, 2]
        parts -= c.divide
        # (the reductions by their ufuncs: what ``max`` and ``sum`` call, one layer
        # of Python less on a few dozen numbers)
        top = np.maximum.reduce(parts, axis=1)
        parts -= top[:, None]
        np.exp(parts, out=parts)
        mix = np.log(np.add.reduce(parts, axis=1))
        mix += top            # (top + log(...))
        log_e = lead + mix  # (log_pi + log w + pre + mix - log max L)
        log_e -= _log_max(s_all, n_all)
        # the second e-value: the history as a set of plausible rates, not a
        # likelihood paid for; the two mixed half and half
        if V != 1.0:
            s0, n0 = _deflated_counts(c, V)
            K = kt_h + LOG_C
            lo, hi = _region(s0, n0, K) if hist is None else hist[1:]
        else:
            s0, n0, K, lo, hi = c.s0, c.n0, c.pre + LOG_C, c.lo, c.hi
        local = _log_e_local(mix, sf[:, 0], sf[:, 1], s0, n0 - s0, K, lo, hi)
        local += c.lead_s
        # (the weights: n / (n + HISTORY_SCALE) to the second for a history of n
        # observations, the rest to the first, in lead_s and lead)
        log_e = np.logaddexp(log_e, local)
        best = int(log_e.argmax())
        # the e-detector: the budget-weighted sum of the candidates' e-values
        top = float(log_e[best])
        log_e -= top
        np.exp(log_e, out=log_e)
        total = top + math.log(float(np.add.reduce(log_e)))
        bw, bx, bq = f[best, :3].tolist()
        s0, n0 = _counts(bw, bx, bq)
        before = s0 / n0
        sb, nb = float(raw[best, 0]), float(n1[best])
        after = sb / nb if nb > 0 else math.nan
        p = math.exp(-total) if total > 0.0 else 1.0
        return total, best, (p, before, after, n0, nb, total)

    @staticmethod
    def _log_kt_history(c, V):
        """log KT of each candidate's history with its counts divided by ``V``."""
        return _kt_of_lg(_lg(_kt_history_args(c, V)))

    def _thin(self, now):
        """Thin the candidates at block ``now``: ages [0, 2 keep) keep every block, then
        every 2nd over [2 keep, 4 keep), ...: ``keep`` candidates per doubling of age
        (a candidate of block ``b`` stays while ``b`` is a multiple of the largest power
        of two at most its age ``(now - b) // keep``, or its age is 0)."""
        c = self._cands
        if c.thinned == now - 1:
            # every candidate passed the rule one block ago, so only those whose age
            # has just reached a power of two 2^j, j >= 1 (their step doubled: now - b
            # = keep 2^j), can fail it now: b = now - keep 2^j fails iff now % 2^j != 0,
            # and it passed one block ago (age 2^j - 1, step 2^(j-1)) only if
            # now % 2^(j-1) == 0; both hold for one j alone, one more than the trailing
            # zero bits of now: one lookup instead of a dozen numpy calls over every
            # candidate
            if now > 0:
                b = now - (self.keep << (now & -now).bit_length())
                if b > 0:
                    blocks = c.blocks
                    r = bisect.bisect_left(blocks, b)
                    if r < len(blocks) and blocks[r] == b:
                        c.drop(r)
        else:
            b = c.b
            age = (now - b) // self.keep
            bits = np.frexp(age.astype(np.float64))[1]        # bit_length of each age
            step = np.left_shift(1, np.maximum(bits - 1, 0).astype(np.int64))
            kept = np.flatnonzero(b % step == 0)
            if len(kept) < len(c):
                c.take(kept)
        c.thinned = now

    @property
    def _stat(self):
        """The last check: ``(p, before, after, n_before, n_after, log e-value)`` (None
        before any); computed here if the check left it to be read."""
        if self._lazy is not None:
            snap, n1, s1, W, X, Q, V, *hist = self._lazy   # (hist: _settle's)
            self._lazy = None
            self._stat_v = self._evaluate(snap, n1, s1, W, X, Q, V,
                                          hist[0] if hist else None)[2]
        return self._stat_v

    @_stat.setter
    def _stat(self, value):
        self._lazy = None
        self._stat_v = value

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

    def _share(self):
        """The observations' share of the events (what the dependence prior reads)."""
        return self.n_indicator / self.n if self.n else 1.0

    def report(self):
        """The state of the detector as a dict (what rows, snapshots and rules read).

        ``p_value``: anytime-valid, at the last check (1 before any), ``min(1, 1 /
        e_value)`` where ``e_value`` is the alarm statistic ``sum_j pi_j E_j``; ``reference``,
        ``current``, ``delta`` (current - reference), ``n_reference``, ``n_current``:
        the rates and effective sizes before and after the best candidate at the last
        check; ``change``: the last detected change's direction or None;
        ``changes``, ``drops``, ``rises``: how many changes (of each direction);
        ``change_p_value``: the p-value at which the last change was detected (the
        evidence for the change found; None before any), ``last_change``: that change
        (:class:`Change` as a dict); ``alpha``, ``horizon``; ``n``, ``t``: events seen
        and the newest event time; ``variance_factor``: the long-run variance factor
        ``V >= 1`` the counts are divided by (1: independent observations; see the
        module docstring).

        ``p_value`` tests for a *new* change since the last one detected: the detector
        starts its history again at the change it found, so right after a detection
        ``p_value`` reads 1 and falls again only when a further change (a recovery, or
        a second drop) builds up evidence. The evidence for the change found, for as
        long as it is the last one, is ``change_p_value``.

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
                "change_p_value": None if last is None else last["p_value"],
                "drops": self._drops, "rises": len(self.changes) - self._drops,
                "alpha": self.alpha, "horizon": self.horizon, "ready": True,
                "variance_factor": self._dep.factor(self.block, self._share()),
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
                "every": self.every, "pos_label": self.pos_label, "neg_label": self.neg_label}

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
                "candidates": [[int(b), float(W), float(X), float(Q), float(lp), int(e),
                                _enc(float(tt))]
                               for b, W, X, Q, lp, e, tt in zip(c.b, c.W, c.X, c.Q, c.log_pi,
                                                               c.e, c.t)],
                "pending": [None if v is None else list(v) for v in self._pending],
                "stat": None if self._stat is None else [_enc(v) for v in self._stat],
                "changes": [ch.to_dict() for ch in self.changes],
                "dependence": self._dep.to_list(),
                "near": self._near,
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
            for b, W, X, Q, lp, e, *tt in d["candidates"]:   # (no time: an older state)
                c.add(int(b), float(W), float(X), float(Q), float(lp), int(e),
                      _dec(tt[0]) if tt else math.nan)
            obj._pending = [None if v is None else (float(v[0]), float(v[1]))
                            for v in d["pending"]]
            obj._stat = None if d["stat"] is None else tuple(_dec(v) for v in d["stat"])
            obj.changes = [Change(**ch) for ch in d["changes"]]
            obj._drops = sum(ch.direction == "drop" for ch in obj.changes)
            if "dependence" in d:   # (a state without it: no dependence measured yet)
                obj._dep.load(d["dependence"])
            obj._near = bool(d.get("near", True))   # (a state without it: check)
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

    # -- binary state: typed columns ----------------------------------------------
    #: flags (the first integer of a detector's columns) saying which optional value is
    #: absent: the newest time, the last check, each pending AUC event, the dependence's
    #: last observation; bit ``_NO_MEAN + k``: level k's previous batch mean
    _NO_T, _NO_STAT, _NO_NEG, _NO_POS, _NO_LAST, _NO_MEAN = 1, 2, 4, 8, 16, 5
    #: flag: the last cheap bound was far from the alarm level (``_near`` False)
    _FAR = 1 << 40

    @classmethod
    def columns_states(cls, detectors):
        """The binary states of ``detectors`` (a list), their numbers stored as two
        typed columns they share (float64 and int64, read-only: a checkpoint writer
        stores each once, as raw bytes rather than JSON text): per detector its
        ``params``, its ``changes`` (JSON, usually empty) and where its part of the
        columns starts. :func:`~streameval.metrics.arraystate.from_array_state` restores
        each exactly (:meth:`_set_array_data`), as :meth:`to_state` would.

        A detector's floats: the newest time, the history's sums ``W, X, Q``, the
        pending AUC events (score, weight; a negative then a positive), the dependence's
        ``s1, s2, s11, last, mark``, the last check, each dependence level's open sum,
        previous mean and squared differences, then per candidate ``W, X, Q, log_pi,
        t``. Its integers: the flags of absent values (and of a last bound far from the level), ``n, n_indicator``, the history's
        count, ``last_e``, the dependence's count, the candidates, the check's length
        and the levels, then each level's blocks and differences and each candidate's
        block and event count.

        Runtime complexity: `O(total candidates + detectors)`, a few numpy calls per
        detector."""
        fl, il, at = [], [], []
        nf = ni = 0
        for d in detectors:
            f, i = d._columns()
            at.append((nf, ni))
            fl.append(f)
            il.append(i)
            nf += len(f)
            ni += len(i)
        F = np.concatenate(fl) if fl else np.zeros(0)
        I = np.concatenate(il) if il else np.zeros(0, dtype=np.int64)
        F.flags.writeable = False
        I.flags.writeable = False
        return [{"type": cls._public_name, "version": cls._state_version, "params": d._params(),
                 "arrays": 1,
                 "data": {"columns": [F, I], "at": [f0, i0],
                          "changes": [ch.to_dict() for ch in d.changes]}}
                for d, (f0, i0) in zip(detectors, at)]

    def _columns(self):
        """This detector's part of :meth:`columns_states`' columns: ``(floats, ints)``."""
        c, dep, stat = self._cands, self._dep, self._stat
        m = len(c)
        neg, pos = self._pending
        levels = dep.levels
        flags = ((self._t is None) * self._NO_T | (stat is None) * self._NO_STAT
                 | (neg is None) * self._NO_NEG | (pos is None) * self._NO_POS
                 | (dep.last is None) * self._NO_LAST | (not self._near) * self._FAR)
        for k, lev in enumerate(levels):
            if lev[2] is None:
                flags |= 1 << (self._NO_MEAN + k)
        head = [math.nan if self._t is None else self._t, self._W, self._X, self._Q,
                *(neg or (0.0, 0.0)), *(pos or (0.0, 0.0)),
                dep.s1, dep.s2, dep.s11, 0.0 if dep.last is None else dep.last, dep.mark]
        if stat is not None:
            head.extend(stat)
        for lev in levels:
            head += [lev[0], 0.0 if lev[2] is None else lev[2], lev[3]]
        ints = [flags, self.n, self.n_indicator, self._n, self._last_e, dep.n, m,
                0 if stat is None else len(stat), len(levels)]
        for lev in levels:
            ints += [lev[1], lev[4]]
        f = np.empty(len(head) + 5 * m)
        f[:len(head)] = head
        i = np.empty(len(ints) + 2 * m, dtype=np.int64)
        i[:len(ints)] = ints
        if m:
            cf = c.f
            cand = f[len(head):].reshape(m, 5)
            cand[:, :4] = cf[:, :4]   # (W, X, Q, log_pi: the first columns)
            cand[:, 4] = c.t
            i[len(ints):].reshape(m, 2)[...] = c.i
        return f, i

    def _set_array_data(self, data):
        """Restore :meth:`columns_states`' ``data`` into this fresh detector, checked
        (``ValueError`` naming what is wrong): the same state as :meth:`_from_state` of
        the same values gives."""
        if set(data) != {"columns", "at", "changes"}:
            raise ValueError(f"SequentialDrift columns: keys {sorted(data)!r:.100}, "
                             "expected at, changes, columns")
        cols, at = data["columns"], data["at"]
        if not (isinstance(cols, list) and len(cols) == 2
                and isinstance(cols[0], np.ndarray) and cols[0].dtype == np.float64
                and cols[0].ndim == 1 and isinstance(cols[1], np.ndarray)
                and cols[1].dtype == np.int64 and cols[1].ndim == 1):
            raise ValueError("SequentialDrift columns: expected a float64 and an int64 "
                             "array (1-D)")
        F, I = cols
        if not (isinstance(at, list) and len(at) == 2 and all(type(v) is int for v in at)
                and 0 <= at[0] <= len(F) and 0 <= at[1] <= len(I)):
            raise ValueError(f"SequentialDrift columns: at = {at!r:.60} is not two offsets "
                             f"within the columns ({len(F)} floats, {len(I)} ints)")
        f0, i0 = at
        if i0 + 9 > len(I):
            raise ValueError(f"SequentialDrift columns: the ints at {i0} are cut short")
        flags, n, n_ind, hn, last_e, dep_n, m, ns, nl = I[i0:i0 + 9].tolist()
        if not (0 <= m and 0 <= ns <= 64 and nl == DEPENDENCE_LEVELS and 0 <= flags):
            raise ValueError(f"SequentialDrift columns: {m} candidates, a check of {ns} "
                             f"values and {nl} dependence levels (expected "
                             f"{DEPENDENCE_LEVELS}) at int {i0}")
        nhead = 13 + ns + 3 * nl
        if f0 + nhead + 5 * m > len(F) or i0 + 9 + 2 * nl + 2 * m > len(I):
            raise ValueError(f"SequentialDrift columns: {m} candidates at float {f0}, int "
                             f"{i0} run past the columns ({len(F)} floats, {len(I)} ints)")
        head = F[f0:f0 + nhead].tolist()
        lev_i = I[i0 + 9:i0 + 9 + 2 * nl].tolist()
        self.n, self.n_indicator, self._n, self._last_e = n, n_ind, hn, last_e
        self._t = None if flags & self._NO_T else head[0]
        self._near = not flags & self._FAR
        self._W, self._X, self._Q = head[1:4]
        self._pending = [None if flags & self._NO_NEG else (head[4], head[5]),
                         None if flags & self._NO_POS else (head[6], head[7])]
        s1, s2, s11, last, mark = head[8:13]
        self._stat = None if flags & self._NO_STAT else tuple(head[13:13 + ns])
        lv = head[13 + ns:]
        levels = [[lv[3 * k], lev_i[2 * k],
                   None if flags >> (self._NO_MEAN + k) & 1 else lv[3 * k + 1],
                   lv[3 * k + 2], lev_i[2 * k + 1]] for k in range(nl)]
        self._dep.load([dep_n, s1, s2, s11, None if flags & self._NO_LAST else last, mark,
                        levels])
        c = self._cands
        if m:
            cand = F[f0 + nhead:f0 + nhead + 5 * m].reshape(m, 5).tolist()
            ci = I[i0 + 9 + 2 * nl:i0 + 9 + 2 * nl + 2 * m].reshape(m, 2).tolist()
            for (W, X, Q, lp, tt), (b, e) in zip(cand, ci):
                c.add(b, W, X, Q, lp, e, tt)
        try:
            self.changes = [Change(**ch) for ch in data["changes"]]
        except TypeError as e:
            raise ValueError(f"SequentialDrift columns: bad changes ({e})") from None
        self._drops = sum(ch.direction == "drop" for ch in self.changes)
        try:
            self._check()
        except AssertionError as e:
            raise ValueError(f"SequentialDrift columns: inconsistent state ({e!s:.100})") from None


def _enc(v):
    return v if math.isfinite(v) else None


def _dec(v):
    return math.nan if v is None else float(v)

