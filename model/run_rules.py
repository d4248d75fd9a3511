"""The rule table of a run: every event's guard and effect, written once.

Each event kind (Begin, Refuse, Reserve, Overrun, Settle, Verdict, Abandon, Claim, Cancel,
Repair, Fail, Finish) has a guard (what must hold, each condition with the reason given when it
does not) and an effect (what changes), written against the value interface of
model/rule_values.py. `model.step` evaluates them on Python values (model/python_values.py),
the proofs on Z3 terms (proofs/z3_values.py: the serial, concurrent and unbounded encodings);
nothing else states a rule. A broken variant subclasses `RunRules` and overrides one method;
`RunRules.table` maps each kind to its guard and effect.

Several attempts in flight (`LoopGraph.max_parallel` > 1, docs/design.md) add conditions, each
under `if s.concurrent:`; with one attempt at a time (`concurrent` false: the serial model) the
rules are the serial model's, guard for guard and float for float. The conditions are checked
in order, and the Python backend reports the first that fails (its reason is the `why_not` the
engine prints).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from loopproof.model.graph import LoopGraph
from loopproof.model.rule_values import Guard, Node, Update, Value, View
from loopproof.model.state import Outcome, RunState

EPS = 1e-9  # tolerance for float spend comparisons (units are seconds or currency)

GuardRule = Callable[[View, Any, Guard], None]
EffectRule = Callable[[View, Any, Update], None]


class RunRules:
    """The model's rules: `guard_<kind>(s, ev, g)` and `effect_<kind>(s, ev, u)` per event
    kind, `ev` the event (its `node`, `target`, `passed`, `amount`, `of`)."""

    name = "model"

    def __init__(self) -> None:
        self.table: Mapping[str, tuple[GuardRule, EffectRule]] = MappingProxyType({
            "Begin": (self.guard_begin, self.effect_begin),
            "Refuse": (self.guard_refuse, self.effect_refuse),
            "Reserve": (self.guard_reserve, self.effect_reserve),
            "Overrun": (self.guard_overrun, self.effect_overrun),
            "Settle": (self.guard_settle, self.effect_settle),
            "Verdict": (self.guard_verdict, self.effect_verdict),
            "Abandon": (self.guard_abandon, self.effect_abandon),
            "Claim": (self.guard_claim, self.effect_claim),
            "Cancel": (self.guard_cancel, self.effect_cancel),
            "Repair": (self.guard_repair, self.effect_repair),
            "Fail": (self.guard_fail, self.effect_fail),
            "Finish": (self.guard_finish, self.effect_finish),
        })

    def guard(self, s: View, ev: Any, g: Guard) -> None:
        """The guard of `ev`'s kind (`ev.kind`); a variant may add to every event's here."""
        self.table[ev.kind][0](s, ev, g)

    def effect(self, s: View, ev: Any, u: Update) -> None:
        self.table[ev.kind][1](s, ev, u)

    # ---- shared guards ------------------------------------------------------------------------
    def live(self, s: View, g: Guard) -> None:
        g.need(s.live(), ended)

    def ready(self, s: View, g: Guard, v: Node) -> None:
        """`v` may start its next attempt now: room for one more attempt in flight, nothing
        exhausted, `v` PENDING and every predecessor DONE (shared by Begin, Refuse, Cancel)."""
        g.need(s.known(v), unknown_node, v)
        self.live(s, g)
        if s.concurrent:
            g.need_room(s.in_flight() < s.max_parallel, no_room)
        else:
            g.need_room(s.none(s.RUNNING), no_room)
        g.need(s.none(s.EXHAUSTED), exhausted)
        g.need(s.status(v) == s.PENDING, not_pending, v)
        g.need_all(s.predecessors(v), lambda p: s.status(p) == s.DONE, predecessor_not_done)

    def fits(self, s: View, v: Node) -> Value:
        """settled + what the attempts in flight may still charge + c_v fits B (serially none
        is in flight when an attempt begins: settled + c_v <= B)."""
        held = s.held() if s.concurrent else s.settled
        return s.within_budget(held + s.ceiling(v))

    def in_attempt(self, s: View, g: Guard, who: Node | None) -> None:
        """`who` has the attempt in flight (None: the only one). Serially that is the first
        RUNNING node; with several in flight, a node RUNNING, and an event must name it."""
        self.live(s, g)
        if who is None:
            g.need(s.some(s.RUNNING), no_attempt)
            if s.concurrent:
                g.need(s.in_flight() <= 1, must_name)
        elif s.concurrent:
            g.need(s.known(who), not_the_attempt, who)
            g.need(s.status(who) == s.RUNNING, not_the_attempt, who)
        else:
            g.need(s.first_running_is(who), not_the_attempt, who)

    def reservation_fits(self, s: View, a: Any, amount: Value) -> Value:
        """Within what is left of the attempt's c_v, and of B given every open reservation."""
        return s.and_(a.spent + amount <= a.ceiling + s.eps,
                      s.within_budget(s.settled + s.reserved + amount))

    # ---- shared effects -----------------------------------------------------------------------
    def end_attempt(self, s: View, u: Update, v: Node, passed: bool) -> None:
        """PASS: DONE, and the PASS recorded for this activation (G2); else PENDING while
        attempts are left in the activation, EXHAUSTED once a_v are used."""
        if passed:
            u.set_status(v, s.DONE)
            u.add_pass(v, s.activation(v))
        else:
            u.set_status(v, s.ite(s.attempts(v) < s.attempts_allowed(v), s.PENDING, s.EXHAUSTED))

    # ---- Begin / Refuse: admission checks settled + c_v <= B before the attempt starts -----------
    def guard_begin(self, s: View, ev: Any, g: Guard) -> None:
        self.ready(s, g, ev.node)
        g.need_spend(self.fits(s, ev.node), unfit)

    def effect_begin(self, s: View, ev: Any, u: Update) -> None:
        v = ev.node
        u.set_status(v, s.RUNNING)
        u.set_attempts(v, s.attempts(v) + 1)
        u.set_attempts_total(s.attempts_total + 1)
        u.open(v)

    def guard_refuse(self, s: View, ev: Any, g: Guard) -> None:
        """Only with no attempt in flight: until they end, what they hold may come back."""
        self.ready(s, g, ev.node)
        if s.concurrent:
            g.need_room(s.in_flight() == 0, refusal_waits)
        g.need_spend(s.not_(self.fits(s, ev.node)), the_attempt_fits)

    def effect_refuse(self, s: View, ev: Any, u: Update) -> None:
        u.set_outcome(Outcome.BUDGET_EXHAUSTED)

    # ---- Reserve / Overrun / Settle: metering inside an attempt (`ev.node`: whose) -------------
    def guard_reserve(self, s: View, ev: Any, g: Guard) -> None:
        self.in_attempt(s, g, ev.node)
        a = s.attempt(ev.node)
        g.need_spend(ev.amount >= 0, negative)
        g.need_spend(self.reservation_fits(s, a, ev.amount), does_not_fit)

    def effect_reserve(self, s: View, ev: Any, u: Update) -> None:
        amount = ev.amount
        u.spend(s.attempt(ev.node), lambda r: r + amount, lambda x: x + amount)

    def guard_overrun(self, s: View, ev: Any, g: Guard) -> None:
        """A reservation that does not fit, with none of the attempt's outstanding."""
        self.in_attempt(s, g, ev.node)
        a = s.attempt(ev.node)
        g.need_spend(ev.amount >= 0, negative)
        g.need_spend(a.reserved <= s.eps, outstanding)
        g.need_spend(s.not_(self.reservation_fits(s, a, ev.amount)), the_reservation_fits)

    def effect_overrun(self, s: View, ev: Any, u: Update) -> None:
        a = s.attempt(ev.node)
        u.at(a, lambda v: self.end_attempt(s, u, v, False))
        u.close(a)

    def guard_settle(self, s: View, ev: Any, g: Guard) -> None:
        """Release the reservation `of` (None: every open one of the attempt) and charge
        `amount` of it, never more (exact comparisons: an EPS here lets settled creep past B)."""
        self.in_attempt(s, g, ev.node)
        a = s.attempt(ev.node)
        of = a.reserved if ev.of is None else ev.of
        if ev.of is not None:
            g.need_spend(s.and_(of >= 0, of <= a.reserved), released_outside, of, a.reserved)
        g.need_spend(s.and_(ev.amount >= 0, ev.amount <= of), settled_outside, ev.amount, of)

    def effect_settle(self, s: View, ev: Any, u: Update) -> None:
        a = s.attempt(ev.node)
        of, amount = (a.reserved if ev.of is None else ev.of), ev.amount
        u.set_settled(s.settled + amount)
        u.spend(a, lambda r: r - of, lambda x: x - of + amount)

    # ---- Verdict / Abandon / Claim: an attempt ends, is given back, or its worker speaks -------
    def guard_verdict(self, s: View, ev: Any, g: Guard) -> None:
        """Only a PASS can make a node DONE (G2); the attempt's own reservations settled."""
        self.in_attempt(s, g, ev.node)
        g.need_spend(s.attempt(ev.node).reserved <= s.eps, outstanding)

    def effect_verdict(self, s: View, ev: Any, u: Update) -> None:
        self.end_attempt(s, u, ev.node, ev.passed)
        u.close(s.attempt(ev.node))

    def guard_abandon(self, s: View, ev: Any, g: Guard) -> None:
        self.in_attempt(s, g, ev.node)

    def effect_abandon(self, s: View, ev: Any, u: Update) -> None:
        """A crashed attempt: charged its open reservation and given back (PENDING, not
        counted against a_v nor in attempts_total); `abandoned` counts the repeat (G7)."""
        v, a = ev.node, s.attempt(ev.node)
        u.set_status(v, s.PENDING)
        u.set_attempts(v, s.attempts(v) - 1)
        u.set_attempts_total(s.attempts_total - 1)
        u.set_abandoned(s.abandoned + 1)
        charged = a.reserved
        u.set_settled(s.settled + charged)
        u.spend(a, lambda r: r - charged, lambda x: x)
        u.close(a)

    def guard_claim(self, s: View, ev: Any, g: Guard) -> None:
        self.in_attempt(s, g, ev.node)

    def effect_claim(self, s: View, ev: Any, u: Update) -> None:
        """A worker's self-report is recorded and changes nothing."""

    # ---- Cancel: the operator ends the activation of a node that is next to run ---------------
    def guard_cancel(self, s: View, ev: Any, g: Guard) -> None:
        self.ready(s, g, ev.node)

    def effect_cancel(self, s: View, ev: Any, u: Update) -> None:
        v = ev.node
        u.set_status(v, s.EXHAUSTED)
        u.add_cancel(v, s.activation(v))

    # ---- Repair / Fail / Finish ---------------------------------------------------------------
    def guard_repair(self, s: View, ev: Any, g: Guard) -> None:
        """Exhausted `node` re-opens S_target, K permitting; waits while a node of S_target has
        an attempt in flight (a reset never drops an attempt, nor its spend)."""
        d, target = ev.node, ev.target
        self.live(s, g)
        g.need(s.in_relation(d, target), not_in_relation, d, target)
        g.need(s.status(d) == s.EXHAUSTED, not_exhausted, d)
        g.need(s.repairs_used < s.repair_budget, repairs_spent)
        if s.concurrent:
            g.need_all(s.subtree(target), lambda w: s.status(w) != s.RUNNING, would_reset,
                       d, target)

    def effect_repair(self, s: View, ev: Any, u: Update) -> None:
        """S_target back to PENDING in new activations with fresh counters; K is spent."""
        u.for_each(s.subtree(ev.target), lambda w: self.reset(s, u, w))
        u.set_repairs_used(s.repairs_used + 1)

    def reset(self, s: View, u: Update, w: Node) -> None:
        """A node a repair re-opens: PENDING, a new activation, no attempts yet."""
        u.set_status(w, s.PENDING)
        u.set_activation(w, s.activation(w) + 1)
        u.set_attempts(w, 0)

    def guard_fail(self, s: View, ev: Any, g: Guard) -> None:
        """Exhausted `node` with no repair left (none declared, or K spent)."""
        d = ev.node
        self.live(s, g)
        g.need(s.status(d) == s.EXHAUSTED, not_exhausted, d)
        g.need(s.or_(s.no_pair(d), s.repairs_used >= s.repair_budget), repair_available)
        if s.concurrent:
            g.need_room(s.in_flight() == 0, failure_waits)

    def effect_fail(self, s: View, ev: Any, u: Update) -> None:
        u.set_outcome(Outcome.FAILED)

    def guard_finish(self, s: View, ev: Any, g: Guard) -> None:
        self.live(s, g)
        g.need(s.every(s.DONE), not_all_done)

    def effect_finish(self, s: View, ev: Any, u: Update) -> None:
        u.set_outcome(Outcome.DONE)


