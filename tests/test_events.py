"""Event validation: field mapping, labels, times, scores, weights, batches.

Oracles: values computed by hand or with the standard library (calendar.timegm
for times); the columnar batch path is checked row by row against the
single-row path on seeded random rows with planted faults.
"""

import calendar
import json
import math
import random

import numpy as np
import pytest

from streameval.events import (
    KIND_EVENT,
    KIND_LABEL,
    KIND_PREDICTION,
    MISSING,
    Event,
    EventBatch,
    EventError,
    FieldMap,
    build_batch,
    events_to_batch,
    parse_event,
    parse_time,
)

T0 = calendar.timegm((2024, 3, 5, 12, 30, 15))  # 2024-03-05T12:30:15Z


def ev(**kw):
    row = {"ts": 100, "label": 1, "score": 0.5}
    row.update(kw)
    return {k: v for k, v in row.items() if v is not MISSING}


# ------------------------------------------------------------------ FieldMap


def test_fieldmap_defaults_and_custom_names():
    fm = FieldMap()
    assert (fm.ts, fm.label, fm.score, fm.id, fm.weight, fm.segment) == (
        "ts", "label", "score", "id", "weight", None)
    assert fm.labels == (True, False) and fm.default_labels
    fm = FieldMap(ts="time", label="y", score="p", id="rid", weight=None, segment=["c", "d"])
    assert fm.segment == ("c", "d") and fm.segment_fields == ("c", "d")
    assert fm.columns() == ["time", "y", "p", "rid", "c", "d"]
    e = parse_event({"time": 5, "y": 0, "p": 0.25, "rid": "r1", "c": "fr", "d": 2}, fm)
    assert e == Event(False, 0.25, 5.0, 1.0, "r1", ("fr", 2))


def test_fieldmap_rejects_bad_configs():
    with pytest.raises(ValueError, match="needs neg_label"):
        FieldMap(pos_label="spam")
    with pytest.raises(ValueError, match="must differ"):
        FieldMap(pos_label="a", neg_label="a")
    with pytest.raises(ValueError, match="both name the field 'x'"):
        FieldMap(label="x", score="x")
    with pytest.raises(ValueError, match="non-empty string"):
        FieldMap(score="")


def test_fieldmap_dict_round_trip():
    fm = FieldMap(ts=None, segment=["a", "b"], pos_label="spam", neg_label="ham", require_ts=False)
    d = fm.to_dict()
    assert d["segment"] == ["a", "b"] and d["pos_label"] == "spam"
    assert FieldMap.from_dict(d) == fm
    with pytest.raises(ValueError, match="unknown FieldMap keys"):
        FieldMap.from_dict({"lable": "y"})


# ------------------------------------------------------------------ labels


@pytest.mark.parametrize("v,expected", [(True, True), (False, False), (1, True), (0, False),
                                        (1.0, True), (0.0, False), ("1", True), ("0", False),
                                        ("true", True), (" FALSE ", False), ("1.0", True),
                                        ("0e0", False)])
def test_default_labels_json(v, expected):
    """JSON values and strings follow the one rule: the strings a CSV cell may hold
    are accepted in JSON too."""
    assert parse_event(ev(label=v)).label is expected


@pytest.mark.parametrize("v", ["yes", "2", 2, -1, 0.5, "maybe", [1], {"a": 1}])
def test_default_labels_refuse_other_values(v):
    with pytest.raises(EventError) as ei:
        parse_event(ev(label=v), where="line 12")
    assert ei.value.reason == f"unknown label {v!r} (expected one of true, false, 1 or 0)"
    assert str(ei.value) == f"line 12: unknown label {v!r} (expected one of true, false, 1 or 0)"


def test_brief_example_label_message():
    with pytest.raises(EventError, match=r"^line 12: unknown label 'maybe' \(expected one of true, false, 1 or 0\)$"):
        parse_event(ev(label="maybe"), where="line 12")


def test_custom_labels_only_accept_configured_values():
    fm = FieldMap(pos_label="spam", neg_label="ham")
    assert parse_event(ev(label="spam"), fm).label is True
    assert parse_event(ev(label="ham"), fm).label is False
    for bad in ("SPAM", " Spam", True, 1, "eggs"):
        with pytest.raises(EventError, match=r"expected one of 'spam'/'ham'"):
            parse_event(ev(label=bad), fm)


