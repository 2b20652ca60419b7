"""Binary incremental checkpoints (streameval.io.statefile) and the state hooks.

Oracles: an uninterrupted run of the same log with the same checkpoints (byte-identical
outputs after kills and resumes), the JSON state (``to_state()``) of the original
object against the one loaded back, the bytes on disk (files written, sizes, CRC-32
with zlib), and damage made by editing the real files.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streameval
from streameval import _registry
from streameval.io import EventSource
from streameval.io.checkpoint import (
    CheckpointError,
    CheckpointFallback,
    load_checkpoint,
    read_state,
)
from streameval.io.statefile import COMPACT_RATIO, StateWriter, pack_dir
from streameval.metrics.arraystate import array_state, from_array_state
from streameval.monitor import Monitor
from streameval.pipeline import Pipeline

DATA = Path(__file__).parent / "data"


def write_log(path, n, seed=0, rounded=False):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = rng.random(n) * 0.6 + y * 0.3
    if rounded:
        s = np.round(s, 2)
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"ts": i, "label": bool(y[i]), "score": float(s[i])}) + "\n")
    return path


def run_pipeline(tmp, log, name, every=5000, stop_at=(), batch_size=None, fmt="binary",
                 finish=True):
    """A replay of ``log`` into ``tmp/name``; ``stop_at``: batch counts at which the run
    is stopped as a kill would stop it (then resumed by a new pipeline), in order."""
    out = tmp / name
    out.mkdir(exist_ok=True)
    ckpt = out / "ckpt.json"
    stops = list(stop_at)
    while True:
        seen = [0]
        limit = stops.pop(0) if stops else None

        def on_batch(p, b, seen=seen, limit=limit):
            seen[0] += 1
            return False if limit is not None and seen[0] >= limit else None

        kw = {} if batch_size is None else {"batch_size": batch_size}
        p = Pipeline(Monitor.default(), EventSource(str(log), **kw),
                     outputs={"metrics": out / "metrics.jsonl", "alerts": out / "alerts.jsonl"},
                     checkpoint=ckpt, checkpoint_every=every, on_batch=on_batch,
                     checkpoint_format=fmt)
        p.resume()
        p.run()
        p.close()
        if not p.stopped or (not finish and not stops):
            return out


def same_files(a, b):
    for name in ("metrics.jsonl", "alerts.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_checkpoints_change_nothing_and_resumes_are_byte_identical(tmp_path):
    log = write_log(tmp_path / "log.jsonl", 60_000, seed=1)
    plain = run_pipeline(tmp_path, log, "plain", every=None)
    ckpt = run_pipeline(tmp_path, log, "ckpt", every=4000, batch_size=997)
    same_files(plain, ckpt)
    rng = random.Random(7)
    stops = sorted(rng.sample(range(2, 20), 4))
    stops = [b - a for a, b in zip([0] + stops, stops)]
    resumed = run_pipeline(tmp_path, log, "resumed", every=4000, stop_at=stops, batch_size=997)
    same_files(plain, resumed)


def test_kill_9_during_replays_and_checkpoints_then_resume_byte_identical(tmp_path):
    log = write_log(tmp_path / "log.jsonl", 40_000, seed=2)
    ref = tmp_path / "ref"
    cmd = [sys.executable, "-m", "streameval", "replay", str(log), "--checkpoint-every",
           "2000", "--no-report"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run(cmd + ["--out", str(ref), "--checkpoint", str(tmp_path / "r.json")],
                       env=env, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    ckpt = tmp_path / "k.json"
    rng = random.Random(11)
    kills = 0

    def seq():
        try:
            return json.loads(ckpt.read_text())["seq"]
        except (OSError, ValueError, KeyError):
            return 0

    for attempt in range(40):
        before = seq()
        proc = subprocess.Popen(cmd + ["--out", str(out), "--checkpoint", str(ckpt)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if kills < 4:
            # once it has written a checkpoint more, at a random moment after (a later
            # checkpoint being written, or rows between two)
            deadline = time.monotonic() + 120
            while seq() <= before and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.3))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                proc.stderr.close()
                kills += 1
                continue
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        break
    assert kills >= 1
    same_files(ref, out)


def test_incremental_chain_equals_a_full_checkpoint_and_writes_less(tmp_path):
    rng = np.random.default_rng(3)
    m = Monitor.default()
    w = StateWriter(tmp_path / "c.json")
    written = []
    n = 0
    for step in range(7):
        for _ in range(200 if step == 0 else 20):  # batches of 1000, as a replay feeds them
            y = rng.random(1000) < 0.3
            m.update_many(y, rng.random(1000) * 0.5 + 0.4 * y, t=np.arange(n, n + 1000.0))
            n += 1000
        w.write(m.to_array_state(), kind="monitor")
        written.append(w.last["bytes"])
    chain = load_checkpoint(tmp_path / "c.json", expected_kind="monitor")
    full = StateWriter(tmp_path / "f.json")
    full.write(m.to_array_state(), kind="monitor")
    once = load_checkpoint(tmp_path / "f.json", expected_kind="monitor")
    a, b = Monitor.from_array_state(chain), Monitor.from_array_state(once)
    assert json.dumps(a.to_state()) == json.dumps(b.to_state()) == json.dumps(m.to_state())
    # the later checkpoints write what changed (new and merged levels, new window
    # batches): less than the whole state, which the first one wrote
    assert sum(written[1:]) < 0.8 * len(written[1:]) * full.last["bytes"], (written, full.last)
    assert min(written[1:]) < 0.5 * full.last["bytes"], (written, full.last)
    # files and bytes stay bounded: the packs both generations reference, nothing else
    d = pack_dir(tmp_path / "c.json")
    packs = set(os.listdir(d))
    env = json.loads((tmp_path / "c.json").read_text())
    prev = json.loads((tmp_path / "c.prev.json").read_text())
    assert packs == set(env["packs"]) | set(prev["packs"])
    total = sum(os.path.getsize(os.path.join(d, p)) for p in packs)
    assert total <= 2 * COMPACT_RATIO * full.last["bytes"] + 1


@pytest.mark.parametrize("merge", [float("inf"), None])
def test_a_compaction_is_spread_over_checkpoints_and_disk_stays_bounded(tmp_path,
                                                                        monkeypatch, merge):
    """With a small step, each checkpoint moves at most the step's live bytes (or what
    it writes anew, or one pack), the least alive packs first; the bytes on disk stay
    bounded over a long chain, and the chain loads equal to a full checkpoint. (A
    compaction threshold of 1.5: expired window batches are then enough to start
    compactions several times in the chain when the windows' runs of batches are never
    merged (``merge`` inf); merged as they are by default (None), they leave whole packs
    dead rather than partly alive, and the bound on disk holds all the same.)"""
    import streameval.io.statefile as sf
    import streameval.windows.count as count

    step = 64 << 10
    monkeypatch.setattr(sf, "COMPACT_STEP", step)
    monkeypatch.setattr(sf, "COMPACT_RATIO", 1.5)
    if merge is not None:
        monkeypatch.setattr(count, "RUN_MERGE", merge)
    rng = np.random.default_rng(5)
    m = Monitor.default()  # (its windows' batches expire: dead bytes in old packs)
    w = StateWriter(tmp_path / "c.json")
    d = pack_dir(tmp_path / "c.json")
    n, sizes, compacted = 0, [], 0
    for i in range(40):
        y = rng.random(3000) < 0.3
        m.update_many(y, rng.random(3000) * 0.5 + 0.4 * y, t=np.arange(n, n + 3000.0))
        n += 3000
        before = {p: os.path.getsize(os.path.join(d, p)) for p in os.listdir(d)} \
            if os.path.isdir(d) else {}
        w.write(m.to_array_state(), kind="monitor")
        last = w.last
        if last["compacted"]:
            compacted += 1
            new = last["bytes"] - last["compacted"]
            # (one pack's live bytes at most beyond the step: a pack is never split)
            assert last["compacted"] <= max(step, new) + max(before.values()), last
        sizes.append(sum(os.path.getsize(os.path.join(d, p)) for p in os.listdir(d)))
    assert compacted >= 3 or merge is None
    full = StateWriter(tmp_path / "f.json")
    full.write(m.to_array_state(), kind="monitor")
    assert max(sizes[10:]) <= 4 * COMPACT_RATIO * full.last["bytes"], (sizes, full.last)
    chain = load_checkpoint(tmp_path / "c.json", expected_kind="monitor")
    once = load_checkpoint(tmp_path / "f.json", expected_kind="monitor")
    assert json.dumps(Monitor.from_array_state(chain).to_state()) == json.dumps(
        Monitor.from_array_state(once).to_state()) == json.dumps(m.to_state())


def test_compaction_takes_the_least_alive_packs_first_within_its_step():
    from streameval.io.statefile import _sparsest

    sizes = {"a": 100, "b": 100, "c": 100, "d": 100, "e": 10_000}
    live = {"a": 40, "b": 10, "c": 30, "d": 60, "e": 4_000}  # (d: more than half alive)
    assert _sparsest(live, sizes, 1 << 30) == {"a", "b", "c", "e"}
    assert _sparsest(live, sizes, 40) == {"b", "c"}  # 10 + 30, least alive first
    assert _sparsest(live, sizes, 45) == {"b", "c"}  # (a's 40 more would pass 45)
    assert _sparsest(live, sizes, 5) == {"b"}  # one pack at least
    assert _sparsest({"d": 60}, sizes, 1 << 30) == set()


def test_pack_bytes_are_the_arrays_with_their_crc(tmp_path):
    x = np.arange(10, dtype=np.float64)
    ro = x.view()
    ro.flags.writeable = False
    w = StateWriter(tmp_path / "c.json")
    w.write({"a": ro, "b": np.array([True, False]), "c": [1, "x", None]}, kind="k")
    env = json.loads((tmp_path / "c.json").read_text())
    ref = env["state"]["a"]["$a"]
    pack = Path(pack_dir(tmp_path / "c.json")) / ref[0]
    raw = pack.read_bytes()[ref[1]:ref[1] + ref[2]]
    assert raw == x.tobytes() and zlib.crc32(raw) == ref[5] and ref[3] == "<f8"
    got = load_checkpoint(tmp_path / "c.json", expected_kind="k")
    assert got["c"] == [1, "x", None] and got["b"].tolist() == [True, False]
    assert got["a"].tolist() == x.tolist()
    # the same read-only array again: referenced, not rewritten
    w.write({"a": ro, "b": np.array([True])}, kind="k")
    assert w.last["bytes"] == 1 and w.last["arrays"] == 1


def test_views_of_one_memory_are_written_once_and_other_slices_apart(tmp_path):
    """Distinct read-only view objects of the same bytes (as several windows hold one
    batch) are one array in the pack; a slice at another offset, or of another length,
    is an array of its own; and a later checkpoint given fresh views of the same memory
    references what it wrote. Oracle: the bytes of each slice, and the values loaded."""
    root = np.arange(100, dtype=np.float64)

    def view(a, b):
        v = root[a:b]
        v.flags.writeable = False
        return v

    w = StateWriter(tmp_path / "c.json")
    tree = {"a": view(10, 20), "b": view(10, 20), "c": view(20, 30), "d": view(10, 21)}
    w.write(tree, kind="k")
    assert w.last["arrays"] == 3 and w.last["bytes"] == (10 + 10 + 11) * 8
    env = json.loads((tmp_path / "c.json").read_text())
    refs = {k: env["state"][k]["$a"] for k in tree}
    assert refs["a"] == refs["b"] and refs["a"][1] != refs["c"][1]
    raw = (Path(pack_dir(tmp_path / "c.json")) / refs["c"][0]).read_bytes()
    for k, (a, b) in {"a": (10, 20), "c": (20, 30), "d": (10, 21)}.items():
        assert raw[refs[k][1]:refs[k][1] + refs[k][2]] == root[a:b].tobytes()
    got = load_checkpoint(tmp_path / "c.json", expected_kind="k")
    assert {k: got[k].tolist() for k in tree} == {
        "a": list(range(10, 20)), "b": list(range(10, 20)), "c": list(range(20, 30)),
        "d": list(range(10, 21))}
    # fresh view objects of the same memory: referenced, nothing written again
    w.write({"a": view(10, 20), "c": view(20, 30)}, kind="k")
    assert w.last["arrays"] == 0 and w.last["bytes"] == 0


def _damage(path, how):
    data = bytearray(path.read_bytes())
    if how == "flip":
        data[len(data) // 2] ^= 0x10
    else:
        data = data[: len(data) - 7]
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["flip", "truncate"])
def test_damage_to_any_state_file_is_refused_or_falls_back(tmp_path, how):
    rng = np.random.default_rng(4)
    m = Monitor.default()
    path = tmp_path / "c.json"
    w = StateWriter(path)
    for step in range(2):
        y = rng.random(20_000) < 0.3
        m.update_many(y, rng.random(20_000), t=np.arange(20_000.0) + step * 20_000)
        w.write(m.to_array_state(), kind="monitor")
    expected = json.dumps(m.to_state())
    files = [path] + sorted(Path(pack_dir(path)).iterdir())
    fallbacks = 0
    for f in files:
        d = tmp_path / f"copy-{f.name}"
        d.mkdir()
        for g in [path, tmp_path / "c.prev.json"]:
            (d / g.name).write_bytes(g.read_bytes())
        (d / "c.json.d").mkdir()
        for g in Path(pack_dir(path)).iterdir():
            (d / "c.json.d" / g.name).write_bytes(g.read_bytes())
        target = d / f.name if f == path else d / "c.json.d" / f.name
        _damage(target, how)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                state = load_checkpoint(d / "c.json", expected_kind="monitor")
            except CheckpointError as e:  # refused: names the file and what to do
                assert e.damaged and str(d) in str(e)
                assert "backup" in str(e) or "remove" in str(e)
                continue
        got = Monitor.from_array_state(state)
        if caught:  # the previous generation: fewer events, and said so
            assert any(issubclass(c.category, CheckpointFallback) for c in caught)
            assert got.n == 20_000
            fallbacks += 1
        else:  # (a flip in bytes no array reads cannot happen: every byte is checked)
            assert json.dumps(got.to_state()) == expected
    # a damaged manifest, or a pack only the newest references, falls back
    assert fallbacks >= 1


def test_missing_pack_and_stray_references_are_refused(tmp_path):
    path = tmp_path / "c.json"
    a = np.arange(5.0)
    a.flags.writeable = False
    StateWriter(path).write({"a": a}, kind="k")
    env = json.loads(path.read_text())
    env2 = json.loads(path.read_text())
    env2["state"]["a"]["$a"][0] = "999.pack"
    import hashlib

    from streameval.io.checkpoint import canonical
    env2["sha256"] = hashlib.sha256(canonical(env2["state"])).hexdigest()
    path.write_text(json.dumps(env2))
    with pytest.raises(CheckpointError, match="does not list"):
        load_checkpoint(path, fallback=False)
    path.write_text(json.dumps(env))
    for p in Path(pack_dir(path)).iterdir():
        p.unlink()
    with pytest.raises(CheckpointError, match="is missing"):
        load_checkpoint(path, fallback=False)


def _fed(obj, rng, n):
    """``obj`` fed ``n`` random binary events where it takes them (else as it is)."""
    y = rng.random(n) < 0.4
    s = np.round(rng.random(n), 3) if rng.random() < 0.5 else rng.random(n)
    try:
        obj.update_many(y, s)
    except (TypeError, ValueError, AttributeError):
        pass
    return obj


def _instances():
    out = []
    for e in _registry.ENTRIES:
        if not e.state:
            continue
        cls = getattr(streameval, e.name, None) or _registry.state_class(e.name)
        if e.name in ("Sliding", "Tumbling"):
            out.append(cls(streameval.ROCAUC(), size=50))
            out.append(cls(streameval.AveragePrecision(), size=20_000) if e.name == "Sliding"
                       else cls(streameval.Precision(), size=50))
        elif e.name == "Monitor":
            out.append(Monitor.default())
        elif e.name == "EstimateCheck" and "estimated_recall" not in _registry.config_kinds():
            continue  # (checks an estimate: needs a registered label-free kind)
        else:
            for kw in ({}, {"size": 100}, {"beta": 2.0}, {"alpha": 0.3}):
                try:
                    out.append(cls(**kw))
                    break
                except (TypeError, ValueError):
                    continue
    names = {type(o).__name__ for o in out} | {o._public_name for o in out
                                               if hasattr(o, "_public_name")}
    missing = [e.name for e in _registry.ENTRIES if e.state and e.name not in names
               and not (e.name == "EstimateCheck"
                        and "estimated_recall" not in _registry.config_kinds())]
    assert not missing, missing
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 3000))
def test_load_of_save_equals_the_original_for_every_registered_type(tmp_path_factory, seed, n):
    rng = np.random.default_rng(seed)
    d = tmp_path_factory.mktemp("rt")
    for obj in _instances():
        _fed(obj, rng, n)
        w = StateWriter(d / "c.json")
        w.write({"x": array_state(obj)}, kind="k")
        back = from_array_state(load_checkpoint(d / "c.json")["x"])
        assert type(back) is type(obj)
        assert json.dumps(back.to_state()) == json.dumps(obj.to_state()), type(obj).__name__


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), weighted=st.booleans(), reads=st.booleans())
def test_a_restored_score_order_computes_the_same_bits(seed, weighted, reads):
    """Saved and loaded at every step, then fed like the original: the same bits (the
    levels, deferred events and caches restored as they were)."""
    rng = np.random.default_rng(seed)
    orig = [streameval.ROCAUC(), streameval.AveragePrecision()]
    copies = [None, None]
    for step in range(8):
        m = int(rng.integers(1, 40_000))
        y = rng.random(m) < 0.3
        s = rng.random(m)
        w = rng.random(m) * 3 if weighted else None
        copies = [from_array_state(_roundtrip(array_state(o))) for o in orig]
        for o, c in zip(orig, copies):
            for x in (o, c):
                x.update_many(y, s, w)
                if reads:
                    x.get()
            a, b = o.get(), c.get()
            assert a == b or (a != a and b != b), (step, a, b)


def _roundtrip(state):
    """Arrays copied (fresh, writable) as a load gives them."""
    if isinstance(state, np.ndarray):
        return np.array(state, copy=True)
    if isinstance(state, dict):
        return {k: _roundtrip(v) for k, v in state.items()}
    if isinstance(state, list):
        return [_roundtrip(v) for v in state]
    return state


def test_json_checkpoints_still_load_and_resume(tmp_path):
    log = write_log(tmp_path / "log.jsonl", 30_000, seed=5)
    plain = run_pipeline(tmp_path, log, "plain", every=None)
    # a version-1 JSON checkpoint (what the JSON writer writes), resumed by the default
    resumed = tmp_path / "resumed"
    run_pipeline(tmp_path, log, "resumed", every=3000, stop_at=[7], fmt="json", finish=False)
    env = json.loads((resumed / "ckpt.json").read_text())
    assert env["version"] == 1
    run_pipeline(tmp_path, log, "resumed", every=3000)
    a = [json.loads(x) for x in (plain / "metrics.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert [r["n"] for r in a] == [r["n"] for r in b]
    for ra, rb in zip(a, b):
        for k, v in ra["values"].items():
            assert v == rb["values"][k] or abs(v - rb["values"][k]) <= 1e-12
    # a Monitor state from an old release loads through the checked path too
    with gzip.open(DATA / "monitor_state_0ff265b.json.gz", "rt") as f:
        old = json.load(f)["state"]
    assert json.dumps(Monitor.from_array_state(old).to_state()) == json.dumps(
        Monitor.from_state(old).to_state())


@pytest.mark.parametrize("edit, match", [
    (lambda s: s["monitor"]["data"].__setitem__("n", "many"), "data.n"),
    (lambda s: s["counts"].__setitem__("events", -3), "counts.events"),
    (lambda s: s["counts"].__setitem__("events", 12), "counts.events"),
    (lambda s: s["monitor"]["data"]["segments"][0].__setitem__("n", [1]), "segments"),
    (lambda s: s["monitor"]["data"]["segments"][0]["metrics"]["roc_auc"]["data"]
     .__setitem__("extra", 1), "expected keys"),
    (lambda s: s["monitor"]["data"]["segments"][0]["metrics"]["roc_auc"]["data"]
     .__setitem__("ps", "x"), "deferred"),
])
def test_malformed_states_exit_2_with_a_next_step(tmp_path, edit, match):
    from streameval.cli import main

    log = write_log(tmp_path / "log.jsonl", 6000, seed=6)
    ckpt = tmp_path / "c.json"
    cmd = ["replay", str(log), "--checkpoint", str(ckpt), "--checkpoint-every", "2000",
           "--no-report", "--quiet", "--out", str(tmp_path / "o")]
    assert main(cmd) == 0
    env = json.loads(ckpt.read_text())
    state = load_checkpoint(ckpt)
    edit(state)
    os.unlink(tmp_path / "c.prev.json")
    StateWriter(ckpt).write(state, kind=env["kind"], fingerprint=env["fingerprint"],
                            keep_previous=False)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(cmd)
    assert code == 2, err.getvalue()
    assert match in err.getvalue() and "remove" in err.getvalue(), err.getvalue()
    assert "Traceback" not in err.getvalue()


def test_a_malformed_newest_state_falls_back_to_the_previous_generation(tmp_path):
    log = write_log(tmp_path / "log.jsonl", 6000, seed=6)
    plain = run_pipeline(tmp_path, log, "plain", every=None)
    out = tmp_path / "r"
    run_pipeline(tmp_path, log, "r", every=1000, stop_at=[5], batch_size=500, finish=False)
    ckpt = out / "ckpt.json"
    env = json.loads(ckpt.read_text())
    state = load_checkpoint(ckpt)
    state["monitor"]["data"]["n"] = "many"
    StateWriter(ckpt).write(state, kind=env["kind"], fingerprint=env["fingerprint"])
    with pytest.warns(CheckpointFallback, match="data.n"):
        run_pipeline(tmp_path, log, "r", every=1000, batch_size=500)
    same_files(plain, out)


def test_deeply_nested_json_checkpoint_exits_2(tmp_path):
    log = write_log(tmp_path / "log.jsonl", 100, seed=6)
    ckpt = tmp_path / "c.json"
    ckpt.write_text('{"format": "streameval-checkpoint", "version": 1, "state": '
                    + "[" * 100_000 + "]" * 100_000 + "}")
    from streameval.cli import main
    code = main(["replay", str(log), "--checkpoint", str(ckpt), "--no-report", "--out",
                 str(tmp_path / "o")])
    assert code == 2


# ------------------------------------------------------------------ what changed only
def _same_tree(a, b, where="state"):
    """Two state trees equal: arrays by dtype, shape and bytes, the rest by value."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (where, sorted(a), sorted(b))
        for k in a:
            _same_tree(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same_tree(x, y, f"{where}[{i}]")
    else:
        assert a == b or (a != a and b != b), (where, a, b)


def _plain(tree):
    """A state tree with the subtrees a Monitor marks (``{"$b": ...}``) inlined."""
    if isinstance(tree, dict):
        if set(tree) == {"$b"}:
            return _plain(tree["$b"])
        return {k: _plain(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_plain(v) for v in tree]
    return tree


def test_unchanged_segments_are_referenced_not_written_again(tmp_path):
    rng = np.random.default_rng(8)
    m = Monitor.default(group_by="segment")
    segs = [f"s{i}" for i in range(30)]

    def feed(names, k, t0):
        y = rng.random(k) < 0.3
        m.update_many(y, rng.random(k) * 0.6 + 0.3 * y, t=np.arange(t0, t0 + k, dtype=float),
                      segment=list(rng.choice(names, k)))

    feed(segs, 6000, 0)
    w = StateWriter(tmp_path / "c.json")
    w.write(m.to_array_state(), kind="monitor")
    # every segment and the whole stream, each with its metrics, drift tests and rules
    assert w.last["subtrees"] == 31 * 4
    before = json.loads((tmp_path / "c.json").read_text())["state"]["data"]["segments"]
    feed(["s3", "s7"], 500, 6000)
    assert all(m._segments[s].pending and m._segments[s].n == m._segments["s0"].n
               for s in ("s3", "s7"))  # (buffered, not fed: below their next row)
    w.write(m.to_array_state(), kind="monitor")
    # the whole stream's scope (fed) and the two segments that buffered events (their
    # buffer only: their metrics', drift tests' and rules' subtrees are referenced)
    assert w.last["subtrees"] == 4 + 2, w.last
    after = json.loads((tmp_path / "c.json").read_text())["state"]["data"]["segments"]
    assert sum(a != b for a, b in zip(after, before)) == 3
    full = StateWriter(tmp_path / "f.json")
    full.write(m.to_array_state(), kind="monitor")
    assert w.last["bytes"] < 0.5 * full.last["bytes"], (w.last, full.last)
    # a snapshot reads every segment (a read may reshape a score order): what a
    # read changed is captured too, never a stale state
    m.snapshot()
    w.write(m.to_array_state(), kind="monitor")
    loaded = Monitor.from_array_state(load_checkpoint(tmp_path / "c.json",
                                                      expected_kind="monitor"))
    _same_tree(_plain(loaded.to_array_state()), _plain(m.to_array_state()))
    assert json.dumps(loaded.to_state()) == json.dumps(m.to_state())
    # and both go on alike
    t0 = 6500
    for mon in (m, loaded):
        r = np.random.default_rng(1)
        y = r.random(3000) < 0.3
        mon.update_many(y, r.random(3000), t=np.arange(t0, t0 + 3000, dtype=float),
                        segment=list(r.choice(segs, 3000)))
    assert json.dumps(loaded.snapshot()) == json.dumps(m.snapshot())


def test_a_damaged_segment_subtree_is_refused(tmp_path):
    rng = np.random.default_rng(9)
    m = Monitor.default(group_by="segment")
    y = rng.random(4000) < 0.3
    m.update_many(y, rng.random(4000), t=np.arange(4000.0),
                  segment=list(rng.choice(["a", "b"], 4000)))
    path = tmp_path / "c.json"
    StateWriter(path).write(m.to_array_state(), kind="monitor")
    env = json.loads(path.read_text())
    ref = env["state"]["data"]["segments"][1]["$b"]
    assert ref[3] == "json" and ref[4] == [ref[2]]
    pack = Path(pack_dir(path)) / ref[0]
    raw = bytearray(pack.read_bytes())
    assert json.loads(bytes(raw[ref[1]:ref[1] + ref[2]]))["segment"] in ("a", "b")
    raw[ref[1] + ref[2] // 2] ^= 0x01
    pack.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="subtree .* CRC-32") as e:
        load_checkpoint(path, expected_kind="monitor")
    assert e.value.damaged


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), reads=st.booleans())
def test_average_precision_running_negatives_are_rebuilt_bit_for_bit(seed, reads):
    """With integer weights a checkpoint leaves AP's running negative weights out; the
    load computes them again: the same bits as the ones kept while streaming."""
    rng = np.random.default_rng(seed)
    ap = streameval.AveragePrecision()
    for _ in range(int(rng.integers(1, 30))):
        k = int(rng.integers(1, 6000))
        y = rng.random(k) < rng.random()
        w = rng.integers(0, 4, k).astype(float) if rng.random() < 0.3 else None
        ap.update_many(y, np.round(rng.random(k), int(rng.integers(2, 12))), w)
        if reads:
            ap.get()
    state = array_state(ap)
    back = from_array_state(_roundtrip(state))
    lv, lb = ap._so._levels, back._so._levels
    if lv is None:
        return
    if lv.ap:
        assert all(s.pn is not None for s in lb.pos)
    for s, t in zip(lv.pos, lb.pos):
        assert (s.pn is None) == (t.pn is None)
        if s.pn is not None:
            assert s.pn.tobytes() == t.pn.tobytes()
            if lv.integral:  # (left out of the state: computed again)
                assert state["data"]["order"]["levels"]["pos"][0]["pn"] is None


