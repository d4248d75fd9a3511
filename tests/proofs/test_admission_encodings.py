"""Differential tests: the Z3 encodings of the admission models (proofs/g4_evidence.py,
g5_checkpoint.py, g6_policy.py) accept exactly the executable rules' transitions
(model/evidence.py, checkpoint.py, policy.py).

For each model and each of its event kinds, in its own test: drawn states (tests/support/admission_cases.py)
and every instance of the kind from them; an instance the model takes must be accepted with the
model's successor and no other state, one it refuses must have no successor. Each test asserts
that its kind was enabled and refused in a stated share of cases (`event()` statistics record
both), and that it catches faults generated in that kind's rule: its guard negated, its guard
dropped, and each scalar field its effect writes written wrong.
"""

from __future__ import annotations

from collections import Counter

import pytest
import z3
from hypothesis import HealthCheck, event, given, settings

from loopproof.model.rules import enabled, step
from loopproof.proofs.records import Names, REv
from tests.support.admission_cases import MODELS, Case, cases
from tests.support.encoding_steps import caught
from tests.support.example_counts import examples

# `make fuzz` draws 30 (60 cost twice as much and caught no fault the 30 miss)
EXAMPLES = examples(20, fuzz=30)  # was 30 in make check too
RARE_REFUSAL = {("checkpoint", "Drift"): 60}  # its first refused case is drawn after the 30th
MIN_ENABLED = 0.2   # of each kind's cases, at least this share has an enabled instance ...
MIN_DISABLED = 0.03  # ... and at least this share a refused one (of kinds that can be refused)
KINDS = [(rules, kind) for rules in MODELS for kind in rules.kinds]


def disagreement(case: Case, system=None) -> str | None:
    """None when the encoding (`system`, default the real one) agrees with the model on every
    step of the case. One solver per case holds the axioms, the pinned state and the kind's
    transition with its arguments free (as the proofs ask it: `symbolic_move`); each question
    pins the arguments to one event's (and the successor) between a push and a pop.
    (Re-asserting per question was half the cost; building a transition per event, most of
    the rest.)"""
    rules, s = case.rules, case.state
    sys = system if system is not None else rules.system(s)
    names = Names()
    pre, post, args, move = symbolic_move(sys, case.kind)
    solver = z3.Solver()
    solver.set("timeout", 60_000)
    solver.add(*sys.axioms(), pinned(rules, sys, names, s, pre), move)
    for ev in case.steps:
        concrete = rules.event(sys, names, ev)
        assert concrete.kind == case.kind and len(concrete.args) == len(args), concrete
        this = z3.And([a == b for a, b in zip(args, concrete.args, strict=True)])
        if not enabled(s, ev):
            if _sat(solver, names, this):
                return f"{ev} is refused by the model but the encoding takes it from {s}"
            continue
        t = step(s, ev)
        successor = pinned(rules, sys, names, t, post)
        if not _sat(solver, names, this, successor):
            return f"{ev} from {s}: the encoding rejects the model's successor {t}"
        if _sat(solver, names, this, z3.Not(successor)):
            return f"{ev} from {s}: the encoding accepts a successor other than {t}"
    return None


_MOVES: dict[tuple, tuple] = {}


def symbolic_move(sys, kind: str) -> tuple[dict, dict, tuple, z3.BoolRef]:
    """`sys`'s states "pre" and "post", the arguments of an event of `kind` (free constants),
    and the transition of that event between the two. The terms depend only on the system's
    class (a planted fault's is a class of its own) and its shape, so they are built once per
    pair and kind."""
    key = (type(sys), _shape_of(sys), kind)
    if key not in _MOVES:
        (ev,) = [e for e in sys.events("step") if e.kind == kind]
        pre, post = sys.fresh("pre"), sys.fresh("post")
        _MOVES[key] = (pre, post, ev.args, sys.transition(pre, post, ev))
    return _MOVES[key]


_PINS: dict[tuple, tuple[z3.BoolRef, dict]] = {}


def pinned(rules, sys, names: Names, s, z: dict) -> z3.BoolRef:
    """`rules.pin(sys, names, s, z)`, built once per model, shape, state and Z3 state (the real
    check and every planted fault's ask about the same states; a fault changes a rule, never
    how a state is pinned), with the names it met added to `names`."""
    tag = next(iter(z.values())).decl().name().rpartition("@")[2]
    key = (rules.name, _shape_of(sys), tag, s)
    if key not in _PINS:
        own = Names(names.tag)
        _PINS[key] = (rules.pin(sys, own, s, z), own.consts)
    term, met = _PINS[key]
    for name, const in met.items():
        names.consts.setdefault(name, const)
    return term


