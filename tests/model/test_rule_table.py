"""Every guard and effect of the run model is written once, in the rule table (model/run_rules.py),
and every backend reads it from there: `model.step`, the explorer's fast path, and the serial,
concurrent and unbounded Z3 encodings.

Checked two ways. Behaviour: one rule of the table changed (a variant that overrides one method)
changes every backend the same way, so none keeps a copy of its own. Text: no module of model/
or proofs/ other than the table defines a rule of the model (a method named for an event's
guard or effect, or for one of the table's shared guards) outside a variant of the table, the
encodings key no state by f-strings and dispatch no rule by name, and the event classes hold no
guard or effect.
"""

from __future__ import annotations

import ast
from pathlib import Path

import z3

from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import RULES
from loopproof.model.search_space import AbstractSpace
from loopproof.model.state import initial_state
from loopproof.model.transitions import Begin, Cancel, Repair, Verdict, step, successors
from loopproof.proofs import concurrent as par
from loopproof.proofs.encoding import KINDS, Ev, Params, RunEncoding
from loopproof.proofs.unbounded import UnboundedRuns
from tests.support.paths import REPO
from tests.support.rule_variants import CancelAfterAnAttempt, FreeRepairs

TABLE = REPO / "model" / "run_rules.py"


GRAPH = LoopGraph.build([NodeSpec("a", attempts=2, repairs=("a",))], repair_budget=1)
REPAIRABLE = step(GRAPH, step(GRAPH, step(GRAPH, step(GRAPH, initial_state(GRAPH), Begin("a")),
                                               Verdict("a", False)), Begin("a")),
                  Verdict("a", False))  # a EXHAUSTED, K = 1 left


def z3_allows(enc, pre_state, event, check) -> bool:
    """Does the encoding take `event` from the concrete `pre_state` to a state where
    `check(post)` holds?"""
    s, t = enc.fresh("pre"), enc.fresh("post")
    solver = z3.Solver()
    solver.add(*enc.axioms(), enc.pin(s, pre_state), enc.transition(s, t, Ev.of_event(event)),
               check(t))
    return solver.check() == z3.sat


def test_one_effect_changed_in_the_table_changes_every_backend() -> None:
    real, free = RULES, FreeRepairs()
    for rules, spent in ((real, 1), (free, 0)):
        # the Python model
        after = step(GRAPH, REPAIRABLE, Repair("a", "a"), rules=rules)
        assert after.repairs_used == spent
        # the serial and the concurrent encodings
        for enc in (RunEncoding(GRAPH, Params.of(GRAPH), rules),
                    par.concrete(GRAPH.with_max_parallel(2), rules)):
            assert z3_allows(enc, REPAIRABLE, Repair("a", "a"),
                             lambda t, spent=spent: t.repairs_used == spent)
            assert not z3_allows(enc, REPAIRABLE, Repair("a", "a"),
                                 lambda t, spent=spent: t.repairs_used != spent)
        # the explorer's fast path
        space = AbstractSpace(GRAPH, rules=rules)
        [(event, *_, left)] = space.successors(*space.project(REPAIRABLE))
        assert event == Repair("a", "a") and left == GRAPH.repair_budget - spent
    # the unbounded encoding
    for rules, spent in ((real, 1), (free, 0)):
        sys = UnboundedRuns(rules)
        s, t = sys.fresh("pre"), sys.fresh("post")
        ev = [e for e in sys.events("x") if e.kind == "Repair"][0]
        solver = z3.Solver()
        solver.add(*sys.axioms(), sys.transition(s, t, ev), t.repairs_used != s.repairs_used + spent)
        assert solver.check() == z3.unsat


