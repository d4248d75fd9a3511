"""The record registry (engine/record/record_types.py): every run-ledger record type declared
once, checked before every append and on every read, and docs/engine.md's table made from it."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.record import record_types
from loopproof.engine.record.record_types import (
    GUARD_FORMAT,
    GUARD_RECORDS,
    RUN_FORMAT,
    RUN_RECORDS,
)
from loopproof.engine.record.registry import field
from loopproof.engine.record.replay import RECORD_OF_EVENT
from loopproof.engine.run.runner import Runner
from loopproof.engine.system.errors import LedgerCorrupt
from loopproof.engine.system.exits import Exit
from loopproof.model import transitions as mt
from tests.support.oracles import CallableKind, records, rewrite
from tests.support.paths import REPO
from tests.support.record_fingerprints import FINGERPRINTS
from tests.support.refusals import refused

KIND = CallableKind("test_record_registry_py")
# The growth loop's registry (experiments/growth/records.py: the engine's, extended by the study)
# is what the engine's was before the study's records moved out of it: its ledgers are unchanged.
GROWTH_FINGERPRINT = "5dd89d4a13333309c5f0d508152d104ad0c6fcef37c50d23db28ddba371b17e2"
JSON_OF = {str: {"string"}, int: {"integer"}, float: {"number"}, bool: {"boolean"}}


def spend(ctx):
    ctx.meter.charge(0.5, "api")
    return "ok"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("run")
    runner = Runner.start(KIND.one_node_spec(tmp, "spend", spend, budget=5.0, spend_ceiling=2.0),
                          tmp / "L.jsonl")
    assert runner.run() == 0
    runner.close()
    return tmp / "L.jsonl"


def test_the_formats_are_pinned() -> None:
    assert {RUN_FORMAT: RUN_RECORDS.fingerprint(),
            GUARD_FORMAT: GUARD_RECORDS.fingerprint()} == FINGERPRINTS


def test_the_growth_loops_records_are_the_studys_and_its_ledgers_unchanged() -> None:
    from experiments.growth.records import GROWTH, GROWTH_RECORDS

    assert GROWTH_RECORDS.fingerprint() == GROWTH_FINGERPRINT
    assert not any(t.writer == GROWTH for t in RUN_RECORDS)  # the engine names none of them
    assert {t.name for t in GROWTH_RECORDS if t.writer == GROWTH} == {
        "idle_finished", "round", "round_cut", "tick", "evaluation", "planner_call",
        "loop_broken"}
    with pytest.raises(ValueError, match="declared twice"):
        RUN_RECORDS.extended(fields={"settle": (field("what", "string"),)})


def test_every_model_event_has_one_record_type_naming_it_not_its_class() -> None:
    named = [t.event for t in RUN_RECORDS if t.event is not None]
    assert sorted(named) == sorted(mt.EVENT_NAMES.values())  # each event once, nothing else
    for t in RUN_RECORDS:
        if t.event is not None:
            assert t.name == t.event.lower() == RECORD_OF_EVENT[t.event]


@pytest.mark.parametrize("cls", mt.EVENT_TYPES, ids=lambda c: mt.EVENT_NAMES[c])
def test_an_event_records_arguments_are_declared_with_their_types(cls) -> None:
    declared = RUN_RECORDS.types[RECORD_OF_EVENT[mt.EVENT_NAMES[cls]]]
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        got = declared.field(f.name)
        assert got is not None, f"{cls.__name__}.{f.name} is not declared"
        want = set().union(*(JSON_OF.get(a, set()) for a in typing.get_args(hints[f.name])
                             or (hints[f.name],)))
        assert want - {"integer"} <= set(got.types), (f.name, want, got.types)


def test_docs_engine_md_holds_the_generated_table() -> None:
    text = (REPO / "docs/engine.md").read_text(encoding="utf-8")
    table = record_types.doc_table()
    assert table in text, "docs/engine.md: run `python -m loopproof.engine.record.record_types --write`"
    assert text.count(record_types.BEGIN) == 1


def test_the_table_names_every_engine_type_once() -> None:
    rows = [r for r in record_types.doc_table().splitlines() if r.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == [t.name for t in RUN_RECORDS
                                                if t.writer == record_types.ENGINE]


def test_every_record_of_a_run_is_declared(ledger: Path) -> None:
    recs = records(ledger)
    assert [RUN_RECORDS.why_not(r) for r in recs] == [None] * len(recs)
    fixture = records(REPO / "tests/fixtures/ledgers/pipeline-done.jsonl")  # a stored run
    assert [RUN_RECORDS.why_not(r) for r in fixture] == [None] * len(fixture)


@pytest.mark.parametrize(("record", "field", "words"), [
    ({"type": "begin", "node": "n", "activtion": 0}, "activtion", "is not a field"),
    ({"type": "begin", "node": "n", "attempt": "1"}, "attempt", "is string"),
    ({"type": "verdict", "node": "n", "passed": 1}, "passed", "is integer"),
    ({"type": "settle", "node": "n", "amount": True}, "amount", "is boolean"),
    ({"type": "begin"}, "node", "is missing"),
    ({"type": "Begin", "node": "n"}, "type", "not a record type"),
])
def test_a_record_no_run_writes_is_named_by_its_field(record, field, words) -> None:
    why = RUN_RECORDS.why_not(record)
    assert why is not None and why[0] == field and words in why[1]


def test_an_open_type_takes_its_writers_fields_and_still_types_the_declared_ones() -> None:
    assert RUN_RECORDS.why_not({"type": "verdict", "node": "n", "passed": True,
                                "my_gate_fact": [1]}) is None
    assert RUN_RECORDS.why_not({"type": "verdict", "node": "n", "passed": True,
                                "seconds": "1"})[0] == "seconds"
    assert RUN_RECORDS.why_not({"type": "settle", "node": "n", "amount": 1}) is None  # an int


def test_a_record_is_checked_before_it_is_written(tmp_path: Path, monkeypatch) -> None:
    """An undeclared field is the writer's bug: refused before a byte reaches the ledger."""
    from loopproof.engine.run import journal as journal_mod

    def worker(ctx):
        return "ok"

    spec = KIND.one_node_spec(tmp_path, "plain", worker, budget=5.0, spend_ceiling=2.0)
    runner = Runner.start(spec, tmp_path / "L.jsonl")
    real = journal_mod.event_record
    monkeypatch.setattr(journal_mod, "event_record",
                        lambda ev, **facts: {**real(ev, **facts), "attempt_of": 1})
    size = (tmp_path / "L.jsonl").stat().st_size
    with pytest.raises(RuntimeError, match="'begin' record's field 'attempt_of' is not a field"):
        runner.run()
    assert (tmp_path / "L.jsonl").stat().st_size == size
    runner.close()


