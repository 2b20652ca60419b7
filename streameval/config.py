"""Monitor configuration: the TOML ``[monitor]`` table -> metrics, windows, drift, rules.

Declarative, checked key by key; never ``eval``. Every error is a ``ValueError`` that
names the bad key by its path (``monitor.metrics."recall@10000".size``) and says what
was expected. :func:`build` returns the keyword arguments of
:class:`~streameval.monitor.Monitor`; ``Monitor.from_config`` and ``Monitor.from_toml``
use it.

Schema
------
.. code-block:: toml

    [monitor]
    every = 1000                  # evaluate every N events (default 1000; 0 = never by count)
    every_seconds = 3600          # and/or every period of event time (aligned to multiples)
    group_by = "country"          # or ["model_version", "country"]: per-segment metrics/alerts
    overall = true                # with group_by, also the whole stream (segment null)
    overall_rules = true          # with group_by, the rules watch the whole stream too
                                  # (default: true, but false for the default rules)
    overall_drift = true          # with group_by, the whole stream runs the drift tests
                                  # (default: true, but false for the default monitor
                                  # whose rules watch the segments only)
    max_segments = 1000           # segments with their own metrics; events of further
                                  # segment values count under "__other__" (a warning)
    threshold = 0.5               # default threshold of the threshold metrics below
    size = 10000                  # size of the default sliding windows (no [monitor.metrics]);
                                  # window = 10000 is the same (its older name)
    pos_label = true              # the positive label (with neg_label for other labels)

    [monitor.metrics]             # name = kind, or name = { metric = kind, ...params }
    roc_auc = "roc_auc"                              # cumulative
    "recall@10000" = { metric = "recall", size = 10000 }     # last 10 000 events
    "precision@1h" = { metric = "precision", period = 3600, lateness = 60 }
    "auc_daily" = { metric = "roc_auc", window = "tumbling", period = 86400 }
    f2 = { metric = "fbeta", beta = 2, threshold = 0.3 }

    [monitor.drift.recall]        # a sequential detector named "recall" (SequentialDrift)
    test = "sequential"           # anytime-valid: P(false alarm in horizon events) <= alpha
    alpha = 0.005                 # its false-alarm probability within the horizon
    horizon = 1000000             # events; metric = the table's name by default: recall,
                                  # precision, accuracy, error_rate, fpr, specificity, roc_auc
    # block, keep, threshold: as in streameval.sequential.SequentialDrift

    [monitor.drift.recall_window] # a window drift test (test = "window", the default)
    metric = "recall"             # "recall" or "precision" (default: the table's name)
    size = 10000                  # current window: the last N events (or period = seconds);
                                  # window = 10000 is the same (its older name)
    reference = "baseline"        # the first window after warmup, "previous", or a number
    alpha = 0.01                  # level of the test and of the reported interval
    # warmup, threshold, lateness, ci ("newcombe" | "wald"), min_count: as in
    # streameval.drift.PrecisionRecallDrift

    [[monitor.rules]]             # one table per rule (or rules = ["recall < 0.8", ...])
    metric = "recall@10000"
    op = "<"
    value = 0.8
    for = 3                       # consecutive evaluations (or for_seconds = 600)
    min_samples = 500             # events of the segment before the rule is evaluated
    cooldown = 5000               # events after a resolution before a new alert
    resolve = 0.85                # resolves when recall@10000 is back at 0.85 (hysteresis)
    keep_firing_for = 2           # and stays firing 2 more evaluations after it cleared
                                  # (or keep_firing_for_seconds = 600)

    [[monitor.rules]]
    metric = "roc_auc"
    drop = 0.05                   # fires when roc_auc <= baseline - 0.05
    baseline = "first"            # or "best", or a number; relative = true for fractions

    [[monitor.rules]]
    alarm = "recall"              # a sequential detector: firing from a detected drop
                                  # until a detected rise (direction = "rise": the reverse)

    [[monitor.rules]]
    drift = "recall_window"       # a drift test's name
    p_below = 0.01                # fires on a significant drop (direction = "drop")

    [[monitor.rules]]
    metric = "recall@10000"
    op = "<"
    value = 0.8
    confidence = 0.99             # fires only when the 99% interval lies below 0.8

    [[monitor.rules]]
    rule = "log_loss rises by 10%"   # the string grammar of streameval.alerts.parse_rule
    name = "calibration"

Metric kinds (snake case, or the class name: ``"ROCAUC"``): ``roc_auc``, ``gini``,
``average_precision``, ``interpolated_ap``, ``eleven_point_ap``, ``precision``,
``recall``, ``f1``, ``fbeta``, ``falpha``, ``accuracy``, ``error_rate``, ``fpr``,
``specificity``, ``balanced_accuracy``, ``mcc``, ``log_loss``, ``brier``. In a metric
table, ``metric`` may be left out when the name before any ``@`` is a kind
(``"recall@10000" = { size = 10000 }``). Window keys: ``size`` (events) or ``period``
(seconds of event time, with ``lateness``), and ``window = "sliding"`` (default) or
``"tumbling"``; every other key is a parameter of the metric (``threshold``, ``beta``,
``alpha``, ``bins``). Without ``[monitor.metrics]`` the monitor has the default
metrics (:func:`default_metrics`) and sequential detectors (:func:`default_drift`), and
if ``[monitor.drift]`` and ``rules`` are absent too, the default alarm rules
``recall alarm``, ``fpr alarm on rise`` (they page: the model) and ``precision alarm``
(severity ``"info"``: the traffic) (:func:`default_rules`): at most a 1% chance that a
paging rule raises a false alarm within a million events of the whole stream, segments
included. With ``group_by`` these
default rules watch the segments only (``overall_rules = false`` unless given): the
whole stream keeps its metrics' rows but raises no alert of its own, and runs no
detectors (``overall_drift = false`` unless given: they would feed no rule, and on a
mixture whose segment shares move their p-values do not hold what they state). Giving a table replaces its defaults, it never
adds to them: with ``[monitor.metrics]`` there are no default drift tests or rules.

Metric names may hold letters, digits and ``_ . @ : -`` (they are what rules refer to).
A TOML file is read with :func:`streameval.runconfig.load_toml`; a file with a
``[monitor]`` table uses that table, a file without one is read as the table itself.
The types, defaults and allowed values of the top-level keys above are declared in
:mod:`streameval.runconfig` (:func:`~streameval.runconfig.monitor_options` checks
them); this module builds the ``metrics``, ``drift`` and ``rules`` tables.

>>> kw = build({"every": 500, "metrics": {"auc": "roc_auc"}, "rules": ["auc < 0.7"]})
>>> kw["every"], list(kw["metrics"]), [r.name for r in kw["rules"]]
(500, ['auc'], ['auc < 0.7'])
>>> build({"evrey": 500})
Traceback (most recent call last):
...
ValueError: monitor: unknown key 'evrey'; expected one of [...]

Imports: :mod:`streameval._registry` (the metric kinds), :mod:`streameval.runconfig`
(the ``[monitor]`` table's own keys and the config file's tables are declared there),
:mod:`streameval.validation`, :mod:`streameval.alerts`, :mod:`streameval.drift`,
:mod:`streameval.sequential`, and the metric and window classes through the package's
public names (loaded on first use); the Monitor imports it when it is built from a
config, and nothing it imports imports it.
"""

