"""Study runs (and notebook executions) that several tests of tests/experiments/ only read, each
made once per session (tests/support/built_once.py)."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest

from experiments.figures import execute
from experiments.integrity import study as integrity
from experiments.transition.study import Scale, main, run_experiment
from tests.support.built_once import built_once
from tests.support.paths import REPO

# The transition study at its smallest useful size: two tasks, one seed, two revisions.
TINY_TRANSITION = Scale(tasks=2, seeds=1, revisions=2, n_boot=200, n_flips=200)


def _serial_transition(folder: Path) -> None:
    summary = run_experiment(scale_name="smoke", seed=3, out=folder / "out", workers=1,
                             scale=TINY_TRANSITION)
    (folder / "returned.pickle").write_bytes(pickle.dumps(summary))


@pytest.fixture
def serial_transition(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The transition study at TINY_TRANSITION, seed 3, one worker: (its output folder, the
    summary run_experiment returned). Read only: the folder is shared with other tests."""
    folder = built_once(tmp_path_factory, "transition-tiny-seed3-serial", _serial_transition)
    return folder / "out", pickle.loads((folder / "returned.pickle").read_bytes())


def _integrity_smoke(folder: Path) -> None:
    summary = integrity.run_experiment("smoke", 3, folder / "integrity")
    (folder / "returned.pickle").write_bytes(pickle.dumps(summary))


@pytest.fixture
def integrity_smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The integrity study at smoke scale, seed 3: (the results root holding integrity/, the
    summary run_experiment returned). test_integrity.py checks the run, test_notebooks.py draws
    the notebook from a copy of it. Read only."""
    folder = built_once(tmp_path_factory, "integrity-smoke-seed3", _integrity_smoke)
    return folder, pickle.loads((folder / "returned.pickle").read_bytes())


def _both_coders(root: Path, search_run: Path) -> None:
    shutil.copytree(search_run, root / "transition")
    stored = REPO / "experiments" / "transition" / "replies" / "llm-smoke"
    assert main(["--coder", "llm", "--llm", "1.5b", "--scale", "llm-smoke", "--replay",
                 str(stored), "--out", str(root / "transition-llm")]) == 0
    execute("transition", root, timeout=300)


@pytest.fixture
def transition_results(tmp_path_factory: pytest.TempPathFactory,
                       serial_transition: tuple[Path, dict]) -> Path:
    """A results root as `make reproduce` leaves it for the transition study: the search coder's
    run in transition/ (the session's serial run above), the 1.5B model's stored smoke replies
    replayed in transition-llm/ (its command line), and notebooks/transition.ipynb executed on
    both (its figure in each folder, its executed copy in notebooks/). Made once per session:
    the notebook tests executed it twice (search coder alone, then both) on two runs of the
    search coder of their own. Read only: copy it into tmp_path to change it."""
    return built_once(tmp_path_factory, "transition-both-coders",
                      lambda root: _both_coders(root, serial_transition[0]))