def test_inverted_boolean_labels():
    # pos_label=False: False (or 0) is the positive class, as in the metrics' label_sets
    fm = FieldMap(pos_label=False)
    assert fm.labels == (False, True) and not fm.default_labels
    assert parse_event(ev(label=0), fm).label is True
    assert parse_event(ev(label=True), fm).label is False
    cols = {"ts": ["1"] * 4, "label": ["0", "TRUE", "1", "false"], "score": ["0.5"] * 4}
    batch, errors = build_batch(cols, np.arange(1, 5), fm, text=True)
    assert batch.label.tolist() == [True, False, False, True] and errors == []
    with pytest.raises(EventError, match=r"expected one of true, false, 1 or 0"):
        parse_event(ev(label="x"), fm)


def test_csv_label_cells():
    fm = FieldMap()
    cells = ["1", "0", "true", "FALSE", "True", " 1 ", "yes", "1.0"]
    cols = {"ts": ["1"] * len(cells), "label": cells, "score": ["0.5"] * len(cells)}
    batch, errors = build_batch(cols, np.arange(1, len(cells) + 1), fm, text=True)
    assert batch.label.tolist() == [True, False, True, False, True, True, True]
    assert errors == [(6, "unknown label 'yes' (expected one of true, false, 1 or 0)")]
    fm = FieldMap(pos_label="spam", neg_label="ham")
    cols = {"ts": ["1"] * 3, "label": ["spam", "ham", "Spam"], "score": ["0.5"] * 3}
    batch, errors = build_batch(cols, np.arange(1, 4), fm, text=True)
    assert batch.label.tolist() == [True, False]
    assert errors == [(2, "unknown label 'Spam' (expected one of 'spam'/'ham')")]


def test_missing_and_null_label():
    with pytest.raises(EventError, match=r"^line 9: missing field 'label'$"):
        parse_event(ev(label=MISSING), where="line 9")
    with pytest.raises(EventError, match=r"label is null"):
        parse_event(ev(label=None))


# ------------------------------------------------------------------ scores, weights


@pytest.mark.parametrize("v,reason", [
    (math.nan, "score is NaN"),
    (math.inf, "score is infinite"),
    (-math.inf, "score is infinite"),
    ("0.5x", "score is not a number: '0.5x'"),
    ("nan", "score is NaN"),
    ("", "missing field 'score'"),
    (True, "score is not a number: True"),
    (None, "score is null"),
    (MISSING, "missing field 'score'"),
    (10 ** 400, "score is out of range: " + repr(10 ** 400)[:57] + "..."),
])
def test_bad_scores(v, reason):
    with pytest.raises(EventError) as ei:
        parse_event(ev(score=v), where="line 17")
    assert ei.value.reason == reason
    assert str(ei.value) == f"line 17: {reason}"


def test_weights():
    assert parse_event(ev()).weight == 1.0
    assert parse_event(ev(weight=None)).weight == 1.0
    assert parse_event(ev(weight=2.5)).weight == 2.5
    assert parse_event(ev(weight=0)).weight == 0.0
    assert parse_event(ev(weight=1e12)).weight == 1e12  # MAX_WEIGHT itself
    for v, reason in [(-1, "weight is negative: -1"), (math.nan, "weight is NaN"),
                      ("2x", "weight is not a number: '2x'"),
                      (1e155, "weight is over the maximum weight 1e+12: 1e+155"),
                      (1.0000001e12, "weight is over the maximum weight 1e+12: 1000000100000.0")]:
        with pytest.raises(EventError) as ei:
            parse_event(ev(weight=v))
        assert ei.value.reason == reason


def test_ids_and_segments():
    fm = FieldMap(segment="country")
    assert parse_event(ev(id="a", country="fr"), fm)[4:] == ("a", "fr")
    assert parse_event(ev(id=7), fm)[4:] == (7, None)
    with pytest.raises(EventError, match="id must be a string or an integer, got 1.5"):
        parse_event(ev(id=1.5), fm)
    with pytest.raises(EventError, match=r"country must be a string, number or bool, got \['x'\]"):
        parse_event(ev(country=["x"]), fm)


