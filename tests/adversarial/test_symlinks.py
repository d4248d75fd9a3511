"""Family: symlinks and trees (staged = judged = handed off).

A symlink's text is what a tree hash sees, but the link resolves to different files in the
gate's snapshot, the accepted copy and a successor's inputs/, or to files outside the run that
change later or that a successor can write through. The rule (engine/system/trees.py): a judged
tree holds folders and regular files only; a symlink anywhere in a workspace the engine stages
is a recorded `error` verdict, never a PASS. And what the gate saw, what was accepted and what
a successor receives are compared: a successor's edited inputs/ or a gate snapshot that is not
the staged tree is an `error` too.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.gate import CallableGate, GateResult
from loopproof.engine.run.worker import CallableWorker

ACCEPT = "import sys\nsys.exit(0)\n"
GOOD = "open('answer', 'w').write('good')\n"
SAYS_GOOD = "import sys\nsys.exit(0 if open('answer').read().strip() == 'good' else 1)\n"


def node(kit, name: str, worker: str, gate: str, needs: str = "") -> str:
    """A node's TOML body: `worker` and `gate` are Python programs."""
    return (f"worker = {kit.argv(name + '_worker.py', worker)}\n"
            f"gate = {kit.argv(name + '_gate.py', gate)}\nspend_ceiling = 20.0\n"
            + (f"needs = [{json.dumps(needs)}]\n" if needs else ""))


def verdicts(kit, node: str) -> list[dict]:
    return [r for r in kit.records(kit.ledger) if r["type"] == "verdict" and r["node"] == node]


def begun(kit, node: str) -> bool:
    return any(r["type"] == "begin" and r["node"] == node for r in kit.records(kit.ledger))


def refused_as_symlink(kit, node: str) -> bool:
    vs = verdicts(kit, node)
    return bool(vs) and all(v["verdict"] == "error" and "symlink" in v["detail"] for v in vs)


def test_a_link_that_resolves_differently_in_each_copy_is_refused(kit) -> None:
    # From the gate's snapshot ($TMPDIR/loopproof-snapshot-*/workspace/) "../../<tag>/answer"
    # is $TMPDIR/<tag>/answer, which says "good"; from b's inputs/a/ it is b's own folder,
    # where the attacker left "bad". The gate accepts one file, b receives another.
    tag = f"x-{kit.tmp.name}"
    attacker = f"""
import os
tmp = os.environ.get("TMPDIR", "/tmp")
os.makedirs(f"{{tmp}}/{tag}", exist_ok=True)
open(f"{{tmp}}/{tag}/answer", "w").write("good\\n")
os.makedirs("../b/{tag}", exist_ok=True)
open("../b/{tag}/answer", "w").write("bad\\n")
os.symlink("../../{tag}/answer", "answer")
"""
    copier = "import shutil; shutil.copy('inputs/a/answer', 'got')"
    spec = kit.graph({"a": node(kit, "a", attacker, SAYS_GOOD),
                      "b": node(kit, "b", copier, ACCEPT, needs="a")})
    try:
        r = kit.start(spec)
        assert r.code == 3, (r.code, r.err)  # a's only attempt is an error: the run fails
        assert refused_as_symlink(kit, "a") and not begun(kit, "b")
    finally:  # what the attacker left in the shared temporary folder
        shutil.rmtree(Path(tempfile.gettempdir()) / tag, ignore_errors=True)


def test_a_successor_cannot_write_through_a_handed_off_link(kit) -> None:
    outside = kit.tmp / "outside.txt"  # a file of the user's, outside the run
    outside.write_text("good\n")
    linker = f"import os; os.symlink({str(outside)!r}, 'answer')"
    writer = "open('inputs/a/answer', 'w').write('pwned')"
    spec = kit.graph({"a": node(kit, "a", linker, SAYS_GOOD),
                      "b": node(kit, "b", writer, ACCEPT, needs="a")})
    r = kit.start(spec)
    assert outside.read_text() == "good\n"
    assert r.code == 3 and refused_as_symlink(kit, "a") and not begun(kit, "b")