# ---------------------------------------------------------- time windows, joiner
def _time_windows():
    return [streameval.Sliding(streameval.ROCAUC(), period=300.0),
            streameval.Sliding(streameval.Precision(), period=50.0, lateness=20.0),
            streameval.Tumbling(streameval.AveragePrecision(), period=200.0),
            streameval.Tumbling(streameval.Recall(), size=700)]


def _feed_timed(obj, rng, n, t0):
    y = rng.random(n) < 0.35
    s = rng.random(n)
    t = t0 + np.sort(rng.random(n)) * n * 0.3 + rng.normal(0, 3, n)  # some late
    obj.update_many(y, s, t=t)
    for _ in range(int(rng.integers(0, 4))):  # single events too (kept as given)
        obj.update(bool(rng.random() < 0.5), float(rng.random()),
                   t=float(t[-1]) if n else t0)
    return t0 + n * 0.3


def _joiner(rng, n):
    from streameval.io.delayed import LabelJoiner
    j = LabelJoiner(float(rng.integers(50, 10_000)))
    kind = rng.integers(0, 3)
    for i in range(n):
        key = (int(rng.integers(-2**40, 2**40)) if kind == 0 else f"id-{i}-é" if kind == 1
               else (i if i % 2 else str(i)))
        seg = [None, "a", ("b", 2)][int(rng.integers(0, 3))]
        j._pending[key] = e = (float(rng.random() * 1000), float(rng.random()),
                               float(rng.integers(1, 3)), seg, i + 1, i)
        j._heap.append((e[0], i, key))
        j._seq = i + 1
    j._heap.sort()
    j.watermark = float(rng.random() * 10)
    j.n_predictions = n
    return j


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 4000))
def test_time_windows_tumbling_and_the_label_join_round_trip(tmp_path_factory, seed, n):
    from streameval.io.delayed import LabelJoiner
    rng = np.random.default_rng(seed)
    d = tmp_path_factory.mktemp("tw")
    for obj in _time_windows():
        _feed_timed(obj, rng, n, 0.0)
        w = StateWriter(d / "c.json")
        state = array_state(obj)
        assert state.get("arrays") == 1, type(obj).__name__
        w.write({"x": state}, kind="k")
        back = from_array_state(load_checkpoint(d / "c.json")["x"])
        assert json.dumps(back.to_state()) == json.dumps(obj.to_state()), type(obj).__name__
        # and they go on alike
        r1, r2 = np.random.default_rng(seed + 1), np.random.default_rng(seed + 1)
        _feed_timed(obj, r1, 500, n * 0.3)
        _feed_timed(back, r2, 500, n * 0.3)
        assert json.dumps(back.to_state()) == json.dumps(obj.to_state()), type(obj).__name__
    j = _joiner(rng, n % 500)
    w = StateWriter(d / "j.json")
    w.write({"j": j.to_array_state()}, kind="k")
    raw = json.loads((d / "j.json").read_text())["state"]["j"]
    assert raw["pending"] is None and "$a" in json.dumps(raw["columns"]["score"])
    back = LabelJoiner.from_state(load_checkpoint(d / "j.json")["j"])
    assert back.to_state() == j.to_state()
    assert back._pending == j._pending and sorted(back._heap) == sorted(j._heap)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_a_chain_of_incremental_checkpoints_equals_a_full_one(tmp_path_factory, seed):
    """Time windows, tumbling windows and a segmented monitor, saved after each of
    several feeds by one writer (incremental) and once by a fresh one: equal loads."""
    rng = np.random.default_rng(seed)
    d = tmp_path_factory.mktemp("chain")
    objs = _time_windows()
    mon = Monitor.default(group_by="segment")
    w = StateWriter(d / "c.json")
    t0 = 0.0
    for step in range(5):
        k = int(rng.integers(1, 3000))
        for o in objs:
            _feed_timed(o, rng, k, t0)
        y = rng.random(k) < 0.3
        mon.update_many(y, rng.random(k), t=t0 + np.arange(k, dtype=float),
                        segment=list(rng.choice(["a", "b", "c", "d"][:1 + step % 4], k)))
        t0 += k
        w.write({"objs": [array_state(o) for o in objs], "m": mon.to_array_state()}, kind="k")
    f = StateWriter(d / "f.json")
    f.write({"objs": [array_state(o) for o in objs], "m": mon.to_array_state()}, kind="k")
    chain, once = load_checkpoint(d / "c.json"), load_checkpoint(d / "f.json")
    _same_tree(chain, once)
    for o, s in zip(objs, chain["objs"]):
        assert json.dumps(from_array_state(s).to_state()) == json.dumps(o.to_state())
    assert json.dumps(Monitor.from_array_state(chain["m"]).to_state()) == json.dumps(
        mon.to_state())


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1),
       steps=st.lists(st.sampled_from(["many", "buffer", "one", "evaluate", "snapshot"]),
                      min_size=2, max_size=7))
