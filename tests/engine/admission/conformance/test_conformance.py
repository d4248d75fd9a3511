"""Run every conformance case under pytest (the same functions `python -m loopproof.engine.admission.conformance`
runs), and keep CASES.md in step with them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from loopproof.engine.admission.conformance import suite as conformance
from tests.support.paths import REPO

CASES = conformance.load_cases()


@pytest.mark.parametrize("cid", sorted(CASES))
def test_case(cid: str, tmp_path: Path) -> None:
    CASES[cid].fn(tmp_path)


def test_at_least_35_named_cases() -> None:
    assert len(CASES) >= 35
    assert all(re.fullmatch(r"CF\d{3}", cid) for cid in CASES)
    for c in CASES.values():
        assert c.obligation and c.fault and c.expected, c.id


def test_cases_md_matches_the_cases() -> None:
    md = (REPO / "docs" / "conformance.md").read_text(encoding="utf-8")
    assert md == conformance.markdown(CASES), \
        "CASES.md is stale: python -m loopproof.engine.admission.conformance --markdown > docs/conformance.md"


def test_cli_reports_failures(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    """The runner must be able to fail: a case that raises is reported and the exit is 1."""
    broken = dict(CASES)
    first = sorted(broken)[0]

    def boom(tmp: Path) -> None:
        raise AssertionError("injected")

    broken[first] = type(CASES[first])(first, "t", "o", "f", "e", boom)
    monkeypatch.setattr(conformance, "load_cases", lambda: broken)
    assert conformance.main(["--json", "--case", first, "--case", "CF025"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out == {"cases": 2, "passed": 1, "failed": [first]}
    assert conformance.main(["--case", "CF999"]) == 2
