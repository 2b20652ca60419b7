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
           steps=((None, "green"),), legend: str = "{{instance}}"):
    th = (dashboard.ThresholdsConfig().mode(md.ThresholdsMode.ABSOLUTE)
          .steps([md.Threshold(value=v, color=c) for v, c in steps]))
    return (stat.Panel().title(title).description(description).datasource(DS).unit(unit)
            .span(span).height(4).with_target(query(expr, legend=legend))
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


def sel(name: str, extra: str = "", *, segment: bool = False) -> str:
    """``name{<target selector>[, segment selector]<extra>}``: every query's selector."""
    return f"{name}{{{SEG if segment else SEL}{extra}}}"


def rate(name: str) -> str:
    """The per-second rate of the counter ``name`` over Grafana's rate interval."""
    return f"rate({sel(name)}[$__rate_interval])"


def row(d, title: str, *panels):
    """``d`` with a row titled ``title`` holding ``panels``, in order."""
    d = d.with_row(dashboard.Row(title))
    for p in panels:
        d = d.with_panel(p)
    return d


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
                                 f'label_values({sel("streameval_segment_events")}, segment)',
                                 multi=True))
         .with_variable(variable("metric", "Metric",
                                 f'label_values({sel("streameval_metric")}, metric)',
                                 multi=True)))

    d = row(
        d, "Health",
        single("Up", "Prometheus's last scrape of each target: 1 up, 0 down "
               "(alert StreamevalDown).",
               f'min({sel("up")})', "none", steps=((None, "red"), (1, "green"))),
        single("Since last scrape", "Wall clock since Prometheus's newest sample "
               "of up (no value once the target is stale, after 5 minutes).",
               f'time() - max(timestamp({sel("up")}))', "s"),
        single("Events counted", "Events acknowledged by the service "
               "(streameval_events_total).",
               f'sum({sel("streameval_events_total")})', "short"),
        single("Event-time lag", "Wall clock minus the newest event time "
               "(instance:streameval_event_time_lag_seconds); large for a replay "
               "of old logs.",
               f'max({sel("instance:streameval_event_time_lag_seconds")})', "s"),
        single("Firing alerts", "Rules of the service's monitor firing now "
               "(instance:streameval_alerts_firing:count).",
               f'sum({sel("instance:streameval_alerts_firing:count")})', "none",
               steps=((None, "green"), (1, "red"))),
        single("Pending alerts", "Rules of the service's monitor pending now "
               "(instance:streameval_alerts_pending:count).",
               f'sum({sel("instance:streameval_alerts_pending:count")})', "none",
               steps=((None, "green"), (1, "orange"))),
        single("Segments", "Segments with series of their own "
               "(instance:streameval_segments:count); at most max_segments.",
               f'sum({sel("instance:streameval_segments:count")})', "none"),
        single("Checkpoint age", "Wall clock since the last checkpoint "
               "(instance:streameval_checkpoint_age_seconds).",
               f'max({sel("instance:streameval_checkpoint_age_seconds")})', "s"),
        single("Write-ahead log", "streameval_wal_failed: 1 once a batch could not be made "
               "durable or applied; events are refused until a restart (alert "
               "StreamevalWALFailed).",
               f'max({sel("streameval_wal_failed")})', "none",
               steps=((None, "green"), (1, "red"))),
        single("Version", "streameval_info: streameval's version on each target.",
               f'max by (version) ({sel("streameval_info")})', "none", legend="{{version}}",
               span=3).text_mode(mc.BigValueTextMode.NAME),
        series("Scrape duration and ingest latency (p99)",
               "Prometheus's scrape_duration_seconds, and the 99th percentile of "
               "the time to validate, log and apply one request "
               "(instance:streameval_ingest_seconds:p99_rate5m).",
               [query(sel("scrape_duration_seconds"), "scrape {{instance}}"),
                query(sel("instance:streameval_ingest_seconds:p99_rate5m"),
                      "ingest p99 {{instance}}")], "s", span=18))

    d = row(
        d, "Ingestion",
        series("Events and batches per second",
               "instance:streameval_events:rate5m and instance:streameval_batches:rate5m.",
               [query(sel("instance:streameval_events:rate5m"), "events {{instance}}"),
                query(sel("instance:streameval_batches:rate5m"), "batches {{instance}}")],
               "ops"),
        series("Refusals by reason",
               "instance:streameval_refused:rate5m: refused requests by the service's "
               "reason (invalid, idempotency_conflict, too_large, timeout; requests/s), "
               "events dated past max_future and late events (events/s), predictions "
               "refused at max_pending (batches/s).",
               [query(sel("instance:streameval_refused:rate5m"),
                      "{{reason}} ({{unit}}/s) {{instance}}")], "ops"),
        series("Events per second by segment",
               "instance_segment:streameval_segment_events:rate5m: the volume "
               "each segment's metrics rest on.",
               [query(whole(sel("instance_segment:streameval_segment_events:rate5m",
                                segment=True)), "{{segment}}")], "ops"),
        series("Events under __other__ per second",
               "rate(streameval_other_segment_events_total): events of new "
               "segment values past max_segments (alert StreamevalSegmentCapReached).",
               [query(rate("streameval_other_segment_events_total"), "{{instance}}")], "ops"))

    d = row(
        d, "Label join",
        series("Join outcomes per second",
               "instance:streameval_label_join:rate5m by outcome: joined, expired "
               "unlabelled (label_ttl), orphan labels, duplicate prediction ids.",
               [query(sel("instance:streameval_label_join:rate5m"),
                      "{{outcome}} {{instance}}")], "ops"),
        series("Predictions waiting for a label",
               "streameval_predictions_pending against "
               "streameval_predictions_pending_max (429 past it).",
               [query(sel("streameval_predictions_pending"), "pending {{instance}}"),
                query(sel("streameval_predictions_pending_max"), "max_pending {{instance}}")],
               "short"),
        series("Expired and orphan shares (1h)",
               "instance:streameval_label_join_expired:ratio_rate1h and "
               "instance:streameval_label_join_orphans:ratio_rate1h.",
               [query(sel("instance:streameval_label_join_expired:ratio_rate1h"),
                      "expired {{instance}}"),
                query(sel("instance:streameval_label_join_orphans:ratio_rate1h"),
                      "orphans {{instance}}")],
               "percentunit", max_val=1))

    d = row(
        d, "Late and future events",
        series("Late events per second by segment",
               "instance_segment:streameval_late_events:rate5m: the most any "
               "window by period of the segment refused as late.",
               [query(whole(sel("instance_segment:streameval_late_events:rate5m",
                                segment=True)), "{{segment}}")], "ops"),
        series("Future events per second",
               "rate(streameval_future_events_total): events refused for a time "
               "past max_future.",
               [query(rate("streameval_future_events_total"), "{{instance}}")], "ops"))

    d = row(
        d, "Checkpoints",
        series("Checkpoints and failures per hour",
               "increase of streameval_checkpoints_total and "
               "streameval_checkpoint_errors_total.",
               [query(f'increase({sel("streameval_checkpoints_total")}[1h])',
                      "written {{instance}}"),
                query(f'increase({sel("streameval_checkpoint_errors_total")}[1h])',
                      "failed {{instance}}")], "short", span=8),
        series("Events only in the write-ahead log",
               "streameval_events_since_checkpoint: what a restart replays.",
               [query(sel("streameval_events_since_checkpoint"), "{{instance}}")],
               "short", span=8),
        series("Lost at start",
               "streameval_lost_batches_total and streameval_lost_events_total: "
               "acknowledged data missing at a start with accept_loss.",
               [query(sel("streameval_lost_batches_total"), "batches {{instance}}"),
                query(sel("streameval_lost_events_total"), "events {{instance}}")],
               "short", span=8))

    d = row(
        d, "Quality by segment",
        series("$metric",
               "streameval_metric for the chosen metric, one line per segment "
               "(no line while the value is undefined); repeated for each chosen metric.",
               [query(whole(sel("streameval_metric", ', metric=~"$metric"', segment=True)),
                      "{{segment}} {{window}}")], "none", span=24, min_val=None)
        .repeat("metric").repeat_direction("h").max_per_row(2),
        series("Worst and best segment",
               "instance_metric:streameval_metric:min_over_segments and "
               "max_over_segments for the chosen metrics.",
               [query(sel("instance_metric:streameval_metric:min_over_segments",
                          ', metric=~"$metric"'), "min {{metric}}"),
                query(sel("instance_metric:streameval_metric:max_over_segments",
                          ', metric=~"$metric"'), "max {{metric}}")],
               "none", span=24, min_val=None))

    d = row(
        d, "Alerts",
        table.Panel().title("Active alerts").datasource(DS).span(12).height(8)
        .description("streameval_alert_active: the service's rules that are pending or "
                     "firing now, by rule and segment, with the rule's severity.")
        .with_target(query(whole(f'{sel("streameval_alert_active", segment=True)} == 1'),
                           instant=True))
        .with_transformation(md.DataTransformerConfig(
            id_val="organize",
            options={"excludeByName": {"Time": True, "Value": True, "__name__": True},
                     "indexByName": {"rule": 0, "segment": 1, "state": 2, "severity": 3}})),
        series("Alert transitions per hour",
               "instance:streameval_alert_transitions:increase1h: more than 20 "
               "an hour fires StreamevalAlertsFlapping.",
               [query(sel("instance:streameval_alert_transitions:increase1h"),
                      "{{instance}}")], "short"),
        series("Firing and pending alerts",
               "instance:streameval_alerts_firing:count and "
               "instance:streameval_alerts_pending:count.",
               [query(sel("instance:streameval_alerts_firing:count"), "firing {{instance}}"),
                query(sel("instance:streameval_alerts_pending:count"), "pending {{instance}}")],
               "short", span=24))
    built = d.build()
    for i, panel in enumerate(built.panels, 1):     # unique ids, rows included
        panel.id_val = i
    return built


def render() -> str:
    """The dashboard as the JSON text committed in ``dashboards/streameval.json``."""
    return JSONEncoder(sort_keys=True, indent=2).encode(build()) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
