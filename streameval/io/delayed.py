"""Delayed labels: join prediction rows to the label rows that arrive later.

In production the label of a prediction (fraud confirmed, click, churn) comes
minutes or days after the score. A log then holds *prediction rows*
(``id, ts, score`` and optionally ``weight`` and segment fields, no label) and
*label rows* (``id, ts, label``), in one file or in two files merged by time.
:class:`LabelJoiner` keeps the predictions waiting for their label in a dict
keyed by id, with a heap on prediction time for expiry:

* a prediction **counts when its label arrives**: the joined event carries the
  **label's arrival time as ts** (so windows and evaluation follow the order in
  which outcomes became known), the prediction time as ``pred_ts``, the
  label row's line as ``line``, and the score, weight and segment of the
  prediction row;
* a prediction still unlabeled **more than** ``label_ttl`` seconds after its
  prediction time, on the clock of the labels, is **expired**: counted
  (``n_expired``) and reported to ``on_expired(id, pred_ts, line)``. That clock
  (the watermark) is the largest ``ts`` of the label rows and complete rows seen
  so far, or what :meth:`LabelJoiner.advance` sets; prediction rows never move it.
  Expiry asks "has the label stream gone ``label_ttl`` past this prediction without
  bringing its label?", the question only the label stream can answer: a backfill
  (every prediction first, then the labels) or a label pipeline running behind the
  predictions joins exactly as the same rows in time order would. A prediction
  older than the watermark minus ``label_ttl`` when it arrives is expired at once;
* each waiting prediction holds its id, score, weight, segment and line: its bytes
  are bounded because the readers refuse ids and segment values over
  :data:`~streameval.validation.MAX_ID_BYTES` and
  :data:`~streameval.validation.MAX_SEGMENT_BYTES` (:attr:`LabelJoiner.pending_bytes`
  estimates the total);
* a label with no waiting prediction (unknown id, already labeled, or
  expired) is an **orphan**: counted (``n_orphans``) and reported to
  ``on_orphan(id, ts, line)``;
* a second prediction with the id of a waiting one is an error by default
  (``on_duplicate="error"``), or keeps the first or the last one, counting
  and reporting the other as a rejected row;
* a complete row (label and score) passes through unchanged (``pred_ts = ts``).

With ``predictions=True`` every prediction also counts **when it is made**: the output
holds, in row order, each accepted prediction at its own time (``kind``
:data:`~streameval.events.KIND_PREDICTION`, a placeholder label), each joined event
(``kind`` :data:`~streameval.events.KIND_LABEL`: the label of a prediction passed on
before), each complete row (:data:`~streameval.events.KIND_EVENT`) and each prediction
closed unlabeled (:data:`~streameval.events.KIND_EXPIRED` at the time it expired, with the
prediction's score, weight, segment and ``pred_ts``; :data:`~streameval.events.KIND_REPLACED`
for one replaced by a later prediction with its id, ``on_duplicate="keep_last"``). A
Monitor's ``apply`` takes such a batch: label-free metrics count the predictions,
labelled metrics the labels, and its label coverage the rest. The joined events, the
counters, the callbacks and the expiry are the same as without it.

Ids join by value: ``"7"`` and ``7`` are different ids.

Imports: numpy, :mod:`streameval.events` and :mod:`streameval.io.sources`; never the
Monitor or metrics.
"""

from __future__ import annotations

import heapq
import math
import os
from collections import deque
from typing import Any, Callable, Iterator

import numpy as np

from streameval.events import (
    DEFAULT_BATCH_SIZE,
    KIND_EVENT,
    KIND_EXPIRED,
    KIND_LABEL,
    KIND_PREDICTION,
    KIND_REPLACED,
    Batch,
    EventError,
    FieldMap,
)
from streameval.io.sources import EventSource

__all__ = ["LabelJoiner", "DelayedSource", "read_delayed"]

STATE_VERSION = 1

_DUPLICATE_MODES = ("error", "keep_first", "keep_last")

#: Bytes of one waiting prediction besides its id and segment strings: the dict slot,
#: the tuple of six fields, two floats, the heap entry (measured with
#: ``tracemalloc`` on CPython 3.11/3.12: about 330 bytes; rounded up).
PENDING_BYTES = 400


def _check_ttl(label_ttl: Any) -> float:
    if isinstance(label_ttl, bool) or not isinstance(label_ttl, (int, float)):
        raise ValueError(f"label_ttl must be a number of seconds, got {label_ttl!r}")
    ttl = float(label_ttl)
    if not ttl > 0:  # also refuses NaN
        raise ValueError(f"label_ttl must be > 0 (math.inf: never expire), got {label_ttl!r}")
    return ttl


