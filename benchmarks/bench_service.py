"""Load test of ``streameval serve``: events/s and request latency, with and without checkpoints.

What is measured: a real ``python -m streameval serve --port 0 --state-dir TMP``
subprocess (durable: every batch is in the SQLite write-ahead log, fsync'd with group
commit, before its 200; the default monitor), loaded by real HTTP clients over loopback,
for each cell of

    batch size (events per POST /events) 1, 100, 1000
    x concurrent clients 8, 32
    x checkpoints off (--checkpoint-events 0 --checkpoint-seconds 0)
      / on (--checkpoint-seconds 1 --checkpoint-events 0: one due 1 s after the previous
        one ends, whatever the cell's throughput; how many completed is reported)

Each cell gets a fresh server and state directory. Each client is one keep-alive
``http.client`` connection (TCP_NODELAY) posting, one request after the other, JSON
arrays of ``{"ts", "label", "score"}``: ``score`` a continuous float (a logistic of a
normal, every digit kept: nearly all distinct, as real models emit, so the cumulative
AUC/AP hold one entry per event and the checkpoint is not trivial), ``label`` ~
Bernoulli(0.2) (the score is informative: AUC about 0.8), ``ts`` the client's wall
clock at send time plus a microsecond per event (increasing per client). Bodies are
built at send time, so scores never repeat.

Each cell runs ``--warmup`` seconds (default 1) unmeasured, then ``--seconds``
(default 5) measured: events/s counts the events of the requests that completed
inside the measured window, divided by its length; p50/p99/max are over those
requests' latencies (send to full response read, client side). ``ckpts`` is
``W/A``: W checkpoints completed inside the measured window (the parent watches
``checkpoint.json`` being replaced, every 20 ms), A in the whole cell
(``service.checkpoints`` of ``GET /snapshot``); a cell with checkpoints "on" but fewer
than 2 in its window is flagged in the summary, since its p99 then says little about
them. ``state MB`` is the size of the monitor's checkpoint at the end
(``checkpoint.json``, written by a ``POST /checkpoint`` after the run, not timed). The
server's event count is checked against the events acknowledged to the clients
(``lost`` column, 0 expected). The server is then killed (its state is discarded; a
graceful stop would only add a final checkpoint).

The client side is not the limit, and the table shows it: the clients run in
``--client-procs`` processes (default 4; ``multiprocessing``), each with
clients/procs threads, one connection each, so no GIL is shared by more than 8
clients. The CPU time of every client process and of the server process is read over
the measured window (``time.process_time`` in each worker, ``/proc/PID/stat`` for the
server) and printed as cores used: ``srv cpu`` (the server; up to 1.0 is its Python
thread, above that is SQLite/fsync and JSON work outside the GIL, and the checkpoint
children it forked and reaped meanwhile, if any), ``cli cpu`` (all client processes
together) and ``cli max`` (the busiest client process: far below 1.0 means its GIL was
not saturated), and ``other cpu``: what the rest of the machine
used meanwhile (``/proc/stat`` busy time less the server and the clients: other jobs),
so that a run on a busy machine can be told from a slow server. On a 2-core machine
the clients and the server share the cores: see the figures below.

Then two summaries: per (batch, clients), the p99 with checkpoints over the p99
without (target: at most 2x) and the throughput ratio; and the events/s of
8 clients x 100 events, durable, against the target of 36 000 events/s (3x the
12 000 measured before).

    python benchmarks/bench_service.py                          # the 12 cells, ~3 min
    python benchmarks/bench_service.py --quick                  # 2 s per cell, ~1.5 min
    python benchmarks/bench_service.py --batch 100 --clients 8  # 2 cells (off, on)
    python benchmarks/bench_service.py --batch 100 --clients 8 --checkpoints on --seconds 10
    python benchmarks/bench_service.py --old-socket --batch 100 --clients 8 --checkpoints off

``--attack`` measures instead what hostile clients cost good traffic, against a server
with 1 000 segments (``[monitor] group_by = "seg"``; every segment holds events before
the run): ``--clients`` connections (default 2 here) post batches of 100 good events,
alone ("none"), then beside one client posting refused bodies just over 1 MiB in a loop
(valid events but the last, so each is parsed whole: "gc-stall"), then beside two
clients posting 1 MB segment values and 1 MB ids in a loop ("byte-cap"); the three
phases alternate ``--pairs`` times (default 5), ``--seconds`` each (default 3), and the
table shows the median of each phase's requests/s and its p50/p99 latency, and the
ratio to "none". ``--refusal-penalty X`` runs the server with ``[serve]
refusal_penalty = X`` (0: off) to show what the per-host penalty buys. Results:
``benchmarks/results/bench_service_attack.json``.

    python benchmarks/bench_service.py --attack                      # ~1 min
    python benchmarks/bench_service.py --attack --refusal-penalty 0  # without the penalty

``--longrun EVENTS`` runs one server (durable, the default monitor unless ``--config``,
checkpoints at the service's defaults: every 100 000 events or 60 s) over EVENTS
events, posted by ``--clients`` connections (default 8 here) in batches of
``--batch`` events (default 100 here), spread over ``--client-procs`` processes. Each
event has a unique id (``"e<n>"``, ``n`` its position in the stream), an event time
``n / --event-rate`` seconds (default 1 000 events a second) after the stream's start
(set so that the last one is about the start of the run), a label ~ Bernoulli(0.3) and
a continuous score; each request carries an ``Idempotency-Key``, and one that fails on
its connection is sent again with it (counted). Every ``--every`` events (default
5 000 000) it prints a row for the stretch since the previous one: events/s, the
server's CPU seconds per million events (``/proc/PID/stat``), p50/p99/max latency of
the stretch's requests, the server's RSS at the stretch's end, its mean and largest value over the stretch
(read every 50 ms) and its peak RSS since start (``/proc/PID/status``), the
checkpoints written so far (renames of the checkpoint's manifest), and the cores the
server, the clients and the rest of the machine used. Then the flatness check: CPU per
million and events/s of the last stretch against the second one (target: within
1.3x), and RSS against the stretch that ends at 10 M events, or the first row in a
shorter run (target: at most 1.2x), three ways: the mean over the stretch (the steady
size), the largest value over the stretch (what a container must hold; it includes a
checkpoint's capture) and the single reading at the stretch's end. The server's event count is checked against the events sent.
Results: ``benchmarks/results/bench_service_longrun.json``.

    python benchmarks/bench_service.py --longrun 30000000 --every 5000000  # ~1 h
    python benchmarks/bench_service.py --longrun 600000 --every 100000     # ~1 min

``--state-events N,N`` measures what checkpoints cost a service that holds a long
stream: for each N, a server (checkpoints off by default; the default monitor unless
``--config``) is given N continuous-score events first (two connections, batches of
10 000), writes one checkpoint untimed (as a service that has been running has), then
``--pairs`` pairs (default 2 here) of windows of ``--seconds`` (default 25 here) of
``--clients`` (default 8 here) x ``--batch`` (default 100 here) events alternate: one
without checkpoints, one with a ``POST /checkpoint`` every ``--state-checkpoint-every``
seconds (default 10; the periodic writer's path). The table shows the median p99 of
each kind and their ratio (target: at most 1.2x), then the seconds from SIGTERM to the
server's exit (its final checkpoint; target: within 10 s) and a restart's time to
serve again (its event count checked against the stopped server's). Results:
``benchmarks/results/bench_service_state.json``.

    python benchmarks/bench_service.py --state-events 1000000,10000000  # ~20 min
    python benchmarks/bench_service.py --state-events 200000 --seconds 5  # ~1 min

``--old-socket`` starts the server with its listening socket made without TCP_NODELAY
(protocol 0, so asyncio leaves Nagle's algorithm on for accepted connections: every
keep-alive response then waits for the client's delayed ACK, about 40 ms).
``--checkpoint-seconds`` / ``--checkpoint-events`` change the "on" setting; ``--config``
serves another monitor. Traffic goes to 127.0.0.1 only. Timings are wall-clock on
whatever machine runs it; compare rows of one run, not runs.

Results: ``benchmarks/results/bench_service.json`` (``--json PATH`` writes elsewhere), shown on
the documentation's performance page with the parameters, machine and versions of the run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import multiprocessing as mp
import os
import random
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import _results as R

#: Runs ``streameval serve`` with the listening socket made without TCP_NODELAY
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

NO_CHECKPOINTS = ("--checkpoint-events", "0", "--checkpoint-seconds", "0")
TARGET_EVENTS = 36_000  # events/s of 8 clients x 100 events, durable (3x 12 000)
TARGET_P99_RATIO = 2.0  # p99 with checkpoints / p99 without


# --------------------------------------------------------------------------- server


def start_server(state_dir, extra=(), config=None, old_socket=False):
    """Start ``streameval serve`` on a free port; return (process, port)."""
    prog = ["-c", OLD_BIND_SHIM] if old_socket else ["-m", "streameval", "serve"]
    cmd = [sys.executable, *prog, "--port", "0", "--state-dir", state_dir, *extra]
    if config is not None:
        cmd += ["--config", config]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout=120):
        proc.kill()
        raise SystemExit("the server did not start")
    line = proc.stdout.readline().decode()
    marker = "listening on http://127.0.0.1:"
    if marker not in line:
        proc.kill()
        raise SystemExit(f"unexpected server output: {line!r}")
    port = int(line.split(marker, 1)[1].split()[0].rstrip("/"))
    return proc, port


def cpu_seconds(pid):
    """User + system CPU seconds of process ``pid`` (all its threads) and of its
    children once reaped (a checkpoint written by a forked child), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return math.nan


