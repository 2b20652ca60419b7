"""Intake: the Monitor's own checks on a batch, done once, and what they produce.

A batch reaches the Monitor already validated by its source
(:class:`streameval.events.Batch`: labels as "is positive", finite float64 scores,
weights, event times, segment values). :meth:`Intake.admit` adds only what this
Monitor needs beyond that:

* scores inside the narrowest ``score_bounds`` of its metrics (log loss, Brier:
  probabilities);
* what a metric's trusted path would still refuse (``check_columns``: a weighted loss
  that overflows);
* an event time on every event when something needs one (``every_seconds``, a window
  or drift test by period, a rule with a duration);
* segment values that make valid keys for its ``group_by`` fields (the reserved
  :data:`OTHER_SEGMENT` refused when segments are capped).

The source's own rules are not checked again, but for one vectorised pass each that
refuses a score that is not finite or a weight outside ``[0, MAX_WEIGHT]``: a batch built
by hand cannot break a metric.

It returns an :class:`Admitted` batch: the columns the metrics' trusted path takes, the
event times, per event a segment code into a list of keys, and, for the output of a label
join that passes predictions on, what each row is (``kind``: a prediction when it is made,
the label of an earlier prediction, a complete event, a prediction closed unlabeled). An admitted batch is
accepted by :meth:`Monitor.apply <streameval.monitor.Monitor.apply>` on any state of a
Monitor of the same configuration (the segment cap, which depends on the segments met
so far, is applied there). :meth:`Intake.refused` names every row that ``admit`` would
refuse, with its reason, in one vectorised pass per check (``--on-error skip``).

Raw columns (lists of labels, scores that may be river probability dicts, datetimes)
are validated by :meth:`Intake.validate` and :meth:`Intake.times` first: that is the
public ``update_many``'s path, not a source's.

Imports: numpy, the standard library, :mod:`streameval.events` (the batch type and the
event-time parser), :mod:`streameval.metrics.base` (``check_bounds``) and
:mod:`streameval.validation`. Never another part of the Monitor's package.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from streameval.events import as_seconds, as_seconds_array, segment_codes
from streameval.metrics.base import check_bounds
from streameval.validation import (
    MAX_WEIGHT,
    ValidationError,
    as_binary_labels,
    as_float_array,
    as_weight_array,
    check_same_length,
    fail,
)

__all__ = ["Admitted", "Intake", "OTHER_SEGMENT"]

#: The segment that counts the events of new segment values beyond ``max_segments``.
OTHER_SEGMENT = "__other__"

_Real = numbers.Real
_SCALARS = (str, bool, int, float)


#: the type of values that are their own segment key once checked (see Intake._keys_of)
_STR = frozenset((str,))


class Admitted(NamedTuple):
    """A batch that passed a Monitor's own checks, as its scopes take it.

    ``is_positive`` (bool), ``score`` (float64), ``weight`` (float64, or None: all 1),
    ``time`` (float64 epoch seconds, NaN: unknown; None: no event has one), ``codes``
    (int64 per event: an index into ``keys``, -1 for no segment; None without segments)
    and ``keys`` (the segment keys, in order of first appearance); ``kind`` (int8 per
    event, the :data:`~streameval.events.KIND_EVENT` ... codes; None: every row a
    complete event) says which rows are predictions, labels of earlier predictions and
    predictions closed unlabeled (expired or replaced). Immutable (a named tuple: cheap
    to build once per batch); the columns are read, never written.

    Runtime complexity: :meth:`concat` `O(m)`.
    """

    is_positive: np.ndarray
    score: np.ndarray
    weight: np.ndarray | None
    time: np.ndarray | None
    codes: np.ndarray | None
    keys: tuple
    kind: np.ndarray | None = None

    def __len__(self) -> int:  # type: ignore[override]
        return len(self.score)

    @staticmethod
    def concat(parts):
        """One admitted batch holding ``parts`` in order (weights and times None only
        where every part's are; segment keys renumbered in order of first appearance)."""
        parts = list(parts)
        if len(parts) == 1:
            return parts[0]
        sizes = [len(p) for p in parts]
        weight = time = codes = None
        if any(p.weight is not None for p in parts):
            weight = np.concatenate([np.ones(k) if p.weight is None else p.weight
                                     for p, k in zip(parts, sizes)])
        if any(p.time is not None for p in parts):
            time = np.concatenate([np.full(k, np.nan) if p.time is None else p.time
                                   for p, k in zip(parts, sizes)])
        keys: list = []
        if any(p.codes is not None for p in parts):
            index: dict = {}
            cols = []
            for p, k in zip(parts, sizes):
                if p.codes is None:
                    cols.append(np.full(k, -1, np.int64))
                    continue
                remap = np.empty(len(p.keys) + 1, np.int64)
                remap[-1] = -1
                for c, key in enumerate(p.keys):
                    code = index.get(key)
                    if code is None:
                        code = index[key] = len(keys)
                        keys.append(key)
                    remap[c] = code
                cols.append(remap[p.codes])
            codes = np.concatenate(cols)
        kind = None
        if any(p.kind is not None for p in parts):
            kind = np.concatenate([np.zeros(k, np.int8) if p.kind is None else p.kind
                                   for p, k in zip(parts, sizes)])
        return Admitted(np.concatenate([p.is_positive for p in parts]),
                        np.concatenate([p.score for p in parts]), weight, time, codes,
                        tuple(keys), kind)

    def part(self, a, b):
        """Events ``a`` to ``b`` (a slice) as an Admitted batch without ``kind``, its
        segment keys those of its own events (renumbered in order of first appearance).
        Runtime complexity: `O(b - a)`."""
        sl = slice(a, b)
        codes, keys = self.codes, self.keys
        if codes is not None:
            codes = codes[sl]
            has = codes >= 0
            used, first = np.unique(codes[has], return_index=True)
            used = used[np.argsort(first)]  # (order of first appearance)
            remap = np.full(len(keys) + 1, -1, np.int64)
            remap[used] = np.arange(len(used))
            codes = remap[codes]  # (-1 stays -1: remap's last entry)
            keys = tuple(keys[c] for c in used.tolist())
        return Admitted(self.is_positive[sl], self.score[sl],
                        None if self.weight is None else self.weight[sl],
                        None if self.time is None else self.time[sl], codes, keys)


#: how many checked string segment values a monitor's intake remembers (their keys are
#: the values themselves), so that a batch's known values are not checked again
_KNOWN = 100_000


def _scalar(v, where, field):
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{where} = {v!r}: segment value of {field!r} must be finite")
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:  # could be neither checkpointed nor exported
            raise ValueError(f"{where} = {v!r}: segment value of {field!r} is not valid "
                             f"Unicode ({e.reason})") from None
    if not isinstance(v, _SCALARS):
        raise ValueError(
            f"{where} = {v!r}: segment value of {field!r} must be a string, number or bool"
        )
    return v


def _dict_score(v, i, pos):
    if isinstance(v, dict):
        s = v.get(pos, 0.0)
        if isinstance(s, bool) or not isinstance(s, _Real) or not math.isfinite(s):
            fail("y_pred", v, "probability must be a finite number", i)
        return float(s)
    if not isinstance(v, _Real):
        fail("y_pred", v, "score must be a finite number or a probability dict", i)
    return float(v)


class Intake:
    """A Monitor's checks, from its configuration (no state: the same batch is admitted
    or refused the same way at any time).

    Parameters
    ----------
    pos_set, neg_set : set
        The positive and negative label values.
    bounds : (float, float) or None
        The range every score must lie in; ``proba`` names the metrics that need it.
    column_checks : list of callables
        The trusted metrics' ``check_columns(y, s, w)``.
    time_needed : list of str
        What needs event times (empty: nothing).
    fields : tuple of str or None
        The ``group_by`` fields.
    max_segments : int or None
        With a cap, :data:`OTHER_SEGMENT`'s key is reserved.
    """

    def __init__(self, *, pos_set, neg_set, bounds, proba, column_checks, time_needed,
                 fields, max_segments):
        self.pos_set, self.neg_set = pos_set, neg_set
        # bool labels can be passed to the metrics as is when they use the default ones
        self.bool_labels = (True in pos_set and False in neg_set
                            and all(isinstance(p, bool) or p in (0, 1) for p in pos_set))
        self.bounds = bounds
        self.proba = list(proba)
        self.column_checks = list(column_checks)
        self.time_needed = list(time_needed)
        self.fields = fields
        self.max_segments = max_segments
        if fields is not None:
            self.other_key = (OTHER_SEGMENT if len(fields) == 1
                              else (OTHER_SEGMENT,) * len(fields))
        else:
            self.other_key = None

    # ------------------------------------------------------------------ columns
    def validate(self, y_true, y_pred, w=None):
        """``(is_positive, scores, weights or None)`` of raw columns, checked for every
        metric: labels, finite scores inside the bounds, weights, ``check_columns``.
        A bad element raises :class:`~streameval.validation.ValidationError` naming it
        and its ``index``. Runtime complexity: `O(m)`, numpy."""
        m = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        if (not self.bool_labels and isinstance(y_true, np.ndarray)
                and y_true.dtype.kind == "b"):
            # labels already read as "is positive" (streameval.events batches): the
            # configured labels can never be booleans here, so there is no ambiguity
            labels = y_true
        else:
            labels = as_binary_labels(y_true, self.pos_set, self.neg_set)
        (pos,) = self.pos_set
        scores = as_float_array(y_pred, scalar=lambda v, i: _dict_score(v, i, pos))
        if self.bounds is not None and m:
            check_bounds(scores, self.bounds, why=self._why())
        weights = as_weight_array(w, m)
        # what a metric's trusted path would still refuse (a weighted loss that
        # overflows): checked on every metric before any is updated
        for check in self.column_checks:
            check(labels, scores, weights)
        return labels, scores, weights

    def _why(self):
        return f" (metric {self.proba[0]!r} needs probabilities)"

    def times(self, t, m):
        """Event times as float64 (NaN: unknown), or None when no event has one; refuses
        an infinite time, and an unknown one when the Monitor needs times."""
        if t is None:
            if self.time_needed and m:
                raise ValueError(
                    f"t = None: this monitor needs event times ({', '.join(self.time_needed)})"
                )
            return None
        if isinstance(t, (str, bytes)) or not hasattr(t, "__len__"):
            raise ValueError(f"t = {t!r:.80}: update_many takes one event time per event")
        if len(t) != m:
            raise ValueError(f"y_true has {m} elements but t has {len(t)}")
        if isinstance(t, np.ndarray) and t.ndim == 1 and t.dtype.kind in "fiu":
            arr = t.astype(np.float64, copy=False)
        elif isinstance(t, np.ndarray) and t.ndim == 1 and t.dtype.kind == "M":
            arr = as_seconds_array(t, m)
        else:
            arr = np.empty(m, dtype=np.float64)
            for i, v in enumerate(t.tolist() if isinstance(t, np.ndarray) else t):
                if v is None or (isinstance(v, float) and v != v):
                    arr[i] = np.nan
                else:
                    try:
                        arr[i] = as_seconds(v, f"t[{i}]")
                    except ValidationError as e:
                        if e.index is None:
                            e.index, e.name = i, "t"
                        raise
                    except ValueError as e:
                        raise ValidationError("t", v, str(e), i, message=str(e)) from None
        inf = np.isinf(arr)
        if inf.any():
            i = int(np.argmax(inf))
            fail("t", float(arr[i]), "event time must be a finite number", i)
        nan = np.isnan(arr)
        if nan.any():
            if self.time_needed:
                i = int(np.argmax(nan))
                fail("t", t[i], self._needs_times(), i)
            if nan.all():
                return None
        return arr

    def _needs_times(self):
        return f"this monitor needs event times ({', '.join(self.time_needed)})"

    def time(self, t, where="t"):
        """One event's time as float seconds, or None (unknown)."""
        if t is None or (isinstance(t, float) and t != t):
            if self.time_needed:
                raise ValueError(f"{where} = {t!r}: {self._needs_times()}")
            return None
        return as_seconds(t, where)

    # ----------------------------------------------------------------- segments
    def segment_key(self, segment, where="segment", reserved_ok=False):
        """The hashable key of an event's segment, or None (the whole stream only).

        With a segment cap, :data:`OTHER_SEGMENT`'s key is reserved: an event cannot
        name it (``reserved_ok``: a reader or a saved state may)."""
        if segment is None:
            return None
        fields = self.fields
        if fields is None:
            raise ValueError(f"{where} = {segment!r}: this monitor has no group_by")
        key = self._key_of(segment, where, fields)
        if key == self.other_key and not reserved_ok and self.max_segments is not None:
            raise ValueError(f"{where} = {segment!r}: {OTHER_SEGMENT!r} is reserved for the "
                             f"events of segment values past max_segments")
        return key

    @staticmethod
    def _key_of(segment, where, fields):
        if len(fields) == 1:
            return _scalar(segment, where, fields[0])
        if isinstance(segment, dict):
            missing = [f for f in fields if f not in segment]
            if missing:
                raise ValueError(f"{where} = {segment!r}: no value for group_by field {missing[0]!r}")
            segment = [segment[f] for f in fields]
        elif isinstance(segment, np.ndarray):
            segment = segment.tolist()
        if not isinstance(segment, (tuple, list)) or len(segment) != len(fields):
            raise ValueError(
                f"{where} = {segment!r}: must be a tuple of {len(fields)} values "
                f"(group_by = {list(fields)})"
            )
        return tuple(
            None if v is None else _scalar(v, where, f) for v, f in zip(segment, fields)
        )

    def _keys_of(self, raw, values):
        """``(remap, keys, bad, identity)`` for the distinct segment values of a batch
        (``raw``: each event's index into ``values``): ``remap[c]`` the key code of value
        ``c`` (-1: no segment or refused), ``keys`` in order of first appearance, ``bad``
        ``[(value code, ValidationError)]`` of the refused values, named at their first
        event, and whether ``remap`` maps every value to its own code."""
        remap = np.empty(len(values) + 1, np.int64)
        remap[-1] = -1
        index: dict = {}
        keys: list = []
        bad = []
        segment_key = self.segment_key
        identity = True
        # one string field: a value checked in an earlier batch is its own key (the
        # cache is bounded: a client sending new values does not grow it past _KNOWN)
        known = self.__dict__.setdefault("_known", set()) if (
            self.fields is not None and len(self.fields) == 1) else None
        if known is not None and set(map(type, values)) <= _STR and \
                known.issuperset(values):  # every value known: each its own key
            remap[:-1] = np.arange(len(values))
            return remap, list(values), [], True
        for c, v in enumerate(values):
            try:
                if known is not None and type(v) is str and v in known:
                    key = v
                else:
                    key = segment_key(v)
                    if known is not None and type(key) is str and len(known) < _KNOWN:
                        known.add(key)
            except ValueError:
                i = int(np.argmax(raw == c))  # its first event
                bad.append((c, _segment_error(self, v, i)))
                remap[c] = -1
                continue
            if key is None:
                remap[c] = -1
                identity = False
                continue
            code = index.get(key)
            if code is None:
                code = index[key] = len(keys)
                keys.append(key)
            if code != c:
                identity = False
            remap[c] = code
        return remap, keys, bad, identity

    def segment_codes(self, segment, m, codes=None):
        """``(codes, keys)``: per-event key codes (-1: none) and the keys in order of
        first appearance, or ``(None, ())`` without segments; the first bad value
        raises naming its index. ``codes``: the batch's ``(codes, values)``
        (:func:`streameval.events.segment_codes`), if known."""
        if segment is None:
            return None, ()
        if self.fields is None:
            raise ValueError(f"segment = {segment!r:.80}: this monitor has no group_by")
        if codes is None:
            if isinstance(segment, (str, bytes)) or not hasattr(segment, "__len__"):
                raise ValueError(
                    f"segment = {segment!r:.80}: update_many takes one segment value per event"
                )
            if len(segment) != m:
                raise ValueError(f"y_true has {m} elements but segment has {len(segment)}")
            codes = segment_codes(segment)
        raw, values = codes
        remap, keys, bad, identity = self._keys_of(raw, values)
        if bad:
            raise min(bad, key=lambda b: b[1].index)[1]
        if identity:
            return raw, tuple(keys)  # every value its own key, in the same order
        return remap[raw], tuple(keys)

    def missing_fields(self, codes, keys, m):
        """``{field: events without a value}`` of an admitted batch of ``m`` events
        (``codes`` and ``keys`` as :meth:`admit` gives them; None codes: no event has a
        segment value), fields without missing values left out; ``{}`` without
        ``group_by``. A single field's missing value is code -1; with several fields
        a key holds None where its field had no value. Cost: `O(m)` numpy plus
        `O(keys)`."""
        fields = self.fields
        if fields is None or not m:
            return {}
        if codes is None:
            return dict.fromkeys(fields, m)
        if len(fields) == 1:
            k = int(np.count_nonzero(codes < 0))
            return {fields[0]: k} if k else {}
        per_key = np.bincount(codes[codes >= 0], minlength=len(keys))
        out = {}
        for i, f in enumerate(fields):
            k = sum(int(per_key[c]) for c, key in enumerate(keys) if key[i] is None)
            k += int(np.count_nonzero(codes < 0))  # (an event without any key)
            if k:
                out[f] = k
        return out

    def missing_of_key(self, key):
        """The ``group_by`` fields without a value in one event's segment key (a key
        from :meth:`segment_key`; None: every field)."""
        fields = self.fields
        if fields is None:
            return ()
        if key is None:
            return fields
        if len(fields) == 1:
            return ()
        return tuple(f for f, v in zip(fields, key) if v is None)

    # ------------------------------------------------------------------ batches
    def admit_columns(self, y_true, y_pred, w=None, t=None, segment=None):
        """Raw columns (the public ``update_many``'s arguments) validated and admitted."""
        y, scores, weights = self.validate(y_true, y_pred, w)
        m = len(scores)
        times = self.times(t, m)
        codes, keys = self.segment_codes(segment, m)
        return Admitted(y, scores, weights, times, codes, keys)

    def admit(self, batch):
        """A :class:`streameval.events.Batch` admitted: only the checks of this Monitor
        (bounds, ``check_columns``, needed event times, segment keys) on its validated
        columns. Weights all 1 become None and event times all unknown None, so the
        metrics take their fast paths. Raises ``ValidationError`` naming the first
        refused event's ``index``, as :meth:`refused` lists them."""
        y, s, w, ts = _columns(batch, nan_times=False)
        m = len(s)
        bounds = self.bounds
        # one pass when every score is good (NaN fails the comparisons too); else the
        # checks in order, for the message of the first bad score
        if bounds is None or not ((s >= bounds[0]) & (s <= bounds[1])).all():
            _check_values(s, None)
            if bounds is not None and m:
                check_bounds(s, bounds, why=self._why())
        if w is not None:
            _check_values(s, w)
        for check in self.column_checks:
            check(y, s, w)
        times = self._batch_times(ts, m)
        seg = batch.segment
        codes, keys = (None, ()) if seg is None else self.segment_codes(
            seg, m, batch.segment_codes())
        kind = batch.kind
        if kind is not None and not kind.any():
            kind = None  # every row a complete event
        return Admitted(y, s, w, times, codes, keys, kind)

    def _batch_times(self, ts, m):
        if ts is None:
            if self.time_needed and m:
                fail("t", math.nan, self._needs_times(), 0)
            return None
        if np.isfinite(ts).all():  # (one pass when every event has a time)
            return ts
        nan = np.isnan(ts)
        if self.time_needed and nan.any():
            i = int(np.argmax(nan))
            fail("t", float(ts[i]), self._needs_times(), i)
        inf = np.isinf(ts)
        if inf.any():
            i = int(np.argmax(inf))
            fail("t", float(ts[i]), "event time must be a finite number", i)
        return None if nan.all() else ts

    def refused(self, batch):
        """``[(row, ValidationError)]``: every row of ``batch`` that :meth:`admit` refuses,
        in row order, each with the first check it fails (bounds and ``check_columns``,
        then event times, then the segment key); the error's ``index`` is the row.
        The other rows are admitted together.

        Runtime complexity: `O(m)` numpy per check, `O(distinct segment values)` key
        checks, plus one ``check_columns`` pass per row it refuses."""
        y, s, w, ts = _columns(batch)
        m = len(s)
        reason = [None] * m
        bad = np.zeros(m, bool)

        def mark(rows, err_of):
            for j in rows.tolist():
                if reason[j] is None:
                    reason[j] = err_of(j)
            bad[rows] = True

        # what the batch's source checks already (a batch built by hand may break it)
        wrong = ~np.isfinite(s)
        if wrong.any():
            mark(np.flatnonzero(wrong), lambda j: _error_of(as_float_array, s, j, "y_pred"))
        if w is not None:
            wrong = ~_good_weights(w)
            if wrong.any():
                mark(np.flatnonzero(wrong), lambda j: _error_of(
                    lambda a: as_weight_array(a, 1), w, j, "w"))
        if self.bounds is not None and m:
            lo, hi = self.bounds
            out = ~((s >= lo) & (s <= hi)) & ~bad
            if out.any():
                what = "probability" if (lo, hi) == (0.0, 1.0) else "score"
                why = f"{what} must be in [{lo:g}, {hi:g}]{self._why()}"
                mark(np.flatnonzero(out), lambda j: ValidationError("y_pred", float(s[j]), why, j))
        if self.column_checks:
            while True:
                ok = np.flatnonzero(~bad)
                if not len(ok):
                    break
                try:
                    for check in self.column_checks:
                        check(y[ok], s[ok], None if w is None else w[ok])
                    break
                except ValidationError as e:
                    k = e.index if isinstance(e.index, (int, np.integer)) else 0
                    j = int(ok[k])
                    msg = str(e)
                    head = f"{e.name}[{e.index}]" if e.index is not None else None
                    if head is not None and msg.startswith(head):
                        msg = f"{e.name}[{j}]" + msg[len(head):]
                    mark(np.array([j]), lambda _j, e=e, msg=msg: ValidationError(
                        e.name, e.value, e.reason, _j, message=msg))
        if ts is not None:
            inf = np.isinf(ts)
            if inf.any():
                mark(np.flatnonzero(inf), lambda j: ValidationError(
                    "t", float(ts[j]), "event time must be a finite number", j))
            if self.time_needed:
                nan = np.isnan(ts)
                if nan.any():
                    why = self._needs_times()
                    mark(np.flatnonzero(nan), lambda j: ValidationError("t", math.nan, why, j))
        elif self.time_needed and m:
            why = self._needs_times()
            mark(np.arange(m), lambda j: ValidationError("t", math.nan, why, j))
        if batch.segment is not None and m:
            if self.fields is None:
                msg = f"segment = {batch.segment!r:.80}: this monitor has no group_by"
                mark(np.arange(m), lambda j: ValidationError("segment", batch.segment, msg, j,
                                                             message=msg))
            else:
                raw, values = batch.segment_codes()
                _, _, wrong, _ = self._keys_of(raw, values)
                for c, _ in wrong:
                    rows = np.flatnonzero(raw == c)
                    v = values[c]
                    mark(rows, lambda j, v=v: _segment_error(self, v, j))
        return [(j, reason[j]) for j in np.flatnonzero(bad).tolist()]

    def labels(self, y):
        """The user's labels for a bool "is positive" array (for objects without the
        trusted path): the array itself with the default labels."""
        if self.bool_labels:
            return y
        (pos,) = self.pos_set
        (neg,) = self.neg_set
        return np.where(y, np.array(pos, dtype=object), np.array(neg, dtype=object))


def _good_weights(w):
    return np.isfinite(w) & (w >= 0) & (w <= MAX_WEIGHT)


def _check_values(s, w):
    """Refuse, naming the first, a score that is not finite or a weight outside
    ``[0, MAX_WEIGHT]``: the rules a source's batch obeys already, checked in one
    vectorised pass each so that a batch built by hand cannot break a metric."""
    if not np.isfinite(s).all():
        as_float_array(s)
    if w is not None and not _good_weights(w).all():
        as_weight_array(w, len(w))


def _error_of(check, col, j, name):
    """The error ``check`` raises for element ``j`` of ``col`` alone, at index ``j``."""
    try:
        check(col[j:j + 1])
    except ValidationError as e:
        return ValidationError(name, e.value, e.reason, j)
    raise AssertionError("a refused value passed")  # pragma: no cover


def _segment_error(intake, v, j):
    """The error :meth:`Intake.segment_key` gives value ``v`` of event ``j``."""
    try:
        intake.segment_key(v, f"segment[{j}]")
    except ValueError as e:
        return ValidationError("segment", v, str(e), j, message=str(e))
    raise AssertionError("a refused segment value passed")  # pragma: no cover


def _columns(batch, nan_times=True):
    """``(is_positive, score, weight or None, ts or None)`` of a validated batch: weights
    all 1 as None, times all unknown as None (a log without event times; with
    ``nan_times=False`` the caller finds that out itself)."""
    y, s = batch.label, batch.score
    if not (isinstance(y, np.ndarray) and y.dtype.kind == "b" and y.ndim == 1):
        raise ValueError(f"batch.label must be a 1-D bool array (is positive), not {y!r:.80}")
    if not (isinstance(s, np.ndarray) and s.dtype == np.float64 and s.shape == y.shape):
        raise ValueError("batch.score must be a float64 array as long as batch.label")
    w = batch.weight
    if w is not None and not (w != 1.0).any():
        w = None
    ts = batch.ts
    if ts is not None:
        ts = ts.astype(np.float64, copy=False)
        if nan_times and np.isnan(ts).all():
            ts = None
    return y, s, w, ts
