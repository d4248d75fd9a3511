"""Text with result keys in braces, `{crash/summary/cases}` or `{transition/summary/q|pct}`,
rendered from a results tree: how the tables, the comparison with the source papers and the docs
put a number in a sentence without typing it. `{key|ci3}` renders an interval (a two-item list)
or, for a null one, "(no variation)".

Why a template and not code per cell: a row of source_figures.toml or figures.toml says in one
line which keys it shows, so a reader (and the test) can trace every cell to results/.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from paper import fmt
from paper.tree import MissingResult, Results

FIELD = re.compile(r"\{([^{}|]+)(?:\|([a-z0-9]+))?\}")
# `{key|ci3}`: a 95% interval [lo, hi] at 3 decimals; a null interval (experiments.stats: every
# cluster gave the same value) prints as NO_VARIATION, never as [x, x].
INTERVAL = {"ci2": "f2", "ci3": "f3"}
NO_VARIATION = "(no variation)"
# `{key|list3}`: every number of a list, comma-separated (one per revision, whatever T is).
LIST = {"list2": "f2", "list3": "f3"}


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
        form = m.group(2) or "auto"
        if form in INTERVAL:  # [lo, hi], or the words for an interval that has none
            if v is None:
                out.append(text(NO_VARIATION))
            elif isinstance(v, list) and len(v) == 2 and all(isinstance(x, int | float)
                                                             for x in v):
                out.append(text("[") + value(v[0], INTERVAL[form]) + text(", ")
                           + value(v[1], INTERVAL[form]) + text("]"))
            else:
                return None
            pos = m.end()
            continue
        if form in LIST and isinstance(v, list) and v and all(isinstance(x, int | float)
                                                               for x in v):
            out.append(text(", ").join(value(x, LIST[form]) for x in v))
            pos = m.end()
            continue
        if isinstance(v, dict | list):
            return None
        out.append(value(v, form))
        pos = m.end()
    out.append(text(template[pos:]))
    return "".join(out)


def latex(template: str, results: Results) -> str | None:
    return render(template, results, fmt.latex_value, fmt.latex_text)
