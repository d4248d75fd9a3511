"""Workers: a command runs in its workspace with the allow-listed environment and its own process
group; its claims are recorded in the ledger and never decide anything."""

from __future__ import annotations

import time
from pathlib import Path

from loopproof.engine import cli
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.runner import Runner
from tests.support.oracles import CallableKind, records
from tests.support.specs import command_node, write_spec

KIND = CallableKind("test_worker_py")


def one_node(tmp_path: Path, worker: str, gate: str, **extra: object) -> Path:
    return write_spec(tmp_path, {"w": command_node(["sh", "-c", worker], ["sh", "-c", gate],
                                                   spend_ceiling=5.0, **extra)},
                      spend_budget=20.0)


def test_claims_of_success_are_recorded_but_do_not_make_done(tmp_path: Path, monkeypatch) -> None:
    spec = one_node(tmp_path, "echo 'DONE: all tests pass'; echo PASS > status.txt; exit 0",
                    "exit 1", attempts=2)
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(spec), "--ledger", str(ledger)]) == 3  # FAILED
    recs = records(ledger)
    claims = [r for r in recs if r["type"] == "claim"]
    assert len(claims) == 2
    assert "all tests pass" in claims[0]["claims"]["stdout"]["tail"]
    assert claims[0]["claims"]["returncode"] == 0
    assert [r["verdict"] for r in recs if r["type"] == "verdict"] == ["reject", "reject"]


def test_a_failing_worker_can_still_pass_its_gate(tmp_path: Path) -> None:
    """The worker's exit code is a claim too: only the gate decides."""
    spec = one_node(tmp_path, "touch out.txt; echo 'I failed'; exit 7", "test -f out.txt")
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(spec), "--ledger", str(ledger)]) == 0
    claim = next(r for r in records(ledger) if r["type"] == "claim")
    assert claim["claims"]["returncode"] == 7


def test_environment_is_allow_listed_and_names_the_attempt(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("LOOPPROOF_SIGNING_KEY", "/keys/k.pem")
    spec = one_node(tmp_path, "env > env.txt; pwd > pwd.txt", "exit 0")
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(spec), "--ledger", str(ledger)]) == 0
    ws = Path(f"{ledger}.work") / "w"
    env = dict(line.split("=", 1) for line in (ws / "env.txt").read_text().splitlines()
               if "=" in line)
    assert "OPENAI_API_KEY" not in env and "LOOPPROOF_SIGNING_KEY" not in env
    assert env["LOOPPROOF_NODE"] == "w" and env["LOOPPROOF_ATTEMPT"] == "1"
    assert env["LOOPPROOF_ACTIVATION"] == "0"
    assert Path((ws / "pwd.txt").read_text().strip()).resolve() == ws.resolve()


def test_process_group_is_killed_with_the_worker(tmp_path: Path) -> None:
    """A grandchild left behind by a killed worker must not keep working."""
    spec = one_node(tmp_path, "(sleep 1; touch late.txt) & sleep 30", "exit 1",
                    timeout_s=0.3)
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(spec), "--ledger", str(ledger)]) == 3
    time.sleep(1.5)
    assert not (Path(f"{ledger}.work") / "w" / "late.txt").exists()


def test_missing_program_at_run_time_is_a_claim_not_a_crash(tmp_path: Path) -> None:
    spec = one_node(tmp_path, "true", "exit 1")
    loaded = spec_mod.load(spec)
    cfg = loaded.nodes["w"]
    object.__setattr__(cfg.worker, "argv", ("/nonexistent/worker",))
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(loaded, ledger)
    assert runner.run() == 3
    runner.close()
    recs = records(ledger)
    claim = next(r for r in recs if r["type"] == "claim")
    assert claim["claims"]["started"] is False
    settle = next(r for r in recs if r["type"] == "settle")
    assert settle["amount"] == 0.0  # it never ran, so nothing was used


def test_callable_worker_return_and_crash_are_claims(tmp_path: Path) -> None:
    calls = []

    def worker(ctx):
        calls.append(ctx.attempt)
        (ctx.workspace / "n.txt").write_text(str(ctx.attempt))
        if ctx.attempt == 1:
            raise ValueError("worker bug")
        return {"status": "done", "attempt": ctx.attempt}

    def gate(snap: Path) -> str:
        return "accept" if (snap / "n.txt").read_text() == "2" else "reject"

    # the gate run is paid from c_v
    spec = KIND.one_node_spec(tmp_path, "retry", worker, gate, budget=1.0, attempts=2,
                              spend_ceiling=0.5)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec, ledger)
    assert runner.run() == 0
    runner.close()
    claims = [r["claims"] for r in records(ledger) if r["type"] == "claim"]
    assert claims == [{"error": "ValueError: worker bug"},
                      {"returned": {"attempt": 2, "status": "done"}}]
    assert calls == [1, 2]
