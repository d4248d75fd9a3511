"""Family: worker-controlled bytes that crashed the engine.

A file name that is not UTF-8, an inputs/ folder turned into a file or a symlink, a revision
Patch naming a path no file system can encode, and a Python worker's reserve(-5), reserve(nan),
reserve(inf) each crashed the engine with a traceback, and since the crash came before the
attempt's end was recorded, every `resume` re-ran the attempt and crashed again. Every byte a
worker controls is handled: a recorded `error` or overrun for that attempt, a run that ends,
and a ledger that verifies and resumes.
"""

from __future__ import annotations

import json
import math
import os

import pytest

from loopproof.engine.record.ledger import verify
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.gate import CallableGate
from loopproof.engine.run.worker import CallableWorker

ACCEPT = "import sys\nsys.exit(0)\n"
REJECT_FIRST = "import os, sys\nsys.exit(1 if os.path.exists('first') else 0)\n"


def node(kit, tag: str, worker: str, gate: str = ACCEPT, extra: str = "") -> str:
    return (f"worker = {kit.argv(tag + '_w.py', worker)}\ngate = {kit.argv(tag + '_g.py', gate)}\n"
            f"spend_ceiling = 20.0\n{extra}")


def settled(kit, r) -> None:
    """The run ended or stopped on its own terms: no traceback, a ledger that verifies, and a
    resume that does not crash (a finished run is reported, unchanged)."""
    assert "Traceback" not in r.err
    assert verify(kit.ledger).status == "verified"
    again = kit.resume()
    assert again.code == r.code and "Traceback" not in again.err


def test_file_names_that_are_not_utf8_are_hashed_copied_and_handed_on(kit) -> None:
    odd = ("import os\nfor name in (b'\\xff\\xfe.txt', b'line\\nbreak', b'x' * 255, b'\\x01'):\n"
           "    with open(name, 'wb') as f:\n        f.write(name)\n")
    check = ("import os, sys\nnames = set(os.listdir(b'inputs/a'))\n"
             "sys.exit(0 if b'\\xff\\xfe.txt' in names and len(names) == 4 else 1)\n")
    spec = kit.graph({"a": node(kit, "a", odd),
                      "b": node(kit, "b", "pass\n", check, 'needs = ["a"]\n')})
    r = kit.start(spec)
    assert r.code == 0, (r.code, r.err)
    settled(kit, r)


@pytest.mark.parametrize("how", ["a file", "a symlink to a user's folder"])
def test_inputs_turned_into_something_else_are_replaced(kit, how) -> None:
    victim = kit.tmp / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    os.chmod(victim, 0o700)
    clobber = ("import os, shutil\nif os.environ['LOOPPROOF_ATTEMPT'] == '1':\n"
               "    open('first', 'w').close()\n    os.chmod('inputs', 0o755)\n"
               "    shutil.rmtree('inputs')\n"
               + ("    open('inputs', 'w').write('not a folder')\n" if how == "a file" else
                  f"    os.symlink({str(victim)!r}, 'inputs')\n")
               + "else:\n    os.unlink('first')\n")
    spec = kit.graph({"a": node(kit, "a", "open('out', 'w').write('x')\n"),
                      "b": node(kit, "b", clobber, REJECT_FIRST, 'needs = ["a"]\nattempts = 2\n')})
    r = kit.start(spec)
    assert r.code == 0, (r.code, r.err)
    assert (victim / "keep.txt").read_text() == "keep" and os.stat(victim).st_mode & 0o777 == 0o700
    settled(kit, r)


def test_a_patch_naming_an_unencodable_path_is_an_invalid_reply(kit) -> None:
    seed = kit.tmp / "seed"
    seed.mkdir()
    (seed / "code.py").write_text("x = 1\n")
    reply = ('print(\'{"action": "patch", "files": {"\\\\ud800.py": "boom"}, '
             '"note": "\\\\udfff"}\')\n')
    spec = kit.graph({"r": 'kind = "revision"\nseed = "seed"\n'
                           f"worker = {kit.argv('coder.py', reply)}\n"
                           f"gate = {kit.argv('check.py', ACCEPT)}\n"
                           "revisions = 2\nspend_ceiling = 30.0\n"})
    r = kit.start(spec)
    assert "Traceback" not in r.err and r.code in (0, 3), (r.code, r.err)
    settled(kit, r)


def _deep(n: int) -> list:
    v: list = []
    for _ in range(n):
        v = [v]
    return v


# ---- a Python worker's meter calls --------------------------------------------------------------

