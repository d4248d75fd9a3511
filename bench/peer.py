"""The peer engine (`bounded-loops` 0.7.6) measured in the same run, when `make bench-peer` has
installed it into its own venv (`.venv-peer`, never a dependency of this project).

Figures, interleaved (ours, the peer's, ours) on the same machine: seconds per durable append
at the end of an `--peer-records` ledger (the peer re-reads and re-verifies its whole log on
every append; ours writes one line), and verified records per second when reading the ledger
back. Without the peer venv, the figures quoted for it are printed, labelled "quoted", and
nothing is measured. Registered as "peer".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.ledger import sample_record
from bench.registry import register

PEER_PYTHON = Path(".venv-peer/bin/python")
PROBE = Path(__file__).with_name("peer_probe.py")
QUOTED = {"append_s_at_1M_records": 4.2, "attempt_overhead_ratio": 51.0,
          "tier1_audit_speedup": 7.0,
          "note": "quoted figures (bounded-loops 0.7.6 beside loopproof, same machine, "
                  "interleaved); not measured in this run"}


def _ours(folder: Path, records: int) -> dict[str, float]:
    from loopproof.engine.record.ledger import Ledger, verify

    path = folder / "ours.jsonl"
    path.unlink(missing_ok=True)
    led = Ledger.create(path, {"type": "run"})
    window = max(1, records // 10)
    t0 = t = time.perf_counter()
    last = 0.0
    for i in range(1, records):
        led.append(sample_record(i))
        if i % window == 0:
            now = time.perf_counter()
            last, t = (now - t) / window, now
    total = time.perf_counter() - t0
    led.close()
    t = time.perf_counter()
    verify(path)
    return {"append_s_total": total, "append_s_last": last,
            "verify_s": time.perf_counter() - t}


def bench_peer(args: argparse.Namespace) -> dict:
    python = Path(args.peer_python)
    if not python.exists():
        return {"status": f"not installed ({python}); run `make bench-peer`", "quoted": QUOTED}
    n = args.peer_records
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix="peer-") as tmp:
        folder = Path(tmp)
        first = _ours(folder, n)
        peer = json.loads(subprocess.run([str(python), str(PROBE), str(folder), str(n)],
                                         check=True, capture_output=True, text=True).stdout)
        second = _ours(folder, n)
    ours = {k: min(first[k], second[k]) for k in first}
    peer_last = list(peer["append_s_per_record_at"].values())[-1]
    return {
        "status": "measured", "records": n, "peer_version": "0.7.6",
        "append_s_at_end": {"ours": round(ours["append_s_last"], 6), "peer": round(peer_last, 6),
                            "peer_over_ours": round(peer_last / ours["append_s_last"], 1)},
        "peer_append_s_per_record_at": peer["append_s_per_record_at"],
        "verified_records_per_s": {
            "ours": round(n / ours["verify_s"], 1), "peer": round(n / peer["replay_s"], 1),
            "ours_over_peer": round(peer["replay_s"] / ours["verify_s"], 1)},
        "quoted": QUOTED,
        "python": sys.version.split()[0],
    }


register("peer", bench_peer)
