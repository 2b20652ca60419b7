"""Tumbling windows: consecutive, non-overlapping windows of ``size`` events or
``period`` seconds, each reported once (:class:`Tumbling`).

It may import numpy, the standard library, :mod:`streameval.events` (the event-time
parser), :mod:`streameval.metrics.base`, :mod:`streameval.validation` and
:mod:`streameval.windows.common`.
"""

from __future__ import annotations

import collections
import math

import numpy as np

from streameval.events import as_seconds
from streameval.metrics.base import (
    Capabilities,
    Metric,
    check_invariants,
    from_state,
    has_interval,
    interval_parts,
)
from streameval.validation import ValidationError, take_columns
from streameval.windows.common import (
    batch_input,
    MetricOps,
    check_window_params,
    decode_record,
    encode_record,
    fresh,
    report_late,
    slice_columns,
    state_of,
    validate_one,
)

__all__ = ["Tumbling"]

_NAN = math.nan


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
    :meth:`partial` is the value of the newest open window so far; :meth:`interval`
    the confidence interval of the last closed window (over a metric that has one).

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
        event: the values as given to ``update``/``update_many``; from
        ``update_trusted``, the validated values (labels decoded to the configured
        labels, scores and weights as floats). Not part of the saved state.

    Notes
    -----
    ``merge`` is not supported: closed windows have already been reported and cannot
    be combined afterwards; to combine shards, merge the wrapped metrics of
    corresponding windows (records with the same ``index``) yourself.
    """

    _state_version = 1
    #: a tumbling window takes the event time ``t=`` (a count window accepts and ignores
    #: it) and is labelled "tumbling" by the exposition (see metrics.base.Capabilities)
    capabilities = Capabilities(takes_time=True, window_kind="tumbling")

    def __init__(self, metric, size=None, period=None, lateness=0.0, origin=0.0,
                 on_close=None, on_late=None):
        for name in ("update", "get"):
            if not callable(getattr(metric, name, None)):
                raise ValueError(f"metric = {metric!r}: a tumbling window needs a metric with {name}()")
        size, period, lateness = check_window_params(size, period, lateness)
        origin = as_seconds(origin, "origin")
        for name, f in (("on_close", on_close), ("on_late", on_late)):
            if f is not None and not callable(f):
                raise ValidationError(name, f, "must be a callable or None")
        self.size = size
        self.period = period
        self.lateness = lateness
        self.origin = origin
        self.on_close = on_close
        self.on_late = on_late
        self._template = fresh(metric)
        self._ops = MetricOps(self._template)
        #: number of refused (late) events
        self.late = 0
        self._pending = collections.deque()
        self._last = None
        # the last closed window's interval parts (a level-independent summary, see
        # streameval.metrics.base.interval_of), kept where the metric has an interval
        self._intervals = has_interval(self._template)
        self._last_parts = None
        # count windows: the open window, its index and the events seen
        self.metric = fresh(metric)
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
            raise ValidationError("t", None, "a period window needs the event time t=",
                                  message="t = None: a period window needs the event time t=")
        tt = as_seconds(t)
        k = math.floor((tt - self.origin) / self.period)
        newest = self._newest
        if tt < newest - self.lateness or k <= self._closed_upto:
            validate_one(self._ops.validate, y_true, y_pred, w)  # a refused event must be valid
            self._refuse(y_true, y_pred, w, tt)
            return
        entry = self._open.get(k)
        if entry is None:
            m = fresh(self._template)
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

    def _emit(self, record, metric):
        self._last = record
        if self._intervals:  # (before on_close, which may read it)
            self._last_parts = metric._interval_parts()
        if self.on_close is not None:
            self.on_close(record)
        else:
            self._pending.append(record)

    def _close_count(self):
        n = self._count
        self._emit({"index": self._index, "start": self._seen - n, "end": self._seen,
                    "n": n, "value": self.metric.get()}, self.metric)
        self.metric = fresh(self._template)
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
                        "n": n, "value": m.get()}, m)

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

    # -- confidence interval -----------------------------------------------------
    @property
    def _has_interval(self):
        return self._intervals

    def _interval_subject(self):
        return f"Tumbling over {type(self._template).__name__}"

    def _interval_parts(self):
        return self._last_parts

    def interval(self, level=0.95):
        """The confidence interval ``(low, high)`` of the last closed window's value at
        confidence ``level``: exactly the interval of a fresh metric fed that window's
        events (see :meth:`streameval.metrics.base.Metric.interval`; weights are
        frequency weights). ``(nan, nan)`` before the first window closes, or when
        undefined. What the interval needs is kept when a window closes (a few
        numbers, saved in the state: a window restored from a state written before
        intervals existed has ``(nan, nan)`` until its next close).
        ``NotImplementedError`` over a metric without an interval
        (:func:`streameval.metrics.base.has_interval`).

        Runtime complexity: `O(1)` (closing a window computes what the interval
        needs: the wrapped metric's cost, e.g. one numpy pass for ROCAUC).

        >>> import streameval as se
        >>> tum = se.Tumbling(se.Recall(), size=10)
        >>> tum.interval()
        (nan, nan)
        >>> tum.update_many([1] * 12, [0.9] * 8 + [0.1] * 4)
        Tumbling(Recall, size=10): 0.800000
        >>> [round(v, 6) for v in tum.interval(0.95)]
        [0.442181, 0.964573]

        Parameters
        ----------
        level
            The confidence level, a real number in ``(0, 1)``; default 0.95.
        """
        return Metric.interval(self, level)

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
    @property
    def columns(self):
        """The wrapped metric's form of validated columns (see ``Metric.columns``)."""
        return getattr(self._template, "columns", None)

    @property
    def score_bounds(self):
        """The wrapped metric's score range, or None."""
        return getattr(self._template, "score_bounds", None)

    def validate(self, y_true, y_pred, w=None):
        """The wrapped metric's ``validate``: the batch's validated columns, nothing
        changed; a bad element raises ``ValidationError`` with its ``index``."""
        return self._ops.validate(y_true, y_pred, w)

    def check_columns(self, y, s, w=None):
        """The wrapped metric's ``check_columns`` (see ``Metric.check_columns``)."""
        check = getattr(self._template, "check_columns", None)
        if check is not None:
            check(y, s, w)

    def update_trusted(self, y, s, w=None, t=None):
        """Add a batch of columns from :meth:`validate`, unchecked; ``t``: a float64
        array of parsed event times (epoch seconds) for time windows, None for count
        windows. Same records as :meth:`update_many`. Returns ``self``."""
        self._add((y, s, w), t, None)
        return self

    def update_many(self, y_true, y_pred, w=None, t=None):
        """Add a batch; same records, in the same order, as a loop of :meth:`update`.

        The whole batch is validated once, first (a ``ValidationError`` names the
        first bad element and has its ``index``); each window's events reach its
        metric through one ``update_trusted``.

        Runtime complexity: `O(n)` plus `O(n log n)` for time windows (grouping by
        window).
        """
        raw, ts = batch_input(self.size, y_true, y_pred, w, t)
        if len(raw[0]):
            self._add(self._ops.validate(*raw), ts, raw)
        return self

    def _add(self, cols, ts, raw):
        """Add validated columns (``raw``: the values as given, or None)."""
        n = len(cols[0])
        if not n:
            return
        if self.size is not None:
            i = 0
            while i < n:
                j = min(n, i + self.size - self._count)
                MetricOps(self.metric).update_trusted(*slice_columns(cols, slice(i, j)))
                self._count += j - i
                self._seen += j - i
                if self._count == self.size:
                    self._close_count()
                i = j
            return
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
                    entry = self._open[k] = [fresh(self._template), 0]
                MetricOps(entry[0]).update_trusted(*take_columns(cols, sel))
                entry[1] += len(sel)
        late_idx = np.flatnonzero(late)
        if len(late_idx):
            self.late += len(late_idx)
            if self.on_late is not None:
                report_late(self.on_late, self._template, cols, raw, ts, before, late_idx)
        newest = float(ts.max())
        if newest > self._newest:
            self._newest = newest
            self._close_time(math.floor((newest - lateness - origin) / period) - 1)

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
        return self._state_with(state_of)

    def _state_with(self, state_of):
        return {
            "type": self._public_name,
            "version": self._state_version,
            "params": self._params(),
            "data": {
                "template": state_of(self._template),
                "metric": state_of(self.metric),
                "count": self._count,
                "index": self._index,
                "seen": self._seen,
                "open": [[k, n, state_of(m)] for k, (m, n) in sorted(self._open.items())],
                "newest": self.newest,
                "closed_upto": None if self._closed_upto == -math.inf else self._closed_upto,
                "late": self.late,
                "pending": [encode_record(r) for r in self._pending],
                "last": None if self._last is None else encode_record(self._last),
                "last_interval": self._last_parts,
            },
        }

    def state_token(self):
        """A cheap token that changes whenever :meth:`to_array_state` would (events
        counted, windows closed, records drained by :meth:`closed`), for a Monitor's
        capture (see :meth:`~streameval.metrics.ranking._BinaryRanking.state_token`).
        `O(open windows)`."""
        hook = getattr(self.metric, "state_token", None)
        return (self._seen, self._count, self._index, len(self._pending), id(self._last),
                self._closed_upto, self.late, tuple(sorted(self._open)),
                hook() if hook is not None else None)

    def to_array_state(self):
        """The binary checkpoint's state (see :mod:`streameval.metrics.arraystate`):
        :meth:`to_state`'s shape with each wrapped metric's binary state (a score order's
        layout as numpy arrays), marked ``"arrays": 1``. Runtime complexity: what the
        open windows' metrics' hooks cost."""
        from streameval.metrics.arraystate import MARK, array_state
        return dict(self._state_with(array_state), **{MARK: 1})

    @classmethod
    def _from_array_state(cls, state):
        """The inverse of :meth:`to_array_state` (``ValueError`` if malformed)."""
        from streameval.metrics.arraystate import from_array_state
        return cls._from_state(state, load=from_array_state)

    @classmethod
    def _from_state(cls, state, load=from_state):
        d = state["data"]
        obj = cls(load(d["template"]), **state["params"])
        obj.metric = load(d["metric"])
        obj._count, obj._index, obj._seen = int(d["count"]), int(d["index"]), int(d["seen"])
        obj._open = {int(k): [load(s), int(n)] for k, n, s in d["open"]}
        obj._newest = -math.inf if d["newest"] is None else float(d["newest"])
        obj._closed_upto = -math.inf if d["closed_upto"] is None else int(d["closed_upto"])
        obj.late = int(d["late"])
        obj._pending.extend(decode_record(r) for r in d["pending"])
        obj._last = None if d["last"] is None else decode_record(d["last"])
        # (states written before intervals existed lack it: (nan, nan) until a close)
        parts = interval_parts(d.get("last_interval"))
        obj._last_parts = parts if obj._intervals else None
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
            check_invariants(m)

    def __repr__(self):
        what = f"size={self.size}" if self.size is not None else f"period={self.period:g}"
        value = self.get()
        shown = f"{value:.6f}" if isinstance(value, float) else repr(value)
        return f"Tumbling({type(self._template).__name__}, {what}): {shown}"

    __str__ = __repr__