def test_an_integer_id_beyond_64_bits_read_as_a_float_says_so(tmp_path):
    """orjson reads an integer outside [-2**63, 2**64) as a float (its digits lost): the
    row is refused naming the line and saying to send such ids as strings; the largest
    integers it keeps are ids."""
    orjson = pytest.importorskip("orjson")
    from streameval.io.sources import read_events

    big = -46_207_026_260_963_024_896
    assert type(orjson.loads(str(big).encode())) is float  # the parser's behaviour
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"ts": 1, "label": 1, "score": 0.5, "id": i}) + "\n"
                           for i in (2**64 - 1, -(2**63), big)))
    with pytest.raises(EventError, match=r"line 3: id must be a string or an integer of "
                                         r"at most 64 bits, .*send such ids as strings"):
        list(read_events(log, FieldMap()))


@pytest.mark.parametrize("bad, reason", [(math.nan, "country is NaN"),
                                         (math.inf, "country is infinite"),
                                         (np.float64(-math.inf), "country is infinite")])
def test_non_finite_segment_is_a_bad_row(bad, reason):
    """The Monitor refuses a NaN segment (NaN != NaN: a new segment per event), so the
    event layer must refuse the row, naming it, instead of passing it on."""
    fm = FieldMap(segment="country")
    with pytest.raises(EventError, match=f"^event: {reason}$"):
        parse_event(ev(country=bad), fm)
    rows = [ev(country="fr"), ev(country=bad), ev(country=1.5)]
    with pytest.raises(EventError, match=f"^event 1: {reason}$"):
        events_to_batch(rows, fm)
    # the columnar path (a typed float column, as Parquet gives) reports the same row
    col = np.array([1.0, float(bad), 2.5])
    n = len(col)
    batch, errors = build_batch({"ts": [0] * n, "label": [1] * n, "score": [0.5] * n,
                                 "country": col}, np.arange(1, n + 1), fm)
    assert errors == [(1, reason)] and batch.segment == [1.0, 2.5]
    fm2 = FieldMap(segment=["country", "device"])
    with pytest.raises(EventError, match=f"^event 0: {reason}$"):
        events_to_batch([ev(country=bad, device="ios")], fm2)


# ------------------------------------------------------------------ time


@pytest.mark.parametrize("text,expected", [
    ("2024-03-05T12:30:15Z", T0),
    ("2024-03-05T12:30:15+00:00", T0),
    ("2024-03-05T14:30:15+02:00", T0),
    ("2024-03-05T07:30:15-05:00", T0),
    ("2024-03-05 12:30:15", T0),  # naive = UTC
    ("2024-03-05T12:30:15.250Z", T0 + 0.25),
    ("2024-03-05", calendar.timegm((2024, 3, 5, 0, 0, 0))),
    (str(T0), T0),
    ("1700000000.5", 1700000000.5),
    (1700000000, 1700000000.0),
    (1.5, 1.5),
])
def test_parse_time(text, expected):
    assert parse_time(text) == expected


@pytest.mark.parametrize("v,reason", [
    ("2024-13-45", "unparseable time '2024-13-45'"),
    ("yesterday", "unparseable time 'yesterday'"),
    (math.nan, "ts is NaN"),
    (True, "ts is not a time: True"),
    (MISSING, "missing field 'ts'"),
])
def test_bad_times(v, reason):
    with pytest.raises(EventError) as ei:
        parse_event(ev(ts=v), where="line 3")
    assert ei.value.reason == reason and ei.value.where == "line 3"


def test_optional_time():
    fm = FieldMap(require_ts=False)
    assert math.isnan(parse_event(ev(ts=MISSING), fm).ts)
    assert math.isnan(parse_event(ev(ts=None), fm).ts)
    assert parse_event(ev(ts=5), fm).ts == 5.0
    with pytest.raises(EventError, match="unparseable time"):
        parse_event(ev(ts="soon"), fm)  # optional, but not anything
    fm = FieldMap(ts=None)
    assert math.isnan(parse_event(ev(ts="ignored"), fm).ts)


# ------------------------------------------------------------------ batches


def test_events_to_batch_values():
    rows = [ev(ts=1, label=True, score=0.9, id="a", weight=2),
            ev(ts="2024-03-05T12:30:15Z", label=0, score=0.1),
            ev(ts=3.5, label=1.0, score=1, id=5)]
    b = events_to_batch(rows)
    assert b.label.dtype == bool and b.score.dtype == np.float64
    assert b.label.tolist() == [True, False, True]
    assert b.score.tolist() == [0.9, 0.1, 1.0]
    assert b.ts.tolist() == [1.0, float(T0), 3.5]
    assert b.weight.tolist() == [2.0, 1.0, 1.0]
    assert b.line.tolist() == [1, 2, 3]
    assert b.id == ["a", None, 5] and b.segment is None
    assert list(b.events()) == [parse_event(r) for r in rows]


