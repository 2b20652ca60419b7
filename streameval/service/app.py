"""The HTTP layer: a Starlette app over an :class:`~.engine.Engine`, served by uvicorn.

Routes:

* ``POST /events`` -- one JSON event, a JSON array of events or NDJSON; 200
  ``{"accepted", "n", "seq"}`` once the batch is durable and applied; 400 (bad
  body or event, nesting deeper than :data:`~.body.MAX_DEPTH`: ``{"error", "reason",
  "index"}``), 401 (token), 408 (body not received within ``body_timeout``), 413
  (body over the limit), 415 (``Content-Type`` neither JSON nor NDJSON), 422 (an
  idempotency key reused for another batch), 503 (shutting down, log not writable).
  An ``Idempotency-Key`` header (or ``?batch_id=``) makes a retried batch count once:
  it is answered with its original ``seq`` and ``"retried": true``.
* ``POST /predictions`` (``id``, ``ts``, ``score``, weight, segment) and ``POST
  /labels`` (``id``, ``ts``, ``label``) -- delayed labels, joined by id (the config's
  ``[input] label_ttl``; 404 without it); same bodies and answers as ``/events``,
  plus ``"pending"`` and ``"expired"`` (the predictions this batch made expire), and
  429 (with ``Retry-After``) when a batch of predictions would pass ``max_pending``.
  Ids, segment values and label strings longer than their byte limits refuse the
  batch (400 naming the event, the field and the limit).
* ``GET /metrics`` -- Prometheus text (or OpenMetrics, by ``Accept``).
* ``GET /snapshot`` -- the Monitor's snapshot as JSON, plus a ``service`` section.
* ``GET /alerts`` -- ``{"alerts": [...]}``, the active alerts.
* ``GET /healthz`` -- :func:`health_report`: 503 ``{"status": "failed", "reason",
  ...}`` only when the node cannot take events (its log failed, or it is shutting
  down); else 200 ``{"status": "ok"}`` or ``{"status": "degraded", "warnings"}`` (a
  failing checkpoint, a failed rendering, predictions expiring); no filesystem path;
  never needs the token.
* ``GET /ui`` -- the live page (:mod:`~streameval.service.ui`; ``GET /`` redirects
  there); ``GET /ui/data`` -- what it draws, JSON, guarded like ``/snapshot``.
* ``POST /checkpoint`` -- write a checkpoint now (admin): 200 ``{"written", ...}``,
  500 ``{"error"}`` when it fails, 503 when the engine has failed; the body is
  ignored, the ``Content-Type`` rule of ``/events`` applies.

With a ``token``, every route but ``/healthz`` needs ``Authorization: Bearer <token>``
(the scheme in any case, the token compared in constant time; 401 otherwise);
``public_reads=True`` opens ``/metrics``, ``/snapshot``, ``/alerts`` and ``/ui/data``
(for a Prometheus that scrapes without one); the live page's HTML holds no data and
needs no token. ``POST`` routes need ``Content-Type:
application/json`` or an NDJSON type (:data:`~.body.JSON_TYPES`): an HTML form or a
``fetch`` without a CORS preflight cannot send those, and the service grants no
preflight, so a web page cannot post to it through a browser. Unknown paths get 404,
wrong methods 405 (with ``Allow``), a request with two ``Host`` headers 400, an
unexpected error 500: always a JSON body.

Refused large bodies cost no more than their parsing: their memory goes back to the
system from a thread of its own at a bounded rate (:class:`MemoryReleaser`), never on
a request's path, and a client host whose large bodies are refused waits before its
next one is read (:class:`RefusalPenalty`).

:class:`GuardedHttpToolsProtocol` is uvicorn's httptools protocol with what uvicorn
lacks: a header read timeout, a header size limit, a deadline for the bodies the app
does not read, and a cap on connections (503 past it). :class:`Server` is uvicorn's
server with a ``Date`` header that does not fragment memory (see there).

Imports: starlette, uvicorn, httptools, prometheus-client (the ``serve`` extra),
:mod:`streameval.io.sinks` and the service's own modules (engine, body, checks,
exposition, ui).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import hmac
import logging
import os
import re
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.exposition import choose_encoder
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from uvicorn import Server as _UvicornServer
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from streameval.io.sinks import dumps
from streameval.service.checks import check_token, snapshot_json
from streameval.service.body import JSON_TYPES, BadRequest, field_limits, media_type
from streameval.service.engine import Unavailable
from streameval.service.exposition import MonitorCollector
from streameval.validation import MAX_ID_BYTES, MAX_LABEL_BYTES, MAX_SEGMENT_BYTES
from streameval.service.ui import LivePage

__all__ = ["create_app", "snapshot_json", "resolve_public_reads", "GuardedHttpToolsProtocol",
           "protocol_class", "Server", "http_date", "release_memory",
           "return_memory_promptly", "MemoryReleaser", "ExpiryWatch", "health_report",
           "DEFAULT_MAX_BODY", "DEFAULT_BODY_TIMEOUT", "DEFAULT_HEADER_TIMEOUT",
           "DEFAULT_MAX_CONNECTIONS", "MAX_HEAD_BYTES", "TRIM_AFTER_BYTES", "INGEST_THREADS",
           "RELEASE_INTERVAL", "RELEASE_DUTY", "FREEZE_PERIOD", "REFUSAL_PENALTY", "RefusalPenalty", "EXPIRY_WINDOW", "EXPIRY_WARN_SHARE"]

#: Largest accepted request body: 16 MiB holds about 200 000 JSON events, far above
#: a sensible batch, and bounds the memory one request can take.
DEFAULT_MAX_BODY = 16 * 1024 * 1024
#: Seconds a client has to send a request's headers (from its first byte, or from the
#: connection's opening). nginx's ``client_header_timeout`` is 60 s; a client of this
#: service sends a few hundred bytes of headers at once.
DEFAULT_HEADER_TIMEOUT = 10.0
#: Seconds a client has to send a whole body once its headers are in: 16 MiB at
#: 4.5 Mbit/s. A slower client gets 408 and should send smaller batches.
DEFAULT_BODY_TIMEOUT = 30.0
#: Open connections served at once; the next ones get 503 and are closed. Each costs
#: a file descriptor and a little memory; far above what a few ingesting clients and a
#: Prometheus need, well below the default limit of open files.
DEFAULT_MAX_CONNECTIONS = 1000
#: A request whose headers are still incomplete after this many bytes gets 400 (h11's
#: limit; nginx's default for a header line is 8 KiB): a client of this service sends
#: a few hundred bytes of headers.
MAX_HEAD_BYTES = 16 * 1024
#: A refused body at least this large asks the :class:`MemoryReleaser` to give the
#: memory its parsed events took back to the system (instead of leaving it in the
#: worker thread's malloc arena); the release runs later, off the request path.
TRIM_AFTER_BYTES = 1 << 20
#: Seconds between two memory releases at least (:class:`MemoryReleaser`): refused
#: bodies arriving meanwhile share the next one.
RELEASE_INTERVAL = 1.0
#: Share of the time memory releases may take at most: a release that took ``d``
#: seconds (a full garbage collection holds the GIL for all of it: 0.4 s over a
#: monitor of 1 000 segments and 10^5 events) is followed by none for ``d / 0.02``
#: seconds, so that refused bodies in a loop cost good traffic at most 2% of the
#: service's time beyond their own parsing.
RELEASE_DUTY = 0.02
#: Seconds between two housekeeping collections of a service that owns its process
#: (:class:`MemoryReleaser` with ``freeze=True``), when no refused body asks for one
#: sooner: the state grown since the last one is frozen in turn.
FREEZE_PERIOD = 60.0
#: ``/healthz`` warns when, over the last :data:`EXPIRY_WINDOW` seconds of wall-clock
#: time, at least :data:`EXPIRY_WARN_SHARE` of the predictions the label join resolved
#: (joined or expired) expired unlabeled: labels arrive later than ``label_ttl`` (a
#: backfill, a slow label pipeline), and their events are lost to the metrics. A few
#: predictions that never get a label stay below it.
EXPIRY_WINDOW = 300.0
EXPIRY_WARN_SHARE = 0.1
#: Threads serving ingestion requests with bodies over :data:`INLINE_BYTES` at once:
#: each waits for the log commit covering its batch, so one per concurrent client lets
#: every client's batch share a commit (more concurrent requests wait for a thread).
INGEST_THREADS = 64
#: Bodies up to this size are decoded, validated and logged on the event loop's thread
#: (then awaited while the engine's committer thread commits and applies them); bigger
#: ones on an ingestion thread, so that the loop keeps serving other requests.
INLINE_BYTES = 256 * 1024
#: A client host whose body over :data:`INLINE_BYTES` was refused after ``d`` seconds of
#: work waits ``REFUSAL_PENALTY * d`` seconds before its next large body is read (its
#: small ones are served as usual): refused large bodies, in a loop or from many
#: connections, take at most 1 / (1 + 9) of the service's time, and good traffic keeps
#: the rest. A client whose large batch is refused once loses a few tenths of a second.
REFUSAL_PENALTY = 9.0

_log = logging.getLogger("streameval.service")


class _JSON(JSONResponse):
    def render(self, content) -> bytes:
        return dumps(content).encode()


def resolve_public_reads(public_reads: bool | None, protect_reads: bool | None,
                         where: str = "protect_reads") -> bool:
    """Whether the read routes are open, from ``public_reads`` and the deprecated
    ``protect_reads`` (reads are guarded by default now: True changes nothing and
    warns, False is refused with the way to open them).

    >>> resolve_public_reads(None, None), resolve_public_reads(True, None)
    (False, True)
    """
    if protect_reads is not None:
        if protect_reads is not True:
            raise ValueError(f"{where} = {protect_reads!r}: reads are guarded by the token by "
                             "default; open them with public_reads (--public-reads)")
        if public_reads:
            raise ValueError(f"{where} and public_reads contradict each other; "
                             f"{where} is deprecated (it is the default), drop it")
        import warnings

        warnings.warn(f"{where} is deprecated: reads are guarded by the token by default",
                      DeprecationWarning, stacklevel=3)
    return bool(public_reads)


def _glibc(name: str):
    """The glibc function ``name`` (``malloc_trim``, ``mallopt``), or None elsewhere
    (musl, macOS, Windows)."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError, TypeError):  # pragma: no cover - not glibc
        return None


