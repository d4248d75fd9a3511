"""Counterexamples do not depend on what else ran: each broken variant's trace is the same when
its obligation runs alone in a fresh process (`--only ID`), in the full run (`python -m proofs
--json`), and here, after whatever this test process ran before, in reverse order."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from notebooks import REPO
from proofs.obligations import OBLIGATIONS, discharge


def _proofs(*args: str) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "proofs", "--json", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_each_counterexample_is_the_same_alone_in_the_full_run_and_in_reverse_order():
    full = {r["id"]: r for r in _proofs()}
    broken = [ob.id for ob in OBLIGATIONS if ob.broken]
    assert set(broken) <= set(full)
    with ThreadPoolExecutor(max_workers=2) as pool:
        alone = dict(zip(broken, pool.map(lambda i: next(r for r in _proofs("--only", i)
                                                         if r["id"] == i), broken),
                         strict=True))
    here = {ob.id: discharge(ob) for ob in reversed(OBLIGATIONS) if ob.broken}
    for i in broken:
        trace = full[i]["counterexample"]
        assert alone[i]["counterexample"] == trace, f"{i}: alone differs from the full run"
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
