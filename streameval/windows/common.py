"""Helpers shared by the window modules: parameter checks, the wrapped metric's
operations (with fallbacks for metrics outside streameval, e.g. river's), the
rebuild-vs-revert crossover, a window's batch input and its late-event records, the
memo of what a metric computed from a batch (kept to revert it with), value decoding
and the JSON encoding of stored events.

It may import numpy, the standard library, :mod:`streameval.validation`,
:mod:`streameval.events` (the event-time parser) and :mod:`streameval.metrics.base`
only; every other module of
:mod:`streameval.windows` imports its helpers from here (public names only).
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from operator import itemgetter

import numpy as np

from streameval.events import as_seconds_array
from streameval.metrics.base import (
    BinaryMetric,
    Metric,
    RegressionMetric,
    capabilities,
    open_memo,
    params_of,
    shared_batch,
)
from streameval.validation import (
    ValidationError,
    check_lateness,
    check_period,
    check_same_length,
    check_size,
    take_columns,
)

__all__ = [
    "REBUILD_FRACTION", "MetricOps", "check_window_params", "fresh", "same_metric",
    "state_of", "as_seq", "as_items", "slice_columns", "weights_or_none",
    "py", "trusted_columns", "values_equal", "typed", "vectorised_revert", "rebuild_fraction",
    "decoded_columns", "item_columns", "validate_one", "encode", "decode",
    "encode_column", "decoded_events", "encode_record", "decode_record",
    "batch_input", "report_late", "shared_batch", "update_keeping_memo",
]

#: For a metric without its own vectorised revert (``revert_trusted`` or
#: ``revert_many``): a batch whose expired events are more than this fraction of the
#: window rebuilds the wrapped metric from the window's contents instead of reverting
#: the expired events one by one. Measured with exact ROCAUC before it had
#: ``revert_many`` (``python benchmarks/bench_windows.py --batches``): reverting wins
#: below about 5% of the window, rebuilding above 10%. A metric with its own
#: vectorised revert is reverted a slice at a time whatever the fraction (the
#: confusion family: 3x faster than a rebuild at 10%, 2x at 50%), unless it declares
#: the crossover it measured (``rebuild_fraction`` in its
#: :class:`~streameval.metrics.base.Capabilities`).
REBUILD_FRACTION = 0.1


# ------------------------------------------------------------------- parameters


def check_window_params(size, period, lateness):
    """``(size, period, lateness)`` checked: exactly one of size/period; lateness only
    for period windows."""
    if (size is None) == (period is None):
        raise ValidationError(
            "size", size, "give exactly one of size= and period=",
            message="give exactly one of size= (events) and period= (seconds); "
                    f"got size={size!r}, period={period!r}")
    if size is not None:
        size = check_size(size)
        if lateness not in (0, 0.0, None):
            raise ValidationError("lateness", lateness, "only period= windows have a lateness")
        return size, None, 0.0
    return None, check_period(period), check_lateness(lateness)


# --------------------------------------------------------- the wrapped metric


def fresh(metric):
    """A fresh metric with the parameters of ``metric`` and no data."""
    clone = getattr(metric, "clone", None)
    if clone is None:
        raise ValueError(f"metric = {metric!r}: needs clone() (streameval and river metrics have it)")
    return clone()


def _loop_update_many(metric, y_true, y_pred, w=None):
    update = metric.update
    for i in range(len(y_true)):
        update(y_true[i], y_pred[i], w=1.0 if w is None else w[i])
    return metric


def _loop_revert_many(metric, y_true, y_pred, w=None):
    revert = metric.revert
    for i in range(len(y_true)):
        revert(y_true[i], y_pred[i], w=1.0 if w is None else w[i])
    return metric


_BASE_REVERTS = (Metric.revert_trusted, BinaryMetric.revert_trusted, RegressionMetric.revert_trusted)
_BASE_UPDATES = (Metric.update_trusted, BinaryMetric.update_trusted, RegressionMetric.update_trusted)


def _own(metric, name, base):
    method = getattr(type(metric), name, None)
    return method is not None and method not in base


def typed(metric):
    """Whether the metric's validated columns are numpy columns of scalars (binary or
    regression), which windows store as they are."""
    return getattr(metric, "columns", None) in ("binary", "regression")


def vectorised_revert(metric):
    """Whether ``metric`` reverts a batch faster than a loop of ``revert``."""
    return (_own(metric, "revert_trusted", _BASE_REVERTS)
            or _own(metric, "revert_many", (Metric.revert_many,)))


def vectorised_update(metric):
    """Whether ``metric`` adds a batch faster than a loop of ``update``."""
    return (typed(metric) or _own(metric, "update_trusted", _BASE_UPDATES)
            or _own(metric, "update_many", (Metric.update_many,)))


def rebuild_fraction(metric):
    """The expired fraction of a window above which a batch rebuilds the metric: the
    one it declares (``capabilities(metric).rebuild_fraction``), else
    :data:`REBUILD_FRACTION` without a vectorised revert, else never (inf)."""
    default = math.inf if vectorised_revert(metric) else REBUILD_FRACTION
    fraction = capabilities(metric).rebuild_fraction
    return default if fraction is None else fraction


class MetricOps:
    """The wrapped metric's batch operations, bound once: ``validate``,
    ``update_trusted``, ``revert_trusted`` (the trusted-path protocol), and
    ``add_raw``/``remove_raw`` for events kept as given (a vectorised
    ``update_many``/``revert_many`` where the metric has one, else a loop). Metrics
    without the protocol (river's) get the protocol's default loops."""

    __slots__ = ("validate", "update_trusted", "revert_trusted", "add_raw", "remove_raw")

    def __init__(self, metric):
        def bound(name):
            own = getattr(metric, name, None)
            return own if own is not None else functools.partial(getattr(Metric, name), metric)

        self.validate = bound("validate")
        self.update_trusted = bound("update_trusted")
        self.revert_trusted = bound("revert_trusted")
        if vectorised_update(metric) and callable(getattr(metric, "update_many", None)):
            self.add_raw = metric.update_many
        else:
            self.add_raw = functools.partial(_loop_update_many, metric)
        if vectorised_revert(metric) and callable(getattr(metric, "revert_many", None)):
            self.remove_raw = metric.revert_many
        else:
            self.remove_raw = functools.partial(_loop_revert_many, metric)


def update_keeping_memo(update, cols):
    """``update(*cols)`` (a metric's ``update_trusted``) inside a
    :class:`~streameval.metrics.base.shared_batch` for ``cols`` (the open one if it
    is for these very columns); returns its memo, what the metric computed from them,
    for a count window to revert the same events with (see
    :class:`~streameval.metrics.base.shared_batch`). Runtime complexity: ``update``'s.
    """
    memo = open_memo(*cols)
    if memo is not None:
        update(*cols)
        return memo
    with shared_batch(*cols) as batch:
        update(*cols)
    return batch.memo


def validate_one(validate, y_true, y_pred, w):
    """Validate one event with a batch ``validate``; the error names the value as the
    per-event ``update`` does (``y_pred = nan``, not ``y_pred[0] = nan``)."""
    try:
        validate([y_true], [y_pred], [w])
    except ValidationError as e:
        if e.index not in (0, None):
            raise
        name = e.name
        if isinstance(name, str):
            if name.endswith("[0]"):
                name = name[:-3]
            raise ValidationError(name, e.value, e.reason) from None
        message = str(e)
        if message.startswith("event 0: "):
            message = message[len("event 0: "):]
        raise ValidationError(None, None, message, message=message) from None


def same_metric(a, b):
    """Whether two metrics have one type and one set of parameters (mergeable)."""
    if type(a) is not type(b):
        return False
    return params_of(a) == params_of(b)


def state_of(metric):
    """The wrapped metric's state, or a clear error for a metric without one."""
    to_state = getattr(metric, "to_state", None)
    if to_state is None:
        raise ValueError(
            f"cannot save the state of a window over {type(metric).__name__}: "
            "the wrapped metric has no to_state() (river metrics have none)"
        )
    return to_state()


# --------------------------------------------------------------------- columns


def as_seq(values):
    """A sliceable sequence: numpy arrays, lists and tuples as they are, else a list."""
    if isinstance(values, (np.ndarray, list, tuple)):
        return values
    return list(values)


def as_items(values):
    """Python values of a column, for storing as events."""
    if isinstance(values, np.ndarray):
        return values.tolist()
    return list(values)


def slice_columns(columns, part):
    """``col[part]`` of each column (None stays None)."""
    return tuple(None if c is None else c[part] for c in columns)


def weights_or_none(w):
    """``None`` for all-ones weights (the wrapped metric's unweighted path)."""
    if w is None:
        return None
    if isinstance(w, np.ndarray):
        return None if (w == 1.0).all() else w
    return None if list(w).count(1.0) == len(w) else w


def decoded_columns(metric, columns):
    """Validated columns as values the metric's ``update`` accepts: binary labels
    back to the configured labels (a list; the bool array itself for the default
    True/False labels), scores and weights as floats (weights None stay None)."""
    y, s, w = columns
    if getattr(metric, "columns", None) == "binary":
        pos, neg = metric.label_of(True), metric.label_of(False)
        if not (pos is True and neg is False):
            y = [pos if v else neg for v in y.tolist()]
    return y, s, w


def batch_input(size, y_true, y_pred, w, t):
    """A batch given to a window's ``update_many``, checked for its shape: ``(raw,
    ts)`` with ``raw`` the ``(y_true, y_pred, w)`` sequences as given and ``ts`` the
    event times as float64 (None for a count window, ``size`` not None); a period
    window without times, or a bad time, raises ``ValidationError`` (with its index).
    ``y_true=None`` (label-free metrics) stands for a column of None."""
    n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
    if y_true is None:  # a label-free metric's batch (``needs_labels = False``)
        y_true = [None] * len(as_seq(y_pred))
    raw = (as_seq(y_true), as_seq(y_pred), None if w is None else as_seq(w))
    if size is not None:
        return raw, None
    if t is None:
        raise ValidationError("t", None, "a period window needs the event times t=",
                              message="t = None: a period window needs the event times t=")
    return raw, as_seconds_array(t, n)


def report_late(on_late, metric, cols, raw, ts, before, idx):
    """Give ``on_late`` the record of each late event ``idx`` of a batch: its time
    ``t``, the newest time before it (``newest``, None if none) and its values, as
    given (``raw``) or, on the trusted path (``raw`` None), as validated (``cols``,
    labels decoded to the ``metric``'s)."""
    if raw is not None:
        y, p, w = take_columns(raw, idx)
    else:
        y, p, w = decoded_columns(metric, take_columns(cols, idx))
        y, p, w = as_items(y), as_items(p), None if w is None else as_items(w)
    for j, i in enumerate(idx.tolist()):
        newest = before[i]
        on_late({"t": float(ts[i]), "newest": float(newest) if newest > -math.inf else None,
                 "y_true": y[j], "y_pred": p[j], "w": 1.0 if w is None else w[j]})


def item_columns(items, offset=0):
    """The ``(y_true, y_pred, w)`` lists of stored event tuples (``offset`` skips a
    leading time); ``w`` is None when every weight is 1."""
    cols = [list(map(itemgetter(j), items)) for j in range(offset, offset + 3)]
    w = cols[2]
    if w.count(1.0) == len(w):
        cols[2] = None
    return cols


def trusted_columns(metric, ys, ps, ws, flags=False):
    """Stored events (lists, as :func:`item_columns` gives them) as the validated
    columns of the metric's trusted path, without validating them again, or None.

    Every stored event was validated when it came in; what is left is its form. Batch
    events are stored validated (scores and weights as floats; labels as configured,
    or, with ``flags``, as the bool "is positive" for custom labels that no bool
    equals), so for a binary or regression metric they convert to columns directly:
    flags as they are, labels compared with the configured positive label, floats
    copied into float64 arrays. Events kept as given (one ``update`` at a time: an int
    label, a river probability dict as score) give None, and the caller takes the
    validating path.
    Runtime complexity: `O(m)`, C loops.
    """
    kind = getattr(metric, "columns", None)
    if kind not in ("binary", "regression"):
        return None
    floats = {float}
    if not (set(map(type, ps)) <= floats and (ws is None or set(map(type, ws)) <= floats)):
        return None
    if kind == "binary":
        pos, neg = metric.label_of(True), metric.label_of(False)
        if flags or (pos is True and neg is False):
            if not set(map(type, ys)) <= {bool}:
                return None
            y = np.array(ys, dtype=bool)
        else:
            kinds = {type(pos), type(neg)}
            if not set(map(type, ys)) <= kinds:
                return None
            y = np.fromiter(map(operator.eq, ys, itertools.repeat(pos)), dtype=bool,
                            count=len(ys))
            if int(y.sum()) + ys.count(neg) != len(ys):
                return None
    else:
        if not set(map(type, ys)) <= floats:
            return None
        y = np.array(ys, dtype=np.float64)
    s = np.array(ps, dtype=np.float64)
    return y, s, None if ws is None else np.array(ws, dtype=np.float64)


def py(v):
    """A numpy scalar as the Python value (the event path's fast types)."""
    return v.item() if isinstance(v, np.generic) else v


def values_equal(a, b, tol=1e-9):
    """Whether two metric values agree (NaN equals NaN; arrays elementwise)."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    try:
        return bool(np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                                rtol=tol, atol=tol, equal_nan=True))
    except (TypeError, ValueError):
        return a == b


# ---------------------------------------------- JSON encoding of stored event args


def encode(v):
    """Encode an event argument as JSON; tagged objects keep tuples, dicts, arrays."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else {"$f": repr(v)}
    if isinstance(v, np.generic):
        return encode(v.item())
    if isinstance(v, list):
        return [encode(x) for x in v]
    if isinstance(v, tuple):
        return {"$t": [encode(x) for x in v]}
    if isinstance(v, dict):
        return {"$d": [[encode(k), encode(x)] for k, x in v.items()]}
    if isinstance(v, np.ndarray):
        return {"$a": encode(v.tolist()), "dtype": v.dtype.str}
    raise ValueError(f"cannot save an event argument of type {type(v).__name__}: {v!r:.100}")


def decode(v):
    """Inverse of :func:`encode`."""
    if isinstance(v, list):
        return [decode(x) for x in v]
    if isinstance(v, dict):
        if "$f" in v:
            return float(v["$f"])
        if "$t" in v:
            return tuple(decode(x) for x in v["$t"])
        if "$d" in v:
            return {_hashable(decode(k)): decode(x) for k, x in v["$d"]}
        if "$a" in v:
            return np.asarray(decode(v["$a"]), dtype=np.dtype(v["dtype"]))
        raise ValueError(f"not an encoded event argument: {v!r:.100}")
    return v


def _hashable(k):
    return tuple(k) if isinstance(k, list) else k


def encode_column(col):
    """A stored column as JSON values: finite numeric numpy arrays in one call."""
    if isinstance(col, np.ndarray):
        kind = col.dtype.kind
        if kind in "biu" or (kind == "f" and np.isfinite(col).all()):
            return col.tolist()
        col = col.tolist()
    return [encode(v) for v in col]


_PLAIN = (bool, int, float, str, type(None))


def decoded_events(rows):
    """Stored events from their JSON rows, as tuples; only tagged values are decoded."""
    if not rows:
        return []
    cols = list(zip(*rows))
    for j, col in enumerate(cols):
        if not all(type(v) in _PLAIN for v in col):
            cols[j] = [decode(v) for v in col]
    return list(zip(*cols))


def encode_record(r):
    """A closed tumbling window's record as JSON."""
    return {key: encode(value) for key, value in r.items()}


def decode_record(r):
    """Inverse of :func:`encode_record`."""
    return {key: decode(value) for key, value in r.items()}
