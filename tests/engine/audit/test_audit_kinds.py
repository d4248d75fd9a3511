"""`loopproof audit GRAPH.toml --ledger L` measures every gate kind (issue 35): a `command`, a
`calls`, a `program` and a `pytest` gate of one graph are each audited with mutants through the
node's own gate, on the tree it accepted; each is in `gates` with its kind and none is skipped.
Mutants go only into the files the gate's run opened (a module no gate reads, a README, get
none); the probes' control counts as vacuity in the summary, and the text report names the fix;
`--max-seconds` ends the audit with what it has and says so; progress goes to stderr.

Planted faults, each seen failing: this file run against main before the change (the judge kinds
were `skipped`: "its gate is a PytestGate, not a command: exploit probes only, no mutants"; the
`--no-mutants` summary said `vacuous: 0` for a gate that accepts the control); the loaded-files
filter switched off (`unused.py` got mutants); `Deadline.settle` returning the reply as it is
(a run cut at the deadline counted as the gate's error).
"""

from __future__ import annotations

import io
import json
import sys
import threading
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.audit import progress as progress_mod
from loopproof.engine.audit.judge import ERROR, NOT_RUN, Deadline, GateReply
from loopproof.engine.audit.loaded import Opened, _source_of, loaded_files, reported, watching
from loopproof.engine.commands import audit as audit_command
from loopproof.engine.system.process import gate_environment, run_command
from loopproof.engine.system.sandbox import UNSANDBOXED, Confinement
from tests.support.built_once import built_once

PY = sys.executable
SOLUTION = '''"""The judged code: clip a number into [lo, hi]."""


def clip(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(clip(*json.load(sys.stdin))))
'''
WORKER = f'''from pathlib import Path
Path("sol.py").write_text({SOLUTION!r})
Path("unused.py").write_text("def helper(x):\\n    return x * 2\\n")
Path("README.md").write_text("# clip\\n\\nClips a number.\\n")
'''
CASES = [([5, 0, 10], 5), ([-3, 0, 10], 0), ([12, 0, 10], 10), ([7, 7, 9], 7)]
CHECK = '''import sys
sys.path.insert(0, ".")
from sol import clip
sys.exit(0 if clip(5, 0, 10) == 5 and clip(-3, 0, 10) == 0 and clip(12, 0, 10) == 10 else 1)
'''
TESTS = '''from sol import clip


def test_inside():
    assert clip(5, 0, 10) == 5


def test_below():
    assert clip(-3, 0, 10) == 0


def test_above():
    assert clip(12, 0, 10) == 10
'''
VACUOUS_TESTS = '''import json


def test_nothing_of_the_tree():
    assert json.loads("[1]") == [1]
'''
KINDS = ("command", "calls", "program", "pytest")


def _graph(folder: Path, tests: str = TESTS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "write.py").write_text(WORKER)
    (folder / "check.py").write_text(CHECK)
    (folder / "cases.jsonl").write_text("".join(
        json.dumps({"args": a, "expect": e}) + "\n" for a, e in CASES))
    (folder / "io.jsonl").write_text("".join(
        json.dumps({"input": a, "output": e}) + "\n" for a, e in CASES))
    (folder / "tests").mkdir(exist_ok=True)
    (folder / "tests" / "test_sol.py").write_text(tests)
    node = f'worker = ["{PY}", "write.py"]\nspend_ceiling = 10.0\ngate_timeout_s = 60\n'
    (folder / "graph.toml").write_text(
        f"[graph]\nspend_budget = 100.0\n\n"
        f'[node.command]\n{node}gate = ["{PY}", "-I", "check.py"]\n\n'
        f'[node.calls]\n{node}[node.calls.gate]\nkind = "calls"\nmodule = "sol"\n'
        f'function = "clip"\ncases = "cases.jsonl"\npython = "{PY}"\n\n'
        f'[node.program]\n{node}[node.program.gate]\nkind = "program"\n'
        f'run = ["{PY}", "sol.py"]\ncases = "io.jsonl"\n\n'
        f'[node.pytest]\n{node}[node.pytest.gate]\nkind = "pytest"\ntests = ["tests"]\n'
        f'python = "{PY}"\n')
    return folder / "graph.toml"