def test_one_guard_changed_in_the_table_changes_every_backend() -> None:
    start = initial_state(GRAPH)
    for rules, allowed in ((RULES, True), (CancelAfterAnAttempt(), False)):
        assert (Cancel("a") in [e for e, _ in successors(GRAPH, start, rules)]) is allowed
        for enc in (RunEncoding(GRAPH, Params.of(GRAPH), rules),
                    par.concrete(GRAPH.with_max_parallel(2), rules)):
            assert z3_allows(enc, start, Cancel("a"), lambda t: z3.BoolVal(True)) is allowed
        space = AbstractSpace(GRAPH, rules=rules)
        assert (Cancel("a") in [e for e, *_ in space.successors(*space.start())]) is allowed
        sys, k, pinned = UnboundedRuns.on_graph(GRAPH, rules)
        s, t = sys.fresh("pre"), sys.fresh("post")
        solver = z3.Solver()
        solver.add(*pinned, sys.pin_state(k, GRAPH, s, start),
                   sys.transition(s, t, sys.event(k, GRAPH, start, Cancel("a"))))
        assert (solver.check() == z3.sat) is allowed


# ---- the text: one place -------------------------------------------------------------------------

SHARED = {"ready", "fits", "in_attempt", "reservation_fits", "end_attempt", "reset",
          "running_is_the_attempt", "end_running_attempt", "reset_subtree", "has_pair"}
RULE_NAMES = ({f"{part}_{k.lower()}" for k in KINDS for part in ("guard", "effect", "update")}
              | SHARED)


def modules() -> list[Path]:
    return sorted(p for folder in ("model", "proofs") for p in (REPO / folder).glob("*.py"))


def _bases(cls: ast.ClassDef) -> set[str]:
    return {b.id if isinstance(b, ast.Name) else b.attr for b in cls.bases
            if isinstance(b, ast.Name | ast.Attribute)}


def variants(tree: ast.Module, known: set[str]) -> set[str]:
    """The classes of a module that are variants of the table (subclasses of RunRules, or of a
    class already known to be one), found to a fixed point."""
    classes = [c for c in tree.body if isinstance(c, ast.ClassDef)]
    found = set(known)
    while True:
        more = {c.name for c in classes if c.name not in found and _bases(c) & found}
        if not more:
            return found
        found |= more


def test_no_module_but_the_table_defines_a_rule_of_the_model() -> None:
    known = {"RunRules", "Ghosts"}  # Ghosts: proofs/encoding.py's table with fields of its own
    offenders = []
    for path in modules():
        tree = ast.parse(path.read_text())
        ok = variants(tree, known) if path != TABLE else {"RunRules"}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name in RULE_NAMES \
                        and node.name not in ok:
                    offenders.append(f"{path.relative_to(REPO)}: {node.name}.{fn.name}")
        for fn in tree.body:  # module-level rule functions
            if isinstance(fn, ast.FunctionDef) and fn.name in RULE_NAMES:
                offenders.append(f"{path.relative_to(REPO)}: {fn.name}")
    assert not offenders, offenders


def test_the_encodings_key_no_state_by_f_strings_and_dispatch_no_rule_by_name() -> None:
    found = []
    fields = ("status", "activation", "attempts", "passes", "cancelled", "reserved", "spent",
              "ops", "repairs_of")
    for path in modules():
        text = path.read_text()
        for field in fields:
            if f'f"{field}:{{' in text:
                found.append(f"{path.name}: f\"{field}:{{...}}\"")
        for call in ('getattr(self, f"guard_', 'getattr(self, f"update_',
                     'getattr(self, f"effect_', 'getattr(self, f"_{', 'getattr(Semantics'):
            if call in text:
                found.append(f"{path.name}: {call}")
    assert not found, found


def test_the_event_classes_hold_no_guard_or_effect() -> None:
    tree = ast.parse((REPO / "model" / "transitions.py").read_text())
    own = [f"{c.name}.{f.name}" for c in tree.body if isinstance(c, ast.ClassDef)
           and c.name != "Event" for f in c.body
           if isinstance(f, ast.FunctionDef) and f.name in ("why_not", "apply")]
    assert not own, own


def test_the_plant_is_seen_by_the_text_checks(tmp_path) -> None:
    """The text check would see a copied rule: a guard written again outside the table."""
    planted = ast.parse("class Encoding:\n    def ready(self, s, v):\n        return True\n")
    classes = [c for c in planted.body if isinstance(c, ast.ClassDef)]
    assert any(f.name in RULE_NAMES for c in classes for f in c.body
               if isinstance(f, ast.FunctionDef) and c.name not in variants(planted, {"RunRules"}))
