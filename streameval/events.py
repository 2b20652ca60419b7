"""Events: field mapping, validation, and columnar batches.

An *event* is one scored, labeled prediction: a binary label, a finite score,
an event time, a weight, and optionally an id and a segment. Sources
(:mod:`streameval.io.sources`) read log rows into :class:`Batch` objects (the one
batch type from a source to the Monitor; ``EventBatch`` is its older name)
through :func:`build_batch`; an HTTP service validates posted objects with
:func:`parse_event` or :func:`events_to_batch`. Every path applies the same
rules, checked in the same order (ts, label, score, weight, id, segment), so
the same bad row gets the same reason wherever it comes from:

The rule is one for every format (JSONL, CSV cells, Parquet, posted JSON): a
value that is a string is read as text, so numbers may be written as strings
everywhere, blanks around numbers, labels and times are ignored, and a blank string
is absent, as JSON ``null`` and an empty CSV cell are.

* **label** -- with the default ``pos_label=True``: JSON ``true``/``false``, a
  number equal to 1 or 0 (``1.0`` too), or the strings ``true``, ``false``, ``1``,
  ``0`` (``1.0``), any case (:data:`LABEL_WORDS` is how errors say it). With a
  custom ``pos_label``/``neg_label`` (``"spam"``/``"ham"``) only values equal to
  those two are valid (a string compares with ``str(pos_label)``). A label string
  over :data:`~streameval.validation.MAX_LABEL_BYTES` is refused.
* **score** -- a finite number, or a string ``float()`` reads as one. NaN,
  infinity, booleans and other strings are refused.
* **ts** -- epoch seconds (number, or numeric string) or an ISO-8601 string
  (``Z`` or an offset; naive means UTC), returned as float epoch seconds.
  Missing is an error unless ``FieldMap(require_ts=False)`` (then NaN).
* **weight** -- optional, default 1.0; a number or numeric string, finite,
  ``>= 0`` and at most :data:`~streameval.validation.MAX_WEIGHT` (1e12: metrics
  multiply and sum weights, and no accepted weight may overflow them).
* **id** -- optional; a string of at most
  :data:`~streameval.validation.MAX_ID_BYTES` UTF-8 bytes or an integer.
* **segment** -- optional; a scalar (string of at most
  :data:`~streameval.validation.MAX_SEGMENT_BYTES` bytes, finite number, bool) or
  missing (None). Several segment fields give a tuple of values.

Strings kept in state (ids and segment values) must be encodable as UTF-8: a
lone surrogate (``"\\ud800"`` in JSON) is refused, naming the field, since it
could be neither checkpointed, exported as JSON nor shown to Prometheus.

This module also holds the one event-time parser (:func:`as_seconds`,
:func:`as_seconds_array`, :func:`time_column`, :func:`parse_time`), which
windows, drift tests and the Monitor import from here.

It may import numpy, the standard library and :mod:`streameval.validation`
(the ground floor) only.
"""

from __future__ import annotations

import datetime as _dt
import math
import numbers
import reprlib
import time as _time_module
from dataclasses import dataclass, field as _field
from itertools import compress
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import numpy as np

from streameval.validation import (
    MAX_ID_BYTES,
    MAX_LABEL_BYTES,
    MAX_SEGMENT_BYTES,
    MAX_WEIGHT,
    Real,
    ValidationError,
    check_param,
    check_text_bytes,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "KIND_EVENT",
    "KIND_PREDICTION",
    "KIND_LABEL",
    "KIND_EXPIRED",
    "KIND_REPLACED",
    "EventError",
    "FieldMap",
    "Event",
    "Batch",
    "EventBatch",
    "segment_codes",
    "parse_event",
    "events_to_batch",
    "build_batch",
    "parse_time",
    "as_seconds",
    "as_seconds_array",
    "time_column",
    "all_utf8",
    "LABEL_WORDS",
]

#: Rows per batch read from a log. 65 536 rows of five fields take a few MB
#: as Python objects while being parsed, and amortise numpy's per-call cost
#: (a batch is validated by a handful of vectorised passes).
DEFAULT_BATCH_SIZE = 65536

#: ``Batch.kind`` values in partial (delayed-label) mode.
KIND_EVENT = 0  #: a complete row: label and score.
KIND_PREDICTION = 1  #: a prediction waiting for its label: score, no label.
KIND_LABEL = 2  #: a label for an earlier prediction: label, no score.
#: In the output of a label join that passes predictions on
#: (:class:`streameval.io.delayed.LabelJoiner` with ``predictions=True``): a prediction
#: that expired unlabeled (score, weight, segment and prediction time of the prediction).
KIND_EXPIRED = 3
#: As :data:`KIND_EXPIRED`: a waiting prediction replaced by a later one with its id
#: (``on_duplicate="keep_last"``); it will never be labeled.
KIND_REPLACED = 4

_UTC = _dt.timezone.utc
_Real = numbers.Real


