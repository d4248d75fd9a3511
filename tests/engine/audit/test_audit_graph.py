"""`loopproof audit GRAPH.toml --ledger L`: a graph's own gates audited against the trees they
accepted in a run, and the differential oracle for Python artifacts with no [oracle]: a gate
that checks only `median([3, 1, 2]) == 2` accepts mutants that behave differently from the
correct median, and the audit says so, with the input that tells them apart."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.audit import differential
from loopproof.engine.audit.catalogue import Command, Loop
from loopproof.engine.audit.judge import ACCEPT, ERROR, REJECT
from loopproof.engine.audit.mutants import Mutant
from loopproof.engine.commands import audit as audit_command
from loopproof.engine.system.sandbox import DEFAULT, backend
from tests.support.example_runs import example_run
from tests.support.paths import REPO

EXAMPLES = REPO / "examples"


def audit(capsys, *argv: str) -> tuple[int, dict | str]:
    capsys.readouterr()
    code = cli.main(["audit", *argv])
    out = capsys.readouterr()
    if "--json" in argv and code == 0:
        return code, json.loads(out.out)
    return code, out.out + out.err


@pytest.fixture(scope="module")
def median_run(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("median")
    graph = tmp / "median"
    shutil.copytree(EXAMPLES / "median-command", graph)
    ledger = tmp / "L.jsonl"
    assert cli.main(["run", str(graph / "graph.toml"), "--ledger", str(ledger), "--json"]) == 0
    return graph / "graph.toml", ledger


def test_the_differential_oracle_finds_the_one_case_gates_false_accepts(median_run,
                                                                        capsys) -> None:
    graph, ledger = median_run
    code, r = audit(capsys, str(graph), "--ledger", str(ledger), "--json", "--jobs", "2",
                    "--tier", "2",  # tier 1: test_the_examples_audit_or_say_why_not
                    # six of the default fifteen: each is a comparison in a child (~1 CPU-s),
                    # and six already hold destroying mutants the gate accepts (5 of 6; 11 of 15)
                    "--max-tier2", "6",
                    "--exploits", "none")  # the probes: tests/adversarial/test_exploits.py
    assert code == 0 and r["exploits"] == []
    (g,) = r["gates"]
    assert g["gate"] == "median" and g["status"] == "audited" and g["oracle"] == "differential"
    t2 = g["tiers"]["2"]
    assert t2["mutants"] == 6
    assert t2["destroying"] > 0 and t2["false_accepts"] > 0  # the gate misses what differs
    assert t2["undetermined"] == 0
    assert t2["destroying"] + t2["equivalent"] + t2["undetermined"] == t2["mutants"]
    for label in t2["false_accept_labels"]:
        why = t2["false_accept_why"][label]  # the input on which the mutant is wrong
        assert why.startswith("differs: median([") and "reference returns" in why
    # the inputs that tell them apart are not the one the gate checks
    assert all("median([3, 1, 2])" not in w for w in t2["false_accept_why"].values())
    text = audit_command._table(r)  # the table the command prints without --json
    assert "t2 FA/destr (eq, und)" in text
    assert f"{t2['false_accepts']}/{t2['destroying']} ({t2['equivalent']}, 0)" in text
    assert "false accept (median, tier 2, " in text


def test_without_an_oracle_tier_2_is_undetermined_and_said_so(median_run, capsys) -> None:
    """What the audit said before the differential oracle: nothing about tier 2."""
    graph, ledger = median_run
    code, r = audit(capsys, str(graph), "--ledger", str(ledger), "--json", "--no-differential",
                    "--tier", "2", "--jobs", "2", "--exploits", "none")
    t2 = r["gates"][0]["tiers"]["2"]
    assert code == 0 and r["gates"][0]["oracle"] == "none"
    assert (t2["destroying"], t2["false_accepts"]) == (0, 0)
    assert t2["undetermined"] == t2["mutants"] > 0


def test_the_examples_audit_or_say_why_not(tmp_path_factory, capsys) -> None:
    for name in ("pipeline", "repair", "budget", "regress-restore"):
        # each example's run as tests/examples/ reads it, made once per session (the audit
        # only reads a run: its ledger and accepted trees)
        _, _, folder = example_run(tmp_path_factory, name)
        ledger = folder / f"{name}.jsonl"
        code, r = audit(capsys, str(EXAMPLES / name / "graph.toml"), "--ledger", str(ledger),
                        "--json", "--jobs", "2", "--max-tier2", "3", "--exploits", "none")
        if name in ("pipeline", "repair"):
            assert code == 0 and {g["status"] for g in r["gates"]} == {"audited"}
            assert all(g["oracle"] == "none" for g in r["gates"])  # text and data artifacts
            assert r["summary"]["tiers"]["2"]["undetermined"] > 0
        else:  # nothing was accepted (budget), or no command gate (a revision node)
            assert code == 2 and "nothing to audit" in r and r.count("\n") == 1
            assert ("accepted no tree" in r) if name == "budget" else ("kind 'revision'" in r)


def test_a_graph_and_ledger_that_do_not_go_together_are_refused(median_run, tmp_path: Path,
                                                                capsys) -> None:
    graph, ledger = median_run
    other = tmp_path / "median"
    shutil.copytree(graph.parent, other)
    (other / "graph.toml").write_text((graph).read_text() + "\n# edited\n")
    code, err = audit(capsys, str(other / "graph.toml"), "--ledger", str(ledger))
    assert code == 2 and "is not the graph the run" in err and err.count("\n") == 1
    code, err = audit(capsys, str(graph))
    assert code == 2 and "--ledger" in err
    code, err = audit(capsys, str(EXAMPLES / "catalog"), "--ledger", str(ledger))
    assert code == 2 and "a catalogue holds its own references" in err


def test_a_tampered_accepted_tree_or_gate_is_not_audited(median_run, tmp_path: Path,
                                                         capsys) -> None:
    graph, ledger = median_run
    copy = tmp_path / "copy"
    shutil.copytree(graph.parent, copy / "median")
    shutil.copy(ledger, copy / "L.jsonl")
    shutil.copytree(Path(f"{ledger}.accepted"), copy / "L.jsonl.accepted")
    tree = next((copy / "L.jsonl.accepted" / "median").iterdir())
    (tree / "median.py").chmod(0o644)
    (tree / "median.py").write_text("def median(xs):\n    return 2\n")
    code, err = audit(capsys, str(graph), "--ledger", str(copy / "L.jsonl"))
    assert code == 2 and "not the tree the verdict recorded" in err
    gate = graph.parent / "check_median.py"
    original = gate.read_text()
    try:
        gate.write_text(original + "\n# changed\n")
        code, err = audit(capsys, str(graph), "--ledger", str(ledger))
        assert code == 2 and "changed since the run" in err
    finally:
        gate.write_text(original)


# ---- the differential oracle on its own -----------------------------------------------------

REFERENCE = "def f(x: int) -> int:\n    return x + 1\n"


def _compare(tmp_path: Path, mutant: str, reference: str = REFERENCE, gate: str = "") -> tuple:
    loop = Loop("l", "d", tmp_path, tmp_path, tmp_path, Command(("true",), 5.0, literal=True),
                ("f.py",), None, gate_code=(gate,) if gate else ())
    m = Mutant("l", "op", "semantic", 2, "op:f.py#0", (("f.py", mutant.encode()),), False, "k")
    assert differential.applies(loop, m)
    return differential.compare(loop, {"f.py": reference.encode()}, m,
                                differential.gate_sources(loop), backend(DEFAULT), tmp_path)


def test_a_mutant_that_differs_is_destroying_with_the_input(tmp_path: Path) -> None:
    v = _compare(tmp_path, "def f(x: int) -> int:\n    return x - 1\n")
    assert v.outcome == REJECT and v.detail == ("differs: f(0): reference returns 1, mutant "
                                                "returns -1")


def test_an_equivalent_mutant_is_reported_as_such(tmp_path: Path) -> None:
    v = _compare(tmp_path, "def f(x: int) -> int:\n    return 1 + x\n")
    assert v.outcome == ACCEPT and v.detail.startswith("equivalent: no difference in f: ")
    assert "type hints" in v.detail


def test_a_mutant_that_hangs_differs_and_never_hangs_the_audit(tmp_path: Path, monkeypatch
                                                                ) -> None:
    # short timeouts (the defaults are 1 s a call, 5 s an import): a hang costs its timeout once,
    # since the search stops at the first input the mutant runs out of time on
    monkeypatch.setattr(differential, "CALL_TIMEOUT_S", 0.25)
    monkeypatch.setattr(differential, "IMPORT_TIMEOUT_S", 0.5)
    v = _compare(tmp_path, "def f(x: int) -> int:\n    while True:\n        pass\n")
    assert v.outcome == REJECT and "mutant runs out of time" in v.detail
    v = _compare(tmp_path, "while True:\n    pass\n")  # at import
    assert v.outcome == REJECT and "runs out of time on import" in v.detail


def test_no_input_in_the_reference_s_domain_is_undetermined(tmp_path: Path) -> None:
    ref = "def f(x):\n    raise ValueError('never')\n"
    v = _compare(tmp_path, "def f(x):\n    return 0\n", reference=ref)
    assert v.outcome == ERROR and v.detail.startswith("undetermined:")


def test_only_python_rewrites_go_to_the_differential_oracle(tmp_path: Path) -> None:
    loop = Loop("l", "d", tmp_path, tmp_path, tmp_path, Command(("true",), 5.0), ("f.py",), None)
    deleted = Mutant("l", "delete", "absence", 1, "x", (("f.py", None),), True, "k")
    text = Mutant("l", "op", "content", 2, "x", (("notes.md", b"x"),), False, "k")
    assert not differential.applies(loop, deleted) and not differential.applies(loop, text)
    declared = Loop("l", "d", tmp_path, tmp_path, tmp_path, Command(("true",), 5.0), ("f.py",),
                    Command(("true",), 5.0))
    python = Mutant("l", "op", "semantic", 2, "x", (("f.py", b"x = 1\n"),), False, "k")
    assert differential.applies(loop, python) and not differential.applies(declared, python)


def test_one_child_judges_a_loop_s_mutants_each_as_a_fresh_process_would(tmp_path: Path,
                                                                         monkeypatch) -> None:
    """A batch (one child for several mutants of a loop) gives each mutant the verdict a child
    of its own gives: what one comparison's code does to its process (here a name set in
    builtins at import) is not seen by the next, and a comparison that runs past its time
    (here asleep at import, deaf to the import's alarm, at a time limit of 8 s: ample for the
    others' searches on a busy machine) is cut alone, the rest still judged."""
    monkeypatch.setattr(differential, "TIMEOUT_S", 8.0)
    ref = "def f(x: int) -> int:\n    return x + 1\n"
    leaks = "import builtins\nbuiltins.LEAKED = 5\n\n\n" + ref
    sees = "import builtins\n\n\ndef f(x: int) -> int:\n    return x + 1 + getattr(builtins, 'LEAKED', 0)\n"
    sleeps = ("import signal\nimport time\nsignal.pthread_sigmask(signal.SIG_BLOCK, "
              "{signal.SIGALRM})\ntime.sleep(600)\n\n\n" + ref)
    loop = Loop("l", "d", tmp_path, tmp_path, tmp_path, Command(("true",), 5.0, literal=True),
                ("f.py",), None)
    mutants = [Mutant("l", "op", "semantic", 2, f"op:f.py#{i}", (("f.py", text.encode()),),
                      False, f"k{i}") for i, text in enumerate((leaks, sees, sleeps, sees))]
    v = differential.compare_many(loop, {"f.py": ref.encode()}, mutants,
                                  differential.gate_sources(loop), backend(DEFAULT), tmp_path)
    assert [r.outcome for r in v] == [ACCEPT, ACCEPT, ERROR, ACCEPT], v
    assert v[2].detail == "undetermined: the comparison ran past 8 s"
