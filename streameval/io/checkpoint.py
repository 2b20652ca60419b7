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
the reason and the next step. It never returns an empty state in place of a
damaged one (a missing file raises ``FileNotFoundError``, the usual "first
run" signal).

Two generations are kept: :func:`save_checkpoint` moves the checkpoint it
replaces to :func:`previous_path` (``ckpt.json`` -> ``ckpt.prev.json``) before
renaming the new one in, and :func:`load_checkpoint` falls back to that
previous generation when the newest is damaged (a
:class:`CheckpointFallback` warning says so, and the damaged file is set aside
as ``<name>.damaged``); a resumed replay is then one
checkpoint further back, with the same results. Damage is anything that makes
the file unreadable as a checkpoint: bytes that are not UTF-8 JSON, nesting
deeper than the reader allows, an envelope of the wrong shape, a state that
does not match its SHA-256. A checkpoint of another kind or configuration is
not damage and is refused as it is. The service keeps its own generations
(:mod:`streameval.service.engine`) with :func:`read_checkpoint` and
:func:`install`.

States are JSON: NaN and infinities are written as the ``NaN``/``Infinity``
literals Python's json reads back, so a state round-trips exactly.

Binary checkpoints (``"version": 2``: a manifest and packs of numpy arrays, written
by :class:`streameval.io.statefile.StateWriter`) are read here too
(:func:`read_state`): :func:`load_checkpoint` returns their state with its arrays
loaded and checked, and falls back to the previous generation when any file of the
newest is damaged.

Imports: numpy, the standard library and :mod:`streameval._gc`; the pipeline, the
service and :mod:`streameval.io.statefile` import it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import warnings
import zlib
from typing import Any

import numpy as np

from streameval._gc import gc_paused

__all__ = [
    "CheckpointError",
    "FORMAT",
    "VERSION",
    "BINARY_VERSION",
    "fingerprint",
    "save_atomic",
    "save_checkpoint",
    "load_checkpoint",
    "read_checkpoint",
    "write_checkpoint",
    "install",
    "previous_path",
    "CheckpointFallback",
    "read_state",
    "pack_dir",
    "canonical",
    "fsync_dir",
    "unlink_quietly",
    "write_synced",
    "MAX_DEPTH",
    "BLOB",
]

FORMAT = "streameval-checkpoint"
VERSION = 1
#: the version of binary checkpoints (a manifest and packs: :mod:`streameval.io.statefile`)
BINARY_VERSION = 2
_KEYS = ("format", "version", "kind", "fingerprint", "sha256", "state")

#: the dtypes an array of a binary state may have (:mod:`streameval.io.statefile`)
DTYPES = {"|b1": np.dtype(bool), "|u1": np.dtype("u1"), "<i8": np.dtype("<i8"),
          "<f8": np.dtype("<f8")}
#: the key of an array reference in a binary checkpoint's manifest
REF = "$a"
#: the key of a subtree stored apart in a binary checkpoint's packs (its JSON, with its
#: own array references): ``{"$b": [pack, offset, nbytes, "json", [nbytes], crc32]}``
BLOB = "$b"
#: ``{"$c": [array references]}`` in a binary state: one 1-d array of consecutive
#: pieces, which :func:`read_state` reads into one buffer (a score order gives its big
#: arrays so: each piece written once, referenced by later checkpoints)
JOIN = "$c"
#: deepest nesting of a binary checkpoint's state tree
MAX_DEPTH = 200


def _joined(parts) -> bool:
    """Whether ``parts`` is what the writer gives for a joined array: a list of array
    references (a state's own dict with the key ``"$c"``, say a ``group_by``
    field of that name, holds other values and stays a dict)."""
    return (isinstance(parts, list)
            and all(isinstance(p, dict) and len(p) == 1 and REF in p for p in parts))


def pack_dir(path: str | os.PathLike) -> str:
    """The directory of the packs of the checkpoint at ``path`` (``path + ".d"``); both
    generations share it.

    >>> pack_dir("/state/checkpoint.json")
    '/state/checkpoint.json.d'
    """
    return os.fspath(path) + ".d"




class CheckpointError(ValueError):
    """A checkpoint that cannot be used: damaged, of another version, kind or config.

    ``damaged`` is True when the file itself is damaged (as opposed to a sound
    checkpoint of another version, kind or configuration)."""

    def __init__(self, path: str | os.PathLike, reason: str, damaged: bool = False) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        self.damaged = damaged
        super().__init__(f"checkpoint {self.path}: {reason}")


class CheckpointFallback(UserWarning):
    """The newest checkpoint was damaged; the previous generation was loaded instead."""


def previous_path(path: str | os.PathLike) -> str:
    """Where the previous generation of the checkpoint at ``path`` is kept: the same
    name with ``.prev`` before its extension.

    >>> previous_path("/state/checkpoint.json"), previous_path("ckpt")
    ('/state/checkpoint.prev.json', 'ckpt.prev')
    """
    path = os.fspath(path)
    head, name = os.path.split(path)
    stem, dot, ext = name.rpartition(".")
    new = f"{stem}.prev.{ext}" if dot and stem else f"{name}.prev"
    return os.path.join(head, new)


def canonical(obj: Any) -> bytes:
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
    return hashlib.sha256(canonical(obj)).hexdigest()


def fsync_dir(directory: str) -> None:
    """fsync a directory (a rename or a new file in it then survives a crash); platforms
    or file systems that refuse are skipped."""
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


def _write_temp(path: str, obj: Any) -> str:
    """Write ``obj`` as JSON to a new temporary file beside ``path`` (a dot-name ending
    in ``.tmp``), fsynced; return its path. Removed again if anything fails."""
    directory = os.path.dirname(os.path.abspath(path))
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp")
    write_synced(tmp, (data,), fd=fd)
    return tmp


def write_synced(path: str, chunks, fd: int | None = None) -> int:
    """Write the byte chunks (bytes or memoryviews, an iterable) to a new file at
    ``path`` (or the open descriptor ``fd`` of it), flush and fsync it; returns the
    bytes written. If anything fails the file is removed and the error raised: no
    partial file is left. Cost: `O(bytes)` plus one fsync."""
    n = 0
    try:
        with (os.fdopen(fd, "wb") if fd is not None else open(path, "wb")) as f:
            for c in chunks:
                f.write(c)
                n += len(c) if isinstance(c, bytes) else c.nbytes
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        unlink_quietly(path)
        raise
    return n


def unlink_quietly(path: str) -> None:
    """Remove a file if it is there; any ``OSError`` is ignored."""
    try:
        os.unlink(path)
    except OSError:
        pass


def install(tmp: str | os.PathLike, path: str | os.PathLike, keep_previous: bool = True) -> None:
    """Rename the finished file ``tmp`` to ``path``; with ``keep_previous``, the file it
    replaces (if a regular file) first moves to :func:`previous_path`. Then fsync the
    directory. Two renames, no copy: `O(1)` plus one fsync. Between the two renames
    ``path`` is briefly absent and the previous generation present."""
    tmp, path = os.fspath(tmp), os.fspath(path)
    if keep_previous and os.path.isfile(path) and not os.path.islink(path):
        os.replace(path, previous_path(path))
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def save_atomic(path: str | os.PathLike, obj: Any, keep_previous: bool = False) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (temp file, fsync, rename, fsync dir);
    with ``keep_previous`` the file replaced is kept at :func:`previous_path`.

    Cost: `O(size of obj)` plus two fsyncs. The temporary file is removed if
    anything fails; the previous content of ``path`` is then untouched.
    """
    path = os.fspath(path)
    tmp = _write_temp(path, obj)
    try:
        install(tmp, path, keep_previous)
    except BaseException:
        unlink_quietly(tmp)
        raise


def save_checkpoint(
    path: str | os.PathLike, state: Any, *, kind: str, fingerprint: str | None = None,
    keep_previous: bool = True,
) -> None:
    """Save ``state`` atomically in a checked envelope (see the module docs).

    ``kind`` names what the state is (``"monitor"``, ``"replay"``, ...);
    ``fingerprint`` identifies the configuration it belongs to (see
    :func:`fingerprint`). The checkpoint it replaces is kept as the previous
    generation (:func:`previous_path`) unless ``keep_previous`` is False.
    Cost: `O(size of state)` plus two fsyncs.
    """
    save_atomic(path, _envelope(state, kind, fingerprint), keep_previous=keep_previous)


def write_checkpoint(path: str | os.PathLike, state: Any, *, kind: str,
                     fingerprint: str | None = None) -> str:
    """Write ``state`` in its envelope to a new fsynced temporary file beside ``path``
    and return that file's name, for :func:`install` to rename in (by whoever may:
    the service renames in the parent process what a child process wrote).
    Cost: `O(size of state)` plus one fsync."""
    return _write_temp(os.fspath(path), _envelope(state, kind, fingerprint))


def _envelope(state: Any, kind: str, fingerprint: str | None) -> dict:
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"kind must be a non-empty string, got {kind!r}")
    return {
        "format": FORMAT,
        "version": VERSION,
        "kind": kind,
        "fingerprint": fingerprint,
        "saved_at": time.time(),
        "sha256": hashlib.sha256(canonical(state)).hexdigest(),
        "state": state,
    }


def load_checkpoint(
    path: str | os.PathLike,
    *,
    expected_kind: str | None = None,
    expected_fingerprint: str | None = None,
    fallback: bool = True,
    writer=None,
) -> Any:
    """The state saved by :func:`save_checkpoint`, after checking everything.

    A damaged newest checkpoint falls back (with ``fallback``) to the previous
    generation, with a :class:`CheckpointFallback` warning naming both. Raises
    :class:`CheckpointError` naming the problem and the next step (damaged file,
    missing key, unsupported version, checksum, kind or fingerprint mismatch) and
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
    try:
        return read_checkpoint(path, expected_kind=expected_kind,
                               expected_fingerprint=expected_fingerprint, writer=writer)
    except CheckpointError as e:
        if not (e.damaged and fallback):
            raise
        error = e
    prev = previous_path(path)
    try:
        state = read_checkpoint(prev, expected_kind=expected_kind,
                                expected_fingerprint=expected_fingerprint, writer=writer)
    except FileNotFoundError:
        raise CheckpointError(path, f"{error.reason}; no previous generation ({prev}) to "
                              "fall back to: restore it from a backup, or remove it to "
                              "start from scratch", damaged=True) from None
    except CheckpointError as e:
        raise CheckpointError(path, f"{error.reason}; its previous generation {prev} is "
                              f"unusable too ({e.reason}): restore them from a backup, or "
                              "remove both to start from scratch", damaged=True) from None
    # set the damaged file aside (kept for the operator), so that the next save does
    # not keep it as the previous generation in place of the sound one
    aside = path + ".damaged"
    try:
        os.replace(path, aside)
    except OSError:
        aside = None
    warnings.warn(CheckpointFallback(
        f"checkpoint {path}: {error.reason}; loaded its previous generation {prev} instead"
        + (f" (the damaged file is kept as {aside})" if aside else "")), stacklevel=2)
    return state


