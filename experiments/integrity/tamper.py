"""Tamper trials: damage a run ledger (or a pinned policy, gate or suite file) and check that
verification refuses it, naming the damaged line or field, without writing a byte.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

from experiments.integrity.records import Row, clean, lines, rehash, run_records, write_ledger
from loopproof.engine.policy.pin import PolicyChanged, PolicyPin
from loopproof.engine.record.ledger import Ledger, canonical, verify
from loopproof.engine.system.errors import LedgerCorrupt

# ---- tampering -------------------------------------------------------------------------------------
# Each takes (rng, lines, other) and returns (damaged lines, target, line it must name, phrases
# of which the message must contain one).

Tamper = Callable[[random.Random, list[bytes], list[bytes]], tuple[list[bytes], str, int, tuple[str, ...]]]
HASH, PREV, SEQ, JSON = "hash does not match", "prev does not equal", "seq is", "not valid JSON"


def edit_value(rng: random.Random, rec: dict) -> str:
    keys = sorted(k for k in rec if k not in ("seq", "prev", "hash"))
    key = rng.choice(keys)
    v = rec[key]
    if isinstance(v, bool):
        rec[key] = not v
    elif isinstance(v, (int, float)):
        rec[key] = v + rng.choice((1, 7, 100))
    elif isinstance(v, str):
        rec[key] = v + "!" if key != "type" else "forged_" + v
    else:
        rec[key] = {"forged": True}
    return key


def t_edit_field(rng, ls, other):
    i = rng.randrange(len(ls))
    rec = json.loads(ls[i])
    key = edit_value(rng, rec)
    ls[i] = canonical(rec) + b"\n"
    return ls, f"line {i + 1} field {key}", i + 1, (HASH,)


def t_edit_rehash(rng, ls, other):
    i = rng.randrange(len(ls) - 1)
    rec = json.loads(ls[i])
    key = edit_value(rng, rec)
    ls[i] = rehash(rec)
    return ls, f"line {i + 1} field {key}, re-hashed", i + 2, (PREV,)


def t_delete(rng, ls, other):
    i = rng.randrange(len(ls) - 1)
    del ls[i]
    return ls, f"line {i + 1} deleted", i + 1, (SEQ,)


def t_reorder(rng, ls, other):
    i = rng.randrange(len(ls) - 1)
    j = rng.randrange(i + 1, len(ls))
    ls.insert(i, ls.pop(j))
    return ls, f"line {j + 1} moved before line {i + 1}", i + 1, (SEQ,)


def t_duplicate(rng, ls, other):
    i = rng.randrange(len(ls))
    ls.insert(i + 1, ls[i])
    return ls, f"line {i + 1} duplicated", i + 2, (SEQ,)


def t_splice(rng, ls, other):
    k = rng.randrange(1, min(len(ls), len(other)))
    return ls[:k] + other[k:], f"lines 1-{k} of this run + lines {k + 1}- of another", k + 1, (PREV,)


def t_cut_mid_chain(rng, ls, other):
    i = rng.randrange(len(ls) - 2)
    j = rng.randrange(i + 1, len(ls) - 1)
    # offsets as fractions, so the draws do not depend on line lengths (a real run's records
    # differ in length from run to run: timings)
    a = 1 + int(rng.random() * (len(ls[i]) - 2))
    b = 1 + int(rng.random() * (len(ls[j]) - 2))
    merged = ls[i][:a] + ls[j][b:]
    return (ls[:i] + [merged] + ls[j + 1:], f"bytes cut from line {i + 1} to line {j + 1}", i + 1,
            (JSON, HASH, "field 'hash'", "not a JSON object"))


def _garbage(rng: random.Random) -> bytes:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 ;:/-_=+*!?#"
    return ("".join(rng.choice(alphabet) for _ in range(rng.randint(5, 80)))).encode() + b"\n"


def t_garbage_appended(rng, ls, other):
    return ls + [_garbage(rng)], "garbage line appended", len(ls) + 1, (JSON,)


def t_garbage_inserted(rng, ls, other):
    i = rng.randrange(1, len(ls))
    ls.insert(i, _garbage(rng))
    return ls, f"garbage line inserted before line {i + 1}", i + 1, (JSON,)


def t_foreign_appended(rng, ls, other):
    rec = json.loads(other[min(len(ls), len(other) - 1)])
    rec["seq"] = len(ls)
    return ls + [rehash(rec)], "a record of another run appended (right seq)", len(ls) + 1, (PREV,)


LEDGER_TAMPERS: dict[str, Tamper] = {
    "edit_field": t_edit_field, "edit_and_rehash": t_edit_rehash, "delete": t_delete,
    "reorder": t_reorder, "duplicate": t_duplicate, "splice": t_splice,
    "cut_mid_chain": t_cut_mid_chain, "garbage_appended": t_garbage_appended,
    "garbage_inserted": t_garbage_inserted, "foreign_record_appended": t_foreign_appended,
}


def ledger_trial(tid: str, kind: str, rng: random.Random, folder: Path,
                 real: bytes | None = None) -> Row:
    """Tamper with a synthetic run ledger, or (given `real`) a copy of a real run's ledger."""
    synthetic = write_ledger(folder / "run.jsonl", run_records(rng, f"{tid}-a"))
    base = synthetic if real is None else real
    other = write_ledger(folder / "other.jsonl", run_records(rng, f"{tid}-b"))
    ls, target, line, phrases = LEDGER_TAMPERS[kind](rng, lines(base), lines(other))
    path = folder / "run.jsonl"
    path.write_bytes(b"".join(ls))
    damaged = path.read_bytes()
    v = verify(path)
    err = v.error or ""
    named = f"line {line}:" in err or f"line {line} (" in err
    said = any(p in err for p in phrases)
    try:
        Ledger.open(path).close()
        refused = False
    except LedgerCorrupt:
        refused = True
    untouched = path.read_bytes() == damaged
    detected = v.status == "broken" and named and said and refused and untouched
    message = clean(err, folder)
    if real is not None:  # a real run's bytes vary (timings): keep only what does not
        message = f"line {line}: {next((p for p in phrases if p in err), err[:60])}"
    return Row(tid, "tamper", kind if real is None else f"real_run:{kind}", len(lines(base)),
               target, f"broken at line {line}: {' | '.join(phrases)}", v.status, detected, "",
               message)


