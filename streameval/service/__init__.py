"""``streameval serve``: a live monitoring service over HTTP.

Events are posted to ``POST /events`` (one JSON object, a JSON array, or NDJSON, with
the fields of the logs: ``ts``, ``label``, ``score``, ``id``, ``weight`` and the
segment field); the Monitor's values are served to Prometheus at ``GET /metrics``, as
JSON at ``GET /snapshot``, active alerts at ``GET /alerts``; alert transitions go to
the configured sinks (webhooks). With ``--state-dir`` every acknowledged batch is in
a write-ahead log before the 200, and the whole state is checkpointed every N events
or seconds and at shutdown: a ``kill -9`` loses no acknowledged event.

Needs the ``serve`` extra (``pip install 'streameval[serve]'``: starlette, uvicorn,
prometheus-client). This module imports none of them until the server is started, so
that the CLI can declare its arguments without them.

Imports: the standard library, :mod:`streameval.runconfig` (the config file's
schema: this module builds the engine and the server from a parsed config),
:mod:`streameval.monitor`, :mod:`streameval.io` and its own :mod:`.engine` and
:mod:`.checks`; its
:mod:`.app` and the ``serve`` extra when a server is started.

Guarded by default (the security guide): loopback only; with a token (``--token-file``,
:data:`MIN_TOKEN_BYTES` at least) every route but ``/healthz`` needs it, reads included unless ``--public-reads``; a
non-loopback address without a token refuses to start unless ``--insecure``. ``POST``
bodies must say ``Content-Type: application/json`` (or NDJSON), and are bounded in
size, nesting and time, their ids, segment values and label strings in bytes; headers
are bounded in time and count (one ``Host``), connections in number.

Embedding (the server runs in a thread; ``port=0`` takes a free port):

>>> import json, urllib.request
>>> with BackgroundServer(port=0) as srv:
...     req = urllib.request.Request(srv.url + "/events", method="POST",
...                                  data=b'{"label": 1, "score": 0.8, "ts": 1}',
...                                  headers={"Content-Type": "application/json"})
...     json.load(urllib.request.urlopen(req))["accepted"]
1
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import os
import signal
import socket
import sys
import threading
import time

from streameval import runconfig
from streameval.io.alertmanager import AlertmanagerSink, AlertmanagerWebhookSink
from streameval.io.sinks import WebhookSink
from streameval.monitor import Monitor
from streameval.service.checks import (
    MAKE_TOKEN,
    MIN_TOKEN_BYTES,
    check_token,
    segments_by_key,
    snapshot_json,
)
from streameval.service.engine import Engine

__all__ = [
    "serve",
    "build_engine",
    "load_config",
    "BackgroundServer",
    "add_serve_arguments",
    "run_from_args",
    "main",
    "check_token",
    "MIN_TOKEN_BYTES",
    "SEGMENT_EVERY_SECONDS",
    "snapshot_json",
    "segments_by_key",
]

#: Defaults of the command line and of :func:`serve`.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: Checkpoint every 100 000 events or 60 s: replaying at most that many events after a
#: crash takes well under a second, and a checkpoint of the default monitor is cheap.
DEFAULT_CHECKPOINT_EVENTS = 100_000
DEFAULT_CHECKPOINT_SECONDS = 60.0
#: With ``group_by`` and no ``every_seconds`` in the ``[monitor]`` table, the service's
#: monitor also evaluates at each new minute of event time: a segment's values (its last
#: row, what ``/metrics``, ``/snapshot`` and the live page show) then lag its events by
#: at most about a minute of event time however small its share of the traffic. The
#: points depend on the events alone, so a restart rebuilds the same rows.
SEGMENT_EVERY_SECONDS = 60.0
TOKEN_ENV = "STREAMEVAL_TOKEN"


def _need_extra():
    try:
        import httptools  # noqa: F401
        import prometheus_client  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"streameval serve needs the 'serve' extra ({e.name} is missing): "
            "pip install 'streameval[serve]'"
        ) from None


#: Keys of the optional ``[serve]`` table of a config file (``protect_reads`` is
#: deprecated: reads are guarded by default, ``public_reads = true`` opens them);
#: declared, with their types and defaults, in :mod:`streameval.runconfig`.
SERVE_KEYS = tuple(runconfig.keys("serve"))
#: Keys of the ``[input]`` table (shared with ``streameval replay``) that the service reads.
INPUT_KEYS = tuple(k for k in runconfig.keys("input", "serve") if k != "format")
#: ``[serve]`` keys passed to the engine as they are.
ENGINE_KEYS = ("max_pending", "idempotency_window", "max_idempotency_keys", "accept_loss")


def load_config(config):
    """``(monitor, fields, serve_table, monitor_table)`` from a TOML path, a dict or None.

    The config file is the one of ``streameval replay``, read with the run schema
    (:mod:`streameval.runconfig`, edge ``serve``): a ``[monitor]`` table (a file without
    one is read as that table), an optional ``[input]`` table naming the event fields
    (``ts``, ``label``, ``score``, ``id``, ``weight``; ``stamp_arrival_time``, default
    false: an event without ``ts`` is refused, true gives it its time of arrival;
    ``max_future``, seconds an event time may be ahead of the server's clock, default
    3600, 0 for no limit; ``label_ttl``: delayed labels on ``/predictions`` and
    ``/labels``, joined by ``id``; ``on_duplicate``: ``keep_first`` (default) or
    ``keep_last``), and an optional ``[serve]`` table of service options
    (:data:`SERVE_KEYS`; their types and defaults are in the schema); command-line
    options override it. ``serve_table`` holds the ``[serve]`` values given and the
    engine's ``[input]`` options (``stamp_arrival_time``, and ``max_future``,
    ``label_ttl``, ``on_duplicate`` when given). ``accept_loss`` starts over a damaged
    state directory from what can be read, counting the loss (see
    :mod:`streameval.service.engine`). The segment field is the monitor's
    ``group_by``, the labels its ``pos_label``/``neg_label``. With ``group_by`` and no
    ``every_seconds``, the monitor evaluates at each new period of
    :data:`SEGMENT_EVERY_SECONDS` of event time as well (``monitor_table`` is the table
    as given).
    """
    run = runconfig.parse(config, "serve")
    inp, given = run.input, run.doc.get("input", {})
    # with delayed labels the default monitor counts every prediction when it is made
    # (its label-free metrics: estimates, score drift) besides the labels as they join
    delayed = "label_ttl" in given
    mtable = run.monitor
    if mtable is not None and mtable.get("group_by") and mtable.get("every_seconds") is None:
        mtable = {**mtable, "every_seconds": SEGMENT_EVERY_SECONDS}
    monitor = (Monitor.default(label_free=delayed) if mtable is None
               else Monitor.from_config(mtable, label_free=delayed))
    # max_future is checked by the engine, against its clock (the rows' check is off)
    extra = {"stamp_arrival_time": inp["stamp_arrival_time"]}
    for key in ("max_future", "label_ttl", "on_duplicate"):
        if key in given:
            extra[key] = inp[key]
    # the events' byte limits are the service's (``[serve] max_id_bytes``, ...): the
    # body parser and the event checks refuse the same values
    limits = {k: run.serve[k] for k in ("max_id_bytes", "max_segment_bytes", "max_label_bytes")
              if run.serve.get(k) is not None}
    fields = dataclasses.replace(run.fields(monitor), max_future=None, **limits)
    return monitor, fields, {**run.serve, **extra}, run.monitor


def build_engine(config=None, *, state_dir=None, webhooks=(), sinks=(), checkpoint_every=None,
                 checkpoint_seconds=None, alertmanagers=(), external_url=None, **kwargs):
    """An :class:`~streameval.service.engine.Engine` for ``config``, recovered from ``state_dir``.

    ``webhooks`` are URLs that receive each alert transition as a JSON ``POST`` (added to
    the config's; in Alertmanager's webhook body with ``[serve] webhook_format =
    "alertmanager"``); ``alertmanagers`` are Alertmanager base URLs that receive the
    firing and resolved alerts on their API v2 (added to the config's
    ``alertmanager``); ``sinks`` are more callables (or :mod:`streameval.io` sinks)
    receiving each transition. ``external_url`` is the service's address, for the
    alerts' ``generatorURL`` (the config's ``external_url`` wins).
    ``checkpoint_every`` / ``checkpoint_seconds``: None takes the config's value or the
    default; 0 disables.
    """
    monitor, fields, table, config_id = load_config(config)
    rules = {}  # filled once the engine exists (its Monitor may come from a checkpoint)
    urls = list(table.get("webhooks", [])) + list(webhooks)
    am_urls = list(table.get("alertmanager", [])) + list(alertmanagers)
    alerting = _alerting(table, external_url, rules)
    if table.get("webhook_format", "streameval") == "alertmanager":
        hooks = [AlertmanagerWebhookSink(u, **alerting) for u in urls]
    else:
        hooks = [_webhook(u) for u in urls]
    if am_urls:
        hooks += [AlertmanagerSink(u, resend_interval=table.get("alertmanager_resend", 60),
                                   **alerting) for u in am_urls]
    all_sinks = hooks + list(sinks)
    every = _pick(checkpoint_every, table.get("checkpoint_events"), DEFAULT_CHECKPOINT_EVENTS)
    seconds = _pick(checkpoint_seconds, table.get("checkpoint_seconds"),
                    DEFAULT_CHECKPOINT_SECONDS)
    for key in ("max_future", "stamp_arrival_time", "label_ttl", "on_duplicate") + ENGINE_KEYS:
        if key in table:
            kwargs.setdefault(key, table[key])
    engine = Engine.open(monitor, fields=fields, state_dir=state_dir,
                         sinks=all_sinks, checkpoint_every=every or None,
                         checkpoint_seconds=seconds or None, config_id=config_id, **kwargs)
    rules.update({r.name: r for r in engine.monitor.rules})
    engine.serve_options = table
    return engine


def _alerting(table: dict, external_url, rules) -> dict:
    """The Alertmanager sinks' common arguments: the rules, the static labels (``job``
    defaults to ``streameval``; ``model`` when set; ``[serve] labels``), the runbook and
    the link back to the service's ``/alerts``."""
    labels = {}
    if "model" in table:
        labels["model"] = table["model"]
    labels["job"] = table.get("job", "streameval")
    labels.update(table.get("labels", {}))
    base = table.get("external_url", external_url)
    return {"rules": rules, "labels": labels, "runbook_url": table.get("runbook_url"),
            "generator_url": "" if base is None else base.rstrip("/") + "/alerts"}