def _run(graph: Path) -> Path:
    ledger = graph.parent / "L.jsonl"
    assert cli.main(["run", str(graph), "--ledger", str(ledger), "--json"]) == 0
    return ledger


def _audit(capsys, *argv: str) -> tuple[int, dict | str, str]:
    capsys.readouterr()
    code = cli.main(["audit", *argv])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if "--json" in argv and code == 0 else out.out), out.err


def _every_kind_run(folder: Path) -> None:
    with redirect_stdout(io.StringIO()):  # the run's own JSON: not what is tested here
        _run(_graph(folder / "g"))


@pytest.fixture
def every_kind(tmp_path_factory) -> tuple[Path, Path]:
    """The four-kind graph and its run, made once per session (tests/support/built_once.py):
    read only, by the audits below."""
    folder = built_once(tmp_path_factory, "audit-kinds-run", _every_kind_run)
    return folder / "g" / "graph.toml", folder / "g" / "L.jsonl"


# Every phase of a graph's audit reports its progress (issue 35 item 3): here, beside the graphs it audits,
# because no test file imports another.
PHASES = ("loaded files", "reference", "drawing mutants (loops x tiers)", "gate: absence",
          "differential", "gate", "exploits: reference", "exploits")


class Recorder:
    """A progress sink that keeps, per phase, its total and how many ticks it got, and hands
    each tick on to `forward` (the lines on stderr)."""

    def __init__(self, forward: progress_mod.Progress) -> None:
        self.phases: list[list] = []
        self.forward = forward
        self.lock = threading.Lock()  # ticks come from the judge's threads

    def __call__(self, phase: str, total: int) -> Callable[[], None]:
        row = [phase, total, 0]
        self.phases.append(row)
        passed = self.forward(phase, total)

        def tick() -> None:
            with self.lock:
                row[2] += 1
            passed()

        return tick


def _audit_every_kind(graph: Path, ledger: Path, folder: Path) -> None:
    err = io.StringIO()
    seen = Recorder(progress_mod.Lines(err, every_s=0.0, quiet_s=0.0))
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(out):
        patch.setattr(progress_mod, "on_stderr", lambda stack: seen)
        patch.setattr("loopproof.engine.commands.audit.on_stderr", lambda stack: seen)
        code = cli.main(["audit", str(graph), "--ledger", str(ledger), "--json", "--jobs", "2",
                         "--max-tier2", "2", "--exploits", "exit-early/os-exit-at-import"])
    assert code == 0, err.getvalue()
    (folder / "report.json").write_text(out.getvalue())
    (folder / "stderr.txt").write_text(err.getvalue())
    (folder / "phases.json").write_text(json.dumps(seen.phases))


@pytest.fixture
def audited(every_kind, tmp_path_factory) -> tuple[dict, str, list[list]]:
    """One audit of the four-kind graph, made once per session and read by the tests below:
    its JSON report, its stderr (a progress line at every tick: no quiet start, no interval, so
    what is printed does not depend on how fast the machine is) and each phase's [name, total,
    ticks], recorded on the way to those lines."""
    folder = built_once(tmp_path_factory, "audit-kinds-audit",
                        lambda folder: _audit_every_kind(*every_kind, folder))
    return (json.loads((folder / "report.json").read_text()),
            (folder / "stderr.txt").read_text(), json.loads((folder / "phases.json").read_text()))


