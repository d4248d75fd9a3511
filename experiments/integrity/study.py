"""The integrity experiment: tamper with real ledgers and pinned files, and check that every
change stops at verification with the right message; tear ledger tails (by a real SIGKILL in
the middle of a write, and by cutting bytes) and check that each is truncated to its last
complete record and that appending resumes to the very ledger an uncrashed run writes.

    python -m experiments.integrity [--scale smoke|default|paper] [--seed S] [--json] [--out DIR]

Ledgers are written by engine.record.ledger.Ledger from synthetic but run-shaped records (run start
with the policy pin, reserve, worker end, verdict, settle, node done, repairs, run end), one
ledger per trial, drawn from the seed. Policies are pinned with engine.policy.pin.PolicyPin.

Three classes of trial, counted separately:
- tamper (counted in `trials`/`detected`): edit a field; edit it and recompute that record's
  hash; delete; reorder; duplicate; splice two ledgers; cut a byte range out mid-chain; garbage
  appended or inserted; a record from another ledger appended; the policy file, a gate file or a
  suite file edited. Detected = `verify` says broken and names the tampered line (or the pin
  names the changed field), and `Ledger.open` refuses without writing a byte.
- torn (`torn_trials`/`torn_recovered`): recovered = verify says torn-tail with the right
  record count, `Ledger.open` truncates to exactly the last complete record, and appending the
  rest of the run gives a ledger byte-identical to the uncrashed one.
- rewrite (`rewrite_trials`): an attacker with write access rewrites the ledger and recomputes
  every hash (edit then re-chain; cut at a record boundary; edit and re-hash the last record).
  The chain alone cannot see these: they are reported as `undetectable_without_signing`, never
  as detected. With an Ed25519-signed head (engine.record.signing) they are `caught_with_signing`.

Writes DIR/trials.csv (one row per trial) and DIR/summary.json. Same seed, same bytes.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engine.policy.pin import PolicyChanged, PolicyPin
from engine.record.ledger import Ledger, canonical, record_hash, verify
from engine.record.signing import sign_head, verify_signed
from engine.system.errors import LedgerCorrupt
from experiments import results
from experiments.results import write_csv, write_json

NAME = "integrity"
RESULTS = Path("results") / NAME
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Scale:
    per_kind: int        # tamper trials per kind, on synthetic run ledgers
    torn_killed: int     # torn tails made by SIGKILL inside a write
    torn_cut: int        # torn tails made by cutting bytes
    rewrite_per_kind: int
    real_per_kind: int   # tamper trials per ledger kind on the ledger of a real `loopproof run`
    real_torn: int       # real run ledgers cut mid-write, then `loopproof resume`d


SCALES: dict[str, Scale] = {
    "smoke": Scale(per_kind=1, torn_killed=1, torn_cut=2, rewrite_per_kind=1, real_per_kind=1,
                   real_torn=1),
    "default": Scale(per_kind=6, torn_killed=5, torn_cut=5, rewrite_per_kind=4, real_per_kind=1,
                     real_torn=2),
    "paper": Scale(per_kind=10, torn_killed=8, torn_cut=8, rewrite_per_kind=10, real_per_kind=2,
                   real_torn=4),
}

COLUMNS = ("id", "cls", "kind", "records", "target", "expected", "status", "detected",
           "signed_status", "message")


@dataclass(frozen=True)
class Row:
    id: str
    cls: str            # tamper | torn | rewrite
    kind: str
    records: int        # records in the untouched ledger
    target: str         # what was changed (line numbers are 1-based)
    expected: str       # what a correct verifier must say
    status: str         # what it said
    detected: bool      # tamper: detected; torn: recovered; rewrite: caught with signing
    signed_status: str  # rewrite only: status with the signed head checked
    message: str


# ---- run-shaped records --------------------------------------------------------------------------

NODES = ("fetch", "build", "test", "package")


def run_records(rng: random.Random, run_id: str) -> list[dict]:
    """The records of one plausible run (no chain fields): attempts, verdicts, spend, repairs."""
    out: list[dict] = [{"type": "run", "run": run_id, "graph": {"nodes": list(NODES)},
                        "policy": {"digest": f"{rng.getrandbits(256):064x}"},
                        "budget": 60.0, "repair_budget": 1}]
    settled = 0.0
    for node in NODES:
        activation = 1
        for attempt in range(1, rng.randint(1, 3) + 1):
            ceiling = float(rng.choice((5, 10, 15)))
            out.append({"type": "reserve", "node": node, "activation": activation,
                        "attempt": attempt, "amount": ceiling, "settled": round(settled, 3)})
            spend = round(rng.uniform(0.1, ceiling), 3)
            out.append({"type": "worker_end", "node": node, "attempt": attempt, "exit": 0,
                        "seconds": spend, "stdout_sha256": f"{rng.getrandbits(256):064x}",
                        "claims": rng.choice(("", "done", "all tests pass"))})
            verdict = rng.choice(("PASS", "REJECT", "ERROR"))
            out.append({"type": "verdict", "node": node, "activation": activation,
                        "attempt": attempt, "verdict": verdict, "gate_exit": {"PASS": 0,
                        "REJECT": 1, "ERROR": 2}[verdict], "snapshot": f"{rng.getrandbits(128):032x}"})
            settled += spend
            out.append({"type": "settle", "node": node, "attempt": attempt, "spend": spend,
                        "settled": round(settled, 3)})
            if verdict == "PASS":
                break
        if rng.random() < 0.2:
            out.append({"type": "repair", "exhausted": node, "target": NODES[0],
                        "repairs_used": 1, "note": "réparation ✓"})
        out.append({"type": "node_done", "node": node, "activation": activation})
    out.append({"type": "run_end", "outcome": "DONE", "settled": round(settled, 3)})
    return out


def write_ledger(path: Path, records: Sequence[dict]) -> bytes:
    led = Ledger.create(path, records[0])
    with led.group():
        for r in records[1:]:
            led.append(r)
    led.close()
    return path.read_bytes()


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _rehash(rec: dict) -> bytes:
    rec["hash"] = record_hash(rec)
    return canonical(rec) + b"\n"


# ---- tampering -------------------------------------------------------------------------------------
# Each takes (rng, lines, other) and returns (damaged lines, target, line it must name, phrases
# of which the message must contain one).

Tamper = Callable[[random.Random, list[bytes], list[bytes]], tuple[list[bytes], str, int, tuple[str, ...]]]
HASH, PREV, SEQ, JSON = "hash does not match", "prev does not equal", "seq is", "not valid JSON"


def _edit_value(rng: random.Random, rec: dict) -> str:
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
    key = _edit_value(rng, rec)
    ls[i] = canonical(rec) + b"\n"
    return ls, f"line {i + 1} field {key}", i + 1, (HASH,)


def t_edit_rehash(rng, ls, other):
    i = rng.randrange(len(ls) - 1)
    rec = json.loads(ls[i])
    key = _edit_value(rng, rec)
    ls[i] = _rehash(rec)
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
    return ls + [_rehash(rec)], "a record of another run appended (right seq)", len(ls) + 1, (PREV,)


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
    ls, target, line, phrases = LEDGER_TAMPERS[kind](rng, _lines(base), _lines(other))
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
    message = _clean(err, folder)
    if real is not None:  # a real run's bytes vary (timings): keep only what does not
        message = f"line {line}: {next((p for p in phrases if p in err), err[:60])}"
    return Row(tid, "tamper", kind if real is None else f"real_run:{kind}", len(_lines(base)),
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
               _clean(msg, folder))


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
               status, status == "changed" and named, "", _clean(msg, folder))


# ---- torn tails ------------------------------------------------------------------------------------

CHILD = """
import json, sys
from engine.record.ledger import Ledger
records = json.load(open(sys.argv[2]))
led = Ledger.create(sys.argv[1], records[0])
with led.group():
    for r in records[1:]:
        led.append(r)
