"""The Gate protocol declares what an attempt relies on (engine/run/gate.py `Gate`): a gate
class the engine has never seen cannot skip "the gate judged the staged copy", its timeout is
asked through `within`, and its receipt anchor through `receipt_anchor`, never found by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.gate import ACCEPT, CallableGate, Gate, GateResult, judge_snapshot
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.worker import CallableWorker
from loopproof.engine.system.sandbox import Confinement
from tests.support.oracles import records
from tests.support.specs import write_spec

KIND = "test_gate_protocol_py"


class Honest(Gate):
    """A gate of a kind the attempt has never seen, judging a snapshot as every gate must."""

    def __init__(self, anchor: dict[str, Any] | None = None) -> None:
        self.anchor = anchor

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult:
        return judge_snapshot(workspace, 0.0, lambda snap, t: (ACCEPT, "looked"))

    def pinned_files(self) -> tuple[Path, ...]:
        return ()

    def receipt_anchor(self) -> dict[str, Any] | None:
        return self.anchor


class Unseen(Honest):
    """Says accept without reporting which tree it judged (`copied`)."""

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult:
        return GateResult(ACCEPT, "trust me", 0.0, "0" * 64)


GATES: dict[str, Gate] = {}


def _factory(table: Any, spec_dir: Path) -> tuple[CallableWorker, Gate]:
    return CallableWorker(lambda ctx: (ctx.workspace / "out").write_text("x")), GATES[table["fn"]]


spec_mod.register_kind(KIND, _factory, ["fn"])


def run_with(tmp_path: Path, gate: Gate) -> tuple[int, dict[str, Any]]:
    GATES[tmp_path.name] = gate
    p = write_spec(tmp_path, {"n": {"kind": KIND, "fn": tmp_path.name, "spend_ceiling": 2.0}},
                   spend_budget=5.0)
    runner = Runner.start(spec_mod.load(p), tmp_path / "L.jsonl")
    code = runner.run()
    runner.close()
    (verdict,) = [r for r in records(tmp_path / "L.jsonl") if r["type"] == "verdict"]
    return code, verdict


def test_a_new_gate_class_that_does_not_say_what_it_judged_is_never_a_pass(tmp_path) -> None:
    code, v = run_with(tmp_path, Unseen())
    assert code == 3 and v["verdict"] == "error" and "not the staged tree" in v["detail"]
    assert "accepted_tree" not in v


def test_a_new_gate_class_that_judges_the_staged_copy_passes_and_anchors_its_receipt(
        tmp_path) -> None:
    code, v = run_with(tmp_path, Honest({"digest": "d" * 64}))
    assert code == 0 and v["passed"] is True and v["receipt"] == {"digest": "d" * 64}
    assert len(v["accepted_tree"]) == 64


def test_the_protocol_gives_every_gate_its_defaults() -> None:
    gate = CallableGate(lambda snap: "accept")
    assert gate.within(0.5) is gate and gate.receipt_anchor() is None
    assert {"judge", "pinned_files", "within", "receipt_anchor"} <= set(vars(Gate))


def test_the_worker_protocol_says_which_workers_model_calls_go_through_the_proxy() -> None:
    """attempt.py asks `behind_proxy`, never a worker's class."""
    from loopproof.engine.run.worker import CommandWorker, Worker

    def wrap(argv: tuple[str, ...]) -> tuple[str, ...]:
        return ("bridge", *argv)

    assert CommandWorker(("w",)).behind_proxy(wrap) == CommandWorker(("bridge", "w"))
    assert CallableWorker(lambda ctx: None).behind_proxy(wrap) is None
    assert {"run", "behind_proxy"} <= set(vars(Worker))
