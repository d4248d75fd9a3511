"""Every validation rule of model/graph.py: each bad graph is refused naming the node and the rule."""

from __future__ import annotations

import math

import pytest

from loopproof.model.graph import GraphError, LoopGraph, NodeSpec


def build(*nodes: NodeSpec, k: int = 0, b: float = math.inf) -> LoopGraph:
    return LoopGraph.build(nodes, repair_budget=k, spend_budget=b)


# (nodes, K, B, expected node, expected field, words the message must contain)
BAD = {
    "no nodes": ((), 0, math.inf, None, "node", "no nodes"),
    "negative K": ((NodeSpec("a"),), -1, math.inf, None, "repair_budget", "K must be an integer >= 0"),
    "K not an int": ((NodeSpec("a"),), 1.5, math.inf, None, "repair_budget", "K must be an integer"),
    "K a bool": ((NodeSpec("a"),), True, math.inf, None, "repair_budget", "K must be an integer"),
    "negative B": ((NodeSpec("a"),), 0, -1.0, None, "spend_budget", "B must be a number >= 0"),
    "B is NaN": ((NodeSpec("a"),), 0, math.nan, None, "spend_budget", "B must be a number >= 0"),
    "B a string": ((NodeSpec("a"),), 0, "10", None, "spend_budget", "B must be a number"),
    "empty name": ((NodeSpec(""),), 0, math.inf, "", "name", "non-empty name"),
    "duplicate node": ((NodeSpec("a"), NodeSpec("a")), 0, math.inf, "a", "name", "declared twice"),
    "attempts zero": ((NodeSpec("a", attempts=0),), 0, math.inf, "a", "attempts", "a_v must be an integer >= 1"),
    "attempts negative": ((NodeSpec("a", attempts=-2),), 0, math.inf, "a", "attempts", ">= 1, got -2"),
    "attempts a float": ((NodeSpec("a", attempts=1.0),), 0, math.inf, "a", "attempts", "a_v must be an integer"),
    "attempts a bool": ((NodeSpec("a", attempts=True),), 0, math.inf, "a", "attempts", "a_v must be an integer"),
    "negative ceiling": ((NodeSpec("a", spend_ceiling=-0.5),), 0, math.inf, "a", "spend_ceiling", "c_v must be a number >= 0"),
    "NaN ceiling": ((NodeSpec("a", spend_ceiling=math.nan),), 0, math.inf, "a", "spend_ceiling", "c_v must be a number >= 0"),
    "unknown need": ((NodeSpec("a", needs=("ghost",)),), 0, math.inf, "a", "needs", "unknown node 'ghost'"),
    "needs itself": ((NodeSpec("a", needs=("a",)),), 0, math.inf, "a", "needs", "cannot need itself"),
    "need listed twice": ((NodeSpec("a"), NodeSpec("b", needs=("a", "a"))), 0, math.inf, "b", "needs", "listed twice"),
    "cycle": ((NodeSpec("a", needs=("c",)), NodeSpec("b", needs=("a",)), NodeSpec("c", needs=("b",))),
              0, math.inf, None, "needs", "cycle"),
    "unknown repair target": ((NodeSpec("a", repairs=("ghost",)),), 0, math.inf, "a", "repairs", "unknown node 'ghost'"),
    "repair target a descendant": ((NodeSpec("a", repairs=("b",)), NodeSpec("b", needs=("a",))),
                                   0, math.inf, "a", "repairs", "neither the node itself nor an ancestor"),
    "repair target unrelated": ((NodeSpec("a"), NodeSpec("b", repairs=("a",))),
                                0, math.inf, "b", "repairs", "neither the node itself nor an ancestor"),
    "repair target listed twice": ((NodeSpec("a", repairs=("a", "a")),), 0, math.inf, "a", "repairs", "listed twice"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_bad_graph_is_refused_naming_node_and_rule(case: str) -> None:
    nodes, k, b, node, field_name, words = BAD[case]
    with pytest.raises(GraphError) as info:
        build(*nodes, k=k, b=b)
    err = info.value
    assert err.field == field_name
    assert words in str(err)
    assert "fix:" in str(err) and err.fix
    if node is not None:
        assert err.node == node
        assert f"node {node!r}" in str(err)


def test_cycle_names_a_node_on_the_cycle() -> None:
    with pytest.raises(GraphError) as info:
        build(NodeSpec("a", needs=("c",)), NodeSpec("b", needs=("a",)), NodeSpec("c", needs=("b",)),
              NodeSpec("z"))
    assert info.value.node in {"a", "b", "c"}
    assert "->" in str(info.value)


def test_two_node_cycle_is_refused() -> None:
    with pytest.raises(GraphError, match="cycle"):
        build(NodeSpec("a", needs=("b",)), NodeSpec("b", needs=("a",)))


@pytest.mark.parametrize("names", [("a", "b"), ("a", "b", "c"), ("p", "q", "r", "s")])
def test_the_cycle_is_printed_as_the_loop_it_is(names) -> None:
    """Every edge of the printed loop is a real need, and the loop closes on its first node."""
    nodes = [NodeSpec(n, needs=(names[i - 1],)) for i, n in enumerate(names)]
    with pytest.raises(GraphError) as info:
        build(*nodes)
    loop = str(info.value).split("cycle (")[1].split(")")[0].split(" -> ")
    assert loop[0] == loop[-1] and sorted(loop[:-1]) == sorted(names)
    needs = {n.name: set(n.needs) for n in nodes}
    assert all(pred in needs[succ] for pred, succ in zip(loop, loop[1:], strict=False))
    assert info.value.node in names


def test_repair_hint_lists_the_ancestors() -> None:
    with pytest.raises(GraphError) as info:
        build(NodeSpec("a"), NodeSpec("b", needs=("a",)), NodeSpec("c", needs=("b",), repairs=("z",)),
              NodeSpec("z"))
    assert "['a', 'b']" in info.value.fix


def test_a_valid_graph_and_its_structure() -> None:
    # declared out of order: the graph keeps a topological order (ties by declaration)
    g = build(NodeSpec("c", needs=("b",), repairs=("a", "c")), NodeSpec("a", attempts=2),
              NodeSpec("b", needs=("a",), repairs=("a",)), NodeSpec("x"), k=2, b=10.0)
    assert g.names == ("a", "b", "c", "x")
    assert g.index("c") == 2 and g.node("a").attempts == 2
    assert g.desc("a") == {"b", "c"} and g.desc("c") == frozenset()
    assert g.ancestors("c") == {"a", "b"}
    assert g.subtree("b") == {"b", "c"}
    assert g.predecessors("c") == ("b",)
    assert set(g.repair_pairs) == {("c", "a"), ("c", "c"), ("b", "a")}
    assert g.repair_budget == 2 and g.spend_budget == 10.0


def test_a_repair_may_target_a_transitive_ancestor_or_the_node_itself() -> None:
    g = build(NodeSpec("a"), NodeSpec("b", needs=("a",)), NodeSpec("c", needs=("b",), repairs=("a", "c")))
    assert ("c", "a") in g.repair_pairs and ("c", "c") in g.repair_pairs


def test_zero_budgets_are_valid() -> None:
    g = build(NodeSpec("a", spend_ceiling=0.0), k=0, b=0.0)
    assert g.repair_budget == 0 and g.spend_budget == 0.0


def test_with_repair_budget_changes_only_k_and_validates_it() -> None:
    g = build(NodeSpec("a", attempts=2), NodeSpec("b", needs=("a",), repairs=("a",)), k=1, b=4.0)
    h = g.with_repair_budget(3)
    assert h.repair_budget == 3 and h.nodes == g.nodes and h.spend_budget == 4.0
    assert h.names == g.names and h.subtree("a") == g.subtree("a")
    assert g.repair_budget == 1
    with pytest.raises(GraphError) as info:
        g.with_repair_budget(-1)
    assert info.value.field == "repair_budget"