from __future__ import annotations

import inspect

import streameval
from streameval import _registry, runconfig
from streameval.alerts import rule_from_config
from streameval.drift import PrecisionRecallDrift
from streameval.sequential import SequentialDrift
from streameval.validation import check_period, check_size

__all__ = [
    "KINDS",
    "MONITOR_KEYS",
    "build",
    "load_toml",
    "make_metric",
    "default_metrics",
    "default_drift",
    "default_rules",
    "DEFAULT_ALPHA",
    "DEFAULT_HORIZON",
    "DEFAULT_EVERY",
    "DEFAULT_SIZE",
    "DEFAULT_WINDOW",
    "DEFAULT_THRESHOLD",
]

#: evaluate every 1000 events: 1000 timeline rows per million events
DEFAULT_EVERY = 1000
#: the default sliding windows (and drift windows) hold the last 10 000 events
DEFAULT_SIZE = 10_000
#: the older name of :data:`DEFAULT_SIZE`
DEFAULT_WINDOW = DEFAULT_SIZE
#: threshold metrics predict positive when ``score >= 0.5``
DEFAULT_THRESHOLD = 0.5
#: significance level of the earlier default monitor's drift rules
#: (``recall drift p < 0.01``); kept for configs that write such rules
DEFAULT_P_BELOW = 0.01
#: the default monitor's false-alarm guarantee: the probability that any of its paging
#: rules (recall and FPR: the model) fires on a healthy stream within DEFAULT_HORIZON
#: events of the whole stream, segments included, is at most DEFAULT_ALPHA (each
#: paging detector gets an equal share; the traffic report on precision, severity
#: "info", has a share of its own)
DEFAULT_ALPHA = 0.01
#: the horizon of that guarantee, in events
DEFAULT_HORIZON = 1_000_000
#: the proportions the default monitor watches with sequential detectors
DEFAULT_DETECTORS = ("recall", "precision", "fpr")
#: the detectors whose alarms page: what does not move with prevalence
PAGING_DETECTORS = ("recall", "fpr")
#: the severity of the default precision alarm: a precision change is reported with
#: its cause (the traffic or the model), and pages through the recall and FPR alarms
TRAFFIC_SEVERITY = "info"