RULES = RunRules()


# ---- the reasons: why a guard does not hold, as `model.step` raises and the engine prints -------
# Each takes the graph and the state (and the condition's arguments); only the Python backend
# calls them.

def listed(graph: LoopGraph, s: RunState) -> str:
    return ", ".join(s.in_flight(graph))


def ended(graph: LoopGraph, s: RunState) -> str:
    return f"the run has ended ({s.outcome.value})"


def unknown_node(graph: LoopGraph, s: RunState, v: str) -> str:
    return f"unknown node {v!r}"


def no_room(graph: LoopGraph, s: RunState) -> str:
    if graph.max_parallel == 1:
        return f"{s.running(graph)!r} has an attempt in flight"
    return f"max_parallel = {graph.max_parallel} attempts are in flight ({listed(graph, s)})"


def exhausted(graph: LoopGraph, s: RunState) -> str:
    return f"{s.exhausted(graph)!r} is exhausted and must be repaired or fail first"


def not_pending(graph: LoopGraph, s: RunState, v: str) -> str:
    return f"{v!r} is {s.status_of(graph, v).value}, not PENDING"


def predecessor_not_done(graph: LoopGraph, s: RunState, p: str) -> str:
    return f"predecessor {p!r} is not DONE"


def unfit(graph: LoopGraph, s: RunState) -> str:
    if s.in_flight_count() == 0:
        return "settled + c_v exceeds the budget B"
    return (f"settled + the ceilings held by the attempts in flight ({listed(graph, s)}) + c_v "
            f"exceeds the budget B: wait for one to end")


