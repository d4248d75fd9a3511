"""The ledger benchmark (`python -m bench --only ledger`): how fast the engine's bookkeeping is, next to the peer engine.

Figures (all measured in this run, on ledger files under --out so fsync hits the real disk):
- appends/s with an fsync per append (on `--fsync-records`, fewer than --records, because each
  fsync waits for the disk; the output says how many);
- appends/s with group commit (`Ledger.group()` around every `--group-size` appends);
- verified records/s: `engine.record.ledger.verify` over the --records ledger, and `Ledger.open`
  (verify + keep the records for replay), best of --repeat runs; verification is also given per
  CPU second (the verifying pool's processes included), which other processes on a shared
  machine disturb less than wall-clock time.
The peer engine of the Bounded Loops paper appends ~160 records/s at 10,000 records (each append
re-reads the file) and verifies ~140,000 records/s; ratios against those are printed.

"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from bench.child import best
from bench.registry import register
from bench.targets import figure
from loopproof.engine.record.ledger import Ledger, verify

PEER_APPENDS_PER_S = 160.0       # Bounded Loops paper, at 10,000 records, append re-reads the file
PEER_VERIFIED_PER_S = 140_000.0  # Bounded Loops paper
TARGET_GROUP_APPENDS_PER_S = 50_000.0
TARGET_VERIFIED_PER_S = 400_000.0   # `loopproof verify`, 2 cores
TARGET_VERIFY_MIB = 100.0           # its peak memory

def sample_record(i: int) -> dict:
    """A record shaped like the runner's attempt records (about 250 bytes on disk)."""
    return {"type": "attempt_end", "node": f"node{i % 7}", "activation": 1 + i % 3,
            "attempt": 1 + i % 4, "verdict": ("PASS", "REJECT", "ERROR")[i % 3],
            "spend": round(0.37 * (i % 11), 2), "reserved": 10.0,
            "code_hash": f"{(i * 2654435761) % (1 << 64):016x}", "exit": i % 3, "seconds": 0.125}


def _cpu_with_children() -> float:
    """CPU seconds of this process and of its children reaped so far: verify hashes a large
    ledger in a pool of processes (reaped when it closes), whose work the parent's alone omits."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def bench_ledger(args: argparse.Namespace) -> dict:
    """Append (fsync per append, group commit) and verify rates on real files."""
    n, n_fsync, group = args.records, min(args.fsync_records, args.records), args.group_size
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix="ledgers-") as tmp:
        fsync_path, group_path = Path(tmp) / "fsync.jsonl", Path(tmp) / "group.jsonl"

        led = Ledger.create(fsync_path, {"type": "run_start", "bench": "fsync"})
        t = time.perf_counter()
        for i in range(1, n_fsync):
            led.append(sample_record(i))
        fsync_s = time.perf_counter() - t
        led.close()

        led = Ledger.create(group_path, {"type": "run_start", "bench": "group"})
        t = time.perf_counter()
        i = 1
        while i < n:
            with led.group():
                for j in range(i, min(i + group, n)):
                    led.append(sample_record(j))
            i += group
        group_s = time.perf_counter() - t
        led.close()
        size = group_path.stat().st_size

        verify_s = open_s = verify_cpu = float("inf")
        for _ in range(args.repeat):  # best of --repeat: the machine is shared
            t, c = time.perf_counter(), _cpu_with_children()
            result = verify(group_path)
            verify_s = min(verify_s, time.perf_counter() - t)
            verify_cpu = min(verify_cpu, _cpu_with_children() - c)
            if result.status != "verified" or result.records != n:
                raise RuntimeError(f"benchmark ledger did not verify: {result}")
            t = time.perf_counter()
            reopened = Ledger.open(group_path)
            open_s = min(open_s, time.perf_counter() - t)
            if len(reopened) != n:
                raise RuntimeError(f"benchmark ledger reopened with {len(reopened)} records")
            reopened.close()
        # the command itself, in a child process: wall time on every core and its peak memory
        cli = best([sys.executable, "-m", "loopproof.engine.cli", "verify", str(group_path), "--json"],
                   args.repeat)
        if json.loads(cli.stdout)["status"] != "verified":
            raise RuntimeError("benchmark ledger did not verify from the command line")

    fsync_rate, group_rate = _rate(n_fsync - 1, fsync_s), _rate(n - 1, group_s)
    verify_rate, open_rate = _rate(n, verify_s), _rate(n, open_s)
    return {
        "records": n,
        "bytes_per_record": round(size / n, 1),
        "fsync_records": n_fsync,
        "fsync_note": (f"fsync per append measured on {n_fsync} records (each waits for the disk)"
                       if n_fsync < n else "fsync per append measured on all records"),
        "appends_per_s_fsync": fsync_rate,
        "group_size": group,
        "appends_per_s_group": group_rate,
        "verified_records_per_s": verify_rate,
        "verified_records_per_cpu_s": _rate(n, verify_cpu),
        "verify_repeats": args.repeat,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "opened_records_per_s": open_rate,
        "peer": {"appends_per_s": PEER_APPENDS_PER_S, "verified_records_per_s": PEER_VERIFIED_PER_S},
        "ratio_vs_peer": {
            "appends_fsync": round(fsync_rate / PEER_APPENDS_PER_S, 2),
            "appends_group": round(group_rate / PEER_APPENDS_PER_S, 2),
            "verify": round(verify_rate / PEER_VERIFIED_PER_S, 2),
        },
        "group_commit": figure(group_rate, TARGET_GROUP_APPENDS_PER_S, "appends/s", "higher"),
        "verify_command": figure(n / cli.wall_s, TARGET_VERIFIED_PER_S, "records/s", "higher",
                                 seconds=round(cli.wall_s, 3), cpu_s=round(cli.cpu_s, 3)),
        "verify_peak_memory": figure(cli.peak_mib, TARGET_VERIFY_MIB, "MiB"),
    }


register("ledger", bench_ledger)
