"""The monitoring mixin (``mixin/``): Prometheus rules and a Grafana dashboard.

* ``promtool check rules`` accepts both rule files and counts the rules they hold;
  ``promtool test rules`` passes the hand-computed cases of ``mixin/tests/``.
* Every series a rule or a dashboard query names is exported by a running service
  (one configured so that every conditional family appears: segments past
  ``max_segments``, delayed labels, a window by period with a late event, a firing
  rule, a refused future event) or recorded by the mixin's rules, and every label
  value a selector matches on occurs in that service's exposition. Expressions are
  parsed with a PromQL parser (``promql-parser``), not searched with a regex.
* The rules loaded into a real Prometheus scraping a real service evaluate without
  error, and their recorded series equal what the service's ``/snapshot`` says.
* The committed dashboard is the generator's output, on a current schema, with its
  variables, a data source on every query, panels inside the grid and not overlapping.
* Every alert has a severity, a summary, a description and a runbook section in the
  monitoring guide.

Skipped where promtool or Prometheus is missing, unless ``STREAMEVAL_REQUIRE_PROMETHEUS=1``
(CI), where that is a failure.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mixin"))
import runbooks  # noqa: E402  (mixin/runbooks.py)

ROOT = Path(__file__).resolve().parents[1]
MIXIN = ROOT / "mixin"
RULE_FILES = [MIXIN / "prometheus_rules.yaml", MIXIN / "prometheus_alerts.yaml"]
DASHBOARD = MIXIN / "dashboards" / "streameval.json"
GUIDE = ROOT / "docs" / "guides" / "monitoring.md"

PROMTOOL = shutil.which("promtool")
REQUIRED = os.environ.get("STREAMEVAL_REQUIRE_PROMETHEUS") == "1"

#: Series Prometheus itself writes for every target (not exported by the service).
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds"}
#: Labels a scrape configuration puts on every target's series.
TARGET_LABELS = {"job", "instance", "model"}


def need(binary, name):
    if binary:
        return
    if REQUIRED:
        pytest.fail(f"{name} is required (apt-get install prometheus)")
    pytest.skip(f"{name} is not installed (Debian package prometheus)")


def rules():
    """``[(group, rule)]`` of both rule files."""
    out = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            out += [(group["name"], r) for r in group["rules"]]
    return out


def recorded():
    return {r["record"] for _, r in rules() if "record" in r}


def alerts():
    return [r for _, r in rules() if "alert" in r]


def dashboard():
    return json.loads(DASHBOARD.read_text())


def dashboard_exprs():
    """Every PromQL expression of the dashboard: its queries and its variables'
    ``label_values(selector, label)`` selectors."""
    d = dashboard()
    out = [t["expr"] for p in d["panels"] for t in p.get("targets", ())]
    for v in d["templating"]["list"]:
        if v["type"] != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", q)
        assert m, q
        out.append(m[1])
    return out


def as_promql(expr):
    """A Grafana query as plain PromQL: the interval variable made a duration."""
    return expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")


def selectors(expr):
    """``[(name, [(label, op, value)])]`` of every vector selector of ``expr``."""
    import promql_parser

    found = []

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            ops = [(promql_parser.MatchOp.Equal, "="), (promql_parser.MatchOp.NotEqual, "!="),
                   (promql_parser.MatchOp.Re, "=~"), (promql_parser.MatchOp.NotRe, "!~")]
            ms = [(m.name, next(s for o, s in ops if m.op == o), m.value)
                  for m in node.matchers.matchers]
            found.append((node.name, ms))

    promql_parser.walk(promql_parser.parse(as_promql(expr)), pre_visit=visit)
    return found


# ---------------------------------------------------------------------- promtool


def test_promtool_checks_the_rule_files():
    need(PROMTOOL, "promtool")
    out = subprocess.run([PROMTOOL, "check", "rules", *map(str, RULE_FILES)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    counts = [int(n) for n in re.findall(r"SUCCESS: (\d+) rules found", out.stdout)]
    by_file = [sum(len(g["rules"]) for g in yaml.safe_load(p.read_text())["groups"])
               for p in RULE_FILES]
    assert counts == by_file and all(by_file)


def test_promtool_unit_tests_pass():
    need(PROMTOOL, "promtool")
    tests = sorted((MIXIN / "tests").glob("*.yaml"))
    assert tests
    out = subprocess.run([PROMTOOL, "test", "rules", *map(str, tests)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("SUCCESS") == len(tests)
    # every alert is exercised firing, and every recorded series checked, at least once
    fired, checked = set(), set()
    for path in tests:
        for case in yaml.safe_load(path.read_text())["tests"]:
            fired |= {a["alertname"] for a in case.get("alert_rule_test", ()) if a["exp_alerts"]}
            checked |= {e["exp_samples"][0]["labels"].split("{")[0]
                        for e in case.get("promql_expr_test", ()) if e["exp_samples"]}
    assert fired == {a["alert"] for a in alerts()}
    assert checked >= recorded()


# ---------------------------------------------------------------------- rules' shape


def test_every_alert_has_a_severity_and_a_runbook_section():
    guide = GUIDE.read_text()
    headings = {h.strip().lower() for h in re.findall(r"^#+ (.+)$", guide, re.M)}
    for a in alerts():
        assert a["labels"]["severity"] in {"critical", "warning"}, a["alert"]
        ann = a["annotations"]
        assert ann["summary"] and ann["description"], a["alert"]
        url = ann["runbook_url"]
        assert url == f"{runbooks.DEFAULT_PREFIX}{runbooks.GUIDE_PATH}#{a['alert'].lower()}"
        assert a["alert"].lower() in headings, f"no runbook section for {a['alert']}"
        # the guide's table of alerts states the rule's severity and "for" as written
        row = re.search(rf"^\| `{a['alert']}` \| (\w+) \| (\w+) \|", guide, re.M)
        assert row, f"{a['alert']} is not in the guide's table of alerts"
        assert row.groups() == (a["labels"]["severity"], a.get("for", "0")), a["alert"]


def test_runbook_links_follow_one_prefix(tmp_path):
    text = (MIXIN / "prometheus_alerts.yaml").read_text()
    prefix = "https://docs.example.org/ml/streameval/"
    out = runbooks.with_prefix(text, prefix)
    # only the links changed, every one of them, to the same section under the prefix
    before, after = text.splitlines(), out.splitlines()
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(before) == len(after) and len(changed) == len(alerts())
    for a, b in changed:
        assert a.strip().startswith("runbook_url: " + runbooks.DEFAULT_PREFIX)
        assert b == a.replace(runbooks.DEFAULT_PREFIX, prefix)
    got = [r for g in yaml.safe_load(out)["groups"] for r in g["rules"] if "alert" in r]
    assert [r["annotations"]["runbook_url"] for r in got] == [
        f"{prefix}guides/monitoring/#{r['alert'].lower()}" for r in got]
    for bad in ("docs.example.org/", "https://docs.example.org", "ftp://x/"):
        with pytest.raises(ValueError, match="must be an http"):
            runbooks.with_prefix(text, bad)
    with pytest.raises(ValueError, match="does not start with"):
        runbooks.with_prefix("      runbook_url: https://elsewhere/x\n", prefix)
    # the script writes the same
    proc = subprocess.run([sys.executable, str(MIXIN / "runbooks.py"), prefix],
                          capture_output=True, text=True, check=True)
    assert proc.stdout == out
    if PROMTOOL:
        (tmp_path / "alerts.yaml").write_text(out)
        subprocess.run([PROMTOOL, "check", "rules", str(tmp_path / "alerts.yaml")], check=True,
                       capture_output=True)


def test_the_guides_prometheus_configuration_loads_the_rules(tmp_path):
    """The guide's prometheus.yml, beside a copy of the rule files as the guide says,
    is valid and finds both rule files."""
    need(PROMTOOL, "promtool")
    text = GUIDE.read_text()
    (body,) = [b for b in re.findall(r"```yaml\n(.*?)\n```", text, re.S)
               if "scrape_configs" in b]
    (tmp_path / "streameval").mkdir()
    for path in RULE_FILES:
        shutil.copy(path, tmp_path / "streameval" / path.name)
    (tmp_path / "prometheus.yml").write_text(body)
    out = subprocess.run([PROMTOOL, "check", "config", str(tmp_path / "prometheus.yml")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 2 rule files found" in out.stdout


def test_recording_rule_names_follow_the_convention():
    for name in recorded():
        level, metric, *ops = name.split(":")
        assert level.startswith("instance") and metric.startswith("streameval_"), name


# ---------------------------------------------------------------------- the dashboard


def test_dashboard_is_the_generators_output():
    pytest.importorskip("grafana_foundation_sdk",
                        reason="the test extra (grafana-foundation-sdk) generates it")
    out = subprocess.run([sys.executable, str(MIXIN / "dashboard.py")], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout == DASHBOARD.read_text(), (
        "mixin/dashboards/streameval.json is stale: "
        "python mixin/dashboard.py > mixin/dashboards/streameval.json")


def test_dashboard_shape():
    d = dashboard()
    assert d["schemaVersion"] >= 39 and d["uid"] == "streameval-mixin"
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert list(variables) == ["datasource", "job", "model", "instance", "segment", "metric"]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("job", "model", "instance", "segment", "metric"):
        v = variables[name]
        assert v["includeAll"] and v["allValue"] == ".*" and v["multi"], name
        assert v["datasource"]["uid"] == "${datasource}", name
    rows = [p["title"] for p in d["panels"] if p["type"] == "row"]
    assert rows == ["Health", "Ingestion", "Label join", "Late and future events",
                    "Checkpoints", "Quality by segment", "Alerts"]
    ids = [p["id"] for p in d["panels"]]
    assert len(set(ids)) == len(ids)
    cells = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, (p["title"], g)
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert not area & cells, f"{p['title']} overlaps another panel"
        cells |= area
        if p["type"] == "row":
            continue
        assert p["description"], p["title"]
        assert p["datasource"]["uid"] == "${datasource}"
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}"
            assert 'job=~"$job"' in t["expr"] and 'instance=~"$instance"' in t["expr"], t["expr"]
    (repeated,) = [p for p in d["panels"] if p.get("repeat")]
    assert repeated["repeat"] == "metric" and 'metric=~"$metric"' in repeated["targets"][0]["expr"]


# ---------------------------------------------------------------------- a running service


def _post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


T0 = 1_700_000_000
SERVICE_CONFIG = {
    "monitor": {
        "group_by": "country", "max_segments": 2, "every": 10,
        "metrics": {"auc": "roc_auc", "recall": "recall",
                    "auc@1h": {"metric": "roc_auc", "period": 3600}},
        "rules": [{"rule": "recall < 0.99"},
                  {"rule": "recall < 0.98", "severity": "critical"},
                  {"rule": "auc < 0.99", "for": 1000}],     # pending for 1000 evaluations
    },
    "input": {"label_ttl": 100},
}


def _feed(url):
    """Predictions, their labels (some expire, some are orphans), a late event, and an
    event dated in the future (refused): every family of the exposition appears."""
    preds = [{"id": str(i), "ts": T0 + i, "score": (i % 10) / 10,
              "country": ("fr", "br", "de")[i % 3]} for i in range(300)]
    assert _post(url, "/predictions", preds) == 200
    labels = [{"id": str(i), "ts": T0 + i + 5, "label": i % 4 == 0} for i in range(250)]
    assert _post(url, "/labels", labels) == 200
    assert _post(url, "/events", [{"ts": T0 + 10_000, "label": 1, "score": 0.3,
                                   "country": "br"}]) == 200
    assert _post(url, "/events", [{"ts": T0, "label": 1, "score": 0.3,
                                   "country": "br"}]) == 200          # late for auc@1h
    assert _post(url, "/events", [{"ts": time.time() + 1e7, "label": 1, "score": 0.3,
                                   "country": "br"}]) == 400          # in the future


@pytest.fixture
def service():
    pytest.importorskip("starlette")
    from streameval.service import BackgroundServer

    with BackgroundServer(SERVICE_CONFIG) as srv:
        _feed(srv.url)
        yield srv


def _exposition(url):
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    labels = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            seen = labels.setdefault(s.name, {})
            for k, v in s.labels.items():
                seen.setdefault(k, set()).add(v)
    return labels


def _check_selector(name, matchers, exported, where):
    if name in PROMETHEUS_SERIES:
        return
    if name in recorded():
        return
    assert name in exported, f"{where}: {name} is not exported by the service"
    labels = exported[name]
    for label, op, value in matchers:
        if label in TARGET_LABELS or label == "__name__":
            continue
        # the whole stream's segment is "" (which Prometheus drops): a label the
        # service writes with that value on some series
        assert label in labels, f"{where}: {name} has no label {label!r}"
        if op == "=" and value:
            assert value in labels[label], f"{where}: {name}{{{label}={value!r}}} never occurs"
        if op == "=~" and re.fullmatch(r"[\w|]+", value):
            for alt in value.split("|"):
                assert alt in labels[label], f"{where}: {name}{{{label}={alt!r}}} never occurs"


@pytest.mark.filterwarnings("ignore:max_segments")
def test_every_series_named_is_exported(service):
    pytest.importorskip("promql_parser", reason="the test extra (promql-parser)")
    exported = _exposition(service.url)
    named = set()
    for where, exprs in [("rules", [r["expr"] for _, r in rules()]),
                         ("dashboard", dashboard_exprs())]:
        for expr in exprs:
            for name, matchers in selectors(expr):
                assert name, f"{where}: a selector without a metric name in {expr!r}"
                _check_selector(name, matchers, exported, where)
                named.add(name)
    # the recorded series the dashboard and the alerts use are all recorded
    assert {n for n in named if ":" in n} == recorded()
    # and the check is not vacuous: it has seen the families it is meant to cover
    assert {"streameval_metric", "streameval_alert_active", "streameval_label_join_total",
            "streameval_late_events_total", "streameval_ingest_seconds_bucket",
            "streameval_checkpoint_errors_total", "streameval_rejected_requests_total",
            "streameval_wal_failed", "streameval_info", "up"} <= named
    # the labels the rules select on are the service's: reasons and severities
    assert {"invalid", "idempotency_conflict", "too_large", "timeout"} <= \
        exported["streameval_rejected_requests_total"]["reason"]
    assert "warning" in exported["streameval_alert_active"]["severity"]
    assert exported["streameval_wal_failed"] == {}
    assert set(exported["streameval_info"]) == {"model", "version"}


def test_selector_check_refuses_an_unknown_name_or_label_value():
    exported = {"streameval_label_join_total": {"outcome": {"joined", "expired"}}}
    (sel,) = selectors('rate(streameval_label_join_total{outcome="joinde"}[5m])')
    with pytest.raises(AssertionError, match="never occurs"):
        _check_selector(*sel, exported, "test")
    (sel,) = selectors('streameval_label_join_total{outcome=~"joined|orphans"}')
    with pytest.raises(AssertionError, match="'orphans'. never occurs"):
        _check_selector(*sel, exported, "test")
    (sel,) = selectors('streameval_label_join_total{result="joined"}')
    with pytest.raises(AssertionError, match="no label 'result'"):
        _check_selector(*sel, exported, "test")
    (sel,) = selectors('streameval_label_join_total{outcome=~"joined|expired"}')
    _check_selector(*sel, exported, "test")
    (sel,) = selectors("streameval_no_such_series")
    with pytest.raises(AssertionError, match="not exported"):
        _check_selector(*sel, exported, "test")


# ---------------------------------------------------------------------- a real Prometheus


def _get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _wait_for(fn, timeout=60.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except (OSError, ValueError, KeyError, IndexError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(0.25)
    raise AssertionError(f"timed out; last: {last!r}")


def _promql(prom, query):
    data = _get_json(prom + "/api/v1/query?" + urllib.parse.urlencode({"query": query}))
    assert data["status"] == "success", data
    return data["data"]["result"]


@pytest.mark.filterwarnings("ignore:max_segments")
def test_rules_in_prometheus_equal_the_services_own_figures(service, prometheus):
    target = service.url.split("://", 1)[1]
    url = prometheus(f"""\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {RULE_FILES[0]}
  - {RULE_FILES[1]}
