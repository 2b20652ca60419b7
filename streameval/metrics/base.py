"""The metric protocol shared by every streameval metric.

Every metric has ``update``, ``revert``, ``update_many``, ``get``, ``merge`` and
``to_state``; :func:`from_state` rebuilds any metric (or window) from its state.

Binary, multiclass and regression metrics subclass river's metric base classes, so
``river.evaluate.progressive_val_score`` and ``river.utils.Rolling`` accept them.

Validation is atomic: every check runs before any state changes, and a bad value
raises :class:`ValueError` naming the value (and its index, for batches).
"""

from __future__ import annotations

import inspect
import math
import numbers

import numpy as np
from river.metrics import base as river_base

__all__ = [
    "Metric",
    "BinaryMetric",
    "MultiClassMetric",
    "RegressionMetric",
    "from_state",
    "register",
    "check_weight",
    "check_real",
    "as_float_array",
    "as_weight_array",
    "as_binary_labels",
    "check_same_length",
    "label_sets",
]

#: Every class whose state :func:`from_state` can rebuild, by public type name.
_REGISTRY: dict[str, type] = {}

#: Modules defining state types that are not public names of ``streameval``; imported
#: on demand by :func:`from_state` so a checkpoint loads in a fresh process.
_STATE_MODULES = {
    "PrecisionRecallDrift": "streameval.drift",
    "ChangePointDetector": "streameval.drift",
    "DriftCounts": "streameval.drift",
    "Monitor": "streameval.monitor",
}

_Real = numbers.Real


# --------------------------------------------------------------------------- errors


def _fail(name, value, reason, index=None):
    where = name if index is None else f"{name}[{index}]"
    raise ValueError(f"{where} = {value!r}: {reason}")


# --------------------------------------------------------------------- single values


def check_real(value, name="y_pred", what="score"):
    """Return ``value`` as a finite float, or raise ``ValueError`` naming it.

    Booleans count as 0 and 1 (a river classifier's predicted label).

    >>> check_real(0.25)
    0.25
    >>> check_real(float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: y_pred = nan: score must be a finite number
    """
    if type(value) is float:
        v = value
    elif isinstance(value, _Real):
        v = float(value)
    else:
        _fail(name, value, f"{what} must be a finite number")
    if v - v:  # NaN or +-inf
        _fail(name, value, f"{what} must be a finite number")
    return v


