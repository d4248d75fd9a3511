"""Each example run once per test session, as `make reproduce` runs it, for the tests that only
read what the run left (tests/examples/test_examples.py; the local runs that
tests/engine/run/remote/test_remote_attempts.py compares a remote run with).

The run: `loopproof run examples/NAME/graph.toml --ledger NAME.jsonl --json`, in this process,
from an empty folder of its own (a relative ledger, as `make reproduce` passes), built once per
session however many xdist workers ask (tests/support/built_once.py). The folder is shared: read
it, never change it (copy it into tmp_path to).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from loopproof.engine import cli
from tests.support.built_once import built_once
from tests.support.paths import REPO

EXAMPLES = REPO / "examples"


def example_run(factory: pytest.TempPathFactory, name: str) -> tuple[int, dict[str, Any], Path]:
    """(exit code, the --json report, the folder the run was started in) of examples/NAME."""

    def build(folder: Path) -> None:
        out, here = io.StringIO(), os.getcwd()
        os.chdir(folder)
        try:
            with contextlib.redirect_stdout(out):
                code = cli.main(["run", str(EXAMPLES / name / "graph.toml"), "--ledger",
                                 f"{name}.jsonl", "--json"])
        finally:
            os.chdir(here)
        (folder / "run.json").write_text(json.dumps({"code": code,
                                                     "report": json.loads(out.getvalue())}))

    folder = built_once(factory, f"example-{name}", build)
    got = json.loads((folder / "run.json").read_text())
    return got["code"], got["report"], folder
