"""Differential tests: the Z3 encodings accept exactly the model's transitions.

The cases come from tests/support/encoding_steps.py: a graph, a state reached from Init by a drawn
prefix of enabled events, and a step under test drawn separately, of a given kind. If the model
takes the step, the encoded transition must accept the model's successor and no other state; if
the model refuses it, the encoded transition must accept no successor at all. Both encodings are
held to this: the per-shape run encoding (proofs/encoding.py, used by G1, G2-family and G3) and
the unbounded one (proofs/unbounded.py, used by G2) with its node sort made exactly the graph's
nodes (same code, same quantifiers).

Every kind the model declares is the step under test in its own test (an equal share of the cases),
enabled in at least MIN_ENABLED of them and disabled in at least MIN_DISABLED (Hypothesis
`event()` statistics record both; the assertion is the test's). Each per-kind test then checks
that it catches every fault generated for that kind (tests/support/encoding_steps.py): a test that
cannot tell a broken encoding from the real one tells nothing.

Spend amounts are binary fractions, so the model's float sums are exact and Z3's rational
arithmetic sees the same numbers.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import z3
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import RULES, RunRules
from loopproof.model.state import RunState, Status, initial_state
from loopproof.model.transitions import (
    Begin,
    Event,
    Repair,
    Reserve,
    Settle,
    Verdict,
    enabled,
    step,
)
from loopproof.proofs.encoding import EPS, KINDS, S_RUNNING, Params, RunEncoding
from loopproof.proofs.unbounded import INT, UnboundedRuns, UState
from tests.support.encoding_steps import (
    DROPPED,
    FIELDS,
    Case,
    _bump,
    cases,
    caught,
    changes_a_transition,
    check_sat,
    conjuncts,
    disagreement,
    effect_changed,
    faults,
    guard_changed,
    guard_keys,
    instances,
)
from tests.support.example_counts import examples

# cases per kind (derandomized: the planted faults need a fixed sample); `make fuzz` draws 30
EXAMPLES = examples(20, fuzz=30)  # was 30 in make check too
FEW_ENABLED = {"Finish": examples(30, fuzz=30)}  # of its first 20 cases only 5 have Finish enabled
MIN_ENABLED = 0.4    # of each kind's cases, at least this share has an enabled step ...
MIN_DISABLED = 0.4   # ... and at least this share a disabled one


def drawn_cases(kind: str, examples: int, disagree) -> list[Case]:
    """Draw `examples` cases with `kind` as the step under test (their `event()` statistics say
    which had an enabled and a disabled step), require `disagree(case)` to find nothing on each,
    and return them: the faults planted afterwards must be caught on these same cases."""
    seen: list[Case] = []

    @settings(derandomize=True, max_examples=examples, database=None,
              suppress_health_check=list(HealthCheck))
    @given(cases(kind))
    def differential(case: Case) -> None:
        for label, steps in (("enabled", case.enabled_steps), ("disabled", case.disabled_steps)):
            if steps:
                event(f"step under test: {kind} {label}")
        problem = disagree(case)
        assert problem is None, problem
        seen.append(case)

    differential()
    return seen


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_as_the_step_under_test_and_every_fault_planted_in_it_is_caught(kind):
    seen = drawn_cases(kind, FEW_ENABLED.get(kind, EXAMPLES),
                       lambda case: disagreement(RULES, case))
    on = sum(bool(c.enabled_steps) for c in seen)
    off = sum(bool(c.disabled_steps) for c in seen)
    assert on >= MIN_ENABLED * len(seen), f"{kind} enabled in {on} of {len(seen)} cases"
    assert off >= MIN_DISABLED * len(seen), f"{kind} disabled in {off} of {len(seen)} cases"
    planted, uncaught, order = 0, [], list(seen)
    for fault in faults(kind, set().union(*(guard_keys(c) for c in seen))):
        if fault.drops_a_conjunct and not any(changes_a_transition(fault, c) for c in seen):
            continue  # the same rule on every drawn graph: not a fault
        planted += 1
        if not caught(order, lambda c, fault=fault: disagreement(fault.rules, c)):
            uncaught.append(fault.name)
    assert planted >= 2 + len(FIELDS), f"{kind}: only {planted} faults planted"
    assert not uncaught, f"{kind}: the differential test misses {uncaught}"


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(KINDS).flatmap(cases))
def test_run_encoding_agrees_with_the_model_on_any_step(case):
    """The same check with the kind drawn too: random exploration in the dev profile."""
    event(f"step under test: {case.kind}")
    problem = disagreement(RULES, case)
    assert problem is None, problem


def test_the_differential_test_catches_a_repair_that_adds_two_to_the_activation():
    """The fault a reviewer planted by hand (it passed every test and every proof before the
    step under test was drawn apart from the prefix)."""
    class RepairTwice(RunRules):
        def effect_repair(self, s, ev, u):
            super().effect_repair(s, ev, u)
            for w in s.subtree(ev.target):
                u.set_activation(w, s.activation(w) + 2)

    graph = LoopGraph.build([NodeSpec("a", repairs=("a",))], repair_budget=1)
    s = step(graph, step(graph, initial_state(graph), Begin("a")), Verdict("a", False))
    case = Case(graph, s, "Repair")
    assert case.enabled_steps == [Repair("a", "a")] and disagreement(RULES, case) is None
    assert "rejects the model's successor" in disagreement(RepairTwice(), case)


def test_instances_cover_every_kind_the_model_declares():
    """Every kind has instances, and spend amounts include a negative one (the model refuses
    it; so must the encoding)."""
    graph = LoopGraph.build([NodeSpec("a", repairs=("a",))], repair_budget=1, spend_budget=2.0)
    s = initial_state(graph)
    assert {type(e).__name__ for k in KINDS for e in instances(k, graph, s)} == set(KINDS)
    assert any(isinstance(e, Reserve) and e.amount < 0 for e in instances("Reserve", graph, s))


def test_run_encoding_reads_back_what_it_pins():
    graph = LoopGraph.build([NodeSpec("a", attempts=2, spend_ceiling=1.0),
                             NodeSpec("b", needs=("a",), repairs=("a",))],
                            repair_budget=1, spend_budget=5.0)
    s = initial_state(graph)
    for e in (Begin("a"), Reserve(0.5), Settle(0.25), Verdict("a", True), Begin("b"),
              Verdict("b", False), Repair("b", "a")):
        s = step(graph, s, e)
    enc = RunEncoding(graph, Params.of(graph))
    x = enc.fresh("x")
    solver = z3.Solver()
    solver.add(enc.pin(x, s))
    assert solver.check() == z3.sat
    assert enc.read(solver.model(), x) == s


# ---- the unbounded encoding (G2) ------------------------------------------------------------------

UNBOUNDED_EXAMPLES = examples(6, fuzz=10)  # per kind (was 10 in make check too)
UNBOUNDED_MIN_ENABLED = 0.25

@dataclass(frozen=True)
class Lifted:
    """A graph lifted onto the unbounded encoding (`UnboundedRuns.on_graph`): the real rules'
    system over the graph's own node sort, its nodes, and what a solver is given about the
    graph (the relations pinned, and the axioms the pins do not imply). Made once per graph and
    shared by every question about it: a planted fault's system has the same sort, the same
    relations and the same fields, only other rules (`with_rules`)."""

    sys: UnboundedRuns
    k: dict[str, z3.ExprRef]
    pinned: list[z3.BoolRef]
    facts: list[z3.BoolRef]

    def with_rules(self, rules: RunRules) -> UnboundedRuns:
        return self.sys if rules is RULES else UnboundedRuns(rules, node_sort=self.sys.N)


@functools.lru_cache(maxsize=256)
def lifted(graph: LoopGraph) -> Lifted:
    sys, k, pinned = UnboundedRuns.on_graph(graph)
    return Lifted(sys, k, pinned, [*graph_facts(sys, pinned), *pinned])


def graph_facts(sys: UnboundedRuns, pinned: list[z3.BoolRef]) -> list[z3.BoolRef]:
    """The graph axioms a solver holding the pinned graph still needs: the quantified ones hold
    on it, each implied by the pins (asserted: its negation is unsat), so only the ground ones
    (K >= 0, B >= 0: B is free when B is infinite) are returned. With the quantified axioms in
    the solver, a sat query (the model's successor exists) took minutes, as Z3 builds a model of
    transitivity over the sort; implied, they change no answer."""
    axioms = sys.axioms()
    solver = z3.Solver()
    solver.set("timeout", 120_000)
    solver.add(*pinned)
    for axiom in axioms:
        if z3.is_quantifier(axiom):
            assert check_sat(solver, z3.Not(axiom)) == z3.unsat, f"the graph breaks {axiom}"
    return [a for a in axioms if not z3.is_quantifier(a)]


@functools.lru_cache(maxsize=4096)
def pinned_state(graph: LoopGraph, tag: str, r: RunState) -> z3.BoolRef:
    """`lifted(graph)`'s state tagged `tag` pinned to `r` (the same under any rules)."""
    g = lifted(graph)
    return g.sys.pin_state(g.k, graph, g.sys.fresh(tag), r)


def solve(*formulas: z3.BoolRef) -> z3.CheckSatResult:
    """Z3's answer on `formulas`, after solving the equations they define: a state field
    pinned to, or updated with, a lambda is replaced by it, so what is left is ground but for
    the guards' quantifiers over the (finite) node sort. Without this step, which successor
    query was slow depended on what the process had asked before (a Repair query: 5 ms alone,
    past 120 s after the other kinds' cases). Unknown fails."""
    solver = z3.Then("simplify", "solve-eqs", "smt").solver()
    solver.set("timeout", 120_000)  # a loaded machine is slow, not wrong
    solver.add(*formulas)
    r = solver.check()
    assert r != z3.unknown, solver.reason_unknown()
    return r


def agreeing_checks(case: Case) -> list[tuple[RunState, Event]]:
    """The case's (state, step) pairs whose state has at most one node RUNNING: there "the
    attempt in flight is n" and "n is RUNNING" agree, so the unbounded encoding must equal the
    model (every reachable state is such a state; so are most of the states next to one)."""
    return [(s, e) for s, e in case.checks
            if sum(x == Status.RUNNING for x in s.status) <= 1]


def unbounded_disagreement(case: Case, rules: RunRules = RULES) -> str | None:
    """As `disagreement`, for the unbounded encoding (under `rules`, or a planted fault's
    variant of them) with its node sort made the graph's nodes, on every step of the case from
    a state with at most one node RUNNING (`agreeing_checks`: it over-approximates which
    attempt is in flight elsewhere). Each question is asked of a fresh solver (`solve`), so no
    answer depends on the questions before it."""
    graph = case.graph
    g = lifted(graph)
    sys = g.with_rules(rules)
    pre, post = sys.fresh("pre"), sys.fresh("post")
    for s, ev in agreeing_checks(case):
        given_ = [*g.facts, pinned_state(graph, "pre", s)]
        move = sys.transition(pre, post, sys.event(g.k, graph, s, ev))
        if not enabled(graph, s, ev):
            if solve(*given_, move) != z3.unsat:
                return f"{ev} is disabled, taken from {s}"
            continue
        t = step(graph, s, ev)
        if solve(*given_, move, pinned_state(graph, "post", t)) != z3.sat:
            return f"{ev} from {s}: the model's successor {t} is rejected"
        if solve(*given_, move, z3.Not(pinned_state(graph, "post", t))) != z3.unsat:
            return f"{ev} from {s}: a successor other than {t} is accepted"
    return None


def changes_an_unbounded_transition(broken: RunRules, cases_: list[Case]) -> bool:
    """Does a fault change the guard of a step of one of the cases on some state of its graph
    with at most one node RUNNING (`agreeing_checks`) that satisfies G3's proved bounds (the
    rule of the per-shape faults, tests/support/encoding_steps.py)? If not, it is the same rule there
    (Repair's `R(d, u)` for the graph's own pairs; Settle's `of >= 0`, implied by
    0 <= amount <= of; Overrun's `amount >= 0`, as a negative amount fits wherever the spend
    bounds hold), and no test could tell them apart."""
    for case in cases_:
        graph = case.graph
        g = lifted(graph)
        mutant = g.with_rules(broken)
        s = g.sys.fresh("s")
        for ev in {e for _, e in agreeing_checks(case)}:
            u = g.sys.event(g.k, graph, case.state, ev)
            real, other = g.sys.guard(s, u), mutant.guard(s, u)
            if not z3.eq(real, other) and solve(*g.facts, one_in_flight_within_bounds(graph),
                                                real != other) == z3.sat:
                return True
    return False


@functools.lru_cache(maxsize=256)
def one_in_flight_within_bounds(graph: LoopGraph) -> z3.BoolRef:
    """On `lifted(graph)`'s state tagged "s": at most one node RUNNING, and G3's spend bounds."""
    sys = lifted(graph).sys
    x, y = z3.Consts("x y", sys.N)
    s = sys.fresh("s")
    return z3.And(
        z3.ForAll([x, y], z3.Implies(z3.And(s.status[x] == S_RUNNING,
                                            s.status[y] == S_RUNNING), x == y)),
        s.settled >= 0, s.reserved >= 0, s.attempt_spend >= 0,
        sys.within_budget(s.settled + s.reserved),
        z3.ForAll([x], z3.Implies(s.status[x] == S_RUNNING,
                                  s.attempt_spend <= sys.c(x) + EPS)))


def _unbounded_bump(sys: UnboundedRuns, x: z3.ExprRef, pre: UState,
                    n: z3.ExprRef) -> z3.ExprRef:
    """`x` (a field's new value) one step wrong: a scalar as `_bump`; an array over nodes
    changed at the event's node `n` (the next status, +1, its current activation's flag
    flipped)."""
    if not isinstance(x.sort(), z3.ArraySortRef):  # a lambda is not is_array
        return _bump(x, None, "")
    if x.sort() == z3.ArraySort(sys.N, INT, z3.BoolSort()):
        return z3.Store(x, n, pre.activation[n], z3.Not(x[n, pre.activation[n]]))
    return z3.Store(x, n, _bump(x[n], None, ""))


def unbounded_faults(kind: str) -> Iterator[tuple[str, RunRules]]:
    """Every generated fault of `kind` in the unbounded encoding, as a variant of the rule
    table: the guard negated, the guard dropped, each conjunct of the guard (flattened) dropped,
    and each field of the effect written one step wrong at the event's node (for Finish, which
    names none, at some node: any node the solver picks is written wrong)."""
    probe = UnboundedRuns()
    width = max(len(conjuncts(probe.guard(probe.fresh("p"), ev)))
                for ev in probe.events("p") if ev.kind == kind)
    yield "guard negated", guard_changed(kind, lambda g, ev: z3.Not(g))()
    yield "guard dropped", guard_changed(kind, lambda g, ev: z3.BoolVal(True))()
    for i in range(width):
        def drop(g, ev, i=i):
            return z3.And([c for j, c in enumerate(conjuncts(g)) if j != i])
        yield f"{DROPPED}conjunct {i}", guard_changed(kind, drop)()
    for name in FIELDS:
        def write(s, ev, u, name=name):
            n = ev.node if ev.node is not None else z3.Const("w@fault", s.sys.N)
            u.write(name, _unbounded_bump(s.sys, u.current(name), s.s, n))
        yield f"effect writes {name} wrong", effect_changed(kind, write)()


@pytest.mark.parametrize("kind", KINDS)
def test_unbounded_encoding_with_every_kind_as_the_step_under_test(kind):
    seen = drawn_cases(kind, UNBOUNDED_EXAMPLES, unbounded_disagreement)
    on = sum(bool(c.enabled_steps) for c in seen)
    assert on >= UNBOUNDED_MIN_ENABLED * len(seen), f"{kind} enabled in {on} of {len(seen)}"
    assert any(c.disabled_steps for c in seen), f"{kind} never disabled"
    planted, uncaught, order = 0, [], list(seen)
    for name, broken in unbounded_faults(kind):
        if name.startswith(DROPPED) and not changes_an_unbounded_transition(broken, seen):
            continue  # the same rule on every drawn graph: not a fault
        planted += 1
        if not caught(order, lambda c, broken=broken: unbounded_disagreement(c, broken)):
            uncaught.append(name)
    assert planted >= 2 + len(FIELDS), f"{kind}: only {planted} faults planted"
    assert not uncaught, f"{kind}: the unbounded differential test misses {uncaught}"