"""


def _recover(path: Path, records: list[dict], baseline: bytes, survivors: int,
             damaged: bytes) -> tuple[str, bool, str]:
    v = verify(path)
    if path.read_bytes() != damaged:
        return v.status, False, "verify modified the file"
    if v.status != "torn-tail" or v.records != survivors:
        return v.status, False, f"expected torn-tail with {survivors} records, got {v.as_dict()}"
    led = Ledger.open(path)
    good = b"".join(_lines(baseline)[:survivors])
    if led.torn is None or len(led) != survivors or path.read_bytes() != good:
        led.close()
        return v.status, False, "open did not truncate to the last complete record"
    with led.group():
        for r in records[survivors:]:
            led.append(r)
    led.close()
    same = path.read_bytes() == baseline and verify(path).status == "verified"
    return v.status, same, v.error or ""


def torn_killed_trial(tid: str, rng: random.Random, folder: Path) -> Row:
    records = run_records(rng, tid)
    baseline = write_ledger(folder / "baseline.jsonl", records)
    k = rng.randrange(2, len(records) + 1)  # the k-th append (record k-1) is torn
    (folder / "records.json").write_text(json.dumps(records))
    path = folder / "run.jsonl"
    path_entries = [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = dict(os.environ, LOOPPROOF_CRASH_AT=f"ledger.torn_write:{k}",
               PYTHONPATH=os.pathsep.join(path_entries))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), str(folder / "records.json")],
                          env=env, cwd=folder, capture_output=True, timeout=120)
    if proc.returncode != -9:
        return Row(tid, "torn", "sigkill_in_write", len(records), f"append {k}", "killed",
                   f"exit {proc.returncode}", False, "", proc.stderr.decode()[-200:])
    status, ok, msg = _recover(path, records, baseline, k - 1, path.read_bytes())
    return Row(tid, "torn", "sigkill_in_write", len(records), f"SIGKILL inside append {k}",
               f"torn-tail, {k - 1} records, resumed to the uncrashed bytes", status, ok, "",
               _clean(msg, folder))


def torn_cut_trial(tid: str, rng: random.Random, folder: Path) -> Row:
    records = run_records(rng, tid)
    path = folder / "run.jsonl"
    baseline = write_ledger(path, records)
    ls = _lines(baseline)
    last = ls[-1]
    cut = rng.randrange(1, len(last))  # keep 1 .. len-1 bytes: at least the newline is lost
    how = rng.choice(("cut", "cut", "zero_fill"))
    tail = last[:cut] if how == "cut" else last[:cut] + b"\x00" * rng.randint(1, 64) + b"\n"
    path.write_bytes(b"".join(ls[:-1]) + tail)
    status, ok, msg = _recover(path, records, baseline, len(ls) - 1, path.read_bytes())
    return Row(tid, "torn", f"tail_{how}", len(records), f"last line kept {cut}/{len(last)} bytes",
               f"torn-tail, {len(ls) - 1} records, resumed to the uncrashed bytes", status, ok,
               "", _clean(msg, folder))


# ---- real runs -------------------------------------------------------------------------------------

REAL_GRAPH = """\
# Two command loops and a repair pair: the shape of a real run, with timeouts far beyond what
# `sh` needs even on a loaded machine, so the run's records are the same every time.
[graph]
repair_budget = 1
spend_budget = 600.0

