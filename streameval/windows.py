"""Sliding and tumbling windows over any streameval metric.

A window is a metric too: it takes the same ``update(y_true, y_pred, w=1.0)`` as the
metric it wraps (plus the event time ``t=``) and its ``get()`` is the wrapped metric's
value over the window's events.

* :class:`Sliding` keeps the last ``size`` events, or the events of the last
  ``period`` seconds of event time, and removes expired events with the wrapped
  metric's ``revert``: exact for every metric that has ``revert`` (exact ``ROCAUC`` and
  ``AveragePrecision`` included), in the cost of one ``update`` and one ``revert`` per
  event. Batches (``update_many``) are stored as column chunks (numpy arrays for
  metrics of scalar arguments) and expire a slice at a time with one ``revert_many``.
* :class:`Tumbling` cuts the stream into consecutive, non-overlapping windows of
  ``size`` events or ``period`` seconds and reports each closed window once (a callback
  or the :meth:`Tumbling.closed` iterator). It never reverts, so it works with any
  metric.

Event times ``t`` are epoch seconds (int or float), :class:`datetime.datetime` (naive
means UTC) or :class:`numpy.datetime64`.

Late events (``period`` windows): an event whose time is at most ``lateness`` seconds
behind the newest time seen is placed by its time; an older one is *refused*: it does
not enter the window, it is counted in :attr:`Sliding.late` and passed to the
``on_late`` callback if one is given. Refused events are still validated: a bad event
raises ``ValueError`` whether it is late or not.
"""

from __future__ import annotations

import collections
import datetime as _dt
import itertools
import math
import numbers
from operator import itemgetter

import numpy as np

from streameval.metrics.base import (
    BinaryMetric,
    Metric,
    RegressionMetric,
    check_same_length,
    from_state,
)

__all__ = ["Sliding", "Tumbling", "as_seconds", "as_seconds_array"]

_UTC = _dt.timezone.utc
_NAN = math.nan
_Real = numbers.Real

#: For a metric without its own ``revert_many``: a batch whose expired events are more
#: than this fraction of the window rebuilds the wrapped metric from the window's
#: contents with one ``update_many`` instead of reverting the expired events one by
#: one. Measured with exact ROCAUC before it had ``revert_many``
#: (``python benchmarks/bench_windows.py --batches``): reverting wins below about 5% of
#: the window, rebuilding above 10%. A metric with its own (vectorised) ``revert_many``
#: is reverted a slice at a time whatever the fraction (the confusion family: 3x faster
#: than a rebuild at 10%, 2x at 50%), unless it sets ``_window_rebuild_fraction`` to the
#: crossover it measured.
REBUILD_FRACTION = 0.1



# ------------------------------------------------------------------------ event time


def _bad_time(t, name):
    raise ValueError(
        f"{name} = {t!r}: event time must be finite epoch seconds (int or float), "
        "a datetime (naive means UTC) or a numpy datetime64"
    )


def as_seconds(t, name="t"):
    """Return the event time ``t`` as float epoch seconds, or raise ``ValueError``.

    Runtime complexity: `O(1)`.

    >>> as_seconds(1700000000)
    1700000000.0
    >>> as_seconds(_dt.datetime(2024, 1, 1))       # naive datetimes are UTC
    1704067200.0
    >>> as_seconds(float("inf"))
    Traceback (most recent call last):
    ...
    ValueError: t = inf: event time must be finite epoch seconds ...

    Parameters
    ----------
    t : int, float, datetime.datetime or numpy.datetime64
        The event time.
    name : str
        How the error message names the value.
    """
    if type(t) is float:
        v = t
    elif isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=_UTC)
        return t.timestamp()
    elif isinstance(t, _Real) and not isinstance(t, (bool, np.bool_)):
        v = float(t)
    elif isinstance(t, np.datetime64):
        if np.isnat(t):
            _bad_time(t, name)
        return float(t.astype("datetime64[ns]").astype(np.int64)) / 1e9
    else:
        _bad_time(t, name)
    if v - v:  # NaN or +-inf
        _bad_time(t, name)
    return v


def as_seconds_array(t, n=None, name="t"):
    """Return a batch of event times as a float64 array of epoch seconds, or raise.

    Numbers and ``datetime64`` arrays convert in one numpy call; anything else
    (datetimes, mixed lists) goes element by element so that the message names the
    index of the first bad time.

    Runtime complexity: `O(n)`.

    >>> as_seconds_array([0, 1.5, _dt.datetime(1970, 1, 1, 0, 1)])
    array([ 0. ,  1.5, 60. ])
    """
    arr = t if isinstance(t, np.ndarray) else np.asarray(t)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if n is not None and len(arr) != n:
        raise ValueError(f"y_true has {n} elements but {name} has {len(arr)}")
    kind = arr.dtype.kind
    if kind in "fiu":
        out = arr.astype(np.float64, copy=False)
        bad = ~np.isfinite(out)
        if bad.any():
            i = int(np.argmax(bad))
            _bad_time(arr[i].item(), f"{name}[{i}]")
        return out
    if kind == "M":
        bad = np.isnat(arr)
        if bad.any():
            i = int(np.argmax(bad))
            _bad_time(arr[i], f"{name}[{i}]")
        return arr.astype("datetime64[ns]").astype(np.int64) / 1e9
    items = t.tolist() if isinstance(t, np.ndarray) else t
    out = np.empty(len(arr), dtype=np.float64)
    for i, v in enumerate(items):
        out[i] = as_seconds(v, f"{name}[{i}]")
    return out


def _as_period(value, name):
    if isinstance(value, _dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, _Real) or not math.isfinite(value):
        raise ValueError(f"{name} = {value!r}: must be a finite number of seconds or a timedelta")
    return float(value)


# -------------------------------------------------------------- helpers for windows


def _fresh(metric):
    """A fresh metric with the parameters of ``metric`` and no data."""
    clone = getattr(metric, "clone", None)
    if clone is None:
        raise ValueError(f"metric = {metric!r}: needs clone() (streameval and river metrics have it)")
    return clone()


