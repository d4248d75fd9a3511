"""A gate that crashes is told apart from one that rejects: the verdict says `error` and what kind
(exit N, a signal, a timeout, a changed snapshot naming the paths), a Python traceback behind an
exit 1 is kept as `raised`, and `gate_errors = "stop"` stops the run on a gate error (exit 6)
where the default "retry" fails the attempt and tries again."""

from __future__ import annotations

import sys
from pathlib import Path

from loopproof.engine import cli
from loopproof.engine.run.gate import CallableGate, judge_snapshot, snapshot_changes
from loopproof.engine.system.trees import copy_tree, make_read_only
from tests.support.oracles import records
from tests.support.specs import command_node, write_spec


def run(tmp_path: Path, gate: list[str], *, node: dict | None = None, graph: dict | None = None,
        attempts: int = 1, code: int | None = None) -> tuple[int, list[dict], Path]:
    worker = ["sh", "-c", "echo 1 > out.txt; echo helper = 1 > helper.py"]
    spec = write_spec(tmp_path, {"a": command_node(worker, gate, attempts=attempts,
                                                   spend_ceiling=10.0, gate_timeout_s=3,
                                                   **(node or {}))},
                      spend_budget=100.0, **(graph or {}))
    ledger = tmp_path / "L.jsonl"
    got = cli.main(["run", str(spec), "--ledger", str(ledger), "--json"])
    if code is not None:
        assert got == code
    return got, records(ledger), ledger


def verdicts(recs: list[dict]) -> list[dict]:
    return [r for r in recs if r["type"] == "verdict"]


def test_each_way_a_gate_fails_to_judge_is_named(tmp_path: Path, capsys) -> None:
    cases = {  # (a signal to itself: unsandboxed, since PID 1 of a sandbox ignores it)
        "exit 2": (["sh", "-c", "echo cannot read my config >&2; exit 2"], {}),
        "signal SIGSEGV": (["sh", "-c", "kill -SEGV $$"], {"sandbox": "none"}),
        "timeout": (["sleep", "30"], {}),
    }
    for i, (kind, (gate, graph)) in enumerate(cases.items()):
        folder = tmp_path / str(i)
        folder.mkdir()
        _, recs, ledger = run(folder, gate, graph=graph, code=3)
        v = verdicts(recs)[0]
        assert v["verdict"] == "error" and v["error"] == kind, v
        capsys.readouterr()
        cli.main(["show", str(ledger)])
        assert f"gate: error ({kind})" in capsys.readouterr().out
    # a reject is a reject: no `error`
    (tmp_path / "r").mkdir()
    _, recs, _ = run(tmp_path / "r", ["sh", "-c", "echo no; exit 1"], code=3)
    assert verdicts(recs)[0]["verdict"] == "reject" and "error" not in verdicts(recs)[0]


def test_a_python_gate_that_raises_is_a_reject_with_its_exception_kept(tmp_path: Path,
                                                                      capsys) -> None:
    gate = [sys.executable, "-c", "open('missing.csv').read()"]
    _, recs, ledger = run(tmp_path, gate, code=3)
    v = verdicts(recs)[0]
    assert v["verdict"] == "reject" and v["exit"] == 1
    assert v["raised"].startswith("FileNotFoundError: [Errno 2] No such file or directory")
    capsys.readouterr()
    cli.main(["show", str(ledger)])
    text = capsys.readouterr().out
    assert "note: the gate raised FileNotFoundError" in text and "exit 2 on the gate's own" in text


def test_an_assertion_is_a_reject_and_no_note(tmp_path: Path, capsys) -> None:
    _, recs, ledger = run(tmp_path, [sys.executable, "-c", "assert 1 == 2, 'wrong'"], code=3)
    assert verdicts(recs)[0]["raised"] == "AssertionError: wrong"
    capsys.readouterr()
    cli.main(["show", str(ledger)])
    assert "note: the gate raised" not in capsys.readouterr().out


