"""mkdocs hook: the configuration reference, generated from the one run schema.

The line ``<!-- runconfig:reference -->`` of a page becomes
``streameval.runconfig.reference_markdown()``: the tables of every key of every config
table, with its type, default and meaning, so the page cannot drift from the loader.
"""

from __future__ import annotations

MARK = "<!-- runconfig:reference -->"


def on_page_markdown(markdown, page, config, files):
    if MARK not in markdown:
        return markdown
    from streameval import runconfig

    return markdown.replace(MARK, runconfig.reference_markdown())
