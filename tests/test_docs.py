"""The README and the documentation site: every example runs, the site builds strictly,
and the prose speaks of the product, never of the project's history.

Conventions the pages follow (and these tests enforce):

* Python examples are ``>>>`` doctests, run page by page from a scratch directory that
  holds the repository's ``scenarios/`` and ``docs/`` (paths in examples are written
  from the repository's root, as a reader runs them).
* A ``toml`` block is parsed and built by the real config loaders; a ``yaml`` block is
  parsed (and a Prometheus one checked by ``promtool`` where it is installed).
* A ``bash`` block's ``streameval ...`` lines are run in a subprocess (exit status 0
  expected); ``python -m pip install`` lines are skipped (the test environment has the
  packages). Any other line needs the block to be marked, on the line before its fence,
  ``<!-- not run: why -->``; so does a ``python`` block without ``>>>``.
"""

from __future__ import annotations

import ast
import doctest
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md"] + sorted(DOCS.rglob("*.md"))
PAGE_IDS = [str(p.relative_to(ROOT)) for p in PAGES]

FENCE = re.compile(r"(?P<before>[^\n]*)\n```(?P<lang>[a-z]*)\n(?P<body>.*?)\n```", re.S)
NOT_RUN = re.compile(r"<!-- not run: \S.*-->")