class LabelJoiner:
    """Join predictions and their later labels by id, with expiry after ``label_ttl``.

    Cost per row: `O(1)` for a label, `O(log p)` for a prediction (``p``
    waiting predictions, heap push) and for each expiry; memory `O(p)`, about
    :data:`PENDING_BYTES` per waiting prediction plus its id and segment strings.

    >>> from streameval.events import events_to_batch
    >>> j = LabelJoiner(label_ttl=60)
    >>> rows = [{"id": "a", "ts": 0, "score": 0.9}, {"id": "b", "ts": 1, "score": 0.2},
    ...         {"id": "a", "ts": 30, "label": True}, {"id": "z", "ts": 31, "label": False},
    ...         {"id": "c", "ts": 100, "score": 0.5}]
    >>> out = j.process(events_to_batch(rows, partial=True))
    >>> out.id, out.label.tolist(), out.score.tolist(), out.ts.tolist(), out.pred_ts.tolist()
    (['a'], [True], [0.9], [30.0], [0.0])
    >>> j.n_joined, j.n_orphans, j.n_expired, j.n_pending   # labels reached 31 only
    (1, 1, 0, 2)
    >>> j.advance(100), j.n_expired, j.pending_ids()         # b: 100 - 1 > 60
    (1, 1, ['c'])

    Callbacks (all optional): ``on_expired(id, pred_ts, line)``,
    ``on_orphan(id, ts, line)``, ``rejected(line, reason, raw)`` for
    duplicates that are not errors. They are called after a batch has been
    applied, in row order. :meth:`process` is atomic: when it raises (a
    duplicate id with ``on_duplicate="error"``, or a batch without ``kind``
    information where one is needed) the joiner is unchanged and no callback
    has been called.
    """

    def __init__(
        self,
        label_ttl: float,
        *,
        on_duplicate: str = "error",
        on_expired: Callable[[Any, float, int], None] | None = None,
        on_orphan: Callable[[Any, float, int], None] | None = None,
        rejected: Callable[[int, str, Any], None] | None = None,
        predictions: bool = False,
    ) -> None:
        if on_duplicate not in _DUPLICATE_MODES:
            raise ValueError(f"on_duplicate must be one of {_DUPLICATE_MODES}, got {on_duplicate!r}")
        self.label_ttl = _check_ttl(label_ttl)
        self.on_duplicate = on_duplicate
        self.on_expired = on_expired
        self.on_orphan = on_orphan
        self.rejected = rejected
        if not isinstance(predictions, bool):
            raise ValueError(f"predictions must be True or False, got {predictions!r}")
        #: pass every prediction on when it is made (see the module docstring)
        self.predictions = predictions
        # predictions expired by advance() between two process() calls (predictions=True):
        # the next output starts with them
        self._closed: list = []
        # id -> (pred_ts, score, weight, segment, line, seq)
        self._pending: dict[Any, list] = {}
        self._heap: list[tuple[float, int, Any]] = []  # (pred_ts, seq, id), lazily deleted
        self._seq = 0
        self.watermark = -math.inf
        self.n_predictions = 0
        self.n_labels = 0
        self.n_joined = 0
        self.n_complete = 0
        self.n_expired = 0
        self.n_orphans = 0
        self.n_duplicates = 0

    @property
    def n_pending(self) -> int:
        """Predictions waiting for their label."""
        return len(self._pending)

    def pending_ids(self) -> list:
        """Ids of the waiting predictions, oldest prediction first. Cost: `O(p log p)`."""
        return [k for k, _ in sorted(self._pending.items(), key=lambda kv: (kv[1][0], kv[1][5]))]

    def __repr__(self) -> str:
        return (f"LabelJoiner(label_ttl={self.label_ttl}, pending={self.n_pending}, "
                f"joined={self.n_joined}, expired={self.n_expired}, orphans={self.n_orphans})")

    # ------------------------------------------------------------ processing

    @property
    def pending_bytes(self) -> int:
        """An estimate of the memory of the waiting predictions: :data:`PENDING_BYTES`
        each, plus the UTF-8 bytes of their string ids and segment values. Cost: `O(p)`."""
        total = PENDING_BYTES * len(self._pending)
        for key, e in self._pending.items():
            if isinstance(key, str):
                total += len(key)
            seg = e[3]
            for v in (seg if isinstance(seg, tuple) else (seg,)):
                if isinstance(v, str):
                    total += len(v)
        return total

    def advance(self, t: float) -> int:
        """Move the labels' clock to ``t`` (if later) and expire what is overdue.

        For a service whose clock moves without label rows. Returns the number of
        predictions expired (with ``predictions=True`` the next :meth:`process` output
        starts with their rows). Cost: `O(k log p)` for ``k`` expiries.
        """
        reports: list = []
        k = self._advance(float(t), reports)
        if self.predictions:
            self._closed.extend((KIND_EXPIRED, r[1], self.watermark, r[4]) for r in reports
                                if r[0] == "expired")
        self._report(reports)
        return k

    def _advance(self, t: float, reports: list) -> int:
        if not t > self.watermark:
            return 0
        self.watermark = t
        heap, pending = self._heap, self._pending
        ttl = self.label_ttl
        k = 0
        while heap and t - heap[0][0] > ttl:
            pred_ts, seq, key = heapq.heappop(heap)
            entry = pending.get(key)
            if entry is None or entry[5] != seq:
                continue  # already labeled, or replaced by a later prediction
            del pending[key]
            k += 1
            reports.append(("expired", key, pred_ts, entry[4], entry))
        self.n_expired += k
        return k

    def process(self, batch: Batch) -> Batch:
        """Apply a batch of rows in order; return the events that became complete.

        ``batch`` comes from a partial read (``EventSource(..., partial=True)``
        or ``events_to_batch(rows, partial=True)``), whose ``kind`` says which
        rows are predictions, labels or complete events. The result carries
        ``pred_ts``. Cost: `O(n log p)`.
        """
        kind = batch.kind
        n = len(batch)
        if kind is None:
            kind = np.full(n, KIND_EVENT, np.int8)
        ids = batch.id if batch.id is not None else [None] * n
        if n and (kind != KIND_EVENT).any() and batch.id is None:
            raise EventError("prediction and label rows need an id", line=int(batch.line[0]))
        snapshot = self._snapshot_if_risky(kind, ids)
        reports: list = []
        try:
            out = self._process(batch, kind, ids, reports)
        except EventError:
            if snapshot is not None:
                self._restore(snapshot)
            raise
        self._report(reports)
        return out

    def _snapshot_if_risky(self, kind: np.ndarray, ids: list):
        """State copy when this batch may hold a duplicate prediction (to undo on error)."""
        if self.on_duplicate != "error":
            return None
        pred_ids = [ids[i] for i in np.flatnonzero(kind == KIND_PREDICTION).tolist()]
        pending = self._pending
        if len(set(pred_ids)) == len(pred_ids) and not any(k in pending for k in pred_ids):
            return None
        return self.to_state()

    def _restore(self, state: dict) -> None:
        fresh = LabelJoiner.from_state(state)
        for name in ("_pending", "_heap", "_seq", "watermark", "n_predictions", "n_labels",
                     "n_joined", "n_complete", "n_expired", "n_orphans", "n_duplicates"):
            setattr(self, name, getattr(fresh, name))

    def _process(self, batch: Batch, kind: np.ndarray, ids: list, reports: list) -> Batch:
        pending = self._pending
        heap = self._heap
        push = heapq.heappush
        ts_l = batch.ts.tolist()
        kind_l = kind.tolist()
        score_l = batch.score.tolist()
        label_l = batch.label.tolist()
        weight_l = batch.weights().tolist()
        line_l = batch.line.tolist()
        segs = batch.segment if batch.segment is not None else None
        o_label, o_score, o_ts, o_w, o_line, o_id, o_seg, o_pts = [], [], [], [], [], [], [], []
        mode = self.on_duplicate
        n_pred = n_lab = n_join = n_comp = n_orph = n_dup = 0
        advance = self._advance
        ttl = self.label_ttl
        passing = self.predictions
        o_kind: list = []

        def close(kd, key, t, entry):
            # kind, id, time, (pred_ts, score, weight, segment, line, seq)
            o_kind.append(kd)
            o_label.append(False)
            o_score.append(entry[1])
            o_ts.append(t)
            o_w.append(entry[2])
            o_line.append(entry[4])
            o_id.append(key)
            o_seg.append(entry[3])
            o_pts.append(entry[0])

        if passing:
            for closed in self._closed:
                close(*closed)

        for i, k in enumerate(kind_l):
            t = ts_l[i]
            if k != KIND_PREDICTION and t > self.watermark:  # the labels' clock moves
                if heap and t - heap[0][0] > ttl:
                    before = len(reports)
                    advance(t, reports)
                    if passing:
                        for r in reports[before:]:
                            if r[0] == "expired":
                                close(KIND_EXPIRED, r[1], t, r[4])
                else:
                    self.watermark = t
            if k == KIND_LABEL:
                n_lab += 1
                key = ids[i]
                entry = pending.pop(key, None)
                if entry is None:
                    n_orph += 1
                    reports.append(("orphan", key, t, line_l[i]))
                    continue
                n_join += 1
                if passing:
                    o_kind.append(KIND_LABEL)
                o_label.append(label_l[i])
                o_score.append(entry[1])
                o_ts.append(t)
                o_w.append(entry[2])
                o_line.append(line_l[i])
                o_id.append(key)
                o_seg.append(entry[3])
                o_pts.append(entry[0])
            elif k == KIND_PREDICTION:
                n_pred += 1
                key = ids[i]
                old = pending.get(key)
                if old is not None:
                    if mode == "error":
                        raise EventError(
                            f"duplicate prediction id {key!r} (still waiting from line {old[4]})",
                            line=line_l[i], raw=key)
                    n_dup += 1
                    if mode == "keep_first":
                        reports.append(("rejected", line_l[i],
                                        f"duplicate prediction id {key!r} (kept line {old[4]})", key))
                        continue
                    reports.append(("rejected", old[4],
                                    f"duplicate prediction id {key!r} (replaced by line {line_l[i]})", key))
                    if passing:
                        close(KIND_REPLACED, key, t, old)
                seq = self._seq
                self._seq = seq + 1
                entry = (t, score_l[i], weight_l[i], segs[i] if segs is not None else None,
                         line_l[i], seq)
                if passing:  # the prediction counts now, at its own time
                    close(KIND_PREDICTION, key, t, entry)
                if self.watermark - t > ttl:
                    # already overdue on the labels' clock: expired now (it would
                    # otherwise wait for a later label time, and could still join)
                    pending.pop(key, None)
                    self.n_expired += 1
                    reports.append(("expired", key, t, line_l[i]))
                    if passing:
                        close(KIND_EXPIRED, key, t, entry)
                    continue
                pending[key] = entry
                push(heap, (t, seq, key))
            else:
                n_comp += 1
                if passing:
                    o_kind.append(KIND_EVENT)
                o_label.append(label_l[i])
                o_score.append(score_l[i])
                o_ts.append(t)
                o_w.append(weight_l[i])
                o_line.append(line_l[i])
                o_id.append(ids[i])
                o_seg.append(segs[i] if segs is not None else None)
                o_pts.append(t)
        self.n_predictions += n_pred
        self.n_labels += n_lab
        self.n_joined += n_join
        self.n_complete += n_comp
        self.n_orphans += n_orph
        self.n_duplicates += n_dup
        self._closed = []
        return Batch(
            np.array(o_label, dtype=bool),
            np.array(o_score, dtype=np.float64),
            np.array(o_ts, dtype=np.float64),
            np.array(o_w, dtype=np.float64),
            np.array(o_line, dtype=np.int64),
            o_id if any(v is not None for v in o_id) else None,
            o_seg if any(v is not None for v in o_seg) else None,
            np.array(o_kind, dtype=np.int8) if passing else None,
            np.array(o_pts, dtype=np.float64),
        )

    def _report(self, reports: list) -> None:
        for what, a, b, c, *_ in reports:
            if what == "expired":
                if self.on_expired is not None:
                    self.on_expired(a, b, c)
            elif what == "orphan":
                if self.on_orphan is not None:
                    self.on_orphan(a, b, c)
            elif self.rejected is not None:
                self.rejected(a, b, c)

    # ------------------------------------------------------------ state

    def to_state(self) -> dict:
        """JSON-serialisable state (waiting predictions, event time, counters).

        Cost: `O(p)`. Callbacks are not part of the state.
        """
        pending = sorted(self._pending.items(), key=lambda kv: kv[1][5])
        state = self._state_head()
        counters = state.pop("counters")  # (after "pending", as states have it)
        state["pending"] = [[k, e[0], e[1], e[2], list(e[3]) if isinstance(e[3], tuple)
                             else e[3], e[4], e[5]] for k, e in pending]
        state["counters"] = counters
        return state

    def to_array_state(self) -> dict:
        """:meth:`to_state` for a binary checkpoint: the waiting predictions as numpy
        columns (``"columns"``: prediction times, scores, weights, lines, sequence
        numbers; ids as int64, or UTF-8 text with each id's end offset, or a JSON list
        when they mix types; segments as codes into a list of their distinct values),
        ``"pending": None`` and ``"arrays": 1``. :meth:`from_state` reads both forms.
        Runtime complexity: `O(p)` (one pass over the waiting predictions, which are
        Python values), written as a few arrays instead of a JSON list per prediction.
        """
        state = self._state_head()
        pending = sorted(self._pending.items(), key=lambda kv: kv[1][5])
        ids = [k for k, _ in pending]
        cols = list(zip(*(e for _, e in pending))) if pending else [()] * 6
        if ids and all(type(k) is int for k in ids) and -(1 << 63) <= min(ids) \
                and max(ids) < (1 << 63):
            id_col: Any = {"int": np.array(ids, dtype=np.int64)}
        elif ids and all(type(k) is str for k in ids):
            enc = [k.encode("utf-8") for k in ids]
            id_col = {"utf8": np.frombuffer(b"".join(enc), dtype=np.uint8).copy(),
                      "ends": np.cumsum([len(b) for b in enc], dtype=np.int64)}
        else:
            id_col = {"json": ids}
        codes: dict = {}
        seg_codes = np.array([codes.setdefault(seg, len(codes)) for seg in cols[3]],
                             dtype=np.int64)
        values = [list(v) if isinstance(v, tuple) else v for v in codes]
        state["pending"] = None
        state["columns"] = {
            "ids": id_col,
            "pred_ts": np.array(cols[0], dtype=np.float64),
            "score": np.array(cols[1], dtype=np.float64),
            "weight": np.array(cols[2], dtype=np.float64),
            "segments": {"values": values, "codes": seg_codes},
            "line": np.array(cols[4], dtype=np.int64),
            "seq": np.array(cols[5], dtype=np.int64),
        }
        state["arrays"] = 1
        return state

    def _state_head(self) -> dict:
        """:meth:`to_state` without its waiting predictions (``"pending"``), with the
        expired or joined predictions not yet passed on (``"closed"``, when any: only
        with ``predictions=True``, between :meth:`advance` and the next
        :meth:`process`)."""
        head = {
            "type": "LabelJoiner",
            "version": STATE_VERSION,
            "label_ttl": self.label_ttl if math.isfinite(self.label_ttl) else None,
            "on_duplicate": self.on_duplicate,
            "watermark": self.watermark if math.isfinite(self.watermark) else None,
            "seq": self._seq,
            "counters": {name: getattr(self, "n_" + name) for name in _COUNTERS},
        }
        if self._closed:
            head["closed"] = [[kd, key, t, e[0], e[1], e[2], list(e[3]) if isinstance(e[3], tuple)
                               else e[3], e[4], e[5]] for kd, key, t, e in self._closed]
        return head

    @staticmethod
    def _pending_rows(columns: Any) -> list:
        """The ``pending`` rows of :meth:`to_state` from :meth:`to_array_state`'s
        ``columns``, checked (``ValueError`` naming the column)."""
        if not isinstance(columns, dict) or set(columns) != {
                "ids", "pred_ts", "score", "weight", "segments", "line", "seq"}:
            raise ValueError("columns must hold ids, pred_ts, score, weight, segments, "
                             "line, seq")
        n = None
        out = {}
        for name, dt in (("pred_ts", np.float64), ("score", np.float64),
                         ("weight", np.float64), ("line", np.int64), ("seq", np.int64)):
            a = columns[name]
            if not (isinstance(a, np.ndarray) and a.ndim == 1 and a.dtype == dt):
                raise ValueError(f"column {name} must be a 1-d {np.dtype(dt).name} array")
            if n is not None and len(a) != n:
                raise ValueError(f"column {name} holds {len(a)} values, not {n}")
            n = len(a)
            out[name] = a.tolist()
        ids = columns["ids"]
        if isinstance(ids, dict) and set(ids) == {"int"} and isinstance(
                ids["int"], np.ndarray) and ids["int"].dtype == np.int64:
            keys = ids["int"].tolist()
        elif isinstance(ids, dict) and set(ids) == {"utf8", "ends"} and isinstance(
                ids["utf8"], np.ndarray) and ids["utf8"].dtype == np.uint8 and isinstance(
                ids["ends"], np.ndarray) and ids["ends"].dtype == np.int64:
            ends = ids["ends"].tolist()
            raw = ids["utf8"].tobytes()
            if ends and (ends[-1] != len(raw) or any(b < a for a, b in zip([0] + ends, ends))):
                raise ValueError("column ids: text offsets do not fit the text")
            keys = [raw[a:b].decode("utf-8") for a, b in zip([0] + ends[:-1], ends)]
        elif isinstance(ids, dict) and set(ids) == {"json"} and isinstance(ids["json"], list):
            keys = ids["json"]
        else:
            raise ValueError("column ids must be int64 ids, UTF-8 text with its ends, or a "
                             "JSON list")
        segs = columns["segments"]
        if not (isinstance(segs, dict) and set(segs) == {"values", "codes"}
                and isinstance(segs["values"], list) and isinstance(segs["codes"], np.ndarray)
                and segs["codes"].dtype == np.int64 and segs["codes"].ndim == 1):
            raise ValueError("column segments must hold values (a list) and int64 codes")
        codes = segs["codes"]
        if len(codes) and (codes.min() < 0 or codes.max() >= len(segs["values"])):
            raise ValueError("column segments: a code outside its values")
        for name, col in (("ids", keys), ("segments", codes)):
            if len(col) != n:
                raise ValueError(f"column {name} holds {len(col)} values, not {n}")
        values = segs["values"]
        return [[k, p, s, w, values[c], line, q] for k, p, s, w, c, line, q in zip(
            keys, out["pred_ts"], out["score"], out["weight"], codes.tolist(), out["line"],
            out["seq"])]

    @classmethod
    def from_state(cls, state: dict, **callbacks: Any) -> "LabelJoiner":
        """Rebuild a joiner from :meth:`to_state` or :meth:`to_array_state`; pass the
        callbacks again.

        Raises ``ValueError`` for a state of another type or version.
        """
        if not isinstance(state, dict) or state.get("type") != "LabelJoiner":
            raise ValueError("not a LabelJoiner state")
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"LabelJoiner state version {state.get('version')!r} is not "
                             f"supported (expected {STATE_VERSION})")
        if state.get("arrays") is not None:
            if state["arrays"] != 1 or state.get("pending") is not None:
                raise ValueError("corrupt LabelJoiner state: arrays must be 1 and pending "
                                 "null in a binary state")
            try:
                rows = cls._pending_rows(state.get("columns"))
            except ValueError as e:
                raise ValueError(f"corrupt LabelJoiner state: {e}") from None
            state = {k: v for k, v in state.items() if k not in ("arrays", "columns")}
            state["pending"] = rows
        try:
            ttl = state["label_ttl"]
            j = cls(math.inf if ttl is None else ttl, on_duplicate=state["on_duplicate"],
                    **callbacks)
            wm = state["watermark"]
            j.watermark = -math.inf if wm is None else float(wm)
            j._seq = int(state["seq"])
            for k, pred_ts, score, weight, seg, line, seq in state["pending"]:
                if isinstance(seg, list):
                    seg = tuple(seg)
                j._pending[k] = (float(pred_ts), float(score), float(weight), seg, int(line), int(seq))
                j._heap.append((float(pred_ts), int(seq), k))
            heapq.heapify(j._heap)
            for name in _COUNTERS:
                setattr(j, "n_" + name, int(state["counters"][name]))
            for kd, key, t, pred_ts, score, weight, seg, line, seq in state.get("closed", ()):
                if isinstance(seg, list):
                    seg = tuple(seg)
                j._closed.append((int(kd), key, float(t), (float(pred_ts), float(score),
                                  float(weight), seg, int(line), int(seq))))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"corrupt LabelJoiner state: {e!r}") from None
        return j