def test_events_to_batch_is_all_or_nothing():
    rows = [ev(), ev(), ev(score=math.nan), ev(label="x")]
    with pytest.raises(EventError) as ei:
        events_to_batch(rows)
    assert ei.value.index == 2 and str(ei.value) == "event 2: score is NaN"
    assert ei.value.raw == rows[2]
    with pytest.raises(EventError, match=r"^event 1: not a JSON object: 3$"):
        events_to_batch([ev(), 3])
    assert len(events_to_batch([])) == 0
    # the first bad event is named, whether it is a bad dict or not a dict at all
    with pytest.raises(EventError, match=r"^event 1: score is NaN$"):
        events_to_batch([ev(), ev(score=math.nan), "x", ev(label="x")])
    with pytest.raises(EventError, match=r"^event 1: not a JSON object: 'x'$"):
        events_to_batch([ev(), "x", ev(score=math.nan)])


def test_first_bad_field_is_reported_in_field_order():
    # ts is checked before label, label before score
    with pytest.raises(EventError, match="unparseable time 'x'"):
        events_to_batch([ev(ts="x", label="bad", score=math.nan)])
    with pytest.raises(EventError, match="unknown label"):
        events_to_batch([ev(label="bad", score=math.nan)])


@pytest.mark.parametrize("field", ["id", "country"])
@pytest.mark.parametrize("bad", ["\ud800", "ok\udfff", "\ud83d\ude00"[0], "a\udc80b"])
def test_strings_that_cannot_be_encoded_are_refused(field, bad):
    """A lone surrogate (valid JSON: ``"\\ud800"``) could be neither checkpointed,
    exported as JSON nor sent to Prometheus: it is refused at the boundary, naming the
    field and the event, on the row and the columnar paths alike."""
    fm = FieldMap(segment="country", id="id")
    reason = f"{field} is not valid Unicode"
    with pytest.raises(EventError, match=f"^event: {reason}"):
        parse_event(ev(**{field: bad}), fm)
    rows = [ev(id="a", country="fr"), ev(id="b", country="de"), ev(**{field: bad})]
    with pytest.raises(EventError, match=f"^event 2: {reason}") as ei:
        events_to_batch(rows, fm)
    assert ei.value.index == 2
    cols = {n: [r.get(n, MISSING) for r in rows] for n in fm.columns()}
    batch, errors = build_batch(cols, np.arange(1, 4), fm)
    assert [i for i, _ in errors] == [2] and errors[0][1].startswith(reason)
    assert batch.id == ["a", "b"] and batch.segment == ["fr", "de"]
    # a pair of surrogates in one string is still two lone code points in Python
    with pytest.raises(EventError, match=reason):
        parse_event(ev(**{field: "\ud83d\ude00"}), fm)
    # a real emoji (one code point) is fine
    assert parse_event(ev(id="\U0001f600", country="\U0001f600"), fm)[4:] == ("\U0001f600",) * 2


def test_big_weights_are_refused_in_batches_too():
    rows = [ev(weight=2.0), ev(weight=1e12), ev(weight=1e300)]
    fm = FieldMap(weight="weight")
    with pytest.raises(EventError, match=r"^event 2: weight is over the maximum weight 1e\+12"):
        events_to_batch(rows, fm)
    batch, errors = build_batch({n: [r.get(n, MISSING) for r in rows] for n in fm.columns()},
                                np.arange(1, 4), fm)
    assert [i for i, _ in errors] == [2] and batch.weight.tolist() == [2.0, 1e12]
    # a typed column (Parquet) takes the same path
    batch, errors = build_batch({"ts": [0] * 3, "label": [1] * 3, "score": [0.5] * 3,
                                 "weight": np.array([1.0, 1e13, 3.0])}, np.arange(1, 4), fm)
    assert [i for i, _ in errors] == [1] and batch.weight.tolist() == [1.0, 3.0]


