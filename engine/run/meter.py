"""The spend meter of one attempt: reserve before use, settle after, every step a ledger record.

Why inside the attempt: a harness that checks spend only between attempts lets one attempt run
far past its cap. Here every metered operation first reserves (a `Reserve` event, appended to the
ledger before the operation starts); a reservation that does not fit is an `Overrun` event and
raises `BudgetOverrun` inside the attempt, so the operation never runs. A command is reserved
min(timeout_s x price, what the worker may still spend) units and its whole process group is
killed when that runs out; it is then settled for the seconds it used times the price, never
more than it reserved.

Evaluation is paid from the same ceiling. A node may hold back `eval_reserve` units of c_v for
its gate: the worker's own ceiling is then c_v - eval_reserve (a command is killed there), so
the gate's reservation always fits. The gate run is reserved right after the worker's
settlement (`reserve_evaluation`, what = "evaluation") and settled before the verdict; a gate
run that cannot be reserved is an `Overrun`, and the attempt fails without a verdict.

Prices: `price` spend units per wall-clock second (default 1), so a command's deadline is its
reservation / price seconds. The price can change on resume (a `resources` record).

Concurrent holds: a command worker's model calls (engine/run/proxy/) are metered while its
wall-clock reservation is open and while other calls are in flight. `hold` checks and commits
one `Reserve` under the meter's lock, so two calls can never both pass a check that only one of
them fits (the model checks each reservation against settled + every outstanding one);
`release` settles exactly that reservation (`Settle(amount, of=held)`).

Several attempts in flight: each has its own meter, and every meter takes the journal's one lock
(engine/run/journal.py) for its check and its record, so the reservations of all attempts are
checked one after another against settled + every open reservation of the run (two calls of two
attempts that each see room cannot both spend it). Every Reserve, Settle and Overrun names its
attempt's node, and the per-attempt figures (`spent_of`, `reserved_of`) are that node's.

The meter changes nothing itself: it hands each model event and its record to `commit`, which
steps the model and appends the record (see engine/run/journal.py).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopproof.engine.system import untrusted
from loopproof.engine.system.faults import crashpoint
from loopproof.engine.system.process import ProcessError, ProcessResult, run_command
from loopproof.engine.system.sandbox import Confinement
from loopproof.model import LoopGraph, Overrun, Reserve, RunState, Settle, Status, enabled
from loopproof.model.transitions import EPS, Event

Commit = Callable[[Event, dict[str, Any]], RunState]

WALL_CLOCK = "wall_clock"  # `price` spend units per second of a command worker's wall clock
EVALUATION = "evaluation"  # a gate run, metered by its wall clock at the same price
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
    killed: str | None  # "timeout" | "ceiling" | "limit" | "refused" | None


class Meter:
    """The meter handle an attempt gets. Python-callable workers call `charge` (or `reserve` and
    `settle`) before each paid operation; command workers go through `run_command`."""

    def __init__(self, graph: LoopGraph, node: str, commit: Commit,
                 state: Callable[[], RunState], sync: Callable[[], None] | None = None, *,
                 price: float = 1.0, eval_reserve: float = 0.0,
                 note: Callable[[dict[str, Any]], None] | None = None,
                 lock: threading.RLock | None = None) -> None:
        self.graph, self.node, self._commit, self._state = graph, node, commit, state
        self._note = note  # appends a fact record (no model event)
        self._sync = sync  # makes the Reserve record durable before the operation runs
        self.price = float(price)
        self.eval_reserve = float(eval_reserve)
        self.outstanding = 0.0
        self.overrun = False
        self.worker_stopped = False  # the worker reached c_v - eval_reserve
        self.evaluating = False  # the worker is done; only the gate run may still be paid
        self.broken: str | None = None  # why the worker broke its contract (a bad settle claim)
        self._holding = False  # a reservation is open (reserve(0) holds nothing, but is open)
        self.holds: dict[str, float] = {}  # concurrent reservations (model calls) by key
        # one meter step at a time: check and commit are atomic. With several attempts in flight
        # this is the journal's lock, shared by every attempt's meter: no other attempt commits
        # between this meter's check and its record (two reservations that each see room)
        self._lock = lock or threading.RLock()

    # ---- reads ------------------------------------------------------------------------------
    @property
    def ceiling(self) -> float:
        return self.graph.node(self.node).spend_ceiling

    @property
    def worker_ceiling(self) -> float:
        """What the worker may spend: c_v less the part held back for evaluation."""
        return self.ceiling - self.eval_reserve

    def allowance(self) -> float:
        """The most the worker may still reserve: the rest of c_v - eval_reserve, capped by the
        rest of B (during evaluation: the rest of c_v)."""
        s = self._state()
        top = self.ceiling if self.evaluating else self.worker_ceiling
        return max(0.0, min(top - self._spent(s),
                            self.graph.spend_budget - s.settled - s.reserved))

    def _spent(self, s: RunState) -> float:
        """What this attempt has settled and holds (the model's `spent_of`)."""
        return s.spent_of(self.graph, self.node)

    def _open(self) -> float:
        """This attempt's open reservations (the model's `reserved_of`)."""
        return self._state().reserved_of(self.graph, self.node)

    @property
    def in_attempt(self) -> bool:
        return (not self.overrun and self.broken is None
                and self._state().status_of(self.graph, self.node) is Status.RUNNING)

    # ---- reserve / settle ------------------------------------------------------------------
    def reserve(self, amount: float, what: str = "charge") -> float:
        """Hold `amount` before a paid operation; raises `BudgetOverrun` if it does not fit.
        An amount that is not a finite number >= 0, or a second reservation before the first
        is settled, breaks the worker's contract (`_broken`): the attempt fails, unjudged."""
        what = label(what)
        if not self.in_attempt:
            raise BudgetOverrun(f"{self.node}: the attempt has ended; nothing more may be spent")
        if self.worker_stopped and not self.evaluating:
            raise BudgetOverrun(f"{self.node}: the worker has reached c_v - eval_reserve = "
                                f"{self.worker_ceiling:g}; the rest pays for the gate")
        if self.holds:  # the engine's own concurrent holds (model calls): not a worker's ask
            raise RuntimeError("a reservation is outstanding: settle it before reserving again")
        if self._holding:
            raise self._broken(what, amount, "a reservation is outstanding: settle it first")
        asked = untrusted.amount(amount)
        if asked is None:
            raise self._broken(what, amount, "an amount must be a finite number >= 0")
        amount = asked
        base = {"node": self.node, "what": what}
        with self._lock:  # the check and the record in one step (see `hold`)
            s = self._state()
            if (self.eval_reserve > EPS and not self.evaluating
                    and self._spent(s) + amount > self.worker_ceiling + EPS):
                # the ask eats into the evaluation reserve: refused (the operation never runs) and
                # recorded as a fact, not an Overrun, because the attempt goes on to its gate, which
                # the reserve pays for (admission kept B - settled >= what is left of c_v)
                self.worker_stopped = True
                self._fact({"type": "worker_ceiling", **base, "amount": amount,
                            "attempt_spend": self._spent(s),
                            "worker_ceiling": self.worker_ceiling,
                            "eval_reserve": self.eval_reserve})
                raise BudgetOverrun(f"{self.node}: reserving {amount:g} would eat into the "
                                    f"evaluation reserve ({self.eval_reserve:g} of "
                                    f"c_v={self.ceiling:g})")
            if not enabled(self.graph, s, Reserve(amount, node=self.node)):
                self.overrun = True
                self._commit(Overrun(amount, node=self.node),
                             {"what": what, "attempt_spend": self._spent(s),
                              "ceiling": self.ceiling})
                raise BudgetOverrun(f"{self.node}: reserving {amount:g} would exceed the ceiling "
                                    f"c_v={self.ceiling:g} or the budget B={self.graph.spend_budget:g}")
            self._commit(Reserve(amount, node=self.node), {"what": what})
            if self._sync is not None:
                self._sync()
            self.outstanding = amount
            self._holding = True
        crashpoint("meter.after_reserve")
        return amount

    def _broken(self, what: str, asked: object, why: str) -> BudgetOverrun:
        """The worker broke its contract with a meter call the model has no event for (a bad
        amount, a reservation twice, a settle with nothing reserved): recorded as a fact
        (`meter_refused`), the attempt is marked broken (the runner ends it failed, unjudged),
        and `BudgetOverrun` is returned for the caller to raise inside the attempt."""
        shown = untrusted.text(repr(asked), 200)
        self.broken = (f"{self.node}: the worker's meter call ({what!r}, {shown}) was refused: "
                       f"{why}; the attempt fails")
        self._fact({"type": "meter_refused", "node": self.node, "what": what, "asked": shown,
                    "why": why})
        return BudgetOverrun(self.broken)

    def settle(self, used: float, what: str = "charge", **facts: Any) -> float:
        """Charge what the operation used and release the rest of the reservation.

        A claim above the reservation (or negative, or not a number) is not coerced: the worker
        broke its contract. The reservation is charged in full (Settle cannot exceed it), the
        claim is recorded as a fact (`overspend_claimed`), the attempt is marked broken (the
        runner ends it failed, unjudged) and `BudgetOverrun` is raised inside the attempt."""
        crashpoint("meter.before_settle")
        what, facts = label(what), worker_facts(facts)
        if not self._holding:
            if not self.in_attempt:
                raise BudgetOverrun(f"{self.node}: the attempt has ended; nothing more may be "
                                    f"spent")
            raise self._broken(what, used, "nothing is reserved: reserve before settling")
        claimed = _number(used)
        if claimed is None or claimed < 0 or claimed > self.outstanding + EPS:
            reserved = self.outstanding
            shown = untrusted.text(repr(used), 200) if claimed is None else claimed
            self._fact({"type": "overspend_claimed", "node": self.node, "what": what,
                        "reserved": reserved, "claimed": shown})
            self._settle(reserved, what, claimed=shown, **facts)
            self.broken = (f"{self.node}: the worker claimed {shown!r} for {what!r} against a "
                           f"reservation of {reserved:g}; it was charged the reservation in "
                           f"full and the attempt fails")
            raise BudgetOverrun(self.broken)
        return self._settle(min(round(claimed, 6), self.outstanding), what, **facts)

    def _settle_capped(self, used: float, what: str, **facts: Any) -> float:
        """The engine's own measurements (a command's or a gate's wall clock): the process is
        killed at its reservation, so a few milliseconds of kill latency past it are charged as
        the reservation (documented: never more than reserved)."""
        crashpoint("meter.before_settle")
        return self._settle(min(max(0.0, round(float(used), 6)), self.outstanding), what,
                            **facts)

    def _settle(self, charged: float, what: str, **facts: Any) -> float:
        with self._lock:
            of = min(self.outstanding, self._open())  # float sums: never above it
            self._commit(Settle(min(charged, of), of, node=self.node),
                         {"reserved": self.outstanding, "what": what,
                          **facts})
            self.outstanding = 0.0
            self._holding = False
            return min(charged, of)

    # ---- concurrent holds (model calls) -------------------------------------------------------
    def hold(self, key: str, amount: float, what: str, **facts: Any) -> bool:
        """Reserve `amount` for one of several concurrent operations, on top of what is
        outstanding: the check (c_v - eval_reserve, c_v, B against settled + every open
        reservation) and the `Reserve` record are one step under the lock, and the record is
        durable before this returns. False when it does not fit: nothing is committed and the
        attempt goes on (the caller refuses the operation and records that)."""
        amount = round(float(amount), 6)
        with self._lock:
            if not self.in_attempt or self.evaluating or key in self.holds or amount < 0:
                return False
            s = self._state()
            if self._spent(s) + amount > self.worker_ceiling + EPS:
                return False
            if not enabled(self.graph, s, Reserve(amount, node=self.node)):
                return False
            self._commit(Reserve(amount, node=self.node), {"what": what, **facts})
            if self._sync is not None:
                self._sync()
            self.holds[key] = amount
        crashpoint("meter.after_reserve")
        return True

    def release(self, key: str, used: float, what: str, **facts: Any) -> float:
        """Settle the hold `key`: charge min(used, held), never more, and release the rest."""
        with self._lock:
            held = self.holds.pop(key)
            if self._state().status_of(self.graph, self.node) is not Status.RUNNING:  # no event ends an
                return 0.0  # attempt under an open reservation; kept for a hold never made
            of = min(held, self._open())  # float sums: never above what is open
            charged = min(max(0.0, round(float(used), 6)), of)
            self._commit(Settle(charged, of, node=self.node), {"reserved": held,
                                               "what": what, **facts})
            return charged

    def charge(self, amount: float, what: str = "charge") -> float:
        """Reserve and settle a known price (e.g. an API call) before the call is made."""
        self.reserve(amount, what)
        return self.settle(amount, what)

    def close(self) -> None:
        """End of the worker: a reservation left open (a hold too) is charged in full."""
        with self._lock:
            for key, held in list(self.holds.items()):
                self.release(key, held, "unsettled at worker end", call=key)
            # also after the worker broke its contract: the attempt runs until its verdict
            if (self._holding and not self.overrun
                    and self._state().status_of(self.graph, self.node) is Status.RUNNING):
                self._settle_capped(self.outstanding, "unsettled at worker end")

    def fact(self, record: dict[str, Any]) -> None:
        """Append a fact record (no model event), e.g. a model call's `llm_call`."""
        self._fact(record)

    def _fact(self, record: dict[str, Any]) -> None:
        with self._lock:
            if self._note is not None:
                self._note(record)

    # ---- evaluation --------------------------------------------------------------------------
    def reserve_evaluation(self, gate_timeout_s: float) -> float:
        """After the worker's settlement, before the gate runs: reserve the gate run, min(its
        timeout, what is left of c_v and B), and return its wall-clock limit in seconds. Nothing
        left is an `Overrun` of the gate's full price: the attempt ends failed, no verdict."""
        if self.outstanding > EPS or self.holds:
            raise RuntimeError("a reservation is outstanding: settle it before the gate runs")
        self.evaluating = True
        want = float(gate_timeout_s) * self.price
        hold = min(want, self.allowance())
        # nothing left: ask for the full price, which does not fit, so `reserve` records the
        # Overrun and raises BudgetOverrun
        got = self.reserve(hold if hold > EPS else want, EVALUATION)
        return min(float(gate_timeout_s), got / self.price)

    def settle_evaluation(self, seconds: float, **facts: Any) -> float:
        """Charge the evaluation's wall clock (staging the workspace and the gate run) at the
        price, never more than was reserved (its limit was reserved / price seconds)."""
        return self._settle_capped(seconds * self.price, EVALUATION,
                                   seconds=round(seconds, 6), price=self.price, **facts)

    # ---- commands ----------------------------------------------------------------------------
    def run_command(self, argv: Sequence[str], cwd: Path, timeout_s: float, *,
                    env: Mapping[str, str] | None = None,
                    confine: Confinement | None = None,
                    stop: Callable[[], str | None] | None = None) -> Metered:
        """Run a command under wall-clock metering: reserve min(timeout_s * price, allowance)
        units, kill the process group after reservation / price seconds (or as soon as `stop`
        gives a reason: killed = "refused"), settle the seconds used at the price."""
        return self.metered(timeout_s, lambda limit_s: run_command(
            argv, cwd, limit_s, env=env, confine=confine, stop=stop))

    def metered(self, timeout_s: float, run: Callable[[float], ProcessResult]) -> Metered:
        """`run_command`'s metering around any way of running a command: `run(limit_s)` runs it
        with that wall-clock limit (here, or on a Dask worker: engine/run/remote/) and returns
        what it did, `seconds` being what is charged. A `ProcessError` (it never started) is
        settled at nothing; any other exception leaves the reservation open (an attempt whose
        outcome is unknown is given back, charged it in full)."""
        full = float(timeout_s) * self.price
        reserved = self.reserve(min(full, self.allowance()), WALL_CLOCK)
        ceiling_binds = reserved < full
        try:
            res = run(reserved / self.price)
        except ProcessError as exc:  # it never started: nothing was used
            self._settle_capped(0.0, WALL_CLOCK, error=str(exc))
            raise
        killed = (res.killed if res.killed in ("limit", "refused")  # a limit: `res.limit`
                  else res.killed and ("ceiling" if ceiling_binds else "timeout"))
        facts: dict[str, Any] = {"seconds": round(res.seconds, 6), "killed": killed or None}
        if res.limit is not None:
            facts["limit"] = res.limit
        if self.price != 1.0:
            facts["price"] = self.price
        charged = self._settle_capped(res.seconds * self.price, WALL_CLOCK, **facts)
        return Metered(res, reserved, charged, killed or None)


# Fields of a settle record the engine writes: a worker's fact may not overwrite them.
_OWN_FIELDS = frozenset({"type", "node", "reserved", "what", "amount", "of", "claimed", "seq",
                         "prev", "hash"})


def label(what: object) -> str:
    """A worker's label for a metered operation, as short valid text."""
    return untrusted.text(what, 200)


def worker_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """A worker's extra settle facts, recordable (engine/system/untrusted.py) and never in place
    of a field the engine writes (such a key is kept as `worker_<key>`)."""
    out: dict[str, Any] = {}
    for k, v in list(facts.items())[:20]:
        key = untrusted.text(k, 64)
        out[f"worker_{key}" if key in _OWN_FIELDS else key] = untrusted.record_value(v)
    return out


def _number(v: Any) -> float | None:
    """`v` as a finite float, or None (a bool, a string, NaN, infinity, an integer too large for
    a float)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None
