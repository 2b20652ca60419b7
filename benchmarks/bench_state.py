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

Then, for ``--segments`` counts (``group_by``, ``--segment-events`` events spread evenly
over the segments): the full checkpoint and the incremental one after ``--step`` more
events, spread evenly (every segment changes: its buffer of events waiting for its own
next row, at least), skewed (a tenth of the segments get them: the others are
referenced, not written again), and spread evenly then every segment's buffer fed and
its row written (``Monitor.evaluate``: every segment's metrics change; ``--fed-repeats``
times, one after another: the median and the worst); a replay of ``--replay-events``
rows with ``--checkpoint`` every 100 000 rows against the same replay without; and the
service (a real ``streameval serve`` subprocess, ``--service-sizes`` events posted
first): the p99 latency of 8 clients posting batches of 100 events without checkpoints
and with one every 10 s, in ``--service-pairs`` interleaved pairs of windows (their
median ratio, with the smallest and largest) (``POST /checkpoint`` every 10 s, the periodic writer's path:
captured under the lock, written in a thread; one untimed checkpoint first, as a service
that has been running has written), the time a SIGTERM takes (a final checkpoint) and
the restart's time to serve again.

    python benchmarks/bench_state.py                 # full: to 10 M events, ~15 min idle
    python benchmarks/bench_state.py --quick --json -  # a quick check (~3 min)
    python benchmarks/bench_state.py --parts segments --segments 1000 \
        --segment-events 1000000 --json -             # one part (no results file)