class _Missing:
    """Sentinel for a field absent from a row."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


class EventError(ValueError):
    """A bad event or log row; says where (``line``/``index``), why, and what.

    >>> e = EventError("score is NaN", line=17, raw='{"score": NaN}')
    >>> str(e), e.line, e.reason
    ('line 17: score is NaN', 17, 'score is NaN')
    """

    def __init__(
        self,
        reason: str,
        *,
        line: int | None = None,
        raw: Any = None,
        index: int | None = None,
        where: str | None = None,
    ) -> None:
        if where is None:
            if line is not None:
                where = f"line {line}"
            elif index is not None:
                where = f"event {index}"
            else:
                where = "event"
        self.reason = reason
        self.line = line
        self.index = index
        self.raw = raw
        self.where = where
        super().__init__(f"{where}: {reason}")


class _Bad(Exception):
    """Internal: one value failed validation (``args[0]`` is the reason)."""


def _show(v: Any, limit: int = 60) -> str:
    """Short printable form of a bad value for an error message (nested values are
    cut at a few levels: ``repr`` of a list nested 1 000 deep would overflow the
    stack)."""
    s = _REPR.repr(v) if isinstance(v, (list, dict, tuple)) else repr(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


_REPR = reprlib.Repr()
_REPR.maxlevel = 4
_REPR.maxstring = _REPR.maxother = 60


_SCALARS = (str, int, float, bool)

#: The accepted labels with the default ``pos_label=True`` (or 1), as every format's
#: error message says them: JSON ``true``/``false``, numbers equal to 1 or 0, and the
#: strings ``true``, ``false``, ``1``, ``0`` (any case, surrounding blanks ignored).
LABEL_WORDS = "true, false, 1 or 0"


#: The byte limits a :class:`FieldMap` carries and their defaults (from
#: :mod:`streameval.validation`); ``to_dict`` names those set to another value.
_BYTE_LIMITS = (("max_id_bytes", MAX_ID_BYTES), ("max_segment_bytes", MAX_SEGMENT_BYTES),
                ("max_label_bytes", MAX_LABEL_BYTES))


@dataclass(frozen=True)
class FieldMap:
    """Names of the event fields in a log row, and the label values.

    ``segment`` is one field name, a list of names (the segment is then the
    tuple of their values), or None. Set ``ts=None`` for logs without time
    (every event then has ``ts = NaN``); ``require_ts=False`` allows rows
    without a time in a log that has a time field. ``max_future`` (seconds):
    an event time further ahead of the wall clock is a bad row (a timestamp
    in the future would move every window's clock there for good); None: no
    limit. ``max_id_bytes``, ``max_segment_bytes``, ``max_label_bytes``: the UTF-8
    bytes of an id, a segment value and a label string a row may hold (a longer one is
    a bad row).

    >>> FieldMap(label="is_spam", pos_label="spam", neg_label="ham").labels
    ('spam', 'ham')
    >>> FieldMap(segment=["country", "device"]).segment
    ('country', 'device')
    """

    ts: str | None = "ts"
    label: str = "label"
    score: str = "score"
    id: str | None = "id"
    weight: str | None = "weight"
    segment: str | tuple[str, ...] | None = None
    pos_label: Any = True
    neg_label: Any = None
    require_ts: bool = True
    max_future: float | None = None
    max_id_bytes: int = MAX_ID_BYTES
    max_segment_bytes: int = MAX_SEGMENT_BYTES
    max_label_bytes: int = MAX_LABEL_BYTES
    _label_map: dict = _field(init=False, repr=False, compare=False, hash=False)
    _text_map: dict = _field(init=False, repr=False, compare=False, hash=False)
    _numeric_labels: bool = _field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "max_future",
             check_param("FieldMap.max_future", self.max_future, Real(0, allow_none=True)))
        for name in ("max_id_bytes", "max_segment_bytes", "max_label_bytes"):
            v = getattr(self, name)
            if type(v) is not int or v < 1:
                raise ValueError(f"FieldMap.{name} = {v!r}: must be an int >= 1")
        seg = self.segment
        if isinstance(seg, (list, tuple)):
            seg = tuple(seg)
            if not seg:
                seg = None
            set_(self, "segment", seg)
        names = [("label", self.label), ("score", self.score)]
        for key in ("ts", "id", "weight"):
            if getattr(self, key) is not None:
                names.append((key, getattr(self, key)))
        if isinstance(seg, tuple):
            names.extend(("segment", s) for s in seg)
        elif seg is not None:
            names.append(("segment", seg))
        for key, name in names:
            if not isinstance(name, str) or not name:
                raise ValueError(f"FieldMap.{key} must be a non-empty string, got {name!r}")
        seen: dict[str, str] = {}
        for key, name in names:
            if name in seen:
                raise ValueError(
                    f"FieldMap.{key} and FieldMap.{seen[name]} both name the field {name!r}"
                )
            seen[name] = key
        pos, neg = self.pos_label, self.neg_label
        for key, v in (("pos_label", pos), ("neg_label", neg)):
            if v is not None and (
                not isinstance(v, _SCALARS) or (isinstance(v, float) and not math.isfinite(v))
            ):
                raise ValueError(f"FieldMap.{key} must be a string, number or bool, got {v!r}")
        if neg is None:
            if not isinstance(pos, str) and pos in (0, 1):  # True/False/1/0
                neg = not bool(pos)
                set_(self, "neg_label", neg)
            else:
                raise ValueError(f"FieldMap(pos_label={pos!r}) needs neg_label= too")
        if pos is None or pos == neg:
            raise ValueError(f"pos_label and neg_label must differ, got {pos!r} and {neg!r}")
        set_(self, "_label_map", {pos: True, neg: False})
        if self.boolean_labels:
            p = bool(pos)
            text = {"1": p, "true": p, "0": not p, "false": not p}
        else:
            text = {str(pos): True, str(neg): False}
        set_(self, "_text_map", text)
        set_(self, "_numeric_labels", all(
            isinstance(x, (int, float)) and not isinstance(x, str) for x in (pos, neg)))

    @property
    def labels(self) -> tuple[Any, Any]:
        """``(pos_label, neg_label)``."""
        return (self.pos_label, self.neg_label)

    @property
    def boolean_labels(self) -> bool:
        """True when the labels are True and False (or 1 and 0), in either order."""
        pos, neg = self.pos_label, self.neg_label
        return (not isinstance(pos, str) and not isinstance(neg, str)
                and pos in (0, 1) and neg in (0, 1))

    @property
    def default_labels(self) -> bool:
        """True when the positive label is True (or 1) and the negative False (or 0)."""
        return self.boolean_labels and self.pos_label == 1

    @property
    def segment_fields(self) -> tuple[str, ...]:
        """The segment field names as a tuple (empty without segment)."""
        if self.segment is None:
            return ()
        return self.segment if isinstance(self.segment, tuple) else (self.segment,)

    def columns(self) -> list[str]:
        """Every field name this map reads, in validation order."""
        out = [n for n in (self.ts, self.label, self.score, self.weight, self.id) if n]
        out.extend(self.segment_fields)
        return out

    def to_dict(self) -> dict:
        """JSON-serialisable form (for configs and checkpoint fingerprints)."""
        seg = list(self.segment) if isinstance(self.segment, tuple) else self.segment
        return {
            "ts": self.ts,
            "label": self.label,
            "score": self.score,
            "id": self.id,
            "weight": self.weight,
            "segment": seg,
            "pos_label": self.pos_label,
            "neg_label": self.neg_label,
            "require_ts": self.require_ts,
            "max_future": self.max_future,
            **{name: getattr(self, name) for name, default in _BYTE_LIMITS
               if getattr(self, name) != default},
        }

    @classmethod
    def from_dict(cls, d: dict) -> "FieldMap":
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        known = {"ts", "label", "score", "id", "weight", "segment", "pos_label",
                 "neg_label", "require_ts", "max_future", *(n for n, _ in _BYTE_LIMITS)}
        extra = set(d) - known
        if extra:
            raise ValueError(f"unknown FieldMap keys: {sorted(extra)}")
        return cls(**d)

    def _expected(self, text: bool = False) -> str:
        """The accepted labels, in the words of every format's error message."""
        if self.boolean_labels:
            return LABEL_WORDS
        return f"{self.pos_label!r}/{self.neg_label!r}"


class Event(NamedTuple):
    """One validated event. ``ts`` is float epoch seconds (NaN when absent)."""

    label: bool
    score: float
    ts: float = math.nan
    weight: float = 1.0
    id: Any = None
    segment: Any = None


# ---------------------------------------------------------------- values
#
# One function per field, shared by the row path (parse_event) and the slow,
# per-element path of the columnar validators: same rules, same messages.


def parse_time(v: Any, name: str = "ts") -> float:
    """Event time -> float epoch seconds; raises ``ValueError`` naming the value.

    Numbers (and numeric strings) are epoch seconds; other strings are
    ISO-8601, with ``Z`` or an offset, naive meaning UTC; datetimes (naive
    meaning UTC) and numpy datetime64 as in :func:`as_seconds`. Cost: `O(1)`.

    >>> parse_time("2024-01-01T00:00:00Z"), parse_time("1704067200.5")
    (1704067200.0, 1704067200.5)
    >>> parse_time("2024-01-01T02:00:00+02:00")
    1704067200.0
    """
    try:
        return _time(v, name, False)
    except _Bad as e:
        raise ValueError(e.args[0]) from None


#: What :func:`as_seconds` accepts, for its error message.
TIME_REASON = ("event time must be finite epoch seconds (int or float), "
               "a datetime (naive means UTC) or a numpy datetime64")


def as_seconds(t: Any, name: str = "t") -> float:
    """Return the event time ``t`` as float epoch seconds, or raise ``ValueError``.

    The parser of event times given to metrics, windows, drift tests and the
    Monitor (the one behind :func:`parse_time` too, which also reads strings):
    finite numbers are epoch seconds, a :class:`datetime.datetime` is converted
    (naive means UTC), a :class:`numpy.datetime64` too; booleans, strings, None,
    NaN and infinities are refused with a
    :class:`~streameval.validation.ValidationError` naming ``name``.

    Runtime complexity: `O(1)`.

    >>> as_seconds(1700000000)
    1700000000.0
    >>> as_seconds(_dt.datetime(2024, 1, 1))       # naive datetimes are UTC
    1704067200.0
    >>> as_seconds(float("inf"))
    Traceback (most recent call last):
    ...
    streameval.validation.ValidationError: t = inf: event time must be finite epoch seconds ...

    Parameters
    ----------
    t : int, float, datetime.datetime or numpy.datetime64
        The event time.
    name : str
        How the error message names the value.
    """
    if type(t) is float and t - t == 0.0:  # the common case, finite float
        return t
    try:
        return _seconds(t, name, False)
    except _Bad:
        raise ValidationError(name, t, TIME_REASON) from None


def as_seconds_array(t: Any, n: int | None = None, name: str = "t") -> np.ndarray:
    """Return a batch of event times as a float64 array of epoch seconds, or raise.

    Same values as :func:`as_seconds` element by element. Numbers and
    ``datetime64`` arrays convert in one numpy call; anything else (datetimes,
    mixed lists) goes element by element; the error (a
    :class:`~streameval.validation.ValidationError`) names the first bad time
    and has its ``index``.

    Runtime complexity: `O(n)`.

    >>> as_seconds_array([0, 1.5, _dt.datetime(1970, 1, 1, 0, 1)])
    array([ 0. ,  1.5, 60. ])
    >>> as_seconds_array([0, None])
    Traceback (most recent call last):
    ...
    streameval.validation.ValidationError: t[1] = None: event time must be finite epoch seconds ...
    """
    if isinstance(t, (str, bytes)) or not hasattr(t, "__len__"):
        raise ValidationError(name, t, "a batch of event times must be a sequence or a 1-D array",
                              message=f"{name} = {_show(t, 80)}: a batch of event times must be "
                              "a sequence or a 1-D array")
    arr = t if isinstance(t, np.ndarray) else None
    if arr is not None and arr.ndim != 1:
        raise ValidationError(name, arr.shape, "must be one-dimensional",
                              message=f"{name} must be one-dimensional, got shape {arr.shape}")
    if n is not None and len(t) != n:
        raise ValidationError(name, len(t), "lengths differ",
                              message=f"y_true has {n} elements but {name} has {len(t)}")
    out, bad = time_column(t, name, strings=False)
    if bad is not None and bad.any():
        i = int(np.argmax(bad))
        v = t[i]
        if isinstance(v, np.generic) and not isinstance(v, np.datetime64):
            v = v.item()
        raise ValidationError(name, v, TIME_REASON, i)
    return out


def time_column(col: Any, name: str = "ts", *, text: bool = False, strings: bool = True,
                required: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """A column of event times -> ``(float64 epoch seconds, bad mask or None)``.

    The array form of the one parser (:func:`as_seconds`, :func:`parse_time`):
    numeric and ``datetime64`` columns convert in one numpy call; only a column
    that fails that is walked element by element. ``strings``: ISO-8601 and
    numeric strings are read (log rows); ``text``: the values are CSV cells;
    ``required=False``: absent values (None, missing, empty cells) give NaN and
    are not bad. Bad elements are NaN in the values and True in the mask.
    Cost: `O(n)`.
    """
    n = len(col)
    if isinstance(col, np.ndarray):
        kind = col.dtype.kind
        if kind in "fiu":
            arr = col.astype(np.float64, copy=False)
            if np.isfinite(arr).all():
                return arr, None
        elif kind == "M":
            nat = np.isnat(col)
            arr = col.astype("datetime64[ns]").astype(np.int64) / 1e9
            if nat.any():
                arr[nat] = math.nan
                return arr, nat
            return arr, None
        col = col.tolist()
    else:
        try:
            arr = None
            if text:
                arr = np.fromiter(map(float, col), np.float64, n)
            elif set(map(type, col)) <= _NUM_TYPES:
                arr = np.array(col, dtype=np.float64) if n else np.empty(0)
            if arr is not None and np.isfinite(arr).all():
                return arr, None
        except (ValueError, TypeError, OverflowError):
            pass
    out = np.empty(n, np.float64)
    bad = np.zeros(n, bool)
    for i, v in enumerate(col):
        if not required and _absent(v, text):
            out[i] = math.nan
            continue
        try:
            out[i] = _seconds(v, name, strings)
        except _Bad:
            out[i] = math.nan
            bad[i] = True
    return out, bad


def _time(v: Any, name: str, text: bool) -> float:
    """An event time of a log row or posted event (strings read); raises _Bad."""
    return _seconds(v, name, True)


def _seconds(v: Any, name: str, strings: bool) -> float:
    """The one event-time parser: float epoch seconds, or _Bad with the reason."""
    t = type(v)
    if t is float or t is int:
        x = _float(v, name)
    elif t is str and strings:
        s = v.strip()
        if not s:
            raise _Bad(f"missing field '{name}'")
        try:
            x = float(s)
        except ValueError:
            try:
                d = _dt.datetime.fromisoformat(s)
            except ValueError:
                raise _Bad(f"unparseable time {_show(v)}") from None
            if d.tzinfo is None:
                d = d.replace(tzinfo=_UTC)
            return d.timestamp()
    elif isinstance(v, _dt.datetime):
        d = v if v.tzinfo is not None else v.replace(tzinfo=_UTC)
        return d.timestamp()
    elif isinstance(v, np.datetime64):
        if np.isnat(v):
            raise _Bad(f"{name} is NaT")
        return float(v.astype("datetime64[ns]").astype(np.int64)) / 1e9
    elif v is MISSING:
        raise _Bad(f"missing field '{name}'")
    elif v is None:
        raise _Bad(f"{name} is null")
    elif isinstance(v, _Real) and not isinstance(v, (bool, np.bool_)):  # numpy scalars
        x = _float(v, name)
    else:
        raise _Bad(f"{name} is not a time: {_show(v)}")
    if not math.isfinite(x):
        raise _Bad(f"{name} is {'NaN' if x != x else 'infinite'}")
    return x


def _float(v: int | float, name: str) -> float:
    try:
        return float(v)
    except OverflowError:
        raise _Bad(f"{name} is out of range: {_show(v)}") from None


def _number(v: Any, name: str, text: bool) -> float:
    """A finite float from a JSON number or (text) a numeric string."""
    t = type(v)
    if t is float or t is int:
        x = _float(v, name)
    elif t is str:  # a numeric string, in every format (CSV cells, JSON strings)
        if not v.strip():
            raise _Bad(f"missing field '{name}'")
        try:
            x = float(v)
        except ValueError:
            raise _Bad(f"{name} is not a number: {_show(v)}") from None
    elif v is MISSING:
        raise _Bad(f"missing field '{name}'")
    elif v is None:
        raise _Bad(f"{name} is null")
    elif isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
        x = float(v)
    else:
        raise _Bad(f"{name} is not a number: {_show(v)}")
    if not math.isfinite(x):
        raise _Bad(f"{name} is {'NaN' if x != x else 'infinite'}")
    return x


def _weight(v: Any, name: str, text: bool) -> float:
    if v is MISSING or v is None or (type(v) is str and not v.strip()):
        return 1.0
    x = _number(v, name, text)
    if x < 0:
        raise _Bad(f"{name} is negative: {_show(v)}")
    if x > MAX_WEIGHT:
        raise _Bad(f"{name} is over the maximum weight {MAX_WEIGHT:g}: {_show(v)}")
    return x


def _utf8(v: str, name: str) -> str:
    """``v`` if it can be encoded as UTF-8 (no lone surrogate); raise _Bad otherwise."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _Bad(f"{name} is not valid Unicode ({e.reason} at character {e.start}): "
                   f"{_show(v)}") from None
    return v


def _label(v: Any, fm: FieldMap, text: bool) -> bool:
    if type(v) is str:  # the same text rule in every format
        key = v.strip()
        if not key:
            raise _Bad(f"missing field '{fm.label}'")
        if len(key) * 4 > fm.max_label_bytes:
            try:
                check_text_bytes(key, fm.label, fm.max_label_bytes)
            except ValidationError as e:
                raise _Bad(f"{fm.label} is {e.reason}") from None
        if fm.boolean_labels:
            key = key.lower()
        r = fm._text_map.get(key)
        if r is None and fm._numeric_labels:  # "1.0": the number 1
            try:
                r = fm._label_map.get(float(key))
            except ValueError:
                r = None
    elif isinstance(v, _SCALARS) or isinstance(v, (np.integer, np.floating, np.bool_)):
        r = fm._label_map.get(v)
        if r is None and type(v) is int and not fm._numeric_labels:  # 1 for the label "1"
            r = fm._text_map.get(str(v))
    elif v is MISSING:
        raise _Bad(f"missing field '{fm.label}'")
    elif v is None:
        raise _Bad(f"{fm.label} is null")
    else:
        r = None
    if r is None:
        raise _Bad(f"unknown label {_show(v)} (expected one of {fm._expected(text)})")
    return r


def _capped(v: str, name: str, limit: int) -> str:
    """``v`` if its UTF-8 encoding is at most ``limit`` bytes; raise _Bad otherwise."""
    if len(v) * 4 > limit:
        try:
            check_text_bytes(v, name, limit)
        except ValidationError as e:
            raise _Bad(f"{name} is {e.reason}: {_show(v, 40)}") from None
    return v


def _ident(v: Any, name: str, text: bool, limit: int = MAX_ID_BYTES) -> Any:
    t = type(v)
    if t is str:
        return _capped(_utf8(v, name), name, limit) if v else None
    if t is int:
        if v.bit_length() > 8 * limit:
            raise _Bad(f"{name} is an integer of more than {limit} bytes")
        return v
    if v is MISSING or v is None:
        return None
    if isinstance(v, np.integer):
        return int(v)
    if t is float and v.is_integer() and abs(v) >= 2.0 ** 63:
        # orjson (the logs' and the service's parser) reads an integer outside
        # [-2**63, 2**64) as a float: its digits are lost, so it cannot be an id
        raise _Bad(f"{name} must be a string or an integer of at most 64 bits, got "
                   f"{_show(v)} (larger integers are read as floats: send such ids as "
                   "strings)")
    raise _Bad(f"{name} must be a string or an integer, got {_show(v)}")


def _segval(v: Any, name: str, text: bool, limit: int = MAX_SEGMENT_BYTES) -> Any:
    t = type(v)
    if t is str:
        return _capped(_utf8(v, name), name, limit) if v else None
    if v is MISSING or v is None:
        return None
    if isinstance(v, np.generic):
        v = v.item()
        t = type(v)
    if t is float:
        if not math.isfinite(v):  # NaN != NaN: it could not name a segment
            raise _Bad(f"{name} is {'NaN' if v != v else 'infinite'}")
        return v
    if t is int or t is bool:
        return v
    if t is str:
        return _capped(_utf8(v, name), name, limit) if v else None
    raise _Bad(f"{name} must be a string, number or bool, got {_show(v)}")


# ---------------------------------------------------------------- rows


#: Seconds an event time may be ahead of the wall clock by default (``[input]
#: max_future`` of a replay; the service checks it against its own clock): one event
#: stamped in the future would move every window's clock there for good, and every
#: later event would be late. An hour allows for clock skew.
DEFAULT_MAX_FUTURE = 3600.0

#: In the reason of every row refused for an event time beyond ``max_future``.
FUTURE_MARK = "s ahead of the clock (max_future"


def _future(ts: float, fm: FieldMap, now: float) -> str:
    return f"{fm.ts} = {ts!r} is {ts - now:.0f} {FUTURE_MARK} = {fm.max_future:g} s)"


def _row_values(get: Callable[[str], Any], fm: FieldMap, is_text, partial: bool,
                now: float | None = None):
    """Validate one row (``get(name)`` returns the raw value or MISSING).

    ``is_text(name)`` says whether that field holds CSV-style text cells.

    Returns ``(ts, label, score, weight, id, segment, kind)``; raises _Bad.
    """
    ts_name = fm.ts
    if ts_name is None:
        ts = math.nan
    else:
        v = get(ts_name)
        text = is_text(ts_name)
        if not partial and not fm.require_ts and _absent(v, text):
            ts = math.nan
        else:
            ts = _time(v, ts_name, text)
            if fm.max_future is not None:
                now = _time_module.time() if now is None else now
                if ts > now + fm.max_future:
                    raise _Bad(_future(ts, fm, now))
    kind = KIND_EVENT
    v = get(fm.label)
    text = is_text(fm.label)
    if partial and _absent(v, text):
        label = False
        kind = KIND_PREDICTION
    else:
        label = _label(v, fm, text)
    v = get(fm.score)
    text = is_text(fm.score)
    if partial and _absent(v, text):
        if kind == KIND_PREDICTION:
            raise _Bad(f"missing fields '{fm.label}' and '{fm.score}' (need one of them)")
        score = math.nan
        kind = KIND_LABEL
    else:
        score = _number(v, fm.score, text)
    weight = 1.0 if fm.weight is None else _weight(get(fm.weight), fm.weight, is_text(fm.weight))
    ident = None if fm.id is None else _ident(get(fm.id), fm.id, is_text(fm.id),
                                              fm.max_id_bytes)
    if partial and ident is None and kind != KIND_EVENT:
        raise _Bad(f"missing field '{fm.id}' (needed to join labels to predictions)")
    segs = fm.segment_fields
    if not segs:
        seg = None
    elif len(segs) == 1:
        seg = _segval(get(segs[0]), segs[0], is_text(segs[0]), fm.max_segment_bytes)
    else:
        seg = tuple(_segval(get(s), s, is_text(s), fm.max_segment_bytes) for s in segs)
    return ts, label, score, weight, ident, seg, kind


def _absent(v: Any, text: bool = False) -> bool:
    """Absent in every format: a missing field, JSON null, an empty or blank string."""
    return v is MISSING or v is None or (type(v) is str and not v.strip())


def parse_event(obj: dict, fields: FieldMap | None = None, where: str = "event") -> Event:
    """Validate one event given as a dict (a parsed JSON object).

    Cost: `O(number of fields)`. Raises :class:`EventError` whose message
    starts with ``where``.

    >>> parse_event({"label": 1, "score": 0.8, "ts": "2024-01-01T00:00:00Z"})
    Event(label=True, score=0.8, ts=1704067200.0, weight=1.0, id=None, segment=None)
    >>> parse_event({"label": "maybe", "score": 0.8, "ts": 0}, where="event 3")
    Traceback (most recent call last):
    ...
    streameval.events.EventError: event 3: unknown label 'maybe' (expected one of true, false, 1 or 0)
    """
    fm = fields if fields is not None else _DEFAULT_FIELDS
    if not isinstance(obj, dict):
        raise EventError(f"not a JSON object: {_show(obj)}", raw=obj, where=where)
    try:
        ts, label, score, weight, ident, seg, _ = _row_values(
            lambda k: obj.get(k, MISSING), fm, _never, False
        )
    except _Bad as e:
        raise EventError(e.args[0], raw=obj, where=where) from None
    return Event(label, score, ts, weight, ident, seg)


# ---------------------------------------------------------------- batches


@dataclass(frozen=True, eq=False)
class Batch:
    """A batch of validated events as columns: the one batch type between a source and
    the Monitor.

    Sources (:class:`~streameval.io.EventSource`, :func:`build_batch`,
    :func:`events_to_batch`, Spark partitions) build it; the delayed-label join reads
    and writes it; the service's write-ahead log stores it; the Monitor admits it
    (:meth:`Monitor.admit <streameval.monitor.Monitor.admit>`) without validating its
    columns again. Frozen: a batch is never changed in place (:func:`dataclasses.replace`
    makes a changed copy).

    Columns: ``label`` (bool: is positive), ``score`` (float64, finite), ``ts`` (float64
    epoch seconds, NaN where absent), ``weight`` (float64, or None: every weight is 1),
    ``line`` (int64: 1-based line in the log, row of a Parquet file, or position in a
    list), ``id`` and ``segment`` (Python lists, or None when the field is not
    configured or absent from every row of the batch). Partial (delayed-label) batches
    also carry ``kind`` (int8, ``KIND_*``); joined batches carry ``pred_ts``, the
    prediction time. :meth:`segment_codes` gives the segment column as codes into its
    distinct values (computed once).

    >>> b = events_to_batch([{"label": 1, "score": 0.9, "ts": 5}, {"label": 0, "score": 0.2, "ts": 6}])
    >>> len(b), b.label.tolist(), b.score.tolist(), b.line.tolist()
    (2, [True, False], [0.9, 0.2], [1, 2])
    """

    label: np.ndarray
    score: np.ndarray
    ts: np.ndarray
    weight: np.ndarray | None
    line: np.ndarray
    id: list | None = None
    segment: list | None = None
    kind: np.ndarray | None = None
    pred_ts: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.score)

    def __repr__(self) -> str:
        lines = f", lines {self.line[0]}..{self.line[-1]}" if len(self) else ""
        return f"Batch({len(self)} events{lines})"

    @classmethod
    def empty(cls) -> "Batch":
        """A batch of zero events."""
        f = np.empty(0, np.float64)
        return cls(np.empty(0, bool), f, f.copy(), f.copy(), np.empty(0, np.int64))

    def weights(self) -> np.ndarray:
        """The weight column as an array (ones where ``weight`` is None)."""
        return np.ones(len(self)) if self.weight is None else self.weight

    def segment_codes(self) -> tuple[np.ndarray, list]:
        """:func:`segment_codes` of the segment column (``ValueError`` without one),
        computed once per batch. Cost: `O(n)` the first time, then `O(1)`."""
        codes = self.__dict__.get("_codes")
        if codes is None:
            if self.segment is None:
                raise ValueError("this batch has no segment column")
            codes = segment_codes(self.segment)
            object.__setattr__(self, "_codes", codes)
        return codes

    def select(self, keep: np.ndarray) -> "Batch":
        """The events where the boolean mask ``keep`` is True. Cost: `O(n)`."""
        keep = np.asarray(keep, dtype=bool)
        k = keep.tolist()
        return Batch(
            self.label[keep],
            self.score[keep],
            self.ts[keep],
            None if self.weight is None else self.weight[keep],
            self.line[keep],
            None if self.id is None else list(compress(self.id, k)),
            None if self.segment is None else list(compress(self.segment, k)),
            None if self.kind is None else self.kind[keep],
            None if self.pred_ts is None else self.pred_ts[keep],
        )

    def events(self) -> Iterable[Event]:
        """Iterate the batch as :class:`Event` tuples (slow; for tests and small batches)."""
        n = len(self)
        ids = self.id if self.id is not None else [None] * n
        segs = self.segment if self.segment is not None else [None] * n
        weight = self.weights()
        for i in range(n):
            yield Event(
                bool(self.label[i]),
                float(self.score[i]),
                float(self.ts[i]),
                float(weight[i]),
                ids[i],
                segs[i],
            )

    @staticmethod
    def concat(batches: Sequence["Batch"]) -> "Batch":
        """One batch holding the events of ``batches`` in order. Cost: `O(n)`."""
        batches = [b for b in batches if len(b)]
        if not batches:
            return Batch.empty()
        if len(batches) == 1:
            return batches[0]
        n = [len(b) for b in batches]

        def cat_list(attr: str) -> list | None:
            vals = [getattr(b, attr) for b in batches]
            if all(v is None for v in vals):
                return None
            out: list = []
            for v, k in zip(vals, n):
                out.extend(v if v is not None else [None] * k)
            return out

        def cat_opt(attr: str, dtype, fill) -> np.ndarray | None:
            vals = [getattr(b, attr) for b in batches]
            if all(v is None for v in vals):
                return None
            return np.concatenate(
                [v if v is not None else np.full(k, fill, dtype) for v, k in zip(vals, n)]
            )

        return Batch(
            np.concatenate([b.label for b in batches]),
            np.concatenate([b.score for b in batches]),
            np.concatenate([b.ts for b in batches]),
            cat_opt("weight", np.float64, 1.0),
            np.concatenate([b.line for b in batches]),
            cat_list("id"),
            cat_list("segment"),
            cat_opt("kind", np.int8, KIND_EVENT),
            cat_opt("pred_ts", np.float64, np.nan),
        )


#: The batch type's older name (same class).
EventBatch = Batch


def segment_codes(values: Sequence) -> tuple[np.ndarray, list]:
    """``(codes, distinct)`` of a column of segment values: ``codes[i]`` (int64) is the
    index in ``distinct`` of ``values[i]``, and ``distinct`` holds the values in order of
    first appearance (None included). Equal values share a code (``1``, ``1.0`` and
    ``True`` too, as in a dict: the first one stands for them); an unhashable value gets
    a code of its own. Cost: `O(n)`, dict operations at C speed (a Python loop only
    for unhashable values).

    >>> c, d = segment_codes(["fr", "de", None, "fr"])
    >>> c.tolist(), d
    ([0, 1, 2, 0], ['fr', 'de', None])
    """
    if isinstance(values, np.ndarray):
        values = values.tolist()
    try:
        index = dict.fromkeys(values)
    except TypeError:  # unhashable values: each gets its own code
        return _segment_codes_slow(values)
    distinct = list(index)
    index = dict(zip(distinct, range(len(distinct))))  # (the same keys: no value rehashed
    # into another's place, each value's first occurrence stands for those equal to it)
    codes = np.fromiter(map(index.__getitem__, values), np.int64, len(values))
    return codes, distinct


def _segment_codes_slow(values: Sequence) -> tuple[np.ndarray, list]:
    index: dict = {}
    distinct: list = []
    out: list = []
    for v in values:
        try:
            c = index.get(v)
        except TypeError:
            c = None
            hashable = False
        else:
            hashable = True
        if c is None:
            c = len(distinct)
            distinct.append(v)
            if hashable:
                index[v] = c
        out.append(c)
    return np.array(out, dtype=np.int64), distinct


# Columnar validators: each takes a column (list of raw values, or a numpy
# array for typed Parquet columns) and returns (values, bad) where ``bad`` is
# a boolean mask of failing rows or None. The fast path checks the types of a
# whole column at once; only a column that fails it is walked element by
# element (with the same functions as parse_event).

_NUM_TYPES = {float, int}


def _slow(col, fn, fill, dtype, *args):
    n = len(col)
    out = np.empty(n, dtype)
    bad = np.zeros(n, bool)
    for i, v in enumerate(col):
        try:
            out[i] = fn(v, *args)
        except _Bad:
            out[i] = fill
            bad[i] = True
    return out, bad


def _col_number(col, name: str, text: bool, weight: bool):
    n = len(col)
    arr = None
    if isinstance(col, np.ndarray):
        if col.dtype.kind in "fiu":
            arr = col.astype(np.float64, copy=False)
        else:
            col = col.tolist()
    if arr is None:
        try:
            if text:
                arr = np.fromiter(map(float, col), np.float64, n)
            elif set(map(type, col)) <= _NUM_TYPES:
                arr = np.array(col, dtype=np.float64) if n else np.empty(0)
        except (ValueError, TypeError, OverflowError):
            arr = None
    if arr is not None:
        ok = np.isfinite(arr)
        if weight:
            ok &= (arr >= 0) & (arr <= MAX_WEIGHT)
        if ok.all():
            return arr, None
    fn = _weight if weight else _number
    return _slow(col, fn, 1.0, np.float64, name, text)


def _col_weight(col, name: str, text: bool):
    if not isinstance(col, np.ndarray) and not text:
        # the common JSON case: no weight field at all
        types = set(map(type, col))
        if types <= {_Missing, type(None)}:
            return np.ones(len(col)), None
    return _col_number(col, name, text, True)


def _col_time(col, name: str, text: bool, required: bool):
    return time_column(col, name, text=text, strings=True, required=required)


def _col_label(col, fm: FieldMap, text: bool, partial: bool):
    """Labels -> int8 codes: 1 positive, 0 negative, 2 absent (partial), -1 bad."""
    if isinstance(col, np.ndarray):
        col = col.tolist()
    memo: dict = {}
    try:
        for u in set(col):
            if partial and _absent(u, text):
                memo[u] = 2
                continue
            try:
                memo[u] = 1 if _label(u, fm, text) else 0
            except _Bad:
                memo[u] = -1
        codes = np.fromiter(map(memo.__getitem__, col), np.int8, len(col))
    except TypeError:  # unhashable values (lists, dicts)
        codes = np.empty(len(col), np.int8)
        for i, v in enumerate(col):
            if partial and _absent(v, text):
                codes[i] = 2
                continue
            try:
                codes[i] = 1 if _label(v, fm, text) else 0
            except (_Bad, TypeError):
                codes[i] = -1
    return codes


def _col_objects(col, name: str, text: bool, fn, ok_types, limit: int):
    """Ids and segments: a list, or None when every value is absent (an empty string is
    absent in every format). Strings over ``limit`` bytes are bad values."""
    if isinstance(col, np.ndarray):
        col = col.tolist()
    types = set(map(type, col))
    if types <= {_Missing, type(None)} or (types <= {str} and not any(col)):
        return None, None
    if str in types:
        strs = [v for v in col if type(v) is str]
        fast = "" not in strs and max(map(len, strs)) * 4 <= limit and all_utf8(strs)
    else:
        fast = True
    if (fast and types <= ok_types and _Missing not in types
            and (int not in types or _small_ints(col, limit))
            and (float not in types or _all_finite(col))):
        return col, None
    out = [None] * len(col)
    bad = np.zeros(len(col), bool)
    for i, v in enumerate(col):
        try:
            out[i] = fn(v, name, text, limit)
        except _Bad:
            bad[i] = True
    return out, bad


def all_utf8(strings) -> bool:
    """True when every one of ``strings`` can be encoded as UTF-8: no lone surrogate
    (from JSON's ``"\\ud800"``, or a byte that was not UTF-8 read with
    ``surrogateescape``). Cost: one join and one encode.

    >>> all_utf8(["fr", "\\U0001f600"]), all_utf8(["fr", "\\udcff"])
    (True, False)
    """
    try:
        "".join(strings).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _small_ints(col, limit: int) -> bool:
    """True when no int of ``col`` takes more than ``limit`` bytes."""
    bits = 8 * limit
    return all(v.bit_length() <= bits for v in col if type(v) is int)


def _all_finite(col) -> bool:
    """True when no float of ``col`` is NaN or infinite."""
    isfinite = math.isfinite
    return all(isfinite(v) for v in col if type(v) is float)


_ID_TYPES = {str, int, type(None)}
_SEG_TYPES = {str, int, float, bool, type(None)}


def build_batch(
    columns: dict[str, Any],
    lines: np.ndarray,
    fields: FieldMap,
    *,
    text: bool | Callable[[str], bool] = False,
    partial: bool = False,
    first_error: bool = False,
) -> tuple[Batch, list[tuple[int, str]]]:
    """Validate columns of raw values into a :class:`Batch`.

    ``columns`` maps field names to equal-length lists of raw values
    (``MISSING`` where a row lacks the field; a name absent from ``columns``
    is missing in every row) or numpy arrays; ``text`` says the values are
    CSV cells (or is a predicate on the field name). Returns the batch of good
    rows and ``[(row index, reason)]`` for the bad ones, in row order. With
    ``partial=True`` rows may lack the label or the score (delayed labels; see
    ``Batch.kind``). Cost: `O(n)`, a few vectorised passes per column;
    only a column with a bad value is walked in Python. The reason of each bad row
    is found by the row validator; with ``first_error=True`` (a batch refused as a
    whole) only the first bad row's, so that a body of a million bad rows costs no
    more to refuse than one.
    """
    fm = fields
    n = len(lines)
    is_text = text if callable(text) else (lambda _name, _t=bool(text): _t)

    def get(name: str | None):
        if name is None:
            return None
        c = columns.get(name)
        return [MISSING] * n if c is None else c

    bad = np.zeros(n, bool)
    now = _time_module.time()
    # ts
    if fm.ts is None or (fm.ts not in columns and not (partial or fm.require_ts)):
        ts = np.full(n, math.nan)
    else:
        ts, b = _col_time(get(fm.ts), fm.ts, is_text(fm.ts), partial or fm.require_ts)
        if b is not None:
            bad |= b
        if fm.max_future is not None:
            bad |= ts > now + fm.max_future  # (NaN: no time, compares False)
    # label
    codes = _col_label(get(fm.label), fm, is_text(fm.label), partial)
    bad |= codes < 0
    # score
    score_col = get(fm.score)
    kind = None
    if partial:
        st = is_text(fm.score)
        if isinstance(score_col, np.ndarray):
            has_score = np.ones(n, bool)
        else:
            has_score = np.fromiter((not _absent(v) for v in score_col), bool, n)
        if has_score.all():
            score, b = _col_number(score_col, fm.score, st, False)
        else:
            sub = [v for v, h in zip(score_col, has_score.tolist()) if h]
            s2, b2 = _col_number(sub, fm.score, st, False)
            score = np.full(n, math.nan)
            score[has_score] = s2
            b = None
            if b2 is not None:
                b = np.zeros(n, bool)
                b[has_score] = b2
        kind = np.where(codes == 2, KIND_PREDICTION, KIND_EVENT).astype(np.int8)
        kind[~has_score] = KIND_LABEL
        bad |= (codes == 2) & ~has_score
    else:
        score, b = _col_number(score_col, fm.score, is_text(fm.score), False)
    if b is not None:
        bad |= b
    # weight
    if fm.weight is None or fm.weight not in columns:
        weight = np.ones(n)
    else:
        weight, b = _col_weight(get(fm.weight), fm.weight, is_text(fm.weight))
        if b is not None:
            bad |= b
    # id
    ids = None
    if fm.id is not None:
        ids, b = _col_objects(get(fm.id), fm.id, is_text(fm.id), _ident, _ID_TYPES,
                              fm.max_id_bytes)
        if b is not None:
            bad |= b
        if partial:
            if ids is None:
                bad |= kind != KIND_EVENT
            else:
                bad |= np.fromiter((v is None for v in ids), bool, n) & (kind != KIND_EVENT)
    elif partial:
        bad |= kind != KIND_EVENT
    # segment
    segs = None
    sf = fm.segment_fields
    if sf:
        parts = []
        for name in sf:
            p, b = _col_objects(get(name), name, is_text(name), _segval, _SEG_TYPES,
                                fm.max_segment_bytes)
            if b is not None:
                bad |= b
            parts.append(p)
        if len(sf) == 1:
            segs = parts[0]
        elif any(p is not None for p in parts):
            segs = list(zip(*[p if p is not None else [None] * n for p in parts]))

    errors: list[tuple[int, str]] = []
    if bad.any():
        idx = [int(np.argmax(bad))] if first_error else np.flatnonzero(bad).tolist()
        for i in idx:
            errors.append((i, _diagnose(columns, i, fm, is_text, partial, now)))
    label = codes == 1
    batch = Batch(label, score, ts, weight, np.asarray(lines, np.int64), ids, segs, kind)
    if errors:
        batch = batch.select(~bad)
    return batch, errors


def _diagnose(columns: dict, i: int, fm: FieldMap, is_text, partial: bool, now=None) -> str:
    """The reason row ``i`` fails, from the row validator (first failing field)."""

    def get(name):
        c = columns.get(name)
        if c is None:
            return MISSING
        v = c[i]
        return v.item() if isinstance(v, np.generic) else v

    try:
        _row_values(get, fm, is_text, partial, now)
    except _Bad as e:
        return e.args[0]
    return "invalid row"  # pragma: no cover - columnar and row rules disagree


def _never(_name: str) -> bool:
    return False


_DEFAULT_FIELDS = FieldMap()
#: Events validated in the first chunk of :func:`events_to_batch` (then twice as many
#: in each next one): a batch of up to 4 096 events is one chunk.
FIRST_CHUNK = 4096


def events_to_batch(
    events: Sequence[dict], fields: FieldMap | None = None, *, partial: bool = False
) -> Batch:
    """Validate a list of event dicts into one batch, all or nothing.

    Raises :class:`EventError` for the first bad event, naming its 0-based
    index (``"event 3: score is NaN"``, ``err.index == 3``); nothing is
    returned then. ``batch.line`` holds 1-based positions. Cost: `O(n)`,
    vectorised; the events are validated in chunks of doubling size
    (:data:`FIRST_CHUNK` first), so that refusing a batch costs `O(k)` for a
    first bad event at index ``k``, however long the batch.

    >>> events_to_batch([{"label": 1, "score": 0.5, "ts": 0}, {"label": 1, "score": "x", "ts": 0}])
    Traceback (most recent call last):
    ...
    streameval.events.EventError: event 1: score is not a number: 'x'
    """
    fm = fields if fields is not None else _DEFAULT_FIELDS
    events = events if isinstance(events, list) else list(events)
    names = fm.columns()
    parts = []
    start, size, n = 0, FIRST_CHUNK, len(events)
    while start < n or not parts:
        chunk = events[start:start + size]
        # the first non-object ends the events validated: a bad event before it is named first
        k = len(chunk) if set(map(type, chunk)) <= {dict} else next(
            (i for i, o in enumerate(chunk) if type(o) is not dict
             and not isinstance(o, dict)), len(chunk))
        head = chunk[:k] if k < len(chunk) else chunk
        columns = {name: [o.get(name, MISSING) for o in head] for name in names}
        batch, errors = build_batch(
            columns, np.arange(start + 1, start + len(head) + 1, dtype=np.int64), fm,
            partial=partial, first_error=True,
        )
        if errors:
            i, reason = errors[0]
            i += start
            raise EventError(reason, index=i, line=i + 1, raw=events[i], where=f"event {i}")
        if k < len(chunk):
            k += start
            o = events[k]
            raise EventError(
                f"not a JSON object: {_show(o)}", index=k, line=k + 1, raw=o, where=f"event {k}"
            )
        parts.append(batch)
        start += len(chunk)
        size *= 2
    return parts[0] if len(parts) == 1 else Batch.concat(parts)
