"""A growth run's folder: the pinned policy and evaluation it is judged by, its ledger, and the
count of real executions kept outside the ledger (so a repeat after a crash is counted by what
ran, not by what the ledger says)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from experiments.growth import sim
from loopproof.engine.record.ledger import Ledger

LEDGER, POLICY, EVALUATION, CALLS = "ledger.jsonl", "policy.toml", "evaluation.json", "calls.txt"


def prepare(folder: Path, budget: float) -> Path:
    """Write the pinned policy and the pinned evaluation a run of `budget` GPU-hours uses."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / EVALUATION).write_text(json.dumps({
        "tasks": list(sim.TASKS), "episodes_per_task": sim.EPISODES_PER_TASK,
        "work": sim.EVAL_WORK, "target": sim.TARGET,
        "draws": "sha256(growth-eval/seed/index/task) -> mt19937"}, sort_keys=True) + "\n")
    (folder / POLICY).write_text(
        "[policy]\n"
        f'goals = ["mean success >= {sim.TARGET:g} over the pinned 1,000-episode evaluation"]\n'
        'scope = ["the evolution state, through catalogue features only"]\n'
        f'[gate]\nfiles = ["{EVALUATION}"]\n'
        f"[budget]\nspend = {float(budget)!r}\nrepairs = 0\nattempts = 1\n"
        '[release]\nconditions = ["all_done", "ledger_verified"]\n')
    return folder


def read_records(folder: Path) -> list[dict[str, Any]]:
    """The verified records of the run in `folder` (a torn tail is cut, as on resume)."""
    with Ledger.open(Path(folder) / LEDGER) as led:
        return [dict(r) for r in led.records]


def calls(folder: Path) -> list[str]:
    p = Path(folder) / CALLS
    return p.read_text().splitlines() if p.exists() else []