#: metric kind (config name) -> public class name in ``streameval``
KINDS = _registry.config_kinds()
_CLASS_TO_KIND = {v: k for k, v in KINDS.items()}

#: the keys of the ``[monitor]`` table (declared in :mod:`streameval.runconfig`)
MONITOR_KEYS = tuple(runconfig.keys("monitor"))

_WINDOW_KEYS = ("window", "size", "period", "lateness")
# metric parameters a binary monitor sets itself (labels) or does not support
# (multiclass averaging, shared confusion matrices)
_NOT_CONFIGURABLE = ("self", "pos_label", "neg_label", "cm", "average", "multiclass")
#: the keys of a drift table: the parameters of streameval.drift.PrecisionRecallDrift
#: (``window`` is the table's name of its ``size``; ``size`` is accepted too)
_DRIFT_KEYS = ("test", "metric", "reference", "window", "size", "period", "warmup", "alpha",
               "threshold", "lateness", "ci", "min_count")
#: the keys of a drift table with test = "sequential": the parameters of
#: streameval.sequential.SequentialDrift
_SEQUENTIAL_KEYS = ("test", "metric", "alpha", "horizon", "threshold", "block", "keep")


def _q(name):
    """A key as TOML writes it in a dotted path (quoted unless bare)."""
    if name and all(c.isalnum() or c in "_-" for c in name):
        return name
    return '"' + name.replace('"', '\\"') + '"'


def _unknown(where, keys, allowed):
    for key in sorted(set(keys) - set(allowed), key=str):
        raise ValueError(f"{where}: unknown key {key!r}; expected one of {sorted(allowed)}")


# ------------------------------------------------------------- the run schema

# The config file's tables, its ``[input]`` keys and reading a TOML file belong to the
# run schema (:mod:`streameval.runconfig`); their names stay importable from here.
load_toml = runconfig.load_toml
monitor_table = runconfig.monitor_table
label_ttl = runconfig.label_ttl
field_map = runconfig.field_map
CONFIG_TABLES = runconfig.CONFIG_TABLES
FIELD_KEYS = runconfig.FIELD_KEYS


def config_tables(doc):
    """``(monitor table or None, input table)`` of a parsed config file
    (:func:`streameval.runconfig.split` without the ``[serve]`` table)."""
    table, inp, _ = runconfig.split(doc)
    return table, inp


# ------------------------------------------------------------------------ metrics


def _metric_class(kind, where):
    if not isinstance(kind, str):
        raise ValueError(f"{where} = {kind!r}: must be a metric kind such as \"roc_auc\"")
    cls_name = KINDS.get(kind, kind if kind in _CLASS_TO_KIND else None)
    if cls_name is None:
        raise ValueError(
            f"{where} = {kind!r}: unknown metric kind; expected one of {sorted(KINDS)}"
        )
    if cls_name in streameval.__all__:
        return getattr(streameval, cls_name)
    return _registry.state_class(cls_name)  # a kind whose class is not a public name


