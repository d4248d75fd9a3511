"""The runner: deterministic scheduling, repairs under the global budget, state = replay(ledger),
resume after a real SIGKILL at every commit boundary, and a finished run left unchanged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.record.ledger import Ledger
from loopproof.engine.record.replay import replay
from loopproof.engine.run.runner import CRASH_SITES, Runner
from loopproof.engine.run.spec import load
from loopproof.model import attempt_bound
from tests.support.engine_child import engine_run, started
from tests.support.oracles import assert_g3, records
from tests.support.specs import command_node, write_spec

# `a` writes its activation number; `b` passes only on a's second activation, so b is exhausted
# in activation 0 and repairs a (its ancestor): one repair, then DONE. Shell workers keep it fast.
# (`cp -f`: inputs/ is read-only, so `got` is too; a sandboxed worker has no capabilities, so
# even as root it replaces the file rather than writing through its mode.)
REPAIR_GRAPH = """
[graph]
repair_budget = {k}
spend_budget = 100.0

[node.a]
worker = ["sh", "-c", "echo $LOOPPROOF_ACTIVATION > v"]
gate = ["sh", "-c", "test -f v"]
attempts = 2
spend_ceiling = 5.0
timeout_s = 5

[node.b]
worker = ["sh", "-c", "cp -f inputs/a/v got; echo attempt $LOOPPROOF_ATTEMPT >> log"]
gate = ["sh", "-c", "test \\"$(cat got)\\" = 1"]
needs = ["a"]
repairs = ["a", "b"]
attempts = 3
spend_ceiling = 5.0
timeout_s = 5
"""


def write_graph(tmp_path: Path, k: int = 1) -> Path:
    spec = tmp_path / "graph.toml"
    spec.write_text(REPAIR_GRAPH.format(k=k))
    return spec


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = cli.main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_repair_uses_first_target_then_done(tmp_path: Path, capsys) -> None:
    ledger = tmp_path / "L.jsonl"
    code, report = run_json(capsys, "run", str(write_graph(tmp_path)), "--ledger", str(ledger))
    assert code == 0 and report["outcome"] == "DONE"
    assert report["repairs"] == [{"node": "b", "target": "a"}]  # the first listed target
    assert report["nodes"]["a"] == {"status": "DONE", "activation": 1, "attempts": 1,
                                    "attempts_all": 2, "verdicts": ["accept", "accept"],
                                    "cancelled": []}
    assert report["nodes"]["b"]["verdicts"] == ["reject"] * 3 + ["accept"]
    assert report["attempts_total"] == 6 <= report["W"]
    recs = records(ledger)
    order = [(r["type"], r.get("node")) for r in recs if r["type"] in ("begin", "repair")]
    assert order == [("begin", "a"), ("begin", "b"), ("begin", "b"), ("begin", "b"),
                     ("repair", "b"), ("begin", "a"), ("begin", "b")]
    assert_g3(recs)


def test_repair_budget_spent_ends_failed(tmp_path: Path, capsys) -> None:
    ledger = tmp_path / "L.jsonl"
    code, report = run_json(capsys, "run", str(write_graph(tmp_path, k=0)), "--ledger",
                            str(ledger))
    assert code == 3 and report["outcome"] == "FAILED"
    assert report["nodes"]["b"]["status"] == "EXHAUSTED" and report["repairs_used"] == 0
    fail = records(ledger)[-1]
    assert fail["type"] == "fail" and fail["node"] == "b"


def test_state_is_replay_of_the_ledger(tmp_path: Path) -> None:
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(load(write_graph(tmp_path)), ledger)
    runner.run()
    runner.close()
    again = replay(Ledger.open(ledger))
    assert again.state == runner.state
    assert again.state.attempts_total <= attempt_bound(again.graph)


def test_inputs_are_a_fresh_copy_without_nested_inputs(tmp_path: Path) -> None:
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(load(write_graph(tmp_path)), ledger)
    runner.run()
    runner.close()
    inputs = Path(f"{ledger}.work") / "b" / "inputs"
    assert sorted(p.name for p in inputs.iterdir()) == ["a"]
    assert (inputs / "a" / "v").read_text().strip() == "1"  # the repaired activation's output
    # under bwrap inputs/ is read-only by mount (tests/engine/system/test_inputs_mount.py), so the files keep
    # the modes a's worker gave them: a copy b makes is an ordinary file of its own
    assert (inputs / "a").stat().st_mode & 0o200 and (inputs / "a" / "v").stat().st_mode & 0o200
    # b's own workspace persists across attempts and activations
    assert (Path(f"{ledger}.work") / "b" / "log").read_text().count("attempt") == 4


def test_resuming_a_finished_run_changes_nothing(tmp_path: Path, capsys) -> None:
    ledger = tmp_path / "L.jsonl"
    code, first = run_json(capsys, "run", str(write_graph(tmp_path)), "--ledger", str(ledger))
    before = ledger.read_bytes()
    code2, again = run_json(capsys, "resume", "--ledger", str(ledger))
    assert (code2, again["outcome"], again["head"]) == (code, first["outcome"], first["head"])
    assert ledger.read_bytes() == before


def test_resume_of_a_corrupt_ledger_exits_5_and_appends_nothing(tmp_path: Path, capsys) -> None:
    ledger = tmp_path / "L.jsonl"
    cli.main(["run", str(write_graph(tmp_path)), "--ledger", str(ledger)])
    lines = ledger.read_text().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if '"type":"settle"' in line)
    edited = json.loads(lines[i])
    edited["amount"] = 0.0  # an edited charge: the chain no longer verifies
    lines[i] = json.dumps(edited, sort_keys=True, separators=(",", ":")) + "\n"
    ledger.write_text("".join(lines))
    damaged = ledger.read_bytes()
    assert cli.main(["resume", "--ledger", str(ledger)]) == 5
    assert ledger.read_bytes() == damaged
    assert "ledger corrupt" in capsys.readouterr().err


def test_record_the_model_refuses_is_corrupt(tmp_path: Path) -> None:
    """A chain that verifies but says something impossible (a second PASS) fails closed."""
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(load(write_graph(tmp_path)), ledger)
    runner.run()
    runner.ledger.append({"type": "verdict", "node": "a", "passed": True})
    runner.close()
    from loopproof.engine.system.errors import LedgerCorrupt
    with pytest.raises(LedgerCorrupt, match="the model refuses verdict"):
        replay(Ledger.open(ledger))


# ---- crash matrix: a real SIGKILL at every commit boundary, then resume ---------------------

MID_ATTEMPT = {"runner.before_worker", "meter.after_reserve", "meter.before_settle",
               "runner.after_worker", "runner.before_verdict"}
CASES = [f"{site}:{1 if site == 'runner.repair' else 2}" for site in CRASH_SITES
         if site != "runner.resume"] + ["ledger.torn_write:7"]


def crash_child(argv: list[str], crash_at: str) -> subprocess.CompletedProcess:
    """The engine (its runner, without the CLI's parser) in a child that dies at `crash_at`."""
    return engine_run(argv, crash_at=crash_at)


@pytest.mark.parametrize("crash_at", CASES)
def test_resume_after_sigkill_recovers_the_outcome(tmp_path: Path, capsys, crash_at: str) -> None:
    ledger = tmp_path / "L.jsonl"
    spec = write_graph(tmp_path)
    child = crash_child(["run", str(spec), str(ledger)], crash_at)
    assert child.returncode == -signal.SIGKILL, child.stderr
    code, report = run_json(capsys, "resume", "--ledger", str(ledger))
    assert code == 0 and report["outcome"] == "DONE", report
    assert report["repairs_used"] == 1 and report["resumes"] == 1
    assert {n["status"] for n in report["nodes"].values()} == {"DONE"}
    recs = records(ledger)
    assert_g3(recs)
    abandons = [r for r in recs if r["type"] == "abandon"]
    site = crash_at.rsplit(":", 1)[0]
    if site in MID_ATTEMPT:
        assert len(abandons) == 1 and abandons[0]["outcome"] == "unknown"
        assert report["outcome_unknown"] == 1  # repeated execution is reported, not hidden
    elif site.startswith("runner."):
        assert abandons == []
    assert report["attempts_total"] <= report["W"]
    if site == "ledger.torn_write":
        assert report["torn"] and ("cut short" in report["torn"]
                                   or "no newline" in report["torn"])


def test_crash_during_resume_then_resume_again(tmp_path: Path, capsys) -> None:
    ledger = tmp_path / "L.jsonl"
    spec = write_graph(tmp_path)
    assert crash_child(["run", str(spec), str(ledger)],
                       "meter.after_reserve:1").returncode == -signal.SIGKILL
    assert crash_child(["resume", str(ledger)],
                       "runner.resume:1").returncode == -signal.SIGKILL
    assert "resumed" not in [r["type"] for r in records(ledger)]
    code, report = run_json(capsys, "resume", "--ledger", str(ledger))
    assert code == 0 and report["outcome"] == "DONE" and report["outcome_unknown"] == 1
    abandon = next(r for r in records(ledger) if r["type"] == "abandon")
    assert abandon["node"] == "a" and abandon["charged"] == 5.0  # the open reservation, in full


# ---- policy pinned -----------------------------------------------------------------------

POLICY = """
[policy]
goals = ["every node DONE with a PASS verdict"]
scope = ["."]
[gate]
files = ["check.sh"]
[budget]
spend = {spend}
repairs = 1
"""


def policy_graph(tmp_path: Path, spend: float, worker: str, sandbox: str = "bwrap") -> Path:
    (tmp_path / "check.sh").write_text("test -f out.txt\n")
    (tmp_path / "policy.toml").write_text(POLICY.format(spend=spend))
    return write_spec(tmp_path, {"a": command_node(["sh", "-c", worker, "policy.toml"],
                                                   ["sh", "check.sh"], attempts=2,
                                                   spend_ceiling=1.0)},
                      spend_budget=10.0, policy="policy.toml", sandbox=sandbox)


def test_a_sandboxed_worker_cannot_change_the_policy(tmp_path: Path) -> None:
    spec = policy_graph(tmp_path, 60.0, "touch out.txt; echo '# edited' >> \"$0\"")
    before = (tmp_path / "policy.toml").read_bytes()
    assert cli.main(["run", str(spec), "--ledger", str(tmp_path / "L.jsonl")]) == 0
    assert (tmp_path / "policy.toml").read_bytes() == before


def test_policy_change_during_the_run_stops_it(tmp_path: Path, capsys) -> None:
    # without a sandbox the worker can edit the policy: the policy pin catches it
    spec = policy_graph(tmp_path, 60.0, "touch out.txt; echo '# edited' >> \"$0\"", "none")
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(spec), "--ledger", str(ledger)]) == 5
    recs = records(ledger)
    assert recs[0]["policy"]["path"] == str((tmp_path / "policy.toml").resolve())
    changed = [r for r in recs if r["type"] == "pin_changed"]
    assert changed and changed[0]["what"] == "policy"
    assert "verdict" not in [r["type"] for r in recs]  # stopped before the gate ran


