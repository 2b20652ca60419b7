"""Alert rules: threshold, drop from a baseline, drift; lifecycle pending -> firing -> resolved.

A rule is evaluated on one value at each evaluation point of a :class:`~streameval.Monitor`
(or by hand) and returns the *transition* it makes there, if any::

    {"rule": name, "state": "pending" | "firing" | "resolved", "n": ..., "t": ..., "value": ...}

(the Monitor adds ``"segment"``: the schema of ``alerts.jsonl``, DESIGN.md section 6).

Rules
-----
* :class:`Threshold` -- ``metric op value``, ``op`` one of ``<``, ``<=``, ``>``, ``>=``
  (``recall < 0.8``).
* :class:`Drop` -- the metric fell by at least ``by`` below a baseline:
  ``baseline - value >= by`` (``relative=True``: ``(baseline - value) / baseline >= by``).
  :class:`Rise` is its mirror (``value - baseline >= by``, for losses).
  The baseline is ``"first"`` (the first value the rule saw with enough samples; the
  first full window for a windowed metric with ``min_samples`` = its size), ``"best"``
  (the best value so far: drop from the peak), or a number.
* :class:`Drift` -- a drift report's p-value is below ``p_below``
  (``recall drift p < 0.01``); by default only a *drop* counts (``direction="drop"``:
  the report's ``delta`` must be negative), ``"rise"`` or ``"any"`` otherwise.
* :class:`Alarm` -- a sequential detector
  (:class:`~streameval.sequential.SequentialDrift`) has detected a change and the rate
  since its last detected change is credibly below a reference (``recall alarm``):
  the first stretch's level by default, a fixed value or a declared period
  (``baseline``); firing until the rate is back at the reference, so a return from an
  improvement does not page. Its false-alarm guarantee is the detector's, over the
  whole stream; :func:`false_alarm_bound` adds the detectors' budgets up over the
  segments of a Monitor. An alarm on precision explains a change by the traffic
  (prevalence) or by the model (recall, FPR) when the Monitor gives it the scope's
  counts.

Confidence
----------
:class:`Threshold`, :class:`Drop` and :class:`Rise` take ``confidence`` (a level in
(0, 1)); they then read the metric's confidence interval at that level (Wilson for
proportions, DeLong for AUC: ``interval(level)``) and fire only when the interval
clears the threshold: ``recall@10000 < 0.8`` with ``confidence = 0.99`` fires when the
interval's upper end is below 0.8 (``>``: its lower end above). A drop fires when the
interval of the difference ``baseline - value`` lies beyond ``by``; the two values come
from independent windows, so its lower end is ``baseline - value - sqrt(d_b^2 +
d_v^2)`` with ``d_b = baseline - its low end`` and ``d_v = value's high end - value``
(Newcombe's construction from the two intervals; overlapping windows are positively
correlated, which only makes this conservative). Use it with ``baseline = "first"``
and ``min_samples`` = the window's size, so that the baseline is a full window (the
best of many windows, ``"best"``, is biased upwards). Each evaluation is still one test:
the level holds per evaluation, not over the stream (that is what :class:`Alarm` is for).

Lifecycle
---------
The condition is checked at each evaluation point. Each rule instance is ``inactive``,
``pending`` or ``firing``:

* inactive, condition true: ``firing`` at once when ``for_`` is 1 (the default) and
  ``for_seconds`` is unset or 0; otherwise ``pending``.
* pending, condition true: ``firing`` once it has held on ``for_`` consecutive
  evaluations, or for ``for_seconds`` of event time since it first held.
* pending or firing, condition false: ``resolved`` (back to inactive). A pending alert
  that never fired is resolved too, so that every ``pending`` has an end.
* **No data**: a NaN value (or ``None``), or fewer than ``min_samples`` events, is not
  evaluated at all: the state stays as it is, the ``for_`` streak neither grows nor
  breaks, nothing is emitted. NaN is never a reason to fire, nor to resolve.
* **Cooldown**: after a *firing* alert resolves, the rule starts no new alert until
  ``cooldown`` more events have been counted (``n``) or ``cooldown_seconds`` of event
  time have passed.
* **Hysteresis**: a firing alert resolves when its condition has *cleared*: for a
  threshold rule with ``resolve``, when the value is back on the good side of that
  level (``recall < 0.8`` with ``resolve = 0.85``: at 0.85 or above); for a rule with
  ``confidence``, when the value itself (not its interval) is back on the good side of
  ``resolve`` (default: the threshold) or, for a drop, when the drop itself is below
  ``by``; otherwise when the condition is false. With ``keep_firing_for`` (evaluations)
  or ``keep_firing_for_seconds`` (event time) it stays firing that long after the
  condition cleared, as Prometheus's ``keep_firing_for`` does, and resolves only if it
  stayed clear throughout. A pending alert is never held.

Explanation
-----------
:meth:`Rule.explain` gives the new fields a transition's record carries in a Monitor's
output: the rule as written (``expr``), what the value covers (``window``) and rests
on (``events``), its interval, the threshold or baseline and the change, a detector's
change start (in stream events, the segment's events and event time) and rates before
and after, and one sentence (``message``). Every field is listed in the alerts guide.

Each transition is returned exactly once, at the evaluation where it happens; at most
one transition per evaluation.

String rules
------------
:func:`parse_rule` reads a rule from a strict little grammar (no ``eval``)::

    <metric> <op> <number>                 recall@10000 < 0.8
    <metric> drops by <number>[%]          roc_auc drops by 0.05     (5% -> relative)
    <metric> rises by <number>[%]          log_loss rises by 0.1
    <metric> drift p < <number>            recall drift p < 0.01
    <detector> alarm                       recall alarm
    <detector> alarm on rise               error_rate alarm on rise

and ``... with confidence <number>`` after a threshold, drop or rise rule
(``recall@10000 < 0.8 with confidence 0.99``), where ``<metric>`` is a metric name (letters, digits, ``_ . @ : -``, starting with a
letter or ``_``) and ``<op>`` one of ``< <= > >=``.

>>> r = Threshold("recall", "<", 0.8, for_=2)
>>> r.evaluate(0.9, n=1000) is None
True
>>> r.evaluate(0.7, n=2000)
{'rule': 'recall < 0.8', 'state': 'pending', 'n': 2000, 't': None, 'value': 0.7}
>>> r.evaluate(0.6, n=3000)
{'rule': 'recall < 0.8', 'state': 'firing', 'n': 3000, 't': None, 'value': 0.6}
>>> r.evaluate(float("nan"), n=4000) is None     # no data: still firing
True
>>> r.evaluate(0.85, n=5000)
{'rule': 'recall < 0.8', 'state': 'resolved', 'n': 5000, 't': None, 'value': 0.85}

Imports: the standard library only (rules read plain values; the Monitor feeds them).
"""

from __future__ import annotations

import math
import numbers
import operator
import re

__all__ = [
    "Rule",
    "Threshold",
    "Drop",
    "Rise",
    "Drift",
    "Alarm",
    "parse_rule",
    "rule_from_config",
    "false_alarm_bound",
    "REFERENCE_ALPHA",
    "SHORTFALLS",
    "INACTIVE",
    "PENDING",
    "FIRING",
    "RESOLVED",
    "NAME_PATTERN",
]

INACTIVE = "inactive"
PENDING = "pending"
FIRING = "firing"
RESOLVED = "resolved"

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}

#: what a metric, drift test or rule name may be (the Monitor checks its names with it)
NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_.@:\-]*"
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_CONF = rf"(?:\s+with\s+confidence\s+({_NUM}))?"
_RE_THRESHOLD = re.compile(rf"^\s*({NAME_PATTERN})\s*(<=|>=|<|>)\s*({_NUM}){_CONF}\s*$")
_RE_CHANGE = re.compile(
    rf"^\s*({NAME_PATTERN})\s+(drops|rises)\s+by\s+({_NUM})\s*(%?){_CONF}\s*$")
_RE_DRIFT = re.compile(rf"^\s*({NAME_PATTERN})\s+drift\s+p\s*<\s*({_NUM})\s*$")
_RE_ALARM = re.compile(rf"^\s*({NAME_PATTERN})\s+alarm(?:\s+on\s+(drop|rise))?\s*$")


# ----------------------------------------------------------------------- validation


def _where(rule_name):
    return f"rule {rule_name!r}" if rule_name else "rule"


def _number(value, key, rule_name, *, low=None, low_open=False, high=None, integer=False):
    """Check a numeric rule parameter; ValueError naming the key and the rule."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        value = int(value) if integer and float(value).is_integer() else value
        if integer and not isinstance(value, numbers.Integral):
            ok = False
        elif not math.isfinite(value):
            ok = False
        elif low is not None and (value <= low if low_open else value < low):
            ok = False
        elif high is not None and value > high:
            ok = False
    if not ok:
        kind = "an integer" if integer else "a finite number"
        bound = ""
        if low is not None:
            bound = f" {'>' if low_open else '>='} {low}"
        if high is not None:
            bound += f"{' and' if bound else ''} <= {high}"
        raise ValueError(f"{_where(rule_name)}: {key} = {value!r}: must be {kind}{bound}")
    return int(value) if integer else float(value)


def _either(count, seconds, rule_name):
    """A duration given in event time (``seconds``: ``(key, value)``), checked, or None,
    refused when its counterpart in evaluations or events (``count``: ``(key, value
    given, whether it is set, unit)``) is set too."""
    key, value = seconds
    if value is None:
        return None
    value = _number(value, key, rule_name, low=0)
    ckey, cvalue, cset, unit = count
    if cset:
        raise ValueError(f"{_where(rule_name)}: give either {ckey} = {cvalue!r} ({unit}) "
                         f"or {key} = {seconds[1]!r}, not both")
    return value


def _metric_name(metric, key="metric", rule_name=None):
    if not isinstance(metric, str) or not re.fullmatch(NAME_PATTERN, metric):
        raise ValueError(
            f"{_where(rule_name)}: {key} = {metric!r}: must be a metric name "
            "(letters, digits, _ . @ : -, starting with a letter or _)"
        )
    return metric


def _confidence(value, rule_name):
    """A confidence level in (0, 1), or None."""
    if value is None:
        return None
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value < 1
    if not ok:
        raise ValueError(f"{_where(rule_name)}: confidence = {value!r}: must be a number in (0, 1)")
    return float(value)


def _interval_input(rule, value):
    """(value, low, high) from what a confidence rule is given: a mapping with
    ``"value"``, ``"low"``, ``"high"``, or a 3-tuple; NaN anywhere is no data."""
    if value is None:
        return math.nan, math.nan, math.nan
    if isinstance(value, dict):
        v, lo, hi = value.get("value"), value.get("low"), value.get("high")
    elif isinstance(value, (tuple, list)) and len(value) == 3:
        v, lo, hi = value
    else:
        raise ValueError(
            f"{_where(rule.name)}: a rule with confidence = {rule.confidence!r} reads a "
            f"value and its interval ({{'value', 'low', 'high'}}), got {value!r:.80}"
        )
    v, lo, hi = (math.nan if x is None else float(x) for x in (v, lo, hi))
    if lo != lo or hi != hi:
        return math.nan, lo, hi
    return v, lo, hi


def _with(confidence):
    return "" if confidence is None else f" with confidence {_fmt(confidence)}"


def _fmt(x):
    """A number as the rule grammar writes it (0.8, 5000, 1e-05)."""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


# ------------------------------------------------------------------- explanations


def _finite(x):
    """``x`` as a float, or None where it is missing, NaN or infinite (JSON: null)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _show(x):
    """A value in a sentence: 3 significant digits (0.891, 0.0512), or "undefined"."""
    x = _finite(x)
    if x is None:
        return "undefined"
    if abs(x) < 1e-12:  # (float residue of an end at 0, as Wilson's for 0 successes)
        return "0"
    return f"{x:.3g}" if abs(x) < 1e4 else _count(x)


