"""Family: the ledger in the worker's reach.

Without a sandbox a worker can find the ledger (its workspace is <ledger>.work/<node>/) and do
to the file whatever its user may. The engine owns the file it writes: before every append and
at the end it checks that the path still names the file it wrote (device and inode) and that
the head on disk is the head it wrote; otherwise it records nothing more, never reports DONE,
signs nothing and exits 5. `resume` of a signed run checks the signature first and refuses
(exit 5) a ledger that does not extend the signed head. The attackers below are workers (and,
for resume, whoever can write the file between runs), written as an attacker would write them:
no engine imports, their own canonical JSON and hashes.
"""

from __future__ import annotations

import json
from pathlib import Path

from loopproof.engine.record.committed import mark_path
from loopproof.engine.record.signing import generate_keypair, sidecar_path

# The forger: re-chains a list of records exactly like the engine does (seq, prev, hash).
FORGE = r'''
import hashlib, json, os, sys

def canon(r):
    return json.dumps(r, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

def chain(recs):
    prev, out = "", []
    for seq, r in enumerate(recs):
        r = {k: v for k, v in r.items() if k != "hash"}
        r["seq"], r["prev"] = seq, prev
        r["hash"] = hashlib.sha256(canon(r)).hexdigest()
        prev = r["hash"]
        out.append(canon(r) + b"\n")
    return b"".join(out)

def load(path):
    return [json.loads(line) for line in open(path, "rb").read().splitlines()]

DONE = [{"type": "verdict", "node": "a", "passed": True, "verdict": "accept", "detail": "ok",
         "seconds": 0.1, "snapshot": "0" * 64, "accepted_tree": "0" * 64, "activation": 0,
         "attempt": 1},
        {"type": "finish", "settled": 0.0}]
'''

POLICY = """
[policy]
goals = ["every node DONE with a PASS verdict"]
scope = ["."]
[gate]
files = ["{gate}"]
[budget]
spend = 100.0
repairs = 0
[signing]
private_key = "{priv}"
public_key = "{pub}"
"""

REJECT = "import sys\nsys.exit(1)\n"
ACCEPT = "import sys\nsys.exit(0)\n"


def signed_graph(kit, worker_body: str, gate_body: str) -> tuple[Path, Path]:
    """A one-node graph under a policy with a signing key (kept outside the run's folders)."""
    keys = kit.tmp / "keys"
    keys.mkdir()
    priv, pub = keys / "run.key", keys / "run.pub"
    generate_keypair(priv, pub)
    gate = kit.script("gate.py", gate_body)
    (kit.tmp / "policy.toml").write_text(POLICY.format(gate=gate, priv=priv, pub=pub))
    spec = kit.graph({"a": f"worker = {kit.argv('worker.py', worker_body, kit.ledger)}\n"
                           f"gate = {json.dumps([kit.PY, gate])}\nspend_ceiling = 20.0\n"
                           "timeout_s = 20\n"},
                     extra='policy = "policy.toml"\n')
    return spec, pub


def signed_head(kit) -> dict:
    return json.loads(sidecar_path(kit.ledger).read_text())


def test_a_forged_chain_swapped_in_by_os_replace_is_never_signed(kit) -> None:
    forger = FORGE + ("led = sys.argv[1]\nopen(led + '.new', 'wb').write(chain(load(led) + DONE))\n"
                      "os.replace(led + '.new', led)\n")
    spec, pub = signed_graph(kit, forger, REJECT)
    r = kit.start(spec)
    assert r.code == 5, r.err
    assert r.report["outcome"] != "DONE" and r.report["error"]
    on_disk = kit.records(kit.ledger)
    assert on_disk[-1]["type"] == "finish"  # the forgery is what the path names now
    assert signed_head(kit)["head"] != on_disk[-1]["hash"]  # ... and it was never signed
    check = kit.run("verify", kit.ledger, "--public-key", pub, "--json")
    assert check.code == 5 and json.loads(check.out)["status"] == "broken"


def test_a_deleted_ledger_never_ends_done(kit) -> None:
    spec = kit.graph({"a": f"worker = {kit.argv('w.py', 'import os, sys; os.unlink(sys.argv[1])', kit.ledger)}\n"
                           f"gate = {kit.argv('g.py', ACCEPT)}\nspend_ceiling = 20.0\n"})
    r = kit.start(spec)
    assert not kit.ledger.exists()
    assert r.code == 5, (r.code, r.err)
    assert r.report["outcome"] != "DONE"
    assert "ledger" in r.err and "Traceback" not in r.err


def test_a_forged_record_appended_to_the_same_file_stops_the_run(kit) -> None:
    # a valid chain extension written into the engine's own file (same inode)
    appender = FORGE + ("led = sys.argv[1]\nrecs = load(led)\n"
                        "tail = chain(recs + DONE[:1]).splitlines(keepends=True)[-1]\n"
                        "open(led, 'ab').write(tail)\n")
    spec = kit.graph({"a": f"worker = {kit.argv('w.py', appender, kit.ledger)}\n"
                           f"gate = {kit.argv('g.py', REJECT)}\nspend_ceiling = 20.0\n"})
    r = kit.start(spec)
    assert r.code == 5, (r.code, r.err)
    assert r.report["outcome"] not in ("DONE", "FAILED")
    forged = kit.records(kit.ledger)[-1]
    assert forged["type"] == "verdict" and forged["passed"] is True  # nothing after the forgery
    # the file is the attacker's chain, whose hashes hold; `verify` refuses it all the same (exit 5,
    # corrupt): no run writes a verdict with a reservation outstanding, the model refuses it ...
    checked = kit.run("verify", kit.ledger)
    assert checked.code == 5 and "verified" in checked.out and "outstanding" in checked.out
    assert kit.resume().code == 5  # ... and resume: it does not end in the head written


