"""The worked examples of docs/extending.md and the README are the code in the tree, and they work:
a new invariant over the existing rules (the attempt's ceiling, proofs/g3_attempt_ceiling.py) is
proved, its broken variant is refuted by a run the real model refuses at the broken step."""

from __future__ import annotations

import ast
import re
import textwrap

import pytest

from loopproof.model.state import initial_state
from loopproof.model.transitions import Begin, Disabled, Reserve, step
from loopproof.proofs import g3_attempt_ceiling as g3c
from loopproof.proofs.checks import NotRefuted
from loopproof.proofs.obligations import OBLIGATIONS
from loopproof.proofs.trace import Trace
from tests.support.discharged import counterexample
from tests.support.paths import REPO
from tests.support.proofs_report import full_report

BY_ID = {ob.id: ob for ob in OBLIGATIONS}


def test_the_ceiling_invariant_is_proved_and_registered():
    """Proved: read from the full run make check's proofs step kept for today's sources (each
    obligation discharged in a process of its own; tests/support/proofs_report.py)."""
    assert full_report()["G3-attempt-ceiling"]["result"] == "proved"
    assert BY_ID["G3-attempt-ceiling"].check is g3c.check_within_ceiling
    assert BY_ID["G3-broken-ceiling-unchecked"].check is g3c.run_ceiling_unchecked


def test_the_ceiling_unchecked_run_breaks_the_ceiling_and_the_real_model_refuses_it(
        tmp_path_factory):
    tr = counterexample(tmp_path_factory, "G3-broken-ceiling-unchecked")
    assert isinstance(tr, Trace)
    events = [st.event_obj for st in tr.steps[1:]]
    assert isinstance(events[0], Begin) and isinstance(events[-1], Reserve)
    assert events[-1].amount > g3c.ONE.node("a").spend_ceiling
    # the real model takes every step before the broken one, and refuses the broken one
    s = initial_state(g3c.ONE)
    assert tr.steps[0].state_obj == s
    for ev, st in zip(events[:-1], tr.steps[1:-1], strict=True):
        s = step(g3c.ONE, s, ev)
        assert s == st.state_obj
    with pytest.raises(Disabled, match="does not fit"):
        step(g3c.ONE, s, events[-1])


def test_the_broken_variant_needs_two_steps():
    assert isinstance(g3c.run_ceiling_unchecked(depth=1), NotRefuted)
    assert isinstance(g3c.run_ceiling_unchecked(depth=2), Trace)


def test_the_ceiling_alone_is_not_inductive_without_the_structural_facts():
    """What the docs say: without G1's structural facts a Repair breaks it (a CTI)."""
    from loopproof.proofs.checks import check_inductive, first
    from loopproof.proofs.encoding import Params, RunEncoding
    from loopproof.proofs.family import shapes

    def one(graph):
        enc = RunEncoding(graph, Params.symbolic(graph))
        return check_inductive(enc, lambda s: g3c.within_ceiling(enc, s))

    cti = first(one(g) for g in shapes())
    assert isinstance(cti, Trace) and cti.kind == "cti" and "Repair" in cti.note


# ---- the docs show the code that is in the tree, complete ---------------------------------------



def python_blocks(text: str) -> list[str]:
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", text, re.S)]


def section(text: str, head: str) -> str:
    start = text.index(head)
    nxt = text.find("\n## ", start + len(head))
    return text[start:] if nxt < 0 else text[start:nxt]


def test_the_readme_example_is_the_module_in_the_tree_complete():
    blocks = python_blocks(section((REPO / "README.md").read_text(),
                                   "## Adding a guarantee (worked example)"))
    module = (REPO / "proofs" / "g3_attempt_ceiling.py").read_text()
    assert blocks, "the README's worked example has no code"
    for b in blocks:
        assert "..." not in b, b
        assert b.strip() in module, b


def test_the_extending_doc_shows_the_code_in_the_tree():
    doc = (REPO / "docs" / "extending.md").read_text()
    example_a = python_blocks(section(doc, "## Worked example A"))
    module = (REPO / "proofs" / "g3_attempt_ceiling.py").read_text()
    assert len(example_a) >= 3
    for b in example_a:
        assert "..." not in b and b.strip() in module, b
    # example B quotes the rule and its event: every line is a line of those files
    lines = {line.strip() for f in ("model/run_rules.py", "model/transitions.py")
             for line in (REPO / f).read_text().splitlines()}
    example_b = python_blocks(section(doc, "## Worked example B"))
    assert len(example_b) >= 2
    for b in example_b:
        assert "..." not in b, b
        missing = [x for x in b.splitlines() if x.strip() and x.strip() not in lines]
        assert not missing, missing


