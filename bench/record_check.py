"""The record-check benchmark (`python -m bench --only record_check`): what checking every record
against the registry (engine/record/record_types.py) costs the append path.

Figures, measured in this run on ledger files under --out, group commit as a run writes:
- the append path with the check (`RUN_RECORDS.check_append` then `Ledger.append`) against the
  append alone, over the same run-shaped records (reserve, settle, verdict): the ratio, target
  at most 1.10;
- the check alone, per record, over the first and the last tenth of the records (best of
  --repeat each): the check is O(fields) per record and holds nothing between records, so the
  two rates differ only by the machine's noise (a check that grew with the ledger would show).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.registry import register
from bench.targets import figure
from loopproof.engine.record.ledger import Ledger
from loopproof.engine.record.record_types import RUN_FORMAT, RUN_RECORDS

TARGET_RATIO = 1.10  # the checked append path against the unchecked one
GROUP = 1_000


def run_record(i: int) -> dict:
    """A record shaped like an attempt's reserve, settle and verdict records, in turn."""
    node = f"node{i % 7}"
    kind = i % 3
    if kind == 0:
        return {"type": "reserve", "node": node, "amount": 2.5, "what": "wall_clock"}
    if kind == 1:
        return {"type": "settle", "node": node, "amount": round(0.37 * (i % 11), 2), "of": 2.5,
                "reserved": 2.5, "what": "wall_clock", "seconds": 0.125, "killed": None}
    return {"type": "verdict", "node": node, "passed": i % 2 == 0, "activation": 1 + i % 3,
            "attempt": 1 + i % 4, "verdict": "PASS", "detail": "exit 0; ok", "seconds": 0.1,
            "snapshot": f"{(i * 2654435761) % (1 << 64):016x}", "exit": 0,
            "output": {"stdout": {"text": "", "bytes": 0}, "stderr": {"text": "", "bytes": 0}}}


def _append_all(path: Path, records: list[dict], checked: bool) -> float:
    led = Ledger.create(path, {"type": "run", "format": RUN_FORMAT, "graph": {}})
    t = time.perf_counter()
    for start in range(0, len(records), GROUP):
        with led.group():
            for rec in records[start:start + GROUP]:
                if checked:
                    RUN_RECORDS.check_append(rec, path)
                led.append(rec)
    seconds = time.perf_counter() - t
    led.close()
    return seconds


def _check_rate(records: list[dict]) -> float:
    t = time.perf_counter()
    for rec in records:
        RUN_RECORDS.check_append(rec, "bench")
    return len(records) / max(time.perf_counter() - t, 1e-9)


def bench_record_check(args: argparse.Namespace) -> dict:
    """Checked against unchecked appends, best of --repeat, and the check's rate early and late."""
    n = max(10_000, min(args.records, 200_000))
    records = [run_record(i) for i in range(n)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plain = checked = float("inf")
    with tempfile.TemporaryDirectory(dir=out, prefix="record-check-") as tmp:
        for r in range(max(1, args.repeat)):  # alternate, best of each: the machine is shared
            plain = min(plain, _append_all(Path(tmp) / f"plain{r}.jsonl", records, False))
            checked = min(checked, _append_all(Path(tmp) / f"checked{r}.jsonl", records, True))
    tenth = n // 10
    first = last = 0.0
    for _ in range(max(1, args.repeat)):  # alternate, best of each
        first = max(first, _check_rate(records[:tenth]))
        last = max(last, _check_rate(records[-tenth:]))
    return {
        "records": n,
        "appends_per_s_unchecked": round(n / plain, 1),
        "appends_per_s_checked": round(n / checked, 1),
        "checks_per_s_first_tenth": round(first, 1),
        "checks_per_s_last_tenth": round(last, 1),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "checked_append_ratio": figure(checked / plain, TARGET_RATIO, "x unchecked"),
    }


register("record_check", bench_record_check)
