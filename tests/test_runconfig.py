"""The run configuration's one schema (streameval.runconfig), seen through every edge.

Each key of the schema is fed through each edge's own loader (``replay`` and ``run``:
:func:`streameval.replay.load_replay_config`; ``serve``:
:func:`streameval.service.load_config`; ``spark``:
:meth:`streameval.spark.streaming.MonitorSink.from_config`): an edge takes exactly the
keys the schema says it takes, gives a key the same value, refuses a bad value with
the same message, and refuses a key it does not take naming the key, the edge and the
edges that take it. Oracles: hand-written expected values and messages, and the
constants of the modules that use the values.
"""

from __future__ import annotations

import math

import pytest

from streameval import runconfig
from streameval.config import DEFAULT_EVERY, DEFAULT_SIZE, DEFAULT_THRESHOLD, build
from streameval.events import DEFAULT_MAX_FUTURE
from streameval.monitor import DEFAULT_MAX_SEGMENTS, Monitor
from streameval.replay import load_replay_config

#: a valid value of every key, and the keys it needs beside it
SAMPLES = {
    ("input", "ts"): ("t", {}),
    ("input", "label"): ("y", {}),
    ("input", "score"): ("p", {}),
    ("input", "id"): ("key", {}),
    ("input", "weight"): ("w", {}),
    ("input", "require_ts"): (True, {}),
    ("input", "max_future"): (60, {}),
    ("input", "format"): ("jsonl", {}),
    ("input", "label_ttl"): (30, {}),
    ("input", "labels"): ("labels.jsonl", {"label_ttl": 30}),
    ("input", "on_duplicate"): ("keep_last", {"label_ttl": 30}),
    ("input", "stamp_arrival_time"): (True, {}),
    ("input", "max_line_bytes"): (4096, {}),
    ("input", "max_expansion"): (20, {}),
    ("input", "allow_empty"): (True, {}),
}


def load(edge, doc, tmp_path):
    """The edge's own loader on ``doc``: ``(FieldMap, extra)`` where ``extra`` holds the
    delayed-label or service options it derived."""
    if edge in ("replay", "run"):
        _, fields, fmt, delayed = load_replay_config(doc, tmp_path, edge=edge)
        return fields, {"format": fmt, "delayed": delayed}
    if edge == "serve":
        from streameval.service import load_config

        _, fields, table, _ = load_config(doc)
        return fields, table
    from streameval.spark.streaming import MonitorSink

    sink = MonitorSink.from_config(doc, tmp_path / "sink.ckpt")
    sink.close()
    return sink.fields, {}


def test_every_input_key_is_in_the_schema_and_sampled():
    assert set(SAMPLES) == {("input", k) for k in runconfig.keys("input")}


@pytest.mark.parametrize("edge", runconfig.EDGES)
@pytest.mark.parametrize("key", sorted(runconfig.keys("input")))
def test_each_edge_takes_exactly_the_keys_the_schema_gives_it(edge, key, tmp_path):
    spec = runconfig.SECTIONS["input"].key(key)
    value, needs = SAMPLES[("input", key)]
    doc = {"input": {key: value, **needs}}
    if edge not in spec.edges:
        with pytest.raises(ValueError) as e:
            load(edge, {"input": {key: value}}, tmp_path)
        msg = str(e.value)
        assert msg.startswith(f"input.{key}: not supported by {edge} (supported by "
                              f"{', '.join(spec.edges)})"), msg
        return
    if any(edge not in runconfig.SECTIONS["input"].key(k).edges for k in needs):
        pytest.skip(f"{key} needs keys {edge} does not take")
    fields, extra = load(edge, doc, tmp_path)
    if key in runconfig.FIELD_KEYS:
        assert getattr(fields, key) == value
    elif key == "require_ts":
        assert fields.require_ts is True
    elif key == "max_future":
        # serve checks event times against its own clock: the engine gets the value
        assert (extra["max_future"] if edge == "serve" else fields.max_future) == 60.0
    elif key == "format":
        assert extra.get("format") == ("jsonl" if edge in ("replay", "run") else None)
    elif key == "label_ttl":
        got = extra["label_ttl"] if edge == "serve" else extra["delayed"]["label_ttl"]
        assert got == 30.0 and isinstance(got, float)
    elif key == "labels":
        assert extra["delayed"]["labels_path"] == tmp_path / "labels.jsonl"
    elif key == "on_duplicate":
        got = extra["on_duplicate"] if edge == "serve" else extra["delayed"]["on_duplicate"]
        assert got == "keep_last"
    elif key == "stamp_arrival_time":
        assert extra["stamp_arrival_time"] is True
    elif key in ("max_line_bytes", "max_expansion", "allow_empty"):  # the file readers'
        assert runconfig.parse(doc, edge, tmp_path).input[key] == value


