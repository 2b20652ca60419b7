"""Memory and time per idempotency key remembered by the service's engine.

What is measured: an :class:`streameval.service.engine.Engine` (the default monitor)
ingests ``N`` batches of ``--batch`` events (continuous scores), each under a new
36-character key (as a UUID), through :meth:`Engine.ingest` as the HTTP layer calls it,
one millisecond apart on the engine's clock (all in the window), then the same ``N``
batches without keys; each in a fresh interpreter. Two engines: without a state
directory (the keys in memory) and with one (durable: the keys in the write-ahead log,
memory holding their order). Printed per ``N`` (``--keys``, default 100 000) and
engine:

- **bytes per key**: the memory traced by ``tracemalloc`` after the keyed run less after
  the unkeyed one, over ``N`` (the monitor holds the same events in both), and the
  same difference of the process's resident size (``VmRSS``: SQLite's page cache and
  anything else ``tracemalloc`` does not see); and with a state directory, the pages
  of the log's ``keys`` table and its indexes (SQLite's ``dbstat``), over ``N``;
- **us per keyed batch**: the median ingestion time of a keyed batch less an unkeyed
  one's, the two alternating in one engine (at most 20 000 of each, half of them with
  the engine at its cap of keys, ``max_idempotency_keys``, so that each drops the
  oldest: **us at the cap**);
- **us per retry**: the median time to answer a retried batch (its key known, its
  batch the same; nothing is applied).

``--baseline-src DIR`` measures an older checkout the same way (``DIR`` first on
``PYTHONPATH``), alternating runs, and prints the ratios. Absolute times depend on the
machine's load; the ratio to the baseline less so.

    python benchmarks/bench_idempotency.py
    python benchmarks/bench_idempotency.py --keys 100000 --baseline-src /work/main --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _results as R  # noqa: E402

_CHILD = r"""
import atexit, gc, json, os, shutil, sys, tempfile, time, tracemalloc
import numpy as np
from streameval.monitor import Monitor
from streameval.service.engine import Engine
from _results import proc_status_kb  # (this script's folder, on PYTHONPATH)

n_keys, batch, durable, measure = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
clock = [1_800_000_000.0]
rng = np.random.default_rng(1)
bodies = []
for j in range(64):
    y = rng.random(batch) < 0.3
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1)
    bodies.append([{"ts": 1_700_000_000.0 + j, "label": int(a), "score": float(b)}
                   for a, b in zip(y, s)])


def key(i):
    return f"{i:08x}-4b2a-4c1e-9f3d-{i:012x}"


def rss_kb():
    return proc_status_kb(os.getpid(), "VmRSS")["VmRSS"]


def run(keyed, cap=None, start=0, count=n_keys, eng=None, d=None):
    if eng is None:
        d = tempfile.mkdtemp() if durable else None
        if d is not None:
            atexit.register(shutil.rmtree, d, True)
        eng = Engine.open(Monitor.default(), state_dir=d, checkpoint_seconds=None,
                          checkpoint_every=None, clock=lambda: clock[0],
                          **({} if cap is None else {"max_idempotency_keys": cap}))
    t0 = time.perf_counter()
    for i in range(start, start + count):
        clock[0] += 0.001
        eng.ingest(bodies[i % 64], key=key(i) if keyed else None)
    return eng, (time.perf_counter() - t0) / max(count, 1) * 1e6, d


out = {"keys": n_keys, "batch": batch, "engine": "state-dir" if durable else "memory"}
eng, _, _ = run(True, count=2000)  # the first engine's one-time allocations, not measured
eng.close()
del eng
if measure == "memory":
    held = {}
    for keyed in (False, True):
        gc.collect()
        tracemalloc.start()
        before, rss0 = tracemalloc.get_traced_memory()[0], rss_kb()
        eng, _, d = run(keyed)
        gc.collect()
        held[keyed] = (tracemalloc.get_traced_memory()[0] - before, (rss_kb() - rss0) * 1024)
        tracemalloc.stop()
        if durable and keyed:  # the keys' table and its indexes in the log, on disk
            import sqlite3
            with sqlite3.connect(f"{d}/wal.sqlite3") as db:
                on_disk = db.execute("SELECT sum(pgsize) FROM dbstat WHERE name IN "
                                     "(SELECT name FROM sqlite_master WHERE tbl_name = "
                                     "'keys')").fetchone()[0]
            out["disk_bytes_per_key"] = on_disk / n_keys
        assert eng.snapshot()["service"]["idempotency_keys"] == (n_keys if keyed else 0)
        eng.close()
        del eng
    out["bytes_per_key"] = (held[True][0] - held[False][0]) / n_keys
    out["rss_bytes_per_key"] = (held[True][1] - held[False][1]) / n_keys
