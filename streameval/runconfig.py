"""The run configuration file: one schema for every edge that reads it.

A config file (TOML, or its parsed dict) configures a run of ``streameval replay``,
``streameval run`` (a scenario's config tables), ``streameval serve`` and the Spark
entry points (``replay --engine spark`` and the Structured Streaming sink
:class:`~streameval.spark.streaming.MonitorSink`). Its tables:

* ``[monitor]``: what is monitored (metrics, windows, drift tests, rules); its
  ``metrics``, ``drift`` and ``rules`` tables are built by :mod:`streameval.config`,
  its other keys are declared here. A file without any of the tables below is read
  as a bare ``[monitor]`` table.
* ``[input]``: how events are read (field names, event times, delayed labels).
* ``[serve]``: the HTTP service's options; read by ``serve`` alone, left aside by the
  other edges, so that one file configures a replay and a service alike.

Every key is a :class:`Key` of a :class:`Section` in :data:`SECTIONS`: its type,
default, allowed values, the edges that use it and a one-line doc. Every edge parses
the file with :func:`parse`, so a key gives the same value and a bad value the same
``ValueError`` in every edge; a key that an edge does not use is refused there with one
message naming the key, the edge and the edges that use it (``input.labels: not
supported by serve (supported by replay, run): ...``). :func:`reference_markdown`
renders the schema as the configuration reference of the documentation.

Decisions recorded in the schema:

* ``[input] on_duplicate`` (a second prediction with an id still waiting for its
  label) takes ``error``, ``keep_first`` or ``keep_last`` everywhere. Its default is
  ``error`` for ``replay`` and ``run`` (a log is a fixed file: a repeated id is a fault
  of the log, reported with its line, or set aside with ``--on-error skip``) and
  ``keep_first`` for ``serve``, which refuses ``error``: a batch is durable and
  acknowledged before its predictions are joined, so it cannot be refused afterwards
  for a duplicate id (duplicates are counted).
* ``[input] require_ts`` defaults to true, except for ``serve``, where it follows
  ``stamp_arrival_time`` (an event without time gets its time of arrival only when
  ``stamp_arrival_time = true``).
* ``[input] format`` is read by ``replay`` and ``run``; ``serve`` and Spark, which read
  no file, accept and ignore it so that one file serves every edge.

Runtime complexity: parsing is `O(size of the file)`.

>>> run = parse({"input": {"score": "p", "label_ttl": 60}}, "replay")
>>> run.input["score"], run.input["label_ttl"], run.input["on_duplicate"]
('p', 60.0, 'error')
>>> parse({"input": {"labels": "l.jsonl", "label_ttl": 60}}, "serve")
Traceback (most recent call last):
...
ValueError: input.labels: not supported by serve (supported by replay, run): serve takes labels on POST /labels, not from a file

Imports: the standard library (``tomllib``, or ``tomli`` on Python 3.10),
:mod:`streameval.validation` and :mod:`streameval.events` (the field map). The
Monitor's builder (:mod:`streameval.config`) and the edges import it; it imports
neither.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Callable

from streameval.events import DEFAULT_MAX_FUTURE, FieldMap
from streameval.validation import (
    MAX_EXPANSION,
    MAX_LINE_BYTES,
    Integer,
    Real,
    check_param,
    check_size,
    check_threshold,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "EDGES",
    "Key",
    "Section",
    "SECTIONS",
    "CONFIG_TABLES",
    "FIELD_KEYS",
    "RunConfig",
    "parse",
    "load_document",
    "load_toml",
    "split",
    "monitor_table",
    "check_input",
    "check_serve",
    "monitor_options",
    "field_map",
    "label_ttl",
    "refuse",
    "unknown_key",
    "keys",
    "stream_keys",
    "SCENARIO_SECTIONS",
    "DUPLICATE_MODES",
    "reference_markdown",
]

#: The edges that read a config file: ``streameval replay``, ``streameval run`` (a
#: scenario's config), ``streameval serve`` and Spark (``replay --engine spark`` and
#: the streaming sink).
EDGES = ("replay", "run", "serve", "spark")
_ALL = EDGES
_FILES = ("replay", "run")          # edges that read log files
_DELAYED = ("replay", "run", "serve")  # edges that join delayed labels


# --------------------------------------------------------------------- the schema


@dataclasses.dataclass(frozen=True)
class Key:
    """One key of a section.

    ``check(value, where)`` returns the value normalised (``where`` names the key in
    errors: ``input.label_ttl``) or raises ``ValueError``; None accepts any value.
    ``default`` is the value of an absent key, or a dict ``{edge: default}`` where
    edges differ; ``default_text`` says it in words where it is not a value.
    ``refused`` maps an edge that does not take the key to the reason given with the
    refusal. ``kinds``: in a scenario's ``[stream]`` table, the stream kinds that take
    the key (empty: every kind).
    """

    name: str
    type: str
    doc: str
    edges: tuple = _ALL
    default: Any = None
    allowed: str = ""
    check: Callable[[Any, str], Any] | None = None
    refused: dict = dataclasses.field(default_factory=dict)
    default_text: str = ""
    kinds: tuple = ()

    def default_for(self, edge):
        """The default of this key for ``edge``."""
        if isinstance(self.default, dict):
            return self.default.get(edge)
        return self.default


@dataclasses.dataclass(frozen=True)
class Section:
    """A table of the config file: its keys, in the order they are checked."""

    name: str
    doc: str
    keys: tuple
    edges: tuple = _ALL

    def key(self, name):
        """The :class:`Key` called ``name`` (KeyError when there is none)."""
        for k in self.keys:
            if k.name == name:
                return k
        raise KeyError(name)

    def names(self, edge=None):
        """The key names (those ``edge`` takes, when given), in schema order."""
        return [k.name for k in self.keys if edge is None or edge in k.edges]


# --- checks (each names the key by ``where``; messages shared by every edge)


def _field_name(v, where):
    if not isinstance(v, str) or not v:
        raise ValueError(f"{where} = {v!r}: must be a field name")
    return v


def _bool(v, where):
    if not isinstance(v, bool):
        raise ValueError(f"{where} = {v!r}: must be true or false")
    return v


def _seconds_positive(v, where):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise ValueError(f"{where} = {v!r}: must be a number of seconds > 0")
    return v


def _label_ttl(v, where):
    return float(_seconds_positive(v, where))


def _max_future(v, where):
    return check_param(where, v, Real(0)) or None


def _format(v, where):
    if not isinstance(v, str) or not v:
        raise ValueError(f"{where} = {v!r}: must be a format name such as \"jsonl\", "
                         "\"csv\" or \"parquet\"")
    return v


def _path(v, where):
    if not isinstance(v, str) or not v:
        raise ValueError(f"{where} = {v!r}: must be a file path")
    return v


#: the values of ``[input] on_duplicate``
DUPLICATE_MODES = ("error", "keep_first", "keep_last")


def _on_duplicate(v, where):
    if v not in DUPLICATE_MODES:
        raise ValueError(f"{where} = {v!r}: expected error, keep_first or keep_last")
    return v


def _int_min(low):
    def check(v, where):
        return check_param(where, v, Integer(low))
    return check


def _real_min(low, open_low=False):
    def check(v, where):
        return check_param(where, v, Real(low, open_low=open_low))
    return check


def _urls(v, where):
    if not isinstance(v, list) or not all(isinstance(u, str) for u in v):
        raise ValueError(f"{where} = {v!r:.80}: must be a list of URLs")
    return v


def _nonempty_str(v, where):
    if not (isinstance(v, str) and v):
        raise ValueError(f"{where} = {v!r}: must be a non-empty string")
    return v


def _str_table(v, where):
    if not isinstance(v, dict) or not all(
            isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise ValueError(f"{where} = {v!r:.80}: must be a table of strings")
    return v


def _hosts(v, where):
    if not isinstance(v, list) or not all(isinstance(h, str) and h for h in v):
        raise ValueError(f"{where} = {v!r:.80}: must be a list of host names")
    return v


def _count_int(v, where):
    if isinstance(v, bool) or not isinstance(v, int) or not v > 0:
        raise ValueError(f"{where} = {v!r}: must be an int >= 1")
    return v


def _webhook_format(v, where):
    if v not in ("streameval", "alertmanager"):
        raise ValueError(f"{where} = {v!r}: must be \"streameval\" (the transitions as they "
                         "are) or \"alertmanager\" (Alertmanager's webhook body)")
    return v


def _group_by(v, where):
    fields = [v] if isinstance(v, str) else v
    if (not isinstance(fields, list) or not fields
            or not all(isinstance(f, str) and f for f in fields)
            or len(set(fields)) != len(fields)):
        raise ValueError(f"{where} = {v!r}: must be a field name or a list of distinct names")
    return v


def _threshold(v, where):
    return check_threshold(v, name=where)


_SPARK_READS = "Spark reads the log with its own readers"

_NO_DELAYED_SPARK = ("delayed labels are not supported by Spark; join predictions and "
                     "labels first")

INPUT = Section("input", "How events are read: field names, event times, delayed labels.", (
    Key("ts", "string", "field of the event time (epoch seconds or ISO-8601)", default="ts",
        check=_field_name, allowed="a field name"),
    Key("label", "string", "field of the label", default="label", check=_field_name,
        allowed="a field name"),
    Key("score", "string", "field of the model's score", default="score", check=_field_name,
        allowed="a field name"),
    Key("id", "string", "field of the event id (joins a label to its prediction)",
        default="id", check=_field_name, allowed="a field name"),
    Key("weight", "string", "field of the event weight (absent field: weight 1)",
        default="weight", check=_field_name, allowed="a field name"),
    Key("require_ts", "bool", "a row without an event time is bad input",
        default={"replay": True, "run": True, "spark": True},
        default_text="true (serve: not stamp_arrival_time)", check=_bool,
        allowed="true, false"),
    Key("max_future", "number", "seconds an event time may be ahead of the wall clock "
        "(0: no limit); a later one is a bad row", default=DEFAULT_MAX_FUTURE,
        check=_max_future, allowed=">= 0"),
    Key("format", "string", "format of the log (serve and Spark read no file: accepted "
        "and ignored)", default=None, default_text="from the file extension",
        check=_format, allowed="jsonl, csv, parquet (or a registered reader)"),
    Key("label_ttl", "number", "delayed labels: seconds of event time a prediction waits "
        "for its label, joined by id; later ones are expired and counted", default=None,
        default_text="none (labels in the rows)", check=_label_ttl, allowed="> 0",
        edges=_DELAYED, refused={"spark": _NO_DELAYED_SPARK}),
    Key("labels", "string", "delayed labels: label rows in a second file (relative to the "
        "config file); needs label_ttl", default=None,
        default_text="none (label rows in the log)", check=_path, allowed="a file path",
        edges=_FILES,
        refused={"serve": "serve takes labels on POST /labels, not from a file",
                 "spark": _NO_DELAYED_SPARK}),
    Key("on_duplicate", "string", "delayed labels: a second prediction with an id still "
        "waiting; needs label_ttl", default={"replay": "error", "run": "error",
                                             "serve": "keep_first"},
        default_text="error (serve: keep_first)", check=_on_duplicate,
        allowed="error, keep_first, keep_last (serve: keep_first, keep_last)",
        edges=_DELAYED, refused={"spark": _NO_DELAYED_SPARK}),
    Key("max_line_bytes", "integer", "bytes of one line (CSV: one record) of a log; a "
        "longer one is a bad row, read without being held in memory",
        default=MAX_LINE_BYTES, check=_int_min(1), allowed=">= 1", edges=_FILES,
        refused={"serve": "the service bounds request bodies with its [serve] limits",
                 "spark": _SPARK_READS}),
    Key("max_expansion", "number", "a compressed log may expand at most this many times "
        "its compressed size (a compression bomb otherwise; 0: no limit)",
        default=MAX_EXPANSION, check=_real_min(0), allowed=">= 0", edges=_FILES,
        refused={"serve": "the service reads no file", "spark": _SPARK_READS}),
    Key("allow_empty", "bool", "a log without events (empty, or every row rejected) "
        "is accepted instead of being an error", default=False, check=_bool,
        allowed="true, false", edges=_FILES,
        refused={"serve": "the service reads no file", "spark": _SPARK_READS}),
    Key("stamp_arrival_time", "bool", "an event without ts gets its time of arrival "
        "(the wall clock then moves the stream's clock)", default=False, check=_bool,
        allowed="true, false", edges=("serve",),
        refused={e: "only the service has a time of arrival" for e in ("replay", "run",
                                                                         "spark")}),
))

MONITOR = Section("monitor", "What is measured; the metrics, drift and rules tables are "
                  "built by streameval.config.", (
    Key("every", "integer", "evaluate every N events (0: never by count)", default=1000,
        check=_int_min(0), allowed=">= 0"),
    Key("every_seconds", "number", "evaluate every period of event time (aligned to "
        "multiples)", default=None, default_text="none", check=_real_min(0, open_low=True),
        allowed="> 0"),
    Key("group_by", "string or array", "segment field(s): metrics and alerts per segment",
        default=None, default_text="none (one stream)", check=_group_by,
        allowed="a field name or a list of distinct names"),
    Key("overall", "bool", "with group_by, also the whole stream (segment null)",
        default=True, check=_bool, allowed="true, false"),
    Key("overall_rules", "bool", "with group_by, evaluate the rules on the whole stream "
        "as well as on each segment", default=None,
        default_text="true; false for the default rules with group_by", check=_bool,
        allowed="true, false"),
    Key("overall_drift", "bool", "with group_by, run the drift tests on the whole stream "
        "as well as on each segment", default=None,
        default_text="true; false for the default monitor with group_by while its rules "
        "watch the segments only", check=_bool, allowed="true, false"),
    Key("threshold", "number", "default threshold of the threshold metrics "
        "(score >= threshold is positive)", default=0.5, check=_threshold,
        allowed="a finite number"),
    Key("size", "integer", "size of the default sliding windows and drift windows, in "
        "events", default=10_000, check=check_size, allowed=">= 1"),
    Key("window", "integer", "the older name of size (not both)", default=None,
        default_text="size", check=check_size, allowed=">= 1"),
    Key("pos_label", "any", "the positive label", default=True, allowed="a label value"),
    Key("neg_label", "any", "the negative label (with a pos_label other than true/1)",
        default=None, default_text="none (not the positive label)", allowed="a label value"),
    Key("metrics", "table", "name = kind, or name = { metric = kind, ...params } "
        "(streameval.config)", default=None, default_text="the default metrics",
        allowed="a table of metrics"),
    Key("drift", "table", "name = { drift test } (streameval.config)", default=None,
        default_text="the default detectors (without metrics)",
        allowed="a table of drift tests"),
    Key("rules", "array", "alert rules: tables or strings (streameval.config)",
        default=None, default_text="the default rules (without metrics and drift)",
        allowed="an array of rules"),
    Key("calibration", "table", "refit an isotonic calibration map of the label-free "
        "estimates every refit_every labels, on the last window labels joined "
        "(streameval.config)", default=None, default_text="none (scores are probabilities)",
        allowed="a table with refit_every, window"),
    Key("max_segments", "integer", "segments with their own metrics; further segment "
        "values count under \"__other__\"", default=1000, check=_int_min(1),
        allowed=">= 1"),
))

_SERVE = ("serve",)

SERVE = Section("serve", "The HTTP service's options (command-line options override "
                "them); the other edges leave this table aside.", (
    Key("webhooks", "array", "URLs that receive each alert transition as a JSON POST",
        default=[], check=_urls, allowed="a list of URLs", edges=_SERVE),
    Key("checkpoint_events", "integer", "checkpoint every N events (0: never by count)",
        default=100_000, check=_int_min(0), allowed=">= 0", edges=_SERVE),
    Key("checkpoint_seconds", "number", "checkpoint every S seconds (0: never by time)",
        default=60.0, check=_real_min(0), allowed=">= 0", edges=_SERVE),
    Key("max_body", "integer", "largest request body in bytes (larger: 413)",
        default=16 * 1024 * 1024, check=_count_int, allowed=">= 1", edges=_SERVE),
    Key("public_reads", "bool", "with a token: /metrics, /snapshot and /alerts readable "
        "without it", default=False, check=_bool, allowed="true, false", edges=_SERVE),
    Key("header_timeout", "number", "seconds to send a request's headers",
        default=10.0, check=_seconds_positive, allowed="> 0", edges=_SERVE),
    Key("body_timeout", "number", "seconds to send a request's body (408 after)",
        default=30.0, check=_seconds_positive, allowed="> 0", edges=_SERVE),
    Key("max_connections", "integer", "open connections served at once (further: 503)",
        default=1000, check=_count_int, allowed=">= 1", edges=_SERVE),
    Key("protect_reads", "bool", "deprecated (reads need the token by default); "
        "false is refused", default=None, default_text="none", check=_bool,
        allowed="true", edges=_SERVE),
    Key("allowed_hosts", "array", "more Host header names answered (on loopback only "
        "localhost, 127.0.0.1 and ::1)", default=[], check=_hosts,
        allowed="a list of host names", edges=_SERVE),
    Key("max_pending", "integer", "delayed labels: predictions waiting at most",
        default=1_000_000, check=_int_min(1), allowed=">= 1", edges=_SERVE),
    Key("idempotency_window", "number", "seconds an Idempotency-Key is remembered",
        default=86_400, check=_real_min(0, open_low=True), allowed="> 0", edges=_SERVE),
    Key("max_idempotency_keys", "integer", "Idempotency-Keys remembered at most",
        default=1_000_000, check=_int_min(1), allowed=">= 1", edges=_SERVE),
    Key("alertmanager", "array", "Alertmanager base URLs (API v2) that receive firing and "
        "resolved alerts", default=[], check=_urls, allowed="a list of URLs", edges=_SERVE),
    Key("alertmanager_resend", "number", "seconds between resends of a firing alert to "
        "Alertmanager", default=60, check=_seconds_positive, allowed="> 0", edges=_SERVE),
    Key("webhook_format", "string", "body of the webhooks", default="streameval",
        check=_webhook_format, allowed="streameval, alertmanager", edges=_SERVE),
    Key("model", "string", "alert label model", default=None, default_text="none",
        check=_nonempty_str, allowed="a non-empty string", edges=_SERVE),
    Key("job", "string", "alert label job", default="streameval", check=_nonempty_str,
        allowed="a non-empty string", edges=_SERVE),
    Key("labels", "table", "static alert labels", default={}, check=_str_table,
        allowed="a table of strings", edges=_SERVE),
    Key("runbook_url", "string", "alert annotation runbook_url", default=None,
        default_text="none", check=_nonempty_str, allowed="a non-empty string",
        edges=_SERVE),
    Key("external_url", "string", "the service's address, for the alerts' generatorURL",
        default=None, default_text="the address bound", check=_nonempty_str,
        allowed="a non-empty string", edges=_SERVE),
    Key("max_id_bytes", "integer", "UTF-8 bytes of an event's id at most (a longer one: "
        "400 naming the event); UUIDs take 36, composite keys a few hundred",
        default=1024, check=_count_int, allowed=">= 1", edges=_SERVE),
    Key("max_segment_bytes", "integer", "UTF-8 bytes of a segment value at most (a longer "
        "one: 400); each value is a label of every series of its segment in /metrics",
        default=256, check=_count_int, allowed=">= 1", edges=_SERVE),
    Key("max_label_bytes", "integer", "UTF-8 bytes of a label string at most (a longer "
        "one: 400)", default=256, check=_count_int, allowed=">= 1", edges=_SERVE),
    Key("refusal_penalty", "number", "a client host whose body over 256 KiB was refused "
        "after d seconds of work waits this many times d before its next large body is "
        "read (0: never); refused large bodies then take at most 1 / (1 + it) of the "
        "service's time", default=9.0, check=_real_min(0), allowed=">= 0", edges=_SERVE),
    Key("accept_loss", "bool", "start over a damaged state directory from what can be "
        "read, counting and exporting what is lost (default: refuse to start and say what "
        "is at risk)", default=False, check=_bool, allowed="true, false", edges=_SERVE),
), edges=_SERVE)

#: Every section of the run configuration, by table name.
SECTIONS = {s.name: s for s in (MONITOR, INPUT, SERVE)}
#: The tables a config file may hold.
CONFIG_TABLES = ("monitor", "input", "serve")
#: The ``[input]`` keys that name event fields.
FIELD_KEYS = ("ts", "label", "score", "id", "weight")


_RUN = ("run",)
_RIVER = ("river_dataset", "river_generator")

#: The tables of a scenario file (``streameval run``) besides its config tables:
#: what the scenario is, how its stream is made, the alerts it expects.
SCENARIO_SECTIONS = {s.name: s for s in (
    Section("scenario", "What the scenario shows.", (
        Key("name", "string", "the scenario's name", default_text="the file's stem", edges=_RUN),
        Key("description", "string", "what it shows", default="", edges=_RUN),
        Key("strict", "bool", "a firing no [[expect]] covers is a failure", default=True,
            allowed="true, false", edges=_RUN),
    ), edges=_RUN),
    Section("stream", "How the events are made (deterministic by seed).", (
        Key("kind", "string", "how the stream is made", default_text="required",
            allowed="river_dataset, river_generator, stationary, log", edges=_RUN),
        Key("seed", "integer", "seed of every random draw", default=0, allowed=">= 0",
            edges=_RUN),
        Key("start", "number", "epoch seconds of the first event", default=1_700_000_000,
            edges=_RUN),
        Key("interval", "number", "seconds between events", default=1, allowed=">= 0",
            edges=_RUN),
        Key("decimals", "integer", "round scores (logged scores have ties)",
            default_text="not rounded", allowed="0 to 15", edges=_RUN),
        Key("delay", "table", "delayed labels: min, max seconds, missing share "
            "([stream.delay]; not for a log)", default_text="none", edges=_RUN),
        Key("n", "integer", "number of events", default_text="required (river_dataset: "
            "the dataset's)", allowed=">= 1", edges=_RUN, kinds=_RIVER + ("stationary",)),
        Key("dataset", "string", "a dataset that ships inside river", edges=_RUN,
            default_text="required", kinds=("river_dataset",)),
        Key("generator", "string", "a river.datasets.synth generator", edges=_RUN,
            default_text="required", kinds=("river_generator",)),
        Key("params", "table", "the generator's parameters", default={}, edges=_RUN,
            kinds=("river_generator",)),
        Key("drift", "table", "a planted concept drift: generator, params, position, width, "
            "seed ([stream.drift])", default_text="none", edges=_RUN,
            kinds=("river_generator",)),
        Key("model", "string", "the river model scoring the events prequentially",
            default_text="required", edges=_RUN, kinds=_RIVER),
        Key("model_params", "table", "the model's parameters", default={}, edges=_RUN,
            kinds=_RIVER),
        Key("preprocessing", "array", "river preprocessing steps before the model",
            default=[], edges=_RUN, kinds=_RIVER),
        Key("learn_until", "integer", "freeze the model after N events", default_text="never",
            allowed=">= 0", edges=_RUN, kinds=_RIVER),
        Key("prevalence", "number", "share of positive labels", default=0.3,
            allowed="0 to 1", edges=_RUN, kinds=("stationary",)),
        Key("separation", "number", "how far apart the classes' scores are", default=2.0,
            edges=_RUN, kinds=("stationary",)),
        Key("segments", "array", "segment values drawn uniformly", default_text="none",
            edges=_RUN, kinds=("stationary",)),
        Key("path", "string", "the bundled log, relative to the scenario file",
            default_text="required", edges=_RUN, kinds=("log",)),
    ), edges=_RUN),
    Section("stream.drift", "A planted concept drift (river's ConceptDriftStream).", (
        Key("generator", "string", "the generator after the drift", edges=_RUN,
            default_text="the stream's"),
        Key("params", "table", "its parameters", default={}, edges=_RUN),
        Key("position", "integer", "event of the drift's centre", default_text="required",
            allowed=">= 0", edges=_RUN),
        Key("width", "integer", "events over which the drift happens", default=1000,
            allowed=">= 1", edges=_RUN),
        Key("seed", "integer", "seed of the drift's draws", default_text="the stream's",
            edges=_RUN),
    ), edges=_RUN),
    Section("stream.delay", "Delayed labels: a prediction row per event and a label row "
            "later.", (
        Key("min", "number", "least delay of a label, seconds", default=0, allowed=">= 0",
            edges=_RUN),
        Key("max", "number", "largest delay of a label, seconds", default_text="min",
            allowed=">= min", edges=_RUN),
        Key("missing", "number", "share of predictions never labelled", default=0,
            allowed="0 to 1", edges=_RUN),
    ), edges=_RUN),
    Section("expect", "The alerts that must happen ([[expect]], one table each).", (
        Key("rule", "string", "the rule's name", default_text="required", edges=_RUN),
        Key("state", "string", "the transition expected", default="firing",
            allowed="pending, firing, resolved", edges=_RUN),
        Key("n_min", "integer", "the transition's n at least", default=0, allowed=">= 0",
            edges=_RUN),
        Key("n_max", "integer", "the transition's n at most", default_text="the end",
            allowed=">= n_min", edges=_RUN),
        Key("segment", "any", "the transition's segment", default_text="any", edges=_RUN),
        Key("none", "bool", "no alert may fire (no other key, no other [[expect]])",
            default=False, edges=_RUN),
    ), edges=_RUN),
)}


def keys(section, edge=None):
    """The key names of ``section`` (those ``edge`` takes, when given); scenario
    tables (:data:`SCENARIO_SECTIONS`) too."""
    sec = SECTIONS.get(section) or SCENARIO_SECTIONS[section]
    return sec.names(edge)


def stream_keys(kind):
    """The ``[stream]`` keys of a scenario of stream kind ``kind``."""
    return [k.name for k in SCENARIO_SECTIONS["stream"].keys if not k.kinds or kind in k.kinds]


# ------------------------------------------------------------------ errors


def _edge(edge):
    if edge not in EDGES:
        raise ValueError(f"edge = {edge!r}: expected one of {', '.join(EDGES)}")
    return edge


def refuse(section, key, edge, value=None, *, reason=None, supported=None):
    """The ``ValueError`` of a key (or, with ``value``, a value) that ``edge`` does not
    take, naming the edges that take it (``supported``: default, the key's edges)."""
    k = SECTIONS[section].key(key)
    where = f"{section}.{key}" + ("" if value is None else f" = {value!r}")
    reason = reason if reason is not None else k.refused.get(edge)
    return ValueError(f"{where}: not supported by {edge} (supported by "
                      f"{', '.join(supported or k.edges)})" + (f": {reason}" if reason else ""))


def unknown_key(section, key, edge=None):
    """The ``ValueError`` of a key the schema does not have."""
    allowed = sorted(keys(section, edge))
    return ValueError(f"{section}: unknown key {key!r}; expected one of {allowed}")


def _check_keys(table, section, edge):
    """Refuse the first key (in sorted order) not in the schema, then the first one
    ``edge`` does not take."""
    sec = SECTIONS[section]
    known = set(sec.names())
    for key in sorted(table, key=str):
        if key not in known:
            raise unknown_key(section, key, edge)
    if edge is not None:
        for k in sec.keys:
            if k.name in table and edge not in k.edges:
                raise refuse(section, k.name, edge)


# ------------------------------------------------------------------ reading


def load_toml(path):
    """Read a TOML file; ValueError naming the file and the line of a syntax error.

    >>> load_toml("/nonexistent.toml")
    Traceback (most recent call last):
    ...
    ValueError: /nonexistent.toml: no such file
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None


def load_document(config, config_dir=None):
    """``(document, directory for relative paths)`` from a TOML path, a dict or None
    (an empty document: the default monitor)."""
    if config is None:
        return {}, config_dir
    if isinstance(config, dict):
        return config, config_dir
    if not isinstance(config, (str, os.PathLike)):
        raise ValueError(f"config must be a TOML path, a dict or None, got "
                         f"{type(config).__name__}")
    return load_toml(config), Path(config).resolve().parent


def monitor_table(doc):
    """The ``[monitor]`` table of a parsed config file (or the document itself)."""
    if not isinstance(doc, dict):
        raise ValueError(f"monitor config must be a table, got {type(doc).__name__}")
    if "monitor" in doc:
        table = doc["monitor"]
        if not isinstance(table, dict):
            raise ValueError(f"monitor = {table!r:.80}: must be a table ([monitor])")
        return table
    return doc


def split(doc):
    """``(monitor table or None, input table, serve table)`` of a parsed config file.

    A document with any of :data:`CONFIG_TABLES` may hold no other table; a document
    with none of them is a bare ``[monitor]`` table (None when empty: the default
    monitor).
    """
    if not isinstance(doc, dict):
        raise ValueError(f"config must be a table, got {type(doc).__name__}")
    if any(k in doc for k in CONFIG_TABLES):
        unknown = sorted(set(doc) - set(CONFIG_TABLES))
        if unknown:
            raise ValueError(f"config: unknown table(s) {', '.join(unknown)}; "
                             f"expected {', '.join(f'[{t}]' for t in CONFIG_TABLES)}")
        table = doc.get("monitor")
    else:
        table = doc or None
    tables = []
    for name in ("input", "serve"):
        t = doc.get(name, {})
        if not isinstance(t, dict):
            raise ValueError(f"{name} = {t!r:.80}: must be a table ([{name}])")
        tables.append(t)
    return table, tables[0], tables[1]


# ------------------------------------------------------------------ sections


def label_ttl(inp):
    """``[input] label_ttl`` as a float, or None when the table has none.

    >>> label_ttl({"label_ttl": 3600}), label_ttl({})
    (3600.0, None)
    """
    if "label_ttl" not in inp:
        return None
    return _label_ttl(inp["label_ttl"], "input.label_ttl")


def check_input(inp, edge):
    """The ``[input]`` table checked for ``edge``: every key the edge takes, with its
    value or the edge's default (``max_future``: None for no limit; ``label_ttl``
    a float or None). ``ValueError`` naming the first bad key."""
    _edge(edge)
    _check_keys(inp, "input", edge)
    out = {}
    for k in INPUT.keys:
        if edge not in k.edges:
            continue
        if k.name in inp:
            out[k.name] = k.check(inp[k.name], f"input.{k.name}")
        elif k.name not in FIELD_KEYS:
            out[k.name] = k.default_for(edge)
    if edge == "serve":
        stamp = out["stamp_arrival_time"]
        if stamp and inp.get("require_ts") is True:
            raise ValueError("input.require_ts = true and input.stamp_arrival_time = true "
                             "contradict each other")
        if inp.get("require_ts") is False and not stamp:
            raise ValueError("input.require_ts = false: the service stamps events without ts "
                             "only with input.stamp_arrival_time = true (the wall clock then "
                             "moves the stream's clock)")
        out["require_ts"] = not stamp
        if out["on_duplicate"] == "error":
            raise refuse("input", "on_duplicate", "serve", "error", supported=_FILES,
                         reason="a batch is durable before its predictions are joined, so "
                                "it cannot be refused for a duplicate id (duplicates are "
                                "counted); use keep_first or keep_last")
    if "label_ttl" in out and out["label_ttl"] is None:
        need = [k for k in ("labels", "on_duplicate") if k in inp]
        if need:
            names = " and ".join(f"input.{k}" for k in need)
            raise ValueError(f"{names} need{'s' if len(need) == 1 else ''} input.label_ttl "
                             "(delayed labels)")
    return out


def check_serve(table):
    """The ``[serve]`` table checked: the keys present, each normalised (defaults are
    the service's, applied where the value is used). ``ValueError`` naming the first
    bad key."""
    _check_keys(table, "serve", "serve")
    return {k.name: k.check(table[k.name], f"serve.{k.name}")
            for k in SERVE.keys if k.name in table}


def monitor_options(table, where="monitor"):
    """The ``[monitor]`` table's own keys checked: ``{every, threshold, size,
    pos_label, neg_label}`` with their defaults, and ``every_seconds``, ``group_by``,
    ``overall``, ``overall_rules``, ``overall_drift``, ``max_segments`` when given. The ``metrics``, ``drift`` and ``rules``
    tables are left to :func:`streameval.config.build`. ``ValueError`` naming the first
    bad key by its path (``where``)."""
    if not isinstance(table, dict):
        raise ValueError(f"{where} must be a table, got {type(table).__name__}")
    names = MONITOR.names()
    for key in sorted(table, key=str):
        if key not in names:
            raise ValueError(f"{where}: unknown key {key!r}; expected one of {sorted(names)}")
    out = {}
    for name in ("every", "every_seconds", "group_by", "overall", "overall_rules",
                 "overall_drift", "max_segments", "threshold"):
        k = MONITOR.key(name)
        if name in table and not (name == "group_by" and table[name] is None):
            out[name] = k.check(table[name], f"{where}.{name}")
        elif name in ("every", "threshold"):
            out[name] = k.check(k.default, f"{where}.{name}")
    if "size" in table and "window" in table:
        raise ValueError(f"{where}: give size (the default windows' size) or its alias "
                         "window, not both")
    key = "size" if "size" in table else "window"
    out["size"] = check_size(table.get(key, MONITOR.key("size").default), f"{where}.{key}")
    out["pos_label"] = table.get("pos_label", True)
    out["neg_label"] = table.get("neg_label")
    return out


def field_map(inp, monitor, *, require_ts=True):
    """The :class:`~streameval.events.FieldMap` of an ``[input]`` table for ``monitor``
    (any object with ``group_by``, ``pos_label`` and ``neg_label``).

    Field names come from ``inp`` (:data:`FIELD_KEYS`), the segment field is the
    monitor's ``group_by`` and the labels its ``pos_label``/``neg_label``;
    ``require_ts`` is the default when ``inp`` does not set it; ``max_future``
    (seconds ahead of the wall clock an event time may be; ``0``: no limit) defaults
    to :data:`streameval.events.DEFAULT_MAX_FUTURE`.
    """
    max_future = DEFAULT_MAX_FUTURE
    if "max_future" in inp:
        max_future = _max_future(inp["max_future"], "input.max_future")
    names = {k: _field_name(inp[k], f"input.{k}") for k in FIELD_KEYS if k in inp}
    require_ts = _bool(inp.get("require_ts", require_ts), "input.require_ts")
    return FieldMap(**names, segment=monitor.group_by, pos_label=monitor.pos_label,
                    neg_label=monitor.neg_label, require_ts=require_ts, max_future=max_future)


@dataclasses.dataclass
class RunConfig:
    """A config file parsed for one edge.

    ``doc`` is the document as read; ``monitor`` its ``[monitor]`` table (None: the
    default monitor); ``input`` the checked ``[input]`` values for the edge (with its
    defaults; field names only where given); ``serve`` the checked ``[serve]`` values
    (given keys only; empty for other edges); ``base_dir`` the directory relative
    paths start from.
    """

    edge: str
    doc: dict
    monitor: dict | None
    input: dict
    serve: dict
    base_dir: Path | None = None

    def fields(self, monitor):
        """The :class:`~streameval.events.FieldMap` for ``monitor`` (its ``group_by`` and
        labels) with this config's field names, ``require_ts`` and ``max_future``."""
        names = {k: self.input[k] for k in FIELD_KEYS if k in self.input}
        return FieldMap(**names, segment=monitor.group_by, pos_label=monitor.pos_label,
                        neg_label=monitor.neg_label, require_ts=self.input["require_ts"],
                        max_future=self.input["max_future"])

    def labels_path(self):
        """``[input] labels`` as a path (relative to :attr:`base_dir`), or None."""
        labels = self.input.get("labels")
        if labels is None:
            return None
        p = Path(labels)
        if not p.is_absolute() and self.base_dir is not None:
            p = self.base_dir / p
        return p


