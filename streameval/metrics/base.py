"""The metric protocol shared by every streameval metric.

Every metric has ``update``, ``revert``, ``update_many``, ``get``, ``merge`` (and,
where it has ``merge``, its inverse ``subtract``) and ``to_state``; :func:`from_state`
rebuilds any metric (or window) from its state.

Binary, multiclass and regression metrics subclass river's metric base classes, so
``river.evaluate.progressive_val_score`` and ``river.utils.Rolling`` accept them.

Validation is atomic: every check runs before any state changes, and a bad value
raises :class:`ValueError` naming the value (and its index, for batches).

Confidence intervals: :meth:`Metric.interval` (``interval(level=0.95) -> (low, high)``)
where :func:`has_interval` says so (proportions: Wilson score with continuity correction,
:func:`wilson_cc_interval`; ROCAUC and Gini: DeLong's variances moderated on the logit
scale, :func:`logit_interval`; windows over them), ``NotImplementedError`` elsewhere. A metric
summarises what its interval needs in level-independent *interval parts*, which
:func:`interval_of` turns into an interval at a critical value (:func:`critical_value`).

Shared batches: while a caller hands one batch of validated columns to several
metrics (a Monitor, inside :class:`shared_batch`), metrics that compute the same
thing from exactly those columns (a cumulative log loss and a window's) compute it
once (:func:`batch_memo`); a count window keeps that memo to revert the whole batch
with when it expires.

Declared capabilities: what windows, the Monitor, Spark and the exposition need from a
metric beyond the protocol (swapping an expiring event, deferred removal, event times,
range composition, a window's kind) is declared on it (:class:`Capabilities`, its
``capabilities`` attribute) and read through :func:`capabilities` and
:func:`needs_time`, never found by name, signature or class name; :func:`params_of`
and :func:`check_invariants` are the protocol's parameters and invariant check for
callers outside the metrics package.

Imports: numpy, river's metric base classes (through :mod:`streameval._river`, which
defers the SciPy submodules river imports and streameval never uses),
:mod:`streameval.validation` and :mod:`streameval._registry` (the ground floor);
never the package root, windows, drift or the Monitor.
"""

from __future__ import annotations

import contextvars
import copy
import inspect
import math
import numbers
import statistics
from typing import NamedTuple

import numpy as np

from streameval import _registry, _river
from streameval.validation import (
    REVERT_SLACK,
    ValidationError,
    as_binary_labels,
    as_float_array,
    as_weight_array,
    check_level,
    check_real,
    check_same_length,
    check_weight,
    fail,
    label_sets,
    overdrawn,
)

river_base = _river.metric_bases()

__all__ = [
    "check_unmerge_totals",
    "Metric",
    "BinaryMetric",
    "MultiClassMetric",
    "RegressionMetric",
    "from_state",
    "register",
    "SharedView",
    "check_weight",
    "check_real",
    "as_float_array",
    "as_weight_array",
    "as_binary_labels",
    "check_same_length",
    "label_sets",
    "check_bounds",
    "Cases",
    "ValidationError",
    "fail",
    "overdrawn",
    "REVERT_SLACK",
    "has_interval",
    "critical_value",
    "wilson_interval",
    "wilson_cc_interval",
    "logit_interval",
    "interval_of",
    "shared_batch",
    "open_memo",
    "batch_memo",
    "Capabilities",
    "NO_CAPABILITIES",
    "capabilities",
    "needs_time",
    "params_of",
    "check_invariants",
]

_Real = numbers.Real


# ----------------------------------------------------------------- shared batches

#: ``(y, s, w, {key: value})`` while a :class:`shared_batch` is open, else None
_BATCH = contextvars.ContextVar("streameval_shared_batch", default=None)
_MISSING = object()


class shared_batch:
    """A context in which metrics given exactly the column objects ``y``, ``s``, ``w``
    (the same objects, left unchanged while it is open) share what they compute from
    them (:func:`batch_memo`): a Monitor opens one around the trusted updates of a
    segment's metrics. Per thread (and task): a ``contextvars`` variable.

    ``memo`` (a dict, by default a new one; :attr:`memo`) holds what was computed. A
    count window keeps it with a batch's columns (copies: other objects, the same
    values) and opens it again around them when it reverts the whole batch: what its
    metric computed when the events came in, it needs again when they expire.

    Runtime complexity: `O(1)`.
    """

    __slots__ = ("_memo", "_token")

    def __init__(self, y, s, w, memo=None):
        self._memo = (y, s, w, {} if memo is None else memo)
        self._token = None

    @property
    def memo(self):
        """The dict of what was computed from the columns, by key."""
        return self._memo[3]

    def __enter__(self):
        self._token = _BATCH.set(self._memo)
        return self

    def __exit__(self, *exc):
        _BATCH.reset(self._token)


def open_memo(y, s, w):
    """The :attr:`shared_batch.memo` of the open shared batch if it is for these very
    column objects, else None. Runtime complexity: `O(1)`."""
    memo = _BATCH.get()
    if memo is None or memo[0] is not y or memo[1] is not s or memo[2] is not w:
        return None
    return memo[3]


def batch_memo(key, y, s, w, compute):
    """``compute()``: computed once per ``key`` for the columns of the open
    :class:`shared_batch` when ``y``, ``s`` and ``w`` are its very objects, else every
    time. ``key`` must name everything but the columns that the result depends on, and
    callers must not change the result. Runtime complexity: `O(1)` plus ``compute``.
    """
    memo = open_memo(y, s, w)
    if memo is None:
        return compute()
    found = memo.get(key, _MISSING)
    if found is _MISSING:
        found = memo[key] = compute()
    return found


def check_bounds(scores, bounds, name="y_pred", why=""):
    """Raise naming the first score outside the closed range ``bounds`` (``why``, if
    given, is added to the reason: which metric needs the range)."""
    lo, hi = bounds
    bad = ~((scores >= lo) & (scores <= hi))
    if bad.any():
        i = int(np.argmax(bad))
        what = "probability" if (lo, hi) == (0.0, 1.0) else "score"
        fail(name, float(scores[i]), f"{what} must be in [{lo:g}, {hi:g}]{why}", i)


# ------------------------------------------------------------ confidence intervals

_NORMAL = statistics.NormalDist()
_NAN2 = (math.nan, math.nan)


def critical_value(level):
    """The two-sided normal critical value ``z`` of a confidence level: ``level`` of a
    standard normal lies in ``[-z, z]``, ``z = NormalDist().inv_cdf(0.5 + level / 2)``
    (1.959963984540054 at 0.95). ``level`` must be a real number in ``(0, 1)``, else
    ``ValueError`` naming ``level`` and the value.

    Runtime complexity: `O(1)` (a float level checked once is read from a memo).

    >>> round(critical_value(0.95), 6), round(critical_value(0.9), 6)
    (1.959964, 1.644854)
    >>> critical_value(1.5)
    Traceback (most recent call last):
    ...
    streameval.validation.ValidationError: level = 1.5: must be a number in (0, 1)
    """
    if type(level) is float:
        z = _Z_MEMO.get(level)
        if z is not None:
            return z
    z = _critical_value(check_level(level))
    if type(level) is float:  # (a valid level: an invalid one raised)
        if len(_Z_MEMO) >= _Z_MEMO_SIZE:
            _Z_MEMO.clear()
        _Z_MEMO[level] = z
    return z


