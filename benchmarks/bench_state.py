"""Checkpoints of the default monitor: JSON against the binary incremental format.

For each stream length (continuous scores, batches of 1 000 as a replay feeds them) the
script measures, in one run:

* a JSON checkpoint (``to_state()`` + :func:`streameval.io.save_checkpoint`): seconds and
  bytes (up to ``--json-max`` events: it grows to minutes beyond);
* a full binary checkpoint (a fresh :class:`streameval.io.statefile.StateWriter`): the
  capture (``Monitor.to_array_state``, what the service does under its lock), the whole
  write, and the bytes;
* incremental binary checkpoints after each further ``--step`` events (``--increments``
  of them; the worst and the median): seconds and bytes written;
* a restart: loading the newest checkpoint in a fresh process (``load_checkpoint`` +
  ``Monitor.from_array_state``), its seconds, and its peak memory against the steady
  memory of the loaded state (the process's peak and current resident size, ``VmHWM``
  and ``VmRSS``, both less the resident size before the load, with the modules a restore
  imports already imported).

Then, for ``--segments`` counts (``group_by``, events spread evenly): the incremental
checkpoint after ``--step`` events; and a replay of ``--replay-events`` rows with
``--checkpoint`` every 100 000 rows against the same replay without.

    python benchmarks/bench_state.py                           # full: to 10 M events
    python benchmarks/bench_state.py --sizes 100000,300000 --segments 1,10 \
        --replay-events 100000 --json -                         # a quick check

Results: ``benchmarks/results/bench_state.json`` (``--json``), shown on the
documentation's performance page.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import _results as R

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from streameval.io.checkpoint import save_checkpoint  # noqa: E402
from streameval.io.statefile import StateWriter  # noqa: E402
from streameval.monitor import Monitor  # noqa: E402

BATCH = 1000

LOAD_CHILD = r"""
import json, os, sys, time, gc
def rss(field="VmRSS"):
    # (VmHWM, the peak, belongs to this program's memory; ru_maxrss would start from
    # the parent's resident size at the fork)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0
from streameval.io.checkpoint import load_checkpoint
from streameval.monitor import Monitor
Monitor.from_array_state(Monitor.default().to_array_state())  # (the modules it imports)
gc.collect()
base = rss()
t0 = time.perf_counter()
state = load_checkpoint(sys.argv[1])
mon = Monitor.from_array_state(state["monitor"])
del state
secs = time.perf_counter() - t0
gc.collect()
steady = rss()
peak = rss("VmHWM")
print(json.dumps({"seconds": secs, "n": mon.n, "steady": steady - base,
                  "peak": max(peak - base, steady - base), "peak_total": peak,
                  "base": base}))