@pytest.mark.parametrize("command", [["show"], ["verify"], ["resume", "--ledger"]],
                         ids=lambda c: c[0])
def test_a_rechained_record_no_run_writes_is_one_line_and_exit_5_corrupt(
        tmp_path: Path, ledger: Path, command: list[str], capsys) -> None:
    """Whoever rewrites the chain can make its hashes right; the record must still be one a
    run writes. The reader names the file, the line, the field and the fix, and writes nothing;
    the exit is 5, a corrupt ledger, as for a broken chain (it was 2, "bad input": but the user
    gave the right file, and what is wrong is the ledger's content)."""
    bad = tmp_path / "L.jsonl"
    bad.write_bytes(ledger.read_bytes())
    line = next(i for i, r in enumerate(records(bad)) if r["type"] == "settle") + 1

    def edit(recs):
        recs[line - 1]["amount"] = "0.5"
        return recs
    rewrite(bad, edit)
    # one line (on stdout for `verify`, whose report it is), nothing written, exit 5
    said = refused(capsys, [*command, str(bad)], tmp_path,
                   f"{bad}: line {line}: field 'amount': is string ('0.5')",
                   "fix: restore the ledger from a trusted copy", code_=Exit.CORRUPT)
    assert ("verified" if command == ["verify"] else "ledger corrupt") in said


def test_a_bad_record_read_back_is_a_corrupt_ledger() -> None:
    with pytest.raises(LedgerCorrupt) as exc:
        RUN_RECORDS.check_read({"type": "begin", "node": 3, "seq": 4}, "L.jsonl")
    assert str(exc.value).startswith("L.jsonl: line 5: field 'node': is integer (3)")


def test_the_broker_checks_its_guard_records(tmp_path: Path) -> None:
    """A guard ledger record the table does not declare is refused before it is appended."""
    from loopproof.engine.admission.conformance.lab import Lab

    lab = Lab(tmp_path)
    broker = lab.broker()
    broker.start()
    n = len(broker.records)
    assert n > 0 and [GUARD_RECORDS.why_not(r) for r in broker.records] == [None] * n
    with pytest.raises(RuntimeError, match="'guard.stop' record's field 'statu' is not a field"):
        broker._record({"type": "guard.stop", "statu": "x"})
    assert len(broker.records) == n


def test_loopproof_receipt_reads_a_guard_ledger_against_the_guard_table(tmp_path: Path,
                                                                          capsys) -> None:
    from loopproof.engine.admission.conformance.lab import Lab

    lab = Lab(tmp_path)
    broker = lab.broker()
    broker.start()
    done = broker.complete()
    assert done.completed and done.receipt_path is not None
    ledger = lab.ledger.path
    lab.ledger.close()
    args = ["receipt", str(done.receipt_path), "--ledger", str(ledger)]
    assert cli.main(args) == 0
    capsys.readouterr()

    def edit(recs):
        next(r for r in recs if r["type"] == "guard.evidence")["phase"] = ["initial"]
        return recs
    rewrite(ledger, edit)
    before = ledger.read_bytes()
    assert cli.main(args) == Exit.CORRUPT  # a record no broker writes: corrupt, as a broken chain
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{ledger}: line " in err and "field 'phase'" in err
    assert ledger.read_bytes() == before
