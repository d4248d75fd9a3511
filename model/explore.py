"""The bound explorer: on every small graph, the true worst case of attempts equals W.

    python -m loopproof.model.explore --max-nodes 4 --json
    python -m loopproof.model.explore --max-nodes 4 --max-parallel 2   # every interleaving of 2 attempts

Enumerates every DAG with 1..max-nodes nodes (one per isomorphism class), every repair relation
(every subset of the allowed pairs (d, u), u = d or u an ancestor of d), a_v in {1, 2} and K in
{0, 1, 2}. For each case it computes the true worst-case attempt total over all schedules and all
verdict sequences by exhaustive search of the model's state space, and compares it with
`model.bounds.attempt_bound` (W). `WorstCase` steps `RunState`s through
`model.transitions.successors`; `run_task` and `true_worst_case` search `model.search_space`, the
same transitions on the memo key's small-integer state (~5x less CPU), which
`tests/model/test_search_space.py` ties to the model at every state the model's search expands. A case
the fast search finds wrong is searched again by `WorstCase`, whose counterexample is reported. A mismatch (W exceeded, W not reached, or a state that has
not ended yet has no enabled event) exits 1 and prints the case and the schedule reaching the true
worst case.

Reductions, each sound for the number computed (the maximum of attempts still to come):

- memoised on an abstraction of the state: node statuses, attempt counters (a DONE or EXHAUSTED
  node's counter is dropped: no guard or effect reads it before a repair resets it to 0 -- an
  exhausted node, whether by its last failed attempt or by the operator's Cancel, is followed
  only by Repair or Fail), repairs left (K minus repairs used) and the outcome. Activations, the
  pass set, the cancelled set and the running total are dropped: no guard reads them. Spend
  fields are constant since B is unbounded here (no spend events).
- one table per DAG and a_v vector, for every K and every repair relation: the key holds repairs
  *left* rather than K, and only the part of R the rest of the run can read (`readable_pairs`:
  the pairs of nodes that are not DONE, or may be put back by a repair still affordable). Two
  graphs that agree on that part have the same enabled events and successors from the state on.
- several attempts in flight (`--max-parallel N`, the graphs' `max_parallel`): the statuses in the
  key hold every RUNNING node and the counters each one's attempts, so interleavings that reach
  the same statuses and counters share an entry; nothing else is read (no spend events).
- symmetry: for a DAG with automorphisms, a (repair relation, a_v) assignment is explored only
  if it is the least of its orbit; renaming nodes by an automorphism maps schedules to schedules
  one for one, so the worst case is the same.

Why one module: just over 400 lines on purpose, since the reductions above are sound only for
the search they prune and the enumeration of cases they skip (the memo key, `readable_pairs`
and the orbit filter are one argument), so the searches, the enumeration and the check that
compares them with W are read and changed together.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from loopproof.model.bounds import attempt_bound
from loopproof.model.executor import local
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.search_space import AbstractSpace, AbstractWorstCase, Deadlocked
from loopproof.model.state import RunState, Status, initial_state
from loopproof.model.transitions import Begin, Event, step, successors

ATTEMPT_CHOICES: tuple[int, ...] = (1, 2)
K_CHOICES: tuple[int, ...] = (0, 1, 2)
NAMES = "abcdefghij"

Edges = tuple[tuple[int, int], ...]


class Deadlock(Exception):
    """A state that has not ended has no enabled control event: the run could never finish."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        super().__init__(f"no enabled event in a running state: {state}")


# ---- the exhaustive search ----------------------------------------------------------------------

Key = tuple[object, ...]


def _key(graph: LoopGraph, s: RunState) -> Key:
    """The part of a state and of the graph the rest of the run depends on (module docstring).
    Both abstractions are kept per graph shape, keyed by what they read."""
    memo = graph.shape_memo
    status, left = s.status, graph.repair_budget - s.repairs_used
    counters = memo.setdefault("counters", {})
    attempts = counters.get((status, s.attempts))
    if attempts is None:
        attempts = s.attempts
        if Status.DONE in status or Status.EXHAUSTED in status:
            attempts = tuple(0 if st is Status.DONE or st is Status.EXHAUSTED else i
                             for st, i in zip(status, attempts, strict=True))
        counters[(status, s.attempts)] = attempts
    if left <= 0 or s.ended or not graph.repair_pairs:
        return (s.outcome, status, attempts, left, ())
    readable = memo.setdefault("readable_pairs", {})
    pairs = readable.get((status, left))
    if pairs is None:
        pairs = readable[(status, left)] = readable_pairs(graph, s, left)
    return (s.outcome, status, attempts, left, pairs)


def readable_pairs(graph: LoopGraph, s: RunState, left: int) -> tuple[tuple[str, str], ...]:
    """The pairs of R that the rest of the run can read, given `left` repairs left.

    Only Repair(d, u) and Fail(d) read R, and only for an EXHAUSTED d, which is not DONE. A node
    that is DONE stays DONE until a repair (d', u') puts S_u' back; so with `left` repairs left the
    readable d are the not-DONE nodes, grown `left - 1` times by S_u of their pairs. With no
    repair left nothing is read (Repair is disabled and Fail enabled whatever R is). Depends on
    the state only through which nodes are DONE (and on the graph only through R), so `_key`
    keeps it per graph shape."""
    if left <= 0 or s.ended or not graph.repair_pairs:
        return ()
    may = {n for n, st in zip(graph.names, s.status, strict=True) if st is not Status.DONE}
    for _ in range(left - 1):
        grown = may.union(*(graph.subtree(u) for d, u in graph.repair_pairs if d in may))
        if grown == may:
            break
        may = grown
    return tuple(sorted(p for p in graph.repair_pairs if p[0] in may))


@dataclass
class WorstCase:
    """A memo table of the most attempts still to come from a state, and the event that gets them.

    The key holds repairs *left* and only the readable part of R, so one table may serve every K
    and every repair relation of one DAG and one a_v vector."""

    table: dict[Key, tuple[int, Event | None]] = field(default_factory=dict)

    def remaining(self, graph: LoopGraph, s: RunState) -> int:
        """The most attempts any schedule and verdict sequence can still begin from `s`."""
        key = _key(graph, s)
        hit = self.table.get(key)
        if hit is not None:
            return hit[0]
        best, best_event = -1, None
        for event, after in successors(graph, s):
            value = (event.__class__ is Begin) + self.remaining(graph, after)
            if value > best:
                best, best_event = value, event
        if best_event is None:
            if not s.ended:
                raise Deadlock(s)
            best = 0
        self.table[key] = (best, best_event)
        return best

    @property
    def states(self) -> int:
        return len(self.table)

    def schedule(self, graph: LoopGraph) -> list[Event]:
        """The events of one run, from the initial state, that begins the most attempts."""
        s = initial_state(graph)
        self.remaining(graph, s)
        events: list[Event] = []
        while (event := self.table[_key(graph, s)][1]) is not None:
            events.append(event)
            s = step(graph, s, event)
        return events


def true_worst_case(graph: LoopGraph) -> tuple[int, list[Event]]:
    """The exact worst-case attempt total of `graph` (B unbounded) and a schedule reaching it.

    Searched on the abstract space (`model.search_space`); the schedule is then replayed through
    `model.transitions.step`, which must end the run having begun exactly that many attempts."""
    space, search, s = AbstractSpace(graph), AbstractWorstCase(), initial_state(graph)
    try:
        worst, schedule = search.worst(space), search.schedule(space)
    except Deadlocked:
        WorstCase().remaining(graph, s)  # raises the model's Deadlock, with its state
        raise
    for event in schedule:
        s = step(graph, s, event)
    if not s.ended or s.attempts_total != worst:
        raise RuntimeError(f"replayed through the model, the worst-case schedule begins "
                           f"{s.attempts_total} attempts, not {worst}: {schedule}")
    return worst, schedule


# ---- the cases ----------------------------------------------------------------------------------

def dags(n: int) -> list[Edges]:
    """One DAG on nodes 0..n-1 per isomorphism class; every edge (i, j) has i < j."""
    pairs = list(itertools.combinations(range(n), 2))
    perms = list(itertools.permutations(range(n)))
    seen: set[Edges] = set()
    out: list[Edges] = []
    for mask in range(1 << len(pairs)):
        edges = tuple(p for b, p in enumerate(pairs) if mask >> b & 1)
        canon = min(tuple(sorted((q[i], q[j]) for i, j in edges)) for q in perms)
        if canon not in seen:
            seen.add(canon)
            out.append(edges)
    return out


def automorphisms(n: int, edges: Edges) -> list[tuple[int, ...]]:
    target = set(edges)
    return [q for q in itertools.permutations(range(n))
            if {(q[i], q[j]) for i, j in edges} == target]


