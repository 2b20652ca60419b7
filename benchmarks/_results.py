"""Benchmark results as JSON: what every script in ``benchmarks/`` writes with ``--json``.

A result file holds one run of one script: its tables (the rows it prints), its headline
figures (a value beside its peer's), its curves (for plots), the parameters it ran with,
the machine (CPU model, cores, RAM), the versions of Python and of the libraries compared,
and the date. The documentation's performance page and the README's headline table are
generated from these files (``docs/hooks/performance.py``), so a page never quotes a
figure that no file holds.

Usage in a script::

    from _results import Results, add_json_argument

    ap = argparse.ArgumentParser(...)
    add_json_argument(ap, __file__)            # --json PATH, default results/<script>.json
    args = ap.parse_args(argv)
    res = Results(__file__, args)              # parameters: the parsed arguments
    t = res.table("per_event", "Per-event update", ["metric", "ns/event", "river ns/event"])
    t.add("Precision", 142.0, 197.0)
    res.figure("precision_update", "Precision.update", 142.0, "ns/event",
               peer="river Precision.update", peer_value=197.0, better="lower")
    res.write(args.json)

It also holds :func:`proc_status_kb`, how the scripts read another process's memory.

Imports only the standard library (and, for versions, the installed packages' metadata).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"

#: Distributions whose versions every result file records (absent ones are skipped).
VERSIONED = ("numpy", "river", "scikit-learn", "streameval", "sortedcontainers")


def default_path(script: str) -> Path:
    """``benchmarks/results/<script name without .py>.json``."""
    return RESULTS_DIR / (Path(script).stem + ".json")


def add_json_argument(parser, script: str):
    """Add ``--json PATH`` (default :func:`default_path`; ``--json -`` writes nothing)."""
    parser.add_argument(
        "--json", default=str(default_path(script)), metavar="PATH",
        help="write the results as JSON to PATH (default: %(default)s; '-' for none)")
    return parser


def machine() -> dict:
    """CPU model, logical cores, RAM (GiB), OS and load average at the start of the run."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = round(int(line.split()[1]) / 2**20, 1)
                break
    except (OSError, ValueError):
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gib": ram,
            "os": f"{platform.system()} {platform.release()}", "load_average": load}


def versions(extra=()) -> dict:
    """Versions of Python and of :data:`VERSIONED` plus ``extra`` distributions."""
    out = {"python": platform.python_version()}
    for name in (*VERSIONED, *extra):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def proc_status_kb(pid, *fields) -> dict:
    """``{field: kB}`` of the ``fields`` of ``/proc/PID/status`` the process reports
    (``VmRSS``: its resident size; ``VmHWM``: the peak of it); ``{}`` when the process is
    gone (or the system has no ``/proc``). The one reader of process memory that the
    scripts measuring another process share."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in fields:
                    out[key] = int(rest.split()[0])
                    if len(out) == len(fields):
                        break
    except OSError:
        return {}
    return out


def _plain(value):
    """A JSON-able copy of a parameter value (paths and other objects as strings)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None                     # NaN, inf: JSON has neither
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "item"):          # numpy scalars
        return _plain(value.item())
    return str(value)