def make_metric(spec, *, name="metric", threshold=None, pos_label=True, neg_label=None,
                where=None):
    """Build one metric (or window over it) from a kind string or a metric table.

    ``threshold`` is the default for metrics that take one; ``pos_label`` and
    ``neg_label`` go to every metric.

    >>> make_metric({"metric": "recall", "size": 100, "threshold": 0.3}, name="r")
    Sliding(Recall, size=100)...
    """
    where = where or f"monitor.metrics.{_q(name)}"
    if isinstance(spec, str):
        spec = {"metric": spec}
    elif not isinstance(spec, dict):
        raise ValueError(f"{where} = {spec!r}: must be a metric kind or a table")
    spec = dict(spec)
    if "metric" in spec:
        kind = spec.pop("metric")
        cls = _metric_class(kind, f"{where}.metric")
    else:
        kind = name.split("@", 1)[0]
        if kind not in KINDS and kind not in _CLASS_TO_KIND:
            raise ValueError(
                f"{where}: needs metric = \"<kind>\" ({name!r} is not a kind; "
                f"expected one of {sorted(KINDS)})"
            )
        cls = _metric_class(kind, where)
    window = {k: spec.pop(k) for k in _WINDOW_KEYS if k in spec}
    params = inspect.signature(cls.__init__).parameters
    allowed = [p for p in params if p not in _NOT_CONFIGURABLE
               and params[p].kind not in (params[p].VAR_POSITIONAL, params[p].VAR_KEYWORD)]
    for key in ("pos_label", "neg_label"):
        if key in spec:
            raise ValueError(f"{where}.{key}: labels are set once for the monitor ([monitor] {key})")
    _unknown(where, spec, list(allowed) + list(_WINDOW_KEYS))
    kwargs = dict(spec)
    if threshold is not None and "threshold" in params and "threshold" not in kwargs:
        kwargs["threshold"] = threshold
    if "pos_label" in params:
        kwargs["pos_label"] = pos_label
    if "neg_label" in params:
        kwargs["neg_label"] = neg_label
    try:
        metric = cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None
    if not window:
        return metric
    return _make_window(metric, window, where)


def _make_window(metric, window, where):
    kind = window.pop("window", "sliding")
    if kind not in ("sliding", "tumbling"):
        raise ValueError(f"{where}.window = {kind!r}: must be \"sliding\" or \"tumbling\"")
    if ("size" in window) == ("period" in window):
        raise ValueError(f"{where}: a window needs either size (events) or period (seconds)")
    if "size" in window and "lateness" in window:
        raise ValueError(f"{where}.lateness: only a window by period (seconds) has lateness")
    if "size" in window:
        window["size"] = check_size(window["size"], f"{where}.size")
    else:
        window["period"] = check_period(window["period"], f"{where}.period")
    cls = streameval.Sliding if kind == "sliding" else streameval.Tumbling
    try:
        return cls(metric, **window)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


_UNSET = object()


def _size_or_window(size, window, where, default=DEFAULT_SIZE, none_ok=True):
    """``size=`` or its older name ``window=`` (not both), checked; ``default`` if
    neither is given; with ``none_ok``, 0 for a falsy value (``None``, 0: no window, as
    before). ``where`` names the parameter in errors."""
    if size is not _UNSET and window is not _UNSET:
        raise ValueError(f"{where}: give size= or its alias window=, not both")
    if size is _UNSET and window is _UNSET:
        return default
    key, value = ("size", size) if size is not _UNSET else ("window", window)
    if none_ok and not value:
        return 0
    return check_size(value, f"{where}.{key}")


