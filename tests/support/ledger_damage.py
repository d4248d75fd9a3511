"""A small real ledger and every kind of damage it must be caught with (the message each gives)."""

from __future__ import annotations

import json
from pathlib import Path

from loopproof.engine.record.ledger import Ledger, canonical, record_hash


def make(path: Path, n: int = 6, graph: str = "g.toml") -> Ledger:
    led = Ledger.create(path, {"type": "run_start", "graph": graph, "policy": "abc"})
    for i in range(1, n):
        led.append({"type": "attempt", "node": f"n{i % 3}", "attempt": i, "spend": i * 0.5,
                    "note": "é ✓"})
    return led


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def write(path: Path, parts: list[bytes]) -> None:
    path.write_bytes(b"".join(parts))


def _edit(ls):
    rec = json.loads(ls[2])
    rec["spend"] = 999
    ls[2] = canonical(rec) + b"\n"


def _edit_rehash(ls):
    rec = json.loads(ls[2])
    rec["spend"] = 999
    rec["hash"] = record_hash(rec)
    ls[2] = canonical(rec) + b"\n"


def _wrong_prev(ls):
    rec = json.loads(ls[3])
    rec["prev"] = "0" * 64
    rec["hash"] = record_hash(rec)
    ls[3] = canonical(rec) + b"\n"


def _seq_gap(ls):
    rec = json.loads(ls[3])
    rec["seq"] = 7
    rec["hash"] = record_hash(rec)
    ls[3] = canonical(rec) + b"\n"


def _bad_hash_format(ls):
    rec = json.loads(ls[1])
    rec["hash"] = "XYZ"
    ls[1] = canonical(rec) + b"\n"


def _no_type(ls):
    rec = json.loads(ls[1])
    del rec["type"]
    rec["hash"] = record_hash(rec)
    ls[1] = canonical(rec) + b"\n"


DAMAGE = {
    "edited": (_edit, "line 3 (seq 2): hash does not match"),
    "edited-and-rehashed": (_edit_rehash, "line 4 (seq 3): prev does not equal"),
    "deleted": (lambda ls: ls.pop(2), "line 3: seq is 3, expected 2"),
    "deleted-first": (lambda ls: ls.pop(0), "line 1: seq is 1, expected 0"),
    "reordered": (lambda ls: ls.insert(2, ls.pop(3)), "line 3: seq is 3, expected 2"),
    "duplicated": (lambda ls: ls.insert(3, ls[2]), "line 4: seq is 2, expected 3"),
    "duplicated-last": (lambda ls: ls.append(ls[-1]), "line 7: seq is 5, expected 6"),
    "wrong-prev": (_wrong_prev, "line 4 (seq 3): prev does not equal"),
    "seq-gap": (_seq_gap, "line 4: seq is 7, expected 3"),
    "bad-hash-field": (_bad_hash_format, "line 2: field 'hash' is missing or not 64"),
    "no-type": (_no_type, "line 2 (seq 1): field 'type'"),
    "garbage-middle": (lambda ls: ls.insert(2, b"rm -rf /\n"), "line 3: not valid JSON"),
    "garbage-last": (lambda ls: ls.append(b"not json at all\n"), "line 7: not valid JSON"),
    "json-not-object": (lambda ls: ls.append(b"[1,2,3]\n"), "line 7: not a JSON object"),
    "cut-mid-chain": (lambda ls: ls.__setitem__(slice(2, 5), [ls[2][:40] + ls[4][40:]]),
                      "line 3"),
    "blank-line": (lambda ls: ls.insert(1, b"\n"), "line 2: not valid JSON"),
}
