"""Study runs that several tests of tests/experiments/ only read, each made once per session
(tests/support/built_once.py)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from experiments.transition.study import Scale, run_experiment
from tests.support.built_once import built_once

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