def default_metrics(threshold=DEFAULT_THRESHOLD, size=_UNSET, pos_label=True, neg_label=None,
                    *, window=_UNSET):
    """The default monitor's metrics: 7 cumulative ones and their sliding versions.

    Names: ``roc_auc``, ``average_precision``, ``precision``, ``recall``, ``f1``,
    ``accuracy``, ``log_loss`` (cumulative, all events so far) and
    ``<name>@<size>`` (the last ``size`` events, default 10 000, e.g.
    ``roc_auc@10000``; ``size=0`` or None: none). Threshold metrics use ``threshold``.
    ``window=`` is the older name of ``size=``.

    >>> sorted(default_metrics(size=500))[:3]
    ['accuracy', 'accuracy@500', 'average_precision']
    """
    size = _size_or_window(size, window, "monitor")
    kinds = ["roc_auc", "average_precision", "precision", "recall", "f1", "accuracy", "log_loss"]
    labels = {"pos_label": pos_label, "neg_label": neg_label}
    metrics = {k: make_metric(k, name=k, threshold=threshold, **labels) for k in kinds}
    if size:
        for k in kinds:
            name = f"{k}@{size}"
            metrics[name] = make_metric({"metric": k, "size": size}, name=name,
                                        threshold=threshold, **labels)
    return metrics


# -------------------------------------------------------------------------- drift


def make_drift(spec, *, name, threshold=DEFAULT_THRESHOLD, pos_label=True, neg_label=None,
               where=None):
    """Build one :class:`~streameval.drift.PrecisionRecallDrift` from a drift table.

    ``metric`` defaults to the table's name; ``threshold`` to the monitor's. The
    window's length is ``size`` (``window``, its older name, is read too).

    >>> d = make_drift({"size": 500, "reference": "previous"}, name="recall")
    >>> d.metric, d.size, d.reference, d.threshold
    ('recall', 500, 'previous', 0.5)
    >>> make_drift({"size": 500, "window": 500}, name="recall")
    Traceback (most recent call last):
    ...
    ValueError: monitor.drift.recall: give size or its alias window, not both
    """
    where = where or f"monitor.drift.{_q(name)}"
    if not isinstance(spec, dict):
        raise ValueError(f"{where} = {spec!r}: must be a table")
    test = spec.get("test", "window")
    if test not in ("window", "sequential", "score"):
        raise ValueError(f"{where}.test = {test!r}: must be \"window\" (a two-proportion "
                         "test of a window against a reference), \"sequential\" (an "
                         "anytime-valid detector) or \"score\" (a shift of the score "
                         "distribution, no labels needed)")
    if test == "sequential":
        return _make_sequential(spec, name, threshold, pos_label, neg_label, where)
    if test == "score":
        return _make_score_detector(spec, where)
    _unknown(where, spec, _DRIFT_KEYS)
    kwargs = dict(spec)
    kwargs.pop("test", None)
    kwargs.setdefault("metric", name)
    kwargs.setdefault("threshold", threshold)
    if "window" in kwargs and "size" in kwargs:
        raise ValueError(f"{where}: give size or its alias window, not both")
    for key in ("window", "size"):
        if key in kwargs:
            kwargs["size"] = check_size(kwargs.pop(key), f"{where}.{key}")
    if "period" in kwargs:
        kwargs["period"] = check_period(kwargs["period"], f"{where}.period")
    try:
        return PrecisionRecallDrift(**kwargs, pos_label=pos_label, neg_label=neg_label)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


_SCORE_KEYS = ("test", "alpha", "horizon", "reference", "window", "every")


def _make_score_detector(spec, where):
    """A :class:`~streameval.metrics.scoredrift.ScoreDriftDetector` from a drift table
    with ``test = "score"``."""
    from streameval.metrics.scoredrift import ScoreDriftDetector

    _unknown(where, spec, _SCORE_KEYS)
    try:
        return ScoreDriftDetector(**{k: v for k, v in spec.items() if k != "test"})
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


def _make_sequential(spec, name, threshold, pos_label, neg_label, where):
    _unknown(where, spec, _SEQUENTIAL_KEYS)
    kwargs = {k: v for k, v in spec.items() if k != "test"}
    kwargs.setdefault("metric", name)
    kwargs.setdefault("threshold", threshold)
    try:
        return SequentialDrift(**kwargs, pos_label=pos_label, neg_label=neg_label)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


