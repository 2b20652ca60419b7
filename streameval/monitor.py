"""The Monitor: named metrics, windows, drift tests and alert rules over one event stream.

A :class:`Monitor` takes scored, labelled events one at a time (:meth:`Monitor.update`)
or in batches (:meth:`Monitor.update_many`), feeds them to its metrics, and at each
*evaluation point* emits one metrics row per segment and evaluates its alert rules.

Evaluation points
-----------------
* every ``every`` events (after the ``every``-th, ``2 * every``-th, ... event);
* every ``every_seconds`` of event time: when an event's time enters a new period
  (periods are aligned to multiples of ``every_seconds`` since the epoch, so hourly means
  on the hour), the monitor evaluates *before* counting that event;
* :meth:`Monitor.flush` (end of the stream) always leaves the final state in the
  timeline: it evaluates unless the last evaluation was at the current ``n`` (whose rows
  already are the final ones).

Two triggers at the same ``n`` give one evaluation. The batch path finds the same
points as the event path, feeds each metric ``update_many`` with the slice of events
between two points, and evaluates there: same rows, same alerts, far faster.

Output
------
``on_metrics`` and ``on_alert`` are lists of callables (sinks), called at each
evaluation with plain JSON-ready dicts (DESIGN.md section 6):

* metrics row: ``{"n", "t", "segment", "values": {name: float or None}}``, plus
  ``"late": {name: count}`` when the monitor has windows by ``period``: the events each
  window refused as late (older than its ``lateness`` allows), in that segment, so far;
* alert transition: ``{"rule", "state": "pending"|"firing"|"resolved", "n", "t",
  "value", "segment"}``.

``n`` is the number of events the row counts: the monitor's (all segments: the
stream's clock) in the whole-stream row and in alert transitions, the segment's own in
a segment row, which also carries ``"stream_n"``, the monitor's count at that
evaluation (shared by the rows of one evaluation); ``t`` the newest event time seen (None
without event times), ``values`` the metrics' values with NaN (undefined: no positives,
empty window) written as None; a :class:`~streameval.Tumbling` window's value is that
of its last closed window (a partial window is not closed by :meth:`Monitor.flush`).
Each drift test adds ``"drift.<name>.p_value"`` and
``"drift.<name>.delta"`` to ``values`` (None until the test is ready). At an evaluation the rows of every segment are
emitted first, then the transitions.

Segments
--------
With ``group_by`` (a field name, or a list of names), each distinct segment value gets
its own copy of every metric, drift test and rule; with ``overall=True`` (default) the
whole stream (segment None) is monitored too. The ``segment`` of an event is the value
of its field (a str, int, float or bool), or for several fields a tuple of values in
``group_by`` order (in rows, a JSON list). An event whose segment is None counts in
the whole stream only. Rows are emitted whole stream first, then segments in order of
first appearance. A segment's ``min_samples`` counts that segment's events; ``n`` and
``cooldown`` use the stream's clock.

At most ``max_segments`` segments (default :data:`DEFAULT_MAX_SEGMENTS`) get their own
copy: every segment is a full set of metrics (tens of kB, and series in
Prometheus), and a client that sends a new value in every event must not be able to
grow the monitor without bound. Once that many exist, the events of a new segment
value are counted under the segment :data:`OTHER_SEGMENT` (``"__other__"``, a tuple of
it for several fields), :attr:`Monitor.other_events` counts them, ``snapshot()`` says
so, and a ``RuntimeWarning`` is issued the first time.

Imports: numpy, the standard library, :mod:`streameval.alerts`, :mod:`streameval.windows`,
:mod:`streameval.metrics` (the protocol, the shared score order and confusion
matrix), :mod:`streameval.events` (the event-time parser) and
:mod:`streameval.validation`;
:mod:`streameval.config` only inside :meth:`Monitor.default` (config imports the
Monitor's parts, not the Monitor). Never :mod:`streameval.io`, the pipeline, the CLI
or the service.

>>> from streameval.alerts import Threshold
>>> import streameval as se
>>> m = Monitor({"recall": se.Recall()}, rules=[Threshold("recall", "<", 0.6)], every=2)
>>> rows, alerts = [], []
>>> m.on_metrics.append(rows.append); m.on_alert.append(alerts.append)
>>> for y, s in [(True, 0.9), (True, 0.2), (True, 0.8), (False, 0.1), (True, 0.3)]:
...     m.update(y, s)
>>> m.flush()
>>> [(r["n"], r["values"]["recall"]) for r in rows]
[(2, 0.5), (4, 0.666667), (5, 0.5)]
>>> [(a["state"], a["n"]) for a in alerts]
[('firing', 2), ('resolved', 4), ('firing', 5)]

Cost: :meth:`Monitor.update` is one ``update`` per metric of the whole stream and of
the event's segment; :meth:`Monitor.update_many` one ``update_many`` per metric and
segment per slice between evaluation points, plus `O(m)` numpy work; an evaluation is
one ``get`` per metric and segment plus `O(1)` per rule.
"""

from __future__ import annotations

import inspect
import math
import numbers

import numpy as np

from streameval.alerts import NAME_PATTERN, Rule, rule_from_config
from streameval.events import as_seconds, as_seconds_array
from streameval.windows import Sliding
from streameval.metrics.base import (
    SharedView,
    check_bounds,
    from_state,
    has_interval,
    register,
    shared_batch,
)
from streameval.metrics.confusion import CountsView, counts_key
from streameval.metrics.ranking import OrderView, order_key
from streameval.validation import (
    Integer,
    Real,
    ValidationError,
    check_param,
    as_binary_labels,
    as_float_array,
    as_weight_array,
    check_real,
    check_same_length,
    check_weight,
    fail,
    label_sets,
)

__all__ = ["Monitor", "DEFAULT_MAX_SEGMENTS", "OTHER_SEGMENT", "GROUP_BY_PROBE"]

#: Default cap on the number of segments with their own metrics.
DEFAULT_MAX_SEGMENTS = 1000
#: The segment that counts the events of new segment values beyond ``max_segments``.
OTHER_SEGMENT = "__other__"
#: A ``group_by`` field that holds no value in any of the first this many events (or
#: in a shorter whole stream, at :meth:`Monitor.flush`) is warned about: a typo in the
#: field name otherwise only shows as segments that never appear.
GROUP_BY_PROBE = 1000

