"""Hypothesis strategies of the model's values, shared by the tests."""

from __future__ import annotations

from hypothesis import strategies as st

from loopproof.model.graph import LoopGraph, NodeSpec


@st.composite
def graphs(draw: st.DrawFn, max_nodes: int = 4, max_attempts: int = 3, max_k: int = 3) -> LoopGraph:
    """A small DAG (edges i -> j with i < j), a_v, c_v, K and a repair relation drawn from the
    allowed pairs (d, d) and (d, ancestor of d)."""
    n = draw(st.integers(1, max_nodes))
    names = [f"n{i}" for i in range(n)]
    edges = {(i, j) for i in range(n) for j in range(i + 1, n) if draw(st.booleans())}
    anc: list[set[int]] = [set() for _ in range(n)]
    for i, j in sorted(edges):
        anc[j] |= anc[i] | {i}
    allowed = [(d, u) for d in range(n) for u in sorted(anc[d] | {d})]
    relation = draw(st.sets(st.sampled_from(allowed))) if allowed else set()
    nodes = [NodeSpec(names[v], attempts=draw(st.integers(1, max_attempts)),
                      spend_ceiling=draw(st.sampled_from([0.5, 1.0, 2.0])),
                      needs=tuple(names[i] for i, j in sorted(edges) if j == v),
                      repairs=tuple(names[u] for d, u in sorted(relation) if d == v))
             for v in range(n)]
    return LoopGraph.build(nodes, repair_budget=draw(st.integers(0, max_k)))