_TRIM = _glibc("malloc_trim")
if _TRIM is not None:
    _TRIM.argtypes, _TRIM.restype = [ctypes.c_size_t], ctypes.c_int


def release_memory(freeze: bool = False) -> None:
    """Return the memory of large refused bodies to the system: a full garbage
    collection (which also empties CPython's free lists of floats, dicts, tuples: their
    entries are a refused body's objects, and would keep whole 1 MiB object arenas
    alive), then glibc's ``malloc_trim(0)`` (no-op elsewhere).

    Runtime complexity: `O(live objects + heap pages)`, the collection under the GIL:
    0.4 s over a monitor of 1 000 segments and 10^5 events, where ``malloc_trim`` takes
    0.3 ms (and releases the GIL). The service calls it from its
    :class:`MemoryReleaser`, never on a request's path.

    ``freeze=True`` (a process that is the service's own) collects everything, frozen
    objects included (:func:`gc.unfreeze`), then freezes what survives
    (:func:`gc.freeze`): the Monitor's state, which lives as long as the service, is
    then left out of CPython's automatic full collections, which a burst of
    allocations (a large body, refused or not) triggers, so that these cost what the
    objects made since take, not what the whole state takes (0.4 to 0.8 s under the
    GIL for 1 000 segments). Cyclic garbage among frozen objects waits for the next
    release (refcounting frees the rest at once as always).
    """
    if freeze:
        gc.unfreeze()
    gc.collect()
    if freeze:
        gc.freeze()
    if _TRIM is not None:
        _TRIM(0)


