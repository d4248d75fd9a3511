"""experiments.integrity: every tampering detected, every torn tail recovered, the rewrite
attacker honestly undetectable without signing and caught with it; same seed, same bytes; and the
experiment's verdicts fail when the guards they measure are removed."""

from __future__ import annotations

import json
import random

import pytest

from experiments.integrity import records, rewrites, tamper, torn
from experiments.integrity.study import (
    LEDGER_TAMPERS,
    SCALES,
    Scale,
    plan,
    run_experiment,
    run_trial,
)
from loopproof.engine.policy.pin import PolicyPin
from loopproof.engine.record.ledger import Ledger, Verification


def test_smoke_run_detects_everything(integrity_smoke):
    root, a = integrity_smoke  # the session's run (tests/experiments/conftest.py)
    assert a["trials"] == a["detected"] == 2 * len(LEDGER_TAMPERS) + 3  # synthetic + real run
    assert a["torn_trials"] == a["torn_recovered"] == 4
    assert a["rewrite_trials"] == a["caught_with_signing"] == a["undetectable_without_signing"] == 3
    assert a["by_kind"]["real_run_resume"] == {"trials": 1, "ok": 1}
    summary = json.loads((root / "integrity" / "summary.json").read_text())
    assert summary["scale"] == "smoke" and summary["seed"] == 3
    rows = (root / "integrity" / "trials.csv").read_text().splitlines()
    assert len(rows) == 1 + a["trials"] + a["torn_trials"] + a["rewrite_trials"]
    assert "/tmp" not in "".join(rows)  # trial folders are not written into results


def test_same_seed_same_bytes_even_with_a_real_run(tmp_path):
    sizes = Scale(per_kind=1, torn_killed=0, torn_cut=1, rewrite_per_kind=1, real_per_kind=1,
                  real_torn=0)
    a = run_experiment("smoke", 8, tmp_path / "a", sizes=sizes)
    b = run_experiment("smoke", 8, tmp_path / "b", sizes=sizes)
    assert a == b
    for name in ("trials.csv", "summary.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_default_and_paper_scales_reach_the_papers_sizes():
    for scale in ("default", "paper"):
        p = plan(SCALES[scale])
        assert sum(c == "tamper" for c, _ in p) >= 70
        assert sum(c == "torn" for c, _ in p) >= 10
        assert sum(c == "rewrite" for c, _ in p) >= 3


def _always_verified(path):
    return Verification("verified", 0, "", None)


@pytest.mark.parametrize("kind", sorted(LEDGER_TAMPERS))
def test_a_verifier_that_checks_nothing_detects_nothing(tmp_path, monkeypatch, kind):
    assert run_trial(0, "tamper", kind, 0, tmp_path).detected
    monkeypatch.setattr(tamper, "verify", _always_verified)
    (tmp_path / "again").mkdir()
    assert not run_trial(0, "tamper", kind, 0, tmp_path / "again").detected


@pytest.mark.parametrize("kind", ["policy_edited", "gate_file_edited", "suite_file_edited"])
def test_without_the_pin_check_policy_edits_go_unseen(tmp_path, monkeypatch, kind):
    assert run_trial(0, "tamper", kind, 0, tmp_path).detected
    monkeypatch.setattr(PolicyPin, "check", lambda self: None)
    (tmp_path / "again").mkdir()
    assert not run_trial(0, "tamper", kind, 0, tmp_path / "again").detected


def test_rewrite_is_not_counted_as_detected_without_signing(tmp_path, monkeypatch):
    row = run_trial(0, "rewrite", "full_rewrite", 0, tmp_path)
    assert row.status == "verified" and row.signed_status == "broken" and row.detected
    monkeypatch.setattr(rewrites, "verify_signed", lambda p, k: _always_verified(p))
    (tmp_path / "again").mkdir()
    assert not run_trial(0, "rewrite", "full_rewrite", 0, tmp_path / "again").detected


def test_torn_recovery_demands_a_reported_torn_tail(tmp_path, monkeypatch):
    assert run_trial(0, "torn", "cut", 0, tmp_path).detected
    monkeypatch.setattr(torn, "verify", _always_verified)
    (tmp_path / "again").mkdir()
    assert not run_trial(0, "torn", "cut", 0, tmp_path / "again").detected


def test_torn_recovery_demands_truncation_to_the_last_record(tmp_path, monkeypatch):
    real_open = Ledger.open.__func__

    def no_truncate(cls, path):
        data = path.read_bytes()
        led = real_open(cls, path)
        path.write_bytes(data)  # a ledger that reports the torn tail but leaves it in place
        return led

    monkeypatch.setattr(Ledger, "open", classmethod(no_truncate))
    assert not run_trial(0, "torn", "cut", 0, tmp_path).detected


def test_run_records_are_deterministic():
    assert records.run_records(random.Random(5), "x") == records.run_records(random.Random(5), "x")