def _critical_value(level):
    """:func:`critical_value` of a checked level, computed."""
    p = 0.5 + level / 2.0
    if p < 1.0:
        return _NORMAL.inv_cdf(p)
    return -_NORMAL.inv_cdf((1.0 - level) / 2.0)  # level within 2**-53 of 1: the tail


#: critical values of float levels already checked (a Monitor's rows ask for the same
#: level, 0.95, several times per row; the check and ``inv_cdf`` cost more than the
#: interval): at most :data:`_Z_MEMO_SIZE` levels, then it starts again
_Z_MEMO_SIZE = 64
_Z_MEMO = {}


def wilson_interval(x, n, z):
    """Wilson score interval ``(low, high)`` of the proportion ``x / n`` (``x``
    successes in ``n > 0`` trials, weighted sums allowed) at critical value ``z``:
    ``center = (p + z^2 / (2n)) / (1 + z^2 / n)``, ``half = z / (1 + z^2 / n) *
    sqrt(p (1 - p) / n + z^2 / (4 n^2))``. Equal to statsmodels'
    ``proportion_confint(x, n, alpha, method="wilson")`` with ``z`` its critical value.
    The drift tests use it; the metrics' ``interval`` uses its continuity-corrected form
    (:func:`wilson_cc_interval`).

    Runtime complexity: `O(1)`.

    >>> low, high = wilson_interval(8, 10, 1.959963984540054)
    >>> round(low, 6), round(high, 6)
    (0.490162, 0.943318)
    """
    p = x / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denom
    half = z / denom * math.sqrt(max(p * (1.0 - p) / n + z2 / (4.0 * n * n), 0.0))
    return center - half, center + half


def wilson_cc_interval(x, n, z):
    """Wilson score interval with continuity correction ``(low, high)`` of the proportion
    ``x / n`` (``x`` successes in ``n > 0`` trials, weighted sums allowed) at critical
    value ``z``, inside ``[0, 1]``: the score test's interval with Yates' correction, the
    closed form of Newcombe (1998), "Two-sided confidence intervals for the single
    proportion: comparison of seven methods", Statistics in Medicine 17, method 4:
    ``low = (2np + z^2 - 1 - z sqrt(z^2 - 2 - 1/n + 4p(n(1 - p) + 1))) / (2(n + z^2))``,
    ``high = (2np + z^2 + 1 + z sqrt(z^2 + 2 - 1/n + 4p(n(1 - p) - 1))) / (2(n + z^2))``,
    ``low = 0`` when ``x <= 1/2`` and ``high = 1`` when ``n - x <= 1/2`` (there the
    corrected score statistic ``max(|x - n p| - 1/2, 0)`` is 0 at the end). Equal to SciPy's
    ``binomtest(x, n).proportion_ci(level, method="wilsoncc")``. Its coverage stays at
    or above the nominal level for every ``p`` at small ``n``, where the plain Wilson
    interval (:func:`wilson_interval`) dips to 0.89 at 95% (``n = 20``, ``p`` near
    0.97); it is wider by about ``1 / (2n)`` on each side.

    Runtime complexity: `O(1)`.

    >>> low, high = wilson_cc_interval(8, 10, 1.959963984540054)
    >>> round(low, 6), round(high, 6)
    (0.442181, 0.964573)
    """
    p = x / n
    z2 = z * z
    denom = 2.0 * (n + z2)
    if x <= 0.5:
        low = 0.0
    else:
        low = (2.0 * n * p + z2 - 1.0
               - z * math.sqrt(max(z2 - 2.0 - 1.0 / n + 4.0 * p * (n * (1.0 - p) + 1.0), 0.0)))
        low = max(0.0, low / denom)
    if n - x <= 0.5:
        high = 1.0
    else:
        high = (2.0 * n * p + z2 + 1.0
                + z * math.sqrt(max(z2 + 2.0 - 1.0 / n + 4.0 * p * (n * (1.0 - p) - 1.0), 0.0)))
        high = min(1.0, high / denom)
    return float(low), float(high)


def _t_critical(z, df):
    """The Student t critical value with ``df`` degrees of freedom at the two-sided level
    of the normal critical value ``z`` (SciPy's ``stdtrit``, imported on first use).

    Memoised (:data:`_T_MEMO_SIZE` pairs): a window's interval asks for the same few
    hundred ``df`` (its class counts) at every row, and one ``stdtrit`` costs more than
    the rest of the interval."""
    key = (z, df)
    t = _T_MEMO.get(key)
    if t is None:
        from scipy.special import stdtrit  # (a dependency of river; off the import path)

        if len(_T_MEMO) >= _T_MEMO_SIZE:
            _T_MEMO.clear()
        t = _T_MEMO[key] = float(-stdtrit(df, _NORMAL.cdf(-z)))
    return t


#: how many ``(z, df)`` pairs :func:`_t_critical` keeps (then it starts again: a few
#: hundred kilobytes at most)
_T_MEMO_SIZE = 4096
_T_MEMO = {}


def logit_interval(value, var, df, m, lo, hi, z):
    """The logit-scale confidence interval ``(low, high)`` of ``value``, a statistic in
    ``[lo, hi]`` with variance estimate ``var`` on ``df`` degrees of freedom, bounded by
    the largest variance such a statistic can have, at the two-sided level of the normal
    critical value ``z``. With ``u = (value - lo) / (hi - lo)``:

    * the logit interval: ``t`` Student's critical value on ``df`` degrees of freedom at
      that level, ``logit(u) +- t sqrt(var) / ((hi - lo) u (1 - u))`` (the delta method),
      mapped back: inside ``(lo, hi)``, longer on the side of the range's middle, where a
      proportion-like statistic near an end has its long tail;
    * intersected with the score interval of the largest variance ``u (1 - u) / m``:
      ``{u' : (u - u')^2 <= z^2 u' (1 - u') / m}``, the Wilson interval of ``u m`` out of
      ``m`` (:func:`wilson_interval`). For the AUC, ``m = min(P, N)`` and this is the
      variance bound of van Dantzig (1951) and Birnbaum and Klose (1957), which holds for
      every pair of score distributions. It keeps the interval finite where the logit's
      delta method fails: at an end of the range (``u`` within 1e-12 of 0 or 1, where
      the logit is infinite, it is the interval), and near one, where a variance that
      shrinks more slowly than ``(1 - u)^2`` makes the logit-scale width grow without
      bound.

    ``(nan, nan)`` when ``value`` or ``var`` is nan or ``m`` is not positive. A
    negative ``var`` (a sum of squares that rounding took just below zero, as the
    variance of an AUC that is 1 to the last bit) is taken as 0.

    Runtime complexity: `O(1)`.

    >>> z = 1.959963984540054
    >>> [round(v, 6) for v in logit_interval(0.9, 0.0025, 1e9, 10, 0.0, 1.0, z)]
    [0.751822, 0.963949]
    >>> [round(v, 6) for v in logit_interval(1.0, 0.0, 10, 10, 0.0, 1.0, z)]
    [0.722467, 1.0]
    """
    if not (value == value and var == var and df > 0.0 and m > 0.0):
        return _NAN2
    var = max(var, 0.0)
    width = hi - lo
    u = min(1.0, max(0.0, (value - lo) / width))
    low, high = wilson_interval(u * m, m, z)  # (the largest variance's score interval)
    if _END < u < 1.0 - _END:
        t = _t_critical(z, df)
        half = t * math.sqrt(var) / (width * u * (1.0 - u))
        center = math.log(u / (1.0 - u))
        low, high = max(low, _expit(center - half)), min(high, _expit(center + half))
    elif u > 0.5:
        high = 1.0
    else:
        low = 0.0
    return (float(max(lo, lo + width * low)), float(min(hi, lo + width * high)))