@pytest.mark.parametrize("edge", runconfig.EDGES)
def test_an_unknown_key_is_refused_alike_listing_what_the_edge_takes(edge, tmp_path):
    with pytest.raises(ValueError) as e:
        load(edge, {"input": {"scroe": "p"}}, tmp_path)
    expected = {
        "replay": ['allow_empty', 'format', 'id', 'label', 'label_ttl', 'labels',
                   'max_expansion', 'max_future', 'max_line_bytes', 'on_duplicate',
                   'require_ts', 'score', 'ts', 'weight'],
        "serve": ['format', 'id', 'label', 'label_ttl', 'max_future', 'on_duplicate',
                  'require_ts', 'score', 'stamp_arrival_time', 'ts', 'weight'],
        "spark": ['format', 'id', 'label', 'max_future', 'require_ts', 'score', 'ts',
                  'weight'],
    }
    expected["run"] = expected["replay"]
    assert str(e.value) == f"input: unknown key 'scroe'; expected one of {expected[edge]}"


BAD = [
    ({"score": ""}, "input.score = '': must be a field name"),
    ({"ts": 3}, "input.ts = 3: must be a field name"),
    ({"require_ts": "yes"}, "input.require_ts = 'yes': must be true or false"),
    ({"max_future": -1}, "input.max_future = -1: must be a number >= 0"),
    ({"format": 3}, 'input.format = 3: must be a format name such as "jsonl", "csv" or '
                    '"parquet"'),
]


@pytest.mark.parametrize("inp,message", BAD)
@pytest.mark.parametrize("edge", runconfig.EDGES)
def test_a_bad_value_gives_the_same_message_in_every_edge(edge, inp, message, tmp_path):
    with pytest.raises(ValueError) as e:
        load(edge, {"input": inp}, tmp_path)
    assert str(e.value) == message


@pytest.mark.parametrize("edge", ["replay", "run", "serve"])
@pytest.mark.parametrize("ttl,message", [
    (0, "input.label_ttl = 0: must be a number of seconds > 0"),
    ("1h", "input.label_ttl = '1h': must be a number of seconds > 0"),
    (True, "input.label_ttl = True: must be a number of seconds > 0"),
])
def test_delayed_label_values_are_checked_alike(edge, ttl, message, tmp_path):
    with pytest.raises(ValueError) as e:
        load(edge, {"input": {"label_ttl": ttl}}, tmp_path)
    assert str(e.value) == message
    with pytest.raises(ValueError) as e:
        load(edge, {"input": {"on_duplicate": "keep_last"}}, tmp_path)
    assert str(e.value) == "input.on_duplicate needs input.label_ttl (delayed labels)"
    with pytest.raises(ValueError) as e:
        load(edge, {"input": {"label_ttl": 5, "on_duplicate": "drop"}}, tmp_path)
    assert str(e.value) == ("input.on_duplicate = 'drop': expected error, keep_first or "
                            "keep_last")


def test_on_duplicate_values_and_defaults_per_edge(tmp_path):
    ttl = {"input": {"label_ttl": 5}}
    # defaults: error where a log is replayed, keep_first in the service
    for edge in ("replay", "run"):
        assert load(edge, ttl, tmp_path)[1]["delayed"]["on_duplicate"] == "error"
        for mode in ("error", "keep_first", "keep_last"):
            doc = {"input": {"label_ttl": 5, "on_duplicate": mode}}
            assert load(edge, doc, tmp_path)[1]["delayed"]["on_duplicate"] == mode
    assert runconfig.parse(ttl, "serve").input["on_duplicate"] == "keep_first"
    for mode in ("keep_first", "keep_last"):
        assert load("serve", {"input": {"label_ttl": 5, "on_duplicate": mode}},
                    tmp_path)[1]["on_duplicate"] == mode
    with pytest.raises(ValueError) as e:
        load("serve", {"input": {"label_ttl": 5, "on_duplicate": "error"}}, tmp_path)
    assert str(e.value).startswith("input.on_duplicate = 'error': not supported by serve "
                                   "(supported by replay, run): a batch is durable")
    key = runconfig.SECTIONS["input"].key("on_duplicate")
    assert [key.default_for(e) for e in runconfig.EDGES] == ["error", "error", "keep_first",
                                                            None]


