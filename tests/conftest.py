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
