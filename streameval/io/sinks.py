"""Sinks: where snapshots, alerts and rejected rows go (JSON lines, stdout, webhooks).

Every sink takes plain JSON-like objects (dicts, lists, numbers, strings,
numpy scalars and arrays) through ``write(obj)`` and writes them as JSON with
NaN and infinities as ``null`` (:func:`dumps`). Sinks are thread-safe and
context managers.

* :class:`JsonlSink` -- appends one JSON object per line to a file and flushes
  (``metrics.jsonl``, ``alerts.jsonl``, ``rejected.jsonl``). ``offset`` and
  ``truncate_at=`` let a resumed replay cut the file back to its checkpoint.
* :class:`StdoutSink` -- the same, on standard output.
* :func:`open_output` and :func:`write_atomic` -- how every output file is opened:
  never through a symbolic link. A link where an appended file (``metrics.jsonl``,
  ``alerts.jsonl``, ``rejected.jsonl``) goes is refused with
  :class:`OutputLinkError` (``O_NOFOLLOW``); a file written whole (``summary.json``,
  the report) is written beside it and renamed in, which replaces a link instead of
  writing through it.
* :class:`WebhookSink` -- HTTP POST of each object, with retries and
  exponential backoff on connection errors, timeouts, 429 and 5xx. A final
  failure is logged and counted (``failures``, ``last_error``), never raised:
  a dead webhook must not stop a monitor.

Imports: numpy and the standard library (JSON cleaning, HTTP); sinks read plain rows,
never metric internals.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import os
import queue
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, Callable, Iterable

import numpy as np

__all__ = ["dumps", "json_key", "segment_id", "Sink", "JsonlSink", "StdoutSink", "WebhookSink", "rejected_callback",
           "open_output", "write_atomic", "OutputLinkError"]

logger = logging.getLogger("streameval.io")


def json_key(k: Any) -> str:
    """A dict key as JSON writes it: scalars as ``json.dumps`` does (``None`` ->
    ``"null"``, ``True`` -> ``"true"``, ``3`` -> ``"3"``), a tuple (a segment of several
    fields) joined with ``|``.

    >>> json_key(None), json_key(True), json_key(np.int64(3)), json_key(("fr", None, 2))
    ('null', 'true', '3', 'fr||2')
    """
    if isinstance(k, str):
        return k
    if isinstance(k, np.generic):
        k = k.item()
    if k is None or isinstance(k, (bool, int, float)):
        return json.dumps(k)
    if isinstance(k, tuple):
        return "|".join("" if v is None else str(v) for v in k)
    return str(k)


def segment_id(segment: Any) -> str:
    """The typed JSON text of a segment value: one text per segment, never shared by two.

    ``None`` (the whole stream) and the segment ``"null"``, ``3`` and ``"3"``, a
    segment of several fields and the string of its JSON are each two texts, so a
    mapping by ``segment_id`` keeps every segment (a mapping by the value's plain text
    would merge them). A tuple and the list of the same values (a Monitor's key and the
    row's ``segment``) are one segment. Runtime complexity: `O(size of the value)`.

    >>> segment_id(None), segment_id("null"), segment_id(3), segment_id("3")
    ('null', '"null"', '3', '"3"')
    >>> segment_id(("fr", None)) == segment_id(["fr", None]) != segment_id('["fr",null]')
    True
    """
    return json.dumps(_clean(segment), separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def _clean_dict(o: Mapping) -> dict:
    """:func:`_clean` of a mapping: keys as :func:`json_key` writes them; two keys that
    write as one (``1`` and ``"1"``, ``None`` and ``"null"``) raise ``ValueError``
    instead of one silently replacing the other."""
    out = {json_key(k): _clean(v) for k, v in o.items()}
    if len(out) != len(o):
        seen: dict = {}
        for k in o:
            other = seen.setdefault(json_key(k), k)
            if other is not k:
                raise ValueError(f"keys {other!r} and {k!r} both write as JSON key "
                                 f"{json_key(k)!r}: write such a mapping as a list of "
                                 "entries (segments: each entry with its typed 'segment')")
    return out


def _clean(o: Any) -> Any:
    """A JSON-safe copy of ``o``: NaN/inf -> None, numpy -> Python, tuples -> lists,
    dict keys as :func:`json_key` writes them (``ValueError`` when two keys would write
    as one)."""
    t = type(o)
    if t is str or t is int or t is bool or o is None:
        return o
    if t is float:
        return o if math.isfinite(o) else None
    if t is dict:
        return _clean_dict(o)
    if t is list or t is tuple:
        return [_clean(v) for v in o]
    if isinstance(o, np.ndarray):
        return _clean(o.tolist())
    if isinstance(o, np.generic):
        return _clean(o.item())
    if isinstance(o, float):
        return float(o) if math.isfinite(o) else None
    if isinstance(o, (str, int)):
        return o
    if isinstance(o, (_dt.datetime, _dt.date)):
        return o.isoformat()
    if isinstance(o, Mapping):
        return _clean_dict(o)
    if isinstance(o, (list, tuple, set, frozenset)):
        return [_clean(v) for v in o]
    raise TypeError(f"cannot write a {type(o).__name__} as JSON: {o!r}")


def dumps(obj: Any) -> str:
    """Compact JSON text of ``obj`` on one line, NaN and infinities as ``null``.

    Dict keys are written as :func:`json_key` writes them; a dict two of whose keys
    would write as one (``1`` and ``"1"``) raises ``ValueError``: nothing is dropped
    silently (segments go in lists of entries, each with its ``segment`` value).

    Cost: `O(size of obj)`.

    >>> dumps({"values": {"auc": float("nan"), "f1": 0.5}, "n": np.int64(3), "t": None})
    '{"values":{"auc":null,"f1":0.5},"n":3,"t":null}'
    """
    return json.dumps(_clean(obj), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class OutputLinkError(ValueError):
    """An output file that is a symbolic link: refused, never written through (it could
    point anywhere the process may write)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: is a symbolic link; outputs are never written through "
                         "links (remove it, or write to another directory)")


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def open_output(path: str | os.PathLike, mode: str = "a"):
    """Open the output file ``path`` for binary writing (``"a"`` append, ``"w"``
    truncate, ``"r+"`` read and write without truncating), creating it (mode 0o644
    before the umask), without following a symbolic link: a link at ``path`` raises
    :class:`OutputLinkError`. Cost: one ``open``.

    >>> import tempfile
    >>> d = tempfile.mkdtemp(); target = os.path.join(d, "elsewhere")
    >>> os.symlink(target, os.path.join(d, "metrics.jsonl"))
    >>> open_output(os.path.join(d, "metrics.jsonl"))
    Traceback (most recent call last):
    ...
    streameval.io.sinks.OutputLinkError: ...: is a symbolic link; outputs are never written through links (remove it, or write to another directory)
    >>> os.path.exists(target)
    False
    """
    path = os.fspath(path)
    flags = {"a": os.O_WRONLY | os.O_APPEND, "w": os.O_WRONLY | os.O_TRUNC,
             "r+": os.O_RDWR}[mode]
    if os.path.islink(path):
        raise OutputLinkError(path)
    try:
        fd = os.open(path, flags | os.O_CREAT | _NOFOLLOW, 0o644)
    except OSError as e:
        if os.path.islink(path):  # (ELOOP: made a link since the check)
            raise OutputLinkError(path) from None
        raise
    return os.fdopen(fd, {"a": "ab", "w": "wb", "r+": "r+b"}[mode])


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` as the whole of ``path``: into a new temporary file beside it
    (created exclusively, so never through a link), then renamed over ``path``; a
    symbolic link at ``path`` is replaced by the file, its target left alone.
    Cost: one write and one rename."""
    import tempfile

    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class Sink:
    """Base class: ``write(obj)``, ``count`` of objects written, ``close()``."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def write(self, obj: Any) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def write_many(self, objs: Iterable[Any]) -> int:
        """Write each object; return how many were written."""
        return sum(bool(self.write(o)) for o in objs)

    def close(self) -> None:
        """Release the sink's resources (idempotent)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class JsonlSink(Sink):
    """Append JSON lines to a file, flushed after every write.

    Cost per write: `O(size of obj)` plus a ``flush`` (and an ``fsync``
    with ``fsync=True``). The parent directory is created if needed.

    ``truncate_at=offset`` first cuts the file back to ``offset`` bytes (an
    ``offset`` saved in a checkpoint), so rows written after the checkpoint by
    an interrupted run do not appear twice; a file shorter than ``offset``
    is an error (it is not the file the checkpoint saw).

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "out", "metrics.jsonl")
    >>> with JsonlSink(p) as s:
    ...     s.write({"n": 1, "values": {"auc": float("nan")}})
    True
    >>> open(p).read()
    '{"n":1,"values":{"auc":null}}\\n'
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        mode: str = "a",
        truncate_at: int | None = None,
        fsync: bool = False,
    ) -> None:
        super().__init__()
        if mode not in ("a", "w"):
            raise ValueError(f"mode must be 'a' (append) or 'w' (overwrite), got {mode!r}")
        self.path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        if truncate_at is not None:
            with open_output(self.path, "r+") as f:
                size = os.fstat(f.fileno()).st_size
                if truncate_at < 0 or truncate_at > size:
                    raise ValueError(
                        f"{self.path}: cannot truncate to {truncate_at} bytes, the file has "
                        f"{size}; it is not the file the checkpoint was taken with"
                    )
                f.truncate(truncate_at)
            mode = "a"
        self._f = open_output(self.path, mode)
        self._fsync = fsync

    @property
    def offset(self) -> int:
        """Bytes in the file after the last write (save it in a checkpoint)."""
        with self._lock:
            return self._f.tell()

    def write(self, obj: Any) -> bool:
        """Append ``obj`` as one line and flush. Returns True."""
        data = (dumps(obj) + "\n").encode("utf-8")
        with self._lock:
            self._f.write(data)
            self._f.flush()
            if self._fsync:
                os.fsync(self._f.fileno())
            self.count += 1
        return True

    def write_many(self, objs: Iterable[Any]) -> int:
        """Append several objects with a single flush."""
        data = [(dumps(o) + "\n").encode("utf-8") for o in objs]
        with self._lock:
            self._f.write(b"".join(data))
            self._f.flush()
            if self._fsync:
                os.fsync(self._f.fileno())
            self.count += len(data)
        return len(data)

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                self._f.close()

    def __repr__(self) -> str:
        return f"JsonlSink({self.path!r}, count={self.count})"


class StdoutSink(Sink):
    """Write JSON lines to standard output (or ``stream``), flushed after each.

    ``sys.stdout`` is looked up at each write, so redirection works.
    """

    def __init__(self, stream=None) -> None:
        super().__init__()
        self._stream = stream

    def write(self, obj: Any) -> bool:
        line = dumps(obj) + "\n"
        stream = self._stream if self._stream is not None else sys.stdout
        with self._lock:
            stream.write(line)
            stream.flush()
            self.count += 1
        return True


def rejected_callback(sink: Sink) -> Callable[[int, str, Any], None]:
    """A ``rejected(line, reason, raw)`` callback writing ``{"line", "reason", "raw"}`` rows.

    >>> import io
    >>> cb = rejected_callback(StdoutSink(io.StringIO()))
    >>> cb(17, "score is NaN", '{"score": NaN}')
    """

    def rejected(line: int, reason: str, raw: Any) -> None:
        sink.write({"line": line, "reason": reason, "raw": raw})

    return rejected


class WebhookSink(Sink):
    """POST each object as JSON to ``url``, retrying with exponential backoff.

    A request is retried on connection errors, timeouts, HTTP 429 and 5xx,
    waiting ``backoff * 2**k`` seconds before retry ``k + 1`` (``retries``
    retries, so ``1 + retries`` attempts at most); other 4xx are not retried.
    When every attempt fails the sink logs an error, counts it in
    ``failures`` and keeps the reason in ``last_error``; :meth:`write`
    returns False and never raises for delivery problems. Counters: ``count``
    (delivered), ``failures``, ``attempts`` (HTTP requests made).

    With ``background=True`` writes are queued and delivered by a worker
    thread, so a slow endpoint does not block the caller; :meth:`flush`
    waits for the queue, :meth:`close` drains it. Cost per write: one HTTP
    request per attempt.
    """

    def __init__(
        self,
        url: str,
        retries: int = 3,
        backoff: float = 0.5,
        timeout: float = 5,
        headers: Mapping[str, str] | None = None,
        *,
        background: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"webhook url must start with http:// or https://, got {url!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
        if not (backoff >= 0) or not (timeout > 0):
            raise ValueError(f"backoff must be >= 0 and timeout > 0, got {backoff!r}, {timeout!r}")
        self.url = url
        self.retries = retries
        self.backoff = float(backoff)
        self.timeout = float(timeout)
        self.headers = {"Content-Type": "application/json", "User-Agent": "streameval"}
        if headers:
            self.headers.update(headers)
        self.failures = 0
        self.attempts = 0
        self.last_error: str | None = None
        self._queue: queue.Queue | None = None
        self._worker: threading.Thread | None = None
        self._stopping = False  # close() called: writes are delivered by the caller
        if background:
            self._queue = queue.Queue()
            self._worker = threading.Thread(target=self._run, name="streameval-webhook",
                                            daemon=True)
            self._worker.start()

    def __repr__(self) -> str:
        return f"WebhookSink({self.url!r}, sent={self.count}, failures={self.failures})"

    def write(self, obj: Any) -> bool:
        """Deliver ``obj`` (or queue it, in background mode). False if delivery failed."""
        body = dumps(obj).encode("utf-8")
        if self._queue is not None:
            with self._lock:  # not after close()'s stop marker, where no worker reads
                if not self._stopping:
                    self._queue.put(body)
                    return True
        return self._deliver(body)

    def _deliver(self, body: bytes) -> bool:
        error = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            with self._lock:
                self.attempts += 1
            req = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    resp.read()
                with self._lock:
                    self.count += 1
                return True
            except urllib.error.HTTPError as e:
                error = f"HTTP {e.code} {e.reason}"
                e.close()
                if not (e.code == 429 or e.code >= 500):
                    break
            except (urllib.error.URLError, OSError) as e:  # refused, reset, DNS, timeout
                reason = getattr(e, "reason", e)
                error = f"{type(reason).__name__}: {reason}"
        with self._lock:
            self.failures += 1
            self.last_error = error
            attempts = attempt + 1
        logger.error("webhook %s: delivery failed after %d attempt(s): %s", self.url, attempts, error)
        return False

    def _run(self) -> None:
        q = self._queue
        while True:
            body = q.get()
            try:
                if body is None:
                    return
                self._deliver(body)
            finally:
                q.task_done()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued objects are delivered (or failed). True if the queue emptied."""
        if self._queue is None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued, then stop the worker (background mode).

        Later writes are delivered in the caller's thread.
        """
        if self._worker is None:
            return
        with self._lock:
            if not self._stopping:
                self._stopping = True
                self._queue.put(None)
        self._worker.join(timeout)
