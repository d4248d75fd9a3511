"""The code-owned catalogue a planner may name entries of: knobs with declared ranges, and
features whose numeric effects only code writes (engine/policy/evolution.py applies them).

Why validated here, once: a catalogue that could break the rules (a knob that is a policy field,
an effect without a knob, a non-finite range or delta) is never built, so evolution never has to
ask whether an entry may be applied, only whether a planner's selection of it may.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from loopproof.engine.policy.pin import FIELDS as POLICY_DECLARATION
from loopproof.engine.system.errors import BadInput

Stage = Literal["round", "idle"]

# Names of the pinned human policy's fields, from its one declaration (engine.policy.pin.FIELDS):
# each table ("budget"), each field ("budget.spend") and each field's own name ("spend"), plus
# the graph's budget fields. A planner reply that names any of them is rejected and recorded:
# evolution has no write path to policy.
POLICY_FIELDS: frozenset[str] = frozenset(
    {f.name for f in POLICY_DECLARATION}
    | {part for f in POLICY_DECLARATION for part in f.name.split(".")}
    | {"spend_budget", "repair_budget", "gates", "evaluation", "release_conditions"})

@dataclass(frozen=True)
class Knob:
    """A tunable configuration value with its declared, inclusive range."""

    name: str
    low: float
    high: float
    default: float

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Feature:
    """A catalogue entry. `effects` maps knob -> numeric delta; only code writes these numbers."""

    id: str
    effects: Mapping[str, float]
    description: str = ""


@dataclass(frozen=True)
class Catalog:
    """The code-owned catalogue: knobs, features and the per-stage change limits."""

    knobs: Mapping[str, Knob]
    features: Mapping[str, Feature]
    agents: frozenset[str] = frozenset()
    per_round: int = 2
    per_idle: int = 1

    @classmethod
    def build(cls, knobs: Iterable[Knob], features: Iterable[Feature], *,
              agents: Iterable[str] = (), per_round: int = 2, per_idle: int = 1,
              source: str = "<catalog>") -> Catalog:
        """Validate once, in code: a catalogue that could break the rules is never built."""
        knob_map: dict[str, Knob] = {}
        for k in knobs:
            if k.name in knob_map:
                raise BadInput(source, f"knob {k.name}", "declared twice", "declare each knob once")
            if k.name in POLICY_FIELDS:
                raise BadInput(source, f"knob {k.name}", "is a policy field",
                               "policy fields are pinned; rename the knob")
            if not (_finite(k.low) and _finite(k.high) and k.low <= k.high and k.holds(k.default)):
                raise BadInput(source, f"knob {k.name}",
                               f"range [{k.low}, {k.high}] with default {k.default} is not valid",
                               "give finite low <= default <= high")
            knob_map[k.name] = k
        feat_map: dict[str, Feature] = {}
        for f in features:
            if f.id in feat_map:
                raise BadInput(source, f"feature {f.id}", "declared twice", "declare each id once")
            if not f.effects:
                raise BadInput(source, f"feature {f.id}", "has no effect", "give it a knob delta")
            for knob, delta in f.effects.items():
                if knob not in knob_map:
                    raise BadInput(source, f"feature {f.id}", f"unknown knob {knob!r}",
                                   f"declare knob {knob!r} or remove it from the effects")
                if not _finite(delta):
                    raise BadInput(source, f"feature {f.id}", f"delta {delta!r} is not finite",
                                   "give a finite number")
            feat_map[f.id] = Feature(f.id, MappingProxyType(dict(f.effects)), f.description)
        for name, limit in (("per_round", per_round), ("per_idle", per_idle)):
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise BadInput(source, name, f"must be an integer >= 0, got {limit!r}",
                               "set it to 0 or more")
        return cls(MappingProxyType(knob_map), MappingProxyType(feat_map), frozenset(agents),
                   per_round, per_idle)

    def defaults(self) -> dict[str, float]:
        return {name: k.default for name, k in sorted(self.knobs.items())}

    def limit(self, stage: Stage) -> int:
        return self.per_round if stage == "round" else self.per_idle


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


TIMEOUT_KNOB = "timeout_s."  # + node name
TIGHTEN = "tighten_timeout."  # + node name


def timeout_catalog(timeouts: Mapping[str, float]) -> Catalog:
    """The catalogue a run's `[planner]` may name (engine/run/planner.py): per command node, one
    feature that LOWERS the worker's timeout_s by half of its declared value, within
    [timeout/2, timeout]. Nothing can raise it: a worker's timeout only caps its wall-clock
    reservation, so a lower one never lets an attempt spend more, and attempts, spend ceilings,
    budgets and repairs (everything W and W_c depend on) are not knobs at all."""
    knobs = [Knob(TIMEOUT_KNOB + n, t / 2, t, t) for n, t in sorted(timeouts.items())]
    feats = [Feature(TIGHTEN + n, {TIMEOUT_KNOB + n: -t / 2},
                     f"halve node {n!r}'s worker timeout_s (once)")
             for n, t in sorted(timeouts.items())]
    return Catalog.build(knobs, feats, source="[planner]")
