"""Log sources: JSONL, CSV and Parquet files (or stdin) as validated batches.

:class:`EventSource` reads a log in batches of ``batch_size`` rows, validates
each batch column by column (:func:`streameval.events.build_batch`) and yields
:class:`~streameval.events.EventBatch` objects. Bad rows either stop the read
(``on_error="fail"``: :class:`~streameval.events.EventError` naming the first
bad line) or go to a ``rejected(line, reason, raw)`` callback and are counted
(``on_error="skip"``); none is dropped silently.

Formats, from the file extension or ``format=``:

* ``.jsonl`` / ``.ndjson`` / ``.json`` -- one JSON object per line; blank
  lines are ignored (they still count for line numbers). ``orjson`` is used
  when installed; a line it refuses is re-read with :mod:`json`, so ``NaN``
  written by Python's ``json.dumps`` is reported as "score is NaN".
* ``.csv`` -- a header row naming the fields, then one event per row; an
  empty cell means "absent". Line numbers are physical lines (header = 1).
  A record holding bytes that are not UTF-8 is a bad row ("not valid UTF-8")
  when one of the fields read is concerned; other columns are not read.
* ``.parquet`` -- needs ``pyarrow`` (``pip install streameval[parquet]``);
  ``line`` is the 1-based row number. Timestamp and date columns are event times
  (naive means UTC; a date is its midnight UTC);
  string columns follow the CSV rules, typed columns the JSON rules.
* ``-`` -- stdin, JSONL or CSV (detected from the first non-blank byte:
  ``{`` means JSONL), or a binary file object.

Compressed files (gzip, bzip2, xz) are recognised by their magic bytes (:data:`MAGIC`;
by their name, ``events.jsonl.gz``, when the bytes say nothing) and decompressed
(:data:`COMPRESSIONS`), guarded against expanding more than ``max_expansion`` times
(:data:`~streameval.validation.MAX_EXPANSION`, a compression bomb: :class:`TooExpanded`,
a :class:`SourceError`). Memory is bounded whatever the file holds: JSONL is read in
pieces of :data:`READ_CHUNK` bytes by :class:`LineReader`, CSV a line at a time, and a
line (CSV: a record, a field) longer than ``max_line_bytes``
(:data:`~streameval.validation.MAX_LINE_BYTES`) is a bad row read without being held.
Blank lines are counted in bulk. A file that cannot be read (missing, a
directory, an I/O error, a truncated or corrupt compressed stream, a damaged Parquet
file) is not a bad row: it stops the read with :class:`SourceError`, which names the
file, the last line read whole and the reason, with either ``on_error``. CSV bytes
that are not UTF-8 make a bad row of their record (JSONL: of their line).
Reading and validating costs `O(rows)`, about one JSON parse per line with orjson;
``benchmarks/bench_replay.py`` measures it (the "read + validate log" stage).

A second process: a JSONL or CSV file given by name (not followed) of at least
:data:`PARSE_PROCESS_MIN_BYTES` is read and validated by a second Python process on a
machine with two CPUs or more (``EventSource(parse_process="auto")``, the default; True:
whatever its size, False: never), while the consumer (a replay's Monitor) works on the
batch before: the chunks come back in order through a pipe as validated batches (numpy
columns) with their bad rows, line numbers, raw rows and byte offsets, so batches,
refusals, counts, resume points and errors are those of one process. Stdin, Parquet and a
followed file are read in the consumer's process. Cost: starting a Python process that
imports numpy and streameval, then a pickled batch per chunk (a copy of its columns).

Each format is one :class:`Reader` subclass (:class:`JsonlReader`,
:class:`CsvReader`, :class:`ParquetReader`, and :class:`StdinReader` for
streams) yielding raw :class:`Chunk` objects; :class:`EventSource` picks one by
format and validates its chunks. :class:`FollowReader` reads a plain JSONL or CSV
file as it grows, like ``tail -F`` (``EventSource(path, follow=Follow(...))``).

Resuming: :meth:`EventSource.to_state` holds the line reached, the byte offset
where the reader gives one (a plain JSONL file, a followed file: a resume reads
on from there without reading the lines before again) and what recognises the file
(:mod:`streameval.io.follow`); :meth:`EventSource.restore` refuses a file
truncated or rewritten since, and goes on in one that only grew.

This module may import :mod:`streameval.events`, :mod:`streameval.validation` and
:mod:`streameval.io.follow` (and pyarrow, lazily; :mod:`subprocess` and :mod:`pickle`
for the second process, which runs this module); the pipeline, the CLI and the service
import it.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import logging
import lzma
import os
import sys
import zlib
from collections import deque
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter
from typing import Any, Callable, Iterator

import numpy as np

from streameval.io.follow import LongLine
from streameval.validation import MAX_EXPANSION, MAX_LINE_BYTES
from streameval.events import (
    DEFAULT_BATCH_SIZE,
    FUTURE_MARK,
    MISSING,
    all_utf8,
    EventBatch,
    EventError,
    FieldMap,
    build_batch,
)

try:  # optional speed-up
    import orjson as _orjson

    _loads = _orjson.loads
except ImportError:  # pragma: no cover - exercised when orjson is absent
    _orjson = None
    _loads = json.loads

__all__ = ["EventSource", "read_events", "detect_format", "FORMATS", "Reader", "Chunk", "READERS",
           "register_reader", "JsonlReader", "CsvReader", "ParquetReader", "StdinReader",
           "SourceError", "LayoutError", "COMPRESSIONS", "arrow_column", "LineReader",
           "open_log", "sniff_compression", "TooExpanded", "MAGIC", "EXPANSION_FLOOR",
           "READ_CHUNK"]

logger = logging.getLogger("streameval.io")

#: accepted ``format=`` values -> canonical format (filled by :func:`register_reader`)
FORMATS: dict[str, str] = {}

_EXTENSIONS: dict[str, str] = {}

RejectedCallback = Callable[[int, str, Any], None]

#: compressed files by extension -> the opener of their decompressed bytes
COMPRESSIONS: dict[str, Callable[..., Any]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def _compression(name: str) -> str | None:
    """The compression extension ending ``name`` (lower case), or None."""
    low = name.lower()
    return next((ext for ext in COMPRESSIONS if low.endswith(ext)), None)


class LayoutError(EventError):
    """A log whose layout no row can be read with: a CSV header without a required
    column, duplicate or not UTF-8, or longer than the line limit. Not a bad row:
    ``on_error="skip"`` would not help, so it stops the read with either."""


class SourceError(ValueError):
    """A log that cannot be read: not a bad row but the file itself (missing, a
    directory, an I/O error, truncated or corrupt compressed data, a damaged Parquet
    file). ``str(e)`` names the file, the last line (Parquet: row) read whole and the
    reason; the attributes say the same (``path``, ``position``, ``reason``).

    >>> str(SourceError("log.jsonl.gz", 1200, "the compressed data ends early (truncated file?)"))
    'log.jsonl.gz: cannot read past line 1200: the compressed data ends early (truncated file?)'
    """

    def __init__(self, path: str, position: int, reason: str, unit: str = "line") -> None:
        self.path, self.position, self.reason = path, position, reason
        where = f"cannot read past {unit} {position}" if position else "cannot read"
        super().__init__(f"{path}: {where}: {reason}")


def _read_failure(e: BaseException) -> str | None:
    """The reason a read failed, for the errors of reading a file (I/O, decompression,
    decoding, pyarrow); None for anything else (a bad row, a bug)."""
    if isinstance(e, TooExpanded):
        return str(e)
    if isinstance(e, EOFError):  # gzip, bz2, lzma: the stream stops before its end marker
        return "the compressed data ends early (truncated file?)"
    if isinstance(e, gzip.BadGzipFile):
        return f"bad gzip data: {e}"
    if isinstance(e, (zlib.error, lzma.LZMAError)):
        return f"corrupt compressed data ({e})"
    if type(e).__module__.startswith("pyarrow") and not isinstance(e, ImportError):
        return str(e) or type(e).__name__  # a damaged Parquet file
    if isinstance(e, OSError):
        if e.strerror:  # the system's words: "Is a directory", "Input/output error"
            return e.strerror
        if str(e) == "Invalid data stream":  # bz2
            return f"corrupt compressed data ({e})"
        return str(e) or type(e).__name__
    if isinstance(e, UnicodeDecodeError):
        return f"not valid UTF-8 ({e.reason} at byte {e.start})"
    return None


# --------------------------------------------------------------- bounded reading

#: Bytes read from a log at once by :class:`LineReader`.
READ_CHUNK = 1 << 20

#: Decompressed bytes before the expansion is checked: a small file of repetitive rows
#: may expand more than :data:`MAX_EXPANSION` times and costs nothing.
EXPANSION_FLOOR = 64 << 20

#: Compression formats by their first bytes (magic numbers), with their openers: a
#: compressed log is recognised by its content, whatever its name.
MAGIC: tuple[tuple[bytes, str], ...] = ((b"\x1f\x8b", ".gz"), (b"BZh", ".bz2"),
                                        (b"\xfd7zXZ\x00", ".xz"))


def sniff_compression(head: bytes) -> str | None:
    """The compression (``".gz"``, ``".bz2"``, ``".xz"``) whose magic bytes start
    ``head``, or None.

    >>> sniff_compression(b"\\x1f\\x8b\\x08\\x00"), sniff_compression(b'{"ts": 1}')
    ('.gz', None)
    """
    return next((ext for magic, ext in MAGIC if head.startswith(magic)), None)


class TooExpanded(Exception):
    """A compressed log expanding more than ``max_expansion`` times (a compression bomb)."""


class _Guarded(io.RawIOBase):
    """The decompressed bytes of ``inner`` (a decompressing file object over ``raw``),
    refusing to expand more than ``limit`` times the compressed bytes read from ``raw``
    (:class:`TooExpanded`) once :data:`EXPANSION_FLOOR` bytes have come out."""

    def __init__(self, inner, raw, limit: float, own: bool = True) -> None:
        self.inner, self.raw, self.limit, self.own = inner, raw, limit, own
        self.out = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        # (at most 64 KiB at a time: what was decompressed before a truncated end is kept)
        data = self.inner.read1(min(len(b), 1 << 16))
        n = len(data)
        b[:n] = data
        self.out += n
        if self.limit and self.out > EXPANSION_FLOOR:
            try:
                used = max(self.raw.tell(), 1)
            except (OSError, ValueError):
                used = None
            if used is not None and self.out > self.limit * used:
                raise TooExpanded(
                    f"the compressed data expands more than {self.limit:g} times "
                    f"({used} bytes gave {self.out}): a compression bomb? "
                    "(raise [input] max_expansion, 0: no limit, if the file is genuine)")
        return n

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            if self.own:  # (a caller's stream stays open)
                self.raw.close()
            super().close()


def open_log(source, max_expansion: float = MAX_EXPANSION):
    """A binary file object of the decompressed bytes of ``source`` (a path or a binary
    stream), its compression recognised by its magic bytes (:data:`MAGIC`) or else by
    its name, and whether it is compressed. A compressed one is guarded against expanding more than
    ``max_expansion`` times."""
    raw = open(source, "rb") if isinstance(source, str) else source
    peek = getattr(raw, "peek", None)
    if peek is not None:
        head = peek(8)[:8]
    elif raw.seekable():
        pos = raw.tell()
        head = raw.read(8)
        raw.seek(pos)
    else:
        head = b""
    comp = sniff_compression(head)
    if comp is None and isinstance(source, str):
        comp = _compression(source)  # named compressed: its opener says what is wrong
    if comp is None:
        return raw, False
    inner = COMPRESSIONS[comp](raw, "rb")
    guarded = _Guarded(inner, raw, max_expansion, own=isinstance(source, str))
    return io.BufferedReader(guarded, READ_CHUNK), True


class LineReader:
    """The lines of a binary stream in bounded memory, in blocks (:meth:`take`).

    Reads :data:`READ_CHUNK` bytes at a time and never holds more than
    ``max_line_bytes`` of one line: a longer line is consumed to its end without being
    kept and reported as ``(line, bytes, head)`` among the block's ``long`` lines.
    Blank lines (empty, or a lone ``\\r``) are counted and skipped in bulk (one numpy
    pass per piece read), so that a gigabyte of newlines costs seconds, not a Python
    call per line. Line numbers start after ``lineno``; ``offset`` counts the bytes
    consumed (whole lines). A UTF-8 BOM at the very start is dropped. Cost: `O(bytes)`,
    a few C-level passes per piece.
    """

    def __init__(self, f, max_line_bytes: int, *, lineno: int = 0, offset: int = 0) -> None:
        self.f = f
        self.limit = max_line_bytes
        self.lineno = lineno
        self.offset = offset
        self._buf = b""
        self._skipping: list | None = None  # [first line, bytes, head] of a long line
        self._eof = False
        # ready lines, in pieces: [lines, their numbers, the byte offset after each]
        self._segs: deque = deque()
        self._ready = 0
        self._long: list = []
        self._bom = offset == 0
        self._read = getattr(f, "read1", f.read)

    def take(self, n: int):
        """``(lines, nums, long, last_line, offset)``: up to ``n`` non-blank lines (bytes,
        without their line break), their line numbers (int64), the over-long lines as
        ``(line, bytes, head)``, the last line consumed and the bytes consumed up to
        it; ``lines`` and ``long`` both empty at the end of the stream."""
        while self._ready < n and not self._eof:
            self._fill()
        lines: list = []
        nums, ends = [], []
        segs = self._segs
        while segs and len(lines) < n:
            seg = segs[0]
            k = n - len(lines)
            if len(seg[0]) <= k:
                segs.popleft()
                lines += seg[0]
                nums.append(seg[1])
                ends.append(seg[2])
            else:
                lines += seg[0][:k]
                nums.append(seg[1][:k])
                ends.append(seg[2][:k])
                segs[0] = [seg[0][k:], seg[1][k:], seg[2][k:]]
        self._ready -= len(lines)
        nums_a = (nums[0] if len(nums) == 1 else np.concatenate(nums)) if nums else \
            np.empty(0, np.int64)
        if segs:  # more lines are ready: the block ends with its last line
            last = int(nums_a[-1])
            long = [x for x in self._long if x[0] <= last]
            self._long = [x for x in self._long if x[0] > last]
            return lines, nums_a, long, last, int(ends[-1][-1])
        long, self._long = self._long, []
        return lines, nums_a, long, self.lineno, self.offset

    def _fill(self) -> None:
        data = self._read(READ_CHUNK)
        if not data:
            self._eof = True
            if self._skipping is not None:
                self._end_long(0)
            elif self._buf:
                rest, self._buf = self._buf, b""
                self._add(rest + b"\n", final=True)
            return
        if self._bom:
            self._bom = False
            while len(data) < 3:  # (a pipe may give fewer bytes than the BOM at first)
                more = self._read(READ_CHUNK)
                if not more:
                    break
                data += more
            if data.startswith(b"\xef\xbb\xbf"):
                data = data[3:]
                self.offset += 3
        if self._skipping is not None:
            nl = data.find(b"\n")
            if nl < 0:
                self._skipping[1] += len(data)
                return
            self._end_long(nl + 1)
            data = data[nl + 1:]
        elif self._buf:
            data = self._buf + data
            self._buf = b""
        last = data.rfind(b"\n")
        if last < 0:
            self._hold(data)
            return
        self._add(data[: last + 1])
        self._hold(data[last + 1:])

    def _hold(self, rest: bytes) -> None:
        if len(rest) > self.limit:  # a line longer than the limit: count, do not keep
            self._skipping = [self.lineno + 1, len(rest), rest[:200]]
            self._buf = b""
        else:
            self._buf = rest

    def _end_long(self, tail: int) -> None:
        line, nbytes, head = self._skipping
        self._skipping = None
        nbytes += tail
        self.lineno += 1
        self.offset += nbytes
        self._long.append((line, nbytes - (1 if tail else 0), head))

    def _add(self, data: bytes, final: bool = False) -> None:
        """Whole lines ``data`` (ending with ``\\n``; ``final``: the last one had none)."""
        start = self.lineno + 1
        if (b"\n\n" not in data and b"\n\r\n" not in data and not data.startswith(b"\n")
                and not data.startswith(b"\r\n")):
            parts = data.split(b"\n")
            parts.pop()  # after the last \n
            sizes = np.fromiter(map(len, parts), np.int64, len(parts))
            if sizes.max() <= self.limit:
                sizes += 1
                ends = np.cumsum(sizes)
                ends += self.offset
                if final:
                    ends[-1] -= 1
                self._segs.append([parts, np.arange(start, start + len(parts)), ends])
                self._ready += len(parts)
                self.lineno += len(parts)
                self.offset += len(data) - final
                return
        arr = np.frombuffer(data, np.uint8)
        ends = np.flatnonzero(arr == 10)
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        lens = ends - starts
        blank = (lens == 0) | ((lens == 1) & (arr[starts] == 13))
        long = ~blank & (lens > self.limit)
        for k in np.flatnonzero(long).tolist():
            s = int(starts[k])
            self._long.append((start + k, int(lens[k]), data[s:s + 200]))
        keep = np.flatnonzero(~blank & ~long)
        if len(keep):
            lines = [data[s:e] for s, e in zip(starts[keep].tolist(), ends[keep].tolist())]
            after = ends[keep] + 1 + self.offset
            if final and keep[-1] == len(ends) - 1:
                after[-1] -= 1
            self._segs.append([lines, keep + start, after])
            self._ready += len(lines)
        self.lineno += len(ends)
        self.offset += len(data) - final


def detect_format(path: str | os.PathLike) -> str:
    """Format name from a file name: ``"jsonl"``, ``"csv"`` or ``"parquet"``.

    >>> detect_format("logs/events.ndjson"), detect_format("x.csv.gz"), detect_format("y.parquet")
    ('jsonl', 'csv', 'parquet')
    >>> detect_format("z.jsonl.bz2"), detect_format("z.JSONL.XZ")
    ('jsonl', 'jsonl')
    """
    name = os.fspath(path).lower()
    comp = _compression(name)
    if comp is not None:
        name = name[: -len(comp)]
    ext = os.path.splitext(name)[1]
    try:
        return _EXTENSIONS[ext]
    except KeyError:
        raise ValueError(
            f"cannot tell the format of {os.fspath(path)!r} from its extension; "
            "use .jsonl/.ndjson/.json, .csv or .parquet (.gz, .bz2, .xz: compressed), "
            "or pass format="
        ) from None


def _require_pyarrow():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(
            "reading Parquet needs pyarrow: pip install streameval[parquet]"
        ) from None
    return pq


@dataclass
class Chunk:
    """Raw columns of one batch of rows, before validation (what a :class:`Reader` yields).

    ``columns`` maps field names to equal-length lists (or numpy arrays) of raw values
    (``MISSING`` where a row lacks the field; a field absent from ``columns`` is
    missing in every row); ``lines`` the line (or row) number of each row; ``text``
    whether the values are text cells (or a predicate on the field name); ``rejects``
    ``[(line, reason, raw)]`` for rows refused while parsing; ``raw(i)`` the raw row
    ``i`` for error reports; ``last_line`` the last physical line (or row) consumed;
    ``offset`` the bytes of the file consumed (None when the reader cannot say: a
    compressed file, CSV read whole, Parquet, a stream); ``origin`` the followed file
    (:class:`~streameval.io.follow.Tail`) the chunk comes from, if any.
    """

    columns: dict[str, Any]
    lines: np.ndarray
    text: Any  # bool or predicate on the field name
    rejects: list  # [(line, reason, raw)] found while parsing
    raw: Callable[[int], Any]  # row index -> raw row, for error reports
    last_line: int  # last physical line (or row) consumed
    offset: int | None = None  # bytes of the file consumed, where known
    origin: Any = None  # the Tail of a followed file


class RawRows:
    """The raw rows of a chunk, for error reports: ``raw(i)`` is ``show(rows[i])``
    (a JSON line's text, a CSV record re-quoted). Picklable, so that a chunk read in
    another process can name its rows (``show`` a module-level function)."""

    __slots__ = ("rows", "show")

    def __init__(self, rows: list, show: Callable[[Any], Any]) -> None:
        self.rows = rows
        self.show = show

    def __call__(self, i: int) -> Any:
        return self.show(self.rows[i])

    def __reduce__(self):
        rows = self.rows
        if rows and all(type(r) is bytes for r in rows):  # JSON lines: one buffer
            ends = np.cumsum(np.fromiter(map(len, rows), np.int64, len(rows)))
            return _JoinedRows, (b"".join(rows), ends, self.show)
        return RawRows, (rows, self.show)


class _JoinedRows:
    """:class:`RawRows` of byte lines as they travel between processes: the lines
    joined in one buffer with their ends (pickled as two buffers, not a list)."""

    __slots__ = ("data", "ends", "show")

    def __init__(self, data: bytes, ends: np.ndarray, show: Callable[[Any], Any]) -> None:
        self.data, self.ends, self.show = data, ends, show

    def __call__(self, i: int) -> Any:
        a = int(self.ends[i - 1]) if i else 0
        return self.show(self.data[a:int(self.ends[i])])


class Reader:
    """One log format: its rows as raw :class:`Chunk` objects (validation comes after).

    A subclass declares the ``format`` names it answers to (the first is canonical)
    and the file ``extensions`` that select it, and implements :meth:`chunks`;
    :class:`EventSource` picks the class by format. A new format is one new class.
    ``source`` is a file name or an open binary stream; ``skip`` lines (rows) are
    passed over without being parsed (a resume), or, where the reader gives byte
    offsets (:attr:`Chunk.offset`), the file is read from ``offset``, the byte after
    line ``skip``.
    """

    formats: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()

    def __init__(self, source: Any, fields: FieldMap, *, batch_size: int = DEFAULT_BATCH_SIZE,
                 partial: bool = False, where: str | None = None,
                 max_line_bytes: int = MAX_LINE_BYTES,
                 max_expansion: float = MAX_EXPANSION) -> None:
        self.source = source
        self.fields = fields
        self.batch_size = batch_size
        self.partial = partial
        self.max_line_bytes = max_line_bytes
        self.max_expansion = max_expansion
        self.where = where if where is not None else (
            source if isinstance(source, str) else getattr(source, "name", "<stream>"))

    def chunks(self, skip: int = 0, offset: int | None = None) -> Iterator[Chunk]:  # pragma: no cover
        """Yield the rows after line (row) ``skip`` as :class:`Chunk` objects
        (``offset``: where line ``skip`` ends, if the reader gives offsets)."""
        raise NotImplementedError

    def _plain_file(self) -> bool:
        """Whether the source is an uncompressed file, by its first bytes (byte offsets
        hold)."""
        if not isinstance(self.source, str):
            return False
        if _compression(self.source) is not None:
            return False
        try:
            with open(self.source, "rb") as f:
                return sniff_compression(f.read(8)) is None
        except OSError:
            return True  # the read says why it fails

    def _open_binary(self):
        """The source as a binary file (decompressed when its magic bytes say so:
        :data:`MAGIC`, guarded by ``max_expansion``), and whether to close it."""
        if not isinstance(self.source, str):
            f, compressed = open_log(self.source, self.max_expansion)
            return f, compressed
        f, _ = open_log(self.source, self.max_expansion)
        return f, True

    def check_columns(self, names, line: int | None, what: str) -> None:
        """A log without a required field is refused before any row is read."""
        fm = self.fields
        required = []
        if self.partial:
            required.append(fm.id)
            required.append(fm.ts)
        else:
            required += [fm.label, fm.score]
            if fm.ts is not None and fm.require_ts:
                required.append(fm.ts)
        have = set(names)
        for name in required:
            if name is not None and name not in have:
                raise LayoutError(
                    f"no column {name!r} in {what} (columns: {', '.join(map(str, names))})",
                    line=line,
                    where=None if line is not None else self.where,
                )
        if self.partial and fm.label not in have and fm.score not in have:
            raise LayoutError(
                f"neither {fm.label!r} nor {fm.score!r} is a column of {what}",
                line=line,
                where=None if line is not None else self.where,
            )


#: Reader classes by canonical format, in the order they were defined
READERS: dict[str, type[Reader]] = {}


def register_reader(cls: type[Reader]) -> type[Reader]:
    """Class decorator: make ``cls`` the reader of its ``formats`` and ``extensions``."""
    READERS[cls.formats[0]] = cls
    for name in cls.formats:
        FORMATS[name] = cls.formats[0]
    for ext in cls.extensions:
        _EXTENSIONS[ext] = cls.formats[0]
    return cls


@register_reader
class JsonlReader(Reader):
    """JSON lines: one object per line; blank lines are skipped (and still counted).

    A chunk of well-formed lines is parsed with one ``orjson.loads`` per line and its
    columns taken with :func:`operator.itemgetter`; only a chunk holding a bad line
    (or rows lacking a field others have) takes the slower per-line path, which names
    the line and the reason.
    """

    formats = ("jsonl", "ndjson", "json")
    extensions = (".jsonl", ".ndjson", ".json")

    def chunks(self, skip: int = 0, offset: int | None = None) -> Iterator[Chunk]:
        f, close = self._open_binary()
        try:
            plain = self._plain_file()
            if plain and offset:  # resume at a byte offset: no line before it is read again
                f.seek(offset)
                lines = LineReader(f, self.max_line_bytes, lineno=skip, offset=offset)
            else:
                lines = LineReader(f, self.max_line_bytes)
            # offsets in a compressed stream (or a stream) are not kept
            yield from self._blocks(lines, skip, offsets=plain)
        finally:
            if close:
                f.close()

    def _blocks(self, reader: LineReader, skip: int, offsets: bool) -> Iterator[Chunk]:
        """Chunks of the lines of a :class:`LineReader` after line ``skip``: the rows of
        each block of ``batch_size`` non-blank lines, an over-long line a bad row."""
        names = self.fields.columns()
        bs = self.batch_size
        limit = self.max_line_bytes
        while True:
            lines, nums, long, last, offset = reader.take(bs)
            if not lines and not long:
                return
            if len(nums) and nums[0] <= skip:
                k = int(np.searchsorted(nums, skip, side="right"))
                lines, nums = lines[k:], nums[k:]
            long = [x for x in long if x[0] > skip]
            rejects = [(line, _too_long(nbytes, limit), _text(head) + "...")
                       for line, nbytes, head in long]
            if not lines and not rejects:
                continue
            columns, linenos, more, kept = self._parse(lines, nums, names)
            yield Chunk(columns, linenos, False, sorted(rejects + more),
                        RawRows(kept, _text), last,
                        offset if offsets else None)

    def _parse(self, lines: list, nums: list, names: list):
        """``(columns, line numbers, rejects, kept lines)`` of non-blank JSON lines."""
        columns = None
        rejects: list = []
        try:
            objs = list(map(_loads, lines))
            if set(map(type, objs)) != {dict}:
                raise ValueError("not all objects")
            kept = lines
            linenos = np.asarray(nums, dtype=np.int64)
            columns = _fast_columns(objs, names, lines)
        except (ValueError, RecursionError):  # RecursionError: json nested too deep
            objs, kept, keep_nums = [], [], []
            for x, line in zip(lines, np.asarray(nums).tolist()):
                if not x.strip():
                    continue
                o, reason = _parse_json_line(x)
                if reason is not None:
                    rejects.append((line, reason, _text(x)))
                    continue
                objs.append(o)
                kept.append(x)
                keep_nums.append(line)
            linenos = np.array(keep_nums, dtype=np.int64)
        if columns is None:
            columns = {n: [o.get(n, MISSING) for o in objs] for n in names}
        return columns, linenos, rejects, kept

    def _chunks(self, f, skip: int, *, lineno: int = 0, offset: int | None = None,
                wait: Callable[[], bool] | None = None, origin: Any = None) -> Iterator[Chunk]:
        """Chunks of the lines of ``f`` (an iterator of ``bytes`` lines) after line
        ``skip``; ``lineno``: the line ``f`` starts after; ``offset``: its byte offset
        (None: not counted); ``wait``: when ``f`` gives nothing, called to wait for more
        (True: go on; False or None: the end)."""
        names = self.fields.columns()
        bs = self.batch_size
        loads = _loads
        first = lineno == 0
        while True:
            lines = list(islice(f, bs))
            if not lines:
                if wait is not None and wait():
                    continue
                return
            start = lineno + 1
            lineno += len(lines)
            if offset is not None:
                offset += sum(map(len, lines))
            if first:
                first = False
                if lines[0].startswith(b"\xef\xbb\xbf"):
                    lines[0] = lines[0][3:]
            if skip >= lineno:
                continue
            if skip >= start:
                lines = lines[skip - start + 1:]
                start = skip + 1
            rejects: list = []
            if any(type(x) is LongLine for x in lines):  # (a followed file's over-long lines)
                for k, x in enumerate(lines):
                    if type(x) is LongLine:
                        rejects.append((start + k, _too_long(x.nbytes, self.max_line_bytes),
                                        _text(bytes(x)) + "..."))
                        lines[k] = b"\n"
            columns = None
            try:
                objs = list(map(loads, lines))
                if set(map(type, objs)) != {dict}:
                    raise ValueError("not all objects")
                kept = lines
                linenos = np.arange(start, start + len(lines), dtype=np.int64)
                columns = _fast_columns(objs, names, lines)
            except (ValueError, RecursionError):  # RecursionError: json nested too deep
                objs, kept, nums = [], [], []
                for k, x in enumerate(lines):
                    if not x.strip():
                        continue
                    o, reason = _parse_json_line(x)
                    if reason is not None:
                        rejects.append((start + k, reason, _text(x)))
                        continue
                    objs.append(o)
                    kept.append(x)
                    nums.append(start + k)
                linenos = np.array(nums, dtype=np.int64)
            if columns is None:
                columns = {n: [o.get(n, MISSING) for o in objs] for n in names}
            yield Chunk(columns, linenos, False, rejects, RawRows(kept, _text), lineno,
                        offset, origin)


def _fast_columns(objs: list, names: list, lines: list) -> dict | None:
    """Columns of parsed rows when every row has the fields the first row has.

    A field the first row lacks is left out (missing in every row) when its quoted
    name appears in no line and no line holds a backslash (an escape could spell
    it); otherwise, or when a row lacks a field the first has, None (the caller
    takes the per-row path). Cost: `O(rows)` in C (itemgetter, bytes search).
    """
    if not objs:
        return {}
    head = objs[0]
    present = [n for n in names if n in head]
    absent = [n for n in names if n not in head]
    if absent:
        data = b"".join(lines)
        if b"\\" in data or any(b'"' + n.encode() + b'"' in data for n in absent):
            return None
    try:
        return {n: list(map(itemgetter(n), objs)) for n in present}
    except KeyError:
        return None


@register_reader
class CsvReader(Reader):
    """CSV with a header row; an empty cell means "absent"; lines are physical lines."""

    formats = ("csv",)
    extensions = (".csv",)

    def chunks(self, skip: int = 0, offset: int | None = None) -> Iterator[Chunk]:
        # bytes that are not UTF-8 become lone surrogates (surrogateescape): the rows
        # holding them in a field read are refused as bad rows, the others read
        f, close = self._open_binary()
        _bound_csv_fields(self.max_line_bytes)
        try:
            yield from self._chunks(_CsvText(f, self.max_line_bytes), skip)
        finally:
            if close:
                f.close()

    def _chunks(self, f, skip: int, *, wait: Callable[[], bool] | None = None,
                offset: int | None = None) -> Iterator[Chunk]:
        """Chunks of the records of ``f`` (text lines) after line ``skip``. With
        ``wait`` (a followed file, ``f`` a :class:`~streameval.io.follow.CsvLines`): when
        ``f`` gives nothing, ``wait()`` says whether to go on; ``offset``: the byte
        offset of line ``skip``, where ``f`` jumps after the header. A record the csv
        module refuses (a field over the limit, a stray quote) or an over-long line is
        a bad row; the reading goes on at the next line."""
        fm = self.fields
        bs = self.batch_size
        reader = csv.reader(f)
        header = None
        shift = 0  # line numbers = reader.line_num + shift (after a jump to ``offset``)
        tell = getattr(f, "offset", None) if wait is not None else None
        origin = getattr(f, "tail", None)
        # a file's lines (_CsvText) or a followed file's (CsvLines): both list the
        # over-long lines they gave as empty ones in ``long``
        text = f if isinstance(f, _CsvText) or hasattr(f, "long") else None
        while header is None:
            try:
                row = next(reader)
            except StopIteration:
                if wait is not None and wait():
                    continue
                return
            except (csv.Error, _RecordTooLong) as e:
                raise LayoutError(f"bad CSV header: {e}", line=reader.line_num) from None
            if text is not None and text.long:
                line, nbytes, _ = text.long[0]
                raise LayoutError(f"bad CSV header: {_too_long(nbytes, text.limit)}", line=line)
            if row:
                header = [h.strip() for h in row]
        header_line = reader.line_num + (text.skipped if text is not None else 0)
        if not all_utf8(header):
            raise LayoutError("bad CSV header: not valid UTF-8", line=header_line)
        index: dict[str, int] = {}
        for j, h in enumerate(header):
            if h in index:
                raise LayoutError(f"duplicate column {h!r} in the CSV header", line=header_line)
            index[h] = j
        self.check_columns(header, header_line, "the CSV header")
        ncols = len(header)
        wanted = [(n, index[n]) for n in fm.columns() if n in index]
        if offset and tell is not None and offset > f.offset:  # resume after line skip
            f.seek(offset)
            shift = skip - reader.line_num
        if text is not None:
            def consumed() -> int:  # physical lines consumed, the blank runs included
                return reader.line_num + shift + text.skipped
        else:
            def consumed() -> int:
                return reader.line_num + shift
        prev = consumed()
        while True:
            rows: list = []
            ends: list = []
            rejects: list = []  # records the csv module refuses, over-long lines
            while len(rows) < bs:
                try:
                    r = next(reader)
                except StopIteration:
                    break
                except csv.Error as e:  # a field over the limit, a stray quote
                    rejects.append((consumed(), f"bad CSV: {e}", ""))
                    continue
                except _RecordTooLong as e:
                    rejects.append((e.line + shift, str(e), e.head))
                    continue
                finally:
                    if text is not None:
                        text.record = 0
                rows.append(r)
                ends.append(consumed())
            if text is not None and text.long:
                rejects += [(line + shift, _too_long(nbytes, text.limit), _text(head) + "...")
                            for line, nbytes, head in text.long]
                text.long = []
            rejects = [r for r in rejects if r[0] > skip]
            end = consumed()
            if not rows and not rejects:
                if end > prev and prev < skip:
                    prev = end
                if wait is not None and wait():
                    continue
                return
            ends_a = np.array(ends, dtype=np.int64)
            gaps = np.diff(ends_a, prepend=prev)
            if (gaps == 1).all():  # one physical line per record
                nums = ends_a
            else:  # quoted line breaks or blank lines: the record starts breaks before its end
                span = np.array([sum(map(_breaks, r)) for r in rows], dtype=np.int64)
                nums = ends_a - span
            prev = end
            if len(nums) and nums[-1] <= skip and not rejects:
                continue
            if len(nums) and (nums[0] <= skip or set(map(len, rows)) != {ncols}):
                keep_rows, keep_nums = [], []
                for r, line in zip(rows, nums.tolist()):
                    if not r or line <= skip:
                        continue
                    if len(r) != ncols:
                        rejects.append((line, f"expected {ncols} fields, got {len(r)}", _csv_text(r)))
                        continue
                    keep_rows.append(r)
                    keep_nums.append(line)
                rows = keep_rows
                nums = np.array(keep_nums, dtype=np.int64)
            columns = {n: list(map(itemgetter(j), rows)) for n, j in wanted}
            if not all(map(all_utf8, columns.values())):  # bytes that are not UTF-8
                bad = [not all_utf8([r[j] for _, j in wanted]) for r in rows]
                rejects.extend((line, "not valid UTF-8", _csv_text(r))
                               for r, line, b in zip(rows, nums.tolist(), bad) if b)
                rows = [r for r, b in zip(rows, bad) if not b]
                nums = nums[~np.array(bad, dtype=bool)]
                columns = {n: list(map(itemgetter(j), rows)) for n, j in wanted}
            rejects.sort(key=itemgetter(0))
            yield Chunk(columns, nums, True, rejects, RawRows(rows, _csv_text), end,
                        None if tell is None else f.offset, origin)


class _RecordTooLong(Exception):
    """A CSV record (quoted fields running over lines) longer than the line limit."""

    def __init__(self, line: int, limit: int, head: str) -> None:
        self.line, self.head = line, head
        super().__init__(f"record runs over more than {limit} bytes, the limit "
                         "([input] max_line_bytes; an unclosed quote?)")


class _CsvText:
    """The lines of a binary file as text for :func:`csv.reader`, in bounded memory:
    each line read with ``readline(limit + 1)``; a longer line is consumed to its end
    without being kept, given to the reader as an empty line and listed in
    :attr:`long` as ``(line, bytes, head)``; a record running over lines (quoted fields)
    past ``limit`` bytes raises :class:`_RecordTooLong` (the reader resumes at the next
    line). Bytes that are not UTF-8 become lone surrogates (``surrogateescape``); a BOM
    at the start is dropped."""

    def __init__(self, f, limit: int) -> None:
        self.f, self.limit = f, limit
        self.lineno = 0
        self.record = 0  # bytes of the record being read (reset by the caller per row)
        self.long: list = []
        self.skipped = 0  # blank lines passed over in bulk (not given to the reader)
        self._peek = getattr(f, "peek", None)

    def __iter__(self) -> "_CsvText":
        return self

    def __next__(self) -> str:
        f, limit = self.f, self.limit
        line = f.readline(limit + 1)
        if not line:
            raise StopIteration
        self.lineno += 1
        if self.lineno == 1 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if len(line) > limit and not line.endswith(b"\n"):
            n, head = len(line), line[:200]
            while True:
                more = f.readline(READ_CHUNK)
                n += len(more)
                if not more or more.endswith(b"\n"):
                    break
            self.long.append((self.lineno, n - 1 if more else n, head))
            return "\n"
        if self.record == 0 and line == b"\n" and self._peek is not None:
            # a run of blank lines between records: counted, not given to the reader
            while True:
                ahead = self._peek(READ_CHUNK)[:READ_CHUNK]
                k = len(ahead) - len(ahead.lstrip(b"\n"))
                if not k:
                    break
                self.f.read(k)
                self.skipped += k
                self.lineno += k
        self.record += len(line)
        if self.record > limit:
            self.record = 0
            self.skipped += 1  # (consumed, not given to the reader)
            raise _RecordTooLong(self.lineno, limit, _text(line[:200]))
        return line.decode("utf-8", "surrogateescape")


def _bound_csv_fields(limit: int) -> None:
    """Make the csv module refuse a field over ``limit`` bytes (a bad row), not 128 KiB
    (its default: an error that used to stop the reading)."""
    if csv.field_size_limit() != limit:
        csv.field_size_limit(limit)


@register_reader
class ParquetReader(Reader):
    """Parquet (needs ``pyarrow``): ``line`` is the 1-based row number; timestamp and
    date columns are event times; string columns follow the CSV rules, typed columns
    the JSON rules."""

    formats = ("parquet",)
    extensions = (".parquet", ".pq")

    def __init__(self, source: Any, fields: FieldMap, **options: Any) -> None:
        if not isinstance(source, str) and not hasattr(source, "seek"):
            raise ValueError("Parquet cannot be read from stdin; pass a file name")
        _require_pyarrow()
        super().__init__(source, fields, **options)

    def chunks(self, skip: int = 0, offset: int | None = None) -> Iterator[Chunk]:
        pq = _require_pyarrow()
        pf = pq.ParquetFile(self.source)
        all_names = pf.schema_arrow.names
        self.check_columns(all_names, None, "the Parquet file")
        names = [n for n in self.fields.columns() if n in all_names]
        row = 0
        for rb in pf.iter_batches(batch_size=self.batch_size, columns=names):
            n = rb.num_rows
            start = row + 1
            row += n
            if skip >= row:
                continue
            if skip >= start:
                rb = rb.slice(skip - start + 1)
                start = skip + 1
            columns: dict[str, Any] = {}
            text_fields = set()
            for name in names:
                columns[name], is_text = arrow_column(rb.column(name))
                if is_text:
                    text_fields.add(name)
            lines = np.arange(start, start + rb.num_rows, dtype=np.int64)
            yield Chunk(
                columns, lines, text_fields.__contains__, [],
                lambda i, _rb=rb: _rb.slice(i, 1).to_pylist()[0], row,
            )


class StdinReader(Reader):
    """Standard input (or any binary stream): JSONL or CSV, told by ``format`` or by
    the first non-blank byte (``{`` means JSONL); the stream is left open."""

    def __init__(self, source: Any, fields: FieldMap, *, format: str | None = None,
                 **options: Any) -> None:
        if source is None or source == "-":
            source = sys.stdin.buffer
        super().__init__(source, fields, **options)
        fmt = FORMATS.get(format, format) if format is not None else _sniff(source)
        if fmt not in ("jsonl", "csv"):
            raise ValueError(f"a stream can be read as JSONL or CSV, not {fmt!r}")
        self.format = fmt
        options.pop("where", None)
        self.inner = READERS[fmt](source, fields, where=self.where, **options)

    def chunks(self, skip: int = 0, offset: int | None = None) -> Iterator[Chunk]:
        return self.inner.chunks(skip)


@dataclass
class Follow:
    """How :class:`EventSource` follows a growing file (``tail -F``): seconds between
    looks when there is nothing new (``poll``), a ``stop()`` callable (True: end the
    reading after the lines read so far; checked while waiting and before each read),
    and ``notice(message)`` for what a user should know (the file was replaced,
    truncated, or not the one a checkpoint saw): a warning on the
    ``streameval.io`` logger by default."""

    poll: float = 0.5
    stop: Callable[[], bool] | None = None
    notice: Callable[[str], None] | None = None

    def say(self, message: str) -> None:
        (self.notice or logger.warning)(message)


class FollowReader(Reader):
    """A plain JSONL or CSV file read as it grows, like ``tail -F`` (see
    :class:`~streameval.io.follow.Tail`): whole lines as they are appended; when the
    file is replaced (rotated) or truncated, the rest of the old one, then the new one
    from its start (its line numbers start again at 1, a CSV file has its header
    again). The chunks of a file end when ``follow.stop()`` says so."""

    def __init__(self, source: str, fields: FieldMap, *, format: str, follow: Follow,
                 **options: Any) -> None:
        if format not in ("jsonl", "csv"):
            raise ValueError(f"a {format} file cannot be followed: only JSONL and CSV, "
                             "whose rows are lines")
        super().__init__(source, fields, **options)
        self.inner = READERS[format](source, fields, **options)
        self.format = format
        self.follow = follow

    def chunks(self, skip: int = 0, offset: int | None = None) -> Iterator[Chunk]:
        from streameval.io.follow import CsvLines, Tail

        fw = self.follow
        opts = {"poll": fw.poll, "stop": fw.stop, "max_line_bytes": self.inner.max_line_bytes}
        csv_ = self.format == "csv"
        tail = Tail(self.source, offset=0 if csv_ else (offset or 0), **opts)
        while True:
            try:
                if csv_:
                    yield from self.inner._chunks(CsvLines(tail), skip, wait=tail.wait,
                                                  offset=offset)
                elif offset:
                    yield from self.inner._chunks(tail, skip, lineno=skip, offset=offset,
                                                  wait=tail.wait, origin=tail)
                else:
                    yield from self.inner._chunks(tail, skip, offset=0, wait=tail.wait,
                                                  origin=tail)
            finally:
                tail.close()
            if not tail.ended:  # stopped
                return
            fw.say(f"{self.source}: {tail.reason}; following the new file from its start"
                   if tail.reason == "replaced" else
                   f"{self.source}: truncated; following it from its start")
            tail = Tail.open_when_there(self.source, **opts)
            if tail is None:  # stopped while the name pointed to no file
                return
            skip, offset = 0, None


class EventSource:
    """Iterate a log file (or stdin) as validated :class:`EventBatch` objects.

    Cost: `O(rows)`; memory `O(batch_size)`. Counters after (or during)
    iteration: ``n_rows`` data rows read, ``n_events`` events yielded,
    ``n_rejected`` bad rows, ``position`` the last line (Parquet: row)
    consumed, ``offset`` the bytes consumed (a plain JSONL file, or a followed
    file; None otherwise). A new iteration re-reads the file from the start (stdin
    can be read once). ``resume_after=N`` skips lines ``<= N`` without validating
    them; to resume a replay, :meth:`restore` the dict :meth:`to_state` gave: it
    holds the position and what recognises the file
    (:func:`~streameval.io.follow.log_identity`), so that a log that grew since is
    read on from there (from the byte offset where there is one) and a log that was
    truncated or rewritten is refused (:class:`~streameval.io.follow.LogChangedError`).

    ``follow=Follow(...)``: read a plain JSONL or CSV file as it grows, like
    ``tail -F`` (:class:`FollowReader`): the iteration waits for new lines instead
    of ending, and ends when ``follow.stop()`` says so. A followed file found
    replaced on :meth:`restore` (rotated while nothing was reading it) is read from
    its start, with a notice.

    The rows come from a :class:`Reader` chosen by format (``reader``); this class
    validates them (:func:`streameval.events.build_batch`) and routes bad rows.
    With ``on_error="fail"`` the batch holding the first bad row is not
    yielded (batches before it were); the error names that row's line. A file
    that cannot be read raises :class:`SourceError` (with either ``on_error``)
    after the batches read whole; :meth:`raw` gives the raw row of a line of
    the batch yielded last.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "log.jsonl")
    >>> _ = open(p, "w").write('{"ts": 1, "label": 1, "score": 0.9}\\n{"ts": 2, "label": 0, "score": 0.4}\\n')
    >>> [b.score.tolist() for b in EventSource(p)]
    [[0.9, 0.4]]

    Parameters: ``path`` (a file name, ``"-"`` for stdin, or a binary file
    object), ``fields`` (:class:`FieldMap`), ``format`` (``"jsonl"``,
    ``"csv"``, ``"parquet"``; default from the extension), ``batch_size``,
    ``on_error`` (``"fail"`` or ``"skip"``), ``rejected`` (callback for
    skipped rows; by default the first 20 are logged as warnings),
    ``partial`` (rows may lack the label or the score: prediction and label
    rows for :mod:`streameval.io.delayed`), ``follow`` (:class:`Follow`: read a
    growing file), ``max_line_bytes`` (a longer line, CSV record or field is a bad
    row, read without being held), ``max_expansion`` (a compressed file expanding
    more is refused with :class:`SourceError`; 0: no limit), ``parse_process``
    (``"auto"``, True or False: read and validate in a second process, see the module
    docstring and :meth:`parses_elsewhere`).
    """

    def __init__(
        self,
        path: str | os.PathLike | io.BufferedIOBase,
        fields: FieldMap | None = None,
        *,
        format: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        on_error: str = "fail",
        rejected: RejectedCallback | None = None,
        resume_after: int = 0,
        partial: bool = False,
        follow: Follow | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
        max_expansion: float = MAX_EXPANSION,
        parse_process: bool | str = "auto",
    ) -> None:
        if parse_process not in ("auto", True, False):
            raise ValueError(f"parse_process must be 'auto', True or False, got {parse_process!r}")
        self.parse_process = parse_process
        if on_error not in ("fail", "skip"):
            raise ValueError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if not isinstance(resume_after, int) or resume_after < 0:
            raise ValueError(f"resume_after must be an integer >= 0, got {resume_after!r}")
        self.fields = fields if fields is not None else FieldMap()
        self.batch_size = batch_size
        self.on_error = on_error
        self.rejected = rejected if rejected is not None else self.log_rejected
        self.resume_after = resume_after
        self.partial = partial
        self.n_rows = 0
        self.n_events = 0
        self.n_rejected = 0
        self.n_future = 0
        self.position = resume_after
        self.offset: int | None = None
        self.resume_offset: int | None = None
        self.follow = follow
        self._ident: dict | None = None  # what recognises the file (for to_state)
        self._chunk: Chunk | None = None  # the chunk of the batch yielded last (raw rows)
        if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int) \
                or max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be an integer >= 1, got {max_line_bytes!r}")
        if isinstance(max_expansion, bool) or not isinstance(max_expansion, (int, float)) \
                or not max_expansion >= 0:
            raise ValueError(f"max_expansion must be a number >= 0 (0: no limit), "
                             f"got {max_expansion!r}")
        opts = dict(batch_size=batch_size, partial=partial, max_line_bytes=max_line_bytes,
                    max_expansion=max_expansion)
        self._options = dict(opts, format=format)  # (what a parsing process is built with)
        self.by_name = isinstance(path, (str, os.PathLike)) and os.fspath(path) != "-"
        if follow is not None and not self.by_name:
            raise ValueError("cannot follow a stream: follow a file by its name")
        if self.by_name:
            self.path = os.fspath(path)
            fmt = format if format is not None else detect_format(self.path)
            if fmt not in FORMATS:
                raise ValueError(f"unknown format {fmt!r}; expected one of {sorted(FORMATS)}")
            self.format = FORMATS[fmt]
            if follow is not None:
                comp = _compression(self.path)
                if comp is not None:
                    raise ValueError(f"a compressed log ({comp}) cannot be followed: only a "
                                     "plain JSONL or CSV file growing by whole lines")
                self.reader: Reader = FollowReader(self.path, self.fields, format=self.format,
                                                   follow=follow, **opts)
            else:
                self.reader = READERS[self.format](self.path, self.fields, **opts)
        else:
            self.path = "-" if not hasattr(path, "read") else getattr(path, "name", "<stream>")
            stream = sys.stdin.buffer if not hasattr(path, "read") else path
            if format != "parquet" and hasattr(stream, "peek"):
                # a compressed stream (gzip -c log | streameval replay -): by its magic bytes
                if sniff_compression(stream.peek(8)[:8]) is not None:
                    stream, _ = open_log(stream, max_expansion)
            if format is not None and format not in FORMATS:
                raise ValueError(f"unknown format {format!r}; expected one of {sorted(FORMATS)}")
            fmt = FORMATS[format] if format is not None else _sniff(stream)
            if fmt == "parquet":  # a seekable binary file object
                self.reader = ParquetReader(stream, self.fields, where=self.path, **opts)
            else:
                self.reader = StdinReader(stream, self.fields, format=fmt, where=self.path, **opts)
            self.format = fmt

    def __repr__(self) -> str:
        return f"EventSource({self.path!r}, format={self.format!r})"

    def log_rejected(self, line: int, reason: str, raw: Any) -> None:
        """The default ``rejected`` callback: log the first 20 bad rows as warnings."""
        if self.n_rejected <= 20:
            logger.warning("%s: rejected line %d: %s", self.path, line, reason)
            if self.n_rejected == 20:
                logger.warning("%s: further rejected rows are counted, not logged", self.path)

    # ------------------------------------------------------------ resume

    def to_state(self, position: int | None = None) -> dict:
        """JSON-serialisable resume point: ``{"position": last line consumed}``, plus,
        for a file by name, its byte ``offset`` where known and what recognises it
        (``head_bytes``, ``head_sha256``, ``tail_sha256``: see
        :func:`~streameval.io.follow.log_identity`). ``position``: an earlier line
        than the last consumed (no offset then: a two-file join's resume point)."""
        state: dict = {"position": self.position if position is None else position}
        if not self.by_name:
            return state
        from streameval.io.follow import log_identity

        at_end = position is None or position == self.position
        if at_end and self._ident is not None and self._ident.get("offset") == self.offset:
            state.update(self._ident)  # a followed file: recognised by its own descriptor
        elif at_end and self.offset is not None:
            state.update(log_identity(self.path, self.offset))
        else:  # the head only (the position read is not where the offset is)
            head = self._ident
            if head is None or "offset" in head:
                head = log_identity(self.path)
            state.update({k: head[k] for k in ("head_bytes", "head_sha256")})
        return state

    def restore(self, state: dict) -> None:
        """Go on after the position saved by :meth:`to_state` (before iterating).

        A file that is not the one the state was saved from (truncated or rewritten
        since, see :func:`~streameval.io.follow.identity_mismatch`) raises
        :class:`~streameval.io.follow.LogChangedError`; a followed one is read from
        its start instead (it was rotated), with a notice. A state without the
        file's identity (written before it was kept) is taken as it is."""
        position = int(state["position"])
        if position < 0:
            raise ValueError(f"position {position} < 0")
        offset = state.get("offset")
        self.resume_after = self.position = position
        self.offset = self.resume_offset = None
        if self.by_name and "head_sha256" in state:
            from streameval.io.follow import LogChangedError, identity_mismatch

            found = identity_mismatch(self.path, state)
            if found is not None:
                kind, reason = found
                if self.follow is None or kind != "changed":
                    raise LogChangedError(self.path, reason, kind)
                self.follow.say(f"{self.path}: not the file the checkpoint was taken from: "
                                f"{reason}; following it from its start (lines written to "
                                "the former file after the checkpoint are not read)")
                self.resume_after = self.position = 0
                return
        if offset is not None and self._gives_offsets():
            from streameval.io.follow import line_start

            self.offset = self.resume_offset = line_start(self.path, int(offset))

    def _gives_offsets(self) -> bool:
        """Whether the reader resumes at byte offsets (a plain JSONL file, a followed
        file)."""
        r = self.reader
        return isinstance(r, FollowReader) or (isinstance(r, JsonlReader) and r._plain_file())

    def counts(self) -> dict:
        """Counters of this reading: ``{"rows", "rejected", "future"}`` (``future``:
        rejected rows whose time was beyond ``max_future``)."""
        return {"rows": self.n_rows, "rejected": self.n_rejected, "future": self.n_future}

    # ------------------------------------------------------------ iteration

    def raw(self, line: int) -> Any:
        """The raw row (text, or a dict for Parquet) at ``line`` of the batch yielded
        last, or None when that batch has no such line: for rows refused after they
        were read (by a metric of the Monitor). Cost: `O(log batch_size)`."""
        chunk = self._chunk
        if chunk is None:
            return None
        lines = chunk.lines
        k = int(np.searchsorted(lines, line))
        if k < len(lines) and int(lines[k]) == line:
            return chunk.raw(k)
        return None

    def _note_identity(self) -> None:
        """Recognise a file whose reader gives no offsets by its head as it is now."""
        if self.by_name and self.follow is None and not self._gives_offsets():
            from streameval.io.follow import log_identity

            try:
                self._ident = log_identity(self.path)
            except OSError:
                pass  # the reader says why the file cannot be read

    def _unreadable(self, reason: str) -> SourceError:
        """The error of a read that failed for ``reason``, past the last row read whole."""
        unit = "row" if self.format == "parquet" else "line"
        return SourceError(self.path, self.position, reason, unit)

    def _chunks(self) -> Iterator[Chunk]:
        """The reader's chunks; a file that cannot be read raises :class:`SourceError`."""
        chunks = self.reader.chunks(self.resume_after, self.resume_offset)
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            except Exception as e:
                reason = _read_failure(e)
                if reason is None:
                    raise
                raise self._unreadable(reason) from None
            yield chunk

    def _validated(self) -> Iterator[tuple]:
        """``(chunk, batch, errors)`` of each chunk the reader gives, validated
        (:func:`~streameval.events.build_batch`)."""
        fm = self.fields
        partial = self.partial
        for chunk in self._chunks():
            batch, errors = build_batch(
                chunk.columns, chunk.lines, fm, text=chunk.text, partial=partial
            )
            yield chunk, batch, errors

    def parses_elsewhere(self) -> bool:
        """Whether an iteration reads and validates the log in a second process
        (``parse_process``): ``True`` for a JSONL or CSV file given by name and not
        followed, with ``"auto"`` only when it holds at least
        :data:`PARSE_PROCESS_MIN_BYTES` and the machine has two CPUs or more. Stdin,
        Parquet and a followed file are always read in this process."""
        if not self.parse_process or not self.by_name or self.follow is not None:
            return False
        if not sys.executable:  # (an embedded interpreter: no Python to start)
            return False
        if self.format not in ("jsonl", "csv"):
            return False
        if self.parse_process == "auto":
            if _usable_cpus() < 2:
                return False
            try:
                return os.path.getsize(self.path) >= PARSE_PROCESS_MIN_BYTES
            except OSError:
                return False  # the reader says why the file cannot be read
        return True

    def _validated_elsewhere(self) -> Iterator[tuple]:
        """:meth:`_validated`, run by a second process (:func:`_parse_main`, a fresh
        Python running this module): the chunks come back in order through a pipe,
        each with its batch (numpy columns), the rows' errors, lines and raw rows (not
        its unvalidated columns), at most :data:`PARSE_AHEAD` of them waiting for the
        consumer. A read that fails raises :class:`SourceError` here at the same point as
        in one process (after the chunks read whole); the process is ended with the
        iteration (its end, an error, or the consumer stopping)."""
        import pickle
        import queue
        import subprocess
        import threading

        spec = {"path": self.path, "fields": self.fields, "options": self._options,
                "skip": self.resume_after, "offset": self.resume_offset}
        # (the same sys.path as this process, led by the folder this streameval was
        # imported from: the same package, whatever the working directory holds)
        home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
             "from streameval.io.sources import _parse_main; _parse_main()",
             json.dumps([home] + sys.path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        # a thread takes each message off the pipe as soon as it is written (so the
        # process never waits on a half-read message while the consumer works), and
        # holds up to PARSE_AHEAD of them
        ahead: queue.Queue = queue.Queue(maxsize=PARSE_AHEAD)
        stop = threading.Event()

        def pump():
            while True:
                try:
                    msg = pickle.load(proc.stdout)
                except Exception:  # (EOFError: the process ended; or the pipe closed)
                    msg = ("eof",)
                while not stop.is_set():
                    try:
                        ahead.put(msg, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set() or msg[0] != "chunk":
                    return

        reader = threading.Thread(target=pump, name="streameval-parse-pipe", daemon=True)
        try:
            pickle.dump(spec, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.close()
            reader.start()
            while True:
                msg = ahead.get()
                kind = msg[0]
                if kind == "chunk":
                    yield msg[1], msg[2], msg[3]
                elif kind == "end":
                    return
                elif kind == "unreadable":
                    raise self._unreadable(msg[1])
                elif kind == "raise":
                    raise _rebuilt(msg[1])
                else:
                    raise self._unreadable(f"the parsing process ended without a result "
                                           f"(exit code {proc.wait()})")
        finally:
            stop.set()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            while reader.is_alive():
                try:  # (a message the consumer will not take)
                    ahead.get_nowait()
                except queue.Empty:
                    pass
                reader.join(0.05)
            if not sys.is_finalizing():  # (at exit the pipe's lock may be the
                proc.stdout.close()          # frozen thread's: the exit closes it)

    def __iter__(self) -> Iterator[EventBatch]:
        fail = self.on_error == "fail"
        self._note_identity()
        validated = (self._validated_elsewhere() if self.parses_elsewhere()
                     else self._validated())
        try:
            yield from self._counted(validated, fail)
        finally:
            validated.close()  # (a parsing process ends with the iteration)

    def _counted(self, validated: Iterator[tuple], fail: bool) -> Iterator[EventBatch]:
        """The batches of validated chunks, their bad rows routed and counted."""
        for chunk, batch, errors in validated:
            self._chunk = chunk
            rejects = chunk.rejects
            if errors:
                lines = chunk.lines
                rejects = rejects + [(int(lines[i]), r, chunk.raw(i)) for i, r in errors]
            if rejects:
                rejects.sort(key=lambda r: r[0])
                if fail:
                    line, reason, raw = rejects[0]
                    raise EventError(reason, line=line, raw=raw)
                cb = self.rejected
                for line, reason, raw in rejects:
                    self.n_rejected += 1
                    if FUTURE_MARK in reason:
                        self.n_future += 1
                    cb(line, reason, raw)
            self.n_rows += len(chunk.lines) + len(chunk.rejects)
            self.n_events += len(batch)
            self.position = chunk.last_line
            self.offset = chunk.offset
            if chunk.origin is not None:  # a followed file, maybe renamed since
                self._ident = chunk.origin.identity(chunk.offset)
            if len(batch):
                yield batch

    def read_all(self) -> EventBatch:
        """The whole log as one batch (for small logs and tests)."""
        return EventBatch.concat(list(self))


#: a log of at least this many bytes is read and validated in a second process when
#: ``parse_process="auto"`` (the default): below, starting that process (a Python that
#: imports numpy and streameval) costs more than it saves
PARSE_PROCESS_MIN_BYTES = 32 << 20

#: chunks read and validated by the second process that wait for the consumer (each at
#: most ``batch_size`` rows); with the one the pipe's reader thread holds and the one
#: the process is writing, at most ``PARSE_AHEAD + 2`` are in flight
PARSE_AHEAD = 2


def _portable(e: BaseException) -> tuple:
    """An exception as ``(class, args, attributes)``, to be raised again in another
    process by :func:`_rebuilt` (with its message as it was: an
    :class:`~streameval.events.EventError` rebuilt from its args would prefix its
    location twice)."""
    import pickle

    try:  # whole, where pickle gives it back as it is (an OSError keeps its errno)
        back = pickle.loads(pickle.dumps(e))
        if type(back) is type(e) and str(back) == str(e):
            return (e,)
    except Exception:
        pass
    parts = (type(e), e.args, dict(vars(e)))
    try:
        pickle.dumps(parts)
    except Exception:  # (an attribute that does not pickle)
        parts = (RuntimeError, (f"{type(e).__name__}: {e}",), {})
    return parts


def _rebuilt(parts: tuple) -> BaseException:
    if len(parts) == 1:
        return parts[0]
    cls, args, attrs = parts
    e = cls.__new__(cls)
    e.args = args
    e.__dict__.update(attrs)
    return e


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system says it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _parse_main() -> None:
    """The second process of :meth:`EventSource._validated_elsewhere` (``python -c``):
    its spec pickled on stdin; read and validate the log as one process would, and
    write to stdout, pickled, each ``("chunk", chunk, batch, errors)`` (the chunk
    without its columns), then ``("end",)``, or ``("unreadable", reason)`` for a read
    that failed, or ``("raise", exception)``."""
    import pickle
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (the consumer ends it)
    spec = pickle.load(sys.stdin.buffer)
    # the pipe is a private descriptor; what anything else writes to stdout (Python or
    # C level) goes to stderr, never into the pickled stream
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def put(msg):
        try:
            pickle.dump(msg, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
        except BrokenPipeError:  # the consumer stopped reading
            sys.exit(0)

    try:
        src = EventSource(spec["path"], spec["fields"], parse_process=False, **spec["options"])
        src.resume_after, src.resume_offset = spec["skip"], spec["offset"]
        for chunk, batch, errors in src._validated():
            put(("chunk", Chunk({}, chunk.lines, False, chunk.rejects, chunk.raw,
                                chunk.last_line, chunk.offset), batch, errors))
        put(("end",))
    except SourceError as e:  # (the file: said again by the consumer, at its position)
        put(("unreadable", e.reason))
    except Exception as e:  # (a row check's error, or a bug: raised by the consumer)
        put(("raise", _portable(e)))


def arrow_column(arr) -> tuple[Any, bool]:
    """An Arrow column as numpy (typed, no nulls) or a list; and whether it is text."""
    import pyarrow as pa
    import pyarrow.types as pt

    t = arr.type
    if pt.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pt.is_string(t) or pt.is_large_string(t):
        return arr.to_pylist(), True
    # dates and timestamps -> epoch seconds (UTC), as numbers: ``to_pylist`` would give
    # date objects (not event times) and, for nanoseconds, lose precision
    if pt.is_timestamp(t) or pt.is_date32(t) or pt.is_date64(t):
        if pt.is_timestamp(t):  # seconds = ticks / ticks per second (one rounding)
            ints, mul, div = arr.cast(pa.int64()), 1, {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[t.unit]
        elif pt.is_date32(t):  # days
            ints, mul, div = arr.cast(pa.int32()), 86400, 1
        else:  # date64: milliseconds
            ints, mul, div = arr.cast(pa.int64()), 1, 1000
        if arr.null_count == 0:
            return ints.to_numpy().astype(np.float64) * mul / div, False
        # nulls stay None: the row validator reports them ("ts is null")
        return [None if v is None else v * mul / div for v in ints.to_pylist()], False
    if arr.null_count == 0:
        if pt.is_integer(t) or pt.is_floating(t) or pt.is_boolean(t):
            return arr.to_numpy(zero_copy_only=False), False
    return arr.to_pylist(), False


def _too_long(nbytes: int, limit: int) -> str:
    """The reason of a row refused for its length."""
    return (f"line is {nbytes} bytes, more than the limit of {limit} bytes "
            "([input] max_line_bytes)")


def _parse_json_line(x: bytes) -> tuple[Any, str | None]:
    """One JSONL line -> (object, None) or (None, reason)."""
    try:
        o = _loads(x)
    except (ValueError, RecursionError):
        try:
            o = json.loads(x.rstrip(b"\r\n"))  # accepts NaN / Infinity / huge integers
        except UnicodeDecodeError:
            return None, "bad JSON: not valid UTF-8"
        except json.JSONDecodeError as e:
            return None, f"bad JSON: {e.msg} (column {e.colno})"
        except RecursionError:  # arrays or objects nested thousands deep
            return None, "bad JSON: nested too deeply"
        except ValueError as e:  # an integer of more than 4300 digits
            return None, f"bad JSON: {str(e).split(';')[0]}"
    if not isinstance(o, dict):
        return None, f"not a JSON object: {_text(x)[:40]!r}"
    return o, None


def _breaks(cell: str) -> int:
    """Physical line breaks inside a CSV cell (``\\r\\n`` counts once)."""
    if "\n" not in cell and "\r" not in cell:
        return 0
    return cell.count("\n") + cell.count("\r") - cell.count("\r\n")


def _text(x: bytes) -> str:
    return x.decode("utf-8", errors="replace").rstrip("\r\n")


def _csv_text(row: list[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerow(row)  # quotes cells holding delimiters, quotes, line breaks
    # bytes that were not UTF-8 (surrogate escapes) shown as U+FFFD, as for JSONL lines
    return buf.getvalue()[:-2].encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _sniff(stream) -> str:
    """``"jsonl"`` if the first non-blank byte of a stream is ``{``, else ``"csv"``."""
    peek = getattr(stream, "peek", None)
    if peek is not None:
        head = peek(65536)
    elif stream.seekable():
        pos = stream.tell()
        head = stream.read(65536)
        stream.seek(pos)
    else:
        raise ValueError("cannot detect the format of this stream; pass format=")
    head = head.lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip()
    return "jsonl" if head[:1] in (b"{", b"") else "csv"


def read_events(
    path: str | os.PathLike | io.BufferedIOBase,
    fields: FieldMap | None = None,
    **options: Any,
) -> EventSource:
    """Open a log for batched reading; see :class:`EventSource` for ``options``.

    Cost: `O(1)` (the file is read while iterating).
    """
    return EventSource(path, fields, **options)
