"""Several attempts in flight (`LoopGraph.max_parallel` > 1): each new guard, written as its
adversary would, and a stateful walk that holds G1 and G3 at every step.

The adversaries: two Begins that each fit B alone but not together (the check-then-reserve race
of budget proxies); a Repair whose reset set holds an attempt in flight (its spend and its
attempt would vanish); a Verdict, a Settle or a Reserve for a node not in flight, or naming no
node while two are; a refusal, a Fail or a Cancel decided while attempts still fly.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from loopproof.model.bounds import attempt_bound
from loopproof.model.graph import GraphError, LoopGraph, NodeSpec
from loopproof.model.state import Outcome, RunState, Status, initial_state
from loopproof.model.transitions import (
    EPS,
    Abandon,
    Begin,
    Cancel,
    Disabled,
    Event,
    Fail,
    Overrun,
    Refuse,
    Repair,
    Reserve,
    Settle,
    Verdict,
    control_events,
    step,
)


def run(graph: LoopGraph, *events: Event) -> RunState:
    s = initial_state(graph)
    for e in events:
        s = step(graph, s, e)
    return s


def fan(n: int = 2, *, ceiling: float = 2.0, budget: float = 3.0, parallel: int = 2,
        attempts: int = 1) -> LoopGraph:
    return LoopGraph.build([NodeSpec(f"n{i}", attempts=attempts, spend_ceiling=ceiling)
                            for i in range(n)], spend_budget=budget, max_parallel=parallel)


# ---- the graph field ---------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_max_parallel_must_be_an_integer_of_at_least_one(bad: object) -> None:
    with pytest.raises(GraphError, match="field 'max_parallel'.*fix: set max_parallel to 1"):
        LoopGraph.build([NodeSpec("a")], max_parallel=bad)  # type: ignore[arg-type]  # the point: a wrong type
    with pytest.raises(GraphError, match="max_parallel"):
        LoopGraph.build([NodeSpec("a")]).with_max_parallel(bad)  # type: ignore[arg-type]  # the point: a wrong type


def test_with_max_parallel_changes_only_the_limit() -> None:
    g = fan(parallel=1)
    h = g.with_max_parallel(3)
    assert (h.max_parallel, h.nodes, h.spend_budget) == (3, g.nodes, g.spend_budget)
    assert h != g and h.with_max_parallel(1) == g


# ---- admission: what the attempts in flight hold ------------------------------------------------

def test_two_begins_that_each_fit_alone_do_not_both_begin() -> None:
    """B = 3, c_v = 2: either attempt fits alone; both at once could spend 4 > B. The second
    Begin waits (it is not a refusal: the run does not end while the first may give back)."""
    g = fan()
    s = run(g, Begin("n0"))
    assert Begin("n1").why_not(g, initial_state(g)) is None
    why = Begin("n1").why_not(g, s)
    assert why is not None and "ceilings held by the attempts in flight (n0)" in why
    assert "wait" in (Refuse("n1").why_not(g, s) or "")
    s = step(g, s, Reserve(2.0))
    s = step(g, s, Settle(0.5))  # n0 settled 0.5 of its 2: it may still charge 1.5
    assert s.held(g) == pytest.approx(0.5 + 1.5)
    with pytest.raises(Disabled, match="exceeds the budget B"):
        step(g, s, Begin("n1"))
    s = step(g, s, Verdict("n0", True))  # n0 ended: settled 0.5, and 0.5 + 2 fits B = 3
    s = step(g, s, Begin("n1"))
    assert s.in_flight(g) == ("n1",)


def test_begins_within_b_all_fly_and_then_max_parallel_stops_the_next() -> None:
    g = fan(3, ceiling=1.0, budget=10.0, parallel=2)
    s = run(g, Begin("n0"), Begin("n1"))
    assert s.in_flight(g) == ("n0", "n1") and s.in_flight_count() == 2
    why = Begin("n2").why_not(g, s)
    assert why == "max_parallel = 2 attempts are in flight (n0, n1)"
    assert Cancel("n2").why_not(g, s) == why  # an operator's cancel needs the same room


def test_a_node_in_flight_cannot_begin_a_second_attempt() -> None:
    g = fan(ceiling=1.0, budget=10.0, attempts=3)
    assert "not PENDING" in (Begin("n0").why_not(g, run(g, Begin("n0"))) or "")


def test_a_successor_runs_only_when_its_predecessors_are_done() -> None:
    g = LoopGraph.build([NodeSpec("a"), NodeSpec("b", needs=("a",))], max_parallel=2)
    assert Begin("b").why_not(g, run(g, Begin("a"))) == "predecessor 'a' is not DONE"


# ---- spend events name their attempt ------------------------------------------------------------

def test_spend_events_must_name_their_node_when_two_fly() -> None:
    g = fan(ceiling=1.0, budget=10.0)
    s = run(g, Begin("n0"), Begin("n1"))
    for e in (Reserve(0.5), Settle(0.0), Overrun(5.0)):
        assert "must name its node" in (e.why_not(g, s) or ""), e
    s = step(g, s, Reserve(0.5, node="n1"))
    assert (s.reserved_of(g, "n1"), s.reserved_of(g, "n0"), s.reserved) == (0.5, 0.0, 0.5)
    # n1's open reservation blocks n1's verdict, not n0's
    assert "outstanding" in (Verdict("n1", True).why_not(g, s) or "")
    s = step(g, s, Verdict("n0", False))
    assert s.in_flight(g) == ("n1",) and (s.reserved, s.attempt_spend) == (0.5, 0.5)
    assert s.accounts == ()  # one in flight: the totals are its own again


def test_a_verdict_for_a_node_not_in_flight_is_refused() -> None:
    g = fan(3, ceiling=1.0, budget=10.0)
    s = run(g, Begin("n0"), Begin("n1"))
    assert Verdict("n2", True).why_not(g, s) == \
        "'n2' has no attempt in flight (in flight: n0, n1)"
    for e in (Abandon("n2"), Settle(0.0, node="n2"), Reserve(0.1, node="n2")):
        assert "has no attempt in flight" in (e.why_not(g, s) or ""), e


def test_each_attempt_is_held_to_its_own_ceiling() -> None:
    g = fan(ceiling=1.0, budget=10.0)
    s = run(g, Begin("n0"), Begin("n1"), Reserve(0.75, node="n0"))
    assert Reserve(0.5, node="n0").why_not(g, s) == "the reservation does not fit"
    assert Reserve(0.5, node="n1").why_not(g, s) is None
    # n0 cannot overrun while its own reservation is open; n1 (nothing open) can
    assert "outstanding" in (Overrun(0.5, node="n0").why_not(g, s) or "")
    s = step(g, s, Overrun(1.5, node="n1"))
    assert s.status_of(g, "n1") is Status.EXHAUSTED and s.in_flight(g) == ("n0",)


def test_abandon_gives_back_one_attempt_and_charges_only_its_reservations() -> None:
    g = fan(3, ceiling=1.0, budget=10.0, parallel=3)
    s = run(g, Begin("n0"), Begin("n1"), Begin("n2"), Reserve(0.25, node="n0"),
            Reserve(0.5, node="n1"))
    s = step(g, s, Abandon("n1"))
    assert (s.settled, s.reserved, s.attempts_total, s.abandoned) == (0.5, 0.25, 2, 1)
    assert s.in_flight(g) == ("n0", "n2") and s.reserved_of(g, "n0") == 0.25
    s = step(g, s, Abandon("n0"))
    assert (s.settled, s.reserved, s.in_flight(g), s.accounts) == (0.75, 0.0, ("n2",), ())


# ---- the run's endings wait for the attempts in flight -------------------------------------------

def repaired() -> LoopGraph:
    """r, then x and y side by side; y's failure repairs r, whose subtree holds x."""
    return LoopGraph.build([NodeSpec("r"), NodeSpec("x", needs=("r",)),
                            NodeSpec("y", needs=("r",), repairs=("r",))],
                           repair_budget=1, max_parallel=2)