def test_a_chain_of_segment_checkpoints_equals_the_monitor_at_every_step(
        tmp_path_factory, seed, steps):
    """A segmented monitor saved by one writer after each step: events on many
    segments (some fed at their own rows), a few events on one segment (its buffer only:
    its metrics', drift tests' and rules' subtrees referenced), one event, an evaluation
    (every buffer fed, rules evaluated without new events) or a snapshot (reads). Each
    load equals the monitor then, and the last equals a fresh writer's full checkpoint."""
    rng = np.random.default_rng(seed)
    d = tmp_path_factory.mktemp("segchain")
    mon = Monitor.default(group_by="segment")
    w = StateWriter(d / "c.json")
    names = ["a", "b", "c", "d", "e"]
    t0 = 0
    for step in steps:
        if step in ("many", "buffer"):
            k = int(rng.integers(800, 2500)) if step == "many" else int(rng.integers(1, 60))
            y = rng.random(k) < 0.3
            seg = list(rng.choice(names, k)) if step == "many" else [names[t0 % 5]] * k
            mon.update_many(y, rng.random(k), t=t0 + np.arange(k, dtype=float), segment=seg)
            t0 += k
        elif step == "one":
            mon.update(bool(rng.random() < 0.3), float(rng.random()), t=float(t0),
                       segment=names[int(rng.integers(5))])
            t0 += 1
        elif step == "evaluate":
            mon.evaluate()
        else:
            mon.snapshot()
        w.write(mon.to_array_state(), kind="monitor")
        # (to_state below may merge a score order's deferred work: a fresh writer's full
        # checkpoint is taken of the same state first)
        StateWriter(d / "f.json").write(mon.to_array_state(), kind="monitor")
        _same_tree(_plain(load_checkpoint(d / "c.json")), _plain(load_checkpoint(d / "f.json")))
        got = Monitor.from_array_state(load_checkpoint(d / "c.json", expected_kind="monitor"))
        assert json.dumps(got.to_state()) == json.dumps(mon.to_state()), step


