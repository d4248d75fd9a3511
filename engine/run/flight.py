"""The attempts in flight of a run with `max_parallel` > 1: begun in the scheduler's thread, run to
their verdicts on attempt threads of their own.

Why begin in the scheduler's thread: the Begin records are then appended in the order the
scheduler decides them (the serial order), and a node is never begun twice because its first
Begin had not been recorded yet when the next decision was taken. Every node admitted at one
decision is begun before any of their workers starts (`begin`, then `start`), so the ledger's
prefix up to those Begins does not depend on thread timing (the crash study kills runs at
counted crossings, experiments/crash/). Why the rest on threads: a
worker waits (on its model, on a process), it does not compute; every record of every attempt
goes through the one journal (engine/run/journal.py), whose lock makes each model check and its
record one step, so attempts interleave in the ledger and each record names its node.

An attempt that raises (a pinned file changed, the ledger was lost, an engine error) does not stop
the others: they end at their verdicts, and the runner raises the first failure once none is in
flight (`drain`), as the serial runner would have raised it.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from loopproof.engine.run import schedule
from loopproof.engine.run.attempt import Begun, begin_attempt, finish_attempt
from loopproof.engine.run.confine import RunSandbox
from loopproof.engine.run.handoff import HandOff
from loopproof.engine.run.integrity import Integrity
from loopproof.engine.run.journal import Journal
from loopproof.engine.run.planner import RunPlanner
from loopproof.engine.run.spec import Spec


class Flight:
    """Up to `limit` attempts in flight on a pool of threads. Use as a context manager."""

    def __init__(self, limit: int, *, spec: Spec, journal: Journal, integrity: Integrity,
                 handoff: HandOff, planner: RunPlanner, sandbox: RunSandbox) -> None:
        self.limit = limit
        self.spec, self.journal, self.integrity = spec, journal, integrity
        self.handoff, self.planner, self.sandbox = handoff, planner, sandbox
        self.flying: dict[Future[None], str] = {}
        self.begun: list[Begun] = []  # begun, not yet started (`start`)
        self.pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="loopproof-attempt")

    def __enter__(self) -> Flight:
        return self

    def __exit__(self, *exc: object) -> None:
        self.start()  # a Begin recorded is an attempt run (or given back on resume)
        self.drain()
        self.pool.shutdown(wait=True)

    def __len__(self) -> int:
        return len(self.flying) + len(self.begun)

    @property
    def full(self) -> bool:
        return len(self) >= self.limit

    def begin(self, node: str) -> bool:
        """Record `node`'s Begin here; its attempt runs from the next `start`. False when the
        model no longer admits the Begin (nothing was recorded)."""
        begun = begin_attempt(node, journal=self.journal, integrity=self.integrity,
                              handoff=self.handoff, sandbox=self.sandbox)
        if begun is None:
            return False
        self.begun.append(begun)
        return True

    def start(self) -> None:
        """Run the rest of every attempt begun since the last `start`, each on the pool."""
        for begun in self.begun:
            fut = self.pool.submit(finish_attempt, begun, spec=self.spec, journal=self.journal,
                                   integrity=self.integrity, handoff=self.handoff,
                                   planner=self.planner)
            self.flying[fut] = begun.node
        self.begun = []

    def ended(self) -> list[tuple[str, BaseException | None]]:
        """Wait until at least one attempt in flight has ended: each ended node, with what its
        thread raised (None: it ended at its verdict or an overrun)."""
        if not self.flying:
            return []
        done, _ = wait(self.flying, return_when=FIRST_COMPLETED)
        return [(self.flying.pop(fut), fut.exception()) for fut in done]

    def drain(self) -> None:
        """Wait for every attempt in flight to end, whatever it raises."""
        while self.flying:
            for _node, _exc in self.ended():
                pass


__all__ = ["Flight"]


def fly(runner: Any) -> None:
    """Run `runner` (engine/run/runner.py's `Runner`) with up to its graph's `max_parallel`
    attempts in flight; returns when the run has ended or stopped, and raises what an attempt
    raised once none is in flight.

    Every decision but a Begin (a planner round, a repair, a fail, a refusal, the finish, a stop)
    is the serial runner's own `step`, taken only when nothing is in flight; a Begin beside
    attempts in flight is the node the serial rule would run next, if the model admits it now
    (`schedule.next_begin`)."""
    failure: BaseException | None = None
    with Flight(runner.graph.max_parallel, spec=runner.spec, journal=runner.journal,
                integrity=runner.integrity, handoff=runner.handoff, planner=runner.planner,
                sandbox=runner.sandbox) as flight:
        while True:
            for node, exc in flight.ended():
                if exc is not None:
                    failure = failure or exc
                elif runner.gate_stop is None:
                    runner.gate_stop = runner.gate_error_stop(node)
            if failure is not None or runner.gate_stop is not None:
                if len(flight):
                    continue  # the attempts in flight end at their verdicts first
                if failure is not None:
                    raise failure
            if not len(flight) and not _idle_move(runner, flight):
                return
            while (len(flight) and not flight.full and runner.stop_reason() is None
                   and not runner.planner.due
                   and (node := schedule.next_begin(runner.graph, runner.state,
                                                    runner.frontier)) is not None
                   and flight.begin(node)):
                pass  # every further node the model admits beside them, in serial order
            flight.start()  # then their workers: every Begin of a wave precedes its work


def _idle_move(runner: Any, flight: Flight) -> bool:
    """Nothing in flight: the serial decision (`runner.step`), with an attempt begun in `flight`
    instead of run in this thread. False when the run has ended or stopped."""
    if runner.state.ended or runner.stop_reason() is not None:
        return bool(runner.step())
    move = schedule.next_move(runner.graph, runner.state, plan_due=runner.planner.due,
                              frontier=runner.frontier)
    if move.kind != "attempt":
        return bool(runner.step())
    if not flight.begin(move.node):
        raise RuntimeError(f"engine bug: {move.node!r} was scheduled but its Begin is not "
                           f"enabled")
    return True
