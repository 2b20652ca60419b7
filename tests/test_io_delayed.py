"""Delayed labels: joining predictions to later labels, expiry, orphans, resume.

Oracle: a deliberately naive re-implementation in this file (a dict of
waiting predictions and a linear scan for expiry after every row), run on the
same rows as parsed by json.loads; hand-computed cases for the boundaries.
"""

import csv
import json
import math
import random

import numpy as np
import pytest

from streameval.events import EventError, FieldMap, events_to_batch
from streameval.io.delayed import DelayedSource, LabelJoiner, read_delayed


def naive_join(rows, ttl):
    """(joined, expired, orphans) for rows in order; joined = (id, label, score, ts, pred_ts, line)."""
    waiting = {}  # id -> (pred_ts, score, line)
    watermark = -math.inf
    joined, expired, orphans = [], [], []
    for line, r in rows:
        t = float(r["ts"])
        if "label" in r and t > watermark:  # the labels' clock: label and complete rows
            watermark = t
            for k in list(waiting):
                if watermark - waiting[k][0] > ttl:
                    expired.append((k, waiting[k][0], waiting[k][2]))
                    del waiting[k]
        if "label" in r and "score" not in r:
            if r["id"] in waiting:
                pts, score, _ = waiting.pop(r["id"])
                joined.append((r["id"], bool(r["label"]), score, t, pts, line))
            else:
                orphans.append((r["id"], t, line))
        elif "score" in r and "label" not in r:
            assert r["id"] not in waiting
            waiting[r["id"]] = (t, float(r["score"]), line)
        else:
            joined.append((r.get("id"), bool(r["label"]), float(r["score"]), t, t, line))
    return joined, sorted(expired, key=lambda e: (e[1], e[2])), orphans


def delayed_rows(n, seed, ttl=50.0):
    """Prediction and label rows in time order: some labels late, missing, or orphaned."""
    rng = random.Random(seed)
    preds, labels = [], []
    for i in range(n):
        t = i * 1.0 + rng.random()
        preds.append({"ts": t, "id": f"p{i}", "score": rng.random()})
        u = rng.random()
        if u < 0.75:  # labeled within the ttl (sometimes exactly at it)
            delay = ttl if rng.random() < 0.05 else rng.uniform(0, ttl * 0.9)
            labels.append({"ts": t + delay, "id": f"p{i}", "label": rng.random() < 0.4})
        elif u < 0.85:  # labeled too late
            labels.append({"ts": t + ttl + 1 + rng.random() * 10, "id": f"p{i}", "label": True})
        elif u < 0.9:  # a label for a prediction that never existed
            labels.append({"ts": t + rng.random(), "id": f"ghost{i}", "label": False})
        # else: never labeled
    for i in range(0, n, 17):  # a few complete rows
        preds.append({"ts": i + 0.5, "id": f"c{i}", "score": 0.5, "label": 1})
    merged = sorted([(r["ts"], 0, k, r) for k, r in enumerate(preds)]
                    + [(r["ts"], 1, k, r) for k, r in enumerate(labels)], key=lambda x: x[:3])
    return [r for *_, r in merged], preds, labels


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def run_source(src):
    out = []
    for b in src:
        assert b.pred_ts is not None
        out.extend(zip(b.id, b.label.tolist(), b.score.tolist(), b.ts.tolist(),
                       b.pred_ts.tolist(), b.line.tolist()))
    return out


# ------------------------------------------------------------------ hand-computed cases


