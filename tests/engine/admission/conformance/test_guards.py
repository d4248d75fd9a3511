"""Every guard switched off alone makes a conformance case fail.

The guards are the registry's (engine/policy/guards.py), not a list kept here: a guard added
there is tested here without a change. For each one, the test switches it off (and nothing
else) and runs the conformance cases it names, in order, until one fails; none failing means
the guard can be broken without anything noticing -- defence in depth hiding it, or no case
reaching it. Where one layer masks another (the broker's admission check and the checkpoint
store's own; the broker's path check and apply_patch's), each layer has a case of its own that
reaches it alone.
"""

from __future__ import annotations

import re

import pytest

from loopproof.engine.admission.conformance import suite as conformance
from loopproof.engine.policy import guards
from tests.support.paths import REPO as ROOT

CASES = conformance.load_cases()


@pytest.mark.parametrize("name", sorted(guards.BY_NAME))
def test_switching_off_the_guard_alone_makes_a_conformance_case_fail(name: str) -> None:
    g = guards.BY_NAME[name]
    assert g.caught_by, f"{name}: names no conformance case"
    assert set(g.caught_by) <= set(CASES), f"{name}: unknown cases {set(g.caught_by) - set(CASES)}"
    with guards.switched_off(name):
        for cid in g.caught_by:
            if conformance.run_case(CASES[cid]) is not None:
                return  # caught
    pytest.fail(f"guard {name!r} ({g.refuses}) switched off: none of {g.caught_by} fails")


def test_every_guard_is_asked_somewhere_and_every_name_asked_is_registered() -> None:
    """The registry and the engine agree: each registered guard has a call site in the layer it
    names, and no `refuse("...")` in the engine names an unregistered guard."""
    asked: dict[str, set[str]] = {}
    # a bare `refuse("name")` asks a guard; a method of that name (the proxy's `self.refuse`,
    # which answers a model call) is not one
    for path in (ROOT / "engine").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r'(?<![\w.])refuse\(\s*"([a-z_.]+)"', text):
            asked.setdefault(m.group(1), set()).add(str(path.relative_to(ROOT)))
    assert set(asked) == set(guards.BY_NAME), (set(asked) ^ set(guards.BY_NAME))
    for name, g in guards.BY_NAME.items():
        assert g.layer in asked[name], f"{name}: asked in {asked[name]}, registered at {g.layer}"


def test_an_unknown_guard_cannot_be_asked_or_switched_off() -> None:
    with pytest.raises(KeyError):
        guards.refuse("no.such.guard", None)
    with pytest.raises(KeyError), guards.switched_off("no.such.guard"):
        pass
    with guards.switched_off("patch.changes"):
        assert guards.refuse("patch.changes", "why") is None
    assert guards.refuse("patch.changes", "why") == "why"