_Real = numbers.Real
_SCALARS = (str, bool, int, float)


def _takes_t(method):
    try:
        return "t" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return False


#: the kinds of shared state: what decides it, and the read-only view of an owner's
_SHARED = (("order", order_key, OrderView), ("counts", counts_key, CountsView))


def _share_key(obj):
    """The key of the state ``obj`` holds that another metric may share: a binary
    score-order metric's order, a binary confusion-family metric's matrix, or a sliding
    window over one (with its size or period); None for anything else."""
    window = isinstance(obj, Sliding)
    if window and obj.on_late is not None:
        return None
    inner = obj.metric if window else obj
    for kind, key_of, _ in _SHARED:
        key = key_of(inner)
        if key is not None:
            where = ("sliding", obj.size, obj.period, obj.lateness) if window else ("cumulative",)
            return (kind, *where, key)
    return None


def _inner(obj):
    return obj.metric if isinstance(obj, Sliding) else obj


def share_orders(metrics):
    """One score order and one confusion matrix per stream, window and labels: every
    binary score-order metric (cumulative AUC, AP, curves...; or a sliding window over
    one) whose order another one before it already holds becomes an
    :class:`~streameval.metrics.ranking.OrderView` of that one, and every binary
    metric of the confusion family (precision, recall, F1, accuracy...; or a sliding
    window over one) whose matrix (threshold and labels) another one before it
    already holds a :class:`~streameval.metrics.confusion.CountsView` of that one.
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
            out[name] = views[key[0]](obj, owner, _inner)
    return out


def _trusted(obj):
    """Whether ``obj`` takes a Monitor's validated binary columns on its trusted path."""
    return getattr(obj, "columns", None) == "binary" and callable(
        getattr(obj, "update_trusted", None))


def _value(v):
    """A metric value as a JSON number, or None where it is undefined (NaN)."""
    v = float(v)
    return None if v != v else v


class _Segment:
    """One segment's metrics, drift tests and rule instances."""

    __slots__ = ("key", "label", "n", "metrics", "drift", "rules", "_plain", "_timed",
                 "_trusted", "_trusted_timed", "_plain_many", "_timed_many", "_queues")

    def __init__(self, key, label, metrics, drift, rules, share=True):
        self.key = key          # hashable (None: the whole stream)
        self.label = label      # JSON form, written in rows
        self.n = 0
        self.metrics = share_orders(metrics) if share else metrics
        self.drift = drift
        self.rules = rules
        self._bind()

    def _bind(self):
        # shared views are read, never updated: their owner is
        objs = [o for o in list(self.metrics.values()) + list(self.drift.values())
                if not isinstance(o, SharedView)]
        self._plain = [o.update for o in objs if not _takes_t(o.update)]
        self._timed = [o.update for o in objs if _takes_t(o.update)]
        # batches: objects that take the monitor's validated binary columns get them on
        # their trusted path (no second validation); others (a user's own metric) get
        # update_many with the labels as given
        trusted = [o for o in objs if _trusted(o)]
        self._trusted = [o.update_trusted for o in trusted if not _takes_t(o.update_trusted)]
        self._trusted_timed = [o.update_trusted for o in trusted if _takes_t(o.update_trusted)]
        other = [o for o in objs if not _trusted(o)]
        self._plain_many = [o.update_many for o in other if not _takes_t(o.update)]
        self._timed_many = [o.update_many for o in other if _takes_t(o.update)]
        # tumbling windows queue their closed windows' records until drained: the rows
        # carry get() (the last closed window), so the records are dropped at evaluation
        self._queues = [o.closed for o in objs if callable(getattr(o, "closed", None))]

    def update(self, y, s, w, t):
        for u in self._plain:
            u(y, s, w)
        for u in self._timed:
            u(y, s, w, t=t)
        self.n += 1

    def update_many(self, y, s, w, t, labels):
        """Validated columns: ``y`` bool "is positive", ``s`` float64, ``w`` float64 or
        None, ``t`` float64 or None; ``labels()`` gives the labels as the user's values
        (only for objects without the trusted path)."""
        # one batch for all: what metrics compute from it alike (the cells of two
        # confusion matrices, the losses of two log losses) is computed once
        with shared_batch(y, s, w):
            for u in self._trusted:
                u(y, s, w)
            for u in self._trusted_timed:
                u(y, s, w, t=t)
        if self._plain_many or self._timed_many:
            yl = labels(y)
            for u in self._plain_many:
                u(yl, s, w)
            for u in self._timed_many:
                u(yl, s, w, t=t)
        self.n += len(s)

    def values(self, reports):
        for closed in self._queues:
            for _ in closed():
                pass
        out = {name: _value(m.get()) for name, m in self.metrics.items()}
        for name, rep in reports.items():
            out[f"drift.{name}.p_value"] = rep.get("p_value")
            out[f"drift.{name}.delta"] = rep.get("delta")
        return out

    def reports(self):
        return {name: _report_dict(d.report()) for name, d in self.drift.items()}

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


def _check_rule_input(rule, obj):
    """Refuse a rule whose metric or detector cannot give what it reads: an interval
    (rules with ``confidence``), or a sequential detector's report (``alarm``)."""
    if rule.kind == "alarm":
        if "change" not in _report_dict(_fresh(obj).report()):
            raise ValueError(
                f"rule {rule.name!r}: {rule.metric!r} ({type(obj).__name__}) is not a "
                "sequential detector (an alarm rule reads a SequentialDrift: "
                "[monitor.drift.<name>] test = \"sequential\")"
            )
        return
    if getattr(rule, "confidence", None) is not None and not has_interval(obj):
        raise ValueError(
            f"rule {rule.name!r}: {rule.metric!r} ({type(obj).__name__}) has no confidence "
            "interval; confidence applies to proportions (precision, recall, accuracy, "
            "error_rate, fpr, specificity), roc_auc and gini, and their windows"
        )


def _report_dict(rep):
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


def _fresh(obj):
    """A new, empty object with the same parameters (``clone()`` where it exists)."""
    clone = getattr(obj, "clone", None)
    if callable(clone):
        return clone()
    return type(obj)(**obj._params())


