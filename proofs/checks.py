"""Small check functions in mypyvy's style: each returns None when the check passes, or a
counterexample `Trace` when it fails. `Unknown` (timeout, incompleteness) is raised, never hidden.

They work on any `System`: an encoding with fresh states, Init, declared events and a transition
relation (proofs/encoding.py for runs, proofs/unbounded.py, proofs/g4_evidence.py, ...).

A bounded search (`bmc`, `find_lasso`) that finds nothing returns `NotRefuted`, never None: no
run of at most `depth` steps breaks the property, which proves nothing about longer runs. Only
the induction checks return None ("proved").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import z3

from loopproof.proofs.canonical import Canonical
from loopproof.proofs.solver import witness
from loopproof.proofs.trace import Step, Trace


class System(Protocol):
    def fresh(self, tag: str) -> Any: ...
    def axioms(self) -> list[z3.BoolRef]: ...
    def init(self, s: Any) -> z3.BoolRef: ...
    def events(self, tag: str) -> Sequence[Any]: ...
    def transition(self, s: Any, t: Any, ev: Any) -> z3.BoolRef: ...
    def describe(self, model: z3.ModelRef, s: Any) -> dict[str, Any]: ...


Invariant = Callable[[Any], z3.BoolRef]

DEPTH_LIMIT = 0  # bounded searches go at least this deep (`python -m loopproof.proofs --max-depth N`)


# Every NotRefuted made in this process, in order: discharge() looks here so that a check which
# ran a bounded search, found no run and went on to say "proved" is caught.
MADE: list[NotRefuted] = []


@dataclass(frozen=True)
class NotRefuted:
    """A bounded search found no counterexample within `depth` steps: not a proof.

    Why a type of its own: a None would read as "proved", and a search that was too shallow
    would then pass as a proof of the property it failed to refute."""

    depth: int
    what: str

    def __post_init__(self) -> None:
        MADE.append(self)

    @property
    def result(self) -> str:
        return f"not refuted within depth {self.depth}"

    def hint(self) -> str:
        return (f"no run of at most {self.depth} steps from Init breaks {self.what}; a bounded "
                "search proves nothing. If a bad run exists, it is longer: raise the depth to "
                "the length of the shortest bad run, or let the search go deeper with "
                "`python -m loopproof.proofs --only ID --max-depth N` (it stops at the shortest one)")


Found = Trace | NotRefuted | None  # what a check returns: refuted, not refuted, proved


class _Session:
    """A base set of formulas, asked together with one extra question at a time."""

    def __init__(self, what: str, *formulas: z3.BoolRef) -> None:
        self.what = what
        self.base = list(formulas)

    def sat(self, *formulas: z3.BoolRef) -> z3.ModelRef | None:
        """A model, None when unsatisfiable; `Unknown` is raised, never taken for either."""
        return witness(self.what, [*self.base, *formulas])

    def add(self, *formulas: z3.BoolRef) -> None:
        self.base.extend(formulas)

    def canonical(self, sys: System, model: z3.ModelRef, extra: Sequence[z3.BoolRef] = (), *,
                  choices: Sequence[z3.ArithRef] = (),
                  events: Sequence[Any] | Callable[[z3.ModelRef], Sequence[Any]] = (),
                  states: Sequence[Any] = (), terms: Sequence[z3.ExprRef] = ()) -> z3.ModelRef:
        """The canonical model of base + `extra` (proofs/canonical.py): the event chosen at
        each step, the parameters, the events' arguments (`events` may be a function of the
        model with the choices fixed), the states' fields, then `terms`."""
        c = Canonical(self.what, [*self.base, *extra], model)
        if hasattr(sys, "canonical_universe"):
            sys.canonical_universe(c)
        for ch in choices:
            c.fix(ch)
        c.fix_all(parameters(sys))
        for ev in (events(c.model) if callable(events) else events):
            c.fix_all(event_terms(ev))
        for group in (states[:1], states[1:]):  # the first state is an input; the rest follow
            for round_ in range(2):
                c.fix_all([t for s in group for t in observables(sys, c.model, s, round_)])
        c.fix_all(terms)
        return c.final()