def default_drift(threshold=DEFAULT_THRESHOLD, size=_UNSET, pos_label=True, neg_label=None,
                  *, window=_UNSET):
    """The default drift tests ``recall``, ``precision`` and ``fpr``: anytime-valid
    sequential detectors (:class:`~streameval.sequential.SequentialDrift`), each at
    ``alpha = DEFAULT_ALPHA / 2`` over ``DEFAULT_HORIZON`` events. The two that page
    (recall and FPR: the model) together raise a false alarm on a healthy stream with
    probability at most ``DEFAULT_ALPHA`` (1%) within a million events of the whole
    stream (a segment's detector spends its budget by the segment's events, so the
    segments share it by traffic); precision's, which reports the traffic, has a share
    of its own. ``size`` (or its older name ``window=``) is checked, as before, but the
    detectors have no window: their reference is all the history since the last
    detected change."""
    _size_or_window(size, window, "monitor", none_ok=False)
    alpha = DEFAULT_ALPHA / len(PAGING_DETECTORS)
    return {
        k: make_drift({"test": "sequential", "alpha": alpha, "horizon": DEFAULT_HORIZON},
                      name=k, threshold=threshold, pos_label=pos_label, neg_label=neg_label)
        for k in DEFAULT_DETECTORS
    }


def default_rules():
    """The default rules ``recall alarm``, ``precision alarm`` (severity ``"info"``: it
    reports a precision change and its cause, see :class:`~streameval.alerts.Alarm`) and
    ``fpr alarm on rise``: each firing while the rate since its detector's last
    detected change is below (FPR: above) the level of the stream's first stretch."""
    return [rule_from_config({"alarm": "recall"}),
            rule_from_config({"alarm": "precision", "severity": TRAFFIC_SEVERITY}),
            rule_from_config({"alarm": "fpr", "direction": "rise"})]


# ---------------------------------------------------------------------------- build


def build(table, where="monitor"):
    """Check a ``[monitor]`` table and return the keyword arguments of ``Monitor``.

    Runtime complexity: `O(size of the table)`.
    """
    opts = runconfig.monitor_options(table, where)
    threshold, window = opts.pop("threshold"), opts.pop("size")
    kw = opts
    pos_label, neg_label = kw["pos_label"], kw["neg_label"]
    labels = {"pos_label": pos_label, "neg_label": neg_label}

    metrics = table.get("metrics")
    if metrics is None:
        kw["metrics"] = default_metrics(threshold, window, **labels)
    else:
        if not isinstance(metrics, dict) or not metrics:
            raise ValueError(f"{where}.metrics: must be a table of name = metric (at least one)")
        kw["metrics"] = {
            name: make_metric(spec, name=name, threshold=threshold, **labels,
                              where=f"{where}.metrics.{_q(name)}")
            for name, spec in metrics.items()
        }

    if table.get("calibration") is not None:
        kw["metrics"] = {**kw["metrics"], **calibration_refit(
            table["calibration"], f"{where}.calibration", **labels)}

    drift = table.get("drift")
    rules = table.get("rules")
    if drift is None:
        kw["drift"] = default_drift(threshold, window, **labels) if metrics is None else {}
    else:
        if not isinstance(drift, dict):
            raise ValueError(f"{where}.drift: must be a table of name = {{ drift test }}")
        kw["drift"] = {
            name: make_drift(spec, name=name, threshold=threshold, **labels,
                             where=f"{where}.drift.{_q(name)}")
            for name, spec in drift.items()
        }
    if rules is None:
        kw["rules"] = default_rules() if metrics is None and drift is None else []
        if kw["rules"] and kw.get("group_by") is not None:
            # the default alarms watch the segments: the whole stream's detector would
            # see a mixture whose shares move (its guarantee assumes one stationary
            # stream) and page a second time for a segment that broke
            kw.setdefault("overall_rules", False)
            if not kw["overall_rules"]:
                # nor does it run the default detectors: they would feed no rule, their
                # p-values assume one stationary stream (the segments' shares move),
                # and they would cost as much as every segment's together
                kw.setdefault("overall_drift", False)
    else:
        if not isinstance(rules, list):
            raise ValueError(f"{where}.rules: must be an array of rule tables or strings")
        kw["rules"] = [rule_from_config(r, where=f"{where}.rules[{i}]") for i, r in enumerate(rules)]
    return kw


