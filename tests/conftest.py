"""Test-suite settings shared by every module."""

import os

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed sequence of examples: a red CI then always
# reproduces, and a green one is not luck. Locally, hypothesis explores new examples
# on every run (and keeps failing ones in .hypothesis/).
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(params=["flat", "levels"])
def layout(request, monkeypatch):
    """Run a test in each bulk layout of ``ScoreOrder``: "flat" (the defaults: small
    orders are flat arrays) and "levels" (every bulk order in numpy levels, whatever
    its size, no batch "tiny" enough to move it back to blocks, and small sides never
    merged early, so that tests of a few dozen events
    go through several sides, tombstones, tails and their merges)."""
    if request.param == "levels":
        from streameval.metrics import levels, scoreorder

        monkeypatch.setattr(scoreorder, "FLAT_MAX", 0)
        monkeypatch.setattr(scoreorder, "TRICKLE_ENTRIES", 0)
        monkeypatch.setattr(levels, "MIN_SIDE", 0)
    return request.param


def _spark_required():
    """Spark tests must run (a SparkSession that cannot start is a failure, not a
    skip) in CI and wherever STREAMEVAL_REQUIRE_SPARK is set (.ci/run sets it)."""
    return bool(os.environ.get("CI") or os.environ.get("STREAMEVAL_REQUIRE_SPARK"))


@pytest.fixture(scope="session")
def spark():
    """A real local SparkSession (``local[2]``) shared by the Spark tests.

    In CI a session that cannot start fails the test loudly; elsewhere the test is
    skipped with the reason (PySpark not installed: ``pip install -e '.[test]'``, or no
    Java on the PATH)."""
    try:
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master("local[2]")
            .appName("streameval-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.default.parallelism", "4")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.driver.memory", "1g")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
    except Exception as e:  # ImportError, Java missing, gateway failure
        if _spark_required():
            pytest.fail(f"cannot start a local SparkSession in CI: {type(e).__name__}: {e}",
                        pytrace=False)
        pytest.skip(f"no local SparkSession ({type(e).__name__}: {e}); "
                    "install the test extra and Java 17 to run the Spark tests")
    yield session
    session.stop()


# ------------------------------------------------ processes: streameval serve, Prometheus


class ServeProcess:
    """A ``streameval serve`` started as a subprocess: ``proc``, its first stdout
    ``line`` ("listening on http://..."), ``url`` and ``port``."""

    def __init__(self, proc, line):
        self.proc, self.line = proc, line
        self.url = line.split("listening on ", 1)[1].split()[0]
        self.port = int(self.url.rsplit(":", 1)[1])

    def stop(self, timeout=20):
        """SIGTERM, then the exit status (killed past ``timeout`` seconds)."""
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:  # pragma: no cover - reported by the caller
                self.proc.kill()
                self.proc.wait(10)


def start_serve(*args, module=("streameval", "serve"), env=None, timeout=60):
    """``python -m <module> --port 0 ARGS`` (``module``: the CLI's ``serve`` by default,
    or ``("streameval.service",)``) until it prints where it listens; a start that does
    not get there fails with its stderr."""
    import selectors
    import subprocess
    import sys

    cmd = [sys.executable, "-m", *module, "--port", "0", *map(str, args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    ready = sel.select(timeout=timeout)
    sel.close()
    line = proc.stdout.readline().decode() if ready else ""
    if "listening on http://" not in line:
        proc.kill()
        raise AssertionError(f"the server did not start: {line!r} {proc.stderr.read().decode()}")
    return ServeProcess(proc, line)


@pytest.fixture
def serve_process():
    """Start ``streameval serve`` subprocesses (:func:`start_serve`'s arguments); each is
    stopped at the end of the test if it still runs."""
    started = []

    def start(*args, **kwargs):
        sp = start_serve(*args, **kwargs)
        started.append(sp)
        return sp

    yield start
    for sp in started:
        sp.stop()


def _free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def free_port():
    """A function returning a TCP port on 127.0.0.1 that was free a moment ago."""
    return _free_port


@pytest.fixture
def prometheus(tmp_path):
    """Start a real Prometheus (Debian's ``prometheus``): ``start(config_text)`` writes
    ``prometheus.yml`` into the test's directory, starts it on a free port and returns
    its URL once it answers; it is stopped at the end of the test. Skipped without the
    binary, unless ``STREAMEVAL_REQUIRE_PROMETHEUS=1`` (CI), where that fails."""
    import shutil
    import subprocess
    import time
    import urllib.request

    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("STREAMEVAL_REQUIRE_PROMETHEUS") == "1":
            pytest.fail("prometheus is required (apt-get install prometheus)")
        pytest.skip("prometheus is not installed (Debian package prometheus)")
    procs = []

    def start(config_text, name="prometheus"):
        d = tmp_path / name
        d.mkdir()
        (d / "prometheus.yml").write_text(config_text)
        port = _free_port()
        log = open(d / "prometheus.log", "w")
        proc = subprocess.Popen([binary, f"--config.file={d / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={d / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT)
        procs.append((proc, log))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=5) as r:
                    if r.status == 200:
                        return url
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"prometheus did not start: {(d / 'prometheus.log').read_text()}")
            time.sleep(0.25)

    yield start
    for proc, log in procs:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
        log.close()
