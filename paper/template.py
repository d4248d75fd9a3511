"""Text with result keys in braces, `{crash/summary/cases}` or `{transition/summary/q|pct}`,
rendered from a results tree: how the tables, the comparison with the source papers and the docs
put a number in a sentence without typing it.

Why a template and not code per cell: a row of source_figures.toml or figures.toml says in one
line which keys it shows, so a reader (and the test) can trace every cell to results/.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from paper import fmt
from paper.tree import MissingResult, Results

FIELD = re.compile(r"\{([^{}|]+)(?:\|([a-z0-9]+))?\}")


def keys(template: str) -> list[str]:
    return [m.group(1) for m in FIELD.finditer(template)]


def render(template: str, results: Results,
           value: Callable[[object, str], str] = fmt.apply,
           text: Callable[[str], str] = lambda s: s) -> str | None:
    """The template with each field replaced by its formatted value; None when a key is missing
    (the caller prints "not run"). `text` escapes the literal parts, `value` formats a value."""
    out, pos = [], 0
    for m in FIELD.finditer(template):
        out.append(text(template[pos:m.start()]))
        try:
            v = results.get(m.group(1))
        except MissingResult:
            return None
        if isinstance(v, dict | list):
            return None
        out.append(value(v, m.group(2) or "auto"))
        pos = m.end()
    out.append(text(template[pos:]))
    return "".join(out)


def latex(template: str, results: Results) -> str | None:
    return render(template, results, fmt.latex_value, fmt.latex_text)