def test_join_expiry_orphans_by_hand():
    expired, orphans = [], []
    j = LabelJoiner(10, on_expired=lambda *a: expired.append(a),
                    on_orphan=lambda *a: orphans.append(a))
    rows = [{"id": "a", "ts": 0, "score": 0.9},        # 1
            {"id": "b", "ts": 0, "score": 0.1},        # 2
            {"id": "c", "ts": 5, "score": 0.4, "weight": 2},  # 3
            {"id": "a", "ts": 10, "label": 1},         # 4: exactly ttl later: joined
            {"id": "b", "ts": 10.5, "label": 0},       # 5: 10.5 > 10: b expired, label orphan
            {"id": "x", "ts": 11, "label": 1},         # 6: unknown id: orphan
            {"id": "c", "ts": 12, "label": True},      # 7: joined, weight of the prediction
            {"id": "d", "ts": 13, "score": 0.3, "label": 0}]  # 8: complete row
    out = j.process(events_to_batch(rows, partial=True))
    assert out.id == ["a", "c", "d"]
    assert out.label.tolist() == [True, True, False]
    assert out.score.tolist() == [0.9, 0.4, 0.3]
    assert out.ts.tolist() == [10.0, 12.0, 13.0]        # label arrival time
    assert out.pred_ts.tolist() == [0.0, 5.0, 13.0]     # prediction time
    assert out.weight.tolist() == [1.0, 2.0, 1.0]
    assert out.line.tolist() == [4, 7, 8]
    assert expired == [("b", 0.0, 2)]
    assert orphans == [("b", 10.5, 5), ("x", 11.0, 6)]
    assert (j.n_predictions, j.n_labels, j.n_joined, j.n_complete, j.n_expired, j.n_orphans,
            j.n_pending) == (3, 4, 2, 1, 1, 2, 0)


def test_a_prediction_arriving_overdue_is_expired_not_joined():
    """Out of order: a prediction older than the labels' clock minus label_ttl is
    expired when that clock passes it; its label is then an orphan (the clock = the
    largest label ts seen; predictions do not move it)."""
    expired, orphans = [], []
    j = LabelJoiner(10, on_expired=lambda *a: expired.append(a),
                    on_orphan=lambda *a: orphans.append(a))
    rows = [{"id": "a", "ts": 100, "score": 0.9},   # 1: event time 100
            {"id": "late", "ts": 80, "score": 0.2},  # 2: 100 - 80 = 20 > 10: overdue
            {"id": "ok", "ts": 95, "score": 0.7},    # 3: 100 - 95 = 5: waits
            {"id": "late", "ts": 100, "label": 1},   # 4: orphan (its prediction expired)
            {"id": "ok", "ts": 100, "label": 0}]     # 5: joined
    out = j.process(events_to_batch(rows, partial=True))
    assert out.id == ["ok"] and out.pred_ts.tolist() == [95.0]
    assert expired == [("late", 80.0, 2)] and orphans == [("late", 100.0, 4)]
    assert (j.n_expired, j.n_orphans, j.n_joined, j.n_pending) == (1, 1, 1, 1)


def _join_with_late_rows(rows, ttl, mode):
    """Brute force: before each label row, expire what is overdue at the largest label
    ts seen; a prediction stored already overdue on that clock is expired at once."""
    waiting, wm, joined = {}, -math.inf, []
    expired = orphans = dups = 0
    for r in rows:
        if "score" not in r:
            wm = max(wm, r["ts"])
        for k in [k for k, v in waiting.items() if wm - v[0] > ttl]:
            del waiting[k]
            expired += 1
        if "score" not in r:
            if r["id"] in waiting:
                pts, score = waiting.pop(r["id"])
                joined.append((r["id"], r["label"], score, r["ts"], pts))
            else:
                orphans += 1
            continue
        if r["id"] in waiting:
            dups += 1
            if mode == "keep_first":
                continue
        waiting[r["id"]] = (r["ts"], r["score"])
        if wm - r["ts"] > ttl:
            del waiting[r["id"]]
            expired += 1
    return joined, expired, orphans, dups, len(waiting)