def _same_metric(a, b):
    """Whether two metrics have one type and one set of parameters (mergeable)."""
    if type(a) is not type(b):
        return False
    params = getattr(a, "_params", None) or getattr(a, "_get_params", None)
    if params is None:
        return True
    other = getattr(b, "_params", None) or getattr(b, "_get_params", None)
    return params() == other()


def _state_of(metric):
    to_state = getattr(metric, "to_state", None)
    if to_state is None:
        raise ValueError(
            f"cannot save the state of a window over {type(metric).__name__}: "
            "the wrapped metric has no to_state() (river metrics have none)"
        )
    return to_state()


def _as_seq(values):
    """A sliceable sequence: numpy arrays, lists and tuples as they are, else a list."""
    if isinstance(values, (np.ndarray, list, tuple)):
        return values
    return list(values)


def _as_items(values):
    """Python values of a batch column, for storing in the window."""
    if isinstance(values, np.ndarray):
        return values.tolist()
    return list(values)


def _take(values, idx):
    """``values[idx]`` for an index array, for numpy arrays and plain sequences."""
    if isinstance(values, np.ndarray):
        return values[idx]
    return [values[i] for i in idx.tolist()]


def _columns(items, offset):
    """The ``(y_true, y_pred, w)`` columns of stored items (``offset`` skips ``t``);
    ``w`` is ``None`` when every weight is 1 (the wrapped metric's unweighted path)."""
    cols = [list(map(itemgetter(j), items)) for j in range(offset, offset + 3)]
    w = cols[2]
    if w.count(1.0) == len(w):
        cols[2] = None
    return cols


_Deque = collections.deque


def _chunk_len(ch):
    """Live events in a count window's chunk."""
    if type(ch) is _Deque:
        return len(ch)
    return len(ch[0]) - ch[3]


def _chunk_front(ch, m, skip=0):
    """``(y_true, y_pred, w)`` columns of a chunk's live events ``skip .. skip + m``."""
    if type(ch) is _Deque:
        items = list(itertools.islice(ch, skip, skip + m))
        return [list(map(itemgetter(j), items)) for j in range(3)]
    yt, yp, w, lo = ch
    lo += skip
    return yt[lo:lo + m], yp[lo:lo + m], None if w is None else w[lo:lo + m]


def _vectorised_revert(metric):
    """Whether ``metric`` has its own ``revert_many`` (not the protocol's loop)."""
    method = getattr(type(metric), "revert_many", None)
    return method is not None and method is not Metric.revert_many


def _scalar_args(metric):
    """Whether the metric's event arguments are scalars (a label, a score or target, a
    weight), which count windows keep as numpy columns."""
    return isinstance(metric, (BinaryMetric, RegressionMetric))


def _column(values, scalar):
    """A copy of a batch column for a count window's store: numpy arrays stay arrays
    (scalar-argument metrics), anything else becomes a list of Python values."""
    if scalar and isinstance(values, np.ndarray) and values.ndim == 1:
        return values.copy()
    return _as_items(values)


def _concat(parts):
    """One column from pieces (arrays or lists): an array if every piece is one."""
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts) if parts else np.empty(0)
    out = []
    for p in parts:
        out.extend(p.tolist() if isinstance(p, np.ndarray) else p)
    return out


def _weights_or_none(w):
    """``None`` for all-ones weights (the wrapped metric's unweighted path)."""
    if w is None:
        return None
    if isinstance(w, np.ndarray):
        return None if (w == 1.0).all() else w
    return None if w.count(1.0) == len(w) else w


def _py(v):
    """A numpy scalar as the Python value (the event path's fast types)."""
    return v.item() if isinstance(v, np.generic) else v


def _values_equal(a, b, tol=1e-9):
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    try:
        return bool(np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                                rtol=tol, atol=tol, equal_nan=True))
    except (TypeError, ValueError):
        return a == b


# ---------------------------------------------- JSON encoding of stored event args


