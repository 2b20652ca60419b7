"""Following a log as it grows (``tail -F``), and recognising a log on resume.

Two things a checkpointed or followed replay needs from the file it reads:

* **Which file it is.** :func:`log_identity` hashes a prefix of the file: the first
  ``min(end, HEAD_BYTES)`` bytes (``end``: the bytes read, or the file's size when the
  reader cannot say), and the last ``TAIL_BYTES`` before ``end`` when it is known.
  The checkpoint records how many bytes were hashed; :func:`identity_mismatch` hashes
  that many bytes of the current file and compares. A log that only grew since
  (appended to) is the same log; one that was truncated or rewritten is not. A
  compressed log is recognised by its compressed bytes: a ``.gz`` appended to with
  another gzip member (``gzip -c more >> log.jsonl.gz``) is the same log, one
  compressed again as a whole is not.

* **Its new lines as they come.** :class:`Tail` reads a plain file like ``tail -F``:
  complete lines (ending with ``\\n``) as they are appended, a partial last line kept
  until its newline arrives; when the name points to another file (rotated: renamed
  and created again) or the file shrinks (truncated), what is left of the old one is
  read (its last line even without a newline, as a replay of that file would) and the
  file ends there; the reader then follows the new file from its start. Between looks
  it sleeps ``poll`` seconds (in slices of at most :data:`STOP_CHECK` s, so that a
  stop request is seen quickly). :class:`CsvLines` hands its lines to a CSV reader a
  whole record at a time (a quoted field may hold line breaks).

With ``max_line_bytes``, a :class:`Tail` never holds more than that of one line: a
longer line is read to its end without being kept and given as a :class:`LongLine` (its
first :data:`LONG_HEAD` bytes, ``len()`` the whole line's bytes, so that offsets stay
true), which the readers count as a bad row; :class:`CsvLines` gives a record held back
by an odd count of quotes to the CSV reader once it passes the limit (whose field limit
then refuses it), so following a file holds `O(max_line_bytes)` whatever it contains.

Cost: `O(bytes read)`; :func:`log_identity` reads at most ``HEAD_BYTES +
TAIL_BYTES`` bytes.

Imports: the standard library only; :mod:`streameval.io.sources` imports it.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import deque
from typing import Any, Callable

__all__ = ["HEAD_BYTES", "TAIL_BYTES", "STOP_CHECK", "LogChangedError", "log_identity",
           "identity_mismatch", "line_start", "Tail", "CsvLines", "LongLine", "LONG_HEAD"]

#: bytes at the start of a log hashed to recognise it (1 MiB: a few ms to hash)
HEAD_BYTES = 1 << 20
#: bytes before the position read hashed as well, when the position is known
TAIL_BYTES = 4096
#: longest sleep between two checks of a stop request while following (seconds)
STOP_CHECK = 0.05
#: bytes read from a followed file at once
READ_BYTES = 1 << 20
#: bytes of an over-long line kept to show in its rejection
LONG_HEAD = 200


class LongLine(bytes):
    """A line longer than the limit: its first :data:`LONG_HEAD` bytes, while ``len()``
    is the whole line's bytes (with its newline, if it had one) and :attr:`nbytes` its
    bytes without the newline, so that the offsets counted from line lengths stay
    those of the file."""

    def __new__(cls, head: bytes, length: int, nbytes: int) -> "LongLine":
        line = super().__new__(cls, head)
        line.length, line.nbytes = length, nbytes
        return line

    def __len__(self) -> int:
        return self.length


class LogChangedError(ValueError):
    """A log is not the one a checkpoint was taken from (truncated or rewritten since:
    ``kind`` "changed"), or its last line read was half written and has grown since
    (``kind`` "partial")."""

    def __init__(self, path: str, reason: str, kind: str = "changed") -> None:
        self.path, self.reason, self.kind = path, reason, kind
        super().__init__(f"{path}: {reason}")


def _pread(f, n: int, at: int) -> bytes:
    """``n`` bytes of binary file ``f`` at offset ``at`` (fewer at its end)."""
    try:
        fd = f.fileno() if hasattr(os, "pread") else None
    except (AttributeError, OSError):  # io.UnsupportedOperation: an in-memory file
        fd = None
    if fd is not None:
        out = []
        while n > 0:
            b = os.pread(fd, min(n, READ_BYTES), at)
            if not b:
                break
            out.append(b)
            n -= len(b)
            at += len(b)
        return b"".join(out)
    pos = f.tell()  # no pread (Windows, in-memory files): leave the position as it was
    try:
        f.seek(at)
        return f.read(n)
    finally:
        f.seek(pos)


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def log_identity(f, end: int | None = None) -> dict:
    """What recognises a log: ``{"head_bytes": k, "head_sha256": ...}`` for its first
    ``k = min(end, HEAD_BYTES)`` bytes, plus ``{"offset": end, "tail_sha256": ...}`` (the
    ``TAIL_BYTES`` before ``end``) when ``end`` is the position read. ``f``: a binary
    file (or a path); ``end=None``: its current size, no tail.

    >>> import io
    >>> log_identity(io.BytesIO(b"a\\nb\\n"))["head_bytes"], log_identity(io.BytesIO(b"a\\nb\\n"), 2)["head_bytes"]
    (4, 2)
    """
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as g:
            return log_identity(g, end)
    known = end is not None
    if end is None:
        end = _size(f)
    k = min(end, HEAD_BYTES)
    out = {"head_bytes": k, "head_sha256": _sha(_pread(f, k, 0))}
    if known:
        lo = max(0, end - TAIL_BYTES)
        out["offset"] = end
        out["tail_sha256"] = _sha(_pread(f, end - lo, lo))
    return out


def _size(f) -> int:
    try:
        return os.fstat(f.fileno()).st_size
    except (AttributeError, OSError):  # io.UnsupportedOperation is an OSError
        pos = f.tell()
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(pos)
        return size


def identity_mismatch(f, saved: dict) -> tuple[str, str] | None:
    """``(kind, reason)``: why the log ``f`` (a binary file or a path) is not the one
    ``saved`` (from :func:`log_identity`) describes, or None when it is (the same bytes,
    maybe more after them). ``kind``: "changed" (truncated or rewritten), or "partial"
    (the last line read had no newline, and the file has grown since by more than
    that newline: the line was read while being written). Cost: reads at most
    ``HEAD_BYTES + TAIL_BYTES`` bytes."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as g:
            return identity_mismatch(g, saved)
    k = int(saved["head_bytes"])
    end = saved.get("offset")
    size = _size(f)
    need = max(k, int(end) if end is not None else 0)
    if size < need:
        return "changed", (f"it has {size:,} bytes, fewer than the {need:,} it had when the "
                           "checkpoint was taken (truncated or rewritten?)")
    if _sha(_pread(f, k, 0)) != saved["head_sha256"]:
        return "changed", (f"its first {k:,} bytes are not those the checkpoint was taken "
                           "with (rewritten?)")
    if end is not None:
        end = int(end)
        lo = max(0, end - TAIL_BYTES)
        if _sha(_pread(f, end - lo, lo)) != saved.get("tail_sha256"):
            return "changed", (f"its bytes before byte {end:,} (where the checkpoint stopped "
                               "reading) are not those the checkpoint was taken with "
                               "(rewritten?)")
        if end and size > end and _pread(f, 1, end - 1) != b"\n" and _pread(f, 1, end) != b"\n":
            return "partial", (f"its last line read (up to byte {end:,}) had no line end "
                               "then and has grown since: it was read while being written "
                               "(--follow waits for whole lines)")
    return None