Results: ``benchmarks/results/bench_state.json`` (``--json``), shown on the
documentation's performance page. The machine's load average is recorded with them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
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

    few = 0  # events only on the first ``few`` segments (0: all of them)

    def feed(self, monitor, k):
        for _ in range(k // BATCH):
            y = self.rng.random(BATCH) < 0.3
            s = self.rng.random(BATCH) * 0.6 + 0.3 * y
            t = np.arange(self.n, self.n + BATCH, dtype=float)
            seg = None
            if self.segments:
                seg = [f"s{i}" for i in self.rng.integers(0, self.few or self.segments,
                                                          BATCH)]
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
                   "incr. max MB", "on disk MB", "load s", "load peak / steady", "steady MB"])
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
        print(f"{n:>10} increments s {[round(x, 3) for x in incs]} MB "
              f"{[round(x, 1) for x in inc_mb]}", flush=True)
        disk = _dir_bytes(d) / 1e6
        load = load_in_child(d / "c.json")
        assert load["n"] == mon.n, (load["n"], mon.n)
        ratio = load["peak"] / load["steady"] if load["steady"] > 0 else None
        t.add(n, json_s, json_mb, full, cap, full_mb, statistics.median(incs), max(incs),
              statistics.median(inc_mb), max(inc_mb), disk, load["seconds"], ratio,
              load["steady"] / 1e6)
        print(f"{n:>10} json {json_s if json_s is None else round(json_s, 3)} s "
              f"full {full:.3f} s {full_mb:.1f} MB | incr median {statistics.median(incs):.3f}"
              f" s max {max(incs):.3f} s, MB median {statistics.median(inc_mb):.1f} max "
              f"{max(inc_mb):.1f} | load {load['seconds']:.3f} s "
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
    res.figure("load", f"restart load at {sizes[-1]:,} events", last[11], "s", better="lower")


def by_segments(args, res, tmp):
    t = res.table("segments", f"Incremental checkpoint after {args.step:,} events against "
                  "the number of segments", ["segments", "events", "full s", "full MB",
                                             "incr. s (even)", "incr. MB (even)",
                                             "incr. s (a tenth)", "incr. MB (a tenth)",
                                             "incr. s (all fed)", "incr. MB (all fed)",
                                             "incr. s (all fed, worst)"])
    worst = None
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
        out, fed = [], []
        for case in ("even", "tenth") + ("fed",) * max(1, args.fed_repeats):
            stream.few = max(1, k // 10) if case == "tenth" and k > 1 else 0
            stream.feed(mon, args.step)
            if case == "fed":  # (every segment's buffered events fed, its row written)
                mon.evaluate()
            t0 = time.perf_counter()
            w.write({"monitor": mon.to_array_state()}, kind="bench")
            if case == "fed":
                fed.append((time.perf_counter() - t0, w.last["bytes"] / 1e6))
            else:
                out += [time.perf_counter() - t0, w.last["bytes"] / 1e6]
        mid = sorted(fed)[len(fed) // 2]  # (the median of the fed increments)
        out += [mid[0], mid[1], max(f[0] for f in fed)]
        t.add(k, mon.n, full, full_mb, *out)
        if k == max(int(x) for x in args.segments.split(",")):
            worst = out
        print(f"segments {k:>5}: full {full:.3f} s {full_mb:.1f} MB, incremental {out[0]:.3f}"
              f" s {out[1]:.1f} MB (even), {out[2]:.3f} s {out[3]:.1f} MB (a tenth), "
              f"{out[4]:.3f} s {out[5]:.1f} MB (every segment fed: the median of "
              f"{len(fed)}, worst {out[6]:.3f} s)", flush=True)
        shutil.rmtree(d)
    res.figure("segments_incremental", "incremental checkpoint, most segments, events on a "
               "tenth of them", worst[2], "s", better="lower")
    res.figure("segments_incremental_even", "incremental checkpoint, most segments, events "
               "on every one (buffered)", worst[0], "s", better="lower")
    res.figure("segments_incremental_fed", "incremental checkpoint, most segments, every "
               "one fed since (median)", worst[4], "s", better="lower")
    res.figure("segments_incremental_fed_worst", "incremental checkpoint, most segments, "
               "every one fed since (worst)", worst[6], "s", better="lower")


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


def _post_events(port, n):
    """Post ``n`` continuous-score events from two connections in batches of 20 000
    (:func:`bench_service.post_events`); returns the seconds it took."""
    from bench_service import post_events

    return post_events(port, n, batch=20_000)


def _p99_window(bs, port, seconds, checkpoint_every=None):
    """p99 latency (ms) of 8 clients x 100 events over ``seconds``; with
    ``checkpoint_every``, a ``POST /checkpoint`` that often meanwhile (their count is
    returned too)."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    t_start = time.monotonic() + 0.5
    t_end = t_start + seconds
    workers = [ctx.Process(target=bs.client_process,
                           args=(port, 100, 2, 7 + i, t_start, t_end, results))
               for i in range(4)]
    for w in workers:
        w.start()
    done = 0
    if checkpoint_every:
        nxt = t_start + checkpoint_every / 2
        while True:
            now = time.monotonic()
            if nxt >= t_end:
                break
            time.sleep(max(0.0, nxt - now))
            bs.request(port, "POST", "/checkpoint", body=b"")
            done += 1
            nxt += checkpoint_every
    got = [results.get(timeout=600) for _ in workers]
    for w in workers:
        w.join(60)
    errors = [e for g in got for e in g["errors"]]
    if errors:
        raise RuntimeError(f"client error: {errors[0]}")
    lat = sorted(x for g in got for x in g["lat"])
    return 1e3 * bs.percentile(lat, 99), done


def service(args, res, tmp):
    import bench_service as bs
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(HERE) + (os.pathsep + old if old else "")  # (the server)
    t = res.table("service", "The service: p99 latency without and with a checkpoint every "
                  f"10 s ({args.service_pairs} pairs of {args.service_seconds:g} s windows, "
                  "interleaved: the median of each, and the median ratio of a pair with "
                  "the smallest and largest), SIGTERM and restart, against the events it "
                  "holds",
                  ["events", "post s", "p99 ms (none)", "p99 ms (every 10 s)", "ratio",
                   "ratio min", "ratio max", "checkpoints", "SIGTERM s", "restart s",
                   "checkpoint MB"])
    ratio = sigterm = None
    for n in [int(x) for x in args.service_sizes.split(",")]:
        state = str(tmp / f"svc-{n}")
        server, port = bs.start_server(state, bs.NO_CHECKPOINTS)
        try:
            post = _post_events(port, n)
            bs.request(port, "POST", "/checkpoint", body=b"")  # (a running service's)
            # pairs of windows without and with checkpoints, in turn first (ABBA: a load
            # that drifts over the run weighs on both alike)
            nones, ckpts, done = [], [], 0
            for i in range(args.service_pairs):
                for with_ckpt in ((False, True) if i % 2 == 0 else (True, False)):
                    if with_ckpt:
                        p, k = _p99_window(bs, port, args.service_seconds, 10.0)
                        ckpts.append(p)
                        done += k
                    else:
                        nones.append(_p99_window(bs, port, args.service_seconds)[0])
            ratios = [c / n for c, n in zip(ckpts, nones)]
            t0 = time.perf_counter()
            server.send_signal(signal.SIGTERM)
            server.wait(600)
            sigterm = time.perf_counter() - t0
        finally:
            if server.poll() is None:
                server.kill()
                server.wait(60)
            server.stdout.close()
        size = _dir_bytes(state) / 1e6
        t0 = time.perf_counter()
        server, port = bs.start_server(state, bs.NO_CHECKPOINTS)
        restart = time.perf_counter() - t0
        try:
            snap = bs.request(port, "GET", "/snapshot")
            assert snap["n"] >= n, (snap["n"], n)
        finally:
            server.kill()
            server.wait(60)
            server.stdout.close()
        shutil.rmtree(state, ignore_errors=True)
        ratio = statistics.median(ratios)
        p_none, p_ckpt = statistics.median(nones), statistics.median(ckpts)
        t.add(n, post, p_none, p_ckpt, ratio, min(ratios), max(ratios), done, sigterm,
              restart, size)
        print(f"service {n}: p99 {p_none:.1f} ms -> {p_ckpt:.1f} ms with checkpoints "
              f"(median ratio {ratio:.2f}x, {min(ratios):.2f}-{max(ratios):.2f} over "
              f"{len(ratios)} pairs, {done} checkpoints), SIGTERM {sigterm:.2f} s, restart "
              f"{restart:.2f} s", flush=True)
    res.figure("service_p99_ratio", "service p99 with a checkpoint every 10 s / without, "
               "most events (median of interleaved pairs)", ratio, "x", better="lower")
    res.figure("sigterm", "SIGTERM (final checkpoint), most events", sigterm, "s",
               better="lower")


#: the parts of the benchmark, in the order they run (``--parts``)
PARTS = {"length": by_length, "segments": by_segments, "replay": replay, "service": service}

QUICK = {"sizes": "100000,300000", "json_max": 100_000, "increments": 3,
         "segments": "1,10,100", "segment_events": 100_000, "replay_events": 100_000,
         "repeat": 1, "service_sizes": "100000", "service_seconds": 4.0,
         "service_pairs": 2}


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
    ap.add_argument("--fed-repeats", type=int, default=3,
                    help="incremental checkpoints with every segment fed, one after "
                         "another (the median and the worst)")
    ap.add_argument("--segment-events", type=int, default=300_000,
                    help="events before the segment measurement")
    ap.add_argument("--replay-events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1, help="replay runs per case (best)")
    ap.add_argument("--service-sizes", default="1000000,10000000",
                    help="events the service holds when measured ('' to skip)")
    ap.add_argument("--service-seconds", type=float, default=25.0,
                    help="seconds of each latency window")
    ap.add_argument("--service-pairs", type=int, default=3,
                    help="pairs of latency windows (without and with checkpoints, "
                    "interleaved) per size: the ratio is their median")
    ap.add_argument("--parts", default=",".join(PARTS),
                    help="what to measure, comma-separated, of " + ", ".join(PARTS)
                    + " (default: all; a run of some parts writes its JSON only with an "
                    "explicit --json path)")
    ap.add_argument("--quick", action="store_true", help="small sizes: a check that the "
                    "script works (" + ", ".join(f"{k}={v}" for k, v in QUICK.items()) + ")")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    if args.quick:
        for k, v in QUICK.items():
            setattr(args, k, v)
    parts = [x for x in args.parts.split(",") if x]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"--parts: unknown {', '.join(unknown)} (known: {', '.join(PARTS)})")
    res = R.Results(__file__, args)
    tmp = Path(tempfile.mkdtemp(prefix="bench_state."))
    try:
        for name in PARTS:
            if name in parts and (name != "service" or args.service_sizes):
                PARTS[name](args, res, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    default_json = str(R.default_path(__file__))
    if args.json != "-" and (set(parts) == set(PARTS) or args.json != default_json):
        res.write(args.json)
    elif args.json != "-":
        print(f"(some parts only: results not written to {args.json}; give --json PATH)")


if __name__ == "__main__":
    main()