def _encode(v):
    """Encode an event argument as JSON; tagged objects keep tuples, dicts, arrays."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else {"$f": repr(v)}
    if isinstance(v, np.generic):
        return _encode(v.item())
    if isinstance(v, list):
        return [_encode(x) for x in v]
    if isinstance(v, tuple):
        return {"$t": [_encode(x) for x in v]}
    if isinstance(v, dict):
        return {"$d": [[_encode(k), _encode(x)] for k, x in v.items()]}
    if isinstance(v, np.ndarray):
        return {"$a": _encode(v.tolist()), "dtype": v.dtype.str}
    raise ValueError(f"cannot save an event argument of type {type(v).__name__}: {v!r:.100}")


def _decode(v):
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if isinstance(v, dict):
        if "$f" in v:
            return float(v["$f"])
        if "$t" in v:
            return tuple(_decode(x) for x in v["$t"])
        if "$d" in v:
            return {_hashable(_decode(k)): _decode(x) for k, x in v["$d"]}
        if "$a" in v:
            return np.asarray(_decode(v["$a"]), dtype=np.dtype(v["dtype"]))
        raise ValueError(f"not an encoded event argument: {v!r:.100}")
    return v


def _encode_column(col):
    """A stored column as JSON values: finite numeric numpy arrays in one call."""
    if isinstance(col, np.ndarray):
        kind = col.dtype.kind
        if kind in "biu" or (kind == "f" and np.isfinite(col).all()):
            return col.tolist()
        col = col.tolist()
    return [_encode(v) for v in col]


_PLAIN = (bool, int, float, str, type(None))


def _decoded_events(rows):
    """Stored events from their JSON rows, as tuples; only tagged values are decoded."""
    if not rows:
        return []
    cols = list(zip(*rows))
    for j, col in enumerate(cols):
        if not all(type(v) in _PLAIN for v in col):
            cols[j] = [_decode(v) for v in col]
    return list(zip(*cols))


def _hashable(k):
    return tuple(k) if isinstance(k, list) else k


def _encode_record(r):
    return {key: _encode(value) for key, value in r.items()}


def _decode_record(r):
    return {key: _decode(value) for key, value in r.items()}


def _check_size(size):
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
        raise ValueError(f"size = {size!r}: must be an integer >= 1")
    return int(size)


def _check_window_params(size, period, lateness):
    if (size is None) == (period is None):
        raise ValueError(
            f"give exactly one of size= (events) and period= (seconds); got size={size!r}, period={period!r}"
        )
    if size is not None:
        size = _check_size(size)
        if lateness not in (0, 0.0, None):
            raise ValueError(f"lateness = {lateness!r}: only period= windows have a lateness")
        return size, None, 0.0
    period = _as_period(period, "period")
    if period <= 0:
        raise ValueError(f"period = {period!r}: must be > 0 seconds")
    lateness = _as_period(0.0 if lateness is None else lateness, "lateness")
    if lateness < 0:
        raise ValueError(f"lateness = {lateness!r}: must be >= 0 seconds")
    return None, period, lateness


# --------------------------------------------------------------------------- Sliding


class Sliding(Metric):
    """The wrapped metric over the last ``size`` events or ``period`` seconds: exact.

    ``get()`` is the wrapped metric's value over the events in the window. Expired
    events are removed with the metric's ``revert``, so the value is exact whenever
    ``revert`` is the exact inverse of ``update`` (every streameval metric, exact
    ``ROCAUC`` and ``AveragePrecision`` included).

    Count windows (``size=N``) hold the last ``N`` events in arrival order. Time windows
    (``period=P``) hold the events whose time lies in the half-open interval
    ``(newest - P, newest]``, where ``newest`` is the largest event time accepted so
    far. An event up to ``lateness`` seconds older than ``newest`` is placed by its
    time; an older one (``t < newest - lateness``), or one that could not be in the
    window any more (``t <= newest - P``), is refused: counted in :attr:`late`,
    passed to ``on_late``, never silently dropped. Hence ``lateness <= period``.

    Runtime complexity of ``update``: one ``update`` and, once the window is full, one
    ``revert`` of the wrapped metric, plus `O(1)` (or `O(k)` for an event placed
    before ``k`` newer ones); ``get``: the wrapped metric's ``get``. ``update_many`` of
    ``m`` events on a count window: one ``update_many`` and one ``revert_many`` per
    stored chunk the expired events span (usually one or two), plus `O(m)` to copy the
    batch's columns.

    Storage (count windows): each batch is kept as one chunk of columns, numpy arrays
    as given (labels, scores, weights: about 17 bytes per event for bool labels and
    float scores) when the wrapped metric takes scalar arguments (binary and
    regression metrics), Python lists otherwise (retrieval, text); events added one
    at a time are kept as tuples. Expired events are removed from the metric a chunk
    slice at a time with ``revert_many`` (vectorised for every streameval family).

    >>> import streameval as se
    >>> win = se.Sliding(se.Recall(), size=3)
    >>> for y, p in [(1, 0.9), (1, 0.2), (1, 0.8), (1, 0.7)]:
    ...     win.update(y, p)
    ...     print(round(win.get(), 4))
    1.0
    0.5
    0.6667
    0.6667

    Time windows take the event time ``t``; a late event is refused and counted:

    >>> win = se.Sliding(se.ROCAUC(), period=60, lateness=10)
    >>> win.update(1, 0.8, t=100.0)
    >>> win.update(0, 0.3, t=95.0)      # 5 s late: placed by its time
    >>> win.update(0, 0.9, t=80.0)      # 20 s late: refused
    >>> win.get(), len(win), win.late
    (1.0, 2, 1)
    >>> win.update(0, 0.9, t=161.0)     # (101, 161]: the first two events expire
    >>> len(win)
    1

    Parameters
    ----------
    metric
        The metric to window: a template, cloned (the window starts empty). It must
        have ``update``, ``revert``, ``get`` and ``clone``; ``to_state`` for
        :meth:`to_state`.
    size : int
        Window length in events. Give ``size`` or ``period``, not both.
    period : float or datetime.timedelta
        Window length in seconds of event time.
    lateness : float or datetime.timedelta
        How far behind the newest event time an event may arrive and still be placed
        (``period`` windows only; ``0 <= lateness <= period``).
    on_late : callable
        Called with a record ``{"t", "newest", "y_true", "y_pred", "w"}`` for each
        refused event. Not part of the saved state.

    Notes
    -----
    The window keeps references to the events' arguments to revert them later: do not
    mutate a list or dict after passing it to ``update``. ``t`` is ignored by count
    windows. ``merge``: a count window appends the other window's events after its own
    (the last ``size`` of both); a time window takes the union of both windows' events
    by time, relative to the newer of the two newest times (lateness does not apply).
    """

    _state_version = 1

    def __init__(self, metric, size=None, period=None, lateness=0.0, on_late=None):
        for name in ("update", "revert", "get"):
            if not callable(getattr(metric, name, None)):
                raise ValueError(
                    f"metric = {metric!r}: a sliding window needs a metric with {name}()"
                    + (" (its events are reverted on expiry)" if name == "revert" else "")
                )
        size, period, lateness = _check_window_params(size, period, lateness)
        if period is not None and lateness > period:
            raise ValueError(
                f"lateness = {lateness!r} > period = {period!r}: an event older than the "
                "window could never be in it"
            )
        if on_late is not None and not callable(on_late):
            raise ValueError(f"on_late = {on_late!r}: must be a callable or None")
        self.size = size
        self.period = period
        self.lateness = lateness
        self.on_late = on_late
        self.metric = _fresh(metric)
        #: number of refused (late) events
        self.late = 0
        self._newest = -math.inf
        # time windows: (t, y_true, y_pred, w) tuples ordered by time
        self._events = collections.deque()
        # count windows: a deque of chunks, oldest first. A batch is one column chunk
        # [y_true, y_pred, w (None: all 1), start] (numpy arrays as given for
        # scalar-argument metrics, else lists; its live events are those from `start`
        # on); events added one at a time go to a deque of (y_true, y_pred, w) tuples,
        # `_tail` while it is the newest chunk
        self._chunks = collections.deque()
        self._tail = None
        self._n = 0
        self._bind()

    def _bind(self):
        m = self.metric
        self._update = m.update
        self._revert = m.revert
        self._get = m.get
        self._scalar = _scalar_args(m)
        self._vectorised = _vectorised_revert(m)
        self._rebuild_fraction = getattr(
            m, "_window_rebuild_fraction", math.inf if self._vectorised else None)

    # -- per event ---------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0, t=None):
        """Add one event; the oldest one expires once the window is full.

        The wrapped metric validates the event before the window stores it: a bad
        event raises ``ValueError`` and changes nothing.
        """
        if self.size is not None:
            self._update(y_true, y_pred, w=w)
            if self._n == self.size:
                first = self._chunks[0]
                if type(first) is _Deque:
                    old = first.popleft()
                    self._revert(old[0], old[1], w=old[2])
                    if not first:
                        self._chunks.popleft()
                        if first is self._tail:
                            self._tail = None
                else:
                    self._revert_oldest_of(first)
            else:
                self._n += 1
            tail = self._tail
            if tail is None:
                tail = self._tail = _Deque()
                self._chunks.append(tail)
            tail.append((y_true, y_pred, w))
            return
        if t is None:
            raise ValueError("t = None: a period window needs the event time t=")
        tt = t if type(t) is float and t - t == 0.0 else as_seconds(t)
        newest = self._newest
        if tt < newest and (tt < newest - self.lateness or tt <= newest - self.period):
            self._refuse(y_true, y_pred, w, tt)
            return
        self._update(y_true, y_pred, w=w)
        events = self._events
        if tt >= newest:
            events.append((tt, y_true, y_pred, w))
            if tt > newest:
                self._newest = tt
                cutoff = tt - self.period
                if events[0][0] <= cutoff:
                    revert = self._revert
                    popleft = events.popleft
                    while events[0][0] <= cutoff:
                        old = popleft()
                        revert(old[1], old[2], w=old[3])
        else:
            i = len(events)
            while i and events[i - 1][0] > tt:
                i -= 1
            events.insert(i, (tt, y_true, y_pred, w))

    def _refuse(self, y_true, y_pred, w, tt):
        # a refused event must still be valid: validate it on a throw-away clone
        _fresh(self.metric).update(y_true, y_pred, w=w)
        self.late += 1
        if self.on_late is not None:
            self.on_late({"t": tt, "newest": self._newest, "y_true": y_true, "y_pred": y_pred, "w": w})

    def revert(self, y_true, y_pred, w=1.0, t=None):
        """Not supported: a window removes its own events on expiry."""
        raise NotImplementedError("a window cannot revert an event; events expire on their own")

    def get(self):
        """The wrapped metric's value over the window (``nan`` when undefined).

        Runtime complexity: the wrapped metric's ``get``.
        """
        return self._get()

    def __len__(self):
        return self._n if self.size is not None else len(self._events)

    @property
    def newest(self):
        """The newest event time accepted (``period`` windows); ``None`` before any."""
        return None if self._newest == -math.inf else self._newest

    def events(self):
        """The events in the window, oldest first: ``(y_true, y_pred, w)`` tuples, or
        ``(t, y_true, y_pred, w)`` for ``period`` windows.

        Runtime complexity: `O(n)`.
        """
        if self.size is None:
            return list(self._events)
        out = []
        for ch in self._chunks:
            if type(ch) is _Deque:
                out.extend(ch)
                continue
            yt, yp, w, lo = ch
            ys = _as_items(yt[lo:])
            out.extend(zip(ys, _as_items(yp[lo:]),
                           [1.0] * len(ys) if w is None else _as_items(w[lo:])))
        return out

    def _revert_oldest_of(self, first):
        """Revert the oldest event of a column chunk (the event path)."""
        i = first[3]
        col = first[0]
        w = first[2]
        self._revert(_py(col[i]), _py(first[1][i]), w=1.0 if w is None else _py(w[i]))
        i += 1
        if i == len(col):
            self._chunks.popleft()
        else:
            first[3] = i

    def _stored_columns(self, skip=0):
        """``(y_true, y_pred, w)`` of the count window's events after the first
        ``skip``; ``w`` is None when every weight is 1."""
        ys, ps, ws = [], [], []
        weighted = False
        for ch in self._chunks:
            k = _chunk_len(ch)
            if skip >= k:
                skip -= k
                continue
            yt, yp, w = _chunk_front(ch, k, skip)
            skip = 0
            ys.append(yt)
            ps.append(yp)
            if w is None:
                ws.append(np.ones(len(yt)))
            else:
                ws.append(w)
                weighted = True
        w = _weights_or_none(_concat(ws)) if weighted else None
        return _concat(ys), _concat(ps), w

    def _expire(self, k):
        """Revert the ``k`` oldest events of a count window, a chunk slice at a time."""
        self._n -= k
        while k:
            ch = self._chunks[0]
            m = min(k, _chunk_len(ch))
            self._revert_slice(*_chunk_front(ch, m))
            self._pop_front(ch, m)
            k -= m

    def _pop_front(self, ch, m):
        """Forget the ``m`` oldest events of the oldest chunk ``ch``."""
        if _chunk_len(ch) == m:
            self._chunks.popleft()
            if ch is self._tail:
                self._tail = None
        elif type(ch) is _Deque:
            popleft = ch.popleft
            for _ in range(m):
                popleft()
        else:
            ch[3] += m

    def _revert_slice(self, yt, yp, w):
        if self._vectorised:
            self.metric.revert_many(yt, yp, _weights_or_none(w))
            return
        revert = self._revert
        ys, ps = _as_items(yt), _as_items(yp)
        ws = [1.0] * len(ys) if w is None else _as_items(w)
        for a, b, c in zip(ys, ps, ws):
            revert(a, b, w=c)

    def _store(self, y_true, y_pred, w):
        scalar = self._scalar
        yt, yp = _column(y_true, scalar), _column(y_pred, scalar)
        if w is None:
            wc = None if isinstance(yt, np.ndarray) else [1.0] * len(yt)
        else:
            wc = _column(w, scalar)
            if not isinstance(yt, np.ndarray):
                wc = _as_items(wc)
        self._chunks.append([yt, yp, wc, 0])
        self._tail = None
        self._n += len(yt)

    # -- batches -----------------------------------------------------------------
    def update_many(self, y_true, y_pred, w=None, t=None):
        """Add a batch; same result as a loop of :meth:`update`, validated first.

        The whole batch is validated before anything changes (``ValueError`` names the
        index of the first bad element). Only the events still in the window at the end
        of the batch reach the wrapped metric, through its ``update_many``.

        Runtime complexity: `O(n)` (vectorised by the wrapped metric's
        ``update_many``), plus `O(n log n)` to place the events of a ``period`` window
        by time.
        """
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        y_true, y_pred = _as_seq(y_true), _as_seq(y_pred)
        w = None if w is None else _as_seq(w)
        if self.size is not None:
            if n:
                self._update_many_count(y_true, y_pred, w, n)
            return self
        if t is None:
            raise ValueError("t = None: a period window needs the event times t=")
        ts = as_seconds_array(t, n)
        if n:
            self._update_many_time(y_true, y_pred, w, ts, n)
        return self

    def _update_many_count(self, y_true, y_pred, w, n):
        size = self.size
        if n >= size:
            # only the last `size` events stay: validate all, then build from the tail
            _fresh(self.metric).update_many(y_true, y_pred, w)
            tail = slice(n - size, n)
            yt, yp, wt = y_true[tail], y_pred[tail], None if w is None else w[tail]
            fresh = _fresh(self.metric)
            fresh.update_many(yt, yp, wt)
            self._chunks.clear()
            self._tail = None
            self._n = 0
            self.metric = fresh
            self._bind()
            self._store(yt, yp, wt)
            return
        expired = self._n + n - size
        fraction = self._rebuild_fraction
        if expired > (REBUILD_FRACTION if fraction is None else fraction) * size:
            # rebuild from the surviving events, then the batch (validated by update_many)
            fresh = _fresh(self.metric)
            fresh.update_many(*self._stored_columns(max(expired, 0)))
            fresh.update_many(y_true, y_pred, w)
            self._drop(expired)
            self.metric = fresh
            self._bind()
            self._store(y_true, y_pred, w)
            return
        self.metric.update_many(y_true, y_pred, w)  # validates, atomic
        if expired > 0:
            self._expire(expired)
        self._store(y_true, y_pred, w)

    def _drop(self, k):
        """Forget the ``k`` oldest events of a count window (no revert)."""
        k = max(k, 0)
        self._n -= k
        while k:
            ch = self._chunks[0]
            m = min(k, _chunk_len(ch))
            self._pop_front(ch, m)
            k -= m

    def _update_many_time(self, y_true, y_pred, w, ts, n):
        period, lateness = self.period, self.lateness
        newest0 = self._newest
        before = np.maximum.accumulate(np.concatenate(([newest0], ts)))[:-1]
        late = (ts < before - lateness) | (ts <= before - period)
        # validate every event, late ones included, before any change
        _fresh(self.metric).update_many(y_true, y_pred, w)
        newest = max(newest0, float(ts.max()))
        cutoff = newest - period
        accepted = np.flatnonzero(~late & (ts > cutoff))
        events = self._events
        expired = 0
        for item in events:
            if item[0] > cutoff:
                break
            expired += 1
        w_acc = [1.0] * len(accepted) if w is None else _as_items(_take(w, accepted))
        yt_acc, yp_acc = _take(y_true, accepted), _take(y_pred, accepted)
        new_items = list(zip(ts[accepted].tolist(), _as_items(yt_acc), _as_items(yp_acc), w_acc))
        # stable sort by time: old events first among equal times, then arrival order
        new_items.sort(key=itemgetter(0))
        # in order (the usual case): the batch goes after the kept events, no re-sort
        in_order = not new_items or expired == len(events) or new_items[0][0] >= events[-1][0]
        if in_order:
            contents = None
            size_after = len(events) - expired + len(new_items)
        else:
            contents = sorted(list(events)[expired:] + new_items, key=itemgetter(0))
            size_after = len(contents)
        fraction = REBUILD_FRACTION if self._rebuild_fraction is None else self._rebuild_fraction
        if expired > fraction * max(size_after, 1):
            if contents is None:
                contents = list(itertools.islice(events, expired, None)) + new_items
            fresh = _fresh(self.metric)
            fresh.update_many(*_columns(contents, 1))
            self.metric = fresh
            self._bind()
        else:
            if len(accepted):
                self.metric.update_many(yt_acc, yp_acc, None if w is None else _take(w, accepted))
            if expired and self._vectorised:
                self.metric.revert_many(*_columns(list(itertools.islice(events, expired)), 1))
            else:
                revert = self._revert
                for i in range(expired):
                    old = events[i]
                    revert(old[1], old[2], w=old[3])
        if contents is None:
            popleft = events.popleft
            for _ in range(expired):
                popleft()
            events.extend(new_items)
        else:
            self._events = collections.deque(contents)
        self._newest = newest
        late_idx = np.flatnonzero(late)
        if len(late_idx):
            for i in late_idx.tolist():
                self.late += 1
                if self.on_late is not None:
                    self.on_late({"t": float(ts[i]), "newest": float(before[i]),
                                  "y_true": y_true[i], "y_pred": y_pred[i],
                                  "w": 1.0 if w is None else w[i]})

    # -- protocol ----------------------------------------------------------------
    def clone(self, new_params=None, include_attributes=False):
        """A fresh, empty window with the same metric and parameters."""
        params = {"size": self.size, "period": self.period, "lateness": self.lateness,
                  "on_late": self.on_late}
        if new_params:
            params.update(new_params)
        if params.get("size") is not None:
            params["lateness"] = 0.0
        return type(self)(self.metric, **params)

    def _params(self):
        return {"size": self.size, "period": self.period, "lateness": self.lateness}

    def merge(self, other):
        """Fold in another window over the same metric with the same parameters.

        Count windows: as if ``other``'s events had been sent here after this window's
        events (the last ``size`` of both stay). Time windows: the union of both
        windows' events, placed by time, within ``period`` of the newer newest time;
        lateness does not apply, ``late`` counts add up. Returns ``self``.

        Runtime complexity: `O(n)` for count windows, `O(n log n)` for time windows.
        """
        if type(other) is not type(self) or self._params() != other._params():
            raise ValueError(
                f"cannot merge a window {getattr(other, '_params', lambda: other)()} "
                f"into a window {self._params()}"
            )
        if not _same_metric(self.metric, other.metric):
            raise ValueError(
                f"cannot merge windows over different metrics: {other.metric!r} into {self.metric!r}"
            )
        if self.size is not None:
            if other._n:
                self.update_many(*other._stored_columns())
            return self
        newest = max(self._newest, other._newest)
        cutoff = newest - self.period
        contents = sorted(list(self._events) + list(other._events), key=itemgetter(0))
        contents = [e for e in contents if e[0] > cutoff]
        fresh = _fresh(self.metric)
        if contents:
            fresh.update_many(*_columns(contents, 1))
        self.metric = fresh
        self._bind()
        self._events = collections.deque(contents)
        self._newest = newest
        self.late += other.late
        return self

    def to_state(self):
        """JSON-serialisable state: the wrapped metric's state and the window's events.

        The ``on_late`` callback is not saved: pass it again after ``from_state``
        (``window.on_late = f``).
        """
        return {
            "type": self._public_name,
            "version": self._state_version,
            "params": self._params(),
            "data": {
                "metric": _state_of(self.metric),
                "events": self._encoded_events(),
                "newest": self.newest,
                "late": self.late,
                # count windows: the live length of each chunk (and whether events are
                # appended to it), so that a restored window expires its events in the
                # same slices, hence to the same bits, as the original
                "chunks": None if self.size is None else [
                    [_chunk_len(c), type(c) is _Deque] for c in self._chunks],
            },
        }

    def _encoded_events(self):
        """The events as JSON rows ``[y_true, y_pred, w]`` (``[t, ...]`` for time
        windows); numeric numpy columns convert in one call."""
        if self.size is None:
            return [[_encode(x) for x in e] for e in self._events]
        rows = []
        for ch in self._chunks:
            if type(ch) is _Deque:
                rows.extend([_encode(x) for x in e] for e in ch)
                continue
            yt, yp, w, lo = ch
            k = len(yt) - lo
            cols = [_encode_column(yt[lo:]), _encode_column(yp[lo:]),
                    [1.0] * k if w is None else _encode_column(w[lo:])]
            rows.extend(map(list, zip(*cols)))
        return rows

    @classmethod
    def _from_state(cls, state):
        data = state["data"]
        inner = from_state(data["metric"])
        obj = cls(inner, **state["params"])
        obj.metric = inner
        obj._bind()
        events = _decoded_events(data["events"])
        if obj.size is not None:
            layout = data.get("chunks") or ([[len(events), True]] if events else [])
            if sum(k for k, _ in layout) != len(events):
                raise ValueError(f"state of a Sliding window: chunks {layout!r:.100} do not "
                                 f"hold its {len(events)} events")
            i = 0
            for k, appendable in layout:
                if k < 1:
                    raise ValueError(f"state of a Sliding window: a chunk of {k!r} events")
                part = events[i:i + k]
                if appendable:
                    obj._chunks.append(_Deque(part))
                else:
                    cols = [list(c) for c in zip(*part)]
                    obj._chunks.append([cols[0], cols[1], cols[2], 0])
                i += k
            obj._n = len(events)
            last = obj._chunks[-1] if obj._chunks else None
            obj._tail = last if type(last) is _Deque else None
        else:
            obj._events.extend(events)
        obj._newest = -math.inf if data["newest"] is None else float(data["newest"])
        obj.late = int(data["late"])
        return obj

    def _check(self):
        """Assert the invariants: the events fit the window, and the wrapped metric
        equals a fresh one fed with exactly the window's events."""
        events = self.events()
        if self.size is not None:
            assert len(events) <= self.size, (len(events), self.size)
            assert len(events) == self._n, (len(events), self._n)
            chunks = list(self._chunks)
            for ch in chunks:
                if type(ch) is _Deque:
                    assert ch and all(type(e) is tuple and len(e) == 3 for e in ch)
                    continue
                yt, yp, w, lo = ch
                assert 0 <= lo < len(yt) == len(yp), (lo, len(yt), len(yp))
                assert w is None or len(w) == len(yt)
            assert self._tail is None or (chunks and self._tail is chunks[-1])
            args = [(e[0], e[1], e[2]) for e in events]
        else:
            times = [e[0] for e in events]
            assert times == sorted(times), "events are not ordered by time"
            if events:
                assert times[-1] <= self._newest
                assert times[0] > self._newest - self.period, (times[0], self._newest)
            args = [(e[1], e[2], e[3]) for e in events]
        check = getattr(self.metric, "_check", None)
        if check is not None:
            check()
        fresh = _fresh(self.metric)
        for yt, yp, w in args:
            fresh.update(yt, yp, w=w)
        assert _values_equal(fresh.get(), self.get()), (fresh.get(), self.get())

    def __repr__(self):
        what = f"size={self.size}" if self.size is not None else f"period={self.period:g}"
        value = self.get()
        shown = f"{value:.6f}" if isinstance(value, float) else repr(value)
        return f"Sliding({type(self.metric).__name__}, {what}): {shown}"

    __str__ = __repr__