"""


class Stream:
    """Continuous scores, 30% positives, in batches of 1 000 with event times."""

    def __init__(self, seed=0, segments=0):
        self.rng = np.random.default_rng(seed)
        self.n = 0
        self.segments = segments

    def feed(self, monitor, k):
        for _ in range(k // BATCH):
            y = self.rng.random(BATCH) < 0.3
            s = self.rng.random(BATCH) * 0.6 + 0.3 * y
            t = np.arange(self.n, self.n + BATCH, dtype=float)
            seg = None
            if self.segments:
                seg = [f"s{i}" for i in self.rng.integers(0, self.segments, BATCH)]
            monitor.update_many(y, s, t=t, segment=seg)
            self.n += BATCH


def _dir_bytes(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def load_in_child(path):
    out = subprocess.run([sys.executable, "-c", LOAD_CHILD, str(path)], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=str(HERE)), check=True)
    return json.loads(out.stdout)


def by_length(args, res, tmp):
    t = res.table("length", "Checkpoints of the default monitor against the stream's "
                  "length (continuous scores)",
                  ["events", "JSON s", "JSON MB", "binary full s", "capture s",
                   "binary MB", "incr. median s", "incr. max s", "incr. median MB",
                   "on disk MB", "load s", "load peak / steady", "steady MB"])
    sizes = [int(x) for x in args.sizes.split(",")]
    mon, stream = Monitor.default(), Stream(seed=1)
    curve_full, curve_inc, curve_load = [], [], []
    for n in sizes:
        stream.feed(mon, n - stream.n)
        json_s = json_mb = None
        if n <= args.json_max:
            p = tmp / f"json-{n}.json"
            t0 = time.perf_counter()
            save_checkpoint(p, {"monitor": mon.to_state()}, kind="bench")
            json_s = time.perf_counter() - t0
            json_mb = p.stat().st_size / 1e6
            p.unlink()
        d = tmp / f"bin-{n}"
        d.mkdir()
        w = StateWriter(d / "c.json")
        t0 = time.perf_counter()
        tree = {"monitor": mon.to_array_state()}
        cap = time.perf_counter() - t0
        w.write(tree, kind="bench")
        full = time.perf_counter() - t0
        full_mb = w.last["bytes"] / 1e6
        incs, inc_mb = [], []
        for _ in range(args.increments):
            stream.feed(mon, args.step)
            t0 = time.perf_counter()
            w.write({"monitor": mon.to_array_state()}, kind="bench")
            incs.append(time.perf_counter() - t0)
            inc_mb.append(w.last["bytes"] / 1e6)
        disk = _dir_bytes(d) / 1e6
        load = load_in_child(d / "c.json")
        assert load["n"] == mon.n, (load["n"], mon.n)
        ratio = load["peak"] / load["steady"] if load["steady"] > 0 else None
        t.add(n, json_s, json_mb, full, cap, full_mb, statistics.median(incs), max(incs),
              statistics.median(inc_mb), disk, load["seconds"], ratio, load["steady"] / 1e6)
        print(f"{n:>10} json {json_s if json_s is None else round(json_s, 3)} s "
              f"full {full:.3f} s {full_mb:.1f} MB | incr median {statistics.median(incs):.3f}"
              f" s max {max(incs):.3f} s | load {load['seconds']:.3f} s "
              f"peak/steady {ratio if ratio is None else round(ratio, 2)}", flush=True)
        curve_full.append(full)
        curve_inc.append(max(incs))
        curve_load.append(load["seconds"])
        shutil.rmtree(d)
        stream.n = mon.n  # (increments fed further events)
    res.curve("length_seconds", "Checkpoint and load time against the stream's length",
              "events", "seconds", sizes,
              {"full checkpoint": curve_full, "incremental (worst)": curve_inc,
               "load": curve_load}, log_x=True)
    last = t.rows[-1]
    res.figure("full_checkpoint", f"full binary checkpoint at {sizes[-1]:,} events", last[3],
               "s", better="lower")
    res.figure("incremental_checkpoint",
               f"incremental checkpoint after {args.step:,} events (worst), at {sizes[-1]:,}",
               last[7], "s", better="lower")
    res.figure("load", f"restart load at {sizes[-1]:,} events", last[10], "s", better="lower")


def by_segments(args, res, tmp):
    t = res.table("segments", f"Incremental checkpoint after {args.step:,} events against "
                  "the number of segments", ["segments", "events", "full s", "full MB",
                                             "incr. s", "incr. MB"])
    for k in [int(x) for x in args.segments.split(",")]:
        mon = Monitor.default(**({"group_by": "segment"} if k > 1 else {}))
        stream = Stream(seed=2, segments=k if k > 1 else 0)
        stream.feed(mon, args.segment_events)
        d = tmp / f"seg-{k}"
        d.mkdir()
        w = StateWriter(d / "c.json")
        t0 = time.perf_counter()
        w.write({"monitor": mon.to_array_state()}, kind="bench")
        full, full_mb = time.perf_counter() - t0, w.last["bytes"] / 1e6
        stream.feed(mon, args.step)
        t0 = time.perf_counter()
        w.write({"monitor": mon.to_array_state()}, kind="bench")
        inc = time.perf_counter() - t0
        t.add(k, mon.n, full, full_mb, inc, w.last["bytes"] / 1e6)
        print(f"segments {k:>5}: full {full:.3f} s {full_mb:.1f} MB, incremental {inc:.3f} s "
              f"{w.last['bytes'] / 1e6:.1f} MB", flush=True)
        shutil.rmtree(d)


def replay(args, res, tmp):
    n = args.replay_events
    log = tmp / "log.jsonl"
    rng = np.random.default_rng(3)
    y = rng.random(n) < 0.3
    s = rng.random(n) * 0.6 + 0.3 * y
    with open(log, "w") as f:
        for i in range(n):
            f.write(f'{{"ts": {i}, "label": {"true" if y[i] else "false"}, '
                    f'"score": {float(s[i])!r}}}\n')
    cmd = [sys.executable, "-m", "streameval", "replay", str(log), "--no-report", "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(HERE))
    times = {}
    for name, extra in (("without", []), ("with", ["--checkpoint", str(tmp / "r.json"),
                                                   "--checkpoint-every", "100000"])):
        best = float("inf")
        for _ in range(args.repeat):
            shutil.rmtree(tmp / "out", ignore_errors=True)
            for p in tmp.glob("r.*"):
                shutil.rmtree(p) if p.is_dir() else p.unlink()
            t0 = time.perf_counter()
            subprocess.run(cmd + ["--out", str(tmp / "out")] + extra, env=env, check=True)
            best = min(best, time.perf_counter() - t0)
        times[name] = best
    t = res.table("replay", f"Replay of {n:,} rows (continuous scores), best of {args.repeat}",
                  ["checkpoints", "seconds", "ratio"])
    t.add("none", times["without"], 1.0)
    t.add("every 100 000 rows", times["with"], times["with"] / times["without"])
    print(f"replay {n}: without {times['without']:.2f} s, with checkpoints "
          f"{times['with']:.2f} s ({times['with'] / times['without']:.2f}x)")
    res.figure("replay_ratio", f"replay of {n:,} rows with checkpoints every 100 000 / without",
               times["with"] / times["without"], "x", better="lower")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000,1000000,3000000,10000000",
                    help="stream lengths (events), comma-separated")
    ap.add_argument("--json-max", type=int, default=1_000_000,
                    help="largest length with a JSON checkpoint (it takes minutes beyond)")
    ap.add_argument("--step", type=int, default=100_000, help="events between incremental "
                    "checkpoints")
    ap.add_argument("--increments", type=int, default=5,
                    help="incremental checkpoints per length")
    ap.add_argument("--segments", default="1,100,1000", help="segment counts")
    ap.add_argument("--segment-events", type=int, default=1_000_000,
                    help="events before the segment measurement")
    ap.add_argument("--replay-events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2, help="replay runs per case (best)")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    res = R.Results(__file__, args)
    tmp = Path(tempfile.mkdtemp(prefix="bench_state."))
    try:
        by_length(args, res, tmp)
        by_segments(args, res, tmp)
        replay(args, res, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json != "-":
        res.write(args.json)


if __name__ == "__main__":
    main()
