"""The Monitor's façade: :class:`Monitor`, which holds the configuration and the scopes
and wires intake, scopes and evaluation together.

* :meth:`Monitor.admit` runs the Monitor's own checks once
  (:mod:`streameval.monitor.intake`); :meth:`Monitor.apply` counts an admitted batch in
  every scope (:mod:`streameval.monitor.scopes`), capping new segments, and evaluates
  at the evaluation points inside it (:mod:`streameval.monitor.evaluation`);
  :meth:`Monitor.update_many` is ``apply(admit(...))`` of raw columns.
* :meth:`Monitor.update` counts one event, with the same checks.
* :meth:`Monitor.predict` and :meth:`Monitor.predict_many` count predictions when they
  are made, before their labels: the label-free metrics (``needs_labels = False``) take
  them (the whole stream's at once, a segment's with its other buffered events at its
  next row, in arrival order); ``update(..., predicted=True)`` later counts
  their labels in the labelled metrics only. :meth:`Monitor.apply` takes the output of a
  label join that passes predictions on (an admitted batch with ``kind``) in row order.
* Reading (``snapshot``, ``segment_metrics``, ``scopes``), the JSON state
  (``to_state``/``from_state``) and the binary state of checkpoints
  (``to_array_state``/``from_array_state``: numpy arrays as laid out, checked on load).

The rows, transitions, evaluation points and segments are described in
:mod:`streameval.monitor`.

Imports: numpy, the standard library, :mod:`streameval.events` (the row kinds),
:mod:`streameval.alerts`,
:mod:`streameval.metrics.base` (the registry, ``has_interval``),
:mod:`streameval.metrics.arraystate` (binary states, inside the state methods),
:mod:`streameval._gc` (the collector paused while a state is captured),
:mod:`streameval.windows.count` (the count windows' runs packed together, inside the
state methods),
:mod:`streameval.validation` (parameter checks), the Monitor's intake, scopes,
evaluation and explain modules, and :mod:`streameval.config` only inside :meth:`Monitor.default` and
:meth:`Monitor.from_config` (config imports the Monitor's parts, not the Monitor).
Never :mod:`streameval.io`, the pipeline, the CLI or the service.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from streameval.alerts import NAME_PATTERN, Rule, rule_from_config
from streameval.events import KIND_EVENT, KIND_EXPIRED, KIND_LABEL, KIND_PREDICTION
from streameval.metrics.base import SharedView, from_state, has_interval, register
from streameval.monitor.evaluation import Evaluator, evaluation_points
from streameval.monitor.explain import check_alarm
from streameval.monitor.intake import OTHER_SEGMENT, Admitted, Intake
from streameval.monitor.scopes import (
    Scope,
    fresh,
    label_free,
    report_dict,
    trusted,
    widen,
)
from streameval.validation import (
    Integer,
    Real,
    ValidationError,
    check_param,
    check_real,
    check_weight,
    fail,
    label_sets,
)

__all__ = ["Monitor", "DEFAULT_MAX_SEGMENTS", "OTHER_SEGMENT", "GROUP_BY_PROBE"]

#: Default cap on the number of segments with their own metrics.
DEFAULT_MAX_SEGMENTS = 1000
#: The events of a batch that no segment's evaluation point needs yet wait in one block
#: shared by the segments (sorted by segment, one copy per batch); every this many
#: batches the blocks are sorted together once and each segment's events moved to its
#: own buffer. Per batch, the cost is then a few numpy passes instead of a slice per
#: segment (``bench_segments.py --zipf``: 1 000 segments, a third of them in every
#: batch of 1 000).
STASH_BATCHES = 32
#: A ``group_by`` field that holds no value in any of the first this many events (or
#: in a shorter whole stream, at :meth:`Monitor.flush`) is warned about: a typo in the
#: field name otherwise only shows as segments that never appear.
GROUP_BY_PROBE = 1000

_Real = numbers.Real


def _check_rule_input(rule, obj, metrics=None):
    """Refuse a rule whose metric or detector cannot give what it reads: an interval
    (rules with ``confidence``), or a sequential detector's report (``alarm``)."""
    if rule.kind == "alarm":
        if "change" not in report_dict(fresh(obj).report()):
            raise ValueError(
                f"rule {rule.name!r}: {rule.metric!r} ({type(obj).__name__}) is not a "
                "sequential detector (an alarm rule reads a SequentialDrift: "
                "[monitor.drift.<name>] test = \"sequential\")"
            )
        check_alarm(rule, metrics, obj)
        return
    if getattr(rule, "confidence", None) is not None and not has_interval(obj):
        raise ValueError(
            f"rule {rule.name!r}: {rule.metric!r} ({type(obj).__name__}) has no confidence "
            "interval; confidence applies to proportions (precision, recall, accuracy, "
            "error_rate, fpr, specificity), roc_auc and gini, and their windows"
        )