def test_policy_in_place_run_is_done(tmp_path: Path) -> None:
    spec = policy_graph(tmp_path, 60.0, "touch out.txt")
    assert cli.main(["run", str(spec), "--ledger", str(tmp_path / "L.jsonl")]) == 0


def test_graph_asking_more_than_the_policy_is_refused(tmp_path: Path, capsys) -> None:
    spec = policy_graph(tmp_path, 5.0, "touch out.txt")
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(spec), "--ledger", str(ledger)]) == 2
    assert "exceeds policy budget.spend" in capsys.readouterr().err
    assert not ledger.exists()


# ---- progress display ------------------------------------------------------------------------

def test_progress_only_on_a_terminal_and_never_with_json(tmp_path: Path) -> None:
    import io

    from loopproof.engine.run import progress
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert progress.wanted(False, Tty()) is True
    assert progress.wanted(True, Tty()) is False  # --json: never
    assert progress.wanted(False, io.StringIO()) is False  # a pipe: never
    screen = Tty()
    ledger = tmp_path / "L.jsonl"
    with progress.LiveProgress(screen) as live:
        runner = Runner.start(load(write_graph(tmp_path)), ledger, progress=live)
        runner.run()
        runner.close()
    text = screen.getvalue()
    assert "DONE" in text and "spend" in text and "b" in text and "repairs 1/1" in text


