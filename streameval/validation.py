"""Data and parameter checks shared by every layer: the one validation boundary.

What it holds:

* :class:`ValidationError`, the ``ValueError`` every check raises: its text names the
  value and where it was (``y_pred[3] = nan: score must be a finite number``), and its
  attributes carry the same facts (``name``, ``value``, ``reason``, ``index``) so that
  callers (the Monitor, the service) never parse a message;
* data checks of single values (:func:`check_real`, :func:`check_weight`) and of
  batches (:func:`as_float_array`, :func:`as_weight_array`, :func:`as_binary_labels`,
  :func:`check_same_length`), each vectorised with numpy and naming the first bad
  element;
* declared parameter checks in the manner of scikit-learn's ``validate_params``
  (:func:`check_param` with the constraints :class:`Real`, :class:`Integer`,
  :class:`Options`): the same parameter (``threshold``, ``size``, ``period``,
  ``lateness``, ``alpha``, ``level``) is checked here and only here, with one message;
* the revert slack (:data:`REVERT_SLACK`, :func:`overdrawn`).

It may import numpy and the standard library only: it is the ground floor with
:mod:`streameval._registry`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "ValidationError",
    "label_flags",
    "fail",
    "check_real",
    "check_weight",
    "MAX_WEIGHT",
    "label_sets",
    "REVERT_SLACK",
    "overdrawn",
    "MAX_ID_BYTES",
    "MAX_SEGMENT_BYTES",
    "MAX_LABEL_BYTES",
    "MAX_LINE_BYTES",
    "MAX_EXPANSION",
    "check_text_bytes",
    "check_same_length",
    "first_bad",
    "as_float_array",
    "as_weight_array",
    "as_binary_labels",
    "take_columns",
    "each",
    "Real",
    "Integer",
    "Options",
    "check_param",
    "check_threshold",
    "check_size",
    "check_period",
    "check_lateness",
    "check_level",
]


class ValidationError(ValueError):
    """A value refused by a check, with where it was.

    ``str(e)`` is ``"<name>[<index>] = <value!r>: <reason>"``; the attributes say the
    same for programs. :meth:`at` prefixes a batch position (``"event 7: ..."``) for
    refusals found after the per-element checks (a revert of an event never added).

    >>> try:
    ...     as_float_array([0.5, float("nan")])
    ... except ValidationError as e:
    ...     print(e, "|", e.index, e.name, e.reason)
    y_pred[1] = nan: score must be a finite number | 1 y_pred score must be a finite number
    """

    def __init__(self, name, value, reason, index=None, message=None):
        self.name = name
        self.value = value
        self.reason = reason
        self.index = index
        if message is None:
            where = name if index is None else f"{name}[{index}]"
            message = f"{where} = {value!r}: {reason}"
        super().__init__(message)

    @classmethod
    def at(cls, index, message, name=None, value=None):
        """An error for the event at ``index`` of a batch: ``"event <index>: message"``."""
        return cls(name, value, message, index, message=f"event {index}: {message}")

    def __reduce__(self):  # picklable across processes (Spark workers)
        return (_rebuild, (self.name, self.value, self.reason, self.index, str(self)))


def each(fn, values, name):
    """``[fn(v, f"{name}[{i}]") for i, v in enumerate(values)]``, where a
    :class:`ValidationError` raised by ``fn`` for element ``i`` carries ``index=i`` (and
    ``name``): the element-by-element path of the batch checks (dicts, objects).

    >>> each(lambda v, where: check_real(v, where), [1, 2], "y_pred")
    [1.0, 2.0]
    >>> try:
    ...     each(lambda v, where: check_real(v, where), [1, "x"], "y_pred")
    ... except ValidationError as e:
    ...     print(e, "| index", e.index)
    y_pred[1] = 'x': score must be a finite number | index 1
    """
    out = []
    i = 0
    try:
        for i, v in enumerate(values):
            out.append(fn(v, f"{name}[{i}]"))
    except ValidationError as e:
        if e.index is None:
            e.index, e.name = i, name
        raise
    return out


def _rebuild(name, value, reason, index, message):
    return ValidationError(name, value, reason, index, message)


# --------------------------------------------------------------------------- errors


_Real = numbers.Real


# --------------------------------------------------------------------------- errors


def fail(name, value, reason, index=None):
    """Raise :class:`ValidationError` for ``value`` of argument ``name`` (at ``index``)."""
    raise ValidationError(name, value, reason, index)


# --------------------------------------------------------------------- single values


def check_real(value, name="y_pred", what="score"):
    """Return ``value`` as a finite float, or raise ``ValueError`` naming it.

    Booleans count as 0 and 1 (a river classifier's predicted label).

    >>> check_real(0.25)
    0.25
    >>> check_real(float("nan"))
    Traceback (most recent call last):
    ...
    streameval.validation.ValidationError: y_pred = nan: score must be a finite number
    """
    if type(value) is float:
        v = value
    elif isinstance(value, _Real):
        v = float(value)
    else:
        fail(name, value, f"{what} must be a finite number")
    if v - v:  # NaN or +-inf
        fail(name, value, f"{what} must be a finite number")
    return v


#: The largest accepted weight. Metrics multiply weights (AUC's pairs, the squared
#: weights of an effective sample size) and sum millions of them: below 1e12 every such
#: product and sum stays far inside float64 (1e24 per pair, 1e36 summed over 1e12
#: events), so no accepted input can overflow to inf or NaN. A weight of 1e155 squared
#: is already infinite. 1e12 is far above any real importance weight.
MAX_WEIGHT = 1e12
_WEIGHT_RULE = f"weight must be a finite number between 0 and {MAX_WEIGHT:g}"


def check_weight(w, name="w"):
    """Return the weight ``w`` as a float; it must be finite, >= 0 and at most
    :data:`MAX_WEIGHT`.

    >>> check_weight(2)
    2.0
    >>> check_weight(-1.0)
    Traceback (most recent call last):
    ...
    streameval.validation.ValidationError: w = -1.0: weight must be a finite number between 0 and 1e+12
    """
    if type(w) is float:
        v = w
    elif isinstance(w, _Real) and not isinstance(w, bool):
        v = float(w)
    else:
        fail(name, w, _WEIGHT_RULE)
    if v - v or v < 0.0 or v > MAX_WEIGHT:
        fail(name, w, _WEIGHT_RULE)
    return v


def label_sets(pos_label, neg_label):
    """The sets of accepted positive and negative labels.

    With the default ``pos_label=True`` (or 1, False, 0) the negative label is the other
    boolean, and ints and bools are interchangeable (``1 == True``). Any other
    ``pos_label`` needs ``neg_label`` too, so that a mistyped label raises instead of
    silently counting as a negative.

    >>> label_sets(True, None)
    (frozenset({True}), frozenset({False}))
    >>> label_sets("spam", "ham")
    (frozenset({'spam'}), frozenset({'ham'}))
    """
    _hashable_label(pos_label, "pos_label")
    if neg_label is None:
        if isinstance(pos_label, (bool, int, np.bool_, np.integer)) and pos_label in (0, 1):
            neg_label = not bool(pos_label)
        else:
            raise ValueError(
                f"pos_label = {pos_label!r} needs neg_label= as well "
                "(labels other than the configured two raise an error)"
            )
    _hashable_label(neg_label, "neg_label")
    if pos_label == neg_label:
        raise ValueError(f"pos_label and neg_label are both {pos_label!r}")
    return frozenset([pos_label]), frozenset([neg_label])


def _hashable_label(label, name):
    try:
        hash(label)
    except TypeError:
        raise ValueError(f"{name} = {label!r}: a label must be hashable") from None
    if label is None or (isinstance(label, float) and label != label):
        raise ValueError(f"{name} = {label!r}: not a valid label")


#: Byte limits on what a client or a file controls, checked at the first boundary
#: (the HTTP body parser, the file readers) so that a hostile or broken producer cannot
#: make one value cost more memory than a real deployment ever needs. Ids (UUIDs are 36
#: bytes, composite keys a few hundred) stay far below :data:`MAX_ID_BYTES`; segment
#: values (a country, a model version, a tenant) below :data:`MAX_SEGMENT_BYTES`; class
#: labels below :data:`MAX_LABEL_BYTES`. A line or row of a log holds one event: a few
#: hundred bytes, or a document's text for text metrics, far below
#: :data:`MAX_LINE_BYTES`. Each is a default the configuration can change where the
#: layer that checks it says so.
MAX_ID_BYTES = 1024
MAX_SEGMENT_BYTES = 256
MAX_LABEL_BYTES = 256
MAX_LINE_BYTES = 1 << 20
#: A compressed log may expand at most this many times its compressed size. JSONL and
#: CSV event logs compress 5 to 20 times with gzip and up to about 50 with xz; a file
#: expanding 100 times is a compression bomb or a file of blanks.
MAX_EXPANSION = 100


def check_text_bytes(value, name, limit, index=None):
    """Return ``value`` if its UTF-8 encoding (a ``str``) or its length (``bytes``) is at
    most ``limit`` bytes; otherwise raise :class:`ValidationError` naming the field, the
    size and the limit, with the value shortened to 40 characters.

    >>> check_text_bytes("br", "segment", MAX_SEGMENT_BYTES)
    'br'
    >>> try:
    ...     check_text_bytes("x" * 300, "segment", MAX_SEGMENT_BYTES, index=4)
    ... except ValidationError as e:
    ...     print(e.reason, "| index", e.index)
    300 bytes, more than the limit of 256 bytes | index 4
    """
    if isinstance(value, str):
        n = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    elif isinstance(value, (bytes, bytearray, memoryview)):
        n = len(value)
    else:
        return value
    if n > limit:
        shown = value[:40] + ("..." if len(value) > 40 else "")
        raise ValidationError(
            name, shown, f"{n} bytes, more than the limit of {limit} bytes", index
        )
    return value


#: How far below zero, as a share of the metric's total weight, a weighted sum may go
#: through float rounding before a ``revert`` of that weight is refused. Event counts
#: are exact and decide whether an event is there at all; this slack only tells a
#: wrong weight from the rounding residue that millions of float-weighted updates and
#: reverts leave (about ``ops * 1e-16`` of the sums' size; 1e-6 covers 1e10 operations).
REVERT_SLACK = 1e-6


def overdrawn(left, w, scale):
    """Whether ``left``, a weighted sum after taking out weight ``w``, is further below
    zero than rounding explains, for a metric whose total weight is about ``scale``.
    Works elementwise on numpy arrays.

    >>> overdrawn(-1e-12, 1.0, 1e4), overdrawn(-0.5, 1.0, 1e4)
    (False, True)
    """
    return left < -(1e-9 * w + REVERT_SLACK * scale)


# ---------------------------------------------------------------------------- batches


def check_same_length(**arrays):
    """Return the common length of the given sequences (None skipped); raise
    ``ValueError`` naming one that is not a sequence, or two of different lengths.

    >>> check_same_length(y_true=[1, 0], y_pred=[0.3, 0.2], w=None)
    2
    >>> check_same_length(y_true=1, y_pred=[0.3])
    Traceback (most recent call last):
    ...
    streameval.validation.ValidationError: y_true = 1: a batch must be a sequence or a 1-D array
    """
    n = None
    first = None
    for name, a in arrays.items():
        if a is None:
            continue
        try:
            m = len(a)
        except TypeError:
            reason = "a batch must be a sequence or a 1-D array"
            raise ValidationError(name, a, reason, message=f"{name} = {a!r:.80}: {reason}") from None
        if n is None:
            n, first = m, name
        elif m != n:
            raise ValidationError(name, m, "lengths differ",
                                  message=f"{first} has {n} elements but {name} has {m}")
    return n or 0


def first_bad(mask):
    return int(np.argmax(mask))


def as_float_array(values, name="y_pred", what="score", scalar=None):
    """Return ``values`` as a 1-D float64 array of finite numbers.

    Lists and numpy arrays of numbers are converted in one numpy call; anything else
    (dicts, strings, None) goes element by element through ``scalar`` (a function of
    ``(value, index)`` returning a float, which raises naming the index) so that the
    message names the first bad element.
    """
    arr = values if isinstance(values, np.ndarray) else np.asarray(values)
    if arr.ndim != 1:
        if arr.dtype.kind == "O" or arr.ndim == 0:
            arr = _elementwise(values, name, what, scalar)
        else:
            raise ValidationError(name, arr.shape, "must be one-dimensional",
                                  message=f"{name} must be one-dimensional, got shape {arr.shape}")
    elif arr.dtype.kind in "fiub":
        arr = arr.astype(np.float64, copy=False)
    else:
        arr = _elementwise(values, name, what, scalar)
    if arr.size and not np.isfinite(arr).all():
        i = first_bad(~np.isfinite(arr))
        fail(name, float(arr[i]), f"{what} must be a finite number", i)
    return arr


def _elementwise(values, name, what, scalar):
    out = np.empty(len(values), dtype=np.float64)
    i = 0
    try:
        for i, v in enumerate(values):
            if scalar is not None:
                out[i] = scalar(v, i)
            elif isinstance(v, _Real):
                out[i] = float(v)
            else:
                fail(name, v, f"{what} must be a finite number", i)
    except ValidationError as e:
        if e.index is None:
            e.index, e.name = i, name
        raise
    return out


def as_weight_array(w, n, name="w"):
    """Return the batch weights as float64, or None for ``w=None`` (all ones); raise
    ``ValueError`` naming the first bad weight."""
    if w is None:
        return None
    arr = w if isinstance(w, np.ndarray) else np.asarray(w)
    if arr.ndim != 1 or arr.dtype.kind not in "fiu":
        for i, v in enumerate(w):
            check_weight(v, f"{name}[{i}]")
        arr = np.asarray(w, dtype=np.float64)
    arr = arr.astype(np.float64, copy=False)
    if len(arr) != n:
        raise ValidationError(name, len(arr), "lengths differ",
                              message=f"y_true has {n} elements but {name} has {len(arr)}")
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > MAX_WEIGHT)
    if bad.any():
        i = first_bad(bad)
        fail(name, float(arr[i]), _WEIGHT_RULE, i)
    return arr


def as_binary_labels(y_true, pos_set, neg_set, name="y_true"):
    """Return a bool array (True where positive) or raise naming the first bad label."""
    arr = y_true if isinstance(y_true, np.ndarray) else None
    if arr is None:
        try:
            arr = np.asarray(y_true)
        except ValueError:  # ragged: a sequence among the labels
            arr = None
        # numpy turns [True, "x"] into the strings ["True", "x"]: keep the objects
        if arr is not None and arr.dtype.kind in "US" and len({type(v) for v in y_true}) > 1:
            arr = None
    if arr is None or arr.ndim != 1:
        arr = np.fromiter(y_true, dtype=object, count=len(y_true))
    (pos,) = pos_set
    (neg,) = neg_set
    if arr.dtype.kind == "b" and pos is True and neg is False:
        return arr
    is_pos, is_neg = label_flags(arr, pos_set, neg_set)
    bad = ~(is_pos | is_neg)
    if bad.any():
        i = first_bad(bad)
        fail(name, arr[i].item() if hasattr(arr[i], "item") else arr[i],
              f"label must be {pos!r} (positive) or {neg!r} (negative)", i)
    return is_pos


def label_flags(arr, pos_set, neg_set):
    """``(is_pos, is_neg)`` bool arrays for the 1-D array ``arr``: numbers compared by
    numpy, anything else in Python so that types are respected (a label in neither is
    refused by :func:`as_binary_labels`; the Spark partitions count it as a bad row)."""
    (pos,) = pos_set
    (neg,) = neg_set
    if arr.dtype.kind in "biuf" and isinstance(pos, (bool, int)) and isinstance(neg, (bool, int)):
        return arr == pos, arr == neg
    items = arr.tolist()
    is_pos = np.fromiter((_in(v, pos_set) for v in items), dtype=bool, count=len(items))
    is_neg = np.fromiter((_in(v, neg_set) for v in items), dtype=bool, count=len(items))
    return is_pos, is_neg


def _in(v, s):
    try:
        return v in s
    except TypeError:
        return False


def take_columns(columns, idx):
    """The events ``idx`` (an int array) of validated columns (numpy arrays, lists or
    None), as the same kinds of columns.

    >>> take_columns((np.array([1., 2., 3.]), [4, 5, 6], None), np.array([2, 0]))
    (array([3., 1.]), [6, 4], None)
    """
    out = []
    for col in columns:
        if col is None:
            out.append(None)
        elif isinstance(col, np.ndarray):
            out.append(col[idx])
        else:
            out.append([col[i] for i in idx.tolist()])
    return tuple(out)


# ------------------------------------------------------------------ parameter checks


class Real:
    """A real number (not a bool), finite, in ``[low, high]`` (``open_low=True``:
    excluding ``low``; ``open_high=True``: excluding ``high``)."""

    def __init__(self, low=None, high=None, *, open_low=False, open_high=False,
                 allow_none=False):
        self.low, self.high, self.open_low, self.allow_none = low, high, open_low, allow_none
        self.open_high = open_high

    def __call__(self, value):
        if value is None and self.allow_none:
            return None
        if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.number)):
            raise TypeError
        v = float(value)
        if not math.isfinite(v):
            raise TypeError
        if self.low is not None and (v < self.low or (self.open_low and v == self.low)):
            raise TypeError
        if self.high is not None and (v > self.high or (self.open_high and v == self.high)):
            raise TypeError
        return v

    def describe(self):
        if self.low is not None and self.high is not None:
            text = (f"a number in {'(' if self.open_low else '['}{self.low}, "
                    f"{self.high}{')' if self.open_high else ']'}")
        elif self.low is not None:
            text = f"a number {'>' if self.open_low else '>='} {self.low}"
        else:
            text = "a finite number"
        return text + (" or None" if self.allow_none else "")


class Integer:
    """An integer (not a bool) ``>= low``; a float with an integral value is accepted
    where ``integral_float`` (TOML and JSON give ``1e4`` as a float)."""

    def __init__(self, low=None, *, allow_none=False, integral_float=False):
        self.low, self.allow_none, self.integral_float = low, allow_none, integral_float

    def __call__(self, value):
        if value is None and self.allow_none:
            return None
        if isinstance(value, bool):
            raise TypeError
        if isinstance(value, (numbers.Integral, np.integer)):
            v = int(value)
        elif self.integral_float and isinstance(value, float) and value.is_integer():
            v = int(value)
        else:
            raise TypeError
        if self.low is not None and v < self.low:
            raise TypeError
        return v

    def describe(self):
        text = "an integer" if self.low is None else f"an integer >= {self.low}"
        return text + (" or None" if self.allow_none else "")


class Options:
    """One of the given values."""

    def __init__(self, *values):
        self.values = values

    def __call__(self, value):
        for v in self.values:
            if value == v and type(value) is type(v):
                return v
        raise TypeError

    def describe(self):
        return "one of " + ", ".join(repr(v) for v in self.values)


def check_param(name, value, *constraints):
    """Return ``value`` normalised by the first constraint it meets, or raise
    ``ValueError("<name> = <value!r>: must be <what>")``.

    >>> check_param("size", 3.0, Integer(1, integral_float=True))
    3
    >>> check_param("average", "mean", Options("macro", "micro"))
    Traceback (most recent call last):
    ...
    streameval.validation.ValidationError: average = 'mean': must be one of 'macro', 'micro'
    """
    for c in constraints:
        try:
            return c(value)
        except TypeError:
            continue
    what = " or ".join(c.describe() for c in constraints)
    raise ValidationError(name, value, f"must be {what}")


def check_threshold(threshold, default=0.5, name="threshold"):
    """The decision threshold of threshold metrics (``score >= threshold`` is
    positive): a finite number; None gives ``default``."""
    if threshold is None:
        return default
    return check_param(name, threshold, Real())


def check_size(size, name="size"):
    """A window's size in events: an integer >= 1.

    >>> check_size(0)
    Traceback (most recent call last):
    ...
    streameval.validation.ValidationError: size = 0: must be an integer >= 1
    """
    return check_param(name, size, Integer(1))


def check_level(level, name="level"):
    """A confidence level: a real number in the open interval ``(0, 1)``.

    >>> check_level(0.9)
    0.9
    >>> check_level(1)
    Traceback (most recent call last):
    ...
    streameval.validation.ValidationError: level = 1: must be a number in (0, 1)
    """
    return check_param(name, level, Real(0, 1, open_low=True, open_high=True))


def _seconds(value):
    total = getattr(value, "total_seconds", None)  # a datetime.timedelta
    return total() if callable(total) else value


def check_period(period, name="period"):
    """A window's period: seconds (a finite number > 0) or a ``timedelta``."""
    return check_param(name, _seconds(period), Real(0, open_low=True))


def check_lateness(lateness, name="lateness"):
    """How late an event may arrive and still be placed: seconds (a number >= 0) or a
    ``timedelta``; None is 0."""
    return check_param(name, 0.0 if lateness is None else _seconds(lateness), Real(0))