def test_the_same_fields_in_every_edge(tmp_path):
    doc = {"monitor": {"group_by": "country", "pos_label": "yes", "neg_label": "no",
                       "metrics": {"r": "recall"}},
           "input": {"ts": "t", "label": "y", "score": "p", "id": "k", "weight": "w",
                     "max_future": 0}}
    expected = dict(ts="t", label="y", score="p", id="k", weight="w", segment="country",
                    pos_label="yes", neg_label="no", require_ts=True, max_future=None)
    for edge in runconfig.EDGES:
        fields, _ = load(edge, doc, tmp_path)
        got = {k: getattr(fields, k) for k in expected}
        assert got == expected, edge


def test_serve_require_ts_follows_stamp_arrival_time(tmp_path):
    fields, extra = load("serve", {"input": {"stamp_arrival_time": True}}, tmp_path)
    assert fields.require_ts is False and extra["stamp_arrival_time"] is True
    fields, extra = load("serve", {}, tmp_path)
    assert fields.require_ts is True and extra["stamp_arrival_time"] is False
    with pytest.raises(ValueError, match="contradict each other"):
        load("serve", {"input": {"stamp_arrival_time": True, "require_ts": True}}, tmp_path)
    with pytest.raises(ValueError, match=r"^input.require_ts = false: the service stamps"):
        load("serve", {"input": {"require_ts": False}}, tmp_path)
    # where a log is read, a row without time may be allowed
    assert load("replay", {"input": {"require_ts": False}}, tmp_path)[0].require_ts is False


def test_the_serve_table_is_checked_by_the_schema(tmp_path):
    for table, message in [
        ({"webhooks": "http://x"}, "serve.webhooks = 'http://x': must be a list of URLs"),
        ({"max_body": 0}, "serve.max_body = 0: must be an int >= 1"),
        ({"header_timeout": "x"}, "serve.header_timeout = 'x': must be a number of seconds > 0"),
        ({"checkpoint_events": -1}, "serve.checkpoint_events = -1: must be an integer >= 0"),
        ({"max_pending": 0}, "serve.max_pending = 0: must be an integer >= 1"),
        ({"public_reads": "yes"}, "serve.public_reads = 'yes': must be true or false"),
        ({"labels": {"a": 1}}, "serve.labels = {'a': 1}: must be a table of strings"),
    ]:
        with pytest.raises(ValueError) as e:
            load("serve", {"serve": table}, tmp_path)
        assert str(e.value) == message
    with pytest.raises(ValueError) as e:
        load("serve", {"serve": {"max_bdoy": 5}}, tmp_path)
    assert str(e.value).startswith("serve: unknown key 'max_bdoy'; expected one of ['accept_loss', "
                                   "'alertmanager', 'alertmanager_resend', ")
    # replay and Spark leave [serve] aside: one file configures every edge
    doc = {"serve": {"max_body": 1024, "webhooks": ["http://x"]}}
    for edge in ("replay", "run", "spark"):
        load(edge, doc, tmp_path)
    assert load("serve", doc, tmp_path)[1]["max_body"] == 1024


def test_monitor_keys_parse_to_what_the_monitor_holds():
    opts = runconfig.monitor_options({"every": 0, "every_seconds": 60, "group_by": ["a", "b"],
                                      "overall": False, "max_segments": 7, "threshold": 0.3,
                                      "window": 50})
    assert opts == {"every": 0, "every_seconds": 60, "group_by": ["a", "b"], "overall": False,
                    "max_segments": 7, "threshold": 0.3, "size": 50, "pos_label": True,
                    "neg_label": None}
    mon = Monitor.from_config({"every": 0, "every_seconds": 60, "group_by": ["a", "b"],
                               "overall": False, "max_segments": 7, "threshold": 0.3,
                               "size": 50})
    assert (mon.every, mon.every_seconds, mon.group_by, mon.overall, mon.max_segments) == (
        0, 60, ["a", "b"], False, 7)
    assert "recall@50" in mon.metrics and mon.metrics["recall"].threshold == 0.3
    with pytest.raises(ValueError) as e:
        build({"evrey": 1})
    assert str(e.value) == ("monitor: unknown key 'evrey'; expected one of "
                            f"{sorted(runconfig.keys('monitor'))}")
    with pytest.raises(ValueError, match=r"^monitor.overall = 'no': must be true or false$"):
        build({"overall": "no"})


