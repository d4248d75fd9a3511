"""The one Hypothesis strategy of the model's graphs that every test draws its graphs from.

Why one: the bounds tests, the Coq differential test, the frontier, the run encoding's
differential test and both engine state machines each drew their own DAG (four copies, each with
its own idea of how needs and repairs are drawn), so a shape one of them could never draw was a
gap nobody saw. Here a graph is drawn one way: a node count, then each node's needs among the
nodes before it (a DAG by construction), then per node its repair targets among itself and its
ancestors (the pairs the model allows), its attempts a_v and its ceiling c_v, then K and B. The
parameters say only how large each part may be.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hypothesis import strategies as st

from loopproof.model.graph import LoopGraph, NodeSpec

CEILINGS = (0.5, 1.0, 2.0)  # binary fractions: float sums stay exact


@st.composite
def graphs(draw: st.DrawFn, *, nodes: tuple[int, int] = (1, 4), max_needs: int | None = 2,
           max_repairs: int | None = 2, attempts: tuple[int, int] = (1, 3),
           ceilings: Sequence[float] = CEILINGS, repair_budget: tuple[int, int] = (0, 2),
           budgets: Sequence[float] = (math.inf,), first_repairs: int = 0,
           names: Sequence[str] | None = None) -> LoopGraph:
    """A LoopGraph of `nodes` (least, most) nodes named `names` (n0, n1, ... by default), each
    needing at most `max_needs` earlier nodes and repairing at most `max_repairs` of itself and
    its ancestors (None: any number; the first node at least `first_repairs`), with attempts
    a_v in `attempts`, c_v from `ceilings`, K in `repair_budget` and B from `budgets` (sampled
    in their order: Hypothesis shrinks towards the first)."""
    n = draw(st.integers(*nodes))
    label = list(names[:n]) if names is not None else [f"n{i}" for i in range(n)]
    needs = {v: tuple(draw(st.lists(st.sampled_from(label[:i]), unique=True,
                                    max_size=max_needs))) if i else ()
             for i, v in enumerate(label)}
    plain = LoopGraph.build([NodeSpec(v, needs=needs[v]) for v in label])
    specs = []
    for i, v in enumerate(label):
        targets = [v, *sorted(plain.ancestors(v))]
        repairs = draw(st.lists(st.sampled_from(targets), unique=True,
                                min_size=first_repairs if i == 0 else 0, max_size=max_repairs))
        specs.append(NodeSpec(v, attempts=draw(st.integers(*attempts)),
                              spend_ceiling=draw(st.sampled_from(ceilings)), needs=needs[v],
                              repairs=tuple(repairs)))
    return LoopGraph.build(specs, repair_budget=draw(st.integers(*repair_budget)),
                           spend_budget=draw(st.sampled_from(budgets)))


def any_graphs(*, nodes: tuple[int, int] = (1, 4), attempts: tuple[int, int] = (1, 3),
               repair_budget: tuple[int, int] = (0, 3)) -> st.SearchStrategy[LoopGraph]:
    """`graphs` with any needs and any repair relation, B unbounded: the graphs of the bounds,
    the frontier and the Coq model, which hold for every DAG."""
    return graphs(nodes=nodes, max_needs=None, max_repairs=None, attempts=attempts,
                  repair_budget=repair_budget)