def test_every_gate_kind_is_audited_with_mutants(audited) -> None:
    r, err, _ = audited
    assert "skipped" not in r
    by = {g["gate"]: g for g in r["gates"]}
    assert sorted(by) == sorted(KINDS)
    for kind in KINDS:
        g = by[kind]
        assert g["kind"] == kind and g["status"] == "audited", g
        # the gate read sol.py (its code) and nothing else of the tree: only sol.py is mutated
        assert g["artifact"]["files"] == ["sol.py"] and g["artifact"]["tree"] == 3, g
        assert g["artifact"]["mutated"] == 1, g
        t1, t2 = g["tiers"]["1"], g["tiers"]["2"]
        assert t1["mutants"] >= 5 and t1["destroying"] >= 5 and t1["errors"] < t1["destroying"]
        assert t2["mutants"] == 2 and g["oracle"] == "differential"  # --max-tier2 2
        assert g["vacuous"] is False  # each of them rejects sol.py deleted, emptied, stubbed
        labels = t1["false_accept_labels"] + t2["false_accept_labels"]
        assert not any("unused.py" in x or "README" in x for x in labels)
    # the probe ran through every kind's gate: `os._exit(0)` at import ends the command gate's
    # check.py with 0 (it is accepted), and no judge kind takes it
    assert sorted(e["node"] for e in r["exploits"]) == sorted(KINDS)
    assert [e["node"] for e in r["exploits"] if e["accepted"]] == ["command"], r["exploits"]
    # progress on stderr: phase, done/total, rate
    assert "audit: gate: absence " in err and "/s" in err


def test_the_probes_control_counts_as_vacuity_and_the_fix_is_named(tmp_path, capsys) -> None:
    """A command gate that only imports the judged module accepts the wrong tree with no
    payload: with --no-mutants only the probes can say so, and the summary counts it. (A
    `pytest` suite that never imports the tree is no longer accepted at all: the judge kind's
    vacuity by construction makes it an error.)"""
    graph = _graph(tmp_path / "g")
    graph.write_text(f'[graph]\nspend_budget = 100.0\n\n[node.command]\n'
                     f'worker = ["{PY}", "write.py"]\nspend_ceiling = 10.0\n'
                     f'gate = ["{PY}", "-I", "-c", "import sys; sys.path.insert(0, \'.\'); '
                     f'import sol"]\n')
    ledger = _run(graph)
    code, r, _ = _audit(capsys, str(graph), "--ledger", str(ledger), "--json", "--no-mutants",
                        "--exploits", "exit-early")
    assert code == 0 and r["gates"] == [] and r["summary"]["vacuous"] == 1
    assert r["vacuous_nodes"]["command"].startswith("exit 0")
    code, text, _ = _audit(capsys, str(graph), "--ledger", str(ledger), "--jobs", "2",
                           "--tier", "1", "--exploits", "exit-early")
    assert code == 0
    line = next(x for x in text.splitlines() if x.startswith("vacuous (command): "))
    assert "exploit-control" in line and "judge kind" in line  # the fix for its kind
    assert "1 vacuous" in text


def test_max_seconds_ends_the_audit_and_says_so(every_kind, capsys) -> None:
    graph, ledger = every_kind
    code, r, _ = _audit(capsys, str(graph), "--ledger", str(ledger), "--json",
                        "--max-seconds", "0.001", "--exploits", "exit-early")
    assert code == 0
    stopped = r["summary"]["stopped"]
    assert stopped["why"] == "--max-seconds 0.001 ran out" and stopped["loops_not_run"] == 4
    assert {g["status"] for g in r["gates"]} == {"not run"}
    assert all(g["vacuous"] is None for g in r["gates"])  # never "not vacuous"
    assert r["summary"]["vacuous"] == 0 and r["summary"]["neither"] == 0
    # the text the command prints without --json is `_table` of this same report (a second
    # audit would only repeat the first; the text path itself: test_the_probes_control_...)
    assert "stopped: --max-seconds 0.001 ran out: 4 gates" in audit_command._table(r)
    code, text, err = _audit(capsys, str(graph), "--ledger", str(ledger), "--max-seconds", "0")
    assert code == 2 and "--max-seconds" in err and err.count("\n") == 1