def _body(fn: ast.FunctionDef) -> list[str]:
    """The statements of a function, docstring and `pass` left out, each as ast.dump
    (layout-free)."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return [ast.dump(b) for b in body if not isinstance(b, ast.Pass)]


def test_the_rules_block_is_the_table_as_in_the_tree():
    """docs/extending.md copies each rule of the table (model/run_rules.py) so a broken variant
    can drop one check by copying it: each must be the tree's, and none may be missing."""
    doc = (REPO / "docs" / "extending.md").read_text()
    [block] = [b for b in python_blocks(section(doc, "## The rule table"))
               if b.startswith("def live")]
    shown = {f.name: _body(f) for f in ast.parse(block).body if isinstance(f, ast.FunctionDef)}
    tree = ast.parse((REPO / "model" / "run_rules.py").read_text())
    [table] = [c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "RunRules"]
    shared = {"live", "ready", "fits", "in_attempt", "reservation_fits", "end_attempt", "reset"}
    real = {f.name: _body(f) for f in table.body if isinstance(f, ast.FunctionDef)
            and (f.name.startswith(("guard_", "effect_")) or f.name in shared)}
    assert sorted(shown) == sorted(real)
    for name, body in real.items():
        assert shown[name] == body, f"docs/extending.md shows {name} differently from the tree"


def test_the_docs_broken_repair_is_refuted_only_deep_enough():
    """The docs' example of a dropped check (a Repair that ignores K), run as a newcomer would:
    too shallow it is `not refuted within depth d`; deep enough Z3 prints the run."""
    import z3

    from loopproof.model import run_rules
    from loopproof.model.graph import LoopGraph, NodeSpec
    from loopproof.proofs import encoding
    from loopproof.proofs.checks import bmc
    from loopproof.proofs.encoding import Params, RunEncoding

    doc = (REPO / "docs" / "extending.md").read_text()
    [block] = [b for b in python_blocks(section(doc, "## The rule table"))
               if "class RepairIgnoresK" in b]
    names: dict = {"z3": z3, **vars(encoding), **vars(run_rules)}
    exec(block, names)  # noqa: S102 -- the docs' own code
    graph = LoopGraph.build([NodeSpec("a", attempts=2, spend_ceiling=1.0),
                             NodeSpec("b", needs=("a",), repairs=("a",))],
                            repair_budget=1, spend_budget=10.0)
    enc = RunEncoding(graph, Params.of(graph), names["RepairIgnoresK"]())
    bad = lambda s: s.repairs_used > enc.params.repair_budget  # noqa: E731
    assert bmc(enc, bad, 6, "K") == NotRefuted(6, "K")
    found = bmc(enc, bad, 12, "K")
    assert isinstance(found, Trace) and found.steps[-1].event.startswith("Repair")
    assert len(found.steps) - 1 == 8 and sum("Cancel" in (st.event or "") for st in found.steps)


