"""Graphs and event sequences in the input format of proofs/coq/driver.ml, and the Python model's
run of the same events, for the differential test between model.step and the step functions
extracted from proofs/coq/ (tests/proofs/test_coq_model.py): the serial `step` of Loopproof.v, and the
concurrent `cstep` of Concurrent.v ("pcase": the graph's max_parallel, spend events naming their
attempt, and each node's account in every state).

Spend is in quanta of QUANTUM (a binary fraction, so the model's float sums are exact and its
tolerance EPS decides nothing): the extracted code gets integers, the model their multiples.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from typing import Any

from loopproof.model.bounds import attempt_bound
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.state import RunState, initial_state
from loopproof.model.transitions import (
    Abandon,
    Begin,
    Cancel,
    Claim,
    Disabled,
    Event,
    Fail,
    Finish,
    Overrun,
    Refuse,
    Repair,
    Reserve,
    Settle,
    Verdict,
    control_events,
    enabled,
    step,
)

QUANTUM = 0.25
Case = tuple[LoopGraph, list[Event]]


def quanta(x: float) -> int:
    q = x / QUANTUM
    assert q == int(q), f"{x} is not a whole number of quanta"
    return int(q)


def graph_tokens(graph: LoopGraph) -> list[str]:
    index = graph._index
    out = [str(len(graph.nodes)), str(graph.repair_budget),
           "-" if math.isinf(graph.spend_budget) else str(quanta(graph.spend_budget))]
    for n in graph.nodes:
        out += [str(n.attempts), str(quanta(n.spend_ceiling)), str(len(n.needs)),
                *(str(index[p]) for p in n.needs), str(len(n.repairs)),
                *(str(index[u]) for u in n.repairs)]
    return out


def event_tokens(graph: LoopGraph, e: Event, concurrent: bool = False) -> list[str]:
    """`e` in the driver's form; in a concurrent case a spend event ends with its attempt's
    node (its index, or - for none)."""
    i = graph._index
    whose = ([] if not concurrent else
             ["-" if e.node is None else str(i[e.node])]  # type: ignore[attr-defined]  # a spend event: node
             if isinstance(e, Reserve | Overrun | Settle) else [])
    match e:
        case Begin(v) | Refuse(v) | Abandon(v) | Claim(v) | Cancel(v) | Fail(v):
            return [type(e).__name__.lower(), str(i[v])]
        case Reserve(x) | Overrun(x):
            return [type(e).__name__.lower(), str(quanta(x)), *whose]
        case Settle(x, of):
            return ["settle", str(quanta(x)), "-" if of is None else str(quanta(of)), *whose]
        case Verdict(v, passed):
            return ["verdict", str(i[v]), "1" if passed else "0"]
        case Repair(d, u):
            return ["repair", str(i[d]), str(i[u])]
        case Finish():
            return ["finish"]
    raise AssertionError(f"no driver form for {e!r}")


def cases_text(cases: Iterable[Case], variant: str = "real", concurrent: bool = False) -> str:
    """The driver's input: serial cases (`step`), or concurrent ones (`cstep`, with each graph's
    max_parallel)."""
    lines = []
    for graph, events in cases:
        head = ["pcase", variant, str(graph.max_parallel)] if concurrent else ["case", variant]
        lines.append(" ".join([*head, *graph_tokens(graph), str(len(events))]))
        lines += [" ".join(event_tokens(graph, e, concurrent)) for e in events]
    return "\n".join(lines) + "\n"


def state_view(graph: LoopGraph, s: RunState, concurrent: bool = False) -> dict[str, Any]:
    """The model's state in the driver's JSON form (node indices, spend in quanta); in a
    concurrent case with each node's account (`RunState.account`: open reservations, and what
    its attempt settled plus holds; nothing for a node not in flight)."""
    i = graph._index
    accounts = ({"res": [quanta(s.account(graph, k)[0]) for k in range(len(graph.names))],
                 "spt": [quanta(s.account(graph, k)[1]) for k in range(len(graph.names))]}
                if concurrent else {})
    return {"status": [x.value for x in s.status], "activation": list(s.activation),
            "attempts": list(s.attempts),
            "passes": sorted([i[v], e] for v, e in s.passes),
            "cancelled": sorted([i[v], e] for v, e in s.cancelled),
            "repairs_used": s.repairs_used, "attempts_total": s.attempts_total,
            "abandoned": s.abandoned, "settled": quanta(s.settled),
            "reserved": quanta(s.reserved), "attempt_spend": quanta(s.attempt_spend),
            "outcome": s.outcome.value, **accounts}


def coq_view(state: dict[str, Any]) -> dict[str, Any]:
    """The extracted code's state with its history lists read as the sets they stand for (and
    without a variant's own counters, which the model has no field for)."""
    out = {k: v for k, v in state.items() if k != "rep"}
    for k in ("passes", "cancelled"):
        out[k] = sorted({tuple(p) for p in state[k]})
        out[k] = [list(p) for p in out[k]]
    return out


