"""The ``streameval`` command: replay a log, run a scenario, serve over HTTP.

::

    streameval replay LOG [--config FILE] [--out DIR] [--on-error fail|skip]
                          [--checkpoint PATH [--checkpoint-every N]] [--fail-on-alert]
                          [--follow [--poll S]] [--no-report] [--no-progress] [--quiet]
    streameval run SCENARIO [--check] [--out DIR] [same options as replay]
    streameval serve [--config FILE] [--host H] [--port P] [--state-dir DIR] ...

``replay`` reads an event log (JSONL, CSV or Parquet; ``-`` for stdin), feeds it to a
:class:`~streameval.monitor.Monitor` (the default monitor of DESIGN.md, or the
``[monitor]`` table of ``--config``) and writes into ``--out``:

* ``metrics.jsonl``: one row per evaluation and segment,
  ``{"n", "t", "segment", "values": {name: float or null}}``, the last one at the end;
* ``alerts.jsonl``: one row per alert transition,
  ``{"rule", "state", "n", "t", "value", "segment"}``;
* ``rejected.jsonl`` (with ``--on-error skip``): ``{"line", "reason", "raw"}`` per bad row;
* ``summary.json``: counts (rows, events, rejected, expired and orphan labels),
  alerts fired, final values, elapsed time;
* ``report.html``: an interactive page that opens offline (needs ``streameval[report]``).

It prints a summary table on stdout (the alerts fired, each with the ``n`` at which
it resolved or "still firing at the end"), and a progress bar on stderr when stderr
is a terminal and ``tqdm`` is installed. Output cut short by its reader
(``streameval replay ... | head``) ends the command quietly with status 0, as for
other Unix tools.

``--follow``: read LOG as it grows, like ``tail -F``: new complete lines are read as
they are appended (a partial last line waits for its newline), every ``--poll``
seconds when there is nothing new (default 0.5); when the file is rotated (renamed
and created again under the same name) or truncated, the rest of the old file is
read, then the new one from its start. Events are evaluated as they arrive;
``metrics.jsonl`` and ``alerts.jsonl`` grow as they do. SIGINT or SIGTERM stops it
cleanly: the lines read so far are evaluated, the final checkpoint (with
``--checkpoint``; others every ``--checkpoint-every`` events) and ``summary.json``
are written, the summary printed, exit status 0 (a second signal stops at once).
Restarted with the same checkpoint, it goes on where it stopped, without counting
an event twice; if LOG was rotated meanwhile, the new file is read from its start
(with a notice). For plain JSONL and CSV files only: a compressed log, a Parquet
file or stdin is refused (exit 2).

Exit status: 0 done (also when stdout's reader closed it early, or a followed replay
was stopped by SIGINT or SIGTERM); 1 an alert fired with ``--fail-on-alert``, or ``run --check``
found alerts other than expected; 2 bad input (the message names the line and the
reason: bad JSON, a missing field, a NaN score, an unknown label, an unparseable
time, a value a metric refuses such as a score outside [0, 1] for ``log_loss``), a
log that cannot be read (a directory, an I/O error, a truncated or corrupt ``.gz``,
``.bz2`` or ``.xz``, a damaged Parquet file: one line naming the file and the last
line read whole), a bad config or a checkpoint that cannot be used, ``serve`` without
the ``serve`` extra (one line: ``pip install 'streameval[serve]'``); 3 an internal
error (a bug: its traceback is printed), never mistaken for an alert.

Bad rows: with ``--on-error skip`` every row refused, by the reader, the event
checks or a metric of the monitor, is a row of ``rejected.jsonl`` with its line and
reason, counted in the summary's ``rejected``; the other rows give the outputs the log
without the refused rows would give. A log that cannot be read stops the replay with
either ``--on-error``: the outputs then hold the rows of what was read before (cut
back to the last checkpoint on a resume), and no ``summary.json`` or ``report.html``
is left (those of a former run in ``--out`` are removed when a replay starts).

Config file (TOML): the ``[monitor]`` table, an optional ``[input]`` table saying how to
read the log (field names, ``require_ts``, ``format``, delayed labels: ``label_ttl``,
``labels``, ``on_duplicate``) and an optional ``[serve]`` table (read by ``serve``
alone). One schema, :mod:`streameval.runconfig`, declares every key for every
subcommand (``streameval.runconfig.reference_markdown()`` renders it); the segment
field is the monitor's ``group_by``, the labels its ``pos_label`` / ``neg_label``.

Checkpoints: ``--checkpoint PATH`` saves the monitor, the read position and the sizes
of the output files atomically every ``--checkpoint-every`` events (at the end of the
batch that reaches it) and at the end. Restarted with the same checkpoint after being
killed, a replay cuts the outputs back to the checkpoint and goes on from there: the
outputs equal those of an uninterrupted run. The same holds after the log grew (rows
appended, to a killed run or to a finished one: the final checkpoint is the state
before the last evaluation, which the resume redoes after the new rows): the outputs
equal those of one uninterrupted run over the whole grown log. A damaged checkpoint,
one written for another config or log name, or for a log that was truncated or
rewritten since (its first bytes, up to 1 MiB, as read then, and for JSONL the 4 KiB
before the position reached, are hashed into the checkpoint and compared), is refused
(exit 2), never silently reset. A compressed log is recognised by its compressed
bytes: a ``.gz`` appended to with another gzip member (``gzip -c new.jsonl >>
log.jsonl.gz``) resumes, one compressed again as a whole is refused.

The library behind ``replay`` and ``run`` (:class:`Replay`, :func:`replay`,
:func:`summarize`, :func:`format_summary`, :func:`run_scenario`,
:func:`load_replay_config`) is :mod:`streameval.replay`; its names stay importable from
here. This module parses arguments, calls the library and prints.

Imports: the standard library, :mod:`streameval.replay` (the library) and
:mod:`streameval.service` (the ``serve`` arguments; the service's own extra on use);
:mod:`streameval.spark.replay` and pyspark on use (``--engine spark``, an optional
extra). It is the top layer, and nothing imports it.

>>> import json, os, tempfile
>>> d = tempfile.mkdtemp(); log = os.path.join(d, "log.jsonl")
>>> _ = open(log, "w").write('{"ts": 1, "label": 1, "score": 0.8}\\n{"ts": 2, "label": 0, "score": NaN}\\n')
>>> out = os.path.join(d, "out")
>>> main(["replay", log, "--out", out, "--quiet", "--no-report"])  # stderr: ...line 2: score is NaN
2
>>> main(["replay", log, "--out", out, "--quiet", "--no-report", "--on-error", "skip"])
0
>>> [(r["line"], r["reason"]) for r in map(json.loads, open(os.path.join(out, "rejected.jsonl")))]
[(2, 'score is NaN')]
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from streameval import __version__
from streameval.events import EventError
from streameval.replay import (
    DEFAULT_CHECKPOINT_EVERY,
    DEFAULT_POLL,
    Replay,
    ReplayError,
    fired_and_resolved,
    format_summary,
    load_replay_config,
    replay,
    run_scenario,
    summarize,
)
from streameval.service import add_serve_arguments, run_from_args

__all__ = ["main", "build_parser", "replay", "Replay", "run_scenario", "ReplayError", "summarize",
           "load_replay_config", "format_summary", "fired_and_resolved",
           "DEFAULT_CHECKPOINT_EVERY", "DEFAULT_POLL"]
#: the modules of the 'serve' extra
_SERVE_EXTRA = ("starlette", "uvicorn", "prometheus_client")

EXIT_OK, EXIT_ALERT, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


# ---------------------------------------------------------------------------- CLI


def _replay_options(p, out_default):
    p.add_argument("--out", metavar="DIR", help=f"output directory (default: {out_default})")
    p.add_argument("--on-error", choices=["fail", "skip"], default="fail",
                   help="a bad row stops the replay with exit status 2 (fail, default) or "
                        "goes to rejected.jsonl with its line and reason (skip)")
    p.add_argument("--checkpoint", metavar="PATH",
                   help="save state to PATH every --checkpoint-every events and at the end; "
                        "resume from it when it exists (the log may have grown since; one "
                        "truncated or rewritten is refused)")
    p.add_argument("--checkpoint-every", type=int, default=DEFAULT_CHECKPOINT_EVERY, metavar="N",
                   help="events between checkpoints (default %(default)s)")
    p.add_argument("--fail-on-alert", action="store_true",
                   help="exit with status 1 if any alert fired (for CI pipelines)")
    p.add_argument("--no-report", action="store_true",
                   help="do not write report.html and the plots")
    p.add_argument("--webhook", action="append", default=[], metavar="URL",
                   help="POST each alert transition as JSON to URL (retries with backoff; repeatable)")
    p.add_argument("--print-alerts", action="store_true",
                   help="also print each alert transition to stdout as a JSON line")
    p.add_argument("--allow-empty", action="store_true",
                   help="accept a log without events (empty, or every row rejected): "
                        "otherwise exit status 2 naming the log and what was found")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary table")


def _follow_options(p):
    p.add_argument("--follow", action="store_true",
                   help="read LOG as it grows, like tail -F (a plain JSONL or CSV file): new "
                        "whole lines are evaluated as they are appended, a rotated or "
                        "truncated file is followed from its start; SIGINT or SIGTERM stops "
                        "it cleanly (final checkpoint, summary, exit status 0)")
    p.add_argument("--poll", type=float, default=DEFAULT_POLL, metavar="S",
                   help="with --follow: seconds between looks at LOG when it has nothing new "
                        "(default %(default)s)")


def build_parser():
    """The argument parser of ``streameval`` (subcommands replay, run, serve)."""
    parser = argparse.ArgumentParser(
        prog="streameval",
        description="Streaming evaluation of classifiers: replay logs, run scenarios, serve.",
    )
    parser.add_argument("--version", action="version", version=f"streameval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("replay", help="replay an event log through a monitor (or follow it)",
                       description="Replay an event log (JSONL, CSV, Parquet; - for stdin) "
                                   "through a monitor, or follow one as it grows (--follow); "
                                   "write metrics.jsonl, alerts.jsonl and a report.")
    p.add_argument("log", metavar="LOG")
    p.add_argument("--config", metavar="FILE", help="monitor config (TOML); default: the default monitor")
    p.add_argument("--engine", choices=["local", "spark"], default="local",
                   help="local (default): this process; spark: the log's splits in parallel on "
                        "Apache Spark (streameval[spark]; a config evaluating every period of "
                        "event time, see the Spark guide)")
    p.add_argument("--spark-master", metavar="URL", default=None,
                   help="with --engine spark: the master of a new session (default: local[*])")
    _replay_options(p, "streameval-out")
    _follow_options(p)
    p.set_defaults(func=_cmd_replay, out="streameval-out")

    p = sub.add_parser("run", help="run a scenario file (and check its expected alerts)",
                       description="Run a scenario (a stream, a monitor config and the alerts "
                                   "expected) and write the same outputs as replay.")
    p.add_argument("scenario", metavar="SCENARIO")
    p.add_argument("--check", action="store_true",
                   help="exit with status 1 unless the alerts are the expected ones")
    _replay_options(p, "streameval-out/<scenario name>")
    p.set_defaults(func=_cmd_run, out=None)

    p = sub.add_parser("serve", help="HTTP ingestion, Prometheus /metrics, alerts (streameval[serve])")
    add_serve_arguments(p)
    p.set_defaults(func=_cmd_serve)
    return parser


def _options(args):
    return {
        "on_error": args.on_error,
        "checkpoint": args.checkpoint,
        "checkpoint_every": args.checkpoint_every,
        "report": not args.no_report,
        "progress": not args.no_progress and not args.quiet,
        "webhooks": args.webhook,
        "print_alerts": args.print_alerts,
        "allow_empty": args.allow_empty,
    }


def _cmd_replay(args):
    if args.engine == "spark":
        summary = _spark_replay(args)
    else:
        summary = replay(args.log, args.out, config=args.config, follow=args.follow,
                         poll=args.poll, **_options(args))
    if not args.quiet:
        print(format_summary(summary))
    if args.fail_on_alert and summary["alerts_fired"]:
        print(f"streameval replay: {summary['alerts_fired']} alert(s) fired (--fail-on-alert)",
              file=sys.stderr)
        return EXIT_ALERT
    return EXIT_OK


def _spark_replay(args):
    """``replay --engine spark``: :func:`streameval.spark.replay` with the CLI's options
    (those that follow events one at a time are refused)."""
    if args.follow:
        raise ReplayError("--follow reads a log as it grows, in this process: use the local "
                          "engine (leave --engine spark out)")
    if args.checkpoint:
        raise ReplayError("--checkpoint: the Spark engine replays the whole log in one job "
                          "(a failed task is retried by Spark); leave --checkpoint out")
    if args.webhook or args.print_alerts:
        raise ReplayError("--webhook and --print-alerts send alerts as they happen: use the local "
                          "engine; the Spark engine writes alerts.jsonl")
    if str(args.log) == "-":
        raise ReplayError("the Spark engine reads a file (JSONL or Parquet), not stdin")
    try:  # the 'spark' extra, on use: the CLI runs without it
        from streameval.spark.replay import SparkReplayError
        from streameval.spark.replay import replay as spark_replay
        import pyspark  # noqa: F401
    except ImportError as e:
        raise ReplayError(f"--engine spark needs PySpark: pip install 'streameval[spark]' ({e})") from None
    spark = None
    if args.spark_master:
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master(args.spark_master).appName("streameval replay")
                 .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())
    try:
        return spark_replay(args.log, args.out, args.config, spark=spark,
                            on_error=args.on_error, report=not args.no_report,
                            allow_empty=args.allow_empty)
    except SparkReplayError as e:
        raise ReplayError(str(e)) from None
    except EventError as e:
        hint = " (use --on-error skip to set bad rows aside)" if args.on_error == "fail" else ""
        raise ReplayError(f"{args.log}: {e}{hint}") from None


def _cmd_run(args):
    summary, failures = run_scenario(args.scenario, args.out, check=args.check, **_options(args))
    if not args.quiet:
        print(format_summary(summary))
    status = EXIT_OK
    if args.check:
        if failures:
            print(f"\nscenario {summary['scenario']}: CHECK FAILED", file=sys.stderr)
            for f in failures:
                print(f"  - {f}", file=sys.stderr)
            status = EXIT_ALERT
        elif not args.quiet:
            print(f"\nscenario {summary['scenario']}: check passed (alerts as expected)")
    if args.fail_on_alert and summary["alerts_fired"]:
        status = EXIT_ALERT
    return status


def _cmd_serve(args):
    try:
        return run_from_args(args)
    except ImportError as e:  # the 'serve' extra is not installed: one line, no traceback
        text = str(e)
        if "streameval[serve]" not in text:
            if getattr(e, "name", None) not in _SERVE_EXTRA:
                raise  # another module: a bug, its traceback says where
            text = f"needs the 'serve' extra ({e.name} is missing): pip install 'streameval[serve]'"
        text = text.removeprefix("streameval serve ")
        print(f"streameval serve: {text}", file=sys.stderr)
        return EXIT_INPUT


def _stdout_to_devnull():
    """Point stdout at /dev/null: its reader is gone, and Python's flush at exit must
    not fail again (the idiom of the Python docs on SIGPIPE)."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(fd, sys.stdout.fileno())
        finally:
            os.close(fd)
    except (AttributeError, OSError, ValueError):  # stdout is not a file (captured)
        pass


def main(argv=None):
    """Entry point of the ``streameval`` command; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors (status 2)
        return int(e.code or 0)
    try:
        return args.func(args)
    except BrokenPipeError:  # stdout's reader went away (``| head``): stop quietly, as Unix tools do
        _stdout_to_devnull()
        return EXIT_OK
    except ReplayError as e:
        print(f"streameval {args.command}: error: {e}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print(f"streameval {args.command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError) as e:
        print(f"streameval {args.command}: error: {e}", file=sys.stderr)
        return EXIT_INPUT
    except Exception:  # a bug: not exit status 1, which says an alert fired
        if args.command not in ("replay", "run"):
            raise
        traceback.print_exc()
        print(f"streameval {args.command}: internal error (a bug; the traceback above "
              "says where)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