def _pick(*values):
    for v in values:
        if v is not None:
            return v
    return None


def _webhook(url):
    return WebhookSink(url, retries=3, backoff=0.5, timeout=5)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _server(app, log_level: str, opts: dict):
    import uvicorn

    from streameval.service.app import Server, protocol_class

    # httptools with read deadlines, a header limit and a connection cap; no websockets;
    # no X-Forwarded-* rewriting of the client's address (nothing here reads it, and
    # its middleware costs every request)
    http = protocol_class(opts["header_timeout"], opts["body_timeout"], opts["max_connections"])
    config = uvicorn.Config(app, http=http, ws="none", log_level=log_level, access_log=False,
                            lifespan="off", timeout_graceful_shutdown=10, proxy_headers=False)
    return Server(config)


def _options(table: dict, *, public_reads=None, protect_reads=None, max_body=None,
             header_timeout=None, body_timeout=None, max_connections=None,
             allowed_hosts=None) -> dict:
    """The HTTP options: each argument, else the ``[serve]`` table's value (checked by
    the run schema), else the default; an argument is checked as its key is, naming
    the argument."""
    from streameval.service import app as _app  # the 'serve' extra: only when serving

    if public_reads is None and protect_reads is None:  # from the config file
        public = _app.resolve_public_reads(table.get("public_reads"), table.get("protect_reads"),
                                           "serve.protect_reads")
    else:
        public = _app.resolve_public_reads(public_reads, protect_reads)
    out = {"public_reads": public}
    serve = runconfig.SECTIONS["serve"]
    for name, value, default in (
        ("max_body", max_body, _app.DEFAULT_MAX_BODY),
        ("header_timeout", header_timeout, _app.DEFAULT_HEADER_TIMEOUT),
        ("body_timeout", body_timeout, _app.DEFAULT_BODY_TIMEOUT),
        ("max_connections", max_connections, _app.DEFAULT_MAX_CONNECTIONS),
        ("max_id_bytes", None, _app.MAX_ID_BYTES),
        ("max_segment_bytes", None, _app.MAX_SEGMENT_BYTES),
        ("max_label_bytes", None, _app.MAX_LABEL_BYTES),
        ("refusal_penalty", None, _app.REFUSAL_PENALTY),
    ):
        if value is not None:
            value = serve.key(name).check(value, name)
        out[name] = _pick(value, table.get(name), default)
    if allowed_hosts:
        allowed_hosts = serve.key("allowed_hosts").check(list(allowed_hosts), "allowed_hosts")
    out["allowed_hosts"] = list(allowed_hosts or ()) or table.get("allowed_hosts", [])
    return out