class MemoryReleaser:
    """Runs ``release`` (:func:`release_memory`) on a thread of its own, when asked, at
    a bounded rate: never on a request's path.

    :meth:`request` (`O(1)`, from the route that refused a large body) wakes the
    thread; the release starts at once if the last one ended at least
    ``max(interval, cost / duty)`` seconds ago (``cost``: how long the last one took),
    else when that time comes, covering every request made meanwhile. So a client that
    sends refused bodies in a loop gets one release per interval, taking at most
    ``duty`` of the service's time, and its bodies cost no more than their parsing.
    :attr:`pending` is True while a request waits for a release that starts after it;
    :attr:`releases` and :attr:`seconds` count the releases and their time (exported
    as ``streameval_memory_releases_total`` and
    ``streameval_memory_release_seconds_total``).

    ``freeze=True`` (for a process that is the service's own: :func:`streameval.service.serve`)
    releases with :func:`release_memory` ``(freeze=True)``, once at :meth:`start` and
    then every ``period`` seconds (:data:`FREEZE_PERIOD`, or later as the duty
    allows) besides the requested ones.
    """

    def __init__(self, release=None, interval: float = RELEASE_INTERVAL,
                 duty: float = RELEASE_DUTY, clock=time.monotonic, freeze: bool = False,
                 period: float = FREEZE_PERIOD):
        _check_seconds("interval", interval)
        _check_seconds("period", period)
        if isinstance(duty, bool) or not isinstance(duty, (int, float)) or not 0 < duty <= 1:
            raise ValueError(f"duty = {duty!r}: must be a number in (0, 1]")
        if release is None:
            release = (lambda: release_memory(freeze=True)) if freeze else release_memory
        self._release = release
        self.freeze, self.period = freeze, float(period)
        self.interval, self.duty, self._clock = float(interval), float(duty), clock
        self._cv = threading.Condition()
        self.requested = 0  # requests so far
        self._covered = 0  # requests a finished release started after
        self.releases = 0
        self.seconds = 0.0
        self._next = 0.0  # no release starts before this time (clock)
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def pending(self) -> bool:
        """A request waits for its release."""
        return self.requested > self._covered

    def request(self) -> None:
        """Ask for a release (soon, or when the rate allows)."""
        with self._cv:
            self.requested += 1
            self._start()
            self._cv.notify()

    def start(self) -> None:
        """With ``freeze``: the first release now, then periodic ones (else nothing
        until a request)."""
        if self.freeze:
            self.request()

    def _start(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name="streameval-release-memory")
            self._thread.start()

    def close(self) -> None:
        """Stop the thread (a release under way finishes; none starts after)."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def _run(self) -> None:
        cv = self._cv
        while True:
            with cv:
                while not self._closed and self.requested == self._covered:
                    if not self.freeze:
                        cv.wait()
                        continue
                    due = self._next - self._clock() + self.period - self.interval
                    if due <= 0:
                        break  # the periodic one
                    cv.wait(due)
                if self._closed:
                    return
                delay = self._next - self._clock()
                if delay > 0:
                    cv.wait(delay)  # requests made meanwhile share the release
                    continue
                covered = self.requested
            t0 = time.perf_counter()
            try:
                self._release()
            except Exception:  # pragma: no cover - a bug in the release; requests go on
                _log.exception("returning memory to the system failed")
            took = time.perf_counter() - t0
            with cv:
                self._covered = covered
                self.releases += 1
                self.seconds += took
                self._next = self._clock() + max(self.interval, took / self.duty)
                cv.notify_all()


class RefusalPenalty:
    """Per client host, the time before which its next large body waits (see
    :data:`REFUSAL_PENALTY`): :meth:`charge` adds ``factor`` times the work a refused
    large body took (from now, or from the end of the wait already owed), :meth:`wait`
    says how long a new large body waits. Runtime complexity: `O(1)`, and at most
    ``max_hosts`` hosts kept (those whose wait is over are dropped first).
    """

    def __init__(self, factor: float = REFUSAL_PENALTY, clock=time.monotonic,
                 max_hosts: int = 10_000):
        self.factor, self._clock, self.max_hosts = factor, clock, max_hosts
        self._until: dict = {}
        self.waits = 0  # large bodies that waited
        self.seconds = 0.0  # and how long in all

    def wait(self, host) -> float:
        """Seconds a large body from ``host`` waits now (0: none)."""
        until = self._until.get(host)
        return 0.0 if until is None else max(0.0, until - self._clock())

    def charge(self, host, took: float) -> None:
        """A large body from ``host`` was refused after ``took`` seconds of work."""
        now, until = self._clock(), self._until
        until[host] = max(until.get(host, now), now) + self.factor * took
        if len(until) > self.max_hosts:
            for h in [h for h, t in until.items() if t <= now] or [next(iter(until))]:
                del until[h]


class _ReleaserCollector(Collector):
    def __init__(self, releaser: MemoryReleaser, penalty: RefusalPenalty, refused: dict):
        self.releaser, self.penalty, self.refused = releaser, penalty, refused

    def collect(self):
        yield CounterMetricFamily(
            "streameval_refused_host_requests",
            "Requests refused for their Host header (two of them, or a name not served)",
            value=float(self.refused["host"]))
        yield CounterMetricFamily(
            "streameval_refusal_waits",
            "Large bodies whose client host waited before they were read (its earlier large "
            "bodies were refused)", value=float(self.penalty.waits))
        yield CounterMetricFamily(
            "streameval_refusal_wait_seconds", "Time those waits took",
            value=float(self.penalty.seconds))
        r = self.releaser
        yield CounterMetricFamily(
            "streameval_memory_releases",
            "Releases of the memory of large refused bodies (a full garbage collection and "
            "malloc_trim, off the request path, at a bounded rate)", value=float(r.releases))
        yield CounterMetricFamily(
            "streameval_memory_release_seconds", "Time those releases took",
            value=float(r.seconds))
        yield GaugeMetricFamily(
            "streameval_memory_release_pending",
            "1 while a large refused body waits for its memory to be released",
            value=float(r.pending))


class ExpiryWatch:
    """How many predictions the label join resolved (joined or expired) over the last
    ``window`` seconds of wall-clock time, and whether the expired ones make a warning
    (at least ``share`` of them, :data:`EXPIRY_WARN_SHARE`).

    :meth:`note` records the joiner's counts (at most one sample a second: at most
    ``window`` samples kept); :meth:`recent` compares the current counts with the
    newest sample older than the window (or the counts at creation).
    """

    def __init__(self, joiner, window: float = EXPIRY_WINDOW, share: float = EXPIRY_WARN_SHARE,
                 clock=time.monotonic):
        self.joiner, self.window, self.share, self._clock = joiner, window, share, clock
        self._base = (clock(), joiner.n_expired, joiner.n_joined)
        self._samples: deque = deque()

    def note(self) -> None:
        """Record the joiner's counts now (after a batch of predictions or labels)."""
        t, j = self._clock(), self.joiner
        sample = (t, j.n_expired, j.n_joined)
        samples = self._samples
        if samples and t - samples[-1][0] < 1.0:
            samples[-1] = (samples[-1][0], sample[1], sample[2])
        else:
            samples.append(sample)
        self._trim(t)

    def _trim(self, t: float) -> None:
        samples = self._samples
        while samples and samples[0][0] < t - self.window:
            self._base = samples.popleft()

    def recent(self) -> tuple:
        """``(expired, joined)`` over the last window."""
        self._trim(self._clock())
        j, base = self.joiner, self._base
        return j.n_expired - base[1], j.n_joined - base[2]

    def warning(self) -> str | None:
        """The warning of ``/healthz``, or None."""
        expired, joined = self.recent()
        if expired <= 0 or expired < self.share * (expired + joined):
            return None
        return (f"{expired} of the {expired + joined} predictions resolved in the last "
                f"{self.window:g} s expired unlabeled (label_ttl = "
                f"{self.joiner.label_ttl:g} s of event time): their labels came later than "
                "label_ttl or not at all, and their events are not in the metrics")


