"""The broker's status changes only through the declared lifecycle (model/lifecycle.py):
every move the table does not declare is refused with a reason naming both ends, and no module
of engine/admission sets a broker's status any other way."""

from __future__ import annotations

import ast
import itertools

import pytest

from loopproof.model.lifecycle import (
    FINAL,
    TRANSITIONS,
    BrokerStatus,
    UndeclaredTransition,
    moved,
    why_not,
)
from tests.support.paths import REPO

ADMISSION = REPO / "engine" / "admission"


@pytest.mark.parametrize(("old", "new"), list(itertools.product(BrokerStatus, BrokerStatus)))
def test_a_move_is_allowed_exactly_when_declared(old: BrokerStatus, new: BrokerStatus) -> None:
    if new in TRANSITIONS[old]:
        assert why_not(old, new) is None and moved(old, new) is new
    else:
        with pytest.raises(UndeclaredTransition) as exc:
            moved(old, new)
        assert f"{old} cannot become {new}" in str(exc.value) == why_not(old, new)


def test_the_final_statuses_are_final_and_nothing_returns_to_new() -> None:
    assert all(not TRANSITIONS[s] for s in FINAL)
    assert all(BrokerStatus.NEW not in TRANSITIONS[s] for s in BrokerStatus)
    assert [s for s in BrokerStatus if BrokerStatus.OPEN in TRANSITIONS[s]] == [BrokerStatus.NEW]
    assert "nothing: it is final" in why_not(BrokerStatus.FAILED, BrokerStatus.OPEN)


def _status_writes(tree: ast.AST) -> list[ast.AST]:
    """The values assigned to an attribute named `status` (plain or tuple assignments)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr == "status":
                    out.append(node.value)
                elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    out += [v for t, v in zip(target.elts, node.value.elts, strict=True)
                            if isinstance(t, ast.Attribute) and t.attr == "status"]
    return out


def test_no_admission_module_sets_the_status_but_through_moved() -> None:
    writes = {}
    for path in sorted(ADMISSION.rglob("*.py")):
        for value in _status_writes(ast.parse(path.read_text())):
            declared = (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                        and value.func.id == "moved")
            initial = ast.unparse(value) == "BrokerStatus.NEW"
            writes.setdefault(path.name, []).append(declared or initial)
    assert writes and all(all(ok) for ok in writes.values()), writes
    planted = ast.parse('self.status, self.status_reason = "failed", why')
    assert [ast.unparse(v) for v in _status_writes(planted)] == ["'failed'"]
