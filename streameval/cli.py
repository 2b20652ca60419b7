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
* ``report.html`` and one PNG per metric (needs ``streameval[report]``).

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

Config file (TOML): the ``[monitor]`` table (schema in :mod:`streameval.config`) and
an optional ``[input]`` table saying how to read the log::

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
``neg_label``.

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

Imports: the standard library, :mod:`streameval.pipeline` (which drives everything
below it), :mod:`streameval.config`, :mod:`streameval.monitor`, :mod:`streameval.io`,
:mod:`streameval.events`, :mod:`streameval.report`, :mod:`streameval.scenarios` and
:mod:`streameval.service` (the last three and tqdm on first use); it is the top layer,
and nothing imports it.

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
import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

from streameval.pipeline import DEFAULT_CHECKPOINT_EVERY

__all__ = ["main", "build_parser", "replay", "Replay", "run_scenario", "ReplayError", "summarize",
           "load_replay_config",
           "DEFAULT_CHECKPOINT_EVERY"]
#: seconds between looks at a followed log when it has nothing new (``--poll``)
DEFAULT_POLL = 0.5
#: the modules of the 'serve' extra
_SERVE_EXTRA = ("starlette", "uvicorn", "prometheus_client")
_INPUT_KEYS = {"ts", "label", "score", "id", "weight", "require_ts", "format",
               "label_ttl", "labels", "on_duplicate", "max_future"}

EXIT_OK, EXIT_ALERT, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class ReplayError(Exception):
    """A replay that cannot go on: bad input, config or checkpoint (exit status 2)."""


# ------------------------------------------------------------------------- config


def _load_doc(config, config_dir=None):
    """``(document, directory for relative paths)`` from a dict, a TOML path or None."""
    if config is None:
        return {}, config_dir
    if isinstance(config, dict):
        return config, config_dir
    from streameval.config import load_toml

    return load_toml(config), Path(config).resolve().parent


def _split_config(doc):
    """``(monitor table or None, input table)`` from a config document."""
    from streameval.config import config_tables

    table, inp = config_tables(doc)
    extra = sorted(set(inp) - _INPUT_KEYS)
    if extra:
        raise ValueError(f"input: unknown key(s) {', '.join(extra)}; expected one of {sorted(_INPUT_KEYS)}")
    return table, inp


def _build(doc, base_dir):
    """Monitor, FieldMap and delayed-label options from a config document."""
    from streameval.config import field_map, label_ttl
    from streameval.monitor import Monitor

    table, inp = _split_config(doc)
    monitor = Monitor.default() if table is None else Monitor.from_config(table)
    fields = field_map(inp, monitor, require_ts=True)
    fmt = inp.get("format")
    delayed = None
    ttl = label_ttl(inp)
    if ttl is not None:
        labels = inp.get("labels")
        if labels is not None:
            labels = Path(labels)
            if not labels.is_absolute() and base_dir is not None:
                labels = base_dir / labels
        dup = inp.get("on_duplicate", "error")
        if dup not in ("error", "keep_first", "keep_last"):
            raise ValueError(f"input.on_duplicate = {dup!r}: expected error, keep_first or keep_last")
        delayed = {"label_ttl": ttl, "labels_path": labels, "on_duplicate": dup}
    elif "labels" in inp or "on_duplicate" in inp:
        raise ValueError("input.labels and input.on_duplicate need input.label_ttl (delayed labels)")
    return monitor, fields, fmt, delayed


