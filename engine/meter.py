"""The spend meter of one attempt: reserve before use, settle after, every step a ledger record.

Why inside the attempt: a harness that checks spend only between attempts lets one attempt run
far past its cap. Here every metered operation first reserves (a `Reserve` event, appended to the
ledger before the operation starts); a reservation that does not fit is an `Overrun` event and
raises `BudgetOverrun` inside the attempt, so the operation never runs. A command is reserved
for min(timeout_s, what is left of c_v) seconds and its whole process group is killed when that
runs out; it is then settled for the seconds it used, never more than it reserved.

The meter changes nothing itself: it hands each model event and its record to `commit`, which
steps the model and appends the record (see engine/runner.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.faults import crashpoint
from engine.process import ProcessError, ProcessResult, run_command
from model import LoopGraph, Overrun, Reserve, RunState, Settle, enabled
from model.transitions import EPS, Event

Commit = Callable[[Event, dict[str, Any]], RunState]

WALL_CLOCK = "wall_clock"  # 1 spend unit = 1 second of a command worker's wall clock
METER_SITES = ("meter.after_reserve", "meter.before_settle")


class BudgetOverrun(Exception):
    """A reservation did not fit the attempt's ceiling or the run's budget. The operation did not
    run and the attempt has ended; every later metered call in this attempt raises again."""


@dataclass(frozen=True)
class Metered:
    """A metered command: what the process did, what was reserved and what was charged."""

    result: ProcessResult
    reserved: float
    charged: float
    killed: str | None  # "timeout" | "ceiling" | None


class Meter:
    """The meter handle an attempt gets. Python-callable workers call `charge` (or `reserve` and
    `settle`) before each paid operation; command workers go through `run_command`."""

    def __init__(self, graph: LoopGraph, node: str, commit: Commit,
                 state: Callable[[], RunState], sync: Callable[[], None] | None = None) -> None:
        self.graph, self.node, self._commit, self._state = graph, node, commit, state
        self._sync = sync  # makes the Reserve record durable before the operation runs
        self.outstanding = 0.0
        self.overrun = False

    # ---- reads ------------------------------------------------------------------------------
    @property
    def ceiling(self) -> float:
        return self.graph.node(self.node).spend_ceiling

    def allowance(self) -> float:
        """The most the attempt may still reserve: the rest of c_v, capped by the rest of B."""
        s = self._state()
        return max(0.0, min(self.ceiling - s.attempt_spend,
                            self.graph.spend_budget - s.settled - s.reserved))

    @property
    def in_attempt(self) -> bool:
        return not self.overrun and self._state().running(self.graph) == self.node

    # ---- reserve / settle ------------------------------------------------------------------
    def reserve(self, amount: float, what: str = "charge") -> float:
        """Hold `amount` before a paid operation; raises `BudgetOverrun` if it does not fit."""
        if not self.in_attempt:
            raise BudgetOverrun(f"{self.node}: the attempt has ended; nothing more may be spent")
        if self.outstanding > EPS:
            raise RuntimeError("a reservation is outstanding: settle it before reserving again")
        amount = float(amount)
        base = {"node": self.node, "what": what}
        if not enabled(self.graph, self._state(), Reserve(amount)):
            self.overrun = True
            s = self._state()
            self._commit(Overrun(amount), {**base, "attempt_spend": s.attempt_spend,
                                           "ceiling": self.ceiling})
            raise BudgetOverrun(f"{self.node}: reserving {amount:g} would exceed the ceiling "
                                f"c_v={self.ceiling:g} or the budget B={self.graph.spend_budget:g}")
        self._commit(Reserve(amount), base)
        if self._sync is not None:
            self._sync()
        self.outstanding = amount
        crashpoint("meter.after_reserve")
        return amount

    def settle(self, used: float, what: str = "charge", **facts: Any) -> float:
        """Charge what the operation used (capped at the reservation) and release the rest."""
        crashpoint("meter.before_settle")
        charged = min(max(0.0, round(float(used), 6)), self.outstanding)
        self._commit(Settle(charged), {"node": self.node, "reserved": self.outstanding,
                                       "what": what, **facts})
        self.outstanding = 0.0
        return charged

    def charge(self, amount: float, what: str = "charge") -> float:
        """Reserve and settle a known price (e.g. an API call) before the call is made."""
        self.reserve(amount, what)
        return self.settle(amount, what)

    def close(self) -> None:
        """End of the worker: a reservation left open is charged in full."""
        if self.outstanding > EPS and self.in_attempt:
            self.settle(self.outstanding, "unsettled at worker end")

    # ---- commands ----------------------------------------------------------------------------
    def run_command(self, argv: Sequence[str], cwd: Path, timeout_s: float, *,
                    env: Mapping[str, str] | None = None) -> Metered:
        """Run a command under wall-clock metering: reserve min(timeout_s, allowance) seconds,
        kill the process group when that runs out, settle the seconds used."""
        reserved = self.reserve(min(float(timeout_s), self.allowance()), WALL_CLOCK)
        ceiling_binds = reserved < timeout_s
        try:
            res = run_command(argv, cwd, reserved, env=env)
        except ProcessError as exc:  # it never started: nothing was used
            self.settle(0.0, WALL_CLOCK, error=str(exc))
            raise
        killed = res.killed and ("ceiling" if ceiling_binds else "timeout")
        charged = self.settle(res.seconds, WALL_CLOCK, seconds=round(res.seconds, 6),
                              killed=killed or None)
        return Metered(res, reserved, charged, killed or None)
