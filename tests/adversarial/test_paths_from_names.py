"""Family: paths built from names (and from anything else a worker or a ledger controls).

A node's name becomes a folder under <ledger>.work/ and <ledger>.accepted/, and the accepted
snapshot's cleanup deletes that folder's other entries: a node named `../victim` or `/abs/path`
made the engine delete the user's folders outside the run. Names are one safe path component
(letters, digits, `_ - .`, not starting with `.`, at most 64 characters), else exit 2 with
nothing written; every other path is built from checked values; and cleanup deletes only inside
folders the engine created, never through a symlink a worker planted in one of them.
"""

from __future__ import annotations

import json
import os

import pytest

from loopproof.engine.system.trees import tree_digest
from tests.support.oracles import rechain

ACCEPT = "import sys\nsys.exit(0)\n"
REJECT_FIRST = ("import os, sys\nsys.exit(1 if os.path.exists('first') else 0)\n")


def user_folder(base, name="victim"):
    """A folder of the user's with two subfolders of files."""
    victim = base / name
    for sub in ("taxes", "photos"):
        (victim / sub).mkdir(parents=True)
        (victim / sub / "keep.txt").write_text(f"{sub}\n")
    return victim


def intact(victim) -> bool:
    return all((victim / sub / "keep.txt").read_text() == f"{sub}\n"
               for sub in ("taxes", "photos"))


def simple(kit, worker="open('out', 'w').write('x')\n", gate=ACCEPT, extra="", tag="n") -> str:
    return (f"worker = {kit.argv(tag + '_w.py', worker)}\ngate = {kit.argv(tag + '_g.py', gate)}\n"
            f"spend_ceiling = 20.0\n{extra}")


@pytest.mark.parametrize("where", ["next to the run", "absolute"])
def test_a_node_named_after_a_user_folder_is_refused_and_nothing_is_touched(kit, where) -> None:
    victim = user_folder(kit.ledger.parent if where == "next to the run" else kit.tmp / "home")
    name = "../victim" if where == "next to the run" else str(victim)
    r = kit.start(kit.graph({name: simple(kit)}))
    assert r.code == 2 and r.one_line, r.err
    assert "safe node name" in r.err
    assert intact(victim)
    assert kit.leftovers() == (["victim"] if where == "next to the run" else [])


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "a\\\\b", "", "a b", "é", "x" * 65,
                                  "a\\u0000b", "-ok-but-", "a.b_c-1"])
def test_node_names_are_one_safe_component(kit, name) -> None:
    r = kit.start(kit.graph({json.loads(f'"{name}"'): simple(kit)}))
    ok = name in ("-ok-but-", "a.b_c-1")
    assert r.code == (0 if ok else 2), (name, r.err)
    if not ok:
        assert r.one_line and kit.leftovers() == []


def test_a_forged_activation_in_a_verdict_cannot_point_the_hand_off_outside(kit) -> None:
    """The ledger (re-hashed by whoever can write it) names the accepted snapshot by two numbers:
    a string there must not become a path that copies a user's folder into a worker's inputs."""
    victim = user_folder(kit.ledger.parent)
    stop = kit.tmp / "STOP"
    spec = kit.graph({"a": simple(kit, worker=f"open({str(stop)!r}, 'w').close()\n", tag="a"),
                      "b": simple(kit, worker="import shutil; shutil.copytree('inputs/a', "
                                              "'../../stolen')\n", extra='needs = ["a"]\n',
                                  tag="b")})
    assert kit.start(spec, "--stop-file", stop).code == 6  # a DONE, b not begun
    stop.unlink()
    recs = kit.records(kit.ledger)
    for r in recs:
        if r["type"] == "verdict" and r["node"] == "a":
            r["activation"] = "../../victim"  # judged path: <accepted>/a/../../victim-1
            r["accepted_tree"] = tree_digest(victim)
    kit.ledger.write_bytes(rechain(recs))
    os.rename(victim, kit.ledger.parent / "victim-1")  # where the forged path points
    r = kit.resume("--stop-file", stop)
    # refused as it is read: no run writes a verdict whose activation is not an integer, so the
    # ledger is corrupt (exit 5), as a tampered ledger is
    assert r.code == 5 and "field 'activation': is string" in r.err, (r.code, r.err)
    assert not (kit.ledger.parent / "stolen").exists()
    assert not any(rec["type"] == "begin" and rec["node"] == "b"
                   for rec in kit.records(kit.ledger))


def test_an_accepted_folder_swapped_for_a_symlink_does_not_lead_cleanup_outside(kit) -> None:
    victim = user_folder(kit.tmp / "home")
    accepted = f"{kit.ledger}.accepted"
    swap = (f"import os\nos.makedirs({accepted!r}, exist_ok=True)\n"
            f"os.symlink({str(victim)!r}, os.path.join({accepted!r}, 'a'))\n"
            "open('out', 'w').write('x')\n")
    r = kit.start(kit.graph({"a": simple(kit, worker=swap)}))
    assert intact(victim) and sorted(os.listdir(victim)) == ["photos", "taxes"]
    assert r.code == 0, (r.code, r.err)
    assert not os.path.islink(os.path.join(accepted, "a"))


def test_a_workspace_swapped_for_a_symlink_is_replaced_not_followed(kit) -> None:
    victim = user_folder(kit.tmp / "home")
    (victim / "inputs").mkdir()
    (victim / "inputs" / "keep.txt").write_text("inputs\n")
    # attempt 1: move the workspace away and leave a link to the user's folder in its place;
    # attempt 2 must run in a real workspace, and nothing may be deleted or written in the victim
    swap = ("import os, sys\nif os.environ['LOOPPROOF_ATTEMPT'] == '1':\n"
            "    open('first', 'w').close()\n    here = os.getcwd()\n    os.chdir('..')\n"
            f"    os.rename(here, here + '.moved')\n    os.symlink({str(victim)!r}, here)\n"
            "else:\n    open('second', 'w').close()\n")
    spec = kit.graph({"a": simple(kit, worker=swap, gate=REJECT_FIRST, extra="attempts = 2\n",
                                  tag="a"),
                      "b": simple(kit, extra='needs = ["a"]\n', tag="b")})
    r = kit.start(spec)
    assert intact(victim) and (victim / "inputs" / "keep.txt").read_text() == "inputs\n"
    assert sorted(os.listdir(victim)) == ["inputs", "photos", "taxes"]
    assert r.code == 0, (r.code, r.err)
    ws = f"{kit.ledger}.work/a"
    assert not os.path.islink(ws) and os.listdir(ws) == ["second"]
