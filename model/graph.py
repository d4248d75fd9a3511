"""The bounded-loop graph: nodes with attempt budgets, a DAG of needs, a repair relation, K and B.

Validation lives here, once, so that every consumer (engine spec loader, explorer, proofs,
notebooks) rejects the same graphs with the same words.

Why no networkx on the hot path: building and validating a graph is linear (a heap-ordered
topological sort, and ancestor sets as integer bitsets only when a repair targets a node that is
not a direct need), and the closures `desc`/`ancestors`/`subtree` are built per node on first use.
networkx is imported only for `dag` and to name the loop of a refused cycle.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any


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
    max_parallel: int = 1  # attempts in flight at once (docs/design.md, "Several attempts")
    _index: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        nodes: Iterable[NodeSpec],
        repair_budget: int = 0,
        spend_budget: float = math.inf,
        max_parallel: int = 1,
    ) -> LoopGraph:
        nodes = tuple(nodes)
        # Topological order (ties by declaration order) so that tuples indexed by node are stable.
        topo = _validate(nodes, repair_budget, spend_budget)
        _check_max_parallel(max_parallel)
        ordered = tuple(nodes[i] for i in topo)
        return cls(ordered, repair_budget, spend_budget, max_parallel,
                   {n.name: i for i, n in enumerate(ordered)})

    def with_repair_budget(self, repair_budget: int) -> LoopGraph:
        """The same graph with another global repair budget K (validated as in `build`). What
        depends only on the nodes (closures, `shape_memo`) is shared with the copy, not rebuilt."""
        _check_repair_budget(repair_budget)
        return self._sharing_shape(replace(self, repair_budget=repair_budget))

    def with_max_parallel(self, max_parallel: int) -> LoopGraph:
        """The same graph with another limit of attempts in flight (`loopproof run --jobs N`),
        validated as in `build`; the shape caches are shared, as in `with_repair_budget`."""
        _check_max_parallel(max_parallel)
        return self._sharing_shape(replace(self, max_parallel=max_parallel))

    def _sharing_shape(self, copy: LoopGraph) -> LoopGraph:
        for key in _SHAPE_CACHES:
            copy.__dict__[key] = getattr(self, key)
        return copy

    # ---- structure ----------------------------------------------------------------------
    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def index(self, name: str) -> int:
        return self._index[name]

    def node(self, name: str) -> NodeSpec:
        return self.nodes[self._index[name]]

    @cached_property
    def successors(self) -> tuple[tuple[int, ...], ...]:
        """By node index (topological order): the indices of the nodes that need it."""
        out: list[list[int]] = [[] for _ in self.nodes]
        index = self._index
        for j, n in enumerate(self.nodes):
            for p in n.needs:
                out[index[p]].append(j)
        return tuple(tuple(x) for x in out)

    @cached_property
    def shape_memo(self) -> dict[str, Any]:
        """Values computed from the nodes alone (not K or B), e.g. the bound sums of
        `model.bounds`: kept with the graph and shared by `with_repair_budget` copies."""
        return {}

    @cached_property
    def dag(self) -> Any:
        """A networkx DiGraph, edges from a node to the nodes that need it (for callers that
        want networkx algorithms; the model itself does not use it)."""
        return _dag(self.nodes)

    @cached_property
    def _closures(self) -> dict[tuple[str, str], frozenset[str]]:
        return {}

    def _closure(self, kind: str, name: str) -> frozenset[str]:
        memo = self._closures
        got = memo.get((kind, name))
        if got is None:
            index, names = self._index, self.names
            if kind == "desc":
                step = self.successors
                start = step[index[name]]
            else:
                step = tuple(tuple(index[p] for p in n.needs) for n in self.nodes)
                start = step[index[name]]
            seen: set[int] = set()
            stack = list(start)
            while stack:
                i = stack.pop()
                if i not in seen:
                    seen.add(i)
                    stack.extend(step[i])
            got = frozenset(names[i] for i in seen)
            memo[(kind, name)] = got
        return got

    def desc(self, name: str) -> frozenset[str]:
        """Nodes reachable from `name`, not including it."""
        return self._closure("desc", name)

    def ancestors(self, name: str) -> frozenset[str]:
        return self._closure("anc", name)

    def subtree(self, name: str) -> frozenset[str]:
        """S_u = {u} ∪ desc(u): what a repair targeting `name` returns to PENDING."""
        memo = self._closures
        got = memo.get(("subtree", name))
        if got is None:
            got = memo[("subtree", name)] = self.desc(name) | {name}
        return got

    @cached_property
    def repair_pairs(self) -> tuple[tuple[str, str], ...]:
        """The repair relation R as (d, u) pairs, in declaration order."""
        return tuple((n.name, u) for n in self.nodes for u in n.repairs)

    def predecessors(self, name: str) -> tuple[str, ...]:
        return self.node(name).needs


# What `with_repair_budget` hands to its copy (built first if need be, so that every copy shares
# one): everything that does not read K and is cheap to build.
_SHAPE_CACHES = ("names", "successors", "shape_memo", "_closures", "repair_pairs")


def _dag(nodes: tuple[NodeSpec, ...]) -> Any:
    import networkx as nx  # only for `LoopGraph.dag` and for naming a refused cycle

    dag = nx.DiGraph()
    dag.add_nodes_from(n.name for n in nodes)
    dag.add_edges_from((p, n.name) for n in nodes for p in n.needs)
    return dag


def _validate(nodes: tuple[NodeSpec, ...], repair_budget: int, spend_budget: float) -> list[int]:
    """Every rule, in a fixed order (the first broken one is reported); returns the nodes'
    declaration indices in topological order, ties by declaration order."""
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
    topo = _topological(nodes)
    _check_repairs(nodes, topo, seen)
    return topo


def _topological(nodes: tuple[NodeSpec, ...]) -> list[int]:
    """Kahn's algorithm with a heap of declaration indices: the lexicographically least
    topological order. A cycle leaves nodes unvisited; networkx then names its loop."""
    index = {n.name: i for i, n in enumerate(nodes)}
    if all(index[p] < j for j, n in enumerate(nodes) for p in n.needs):
        return list(range(len(nodes)))  # declared in a topological order: the least one
    succ: list[list[int]] = [[] for _ in nodes]
    indegree = [len(n.needs) for n in nodes]
    for j, n in enumerate(nodes):
        for p in n.needs:
            succ[index[p]].append(j)
    ready = [i for i, d in enumerate(indegree) if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in succ[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                heapq.heappush(ready, j)
    if len(order) < len(nodes):
        import networkx as nx

        edges = nx.find_cycle(_dag(nodes))
        loop = " -> ".join([u for u, _ in edges] + [edges[0][0]])
        # Edges point predecessor -> successor, so the head of the first edge lists the need.
        raise GraphError(edges[0][1], "needs", f"the graph has a cycle ({loop})",
                         "remove one of the needs on the cycle")
    return order


def _check_repairs(nodes: tuple[NodeSpec, ...], topo: list[int], known: set[str]) -> None:
    """Each repair target is the node itself or an ancestor. Ancestor sets are integer bitsets
    (bit = topological position), built in topological order and dropped once every node that
    needs them is done, and only if some target is neither the node nor a direct need."""
    def first_error(n: NodeSpec, anc: frozenset[str] | None) -> GraphError | None:
        for u in n.repairs:
            if u not in known:
                return GraphError(n.name, "repairs", f"unknown node {u!r}",
                                  f"declare [node.{u}] or remove it from repairs")
            if u != n.name and u not in n.needs and (anc is None or u not in anc):
                shown = sorted(anc if anc is not None else n.needs)
                return GraphError(n.name, "repairs",
                                  f"repair target {u!r} is neither the node itself nor an ancestor",
                                  f"target {n.name!r} or one of its ancestors {shown or '(none)'}")
        if len(set(n.repairs)) != len(n.repairs):
            return GraphError(n.name, "repairs", "a repair target is listed twice",
                              "list each once")
        return None

    far = {i for i, n in enumerate(nodes) if any(u != n.name and u not in n.needs and u in known
                                                 for u in n.repairs)}
    errors: dict[int, GraphError] = {}
    if far:
        errors.update(_far_repair_errors(nodes, topo, far, first_error))
    for i, n in enumerate(nodes):
        if i in errors:
            raise errors[i]
        if n.repairs and i not in far and (err := first_error(n, None)) is not None:
            raise err


def _far_repair_errors(nodes: tuple[NodeSpec, ...], topo: list[int], far: set[int],
                       first_error: Any) -> dict[int, GraphError]:
    """The errors of the nodes in `far`, from their ancestor bitsets."""
    pos = [0] * len(nodes)
    for at, i in enumerate(topo):
        pos[i] = at
    index = {n.name: i for i, n in enumerate(nodes)}
    waiting = [0] * len(nodes)  # nodes still to come that need this one
    for n in nodes:
        for p in n.needs:
            waiting[index[p]] += 1
    bits: dict[int, int] = {}
    errors: dict[int, GraphError] = {}
    for i in topo:
        n = nodes[i]
        mine = 0
        for p in n.needs:
            j = index[p]
            mine |= bits[j] | (1 << pos[j])
            waiting[j] -= 1
            if waiting[j] == 0:
                del bits[j]
        if waiting[i]:
            bits[i] = mine
        if i in far:
            wanted = [u for u in n.repairs if u in index]
            if any(not (mine >> pos[index[u]]) & 1 for u in wanted if u != n.name):
                anc = frozenset(nodes[topo[b]].name for b in range(mine.bit_length())
                                if mine >> b & 1)
                err = first_error(n, anc)
            else:
                err = first_error(n, frozenset(u for u in wanted if u != n.name))
            if err is not None:
                errors[i] = err
    return errors


def _check_repair_budget(repair_budget: object) -> None:
    if isinstance(repair_budget, bool) or not isinstance(repair_budget, int) or repair_budget < 0:
        raise GraphError(None, "repair_budget", f"K must be an integer >= 0, got {repair_budget!r}",
                         "set repair_budget to 0 or more")


def _check_max_parallel(max_parallel: object) -> None:
    if isinstance(max_parallel, bool) or not isinstance(max_parallel, int) or max_parallel < 1:
        raise GraphError(None, "max_parallel",
                         f"max_parallel must be an integer >= 1, got {max_parallel!r}",
                         "set max_parallel to 1 or more")


_NUMBERS = (int, float)  # a tuple: `int | float` would be built anew at every call


def _is_number(x: object) -> bool:
    return isinstance(x, _NUMBERS) and not isinstance(x, bool)