[node.make]
worker = ["sh", "-c", "echo ok > out.txt"]
gate = ["sh", "-c", "test -f out.txt"]
attempts = 2
spend_ceiling = 60.0
timeout_s = 60

[node.check]
worker = ["sh", "-c", "echo done > done.txt"]
gate = ["sh", "-c", "test -f done.txt"]
needs = ["make"]
repairs = ["make"]
attempts = 2
spend_ceiling = 60.0
timeout_s = 60
"""


# `loopproof NAME ARGS` as engine.cli runs it (same command module, same exit codes for bad input
# and a corrupt ledger), without importing every other subcommand: a few seconds saved per call.
ONE_COMMAND = """
import argparse, importlib, sys
from engine.system.errors import BadInput, LedgerCorrupt
module = importlib.import_module("engine.commands." + sys.argv[1])
parser = argparse.ArgumentParser(prog="loopproof " + sys.argv[1])
module.add_arguments(parser)
args = parser.parse_args(sys.argv[2:])
try:
    sys.exit(int(module.main(args)))
except BadInput as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
except LedgerCorrupt as exc:
    print(exc, file=sys.stderr)
    sys.exit(5)
"""


def _cli(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess:
    path_entries = [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = {k: v for k, v in os.environ.items() if k != "LOOPPROOF_CRASH_AT"}
    env["PYTHONPATH"] = os.pathsep.join(path_entries)
    return subprocess.run([sys.executable, "-c", ONE_COMMAND, *args], cwd=cwd, env=env,
                          capture_output=True, timeout=600)


def real_run(folder: Path) -> tuple[Path, bytes, dict]:
    """Run REAL_GRAPH with `loopproof run`; its ledger, bytes and --json report."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.toml").write_text(REAL_GRAPH)
    ledger = folder / "run.jsonl"
    proc = _cli(["run", "graph.toml", "--ledger", str(ledger), "--json"], folder)
    if proc.returncode != 0:
        raise RuntimeError(f"the real run failed (exit {proc.returncode}): "
                           f"{proc.stderr.decode()[-400:]}")
    return ledger, ledger.read_bytes(), json.loads(proc.stdout)