@pytest.mark.parametrize("seed", range(40))
def test_out_of_order_times_match_brute_force(seed):
    rng = random.Random(seed)
    rows, t = [], 0.0
    for _ in range(rng.randint(1, 80)):
        t += rng.choice([0, 0, 1, 2, 5]) - 3 * (rng.random() < 0.15)  # some go back
        k = rng.randint(0, 8)
        if rng.random() < 0.5:
            rows.append({"id": k, "ts": t, "score": round(rng.random(), 3)})
        else:
            rows.append({"id": k, "ts": t, "label": rng.random() < 0.5})
    ttl, mode = rng.choice([1, 3, 10]), rng.choice(["keep_first", "keep_last"])
    j = LabelJoiner(ttl, on_duplicate=mode)
    got, pos = [], 0
    while pos < len(rows):  # in batches of random sizes: the same result
        k = rng.randint(1, 10)
        b = j.process(events_to_batch(rows[pos:pos + k], partial=True))
        pos += k
        got += list(zip(b.id or [], b.label.tolist(), b.score.tolist(), b.ts.tolist(),
                        b.pred_ts.tolist()))
    assert (got, j.n_expired, j.n_orphans, j.n_duplicates, j.n_pending) == \
        _join_with_late_rows(rows, ttl, mode)


def test_advance_expires_by_clock():
    expired = []
    j = LabelJoiner(60, on_expired=lambda *a: expired.append(a))
    j.process(events_to_batch([{"id": 1, "ts": 0, "score": 0.5}, {"id": 2, "ts": 30, "score": 0.5}],
                              partial=True))
    assert j.advance(60) == 0 and j.advance(61) == 1 and expired == [(1, 0.0, 1)]
    assert j.advance(10) == 0  # time never goes back
    assert j.pending_ids() == [2] and j.watermark == 61


def test_segments_come_from_the_prediction():
    fm = FieldMap(segment="country")
    j = LabelJoiner(100)
    b = events_to_batch([{"id": "a", "ts": 0, "score": 0.5, "country": "fr"},
                         {"id": "a", "ts": 3, "label": 0, "country": "de"}], fm, partial=True)
    assert j.process(b).segment == ["fr"]


def test_duplicate_prediction_is_an_error_and_nothing_is_applied():
    seen = []
    j = LabelJoiner(100, on_orphan=lambda *a: seen.append(a), on_expired=lambda *a: seen.append(a))
    j.process(events_to_batch([{"id": "a", "ts": 0, "score": 0.5}], partial=True))
    before = j.to_state()
    rows = [{"id": "z", "ts": 1, "label": 1},      # an orphan, reported only if the batch applies
            {"id": "b", "ts": 2, "score": 0.1},
            {"id": "a", "ts": 3, "score": 0.7}]    # duplicate of a waiting prediction
    b = events_to_batch(rows, partial=True)
    with pytest.raises(EventError) as ei:
        j.process(b)
    assert str(ei.value) == "line 3: duplicate prediction id 'a' (still waiting from line 1)"
    assert j.to_state() == before and seen == []
    # an id may be reused once its prediction has been labeled
    out = j.process(events_to_batch([{"id": "a", "ts": 4, "label": 1},
                                     {"id": "a", "ts": 5, "score": 0.2}], partial=True))
    assert out.score.tolist() == [0.5] and j.pending_ids() == ["a"]


@pytest.mark.parametrize("mode,score,line", [("keep_first", 0.5, 1), ("keep_last", 0.7, 2)])
def test_duplicate_modes(mode, score, line):
    rejected = []
    j = LabelJoiner(100, on_duplicate=mode, rejected=lambda *r: rejected.append(r))
    out = j.process(events_to_batch([{"id": "a", "ts": 0, "score": 0.5},
                                     {"id": "a", "ts": 1, "score": 0.7},
                                     {"id": "a", "ts": 2, "label": 1}], partial=True))
    assert out.score.tolist() == [score] and out.pred_ts.tolist() == [line - 1.0]
    assert j.n_duplicates == 1 and len(rejected) == 1
    assert rejected[0][0] == 3 - line  # the line of the prediction that was dropped


def test_bad_arguments():
    for ttl in (0, -1, math.nan, "1h", True):
        with pytest.raises(ValueError, match="label_ttl"):
            LabelJoiner(ttl)
    with pytest.raises(ValueError, match="on_duplicate"):
        LabelJoiner(1, on_duplicate="ignore")
    with pytest.raises(ValueError, match="id field"):
        DelayedSource("x.jsonl", FieldMap(id=None), label_ttl=1)