def _byte_limits(opts: dict) -> dict:
    return {k: opts[k] for k in ("max_id_bytes", "max_segment_bytes", "max_label_bytes",
                                 "refusal_penalty")}


#: Host names a loopback-bound service answers to (``Host`` header, port aside).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def _hosts(sock: socket.socket, extra) -> frozenset | None:
    """The ``Host`` values the app accepts: on a loopback address, the loopback names
    plus ``extra`` (a web page that rebinds its own name to 127.0.0.1 is then refused,
    whatever its origin); elsewhere any (a token is required there), unless ``extra``
    names some."""
    if not _is_loopback(sock) and not extra:
        return None
    bound = sock.getsockname()[0].split("%")[0]
    return frozenset(h.lower().strip("[]") for h in (*LOOPBACK_HOSTS, bound, *extra))


def _refuse_open(sock: socket.socket, token, insecure: bool) -> None:
    """Refuse to serve a non-loopback address without a token, unless ``insecure``."""
    if token is None and not _is_loopback(sock):
        url = _url(sock)
        if not insecure:
            sock.close()
            raise ValueError(f"{url} is reachable from other machines and no token is set: "
                             f"give one (--token-file FILE or {TOKEN_ENV}), or --insecure "
                             "(insecure=True) to serve without one")
        print(f"streameval serve: warning: {url} is reachable from other machines and "
              "takes no token (--insecure)", file=sys.stderr, flush=True)


