"""The paper's numbers come from results/: every macro equals what the result file says, the text
holds no number typed by hand, and the generator takes new keys, new studies and a missing local
model without an edit. Runs on tests/fixtures/paper-results (a smoke run, `python -m
paper.fixture`), so it needs neither a full `make reproduce` nor LaTeX.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from paper import cli, fmt, scan, sources
from paper.tree import Results
from tests.support.paths import REPO as ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "paper-results"
# Studies the text guards with \IfResults (the section says they were not run): their keys may
# be absent from the fixture. Every other key the text uses must be there.
OPTIONAL = ("transition-llm/", "transition-paper/", "competence-", "bench/")  # sections behind \IfResults
DEF = re.compile(r"^\\lp@def\{(.+?)\}\{(.*)\}$")
USE = re.compile(r"\\(?:R|Rp|Rpz|Rsci)\{([^{}]+)\}|\\Rf\{(\d)\}\{([^{}]+)\}")


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gen") / "generated"
    root = tmp_path_factory.mktemp("root")
    cli.write(FIXTURE, out, root)
    return out


# ------------------------------------------------------------------ an independent reader

def _walk(data: object, parts: list[str]) -> object:
    for p in parts:
        if p == "@len":
            assert isinstance(data, list)
            data = len(data)
            continue
        if isinstance(data, list) and data and all(isinstance(x, dict) and "id" in x
                                                   for x in data):
            data = {x["id"]: x for x in data}
        data = data[int(p)] if isinstance(data, list) else data[p]  # type: ignore[index]  # JSON
    return data


ABSENT = object()  # a results file that is not there


def _expected(results: Path, key: str, read: dict[tuple[str, ...], object] | None = None) -> object:
    """What results/ says for a key, read here without paper.tree. `read` keeps the files
    already parsed (a key's file -> its JSON, ABSENT where there is no file) for a caller that asks
    for many keys of one results folder (parsing each file once per key was seconds)."""
    read = {} if read is None else read

    def load(*rel: str) -> object:
        if rel not in read:
            f = results.joinpath(*rel).with_suffix(".json")
            read[rel] = json.loads(f.read_text()) if f.is_file() else ABSENT
        return read[rel]

    parts = key.split("/")
    if parts[:2] == ["proofs", "counts"]:
        obs = load("proofs", "proofs")
        assert isinstance(obs, list)
        counts = {"obligations": len(obs), "proved": sum(o["result"] == "proved" for o in obs),
                  "refuted": sum(o["result"] == "refuted" for o in obs),
                  "broken_variants": sum(o["expect"] == "refuted" for o in obs),
                  "as_expected": sum(o["result"] == o["expect"] for o in obs),
                  "not_as_expected": sum(o["result"] != o["expect"] for o in obs),
                  "seconds": round(sum(o["seconds"] for o in obs), 1)}
        if parts[2] != "guarantees":
            return counts[parts[2]]
        sub = [o for o in obs if o["guarantee"] == parts[3]]
        return {"obligations": len(sub), "proved": sum(o["result"] == "proved" for o in sub),
                "refuted": sum(o["result"] == "refuted" for o in sub),
                "broken_variants": sum(o["expect"] == "refuted" for o in sub),
                "as_expected": sum(o["result"] == o["expect"] for o in sub),
                "not_as_expected": sum(o["result"] != o["expect"] for o in sub),
                "seconds": round(sum(o["seconds"] for o in sub), 1)}[parts[4]]
    for i in range(len(parts), 0, -1):
        data = load(*parts[:i])
        if data is not ABSENT:
            return _walk(data, parts[i:])
    raise KeyError(key)


def mismatches(results_tex: str, results: Path) -> list[str]:
    """Every macro of results.tex whose text is not the formatted value results/ holds."""
    bad = []
    read: dict[tuple[str, ...], object] = {}
    for line in results_tex.splitlines():
        m = DEF.match(line)
        if not m:
            continue
        key, text = m.groups()
        form = "auto"
        if "@" in key.rsplit("/", 1)[-1] and not key.endswith("/@len"):
            key, form = key.rsplit("@", 1)
        if fmt.latex_value(_expected(results, key, read), form) != text:
            bad.append(f"{key}@{form}: {text!r}")
    return bad


# ------------------------------------------------------------------ macros equal results/

def test_every_macro_equals_what_the_result_file_says(generated: Path) -> None:
    tex = (generated / "results.tex").read_text()
    assert tex.count("\\lp@def{") > 500
    assert mismatches(tex, FIXTURE) == []
    crash = json.loads((FIXTURE / "crash" / "summary.json").read_text())
    assert f"\\lp@def{{crash/summary/outcome_recovered}}{{{crash['outcome_recovered']}}}" in tex
    obs = json.loads((FIXTURE / "proofs" / "proofs.json").read_text())
    refuted = sum(o["result"] == "refuted" for o in obs)
    assert f"\\lp@def{{proofs/counts/refuted}}{{{refuted}}}" in tex


def test_a_macro_that_differs_from_results_is_caught(generated: Path) -> None:
    tex = (generated / "results.tex").read_text()
    line = next(x for x in tex.splitlines() if x.startswith("\\lp@def{crash/summary/cases}"))
    forged = tex.replace(line, "\\lp@def{crash/summary/cases}{250}")
    assert mismatches(forged, FIXTURE) == ["crash/summary/cases@auto: '250'"]


def test_values_json_names_the_file_of_every_key(generated: Path) -> None:
    values = json.loads((generated / "values.json").read_text())
    assert values["crash/summary/cases"]["file"] == "results/crash/summary.json"
    assert values["proofs/counts/refuted"]["file"] == "results/proofs/counts.json"
    read: dict[tuple[str, ...], object] = {}
    for key, v in values.items():
        assert v["text"][""] == fmt.apply(_expected(FIXTURE, key, read)), key


def test_every_key_the_text_uses_is_in_the_results(generated: Path) -> None:
    values = json.loads((generated / "values.json").read_text())
    used = set()
    for p in (ROOT / "paper").rglob("*.tex"):
        if "generated" in p.parts or "build" in p.parts:
            continue
        text = re.sub(r"\\cmd\{(?:[^{}]|\{[^{}]*\})*\}", "", p.read_text())  # shown, not used
        for m in USE.finditer(text):
            key = m.group(1) or m.group(3)
            suffix = "" if m.group(1) else f"@f{m.group(2)}"
            if m.group(0).startswith("\\Rp{"):
                suffix = "@pct"
            used.add((p.name, key, suffix))
    assert len(used) > 40
    missing = [(f, k, s) for f, k, s in sorted(used) if not k.startswith(OPTIONAL)
               and (k not in values or (s and s not in values[k]["text"]))]
    assert missing == []


# ------------------------------------------------------------------ nothing typed by hand

def test_the_paper_holds_no_number_typed_by_hand() -> None:
    assert [str(f) for f in scan.scan_tex(ROOT)] == []


def _paper_copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "paper", tmp_path / "paper",
                    ignore=shutil.ignore_patterns("generated", "build", "__pycache__"))
    return tmp_path


@pytest.mark.parametrize("typed", [
    "Of the 250 crash cases all recovered.",
    "a rate of 45.5\\% on tier two",
    "recovered \\texttt{250} of them",
    "the bound is $W = 6$ here",
    "about 1,234 cases",
])
def test_a_number_typed_into_the_text_fails_the_scan(tmp_path: Path, typed: str) -> None:
    root = _paper_copy(tmp_path)
    assert scan.scan_tex(root) == []
    section = root / "paper" / "sections" / "experiments.tex"
    section.write_text(section.read_text() + "\n" + typed + "\n")
    found = scan.scan_tex(root)
    assert found, typed
    assert {f.path for f in found} == {"paper/sections/experiments.tex"}
    assert all(f.context.strip() == typed for f in found)


def test_keys_labels_and_allowed_phrases_are_not_findings(tmp_path: Path) -> None:
    root = _paper_copy(tmp_path)
    section = root / "paper" / "sections" / "experiments.tex"
    section.write_text(section.read_text() + "\n\\R{growth/summary/sweep/160/hits} G1 CF001 "
                       "\\Rf{2}{bounds/summary/max_peer_over_w} \\ref{tab:x2} % 99 in a comment\n")
    assert scan.scan_tex(root) == []


# ------------------------------------------------------------------ robust to what results hold

def test_the_local_model_absent_is_said_not_failed(generated: Path) -> None:
    table = (generated / "tables" / "transition.tex").read_text()
    assert "not run" in table
    text = (ROOT / "paper" / "sections" / "experiments.tex").read_text()
    start = text.index("\\IfResults{transition-llm/summary}") + len("\\IfResults")
    present_at = scan._braced_end(text, start)
    absent_at = scan._braced_end(text, present_at)
    present = text[present_at:absent_at]
    absent = text[absent_at:scan._braced_end(text, absent_at)]
    assert present.startswith("{%\n\\textbf{A language-model run is in this build.}")
    assert "scale" in present and "transition-llm/summary/trajectories" in present
    assert absent.startswith("{%\n\\textbf{No language-model run is in this build}")
    assert "no claim in this paper rests on a language model" in absent


def test_the_local_model_present_fills_its_column(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results)
    s = json.loads((results / "transition" / "summary.json").read_text())
    s["coder"] = "llm"
    (results / "transition-llm").mkdir()
    (results / "transition-llm" / "summary.json").write_text(json.dumps(s))
    out = tmp_path / "generated"
    cli.write(results, out, tmp_path)
    table = (out / "tables" / "transition.tex").read_text()
    assert "not run" not in table and "llm" in table
    assert "\\lp@file{transition-llm/summary}" in (out / "results.tex").read_text()


def test_new_keys_studies_sites_and_figures_are_picked_up(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results)
    crash = json.loads((results / "crash" / "summary.json").read_text())
    crash["by_site"]["runner.new_site"] = {"cases": 7, "outcome_recovered": 7,
                                           "trace_identical": 5, "repeated_calls": 2}
    crash["a_new_key"] = 0.125
    (results / "crash" / "summary.json").write_text(json.dumps(crash))
    (results / "cancel").mkdir()
    (results / "cancel" / "summary.json").write_text(json.dumps({"cancelled": 3}))
    (results / "crash" / "crash.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    out = tmp_path / "generated"
    summary = cli.write(results, out, tmp_path)
    tex = (out / "results.tex").read_text()
    assert "\\lp@def{cancel/summary/cancelled}{3}" in tex
    assert "\\lp@def{crash/summary/a_new_key@pct}{12.5\\%}" in tex
    assert "runner.new\\_site & 7 & 7 & 5 & 2" in (out / "tables" / "crash_sites.tex").read_text()
    assert summary["figures"] == ["crash/crash"]
    assert (out / "figures" / "crash--crash.png").read_bytes() == (
        results / "crash" / "crash.png").read_bytes()
    assert "\\lp@fig{crash/crash}{generated/figures/crash--crash.png}" in tex
    assert mismatches(tex, results) == []


def test_an_empty_results_folder_gives_not_run_tables(tmp_path: Path) -> None:
    out = tmp_path / "generated"
    cli.write(tmp_path / "nothing", out, tmp_path)
    for name in ("crash", "proofs", "growth_sweep", "transition"):
        assert "not run" in (out / "tables" / f"{name}.tex").read_text()
    assert "- `results/crash/`: not run" in (tmp_path / "docs" / "results.md").read_text()


# ------------------------------------------------------------------ the source papers

def test_every_source_figure_traces_to_a_result_key_in_a_smoke_run() -> None:
    papers, figures = sources.load()
    assert set(papers) == {"bounded-loops", "looping", "guardrail"}
    r = Results(FIXTURE)
    for f in figures:
        for tmpl in (f.ours, f.ours_scale, f.why):
            for key in re.findall(r"\{([^{}|]+)", tmpl):
                assert key.startswith(OPTIONAL) or r.has(key), (f.paper, f.id, key)


def test_a_malformed_source_file_is_one_line_and_exit_2(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "source_figures.toml"
    bad.write_text('[papers.x]\ntitle = "t"\nauthors = "a"\nwhere = "w"\nyear = "y"\n'
                   'bibkey = "k"\n[[figures]]\npaper = "y"\nid = "i"\n')
    monkeypatch.setattr(sources, "FILE", bad)
    out = tmp_path / "generated"
    assert cli.main(["--results", str(FIXTURE), "--out", str(out), "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "figures[0]" in err[0] and not out.exists()


def test_results_that_is_a_file_is_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "results"
    f.write_text("x")
    assert cli.main(["--results", str(f), "--out", str(tmp_path / "g")]) == 2
    assert not (tmp_path / "g").exists()


def test_check_finds_a_stale_generated_file_and_a_hand_edited_docs_page(tmp_path: Path) -> None:
    out = tmp_path / "generated"
    cli.write(FIXTURE, out, tmp_path)
    assert cli.check(FIXTURE, out, tmp_path) == []
    page = tmp_path / "docs" / "results.md"
    page.write_text(page.read_text().replace("| outcome recovered | ", "| outcome recovered | 9"))
    (out / "tables" / "crash.tex").write_text("edited")
    problems = cli.check(FIXTURE, out, tmp_path)
    assert any("tables/crash.tex" in p for p in problems)
    assert any("docs/results.md" in p for p in problems)


# ------------------------------------------------------------------ examples, the median audit

def test_the_examples_and_the_median_audit_are_tables_of_their_results(generated: Path) -> None:
    audit = json.loads((FIXTURE / "audit" / "median.json").read_text())
    t2 = audit["summary"]["tiers"]["2"]
    table = (generated / "tables" / "audit_median.tex").read_text()
    assert f"2 & {t2['mutants']} & {t2['destroying']} & " in table
    accepts = (generated / "tables" / "audit_median_accepts.tex").read_text()
    why = audit["gates"][0]["tiers"]["2"]["false_accept_why"]
    assert len(why) == t2["false_accepts"] and all(fmt.latex_text(w) in accepts
                                                   for w in why.values())
    examples = (generated / "tables" / "examples.tex").read_text()
    for p in sorted((FIXTURE / "examples").glob("*.json")):
        run = json.loads(p.read_text())
        assert f"{fmt.latex_text(p.stem)} & {fmt.latex_text(run['outcome'])} & " \
               f"{run['attempts_total']} & {run['W']} & " in examples


# ------------------------------------------------------------------ what LaTeX's log says

def test_the_build_reads_pages_undefined_references_and_wide_lines_from_the_log() -> None:
    from paper import build
    log = ("Overfull \\hbox (12.5pt too wide) in paragraph at lines 3--10\n"
           "Overfull \\hbox (0.8pt too wide) in paragraph at lines 20--21\n"
           "LaTeX Warning: Reference `tab:gone' on page 4 undefined on input line 9.\n"
           "LaTeX Warning: There were undefined references.\n"
           "Output written on build/loopproof.pdf (17 pages, 912345 bytes).\n")
    pages, undefined, overfull = build.read_log(log)
    assert (pages, undefined, overfull) == (17, ["tab:gone"], ["12.5pt at lines 3--10"])
    assert build.read_log("Output written on x.pdf (1 page, 9 bytes).") == (1, [], [])


def test_the_like_for_like_counts_are_read_from_the_source_file() -> None:
    import tomllib
    rows = tomllib.loads(sources.FILE.read_text())["figures"]
    m = sources.src_macros(sources.load()[1])
    assert m["all/@figures"] == str(len(rows))
    assert m["all/@like"] == str(sum(r["like"] for r in rows))
    for paper in ("bounded-loops", "looping", "guardrail"):
        assert m[f"{paper}/@like"] == str(sum(r["like"] for r in rows if r["paper"] == paper))


def test_a_figure_shows_its_paper_scale_value_where_a_paper_scale_run_was_kept(
        tmp_path: Path) -> None:
    """The comparison with the source papers reads <study>-paper/ for the same keys: the value
    when the paper-scale run is there, "not run" when it is not, and nothing for a figure of a
    study that has no scales (the proofs)."""
    for folder, cases in (("crash", 50), ("crash-paper", 240)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "summary.json").write_text(json.dumps(
            {"cases": cases, "scale": folder.partition("-")[2] or "default"}))
    (tmp_path / "proofs").mkdir()
    (tmp_path / "proofs" / "counts.json").write_text(json.dumps({"all": 68}))

    def figure(ours: str) -> sources.Figure:
        return sources.Figure("p", "f", "cases", "240", "table 1", "paper", ours, "default",
                              True, "")

    results = Results(tmp_path)
    crash = sources.markdown_table("p", [figure("{crash/summary/cases}")], results)
    assert "| 50 (default; paper scale: 240) |" in crash
    shutil.rmtree(tmp_path / "crash-paper")
    results = Results(tmp_path)
    assert "(default; paper scale: not run)" in sources.markdown_table(
        "p", [figure("{crash/summary/cases}")], results)
    proofs = sources.markdown_table("p", [figure("{proofs/counts/all}")], results)
    assert "| 68 (default) |" in proofs and "paper scale" not in proofs
    assert "paper scale: not run" in sources.latex_table("p", [figure("{crash/summary/cases}")],
                                                         results)