def test_damage_inside_a_segments_metrics_or_buffer_is_refused(tmp_path):
    """A flipped byte in a segment's metrics subtree (referenced from the segment's own
    subtree) or in its buffer's columns is refused by its CRC-32, naming the pack."""
    rng = np.random.default_rng(21)
    m = Monitor.default(group_by="segment")
    y = rng.random(5000) < 0.3
    m.update_many(y, rng.random(5000), t=np.arange(5000.0),
                  segment=list(rng.choice(["a", "b"], 5000)))
    m.evaluate()
    y = rng.random(300) < 0.3
    m.update_many(y, rng.random(300), t=5000 + np.arange(300.0), segment=["a"] * 300)
    path = tmp_path / "c.json"
    StateWriter(path).write(m.to_array_state(), kind="monitor")
    env = json.loads(path.read_text())
    d = Path(pack_dir(path))

    def read(ref):
        return json.loads((d / ref[0]).read_bytes()[ref[1]:ref[1] + ref[2]])

    segs = [read(x["$b"]) for x in env["state"]["data"]["segments"]]
    a = next(s for s in segs if s["segment"] == "a")
    assert set(a["metrics"]) == {"$b"} and set(a["drift"]) == {"$b"}
    assert len(a["evaluation"]["pending"]["s"]["$a"][4]) == 1  # (a column, not a list)
    assert a["evaluation"]["pending"]["s"]["$a"][4] == [300]
    for ref, what in ((a["metrics"]["$b"], "subtree"),
                      (a["evaluation"]["pending"]["s"]["$a"], "array")):
        pack = d / ref[0]
        good = pack.read_bytes()
        raw = bytearray(good)
        raw[ref[1] + ref[2] // 2] ^= 0x04
        pack.write_bytes(bytes(raw))
        with pytest.raises(CheckpointError, match=f"an? {what} of pack .* CRC-32") as e:
            load_checkpoint(path, expected_kind="monitor")
        assert e.value.damaged and str(pack) in str(e.value)
        pack.write_bytes(good)
    back = Monitor.from_array_state(load_checkpoint(path, expected_kind="monitor"))
    assert json.dumps(back.to_state()) == json.dumps(m.to_state())


# ------------------------------------------------------- subtrees and their JSON
_text = st.text(alphabet=st.sampled_from(list('ab"\\[]{}é$\n ')), max_size=6)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**62, 2**62),
                    st.floats(allow_nan=True, allow_infinity=True), _text)


def _array_st():
    return st.one_of(
        st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=8).map(
            lambda v: np.array(v, dtype=np.float64)),
        st.lists(st.booleans(), max_size=8).map(lambda v: np.array(v, dtype=bool)),
        st.lists(st.integers(-2**62, 2**62), max_size=8).map(
            lambda v: np.array(v, dtype=np.int64)))


_content = st.recursive(
    st.one_of(_scalar, _array_st()),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(_text.filter(lambda k: k not in ("$a", "$b")),
                                            inner, max_size=4)),
    max_leaves=25)


