"""Time sliding windows: the events of the last ``period`` seconds of event time
(``Sliding(metric, period=P)``), with late events placed by time or refused.

The window keeps a deque of ``(t, y_true, y_pred, w)`` tuples ordered by time (ties
in arrival order): events added one at a time as given, batch events as validated
(scores and weights as floats; labels as the bool "is positive", which
:meth:`~_TimeSliding.events` and the state turn back into the configured labels such
as ``"spam"``/``"ham"``; labels that equal a bool, such as 1/0, are stored decoded).
New events reach the metric through ``update_trusted``. Expired batch events leave
through ``revert_trusted`` too (they were validated when they came in:
:func:`~streameval.windows.common.trusted_columns` only converts them back to
columns); events added one at a time, kept as given, leave through ``revert_many``
(vectorised) or a loop of ``revert``.

It may import numpy, the standard library, :mod:`streameval.events` (the event-time
parser), :mod:`streameval.validation`, :mod:`streameval.windows.sliding` (the front
it implements) and :mod:`streameval.windows.common`.
"""

from __future__ import annotations

import collections
import itertools
import math
from operator import itemgetter

import numpy as np

from streameval.events import as_seconds
from streameval.validation import ValidationError, take_columns
from streameval.windows.common import (
    MetricOps,
    as_items,
    decoded_columns,
    decoded_events,
    encode,
    fresh,
    item_columns,
    report_late,
    trusted_columns,
    validate_one,
)
from streameval.windows.sliding import Sliding

__all__ = []


def _bool_like(label):
    """Whether a configured label equals a bool (True, 1, 0.0, ...)."""
    try:
        return bool(label is True or label is False or label == 1 or label == 0)
    except Exception:  # a label whose comparison is not a plain truth value
        return True


