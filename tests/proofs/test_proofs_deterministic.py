"""Counterexamples do not depend on what else ran: each broken variant's trace is the same in a
full run of `python -m loopproof.proofs` (where each obligation is discharged alone, in a process of its
own forked before any Z3 term: tests/proofs/test_discharge_all.py; the report make check's proofs step
kept, tests/support/proofs_report.py) and in a test process, after whatever it ran before, one
after another in reverse order (tests/support/discharged.py: discharged so once per session, and
replayed through the executable model by the tests of each variant)."""

from __future__ import annotations

from loopproof.proofs.obligations import OBLIGATIONS
from tests.support.discharged import BROKEN, discharged
from tests.support.proofs_report import full_report


def test_each_counterexample_is_the_same_in_a_run_and_in_reverse_order_in_process(
        tmp_path_factory):
    broken = [ob.id for ob in OBLIGATIONS if ob.broken]
    assert list(BROKEN) == broken[::-1]  # every broken variant, in reverse order
    run = full_report()
    here = discharged(tmp_path_factory)
    assert sorted(here) == sorted(broken)
    for i in broken:
        trace = run[i].get("counterexample")
        assert trace is not None, f"{i}: the run found no counterexample"
        assert here[i].counterexample is not None, f"{i}: {here[i].result} {here[i].error}"
        assert here[i].counterexample.to_json() == trace, f"{i}: reverse order differs"


def test_the_stale_state_variant_shows_a_stale_tree_not_a_changed_suite():
    """The two G4 broken variants must show their own bugs: accepting stale evidence is shown
    with the tree edited (the suite unchanged), the suite check with the suite changed."""
    run = full_report()
    stale = run["G4-broken-stale-accepted"].get("counterexample")
    suite = run["G4-broken-suite-unchecked"].get("counterexample")
    assert stale is not None and suite is not None
    stale_events = [s["event"] for s in stale["steps"][1:]]
    suite_events = [s["event"] for s in suite["steps"][1:]]
    assert not any(e.startswith("ChangeSuite") for e in stale_events), stale_events
    assert any(e.startswith("ChangeSuite") for e in suite_events), suite_events