class Monitor:
    """Named metrics, windows, drift tests and alert rules over one stream, per segment.

    See :mod:`streameval.monitor` for evaluation points, rows and segments; the TOML schema
    is in :mod:`streameval.config`.

    Events come complete (:meth:`update`, :meth:`update_many`), or as a prediction when
    it is made (:meth:`predict`, :meth:`predict_many`) and its label later
    (``update(..., predicted=True)``): label-free metrics (``needs_labels = False``)
    count predictions and complete events, labelled metrics labels and complete events.
    The whole stream feeds each at once and evaluates every ``every`` labelled events and,
    apart, every ``every`` predictions (and at each new period of ``every_seconds`` of
    either's times).

    Segments (``group_by``) are evaluated at their own cadence: a segment writes a row
    after every ``every`` of its own events since its last row (labels, complete events
    and predictions alike), at each new period of ``every_seconds``, at :meth:`evaluate`
    and at :meth:`flush`, and only when it counted events since its last row. A segment
    row's ``n`` counts the segment's labelled events its values cover, its
    ``coverage`` the predictions (the values a monitor fed only those events would
    give), ``stream_n`` the stream's count when it was written. Until its row is due, a
    segment's events wait in its buffer with their kinds (part of the state), and are
    then fed in arrival order: its label-free metrics take the predictions and complete
    events, its labelled metrics the labels and complete events. Its rules are
    evaluated at its rows (and, while one is pending or firing, at the whole stream's
    evaluation points); reads (:meth:`snapshot`, :meth:`segment_metrics`) show it as of
    its last row, with ``pending`` the events waiting, while its label ``coverage``
    counts every event when it comes. The cost of this: a segment with a share ``q`` of
    the stream is evaluated every ``every / q`` stream events (``every_seconds`` bounds
    the delay in event time).

    Runtime complexity: :meth:`update` costs one ``update`` per metric of the whole
    stream and an append to the event's segment's buffer; :meth:`update_many` one
    ``update_many`` per metric of the whole stream per slice between its evaluation
    points plus `O(m)` numpy work; a segment's row one ``update_many`` (its buffered
    events) and one ``get`` per metric; an idle segment nothing.

    >>> m = Monitor.default(size=100)
    >>> sorted(m.metrics)[:4]
    ['accuracy', 'accuracy@100', 'average_precision', 'average_precision@100']
    >>> m.update_many([1, 0, 1, 0], [0.9, 0.3, 0.6, 0.7])
    >>> m.snapshot()["segments"][None]["values"]["roc_auc"]
    0.75

    A source's validated batch goes in through :meth:`admit` (the Monitor's own checks,
    once) and :meth:`apply`:

    >>> from streameval.events import events_to_batch
    >>> m.apply(m.admit(events_to_batch([{"label": 1, "score": 0.2, "ts": 5}])))
    >>> m.n, m.snapshot()["segments"][None]["values"]["roc_auc"]
    (5, 0.5)

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
        Evaluate every ``every`` events (0: never by count); with a count, the whole
        stream is also evaluated at each event on which a sequential detector that its
        rules read detects a change (its row and alerts there).
    every_seconds : float, optional
        Evaluate at each new period of event time.
    pos_label, neg_label
        The labels (as in every metric); the metrics must use the same.
    overall : bool
        With ``group_by``, monitor the whole stream (segment None) as well.
    overall_rules : bool
        With ``group_by``, evaluate the rules on the whole stream (segment None) as
        well as on each segment. False: the rules watch the segments only and the
        whole stream keeps its rows (what the default monitor does with ``group_by``:
        one alert naming the segment that broke, not a second one on the whole stream
        that the segment drags along).
    overall_drift : bool
        With ``group_by``, run the drift tests on the whole stream (segment None) as
        well as on each segment. False: the whole stream's rows carry its metrics only,
        no drift columns (what the default monitor does with ``group_by`` while its
        rules watch the segments only: its detectors would feed no rule, their
        p-values assume one stationary stream where the segments' shares of traffic
        move, and they would cost as much as every segment's detectors together).
        False needs ``group_by``, and no rule of the whole stream may read a drift test.
    max_segments : int or None
        At most this many segments get their own metrics (None: no cap); the events
        of further segment values count under :data:`OTHER_SEGMENT`.
    """

    _public_name = "Monitor"
    _state_version = 1

    def __init__(self, metrics, *, rules=(), drift=None, group_by=None, every=1000,
                 every_seconds=None, pos_label=True, neg_label=None, overall=True,
                 max_segments=DEFAULT_MAX_SEGMENTS, overall_rules=True, overall_drift=True):
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
            for key in (f"drift.{name}.p_value", f"drift.{name}.delta",
                        f"drift.{name}.change_p_value"):
                if key in metrics:
                    raise ValueError(f"metric name {key!r} is the name of drift test {name!r}'s value")
        for name, obj in metrics.items():
            v = fresh(obj).get()
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
            _check_rule_input(rule, (self.drift if on_drift else self.metrics)[rule.metric],
                              self.metrics)
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
        if not isinstance(overall_rules, bool):
            raise ValueError(f"overall_rules = {overall_rules!r}: must be True or False")
        if not overall_rules and group_by is None:
            raise ValueError("overall_rules=False needs group_by (else no rule is evaluated)")
        #: whether the whole stream's scope evaluates the rules (with group_by: only
        #: when asked)
        self.overall_rules = overall_rules
        if not isinstance(overall_drift, bool):
            raise ValueError(f"overall_drift = {overall_drift!r}: must be True or False")
        if not overall_drift and group_by is None:
            raise ValueError("overall_drift=False needs group_by (else no drift test runs)")
        if not overall_drift and overall_rules:
            reads = [r.name for r in self.rules if r.kind in ("drift", "alarm")]
            if reads:
                raise ValueError(f"overall_drift=False with overall_rules=True: rule "
                                 f"{reads[0]!r} of the whole stream reads a drift test")
        #: whether the whole stream's scope runs the drift tests (with group_by: unless
        #: its rules read none)
        self.overall_drift = overall_drift
        self.max_segments = check_param("max_segments", max_segments,
                                        Integer(1, allow_none=True))
        #: events counted under OTHER_SEGMENT because max_segments was reached
        self.other_events = 0
        #: what the monitor warned about (in snapshots, states and replay summaries)
        self.warnings = []
        #: events without a value for a group_by field, by field: they count in the
        #: whole stream only (in snapshots, states and replay summaries)
        self.missing_segment_fields = {}
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
            if (rule.for_seconds is not None or rule.cooldown_seconds is not None
                    or rule.keep_firing_for_seconds is not None):
                self._time_needed.append(f"rule {rule.name!r}")
        # metrics of probabilities (log loss, Brier) refuse scores outside [0, 1]: the
        # monitor checks that up front, so that no metric is left half-updated
        column_checks = [o.check_columns for o in list(self.metrics.values())
                         + list(self.drift.values())
                         if trusted(o) and callable(getattr(o, "check_columns", None))]
        proba = []
        bounds = None
        for name, obj in list(self.metrics.items()) + list(self.drift.items()):
            b = getattr(obj, "score_bounds", None)
            if b is not None:
                proba.append(name)
                lo, hi = b if bounds is None else bounds
                bounds = (max(lo, b[0]), min(hi, b[1]))
        self._intake = Intake(pos_set=self._pos_set, neg_set=self._neg_set, bounds=bounds,
                              proba=proba, column_checks=column_checks,
                              time_needed=self._time_needed, fields=self._fields,
                              max_segments=self.max_segments)
        self._evaluator = Evaluator(late=self._late_names)
        self.n = 0
        self.t = None
        self._last_eval_n = None
        #: predictions counted before their labels (predict, predict_many) and the newest
        #: of their times (None: none yet)
        self.n_predicted = 0
        self.t_predicted = None
        self._last_eval_predicted = 0
        #: names of the label-free metrics and drift tests (needs_labels = False)
        self.label_free = [name for name, obj in list(self.metrics.items())
                           + list(self.drift.items()) if label_free(obj)]
        self._segments = {}
        self._index_segments()
        self._overall = self._new_segment(None) if overall else None


    @property
    def score_bounds(self):
        """``(low, high)``: the narrowest ``score_bounds`` of the metrics and drift
        tests, which every score must lie in (log loss: ``(0, 1)``), or None."""
        return self._intake.bounds

    @property
    def other_key(self):
        """The key of :data:`OTHER_SEGMENT` for this monitor's ``group_by`` (a tuple of it
        for several fields), or None without ``group_by``."""
        return self._intake.other_key

    @property
    def on_metrics(self):
        """Sinks of the metrics rows: callables, each called with one row dict."""
        return self._evaluator.on_metrics

    @on_metrics.setter
    def on_metrics(self, sinks):
        self._evaluator.on_metrics = sinks

    @property
    def on_alert(self):
        """Sinks of the alert transitions: callables, each called with one dict."""
        return self._evaluator.on_alert

    @on_alert.setter
    def on_alert(self, sinks):
        self._evaluator.on_alert = sinks

    @property
    def evaluator(self):
        """The :class:`~streameval.monitor.evaluation.Evaluator` writing this monitor's
        rows and transitions to its sinks (:attr:`on_metrics`, :attr:`on_alert`)."""
        return self._evaluator

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
    def from_config(cls, config, *, label_free=False):
        """A monitor from a parsed ``[monitor]`` table (or a document holding one).

        The schema is in :mod:`streameval.config`; an unknown or bad key raises
        ``ValueError`` naming it. ``label_free=True``: a table that leaves the metrics
        to the default gets the default label-free metrics too
        (:func:`streameval.config.build_label_free`).
        """
        from streameval import config as _config

        table = _config.monitor_table(config)
        if label_free:
            return cls(**_config.build_label_free(table))
        return cls(**_config.build(table))

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
        (``recall@10000``), sequential detectors ``recall``, ``precision`` and ``fpr``
        (:class:`~streameval.sequential.SequentialDrift`, ``alpha = 0.005`` each) and
        the rules ``recall alarm`` and ``fpr alarm on rise`` (they page: what does not
        move with prevalence) and ``precision alarm`` (severity ``"info"``: it reports a
        precision change with its cause, the traffic or the model). Its guarantee: on
        a healthy stream of independent events (the model's recall and FPR constant;
        prevalence and volume may move), the probability that a paging rule fires
        within the first million events of the whole stream is at most 1%, however many
        segments ``group_by`` makes (each segment's detectors spend the budget by the
        segment's events). With ``group_by`` the rules watch the segments only
        (``overall_rules=False``: the whole stream keeps its metrics' rows but raises
        no alert and runs no detectors, ``overall_drift=False``; ``overall_rules=True``
        adds its detectors and alarms, and their own 1%).
        ``window=`` is the older name of ``size=``.
        ``label_free=True`` (what replay and the service use when predictions come before
        their labels) adds the label-free metrics, their checks against the realized
        values as labels join, the sequential score detector ``score_shift`` with its
        ``score drift`` and ``score drift on rise`` alarms, and the ``estimate diverged``
        rule (:func:`streameval.config.default_label_free`).
        ``kwargs`` (``every``, ``group_by``, ...) go to the constructor.
        """
        from streameval import config as _config

        label_free = kwargs.pop("label_free", False)
        if size is not None and window is not None:
            raise ValueError("give size= or its alias window=, not both")
        size = size if size is not None else window if window is not None else 10_000
        table = {"threshold": threshold, "size": size}
        for key in ("every", "every_seconds", "group_by", "overall", "pos_label", "neg_label",
                    "max_segments", "overall_rules", "overall_drift"):
            if key in kwargs and kwargs[key] is not None:
                table[key] = kwargs.pop(key)
        if kwargs:
            raise TypeError(f"Monitor.default() got unexpected arguments {sorted(kwargs)}")
        return cls(**(_config.build_label_free(table) if label_free
                       else _config.build(table)))


    def new_scope(self, key):
        """A fresh :class:`~streameval.monitor.scopes.Scope` for segment ``key`` (None:
        the whole stream) with new copies of the metrics, drift tests and rules; the
        monitor does not keep it (Spark's replay builds its scopes this way)."""
        label = list(key) if isinstance(key, tuple) else key
        return Scope(
            key, label,
            {name: fresh(m) for name, m in self.metrics.items()},
            {name: fresh(d) for name, d in self.drift.items()}
            if key is not None or self.overall_drift else {},
            [r.clone() for r in self.rules] if key is not None or self.overall_rules else [],
        )

    def _new_segment(self, key):
        seg = self.new_scope(key)
        if key is not None:
            self._segments[key] = seg
            if len(self._seq) == len(self._segments) - 1:  # (else rebuilt on first use)
                self._seq[key] = len(self._by_seq)
                self._by_seq.append(seg)
        return seg

    # ------------------------------------------------------- the segments' cadence
    def _index_segments(self):
        """Forget the indexes over the segments (rebuilt from them on first use): which
        have events in their buffers, which have a pending or firing rule, and their
        order of first appearance."""
        self._pending_segs = None
        self._active_segs = None
        self._seq = {}       # key -> index in order of first appearance
        self._by_seq = []    # the segments by that index
        # [(block, kind, segment indexes, taken)]: see STASH_BATCHES; ``taken``: the
        # segment indexes whose events of the block their buffers took already
        self._stash = []
        # events buffered per segment index (own buffer + stash); zero for segments
        # with empty buffers, built from the buffers once by a restore (_restore_scopes)
        self._pend_count = np.zeros(16, np.int64)

    def _seqs(self):
        """``{key: index}`` of the segments in order of first appearance."""
        if len(self._seq) != len(self._segments):
            self._seq = {k: i for i, k in enumerate(self._segments)}
            self._by_seq = list(self._segments.values())
        return self._seq

    def _counts(self):
        """Events buffered per segment index (its own buffer and the stash), int64: kept
        up to date as events are buffered and fed (a new segment's count starts at 0;
        a restore builds them once, :meth:`_restore_scopes`)."""
        need = len(self._seqs())
        c = self._pend_count
        if len(c) < need:
            c = self._pend_count = np.concatenate([c, np.zeros(2 * need - len(c), np.int64)])
        return c

    def _unstash(self, i, sc):
        """Move the stashed events of segment index ``i`` to its buffer (in order): a
        copy of them; the blocks keep them, marked taken, until :meth:`_compact`."""
        for block, kind, ids, taken in self._stash:
            if i in taken:
                continue
            mask = ids == i
            if mask.any():
                sc.pend(block[:, mask], kind)
                taken.add(i)

    def _compact(self):
        """Move every stashed event to its segment's buffer: the blocks sorted together
        by segment (stable: each segment's events stay in order), one slice each; blocks
        of different layouts (weights, times, event kinds) in the widest of them."""
        stash = self._stash
        if not stash:
            return
        kind = 0
        for x in stash:
            kind |= x[1]
        parts = []
        for block, k, ids, taken in stash:
            if taken:  # (the events segments' buffers took already)
                keep = ~np.isin(ids, np.fromiter(taken, np.int64, len(taken)))
                block, ids = block[:, keep], ids[keep]
            parts.append((widen(block, k, kind), ids))
        ids = np.concatenate([x[1] for x in parts])
        block = np.concatenate([x[0] for x in parts], axis=1)
        self._stash = []
        if not len(ids):
            return
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        block = block[:, order]
        cut = (np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist()
        by = self._by_seq
        pending = self._pending_index()
        ids = ids.tolist()
        for a, b in zip([0] + cut, cut + [len(ids)]):
            sc = by[ids[a]]
            sc.pend(block[:, a:b].copy(), kind)
            pending[sc.key] = sc

    def _pending_index(self):
        """``{key: scope}`` of the segments with events in their buffers."""
        if self._pending_segs is None:
            self._pending_segs = {k: sc for k, sc in self._segments.items() if sc.pending}
        return self._pending_segs

    def _active_index(self):
        """``{key: scope}`` of the segments with a pending or firing rule."""
        if self._active_segs is None:
            self._active_segs = {k: sc for k, sc in self._segments.items()
                                 if any(r.active is not None for r in sc.rules)}
        return self._active_segs

    def _in_order(self, scopes):
        """``scopes`` (segments) in their order of first appearance."""
        if len(scopes) < 2:
            return list(scopes)
        seq = self._seqs()
        return sorted(scopes, key=lambda sc: seq[sc.key])

    def _feed_segment(self, seg):
        """Feed a segment's buffered events to its objects (one slice); its stashed
        events must be in its buffer already (:meth:`_unstash`, :meth:`_compact`)."""
        seg.feed_pending(self._intake.labels)
        self._pending_index().pop(seg.key, None)
        self._counts()[self._seqs()[seg.key]] = 0

    def _point(self, stream, due=(), flush=False, fresh=False):
        """One evaluation: the segments ``due`` (fed, at their own cadence) and, with
        ``stream`` (an evaluation point of the whole stream; once per ``n``), the whole
        stream and the idle segments whose rules are pending or firing; with ``flush``
        (a new period of event time, :meth:`evaluate`, :meth:`flush`) every segment
        with buffered events is fed and evaluated too. Rows: whole stream first, then
        segments in order of first appearance."""
        segs = {sc.key: sc for sc in due}
        if flush:
            self._compact()
            for sc in list(self._pending_index().values()):
                self._feed_segment(sc)
                segs[sc.key] = sc
        scopes = []
        if stream and (self._last_eval_n != self.n
                       or self._last_eval_predicted != self.n_predicted):
            self._last_eval_n = self.n
            self._last_eval_predicted = self.n_predicted
            if self._overall is not None:
                scopes.append(self._overall)
            for k, sc in self._active_index().items():
                segs.setdefault(k, sc)
        if not scopes and not segs:
            return
        ordered = self._in_order(list(segs.values()))
        # (what a binary state capture compares: these scopes' rules may change now)
        stamps = self.__dict__.setdefault("_evaluations", {})
        for sc in scopes + ordered:
            stamps[sc.key] = stamps.get(sc.key, 0) + 1
        t, tp = self.t, self.t_predicted  # (rows: the newest time of events or predictions)
        self._evaluator.evaluate(scopes + ordered, self.n,
                                 t if tp is None or (t is not None and t >= tp) else tp, fresh)
        active = self._active_index()
        for sc in ordered:
            if any(r.active is not None for r in sc.rules):
                active[sc.key] = sc
            else:
                active.pop(sc.key, None)

    def _all_segments(self):
        if self._overall is not None:
            yield self._overall
        yield from self._segments.values()

    def scopes(self):
        """The monitor's scopes (:class:`~streameval.monitor.scopes.Scope`): the whole
        stream's first (when ``overall``), then the segments' in order of first
        appearance. Their metrics are live: read them, do not update them."""
        self._compact()
        return list(self._all_segments())

    # -------------------------------------------------------------------- validation
    def segment_key(self, segment, where="segment"):
        """The hashable key of a segment value for this monitor's ``group_by`` (None: the
        whole stream only); ``ValueError`` naming ``where`` for a value it refuses."""
        return self._intake.segment_key(segment, where)

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
        return self._intake.other_key

    def _note_other(self, key, k):
        if not self.other_events:
            import warnings

            msg = (f"max_segments = {self.max_segments} reached: the events of new segment "
                   f"values (first {key!r}) are counted under segment {OTHER_SEGMENT!r}")
            self.warnings.append(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=4)
        self.other_events += k

    # ---------------------------------------------------------------------- updates
    def update(self, y_true, y_pred, w=1.0, t=None, segment=None, *, predicted=False):
        """Count one event; evaluate when an evaluation point is reached.

        ``predicted=True``: the label of a prediction given to :meth:`predict` earlier
        (the label-free metrics counted it then; only the labelled ones count it now).

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
        intake = self._intake
        bounds = intake.bounds
        if bounds is not None and not bounds[0] <= s <= bounds[1]:
            lo, hi = bounds
            fail("y_pred", y_pred, f"probability must be in [{lo:g}, {hi:g}] "
                 f"(metric {intake.proba[0]!r} needs probabilities)")
        if w != 1.0 or type(w) is not float:
            w = check_weight(w)
            if w > 1e300 and intake.column_checks:  # a weighted loss may overflow
                cols = (np.array([y_true in self._pos_set]), np.array([s]), np.array([w]))
                try:
                    for check in intake.column_checks:
                        check(*cols)
                except ValidationError as e:
                    fail(e.name, e.value, e.reason)
        t = intake.time(t)
        key = intake.segment_key(segment)
        if self._fields is not None:
            missing = intake.missing_of_key(key)
            if missing:
                self._count_missing(dict.fromkeys(missing, 1))

        E = self.every_seconds
        if E is not None and self.t is not None and t // E > self.t // E:
            self._point(stream=True, flush=True)
        if key is not None:
            key = self._capped(key)
        free = not predicted
        alarm = False
        if self._overall is not None:
            stops = self._overall.stops if self.every else None
            seen = _changes_of(stops)
            self._overall.update(y_true, s, w, t, free)
            alarm = _changes_of(stops) != seen  # (a detector a rule reads: evaluate now)
        due = ()
        if key is not None:
            seg = self._segment_of(key)
            # a segment's events wait in its buffer until its own evaluation point
            self._compact()  # (the stashed ones first: they came before)
            seg.pend_one(y_true in self._pos_set, s, w, t,
                         KIND_EVENT if free else KIND_LABEL)
            self._pending_index()[key] = seg
            self._counts()[self._seqs()[key]] += 1
            if self.every and seg.pending >= self.every:
                self._feed_segment(seg)
                due = (seg,)
        self.n += 1
        if t is not None and (self.t is None or t > self.t):
            self.t = t
        if self._probe_segments and self.n >= GROUP_BY_PROBE:
            self._check_group_by()
        stream = bool(self.every) and self.n % self.every == 0 or alarm
        if stream or due:
            self._point(stream, due)


    def update_many(self, y_true, y_pred, w=None, t=None, segment=None, *, predicted=False):
        """Count a batch: same rows, alerts and state as a loop of :meth:`update`
        (``predicted=True``: labels of predictions given to :meth:`predict_many` before).

        ``apply(admit(...))`` of raw columns: the whole batch is validated first
        (``ValueError`` naming the first bad element and its index; nothing is
        counted). The evaluation points inside the batch are found with numpy; each
        metric of the whole stream gets its trusted ``update`` on the slices between
        them, and each segment's events go to its buffer (fed at its own points).

        Runtime complexity: `O(m)` numpy work plus one ``update_many`` per metric of the
        whole stream and slice, plus the evaluations (a segment's: one ``update_many``
        per metric for its buffered events).

        Parameters
        ----------
        y_true, y_pred : sequences or numpy arrays
            Labels and scores (scores may be river probability dicts). With labels
            other than booleans (``pos_label="spam"``), a numpy bool array is read as
            "is positive" (the labels of :class:`streameval.events.Batch`).
        w : sequence, optional
            Weights (None: all 1).
        t : sequence, optional
            Event times (None: unknown; NaN entries: unknown).
        segment : sequence, optional
            One segment value per event (None entries: whole stream only).
        """
        admitted = self._intake.admit_columns(y_true, y_pred, w, t, segment)
        if predicted:
            admitted = Admitted(*admitted[:6], np.full(len(admitted), KIND_LABEL, np.int8))
        self.apply(admitted)

    # ------------------------------------------------------------------ predictions
    def predict(self, y_score, w=1.0, t=None, segment=None):
        """Count one prediction when it is made, before its label: every label-free
        metric (``needs_labels = False``: estimates from scores, score drift) of the whole
        stream, cumulative and windowed, takes it at time ``t``; its segment's buffers it
        with its other events and takes it at its next row, in arrival order.

        Its label, when it comes, goes to :meth:`update` with ``predicted=True`` (the
        labelled metrics count it then, the label-free ones not again). The label
        coverage (:meth:`snapshot`, rows) counts it as pending until its label comes or
        :meth:`unlabelled` says it never will. A monitor without label-free metrics counts
        the prediction in its coverage only.

        Predictions trigger evaluations as events do: every ``every`` predictions and at
        each new period of ``every_seconds`` of their times (the whole stream), after
        every ``every`` events of either kind since its last row (a segment); rows then
        carry ``n`` (the labelled events), the newest time of either, and ``coverage``.

        Validated before any state changes: a bad score, weight, time or segment raises
        ``ValueError`` naming it, and nothing is counted.

        Runtime complexity: one ``update`` per label-free metric of the whole stream and
        an append to the segment's buffer, plus an evaluation at evaluation points.

        >>> import streameval as se
        >>> m = Monitor({"recall": se.Recall()}, every=0)
        >>> m.predict(0.9, t=10.0); m.predict(0.2, t=11.0)
        >>> m.update(True, 0.9, t=50.0, predicted=True)
        >>> m.snapshot()["segments"][None]["coverage"]
        {'predictions': 2, 'labelled': 1, 'pending': 1, 'expired': 0}
        """
        self.predict_many([y_score], [w], None if t is None else [t],
                          None if segment is None else [segment])

    def predict_many(self, y_score, w=None, t=None, segment=None):
        """Count a batch of predictions when they are made: same rows, alerts and state
        as a loop of :meth:`predict`. Validated whole first (``ValueError`` naming the
        first bad element and its index; nothing counted).

        Runtime complexity: `O(m)` numpy plus one ``update_many`` per label-free metric,
        scope and slice between evaluation points."""
        scores = y_score if isinstance(y_score, np.ndarray) else list(y_score)
        m = len(scores)
        try:
            admitted = self._intake.admit_columns(np.zeros(m, bool), scores, w, t, segment)
        except ValidationError as e:
            if e.name != "y_pred":
                raise
            raise ValidationError("y_score", e.value, e.reason, e.index) from None
        self.apply(Admitted(*admitted[:6], np.full(m, KIND_PREDICTION, np.int8)))

    def unlabelled(self, k=1, segment=None, *, expired=True):
        """Count ``k`` predictions of ``segment`` (given to :meth:`predict`) that will never
        be labelled: expired (``expired=True``) or replaced by a later prediction with
        their id. Label coverage only: the label-free metrics keep them (a prediction
        counts when it is made). Runtime complexity: `O(1)`."""
        key = self._intake.segment_key(segment)
        self._close_key(key, check_param("k", k, Integer(0)), expired)

    def _close_key(self, key, k, expired):
        if self._overall is not None:
            self._overall.count_unlabelled(k, expired)
        if key is not None:
            if key not in self._segments and self.max_segments is not None \
                    and len(self._segments) >= self.max_segments:
                key = self._intake.other_key
            self._segment_of(key).count_unlabelled(k, expired)

    def _apply_kinds(self, admitted):
        """Apply a batch with ``kind`` in row order: runs of complete events, labels of
        earlier predictions, predictions, and predictions closed unlabeled."""
        kind = admitted.kind
        cut = np.flatnonzero(np.diff(kind)) + 1
        starts = [0] + cut.tolist()
        ends = cut.tolist() + [len(kind)]
        for a, b in zip(starts, ends):
            k = int(kind[a])
            part = admitted.part(a, b)
            if k in (KIND_EVENT, KIND_LABEL, KIND_PREDICTION):
                self._apply(part, k)
            else:
                self._close_part(part, k == KIND_EXPIRED)

    def _close_part(self, part, expired):
        if part.codes is None:
            self._close_key(None, len(part), expired)
            return
        counts = np.bincount(part.codes + 1, minlength=len(part.keys) + 1)
        if self._overall is not None:
            self._overall.count_unlabelled(len(part), expired)
        for c, key in enumerate(part.keys):
            if counts[c + 1]:
                if key not in self._segments and self.max_segments is not None \
                        and len(self._segments) >= self.max_segments:
                    key = self._intake.other_key
                self._segment_of(key).count_unlabelled(int(counts[c + 1]), expired)

    def _advance_predictions(self, s, w, t, a, b):
        """Count the batch's predictions ``a:b`` in the stream: fed to the whole stream's
        label-free objects (segments buffer theirs), the count and newest time of
        predictions."""
        sl = slice(a, b)
        tt = None if t is None else t[sl]
        if self._overall is not None:
            self._overall.predict_many(s[sl], None if w is None else w[sl], tt,
                                       self._intake.labels)
        self.n_predicted += b - a
        if tt is not None and not np.isnan(tt).all():
            top = float(np.nanmax(tt))
            if self.t_predicted is None or top > self.t_predicted:
                self.t_predicted = top

    def admit(self, batch):
        """The Monitor's own checks on a validated :class:`streameval.events.Batch`, once:
        scores inside the metrics' ``score_bounds``, what a metric's trusted path would
        still refuse (``check_columns``), an event time on every event when the monitor
        needs times, and segment values that make valid keys. Its columns are not
        validated again (the source did): labels must be a bool array (is positive),
        scores float64; one vectorised pass each refuses a score that is not finite
        or a weight outside ``[0, MAX_WEIGHT]`` (a batch built by hand).

        Returns the :class:`~streameval.monitor.intake.Admitted` batch that
        :meth:`apply` takes, on this or any later state of a monitor of the same
        configuration (the segment cap is applied by :meth:`apply`). A refused event
        raises :class:`~streameval.validation.ValidationError` naming it and its
        ``index``; :meth:`refused` lists every one. Nothing is counted.

        Runtime complexity: `O(m)` numpy, plus one key check per distinct segment value.
        """
        return self._intake.admit(batch)

    def refused(self, batch):
        """``[(row, ValidationError)]``: every row of ``batch`` that :meth:`admit` would
        refuse, in row order, each with the first of the Monitor's checks it fails (the
        error's ``index`` is the row). The rows not listed are admitted together: a
        replay with ``--on-error skip`` sets these aside and feeds the others.

        Runtime complexity: `O(m)` numpy per check."""
        return self._intake.refused(batch)

    def apply(self, admitted):
        """Count an admitted batch (:meth:`admit`) in every scope: the whole stream's and
        each event's segment (new segments past ``max_segments`` under
        :data:`OTHER_SEGMENT`), evaluating at every evaluation point inside it. Same
        rows, alerts and state as a loop of :meth:`update`.

        Runtime complexity: `O(m)` numpy plus one trusted update per metric of the whole
        stream and slice between its evaluation points, plus the evaluations (a
        segment's: its buffered events in one trusted update per metric); every
        :data:`STASH_BATCHES` batches, one sort of the events waiting for their
        segments."""
        if not isinstance(admitted, Admitted):
            raise TypeError(f"apply takes what admit() returns, not {type(admitted).__name__}")
        if admitted.kind is not None:
            self._apply_kinds(admitted)
            return
        self._apply(admitted, KIND_EVENT)

    def _apply(self, admitted, ek):
        """Count events of one kind ``ek``: complete events (``KIND_EVENT``: every
        object), labels of earlier predictions (``KIND_LABEL``: the labelled objects) or
        predictions before their labels (``KIND_PREDICTION``: the label-free objects;
        they count and evaluate on their own clock, ``n_predicted`` and
        ``t_predicted``). A segment buffers them with their kind (:meth:`Scope.pend`)
        and counts either kind towards its own evaluation points."""
        y, scores, weights, times = (admitted.is_positive, admitted.score, admitted.weight,
                                     admitted.time)
        codes, keys = admitted.codes, list(admitted.keys)
        m = len(scores)
        if m == 0:
            return
        if ek == KIND_PREDICTION:
            # predictions: no label (a placeholder the label-free objects ignore); the
            # same segment cap as their labels will meet, which count its events
            y = np.zeros(m, bool)
            if keys and self.max_segments is not None:
                other = self.other_events
                codes, keys = self._cap_codes(codes, keys)
                self.other_events = other
            n0, t0 = self.n_predicted, self.t_predicted
        else:
            if self._fields is not None:
                missing = self._intake.missing_fields(codes, keys, m)
                if missing:
                    self._count_missing(missing)
            if keys and self.max_segments is not None:
                codes, keys = self._cap_codes(codes, keys)
            if self._probe_segments and self.n + m >= GROUP_BY_PROBE:
                self._check_group_by(keys, codes, GROUP_BY_PROBE - self.n)
            n0, t0 = self.n, self.t

        # evaluation points of the whole stream (of its predictions, for predictions):
        # after the first p events of the batch
        every, E = self.every, self.every_seconds
        counts = evaluation_points(n0, t0, None, m, every, None) if every else []
        periods = evaluation_points(n0, t0, times, m, 0, E) if E is not None else []
        count_set, period_set = set(counts), set(periods)
        if codes is None or not keys:
            points = sorted(count_set | period_set)
            a = 0
            for p in points:
                alarm = False
                if p > a:
                    alarm = self._advance(y, scores, weights, times, a, p, ek)
                    a = p
                if p in count_set or alarm:
                    self._point(stream=True)
                if p in period_set:
                    self._point(stream=True, flush=True)
            if a < m and self._advance(y, scores, weights, times, a, m, ek):
                self._point(stream=True)
            return

        # the batch sorted by segment (stable: each segment's events in batch order),
        # as one block of rows (is positive, score[, weight][, time][, kind]: see
        # Scope.pend) that segments' buffers take their slices of
        K = len(keys)
        order = np.argsort(codes, kind="stable")
        edges = np.searchsorted(codes[order], np.arange(K + 1)).tolist()
        kind = (weights is not None) | ((times is not None) << 1) | ((ek != KIND_EVENT) << 2)
        rows = [y, scores] + ([weights] if weights is not None else []) + (
            [times] if times is not None else []) + (
            [np.full(m, float(ek))] if ek != KIND_EVENT else [])
        block = np.vstack(rows)[:, order]
        segs = list(map(self._segments.get, keys))
        if None in segs:  # (new segments, made in order of first appearance)
            segs = [sc or self._segment_of(k) for sc, k in zip(segs, keys)]
        ids = np.fromiter(map(self._seqs().__getitem__, keys), np.int64, K)
        counts_all = self._counts()
        start, end = edges[:-1], edges[1:]
        pending = self._pending_index()
        touched = set()

        def pend_before(c, p):
            """Move segment ``c``'s stashed events, then its events before position
            ``p``, to its buffer."""
            self._unstash(int(ids[c]), segs[c])
            s, e = start[c], end[c]
            if s == e:
                return
            hi = e if p >= m else s + int(np.searchsorted(order[s:e], p))
            if hi > s:
                segs[c].pend(block[:, s:hi].copy(), kind)
                start[c] = hi
                touched.add(c)
                pending[keys[c]] = segs[c]

        # each segment's own points: after its every-th event since its last row (a
        # new period of event time feeds every segment, restarting the counts)
        due = {}
        if every:
            s0 = 0
            for s1 in periods + [m]:
                base = (counts_all[ids] if s0 == 0 and 0 not in period_set
                        else np.zeros(K, dtype=np.int64))
                part = codes[s0:s1]
                tot = base + np.bincount(part[part >= 0], minlength=K)
                for c in np.flatnonzero(tot >= every).tolist():
                    where = order[edges[c]:edges[c + 1]]
                    lo, hi = np.searchsorted(where, (s0, s1)).tolist()
                    js = np.arange(every - int(base[c]) - 1, hi - lo, every)
                    for p in (where[lo + js] + 1).tolist():
                        due.setdefault(p, []).append(c)
                s0 = s1

        # the whole stream's scope is fed at its own points alone (a segment's row reads
        # the stream's count and time, not its scope): one trusted update per stretch
        # between them, not one per segment's point as well
        lazy = (ek == KIND_EVENT and self._overall is not None
                and not (self.every and self._overall.stops is not None))
        a = fa = 0
        for p in sorted(count_set | period_set | due.keys()):
            alarm = False
            if p > a:
                own = not lazy or p in count_set or p in period_set  # (the stream's point)
                alarm = self._advance(y, scores, weights, times, a, p, ek,
                                      feed_from=fa if own else p)
                fa = p if own else fa
                a = p
            fed = []
            for c in due.get(p, ()):
                pend_before(c, p)
                self._feed_segment(segs[c])
                fed.append(segs[c])
            if p in count_set or fed or alarm:
                self._point(p in count_set or alarm, fed)
            if p in period_set:
                self._compact()
                for c in range(K):
                    pend_before(c, p)
                self._point(stream=True, flush=True)
                counts_all = self._counts()
        if (a < m or fa < m) and self._advance(y, scores, weights, times, a, m, ek,
                                               feed_from=fa):
            self._point(stream=True)
        # the rest waits in the stash: the events not taken (each segment's taken ones
        # are the first of its run in the sorted block)
        rest = np.array(end) - np.array(start)
        if rest.any():
            keep = np.ones(len(order), dtype=bool)
            keep[:edges[0]] = False  # (events without a segment)
            for c in touched:
                keep[edges[c]:start[c]] = False
            self._stash.append((block[:, keep], kind, ids[codes[order][keep]], set()))
            counts_all = self._counts()
            counts_all[ids] += rest
            if len(self._stash) >= STASH_BATCHES:
                self._compact()

    def check_many(self, y_true, y_pred, w=None, t=None, segment=None):
        """Validate a batch exactly as :meth:`update_many` does, counting nothing.

        Raises the ``ValueError`` that ``update_many`` would raise for it, naming the
        first bad element; a batch that passes is accepted by ``update_many`` on any
        state of this monitor. Runtime complexity: `O(m)`, numpy.
        """
        self._intake.admit_columns(y_true, y_pred, w, t, segment)

    def validate(self, y_true, y_pred, w=None):
        """Check a batch once for every metric, window and drift test of the monitor.

        Returns the validated columns ``(is_positive bool array, float64 scores,
        float64 weights or None)`` that the metrics' trusted path takes. A bad element
        raises :class:`~streameval.validation.ValidationError` naming it, with its
        ``index``; scores must also lie in the narrowest ``score_bounds`` of the
        metrics (log loss: probabilities). With labels other than booleans
        (``pos_label="spam"``), a numpy bool array is read as "is positive" (the labels
        of :class:`streameval.events.Batch`).

        Runtime complexity: `O(m)`, numpy.
        """
        return self._intake.validate(y_true, y_pred, w)

    def _advance(self, y, s, w, t, a, b, ek=KIND_EVENT, feed_from=None):
        """Count the batch's events ``a:b`` of kind ``ek`` in the stream: fed to the
        whole stream's scope (segments buffer theirs), the stream's count and newest
        time (of predictions, for ``KIND_PREDICTION``). ``feed_from``: the whole
        stream's scope takes ``feed_from:b`` instead (events of kind ``KIND_EVENT``
        counted earlier and not yet fed to it; ``b``: none)."""
        if ek == KIND_PREDICTION:
            self._advance_predictions(s, w, t, a, b)
            return
        if self.every and self._overall is not None and self._overall.stops is not None:
            return self._advance_to_alarms(y, s, w, t, a, b, ek)
        if self._overall is not None:
            fs = slice(a if feed_from is None else feed_from, b)
            if fs.start < b:
                self._overall.update_many(y[fs], s[fs], None if w is None else w[fs],
                                          None if t is None else t[fs],
                                          self._intake.labels, ek == KIND_EVENT)
        if b <= a:
            return
        tt = None if t is None else t[a:b]
        self.n += b - a
        if tt is not None:
            top = tt.max()
            if not top or top != top:  # a NaN (unknown time) or a zero: the NaN-aware max
                top = np.nanmax(tt) if not np.isnan(tt).all() else None
            if top is not None and (self.t is None or top > self.t):
                self.t = float(top)

    def _advance_to_alarms(self, y, s, w, t, a, b, ek):
        """:meth:`_advance` for a whole stream evaluated by count (``every``) whose rules
        read change detectors that stop at a change (:meth:`Scope.update_until_alarm`;
        by event time alone, the evaluations stay those of the periods, as the Spark
        engine's replay makes them): the events ``a:b`` up to
        each event on which a detector detects a change, an evaluation of the whole
        stream there (its row and its alerts, as at an evaluation point), then the
        rest. Returns whether a change was detected on the last event ``b - 1`` (the
        caller evaluates there, with whatever else is due at that point), so that the
        rows and alerts do not depend on how the events were batched."""
        sc, labels = self._overall, self._intake.labels
        while a < b:
            sl = slice(a, b)
            tt = None if t is None else t[sl]
            k, hit = sc.update_until_alarm(y[sl], s[sl], None if w is None else w[sl], tt,
                                           labels, ek == KIND_EVENT)
            self.n += k
            if tt is not None:
                tt = tt[:k]
                top = np.nanmax(tt) if not np.isnan(tt).all() else None
                if top is not None and (self.t is None or top > self.t):
                    self.t = float(top)
            a += k
            if hit:
                if a == b:
                    return True
                self._point(stream=True)
        return False

    def _cap_codes(self, codes, keys):
        """Codes and keys with the new segments beyond ``max_segments`` (in order of
        first appearance, as a loop of :meth:`update` would meet them) mapped to
        :data:`OTHER_SEGMENT`'s key, counted in :attr:`other_events`."""
        known = self._segments
        if all(map(known.__contains__, keys)):  # (the usual batch: no new segment)
            return codes, keys
        room = self.max_segments - len(known)
        new = [c for c, k in enumerate(keys) if k not in known]
        over = new[max(room, 0):]
        if not over:
            return codes, keys
        other = self._intake.other_key
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
    def _evaluate(self, fresh=False):
        """An evaluation of everything now: every segment's buffered events fed, a row
        per scope that counted events since its last row, then the rules. The whole
        stream's part is idempotent per ``n``."""
        self._point(stream=True, flush=True, fresh=fresh)

    def evaluate(self):
        """Evaluate now: every segment with buffered events is fed and writes its row,
        and the whole stream's row (unless already written at this ``n``), then the
        rules."""
        self._evaluate()

    def flush(self):
        """End of the stream: make sure the final state is in the timeline.

        Feeds every segment's buffered events and evaluates (a row for every segment
        that counted events since its last row, and the whole stream's unless the last
        evaluation was at the current ``n`` with every whole-stream value fresh; then the
        rules); every value of this evaluation is computed now (none held).
        Idempotent.
        """
        if self._probe_segments and self.n:
            self._check_group_by()
        if self._last_eval_n == self.n and self._overall is not None and any(
                h[2] != self._overall.n for h in self._overall.held.values()):
            self._last_eval_n = None  # the last row held values: the end is written fresh
        self._evaluate(fresh=True)

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

    def _count_missing(self, missing):
        """Add ``{field: events}`` without a value for a ``group_by`` field; the first
        time a field lacks one, say so (a RuntimeWarning)."""
        counts = self.missing_segment_fields
        for f, k in missing.items():
            if f not in counts:
                import warnings

                counts[f] = 0
                warnings.warn(f"group_by field {f!r} has no value in some events: they count "
                              "in the whole stream only (snapshot()['missing_segment_fields'] "
                              "counts them)", RuntimeWarning, stacklevel=4)
            counts[f] += k

    def segment_warnings(self):
        """One message per ``group_by`` field some events had no value for, with the
        count: ``"group_by field 'country' had no value in 1000 of 2000 events: they
        count in the whole stream only"``."""
        return [f"group_by field {f!r} had no value in {k} of {self.n} events: they count "
                "in the whole stream only" for f, k in self.missing_segment_fields.items()]

    # ---------------------------------------------------------------------- reading
    def snapshot(self):
        """The current values of every segment, and the active alerts.

        ``{"n", "t", "segments": {key: {"segment", "n", "values", "drift"}}, "alerts",
        "other_events", "max_segments", "missing_segment_fields", "warnings"}`` where ``key``
        is None for the whole stream,
        the segment value, or a tuple for several ``group_by`` fields (``"segment"``
        holds its JSON form), ``n`` the segment's events, ``values`` its metrics (None
        where NaN) and ``drift`` its drift reports; with windows by ``period`` each
        segment also has ``late`` (``{name: events refused as late}``). Values are
        computed now, not at the last evaluation (an idle segment's are cached since),
        from the events the segment's objects counted: a segment's events since its last
        row wait in its buffer until its next evaluation point (see
        :mod:`streameval.monitor`), and ``pending`` (present when not 0) counts them;
        a segment whose values are not all exact (coarsened cumulative AUC or AP past
        ``max_scores`` distinct scores, bins) has ``error_bounds`` ``{name: bound}``.
        """
        segments = {}
        late = self._late_names
        self._compact()  # (pending counts the stashed events too)
        for seg in self._all_segments():
            reports = seg.reports()
            values, bounds, _ = seg.read(reports, fresh=True, hold=False)
            entry = segments[seg.key] = {
                "segment": seg.label,
                "n": seg.n,
                "values": values,
                "drift": reports,
            }
            if seg.pending:
                entry["pending"] = seg.pending
            if late:
                entry["late"] = seg.late(late)
            if bounds:
                entry["error_bounds"] = bounds
            coverage = seg.coverage()
            if coverage is not None:  # predictions counted before their labels
                entry["coverage"] = coverage
        out = {"n": self.n, "t": self.t, "segments": segments, "alerts": self.active_alerts(),
               "other_events": self.other_events, "max_segments": self.max_segments,
               "missing_segment_fields": dict(self.missing_segment_fields),
               "warnings": list(self.warnings) + self.segment_warnings()}
        if self.n_predicted:
            out["predicted"] = self.n_predicted
        return out

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
        (``get``, ``interval``, ``to_state``). A segment's objects hold the events up to
        its last row (its later ones wait in its buffer: :meth:`snapshot`'s
        ``pending``)."""
        if segment is None:
            if self._overall is None:
                raise KeyError("this monitor has no whole-stream segment (overall=False)")
            return dict(self._overall.metrics)
        key = self._intake.segment_key(segment, reserved_ok=True)
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
        self._compact()  # (the segments' buffered events are in their states)
        params = {
            "metrics": {name: fresh(m).to_state() for name, m in self.metrics.items()},
            "drift": {name: fresh(d).to_state() for name, d in self.drift.items()},
            "rules": [r.to_config() for r in self.rules],
            "group_by": self.group_by,
            "every": self.every,
            "every_seconds": self.every_seconds,
            "pos_label": self.pos_label,
            "neg_label": self.neg_label,
            "overall": self.overall,
            "max_segments": self.max_segments,
            "overall_rules": self.overall_rules,
            "overall_drift": self.overall_drift,
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
            if seg.eval_state() is not None:  # (the evaluator's: idle rows, held values)
                segments[-1]["evaluation"] = seg.eval_state()
        data = {"n": self.n, "t": self.t, "last_eval_n": self._last_eval_n, "segments": segments,
                "other_events": self.other_events, "warnings": list(self.warnings),
                "missing_segment_fields": dict(self.missing_segment_fields),
                "probe_segments": self._probe_segments}
        self._predictions_state(data)
        return {"type": self._public_name, "version": self._state_version,
                "params": params, "data": data}

    def _predictions_state(self, data):
        """Add the predictions' counters to a state's ``data`` (only when some came)."""
        if self.n_predicted or self._last_eval_predicted:
            data["predictions"] = {"n": self.n_predicted, "t": self.t_predicted,
                                   "last_eval": self._last_eval_predicted}

    def _restore_predictions(self, data):
        p = data.get("predictions")
        if p is None:
            return
        ok = (isinstance(p, dict) and type(p.get("n")) is int and p["n"] >= 0
              and type(p.get("last_eval")) is int and p["last_eval"] >= 0
              and (p.get("t") is None or (type(p["t"]) in (int, float)
                                          and math.isfinite(p["t"]))))
        if not ok:
            raise ValueError(f"bad Monitor state: data.predictions = {p!r:.80}")
        self.n_predicted = p["n"]
        self.t_predicted = None if p["t"] is None else float(p["t"])
        self._last_eval_predicted = p["last_eval"]

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
            # (states from before overall_rules: the whole stream evaluated the rules)
            overall_rules=p.get("overall_rules", True),
            # (states from before overall_drift: the whole stream ran the drift tests)
            overall_drift=p.get("overall_drift", True),
        )
        mon.n = d["n"]
        mon.other_events = d.get("other_events", 0)
        mon.warnings = list(d.get("warnings", ()))
        mon.missing_segment_fields = dict(d.get("missing_segment_fields", {}))
        mon._probe_segments = d.get("probe_segments", mon._fields is not None
                                    and mon.n < GROUP_BY_PROBE)
        mon.t = d["t"]
        mon._last_eval_n = d["last_eval_n"]
        mon._restore_predictions(d)
        mon._restore_scopes(d["segments"], lambda key, name, ms: from_state(ms), from_state)
        return mon

    def _restore_scopes(self, entries, metric_of, drift_of):
        """Install the scopes of a state's ``data.segments`` ``entries`` (the one path of
        :meth:`from_state` and :meth:`from_array_state`): each entry's
        :class:`~streameval.monitor.scopes.Scope`, its metrics from
        ``metric_of(key, name, state)`` and drift tests from ``drift_of(state)``, its
        count and evaluation state (buffered events included); then, once, the
        segments' bookkeeping from the installed scopes: their order of first
        appearance and the events each has buffered towards its next evaluation point
        (a state is taken with the stash moved to the buffers, :meth:`_compact`)."""
        self._segments = {}
        self._overall = None
        self._index_segments()
        for s in entries:
            key = (None if s["overall"]
                   else self._intake.segment_key(s["segment"], reserved_ok=True))
            seg = Scope(
                key, None if key is None else (list(key) if isinstance(key, tuple) else key),
                {name: metric_of(key, name, ms) for name, ms in s["metrics"].items()},
                {name: drift_of(ds) for name, ds in s["drift"].items()},
                [Rule.from_state(rs) for rs in s["rules"]],
            )
            seg.n = s["n"]
            seg.set_eval_state(s.get("evaluation"))
            if key is None:
                self._overall = seg
            else:
                self._segments[key] = seg
        counts = self._counts()
        counts[:len(self._by_seq)] = [sc.pending for sc in self._by_seq]

    # ------------------------------------------------------------------ binary state
    def to_array_state(self):
        """The whole state for a binary checkpoint (:mod:`streameval.io.statefile`):
        :meth:`to_state`'s shape, with each metric's binary state
        (:func:`~streameval.metrics.arraystate.array_state`: score orders as they are
        laid out, windows' batches as their numpy columns, zero-copy) and a shared view
        saved as its cache only (its owner holds the order; its template is the
        monitor's, in ``params``). Nothing is
        merged or changed: a monitor saved and restored computes the same bits as one
        never saved. Marked ``"arrays": 1``; :meth:`from_array_state` reads it.

        Each scope's state is a subtree ``{"$b": {...}}``
        (:data:`~streameval.metrics.arraystate.SUBTREE`) whose metrics, drift tests and
        rules are subtrees of their own, and a scope whose event count, evaluation state,
        rules', detectors' and score orders' states are unchanged since the last call
        gives the very same subtree object (the monitor keeps the last capture): a
        checkpoint writer then references what it wrote for it, so that an incremental
        checkpoint costs the scopes that changed. A scope whose only change is its
        buffer of events waiting for its next evaluation (or its label coverage) gives
        a new subtree holding the same subtrees of metrics, drift tests and rules: the
        writer then writes the buffer's columns and a few hundred bytes of JSON, and
        references the rest. The sequential detectors of every scope captured anew
        share one pair of typed columns (two arrays per capture, whatever the number of
        segments); a pair that fewer than :data:`DRIFT_GROUP_LIVE` of its scopes still
        reference has those scopes' detectors captured again into the new pair. Likewise
        the count windows' new runs of batches of every scope captured anew are packed
        into one group of shared columns (:class:`~streameval.windows.count.RunPacker`),
        held once in ``data.window_groups`` by group number (the groups some run references),
        each run naming its group and its part; a scope holding runs of a group that the
        last capture found mostly dead (:data:`~streameval.windows.count.RUN_GROUP_LIVE`)
        is captured again by a capture that changes something, its runs joining the new
        group. :meth:`from_array_state` reads every form.

        Runtime complexity: `O(number of scopes)` for a cheap token of each, plus, for
        the scopes that changed, `O(their objects)`, the JSON of the small ones (the
        detectors, rules, confusion counts) and a copy of what changes in place (AP's
        running negative weights with fractional weights, flat orders). Memory: the
        last capture is kept (views of the live arrays, plus those copies).
        """
        from streameval._gc import gc_paused

        with gc_paused():
            return self._to_array_state()

    def _to_array_state(self):
        from streameval.windows.count import RunPacker, packing_together

        # the count windows' new runs of every scope captured now are packed together
        # (see RunPacker); a group of them few of whose events are still referenced
        # (as the last capture found) has its runs packed again with the new ones
        packer = RunPacker(self.__dict__.get("_stale_runs") or frozenset(),
                           self.__dict__.get("_run_serial", 0))
        with packing_together(packer):
            state = self._capture_arrays(packer)
        self.__dict__["_run_serial"] = packer.serial
        # (the groups' columns, once in the monitor's own data: its windows' runs name
        # their group and their part of it)
        table, self.__dict__["_stale_runs"] = RunPacker.groups(
            c[5] for c in self.__dict__["_captured"].values())
        if table:
            state["data"]["window_groups"] = table
        return state

    def _capture_arrays(self, packer):
        from streameval.metrics.arraystate import SUBTREE, array_state

        self._compact()  # (the segments' buffered events are in their states)

        def metric_state(m):
            if isinstance(m, SharedView):  # (its own class's hook: others are the owner's)
                hook = getattr(type(m), "to_array_state", None)
                if hook is not None:  # (the template is the monitor's own: params.metrics)
                    return dict(hook(m), template=None)
                return {"template": None, "view": None}
            return array_state(m)

        params = {
            "metrics": {name: fresh(m).to_state() for name, m in self.metrics.items()},
            "drift": {name: fresh(d).to_state() for name, d in self.drift.items()},
            "rules": [r.to_config() for r in self.rules],
            "group_by": self.group_by, "every": self.every,
            "every_seconds": self.every_seconds, "pos_label": self.pos_label,
            "neg_label": self.neg_label, "overall": self.overall,
            "max_segments": self.max_segments, "overall_rules": self.overall_rules,
            "overall_drift": self.overall_drift,
        }
        segments = []
        # a scope unchanged since the last capture gives the same subtree object, which a
        # checkpoint writer references instead of writing it again (see _scope_token)
        last = self.__dict__.get("_captured") or {}
        captured = {}
        stamps = self.__dict__.get("_evaluations") or {}
        tokens = [(seg, *_scope_token(seg, stamps.get(seg.key, 0)))
                  for seg in self._all_segments()]
        # the detector columns a reused drift subtree holds: a group (columns shared by
        # the scopes captured together) few of whose scopes still reuse it is captured
        # again with the scopes that changed (see _stale_drift_groups)
        stale = _stale_drift_groups(
            [last.get(seg.key) for seg, objects, _ in tokens
             if last.get(seg.key) is not None and last[seg.key][0] == objects])
        recapture = []  # (drift tests, the subtree to fill): captured together below
        # (groups of windows' runs found stale by the last capture are packed again by
        # a capture that changes something: one of a monitor that did not change gives
        # the same state again)
        stale_runs = packer.stale
        if stale_runs and all(last.get(seg.key) is not None and last[seg.key][0] == objects
                              and last[seg.key][1] == buffered
                              for seg, objects, buffered in tokens):
            stale_runs = packer.stale = frozenset()

        def metrics_state(seg):
            packer.begin()
            sub = {SUBTREE: {name: metric_state(m) for name, m in seg.metrics.items()}}
            return sub, packer.end()

        for seg, objects, buffered in tokens:
            hit = last.get(seg.key)
            group = None
            # (its windows hold runs of a group of shared columns to pack again)
            runs_stale = hit is not None and stale_runs and any(
                p[6] is not None and p[6][5] in stale_runs for p in hit[5])
            if hit is not None and hit[0] == objects and hit[1] == buffered \
                    and hit[4] not in stale and not runs_stale:
                entry, parts, group, refs = hit[2], hit[3], hit[4], hit[5]
            else:
                if hit is not None and hit[0] == objects:
                    parts = hit[3]  # (only the buffer and label coverage changed)
                    group, refs = hit[4], hit[5]
                    if runs_stale:  # (its windows' runs joined with the new)
                        sub, refs = metrics_state(seg)
                        parts = (sub, parts[1], parts[2])
                    if group in stale:  # (its detectors' columns joined with the new)
                        parts = (parts[0], {SUBTREE: None}, parts[2])
                        recapture.append((seg.drift, parts[1]))
                        group = _NEW_GROUP
                else:
                    sub, refs = metrics_state(seg)
                    parts = (sub, {SUBTREE: None},
                             {SUBTREE: [r.to_state() for r in seg.rules]})
                    recapture.append((seg.drift, parts[1]))
                    group = _NEW_GROUP
                entry = {"overall": seg.key is None, "segment": seg.label, "n": seg.n,
                         "metrics": parts[0], "drift": parts[1], "rules": parts[2]}
                ev = seg.eval_state(arrays=True)  # (the evaluator's: idle rows, held values)
                if ev is not None:
                    entry["evaluation"] = ev
                entry = {SUBTREE: entry}
            captured[seg.key] = [objects, buffered, entry, parts, group, refs]
            segments.append(entry)
        packer.finish()  # (the new runs' columns, into the states given above)
        if recapture:
            states, new_group = _drift_states_many([d for d, _ in recapture])
            for (_, sub), st in zip(recapture, states):
                sub[SUBTREE] = st
            for c in captured.values():
                if c[4] is _NEW_GROUP:
                    c[4] = new_group
        self.__dict__["_captured"] = captured
        data = {"n": self.n, "t": self.t, "last_eval_n": self._last_eval_n,
                "segments": segments, "other_events": self.other_events,
                "missing_segment_fields": dict(self.missing_segment_fields),
                "warnings": list(self.warnings), "probe_segments": self._probe_segments}
        self._predictions_state(data)
        return {"type": self._public_name, "version": self._state_version,
                "params": params, "data": data, "arrays": 1}

    @classmethod
    def from_array_state(cls, state):
        """Rebuild a monitor from :meth:`to_array_state` or :meth:`to_state`, every part
        type-checked: anything malformed (a count that is not an int, a missing or extra
        key, arrays of the wrong type or length, nesting the state never has) raises
        ``ValueError`` naming where, never another exception."""
        if not isinstance(state, dict) or state.get("type") != cls._public_name:
            raise ValueError(f"not a Monitor state: {state!r:.200}")
        from streameval._gc import gc_paused

        state = _inline_subtrees(state)
        _check_monitor_state(state)
        try:
            with gc_paused():
                return cls._from_array_state(state)
        except ValueError:
            raise
        except (TypeError, KeyError, AttributeError, IndexError, OverflowError,
                RecursionError) as e:
            raise ValueError(f"bad Monitor state: {type(e).__name__}: {e!s:.200}") from None

    @classmethod
    def _from_array_state(cls, state):
        from streameval.metrics.arraystate import from_array_state
        from streameval.windows.count import check_groups, restoring_runs

        if not state.get("arrays"):
            return cls._from_state(state)
        views = []

        def metric_of(where, name, s):
            if isinstance(s, dict) and set(s) == {"template", "view"}:
                views.append((where, name, s["view"]))
                template = s["template"]
                if template is None:
                    if name not in p["metrics"]:
                        raise ValueError(f"bad Monitor state: a view {name!r} of no metric "
                                         "of the monitor")
                    template = p["metrics"][name]
                return from_state(template)
            return from_array_state(s)

        p, d = state["params"], state["data"]
        plain = {"type": state["type"], "version": state["version"], "params": p,
                 "data": dict(d, segments=[])}
        mon = cls._from_state(plain)
        # (the columns the count windows' runs share, by group number)
        groups = check_groups(d.get("window_groups", {}))
        if groups:
            mon.__dict__["_run_serial"] = max(groups) + 1
        with restoring_runs(groups):
            mon._restore_scopes(d["segments"], metric_of, from_array_state)
        for key, name, view in views:
            seg = mon._overall if key is None else mon._segments[key]
            m = seg.metrics.get(name)
            if not isinstance(m, SharedView):
                raise ValueError(f"bad Monitor state: metric {name!r} was saved as a view of "
                                 "another metric's state, which this monitor does not share")
            restore = getattr(type(m), "restore_view_cache", None)
            if view is not None and restore is not None:
                restore(m, view)
        return mon


def _changes_of(stops):
    """The changes detected so far by the detectors of a scope's ``stops``
    (:meth:`Scope.update_until_alarm`), 0 without."""
    return 0 if stops is None else sum(len(d.changes) for d in stops[1])


#: a scope whose detectors' columns are made in the capture under way
_NEW_GROUP = object()


def _drift_states_many(drifts):
    """The drift tests' states of several scopes (a list of ``{name: test}``) for a binary
    checkpoint, and the group they form: those whose class offers ``columns_states``
    (sequential detectors) as typed columns that all of them share, one float64 and one
    int64 array per class for every scope captured together (a checkpoint writer
    stores each pair once, as raw bytes rather than JSON text, whatever the number of
    segments), the others' ``to_state()``. The group is ``(id, scopes)``: the
    columns' identity and how many scopes hold them (:func:`_stale_drift_groups`).

    Runtime complexity: `O(detectors + their candidates)`, a few numpy calls per
    detector and one concatenation per class."""
    outs, grouped = [], {}
    for drift in drifts:
        out = {}
        for name, d in drift.items():
            hook = getattr(type(d), "columns_states", None)
            if hook is None:
                out[name] = d.to_state()
            else:
                grouped.setdefault(type(d), []).append((out, name, d))
                out[name] = None  # (keeps the order of the names)
        outs.append(out)
    for kind, items in grouped.items():
        for (out, name, _), st in zip(items, kind.columns_states([d for _, _, d in items])):
            out[name] = st
    return outs, (object(), len(drifts))


#: a detector column group is captured again when fewer than this share of the scopes
#: captured with it still reuse it (see :func:`_stale_drift_groups`): the columns kept
#: (in memory by the last capture, on disk by a checkpoint) stay within about the inverse
#: of it times the live ones. A higher share keeps fewer idle columns but captures idle
#: segments again more often.
DRIFT_GROUP_LIVE = 0.25


def _stale_drift_groups(reused):
    """The detector column groups (see :func:`_drift_states_many`) that fewer than
    :data:`DRIFT_GROUP_LIVE` of the scopes captured with them still reuse: ``reused``
    lists the last capture's entries of the scopes whose detectors did not change. Those
    scopes' columns are captured again, joined with the new ones: a checkpoint writer
    keeps a group's columns while one scope references them."""
    live = {}
    for c in reused:
        g = c[4]
        if g is not None:
            live[g] = live.get(g, 0) + 1
    return {g for g, n in live.items() if n < DRIFT_GROUP_LIVE * g[1]}


def _inline_subtrees(state):
    """The state with each scope given as a subtree (``{"$b": {...}}``, what
    :meth:`Monitor.to_array_state` gives before a checkpoint writer stores it apart)
    replaced by its content; anything else as it is."""
    from streameval.metrics.arraystate import SUBTREE

    d = state.get("data")
    segs = d.get("segments") if isinstance(d, dict) else None
    if not isinstance(segs, list) or not any(
            isinstance(x, dict) and SUBTREE in x for x in segs):
        return state

    def part(x):
        return x[SUBTREE] if isinstance(x, dict) and set(x) == {SUBTREE} else x

    inner = []
    for x in segs:
        x = part(x)
        if isinstance(x, dict) and any(part(x.get(k)) is not x.get(k)
                                       for k in ("metrics", "drift", "rules")):
            x = dict(x, **{k: part(x[k]) for k in ("metrics", "drift", "rules") if k in x})
        inner.append(x)
    return dict(state, data=dict(d, segments=inner))


def _scope_token(seg, evaluations):
    """What decides whether a scope's binary state changed since the last capture, in
    two parts. ``objects``, what its metrics, detectors and rules depend on: its event
    count and the predictions it fed (what changes its detectors and most metrics), its
    evaluation state (count at its last row, held values), ``evaluations``, how many
    times the monitor gave it to its evaluator (what changes its rules, with or without
    events), and each metric's
    ``state_token()`` where it has one (what a read changes: a score order's layout and
    cached values). ``buffered``: the events waiting in its buffer (only added to until
    all are fed, so their count tells them) and its label coverage counters."""
    tokens = []
    for m in seg.metrics.values():
        hook = getattr(m, "state_token", None)
        tokens.append(hook() if hook is not None else None)
    objects = (seg.n, seg.fed()[1], seg.eval_n,
               tuple((k, tuple(v)) for k, v in seg.held.items()), seg.eval_predicted,
               evaluations, tuple(tokens))
    # (the buffer and the label coverage: only added to until the buffer is fed, so
    # their counts tell them; they change no metric, detector or rule)
    buffered = (seg.pending, seg.n_predictions, seg.n_predicted, seg.n_expired,
                seg.n_replaced)
    return objects, buffered


def _check_monitor_state(state):
    """Type-check the Monitor's own part of a state (``ValueError`` naming the field):
    what :meth:`Monitor._from_state` reads as numbers, lists and objects."""
    def need(ok, where, value, what):
        if not ok:
            raise ValueError(f"bad Monitor state: {where} = {value!r:.60} is not {what}")

    p, d = state.get("params"), state.get("data")
    need(isinstance(p, dict), "params", p, "an object")
    need(isinstance(d, dict), "data", d, "an object")
    for k in ("metrics", "drift"):
        need(isinstance(p.get(k), dict), f"params.{k}", p.get(k), "an object")
    need(isinstance(p.get("rules"), list), "params.rules", p.get("rules"), "a list")
    v = d.get("n")
    need(type(v) is int and v >= 0, "data.n", v, "an int >= 0")
    v = d.get("last_eval_n")
    need(v is None or (type(v) is int and v >= 0), "data.last_eval_n", v,
         "an int >= 0 or null")
    v = d.get("other_events", 0)
    need(type(v) is int and v >= 0, "data.other_events", v, "an int >= 0")
    t = d.get("t")
    need(t is None or (type(t) in (int, float) and math.isfinite(t)), "data.t", t,
         "a finite number or null")
    need(isinstance(d.get("warnings", []), list), "data.warnings", d.get("warnings"), "a list")
    segs = d.get("segments")
    need(isinstance(segs, list), "data.segments", segs, "a list")
    for i, s in enumerate(segs):
        where = f"data.segments[{i}]"
        need(isinstance(s, dict), where, s, "an object")
        need(type(s.get("n")) is int and s["n"] >= 0, where + ".n", s.get("n"), "an int >= 0")
        need(isinstance(s.get("overall"), bool), where + ".overall", s.get("overall"), "a bool")
        for k in ("metrics", "drift"):
            need(isinstance(s.get(k), dict), f"{where}.{k}", s.get(k), "an object")
        need(isinstance(s.get("rules"), list), where + ".rules", s.get("rules"), "a list")


register(Monitor)