def parameters(sys: System) -> list[z3.ExprRef]:
    """The terms a trace shows as its parameters (a_v, c_v, K, B, R, ...), if the system says."""
    return list(sys.parameters()) if hasattr(sys, "parameters") else []


def event_terms(ev: Any) -> list[z3.ExprRef]:
    """An event's arguments as Z3 terms (amounts, hashes, nodes)."""
    if hasattr(ev, "args"):
        return list(ev.args)
    return [x for x in (getattr(ev, "node", None), getattr(ev, "target", None),
                        getattr(ev, "amount", None), getattr(ev, "of", None))
            if isinstance(x, z3.ExprRef)]


def observables(sys: System, model: z3.ModelRef, s: Any, round_: int) -> list[z3.ExprRef]:
    """The terms of state `s` a trace shows. Round 0: its scalar fields; round 1: cells of its
    arrays, chosen with the values round 0 fixed (the system's `observables`, if it has one)."""
    if hasattr(sys, "observables"):
        return list(sys.observables(model, s, round_))
    if round_ > 0:
        return []
    fields = s.vars if hasattr(s, "vars") else s if isinstance(s, dict) else s.fields()
    return [x for x in fields.values() if not z3.is_array(x)]


def _trace(sys: System, kind: str, note: str, steps: list[Step],
           model: z3.ModelRef) -> Trace:
    return Trace(kind, note, steps, _params(sys, model), system=sys)


def _params(sys: System, model: z3.ModelRef) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if hasattr(sys, "case"):
        out["graph"] = sys.case
    if hasattr(sys, "describe_params"):
        out |= sys.describe_params(model)
    return out


def _step(sys: System, model: z3.ModelRef, s: Any, ev: Any | None) -> Step:
    label = None if ev is None else ev.label(model)
    step = Step(label, sys.describe(model, s))
    if hasattr(sys, "concrete"):
        step.state_obj, step.event_obj = sys.concrete(model, s, ev)
    return step


# ---- induction ----------------------------------------------------------------------------------

def check_init(sys: System, inv: Invariant) -> Trace | None:
    """Init => Inv."""
    s = sys.fresh("0")
    session = _Session("Init => Inv", *sys.axioms(), sys.init(s))
    m = session.sat(z3.Not(inv(s)))
    if m is None:
        return None
    m = session.canonical(sys, m, [z3.Not(inv(s))], states=[s])
    return _trace(sys, "trace", "an initial state breaks the invariant",
                  [_step(sys, m, s, None)], m)


def check_transitions(sys: System, inv: Invariant) -> Trace | None:
    """Inv and Trans => Inv', for every declared transition separately."""
    s, t = sys.fresh("pre"), sys.fresh("post")
    session = _Session("Inv and Trans => Inv'", *sys.axioms(), inv(s), z3.Not(inv(t)))
    for ev in sys.events("step"):
        m = session.sat(sys.transition(s, t, ev))
        if m is not None:
            m = session.canonical(sys, m, [sys.transition(s, t, ev)], events=[ev],
                                  states=[s, t])
            return _trace(sys, "cti", f"{ev.label(m)} leads from a state satisfying the "
                          "invariant to one that breaks it",
                          [_step(sys, m, s, None), _step(sys, m, t, ev)], m)
    return None


def check_implies(sys: System, inv: Invariant, prop: Invariant, what: str) -> Trace | None:
    """Inv => Prop: the invariant is strong enough for the property it is for."""
    s = sys.fresh("s")
    session = _Session("Inv => Prop", *sys.axioms(), inv(s))
    m = session.sat(z3.Not(prop(s)))
    if m is None:
        return None
    m = session.canonical(sys, m, [z3.Not(prop(s))], states=[s])
    return _trace(sys, "cti", f"a state satisfies the invariant but not {what}",
                  [_step(sys, m, s, None)], m)


