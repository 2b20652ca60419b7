"""Binary incremental checkpoints: a JSON manifest and packs of raw numpy arrays.

A state tree (JSON values with numpy arrays at some leaves, what
``Monitor.to_array_state`` gives) is saved as

* a **manifest**, the checkpoint file itself (``ckpt.json``): the envelope of
  :mod:`streameval.io.checkpoint` with ``"version": 2``, a generation number ``seq``,
  the tree with every array replaced by a reference ``{"$a": [pack, offset, nbytes,
  dtype, shape, crc32]}``, the SHA-256 of that tree, the directory of the packs
  (``"dir"``, beside the manifest) and the size of every pack it references
  (``"packs": {name: bytes}``);
* **packs** in the directory beside it (``ckpt.json.d/``): ``<seq>.pack``, the raw
  little-endian bytes of the arrays a checkpoint wrote, one after another (the dtype and
  shape an ``.npy`` header would hold are in the manifest), and the JSON of the
  subtrees stored apart. Dtypes are ``bool``, ``uint8`` (UTF-8 text), ``int64`` and
  ``float64`` only; nothing is ever pickled.

**Incremental.** A :class:`StateWriter` remembers where it wrote each array that does
not change while it lives (a read-only array in the tree: a score order's levels, a
flat score order's arrays and runs of changed entries, a window's batches) by the
identity of the array holding its memory; the next checkpoint
references that place instead of writing it again, as RocksDB's SST files and
Prometheus TSDB's blocks are referenced by the manifests that still need them. A
checkpoint thus writes the arrays made since the last one (new or merged levels,
new window batches, the few arrays that change in place) in one pack, with one fsync,
plus the manifest.

**Copies.** A new read-only array of at least :data:`SAME_BYTES_FROM` bytes whose
bytes equal those of one the same checkpoint writes (same CRC-32, size, dtype and shape,
then compared byte for byte) is not written again: its reference is the other's place
with a seventh value, its copy number (``{"$a": [pack, offset, nbytes, dtype, shape,
crc32, copy]}``), and :func:`read_state` loads it as an array of its own (two objects
stay two). A segment's window and cumulative score orders hold the same entries until
the window first expires an event, so most segments of a stream split a thousand ways
write their orders' arrays once.

**Subtrees.** A part of the tree given as ``{"$b": subtree}``
(:data:`~streameval.io.checkpoint.BLOB`; a Monitor gives each scope's state so) is
stored apart: its JSON, with its own array references, goes into the pack after the
arrays, and the manifest holds ``{"$b": [pack, offset, nbytes, "json", [nbytes],
crc32]}``. While the same dict object is given again (the Monitor reuses the state of a
scope that did not change), the next checkpoint references what it wrote, arrays
included, instead of walking and writing it again: an incremental checkpoint of a
thousand segments costs the segments that changed. Whoever gives a subtree must not
change it afterwards. :func:`read_state` inlines subtrees back.

A new subtree's JSON is written by the JSON encoder (in C), which writes each array's
reference in its place (each array's place in the pack and CRC-32 are fixed when the
encoder meets it; a compaction that moves arrays has the subtrees holding them encoded
again): no Python step per value, which is what a subtree of lists of small records (a
rule's evaluation marks, a detector's candidates) costs when walked. The encoder runs without its cycle check (a dict insert
and delete per container): a subtree holding a cycle, or nested deeper than the
interpreter recurses, is walked instead, and refused where it is too deep. A subtree holding a subtree (a Monitor's scope holds its
metrics', drift tests' and rules' subtrees: the scope's few keys are walked, and each
of those is referenced or encoded as above), the key ``$a``, or a string
with an escape is walked instead, and so is one whose brackets (counted outside
strings in one numpy pass over all of them) may nest deeper than a reader goes, which
raises where it is too deep: a checkpoint a reader would refuse is never written.
Python's cyclic garbage collector is paused while a checkpoint is written and read
(and while a Monitor captures or restores its state): the short-lived containers they
make hold no cycle, and each collection they would trigger walks the whole heap. Arrays loaded by :func:`read_state` are known to the writer given
them (:meth:`StateWriter.adopt`), so the first checkpoint after a restart is
incremental too.

**Generations and garbage collection.** The manifest is installed by rename over the
previous one, which is kept as ``ckpt.prev.json``
(:func:`~streameval.io.checkpoint.install`); a pack that neither generation references
is deleted after each install (packs a killed writer left behind included). A
generation number lower than the one installed is never installed.

**Compaction.** When the packs the new manifest references hold more than
:data:`COMPACT_RATIO` times the bytes of the arrays it references (arrays of merged
levels and expired batches are dead weight in old packs), the live arrays of the packs
that are less than half alive are written again into the new pack (and the subtrees
that reference them, or that lie in such a pack): the old packs are
then referenced by the previous generation only and deleted at the next checkpoint.
The least alive packs go first, and one checkpoint moves at most
:data:`COMPACT_STEP` live bytes (or as many as it writes anew, if more; at least one
pack): a compaction is spread over the next checkpoints, each manifest referencing a
consistent set, rather than paid by one. Bytes on disk stay within a few times the
live state.

**Checks at load** (:func:`read_state`): the manifest's own checksum, every pack's
size, each array's bounds, dtype, shape and CRC-32, references to packs the manifest
does not list, and nesting: any of these raises
:class:`~streameval.io.checkpoint.CheckpointError` with ``damaged`` set, naming the
file, so that :func:`~streameval.io.checkpoint.load_checkpoint` falls back to the
previous generation. Arrays that two references share load as one array (the identity
a score order's memo relies on); a copy's reference loads as an array of its own.

Why raw packs rather than one ``.npy`` per array: a checkpoint writes tens to hundreds
of new arrays (a window's batches); one file per checkpoint needs one fsync, not one
per array, and the manifest holds what an ``.npy`` header would. CRC-32 (zlib) checks
a gigabyte per second, about as fast as the disk reads it.

Imports: numpy, the standard library, :mod:`streameval._gc` and
:mod:`streameval.io.checkpoint` (which reads these checkpoints:
:func:`~streameval.io.checkpoint.read_state`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import zlib
from typing import Any

import numpy as np

from streameval._gc import gc_paused
from streameval.io.checkpoint import (
    BLOB,
    DTYPES,
    FORMAT,
    MAX_DEPTH,
    REF,
    canonical,
    fsync_dir,
    install,
    pack_dir,
    previous_path,
    read_state,
    unlink_quietly,
    write_synced,
)

__all__ = ["StateWriter", "read_state", "VERSION", "COMPACT_RATIO", "COMPACT_STEP",
           "SAME_BYTES_FROM", "pack_dir", "referenced_packs", "remove_unreferenced"]

#: the manifest's version (JSON checkpoints are version 1)
VERSION = 2
#: compaction threshold: bytes of the referenced packs over live bytes (see module notes)
COMPACT_RATIO = 2.0
#: live bytes one checkpoint moves when it compacts, at most (or as many as it writes
#: anew, if more; and always one pack's): a compaction is spread over checkpoints
#: instead of rewriting every sparse pack in one
COMPACT_STEP = 8 << 20


#: JSON scalars as they are (a tree's leaves, most of its nodes)
_SCALARS = frozenset((str, int, float, bool, type(None)))


_DTYPE_KEYS: dict = {}

#: arrays smaller than this are written joined with their neighbours (bytes)
_JOIN_BELOW = 1 << 20

#: a read-only array of at least this many bytes whose bytes equal those of another
#: that the same checkpoint writes is not written again but referenced as a copy (a
#: window's score order and the cumulative one hold the same entries until the window
#: first expires an event: most segments of a stream split a thousand ways); below it,
#: the reference costs about what the bytes do
SAME_BYTES_FROM = 1024


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two contiguous arrays of one dtype and shape hold the same bytes (two
    copies and a memcmp: a tenth of what a numpy comparison costs at these sizes)."""
    return a.tobytes() == b.tobytes()


