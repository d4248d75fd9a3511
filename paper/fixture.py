"""Refresh the tests' small results folder (tests/fixtures/paper-results) from a real run:

    python -m experiments.reproduce --scale smoke      # writes results/
    python -m paper.fixture results

Only the files `python -m paper` flattens are copied (tree.FLATTENED), so the fixture stays
small and is what a smoke run writes, never edited by hand.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from paper.tree import Results

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "paper-results"


def refresh(source: Path, dest: Path = FIXTURE) -> list[str]:
    files = [f for f in Results(source).files() if (source / f).is_file()]
    if dest.exists():
        shutil.rmtree(dest)
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, dest / rel)
    return files


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("python -m paper.fixture RESULTS_DIR: name the results folder of a smoke run",
              file=sys.stderr)
        return 2
    for rel in refresh(Path(args[0])):
        print(rel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
