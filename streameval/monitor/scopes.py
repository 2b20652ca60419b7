"""Scopes: what the Monitor keeps for the whole stream and for each segment.

A :class:`Scope` holds one copy of every metric, window, drift test and rule instance
of a Monitor, for the whole stream (``key`` None) or for one segment, and its own event
count ``n``. It feeds admitted columns to its objects (the metrics' trusted path, once
per batch, inside one :class:`~streameval.metrics.base.shared_batch`), and reads their
values, drift reports and late counts for the evaluator
(:mod:`streameval.monitor.evaluation`).

Label-free objects (``needs_labels = False`` on the metric or the metric a window
holds: estimates from scores, score drift) count every prediction when it is made:
:meth:`Scope.predict_many` feeds them alone, and :meth:`Scope.update_many` feeds them
with the labelled ones unless the events were given to ``predict_many`` already
(``free=False``: the labels of earlier predictions). The scope counts its label
coverage: predictions, labelled, expired and replaced ones (:meth:`Scope.coverage`).

A segment's scope keeps its events in a buffer until its own evaluation point
(:meth:`Scope.pend`, :meth:`Scope.feed_pending`): complete events, labels of earlier
predictions and predictions alike, each with its kind, so that at the feed its labelled
objects take the labels and complete events and its label-free objects the predictions
and complete events, each in arrival order. Its label coverage counts events when they
are buffered; its values cover the events fed.

:func:`share_orders` makes the score-order and confusion-family metrics of a scope that
hold the same state share it (one order, one matrix, read through views), and the
estimate checks that differ only in what they report (one pair of metrics).

Imports: numpy, the standard library, :mod:`streameval.events` (the event kinds),
:mod:`streameval.windows` and
:mod:`streameval.metrics` (the protocol, the shared score order, confusion matrix and
estimate check).
Never another part of the Monitor's package, the pipeline, ``io``, the CLI or the
service.
"""

from __future__ import annotations

import math

import numpy as np

from streameval.events import KIND_EVENT, KIND_LABEL, KIND_PREDICTION
from streameval.metrics.base import SharedView, capabilities, needs_time, shared_batch
from streameval.metrics.checked import CheckView, check_key
from streameval.metrics.confusion import CountsView, counts_key
from streameval.metrics.ranking import OrderView, order_key
from streameval.windows import Sliding

__all__ = ["Scope", "share_orders", "inner", "fresh", "report_dict", "trusted", "HOLD_FROM",
           "READ_RATIO", "label_free", "widen"]

#: A cumulative value whose read costs `O(n)` (average precision, a coarsened order's
#: AUC with its error bound: :meth:`~streameval.metrics.ranking._BinaryRanking.read_size`)
#: is recomputed at every evaluation while its order holds at most this many events;
#: beyond, once per ``read_size / READ_RATIO`` events of its scope, and rows in between
#: carry the last value with the count it covers (``as_of``): at most a 32nd of its
#: events behind (just past it, every third evaluation of 1 000 events). Below it (every
#: bundled scenario but the 2-million-event one, a segment of tens of thousands of
#: events) every row is fresh. A segment of a few hundred thousand events, the usual
#: size of the busiest of a thousand segments of a long stream, would otherwise pay
#: a pass over its order at every row.
HOLD_FROM = 1 << 16

#: Events per entry read between two recomputations of a held value (see
#: :data:`HOLD_FROM`): a read of ``k`` entries is paid by ``k / READ_RATIO`` events,
#: about ``READ_RATIO`` numpy element passes per event, whatever the stream's length.
READ_RATIO = 32


#: the kinds of shared state: what decides it, and the read-only view of an owner's
_SHARED = (("order", order_key, OrderView), ("counts", counts_key, CountsView),
           ("check", check_key, CheckView))


def _share_key(obj):
    """The key of the state ``obj`` holds that another metric may share: a binary
    score-order metric's order, a binary confusion-family metric's matrix, or a sliding
    window over one (with its size or period); None for anything else."""
    window = isinstance(obj, Sliding)
    if window and obj.on_late is not None:
        return None
    inner_ = obj.metric if window else obj
    for kind, key_of, _ in _SHARED:
        key = key_of(inner_)
        if key is not None:
            where = ("sliding", obj.size, obj.period, obj.lateness) if window else ("cumulative",)
            return (kind, *where, key)
    return None


