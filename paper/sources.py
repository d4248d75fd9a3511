"""The source papers' headline figures beside ours: paper/source_figures.toml, read and checked,
turned into one table per paper (LaTeX for the paper, markdown for docs/results.md).

Why a data file: the papers' figures are facts carried over with their citation; keeping them
out of the .tex lets the hand-typed-number test hold the text to results/ without exceptions.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from paper import fmt, template
from paper.tree import Results

FILE = Path(__file__).with_name("source_figures.toml")
NOT_RUN = "not run"


@dataclass(frozen=True)
class Paper:
    key: str
    title: str
    authors: str
    where: str
    year: str
    bibkey: str


@dataclass(frozen=True)
class Figure:
    paper: str
    id: str
    quantity: str
    value: str
    source: str
    paper_scale: str
    ours: str
    ours_scale: str
    like: bool
    why: str


class BadSources(ValueError):
    """source_figures.toml does not hold what this module needs (the message names the entry)."""


def load(path: Path | None = None) -> tuple[dict[str, Paper], list[Figure]]:
    path = path or FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BadSources(f"{path}: {exc}") from None
    papers = {k: Paper(key=k, **v) for k, v in data.get("papers", {}).items()}
    figures, seen = [], set()
    for i, raw in enumerate(data.get("figures", [])):
        where = f"{path.name}: figures[{i}] ({raw.get('id', '?')})"
        try:
            f = Figure(**raw)
        except TypeError as exc:
            raise BadSources(f"{where}: {exc}; fix: give exactly the fields of paper.sources."
                             "Figure") from None
        if f.paper not in papers:
            raise BadSources(f"{where}: paper {f.paper!r} is not under [papers]")
        if (f.paper, f.id) in seen:
            raise BadSources(f"{where}: id {f.id!r} is used twice for {f.paper}")
        if not f.like and not f.why.strip():
            raise BadSources(f"{where}: like = false needs a `why`")
        seen.add((f.paper, f.id))
        figures.append(f)
    return papers, figures


def counts(figures: list[Figure]) -> dict[str, dict[str, int]]:
    """Per paper and over `all`: how many figures are compared and how many like for like."""
    out: dict[str, dict[str, int]] = {"all": {"figures": 0, "like": 0}}
    for f in figures:
        for k in (f.paper, "all"):
            c = out.setdefault(k, {"figures": 0, "like": 0})
            c["figures"] += 1
            c["like"] += f.like
    return out


def src_macros(figures: list[Figure]) -> dict[str, str]:
    """`paper/id` -> the paper's figure as LaTeX text (\\Src{paper/id} in the text), and
    `paper/@figures`, `paper/@like` (also for `all`): how many comparisons, how many like for
    like."""
    out = {f"{f.paper}/{f.id}": fmt.latex_text(f.value) for f in figures}
    for k, c in counts(figures).items():
        out[f"{k}/@figures"], out[f"{k}/@like"] = str(c["figures"]), str(c["like"])
    return out


def _ours(t: str, results: Results, latex: bool) -> str:
    if not template.keys(t):
        return fmt.latex_text(t) if latex else t
    out = template.latex(t, results) if latex else template.render(t, results)
    return NOT_RUN if out is None else out


PAPER_SCALE = "-paper"  # results/<study>-paper/: the study run at --scale paper (make reproduce-paper)


def at_paper_scale(t: str, results: Results) -> str | None:
    """The template `t` with each key read from its study's paper-scale run (`{crash/summary/x}`
    becomes `{crash-paper/summary/x}`); None when a key's study takes no scale (its summary
    names none: the proofs, the bench)."""
    studies = {k.split("/", 1)[0] for k in template.keys(t)}
    if not studies or not all(results.has(f"{s}/summary/scale") for s in studies):
        return None
    return template.FIELD.sub(
        lambda m: "{" + m.group(1).replace("/", PAPER_SCALE + "/", 1)
        + (f"|{m.group(2)}" if m.group(2) else "") + "}", t)


def _ours_at_paper(f: Figure, results: Results, latex: bool) -> str:
    """"paper scale: X" from the paper-scale run of the figure's study ("not run" without one);
    nothing for a figure of a study without scales (the proofs, the bench)."""
    t = at_paper_scale(f.ours, results)
    return "" if t is None else "paper scale: " + _ours(t, results, latex)


def latex_table(paper: str, figures: list[Figure], results: Results) -> str:
    """A longtable body: quantity | paper (scale) | this artifact (scale) | like for like."""
    rows = [r"\begin{longtable}{@{}p{0.25\linewidth}p{0.19\linewidth}p{0.22\linewidth}"
            r">{\raggedright\arraybackslash}p{0.26\linewidth}@{}}",
            f"\\caption{{\\csname lpcap@sources-{paper}\\endcsname}}"
            f"\\label{{tab:sources-{paper}}}\\\\", r"\toprule",
            r"quantity & source paper & this artifact & like for like? \\", r"\midrule",
            r"\endfirsthead", r"\caption[]{(continued)}\\", r"\toprule",
            r"quantity & source paper & this artifact & like for like? \\", r"\midrule",
            r"\endhead"]
    for f in figures:
        if f.paper != paper:
            continue
        t = fmt.latex_text
        like = "yes" if f.like else "no"
        why = _ours(f.why, results, latex=True)
        rows.append(
            f"{t(f.quantity)} & {t(f.value)}\\newline{{\\footnotesize {t(f.paper_scale)}; "
            f"{t(f.source)}}} & {_ours(f.ours, results, True)}\\newline{{\\footnotesize "
            f"{_ours(f.ours_scale, results, True)}"
            + (f"; {x}" if (x := _ours_at_paper(f, results, True)) else "")
            + f"}} & {like}: {{\\footnotesize {why}}} \\\\")
    rows += [r"\bottomrule", r"\end{longtable}"]
    return "\n".join(rows) + "\n"


def markdown_table(paper: str, figures: list[Figure], results: Results) -> str:
    rows = ["| quantity | source paper | this artifact | like for like? |", "|---|---|---|---|"]
    for f in figures:
        if f.paper != paper:
            continue
        like = "yes" if f.like else "no"
        cell = lambda s: s.replace("|", "\\|")  # noqa: E731
        rows.append(f"| {cell(f.quantity)} | {cell(f.value)} ({cell(f.paper_scale)}; "
                    f"{cell(f.source)}) | {cell(_ours(f.ours, results, False))} "
                    f"({cell(_ours(f.ours_scale, results, False))}"
                    + (f"; {cell(x)}" if (x := _ours_at_paper(f, results, False)) else "")
                    + f") | {like}: "
                    f"{cell(_ours(f.why, results, False))} |")
    return "\n".join(rows) + "\n"


def bibliography(papers: dict[str, Paper]) -> str:
    """The source papers as a thebibliography list (cited by their bibkey)."""
    t = fmt.latex_text
    out = [r"\begin{thebibliography}{9}"]
    for p in papers.values():
        out.append(f"\\bibitem{{{p.bibkey}}} {t(p.authors)}. \\emph{{{t(p.title)}}}. "
                   f"{t(p.where)}, {t(p.year)}.")
    out.append(r"\end{thebibliography}")
    return "\n".join(out) + "\n"