_PATH = re.compile(r"(?<![\w.:/~-])/(?:[^\s'\"/]+/)+[^\s'\",;)/]*")


def _no_paths(value, state_dir):
    """``value`` (a health report) with the state directory's path written
    ``<state-dir>`` and any other absolute path cut to ``.../`` and its last part."""
    if isinstance(value, str):
        for d in state_dir:
            value = value.replace(d, "<state-dir>")
        return _PATH.sub(lambda m: ".../" + m.group(0).rsplit("/", 1)[1], value)
    if isinstance(value, dict):
        return {k: _no_paths(v, state_dir) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_no_paths(v, state_dir) for v in value]
    return value


def health_report(engine, expiry: ExpiryWatch | None = None) -> tuple:
    """``(status code, body)`` of ``/healthz``.

    ``"status"`` is ``"failed"`` (503: the node cannot take events: its log failed, or
    it is shutting down; ``"reason"`` says why), ``"degraded"`` (200: it takes events,
    but ``"warnings"`` lists what needs an operator: the last checkpoint attempt failed,
    the last rendering of ``/metrics`` or ``/snapshot`` failed, predictions expire
    unlabeled) or ``"ok"`` (200). The engine's counters follow (:meth:`Engine.health
    <streameval.service.engine.Engine.health>`). No filesystem path is shown: the state
    directory is written ``<state-dir>``, other paths by their last part.
    """
    info = engine.health()
    warnings = []
    if info["checkpoint_error"]:
        warnings.append(f"the last checkpoint failed: {info['checkpoint_error']} (retried; "
                        "the write-ahead log keeps every acknowledged batch meanwhile)")
    warnings += [f"{route} failed: {why}" for route, why in info["export_errors"].items()]
    expired = None
    if expiry is not None:
        expired, joined = expiry.recent()
        w = expiry.warning()
        if w:
            warnings.append(w)
    reason = info["failed"] or (info["closed"] and "the service is shutting down")
    body = {"status": "failed" if reason else "degraded" if warnings else "ok"}
    if reason:
        body["reason"] = reason
    body["warnings"] = warnings
    if expired is not None:
        body["expired_recently"] = expired
    body.update(info)
    d = getattr(engine, "state_dir", None)
    dirs = () if d is None else sorted({str(d), os.path.realpath(d), os.path.abspath(d)},
                                       key=len, reverse=True)
    return (503 if reason else 200), _no_paths(body, dirs)


def return_memory_promptly() -> bool:
    """Make glibc give freed memory back at once (False where it is not glibc).

    glibc raises its trim and mmap thresholds after a large block is freed (up to
    64 MiB), and ``malloc_trim`` trims the main arena's top only: the pages of a refused
    16 MiB body parsed in a worker thread would stay resident. Fixed thresholds (as
    ``MALLOC_TRIM_THRESHOLD_=131072`` in the environment would set) keep blocks of
    128 KiB or more in their own mappings, returned when freed. Process-wide: called
    by :func:`streameval.service.serve`, which owns its process, not by
    :class:`~streameval.service.BackgroundServer`.
    """
    mallopt = _glibc("mallopt")
    if mallopt is None:  # pragma: no cover - not glibc
        return False
    M_TRIM_THRESHOLD = -1
    return bool(mallopt(M_TRIM_THRESHOLD, 128 * 1024))