def _expected(x):
    """What a load gives back for a state tree: tuples as lists, numpy scalars as
    Python ones, subtree markers inlined by :func:`_plain` in the comparisons."""
    if isinstance(x, dict):
        return {k: _expected(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_expected(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contents=st.lists(_content, min_size=1, max_size=5), nested=st.booleans(),
       frozen=st.booleans())
def test_subtrees_load_back_exactly_whatever_they_hold(tmp_path_factory, contents, nested,
                                                       frozen):
    """Subtrees of any JSON content with arrays anywhere (strings with quotes,
    backslashes and brackets, NaN, a subtree inside a subtree), written by the JSON
    encoder or walked, load back equal to what was given, and again from a second,
    incremental checkpoint that references them."""
    def freeze(x):
        if isinstance(x, np.ndarray) and frozen:
            x.flags.writeable = False
        elif isinstance(x, dict):
            for v in x.values():
                freeze(v)
        elif isinstance(x, list):
            for v in x:
                freeze(v)
        return x

    subs = [{"$b": freeze(c)} for c in contents]
    if nested:
        subs.append({"$b": {"inner": subs[0], "n": 1}})
    tree = {"segments": subs, "scalar": np.int64(3), "t": (1, 2.5)}
    d = tmp_path_factory.mktemp("sub")
    w = StateWriter(d / "c.json")
    w.write(tree, kind="k")
    want = _expected(_plain(tree))
    _same_tree(load_checkpoint(d / "c.json"), want)
    w.write(tree, kind="k")  # (the same subtree objects: referenced)
    assert w.last["subtrees"] == 0
    _same_tree(load_checkpoint(d / "c.json"), want)


@pytest.mark.parametrize("quote", [False, True])
def test_a_writer_never_writes_a_state_its_reader_refuses_as_too_deep(tmp_path, quote):
    """Near the deepest level a reader goes, inside a subtree: either the write raises
    ``ValueError`` naming the depth, or the checkpoint loads back."""
    from streameval.io.checkpoint import MAX_DEPTH

    def nest(k):
        x = [1.5]
        for _ in range(k):
            x = [x, 'a]]"' if quote else "a]]}"]
        return x

    written = refused = 0
    for k in range(MAX_DEPTH - 10, MAX_DEPTH + 2):
        path = tmp_path / f"c{k}.json"
        a = np.arange(3.0)
        try:
            StateWriter(path).write({"s": [{"$b": {"x": nest(k), "a": a}}]}, kind="k")
        except ValueError as e:
            assert "nested deeper" in str(e)
            refused += 1
            continue
        got = load_checkpoint(path, fallback=False)
        assert got["s"][0]["x"] == _expected(nest(k))
        assert got["s"][0]["a"].tolist() == [0.0, 1.0, 2.0]
        written += 1
    assert written and refused


def test_after_a_restart_unchanged_window_batches_are_referenced(tmp_path):
    """A monitor restored from a checkpoint, its writer told where the loaded arrays
    are: the next checkpoint references the windows' stored batches of the segments
    that got no event (their pack is the old one), and loads equal to the monitor."""
    rng = np.random.default_rng(12)
    m = Monitor.default(group_by="segment")
    segs = [f"s{i}" for i in range(12)]
    y = rng.random(6000) < 0.3
    m.update_many(y, rng.random(6000), t=np.arange(6000.0), segment=list(rng.choice(segs, 6000)))
    m.evaluate()  # every segment's buffered events fed to its metrics (its windows' batches)
    path = tmp_path / "c.json"
    StateWriter(path).write(m.to_array_state(), kind="monitor")
    first = json.loads(path.read_text())["packs"]
    w = StateWriter(path)
    back = Monitor.from_array_state(load_checkpoint(path, expected_kind="monitor", writer=w))
    y = rng.random(500) < 0.3
    back.update_many(y, rng.random(500), t=6000 + np.arange(500.0), segment=["s1"] * 500)
    w.write(back.to_array_state(), kind="monitor")
    env = json.loads(path.read_text())
    d = Path(pack_dir(path))
    stores = 0

    def subtree(ref):  # (the JSON a subtree reference points at)
        ref = ref["$b"]
        return json.loads((d / ref[0]).read_bytes()[ref[1]:ref[1] + ref[2]])

    for ref in env["state"]["data"]["segments"]:
        seg = subtree(ref)
        if seg["segment"] in ("s1", None):
            continue
        for name, ms in subtree(seg["metrics"]).items():
            if "@" in name and "store" in ms.get("data", {}):
                for run in ms["data"]["store"]:
                    # (a run packed with others' names its group, whose columns the
                    # monitor's own data holds)
                    cols = env["state"]["data"]["window_groups"][str(run["g"])] if "g" in run else run
                    assert cols["y"]["$a"][0] in first, (seg["segment"], name)
                    stores += 1
    assert stores >= 10 * 3
    again = Monitor.from_array_state(load_checkpoint(path, expected_kind="monitor"))
    assert json.dumps(again.to_state()) == json.dumps(back.to_state())


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_a_chain_through_restarts_equals_a_full_checkpoint(tmp_path_factory, seed):
    """A segmented monitor checkpointed after each feed, restored from its newest
    checkpoint (the writer adopting the loaded arrays) at random steps and fed on: the
    chain's load equals a full checkpoint of a monitor never restored, and both go on
    alike."""
    rng = np.random.default_rng(seed)
    d = tmp_path_factory.mktemp("restart")
    ref = Monitor.default(group_by="segment")
    mon = Monitor.default(group_by="segment")
    w = StateWriter(d / "c.json")
    t0 = 0.0
    for step in range(6):
        k = int(rng.integers(1, 2500))
        y = rng.random(k) < 0.3
        s = rng.random(k)
        seg = list(rng.choice(["a", "b", "c"][:1 + step % 3], k))
        for x in (ref, mon):
            x.update_many(y, s, t=t0 + np.arange(k, dtype=float), segment=seg)
        t0 += k
        w.write({"m": mon.to_array_state()}, kind="k")
        if rng.random() < 0.5:
            w = StateWriter(d / "c.json")
            mon = Monitor.from_array_state(load_checkpoint(d / "c.json", writer=w)["m"])
    # (a restored window keeps its batches packed in the runs it loaded, where one
    # never restored packs them in one: the layouts differ, the states do not)
    f = StateWriter(d / "f.json")
    f.write({"m": ref.to_array_state()}, kind="k")
    chain = Monitor.from_array_state(load_checkpoint(d / "c.json")["m"])
    once = Monitor.from_array_state(load_checkpoint(d / "f.json")["m"])
    assert json.dumps(chain.to_state()) == json.dumps(once.to_state()) == json.dumps(
        ref.to_state())
    y = rng.random(3000) < 0.3
    s = rng.random(3000)
    for x in (chain, ref):
        x.update_many(y, s, t=t0 + np.arange(3000.0), segment=["a", "b", "c"] * 1000)
    assert json.dumps(chain.snapshot()) == json.dumps(ref.snapshot())


# ------------------------------------------------------- flat score orders as logs
def _entries(arrays):
    """``{score bits: (wp bits, wn bits, cp, cn)}`` of a flat order's arrays: the
    brute-force view of what changed between two of them."""
    k, wp, wn, cp, cn = (np.asarray(a) for a in arrays)
    return {int(a): (int(b), int(c), int(d), int(e)) for a, b, c, d, e in zip(
        k.view(np.int64), wp.view(np.int64), wn.view(np.int64), cp.astype(np.int64),
        cn.astype(np.int64))}


def _batch(rng, m, weighted, grid):
    keys = np.unique(rng.choice(grid, m))
    if rng.random() < 0.2:  # (a score of -0.0 where 0.0 may be stored: one score)
        keys = np.unique(np.concatenate([keys[keys != 0.0], [-0.0]]))
    cp = rng.integers(0, 3, len(keys))
    cn = rng.integers(0, 3, len(keys))
    cn[(cp + cn) == 0] = 1
    if weighted:
        wp, wn = cp * rng.random(len(keys)) * 2, cn * rng.random(len(keys)) * 2
    else:
        wp, wn = cp.astype(float), cn.astype(float)
    return keys, wp, wn, cp, cn


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), weighted=st.booleans(),
       steps=st.lists(st.sampled_from(["add", "add", "remove", "same", "read"]),
                      min_size=1, max_size=14))
def test_a_flat_orders_log_replays_bit_for_bit(seed, weighted, steps):
    """A flat score order captured after each step (batches in, stored events out, no
    change, a read): each capture loads back to the same bits (its arrays, ``U``, its
    JSON state) and goes on alike; its newest run holds exactly the entries whose bits
    changed since the last capture (added, reweighted, removed: brute force over the
    two captures' entries), and the log stays within its bounds."""
    from streameval.metrics.scoreorder import LAYOUT_RUNS, ScoreOrder

    rng = np.random.default_rng(seed)
    grid = np.round(np.linspace(0.0, 1.0, 400), 4)
    so = ScoreOrder()
    so.add_entries(*_batch(rng, 300, weighted, grid))
    before = _entries(so.arrays())
    runs_before = 0
    for step in steps:
        if step == "add":
            so.add_entries(*_batch(rng, int(rng.integers(1, 120)), weighted, grid))
        elif step == "remove" and len(so):
            k, wp, wn, cp, cn = so.arrays()
            at = np.sort(rng.choice(len(k), min(len(k), int(rng.integers(1, 60))),
                                    replace=False))
            rp, rn = np.minimum(cp[at], 1), np.minimum(cn[at], 1)
            so.remove_entries(k[at], np.where(rp > 0, wp[at] / np.maximum(cp[at], 1), 0.0)
                              * rp if weighted else rp.astype(float),
                              np.where(rn > 0, wn[at] / np.maximum(cn[at], 1), 0.0) * rn
                              if weighted else rn.astype(float), rp, rn)
        elif step == "read":
            so.auc()
        assert so._arrays is not None  # (flat: the layout under test)
        lay = so.to_layout()
        so._check()
        now = _entries(so.arrays())
        runs = lay.get("runs", [])
        assert lay["layout"] == ("flat_runs" if runs else "flat")
        assert len(runs) <= LAYOUT_RUNS
        assert sum(r[0].shape[1] for r in runs) <= max(len(now), 1)
        assert all(not a.flags.writeable for a in lay["flat"])
        if len(runs) == runs_before + 1:  # a new run: exactly what changed
            changed = {k for k in now if before.get(k) != now[k]}
            removed = {k for k in before if k not in now
                       and not (k ^ (1 << 63)) in now}  # (-0.0 and 0.0: one score)
            run = runs[-1]
            got = set(run[0][0].view(np.int64).tolist())
            assert got == changed | removed, (sorted(got ^ (changed | removed)))
        elif runs:  # the same log: nothing changed
            assert len(runs) == runs_before and now == before
        before, runs_before = now, len(runs)
        back = ScoreOrder.from_layout(_roundtrip(lay))
        back._check()
        for a, b in zip(back.arrays(), so.arrays()):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
        assert json.dumps(back.to_data()) == json.dumps(so.to_data())
        again = back.to_layout()  # (restored with its log: the same layout again)
        _same_tree(again, lay)
    batch = _batch(rng, 50, weighted, grid)
    back = ScoreOrder.from_layout(_roundtrip(so.to_layout()))
    for x in (so, back):
        x.add_entries(*batch)
    assert back.u == so.u and back.auc() == so.auc() or (so.auc() != so.auc())


def _monitor_fed(steps, seed=0, segments=("a", "b", "c"), k=900):
    mon = Monitor.default(group_by="segment")
    rng = np.random.default_rng(seed)
    for step in range(steps):
        y = rng.random(k) < 0.3
        mon.update_many(y, np.round(rng.random(k), 3), t=step * k + np.arange(k, dtype=float),
                        segment=list(rng.choice(segments, k)))
        mon.evaluate()
    return mon, rng