def inner(obj):
    """The metric a sliding window holds, or ``obj`` itself."""
    return obj.metric if isinstance(obj, Sliding) else obj


def share_orders(metrics):
    """One score order and one confusion matrix per stream, window and labels: every
    binary score-order metric (cumulative AUC, AP, curves...; or a sliding window over
    one) whose order another one before it already holds becomes an
    :class:`~streameval.metrics.ranking.OrderView` of that one, and every binary
    metric of the confusion family (precision, recall, F1, accuracy...; or a sliding
    window over one) whose matrix (threshold and labels) another one before it
    already holds a :class:`~streameval.metrics.confusion.CountsView` of that one (an
    estimate check of the same metrics: a :class:`~streameval.metrics.checked.CheckView`).
    Values, rows and states are those of unshared metrics; the order or matrix is
    updated once instead of once per metric (the default monitor: 2 orders, not 4,
    and 2 matrices, not 8)."""
    views = {kind: view for kind, _, view in _SHARED}
    owners = {}
    out = {}
    for name, obj in metrics.items():
        key = _share_key(obj)
        owner = owners.get(key) if key is not None else None
        if owner is None:
            if key is not None:
                owners[key] = obj
            out[name] = obj
        else:
            out[name] = views[key[0]](obj, owner, inner)
    return out


def label_free(obj):
    """Whether ``obj`` (a metric, a window over one, a drift test) counts predictions
    without labels: it declares ``needs_labels = False`` (a window: its metric does)."""
    return getattr(inner(obj), "needs_labels", True) is False


def _bindings(objs):
    """The update callables of ``objs``: ``(plain, timed, trusted, trusted_timed,
    plain_many, timed_many)``, one event or a batch, with or without event times, on the
    trusted path or not."""
    ok = [o for o in objs if trusted(o)]
    other = [o for o in objs if not trusted(o)]
    return ([o.update for o in objs if not needs_time(o)],
            [o.update for o in objs if needs_time(o)],
            [o.update_trusted for o in ok if not needs_time(o)],
            [o.update_trusted for o in ok if needs_time(o)],
            [o.update_many for o in other if not needs_time(o)],
            [o.update_many for o in other if needs_time(o)])


def _stops(drift, rules, trusted_updates, trusted_timed):
    """``(until_change, detectors, other trusted updates, other timed ones)`` for
    :meth:`Scope.update_until_alarm`: the drift tests that a rule reads and that
    declare ``until_change`` (those of the first such function), or None."""
    read = {r.metric for r in rules}
    until, found = None, []
    for name, d in drift.items():
        fn = capabilities(d).until_change if name in read and trusted(d) else None
        if fn is not None and until in (None, fn):
            until = fn
            found.append(d)
    if not found:
        return None
    skip = {id(d) for d in found}
    return (until, found, [u for u in trusted_updates if id(u.__self__) not in skip],
            [u for u in trusted_timed if id(u.__self__) not in skip])


def trusted(obj):
    """Whether ``obj`` takes a Monitor's validated binary columns on its trusted path."""
    return getattr(obj, "columns", None) == "binary" and callable(
        getattr(obj, "update_trusted", None))


def fresh(obj):
    """A new, empty object with the same parameters (``clone()`` where it exists)."""
    clone = getattr(obj, "clone", None)
    if callable(clone):
        return clone()
    return type(obj)(**obj._params())


def report_dict(rep):
    """A drift report as a JSON-ready dict (NaN -> None, inf -> None)."""
    if isinstance(rep, dict):
        d = dict(rep)
    elif callable(getattr(rep, "to_dict", None)):
        d = rep.to_dict()
    else:  # pragma: no cover - defensive
        d = dict(vars(rep))
    for k, v in d.items():
        if isinstance(v, float) and not math.isfinite(v):
            d[k] = None
        elif isinstance(v, np.generic):
            d[k] = v.item()
    return d


def _bound_reader(m):
    """A callable giving ``m``'s error bound (0.0 when its value is exact), or None
    for a metric that declares none: a score-order metric or a view of one (its
    ``exact`` and ``error_bound``), or a sliding window over one."""
    target = m.metric if isinstance(m, Sliding) else m
    if not callable(getattr(type(target), "error_bound", None)):
        return None
    if isinstance(m, Sliding):
        def bound():
            cur = m.metric
            return 0.0 if getattr(cur, "exact", True) else float(cur.error_bound())
        return bound

    def bound():
        return 0.0 if getattr(m, "exact", True) else float(m.error_bound())
    return bound


