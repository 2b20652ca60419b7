"""Test-suite settings shared by every module."""

import os

from hypothesis import settings

# CI runs the property tests on a fixed sequence of examples: a red CI then always
# reproduces, and a green one is not luck. Locally, hypothesis explores new examples
# on every run (and keeps failing ones in .hypothesis/).
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
