"""The closed-form worst cases of docs/design.md, symbolically (sympy) and as numbers.

    W   = Σ_v a_v       + K · max_{(d,u) ∈ R} Σ_{w ∈ S_u \\ desc(d)} a_w
    W_c = Σ_v a_v · c_v + K · max_{(d,u) ∈ R} Σ_{w ∈ S_u \\ desc(d)} a_w · c_w

When d is exhausted none of desc(d) has started in that activation, so a repair (d, u)
re-runs at most S_u \\ desc(d). The peer engine publishes the looser (1 + K) · Σ a_v.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from model.graph import LoopGraph


def rerun_set(graph: LoopGraph, d: str, u: str) -> frozenset[str]:
    """S_u \\ desc(d): the nodes a repair (d, u) can make run again."""
    return graph.subtree(u) - graph.desc(d)


def _worst(graph: LoopGraph, weight: Callable[[str], float]) -> tuple[float, float]:
    base = sum(weight(v) for v in graph.names)
    per_repair = max(
        (sum(weight(w) for w in rerun_set(graph, d, u)) for d, u in graph.repair_pairs),
        default=0,
    )
    return base, per_repair


def attempt_bound(graph: LoopGraph) -> int:
    """W: the tight worst-case total of attempts over every schedule and verdict sequence."""
    base, per_repair = _worst(graph, lambda v: graph.node(v).attempts)
    return int(base + graph.repair_budget * per_repair)


def spend_bound(graph: LoopGraph) -> float:
    """W_c: the pre-run spend bound (each attempt charged its full ceiling c_v)."""
    node = graph.node
    base, per_repair = _worst(graph, lambda v: node(v).attempts * node(v).spend_ceiling)
    return float(base + graph.repair_budget * per_repair)


def peer_bound(graph: LoopGraph) -> int:
    """The peer engine's published bound (1 + K) · Σ a_v, looser than W."""
    return (1 + graph.repair_budget) * sum(n.attempts for n in graph.nodes)


def worst_repair_pair(graph: LoopGraph) -> tuple[str, str] | None:
    """The (d, u) pair that maximises the re-run attempts; the schedule reaching W repeats it."""
    if not graph.repair_pairs:
        return None
    return max(graph.repair_pairs,
               key=lambda p: sum(graph.node(w).attempts for w in rerun_set(graph, *p)))


# ---- symbolic ---------------------------------------------------------------------------------

K = sympy.Symbol("K", integer=True, nonnegative=True)


def attempt_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(f"a_{name}", integer=True, positive=True)


def ceiling_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(f"c_{name}", nonnegative=True)


def symbolic_attempt_bound(graph: LoopGraph) -> sympy.Expr:
    """W over symbols a_v and K for this graph's shape and repair relation."""
    return _symbolic(graph, attempt_symbol)


def symbolic_spend_bound(graph: LoopGraph) -> sympy.Expr:
    """W_c over symbols a_v, c_v and K."""
    return _symbolic(graph, lambda v: attempt_symbol(v) * ceiling_symbol(v))


def _symbolic(graph: LoopGraph, weight: Callable[[str], sympy.Expr]) -> sympy.Expr:
    base = sympy.Add(*(weight(v) for v in graph.names))
    sums = {sympy.Add(*(weight(w) for w in sorted(rerun_set(graph, d, u))))
            for d, u in graph.repair_pairs}
    if not sums:
        return base
    return base + K * sympy.Max(*sums)


def symbolic_values(graph: LoopGraph) -> dict[sympy.Symbol, float]:
    """The substitution that turns a symbolic bound into this graph's number."""
    values: dict[sympy.Symbol, float] = {K: graph.repair_budget}
    for n in graph.nodes:
        values[attempt_symbol(n.name)] = n.attempts
        values[ceiling_symbol(n.name)] = n.spend_ceiling
    return values
