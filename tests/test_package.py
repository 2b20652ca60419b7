"""The package's public surface and set-up commands match what the docs promise."""

import pathlib
import re

import streameval

ROOT = pathlib.Path(__file__).resolve().parents[1]

# DESIGN.md section 2, "Public names, importable from streameval"
DESIGN_NAMES = """ConfusionMatrix Accuracy ErrorRate Precision Recall FPR Specificity FBeta F1
FAlpha BalancedAccuracy MCC ROCAUC Gini AveragePrecision InterpolatedAP ElevenPointAP
ROCCurve PRCurve LogLoss Brier MAE MSE RMSE RMSLE MAPE PrecisionAtK RecallAtK HitAtK
APAtK MAPAtK MRR DCG NDCG BLEU ROUGE METEOR Sliding Tumbling Monitor from_state""".split()


def test_all_is_the_documented_public_names():
    assert sorted(streameval.__all__) == sorted(DESIGN_NAMES)


def test_every_public_name_imports():
    for name in DESIGN_NAMES:
        obj = getattr(streameval, name)
        assert getattr(obj, "__name__", name) == name


def _readme_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)\n```", section, flags=re.S)


def test_readme_has_exactly_two_setup_commands():
    cmds = _readme_commands()
    assert len(cmds) == 2
    assert "streameval run scenarios/" in cmds[0]
    assert "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = _readme_commands()[1].strip()
    assert test_cmd in ci.splitlines()


def test_readme_first_command_names_a_bundled_scenario():
    cmd = _readme_commands()[0]
    scenario = re.search(r"streameval run (\S+)", cmd).group(1)
    assert (ROOT / scenario).is_file()


def test_from_state_loads_non_public_types_in_a_fresh_process():
    """A drift or monitor checkpoint loads without importing its module first."""
    import subprocess
    import sys

    code = (
        "import json, streameval.drift as d\n"
        "x = d.PrecisionRecallDrift(metric='recall', window=10)\n"
        "for i in range(25): x.update(i % 2, 0.9 if i % 3 else 0.1)\n"
        "print(json.dumps(x.to_state()))\n"
    )
    state = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    check = (
        "import json, sys, streameval\n"
        "s = json.loads(sys.stdin.read())\n"
        "y = streameval.from_state(s)\n"
        "assert 'streameval.drift' in sys.modules\n"
        "assert y.to_state() == s, (y.to_state(), s)\n"
        "print(type(y).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", check], input=state, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "PrecisionRecallDrift"


def test_default_revert_many_equals_a_revert_loop_and_is_atomic():
    """The protocol's fallback (``Metric.revert_trusted``: a loop of revert, undone on
    refusal), and NDCG's own vectorised revert_many, which names the query."""
    import math

    from streameval.metrics.retrieval import NDCG
    from sklearn.metrics import ndcg_score

    rels = [[3, 2, 0, 1], [0, 1, 1, 0], [2, 0, 0, 1], [1, 1, 0, 0]]
    scores = [[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.4, 0.6], [0.5, 0.5, 0.1, 0.7], [0.3, 0.2, 0.9, 0.1]]
    m = NDCG()
    m.update_many(rels, scores)
    before = m.to_state()
    import pytest

    from streameval.metrics.base import Metric

    with pytest.raises(ValueError, match="event 1"):
        Metric.revert_trusted(m, [rels[0], [1, -1, 0, 0]], [scores[0], scores[1]])
    assert m.to_state() == before
    with pytest.raises(ValueError, match="query 1"):
        m.revert_many([rels[0], [1, -1, 0, 0]], [scores[0], scores[1]])
    assert m.to_state() == before
    loop = NDCG().update_many(rels, scores)
    Metric.revert_trusted(loop, rels[:2], scores[:2])
    assert math.isclose(loop.get(), ndcg_score(rels[2:], scores[2:]), rel_tol=0, abs_tol=1e-12)
    m.revert_many(rels[:2], scores[:2])
    assert math.isclose(m.get(), ndcg_score(rels[2:], scores[2:]), rel_tol=0, abs_tol=1e-12)


def test_readme_examples_run_as_written():
    """Every ``>>>`` example in README.md is a doctest (tests/test_docs.py runs those of
    the documentation site too)."""
    import doctest

    result = doctest.testfile(
        str(ROOT / "README.md"), module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    assert result.attempted >= 8
    assert result.failed == 0