def load_replay_config(config, config_dir=None):
    """``(monitor, fields, format, delayed)`` of a replay config (a TOML path, a dict or
    None: the default monitor), as ``streameval replay`` reads it; ``ValueError``
    naming the bad key. The Spark engine reads its config with it."""
    doc, base_dir = _load_doc(config, config_dir)
    return _build(doc, base_dir)


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
    """

    def __init__(self, log, out, *, config=None, on_error="fail", checkpoint=None,
                 checkpoint_every=DEFAULT_CHECKPOINT_EVERY, report=True, progress=True,
                 title=None, config_name=None, config_dir=None, webhooks=(), print_alerts=False,
                 follow=False, poll=DEFAULT_POLL):
        from streameval.io.checkpoint import fingerprint
        from streameval.io.sinks import StdoutSink, WebhookSink
        from streameval.pipeline import Pipeline

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
            doc, base_dir = _load_doc(config, config_dir)
            monitor, fields, fmt, delayed = _build(doc, base_dir)
        except ValueError as e:
            where = config_name or ("config" if isinstance(config, dict) else str(config))
            msg = str(e)
            raise ReplayError(msg if msg.startswith(where) else f"{where}: {msg}") from None
        self.delayed = delayed
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
        if print_alerts:
            sinks.append(StdoutSink())
        outputs = {"metrics": self.out / "metrics.jsonl", "alerts": self.out / "alerts.jsonl"}
        if on_error == "skip":
            outputs["rejected"] = self.out / "rejected.jsonl"
        follow_opts = None
        if self.follow:
            from streameval.io.sources import Follow

            follow_opts = Follow(poll=float(poll), stop=self._stop.is_set,
                                 notice=lambda m: print(f"streameval replay: {m}", file=sys.stderr,
                                                        flush=True))
        try:
            source = self._source(log, fields, fmt, delayed, on_error, checkpoint, checkpoint_every,
                                  follow_opts)
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
    def _source(log, fields, fmt, delayed, on_error, checkpoint, checkpoint_every, follow=None):
        opts = {"format": fmt, "on_error": on_error, "follow": follow}
        if checkpoint is not None and checkpoint_every:
            from streameval.events import DEFAULT_BATCH_SIZE

            opts["batch_size"] = min(DEFAULT_BATCH_SIZE, checkpoint_every)
        if delayed is None:
            from streameval.io.sources import EventSource

            return EventSource(log, fields, **opts)
        from streameval.io.delayed import DelayedSource

        dup = delayed["on_duplicate"]
        if on_error == "skip" and dup == "error":
            dup = "keep_first"  # the second prediction goes to rejected.jsonl
        return DelayedSource(log, fields, label_ttl=delayed["label_ttl"],
                             labels_path=delayed["labels_path"], on_duplicate=dup, **opts)

    def run(self):
        """Run (or resume) the replay; write summary.json and the report; return the summary."""
        handlers = self._catch_signals() if self.follow else {}
        try:
            return self._resume_and_run()
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _resume_and_run(self):
        from streameval.io.checkpoint import CheckpointError

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
            from streameval.events import EventError
            from streameval.io.sources import SourceError

            if isinstance(e, SourceError):  # names its file (the log, or the labels file)
                raise ReplayError(str(e)) from None
            name = "-" if str(log) == "-" else str(log)
            if isinstance(e, EventError):
                hint = " (use --on-error skip to set bad rows aside)" if self.on_error == "fail" else ""
                raise ReplayError(f"{name}: {e}{hint}") from None
            raise ReplayError(f"{name}: {e}") from None
        finally:
            if bar is not None:
                bar.close()
                pipe.on_batch = user
        return self._summary(counts, resumed=state is not None)

    def _summary(self, counts, resumed):
        return summarize(self.out, self.log, counts, t_start=self.t_start, resumed=resumed,
                         hooks=self.hooks, report=self.report, title=self.title,
                         delayed=self.delayed,
                         rules=[r.to_config() for r in self.pipeline.monitor.rules])


def summarize(out, log, counts, *, t_start, resumed=False, hooks=(), report=True, title=None,
              delayed=None, rules=None):
    """Write ``summary.json`` (and ``report.html`` with ``report``) for the rows and
    alerts a replay wrote to ``out``; return the summary (the Spark engine's replay
    writes the same one). ``rules``: the monitor's rules (config tables), whose
    thresholds the report draws."""
    from streameval.report import final_values, read_jsonl

    out = Path(out)
    metric_rows = read_jsonl(out / "metrics.jsonl")
    alert_rows = read_jsonl(out / "alerts.jsonl")
    fired = [a for a in alert_rows if a.get("state") == "firing"]
    episodes = fired_and_resolved(alert_rows)
    elapsed = time.perf_counter() - t_start
    finals = final_values(metric_rows)
    summary = {
        "log": str(log),
        "out": str(out),
        **counts,
        "evaluations": len({r.get("stream_n", r.get("n")) for r in metric_rows}),
        "alert_transitions": len(alert_rows),
        "alerts_fired": len(fired),
        "alerts_resolved": sum(e["resolved_n"] is not None for e in episodes),
        "fired": episodes,
        "elapsed_seconds": round(elapsed, 3),
        "resumed": resumed,
        "webhook_failures": sum(h.failures for h in hooks),
        "final": [{"segment": seg, **v} for seg, v in finals.items()],
    }
    _write_json(out / "summary.json", summary)
    summary["report"] = None
    if report:
        try:
            from streameval.report import write_report

            facts = {"log": summary["log"], "events": counts["events"], "rows read": counts["rows"],
                     "rejected rows": counts["rejected"], "alerts fired": len(fired)}
            if delayed is not None:
                facts["expired predictions"] = counts["expired"]
                facts["orphan labels"] = counts["orphans"]
                facts["unlabeled at the end"] = counts["unlabeled"]
            summary["report"] = str(write_report(
                metric_rows, alert_rows, out,
                title=title or f"streameval replay of {Path(str(log)).name}", summary=facts,
                rules=rules))
        except ImportError as e:
            print(f"streameval: warning: no report: {e}", file=sys.stderr)
    return summary


def fired_and_resolved(alert_rows):
    """The alerts that fired, in order: ``[{"rule", "n", "segment", "resolved_n"}]``,
    ``resolved_n`` the ``n`` of the transition that resolved it (the next ``resolved``
    of the same rule and segment), None if it was still firing at the end.

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
            out.append(ep)
        elif state == "resolved" and key in open_:
            open_.pop(key)["resolved_n"] = a.get("n")
    return out


