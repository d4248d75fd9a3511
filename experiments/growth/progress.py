"""What a growth run's records say: its arm and resources, and the loop's progress (`View`).

Why apart from the loop: resume rebuilds all of this from the ledger alone, so it is a fold over
records with no other input; the loop folds each record in as it appends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Arm:
    """Which growth the run may use (the 2x2 study's factors)."""

    round_growth: bool = True
    idle_growth: bool = True

    @property
    def name(self) -> str:
        return f"R{int(self.round_growth)}I{int(self.idle_growth)}"


@dataclass(frozen=True)
class Resources:
    """What a tick is: `gpus` x `step` hours of work, charged at `price` per GPU-hour."""

    gpus: int = 4
    step: float = 0.25
    price: float = 1.0

    @property
    def tick_work(self) -> float:
        return self.gpus * self.step

    def record(self) -> dict[str, float]:
        return {"gpus": self.gpus, "step": self.step, "price": self.price}


@dataclass
class View:
    """What the records say about the loop, beyond the model state (folded as they append)."""

    resources: Resources
    round: int = -1
    round_work: float = 0.0
    done: float = 0.0            # training work done in the current round
    hours: float = 0.0           # training work done in the run
    gauge: int = 0               # ticks so far (monotone)
    evaluated: bool = False      # the current round's evaluation is recorded
    closed: bool = True          # the current round's stage_done is recorded
    cut: bool = False            # the current round stopped training early (budget)
    last_eval: dict[str, Any] | None = None
    hit_round: int | None = None
    to_target: float | None = None
    idle_done: bool = False
    open_what: str | None = None
    open_ticks: list[dict[str, Any]] = field(default_factory=list)
    evaluations: int = 0
    settled: float = 0.0         # the settle records' running sum (the model adds the same)

    def apply(self, rec: Mapping[str, Any]) -> None:
        t = rec["type"]
        if t == "round":
            self.round, self.round_work = rec["round"], rec["work"]
            self.done, self.evaluated, self.closed, self.cut = 0.0, False, False, False
        elif t == "tick":
            self.done += rec["work"]
            self.hours += rec["work"]
            self.gauge = rec["tick"]
            self.open_ticks.append(dict(rec))
        elif t == "round_cut":
            self.cut = True
        elif t == "evaluation":
            self.evaluated, self.last_eval = True, dict(rec)
            self.evaluations += 1
            if rec["target_met"] and self.hit_round is None:
                self.hit_round = rec["round"]
        elif t == "reserve":
            self.open_what, self.open_ticks = rec.get("what"), []
        elif t == "settle":
            self.open_what = None
            self.settled += rec["amount"]
            if rec.get("what") == "evaluation" and self.hit_round is not None \
                    and self.to_target is None:
                self.to_target = self.settled
        elif t == "stage_done":
            self.closed = True
        elif t == "idle_finished":
            self.idle_done = True
        elif t == "resources":
            self.resources = Resources(rec["gpus"], rec["step"], rec["new_price"])


FULL_LOOP = Arm()
DEFAULT_RESOURCES = Resources()
