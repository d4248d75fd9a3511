"""A revision node's receipt is anchored in the run ledger, and verified against it.

One real run of examples/regress-restore (a `kind = "revision"` node that ends DONE with a
receipt); then `loopproof receipt RECEIPT --ledger RUN_LEDGER` on the receipt as issued and on
tampered copies.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.admission.broker import verify_receipt
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.runner import Runner
from loopproof.engine.system.canonical import digest
from tests.support.paths import REPO

EXAMPLE = REPO / "examples" / "regress-restore"


@pytest.fixture(scope="module")
def done_run(tmp_path_factory) -> tuple[Path, Path, dict]:
    tmp = tmp_path_factory.mktemp("anchor")
    shutil.copytree(EXAMPLE, tmp / "example")
    ledger = tmp / "run.jsonl"
    runner = Runner.start(spec_mod.load(tmp / "example" / "graph.toml"), ledger)
    try:
        assert runner.run() == 0
    finally:
        runner.close()
    recs = [json.loads(line) for line in ledger.read_text().splitlines()]
    verdict = next(r for r in recs if r["type"] == "verdict" and r["passed"])
    return ledger, Path(verdict["receipt"]["receipt_file"]), verdict


def receipt_cli(capsys, receipt: Path, ledger: Path, store: Path) -> tuple[int, dict]:
    """`loopproof receipt ... --json` in this process (its exit code and report; the paths are
    absolute, so the folder it runs in does not matter)."""
    capsys.readouterr()
    code = cli.main(["receipt", str(receipt), "--ledger", str(ledger), "--store", str(store),
                     "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_accepting_verdict_anchors_the_receipt_digest(done_run) -> None:
    ledger, receipt_file, verdict = done_run
    receipt = json.loads(receipt_file.read_text())
    anchor = verdict["receipt"]
    assert anchor["digest"] == receipt["digest"]
    guard = [json.loads(line) for line in Path(anchor["guard_ledger"]).read_text().splitlines()]
    assert anchor["guard_records"] == len(guard) and anchor["guard_head"] == guard[-1]["hash"]


def test_the_issued_receipt_verifies_against_the_run_ledger(done_run, capsys) -> None:
    ledger, receipt_file, _ = done_run
    code, out = receipt_cli(capsys, receipt_file, ledger, receipt_file.parent / "checkpoint")
    assert (code, out["status"], out["problems"]) == (0, "verified", [])
    assert out["ledger"] == str(ledger)


def test_an_edited_receipt_fails_against_the_run_ledger(done_run, tmp_path: Path, capsys) -> None:
    ledger, receipt_file, _ = done_run
    receipt = json.loads(receipt_file.read_text())
    receipt["liveness"] = {"evaluated": 0, "note": "nothing was ever rejected"}
    forged = tmp_path / "receipt.json"
    forged.write_text(json.dumps(receipt))
    code, out = receipt_cli(capsys, forged, ledger, receipt_file.parent / "checkpoint")
    assert code == 5 and out["status"] == "broken"
    assert any("does not match its digest" in p for p in out["problems"])


def test_a_reissued_receipt_with_a_fresh_digest_is_not_anchored(done_run, tmp_path: Path,
                                                                capsys) -> None:
    """Editing the receipt and recomputing its digest makes it self-consistent, but no accepting
    verdict in the run ledger names that digest."""
    ledger, receipt_file, _ = done_run
    receipt = json.loads(receipt_file.read_text())
    body = {k: v for k, v in receipt.items() if k != "digest"}
    body["liveness"] = {"evaluated": 0}
    forged = tmp_path / "receipt.json"
    forged.write_text(json.dumps({**body, "digest": digest(body)}))
    code, out = receipt_cli(capsys, forged, ledger, receipt_file.parent / "checkpoint")
    assert code == 5
    assert any("not anchored in the run ledger" in p for p in out["problems"])


def test_a_guard_ledger_rewritten_after_acceptance_fails(done_run, tmp_path: Path) -> None:
    """The run ledger anchors the guard ledger's head and length: a guard ledger cut back (or
    replaced) after the acceptance no longer matches."""
    ledger, receipt_file, verdict = done_run
    receipt = json.loads(receipt_file.read_text())
    run_records = [json.loads(line) for line in ledger.read_text().splitlines()]
    guard = Path(verdict["receipt"]["guard_ledger"])
    copy = tmp_path / "guard.jsonl"
    copy.write_text("".join(line + "\n" for line in guard.read_text().splitlines()[:-1]))
    moved = [dict(r) for r in run_records]
    for r in moved:
        if r is not None and r.get("receipt"):
            r["receipt"] = {**r["receipt"], "guard_ledger": str(copy)}
    problems = verify_receipt(receipt, moved)
    assert problems and "guard ledger" in problems[0]
    assert verify_receipt(receipt, run_records) == []  # the untouched one still verifies