def python_run(graph: LoopGraph, events: Sequence[Event], concurrent: bool = False
               ) -> dict[str, Any]:
    """What model.step decides and reaches, in the driver's output form."""
    s = initial_state(graph)
    admitted, states = [], [state_view(graph, s, concurrent)]
    for e in events:
        try:
            s = step(graph, s, e)
            admitted.append(True)
            states.append(state_view(graph, s, concurrent))
        except Disabled:
            admitted.append(False)
            states.append(states[-1])  # a refused event leaves the state as it was
    return {"W": attempt_bound(graph), "admitted": admitted, "states": states}


def first_difference(graph: LoopGraph, events: Sequence[Event], python: dict[str, Any],
                     coq: dict[str, Any]) -> str | None:
    """The first place the two runs part (W, then event by event), or None."""
    if python["W"] != coq["W"]:
        return f"W: model.bounds {python['W']}, Coq {coq['W']}"
    for k, e in enumerate(events):
        if python["admitted"][k] != coq["admitted"][k]:
            return (f"event {k} {e}: model.step admitted={python['admitted'][k]}, Coq "
                    f"admitted={coq['admitted'][k]}")
        if python["states"][k + 1] != coq_view(coq["states"][k + 1]):
            return (f"event {k} {e}: states differ\n  model {python['states'][k + 1]}\n"
                    f"  Coq   {coq_view(coq['states'][k + 1])}")
    return None


# ---- drawn cases ----------------------------------------------------------------------------

