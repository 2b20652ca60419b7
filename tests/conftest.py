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
