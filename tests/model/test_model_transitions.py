"""Every declared transition of model/transitions.py: its guard (when it is disabled, and why) and
its effect (exactly what changes)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.state import Outcome, RunState, Status, initial_state
from loopproof.model.transitions import (
    Abandon,
    Begin,
    Cancel,
    Claim,
    Disabled,
    Fail,
    Finish,
    Overrun,
    Refuse,
    Repair,
    Reserve,
    Settle,
    Verdict,
    all_control_candidates,
    control_events,
    enabled,
    step,
)


def chain(k: int = 1, b: float = math.inf) -> LoopGraph:
    """a -> b -> c, plus an independent x. a_a = 2; c may repair a or itself; b repairs itself."""
    return LoopGraph.build([
        NodeSpec("a", attempts=2, spend_ceiling=3.0),
        NodeSpec("b", attempts=1, spend_ceiling=3.0, needs=("a",), repairs=("b",)),
        NodeSpec("c", attempts=1, spend_ceiling=3.0, needs=("b",), repairs=("a", "c")),
        NodeSpec("x", attempts=1, spend_ceiling=3.0),
    ], repair_budget=k, spend_budget=b)


def run(graph: LoopGraph, *events, s: RunState | None = None) -> RunState:
    s = initial_state(graph) if s is None else s
    for e in events:
        s = step(graph, s, e)
    return s


def reason(graph: LoopGraph, s: RunState, event) -> str:
    with pytest.raises(Disabled) as info:
        step(graph, s, event)
    return str(info.value)


def to_c_exhausted(g: LoopGraph) -> RunState:
    return run(g, Begin("a"), Verdict("a", True), Begin("b"), Verdict("b", True),
               Begin("c"), Verdict("c", False))


# ---- initial state ------------------------------------------------------------------------------

def test_initial_state_is_all_pending_with_nothing_spent() -> None:
    g = chain()
    s = initial_state(g)
    assert s.status == (Status.PENDING,) * 4 and s.activation == (0,) * 4 and s.attempts == (0,) * 4
    assert s.passes == frozenset() and s.repairs_used == 0 and s.attempts_total == 0
    assert s.settled == 0 and s.reserved == 0 and s.outcome is Outcome.RUNNING


# ---- Begin --------------------------------------------------------------------------------------

def test_begin_starts_an_attempt_and_counts_it() -> None:
    g = chain()
    s = run(g, Begin("a"))
    assert s.status_of(g, "a") is Status.RUNNING
    assert s.attempts_of(g, "a") == 1 and s.attempts_total == 1
    assert s.running(g) == "a"
    assert s.status_of(g, "b") is Status.PENDING  # nothing else moved


def test_begin_needs_every_predecessor_done() -> None:
    g = chain()
    assert "predecessor 'a' is not DONE" in reason(g, initial_state(g), Begin("b"))
    s = run(g, Begin("a"), Verdict("a", True))
    assert enabled(g, s, Begin("b"))
    assert "predecessor 'b' is not DONE" in reason(g, s, Begin("c"))


def test_begin_needs_no_other_attempt_in_flight() -> None:
    g = chain()
    s = run(g, Begin("a"))
    assert "'a' has an attempt in flight" in reason(g, s, Begin("x"))
    assert "'a' has an attempt in flight" in reason(g, s, Begin("a"))


def test_begin_needs_no_exhausted_node() -> None:
    g = chain()
    s = run(g, Begin("x"), Verdict("x", False))
    assert s.status_of(g, "x") is Status.EXHAUSTED
    assert "'x' is exhausted" in reason(g, s, Begin("a"))


def test_begin_needs_a_pending_node_a_known_node_and_a_live_run() -> None:
    g = chain()
    s = run(g, Begin("x"), Verdict("x", True))
    assert "'x' is DONE, not PENDING" in reason(g, s, Begin("x"))
    assert "unknown node 'zz'" in reason(g, s, Begin("zz"))
    ended = replace(s, outcome=Outcome.FAILED)
    assert "the run has ended" in reason(g, ended, Begin("a"))


def test_begin_is_admitted_only_if_settled_plus_ceiling_fits_the_budget() -> None:
    g = chain(b=5.0)
    s = replace(initial_state(g), settled=2.0)
    assert enabled(g, s, Begin("a"))          # 2 + 3 <= 5
    s = replace(s, settled=2.5)
    assert "exceeds the budget" in reason(g, s, Begin("a"))  # 2.5 + 3 > 5


# ---- Refuse -------------------------------------------------------------------------------------

def test_refuse_only_when_ready_and_the_attempt_does_not_fit() -> None:
    g = chain(b=5.0)
    s = replace(initial_state(g), settled=2.5)
    assert not enabled(g, s, Begin("a"))
    assert run(g, Refuse("a"), s=s).outcome is Outcome.BUDGET_EXHAUSTED
    assert "fits the budget" in reason(g, replace(s, settled=2.0), Refuse("a"))
    assert "predecessor" in reason(g, s, Refuse("b"))  # same readiness guard as Begin
    assert not list(control_events(g, run(g, Refuse("a"), s=s)))


# ---- Reserve / Overrun / Settle -----------------------------------------------------------------

def test_reserve_holds_against_the_attempt_ceiling_and_the_budget() -> None:
    g = chain(b=5.0)
    s = run(g, Begin("a"), Reserve(2.0))
    assert s.reserved == 2.0 and s.attempt_spend == 2.0 and s.settled == 0.0
    s = run(g, Settle(1.5), s=s)
    assert s.settled == 1.5 and s.reserved == 0.0 and s.attempt_spend == 1.5
    assert enabled(g, s, Reserve(1.5))            # 1.5 + 1.5 <= c_a = 3
    assert "does not fit" in reason(g, s, Reserve(1.6))   # over the attempt's ceiling


def test_concurrent_reservations_are_checked_against_every_outstanding_one() -> None:
    """Two model calls in flight at once: the second is checked against settled + both, so
    together they cannot pass c_v or B (no check-then-spend race)."""
    g = chain(b=5.0)
    s = run(g, Begin("a"), Reserve(2.0))
    assert enabled(g, s, Reserve(1.0))                     # 2 + 1 <= c_a = 3
    assert "does not fit" in reason(g, s, Reserve(1.5))    # 2 + 1.5 > c_a, though 1.5 < c_a
    s = run(g, Reserve(1.0), s=s)
    assert s.reserved == 3.0 and s.attempt_spend == 3.0
    # an Overrun would end the attempt under the open reservations: not enabled
    assert "outstanding" in reason(g, s, Overrun(1.0))
    s = run(g, Settle(0.25, of=1.0), s=s)                  # one call settles; the other is open
    assert s.settled == 0.25 and s.reserved == 2.0 and s.attempt_spend == 2.25
    assert "reservation is outstanding" in reason(g, s, Verdict("a", True))
    s = run(g, Settle(2.0, of=2.0), s=s)
    assert s.settled == 2.25 and s.reserved == 0.0
    assert enabled(g, s, Verdict("a", True))


def test_settle_of_releases_at_most_what_is_outstanding_and_charges_at_most_it() -> None:
    g = chain(b=5.0)
    s = run(g, Begin("a"), Reserve(1.0), Reserve(0.5))
    assert "released reservation 2.0 is outside" in reason(g, s, Settle(0.0, of=2.0))
    assert "outside" in reason(g, s, Settle(0.0, of=-0.5))
    assert "settled amount 0.75 is outside [0, reserved=0.5]" in reason(g, s, Settle(0.75, of=0.5))
    every = run(g, Settle(1.5), s=s)                       # of=None: every reservation at once
    assert every.settled == 1.5 and every.reserved == 0.0 and every.attempt_spend == 1.5
    crash = run(g, Abandon("a"), s=s)                      # a crash charges every open one
    assert crash.settled == 1.5 and crash.reserved == 0.0


def test_reserve_cannot_pass_the_run_budget() -> None:
    g = chain(b=5.0)
    s = replace(run(g, Begin("a")), settled=4.0)  # admitted earlier; now 1.0 of B is left
    assert enabled(g, s, Reserve(1.0))
    assert "does not fit" in reason(g, s, Reserve(1.01))
    assert enabled(g, s, Overrun(1.01))


def test_reserve_guards_need_an_attempt_and_a_non_negative_amount() -> None:
    g = chain()
    assert "no attempt is in flight" in reason(g, initial_state(g), Reserve(1.0))
    s = run(g, Begin("a"))
    assert "cannot be negative" in reason(g, s, Reserve(-1.0))
    assert "cannot be negative" in reason(g, s, Overrun(-1.0))


def test_overrun_only_when_the_reservation_does_not_fit_and_it_ends_the_attempt_failed() -> None:
    g = chain(b=5.0)
    s = run(g, Begin("a"), Reserve(1.0), Settle(1.0))
    assert "the reservation fits" in reason(g, s, Overrun(2.0))
    after = run(g, Overrun(2.5), s=s)
    assert after.settled == 1.0 and after.reserved == 0.0 and after.attempt_spend == 0.0
    assert after.status_of(g, "a") is Status.PENDING and after.attempts_of(g, "a") == 1
    again = run(g, Begin("a"), Overrun(3.5), s=after)   # a_a = 2: the second overrun exhausts
    assert again.status_of(g, "a") is Status.EXHAUSTED
    assert "outstanding" in reason(g, run(g, Begin("x"), Reserve(1.0)), Overrun(9.0))


def test_settle_charges_at_most_what_was_reserved() -> None:
    g = chain()
    s = run(g, Begin("a"), Reserve(2.0))
    assert "outside [0, reserved=2.0]" in reason(g, s, Settle(2.5))
    assert "outside" in reason(g, s, Settle(-0.1))
    full = run(g, Settle(2.0), s=s)
    assert full.settled == 2.0 and full.attempt_spend == 2.0
    none = run(g, Settle(0.0), s=s)
    assert none.settled == 0.0 and none.attempt_spend == 0.0 and none.reserved == 0.0


# ---- Verdict ------------------------------------------------------------------------------------

def test_pass_records_node_and_activation_and_only_then_done() -> None:
    g = chain()
    s = run(g, Begin("a"))
    assert s.status_of(g, "a") is not Status.DONE and s.passes == frozenset()
    s = run(g, Verdict("a", True), s=s)
    assert s.status_of(g, "a") is Status.DONE
    assert s.passes == {("a", 0)}


def test_verdict_needs_the_node_in_flight_and_no_outstanding_reservation() -> None:
    g = chain()
    assert "no attempt is in flight" in reason(g, initial_state(g), Verdict("a", True))
    s = run(g, Begin("a"))
    assert "in flight is 'a', not 'x'" in reason(g, s, Verdict("x", True))
    s = run(g, Reserve(1.0), s=s)
    assert "reservation is outstanding" in reason(g, s, Verdict("a", True))
    assert enabled(g, run(g, Settle(0.5), s=s), Verdict("a", True))


def test_fail_verdict_retries_then_exhausts_at_a_v() -> None:
    g = chain()
    s = run(g, Begin("a"), Verdict("a", False))
    assert s.status_of(g, "a") is Status.PENDING and s.attempts_of(g, "a") == 1
    assert ("a", 0) not in s.passes
    s = run(g, Begin("a"), Verdict("a", False), s=s)
    assert s.status_of(g, "a") is Status.EXHAUSTED and s.attempts_of(g, "a") == 2
    assert s.attempts_total == 2


# ---- Claim and Abandon --------------------------------------------------------------------------

def test_claim_changes_nothing() -> None:
    g = chain()
    s = run(g, Begin("a"), Reserve(1.0))
    assert run(g, Claim("a"), s=s) == s
    assert "no attempt is in flight" in reason(g, initial_state(g), Claim("a"))
    assert "not 'x'" in reason(g, s, Claim("x"))


def test_abandon_charges_the_reservation_and_gives_the_attempt_back() -> None:
    g = chain()
    s = run(g, Begin("a"), Reserve(1.0), Settle(0.5), Reserve(2.0))
    after = run(g, Abandon("a"), s=s)
    assert after.settled == 2.5 and after.reserved == 0.0 and after.attempt_spend == 0.0
    assert after.status_of(g, "a") is Status.PENDING and after.attempts_of(g, "a") == 0
    assert after.passes == frozenset() and after.attempts_total == 0 and after.abandoned == 1
    assert after.summary(g)["abandoned"] == 1
    again = run(g, Begin("a"), Abandon("a"), s=after)  # a second crash: given back again
    assert again.status_of(g, "a") is Status.PENDING and again.attempts_of(g, "a") == 0
    assert again.attempts_total == 0 and again.abandoned == 2 and again.settled == 2.5
    assert "no attempt is in flight" in reason(g, initial_state(g), Abandon("a"))


def test_abandon_inside_the_last_attempt_does_not_exhaust_the_node() -> None:
    """The G7 bug: a crash inside a_v's last attempt used to exhaust the node and fail the run."""
    g = LoopGraph.build([NodeSpec("a", attempts=1, spend_ceiling=3.0)], spend_budget=10.0)
    s = run(g, Begin("a"), Reserve(1.0), Abandon("a"))
    assert s.status_of(g, "a") is Status.PENDING and s.settled == 1.0 and s.abandoned == 1
    end = run(g, Begin("a"), Verdict("a", True), Finish(), s=s)
    assert end.outcome is Outcome.DONE and end.attempts_total == 1 and end.abandoned == 1
    failed = run(g, Begin("a"), Verdict("a", False), s=s)  # a real FAIL still uses it up
    assert failed.status_of(g, "a") is Status.EXHAUSTED and failed.attempts_total == 1