def ancestors(n: int, edges: Edges) -> list[frozenset[int]]:
    anc: list[set[int]] = [set() for _ in range(n)]
    for i, j in sorted(edges):  # i < j, so processing by i sees every ancestor of i first
        anc[j] |= anc[i] | {i}
    return [frozenset(a) for a in anc]


def allowed_pairs(n: int, edges: Edges) -> tuple[tuple[int, int], ...]:
    """Every (d, u) a repair relation may hold: u = d or u an ancestor of d."""
    anc = ancestors(n, edges)
    return tuple((d, u) for d in range(n) for u in sorted(anc[d] | {d}))


def build_graph(n: int, edges: Edges, relation: Sequence[tuple[int, int]],
                attempts: Sequence[int], k: int, max_parallel: int = 1) -> LoopGraph:
    specs = [NodeSpec(name=NAMES[v], attempts=attempts[v],
                      needs=tuple(NAMES[i] for i, j in edges if j == v),
                      repairs=tuple(NAMES[u] for d, u in relation if d == v))
             for v in range(n)]
    return LoopGraph.build(specs, repair_budget=k, max_parallel=max_parallel)


def _least_in_orbit(relation: tuple[tuple[int, int], ...], attempts: tuple[int, ...],
                    autos: list[tuple[int, ...]]) -> bool:
    here = (relation, attempts)
    for q in autos:
        rel = tuple(sorted((q[d], q[u]) for d, u in relation))
        att = [0] * len(attempts)
        for v, a in enumerate(attempts):
            att[q[v]] = a
        if (rel, tuple(att)) < here:
            return False
    return True


@dataclass(frozen=True)
class Task:
    """All cases of one DAG and one a_v vector (every repair relation and K): a unit of work."""

    n: int
    edges: Edges
    attempts: tuple[int, ...]
    max_parallel: int = 1


def work_units(max_nodes: int, max_parallel: int = 1) -> list[Task]:
    """The explorer's units, heaviest first (most repair relations), so that parallel workers
    finish together."""
    return sorted(tasks(max_nodes, max_parallel), key=lambda t: -len(allowed_pairs(t.n, t.edges)))


Mapper = Callable[[Callable[[Task], "TaskResult"], Sequence[Task]], Iterable["TaskResult"]]


@dataclass
class TaskResult:
    cases: int = 0
    states: int = 0
    mismatches: int = 0  # cases whose true worst case differs from W
    mismatch: dict[str, object] | None = None  # the first of them, as a counterexample


def tasks(max_nodes: int, max_parallel: int = 1) -> Iterator[Task]:
    for n in range(1, max_nodes + 1):
        for edges in dags(n):
            for attempts in itertools.product(ATTEMPT_CHOICES, repeat=n):
                yield Task(n, edges, attempts, max_parallel)


def relations(n: int, edges: Edges) -> Iterator[tuple[tuple[int, int], ...]]:
    """Every repair relation on this DAG: every subset of the allowed pairs."""
    pairs = allowed_pairs(n, edges)
    for mask in range(1 << len(pairs)):
        yield tuple(p for b, p in enumerate(pairs) if mask >> b & 1)


def run_task(task: Task) -> TaskResult:
    """Check every repair relation and K for one DAG and a_v, counting every mismatching case and
    keeping the first as the counterexample. One memo table serves them all (its key holds only
    the readable part of R). The search runs on `model.search_space` (the model's transitions
    on abstract states, tied to `model.transitions` state by state by a test); a case it finds
    wrong is searched again through the model, whose words the counterexample is in."""
    result = TaskResult()
    autos = [q for q in automorphisms(task.n, task.edges) if q != tuple(range(task.n))]
    universe = tuple((NAMES[d], NAMES[u]) for d, u in allowed_pairs(task.n, task.edges))
    search = AbstractWorstCase()
    base: AbstractSpace | None = None
    for relation in relations(task.n, task.edges):
        if autos and not _least_in_orbit(relation, task.attempts, autos):
            continue
        built = build_graph(task.n, task.edges, relation, task.attempts, K_CHOICES[0],
                            task.max_parallel)
        space = base = (AbstractSpace(built, universe) if base is None
                        else base.with_relation(built))
        for k in K_CHOICES:
            graph = built.with_repair_budget(k)
            result.cases += 1
            found = check_abstract(graph, space, search)
            if found is not None:
                result.mismatches += 1
                result.mismatch = result.mismatch or found
    result.states = search.states
    return result


