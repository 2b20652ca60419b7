"""Load test of ``streameval serve`` on loopback: throughput, latency, nothing lost.

Starts the service in a subprocess (``python -m streameval.service --port 0``) with the
default monitor, then ``--clients`` threads (default 8), each on one keep-alive
connection, post ``--events`` seeded events (default 200 000) in JSON batches of
``--batch`` events (default 500) taken from one shared queue. Every request's latency
is recorded; the run is bounded by the event count and by ``--timeout`` seconds
(the clients stop by themselves at either).

Then it checks that nothing was lost: the server's event count equals what was
posted, and its snapshot (every metric of every window, and the active alerts) equals
a Monitor fed the same batches directly, in the order the server acknowledged them
(each response carries its batch's ``seq``). The direct Monitor is the peer: its
events/s is the ceiling that HTTP, JSON and the write-ahead log are measured against.

Rows: the service with a state directory (write-ahead log, group-committed with
fsync; checkpoints every 100 000 events, each pausing ingestion while the Monitor's
state is serialised), the same without checkpoints during the run (the log's cost
alone), the service without a state directory (in memory), and the Monitor fed
directly (same batches, ``update_many``). Then small batches (``--small-batch``, 100
events; ``--small-events`` in all, 20 000) from 8 clients and from one, each twice:
as served, and with the listening socket created the way it was before issue 15
(``socket.socket(family, SOCK_STREAM)``, protocol 0), on which asyncio does not set
TCP_NODELAY on accepted connections -- the server process is started through a shim
that replaces ``streameval.service._bind`` (nothing else differs).

    python benchmarks/bench_service.py                    # 200 000 events, 8 clients
    python benchmarks/bench_service.py --events 20000     # a quick run

Traffic goes to 127.0.0.1 only. Timings are wall-clock on whatever machine runs it;
compare rows of one run, not runs.

Results (2-core machine shared with other jobs, load average about 3; Python 3.11,
uvicorn 0.54 with h11, starlette 1.10, orjson installed; default monitor; every run's
final state equal to the direct Monitor's):

| run | events | seconds | events/s | requests/s | p50 ms | p99 ms |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
| service, WAL + checkpoints every 100 000 events (8 x 500) | 200000 | 2.39 | 83,549 | 167 | 34.0 | 691.2 |
| service, WAL, no checkpoint during the run (8 x 500) | 200000 | 1.92 | 104,066 | 208 | 36.3 | 76.9 |
| service, in memory (8 x 500) | 200000 | 1.48 | 134,746 | 269 | 28.2 | 68.5 |
| service, in memory (8 x 100) | 20000 | 0.33 | 59,872 | 599 | 12.9 | 33.8 |
| same, socket as before issue 15: no TCP_NODELAY (8 x 100) | 20000 | 1.19 | 16,823 | 168 | 44.1 | 61.2 |
| service, in memory (1 x 100) | 20000 | 0.35 | 57,290 | 573 | 1.5 | 3.5 |
| same, socket as before issue 15: no TCP_NODELAY (1 x 100) | 20000 | 8.97 | 2,230 | 22 | 43.9 | 51.9 |
| Monitor.update_many, direct (peer, batches of 500) | 200000 | 0.26 | 756,326 | 1,513 | - | - |

The write-ahead log costs little thanks to group commit (one fsync for the batches
appended while the previous one ran); the p99 of the first row is the two
checkpoints, each of which holds ingestion while the Monitor's state is serialised
(``--checkpoint-events`` trades that against replay time after a crash). Without
TCP_NODELAY every keep-alive response waited for the client's delayed ACK: 44 ms a
request whatever its size, 26x fewer events/s for one client posting batches of 100.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

SEED = 20240607


def make_batches(n, size, seed=SEED):
    """Seeded events (labels ~ Bernoulli(0.1), scores rounded to 4 decimals) in batches."""
    rng = np.random.default_rng(seed)
    labels = rng.random(n) < 0.1
    margin = 2.5 * (labels - 0.5)
    scores = np.round(1.0 / (1.0 + np.exp(-(margin + rng.standard_normal(n) - 1.0))), 4)
    ts = np.round(1_700_000_000 + np.cumsum(rng.exponential(0.05, n)), 3)
    batches = []
    for a in range(0, n, size):
        b = min(n, a + size)
        events = [{"ts": float(ts[i]), "id": i, "label": int(labels[i]), "score": float(scores[i])}
                  for i in range(a, b)]
        batches.append((events, json.dumps(events, separators=(",", ":")).encode()))
    return batches


#: Runs ``streameval serve`` with the listening socket made as before issue 15
#: (protocol 0: asyncio then leaves Nagle's algorithm on for every connection).
OLD_BIND_SHIM = """
import socket, sys
import streameval.service as service

