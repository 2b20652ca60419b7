"""Render benchmark result files (``benchmarks/results/*.json``) as Markdown.

Used by the documentation's hook (``docs/hooks/performance.py``: the performance page's
tables and plots) and by ``python benchmarks/_report.py --readme`` (the README's headline
table, between its ``<!-- headline:start -->`` and ``<!-- headline:end -->`` lines;
``--check`` exits 1 when the README differs from the files). Standard library only,
except :func:`plot_data_uri`, which needs matplotlib.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS_DIR = HERE / "results"
README = HERE.parent / "README.md"

#: The README's five headline figures: (result file, figure key).
HEADLINE = (
    ("bench_ranking", "auc_batches_continuous"),
    ("bench_windows", "sliding_auc_continuous"),
    ("bench_classification", "precision_update"),
    ("bench_replay", "replay_continuous"),
    ("bench_retrieval_text", "ndcg_stream"),
)
START, END = "<!-- headline:start -->", "<!-- headline:end -->"


def load(name, directory=RESULTS_DIR):
    """The parsed result file ``<directory>/<name>.json``."""
    path = Path(directory) / f"{name}.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such result file; run "
                                f"python benchmarks/{name.split('_growth')[0]}.py") from None


def load_all(directory=RESULTS_DIR):
    """``{name: result}`` of every result file, by name."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(Path(directory).glob("*.json"))}


def fmt(x):
    """A cell: integers and large numbers with thin-space thousands, 3 significant
    digits otherwise, scientific below 1e-3; None as a dash.

    >>> fmt(1234567.8), fmt(56.789), fmt(0.012345), fmt(1.1e-16), fmt(0), fmt(None)
    ('1 234 568', '56.8', '0.0123', '1.1e-16', '0', '-')
    """
    if x is None:
        return "-"
    if isinstance(x, bool) or isinstance(x, str):
        return str(x)
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) >= 1000):
        return f"{int(x):,}".replace(",", " ")
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    a = abs(x)
    if a >= 100:
        return f"{round(x):,}".replace(",", " ")
    if a < 1e-3:
        return f"{x:.1e}"
    return f"{x:.3g}"


def _cell(x):
    return fmt(x).replace("|", "\\|")


def markdown_table(table):
    """A result table as a Markdown table (numbers right-aligned)."""
    cols, rows = table["columns"], table["rows"]
    numeric = [all(r[i] is None or isinstance(r[i], (int, float)) for r in rows)
               for i in range(len(cols))]
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in cols) + " |",
             "| " + " | ".join("---:" if n else "---" for n in numeric) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def run_facts(result):
    """One line: the command, date, machine and versions of a result file."""
    m, v = result["machine"], result["versions"]
    vers = ", ".join(f"{k} {val}" for k, val in v.items())
    load = m.get("load_average")
    return (f"`{result['command']}` on {result['date'][:10]}: {m['cpu']}, {m['cores']} "
            f"cores, {m['ram_gib']} GiB RAM"
            + (f" (load average {load[0]} at the start)" if load else "")
            + f"; {vers}.")


def parameters_line(result):
    ps = ", ".join(f"`{k}` = {json.dumps(v)}" for k, v in result["parameters"].items()
                   if v not in (None, False))
    return f"Parameters: {ps}." if ps else ""


def ratio(fig):
    """How many times better streameval's figure is than the peer's (above 1: better)."""
    v, p = fig["value"], fig["peer_value"]
    if v in (None, 0) or p in (None, 0):
        return None
    return v / p if fig["better"] == "higher" else p / v


def headline_table(results):
    """The README's table of :data:`HEADLINE` figures, each with its peer."""
    lines = ["| what | streameval | peer, in the same run | peer's figure | streameval's advantage |",
             "| --- | ---: | --- | ---: | ---: |"]
    for name, key in HEADLINE:
        try:
            fig = results[name]["figures"][key]
        except KeyError:
            raise KeyError(f"benchmarks/results/{name}.json has no figure {key!r}: run "
                           f"python benchmarks/{name}.py") from None
        r = ratio(fig)
        lines.append(f"| {fig['label']} | {fmt(fig['value'])} {fig['unit']} | {fig['peer']} | "
                     f"{fmt(fig['peer_value'])} {fig['unit']} | "
                     f"{'-' if r is None else f'{r:.1f}x'} |")
    return "\n".join(lines)


def readme_with_headline(text, results):
    """``text`` (the README) with its headline block replaced from ``results``."""
    if START not in text or END not in text:
        raise ValueError(f"README.md has no {START} ... {END} block")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{headline_table(results)}\n{END}{tail}"


def plot_data_uri(curve):
    """A ``data:image/svg+xml;base64,...`` URI of a result curve, drawn with matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for label, ys in curve["lines"].items():
        ax.plot(curve["x"], ys, marker="o", label=label)
    if curve.get("log_x"):
        ax.set_xscale("log")
    if curve.get("log_y"):
        ax.set_yscale("log")
    ax.set_xlabel(curve["x_label"])
    ax.set_ylabel(curve["y_label"])
    ax.set_title(curve["title"], fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.StringIO()
    matplotlib.rcParams["svg.hashsalt"] = "streameval"   # the same SVG for the same data
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue().encode()).decode()


def render_result(result, *, level=3, plots=True):
    """A result file as Markdown: how it was run, its tables and its curves."""
    h = "#" * level
    parts = [run_facts(result)]
    p = parameters_line(result)
    if p:
        parts.append(p)
    for t in result["tables"]:
        parts.append(f"{h} {t['title']}\n\n{markdown_table(t)}")
        if t.get("note"):
            parts.append(t["note"][0].upper() + t["note"][1:] + ".")
    if plots:
        for c in result.get("series", []):
            parts.append(f"![{c['title']}]({plot_data_uri(c)})")
    return "\n\n".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description="README headline table from the result files")
    ap.add_argument("--readme", action="store_true", help="rewrite README.md's headline block")
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md is not up to date")
    args = ap.parse_args(argv)
    results = {name: load(name) for name, _ in HEADLINE}
    text = README.read_text()
    new = readme_with_headline(text, results)
    if args.check:
        if new != text:
            print("README.md's headline table differs from benchmarks/results: run "
                  "python benchmarks/_report.py --readme", file=sys.stderr)
            return 1
        return 0
    if args.readme:
        README.write_text(new)
    else:
        print(headline_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