# ---- Repair -------------------------------------------------------------------------------------

def test_repair_resets_exactly_the_subtree_with_new_activation_and_spends_k() -> None:
    g = chain(k=2)
    s = run(g, Begin("x"), Verdict("x", True), Begin("a"), Verdict("a", True), Begin("b"),
            Verdict("b", True), Begin("c"), Verdict("c", False))
    after = run(g, Repair("c", "a"), s=s)
    for n in ("a", "b", "c"):  # S_a
        assert after.status_of(g, n) is Status.PENDING
        assert after.activation_of(g, n) == 1 and after.attempts_of(g, n) == 0
    assert after.status_of(g, "x") is Status.DONE and after.activation_of(g, "x") == 0
    assert after.attempts_of(g, "x") == 1
    assert after.repairs_used == 1
    assert after.attempts_total == s.attempts_total
    # old verdicts stay in the ledger but are for an old activation
    assert ("a", 0) in after.passes and ("a", 1) not in after.passes


def test_repair_of_the_node_itself_leaves_its_ancestors_done() -> None:
    g = chain(k=1)
    after = run(g, Repair("c", "c"), s=to_c_exhausted(g))
    assert after.status_of(g, "c") is Status.PENDING and after.activation_of(g, "c") == 1
    assert after.status_of(g, "a") is Status.DONE and after.activation_of(g, "a") == 0