def _in_thread(fn, *args):
    """Call ``fn(*args)`` (in a worker thread, or on the event loop for a small body):
    ``(value, None)``, or ``(None, error)``.

    Expected errors (:class:`BadRequest`, :class:`Unavailable`) become ``(status,
    json)``; any other is logged and becomes its ``"Type: message"``. An exception
    must not cross the thread boundary: the future carrying it back is referenced by
    the awaiting frame, which its traceback references in turn, and that cycle keeps
    every frame's locals -- the whole parsed body of a refused batch, about 9 times its
    size -- alive until a full garbage collection.
    """
    try:
        return fn(*args), None
    except BadRequest as e:
        return None, (e.status, e.to_json())
    except Unavailable as e:
        return None, (503, {"error": str(e)})
    except Exception as e:
        # an OSError (disk full, ...) says enough; anything else may be a bug
        _log.error("%s failed: %s: %s", getattr(fn, "__qualname__", fn), type(e).__name__, e,
                   exc_info=not isinstance(e, OSError))
        return None, f"{type(e).__name__}: {e}"


def _settle(fut, error) -> None:
    if not fut.done():
        fut.set_result(error)


_timeout = getattr(asyncio, "timeout", None)  # Python 3.11+


async def _read_chunks(request: Request, chunks: list, max_body: int,
                       seconds: float | None) -> None:
    """Append the body's chunks to ``chunks``: BadRequest (413) past ``max_body``
    bytes; ``asyncio.TimeoutError`` after ``seconds`` (None: no deadline here)."""
    size = 0
    stream = request.stream().__aiter__()
    loop = asyncio.get_running_loop()
    deadline = None if seconds is None else loop.time() + seconds
    while True:
        try:
            if deadline is None:
                chunk = await stream.__anext__()
            else:
                chunk = await asyncio.wait_for(stream.__anext__(), deadline - loop.time())
        except StopAsyncIteration:
            return
        size += len(chunk)
        if size > max_body:
            raise BadRequest(f"body over the limit of {max_body} bytes", status=413,
                             limit=max_body)
        chunks.append(chunk)