def _is_loopback(sock: socket.socket) -> bool:
    return ipaddress.ip_address(sock.getsockname()[0].split("%")[0]).is_loopback


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def serve(config=None, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, state_dir=None,
          token: str | None = None, *, public_reads: bool | None = None,
          protect_reads: bool | None = None, insecure: bool = False,
          max_body: int | None = None, header_timeout: float | None = None,
          body_timeout: float | None = None, max_connections: int | None = None,
          checkpoint_every: int | None = None, checkpoint_seconds: float | None = None,
          webhooks=(), sinks=(), log_level: str = "warning", out=None,
          allowed_hosts=(), alertmanagers=(), accept_loss: bool | None = None) -> int:
    """Run the service until SIGTERM or SIGINT; return the exit status (0).

    ``config`` is a TOML path, a parsed config dict, or None for the default monitor of
    DESIGN.md section 6. Binds ``host`` (127.0.0.1 by default: loopback only) and
    ``port`` (0: a free port), then prints ``streameval serve: listening on URL`` to
    ``out`` (stdout). On SIGTERM or SIGINT it stops accepting requests, finishes the
    ones in flight, writes a final checkpoint, and returns.

    ``token`` guards every route but ``/healthz`` (``public_reads=True`` opens the
    reads; ``protect_reads`` is deprecated, see
    :func:`~streameval.service.app.resolve_public_reads`). A non-loopback ``host``
    without a token raises ValueError unless ``insecure=True``. ``max_body`` (bytes),
    ``header_timeout`` and ``body_timeout`` (seconds) and ``max_connections`` bound
    what a client can take (defaults in :mod:`streameval.service.app`).
    ``accept_loss`` starts over a damaged state directory (see
    :mod:`streameval.service.engine`). Each None takes the config's ``[serve]`` value
    or the default.
    """
    _need_extra()
    check_token(token)
    from streameval.service.app import create_app, return_memory_promptly

    out = sys.stdout if out is None else out
    return_memory_promptly()  # this process is the service's: a refused body's pages go back
    # bind first: a refused address costs no recovery of the state
    sock = _bind(host, port)
    _refuse_open(sock, token, insecure)
    try:
        engine = build_engine(config, state_dir=state_dir, webhooks=webhooks, sinks=sinks,
                              checkpoint_every=checkpoint_every,
                              checkpoint_seconds=checkpoint_seconds,
                              alertmanagers=alertmanagers, external_url=_url(sock),
                              **({} if accept_loss is None else {"accept_loss": accept_loss}))
    except BaseException:
        sock.close()
        raise
    try:
        opts = _options(engine.serve_options, public_reads=public_reads,
                        protect_reads=protect_reads, max_body=max_body,
                        header_timeout=header_timeout, body_timeout=body_timeout,
                        max_connections=max_connections, allowed_hosts=allowed_hosts)
        app = create_app(engine, token=token, public_reads=opts["public_reads"],
                         max_body=opts["max_body"], body_timeout=opts["body_timeout"],
                         allowed_hosts=_hosts(sock, opts["allowed_hosts"]),
                         own_process=True, **_byte_limits(opts))
        server = _server(app, log_level, opts)
        replayed = engine.replayed
        print(f"streameval serve: listening on {_url(sock)}"
              + (f" (state in {state_dir}; replayed {replayed[1]} events)" if state_dir else ""),
              file=out, flush=True)
        main_thread = threading.current_thread() is threading.main_thread()
        previous = {}
        if main_thread:
            # uvicorn re-raises the signal that stopped it after restoring the previous
            # handler; a handler that does nothing lets us write the final checkpoint
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: None)
        try:
            server.run(sockets=[sock])
        finally:
            app.close()
            for sig, h in previous.items():
                signal.signal(sig, h)
    finally:
        sock.close()
        engine.close()
    print("streameval serve: stopped", file=out, flush=True)
    return 0