def _flat_runs(tree, out=None, where="state"):
    """``(where, layout)`` of every flat order with runs in a state tree."""
    out = [] if out is None else out
    if isinstance(tree, dict):
        if tree.get("layout") == "flat_runs":
            out.append((where, tree))
        for k, v in tree.items():
            _flat_runs(v, out, f"{where}.{k}")
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            _flat_runs(v, out, f"{where}[{i}]")
    return out


def test_segments_fed_since_write_runs_of_what_changed_and_damage_to_one_is_refused(tmp_path):
    """Every segment fed between checkpoints: the second checkpoint writes each flat
    order's run of changed entries and references its arrays written before (far fewer
    bytes than a fresh writer's full checkpoint of the same state); the chain loads
    equal to the monitor; a flipped byte in a run is refused by its CRC-32 (the previous
    generation is then loaded), and a run edited by hand (a score removed that the
    order does not hold, scores out of order) is refused naming the run."""
    mon, rng = _monitor_fed(2)
    path = tmp_path / "c.json"
    w = StateWriter(path)
    w.write(mon.to_array_state(), kind="monitor")
    y = rng.random(600) < 0.3
    mon.update_many(y, np.round(rng.random(600), 3), t=1800 + np.arange(600.0),
                    segment=list(rng.choice(["a", "b", "c"], 600)))
    mon.evaluate()
    state = mon.to_array_state()
    w.write(state, kind="monitor")
    full = StateWriter(tmp_path / "f.json")
    full.write(mon.to_array_state(), kind="monitor")
    assert w.last["bytes"] < 0.6 * full.last["bytes"], (w.last, full.last)
    loaded = load_checkpoint(path, expected_kind="monitor")
    logs = _flat_runs(loaded)
    assert len(logs) >= 6, [x for x, _ in logs]  # (each segment's order and window's)
    assert json.dumps(Monitor.from_array_state(loaded).to_state()) == json.dumps(
        mon.to_state())
    env = json.loads(path.read_text())
    d = Path(pack_dir(path))
    newest = f"{env['seq']:012d}.pack"

    def refs(x):  # the array references of the manifest, subtrees read from the packs
        if isinstance(x, dict):
            if set(x) == {"$b"}:
                r = x["$b"]
                yield from refs(json.loads((d / r[0]).read_bytes()[r[1]:r[1] + r[2]]))
                return
            if set(x) == {"$a"}:
                yield x["$a"]
                return
            for k, v in x.items():
                yield from refs(v) if k != "runs" else ((r, "run") for r in _run_refs(v))
        elif isinstance(x, list):
            for v in x:
                yield from refs(v)

    def _run_refs(v):
        for run in v:
            for a in run:
                yield a["$a"]

    run_refs = [r for r in refs(env["state"]) if isinstance(r, tuple)]
    assert run_refs and all(r[0][0] == newest for r in run_refs[-1:])
    ref = run_refs[-1][0]
    pack = d / ref[0]
    good = pack.read_bytes()
    raw = bytearray(good)
    raw[ref[1] + ref[2] // 2] ^= 0x10
    pack.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="an array of pack .* CRC-32") as e:
        load_checkpoint(path, expected_kind="monitor", fallback=False)
    assert e.value.damaged and str(pack) in str(e.value)
    with pytest.warns(CheckpointFallback):
        prev = load_checkpoint(path, expected_kind="monitor")
    assert Monitor.from_array_state(prev).n == mon.n - 600
    # hand-edited runs: refused with the run named
    where, lay = _flat_runs(loaded)[0]
    from streameval.metrics.scoreorder import ScoreOrder

    run = lay["runs"][-1][0]
    bad = run.copy()
    bad[0] = bad[0][::-1]
    with pytest.raises(ValueError, match=r"runs\[\d+\]: scores must be finite and increasing"):
        ScoreOrder.from_layout(dict(lay, runs=lay["runs"][:-1] + [[bad]]))
    gone = np.array([[2.5], [0.0], [0.0]])  # (a score never stored, removed)
    with pytest.raises(ValueError, match="removes a score the order does not hold"):
        ScoreOrder.from_layout(dict(lay, runs=lay["runs"] + [[gone]]))
    with pytest.raises(ValueError, match=r"runs\[0\]\[0\] is not a float64 array of 3 rows"):
        ScoreOrder.from_layout(dict(lay, runs=[[run[:2]]]))
    with pytest.raises(ValueError, match="layout = 'flat_run'"):
        ScoreOrder.from_layout(dict(lay, layout="flat_run"))


def _window_runs(state):
    """The batch sizes of every count window's packed runs in a monitor's array state."""
    out = []

    def walk(x):
        if isinstance(x, dict):
            if isinstance(x.get("store"), list):
                # (a run packed with others' holds its part ``at`` of its group)
                out.append([len(r["y"]) if "y" in r else r["at"][1] - r["at"][0]
                            for r in x["store"] if "y" in r or "at" in r])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(state)
    return out


def test_a_restored_window_is_not_packed_again_until_new_batches(tmp_path):
    """The fixture's windows hold one run per checkpoint, of equal sizes: captured again
    with no new event they keep those runs (merging waits for a new run); the first new
    run then joins the runs it is at least half of, and the state loads equal."""
    import tarfile

    with tarfile.open(DATA / "binary_checkpoint_flat_whole.tar.gz") as t:
        t.extractall(tmp_path, filter="data")
    path = tmp_path / "ckpt.json"
    w = StateWriter(path)
    back = Monitor.from_array_state(load_checkpoint(path, expected_kind="monitor", writer=w))
    runs = _window_runs(back.to_array_state())
    # (3 checkpoints of 1 200 events: the whole stream's windows; a segment's are smaller)
    assert runs[0] == [1200, 1200, 1200], runs
    assert _window_runs(back.to_array_state()) == runs
    r = np.random.default_rng(7)
    back.update_many(r.random(900) < 0.3, np.round(r.random(900), 3),
                     t=3600 + np.arange(900.0), segment=["a"] * 900)
    st = back.to_array_state()
    assert _window_runs(st)[0] == [4500]  # (900 >= 1 200 / 2, then 2 100 >= 600, ...)
    w.write(st, kind="monitor")
    again = Monitor.from_array_state(load_checkpoint(path, expected_kind="monitor"))
    assert json.dumps(again.to_state()) == json.dumps(back.to_state())


def test_a_binary_checkpoint_without_logs_still_loads_and_goes_on(tmp_path, monkeypatch):
    """A checkpoint chain whose flat orders are stored whole, without runs
    (tests/data/binary_checkpoint_flat_whole.tar.gz): it loads equal to the same events fed
    to a fresh monitor, and a writer adopting it writes runs from there on; that chain
    loads equal too.

    (The windows' runs are not merged here: the fixture's windows hold one run per
    checkpoint of equal size, so the first new run would pack them all again, once,
    which this test's bound on the bytes written is not about: it checks that the loaded
    orders' arrays are referenced, not written again.)"""
    import tarfile

    from streameval.windows import count

    monkeypatch.setattr(count, "RUN_MERGE", float("inf"))

    with tarfile.open(DATA / "binary_checkpoint_flat_whole.tar.gz") as t:
        t.extractall(tmp_path, filter="data")
    path = tmp_path / "ckpt.json"
    # (the fixture's events: 3 steps of 1 200 rounded scores on three segments; it was
    # written when the whole stream ran the drift detectors too, as its state says)
    ref = Monitor.default(group_by="segment", overall_drift=True)
    for step in range(3):
        r = np.random.default_rng(100 + step)
        y = r.random(1200) < 0.3
        s = np.round(r.random(1200), 3)
        ref.update_many(y, s, t=step * 1200 + np.arange(1200.0),
                        segment=list(r.choice(["a", "b", "c"], 1200)))
        ref.evaluate()
    w = StateWriter(path)
    state = load_checkpoint(path, expected_kind="monitor", writer=w)
    assert not _flat_runs(state)
    back = Monitor.from_array_state(state)
    # (the metrics as a fresh monitor has them; the drift detectors hold what the code
    # that wrote the fixture computed, and that code's statistic may differ)
    _assert_same_metrics(back.to_state(), ref.to_state())
    r = np.random.default_rng(7)
    y = r.random(900) < 0.3
    s = np.round(r.random(900), 3)
    for m in (back, ref):
        m.update_many(y, s, t=3600 + np.arange(900.0), segment=list(
            np.random.default_rng(8).choice(["a", "b", "c"], 900)))
        m.evaluate()
    w.write(back.to_array_state(), kind="monitor")
    # (the loaded arrays referenced, the runs written: less than a full checkpoint)
    full = StateWriter(tmp_path / "full" / "f.json")
    full.write(back.to_array_state(), kind="monitor")
    assert w.last["bytes"] < 0.6 * full.last["bytes"], (w.last, full.last)
    again = load_checkpoint(path, expected_kind="monitor")
    assert _flat_runs(again)
    assert json.dumps(Monitor.from_array_state(again).to_state()) == json.dumps(
        back.to_state())
    _assert_same_metrics(back.to_state(), ref.to_state())


def test_flat_orders_fed_alike_are_not_all_given_whole_at_one_checkpoint():
    """Orders fed alike (the segments of one stream), captured at each checkpoint: each
    log is given whole again now and then, but never all of them at once after the first
    capture, and each capture still loads back to the same entries."""
    from streameval.metrics.scoreorder import LAYOUT_RUNS, ScoreOrder

    rng = np.random.default_rng(4)
    grid = np.round(np.linspace(0.0, 1.0, 4000), 4)
    orders = [ScoreOrder() for _ in range(12)]
    for so in orders:
        so.add_entries(*_batch(rng, 200, False, grid))
        so.to_layout()
    whole = []
    for _ in range(3 * LAYOUT_RUNS):
        given = 0
        for so in orders:
            so.add_entries(*_batch(rng, 30, False, grid))
            lay = so.to_layout()
            given += not lay.get("runs")
            back = ScoreOrder.from_layout(lay)
            assert _entries(back.arrays()) == _entries(so.arrays())
        whole.append(given)
    assert sum(whole) >= 12  # (every log was given whole again at least once)
    assert max(whole) <= len(orders) // 2, whole


