"""The Monitor: named metrics, windows, drift tests and alert rules over one event stream.

A :class:`Monitor` takes scored, labelled events one at a time (:meth:`Monitor.update`)
or in batches (:meth:`Monitor.update_many`), feeds them to its metrics, and at each
*evaluation point* emits a metrics row for each scope it evaluates (the whole stream,
segments) and evaluates their alert rules.

Evaluation points
-----------------
The whole stream:

* every ``every`` events (after the ``every``-th, ``2 * every``-th, ... event);
* every ``every_seconds`` of event time: when an event's time enters a new period
  (periods are aligned to multiples of ``every_seconds`` since the epoch, so hourly means
  on the hour), the monitor evaluates *before* counting that event;
* :meth:`Monitor.flush` (end of the stream) always leaves the final state in the
  timeline: it evaluates, every value computed now, unless the last evaluation was at
  the current ``n`` with every whole-stream value fresh (its rows already are the final
  ones).

A segment (``group_by``) has its own cadence: it is evaluated after every ``every`` of
*its own* events since its last row (labels, complete events and predictions taken
before their labels alike), at each new period of ``every_seconds``, at
:meth:`Monitor.evaluate` and at :meth:`Monitor.flush`, each time only if it counted
events or predictions since its last row. Between two of its rows its events wait in
its buffer with their kinds (part of the state) and are fed to its metrics in one slice
when its row is due: the label-free metrics take the predictions and complete events,
the labelled ones the labels and complete events, each in arrival order. Reading
(snapshots, the live metric objects) shows a segment as of its last row, and never
feeds a buffer (``pending`` counts what waits; the label coverage counts events when
they come). A segment that gets a share ``q`` of the stream is thus evaluated every
``every / q`` stream events: an evaluation costs what changed (idle segments are not
read), at the price of a longer detection delay on small segments, which
``every_seconds`` bounds in event time.

Two triggers at the same ``n`` give one evaluation (the whole stream's count point and
the segments due there; a new period then feeds and evaluates every other segment with
buffered events). The batch path finds the same points as the event path, feeds each
metric ``update_many`` with the slice of events between two points (a segment: its
events since its last row), and evaluates there: same rows, same alerts, far faster.

Predictions before their labels
-------------------------------
:meth:`Monitor.predict` and :meth:`Monitor.predict_many` take a prediction when it is
made: the label-free metrics (``needs_labels = False``) count it at its own time, and
``update(..., predicted=True)`` later counts its label in the labelled metrics only (a
complete event feeds both). The whole stream feeds them at once, and has evaluation
points of predictions of their own, by the same rules (every ``every`` predictions,
each new period of their times); ``n`` keeps counting labelled events. A segment
buffers predictions with its other events and counts them towards its own points (see
above). The output of a label join that passes predictions on goes in whole through
:meth:`Monitor.apply` (its ``kind`` column says which rows are which).

Output
------
``on_metrics`` and ``on_alert`` are lists of callables (sinks), called at each
evaluation with plain JSON-ready dicts (DESIGN.md section 6):

* metrics row: ``{"n", "t", "segment", "values": {name: float or None}}`` (a segment's
  also ``"stream_n"``), plus
  ``"late": {name: count}`` when the monitor has windows by ``period``: the events each
  window refused as late (older than its ``lateness`` allows), in that segment, so far;
  ``"error_bounds": {name: bound}`` for the values that are not exact (a cumulative AUC
  or AP past ``max_scores`` distinct scores, ``bins``): ``|value - exact| <= bound``; and
  ``"as_of": {name: n}`` for cumulative values read at a cadence on long streams
  (:data:`~streameval.monitor.scopes.HOLD_FROM`): the count of events the value covers;
  ``"intervals": {name: [lo, hi]}``, the 95% confidence interval of each value computed
  now that has one at `O(1)` or over a window (Wilson with continuity correction for
  proportions, DeLong for a window's AUC:
  :func:`~streameval.monitor.evaluation.row_intervals`). These keys are absent when
  empty; ``"coverage": {"predictions", "labelled", "pending", "expired"}`` (and
  ``"replaced"``) once the scope took predictions before their labels (counted when
  they come: a segment's buffered ones too);
* alert transition: ``{"rule", "state": "pending"|"firing"|"resolved", "n", "t",
  "value", "segment"}`` and its explanation's fields (``message``, ``expr``,
  ``window``, ``events``, ``interval``, ...: :meth:`streameval.alerts.Rule.explain`,
  read from the scope by :mod:`streameval.monitor.explain`).

``n`` is the number of events the row counts: the monitor's (all segments: the
stream's clock) in the whole-stream row and in alert transitions, the segment's own in
a segment row, which also carries ``"stream_n"``, the monitor's count at that
evaluation (shared by the rows of one evaluation); ``t`` the newest event time seen (None
without event times; predictions taken before their labels count here too), ``values`` the metrics' values with NaN (undefined: no positives,
empty window) written as None; a :class:`~streameval.Tumbling` window's value is that
of its last closed window (a partial window is not closed by :meth:`Monitor.flush`).
Each drift test adds ``"drift.<name>.p_value"`` and
``"drift.<name>.delta"`` to ``values`` (None until the test is ready), and a sequential
detector ``"drift.<name>.change_p_value"`` (the p-value at its last detection; None
before any). At an evaluation the rows are emitted first, then the transitions. A segment's rules
are evaluated at its rows, on their values (``for = 3``: three of the segment's
evaluations); a segment that counted no event since its last row (idle) writes no row
(its last one still holds), and its rules are evaluated again at the whole stream's
evaluation points only while one of them is pending or firing.

Segments
--------
With ``group_by`` (a field name, or a list of names), each distinct segment value gets
its own copy of every metric, drift test and rule; with ``overall=True`` (default) the
whole stream (segment None) is monitored too, and with ``overall_rules=True`` (default;
the default monitor's rules under ``group_by`` set it False) its rules are evaluated
too; with ``overall_drift=True`` (default; False for the default monitor under
``group_by`` while its rules watch the segments only) it runs the drift tests too. The ``segment`` of an event is the value
of its field (a str, int, float or bool), or for several fields a tuple of values in
``group_by`` order (in rows, a JSON list). An event whose segment is None counts in
the whole stream only. Rows are emitted whole stream first, then segments in order of
first appearance. A segment's ``min_samples`` counts that segment's events; ``n`` and
``cooldown`` use the stream's clock.

At most ``max_segments`` segments (default :data:`DEFAULT_MAX_SEGMENTS`) get their own
copy: every segment is a full set of metrics (tens of kB, and series in
Prometheus), and a client that sends a new value in every event must not be able to
grow the monitor without bound. Once that many exist, the events of a new segment
value are counted under the segment :data:`OTHER_SEGMENT` (``"__other__"``, a tuple of
it for several fields), :attr:`Monitor.other_events` counts them, ``snapshot()`` says
so, and a ``RuntimeWarning`` is issued the first time.

The package, by job
------------------
* :mod:`~streameval.monitor.explain`: what an alert transition rests on (its window,
  events and interval), read from its scope when a rule makes a transition;
* :mod:`~streameval.monitor.intake`: the Monitor's own checks on a batch, once
  (:meth:`Monitor.admit`, :meth:`Monitor.refused`), giving an
  :class:`~streameval.monitor.intake.Admitted` batch;
* :mod:`~streameval.monitor.scopes`: :class:`~streameval.monitor.scopes.Scope`, what the
  whole stream and each segment hold (metrics, drift tests, rule instances, a count),
  and :func:`share_orders`;
* :mod:`~streameval.monitor.evaluation`: the evaluation points and the
  :class:`~streameval.monitor.evaluation.Evaluator` (rows and alert transitions of given
  scopes);
* :mod:`~streameval.monitor.facade`: :class:`Monitor`, which wires them and keeps the
  state (``apply(admit(batch))`` is ``update_many``).

Code outside this package uses these public names only, never a Monitor's or a scope's
private attributes (``tests/test_monitor_seams.py`` checks the source tree).

Imports: this package's modules, which import numpy, the standard library,
:mod:`streameval.alerts`, :mod:`streameval.windows`, :mod:`streameval.metrics`,
:mod:`streameval.events` (the batch type, the event-time parser) and
:mod:`streameval.validation`; :mod:`streameval.config` only inside
:meth:`Monitor.default` and :meth:`Monitor.from_config` (config imports the Monitor's
parts, not the Monitor). Never :mod:`streameval.io`, the pipeline, the CLI or the
service.

>>> from streameval.alerts import Threshold
>>> import streameval as se
>>> m = Monitor({"recall": se.Recall()}, rules=[Threshold("recall", "<", 0.6)], every=2)
>>> rows, alerts = [], []
>>> m.on_metrics.append(rows.append); m.on_alert.append(alerts.append)
>>> for y, s in [(True, 0.9), (True, 0.2), (True, 0.8), (False, 0.1), (True, 0.3)]:
...     m.update(y, s)
>>> m.flush()
>>> [(r["n"], r["values"]["recall"]) for r in rows]
[(2, 0.5), (4, 0.666667), (5, 0.5)]
>>> [(a["state"], a["n"]) for a in alerts]
[('firing', 2), ('resolved', 4), ('firing', 5)]

Cost: :meth:`Monitor.update` is one ``update`` per metric of the whole stream, and an
append to the event's segment's buffer; :meth:`Monitor.update_many` one ``update_many``
per metric of the whole stream per slice between its evaluation points, plus `O(m)`
numpy work for the segments' buffers; a segment's row costs one ``update_many`` per
metric (the events since its last row) and one ``get`` per metric, plus `O(1)` per
rule; an idle segment costs nothing.
"""

from streameval.monitor.evaluation import Evaluator, evaluation_points
from streameval.monitor.facade import DEFAULT_MAX_SEGMENTS, GROUP_BY_PROBE, Monitor
from streameval.monitor.intake import OTHER_SEGMENT, Admitted
from streameval.monitor.scopes import Scope, share_orders
from streameval.monitor.scopes import inner as _inner  # noqa: F401 (older private name)

__all__ = ["Monitor", "DEFAULT_MAX_SEGMENTS", "OTHER_SEGMENT", "GROUP_BY_PROBE", "Admitted",
           "Evaluator", "Scope", "evaluation_points", "share_orders"]
