"""Red team: a successor's worker rewrites the predecessor's tree it was handed (`inputs/`).

docs/threat-model.md says a worker sees `inputs/` read-only. The hand-off makes the copy
read-only by its modes, but a worker run as root (uid 0 without capabilities still owns the
files) can `chmod u+w` them back and rewrite what it was given, and so make its own gate, which
checks the answer against the input, accept a forgery. The node must not end DONE.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.run.runner import Runner
from engine.run.spec import load


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
    assert b == ["error"] and code != 0
