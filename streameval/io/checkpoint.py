"""Checkpoints: atomic JSON files that refuse to load when damaged or mismatched.

:func:`save_atomic` writes JSON to a temporary file in the target's directory,
fsyncs it, renames it over the target (``os.replace``) and fsyncs the
directory: after a crash the file holds the old or the new content, never a
mix. :func:`save_checkpoint` wraps a state in an envelope::

    {"format": "streameval-checkpoint", "version": 1, "kind": "monitor",
     "fingerprint": "<sha256 of the config>", "saved_at": <epoch s>,
     "sha256": "<sha256 of the state>", "state": {...}}

and :func:`load_checkpoint` checks all of it: bad JSON, a missing key, an
unknown version, a state whose checksum does not match, another kind, or
another configuration (``fingerprint``) raise :class:`CheckpointError` with
the reason. It never returns an empty state in place of a damaged one: the
caller decides what to do (a missing file raises ``FileNotFoundError``, the
usual "first run" signal).

States are JSON: NaN and infinities are written as the ``NaN``/``Infinity``
literals Python's json reads back, so a state round-trips exactly.

Imports: the standard library only; the pipeline and the service import it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from typing import Any

__all__ = [
    "CheckpointError",
    "FORMAT",
    "VERSION",
    "fingerprint",
    "save_atomic",
    "save_checkpoint",
    "load_checkpoint",
]

FORMAT = "streameval-checkpoint"
VERSION = 1
_KEYS = ("format", "version", "kind", "fingerprint", "sha256", "state")


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: damaged, of another version, kind or config."""

    def __init__(self, path: str | os.PathLike, reason: str) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"checkpoint {self.path}: {reason}")


def _canonical(obj: Any) -> bytes:
    """Canonical JSON bytes: keys sorted, compact, after a JSON round trip.

    The round trip first turns tuples into lists and non-string keys into
    strings, so an object and its reloaded copy give the same bytes.
    """
    plain = json.loads(json.dumps(obj, default=str))
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fingerprint(obj: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``obj``: equal configs, equal prints.

    Key order and tuple/list do not matter; values do. Cost: `O(size of obj)`.

    >>> fingerprint({"b": 1, "a": [1, 2]}) == fingerprint({"a": (1, 2), "b": 1})
    True
    >>> fingerprint({"a": 1}) == fingerprint({"a": 1.5})
    False
    """
    return hashlib.sha256(_canonical(obj)).hexdigest()


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - file systems that refuse
        pass
    finally:
        os.close(fd)


def save_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (temp file, fsync, rename, fsync dir).

    Cost: `O(size of obj)` plus two fsyncs. The temporary file is removed if
    anything fails; the previous content of ``path`` is then untouched.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def save_checkpoint(
    path: str | os.PathLike, state: Any, *, kind: str, fingerprint: str | None = None
) -> None:
    """Save ``state`` atomically in a checked envelope (see the module docs).

    ``kind`` names what the state is (``"monitor"``, ``"replay"``, ...);
    ``fingerprint`` identifies the configuration it belongs to (see
    :func:`fingerprint`). Cost: `O(size of state)`.
    """
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"kind must be a non-empty string, got {kind!r}")
    envelope = {
        "format": FORMAT,
        "version": VERSION,
        "kind": kind,
        "fingerprint": fingerprint,
        "saved_at": time.time(),
        "sha256": hashlib.sha256(_canonical(state)).hexdigest(),
        "state": state,
    }
    save_atomic(path, envelope)


def load_checkpoint(
    path: str | os.PathLike,
    *,
    expected_kind: str | None = None,
    expected_fingerprint: str | None = None,
) -> Any:
    """The state saved by :func:`save_checkpoint`, after checking everything.

    Raises :class:`CheckpointError` naming the problem (damaged file, missing
    key, unsupported version, checksum, kind or fingerprint mismatch) and
    ``FileNotFoundError`` when there is no file. Cost: `O(size of file)`.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "ckpt.json")
    >>> save_checkpoint(p, {"n": 3}, kind="monitor", fingerprint="abc")
    >>> load_checkpoint(p, expected_kind="monitor", expected_fingerprint="abc")
    {'n': 3}
    >>> load_checkpoint(p, expected_fingerprint="xyz")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    streameval.io.checkpoint.CheckpointError: checkpoint ...: written with another configuration (fingerprint abc, expected xyz); remove it or run with the original configuration
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        env = json.loads(data)
    except UnicodeDecodeError:
        raise CheckpointError(path, "corrupted: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(
            path, f"corrupted: not valid JSON ({e.msg} at byte {e.pos} of {len(data)})"
        ) from None
    if not isinstance(env, dict) or env.get("format") != FORMAT:
        raise CheckpointError(path, "not a streameval checkpoint")
    for key in _KEYS:
        if key not in env:
            raise CheckpointError(path, f"corrupted: missing key {key!r}")
    if env["version"] != VERSION:
        raise CheckpointError(
            path, f"version {env['version']!r} is not supported (this streameval reads {VERSION})"
        )
    if hashlib.sha256(_canonical(env["state"])).hexdigest() != env["sha256"]:
        raise CheckpointError(path, "corrupted: the state does not match its checksum")
    if expected_kind is not None and env["kind"] != expected_kind:
        raise CheckpointError(
            path, f"is a {env['kind']!r} checkpoint, expected {expected_kind!r}"
        )
    if expected_fingerprint is not None and env["fingerprint"] != expected_fingerprint:
        raise CheckpointError(
            path,
            f"written with another configuration (fingerprint {env['fingerprint']}, expected "
            f"{expected_fingerprint}); remove it or run with the original configuration",
        )
    return env["state"]