def check_inductive(sys: System, inv: Invariant, prop: Invariant | None = None,
                    what: str = "the property") -> Trace | None:
    """Init => Inv, Inv and Trans => Inv', and (if given) Inv => Prop."""
    return (check_init(sys, inv) or check_transitions(sys, inv)
            or (None if prop is None else check_implies(sys, inv, prop, what)))


def check_unchanged(sys: System, keep: Callable[[Any, Any], z3.BoolRef],
                    allowed: Sequence[str], what: str) -> Trace | None:
    """A frame condition: every transition whose kind is not in `allowed` satisfies keep(s, t),
    from ANY state (no invariant assumed)."""
    s, t = sys.fresh("pre"), sys.fresh("post")
    session = _Session(f"frame of {what}", *sys.axioms(), z3.Not(keep(s, t)))
    for ev in sys.events("step"):
        if ev.kind in allowed:
            continue
        m = session.sat(sys.transition(s, t, ev))
        if m is not None:
            m = session.canonical(sys, m, [sys.transition(s, t, ev)], events=[ev],
                                  states=[s, t])
            return _trace(sys, "cti", f"{ev.label(m)} changes {what}",
                          [_step(sys, m, s, None), _step(sys, m, t, ev)], m)
    return None


def first(checks: Iterable[Found]) -> Found:
    """The first counterexample of a family of checks (one per graph); else the first
    `NotRefuted` among them (a bounded search is not a proof); None if every one is proved."""
    bounded: NotRefuted | None = None
    for cex in checks:
        if isinstance(cex, Trace):
            return cex
        if isinstance(cex, NotRefuted) and bounded is None:
            bounded = cex
    return bounded


# ---- ranking ------------------------------------------------------------------------------------

def lex_less(new: Sequence[z3.ArithRef], old: Sequence[z3.ArithRef]) -> z3.BoolRef:
    """`new` < `old` in the lexicographic order of tuples of integers."""
    if not new:
        return z3.BoolVal(False)
    return z3.Or(new[0] < old[0], z3.And(new[0] == old[0], lex_less(new[1:], old[1:])))


def check_ranking(sys: System, inv: Invariant,
                  rank: Callable[[Any], Sequence[z3.ArithRef]]) -> Trace | None:
    """Inv and Trans => rank(s) is in N^k and rank(s') <_lex rank(s), for every transition.
    With Inv inductive this shows every run is finite (N^k under <_lex is well-founded)."""
    s, t = sys.fresh("pre"), sys.fresh("post")
    r, r2 = rank(s), rank(t)
    ok = z3.And(*[x >= 0 for x in r], lex_less(r2, r))
    session = _Session("ranking", *sys.axioms(), inv(s), z3.Not(ok))
    for ev in sys.events("step"):
        m = session.sat(sys.transition(s, t, ev))
        if m is not None:
            m = session.canonical(sys, m, [sys.transition(s, t, ev)], events=[ev],
                                  states=[s, t], terms=[*r, *r2])
            before = [m.eval(x, model_completion=True) for x in r]
            after = [m.eval(x, model_completion=True) for x in r2]
            note = (f"{ev.label(m)} does not decrease the ranking "
                    f"({', '.join(map(str, before))}) -> ({', '.join(map(str, after))})")
            return _trace(sys, "cti", note, [_step(sys, m, s, None), _step(sys, m, t, ev)], m)
    return None


# ---- sanity -------------------------------------------------------------------------------------

def check_init_satisfiable(sys: System, inv: Invariant | None = None) -> Trace | None:
    """Init (and Inv) has a model: nothing is proved about an empty set of runs."""
    s = sys.fresh("0")
    extra = [] if inv is None else [inv(s)]
    if _Session("Init satisfiable", *sys.axioms(), sys.init(s), *extra).sat() is not None:
        return None
    return Trace("vacuous", "Init is unsatisfiable (or contradicts the invariant)")