def in_folder(folder: str) -> list[int]:
    """Processes whose working directory lies in `folder`."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd").startswith(folder):
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_resume_kills_a_worker_the_crashed_engine_left_running(tmp_path: Path,
                                                              sandbox: str) -> None:
    """The engine dies mid-attempt; its worker (own session) would go on writing into the
    workspace while the re-run attempt works there. In the sandbox it dies with the engine
    (bwrap --die-with-parent); without one, resume kills it first."""
    spec = tmp_path / "graph.toml"
    spec.write_text(f'[graph]\nspend_budget = 50.0\nsandbox = "{sandbox}"\n[node.a]\n'
                    'worker = ["sh", "-c", "echo start-$LOOPPROOF_ATTEMPT >> log; sleep 2; '
                    'echo end-$LOOPPROOF_ATTEMPT >> log"]\n'
                    'gate = ["sh", "-c", "grep -q end log"]\nattempts = 2\nspend_ceiling = 10.0\n')
    ledger = tmp_path / "L.jsonl"
    log = Path(f"{ledger}.work") / "a" / "log"
    with started(["run", str(spec), str(ledger)]) as child:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (log.exists()
                                                   and "start-1" in log.read_text()):
            time.sleep(0.02)
        child.kill()  # SIGKILL: the engine dies; without a sandbox its worker does not
    if sandbox == "bwrap":  # nobody kills it: it dies on its own, at once
        ws = str(log.parent)
        for _ in range(200):
            if not in_folder(ws):
                break
            time.sleep(0.01)
        assert not in_folder(ws)
    runner = Runner.resume(ledger)
    assert runner.continue_run() == 0
    runner.close()
    resumed = next(r for r in records(ledger) if r["type"] == "resumed")
    if sandbox == "none":  # killed from the run's cgroups where the host has them, else found
        assert resumed["reaped"] > 0 or resumed["orphans_killed"] == 1, resumed
    else:
        assert resumed["orphans_killed"] == 0
    time.sleep(0.5)
    # the interrupted attempt 1 never ended; it was given back (model.Abandon) and ran again as
    # attempt 1, whose worker wrote the only `end`
    assert log.read_text().split() == ["start-1", "start-1", "end-1"]


def test_kill_orphans_kills_only_workers_left_in_the_runs_folder(tmp_path: Path) -> None:
    """Where the run's cgroups reap everything (this host), the scan of /proc that resume falls
    back on is not reached by the runs above: held to its rule here. A process group is killed
    when one of its processes works inside the folder and carries LOOPPROOF_NODE; a shell in
    the folder without it, and a worker of another folder, are left alone."""
    from loopproof.engine.run.recovery import kill_orphans

    root, elsewhere = tmp_path / "run" / "L.jsonl.work", tmp_path / "other"
    (root / "a").mkdir(parents=True)
    elsewhere.mkdir()
    env = {"PATH": os.environ["PATH"]}

    def sleeper(cwd: Path, **extra: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(["sleep", "600"], cwd=cwd, env={**env, **extra},
                                start_new_session=True)

    orphan = sleeper(root / "a", LOOPPROOF_NODE="a")
    shell, other = sleeper(root / "a"), sleeper(elsewhere, LOOPPROOF_NODE="a")
    try:
        assert kill_orphans(root) == [orphan.pid]  # its own session: its pgid is its pid
        assert orphan.wait(30) == -signal.SIGKILL
        assert shell.poll() is None and other.poll() is None
        assert kill_orphans(root) == []
    finally:
        for p in (orphan, shell, other):
            if p.poll() is None:
                p.kill()
                p.wait()