def refusal_waits(graph: LoopGraph, s: RunState) -> str:
    return f"attempts are in flight ({listed(graph, s)}): a refusal waits until none is"


def the_attempt_fits(graph: LoopGraph, s: RunState) -> str:
    return "the attempt fits the budget"


def no_attempt(graph: LoopGraph, s: RunState) -> str:
    return "no attempt is in flight"


def must_name(graph: LoopGraph, s: RunState) -> str:
    return (f"several attempts are in flight ({listed(graph, s)}): the event must name its "
            f"node")


def not_the_attempt(graph: LoopGraph, s: RunState, v: str) -> str:
    count = s.in_flight_count()
    if count == 0:
        return "no attempt is in flight"
    if count == 1 or graph.max_parallel == 1:
        return f"the attempt in flight is {s.running(graph)!r}, not {v!r}"
    return f"{v!r} has no attempt in flight (in flight: {listed(graph, s)})"


def negative(graph: LoopGraph, s: RunState) -> str:
    return "a reservation cannot be negative"


def does_not_fit(graph: LoopGraph, s: RunState) -> str:
    return "the reservation does not fit"


def the_reservation_fits(graph: LoopGraph, s: RunState) -> str:
    return "the reservation fits"


def outstanding(graph: LoopGraph, s: RunState) -> str:
    return "a reservation is outstanding; settle it first"


def released_outside(graph: LoopGraph, s: RunState, of: float, held: float) -> str:
    return f"released reservation {of} is outside [0, reserved={held}]"


def settled_outside(graph: LoopGraph, s: RunState, amount: float, of: float) -> str:
    return f"settled amount {amount} is outside [0, reserved={of}]"


def not_in_relation(graph: LoopGraph, s: RunState, d: str, u: str) -> str:
    return f"({d!r}, {u!r}) is not in the repair relation"


def not_exhausted(graph: LoopGraph, s: RunState, d: str) -> str:
    return f"{d!r} is not EXHAUSTED"


def repairs_spent(graph: LoopGraph, s: RunState) -> str:
    return "the global repair budget K is spent"


def would_reset(graph: LoopGraph, s: RunState, w: str, d: str, u: str) -> str:
    return f"repair ({d}, {u}) would reset {w!r}, whose attempt is in flight: wait for it to end"


def repair_available(graph: LoopGraph, s: RunState) -> str:
    return "a repair is still available"


def failure_waits(graph: LoopGraph, s: RunState) -> str:
    return f"attempts are in flight ({listed(graph, s)}): the run fails once they end"


def not_all_done(graph: LoopGraph, s: RunState) -> str:
    return "not every node is DONE"