@pytest.mark.parametrize("k", [0, 4095, 4096, 12287, 12288, 50_000])
def test_a_refused_batch_is_diagnosed_up_to_its_first_bad_event(monkeypatch, k):
    """Validation goes in chunks of doubling size and stops at the first chunk with a
    bad event; only that event's reason is looked for (a body of 10^6 bad events once
    cost seconds of CPU). Checked by counting the row validator's calls and the events
    whose fields were read."""
    import streameval.events as E

    calls, read = [], []
    real_diag, real_build = E._diagnose, E.build_batch
    monkeypatch.setattr(E, "_diagnose", lambda *a: calls.append(a[1]) or real_diag(*a))
    monkeypatch.setattr(E, "build_batch",
                        lambda cols, lines, *a, **kw: read.append(len(lines)) or real_build(
                            cols, lines, *a, **kw))
    n = 60_000
    rows = [ev(ts=i) for i in range(k)] + [{}] * (n - k)
    with pytest.raises(EventError, match=rf"^event {k}: missing field 'label'$") as ei:
        E.events_to_batch(rows, FieldMap(require_ts=False))
    assert ei.value.index == k and ei.value.line == k + 1
    assert calls == [k - sum(read[:-1])]  # one diagnosis, of the first bad event only
    assert sum(read) <= 3 * k + E.FIRST_CHUNK  # the events read: O(k), not O(n)
    # a good batch across several chunks is the same as one validated at once
    good = [ev(ts=i, score=i / n) for i in range(n)]
    b = E.events_to_batch(good)
    assert b.ts.tolist() == list(map(float, range(n))) and b.line.tolist() == list(range(1, n + 1))
    assert b.score.tolist() == [i / n for i in range(n)]


def _random_row(rng):
    row = {"ts": rng.choice([rng.randint(0, 10**9), rng.random() * 1e9, "2024-01-02T03:04:05Z"]),
           "label": rng.choice([True, False, 0, 1]),
           "score": rng.random(),
           "id": rng.choice([None, "x%d" % rng.randint(0, 9), rng.randint(0, 9)]),
           "seg": rng.choice(["a", "b", None])}
    if rng.random() < 0.3:
        row["weight"] = rng.choice([0, 0.5, 3])
    if rng.random() < 0.15:  # plant a fault
        field, value = rng.choice([
            ("score", math.nan), ("score", "0.3"), ("score", None), ("label", "yes"),
            ("label", 2), ("ts", "2024-99-01"), ("ts", None), ("weight", -2),
            ("id", 1.5), ("seg", {"k": 1}), ("label", MISSING), ("score", MISSING)])
        if value is MISSING:
            row.pop(field, None)
        else:
            row[field] = value
    return row


@pytest.mark.parametrize("seed", range(5))
def test_columnar_path_agrees_with_row_path(seed):
    rng = random.Random(seed)
    fm = FieldMap(segment="seg")
    rows = [_random_row(rng) for _ in range(500)]
    cols = {n: [r.get(n, MISSING) for r in rows] for n in fm.columns()}
    batch, errors = build_batch(cols, np.arange(1, 501), fm)
    good, bad = [], []
    for i, r in enumerate(rows):
        try:
            good.append(parse_event(r, fm))
        except EventError as e:
            bad.append((i, e.reason))
    assert errors == bad and len(bad) > 20
    assert list(batch.events()) == good
    assert batch.line.tolist() == [i + 1 for i in range(500) if i not in dict(bad)]


def test_partial_rows_for_delayed_labels():
    fm = FieldMap()
    rows = [{"id": "a", "ts": 1, "score": 0.7},            # prediction
            {"id": "a", "ts": 5, "label": True},           # label
            {"id": "b", "ts": 6, "label": 0, "score": 0.2},  # complete
            {"id": "c", "ts": 7},                          # neither
            {"ts": 8, "score": 0.1}]                       # prediction without id
    cols = {n: [r.get(n, MISSING) for r in rows] for n in fm.columns()}
    batch, errors = build_batch(cols, np.arange(1, 6), fm, partial=True)
    assert batch.kind.tolist() == [KIND_PREDICTION, KIND_LABEL, KIND_EVENT]
    assert batch.label.tolist() == [False, True, False]
    assert batch.score[0] == 0.7 and math.isnan(batch.score[1]) and batch.score[2] == 0.2
    assert batch.id == ["a", "a", "b"]
    assert errors == [(3, "missing fields 'label' and 'score' (need one of them)"),
                      (4, "missing field 'id' (needed to join labels to predictions)")]


