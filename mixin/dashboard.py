"""Generate the Grafana dashboard of the monitoring mixin: ``dashboards/streameval.json``.

Built with Grafana's foundation SDK (``grafana-foundation-sdk`` on PyPI, the Grafana
11.6 build pinned in the ``test`` extra) so the JSON follows a current dashboard schema.
Run from the repository's root::

    python mixin/dashboard.py > mixin/dashboards/streameval.json

``tests/test_mixin.py`` checks that the committed file is this script's output and that
every series its queries name is exported by a running service or recorded by the
mixin's rules.

Variables: ``datasource`` (any Prometheus), ``job``, ``model`` (a target label the
scrape configuration may set; "All" matches targets without it), ``instance``,
``segment`` and ``metric`` (several at once; the quality row repeats its panel per
metric). The whole stream's series have no ``segment`` label: "All" shows it beside
the segments, and the legend names it "whole stream".
"""

from __future__ import annotations

import sys

from grafana_foundation_sdk.builders import common, dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as mc
from grafana_foundation_sdk.models import prometheus as mp
from grafana_foundation_sdk.models import dashboard as md

UID = "streameval-mixin"
DS = md.DataSourceRef(type_val="prometheus", uid="${datasource}")
#: The target selector every query starts from.
SEL = 'job=~"$job", model=~"$model", instance=~"$instance"'
SEG = SEL + ', segment=~"$segment"'


def whole(expr: str) -> str:
    """``expr`` with the whole stream's series (no segment label) named "whole stream"."""
    return f'label_replace({expr}, "segment", "whole stream", "segment", "")'


def query(expr: str, legend: str = "__auto", ref: str = "A", instant: bool = False):
    q = (prometheus.Dataquery().datasource(DS).expr(expr).legend_format(legend).ref_id(ref))
    if instant:
        q = q.instant().format(mp.PromQueryFormat.TABLE)
    return q


def series(title: str, description: str, targets, unit: str = "short", *,
           span: int = 12, stack: bool = False, min_val: float | None = 0,
           max_val: float | None = None):
    p = (timeseries.Panel().title(title).description(description).datasource(DS)
         .unit(unit).span(span).height(8).fill_opacity(10).line_width(1)
         .legend(common.VizLegendOptions().display_mode(mc.LegendDisplayMode.TABLE)
                 .placement(mc.LegendPlacement.BOTTOM).show_legend(True)
                 .calcs(["lastNotNull", "min", "max"]))
         .tooltip(common.VizTooltipOptions().mode(mc.TooltipDisplayMode.MULTI)
                  .sort(mc.SortOrder.DESCENDING)))
    if min_val is not None:
        p = p.min(min_val)
    if max_val is not None:
        p = p.max(max_val)
    if stack:
        p = p.stacking(common.StackingConfig().mode(mc.StackingMode.NORMAL))
    for i, t in enumerate(targets):
        p = p.with_target(t.ref_id("ABCDEFGH"[i]))
    return p


def single(title: str, description: str, expr: str, unit: str = "short", *, span: int = 3,
           steps=((None, "green"),)):
    th = (dashboard.ThresholdsConfig().mode(md.ThresholdsMode.ABSOLUTE)
          .steps([md.Threshold(value=v, color=c) for v, c in steps]))
    return (stat.Panel().title(title).description(description).datasource(DS).unit(unit)
            .span(span).height(4).with_target(query(expr, legend="{{instance}}"))
            .thresholds(th)
            .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]))
            .color_mode(mc.BigValueColorMode.BACKGROUND)
            .graph_mode(mc.BigValueGraphMode.AREA))


