"""streameval on Apache Spark (the optional extra ``streameval[spark]``, PySpark).

Exact metrics, segment timelines and alerts over partitioned data, by merging the
metrics' own states: never a home-made cluster, never an approximation unless asked
(``bins=N``).

* :func:`evaluate` (:mod:`.evaluate`): metric values over a DataFrame, per segment
  with ``group_by``; exact AUC and AP over score ranges, so driver memory does not
  grow with the number of distinct scores.
* :func:`replay` (:mod:`.replay`): the ``metrics.jsonl`` and ``alerts.jsonl`` of
  ``streameval replay`` from a partitioned log, evaluated at every period of event time.
* :class:`MonitorSink` (:mod:`.streaming`): a Structured Streaming ``foreachBatch``
  sink feeding a Monitor exactly once per batch id.

Modules here may import pyspark, pandas, pyarrow and any streameval module; nothing
in streameval imports them except the CLI's ``replay --engine spark`` (on use).
"""

from streameval.spark.evaluate import Skipped, evaluate  # noqa: E402
from streameval.spark.replay import SparkReplayError, replay  # noqa: E402
from streameval.spark.streaming import MonitorSink  # noqa: E402

__all__ = ["evaluate", "Skipped", "replay", "SparkReplayError", "MonitorSink"]