# --------------------------------------------------------------- before the labels

#: The default monitor's label-free metrics (with ``label_free=True``), by kind: they
#: count every prediction when it is made. Kinds not registered are left out.
LABEL_FREE_KINDS = ("predicted_positive_rate", "score_drift", "estimated_precision",
                    "estimated_recall", "estimated_f1", "estimated_roc_auc")
#: The realized metrics the default monitor checks its estimates against, as labels join.
CHECKED_KINDS = ("precision", "recall", "f1", "roc_auc")


#: The name of the default monitor's detector of the score distribution (a drift test
#: with ``test = "score"``: :class:`~streameval.metrics.scoredrift.ScoreDriftDetector`).
SCORE_DETECTOR = "score_shift"
#: Its false-alarm probability within :data:`DEFAULT_HORIZON` predictions of the whole
#: stream, segments included (a share of its own beside the paging rules' 1%).
SCORE_ALPHA = DEFAULT_ALPHA / 2
#: Its reference and window, in predictions: a shift that moves the KS distance of the
#: score distribution by about 0.08 is detectable (the two-sample DKW bound at the level
#: of one check, see :func:`~streameval.metrics.scoredrift.ks_threshold`), a large one
#: a few thousand predictions after the change (``benchmarks/bench_alerts.py score``).
SCORE_WINDOW = 5000
#: Predictions between two of its checks (each check at level
#: ``SCORE_ALPHA * SCORE_EVERY / DEFAULT_HORIZON``).
SCORE_EVERY = 500


def default_label_free(threshold=DEFAULT_THRESHOLD, size=10_000, pos_label=True,
                       neg_label=None):
    """``(metrics, rules)`` the default monitor adds when predictions come before their
    labels: the label-free kinds of :data:`LABEL_FREE_KINDS` (cumulative and over the last
    ``size`` events, ``estimated_recall@10000``), and for each realized metric of
    :data:`CHECKED_KINDS` with an estimate, ``estimation_error.<metric>`` and
    ``estimate_covered.<metric>`` (:class:`~streameval.metrics.checked.EstimateCheck`, over
    the labelled events, cumulative and over the last ``size`` labels). Rules: ``score
    drift`` and ``score drift on rise`` (alarms of the sequential detector
    :data:`SCORE_DETECTOR` of :func:`default_label_free_drift`: the score distribution
    shifted and its mean fell, or rose) and ``estimate diverged`` (the realized recall
    outside the estimate's 95% interval at 5 evaluations in a row, over the last ``size``
    labels, with at least ``size`` labels): concept shift or broken calibration."""
    from streameval.metrics.checked import EstimateCheck

    labels = {"pos_label": pos_label, "neg_label": neg_label}
    kinds = _registry.config_kinds()
    metrics = {}
    for k in LABEL_FREE_KINDS:
        if k not in kinds:
            continue
        metrics[k] = make_metric(k, name=k, threshold=threshold, **labels)
        if size:
            metrics[f"{k}@{size}"] = make_metric({"metric": k, "size": size},
                                                 name=f"{k}@{size}", threshold=threshold,
                                                 **labels)
    rules = []
    for k in CHECKED_KINDS:
        if f"estimated_{k}" not in kinds:
            continue
        for output, prefix in (("error", "estimation_error"), ("covered", "estimate_covered")):
            check = EstimateCheck(k, output=output, threshold=threshold, **labels)
            metrics[f"{prefix}.{k}"] = check
            if size:
                metrics[f"{prefix}.{k}@{size}"] = _make_window(check.clone(), {"size": size},
                                                               f"{prefix}.{k}@{size}")
    rules.append({"alarm": SCORE_DETECTOR, "name": "score drift"})
    rules.append({"alarm": SCORE_DETECTOR, "direction": "rise", "name": "score drift on rise"})
    if size and f"estimate_covered.recall@{size}" in metrics:
        rules.append({"metric": f"estimate_covered.recall@{size}", "op": "<", "value": 0.5,
                      "for": 5, "min_samples": size, "name": "estimate diverged"})
    return metrics, rules