ASKS: dict[str, object] = {
    "reserve(-5)": lambda m: m.reserve(-5),
    "reserve(nan)": lambda m: m.reserve(math.nan),
    "reserve(inf)": lambda m: m.reserve(math.inf),
    "reserve(10**400)": lambda m: m.reserve(10**400),
    "reserve('5')": lambda m: m.reserve("5"),
    "reserve(None)": lambda m: m.reserve(None),
    "reserve(1e300)": lambda m: m.reserve(1e300),
    "charge(-1)": lambda m: m.charge(-1),
    "charge(nan)": lambda m: m.charge(math.nan),
    "settle(inf)": lambda m: (m.reserve(1.0), m.settle(math.inf)),
    "settle unreserved": lambda m: m.settle(0.5),
    "reserve twice": lambda m: (m.reserve(1.0), m.reserve(1.0)),
}
# Labels and facts are the worker's words: recorded (as valid, short text), never obeyed.
WORDS: dict[str, object] = {
    "label not text": lambda m: m.charge(1.0, what=b"\xff"),
    "label unencodable": lambda m: m.charge(1.0, what="\ud800"),
    "label huge": lambda m: m.charge(1.0, what="x" * 1_000_000),
    "settle facts": lambda m: (m.reserve(1.0), m.settle(1.0, "x", hash="forged", node="other",
                                                       deep=_deep(10_000))),
}


KIND = "adv_meter_asks"
spec_mod.register_kind(KIND, lambda table, spec_dir: (
    CallableWorker(lambda ctx: {**ASKS, **WORDS}[table["ask"]](ctx.meter)),
    CallableGate(lambda s: "accept")), ["ask"])


@pytest.mark.parametrize("ask", sorted(ASKS))
def test_a_python_workers_bad_meter_call_fails_its_attempt(kit, ask) -> None:
    spec = kit.graph({"n": f'kind = "{KIND}"\nask = {json.dumps(ask)}\nspend_ceiling = 10.0\n'})
    r = kit.start(spec)
    assert r.code == 3, (ask, r.code, r.err)  # the only attempt failed; nothing was accepted
    recs = kit.records(kit.ledger)
    assert not any(x["type"] == "verdict" and x["passed"] for x in recs)
    assert sum(x.get("amount", 0) for x in recs if x["type"] == "settle") <= 10.0 + 1e-9
    settled(kit, r)


@pytest.mark.parametrize("ask", sorted(WORDS))
def test_a_python_workers_labels_and_facts_are_recorded_not_obeyed(kit, ask) -> None:
    spec = kit.graph({"n": f'kind = "{KIND}"\nask = {json.dumps(ask)}\nspend_ceiling = 10.0\n'})
    r = kit.start(spec)
    assert r.code == 0, (ask, r.code, r.err)
    (paid,) = [x for x in kit.records(kit.ledger) if x["type"] == "settle" and x["amount"] == 1.0]
    assert paid["node"] == "n" and len(paid["what"]) < 300 and len(json.dumps(paid)) < 10_000
    settled(kit, r)


# ---- a Python worker's return value and exceptions -----------------------------------------------

class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words")


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


RETURNS: dict[str, object] = {
    "lone surrogate": lambda: "\ud800",
    "surrogate key": lambda: {"\udcff": 1},
    "huge int": lambda: 10**400,
    "nan inside": lambda: {"x": [math.nan]},
    "deep": lambda: _deep(100_000),
    "bad repr": lambda: BadRepr(),
    "huge text": lambda: "y" * 50_000_000,
    "raise unprintable": lambda: (_ for _ in ()).throw(Unprintable()),
    "sys.exit": lambda: (_ for _ in ()).throw(SystemExit(3)),
}

RKIND = "adv_worker_returns"
spec_mod.register_kind(RKIND, lambda table, spec_dir: (
    CallableWorker(lambda ctx: RETURNS[table["returns"]]()), CallableGate(lambda s: "accept")),
    ["returns"])


@pytest.mark.parametrize("what", sorted(RETURNS))
def test_a_python_workers_claims_are_recorded_whatever_they_are(kit, what) -> None:
    spec = kit.graph({"n": f'kind = "{RKIND}"\nreturns = {json.dumps(what)}\n'
                           'spend_ceiling = 10.0\n'})
    r = kit.start(spec)
    assert r.code == 0, (what, r.code, r.err)  # a claim is only a claim: the gate decides
    claim = next(x for x in kit.records(kit.ledger) if x["type"] == "claim")
    assert len(json.dumps(claim)) < 100_000
    settled(kit, r)


def test_a_command_workers_output_bytes_are_recorded_as_text(kit) -> None:
    noisy = "import sys\nsys.stdout.buffer.write(b'\\xff\\x00\\xed\\xa0\\x80' * 1000)\n"
    r = kit.start(kit.graph({"a": node(kit, "a", noisy)}))
    assert r.code == 0
    settled(kit, r)