#: how close to an end of its range :func:`logit_interval` takes a statistic to be at
#: it: the rounding of a weighted ratio (the AUC's ``U / (P N)``)
_END = 1e-12


def _expit(v):
    """``1 / (1 + exp(-v))`` without overflow for any float ``v``."""
    if v >= 0.0:
        return 1.0 / (1.0 + math.exp(-v))
    e = math.exp(v)
    return e / (1.0 + e)


def _wilson_variances(xs, ns, z):
    """Per proportion ``xs / ns`` (numpy arrays, ``ns > 0``): the variance a Wilson
    interval implies, ``(half / z)^2``, its half-width over the critical value."""
    p = np.clip(xs / ns, 0.0, 1.0)
    z2 = z * z
    scale = 1.0 / (1.0 + z2 / ns)
    return scale * scale * (p * (1.0 - p) / ns + z2 / (4.0 * ns * ns))


def _clipped(center, half, lo, hi):
    low = min(hi, max(lo, center - half))
    high = max(lo, min(hi, center + half))
    return float(low), float(high)


def interval_of(parts, z):
    """The confidence interval ``(low, high)`` at critical value ``z`` (see
    :func:`critical_value`) of a metric's *interval parts*: the level-independent
    summary that its ``_interval_parts()`` returns, a JSON-ready list (a tumbling
    window keeps the last closed window's, and saves it in its state):

    * ``None``: undefined, ``(nan, nan)``;
    * ``["wilson", x, n]``: the Wilson score interval with continuity correction of
      ``x / n`` (:func:`wilson_cc_interval`);
    * ``["wilson_mean", value, a, x, n]``: ``value = sum_c a_c x_c / n_c``, a weighted
      mean of proportions; a normal interval whose variance is
      ``sum_c a_c^2 v_c``, ``v_c`` the variance each class's Wilson interval implies
      (``(half_c / z)^2``), the proportions taken as independent; clipped to [0, 1];
    * ``["normal", value, variance, lo, hi]``: ``value +- z sqrt(variance)`` clipped to
      ``[lo, hi]`` (read from saved tumbling-window states that hold it);
    * ``["logit", value, variance, df, m, lo, hi]``: the logit-scale interval of a
      statistic in ``[lo, hi]`` with a Student t critical value on ``df`` degrees of
      freedom, and at an end of the range the Clopper-Pearson interval of ``m`` out of
      ``m`` (:func:`logit_interval`; the AUC: ``[0, 1]``; Gini: ``[-1, 1]``).

    Runtime complexity: `O(1)` (`O(k)` for a mean of ``k`` proportions).

    >>> interval_of(["normal", 0.9, 0.0025, 0.0, 1.0], 2.0)
    (0.8, 1.0)
    >>> interval_of(None, 2.0)
    (nan, nan)
    """
    if parts is None:
        return _NAN2
    kind = parts[0]
    if kind == "wilson":
        _, x, n = parts
        if not n > 0.0:
            return _NAN2
        return wilson_cc_interval(x, n, z)
    if kind == "logit":
        _, value, var, df, m, lo, hi = parts
        return logit_interval(value, var, df, m, lo, hi, z)
    if kind == "normal":
        _, value, var, lo, hi = parts
        if not (value == value and var >= 0.0):
            return _NAN2
        return _clipped(value, z * math.sqrt(var), lo, hi)
    if kind == "wilson_mean":
        _, value, a, xs, ns = parts
        a, ns = np.asarray(a, dtype=np.float64), np.asarray(ns, dtype=np.float64)
        if not (value == value and len(ns) and (ns > 0.0).all()):
            return _NAN2
        var = float(np.sum(a * a * _wilson_variances(np.asarray(xs, dtype=np.float64), ns, z)))
        return _clipped(value, z * math.sqrt(var), 0.0, 1.0)
    raise ValueError(f"unknown interval parts {parts!r:.100}")


def interval_parts(data):
    """Interval parts (see :func:`interval_of`) read back from JSON, checked; ``None``
    stays None. ``ValueError`` for anything else."""
    if data is None:
        return None
    try:
        kind = data[0]
        if kind == "wilson" and len(data) == 3:
            parts = [kind, float(data[1]), float(data[2])]
        elif (kind == "normal" and len(data) == 5) or (kind == "logit" and len(data) == 7):
            parts = [kind] + [float(v) for v in data[1:]]
        elif kind == "wilson_mean" and len(data) == 5:
            cols = [[float(v) for v in col] for col in data[2:]]
            if len({len(c) for c in cols}) != 1:
                raise ValueError("columns of different lengths")
            parts = [kind, float(data[1])] + cols
        else:
            raise ValueError("unknown kind")
    except (TypeError, ValueError, IndexError, KeyError) as e:
        raise ValueError(f"bad interval parts {data!r:.100} ({e})") from None
    return parts


#: which metrics have ``interval(level)`` (the message of those that have none)
INTERVAL_METRICS = (
    "the proportions Accuracy, ErrorRate, Precision, Recall, FPR and Specificity "
    "(Wilson score), ROCAUC and Gini (DeLong, logit scale), and Sliding or Tumbling "
    "windows over them"
)


def check_unmerge_totals(mine, other, name):
    """Refuse (``ValueError``, before any change) a ``subtract`` of ``other`` holding
    more events (``_n``) or more weight (``_w``, beyond rounding:
    :func:`~streameval.validation.overdrawn`) than ``mine``: it was never merged here.
    ``name`` names ``other`` in the message."""
    if other._n > mine._n:
        raise ValueError(f"subtract: {mine._n} events here but {other._n} in {name}: "
                         "they were never merged")
    if other._n and overdrawn(mine._w - other._w, other._w, mine._w):
        raise ValueError(f"subtract: weight {mine._w!r} here but {other._w!r} in "
                         f"{name}: it was never merged")