def test_repair_guards() -> None:
    g = chain(k=1)
    s = to_c_exhausted(g)
    assert "not in the repair relation" in reason(g, s, Repair("c", "b"))
    assert "'b' is not EXHAUSTED" in reason(g, s, Repair("b", "b"))
    assert "the run has ended" in reason(g, replace(s, outcome=Outcome.FAILED), Repair("c", "a"))


def test_the_global_repair_budget_is_never_reset() -> None:
    g = chain(k=1)
    s = run(g, Repair("c", "a"), s=to_c_exhausted(g))
    s = run(g, Begin("a"), Verdict("a", True), Begin("b"), Verdict("b", False), s=s)
    # b is exhausted in a fresh activation, but K = 1 was spent by c's repair: no new budget
    assert s.repairs_used == 1
    assert "repair budget K is spent" in reason(g, s, Repair("b", "b"))
    assert run(g, Fail("b"), s=s).outcome is Outcome.FAILED


def test_repairs_used_counts_every_repair_up_to_k() -> None:
    g = chain(k=2)
    s = run(g, Repair("c", "c"), s=to_c_exhausted(g))
    s = run(g, Begin("c"), Verdict("c", False), Repair("c", "c"), s=s)
    assert s.repairs_used == 2
    s = run(g, Begin("c"), Verdict("c", False), s=s)
    assert "K is spent" in reason(g, s, Repair("c", "a"))
    assert s.activation_of(g, "c") == 2