def test_a_run_cut_at_the_deadline_is_not_the_gates_error() -> None:
    gone = Deadline(at=0.0, why="--max-seconds 1 ran out")
    assert gone.passed() and gone.cut(30.0) == 0.0
    assert gone.settle(GateReply(ERROR, "killed: timeout", 1.0)).outcome == NOT_RUN
    assert gone.settle(GateReply("reject", "exit 1", 1.0)).outcome == "reject"
    never = Deadline()
    assert not never.passed() and never.cut(30.0) == 30.0
    assert never.settle(GateReply(ERROR, "exit 2", 1.0)).outcome == ERROR


def test_the_kernel_reports_what_was_opened_and_nothing_else(tmp_path) -> None:
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / "pkg" / name).write_text("x = 1\n")
    (tmp_path / "pkg" / "__pycache__" / "c.cpython-311.pyc").write_bytes(b"")
    seen = Opened()
    with watching(tmp_path, seen):
        (tmp_path / "pkg" / "a.py").read_text()
        (tmp_path / "pkg" / "__pycache__" / "c.cpython-311.pyc").read_bytes()
        (tmp_path / "pkg" / "b.py").stat()  # a stat is not a read
    assert seen.files == {"pkg/a.py", "pkg/c.py"} and seen.lost == ""
    assert _source_of("pkg/__pycache__/m.cpython-311.opt-1.pyc") == "pkg/m.py"
    assert _source_of("__pycache__/m.cpython-311.pyc") == "m.py"


def test_progress_lines_say_done_total_rate_and_time_left() -> None:
    now = [0.0]
    out: list[str] = []

    class Sink:
        def write(self, s: str) -> None:
            out.append(s)

        def flush(self) -> None:
            pass

    lines = progress_mod.Lines(Sink(), every_s=5.0, quiet_s=3.0, clock=lambda: now[0])  # type: ignore[arg-type]  # a stand-in for a text stream
    tick = lines("gate", 10)
    now[0] = 1.0
    tick()  # within the quiet start: nothing
    assert out == []
    now[0] = 4.0
    tick()
    assert out[0] == "audit: gate 2/10 (0.5/s, about 16 s left; 4 s so far)"
    now[0] = 5.0
    tick()  # less than every_s since the last line
    assert len([o for o in out if o.strip()]) == 1
    for _ in range(7):
        now[0] += 1.0
        tick()
    assert [o for o in out if o.strip()][-1] == "audit: gate 10/10 (0.8/s; 12 s so far)"


def test_what_a_harness_reports_loaded_may_only_add_to_what_the_kernel_saw(tmp_path) -> None:
    """The kernel's opens in the run's folder are what the judged code cannot take back; a
    judge kind's harness report (`loaded` in the verdict's facts, said from inside the judged
    process) is added to them, never subtracted; the gate's own laid files are left out."""
    for name in ("a.py", "b.py", "c.py", "test_x.py"):
        (tmp_path / name).write_text("x = 1\n")

    def judge(tree: Path, box: Confinement) -> tuple[str, dict]:
        run_command([PY, "-I", "-c", "open('b.py').read(); open('test_x.py').read()"], tree,
                    30, env=gate_environment(), confine=box)
        return "accept", {"loaded": ["a.py"]}

    found = loaded_files(judge, UNSANDBOXED, tmp_path, ["a.py", "b.py", "c.py", "test_x.py"],
                         ["test_x.py"])
    assert found.files == {"a.py", "b.py"} and found.verdict == "accept"
    assert reported({"loaded": "a.py"}) == set() and reported({}) == set()
    none = loaded_files(lambda tree, box: ("accept", {}), UNSANDBOXED, tmp_path, ["a.py"])
    assert none.files is None and "every file" in none.how


def test_every_phase_reports_and_reaches_its_total(audited) -> None:
    _, err, phases = audited
    names = [p for p, _, _ in phases]
    assert [p for p in PHASES if p not in names] == [], names
    for phase, total, ticks in phases:
        assert ticks == total, (phase, total, ticks)
        if total:  # its last line says it reached its total
            assert f"audit: {phase} {total}/{total} (" in err, (phase, total)
    drawn = next(row for row in phases if row[0].startswith("drawing mutants"))
    assert drawn[1] == len(KINDS) * 2  # a gate of each kind, tiers 1 and 2