class Monitor:
    """Named metrics, windows, drift tests and alert rules over one stream, per segment.

    See the module docstring for evaluation points, rows and segments; the TOML schema
    is in :mod:`streameval.config`.

    Runtime complexity: :meth:`update` costs one ``update`` per metric (whole stream
    and the event's segment); :meth:`update_many` one ``update_many`` per metric,
    segment and slice between evaluation points; an evaluation one ``get`` per
    metric and segment.

    >>> m = Monitor.default(size=100)
    >>> sorted(m.metrics)[:4]
    ['accuracy', 'accuracy@100', 'average_precision', 'average_precision@100']
    >>> m.update_many([1, 0, 1, 0], [0.9, 0.3, 0.6, 0.7])
    >>> m.snapshot()["segments"][None]["values"]["roc_auc"]
    0.75

    Parameters
    ----------
    metrics : dict
        Metric name -> metric or window (a template: every segment gets a fresh
        ``clone()``; the template itself is never updated). Names may hold letters,
        digits and ``_ . @ : -``.
    rules : iterable
        :class:`~streameval.alerts.Rule` objects, rule strings (``"recall < 0.8"``) or
        rule tables; every rule's metric must be a metric (or drift) name, and rule
        names must be distinct.
    drift : dict, optional
        Drift report name -> drift test (template, cloned per segment) with ``update``,
        ``update_many``, ``report()`` (``p_value``, ``delta``, ...) and ``to_state``.
    group_by : str or list of str, optional
        The segment field(s); see the module docstring.
    every : int
        Evaluate every ``every`` events (0: never by count).
    every_seconds : float, optional
        Evaluate at each new period of event time.
    pos_label, neg_label
        The labels (as in every metric); the metrics must use the same.
    overall : bool
        With ``group_by``, monitor the whole stream (segment None) as well.
    max_segments : int or None
        At most this many segments get their own metrics (None: no cap); the events
        of further segment values count under :data:`OTHER_SEGMENT`.
    """

    _public_name = "Monitor"
    _state_version = 1

    def __init__(self, metrics, *, rules=(), drift=None, group_by=None, every=1000,
                 every_seconds=None, pos_label=True, neg_label=None, overall=True,
                 max_segments=DEFAULT_MAX_SEGMENTS):
        import re

        if not isinstance(metrics, dict) or not metrics:
            raise ValueError("metrics must be a non-empty dict of name -> metric")
        drift = {} if drift is None else drift
        if not isinstance(drift, dict):
            raise ValueError("drift must be a dict of name -> drift test")
        self.pos_label = pos_label
        self.neg_label = neg_label
        self._pos_set, self._neg_set = label_sets(pos_label, neg_label)
        seen = set()
        for kind, objs in (("metric", metrics), ("drift", drift)):
            for name, obj in objs.items():
                if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
                    raise ValueError(
                        f"{kind} name {name!r}: must be letters, digits, _ . @ : - "
                        "(starting with a letter or _)"
                    )
                if id(obj) in seen:
                    raise ValueError(f"{kind} {name!r} is the same object as another; give each its own")
                for attr in ("update", "update_many", "get" if kind == "metric" else "report",
                             "to_state"):
                    if not callable(getattr(obj, attr, None)):
                        raise ValueError(f"{kind} {name!r} ({type(obj).__name__}) has no {attr}()")
                self._check_labels(name, obj)
                seen.add(id(obj))
        for name in drift:
            for key in (f"drift.{name}.p_value", f"drift.{name}.delta"):
                if key in metrics:
                    raise ValueError(f"metric name {key!r} is the name of drift test {name!r}'s value")
        for name, obj in metrics.items():
            v = _fresh(obj).get()
            if not isinstance(v, _Real):
                raise ValueError(
                    f"metric {name!r} ({type(obj).__name__}) does not give a single number "
                    f"(get() returned {type(v).__name__})"
                )
        self.metrics = dict(metrics)
        self.drift = dict(drift)

        built = []
        for i, r in enumerate(rules):
            rule = r if isinstance(r, Rule) else rule_from_config(r, where=f"rules[{i}]")
            on_drift = rule.kind in ("drift", "alarm")
            if rule.metric not in (self.drift if on_drift else self.metrics):
                where = "drift tests" if on_drift else "metrics"
                have = sorted(self.drift if on_drift else self.metrics)
                raise ValueError(
                    f"rule {rule.name!r}: {rule.metric!r} is not one of the monitor's {where} {have}"
                )
            _check_rule_input(rule, (self.drift if on_drift else self.metrics)[rule.metric])
            if rule.name in {b.name for b in built}:
                raise ValueError(f"two rules are named {rule.name!r}; give one a name=")
            built.append(rule.clone())
        self.rules = built

        if group_by is not None:
            fields = [group_by] if isinstance(group_by, str) else list(group_by)
            if not fields or not all(isinstance(f, str) and f for f in fields) \
                    or len(set(fields)) != len(fields):
                raise ValueError(f"group_by = {group_by!r}: must be a field name or a list of distinct names")
            self._fields = tuple(fields)
        else:
            self._fields = None
        self.group_by = group_by
        self.every = check_param("every", every, Integer(0))
        self.every_seconds = check_param("every_seconds", every_seconds,
                                         Real(0, open_low=True, allow_none=True))
        if not isinstance(overall, bool):
            raise ValueError(f"overall = {overall!r}: must be True or False")
        if not overall and group_by is None:
            raise ValueError("overall=False needs group_by (else nothing is monitored)")
        self.overall = overall
        self.max_segments = check_param("max_segments", max_segments,
                                        Integer(1, allow_none=True))
        if self._fields is not None:
            self._other_key = (OTHER_SEGMENT if len(self._fields) == 1
                               else (OTHER_SEGMENT,) * len(self._fields))
        else:
            self._other_key = None
        #: events counted under OTHER_SEGMENT because max_segments was reached
        self.other_events = 0
        #: what the monitor warned about (in snapshots, states and replay summaries)
        self.warnings = []
        self._probe_segments = self._fields is not None  # until GROUP_BY_PROBE events
        # windows by period: their late events are reported per segment
        self._late_names = [name for name, obj in self.metrics.items()
                            if getattr(obj, "period", None) is not None
                            and hasattr(obj, "late")]

        # which inputs need an event time: every_seconds, windows/tests by period, rules
        # with durations
        self._time_needed = []
        if every_seconds is not None:
            self._time_needed.append("every_seconds")
        for name, obj in list(self.metrics.items()) + list(self.drift.items()):
            if getattr(obj, "period", None) is not None:
                self._time_needed.append(f"{name!r} (a window by period)")
        for rule in self.rules:
            if rule.for_seconds is not None or rule.cooldown_seconds is not None:
                self._time_needed.append(f"rule {rule.name!r}")
        # metrics of probabilities (log loss, Brier) refuse scores outside [0, 1]: the
        # monitor checks that up front, so that no metric is left half-updated
        self._column_checks = [o.check_columns for o in list(self.metrics.values())
                               + list(self.drift.values())
                               if _trusted(o) and callable(getattr(o, "check_columns", None))]
        self._proba = []
        self._bounds = None
        for name, obj in list(self.metrics.items()) + list(self.drift.items()):
            bounds = getattr(obj, "score_bounds", None)
            if bounds is not None:
                self._proba.append(name)
                lo, hi = bounds if self._bounds is None else self._bounds
                self._bounds = (max(lo, bounds[0]), min(hi, bounds[1]))
        # bool labels can be passed to the metrics as is when they use the default ones
        self._bool_labels = (True in self._pos_set and False in self._neg_set
                             and all(isinstance(p, bool) or p in (0, 1) for p in self._pos_set))

        self.on_metrics = []
        self.on_alert = []
        self.n = 0
        self.t = None
        self._last_eval_n = None
        self._segments = {}
        self._overall = self._new_segment(None) if overall else None

    @property
    def score_bounds(self):
        """``(low, high)``: the narrowest ``score_bounds`` of the metrics and drift
        tests, which every score must lie in (log loss: ``(0, 1)``), or None."""
        return self._bounds

    # ------------------------------------------------------------------ construction
    def _check_labels(self, name, obj):
        inner = obj
        for _ in range(3):  # a window over a metric (over a metric...)
            if hasattr(inner, "pos_label"):
                break
            inner = getattr(inner, "metric", None)
            if inner is None:
                return
        if not hasattr(inner, "pos_label"):
            return
        pos, neg = label_sets(inner.pos_label, getattr(inner, "neg_label", None))
        if (pos, neg) != (self._pos_set, self._neg_set):
            raise ValueError(
                f"{name!r} uses labels pos_label={inner.pos_label!r}, "
                f"neg_label={getattr(inner, 'neg_label', None)!r}; the monitor uses "
                f"pos_label={self.pos_label!r}, neg_label={self.neg_label!r}"
            )

    @classmethod
    def from_config(cls, config):
        """A monitor from a parsed ``[monitor]`` table (or a document holding one).

        The schema is in :mod:`streameval.config`; an unknown or bad key raises
        ``ValueError`` naming it.
        """
        from streameval import config as _config

        return cls(**_config.build(_config.monitor_table(config)))

    @classmethod
    def from_toml(cls, path):
        """A monitor from a TOML file (its ``[monitor]`` table, or the whole file)."""
        from streameval import config as _config

        return cls.from_config(_config.load_toml(path))

    @classmethod
    def default(cls, threshold=0.5, size=None, *, window=None, **kwargs):
        """The default monitor (DESIGN.md section 6).

        Cumulative ``roc_auc``, ``average_precision``, ``precision``, ``recall``, ``f1``,
        ``accuracy``, ``log_loss`` (threshold metrics at ``threshold``), the same over
        the last ``size`` events (default 10 000) named ``<metric>@<size>``
        (``recall@10000``), sequential detectors ``recall`` and ``precision``
        (:class:`~streameval.sequential.SequentialDrift`, ``alpha = 0.005`` each) and
        the rules ``recall alarm`` and ``precision alarm``. Its guarantee, per segment:
        on a stationary stream of independent events, the probability that any of its
        rules fires within the first million events of a segment is at most 1%.
        ``window=`` is the older name of ``size=``.
        ``kwargs`` (``every``, ``group_by``, ...) go to the constructor.
        """
        from streameval import config as _config

        if size is not None and window is not None:
            raise ValueError("give size= or its alias window=, not both")
        size = size if size is not None else window if window is not None else 10_000
        table = {"threshold": threshold, "size": size}
        for key in ("every", "every_seconds", "group_by", "overall", "pos_label", "neg_label",
                    "max_segments"):
            if key in kwargs and kwargs[key] is not None:
                table[key] = kwargs.pop(key)
        if kwargs:
            raise TypeError(f"Monitor.default() got unexpected arguments {sorted(kwargs)}")
        return cls(**_config.build(table))

    def _new_segment(self, key):
        label = key
        if isinstance(key, tuple):
            label = list(key)
        seg = _Segment(
            key, label,
            {name: _fresh(m) for name, m in self.metrics.items()},
            {name: _fresh(d) for name, d in self.drift.items()},
            [r.clone() for r in self.rules],
        )
        if key is not None:
            self._segments[key] = seg
        return seg

    def _all_segments(self):
        if self._overall is not None:
            yield self._overall
        yield from self._segments.values()

    # -------------------------------------------------------------------- validation
    def _segment_key(self, segment, where="segment", reserved_ok=False):
        """The hashable key of an event's segment, or None (the whole stream only).

        With a segment cap, :data:`OTHER_SEGMENT`'s key is reserved: an event cannot
        name it (``reserved_ok``: a reader or a saved state may)."""
        if segment is None:
            return None
        fields = self._fields
        if fields is None:
            raise ValueError(f"{where} = {segment!r}: this monitor has no group_by")
        key = self._key_of(segment, where, fields)
        if key == self._other_key and not reserved_ok and self.max_segments is not None:
            raise ValueError(f"{where} = {segment!r}: {OTHER_SEGMENT!r} is reserved for the "
                             f"events of segment values past max_segments")
        return key

    def _key_of(self, segment, where, fields):
        if len(fields) == 1:
            return _scalar(segment, where, fields[0])
        if isinstance(segment, dict):
            missing = [f for f in fields if f not in segment]
            if missing:
                raise ValueError(f"{where} = {segment!r}: no value for group_by field {missing[0]!r}")
            segment = [segment[f] for f in fields]
        elif isinstance(segment, np.ndarray):
            segment = segment.tolist()
        if not isinstance(segment, (tuple, list)) or len(segment) != len(fields):
            raise ValueError(
                f"{where} = {segment!r}: must be a tuple of {len(fields)} values "
                f"(group_by = {list(fields)})"
            )
        return tuple(
            None if v is None else _scalar(v, where, f) for v, f in zip(segment, fields)
        )

    def _segment_of(self, key):
        seg = self._segments.get(key)
        if seg is None:
            seg = self._new_segment(key)
        return seg

    def _capped(self, key):
        """``key``, or :data:`OTHER_SEGMENT`'s key when ``key`` would be a new segment
        beyond ``max_segments`` (counted in :attr:`other_events`)."""
        if key is None or key in self._segments or self.max_segments is None:
            return key
        if len(self._segments) < self.max_segments:
            return key
        self._note_other(key, 1)
        return self._other_key

    def _note_other(self, key, k):
        if not self.other_events:
            import warnings

            msg = (f"max_segments = {self.max_segments} reached: the events of new segment "
                   f"values (first {key!r}) are counted under segment {OTHER_SEGMENT!r}")
            self.warnings.append(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=4)
        self.other_events += k

    def _time(self, t, where="t"):
        if t is None or (isinstance(t, float) and t != t):
            if self._time_needed:
                raise ValueError(
                    f"{where} = {t!r}: this monitor needs event times "
                    f"({', '.join(self._time_needed)})"
                )
            return None
        return as_seconds(t, where)

    # ---------------------------------------------------------------------- updates
    def update(self, y_true, y_pred, w=1.0, t=None, segment=None):
        """Count one event; evaluate when an evaluation point is reached.

        Validated before any state changes: a bad label, score, weight, time or
        segment raises ``ValueError`` naming it, and nothing is counted.

        Runtime complexity: one ``update`` per metric of the whole stream and of the
        event's segment, plus an evaluation at evaluation points.

        Parameters
        ----------
        y_true
            The label (``pos_label`` or ``neg_label``).
        y_pred : float or dict
            The score, or a river probability dict.
        w : float
            The weight (finite, >= 0).
        t : float, datetime or numpy.datetime64, optional
            Event time (epoch seconds; datetimes as in :mod:`streameval.windows`);
            None or NaN: unknown.
        segment : optional
            The event's segment value (a tuple for several ``group_by`` fields).
        """
        try:
            if y_true not in self._pos_set and y_true not in self._neg_set:
                raise TypeError
        except TypeError:
            (pos,) = self._pos_set
            (neg,) = self._neg_set
            raise ValueError(
                f"y_true = {y_true!r}: label must be {pos!r} (positive) or {neg!r} (negative)"
            ) from None
        if type(y_pred) is float and y_pred - y_pred == 0.0:
            s = y_pred
        elif isinstance(y_pred, dict):
            (pos,) = self._pos_set
            s = y_pred.get(pos, 0.0)
            if isinstance(s, bool) or not isinstance(s, _Real) or not math.isfinite(s):
                raise ValueError(f"y_pred = {y_pred!r}: probability must be a finite number")
            s = float(s)
        else:
            s = check_real(y_pred, "y_pred", "score")
        if self._bounds is not None and not self._bounds[0] <= s <= self._bounds[1]:
            lo, hi = self._bounds
            fail("y_pred", y_pred, f"probability must be in [{lo:g}, {hi:g}] "
                 f"(metric {self._proba[0]!r} needs probabilities)")
        if w != 1.0 or type(w) is not float:
            w = check_weight(w)
            if w > 1e300 and self._column_checks:  # a weighted loss may overflow
                cols = (np.array([y_true in self._pos_set]), np.array([s]), np.array([w]))
                try:
                    for check in self._column_checks:
                        check(*cols)
                except ValidationError as e:
                    fail(e.name, e.value, e.reason)
        t = self._time(t)
        key = self._segment_key(segment)

        E = self.every_seconds
        if E is not None and self.t is not None and t // E > self.t // E:
            self._evaluate()
        if key is not None:
            key = self._capped(key)
        if self._overall is not None:
            self._overall.update(y_true, s, w, t)
        if key is not None:
            self._segment_of(key).update(y_true, s, w, t)
        self.n += 1
        if t is not None and (self.t is None or t > self.t):
            self.t = t
        if self._probe_segments and self.n >= GROUP_BY_PROBE:
            self._check_group_by()
        if self.every and self.n % self.every == 0:
            self._evaluate()

    def update_many(self, y_true, y_pred, w=None, t=None, segment=None):
        """Count a batch: same rows, alerts and state as a loop of :meth:`update`.

        The whole batch is validated first (``ValueError`` naming the first bad
        element and its index; nothing is counted). The evaluation points inside the
        batch are found with numpy; each metric gets ``update_many`` on the slices
        between them.

        Runtime complexity: `O(m)` numpy work plus one ``update_many`` per metric,
        segment and slice, plus the evaluations.

        Parameters
        ----------
        y_true, y_pred : sequences or numpy arrays
            Labels and scores (scores may be river probability dicts). With labels
            other than booleans (``pos_label="spam"``), a numpy bool array is read as
            "is positive" (the labels of :class:`streameval.events.EventBatch`).
        w : sequence, optional
            Weights (None: all 1).
        t : sequence, optional
            Event times (None: unknown; NaN entries: unknown).
        segment : sequence, optional
            One segment value per event (None entries: whole stream only).
        """
        y, scores, weights = self.validate(y_true, y_pred, w)
        m = len(scores)
        times = self._times(t, m)
        codes, keys = self._segment_codes(segment, m)
        if m == 0:
            return
        if keys and self.max_segments is not None:
            codes, keys = self._cap_codes(codes, keys)
        if self._probe_segments and self.n + m >= GROUP_BY_PROBE:
            self._check_group_by(keys, codes, GROUP_BY_PROBE - self.n)

        # evaluation points: after the first p events of the batch
        points = []
        if self.every:
            first = self.every - self.n % self.every
            points.append(np.arange(first, m + 1, self.every))
        E = self.every_seconds
        if E is not None:
            prev = np.nan if self.t is None else self.t
            before = np.fmax.accumulate(np.concatenate(([prev], times[:-1])))
            with np.errstate(invalid="ignore"):
                trig = np.floor_divide(times, E) > np.floor_divide(before, E)
            points.append(np.flatnonzero(trig))
        if len(points) > 1:
            points = np.unique(np.concatenate(points)).tolist()
        else:  # (one trigger: its points are distinct and ascending already)
            points = points[0].tolist() if points else []

        # per-segment event indices, in batch order
        groups = None
        if codes is not None:
            order = np.argsort(codes, kind="stable")
            bounds = np.searchsorted(codes[order], np.arange(-1, len(keys) + 1))
            groups = [(keys[c], order[bounds[c + 1]:bounds[c + 2]]) for c in range(len(keys))]

        a = 0
        for p in points:
            if p > a:
                self._feed(y, scores, weights, times, groups, a, p)
                a = p
            self._evaluate()
        if a < m:
            self._feed(y, scores, weights, times, groups, a, m)

    def check_many(self, y_true, y_pred, w=None, t=None, segment=None):
        """Validate a batch exactly as :meth:`update_many` does, counting nothing.

        Raises the ``ValueError`` that ``update_many`` would raise for it, naming the
        first bad element; a batch that passes is accepted by ``update_many`` on any
        state of this monitor (a service checks a batch before making it durable, and
        applies it after). Runtime complexity: `O(m)`, numpy.
        """
        _, scores, _ = self.validate(y_true, y_pred, w)
        m = len(scores)
        self._times(t, m)
        self._segment_codes(segment, m)

    def validate(self, y_true, y_pred, w=None):
        """Check a batch once for every metric, window and drift test of the monitor.

        Returns the validated columns ``(is_positive bool array, float64 scores,
        float64 weights or None)`` that the metrics' trusted path takes. A bad element
        raises :class:`~streameval.validation.ValidationError` naming it, with its
        ``index``; scores must also lie in the narrowest ``score_bounds`` of the
        metrics (log loss: probabilities). With labels other than booleans
        (``pos_label="spam"``), a numpy bool array is read as "is positive" (the labels
        of :class:`streameval.events.EventBatch`).

        Runtime complexity: `O(m)`, numpy.
        """
        m = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        if (not self._bool_labels and isinstance(y_true, np.ndarray)
                and y_true.dtype.kind == "b"):
            # labels already read as "is positive" (streameval.events batches): the
            # configured labels can never be booleans here, so there is no ambiguity
            labels = y_true
        else:
            labels = as_binary_labels(y_true, self._pos_set, self._neg_set)
        (pos,) = self._pos_set
        scores = as_float_array(y_pred, scalar=lambda v, i: _dict_score(v, i, pos))
        if self._bounds is not None and m:
            check_bounds(scores, self._bounds,
                         why=f" (metric {self._proba[0]!r} needs probabilities)")
        weights = as_weight_array(w, m)
        # what a metric's trusted path would still refuse (a weighted loss that
        # overflows): checked on every metric before any is updated
        for check in self._column_checks:
            check(labels, scores, weights)
        return labels, scores, weights

    def _labels(self, y):
        """The user's labels for a bool "is positive" array (for objects without the
        trusted path): the array itself with the default labels."""
        if self._bool_labels:
            return y
        (pos,) = self._pos_set
        (neg,) = self._neg_set
        return np.where(y, np.array(pos, dtype=object), np.array(neg, dtype=object))

    def _feed(self, y, s, w, t, groups, a, b):
        sl = slice(a, b)
        tt = None if t is None else t[sl]
        ws = None if w is None else w[sl]
        labels = self._labels
        if self._overall is not None:
            self._overall.update_many(y[sl], s[sl], ws, tt, labels)
        if groups is not None:
            for key, idx in groups:
                lo, hi = np.searchsorted(idx, (a, b))
                if hi == lo:
                    continue
                ix = idx[lo:hi]
                self._segment_of(key).update_many(
                    y[ix], s[ix], None if w is None else w[ix], None if t is None else t[ix],
                    labels)
        self.n += b - a
        if tt is not None:
            top = tt.max()
            if not top or top != top:  # a NaN (unknown time) or a zero: the NaN-aware max
                top = np.nanmax(tt) if not np.isnan(tt).all() else None
            if top is not None and (self.t is None or top > self.t):
                self.t = float(top)

    def _times(self, t, m):
        """Event times as float64 (NaN: unknown), or None when no event has one."""
        if t is None:
            if self._time_needed and m:
                raise ValueError(
                    f"t = None: this monitor needs event times ({', '.join(self._time_needed)})"
                )
            return None
        if isinstance(t, (str, bytes)) or not hasattr(t, "__len__"):
            raise ValueError(f"t = {t!r:.80}: update_many takes one event time per event")
        if len(t) != m:
            raise ValueError(f"y_true has {m} elements but t has {len(t)}")
        if isinstance(t, np.ndarray) and t.ndim == 1 and t.dtype.kind in "fiu":
            arr = t.astype(np.float64, copy=False)
        elif isinstance(t, np.ndarray) and t.ndim == 1 and t.dtype.kind == "M":
            arr = as_seconds_array(t, m)
        else:
            arr = np.empty(m, dtype=np.float64)
            for i, v in enumerate(t.tolist() if isinstance(t, np.ndarray) else t):
                if v is None or (isinstance(v, float) and v != v):
                    arr[i] = np.nan
                else:
                    try:
                        arr[i] = as_seconds(v, f"t[{i}]")
                    except ValidationError as e:
                        if e.index is None:
                            e.index, e.name = i, "t"
                        raise
                    except ValueError as e:
                        raise ValidationError("t", v, str(e), i, message=str(e)) from None
        inf = np.isinf(arr)
        if inf.any():
            i = int(np.argmax(inf))
            fail("t", float(arr[i]), "event time must be a finite number", i)
        nan = np.isnan(arr)
        if nan.any():
            if self._time_needed:
                i = int(np.argmax(nan))
                fail("t", t[i], f"this monitor needs event times ({', '.join(self._time_needed)})", i)
            if nan.all():
                return None
        return arr

    def _segment_codes(self, segment, m):
        """Per-event segment codes (-1: none) and the keys, in order of first appearance."""
        if segment is None:
            return None, []
        if self._fields is None:
            raise ValueError(f"segment = {segment!r:.80}: this monitor has no group_by")
        if isinstance(segment, (str, bytes)) or not hasattr(segment, "__len__"):
            raise ValueError(
                f"segment = {segment!r:.80}: update_many takes one segment value per event"
            )
        if len(segment) != m:
            raise ValueError(f"y_true has {m} elements but segment has {len(segment)}")
        items = segment.tolist() if isinstance(segment, np.ndarray) else segment
        raw = {}     # raw value -> code (-1: no segment), for hashable raw values
        index = {}   # segment key -> code
        keys = []
        codes = np.empty(m, dtype=np.int64)
        for i, v in enumerate(items):
            try:
                codes[i] = raw[v]
                continue
            except KeyError:
                hashable = True
            except TypeError:
                hashable = False
            try:
                key = self._segment_key(v, f"segment[{i}]")
            except ValueError as e:
                raise ValidationError("segment", v, str(e), i, message=str(e)) from None
            if key is None:
                c = -1
            else:
                c = index.get(key)
                if c is None:
                    c = index[key] = len(keys)
                    keys.append(key)
            if hashable:
                raw[v] = c
            codes[i] = c
        return codes, keys

    def _cap_codes(self, codes, keys):
        """Codes and keys with the new segments beyond ``max_segments`` (in order of
        first appearance, as a loop of :meth:`update` would meet them) mapped to
        :data:`OTHER_SEGMENT`'s key, counted in :attr:`other_events`."""
        room = self.max_segments - len(self._segments)
        new = [c for c, k in enumerate(keys) if k not in self._segments]
        over = new[max(room, 0):]
        if not over:
            return codes, keys
        other = self._other_key
        if other in keys:
            target = keys.index(other)
        else:
            keys = keys + [other]
            target = len(keys) - 1
        remap = np.arange(len(keys))
        remap[over] = target
        moved = np.isin(codes, over)
        codes = np.where(codes >= 0, remap[np.maximum(codes, 0)], -1)
        self._note_other(keys[over[0]], int(moved.sum()))
        used = np.unique(codes[codes >= 0])
        # drop the keys no event has any more, renumbering the codes
        if len(used) < len(keys):
            renum = np.full(len(keys), -1)
            renum[used] = np.arange(len(used))
            keys = [keys[c] for c in used.tolist()]
            codes = np.where(codes >= 0, renum[np.maximum(codes, 0)], -1)
        return codes, keys

    # ------------------------------------------------------------------- evaluation
    def _evaluate(self):
        """One evaluation point: a row per segment, then the rules. Idempotent per n."""
        if self._last_eval_n == self.n:
            return
        self._last_eval_n = self.n
        n, t = self.n, self.t
        segs = list(self._all_segments())
        reports = [seg.reports() for seg in segs]
        values = [seg.values(reps) for seg, reps in zip(segs, reports)]
        late = self._late_names
        for seg, vals in zip(segs, values):
            # a segment row counts the segment's events; stream_n places it in the stream
            row = ({"n": n, "t": t, "segment": None, "values": vals} if seg.key is None else
                   {"n": seg.n, "stream_n": n, "t": t, "segment": seg.label, "values": vals})
            if late:
                row["late"] = seg.late(late)
            for cb in self.on_metrics:
                cb(dict(row, values=dict(vals)))
        for seg, vals, reps in zip(segs, values, reports):
            for rule in seg.rules:
                kind = rule.kind
                if kind == "drift":
                    value = seg.rule_input(rule.metric, reps[rule.metric])
                elif kind == "alarm":
                    value = reps[rule.metric]
                elif getattr(rule, "confidence", None) is not None:
                    lo, hi = seg.metrics[rule.metric].interval(rule.confidence)
                    value = {"value": vals[rule.metric], "low": lo, "high": hi}
                else:
                    value = vals[rule.metric]
                tr = rule.evaluate(value, n=n, t=t, samples=seg.n)
                if tr is not None:
                    tr["segment"] = seg.label
                    for cb in self.on_alert:
                        cb(dict(tr))

    def evaluate(self):
        """Evaluate now (rows and rules), unless already done at this ``n``."""
        self._evaluate()

    def flush(self):
        """End of the stream: make sure the final state is in the timeline.

        Evaluates (rows for every segment, rules) unless the last evaluation was at
        the current ``n``. Idempotent.
        """
        if self._probe_segments and self.n:
            self._check_group_by()
        self._evaluate()

    def _check_group_by(self, keys=(), codes=None, upto=0):
        """Warn (once) about the ``group_by`` fields that had no value in the first
        :data:`GROUP_BY_PROBE` events: the segments met so far, plus ``keys`` of a batch
        whose first ``upto`` events (their ``codes``) are still among those."""
        self._probe_segments = False
        fields = self._fields
        met = list(self._segments)
        if keys and upto > 0:
            used = np.unique(codes[:upto])
            met += [keys[c] for c in used.tolist() if c >= 0]
        if len(fields) == 1:
            missing = [] if met else list(fields)
        else:
            missing = [f for i, f in enumerate(fields)
                       if all(k[i] is None for k in met)]
        if not missing:
            return
        import warnings

        first = min(self.n, GROUP_BY_PROBE) if upto <= 0 else GROUP_BY_PROBE
        msg = (f"group_by field {missing[0]!r} had no value in the first {first} events: "
               "they count in the whole stream only (is the field name right?)")
        self.warnings.append(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)

    # ---------------------------------------------------------------------- reading
    def snapshot(self):
        """The current values of every segment, and the active alerts.

        ``{"n", "t", "segments": {key: {"segment", "n", "values", "drift"}}, "alerts",
        "other_events", "max_segments", "warnings"}`` where ``key`` is None for the whole stream,
        the segment value, or a tuple for several ``group_by`` fields (``"segment"``
        holds its JSON form), ``n`` the segment's events, ``values`` its metrics (None
        where NaN) and ``drift`` its drift reports; with windows by ``period`` each
        segment also has ``late`` (``{name: events refused as late}``). Values are
        computed now, not at the last evaluation.
        """
        segments = {}
        late = self._late_names
        for seg in self._all_segments():
            reports = seg.reports()
            segments[seg.key] = {
                "segment": seg.label,
                "n": seg.n,
                "values": seg.values(reports),
                "drift": reports,
            }
            if late:
                segments[seg.key]["late"] = seg.late(late)
        return {"n": self.n, "t": self.t, "segments": segments, "alerts": self.active_alerts(),
                "other_events": self.other_events, "max_segments": self.max_segments,
                "warnings": list(self.warnings)}

    def active_alerts(self):
        """The open alerts (pending or firing): the transition that opened each, with its
        segment, whole stream first."""
        out = []
        for seg in self._all_segments():
            for rule in seg.rules:
                a = rule.active
                if a is not None:
                    a["segment"] = seg.label
                    out.append(a)
        return out

    def segment_metrics(self, segment=None):
        """The live metric objects of a segment (None: the whole stream). A metric
        that reads another's score order is a read-only
        :class:`~streameval.metrics.ranking.OrderView`, one that reads another's
        confusion matrix a read-only :class:`~streameval.metrics.confusion.CountsView`
        (``get``, ``interval``, ``to_state``)."""
        if segment is None:
            if self._overall is None:
                raise KeyError("this monitor has no whole-stream segment (overall=False)")
            return dict(self._overall.metrics)
        key = self._segment_key(segment, reserved_ok=True)
        if key not in self._segments:
            raise KeyError(f"no events seen in segment {segment!r}")
        return dict(self._segments[key].metrics)

    @property
    def segments(self):
        """Keys of the segments seen so far, in order of first appearance."""
        return list(self._segments)

    def __repr__(self):
        return (f"Monitor({len(self.metrics)} metrics, {len(self.drift)} drift tests, "
                f"{len(self.rules)} rules, {len(self._segments)} segments, n={self.n})")

    # ------------------------------------------------------------------------ state
    def to_state(self):
        """The whole state, JSON-serialisable: ``{"type": "Monitor", "version", "params",
        "data"}``. Callbacks (``on_metrics``, ``on_alert``) are not part of it.

        Runtime complexity: `O(size of every metric's state)`.
        """
        params = {
            "metrics": {name: _fresh(m).to_state() for name, m in self.metrics.items()},
            "drift": {name: _fresh(d).to_state() for name, d in self.drift.items()},
            "rules": [r.to_config() for r in self.rules],
            "group_by": self.group_by,
            "every": self.every,
            "every_seconds": self.every_seconds,
            "pos_label": self.pos_label,
            "neg_label": self.neg_label,
            "overall": self.overall,
            "max_segments": self.max_segments,
        }
        segments = []
        for seg in self._all_segments():
            segments.append({
                "overall": seg.key is None,
                "segment": seg.label,
                "n": seg.n,
                "metrics": {name: m.to_state() for name, m in seg.metrics.items()},
                "drift": {name: d.to_state() for name, d in seg.drift.items()},
                "rules": [r.to_state() for r in seg.rules],
            })
        data = {"n": self.n, "t": self.t, "last_eval_n": self._last_eval_n, "segments": segments,
                "other_events": self.other_events, "warnings": list(self.warnings),
                "probe_segments": self._probe_segments}
        return {"type": self._public_name, "version": self._state_version,
                "params": params, "data": data}

    @classmethod
    def from_state(cls, state):
        """Rebuild a monitor from :meth:`to_state` (callbacks are to be attached again)."""
        if not isinstance(state, dict) or state.get("type") != cls._public_name:
            raise ValueError(f"not a Monitor state: {state!r:.200}")
        return from_state(state)

    @classmethod
    def _from_state(cls, state):
        p, d = state["params"], state["data"]
        group_by = p["group_by"]
        mon = cls(
            {name: from_state(s) for name, s in p["metrics"].items()},
            drift={name: from_state(s) for name, s in p["drift"].items()},
            rules=[rule_from_config(r) for r in p["rules"]],
            group_by=group_by, every=p["every"], every_seconds=p["every_seconds"],
            pos_label=p["pos_label"], neg_label=p["neg_label"], overall=p["overall"],
            # (states from before the cap: their segments are kept, new ones capped)
            max_segments=p.get("max_segments", DEFAULT_MAX_SEGMENTS),
        )
        mon.n = d["n"]
        mon.other_events = d.get("other_events", 0)
        mon.warnings = list(d.get("warnings", ()))
        mon._probe_segments = d.get("probe_segments", mon._fields is not None
                                    and mon.n < GROUP_BY_PROBE)
        mon.t = d["t"]
        mon._last_eval_n = d["last_eval_n"]
        mon._segments = {}
        mon._overall = None
        for s in d["segments"]:
            if s["overall"]:
                key = None
            else:
                key = mon._segment_key(s["segment"], reserved_ok=True)
            seg = _Segment(
                key, None if key is None else (list(key) if isinstance(key, tuple) else key),
                {name: from_state(ms) for name, ms in s["metrics"].items()},
                {name: from_state(ds) for name, ds in s["drift"].items()},
                [Rule.from_state(rs) for rs in s["rules"]],
            )
            seg.n = s["n"]
            if key is None:
                mon._overall = seg
            else:
                mon._segments[key] = seg
        return mon


register(Monitor)


def _scalar(v, where, field):
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{where} = {v!r}: segment value of {field!r} must be finite")
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:  # could be neither checkpointed nor exported
            raise ValueError(f"{where} = {v!r}: segment value of {field!r} is not valid "
                             f"Unicode ({e.reason})") from None
    if not isinstance(v, _SCALARS):
        raise ValueError(
            f"{where} = {v!r}: segment value of {field!r} must be a string, number or bool"
        )
    return v


def _dict_score(v, i, pos):
    if isinstance(v, dict):
        s = v.get(pos, 0.0)
        if isinstance(s, bool) or not isinstance(s, _Real) or not math.isfinite(s):
            fail("y_pred", v, "probability must be a finite number", i)
        return float(s)
    if not isinstance(v, _Real):
        fail("y_pred", v, "score must be a finite number or a probability dict", i)
    return float(v)