# ---- Fail and Finish ----------------------------------------------------------------------------

def test_fail_only_when_no_repair_is_left() -> None:
    g = chain(k=1)
    s = to_c_exhausted(g)
    assert "a repair is still available" in reason(g, s, Fail("c"))
    assert "'a' is not EXHAUSTED" in reason(g, s, Fail("a"))
    no_pair = run(g, Begin("x"), Verdict("x", False))   # x has no repair pair
    assert run(g, Fail("x"), s=no_pair).outcome is Outcome.FAILED
    zero_k = chain(k=0)
    assert run(zero_k, Fail("c"), s=to_c_exhausted(zero_k)).outcome is Outcome.FAILED


def test_finish_only_when_every_node_is_done() -> None:
    g = chain()
    s = run(g, Begin("a"), Verdict("a", True), Begin("b"), Verdict("b", True), Begin("c"),
            Verdict("c", True))
    assert "not every node is DONE" in reason(g, s, Finish())
    s = run(g, Begin("x"), Verdict("x", True), s=s)
    done = run(g, Finish(), s=s)
    assert done.outcome is Outcome.DONE and done.ended
    assert "the run has ended" in reason(g, done, Finish())
    assert list(control_events(g, done)) == []


# ---- Cancel --------------------------------------------------------------------------------------

