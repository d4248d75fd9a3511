"""The bound explorer: what it enumerates, that it finds no mismatch, and that it can fail."""

from __future__ import annotations

import functools
import itertools
import json
import subprocess
import sys

import pytest

import loopproof.model.explore as explore_module
from loopproof.model.bounds import attempt_bound
from loopproof.model.explore import (
    Deadlock,
    WorstCase,
    allowed_pairs,
    automorphisms,
    build_graph,
    check,
    dags,
    explore,
    main,
    readable_pairs,
    relations,
    true_worst_case,
)
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.state import Status, initial_state
from loopproof.model.transitions import (
    Begin,
    Cancel,
    Verdict,
    all_control_candidates,
    enabled,
    step,
)


def test_one_dag_per_isomorphism_class() -> None:
    # unlabelled DAGs on n nodes: 1, 2, 6, 31 (OEIS A003087)
    assert [len(dags(n)) for n in range(1, 5)] == [1, 2, 6, 31]
    assert all(i < j for g in dags(4) for i, j in g)


def test_allowed_pairs_are_self_and_ancestors() -> None:
    chain = ((0, 1), (1, 2))
    assert allowed_pairs(3, chain) == ((0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2))
    assert len(list(relations(3, chain))) == 2 ** 6
    assert allowed_pairs(2, ()) == ((0, 0), (1, 1))


def test_automorphisms_of_a_fork() -> None:
    assert automorphisms(3, ((0, 1), (0, 2))) == [(0, 1, 2), (0, 2, 1)]
    assert len(automorphisms(3, ())) == 6
    assert automorphisms(3, ((0, 1), (1, 2))) == [(0, 1, 2)]


def test_symmetric_cases_have_the_same_worst_case() -> None:
    # The explorer skips all but the least of each orbit; renaming by an automorphism must not
    # change the worst case. Checked on every case of a 3-node fork and of a 2-node antichain.
    # (Each case's worst case is searched once: a renamed case is another case of the same
    # DAG, and the identity renames nothing.)
    for n, edges in ((3, ((0, 1), (0, 2))), (2, ())):
        autos = [q for q in automorphisms(n, edges) if q != tuple(range(n))]
        assert autos  # a swap of the two leaves

        @functools.cache
        def worst(relation: tuple, att: tuple, n=n, edges=edges) -> int:
            return true_worst_case(build_graph(n, edges, relation, att, 1))[0]

        for relation in relations(n, edges):
            for att in itertools.product((1, 2), repeat=n):
                here = worst(tuple(relation), att)
                for q in autos:
                    rel = tuple(sorted((q[d], q[u]) for d, u in relation))
                    moved = [0] * n
                    for v, a in enumerate(att):
                        moved[q[v]] = a
                    assert worst(rel, tuple(moved)) == here


def test_one_table_serves_every_k_and_every_relation() -> None:
    # The explorer keeps one memo table per DAG and a_v, keyed on repairs left and the readable
    # part of R; every answer must equal a fresh search of that graph alone.
    for edges, att in ((((0, 1), (1, 2)), (2, 1, 2)), (((0, 1), (0, 2)), (1, 2, 2))):
        shared = WorstCase()
        for relation in relations(3, edges):
            for k in (2, 0, 1):
                g = build_graph(3, edges, relation, att, k)
                alone = true_worst_case(g)[0]
                assert shared.remaining(g, initial_state(g)) == alone == attempt_bound(g)
                assert replay_total(g, shared) == alone


def replay_total(graph: LoopGraph, search: WorstCase) -> int:
    s = initial_state(graph)
    for e in search.schedule(graph):
        s = step(graph, s, e)
    assert s.ended
    return s.attempts_total


def test_readable_pairs() -> None:
    g = build_graph(3, ((0, 1), (1, 2)), ((1, 0), (2, 1), (2, 2)), (1, 1, 1), 2)
    s = initial_state(g)
    assert readable_pairs(g, s, 0) == ()
    assert readable_pairs(g, s, 2) == (("b", "a"), ("c", "b"), ("c", "c"))
    done_a = step(g, step(g, s, Begin("a")), Verdict("a", True))
    # a is DONE: with one repair left only b's and c's pairs can be read ...
    assert readable_pairs(g, done_a, 1) == (("b", "a"), ("c", "b"), ("c", "c"))
    done_ab = step(g, step(g, done_a, Begin("b")), Verdict("b", True))
    assert readable_pairs(g, done_ab, 1) == (("c", "b"), ("c", "c"))
    # ... but with two left, (c, b) may put b back, and b's pair can then be read
    assert readable_pairs(g, done_ab, 2) == (("b", "a"), ("c", "b"), ("c", "c"))


@functools.cache
def serial_up_to_three() -> dict:
    """`explore(3)` serially (read by the two tests below: one search)."""
    return explore(3, workers=1)


def test_explorer_up_to_three_nodes_finds_no_mismatch() -> None:
    summary = serial_up_to_three()
    assert summary["graphs"] == 9
    assert summary["cases"] == 4518
    assert summary["mismatches"] == 0 and "first_counterexample" not in summary


def test_interleavings_of_two_attempts_up_to_three_nodes_find_no_mismatch() -> None:
    serial, two = serial_up_to_three(), explore(3, workers=1, max_parallel=2)
    assert two["cases"] == serial["cases"] == 4518 and two["max_parallel"] == 2
    assert two["mismatches"] == 0 and "first_counterexample" not in two
    assert two["states"] > serial["states"]  # the interleavings were searched, not skipped
    assert "max_parallel" not in serial  # the serial summary keeps its keys