def _count(n):
    """An event count in a sentence, thousands grouped by spaces (24 050)."""
    return f"{int(round(n)):,}".replace(",", " ")


def _when(t):
    """An event time (epoch seconds) in a sentence: ``2024-03-04 10:12 UTC``."""
    from datetime import datetime, timezone

    t = _finite(t)
    if t is None:
        return None
    try:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return None


def _scope(segment):
    """Where an alert is, in a sentence: "segment br", "the whole stream"."""
    if segment is None:
        return "the whole stream"
    if isinstance(segment, (list, tuple)):
        return "segment " + "|".join("" if v is None else str(v) for v in segment)
    return f"segment {segment}"


def _pct(level):
    level = _finite(level)
    return "" if level is None else f"{level * 100:.4g}%"


#: what one indicator observation of a sequential detector is, per metric it watches
_OBSERVATIONS = {"recall": "positives", "precision": "predicted positives",
                 "accuracy": "events", "error_rate": "events", "fpr": "negatives",
                 "specificity": "negatives", "roc_auc": "positive-negative pairs"}

_WORDS = {"<": "below", "<=": "at or below", ">": "above", ">=": "at or above"}
_BACK = {"<": "at or above", "<=": "above", ">": "at or below", ">=": "below"}


# ---------------------------------------------------------------------------- rules


