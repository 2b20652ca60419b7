"""Memory and time per idempotency key remembered by the service's engine.

What is measured: an :class:`streameval.service.engine.Engine` (the default monitor, no
state directory) remembers ``N`` keys as its ingestion path does for a keyed batch (a
36-character key such as a UUID, the SHA-256 of the batch from
:func:`streameval.service.wal.digest`, its sequence number, 100 events, the time), one
after the other, a millisecond apart (all in the window). Printed per ``N`` (``--keys``, default
100 000 and 1 000 000), each in a fresh interpreter: the bytes held per key
(``tracemalloc``: the memory traced after the keys less before, over ``N``; the key
strings the client sent are dropped as the request's are) and the microseconds per
remembered key and per lookup of a known key (no ``tracemalloc`` then), and per key
remembered into a table already at its cap of ``N`` (``max_idempotency_keys``: each
drops the oldest; at most 200 000 such keys timed). Absolute times depend on the
machine's load, the ratio to the baseline does not so much.

``--baseline-src DIR`` measures an older checkout too (``DIR`` first on
``PYTHONPATH``), runs alternating, and prints the ratios (this code / baseline).

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

_CHILD = r"""
import hashlib, json, sys, time, tracemalloc
from streameval.monitor import Monitor
from streameval.service.engine import Engine

n_keys = int(sys.argv[1])
clock = [1_800_000_000.0]


def engine(**kw):
    global eng, table, new
    eng = Engine(Monitor.default(), state_dir=None, checkpoint_seconds=None,
                 checkpoint_every=None, clock=lambda: clock[0], **kw)
    table = eng._keys
    new = hasattr(table, "remember")


engine()


def key(i):
    return f"{i:08x}-4b2a-4c1e-9f3d-{i:012x}"


def dig(i):
    return hashlib.sha256(i.to_bytes(8, "little")).hexdigest()


def remember(i):
    if new:
        table.remember(key(i), i, 100, dig(i), clock[0] + i / 1000)
    else:
        eng._remember(key(i), (i, 100, dig(i), clock[0] + i / 1000))


def lookup(i):
    return table.find(key(i), dig(i)) if new else table.get(key(i))


tracemalloc.start()
before = tracemalloc.get_traced_memory()[0]
for i in range(n_keys):
    remember(i)
after = tracemalloc.get_traced_memory()[0]
tracemalloc.stop()
assert len(table) == n_keys
held = (after - before) / n_keys
# times: a fresh table, no tracemalloc
engine()
t0 = time.perf_counter()
for i in range(n_keys):
    remember(i)
t1 = time.perf_counter()
for i in range(0, n_keys, 7):
    assert lookup(i) is not None
t2 = time.perf_counter()
# at the cap: every new key drops the oldest
engine(max_idempotency_keys=n_keys)
for i in range(n_keys):
    remember(i)
more = min(n_keys // 2, 200_000)
t3 = time.perf_counter()
for i in range(n_keys, n_keys + more):
    remember(i)
t4 = time.perf_counter()
assert len(table) == n_keys
print(json.dumps({"keys": n_keys, "bytes_per_key": held,
                  "us_remember": (t1 - t0) / n_keys * 1e6,
                  "us_lookup": (t2 - t1) / len(range(0, n_keys, 7)) * 1e6,
                  "us_at_cap": (t4 - t3) / more * 1e6}))
"""


def _run(src: str, n_keys: int) -> dict:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(n_keys)], env=env, cwd=src,
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{src}: the measurement failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", default="100000,1000000", help="comma-separated key counts")
    ap.add_argument("--src", default=str(HERE.parent), help="the checkout measured")
    ap.add_argument("--baseline-src", default=None, help="an older checkout, measured too")
    ap.add_argument("--runs", type=int, default=1, help="runs per checkout and count")
    ap.add_argument("--json", default=None, help="write the rows here ('-': stdout)")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'keys':>9} {'code':>8} {'bytes/key':>10} {'us/remember':>12} {'us/lookup':>10} "
          f"{'us/at cap':>10}")
    for n_keys in (int(x) for x in args.keys.split(",")):
        for run in range(args.runs):
            for name, src in (("this", args.src), ("baseline", args.baseline_src)):
                if src is None:
                    continue
                r = {"code": name, "run": run, **_run(src, n_keys)}
                rows.append(r)
                print(f"{n_keys:>9} {name:>8} {r['bytes_per_key']:>10.1f} "
                      f"{r['us_remember']:>12.2f} {r['us_lookup']:>10.2f} {r['us_at_cap']:>10.2f}",
                      flush=True)
        if args.baseline_src is not None:
            this = [r for r in rows if r["keys"] == n_keys and r["code"] == "this"]
            base = [r for r in rows if r["keys"] == n_keys and r["code"] == "baseline"]
            for field in ("bytes_per_key", "us_remember", "us_lookup", "us_at_cap"):
                ratios = [a[field] / b[field] for a, b in zip(this, base)]
                print(f"{n_keys:>9} {field} this/baseline: {min(ratios):.3f}-{max(ratios):.3f}")
    if args.json == "-":
        print(json.dumps(rows, indent=1))
    elif args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
