"""Checkpoints: atomic writes, exact round trips, refusal of damaged or foreign files.

Oracles: files read back with json.loads and hashlib; damage made by editing
the real file on disk; a crash simulated by a real child process killed with
SIGKILL while it rewrites the checkpoint in a loop.
"""

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from streameval.io.checkpoint import (
    CheckpointError,
    fingerprint,
    load_checkpoint,
    save_atomic,
    save_checkpoint,
)

STATE = {"n": 12345, "t": 1.7e9, "auc": {"u": 0.25, "scores": [0.1, 0.2, 0.2]},
         "nan": math.nan, "inf": -math.inf, "ids": ["a", 7, None], "seg": ["fr", 2]}


def test_save_atomic_writes_json_and_leaves_no_temp(tmp_path):
    p = tmp_path / "state.json"
    save_atomic(p, {"a": [1, 2.5, "x"], "b": None})
    assert json.loads(p.read_text()) == {"a": [1, 2.5, "x"], "b": None}
    save_atomic(p, {"a": 2})
    assert json.loads(p.read_text()) == {"a": 2}
    assert os.listdir(tmp_path) == ["state.json"]
    save_atomic(p, {"a": 3}, keep_previous=True)
    assert json.loads(p.read_text()) == {"a": 3}
    assert json.loads((tmp_path / "state.prev.json").read_text()) == {"a": 2}


def test_save_atomic_failure_keeps_old_content(tmp_path):
    p = tmp_path / "state.json"
    save_atomic(p, {"old": True})
    with pytest.raises(TypeError):
        save_atomic(p, {"new": object()})
    assert json.loads(p.read_text()) == {"old": True}
    assert os.listdir(tmp_path) == ["state.json"]


def test_round_trip_is_exact(tmp_path):
    p = tmp_path / "ckpt.json"
    save_checkpoint(p, STATE, kind="monitor", fingerprint=fingerprint({"k": 1}))
    got = load_checkpoint(p, expected_kind="monitor", expected_fingerprint=fingerprint({"k": 1}))
    assert math.isnan(got.pop("nan")) and got.pop("inf") == -math.inf
    expected = dict(STATE)
    del expected["nan"], expected["inf"]
    assert got == expected
    env = json.loads(p.read_text())
    assert env["format"] == "streameval-checkpoint" and env["version"] == 1
    assert env["kind"] == "monitor" and abs(env["saved_at"] - time.time()) < 60
    # integer keys and tuples survive the round trip check
    save_checkpoint(p, {"by_id": {10: (1, 2), 9: "x"}}, kind="k")
    assert load_checkpoint(p) == {"by_id": {"10": [1, 2], "9": "x"}}


def test_fingerprint_is_sha256_of_canonical_json():
    cfg = {"metrics": {"auc": {"window": 1000}}, "threshold": 0.5, "fields": ("ts", "label")}
    canonical = json.dumps({"fields": ["ts", "label"], "metrics": {"auc": {"window": 1000}},
                            "threshold": 0.5}, sort_keys=True, separators=(",", ":"))
    assert fingerprint(cfg) == hashlib.sha256(canonical.encode()).hexdigest()
    assert fingerprint(dict(reversed(list(cfg.items())))) == fingerprint(cfg)
    assert fingerprint({**cfg, "threshold": 0.6}) != fingerprint(cfg)


def _damaged(tmp_path, edit):
    p = tmp_path / "ckpt.json"
    save_checkpoint(p, STATE, kind="monitor", fingerprint="f1")
    env = json.loads(p.read_text())
    text = edit(env, p.read_text())
    p.write_text(text)
    return p


@pytest.mark.parametrize("edit,reason", [
    (lambda env, text: text[: len(text) // 2], r"corrupted: not valid JSON \(.* at byte \d+ of \d+\)"),
    (lambda env, text: "", r"corrupted: not valid JSON"),
    (lambda env, text: json.dumps([1, 2]), r"not a streameval checkpoint; "),
    (lambda env, text: json.dumps({"n": 1}), r"not a streameval checkpoint; "),
    (lambda env, text: json.dumps({k: v for k, v in env.items() if k != "state"}),
     r"corrupted: missing key 'state'; "),
    (lambda env, text: json.dumps({**env, "version": 3}), r"version 3 is not supported"),
    (lambda env, text: text.replace("12345", "12346"),
     r"corrupted: the state does not match its checksum; "),
])
def test_damaged_checkpoints_are_refused(tmp_path, edit, reason):
    p = _damaged(tmp_path, edit)
    with pytest.raises(CheckpointError, match=reason) as ei:
        load_checkpoint(p, expected_kind="monitor", expected_fingerprint="f1")
    assert str(ei.value).startswith(f"checkpoint {p}: ")
    assert isinstance(ei.value, ValueError)
    if "version" not in reason:  # damage names the next step
        assert str(ei.value).endswith("no previous generation (" + str(p).replace(
            "ckpt.json", "ckpt.prev.json") + ") to fall back to: restore it from a backup, "
            "or remove it to start from scratch")


def test_mismatched_checkpoints_are_refused(tmp_path):
    p = tmp_path / "ckpt.json"
    save_checkpoint(p, STATE, kind="replay", fingerprint="aaa")
    with pytest.raises(CheckpointError, match=r"is a 'replay' checkpoint, expected 'monitor'"):
        load_checkpoint(p, expected_kind="monitor")
    with pytest.raises(CheckpointError, match=r"another configuration \(fingerprint aaa, expected bbb\)"):
        load_checkpoint(p, expected_kind="replay", expected_fingerprint="bbb")
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "absent.json")


def test_killed_writer_never_leaves_a_torn_checkpoint(tmp_path):
    """SIGKILL a process that rewrites a large checkpoint in a loop; the file always loads."""
    p = tmp_path / "ckpt.json"
    code = textwrap.dedent(f"""
        import sys
        from streameval.io.checkpoint import save_checkpoint
        big = list(range(200_000))
        i = 0
        save_checkpoint({str(p)!r}, {{"i": i, "big": big}}, kind="k")
        print("ready", flush=True)
        while True:
            i += 1
            save_checkpoint({str(p)!r}, {{"i": i, "big": big}}, kind="k")
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.4)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    state = load_checkpoint(p, expected_kind="k")
    assert state["i"] >= 0 and state["big"] == list(range(200_000))
