"""The report and the live page in a real browser: Debian's chromium, headless, driven by
selenium through chromedriver.

What is checked is what a person would see: the page draws every metric's plot and the
alert lanes, with no request to the network (the report opens offline) and no script
error; zooming one timeline zooms the others; the live page of a real ``streameval
serve`` (a subprocess, over a socket) shows the metrics and then the alert that events
posted over HTTP trigger, after asking for the service's token in the page. Screenshots are kept
under ``$STREAMEVAL_ARTIFACTS`` when set (else the test's ``tmp_path``); each test
prints where.

Without chromium and chromedriver (``apt-get install chromium chromium-driver``) or
selenium the tests are skipped, saying so; with ``STREAMEVAL_REQUIRE_BROWSER=1`` (as
``.ci/run`` sets) they fail instead.
"""

import json
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from streameval.replay import replay

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
REQUIRED = os.environ.get("STREAMEVAL_REQUIRE_BROWSER") == "1"


def _missing():
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install 'streameval[test]')"
    if not CHROMIUM or not CHROMEDRIVER:
        return "chromium or chromedriver is not on the PATH (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def browser():
    why = _missing()
    if why:
        if REQUIRED:
            pytest.fail(f"STREAMEVAL_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,2400", "--disable-extensions", "--no-first-run"):
        opts.add_argument(arg)
    opts.binary_location = CHROMIUM
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


@pytest.fixture
def artifacts(tmp_path, request):
    root = os.environ.get("STREAMEVAL_ARTIFACTS")
    out = Path(root) / "browser" if root else tmp_path / "artifacts"
    out.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of {request.node.name}: {out}")
    return out


