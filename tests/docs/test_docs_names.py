"""Every dotted name of the code the docs give (`engine.run.kinds.KINDS`, `model.step`, a
`from engine.x import y` in a code block) exists: a doc that names a function the code no longer
has (docs/engine.md once showed a `make_revision_node`) fails here, naming the doc and the name.
Prose may name the installed packages short (`model.step` for `loopproof.model.step`)."""

from __future__ import annotations

import importlib
import re

from tests.support.paths import REPO

PACKAGES = "(?:loopproof\\.)?(?:engine|model|proofs)|experiments"
INSTALLED = ("engine", "model", "proofs")  # short in prose, under `loopproof.` when imported
DOTTED = re.compile(rf"`((?:{PACKAGES})\.[A-Za-z_][A-Za-z_0-9.]*)(?:\(\))?`")
IMPORT = re.compile(rf"^from ((?:{PACKAGES})[\w.]*) import ([\w, ]+)", re.M)


def names_in(text: str) -> set[str]:
    names = set(DOTTED.findall(text))
    for module, listed in IMPORT.findall(text):
        names |= {f"{module}.{n.strip()}" for n in listed.split(",")}
    return names


def resolves(name: str) -> bool:
    """The longest importable module prefix, then attributes for the rest."""
    parts = name.split(".")
    if parts[0] in INSTALLED:
        parts.insert(0, "loopproof")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def test_every_name_the_docs_give_exists() -> None:
    docs = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
    missing = [f"{d.relative_to(REPO)}: {n}" for d in docs
               for n in sorted(names_in(d.read_text(encoding="utf-8"))) if not resolves(n)]
    assert missing == []


def test_a_name_that_is_gone_is_found() -> None:
    text = "`model.step` and\n```python\nfrom loopproof.engine.admission.revision import " \
           "make_revision_node\n```\n"
    assert names_in(text) == {"model.step",
                              "loopproof.engine.admission.revision.make_revision_node"}
    assert resolves("model.step")  # short in prose: loopproof.model.step
    assert not resolves("loopproof.engine.admission.revision.make_revision_node")
    assert not resolves("engine.no_such_module.f")