# ---- pinned files ----------------------------------------------------------------------------------

POLICY = """\
[policy]
goals = ["every node DONE with a PASS verdict for its current activation"]
scope = ["."]

[gate]
files = ["gates/check.py"]

[suite]
files = ["gates/cases.json"]

[budget]
spend = 60.0
repairs = 1
attempts = 24

[release]
conditions = ["all_done", "ledger_verified"]
"""

POLICY_EDITS = (
    ("budget.spend", "spend = 60.0", "spend = 6000.0"),
    ("budget.repairs", "repairs = 1", "repairs = 99"),
    ("budget.attempts", "attempts = 24", "attempts = 240"),
    ("policy.goals", "every node DONE", "some node DONE"),
    ("policy.scope", 'scope = ["."]', 'scope = [".", "/"]'),
    ("release.conditions", '["all_done", "ledger_verified"]', '["ledger_verified"]'),
    ("gate.files", 'files = ["gates/check.py"]', 'files = ["gates/lenient.py"]'),
)


def _policy_folder(folder: Path) -> Path:
    (folder / "gates").mkdir(parents=True)
    (folder / "gates" / "check.py").write_text("import sys\nsys.exit(0 if open('out.txt').read() "
                                               "== 'ok' else 1)\n")
    (folder / "gates" / "lenient.py").write_text("import sys\nsys.exit(0)\n")
    (folder / "gates" / "cases.json").write_text('[{"input": 1, "expect": 2}]\n')
    (folder / "policy.toml").write_text(POLICY)
    return folder / "policy.toml"


def _pin_outcome(pin: PolicyPin, field: str) -> tuple[str, bool, str]:
    try:
        pin.check()
    except PolicyChanged as exc:
        return "changed", field in str(exc), str(exc)
    return "unchanged", False, ""


def policy_trial(tid: str, rng: random.Random, folder: Path) -> Row:
    path = _policy_folder(folder)
    pin = PolicyPin.load(path)
    field, old, new = rng.choice(POLICY_EDITS)
    path.write_text(POLICY.replace(old, new))
    status, named, msg = _pin_outcome(pin, field)
    return Row(tid, "tamper", "policy_edited", 0, f"{field}: {old!r} -> {new!r}",
               f"PolicyChanged naming {field}", status, status == "changed" and named, "",
               clean(msg, folder))


def pinned_file_trial(tid: str, kind: str, rng: random.Random, folder: Path) -> Row:
    path = _policy_folder(folder)
    pin = PolicyPin.load(path)
    field, name = {"gate_file_edited": ("gate.files", "check.py"),
                   "suite_file_edited": ("suite.files", "cases.json")}[kind]
    target = folder / "gates" / name
    how = rng.choice(("append", "replace", "delete", "truncate"))
    text = target.read_text()
    if how == "append":
        target.write_text(text + "\n# worker was here\n")
    elif how == "replace":
        target.write_text(text.replace("1", "0") if "1" in text else text + " ")
    elif how == "delete":
        target.unlink()
    else:
        target.write_text(text[: len(text) // 2])
    status, named, msg = _pin_outcome(pin, field)
    return Row(tid, "tamper", kind, 0, f"{name}: {how}", f"PolicyChanged naming {field}",
               status, status == "changed" and named, "", clean(msg, folder))
