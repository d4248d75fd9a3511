"""The ledger's fast paths give the slow paths' answers: one encoding per append, streaming
verification in blocks of any size, parallel verification, `Ledger.open` without records, the
replay folded while verifying, and the crash-point variable read once."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopproof.engine.record import ledger as ledger_mod
from loopproof.engine.record.ledger import Ledger, canonical, record_hash, verify
from loopproof.engine.record.replay import open_replayed, replay
from loopproof.engine.system import faults
from loopproof.engine.system.errors import LedgerCorrupt
from tests.support.ledger_damage import DAMAGE, lines, make, write
from tests.support.specs import command_node, write_spec

# keys chosen to fall on both sides of "hash" and next to it in sort order
KEYS = st.sampled_from(["", "a", "h", "ha", "has", "hasa", "hash_", "hasi", "hb", "hz", "i",
                        "node", "ü", "zz", "\u2603"])
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=3),
    max_leaves=6)


@settings()  # the ci profile: 50 examples (was 200); `make fuzz` draws 300
@given(st.dictionaries(KEYS, VALUES, max_size=6))
def test_one_encoding_per_append_is_the_canonical_line(tmp_path_factory, fields):
    """The spliced line equals canonical(record with its hash), and the hash is the record's."""
    path = tmp_path_factory.mktemp("enc") / "l.jsonl"
    led = Ledger.create(path, {"type": "run"})
    stored = led.append({"type": "x", **fields})
    led.close()
    assert lines(path)[-1] == canonical(stored) + b"\n"
    assert stored["hash"] == record_hash(stored)
    assert verify(path).status == "verified"


