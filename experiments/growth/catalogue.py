"""The code-owned feature catalogue of the growth loop, and its offline deterministic planner.

Why a catalogue: the planner may only *name* features; what a feature does (which knob moves by
how much) is written here, in code, and each knob has a declared range, so no planner output can
move the evolution state anywhere the catalogue does not reach (engine.policy.evolution checks
every reply). The bounded state is the seven optimisation/data knobs and the self-check flag of
experiments/growth/sim.py.

The planner sees only what a planner should: the last evaluation's per-task success (its
evidence), the current configuration with each knob's range, and each feature's description
(which tasks it is meant to help). It never sees a number the simulator uses. It is a pure
function of its context, so a call repeated after a crash returns the same reply.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from experiments.growth import sim
from loopproof.engine.policy.catalog import Catalog, Feature, Knob

AGENTS = ("grasp_specialist", "data_curator")
PLANNER = "offline-deterministic/1"


def _helps(knob: str) -> str:
    return "helps " + ", ".join(sim.HELPS[knob])


FEATURES: tuple[Feature, ...] = (
    *(Feature(f"raise_{k}", {k: 1.0}, f"one more level of {k}; {_helps(k)}") for k in sim.KNOBS),
    Feature("enable_self_check", {sim.FLAG: 1.0}, f"check the grasp before each fold; "
            f"{_helps(sim.FLAG)}"),
    Feature("lower_learning_rate", {"learning_rate": -1.0}, "one level less of learning_rate; "
            "undoes raise_learning_rate"),
    Feature("batch_and_warmup", {"batch_size": 1.0, "warmup": 1.0},
            "raise batch_size and warmup together; helps sleeves, fold_thirds, stack, fold_half"),
)


def build() -> Catalog:
    knobs = [Knob(k, 0.0, float(sim.KNOB_LEVELS), 0.0) for k in sim.KNOBS]
    knobs.append(Knob(sim.FLAG, 0.0, 1.0, 0.0))
    return Catalog.build(knobs, FEATURES, agents=AGENTS, per_round=2, per_idle=1,
                         source="experiments/growth/catalogue.py")


CATALOG = build()


def digest(catalog: Catalog = CATALOG) -> str:
    """sha256 of the catalogue's content, recorded at run start (a resume must use the same)."""
    body = {"knobs": {n: [k.low, k.high, k.default] for n, k in sorted(catalog.knobs.items())},
            "features": {f.id: dict(sorted(f.effects.items())) for f in
                         sorted(catalog.features.values(), key=lambda f: f.id)},
            "agents": sorted(catalog.agents), "limits": [catalog.per_round, catalog.per_idle]}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _targets(description: str) -> set[str]:
    """The tasks a feature's description says it helps (the planner's only view of a feature)."""
    if "helps " not in description:
        return set()
    return {t.strip() for t in description.split("helps ", 1)[1].split(",")}


def plan(context: Mapping[str, Any], catalog: Catalog = CATALOG) -> dict[str, Any]:
    """The offline deterministic planner: rank features by the shortfall of the tasks they say
    they help (from the evidence), skip those a knob's range would refuse, take `limit`.

    Ties break by feature id. Each selection carries its evidence and rationale; an agent is
    suggested (an inert proposal) when a task is still below half the target at round 3."""
    rates: Mapping[str, float] = context.get("evidence", {}).get("rates", {})
    config: Mapping[str, float] = context["config"]
    target = float(context.get("evidence", {}).get("target", sim.TARGET))
    shortfall = {t: max(0.0, target - float(rates.get(t, 0.0))) for t in sim.TASKS}
    ranked = []
    for fid in sorted(context["features"]):
        f = catalog.features[fid]
        fits = all(catalog.knobs[k].holds(config[k] + d) for k, d in f.effects.items())
        score = sum(shortfall[t] for t in _targets(f.description))
        if fits and score > 0 and all(d > 0 for d in f.effects.values()):
            ranked.append((-round(score, 9), fid))
    picks = []
    for _, fid in sorted(ranked)[:int(context["limit"])]:
        helped = sorted(_targets(catalog.features[fid].description), key=lambda t: -shortfall[t])
        picks.append({"id": fid,
                      "evidence": "; ".join(f"{t} {rates.get(t, 0.0):.3f}" for t in helped),
                      "rationale": f"largest summed shortfall below {target:g} on the tasks "
                                   f"it helps ({helped[0]} lowest)"})
    reply: dict[str, Any] = {"features": picks}
    weakest = min(sim.TASKS, key=lambda t: (rates.get(t, 0.0), t))
    if context["stage"] == "round" and context["round"] == 3 and \
            rates.get(weakest, 1.0) < target / 2:
        reply["agents"] = [{"id": "grasp_specialist",
                            "rationale": f"{weakest} is still below half the target"}]
    return reply