# ------------------------------------------------------------------ against the naive oracle


@pytest.mark.parametrize("seed,batch_size", [(0, 7), (1, 64), (2, 100_000)])
def test_one_file_matches_naive_oracle(tmp_path, seed, batch_size):
    rows, _, _ = delayed_rows(600, seed)
    p = tmp_path / "log.jsonl"
    write_jsonl(p, rows)
    parsed = [(k, json.loads(text)) for k, text in enumerate(open(p), 1)]
    joined, expired, orphans = naive_join(parsed, 50.0)
    got_exp, got_orph = [], []
    src = DelayedSource(p, label_ttl=50, batch_size=batch_size,
                        on_expired=lambda *a: got_exp.append(a),
                        on_orphan=lambda *a: got_orph.append(a))
    assert run_source(src) == joined
    assert sorted(got_exp, key=lambda e: (e[1], e[2])) == expired
    assert got_orph == orphans
    j = src.joiner
    assert j.n_expired == len(expired) > 10 and j.n_orphans == len(orphans) > 10
    assert src.positions == [len(rows)]


@pytest.mark.parametrize("batch_size", [5, 50, 10_000])
def test_two_files_merged_by_time_match_one_file(tmp_path, batch_size):
    rows, preds, labels = delayed_rows(400, 3)
    preds.sort(key=lambda r: r["ts"])
    labels.sort(key=lambda r: r["ts"])
    pp, lp = tmp_path / "pred.jsonl", tmp_path / "labels.csv"
    write_jsonl(pp, preds)
    with open(lp, "w", newline="") as f:  # labels as CSV: ids are strings in both files
        w = csv.writer(f)
        w.writerow(["id", "ts", "label"])
        for r in labels:
            w.writerow([r["id"], repr(r["ts"]), "true" if r["label"] else "false"])
    got_orph = []
    src = read_delayed(pp, label_ttl=50, labels_path=lp, batch_size=batch_size,
                       on_orphan=lambda *a: got_orph.append(a))
    got = run_source(src)
    joined, expired, orphans = naive_join([(0, r) for r in rows], 50.0)
    strip = lambda xs: [x[:-1] for x in xs]  # lines differ between one and two files  # noqa: E731
    assert strip(got) == strip(joined)
    assert [o[:2] for o in got_orph] == [o[:2] for o in orphans]
    assert src.joiner.n_expired == len(expired)
    # label lines point into the labels file (header = line 1)
    by_id = {r["id"]: k + 2 for k, r in enumerate(labels)}
    pred_ids = {r["id"] for r in preds if "label" not in r}
    assert [g[5] for g in got if g[0] in pred_ids] == [by_id[g[0]] for g in got if g[0] in pred_ids]
    assert src.positions == [len(preds), len(labels) + 1]


# ------------------------------------------------------------------ resume


def _interrupted(make, stop_after):
    """Run a source, stop after ``stop_after`` batches, resume from its JSON state."""
    src = make(None)
    out = []
    for k, b in enumerate(src):
        out.append(b)
        if k + 1 == stop_after:
            break
    state = json.loads(json.dumps(src.to_state()))
    src2 = make(state)
    out.extend(src2)
    return out, src2


def _flat(batches):
    return [t for b in batches for t in zip(b.id, b.label.tolist(), b.score.tolist(),
                                           b.ts.tolist(), b.pred_ts.tolist(), b.line.tolist())]