def test_a_repair_that_would_reset_an_attempt_in_flight_waits_for_it() -> None:
    g = repaired()
    s = run(g, Begin("r"), Verdict("r", True), Begin("x"), Begin("y"), Verdict("y", False))
    assert s.status_of(g, "y") is Status.EXHAUSTED and s.in_flight(g) == ("x",)
    assert Repair("y", "r").why_not(g, s) == \
        "repair (y, r) would reset 'x', whose attempt is in flight: wait for it to end"
    assert "exhausted" in (Begin("x").why_not(g, step(g, s, Verdict("x", False))) or "")
    s = step(g, s, Verdict("x", True))
    s = step(g, s, Repair("y", "r"))
    assert [s.status_of(g, v) for v in g.names] == [Status.PENDING] * 3
    assert s.attempts_total == 3 <= attempt_bound(g)


def test_a_repair_outside_the_attempts_in_flight_goes_ahead() -> None:
    g = LoopGraph.build([NodeSpec("a"), NodeSpec("b", repairs=("b",))], repair_budget=1,
                        max_parallel=2)
    s = run(g, Begin("a"), Begin("b"), Verdict("b", False), Repair("b", "b"))
    assert s.in_flight(g) == ("a",) and s.status_of(g, "b") is Status.PENDING


def test_fail_and_refuse_wait_until_nothing_is_in_flight() -> None:
    g = LoopGraph.build([NodeSpec("a"), NodeSpec("b"), NodeSpec("c", spend_ceiling=5.0)],
                        spend_budget=4.0, max_parallel=2)
    s = run(g, Begin("a"), Begin("b"), Verdict("b", False))
    assert "the run fails once they end" in (Fail("b").why_not(g, s) or "")
    s = step(g, step(g, s, Verdict("a", True)), Fail("b"))
    assert s.outcome is Outcome.FAILED
    s = run(g, Begin("a"))
    assert "refusal waits" in (Refuse("c").why_not(g, s) or "")
    assert step(g, step(g, s, Verdict("a", True)), Refuse("c")).outcome is \
        Outcome.BUDGET_EXHAUSTED


