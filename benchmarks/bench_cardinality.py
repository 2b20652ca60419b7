"""Cardinality of ``streameval serve``'s ``/metrics``: series against segments.

What is measured: a service in this process (``streameval.service.BackgroundServer``,
no state directory) running the default monitor (the one ``streameval serve`` runs
without a configuration), with ``group_by = "country"`` over S distinct values (S = 0
means no ``group_by``: the whole stream only). ``--events`` events per segment are
posted (continuous scores, labels ~ Bernoulli(0.3), so every metric is defined), then
``GET /metrics`` is read ``--scrapes`` times. For each S the table gives the series
(samples of the exposition: one per label set, histogram buckets included), those of
``streameval_metric`` alone, the series each further segment adds, the exposition's
bytes, and the median time of one scrape (client side, over loopback).

With delayed labels (``[input] label_ttl``) the service adds six series whatever S;
windows by period add one ``streameval_late_events_total`` series per windowed metric
and segment; each pending or firing alert adds one ``streameval_alert_active`` series.
None of these are in the default monitor's table.

    python benchmarks/bench_cardinality.py                          # S = 0, 1, 100, 1000
    python benchmarks/bench_cardinality.py --segments 0 10 --json -  # a quick check
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request

import numpy as np

from _results import Results, add_json_argument


def _post(url, body):
    req = urllib.request.Request(url + "/events", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=600) as r:
        assert r.status == 200, r.status


def measure(segments: int, events: int, scrapes: int, seed: int = 0) -> dict:
    from prometheus_client.parser import text_string_to_metric_families
    from streameval.service import BackgroundServer

    config = {"monitor": {"group_by": "country"}} if segments else None
    rng = np.random.default_rng(seed)
    n = events * max(segments, 1)
    y = rng.random(n) < 0.3
    s = 1 / (1 + np.exp(-rng.normal(1.2 * y - 0.6, 1.0)))
    rows = [{"ts": 1_700_000_000 + i, "label": int(y[i]), "score": float(s[i])}
            for i in range(n)]
    if segments:
        for i, r in enumerate(rows):
            r["country"] = f"c{i % segments:04d}"
    with BackgroundServer(config) as srv:
        for i in range(0, n, 5000):
            _post(srv.url, rows[i:i + 5000])
        times, text = [], ""
        for _ in range(scrapes):
            t = time.perf_counter()
            with urllib.request.urlopen(srv.url + "/metrics", timeout=600) as r:
                text = r.read().decode()
            times.append(time.perf_counter() - t)
    samples = [(f.name, s) for f in text_string_to_metric_families(text) for s in f.samples]
    metric = sum(1 for name, _ in samples if name == "streameval_metric")
    seg_labels = {s.labels["segment"] for name, s in samples if name == "streameval_metric"}
    assert len(seg_labels) == segments + 1 if segments else seg_labels == {""}, seg_labels
    return {"segments": segments, "series": len(samples), "metric_series": metric,
            "bytes": len(text.encode()), "scrape_ms": statistics.median(times) * 1e3}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--segments", type=int, nargs="+", default=[0, 1, 100, 1000],
                    help="distinct segment values (0: no group_by); at most 1000, the "
                         "default max_segments")
    ap.add_argument("--events", type=int, default=20, help="events per segment")
    ap.add_argument("--scrapes", type=int, default=5, help="scrapes timed per size")
    add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    res = Results(__file__, args, extra_versions=("prometheus-client",))
    tab = res.table("series", "Series exported by /metrics, default monitor",
                    ["segments", "series", "streameval_metric series", "series per segment",
                     "bytes", "bytes per series", "scrape ms"],
                    note="series per segment is (series - series without group_by) / "
                         "segments; the whole stream keeps its own series beside the "
                         "segments'")
    base = None
    print(f"{'segments':>8} {'series':>8} {'metric':>8} {'per seg':>8} {'bytes':>10} "
          f"{'B/series':>8} {'scrape ms':>9}")
    for segs in args.segments:
        r = measure(segs, args.events, args.scrapes)
        if segs == 0:
            base = r["series"]
        per = (r["series"] - base) / segs if segs and base is not None else None
        tab.add(segs, r["series"], r["metric_series"], per, r["bytes"],
                round(r["bytes"] / r["series"], 1), round(r["scrape_ms"], 2))
        print(f"{segs:>8} {r['series']:>8} {r['metric_series']:>8} "
              f"{'' if per is None else f'{per:.1f}':>8} {r['bytes']:>10} "
              f"{r['bytes'] / r['series']:>8.1f} {r['scrape_ms']:>9.2f}")
    res.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