def has_interval(obj):
    """Whether ``obj`` (a metric, window or shared view) has a confidence interval:
    ``obj.interval(level)`` returns one rather than raising ``NotImplementedError``.

    True for the proportions (``Accuracy``, ``ErrorRate``, ``Precision``, ``Recall``,
    ``FPR``, ``Specificity``: Wilson score), ``ROCAUC`` and ``Gini`` (DeLong, logit scale), a
    :class:`~streameval.Sliding` or :class:`~streameval.Tumbling` window over one of
    these, and a Monitor's :class:`~streameval.metrics.ranking.OrderView` of a ROCAUC;
    False for everything else (objects outside streameval included).

    Runtime complexity: `O(1)`.

    >>> import streameval as se
    >>> has_interval(se.Recall()), has_interval(se.F1())
    (True, False)
    >>> has_interval(se.Sliding(se.ROCAUC(), size=100)), has_interval(se.Tumbling(se.MAE(), size=10))
    (True, False)
    """
    try:
        return bool(getattr(obj, "_has_interval", False))
    except Exception:  # an object whose attribute lookup fails has no interval
        return False


# ------------------------------------------------------------ declared capabilities


class Capabilities(NamedTuple):
    """What a metric or window offers beyond the protocol, declared on it.

    Windows, the Monitor, Spark and the Prometheus exposition need more from some
    metrics than the protocol table: a faster way to expire an event, whether to pass
    event times, how a value composes over score ranges, what to call a window. A
    metric says so in its :attr:`Metric.capabilities` (a class attribute, or a property
    where the answer depends on its parameters or binds its methods), and they read it
    through :func:`capabilities` (or :func:`needs_time`), once, when they bind the
    metric: never by a private method's name, a signature or a class name. The default,
    :data:`NO_CAPABILITIES`, declares nothing: the protocol alone, always correct, at
    its own cost. A metric may declare a fast path only where it gives the same bits as
    the protocol calls it replaces (``tests/test_capabilities.py`` checks every
    declaration of every registered metric against them).

    Fast paths of a count window (bound methods, or None):

    ``swap(y_true, y_pred, w, y_old, s_old, w_old)``
        ``update(y_true, y_pred, w)`` then ``revert(y_old, s_old, w_old)`` in one call:
        the same checks, the same bits. The old event must be one the metric holds (a
        full window's oldest); if it is not, ``ValueError`` and nothing changed. Cost:
        the two calls' work with one layer of calls less per event (exact ROC AUC and
        AP: two `O(log(n))` bisections).
    ``revert_joined(slices) -> bool``
        Revert several expired chunk slices (validated columns ``(y, s, w)``, oldest
        first) in one call and return True where that leaves exactly the bits of
        reverting them one after another; otherwise change nothing and return False
        (the window then reverts them one by one). Cost: one revert of the joined
        slices (exact ROC AUC and AP with weights of 1: one rebuild of the order,
        `O(n + m)`, instead of one per slice).
    ``revert_later(slices) -> bool``
        Take over the removal of a window's expired slices (its own events: not
        checked) and defer it to the metric's next read, returning True, where that
        gives the bits of reverting them now; otherwise change nothing and return
        False. Cost: `O(k)` for ``k`` slices now; the removal is paid at the next read
        together with the batches deferred since (one rebuild per read, not per batch).
    ``rebuild_fraction``
        The fraction of a window one batch may expire above which the window rebuilds
        the metric from the events left instead of reverting the expired ones (the
        crossover ``benchmarks/bench_windows.py`` finds for this metric); None: the window's rule
        (:data:`streameval.windows.REBUILD_FRACTION` without a vectorised revert, else
        never).

    For the Monitor, replay and Spark replay:

    ``takes_time``
        ``update`` and ``update_trusted`` take the event time as the keyword ``t=``,
        which callers must then pass (windows: time windows place events by it, count
        and tumbling windows accept it; drift detectors). Read it with
        :func:`needs_time`.

    ``until_change``
        For a change detector that alarm rules read: a function
        ``until_change(detectors, y, s, w, t) -> (k, hit)`` that feeds several such
        detectors (of the declaring class) validated columns up to and including the
        first event on which one of them detects a change, leaving each as if the
        columns had ended there: ``k`` the events taken, ``hit`` whether a change was
        detected. The Monitor evaluates the rules at that event
        (:func:`streameval.sequential.update_until_change`).
    ``report_many``
        For a drift test: a function ``report_many(tests) -> [report]`` giving each
        test's ``report()`` (of the declaring class), computed together where that
        is cheaper; the same reports as calling each
        (:func:`streameval.sequential.report_many`).

    For Spark (:func:`streameval.spark.evaluate`):

    ``ranges``
        A :class:`~streameval.metrics.ranges.RangeComposition`: the exact value
        composes from a few totals per disjoint score range (exact ROC AUC, Gini,
        average precision, ROC and PR curves), so per-score state is never collected;
        None: the metric is merged by its state.
    ``per_score``
        For a metric whose state grows with the distinct scores and that does not
        compose over score ranges: the rest of Spark's refusal after "would ship one
        entry per distinct score to the driver " (why not, and what to use instead);
        None otherwise.
    ``error_bound``
        ``get()`` may differ from the exact value by at most ``error_bound()``, a
        guaranteed bound (binned score orders): reported beside the value.

    For the Prometheus exposition (:mod:`streameval.service.exposition`):

    ``window_kind``
        ``"sliding"`` or ``"tumbling"`` for a window (its ``size`` or ``period``
        completes the label: ``sliding_size_10000``), None for a cumulative metric.

    >>> import streameval as se
    >>> capabilities(se.ROCAUC()).swap is not None, capabilities(se.Recall()).swap
    (True, None)
    >>> needs_time(se.Sliding(se.Recall(), period=60)), needs_time(se.Recall())
    (True, False)
    """

    swap: object = None
    revert_joined: object = None
    revert_later: object = None
    rebuild_fraction: float | None = None
    takes_time: bool = False
    ranges: object = None
    per_score: str | None = None
    error_bound: bool = False
    window_kind: str | None = None
    until_change: object = None
    report_many: object = None


#: What a metric declares by default (:attr:`Metric.capabilities`): nothing beyond the
#: protocol.
NO_CAPABILITIES = Capabilities()


