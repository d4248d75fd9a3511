"""An expensive artefact (a study's run, a results folder) built once per test session, however
many xdist workers ask for it, and read by the tests that need it.

pytest-xdist's documented pattern: the first worker to take a `filelock.FileLock` in the
session's shared temporary folder (the parent of every worker's basetemp; without xdist, this
session's basetemp) builds the artefact there; the others wait on the lock and read the folder
it left. The folder is shared: a test only
reads it (copy it into tmp_path to change it). A build that raises leaves no folder behind, so the
next test asking for it builds it again and sees the same error.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def built_once(factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], None]) -> Path:
    """The folder `<shared>/built-once/<name>`, made by `build(folder)` the first time any worker
    of this session asks for `name` (`build` writes into the empty folder it is given)."""
    base = factory.getbasetemp()
    # under xdist each worker's basetemp is <session>/popen-gwN; without it, basetemp is the
    # session's own folder (its parent holds earlier sessions' folders: never read those)
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "built-once"
    shared.mkdir(parents=True, exist_ok=True)
    folder = shared / name
    done = shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder
