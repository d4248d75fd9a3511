"""Counterexamples do not depend on what else ran: each broken variant's trace is the same in a
run of `python -m proofs --json` (where each obligation is discharged alone, in a process of its
own forked before any Z3 term: tests/test_discharge_all.py) and here, in this test process after
whatever it ran before, one after another in reverse order.

(The run selects the broken variants only: the proved obligations cost two thirds of a full run
and cannot change a forked process's counterexample; make check runs the full set anyway.)"""

from __future__ import annotations

import json
import subprocess
import sys

from notebooks import REPO
from proofs.obligations import OBLIGATIONS, discharge


def _proofs(*args: str) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "proofs", "--json", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_each_counterexample_is_the_same_in_a_run_and_in_reverse_order_in_process():
    broken = [ob.id for ob in OBLIGATIONS if ob.broken]
    run = {r["id"]: r for r in _proofs("--only", *broken)}
    assert set(run) == set(broken)
    here = {ob.id: discharge(ob) for ob in reversed(OBLIGATIONS) if ob.broken}
    for i in broken:
        trace = run[i]["counterexample"]
        assert here[i].counterexample is not None
        assert here[i].counterexample.to_json() == trace, f"{i}: reverse order differs"


def test_the_stale_state_variant_shows_a_stale_tree_not_a_changed_suite():
    """The two G4 broken variants must show their own bugs: accepting stale evidence is shown
    with the tree edited (the suite unchanged), the suite check with the suite changed."""
    by_id = {ob.id: ob for ob in OBLIGATIONS}
    stale = discharge(by_id["G4-broken-stale-accepted"]).counterexample
    suite = discharge(by_id["G4-broken-suite-unchecked"]).counterexample
    assert stale is not None and suite is not None
    stale_events = [s.event for s in stale.steps[1:]]
    suite_events = [s.event for s in suite.steps[1:]]
    assert not any(e.startswith("ChangeSuite") for e in stale_events), stale_events
    assert any(e.startswith("ChangeSuite") for e in suite_events), suite_events
