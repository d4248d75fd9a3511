"""Replay of a long run's ledger: `open_replayed` (verify + fold through the model, streaming) on
the ledger of a `--replay-nodes` chain (default 10,000), beside `verify` of the same file.

The ledger has the records a real run appends per attempt (begin, reserve, settle, claim,
verdict) and is written through the model (each event is checked by `step` before it is
appended), so replay folds exactly what `loopproof resume` folds. Verify alone, side by side,
is the part replay cannot avoid. The same is timed at a tenth of the nodes: replay is linear
when the time per record does not grow with the run (`per_record_growth`, the ratio of the two,
within 1.5x). Registered as "replay".
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.registry import register
from bench.targets import figure

TARGET_S = 2.0
GROWTH = 1.5  # per-record replay time at --replay-nodes over that at a tenth of it: flat


def write_run_ledger(path: Path, nodes: int) -> int:
    """A completed run of a chain of `nodes` one-attempt nodes; returns its record count."""
    from loopproof.engine.record.ledger import Ledger
    from loopproof.engine.record.replay import RUN_FORMAT, event_record, graph_record
    from loopproof.model import (
        Begin,
        Claim,
        Finish,
        LoopGraph,
        NodeSpec,
        Reserve,
        Settle,
        Verdict,
        step,
    )
    from loopproof.model.state import initial_state

    graph = LoopGraph.build([NodeSpec(f"n{i}", spend_ceiling=2.0,
                                      needs=(f"n{i - 1}",) if i else ()) for i in range(nodes)],
                            spend_budget=4.0 * nodes)
    state = initial_state(graph)
    with Ledger.create(path, {"type": "run", "format": RUN_FORMAT, "price": 1.0,
                              "graph": graph_record(graph)}) as led:
        with led.group():
            for name in graph.names:
                for event, facts in ((Begin(name), {"activation": 0, "attempt": 1}),
                                     (Reserve(1.0, node=name), {}),
                                     (Settle(0.25, node=name), {}),
                                     (Claim(name), {"claims": ["done"]}),
                                     (Verdict(name, True), {"activation": 0, "attempt": 1,
                                                            "verdict": "PASS"})):
                    state = step(graph, state, event)
                    led.append(event_record(event, **facts))
            step(graph, state, Finish())
            led.append(event_record(Finish()))
        return len(led)


def _replay_time(out: Path, nodes: int, repeat: int) -> tuple[int, float, float]:
    """(records, best replay seconds, best verify seconds) of a `nodes`-chain run's ledger."""
    from loopproof.engine.record.ledger import verify
    from loopproof.engine.record.replay import open_replayed

    with tempfile.TemporaryDirectory(dir=out, prefix="replay-") as tmp:
        path = Path(tmp) / "run.jsonl"
        records = write_run_ledger(path, nodes)
        replay_s = verify_s = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            led, replayed = open_replayed(path)
            replay_s = min(replay_s, time.perf_counter() - t)
            led.close()
            if replayed.state.outcome.value != "DONE":
                raise RuntimeError("the benchmark run did not replay to DONE")
            t = time.perf_counter()
            verify(path)
            verify_s = min(verify_s, time.perf_counter() - t)
    return records, replay_s, verify_s


def bench_replay(args: argparse.Namespace) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    small_nodes = max(1, args.replay_nodes // 10)
    small_records, small_s, _ = _replay_time(out, small_nodes, args.repeat)
    records, replay_s, verify_s = _replay_time(out, args.replay_nodes, args.repeat)
    per_record, small_per_record = replay_s / records, small_s / small_records
    return {"nodes": args.replay_nodes, "records": records,
            "seconds": figure(replay_s, TARGET_S, "s",
                              ratio_to_verify=round(replay_s / verify_s, 2)),
            "verify_s": round(verify_s, 3),
            "records_per_s": round(records / replay_s, 1),
            # linear replay: the time per record does not grow with the run's length
            "per_record_growth": figure(per_record / small_per_record, GROWTH, "x",
                                        per_record_us=round(per_record * 1e6, 2),
                                        small_nodes=small_nodes,
                                        small_per_record_us=round(small_per_record * 1e6, 2))}


register("replay", bench_replay)
