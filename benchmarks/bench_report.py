"""The report and the live page: write time, size, and the browser's load time.

Four measurements, each printed as a table and written to the JSON results:

* **stream length**: ``metrics.jsonl`` as the default monitor writes it (its 14
  metrics, one row per 1 000 events) for streams of ``--events`` events (default
  100 000, 1 000 000, 10 000 000 and 100 000 000: 100 to 100 000 rows), one segment;
  the time to read the rows, to write ``report.html`` from them, the page's size and
  the timeline points it holds;
* **segments**: the same for 1, 100 and 1 000 segments (``--segments``) over a stream of
  ``--segment-events`` events (1 000 000: up to 1 001 000 rows);
* **the replay**: a replay of a generated log of ``--replay-events`` events (1 000 000,
  continuous scores) with the default monitor, then what its report adds at the end:
  the Monitor's score summaries, reading the rows and writing the page (wall and CPU
  seconds; target: at most 5 s);
* **the browser** (with ``--browser``: Debian's chromium, headless, through selenium):
  each page above opened from a file, ``performance.timing`` from navigation start to
  the load event and to the end of drawing (target: under 5 s), and the live page of a
  service (in this process) fed ``--live-events`` events, to its first drawing.

Rows are synthetic (random walks per metric and segment, one segment's metrics falling
by 0.2 halfway with an alert on it), seeded. A table cell of ``-`` was not measured.

    python benchmarks/bench_report.py --browser                    # full size
    python benchmarks/bench_report.py --events 100000 1000000 --segments 1 100 \\
        --segment-events 200000 --replay-events 100000 --live-events 20000 --browser

Results: ``benchmarks/results/bench_report.json`` (``--json PATH`` writes elsewhere),
shown on the documentation's report page.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import _results as R

SEED = 20240601
EVERY = 1000  # the default monitor's evaluation interval
METRICS = ("roc_auc", "average_precision", "precision", "recall", "f1", "accuracy", "log_loss",
           "roc_auc@10000", "average_precision@10000", "precision@10000", "recall@10000",
           "f1@10000", "accuracy@10000", "log_loss@10000")
#: the metrics whose rows carry an interval (Wilson for proportions, DeLong for a window's
#: AUC; not the cumulative AUC: streameval.monitor.evaluation.row_intervals)
INTERVALS = [i for i, m in enumerate(METRICS)
             if m.split("@")[0] in ("precision", "recall", "accuracy") or m == "roc_auc@10000"]


def write_rows(path, events, segments, seed=SEED):
    """``metrics.jsonl`` of a stream of ``events`` events in ``segments`` segments (plus
    the whole stream when there are several); returns (rows, the alerts)."""
    rng = np.random.default_rng(seed)
    evals = max(1, events // EVERY)
    segs = [None] + [f"s{k}" for k in range(segments)] if segments > 1 else [None]
    t0 = 1_700_000_000.0
    broken = segs[-1]
    alerts = [{"rule": "recall@10000 < 0.6", "state": "pending", "n": (evals // 2 + 3) * EVERY,
               "t": t0 + (evals // 2 + 3) * EVERY * 0.05, "value": 0.58, "segment": broken},
              {"rule": "recall@10000 < 0.6", "state": "firing", "n": (evals // 2 + 5) * EVERY,
               "t": t0 + (evals // 2 + 5) * EVERY * 0.05, "value": 0.55, "segment": broken}]
    base = rng.uniform(0.6, 0.9, (len(segs), len(METRICS)))
    rows = 0
    with open(path, "w") as f:
        chunk = max(1, 200_000 // len(segs))
        for a in range(0, evals, chunk):
            b = min(evals, a + chunk)
            steps = rng.normal(0, 0.003, (b - a, len(segs), len(METRICS)))
            walk = base + np.cumsum(steps, axis=0)
            base = walk[-1]
            lines = []
            for i in range(b - a):
                k = a + i + 1
                n = k * EVERY
                t = t0 + n * 0.05
                for j, seg in enumerate(segs):
                    vals = walk[i, j]
                    if seg == broken and k > evals // 2:
                        vals = vals - 0.2
                    vals = np.round(vals, 6)
                    row = {"n": n if seg is None else n // max(1, len(segs) - 1), "t": t,
                           "segment": seg, "values": dict(zip(METRICS, vals.tolist()))}
                    # the 95% intervals rows carry (proportions and windows' AUC)
                    row["intervals"] = {METRICS[m]: [round(float(vals[m]) - 0.01, 6),
                                                     round(float(vals[m]) + 0.01, 6)]
                                        for m in INTERVALS}
                    if seg is not None:
                        row["stream_n"] = n
                    lines.append(json.dumps(row, separators=(",", ":")))
            f.write("\n".join(lines) + "\n")
            rows += len(lines)
    with open(path.with_name("alerts.jsonl"), "w") as f:
        f.write("".join(json.dumps(a) + "\n" for a in alerts))
    return rows


def time_report(out):
    """(read seconds, write seconds, page bytes, points) of the report over ``out``."""
    from streameval.report import read_jsonl, write_report

    t0 = time.perf_counter()
    rows = read_jsonl(out / "metrics.jsonl")
    alerts = read_jsonl(out / "alerts.jsonl")
    t1 = time.perf_counter()
    path = write_report(rows, alerts, out, title=f"bench {out.name}",
                        rules=[{"metric": "recall@10000", "op": "<", "value": 0.6}])
    t2 = time.perf_counter()
    page = path.read_text()
    i = page.index('id="se-data">') + len('id="se-data">')
    points = json.loads(page[i:page.index("</script>", i)])["downsample"]["points"]
    return t1 - t0, t2 - t1, path.stat().st_size, points


class Browser:
    """Headless chromium through selenium; :meth:`load` opens a URL and times it."""

    def __init__(self):
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service

        opts = Options()
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--window-size=1400,1000"):
            opts.add_argument(arg)
        opts.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
        self.driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
        self.driver.set_page_load_timeout(300)

    def load(self, url, timeout=300.0):
        """(seconds to the load event, seconds to the end of the first drawing, ms the
        drawing took) from navigation start (``performance.timing``)."""
        d = self.driver
        d.get("about:blank")
        d.get(url)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            done = d.execute_script("return document.body && document.body.getAttribute('data-rendered')")
            if done:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"{url}: not drawn within {timeout} s")
        t = d.execute_script("var t = performance.timing; return [t.navigationStart, t.loadEventEnd];")
        drawn = int(done)
        ms = int(d.execute_script("return document.body.getAttribute('data-render-ms')") or 0)
        return (t[1] - t[0]) / 1000 if t[1] else None, (drawn - t[0]) / 1000, ms

    def close(self):
        self.driver.quit()


def fmt_s(x):
    return None if x is None else round(x, 3)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, nargs="+",
                    default=[100_000, 1_000_000, 10_000_000, 100_000_000])
    ap.add_argument("--segments", type=int, nargs="+", default=[1, 100, 1000])
    ap.add_argument("--segment-events", type=int, default=1_000_000)
    ap.add_argument("--replay-events", type=int, default=1_000_000,
                    help="events of the replayed log (0: skip the replay)")
    ap.add_argument("--live-events", type=int, default=200_000,
                    help="events posted to the live page's service (with --browser)")
    ap.add_argument("--browser", action="store_true", help="time the pages in headless chromium")
    ap.add_argument("--keep", metavar="DIR", help="keep the generated files there")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    res = R.Results(__file__, args, extra_versions=("plotly", "selenium"))
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_report_"))
    tmp.mkdir(parents=True, exist_ok=True)
    browser = Browser() if args.browser else None
    cols = ["events", "segments", "metric rows", "read s", "write s", "page MB",
            "points drawn", "browser load s", "browser drawn s", "drawing ms"]
    try:
        for title, key, cases in (
                ("Report against stream length (one segment)", "length",
                 [(e, 1) for e in args.events]),
                ("Report against segments", "segments",
                 [(args.segment_events, s) for s in args.segments])):
            table = res.table(key, title, cols,
                              note="metrics.jsonl of the default monitor's 14 metrics, one row "
                                   "per 1 000 events and segment; write: report_data and the page")
            print(f"\n{title}")
            print("  ".join(f"{c:>15}" for c in cols))
            for events, segments in cases:
                out = tmp / f"{key}_{events}_{segments}"
                out.mkdir(exist_ok=True)
                rows = write_rows(out / "metrics.jsonl", events, segments)
                read_s, write_s, size, points = time_report(out)
                load = (None, None, None)
                if browser is not None:
                    load = browser.load((out / "report.html").as_uri())
                cells = [events, segments, rows, fmt_s(read_s), fmt_s(write_s),
                         round(size / 1e6, 2), points, fmt_s(load[0]), fmt_s(load[1]), load[2]]
                table.add(*cells)
                print("  ".join(f"{'-' if c is None else c:>15}" for c in cells), flush=True)
                if key == "length" and events == max(args.events):
                    res.figure("report_write_longest", f"report of {events:,} events: write",
                               round(write_s, 3), "s", better="lower")
                if key == "segments" and segments == max(args.segments) and load[1] is not None:
                    res.figure("report_open_segments",
                               f"report of {segments} segments: drawn in the browser",
                               round(load[1], 3), "s", better="lower")

        if args.replay_events:
            replay_table(res, tmp, args.replay_events)
        if browser is not None and args.live_events:
            live_table(res, browser, args.live_events)
    finally:
        if browser is not None:
            browser.close()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    res.write(args.json)


def replay_table(res, tmp, events):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_replay import make_log
    from streameval.replay import Replay
    from streameval.report import CurveRecorder, read_jsonl, write_report

    log = tmp / "events.jsonl"
    make_log(log, events, scores_kind="continuous")
    out = tmp / "replay"
    run = Replay(str(log), out, report=False, progress=False)
    # the report's score summaries, as a replay with a report takes them: through the
    # stream (CurveRecorder.on_row), when alerts fire, and at the end
    mon = run.pipeline.monitor
    rec = CurveRecorder(mon)
    mon.on_metrics.append(rec.on_row)
    mon.on_alert.append(rec)
    t0 = time.perf_counter()
    run.run()
    during, during_cpu = rec.seconds, rec.seconds  # (recording is CPU-bound)
    replay_s = time.perf_counter() - t0 - during
    # what the report adds: the recordings during the replay, then at the end the
    # summaries, reading the rows, the page; wall and CPU time
    w0, c0 = time.perf_counter(), time.process_time()
    alerts = read_jsonl(out / "alerts.jsonl")
    alerting = [a.get("segment") for a in alerts if a.get("state") == "firing"]
    curves = rec.curves(alerting)
    path = write_report(read_jsonl(out / "metrics.jsonl"), alerts, out, curves=curves,
                        rules=[r.to_config() for r in mon.rules])
    report_s = time.perf_counter() - w0 + during
    report_cpu = time.process_time() - c0 + during_cpu
    cols = ["events", "replay without report s", "report s", "report CPU s", "page MB",
            "curve times"]
    table = res.table("replay", "The report of a replay (default monitor, continuous scores)",
                      cols, note="the report: the Monitor's score summaries (ROC, PR, "
                                 "confusion, scores, calibration) through the stream and at "
                                 "the end, reading the rows, the page")
    cells = [events, round(replay_s, 3), round(report_s, 3), round(report_cpu, 3),
             round(path.stat().st_size / 1e6, 2), len(rec.timed)]
    table.add(*cells)
    res.figure("replay_report_seconds", f"report of a {events:,}-event replay",
               round(report_s, 3), "s", better="lower")
    print("\nThe report of a replay")
    print("  ".join(f"{c:>24}" for c in cols))
    print("  ".join(f"{c:>24}" for c in cells), flush=True)


def live_table(res, browser, events):
    from streameval.service import BackgroundServer
    import urllib.request

    rng = np.random.default_rng(SEED)
    cols = ["events posted", "segments", "timeline rows", "/ui/data s", "/ui/data MB",
            "browser load s", "browser drawn s", "drawing ms"]
    table = res.table("live", "The live page of a service (default monitor, group_by)", cols,
                      note="in-process service; the page's first drawing includes its "
                           "first fetch of /ui/data")
    print("\nThe live page")
    print("  ".join(f"{c:>15}" for c in cols))
    for segments in (1, 100):
        config = {"monitor": {"group_by": "country"}} if segments > 1 else None
        with BackgroundServer(config) as srv:
            sent = 0
            while sent < events:
                k = min(20_000, events - sent)
                y = rng.random(k) < 0.2
                s = np.clip(0.4 * y + rng.random(k) * 0.6, 0, 1)
                batch = [{"ts": 1_700_000_000 + (sent + i) * 0.05, "label": int(y[i]),
                          "score": float(s[i]), "country": f"c{(sent + i) % segments}"}
                         for i in range(k)]
                req = urllib.request.Request(srv.url + "/events", data=json.dumps(batch).encode(),
                                             headers={"Content-Type": "application/json"})
                urllib.request.urlopen(req, timeout=300).read()
                sent += k
            t0 = time.perf_counter()
            body = urllib.request.urlopen(srv.url + "/ui/data", timeout=300).read()
            data_s = time.perf_counter() - t0
            rows = json.loads(body)["downsample"]["rows"]
            load = browser.load(srv.url + "/ui")
            cells = [events, segments, rows, round(data_s, 3), round(len(body) / 1e6, 2),
                     fmt_s(load[0]), fmt_s(load[1]), load[2]]
            table.add(*cells)
            print("  ".join(f"{c:>15}" for c in cells), flush=True)
            if segments == 1:
                res.figure("live_page_drawn", "live page: drawn in the browser",
                           round(load[1], 3), "s", better="lower")


if __name__ == "__main__":
    main()