def variable(name: str, label: str, q: str, *, multi: bool = False, include_all: bool = True):
    v = (dashboard.QueryVariable(name).label(label).datasource(DS)
         .query({"query": q, "refId": "PrometheusVariableQueryEditor-VariableQuery"})
         .refresh(md.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(md.VariableSort.ALPHABETICAL_ASC)
         .multi(multi))
    if include_all:
        v = v.include_all(True).all_value(".*")
    return v.current(md.VariableOption(selected=True, text="All", value="$__all"))


def build() -> md.Dashboard:
    d = (dashboard.Dashboard("streameval").uid(UID).tags(["streameval", "ml-monitoring"])
         .description("A streameval service: health, ingestion, label join, late and future "
                      "events, checkpoints, model quality per segment and its alerts.")
         .refresh("30s").time("now-6h", "now").timezone("browser").editable()
         .tooltip(md.DashboardCursorSync.CROSSHAIR)
         .with_variable(dashboard.DatasourceVariable("datasource").label("Data source")
                        .type("prometheus"))
         .with_variable(variable("job", "Job", "label_values(streameval_events_total, job)",
                                 multi=True))
         .with_variable(variable("model", "Model",
                                 'label_values(streameval_events_total{job=~"$job"}, model)',
                                 multi=True))
         .with_variable(variable("instance", "Instance",
                                 'label_values(streameval_events_total{job=~"$job", '
                                 'model=~"$model"}, instance)', multi=True))
         .with_variable(variable("segment", "Segment",
                                 f'label_values(streameval_segment_events{{{SEL}}}, segment)',
                                 multi=True))
         .with_variable(variable("metric", "Metric",
                                 f'label_values(streameval_metric{{{SEL}}}, metric)',
                                 multi=True)))

    # ------------------------------------------------------------------ health
    d = (d.with_row(dashboard.Row("Health"))
         .with_panel(single("Up", "Prometheus's last scrape of each target: 1 up, 0 down "
                            "(alert StreamevalDown).",
                            f'min(up{{{SEL}}})', "none",
                            steps=((None, "red"), (1, "green"))))
         .with_panel(single("Since last scrape", "Wall clock since Prometheus's newest sample "
                            "of up (no value once the target is stale, after 5 minutes).",
                            f'time() - max(timestamp(up{{{SEL}}}))', "s"))
         .with_panel(single("Events counted", "Events acknowledged by the service "
                            "(streameval_events_total).",
                            f'sum(streameval_events_total{{{SEL}}})', "short"))
         .with_panel(single("Event-time lag", "Wall clock minus the newest event time "
                            "(instance:streameval_event_time_lag_seconds); large for a replay "
                            "of old logs.",
                            f'max(instance:streameval_event_time_lag_seconds{{{SEL}}})', "s"))
         .with_panel(single("Firing alerts", "Rules of the service's monitor firing now "
                            "(instance:streameval_alerts_firing:count).",
                            f'sum(instance:streameval_alerts_firing:count{{{SEL}}})', "none",
                            steps=((None, "green"), (1, "red"))))
         .with_panel(single("Pending alerts", "Rules of the service's monitor pending now "
                            "(instance:streameval_alerts_pending:count).",
                            f'sum(instance:streameval_alerts_pending:count{{{SEL}}})', "none",
                            steps=((None, "green"), (1, "orange"))))
         .with_panel(single("Segments", "Segments with series of their own "
                            "(instance:streameval_segments:count); at most max_segments.",
                            f'sum(instance:streameval_segments:count{{{SEL}}})', "none"))
         .with_panel(single("Checkpoint age", "Wall clock since the last checkpoint "
                            "(instance:streameval_checkpoint_age_seconds).",
                            f'max(instance:streameval_checkpoint_age_seconds{{{SEL}}})', "s"))
         .with_panel(series("Scrape duration and ingest latency (p99)",
                            "Prometheus's scrape_duration_seconds, and the 99th percentile of "
                            "the time to validate, log and apply one request "
                            "(instance:streameval_ingest_seconds:p99_rate5m).",
                            [query(f'scrape_duration_seconds{{{SEL}}}', "scrape {{instance}}"),
                             query(f'instance:streameval_ingest_seconds:p99_rate5m{{{SEL}}}',
                                   "ingest p99 {{instance}}")], "s", span=24)))

    # ------------------------------------------------------------------ ingestion
    d = (d.with_row(dashboard.Row("Ingestion"))
         .with_panel(series("Events and batches per second",
                            "instance:streameval_events:rate5m and "
                            "instance:streameval_batches:rate5m.",
                            [query(f'instance:streameval_events:rate5m{{{SEL}}}',
                                   "events {{instance}}"),
                             query(f'instance:streameval_batches:rate5m{{{SEL}}}',
                                   "batches {{instance}}")], "ops"))
         .with_panel(series("Refusals by reason",
                            "instance:streameval_refused:rate5m: bad requests (requests/s), "
                            "events dated past max_future and late events (events/s), "
                            "predictions refused at max_pending (batches/s).",
                            [query(f'instance:streameval_refused:rate5m{{{SEL}}}',
                                   "{{reason}} ({{unit}}/s) {{instance}}")], "ops"))
         .with_panel(series("Events per second by segment",
                            "instance_segment:streameval_segment_events:rate5m: the volume "
                            "each segment's metrics rest on.",
                            [query(whole(f'instance_segment:streameval_segment_events:rate5m'
                                         f'{{{SEG}}}'), "{{segment}}")], "ops"))
         .with_panel(series("Events under __other__ per second",
                            "rate(streameval_other_segment_events_total): events of new "
                            "segment values past max_segments (alert "
                            "StreamevalSegmentCapReached).",
                            [query(f'rate(streameval_other_segment_events_total{{{SEL}}}'
                                   f'[$__rate_interval])', "{{instance}}")], "ops")))

    # ------------------------------------------------------------------ label join
    d = (d.with_row(dashboard.Row("Label join"))
         .with_panel(series("Join outcomes per second",
                            "instance:streameval_label_join:rate5m by outcome: joined, expired "
                            "unlabelled (label_ttl), orphan labels, duplicate prediction ids.",
                            [query(f'instance:streameval_label_join:rate5m{{{SEL}}}',
                                   "{{outcome}} {{instance}}")], "ops"))
         .with_panel(series("Predictions waiting for a label",
                            "streameval_predictions_pending against "
                            "streameval_predictions_pending_max (429 past it).",
                            [query(f'streameval_predictions_pending{{{SEL}}}',
                                   "pending {{instance}}"),
                             query(f'streameval_predictions_pending_max{{{SEL}}}',
                                   "max_pending {{instance}}")], "short"))
         .with_panel(series("Expired and orphan shares (1h)",
                            "instance:streameval_label_join_expired:ratio_rate1h and "
                            "instance:streameval_label_join_orphans:ratio_rate1h.",
                            [query(f'instance:streameval_label_join_expired:ratio_rate1h'
                                   f'{{{SEL}}}', "expired {{instance}}"),
                             query(f'instance:streameval_label_join_orphans:ratio_rate1h'
                                   f'{{{SEL}}}', "orphans {{instance}}")],
                            "percentunit", max_val=1)))

    # ------------------------------------------------------------------ late and future
    d = (d.with_row(dashboard.Row("Late and future events"))
         .with_panel(series("Late events per second by segment",
                            "instance_segment:streameval_late_events:rate5m: the most any "
                            "window by period of the segment refused as late.",
                            [query(whole(f'instance_segment:streameval_late_events:rate5m'
                                         f'{{{SEG}}}'), "{{segment}}")], "ops"))
         .with_panel(series("Future events per second",
                            "rate(streameval_future_events_total): events refused for a time "
                            "past max_future.",
                            [query(f'rate(streameval_future_events_total{{{SEL}}}'
                                   f'[$__rate_interval])', "{{instance}}")], "ops")))

    # ------------------------------------------------------------------ checkpoints
    d = (d.with_row(dashboard.Row("Checkpoints"))
         .with_panel(series("Checkpoints and failures per hour",
                            "increase of streameval_checkpoints_total and "
                            "streameval_checkpoint_errors_total.",
                            [query(f'increase(streameval_checkpoints_total{{{SEL}}}[1h])',
                                   "written {{instance}}"),
                             query(f'increase(streameval_checkpoint_errors_total{{{SEL}}}[1h])',
                                   "failed {{instance}}")], "short", span=8))
         .with_panel(series("Events only in the write-ahead log",
                            "streameval_events_since_checkpoint: what a restart replays.",
                            [query(f'streameval_events_since_checkpoint{{{SEL}}}',
                                   "{{instance}}")], "short", span=8))
         .with_panel(series("Lost at start",
                            "streameval_lost_batches_total and streameval_lost_events_total: "
                            "acknowledged data missing at a start with accept_loss.",
                            [query(f'streameval_lost_batches_total{{{SEL}}}',
                                   "batches {{instance}}"),
                             query(f'streameval_lost_events_total{{{SEL}}}',
                                   "events {{instance}}")], "short", span=8)))

    # ------------------------------------------------------------------ quality
    d = (d.with_row(dashboard.Row("Quality by segment"))
         .with_panel(series("$metric",
                            "streameval_metric for the chosen metric, one line per segment "
                            "(no line while the value is undefined); repeated for each chosen "
                            "metric.",
                            [query(whole(f'streameval_metric{{{SEG}, metric=~"$metric"}}'),
                                   "{{segment}} {{window}}")], "none", span=24, min_val=None)
                     .repeat("metric").repeat_direction("h")
                     .max_per_row(2))
         .with_panel(series("Worst and best segment",
                            "instance_metric:streameval_metric:min_over_segments and "
                            "max_over_segments for the chosen metrics.",
                            [query(f'instance_metric:streameval_metric:min_over_segments'
                                   f'{{{SEL}, metric=~"$metric"}}', "min {{metric}}"),
                             query(f'instance_metric:streameval_metric:max_over_segments'
                                   f'{{{SEL}, metric=~"$metric"}}', "max {{metric}}")],
                            "none", span=24, min_val=None)))

    # ------------------------------------------------------------------ alerts
    d = (d.with_row(dashboard.Row("Alerts"))
         .with_panel(table.Panel().title("Active alerts").datasource(DS).span(12).height(8)
                     .description("streameval_alert_active: the service's rules that are "
                                  "pending or firing now, by rule and segment.")
                     .with_target(query(whole(f'streameval_alert_active{{{SEG}}} == 1'),
                                        instant=True))
                     .with_transformation(md.DataTransformerConfig(
                         id_val="organize",
                         options={"excludeByName": {"Time": True, "Value": True,
                                                    "__name__": True},
                                  "indexByName": {"rule": 0, "segment": 1, "state": 2}})))
         .with_panel(series("Alert transitions per hour",
                            "instance:streameval_alert_transitions:increase1h: more than 20 "
                            "an hour fires StreamevalAlertsFlapping.",
                            [query(f'instance:streameval_alert_transitions:increase1h{{{SEL}}}',
                                   "{{instance}}")], "short"))
         .with_panel(series("Firing and pending alerts",
                            "instance:streameval_alerts_firing:count and "
                            "instance:streameval_alerts_pending:count.",
                            [query(f'instance:streameval_alerts_firing:count{{{SEL}}}',
                                   "firing {{instance}}"),
                             query(f'instance:streameval_alerts_pending:count{{{SEL}}}',
                                   "pending {{instance}}")], "short", span=24)))
    built = d.build()
    for i, panel in enumerate(built.panels, 1):     # unique ids, rows included
        panel.id_val = i
    return built


def render() -> str:
    """The dashboard as the JSON text committed in ``dashboards/streameval.json``."""
    return JSONEncoder(sort_keys=True, indent=2).encode(build()) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