@pytest.mark.parametrize("two_files", [False, True])
def test_resume_equals_uninterrupted(tmp_path, two_files):
    rows, preds, labels = delayed_rows(500, 4)
    if two_files:
        preds.sort(key=lambda r: r["ts"])
        labels.sort(key=lambda r: r["ts"])
        write_jsonl(tmp_path / "p.jsonl", preds)
        lines = [json.dumps(r) for r in labels]
        lines[10] = '{"id": "bad", "ts": 5, "label": "maybe"}'
        lines[200] = "{not json"
        (tmp_path / "l.jsonl").write_text("\n".join(lines) + "\n")
        kw = dict(labels_path=tmp_path / "l.jsonl")
        path = tmp_path / "p.jsonl"
    else:
        lines = [json.dumps(r) for r in rows]
        lines[30] = '{"id": "bad", "ts": 5, "score": NaN}'
        (tmp_path / "log.jsonl").write_text("\n".join(lines) + "\n")
        kw = {}
        path = tmp_path / "log.jsonl"

    def make(state, sink):
        return DelayedSource(path, label_ttl=50, batch_size=16, on_error="skip", state=state,
                             rejected=lambda *r: sink.append(("rejected",) + r[:2]),
                             on_expired=lambda *a: sink.append(("expired",) + a),
                             on_orphan=lambda *a: sink.append(("orphan",) + a), **kw)

    full_log = []
    full = make(None, full_log)
    whole = list(full)
    for stop in (1, 3, 7):
        log = []
        parts, resumed = _interrupted(lambda st: make(st, log), stop)
        assert _flat(parts) == _flat(whole)
        assert log == full_log  # every report exactly once, in the same order
        assert resumed.joiner.to_state() == full.joiner.to_state()
    assert sum(1 for e in full_log if e[0] == "rejected") == (2 if two_files else 1)


def test_joiner_state_round_trip_mid_stream():
    rows, _, _ = delayed_rows(300, 5)
    batch = events_to_batch(rows, FieldMap(), partial=True)
    whole = LabelJoiner(50)
    expected = whole.process(batch)
    first = LabelJoiner(50)
    mask = np.arange(len(batch)) < 137
    a = first.process(batch.select(mask))
    state = json.loads(json.dumps(first.to_state()))
    second = LabelJoiner.from_state(state)
    b = second.process(batch.select(~mask))
    assert a.id + b.id == expected.id
    assert np.concatenate([a.ts, b.ts]).tolist() == expected.ts.tolist()
    assert second.to_state() == whole.to_state()
    with pytest.raises(ValueError, match="version"):
        LabelJoiner.from_state({**state, "version": 99})
    with pytest.raises(ValueError, match="corrupt"):
        LabelJoiner.from_state({**state, "pending": [["a", 1]]})


@pytest.mark.parametrize("form", ["to_state", "to_array_state"])
def test_expired_predictions_not_yet_passed_on_survive_a_checkpoint(form):
    """With predictions passed on, an expiry by the clock (advance) is handed out by the
    next process; a checkpoint between the two, in either form, keeps it: the resumed
    joiner's next output equals the uninterrupted one's (kinds, ids, times)."""
    def run(cut):
        j = LabelJoiner(60, predictions=True)
        j.process(events_to_batch([{"id": 1, "ts": 0, "score": 0.25},
                                   {"id": 2, "ts": 30, "score": 0.75}], partial=True))
        assert j.advance(61) == 1
        if cut:
            j = LabelJoiner.from_state(getattr(j, form)(), predictions=True)
        out = j.process(events_to_batch([{"id": 2, "ts": 62, "label": 1}], partial=True))
        return out.kind.tolist(), out.id, out.ts.tolist(), out.score.tolist()

    whole, resumed = run(False), run(True)
    assert whole == resumed and whole[1] == [1, 2]
    assert whole[2][0] == 61.0 and whole[3][0] == 0.25


def test_join_of_a_large_log(tmp_path):
    rows, _, _ = delayed_rows(100_000, 6)
    p = tmp_path / "big.jsonl"
    write_jsonl(p, rows)
    src = DelayedSource(p, label_ttl=50)
    n = sum(len(b) for b in src)
    assert n == src.joiner.n_joined + src.joiner.n_complete > 70_000