def check_abstract(graph: LoopGraph, space: AbstractSpace, search: AbstractWorstCase
                   ) -> dict[str, object] | None:
    """`check` on the abstract space of `graph`'s shape (any K): None if the true worst case
    equals W; otherwise the model's own counterexample (`check`, a fresh search)."""
    try:
        worst: int | None = search.worst(space, graph.repair_budget)
    except Deadlocked:
        worst = None
    if worst == attempt_bound(graph):
        return None
    if (found := check(graph)) is None:  # the searches disagree: tests/model/test_search_space.py
        raise RuntimeError(f"the abstract search finds {worst} attempts, the model's W: "
                           f"{describe(graph, attempt_bound(graph), worst, [])}")
    return found


def check(graph: LoopGraph, search: WorstCase | None = None) -> dict[str, object] | None:
    """None if the true worst case equals W; otherwise the counterexample, as plain data."""
    search = search or WorstCase()
    w = attempt_bound(graph)
    try:
        worst = search.remaining(graph, initial_state(graph))
    except Deadlock as exc:
        return describe(graph, w, None, [], problem="deadlock", state=exc.state.summary(graph))
    if worst == w:
        return None
    problem = "W exceeded" if worst > w else "W not reached"
    return describe(graph, w, worst, search.schedule(graph), problem=problem)


def describe(graph: LoopGraph, w: int, worst: int | None, schedule: list[Event],
             **extra: object) -> dict[str, object]:
    return {
        "nodes": list(graph.names),
        "attempts": {n.name: n.attempts for n in graph.nodes},
        "needs": {n.name: list(n.needs) for n in graph.nodes},
        "repairs": {n.name: list(n.repairs) for n in graph.nodes},
        "K": graph.repair_budget,
        "W": w,
        "true_worst_case": worst,
        "schedule": [repr(e) for e in schedule],
        **extra,
    }


# ---- the command --------------------------------------------------------------------------------

def explore(max_nodes: int, workers: int = 2, mapper: Mapper | None = None,
            max_parallel: int = 1) -> dict[str, object]:
    """Check every case up to `max_nodes` nodes, at most `max_parallel` attempts in flight;
    the summary and the first mismatch, if any.

    `mapper(fn, units)` runs the work units and returns their results in the units' order (an
    executor outside the model: processes, a cluster); without one, `workers` forked processes.
    The summary is the same whatever runs the units, since they are combined in a fixed order."""
    start = time.perf_counter()
    graphs = sum(len(dags(n)) for n in range(1, max_nodes + 1))
    total = TaskResult()
    mismatches = 0
    work = work_units(max_nodes, max_parallel)
    results = list((mapper or local(workers).map)(run_task, work))  # model/executor.py
    for r in results:
        total.cases += r.cases
        total.states += r.states
        mismatches += r.mismatches
        total.mismatch = total.mismatch or r.mismatch
    summary: dict[str, object] = {
        "graphs": graphs,
        "cases": total.cases,
        "mismatches": mismatches,
        "seconds": round(time.perf_counter() - start, 2),
        "states": total.states,
    }
    if max_parallel > 1:  # (absent at 1: the serial summary keeps its bytes)
        summary["max_parallel"] = max_parallel
    if total.mismatch is not None:
        summary["first_counterexample"] = total.mismatch
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loopproof.model.explore", description=__doc__.split(
        "\n")[0])
    parser.add_argument("--max-nodes", type=int, default=4, choices=range(1, 5),
                        help="largest graph to enumerate, 1..4 (default 4; 3 takes about a "
                             "second, 4 about 50 CPU-seconds; 5 would take days)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="processes to use (default: one per core; a cluster: "
                             "python -m experiments.bounds --dask ADDRESS)")
    parser.add_argument("--max-parallel", type=int, default=1, choices=range(1, 5),
                        help="attempts in flight at once, 1..4 (default 1: the serial model; 2 "
                             "searches every interleaving of two attempts)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    summary = explore(args.max_nodes, max(1, args.workers), max_parallel=args.max_parallel)
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        print(f"graphs {summary['graphs']}  cases {summary['cases']}  "
              + (f"max_parallel {args.max_parallel}  " if args.max_parallel > 1 else "")
              + f"mismatches {summary['mismatches']}  seconds {summary['seconds']}")
        if "first_counterexample" in summary:
            print(json.dumps(summary["first_counterexample"], indent=2, sort_keys=True))
    return 1 if summary["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
