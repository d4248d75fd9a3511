"""The worked examples of docs/extending.md and the README are the code in the tree, and they work:
a new invariant over the existing rules (the attempt's ceiling, proofs/g3_attempt_ceiling.py) is
proved, its broken variant is refuted by a run the real model refuses at the broken step."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from model.state import initial_state
from model.transitions import Begin, Disabled, Reserve, step
from proofs import g3_attempt_ceiling as g3c
from proofs.checks import NotRefuted
from proofs.obligations import OBLIGATIONS, discharge
from proofs.trace import Trace

BY_ID = {ob.id: ob for ob in OBLIGATIONS}


def test_the_ceiling_invariant_is_proved_and_registered():
    assert discharge(BY_ID["G3-attempt-ceiling"]).result == "proved"
    assert BY_ID["G3-attempt-ceiling"].check is g3c.check_within_ceiling
    assert BY_ID["G3-broken-ceiling-unchecked"].check is g3c.run_ceiling_unchecked


def test_the_ceiling_unchecked_run_breaks_the_ceiling_and_the_real_model_refuses_it():
    r = discharge(BY_ID["G3-broken-ceiling-unchecked"])
    assert r.result == "refuted"
    tr = r.counterexample
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
    from proofs.checks import check_inductive, first
    from proofs.encoding import Params, RunEncoding
    from proofs.family import shapes

    def one(graph):
        enc = RunEncoding(graph, Params.symbolic(graph))
        return check_inductive(enc, lambda s: g3c.within_ceiling(enc, s))

    cti = first(one(g) for g in shapes())
    assert isinstance(cti, Trace) and cti.kind == "cti" and "Repair" in cti.note


# ---- the docs show the code that is in the tree, complete ---------------------------------------

REPO = Path(__file__).resolve().parent.parent


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
    # example B quotes the rule and its encoding: every line is a line of those files
    lines = {line.strip() for f in ("model/transitions.py", "proofs/encoding.py")
             for line in (REPO / f).read_text().splitlines()}
    example_b = python_blocks(section(doc, "## Worked example B"))
    assert len(example_b) >= 2
    for b in example_b:
        assert "..." not in b, b
        missing = [x for x in b.splitlines() if x.strip() and x.strip() not in lines]
        assert not missing, missing
