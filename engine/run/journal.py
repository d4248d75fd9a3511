"""The run's journal: the only way a run's state changes, and when its records become durable.

Why one unit: the runner holds no state of its own. Its state is `Replayed`
(engine/record/replay.py), the fold of the ledger's records through `model.step`; `commit` checks
an event against the model *before* appending it, appends it (the commit point), then folds it
in. So the state after a crash is exactly `replay(ledger)`, and `resume` continues from there.
Every other unit of engine/run changes the run through a `Journal`, never through the ledger.
Every record it appends passes through `engine.system.secrets.redact` first: no value of a
secret of the engine's environment is ever written (a worker's or a gate's output included).

Why one lock: with several attempts in flight (`[graph] max_parallel`), each runs in a thread of
its own and all of them write through this one journal, the run's single writer. `lock` is held
from the model check to the fold, so a guard is never checked against a state that another
attempt changes before the record is appended (the race of a budget check that two requests
both pass); the meter takes the same lock around its own check-then-reserve (engine/run/meter.py).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from loopproof.engine.record.ledger import Ledger
from loopproof.engine.record.replay import Replayed, event_record
from loopproof.engine.run.progress import Progress
from loopproof.engine.system.secrets import redact, secret_values
from loopproof.model import LoopGraph, RunState
from loopproof.model.transitions import Event


class Journal:
    """One run's ledger and its replayed state, written in group-committed batches."""

    def __init__(self, ledger: Ledger, replayed: Replayed, progress: Progress | None = None
                 ) -> None:
        self.ledger, self.replayed, self.progress = ledger, replayed, progress
        self._batch: contextlib.ExitStack | None = None
        self._secrets = secret_values()  # the engine's environment at run start (or resume)
        # told (event, state before it) after each commit: the scheduler's frontier
        self.observers: list[Callable[[Event, RunState], None]] = []
        self.lock = threading.RLock()  # one writer: check, append and fold are one step

    @property
    def graph(self) -> LoopGraph:
        return self.replayed.graph

    @property
    def state(self) -> RunState:
        return self.replayed.state

    def commit(self, event: Event, facts: dict[str, Any]) -> RunState:
        """The model must allow `event`; then its record is appended (the commit point) and
        folded into the replayed state."""
        with self.lock:
            before = self.state
            reason = event.why_not(self.graph, before)
            if reason is not None:
                raise RuntimeError(f"engine bug: {event} is not enabled: {reason}")
            self._append(event_record(event, **facts))
            for observe in self.observers:
                observe(event, before)
            return self.state

    def note(self, record: dict[str, Any]) -> None:
        """Append a fact record (no model event): resumed, stopped, pin_changed, worker_output."""
        with self.lock:
            self._append(record)

    def _append(self, record: dict[str, Any]) -> None:
        if self._batch is None:  # group commit until the next point that needs durability
            self._batch = contextlib.ExitStack()
            self._batch.enter_context(self.ledger.group())
        record = redact(record, self._secrets)
        # declared type, declared fields (the replayed run's registry: a study may extend it)
        self.replayed.registry.check_append(record, self.ledger.path)
        stored = self.ledger.append(record)
        self.replayed.apply_written(stored)
        if self.progress is not None:
            self.progress(self.replayed, stored)

    def sync(self) -> None:
        """Make every appended record durable (one fsync for the batch since the last sync).

        Why batches: a SIGKILL cannot lose a record once `write` returned (it is in the kernel);
        fsync guards against power loss, and is needed only before an effect the ledger must
        precede: a metered operation (the meter syncs right after each `Reserve`) and the end
        of the process. If power is lost before a batch is synced, the run looks like a crash
        earlier on, and resume charges the open reservation in full: never less than was used.
        """
        with self.lock:
            if self._batch is not None:
                batch, self._batch = self._batch, None
                batch.close()

    def close(self) -> None:
        self.sync()
        self.ledger.close()