class Rule:
    """Base of alert rules: the lifecycle, ``for``, ``min_samples``, cooldown, state.

    Subclasses define :meth:`_condition` (is the alert condition true for this value?),
    :meth:`_default_name` and :meth:`_spec` (their own parameters).

    Runtime complexity of :meth:`evaluate`: `O(1)`.

    Parameters
    ----------
    metric : str
        Name of the metric (or, for :class:`Drift`, the drift report) the rule reads.
    for_ : int
        Consecutive evaluations the condition must hold before firing (``for`` in
        TOML); 1 fires at the first.
    for_seconds : float, optional
        Or: event time (seconds) the condition must hold, from its first true
        evaluation, before firing. Needs ``t`` at evaluation.
    min_samples : int
        Evaluations with fewer events (``samples``) are "no data".
    cooldown : int
        After a firing alert resolves, events (``n``) to count before a new alert.
    cooldown_seconds : float, optional
        Or: event time (seconds) to wait after a resolution. Needs ``t``.
    name : str, optional
        The rule's name in transitions (default: the rule in the string grammar,
        e.g. ``"recall < 0.8"``).
    severity : str
        How urgent a firing alert is (``"warning"`` by default; ``"critical"``,
        ``"page"``, ... as the team's routing says): the ``severity`` label of the
        alerts sent to Alertmanager.
    labels, annotations : dict of str to str, optional
        More Alertmanager labels (routing: ``team = "fraud"``) and annotations
        (``runbook_url``, ``summary``, ``description``, overriding the defaults).
        They do not change the rule's transitions or its name.
    keep_firing_for : int
        Evaluations a firing alert stays firing after its condition cleared (0: it
        resolves at the first); the condition must stay clear throughout.
    keep_firing_for_seconds : float, optional
        Or: event time (seconds) it stays firing after the condition cleared. Needs
        ``t``.
    """

    kind = "rule"

    def __init__(self, metric, *, for_=1, for_seconds=None, min_samples=0, cooldown=0,
                 cooldown_seconds=None, name=None, severity="warning", labels=None,
                 annotations=None, keep_firing_for=0, keep_firing_for_seconds=None):
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"rule name = {name!r}: must be a non-empty string")
        label = name
        if not isinstance(severity, str) or not severity:
            raise ValueError(f"{_where(label)}: severity = {severity!r}: must be a non-empty "
                             "string")
        self.severity = severity
        self.labels = _str_table(labels, "labels", label)
        self.annotations = _str_table(annotations, "annotations", label)
        reserved = sorted(set(self.labels) & set(RESERVED_LABELS))
        if reserved:
            raise ValueError(f"{_where(label)}: labels.{reserved[0]} is set by streameval "
                             f"(reserved: {list(RESERVED_LABELS)}); use another name")
        self.metric = _metric_name(metric, rule_name=label)
        self.for_ = _number(for_, "for", label, low=1, integer=True)
        self.for_seconds = _either(("for", for_, self.for_ != 1, "evaluations"),
                                   ("for_seconds", for_seconds), label)
        self.min_samples = _number(min_samples, "min_samples", label, low=0, integer=True)
        self.cooldown = _number(cooldown, "cooldown", label, low=0, integer=True)
        self.cooldown_seconds = _either(("cooldown", cooldown, self.cooldown, "events"),
                                        ("cooldown_seconds", cooldown_seconds), label)
        self.keep_firing_for = _number(keep_firing_for, "keep_firing_for", label, low=0,
                                       integer=True)
        self.keep_firing_for_seconds = _either(
            ("keep_firing_for", keep_firing_for, self.keep_firing_for, "evaluations"),
            ("keep_firing_for_seconds", keep_firing_for_seconds), label)
        self._name = name
        self._reset()

    # -- identity -----------------------------------------------------------------
    @property
    def name(self):
        """The name used in transitions (given, or the rule in the string grammar)."""
        return self._name if self._name is not None else self._default_name()

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r}, state={self.state!r})"

    def _default_name(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _spec(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _condition(self, value):  # pragma: no cover - abstract
        raise NotImplementedError

    def _value(self, value):
        """The number the rule reads (and reports) from what it is given; NaN = no data."""
        if value is None:
            return math.nan
        return float(value)

    def _cleared(self, v, cond):
        """Whether a firing alert's condition has cleared at value ``v`` (``cond``: the
        firing condition there). Rules with a resolve level or an interval override it."""
        return not cond

    # -- state --------------------------------------------------------------------
    def _reset(self):
        self.state = INACTIVE
        self._streak = 0          # consecutive true evaluations (pending/firing)
        self._since_t = None      # event time of the first of them
        self._resolved_n = None   # n and t at the last resolution of a firing alert
        self._resolved_t = None
        self._last = None         # the transition that opened the current alert
        self._peers = None        # the other detectors' reports, while explaining
        self._clear_streak = 0    # firing: consecutive evaluations with the condition cleared
        self._clear_since_t = None  # event time of the first of them

    def clone(self):
        """A fresh rule with the same parameters and no state (one per segment)."""
        return type(self)(**self._kwargs())

    def _kwargs(self):
        kw = {
            "for_": self.for_, "for_seconds": self.for_seconds, "min_samples": self.min_samples,
            "cooldown": self.cooldown, "cooldown_seconds": self.cooldown_seconds,
            "name": self._name, "severity": self.severity, "labels": dict(self.labels),
            "annotations": dict(self.annotations), "keep_firing_for": self.keep_firing_for,
            "keep_firing_for_seconds": self.keep_firing_for_seconds,
        }
        kw.update(self._spec())
        return kw

    def to_config(self):
        """The rule as a TOML/JSON-ready table (only non-default keys); see :func:`rule_from_config`."""
        spec = self._config_spec()
        if self._name is not None:
            spec["name"] = self._name
        if self.for_ != 1:
            spec["for"] = self.for_
        for key, default in (("for_seconds", None), ("min_samples", 0), ("cooldown", 0),
                             ("cooldown_seconds", None), ("severity", "warning"),
                             ("labels", {}), ("annotations", {}), ("keep_firing_for", 0),
                             ("keep_firing_for_seconds", None)):
            value = getattr(self, key)
            if value != default:
                spec[key] = dict(value) if isinstance(value, dict) else value
        return spec

    def to_state(self):
        """JSON-serialisable state: the rule's config and its lifecycle."""
        return {
            "config": self.to_config(),
            "lifecycle": {
                "state": self.state,
                "streak": self._streak,
                "since_t": self._since_t,
                "resolved_n": self._resolved_n,
                "resolved_t": self._resolved_t,
                "last": self._last,
                **({"clear_streak": self._clear_streak, "clear_since_t": self._clear_since_t}
                   if self._clear_streak else {}),
                **self._extra_state(),
            },
        }

    @staticmethod
    def from_state(state):
        """Rebuild a rule (any kind) from :meth:`to_state`."""
        if not isinstance(state, dict) or "config" not in state or "lifecycle" not in state:
            raise ValueError(f"not a rule state (a dict with 'config' and 'lifecycle'): {state!r:.200}")
        rule = rule_from_config(state["config"])
        life = state["lifecycle"]
        if life.get("state") not in (INACTIVE, PENDING, FIRING):
            raise ValueError(f"rule state {life.get('state')!r}: not one of inactive, pending, firing")
        rule.state = life["state"]
        rule._streak = int(life["streak"])
        rule._since_t = life["since_t"]
        rule._resolved_n = life["resolved_n"]
        rule._resolved_t = life["resolved_t"]
        rule._last = None if life["last"] is None else dict(life["last"])
        rule._clear_streak = int(life.get("clear_streak", 0))
        rule._clear_since_t = life.get("clear_since_t")
        rule._set_extra_state(life)
        return rule

    def _extra_state(self):
        return {}

    def _set_extra_state(self, life):
        pass

    @property
    def active(self):
        """The transition that opened the current alert (pending or firing), or None;
        with its explanation's fields when :meth:`explain` was called on it (the
        Monitor does)."""
        return None if self.state == INACTIVE else dict(self._last)

    # -- explanation ----------------------------------------------------------------
    def explain(self, record, *, segment_n=None, window=None, events=None, interval=None,
                interval_level=None, report=None, peers=None):
        """What a transition rests on, as new fields of its record (the explanation).

        ``record`` is a transition this rule returned (with ``"segment"`` when the
        Monitor set it); the keywords say what the rule itself cannot know: the
        scope's own event count (``segment_n``), what the metric covers (``window``, in
        words), the labelled events its value rests on (``events``), the value's
        interval (``(low, high)`` at ``interval_level``; a rule with ``confidence``
        uses the interval it read), the drift test's full report (``report``) and the
        scope's other detectors' reports (``peers``: an alarm on precision reads them to
        tell a change of the traffic from one of the model).
        Returns a dict of new keys only (``expr``, ``kind``, ``metric``, ``window``,
        ``value_label``, ``events``, ``segment_n``, ``interval``, ``interval_level``,
        the kind's own keys, and ``message``: one sentence); the record's own keys
        keep their meaning. Call it right after :meth:`evaluate` returned ``record``:
        the kind's keys read what that evaluation saw.

        Runtime complexity: `O(1)`.

        >>> r = Threshold("recall@1000", "<", 0.8)
        >>> tr = r.evaluate(0.62, n=5000)
        >>> r.explain(dict(tr, segment="br"), window="last 1000 events", events=1000,
        ...           interval=(0.55, 0.69), interval_level=0.95)["message"]
        'recall@1000 of segment br is 0.62 (95% interval 0.55 to 0.69), below the threshold 0.8; 1 000 labelled events (last 1000 events)'
        """
        iv = None
        if interval is not None:
            lo, hi = (_finite(x) for x in interval)
            iv = None if lo is None or hi is None else [lo, hi]
        out = {
            "expr": self._default_name(),
            "kind": self.kind,
            "metric": self.metric,
            "window": window,
            "value_label": self.metric,
            "events": None if events is None else int(events),
            "segment_n": int(record.get("n") if segment_n is None else segment_n),
            "interval": iv,
            "interval_level": _finite(interval_level) if iv is not None else None,
        }
        self._peers = peers
        out.update(self._explain(record, out, report))
        out["message"] = self._message(record, out)
        last = self._last
        if last is not None and (last.get("n"), last.get("state")) == (record.get("n"),
                                                                        record.get("state")):
            last.update(out)  # the open alert (:attr:`active`) explains itself too
        return out

    def _explain(self, record, fields, report):
        """The kind's own explanation fields (may adjust ``fields``)."""
        return {}

    def _message(self, record, f):  # pragma: no cover - every kind has its own
        return f"{self.name} is {record.get('state')} in {_scope(record.get('segment'))}"

    def _tail(self, record, f):
        """The end of a sentence: the events behind the value, and a pending alert's wait."""
        parts = []
        if f.get("events") is not None:
            where = f" ({f['window']})" if f.get("window") else ""
            parts.append(f"{_count(f['events'])} labelled events{where}")
        if record.get("state") == PENDING:
            wait = (f"{_fmt(self.for_seconds)} s of event time" if self.for_seconds is not None
                    else f"{self.for_} evaluations")
            parts.append(f"pending until it holds for {wait}")
        return "".join("; " + p for p in parts)

    def _interval_text(self, f):
        iv = f.get("interval")
        if not iv:
            return ""
        return f" ({_pct(f.get('interval_level'))} interval {_show(iv[0])} to {_show(iv[1])})"

    # -- evaluation -----------------------------------------------------------------
    def _held(self, t):
        if self.for_seconds is not None:
            return t - self._since_t >= self.for_seconds
        return self._streak >= self.for_

    def _cooling(self, n, t):
        if self._resolved_n is None:
            return False
        if self.cooldown_seconds is not None:
            return t - self._resolved_t < self.cooldown_seconds
        return self.cooldown > 0 and n - self._resolved_n < self.cooldown

    def evaluate(self, value, n, t=None, samples=None):
        """Evaluate the rule at one evaluation point; return the transition or None.

        Runtime complexity: `O(1)`.

        Parameters
        ----------
        value : float or None
            The metric's value (NaN or None: no data). :class:`Drift` also takes a
            drift report, a mapping with ``"p_value"`` and ``"delta"``.
        n : int
            Events counted so far: the clock of ``cooldown``, reported in transitions.
        t : float, optional
            Event time of the evaluation; needed by ``for_seconds`` and
            ``cooldown_seconds``.
        samples : int, optional
            The sample size compared with ``min_samples`` (default ``n``).

        Returns
        -------
        dict or None
            ``{"rule", "state", "n", "t", "value"}`` when the state changes.
        """
        v = self._value(value)
        if v != v:
            return None
        if (n if samples is None else samples) < self.min_samples:
            return None
        needs_t = (self.for_seconds is not None or self.cooldown_seconds is not None
                   or self.keep_firing_for_seconds is not None)
        if needs_t and (t is None or t != t):
            raise ValueError(
                f"{_where(self.name)}: t = {t!r}: for_seconds, cooldown_seconds and "
                "keep_firing_for_seconds need the event time of each evaluation"
            )
        cond = self._condition(v)
        state = self.state
        if state == INACTIVE:
            if not cond or self._cooling(n, t):
                return None
            self._streak = 1
            self._since_t = t
            new = FIRING if self._held(t) else PENDING
        elif state == FIRING and not self._cleared(v, cond):
            self._streak += 1
            self._clear_streak = 0
            self._clear_since_t = None
            return None
        elif state == PENDING and cond:
            self._streak += 1
            if not self._held(t):
                return None
            new = FIRING
        else:
            if state == FIRING:
                # cleared: resolve unless keep_firing_for holds it a while longer
                self._clear_streak += 1
                if self._clear_streak == 1:
                    self._clear_since_t = t
                if self.keep_firing_for_seconds is not None:
                    if t - self._clear_since_t < self.keep_firing_for_seconds:
                        return None
                elif self._clear_streak <= self.keep_firing_for:
                    return None
                self._resolved_n, self._resolved_t = n, t
            self._streak = 0
            self._since_t = None
            self._clear_streak = 0
            self._clear_since_t = None
            new = RESOLVED
        record = {"rule": self.name, "state": new, "n": n, "t": t, "value": v}
        if new == RESOLVED:
            self.state = INACTIVE
            self._last = None
        else:
            self.state = new
            self._last = record
        return dict(record)


class Threshold(Rule):
    """Fires when ``value op threshold`` (``recall < 0.8``).

    Runtime complexity of :meth:`~Rule.evaluate`: `O(1)`.

    >>> r = Threshold("roc_auc@10000", "<", 0.75, min_samples=500)
    >>> r.name
    'roc_auc@10000 < 0.75'
    >>> r.evaluate(0.5, n=100) is None      # fewer than min_samples events: no data
    True
    >>> r.evaluate(0.7, n=1000)["state"]
    'firing'

    Parameters
    ----------
    metric : str
        The metric name.
    op : str
        ``"<"``, ``"<="``, ``">"`` or ``">="``.
    value : float
        The threshold.
    confidence : float, optional
        Fire when the interval at this level clears the threshold (see the module
        docstring); resolve when the value itself is back past ``resolve``.
    resolve : float, optional
        The level a firing alert's value must cross back to resolve: at or above it
        for ``<`` and ``<=`` (so at or above the threshold), at or below it for ``>``
        and ``>=``. Default: the threshold.
    **kwargs
        ``for_``, ``for_seconds``, ``min_samples``, ``cooldown``, ``cooldown_seconds``,
        ``keep_firing_for``, ``name``: see :class:`Rule`.
    """

    kind = "threshold"

    def __init__(self, metric, op, value, *, confidence=None, resolve=None, **kwargs):
        label = kwargs.get("name")
        if op not in _OPS:
            raise ValueError(f"{_where(label)}: op = {op!r}: must be one of <, <=, >, >=")
        self.op = op
        self.value = _number(value, "value", label)
        self.confidence = _confidence(confidence, label)
        self.resolve = None if resolve is None else _number(resolve, "resolve", label)
        below = op in ("<", "<=")
        if self.resolve is not None and (self.resolve < self.value if below
                                         else self.resolve > self.value):
            side = "at or above" if below else "at or below"
            raise ValueError(
                f"{_where(label)}: resolve = {resolve!r}: must be {side} the threshold "
                f"value = {self.value!r} (an alert on '{op}' resolves on the other side)")
        self._cmp = _OPS[op]
        self._bound = math.nan
        self._interval = (math.nan, math.nan)
        super().__init__(metric, **kwargs)

    def _cleared(self, v, cond):
        # a resolve level, or a rule with confidence (which fires on the interval's
        # end), resolves on the value itself crossing back: hysteresis
        if self.resolve is None and self.confidence is None:
            return not cond
        level = self.value if self.resolve is None else self.resolve
        return not self._cmp(v, level)

    def _value(self, value):
        if self.confidence is None:
            return super()._value(value)
        v, lo, hi = _interval_input(self, value)
        self._interval = (lo, hi)
        # the end of the interval nearest the threshold's side must clear it
        self._bound = hi if self.op in ("<", "<=") else lo
        return v

    def _explain(self, record, f, report):
        if self.confidence is not None:
            lo, hi = (_finite(x) for x in self._interval)
            f["interval"] = None if lo is None or hi is None else [lo, hi]
            f["interval_level"] = self.confidence if f["interval"] else None
        out = {"op": self.op, "threshold": self.value,
               "resolve": self.value if self.resolve is None else self.resolve}
        if self.keep_firing_for:
            out["keep_firing_for"] = self.keep_firing_for
        if self.keep_firing_for_seconds is not None:
            out["keep_firing_for_seconds"] = self.keep_firing_for_seconds
        return out

    def _message(self, record, f):
        head = f"{self.metric} of {_scope(record.get('segment'))} is {_show(record.get('value'))}"
        if record.get("state") == RESOLVED:
            level = f["resolve"]
            return f"{head}, back {_BACK[self.op]} {_show(level)}{self._tail(record, f)}"
        msg = f"{head}{self._interval_text(f)}, {_WORDS[self.op]} the threshold {_show(self.value)}"
        if self.confidence is not None and f.get("interval"):
            msg += (f"; the {_pct(self.confidence)} interval excludes the threshold "
                    f"{_show(self.value)}")
        return msg + self._tail(record, f)

    def _condition(self, v):
        if self.confidence is not None:
            return self._cmp(self._bound, self.value)
        return self._cmp(v, self.value)

    def _default_name(self):
        return f"{self.metric} {self.op} {_fmt(self.value)}{_with(self.confidence)}"

    def _spec(self):
        return {"metric": self.metric, "op": self.op, "value": self.value,
                "confidence": self.confidence, "resolve": self.resolve}

    def _config_spec(self):
        spec = {"metric": self.metric, "op": self.op, "value": self.value}
        if self.confidence is not None:
            spec["confidence"] = self.confidence
        if self.resolve is not None:
            spec["resolve"] = self.resolve
        return spec


class Drop(Rule):
    """Fires when the metric has dropped by at least ``by`` from a baseline.

    ``baseline - value >= by``, or with ``relative=True``
    ``(baseline - value) / |baseline| >= by``. ``baseline`` is ``"first"`` (the first
    value evaluated, i.e. with at least ``min_samples`` events), ``"best"`` (the highest
    value evaluated so far, this one included) or a fixed number.

    Runtime complexity of :meth:`~Rule.evaluate`: `O(1)`.

    >>> r = Drop("roc_auc", 0.05)
    >>> r.name
    'roc_auc drops by 0.05'
    >>> [r.evaluate(v, n=i) for i, v in enumerate([0.90, 0.88, 0.84], 1)][-1]["state"]
    'firing'

    Parameters
    ----------
    metric : str
        The metric name.
    by : float
        The drop (absolute, or a fraction of the baseline with ``relative=True``); > 0.
    baseline : str or float
        ``"first"`` (default; ``"first_window"`` is accepted as a synonym), ``"best"``,
        or a number.
    relative : bool
        Compare the drop with ``by * |baseline|``.
    **kwargs
        See :class:`Rule`.
    """

    kind = "drop"
    _sign = 1.0  # +1: value going down is bad; Rise flips it

    def __init__(self, metric, by, *, baseline="first", relative=False, confidence=None,
                 **kwargs):
        label = kwargs.get("name")
        self.confidence = _confidence(confidence, label)
        self._gaps = (math.nan, math.nan)
        # the change, and its interval's ends (rules with confidence)
        self._point = self._low = self._high = math.nan
        self.by = _number(by, self.kind, label, low=0, low_open=True)
        if baseline == "first_window":
            baseline = "first"
        if baseline not in ("first", "best"):
            if isinstance(baseline, str) or isinstance(baseline, bool) or not isinstance(
                baseline, numbers.Real
            ):
                raise ValueError(
                    f"{_where(label)}: baseline = {baseline!r}: must be \"first\", \"best\" "
                    "or a number"
                )
            baseline = _number(baseline, "baseline", label)
        if not isinstance(relative, bool):
            raise ValueError(f"{_where(label)}: relative = {relative!r}: must be true or false")
        self.baseline = baseline
        self.relative = relative
        super().__init__(metric, **kwargs)

    def _reset(self):
        super()._reset()
        self.reference = self.baseline if not isinstance(self.baseline, str) else None
        #: (value - low, high - value) of the baseline value's interval (confidence
        #: rules; a fixed baseline has none)
        self.reference_gaps = (0.0, 0.0)

    def _value(self, value):
        if self.confidence is None:
            return super()._value(value)
        v, lo, hi = _interval_input(self, value)
        self._gaps = (v - lo, hi - v)
        return v

    def _condition(self, v):
        ref = self.reference
        gaps = self._gaps if self.confidence is not None else (0.0, 0.0)
        if self.baseline == "first":
            if ref is None:
                ref = self.reference = v
                self.reference_gaps = gaps
        elif self.baseline == "best":
            if ref is None or (v - ref) * self._sign > 0:
                ref = self.reference = v
                self.reference_gaps = gaps
        change = (ref - v) * self._sign
        self._point = change / abs(ref) if self.relative and ref != 0 else change
        if self.confidence is not None:
            # the lower end of the interval of the change, from the two intervals'
            # sides that face each other (Newcombe's construction: independent
            # windows; a side clipped at 0 or 1 is the other interval's, not this one)
            below, above = (0, 1) if self._sign > 0 else (1, 0)
            high = change + math.sqrt(self.reference_gaps[above] ** 2 + gaps[below] ** 2)
            self._high = high / abs(ref) if self.relative and ref != 0 else high
            change -= math.sqrt(self.reference_gaps[below] ** 2 + gaps[above] ** 2)
        self._low = change / abs(ref) if self.relative and ref != 0 else change
        if self.relative:
            return ref != 0 and change / abs(ref) >= self.by
        return change >= self.by

    def _explain(self, record, f, report):
        if self.confidence is not None:
            gl, gh = self._gaps
            v = _finite(record.get("value"))
            ok = v is not None and _finite(gl) is not None and _finite(gh) is not None
            f["interval"] = [v - gl, v + gh] if ok else None
            f["interval_level"] = self.confidence if ok else None
        f["value_label"] = f"{self.metric} (current value)"
        base = self.baseline
        out = {"baseline": _finite(self.reference),
               "baseline_rule": base if isinstance(base, str) else "fixed",
               "change": _finite(self._point), "by": self.by, "relative": self.relative}
        if self.confidence is not None:
            lo, hi = _finite(self._low), _finite(self._high)
            out["change_interval"] = None if lo is None or hi is None else [lo, hi]
        return out

    def _message(self, record, f):
        verb, noun = ("fell", "drop") if self._sign > 0 else ("rose", "rise")
        where = _scope(record.get("segment"))
        base = f["baseline"]
        named = "" if f["baseline_rule"] == "fixed" else f" ({f['baseline_rule']} value)"
        amount = (f"{_show(f['change'] * 100)}%" if self.relative and f["change"] is not None
                  else _show(f["change"]))
        by = f"{_fmt(self.by * 100)}%" if self.relative else _show(self.by)
        if record.get("state") == RESOLVED:
            return (f"{self.metric} of {where} is {_show(record.get('value'))}, a {noun} of "
                    f"{amount} from the baseline {_show(base)}{named}, less than {by}"
                    + self._tail(record, f))
        msg = (f"{self.metric} of {where} {verb} from {_show(base)}{named} to "
               f"{_show(record.get('value'))}{self._interval_text(f)}: a {noun} of {amount}, "
               f"at least {by}")
        civ = f.get("change_interval") if "change_interval" in f else None
        if civ:
            civ_amount = [x * 100 for x in civ] if self.relative else civ
            unit = "%" if self.relative else ""
            msg += (f"; the {_pct(self.confidence)} interval of the {noun}, "
                    f"{_show(civ_amount[0])}{unit} to {_show(civ_amount[1])}{unit}, "
                    f"excludes {by}")
        return msg + self._tail(record, f)

    def _cleared(self, v, cond):
        # with confidence it fires on the interval of the change and resolves on the
        # change itself falling below ``by``: hysteresis of the interval's half width
        if self.confidence is None:
            return not cond
        return not self._point >= self.by

    def _default_name(self):
        by = f"{_fmt(self.by * 100)}%" if self.relative else _fmt(self.by)
        name = f"{self.metric} {self.kind}s by {by}"
        if self.baseline != "first":
            base = self.baseline if isinstance(self.baseline, str) else _fmt(self.baseline)
            name += f" from {base}"
        return name + _with(self.confidence)

    def _spec(self):
        return {"metric": self.metric, "by": self.by, "baseline": self.baseline,
                "relative": self.relative, "confidence": self.confidence}

    def _config_spec(self):
        spec = {"metric": self.metric, self.kind: self.by}
        if self.baseline != "first":
            spec["baseline"] = self.baseline
        if self.relative:
            spec["relative"] = True
        if self.confidence is not None:
            spec["confidence"] = self.confidence
        return spec

    def _extra_state(self):
        if self.confidence is None:
            return {"reference": self.reference}
        return {"reference": self.reference, "reference_gaps": list(self.reference_gaps)}

    def _set_extra_state(self, life):
        self.reference = life.get("reference")
        gaps = life.get("reference_gaps", (0.0, 0.0))
        self.reference_gaps = (float(gaps[0]), float(gaps[1]))


class Rise(Drop):
    """Fires when the metric has risen by at least ``by`` from a baseline (losses).

    ``value - baseline >= by`` (``relative=True``: divided by ``|baseline|``);
    ``baseline="best"`` is the lowest value so far. Otherwise as :class:`Drop`.

    Runtime complexity of :meth:`~Rule.evaluate`: `O(1)`.

    >>> r = Rise("log_loss", 0.1, baseline=0.3)
    >>> r.evaluate(0.35, n=1) is None, r.evaluate(0.45, n=2)["state"]
    (True, 'firing')
    """

    kind = "rise"
    _sign = -1.0


class Drift(Rule):
    """Fires when a drift test's p-value is below ``p_below`` (``recall drift p < 0.01``).

    Evaluated on a drift report (a mapping with ``"p_value"`` and ``"delta"``, current
    minus reference) or on a bare p-value (then ``direction`` must be ``"any"``). With
    ``direction="drop"`` (default) only a significant *decrease* counts (``delta < 0``),
    ``"rise"`` only an increase, ``"any"`` both. The transition's ``value`` is the
    p-value.

    Runtime complexity of :meth:`~Rule.evaluate`: `O(1)`.

    >>> r = Drift("recall", 0.01)
    >>> r.name
    'recall drift p < 0.01'
    >>> r.evaluate({"p_value": 0.001, "delta": 0.1}, n=1) is None    # an improvement
    True
    >>> r.evaluate({"p_value": 0.001, "delta": -0.1}, n=2)["state"]
    'firing'

    Parameters
    ----------
    metric : str
        The name of the drift report (e.g. ``"recall"``).
    p_below : float
        Significance level, in (0, 1].
    direction : str
        ``"drop"``, ``"rise"`` or ``"any"``.
    **kwargs
        See :class:`Rule`.
    """

    kind = "drift"

    def __init__(self, metric, p_below=0.01, *, direction="drop", **kwargs):
        label = kwargs.get("name")
        self.p_below = _number(p_below, "p_below", label, low=0, low_open=True, high=1)
        if direction not in ("drop", "rise", "any"):
            raise ValueError(
                f"{_where(label)}: direction = {direction!r}: must be \"drop\", \"rise\" or \"any\""
            )
        self.direction = direction
        super().__init__(metric, **kwargs)
        self._delta = math.nan

    def _value(self, value):
        if value is None:
            return math.nan
        if isinstance(value, dict):
            p = value.get("p_value")
            d = value.get("delta")
            self._delta = math.nan if d is None else float(d)
            return math.nan if p is None else float(p)
        if self.direction != "any":
            raise ValueError(
                f"{_where(self.name)}: a bare p-value ({value!r}) has no direction; "
                f"give a report with 'p_value' and 'delta' (direction = {self.direction!r})"
            )
        self._delta = math.nan
        return float(value)

    def _condition(self, p):
        if not p < self.p_below:
            return False
        d = self._delta
        if self.direction == "drop":
            return d < 0
        if self.direction == "rise":
            return d > 0
        return True

    def _explain(self, record, f, report):
        rep = report if isinstance(report, dict) else {}
        f["value_label"] = f"p-value of the {self.metric} drift test"
        return {"p_value": _finite(record.get("value")), "p_below": self.p_below,
                "delta": _finite(rep.get("delta", self._delta)),
                "reference": _finite(rep.get("reference")),
                "current": _finite(rep.get("current")),
                "observations_reference": _finite(rep.get("n_reference")),
                "observations_current": _finite(rep.get("n_current")),
                "observation": _OBSERVATIONS.get(rep.get("metric"))}

    def _message(self, record, f):
        where = _scope(record.get("segment"))
        moved = ""
        if f["reference"] is not None and f["current"] is not None:
            moved = f" moved from {_show(f['reference'])} to {_show(f['current'])}"
        head = f"drift test {self.metric} of {where}{moved}: p = {_show(f['p_value'])}"
        if record.get("state") == RESOLVED:
            what = "change" if self.direction == "any" else self.direction
            msg = f"{head}, no longer a significant {what} (p < {_show(self.p_below)})"
        else:
            msg = f"{head} < {_show(self.p_below)}"
        if f["observations_current"] is not None and f.get("observation"):
            window = f" ({f['window']})" if f.get("window") else ""
            msg += (f"; {_count(f['observations_current'])} {f['observation']} in the "
                    f"current window{window}")
        return msg + self._tail(record, f)

    def _default_name(self):
        name = f"{self.metric} drift p < {_fmt(self.p_below)}"
        return name if self.direction == "drop" else f"{name} ({self.direction})"

    def _spec(self):
        return {"metric": self.metric, "p_below": self.p_below, "direction": self.direction}

    def _config_spec(self):
        spec = {"drift": self.metric, "p_below": self.p_below}
        if self.direction != "drop":
            spec["direction"] = self.direction
        return spec


class Alarm(Rule):
    """Fires while a sequential detector's changes have taken the watched rate below its
    reference (``recall alarm``), or above it (``direction="rise"``:
    ``error_rate alarm on rise``).

    Evaluated on the report of a :class:`~streameval.sequential.SequentialDrift` (a
    mapping with ``"change"``: ``"drop"``, ``"rise"`` or None, ``"last_change"``, and
    the rates of the history since that change). What counts as bad is set by
    ``baseline``, the *reference* level:

    * ``"first"`` (default): the rate of the stream's first stretch, before the
      detector's first detected change: the level the model had when monitoring
      began, estimated from that whole stretch. An improvement and the return from
      it are two detected changes, but the rate after them is back at the
      reference, so nothing fires. (The level before the last change would page on
      every return from an improvement; a long-run average would let a long bad
      period lower its own reference.)
    * a number: a fixed reference (``baseline = 0.89``).
    * ``{"from": a, "to": b}``: the rate over the scope's events ``a`` to ``b``, a
      declared healthy period (read at the evaluations nearest its ends; in a
      Monitor, from the scope's cumulative confusion counts at the detector's
      threshold, so for the proportions only, not ``roc_auc``).
    * ``"previous"``: the level before the last change: firing from each detected
      change in the rule's direction until one in the other direction (the
      recovery), whatever the levels. An alarm on a detector of the score
      distribution (:class:`~streameval.metrics.scoredrift.ScoreDriftDetector`,
      whose report has ``"ks"``) works this way whatever its ``baseline``: it
      watches no rate to hold against a reference.

    With a reference, the alert fires when the detector has detected at least one
    change and the rate since its last detected change is below the reference with
    anytime-valid evidence: an e-value (a likelihood ratio mixed over the
    alternatives ``reference - d``, ``d`` in :data:`SHORTFALLS`) of at least
    ``1 / REFERENCE_ALPHA``, against the reference's lower end (a one-sided Wilson
    bound at ``1 - REFERENCE_ALPHA`` when it is estimated). It resolves when that rate
    is back at the reference (at or above that end; ``"rise"``: at or below). A drop
    detected and undone between two evaluations cannot be compared with the reference
    any more: it opens an alert that resolves at the next evaluation. A return to a
    level held before therefore pages with probability at most about
    ``REFERENCE_ALPHA`` however long it is watched, and the false-alarm guarantee on
    a stationary stream is still the detector's,
    ``P(a false alarm within horizon events) <= alpha``: nothing fires before a
    detected change.

    The rule counts the detections, it does not only look at the last one, so an
    alert opens even when a change back followed before the next evaluation
    (``"previous"``). The transition's ``value`` is the rate after the last detected
    change; before any detection there is nothing to evaluate.

    Where an alert opens: when it opens on a detection made since the previous
    evaluation, its ``n`` and ``t`` are the detection's (the event on which the
    detector crossed its level, placed in the stream by :meth:`stream_position`:
    exactly for the whole stream, within the bounds its counts allow for a segment),
    provided the condition already held there (with a reference: the stretch after
    the change, as the detector counted it at the detection, carries the evidence
    against the reference) and no cooldown ran then. Otherwise (the evidence came
    later, or a change and its reversal fell between two evaluations) they are the
    evaluation's. The evaluation that emitted the transition is in its explanation
    (``evaluated_n``, ``evaluated_t``); resolutions, cooldowns and ``for`` count
    evaluations as for every rule. In a Monitor, the whole stream is evaluated at the
    event of each detection of a detector its rules read
    (:meth:`~streameval.monitor.scopes.Scope.update_until_alarm`), so an alert that
    holds at the detection is emitted there; a segment's rules are evaluated at the
    segment's own points, so its alert carries the detection's ``n`` and is emitted
    at the segment's next evaluation (up to ``every - 1`` of its events later).

    Runtime complexity of :meth:`~Rule.evaluate`: `O(1)`.

    >>> r = Alarm("recall", baseline="previous")
    >>> r.name
    'recall alarm from previous'
    >>> r.evaluate({"change": None, "last_change": None}, n=1) is None
    True
    >>> r.evaluate({"change": "drop", "last_change": {"after": 0.71}}, n=2)["state"]
    'firing'
    >>> r.evaluate({"change": "rise", "last_change": {"after": 0.85}}, n=3)["state"]
    'resolved'

    Against a fixed reference of 0.89: 400 of 500 positives found since the change
    (0.8) is strong evidence of a shortfall; 440 of 500 (0.88) is not, and a return
    from an improvement to that level does not page:

    >>> def report(rate):   # 500 positives since the change, at the detector's last check
    ...     return {"change": "drop", "last_change": {"direction": "drop", "after": rate},
    ...             "reference": rate, "n_reference": 250, "current": rate, "n_current": 250}
    >>> Alarm("recall", baseline=0.89).evaluate(report(0.8), n=5000)["state"]
    'firing'
    >>> Alarm("recall", baseline=0.89).evaluate(report(0.88), n=5000) is None
    True

    Parameters
    ----------
    metric : str
        The name of the detector (a drift test of the Monitor).
    direction : str
        ``"drop"`` (default) or ``"rise"``.
    baseline : str, float or dict
        The reference: ``"first"`` (default), a number in [0, 1], ``{"from": a,
        "to": b}`` (scope events, ``0 <= a < b``) or ``"previous"``.
    **kwargs
        See :class:`Rule`.
    """

    kind = "alarm"

    def __init__(self, metric, *, direction="drop", baseline="first", **kwargs):
        label = kwargs.get("name")
        if direction not in ("drop", "rise"):
            raise ValueError(
                f"{_where(label)}: direction = {direction!r}: must be \"drop\" or \"rise\""
            )
        self.direction = direction
        self.baseline = _alarm_baseline(baseline, label)
        self._change = None
        self._new = 0
        super().__init__(metric, **kwargs)

    #: evaluation marks kept to place the detector's positions in the stream (the
    #: oldest half is thinned by two when the list is full: recent ones stay dense)
    MARKS = 64

    def _reset(self):
        super()._reset()
        #: detections in the rule's direction seen at earlier evaluations
        self.seen = 0
        # (scope events, stream events, event time or None) at evaluations: where the
        # scope's count stood in the stream, to place a change start in stream events
        self._marks = []
        self._report = None
        self._on_detection = self.baseline == "previous"
        #: the reference level and the effective observations behind it (None: fixed,
        #: or not known yet)
        self.reference = None if isinstance(self.baseline, (str, dict)) else self.baseline
        self.reference_n = None
        # (scope events, tp, fp, fn, tn) at evaluations, when the Monitor gives the
        # scope's confusion counts: the traffic's side of an explanation, and a
        # declared baseline period's counts
        self._counts = []
        # the counts at a declared baseline period's start
        self._period_start = None
        # the change starts seen (scope events), the newest last: the before-stretch
        # of the last change begins at the one before it
        self._starts = []
        self._since = (math.nan, 0.0)    # (rate, observations) since the last change
        self._log_e = -math.inf          # the evidence against the reference
        self._evaluated = (None, None)   # (n, t) of the evaluation under way

    def evaluate(self, value, n, t=None, samples=None):
        s = n if samples is None else samples
        if isinstance(value, dict) and value.get("counts") is not None and (
                value.get("metric") == "precision" or isinstance(self.baseline, dict)):
            # (kept where they are read: a precision alarm's traffic, a baseline period)
            self._note_counts(s, value["counts"])
        marks = self._marks
        # keep, per scope count, the first and the latest evaluation that saw it: the
        # count's last event came before the first, the next event after the latest
        if len(marks) >= 2 and marks[-1][0] == s and marks[-2][0] == s:
            marks[-1] = (s, n, t)
        elif not marks or marks[-1][:2] != (s, n):
            marks.append((s, n, t))
            if len(marks) > self.MARKS:
                half = self.MARKS // 2
                marks[:half] = marks[:half:2]
        opening = self.state == INACTIVE
        self._evaluated = (n, t)
        tr = super().evaluate(value, n, t, samples)
        if tr is not None and opening:
            at = self._crossing()
            if at is not None:
                # the alert opens where its condition first held: at the detection
                tr["n"], tr["t"] = at
                self._last.update(n=at[0], t=at[1])
        return tr

    def _crossing(self):
        """``(n, t)`` of the event where an opening alert's condition first held,
        when that is the detector's last detection and it came after the previous
        evaluation: the detection is in the rule's direction, outside a cooldown, and
        (with a reference) the stretch after the change already held the evidence
        against the reference when it was detected. None otherwise (the alert opens at
        the evaluation). The stream position is :meth:`stream_position`'s (exact for
        the whole stream)."""
        rep = self._report or {}
        last = rep.get("last_change") or {}
        index, after = last.get("index"), _finite(last.get("after"))
        if (self._new <= 0 or last.get("direction") != self.direction or index is None
                or after is None or _on_predictions(rep)):
            # (a score detector counts predictions: the stream's count of labelled
            # events does not place its detection)
            return None
        t = _finite(last.get("t"))
        n = self.stream_position(int(index), t) + 1
        if not n < self._evaluated[0]:
            return None
        if self._resolved_n is not None and self.cooldown_seconds is not None and t is None:
            return None   # (a cooldown in event time, and no time at the detection)
        if self._cooling(n, t):
            return None
        if not self._on_detection:
            nb = _finite(last.get("n_after"))
            if self.reference is None or nb is None or not nb > 0:
                return None
            since, self._since = self._since, (after, nb)
            try:
                held = self._evidence() >= _LOG_ALARM
            finally:
                self._since = since
            if not held:
                return None
        return n, t

    def stream_position(self, k, t=None):
        """The stream's count when the scope had counted ``k`` events (where the scope's
        event ``k``, 0-based, sits in the stream): an estimate from the marks of the
        evaluations around it, exact for the whole stream and at an evaluation.
        Between the last mark at or before ``k`` and the first after it, it
        interpolates by event time when ``t`` (the event time at ``k``) and the marks'
        times are known (the stream's events spread over time, even while a segment
        is idle), else by the scope's count; before the first mark, as late as the
        count allows. The result always lies where the scope's counts allow. Runtime
        complexity: `O(marks)`."""
        import bisect

        marks = self._marks
        i = bisect.bisect_right([m[0] for m in marks], k)
        if i == 0:
            # before the first evaluation that saw the scope: as late as its count
            # allows (a segment that appears mid-stream is evaluated soon after)
            return int(k) if not marks else int(max(marks[0][1] - (marks[0][0] - k), k))
        s0, n0, t0 = marks[i - 1]
        if i == len(marks):
            return int(n0 + (k - s0))
        s1, n1, t1 = marks[i]
        if t is not None and t0 is not None and t1 is not None and t1 > t0:
            frac = min(max((t - t0) / (t1 - t0), 0.0), 1.0)
        else:
            frac = (k - s0) / (s1 - s0)
        pos = n0 + frac * (n1 - n0)
        return int(round(min(max(pos, n0 + (k - s0)), n1 - (s1 - k))))

    # -- counts and the reference --------------------------------------------------
    def _note_counts(self, s, counts):
        """Keep the scope's cumulative confusion counts at scope event ``s`` (thinned as
        the marks are), and a declared baseline period's counts at its ends."""
        try:
            c = tuple(float(counts[k]) for k in ("tp", "fp", "fn", "tn"))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{_where(self.name)}: counts = {counts!r:.80}: must be a "
                             "mapping of tp, fp, fn, tn") from None
        marks = self._counts
        if marks and marks[-1][0] == s:
            marks[-1] = (s, *c)
        else:
            marks.append((s, *c))
            if len(marks) > self.MARKS:
                half = self.MARKS // 2
                marks[:half] = marks[:half:2]
        period = self.baseline if isinstance(self.baseline, dict) else None
        if period is None or self.reference is not None:
            return
        if self._period_start is None and s >= period["from"]:
            self._period_start = c if period["from"] > 0 else (0.0, 0.0, 0.0, 0.0)
        if self._period_start is not None and s >= period["to"]:
            watched = (self._report or {}).get("metric") or self.metric
            diff = [x - y for x, y in zip(c, self._period_start)]
            rate = _rate_of(watched, *diff)
            if rate is not None and rate[1] > 0:
                self.reference, self.reference_n = rate[0] / rate[1], rate[1]

    def counts_at(self, k):
        """The scope's cumulative confusion counts ``(tp, fp, fn, tn)`` at the last
        evaluation at or before scope event ``k`` (zeros before the first, or at 0);
        None without counts. Runtime complexity: `O(marks)`."""
        import bisect

        marks = self._counts
        if not marks:
            return None
        i = bisect.bisect_right([m[0] for m in marks], k)
        return (0.0, 0.0, 0.0, 0.0) if i == 0 or k <= 0 else tuple(marks[i - 1][1:])

    def _bound(self):
        """The reference's end on the rule's side: its one-sided Wilson bound at
        ``1 - REFERENCE_ALPHA`` when it is estimated (the lower end for a drop)."""
        ref, n = self.reference, self.reference_n
        if n is None or not n > 0:
            return ref
        lo, hi = _wilson(ref, n, _Z_REFERENCE)
        return lo if self.direction == "drop" else hi

    def _evidence(self):
        """log of the e-value of the stretch since the last change against the
        reference's bound (a mixture of likelihood ratios over SHORTFALLS)."""
        rate, n = self._since
        if not n > 0 or rate != rate:
            return -math.inf
        p0 = min(max(self._bound(), 1e-12), 1.0 - 1e-12)
        sk = min(max(rate * n, 0.0), n)
        fk = n - sk
        sign = 1.0 if self.direction == "drop" else -1.0
        terms = []
        for d in SHORTFALLS:
            q = p0 - sign * d
            if 0.0 < q < 1.0:
                terms.append(sk * math.log(q / p0) + fk * math.log((1.0 - q) / (1.0 - p0)))
        if not terms:
            return -math.inf
        top = max(terms)
        return top + math.log(sum(math.exp(x - top) for x in terms) / len(SHORTFALLS))

    # -- explanation ----------------------------------------------------------------
    def _explain(self, record, f, report):
        rep = self._report or {}
        det = rep.get("metric")
        f["value_label"] = (f"{det or self.metric} since the last detected change"
                            + ("" if det in (None, self.metric) else f" ({self.metric})"))
        f["window"] = "since the last detected change"
        last = rep.get("last_change") or {}
        out = {"p_value": _finite(last.get("p_value")), "before": _finite(last.get("before")),
               "after": _finite(last.get("after")), "change_direction": last.get("direction"),
               "change_start_n": None, "change_start_segment_n": None,
               "change_start_t": _finite(last.get("start_t")), "detected_n": None,
               "detected_segment_n": None, "detected_t": _finite(last.get("t")),
               "observations_before": _finite(last.get("n_before")),
               "observations_after": _finite(last.get("n_after")),
               "observation": _OBSERVATIONS.get(det),
               "evaluated_n": self._evaluated[0], "evaluated_t": _finite(self._evaluated[1])}
        start, index = last.get("start"), last.get("index")
        if _on_predictions(rep):
            # the score detector's positions count the scope's predictions: said in
            # predictions (``clock``), not placed among the labelled events
            out["clock"] = "predictions"
            if start is not None:
                out["change_start_segment_n"] = int(start)
                if _finite(rep.get("n")) is not None:
                    f["events"] = max(int(rep["n"]) - int(start), 0)
            seen = last.get("n") if index is None else int(index) + 1
            if _finite(seen) is not None:
                out["detected_segment_n"] = int(seen)
        else:
            if start is not None:
                out["change_start_segment_n"] = int(start)
                out["change_start_n"] = self.stream_position(int(start),
                                                             out["change_start_t"])
                f["events"] = max(f["segment_n"] - int(start), 0)
            if index is not None:
                out["detected_segment_n"] = int(index) + 1
                out["detected_n"] = self.stream_position(int(index), out["detected_t"]) + 1
        base = self.baseline
        out["baseline"] = _finite(self.reference)
        out["baseline_rule"] = ("fixed" if not isinstance(base, (str, dict)) else
                                "period" if isinstance(base, dict) else base)
        out["rate"] = _finite(self._since[0]) if self._since[1] > 0 else None
        out.update(self._traffic(det, start, f["segment_n"], self._peers))
        return out

    def _traffic(self, watched, start, now, peers):
        """What the traffic did across the last change: prevalence, recall and FPR
        before and after it (from the scope's counts), the precision that the
        prevalence after it and the recall and FPR before it give, and the cause of a
        precision change (``"traffic"`` when that expected precision explains it and
        no detector of recall or FPR detected a change over the same time)."""
        out = {k: None for k in TRAFFIC_FIELDS}
        if watched != "precision" and watched is not None:
            out["cause"] = "model"
        c_now = self._counts[-1][1:] if self._counts else None
        if start is None or c_now is None:
            return out
        starts = self._starts
        prev = starts[-2] if len(starts) >= 2 and starts[-1] == start else 0
        c0, c1 = self.counts_at(prev), self.counts_at(start)
        before = [x - y for x, y in zip(c1, c0)]
        after = [x - y for x, y in zip(c_now, c1)]
        for name, (tp, fp, fn, tn) in (("before", before), ("after", after)):
            out[f"prevalence_{name}"] = _ratio(tp + fn, tp + fp + fn + tn)
            out[f"recall_{name}"] = _ratio(tp, tp + fn)
            out[f"fpr_{name}"] = _ratio(fp, fp + tn)
            out[f"precision_{name}"] = _ratio(tp, tp + fp)
        p, tpr, fpr = out["prevalence_after"], out["recall_before"], out["fpr_before"]
        if None not in (p, tpr, fpr) and p * tpr + (1 - p) * fpr > 0:
            out["expected_precision"] = p * tpr / (p * tpr + (1 - p) * fpr)
        if watched != "precision":
            return out
        changed = []
        for rep in (peers or {}).values():
            if not isinstance(rep, dict) or rep.get("metric") not in ("recall", "fpr"):
                continue
            lc = rep.get("last_change") or {}
            idx = lc.get("index")
            if idx is not None and idx >= start - (now - start):
                changed.append(rep["metric"])
        out["model_changes"] = sorted(set(changed))
        e, obs, k = out["expected_precision"], out["precision_after"], after[0] + after[1]
        if e is None or obs is None:
            return out
        se_ = math.sqrt(max(e * (1 - e), 1e-12) / max(k, 1.0))
        explained = abs(obs - e) <= EXPLAINED_SE * se_ + 1e-12
        out["cause"] = "traffic" if explained and not changed else "model"
        return out

    def _message(self, record, f):
        where = _scope(record.get("segment"))
        d = f.get("change_direction")
        if f.get("before") is None or d is None:
            return f"{self.name} is {record.get('state')} in {where}"
        verb = "fell" if d == "drop" else "rose"
        head = "recovered: " if record.get("state") == RESOLVED else ""
        watched = (self._report or {}).get("metric") or self.metric
        what = watched if watched == self.metric else f"{watched} ({self.metric})"
        msg = (f"{what} of {where} {head}{verb} from {_show(f['before'])} to "
               f"{_show(f['after'])}")
        scores = f.get("clock") == "predictions"
        start = f.get("change_start_segment_n") if scores else f.get("change_start_n")
        if start is not None:
            msg += f" from about {'prediction' if scores else 'event'} {_count(start)}"
            when = _when(f.get("change_start_t"))
            if when:
                msg += f" ({when})"
        if f.get("events") is not None:
            msg += f"; {_count(f['events'])} {'predictions' if scores else 'labelled events'} since"
            if f.get("observations_after") is not None and f.get("observation"):
                msg += f" ({_count(f['observations_after'])} {f['observation']} after the change)"
        if f.get("detected_n") is not None:
            msg += f"; detected at event {_count(f['detected_n'])}"
        elif scores and f.get("detected_segment_n") is not None:
            msg += f"; detected at prediction {_count(f['detected_segment_n'])}"
        if f.get("p_value") is not None:
            msg += f", p = {_show(f['p_value'])}"
        if record.get("state") != RESOLVED and f.get("baseline") is not None \
                and self.baseline != "previous":
            msg += f"; reference {_show(f['baseline'])} ({f['baseline_rule']})"
        if record.get("state") != RESOLVED and watched == "precision":
            msg += _traffic_words(f)
        return msg

    # -- evaluation -----------------------------------------------------------------
    def _value(self, value):
        if value is None:
            return math.nan
        if not isinstance(value, dict) or "change" not in value:
            raise ValueError(
                f"{_where(self.name)}: reads a sequential detector's report (with "
                f"'change'), got {value!r:.80}"
            )
        self._change = value.get("change")
        self._report = value
        # a detector of the score distribution (its report has "ks") watches no rate
        # to hold against a reference: its alarm fires on each detected change, as with
        # baseline = "previous"
        self._on_detection = self.baseline == "previous" or _on_predictions(value)
        count = value.get("drops" if self.direction == "drop" else "rises")
        if count is None:  # a report without counts: the last change only
            count = self.seen + (self._change == self.direction)
        self._new = max(int(count) - self.seen, 0)
        self.seen = max(self.seen, int(count))
        last = value.get("last_change")
        if not last or last.get("after") is None:
            return math.nan
        start = last.get("start")
        if start is not None and (not self._starts or self._starts[-1] != int(start)):
            self._starts = (self._starts + [int(start)])[-2:]
        if self.reference is None and self.baseline == "first" \
                and last.get("before") is not None:
            # the first stretch's rate: exact at the first detection the rule sees (a
            # later one, after a restore from a state without it, gives the level
            # before the last change)
            self.reference = float(last["before"])
            nb = last.get("n_before")
            self.reference_n = None if nb is None else float(nb)
        self._since = _since_change(value)
        self._log_e = self._evidence() if not self._on_detection else -math.inf
        return float(last["after"])

    def _condition(self, v):
        if self._on_detection:
            return self._new > 0 or self._change == self.direction
        if self.reference is None:
            return False
        if self._new > 0 and self._change != self.direction:
            # a change in the rule's direction, and one back, since the last
            # evaluation: the stretch between them cannot be compared with the
            # reference any more; it opens an alert that resolves at the next one
            return True
        return self._log_e >= _LOG_ALARM

    def _cleared(self, v, cond):
        if self._on_detection or self.reference is None:
            return not cond
        rate, n = self._since
        if not n > 0 or rate != rate:
            return False
        # back at the reference: at or past its end on the rule's side (the reference
        # itself when it is fixed)
        bound = self._bound()
        return rate >= bound if self.direction == "drop" else rate <= bound

    def _extra_state(self):
        out = {"seen": self.seen, "marks": [list(m) for m in self._marks]}
        if self.baseline != "previous":
            out["reference"] = [self.reference, self.reference_n]
        if self._counts:
            out["counts"] = [list(m) for m in self._counts]
        if self._period_start is not None:
            out["period_start"] = list(self._period_start)
        if self._starts:
            out["starts"] = list(self._starts)
        return out

    def _set_extra_state(self, life):
        self.seen = int(life.get("seen", 0))
        self._marks = [(int(s), int(n), None if t is None else float(t))
                       for s, n, t in life.get("marks", [])]
        ref = life.get("reference")
        if ref is not None:
            self.reference = None if ref[0] is None else float(ref[0])
            self.reference_n = None if ref[1] is None else float(ref[1])
        self._counts = [(int(m[0]), *(float(x) for x in m[1:])) for m in life.get("counts", [])]
        ps = life.get("period_start")
        self._period_start = None if ps is None else tuple(float(x) for x in ps)
        self._starts = [int(x) for x in life.get("starts", [])]

    def _default_name(self):
        name = f"{self.metric} alarm"
        if self.direction != "drop":
            name += f" on {self.direction}"
        base = self.baseline
        if base == "first":
            return name
        if isinstance(base, dict):
            return f"{name} from events {base['from']} to {base['to']}"
        return f"{name} from {base if isinstance(base, str) else _fmt(base)}"

    def _spec(self):
        base = self.baseline
        return {"metric": self.metric, "direction": self.direction,
                "baseline": dict(base) if isinstance(base, dict) else base}

    def _config_spec(self):
        spec = {"alarm": self.metric}
        if self.direction != "drop":
            spec["direction"] = self.direction
        if self.baseline != "first":
            base = self.baseline
            spec["baseline"] = dict(base) if isinstance(base, dict) else base
        return spec


#: the evidence a reference-based alarm needs against its reference: an e-value of
#: ``1 / REFERENCE_ALPHA`` (a return to the reference pages with probability at most
#: about this, however long it is watched); also the level of the estimated
#: reference's one-sided Wilson bound
REFERENCE_ALPHA = 0.01
#: the shortfalls from the reference that the evidence mixes over, equally weighted:
#: from half a point to 32 points, so a small change gathers evidence at about the rate
#: of the nearest one, a large one at once
SHORTFALLS = (0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32)
_LOG_ALARM = math.log(1.0 / REFERENCE_ALPHA)
#: z of the reference's one-sided bound at ``1 - REFERENCE_ALPHA``
_Z_REFERENCE = 2.3263478740408408
#: a precision after a change within this many standard errors of the expected
#: precision counts as explained by the prevalence
EXPLAINED_SE = 3.0
#: the traffic fields of an alarm's explanation (None where they do not apply)
TRAFFIC_FIELDS = ("prevalence_before", "prevalence_after", "recall_before", "recall_after",
                  "fpr_before", "fpr_after", "precision_before", "precision_after",
                  "expected_precision", "model_changes", "cause")


def _ratio(a, b):
    return a / b if b > 0 else None


def _wilson(p, n, z):
    """Wilson's interval ``(low, high)`` of a rate ``p`` over ``n`` observations."""
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(max(p * (1 - p) / n + z2 / (4 * n * n), 0.0)) / (1 + z2 / n)
    return centre - half, centre + half


def _rate_of(watched, tp, fp, fn, tn):
    """(successes, observations) of a detector's indicator from confusion counts; None
    for what counts cannot give (``roc_auc``)."""
    table = {"recall": (tp, tp + fn), "precision": (tp, tp + fp),
             "accuracy": (tp + tn, tp + fp + fn + tn), "error_rate": (fp + fn, tp + fp + fn + tn),
             "fpr": (fp, fp + tn), "specificity": (tn, fp + tn)}
    return table.get(watched)


def _since_change(rep):
    """(rate, observations) since a detector's last detected change, from its report:
    the rates before and after its best candidate at the last check (the history
    since the restart), or the stretch after the change at the check that found it
    (at most one check, ``block`` observations, behind)."""
    last = rep.get("last_change") or {}
    ref, cur = rep.get("reference"), rep.get("current")
    n0, n1 = rep.get("n_reference"), rep.get("n_current")
    if (last.get("n_after") is not None and n1 == last.get("n_after")
            and cur == last.get("after")):  # the last check is the detection's
        n0 = 0.0
    vals = [_finite(x) for x in (ref, cur, n0, n1)]
    if None in vals[2:]:
        vals = [_finite(last.get("after")), 0.0, _finite(last.get("n_after")), 0.0]
        if None in vals:
            return math.nan, 0.0
    ref, cur, n0, n1 = vals
    n = (n0 or 0.0) + (n1 or 0.0)
    if not n > 0:
        return math.nan, 0.0
    return ((ref or 0.0) * (n0 or 0.0) + (cur or 0.0) * (n1 or 0.0)) / n, n


def _on_predictions(rep):
    """Whether a detector's report is the score detector's (its ``ks`` statistic): it
    counts the scope's predictions, labelled or not, where the others count labelled
    events."""
    return isinstance(rep, dict) and "ks" in rep


def _traffic_words(f):
    """The traffic's side of a precision alarm's sentence: what prevalence did, and
    whether it explains the change."""
    p0, p1, e = f.get("prevalence_before"), f.get("prevalence_after"), f.get("expected_precision")
    if p0 is None or p1 is None or e is None:
        return ""
    moved = "fell" if p1 < p0 else "rose" if p1 > p0 else "stayed"
    words = (f"; prevalence {moved} from {_show(p0 * 100)}% to {_show(p1 * 100)}%"
             if moved != "stayed" else f"; prevalence stayed at {_show(p1 * 100)}%")
    if f.get("cause") == "traffic":
        return (words + f", which explains it (expected precision {_show(e)}); "
                "recall and FPR unchanged")
    changed = f.get("model_changes") or []
    parts = []
    for name in ("recall", "fpr"):
        a, b = f.get(f"{name}_before"), f.get(f"{name}_after")
        label = "FPR" if name == "fpr" else name
        if name in changed and a is not None and b is not None:
            parts.append(f"{label} {'fell' if b < a else 'rose'} from {_show(a)} to {_show(b)}")
    tail = "; " + " and ".join(parts) if parts else "; the model changed"
    return words + f", which explains a precision of {_show(e)} only" + tail


def _alarm_baseline(baseline, rule_name):
    """An alarm's ``baseline``, checked: "first", "previous", a number in [0, 1] or a
    period ``{"from": a, "to": b}`` of scope events."""
    if baseline in ("first", "previous"):
        return baseline
    if isinstance(baseline, dict):
        if set(baseline) != {"from", "to"}:
            raise ValueError(f"{_where(rule_name)}: baseline = {baseline!r}: a period is "
                             "{from = <event>, to = <event>}")
        a = _number(baseline["from"], "baseline.from", rule_name, low=0, integer=True)
        b = _number(baseline["to"], "baseline.to", rule_name, low=0, integer=True)
        if b <= a:
            raise ValueError(f"{_where(rule_name)}: baseline = {baseline!r}: 'to' must be "
                             "after 'from'")
        return {"from": a, "to": b}
    if isinstance(baseline, str):
        raise ValueError(f"{_where(rule_name)}: baseline = {baseline!r}: must be \"first\", "
                         "\"previous\", a number in [0, 1] or {from = <event>, to = <event>}")
    return _number(baseline, "baseline", rule_name, low=0, high=1)


def false_alarm_bound(reports):
    """The bound on the probability that any of these sequential detectors has raised a
    false alarm so far: ``sum(alpha * n / horizon)`` over their reports.

    A :class:`~streameval.sequential.SequentialDrift` gives each candidate change a
    share of its budget in proportion to the events since the previous one, so over
    its first ``m`` events it spends ``alpha * m / horizon`` (Ville's inequality on the
    budget-weighted sum of e-processes), whatever the traffic. The detectors of the
    segments of one Monitor see disjoint events: the sum over them is
    ``alpha * (events of the segments) / horizon``, the monitor-wide level, however
    many segments there are and whenever they appear. Holds on a healthy stream:
    independent events, each detector's rate constant (prevalence and volume may
    move: recall and FPR do not move with them).

    Runtime complexity: `O(len(reports))`.

    >>> false_alarm_bound([{"alpha": 0.005, "n": 300_000, "horizon": 1_000_000},
    ...                    {"alpha": 0.005, "n": 700_000, "horizon": 1_000_000}])
    0.005
    """
    return math.fsum(float(r["alpha"]) * float(r["n"]) / float(r["horizon"])
                     for r in reports)


# ------------------------------------------------------------------------- parsing


def parse_rule(text, **kwargs):
    """Read a rule from the string grammar (see the module docstring); never ``eval``.

    Runtime complexity: `O(len(text))`.

    >>> parse_rule("recall@10000 < 0.8", for_=3)
    Threshold('recall@10000 < 0.8', state='inactive')
    >>> parse_rule("roc_auc drops by 5%").relative
    True
    >>> parse_rule("recall drift p < 0.01").p_below
    0.01
    >>> parse_rule("recall == 0.8")
    Traceback (most recent call last):
    ...
    ValueError: rule 'recall == 0.8': not understood; expected '<metric> <op> <number>' ...

    Parameters
    ----------
    text : str
        The rule.
    **kwargs
        Further parameters of the rule (``for_``, ``min_samples``, ``name``, ...).
    """
    if not isinstance(text, str):
        raise ValueError(f"rule = {text!r}: must be a string such as 'recall < 0.8'")
    m = _RE_THRESHOLD.match(text)
    if m:
        if m.group(4) is not None:
            kwargs = _conf_kwarg(text, kwargs, float(m.group(4)))
        return Threshold(m.group(1), m.group(2), float(m.group(3)), **kwargs)
    m = _RE_CHANGE.match(text)
    if m:
        if m.group(5) is not None:
            kwargs = _conf_kwarg(text, kwargs, float(m.group(5)))
        cls = Drop if m.group(2) == "drops" else Rise
        by = float(m.group(3))
        if m.group(4):
            if "relative" in kwargs and not kwargs["relative"]:
                raise ValueError(f"rule {text!r}: a percentage is a relative change (relative = false given)")
            kwargs["relative"] = True
            by /= 100.0
        return cls(m.group(1), by, **kwargs)
    m = _RE_DRIFT.match(text)
    if m:
        return Drift(m.group(1), float(m.group(2)), **kwargs)
    m = _RE_ALARM.match(text)
    if m:
        if m.group(2):
            if kwargs.get("direction", m.group(2)) != m.group(2):
                raise ValueError(f"rule {text!r}: direction = {kwargs['direction']!r} "
                                 f"contradicts 'on {m.group(2)}'")
            kwargs["direction"] = m.group(2)
        return Alarm(m.group(1), **kwargs)
    raise ValueError(
        f"rule {text!r}: not understood; expected '<metric> <op> <number>' (op: < <= > >=), "
        "'<metric> drops by <number>[%]', '<metric> rises by <number>[%]' "
        "(each optionally followed by 'with confidence <level>'), "
        "'<metric> drift p < <number>' or '<detector> alarm [on drop|rise]'"
    )


def _conf_kwarg(text, kwargs, level):
    if kwargs.get("confidence") not in (None, level):
        raise ValueError(f"rule {text!r}: confidence = {kwargs['confidence']!r} contradicts "
                         f"'with confidence {_fmt(level)}'")
    return dict(kwargs, confidence=level)


_COMMON_KEYS = {"for", "for_seconds", "min_samples", "cooldown", "cooldown_seconds", "name",
                "severity", "labels", "annotations", "keep_firing_for",
                "keep_firing_for_seconds"}
#: Alertmanager labels streameval sets itself (a rule's ``labels`` may not).
RESERVED_LABELS = ("alertname", "severity", "metric", "segment")


def _str_table(table, what, label):
    if table is None:
        return {}
    if not isinstance(table, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in table.items()):
        raise ValueError(f"{_where(label)}: {what} = {table!r:.80}: must be a table of "
                         "strings")
    return dict(table)
_KIND_KEYS = {
    "threshold": {"metric", "op", "value", "confidence", "resolve"},
    "drop": {"metric", "drop", "baseline", "relative", "confidence"},
    "rise": {"metric", "rise", "baseline", "relative", "confidence"},
    "drift": {"drift", "p_below", "direction"},
    "alarm": {"alarm", "direction", "baseline"},
    "rule": {"rule", "baseline", "relative", "direction", "confidence", "resolve"},
}


def rule_from_config(table, where="rule"):
    """Build a rule from a TOML/JSON table (the inverse of :meth:`Rule.to_config`).

    The kind follows from the keys: ``op`` and ``value`` (threshold), ``drop`` or ``rise``
    (change from a baseline), ``drift`` (drift report name, with ``p_below``), or
    ``rule`` (a string in the grammar of :func:`parse_rule`). Common keys: ``for``,
    ``for_seconds``, ``min_samples``, ``cooldown``, ``cooldown_seconds``, ``name``.
    Unknown keys raise ``ValueError`` naming the key and ``where`` the table is.

    Runtime complexity: `O(1)`.

    >>> rule_from_config({"metric": "recall@10000", "op": "<", "value": 0.8, "for": 3}).name
    'recall@10000 < 0.8'
    >>> rule_from_config({"metric": "roc_auc", "drop": 0.05, "baseline": "best"}).name
    'roc_auc drops by 0.05 from best'
    >>> rule_from_config({"drift": "recall", "p_below": 0.01, "cooldown": 5000}).cooldown
    5000
    >>> rule_from_config({"metric": "recall", "op": "<", "valeu": 0.8}, where="monitor.rules[0]")
    Traceback (most recent call last):
    ...
    ValueError: monitor.rules[0]: unknown key 'valeu' for a threshold rule; expected ...
    """
    if isinstance(table, str):
        try:
            return parse_rule(table)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") if where != "rule" else e from None
    if not isinstance(table, dict):
        raise ValueError(f"{where} = {table!r}: must be a table (or a rule string)")
    keys = set(table)
    if "rule" in keys:
        kind = "rule"
    elif "alarm" in keys:
        kind = "alarm"
    elif "drift" in keys:
        kind = "drift"
    elif "drop" in keys and "rise" in keys:
        raise ValueError(f"{where}: give either 'drop' or 'rise', not both")
    elif "drop" in keys:
        kind = "drop"
    elif "rise" in keys:
        kind = "rise"
    elif "op" in keys or "value" in keys:
        kind = "threshold"
    else:
        raise ValueError(
            f"{where}: cannot tell the kind of rule from keys {sorted(keys)}; give 'op' and "
            "'value' (threshold), 'drop' or 'rise' (change), 'drift' (drift test), "
            "'alarm' (sequential detector) or 'rule' (a string such as \"recall < 0.8\")"
        )
    allowed = _KIND_KEYS[kind] | _COMMON_KEYS
    for key in sorted(keys - allowed):
        raise ValueError(
            f"{where}: unknown key {key!r} for a {kind} rule; expected one of {sorted(allowed)}"
        )
    common = {}
    if "for" in table:
        common["for_"] = table["for"]
    for key in ("for_seconds", "min_samples", "cooldown", "cooldown_seconds", "name",
                "severity", "labels", "annotations", "keep_firing_for",
                "keep_firing_for_seconds"):
        if key in table:
            common[key] = table[key]
    try:
        if kind == "rule":
            extra = {k: table[k] for k in ("baseline", "relative", "direction", "confidence",
                                           "resolve") if k in table}
            return parse_rule(table["rule"], **extra, **common)
        if kind == "alarm":
            return Alarm(_metric_name(table["alarm"], "alarm", table.get("name")),
                         **({k: table[k] for k in ("direction", "baseline") if k in table}),
                         **common)
        if kind == "drift":
            return Drift(_metric_name(table["drift"], "drift", table.get("name")),
                         table.get("p_below", 0.01),
                         **({"direction": table["direction"]} if "direction" in table else {}),
                         **common)
        if "metric" not in table:
            raise ValueError(f"{where}: a {kind} rule needs 'metric'")
        if kind == "threshold":
            for key in ("op", "value"):
                if key not in table:
                    raise ValueError(f"{where}: a threshold rule needs 'op' and 'value' (missing {key!r})")
            conf = {k: table[k] for k in ("confidence", "resolve") if k in table}
            return Threshold(table["metric"], table["op"], table["value"], **conf, **common)
        cls = Drop if kind == "drop" else Rise
        extra = {k: table[k] for k in ("baseline", "relative", "confidence") if k in table}
        return cls(table["metric"], table[kind], **extra, **common)
    except TypeError as e:  # e.g. 'direction' given to a rule string that is not a drift rule
        raise ValueError(f"{where}: {e}") from None
    except ValueError as e:
        msg = str(e)
        if msg.startswith(f"{where}:"):
            raise
        if msg.startswith("rule: "):
            msg = msg[len("rule: "):]
        raise ValueError(f"{where}: {msg}") from None
