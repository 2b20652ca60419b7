"""A log read and validated in a second process (``EventSource(parse_process=...)``).

Oracle: the same log read in one process (``parse_process=False``), the path every
other test of the sources checks against json/csv; the two must give the same batches
(every column), the same bad rows (line, reason, raw text) in the same order, the same
counts and resume positions, the same errors, and a replay the same output files.
"""

import gzip
import json
import os
import random
import sys

import numpy as np
import pytest

import streameval.io.sources as sources
from streameval.events import EventError, FieldMap
from streameval.io.sources import EventSource, SourceError
from streameval.replay import replay


def messy_lines(n, seed=0):
    """JSONL lines, most good, some bad in each way the reader and the checks refuse."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = rng.random()
        row = {"ts": 1_700_000_000 + i, "id": i, "label": int(rng.random() < 0.3),
               "score": rng.random()}
        if r < 0.03:
            out.append("{not json")
        elif r < 0.06:
            out.append(json.dumps(dict(row, score=float("nan"))))
        elif r < 0.08:
            out.append(json.dumps(dict(row, label="maybe")))
        elif r < 0.10:
            out.append("")  # blank: counts for line numbers only
        elif r < 0.12:
            out.append(json.dumps(dict(row, weight=-1.0)))
        elif r < 0.13:
            out.append('{"ts": 1, "label": 1, "score": "' + "x" * 300 + '"}')  # over-long
        else:
            out.append(json.dumps(row))
    return out


def write(path, lines):
    path.write_text("".join(x + "\n" for x in lines))
    return str(path)


def read(path, pp, **kw):
    """Batches, rejected rows and counters of one full read."""
    got = []
    src = EventSource(path, parse_process=pp, rejected=lambda *r: got.append(r), **kw)
    assert src.parses_elsewhere() == pp  # (the path compared is the one asked for)
    batches = list(src)
    return batches, got, src.counts(), src.position, src.offset


def same_batches(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for k in ("label", "score", "ts", "line", "weight"):
            u, v = getattr(x, k), getattr(y, k)
            assert (u is None) == (v is None), k
            if u is not None:
                assert np.array_equal(u, v, equal_nan=True), k
        assert (x.id is None) == (y.id is None)
        if x.id is not None:
            assert list(x.id) == list(y.id)


@pytest.mark.parametrize("batch_size", [7, 1000])
def test_skip_same_batches_rejects_and_counts(tmp_path, batch_size):
    path = write(tmp_path / "log.jsonl", messy_lines(400))
    kw = dict(on_error="skip", batch_size=batch_size, max_line_bytes=200)
    one = read(path, False, **kw)
    two = read(path, True, **kw)
    same_batches(one[0], two[0])
    assert one[1] == two[1] and len(one[1]) > 20  # (line, reason, raw) each, in order
    assert one[2:] == two[2:]
    assert one[2]["rows"] == sum(len(b) for b in one[0]) + len(one[1])


def test_fail_names_the_same_line_after_the_same_batches(tmp_path):
    lines = messy_lines(300, seed=3)
    first_bad = next(i for i, x in enumerate(lines) if x.startswith("{not"))
    path = write(tmp_path / "log.jsonl", lines)
    results = []
    for pp in (False, True):
        src = EventSource(path, parse_process=pp, batch_size=5, max_line_bytes=200)
        got = []
        with pytest.raises(EventError) as e:
            for b in src:
                got.append(b)
        results.append((got, str(e.value), e.value.line, e.value.raw, src.position))
    same_batches(results[0][0], results[1][0])
    assert results[0][1:] == results[1][1:]
    assert results[0][2] <= first_bad + 1


def test_raw_row_of_the_batch_yielded_last(tmp_path):
    path = write(tmp_path / "log.jsonl", messy_lines(50, seed=5))
    for pp in (False, True):
        src = EventSource(path, parse_process=pp, on_error="skip", batch_size=8,
                          rejected=lambda *r: None)
        for b in src:
            for line in b.line.tolist():
                assert json.loads(src.raw(line)) == json.loads(
                    open(path).read().splitlines()[line - 1])


def test_resume_from_a_position_and_offset(tmp_path):
    path = write(tmp_path / "log.jsonl", messy_lines(300, seed=7))
    first = EventSource(path, parse_process=False, on_error="skip", batch_size=40,
                        rejected=lambda *r: None)
    it = iter(first)
    next(it), next(it)
    state = first.to_state()
    assert state.get("offset")  # (a plain file: read on from the byte offset)
    runs = []
    for pp in (False, True):
        src = EventSource(path, parse_process=pp, on_error="skip", batch_size=40,
                          rejected=lambda *r: None)
        src.restore(state)
        runs.append((list(src), src.counts(), src.position, src.offset))
    same_batches(runs[0][0], runs[1][0])
    assert runs[0][1:] == runs[1][1:]
    assert runs[0][0][0].line[0] > state["position"]


def test_csv_and_gzip(tmp_path):
    rng = random.Random(11)
    rows = ["ts,label,score"] + [f"{i},{int(rng.random() < 0.4)},{rng.random()!r}"
                                 for i in range(200)]
    rows[50] = "50,1,abc"
    rows[90] = "90,1"
    csv_path = write(tmp_path / "log.csv", rows)
    gz = tmp_path / "log.jsonl.gz"
    gz.write_bytes(gzip.compress("".join(x + "\n" for x in messy_lines(200, 13)).encode()))
    for path in (csv_path, str(gz)):
        one = read(path, False, on_error="skip", batch_size=16)
        two = read(path, True, on_error="skip", batch_size=16)
        same_batches(one[0], two[0])
        assert one[1] == two[1] and one[1]
        assert one[2:] == two[2:]


def test_a_truncated_log_fails_at_the_same_point(tmp_path):
    data = gzip.compress("".join(x + "\n" for x in messy_lines(3000, 17)).encode())
    gz = tmp_path / "log.jsonl.gz"
    gz.write_bytes(data[: len(data) * 2 // 3])
    outcomes = []
    for pp in (False, True):
        src = EventSource(str(gz), parse_process=pp, on_error="skip", batch_size=64,
                          rejected=lambda *r: None)
        n = 0
        with pytest.raises(SourceError) as e:
            for b in src:
                n += len(b)
        outcomes.append((n, str(e.value), src.position))
    assert outcomes[0] == outcomes[1]
    assert "ends early" in outcomes[0][1]


def test_a_missing_column_is_refused_alike(tmp_path):
    path = write(tmp_path / "log.csv", ["ts,label", "1,1", "2,0"])
    msgs = []
    for pp in (False, True):
        with pytest.raises(EventError) as e:
            list(EventSource(path, parse_process=pp))
        msgs.append((type(e.value), str(e.value)))
    assert msgs[0] == msgs[1] and "score" in msgs[0][1]


def _children():
    """This process's child pids (Linux)."""
    pids = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            pids += f.read().split()
    return pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_process_ends_when_the_reader_stops(tmp_path):
    path = write(tmp_path / "log.jsonl", messy_lines(2000, 19))
    before = set(_children())
    it = iter(EventSource(path, parse_process=True, on_error="skip", batch_size=10,
                          rejected=lambda *r: None))
    next(it)
    assert set(_children()) - before  # reading in a second process
    it.close()
    assert set(_children()) == before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_two_file_join_stopped_early_ends_both_processes(tmp_path):
    from streameval.io.delayed import DelayedSource

    pred = write(tmp_path / "pred.jsonl", [json.dumps(
        {"id": f"p{i}", "ts": 1_700_000_000 + i, "score": i / 5000}) for i in range(5000)])
    lab = write(tmp_path / "lab.jsonl", [json.dumps(
        {"id": f"p{i}", "ts": 1_700_000_005 + i, "label": i % 3 == 0}) for i in range(5000)])
    before = set(_children())

    def first():
        src = DelayedSource(pred, labels_path=lab, label_ttl=60, batch_size=100,
                            parse_process=True)
        for batch in src:
            assert len(set(_children()) - before) == 2  # one per file
            return batch

    first()  # (no reference cycle keeps the iteration open: no gc needed)
    assert set(_children()) == before


