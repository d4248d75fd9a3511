"""Every `# type: ignore[code]` says why on its own line (`# type: ignore[code]  # why`), so a
reader can judge whether it still holds; a bare one hides whatever mypy would say next."""

import re

from tests.support.paths import REPO

PACKAGES = ("model", "proofs", "engine", "experiments", "bench", "paper", "tests")
NOT_YET = {"tests/test_type_ignores.py"}  # this file quotes bare ones
VENDORED = ("tests/fixtures/real/",)  # real projects' own code, judged as it was published
EXPLAINED = re.compile(r"# type: ignore\[[a-z-]+(, [a-z-]+)*\]  # \S")


def test_every_type_ignore_gives_its_reason() -> None:
    bare = []
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith(VENDORED):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if "# type: ignore" in line and not EXPLAINED.search(line) and rel not in NOT_YET:
                    bare.append(f"{rel}:{n}")
    assert not bare, "a # type: ignore without its reason: " + ", ".join(bare)
    assert EXPLAINED.search("x = y  # type: ignore[index]  # JSON")
    assert not EXPLAINED.search("x = y  # type: ignore[index]")
    assert not EXPLAINED.search("x = y  # type: ignore")