def _bind(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock

service._bind = _bind
sys.exit(service.main(sys.argv[1:]))
"""


def start_server(state_dir, config=None, extra=(), nodelay=True):
    prog = ["-m", "streameval.service"] if nodelay else ["-c", OLD_BIND_SHIM]
    cmd = [sys.executable, *prog, "--port", "0", *extra]
    if config is not None:
        cmd += ["--config", config]
    if state_dir is not None:
        cmd += ["--state-dir", state_dir]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout=120):
        proc.kill()
        raise SystemExit("the server did not start")
    line = proc.stdout.readline().decode()
    if "listening on http://127.0.0.1:" not in line:
        proc.kill()
        raise SystemExit(f"unexpected server output: {line!r}")
    port = int(line.split("listening on http://127.0.0.1:", 1)[1].split()[0].rstrip("/"))
    return proc, port


def load(port, batches, clients, timeout):
    """Post every batch from ``clients`` threads; return (seconds, latencies, acked)."""
    work = queue.Queue()
    for i in range(len(batches)):
        work.put(i)
    latencies, acked, errors = [], {}, []
    lock = threading.Lock()
    deadline = time.monotonic() + timeout

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Content-Type": "application/json"}
        mine = []
        try:
            while time.monotonic() < deadline:
                try:
                    i = work.get_nowait()
                except queue.Empty:
                    break
                t0 = time.perf_counter()
                conn.request("POST", "/events", body=batches[i][1], headers=headers)
                r = conn.getresponse()
                body = r.read()
                mine.append(time.perf_counter() - t0)
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}: {body[:200]!r}")
                with lock:
                    acked[json.loads(body)["seq"]] = i
        except Exception as e:  # reported after the run
            errors.append(e)
        finally:
            conn.close()
            with lock:
                latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"client error: {errors[0]}")
    return seconds, np.array(latencies), acked


def snapshot(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/snapshot")
    data = json.loads(conn.getresponse().read())
    conn.close()
    return data


def direct(batches, order, config=None):
    """Feed the Monitor directly in the server's order; return (monitor, seconds)."""
    from streameval.monitor import Monitor

    cols = []
    for i in order:
        events = batches[i][0]
        cols.append((np.array([e["label"] == 1 for e in events]),
                     np.array([e["score"] for e in events]),
                     np.array([e["ts"] for e in events])))
    mon = Monitor.default() if config is None else Monitor.from_toml(config)
    t0 = time.perf_counter()
    for y, s, t in cols:
        mon.update_many(y, s, t=t)
    return mon, time.perf_counter() - t0


def compare(served, mon):
    from streameval.service.app import snapshot_json

    expected = json.loads(json.dumps(snapshot_json(mon.snapshot())))
    if served["n"] != mon.n:
        return f"LOST: server counted {served['n']} events, direct {mon.n}"
    got = {e["segment"] and str(e["segment"]): e["values"] for e in served["segments"]}
    want = {e["segment"] and str(e["segment"]): e["values"] for e in expected["segments"]}
    if got != want:
        return "MISMATCH in metric values"
    if served["alerts"] != expected["alerts"]:
        return "MISMATCH in active alerts"
    return "equal"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--small-events", type=int, default=20_000,
                    help="events of the small-batch rows (default %(default)s)")
    ap.add_argument("--small-batch", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="stop posting after this many seconds (default %(default)s)")
    ap.add_argument("--config", metavar="FILE", help="monitor config (default: the default monitor)")
    args = ap.parse_args(argv)

    batches = make_batches(args.events, args.batch)
    small = make_batches(args.small_events, args.small_batch)
    rows = []
    c, b, sb = args.clients, args.batch, args.small_batch
    no_ckpt = ("--checkpoint-events", "0", "--checkpoint-seconds", "0")
    runs = (  # label, batches, clients, durable, extra, nodelay
        (f"service, WAL + checkpoints every 100 000 events ({c} x {b})", batches, c, True, (),
         True),
        (f"service, WAL, no checkpoint during the run ({c} x {b})", batches, c, True, no_ckpt,
         True),
        (f"service, in memory ({c} x {b})", batches, c, False, (), True),
        (f"service, in memory ({c} x {sb})", small, c, False, (), True),
        (f"same, socket as before issue 15: no TCP_NODELAY ({c} x {sb})", small, c, False, (),
         False),
        (f"service, in memory (1 x {sb})", small, 1, False, (), True),
        (f"same, socket as before issue 15: no TCP_NODELAY (1 x {sb})", small, 1, False, (),
         False),
    )
    for label, bs, clients, durable, extra, nodelay in runs:
        with tempfile.TemporaryDirectory() as tmp:
            proc, port = start_server(os.path.join(tmp, "state") if durable else None,
                                      args.config, extra, nodelay)
            try:
                seconds, lat, acked = load(port, bs, clients, args.timeout)
                served = snapshot(port)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
        order = [acked[k] for k in sorted(acked)]
        posted = sum(len(bs[i][0]) for i in order)
        mon, _ = direct(bs, order, args.config)
        check = compare(served, mon)
        if len(order) < len(bs):
            check += f" (timeout: {len(order)}/{len(bs)} batches sent)"
        rows.append((label, posted, seconds, posted / seconds, len(lat) / seconds,
                     1e3 * np.percentile(lat, 50), 1e3 * np.percentile(lat, 99), check))
    order = list(range(len(batches)))
    mon, seconds = direct(batches, order, args.config)
    rows.append((f"Monitor.update_many, direct (peer, batches of {b})", mon.n, seconds,
                 mon.n / seconds, len(batches) / seconds, float("nan"), float("nan"), "-"))

    print(f"\n{args.events} events ({args.small_events} for the rows of batches of "
          f"{sb}), clients x events per batch in each row, "
          f"{args.config or 'default monitor'}, loopback\n")
    print("| run | events | seconds | events/s | requests/s | p50 ms | p99 ms "
          "| final state vs direct Monitor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.2f} | {r[3]:,.0f} | {r[4]:,.0f} | "
              f"{r[5]:.1f} | {r[6]:.1f} | {r[7]} |".replace("nan", "-"))
    bad = [r for r in rows if r[7] not in ("equal", "-")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