def default_label_free_drift():
    """The default monitor's detector of the score distribution when predictions come
    before their labels: ``{SCORE_DETECTOR: ScoreDriftDetector(...)}`` at
    ``alpha = SCORE_ALPHA`` over ``DEFAULT_HORIZON`` predictions, reference and window of
    :data:`SCORE_WINDOW` predictions, a check every :data:`SCORE_EVERY`. On a stationary
    stream of independent scores, the probability that it detects a change within a
    million predictions of the whole stream is at most 0.5%, segments included (a
    segment's detector checks once per ``SCORE_EVERY`` of its own predictions, so the
    checks of all segments together spend the budget by the stream's predictions)."""
    return {SCORE_DETECTOR: make_drift(
        {"test": "score", "alpha": SCORE_ALPHA, "horizon": DEFAULT_HORIZON,
         "reference": SCORE_WINDOW, "window": SCORE_WINDOW, "every": SCORE_EVERY},
        name=SCORE_DETECTOR)}


#: ``[monitor.calibration]``: the keys and their defaults (labels between two refits of
#: the isotonic map, and labels it is fitted on, the last ones joined)
CALIBRATION_KEYS = {"refit_every": 10_000, "window": 50_000}
#: the row names of a calibration refit schedule: the version applied and its fit range
CALIBRATION_NAMES = ("calibration.version", "calibration.fit_from", "calibration.fit_to")


def calibration_refit(spec, where="monitor.calibration", pos_label=True, neg_label=None):
    """The metrics of a ``[monitor.calibration]`` table: a
    :class:`~streameval.metrics.calibration.CalibrationRefit` named
    ``calibration.version`` (``refit_every`` labels between refits, fitted on the last
    ``window`` labels joined) and its fit range ``calibration.fit_from`` and
    ``calibration.fit_to``
    (:class:`~streameval.metrics.calibration.CalibrationField`). At each row after a
    refit, every label-free estimate of the scope takes the new map
    (:func:`~streameval.metrics.calibration.recalibrate`). ``ValueError`` naming the bad
    key."""
    from streameval.metrics.calibration import CalibrationField, CalibrationRefit

    if not isinstance(spec, dict):
        raise ValueError(f"{where}: must be a table (refit_every, window)")
    _unknown(where, spec, CALIBRATION_KEYS)
    opts = {**CALIBRATION_KEYS, **spec}
    for key in ("refit_every", "window"):
        v = opts[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{where}.{key} = {v!r}: must be an integer >= 1 (labels)")
    labels = {"pos_label": pos_label, "neg_label": neg_label}
    refit = CalibrationRefit(every=opts["refit_every"], window=opts["window"], **labels)
    return {CALIBRATION_NAMES[0]: refit,
            CALIBRATION_NAMES[1]: CalibrationField("fit_from", **labels),
            CALIBRATION_NAMES[2]: CalibrationField("fit_to", **labels)}


def build_label_free(table, where="monitor"):
    """:func:`build`, plus, when the table leaves the metrics to the default (no
    ``metrics`` table), the label-free metrics and checks of :func:`default_label_free`,
    the score detector of :func:`default_label_free_drift` (when the table has no
    ``drift`` table either) and their rules (when the table has no ``rules``; the score
    drift alarms only with the detector): the default monitor of a stream whose
    predictions come before their labels."""
    kw = build(table, where)
    if table.get("metrics") is not None:
        return kw
    opts = runconfig.monitor_options(table, where)
    extra, rules = default_label_free(opts["threshold"], opts["size"], kw["pos_label"],
                                      kw["neg_label"])
    kw["metrics"] = {**kw["metrics"], **extra}
    detector = table.get("drift") is None
    if detector:
        kw["drift"] = {**kw["drift"], **default_label_free_drift()}
    if table.get("rules") is None:
        kw["rules"] = list(kw["rules"]) + [
            rule_from_config(r) for r in rules
            if detector or r.get("alarm") != SCORE_DETECTOR]
    return kw