def machine_busy_seconds():
    """CPU seconds all cores spent busy (not idle, not waiting for I/O), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return math.nan
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # less idle, iowait


def watch_checkpoints(path, until, every=0.02):
    """Checkpoints written to ``path`` until ``until`` (monotonic): each is a new file
    renamed into place, so a new (inode, mtime) is one more."""
    def ident():
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns

    last, count = ident(), 0
    while time.monotonic() < until:
        time.sleep(min(every, max(0.0, until - time.monotonic())))
        now = ident()
        if now is not None and now != last:
            count += 1
        last = now
    return count


def request(port, method, path, body=None, timeout=300):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{method} {path}: HTTP {r.status}: {data[:200]!r}")
        return json.loads(data)
    finally:
        conn.close()


# --------------------------------------------------------------------------- clients


def make_body(rng, batch, now):
    """A JSON array of ``batch`` events: ts from ``now`` (1 us apart), label ~
    Bernoulli(0.2), score a full-precision logistic of a normal (informative)."""
    rand, gauss, exp = rng.random, rng.gauss, math.exp
    parts = []
    for i in range(batch):
        y = 1 if rand() < 0.2 else 0
        s = 1.0 / (1.0 + exp(1.0 - 2.0 * y - gauss(0.0, 1.0)))
        parts.append(f'{{"ts":{now + i * 1e-6:.6f},"label":{y},"score":{s!r}}}')
    return ("[" + ",".join(parts) + "]").encode()


def client_thread(port, batch, seed, t_start, t_end, out, errors):
    """One connection posting batches until ``t_end``; appends (latencies in the
    window, events in the window, events acknowledged in all) to ``out``."""
    rng = random.Random(seed)
    lat, in_window, acked = [], 0, 0
    headers = {"Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            body = make_body(rng, batch, time.time())
            t0 = time.monotonic()
            if t0 >= t_end:
                break
            conn.request("POST", "/events", body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            t1 = time.monotonic()
            if r.status != 200:
                raise RuntimeError(f"HTTP {r.status}: {data[:200]!r}")
            acked += batch
            if t_start <= t1 <= t_end:
                lat.append(t1 - t0)
                in_window += batch
    except Exception as e:  # reported by the parent
        errors.append(f"{type(e).__name__}: {e}")
    finally:
        conn.close()
        out.append((lat, in_window, acked))


def client_process(port, batch, threads, seed, t_start, t_end, results):
    """``threads`` client threads in this process; sends back their figures and this
    process's CPU seconds over the measured window."""
    out, errors = [], []
    ts = [threading.Thread(target=client_thread,
                           args=(port, batch, seed * 1000 + k, t_start, t_end, out, errors))
          for k in range(threads)]
    for t in ts:
        t.start()
    time.sleep(max(0.0, t_start - time.monotonic()))
    c0 = time.process_time()
    time.sleep(max(0.0, t_end - time.monotonic()))
    c1 = time.process_time()
    for t in ts:
        t.join()
    lat = [x for o in out for x in o[0]]
    results.put({"lat": lat, "in_window": sum(o[1] for o in out),
                 "acked": sum(o[2] for o in out), "cpu": c1 - c0, "errors": errors})


# --------------------------------------------------------------------------- one cell


def percentile(sorted_xs, q):
    if not sorted_xs:
        return math.nan
    k = (len(sorted_xs) - 1) * q / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (k - lo)


