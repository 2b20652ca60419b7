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
  plus ``"pending"``, and 429 (with ``Retry-After``) when a batch of predictions
  would pass ``max_pending``.
* ``GET /metrics`` -- Prometheus text (or OpenMetrics, by ``Accept``).
* ``GET /snapshot`` -- the Monitor's snapshot as JSON, plus a ``service`` section.
* ``GET /alerts`` -- ``{"alerts": [...]}``, the active alerts.
* ``GET /healthz`` -- ``{"status": "ok", ...}``, or 503 ``{"status": "failed",
  "reason", ...}`` while the log has failed, the last checkpoint attempt failed, or
  the last rendering of ``/metrics`` or ``/snapshot`` failed; never needs the token.
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
wrong methods 405 (with ``Allow``), an unexpected error 500: always a JSON body.

:class:`GuardedHttpToolsProtocol` is uvicorn's httptools protocol with what uvicorn
lacks: a header read timeout, a header size limit, a deadline for the bodies the app
does not read, and a cap on connections (503 past it). :class:`Server` is uvicorn's
server with a ``Date`` header that does not fragment memory (see there).

Imports: starlette, uvicorn, httptools, prometheus-client (the ``serve`` extra),
:mod:`streameval.io.sinks` and the service's own modules (engine, body, exposition, ui).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import hmac
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import CollectorRegistry, Histogram
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
from streameval.service.body import JSON_TYPES, BadRequest, media_type
from streameval.service.engine import Unavailable
from streameval.service.exposition import MonitorCollector
from streameval.service.ui import LivePage

__all__ = ["create_app", "snapshot_json", "resolve_public_reads", "GuardedHttpToolsProtocol",
           "protocol_class", "Server", "http_date", "release_memory",
           "return_memory_promptly", "DEFAULT_MAX_BODY", "DEFAULT_BODY_TIMEOUT",
           "DEFAULT_HEADER_TIMEOUT", "DEFAULT_MAX_CONNECTIONS", "MAX_HEAD_BYTES",
           "TRIM_AFTER_BYTES", "INGEST_THREADS"]

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
#: A refused body at least this large is followed by ``malloc_trim`` (glibc): the
#: memory its parsed events took goes back to the system instead of staying in the
#: worker thread's malloc arena.
TRIM_AFTER_BYTES = 1 << 20
#: Threads serving ingestion requests with bodies over :data:`INLINE_BYTES` at once:
#: each waits for the log commit covering its batch, so one per concurrent client lets
#: every client's batch share a commit (more concurrent requests wait for a thread).
INGEST_THREADS = 64
#: Bodies up to this size are decoded, validated and logged on the event loop's thread
#: (then awaited while the engine's committer thread commits and applies them); bigger
#: ones on an ingestion thread, so that the loop keeps serving other requests.
INLINE_BYTES = 256 * 1024

_log = logging.getLogger("streameval.service")


def snapshot_json(snap: dict) -> dict:
    """The Monitor's snapshot for JSON: ``segments`` becomes a list of entries (each
    with its ``segment`` value, null for the whole stream), since segment keys (None,
    numbers, tuples) are not JSON object keys."""
    out = dict(snap)
    segs = snap.get("segments")
    if isinstance(segs, dict):
        out["segments"] = [dict(entry, segment=entry.get("segment", _label(key)))
                           for key, entry in segs.items()]
    return out


def _label(key):
    return list(key) if isinstance(key, tuple) else key


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


def release_memory() -> None:
    """Return the memory of a large refused body to the system: a full garbage
    collection (which also empties CPython's free lists of floats, dicts, tuples: their
    last entries are the body's newest objects, and would keep whole 1 MiB object
    arenas alive), then glibc's ``malloc_trim(0)`` (no-op elsewhere).

    Runtime complexity: `O(live objects + heap pages)`: a small part of what parsing and
    refusing a large body costs.
    """
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)


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
               registry: CollectorRegistry | None = None, allowed_hosts=None):
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
    it cannot post events to a loopback service without a token; None: any).
    """
    if token is not None and (not isinstance(token, str) or not token):
        raise ValueError("token must be a non-empty string or None")
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
        return _JSON(e.to_json(), status_code=e.status, headers=close)

    def ingestion(kind: str):
        path = f"/{kind}"

        def ingest(body, content_type, key):
            return engine.ingest_body(body, content_type, kind=kind, key=key)

        def begin(body, content_type, key):
            return engine.begin_body(body, content_type, kind=kind, key=key)

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
            try:
                body = await read_body(request)
            except BadRequest as e:
                return refused(e)
            except ClientDisconnect:
                return _JSON({"error": "the client went away"}, status_code=400)
            loop = asyncio.get_running_loop()
            size = len(body)
            ctype, key = request.headers.get("content-type"), key if key is not None else batch_id
            if size <= INLINE_BYTES:
                result, error = await ingest_inline(loop, body, ctype, key)
            else:
                result, error = await loop.run_in_executor(workers, _in_thread, ingest, body,
                                                           ctype, key)
            del body
            if error is not None:
                if size >= TRIM_AFTER_BYTES:  # the refused batch's objects are all freed now
                    await loop.run_in_executor(workers, release_memory)
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
        info = engine.health()
        reason = info["failed"] or (
            info["checkpoint_error"] and f"the last checkpoint failed: {info['checkpoint_error']}"
        ) or next((f"{route} failed: {why}" for route, why in info["export_errors"].items()),
                  None)
        if reason:
            return _JSON({"status": "failed", "reason": reason, **info}, status_code=503)
        return _JSON({"status": "ok", **info})

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
    allowed = None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
    return _Service(app, ingest_routes, allowed, workers)


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

    def __init__(self, app, ingest_routes: dict, allowed, workers: ThreadPoolExecutor):
        self.app, self.state = app, app.state
        self.ingest_routes, self.allowed, self.workers = ingest_routes, allowed, workers

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.allowed is not None:
            raw = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if host_name(raw) not in self.allowed:
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
        """Stop the ingestion threads once their requests are done (not waiting)."""
        self.workers.shutdown(wait=False)


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