def _damaged(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.jsonl"
    make(path).close()
    ls = lines(path)
    DAMAGE[kind][0](ls)
    write(path, ls)
    return path


TAILS = {"half": lambda last: last[: len(last) // 2], "zeros": lambda last: b"\x00" * 20,
         "no-newline": lambda last: last[:-1], "cut-with-newline": lambda last: last[:10] + b"\n"}


def _torn(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"torn-{kind}.jsonl"
    make(path, 5).close()
    ls = lines(path)
    write(path, ls[:-1] + [TAILS[kind](ls[-1])])
    return path


@pytest.mark.parametrize("block", [1, 2, 7, 64, 1000])
def test_streaming_verification_is_the_same_for_any_block_size(tmp_path, monkeypatch, block):
    """Lines cut across blocks, torn tails at a block's edge: the same status, count, head and
    message as reading the file in one piece."""
    cases = [_damaged(tmp_path, k) for k in sorted(DAMAGE)] + [_torn(tmp_path, k) for k in TAILS]
    good = tmp_path / "good.jsonl"
    make(good).close()
    cases.append(good)
    whole = {p: verify(p).as_dict() for p in cases}
    monkeypatch.setattr(ledger_mod, "BLOCK", block)
    for p in cases:
        assert verify(p).as_dict() == whole[p], p.name


def test_verify_holds_a_block_not_the_ledger(tmp_path, monkeypatch):
    """Verifying a ledger of several MiB allocates far less than the file's size."""
    path = tmp_path / "big.jsonl"
    led = Ledger.create(path, {"type": "run"})
    with led.group():
        for i in range(20_000):
            led.append({"type": "tick", "i": i, "pad": "x" * 200})
    led.close()
    size = path.stat().st_size
    monkeypatch.setattr(ledger_mod, "BLOCK", 256 << 10)
    tracemalloc.start()
    try:
        result = verify(path, jobs=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.status == "verified" and result.records == 20_001
    assert size > 4 << 20 and peak < 2 << 20, (size, peak)


def _spliced(tmp_path: Path) -> Path:
    """Two ledgers' halves joined at the middle: each half checks out on its own."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    make(a, 40).close()
    make(b, 40, graph="other.toml").close()
    path = tmp_path / "spliced.jsonl"
    write(path, lines(a)[:20] + lines(b)[20:])
    return path


@pytest.mark.parametrize("jobs", [2, 7])
def test_parallel_verification_gives_the_serial_result(tmp_path, monkeypatch, jobs):
    """Every damage, torn tails and a splice exactly at a range boundary: the parallel verify
    answers what the serial scan answers (a problem in any range sends it to the serial scan)."""
    cases = [_damaged(tmp_path, k) for k in sorted(DAMAGE)] + [_torn(tmp_path, k) for k in TAILS]
    good = tmp_path / "good.jsonl"
    make(good, 50).close()
    cases += [good, _spliced(tmp_path)]
    serial = {p: verify(p, jobs=1).as_dict() for p in cases}
    assert serial[cases[-1]]["status"] == "broken"
    monkeypatch.setattr(ledger_mod, "PARALLEL_BYTES", 0)
    used = []
    real = ledger_mod._parallel_verify
    monkeypatch.setattr(ledger_mod, "_parallel_verify",
                        lambda *a: used.append(a) or real(*a))
    for p in cases:
        assert verify(p, jobs=jobs).as_dict() == serial[p], p.name
    assert len(used) == len(cases)


def test_open_without_records_folds_each_once_and_appends_on(tmp_path):
    path = tmp_path / "l.jsonl"
    make(path, 6).close()
    seen: list[dict] = []
    led = Ledger.open(path, keep=False, fold=seen.append)
    assert [r["seq"] for r in seen] == list(range(6)) and len(led) == 6
    with pytest.raises(ValueError, match="keep=False"):
        led.records  # noqa: B018
    assert led.append({"type": "more"})["seq"] == 6
    led.close()
    assert verify(path).records == 7


def test_a_fold_sees_only_the_verified_prefix(tmp_path):
    path = _damaged(tmp_path, "edited")
    seen: list[dict] = []
    with pytest.raises(LedgerCorrupt, match="line 3"):
        Ledger.open(path, keep=False, fold=seen.append)
    assert [r["seq"] for r in seen] == [0, 1]


def _run_ledger(tmp_path: Path) -> Path:
    from loopproof.engine.run.runner import Runner
    from loopproof.engine.run.spec import load

    spec = write_spec(tmp_path, {
        "a": command_node(["true"], ["true"], spend_ceiling=5.0),
        "b": command_node(["true"], ["false"], spend_ceiling=5.0, attempts=2, needs=["a"],
                          repairs=["a"])}, spend_budget=100.0, repair_budget=1)
    runner = Runner.start(load(spec), tmp_path / "run.jsonl")
    runner.run()
    runner.close()
    return tmp_path / "run.jsonl"


def test_replay_folded_while_verifying_is_the_replay_of_the_records(tmp_path):
    path = _run_ledger(tmp_path)
    led, streamed = open_replayed(path)
    led.close()
    with Ledger.open(path) as held:
        whole = replay(held)
    assert streamed.summary() == whole.summary()
    assert streamed.summary()["nodes"]["b"]["attempts_all"] == 4  # two activations of b
    assert streamed.state == whole.state and streamed.accepted == whole.accepted


def test_the_crash_variable_is_read_once(monkeypatch):
    faults.reset()
    monkeypatch.delenv(faults.ENV, raising=False)
    faults.crashpoint("ledger.before_append")
    monkeypatch.setenv(faults.ENV, "ledger.before_append:1")  # too late: already read
    faults.crashpoint("ledger.before_append")                # does not kill this process
    reads = []
    monkeypatch.setattr(faults, "_parse", lambda: reads.append(1))
    for _ in range(100):
        faults.crashpoint("x")
    assert reads == []
    faults.reset()
    monkeypatch.delenv(faults.ENV)
    faults.crashpoint("x")
    assert reads == [1]
    faults.reset()


def test_json_of_a_folded_record_is_the_stored_line(tmp_path):
    path = tmp_path / "l.jsonl"
    make(path, 3).close()
    seen: list[dict] = []
    Ledger.open(path, keep=False, fold=seen.append).close()
    assert [canonical(r) + b"\n" for r in seen] == lines(path)
    assert json.loads(lines(path)[1]) == seen[1]
