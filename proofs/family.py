"""The family of graphs the per-shape proofs cover: every DAG with up to 3 nodes (one per
isomorphism class), declared with every repair pair it admits. The proofs make the numbers
(a_v, c_v, K, B) and membership of each pair in R symbolic (`Params.symbolic`), so one proof per
DAG covers every repair relation and every number at once."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, combinations
from typing import Any

import networkx as nx

from loopproof.model.graph import LoopGraph, NodeSpec

NAMES = ("a", "b", "c", "d", "e")
DEFAULT_MAX_NODES = 3
MAX_NODES = DEFAULT_MAX_NODES  # `python -m loopproof.proofs --max-nodes N` raises it (4: 31 DAGs, about 4x the time)


def describe() -> str:
    return (f"every DAG with up to {MAX_NODES} nodes and every repair relation, "
            "a_v, c_v, K, B symbolic")


def _subsets(items: list[Any]) -> Iterator[tuple[Any, ...]]:
    return chain.from_iterable(combinations(items, r) for r in range(len(items) + 1))


def dags(max_nodes: int | None = None) -> Iterator[nx.DiGraph]:
    """One DAG per isomorphism class, nodes labelled in a topological order."""
    for n in range(1, (MAX_NODES if max_nodes is None else max_nodes) + 1):
        names = NAMES[:n]
        pairs = [(names[i], names[j]) for i in range(n) for j in range(i + 1, n)]
        seen: list[nx.DiGraph] = []
        for edges in _subsets(pairs):
            g = nx.DiGraph()
            g.add_nodes_from(names)
            g.add_edges_from(edges)
            if not any(nx.is_isomorphic(g, h) for h in seen):
                seen.append(g)
                yield g


def with_all_repairs(g: nx.DiGraph) -> LoopGraph:
    """The DAG declared with every valid repair pair (u = d or u an ancestor of d)."""
    names = list(g.nodes)
    return LoopGraph.build(
        [NodeSpec(d, needs=tuple(sorted(g.predecessors(d))),
                  repairs=tuple(u for u in names if u == d or u in nx.ancestors(g, d)))
         for d in names], repair_budget=1)


def shapes(max_nodes: int | None = None) -> Iterator[LoopGraph]:
    """Every DAG up to `max_nodes` nodes, each with all its valid repair pairs."""
    for g in dags(max_nodes):
        yield with_all_repairs(g)


def relations(graph: LoopGraph) -> int:
    """How many repair relations a symbolic proof over `graph` covers: 2^|pairs|."""
    return 2 ** len(graph.repair_pairs)
