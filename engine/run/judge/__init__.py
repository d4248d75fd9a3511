"""Judge kinds: gates whose verdict the judged code cannot forge (docs/gates.md).

One interface (the engine's `Gate`, engine/run/gate.py), one adapter per kind: `calls`
(engine/run/judge/calls.py), `program` (program.py), `pytest` (pytest_gate.py), read from a
`[node.NAME.gate]` table (table.py). Each runs the judged code in a sandbox of its own on a
scratch copy of the judged tree (scratch.py), gets back strict JSON (wire.py) and decides in the
engine by asking the model's rule (decide.py, model/judging.py).
"""

from loopproof.engine.run.judge.calls import CallsGate
from loopproof.engine.run.judge.program import ProgramGate
from loopproof.engine.run.judge.pytest_gate import PytestGate

__all__ = ["CallsGate", "ProgramGate", "PytestGate"]
