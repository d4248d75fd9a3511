"""The repository at its base commit: python-semver 3.2.0 (vendored in tests/fixtures/real/semver,
named in the worker's argv, so the sandbox shows it wherever the checkout lies) with the bug this
task is about, as a SWE-bench harness checks out the commit before the fix.

The project's own tests/ folder is the gate's (pinned, hidden from every worker), so the copy
has none: the agent works from the issue, as it would against SWE-bench's hidden tests."""

import shutil
from pathlib import Path

FIXED = "        return cls(self._major, self._minor + 1)\n"
BUGGY = "        return cls(self._major, self._minor + 1, self._patch)\n"


def checkout(repo: Path, dest: Path) -> None:
    """The base commit's tree of `repo`, in `dest`."""
    shutil.copytree(repo / "src", dest / "src", dirs_exist_ok=True)
    shutil.copy(repo / "LICENSE.txt", dest / "LICENSE.txt")
    version = dest / "src" / "semver" / "version.py"
    version.write_text(version.read_text().replace(FIXED, BUGGY))
    (dest / "ISSUE.md").write_text("Version.bump_minor() keeps the patch number: "
                                   "Version(3, 4, 5).bump_minor() should be 3.5.0, not 3.5.5.\n")
