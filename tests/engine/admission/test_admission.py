"""The AdmissionBroker as a library (the guarded arm's API): the loop, policies, receipts."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from loopproof.engine.admission.broker import (
    AdmissionBroker,
    Disposition,
    GuardPolicy,
    MemoryLog,
    run_revisions,
    verify_receipt,
)
from loopproof.engine.admission.evidence import CallableCheck, CheckResult, Evidence
from loopproof.engine.run.spec import load as load_spec
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.trees import tree_hash
from loopproof.model import checkpoint as mc
from loopproof.model import evidence as me
from loopproof.model import rules
from loopproof.model.rules import Item
from tests.support.paths import REPO

GOOD, BAD = "k = 4\n", "k = 12\n"


def _shift_is_4(candidate: Path) -> CheckResult:
    text = (candidate / "shift.py").read_text()
    ok = text == GOOD
    return CheckResult("pass" if ok else "fail", "" if ok else f"expected k = 4, got {text!r}")


def _broker(tmp: Path, start: str = BAD, **policy) -> AdmissionBroker:
    ws = tmp / "ws"
    ws.mkdir(parents=True)
    (ws / "shift.py").write_text(start)
    check = CallableCheck("visible", _shift_is_4)
    return AdmissionBroker(ws, tmp / "state", admission=[check], policy=GuardPolicy(**policy))


def _patch(text: str) -> str:
    return json.dumps({"action": "patch", "files": {"shift.py": text}})


def test_run_revisions_repairs_then_survives_a_regression(tmp_path: Path) -> None:
    seen: list[str] = []

    def coder(ev: Evidence) -> str:
        seen.append(ev.verdict)
        return _patch(GOOD) if ev.verdict == "fail" else _patch(BAD)  # repairs, then regresses

    broker = _broker(tmp_path)
    decisions, completion = run_revisions(broker, coder, 3)
    assert [d.outcome for d in decisions] == [Disposition.ADMITTED, Disposition.REJECTED,
                                              Disposition.ESCALATED]
    assert seen == ["fail", "pass", "pass"]
    assert completion.completed and (broker.workspace / "shift.py").read_text() == GOOD
    assert verify_receipt(completion.receipt, broker.records, broker.store) == []
    assert isinstance(broker.log, MemoryLog)


def test_start_state_and_order_are_enforced(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    with pytest.raises(RuntimeError):
        broker.submit('{"action": "keep"}')
    broker.start()
    with pytest.raises(RuntimeError):
        broker.start()
    reused = AdmissionBroker(broker.workspace, broker.state_dir, admission=broker.admission)
    broker.submit(_patch(GOOD), based_on=broker.evidence())
    with pytest.raises(BadInput, match="already holds a checkpoint"):
        reused.start()


def test_state_dir_inside_the_workspace_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    with pytest.raises(BadInput, match="inside the guarded workspace"):
        AdmissionBroker(tmp_path / "ws", tmp_path / "ws" / ".state",
                        admission=[CallableCheck("v", _shift_is_4)])
    with pytest.raises(ValueError):
        AdmissionBroker(tmp_path / "ws", tmp_path / "s", admission=[])


@pytest.mark.parametrize("kwargs", [{"on_stale": "ignore"}, {"on_invalid": "patch"},
                                    {"candidate_budget": -1}, {"repeat_limit": 0},
                                    {"wall_budget_s": 0}])
def test_guard_policy_validates(kwargs) -> None:
    with pytest.raises(ValueError):
        GuardPolicy(**kwargs)


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_repeat_limit_counts_rejections_of_the_same_tree(tmp_path: Path, limit: int) -> None:
    broker = _broker(tmp_path, start=GOOD, repeat_limit=limit)
    ev = broker.start()
    outcomes = [broker.submit(_patch(BAD), based_on=ev).outcome for _ in range(limit + 1)]
    assert outcomes == [Disposition.REJECTED] * limit + [Disposition.ESCALATED]
    assert broker.counts["evaluated"] == limit


def test_a_patch_without_evidence_is_stale(tmp_path: Path) -> None:
    """A patch must cite evidence that binds (model/evidence.py); there is no lax mode."""
    strict = _broker(tmp_path / "a")
    strict.start()
    assert strict.submit(_patch(GOOD)).outcome is Disposition.STALE
    assert strict.checkpoint is None


def test_feedback_check_is_separate_from_admission(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shift.py").write_text(BAD)
    trace = CallableCheck("trace", lambda c: CheckResult("fail", "k should be 4"))
    broker = AdmissionBroker(ws, tmp_path / "state", feedback=trace,
                             admission=[CallableCheck("visible", _shift_is_4)])
    ev = broker.start()
    assert ev.check == "trace" and ev.payload["detail"] == "k should be 4"
    d = broker.submit(_patch(GOOD), based_on=ev)
    assert d.outcome is Disposition.ADMITTED
    completion = broker.complete()
    assert [v["check"] for v in completion.receipt["verdicts"]
            if v["phase"] == "recertification"] == ["visible"]


def test_two_different_checks_cannot_share_a_name(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    a = CallableCheck("v", _shift_is_4)
    b = CallableCheck("v", _shift_is_4, version="2")
    with pytest.raises(ValueError, match="both named"):
        AdmissionBroker(tmp_path / "ws", tmp_path / "s", admission=[a], completion=[b])


def test_complete_is_idempotent_and_closes(tmp_path: Path) -> None:
    broker = _broker(tmp_path, start=GOOD)
    broker.start()
    first = broker.complete()
    assert first.completed and broker.complete() is first and broker.closed
    assert broker.submit(_patch(BAD)).outcome is Disposition.CLOSED


# ---- the "revision" node kind: bad fields are bad input (exit 2, nothing written) -------------

EXAMPLE = REPO / "examples" / "regress-restore"


@pytest.mark.parametrize("line,field", [("revisions = 0", "revisions"),
                                        ('on_stale = "ignore"', "on_stale"),
                                        ('seed = "no-such-folder"', "seed"),
                                        ('protected = "tests"', "protected"),
                                        ('challenge = "python3"', "challenge"),
                                        ("wall_budget_s = -1", "wall_budget_s"),
                                        ("colour = 1", "colour")])
def test_revision_kind_rejects_bad_fields(tmp_path: Path, line: str, field: str) -> None:
    text = (EXAMPLE / "graph.toml").read_text()
    key = line.split(" = ")[0]
    lines = [ln for ln in text.splitlines() if not ln.startswith(f"{key} =")]
    at = lines.index("[node.caesar]") + 1
    spec = tmp_path / "graph.toml"
    spec.write_text("\n".join([*lines[:at], line, *lines[at:]]) + "\n")
    for f in ("start", "coder.py", "check_visible.py", "check_challenge.py", "check_hidden.py"):
        src = EXAMPLE / f
        (tmp_path / f).symlink_to(src, target_is_directory=src.is_dir())
    with pytest.raises(BadInput) as err:  # the CLI maps this to exit 2 before writing anything
        load_spec(spec)
    assert f"'{field}'" in str(err.value) and "fix:" in str(err.value)
    assert "\n" not in str(err.value)


def test_revision_kind_loads_from_the_spec() -> None:
    spec = load_spec(EXAMPLE / "graph.toml")
    node = spec.nodes["caesar"]
    assert node.kind == "revision"
    # the checks' scripts and their interpreter, resolved to one file at load
    python3 = Path(spec.programs["python3"])
    assert set(node.pinned_files()) == {EXAMPLE.resolve() / f for f in (
        "check_visible.py", "check_challenge.py", "check_hidden.py")} | {python3}


# ---- stateful: G4 and G5 hold on the running broker under adversarial replies -----------------

SOURCES = ["GOOD", "OVERFIT", "BAD"]


def _visible(c: Path) -> bool:
    return (c / "s.py").read_text().split("#")[0] in ("GOOD", "OVERFIT")


def _challenge(c: Path) -> bool:
    return (c / "s.py").read_text().split("#")[0] == "GOOD"


class BrokerMachine(RuleBasedStateMachine):
    """Adversarial worker against a real broker (callable checks, no processes). After every
    step: the checkpoint is empty or a tree every admission check passed; HEAD on disk agrees;
    the workspace is the current candidate after every submit; stale citations commit nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="broker-sm-"))
        ws = self.root / "ws"
        ws.mkdir()
        (ws / "s.py").write_text("BAD#0")
        self.broker = AdmissionBroker(
            ws, self.root / "state", policy=GuardPolicy(candidate_budget=6),
            admission=[CallableCheck("visible", _visible), CallableCheck("challenge", _challenge)])
        self.current = self.broker.start()
        self.old: list[Evidence] = []
        self.tampered = False

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _submitted(self, reply: str | None, cite: Evidence | None) -> None:
        before, was_closed = self.broker.checkpoint, self.broker.closed
        d = self.broker.submit(reply, based_on=cite)
        if d.outcome is Disposition.ADMITTED:
            assert cite is not None and cite.state_hash == before or before is None
            self.old.append(self.current)
        else:
            assert self.broker.checkpoint == before
        if d.outcome in (Disposition.STALE, Disposition.INVALID, Disposition.KEPT):
            assert self.broker.checkpoint == before
        if was_closed:
            assert d.outcome is Disposition.CLOSED
        else:  # an open broker leaves the workspace exactly at the current candidate
            assert tree_hash(self.broker.workspace) == self.broker.base
        self.tampered = False
        if not self.broker.closed:
            self.current = self.broker.evidence()

    @rule(src=st.sampled_from(SOURCES), tag=st.integers(0, 3),  # mostly current: commits
          cite=st.sampled_from(["current", "current", "current", "old", "none"]))
    def patch(self, src: str, tag: int, cite: str) -> None:
        ev = {"current": self.current, "none": None,
              "old": self.old[0] if self.old else None}[cite]
        self._submitted(_patch_file(f"{src}#{tag}"), ev)

    @rule(reply=st.sampled_from(["STATUS: DONE", "", "{", '{"action": "keep", "admit": 1}',
                                 '{"action": "keep"}', None]))
    def not_a_patch(self, reply: str | None) -> None:
        self._submitted(reply, self.current)

    @rule(src=st.sampled_from(SOURCES), leftover=st.booleans())
    def edit_behind_the_broker(self, src: str, leftover: bool) -> None:
        (self.broker.workspace / "s.py").write_text(f"{src}#9")
        if leftover:
            (self.broker.workspace / "junk.txt").write_text("x")
        self.tampered = True

    @precondition(lambda self: not self.broker.closed)
    @rule()
    def complete(self) -> None:
        c = self.broker.complete()
        assert c.completed == (self.broker.checkpoint is not None)
        if c.completed:
            assert verify_receipt(c.receipt, self.broker.records, self.broker.store) == []

    @invariant()
    def checkpoint_only_holds_admitted_trees(self) -> None:
        head = self.broker.store.head()
        assert (head.tree_hash if head else None) == self.broker.checkpoint
        if head is None:
            return
        src = (self.broker.store.path_of(head.tree_hash) / "s.py").read_text()
        assert src.startswith("GOOD#")
        passed = {(r["payload"]["check"]) for r in self.broker.records
                  if r["type"] == "guard.evidence" and r["state_hash"] == head.tree_hash
                  and r["payload"]["verdict"] == "pass" and r["phase"] in ("initial",
                                                                           "admission")}
        assert passed == {"visible", "challenge"}
        assert self.broker.counts["evaluated"] <= 6


    @invariant()
    def the_broker_ledger_replays_through_the_executable_model(self) -> None:
        """The engine against the model (as tests/engine/run/test_engine_stateful.py for G1-G3): the
        broker's own record, replayed through model/checkpoint.py by `step` (Disabled if the
        record shows an event the rule forbids), ends where the broker is, and G5's and G4's
        invariants hold on the model states the broker keeps."""
        replayed = _replay_g5(self.broker.records, [c.name for c in self.broker.admission],
                              [c.name for c in self.broker.completion])
        assert replayed.checkpoint == self.broker.checkpoint
        assert replayed.generation == (self.broker.generation
                                       if self.broker.checkpoint is not None else -1)
        assert mc.gated(replayed) is None
        assert [t for t, _ in replayed.history] == [t for t, _ in self.broker.g5.history]
        assert mc.gated(self.broker.g5) is None and me.bound_history(self.broker.g4) is None
        assert self.broker.g4.tree == self.broker.base


