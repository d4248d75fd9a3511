"""The bounded-loop graph: nodes with attempt budgets, a DAG of needs, a repair relation, K and B.

Validation lives here, once, so that every consumer (engine spec loader, explorer, proofs,
notebooks) rejects the same graphs with the same words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

import networkx as nx


class GraphError(ValueError):
    """A graph that breaks one of the model's rules. Names the node, the field and the fix."""

    def __init__(self, node: str | None, field_name: str, message: str, fix: str) -> None:
        self.node = node
        self.field = field_name
        self.fix = fix
        where = f"node {node!r}, field {field_name!r}" if node is not None else f"field {field_name!r}"
        super().__init__(f"{where}: {message}; fix: {fix}")


@dataclass(frozen=True)
class NodeSpec:
    """One bounded loop: `attempts` = a_v per activation, `spend_ceiling` = c_v per attempt."""

    name: str
    attempts: int = 1
    spend_ceiling: float = 1.0
    needs: tuple[str, ...] = ()
    repairs: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoopGraph:
    """A validated bounded-loop graph. Build it with `LoopGraph.build`; instances are immutable."""

    nodes: tuple[NodeSpec, ...]
    repair_budget: int = 0
    spend_budget: float = math.inf
    _index: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        nodes: Iterable[NodeSpec],
        repair_budget: int = 0,
        spend_budget: float = math.inf,
    ) -> LoopGraph:
        nodes = tuple(nodes)
        _validate(nodes, repair_budget, spend_budget)
        # Topological order (ties by declaration order) so that tuples indexed by node are stable.
        dag = _dag(nodes)
        order = {n.name: i for i, n in enumerate(nodes)}
        topo = list(nx.lexicographical_topological_sort(dag, key=order.__getitem__))
        by_name = {n.name: n for n in nodes}
        ordered = tuple(by_name[name] for name in topo)
        return cls(ordered, repair_budget, spend_budget, {n.name: i for i, n in enumerate(ordered)})

    def with_repair_budget(self, repair_budget: int) -> LoopGraph:
        """The same graph with another global repair budget K (validated as in `build`)."""
        _check_repair_budget(repair_budget)
        return replace(self, repair_budget=repair_budget)

    # ---- structure ----------------------------------------------------------------------
    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def index(self, name: str) -> int:
        return self._index[name]

    def node(self, name: str) -> NodeSpec:
        return self.nodes[self._index[name]]

    @cached_property
    def dag(self) -> nx.DiGraph:
        """Edges point from a node to the nodes that need it (predecessor -> successor)."""
        return _dag(self.nodes)

    @cached_property
    def _desc(self) -> dict[str, frozenset[str]]:
        return {n: frozenset(nx.descendants(self.dag, n)) for n in self.names}

    @cached_property
    def _anc(self) -> dict[str, frozenset[str]]:
        return {n: frozenset(nx.ancestors(self.dag, n)) for n in self.names}

    def desc(self, name: str) -> frozenset[str]:
        """Nodes reachable from `name`, not including it."""
        return self._desc[name]

    def ancestors(self, name: str) -> frozenset[str]:
        return self._anc[name]

    def subtree(self, name: str) -> frozenset[str]:
        """S_u = {u} ∪ desc(u): what a repair targeting `name` returns to PENDING."""
        return self._desc[name] | {name}

    @cached_property
    def repair_pairs(self) -> tuple[tuple[str, str], ...]:
        """The repair relation R as (d, u) pairs, in declaration order."""
        return tuple((n.name, u) for n in self.nodes for u in n.repairs)

    def predecessors(self, name: str) -> tuple[str, ...]:
        return self.node(name).needs


def _dag(nodes: tuple[NodeSpec, ...]) -> nx.DiGraph:
    dag = nx.DiGraph()
    dag.add_nodes_from(n.name for n in nodes)
    dag.add_edges_from((p, n.name) for n in nodes for p in n.needs)
    return dag


def _validate(nodes: tuple[NodeSpec, ...], repair_budget: int, spend_budget: float) -> None:
    if not nodes:
        raise GraphError(None, "node", "the graph has no nodes", "declare at least one [node.NAME]")
    _check_repair_budget(repair_budget)
    if not _is_number(spend_budget) or spend_budget < 0 or math.isnan(spend_budget):
        raise GraphError(None, "spend_budget", f"B must be a number >= 0, got {spend_budget!r}",
                         "set spend_budget to 0 or more")
    seen: set[str] = set()
    for n in nodes:
        if not isinstance(n.name, str) or not n.name:
            raise GraphError(str(n.name), "name", "a node needs a non-empty name", "name the node")
        if n.name in seen:
            raise GraphError(n.name, "name", "the node is declared twice", "rename one of them")
        seen.add(n.name)
    for n in nodes:
        if isinstance(n.attempts, bool) or not isinstance(n.attempts, int) or n.attempts < 1:
            raise GraphError(n.name, "attempts", f"a_v must be an integer >= 1, got {n.attempts!r}",
                             "set attempts to 1 or more")
        if not _is_number(n.spend_ceiling) or n.spend_ceiling < 0 or math.isnan(n.spend_ceiling):
            raise GraphError(n.name, "spend_ceiling",
                             f"c_v must be a number >= 0, got {n.spend_ceiling!r}",
                             "set spend_ceiling to 0 or more")
        for p in n.needs:
            if p not in seen:
                raise GraphError(n.name, "needs", f"unknown node {p!r}",
                                 f"declare [node.{p}] or remove it from needs")
            if p == n.name:
                raise GraphError(n.name, "needs", "a node cannot need itself",
                                 f"remove {p!r} from needs")
        if len(set(n.needs)) != len(n.needs):
            raise GraphError(n.name, "needs", "a predecessor is listed twice", "list each once")
    dag = _dag(nodes)
    if not nx.is_directed_acyclic_graph(dag):
        edges = nx.find_cycle(dag)
        loop = " -> ".join([u for u, _ in edges] + [edges[0][0]])
        # Edges point predecessor -> successor, so the head of the first edge lists the need.
        raise GraphError(edges[0][1], "needs", f"the graph has a cycle ({loop})",
                         "remove one of the needs on the cycle")
    for n in nodes:
        anc = nx.ancestors(dag, n.name)
        for u in n.repairs:
            if u not in seen:
                raise GraphError(n.name, "repairs", f"unknown node {u!r}",
                                 f"declare [node.{u}] or remove it from repairs")
            if u != n.name and u not in anc:
                raise GraphError(n.name, "repairs",
                                 f"repair target {u!r} is neither the node itself nor an ancestor",
                                 f"target {n.name!r} or one of its ancestors "
                                 f"{sorted(anc) or '(none)'}")
        if len(set(n.repairs)) != len(n.repairs):
            raise GraphError(n.name, "repairs", "a repair target is listed twice", "list each once")


def _check_repair_budget(repair_budget: object) -> None:
    if isinstance(repair_budget, bool) or not isinstance(repair_budget, int) or repair_budget < 0:
        raise GraphError(None, "repair_budget", f"K must be an integer >= 0, got {repair_budget!r}",
                         "set repair_budget to 0 or more")


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)