class _TimeSliding(Sliding, case="time"):
    """``Sliding(metric, period=P)``: see :class:`~streameval.windows.sliding.Sliding`."""

    def _init_store(self):
        # (t, y_true, y_pred, w) tuples ordered by time
        self._events = collections.deque()

    def _bind(self):
        super()._bind()
        # custom labels ("spam"/"ham") that no bool can stand for: batch events keep
        # their validated bool "is positive" label, decoded only where events leave
        # (events(), the state); a bool in the store is then never a user's label
        labels = self._labels
        self._flags = (self._typed and labels is not None and labels != (False, True)
                       and not any(_bool_like(v) for v in labels))

    # -- per event ---------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0, t=None):
        """Add one event at time ``t``; events older than ``newest - period`` expire.

        The wrapped metric validates the event before the window stores it: a bad
        event raises ``ValueError`` and changes nothing, whether it is late or not.
        """
        if t is None:
            raise ValidationError("t", None, "a period window needs the event time t=",
                                  message="t = None: a period window needs the event time t=")
        tt = t if type(t) is float and t - t == 0.0 else as_seconds(t)
        newest = self._newest
        if tt < newest and (tt < newest - self.lateness or tt <= newest - self.period):
            # a refused event must still be valid
            validate_one(self._ops.validate, y_true, y_pred, w)
            self._refused(tt, newest, y_true, y_pred, w)
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
                    flags, labels = self._flags, self._labels
                    while events[0][0] <= cutoff:
                        old = popleft()
                        y = old[1]
                        if flags and type(y) is bool:  # (_given, inlined: per event)
                            y = labels[y]
                        revert(y, old[2], w=old[3])
        else:
            i = len(events)
            while i and events[i - 1][0] > tt:
                i -= 1
            events.insert(i, (tt, y_true, y_pred, w))

    def _refused(self, tt, newest, y_true, y_pred, w):
        self.late += 1
        if self.on_late is not None:
            self.on_late({"t": tt, "newest": newest, "y_true": y_true, "y_pred": y_pred, "w": w})

    def __len__(self):
        return len(self._events)

    def events(self):
        """The events in the window ordered by time: ``(t, y_true, y_pred, w)`` tuples.

        Runtime complexity: `O(n)`.
        """
        if self._flags:
            given = self._given
            return [(t, given(y), s, w) for t, y, s, w in self._events]
        return list(self._events)

    # -- batches -----------------------------------------------------------------
    def _items(self, cols, raw, idx):
        """``(y_true, y_pred, w)`` lists of events ``idx`` to store: validated and
        decoded for binary and regression metrics, else as given."""
        if self._flags:
            y, s, w = take_columns(cols, idx)  # bool labels: decoded when they leave
        elif self._typed:
            y, s, w = decoded_columns(self.metric, take_columns(cols, idx))
        else:
            y, s, w = take_columns(cols if raw is None else raw, idx)
        ys = as_items(y)
        return ys, as_items(s), [1.0] * len(ys) if w is None else as_items(w)

    def _add(self, cols, ts, raw):
        n = len(ts)
        if not n:
            return
        period, lateness = self.period, self.lateness
        newest0 = self._newest
        before = np.maximum.accumulate(np.concatenate(([newest0], ts)))[:-1]
        late = (ts < before - lateness) | (ts <= before - period)
        newest = max(newest0, float(ts.max()))
        cutoff = newest - period
        accepted = np.flatnonzero(~late & (ts > cutoff))
        events = self._events
        expired = 0
        for item in events:
            if item[0] > cutoff:
                break
            expired += 1
        ys, ps, ws = self._items(cols, raw, accepted)
        new_items = list(zip(ts[accepted].tolist(), ys, ps, ws))
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
        acc = take_columns(cols, accepted) if len(accepted) else None
        if expired > self._rebuild_fraction * max(size_after, 1):
            # rebuild from the kept events and the accepted batch events
            other = fresh(self.metric)
            ops = MetricOps(other)
            kept = list(itertools.islice(events, expired, None))
            if kept:
                self._add_stored(ops, kept)
            if acc is not None:
                ops.update_trusted(*acc)
            self.metric = other
            self._bind()
        else:
            if acc is not None:
                self._ops.update_trusted(*acc)
            if expired:  # (the metric's ops pick its vectorised revert or a loop)
                self._remove_stored(list(itertools.islice(events, expired)))
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
            self.late += len(late_idx)
            if self.on_late is not None:
                report_late(self.on_late, self.metric, cols, raw, ts, before, late_idx)

    def _given(self, y):
        """A stored label as the metric's ``update`` takes it (a bool flag decoded)."""
        if self._flags and type(y) is bool:
            return self._labels[y]
        return y

    def _refill(self, ops):
        if self._events:
            self._add_stored(ops, list(self._events))

    def _add_stored(self, ops, items):
        """Add stored events to a metric (its ops): through the trusted path when
        they are batch events (stored validated), else through ``update_many``."""
        cols = item_columns(items, 1)
        trusted = trusted_columns(self.metric, *cols, flags=self._flags)
        if trusted is not None:
            ops.update_trusted(*trusted)
        else:
            ops.add_raw(*self._given_columns(cols))

    def _remove_stored(self, items):
        """Revert expired stored events: through the trusted path when they are batch
        events (validated when they came in), else through ``revert_many``."""
        cols = item_columns(items, 1)
        trusted = trusted_columns(self.metric, *cols, flags=self._flags)
        if trusted is not None:
            self._ops.revert_trusted(*trusted)
        else:
            self._ops.remove_raw(*self._given_columns(cols))

    def _given_columns(self, cols):
        """Stored columns as the metric's ``update_many`` takes them (flags decoded)."""
        if self._flags:
            cols = [list(map(self._given, cols[0])), cols[1], cols[2]]
        return cols

    def _merge_window(self, other):
        newest = max(self._newest, other._newest)
        cutoff = newest - self.period
        contents = sorted(list(self._events) + list(other._events), key=itemgetter(0))
        contents = [e for e in contents if e[0] > cutoff]
        rebuilt = fresh(self.metric)
        if contents:
            self._add_stored(MetricOps(rebuilt), contents)
        self.metric = rebuilt
        self._bind()
        self._events = collections.deque(contents)
        self._newest = newest
        self.late += other.late

    # -- state -------------------------------------------------------------------
    def _stored_state(self):
        return {"events": [[encode(x) for x in e] for e in self.events()], "chunks": None}

    def _restore(self, data):
        events = decoded_events(data["events"])
        if self._flags:  # the configured labels back to bool flags
            neg, pos = self._labels
            events = [(t, True if y == pos else False if y == neg else y, s, w)
                      for t, y, s, w in events]
        self._events.extend(events)

    def _stored_arrays(self):
        """The stored events as numpy columns for a binary checkpoint
        (``{"t", "y", "s", "w"}``: float64 times, labels as stored, bool or int64,
        float64 scores and weights), or None (the JSON state then) when a column holds
        values of other types (events added one at a time as given). The values come
        back as they were stored, types included. Runtime complexity: `O(n)` (the
        events are Python tuples)."""
        events = self._events
        if not events:
            return {"t": np.empty(0), "y": np.empty(0, dtype=bool), "s": np.empty(0),
                    "w": np.empty(0)}
        t, y, s, w = zip(*events)
        if type(y[0]) is bool and all(type(v) is bool for v in y):
            yc = np.array(y, dtype=bool)
        elif type(y[0]) is int and all(type(v) is int for v in y) and \
                -(1 << 63) <= min(y) and max(y) < (1 << 63):
            yc = np.array(y, dtype=np.int64)
        else:
            return None
        if not all(type(v) is float for v in s) or not all(type(v) is float for v in w):
            return None
        return {"t": np.array(t, dtype=np.float64), "y": yc,
                "s": np.array(s, dtype=np.float64), "w": np.array(w, dtype=np.float64)}

    def _restore_arrays(self, store):
        """Restore :meth:`_stored_arrays`, checked (``ValueError``): same lengths,
        times ascending."""
        if not (isinstance(store, dict) and set(store) == {"t", "y", "s", "w"}):
            raise ValueError("bad Sliding state: store must hold the columns t, y, s, w")
        t, y, s, w = (store[k] for k in ("t", "y", "s", "w"))
        if not (all(isinstance(a, np.ndarray) and a.ndim == 1 for a in (t, y, s, w))
                and t.dtype == s.dtype == w.dtype == np.float64
                and y.dtype in (np.dtype(bool), np.dtype(np.int64))
                and len(t) == len(y) == len(s) == len(w)):
            raise ValueError("bad Sliding state: columns t, y, s, w must be 1-d float64 "
                             "(y bool or int64) of one length")
        if len(t) and not (np.isfinite(t).all() and (np.diff(t) >= 0).all()):
            raise ValueError("bad Sliding state: event times must be finite and ascending")
        self._events.extend(zip(t.tolist(), y.tolist(), s.tolist(), w.tolist()))

    def _check(self):
        """Assert the invariants: events ordered by time within
        ``(newest - period, newest]``, and the wrapped metric equals a fresh one fed
        with exactly the window's events."""
        events = self.events()
        times = [e[0] for e in events]
        assert times == sorted(times), "events are not ordered by time"
        if events:
            assert times[-1] <= self._newest
            assert times[0] > self._newest - self.period, (times[0], self._newest)
        assert math.isfinite(self._newest) or not events
        self._check_metric([(e[1], e[2], e[3]) for e in events])