def test_a_serial_graph_keeps_the_serial_words() -> None:
    g = fan(parallel=1, budget=10.0)
    s = run(g, Begin("n0"))
    assert Begin("n1").why_not(g, s) == "'n0' has an attempt in flight"
    assert Verdict("n1", True).why_not(g, s) == "the attempt in flight is 'n0', not 'n1'"
    assert s.accounts == ()


# ---- stateful: every interleaving of attempts, with spend -----------------------------------------

GRAPHS = (
    LoopGraph.build([NodeSpec("a", attempts=2, spend_ceiling=2.0),
                     NodeSpec("b", spend_ceiling=1.5, repairs=("b",)),
                     NodeSpec("c", attempts=2, spend_ceiling=1.0, needs=("a",), repairs=("a",)),
                     NodeSpec("d", spend_ceiling=2.5)],
                    repair_budget=2, spend_budget=5.0, max_parallel=3),
    LoopGraph.build([NodeSpec("a", spend_ceiling=1.0), NodeSpec("b", spend_ceiling=1.0),
                     NodeSpec("c", needs=("a", "b"), repairs=("a", "c"))],
                    repair_budget=1, spend_budget=math.inf, max_parallel=2),
    # x and y side by side under r; y's failure repairs r, whose subtree holds x
    LoopGraph.build([NodeSpec("r", spend_ceiling=1.0), NodeSpec("x", needs=("r",)),
                     NodeSpec("y", attempts=2, needs=("r",), repairs=("r", "y"))],
                    repair_budget=2, spend_budget=4.0, max_parallel=2),
)