def random_graph(rng: random.Random, max_nodes: int = 8, max_parallel: int = 1) -> LoopGraph:
    n = rng.randint(1, max_nodes)
    names = [f"n{i}" for i in range(n)]
    edges = sorted((i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.3)
    anc: list[set[int]] = [set() for _ in range(n)]
    for i, j in edges:
        anc[j] |= anc[i] | {i}
    relation = [(d, u) for d in range(n) for u in sorted(anc[d] | {d}) if rng.random() < 0.3]
    budget = math.inf if rng.random() < 0.5 else rng.randint(0, 24) * QUANTUM
    nodes = [NodeSpec(names[v], attempts=rng.randint(1, 3),
                      spend_ceiling=rng.choice([0, 1, 2, 4, 8]) * QUANTUM,
                      needs=tuple(names[i] for i, j in edges if j == v),
                      repairs=tuple(names[u] for d, u in relation if d == v))
             for v in range(n)]
    return LoopGraph.build(nodes, repair_budget=rng.randint(0, 3), spend_budget=budget,
                           max_parallel=max_parallel)


def candidates(graph: LoopGraph, s: RunState, rng: random.Random) -> list[Event]:
    """Events to try next: every control event and spend events around what fits."""
    names = graph.names
    out: list[Event] = [Finish()]
    for v in names:
        out += [Begin(v), Refuse(v), Cancel(v), Verdict(v, True), Verdict(v, False), Fail(v),
                Abandon(v), Claim(v)]
    out += [Repair(d, u) for d, u in graph.repair_pairs]
    out += [Repair(rng.choice(names), rng.choice(names))]
    # amounts at and beside the edges of what the guards let through
    edges = [0.0, QUANTUM, 2 * QUANTUM, 4 * QUANTUM, s.reserved]
    if (r := s.running(graph)) is not None:
        edges.append(graph.node(r).spend_ceiling - s.attempt_spend)
    if not math.isinf(graph.spend_budget):
        edges.append(graph.spend_budget - s.settled - s.reserved)
    amounts = sorted({x + d for x in edges for d in (-QUANTUM, 0.0, QUANTUM)})
    out += [Reserve(x) for x in amounts] + [Overrun(x) for x in amounts]
    q, r = QUANTUM, s.reserved
    out += [Settle(x) for x in (-q, 0.0, r, r + q)]
    out += [Settle(x, of) for of in (-q, 0.0, r - q, r, r + q) for x in (0.0, of, of + q)]
    return out


def concurrent_candidates(graph: LoopGraph, s: RunState, rng: random.Random) -> list[Event]:
    """Every control event, and spend events naming each attempt in flight, none, and a node
    drawn at random (mostly one not in flight), with amounts around what fits each attempt."""
    names, q = graph.names, QUANTUM
    out = [e for e in candidates(graph, s, rng) if not isinstance(e, Reserve | Overrun | Settle)]
    for node in dict.fromkeys((None, *s.in_flight(graph), rng.choice(names))):
        i = s.census()[1] if node is None else graph.index(node)
        reserved, spent = s.account(graph, i) if i >= 0 else (0.0, 0.0)
        edges = [0.0, q, 2 * q, 4 * q, reserved]
        if i >= 0:
            edges.append(graph.nodes[i].spend_ceiling - spent)
        if not math.isinf(graph.spend_budget):
            edges.append(graph.spend_budget - s.settled - s.reserved)
        amounts = sorted({x + d for x in edges for d in (-q, 0.0, q)})
        out += [Reserve(x, node=node) for x in amounts] + [Overrun(x, node=node) for x in amounts]
        out += [Settle(x, node=node) for x in (-q, 0.0, reserved, reserved + q)]
        out += [Settle(x, of, node=node) for of in (-q, 0.0, reserved - q, reserved, reserved + q)
                for x in (0.0, of, of + q)]
    return out


# how often each kind is taken among the enabled events: runs that make progress, repair and
# exhaust, with crashes, cancels and spend events among them, and that end late
WEIGHT = {Begin: 6.0, Verdict: 4.0, Repair: 4.0, Reserve: 1.0, Settle: 1.0, Overrun: 0.5,
          Claim: 0.3, Abandon: 0.5, Cancel: 0.5, Refuse: 0.2, Fail: 0.2, Finish: 1.0}


def random_events(graph: LoopGraph, rng: random.Random, length: int = 40,
                  concurrent: bool = False) -> list[Event]:
    """Mostly enabled events (seven in ten, weighted by kind), the rest any candidate,
    admitted or not; with `concurrent`, spend events naming their attempts."""
    s = initial_state(graph)
    events: list[Event] = []
    for _ in range(length):
        every = (concurrent_candidates if concurrent else candidates)(graph, s, rng)
        live = [e for e in every if enabled(graph, s, e)] + list(control_events(graph, s))
        if live and rng.random() < 0.7:
            e = rng.choices(live, [WEIGHT[type(x)] for x in live])[0]
        else:  # a kind, then one of its instances
            kind = rng.choice(sorted({type(x) for x in every}, key=lambda t: t.__name__))
            e = rng.choice([x for x in every if type(x) is kind])
        events.append(e)
        if enabled(graph, s, e):
            s = step(graph, s, e)
        elif s.ended and rng.random() < 0.3:
            break  # a few refused events after the end are enough
    return events


def random_case(rng: random.Random, max_nodes: int = 8) -> Case:
    graph = random_graph(rng, max_nodes)
    return graph, random_events(graph, rng)


def random_concurrent_case(rng: random.Random, max_nodes: int = 8,
                           max_parallel: tuple[int, int] = (2, 4)) -> Case:
    """A graph with max_parallel drawn from `max_parallel` and a run of 60 events, for the
    concurrent step."""
    graph = random_graph(rng, max_nodes, rng.randint(*max_parallel))
    return graph, random_events(graph, rng, length=60, concurrent=True)
