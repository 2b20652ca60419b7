"""Replay of a large JSONL log with the default monitor: events/s and peak memory.

Generates seeded logs of ``--events`` rows (default 1 000 000: ``ts``, ``id``,
``label``, ``score``), one with scores rounded to 4 decimals as production logs often
are and one with full float scores (one distinct score per event, what models emit;
``--scores`` picks one), then times, for each,
each in a fresh subprocess (so peak RSS is that stage's alone):

* ``streameval replay`` (default monitor, report off; ``--with-report`` adds it),
* the same replay with custom labels: a log whose labels are ``"spam"``/``"ham"`` and a
  config ``[monitor] pos_label = "spam"``, ``neg_label = "ham"`` (target: at most
  1.2x the bool-label replay),
* the same replay with a checkpoint every 100 000 events,
* reading and validating the log only (``streameval.io.EventSource``: the floor),
* peers on the same data: scikit-learn's ``roc_auc_score`` + ``average_precision_score``
  once over the whole arrays (a batch answer at the end only, no timeline), and
  river's ``ROCAUC`` (approximate) updated per event over the first 100 000 events,
  scaled to the full log.

Prints a table; ``--keep DIR`` keeps the log and outputs there.

``--baseline-src DIR`` times every streameval stage a second time with ``DIR`` (an
older checkout, e.g. ``git worktree add /tmp/base <commit>``) first on ``PYTHONPATH``,
in the same run, and adds the baseline's seconds and the ratio (this code / baseline)
to the table: a ratio measured under the same load, which absolute times on a shared
machine are not. The code measured is the checkout holding this script (or
``--src DIR``).

    python benchmarks/bench_replay.py               # 1 000 000 events
    python benchmarks/bench_replay.py --events 200000
    python benchmarks/bench_replay.py --skip-peers --baseline-src /work/wt/baseline

Results: ``benchmarks/results/bench_replay.json`` (``--json PATH`` writes elsewhere), shown on
the documentation's performance page with the parameters, machine and versions of the run.

``--long``: the replay of a long log as a user runs it, nothing else. The log (``--events``
rows of ``--scores`` scores, one kind, ``--positives`` of them positive, 30% by default;
100 000 000 rows is about 8 GB) is written to a
temporary directory as it is generated, in pieces (the generator holds one piece), then
``python -m streameval replay LOG --out DIR --no-report`` runs as a subprocess while the
resident memory of its whole process tree (the replay and its parsing process) is sampled
every 0.2 s. The table gives wall seconds, CPU seconds of the tree, wall seconds per
million rows, the tree's peak RSS (the sum over its processes) and the largest single
process's, and the target (100 000 000 rows in at most 6 minutes and 1.5 GB; a smaller
run is extrapolated linearly, as a per-event cost that does not grow would be).
``--baseline-src DIR`` replays the same log with an older checkout too, runs alternating.
``--log PATH`` keeps the log at ``PATH`` and reuses it in a later run with the same
parameters (writing 100 000 000 rows takes minutes). Results:
``benchmarks/results/bench_replay_long.json``.

    python benchmarks/bench_replay.py --long --events 100000000 --scores continuous
    python benchmarks/bench_replay.py --long --events 2000000 --scores continuous \
        --baseline-src /tmp/old_checkout --runs 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import _results as R

SEED = 20240601


def make_log(path, n, seed=SEED, scores_kind="rounded"):
    """Write a seeded n-row JSONL log; labels ~ Bernoulli(0.1), scores separated by label:
    rounded to 4 decimals (``"rounded"``) or full float64 (``"continuous"``, what a model
    emits: one distinct score per event, written with Python's shortest repr)."""
    rng = np.random.default_rng(seed)
    labels = rng.random(n) < 0.1
    margin = 2.5 * (labels - 0.5)
    scores = 1.0 / (1.0 + np.exp(-(margin + rng.standard_normal(n) - 1.0)))
    if scores_kind == "rounded":
        scores = np.round(scores, 4)
    ts = 1_700_000_000 + np.cumsum(rng.exponential(0.05, n))
    lab = np.where(labels, "1", "0")
    chunk = 100_000
    with open(path, "w") as f:
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            f.write("".join(
                f'{{"ts":{t:.3f},"id":{i},"label":{y},"score":{s}}}\n'
                for t, i, y, s in zip(ts[a:b].tolist(), range(a + 1, b + 1),
                                      lab[a:b].tolist(), scores[a:b].tolist())
            ))
    return labels, scores


def spam_log(src, dst):
    """The same log with labels ``"spam"``/``"ham"`` (and its config file)."""
    with open(src, "rb") as f, open(dst, "wb") as g:
        for line in f:
            g.write(line.replace(b'"label":1', b'"label":"spam"').replace(b'"label":0', b'"label":"ham"'))
    cfg = Path(dst).with_suffix(".toml")
    cfg.write_text('[monitor]\npos_label = "spam"\nneg_label = "ham"\n')
    return cfg


_STAGE = r"""
import json, resource, sys, time
t0 = time.perf_counter()
stage, log, out = sys.argv[1], sys.argv[2], sys.argv[3]
n = None
if stage in ("replay", "replay+checkpoint", "replay+report", "replay+labels"):
    from streameval.cli import main
    if stage == "replay+labels":
        log = log.replace("events.jsonl", "spam.jsonl")
    argv = ["replay", log, "--out", out, "--quiet"]
    if stage == "replay+labels":
        argv += ["--config", log.replace(".jsonl", ".toml")]
    if stage != "replay+report":
        argv.append("--no-report")
    if stage == "replay+checkpoint":
        argv += ["--checkpoint", out + "/ckpt.json", "--checkpoint-every", "100000"]
    rc = main(argv)
    assert rc == 0, rc
elif stage == "read":
    from streameval.io import EventSource
    n = sum(len(b) for b in EventSource(log))
elif stage == "sklearn":
    import numpy as np
    from sklearn.metrics import average_precision_score, roc_auc_score
    rows = [json.loads(x) for x in open(log)]
    y = np.array([r["label"] for r in rows]); s = np.array([r["score"] for r in rows])
    t1 = time.perf_counter()
    roc_auc_score(y, s); average_precision_score(y, s)
    print(json.dumps({"parse": t1 - t0}), file=sys.stderr)
elif stage == "river":
    from river import metrics
    m = metrics.ROCAUC()
    k = 0
    with open(log) as f:
        for line in f:
            r = json.loads(line)
            m.update(bool(r["label"]), r["score"])
            k += 1
            if k == 100_000:
                break
    n = k
dt = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
rss = ru.ru_maxrss / 1024
print(json.dumps({"seconds": dt, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": rss, "n": n}))
"""


def run_stage(stage, log, out, src=None):
    env = dict(os.environ, PYTHONHASHSEED="0")
    if src is not None:  # this checkout (or the baseline's) first on the path
        env["PYTHONPATH"] = os.pathsep.join(
            [str(src)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    # run from the log's directory: `python -c` puts the working directory first on
    # sys.path, which would shadow PYTHONPATH with a checkout's own streameval
    p = subprocess.run([sys.executable, "-c", _STAGE, stage, str(log), str(out)],
                       capture_output=True, text=True, env=env, cwd=os.path.dirname(str(log)))
    if p.returncode != 0:
        raise SystemExit(f"stage {stage} failed:\n{p.stderr}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    extra = p.stderr.strip().splitlines()
    if extra:
        try:
            res.update(json.loads(extra[-1]))
        except json.JSONDecodeError:
            pass
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, default=None, help="keep the log and outputs in DIR")
    ap.add_argument("--with-report", action="store_true", help="also time replay with the report")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--scores", choices=["rounded", "continuous", "both"], default="both",
                    help="the logs' scores: 4 decimals, full floats (one distinct score "
                         "per event), or one log of each (default)")
    ap.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1],
                    help="checkout whose streameval is timed (default: this script's)")
    ap.add_argument("--baseline-src", type=Path, default=None, metavar="DIR",
                    help="also time the streameval stages with DIR first on PYTHONPATH "
                         "(an older checkout) and print the ratio")
    ap.add_argument("--long", action="store_true",
                    help="only the CLI replay of a long log, generated as it is written, "
                         "with the peak RSS of the whole process tree (see above)")
    ap.add_argument("--positives", type=float, default=0.3,
                    help="--long: the share of positive labels (default 0.3)")
    ap.add_argument("--runs", type=int, default=1,
                    help="--long: replays of the log by each checkout (alternating)")
    ap.add_argument("--log", type=Path, default=None, metavar="PATH",
                    help="--long: the log's path, kept: written there with a record of "
                         "how (PATH.meta.json) if missing, reused if that record matches")
    R.add_json_argument(ap, __file__)
    args = ap.parse_args(argv)
    if args.long:
        if args.json == str(R.default_path(__file__)):
            args.json = str(R.RESULTS_DIR / "bench_replay_long.json")
        res = R.start(__file__, args)
        run_long(args)
        res.write(args.json)
        return
    res = R.start(__file__, args)

    kinds = ["rounded", "continuous"] if args.scores == "both" else [args.scores]
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_replay_"))
    for kind in kinds:
        run_kind(args, kind, root / kind)
    if args.keep is None:
        import shutil
        shutil.rmtree(root, ignore_errors=True)
    res.write(args.json)


