"""An estimate from scores checked against the realized value on the same events.

A label-free estimate (``estimated_recall``: the recall expected from calibrated
scores, with its interval) is only as good as its assumptions: calibrated scores and no
concept shift. :class:`EstimateCheck` watches them. It is a labelled metric: each labelled
event goes to its own copy of the estimate (the label ignored) and of the realized metric
(``recall``), so both cover exactly the same predictions, and it reports

* ``output="error"``: the estimation error, estimate minus realized value;
* ``output="covered"``: 1.0 when the realized value lies inside the estimate's interval
  at ``level``, else 0.0 (``nan`` while either is undefined).

Over a window (``Sliding(EstimateCheck(...), size=10_000)``) it compares the two over the
last labelled events. A realized value outside the interval for a sustained period is the
sign of concept shift or broken calibration: the default monitor's ``estimate diverged``
rule watches ``estimate_covered.<metric>@<size>``.

A Monitor keeps one pair of metrics for the checks that differ only in what they report
(``estimation_error.recall`` and ``estimate_covered.recall``, over the same window): the
second is a read-only :class:`CheckView` of the first (:func:`check_key` says which).

Imports: :mod:`streameval._registry` (the metrics by kind, resolved when built),
:mod:`streameval.metrics.base`; never the Monitor.
"""

from __future__ import annotations

import inspect
import math

from streameval import _registry
from streameval.metrics.base import Metric, SharedView, from_state

__all__ = ["EstimateCheck", "CheckView", "check_key", "OUTPUTS"]

#: What an :class:`EstimateCheck` reports.
OUTPUTS = ("error", "covered")


def _build(kind, threshold, pos_label, neg_label):
    """A metric of config kind (or class name) ``kind`` with the parameters it takes."""
    name = _registry.config_kinds().get(kind, kind)
    cls = _registry.state_class(name)
    if cls is None:
        raise ValueError(f"{kind!r} is not a metric kind (not registered)")
    params = inspect.signature(cls.__init__).parameters
    kwargs = {}
    if "threshold" in params and threshold is not None:
        kwargs["threshold"] = threshold
    if "pos_label" in params:
        kwargs["pos_label"] = pos_label
    if "neg_label" in params:
        kwargs["neg_label"] = neg_label
    return cls(**kwargs)


