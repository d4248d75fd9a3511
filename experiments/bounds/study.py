"""The bounds experiment: W against the peer bound (1 + K) · Σ a_v and the true worst case.

    python -m experiments.bounds [--scale smoke|default|paper] [--seed S] [--json] [--out DIR]

Writes to DIR (default results/bounds):

- explorer.json  the exhaustive explorer's summary over every graph up to 3 (smoke) or 4 nodes
- random.csv     one row per random graph: its shape, K, Σ a_v, W, the peer bound and the true
- random.json    worst case found by exhaustive search of the model (graphs kept small enough)
- summary.json   counts and ratios over the random graphs

The same seed gives byte-identical files: rows are sorted, keys sorted, floats rounded, and the
explorer's wall-clock time is printed but never written. The explorer's work units and the random
graphs run where `--jobs`/`--dask` say (experiments/executor.py: serially, on a local Dask
cluster, or on a remote one) with the same bytes either way; docs/scale.md sizes a cluster.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from experiments import results
from experiments.executor import Executor, add_arguments, executor_from
from experiments.results import write_csv, write_json
from loopproof.model.bounds import attempt_bound, peer_bound, worst_repair_pair
from loopproof.model.executor import local
from loopproof.model.explore import explore, true_worst_case
from loopproof.model.graph import LoopGraph, NodeSpec

NAME = "bounds"
COLUMNS = ("id", "nodes", "edges", "pairs", "K", "sum_attempts", "W", "peer", "worst",
           "peer_over_w", "worst_pair", "graph")


@dataclass(frozen=True)
class Scale:
    """How big a run is: explorer size, how many random graphs and of what size."""

    explore_nodes: int
    graphs: int
    min_nodes: int
    max_nodes: int
    max_attempts: int = 3
    max_k: int = 3
    edge_probability: float = 0.4
    pair_probability: float = 0.25


SCALES: dict[str, Scale] = {
    "smoke": Scale(explore_nodes=3, graphs=24, min_nodes=3, max_nodes=5),
    "default": Scale(explore_nodes=4, graphs=300, min_nodes=5, max_nodes=8),
    "paper": Scale(explore_nodes=4, graphs=800, min_nodes=5, max_nodes=8),
}


# ---- random graphs ------------------------------------------------------------------------------

def random_graph(rng: random.Random, scale: Scale) -> LoopGraph:
    """A random DAG (edges i -> j, i < j), a_v, K and a repair relation over the allowed pairs."""
    n = rng.randint(scale.min_nodes, scale.max_nodes)
    names = [f"n{i}" for i in range(n)]
    edges = [(i, j) for i in range(n) for j in range(i + 1, n)
             if rng.random() < scale.edge_probability]
    anc: list[set[int]] = [set() for _ in range(n)]
    for i, j in edges:  # sorted by i, so every ancestor of i is known first
        anc[j] |= anc[i] | {i}
    relation = [(d, u) for d in range(n) for u in sorted(anc[d] | {d})
                if rng.random() < scale.pair_probability]
    attempts = [rng.randint(1, scale.max_attempts) for _ in range(n)]
    k = rng.randint(0, scale.max_k)
    return LoopGraph.build(
        [NodeSpec(names[v], attempts=attempts[v],
                  needs=tuple(names[i] for i, j in edges if j == v),
                  repairs=tuple(names[u] for d, u in relation if d == v)) for v in range(n)],
        repair_budget=k)


def graph_text(graph: LoopGraph) -> str:
    """A compact, canonical description of a graph (one CSV cell)."""
    return json.dumps([[n.name, n.attempts, list(n.needs), list(n.repairs)] for n in graph.nodes],
                      separators=(",", ":"))


def row(index: int, graph: LoopGraph) -> dict[str, object]:
    """One result row: the bounds and the exact worst case of one graph."""
    w, peer = attempt_bound(graph), peer_bound(graph)
    worst, _ = true_worst_case(graph)
    pair = worst_repair_pair(graph)
    return {
        "id": index,
        "nodes": len(graph.nodes),
        "edges": sum(len(n.needs) for n in graph.nodes),
        "pairs": len(graph.repair_pairs),
        "K": graph.repair_budget,
        "sum_attempts": sum(n.attempts for n in graph.nodes),
        "W": w,
        "peer": peer,
        "worst": worst,
        "peer_over_w": round(peer / w, 4),
        "worst_pair": "" if pair is None else f"{pair[0]}->{pair[1]}",
        "graph": graph_text(graph),
    }


def _row(args: tuple[int, LoopGraph]) -> dict[str, object]:
    return row(*args)


def random_rows(scale: Scale, seed: int, workers: int = 2,
                executor: Executor | None = None) -> list[dict[str, object]]:
    rng = random.Random(seed)
    graphs = [(i, random_graph(rng, scale)) for i in range(scale.graphs)]
    return (executor or local(workers)).map(_row, graphs)


def summarise(rows: list[dict[str, object]]) -> dict[str, object]:
    ratios = [float(r["peer_over_w"]) for r in rows]
    return {
        "random_graphs": len(rows),
        "worst_equals_w": sum(r["worst"] == r["W"] for r in rows),
        "worst_exceeds_w": sum(int(r["worst"]) > int(r["W"]) for r in rows),
        "peer_looser_than_w": sum(int(r["peer"]) > int(r["W"]) for r in rows),
        "mean_peer_over_w": round(sum(ratios) / len(ratios), 4) if ratios else None,
        "max_peer_over_w": max(ratios, default=None),
    }


# ---- files --------------------------------------------------------------------------------------

def load_results(directory: Path | str) -> dict[str, object]:
    """What the notebook reads: the rows, the summary and the explorer's figures."""
    d = Path(directory)
    return {
        "rows": json.loads((d / "random.json").read_text()),
        "summary": json.loads((d / "summary.json").read_text()),
        "explorer": json.loads((d / "explorer.json").read_text()),
    }


