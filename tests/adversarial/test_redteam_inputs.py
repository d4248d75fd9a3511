"""Red team: a successor's worker rewrites the predecessor's tree it was handed (`inputs/`).

docs/threat-model.md says a worker sees `inputs/` read-only. Under bwrap it is a read-only
mount: a worker run as root (uid 0 without capabilities still owns the files) can no longer
`chmod u+w` them back and rewrite what it was given (before, with read-only modes only, it
could, and the re-check before its gate made the verdict an error), so its gate, which checks
the answer against the input, judges the forgery against the true input. The node must not end
DONE, and what it was handed stays as handed.
"""

from __future__ import annotations

import json
from pathlib import Path

from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load


def test_a_worker_cannot_rewrite_what_it_was_handed(tmp_path: Path) -> None:
    # a's gate accepts "good"; b must echo a's output reversed, and its gate compares the answer
    # with b's inputs/a (the hand-off it was given)
    forge = ("chmod -R u+w inputs/a 2>/dev/null; echo dab > inputs/a/out.txt 2>/dev/null; "
             "echo bad > answer.txt")
    nodes = {
        "a": (["sh", "-c", "echo good > out.txt"], ["sh", "-c", 'test "$(cat out.txt)" = good'],
              ""),
        "b": (["sh", "-c", forge],
              ["sh", "-c", 'test "$(rev inputs/a/out.txt)" = "$(cat answer.txt)"'],
              'needs = ["a"]\n'),
    }
    text = "[graph]\nspend_budget = 100.0\n"
    for name, (worker, gate, more) in nodes.items():
        text += (f"[node.{name}]\nworker = {json.dumps(worker)}\ngate = {json.dumps(gate)}\n"
                 f"spend_ceiling = 30.0\ntimeout_s = 20\ngate_timeout_s = 20\n{more}")
    (tmp_path / "graph.toml").write_text(text)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(load(tmp_path / "graph.toml"), ledger)
    try:
        code = runner.run()
    finally:
        runner.close()
    records = [json.loads(x) for x in ledger.read_text().splitlines()]
    b = [r["verdict"] for r in records if r["type"] == "verdict" and r["node"] == "b"]
    assert b == ["reject"] and code != 0  # the rewrite failed: the forgery met the real input
    assert (Path(f"{ledger}.work") / "b" / "inputs" / "a" / "out.txt").read_text() == "good\n"