_COUNTERS = ("predictions", "labels", "joined", "complete", "expired", "orphans", "duplicates")


# ---------------------------------------------------------------- sources


def _take(b: Batch, idx: np.ndarray) -> Batch:
    il = idx.tolist()
    return Batch(
        b.label[idx], b.score[idx], b.ts[idx], None if b.weight is None else b.weight[idx],
        b.line[idx],
        None if b.id is None else [b.id[i] for i in il],
        None if b.segment is None else [b.segment[i] for i in il],
        None if b.kind is None else b.kind[idx],
        None if b.pred_ts is None else b.pred_ts[idx],
    )


class _Stream:
    """One input of a two-file merge: a buffer of validated rows, rejects held back."""

    def __init__(self, src: EventSource) -> None:
        self.src = src
        self.batches = iter(src)
        self.buf: Batch | None = None
        self.done = False
        self.rejects: deque = deque()
        self.consumed = src.resume_after  # last line whose row (or reject) is fully handled
        src.rejected = lambda line, reason, raw: self.rejects.append((line, reason, raw))

    def fill(self) -> None:
        while not self.done and (self.buf is None or len(self.buf) == 0):
            try:
                self.buf = next(self.batches)
            except StopIteration:
                self.done = True
                self.buf = None

    def take(self, k: int) -> Batch:
        buf = self.buf
        head = _take(buf, np.arange(k))
        self.buf = _take(buf, np.arange(k, len(buf))) if k < len(buf) else None
        return head

    def settle(self, report: Callable[[int, str, Any], None]) -> None:
        """Report the rejects before the next unconsumed row; update ``consumed``."""
        if self.buf is not None and len(self.buf):
            nxt = int(self.buf.line[0])
        elif self.done:
            nxt = math.inf
        else:
            nxt = self.src.position + 1
        while self.rejects and self.rejects[0][0] < nxt:
            report(*self.rejects.popleft())
        self.consumed = self.src.position if nxt == math.inf else max(self.consumed, nxt - 1)