def create_app(engine, *, token: str | None = None, public_reads: bool = False,
               protect_reads: bool | None = None, max_body: int = DEFAULT_MAX_BODY,
               body_timeout: float = DEFAULT_BODY_TIMEOUT,
               registry: CollectorRegistry | None = None, allowed_hosts=None,
               max_id_bytes: int = MAX_ID_BYTES, max_segment_bytes: int = MAX_SEGMENT_BYTES,
               max_label_bytes: int = MAX_LABEL_BYTES, own_process: bool = False,
               refusal_penalty: float = REFUSAL_PENALTY):
    """The ASGI application serving ``engine`` (Starlette's, with the ingestion routes
    served directly: see :class:`_Service`; its ``close()`` stops their threads).

    Parameters: ``token`` (bearer token for every route but ``/healthz``; None: no
    auth), ``public_reads`` (``/metrics``, ``/snapshot``, ``/alerts`` need no token;
    ``protect_reads`` is its deprecated opposite, see :func:`resolve_public_reads`),
    ``max_body`` (bytes; larger bodies get 413), ``body_timeout`` (seconds to receive
    a body; 408 after), ``registry`` (a fresh
    :class:`~prometheus_client.CollectorRegistry` by default), ``allowed_hosts`` (the
    ``Host`` names, without port, the app answers; others get a JSON 400: a web page
    whose name was rebound to 127.0.0.1 is not same-origin with an allowed name, so
    it cannot post events to a loopback service without a token; None: any),
    ``max_id_bytes``, ``max_segment_bytes``, ``max_label_bytes`` (the UTF-8 bytes of an
    id, a segment value, a label string at most; a body holding a longer one gets 400
    naming the event, the field and the limit: :func:`~.body.field_limits`),
    ``refusal_penalty`` (:data:`REFUSAL_PENALTY`; 0: off),
    ``own_process`` (the process is the service's alone, as in
    :func:`streameval.service.serve`: its :class:`MemoryReleaser` freezes the
    long-lived state out of CPython's automatic full collections; False leaves the
    host process's collector as it is). A token shorter than
    :data:`~streameval.service.MIN_TOKEN_BYTES` is refused (ValueError).
    """
    check_token(token)
    if not isinstance(max_body, int) or isinstance(max_body, bool) or max_body < 1:
        raise ValueError(f"max_body = {max_body!r}: must be an int >= 1")
    _check_seconds("body_timeout", body_timeout)
    public_reads = resolve_public_reads(public_reads, protect_reads)
    registry = CollectorRegistry() if registry is None else registry
    registry.register(MonitorCollector(engine))
    latency = Histogram(
        "streameval_ingest_seconds", "Time to validate, log and apply one ingestion request",
        registry=registry,
        buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    )
    expected = None if token is None else token.encode("utf-8")
    fields = engine.fields
    limits = field_limits(id=fields.id, segment=fields.segment, label=fields.label,
                          max_id_bytes=max_id_bytes, max_segment_bytes=max_segment_bytes,
                          max_label_bytes=max_label_bytes)
    releaser = MemoryReleaser(freeze=own_process)
    releaser.start()
    if isinstance(refusal_penalty, bool) or not isinstance(refusal_penalty, (int, float)) \
            or not refusal_penalty >= 0:
        raise ValueError(f"refusal_penalty = {refusal_penalty!r}: must be a number >= 0")
    penalty = RefusalPenalty(float(refusal_penalty))
    refused_counts = {"host": 0}
    registry.register(_ReleaserCollector(releaser, penalty, refused_counts))
    expiry = None if engine.joiner is None else ExpiryWatch(engine.joiner)
    accepted_types = sorted(JSON_TYPES)
    # the ingestion requests' threads: each waits in the engine for the group commit
    # that covers its batch, so there are enough for every client of a busy service
    workers = ThreadPoolExecutor(INGEST_THREADS, thread_name_prefix="streameval-ingest")

    def authorized(request: Request) -> bool:
        if expected is None:
            return True
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        # Starlette decodes headers as latin-1: encoding back gives the bytes sent
        same = hmac.compare_digest(credentials.strip().encode("latin-1"), expected)
        return same and scheme.lower() == "bearer"  # RFC 7235: the scheme in any case

    def unauthorized() -> Response:
        return _JSON({"error": "missing or wrong bearer token"}, status_code=401,
                     headers={"WWW-Authenticate": 'Bearer realm="streameval"'})

    def guard_read(request: Request) -> Response | None:
        if not public_reads and not authorized(request):
            return unauthorized()
        return None

    def guard_post(request: Request) -> Response | None:
        if not authorized(request):
            return unauthorized()
        raw = request.headers.get("content-type")
        if media_type(raw) not in JSON_TYPES:
            got = "no Content-Type" if raw is None else f"Content-Type {raw!r}"
            return _JSON({"error": f"{request.url.path}: {got} is not accepted; send "
                                   "application/json or NDJSON (application/x-ndjson)",
                          "content_type": raw, "accepted": accepted_types}, status_code=415)
        return None

    async def read_body(request: Request) -> bytes:
        length = request.headers.get("content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                raise BadRequest(f"bad Content-Length {length!r}") from None
            if declared > max_body:
                raise BadRequest(f"body of {declared} bytes is over the limit of {max_body}",
                                 status=413, limit=max_body)
        chunks = []
        try:
            if _timeout is None:  # Python 3.10: a deadline per chunk
                await _read_chunks(request, chunks, max_body, body_timeout)
            else:  # one timer for the whole body (wait_for makes a task per chunk)
                async with _timeout(body_timeout):
                    await _read_chunks(request, chunks, max_body, None)
        except (asyncio.TimeoutError, TimeoutError):
            size = sum(map(len, chunks))
            raise BadRequest(f"not complete after {body_timeout:g} s ({size} bytes "
                             "received)", status=408, timeout=body_timeout) from None
        return b"".join(chunks)

    def refused(e: BadRequest) -> Response:
        # the connection is not reusable when its body was not read to the end
        close = {"Connection": "close"} if e.status in (408, 413) else None
        engine.count_refused_body(e.status)
        return _JSON(e.to_json(), status_code=e.status, headers=close)

    def ingestion(kind: str):
        path = f"/{kind}"

        def ingest(body, content_type, key):
            return engine.ingest_body(body, content_type, kind=kind, key=key, limits=limits)

        def begin(body, content_type, key):
            return engine.begin_body(body, content_type, kind=kind, key=key, limits=limits)

        async def ingest_inline(loop, body, content_type, key):
            """A small body on the event loop's thread: decoded, validated and logged
            here (no thread hop: every step holds the GIL anyway), then awaited while
            the engine's committer makes it durable and applies it."""
            (begun, error) = _in_thread(begin, body, content_type, key)
            if error is not None:
                return None, error
            result, seq = begun
            if seq is None:
                return result, None
            fut = loop.create_future()
            engine.when_applied(seq, lambda e: loop.call_soon_threadsafe(_settle, fut, e))
            failure = await fut
            if failure is not None:
                return None, (503, {"error": str(failure)})
            return engine.finish(result), None

        async def route(request: Request) -> Response:
            denied = guard_post(request)
            if denied:
                return denied
            start = time.perf_counter()
            key = request.headers.get("idempotency-key")
            batch_id = request.query_params.get("batch_id")
            if key is not None and batch_id is not None and key != batch_id:
                return _JSON({"error": f"{path}: Idempotency-Key {key!r} and batch_id "
                                       f"{batch_id!r} differ; send one of them"},
                             status_code=400)
            length = request.headers.get("content-length")
            host = (request.scope.get("client") or ("",))[0]
            if length is None or not length.isdigit() or int(length) > INLINE_BYTES:
                wait = penalty.wait(host)
                if wait > 0:  # its large bodies were refused: a bounded share of the time
                    penalty.waits += 1
                    penalty.seconds += wait
                    await asyncio.sleep(wait)
            try:
                body = await read_body(request)
            except BadRequest as e:
                return refused(e)
            except ClientDisconnect:
                return _JSON({"error": "the client went away"}, status_code=400)
            loop = asyncio.get_running_loop()
            size = len(body)
            work = time.perf_counter()
            ctype, key = request.headers.get("content-type"), key if key is not None else batch_id
            if size <= INLINE_BYTES:
                result, error = await ingest_inline(loop, body, ctype, key)
            else:
                result, error = await loop.run_in_executor(workers, _in_thread, ingest, body,
                                                           ctype, key)
            del body
            if expiry is not None and kind != "events":
                expiry.note()
            if error is not None:
                if size > INLINE_BYTES:
                    penalty.charge(host, time.perf_counter() - work)
                if size >= TRIM_AFTER_BYTES:  # its objects are freed: their memory goes back
                    releaser.request()
                if isinstance(error, str):  # logged in the worker
                    return _JSON({"error": f"internal error on {path}: {error}"},
                                 status_code=500)
                status, content = error
                return _JSON(content, status_code=status,
                             headers={"Retry-After": "1"} if status == 429 else None)
            latency.observe(time.perf_counter() - start)
            return _JSON(result)

        return route

    async def export(route: str, fn, *args):
        value, error = await run_in_threadpool(_in_thread, fn, *args)
        engine.record_export(route, None if error is None else RuntimeError(error))
        return value, error

    async def metrics(request: Request) -> Response:
        denied = guard_read(request)
        if denied:
            return denied
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        data, error = await export("/metrics", encoder, registry)
        if error is not None:
            return _JSON({"error": f"/metrics: could not render: {error}"}, status_code=500)
        return Response(data, media_type=content_type)

    async def snapshot(request: Request) -> Response:
        denied = guard_read(request)
        if denied:
            return denied
        snap, error = await export("/snapshot", lambda: snapshot_json(engine.snapshot()))
        if error is not None:
            return _JSON({"error": f"/snapshot: could not render: {error}"}, status_code=500)
        return _JSON(snap)

    async def alerts(request: Request) -> Response:
        return guard_read(request) or _JSON(
            {"alerts": await run_in_threadpool(engine.active_alerts)}
        )

    async def healthz(request: Request) -> Response:
        status, body = health_report(engine, expiry)
        return _JSON(body, status_code=status)

    async def checkpoint(request: Request) -> Response:
        denied = guard_post(request)
        if denied:
            return denied
        try:
            await read_body(request)  # ignored; read so that the connection stays usable
        except BadRequest as e:
            return refused(e)
        except ClientDisconnect:
            return _JSON({"error": "the client went away"}, status_code=400)
        if engine.failed:
            return _JSON({"error": f"no checkpoint: {engine.failed}", **engine.health()},
                         status_code=503)
        written, error = await run_in_threadpool(_in_thread, engine.checkpoint)
        if error is not None:
            return _JSON({"error": f"checkpoint failed: {error}", **engine.health()},
                         status_code=500)
        return _JSON({"written": written, **engine.health()})

    async def http_error(request: Request, exc: HTTPException) -> Response:
        return _JSON({"error": exc.detail}, status_code=exc.status_code,
                     headers=getattr(exc, "headers", None))

    async def server_error(request: Request, exc: Exception) -> Response:
        # Starlette's ServerErrorMiddleware: a JSON 500 instead of its text/plain one
        # (the exception is re-raised after it, for uvicorn to log)
        return _JSON({"error": f"internal error on {request.url.path}: "
                               f"{type(exc).__name__}: {str(exc)[:300]}"}, status_code=500)

    live = LivePage(engine)

    async def ui_page(request: Request) -> Response:
        # no data in the page itself: it fetches /ui/data, which is guarded
        return Response(live.page(), media_type="text/html; charset=utf-8",
                        headers={"Cache-Control": "no-cache"})

    async def ui_data(request: Request) -> Response:
        denied = guard_read(request)
        if denied:
            return denied
        data, error = await run_in_threadpool(_in_thread, live.data)
        if error is not None:
            return _JSON({"error": f"/ui/data: could not render: {error}"}, status_code=500)
        return _JSON(data, headers={"Cache-Control": "no-store"})

    ingest_routes = {f"/{kind}": ingestion(kind) for kind in ("events", "predictions", "labels")}
    routes = [
        *(Route(path, route, methods=["POST"]) for path, route in ingest_routes.items()),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/snapshot", snapshot, methods=["GET"]),
        Route("/alerts", alerts, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/checkpoint", checkpoint, methods=["POST"]),
        Route("/", lambda request: RedirectResponse("ui", status_code=302), methods=["GET"]),
        Route("/ui", ui_page, methods=["GET"]),
        Route("/ui/data", ui_data, methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error,
                                                       Exception: server_error})
    app.state.engine = engine
    app.state.registry = registry
    app.state.releaser = releaser
    allowed = None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
    return _Service(app, ingest_routes, allowed, workers, releaser, refused_counts)


def host_name(header: str) -> str:
    """The host of a ``Host`` header, without its port or IPv6 brackets, lower case.

    >>> host_name("127.0.0.1:8000"), host_name("[::1]:80"), host_name("LocalHost")
    ('127.0.0.1', '::1', 'localhost')
    """
    h = header.strip().lower()
    if h.startswith("["):
        return h[1:h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


class _Service:
    """The service's ASGI application.

    A request whose ``Host`` is not one of ``allowed`` (None: any) gets a JSON 400
    (DNS rebinding: a page at evil.example resolved to 127.0.0.1 sends ``Host:
    evil.example``). ``POST`` to an ingestion path goes straight to its handler (the
    hot path: Starlette's middleware, routing and thread hop cost about as much CPU
    per request as validating 100 events; a body up to :data:`INLINE_BYTES` is then
    decoded and logged on the loop's thread and awaited while the engine's committer
    applies it), with the same answers, an unexpected error included (a JSON 500,
    logged); every other request goes to the Starlette ``app``.
    ``state`` is the Starlette app's; :meth:`close` stops the ingestion threads.
    """

    def __init__(self, app, ingest_routes: dict, allowed, workers: ThreadPoolExecutor,
                 releaser: MemoryReleaser | None = None, refused: dict | None = None):
        self.app, self.state = app, app.state
        self.ingest_routes, self.allowed, self.workers = ingest_routes, allowed, workers
        self.releaser = releaser
        self.refused = {"host": 0} if refused is None else refused

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts = [v for k, v in scope["headers"] if k == b"host"]
        if len(hosts) > 1:  # RFC 9112 3.2: a request with more than one Host is a 400
            self.refused["host"] += 1
            response = _JSON({"error": f"{len(hosts)} Host headers: a request carries one"},
                             status_code=400, headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        if self.allowed is not None:
            raw = (hosts[0] if hosts else b"").decode("latin-1")
            if host_name(raw) not in self.allowed:
                self.refused["host"] += 1
                response = _JSON({"error": f"Host {raw!r} is not served here; allowed: "
                                           f"{sorted(self.allowed)} (--allow-host NAME)"},
                                 status_code=400, headers={"Connection": "close"})
                await response(scope, receive, send)
                return
        route = self.ingest_routes.get(scope["path"]) if scope["method"] == "POST" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        try:
            response = await route(Request(scope, receive))
        except Exception as exc:  # as Starlette's ServerErrorMiddleware, in JSON
            _log.error("%s %s failed", scope["method"], scope["path"], exc_info=exc)
            response = _JSON({"error": f"internal error on {scope['path']}: "
                                       f"{type(exc).__name__}: {str(exc)[:300]}"},
                             status_code=500)
        await response(scope, receive, send)

    def close(self) -> None:
        """Stop the ingestion threads once their requests are done (not waiting), and
        the memory releaser's."""
        self.workers.shutdown(wait=False)
        if self.releaser is not None:
            self.releaser.close()


def _check_seconds(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} = {value!r}: must be a number of seconds > 0")


# --------------------------------------------------------------------------- protocol

_TIMEOUT_408 = dumps({"error": "request headers not received in time"}).encode()
_RESPONSE_408 = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                 b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
                 % (len(_TIMEOUT_408), _TIMEOUT_408))


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with read deadlines, a header size limit and a
    connection cap.

    uvicorn times out idle keep-alive connections only: a client that sends half its
    headers, or one byte every few seconds, holds its connection forever. Here:

    * each request's headers must be complete within :attr:`header_timeout` seconds of
      the connection's opening (the first request) or of their first byte (the next
      ones on a keep-alive connection); past it the client gets 408 if it sent
      anything, and the connection is closed;
    * a request whose headers are still incomplete after :data:`MAX_HEAD_BYTES` gets
      a 400 and the connection is closed (httptools sets no limit);
    * a request answered before its body was read (401, 413, 415: the app does not
      read it) has :attr:`body_timeout` seconds to finish sending it (it is
      discarded), then the connection is closed; the app bounds the reading of the
      bodies it does read (408);
    * a connection opened while :attr:`max_connections` are open answers its request
      with 503 and is closed;
    * a request httptools cannot parse gets a JSON 400 (uvicorn's is text/plain).

    httptools (llhttp, in C) rather than h11 (pure Python): it takes a third of the
    CPU per request. Use :func:`protocol_class` to set the three limits. Runtime
    complexity: one timer per connection, plus one per request whose headers arrive
    in more than one read or whose body is not read; a few attribute checks per read.
    """

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    _timer: asyncio.TimerHandle | None = None
    _waiting_for: str | None = None  # "headers" or "body" (an unread one, being discarded)
    _heading = False  # a request has begun and its headers are not all in
    _head_bytes = 0  # bytes read since it began (at most one read more than its head)
    _body_open = False  # a request's headers are in, its body is not all read

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:  # this one included
            self.app = _over_capacity(self.max_connections)
        self._arm("headers", self.header_timeout)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self._heading:  # a request's headers are not all in
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self.send_400_response("Invalid HTTP request received.")
            elif self._waiting_for != "headers":
                self._arm("headers", self.header_timeout)
        elif self._waiting_for == "headers":
            self._disarm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._heading, self._head_bytes = True, 0

    def on_headers_complete(self) -> None:
        self._heading, self._body_open = False, True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._body_open = False
        if self._waiting_for == "body":
            self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._body_open and not self.transport.is_closing():
            self._arm("body", self.body_timeout)  # answered; the rest of the body is unread

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """A request httptools cannot parse (or headers over :data:`MAX_HEAD_BYTES`):
        400 with a JSON body, like every other error (uvicorn's is text/plain), then
        close."""
        body = dumps({"error": msg}).encode()
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head.append(b"content-type: application/json\r\nconnection: close\r\n"
                    b"content-length: %d\r\n\r\n" % len(body))
        self._disarm()
        self.transport.write(b"".join(head) + body)
        self.transport.close()

    def _arm(self, what: str, seconds: float) -> None:
        self._disarm()
        self._waiting_for = what
        self._timer = self.loop.call_later(seconds, self._late, what)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._waiting_for = None

    def _late(self, what: str) -> None:
        self._timer = self._waiting_for = None
        if self.transport.is_closing():
            return
        if what == "headers":
            if self._heading:  # part of a request came: say why
                self.transport.write(_RESPONSE_408)
                self.transport.close()
            elif self.cycle is None:  # no request since the connection opened
                self.transport.close()
        elif self._body_open:
            self.transport.close()


def protocol_class(header_timeout: float = DEFAULT_HEADER_TIMEOUT,
                   body_timeout: float = DEFAULT_BODY_TIMEOUT,
                   max_connections: int = DEFAULT_MAX_CONNECTIONS) -> type:
    """A :class:`GuardedHttpToolsProtocol` with these limits (``uvicorn.Config(http=...)``)."""
    _check_seconds("header_timeout", header_timeout)
    _check_seconds("body_timeout", body_timeout)
    if (not isinstance(max_connections, int) or isinstance(max_connections, bool)
            or max_connections < 1):
        raise ValueError(f"max_connections = {max_connections!r}: must be an int >= 1")
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,),
                {"header_timeout": float(header_timeout), "body_timeout": float(body_timeout),
                 "max_connections": max_connections})


def _over_capacity(limit: int):
    body = dumps({"error": f"too many connections (the limit is {limit}); retry later"}).encode()
    headers = [(b"content-type", b"application/json"), (b"connection", b"close"),
               (b"retry-after", b"1"), (b"content-length", str(len(body)).encode())]

    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


# --------------------------------------------------------------------------- server

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
           "Dec")


def http_date(t: float | None = None) -> bytes:
    """An RFC 7231 ``Date`` value (English names whatever the locale).

    >>> http_date(0)
    b'Thu, 01 Jan 1970 00:00:00 GMT'
    """
    g = time.gmtime(t)
    return (f"{_DAYS[g.tm_wday]}, {g.tm_mday:02d} {_MONTHS[g.tm_mon - 1]} {g.tm_year:04d} "
            f"{g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d} GMT").encode()


class Server(_UvicornServer):
    """uvicorn's server, whose once-a-second ``Date`` header comes from :func:`http_date`.

    uvicorn formats it with :func:`email.utils.formatdate`, whose
    ``datetime.timetuple`` leaves a few small objects alive each time for a while
    (a bounded cache, filled over the first minutes); made while a large body is being
    parsed, they land in that body's object arenas and keep them resident (about 1 MiB
    per refused large body); this one leaves nothing behind. Everything else is uvicorn's.
    """

    async def on_tick(self, counter: int) -> bool:
        state, config = self.server_state, self.config
        if counter % 10 or not hasattr(state, "default_headers") or config.callback_notify:
            return await super().on_tick(counter)
        date = [(b"date", http_date())] if config.date_header else []
        state.default_headers = date + config.encoded_headers
        return await super().on_tick(1)  # the rest of uvicorn's tick, without its date