def blocks(page, lang):
    """``(body, marked_not_run)`` of every fenced block of ``lang`` on ``page``."""
    text = "\n" + page.read_text()
    return [(m["body"], bool(NOT_RUN.search(m["before"])))
            for m in FENCE.finditer(text) if m["lang"] == lang]


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A working directory where ``scenarios/...`` and ``docs/...`` resolve as at the
    repository's root, and outputs (``out/...``) land in a temporary directory."""
    for name in ("scenarios", "docs"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _spark_ready():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return shutil.which("java") is not None


# ---------------------------------------------------------------------- examples


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_python_examples_run_as_written(page, scratch):
    text = page.read_text()
    for body, marked in blocks(page, "python"):
        assert ">>>" in body or marked, (
            f"{page.name}: a python block without >>> must be marked <!-- not run: why -->:"
            f"\n{body[:200]}")
    if ">>>" not in text:
        return
    if page.name == "spark.md" and not _spark_ready():
        if os.environ.get("STREAMEVAL_REQUIRE_SPARK"):
            pytest.fail("spark.md's examples need pyspark and Java 17")
        pytest.skip("pyspark or Java missing")
    result = doctest.testfile(str(page), module_relative=False, globs={},
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} example(s) of {page.name} failed (above)"


def _load_toml(doc, config_dir):
    """Build a parsed TOML example with the loader that reads it in production."""
    if "serve" in doc:
        from streameval.service import load_config

        return load_config(doc)
    from streameval.cli import load_replay_config

    return load_replay_config(doc, config_dir=config_dir)


TOML_EXAMPLES = [(p, i, body) for p in PAGES for i, (body, _) in enumerate(blocks(p, "toml"))]


@pytest.mark.parametrize("page, i, body", TOML_EXAMPLES,
                         ids=[f"{p.relative_to(ROOT)}[{i}]" for p, i, _ in TOML_EXAMPLES])
def test_toml_examples_load(page, i, body):
    doc = tomllib.loads(body)
    monitor = _load_toml(doc, DOCS / "examples")[0]
    assert monitor is not None


@pytest.mark.parametrize("path", sorted((DOCS / "examples").glob("*.toml")),
                         ids=lambda p: p.name)
def test_example_config_files_load(path):
    from streameval.cli import load_replay_config

    monitor, fields, fmt, delayed = load_replay_config(str(path))
    assert monitor.segments is not None
    if path.name == "delayed.toml":
        assert delayed["label_ttl"] == 3600.0
        assert delayed["labels_path"] == DOCS / "examples" / "labels.csv"


def test_pages_show_the_example_files_verbatim():
    """A page that shows a file of docs/examples shows it as it is."""
    shown = {
        "monitor.toml": DOCS / "guides" / "monitor.md",
        "delayed.toml": DOCS / "guides" / "replay.md",
        "prometheus.yml": DOCS / "guides" / "prometheus.md",
    }
    for name, page in shown.items():
        lang = "yaml" if name.endswith(".yml") else "toml"
        bodies = [b for b, _ in blocks(page, lang)]
        assert (DOCS / "examples" / name).read_text().rstrip("\n") in bodies, (name, page)


YAML_EXAMPLES = [(p, i, body) for p in PAGES for i, (body, _) in enumerate(blocks(p, "yaml"))]


@pytest.mark.parametrize("page, i, body", YAML_EXAMPLES,
                         ids=[f"{p.relative_to(ROOT)}[{i}]" for p, i, _ in YAML_EXAMPLES])
def test_yaml_examples_parse(page, i, body, tmp_path):
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(body)
    assert isinstance(doc, dict)
    if "scrape_configs" in doc and shutil.which("promtool"):
        path = tmp_path / "prometheus.yml"
        path.write_text(body)
        out = subprocess.run(["promtool", "check", "config", str(path)],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr


def _commands(body):
    """The ``streameval`` commands of a bash block (continuation lines joined)."""
    cmds = []
    for line in body.replace("\\\n", " ").splitlines():
        line = line.split("  #")[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in line.split("&&"):
            words = shlex.split(part)
            if words[:4] == ["python", "-m", "pip", "install"]:
                continue
            assert words[0] == "streameval", (
                f"{part!r} (in {body[:60]!r}) is not run by the tests: mark the block "
                "<!-- not run: why -->")
            cmds.append(words)
    return cmds


SHELL_BLOCKS = [(p, body) for p in PAGES for body, marked in blocks(p, "bash") if not marked
                and not (p.name == "README.md" and "python -m pytest" in body)]


def test_shell_blocks_are_run_or_marked():
    for page, body in SHELL_BLOCKS:
        _commands(body)     # raises on a line the tests do not run


SHELL_EXAMPLES = [(p, b) for p, b in SHELL_BLOCKS if "streameval " in b]


@pytest.mark.parametrize("page, body", SHELL_EXAMPLES,
                         ids=[f"{p.relative_to(ROOT)}:{b.splitlines()[0][:40]}"
                              for p, b in SHELL_EXAMPLES])
def test_shell_examples_run(page, body, scratch):
    cmds = _commands(body)
    assert cmds, body
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for words in cmds:
        out = subprocess.run([sys.executable, "-m", "streameval", *words[1:], "--no-progress"]
                             if words[1] == "replay" else
                             [sys.executable, "-m", "streameval", *words[1:]],
                             capture_output=True, text=True, env=env, timeout=600)
        assert out.returncode == 0, f"{' '.join(words)}\n{out.stdout[-2000:]}{out.stderr[-2000:]}"
        out_dir = words[words.index("--out") + 1] if "--out" in words else None
        if out_dir:
            assert (scratch / out_dir / "metrics.jsonl").stat().st_size > 0


def test_readme_delayed_labels_example_fires_as_the_page_says(scratch):
    """replay.md says the recall alarm fires at n = 2 838 joined events (the detection),
    written by the evaluation there."""
    import json

    from streameval.cli import replay

    replay("docs/examples/predictions.csv", "out", config="docs/examples/delayed.toml",
           report=False, progress=False)
    alerts = [json.loads(x) for x in open("out/alerts.jsonl")]
    firing = [a for a in alerts if a["state"] == "firing"]
    assert [(a["rule"], a["n"], a["evaluated_n"]) for a in firing] == [
        ("recall alarm", 2838, 2838)]
    text = " ".join((DOCS / "guides" / "replay.md").read_text().split())
    assert "(at n = 2 838 joined events, where its detector crossed: the monitor " \
        "evaluates there and writes it)" in text


# ---------------------------------------------------------------------- the site


def test_site_builds_strictly(tmp_path):
    """``mkdocs build --strict``: a broken link, a missing page, a failing hook or a
    docstring mkdocstrings cannot render fails the build."""
    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]')")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                          "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    perf = (tmp_path / "site" / "performance" / "index.html").read_text()
    assert "<!-- results:" not in perf and "data:image/svg+xml;base64," in perf
    api = (tmp_path / "site" / "reference" / "api" / "metrics" / "index.html").read_text()
    assert "update_many" in api and "ROCAUC" in api


def test_configuration_reference_is_generated_from_the_run_schema():
    runconfig = pytest.importorskip("streameval.runconfig",
                                    reason="streameval.runconfig not on this branch yet")
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        import configuration
    finally:
        sys.path.remove(str(DOCS / "hooks"))
    page = (DOCS / "reference" / "configuration.md").read_text()
    rendered = configuration.on_page_markdown(page, None, None, None)
    assert configuration.MARK not in rendered
    assert runconfig.reference_markdown() in rendered


# ---------------------------------------------------------------------- the README


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= 12 * 1024, f"README.md is {len(text.encode())} bytes"
    for guide in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / guide).is_file(), guide


def test_readme_headline_equals_the_result_files():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import _report
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    text = (ROOT / "README.md").read_text()
    results = {name: _report.load(name) for name, _ in _report.HEADLINE}
    assert _report.readme_with_headline(text, results) == text, (
        "README's headline table is not the result files': "
        "python benchmarks/_report.py --readme")
    rows = text.split(_report.START)[1].split(_report.END)[0].strip().splitlines()[2:]
    assert len(rows) == 5
    for (name, key), row in zip(_report.HEADLINE, rows):
        fig = results[name]["figures"][key]
        assert _report.fmt(fig["value"]) in row and _report.fmt(fig["peer_value"]) in row


# ---------------------------------------------------------------------- history


HISTORY = {
    "an issue reference": re.compile(
        r"\b(?:issues?|PR|pull request)\s*#?\d+\b|(?<![\w&/#])#\d+\b", re.I),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"),
    "'stop N'": re.compile(r"\bstop \d+\b", re.I),
    "narration of the machine or of earlier code": re.compile(
        r"busier machine|busy machine|shared machine|(?:machine|cores?)(?:'s)? shared with"
        r"|idle machine|loaded machine|other jobs|machine's noise|same morning|that morning"
        r"|\bused to (?:be|make|grow|give|take|write|cost)\b|the code before|earlier code"
        r"|previous default|old default|a later issue", re.I),
}


def history_in(text):
    """``[(what, excerpt)]`` of every reference to the project's history in ``text``.

    >>> history_in("2.8x faster than Spark (issue 11 asked for 2x; see 4f83e9f)")
    [('an issue reference', '...er than Spark (issue 11 asked for...'), ('a commit hash', '...ed for 2x; see 4f83e9f)...')]
    >>> history_in("AUC 0.875, 1e-12 from sklearn, 1000000 events, #metrics")
    []
    """
    found = []
    for what, rx in HISTORY.items():
        for m in rx.finditer(text):
            found.append((what, "..." + text[max(0, m.start() - 15):m.end() + 10] + "..."))
    return found


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_docs_speak_of_the_product(page):
    text = page.read_text()
    assert history_in(text) == []


def _docstrings(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield doc


MEASUREMENT = re.compile(
    r"\b\d+(?:\.\d+)?(?:\s*[–-]\s*\d+(?:\.\d+)?)?x (?:faster|slower|the\b)"
    r"|\b[Mm]easured\b(?!\s+(?:at validation|by\b))|\bREADME\b")


def _docstring_findings(paths):
    found = []
    for path in paths:
        for doc in _docstrings(path):
            found += [(str(path.relative_to(ROOT)),) + f for f in history_in(doc)]
            found += [(str(path.relative_to(ROOT)), "a measurement or README pointer",
                       "..." + doc[max(0, m.start() - 30):m.end() + 20] + "...")
                      for m in MEASUREMENT.finditer(doc)]
    return found


def _source_files():
    return sorted((ROOT / "streameval").rglob("*.py"))


def test_docstrings_speak_of_the_product():
    """Docstrings say what a thing does and costs; measurements live in
    benchmarks/results, the project's history nowhere."""
    assert _docstring_findings(_source_files()) == []


def test_doc_tooling_examples():
    """The doctests of the docs' own tools: the reST-to-Markdown docstring rewrite, the
    result table formatting, and the history check above."""
    import importlib.util

    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner()
    for path in (DOCS / "hooks" / "rst_docstrings.py", ROOT / "benchmarks" / "_report.py"):
        spec = importlib.util.spec_from_file_location(f"doc_tool_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        tried = runner.tries
        for name, obj in vars(module).items():
            if callable(obj) and ">>>" in (getattr(obj, "__doc__", None) or ""):
                runner.run(parser.get_doctest(obj.__doc__, dict(vars(module)), name,
                                              str(path), 0))
        assert runner.tries > tried, path
    assert runner.failures == 0
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for test in finder.find(history_in, "history_in", globs={"history_in": history_in}):
        runner.run(test)
    assert runner.failures == 0 and runner.tries > 0


def test_benchmark_results_record_how_they_were_run():
    import json

    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        r = json.loads(path.read_text())
        assert r["command"].startswith("python benchmarks/bench_"), path.name
        # (where the results were written is not part of the command)
        assert not any(a.endswith(".json") for a in r["command"].split()), path.name
        assert {"cpu", "cores", "ram_gib"} <= set(r["machine"]), path.name
        assert {"python", "numpy", "river", "streameval"} <= set(r["versions"]), path.name
        assert r["date"] and r["tables"], path.name
        for t in r["tables"]:
            assert all(len(row) == len(t["columns"]) for row in t["rows"]), (path.name, t["key"])