# -------------------------------------------------------------------------- Tumbling


class Tumbling(Metric):
    """The wrapped metric over consecutive, non-overlapping windows, each reported once.

    Count windows (``size=N``): events ``[kN, (k+1)N)`` in arrival order; window ``k``
    closes on its ``N``-th event. Time windows (``period=P``): events with ``t`` in
    ``[origin + kP, origin + (k+1)P)``, with ``k = floor((t - origin) / P)`` (aligned
    to multiples of ``P`` from ``origin``, by default the Unix epoch, so that
    ``period=3600`` gives clock hours in UTC). Window ``k`` closes once the newest
    event time minus ``lateness`` reaches its end: no accepted event could fall in it
    any more. An event with ``t < newest - lateness``, or for a window already closed
    (by time or by :meth:`flush`), is refused: counted in :attr:`late`, passed to
    ``on_late``.

    Each closed window is reported exactly once, as a record ``{"index": k, "start",
    "end", "n", "value"}`` (``start``/``end``: event ordinals ``[start, end)`` for count
    windows, epoch seconds ``[start, end)`` for time windows; ``n``: events in the
    window; ``value``: the metric's ``get()``, ``nan`` when undefined, e.g. a recall
    without positives). Records go to ``on_close`` if given, else they wait in a queue
    that :meth:`closed` drains. Windows without events produce no record.
    :meth:`flush` closes the open (partial) windows.

    ``get()`` is the value of the last closed window (``nan`` before the first);
    :meth:`partial` is the value of the newest open window so far.

    Runtime complexity of ``update``: one ``update`` of the wrapped metric, `O(1)`;
    closing a window costs one ``get``. ``get``: `O(1)`.

    >>> import streameval as se
    >>> tum = se.Tumbling(se.Recall(), size=2)
    >>> for y, p in [(1, 0.9), (1, 0.2), (1, 0.8), (1, 0.7), (1, 0.1)]:
    ...     tum.update(y, p)
    >>> [(r["start"], r["end"], r["value"]) for r in tum.closed()]
    [(0, 2, 0.5), (2, 4, 1.0)]
    >>> tum.flush()
    >>> [(r["start"], r["end"], r["n"], r["value"]) for r in tum.closed()]
    [(4, 5, 1, 0.0)]

    Parameters
    ----------
    metric
        The metric computed in each window: a template, cloned for each window.
    size : int
        Window length in events. Give ``size`` or ``period``, not both.
    period : float or datetime.timedelta
        Window length in seconds of event time.
    lateness : float or datetime.timedelta
        How long after a window's end its events are still accepted (``period``
        windows; a window closes ``lateness`` seconds of event time after its end).
    origin : float or datetime.datetime
        Where window 0 starts (``period`` windows); default the Unix epoch.
    on_close : callable
        Called with each closed window's record. Not part of the saved state.
    on_late : callable
        Called with ``{"t", "newest", "y_true", "y_pred", "w"}`` for each refused
        event. Not part of the saved state.

    Notes
    -----
    ``merge`` is not supported: closed windows have already been reported and cannot
    be combined afterwards; to combine shards, merge the wrapped metrics of
    corresponding windows (records with the same ``index``) yourself.
    """

    _state_version = 1

    def __init__(self, metric, size=None, period=None, lateness=0.0, origin=0.0,
                 on_close=None, on_late=None):
        for name in ("update", "get"):
            if not callable(getattr(metric, name, None)):
                raise ValueError(f"metric = {metric!r}: a tumbling window needs a metric with {name}()")
        size, period, lateness = _check_window_params(size, period, lateness)
        origin = as_seconds(origin, "origin")
        for name, f in (("on_close", on_close), ("on_late", on_late)):
            if f is not None and not callable(f):
                raise ValueError(f"{name} = {f!r}: must be a callable or None")
        self.size = size
        self.period = period
        self.lateness = lateness
        self.origin = origin
        self.on_close = on_close
        self.on_late = on_late
        self._template = _fresh(metric)
        #: number of refused (late) events
        self.late = 0
        self._pending = collections.deque()
        self._last = None
        # count windows: the open window, its index and the events seen
        self.metric = _fresh(metric)
        self._count = 0
        self._index = 0
        self._seen = 0
        # time windows: open windows {k: [metric, n]}, newest time, last closed index
        self._open = {}
        self._newest = -math.inf
        self._closed_upto = -math.inf

    # -- per event ---------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0, t=None):
        """Add one event to its window; close the windows that are complete.

        The wrapped metric validates the event first: a bad event raises
        ``ValueError`` and changes nothing.
        """
        if self.size is not None:
            self.metric.update(y_true, y_pred, w=w)
            self._seen += 1
            self._count += 1
            if self._count == self.size:
                self._close_count()
            return
        if t is None:
            raise ValueError("t = None: a period window needs the event time t=")
        tt = as_seconds(t)
        k = math.floor((tt - self.origin) / self.period)
        newest = self._newest
        if tt < newest - self.lateness or k <= self._closed_upto:
            _fresh(self._template).update(y_true, y_pred, w=w)  # validate
            self._refuse(y_true, y_pred, w, tt)
            return
        entry = self._open.get(k)
        if entry is None:
            m = _fresh(self._template)
            m.update(y_true, y_pred, w=w)
            self._open[k] = [m, 1]
        else:
            entry[0].update(y_true, y_pred, w=w)
            entry[1] += 1
        if tt > newest:
            self._newest = tt
            self._close_time(math.floor((tt - self.lateness - self.origin) / self.period) - 1)

    def _refuse(self, y_true, y_pred, w, tt):
        self.late += 1
        if self.on_late is not None:
            self.on_late({"t": tt, "newest": self.newest, "y_true": y_true, "y_pred": y_pred, "w": w})

    def _emit(self, record):
        self._last = record
        if self.on_close is not None:
            self.on_close(record)
        else:
            self._pending.append(record)

    def _close_count(self):
        n = self._count
        self._emit({"index": self._index, "start": self._seen - n, "end": self._seen,
                    "n": n, "value": self.metric.get()})
        self.metric = _fresh(self._template)
        self._count = 0
        self._index += 1

    def _close_time(self, upto):
        """Close the open windows with index <= upto, oldest first."""
        if upto <= self._closed_upto:
            return
        self._closed_upto = upto
        open_ = self._open
        for k in sorted(k for k in open_ if k <= upto):
            m, n = open_.pop(k)
            start = self.origin + k * self.period
            self._emit({"index": k, "start": start, "end": start + self.period,
                        "n": n, "value": m.get()})

    def flush(self):
        """Close the open windows now (the partial last window included) and report them.

        Later events for a flushed time window are refused as late. Runtime
        complexity: one ``get`` per open window.
        """
        if self.size is not None:
            if self._count:
                self._close_count()
            return
        if self._open:
            self._close_time(max(self._open))

    def closed(self):
        """Iterate over the closed windows' records not yet taken, oldest first.

        Each record is yielded once (the queue is drained as it is iterated); with an
        ``on_close`` callback the queue stays empty.
        """
        pending = self._pending
        while pending:
            yield pending.popleft()

    def revert(self, y_true, y_pred, w=1.0, t=None):
        """Not supported by tumbling windows."""
        raise NotImplementedError("a tumbling window cannot revert an event")

    def get(self):
        """The value of the last closed window (``nan`` before the first closes).

        Runtime complexity: `O(1)`.
        """
        return _NAN if self._last is None else self._last["value"]

    @property
    def last(self):
        """The record of the last closed window, or ``None``."""
        return self._last

    def partial(self):
        """The value so far of the newest open window (``nan`` if none is open)."""
        if self.size is not None:
            return self.metric.get() if self._count else _NAN
        if not self._open:
            return _NAN
        return self._open[max(self._open)][0].get()

    @property
    def newest(self):
        """The newest event time accepted (``period`` windows); ``None`` before any."""
        return None if self._newest == -math.inf else self._newest

    # -- batches -----------------------------------------------------------------
    def update_many(self, y_true, y_pred, w=None, t=None):
        """Add a batch; same records, in the same order, as a loop of :meth:`update`.

        The whole batch is validated first (``ValueError`` names the index of the
        first bad element); each window's events reach its metric through one
        ``update_many``.

        Runtime complexity: `O(n)` plus `O(n log n)` for time windows (grouping by
        window).
        """
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        y_true, y_pred = _as_seq(y_true), _as_seq(y_pred)
        w = None if w is None else _as_seq(w)
        if self.size is None:
            if t is None:
                raise ValueError("t = None: a period window needs the event times t=")
            ts = as_seconds_array(t, n)
        if not n:
            return self
        _fresh(self._template).update_many(y_true, y_pred, w)  # validate everything first
        if self.size is not None:
            i = 0
            while i < n:
                j = min(n, i + self.size - self._count)
                part = slice(i, j)
                self.metric.update_many(y_true[part], y_pred[part], None if w is None else w[part])
                self._count += j - i
                self._seen += j - i
                if self._count == self.size:
                    self._close_count()
                i = j
            return self
        period, lateness, origin = self.period, self.lateness, self.origin
        before = np.maximum.accumulate(np.concatenate(([self._newest], ts)))[:-1]
        ks = np.floor((ts - origin) / period)
        late = (ts < before - lateness) | (ks <= self._closed_upto)
        accepted = np.flatnonzero(~late)
        if len(accepted):
            ka = ks[accepted]
            order = np.argsort(ka, kind="stable")
            idx = accepted[order]
            ka = ka[order]
            bounds = np.flatnonzero(np.diff(ka)) + 1
            for part in np.split(np.arange(len(idx)), bounds):
                sel = idx[part]
                k = int(ka[part[0]])
                entry = self._open.get(k)
                if entry is None:
                    entry = self._open[k] = [_fresh(self._template), 0]
                entry[0].update_many(_take(y_true, sel), _take(y_pred, sel),
                                     None if w is None else _take(w, sel))
                entry[1] += len(sel)
        for i in np.flatnonzero(late).tolist():
            self.late += 1
            if self.on_late is not None:
                self.on_late({"t": float(ts[i]), "newest": float(before[i]) if before[i] > -math.inf else None,
                              "y_true": y_true[i], "y_pred": y_pred[i],
                              "w": 1.0 if w is None else w[i]})
        newest = float(ts.max())
        if newest > self._newest:
            self._newest = newest
            self._close_time(math.floor((newest - lateness - origin) / period) - 1)
        return self

    # -- protocol ----------------------------------------------------------------
    def clone(self, new_params=None, include_attributes=False):
        """A fresh tumbling window with the same metric and parameters."""
        params = {"size": self.size, "period": self.period, "lateness": self.lateness,
                  "origin": self.origin, "on_close": self.on_close, "on_late": self.on_late}
        if new_params:
            params.update(new_params)
        return type(self)(self._template, **params)

    def _params(self):
        return {"size": self.size, "period": self.period, "lateness": self.lateness,
                "origin": self.origin}

    def merge(self, other):
        """Not supported: closed windows were already reported (see the class notes)."""
        raise ValueError(
            "tumbling windows cannot be merged: their closed windows were already reported; "
            "merge the wrapped metrics of windows with the same index instead"
        )

    def to_state(self):
        """JSON-serialisable state: open windows' metric states, counters, and the
        records not yet taken from :meth:`closed`. Callbacks are not saved."""
        return {
            "type": self._public_name,
            "version": self._state_version,
            "params": self._params(),
            "data": {
                "template": _state_of(self._template),
                "metric": _state_of(self.metric),
                "count": self._count,
                "index": self._index,
                "seen": self._seen,
                "open": [[k, n, _state_of(m)] for k, (m, n) in sorted(self._open.items())],
                "newest": self.newest,
                "closed_upto": None if self._closed_upto == -math.inf else self._closed_upto,
                "late": self.late,
                "pending": [_encode_record(r) for r in self._pending],
                "last": None if self._last is None else _encode_record(self._last),
            },
        }

    @classmethod
    def _from_state(cls, state):
        d = state["data"]
        obj = cls(from_state(d["template"]), **state["params"])
        obj.metric = from_state(d["metric"])
        obj._count, obj._index, obj._seen = int(d["count"]), int(d["index"]), int(d["seen"])
        obj._open = {int(k): [from_state(s), int(n)] for k, n, s in d["open"]}
        obj._newest = -math.inf if d["newest"] is None else float(d["newest"])
        obj._closed_upto = -math.inf if d["closed_upto"] is None else int(d["closed_upto"])
        obj.late = int(d["late"])
        obj._pending.extend(_decode_record(r) for r in d["pending"])
        obj._last = None if d["last"] is None else _decode_record(d["last"])
        return obj

    def _check(self):
        """Assert the invariants of the open windows and counters."""
        if self.size is not None:
            assert 0 <= self._count < self.size, (self._count, self.size)
            assert self._seen >= self._count
            assert not self._open
        else:
            for k, (m, n) in self._open.items():
                assert k > self._closed_upto, (k, self._closed_upto)
                assert n >= 1
                start = self.origin + k * self.period
                assert start - self.period < self._newest, (k, self._newest)
        for m in [self.metric] + [e[0] for e in self._open.values()]:
            check = getattr(m, "_check", None)
            if check is not None:
                check()

    def __repr__(self):
        what = f"size={self.size}" if self.size is not None else f"period={self.period:g}"
        value = self.get()
        shown = f"{value:.6f}" if isinstance(value, float) else repr(value)
        return f"Tumbling({type(self._template).__name__}, {what}): {shown}"

    __str__ = __repr__