class BackgroundServer:
    """The service in a background thread, for embedding and tests.

    ``with BackgroundServer(config=None, port=0, state_dir=...) as srv:`` starts it and
    waits until it accepts connections; ``srv.url`` is its address, ``srv.engine`` the
    engine; leaving the block stops it and writes the final checkpoint. Takes the
    arguments of :func:`serve` (``engine=`` instead of ``config`` serves an existing
    :class:`~streameval.service.engine.Engine`).
    """

    def __init__(self, config=None, host: str = DEFAULT_HOST, port: int = 0, state_dir=None,
                 token: str | None = None, *, engine=None, public_reads: bool | None = None,
                 protect_reads: bool | None = None, insecure: bool = False,
                 max_body: int | None = None, header_timeout: float | None = None,
                 body_timeout: float | None = None, max_connections: int | None = None,
                 log_level: str = "warning", allowed_hosts=(), **engine_kwargs):
        _need_extra()
        check_token(token)
        from streameval.service.app import create_app

        sock = _bind(host, port)
        _refuse_open(sock, token, insecure)
        try:
            self.engine = engine if engine is not None else build_engine(
                config, state_dir=state_dir, **{"external_url": _url(sock), **engine_kwargs})
        except BaseException:
            sock.close()
            raise
        try:
            self.options = _options(
                getattr(self.engine, "serve_options", {}), public_reads=public_reads,
                protect_reads=protect_reads, max_body=max_body, header_timeout=header_timeout,
                body_timeout=body_timeout, max_connections=max_connections,
                allowed_hosts=allowed_hosts)
            self.app = create_app(self.engine, token=token,
                                  public_reads=self.options["public_reads"],
                                  max_body=self.options["max_body"],
                                  body_timeout=self.options["body_timeout"],
                                  allowed_hosts=_hosts(sock, self.options["allowed_hosts"]),
                                  **_byte_limits(self.options))
            self._server = _server(self.app, log_level, self.options)
        except BaseException:
            sock.close()
            if engine is None:  # built here: stop its threads and close its log
                self.engine.close()
            raise
        self._sock = sock
        self.url = _url(self._sock)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self._sock]},
                                        name="streameval-serve", daemon=True)

    def start(self) -> "BackgroundServer":
        """Start serving; return once the server accepts requests (10 s at most)."""
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()  # ``with`` does not call __exit__ when __enter__ raises
                raise RuntimeError("the streameval server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving, then close the engine (final checkpoint)."""
        self._server.should_exit = True
        self._thread.join(timeout=15)
        self.app.close()
        self._sock.close()
        self.engine.close()

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------- CLI


def add_serve_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Declare the ``streameval serve`` options on ``parser`` (imports nothing heavy)."""
    parser.add_argument("--config", metavar="FILE",
                        help="monitor config (TOML); default: the default monitor")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help="address to bind (default %(default)s: loopback only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help="port (default %(default)s; 0 picks a free one)")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="directory for the write-ahead log and checkpoints "
                             "(default: none, state is lost at exit)")
    parser.add_argument("--token-file", metavar="FILE",
                        help=f"file holding the bearer token required by every route but "
                             f"/healthz (or set {TOKEN_ENV}); default: no token")
    parser.add_argument("--public-reads", action="store_true", default=None,
                        help="with a token: let /metrics, /snapshot and /alerts be read "
                             "without it (e.g. for a Prometheus scraping without a token)")
    parser.add_argument("--protect-reads", action="store_true", default=None,
                        help="deprecated, the default: reads need the token when one is set")
    parser.add_argument("--insecure", action="store_true",
                        help="serve a non-loopback --host without a token (refused otherwise)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        dest="allowed_hosts",
                        help="also answer requests whose Host header is NAME (repeatable; "
                             "on loopback only localhost, 127.0.0.1 and ::1 are answered, "
                             "against DNS rebinding)")
    parser.add_argument("--webhook", action="append", default=[], metavar="URL",
                        help="POST each alert transition to URL (repeatable)")
    parser.add_argument("--alertmanager", action="append", default=[], metavar="URL",
                        help="push firing and resolved alerts to the Alertmanager at URL "
                             "(its API v2, e.g. http://localhost:9093; repeatable)")
    parser.add_argument("--checkpoint-events", type=int, default=None, metavar="N",
                        help=f"checkpoint every N events (default {DEFAULT_CHECKPOINT_EVENTS}; "
                             "0: never by count)")
    parser.add_argument("--checkpoint-seconds", type=float, default=None, metavar="S",
                        help=f"checkpoint every S seconds (default {DEFAULT_CHECKPOINT_SECONDS:g}; "
                             "0: never by time)")
    parser.add_argument("--accept-loss", action="store_true", default=None,
                        help="start over a damaged state directory from what can be read; "
                             "the loss is counted in /healthz and /metrics (default: refuse "
                             "to start, exit status 2)")
    parser.add_argument("--max-body", type=int, default=None, metavar="BYTES",
                        help="largest request body (default 16 MiB); larger ones get 413")
    parser.add_argument("--header-timeout", type=float, default=None, metavar="S",
                        help="seconds to send a request's headers (default 10); the "
                             "connection is closed after")
    parser.add_argument("--body-timeout", type=float, default=None, metavar="S",
                        help="seconds to send a request's body (default 30); 408 after")
    parser.add_argument("--max-connections", type=int, default=None, metavar="N",
                        help="open connections served at once (default 1000); the next "
                             "ones get 503")
    parser.add_argument("--log-level", default="warning",
                        choices=["critical", "error", "warning", "info", "debug"])
    return parser


def _token(args) -> str | None:
    """The token of ``--token-file`` (or ``STREAMEVAL_TOKEN``), checked: one line
    (ValueError) for a file that cannot be read, is empty, or holds a short token."""
    path = args.token_file
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                token = f.read().strip()
        except FileNotFoundError:
            raise ValueError(f"--token-file {path}: no such file; make one with "
                             f"{MAKE_TOKEN}") from None
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ValueError(f"--token-file {path}: cannot read it: {why}") from None
        if not token:
            raise ValueError(f"--token-file {path}: the token file is empty")
        check_token(token, f"--token-file {path}: the token")
        return token
    token = os.environ.get(TOKEN_ENV) or None
    check_token(token, f"{TOKEN_ENV}: the token")
    return token


def run_from_args(args: argparse.Namespace) -> int:
    """Run :func:`serve` with the options of :func:`add_serve_arguments`; exit status."""
    if args.protect_reads:
        if args.public_reads:
            raise ValueError("--protect-reads and --public-reads contradict each other "
                             "(--protect-reads is deprecated: it is the default)")
        print("streameval serve: warning: --protect-reads is deprecated: reads need the "
              "token by default (--public-reads opens them)", file=sys.stderr, flush=True)
    return serve(
        config=args.config, host=args.host, port=args.port, state_dir=args.state_dir,
        token=_token(args), public_reads=args.public_reads, insecure=args.insecure,
        max_body=args.max_body, header_timeout=args.header_timeout,
        body_timeout=args.body_timeout, max_connections=args.max_connections,
        allowed_hosts=args.allowed_hosts,
        checkpoint_every=args.checkpoint_events, checkpoint_seconds=args.checkpoint_seconds,
        webhooks=args.webhook, alertmanagers=args.alertmanager,
        log_level=args.log_level, accept_loss=getattr(args, "accept_loss", None),
    )


def main(argv=None) -> int:
    """``python -m streameval.service [options]``."""
    parser = argparse.ArgumentParser(prog="streameval serve", description=__doc__.split("\n\n")[0])
    add_serve_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_from_args(args)
    except (ValueError, OSError) as e:
        print(f"streameval serve: error: {e}", file=sys.stderr)
        return 2