def _replay_g5(records, admission: list[str], completion: list[str]) -> mc.CheckpointState:
    """model/checkpoint.py's state after the events a broker's record shows: each piece of
    evidence issued, each checkpoint committed with its admission evidence, the receipt."""
    start = next(r for r in records if r["type"] == "guard.start")
    s = mc.initial_checkpoint(start["tree"], start["suites"], tuple(admission),
                              tuple(completion))
    check_of: dict[str, str] = {}
    recert: dict[str, str] = {}  # completion check -> its latest recertification evidence
    for r in records:
        if r["type"] == "guard.evidence":
            check_of[r["id"]] = r["payload"]["check"]
            if r["phase"] == "recertification":
                recert[r["payload"]["check"]] = r["id"]
            s = rules.step(s, mc.Issue(Item(r["id"], r["payload"]["check"], r["state_hash"],
                                            r["suite_hash"], r["payload"]["verdict"])))
        elif r["type"] == "guard.checkpoint":
            by_check = {check_of[i]: i for i in r["evidence_ids"]}
            s = rules.step(s, mc.Commit(r["tree"], tuple(by_check[c] for c in admission)))
        elif r["type"] == "guard.receipt":
            s = rules.step(s, mc.Recertify(tuple(recert[c] for c in completion)))
    return s


