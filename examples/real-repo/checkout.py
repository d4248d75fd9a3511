"""The repository at its base commit: python-semver 3.2.0 (vendored in tests/fixtures/real/semver)
with the bug this task is about, as a SWE-bench harness checks out the commit before the fix.

The project's own tests/ folder is the gate's (pinned, hidden from every worker), so the copy
has none: the agent works from the issue, as it would against SWE-bench's hidden tests."""

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent / "tests" / "fixtures" / "real" / "semver"
FIXED = "        return cls(self._major, self._minor + 1)\n"
BUGGY = "        return cls(self._major, self._minor + 1, self._patch)\n"


def checkout(dest: Path) -> None:
    """The base commit's tree, in `dest`."""
    shutil.copytree(REPO / "src", dest / "src", dirs_exist_ok=True)
    shutil.copy(REPO / "LICENSE.txt", dest / "LICENSE.txt")
    version = dest / "src" / "semver" / "version.py"
    version.write_text(version.read_text().replace(FIXED, BUGGY))
    (dest / "ISSUE.md").write_text("Version.bump_minor() keeps the patch number: "
                                   "Version(3, 4, 5).bump_minor() should be 3.5.0, not 3.5.5.\n")