def _metrics_only(state):
    """A monitor's state without its drift detectors' states (nor the rules that read
    them)."""
    if isinstance(state, dict):
        if state.get("type") == "SequentialDrift":
            return None
        return {k: _metrics_only(v) for k, v in state.items()
                if k not in ("rules", "alerts", "drift")}
    if isinstance(state, list):
        return [_metrics_only(v) for v in state]
    return state


def _assert_same_metrics(got, want, path="", log=False):
    """The metrics of two monitor states (:func:`_metrics_only`) are equal, bit for bit,
    except the log loss's sums (under a ``log_loss`` key), equal to 1e-12: numpy picks
    its ``log`` kernel by the CPU's vector instructions, so the last bit of a logarithm,
    and of a sum of them, depends on the machine, and a fixture was written on another
    one."""
    if path == "":
        got, want = _metrics_only(got), _metrics_only(want)
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for k in want:
            _assert_same_metrics(got[k], want[k], f"{path}/{k}",
                                 log or str(k).startswith("log_loss"))
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same_metrics(g, w, f"{path}[{i}]", log)
    elif log and type(want) is float and type(got) is float:
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), path
    else:
        assert json.dumps(got) == json.dumps(want), path


# ------------------------------------------------------- detectors as typed columns
def _detector_stream(d, rng, n, shift, weighted, timed):
    y = rng.random(n) < 0.4
    s = np.clip(rng.random(n) * 0.6 + 0.3 * y - (np.arange(n) >= shift) * 0.25, 0.0, 1.0)
    w = rng.random(n) * 2 if weighted else None
    t = np.arange(n, dtype=float) if timed else None
    d.update_many(y, s, w=w, t=t)
    return y, s, w


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 6000),
       metrics=st.lists(st.sampled_from(["recall", "precision", "fpr", "accuracy", "roc_auc"]),
                        min_size=1, max_size=4),
       weighted=st.booleans(), timed=st.booleans(), odd=st.booleans())
def test_sequential_detectors_as_shared_columns_load_back_exactly(
        tmp_path_factory, seed, n, metrics, weighted, timed, odd):
    """Several detectors stored as the two columns they share, through a real writer:
    each loads back with the JSON state of the original, the candidates' float rows bit
    for bit, and goes on to the same reports and changes (the oracle: the detector never
    saved). ``odd``: one more event, leaving an AUC pair half made."""
    from streameval.sequential import SequentialDrift

    rng = np.random.default_rng(seed)
    # (the defaults, a candidate every 2 blocks and the blocks between checked only near
    # the level, or a block of any size and a candidate at every check)
    dets = [SequentialDrift(m, alpha=0.05) if rng.random() < 0.5
            else SequentialDrift(m, alpha=0.05, block=int(rng.integers(20, 120)))
            for m in metrics]
    shift = int(rng.integers(0, max(n, 1)))
    for d in dets:
        _detector_stream(d, rng, n, shift, weighted, timed)
        if odd:
            d.update(1, 0.7, t=float(n) if timed else None)
    states = SequentialDrift.columns_states(dets)
    assert all(s["data"]["columns"][0] is states[0]["data"]["columns"][0] for s in states)
    dirs = tmp_path_factory.mktemp("cols")
    StateWriter(dirs / "c.json").write({"d": states}, kind="k")
    env = json.loads((dirs / "c.json").read_text())
    assert json.dumps(env).count('"$a"') == 2 * len(dets)  # (references to 2 arrays)
    loaded = load_checkpoint(dirs / "c.json")["d"]
    for d, s in zip(dets, loaded):
        back = from_array_state(s)
        assert type(back) is SequentialDrift
        assert json.dumps(back.to_state()) == json.dumps(d.to_state())
        assert back._cands.f.tobytes() == d._cands.f.tobytes()
        assert back._cands.i.tobytes() == d._cands.i.tobytes()
        more = np.random.default_rng(seed + 1)
        y = more.random(3000) < 0.4
        s_ = np.clip(more.random(3000) * 0.6 + 0.3 * y - 0.3 * (np.arange(3000) > 1500), 0, 1)
        w = more.random(3000) * 2 if weighted else None
        t = np.arange(3000.0) + n + 1 if timed else None
        for x in (d, back):
            x.update_many(y, s_, w=w, t=t)
        assert json.dumps(back.to_state()) == json.dumps(d.to_state())
        assert [c.to_dict() for c in back.changes] == [c.to_dict() for c in d.changes]


def test_malformed_detector_columns_are_refused_by_name():
    """Wrong dtypes, offsets past the columns, a count that runs past them or an
    unknown key: ``ValueError`` naming the detector's columns, never another error."""
    from streameval.sequential import SequentialDrift

    d = SequentialDrift("recall", block=50)
    _detector_stream(d, np.random.default_rng(3), 2000, 1000, False, True)
    good = SequentialDrift.columns_states([d])[0]
    F, I = good["data"]["columns"]
    bad_m = I.copy()
    bad_m[6] = 10 ** 6
    edits = [
        {"columns": [F.astype(np.float32), I]},
        {"columns": [F, I.astype(np.float64)]},
        {"at": [len(F) + 1, 0]},
        {"at": [0, len(I) - 3]},
        {"at": [0.0, 0]},
        {"columns": [F, bad_m]},
        {"changes": [{"index": 1}]},
        {"extra": 1},
    ]
    for edit in edits:
        s = dict(good, data=dict(good["data"], **edit))
        with pytest.raises(ValueError, match="SequentialDrift columns|bad state"):
            from_array_state(s)
    assert json.dumps(from_array_state(good).to_state()) == json.dumps(d.to_state())


