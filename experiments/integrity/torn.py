"""Torn-tail trials: a ledger cut by a real SIGKILL inside a write, by cut bytes, and a real
`loopproof run` cut mid-write then resumed; each must be truncated to its last complete record
and continue to the ledger an uncrashed run writes.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from experiments.integrity.records import ROOT, Row, clean, lines, run_records, write_ledger
from loopproof.engine.record.committed import Mark
from loopproof.engine.record.ledger import Ledger, verify

# ---- torn tails ------------------------------------------------------------------------------------

CHILD = """
import json, sys
from loopproof.engine.record.ledger import Ledger
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
    good = b"".join(lines(baseline)[:survivors])
    if led.torn is None or len(led) != survivors or path.read_bytes() != good:
        led.close()
        return v.status, False, "open did not truncate to the last complete record"
    if led.torn_kept is None or (path.parent / led.torn_kept).read_bytes() != damaged[len(good):]:
        led.close()
        return v.status, False, "open did not keep the bytes it cut in a side file"
    with led.group():
        for r in records[survivors:]:
            led.append(r)
    led.close()
    same = path.read_bytes() == baseline and verify(path).status == "verified"
    return v.status, same, v.error or ""


def crashed_after(path: Path, size: int, records: int) -> None:
    """The committed-length mark a crash inside the write of record `records` leaves: the
    engine fsyncs the mark only after the ledger, so it names at most the records before it
    (a ledger cut below its mark is damage, not a torn write, and is never cut)."""
    Mark(path).set(size, records)


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
               clean(msg, folder))


def torn_cut_trial(tid: str, rng: random.Random, folder: Path) -> Row:
    records = run_records(rng, tid)
    path = folder / "run.jsonl"
    baseline = write_ledger(path, records)
    ls = lines(baseline)
    last = ls[-1]
    cut = rng.randrange(1, len(last))  # keep 1 .. len-1 bytes: at least the newline is lost
    how = rng.choice(("cut", "cut", "zero_fill"))
    tail = last[:cut] if how == "cut" else last[:cut] + b"\x00" * rng.randint(1, 64)
    path.write_bytes(b"".join(ls[:-1]) + tail)
    crashed_after(path, len(b"".join(ls[:-1])), len(ls) - 1)
    status, ok, msg = _recover(path, records, baseline, len(ls) - 1, path.read_bytes())
    return Row(tid, "torn", f"tail_{how}", len(records), f"last line kept {cut}/{len(last)} bytes",
               f"torn-tail, {len(ls) - 1} records, resumed to the uncrashed bytes", status, ok,
               "", clean(msg, folder))


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
from loopproof.engine.system.errors import BadInput, LedgerCorrupt
module = importlib.import_module("loopproof.engine.commands." + sys.argv[1])
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
    ls = lines(base)
    k = rng.randrange(1, len(ls))                   # records that survive whole
    cut = 1 + int(rng.random() * (len(ls[k]) - 1))  # bytes of record k that reached the disk
    prefix = b"".join(ls[:k])
    ledger.write_bytes(prefix + ls[k][:cut])
    crashed_after(ledger, len(prefix), k)
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
               "" if ok else clean(f"exit {proc.returncode}: {proc.stderr.decode()[-300:]}", folder))
