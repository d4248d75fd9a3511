"""engine/record/owned.py and the signed-prefix check, one unit at a time: each way the file at
the ledger's path can stop being the one written is caught by `check_owned` (before an append)
or `verify_owned` (at the end), nothing is appended after it, and `check_extends_signed` refuses
a ledger that does not extend its signed head."""

from __future__ import annotations

import json
import os

import pytest

from loopproof.engine.record.ledger import Ledger
from loopproof.engine.record.owned import LedgerLost
from loopproof.engine.record.signing import (
    check_extends_signed,
    generate_keypair,
    sidecar_path,
    sign_head,
    sign_written,
)
from loopproof.engine.system.errors import LedgerCorrupt
from tests.support.oracles import rechain


def make(path, n=4):
    led = Ledger.create(path, {"type": "run"})
    for i in range(1, n):
        led.append({"type": "step", "i": i})
    return led


def replace(p):
    tmp = p.with_name("forged")
    tmp.write_bytes(p.read_bytes())
    os.replace(tmp, p)


def append_line(p):
    with open(p, "ab") as fh:
        fh.write(b'{"x":1}\n')


def edit_last_line(p):
    data = bytearray(p.read_bytes())
    data[-5] ^= 1
    with open(p, "r+b") as fh:
        fh.write(bytes(data))


DAMAGE = {
    "replaced": replace,
    "removed": lambda p: p.unlink(),
    "appended to": append_line,
    "truncated": lambda p: os.truncate(p, p.stat().st_size // 2),
    "last line edited": edit_last_line,
}


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_every_damage_is_caught_before_the_next_append(tmp_path, how):
    led = make(tmp_path / "l.jsonl")
    DAMAGE[how](led.path)
    with pytest.raises(LedgerLost):
        led.append({"type": "after"})
    assert led.lost and len(led) == 4
    with pytest.raises(LedgerLost):  # and every later append
        led.append({"type": "again"})


def test_an_edit_that_keeps_length_and_last_line_is_caught_by_the_full_check(tmp_path):
    led = make(tmp_path / "l.jsonl")
    data = bytearray(led.path.read_bytes())
    data[data.index(b'"i":1') + 4] = ord("7")  # record 1 edited, same length
    with open(led.path, "r+b") as fh:
        fh.write(bytes(data))
    led.check_owned()  # the cheap check cannot see it ...
    with pytest.raises(LedgerLost, match="not the chain written"):
        led.verify_owned()  # ... the full one does


def test_an_honest_ledger_passes_both_checks_after_create_and_after_open(tmp_path):
    led = make(tmp_path / "l.jsonl")
    led.verify_owned()
    led.close()
    led = Ledger.open(tmp_path / "l.jsonl")
    led.check_owned()
    led.append({"type": "more"})
    led.verify_owned()


def test_sign_written_signs_memory_not_the_path(tmp_path):
    priv, pub = tmp_path / "k", tmp_path / "k.pub"
    generate_keypair(priv, pub)
    led = make(tmp_path / "l.jsonl")
    sign_written(led, priv)
    assert json.loads(sidecar_path(led.path).read_text())["head"] == led.head
    replace(led.path)
    with pytest.raises(LedgerLost):
        sign_written(led, priv)


def test_check_extends_signed(tmp_path):
    priv, pub = tmp_path / "k", tmp_path / "k.pub"
    generate_keypair(priv, pub)
    path = tmp_path / "l.jsonl"
    make(path).close()
    assert check_extends_signed(path, len(Ledger.open(path)), None) is None  # unsigned
    with pytest.raises(LedgerCorrupt, match="missing"):  # a key asks for a signature
        check_extends_signed(path, len(Ledger.open(path)), pub)
    sign_head(path, priv)
    led = Ledger.open(path)
    led.append({"type": "extends"})
    check_extends_signed(path, len(led), pub)  # a ledger that extends the signed head
    recs = [json.loads(line) for line in path.read_bytes().splitlines()]
    recs[1]["i"] = 9
    path.write_bytes(rechain(recs))
    with pytest.raises(LedgerCorrupt, match="not the signed head"):
        check_extends_signed(path, len(Ledger.open(path)), pub)
    path.write_bytes(rechain(recs[:2]))
    with pytest.raises(LedgerCorrupt, match="fewer"):  # (Ledger.open refuses it first: the
        check_extends_signed(path, 2, pub)               # mark and the signed count are higher)
    other, other_pub = tmp_path / "o", tmp_path / "o.pub"
    generate_keypair(other, other_pub)
    with pytest.raises(LedgerCorrupt, match="does not verify"):
        check_extends_signed(path, 2, other_pub)