def run_kind(args, kind, tmp):
    """Every stage on one log (``kind``: its scores, rounded or continuous)."""
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / "events.jsonl"
    t0 = time.perf_counter()
    labels, scores = make_log(log, args.events, scores_kind=kind)
    gen = time.perf_counter() - t0
    size_mb = log.stat().st_size / 2**20
    print(f"\n{kind} scores. log: {args.events:,} events, {size_mb:.0f} MB, "
          f"{len(np.unique(scores)):,} distinct scores, generated in {gen:.1f} s\n")

    spam_log(log, tmp / "spam.jsonl")
    stages = ["read", "replay", "replay+labels", "replay+checkpoint"]
    if args.with_report:
        stages.append("replay+report")
    if not args.skip_peers:
        stages += ["sklearn", "river"]
    ours = {"read", "replay", "replay+labels", "replay+checkpoint", "replay+report"}
    results, base = {}, {}
    for stage in stages:  # baseline and this code alternate, stage by stage
        out = tmp / f"out_{stage.replace('+', '_')}"
        if args.baseline_src is not None and stage in ours:
            base[stage] = run_stage(stage, log, tmp / f"base_{stage.replace('+', '_')}",
                                    args.baseline_src)
        results[stage] = run_stage(stage, log, out, args.src)

    n = args.events
    tab = R.table(f"replay_{kind}", f"Replay of a {n:,}-row JSONL log, {kind} scores "
                  f"({len(np.unique(scores)):,} distinct), default monitor",
                  ["stage", "wall s", "CPU s", "events per CPU s", "peak RSS MB"]
                  + (["baseline wall s", "ratio"] if base else []),
                  note="each stage in a fresh process; river timed on 100 000 events and "
                       "scaled to the log; scikit-learn: the two calls once on arrays in memory")
    head = f"{'stage':<34}{'wall s':>8}{'CPU s':>8}{'events/CPU s':>14}{'peak RSS MB':>13}"
    if base:
        head += f"{'base wall s':>13}{'ratio':>7}"
    print(head)
    print("-" * len(head))
    labels_of = {
        "read": "read + validate log (floor)",
        "replay": "streameval replay (default monitor)",
        "replay+labels": "  labels \"spam\"/\"ham\"",
        "replay+checkpoint": "  + checkpoint every 100k",
        "replay+report": "  + report (matplotlib)",
        "sklearn": "sklearn AUC+AP once, arrays in RAM",
        "river": "river ROCAUC per event (100k, x10)",
    }
    for stage in stages:
        r = results[stage]
        secs, cpu = r["seconds"], r["cpu"]
        if stage == "river":
            secs, cpu = secs * n / r["n"], cpu * n / r["n"]
        if stage == "sklearn":
            # the two function calls alone, not the JSON parsing (CPU: the whole stage)
            secs = secs - r["parse"]
            cpu = secs
        line = f"{labels_of[stage]:<34}{secs:>8.2f}{cpu:>8.2f}{n / cpu:>14,.0f}{r['rss_mb']:>13.0f}"
        cells = [labels_of[stage].strip(), secs, cpu, n / cpu, r["rss_mb"]]
        if stage in base:
            b = base[stage]["seconds"]
            line += f"{b:>13.2f}{secs / b:>7.2f}"
            cells += [b, secs / b]
        elif base:
            cells += [None, None]
        print(line)
        tab.add(*cells)
    if kind == "continuous" and "replay" in results and "river" in results:
        rv = results["river"]
        R.figure("replay_continuous", f"`streameval replay` of a {format(n, ',').replace(',', ' ')}-row JSONL log, "
                 "default monitor, continuous scores", n / results["replay"]["seconds"],
                 "events/s (wall)", peer="river `ROCAUC.update` alone, per event",
                 peer_value=rv["n"] / rv["seconds"])
    if kind == "continuous" and "replay" in results and n == 1_000_000:
        secs = results["replay"]["seconds"]
        print(f"\ntarget: a 1 000 000-row float-score replay in at most 5 s: "
              f"{secs:.2f} s, {'met' if secs <= 5.0 else 'MISSED'}")
    if "replay+labels" in results:
        ratio = results["replay+labels"]["seconds"] / results["replay"]["seconds"]
        print(f"\ncustom labels / bool labels: {ratio:.2f}x (wall)")
    if "replay" in results:
        out = tmp / "out_replay"
        rows = [json.loads(x) for x in open(out / "metrics.jsonl")]
        print(f"\nmetrics rows: {len(rows):,}; final values: "
              + ", ".join(f"{k}={v:.4f}" for k, v in rows[-1]["values"].items()
                          if isinstance(v, float) and "@" not in k))
        extra = results["replay"]["rss_mb"] - results["read"]["rss_mb"]
        print(f"peak RSS above the read-only stage: {extra:.0f} MB (river imports "
              f"included); the state does not grow with the log: sliding windows keep "
              f"10 000 events each, cumulative AUC/AP one entry per distinct score "
              f"({len(np.unique(scores)):,})")
    ckpt = tmp / "out_replay_checkpoint" / "ckpt.json"
    if ckpt.exists():
        print(f"checkpoint (whole monitor state, JSON): {ckpt.stat().st_size / 2**20:.1f} MB")