def test_the_command_prints_the_summary_as_json() -> None:
    done = subprocess.run([sys.executable, "-m", "loopproof.model.explore", "--max-nodes", "2", "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert {"graphs", "cases", "mismatches", "seconds"} <= set(summary)
    assert summary["graphs"] == 3 and summary["mismatches"] == 0 and summary["cases"] > 0


@pytest.mark.parametrize(("delta", "problem"), [(-1, "W exceeded"), (1, "W not reached")])
def test_a_wrong_bound_is_a_mismatch_with_a_counterexample(monkeypatch, capsys, delta: int,
                                                           problem: str) -> None:
    monkeypatch.setattr(explore_module, "attempt_bound", lambda g: attempt_bound(g) + delta)
    g = LoopGraph.build([NodeSpec("a", attempts=2), NodeSpec("b", needs=("a",), repairs=("a",))],
                        repair_budget=1)
    found = check(g)
    assert found is not None and found["problem"] == problem
    assert found["true_worst_case"] == 6 and found["W"] == 6 + delta
    # the schedule reaches the true worst case when replayed through the model
    s = initial_state(g)
    events = {repr(e): e for e in all_control_candidates(g)}
    for text in found["schedule"]:
        s = step(g, s, events[text])
    assert s.ended and s.attempts_total == 6

    assert main(["--max-nodes", "2", "--workers", "1", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["mismatches"] == summary["cases"] > 0  # a bound off by one is wrong everywhere
    first = summary["first_counterexample"]
    assert {"nodes", "attempts", "needs", "repairs", "K", "W", "true_worst_case", "schedule"} <= set(first)


def test_a_state_with_no_event_that_has_not_ended_is_a_deadlock(monkeypatch) -> None:
    g = LoopGraph.build([NodeSpec("a")])
    monkeypatch.setattr(explore_module, "successors", lambda graph, s: [])
    with pytest.raises(Deadlock):
        WorstCase().remaining(g, initial_state(g))
    found = check(g)
    assert found is not None and found["problem"] == "deadlock"


def test_attempts_are_counted_at_begin() -> None:
    g = LoopGraph.build([NodeSpec("a", attempts=3)])
    worst, schedule = true_worst_case(g)
    assert worst == 3 == sum(isinstance(e, Begin) for e in schedule)


# ---- the operator's Cancel is searched too -------------------------------------------------------

def test_the_explorer_searches_cancels(monkeypatch) -> None:
    """Cancel is among the successors the explorer follows (it comes from control_events)."""
    seen: list[object] = []
    real = explore_module.successors

    def spy(graph, s):
        out = real(graph, s)
        seen.extend(e for e, _ in out)
        return out

    monkeypatch.setattr(explore_module, "successors", spy)
    g = LoopGraph.build([NodeSpec("a", attempts=2, repairs=("a",))], repair_budget=1)
    assert WorstCase().remaining(g, initial_state(g)) == attempt_bound(g) == 4
    assert Cancel("a") in seen


def plain_worst(graph: LoopGraph, s) -> int:
    """The worst case by plain recursion over every successor: no memo, no abstraction."""
    return max((int(isinstance(e, Begin)) + plain_worst(graph, t)
                for e, t in explore_module.successors(graph, s)), default=0)


@pytest.mark.parametrize("edges, relation, att, k", [
    ((), ((0, 0),), (2,), 2),
    (((0, 1),), ((1, 0), (1, 1)), (2, 1), 1),
    (((0, 1),), ((0, 0), (1, 0)), (1, 2), 2),
    (((0, 1), (0, 2)), ((1, 0), (2, 2)), (1, 1, 2), 1),
])
def test_the_abstraction_loses_nothing_with_cancels(edges, relation, att, k) -> None:
    """The memo key drops an EXHAUSTED node's counter (a cancel leaves attempts unused): the
    memoised worst case equals a plain search of every schedule, cancels included."""
    g = build_graph(len(att), edges, relation, att, k)
    assert WorstCase().remaining(g, initial_state(g)) == plain_worst(g, initial_state(g))


def test_a_cancel_of_a_done_node_is_caught_exceeding_w(monkeypatch) -> None:
    """Planted fault: Cancel also allowed on a DONE node. The repair that follows re-runs
    descendants that already ran, and the explorer finds more than W attempts."""
    ok = Cancel.why_not

    def also_done(self, graph, s):
        if (not s.ended and s.running(graph) is None and s.exhausted(graph) is None
                and s.status_of(graph, self.node) is Status.DONE):
            return None
        return ok(self, graph, s)

    monkeypatch.setattr(Cancel, "why_not", also_done)
    # successors: every candidate filtered by its (faulty) guard, not the narrowed generator
    monkeypatch.setattr(explore_module, "successors", lambda graph, s: [
        (e, step(graph, s, e)) for e in all_control_candidates(graph) if enabled(graph, s, e)])
    g = LoopGraph.build([NodeSpec("a", repairs=("a",)), NodeSpec("b", needs=("a",))],
                        repair_budget=1)
    found = check(g)
    assert found is not None and found["problem"] == "W exceeded"
    assert found["W"] == 3 and found["true_worst_case"] == 4
    assert "Cancel(node='a')" in found["schedule"]
