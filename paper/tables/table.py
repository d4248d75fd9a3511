"""A table of the paper and of docs/results.md: its cells (templates over results/ keys, or
literal text) and its two renderings, LaTeX and markdown, from one definition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from paper import fmt, template
from paper.tree import MissingResult, Results


@dataclass(frozen=True)
class Lit:
    """A cell that is text, not a template (names from results/, which may hold braces)."""

    text: str


Cell = str | Lit


@dataclass
class Table:
    name: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    needs: str = ""            # a file (key prefix) without which the table is "not run"
    widths: list[str] | None = None  # LaTeX column types; default l then r
    long: bool = False         # a longtable with its caption (\setcaption{name}{...}) and label


def _cell_latex(c: Cell, results: Results) -> str:
    if isinstance(c, Lit):
        return fmt.latex_text(c.text)
    out = template.latex(c, results)
    return "--" if out is None else out


def _cell_md(c: Cell, results: Results) -> str:
    if isinstance(c, Lit):
        text = c.text
    else:
        out = template.render(c, results)
        text = "-" if out is None else out
    return text.replace("|", "\\|")


def latex(t: Table, results: Results) -> str:
    cols = t.widths or (["l"] + ["r"] * (len(t.columns) - 1))
    long = t.long
    env = "longtable" if long else "tabular"
    head = " & ".join(fmt.latex_text(c) for c in t.columns) + r" \\"
    out = [f"\\begin{{{env}}}{{@{{}}{''.join(cols)}@{{}}}}"]
    if long:  # the caption is set in the section's text: \setcaption{name}{...}
        out += [f"\\caption{{\\csname lpcap@{t.name}\\endcsname}}\\label{{tab:{t.name}}}"
                r"\\", r"\toprule", head, r"\midrule", r"\endfirsthead",
                r"\caption[]{(continued)}\\", r"\toprule", head, r"\midrule", r"\endhead"]
    else:
        out += [r"\toprule", head, r"\midrule"]
    if t.needs and not results.has(t.needs):
        out.append(f"\\multicolumn{{{len(cols)}}}{{l}}{{\\emph{{not run: results/"
                   f"{fmt.latex_text(t.needs.split('/')[0])}/ is absent}}}} \\\\")
    else:
        for r in t.rows:
            out.append(" & ".join(_cell_latex(c, results) for c in r) + r" \\")
    out += [r"\bottomrule", f"\\end{{{env}}}"]
    return "\n".join(out) + "\n"


def markdown(t: Table, results: Results) -> str:
    out = ["| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
    if t.needs and not results.has(t.needs):
        out.append(f"| not run: `results/{t.needs.split('/')[0]}/` is absent |"
                   + " |" * (len(t.columns) - 1))
    else:
        out += ["| " + " | ".join(_cell_md(c, results) for c in r) + " |" for r in t.rows]
    return "\n".join(out) + "\n"


def keys(results: Results, key: str) -> list[str]:
    try:
        v = results.get(key)
    except MissingResult:
        return []
    if isinstance(v, list) and v and all(isinstance(x, dict) and "id" in x for x in v):
        return [x["id"] for x in v]
    return sorted(v, key=natural) if isinstance(v, dict) else []


def natural(k: str) -> tuple:
    return (0, float(k), "") if k.replace(".", "", 1).isdigit() else (1, 0.0, k)