def run_cell(batch, clients, checkpoints, args):
    ckpt = (("--checkpoint-events", str(args.checkpoint_events),
             "--checkpoint-seconds", str(args.checkpoint_seconds))
            if checkpoints else NO_CHECKPOINTS)
    procs_n = max(1, min(clients, args.client_procs))
    per = [clients // procs_n + (1 if i < clients % procs_n else 0) for i in range(procs_n)]
    ctx = mp.get_context("fork")
    with tempfile.TemporaryDirectory(prefix="bench_service.") as tmp:
        state = os.path.join(tmp, "state")
        server, port = start_server(state, ckpt, args.config, args.old_socket)
        try:
            results = ctx.Queue()
            t_start = time.monotonic() + 0.3 + args.warmup  # 0.3 s: processes start
            t_end = t_start + args.seconds
            workers = [ctx.Process(target=client_process,
                                   args=(port, batch, n, 1 + i, t_start, t_end, results))
                       for i, n in enumerate(per)]
            for w in workers:
                w.start()
            time.sleep(max(0.0, t_start - time.monotonic()))
            s0, m0 = cpu_seconds(server.pid), machine_busy_seconds()
            in_window = watch_checkpoints(os.path.join(state, "checkpoint.json"), t_end)
            s1, m1 = cpu_seconds(server.pid), machine_busy_seconds()
            got = [results.get(timeout=600) for _ in workers]
            for w in workers:
                w.join(60)
            errors = [e for g in got for e in g["errors"]]
            if errors:
                raise RuntimeError(f"client error: {errors[0]} ({len(errors)} in all)")
            snap = request(port, "GET", "/snapshot")
            request(port, "POST", "/checkpoint", body=b"")  # for the state's size
            size = os.path.getsize(os.path.join(state, "checkpoint.json"))
        finally:
            server.send_signal(signal.SIGKILL)
            server.wait(60)
            server.stdout.close()
    lat = sorted(x for g in got for x in g["lat"])
    acked = sum(g["acked"] for g in got)
    return {
        "batch": batch, "clients": clients, "ckpt": checkpoints,
        "events_s": sum(g["in_window"] for g in got) / args.seconds,
        "req_s": len(lat) / args.seconds,
        "p50": 1e3 * percentile(lat, 50), "p99": 1e3 * percentile(lat, 99),
        "max": 1e3 * lat[-1] if lat else math.nan,
        "ckpts": snap["service"]["checkpoints"],
        "ckpts_in_window": in_window,
        "state_mb": size / 1e6,
        "lost": acked - snap["n"],
        "srv_cpu": (s1 - s0) / args.seconds,
        "cli_cpu": sum(g["cpu"] for g in got) / args.seconds,
        "cli_max": max(g["cpu"] for g in got) / args.seconds,
        "procs": procs_n,
        # everything else the machine ran meanwhile (other jobs; this script's parent
        # sleeps), in cores
        "other_cpu": max(0.0, m1 - m0 - (s1 - s0) - sum(g["cpu"] for g in got)) / args.seconds,
    }


# --------------------------------------------------------------------------- output


def fmt(x, spec):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def table(rows):
    lines = ["| batch | clients | checkpoints | ckpts | events/s | requests/s | p50 ms | "
             "p99 ms | max ms | state MB | lost | srv cpu | cli cpu | cli max | other cpu |",
             "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(
            f"| {r['batch']} | {r['clients']} | {'on' if r['ckpt'] else 'off'} | "
            f"{r['ckpts_in_window']}/{r['ckpts']} | {r['events_s']:,.0f} | {r['req_s']:,.0f} | "
            f"{fmt(r['p50'], '.1f')} | "
            f"{fmt(r['p99'], '.1f')} | {fmt(r['max'], '.0f')} | {r['state_mb']:.1f} | "
            f"{r['lost']} | {r['srv_cpu']:.2f} | {r['cli_cpu']:.2f} | {r['cli_max']:.2f} | "
            f"{r['other_cpu']:.2f} |")
    return "\n".join(lines)


def summary(rows):
    by = {(r["batch"], r["clients"], r["ckpt"]): r for r in rows}
    lines = []
    pairs = [(b, c) for (b, c, k) in by if k and (b, c, False) in by]
    if pairs:
        lines += ["p99 with checkpoints / p99 without (target <= "
                  f"{TARGET_P99_RATIO:g}x), events/s with / without:", "",
                  "| batch | clients | p99 off ms | p99 on ms | p99 ratio | target met "
                  "| events/s ratio |",
                  "| ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
        for b, c in sorted(pairs):
            on, off = by[(b, c, True)], by[(b, c, False)]
            ratio = on["p99"] / off["p99"]
            met = "yes" if ratio <= TARGET_P99_RATIO else "NO"
            if on["ckpts_in_window"] < 2:
                met += f" (only {on['ckpts_in_window']} checkpoint(s) in the window)"
            lines.append(f"| {b} | {c} | {off['p99']:.1f} | {on['p99']:.1f} | {ratio:.2f}x | "
                         f"{met} | {on['events_s'] / off['events_s']:.2f} |")
        lines.append("")
    for k in (False, True):
        r = by.get((100, 8, k))
        if r is not None:
            lines.append(f"8 clients x 100 events, checkpoints {'on' if k else 'off'}: "
                         f"{r['events_s']:,.0f} events/s = {r['events_s'] / TARGET_EVENTS:.2f}"
                         f" x the target of {TARGET_EVENTS:,} "
                         f"({'met' if r['events_s'] >= TARGET_EVENTS else 'NOT met'})")
    return "\n".join(lines)


# --------------------------------------------------------------------------- attacks

SEGMENTS = 1000


def segment_events(n, start, rng):
    return [{"ts": 1_700_000_000 + start + i, "label": int(rng.random() < 0.2),
             "score": rng.random(), "seg": f"s{rng.randrange(SEGMENTS)}"} for i in range(n)]


def _poster(port, body, status, until, lat, errors, stop=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    headers = {"Content-Type": "application/json"}
    try:
        while time.monotonic() < until and not (stop is not None and stop.is_set()):
            t0 = time.perf_counter()
            conn.request("POST", "/events", body=body, headers=headers)
            r = conn.getresponse()
            r.read()
            if r.status != status:
                errors.append(r.status)
                return
            lat.append(time.perf_counter() - t0)
    except Exception as e:  # reported by the caller
        errors.append(repr(e))
    finally:
        conn.close()


def attack_phase(port, good, attackers, clients, seconds):
    """Requests/s, p50 and p99 (ms) of ``clients`` posting ``good`` for ``seconds``,
    beside one connection per body of ``attackers`` (each answered 400), and how many
    attack requests were answered."""
    until = time.monotonic() + seconds
    stop = threading.Event()
    lat, bad, errors = [], [], []
    threads = [threading.Thread(target=_poster, args=(port, body, 400, until + 60, bad,
                                                      errors, stop), daemon=True)
               for body in attackers]
    for t in threads:
        t.start()
    if attackers:
        time.sleep(0.2)  # the attackers are sending
        until = time.monotonic() + seconds
    lats = [[] for _ in range(clients)]
    good_threads = [threading.Thread(target=_poster, args=(port, good, 200, until, lats[k],
                                                           errors)) for k in range(clients)]
    t0 = time.monotonic()
    for t in good_threads:
        t.start()
    for t in good_threads:
        t.join()
    took = time.monotonic() - t0
    stop.set()
    for t in threads:
        t.join(120)
    if errors:
        raise SystemExit(f"unexpected answers: {errors[:5]}")
    lat = sorted(x for ls in lats for x in ls)
    return (len(lat) / took, 1000 * percentile(lat, 50), 1000 * percentile(lat, 99),
            len(bad))


def attack_mode(args):
    rng = random.Random(1)
    ev = json.dumps(segment_events(1, 0, rng)[0]).encode()
    n = (1 << 20) // (len(ev) + 1) + 10
    kinds = {
        "none": [],
        "gc-stall": [b"[" + b",".join([ev] * n) + b',{"ts": 1, "label": 3, "score": 0.5}]'],
        "byte-cap": [json.dumps([{**segment_events(1, 0, rng)[0], "seg": "x" * 1_000_000}]).encode(),
                     json.dumps([{**segment_events(1, 0, rng)[0], "id": "i" * 1_000_000}]).encode()],
    }
    good = json.dumps(segment_events(100, 10_000_000, rng)).encode()
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "monitor.toml")
        with open(config, "w") as f:
            f.write('[monitor]\ngroup_by = "seg"\n')
            if args.refusal_penalty is not None:
                f.write(f"[serve]\nrefusal_penalty = {args.refusal_penalty}\n")
        proc, port = start_server(os.path.join(tmp, "state"), NO_CHECKPOINTS, config=config)
        try:
            for k in range(10):  # 20 000 events: every segment has some
                request(port, "POST", "/events", json.dumps(segment_events(2000, 2000 * k, rng)))
            attack_phase(port, good, kinds["gc-stall"], args.clients, 1.0)  # first release
            runs = {k: [] for k in kinds}
            for p in range(args.pairs):
                for kind, bodies in kinds.items():
                    r = attack_phase(port, good, bodies, args.clients, args.seconds)
                    runs[kind].append(r)
                    print(f"  pair {p + 1}/{args.pairs} {kind:>8}: {r[0]:7.1f} requests/s, "
                          f"p50 {r[1]:7.1f} ms, p99 {r[2]:7.1f} ms, {r[3]} attack requests",
                          flush=True)
            metrics = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            metrics.request("GET", "/metrics")
            text = metrics.getresponse().read().decode()
            metrics.close()
        finally:
            proc.kill()
            proc.wait()
    med = {k: [statistics.median(r[i] for r in v) for i in range(4)] for k, v in runs.items()}
    base = med["none"][0]
    tab = R.table("attacks", "Good traffic beside hostile clients: 1 000 segments, batches of "
                  "100 events, durable", ["attack", "requests/s", "ratio to none", "p50 ms",
                                          "p99 ms", "attack requests"],
                  note=f"median of {args.pairs} alternating phases of {args.seconds:g} s, "
                       f"{args.clients} good clients; refusal_penalty "
                       f"{'default' if args.refusal_penalty is None else args.refusal_penalty}")
    print(f"\n{'attack':>9} {'req/s':>8} {'ratio':>6} {'p50 ms':>8} {'p99 ms':>8} {'attacks':>8}")
    for kind, (rps, p50, p99, nbad) in med.items():
        tab.add(kind, rps, rps / base, p50, p99, nbad)
        print(f"{kind:>9} {rps:8.1f} {rps / base:6.2f} {p50:8.1f} {p99:8.1f} {nbad:8.0f}")
    for line in text.splitlines():
        if line.startswith(("streameval_memory_release", "streameval_refusal_wait")):
            print("  " + line)
    print(f"  /metrics: {len(text.encode()):,} bytes")
    R.param(metrics_bytes=len(text.encode()))
    for kind in ("gc-stall", "byte-cap"):
        R.figure(f"{kind}_ratio", f"good traffic's requests/s beside the {kind} attack",
                 med[kind][0], "requests/s", peer="without the attack", peer_value=base)


# --------------------------------------------------------------------------- long run

LONGRUN_POSITIVES = 0.3  # share of positive labels in --longrun
#: Flat within these factors (last stretch against the second one; RSS of the last
#: stretch against the one ending at 10 M events, or the first one in a shorter run).
LONGRUN_CPU_FACTOR = 1.3
LONGRUN_RSS_FACTOR = 1.2
LONGRUN_RSS_REFERENCE = 10_000_000


def longrun_body(index, batch, t_base, rate, seed):
    """Batch ``index`` of a long run: ``batch`` events with ids ``e<n>`` (``n`` the
    event's position in the stream, unique), event times ``t_base + n / rate`` (so
    increasing along the stream), labels ~ Bernoulli(0.3), continuous scores (a full
    precision logistic of a normal, informative: AUC about 0.9)."""
    rng = random.Random(seed * 1_000_003 + index)
    rand, gauss, exp = rng.random, rng.gauss, math.exp
    n0 = index * batch
    parts = []
    for j in range(batch):
        n = n0 + j
        y = 1 if rand() < LONGRUN_POSITIVES else 0
        s = 1.0 / (1.0 + exp(1.0 - 2.0 * y - gauss(0.0, 1.0)))
        parts.append(f'{{"id":"e{n}","ts":{t_base + n / rate:.6f},"label":{y},"score":{s!r}}}')
    return ("[" + ",".join(parts) + "]").encode()


def longrun_thread(port, batch, n_batches, t_base, rate, seed, counter, lat, done_at,
                   retries, errors):
    """One keep-alive connection: claims the next batch index from ``counter`` and posts
    it (``Idempotency-Key: <seed>-<index>``) until every batch is claimed. A request
    that fails on the connection is sent again with the same key on a new one (at most 3
    times; the service counts it once). Writes each batch's latency (first send to the
    last response read) and completion time (monotonic) into ``lat`` / ``done_at``."""
    headers = {"Content-Type": "application/json"}

    def connect():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        c.connect()
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return c

    conn = connect()
    try:
        while True:
            with counter.get_lock():
                i = counter.value
                counter.value = i + 1
            if i >= n_batches:
                return
            body = longrun_body(i, batch, t_base, rate, seed)
            hdrs = {**headers, "Idempotency-Key": f"{seed}-{i}"}
            t0 = time.monotonic()
            for attempt in range(4):
                try:
                    conn.request("POST", "/events", body=body, headers=hdrs)
                    r = conn.getresponse()
                    data = r.read()
                    break
                except (OSError, http.client.HTTPException):
                    if attempt == 3:
                        raise
                    with retries.get_lock():
                        retries.value += 1
                    conn.close()
                    conn = connect()
            t1 = time.monotonic()
            if r.status != 200:
                raise RuntimeError(f"batch {i}: HTTP {r.status}: {data[:200]!r}")
            lat[i] = t1 - t0
            done_at[i] = t1
    except Exception as e:  # reported by the parent
        errors.put(f"{type(e).__name__}: {e}")
    finally:
        conn.close()


def longrun_process(port, batch, n_batches, threads, t_base, rate, seed, counter, lat,
                    done_at, retries, errors, cpu, slot):
    """``threads`` client threads in this process; its CPU seconds go to ``cpu[slot]``
    when they are done."""
    ts = [threading.Thread(target=longrun_thread,
                           args=(port, batch, n_batches, t_base, rate, seed, counter, lat,
                                 done_at, retries, errors))
          for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    cpu[slot] = time.process_time()


def proc_memory_mb(pid):
    """(RSS, peak RSS) of process ``pid`` in MB (NaN when not known), from
    /proc/PID/status (:func:`_results.proc_status_kb`)."""
    kb = R.proc_status_kb(pid, "VmRSS", "VmHWM")
    return tuple(kb[k] * 1024 / 1e6 if k in kb else math.nan for k in ("VmRSS", "VmHWM"))


def _drain(stream):
    """Read a subprocess's pipe until it closes, so that its writes never block."""
    for _ in iter(stream.readline, b""):
        pass


def longrun_mode(args):
    """The service over ``args.longrun`` events; one row per ``args.every`` events."""
    import numpy as np

    batch, clients = args.batch, args.clients
    n_batches = -(-args.longrun // batch)
    per_stretch = args.every // batch
    n_stretches = -(-n_batches // per_stretch)
    procs_n = max(1, min(clients, args.client_procs))
    per = [clients // procs_n + (1 if i < clients % procs_n else 0) for i in range(procs_n)]
    ctx = mp.get_context("fork")
    counter, retries = ctx.Value("q", 0), ctx.Value("q", 0)
    lat, done_at = ctx.RawArray("d", n_batches), ctx.RawArray("d", n_batches)
    cpu_end = ctx.RawArray("d", procs_n)
    lat_v, done_v = np.frombuffer(lat), np.frombuffer(done_at)
    errors = ctx.Queue()
    # event times end about now: the stream is what `rate` events a second produced
    # up to the start (the service refuses times more than an hour ahead of its clock)
    t_base = time.time() - n_batches * batch / args.event_rate
    rows = []
    print(f"  {'events':>12} {'events/s':>9} {'srv CPU s/M':>11} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'max ms':>7} {'RSS MB':>7} {'mean MB':>7} {'top MB':>7} {'peak MB':>7} "
          f"{'ckpts':>5} {'srv cores':>9} "
          f"{'cli cores':>9} {'other':>6}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_service_longrun.") as tmp:
        state = os.path.join(tmp, "state")
        server, port = start_server(state, (), args.config)
        threading.Thread(target=_drain, args=(server.stdout,), daemon=True).start()
        ckpt_path = os.path.join(state, "checkpoint.json")

        def ckpt_ident():
            try:
                st = os.stat(ckpt_path)
            except OSError:
                return None
            return st.st_ino, st.st_mtime_ns

        try:
            workers = [ctx.Process(target=longrun_process,
                                   args=(port, batch, n_batches, n, t_base, args.event_rate,
                                         args.seed, counter, lat, done_at, retries, errors,
                                         cpu_end, slot))
                       for slot, n in enumerate(per)]
            t_prev = time.monotonic()
            s_prev, m_prev = cpu_seconds(server.pid), machine_busy_seconds()
            for w in workers:
                w.start()
            c_prev = 0.0
            last_c = {w.pid: 0.0 for w in workers}
            ident, ckpts = ckpt_ident(), 0
            for k in range(n_stretches):
                lo, hi = k * per_stretch, min((k + 1) * per_stretch, n_batches)
                samples = []  # (the server's RSS at each poll: its mean and peak here)
                while np.count_nonzero(done_v[lo:hi]) < hi - lo:
                    time.sleep(0.05)
                    samples.append(proc_memory_mb(server.pid)[0])
                    now = ckpt_ident()
                    if now is not None and now != ident:
                        ckpts += 1
                    ident = now
                    if not errors.empty():
                        raise RuntimeError(f"client error: {errors.get()}")
                    if any(w.exitcode not in (None, 0) for w in workers):
                        raise RuntimeError("a client process failed")
                t = time.monotonic()
                s, m = cpu_seconds(server.pid), machine_busy_seconds()
                if k == n_stretches - 1:  # the clients are done: their own final figure
                    for w in workers:
                        w.join(120)
                    c = sum(cpu_end)
                else:
                    for w in workers:
                        c = cpu_seconds(w.pid)
                        if not math.isnan(c):
                            last_c[w.pid] = max(last_c[w.pid], c)
                    c = sum(last_c.values())
                rss, hwm = proc_memory_mb(server.pid)
                samples = [x for x in samples + [rss] if not math.isnan(x)]
                ls = np.sort(lat_v[lo:hi])
                ev, dt = (hi - lo) * batch, t - t_prev
                r = {"events": hi * batch, "events_s": ev / dt,
                     "cpu_per_million": (s - s_prev) * 1e6 / ev,
                     "p50": 1e3 * float(np.percentile(ls, 50)),
                     "p99": 1e3 * float(np.percentile(ls, 99)), "max": 1e3 * float(ls[-1]),
                     "rss_mb": rss, "peak_rss_mb": hwm, "ckpts": ckpts,
                     "rss_mean_mb": sum(samples) / len(samples),
                     "rss_max_mb": max(samples),
                     "srv_cores": (s - s_prev) / dt, "cli_cores": (c - c_prev) / dt,
                     "other_cores": max(0.0, (m - m_prev) - (s - s_prev) - (c - c_prev)) / dt,
                     "seconds": dt}
                rows.append(r)
                print(f"  {r['events']:>12,} {r['events_s']:>9,.0f} {r['cpu_per_million']:>11.1f} "
                      f"{r['p50']:>7.1f} {r['p99']:>7.1f} {r['max']:>7.0f} {rss:>7,.0f} "
                      f"{r['rss_mean_mb']:>7,.0f} {r['rss_max_mb']:>7,.0f} {hwm:>7,.0f} {ckpts:>5} {r['srv_cores']:>9.2f} {r['cli_cores']:>9.2f} "
                      f"{r['other_cores']:>6.2f}", flush=True)
                t_prev, s_prev, m_prev, c_prev = t, s, m, c
            for w in workers:
                w.join(120)
            if not errors.empty():
                raise RuntimeError(f"client error: {errors.get()}")
            snap = request(port, "GET", "/snapshot")
        finally:
            server.send_signal(signal.SIGKILL)
            server.wait(60)
    sent = n_batches * batch
    lost = sent - snap["n"]
    print(f"\n{sent:,} events sent and acknowledged, {snap['n']:,} in the server's monitor "
          f"(lost: {lost}); {retries.value} requests sent again after a connection error; "
          f"{snap['service']['checkpoints']} checkpoints written in all")
    R.param(batches=n_batches, events_sent=sent, lost=lost, retried_requests=retries.value,
            checkpoints_total=snap["service"]["checkpoints"])
    longrun_results(rows, args)
    return lost


def longrun_results(rows, args):
    """The rows of a long run as a table, curves and flatness figures."""
    tab = R.table("longrun", f"streameval serve over a long stream: {args.clients} clients x "
                  f"{args.batch} events per request, durable, checkpoints at the service's "
                  "defaults, default monitor, continuous scores",
                  ["events", "events/s", "server CPU s per million", "p50 ms", "p99 ms",
                   "max ms", "RSS MB", "mean RSS MB", "largest RSS MB", "peak RSS MB",
                   "checkpoints", "server cores", "client cores", "other cores"],
                  note="each row is the stretch since the previous one (the first includes "
                       "the server's warm-up); checkpoints: written so far, seen as "
                       "renames of the checkpoint's manifest; 'other cores': what the rest "
                       "of the machine used meanwhile; RSS: at the stretch's end; mean "
                       "and largest RSS: over the stretch, read every 50 ms; peak RSS: "
                       "since the server started (VmHWM)")
    for r in rows:
        tab.add(r["events"], r["events_s"], r["cpu_per_million"], r["p50"], r["p99"],
                r["max"], r["rss_mb"], r["rss_mean_mb"], r["rss_max_mb"], r["peak_rss_mb"],
                r["ckpts"], r["srv_cores"],
                r["cli_cores"], r["other_cores"])
    xs = [r["events"] for r in rows]
    R.curve("longrun_cpu", "Server CPU seconds per million events along the stream",
            "events", "CPU s per million", xs, {"server": [r["cpu_per_million"] for r in rows]})
    R.curve("longrun_rss", "Server resident memory along the stream", "events", "MB", xs,
            {"RSS": [r["rss_mb"] for r in rows], "mean RSS": [r["rss_mean_mb"] for r in rows],
             "largest RSS": [r["rss_max_mb"] for r in rows],
             "peak RSS": [r["peak_rss_mb"] for r in rows]})
    R.curve("longrun_latency", "Request latency along the stream", "events", "ms", xs,
            {"p50": [r["p50"] for r in rows], "p99": [r["p99"] for r in rows]})
    if len(rows) < 2:
        return
    second, last = rows[1], rows[-1]
    ref = next((r for r in rows[:-1] if r["events"] >= LONGRUN_RSS_REFERENCE), rows[0])
    flat = R.table("longrun_flat", "Flat cost and memory: the last stretch against the "
                   "second, RSS against the stretch that ends at 10 M events",
                   ["measure", "reference", "reference value", "at the end", "ratio",
                    "target", "met"],
                   note="the reference for RSS is the row at 10 M events, or the first row "
                        "in a shorter run; mean and largest RSS are over each stretch")
    checks = [
        ("server CPU s per million", "second stretch", second["cpu_per_million"],
         last["cpu_per_million"], f"<= {LONGRUN_CPU_FACTOR:g}", True, LONGRUN_CPU_FACTOR),
        ("events/s", "second stretch", second["events_s"], last["events_s"],
         f">= 1/{LONGRUN_CPU_FACTOR:g}", False, 1 / LONGRUN_CPU_FACTOR),
        ("p99 ms", "second stretch", second["p99"], last["p99"], "-", None, None),
        ("mean RSS MB", f"{ref['events']:,} events", ref["rss_mean_mb"],
         last["rss_mean_mb"], f"<= {LONGRUN_RSS_FACTOR:g}", True, LONGRUN_RSS_FACTOR),
        ("largest RSS MB", f"{ref['events']:,} events", ref["rss_max_mb"],
         last["rss_max_mb"], f"<= {LONGRUN_RSS_FACTOR:g}", True, LONGRUN_RSS_FACTOR),
        ("RSS MB at the end", f"{ref['events']:,} events", ref["rss_mb"], last["rss_mb"],
         f"<= {LONGRUN_RSS_FACTOR:g}", True, LONGRUN_RSS_FACTOR),
    ]
    print(f"\n{'measure':>26} {'reference':>18} {'value':>10} {'at end':>10} {'ratio':>6}  target")
    for name, refname, v0, v1, target, lower, bound in checks:
        ratio = v1 / v0 if v0 else math.nan
        met = "-" if bound is None else (
            "yes" if (ratio <= bound if lower else ratio >= bound) else "NO")
        flat.add(name, refname, v0, v1, ratio, target, met)
        print(f"{name:>26} {refname:>18} {v0:>10,.1f} {v1:>10,.1f} {ratio:>6.2f}  {target} "
              f"{met}")
    R.figure("longrun_cpu_per_million", "server CPU per million events, last stretch",
             last["cpu_per_million"], "s", peer="the second stretch",
             peer_value=second["cpu_per_million"], better="lower",
             note=f"flat: at most {LONGRUN_CPU_FACTOR:g}x")
    R.figure("longrun_events_s", "events/s, last stretch", last["events_s"], "events/s",
             peer="the second stretch", peer_value=second["events_s"])
    R.figure("longrun_rss", "server RSS at the end", last["rss_mb"], "MB",
             peer=f"RSS at {ref['events']:,} events", peer_value=ref["rss_mb"],
             better="lower", note=f"flat: at most {LONGRUN_RSS_FACTOR:g}x")
    R.figure("longrun_rss_mean", "server mean RSS over the last stretch", last["rss_mean_mb"],
             "MB", peer=f"over the stretch ending at {ref['events']:,} events",
             peer_value=ref["rss_mean_mb"], better="lower",
             note=f"flat: at most {LONGRUN_RSS_FACTOR:g}x")
    R.figure("longrun_rss_largest", "server largest RSS over the last stretch",
             last["rss_max_mb"], "MB", peer=f"over the stretch ending at {ref['events']:,} "
             "events", peer_value=ref["rss_max_mb"], better="lower",
             note=f"flat: at most {LONGRUN_RSS_FACTOR:g}x")



# --------------------------------------------------------------------------- state mode


def post_events(port, n, threads=2, batch=10_000, seed=100):
    """Post ``n`` continuous-score events (batches of ``batch``, event times 0, 1, ...)
    from ``threads`` connections; returns the seconds it took."""
    import numpy as np

    per = -(-n // threads)
    errors = []

    def run(j):
        rng = np.random.default_rng(seed + j)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            for i in range(0, min(per, n - j * per), batch):
                k = min(batch, per - i, n - j * per - i)
                y = rng.random(k) < 0.3
                s = (rng.random(k) * 0.6 + 0.3 * y).tolist()
                t0 = j * per + i
                body = ("[" + ",".join(f'{{"ts":{t0 + x},"label":{int(y[x])},"score":{s[x]!r}}}'
                                       for x in range(k)) + "]").encode()
                conn.request("POST", "/events", body=body,
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}: {data[:200]!r}")
        except Exception as e:  # reported below
            errors.append(e)
        finally:
            conn.close()

    t0 = time.monotonic()
    ts = [threading.Thread(target=run, args=(j,)) for j in range(threads)]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    if errors:
        raise errors[0]
    return time.monotonic() - t0


def state_window(port, args, checkpoint_every=None):
    """One window of ``args.seconds``: ``args.clients`` clients x ``args.batch`` events
    in ``args.client_procs`` processes; with ``checkpoint_every``, a ``POST /checkpoint``
    that often meanwhile (the service's periodic path). Returns the p99 (ms), the
    requests measured and the checkpoints written."""
    clients = args.clients
    procs_n = max(1, min(clients, args.client_procs))
    per = [clients // procs_n + (1 if i < clients % procs_n else 0) for i in range(procs_n)]
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    t_start = time.monotonic() + 0.3 + args.warmup
    t_end = t_start + args.seconds
    workers = [ctx.Process(target=client_process,
                           args=(port, args.batch, k, 7 + i, t_start, t_end, results))
               for i, k in enumerate(per)]
    for w in workers:
        w.start()
    done = 0
    if checkpoint_every:
        nxt = t_start + checkpoint_every / 2
        while nxt < t_end:
            time.sleep(max(0.0, nxt - time.monotonic()))
            request(port, "POST", "/checkpoint", body=b"")
            done += 1
            nxt += checkpoint_every
    got = [results.get(timeout=600) for _ in workers]
    for w in workers:
        w.join(60)
    errors = [e for g in got for e in g["errors"]]
    if errors:
        raise RuntimeError(f"client error: {errors[0]}")
    lat = sorted(x for g in got for x in g["lat"])
    return 1e3 * percentile(lat, 99), len(lat), done


def state_mode(args):
    """For each of ``args.state_events``: a server holding that many events (posted
    first, then one untimed checkpoint, as a service that has been running has written),
    the p99 of the clients without checkpoints and with one every
    ``args.state_checkpoint_every`` seconds, in ``args.pairs`` interleaved pairs of
    windows, then the time a SIGTERM takes (its final checkpoint) and a restart's time
    to serve again."""

    tab = R.table("state", "p99 latency with a checkpoint every "
                  f"{args.state_checkpoint_every:g} s against without, and SIGTERM, "
                  "against the events the service holds",
                  ["events", "post s", "p99 ms (none)", "p99 ms (checkpoints)", "ratio",
                   "checkpoints", "SIGTERM s", "restart s", "state MB"],
                  note=f"{args.clients} clients x {args.batch} events, windows of "
                       f"{args.seconds:g} s, {args.pairs} pairs (none, checkpoints) "
                       "interleaved; p99 the median over the pairs")
    for n in args.state_events:
        with tempfile.TemporaryDirectory(prefix="bench_service_state.") as tmp:
            state = os.path.join(tmp, "state")
            server, port = start_server(state, NO_CHECKPOINTS, args.config)
            threading.Thread(target=_drain, args=(server.stdout,), daemon=True).start()
            try:
                post = post_events(port, n)
                request(port, "POST", "/checkpoint", body=b"")  # (a running service's)
                none, ckpt, count = [], [], 0
                for i in range(args.pairs):
                    p, _, _ = state_window(port, args)
                    none.append(p)
                    p, _, k = state_window(port, args, args.state_checkpoint_every)
                    ckpt.append(p)
                    count += k
                    print(f"  {n:>11,} events, pair {i + 1}: p99 {none[-1]:.1f} ms without, "
                          f"{ckpt[-1]:.1f} ms with {k} checkpoints", flush=True)
                held = request(port, "GET", "/snapshot")["n"]
                t0 = time.monotonic()
                server.send_signal(signal.SIGTERM)
                server.wait(600)
                sigterm = time.monotonic() - t0
            finally:
                if server.poll() is None:
                    server.kill()
                    server.wait(60)
            size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(state)
                       for f in fs) / 1e6
            t0 = time.monotonic()
            server, port = start_server(state, NO_CHECKPOINTS, args.config)
            try:
                restart = time.monotonic() - t0
                back = request(port, "GET", "/snapshot")["n"]
            finally:
                server.kill()
                server.wait(60)
                server.stdout.close()
            if back != held:
                raise SystemExit(f"restart holds {back} events, the server had {held}")
        p_none, p_ckpt = statistics.median(none), statistics.median(ckpt)
        tab.add(n, post, p_none, p_ckpt, p_ckpt / p_none, count, sigterm, restart, size)
        print(f"{n:>11,} events: posted in {post:.1f} s; p99 {p_none:.1f} ms without, "
              f"{p_ckpt:.1f} ms with checkpoints ({p_ckpt / p_none:.2f}x, {count} "
              f"checkpoints); SIGTERM {sigterm:.2f} s; restart {restart:.2f} s; state "
              f"{size:.0f} MB", flush=True)
        R.figure(f"state_p99_ratio_{n}", f"p99 with a checkpoint every "
                 f"{args.state_checkpoint_every:g} s / without, {n:,} events",
                 p_ckpt / p_none, "x", better="lower")
        R.figure(f"state_sigterm_{n}", f"SIGTERM (final checkpoint), {n:,} events",
                 sigterm, "s", better="lower")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 100, 1000],
                    help="events per request (default %(default)s)")
    ap.add_argument("--clients", type=int, nargs="+", default=[8, 32],
                    help="concurrent connections (default %(default)s)")
    ap.add_argument("--checkpoints", choices=("off", "on", "both"), default="both")
    ap.add_argument("--seconds", type=float, default=None,
                    help="measured seconds per cell (default 5; 2 with --quick)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="unmeasured seconds before (default 1; 0.5 with --quick)")
    ap.add_argument("--quick", action="store_true", help="short cells, for a smoke run")
    ap.add_argument("--checkpoint-seconds", type=float, default=1.0,
                    help='"on": checkpoint every S seconds (default %(default)s)')
    ap.add_argument("--checkpoint-events", type=int, default=0,
                    help='"on": checkpoint every N events too (default 0: by time only)')
    ap.add_argument("--client-procs", type=int, default=4,
                    help="client processes (default %(default)s), clients spread over them")
    ap.add_argument("--config", metavar="FILE",
                    help="monitor config (default: the default monitor)")
    ap.add_argument("--old-socket", action="store_true",
                    help="listening socket without TCP_NODELAY (Nagle's algorithm on)")
    ap.add_argument("--attack", action="store_true",
                    help="good traffic with and without hostile clients (see above)")
    ap.add_argument("--pairs", type=int, default=5,
                    help="--attack: rounds of the three phases (default %(default)s)")
    ap.add_argument("--refusal-penalty", type=float, default=None,
                    help="--attack: [serve] refusal_penalty of the server (default: its default)")
    ap.add_argument("--longrun", type=int, metavar="EVENTS",
                    help="one server over EVENTS events, a row every --every (see above)")
    ap.add_argument("--every", type=int, default=5_000_000, metavar="N",
                    help="--longrun: events per row (default %(default)s)")
    ap.add_argument("--event-rate", type=float, default=1000.0, metavar="R",
                    help="--longrun: events per second of event time (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="--longrun: random seed")
    ap.add_argument("--state-events", type=lambda v: [int(x) for x in v.split(",")],
                    metavar="N,N", help="servers holding N events each: p99 with and "
                    "without checkpoints, SIGTERM and restart (see above)")
    ap.add_argument("--state-checkpoint-every", type=float, default=10.0, metavar="S",
                    help="--state-events: seconds between checkpoints (default %(default)s)")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    if args.state_events is not None:
        if args.json == str(R.default_path(__file__)):
            args.json = str(R.RESULTS_DIR / "bench_service_state.json")
        args.batch = 100 if args.batch == [1, 100, 1000] else args.batch[0]
        args.clients = 8 if args.clients == [8, 32] else args.clients[0]
        if args.seconds is None:
            args.seconds = 25.0
        if args.warmup is None:
            args.warmup = 1.0
        if args.pairs == 5:
            args.pairs = 2
        res = R.start(__file__, args)
        for key in ("checkpoints", "quick", "checkpoint_seconds", "checkpoint_events",
                    "old_socket", "attack", "refusal_penalty", "longrun", "every",
                    "event_rate", "seed"):
            res.parameters.pop(key, None)  # (the other modes')
        print(f"nproc {os.cpu_count()}, Python {sys.version.split()[0]}, load average "
              f"{os.getloadavg()[0]:.1f}; {args.clients} clients x {args.batch} events; "
              f"{args.config or 'default monitor'}; durable (--state-dir)", flush=True)
        t0 = time.monotonic()
        state_mode(args)
        print(f"\n{time.monotonic() - t0:.0f} s in all")
        res.write(args.json)
        return 0
    if args.longrun is not None:
        if args.json == str(R.default_path(__file__)):
            args.json = str(R.RESULTS_DIR / "bench_service_longrun.json")
        args.batch = 100 if args.batch == [1, 100, 1000] else args.batch[0]
        args.clients = 8 if args.clients == [8, 32] else args.clients[0]
        if args.longrun < 1 or args.every < args.batch or args.event_rate <= 0:
            ap.error(f"--longrun {args.longrun} --every {args.every} --event-rate "
                     f"{args.event_rate:g}: need EVENTS >= 1, every >= the batch "
                     f"({args.batch}) and a positive rate")
        args.every -= args.every % args.batch
        res = R.start(__file__, args)
        for key in ("checkpoints", "seconds", "warmup", "quick", "checkpoint_seconds",
                    "checkpoint_events", "old_socket", "attack", "pairs", "refusal_penalty"):
            res.parameters.pop(key, None)  # the cells' and the attack's, not this run's
        from streameval.service import DEFAULT_CHECKPOINT_EVENTS, DEFAULT_CHECKPOINT_SECONDS
        R.param(service_checkpoint_events=DEFAULT_CHECKPOINT_EVENTS,
                service_checkpoint_seconds=DEFAULT_CHECKPOINT_SECONDS)
        print(f"nproc {os.cpu_count()}, Python {sys.version.split()[0]}, load average "
              f"{os.getloadavg()[0]:.1f}; {args.longrun:,} events, {args.clients} clients x "
              f"{args.batch} events per request, a row every {args.every:,} events; "
              f"{args.config or 'default monitor'}; durable (--state-dir), checkpoints at "
              "the service's defaults", flush=True)
        t0 = time.monotonic()
        lost = longrun_mode(args)
        print(f"\n{time.monotonic() - t0:.0f} s in all")
        res.write(args.json)
        return 1 if lost else 0
    if args.attack:
        if args.json == str(R.default_path(__file__)):
            args.json = str(R.RESULTS_DIR / "bench_service_attack.json")
        if args.clients == [8, 32]:
            args.clients = 2
        else:
            args.clients = args.clients[0]
        if args.seconds is None:
            args.seconds = 1.0 if args.quick else 3.0
        if args.quick:
            args.pairs = min(args.pairs, 2)
        res = R.start(__file__, args)
        print(f"nproc {os.cpu_count()}, Python {sys.version.split()[0]}, load average "
              f"{os.getloadavg()[0]:.1f}; {SEGMENTS} segments; {args.clients} good clients",
              flush=True)
        attack_mode(args)
        res.write(args.json)
        return 0
    if args.seconds is None:
        args.seconds = 2.0 if args.quick else 5.0
    if args.warmup is None:
        args.warmup = 0.5 if args.quick else 1.0
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.checkpoints]
    res = R.start(__file__, args)

    t0 = time.monotonic()
    print(f"nproc {os.cpu_count()}, Python {sys.version.split()[0]}, load average "
          f"{os.getloadavg()[0]:.1f}; {args.seconds:g} s per cell after {args.warmup:g} s "
          f"of warm-up; checkpoints on = every {args.checkpoint_seconds:g} s"
          + (f" or {args.checkpoint_events} events" if args.checkpoint_events else "")
          + f"; {args.config or 'default monitor'}; durable (--state-dir)"
          + ("; OLD SOCKET (no TCP_NODELAY)" if args.old_socket else ""), flush=True)
    rows = []
    for b in args.batch:
        for c in args.clients:
            for k in modes:
                r = run_cell(b, c, k, args)
                rows.append(r)
                print(f"  {b:>5} events x {c:>2} clients, checkpoints {'on ' if k else 'off'}: "
                      f"{r['events_s']:>9,.0f} events/s, p50 {r['p50']:7.1f} ms, "
                      f"p99 {r['p99']:7.1f} ms, {r['ckpts_in_window']} checkpoints in the "
                      f"window ({r['ckpts']} in all)", flush=True)
    print()
    print(table(rows))
    print()
    print(summary(rows))
    print(f"\n{time.monotonic() - t0:.0f} s in all")
    tab = R.table("cells", "streameval serve under load: durable (write-ahead log), "
                  "default monitor, loopback clients",
                  ["batch", "clients", "checkpoints", "checkpoints in window", "events/s",
                   "requests/s", "p50 ms", "p99 ms", "max ms", "state MB", "lost",
                   "server cores", "client cores", "other cores"],
                  note=f"{args.seconds:g} s measured per cell after {args.warmup:g} s of "
                       "warm-up; 'other cores': what the rest of the machine used meanwhile")
    for r in rows:
        tab.add(r["batch"], r["clients"], "on" if r["ckpt"] else "off", r["ckpts_in_window"],
                r["events_s"], r["req_s"], r["p50"], r["p99"], r["max"], r["state_mb"],
                r["lost"], r["srv_cpu"], r["cli_cpu"], r["other_cpu"])
    res.write(args.json)
    return 1 if any(r["lost"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