def test_a_truncated_ledger_stops_the_run(kit) -> None:
    cutter = ("import os, sys\nled = sys.argv[1]\nfirst = open(led, 'rb').readline()\n"
              "os.truncate(led, len(first))\n")
    spec = kit.graph({"a": f"worker = {kit.argv('w.py', cutter, kit.ledger)}\n"
                           f"gate = {kit.argv('g.py', ACCEPT)}\nspend_ceiling = 20.0\n"})
    r = kit.start(spec)
    assert r.code == 5 and r.report["outcome"] != "DONE"
    assert len(kit.records(kit.ledger)) == 1  # nothing appended after the cut


def test_an_edit_in_place_that_keeps_size_and_last_line_is_caught_at_the_end(kit) -> None:
    # same inode, same size, same last line: only a full check at the end can see it
    editor = ("import sys\nled = sys.argv[1]\ndata = bytearray(open(led, 'rb').read())\n"
              "i = data.index(b'spend_budget\":100.0')\n"
              "data[i + 14] = ord('9')\n"
              "open(led, 'r+b').write(bytes(data))\n")
    spec = kit.graph({"a": f"worker = {kit.argv('w.py', editor, kit.ledger)}\n"
                           f"gate = {kit.argv('g.py', ACCEPT)}\nspend_ceiling = 20.0\n"})
    r = kit.start(spec)
    assert r.code == 5, (r.code, r.err)
    assert r.report["outcome"] != "DONE"


def test_an_in_place_rechain_of_the_same_length_is_caught_at_the_next_append(kit) -> None:
    rechainer = FORGE + ("led = sys.argv[1]\nrecs = load(led)\n"
                         "recs[0]['spec']['sha256'] = 'f' * 64\n"  # same length
                         "open(led, 'r+b').write(chain(recs))\n")
    spec = kit.graph({"a": f"worker = {kit.argv('w.py', rechainer, kit.ledger)}\n"
                           f"gate = {kit.argv('g.py', ACCEPT)}\nspend_ceiling = 20.0\n"})
    r = kit.start(spec)
    assert r.code == 5 and r.report["outcome"] != "DONE"
    recs = kit.records(kit.ledger)
    assert recs[0]["spec"]["sha256"] == "f" * 64 and recs[-1]["type"] == "reserve"


def rewrite_as_done(kit) -> None:
    """Whoever can write the file between runs: turn a signed FAILED run into 'a is DONE'."""
    ns: dict = {}
    exec(FORGE, ns)  # the attacker's own forger (no engine code)
    recs = ns["load"](kit.ledger)
    cut = max(i for i, r in enumerate(recs) if r["type"] == "claim")
    kit.ledger.write_bytes(ns["chain"](recs[:cut + 1] + ns["DONE"][:1]))
    # The committed-length mark beside the ledger (unsigned) would give a shorter rewrite away;
    # whoever can write the ledger can delete it too, which leaves the signature to tell.
    mark_path(kit.ledger).unlink(missing_ok=True)


def test_resume_refuses_a_rewritten_signed_ledger(kit) -> None:
    spec, pub = signed_graph(kit, "open('out.txt', 'w').write('x')\n", REJECT)
    assert kit.start(spec).code == 3  # FAILED, signed
    rewrite_as_done(kit)
    assert kit.run("verify", kit.ledger).code == 0  # the chain alone cannot tell
    before = kit.ledger.read_bytes()
    r = kit.resume()
    assert r.code == 5, (r.code, r.err)
    assert kit.ledger.read_bytes() == before  # nothing appended, nothing signed
    assert "sign" in r.err
    assert kit.run("verify", kit.ledger, "--public-key", pub).code == 5


def test_resume_refuses_a_rewritten_ledger_whose_signature_was_deleted(kit) -> None:
    spec, _ = signed_graph(kit, "open('out.txt', 'w').write('x')\n", REJECT)
    assert kit.start(spec).code == 3
    rewrite_as_done(kit)
    sidecar_path(kit.ledger).unlink()
    before = kit.ledger.read_bytes()
    r = kit.resume()
    assert r.code == 5, (r.code, r.err)
    assert kit.ledger.read_bytes() == before and not sidecar_path(kit.ledger).exists()


def test_a_signed_run_resumed_honestly_still_signs(kit) -> None:
    """The guard is not a wall: a stopped signed run resumes, extends its head and signs it."""
    stopper = "import sys\nopen(sys.argv[1] + '.stop', 'w').close()\n"  # the kill switch
    spec, pub = signed_graph(kit, stopper, ACCEPT)
    assert kit.start(spec).code == 6
    Path(f"{kit.ledger}.stop").unlink()
    r = kit.resume()
    assert r.code == 0 and r.report["outcome"] == "DONE"
    assert kit.run("verify", kit.ledger, "--public-key", pub).code == 0
    assert signed_head(kit)["head"] == kit.records(kit.ledger)[-1]["hash"]
