"""A service engine with its segment cap full: ingestion, reads and checkpoints.

A client that sends a new segment value in every event would grow the monitor
without bound (at 49 000 segments: 3.5 GB, a 195 s checkpoint under the ingestion
lock). ``max_segments`` (default 1 000) caps it. This script measures what the cap
costs when it is full, with the default monitor (``Monitor.default(group_by=...)``:
14 metrics, 7 of them windows of 10 000 events, and 3 sequential detectors per segment):

* ingestion of ``--per`` events per segment into 1 000 segments, batches of 5 000
  (evaluations every 1 000 events, a row per segment each time);
* then ``--extra`` events of new segment values past the cap (counted under
  ``__other__``), against the same number of events of existing segments;
* ``snapshot()``, the Prometheus exposition (``/metrics``) and a checkpoint (its
  seconds, all under the ingestion lock today, and its size);
* the process's peak RSS.

Each row runs in a fresh subprocess so that its peak RSS is its own.

``--zipf`` measures instead what many segments cost a Monitor at full speed:
``--events`` events (default 2 million) in batches of 1 000 over 1, 1 000 and 10 000
segments with Zipf-distributed traffic (segment ``i`` gets a share proportional to
``1 / i**1.1``), ``Monitor.default(group_by=...)`` (one segment: ``Monitor.default()``),
continuous and rounded scores side by side, the whole stream's scope as the default
monitor makes it (its metrics' rows) and with ``overall_rules=True`` (its detectors and
alarms too): events/s over the whole run and over its second half (the steady state,
the segments made), peak RSS, and what an idle segment costs an evaluation, a snapshot and the Prometheus exposition (microseconds per
segment). Every row runs ``--repeat`` times (default 3), the rounds interleaved, and
shows its medians with the range of its per-round ratios: the machine's speed drifts
by more than the differences measured.

    python benchmarks/bench_segments.py               # 10 and 100 events per segment
    python benchmarks/bench_segments.py --per 10 --segments 200
    python benchmarks/bench_segments.py --zipf --segments 1 1000 10000

Results: ``benchmarks/results/bench_segments.json`` (``--zipf``:
``bench_segments_zipf.json``; ``--json PATH`` writes elsewhere), shown on
the documentation's performance page with the parameters, machine and versions of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import _results as R


def one(segments: int, per: int, extra: int) -> dict:
    import numpy as np

    from streameval.monitor import Monitor
    from streameval.service.engine import Engine
    from streameval.service.exposition import MonitorCollector
    from prometheus_client import CollectorRegistry, generate_latest

    rng = np.random.default_rng(0)
    state = tempfile.mkdtemp(prefix="bench-segments-")
    eng = Engine.open(Monitor.default(group_by="seg", max_segments=segments), state_dir=state,
                      checkpoint_every=None, checkpoint_seconds=None)
    n = segments * per
    t0 = time.time() - 10 * n
    events = [{"ts": t0 + i, "label": int(rng.random() < 0.3), "score": float(rng.random()),
               "seg": f"s{i % segments}"} for i in range(n)]
    start = time.perf_counter()
    for a in range(0, n, 5000):
        eng.ingest(events[a:a + 5000])
    ingest = time.perf_counter() - start
    assert len(eng.monitor.segments) == segments
    # past the cap: new values (to __other__) against the same number of known ones
    past = [{"ts": t0 + n + i, "label": int(rng.random() < 0.3), "score": float(rng.random()),
             "seg": f"new{i}"} for i in range(extra)]
    known = [dict(e, seg=f"s{i % segments}", ts=t0 + n + extra + i) for i, e in enumerate(past)]
    timings = {}
    for name, evs in (("known", known), ("past_cap", past)):
        start = time.perf_counter()
        for a in range(0, extra, 5000):
            eng.ingest(evs[a:a + 5000])
        timings[name] = time.perf_counter() - start
    assert eng.monitor.other_events == extra
    start = time.perf_counter()
    eng.snapshot()
    snap = time.perf_counter() - start
    registry = CollectorRegistry()
    registry.register(MonitorCollector(eng))
    start = time.perf_counter()
    text = generate_latest(registry)
    scrape = time.perf_counter() - start
    start = time.perf_counter()
    eng.checkpoint()
    ckpt = time.perf_counter() - start
    size = os.path.getsize(os.path.join(state, "checkpoint.json"))
    eng.close()
    return {
        "segments": segments, "per": per,
        "ingest_eps": n / ingest,
        "known_eps": extra / timings["known"], "past_cap_eps": extra / timings["past_cap"],
        "snapshot_s": snap, "metrics_s": scrape, "metrics_mb": len(text) / 1e6,
        "checkpoint_s": ckpt, "state_mb": size / 1e6,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
    }


def zipf_one(segments: int, events: int, kind: str, variant: str = "default") -> dict:
    import numpy as np
    from collections import defaultdict

    from prometheus_client import CollectorRegistry, generate_latest

    from streameval.monitor import Monitor
    from streameval.service.exposition import MonitorCollector

    if variant not in ZIPF_VARIANTS:
        raise SystemExit(f"--zipf-one {kind}:{variant}: the variant is one of "
                         f"{sorted(ZIPF_VARIANTS)}")
    rng = np.random.default_rng(1)
    if segments == 1:
        mon = Monitor.default()
    else:
        mon = Monitor.default(group_by="seg", max_segments=segments,
                              overall_rules=variant == "overall")
    share = 1.0 / np.arange(1, segments + 1) ** 1.1
    share /= share.sum()
    names = np.array([f"s{i}" for i in range(segments)], dtype=object)
    batches = []
    for a in range(0, events, 1000):
        m = min(1000, events - a)
        y = rng.random(m) < 0.3
        sc = 1.0 / (1.0 + np.exp(-(2.0 * y + rng.standard_normal(m) - 1.0)))
        if kind == "rounded":
            sc = np.round(sc, 3)
        seg = names[rng.choice(segments, m, p=share)] if segments > 1 else None
        batches.append((y, sc, seg))
    # the first half (which creates nearly every segment), then the second half: the
    # steady state of a monitor that runs for months, its segments made long ago
    half = len(batches) // 2
    cpu = []
    for part in (batches[:half], batches[half:]):
        start = time.process_time()
        for y, sc, seg in part:
            mon.update_many(y, sc, segment=seg)
        cpu.append(time.process_time() - start)
        if len(cpu) == 1:
            seen_half = len(mon.segments)
    second_events = sum(len(b[1]) for b in batches[half:])
    # the end of the stream: every segment's buffered events fed, a row each
    start = time.process_time()
    mon.flush()
    flush = time.process_time() - start
    # an evaluation after a few events of one segment: every other segment is idle
    y, sc, seg = batches[0]
    one_seg = None if segments == 1 else [names[0]] * 10
    mon.update_many(y[:10], sc[:10], segment=one_seg)
    start = time.perf_counter()
    mon.evaluate()
    evaluation = time.perf_counter() - start
    start = time.perf_counter()
    mon.snapshot()
    snap = time.perf_counter() - start

    class Engine:  # what the exposition reads: the monitor and the service's counters
        def read(self, fn):
            return fn(mon, defaultdict(int))

    registry = CollectorRegistry()
    registry.register(MonitorCollector(Engine()))
    start = time.perf_counter()
    generate_latest(registry)
    scrape = time.perf_counter() - start
    seen = max(len(mon.segments), 1)
    return {"segments": segments, "seen": len(mon.segments), "seen_half": seen_half,
            "scores": kind, "variant": variant,
            "events_per_s": events / sum(cpu), "steady_events_per_s": second_events / cpu[1],
            "flush_s": flush,
            "evaluation_us_per_segment": evaluation * 1e6 / seen,
            "snapshot_us_per_segment": snap * 1e6 / seen,
            "metrics_us_per_segment": scrape * 1e6 / seen,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3}


#: The whole stream's scope in a monitor with segments: the default (its metrics' rows,
#: no detectors and no alarms of its own) and with ``overall_rules=True`` (its detectors
#: and alarms as well, what every group_by monitor ran before)
ZIPF_VARIANTS = {"default": "rows only (default)", "overall": "detectors and alarms"}


def _median_run(runs):
    """The run of a row that the table shows: each figure the median over its rounds
    (peak RSS: the largest)."""
    out = dict(runs[0])
    for k, v in out.items():
        if isinstance(v, float):
            out[k] = (max(x[k] for x in runs) if k == "rss_mb"
                      else statistics.median([x[k] for x in runs]))
    return out


def zipf_main(args) -> int:
    if args.repeat < 1:
        raise SystemExit("--repeat: at least 1")
    if args.events < 2000:
        raise SystemExit("--events: at least 2 000 (two halves of batches of 1 000)")
    if args.json == str(R.default_path(__file__)):  # (its own results file)
        args.json = str(R.default_path(__file__).with_name("bench_segments_zipf.json"))
    res = R.start(__file__, args)
    tab = R.table("zipf", "The default monitor over Zipf-distributed segments (batches of "
                  "1 000, evaluations every 1 000 events)",
                  ["segments", "whole stream", "segments seen (half-way)", "scores",
                   "events/s (CPU)", "events/s / one segment's", "per round",
                   "second half: events/s (CPU)", "second half: / one segment's",
                   "second half: per round",
                   "flush s (CPU)", "evaluation us per segment (one active)",
                   "snapshot us per segment", "/metrics us per segment", "peak RSS MB"],
                  note="each row in a fresh process, --repeat rounds of every row "
                       "interleaved: each figure the median of its rounds (peak RSS the "
                       "largest), the ratio that of the medians, and beside it the range "
                       "of each round's ratio to the one segment of that round; one "
                       "segment: no group_by; events/s "
                       "over the whole run counts the creation of the segments, the "
                       "second half is the steady state (every segment, or nearly, made "
                       "in the first); flush s: feeding every segment's buffered events "
                       "at the end; whole stream: what the whole stream's scope runs "
                       "beside the segments (overall_rules=True gives it its detectors "
                       "and alarms)")
    print(f"{'segments':>9} {'whole stream':>22} {'seen':>11} {'scores':>11} {'events/s':>10} "
          f"{'vs one':>7} {'range':>11} {'2nd half':>10} {'vs one':>7} {'range':>11} "
          f"{'flush s':>8} {'eval us/seg':>12} {'snap us/seg':>12} {'/metrics us/seg':>16} "
          f"{'peak MB':>8}")
    rows = [(segs, variant) for segs in sorted(set(args.segments) | {1})  # (one first)
            for variant in (("default",) if segs == 1 else tuple(ZIPF_VARIANTS))]
    for kind in ("continuous", "rounded"):
        # the rounds interleaved (one segment, then every other row, then again), so that
        # a slow stretch of the machine weighs on every row alike
        runs = {row: [] for row in rows}
        for _ in range(args.repeat):
            for segs, variant in rows:
                out = subprocess.run([sys.executable, __file__, "--zipf-one",
                                      f"{kind}:{variant}", "--segments", str(segs),
                                      "--events", str(args.events), "--json", "-"],
                                     capture_output=True, text=True, check=True)
                runs[(segs, variant)].append(json.loads(out.stdout.strip().splitlines()[-1]))
        base = runs[(1, "default")]
        for segs, variant in rows:
            rs = runs[(segs, variant)]
            r = _median_run(rs)
            one, one_steady = (statistics.median([x[k] for x in base])
                               for k in ("events_per_s", "steady_events_per_s"))
            ratio = r["events_per_s"] / one
            steady = r["steady_events_per_s"] / one_steady
            # (each round's ratio to the one segment of the same round)
            per = [x["events_per_s"] / b["events_per_s"] for x, b in zip(rs, base)]
            per_s = [x["steady_events_per_s"] / b["steady_events_per_s"]
                     for x, b in zip(rs, base)]
            span, span_s = (f"{min(v):.2f}-{max(v):.2f}" for v in (per, per_s))
            label = "(no segments)" if segs == 1 else ZIPF_VARIANTS[variant]
            seen = f"{r['seen']} ({r['seen_half']})"
            tab.add(segs, label, seen, kind, r["events_per_s"], ratio, span,
                    r["steady_events_per_s"], steady, span_s, r["flush_s"],
                    r["evaluation_us_per_segment"], r["snapshot_us_per_segment"],
                    r["metrics_us_per_segment"], r["rss_mb"])
            print(f"{segs:>9} {label:>22} {seen:>11} {kind:>11} "
                  f"{r['events_per_s']:>10,.0f} {ratio:>7.2f} {span:>11} "
                  f"{r['steady_events_per_s']:>10,.0f} {steady:>7.2f} {span_s:>11} "
                  f"{r['flush_s']:>8.2f} {r['evaluation_us_per_segment']:>12.1f} "
                  f"{r['snapshot_us_per_segment']:>12.1f} "
                  f"{r['metrics_us_per_segment']:>16.1f} {r['rss_mb']:>8,.0f}", flush=True)
            if segs == 1:
                continue
            tag = "" if variant == "default" else "_overall"
            what = "" if variant == "default" else ", whole stream with detectors"
            res.figure(f"zipf_{segs}_{kind}{tag}", f"{segs} segments against one "
                       f"({kind}{what})", ratio, "x", better="higher")
            res.figure(f"zipf_{segs}_{kind}{tag}_steady", f"{segs} segments against "
                       f"one, second half ({kind}{what})", steady, "x", better="higher")
            if variant == "default":
                res.figure(f"zipf_{segs}_{kind}_rss", f"Peak RSS with {segs} segments "
                           f"({kind})", r["rss_mb"], "MB", better="lower")
                res.figure(f"zipf_{segs}_{kind}_snapshot", f"Snapshot, per segment, "
                           f"{segs} segments ({kind})", r["snapshot_us_per_segment"],
                           "us", better="lower")
    res.write(args.json)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--segments", type=int, nargs="+", default=[1000],
                   help="segment caps to fill (several: a curve of cost against segments)")
    p.add_argument("--per", type=int, action="append",
                   help="events per segment (repeatable; default 10 and 100)")
    p.add_argument("--extra", type=int, default=20_000,
                   help="events past the cap, and as many of known segments")
    p.add_argument("--zipf", action="store_true",
                   help="many segments at full speed: a Monitor over Zipf-distributed "
                        "segments (default --segments 1 1000 10000)")
    p.add_argument("--events", type=int, default=2_000_000, help="events (with --zipf)")
    p.add_argument("--repeat", type=int, default=3,
                   help="rounds of every row, interleaved (with --zipf; the median is shown)")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--zipf-one", help=argparse.SUPPRESS)
    R.add_json_argument(p, __file__)
    args = p.parse_args(argv)
    if args.zipf_one:
        kind, _, variant = args.zipf_one.partition(":")
        print(json.dumps(zipf_one(args.segments[0], args.events, kind, variant or "default")))
        return 0
    if args.zipf:
        if args.segments == [1000]:  # (the default of the other mode)
            args.segments = [1, 1000, 10000]
        return zipf_main(args)
    pers = args.per or [10, 100]
    if args.one:
        print(json.dumps(one(args.segments[0], pers[0], args.extra)))
        return 0
    res = R.start(__file__, args, parameters={"per": pers})
    tab = R.table("segments", "An engine with its segment cap full, default monitor per "
                  "segment", ["segments", "events per segment", "ingest events/s",
                              "known segments events/s", "past the cap events/s",
                              "snapshot s", "/metrics s", "/metrics MB", "checkpoint s",
                              "state MB", "peak RSS MB"],
                  note="each row in a fresh process")
    eps = {}
    print(f"{'segments x events':>18} {'ingest ev/s':>12} {'known ev/s':>11} "
          f"{'past cap ev/s':>14} {'snapshot s':>11} {'/metrics s':>11} {'MB':>6} "
          f"{'checkpoint s':>13} {'state MB':>9} {'peak RSS MB':>12}")
    for per, segs in [(per, segs) for per in pers for segs in args.segments]:
        out = subprocess.run([sys.executable, __file__, "--one", "--segments", str(segs),
                              "--per", str(per), "--extra", str(args.extra), "--json", "-"],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        tab.add(r["segments"], r["per"], r["ingest_eps"], r["known_eps"], r["past_cap_eps"],
                r["snapshot_s"], r["metrics_s"], r["metrics_mb"], r["checkpoint_s"],
                r["state_mb"], r["rss_mb"])
        eps[per, segs] = (r["ingest_eps"], r["checkpoint_s"])
        print(f"{r['segments']:>8} x {r['per']:<7} {r['ingest_eps']:>12,.0f} "
              f"{r['known_eps']:>11,.0f} {r['past_cap_eps']:>14,.0f} {r['snapshot_s']:>11.3f} "
              f"{r['metrics_s']:>11.3f} {r['metrics_mb']:>6.1f} {r['checkpoint_s']:>13.2f} "
              f"{r['state_mb']:>9.1f} {r['rss_mb']:>12,.0f}", flush=True)
    if len(args.segments) > 1:
        R.curve("ingest_by_segments", "Ingestion against the number of segments",
                "segments", "events/s", args.segments,
                {f"{per} events per segment": [eps[per, g][0] for g in args.segments]
                 for per in pers})
        R.curve("checkpoint_by_segments", "Checkpoint time against the number of segments",
                "segments", "seconds", args.segments,
                {f"{per} events per segment": [eps[per, g][1] for g in args.segments]
                 for per in pers})
    res.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
