"""griffe extension: streameval's reStructuredText-flavoured docstrings as Markdown.

The docstrings follow the sortedcontainers habit (a summary, the cost, a doctest, the
details) written in reStructuredText: ````code````, ``:class:`~x.Y``` roles, literal
blocks after ``::`` or ``.. code-block:: toml``, and bare ``>>>`` doctests. mkdocstrings
renders Markdown, so each docstring is rewritten before it is parsed: doctests and
literal blocks become fenced code, roles become code spans. Nothing else changes.
"""

from __future__ import annotations

import re

from griffe import Extension

ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj|ref|py:\w+):`~?([^`]+)`")
DOUBLE = re.compile(r"``(.+?)``", re.S)
CODE = "\x00"                                # marks lines of code blocks while rewriting
DIRECTIVE = re.compile(r"^(\s*)\.\. code-block::\s*(\w*)\s*$")


def _indent(line):
    return len(line) - len(line.lstrip())


def to_markdown(text: str) -> str:
    r"""Fence doctests and literal blocks, turn roles and ````x```` into code spans.

    >>> to_markdown("Sum ``a`` (:class:`~x.Y`)::\n\n    a + b\n").splitlines()
    ['Sum `a` (`Y`):', '', '```text', 'a + b', '```']
    >>> to_markdown(">" * 3 + " 1 + 1\n2\n").splitlines()
    ['```pycon', '>>> 1 + 1', '2', '```']
    >>> to_markdown("``AUC = U / (P N)`` with ``U = sum\nof pairs``.")
    '`AUC = U / (P N)` with `U = sum\nof pairs`.'
    """
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(">>>"):
            ind = _indent(line)
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][ind:] if _indent(lines[i]) >= ind else lines[i].strip())
                i += 1
            out += [CODE + " " * ind + "```pycon"] + [CODE + " " * ind + b for b in block] \
                + [CODE + " " * ind + "```"]
            continue
        m = DIRECTIVE.match(line)
        literal = stripped.endswith("::") and not stripped.startswith("..")
        if m or literal:
            ind = _indent(line)
            lang = (m.group(2) or "text") if m else "text"
            if literal:
                head = line.rstrip()[:-1]            # "Example::" -> "Example:"
                if head.strip() != ":":
                    out.append(head)
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and _indent(lines[j]) > ind:
                body_ind = _indent(lines[j])
                k = j
                block = []
                while k < len(lines) and (not lines[k].strip() or _indent(lines[k]) >= body_ind):
                    block.append(lines[k][body_ind:])
                    k += 1
                while block and not block[-1].strip():
                    block.pop()
                    k -= 1
                out += ["", CODE + " " * ind + f"```{lang}"] \
                    + [CODE + " " * ind + b for b in block] + [CODE + " " * ind + "```"]
                i = k
                continue
            i += 1
            continue
        out.append(line)
        i += 1
    result, run = [], []
    for line in out + [CODE]:                   # spans may cross lines, never code
        if line.startswith(CODE):
            if run:
                result.append(_spans("\n".join(run)))
                run = []
            result.append(line[len(CODE):])
        else:
            run.append(line)
    result.pop()                                # the sentinel
    return "\n".join(result) + ("\n" if text.endswith("\n") else "")


def _spans(line):
    line = ROLE.sub(lambda m: "`" + m.group(1).split(".")[-1].rstrip("()") + "`"
                    if m.group(0).find("~") >= 0 else "`" + m.group(1) + "`", line)
    return DOUBLE.sub(lambda m: "`" + m.group(1) + "`", line)


class RstDocstrings(Extension):
    """Rewrite every docstring with :func:`to_markdown` as griffe loads it."""

    def on_instance(self, *, obj, **kwargs):
        doc = getattr(obj, "docstring", None)
        if doc is not None and doc.value:
            doc.value = to_markdown(doc.value)