def capabilities(obj):
    """The :class:`Capabilities` that ``obj`` (a metric, window, drift detector or
    shared view) declares in its ``capabilities`` attribute.

    An object that declares none (a user's own metric, a river metric) has no fast
    paths, no range composition, no window kind, and takes the event time ``t=``
    exactly when its ``update`` has a parameter named ``t``: the one place a signature
    is read, and only for such objects (a river metric's ``update`` has none). Give it a
    ``capabilities = Capabilities(...)`` attribute to declare otherwise.

    Runtime complexity: `O(1)` (the signature of a foreign ``update``: once per call;
    callers read this when they bind a metric, never per event).

    >>> import streameval as se
    >>> capabilities(se.Tumbling(se.MAE(), size=10)).window_kind
    'tumbling'
    >>> class Mine:
    ...     def update(self, y_true, y_pred, w=1.0, t=None): ...
    >>> capabilities(Mine()) == Capabilities(takes_time=True)
    True
    """
    try:
        declared = obj.capabilities
    except Exception:  # an object whose attribute lookup fails declares nothing
        declared = None
    if isinstance(declared, Capabilities):
        return declared
    return _FOREIGN_TIMED if _update_takes_t(obj) else NO_CAPABILITIES


#: what an object that declares nothing but whose ``update`` takes ``t`` is read as
_FOREIGN_TIMED = Capabilities(takes_time=True)


def _update_takes_t(obj):
    """Whether an object that declares nothing has an ``update`` taking ``t``."""
    update = getattr(obj, "update", None)
    if update is None:
        return False
    try:
        return "t" in inspect.signature(update).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False


def needs_time(obj):
    """Whether ``obj``'s ``update`` and ``update_trusted`` take the event time ``t=``
    (``capabilities(obj).takes_time``): True for windows (``Sliding``, ``Tumbling``,
    count windows included: they accept it) and drift detectors, False for metrics and
    shared views; for an object that declares nothing, whether its ``update`` has a
    parameter ``t`` (see :func:`capabilities`).

    Runtime complexity: `O(1)`; read it once per object, when binding its methods.

    >>> import streameval as se
    >>> needs_time(se.Sliding(se.ROCAUC(), size=100)), needs_time(se.ROCAUC())
    (True, False)
    """
    return capabilities(obj).takes_time


def params_of(obj):
    """The parameters that decide whether two metrics may be merged: a streameval
    metric's or window's (its state's ``params``), a river metric's
    (``river.base.Base``'s), None for any other object. Runtime complexity: `O(1)`
    per parameter."""
    if isinstance(obj, Metric):
        return obj._params()
    if isinstance(obj, _river_bases()):
        return obj._get_params()
    return None


def _river_bases():
    import river.base  # (river is imported already: the metric bases come from it)

    return river.base.Base


def check_invariants(obj):
    """Assert a streameval metric's or window's internal invariants (its ``_check``;
    tests call this after every operation); nothing for other objects."""
    if isinstance(obj, Metric):
        obj._check()


# --------------------------------------------------------------------------- protocol


class SharedView:
    """A read-only metric that reads the state another one keeps (a Monitor's shared
    score order or confusion matrix): the plumbing of
    :class:`~streameval.metrics.ranking.OrderView` and
    :class:`~streameval.metrics.confusion.CountsView`.

    ``template`` is an empty metric (or a window over one) of the view's kind,
    ``owner`` an object of the same structure, fed the same events, whose metric has
    the same ``key_of`` key; ``inner`` maps such an object to its metric (the object
    itself, or a window's current ``metric``). A subclass sets ``key_of`` (a static
    function), ``what``, ``mismatch`` and ``refusal`` (messages) and ``_linked()``
    (an object whose ``get``/``interval`` read the owner's current state). Nothing
    updates a view: ``update``, ``update_many``, ``update_trusted``, ``revert``,
    ``merge`` and ``subtract`` raise ``TypeError`` (the owner is updated instead);
    other attributes are the owner's; ``clone()`` is a fresh, unshared copy of the
    template.
    """

    key_of = staticmethod(lambda metric: None)
    what = "state"  # in repr: "OrderView(ROCAUC of the order of ...)"
    mismatch = "a view reads a metric of the same key"  # the ValueError of __init__
    refusal = "a shared view is read-only: its owner is updated"  # the TypeError

    def __init__(self, template, owner, inner=lambda obj: obj):
        self.template = template
        self.owner = owner
        self._inner = inner
        self._metric = inner(template)
        key = self.key_of(self._metric)
        if key is None or key != self.key_of(inner(owner)):
            raise ValueError(self.mismatch)

    def _linked(self):
        raise NotImplementedError

    @property
    def capabilities(self):
        """A view declares no fast path and takes no event time (nothing updates it);
        its window kind is its template's (see :class:`Capabilities`)."""
        kind = capabilities(self.template).window_kind
        return NO_CAPABILITIES if kind is None else Capabilities(window_kind=kind)

    def get(self):
        return self._linked().get()

    def interval(self, level=0.95):
        """The template kind's ``interval(level)`` on the owner's state (the proportions
        on a matrix: Wilson; ROCAUC and Gini on an order: logit-scale DeLong, cached until the order
        changes); ``NotImplementedError`` for a kind without one (see
        :func:`has_interval`)."""
        return self._linked().interval(level)

    def _interval_parts(self):
        return self._linked()._interval_parts()

    def _window_state(self, mine):
        """``to_state()`` from the view's metric state ``mine``: itself for a metric, the
        owner window's state (its events) with ``mine`` as its metric for a window."""
        if self.owner is self._inner(self.owner):
            return mine
        state = self.owner.to_state()
        state["data"] = dict(state["data"], metric=mine)
        return state

    def clone(self, *args, **kwargs):
        """A fresh, unshared metric like the template (not a view)."""
        return self.template.clone(*args, **kwargs)

    def __len__(self):
        return len(self.owner)

    def _read_only(self, *args, **kwargs):
        raise TypeError(self.refusal)

    update = update_many = update_trusted = revert = revert_many = revert_trusted = \
        merge = subtract = _read_only

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.owner, name)

    def __repr__(self):
        return (f"{type(self).__name__}({type(self._metric).__name__} of the {self.what} "
                f"of {self.owner!r})")


def register(cls):
    """Register ``cls`` under its public name so :func:`from_state` can rebuild it
    (the name must be an entry of :mod:`streameval._registry`)."""
    _registry.add_class(cls, cls._public_name)
    return cls