def replay(log, out, *, config=None, on_error="fail", checkpoint=None,
           checkpoint_every=DEFAULT_CHECKPOINT_EVERY, report=True, progress=True,
           title=None, config_name=None, config_dir=None, webhooks=(), print_alerts=False,
           follow=False, poll=DEFAULT_POLL):
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
        Write ``report.html`` and the PNGs.
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
    """
    return Replay(log, out, config=config, on_error=on_error, checkpoint=checkpoint,
                  checkpoint_every=checkpoint_every, report=report, progress=progress,
                  title=title, config_name=config_name, config_dir=config_dir,
                  webhooks=webhooks, print_alerts=print_alerts, follow=follow, poll=poll).run()


def _write_json(path, obj):
    from streameval.io.sinks import dumps

    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(dumps(obj) + "\n", encoding="utf-8")
    os.replace(tmp, path)


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
    lines.append(f"  evaluated   {_fmt(c['evaluations'])} times; alerts fired: "
                 f"{c['alerts_fired']}{tally}")
    for a in fired[:10]:
        seg = "" if a["segment"] is None else f" [segment {a['segment']}]"
        end = ("still firing at the end" if a.get("resolved_n") is None
               else f"resolved at n={_fmt(a['resolved_n'])}")
        lines.append(f"              {a['rule']}{seg} at n={_fmt(a['n'])}, {end}")
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
        heads = ["all events" if f["segment"] is None else str(f["segment"]) for f in shown]
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
    from streameval import scenarios

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
    summary = replay(log, out, config=config, config_name=str(path), config_dir=sc.path.parent,
                     title=f"scenario {sc.name}", **options)
    from streameval.report import read_jsonl

    failures = scenarios.check(sc, read_jsonl(out / "alerts.jsonl")) if check else []
    summary["scenario"] = sc.name
    return summary, failures


def _slug(name):
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "scenario"


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
    from streameval import __version__

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
                        "event time, see README 'Running on Spark')")
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
    try:
        from streameval.service import add_serve_arguments
    except ImportError:  # pragma: no cover - the service module is part of the package
        add_serve_arguments = None
    if add_serve_arguments is not None:
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
    try:
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
    from streameval.events import EventError

    try:
        return spark_replay(args.log, args.out, args.config, spark=spark,
                            on_error=args.on_error, report=not args.no_report)
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
    from streameval.service import run_from_args

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
        import traceback

        traceback.print_exc()
        print(f"streameval {args.command}: internal error (a bug; the traceback above "
              "says where)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