else:
    # one engine, keyed and unkeyed batches alternating, each ingestion timed: the
    # medians' difference is the key's cost (the applier thread's work and the GIL's
    # hand-offs fall on both alike)
    n = min(n_keys, 20_000)
    cap = n // 2
    eng, _, d = run(False, count=0, cap=cap)

    def timed(i, k):
        t0 = time.perf_counter()
        r = eng.ingest(bodies[i % 64], key=k)
        return time.perf_counter() - t0, r

    below, at_cap, retry, plain = [], [], [], []
    for i in range(n):
        clock[0] += 0.001
        dt, _ = timed(i, key(i))
        (below if i < cap else at_cap).append(dt)
        clock[0] += 0.001
        plain.append(timed(i, None)[0])
    for i in range(n - cap, n):  # the keys still remembered, sent again
        dt, r = timed(i, key(i))
        assert r.get("retried"), r
        retry.append(dt)
    assert eng.snapshot()["service"]["idempotency_keys"] == cap
    eng.close()
    med = lambda xs: float(np.median(xs)) * 1e6
    out.update(us_plain=med(plain), us_keyed=med(below) - med(plain),
               us_retry=med(retry), us_at_cap=med(at_cap) - med(plain))
print(json.dumps(out))
"""


def _run(src: str, n_keys: int, batch: int, durable: bool, measure: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((src, str(HERE)))}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(n_keys), str(batch),
                           "1" if durable else "0", measure], env=env, cwd=src,
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{src}: the measurement failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


COLUMNS = ["keys", "engine", "code", "bytes per key (tracemalloc)", "bytes per key (RSS)",
           "bytes per key on disk",
           "us per keyed batch", "us per retry", "us per keyed batch at the cap"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", default="100000", help="comma-separated key counts")
    ap.add_argument("--batch", type=int, default=10, help="events per batch")
    ap.add_argument("--src", default=str(HERE.parent), help="the checkout measured")
    ap.add_argument("--baseline-src", default=None, help="an older checkout, measured too")
    ap.add_argument("--runs", type=int, default=1, help="runs per checkout and count")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    res = R.Results(__file__, args)
    table = res.table("keys", f"Idempotency keys: memory and time per key (batches of "
                      f"{args.batch} events, default monitor)", COLUMNS,
                      note="memory: keyed run less unkeyed run, over the keys; times: "
                      "keyed less unkeyed ingestion, per batch")
    print(" | ".join(COLUMNS))
    rows = []
    for n_keys in (int(x) for x in args.keys.split(",")):
        for durable in (False, True):
            engine = "state-dir" if durable else "memory"
            for run in range(args.runs):
                for code, src in (("this", args.src), ("baseline", args.baseline_src)):
                    if src is None:
                        continue
                    r = {**_run(src, n_keys, args.batch, durable, "memory"),
                         **_run(src, n_keys, args.batch, durable, "time"), "code": code}
                    rows.append(r)
                    cells = (n_keys, engine, code, round(r["bytes_per_key"], 1),
                             round(r["rss_bytes_per_key"], 1),
                             round(r.get("disk_bytes_per_key", 0.0), 1), round(r["us_keyed"], 2),
                             round(r["us_retry"], 2), round(r["us_at_cap"], 2))
                    table.add(*cells)
                    print(" | ".join(map(str, cells)), flush=True)
            this = [r for r in rows if r["keys"] == n_keys and r["engine"] == engine
                    and r["code"] == "this"]
            if run == args.runs - 1 and n_keys == max(int(x) for x in args.keys.split(",")):
                best = min(this, key=lambda r: r["bytes_per_key"])
                res.figure(f"bytes_per_key_{engine.replace('-', '_')}",
                           f"memory per idempotency key, {engine} engine, {n_keys:,} keys",
                           best["bytes_per_key"], "bytes", better="lower",
                           note=f"RSS: {best['rss_bytes_per_key']:.0f} bytes per key")
            base = [r for r in rows if r["keys"] == n_keys and r["engine"] == engine
                    and r["code"] == "baseline"]
            for field in ("bytes_per_key", "rss_bytes_per_key", "us_keyed", "us_retry",
                          "us_at_cap") if base else ():
                ratios = [a[field] / b[field] for a, b in zip(this, base) if b[field]]
                if ratios:
                    print(f"{n_keys} {engine} {field} this/baseline: "
                          f"{min(ratios):.3f}-{max(ratios):.3f}")
    res.write(args.json)


if __name__ == "__main__":
    main()
