"""The closed-form worst cases of docs/design.md, symbolically (sympy) and as numbers.

    W   = Σ_v a_v       + K · max_{(d,u) ∈ R} Σ_{w ∈ S_u \\ desc(d)} a_w
    W_c = Σ_v a_v · c_v + K · max_{(d,u) ∈ R} Σ_{w ∈ S_u \\ desc(d)} a_w · c_w

When d is exhausted none of desc(d) has started in that activation, so a repair (d, u)
re-runs at most S_u \\ desc(d). The peer engine publishes the looser (1 + K) · Σ a_v.

How the numbers are computed, in one pass for W and W_c (`worst_sums`): u is d or an ancestor
of d, so desc(d) ⊆ S_u and Σ_{S_u \\ desc(d)} = weight(S_u) - weight(desc(d)). The weights of
every desc(v) come from integer bitsets of S_v built in reverse topological order, only where a
node unites several successors' sets (a chain builds none), each dropped once every node that
needs it is done: desc(v) is the S_s of its heaviest successor s plus the bits the other
successors add, and only those extra bits are weighed. Time is O(|V| + |E| + |R|) big-integer
operations, each linear in a bitset's width. Weights are exact integers (a_v; a_v · c_v scaled
by a common power of two), so W_c is the correctly rounded exact sum, whatever the order. The
sums depend only on the nodes, not on K, so they are kept per shape (`LoopGraph.shape_memo`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from loopproof.model.graph import LoopGraph

# The one name of the bounds, with the gloss every output uses (CLI, run reports, docs).
GLOSS = ("W: the most attempts any run of this graph can take; W_c: the most it can spend "
         "(every attempt charged its whole c_v); both computed from the graph before it runs")

if TYPE_CHECKING:  # sympy is imported by the symbolic functions only (a slow import)
    import sympy


def rerun_set(graph: LoopGraph, d: str, u: str) -> frozenset[str]:
    """S_u \\ desc(d): the nodes a repair (d, u) can make run again."""
    return graph.subtree(u) - graph.desc(d)


def bounds_by_definition(graph: LoopGraph) -> tuple[int, tuple[str, str] | None, Fraction]:
    """W, the first repair pair reaching it and W_c (exact), read straight off the formulas above
    with plain sets: the definition, quadratic and slow, that the one-pass `worst_sums` must equal
    (tests/model/test_bounds.py holds them together on random graphs of up to 60 nodes)."""
    a = {v.name: v.attempts for v in graph.nodes}
    c = {v.name: Fraction(v.attempts * v.spend_ceiling) for v in graph.nodes}
    reruns = [(sum(a[w] for w in rerun_set(graph, d, u)), (d, u)) for d, u in graph.repair_pairs]
    best = max((r for r, _ in reruns), default=0)
    pair = next((p for r, p in reruns if r == best), None)
    spend = max((sum(c[w] for w in rerun_set(graph, d, u)) for d, u in graph.repair_pairs),
                default=Fraction(0))
    k = graph.repair_budget
    return sum(a.values()) + k * best, pair, sum(c.values(), Fraction(0)) + k * spend


@dataclass(frozen=True)
class WorstSums:
    """The K-free parts of W and W_c: W = base + K · per_repair (and the same for spend).
    Spend figures are exact integers over `spend_scale` (a power of two); None if some a_v · c_v
    is not finite (then W_c is infinite)."""

    base: int
    per_repair: int
    pair: tuple[str, str] | None  # the first pair of R (declaration order) reaching per_repair
    spend_base: int | None
    spend_per_repair: int | None
    spend_scale: int

    def attempts(self, k: int) -> int:
        return self.base + k * self.per_repair

    def spend(self, k: int) -> float:
        if self.spend_base is None or self.spend_per_repair is None:
            return math.inf
        return (self.spend_base + k * self.spend_per_repair) / self.spend_scale


def worst_sums(graph: LoopGraph) -> WorstSums:
    """W and W_c's sums for `graph`, computed once per shape (see the module docstring)."""
    memo = graph.shape_memo
    got = memo.get("worst_sums")
    if got is None:
        got = memo["worst_sums"] = _worst_sums(graph)
    return got