def real_torn_trial(tid: str, rng: random.Random, folder: Path) -> Row:
    """A real run's ledger cut back inside the write of one of its records, then resumed with
    `loopproof resume`. (The workspaces stay as the run left them; the crash experiment kills
    real runs at every site, this trial checks the ledger's side: truncation, then resume.)"""
    ledger, base, report = real_run(folder)
    ls = _lines(base)
    k = rng.randrange(1, len(ls))                   # records that survive whole
    cut = 1 + int(rng.random() * (len(ls[k]) - 1))  # bytes of record k that reached the disk
    prefix = b"".join(ls[:k])
    ledger.write_bytes(prefix + ls[k][:cut])
    v = verify(ledger)
    ok = v.status == "torn-tail" and v.records == k
    proc = _cli(["resume", "--ledger", str(ledger), "--json"], folder)
    resumed = json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout else {}
    ok = (ok and proc.returncode == 0 and ledger.read_bytes().startswith(prefix)
          and verify(ledger).status == "verified"
          and resumed.get("outcome") == report.get("outcome") == "DONE"
          and resumed.get("torn") is not None)
    return Row(tid, "torn", "real_run_resume", len(ls),
               f"real run cut inside record {k + 1}, then resumed",
               "torn-tail, truncated to the last whole record, resume ends DONE like the uncrashed "
               "run", v.status, ok, "",
               "" if ok else _clean(f"exit {proc.returncode}: {proc.stderr.decode()[-300:]}", folder))


# ---- the full-rewrite attacker -----------------------------------------------------------------------

def _rechain(recs: list[dict]) -> bytes:
    prev, out = "", []
    for seq, r in enumerate(recs):
        r = {k: v for k, v in r.items() if k != "hash"}
        r["seq"], r["prev"] = seq, prev
        out.append(_rehash(r))
        prev = json.loads(out[-1])["hash"]
    return b"".join(out)


def _keys(rng: random.Random, folder: Path) -> tuple[Path, Path]:
    """A key pair drawn from the seed (so the whole experiment replays exactly)."""
    key = Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
    priv, pub = folder / "run.key", folder / "run.pub"
    priv.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    return priv, pub


REWRITES = ("full_rewrite", "truncate_at_record_boundary", "edit_and_rehash_last")


def rewrite_trial(tid: str, kind: str, rng: random.Random, folder: Path) -> Row:
    path = folder / "run.jsonl"
    base = write_ledger(path, run_records(rng, tid))
    priv, pub = _keys(rng, folder)
    sign_head(path, priv)
    recs = [json.loads(line) for line in _lines(base)]
    if kind == "full_rewrite":
        i = rng.randrange(len(recs))
        key = _edit_value(rng, recs[i])
        path.write_bytes(_rechain(recs))
        target = f"line {i + 1} field {key}; every later hash recomputed"
    elif kind == "truncate_at_record_boundary":
        k = rng.randint(1, len(recs) - 1)
        path.write_bytes(b"".join(_lines(base)[:k]))
        target = f"cut to the first {k} of {len(recs)} records"
    else:
        key = _edit_value(rng, recs[-1])
        recs[-1].pop("hash")
        path.write_bytes(b"".join(_lines(base)[:-1]) + _rehash(recs[-1]))
        target = f"last line field {key}, re-hashed"
    plain = verify(path)
    signed = verify_signed(path, pub)
    return Row(tid, "rewrite", kind, len(recs), target,
               "verified without signing (undetectable); broken with the signed head",
               plain.status, signed.status == "broken", signed.status,
               _clean(signed.error or "", folder))


# ---- the experiment --------------------------------------------------------------------------------

def _clean(msg: str, folder: Path) -> str:
    return msg.replace(str(folder.resolve()), "<trial>").replace(str(folder), "<trial>")