def _dtype_key(a: np.ndarray) -> str:
    key = _DTYPE_KEYS.get(a.dtype)
    if key is None:
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        key = dt.str
        if key not in DTYPES:
            raise TypeError(f"array of dtype {a.dtype} in a state: only bool, uint8 (UTF-8 "
                            "text), int64 and float64 are stored")
        _DTYPE_KEYS[a.dtype] = key
    return key


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class StateWriter:
    """Writes binary checkpoints of one checkpoint file, incrementally (see the module
    notes). Not thread-safe: one writer per checkpoint file, used by one thread at a
    time.

    Runtime complexity of :meth:`write`: `O(bytes of the arrays not written before +
    size of the JSON parts)`, plus one fsync of the pack, one of the manifest and the
    directory's; `O(live bytes)` when it compacts.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self.dir = pack_dir(self.path)
        # (id of the root array, address, shape, strides, dtype) -> (array, ref); the
        # array (a view) keeps its root alive, so the id is not reused while cached
        self._cache: dict[tuple, tuple] = {}
        # id of an array the cache holds -> its key (the same object given again, as a
        # window gives its packed runs, is found without reading its address)
        self._ids: dict[int, tuple] = {}
        self._seq: int | None = None  # generation of the manifest installed, once known
        self.last: dict = {}  # what the last write did: bytes, arrays written, seconds

    # -------------------------------------------------------------- identity cache
    @staticmethod
    def _key(a: np.ndarray, root: np.ndarray) -> tuple:
        if a is root or (a.shape == root.shape and a.strides == root.strides
                         and a.dtype == root.dtype):
            # (the whole of its root: the same memory, without reading its address)
            return (id(root), -1, a.shape, a.strides, a.dtype.str)
        return (id(root), a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)

    def adopt(self, arrays: dict) -> None:
        """Remember where loaded arrays are stored (``{id: (array, ref)}``, from
        :func:`read_state`): a later checkpoint references them while they do not change
        (the read-only views a state tree gives of them)."""
        for a, ref in arrays.values():
            k = self._key(a, _root(a))
            self._cache[k] = (a, ref)
            self._ids[id(a)] = k

    # -------------------------------------------------------------- writing
    def _current_seq(self) -> int:
        if self._seq is None:
            seq = 0
            for p in (self.path, previous_path(self.path)):
                try:
                    with open(p, "rb") as f:
                        env = json.loads(f.read())
                    if isinstance(env, dict) and type(env.get("seq")) is int:
                        seq = max(seq, env["seq"])
                except (OSError, ValueError, RecursionError):
                    pass
            self._seq = seq
        return self._seq

    def write(self, tree: Any, *, kind: str, fingerprint: str | None = None,
              seq: int | None = None, keep_previous: bool = True) -> int:
        """Save ``tree`` as the checkpoint (pack, manifest, rename, garbage collection);
        returns its generation number. ``seq``: a generation number to use (it must be
        above the installed one; default: the next). An ``OSError`` (disk full, read-only
        directory) leaves the installed generations as they were (a partial pack is
        removed, or at the latest by the next write's garbage collection)."""
        with gc_paused():
            return self._write(tree, kind, fingerprint, seq, keep_previous)

    def _write(self, tree, kind, fingerprint, seq, keep_previous):
        t0 = time.perf_counter()
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"kind must be a non-empty string, got {kind!r}")
        current = self._current_seq()
        if seq is None:
            seq = current + 1
        elif seq <= current:
            raise ValueError(f"checkpoint generation {seq} is not above the installed one "
                             f"({current}): an older checkpoint never replaces a newer one")
        os.makedirs(self.dir, exist_ok=True)
        pack = f"{seq:012d}.pack"
        pack_path = os.path.join(self.dir, pack)
        # key -> (array or _Subtree, ref): everything the new manifest references
        used: dict[tuple, tuple] = {}
        # (contiguous little-endian array, ref) to write into the new pack, in the order
        # of their offsets (each ref's offset and CRC-32 are final when it is made)
        pending: list = []
        end = [0]  # bytes of the arrays placed in the new pack so far
        new_subtrees: list = []  # _Subtree to serialise into it (inner ones first)
        inside: list = []  # the subtrees being walked
        fast: list = []  # (subtree, depth) serialised by the JSON encoder (see _dump)

        ids: dict[int, tuple] = {}  # (the next self._ids)
        known = self._ids
        # (bound once: tens of thousands of arrays are met per checkpoint)
        ids_get, known_get, used_get, cache_get = ids.get, known.get, used.get, \
            self._cache.get
        crc32, key_of = zlib.crc32, self._key
        # (CRC-32, bytes, dtype, shape) -> [bytes, ref, copies] of the read-only arrays
        # of at least SAME_BYTES_FROM bytes this checkpoint writes
        same: dict[tuple, list] = {}
        same_get = same.get
        # id -> [refs]: the arrays of a subtree the JSON encoder declined (see _dump)
        again: dict[int, list] = {}

        def note(k, item):
            used[k] = item
            if k[0] not in ("w", "b"):  # (an array's identity key)
                ids[id(item[0])] = k
            if inside:
                inside[-1].items[k] = item

        def place(a, ref):
            c = _little(a)
            ref[0], ref[1] = pack, end[0]
            end[0] += ref[2]
            pending.append((c, ref))
            return c

        def locate(a: np.ndarray) -> list:
            """The reference of an array: where it was written before (a read-only one
            met again, no other check: its dtype was checked then), or where it goes in
            the new pack."""
            if again:  # (a subtree the encoder declined: what it located, in order)
                refs = again.get(id(a))
                if refs:
                    return refs.pop(0)
            aid = id(a)
            k = ids_get(aid)
            if k is not None:  # (met before in this checkpoint, read-only: noted then)
                hit = used[k]
                if inside:
                    inside[-1].items[k] = hit
                return hit[1]
            ro = not a.flags.writeable
            if ro:
                # (an id the cache holds is its array's: the cache keeps it alive)
                k = known_get(aid) or key_of(a, _root(a))
                hit = used_get(k) or cache_get(k)
                if hit is not None:  # (what note does, for an array's identity key)
                    used[k] = hit
                    ids[id(hit[0])] = k
                    if inside:
                        inside[-1].items[k] = hit
                    return hit[1]
            ref = [pack, 0, int(a.nbytes), _dtype_key(a), list(a.shape), 0]
            if ro and ref[2] >= SAME_BYTES_FROM:
                # (a read-only array with the bytes of one this checkpoint wrote: a
                # reference to those, marked as a copy of its own)
                c = _little(a)
                crc = crc32(c)
                sk = (crc, ref[2], ref[3], a.shape)
                twin = same_get(sk)
                if twin is not None and _same_bytes(twin[0], c):
                    twin[2] += 1
                    first = twin[1]
                    ref = [first[0], first[1], ref[2], ref[3], ref[4], crc, twin[2]]
                    note(k, (a, ref))
                    return ref
                ref[0], ref[1], ref[5] = pack, end[0], crc
                end[0] += ref[2]
                pending.append((c, ref))
                same[sk] = [c, ref, 0]
                note(k, (a, ref))
                return ref
            ref[5] = crc32(place(a, ref))  # (a contiguous array: its bytes, no copy)
            if ro:
                note(k, (a, ref))
            elif inside:  # (changes in place: written again unless its subtree is reused)
                note(("w", id(ref)), (a, ref))
            return ref

        def ref_of(a: np.ndarray) -> dict:
            return {REF: locate(a)}

        def subtree(x, depth):
            if len(x) != 1:
                raise ValueError(f"a state may not use the key {BLOB!r} beside others")
            k = ("b", id(x))
            hit = used.get(k) or self._cache.get(k)
            if hit is not None and hit[0].marker is x:
                flat, flat_ids = _flat(hit[0])
                used[k] = hit
                used.update(flat)
                ids.update(flat_ids)
                if inside:
                    items = inside[-1].items
                    items[k] = hit
                    items.update(flat)
                return {BLOB: hit[1]}
            sub = _Subtree(x, [pack, 0, 0, "json", [0], 0])
            inside.append(sub)
            outer = None
            if again:  # (a subtree inside a declined one: the outer's own wait)
                outer = dict(again)
                again.clear()
            try:
                seen: dict = {}
                if not _holds_subtree(x[BLOB]) and _dump(sub, locate, seen):
                    fast.append((sub, depth))
                else:
                    # (the walk meets the arrays the encoder located: their references
                    # again, not a second copy of their bytes)
                    again.update(seen)
                    sub.tree = walk(x[BLOB], depth + 1)
            finally:
                inside.pop()
                again.clear()
                if outer:
                    again.update(outer)
            new_subtrees.append(sub)
            note(k, (sub, sub.ref))
            return {BLOB: sub.ref}

        def walk(x, depth=0):
            t = type(x)
            if depth > MAX_DEPTH:  # (a reader refuses a value, scalars too, below it)
                raise ValueError("a state nested deeper than a checkpoint can be")
            if t in _SCALARS:
                return x
            if t is list and all(type(v) in _SCALARS for v in x):
                if x and depth >= MAX_DEPTH:  # (its values one level further down)
                    raise ValueError("a state nested deeper than a checkpoint can be")
                return list(x)
            if isinstance(x, np.ndarray):
                return ref_of(x)
            if isinstance(x, dict):
                if REF in x:
                    raise ValueError(f"a state may not use the key {REF!r}")
                if BLOB in x:
                    return subtree(x, depth)
                return {k: walk(v, depth + 1) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return [walk(v, depth + 1) for v in x]
            if isinstance(x, np.generic):
                return x.item()
            return x

        refs = walk(tree)
        # the subtrees the JSON encoder wrote: nested no deeper than a reader goes (else
        # walked, which raises where a state is too deep)
        for sub, depth in _too_deep(fast):
            sub.flat = None  # (what it holds is noted again)
            inside.append(sub)
            try:
                walk(sub.marker[BLOB], depth + 1)
            finally:
                inside.pop()
        # compaction: live bytes per pack (items referenced again) against pack sizes
        live: dict[str, int] = {}
        for _, ref in used.values():
            if ref[0] != pack:
                live[ref[0]] = live.get(ref[0], 0) + ref[2]
        sizes = self._pack_sizes(live)
        new_bytes = end[0]
        compacted = 0
        moved: set = set()  # (keys of what a compaction moves: empty arrays included)
        if live and sum(sizes.values()) > COMPACT_RATIO * (sum(live.values()) + new_bytes):
            sparse = _sparsest(live, sizes, max(COMPACT_STEP, new_bytes))
            for k, (obj, ref) in list(used.items()):
                if ref[0] in sparse and isinstance(obj, np.ndarray):
                    place(obj, ref)  # (every reference to it in the tree is this list)
                    compacted += ref[2]
                    moved.add(k)
            # a subtree in a sparse pack, or holding a moved array, is written again
            fresh = {id(x) for x in new_subtrees}
            for k, (obj, ref) in list(used.items()):
                if isinstance(obj, _Subtree) and id(obj) not in fresh and (
                        ref[0] in sparse or any(j in moved for j in obj.items)):
                    compacted += ref[2]
                    ref[0] = pack
                    new_subtrees.append(obj)
                    fresh.add(id(obj))
                    moved.add(k)
            # (a subtree holding a subtree written again: written again after it)
            again = True
            while again:
                again = False
                for k, (obj, ref) in list(used.items()):
                    if (isinstance(obj, _Subtree) and id(obj) not in fresh
                            and any(j in moved for j in obj.items)):
                        ref[0] = pack
                        new_subtrees.append(obj)
                        fresh.add(id(obj))
                        moved.add(k)
                        again = True
        written = self._write_pack(pack_path, pending, new_subtrees, end[0], bool(moved))
        if pending or new_subtrees:
            packs = {pack: written}
        else:
            packs = {}
            unlink_quietly(pack_path)
        for _, ref in used.values():
            if ref[0] != pack and ref[0] not in packs:
                packs[ref[0]] = sizes.get(ref[0]) or os.path.getsize(
                    os.path.join(self.dir, ref[0]))
        env = {"format": FORMAT, "version": VERSION, "kind": kind,
               "fingerprint": fingerprint, "saved_at": time.time(), "seq": seq,
               "sha256": hashlib.sha256(canonical(refs)).hexdigest(),
               "dir": os.path.basename(self.dir), "packs": packs, "state": refs}
        data = json.dumps(env, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=True).encode("utf-8")
        tmp = f"{os.path.join(os.path.dirname(os.path.abspath(self.path)), '.' + os.path.basename(self.path))}.{seq}.tmp"
        try:
            write_synced(tmp, (data,))
            if self._seq is not None and seq <= self._seq:  # (re-checked at the rename)
                raise ValueError(f"checkpoint generation {seq} is not above {self._seq}")
            install(tmp, self.path, keep_previous)
        except BaseException:
            unlink_quietly(tmp)
            raise
        self._seq = seq
        self._cache = used
        self._ids = ids
        prev = _manifest_packs(previous_path(self.path)) if keep_previous else set()
        removed = remove_unreferenced(self.dir, set(packs) | prev)
        self.last = {"seq": seq, "bytes": written, "arrays": len(pending),
                     "subtrees": len(new_subtrees), "compacted": compacted,
                     "manifest": len(data), "removed": removed,
                     "seconds": time.perf_counter() - t0}
        return seq

    def _pack_sizes(self, names) -> dict:
        out = {}
        for p in names:
            try:
                out[p] = os.path.getsize(os.path.join(self.dir, p))
            except OSError:
                out[p] = 0
        return out

    @staticmethod
    def _write_pack(pack_path: str, pending: list, subtrees: list = (), start: int = 0,
                    recode: bool = False) -> int:
        """Write the pending arrays (their offsets and CRC-32 already in their
        references, the first at 0 and the last ending at ``start``), then the subtrees'
        JSON (which holds the arrays' places; ``recode``: a compaction moved arrays, the
        JSON the encoder wrote is written again with their new places), into one pack
        (the subtrees' offsets and CRC-32 filled into their references), fsync it;
        returns its size."""
        if not pending and not subtrees:
            return 0
        offset = 0

        def chunks():
            nonlocal offset
            # (small arrays go out joined, a write call per megabyte or so rather than
            # one per array)
            batch, held = [], 0
            for a, ref in pending:
                if ref[1] != offset:  # (a reference placed twice: an internal error)
                    raise AssertionError(f"array at {ref[1]}, expected {offset}")
                offset += ref[2]
                if ref[2] >= _JOIN_BELOW:
                    if batch:
                        yield b"".join(batch)
                        batch, held = [], 0
                    yield _bytes(a)
                    continue
                batch.append(_bytes(a))
                held += ref[2]
                if held >= _JOIN_BELOW:
                    yield b"".join(batch)
                    batch, held = [], 0
            if batch:
                yield b"".join(batch)
            if offset != start:
                raise AssertionError(f"arrays end at {offset}, expected {start}")
            todo, done = {id(x) for x in subtrees}, set()
            # (the subtrees' JSON goes out joined too: thousands of a few KiB each)
            out: list = []

            def emit(sub):  # (inner subtrees first: their places are then known)
                nonlocal offset, held
                done.add(id(sub))
                # (only a walked subtree holds subtrees: one the JSON encoder wrote holds
                # arrays only, tens of them, not scanned)
                for obj, _ in (sub.items.values() if sub.parts is None else ()):
                    if type(obj) is _Subtree and id(obj) in todo and id(obj) not in done:
                        emit(obj)
                if sub.parts is not None:  # (references moved: written again)
                    b = _redump(sub) if recode and sub.refs else sub.parts[0]
                else:
                    b = json.dumps(sub.tree, separators=(",", ":"), ensure_ascii=False,
                                   allow_nan=True).encode("utf-8")
                sub.ref[1:] = [offset, len(b), "json", [len(b)], zlib.crc32(b)]
                offset += len(b)
                out.append(b)
                held += len(b)

            held = 0
            for sub in subtrees:
                if id(sub) not in done:
                    emit(sub)
                    if held >= _JOIN_BELOW:
                        yield b"".join(out)
                        out.clear()
                        held = 0
            if out:
                yield b"".join(out)

        write_synced(pack_path, chunks())
        return offset


class _Subtree:
    """A subtree stored apart (``{BLOB: subtree}`` in a state tree): the marker dict it
    was given as (while the same object is given again, the subtree is referenced, not
    written), its reference, its tree of references (or, written by the JSON encoder,
    its JSON in ``parts`` split where its arrays' references go, and those ``refs``), and
    what it holds."""

    __slots__ = ("marker", "ref", "tree", "items", "parts", "refs", "flat", "flat_ids",
                 "opens")

    def __init__(self, marker, ref):
        self.marker, self.ref, self.tree, self.items = marker, ref, None, {}
        self.parts = self.refs = self.flat = self.flat_ids = None
        self.opens = 0  # (opening brackets of the JSON :func:`_dump` wrote)


def _flat(sub: _Subtree) -> tuple:
    """Everything a subtree written before holds, its subtrees' content included
    (``{key: item}``), and ``{id of an array: its key}`` of those arrays: what a
    checkpoint that references it references too, noted with two dict updates. Made
    once per subtree (what it holds never changes once it is written)."""
    if sub.flat is None:
        flat, flat_ids = {}, {}
        for k, item in sub.items.items():
            flat[k] = item
            if isinstance(item[0], _Subtree):
                inner, inner_ids = _flat(item[0])
                flat.update(inner)
                flat_ids.update(inner_ids)
            elif k[0] != "w":  # (an array's identity key)
                flat_ids[id(item[0])] = k
        sub.flat, sub.flat_ids = flat, flat_ids
    return sub.flat, sub.flat_ids


def _holds_subtree(x) -> bool:
    """Whether a subtree's content holds a subtree one level down (a Monitor's scope
    holding its metrics' subtree): it is walked, without serialising it first to find
    out (:func:`_dump` would decline it)."""
    if type(x) is dict:
        values = x.values()
    elif type(x) is list:
        values = x
    else:
        return False
    for v in values:  # (a plain loop: a generator costs more than the test)
        if type(v) is dict and BLOB in v:
            return True
    return False


def _sparsest(live: dict, sizes: dict, budget: int) -> set:
    """The packs to compact: of those less than half alive, the least alive first (the
    most dead bytes freed per byte moved), while their live bytes fit in ``budget``
    (the first one always)."""
    sparse = sorted((live[p] / sizes[p], p) for p in live
                    if sizes.get(p, 0) and live[p] * 2 < sizes[p])
    out, moved = set(), 0
    for _, p in sparse:
        if out and moved + live[p] > budget:
            break
        out.add(p)
        moved += live[p]
    return out


def _little(a: np.ndarray) -> np.ndarray:
    """``a`` contiguous and little-endian (the bytes a pack holds)."""
    if a.flags.c_contiguous and a.dtype.byteorder != ">":
        return a
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a


def _bytes(a: np.ndarray):
    """The bytes of a contiguous array, without a copy."""
    return memoryview(a).cast("B") if a.nbytes else memoryview(b"")


def _dump(sub: _Subtree, locate, seen: dict) -> bool:
    """Serialise a subtree's content with the JSON encoder (in C: no Python step per
    value), each array's reference written in its place by the encoder (the array
    located in the pack when the encoder meets it), rather than by walking it in
    Python. Declines (False) a content that holds a subtree or the key ``$a`` (walked
    instead: reused, or refused), a string with an escape (its depth is then not read
    from the bytes, see :func:`_too_deep`), or a cycle or nesting beyond the
    interpreter's recursion (the walk refuses it); the arrays it located are then met
    again by the walk, which takes their references from ``seen`` (``id`` -> the
    references made for it, in the order met): placed once, whatever the decision."""
    refs: list = []
    met: list = []  # (the arrays, in the order of refs: ``seen`` is made if declined)
    add_ref, add_met = refs.append, met.append

    def hole(o):
        if type(o) is np.ndarray or isinstance(o, np.ndarray):
            ref = locate(o)
            add_ref(ref)
            add_met(o)
            return {REF: ref}
        if isinstance(o, np.generic):
            return o.item()
        raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")

    def declined():
        for o, ref in zip(met, refs):
            seen.setdefault(id(o), []).append(ref)
        return False

    try:
        # (no check for cycles, which costs the encoder a dict insert and delete per
        # container, half its time on a scope's metrics: a cycle, or a nesting deeper
        # than the interpreter's recursion, ends in RecursionError, and the walk then
        # refuses the state where it is too deep)
        data = json.dumps(sub.marker[BLOB], default=hole, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=True,
                          check_circular=False).encode("utf-8")
    except RecursionError:
        return declined()
    if b'"' + BLOB.encode() + b'"' in data or b"\\" in data \
            or data.count(b'"' + REF.encode() + b'"') != len(refs):
        return declined()
    sub.parts = [data]
    # (opening brackets of its own: each reference holds three)
    sub.opens = data.count(b"[") + data.count(b"{") - 3 * len(refs)
    sub.refs = refs
    return True


def _redump(sub: _Subtree) -> bytes:
    """A subtree's JSON written by :func:`_dump` again, with its arrays' references as
    they are now (a compaction moved some): the encoder meets the arrays in the same
    order."""
    it = iter(sub.refs)

    def hole(o):
        if isinstance(o, np.ndarray):
            return {REF: next(it)}
        return o.item()

    data = json.dumps(sub.marker[BLOB], default=hole, separators=(",", ":"),
                      ensure_ascii=False, allow_nan=True,
                      check_circular=False).encode("utf-8")
    sub.parts = [data]
    return data


#: per byte of JSON: +1 for an opening bracket, -1 for a closing one; and whether the
#: byte is a bracket or a quote (what :func:`_too_deep` reads)
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1
_MARKS = _STEP != 0
_MARKS[ord('"')] = True


def _too_deep(fast: list) -> list:
    """The subtrees of ``fast`` (``(subtree, depth)``, serialised by :func:`_dump`) whose
    JSON may nest deeper than a reader goes (:data:`MAX_DEPTH` counted from the
    manifest's root): the bracket depth of each, outside strings (no string holds an
    escape, so every quote delimits one), in a few numpy passes over the brackets and
    quotes of all of them."""
    # (a subtree with fewer opening brackets than the levels left cannot nest deeper:
    # two C counts each, and the numpy pass over the others only)
    fast = [(sub, d) for sub, d in fast if sub.opens + d + 1 > MAX_DEPTH]
    if not fast:
        return []
    datas = [b"".join(sub.parts) for sub, _ in fast]
    b = np.frombuffer(b"".join(datas), dtype=np.uint8)
    at = np.flatnonzero(_MARKS[b])
    c = b[at]
    step = _STEP[c]
    step[(np.cumsum(c == 34, dtype=np.int64) & 1).astype(bool)] = 0  # (inside a string)
    depth = np.cumsum(step, dtype=np.int32)
    starts = np.cumsum([0] + [len(d) for d in datas[:-1]], dtype=np.int64)
    # (every subtree's JSON opens with a bracket or holds none: a scalar, depth 0)
    first = np.minimum(at.searchsorted(starts), max(len(at) - 1, 0))
    most = np.maximum.reduceat(depth, first) if len(depth) else np.zeros(len(fast), int)
    out = []
    for i, ((sub, d), m) in enumerate(zip(fast, most.tolist())):
        if d + 1 + m > MAX_DEPTH:
            out.append((sub, d))
    return out


def _manifest_packs(path: str) -> set:
    """The packs a manifest references (empty if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            env = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        return set()
    packs = env.get("packs") if isinstance(env, dict) else None
    return set(packs) if isinstance(packs, dict) else set()


def referenced_packs(path: str | os.PathLike) -> set:
    """The packs the two generations of the checkpoint at ``path`` reference."""
    path = os.fspath(path)
    return _manifest_packs(path) | _manifest_packs(previous_path(path))


def remove_unreferenced(directory: str, keep: set) -> int:
    """Delete the packs (and leftovers) of ``directory`` not in ``keep``; returns how
    many. A missing directory is fine."""
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    n = 0
    for name in names:
        if name not in keep:
            try:
                os.unlink(os.path.join(directory, name))
                n += 1
            except OSError:
                pass
    if n:
        fsync_dir(directory)
    return n