def _patch_file(text: str) -> str:
    return json.dumps({"action": "patch", "files": {"s.py": text}})


TestBrokerMachine = BrokerMachine.TestCase
TestBrokerMachine.settings = settings(max_examples=25, stateful_step_count=10)


# ---- `loopproof receipt` --------------------------------------------------------------------

def test_receipt_command_verifies_and_detects_tampering(tmp_path: Path, capsys) -> None:
    import argparse

    from loopproof.engine.commands import receipt as cmd
    from loopproof.engine.record.ledger import Ledger

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shift.py").write_text(GOOD)
    state = tmp_path / "state"
    state.mkdir()
    ledger = Ledger.create(state / "guard.jsonl", {"type": "guard.run"})
    broker = AdmissionBroker(ws, state, admission=[CallableCheck("visible", _shift_is_4)],
                             ledger=ledger)
    broker.start()
    path = broker.complete().receipt_path
    ledger.close()

    def run(p: Path) -> tuple[int, dict]:
        code = cmd.main(argparse.Namespace(receipt=p, ledger=None, store=None, json=True))
        return code, json.loads(capsys.readouterr().out)

    code, out = run(path)
    assert code == 0 and out["status"] == "verified" and out["problems"] == []
    tampered = json.loads(path.read_text())
    tampered["liveness"]["rejected"] = 0 if tampered["liveness"]["rejected"] else 7
    path.write_text(json.dumps(tampered))
    code, out = run(path)
    assert code == 5 and out["status"] == "broken" and "digest" in out["problems"][0]
    with pytest.raises(BadInput):
        run(tmp_path / "missing.json")