def test_schema_defaults_are_the_values_the_code_uses():
    from streameval import service
    from streameval.service import engine

    key = lambda s, k: runconfig.SECTIONS[s].key(k)  # noqa: E731
    assert key("monitor", "every").default == DEFAULT_EVERY == 1000
    assert key("monitor", "size").default == DEFAULT_SIZE
    assert key("monitor", "threshold").default == DEFAULT_THRESHOLD
    assert key("monitor", "max_segments").default == DEFAULT_MAX_SEGMENTS
    assert key("input", "max_future").default == DEFAULT_MAX_FUTURE
    assert key("serve", "checkpoint_events").default == service.DEFAULT_CHECKPOINT_EVENTS
    assert key("serve", "checkpoint_seconds").default == service.DEFAULT_CHECKPOINT_SECONDS
    assert key("serve", "max_pending").default == engine.DEFAULT_MAX_PENDING
    assert key("serve", "idempotency_window").default == engine.DEFAULT_IDEMPOTENCY_WINDOW
    assert key("serve", "max_idempotency_keys").default == engine.DEFAULT_MAX_IDEMPOTENCY_KEYS
    pytest.importorskip("starlette")
    from streameval.service import app

    assert key("serve", "max_body").default == app.DEFAULT_MAX_BODY
    assert key("serve", "header_timeout").default == app.DEFAULT_HEADER_TIMEOUT
    assert key("serve", "body_timeout").default == app.DEFAULT_BODY_TIMEOUT
    assert key("serve", "max_connections").default == app.DEFAULT_MAX_CONNECTIONS
    assert not math.isnan(key("serve", "alertmanager_resend").default)


def test_the_serve_module_reads_only_schema_keys():
    """Every literal key the service reads from its parsed ``[serve]`` table is declared."""
    import ast
    import inspect

    from streameval import service

    tree = ast.parse(inspect.getsource(service))
    read = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "table" and node.args
                and isinstance(node.args[0], ast.Constant)):
            read.add(node.args[0].value)
    engine_options = {"max_future", "stamp_arrival_time", "label_ttl", "on_duplicate"}
    assert read and read - engine_options <= set(runconfig.keys("serve")), read


def test_reference_markdown_has_one_row_per_key():
    md = runconfig.reference_markdown()
    rows = [line for line in md.splitlines() if line.startswith("| `")]
    n_keys = sum(len(s.keys) for s in runconfig.SECTIONS.values()) + sum(
        len(s.keys) for s in runconfig.SCENARIO_SECTIONS.values())
    assert len(rows) == n_keys
    for head in ("## [input]", "## [monitor]", "## [serve]", "## [stream]", "## [[expect]]"):
        assert head in md
    assert ("| `on_duplicate` | string | error (serve: keep_first) | error, keep_first, "
            "keep_last (serve: keep_first, keep_last) | replay, run, serve | delayed labels: "
            "a second prediction with an id still waiting; needs label_ttl |") in rows
    assert ("| `every` | integer | 1_000 | >= 0 | replay, run, serve, spark | evaluate every "
            "N events (0: never by count) |") in rows
    assert ("| `max_body` | integer | 16_777_216 | >= 1 | serve | largest request body in "
            "bytes (larger: 413) |") in rows
    assert ("| `learn_until` | integer | never | >= 0 | river_dataset, river_generator | "
            "freeze the model after N events |") in rows


def test_parse_refuses_an_unknown_edge_and_bad_documents(tmp_path):
    with pytest.raises(ValueError, match=r"^edge = 'cli': expected one of replay, run, "
                                         r"serve, spark$"):
        runconfig.parse({}, "cli")
    with pytest.raises(ValueError, match=r"^config must be a TOML path, a dict or None, "
                                         r"got int$"):
        runconfig.parse(3, "replay")
    with pytest.raises(ValueError, match=r"^serve = 3: must be a table \(\[serve\]\)$"):
        runconfig.parse({"serve": 3}, "replay")
    p = tmp_path / "c.toml"
    p.write_text('[input]\nlabels = "l.jsonl"\nlabel_ttl = 9\n')
    run = runconfig.parse(p, "replay")
    assert run.labels_path() == tmp_path.resolve() / "l.jsonl"
    assert run.monitor is None and run.input["label_ttl"] == 9.0