def read_checkpoint(
    path: str | os.PathLike,
    *,
    expected_kind: str | None = None,
    expected_fingerprint: str | None = None,
    writer=None,
) -> Any:
    """:func:`load_checkpoint` of exactly ``path``, without a fallback.

    A binary checkpoint (version 2, :mod:`streameval.io.statefile`) is returned with its
    arrays loaded and checked; ``writer`` (a :class:`~streameval.io.statefile.StateWriter`)
    then learns where they are stored, so that its next checkpoint references them.

    Raises :class:`CheckpointError` (``damaged`` set for damage),
    ``FileNotFoundError`` when there is no file, and other ``OSError`` when it cannot
    be read. Cost: `O(size of file)`.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()

    def damaged(reason):
        return CheckpointError(path, f"corrupted: {reason}", damaged=True)

    try:
        env = json.loads(data)
    except UnicodeDecodeError:
        raise damaged("not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise damaged(f"not valid JSON ({e.msg} at byte {e.pos} of {len(data)})") from None
    except RecursionError:
        raise damaged("nested deeper than a checkpoint can be") from None
    if not isinstance(env, dict) or env.get("format") != FORMAT:
        raise CheckpointError(path, "not a streameval checkpoint", damaged=True)
    for key in _KEYS:
        if key not in env:
            raise damaged(f"missing key {key!r}")
    if env["version"] not in (VERSION, BINARY_VERSION) or type(env["version"]) is not int:
        raise CheckpointError(
            path, f"version {env['version']!r:.40} is not supported (this streameval reads "
                  f"{VERSION} and {BINARY_VERSION})", damaged=not isinstance(env["version"], int))
    for key in ("kind", "sha256"):
        if not isinstance(env[key], str):
            raise damaged(f"{key} = {env[key]!r:.40} is not a string")
    if env["fingerprint"] is not None and not isinstance(env["fingerprint"], str):
        raise damaged(f"fingerprint = {env['fingerprint']!r:.40} is not a string")
    if env["version"] == BINARY_VERSION:
        with gc_paused():
            state, adopted = read_state(path, env)
    else:
        try:
            ok = hashlib.sha256(canonical(env["state"])).hexdigest() == env["sha256"]
        except RecursionError:
            raise damaged("nested deeper than a checkpoint can be") from None
        if not ok:
            raise damaged("the state does not match its checksum")
        state, adopted = env["state"], {}
    if expected_kind is not None and env["kind"] != expected_kind:
        raise CheckpointError(
            path, f"is a {env['kind']!r:.40} checkpoint, expected {expected_kind!r}"
        )
    if expected_fingerprint is not None and env["fingerprint"] != expected_fingerprint:
        raise CheckpointError(
            path,
            f"written with another configuration (fingerprint {env['fingerprint']}, expected "
            f"{expected_fingerprint}); remove it or run with the original configuration",
        )
    if writer is not None:
        writer.adopt(adopted)
    return state


# ------------------------------------------------------------------ reading
def read_state(path: str | os.PathLike, env: dict) -> tuple:
    """The state tree of a version-2 manifest ``env`` read from ``path``, its arrays
    loaded and checked, and ``{id: (array, ref)}`` of the loaded arrays (for
    :meth:`StateWriter.adopt`). Raises :class:`CheckpointError` (``damaged``) naming
    the file and the problem. Runtime complexity: `O(bytes referenced)` (each array is
    read once, into its own buffer, and its CRC-32 checked)."""
    path = os.fspath(path)

    def damaged(reason):
        return CheckpointError(path, f"corrupted: {reason}", damaged=True)

    for key in ("seq", "dir", "packs", "sha256", "state"):
        if key not in env:
            raise damaged(f"missing key {key!r}")
    name = env["dir"]
    if not isinstance(name, str) or os.path.basename(name) != name or name in ("", ".", ".."):
        raise damaged(f"dir = {name!r:.60} is not a directory name")
    # (both generations share the directory of the newest's name: ``ckpt.json.d``)
    directory = os.path.join(os.path.dirname(os.path.abspath(path)), name)
    if type(env["seq"]) is not int or not isinstance(env["packs"], dict) or not all(
            isinstance(k, str) and type(v) is int and v >= 0 for k, v in env["packs"].items()):
        raise damaged("seq or packs of the wrong type")
    try:
        ok = hashlib.sha256(canonical(env["state"])).hexdigest() == env["sha256"]
    except RecursionError:
        raise damaged("nested deeper than a checkpoint can be") from None
    if not ok:
        raise damaged("the state does not match its checksum")
    packs = env["packs"]
    for name, size in packs.items():
        if os.path.basename(name) != name or name in ("", ".", ".."):
            raise damaged(f"pack name {name!r:.60} is not a file name")
        p = os.path.join(directory, name)
        try:
            actual = os.path.getsize(p)
        except FileNotFoundError:
            raise CheckpointError(path, f"corrupted: its pack {p} is missing", damaged=True) \
                from None
        if actual != size:
            raise CheckpointError(path, f"corrupted: its pack {p} holds {actual} bytes, the "
                                  f"manifest says {size} (truncated or overwritten)",
                                  damaged=True)
    files: dict[str, Any] = {}
    loaded: dict[tuple, np.ndarray] = {}
    adopted: dict[int, tuple] = {}

    def load(ref, into=None):
        if not (isinstance(ref, list) and len(ref) in (6, 7) and isinstance(ref[0], str)
                and all(type(x) is int and x >= 0 for x in (ref[1], ref[2], ref[5]))
                and ref[3] in DTYPES and isinstance(ref[4], list)
                and all(type(x) is int and x >= 0 for x in ref[4])
                and (len(ref) == 6 or (type(ref[6]) is int and ref[6] >= 1))):
            raise damaged(f"an array reference of the wrong shape: {ref!r:.100}")
        name, offset, nbytes, dt, shape, crc = ref[:6]
        # (a seventh value: a copy of the array at that place, loaded as its own array)
        k = (name, offset, nbytes, dt, tuple(shape), ref[6] if len(ref) == 7 else 0)
        a = loaded.get(k)
        if a is not None:
            if into is not None:
                if a.shape != into.shape or a.dtype != into.dtype:
                    raise damaged("the pieces of a joined array differ in dtype or shape")
                into[...] = a
            return a
        if name not in packs:
            raise damaged(f"an array in pack {name!r:.60}, which the manifest does not list")
        p = os.path.join(directory, name)
        dtype = DTYPES[dt]
        if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != nbytes:
            raise damaged(f"an array of {nbytes} bytes cannot have shape {shape} and dtype {dt}")
        if offset + nbytes > packs[name]:
            raise damaged(f"an array at {offset}+{nbytes} beyond the end of pack {p}")
        f = files.get(name)
        if f is None:
            f = files[name] = open(p, "rb")
        if into is not None and (into.dtype != dtype or list(into.shape) != shape):
            raise damaged("the pieces of a joined array differ in dtype or shape")
        a = np.empty(shape, dtype=dtype) if into is None else into
        f.seek(offset)
        mv = memoryview(a).cast("B") if nbytes else memoryview(b"")
        got = f.readinto(mv) if nbytes else 0
        if got != nbytes:
            raise damaged(f"pack {p} ends inside an array (offset {offset})")
        if zlib.crc32(mv) != crc:
            raise CheckpointError(path, f"corrupted: an array of pack {p} (offset {offset}, "
                                  f"{nbytes} bytes) does not match its CRC-32", damaged=True)
        loaded[k] = a
        adopted[id(a)] = (a, ref)
        return a

    blobs: dict[tuple, Any] = {}

    def load_blob(ref, depth):
        if not (isinstance(ref, list) and len(ref) == 6 and isinstance(ref[0], str)
                and all(type(x) is int and x >= 0 for x in (ref[1], ref[2], ref[5]))
                and ref[3] == "json" and ref[4] == [ref[2]]):
            raise damaged(f"a subtree reference of the wrong shape: {ref!r:.100}")
        name, offset, nbytes, _, _, crc = ref
        k = (name, offset, nbytes)
        if k in blobs:
            return blobs[k]
        if name not in packs:
            raise damaged(f"a subtree in pack {name!r:.60}, which the manifest does not list")
        p = os.path.join(directory, name)
        if offset + nbytes > packs[name]:
            raise damaged(f"a subtree at {offset}+{nbytes} beyond the end of pack {p}")
        f = files.get(name)
        if f is None:
            f = files[name] = open(p, "rb")
        f.seek(offset)
        data = f.read(nbytes)
        if len(data) != nbytes:
            raise damaged(f"pack {p} ends inside a subtree (offset {offset})")
        if zlib.crc32(data) != crc:
            raise CheckpointError(path, f"corrupted: a subtree of pack {p} (offset {offset}, "
                                  f"{nbytes} bytes) does not match its CRC-32", damaged=True)
        try:
            sub = json.loads(data)
        except (ValueError, RecursionError):
            raise damaged(f"a subtree of pack {p} (offset {offset}) is not JSON") from None
        out = blobs[k] = walk(sub, depth + 1)
        return out

    def join(parts):
        """``{"$c": [array references]}``: one 1-d array, each piece read into its
        place (a view of it, adopted with the piece's reference)."""
        if not (isinstance(parts, list) and all(
                isinstance(p, dict) and set(p) == {REF} and isinstance(p[REF], list)
                and len(p[REF]) in (6, 7) and isinstance(p[REF][4], list)
                and len(p[REF][4]) == 1 and type(p[REF][4][0]) is int
                and p[REF][3] == parts[0][REF][3] and p[REF][3] in DTYPES
                for p in parts)):
            raise damaged("a joined array whose pieces are not 1-d arrays of one dtype")
        if not parts:
            return np.empty(0)
        out = np.empty(sum(p[REF][4][0] for p in parts), dtype=DTYPES[parts[0][REF][3]])
        at = 0
        for p in parts:
            n = p[REF][4][0]
            view = out[at:at + n]
            a = load(p[REF], into=view)
            if a is view:
                adopted[id(view)] = (view, p[REF])
            at += n
        return out

    def walk(x, depth=0):
        if depth > MAX_DEPTH:
            raise damaged("nested deeper than a checkpoint can be")
        if isinstance(x, dict):
            if JOIN in x and len(x) == 1 and _joined(x[JOIN]):
                return join(x[JOIN])
            if REF in x or BLOB in x:
                if len(x) != 1:
                    raise damaged("an array or subtree reference with other keys")
                return load(x[REF]) if REF in x else load_blob(x[BLOB], depth)
            return {k: walk(v, depth + 1) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v, depth + 1) for v in x]
        return x

    try:
        tree = walk(env["state"])
    except OSError as e:
        raise CheckpointError(path, f"cannot read its packs: {e}", damaged=True) from None
    finally:
        for f in files.values():
            f.close()
    return tree, adopted
