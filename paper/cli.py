"""`python -m paper`: a results folder -> paper/generated/ (macros, tables, figures) and
docs/results.md.

    python -m paper [--results reference-results] [--out paper/generated] [--root .] [--check]
                    [--pdf] [--json]

The default folder is reference-results/, the committed copy of a default-scale run
(paper/reference.py), so a fresh clone builds the paper and the docs without running a study.
A folder that lacks a study the docs quote (paper.reference.REQUIRED) is refused: exit 2, one
line naming what is missing, nothing written, so no tracked page is rewritten with "not run".

--pdf then builds paper/build/loopproof.pdf with latexmk (paper/build.py) and checks it: exit 1
for an undefined reference or a difference --check finds, exit 2 when latexmk is missing (one
line with the command that installs it).

It also rewrites the generated blocks of hand-written pages (docs/transition.md's figures).
--check writes nothing: it exits 1, one line per problem, when paper/generated/,
docs/results.md or a generated block differ from what results/ gives now, or when the .tex holds a number typed by
hand (paper/scan.py). --scan-docs lists the numbers typed into README.md and docs/*.md prose
that are neither generated nor on paper/allowed_numbers.toml, and the entries of that list that
no longer hold (exit 1 when there is one). Exit 2 for unusable input (a --results that is not a folder, a
malformed paper/source_figures.toml), nothing written.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from paper import build, docs, figures, macros, reference, scan, sources, tables
from paper.tree import Results

ROOT = Path(__file__).resolve().parent.parent


def generate(results_dir: Path, out: Path) -> dict[str, str]:
    """Every generated file as relative path -> text (figures are copied separately)."""
    results = Results(results_dir)
    _papers, figs = sources.load()
    built = tables.build_all(results)
    files: dict[str, str] = {}
    fig_paths = {k: f"generated/figures/{k.replace('/', '--')}.png"
                 for k in figures.found(results_dir)}
    files["results.tex"] = macros.tex(results, [f for f in results.files()], fig_paths,
                                      sources.src_macros(figs))
    files["values.json"] = json.dumps(macros.values(results), sort_keys=True, indent=1) + "\n"
    for name, t in built.items():
        files[f"tables/{name}.tex"] = tables.latex(t, results)
    papers, _ = sources.load()
    for key in papers:
        files[f"tables/sources-{key}.tex"] = sources.latex_table(key, figs, results)
    files["references.tex"] = sources.bibliography(papers)
    files["docs-results.md"] = docs.render(results, built)
    return files


def write(results_dir: Path, out: Path, root: Path) -> dict[str, object]:
    files = generate(results_dir, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".generated-", dir=out.parent))
    try:
        for rel, text in files.items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        copied = figures.copy(results_dir, tmp)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (root / docs.PATH).parent.mkdir(parents=True, exist_ok=True)
    (root / docs.PATH).write_text(files["docs-results.md"], encoding="utf-8")
    for rel, rewrite in docs.blocks(results_dir).items():
        page = root / rel
        if page.is_file():
            page.write_text(rewrite(page.read_text(encoding="utf-8")), encoding="utf-8")
    results = Results(results_dir)
    return {"out": str(out), "docs": docs.PATH, "files_read": results.files(),
            "macros": len(json.loads(files["values.json"])), "tables": sorted(
                k for k in files if k.startswith("tables/")), "figures": sorted(copied)}


def check(results_dir: Path, out: Path, root: Path) -> list[str]:
    """Every way the generated files or the hand-written text disagree with results/."""
    problems = []
    files = generate(results_dir, out)
    for rel, text in sorted(files.items()):
        p = out / rel
        if not p.is_file():
            problems.append(f"{p}: missing; fix: run python -m paper")
        elif p.read_text(encoding="utf-8") != text:
            problems.append(f"{p}: differs from what {results_dir} gives; fix: run python -m "
                            "paper")
    d = root / docs.PATH
    if not d.is_file() or d.read_text(encoding="utf-8") != files["docs-results.md"]:
        problems.append(f"{d}: differs from what {results_dir} gives; fix: run python -m paper")
    for rel, rewrite in docs.blocks(results_dir).items():
        page = root / rel
        if page.is_file() and rewrite(text := page.read_text(encoding="utf-8")) != text:
            problems.append(f"{page}: its generated block differs from what {results_dir} "
                            "gives; fix: run python -m paper")
    for name, src in figures.found(results_dir).items():
        copy = out / "figures" / (name.replace("/", "--") + ".png")
        if not copy.is_file() or copy.read_bytes() != src.read_bytes():
            problems.append(f"{copy}: not the figure in {src}; fix: run python -m paper")
    problems += [str(f) for f in scan.scan_tex(root)]
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m paper", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=ROOT / reference.FOLDER,
                   help=f"the results folder to build from (default {reference.FOLDER}/, the "
                        "committed copy of a default-scale run)")
    p.add_argument("--out", type=Path, default=ROOT / "paper" / "generated")
    p.add_argument("--root", type=Path, default=ROOT,
                   help="the repository whose docs/results.md is written and whose text is "
                        "scanned")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 on a difference")
    p.add_argument("--scan-docs", action="store_true",
                   help="list numbers typed by hand into README.md and docs/*.md; exit 1 if any")
    p.add_argument("--pdf", action="store_true",
                   help="then build paper/build/loopproof.pdf with latexmk and check it")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    args = p.parse_args(argv)
    if args.scan_docs:
        found = [str(f) for f in scan.scan_docs(args.root)] + scan.stale(args.root)
        for f in found:
            print(f)
        return 1 if found else 0
    if args.results.exists() and not args.results.is_dir():
        print(f"python -m paper: --results {args.results}: not a folder; fix: name the results "
              "folder the experiments wrote", file=sys.stderr)
        return 2
    if not args.check and (missing := reference.missing(args.results)):
        # the docs pages are tracked: never rewrite them with figures this folder does not have
        print(f"python -m paper: {args.results} has no {', '.join(missing)}: nothing written; "
              f"fix: build from the committed copy (python -m paper, which reads "
              f"{reference.FOLDER}/) or run make reproduce first", file=sys.stderr)
        return 2
    try:
        if args.check:
            problems = check(args.results, args.out, args.root)
            for line in problems:
                print(line)
            if args.json:
                print(json.dumps({"problems": len(problems)}))
            return 1 if problems else 0
        summary = write(args.results, args.out, args.root)
    except sources.BadSources as exc:
        print(f"python -m paper: {exc}", file=sys.stderr)
        return 2
    line = (f"{summary['macros']} result macros from {len(summary['files_read'])} files, "
            f"{len(summary['tables'])} tables, {len(summary['figures'])} figures -> "
            f"{summary['out']}; {summary['docs']}")
    code = 0
    if args.pdf:
        code = _pdf(args, summary)
        if "pages" in summary:  # latexmk ran to the end (it may still have found problems)
            line = (f"{summary['pages']} pages, {summary['macros']} result macros, "
                    f"{len(summary['tables'])} tables, {len(summary['figures'])} figures -> "
                    f"{summary['pdf']}")
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    elif "pages" in summary or not args.pdf:
        print(f"python -m paper: {line}")
    return code


def _pdf(args: argparse.Namespace, summary: dict[str, object]) -> int:
    """Build the PDF and say what a reader would stumble on; 1 when there is any."""
    try:
        built = build.pdf()
    except build.NoLatex as exc:
        print(f"python -m paper: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"python -m paper: {exc}", file=sys.stderr)
        return 1
    summary.update(pdf=str(built.pdf), pages=built.pages, undefined=built.undefined,
                   overfull=built.overfull)
    problems = [f"{built.pdf}: undefined reference {u} (prints as ??); fix: the \\label it names"
                for u in built.undefined]
    problems += check(args.results, args.out, args.root)
    for o in built.overfull:
        print(f"python -m paper: warning: a line runs into the margin by {o} (paper/build/"
              f"{build.JOB}.log)", file=sys.stderr)
    for p in problems:
        print(p, file=sys.stderr)
    summary["problems"] = len(problems)
    return 1 if problems else 0