def test_two_files_skip_logs_each_bad_row_under_its_own_file(tmp_path, caplog):
    """Without a rejected callback, a skipped row is logged with the path of the file it
    is in (a line number alone is ambiguous between the two files)."""
    pp, lp = tmp_path / "pred.jsonl", tmp_path / "labels.jsonl"
    write_jsonl(pp, [{"id": "a", "ts": 1, "score": 0.9}, {"id": "b", "ts": 2, "score": "x"}])
    write_jsonl(lp, [{"id": "a", "ts": 3, "label": 1}, {"id": "b", "ts": 4, "label": "maybe"}])
    with caplog.at_level("WARNING", logger="streameval.io"):
        src = read_delayed(pp, label_ttl=50, labels_path=lp, on_error="skip")
        run_source(src)
    msgs = sorted(r.getMessage() for r in caplog.records)
    assert msgs == sorted([f"{lp}: rejected line 2: unknown label 'maybe' (expected one of true, false, 1 or 0)",
                           f"{pp}: rejected line 2: score is not a number: 'x'"])
    assert src.n_rejected == 2 and src.joiner.n_joined == 1


# ------------------------------------------------------- the labels' clock: backfills


def _joined_set(batches):
    out = set()
    for b in batches:
        out |= set(zip(b.id or [], b.label.tolist(), b.score.tolist(), b.ts.tolist(),
                       b.pred_ts.tolist()))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_a_backfill_joins_as_the_same_rows_in_time_order(seed, tmp_path):
    """Every prediction first, then every label (each within label_ttl of its
    prediction, the labels in time order): the join equals the one of the same rows
    merged in time order, and the brute-force join of both orders; every label joins.
    Predictions alone move no clock, so thousands of them posted ahead of their labels
    wait for them."""
    rng = random.Random(seed)
    ttl = 60.0
    preds, labels = [], []
    for i in range(3000):
        t = i * 0.5
        preds.append({"id": f"p{i}", "ts": t, "score": round(rng.random(), 4)})
        if rng.random() < 0.9:
            labels.append({"id": f"p{i}", "ts": t + rng.uniform(0, ttl),
                           "label": rng.random() < 0.3})
    labels.sort(key=lambda r: r["ts"])
    in_order = sorted(preds + labels, key=lambda r: (r["ts"], "label" in r))
    backfill = preds + labels
    results = []
    for rows in (in_order, backfill):
        j = LabelJoiner(ttl)
        outs = [j.process(events_to_batch(rows[a:a + 700], partial=True))
                for a in range(0, len(rows), 700)]
        results.append((_joined_set(outs), j.n_expired, j.n_orphans, j.n_pending))
        ref = _join_with_late_rows(rows, ttl, "keep_first")
        assert _joined_set(outs) == {tuple(x[:5]) for x in
                                     [(k, lab, s, t, p) for k, lab, s, t, p in ref[0]]}
    assert results[0] == results[1]
    joined, expired, orphans, pending = results[0]
    # every label joined; the unlabeled predictions expire as the labels pass them
    last = labels[-1]["ts"]
    unlabeled = {r["id"] for r in preds} - {r["id"] for r in labels}
    overdue = sum(last - float(r["id"][1:]) * 0.5 > ttl for r in preds if r["id"] in unlabeled)
    assert len(joined) == len(labels) and orphans == 0
    assert expired == overdue > 0 and pending == len(unlabeled) - overdue
    # the same backfill from a file: one log holding the predictions, then the labels
    log = tmp_path / "backfill.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in backfill))
    src = DelayedSource(str(log), label_ttl=ttl)
    assert _joined_set(list(src)) == joined
    assert src.counts()["expired"] == overdue and src.counts()["orphans"] == 0


def test_a_backfill_whose_labels_are_overdue_still_expires_them():
    """The labels' clock still expires: a label more than label_ttl after its
    prediction finds it expired (an orphan), whatever order the rows came in."""
    rows = [{"id": "a", "ts": 0, "score": 0.9}, {"id": "b", "ts": 50, "score": 0.1},
            {"id": "b", "ts": 55, "label": 0}, {"id": "a", "ts": 70, "label": 1}]
    expired, orphans = [], []
    j = LabelJoiner(60, on_expired=lambda *a: expired.append(a),
                    on_orphan=lambda *a: orphans.append(a))
    out = j.process(events_to_batch(rows, partial=True))
    assert out.id == ["b"] and expired == [("a", 0.0, 1)] and orphans == [("a", 70.0, 4)]
    assert j.watermark == 70.0 and j.n_pending == 0


