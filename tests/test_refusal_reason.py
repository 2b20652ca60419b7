"""The words of a refused row (``pipeline.refusal_reason``), shared by the single-process
replay and Spark's, and no private access to a Pipeline from outside its module.

Oracles: hand-written reasons for hand-made refused rows (the log's field names
instead of the Monitor's argument names), and the rejected rows of a single-process
Pipeline run over a small log.
"""

from __future__ import annotations

import ast
import io
import json
import math
from pathlib import Path

from sklearn.metrics import log_loss, roc_auc_score

import streameval as se
from streameval.events import FieldMap, events_to_batch
from streameval.io import EventSource
from streameval.monitor import Monitor
from streameval.pipeline import Pipeline, field_name, refusal_reason
from streameval.validation import ValidationError

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = ROOT / "streameval" / "pipeline.py"


def test_field_name_uses_the_logs_names():
    fm = FieldMap(label="y", score="p", weight="wt", ts="time", segment=("country", "device"))
    assert [field_name(a, fm) for a in ("y_true", "y_pred", "w", "t", "segment")] == [
        "y", "p", "wt", "time", "country,device"]
    assert [field_name(a) for a in ("y_true", "y_pred", "w", "t", "segment")] == [
        "label", "score", "weight", "ts", "segment"]
    assert field_name("other", fm) == "other"


def test_refusal_reason_words_each_kind_of_error():
    fm = FieldMap(score="p", ts="time")
    assert refusal_reason(ValidationError("y_pred", 1.5, "probability must be in [0, 1]", 7),
                          fm) == "p = 1.5: probability must be in [0, 1]"
    # a missing event time is said as missing, with the log's name
    assert refusal_reason(ValidationError("t", math.nan, "this monitor needs event times", 3),
                          fm) == "time is missing: this monitor needs event times"
    # an infinite one keeps its value
    assert refusal_reason(ValidationError("t", math.inf, "event time must be a finite number",
                                          3), fm) == "time = inf: event time must be a finite number"
    err = ValidationError("segment", "x", "segment[4] = 'x': bad", 4, message="segment[4] = 'x': bad")
    assert refusal_reason(err, FieldMap(segment="country")) == "country = 'x': bad"
    err = ValidationError("y_pred", 2.0, "why", 2, message="event 2: the loss overflows")
    assert refusal_reason(err, fm) == "the loss overflows"
    assert refusal_reason(ValueError("plain words"), fm) == "plain words"


def test_the_reasons_of_monitor_refused_rows_name_the_logs_fields():
    fm = FieldMap(score="p", segment="country")
    mon = Monitor({"ll": se.LogLoss()}, group_by="country", max_segments=3, every=0)
    batch = events_to_batch([
        {"ts": 1, "label": 1, "p": 0.5, "country": "fr"},
        {"ts": 2, "label": 0, "p": 1.5, "country": "fr"},
        {"ts": 3, "label": 1, "p": 0.25, "country": "__other__"},
    ], fm)
    got = [(j, refusal_reason(e, fm)) for j, e in mon.refused(batch)]
    assert got == [
        (1, "p = 1.5: probability must be in [0, 1] (metric 'll' needs probabilities)"),
        (2, "country = '__other__': '__other__' is reserved for the events of segment "
            "values past max_segments"),
    ]


def test_a_single_process_pipeline_rejects_with_refusal_reason():
    fm = FieldMap(score="p")
    lines = [{"ts": 1, "label": 1, "p": 0.5}, {"ts": 2, "label": 0, "p": 1.5},
             {"ts": 3, "label": 1, "p": -0.5}, {"ts": 4, "label": 0, "p": 0.25}]
    data = "".join(json.dumps(e) + "\n" for e in lines).encode()
    rejected = []
    src = EventSource(io.BytesIO(data), fm, format="jsonl", on_error="skip",
                      rejected=lambda line, reason, raw: rejected.append((line, reason)))
    mon = Monitor({"ll": se.LogLoss(), "auc": se.ROCAUC()}, every=0)
    rows = []
    mon.on_metrics.append(rows.append)
    Pipeline(mon, src, on_error="skip").run()
    why = "probability must be in [0, 1] (metric 'll' needs probabilities)"
    assert rejected == [(2, f"p = 1.5: {why}"), (3, f"p = -0.5: {why}")]
    assert mon.n == 2
    # the others are counted: the rows 1 and 4 alone
    values = rows[-1]["values"]
    assert values["auc"] == roc_auc_score([1, 0], [0.5, 0.25])
    assert abs(values["ll"] - log_loss([1, 0], [0.5, 0.25])) < 1e-12


# ------------------------------------------------------------------ private access


def _pipeline_private_names():
    """The private methods and attributes the Pipeline class defines."""
    tree = ast.parse(PIPELINE.read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Pipeline"]
    names = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("_") \
                and not node.name.startswith("__"):
            names.add(node.name)
    return names


def _uses(source, names):
    """``[(line, text)]``: calls and reads of ``names`` on a receiver other than
    ``self``/``cls`` in ``source``, skipping names the source defines itself (a
    metric's own ``_refusal``)."""
    tree = ast.parse(source)
    own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in names and node.attr not in own:
            recv = ast.unparse(node.value)
            if recv not in ("self", "cls"):
                found.append((node.lineno, f"{recv}.{node.attr}"))
    return sorted(found)


def test_the_scanner_catches_a_pipelines_private_reason():
    names = _pipeline_private_names()
    assert {"_refusal", "_field", "_raw"} <= names
    assert "_reason" not in names  # the reason is worded by refusal_reason only
    snippet = ("r = Pipeline(m, src)._refusal(e)\n"
               "f = pipe._field('t')\n"
               "self._raw(b, 0)\n")
    assert [w for _, w in _uses(snippet, names | {"_reason"})] == [
        "Pipeline(m, src)._refusal", "pipe._field"]


def test_nothing_outside_the_pipeline_module_calls_its_private_methods():
    names = _pipeline_private_names() | {"_reason"}
    here = Path(__file__).resolve()
    bad = []
    for top in ("streameval", "tests"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.resolve() in (PIPELINE.resolve(), here):
                continue
            for line, what in _uses(path.read_text(), names):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not bad, "\n".join(bad)