def check_enabled(sys: System, inv: Invariant) -> Trace | None:
    """Every declared transition can fire from some state satisfying Inv."""
    s, t = sys.fresh("pre"), sys.fresh("post")
    session = _Session("transition satisfiable", *sys.axioms(), inv(s))
    for ev in sys.events("step"):
        if session.sat(sys.transition(s, t, ev)) is None:
            return Trace("vacuous", f"{ev.label()} can never fire from a state satisfying the "
                         "invariant, so every proof about it would hold vacuously")
    return None


# ---- bounded model checking ---------------------------------------------------------------------

class _Unrolling:
    """Init(s0), Trans(s0, s1), ..., one chosen event per step (selected by an Int)."""

    def __init__(self, sys: System, what: str) -> None:
        self.sys = sys
        self.states = [sys.fresh("0")]
        self.events: list[Sequence[Any]] = []
        self.choice: list[z3.ArithRef] = []
        self.session = _Session(what, *sys.axioms(), sys.init(self.states[0]))

    def extend(self) -> None:
        k = len(self.states)
        s, t = self.states[-1], self.sys.fresh(str(k))
        evs = self.sys.events(str(k))
        sel = z3.Int(f"event@{k}")
        self.session.add(z3.Or([z3.And(sel == j, self.sys.transition(s, t, ev))
                                for j, ev in enumerate(evs)]))
        self.states.append(t)
        self.events.append(evs)
        self.choice.append(sel)

    def canonical(self, m: z3.ModelRef, upto: int, *extra: z3.BoolRef) -> z3.ModelRef:
        """The canonical model of the first `upto` steps: the least run of events first."""
        return self.session.canonical(
            self.sys, m, extra, choices=self.choice[:upto],
            events=lambda model: [self.events[k][model.eval(self.choice[k],
                                                            model_completion=True).as_long()]
                                  for k in range(upto)],
            states=self.states[:upto + 1])

    def trace(self, m: z3.ModelRef, upto: int, kind: str, note: str) -> Trace:
        steps = [_step(self.sys, m, self.states[0], None)]
        for k in range(upto):
            ev = self.events[k][m.eval(self.choice[k], model_completion=True).as_long()]
            steps.append(_step(self.sys, m, self.states[k + 1], ev))
        return _trace(self.sys, kind, note, steps, m)


def bmc(sys: System, bad: Invariant, depth: int, what: str) -> Trace | NotRefuted:
    """The shortest run from Init, of at most `depth` steps (at least `DEPTH_LIMIT`), that ends
    in a `bad` state; `NotRefuted` when there is none that short."""
    depth = max(depth, DEPTH_LIMIT)
    u = _Unrolling(sys, f"BMC for {what}")
    for k in range(depth + 1):
        m = u.session.sat(bad(u.states[k]))
        if m is not None:
            m = u.canonical(m, k, bad(u.states[k]))
            return u.trace(m, k, "trace", f"a run from Init reaches a state that breaks {what}")
        if k < depth:
            u.extend()
    return NotRefuted(depth, what)


def find_lasso(sys: System, project: Callable[[Any], Sequence[z3.ExprRef]], depth: int,
               what: str) -> Trace | NotRefuted:
    """The shortest run from Init whose last state repeats an earlier one on `project`
    (the fields every guard and every update of them read), i.e. a loop that runs forever;
    `NotRefuted` when none of at most `depth` steps (at least `DEPTH_LIMIT`) does."""
    depth = max(depth, DEPTH_LIMIT)
    u = _Unrolling(sys, f"lasso search for {what}")
    for k in range(1, depth + 1):
        u.extend()
        last = project(u.states[k])
        for i in range(k):
            repeat = z3.And([a == b for a, b in zip(project(u.states[i]), last, strict=True)])
            m = u.session.sat(repeat)
            if m is not None:
                m = u.canonical(m, k, repeat)
                tr = u.trace(m, k, "lasso", f"{what}: a reachable state repeats")
                tr.loop_start = i
                return tr
    return NotRefuted(depth, f"{what} (no reachable state repeats)")