# ----------------------------------------------------------------------- --long

#: rows generated at once by :func:`stream_log` (what the generator holds)
PIECE = 1_000_000

#: the target of a long replay: 100 000 000 rows in at most 6 minutes, 1.5 GB
TARGET_ROWS, TARGET_SECONDS, TARGET_RSS_MB = 100_000_000, 360.0, 1536.0


def stream_log(path, n, seed=SEED, scores_kind="continuous", positives=0.3):
    """Write a seeded n-row JSONL log piece by piece (:data:`PIECE` rows at a time, each
    piece from its own generator seeded by ``(seed, piece)``): rows as :func:`make_log`
    draws them (labels ~ Bernoulli(``positives``), scores separated by label, event
    times ~ 20 per second), without holding the log in memory. Returns ``(positives,
    bytes)``."""
    t_end = 1_700_000_000.0
    share, positives = positives, 0
    with open(path, "w") as f:
        for k, a in enumerate(range(0, n, PIECE)):
            b = min(n, a + PIECE)
            rng = np.random.default_rng((seed, k))
            m = b - a
            labels = rng.random(m) < share
            margin = 2.5 * (labels - 0.5)
            scores = 1.0 / (1.0 + np.exp(-(margin + rng.standard_normal(m) - 1.0)))
            if scores_kind == "rounded":
                scores = np.round(scores, 4)
            ts = t_end + np.cumsum(rng.exponential(0.05, m))
            t_end = float(ts[-1])
            positives += int(labels.sum())
            lab = np.where(labels, "1", "0")
            for c in range(0, m, 100_000):
                d = min(m, c + 100_000)
                f.write("".join(
                    f'{{"ts":{t:.3f},"id":{i},"label":{y},"score":{s}}}\n'
                    for t, i, y, s in zip(ts[c:d].tolist(), range(a + c + 1, a + d + 1),
                                          lab[c:d].tolist(), scores[c:d].tolist())))
    return positives, Path(path).stat().st_size


