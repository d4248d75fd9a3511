"""The calibration table docs/growth.md quotes: the expected trajectory of the simulator along
the offline planner's path, with no noise.

For the r-th evaluation of a default round schedule (16 GPU-hours of training per round), with
round growth (the planner fed the expected per-task success as its evidence, two features per
round through the real catalogue checks) and without growth: the expected mean success, its
standard error over 1,000 episodes, and the normal-approximation probability that the
evaluation meets the target. The study's seeds scatter around this path.
"""

from __future__ import annotations

import math
from typing import Any

from experiments.growth import catalogue, sim
from loopproof.engine.policy.evolution import evolve


def table(rounds: int = 10) -> list[dict[str, Any]]:
    cat = catalogue.CATALOG
    config = cat.defaults()
    out = []
    for r in range(rounds):
        hours = sim.ROUND_WORK * (r + 1)
        probs = sim.success_probabilities(config, hours)
        grown = sum(probs) / len(probs)
        flat = sim.expected_rate(cat.defaults(), hours)
        se = sim.standard_error(grown)
        levels = sum(config.values())
        out.append({"evaluation": r + 1, "hours": hours, "levels": levels,
                    "expected_rate": round(grown, 4), "se": round(se, 4),
                    "p_meets_target": round(0.5 * math.erfc((sim.TARGET - grown) / (se * 2 ** 0.5)),
                                            4),
                    "expected_rate_no_growth": round(flat, 4)})
        context = {"stage": "round", "round": r, "config": config, "limit": cat.per_round,
                   "features": sorted(cat.features), "agents": sorted(cat.agents),
                   "evidence": {"rates": dict(zip(sim.TASKS, probs, strict=True)),
                                "target": sim.TARGET}}
        config = evolve(cat, config, catalogue.plan(context), stage="round", round=r).config
    return out