def _sat(solver: z3.Solver, names: Names, *formulas) -> bool:
    """Is `formulas` satisfiable beside what `solver` holds (and every name distinct: the names
    met so far, which grow as events and states are encoded)? unknown fails."""
    solver.push()
    try:
        solver.add(*formulas, *names.distinct())
        r = solver.check()
        assert r != z3.unknown, solver.reason_unknown()
        return r == z3.sat
    finally:
        solver.pop()


def faults(case: Case):
    """Broken copies of the case's encoding: for the kind's rule, its guard negated, its guard
    dropped, and each scalar field its effect writes written wrong."""
    sys = case.rules.system(case.state)
    kind = case.kind
    method = f"rule_{kind.lower()}"
    real = getattr(type(sys), method)

    def variant(name, change):
        broken = type(f"{type(sys).__name__}Fault", (type(sys),), {
            method: lambda self, s, ev: change(self, s, ev, *real(self, s, ev))})
        b = broken.__new__(broken)
        b.__dict__.update(sys.__dict__)
        return name, b

    probe = sys.fresh("probe")
    guard, updates = real(sys, probe, REv(kind, sys, tuple(
        z3.Const(f"a{i}", srt) for i, srt in enumerate(sys.EVENTS[kind]))))
    yield variant("guard negated", lambda self, s, ev, g, u: (z3.Not(g), u))
    if not z3.is_true(z3.simplify(guard)):  # a guard that is True already cannot be dropped
        yield variant("guard dropped", lambda self, s, ev, g, u: (z3.BoolVal(True), u))
    for field in sorted(updates):
        x = updates[field]
        if z3.is_array(x):
            continue

        def wrong(self, s, ev, g, u, field=field):
            v = u[field]
            bumped = z3.Not(v) if z3.is_bool(v) else v + 1 if z3.is_int(v) else \
                z3.Const(f"wrong:{field}", v.sort())
            return g, {**u, field: bumped}
        yield variant(f"effect writes {field} wrong", wrong)


@pytest.mark.parametrize(("rules", "kind"), KINDS, ids=[f"{r.name}-{k}" for r, k in KINDS])
def test_every_kind_of_every_admission_model_as_the_step_under_test(rules, kind):
    seen: list[Case] = []

    @settings(derandomize=True, max_examples=RARE_REFUSAL.get((rules.name, kind), EXAMPLES), database=None,
              suppress_health_check=list(HealthCheck))
    @given(cases(rules, kind))
    def differential(case: Case) -> None:
        for label, steps in (("enabled", case.enabled_steps), ("refused", case.disabled_steps)):
            if steps:
                event(f"{rules.name} step under test: {kind} {label}")
        problem = disagreement(case)
        assert problem is None, problem
        seen.append(case)

    differential()
    share = Counter()
    for c in seen:
        share["on"] += bool(c.enabled_steps)
        share["off"] += bool(c.disabled_steps)
    always = kind in ("Edit", "WorkerWrite")  # the environment's and the worker's: never refused
    assert share["on"] >= MIN_ENABLED * len(seen), (kind, share)
    assert always or share["off"] >= MIN_DISABLED * len(seen), (kind, share)
    shown: dict[str, bool] = {}
    for shape in sorted({_shape(c) for c in seen}):
        mine = [c for c in seen if _shape(c) == shape]
        for name, broken in faults(mine[0]):
            shown[name] = shown.get(name, False) or caught(
                mine, lambda c, broken=broken: disagreement(c, broken))
    uncaught = sorted(name for name, ok in shown.items() if not ok)
    assert not uncaught, f"{rules.name} {kind}: the differential test misses {uncaught}"


def _shape(case: Case) -> tuple[int, ...]:
    """The size of a case's encoding (its numbers of checks): faults are built per shape."""
    return _shape_of(case.rules.system(case.state))


def _shape_of(sys) -> tuple[int, ...]:
    return (getattr(sys, "m", 0), getattr(sys, "k", 0), len(getattr(sys, "checks", ())))