class DelayedSource:
    """Read a delayed-label log (one file, or predictions + labels files) as joined batches.

    Yields :class:`Batch` objects of joined events (with ``pred_ts``); with
    ``predictions=True`` each batch also holds the predictions when they are made and the
    predictions closed unlabeled, in row order, with ``kind`` (see :class:`LabelJoiner`).
    With ``labels_path`` the two files are merged by event time (each is
    expected in time order; predictions before labels at equal times; a row
    out of order is placed after the rows already merged, never dropped).
    ``positions`` gives, per input, the last line fully handled, and
    :meth:`to_state` the joiner state and these positions (with what recognises
    each file, see :meth:`EventSource.to_state`): pass it as ``state=`` to resume an
    interrupted replay where it stopped, on files that may have grown since.
    ``follow`` (:class:`~streameval.io.sources.Follow`): read one file as it grows
    (not with ``labels_path``: a merge by time cannot wait on two files).

    Cost: `O(rows log p)`; memory `O(batch_size + p)` for ``p`` waiting
    predictions.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        fields: FieldMap | None = None,
        *,
        label_ttl: float,
        labels_path: str | os.PathLike | None = None,
        format: str | None = None,
        labels_format: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        on_error: str = "fail",
        rejected: Callable[[int, str, Any], None] | None = None,
        on_duplicate: str = "error",
        on_expired: Callable[[Any, float, int], None] | None = None,
        on_orphan: Callable[[Any, float, int], None] | None = None,
        state: dict | None = None,
        follow: Any = None,
        predictions: bool = False,
        **read: Any,
    ) -> None:
        self.fields = fm = fields if fields is not None else FieldMap()
        if fm.id is None or fm.ts is None:
            raise ValueError("delayed labels need an id field and a ts field in the FieldMap")
        self.label_ttl = _check_ttl(label_ttl)
        self.on_duplicate = on_duplicate
        self._callbacks = dict(on_expired=on_expired, on_orphan=on_orphan, rejected=rejected)
        #: batches hold every prediction when it is made, besides the joined events
        #: (:class:`LabelJoiner` ``predictions=True``)
        self.predictions = predictions
        self.joiner = LabelJoiner(label_ttl, on_duplicate=on_duplicate,
                                  predictions=predictions, **self._callbacks)
        self.batch_size = batch_size
        self.on_error = on_error
        self._rejected = rejected
        # read: the readers' bounds (max_line_bytes, max_expansion), given to each input
        opts = dict(batch_size=batch_size, on_error=on_error, rejected=rejected, partial=True,
                    **read)
        if follow is not None and labels_path is not None:
            raise ValueError("a log with its labels in a second file cannot be followed: "
                             "the merge by time would wait on both files; follow one file "
                             "holding prediction and label rows")
        self.sources = [EventSource(path, fm, format=format, follow=follow, **opts)]
        if labels_path is not None:
            self.sources.append(EventSource(labels_path, fm, format=labels_format, **opts))
        self._positions = [0, 0][: len(self.sources)]
        if state is not None:
            self.restore(state)

    def restore(self, state: dict) -> None:
        """Go on from a state saved by :meth:`to_state` (before iterating): the joiner's
        waiting predictions and counters, and the position in each input."""
        try:
            joiner = LabelJoiner.from_state(state["joiner"], predictions=self.predictions,
                                            **self._callbacks)
            positions = [int(p) for p in state["positions"]]
            if state.get("type") != "DelayedSource" or len(positions) != 2:
                raise ValueError("not a DelayedSource state")
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"corrupt DelayedSource state: {e}") from None
        if joiner.label_ttl != self.label_ttl or joiner.on_duplicate != self.on_duplicate:
            raise ValueError("DelayedSource state was saved with another label_ttl or on_duplicate")
        self.joiner = joiner
        inputs = state.get("inputs") or [{"position": p} for p in positions]
        for src, p, st in zip(self.sources, positions, inputs):
            src.restore(dict(st, position=p))
        self._positions = [src.position for src in self.sources]

    @property
    def rejected(self) -> Callable[[int, str, Any], None] | None:
        """The callback of rejected rows (bad rows of either input, skipped duplicates)."""
        return self._rejected

    @rejected.setter
    def rejected(self, callback: Callable[[int, str, Any], None] | None) -> None:
        self._rejected = callback
        self._callbacks["rejected"] = callback
        self.joiner.rejected = callback
        for src in self.sources:
            src.rejected = callback if callback is not None else src.log_rejected

    def counts(self) -> dict:
        """Counters of this reading: rows read, rows rejected (skipped duplicate
        predictions included), expired predictions, orphan labels, predictions still
        waiting (``unlabeled``)."""
        j = self.joiner
        return {"rows": sum(s.n_rows for s in self.sources),
                "rejected": self.n_rejected + j.n_duplicates,
                "expired": j.n_expired, "orphans": j.n_orphans, "unlabeled": j.n_pending}

    @property
    def positions(self) -> list[int]:
        """Last line (or Parquet row) fully handled, per input file."""
        return list(self._positions)

    @property
    def n_rejected(self) -> int:
        """Rows refused by validation (``on_error="skip"``), over all inputs."""
        return sum(s.n_rejected for s in self.sources)

    def to_state(self) -> dict:
        """JSON-serialisable resume point: joiner state and input positions."""
        positions = self.positions
        if len(positions) == 1:
            positions = positions + [0]
        # each input's resume point and what recognises its file: a byte offset only
        # where the position is the source's own (one file; a merge keeps rows back)
        inputs = [src.to_state(p) for src, p in zip(self.sources, self.positions)]
        return {"type": "DelayedSource", "version": STATE_VERSION,
                "joiner": self.joiner.to_state(), "positions": positions, "inputs": inputs}

    def to_array_state(self) -> dict:
        """:meth:`to_state` for a binary checkpoint: the joiner's waiting predictions as
        numpy columns (:meth:`LabelJoiner.to_array_state`); :meth:`restore` reads both."""
        state = self._state_without_joiner()
        state["joiner"] = self.joiner.to_array_state()
        return state

    def _state_without_joiner(self) -> dict:
        """:meth:`to_state`'s positions and inputs, ``"joiner"`` left out: `O(inputs)`."""
        positions = self.positions
        if len(positions) == 1:
            positions = positions + [0]
        inputs = [src.to_state(p) for src, p in zip(self.sources, self.positions)]
        return {"type": "DelayedSource", "version": STATE_VERSION, "positions": positions,
                "inputs": inputs}

    def __iter__(self) -> Iterator[Batch]:
        if len(self.sources) == 1:
            src = self.sources[0]
            for batch in src:
                out = self.joiner.process(batch)
                self._positions = [src.position]
                if len(out):
                    yield out
            self._positions = [src.position]
            return
        yield from self._merged()

    def _merged(self) -> Iterator[Batch]:
        a, b = _Stream(self.sources[0]), _Stream(self.sources[1])
        try:
            yield from self._merged_from(a, b)
        finally:  # (a source's parsing process ends with the merge, however it ends)
            a.batches.close()
            b.batches.close()

    def _merged_from(self, a: _Stream, b: _Stream) -> Iterator[Batch]:
        # by default each source logs its own rows (its path: a line alone is ambiguous)
        report_a = self.rejected if self.rejected is not None else a.src.log_rejected
        report_b = self.rejected if self.rejected is not None else b.src.log_rejected
        joiner = self.joiner
        pending_out: list[Batch] = []
        n_out = 0
        while True:
            a.fill()
            b.fill()
            if a.buf is None and b.buf is None:
                break
            if a.buf is None or b.buf is None:
                s = a if a.buf is not None else b
                chunk = s.take(len(s.buf))
            else:
                # predictions (a) up to the newest label time buffered; labels (b)
                # strictly before the newest prediction time: rows beyond both
                # could still be preceded by rows not read yet
                ha = float(np.max(b.buf.ts))
                hb = float(np.max(a.buf.ts))
                ka = _prefix(a.buf.ts, ha, strict=False)
                kb = _prefix(b.buf.ts, hb, strict=True)
                pa_, pb_ = a.take(ka) if ka else None, b.take(kb) if kb else None
                parts = [p for p in (pa_, pb_) if p is not None]
                if len(parts) == 1:
                    chunk = parts[0]
                else:
                    merged = Batch.concat(parts)
                    stream = np.repeat(np.array([0, 1], np.int8), [len(pa_), len(pb_)])
                    order = np.lexsort((np.arange(len(merged)), stream, merged.ts))
                    chunk = _take(merged, order)
            out = joiner.process(chunk)
            a.settle(report_a)
            b.settle(report_b)
            self._positions = [a.consumed, b.consumed]
            if len(out):
                pending_out.append(out)
                n_out += len(out)
            if n_out >= self.batch_size:
                yield Batch.concat(pending_out)
                pending_out, n_out = [], 0
        a.settle(report_a)
        b.settle(report_b)
        self._positions = [a.consumed, b.consumed]
        if pending_out:
            yield Batch.concat(pending_out)


def _prefix(ts: np.ndarray, h: float, strict: bool) -> int:
    """Length of the longest prefix of ``ts`` that is ``<= h`` (``< h`` if strict)."""
    over = ts >= h if strict else ts > h
    k = int(np.argmax(over)) if over.any() else len(ts)
    return k


def read_delayed(
    path: str | os.PathLike,
    fields: FieldMap | None = None,
    *,
    label_ttl: float,
    labels_path: str | os.PathLike | None = None,
    **options: Any,
) -> DelayedSource:
    """Open a delayed-label log; see :class:`DelayedSource`. Cost: `O(1)`."""
    return DelayedSource(path, fields, label_ttl=label_ttl, labels_path=labels_path, **options)