def check_weight(w, name="w"):
    """Return the weight ``w`` as a float; it must be finite and >= 0.

    >>> check_weight(2)
    2.0
    >>> check_weight(-1.0)
    Traceback (most recent call last):
    ...
    ValueError: w = -1.0: weight must be a finite number >= 0
    """
    if type(w) is float:
        v = w
    elif isinstance(w, _Real) and not isinstance(w, bool):
        v = float(w)
    else:
        _fail(name, w, "weight must be a finite number >= 0")
    if v - v or v < 0.0:
        _fail(name, w, "weight must be a finite number >= 0")
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
    ValueError: y_true = 1: a batch must be a sequence or a 1-D array
    """
    n = None
    first = None
    for name, a in arrays.items():
        if a is None:
            continue
        try:
            m = len(a)
        except TypeError:
            raise ValueError(f"{name} = {a!r:.80}: a batch must be a sequence or a 1-D array") from None
        if n is None:
            n, first = m, name
        elif m != n:
            raise ValueError(f"{first} has {n} elements but {name} has {m}")
    return n or 0


def _first_bad(mask):
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
            raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    elif arr.dtype.kind in "fiub":
        arr = arr.astype(np.float64, copy=False)
    else:
        arr = _elementwise(values, name, what, scalar)
    if arr.size and not np.isfinite(arr).all():
        i = _first_bad(~np.isfinite(arr))
        _fail(name, float(arr[i]), f"{what} must be a finite number", i)
    return arr


def _elementwise(values, name, what, scalar):
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        if scalar is not None:
            out[i] = scalar(v, i)
        elif isinstance(v, _Real):
            out[i] = float(v)
        else:
            _fail(name, v, f"{what} must be a finite number", i)
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
        raise ValueError(f"y_true has {n} elements but {name} has {len(arr)}")
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        i = _first_bad(bad)
        _fail(name, float(arr[i]), "weight must be a finite number >= 0", i)
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
    if arr.dtype.kind in "biuf" and isinstance(pos, (bool, int)) and isinstance(neg, (bool, int)):
        is_pos = arr == pos
        is_neg = arr == neg
    else:
        # object/str arrays: compare in Python so that types are respected
        items = arr.tolist()
        is_pos = np.fromiter((_in(v, pos_set) for v in items), dtype=bool, count=len(items))
        is_neg = np.fromiter((_in(v, neg_set) for v in items), dtype=bool, count=len(items))
    bad = ~(is_pos | is_neg)
    if bad.any():
        i = _first_bad(bad)
        _fail(name, arr[i].item() if hasattr(arr[i], "item") else arr[i],
              f"label must be {pos!r} (positive) or {neg!r} (negative)", i)
    return is_pos


def _in(v, s):
    try:
        return v in s
    except TypeError:
        return False


# --------------------------------------------------------------------------- protocol


def register(cls):
    """Register ``cls`` under its public name so :func:`from_state` can rebuild it."""
    _REGISTRY[cls._public_name] = cls
    return cls


class Metric:
    """The streameval protocol, mixed into every metric and window.

    Subclasses implement ``update``, ``revert``, ``get``, and for state and merging
    ``_get_data()``, ``_set_data(data)`` and ``_merge(other)``. Constructor parameters
    must be stored as attributes of the same name (as river's ``Base`` expects); they
    form the ``params`` of the state and decide which metrics may be merged.
    """

    #: version of the state layout; bump when ``_get_data`` changes shape
    _state_version = 1
    #: constructor parameters left out of the state (e.g. a shared confusion matrix)
    _state_exclude: tuple = ("cm",)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_public_name" not in cls.__dict__:
            cls._public_name = cls.__name__
        if not cls.__name__.startswith("_") and not cls.__dict__.get("_abstract", False):
            register(cls)

    # -- protocol ---------------------------------------------------------------
    def update_many(self, y_true, y_pred, w=None):
        """Add a batch; same result as a loop of ``update``. Validated before any change."""
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        probe = self.clone()
        for i in range(n):
            try:
                probe.update(y_true[i], y_pred[i], 1.0 if w is None else w[i])
            except ValueError as e:
                raise ValueError(f"event {i}: {e}") from None
        self.merge(probe)
        return self

    def revert_many(self, y_true, y_pred, w=None):
        """Remove a batch added earlier; same result as a loop of ``revert``.

        This default loops over ``revert`` and, if an event is refused, puts the
        events already removed back (so nothing is half-applied) before raising with
        the event's index. Families override it with a vectorised version.
        """
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        done = 0
        try:
            for i in range(n):
                self.revert(y_true[i], y_pred[i], 1.0 if w is None else w[i])
                done = i + 1
        except ValueError as e:
            for j in range(done):
                self.update(y_true[j], y_pred[j], 1.0 if w is None else w[j])
            raise ValueError(f"event {done}: {e}") from None
        return self

    def merge(self, other):
        """Fold in the state of ``other`` (same type and parameters); return ``self``."""
        if type(other) is not type(self):
            raise ValueError(
                f"cannot merge a {type(other).__name__} into a {type(self).__name__}"
            )
        mine, theirs = self._params(), other._params()
        if mine != theirs:
            raise ValueError(f"cannot merge metrics with different parameters: {theirs} into {mine}")
        self._merge(other)
        return self

    def to_state(self):
        """JSON-serialisable state: ``{"type", "version", "params", "data"}``."""
        return {
            "type": self._public_name,
            "version": self._state_version,
            "params": self._params(),
            "data": self._get_data(),
        }

    @classmethod
    def _from_state(cls, state):
        obj = cls(**state["params"])
        obj._set_data(state["data"])
        return obj

    def clone(self, new_params=None, include_attributes=False):
        """A fresh metric with the same parameters and no data."""
        params = self._params()
        if new_params:
            params.update(new_params)
        return type(self)(**params)

    def _params(self):
        params = {}
        for name, p in inspect.signature(type(self).__init__).parameters.items():
            if name == "self" or name in self._state_exclude:
                continue
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            params[name] = getattr(self, name)
        return params

    def _check(self):
        """Assert the internal invariants (tests call this after every operation)."""

    # -- subclass hooks ---------------------------------------------------------
    def _get_data(self):
        raise NotImplementedError

    def _set_data(self, data):
        raise NotImplementedError

    def _merge(self, other):
        raise NotImplementedError(f"{type(self).__name__} cannot be merged")

    def __repr__(self):
        try:
            value = self.get()
        except Exception:  # pragma: no cover - repr must never raise
            value = math.nan
        if isinstance(value, float):
            return f"{type(self).__name__}: {value:.6f}"
        return f"{type(self).__name__}: {value!r}"

    __str__ = __repr__


def from_state(state):
    """Rebuild a metric or window from :meth:`Metric.to_state`.

    Refuses anything that is not such a state, an unknown ``type`` or a ``version``
    this streameval does not read, with a ``ValueError`` that says which.

    Runtime complexity: `O(size of the state)`.

    >>> import json, streameval
    >>> m = streameval.ROCAUC()
    >>> m.update_many([1, 0, 1, 0], [0.9, 0.4, 0.35, 0.1]).get()
    0.75
    >>> copy = from_state(json.loads(json.dumps(m.to_state())))
    >>> copy.get(), type(copy).__name__
    (0.75, 'ROCAUC')
    >>> from_state({"type": "ROCAUC", "version": 99, "params": {}, "data": {}})
    Traceback (most recent call last):
    ...
    ValueError: state of ROCAUC has version 99; this streameval reads version 1
    """
    if not isinstance(state, dict) or "type" not in state or "version" not in state:
        raise ValueError(f"not a streameval state (a dict with 'type' and 'version'): {state!r:.200}")
    name = state["type"]
    cls = _REGISTRY.get(name)
    if cls is None and isinstance(name, str):
        import importlib

        import streameval  # the lazy public names import the module that defines it

        module = streameval._LAZY.get(name) or _STATE_MODULES.get(name)
        if module is not None:
            importlib.import_module(module)
        cls = _REGISTRY.get(name)
    if cls is None:
        raise ValueError(f"unknown state type {name!r}")
    if state["version"] != cls._state_version:
        raise ValueError(
            f"state of {name} has version {state['version']!r}; "
            f"this streameval reads version {cls._state_version}"
        )
    if "params" not in state or "data" not in state:
        raise ValueError(f"state of {name} lacks 'params' or 'data'")
    return cls._from_state(state)


# ------------------------------------------------------------------------ families


class BinaryMetric(Metric, river_base.BinaryMetric):
    """Base of binary classification metrics.

    ``y_true`` is ``pos_label`` or ``neg_label`` (default True/1 and False/0);
    ``y_pred`` is a score (a finite number), a bool (a predicted label), or a river
    probability dict ``{True: p, False: 1 - p}`` whose positive entry is the score
    (an absent entry counts as 0, as for an untrained river model's ``{}``).
    """

    _abstract = True

    def __init__(self, pos_label=True, neg_label=None):
        self.pos_label = pos_label
        self.neg_label = neg_label
        self._pos_set, self._neg_set = label_sets(pos_label, neg_label)

    @property
    def requires_labels(self):
        # river then passes predict_proba_one's dict, and our threshold applies to it
        return False

    @property
    def bigger_is_better(self):
        return True

    def _label(self, y_true, name="y_true"):
        """True for the positive label, False for the negative; else ValueError."""
        try:
            if y_true in self._pos_set:
                return True
            if y_true in self._neg_set:
                return False
        except TypeError:
            pass
        (pos,) = self._pos_set
        (neg,) = self._neg_set
        _fail(name, y_true, f"label must be {pos!r} (positive) or {neg!r} (negative)")

    def _score(self, y_pred, name="y_pred"):
        """The positive-class score of ``y_pred`` as a finite float; else ValueError."""
        if type(y_pred) is float:
            s = y_pred
        elif isinstance(y_pred, dict):
            (pos,) = self._pos_set
            s = y_pred.get(pos, 0.0)
            if not isinstance(s, _Real):
                _fail(name, y_pred, "probability must be a finite number")
            s = float(s)
        elif isinstance(y_pred, _Real):
            s = float(y_pred)
        else:
            _fail(name, y_pred, "score must be a finite number or a probability dict")
        if s - s:
            _fail(name, y_pred, "score must be a finite number")
        return s

    def _batch(self, y_true, y_pred, w):
        """Validate a batch: (bool labels, float64 scores, float64 weights or None)."""
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        labels = as_binary_labels(y_true, self._pos_set, self._neg_set)
        scores = as_float_array(
            y_pred, scalar=lambda v, i: self._score(v, name=f"y_pred[{i}]")
        )
        weights = as_weight_array(w, n)
        return labels, scores, weights


class MultiClassMetric(Metric, river_base.MultiClassMetric):
    """Base of multiclass metrics: any hashable label but None and NaN."""

    _abstract = True

    @property
    def requires_labels(self):
        return True

    @property
    def bigger_is_better(self):
        return True

    @staticmethod
    def _class(y, name="y_true"):
        try:
            hash(y)
        except TypeError:
            _fail(name, y, "a class label must be hashable")
        if y is None or (isinstance(y, float) and y != y):
            _fail(name, y, "not a valid class label")
        return y


class RegressionMetric(Metric, river_base.RegressionMetric):
    """Base of regression metrics: ``y_true`` and ``y_pred`` are finite numbers."""

    _abstract = True

    @property
    def bigger_is_better(self):
        return False

    def _batch(self, y_true, y_pred, w):
        n = check_same_length(y_true=y_true, y_pred=y_pred, w=w)
        yt = as_float_array(y_true, name="y_true", what="target")
        yp = as_float_array(y_pred, name="y_pred", what="prediction")
        return yt, yp, as_weight_array(w, n)
