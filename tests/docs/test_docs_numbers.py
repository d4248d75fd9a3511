"""README.md and docs/*.md carry no result typed by hand: every number in their prose is either
generated (docs/results.md, a generated block) or on the explicit allow-list
(paper/allowed_numbers.toml: a definition, a parameter, a limit, a protocol constant, a fixed
fact, a source paper's figure, a target), and that list holds nothing stale. Each test below
plants the fault it names in a copy of the docs and shows the scanner catches it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from paper import cli, scan
from tests.support.paths import REPO as ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "paper-results"


def _docs_copy(tmp_path: Path, *only: str) -> Path:
    """README.md and docs/*.md copied into tmp_path; with `only`, just those pages (a page's
    findings depend on its text, its own allowed phrases and the rules, never on another page:
    a test that plants a number in one page scans that page alone, ~0.03 CPU-s, not all 20,
    ~0.5 CPU-s)."""
    (tmp_path / "docs").mkdir()
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    for p in pages:
        rel = p.relative_to(ROOT).as_posix()
        if not only or rel in only:
            shutil.copyfile(p, tmp_path / rel)
    assert not only or len(list(tmp_path.rglob("*.md"))) == len(only), only  # no typo
    return tmp_path


def _append(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.write_text(p.read_text(encoding="utf-8") + "\n" + text + "\n", encoding="utf-8")


def test_the_docs_hold_no_number_typed_by_hand() -> None:
    assert [str(f) for f in scan.scan_docs(ROOT)] == []


def test_the_allow_list_is_explicit_and_nothing_on_it_is_stale() -> None:
    assert scan.stale(ROOT) == []
    allowed = scan.load_allowed()
    for entry in allowed["docs"]["allow"]:
        assert entry["kind"] in scan.KINDS and entry["why"].strip(), entry
        assert all(any(c.isdigit() for c in t) for t in scan._texts(entry)), entry
    size = scan.size(allowed)
    assert size["docs_rules"] <= 12  # structural rules only; every other number is a phrase


@pytest.mark.parametrize(("rel", "typed"), [
    ("docs/crash.md", "All 250 crash cases recovered their outcome."),
    ("docs/growth.md", "The round contrast was +1.00 [1.00, 1.00] at default scale."),
    ("README.md", "The audit took 33s and peaked at 28 MiB."),
    ("docs/audit.md", "Tier 2 accepted 225 / 732 = 30.7% of the frozen gates' mutants."),
    ("docs/proofs.md", "All 34 obligations take about 6 s of CPU time."),
    ("docs/engine.md", "record 0 of 250 runs"),  # an allowed phrase does not cover its neighbour
])
def test_a_number_typed_into_the_docs_fails_the_scan(tmp_path: Path, rel: str,
                                                     typed: str) -> None:
    root = _docs_copy(tmp_path, rel)  # scans clean: test_the_docs_hold_no_number_typed_by_hand
    _append(root, rel, typed)
    found = scan.scan_docs(root)
    # every finding is in the planted line: none was there before it
    assert found and {f.path for f in found} == {rel}, found
    assert all(f.context.strip() == typed for f in found)


def test_pasted_command_output_is_prose_and_code_is_not(tmp_path: Path) -> None:
    root = _docs_copy(tmp_path, "docs/crash.md")
    _append(root, "docs/crash.md", "```\nx = range(10)  # code\n```")
    assert scan.scan_docs(root) == []
    _append(root, "docs/crash.md", '```\n$ python -m experiments.crash --json\n'
            '{"cases": 50, "outcome_recovered": 50}\n```')
    assert [f.number for f in scan.scan_docs(root)] == ["50", "50"]


def test_a_phrase_allowed_in_one_file_is_a_finding_in_another(tmp_path: Path) -> None:
    root = _docs_copy(tmp_path, "docs/bounds.md")
    entry = next(a for a in scan.load_allowed()["docs"]["allow"]
                 if a["file"] == "docs/proxy.md")
    phrase = scan._texts(entry)[0]
    _append(root, "docs/bounds.md", f"Here: {phrase}.")
    assert {f.path for f in scan.scan_docs(root)} == {"docs/bounds.md"}


def test_a_changed_number_makes_its_allowed_phrase_stale(tmp_path: Path) -> None:
    """Editing a parameter in the prose (a default of 15 becomes 20) leaves the old phrase on the
    list: the list names it, so the new number is looked at, not silently allowed."""
    root = _docs_copy(tmp_path)
    page = root / "docs" / "audit.md"
    text = page.read_text(encoding="utf-8")
    assert "default 15);" in text
    page.write_text(text.replace("default 15);", "default 20);"), encoding="utf-8")
    assert any("'default 15);'" in s for s in scan.stale(root))
    assert [f.number for f in scan.scan_docs(root)] == ["20"]


def test_a_generated_block_that_differs_from_results_fails_the_check(tmp_path: Path) -> None:
    root = _docs_copy(tmp_path)
    out = tmp_path / "generated"
    cli.write(FIXTURE, out, root)
    assert cli.check(FIXTURE, out, root) == []
    page = root / "docs" / "transition.md"
    text = page.read_text(encoding="utf-8")
    row = next(ln for ln in text.splitlines() if ln.startswith("| lost after found, all"))
    page.write_text(text.replace(row, row.rsplit("|", 2)[0] + "| 0.999 |"), encoding="utf-8")
    assert any("docs/transition.md" in p and "generated block" in p
               for p in cli.check(FIXTURE, out, root))


def test_the_cli_lists_the_findings_and_exits_1(tmp_path: Path, capsys) -> None:
    root = _docs_copy(tmp_path)  # --scan-docs also lists stale entries: every page
    assert cli.main(["--scan-docs", "--root", str(root)]) == 0
    _append(root, "docs/crash.md", "It recovered 250 cases.")
    assert cli.main(["--scan-docs", "--root", str(root)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("docs/crash.md:") and "'250'" in out[0]