def line_start(f, offset: int) -> int:
    """``offset`` where a resume starts reading: one byte further when the last line
    read had no newline then and that newline came since (the line was whole)."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as g:
            return line_start(g, offset)
    if offset and _pread(f, 1, offset - 1) != b"\n" and _pread(f, 1, offset) == b"\n":
        return offset + 1
    return offset


class Tail:
    """The complete lines of a plain file as they are appended (``tail -F``).

    Iterating gives the lines available now (``bytes`` ending with ``\\n``) and stops
    when there are none; :meth:`wait` then blocks until there are more (True), or until
    this file is over (False: :attr:`ended`, the name now points to another file or
    the file was truncated) or ``stop()`` says so (False: :attr:`stopped`). After the
    end, what remained of the file is given, its last line even without a newline.
    :attr:`offset` is the number of bytes given so far (the position to resume at).

    Parameters: ``path``; ``offset`` to start at (the start of a line); ``poll``
    seconds between looks when there is nothing new; ``stop`` a callable polled while
    waiting and before each read; ``max_line_bytes`` (None: no limit) the longest line
    held, a longer one given as a :class:`LongLine`.
    """

    def __init__(self, path: str, *, offset: int = 0, poll: float = 0.5,
                 stop: Callable[[], bool] | None = None,
                 max_line_bytes: int | None = None) -> None:
        self.path = path
        self.limit = max_line_bytes
        self._skipping: list | None = None  # [head, bytes so far] of an over-long line
        self.poll = float(poll)
        self._stop = stop if stop is not None else (lambda: False)
        self.f = open(path, "rb", buffering=0)
        st = os.fstat(self.f.fileno())
        self.ident = (st.st_dev, st.st_ino)
        if offset:
            self.f.seek(offset)
        self.offset = offset  # bytes handed out (whole lines)
        self._buf = b""  # bytes read after the lines handed out or queued, no newline yet
        self._lines: deque = deque()
        self.ended = False
        self.stopped = False
        self.reason = None  # why the file ended: "replaced", "truncated"
        self._head = hashlib.sha256()  # of the first _hashed bytes (identity())
        self._hashed = 0

    def close(self) -> None:
        self.f.close()

    def identity(self, end: int | None = None) -> dict:
        """:func:`log_identity` of this file up to ``end`` (default: :attr:`offset`),
        even after it was renamed. The head is hashed incrementally (the bytes since the
        last call), so that calling it after every chunk costs `O(new bytes)` plus
        ``TAIL_BYTES``, not ``HEAD_BYTES``."""
        end = self.offset if end is None else end
        k = min(end, HEAD_BYTES)
        if k < self._hashed:  # an earlier end than before (rare): from the start again
            self._head, self._hashed = hashlib.sha256(), 0
        if k > self._hashed:
            b = _pread(self.f, k - self._hashed, self._hashed)  # fewer if truncated since
            self._head.update(b)
            self._hashed += len(b)
        lo = max(0, end - TAIL_BYTES)
        return {"head_bytes": self._hashed, "head_sha256": self._head.copy().hexdigest(),
                "offset": end,
                "tail_sha256": _sha(_pread(self.f, end - lo, lo))}

    def __iter__(self) -> "Tail":
        return self

    def __next__(self) -> bytes:
        if not self._lines:
            if self.ended or self.stopped:
                raise StopIteration
            if self._stop():
                self.stopped = True
                raise StopIteration
            self._read()
            if not self._lines:
                raise StopIteration
        line = self._lines.popleft()
        self.offset += len(line)
        return line

    def _read(self) -> int:
        data = self.f.read(READ_BYTES)
        if not data:
            return 0
        got = len(data)
        limit = self.limit
        if self._skipping is not None:  # inside an over-long line: drop it to its end
            cut = data.find(b"\n") + 1
            if not cut:
                self._skipping[1] += got
                return got
            head, n = self._skipping
            self._skipping = None
            self._lines.append(LongLine(head, n + cut, n + cut - 1))
            data = data[cut:]
        buf = self._buf + data
        cut = buf.rfind(b"\n") + 1
        if cut:
            parts = buf[:cut].split(b"\n")
            parts.pop()  # the empty piece after the last newline
            if limit is None or max(map(len, parts)) <= limit:
                self._lines.extend(p + b"\n" for p in parts)
            else:
                self._lines.extend(p + b"\n" if len(p) <= limit else
                                   LongLine(p[:LONG_HEAD], len(p) + 1, len(p))
                                   for p in parts)
            self._buf = buf[cut:]
        else:
            self._buf = buf
        if limit is not None and len(self._buf) > limit:  # no newline yet: stop holding
            self._skipping = [self._buf[:LONG_HEAD], len(self._buf)]
            self._buf = b""
        return got

    def _end(self, reason: str) -> None:
        """This file is over: read what is left of it, its last line as it is."""
        while self._read():
            pass
        if self._skipping is not None:
            head, n = self._skipping
            self._skipping = None
            self._lines.append(LongLine(head, n, n))
        if self._buf:
            self._lines.append(self._buf)
            self._buf = b""
        self.ended = True
        self.reason = reason

    def wait(self) -> bool:
        """Block until more lines can be read (True), this file ended or a stop was
        requested (False). Call it when iterating gave nothing."""
        if self.ended or self.stopped:
            return False
        next_look = 0.0
        while True:
            if self._stop():
                self.stopped = True
                return False
            now = time.monotonic()
            if now >= next_look:
                read = self.f.tell()  # bytes read from the file so far
                size = os.fstat(self.f.fileno()).st_size
                if size > read:
                    self._read()
                    if self._lines:
                        return True
                elif size < read:
                    self._end("truncated")
                    return bool(self._lines)
                else:
                    try:
                        st = os.stat(self.path)
                    except OSError:  # renamed and not created again yet: keep waiting
                        st = None
                    if st is not None and (st.st_dev, st.st_ino) != self.ident:
                        self._end("replaced")
                        return bool(self._lines)
                next_look = now + self.poll
            time.sleep(max(0.0, min(STOP_CHECK, next_look - time.monotonic())))

    @classmethod
    def open_when_there(cls, path: str, **options: Any) -> "Tail | None":
        """A new :class:`Tail` of ``path`` once it exists (it may be briefly missing
        while rotated), or None if ``stop()`` came first."""
        stop = options.get("stop") or (lambda: False)
        poll = float(options.get("poll", 0.5))
        while True:
            try:
                return cls(path, **options)
            except FileNotFoundError:
                pass
            t_end = time.monotonic() + poll
            while time.monotonic() < t_end:
                if stop():
                    return None
                time.sleep(STOP_CHECK)


class CsvLines:
    """The lines of a :class:`Tail` as text for :func:`csv.reader`, a whole record at
    a time: lines are held back while the count of ``"`` is odd (a quoted field goes on
    on the next line), so that the reader never sees half a record. Bytes that are not
    UTF-8 become lone surrogates (``surrogateescape``), a BOM at the start of the file
    is dropped. :attr:`offset`: bytes given to the reader."""

    def __init__(self, tail: Tail) -> None:
        self.tail = tail
        self.offset = tail.offset
        self._ready: deque = deque()
        self._pending: list = []
        self._pending_bytes = 0
        self._quotes = 0
        #: over-long lines given to the reader as empty lines, ``(line, bytes, head)``
        #: with ``line`` counted from this object's first line (the CSV reader reports
        #: and clears them)
        self.long: list = []
        self.lineno = 0
        self.skipped = 0  # (blank lines not given to the reader: none here)
        self.record = 0  # (set by the reader per record; unused here)

    @property
    def limit(self) -> int | None:
        """The longest line held (the :class:`Tail`'s ``max_line_bytes``)."""
        return self.tail.limit

    def __iter__(self) -> "CsvLines":
        return self

    def __next__(self) -> str:
        while not self._ready:
            try:
                line = next(self.tail)
            except StopIteration:
                if self.tail.ended and self._pending:  # the file ends inside a quoted field
                    self._ready.extend(self._pending)
                    self._pending, self._quotes = [], 0
                    continue
                raise
            self._pending.append(line)
            self._pending_bytes += len(line)
            if type(line) is not LongLine:
                self._quotes += line.count(b'"')
            limit = self.tail.limit
            if self._quotes % 2 == 0 or (limit is not None and self._pending_bytes > limit):
                # a whole record, or one past the limit (the reader's field limit refuses it)
                self._ready.extend(self._pending)
                self._pending, self._quotes, self._pending_bytes = [], 0, 0
        line = self._ready.popleft()
        first = self.offset == 0
        self.offset += len(line)
        self.lineno += 1
        if type(line) is LongLine:
            self.long.append((self.lineno, line.nbytes, bytes(line)))
            return "\n"
        if first and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        return line.decode("utf-8", "surrogateescape")

    def seek(self, offset: int) -> None:
        """Go on at byte ``offset`` (the start of a record): used once, after the
        header, to resume where a checkpoint stopped."""
        t = self.tail
        t.f.seek(offset)
        t._lines.clear()
        t._buf = b""
        t._skipping = None
        t.offset = self.offset = offset
        self._ready.clear()
        self._pending, self._quotes, self._pending_bytes = [], 0, 0