scrape_configs:
  - job_name: streameval
    static_configs:
      - targets: ["{target}"]
        labels: {{model: fraud-v3}}
""")
    snap = _get_json(service.url + "/snapshot")
    segments = [s for s in snap["segments"] if s["segment"] is not None]
    # recorded series equal the service's own figures, to the bit
    count = _wait_for(lambda: _promql(url, "instance:streameval_segments:count"))
    assert float(count[0]["value"][1]) == len(segments) == 3       # fr, br, __other__
    assert count[0]["metric"] == {"__name__": "instance:streameval_segments:count",
                                  "job": "streameval", "instance": target,
                                  "model": "fraud-v3"}
    low = _promql(url, 'instance_metric:streameval_metric:min_over_segments{metric="auc"}')
    aucs = [s["values"]["auc"] for s in segments if s["values"]["auc"] is not None]
    assert float(low[0]["value"][1]) == min(aucs)
    high = _promql(url, 'instance_metric:streameval_metric:max_over_segments{metric="auc"}')
    assert float(high[0]["value"][1]) == max(aucs)
    firing = _promql(url, "instance:streameval_alerts_firing:count")
    assert float(firing[0]["value"][1]) == sum(a["state"] == "firing"
                                               for a in snap["alerts"]) == 8
    join = snap["service"]["join"]
    ratio = _promql(url, "instance:streameval_predictions_pending:ratio")
    assert float(ratio[0]["value"][1]) == join["pending"] / join["max_pending"]
    # the mixin's own alert on the service's firing rules, one per segment
    def prom_alerts():
        got = _get_json(url + "/api/v1/alerts")["data"]["alerts"]
        return [a for a in got if a["labels"]["alertname"] == "StreamevalModelAlertFiring"
                and a["state"] == "firing"]
    fired = _wait_for(lambda: len(prom_alerts()) == 4 and prom_alerts())
    # the critical rule's alerts page through their own alert, by the severity label
    def critical():
        got = _get_json(url + "/api/v1/alerts")["data"]["alerts"]
        return [a for a in got if a["labels"]["alertname"] == "StreamevalModelAlertCritical"
                and a["state"] == "firing"]
    paged = _wait_for(lambda: len(critical()) == 4 and critical())
    assert {a["labels"]["rule"] for a in paged} == {"recall < 0.98"}
    assert {a["labels"]["severity"] for a in paged} == {"critical"}
    # the first two segments the joined events meet (labels join in id order: ids 0
    # and 1) are kept, the third counts under __other__ (max_segments = 2)
    kept = list(dict.fromkeys(("fr", "br", "de")[i % 3] for i in range(250)))[:2]
    assert {a["labels"].get("segment", "") for a in fired} == {"", *kept, "__other__"}
    assert {a["annotations"]["summary"] for a in fired} >= {
        'streameval rule "recall < 0.99" fires',
        'streameval rule "recall < 0.99" fires for segment br'}
    # every rule evaluated without error on the real series
    def evaluated():
        groups = _get_json(url + "/api/v1/rules")["data"]["groups"]
        rs = [r for g in groups for r in g["rules"]]
        return len(rs) == len(rules()) and all(r.get("lastEvaluation", "").startswith("2")
                                               and not r["lastEvaluation"].startswith("0001")
                                               for r in rs) and rs
    for r in _wait_for(evaluated):
        assert r["health"] == "ok", (r["name"], r.get("lastError"))
    refused = _wait_for(lambda: len(r := _promql(url, "instance:streameval_refused:rate5m"))
                        == 7 and r)
    assert {x["metric"]["reason"] for x in refused} == {
        "invalid", "idempotency_conflict", "too_large", "timeout", "future", "late",
        "pending_full"}
    assert all(not math.isnan(float(x["value"][1])) for x in refused)
    # every dashboard query, its variables at "All", runs in Prometheus and has data
    for p in dashboard()["panels"]:
        for t in p.get("targets", ()):
            q = re.sub(r"\$(job|model|instance|segment|metric)\b", ".*", as_promql(t["expr"]))
            assert _promql(url, q), f"{p['title']}: no data for {q}"


def test_refusals_are_counted_by_reason_and_alerts_carry_severity():
    """Hand-counted: 2 invalid bodies, 1 reused Idempotency-Key, 1 body over max_body;
    the rules' severities on streameval_alert_active; streameval_wal_failed 0 and
    streameval_info with the configured model and the package's version."""
    pytest.importorskip("starlette")
    import streameval
    from streameval.service import BackgroundServer

    config = {"monitor": {"every": 10, "metrics": {"recall": "recall"},
                          "rules": [{"rule": "recall < 0.9", "severity": "critical"},
                                    {"rule": "recall < 0.95"}]},
              "serve": {"model": "fraud-v3"}}
    ok = [{"ts": 1_700_000_000 + i, "label": 1, "score": 0.1} for i in range(20)]

    def post(url, body, headers=None):
        req = urllib.request.Request(url + "/events", data=body, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    with BackgroundServer(config, max_body=4000) as srv:
        assert post(srv.url, json.dumps(ok).encode(), {"Idempotency-Key": "k1"}) == 200
        assert post(srv.url, b"[1]") == 400
        assert post(srv.url, b'[{"ts": 1, "label": 3, "score": 0.5}]') == 400
        assert post(srv.url, json.dumps(ok[:1]).encode(), {"Idempotency-Key": "k1"}) == 422
        assert post(srv.url, json.dumps(ok * 10).encode()) == 413
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(srv.url + "/metrics", timeout=10) as r:
            fams = {f.name: f for f in text_string_to_metric_families(r.read().decode())}
    by_reason = {s.labels["reason"]: s.value for s in fams["streameval_rejected_requests"].samples}
    assert by_reason == {"invalid": 2, "idempotency_conflict": 1, "too_large": 1, "timeout": 0}
    active = {(s.labels["rule"], s.labels["severity"]) for s in fams["streameval_alert_active"].samples}
    assert active == {("recall < 0.9", "critical"), ("recall < 0.95", "warning")}
    assert [s.value for s in fams["streameval_wal_failed"].samples] == [0.0]
    (info,) = fams["streameval_info"].samples
    assert info.labels == {"model": "fraud-v3", "version": streameval.__version__}
    assert info.value == 1.0