def test_cancel_ends_the_activation_of_a_node_next_to_run() -> None:
    g = chain(k=1)
    s = run(g, Begin("a"), Verdict("a", False))     # a failed once, one attempt left
    after = run(g, Cancel("a"), s=s)
    assert after.status_of(g, "a") is Status.EXHAUSTED
    assert after.attempts_of(g, "a") == 1            # the attempt it made stays counted
    assert after.attempts_total == s.attempts_total  # a cancel begins nothing
    assert after.cancelled == {("a", 0)} and after.passes == s.passes
    assert (after.settled, after.reserved, after.outcome) == (s.settled, s.reserved, s.outcome)
    # what follows is what follows any exhausted node: no Begin, and a has no repair: Fail
    assert "is exhausted" in reason(g, after, Begin("x"))
    assert list(control_events(g, after)) == [Fail("a")]


def test_cancel_then_repair_starts_a_new_activation() -> None:
    g = chain(k=1)
    s = run(g, Begin("a"), Verdict("a", True), Begin("b"), Verdict("b", True), Cancel("c"))
    assert list(control_events(g, s)) == [Repair("c", "a"), Repair("c", "c")]
    again = run(g, Repair("c", "c"), s=s)
    assert again.status_of(g, "c") is Status.PENDING and again.activation_of(g, "c") == 1
    assert ("c", 0) in again.cancelled and ("c", 1) not in again.cancelled
    done = run(g, Begin("c"), Verdict("c", True), s=again)
    assert done.status_of(g, "c") is Status.DONE and ("c", 1) in done.passes


def test_cancel_is_refused_where_the_node_could_not_begin() -> None:
    g = chain(k=1)
    s0 = initial_state(g)
    assert "predecessor 'a' is not DONE" in reason(g, s0, Cancel("b"))
    assert "unknown node" in reason(g, s0, Cancel("zz"))
    running = run(g, Begin("a"))
    assert "'a' has an attempt in flight" in reason(g, running, Cancel("a"))
    assert "has an attempt in flight" in reason(g, running, Cancel("x"))
    done = run(g, Verdict("a", True), s=running)
    assert "'a' is DONE, not PENDING" in reason(g, done, Cancel("a"))
    exhausted = to_c_exhausted(g)
    assert "'c' is exhausted" in reason(g, exhausted, Cancel("x"))
    ended = run(g, Begin("x"), Verdict("x", False), Fail("x"))
    assert "the run has ended" in reason(g, ended, Cancel("a"))


# ---- control_events -----------------------------------------------------------------------------

def test_control_events_in_a_few_states() -> None:
    g = chain(k=1)
    assert list(control_events(g, initial_state(g))) == [Begin("a"), Cancel("a"), Begin("x"),
                                                         Cancel("x")]
    assert list(control_events(g, run(g, Begin("a")))) == [Verdict("a", True), Verdict("a", False)]
    assert list(control_events(g, to_c_exhausted(g))) == [Repair("c", "a"), Repair("c", "c")]


GRAPH = chain(k=2, b=7.0)


@st.composite
def any_state(draw: st.DrawFn) -> RunState:
    """Any combination of fields, reachable or not: control_events must equal the guards' verdict."""
    n = len(GRAPH.names)
    pick = st.lists(st.integers(0, 3), min_size=n, max_size=n).map(tuple)
    return RunState(
        status=tuple(draw(st.lists(st.sampled_from(list(Status)), min_size=n, max_size=n))),
        activation=draw(pick),
        attempts=draw(pick),
        passes=frozenset(draw(st.sets(st.tuples(st.sampled_from(GRAPH.names), st.integers(0, 2))))),
        repairs_used=draw(st.integers(0, 3)),
        attempts_total=draw(st.integers(0, 9)),
        settled=draw(st.sampled_from([0.0, 3.0, 4.5, 7.0])),
        reserved=draw(st.sampled_from([0.0, 1.0])),
        outcome=draw(st.sampled_from(list(Outcome))),
    )


@given(any_state())
def test_control_events_equals_every_candidate_filtered_by_its_guard(s: RunState) -> None:
    expected = [e for e in all_control_candidates(GRAPH) if enabled(GRAPH, s, e)]
    assert list(control_events(GRAPH, s)) == expected


@given(any_state())
def test_step_applies_exactly_the_enabled_events(s: RunState) -> None:
    for e in all_control_candidates(GRAPH):
        if enabled(GRAPH, s, e):
            assert isinstance(step(GRAPH, s, e), RunState)
        else:
            with pytest.raises(Disabled):
                step(GRAPH, s, e)
