"""`loopproof show`: a run as a timeline, in text and JSON. Each kind of end an attempt can have
(accept, reject, a timeout kill, a ceiling kill, an overrun, a pin change, a crash inside it) is
named in words; a killed run says "unfinished: attempt open", and so does `loopproof verify`."""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path

from loopproof.engine import cli
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load
from loopproof.engine.run.worker import CallableWorker
from tests.support.engine_child import engine_run

# `b` fails in activation 0 (its gate says why on stdout), is exhausted, and repairs `a`.
REPAIR = """
[graph]
repair_budget = 1
spend_budget = 100.0

[node.a]
worker = ["sh", "-c", "echo $LOOPPROOF_ACTIVATION > v; echo wrote v"]
gate = ["sh", "-c", "test -f v"]
attempts = 2
spend_ceiling = 5.0
timeout_s = 5

[node.b]
worker = ["sh", "-c", "cat inputs/a/v > got"]
gate = ["sh", "-c", "test \\"$(cat got)\\" = 1 || {{ echo 'want 1, got' $(cat got); exit 1; }}"]
needs = ["a"]
repairs = ["a"]
attempts = 2
spend_ceiling = 5.0
timeout_s = 5
{extra}
"""


def show(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(["show", *argv])
    return code, capsys.readouterr().out


def run_graph(tmp_path: Path, text: str) -> Path:
    spec = tmp_path / "graph.toml"
    spec.write_text(text)
    ledger = tmp_path / "L.jsonl"
    cli.main(["run", str(spec), "--ledger", str(ledger), "--json"])
    return ledger


def test_a_repaired_run_reads_as_a_timeline(tmp_path: Path, capsys) -> None:
    ledger = run_graph(tmp_path, REPAIR.format(extra=""))
    code, out = show(capsys, str(ledger), "--json")
    assert code == 0
    t = json.loads(out)
    assert [(a["node"], a["activation"], a["attempt"], a["outcome"]) for a in t["attempts"]] == [
        ("a", 0, 1, "accept"), ("b", 0, 1, "reject"), ("b", 0, 2, "reject"),
        ("a", 1, 1, "accept"), ("b", 1, 1, "accept")]
    assert [e["type"] for e in t["events"]] == ["repair", "finish"]
    assert t["outcome"] == "DONE" and t["unfinished"] is None and t["status"] == "verified"
    b = load(tmp_path / "graph.toml").bounds()
    assert t["bounds"] == {"W": b["W"], "W_c": b["W_c"], "B": 100.0, "fits": True}
    assert (b["W"], b["W_c"]) == (8, 40.0)
    for a in t["attempts"]:  # every number is the model's, and each attempt stays under c_v
        assert 0 < a["spend"] <= a["spend_ceiling"]
        assert a["settled_after"] == round(a["settled_before"] + a["spend"], 6)
    assert t["curve"][-1]["settled"] == t["summary"]["spend"]["settled"]

    code, text = show(capsys, str(ledger))
    assert code == 0
    assert "b  activation 0, attempt 1: REJECT" in text
    assert "| want 1, got 0" in text  # the gate's own words, under its verdict
    assert "repair: b exhausted its attempts; repairs a" in text
    assert "stdout (8 bytes): wrote v" in text
    assert "W = 8 attempts, W_c = 40 spend units" in text and "W: the most attempts" in text
    assert text.rstrip().endswith("outcome: DONE after 5 attempt(s) of W = 8, 1 repair(s) of "
                                  "K = 1, spend " + f"{round(t['summary']['spend']['settled'], 3):g}"
                                  + " of B = 100")


def test_a_failed_run_says_which_node_failed_and_why(tmp_path: Path, capsys) -> None:
    ledger = run_graph(tmp_path, REPAIR.format(extra="").replace("repair_budget = 1",
                                                                 "repair_budget = 0"))
    code, text = show(capsys, str(ledger))
    assert code == 0
    assert "outcome: FAILED after 3 attempt(s)" in text
    assert ("why: b failed every attempt of activation 0 (reject, reject) and the global repair "
            "budget K is spent") in text


def test_kill_reasons_timeout_ceiling_and_overrun_are_named(tmp_path: Path, capsys) -> None:
    # `slow` sleeps past its timeout; `greedy`'s ceiling is below its timeout, so the meter kills
    # it at c_v and nothing is left for its gate (an overrun of the evaluation).
    ledger = run_graph(tmp_path, """
[graph]
spend_budget = 100.0
[node.slow]
worker = ["sleep", "30"]
gate = ["true"]
spend_ceiling = 10.0
timeout_s = 0.3
[node.greedy]
worker = ["sleep", "30"]
gate = ["true"]
spend_ceiling = 0.3
timeout_s = 20
""")
    code, out = show(capsys, str(ledger), "--json")
    t = json.loads(out)
    slow = t["attempts"][0]
    assert slow["killed"] == "timeout" and slow["worker_end"].startswith("killed: timeout after")
    assert slow["outcome"] == "accept"  # the gate judges what the killed worker left
    text = show(capsys, str(ledger))[1]
    assert "worker: killed: timeout after" in text
    assert t["outcome"] == "FAILED" and len(t["attempts"]) == 2
    greedy = t["attempts"][1]
    assert greedy["killed"] == "ceiling" and greedy["outcome"] == "overrun"
    assert greedy["overrun"]["what"] == "evaluation" and greedy["overrun"]["bound"] == "c_v"
    assert "worker: killed: spend ceiling reached" in text
    assert ("gate: not run: nothing left of c_v = 0.3 for the gate run after the worker spent "
            "0.3 (eval_reserve holds part of c_v back for it)") in text


def test_a_pin_change_inside_an_attempt_is_named(tmp_path: Path, capsys) -> None:
    gate_file = tmp_path / "check.sh"
    gate_file.write_text("exit 0\n")
    spec_path = tmp_path / "graph.toml"
    spec_path.write_text('[graph]\nspend_budget = 10.0\n[node.a]\nworker = ["true"]\n'
                         'gate = ["sh", "check.sh"]\nspend_ceiling = 2.0\n')
    spec = load(spec_path)

    def tamper(ctx):  # a worker that edits the gate it will be judged by
        gate_file.write_text("exit 0 # edited\n")

    nodes = dict(spec.nodes, a=dataclasses.replace(spec.nodes["a"],
                                                   worker=CallableWorker(tamper)))
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(dataclasses.replace(spec, nodes=nodes), ledger)
    assert runner.run() == 5
    runner.close()
    code, out = show(capsys, str(ledger), "--json")
    a = json.loads(out)["attempts"][0]
    assert a["outcome"] == "error" and a["gate"]["detail"].startswith("not judged:")
    assert any(n.startswith(f"pin change: {gate_file.resolve()}") for n in a["notes"])
    text = show(capsys, str(ledger))[1]
    assert "note: pin change:" in text
    assert "unfinished: stopped, a pinned file changed" in text


def test_a_run_killed_inside_an_attempt_is_unfinished_in_show_and_verify(tmp_path: Path,
                                                                          capsys) -> None:
    spec = tmp_path / "graph.toml"
    spec.write_text(REPAIR.format(extra=""))
    ledger = tmp_path / "L.jsonl"
    # the runner in a process of its own (forked warm: tests/support/engine_child.py), SIGKILLed
    # at its crash site
    child = engine_run(["run", str(spec), str(ledger)], crash_at="meter.before_settle:3")
    assert child.returncode == -signal.SIGKILL, child.stderr
    code, text = show(capsys, str(ledger))
    assert code == 0
    assert "b  activation 0, attempt 1: OPEN" in text
    assert "outcome: unfinished: attempt open (b, activation 0, attempt 1 since record" in text

    capsys.readouterr()
    assert cli.main(["verify", str(ledger)]) == 0
    line = capsys.readouterr().out
    assert line.startswith(f"{ledger}: verified") and "unfinished: attempt open (b," in line
    assert cli.main(["verify", str(ledger), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    assert run["outcome"] == "RUNNING" and run["unfinished"].startswith("unfinished: attempt open")

    # resumed to its end: nothing is open any more
    assert cli.main(["resume", "--ledger", str(ledger), "--json"]) == 0
    capsys.readouterr()
    assert cli.main(["verify", str(ledger), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"] == {"outcome": "DONE", "unfinished": None,
                                                          "error": None}
    t = json.loads(show(capsys, str(ledger), "--json")[1])
    assert [a["outcome"] for a in t["attempts"]][:3] == ["accept", "abandoned", "reject"]
    assert [e["type"] for e in t["events"]][0] == "resumed"


def test_a_broken_ledger_shows_its_verified_prefix_and_exits_5(tmp_path: Path, capsys) -> None:
    ledger = run_graph(tmp_path, REPAIR.format(extra=""))
    lines = ledger.read_bytes().split(b"\n")
    lines[9] = lines[9].replace(b'"node":"b"', b'"node":"a"')
    ledger.write_bytes(b"\n".join(lines))
    before = ledger.read_bytes()
    code, text = show(capsys, str(ledger))
    assert code == 5
    assert text.startswith(f"{ledger}: broken, 9 records") and "line 10" in text
    assert ledger.read_bytes() == before  # show reads only


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert cli.main(["show", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err
    from loopproof.engine.record.ledger import Ledger
    guard = tmp_path / "guard.jsonl"
    Ledger.create(guard, {"type": "guard"}).close()
    assert cli.main(["show", str(guard)]) == 2
    err = capsys.readouterr().err
    assert "is not the start of a loopproof run" in err and err.count("\n") == 1
    ledger = run_graph(tmp_path, REPAIR.format(extra=""))
    assert cli.main(["show", str(ledger), "--html", str(tmp_path)]) == 2
    assert "--html" in capsys.readouterr().err
