"""Under bwrap a worker's inputs/ is read-only by mount, not by mode: the handed-off files keep
their modes, so a copy the worker makes (`cp` keeps the mode) is an ordinary file of its own,
and after a repair the node's next activation can overwrite it. Writing into inputs/ itself
still fails (even as root), and without a sandbox the mode rule stays."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from tests.support.engine_child import engine_run

# b copies its input, records its activation; its gate rejects activation 0, so b exhausts its
# one attempt, repairs a, and runs again (activation 1): the `cp` must overwrite b.txt then
GRAPH = """
[graph]
spend_budget = 100
repair_budget = 1
price = 0.001
{sandbox}

[node.a]
worker = ["/bin/sh", "-c", "echo a > a.txt"]
gate = ["/bin/sh", "-c", "test -f a.txt"]
spend_ceiling = 1

[node.b]
needs = ["a"]
repairs = ["a"]
worker = ["/bin/sh", "-c", "cp inputs/a/a.txt b.txt && echo $LOOPPROOF_ACTIVATION > act.txt && (echo x > inputs/a/a.txt; echo $? > wrote.txt; true)"]
gate = ["/bin/sh", "-c", "test -f b.txt && test \\"$(cat act.txt)\\" != 0"]
spend_ceiling = 1
"""


def run(tmp: Path, sandbox: str) -> tuple[int, dict]:
    spec = tmp / "graph.toml"
    spec.write_text(GRAPH.format(sandbox=f'sandbox = "{sandbox}"'))
    proc = engine_run(["cli", "run", str(spec), "--ledger", str(tmp / "l.jsonl"), "--json"],
                      env={"PATH": os.environ["PATH"]})
    return proc.returncode, json.loads(proc.stdout or "{}")


def test_a_copied_input_is_the_workers_own_file_and_the_repair_succeeds(tmp_path: Path):
    code, report = run(tmp_path, "bwrap")
    assert code == 0, report
    assert report["nodes"]["b"]["activation"] == 1 and report["repairs_used"] == 1
    ws = tmp_path / "l.jsonl.work" / "b"
    assert stat.S_IMODE((ws / "b.txt").stat().st_mode) & 0o200  # an ordinary writable file
    assert (ws / "inputs" / "a" / "a.txt").read_text() == "a\n"  # the worker could not write
    assert (ws / "wrote.txt").read_text().strip() != "0"


def test_without_a_sandbox_inputs_stay_read_only_by_mode_and_edits_still_fail(tmp_path: Path):
    code, report = run(tmp_path, "none")
    # the mode rule (0o444) stays; a worker that writes into inputs/ anyway (root ignores
    # modes) is caught when its copy is judged, and the node fails after its repair
    assert code == 3, report
    ws = tmp_path / "l.jsonl.work" / "b"
    assert stat.S_IMODE((ws / "inputs" / "a" / "a.txt").stat().st_mode) == 0o444