def parse(config, edge, config_dir=None):
    """Read and check a config for ``edge`` (one of :data:`EDGES`): a TOML path, a
    parsed dict or None (the default monitor). Returns a :class:`RunConfig`; raises
    ``ValueError`` naming the bad table or key. The ``[monitor]`` table's own keys are
    checked when the Monitor is built (:func:`streameval.config.build`)."""
    _edge(edge)
    doc, base_dir = load_document(config, config_dir)
    table, inp, serve = split(doc)
    checked = check_input(inp, edge)
    return RunConfig(edge, doc, table, checked,
                     check_serve(serve) if edge == "serve" else {}, base_dir)


# ------------------------------------------------------------------ reference


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _default_text(k):
    if k.default_text:
        return k.default_text
    d = k.default
    if isinstance(d, dict) and d and all(e in EDGES for e in d):
        d = next(iter(d.values()))
    if d is None:
        return "none"
    if isinstance(d, bool):
        return "true" if d else "false"
    if isinstance(d, str):
        return f'"{d}"'
    if isinstance(d, (list, dict)) and not d:
        return "[]" if isinstance(d, list) else "{}"
    return f"{d:_}" if isinstance(d, int) else f"{d:g}" if isinstance(d, float) else str(d)


def reference_markdown():
    """The configuration reference: one Markdown table per section (key, type,
    default, allowed values, edges, doc), generated from :data:`SECTIONS`."""
    out = ["# Configuration reference", "",
           "A config file (TOML) holds the tables below; a file with none of them is read "
           "as a bare `[monitor]` table. Edges: `replay` (`streameval replay`), `run` "
           "(`streameval run`, a scenario's config), `serve` (`streameval serve`), `spark` "
           "(`replay --engine spark` and the streaming sink). A key refused by an edge is "
           "refused with the edges that take it.", ""]
    for sec in SECTIONS.values():
        out += _table(sec, "edges", lambda k: ", ".join(k.edges))
    out += ["# Scenario files", "",
            "A scenario file (`streameval run`) holds the config tables above and these; "
            "`[stream]` keys apply to the stream kinds listed.", ""]
    for sec in SCENARIO_SECTIONS.values():
        out += _table(sec, "stream kinds", lambda k: ", ".join(k.kinds) or "all")
    return "\n".join(out)


def _table(sec, last, column):
    brackets = "[[{}]]" if sec.name == "expect" else "[{}]"
    out = [f"## {brackets.format(sec.name)}", "", sec.doc, "",
           f"| key | type | default | allowed values | {last} | description |",
           "| --- | --- | --- | --- | --- | --- |"]
    for k in sec.keys:
        out.append("| " + " | ".join(_cell(c) for c in (
            f"`{k.name}`", k.type, _default_text(k), k.allowed or "any", column(k),
            k.doc)) + " |")
    out.append("")
    return out
