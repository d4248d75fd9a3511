"""States and events of the admission models (model/evidence.py, checkpoint.py, policy.py) for
the differential tests of their encodings (tests/proofs/test_admission_encodings.py).

Each model gets a `Rules` adapter: its initial states, every instance of each event kind worth
trying from a state (enabled ones and ones refused for each reason a guard gives), and its
encoding's hooks (the system, how a concrete state and event are pinned). A case is a state
reached from an initial state by a drawn walk of enabled events, steered toward where the kind
under test fires, and every instance of that kind from it is a step under test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import strategies as st

from loopproof.model import checkpoint as mc
from loopproof.model import evidence as me
from loopproof.model import policy as mp
from loopproof.model.rules import Item, enabled, step
from loopproof.proofs import g4_evidence as g4
from loopproof.proofs import g5_checkpoint as g5
from loopproof.proofs import g6_policy as g6
from loopproof.proofs.records import Names

TREES = ("t0", "t1", "t2")
SUITES = ("s0", "s1", "s2")
CHECKS = ("visible", "challenge")


@dataclass(frozen=True)
class Rules:
    """One admission model as the differential test sees it."""

    name: str
    kinds: tuple[str, ...]
    initial: Callable[[str], Any]                       # kind -> a strategy of initial states
    instances: Callable[[str, Any], list[Any]]          # kind, state -> events of that kind
    system: Callable[[Any], Any]                        # state -> the encoding for its shape
    pin: Callable[[Any, Names, Any, dict], Any]         # system, names, state, Z3 state
    event: Callable[[Any, Names, Any], Any]             # system, names, event -> REv
    toward: dict[str, tuple[str, ...]]                  # kinds of events that lead to a kind
    ending: str                                         # the kind that ends a run of the model


def _next_id(issued: Sequence[Item]) -> str:
    return f"x{len(issued) + 1}"


def _items(s: Any, checks: Sequence[str], trees: Sequence[str], suite_of) -> list[Item]:
    """Evidence worth issuing from `s`: a fresh id per check and tree with the suite the check
    has now (PASS; an error on the first tree), with another suite; an id already issued; an
    unknown check."""
    fresh = _next_id(s.issued)
    out = [Item(fresh, c, t, suite_of(c)) for c in checks for t in trees]
    out += [Item(fresh, c, trees[0], suite_of(c), "error") for c in checks]
    out += [Item(fresh, checks[0], trees[0], "s2", "pass"), Item(fresh, "other", trees[0], "s0")]
    if s.issued:
        old = s.issued[-1]
        out.append(replace(old, tree=trees[-1]))
    return out


# ---- evidence ----------------------------------------------------------------------------------

@st.composite
def _evidence_initial(draw, kind: str) -> me.EvidenceState:
    m = draw(st.integers(1, 2))
    pins = {c: SUITES[i % 2] for i, c in enumerate(CHECKS[:m])}
    policy = draw(st.sampled_from(me.STALE_POLICIES))
    if kind.lower() in me.STALE_POLICIES and draw(st.integers(0, 3)):
        policy = kind.lower()  # the policy under which this answer to stale evidence is given
    return me.initial_evidence(draw(st.sampled_from(TREES)), pins, policy)


def _cited(s: me.EvidenceState) -> list[Item | None]:
    """Evidence a patch may cite: each issued piece, an edited copy (another id), a forged one
    naming the current tree and pin, and none."""
    out: list[Item | None] = [*s.issued, None]
    check, suite = s.pins[0]
    out.append(Item("forged", check, s.tree, suite))
    if s.issued:
        out.append(replace(s.issued[0], verdict="fail" if s.issued[0].verdict == "pass"
                           else "pass"))
    return out


def _evidence_instances(kind: str, s: me.EvidenceState) -> list[Any]:
    checks = [c for c, _ in s.pins]
    if kind == "Issue":
        trees = list(dict.fromkeys((s.tree, *TREES)))  # the current tree first
        return [me.Issue(e) for e in _items(s, checks, trees, lambda c: s.suite_now(c) or "s0")]
    if kind == "ChangeSuite":
        return [me.ChangeSuite(c, h) for c in (*checks, "other") for h in SUITES]
    if kind == "Halt":
        return [me.Halt()]
    cited = _cited(s)
    if kind == "Bind":
        return [me.Bind(e) for e in cited if e is not None]
    if kind == "Refresh":  # fresh: each issued piece (binding or not), and a forged one
        fresh = [*s.issued, Item("forged", checks[0], s.tree, s.pins[0][1])]
        return [me.Refresh(e, f) for e in cited for f in fresh]
    if kind == "Keep":
        return [me.Keep(e) for e in cited]
    if kind == "Escalate":
        return [me.Escalate(e) for e in cited]
    return [me.Admit(e, t) for e in cited if e is not None for t in TREES]


EVIDENCE = Rules(
    "evidence", ("Issue", "ChangeSuite", "Halt", "Bind", "Refresh", "Keep", "Escalate", "Admit"),
    _evidence_initial, _evidence_instances, lambda s: g4.EvidenceRules(len(s.pins)),
    g4.pin_state, g4.event_of,
    {"Bind": ("Issue",), "Admit": ("Issue",), "Refresh": ("Issue", "Admit", "ChangeSuite"),
     "Keep": ("Issue", "Admit", "ChangeSuite"), "Escalate": ("Issue", "Admit", "ChangeSuite"),
     "Halt": ("ChangeSuite",)}, "Escalate")


# ---- checkpoint --------------------------------------------------------------------------------

@st.composite
def _checkpoint_initial(draw, kind: str) -> mc.CheckpointState:
    m, k = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    admission = CHECKS[:m]
    completion = CHECKS[::-1][:k]
    pins = {c: SUITES[i % 2] for i, c in enumerate(CHECKS)}
    return mc.initial_checkpoint(draw(st.sampled_from(TREES)), pins, admission, completion)


def _ids_for(s: mc.CheckpointState, checks: Sequence[str], tree: str | None) -> list[tuple]:
    """Evidence ids to cite, one per check: the latest of that check on `tree` (if any), any
    issued id of that check, and one never issued."""
    def options(check: str) -> list[str]:
        on = [e.id for e in s.issued if e.check == check and (tree is None or e.tree == tree)]
        of = [e.id for e in s.issued if e.check == check]
        return list(dict.fromkeys(on[-1:] + of[-1:] + ["never"]))
    rows: list[tuple] = [()]
    for c in checks:
        rows = [r + (i,) for r in rows for i in options(c)]
    return rows[:12]


def _checkpoint_instances(kind: str, s: mc.CheckpointState) -> list[Any]:
    if kind == "Issue":  # on the trees that matter: the candidate, the workspace, another
        trees = list(dict.fromkeys((s.candidate, s.workspace, "t2")))
        return [mc.Issue(e) for e in _items(s, sorted({c for c, _ in s.pins}), trees,
                                             lambda c: dict(s.pins)[c])]
    if kind == "Commit":
        trees = list(dict.fromkeys((s.workspace, s.candidate, *TREES)))
        return [mc.Commit(t, ids) for t in trees for ids in _ids_for(s, s.admission, t)]
    if kind == "Drift":
        return [mc.Drift(t) for t in TREES]
    if kind == "Restore":
        return [mc.Restore()]
    return [mc.Recertify(ids) for ids in _ids_for(s, s.completion, s.checkpoint)]


CHECKPOINT = Rules(
    "checkpoint", ("Issue", "Commit", "Drift", "Restore", "Recertify"), _checkpoint_initial,
    _checkpoint_instances, lambda s: g5.CheckpointRules(len(s.admission), len(s.completion)),
    g5.pin_state, g5.event_of,
    {"Commit": ("Issue",), "Recertify": ("Issue", "Commit", "Restore"), "Restore": ("Drift",),
     "Drift": ("Issue", "Commit", "Restore", "Recertify")}, "Recertify")


# ---- policy ------------------------------------------------------------------------------------

DIGESTS = ("p0", "p1", "p2")


@st.composite
def _policy_initial(draw, kind: str) -> mp.PolicyState:
    return mp.PolicyState(current=draw(st.sampled_from(DIGESTS)))


def _policy_instances(kind: str, s: mp.PolicyState) -> list[Any]:
    if kind == "Edit":
        return [mp.Edit(d) for d in DIGESTS]
    return [{"Pin": mp.Pin, "PolicyCheck": mp.PolicyCheck, "Stage": mp.Stage, "Resume": mp.Resume,
             "WorkerWrite": mp.WorkerWrite}[kind]()]


POLICY = Rules("policy", ("Pin", "Edit", "PolicyCheck", "Stage", "Resume", "WorkerWrite"),
               _policy_initial, _policy_instances, lambda s: g6.PolicyRules(),
               lambda sys, names, s, z: g6.pin_state(names, s, z), g6.event_of,
               {"PolicyCheck": ("Pin", "Edit"), "Stage": ("Pin", "Edit", "Resume"),
                "Resume": ("Pin", "Edit", "PolicyCheck"), "Pin": ("Pin", "Edit")}, "PolicyCheck")

MODELS = (EVIDENCE, CHECKPOINT, POLICY)


@dataclass(frozen=True)
class Case:
    rules: Rules
    state: Any
    kind: str

    @property
    def steps(self) -> list[Any]:
        return self.rules.instances(self.kind, self.state)

    @property
    def enabled_steps(self) -> list[Any]:
        return [e for e in self.steps if enabled(self.state, e)]

    @property
    def disabled_steps(self) -> list[Any]:
        return [e for e in self.steps if not enabled(self.state, e)]


WALK = 16


@st.composite
def cases(draw, rules: Rules, kind: str) -> Case:
    """A state reached by a drawn walk of enabled events (mostly preferring the kind under test
    and the kinds that lead to it -- one time in four, the kind that ends the run, and then
    the case is the walk's last state -- so that states where it fires and states just past it are
    drawn; the walk mostly stops where `kind` has just become enabled), taken at the last
    state where `kind` is enabled three times in four, else at the walk's last state or any.
    """
    s = draw(rules.initial(kind))
    walk = [s]
    prefer = draw(st.integers(0, 3)) > 0
    finish = draw(st.integers(0, 3)) == 0  # walk to the end of the run (refusals there)
    target = rules.ending if finish else kind
    ahead = (target, *rules.toward.get(target, ()))
    was_on = True
    for _ in range(WALK):
        now_on = any(enabled(s, e) for e in rules.instances(kind, s))
        if now_on and not was_on and not finish and not draw(st.integers(0, 3)):
            break  # where the kind has just become enabled, mostly stop
        was_on = now_on
        en = [e for k in rules.kinds for e in rules.instances(k, s) if enabled(s, e)]
        if not en:
            break
        mine = [e for e in en if type(e).__name__ in ahead]
        pool = mine if prefer and mine and draw(st.integers(0, 3)) else en
        kinds = sorted({type(e).__name__ for e in pool})
        chosen = draw(st.sampled_from(kinds))
        s = step(s, draw(st.sampled_from([e for e in pool if type(e).__name__ == chosen])))
        walk.append(s)
    on = [x for x in walk if any(enabled(x, e) for e in rules.instances(kind, x))]
    pick = 1 if finish else draw(st.integers(0, 7))
    if on and pick >= 2:
        return Case(rules, on[-1], kind)
    return Case(rules, walk[-1] if pick == 1 else draw(st.sampled_from(walk)), kind)