def test_every_name_the_api_page_uses_is_in_the_tree():
    """A helper renamed or removed in the tree must not live on in docs/extending.md: every
    `enc.X`, `enc.params.X`, `enc.graph.X`, `s.X` (an encoded state, or the run as a rule reads
    it), `g.X`, `u.X`, `Params.X`, `RunRules.X` and every check or helper the page names
    resolves, on a real encoding, state, guard and effect."""
    from loopproof.model.graph import LoopGraph, NodeSpec
    from loopproof.model.run_rules import RunRules
    from loopproof.proofs import (
        checks,
        encoding,
        family,
        g1_finishes,
        g2_order,
        g3_no_overspend,
        solver,
    )
    from loopproof.proofs.encoding import Params, RunEncoding
    from loopproof.proofs.z3_values import Conjuncts, SerialWrites

    doc = section((REPO / "docs" / "extending.md").read_text(), "## The rule table")
    code = " ".join(re.findall(r"`([^`]+)`", doc))
    graph = LoopGraph.build([NodeSpec("a", attempts=2), NodeSpec("b", needs=("a",))])
    enc = RunEncoding(graph, Params.symbolic(graph))
    s = enc.fresh("t0")
    scopes = {"enc.params": [enc.params], "enc.graph": [enc.graph], "enc": [enc],
              "s": [s, enc.view(s)], "g": [Conjuncts()], "u": [SerialWrites(enc, s)],
              "Params": [Params], "RunEncoding": [RunEncoding], "RunRules": [RunRules]}
    missing = []
    for scope, attr in re.findall(r"\b(enc\.params|enc\.graph|enc|s|g|u|Params|RunEncoding|"
                                   r"RunRules)\.(\w+)", code):
        if not any(hasattr(x, attr) for x in scopes[scope]):
            missing.append(f"{scope}.{attr}")
    for attr in re.findall(r"\.(\w+)\(", doc.split("`enc.graph.names`", 1)[1].split("|")[0]):
        if not hasattr(enc.graph, attr):
            missing.append(f"enc.graph.{attr}")
    modules = (encoding, checks, family, g1_finishes, g2_order, g3_no_overspend, solver)
    for name in re.findall(r"\b((?:check|find|S|O)_\w+|bmc|first|shapes|structural|"
                            r"spend_invariant|needs_done|EPS|real|NotRefuted|Unknown)\b", code):
        if not any(hasattr(m, name) for m in modules):
            missing.append(name)
    for name in re.findall(r"`(live|ready|fits|in_attempt|reservation_fits|end_attempt|reset)\(",
                           doc):
        if not hasattr(RunRules, name):
            missing.append(f"RunRules.{name}")
    kinds = re.search(r"Kinds: (.*?)\. The event's", doc, re.S).group(1)
    for kind in re.findall(r"`(\w+)`", kinds):
        for part in ("guard", "effect"):
            if not hasattr(RunRules, f"{part}_{kind}"):
                missing.append(f"RunRules.{part}_{kind}")
    assert not missing, missing


def test_worked_example_c_is_proved_and_refuted_in_the_serial_and_concurrent_encodings():
    """docs/extending.md's example C (tried for real in commit b23843a, reverted), as a variant
    of the table: a cancel needs an attempt made in the activation. Its invariant is proved on
    the serial and the concurrent encodings of the two-node DAGs, and the real table (the guard
    without the condition) is refuted in both by Cancel(a) from Init."""
    import z3

    from loopproof.model.graph import LoopGraph, NodeSpec
    from loopproof.model.run_rules import RULES
    from loopproof.proofs import cancel
    from loopproof.proofs import concurrent as par
    from loopproof.proofs.checks import bmc, check_inductive, first
    from loopproof.proofs.encoding import Params, RunEncoding
    from loopproof.proofs.family import shapes
    from tests.support.rule_variants import CancelAfterAnAttempt

    def tried(enc, s):
        return z3.And([z3.Implies(cancel.cancelled_now(enc, s, v), s.attempts(v) >= 1)
                       for v in enc.graph.names])

    def proved(enc):
        return check_inductive(enc, lambda s: z3.And(cancel.history_is_past(enc, s),
                                                     cancel.cancel_never_done(enc, s),
                                                     tried(enc, s)))

    rules = CancelAfterAnAttempt()
    assert first(proved(RunEncoding(g, Params.symbolic(g), rules))
                 for g in shapes(max_nodes=2)) is None
    assert first(proved(par.encoding(g, rules)) for g in shapes(max_nodes=2)) is None
    one = LoopGraph.build([NodeSpec("a", attempts=2)])
    for enc in (RunEncoding(one, Params.of(one), RULES), par.concrete(one.with_max_parallel(2),
                                                                     RULES)):
        found = bmc(enc, lambda s, enc=enc: z3.Not(tried(enc, s)), 3, "tried before cancel")
        assert isinstance(found, Trace) and [st.event for st in found.steps[1:]] == ["Cancel(a)"]
    for enc in (RunEncoding(one, Params.of(one), rules), par.concrete(one.with_max_parallel(2),
                                                                      rules)):
        assert not isinstance(bmc(enc, lambda s, enc=enc: z3.Not(tried(enc, s)), 3, "x"), Trace)