def _value(v):
    """A metric value as a JSON number, or None where it is undefined (NaN)."""
    v = float(v)
    return None if v != v else v


def _row(kind, bit):
    """The index of row ``bit`` (1: weights, 2: times, 4: event kinds) in a buffer block
    of layout ``kind`` (:meth:`Scope.pend`)."""
    return 2 + bin(kind & (bit - 1)).count("1")


def widen(block, kind, to):
    """A buffer block (:meth:`Scope.pend`) of layout ``kind`` in layout ``to`` (which has
    every row ``kind`` has): weights (1.0), times (NaN) and event kinds (complete) filled
    in where ``kind`` has none."""
    if kind == to:
        return block
    k = block.shape[1]
    rows = [block[0], block[1]]
    for bit, fill in ((1, 1.0), (2, math.nan), (4, float(KIND_EVENT))):
        if to & bit:
            rows.append(block[_row(kind, bit)] if kind & bit else np.full(k, fill))
    return np.vstack(rows)


def _plain_columns(w, t):
    """``(w, t)`` as the buffer gives them: weights None when all are 1.0, times None
    when all are unknown."""
    if w is not None and bool((w == 1.0).all()):
        w = None
    if t is not None and bool(np.isnan(t).all()):
        t = None
    return w, t


class Scope:
    """The whole stream's or one segment's metrics, drift tests and rule instances.

    ``key`` is the hashable segment key (None: the whole stream), ``label`` its JSON
    form (written in rows), ``n`` the events this scope counted. ``metrics`` and
    ``drift`` map names to the scope's own objects (``share=True``: through
    :func:`share_orders`), ``rules`` are its rule instances. The objects are bound once,
    at construction: a scope feeds every object that is not a read-only view. With
    ``feed=False`` the scope is read only (:meth:`values`, :meth:`reports`, its rules):
    its owner feeds the objects (Spark's replay merges partition states into them), which
    then need only ``get`` (and ``interval`` for rules with a confidence, ``late`` for
    windows by period).

    Runtime complexity: :meth:`update` one ``update`` per object; :meth:`update_many`
    one ``update_trusted`` (or ``update_many``) per object; :meth:`values` one ``get``
    per metric.

    >>> import numpy as np, streameval as se
    >>> sc = Scope(None, None, {"auc": se.ROCAUC(), "recall": se.Recall()}, {}, [])
    >>> sc.update_many(np.array([True, False, True]), np.array([0.9, 0.2, 0.4]), None, None,
    ...                lambda y: y)
    >>> sc.n, sc.values({})
    (3, {'auc': 1.0, 'recall': 0.5})
    """

    __slots__ = ("key", "label", "n", "metrics", "drift", "rules", "_plain", "_timed",
                 "_trusted", "_trusted_timed", "_plain_many", "_timed_many", "_queues",
                 "eval_n", "held", "_read", "_fresh", "_reports", "_pend", "_pend_one",
                 "pending", "_pend_free", "_pend_labelled", "_free", "n_predictions",
                 "n_predicted", "n_expired", "n_replaced", "eval_predicted", "stops",
                 "_reporters")

    def __init__(self, key, label, metrics, drift, rules, share=True, feed=True):
        self.key = key          # hashable (None: the whole stream)
        self.label = label      # JSON form, written in rows
        self.n = 0
        self.metrics = share_orders(metrics) if share else dict(metrics)
        self.drift = drift
        # the drift tests read one by one (None) and those read together, per function
        # (their capability report_many): [(function or None, [(name, test)])]
        groups = {}
        for name, d in drift.items():
            groups.setdefault(capabilities(d).report_many, []).append((name, d))
        self._reporters = list(groups.items())
        self.rules = rules
        #: the scope's ``n`` at its last row (None: none yet): a segment with no events
        #: since is idle, see :meth:`idle`
        self.eval_n = None
        #: name -> [value, error bound, n it covers] of the values read at a cadence
        #: (see :data:`HOLD_FROM`)
        self.held = {}
        self._fresh = None  # (n, values, bounds) of the last fresh read (snapshots)
        self._reports = None  # (n, reports) of the last drift reports read
        #: events counted for this scope but not yet fed to its objects (see
        #: :meth:`pend`): blocks ``(rows, kind)`` and single events, in arrival order
        self._pend = []
        self._pend_one = []
        #: how many events wait in the buffer (:meth:`pend`, :meth:`take`)
        self.pending = 0
        #: of those, the predictions taken before their labels (label-free objects only)
        #: and the events for the labelled objects (labels and complete events)
        self._pend_free = 0
        self._pend_labelled = 0
        #: label coverage: predictions counted (complete events included; a segment's when
        #: buffered, before they are fed), those given
        #: to predict_many (labels to come), those closed unlabeled (expired, replaced),
        #: and n_predicted at the last row
        self.n_predictions = 0
        self.n_predicted = 0
        self.n_expired = 0
        self.n_replaced = 0
        self.eval_predicted = 0
        # per metric: how its read costs (read_size) and its error bound, or None
        self._read = {name: (getattr(m, "read_size", None), _bound_reader(m))
                      for name, m in self.metrics.items()}
        if feed:
            self._bind()
        else:
            self._plain = self._timed = self._trusted = self._trusted_timed = ()
            self._plain_many = self._timed_many = self._queues = ()
            self._free = None
            self.stops = None

    def _bind(self):
        # shared views are read, never updated: their owner is
        objs = [o for o in list(self.metrics.values()) + list(self.drift.values())
                if not isinstance(o, SharedView)]
        # label-free objects are fed apart: by predict_many, and by update_many only for
        # events not given to predict_many (see the module docstring)
        free = [o for o in objs if label_free(o)]
        objs = [o for o in objs if not label_free(o)]
        # batches: objects that take the monitor's validated binary columns get them on
        # their trusted path (no second validation); others (a user's own metric) get
        # update_many with the labels as given
        (self._plain, self._timed, self._trusted, self._trusted_timed, self._plain_many,
         self._timed_many) = _bindings(objs)
        self._free = _bindings(free) if free else None
        # tumbling windows queue their closed windows' records until drained: the rows
        # carry get() (the last closed window), so the records are dropped at evaluation
        self._queues = [o.closed for o in objs if callable(getattr(o, "closed", None))]
        self.stops = _stops(self.drift, self.rules, self._trusted, self._trusted_timed)

    def update(self, y, s, w, t, free=True):
        """Count one validated event (``y`` the user's label, ``s`` a float score);
        ``free=False``: the label of a prediction given to :meth:`predict` already (the
        label-free objects counted it then)."""
        for u in self._plain:
            u(y, s, w)
        for u in self._timed:
            u(y, s, w, t=t)
        self.n += 1
        if free:
            self.n_predictions += 1
            if self._free is not None:
                plain, timed = self._free[0], self._free[1]
                for u in plain:
                    u(y, s, w)
                for u in timed:
                    u(y, s, w, t=t)

    def predict_many(self, s, w, t, labels):
        """Count predictions when they are made (``s`` float64, ``w`` float64 or None,
        ``t`` float64 or None): the label-free objects only, their labels a placeholder
        they ignore (``labels`` as in :meth:`update_many`)."""
        m = len(s)
        self.n_predictions += m
        self.n_predicted += m
        if self._free is not None:
            self._feed_free(np.zeros(m, bool), s, w, t, labels)

    def count_unlabelled(self, k, expired=True):
        """Count ``k`` predictions closed unlabeled: expired (``label_ttl``) or replaced
        by a later prediction with their id."""
        if expired:
            self.n_expired += k
        else:
            self.n_replaced += k

    def coverage(self):
        """``{"predictions", "labelled", "pending", "expired"}`` (and ``"replaced"`` when
        some were) of this scope, or None when it counted no prediction before its label
        (complete events only: every prediction is labelled). ``pending``: predictions
        whose label may still come."""
        if not (self.n_predicted or self.n_expired or self.n_replaced):
            return None
        labelled = self.n + self._pend_labelled  # (counted, buffered ones too)
        out = {"predictions": self.n_predictions, "labelled": labelled,
               "pending": self.n_predictions - labelled - self.n_expired - self.n_replaced,
               "expired": self.n_expired}
        if self.n_replaced:
            out["replaced"] = self.n_replaced
        return out

    def _feed_free(self, y, s, w, t, labels):
        _, _, tr, tr_timed, plain_many, timed_many = self._free
        if tr or tr_timed:
            with shared_batch(y, s, w):
                for u in tr:
                    u(y, s, w)
                for u in tr_timed:
                    u(y, s, w, t=t)
        if plain_many or timed_many:
            yl = labels(y)
            for u in plain_many:
                u(yl, s, w)
            for u in timed_many:
                u(yl, s, w, t=t)

    def update_many(self, y, s, w, t, labels, free=True):
        """Count admitted columns: ``y`` bool "is positive", ``s`` float64, ``w`` float64
        or None, ``t`` float64 or None; ``labels(y)`` gives the labels as the user's
        values (only for objects without the trusted path). ``free=False``: the labels
        of predictions given to :meth:`predict_many` already."""
        self._feed(y, s, w, t, labels)
        if free:
            self.n_predictions += len(s)
            if self._free is not None:
                self._feed_free(y, s, w, t, labels)

    def _feed(self, y, s, w, t, labels, trusted=None, trusted_timed=None):
        """Feed the labelled objects (columns as in :meth:`update_many`), count them;
        ``trusted``, ``trusted_timed``: those of the trusted path to feed (None: all)."""
        # one batch for all: what metrics compute from it alike (the cells of two
        # confusion matrices, the losses of two log losses) is computed once
        with shared_batch(y, s, w):
            for u in self._trusted if trusted is None else trusted:
                u(y, s, w)
            for u in self._trusted_timed if trusted_timed is None else trusted_timed:
                u(y, s, w, t=t)
        if self._plain_many or self._timed_many:
            yl = labels(y)
            for u in self._plain_many:
                u(yl, s, w)
            for u in self._timed_many:
                u(yl, s, w, t=t)
        self.n += len(s)

    def update_until_alarm(self, y, s, w, t, labels, free=True):
        """:meth:`update_many` of the events up to and including the first on which a
        change detector that a rule reads (:attr:`stops`) detects a change: returns
        ``(k, hit)``, the events counted (all when none did) and whether one did. The
        detectors take the events first, each stopping at its first new change
        (``until_change``, see :class:`~streameval.metrics.base.Capabilities`); the
        other objects then take the ``k`` events. Runtime complexity: that of
        :meth:`update_many` for the ``k`` events, plus the detectors' ``until_change``."""
        until, detectors, rest, rest_timed = self.stops
        k, hit = until(detectors, y, s, w, t)
        if k < len(s):
            y, s = y[:k], s[:k]
            w = None if w is None else w[:k]
            t = None if t is None else t[:k]
        self._feed(y, s, w, t, labels, rest, rest_timed)
        if free:
            self.n_predictions += len(s)
            if self._free is not None:
                self._feed_free(y, s, w, t, labels)
        return k, hit

    # ------------------------------------------------------------------ the buffer
    def pend(self, block, kind, count=True):
        """Keep admitted events for a later feed (:meth:`feed_pending`), in order.

        ``block`` is a float64 array of rows: "is positive" (1.0 or 0.0), the score,
        then the weight when ``kind & 1``, the event time (NaN: unknown) when ``kind & 2``
        and the event's kind when ``kind & 4`` (:data:`~streameval.events.KIND_EVENT`: a
        complete event, for every object; ``KIND_LABEL``: the label of an earlier
        prediction, for the labelled objects; ``KIND_PREDICTION``: a prediction before its
        label, for the label-free objects, its "is positive" a placeholder; no such row:
        complete events). It becomes the scope's (the caller gives it a copy).
        ``count``: the label coverage counts the events now (not when they are fed).

        Runtime complexity: `O(1)`, `O(k)` with event kinds."""
        if self._pend_one:
            self._fold_one()
        self._pend.append((block, kind))
        k = block.shape[1]
        if kind & 4:
            kinds = block[_row(kind, 4)]
            free = int(np.count_nonzero(kinds == KIND_PREDICTION))
            complete = int(np.count_nonzero(kinds == KIND_EVENT))
        else:
            free, complete = 0, k
        self._count_pending(k, free, complete, count)

    def _count_pending(self, k, free, complete, count):
        self.pending += k
        self._pend_free += free
        self._pend_labelled += k - free
        if count:
            self.n_predictions += free + complete
            self.n_predicted += free

    def pend_one(self, is_positive, s, w, t, kind=KIND_EVENT):
        """Keep one admitted event for a later feed (``t`` None: unknown; ``kind`` as in
        :meth:`pend`).

        Runtime complexity: `O(1)`."""
        self._pend_one.append((1.0 if is_positive else 0.0, s, w,
                               math.nan if t is None else t, float(kind)))
        self._count_pending(1, kind == KIND_PREDICTION, kind == KIND_EVENT, True)

    def _fold_one(self):
        block = np.array(self._pend_one, dtype=np.float64).T.copy()
        if (block[4] == KIND_EVENT).all():
            self._pend.append((block[:4].copy(), 3))
        else:
            self._pend.append((block, 7))
        self._pend_one = []

    def forget_read(self):
        """Drop the values kept from the last fresh read: the next read computes every
        value again (after something that changes values without feeding events, such
        as a calibration refit)."""
        self._fresh = None

    def fed(self):
        """``(n, predictions)``: the events and the predictions (before their labels) the
        scope's objects counted (its buffer's not yet)."""
        return self.n, self.n_predicted - self._pend_free

    def peek(self):
        """The buffered events as columns ``(is_positive bool, scores, weights or None,
        times or None, kinds or None)``, without taking them (None when there are none):
        weights are None when all are 1, times None when all are unknown, kinds (int8,
        :meth:`pend`) None when all events are complete, so that the same events give the
        same columns whichever path (one event, a batch) buffered them."""
        if not self.pending:
            return None
        if self._pend_one:
            self._fold_one()
        chunks = self._pend
        kind = 0
        for _, k in chunks:
            kind |= k
        if len(chunks) == 1:
            block = widen(chunks[0][0], chunks[0][1], kind)
        else:
            block = np.concatenate([widen(b, k, kind) for b, k in chunks], axis=1)
            self._pend = [(block, kind)]  # (one block from now on: a later peek costs nothing)
        y = block[0] != 0.0
        s = block[1].copy()
        w = block[_row(kind, 1)].copy() if kind & 1 else None
        t = block[_row(kind, 2)].copy() if kind & 2 else None
        k = block[_row(kind, 4)].astype(np.int8) if kind & 4 else None
        if k is not None and not k.any():  # (KIND_EVENT is 0)
            k = None
        return (y, s) + _plain_columns(w, t) + (k,)

    def take(self):
        """:meth:`peek`, and the buffer is emptied."""
        cols = self.peek()
        self._pend = []
        self.pending = self._pend_free = self._pend_labelled = 0
        return cols

    def feed_pending(self, labels):
        """Feed the buffered events to the scope's objects and empty the buffer (nothing
        when it is empty): the labelled objects take the labels and complete events, the
        label-free ones the predictions and complete events, each in arrival order in one
        slice (one ``update_many``)."""
        cols = self.take()
        if cols is None:
            return
        y, s, w, t, k = cols
        if k is None:  # complete events: every object
            self._feed(y, s, w, t, labels)
            if self._free is not None:
                self._feed_free(y, s, w, t, labels)
            return
        # labelled objects: labels and complete events; label-free: predictions and
        # complete events (disjoint objects: each sees its own events in order)
        parts = [(self._feed, k != KIND_PREDICTION)]
        if self._free is not None:
            parts.append((self._feed_free, k != KIND_LABEL))
        for feed, mask in parts:
            if mask.all():
                feed(y, s, w, t, labels)
            elif mask.any():
                feed(y[mask], s[mask], *_plain_columns(None if w is None else w[mask],
                                                       None if t is None else t[mask]),
                     labels)

    def pending_state(self, arrays=False):
        """The buffered events, JSON-ready (None when there are none); ``"k"``, their
        kinds, only when some event is not complete. ``arrays``: the same columns as
        numpy arrays (``y`` bool, ``k`` uint8, an unknown time NaN), for a binary state;
        :meth:`set_pending_state` reads both."""
        cols = self.peek()
        if cols is None:
            return None
        y, s, w, t, k = cols
        if arrays:
            out = {"y": y, "s": s, "w": w, "t": t}
            if k is not None:
                out["k"] = k.astype(np.uint8)
            return out
        out = {"y": y.tolist(), "s": s.tolist(), "w": None if w is None else w.tolist(),
               "t": None if t is None else [None if v != v else v for v in t.tolist()]}
        if k is not None:
            out["k"] = k.tolist()
        return out

    def set_pending_state(self, state):
        """Restore :meth:`pending_state` (None: an empty buffer); ``ValueError`` naming
        what is malformed. The label coverage is restored apart (it counted them)."""
        self._pend, self._pend_one = [], []
        self.pending = self._pend_free = self._pend_labelled = 0
        if state is None:
            return
        try:
            y = np.array(state["y"], dtype=np.float64)
            s = np.array(state["s"], dtype=np.float64)
            w = None if state["w"] is None else np.array(state["w"], dtype=np.float64)
            t = state["t"]
            if isinstance(t, np.ndarray):  # (a binary state's: NaN where unknown)
                t = np.array(t, dtype=np.float64)
            elif t is not None:
                t = np.array([math.nan if v is None else v for v in t], dtype=np.float64)
            k = state.get("k")
            k = None if k is None else np.array(k, dtype=np.float64)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"bad scope evaluation state: pending: {e!r}") from None
        n = len(s)
        if y.shape != (n,) or any(c is not None and c.shape != (n,) for c in (w, t, k)) \
                or not np.isin(y, (0.0, 1.0)).all() or not np.isfinite(s).all() \
                or (w is not None and not (np.isfinite(w).all() and (w >= 0).all())) \
                or (k is not None and not np.isin(
                    k, (KIND_EVENT, KIND_LABEL, KIND_PREDICTION)).all()):
            raise ValueError("bad scope evaluation state: pending: columns of different "
                             "lengths, labels not 0/1, scores or weights not finite, or "
                             "kinds not those of events, labels and predictions")
        if not n:
            return
        rows = [y, s] + [c for c in (w, t, k) if c is not None]
        self.pend(np.vstack(rows), (w is not None) | (t is not None) << 1
                  | (k is not None) << 2, count=False)

    def values(self, reports):
        """``{name: value or None}`` of every metric, plus each drift test's p-value and
        delta from ``reports`` (:meth:`reports`), and a sequential detector's
        ``change_p_value``; drains closed tumbling windows. All computed now (cached
        while the scope counts no new event)."""
        return self.read(reports, fresh=True, hold=False)[0]

    def error_bounds(self):
        """``{name: bound}`` of the metrics whose current value is not exact (a
        coarsened score order, bins): ``|value - exact| <= bound``. Empty when every
        value is exact."""
        return dict(self.read({}, fresh=True, hold=False)[1])

    def read(self, reports, fresh=False, hold=True):
        """``(values, error_bounds, as_of)`` for a row: :meth:`values`, where a
        cumulative value whose read costs `O(n)` may be the last one computed
        (:data:`HOLD_FROM`; never with ``fresh``), ``error_bounds`` ``{name: bound}``
        of the values that are not exact, and ``as_of`` ``{name: n}`` the scope's count
        that each held value covers (only those older than now). ``hold``: the values
        computed here become the held ones (an evaluation's read; a snapshot's does not,
        so that rows never depend on when snapshots were taken).

        Runtime complexity: one ``get`` per metric, except held values: `O(1)`."""
        for closed in self._queues:
            for _ in closed():
                pass
        n = self.n
        cached = self._fresh
        fed = self.fed()
        if hold:
            self.eval_predicted = fed[1]
        if cached is not None and cached[0] == fed:
            # nothing fed since the last read with every value current: the same
            # values (an evaluation's read makes them the held ones, as a new read would)
            out, bounds = dict(cached[1]), dict(cached[2])
            as_of = {}
            if hold and not fresh:
                for name, (size_of, _) in self._read.items():
                    if size_of is not None:
                        self.held[name] = [out[name], bounds.get(name, 0.0), n]
        else:
            out, bounds, as_of = {}, {}, {}
            held = self.held
            for name, m in self.metrics.items():
                size_of, bound_of = self._read[name]
                if size_of is not None:
                    size = size_of()
                    h = held.get(name)
                    if (not fresh and size > HOLD_FROM and h is not None
                            and (n - h[2]) * READ_RATIO < size):
                        out[name] = h[0]
                        if h[1]:
                            bounds[name] = h[1]
                        if h[2] != n:
                            as_of[name] = h[2]
                        continue
                v = _value(m.get())
                b = bound_of() if bound_of is not None else 0.0
                b = 0.0 if b != b else b  # (NaN: an undefined value, None in rows)
                out[name] = v
                if b:
                    bounds[name] = b
                if size_of is not None and hold:
                    held[name] = [v, b, n]
            if not as_of:
                self._fresh = (fed, dict(out), dict(bounds))
        for name, rep in reports.items():
            out[f"drift.{name}.p_value"] = rep.get("p_value")
            out[f"drift.{name}.delta"] = rep.get("delta")
            if "change_p_value" in rep:  # a sequential detector: its last change's evidence
                out[f"drift.{name}.change_p_value"] = rep["change_p_value"]
        return out, bounds, as_of

    def idle(self):
        """Whether this segment's row would repeat its last one: its objects counted no
        event and no prediction since (events and predictions still in its buffer do not
        count: they are not fed yet; the whole stream's scope is never idle)."""
        return (self.key is not None and self.eval_n == self.n
                and self.eval_predicted == self.n_predicted - self._pend_free)

    def eval_state(self, arrays=False):
        """What decides this scope's next rows beyond its metrics (JSON-ready), or None
        when nothing does (no row yet, nothing held, nothing buffered, every event
        complete): its count at its last row, its held values, the events in its buffer
        (``"pending"``, only when there are some: :meth:`pending_state`, its columns as
        numpy arrays with ``arrays``) and its label coverage (``"coverage"``, only when
        some predictions came before their labels)."""
        cov = (self.n_predictions, self.n_predicted, self.n_expired, self.n_replaced,
               self.eval_predicted)
        counted = any(cov[1:])  # (else every event was complete: n_predictions is n)
        if self.eval_n is None and not self.held and not self.pending and not counted:
            return None
        out = {"eval_n": self.eval_n, "held": {k: list(v) for k, v in self.held.items()}}
        if self.pending:
            out["pending"] = self.pending_state(arrays)
        if counted:  # (the label coverage, when it is not "every event complete")
            out["coverage"] = list(cov)
        return out

    def set_eval_state(self, state):
        """Restore :meth:`eval_state` (None: nothing to restore), after ``n``."""
        self.n_predictions = self.n  # (a state without coverage: every event complete)
        if state is None:
            return
        if isinstance(state, dict) and "pending" in state:
            self.set_pending_state(state["pending"])
            self.n_predictions = self.n + self.pending  # (overwritten by a coverage)
        try:
            eval_n = state["eval_n"]
            held = {str(k): [None if v[0] is None else float(v[0]), float(v[1]), int(v[2])]
                    for k, v in state["held"].items()}
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ValueError(f"bad scope evaluation state: {e!r}") from None
        if eval_n is not None and (type(eval_n) is not int or eval_n < 0):
            raise ValueError(f"bad scope evaluation state: eval_n = {eval_n!r}")
        cov = state.get("coverage")
        if cov is not None:
            if (not isinstance(cov, list) or len(cov) != 5
                    or not all(type(v) is int and v >= 0 for v in cov)):
                raise ValueError(f"bad scope evaluation state: coverage = {cov!r:.80}")
        self.eval_n = eval_n
        self.held = held
        if cov is not None:
            (self.n_predictions, self.n_predicted, self.n_expired, self.n_replaced,
             self.eval_predicted) = cov

    def reports(self):
        """``{name: report dict}`` of every drift test (JSON-ready); computed once per
        count of events and predictions fed (a scope fed none since is read from its
        cache)."""
        cached = self._reports
        fed = self.fed()
        if cached is None or cached[0] != fed:
            cached = self._reports = (fed, self._read_reports())
        return {name: dict(rep) for name, rep in cached[1].items()}

    def _read_reports(self):
        """``{name: report dict}`` of every drift test, read now: the tests that declare
        ``report_many`` (see :class:`~streameval.metrics.base.Capabilities`) together,
        per such function, the others one by one."""
        reps = {}
        for fn, tests in self._reporters:
            if fn is None:
                for name, d in tests:
                    reps[name] = d.report()
            else:
                for (name, _), rep in zip(tests, fn([d for _, d in tests])):
                    reps[name] = rep
        return {name: report_dict(reps[name]) for name in self.drift}

    def late(self, names):
        """``{name: events refused as late}`` for the windows ``names``."""
        return {name: int(self.metrics[name].late) for name in names}

    def rule_input(self, name, rep):
        """What a drift rule reads: the p-value and delta, or no data (None) until the
        test is ready and both effective sample sizes reach its ``min_count``."""
        need = getattr(self.drift[name], "min_count", 0) or 0
        ready = rep.get("ready", True)
        sizes = [rep.get("n_current"), rep.get("n_reference")]
        if not ready or rep.get("n_current") is None or any(
                x is not None and x < need for x in sizes):
            return {"p_value": None, "delta": rep.get("delta")}
        return {"p_value": rep.get("p_value"), "delta": rep.get("delta")}

    def __repr__(self):
        return f"Scope({self.label!r}, n={self.n}, {len(self.metrics)} metrics)"
