"""The one registry of names (streameval._registry) and the import rules of issue 10.

Three views derive from ``_registry.ENTRIES``: ``streameval.__all__`` (the public
names), ``streameval.config.KINDS`` (config kinds) and the state loaders of
``streameval.from_state``. These tests check that they agree with each other and with
the classes the modules really define, and that no module imports another module's
private names.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import re
import subprocess
import sys

import pytest

import streameval
from streameval import _registry, config
from streameval.metrics.base import Metric

ROOT = pathlib.Path(streameval.__file__).parent

#: DESIGN.md section 2's list of public names, written out: the oracle for __all__
DESIGN_NAMES = """ConfusionMatrix Accuracy ErrorRate Precision Recall FPR Specificity FBeta F1
FAlpha BalancedAccuracy MCC ROCAUC Gini AveragePrecision InterpolatedAP ElevenPointAP
ROCCurve PRCurve LogLoss Brier MAE MSE RMSE RMSLE MAPE PrecisionAtK RecallAtK HitAtK
APAtK MAPAtK MRR DCG NDCG BLEU ROUGE METEOR Sliding Tumbling Monitor from_state""".split()


def _all_modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def _import_everything():
    for name, _ in _all_modules():
        if name.startswith("streameval.service"):
            pytest.importorskip("starlette")
        importlib.import_module(name)


def test_public_names_are_the_registry_and_the_design():
    assert streameval.__all__ == [e.name for e in _registry.ENTRIES if e.public]
    assert sorted(streameval.__all__) == sorted(DESIGN_NAMES)
    for name in streameval.__all__:
        obj = getattr(streameval, name)
        module = _registry.public_modules()[name]
        # defined in that module, or in a module of that package (windows.sliding)
        assert obj.__module__ == module or obj.__module__.startswith(module + "."), name


def test_config_kinds_are_registered_metric_classes():
    assert config.KINDS == _registry.config_kinds()
    assert len(set(config.KINDS.values())) == len(config.KINDS)
    for kind, name in config.KINDS.items():
        cls = _registry.state_class(name)
        assert issubclass(cls, Metric), kind
        # a kind builds the class it names
        built = config.make_metric(kind, name=kind) if name not in ("FBeta", "FAlpha") else None
        if built is not None:
            assert isinstance(built, cls)


def test_every_state_type_loads_from_its_entry_and_every_class_is_listed():
    _import_everything()
    registered = _registry.registered()
    own = {n: c for n, c in registered.items() if c.__module__.startswith("streameval.")}
    listed = {e.name for e in _registry.ENTRIES if e.state}
    # every class streameval registers is an entry: nothing is loadable but unlisted
    assert set(own) <= listed, sorted(set(own) - listed)
    for e in _registry.ENTRIES:
        if not e.state:
            continue
        cls = _registry.state_class(e.name)
        assert cls is not None, e.name
        assert cls.__module__ == e.module or cls.__module__.startswith(e.module + "."), e.name
        assert cls._public_name == e.name


def test_from_state_loads_in_a_fresh_process_without_the_package_root():
    # a checkpoint of a drift test (not a public name) loads with only metrics.base
    # imported: from_state finds the module through the registry
    code = (
        "import sys, json\n"
        "from streameval.metrics.base import from_state\n"
        "from streameval import _registry\n"
        "state = json.loads(sys.stdin.read())\n"
        "m = from_state(state)\n"
        "print(type(m).__name__, type(m).__module__)\n"
    )
    import streameval.drift as drift

    d = drift.PrecisionRecallDrift(metric="recall", reference="previous", window=4)
    d.update_many([1, 0, 1, 1, 0, 1], [0.9, 0.2, 0.3, 0.8, 0.6, 0.7])
    import json

    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(d.to_state()),
                         capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == "PrecisionRecallDrift"


def test_unknown_state_type_is_refused():
    with pytest.raises(ValueError, match="unknown state type 'NoSuchMetric'"):
        streameval.from_state({"type": "NoSuchMetric", "version": 1, "params": {}, "data": {}})


def test_a_users_own_metric_still_round_trips():
    class CountEvents(Metric):
        def __init__(self):
            self.k = 0

        def update(self, y_true, y_pred, w=1.0):
            self.k += 1

        def get(self):
            return float(self.k)

        def _get_data(self):
            return self.k

        def _set_data(self, data):
            self.k = data

    m = CountEvents()
    m.update(1, 0.5)
    assert streameval.from_state(m.to_state()).get() == 1.0


# ------------------------------------------------------------------- import rules


#: private modules of the ground floor, imported by name from anywhere in the package
GROUND_FLOOR = ("_registry", "_river", "_gc")


def _private_imports(module, path):
    """(line, what) for each private name this module takes from another module."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    module_aliases = {}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if alias.name.startswith("_") and not alias.name.startswith("__") \
                        and alias.name not in GROUND_FLOOR:
                    found.append((node.lineno, f"from {base} import {alias.name}"))
                if alias.asname:
                    module_aliases[alias.asname] = target
                else:
                    module_aliases[alias.name] = target
            for part in base.split("."):
                if part.startswith("_") and not part.startswith("__") and base != module:
                    if base not in {f"streameval.{name}" for name in GROUND_FLOOR}:
                        found.append((node.lineno, f"from {base} import ..."))
                    break
        elif isinstance(node, ast.Import):
            for alias in node.names:
                module_aliases[alias.asname or alias.name.split(".")[0]] = alias.name
    # attribute access on an imported streameval module: mod._private
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            target = module_aliases.get(node.value.id)
            if target and target.startswith("streameval") and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                try:
                    is_module = importlib.util.find_spec(target) is not None
                except (ImportError, ValueError):
                    is_module = False
                if is_module:
                    found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return found


def test_no_private_names_are_imported_across_modules():
    # streameval._registry, _river and _gc are the ground floor's private modules:
    # they are imported by name (they hold no private names of their own to take)
    bad = []
    for module, path in _all_modules():
        for line, what in _private_imports(module, path):
            bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {what}")
    assert not bad, "\n".join(bad)


def test_every_module_says_what_it_holds():
    missing = [str(p.relative_to(ROOT.parent)) for _, p in _all_modules()
               if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing


#: how a module docstring states its imports: an "Imports:" paragraph, or a sentence
#: "it may import ...", "it imports ...", "the modules import ..."
IMPORTS_STATED = re.compile(
    r"(^|\n)\s*Imports:|\bmay import\b|\b(it|this module|the modules) imports?\b", re.I)


def test_every_module_docstring_says_what_it_may_import():
    # issue 10: each module's opening docstring says what it holds and what it may
    # import, in its prose (a doctest's "import" does not count)
    silent = []
    for _, p in _all_modules():
        doc = ast.get_docstring(ast.parse(p.read_text())) or ""
        prose = "\n".join(line for line in doc.splitlines()
                          if not line.lstrip().startswith((">>>", "...")))
        if not IMPORTS_STATED.search(prose):
            silent.append(str(p.relative_to(ROOT.parent)))
    assert not silent, silent
