"""Each experiment's headline can report the failure it measures: break the measured thing and
the headline must say so (and the command exit non-zero where the headline is a pass/fail).

- crash: a resume that loses a verdict -> outcome_recovered < cases, lost_verdicts > 0, exit 1;
- integrity: a verifier that misses a tamper, a torn tail it does not recover, a signature it
  does not check -> detected / torn_recovered / caught_with_signing below the trials, exit 1;
- mutants: a repaired gate that accepts a destroyed artifact -> tier-1 false accepts after
  repair, the gate named, exit 1;
- transition: a broker that lets stale evidence through -> stale_refused < stale_offered.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.crash import cases as crash_cases
from experiments.crash import sites as crash_sites
from experiments.crash import study as crash
from experiments.integrity import rewrites, tamper, torn
from experiments.integrity import study as integrity
from experiments.mutants import study as mutants
from experiments.transition import study as transition
from loopproof.engine.admission.binding import Binding
from loopproof.engine.record.ledger import Ledger, Verification
from tests.experiments.conftest import TINY_TRANSITION as SMALL
from tests.support.audit_helpers import SOUND, make_loop

# ---- crash ------------------------------------------------------------------------------------


def _drop_last_pass(ledger: Path) -> None:
    """What a resume that loses a verdict leaves: the ledger without its last PASS verdict (and
    what came after it), re-chained so that it verifies."""
    with Ledger.open(ledger) as led:
        records = [dict(r) for r in led.records]
    last = max(i for i, r in enumerate(records) if r.get("type") == "verdict" and r.get("passed"))
    kept = [{k: v for k, v in r.items() if k not in ("seq", "prev", "hash")}
            for r in records[:last]]
    ledger.unlink()
    with Ledger.create(ledger, kept[0]) as led:
        for r in kept[1:]:
            led.append(r)


def test_crash_headline_reports_a_resume_that_loses_a_verdict(tmp_path, monkeypatch):
    real = crash_cases._cli

    def lossy(args, cwd, *more, **named):
        code, err = real(args, cwd, *more, **named)
        if args[0] == "resume" and code != -9:
            _drop_last_pass(Path(args[args.index("--ledger") + 1]))
        return code, err

    monkeypatch.setattr(crash_cases, "_cli", lossy)
    # one case (a kill between a worker's return and its record, resumed once) is enough to
    # lose a verdict: three processes, not the smoke scale's eight (test_crash.py runs that)
    monkeypatch.setitem(crash_sites.SCALES, "smoke", crash_sites.Scale(
        seeds=1, per_site=1, sites=("runner.after_worker",), resume_sites=()))
    out = tmp_path / "crash"
    assert crash.main(["--scale", "smoke", "--seed", "0", "--out", str(out), "--json"]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cases"] == 1
    assert summary["outcome_recovered"] < summary["cases"]
    assert summary["lost_verdicts"] >= 1


# ---- integrity ----------------------------------------------------------------------------------

TINY = integrity.Scale(per_kind=1, torn_killed=0, torn_cut=1, rewrite_per_kind=1,
                       real_per_kind=0, real_torn=0)


def _verified(*args):
    return Verification("verified", 0, "", None)


@pytest.fixture(scope="module")
def intact_integrity(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The intact run at TINY (the same for the three guards below: one run, not three): each
    guard's planted run must turn its exit 0 into 1 and its headline below its trials."""
    intact = tmp_path_factory.mktemp("integrity") / "intact"
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(integrity.SCALES, "smoke", TINY)
        assert integrity.main(["--scale", "smoke", "--out", str(intact), "--json"]) == 0
    return json.loads((intact / "summary.json").read_text())


@pytest.mark.parametrize(("module", "name", "headline", "trials"), [
    (tamper, "verify", "detected", "trials"),
    (torn, "verify", "torn_recovered", "torn_trials"),
    (rewrites, "verify_signed", "caught_with_signing", "rewrite_trials"),
], ids=["tamper-undetected", "torn-unrecovered", "signature-unchecked"])
def test_integrity_headline_reports_a_guard_that_is_gone(tmp_path, monkeypatch, module, name,
                                                         headline, trials, intact_integrity):
    assert intact_integrity[trials] > 0 and intact_integrity[headline] == intact_integrity[trials]
    monkeypatch.setitem(integrity.SCALES, "smoke", TINY)
    monkeypatch.setattr(module, name, _verified)
    out = tmp_path / "broken"
    assert integrity.main(["--scale", "smoke", "--out", str(out), "--json"]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary[trials] > 0 and summary[headline] < summary[trials]


# ---- mutants ------------------------------------------------------------------------------------

def test_mutants_headline_reports_a_repair_that_accepts_a_destroyed_artifact(tmp_path,
                                                                           monkeypatch):
    # the headline and the exit code are read from tier 1 (protocol_holds); the held-out tier 2
    # still runs, one mutant a loop (default: up to 20): 57 gate runs instead of 117
    monkeypatch.setitem(mutants.SCALES, "default", mutants.Scale(None, 1))
    catalog = tmp_path / "catalog"
    make_loop(catalog, "sound", SOUND)
    make_loop(catalog, "lax", 'verdict(read("solution.py") is not None)\n',
              repaired='verdict(True)\n')  # the "repair" accepts anything, a deleted file too
    out = tmp_path / "mutants"
    code = mutants.main(["--scale", "default", "--seed", "3", "--out", str(out),
                         "--catalog", str(catalog), "--jobs", "2", "--json"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["repaired"] == ["lax"]
    assert summary["after"]["tier1"]["false_accepts"] > 0
    assert summary["after"]["tier1_false_accepts_remaining"] == ["lax"]
    assert code == 1


# ---- transition ---------------------------------------------------------------------------------

def test_transition_headline_reports_stale_evidence_that_is_applied(tmp_path, monkeypatch,
                                                                    serial_transition):
    # the intact run: the session's serial run at SMALL, seed 3 (tests/experiments/conftest.py)
    intact = serial_transition[1]["guarded_vs_baseline"]
    assert intact["stale_offered"] > 0 and intact["stale_refused"] == intact["stale_offered"]
    monkeypatch.setattr(Binding, "_binding", lambda self, evidence: None)  # stale binds
    broken = transition.run_experiment(scale_name="smoke", seed=3, out=tmp_path / "b",
                                       workers=1, scale=SMALL)["guarded_vs_baseline"]
    assert broken["stale_offered"] == intact["stale_offered"]
    assert broken["stale_refused"] < broken["stale_offered"]
