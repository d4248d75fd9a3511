"""Replay of a long run's ledger: `open_replayed` (verify + fold through the model, streaming) on
the ledger of a `--replay-nodes` chain (default 10,000), beside `verify` of the same file.

The ledger has the records a real run appends per attempt (begin, reserve, settle, claim,
verdict) and is written through the model (each event is checked by `step` before it is
appended), so replay folds exactly what `loopproof resume` folds. Verify alone, side by side,
is the part replay cannot avoid. Registered as "replay".
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.registry import register
from bench.targets import figure

TARGET_S = 2.0


def write_run_ledger(path: Path, nodes: int) -> int:
    """A completed run of a chain of `nodes` one-attempt nodes; returns its record count."""
    from engine.record.ledger import Ledger
    from engine.record.replay import RUN_FORMAT, event_record, graph_record
    from model import Begin, Claim, Finish, LoopGraph, NodeSpec, Reserve, Settle, Verdict, step
    from model.state import initial_state

    graph = LoopGraph.build([NodeSpec(f"n{i}", spend_ceiling=2.0,
                                      needs=(f"n{i - 1}",) if i else ()) for i in range(nodes)],
                            spend_budget=4.0 * nodes)
    state = initial_state(graph)
    with Ledger.create(path, {"type": "run", "format": RUN_FORMAT, "price": 1.0,
                              "graph": graph_record(graph)}) as led:
        with led.group():
            for name in graph.names:
                for event, facts in ((Begin(name), {"activation": 0, "attempt": 1}),
                                     (Reserve(1.0), {"node": name}),
                                     (Settle(0.25), {"node": name}),
                                     (Claim(name), {"claims": ["done"]}),
                                     (Verdict(name, True), {"activation": 0, "attempt": 1,
                                                            "verdict": "PASS"})):
                    state = step(graph, state, event)
                    led.append(event_record(event, **facts))
            step(graph, state, Finish())
            led.append(event_record(Finish()))
        return len(led)


def bench_replay(args: argparse.Namespace) -> dict:
    from engine.record.ledger import verify
    from engine.record.replay import open_replayed

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix="replay-") as tmp:
        path = Path(tmp) / "run.jsonl"
        records = write_run_ledger(path, args.replay_nodes)
        replay_s = verify_s = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            led, replayed = open_replayed(path)
            replay_s = min(replay_s, time.perf_counter() - t)
            led.close()
            if replayed.state.outcome.value != "DONE":
                raise RuntimeError("the benchmark run did not replay to DONE")
            t = time.perf_counter()
            verify(path)
            verify_s = min(verify_s, time.perf_counter() - t)
    return {"nodes": args.replay_nodes, "records": records,
            "seconds": figure(replay_s, TARGET_S, "s",
                              ratio_to_verify=round(replay_s / verify_s, 2)),
            "verify_s": round(verify_s, 3),
            "records_per_s": round(records / replay_s, 1)}


register("replay", bench_replay)