def test_a_damaged_detector_column_is_refused(tmp_path):
    """A segment's detectors are two typed columns in its drift subtree; one flipped
    byte in either is refused by its CRC-32, naming the pack, and the previous
    generation is loaded instead (with nothing lost: it is the state it was)."""
    rng = np.random.default_rng(5)
    m = Monitor.default(group_by="segment")
    y = rng.random(6000) < 0.3
    m.update_many(y, rng.random(6000), t=np.arange(6000.0),
                  segment=list(rng.choice(["a", "b"], 6000)))
    m.evaluate()
    path = tmp_path / "c.json"
    w = StateWriter(path)
    w.write(m.to_array_state(), kind="monitor")
    first = json.dumps(m.to_state())
    m.update_many(y[:500], rng.random(500), t=6000 + np.arange(500.0), segment=["a"] * 500)
    m.evaluate()
    w.write(m.to_array_state(), kind="monitor")
    env = json.loads(path.read_text())
    d = Path(pack_dir(path))

    def read(ref):
        return json.loads((d / ref[0]).read_bytes()[ref[1]:ref[1] + ref[2]])

    segs = [read(x["$b"]) for x in env["state"]["data"]["segments"]]
    a = next(s for s in segs if s["segment"] == "a")
    drift = read(a["drift"]["$b"])
    assert set(drift) == {"recall", "precision", "fpr"}
    cols = drift["recall"]["data"]["columns"]
    assert [c["$a"][3] for c in cols] == ["<f8", "<i8"]
    assert all(drift[k]["data"]["columns"] == cols for k in drift)  # (shared)
    import shutil

    saved = tmp_path.parent / (tmp_path.name + "-saved")
    shutil.copytree(tmp_path, saved)
    for ref in (c["$a"] for c in cols):
        pack = d / ref[0]
        raw = bytearray(pack.read_bytes())
        raw[ref[1] + ref[2] // 2] ^= 0x10
        pack.write_bytes(bytes(raw))
        with pytest.raises(CheckpointError, match="an array of pack .* CRC-32") as e:
            read_state(path, json.loads(path.read_text()))
        assert e.value.damaged and str(pack) in str(e.value)
        with pytest.warns(CheckpointFallback):
            prev = load_checkpoint(path, expected_kind="monitor")
        assert json.dumps(Monitor.from_array_state(prev).to_state()) == first
        shutil.rmtree(tmp_path)
        shutil.copytree(saved, tmp_path)
    back = Monitor.from_array_state(load_checkpoint(path, expected_kind="monitor"))
    assert json.dumps(back.to_state()) == json.dumps(m.to_state())


def test_a_flat_orders_run_after_batches_in_is_taken_from_their_scores(monkeypatch):
    """Batches merged into a flat order between captures: the capture takes the entries
    at their scores without comparing the arrays with the last capture's (the compare
    is made to fail), and the log loads back to the same bits; a removal between two
    captures makes it compare (the scores a removal changed are not noted)."""
    from streameval.metrics import scoreorder as so_mod
    from streameval.metrics.scoreorder import ScoreOrder

    rng = np.random.default_rng(11)
    grid = np.round(np.linspace(0.0, 1.0, 600), 4)
    so = ScoreOrder()
    so.add_entries(*_batch(rng, 500, True, grid))
    so.to_layout()
    compare = so_mod._flat_changes
    calls = []

    def refuse(*a):
        calls.append(1)
        raise AssertionError("compared")

    monkeypatch.setattr(so_mod, "_flat_changes", refuse)
    for _ in range(3):
        before = _entries(so.arrays())
        for _ in range(int(rng.integers(1, 4))):
            so.add_entries(*_batch(rng, int(rng.integers(1, 40)), True, grid))
        lay = so.to_layout()
        now = _entries(so.arrays())
        got = set(lay["runs"][-1][0][0].view(np.int64).tolist())
        assert got == {k for k in now if before.get(k) != now[k]}
        back = ScoreOrder.from_layout(_roundtrip(lay))
        for a, b in zip(back.arrays(), so.arrays()):
            assert a.tobytes() == b.tobytes()
    monkeypatch.setattr(so_mod, "_flat_changes", lambda *a: (calls.append(1), compare(*a))[1])
    k, wp, wn, cp, cn = so.arrays()
    at = np.flatnonzero(cp > 0)[:3]
    so.remove_entries(k[at], wp[at] / cp[at], np.zeros(3), np.ones(3, dtype=np.int64),
                      np.zeros(3, dtype=np.int64))
    lay = so.to_layout()
    assert calls == [1]
    back = ScoreOrder.from_layout(_roundtrip(lay))
    for a, b in zip(back.arrays(), so.arrays()):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("where", ["list", "dict"])
def test_a_cycle_inside_a_subtree_is_refused_and_nothing_installed(tmp_path, where):
    """A subtree holding itself (the JSON encoder runs without its cycle check there):
    ``ValueError`` naming the depth, no RecursionError, and the installed checkpoint
    is still the previous one, loading equal to what it was given."""
    path = tmp_path / "c.json"
    w = StateWriter(path)
    good = {"s": [{"$b": {"a": np.arange(4.0), "n": 1}}]}
    w.write(good, kind="k")
    loop = [] if where == "list" else {}
    if where == "list":
        loop.append(loop)
    else:
        loop["x"] = loop
    with pytest.raises(ValueError, match="nested deeper"):
        w.write({"s": [{"$b": {"a": np.arange(3.0), "loop": loop}}]}, kind="k")
    got = load_checkpoint(path, fallback=False)
    assert got["s"][0]["a"].tolist() == [0.0, 1.0, 2.0, 3.0] and got["s"][0]["n"] == 1
    assert json.loads(path.read_text())["seq"] == 1


def test_windows_of_one_batch_give_its_columns_and_share_their_sizes(tmp_path):
    """Sliding windows whose batches since the last capture are one batch give that
    batch's own columns (no copy) and one shared sizes array: a checkpoint writes the
    sizes once for all of them, and loads back windows equal to fresh ones fed the same
    events."""
    rng = np.random.default_rng(5)
    y = rng.random(300) < 0.4
    s = rng.random(300)
    wins = [streameval.Sliding(streameval.ROCAUC(), size=1000),
            streameval.Sliding(streameval.LogLoss(), size=1000),
            streameval.Sliding(streameval.Precision(), size=1000)]
    for win in wins:
        win.update_many(y, s)
    states = [array_state(win) for win in wins]
    stores = [st_["data"]["store"] for st_ in states]
    for win, store in zip(wins, stores):
        (run,) = store
        (chunk,) = win._chunks
        assert np.shares_memory(run["y"], chunk.y) and np.shares_memory(run["s"], chunk.s)
        assert not run["y"].flags.writeable and run["sizes"].tolist() == [300]
    assert stores[0][0]["sizes"].base is stores[1][0]["sizes"].base
    path = tmp_path / "c.json"
    w = StateWriter(path)
    w.write({"w": states}, kind="k")
    # (per window: labels and scores, plus the inner metric's arrays; sizes once)
    env = json.loads(path.read_text())
    refs = [r["store"][0]["sizes"]["$a"] for r in
            (x["data"] for x in env["state"]["w"])]
    assert len({(r[0], r[1]) for r in refs}) == 1
    back = [from_array_state(x) for x in load_checkpoint(path, fallback=False)["w"]]
    for win, b in zip(wins, back):
        fresh = type(win.metric)()
        fresh.update_many(y, s)
        assert b.get() == fresh.get() == win.get()
    # the run given before is given again; the next batch, alone, its own columns
    wins[0].update_many(y[:50], s[:50])
    first, second = array_state(wins[0])["data"]["store"]
    assert first["y"] is stores[0][0]["y"] and second["sizes"].tolist() == [50]
    assert np.shares_memory(second["s"], wins[0]._chunks[-1].s)
    # two batches since the last capture: one array per column, packed
    two = streameval.Sliding(streameval.ROCAUC(), size=1000)
    two.update_many(y, s)
    two.update_many(y[:50], s[:50])
    (run,) = array_state(two)["data"]["store"]
    assert run["sizes"].tolist() == [300, 50] and run["y"].tolist() == list(y) + list(y[:50])
    assert run["s"].tolist() == list(s) + list(s[:50])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(20, 1500),
       batches=st.lists(st.integers(1, 400), min_size=1, max_size=30),
       every=st.integers(1, 3))
def test_a_windows_runs_are_merged_into_few_and_load_back_equal(tmp_path_factory, seed,
                                                                  size, batches, every):
    """A window captured every ``every`` batches: its runs of batches hold exactly its
    live events (the last ``size`` fed, brute force), each run after the oldest holds less
    than half of the one before (so at most about log2(size) + 2 runs), the batches are
    views of their run's packed columns (the events held once), and a chain of incremental
    checkpoints loads back to the same state, whose AUC is scikit-learn's on those events
    and which goes on like the window never saved."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    d = tmp_path_factory.mktemp("runs")
    win = streameval.Sliding(streameval.ROCAUC(), size=size)
    w = StateWriter(d / "c.json")
    ys, ss = [], []
    for i, k in enumerate(batches):
        y, s = rng.random(k) < 0.4, np.round(rng.random(k), 2)
        win.update_many(y, s)
        ys.append(y)
        ss.append(s)
        if i % every and i != len(batches) - 1:
            continue
        state = array_state(win)
        store = state["data"]["store"]
        live_y = np.concatenate([r["y"][int(r["sizes"][:r["first"]].sum()) + r["lo"]:]
                                 for r in store])
        live_s = np.concatenate([r["s"][int(r["sizes"][:r["first"]].sum()) + r["lo"]:]
                                 for r in store])
        all_y, all_s = np.concatenate(ys)[-size:], np.concatenate(ss)[-size:]
        assert live_y.tolist() == all_y.tolist() and live_s.tolist() == all_s.tolist()
        lens = [len(r["y"]) for r in store]
        assert all(2 * b < a for a, b in zip(lens[1:], lens[2:])), lens
        assert len(store) <= math.log2(size) + 2, lens
        for r in store:
            assert not r["y"].flags.writeable and not r["s"].flags.writeable
        for ch in win._chunks:
            assert any(np.shares_memory(ch.s, r["s"]) for r in store)
        w.write({"w": state}, kind="k")
    back = from_array_state(load_checkpoint(d / "c.json", fallback=False)["w"])
    assert json.dumps(back.to_state()) == json.dumps(win.to_state())
    if 0 < all_y.sum() < len(all_y):
        assert abs(back.get() - roc_auc_score(all_y, all_s)) <= 1e-12
    y, s = rng.random(300) < 0.4, np.round(rng.random(300), 2)
    for x in (back, win):
        x.update_many(y, s)
    assert json.dumps(back.to_state()) == json.dumps(win.to_state())
    assert back.get() == win.get() or (math.isnan(back.get()) and math.isnan(win.get()))


def test_a_windows_run_is_merged_with_the_one_before_it_at_half_its_events(tmp_path):
    """By hand: runs of 300, then 100 (kept apart: under half), then 100 more (200 of
    the two: merged), which then joins the 300 (at least half): one run of 500 batches
    300, 100, 100; a checkpoint of it loads back equal."""
    rng = np.random.default_rng(4)
    win = streameval.Sliding(streameval.ROCAUC(), size=1000)
    sizes = []
    for k in (300, 100, 100):
        win.update_many(rng.random(k) < 0.5, rng.random(k))
        sizes.append([r["sizes"].tolist() for r in array_state(win)["data"]["store"]])
    assert sizes == [[[300]], [[300], [100]], [[300, 100, 100]]]
    w = StateWriter(tmp_path / "c.json")
    w.write({"w": array_state(win)}, kind="k")
    back = from_array_state(load_checkpoint(tmp_path / "c.json", fallback=False)["w"])
    assert json.dumps(back.to_state()) == json.dumps(win.to_state())


@pytest.mark.parametrize("field", ["$c", "region"])
def test_a_group_by_field_named_like_a_join_loads_back(tmp_path, field):
    """A state's own dict keyed ``"$c"`` (the count of events missing a ``group_by``
    field of that name) is not a joined array: it loads back as the dict it was."""
    from streameval.io.checkpoint import load_checkpoint

    m = streameval.Monitor({"auc": streameval.ROCAUC()}, group_by=field)
    rng = np.random.default_rng(0)
    y, s = rng.random(100) < 0.3, rng.random(100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (the missing field's warning)
        m.update_many(y, s, segment=[None] * 100)
    assert m.missing_segment_fields == {field: 100}
    StateWriter(tmp_path / "c.json").write(m.to_array_state(), kind="monitor")
    back = streameval.Monitor.from_array_state(load_checkpoint(tmp_path / "c.json"))
    assert back.missing_segment_fields == {field: 100}
    assert json.dumps(back.to_state()) == json.dumps(m.to_state())


@pytest.mark.parametrize("cls, oracle", [
    ("MAE", "mean_absolute_error"), ("MSE", "mean_squared_error"),
    ("RMSE", "root_mean_squared_error"), ("MAPE", "mean_absolute_percentage_error")])
def test_a_count_window_over_a_regression_metric_loads_from_its_array_state(cls, oracle):
    """A regression metric's window stores float64 targets: its array state loads back
    (it was refused as "bool labels" before), and goes on equal to scikit-learn over the
    window's last events."""
    import sklearn.metrics as skm

    rng = np.random.default_rng(3)
    win = streameval.Sliding(getattr(streameval, cls)(), size=700)
    ys, ps = [], []
    for _ in range(3):
        y, p = rng.random(100) + 0.5, rng.random(100) + 0.5
        win.update_many(y, p)
        ys += list(y)
        ps += list(p)
    back = from_array_state(array_state(win))
    y, p = rng.random(800) + 0.5, rng.random(800) + 0.5
    back.update_many(y, p)
    ys, ps = (ys + list(y))[-700:], (ps + list(p))[-700:]
    assert back.get() == pytest.approx(getattr(skm, oracle)(ys, ps), rel=1e-12)
