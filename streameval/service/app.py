"""The HTTP layer: a Starlette app over an :class:`~.engine.Engine`, served by uvicorn.

Routes:

* ``POST /events`` -- one JSON event, a JSON array of events or NDJSON; 200
  ``{"accepted", "n", "seq"}`` once the batch is durable and applied; 400 (bad
  body or event: ``{"error", "reason", "index"}``), 413 (body over the limit), 401
  (token), 503 (shutting down, log not writable).
* ``GET /metrics`` -- Prometheus text (or OpenMetrics, by ``Accept``).
* ``GET /snapshot`` -- the Monitor's snapshot as JSON, plus a ``service`` section.
* ``GET /alerts`` -- ``{"alerts": [...]}``, the active alerts.
* ``GET /healthz`` -- ``{"status": "ok", ...}``; never needs the token.
* ``POST /checkpoint`` -- write a checkpoint now (admin).

With a ``token``, ``POST`` routes need ``Authorization: Bearer <token>`` (401
otherwise); with ``protect_reads=True`` the ``GET`` routes but ``/healthz`` do too.
Unknown paths get 404, wrong methods 405 (with ``Allow``), always with a JSON body.

Imports: starlette, prometheus-client (the ``serve`` extra), :mod:`streameval.io.sinks`
and the service's own modules (engine, body, exposition).
"""

from __future__ import annotations

import hmac
import time

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.exposition import choose_encoder
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streameval.io.sinks import dumps
from streameval.service.body import BadRequest
from streameval.service.engine import Unavailable
from streameval.service.exposition import MonitorCollector

__all__ = ["create_app", "snapshot_json", "DEFAULT_MAX_BODY"]

#: Largest accepted request body: 16 MiB holds about 200 000 JSON events, far above
#: a sensible batch, and bounds the memory one request can take.
DEFAULT_MAX_BODY = 16 * 1024 * 1024


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


def create_app(engine, *, token: str | None = None, protect_reads: bool = False,
               max_body: int = DEFAULT_MAX_BODY, registry: CollectorRegistry | None = None):
    """A Starlette application serving ``engine``.

    Parameters: ``token`` (bearer token for ``POST`` routes; None: no auth),
    ``protect_reads`` (the token guards ``/metrics``, ``/snapshot``, ``/alerts`` too),
    ``max_body`` (bytes; larger bodies get 413), ``registry`` (a fresh
    :class:`~prometheus_client.CollectorRegistry` by default).
    """
    if token is not None and (not isinstance(token, str) or not token):
        raise ValueError("token must be a non-empty string or None")
    if not isinstance(max_body, int) or max_body < 1:
        raise ValueError(f"max_body = {max_body!r}: must be an int >= 1")
    registry = CollectorRegistry() if registry is None else registry
    registry.register(MonitorCollector(engine))
    latency = Histogram(
        "streameval_ingest_seconds", "Time to validate, log and apply one ingestion request",
        registry=registry,
        buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    )
    expected = None if token is None else f"Bearer {token}".encode()

    def authorized(request: Request) -> bool:
        if expected is None:
            return True
        got = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(got, expected)

    def unauthorized() -> Response:
        return _JSON({"error": "missing or wrong bearer token"}, status_code=401,
                     headers={"WWW-Authenticate": 'Bearer realm="streameval"'})

    def guard_read(request: Request) -> Response | None:
        if protect_reads and not authorized(request):
            return unauthorized()
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
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body:
                raise BadRequest(f"body over the limit of {max_body} bytes", status=413,
                                 limit=max_body)
            chunks.append(chunk)
        return b"".join(chunks)

    async def events(request: Request) -> Response:
        if not authorized(request):
            return unauthorized()
        start = time.perf_counter()
        try:
            body = await read_body(request)
            result = await run_in_threadpool(
                engine.ingest_body, body, request.headers.get("content-type")
            )
        except BadRequest as e:
            return _JSON(e.to_json(), status_code=e.status)
        except Unavailable as e:
            return _JSON({"error": str(e)}, status_code=503)
        latency.observe(time.perf_counter() - start)
        return _JSON(result)

    async def metrics(request: Request) -> Response:
        denied = guard_read(request)
        if denied:
            return denied
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        data = await run_in_threadpool(encoder, registry)
        return Response(data, media_type=content_type)

    async def snapshot(request: Request) -> Response:
        return guard_read(request) or _JSON(
            snapshot_json(await run_in_threadpool(engine.snapshot)))

    async def alerts(request: Request) -> Response:
        return guard_read(request) or _JSON(
            {"alerts": await run_in_threadpool(engine.active_alerts)}
        )

    async def healthz(request: Request) -> Response:
        info = engine.health()
        if info["failed"]:
            return _JSON({"status": "failed", **info}, status_code=503)
        return _JSON({"status": "ok", **info})

    async def checkpoint(request: Request) -> Response:
        if not authorized(request):
            return unauthorized()
        written = await run_in_threadpool(engine.checkpoint)
        return _JSON({"written": written, **engine.health()})

    async def http_error(request: Request, exc: HTTPException) -> Response:
        return _JSON({"error": exc.detail}, status_code=exc.status_code,
                     headers=getattr(exc, "headers", None))

    routes = [
        Route("/events", events, methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/snapshot", snapshot, methods=["GET"]),
        Route("/alerts", alerts, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/checkpoint", checkpoint, methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    app.state.engine = engine
    app.state.registry = registry
    return app