def _exact(values: list[float]) -> tuple[list[int], int] | None:
    """Integers n_i and one power of two s with values[i] == n_i / s exactly; None if some
    value is not finite."""
    if not all(math.isfinite(v) for v in values):
        return None
    ratios = [v.as_integer_ratio() for v in values]
    scale = max((d for _, d in ratios), default=1)  # powers of two: the largest is their lcm
    return [n * (scale // d) for n, d in ratios], scale


_NONZERO = re.compile(rb"[^\x00]")
_BYTE_BITS = tuple(tuple(j for j in range(8) if b >> j & 1) for b in range(256))
_WALK = 256  # sets with at most this many members are weighed bit by bit


class _Weigher:
    """Σ of the attempt weights and of the spend weights over the members of a bitset whose bit
    b stands for node `offset + b`. Few members: walk them once through the non-zero bytes;
    many, with few distinct weights: one mask per weight and `bit_count` (masks built on first
    use, in one pass)."""

    def __init__(self, *weights: list[int]) -> None:  # weights[k][i] belongs to node i
        self.weights = weights
        self._classes: list[list[tuple[int, int]]] | None | bool = False  # False: not built

    def classes(self) -> list[list[tuple[int, int]]] | None:
        """Per weight vector, (weight, mask of its nodes); None if one has more than 8."""
        if self._classes is False:
            per: list[list[tuple[int, int]]] = []
            for vector in self.weights:
                members: dict[int, list[int]] = {}
                for i, w in enumerate(vector):
                    if w:
                        members.setdefault(w, []).append(i)
                if len(members) > 8:
                    self._classes = None
                    return None
                per.append([(w, _bits(idx, 0)) for w, idx in members.items()])
            self._classes = per
        return self._classes  # type: ignore[return-value]  # False is replaced just above

    def __call__(self, bits: int, offset: int) -> tuple[int, ...]:
        if not bits:
            return (0,) * len(self.weights)
        if bits.bit_count() > _WALK and (classes := self.classes()) is not None:
            absolute = bits << offset
            return tuple(sum(w * (absolute & mask).bit_count() for w, mask in per)
                         for per in classes)
        raw = bits.to_bytes((bits.bit_length() + 7) // 8, "little")
        at = [offset + 8 * m.start() + j for m in _NONZERO.finditer(raw)
              for j in _BYTE_BITS[raw[m.start()]]]
        return tuple(sum(map(vector.__getitem__, at)) for vector in self.weights)


def _bits(members: Iterable[int], base: int) -> int:
    """The int whose bit `e - base` is set for each e in `members` (all >= base), built in one
    buffer: OR-ing `1 << e` one at a time would copy a growing int per member."""
    members = list(members)
    if not members:
        return 0
    raw = bytearray((max(members) - base) // 8 + 1)
    for e in members:
        raw[(e - base) >> 3] |= 1 << ((e - base) & 7)
    return int.from_bytes(raw, "little")


_SPARSE = 64  # a set of at most this many nodes is kept as a frozenset of node indices



def _dense(x: int | frozenset[int], own: int, base: int) -> int:
    """S_own (in either form) as an int whose bit 0 stands for node `base` <= own."""
    if isinstance(x, int):
        return x << (own - base)
    return _bits(x, base)


@dataclass(frozen=True)
class Descendants:
    """Per node i (topological order), the weight of desc(i): its attempts Σ a_v and its spend
    Σ a_v·c_v (scaled to integers), each over the nodes below i."""

    attempts: list[int]
    spend: list[int]


@dataclass(frozen=True)
class WorstRerun:
    """The repair pair (d, u) whose rerun set S_u \\ desc(d) weighs most in attempts (the
    first in declaration order), that weight, and the largest rerun weight in spend."""

    attempts: int
    pair: tuple[str, str] | None
    spend: int


def _worst_sums(graph: LoopGraph) -> WorstSums:
    """Three phases: the weights (spend scaled to exact integers), the descendants' weights of
    every node (one bottom-up pass), the heaviest rerun over the repair pairs."""
    attempts = [v.attempts for v in graph.nodes]
    exact = _exact([v.attempts * v.spend_ceiling for v in graph.nodes])
    spends, scale = exact if exact is not None else ([0] * len(attempts), 1)
    desc = _descendants(graph, attempts, spends)
    worst = _worst_rerun(graph, attempts, spends, desc)
    return WorstSums(sum(attempts), worst.attempts, worst.pair,
                     sum(spends) if exact is not None else None,
                     worst.spend if exact is not None else None, scale)


def _kept_as_sets(graph: LoopGraph) -> list[bool]:
    """Which S_i are needed as sets: those a predecessor unites with another successor's (a
    chain needs none), and those a needed set is built from."""
    nodes, index, succ = graph.nodes, graph._index, graph.successors
    need = [False] * len(nodes)
    for i, v in enumerate(nodes):
        need[i] = any(len(succ[p]) > 1 or need[p] for p in (index[q] for q in v.needs))
    return need


def _descendants(graph: LoopGraph, attempts: list[int], spends: list[int]) -> Descendants:
    """desc(i)'s weights for every node, bottom-up. A small set is a frozenset of node indices,
    a large one an int shifted down to its own node (bit 0 = i), so a fan's leaves cost a few
    entries each; a set is dropped once the last predecessor that needs it is done."""
    nodes, succ = graph.nodes, graph.successors
    n = len(nodes)  # node i is the i-th in topological order
    weigh = _Weigher(attempts, spends)
    need = _kept_as_sets(graph)
    waiting = [len(v.needs) for v in nodes]
    closed: dict[int, int | frozenset[int]] = {}
    desc_a = [0] * n
    desc_c = [0] * n
    for i in range(n - 1, -1, -1):
        out = succ[i]
        mine: int | frozenset[int] = frozenset((i,))
        if out:
            # the successor with the heaviest S_s carries most of desc(i); weigh only the rest
            top = max(out, key=lambda j: attempts[j] + desc_a[j])
            da, dc = attempts[top] + desc_a[top], spends[top] + desc_c[top]
            if len(out) > 1:
                (ea, ec), mine = _union_below(i, out, top, closed, attempts, spends, weigh)
                da, dc = da + ea, dc + ec
            elif need[i]:
                x = closed[top]
                if isinstance(x, frozenset) and len(x) < _SPARSE:
                    mine = x | {i}
                else:
                    mine = _dense(x, top, i) | 1
            desc_a[i], desc_c[i] = da, dc
            for j in out:
                waiting[j] -= 1
                if waiting[j] == 0:
                    closed.pop(j, None)
        if need[i]:
            if type(mine) is frozenset and len(mine) > _SPARSE:
                mine = _dense(mine, i, i)
            closed[i] = mine
    return Descendants(desc_a, desc_c)


def _union_below(i: int, out: tuple[int, ...], top: int, closed: dict[int, int | frozenset[int]],
                 attempts: list[int], spends: list[int], weigh: _Weigher
                 ) -> tuple[tuple[int, ...], int | frozenset[int]]:
    """S_i for a node with several successors: the union of their sets and i itself, and the
    weights (attempts, spend) of what the union adds to the heaviest successor's set `top`."""
    own = frozenset((i,))
    sets = [closed[j] for j in out]
    if sum(len(x) if type(x) is frozenset else _SPARSE + 1 for x in sets) <= _SPARSE:
        # every set is a frozenset here (the sum above counts an int as too many)
        union = frozenset[int]().union(*sets)  # type: ignore[arg-type]  # see above
        extra = union - closed[top]  # type: ignore[operator]  # a frozenset too
        return ((sum(attempts[e] for e in extra), sum(spends[e] for e in extra)),
                union | own)
    # the small sets' members go into one buffer, the large ones are OR-ed smallest first:
    # each OR copies the larger operand, so neither a wide fan of small sets nor a few large
    # ones costs more than their sizes
    bits = _dense(closed[top], top, i)
    members: list[int] = []
    wide: list[int] = []
    for j in out:
        if j != top:
            x = closed[j]
            if isinstance(x, int):
                wide.append(x << (j - i))
            else:
                members.extend(x)
    merged = _bits(members, i) | bits
    for w in sorted(wide, key=int.bit_length):
        merged |= w
    added = merged ^ bits
    return (weigh(added, i) if added else (0, 0)), merged | 1


def _worst_rerun(graph: LoopGraph, attempts: list[int], spends: list[int],
                 desc: Descendants) -> WorstRerun:
    """Over every repair pair (d, u): the weight of S_u \\ desc(d), which is a_u + desc(u) -
    desc(d) since desc(d) lies inside desc(u) (d is u or below it)."""
    index = graph._index
    best_a = best_c = 0
    pair = None
    for v in graph.nodes:
        d = index[v.name]
        for u_name in v.repairs:
            u = index[u_name]
            rerun_a = attempts[u] + desc.attempts[u] - desc.attempts[d]
            rerun_c = spends[u] + desc.spend[u] - desc.spend[d]
            if pair is None or rerun_a > best_a:
                best_a, pair = rerun_a, (v.name, u_name)
            best_c = max(best_c, rerun_c)
    return WorstRerun(best_a, pair, best_c)


def attempt_bound(graph: LoopGraph) -> int:
    """W: the tight worst-case total of attempts over every schedule and verdict sequence."""
    return worst_sums(graph).attempts(graph.repair_budget)


def spend_bound(graph: LoopGraph) -> float:
    """W_c: the pre-run spend bound (each attempt charged its full ceiling c_v)."""
    return worst_sums(graph).spend(graph.repair_budget)


def peer_bound(graph: LoopGraph) -> int:
    """The peer engine's published bound (1 + K) · Σ a_v, looser than W."""
    return (1 + graph.repair_budget) * sum(n.attempts for n in graph.nodes)


def worst_repair_pair(graph: LoopGraph) -> tuple[str, str] | None:
    """The (d, u) pair that maximises the re-run attempts; the schedule reaching W repeats it."""
    return worst_sums(graph).pair


# ---- symbolic ---------------------------------------------------------------------------------

def __getattr__(name: str) -> Any:  # `model.bounds.K`, built on first use (sympy is slow to load)
    if name == "K":
        import sympy

        return sympy.Symbol("K", integer=True, nonnegative=True)
    raise AttributeError(name)


def attempt_symbol(name: str) -> sympy.Symbol:
    import sympy

    return sympy.Symbol(f"a_{name}", integer=True, positive=True)


def ceiling_symbol(name: str) -> sympy.Symbol:
    import sympy

    return sympy.Symbol(f"c_{name}", nonnegative=True)


def symbolic_attempt_bound(graph: LoopGraph) -> sympy.Expr:
    """W over symbols a_v and K for this graph's shape and repair relation."""
    return _symbolic(graph, attempt_symbol)


def symbolic_spend_bound(graph: LoopGraph) -> sympy.Expr:
    """W_c over symbols a_v, c_v and K."""
    return _symbolic(graph, lambda v: attempt_symbol(v) * ceiling_symbol(v))


def _symbolic(graph: LoopGraph, weight: Callable[[str], sympy.Expr]) -> sympy.Expr:
    import sympy

    base = sympy.Add(*(weight(v) for v in graph.names))
    sums = {sympy.Add(*(weight(w) for w in sorted(rerun_set(graph, d, u))))
            for d, u in graph.repair_pairs}
    if not sums:
        return base
    return base + __getattr__("K") * sympy.Max(*sums)


def symbolic_values(graph: LoopGraph) -> dict[sympy.Symbol, float]:
    """The substitution that turns a symbolic bound into this graph's number."""
    values: dict[sympy.Symbol, float] = {__getattr__("K"): graph.repair_budget}
    for n in graph.nodes:
        values[attempt_symbol(n.name)] = n.attempts
        values[ceiling_symbol(n.name)] = n.spend_ceiling
    return values