def plot_series(rows: list[dict[str, object]]) -> dict[str, list[int]]:
    """The figure's series: graphs ordered by W (then peer bound, then id), and their values."""
    ordered = sorted(rows, key=lambda r: (r["W"], r["peer"], r["id"]))
    return {
        "x": list(range(len(ordered))),
        "W": [int(r["W"]) for r in ordered],
        "peer": [int(r["peer"]) for r in ordered],
        "worst": [int(r["worst"]) for r in ordered],
    }


def run(scale_name: str, seed: int, out: Path, workers: int = 2,
        scale: Scale | None = None, executor: Executor | None = None
        ) -> tuple[dict[str, object], float]:
    """Compute everything, then write the four files. Returns the summary and explorer seconds.
    `scale` overrides the named scale's sizes (tests use a tiny one); `executor` runs the work
    units (else `workers` forked processes)."""
    scale = scale or SCALES[scale_name]
    figures = explore(scale.explore_nodes, workers,
                      mapper=None if executor is None else executor.map)
    seconds = float(figures.pop("seconds"))
    explorer = {"max_nodes": scale.explore_nodes, **figures}
    rows = random_rows(scale, seed, workers, executor)
    summary = {"scale": scale_name, "seed": seed, **summarise(rows),
               "explorer_cases": explorer["cases"], "explorer_mismatches": explorer["mismatches"]}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "explorer.json", explorer)
    write_json(out / "random.json", rows)
    write_csv(out / "random.csv", rows, COLUMNS)
    write_json(out / "summary.json", summary)
    return summary, seconds


def main(argv: list[str] | None = None) -> int:
    parser = results.parser(NAME, "W against the peer bound and the true worst case", SCALES)
    add_arguments(parser)
    parser.add_argument("--workers", dest="jobs", type=int, help="the same as --jobs")
    parser.add_argument("--explore-nodes", type=int, default=None, choices=range(1, 6),
                        help="explorer size instead of the scale's (5: a cluster's job, "
                             "docs/scale.md)")
    args = results.parse(parser, argv)
    if args is None:
        return 2
    start = time.perf_counter()
    with executor_from(args) as executor:
        scale = SCALES[args.scale]
        if args.explore_nodes is not None:
            scale = dataclasses.replace(scale, explore_nodes=args.explore_nodes)
        summary, explorer_seconds = run(args.scale, args.seed, args.out, 1, scale=scale,
                                        executor=executor)
    report = {**summary, "out": str(args.out), "explorer_seconds": explorer_seconds,
              "seconds": round(time.perf_counter() - start, 2)}
    if args.json:
        results.print_summary(report, True)
    else:
        print(f"bounds: {summary['random_graphs']} random graphs, worst == W on "
              f"{summary['worst_equals_w']}, peer looser on {summary['peer_looser_than_w']} "
              f"(mean peer/W {summary['mean_peer_over_w']}); explorer "
              f"{summary['explorer_cases']} cases, {summary['explorer_mismatches']} mismatches; "
              f"written to {args.out}")
    failed = summary["explorer_mismatches"] or summary["worst_exceeds_w"] or (
        summary["worst_equals_w"] != summary["random_graphs"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