def test_pending_bytes_counts_ids_and_segments():
    from streameval.io.delayed import PENDING_BYTES

    j = LabelJoiner(10)
    j.process(events_to_batch([{"id": "x" * 100, "ts": 0, "score": 0.5, "seg": "fr"},
                               {"id": 7, "ts": 0, "score": 0.5, "seg": "de"}],
                              FieldMap(segment="seg"), partial=True))
    assert j.pending_bytes == 2 * PENDING_BYTES + 100 + 2 + 2


from hypothesis import given, settings, strategies as st  # noqa: E402

_row = st.tuples(st.booleans(), st.integers(0, 6), st.integers(-5, 5), st.booleans(),
                 st.integers(0, 99))


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(_row, min_size=1, max_size=60), ttl=st.sampled_from([1, 3, 10]),
       mode=st.sampled_from(["keep_first", "keep_last"]), cut=st.integers(1, 12))
def test_out_of_order_join_matches_brute_force_property(rows, ttl, mode, cut):
    """Hypothesis: predictions and labels with times that go back and forth, ids that
    repeat, in batches of any size: the joiner equals the brute-force join (the labels'
    clock, expiry before each label row, overdue predictions expired on arrival)."""
    t = 0
    made = []
    for is_pred, k, step, lab, sc in rows:
        t += step
        made.append({"id": k, "ts": float(t), "score": sc / 100} if is_pred
                    else {"id": k, "ts": float(t), "label": lab})
    j = LabelJoiner(ttl, on_duplicate=mode)
    got = []
    for a in range(0, len(made), cut):
        b = j.process(events_to_batch(made[a:a + cut], partial=True))
        got += list(zip(b.id or [], b.label.tolist(), b.score.tolist(), b.ts.tolist(),
                        b.pred_ts.tolist()))
    assert (got, j.n_expired, j.n_orphans, j.n_duplicates, j.n_pending) == \
        _join_with_late_rows(made, ttl, mode)


def test_a_service_backfill_joins_every_label(tmp_path):
    """The service over a real socket: 15 000 predictions posted first, then their
    labels (each within label_ttl, in time order): every label joins, nothing expires
    while the labels have not passed it; the snapshot's join counts say so."""
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    import http.client
    from urllib.parse import urlsplit

    from streameval.service import BackgroundServer

    def post(url, path, rows):
        u = urlsplit(url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        try:
            conn.request("POST", path, body=json.dumps(rows).encode(),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, json.loads(r.read())
        finally:
            conn.close()

    rng = random.Random(7)
    t0, ttl, n = 1_700_000_000, 600.0, 15_000
    preds = [{"id": f"p{i}", "ts": t0 + i * 0.2, "score": round(rng.random(), 3)}
             for i in range(n)]
    labels = sorted(({"id": p["id"], "ts": p["ts"] + rng.uniform(0, ttl),
                      "label": rng.random() < 0.3} for p in preds), key=lambda r: r["ts"])
    config = {"input": {"label_ttl": ttl, "max_future": 0},
              "monitor": {"every": 0, "metrics": {"roc_auc": "roc_auc"}}}
    with BackgroundServer(config) as srv:
        for a in range(0, n, 5000):
            assert post(srv.url, "/predictions", preds[a:a + 5000])[0] == 200
        for a in range(0, n, 5000):
            assert post(srv.url, "/labels", labels[a:a + 5000])[0] == 200
        join = srv.engine.read(lambda monitor, info: (monitor.n, info["join"]))
    n_events, join = join
    assert n_events == n
    assert (join["joined"], join["expired"], join["orphans"], join["pending"]) == (n, 0, 0, 0)