def test_a_successor_cannot_delete_through_a_handed_off_folder_link(kit) -> None:
    victim = kit.tmp / "photos"
    victim.mkdir()
    (victim / "2019.jpg").write_text("memories")
    linker = f"import os; os.symlink({str(victim)!r}, 'data')"
    wiper = ("import os\nfor f in os.listdir('inputs/a/data'):\n"
             "    os.unlink(os.path.join('inputs/a/data', f))\n")
    spec = kit.graph({"a": node(kit, "a", linker, ACCEPT),
                      "b": node(kit, "b", wiper, ACCEPT, needs="a")})
    r = kit.start(spec)
    assert (victim / "2019.jpg").read_text() == "memories"
    assert r.code == 3 and refused_as_symlink(kit, "a")


def test_a_link_planted_in_its_own_inputs_is_refused(kit) -> None:
    swap = ("import os\nos.chmod('inputs/a', 0o755)\nos.unlink('inputs/a/answer')\n"
            "os.symlink('/etc/hostname', 'inputs/a/answer')\n")
    spec = kit.graph({"a": node(kit, "a", GOOD, SAYS_GOOD),
                      "b": node(kit, "b", swap, ACCEPT, needs="a")})
    r = kit.start(spec)
    assert r.code == 3 and refused_as_symlink(kit, "b")


def test_edited_inputs_are_not_judged(kit) -> None:
    # b's gate trusts inputs/a/answer as its reference; b rewrites it to match its own output
    edit = ("import os\nos.chmod('inputs/a', 0o755)\nos.chmod('inputs/a/answer', 0o644)\n"
            "open('inputs/a/answer', 'w').write('forged')\nopen('out', 'w').write('forged')\n")
    same = ("import sys\nsys.exit(0 if open('out').read() == open('inputs/a/answer').read() "
            "else 1)\n")
    spec = kit.graph({"a": node(kit, "a", GOOD, SAYS_GOOD),
                      "b": node(kit, "b", edit, same, needs="a")})
    r = kit.start(spec)
    assert r.code == 3, (r.code, r.err)
    (v,) = verdicts(kit, "b")
    assert v["verdict"] == "error" and "inputs/a changed" in v["detail"]


def test_a_hard_link_is_copied_as_content(kit) -> None:
    """Not refused: a hard link is a regular file, and every copy holds its bytes."""
    outside = kit.tmp / "outside.txt"
    outside.write_text("good")
    linker = f"import os; os.link({str(outside)!r}, 'answer')"
    writer = ("import os\nos.chmod('inputs/a/answer', 0o644)\n"
              "open('inputs/a/answer', 'w').write('pwned')\n")
    spec = kit.graph({"a": node(kit, "a", linker, SAYS_GOOD),
                      "b": node(kit, "b", writer, ACCEPT, needs="a")})
    kit.start(spec)  # b's edit of its inputs is an error verdict (see above) ...
    assert verdicts(kit, "a")[0]["verdict"] == "accept"
    assert outside.read_text() == "good"  # ... and never reached the linked file


class _Elsewhere(CallableGate):
    """A gate that reports judging a tree other than the one staged for it."""

    def judge(self, workspace: Path, confine: object = None) -> GateResult:
        return GateResult("accept", "looked elsewhere", 0.01, "0" * 64)


def _elsewhere_kind(table, spec_dir):
    return CallableWorker(lambda ctx: (ctx.workspace / "out").write_text("x")), _Elsewhere(
        lambda snap: "accept")


spec_mod.register_kind("adv_elsewhere", _elsewhere_kind)


def test_a_gate_snapshot_that_is_not_the_staged_tree_is_never_a_pass(kit) -> None:
    spec = kit.graph({"a": 'kind = "adv_elsewhere"\nspend_ceiling = 20.0\n'})
    r = kit.start(spec)
    assert r.code == 3
    (v,) = verdicts(kit, "a")
    assert v["verdict"] == "error" and "not the staged tree" in v["detail"]
    assert json.dumps(v).count("accepted_tree") == 0
