"""The shared G3 oracle (tests/support/oracles.py) fails every planted overspend, on a real ledger.

Each fault is planted into the records of a real run (two nodes, a repair, a crash recovered),
so the oracle is held to the ledgers the engine writes, not to records made up to suit it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from loopproof.engine.run.runner import Runner
from tests.support.oracles import CallableKind, assert_g3, records

KIND = CallableKind("test_oracles_py")


def spend_twice(ctx):
    ctx.meter.charge(1.0, "api")
    ctx.meter.charge(0.5, "api")
    return "ok"


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("oracle")
    spec = KIND.one_node_spec(tmp, "twice", spend_twice, budget=5.0, spend_ceiling=2.0)
    runner = Runner.start(spec, tmp / "L.jsonl")
    assert runner.run() == 0
    runner.close()
    recs = records(tmp / "L.jsonl")
    assert [r["type"] for r in recs].count("reserve") >= 3  # two charges and the gate's run
    return recs


def _index(recs: list[dict], kind: str, nth: int = 0) -> int:
    return [i for i, r in enumerate(recs) if r["type"] == kind][nth]


def concurrent_reservations_over_b(recs: list[dict]) -> None:
    """Two reservations outstanding at once that together pass B (each alone fits): the copies
    that held one reservation at a time (`reserved = amount`) saw only the last."""
    recs[0]["graph"]["nodes"][0]["spend_ceiling"] = 10.0  # so only B can stop it
    i = _index(recs, "reserve")
    recs.insert(i + 1, {**recs[i], "amount": 4.5})


def settle_above_its_release(recs: list[dict]) -> None:
    """Charging 1.2 of a 1.0 reservation: within B (and a c_v raised to 10), but more than it
    held."""
    recs[0]["graph"]["nodes"][0]["spend_ceiling"] = 10.0
    recs[_index(recs, "settle")]["amount"] = 1.2


def abandon_charging_less_than_open(recs: list[dict]) -> None:
    i = _index(recs, "reserve", 1)
    recs[i + 1:] = [{"type": "abandon", "node": "n", "charged": 0.0}]


def attempt_over_its_ceiling(recs: list[dict]) -> None:
    """Within B (5.0) but past c_v (2.0): one attempt holding 3.0."""
    recs[_index(recs, "reserve")]["amount"] = 3.0
    recs[_index(recs, "settle")].update(amount=3.0, of=3.0)


def graph_budget_not_the_one_asked(recs: list[dict]) -> None:
    recs[0]["graph"]["spend_budget"] = 50.0


PLANTED: list[Callable[[list[dict]], None]] = [
    concurrent_reservations_over_b, settle_above_its_release, abandon_charging_less_than_open,
    attempt_over_its_ceiling, graph_budget_not_the_one_asked]


def test_the_real_ledger_passes(real: list[dict]) -> None:
    spend = assert_g3(real, 5.0)
    assert spend.reserved == 0.0 and 1.5 <= spend.settled <= 2.0


@pytest.mark.parametrize("plant", PLANTED, ids=lambda f: f.__name__)
def test_every_planted_overspend_fails(real: list[dict], plant) -> None:
    recs = copy.deepcopy(real)
    plant(recs)
    with pytest.raises(AssertionError):
        assert_g3(recs, 5.0)


def test_the_oracle_reads_the_ledger_file(tmp_path: Path, real: list[dict]) -> None:
    """A Path is read as the file's records (what the stateful test hands it)."""
    p = tmp_path / "copy.jsonl"
    p.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in real))
    assert assert_g3(p) == assert_g3(real)