def plan(scale: Scale) -> list[tuple[str, str]]:
    """(class, kind) for every trial, in a fixed order."""
    tamper_kinds = [*LEDGER_TAMPERS, "policy_edited", "gate_file_edited", "suite_file_edited"]
    out = [("tamper", k) for k in tamper_kinds for _ in range(scale.per_kind)]
    out += [("tamper", f"real_run:{k}") for k in LEDGER_TAMPERS for _ in range(scale.real_per_kind)]
    out += [("torn", "sigkill_in_write")] * scale.torn_killed + [("torn", "cut")] * scale.torn_cut
    out += [("torn", "real_run_resume")] * scale.real_torn
    out += [("rewrite", k) for k in REWRITES for _ in range(scale.rewrite_per_kind)]
    return out


def run_trial(index: int, cls: str, kind: str, seed: int, root: Path,
              real: bytes | None = None) -> Row:
    """One trial; `real` is the ledger of a real run, for the real_run:* kinds."""
    rng = random.Random(f"{seed}:{index}:{cls}:{kind}")
    tid = f"{index:03d}-{kind.replace(':', '-')}"
    folder = root / tid
    folder.mkdir()
    if cls == "tamper" and kind in LEDGER_TAMPERS:
        return ledger_trial(tid, kind, rng, folder)
    if kind.startswith("real_run:"):
        if real is None:
            raise ValueError(f"trial {tid} needs the ledger of a real run")
        return ledger_trial(tid, kind.split(":", 1)[1], rng, folder, real=real)
    if kind == "real_run_resume":
        return real_torn_trial(tid, rng, folder)
    if kind == "policy_edited":
        return policy_trial(tid, rng, folder)
    if cls == "tamper":
        return pinned_file_trial(tid, kind, rng, folder)
    if kind == "sigkill_in_write":
        return torn_killed_trial(tid, rng, folder)
    if cls == "torn":
        return torn_cut_trial(tid, rng, folder)
    return rewrite_trial(tid, kind, rng, folder)


def summarise(rows: Sequence[Row]) -> dict:
    tamper = [r for r in rows if r.cls == "tamper"]
    torn = [r for r in rows if r.cls == "torn"]
    rewrite = [r for r in rows if r.cls == "rewrite"]
    by_kind: dict[str, dict[str, int]] = {}
    for r in rows:
        k = by_kind.setdefault(r.kind, {"trials": 0, "ok": 0})
        k["trials"] += 1
        k["ok"] += int(r.detected)
    return {
        "trials": len(tamper),
        "detected": sum(r.detected for r in tamper),
        "torn_trials": len(torn),
        "torn_recovered": sum(r.detected for r in torn),
        "rewrite_trials": len(rewrite),
        "undetectable_without_signing": sum(r.status == "verified" for r in rewrite),
        "caught_with_signing": sum(r.detected for r in rewrite),
        "by_kind": dict(sorted(by_kind.items())),
        "ledgers": "synthetic run-shaped records written by engine.record.ledger.Ledger, and the ledger "
                   "of a real `loopproof run` (real_run:* kinds); torn tails by real SIGKILL "
                   "inside a write, by cut bytes, and by cutting a real run then `loopproof "
                   "resume`",
    }


def write(out: Path, rows: Sequence[Row], summary: dict, scale: str, seed: int) -> None:
    write_csv(out / "trials.csv", (asdict(r) for r in rows), COLUMNS)
    write_json(out / "summary.json", {"scale": scale, "seed": seed, **summary})


def run_experiment(scale: str, seed: int, out: Path, *, sizes: Scale | None = None) -> dict:
    """Run every planned trial (`sizes` overrides the named scale's sizes, for tests)."""
    rows = []
    trials = plan(sizes or SCALES[scale])
    with tempfile.TemporaryDirectory(prefix="integrity-") as tmp:
        real = None
        if any(k.startswith("real_run:") for _, k in trials):
            real = real_run(Path(tmp) / "real-base")[1]
        for i, (cls, kind) in enumerate(trials):
            rows.append(run_trial(i, cls, kind, seed, Path(tmp), real=real))
    summary = summarise(rows)
    write(out, rows, summary, scale, seed)
    return {"scale": scale, "seed": seed, **summary}


def main(argv: Sequence[str] | None = None) -> int:
    p = results.parser("integrity", __doc__.splitlines()[0], SCALES)
    args = results.parse(p, argv)
    if args is None:
        return 2
    summary = run_experiment(args.scale, args.seed, args.out)
    results.print_summary({k: v for k, v in summary.items() if args.json or k != "by_kind"},
                          args.json)
    ok = (summary["detected"] == summary["trials"]
          and summary["torn_recovered"] == summary["torn_trials"]
          and summary["caught_with_signing"] == summary["rewrite_trials"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
