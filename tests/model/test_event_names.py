"""An event's stored name is declared once (model.transitions.EVENT_NAMES), not read off its
class: renaming a class changes no ledger record, no replay and no encoded event kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopproof.engine.record.replay import event_of, event_record
from loopproof.engine.run.runner import Runner
from loopproof.model import transitions as mt
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.state import initial_state
from loopproof.model.transitions import Begin, Settle
from loopproof.proofs.encoding import KINDS, Ev
from tests.support.oracles import CallableKind, records

KIND = CallableKind("test_event_names_py")


def spend(ctx):
    ctx.meter.charge(0.5, "api")
    return "ok"


def run_types(tmp_path: Path) -> list[str]:
    spec = KIND.one_node_spec(tmp_path, "spend", spend, budget=5.0, spend_ceiling=2.0)
    runner = Runner.start(spec, tmp_path / "L.jsonl")
    assert runner.run() == 0
    runner.close()
    return [r["type"] for r in records(tmp_path / "L.jsonl")]


@pytest.fixture
def renamed(monkeypatch):
    """Every run event class renamed, as a refactor would (the module's attributes too)."""
    old = {cls: (cls.__name__, cls.__qualname__) for cls in mt.EVENT_TYPES}
    for cls, (name, _) in old.items():
        cls.__name__ = cls.__qualname__ = "Renamed" + name
        monkeypatch.delattr(mt, name)
        monkeypatch.setattr(mt, "Renamed" + name, cls, raising=False)
    try:
        yield
    finally:
        for cls, (name, qualname) in old.items():
            cls.__name__, cls.__qualname__ = name, qualname


def test_every_event_is_named_once_and_the_encoding_uses_those_names() -> None:
    assert set(mt.EVENT_NAMES) == set(mt.EVENT_TYPES) and len(set(mt.EVENT_NAMES.values())) == 12
    assert tuple(mt.EVENT_NAMES.values()) == KINDS
    assert all(mt.EVENT_OF_NAME[n] is c for c, n in mt.EVENT_NAMES.items())


@pytest.fixture
def before(tmp_path: Path) -> list[str]:
    (tmp_path / "a").mkdir()
    return run_types(tmp_path / "a")


def test_renaming_the_classes_changes_no_stored_record(tmp_path: Path, before, renamed) -> None:
    rec = event_record(Settle(0.5, 0.5, node="n"))  # first: a renamed type would not replay
    assert rec["type"] == "settle" and event_of(rec) == Settle(0.5, 0.5, node="n")
    (tmp_path / "b").mkdir()
    assert run_types(tmp_path / "b") == before
    assert {"begin", "reserve", "settle", "verdict", "finish"} <= set(before)


def test_renaming_the_classes_changes_no_declared_record_type(renamed) -> None:
    """The registry names events, not classes: its table and its fingerprint stay the same."""
    from loopproof.engine.record.record_types import RUN_FORMAT, RUN_RECORDS
    from tests.support.record_fingerprints import FINGERPRINTS
    assert RUN_RECORDS.fingerprint() == FINGERPRINTS[RUN_FORMAT]
    for cls, name in mt.EVENT_NAMES.items():
        rec = event_record(cls(**ARGS[name]))  # a spend event names its node, as the engine's
        assert RUN_RECORDS.why_not(rec) is None, (name, rec)


ARGS = {"Begin": {"node": "n"}, "Refuse": {"node": "n"}, "Reserve": {"amount": 1.0, "node": "n"},
        "Overrun": {"amount": 1.0, "node": "n"}, "Settle": {"amount": 1.0, "node": "n"},
        "Verdict": {"node": "n",
        "passed": True}, "Abandon": {"node": "n"}, "Claim": {"node": "n"},
        "Cancel": {"node": "n"}, "Repair": {"node": "n", "target": "m"}, "Fail": {"node": "n"},
        "Finish": {}}


def test_renaming_the_classes_changes_no_encoded_kind(renamed) -> None:
    g = LoopGraph.build([NodeSpec("a")])
    ev = Ev.of_event(Begin("a"))
    assert ev.kind == "Begin" and ev.to_model() == Begin("a")
    assert mt.step(g, initial_state(g), ev.to_model()).running(g) == "a"