def wait(cond, timeout=60.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def severe_logs(driver):
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def rendered(driver):
    return driver.execute_script("return document.body.getAttribute('data-rendered')")


def plots(driver, selector):
    """For each plot matching ``selector``: its traces' names and point counts."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(function (d) {"
        "  return {id: d.id, metric: d.getAttribute('data-metric'),"
        "          traces: (d.data || []).map(function (t) {"
        "            return {name: t.name, n: (t.x || []).filter(function (v) { return v !== null; }).length,"
        "                    visible: t.visible === undefined ? true : t.visible}; }),"
        "          svg: d.querySelectorAll('.main-svg').length,"
        "          ticks: Array.from(d.querySelectorAll('.ytick text')).map(function (e) { return e.textContent; })};"
        "});", selector)


# ----------------------------------------------------------------------- the report


def _log(tmp_path, n=6000):
    """A log whose recall falls by half in segment br from its middle on."""
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, n)
    seg = np.where(rng.uniform(size=n) < 0.3, "br", "fr")
    s = np.clip(0.45 * y + rng.uniform(0, 0.55, n), 0, 1)
    broken = (seg == "br") & (np.arange(n) > n // 2) & (y == 1) & (rng.uniform(size=n) < 0.6)
    s[broken] = rng.uniform(0, 0.4, broken.sum())
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps({"ts": 1_709_000_000 + 10 * i, "label": int(y[i]),
                                        "score": round(float(s[i]), 4), "country": str(seg[i])})
                            + "\n" for i in range(n)))
    config = {"monitor": {"every": 200, "group_by": "country",
                          "metrics": {"roc_auc": "roc_auc", "recall": "recall",
                                      "recall@600": {"metric": "recall", "size": 600}},
                          "rules": ["recall@600 < 0.6"]}}
    return path, config


def test_report_opens_offline_and_shows_metrics_and_alert_lanes(browser, tmp_path, artifacts):
    log, config = _log(tmp_path)
    summary = replay(str(log), tmp_path / "out", config=config, progress=False)
    assert summary["alerts_fired"] >= 1
    page = tmp_path / "out" / "report.html"
    # no network at all: every http(s) and websocket URL blocked in the browser
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs",
                            {"urls": ["http://*", "https://*", "ws://*", "wss://*"]})
    try:
        browser.get(page.as_uri())
        wait(lambda: rendered(browser), what="the report to draw")
        resources = browser.execute_script(
            "return performance.getEntriesByType('resource').map(function (e) { return e.name; })")
        assert resources == []  # nothing fetched: plotly.js and the data are inline
        assert severe_logs(browser) == []
        metric_plots = plots(browser, ".se-metric")
        assert [p["metric"] for p in metric_plots] == ["roc_auc", "recall", "recall@600"]
        for p in metric_plots:
            assert p["svg"] >= 1
            names = {t["name"] for t in p["traces"]}
            assert {"all events", "segment br", "segment fr"} <= names
            # a row per 200 events of the stream, and of each segment (br: about 1 800)
            assert all(t["n"] > 8 for t in p["traces"]
                       if t["name"] in ("all events", "segment br", "segment fr"))
            # the alert's transitions (its value) only on the plot of its metric
            assert ("alert transitions" in names) == (p["metric"] == "recall@600")
        (lanes,) = plots(browser, "#se-lanes")
        assert any(t.startswith("recall@600 < 0.6 · segment br") for t in lanes["ticks"])
        firing = next(t for t in lanes["traces"] if t["name"] == "firing")
        assert firing["n"] >= 2
        # the segment that broke comes first in the table
        first = browser.execute_script(
            "return document.querySelector('.se-segment-table tr:nth-child(2) td').textContent")
        assert first == "segment br"
        browser.save_screenshot(str(artifacts / "report.png"))
        # zooming one timeline (an event-time axis) zooms the others, the lanes included
        browser.execute_script(
            "Plotly.relayout(document.querySelector('.se-metric'),"
            " {'xaxis.range': ['2024-02-27 08:00', '2024-02-27 12:00']})")
        wait(lambda: browser.execute_script(
            "var r = document.getElementById('se-lanes').layout.xaxis.range;"
            "return r && r[0] == '2024-02-27 08:00' && r[1] == '2024-02-27 12:00';"),
            timeout=20, what="zoom to sync")
        # the rows' intervals are bands: recall's (Wilson) has one per segment
        recall = next(p for p in metric_plots if p["metric"] == "recall")
        assert {"all events interval", "segment br interval"} <= {t["name"] for t in recall["traces"]}
        # ROC, PR, confusion, score distribution and reliability plots are drawn
        for div in ("se-roc", "se-pr", "se-confusion", "se-hist", "se-calibration"):
            assert browser.execute_script(
                f"return document.getElementById('{div}').querySelectorAll('.main-svg').length") >= 1
        # at the end of the stream, then at the earliest time the slider offers: the
        # ROC curve's AUC is scikit-learn's over the events up to then
        from sklearn.metrics import roc_auc_score

        events = [json.loads(line) for line in log.read_text().splitlines()]
        y = np.array([e["label"] for e in events])
        s = np.array([e["score"] for e in events])

        def roc_title():
            return browser.execute_script(
                "return document.getElementById('se-roc').layout.title.text")

        assert roc_title() == f"ROC (AUC {float(f'{roc_auc_score(y, s):.6g}')})"
        assert browser.execute_script("return document.getElementById('se-curve-time').max") >= "2"
        browser.execute_script(
            "var r = document.getElementById('se-curve-time'); r.value = '0';"
            "r.dispatchEvent(new Event('input'));")
        label = wait(lambda: "at event" in browser.find_element(
            "id", "se-curve-label").text and browser.find_element("id", "se-curve-label").text,
            what="the slider's time")
        k = int(re.search(r"at event (\d+)", label).group(1))
        assert 0 < k < len(y)
        assert roc_title() == f"ROC (AUC {float(f'{roc_auc_score(y[:k], s[:k]):.6g}')})"
        browser.save_screenshot(str(artifacts / "report-curves-earlier.png"))
        assert (artifacts / "report.png").stat().st_size > 10_000
    finally:
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})


def test_long_timelines_are_drawn_with_their_bands(browser, tmp_path, artifacts):
    """A timeline of thousands of points (a long stream, downsampled) is drawn, its line
    and its interval band, in a browser without a GPU (WebGL plots come out empty)."""
    from streameval.report import write_report

    rng = np.random.default_rng(9)
    y = 0.8 + np.cumsum(rng.normal(0, 0.002, 3000))
    rows = [{"n": 1000 * (i + 1), "t": 1_709_000_000 + 50 * i, "segment": None,
             "values": {"recall": float(y[i])},
             "intervals": {"recall": [float(y[i]) - 0.02, float(y[i]) + 0.02]}}
            for i in range(3000)]
    page = write_report(rows, [], tmp_path)
    browser.get(page.as_uri())
    wait(lambda: rendered(browser), what="the report to draw")
    assert severe_logs(browser) == []
    drawn = browser.execute_script(
        "var d = document.getElementById('se-metric-0');"
        "return {lines: Array.from(d.querySelectorAll('.scatterlayer .js-line'))"
        "          .map(function (p) { return (p.getAttribute('d') || '').length; }),"
        "        fills: d.querySelectorAll('.scatterlayer .js-fill').length,"
        "        gl: d.querySelectorAll('canvas.gl-canvas').length,"
        "        points: d.data.map(function (t) { return t.x.length; })};")
    assert drawn["points"] == [3000, 3000, 3000]  # band top, band bottom, the line
    assert max(drawn["lines"]) > 10_000  # an SVG path through the points
    assert drawn["fills"] >= 1
    browser.save_screenshot(str(artifacts / "long-timeline.png"))


def test_many_segments_table_shows_the_most_troubled_then_all_on_demand(browser, tmp_path):
    """With more segments than the table's first rows (100), the page lists the most
    troubled 100 and a button that lists them all. Oracle: the segments written, and
    the trouble order (the one segment with an alert first)."""
    from streameval.report import write_report

    rows = [{"n": 10 * k, "t": None, "segment": f"s{i:03d}", "values": {"auc": 0.5 + i / 1000}}
            for k in (1, 2) for i in range(130)]
    rows += [{"n": 2600, "t": None, "segment": None, "values": {"auc": 0.6}}]
    alerts = [{"rule": "auc < 0.6", "state": "firing", "n": 20, "t": None, "value": 0.55,
               "segment": "s042"}]
    write_report(rows, alerts, tmp_path, title="many")
    browser.get((tmp_path / "report.html").as_uri())
    wait(lambda: rendered(browser), what="the report to draw")
    assert severe_logs(browser) == []

    def listed():
        return browser.execute_script(
            "return Array.from(document.querySelectorAll('.se-segment-table tr td:first-child'))"
            ".map(function (e) { return e.textContent; })")

    first = listed()
    assert len(first) == 100 and first[0] == "segment s042"
    browser.find_element("id", "se-all-segments").click()
    everything = wait(lambda: len(listed()) > 100 and listed(), what="every segment listed")
    assert sorted(everything) == sorted(["all events"] + [f"segment s{i:03d}" for i in range(130)])


# ----------------------------------------------------------------------- the live page


def serve_config(tmp_path, token):
    """``--config`` and ``--token-file`` arguments of the live page's service."""
    config = tmp_path / "monitor.toml"
    config.write_text('[monitor]\nevery = 50\ngroup_by = "country"\nrules = ["recall < 0.5"]\n'
                      '[monitor.metrics]\nauc = "roc_auc"\nrecall = "recall"\n')
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    return ["--config", config, "--state-dir", tmp_path / "state", "--token-file", token_file]


def post(url, events, token):
    req = urllib.request.Request(url + "/events", data=json.dumps(events).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def test_live_page_shows_metrics_then_an_alert_posted_over_http(browser, tmp_path, artifacts,
                                                                serve_process):
    from selenium.webdriver.common.by import By

    token = "s3cret-token-of-32-bytes-at-least"
    sp = serve_process(*serve_config(tmp_path, token), module=("streameval.service",))
    url = sp.url
    assert url.startswith("http://127.0.0.1:")
    try:
        # the data is guarded like /snapshot; the page itself holds none
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url + "/ui/data", timeout=30)
        assert e.value.code == 401
        # healthy traffic first: recall about 0.8 in both segments
        rng = np.random.default_rng(0)
        events = []
        for i in range(400):
            y = int(rng.integers(0, 2))
            s = float(np.clip(0.5 * y + rng.uniform(0, 0.6), 0, 1))
            events.append({"ts": 1_709_000_000 + i, "label": y, "score": round(s, 3),
                           "country": "fr" if i % 3 else "br"})
        assert post(url, events, token)["accepted"] == 400

        browser.get(url + "/")  # redirects to /ui
        assert browser.current_url.endswith("/ui")
        # the page asks for the token (a wrong one is refused and asked again)
        for given in ("wrong", token):
            field = wait(lambda: browser.find_elements(By.ID, "se-token"), what="the token field")[0]
            field.send_keys(given)
            browser.find_element(By.ID, "se-token-go").click()
            if given == "wrong":
                wait(lambda: "was refused" in browser.find_element(By.ID, "se-root").text,
                     what="the wrong token refused")
        wait(lambda: rendered(browser) and plots(browser, ".se-metric"), what="the live page to draw")
        assert [p["metric"] for p in plots(browser, ".se-metric")] == ["auc", "recall"]
        names = {t["name"] for t in plots(browser, ".se-metric")[0]["traces"]}
        assert {"all events", "segment fr", "segment br"} <= names
        assert browser.execute_script("return document.getElementById('se-lanes').textContent") \
            == "No alert fired."
        browser.save_screenshot(str(artifacts / "live-before.png"))

        # then segment br's positives all score low: recall < 0.5 fires for br
        broken = [{"ts": 1_709_000_400 + i, "label": 1, "score": 0.05, "country": "br"}
                  for i in range(300)]
        assert post(url, broken, token)["accepted"] == 300

        def alert_shown():
            lanes = plots(browser, "#se-lanes")
            return lanes and any(t.startswith("recall < 0.5 · segment br") for t in lanes[0]["ticks"])

        wait(alert_shown, timeout=60, what="the alert lane on the live page")
        table = browser.execute_script(
            "return document.querySelector('.se-alert-table').textContent")
        assert "recall < 0.5" in table and "firing" in table
        first = browser.execute_script(
            "return document.querySelector('.se-segment-table tr:nth-child(2) td').textContent")
        assert first == "segment br"
        # more events of the same shape: the page is redrawn in place (the same plot
        # elements, the zoom kept), with the new counts
        browser.execute_script("document.getElementById('se-metric-0').seMark = 1;"
                               "Plotly.relayout('se-metric-0', {'xaxis.range': ["
                               "new Date(1709000100000), new Date(1709000600000)]});")
        more = [{"ts": 1_709_000_700 + i, "label": 0, "score": 0.2, "country": "fr"}
                for i in range(100)]
        assert post(url, more, token)["accepted"] == 100
        wait(lambda: "800" in browser.execute_script(
            "var t = document.querySelector('.se-summary'); return t ? t.textContent : '';"),
            what="the new event count")
        assert browser.execute_script("return document.getElementById('se-metric-0').seMark") == 1
        zoom = browser.execute_script(
            "return JSON.stringify(document.getElementById('se-metric-0').layout.xaxis.range)")
        assert re.search(r"2024-02-27[ T]02:15:00", zoom), zoom  # 1 709 000 100 s: kept
        # the only errors: the 401s that asked for the token (no script error)
        assert [m for m in severe_logs(browser) if "status of 401" not in m] == []
        browser.save_screenshot(str(artifacts / "live-alert.png"))
        assert (artifacts / "live-alert.png").stat().st_size > 10_000
    finally:
        sp.stop()


# ------------------------------------------------- the live page's routes, no browser


def test_live_routes_guarded_and_data_equal_to_the_monitor(tmp_path):
    """Without a browser: ``GET /`` redirects to ``/ui``; the page holds no data and
    needs no token; ``/ui/data`` needs it, and its final values equal ``/snapshot``'s and
    its ROC curve's AUC and confusion matrix equal scikit-learn's on the events posted."""
    pytest.importorskip("starlette")
    from sklearn.metrics import confusion_matrix, roc_auc_score

    from streameval.service import BackgroundServer, load_config

    token = "t0ken-of-sixteen-bytes"
    config = {"monitor": {"every": 50, "group_by": "country",
                          "metrics": {"auc": "roc_auc", "recall": "recall"},
                          "rules": ["recall < 0.5"]}}
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 400)
    s = np.clip(0.4 * y + rng.uniform(0, 0.6, 400), 0, 1).round(3)
    events = [{"ts": 1_709_000_000 + i, "label": int(y[i]), "score": float(s[i]),
               "country": "fr" if i % 4 else "br"} for i in range(400)]
    auth = {"Authorization": f"Bearer {token}"}
    direct, rows = load_config(config)[0], []  # the monitor as the service builds it
    direct.on_metrics.append(rows.append)
    direct.update_many(y.astype(bool), s, t=[e["ts"] for e in events],
                       segment=[e["country"] for e in events])
    with BackgroundServer(config, token=token) as srv:
        assert post(srv.url, events, token)["accepted"] == 400
        req = urllib.request.Request(srv.url + "/", method="GET")
        opener = urllib.request.build_opener(NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as e:
            opener.open(req, timeout=30)
        assert e.value.code == 302 and e.value.headers["location"] == "ui"
        with urllib.request.urlopen(srv.url + "/ui", timeout=30) as r:
            page = r.read().decode()
            assert r.headers["content-type"].startswith("text/html")
        assert '<script type="application/json" id="se-data">null</script>' in page
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(srv.url + "/ui/data", timeout=30)
        assert e.value.code == 401
        get = urllib.request.Request(srv.url + "/ui/data", headers=auth)
        data = json.loads(urllib.request.urlopen(get, timeout=30).read())
        snap = json.loads(urllib.request.urlopen(
            urllib.request.Request(srv.url + "/snapshot", headers=auth), timeout=30).read())
    by_segment = {e["segment"]: e["values"] for e in snap["segments"]}
    for seg in data["segments"]:
        assert seg["values"] == by_segment[seg["segment"]], seg["label"]
    assert data["summary"]["events"] == 400 and data["downsample"]["rows"] == len(rows)
    assert len(rows) >= 8 * 2  # every 50 events of the stream and of each segment
    end = next(c for c in data["curves"] if c["segment"] is None)
    assert end["auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    tn, fp, fn, tp = confusion_matrix(y, s >= 0.5).ravel()
    c = end["confusion"]
    assert (c["tp"], c["fp"], c["fn"], c["tn"]) == (tp, fp, fn, tn)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None
