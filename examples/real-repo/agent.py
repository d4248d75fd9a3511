"""The task's worker: the harness checks the repository out at its base commit
(checkout.py), then a scripted stand-in for a coding agent fixes the bug ISSUE.md describes.
Any agent can take its place: the gate judges the tree it leaves."""

import sys
from pathlib import Path

from checkout import BUGGY, FIXED, checkout

checkout(Path(sys.argv[1]), Path("."))
version = Path("src/semver/version.py")
version.write_text(version.read_text().replace(BUGGY, FIXED))
print("agent: Version.bump_minor resets the patch number")