def test_a_changed_snapshot_names_the_changed_paths(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "keep.txt").write_text("x")
    (ws / "edit.txt").write_text("before")
    (ws / "gone.txt").write_text("bye")

    def vandal(snap: Path) -> str:  # writes through read-only modes, as root can
        (snap / "__pycache__").mkdir()
        (snap / "__pycache__" / "helper.cpython-311.pyc").write_bytes(b"\0")
        (snap / "edit.txt").chmod(0o644)
        (snap / "edit.txt").write_text("after")
        (snap / "gone.txt").unlink()
        (snap / "keep.txt").chmod(0o600)
        return "accept"

    result = judge_snapshot(ws, 5.0, lambda snap, t: (vandal(snap), "looked fine"))
    assert result.verdict == "error" and result.facts["error"] == "snapshot changed"
    assert result.facts["changed"] == ["+ __pycache__/", "+ __pycache__/helper.cpython-311.pyc",
                                       "- gone.txt", "~ edit.txt", "mode keep.txt 444->600"]
    assert result.detail.startswith("the gate's snapshot changed while it judged: + __pycache__/"
                                    ", + __pycache__/helper.cpython-311.pyc, - gone.txt")
    assert result.detail.endswith("; looked fine")
    # an untouched snapshot is no change
    copy_tree(ws, tmp_path / "copy")
    make_read_only(tmp_path / "copy")
    assert snapshot_changes(ws, tmp_path / "copy") == []
    assert CallableGate(lambda snap: "accept").judge(ws).verdict == "accept"


def test_a_gate_that_writes_bytecode_into_its_snapshot_is_told_what_it_wrote(tmp_path: Path,
                                                                           capsys) -> None:
    """`python -I` ignores PYTHONDONTWRITEBYTECODE, so importing a module of the judged tree
    writes __pycache__ into the snapshot (unsandboxed, as root nothing stops the write)."""
    gate = [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, '.'); import helper"]
    _, recs, ledger = run(tmp_path, gate, graph={"sandbox": "none"}, code=3)
    v = verdicts(recs)[0]
    assert v["verdict"] == "error" and v["error"] == "snapshot changed"
    tag = sys.implementation.cache_tag
    assert v["changed"] == ["+ __pycache__/", f"+ __pycache__/helper.{tag}.pyc"]
    capsys.readouterr()
    cli.main(["show", str(ledger)])
    assert f"the gate changed its snapshot: + __pycache__/, + __pycache__/helper.{tag}.pyc" in (
        capsys.readouterr().out)


def test_gate_errors_stop_stops_the_run_and_resume_goes_on(tmp_path: Path, capsys) -> None:
    fixed = tmp_path / "fixed"  # what the gate needs from its environment, missing at first
    gate = ["sh", "-c", f"test -f {fixed} || {{ echo no fixture >&2; exit 2; }}"]
    capsys.readouterr()
    code, recs, ledger = run(tmp_path, gate, graph={"sandbox": "none"}, attempts=3,
                             node={"gate_errors": "stop"})
    err = capsys.readouterr().err
    assert code == 6
    stopped = [r for r in recs if r["type"] == "stopped"]
    assert len(verdicts(recs)) == 1 and verdicts(recs)[0]["error"] == "exit 2"
    assert stopped and stopped[0]["reason"] == ("gate error on node 'a' (activation 0, attempt "
                                                "1: exit 2) and gate_errors = \"stop\"")
    assert "run stopped: gate error on node 'a'" in err and "loopproof resume" in err
    fixed.write_text("")
    assert cli.main(["resume", "--ledger", str(ledger), "--json"]) == 0
    assert [v["verdict"] for v in verdicts(records(ledger))] == ["error", "accept"]


def test_gate_errors_retry_is_the_default_and_fails_the_attempt(tmp_path: Path) -> None:
    gate = ["sh", "-c", "exit 2"]
    _, recs, _ = run(tmp_path, gate, attempts=2, code=3)
    assert [v["error"] for v in verdicts(recs)] == ["exit 2", "exit 2"]
    assert not [r for r in recs if r["type"] == "stopped"]


def test_a_bad_gate_errors_value_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    spec = write_spec(tmp_path, {"a": command_node(["true"], ["true"], spend_ceiling=1.0,
                                                   gate_errors="sometimes")}, spend_budget=1.0)
    capsys.readouterr()
    assert cli.main(["run", str(spec), "--ledger", str(tmp_path / "L.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "gate_errors" in err and "sometimes" in err and err.count("\n") == 1
    assert not (tmp_path / "L.jsonl").exists()
