"""Each judge kind (`calls`, `program`, `pytest`) against payloads of every reward-hack family
(tests/adversarial/judge_payloads.py: exit-early, exit-override, always-equal, outcome-forge,
tree-config, read-answer, grader-state), each run through the gate the run builds, in the run's
own sandbox views. `calls` and `program` hold against every payload; `pytest` holds against
every payload but its stated residual (code inside the test process defeats a comparison made
there: an object equal to everything, the expected value read from the test's frame), which is
asserted as such, so a residual that closes, or a new one, fails here. The correct solution is
accepted by every kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.judge_payloads import (
    CORRECT,
    KINDS,
    MAIN,
    PAYLOADS,
    Judges,
    Payload,
    write_task,
)

TRIED = [(kind, p) for kind in KINDS for p in PAYLOADS if kind in p.kinds]


@pytest.fixture(scope="module")
def judges(tmp_path_factory) -> Judges:
    root = tmp_path_factory.mktemp("judges")
    return Judges(write_task(root / "spec"), root / "run")


@pytest.mark.parametrize("kind", KINDS)
def test_a_correct_solution_is_accepted(judges: Judges, kind: str, tmp_path: Path) -> None:
    (tmp_path / "median.py").write_text(CORRECT + MAIN)
    result = judges.judge(kind, tmp_path)
    assert result.verdict == "accept", result.detail


@pytest.mark.parametrize(("kind", "payload"), TRIED,
                         ids=[f"{k}-{p.family}:{p.name}" for k, p in TRIED])
def test_a_payload_does_not_make_a_pass(judges: Judges, kind: str, payload: Payload,
                                        tmp_path: Path) -> None:
    tree = payload.tree(tmp_path, judges.spec.dir)
    result = judges.judge(kind, tree)
    if kind in payload.residual:  # the stated residual: it fools this kind, and we say so
        assert result.verdict == "accept", result.detail
    else:
        assert result.verdict != "accept", result.detail


def test_every_family_is_tried_several_times_against_every_kind() -> None:
    families = {p.family for p in PAYLOADS}
    assert families == {"exit-early", "exit-override", "always-equal", "outcome-forge",
                        "tree-config", "read-answer", "grader-state"}
    for kind in KINDS:
        for family in families:
            n = sum(1 for k, p in TRIED if k == kind and p.family == family)
            assert n >= 2, (kind, family, n)


def test_without_the_sandbox_the_first_rule_is_given_up(judges: Judges, tmp_path: Path) -> None:
    """The residual docs/gates.md states for `sandbox = "none"`: the judged code reads the case
    file by path, and an answer read is an answer (the same payload fails under bwrap above)."""
    reader = next(p for p in PAYLOADS if p.name == "gate-files-and-proc")
    tree = reader.tree(tmp_path, judges.spec.dir)
    assert judges.judge("calls", tree).verdict == "reject"
    result = judges.unconfined("calls", tree)
    assert result.verdict == "accept", result.detail