def _without_json(argv):
    """The arguments ``argv`` without ``--json PATH`` (or ``--json=PATH``): where the
    results went is not part of the command that makes them."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--json":
            skip = True
        elif not a.startswith("--json="):
            out.append(a)
    return out


class Table:
    """Rows of one printed table; cells are numbers, strings or None."""

    def __init__(self, key, title, columns, note=""):
        self.key, self.title, self.columns, self.note = key, title, list(columns), note
        self.rows = []

    def add(self, *cells):
        if len(cells) != len(self.columns):
            raise ValueError(f"table {self.key!r}: {len(cells)} cells for "
                             f"{len(self.columns)} columns {self.columns}")
        self.rows.append([_plain(c) for c in cells])
        return self

    def to_dict(self):
        return {"key": self.key, "title": self.title, "columns": self.columns,
                "rows": self.rows, "note": self.note}


class Results:
    """One run's results; :meth:`write` saves them as JSON."""

    def __init__(self, script, args=None, *, parameters=None, extra_versions=()):
        self.script = Path(script).name
        params = dict(vars(args)) if args is not None else {}
        params.pop("json", None)
        params.update(parameters or {})
        self.parameters = {k: _plain(v) for k, v in params.items()}
        self.command = "python benchmarks/" + self.script + "".join(
            " " + a for a in _without_json(sys.argv[1:]))
        self.started = _dt.datetime.now(_dt.timezone.utc)
        #: the run's wall time when its tables come from an earlier run's saved streams
        #: (``started`` is then that run's start); None: from ``started`` to now
        self.elapsed: float | None = None
        self.machine = machine()
        self.versions = versions(extra_versions)
        self.tables: list[Table] = []
        self.figures: dict[str, dict] = {}
        self.series: list[dict] = []

    def table(self, key, title, columns, note=""):
        t = Table(key, title, columns, note)
        self.tables.append(t)
        return t

    def figure(self, key, label, value, unit, *, peer=None, peer_value=None,
               better="higher", note=""):
        """A headline figure: ``value`` of streameval beside ``peer_value`` of ``peer``
        (same unit, same run); ``better`` says which way is good."""
        if better not in ("higher", "lower"):
            raise ValueError(f"better = {better!r}: must be 'higher' or 'lower'")
        self.figures[key] = {"label": label, "value": _plain(value), "unit": unit,
                             "peer": peer, "peer_value": _plain(peer_value),
                             "better": better, "note": note}

    def curve(self, key, title, x_label, y_label, x, lines, *, log_x=False, log_y=False):
        """A curve for a plot: ``lines`` maps a legend label to y values over ``x``."""
        for name, ys in lines.items():
            if len(ys) != len(x):
                raise ValueError(f"curve {key!r}: line {name!r} has {len(ys)} points "
                                 f"for {len(x)} x values")
        self.series.append({"key": key, "title": title, "x_label": x_label,
                            "y_label": y_label, "x": _plain(list(x)),
                            "lines": {k: _plain(list(v)) for k, v in lines.items()},
                            "log_x": log_x, "log_y": log_y})

    def to_dict(self):
        return {
            "script": self.script,
            "command": self.command,
            "date": self.started.isoformat(timespec="seconds"),
            "seconds": round(self.elapsed if self.elapsed is not None else
                             (_dt.datetime.now(_dt.timezone.utc) - self.started)
                             .total_seconds(), 1),
            "machine": self.machine,
            "versions": self.versions,
            "parameters": self.parameters,
            "tables": [t.to_dict() for t in self.tables],
            "figures": self.figures,
            "series": self.series,
        }

    def write(self, path):
        """Write the JSON file (``'-'``: nothing); returns the path written or None."""
        if path is None or str(path) == "-":
            return None
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n")
        os.replace(tmp, path)
        print(f"results: {path}", file=sys.stderr)
        return path


# A script's one run in progress: section functions add to it without passing it along.
_current: Results | None = None


def start(script, args=None, **kwargs) -> Results:
    """Begin the run of ``script`` (what :func:`table`, :func:`figure`, :func:`curve`
    add to) and return its :class:`Results`."""
    global _current
    _current = Results(script, args, **kwargs)
    return _current


def current() -> Results:
    """The run begun by :func:`start` (a throw-away one when a section runs alone)."""
    global _current
    if _current is None:
        _current = Results("unnamed.py")
    return _current


def table(key, title, columns, note="") -> Table:
    return current().table(key, title, columns, note)


def figure(key, label, value, unit, **kwargs):
    return current().figure(key, label, value, unit, **kwargs)


def curve(key, title, x_label, y_label, x, lines, **kwargs):
    return current().curve(key, title, x_label, y_label, x, lines, **kwargs)


def param(**kwargs):
    """Record parameters decided inside the run (sizes a ``--quick`` flag chose, ...)."""
    current().parameters.update({k: _plain(v) for k, v in kwargs.items()})