class ConcurrentRun(RuleBasedStateMachine):
    """Any enabled event, spend included, on a graph with several attempts in flight; after
    each: G1 (attempts <= W), G3 (settled + held <= B, every attempt within c_v), the totals
    equal the per-attempt accounts, at most max_parallel in flight, needs respected."""

    def __init__(self) -> None:
        super().__init__()
        self.g: LoopGraph | None = None
        self.s: RunState | None = None

    @precondition(lambda self: self.g is None)
    @rule(which=st.sampled_from(range(len(GRAPHS))))
    def pick(self, which: int) -> None:
        self.g = GRAPHS[which]
        self.s = initial_state(self.g)

    @precondition(lambda self: self.g is not None)
    @rule(pick=st.integers(0, 1 << 16), amount=st.sampled_from([0.0, 0.5, 1.0, 2.5]))
    def any_enabled(self, pick: int, amount: float) -> None:
        """One enabled event, drawn from every control event (as the explorer enumerates them)
        and, per attempt in flight, a Reserve, an Overrun, an Abandon and two Settles."""
        g, s = self.g, self.s
        assert g is not None and s is not None
        if s.ended:  # a run that ended: the walk goes on with a new one
            self.s = initial_state(g)
            return
        events: list[Event] = list(control_events(g, s))
        for v in s.in_flight(g):
            held = s.reserved_of(g, v)
            events += [Reserve(amount, node=v), Overrun(amount, node=v), Abandon(v),
                       Settle(min(amount, held), node=v),
                       Settle(min(amount, held / 2), held / 2, node=v)]
        events = [e for e in events if e.why_not(g, s) is None]
        assert events, f"deadlock: {s.summary(g)}"
        self.s = step(g, s, events[pick % len(events)])

    @precondition(lambda self: self.g is not None and not self.s.ended)
    @rule(pick=st.integers(0, 3))
    def begin_another(self, pick: int) -> None:
        """Half the draws: begin one more attempt if any may (so walks reach max_parallel)."""
        g, s = self.g, self.s
        assert g is not None and s is not None
        begins = [Begin(v) for v in g.names if Begin(v).why_not(g, s) is None]
        if begins:
            self.s = step(g, s, begins[pick % len(begins)])

    @invariant()
    def guarantees_hold(self) -> None:
        g, s = self.g, self.s
        if g is None or s is None:
            return
        assert s.attempts_total <= attempt_bound(g)
        flying = s.in_flight(g)
        assert len(flying) == s.in_flight_count() <= g.max_parallel
        assert s.held(g) <= g.spend_budget + 4 * EPS
        assert s.settled + s.reserved <= g.spend_budget + 4 * EPS
        for v in flying:
            reserved, spent = s.reserved_of(g, v), s.spent_of(g, v)
            assert -EPS <= reserved <= spent + EPS <= g.node(v).spend_ceiling + 2 * EPS
            assert all(s.status_of(g, p) is Status.DONE for p in g.node(v).needs)
        assert s.reserved == pytest.approx(sum(s.reserved_of(g, v) for v in flying), abs=1e-9)
        assert s.attempt_spend == pytest.approx(sum(s.spent_of(g, v) for v in flying),
                                                abs=1e-9)
        assert (len(s.accounts) >= 2) == (len(flying) >= 2)
        if s.accounts:
            assert tuple(g.names[i] for i, _, _ in s.accounts) == flying
        if not flying:  # nothing in flight holds or has spent anything
            assert s.attempt_spend == 0.0 and abs(s.reserved) <= EPS


TestConcurrentRun = ConcurrentRun.TestCase
# make check: 40 walks of 40 steps (the ci profile's 100 would add seconds); fuzz: its own count
_PROFILE_EXAMPLES = settings().max_examples
TestConcurrentRun.settings = settings(
    max_examples=_PROFILE_EXAMPLES if _PROFILE_EXAMPLES > 100 else 40, stateful_step_count=40)