def test_an_iteration_left_open_at_exit_ends_with_the_error(tmp_path):
    """An exception while an iteration is open (not in a for loop): the interpreter
    exits with status 1 and the error, not an abort at shutdown."""
    import subprocess

    path = write(tmp_path / "log.jsonl", messy_lines(3000, 5))
    code = ("import sys; from streameval.io.sources import EventSource\n"
            "it = iter(EventSource(sys.argv[1], parse_process=True, batch_size=100,\n"
            "                      on_error='skip', rejected=lambda *r: None))\n"
            "next(it)\n"
            "raise RuntimeError('refused downstream')\n")
    for _ in range(3):
        p = subprocess.run([sys.executable, "-c", code, path], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 1, p.stderr
        assert "RuntimeError: refused downstream" in p.stderr
        assert "Fatal Python error" not in p.stderr


def test_when_auto_uses_a_second_process(tmp_path, monkeypatch):
    path = write(tmp_path / "log.jsonl", messy_lines(20))
    assert not EventSource(path).parses_elsewhere()  # small: read here
    monkeypatch.setattr(sources, "PARSE_PROCESS_MIN_BYTES", 1)
    monkeypatch.setattr(sources, "_usable_cpus", lambda: 2)
    assert EventSource(path).parses_elsewhere()
    assert not EventSource(path, parse_process=False).parses_elsewhere()
    with open(path, "rb") as f:  # a stream (stdin) is read here
        assert not EventSource(f, parse_process=True).parses_elsewhere()
    monkeypatch.setattr(sources, "_usable_cpus", lambda: 1)
    assert not EventSource(path).parses_elsewhere()
    assert EventSource(path, parse_process=True).parses_elsewhere()
    with pytest.raises(ValueError, match="parse_process"):
        EventSource(path, parse_process="yes")


def test_replay_outputs_are_the_same(tmp_path, monkeypatch):
    lines = messy_lines(3000, seed=23)
    # rows the Monitor refuses (a probability metric's range): their raw row comes from
    # the chunk the parsing process sent
    lines[100] = json.dumps({"ts": 1_700_000_100, "id": 100, "label": 1, "score": 1.5})
    lines[2500] = json.dumps({"ts": 1_700_002_500, "id": 2500, "label": 0, "score": -0.5})
    log = write(tmp_path / "log.jsonl", lines)
    outs = {}
    for pp in (False, True):
        monkeypatch.setattr(EventSource, "parses_elsewhere", lambda self, _pp=pp: _pp)
        out = tmp_path / f"out{pp}"
        s = replay(log, out, on_error="skip", report=False, progress=False)
        outs[pp] = ({k: v for k, v in s.items() if k not in ("elapsed_seconds", "out")},
                    {f: (out / f).read_bytes() for f in ("metrics.jsonl", "alerts.jsonl",
                                                         "rejected.jsonl")})
    assert outs[False] == outs[True]
    rejected = [json.loads(x) for x in outs[True][1]["rejected.jsonl"].splitlines()]
    assert {101, 2501} <= {r["line"] for r in rejected}
    assert outs[True][0]["rejected"] == len(rejected)


def test_replay_resumed_from_a_checkpoint_is_the_same(tmp_path, monkeypatch):
    from streameval.replay import Replay

    log = write(tmp_path / "log.jsonl", messy_lines(3000, seed=29))
    monkeypatch.setattr(EventSource, "parses_elsewhere", lambda self: True)
    whole = tmp_path / "whole"
    replay(log, whole, on_error="skip", report=False, progress=False)
    out, ck = tmp_path / "cut", tmp_path / "ck"
    r = Replay(log, out, on_error="skip", report=False, progress=False, checkpoint=ck,
               checkpoint_every=500)
    seen = []
    r.pipeline.on_batch = lambda p, b: seen.append(len(b)) or len(seen) < 3  # a kill
    r.run()
    replay(log, out, on_error="skip", report=False, progress=False, checkpoint=ck,
           checkpoint_every=500)
    for f in ("metrics.jsonl", "alerts.jsonl", "rejected.jsonl"):
        assert (out / f).read_bytes() == (whole / f).read_bytes(), f


def test_fieldmap_and_labels_travel(tmp_path):
    fm = FieldMap(ts="t", label="y", score="p", pos_label="spam", neg_label="ham",
                  segment="country")
    rng = random.Random(31)
    lines = [json.dumps({"t": i, "y": rng.choice(["spam", "ham", "eggs"]),
                         "p": rng.random(), "country": rng.choice(["fr", "de", None])})
             for i in range(300)]
    path = write(tmp_path / "log.jsonl", lines)
    one = read(path, False, fields=fm, on_error="skip", batch_size=32)
    two = read(path, True, fields=fm, on_error="skip", batch_size=32)
    same_batches(one[0], two[0])
    assert [list(b.segment) for b in one[0]] == [list(b.segment) for b in two[0]]
    assert one[1] == two[1] and one[1]  # "eggs" refused alike


def test_delayed_label_replay_is_the_same(tmp_path, monkeypatch):
    rng = random.Random(37)
    rows = []
    for i in range(1500):  # a prediction, and its label later (or never)
        rows.append((i, {"id": f"p{i}", "ts": 1_700_000_000 + i, "score": rng.random()}))
        if rng.random() < 0.9:
            lag = rng.randint(1, 40)
            rows.append((i + lag + 0.5, {"id": f"p{i}", "ts": 1_700_000_000 + i + lag,
                                         "label": int(rng.random() < 0.3)}))
    rows.sort(key=lambda r: r[0])
    lines = [json.dumps(r) for _, r in rows]
    lines[300] = "{broken"
    log = write(tmp_path / "log.jsonl", lines)
    outs = {}
    for pp in (False, True):
        monkeypatch.setattr(EventSource, "parses_elsewhere", lambda self, _pp=pp: _pp)
        out = tmp_path / f"out{pp}"
        s = replay(log, out, config={"input": {"label_ttl": 30}}, on_error="skip",
                   report=False, progress=False)
        outs[pp] = ({k: v for k, v in s.items() if k not in ("elapsed_seconds", "out")},
                    {f: (out / f).read_bytes() for f in ("metrics.jsonl", "alerts.jsonl",
                                                         "rejected.jsonl")})
    assert outs[False] == outs[True]
    assert outs[True][0]["expired"] > 0 and outs[True][0]["rejected"] == 1


def test_an_error_raised_in_the_second_process_keeps_its_fields():
    """What the parsing process sends for an exception (through pickle, as the pipe
    does) is raised here with the same type, message and fields."""
    import pickle

    try:
        b"\xff".decode()
    except UnicodeDecodeError as e:
        decode = e
    for e in (EventError("bad score", line=7, raw="{x}"),
              OSError(5, "Input/output error", "/tmp/x"),
              FileNotFoundError(2, "No such file or directory", "/tmp/x"), decode):
        back = sources._rebuilt(pickle.loads(pickle.dumps(sources._portable(e))))
        assert type(back) is type(e) and str(back) == str(e)
        for field in ("errno", "strerror", "filename", "line", "start", "reason"):
            assert getattr(back, field, None) == getattr(e, field, None), field
