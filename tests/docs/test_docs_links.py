"""The repository explains itself: README.md and docs/*.md cite only what a clone holds.

A reader of a clone cannot follow a link to a file that is not there, a path outside the
repository (the project's working notes), or an issue number of a tracker they may not see.
Each check below names the file, the line and what to fix; each has a planted-fault test that
shows it can fail.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO as ROOT


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


# Top-level folders a doc may cite by path; a file under one of them that does not exist fails. Generated output (results/) and temporary paths are not repository files.
CITABLE_ROOTS = ("model", "proofs", "engine", "experiments", "bench", "tests", "docs",
                 "examples", "notebooks", "paper")
PATH = re.compile(r"(?<![\w./<>~$-])((?:" + "|".join(CITABLE_ROOTS) + r")/[\w./-]*)")
MD_NAME = re.compile(r"(?<![\w./<>-])([\w./-]*[\w-]\.md)\b")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")
OUTSIDE = [
    (re.compile(r"shared/"), "a path outside the repository (shared/)"),
    (re.compile(r"\b00[0-9]_[0-9a-f]{6,}"), "a seed file name; cite the paper by title"),
    (re.compile(r"(?i)\bpaper\s+0\d\d\b"), "a seed paper's file number; cite the paper by title"),
]
# Paths that a doc names inside a worker's workspace, not in the repository.
WORKSPACE_PATHS = {
    "tests/check.py",  # the conformance lab's candidate runs it (docs/conformance.md, CF045)
    # what `make paper` writes (paper/cli.py, paper/build.py): outputs, absent from a fresh tree
    "paper/generated/",
    "paper/build/loopproof.pdf",
}
ISSUE = [
    re.compile(r"(?i)\bissues?\s*(?:no\.?\s*)?#?\s*\d+"),
    re.compile(r"(?<![\w&/#])#\d+\b"),
]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


@functools.cache
def generated(path: str) -> bool:
    """Does git ignore `path`? Then it is output a command writes (paper/generated/ and
    paper/build/ by `make paper`), which a doc may name although a clone does not hold it yet."""
    try:
        out = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT,
                             capture_output=True)
    except OSError:
        return False
    return out.returncode == 0


def tracked_names() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    files = out.stdout.split() if out.returncode == 0 else [
        str(p.relative_to(ROOT)) for p in ROOT.rglob("*.md") if ".venv" not in p.parts]
    return {Path(f).name for f in files}


def problems(doc: Path, text: str | None = None, root: Path = ROOT) -> list[str]:
    """Every dead citation in one document, as `file:line: what; fix: ...` lines."""
    text = doc.read_text(encoding="utf-8") if text is None else text
    rel = doc.relative_to(root) if doc.is_relative_to(root) else doc
    names = tracked_names()
    found: list[str] = []

    def exists(target: str) -> bool:
        for base in (root, doc.parent):
            p = (base / target).resolve()
            if p.is_relative_to(root) and p.exists():
                return True
        return False

    for n, line in enumerate(text.splitlines(), 1):
        where = f"{rel}:{n}"
        for pattern, what in OUTSIDE:
            if pattern.search(line):
                found.append(f"{where}: {what}; fix: cite a file in the repository, or the paper")
        for pattern in ISSUE:
            if m := pattern.search(line):
                found.append(f"{where}: issue number {m.group(0)!r}; fix: say what it asks instead")
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (doc.parent / file).resolve() if file else doc
            if file and not (dest.is_relative_to(root) and dest.exists()):
                found.append(f"{where}: dead link {target!r}; fix: link a file that exists")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                found.append(f"{where}: no heading #{anchor} in {file or rel}; fix: the anchor")
        line = re.sub(r"[a-z]+://\S+", "", line)  # web addresses are not repository paths
        for path in PATH.findall(line):
            path = path.rstrip(".")
            if path not in WORKSPACE_PATHS and not exists(path) and not generated(path):
                found.append(f"{where}: cites {path!r}, which is not in the repository; "
                             "fix: the current path")
        for name in MD_NAME.findall(line):
            if "/" not in name and name in names or exists(name):
                continue
            if not PATH.fullmatch(name):  # paths under a citable root were checked above
                found.append(f"{where}: cites {name!r}, which is not in the repository; "
                             "fix: docs/design.md or the file that exists")
    return list(dict.fromkeys(found))


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_document_cites_only_what_the_repository_holds(doc: Path) -> None:
    assert problems(doc) == []


def test_design_note_is_in_the_repository() -> None:
    assert (ROOT / "docs" / "design.md").is_file()


# ---- the checks can fail: each planted fault is found ------------------------------------------

PLANTED = [
    ("see [the engine](docs/engine-old.md)", "dead link"),
    ("see [proofs](docs/proofs.md#no-such-heading)", "no heading"),
    ("the guarantees come from `shared/DESIGN.md`", "outside the repository"),
    ("(GuardrailLoop paper, seeds/004_a456dd0d21523cab.txt)", "seed file name"),
    ("follows the protocol of (seed paper 003) on", "file number"),
    ("the per-idle-pass call of issue 5 is not wired", "issue number"),
    ("as Issue #3 asks", "issue number"),
    ("fixed in #12", "issue number"),
    ("the guarantee id of DESIGN.md", "'DESIGN.md'"),
    ("tests/engine/admission/conformance/cases.py holds the CF cases", "tests/engine/admission/conformance/cases.py"),
    ("paper/draft.tex  the write-up", "'paper/draft.tex'"),
    ("make paper writes paper/generatd/macros.tex", "'paper/generatd/macros.tex'"),
]


@pytest.mark.parametrize("line, expected", PLANTED)
def test_a_planted_bad_citation_is_reported(line: str, expected: str) -> None:
    found = problems(ROOT / "README.md", f"# loopproof\n\n{line}\n")
    assert found and all("README.md:3" in f for f in found), found
    assert any(expected in f for f in found), found


@pytest.mark.parametrize("line", [
    "see [proofs](docs/proofs.md#how-to-add-a-new-guarantee-worked-example)",
    "the ledger (`engine/record/ledger.py`) writes results/crash/cases.csv",
    "`engine/commands/<name>.py` and `experiments/<study>/`",
    "[the license](LICENSE) and [a site](https://example.org/x.md)",
    "the admission broker issued evidence; issues of style",
    "make paper writes paper/generated/ and paper/build/loopproof.pdf",
])
def test_a_good_citation_is_not_reported(line: str) -> None:
    assert problems(ROOT / "README.md", f"# loopproof\n\n{line}\n") == []


# ---- the README is the map: every page and every subcommand is on it ---------------------------

def section(text: str, heading: str) -> str:
    """The body of the README section `## heading`, up to the next `## `."""
    body = text.split(f"\n## {heading}\n", 1)
    assert len(body) == 2, f"README.md: no section '## {heading}'; fix: restore it"
    return body[1].split("\n## ", 1)[0]


def map_problems(text: str) -> list[str]:
    """Pages of docs/ the README's documentation list does not link, and `loopproof` subcommands
    its five-minute tour does not run, as `README.md: what; fix: ...` lines."""
    from loopproof.engine.cli import COMMANDS

    listed = set(LINK.findall(section(text, "Documentation")))
    tour = section(text, "A five-minute tour")
    found = [f"README.md: the documentation list does not link docs/{p.name}; fix: add a line "
             f"for it" for p in sorted((ROOT / "docs").glob("*.md"))
             if f"docs/{p.name}" not in listed]
    found += [f"README.md: the tour never runs `loopproof {name}`; fix: add a command for it"
              for name in COMMANDS if not re.search(rf"loopproof {name}\b", tour)]
    return found


def test_readme_links_every_page_and_tours_every_subcommand() -> None:
    assert map_problems((ROOT / "README.md").read_text(encoding="utf-8")) == []


def test_a_page_or_subcommand_left_off_the_readme_is_reported() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    no_page = text.replace("- [docs/growth.md](docs/growth.md)", "- docs/growth")
    assert any("docs/growth.md" in p for p in map_problems(no_page))
    no_command = re.sub(r"loopproof receipt\b", "lp-receipt", text)
    assert any("loopproof receipt" in p for p in map_problems(no_command))