def test_batch_select_and_concat():
    b = events_to_batch([ev(ts=i, id=str(i)) for i in range(5)])
    s = b.select(np.array([True, False, True, False, True]))
    assert s.ts.tolist() == [0, 2, 4] and s.id == ["0", "2", "4"]
    c = EventBatch.concat([s, events_to_batch([ev(ts=9)]), EventBatch.empty()])
    assert c.ts.tolist() == [0, 2, 4, 9] and c.id == ["0", "2", "4", None]
    assert c.line.tolist() == [1, 3, 5, 1]


def test_batch_is_frozen_and_weights_may_be_none():
    """One batch type from a source to the Monitor: frozen (a changed copy with
    dataclasses.replace), weights None meaning all 1 (a service's unweighted batch) kept
    through select, concat and events()."""
    import dataclasses

    from streameval.events import Batch

    assert EventBatch is Batch
    b = events_to_batch([ev(ts=i, score=i / 10, weight=2.0) for i in range(4)])
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.ts = np.zeros(4)
    u = dataclasses.replace(b, weight=None)
    assert u.weights().tolist() == [1.0] * 4 and b.weight.tolist() == [2.0] * 4
    assert u.select(np.array([True, False, True, True])).weight is None
    assert [e.weight for e in u.events()] == [1.0] * 4
    c = Batch.concat([u, b])  # one weighted part: the other's weights are 1
    assert c.weight.tolist() == [1.0] * 4 + [2.0] * 4
    assert Batch.concat([u, u]).weight is None
    assert c.score.tolist() == [0.0, 0.1, 0.2, 0.3] * 2


def test_batch_segment_codes_are_computed_once():
    fm = FieldMap(segment="country")
    b = events_to_batch([ev(ts=i, country=c) for i, c in enumerate(["fr", "de", None, "fr"])], fm)
    codes, distinct = b.segment_codes()
    assert codes.tolist() == [0, 1, 2, 0] and distinct == ["fr", "de", None]
    assert b.segment_codes()[0] is codes  # cached on the batch
    with pytest.raises(ValueError, match="no segment column"):
        events_to_batch([ev(ts=1)]).segment_codes()


def test_a_deeply_nested_value_is_named_without_overflowing_the_stack():
    """orjson parses up to 1 024 levels; repr of such a value overflowed the stack
    while the error message was written (a replay crashed with exit 3)."""
    deep = []
    inner = deep
    for _ in range(1200):
        inner.append([])
        inner = inner[0]
    with pytest.raises(EventError, match=r"^event 0: score is not a number: \[\[\[\[\[\.\.\.\]\]\]\]\]$"):
        events_to_batch([ev(score=deep)])
    with pytest.raises(EventError, match=r"country must be a string, number or bool, got \{'a': \[1, 2\]\}"):
        parse_event(ev(country={"a": [1, 2]}), FieldMap(segment="country"))


def test_max_future_refuses_event_times_ahead_of_the_wall_clock_on_both_paths():
    import time

    now = time.time()
    fm = FieldMap(max_future=3600)
    assert fm.max_future == 3600.0 and FieldMap.from_dict(fm.to_dict()) == fm
    assert parse_event(ev(ts=now + 3000), fm).ts == now + 3000
    rows = [ev(ts=now), ev(ts=1e12), ev(ts=now + 7200), ev(ts="2999-01-01T00:00:00Z")]
    with pytest.raises(EventError, match=r"^event 1: ts = 1000000000000.0 is \d+ s ahead of the "
                                         r"clock \(max_future = 3600 s\)$"):
        events_to_batch(rows, fm)
    cols = {n: [r.get(n, MISSING) for r in rows] for n in fm.columns()}
    batch, errors = build_batch(cols, np.arange(1, 5), fm)
    assert [i for i, _ in errors] == [1, 2, 3] and batch.ts.tolist() == [now]
    assert all("s ahead of the clock (max_future = 3600 s)" in r for _, r in errors)
    # no limit by default; a bad value is refused
    assert len(events_to_batch(rows, FieldMap())) == 4
    for bad in (-1, float("inf"), float("nan"), True, "1h"):
        with pytest.raises(ValueError, match="max_future"):
            FieldMap(max_future=bad)
