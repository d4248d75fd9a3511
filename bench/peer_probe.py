"""Run by the peer engine's own interpreter (`.venv-peer`, made by `make bench-peer`): times the
peer's durable append and its verified replay, prints one JSON object. Imports only the peer
package and the standard library (it never sees loopproof).

    .venv-peer/bin/python bench/peer_probe.py DIR RECORDS
"""

import json
import sys
import time
from pathlib import Path

from bounded_loops.graph.adapters.persistence.event_log import GraphEventLog
from bounded_loops.graph.domain.events import GraphRunIdentity, UnsignedGraphEvent


def main() -> None:
    folder, records = Path(sys.argv[1]), int(sys.argv[2])
    digest = "sha256:" + "0" * 64
    identity = GraphRunIdentity("bench", "bench", "run-1", digest, digest, digest)
    log = GraphEventLog(folder / "events.jsonl", identity)
    head = "0" * 64
    marks = {}
    window = max(1, records // 10)
    t0 = t = time.perf_counter()
    for i in range(records):
        event = UnsignedGraphEvent(f"e{i}", f"k{i}", "bench.tick", "2026-01-01T00:00:00Z",
                                   "bench", {"i": i, "node": f"node{i % 7}"})
        head = log.append(head, event).event_hash
        if (i + 1) % window == 0:
            now = time.perf_counter()
            marks[i + 1] = (now - t) / window
            t = now
    total = time.perf_counter() - t0
    t = time.perf_counter()
    replayed = log.replay()
    replay_s = time.perf_counter() - t
    print(json.dumps({"records": records, "append_s_total": total,
                      "append_s_per_record_at": marks, "replayed": len(replayed),
                      "replay_s": replay_s}))


if __name__ == "__main__":
    main()