class Metric:
    """The streameval protocol, mixed into every metric and window.

    Subclasses implement ``update``, ``revert``, ``get``, and for state and merging
    ``_get_data()``, ``_set_data(data)``, ``_merge(other)`` and ``_subtract(other)``.
    Constructor parameters must be stored as attributes of the same name (as river's
    ``Base`` expects); they form the ``params`` of the state and decide which metrics
    may be merged (and subtracted).
    """

    #: version of the state layout; bump when ``_get_data`` changes shape
    _state_version = 1
    #: constructor parameters left out of the state (e.g. a shared confusion matrix)
    _state_exclude: tuple = ("cm",)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_public_name" not in cls.__dict__:
            cls._public_name = cls.__name__
        if not cls.__name__.startswith("_") and not cls.__dict__.get("_abstract", False):
            register(cls)

    # -- the trusted path ---------------------------------------------------------
    #: The form of the validated columns that :meth:`update_trusted` takes:
    #: ``"binary"`` (``y``: bool "is positive" array, ``s``: float64 finite scores,
    #: ``w``: float64 weights >= 0 or None), ``"regression"`` (float64 targets,
    #: float64 predictions, weights) or None (the metric's own form, whatever its
    #: :meth:`validate` returns). A Monitor validates a batch once into the binary form
    #: and hands it to every metric whose ``columns == "binary"``.
    columns = None
    #: For ``columns == "binary"``: the closed range scores must lie in, or None
    #: (log loss and Brier take probabilities: ``(0.0, 1.0)``). :meth:`validate`
    #: checks it; a Monitor checks the narrowest range of its metrics once.
    score_bounds = None
    #: What this metric offers beyond the protocol (fast paths for windows, event
    #: times, range composition for Spark, a window's kind for the exposition): see
    #: :class:`Capabilities`; read it through :func:`capabilities`. Nothing by default.
    capabilities = NO_CAPABILITIES

    def validate(self, y_true, y_pred, w=None):
        """Check a batch without changing anything; return its validated columns.

        A bad element raises :class:`~streameval.validation.ValidationError` naming it
        and its ``index``. The columns go to :meth:`update_trusted` or
        :meth:`revert_trusted` (of this metric or any with the same ``columns``).
        This default runs the batch through a fresh copy (for metrics without a
        vectorised check) and returns the batch as lists.

        Runtime complexity: `O(m)` for a batch of `m`.
        """
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        probe = self.clone()
        for i in range(n):
            try:
                probe.update(y_true[i], y_pred[i], 1.0 if w is None else w[i])
            except ValueError as e:
                raise ValidationError.at(i, str(e)) from None
        return (list(y_true), list(y_pred), None if w is None else list(w))

    def check_columns(self, y, s, w=None):
        """Refuse, changing nothing, columns validated by another ``validate`` of the
        same ``columns`` form (a Monitor's, once for all its metrics) that this
        metric's :meth:`update_trusted` would still refuse: a ``ValidationError``
        naming the first such event and its ``index``. A caller feeding one batch
        to several metrics calls it on each first, so that none is half-applied.
        Nothing to refuse by default (the weighted mean losses refuse an overflow).

        Runtime complexity: `O(m)` at most."""

    def update_trusted(self, y, s, w=None):
        """Add a batch of columns from :meth:`validate`, unchecked: the fast path for
        callers that validated once for many metrics (Monitor, windows, drift tests).
        Same result as :meth:`update_many`. Returns ``self``."""
        for i in range(len(y)):
            self.update(y[i], s[i], 1.0 if w is None else w[i])
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove a batch of validated columns added earlier; same result as
        :meth:`revert_many`. An event that was never added is still refused (a
        ``ValidationError`` with its ``index``), and nothing is removed then.

        This default loops over ``revert`` and, if an event is refused, puts the
        events already removed back before raising. Families override it with a
        vectorised version."""
        done = 0
        try:
            for i in range(len(y)):
                self.revert(y[i], s[i], 1.0 if w is None else w[i])
                done = i + 1
        except ValueError as e:
            for j in range(done):
                self.update(y[j], s[j], 1.0 if w is None else w[j])
            raise ValidationError.at(done, str(e)) from None
        return self

    # -- protocol ---------------------------------------------------------------
    def update_many(self, y_true, y_pred, w=None):
        """Add a batch; same result as a loop of ``update``. Validated before any
        change (:meth:`validate`), then added by :meth:`update_trusted`."""
        self.update_trusted(*self.validate(y_true, y_pred, w))
        return self

    def revert_many(self, y_true, y_pred, w=None):
        """Remove a batch added earlier; same result as a loop of ``revert``.

        Validated first (:meth:`validate`), then removed by :meth:`revert_trusted`,
        which refuses (atomically, naming the index) an event never added.
        """
        self.revert_trusted(*self.validate(y_true, y_pred, w))
        return self

    def merge(self, other):
        """Fold in the state of ``other`` (same type and parameters); return ``self``."""
        self._check_same_kind(other, "merge", "into")
        self._merge(other)
        return self

    def _check_same_kind(self, other, verb, prep, what="metrics"):
        """Refuse (``ValueError``) to ``verb`` a metric of another type or other
        parameters ``prep`` this one (``merge ... into``, ``subtract ... from``);
        ``what`` names them in the message (``"drift tests"``...)."""
        if type(other) is not type(self):
            raise ValueError(
                f"cannot {verb} a {type(other).__name__} {prep} a {type(self).__name__}"
            )
        mine, theirs = self._params(), other._params()
        if mine != theirs:
            raise ValueError(
                f"cannot {verb} {what} with different parameters: {theirs} {prep} {mine}")

    def subtract(self, other):
        """Take out the state of ``other``, merged here earlier; return ``self``.

        The exact inverse of :meth:`merge`: after ``a.merge(b).subtract(b)``, ``a``
        holds what it held before, and if ``a`` is the merge of ``b`` and ``c``,
        ``a.subtract(b)`` holds the state of ``c``, with the exactness of ``revert``
        (integer weights: exactly; float weights: the rounding ``revert`` leaves, and
        a cell, score or sum left without events is exactly 0, as ``revert`` resets
        it). A sliding window over per-bucket states is ``window.merge(new_bucket)``
        then ``window.subtract(old_bucket)``.

        Refused with a ``ValueError``, changing nothing (everything is checked before
        anything is taken out): a metric of another type or other parameters (as
        :meth:`merge` refuses them), and an ``other`` that holds what this metric does
        not, so it was never merged here (a confusion cell with more events, a score
        with more events or weight, more events or weight in all, a class unknown
        here, ...); the message says what is missing. Metrics without it (windows,
        drift tests) raise ``NotImplementedError``.

        Runtime complexity: the size of ``other``'s state (confusion and mean
        metrics: `O(1)`; score orders: a removal of its distinct scores, see
        :meth:`streameval.metrics.scoreorder.ScoreOrder.remove_entries`).

        >>> import streameval as se
        >>> a = se.Accuracy().update_many([1, 0, 1], [0.9, 0.2, 0.3])
        >>> b = se.Accuracy().update_many([0, 0], [0.8, 0.1])
        >>> a.merge(b).get()
        0.6
        >>> a.subtract(b).get()
        0.6666666666666666
        >>> a.subtract(b)
        Traceback (most recent call last):
        ...
        ValueError: subtract: the fp cell holds 0 events here but 1 in the other Accuracy: it was never merged

        Parameters
        ----------
        other
            A metric of the same type and parameters whose state was merged into this
            one (with :meth:`merge`, or by feeding this one its events too).
        """
        self._check_same_kind(other, "subtract", "from")
        if other is self:  # (a copy: the state read is the one being taken out)
            other = copy.deepcopy(other)
        self._subtract(other)
        return self

    def to_state(self):
        """JSON-serialisable state: ``{"type", "version", "params", "data"}``."""
        return {
            "type": self._public_name,
            "version": self._state_version,
            "params": self._params(),
            "data": self._get_data(),
        }

    @classmethod
    def _from_state(cls, state):
        obj = cls(**state["params"])
        obj._set_data(state["data"])
        return obj

    def clone(self, new_params=None, include_attributes=False):
        """A fresh metric with the same parameters and no data."""
        params = self._params()
        if new_params:
            params.update(new_params)
        return type(self)(**params)

    def _params(self):
        exclude = self._state_exclude
        return {name: getattr(self, name) for name in _init_params(type(self))
                if name not in exclude}

    def _check(self):
        """Assert the internal invariants (tests call this after every operation)."""

    # -- confidence intervals ----------------------------------------------------
    #: whether :meth:`interval` gives an interval (a property on windows and views);
    #: read it through :func:`has_interval`
    _has_interval = False

    def interval(self, level=0.95):
        """A confidence interval ``(low, high)`` (two Python floats) of the current
        value at confidence ``level``, with ``z = NormalDist().inv_cdf(0.5 + level / 2)``.

        Proportions (``Accuracy``, ``ErrorRate``, ``Precision``, ``Recall``, ``FPR``,
        ``Specificity``): the Wilson score interval with continuity correction (a macro or
        weighted multiclass average: a normal interval combining the classes' Wilson
        variances as if independent). ``ROCAUC`` and ``Gini``: a logit-scale interval
        from DeLong's variances, exact from the score order, moderated toward the
        Hanley-McNeil model's (see :meth:`ROCAUC.interval
        <streameval.metrics.ranking.ROCAUC.interval>`). Windows: the wrapped metric's over the window's events (``Tumbling``: the
        last closed window's). Weights are frequency weights: an event of weight 2
        counts as two events (as scikit-learn's ``sample_weight``), so a stream with
        integer weights has exactly the interval of the same stream with rows repeated.
        ``(nan, nan)`` when undefined: whenever ``get()`` is nan, or the variance cannot
        be estimated. Any other metric raises ``NotImplementedError`` (see
        :func:`has_interval`); a ``level`` that is not a number in ``(0, 1)`` raises
        ``ValueError`` naming it.

        Runtime complexity: the metric's (`O(1)` for binary proportions; ROCAUC: one
        numpy pass over the distinct scores, cached until the next change).

        >>> import streameval as se
        >>> m = se.Recall().update_many([1] * 10, [0.9] * 8 + [0.1] * 2)
        >>> m.get(), [round(v, 6) for v in m.interval(0.95)]
        (0.8, [0.442181, 0.964573])
        >>> se.F1().interval()
        Traceback (most recent call last):
        ...
        NotImplementedError: F1 has no confidence interval: interval() is available for the proportions ...

        Parameters
        ----------
        level
            The confidence level, a real number in the open interval ``(0, 1)``;
            default 0.95.
        """
        if not has_interval(self):
            raise NotImplementedError(
                f"{self._interval_subject()} has no confidence interval: interval() is "
                f"available for {INTERVAL_METRICS}")
        return interval_of(self._interval_parts(), critical_value(level))

    def _interval_subject(self):
        """The name :meth:`interval` gives this object when it has no interval."""
        return self._public_name

    def _interval_parts(self):
        """The level-independent summary :func:`interval_of` turns into an interval
        (None: undefined); only where :attr:`_has_interval`."""
        raise NotImplementedError(f"{self._interval_subject()} has no confidence interval")

    # -- subclass hooks ---------------------------------------------------------
    def _get_data(self):
        raise NotImplementedError

    def _set_data(self, data):
        raise NotImplementedError

    def _merge(self, other):
        raise NotImplementedError(f"{type(self).__name__} cannot be merged")

    def _subtract(self, other):
        """Take out ``other``'s state (same type and parameters, checked): refuse with
        a ``ValueError`` saying what is missing, before any change, if ``other`` holds
        what ``self`` does not (see :meth:`subtract`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be subtracted")

    def __repr__(self):
        try:
            value = self.get()
        except Exception:  # pragma: no cover - repr must never raise
            value = math.nan
        if isinstance(value, float):
            return f"{type(self).__name__}: {value:.6f}"
        return f"{type(self).__name__}: {value!r}"

    __str__ = __repr__


class Cases(Metric):
    """A public metric class with one implementation class per case (binary,
    multiclass, ...): the single dispatch helper of every metric family.

    ``Front(**params)`` returns an instance of the case class that
    :meth:`_case` picks from the arguments, so ``isinstance(ROCAUC(average="macro"),
    ROCAUC)`` holds for every case. A case class names its case in its class
    statement and is wired to the front by that alone::

        class Precision(Cases):                    # the public front
            @classmethod
            def _case(cls, args, kwargs):
                return "multiclass" if kwargs.get("average") else "binary"

        class _BinaryPrecision(Precision, BinaryView, case="binary"): ...
        class _MultiClassPrecision(Precision, MultiView, case="multiclass"): ...

    Case classes carry the front's ``__name__`` and ``_public_name`` (river reports
    metrics by class name; states record the public name, and ``from_state`` rebuilds
    through the front, which picks the case again from the parameters).
    """

    _abstract = True
    #: case name -> implementation class (on each front class)
    _cases: dict | None = None

    def __init_subclass__(cls, case=None, **kwargs):
        super().__init_subclass__(**kwargs)
        if case is not None:
            front = next(b for b in cls.__mro__[1:] if b.__dict__.get("_cases") is not None)
            front._cases[case] = cls
            cls._public_name = front._public_name
            cls.__name__ = front.__name__
            cls.__qualname__ = front.__qualname__
        elif not cls.__name__.startswith("_"):
            cls._cases = {}

    @classmethod
    def _case(cls, args, kwargs):
        """The case for constructor arguments ``args``, ``kwargs`` (default: binary)."""
        return "binary"

    def __new__(cls, *args, **kwargs):
        cases = cls.__dict__.get("_cases")
        if cases:
            cls = cases[cls._case(args, kwargs)]
        return object.__new__(cls)

    def __reduce_ex__(self, protocol):
        # a case class carries its front's name, so pickle (and deepcopy) cannot find
        # it by name: rebuild through the front and the case
        cls = type(self)
        front = next((b for b in cls.__mro__[1:] if b.__dict__.get("_cases")), None)
        if front is not None:
            for case, c in front._cases.items():
                if c is cls:
                    return _case_object, (front, case), self.__dict__
        return object.__reduce_ex__(self, protocol)

    def __repr__(self):
        value = self.get()
        if isinstance(value, float):
            return f"{self._public_name}: {value:.6f}"
        return f"{self._public_name}: {value!r}"

    __str__ = __repr__


def _case_object(front, case):
    """An empty instance of ``front``'s case class ``case`` (for pickle)."""
    return object.__new__(front._cases[case])


def from_state(state):
    """Rebuild a metric or window from :meth:`Metric.to_state`.

    Refuses anything that is not such a state, an unknown ``type`` or a ``version``
    this streameval does not read, with a ``ValueError`` that says which.

    Runtime complexity: `O(size of the state)`.

    >>> import json, streameval
    >>> m = streameval.ROCAUC()
    >>> m.update_many([1, 0, 1, 0], [0.9, 0.4, 0.35, 0.1]).get()
    0.75
    >>> copy = from_state(json.loads(json.dumps(m.to_state())))
    >>> copy.get(), type(copy).__name__
    (0.75, 'ROCAUC')
    >>> from_state({"type": "ROCAUC", "version": 99, "params": {}, "data": {}})
    Traceback (most recent call last):
    ...
    ValueError: state of ROCAUC has version 99; this streameval reads version 1
    """
    if not isinstance(state, dict) or "type" not in state or "version" not in state:
        raise ValueError(f"not a streameval state (a dict with 'type' and 'version'): {state!r:.200}")
    name = state["type"]
    cls = _registry.state_class(name)
    if cls is None:
        raise ValueError(f"unknown state type {name!r}")
    if state["version"] != cls._state_version:
        raise ValueError(
            f"state of {name} has version {state['version']!r}; "
            f"this streameval reads version {cls._state_version}"
        )
    if "params" not in state or "data" not in state:
        raise ValueError(f"state of {name} lacks 'params' or 'data'")
    return cls._from_state(state)


# ------------------------------------------------------------------------ families


class BinaryMetric(Metric, river_base.BinaryMetric):
    """Base of binary classification metrics.

    ``y_true`` is ``pos_label`` or ``neg_label`` (default True/1 and False/0);
    ``y_pred`` is a score (a finite number), a bool (a predicted label), or a river
    probability dict ``{True: p, False: 1 - p}`` whose positive entry is the score
    (an absent entry counts as 0, as for an untrained river model's ``{}``).
    """

    _abstract = True

    def __init__(self, pos_label=True, neg_label=None):
        self.pos_label = pos_label
        self.neg_label = neg_label
        self._pos_set, self._neg_set = label_sets(pos_label, neg_label)

    @property
    def requires_labels(self):
        # river then passes predict_proba_one's dict, and our threshold applies to it
        return False

    @property
    def bigger_is_better(self):
        return True

    def _label(self, y_true, name="y_true"):
        """True for the positive label, False for the negative; else ValueError."""
        try:
            if y_true in self._pos_set:
                return True
            if y_true in self._neg_set:
                return False
        except TypeError:
            pass
        (pos,) = self._pos_set
        (neg,) = self._neg_set
        fail(name, y_true, f"label must be {pos!r} (positive) or {neg!r} (negative)")

    def _score(self, y_pred, name="y_pred"):
        """The positive-class score of ``y_pred`` as a finite float; else ValueError."""
        if type(y_pred) is float:
            s = y_pred
        elif isinstance(y_pred, dict):
            (pos,) = self._pos_set
            s = y_pred.get(pos, 0.0)
            if not isinstance(s, _Real):
                fail(name, y_pred, "probability must be a finite number")
            s = float(s)
        elif isinstance(y_pred, _Real):
            s = float(y_pred)
        else:
            fail(name, y_pred, "score must be a finite number or a probability dict")
        if s - s:
            fail(name, y_pred, "score must be a finite number")
        return s

    columns = "binary"

    def validate(self, y_true, y_pred, w=None):
        """Validate a batch: (bool "is positive" labels, float64 scores, float64
        weights or None), checked against :attr:`score_bounds` too.

        Runtime complexity: `O(m)`, numpy (labels other than bools and ints, and
        probability dicts, are read element by element)."""
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        labels = as_binary_labels(y_true, self._pos_set, self._neg_set)
        scores = as_float_array(
            y_pred, scalar=lambda v, i: self._score(v, name=f"y_pred[{i}]")
        )
        weights = as_weight_array(w, n)
        if self.score_bounds is not None and n:
            check_bounds(scores, self.score_bounds)
        return labels, scores, weights


    def label_of(self, is_positive):
        """The configured label for a bool "is positive" (for messages and for the
        per-event fallback of :meth:`update_trusted`)."""
        (label,) = self._pos_set if is_positive else self._neg_set
        return label

    def update_trusted(self, y, s, w=None):
        """Add validated binary columns (see :meth:`Metric.update_trusted`); this
        default decodes the labels and loops over ``update``."""
        pos, neg = self.label_of(True), self.label_of(False)
        update = self.update
        for i, (yy, ss) in enumerate(zip(y.tolist(), s.tolist())):
            update(pos if yy else neg, ss, 1.0 if w is None else float(w[i]))
        return self

    def revert_trusted(self, y, s, w=None):
        pos, neg = self.label_of(True), self.label_of(False)
        labels = [pos if yy else neg for yy in y.tolist()]
        return Metric.revert_trusted(self, labels, s.tolist(), None if w is None else w.tolist())


class MultiClassMetric(Metric, river_base.MultiClassMetric):
    """Base of multiclass metrics: any hashable label but None and NaN."""

    _abstract = True

    @property
    def requires_labels(self):
        return True

    @property
    def bigger_is_better(self):
        return True

    @staticmethod
    def _class(y, name="y_true"):
        try:
            hash(y)
        except TypeError:
            fail(name, y, "a class label must be hashable")
        if y is None or (isinstance(y, float) and y != y):
            fail(name, y, "not a valid class label")
        return y


class RegressionMetric(Metric, river_base.RegressionMetric):
    """Base of regression metrics: ``y_true`` and ``y_pred`` are finite numbers."""

    _abstract = True

    @property
    def bigger_is_better(self):
        return False

    columns = "regression"

    def validate(self, y_true, y_pred, w=None):
        """Validate a batch: (float64 targets, float64 predictions, float64 weights or
        None). Runtime complexity: `O(m)`, numpy."""
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        yt = as_float_array(y_true, name="y_true", what="target")
        yp = as_float_array(y_pred, name="y_pred", what="prediction")
        return yt, yp, as_weight_array(w, n)


    def update_trusted(self, y, s, w=None):
        update = self.update
        for i, (a, b) in enumerate(zip(y.tolist(), s.tolist())):
            update(a, b, 1.0 if w is None else float(w[i]))
        return self

    def revert_trusted(self, y, s, w=None):
        return Metric.revert_trusted(self, y.tolist(), s.tolist(), None if w is None else w.tolist())


#: class -> the names of its ``__init__``'s named parameters (``self`` and ``*args``,
#: ``**kwargs`` left out): read once per class, so that cloning a metric for a new
#: segment does not walk a signature every time
_INIT_PARAMS = {}


def _init_params(cls):
    """The named parameters of ``cls.__init__``, in order (cached per class)."""
    names = _INIT_PARAMS.get(cls)
    if names is None:
        names = tuple(
            name for name, p in inspect.signature(cls.__init__).parameters.items()
            if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
        _INIT_PARAMS[cls] = names
    return names
