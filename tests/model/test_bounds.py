"""G1's closed form W: never exceeded, reached by a concrete schedule, equal to its sympy form."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from fractions import Fraction

import pytest
from hypothesis import given, settings

from experiments.bounds.study import (
    SCALES,
    Scale,
    graph_text,
    load_results,
    plot_series,
    random_graph,
)
from experiments.bounds.study import run as run_experiment
from loopproof.model import bounds
from loopproof.model.bounds import (
    attempt_bound,
    bounds_by_definition,
    peer_bound,
    rerun_set,
    spend_bound,
    symbolic_attempt_bound,
    symbolic_spend_bound,
    symbolic_values,
    worst_repair_pair,
)
from loopproof.model.explore import true_worst_case
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.state import Outcome, RunState, Status, initial_state
from loopproof.model.transitions import control_events, step
from tests.support.paths import REPO as ROOT
from tests.support.strategies import any_graphs
from tests.support.worst_runs import maximising_schedule


def replay(graph: LoopGraph, events) -> RunState:
    s = initial_state(graph)
    for e in events:
        s = step(graph, s, e)
    return s


@settings(max_examples=60)
@given(any_graphs())
def test_w_is_never_exceeded_and_is_reached(graph: LoopGraph) -> None:
    worst, schedule = true_worst_case(graph)
    assert worst == attempt_bound(graph)
    end = replay(graph, schedule)
    assert end.ended and end.attempts_total == worst
    assert attempt_bound(graph) <= peer_bound(graph)


def brute_force_worst(graph: LoopGraph, s: RunState) -> int:
    """Every complete run, no memo, no abstraction: the most attempts any run begins."""
    events = list(control_events(graph, s))
    if not events:
        assert s.ended
        return s.attempts_total
    return max(brute_force_worst(graph, step(graph, s, e)) for e in events)


@settings(max_examples=25)
@given(any_graphs(nodes=(1, 3), attempts=(1, 2), repair_budget=(0, 1)))
def test_the_memoised_search_equals_enumerating_every_run(graph: LoopGraph) -> None:
    # Checks the explorer's state abstraction (it drops activations, passes, a DONE node's counter)
    assert true_worst_case(graph)[0] == brute_force_worst(graph, initial_state(graph))



@settings(max_examples=80)
@given(any_graphs(nodes=(1, 5), attempts=(1, 4), repair_budget=(0, 4)))
def test_repeating_the_maximising_pair_k_times_reaches_w(graph: LoopGraph) -> None:
    end = maximising_schedule(graph)
    assert end.outcome is Outcome.DONE
    assert end.attempts_total == attempt_bound(graph)
    assert end.repairs_used == (graph.repair_budget if graph.repair_pairs else 0)


def test_a_worked_example() -> None:
    # a -> b -> c, c may repair a; K = 2. Rerun set of (c, a) is {a, b, c}: W = 6 + 2 * 6 = 18,
    # the peer engine's bound is (1 + 2) * 6 = 18. With (b, a) only: S_a \ desc(b) = {a, b}.
    g = LoopGraph.build([NodeSpec("a", attempts=3), NodeSpec("b", attempts=2, needs=("a",)),
                         NodeSpec("c", attempts=1, needs=("b",), repairs=("a",))], repair_budget=2)
    assert attempt_bound(g) == 18 and peer_bound(g) == 18
    h = LoopGraph.build([NodeSpec("a", attempts=3),
                         NodeSpec("b", attempts=2, needs=("a",), repairs=("a",)),
                         NodeSpec("c", attempts=1, needs=("b",))], repair_budget=2)
    assert rerun_set(h, "b", "a") == {"a", "b"}
    assert attempt_bound(h) == 6 + 2 * 5 and peer_bound(h) == 18
    assert true_worst_case(h)[0] == 16
    assert maximising_schedule(h).attempts_total == 16


def test_no_repair_relation_means_w_is_the_sum_of_attempts() -> None:
    g = LoopGraph.build([NodeSpec("a", attempts=2), NodeSpec("b", attempts=3)], repair_budget=5)
    assert attempt_bound(g) == 5 and worst_repair_pair(g) is None
    assert true_worst_case(g)[0] == 5


def test_the_spend_bound_weights_attempts_by_their_ceiling() -> None:
    g = LoopGraph.build([NodeSpec("a", attempts=2, spend_ceiling=1.5),
                         NodeSpec("b", attempts=1, spend_ceiling=4.0, needs=("a",), repairs=("b",))],
                        repair_budget=3)
    assert math.isclose(spend_bound(g), 2 * 1.5 + 4.0 + 3 * 4.0)


@settings(max_examples=25)
@given(any_graphs(nodes=(1, 5)))
def test_the_symbolic_bounds_equal_the_numeric_ones(graph: LoopGraph) -> None:
    values = symbolic_values(graph)
    assert int(symbolic_attempt_bound(graph).subs(values)) == attempt_bound(graph)
    assert math.isclose(float(symbolic_spend_bound(graph).subs(values)), spend_bound(graph))


def test_the_symbolic_bound_is_the_closed_form() -> None:
    import sympy

    g = LoopGraph.build([NodeSpec("a"), NodeSpec("b", needs=("a",), repairs=("a", "b"))])
    w = symbolic_attempt_bound(g)
    a, b, k = sympy.symbols("a_a a_b K", integer=True, positive=True)
    k = sympy.Symbol("K", integer=True, nonnegative=True)
    assert sympy.simplify(w - (a + b + k * sympy.Max(a + b, b))) == 0
    # and it simplifies to the pair (b, a) since a_a >= 1
    assert sympy.simplify(w - (a + b + k * (a + b))) == 0


def test_status_enum_is_used_by_the_schedule() -> None:
    g = LoopGraph.build([NodeSpec("a", attempts=2, repairs=("a",))], repair_budget=1)
    end = maximising_schedule(g)
    assert end.status == (Status.DONE,) and end.attempts_total == 4 == attempt_bound(g)


# ---- the experiment (experiments/bounds/study.py) -----------------------------------------------------

def test_the_experiment_is_byte_identical_for_a_seed(tmp_path) -> None:
    tiny = Scale(explore_nodes=2, graphs=10, min_nodes=3, max_nodes=5)
    first, _ = run_experiment("smoke", 3, tmp_path / "one", workers=1, scale=tiny)
    run_experiment("smoke", 3, tmp_path / "two", workers=1, scale=tiny)
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert names == ["explorer.json", "random.csv", "random.json", "summary.json"]
    for name in names:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    assert "seconds" not in (tmp_path / "one" / "explorer.json").read_text()
    assert first["worst_equals_w"] == first["random_graphs"] == 10
    assert first["worst_exceeds_w"] == 0 and first["explorer_mismatches"] == 0

    rows = load_results(tmp_path / "one")["rows"]
    assert all(r["W"] <= r["peer"] and r["worst"] == r["W"] for r in rows)
    series = plot_series(rows)
    assert series["W"] == sorted(series["W"]) and len(series["x"]) == len(rows)


def test_the_seed_decides_the_random_graphs() -> None:
    def draw(seed: int) -> list[str]:
        rng = random.Random(seed)
        return [graph_text(random_graph(rng, SCALES["smoke"])) for _ in range(5)]

    assert draw(1) == draw(1) and draw(1) != draw(2)
    assert len(set(draw(1))) > 1


def test_the_experiment_refuses_a_file_as_its_output_directory(tmp_path, capsys) -> None:
    from experiments.bounds.study import main

    target = tmp_path / "taken"
    target.write_text("x")
    assert main(["--scale", "smoke", "--out", str(target)]) == 2
    assert "--out" in capsys.readouterr().err and target.read_text() == "x"


# ---- the one-pass computation (model/bounds.py `worst_sums`) against plain sets ------------------

def _random_dag(rng: random.Random, n: int, distinct_weights: bool) -> LoopGraph:
    """Up to 3 predecessors per node among the earlier ones, repairs to the node or an ancestor."""
    anc: list[set[int]] = []
    specs = []
    for i in range(n):
        preds = rng.sample(range(i), min(i, rng.randint(0, 3)))
        anc.append(set().union(*(anc[p] | {p} for p in preds)))
        allowed = sorted(anc[i] | {i})
        ceiling = rng.random() * 10 if distinct_weights else rng.choice([0.0, 0.5, 2.25])
        specs.append(NodeSpec(f"v{i}", attempts=rng.randint(1, 12 if distinct_weights else 3),
                              spend_ceiling=ceiling, needs=tuple(f"v{p}" for p in preds),
                              repairs=tuple(f"v{u}" for u in rng.sample(allowed, min(2, len(allowed))))))
    return LoopGraph.build(specs, repair_budget=rng.randint(0, 4))


@pytest.mark.parametrize(("sparse", "walk"), [(64, 256), (0, 0), (2, 3), (5, 10**9)])
def test_the_one_pass_bounds_equal_the_closed_form_over_sets(monkeypatch, sparse, walk) -> None:
    """Every representation of the bitsets (small frozensets, shifted ints, bit walks, one mask
    per weight) gives W, the pair and the exactly rounded W_c of the plain-set formula."""
    monkeypatch.setattr(bounds, "_SPARSE", sparse)
    monkeypatch.setattr(bounds, "_WALK", walk)
    rng = random.Random(sparse * 1000 + walk % 1000)
    for trial in range(150):
        graph = _random_dag(rng, rng.randint(1, 60), distinct_weights=trial % 2 == 0)
        w, pair, w_c = bounds_by_definition(graph)
        assert attempt_bound(graph) == w
        assert worst_repair_pair(graph) == pair
        assert spend_bound(graph) == float(w_c)  # correctly rounded: float(Fraction) rounds once


def test_the_spend_bound_is_exact_whatever_the_order_of_the_sets() -> None:
    """W_c is the exact sum rounded once: summing floats in set-iteration order (which changes
    with the string hash seed) gave a last digit that changed from one process to the next."""
    code = ("from loopproof.model.bounds import spend_bound\n"
            "from loopproof.model.graph import LoopGraph, NodeSpec\n"
            "names = [f'n{i}' for i in range(40)]\n"
            "nodes = [NodeSpec('r', spend_ceiling=0.1)] + [\n"
            "    NodeSpec(x, spend_ceiling=0.1 * (i % 7 + 1), needs=('r',)) for i, x in enumerate(names)]\n"
            "nodes.append(NodeSpec('z', spend_ceiling=0.3, needs=tuple(names), repairs=('r',)))\n"
            "print(repr(spend_bound(LoopGraph.build(nodes, repair_budget=1))))\n")
    seen = set()
    for seed in range(8):
        env = dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=str(ROOT))
        seen.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                text=True, check=True).stdout.strip())
    names = [f"n{i}" for i in range(40)]
    nodes = [NodeSpec("r", spend_ceiling=0.1)] + [
        NodeSpec(x, spend_ceiling=0.1 * (i % 7 + 1), needs=("r",)) for i, x in enumerate(names)]
    nodes.append(NodeSpec("z", spend_ceiling=0.3, needs=tuple(names), repairs=("r",)))
    exact = bounds_by_definition(LoopGraph.build(nodes, repair_budget=1))[2]
    assert exact == 2 * sum(Fraction(v.spend_ceiling) for v in nodes)  # every node re-runs
    assert seen == {repr(float(exact))}


def test_a_long_chain_is_bounded_without_building_a_closure() -> None:
    """The bound of a chain reads no desc/subtree closure (they are built lazily, per node)."""
    nodes = [NodeSpec(f"n{i}", attempts=1 + i % 3, needs=(f"n{i - 1}",) if i else (),
                      repairs=(f"n{max(0, i - 5)}",)) for i in range(3000)]
    graph = LoopGraph.build(nodes, repair_budget=2)
    assert attempt_bound(graph) == sum(v.attempts for v in nodes) + 2 * max(
        sum(nodes[j].attempts for j in range(max(0, i - 5), i + 1)) for i in range(3000))
    assert not graph.__dict__.get("_closures") and "_desc" not in graph.__dict__
