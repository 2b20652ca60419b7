"""Replay a log, run a scenario: the library behind ``streameval replay`` and ``run``.

:func:`replay` (or :class:`Replay`, set up then run) reads an event log (JSONL, CSV or
Parquet; ``-`` for stdin), feeds it to a :class:`~streameval.monitor.Monitor` (the
default monitor of DESIGN.md, or the ``[monitor]`` table of the config) through a
:class:`~streameval.pipeline.Pipeline` and writes into ``out``:

* ``metrics.jsonl``: one row per evaluation and segment,
  ``{"n", "t", "segment", "values": {name: float or null}}``, the last one at the end;
* ``alerts.jsonl``: one row per alert transition,
  ``{"rule", "state", "n", "t", "value", "segment"}``;
* ``rejected.jsonl`` (with ``on_error="skip"``): ``{"line", "reason", "raw"}`` per bad row;
* ``summary.json``: counts (rows, events, rejected, expired and orphan labels),
  alerts fired, final values, elapsed time (:func:`summarize`; the Spark engine writes
  the same one);
* ``report.html``: an interactive page that opens offline (needs ``streameval[report]``).

:func:`format_summary` renders a summary as the table the command prints;
:func:`run_scenario` materialises a scenario's stream and replays it with the
scenario's config.

``follow=True``: read the log as it grows, like ``tail -F``: new complete lines are
read as they are appended (a partial last line waits for its newline), every ``poll``
seconds when there is nothing new; when the file is rotated (renamed and created again
under the same name) or truncated, the rest of the old file is read, then the new one
from its start. Events are evaluated as they arrive; ``metrics.jsonl`` and
``alerts.jsonl`` grow as they do. :meth:`Replay.stop` (or SIGINT / SIGTERM, when the
replay runs in the main thread) stops it cleanly: the lines read so far are evaluated,
the final checkpoint and ``summary.json`` are written. Restarted with the same
checkpoint, it goes on where it stopped, without counting an event twice. For plain
JSONL and CSV files only: a compressed log, a Parquet file or stdin is refused.

A JSONL or CSV log file of at least
:data:`~streameval.io.sources.PARSE_PROCESS_MIN_BYTES` is read and validated in a second
process while the Monitor works in this one (:class:`~streameval.io.EventSource`'s
``parse_process``): the outputs, refusals, counts and checkpoints are those of one
process; stdin, Parquet, a followed log and a machine with one CPU are read here.

Bad rows: with ``on_error="skip"`` every row refused, by the reader, the event checks
or a metric of the monitor, is a row of ``rejected.jsonl`` with its line and reason,
counted in the summary's ``rejected``; the other rows give the outputs the log without
the refused rows would give. With ``on_error="fail"`` the first one raises
:class:`ReplayError` naming its line and reason. A log that cannot be read stops the
replay with either: the outputs then hold the rows of what was read before (cut back
to the last checkpoint on a resume), and no ``summary.json`` or ``report.html`` is left
(those of a former run in ``out`` are removed when a replay starts).

Config (a TOML file or its parsed dict; schema in :mod:`streameval.runconfig`): the
``[monitor]`` table (built by :mod:`streameval.config`) and an optional ``[input]``
table saying how to read the log::

    [input]
    ts = "event_time"      # field names (defaults: ts, label, score, id, weight)
    label = "is_fraud"
    score = "p_fraud"
    require_ts = true      # a row without time is bad input (default true)
    format = "csv"         # default: from the file extension
    label_ttl = 86400      # delayed labels: prediction rows {id, ts, score} and
                           # label rows {id, ts, label}, joined by id; predictions
                           # unlabeled after label_ttl seconds are expired and counted
    labels = "labels.jsonl"   # optional: label rows in a second file (relative to the config)
    on_duplicate = "error"    # a second prediction with a waiting id: error, keep_first, keep_last

The segment field is the monitor's ``group_by``; the labels its ``pos_label`` /
``neg_label``. A ``[serve]`` table is left aside (it configures ``streameval serve``).

Checkpoints: ``checkpoint=PATH`` saves the monitor, the read position and the sizes of
the output files atomically every ``checkpoint_every`` events (at the end of the batch
that reaches it) and at the end. Restarted with the same checkpoint after being
killed, a replay cuts the outputs back to the checkpoint and goes on from there: the
outputs equal those of an uninterrupted run. The same holds after the log grew (rows
appended, to a killed run or to a finished one: the final checkpoint is the state
before the last evaluation, which the resume redoes after the new rows): the outputs
equal those of one uninterrupted run over the whole grown log. A damaged checkpoint,
one written for another config or log name, or for a log that was truncated or
rewritten since (its first bytes, up to 1 MiB, as read then, and for JSONL the 4 KiB
before the position reached, are hashed into the checkpoint and compared), is refused
(:class:`ReplayError`), never silently reset. A compressed log is recognised by its
compressed bytes: a ``.gz`` appended to with another gzip member resumes, one
compressed again as a whole is refused.

Imports: the standard library, :mod:`streameval.runconfig` (the config),
:mod:`streameval.pipeline`, :mod:`streameval.monitor`, :mod:`streameval.io`,
:mod:`streameval.events`, :mod:`streameval.report` and :mod:`streameval.scenarios`;
tqdm (optional) on first use. It never imports the CLI: ``streameval.cli`` and the
Spark engine import it.

>>> import json, os, tempfile
>>> d = tempfile.mkdtemp(); log = os.path.join(d, "log.jsonl")
>>> _ = open(log, "w").write('{"ts": 1, "label": 1, "score": 0.8}\\n{"ts": 2, "label": 0, "score": NaN}\\n')
>>> s = replay(log, os.path.join(d, "out"), on_error="skip", report=False, progress=False)
>>> s["events"], s["rejected"]
(1, 1)
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

from streameval import runconfig, scenarios
from streameval.events import DEFAULT_BATCH_SIZE, EventError
from streameval.io.checkpoint import CheckpointError, fingerprint
from streameval.io.delayed import DelayedSource
from streameval.io.sinks import (OutputLinkError, StdoutSink, WebhookSink, dumps, segment_id,
                                  write_atomic)
from streameval.io.sources import EventSource, Follow, LayoutError, SourceError
from streameval.monitor import Monitor
from streameval.pipeline import DEFAULT_CHECKPOINT_EVERY, Pipeline
from streameval.report import CurveRecorder, final_values, read_jsonl, write_report

__all__ = ["replay", "Replay", "ReplayError", "summarize", "fired_and_resolved",
           "format_summary", "load_replay_config", "run_scenario", "DEFAULT_CHECKPOINT_EVERY",
           "DEFAULT_POLL"]

#: the ``[input]`` keys that bound what a reader holds (given to the source)
READ_BOUNDS = ("max_line_bytes", "max_expansion")

#: seconds between looks at a followed log when it has nothing new (``--poll``)
DEFAULT_POLL = 0.5


class ReplayError(Exception):
    """A replay that cannot go on: bad input, config or checkpoint (exit status 2)."""


# ------------------------------------------------------------------------- config


def _monitor(run, label_free=False):
    """The Monitor of a parsed config: its ``[monitor]`` table, or the default one (with
    its label-free metrics when predictions come before their labels)."""
    if run.monitor is None:
        return Monitor.default(label_free=label_free)
    return Monitor.from_config(run.monitor, label_free=label_free)


def _build(run):
    """Monitor, FieldMap, format and delayed-label options of a parsed config."""
    delayed = None
    if run.input.get("label_ttl") is not None:  # (Spark takes no delayed-label keys)
        delayed = {"label_ttl": run.input["label_ttl"], "labels_path": run.labels_path(),
                   "on_duplicate": run.input["on_duplicate"]}
    monitor = _monitor(run, label_free=delayed is not None)
    fields = run.fields(monitor)
    if delayed is not None:
        # every prediction reaches the Monitor when it is made, for its label-free
        # metrics (a monitor without any counts its labels only, as they join)
        delayed["predictions"] = bool(monitor.label_free)
    return monitor, fields, run.input["format"], delayed


def load_replay_config(config, config_dir=None, *, edge="replay"):
    """``(monitor, fields, format, delayed)`` of a replay config (a TOML path, a dict or
    None: the default monitor), as ``streameval replay`` reads it (``edge``: the edge
    whose keys are accepted, :data:`streameval.runconfig.EDGES`); ``ValueError``
    naming the bad key. The Spark engine reads its config with it.

    ``delayed`` is None without ``[input] label_ttl``, else ``{"label_ttl",
    "labels_path", "on_duplicate", "predictions"}`` (``predictions``: the Monitor has
    label-free metrics, which count every prediction when it is made).
    """
    return _build(runconfig.parse(config, edge, config_dir))



def _log_identity(log):
    """What identifies a log in a checkpoint's fingerprint: its name. Its content is
    recognised by the source's state (:meth:`streameval.io.EventSource.to_state`: a
    hash of the prefix read), so that a log that grew since is still the same."""
    if str(log) == "-":
        raise ValueError("--checkpoint needs a log file, not stdin")
    return {"name": Path(log).name}


# ------------------------------------------------------------------------- replay


def _progress(enabled, initial):
    if not enabled:
        return None
    try:
        stream_is_tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        stream_is_tty = False
    if not stream_is_tty:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=None, initial=initial, unit="ev", unit_scale=True, file=sys.stderr,
                desc="replay", leave=False, dynamic_ncols=True)


class Replay:
    """A replay set up and ready to run: config read, source, outputs and checkpoint
    wired into a :class:`~streameval.pipeline.Pipeline` (``self.pipeline``).

    ``Replay(log, out, **options).run()`` is :func:`replay` (same parameters, same
    summary, same errors: :class:`ReplayError` from the constructor for a bad config,
    from :meth:`run` for bad input or a checkpoint that cannot be used). Between the
    two, ``pipeline.on_batch`` may be set, e.g. to stop the run after some batch.

    With ``follow=True`` the log is read as it grows (``replay --follow``) until
    :meth:`stop` is called (from another thread, or a callback), or, when :meth:`run`
    runs in the main thread, until SIGINT or SIGTERM.

    ``edge`` names the edge whose ``[input]`` keys the config may hold (``"replay"``, or
    ``"run"`` for a scenario; :data:`streameval.runconfig.EDGES`): it only changes which
    edge a refused key's message names.
    """

    def __init__(self, log, out, *, config=None, on_error="fail", checkpoint=None,
                 checkpoint_every=DEFAULT_CHECKPOINT_EVERY, report=True, progress=True,
                 title=None, config_name=None, config_dir=None, webhooks=(), print_alerts=False,
                 follow=False, poll=DEFAULT_POLL, edge="replay", allow_empty=False):
        self.t_start = time.perf_counter()
        self.log, self.out = log, Path(out)
        self.report, self.progress, self.title = report, progress, title
        self.checkpoint = checkpoint
        if on_error not in ("fail", "skip"):
            raise ReplayError(f"--on-error {on_error!r}: expected fail or skip")
        if checkpoint_every is not None and (not isinstance(checkpoint_every, int) or checkpoint_every < 1):
            raise ReplayError(f"--checkpoint-every {checkpoint_every!r}: must be an integer >= 1")
        if isinstance(poll, bool) or not isinstance(poll, (int, float)) or not 0 < poll <= 3600:
            raise ReplayError(f"--poll {poll!r}: must be a number of seconds > 0 (at most 3600)")
        if follow and str(log) == "-":
            raise ReplayError("--follow follows a file by its name; stdin is read until it "
                              "closes (leave --follow out)")
        self.follow = bool(follow)
        self._stop = threading.Event()
        self.on_error = on_error
        try:
            run = runconfig.parse(config, edge, config_dir)
            doc = run.doc
            monitor, fields, fmt, delayed = _build(run)
        except ValueError as e:
            where = config_name or ("config" if isinstance(config, dict) else str(config))
            msg = str(e)
            raise ReplayError(msg if msg.startswith(where) else f"{where}: {msg}") from None
        self.delayed = delayed
        self.allow_empty = bool(allow_empty or run.input.get("allow_empty"))
        if str(log) != "-" and not Path(log).exists():
            raise ReplayError(f"{log}: no such file")
        if str(log) != "-" and Path(log).is_dir():
            raise ReplayError(f"{log}: is a directory, not a log file")
        fp = None
        if checkpoint is not None:
            try:
                ident = {"log": _log_identity(log), "on_error": on_error, "config": doc,
                         "delayed": None if delayed is None else {
                             "label_ttl": delayed["label_ttl"], "on_duplicate": delayed["on_duplicate"],
                             "labels": None if delayed["labels_path"] is None
                             else _log_identity(delayed["labels_path"])}}
            except (OSError, ValueError) as e:
                raise ReplayError(f"--checkpoint: {e}") from None
            fp = fingerprint(ident)
        self.hooks = [WebhookSink(url) for url in webhooks]
        sinks = list(self.hooks)
        # the report's ROC/PR/confusion/score views: taken from the Monitor when an
        # alert fires and at the end (its score order is in no output file)
        self.curves = CurveRecorder(lambda: self.pipeline.monitor) if report else None
        if self.curves is not None:
            sinks.append(self.curves)
        if print_alerts:
            sinks.append(StdoutSink())
        outputs = {"metrics": self.out / "metrics.jsonl", "alerts": self.out / "alerts.jsonl"}
        if on_error == "skip":
            outputs["rejected"] = self.out / "rejected.jsonl"
        follow_opts = None
        if self.follow:
            follow_opts = Follow(poll=float(poll), stop=self._stop.is_set,
                                 notice=lambda m: print(f"streameval replay: {m}", file=sys.stderr,
                                                        flush=True))
        try:
            source = self._source(log, fields, fmt, delayed, on_error, checkpoint, checkpoint_every,
                                  follow_opts, {k: run.input[k] for k in READ_BOUNDS})
        except ValueError as e:
            raise ReplayError(f"{'-' if str(log) == '-' else log}: {e}") from None
        self.pipeline = Pipeline(monitor, source, outputs=outputs, sinks=sinks,
                                 checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                                 kind="replay", fingerprint=fp, on_error=on_error)

    def stop(self):
        """End a followed replay (``follow=True``) after the lines read so far: the run
        then ends as at the end of a log (final checkpoint, flush, summary)."""
        self._stop.set()

    @staticmethod
    def _source(log, fields, fmt, delayed, on_error, checkpoint, checkpoint_every, follow=None,
                bounds=None):
        opts = {"format": fmt, "on_error": on_error, "follow": follow, **(bounds or {})}
        if checkpoint is not None and checkpoint_every:
            opts["batch_size"] = min(DEFAULT_BATCH_SIZE, checkpoint_every)
        if delayed is None:
            return EventSource(log, fields, **opts)
        dup = delayed["on_duplicate"]
        if on_error == "skip" and dup == "error":
            dup = "keep_first"  # the second prediction goes to rejected.jsonl
        return DelayedSource(log, fields, label_ttl=delayed["label_ttl"],
                             labels_path=delayed["labels_path"], on_duplicate=dup,
                             predictions=delayed.get("predictions", False), **opts)

    def run(self):
        """Run (or resume) the replay; write summary.json and the report; return the summary."""
        handlers = self._catch_signals() if self.follow else {}
        try:
            return self._resume_and_run()
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _resume_and_run(self):
        pipe, out, log = self.pipeline, self.out, self.log
        try:
            state = pipe.resume()
        except CheckpointError as e:
            raise ReplayError(str(e)) from None
        except (KeyError, TypeError, ValueError) as e:
            raise ReplayError(f"checkpoint {self.checkpoint}: unusable state ({e})") from None
        out.mkdir(parents=True, exist_ok=True)
        for name in ("summary.json", "report.html"):  # a former run's: written at the end
            (out / name).unlink(missing_ok=True)
        try:
            pipe.open()
        except OutputLinkError as e:
            raise ReplayError(str(e)) from None
        except ValueError as e:
            raise ReplayError(f"checkpoint {self.checkpoint}: {e}") from None
        bar = None if pipe.done and not self.follow else _progress(self.progress, pipe.monitor.n)
        user = pipe.on_batch
        if bar is not None:

            def on_batch(p, batch):
                bar.update(len(batch))
                return None if user is None else user(p, batch)

            pipe.on_batch = on_batch
        return self._run(pipe, log, bar, user, state)

    def _catch_signals(self):
        """SIGINT and SIGTERM end a followed replay cleanly (:meth:`stop`); a second
        one interrupts it at once. Returns the former handlers (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def on_signal(signum, frame):
            if self._stop.is_set():
                raise KeyboardInterrupt
            self._stop.set()

        return {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _run(self, pipe, log, bar, user, state):
        try:
            counts = pipe.run()
        except ValueError as e:  # EventError (a bad row), or a log that cannot be read
            if isinstance(e, SourceError):  # names its file (the log, or the labels file)
                raise ReplayError(str(e)) from None
            name = "-" if str(log) == "-" else str(log)
            if isinstance(e, EventError):
                # skip sets bad rows aside; a log whose layout is wrong has no good row
                row = not isinstance(e, LayoutError)
                hint = (" (use --on-error skip to set bad rows aside)"
                        if self.on_error == "fail" and row else "")
                raise ReplayError(f"{name}: {e}{hint}") from None
            raise ReplayError(f"{name}: {e}") from None
        finally:
            if bar is not None:
                bar.close()
                pipe.on_batch = user
        if not self.allow_empty and not self.follow and counts["rows"] == counts["rejected"]:
            raise ReplayError(empty_message(log, counts))
        return self._summary(counts, resumed=state is not None)

    def _summary(self, counts, resumed):
        return summarize(self.out, self.log, counts, t_start=self.t_start, resumed=resumed,
                         hooks=self.hooks, report=self.report, title=self.title,
                         delayed=self.delayed,
                         rules=[r.to_config() for r in self.pipeline.monitor.rules],
                         curves=self.curves)


def empty_message(log, counts):
    """The one line of a replay that read no row it could count."""
    name = "-" if str(log) == "-" else str(log)
    n = counts["rows"]
    found = ("no rows (an empty log, or only blank lines or a header)" if not n else
             f"all {n:,} rows were rejected (reasons in rejected.jsonl)")
    return (f"{name}: no events: {found}; pass --allow-empty (or [input] allow_empty = "
            "true) to accept a log without events")


def summarize(out, log, counts, *, t_start, resumed=False, hooks=(), report=True, title=None,
              delayed=None, rules=None, curves=None):
    """Write ``summary.json`` (and ``report.html`` with ``report``) for the rows and
    alerts a replay wrote to ``out``; return the summary (the Spark engine's replay
    writes the same one). ``rules``: the monitor's rules (config tables), whose
    thresholds the report draws; ``curves``: a :class:`~streameval.report.CurveRecorder`
    whose score summaries the report shows (the whole stream's and the alerting
    segments' at the end, and those taken when alerts fired)."""
    out = Path(out)
    metric_rows = read_jsonl(out / "metrics.jsonl")
    alert_rows = read_jsonl(out / "alerts.jsonl")
    fired = [a for a in alert_rows if a.get("state") == "firing"]
    episodes = fired_and_resolved(alert_rows)
    elapsed = time.perf_counter() - t_start
    finals = final_values(metric_rows)
    # label coverage (predictions counted before their labels): each segment's last
    # (by typed JSON text: segments 1 and "1", or None and "null", are two)
    coverage = {segment_id(r.get("segment")): r["coverage"] for r in metric_rows
                if "coverage" in r}
    summary = {
        "log": str(log),
        "out": str(out),
        **counts,
        # (an evaluation's rows share n and t; predictions move t, not n)
        "evaluations": len({(r.get("stream_n", r.get("n")), r.get("t")) for r in metric_rows}),
        "alert_transitions": len(alert_rows),
        "alerts_fired": len(fired),
        "alerts_resolved": sum(e["resolved_n"] is not None for e in episodes),
        "fired": episodes,
        "elapsed_seconds": round(elapsed, 3),
        "resumed": resumed,
        "webhook_failures": sum(h.failures for h in hooks),
        "final": [{"segment": list(seg) if isinstance(seg, tuple) else seg, **v,
                   **({"coverage": coverage[segment_id(seg)]}
                      if segment_id(seg) in coverage else {})}
                  for seg, v in finals.items()],
    }
    _write_json(out / "summary.json", summary)
    summary["report"] = None
    if report:
        try:
            facts = {"log": summary["log"], "events": counts["events"], "rows read": counts["rows"],
                     "rejected rows": counts["rejected"], "alerts fired": len(fired)}
            if delayed is not None:
                facts["expired predictions"] = counts["expired"]
                facts["orphan labels"] = counts["orphans"]
                facts["unlabeled at the end"] = counts["unlabeled"]
            alerting = list(dict.fromkeys(a.get("segment") for a in fired))
            summary["report"] = str(write_report(
                metric_rows, alert_rows, out,
                title=title or f"streameval replay of {Path(str(log)).name}", summary=facts,
                rules=rules,
                curves=None if curves is None else curves.curves(alerting)))
        except ImportError as e:
            print(f"streameval: warning: no report: {e}", file=sys.stderr)
    return summary


def fired_and_resolved(alert_rows):
    """The alerts that fired, in order: ``[{"rule", "n", "segment", "resolved_n"}]``,
    ``resolved_n`` the ``n`` of the transition that resolved it (the next ``resolved``
    of the same rule and segment), None if it was still firing at the end; plus
    ``message``, the firing transition's explanation, when it has one.

    >>> fired_and_resolved([{"rule": "r", "state": "pending", "n": 5, "segment": None},
    ...                     {"rule": "r", "state": "firing", "n": 7, "segment": None},
    ...                     {"rule": "r", "state": "resolved", "n": 9, "segment": None},
    ...                     {"rule": "r", "state": "firing", "n": 12, "segment": "a"}])
    [{'rule': 'r', 'n': 7, 'segment': None, 'resolved_n': 9}, {'rule': 'r', 'n': 12, 'segment': 'a', 'resolved_n': None}]
    """
    out, open_ = [], {}
    for a in alert_rows:
        key = (a.get("rule"), json.dumps(a.get("segment"), sort_keys=True, default=str))
        state = a.get("state")
        if state == "firing":
            open_[key] = ep = {"rule": a.get("rule"), "n": a.get("n"), "segment": a.get("segment"),
                               "resolved_n": None}
            if a.get("message"):  # the alert's explanation, when the record has one
                ep["message"] = a["message"]
            out.append(ep)
        elif state == "resolved" and key in open_:
            open_.pop(key)["resolved_n"] = a.get("n")
    return out


def replay(log, out, *, config=None, on_error="fail", checkpoint=None,
           checkpoint_every=DEFAULT_CHECKPOINT_EVERY, report=True, progress=True,
           title=None, config_name=None, config_dir=None, webhooks=(), print_alerts=False,
           follow=False, poll=DEFAULT_POLL, allow_empty=False):
    """Replay ``log`` through a monitor into ``out``; return the summary dict.

    The library form of ``streameval replay`` (see the module docstring for the
    outputs): :class:`Replay` set up and run, which configures a
    :class:`~streameval.pipeline.Pipeline`. Raises :class:`ReplayError` for bad input,
    config or checkpoint.

    Runtime complexity: `O(rows)` reading plus the monitor's cost per event; memory
    `O(batch)` plus the monitor's state.

    Parameters
    ----------
    log : str or Path
        The event log (``"-"``: stdin).
    out : str or Path
        Output directory (created).
    config : str, Path or dict, optional
        A config TOML file (or its parsed content); None: the default monitor.
    on_error : {"fail", "skip"}
        Stop at the first bad row, or write bad rows to ``rejected.jsonl`` and go on.
    checkpoint : str or Path, optional
        Checkpoint file: resumed from when it exists (the log may have grown since),
        saved every ``checkpoint_every`` events and at the end.
    report : bool
        Write ``report.html``.
    progress : bool
        Show a progress bar when stderr is a terminal and tqdm is installed.
    title : str, optional
        Heading of the report.
    config_name, config_dir : optional
        For a ``config`` dict: the name its errors are reported under (default
        ``"config"``) and the directory its relative paths start from.
    webhooks : sequence of str
        URLs each alert transition is POSTed to as JSON (retries with backoff; a
        delivery that still fails is counted in the summary's ``webhook_failures``).
        After a resume, transitions since the last checkpoint are sent again (at least
        once).
    print_alerts : bool
        Also write each alert transition to stdout as a JSON line.
    follow : bool
        Read the log as it grows, like ``tail -F`` (a plain JSONL or CSV file; see the
        module docstring), until SIGINT or SIGTERM (in the main thread; elsewhere use
        :class:`Replay` and its ``stop()``).
    poll : float
        With ``follow``: seconds between looks at the log when it has nothing new.
    allow_empty : bool
        Accept a log without events (empty, or every row rejected); otherwise (and
        without ``[input] allow_empty``) that is a :class:`ReplayError`.
    """
    return Replay(log, out, config=config, on_error=on_error, checkpoint=checkpoint,
                  checkpoint_every=checkpoint_every, report=report, progress=progress,
                  title=title, config_name=config_name, config_dir=config_dir,
                  webhooks=webhooks, print_alerts=print_alerts, follow=follow, poll=poll,
                  allow_empty=allow_empty).run()


def _write_json(path, obj):
    write_atomic(path, (dumps(obj) + "\n").encode("utf-8"))  # a link at path: replaced


# ------------------------------------------------------------------------ summary


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.6g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def format_summary(summary, max_segments=6):
    """The summary table printed at the end of a replay (plain text)."""
    lines = []
    c = summary
    lines.append(f"streameval: {c['log']} -> {c['out']}")
    rate = c["events"] / c["elapsed_seconds"] if c["elapsed_seconds"] else float("inf")
    lines.append(f"  events      {_fmt(c['events'])}   (rows read {_fmt(c['rows'])}, "
                 f"rejected {_fmt(c['rejected'])})")
    if c.get("expired") or c.get("orphans") or c.get("unlabeled"):
        lines.append(f"  delayed     expired predictions {_fmt(c['expired'])}, "
                     f"orphan labels {_fmt(c['orphans'])}, "
                     f"still unlabeled at the end {_fmt(c['unlabeled'])}")
    fired = c["fired"]
    resolved = sum(a.get("resolved_n") is not None for a in fired)
    tally = (f" ({resolved} resolved, {len(fired) - resolved} still firing at the end)"
             if fired else "")
    cov = next((f["coverage"] for f in c["final"] if f["segment"] is None
                and "coverage" in f), None)
    if cov is not None:
        lines.append(f"  labels      {_fmt(cov['labelled'])} of {_fmt(cov['predictions'])} "
                     f"predictions labelled, {_fmt(cov['pending'])} pending, "
                     f"{_fmt(cov['expired'])} expired")
    lines.append(f"  evaluated   {_fmt(c['evaluations'])} times; alerts fired: "
                 f"{c['alerts_fired']}{tally}")
    for a in fired[:10]:
        seg = "" if a["segment"] is None else f" [segment {a['segment']}]"
        end = ("still firing at the end" if a.get("resolved_n") is None
               else f"resolved at n={_fmt(a['resolved_n'])}")
        lines.append(f"              {a['rule']}{seg} at n={_fmt(a['n'])}, {end}")
        if a.get("message"):
            lines.append(f"                {a['message']}")
    if len(c["fired"]) > 10:
        lines.append(f"              ... and {len(c['fired']) - 10} more (alerts.jsonl)")
    lines.append(f"  elapsed     {c['elapsed_seconds']:.2f} s ({rate:,.0f} events/s)"
                 + ("  [resumed from checkpoint]" if c.get("resumed") else ""))
    finals = c["final"]
    if finals:
        shown = finals[:max_segments]
        names = []
        for f in shown:
            for k in f["values"]:
                if k not in names:
                    names.append(k)
        heads = ["all events" if f["segment"] is None else json.dumps(f["segment"])
                 if isinstance(f["segment"], list) else str(f["segment"]) for f in shown]
        w0 = max([len("final values")] + [len(n) for n in names])
        widths = [max(12, len(h)) for h in heads]
        lines.append("")
        lines.append("  " + "final values".ljust(w0) + "".join("  " + h.rjust(w) for h, w in zip(heads, widths)))
        for name in names:
            cells = "".join("  " + _fmt(f["values"].get(name)).rjust(w) for f, w in zip(shown, widths))
            lines.append("  " + name.ljust(w0) + cells)
        if len(finals) > max_segments:
            lines.append(f"  ({len(finals) - max_segments} more segments in summary.json)")
    files = ["metrics.jsonl", "alerts.jsonl"]
    if Path(c["out"], "rejected.jsonl").exists():
        files.append("rejected.jsonl")
    files.append("summary.json")
    if c.get("report"):
        files.append("report.html")
    lines.append("")
    lines.append(f"  wrote {', '.join(files)} in {c['out']}")
    return "\n".join(lines)


# ------------------------------------------------------------------------ scenario


def run_scenario(path, out=None, *, check=False, **options):
    """Run a scenario file (see :mod:`streameval.scenarios`); return ``(summary, failures)``.

    The stream is materialised as ``out/stream.jsonl`` (or the bundled log is used)
    and replayed with the scenario's config. ``failures`` lists how the alerts
    differed from the ``[[expect]]`` tables (empty when they matched).
    """
    try:
        sc = scenarios.load(path)
    except ValueError as e:
        raise ReplayError(str(e)) from None
    out = Path(out) if out is not None else Path("streameval-out") / _slug(sc.name)
    try:
        log = scenarios.materialize(sc, out)
    except ValueError as e:
        raise ReplayError(str(e)) from None
    config = dict(sc.config)
    if sc.delayed and "label_ttl" not in config.get("input", {}):
        raise ReplayError(f"{path}: the stream has delayed labels; set [input] label_ttl")
    # relative paths in [input] (a labels file) start from the scenario's directory
    summary = Replay(log, out, config=config, config_name=str(path), config_dir=sc.path.parent,
                     title=f"scenario {sc.name}", edge="run", **options).run()
    failures = scenarios.check(sc, read_jsonl(out / "alerts.jsonl")) if check else []
    summary["scenario"] = sc.name
    return summary, failures


def _slug(name):
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "scenario"
