"""The public front :class:`Sliding`: what count and time sliding windows share.

``Sliding(metric, size=N)`` is a count window (:mod:`streameval.windows.count`),
``Sliding(metric, period=P)`` a time window (:mod:`streameval.windows.timed`): the
:class:`~streameval.metrics.base.Cases` dispatch picks the case class, an instance of
:class:`Sliding` either way. This module holds the constructor, the batch entry
points (``validate``, ``update_many``, ``update_trusted``), state and merge
plumbing; each case module holds its storage and expiry.

It may import numpy, the standard library, :mod:`streameval.events` (the event-time
parser), :mod:`streameval.metrics.base`, :mod:`streameval.metrics.arraystate` (binary
states, inside the state methods), :mod:`streameval.validation` and
:mod:`streameval.windows.common`.
"""

from __future__ import annotations

import math

from streameval.metrics.base import (
    Capabilities,
    Cases,
    Metric,
    capabilities,
    check_invariants,
    from_state,
    has_interval,
)
from streameval.validation import ValidationError
from streameval.windows.common import (
    batch_input,
    MetricOps,
    as_seq,
    check_window_params,
    fresh,
    rebuild_fraction,
    same_metric,
    state_of,
    typed,
    values_equal,
)

__all__ = ["Sliding"]


class Sliding(Cases):
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

    ``Sliding(metric, size=N)`` and ``Sliding(metric, period=P)`` are instances of
    one case class each (count and time windows), both instances of ``Sliding``.

    Batches are validated once (the wrapped metric's ``validate``) and added with its
    ``update_trusted``; a caller that validated already (a Monitor) calls
    :meth:`update_trusted` directly. :attr:`columns` and :attr:`score_bounds` are
    the wrapped metric's.

    Runtime complexity of ``update``: one ``update`` and, once the window is full, one
    ``revert`` of the wrapped metric, plus `O(1)` (or `O(k)` for an event placed
    before ``k`` newer ones); ``get``: the wrapped metric's ``get``. ``update_many`` of
    ``m`` events on a count window: one ``update_trusted`` and one ``revert_trusted``
    per stored chunk the expired events span (usually one or two; one for them all
    over exact ROC AUC and AP with weights of 1, which on windows of up to
    :data:`~streameval.metrics.scoreorder.FLAT_MAX` events defer it, with the batch,
    to their next read: one rebuild of their order per read), plus `O(m)` to copy the
    batch's columns; a whole stored batch is reverted with what the metric computed
    from it when it came in (its batch sums, its confusion cells).

    Storage (count windows): each batch is kept as one
    :class:`~streameval.windows.chunks.Chunk` of columns, the validated numpy
    columns (bool labels, float scores, weights: about 17 bytes per event) when the
    wrapped metric has them (binary and regression metrics), Python lists of the
    values as given otherwise (retrieval, text); events added one at a time are kept
    as tuples (:class:`~streameval.windows.chunks.EventRun`). Expired events are
    removed from the metric a chunk slice at a time.

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
        refused event: the values as given to ``update``/``update_many``; from
        ``update_trusted``, the validated values (labels decoded to the configured
        labels, scores and weights as floats). Not part of the saved state.

    Notes
    -----
    The window keeps references to the events' arguments to revert them later: do not
    mutate a list or dict after passing it to ``update``. ``t`` is ignored by count
    windows. ``merge``: a count window appends the other window's events after its own
    (the last ``size`` of both); a time window takes the union of both windows' events
    by time, relative to the newer of the two newest times (lateness does not apply).
    """

    _state_version = 1
    #: a window takes the event time ``t=`` (a count window accepts and ignores it) and
    #: is labelled "sliding" by the exposition (see metrics.base.Capabilities)
    capabilities = Capabilities(takes_time=True, window_kind="sliding")

    @classmethod
    def _case(cls, args, kwargs):
        size = args[1] if len(args) > 1 else kwargs.get("size")
        return "count" if size is not None else "time"

    def __init__(self, metric, size=None, period=None, lateness=0.0, on_late=None):
        for name in ("update", "revert", "get"):
            if not callable(getattr(metric, name, None)):
                raise ValueError(
                    f"metric = {metric!r}: a sliding window needs a metric with {name}()"
                    + (" (its events are reverted on expiry)" if name == "revert" else "")
                )
        size, period, lateness = check_window_params(size, period, lateness)
        if period is not None and lateness > period:
            raise ValidationError(
                "lateness", lateness, f"> period = {period!r}",
                message=f"lateness = {lateness!r} > period = {period!r}: an event older "
                        "than the window could never be in it")
        if on_late is not None and not callable(on_late):
            raise ValidationError("on_late", on_late, "must be a callable or None")
        self.size = size
        self.period = period
        self.lateness = lateness
        self.on_late = on_late
        self.metric = fresh(metric)
        #: number of refused (late) events
        self.late = 0
        self._newest = -math.inf
        self._init_store()
        self._bind()

    def _init_store(self):
        raise NotImplementedError

    def _bind(self):
        """Bind the wrapped metric's methods (after it is created or replaced)."""
        m = self.metric
        self._update = m.update
        self._revert = m.revert
        # the fast paths the metric declares (see metrics.base.Capabilities), bound once:
        caps = capabilities(m)
        # update and revert in one call (binary ranking metrics: one layer less per event)
        self._replace = caps.swap
        # several expired slices reverted in one call where the metric gives the same
        # bits that way (binary ranking metrics with weights of 1: one rebuild of the
        # score order instead of one per slice); count windows only
        self._joined = caps.revert_joined
        # expired slices whose removal the metric may defer to its next read, to the
        # same bits (binary ranking metrics, weights of 1, a small order: one rebuild
        # per read instead of one per batch); count windows only
        self._later = caps.revert_later
        self._get = m.get
        self._ops = MetricOps(m)
        self._typed = typed(m)
        self._rebuild_fraction = rebuild_fraction(m)
        labels = None
        if getattr(m, "columns", None) == "binary" and callable(getattr(m, "label_of", None)):
            labels = (m.label_of(False), m.label_of(True))
        self._labels = labels

    # -- the trusted path ----------------------------------------------------------
    @property
    def columns(self):
        """The wrapped metric's form of validated columns (see ``Metric.columns``)."""
        return getattr(self.metric, "columns", None)

    @property
    def score_bounds(self):
        """The wrapped metric's score range, or None."""
        return getattr(self.metric, "score_bounds", None)

    def validate(self, y_true, y_pred, w=None):
        """The wrapped metric's ``validate``: the batch's validated columns, nothing
        changed; a bad element raises ``ValidationError`` with its ``index``.

        For a metric whose columns are its own form (``columns`` None: retrieval,
        text), the columns are the batch as given, once checked: such a metric's
        validated form (text statistics) need not be what its ``revert`` takes back,
        and a count or time window must keep events it can expire."""
        cols = self._ops.validate(y_true, y_pred, w)
        if self._typed:
            return cols
        return as_seq(y_true), as_seq(y_pred), None if w is None else as_seq(w)

    def check_columns(self, y, s, w=None):
        """The wrapped metric's ``check_columns`` (see ``Metric.check_columns``); over a
        metric without typed columns, the check :meth:`update_trusted` makes first (its
        ``validate``)."""
        if not self._typed:
            self._ops.validate(y, s, w)
            return
        check = getattr(self.metric, "check_columns", None)
        if check is not None:
            check(y, s, w)

    def update_trusted(self, y, s, w=None, t=None):
        """Add a batch of columns from :meth:`validate`, unchecked; ``t``: a float64
        array of event times already parsed (epoch seconds, e.g. by
        :func:`streameval.events.as_seconds_array`), for time windows; None for count
        windows. Same result as :meth:`update_many`. Returns ``self``.

        Over a metric with ``columns`` None the columns are the batch as given (see
        :meth:`validate`), which the metric turns into its own form once more."""
        if self._typed:
            self._add((y, s, w), t, None)
        else:
            self._add(self._ops.validate(y, s, w), t, (y, s, w))
        return self

    def update_many(self, y_true, y_pred, w=None, t=None):
        """Add a batch; same result as a loop of :meth:`update`, validated first.

        The whole batch is validated once, before anything changes (a
        ``ValidationError`` names the first bad element and has its ``index``), late
        events included. Only the events still in the window at the end of the batch
        reach the wrapped metric, through its ``update_trusted``.

        Runtime complexity: `O(n)` (vectorised by the wrapped metric), plus
        `O(n log n)` to place the events of a ``period`` window by time.
        """
        raw, ts = batch_input(self.size, y_true, y_pred, w, t)
        if len(raw[0]):
            self._add(self._ops.validate(*raw), ts, raw)
        return self

    def _add(self, cols, ts, raw):
        """Add validated columns (``raw``: the values as given, or None)."""
        raise NotImplementedError

    # -- the metric protocol -------------------------------------------------------
    def revert(self, y_true, y_pred, w=1.0, t=None):
        """Not supported: a window removes its own events on expiry."""
        raise NotImplementedError("a window cannot revert an event; events expire on their own")

    def get(self):
        """The wrapped metric's value over the window (``nan`` when undefined).

        Runtime complexity: the wrapped metric's ``get``.
        """
        return self._get()

    # -- confidence interval -----------------------------------------------------
    @property
    def _has_interval(self):
        return has_interval(self.metric)

    def _interval_subject(self):
        return f"Sliding over {type(self.metric).__name__}"

    def _interval_parts(self):
        return self.metric._interval_parts()

    def interval(self, level=0.95):
        """The wrapped metric's confidence interval ``(low, high)`` over the window's
        events at confidence ``level``: exactly the interval of a fresh metric fed the
        events in the window (see :meth:`streameval.metrics.base.Metric.interval`;
        weights are frequency weights). ``(nan, nan)`` when undefined (an empty window).
        ``NotImplementedError`` over a metric without an interval
        (:func:`streameval.metrics.base.has_interval`), ``ValueError`` for a ``level``
        not in ``(0, 1)``.

        Runtime complexity: the wrapped metric's ``interval``.

        >>> import streameval as se
        >>> win = se.Sliding(se.Recall(), size=10)
        >>> win.update_many([1] * 12, [0.1, 0.1] + [0.9] * 8 + [0.1] * 2)
        Sliding(Recall, size=10): 0.800000
        >>> [round(v, 6) for v in win.interval(0.95)]
        [0.442181, 0.964573]

        Parameters
        ----------
        level
            The confidence level, a real number in ``(0, 1)``; default 0.95.
        """
        return Metric.interval(self, level)

    @property
    def newest(self):
        """The newest event time accepted (``period`` windows); ``None`` before any."""
        return None if self._newest == -math.inf else self._newest

    def clone(self, new_params=None, include_attributes=False):
        """A fresh, empty window with the same metric and parameters."""
        params = {"size": self.size, "period": self.period, "lateness": self.lateness,
                  "on_late": self.on_late}
        if new_params:
            params.update(new_params)
        if params.get("size") is not None:
            params["lateness"] = 0.0
        return Sliding(self.metric, **params)

    def _params(self):
        return {"size": self.size, "period": self.period, "lateness": self.lateness}

    def replace_metric(self, metric):
        """Wrap ``metric`` (an empty metric of the same kind: other parameters, e.g. a
        new calibration map) instead of the current one, fed the events the window holds,
        so that it reverts each of them as it counted it. Runtime complexity: one batch
        update of the events held."""
        self.metric = metric
        self._bind()
        self._refill(self._ops)

    def _refill(self, ops):
        raise NotImplementedError

    def merge(self, other):
        """Fold in another window over the same metric with the same parameters.

        Count windows: as if ``other``'s events had been sent here after this window's
        events (the last ``size`` of both stay). Time windows: the union of both
        windows' events, placed by time, within ``period`` of the newer newest time;
        lateness does not apply, ``late`` counts add up. Returns ``self``.

        Runtime complexity: `O(n)` for count windows, `O(n log n)` for time windows.
        """
        if not isinstance(other, Sliding) or self._params() != other._params():
            raise ValueError(
                f"cannot merge a window {other._params() if isinstance(other, Metric) else other} "
                f"into a window {self._params()}"
            )
        if not same_metric(self.metric, other.metric):
            raise ValueError(
                f"cannot merge windows over different metrics: {other.metric!r} into {self.metric!r}"
            )
        self._merge_window(other)
        return self

    def to_state(self):
        """JSON-serialisable state: the wrapped metric's state and the window's events.

        The ``on_late`` callback is not saved: pass it again after ``from_state``
        (``window.on_late = f``).
        """
        data = {"metric": state_of(self.metric), "newest": self.newest, "late": self.late}
        data.update(self._stored_state())
        return {"type": self._public_name, "version": self._state_version,
                "params": self._params(), "data": data}

    @classmethod
    def _from_state(cls, state):
        data = state["data"]
        inner = from_state(data["metric"])
        obj = Sliding(inner, **state["params"])
        obj.metric = inner
        obj._bind()
        obj._restore(data)
        obj._newest = -math.inf if data["newest"] is None else float(data["newest"])
        obj.late = int(data["late"])
        return obj

    def _stored_arrays(self):
        """The stored batches as numpy columns for a binary checkpoint, or None (the
        JSON state then): what a window keeping typed batches overrides."""
        return None

    def _restore_arrays(self, store):
        """Restore :meth:`_stored_arrays` (``ValueError`` when this window keeps none)."""
        raise ValueError("bad Sliding state: stored arrays in a window that keeps none")

    def state_token(self):
        """A cheap token of the window's state for a Monitor's capture (see
        :meth:`~streameval.metrics.ranking._BinaryRanking.state_token`): the wrapped
        metric's, with the window's newest event and late count (a window changes
        only with events). `O(1)`."""
        hook = getattr(self.metric, "state_token", None)
        return (self.newest, getattr(self, "late", None), hook() if hook else None)

    def to_array_state(self):
        """The binary checkpoint's state (see :mod:`streameval.metrics.arraystate`): the
        wrapped metric's binary state and the stored batches as their numpy columns,
        as they are; None (the JSON ``to_state`` then) for windows that keep Python
        values. Runtime complexity: `O(chunks)` (the columns are not copied)."""
        store = self._stored_arrays()
        if store is None:
            return None
        from streameval.metrics.arraystate import MARK, array_state
        data = {"metric": array_state(self.metric), "newest": self.newest,
                "late": self.late, "store": store}
        return {"type": self._public_name, "version": self._state_version,
                "params": {"size": self.size, "period": self.period,
                           "lateness": self.lateness}, "data": data, MARK: 1}

    @classmethod
    def _from_array_state(cls, state):
        from streameval.metrics.arraystate import from_array_state
        data = state["data"]
        if set(data) != {"metric", "newest", "late", "store"}:
            raise ValueError("bad Sliding state: expected keys late, metric, newest, store")
        inner = from_array_state(data["metric"])
        obj = Sliding(inner, **state["params"])
        obj.metric = inner
        obj._bind()
        obj._restore_arrays(data["store"])
        newest, late = data["newest"], data["late"]
        if not (newest is None or type(newest) in (int, float)) or type(late) is not int:
            raise ValueError("bad Sliding state: newest must be a number or null and late "
                             "an int")
        obj._newest = -math.inf if newest is None else float(newest)
        obj.late = late
        return obj

    def _check_metric(self, args):
        """Assert the wrapped metric's invariants and that it equals a fresh one fed
        with exactly ``args``, the window's events."""
        check_invariants(self.metric)
        other = fresh(self.metric)
        for yt, yp, w in args:
            other.update(yt, yp, w=w)
        a, b = other.get(), self.get()
        assert values_equal(a, b), (a, b)

    def __repr__(self):
        what = f"size={self.size}" if self.size is not None else f"period={self.period:g}"
        value = self.get()
        shown = f"{value:.6f}" if isinstance(value, float) else repr(value)
        return f"Sliding({type(self.metric).__name__}, {what}): {shown}"

    __str__ = __repr__