class EstimateCheck(Metric):
    """A label-free estimate and the realized metric over the same labelled events.

    Runtime complexity: each ``update`` is one ``update`` of the estimate and one of the
    realized metric (their costs); ``get`` one ``get`` of each (``"covered"``: and the
    estimate's ``interval``).

    Parameters
    ----------
    of : str
        The realized metric's kind (``"recall"``).
    estimate : str, optional
        The estimate's kind (default ``"estimated_<of>"``); it must declare
        ``needs_labels = False``, and for ``output="covered"`` have ``interval(level)``.
    output : {"error", "covered"}
        What :meth:`get` returns (see the module docstring).
    level : float
        The interval's confidence level (``"covered"``).
    threshold, pos_label, neg_label
        Given to both metrics where they take them.
    """

    _public_name = "EstimateCheck"
    needs_labels = True

    def __init__(self, of="recall", estimate=None, output="error", level=0.95, threshold=0.5,
                 pos_label=True, neg_label=None, calibration=None):
        if output not in OUTPUTS:
            raise ValueError(f"output = {output!r}: must be one of {OUTPUTS}")
        if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
            raise ValueError(f"level = {level!r}: must be a number in (0, 1)")
        self.of = of
        self.estimate = estimate
        self.output = output
        self.level = float(level)
        self.threshold = threshold
        self.pos_label = pos_label
        self.neg_label = neg_label
        self._real = _build(of, threshold, pos_label, neg_label)
        self._est = _build(estimate or f"estimated_{of}", threshold, pos_label, neg_label)
        if getattr(self._est, "needs_labels", True) is not False:
            raise ValueError(f"estimate {estimate or 'estimated_' + of!r} is not a label-free "
                             "metric (needs_labels = False)")
        if calibration is not None:
            self._est.set_calibration(calibration)

    @property
    def calibration(self):
        """The estimate's calibration map (None: scores are probabilities)."""
        return getattr(self._est, "calibration", None)

    @property
    def recalibrates(self):
        """Whether a Monitor's calibration refit schedule gives the estimate its maps
        (see :func:`~streameval.metrics.calibration.recalibrate`)."""
        return bool(getattr(self._est, "recalibrates", False))

    def set_calibration(self, calibration):
        """The estimate counts the events that follow with ``calibration`` (see
        :meth:`~streameval.metrics.estimated.LabelFree.set_calibration`)."""
        self._est.set_calibration(calibration)
        self.__dict__.pop("_array_params", None)

    def _params(self):
        params = super()._params()
        cal = self.calibration
        params["calibration"] = None if cal is None else cal.to_state()
        return params

    def clone(self, new_params=None, include_attributes=False):
        params = super()._params()
        params["calibration"] = self.calibration  # (the same map, not a copy)
        if new_params:
            params.update(new_params)
        return type(self)(**params)

    #: validated binary columns (the realized metric's): a Monitor validates a batch
    #: once and hands it to :meth:`update_trusted`; windows keep it as numpy columns
    columns = "binary"

    @property
    def score_bounds(self):
        """The estimate's: it reads scores as probabilities, where the realized metric
        may take any score."""
        return getattr(self._est, "score_bounds", None)

    def label_of(self, is_positive):
        """The configured label for a bool "is positive" (the realized metric's)."""
        return self._real.label_of(is_positive)

    def _validate_both(self, y_true, y_pred, w=None):
        """Check a batch against both metrics, changing nothing (a
        ``ValidationError`` naming the first bad element and its ``index``); the
        realized metric's columns."""
        cols = self._real.validate(y_true, y_pred, w)
        self._est.validate(y_true, y_pred, w)
        return cols

    def validate(self, y_true, y_pred, w=None):
        """The realized metric's validated binary columns, the batch checked against
        the estimate too (scores its calibration maps to probabilities), nothing
        changed. Runtime complexity: `O(m)` numpy for each."""
        return self._validate_both(y_true, y_pred, w)

    def check_columns(self, y, s, w=None):
        """Refuse, changing nothing, columns that :meth:`update_trusted` would refuse:
        the realized metric's ``check_columns`` and, with a calibration map, the
        estimate's probabilities (the score bounds a Monitor checks itself)."""
        check = getattr(self._real, "check_columns", None)
        if check is not None:
            check(y, s, w)
        if getattr(self._est, "calibration", None) is not None:
            self._est.validate(None, s, w)

    def update_trusted(self, y, s, w=None):
        """Add validated columns to both (the estimate ignores the labels). Runtime
        complexity: the two metrics' ``update_trusted``."""
        self._real.update_trusted(y, s, w)
        self._est.update_trusted(y, s, w)
        return self

    def revert_trusted(self, y, s, w=None):
        """Remove validated columns added earlier from both; atomic as the realized
        metric's and the estimate's are (the estimate checked first: if it refuses,
        neither changed)."""
        self._est.revert_trusted(y, s, w)
        try:
            self._real.revert_trusted(y, s, w)
        except ValueError:
            self._est.update_trusted(y, s, w)  # (put back: nothing changed)
            raise
        return self

    def update(self, y_true, y_pred, w=1.0):
        """Add one labelled event to both (checked against both first: a bad event
        changes nothing). Returns ``self``."""
        self._validate_both([y_true], [y_pred], None if w is None else [w])
        self._real.update(y_true, y_pred, w)
        self._est.update(y_true, y_pred, w)
        return self

    def revert(self, y_true, y_pred, w=1.0):
        """Remove one event added earlier from both. Returns ``self``."""
        self._real.revert(y_true, y_pred, w)
        self._est.revert(y_true, y_pred, w)
        return self

    def update_many(self, y_true, y_pred, w=None):
        """Add a batch to both (validated against both first). Returns ``self``."""
        return self.update_trusted(*self._validate_both(y_true, y_pred, w))

    def revert_many(self, y_true, y_pred, w=None):
        """Remove a batch added earlier from both. Returns ``self``."""
        return self.revert_trusted(*self._validate_both(y_true, y_pred, w))

    def get(self):
        """The estimation error, or 1.0/0.0 for a realized value inside/outside the
        estimate's interval; ``nan`` while either value is undefined."""
        real = float(self._real.get())
        if self.output == "error":
            return float(self._est.get()) - real
        lo, hi = self._est.interval(self.level)
        if lo is None or hi is None or any(math.isnan(v) for v in (real, lo, hi)):
            return math.nan
        return 1.0 if lo <= real <= hi else 0.0

    def values(self):
        """``(estimate, realized)`` over the events counted."""
        return float(self._est.get()), float(self._real.get())

    def _get_data(self):
        return {"estimate": self._est.to_state(), "realized": self._real.to_state()}

    def _set_data(self, data):
        self._est = from_state(data["estimate"])
        self._real = from_state(data["realized"])

    def _merge(self, other):
        self._est.merge(other._est)
        self._real.merge(other._real)

    def _subtract(self, other):
        self._real.subtract(other._real)
        self._est.subtract(other._est)


def check_key(metric):
    """What decides an :class:`EstimateCheck`'s state (the realized metric, the estimate,
    the threshold and labels; not what it reports), as a hashable key; None for any other
    metric. Two checks with one key fed the same events hold the same state, so a Monitor
    keeps one and reads it for both (:class:`CheckView`)."""
    if type(metric) is EstimateCheck:
        return ("check", metric.of, metric.estimate or f"estimated_{metric.of}",
                metric.threshold, metric.pos_label, metric.neg_label)
    return None


class CheckView(SharedView):
    """A read-only :class:`EstimateCheck` that reads another one's metrics: the same
    realized metric and estimate (:func:`check_key`), another output or level
    (``estimate_covered.recall`` reading ``estimation_error.recall``'s pair).

    ``get()`` is the template's on the owner's metrics and ``to_state()`` exactly the
    state the template would have if it had been fed the owner's events. Nothing
    updates a view (``TypeError``: the owner is updated). Runtime complexity: ``get``
    as :meth:`EstimateCheck.get`.
    """

    key_of = staticmethod(check_key)
    what = "estimate and realized metric"
    mismatch = "a CheckView reads an EstimateCheck of the same metrics, threshold and labels"
    refusal = "a shared estimate check is read-only: its owner is updated"

    def _linked(self):
        """The template, its check reading the owner's current metrics."""
        owner = self._inner(self.owner)
        m = self._metric
        if m._real is not owner._real or m._est is not owner._est:
            m._real, m._est = owner._real, owner._est
        return self.template

    def to_state(self):
        self._linked()
        return self._window_state(self._metric.to_state())