def _tree_rss_mb(pid):
    """``(sum, largest)`` resident MB of process ``pid`` and its descendants (from
    /proc, :func:`_results.proc_status_kb`; processes that ended meanwhile are
    skipped)."""
    pids, seen, rss = [pid], set(), []
    while pids:
        p = pids.pop()
        if p in seen:
            continue
        seen.add(p)
        kb = R.proc_status_kb(p, "VmRSS")
        if "VmRSS" in kb:
            rss.append(kb["VmRSS"] / 1024)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    pids += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return (sum(rss), max(rss)) if rss else (0.0, 0.0)


def replay_cli(log, out, src=None, every=0.2):
    """Run ``python -m streameval replay LOG --out OUT --no-report`` (``src`` first on
    the path) as a user would; sample its process tree's RSS every ``every`` seconds.
    Returns ``{"seconds", "cpu", "tree_peak_mb", "process_peak_mb", "summary"}``."""
    import resource
    import shutil
    import threading

    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONHASHSEED="0")
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(src)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "streameval", "replay", str(log), "--out",
                             str(out), "--no-report", "--quiet"], env=env,
                            cwd=os.path.dirname(str(log)), stdout=subprocess.DEVNULL)
    peak = [0.0, 0.0]
    done = threading.Event()

    def sample():
        while not done.wait(every):
            total, largest = _tree_rss_mb(proc.pid)
            peak[0], peak[1] = max(peak[0], total), max(peak[1], largest)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    rc = proc.wait()
    secs = time.perf_counter() - t0
    done.set()
    th.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        raise SystemExit(f"replay of {log} with {src or 'this checkout'} failed: exit {rc}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # (ru_maxrss of the children: the largest single process, sampled or not)
    largest = max(peak[1], after.ru_maxrss / 1024 if after.ru_maxrss > before.ru_maxrss else 0)
    summary = json.loads(Path(out, "summary.json").read_text())
    return {"seconds": secs, "cpu": cpu, "tree_peak_mb": max(peak[0], largest),
            "process_peak_mb": largest, "summary": summary}


#: the fields of ``summary.json`` that differ between two replays of one log by design:
#: the time it took and the output directory
_RUN_FIELDS = ("elapsed_seconds", "out")


def same_outputs(out, other):
    """``{file: identical}`` for two replays' outputs of one log: ``metrics.jsonl`` and
    ``alerts.jsonl`` byte for byte, ``summary.json`` but its :data:`_RUN_FIELDS`."""
    same = {name: Path(out, name).read_bytes() == Path(other, name).read_bytes()
            for name in ("metrics.jsonl", "alerts.jsonl")}
    a, b = (json.loads(Path(d, "summary.json").read_text()) for d in (out, other))
    for key in _RUN_FIELDS:
        a.pop(key, None)
        b.pop(key, None)
    # (compared as canonical JSON: a NaN in it equals itself there)
    same["summary.json"] = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    return same


def long_log(path, n, kind, positives, reuse=False):
    """``(positives, bytes, how)`` of the ``--long`` log at ``path``: written by
    :func:`stream_log`, or, with ``reuse``, the log already there when its record
    (``path`` + ``.meta.json``: rows, kind, positives share, seed, bytes) matches these
    parameters and its size. A reused log is never deleted."""
    meta = Path(str(path) + ".meta.json")
    want = {"rows": n, "scores": kind, "share": positives, "seed": SEED}
    if reuse and meta.exists() and Path(path).exists():
        rec = json.loads(meta.read_text())
        if {k: rec.get(k) for k in want} == want and rec.get("bytes") == Path(path).stat().st_size:
            return rec["positives"], rec["bytes"], "reused"
    pos, size = stream_log(path, n, scores_kind=kind, positives=positives)
    if reuse:
        meta.write_text(json.dumps({**want, "positives": pos, "bytes": size}))
    return pos, size, "generated"


def run_long(args):
    """``--long``: generate the log, replay it with the CLI (and the baseline), print and
    record the table and the target's verdict."""
    kind = "continuous" if args.scores == "both" else args.scores
    n = args.events
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_replay_long_"))
    root.mkdir(parents=True, exist_ok=True)
    log = args.log or root / "events.jsonl"
    try:
        t0 = time.perf_counter()
        pos, size, how = long_log(log, n, kind, args.positives, reuse=args.log is not None)
        print(f"log: {n:,} rows, {kind} scores, {pos / n:.1%} positives, "
              f"{size / 1e9:.2f} GB, {how} in {time.perf_counter() - t0:.0f} s\n")
        runs = {"this": [], "baseline": []}
        for _ in range(max(1, args.runs)):  # baseline and this code alternate
            if args.baseline_src is not None:
                runs["baseline"].append(replay_cli(log, root / "out_base", args.baseline_src))
            runs["this"].append(replay_cli(log, root / "out", args.src))
        if args.baseline_src is not None:
            same = same_outputs(root / "out", root / "out_base")
            print("outputs of this code and the baseline: " + ", ".join(
                f"{name} {'identical' if ok else 'DIFFERENT'}" for name, ok in same.items())
                + "\n")
            R.param(baseline_rows_identical=same["metrics.jsonl"],
                    baseline_outputs_identical=all(same.values()))
    finally:
        if args.keep is None:
            import shutil
            shutil.rmtree(root, ignore_errors=True)

    tab = R.table("replay_long", f"`streameval replay` of a {n:,}-row JSONL log "
                  f"({size / 1e9:.2f} GB), {kind} scores, default monitor",
                  ["code", "wall s", "CPU s (tree)", "wall s per million", "peak RSS MB (tree)",
                   "largest process MB", f"extrapolated to {TARGET_ROWS:,} rows, min"],
                  note="median of the runs; RSS sampled every 0.2 s over the replay and its "
                       "parsing process; the extrapolation is linear in the rows")
    head = (f"{'code':<12}{'wall s':>9}{'CPU s':>9}{'s/M wall':>10}{'tree MB':>9}"
            f"{'proc MB':>9}{'at 100 M, min':>15}")
    print(head)
    print("-" * len(head))
    med = {}
    for who in ("this", "baseline"):
        rs = runs[who]
        if not rs:
            continue
        mid = sorted(rs, key=lambda r: r["seconds"])[len(rs) // 2]
        med[who] = mid
        per_m = mid["seconds"] / n * 1e6
        at = mid["seconds"] * TARGET_ROWS / n / 60
        label = "this" if who == "this" else "baseline"
        print(f"{label:<12}{mid['seconds']:>9.1f}{mid['cpu']:>9.1f}{per_m:>10.2f}"
              f"{mid['tree_peak_mb']:>9.0f}{mid['process_peak_mb']:>9.0f}{at:>15.1f}")
        tab.add(label, mid["seconds"], mid["cpu"], per_m, mid["tree_peak_mb"],
                mid["process_peak_mb"], at)
    this = med["this"]
    if "baseline" in med:
        print(f"\nwall this / baseline: {this['seconds'] / med['baseline']['seconds']:.2f}x")
    ok_t = this["seconds"] * TARGET_ROWS / n <= TARGET_SECONDS
    ok_m = this["tree_peak_mb"] <= TARGET_RSS_MB
    scope = "measured" if n >= TARGET_ROWS else f"extrapolated from {n:,} rows"
    print(f"target: {TARGET_ROWS:,} rows in at most {TARGET_SECONDS / 60:.0f} min and "
          f"{TARGET_RSS_MB / 1024:.1f} GB ({scope}): time {'met' if ok_t else 'MISSED'}, "
          f"memory {'met' if ok_m else 'MISSED'}"
          + ("" if n >= TARGET_ROWS else " (memory grows with the stream: measure 100 M)"))
    s = this["summary"]
    print(f"summary: {s['events']:,} events, {s['rejected']:,} rejected, "
          f"{s['evaluations']:,} evaluations")
    R.figure("replay_long", f"`streameval replay` of a {format(n, ',').replace(',', ' ')}-row "
             f"JSONL log, default monitor, {kind} scores", this["seconds"] / 60, "minutes",
             better="lower", note=f"peak RSS of the process tree {this['tree_peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
