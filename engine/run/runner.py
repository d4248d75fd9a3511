"""The runner: one graph against one ledger, from `start` (or `resume`) to its exit code.

Why this shape: the runner is the thin orchestrator of units that can each be read alone:
- engine/run/journal.py: the run's only state, `Replayed` (the fold of the ledger through
  `model.step`), changed only by `commit` (model check, append, fold) and `note`;
- engine/run/schedule.py: which move comes next, from the model state alone;
- engine/run/attempt.py: one attempt (Begin, worker, claims, gate, verdict);
- engine/run/flight.py: several attempts in flight (`max_parallel` > 1, `run --jobs N`), each on
  a thread of its own; every other decision and a stop wait until nothing is in flight;
- engine/run/handoff.py: workspaces, judged snapshots, accepted trees handed to successors;
- engine/run/integrity.py: pins, policy and release conditions;
- engine/run/planner.py: the optional `[planner]` rounds between attempts;
- engine/run/recovery.py: what `resume` records before the run goes on;
- engine/run/operator.py: an operator's requests (`loopproof cancel`), honoured by recovery;
- engine/run/finish.py: the release check, the exit code and the report;
- engine/run/confine.py: what each worker and gate command may see in its sandbox.

So the state after a crash is exactly `replay(ledger)`, and `resume` continues from there.
Safe points (where a stop request is honoured) are the moments with no attempt in flight, before
each scheduling decision: the stop file (or SIGTERM / SIGINT) is checked there and a `stopped`
record is appended.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopproof.engine.record.ledger import Ledger
from loopproof.engine.record.owned import LedgerLost
from loopproof.engine.record.record_types import RUN_RECORDS
from loopproof.engine.record.replay import RUN_FORMAT, Replayed, graph_record, open_replayed, replay
from loopproof.engine.run import finish, schedule
from loopproof.engine.run.attempt import judge_within, run_attempt
from loopproof.engine.run.call_room import refuse_missing_keys, refuse_unfit_model_calls
from loopproof.engine.run.confine import (
    RunSandbox,
    policy_secrets,
    refuse_at_start,
    sandbox_backend,
)
from loopproof.engine.run.finish import EXIT_CODES, EXIT_PIN_CHANGED, EXIT_STOPPED, gate_error_stop
from loopproof.engine.run.flight import fly
from loopproof.engine.run.handoff import (
    INPUTS,
    HandOff,
    accepted_root,
    stage_snapshot,
    workspace_root,
)
from loopproof.engine.run.integrity import (
    Integrity,
    PinChanged,
    load_policy,
    node_pin_files,
    pin_files,
    recorded_policy,
    sign,
    signing_keys,
)
from loopproof.engine.run.journal import Journal
from loopproof.engine.run.meter import METER_SITES
from loopproof.engine.run.place import creating, folder_of, lexists, lock_ledger
from loopproof.engine.run.planner import RunPlanner
from loopproof.engine.run.progress import Progress
from loopproof.engine.run.recovery import kill_orphans, recover
from loopproof.engine.run.remote.adapters import adopt as remote_spec
from loopproof.engine.run.spec import Spec, is_price
from loopproof.engine.system import faults, limits
from loopproof.engine.system.errors import BadInput, LedgerCorrupt
from loopproof.engine.system.trees import remove_tree
from loopproof.model import RunState

__all__ = [  # the runner's public names (some defined in the units above)
    "CRASH_SITES", "EXIT_CODES", "EXIT_PIN_CHANGED", "EXIT_STOPPED", "INPUTS", "PinChanged",
    "Progress", "Runner", "accepted_root", "default_stop_file", "judge_within", "kill_orphans",
    "stage_snapshot", "workspace_root",
]

CRASH_SITES: tuple[str, ...] = (
    "runner.before_begin",    # a node is chosen; its Begin is not yet recorded
    "runner.before_worker",   # Begin recorded, workspace prepared, the worker not yet called
    "meter.after_reserve",    # a reservation recorded, the metered operation not yet run
    "meter.before_settle",    # the operation ran, its settlement not yet recorded
    "runner.after_worker",    # the worker returned, its claims not yet recorded
    "runner.before_verdict",  # claims recorded, the gate not yet run
    "runner.after_verdict",   # the verdict recorded, the next decision not yet taken
    "runner.repair",          # a node is exhausted, its Repair not yet recorded
    "runner.resume",          # resume has verified and replayed the ledger, appended nothing
)
assert set(METER_SITES) <= set(CRASH_SITES)


MAX_JOBS = 1024  # attempts in flight at once: each is a thread and a sandbox of its own


def default_stop_file(ledger_path: Path) -> Path:
    return Path(f"{ledger_path}.stop")


class Runner:
    """Runs one graph against one ledger. Build with `Runner.start` or `Runner.resume`."""

    def __init__(self, spec: Spec, ledger: Ledger, replayed: Replayed, *, stop_file: Path,
                 progress: Progress | None = None, policy: Any = None,
                 cluster: Any = None) -> None:
        self.spec, self.ledger, self.replayed = spec, ledger, replayed
        self.cluster = cluster  # `--dask`: where attempts run (engine/run/remote/)
        self.graph = replayed.graph
        self.stop_file = stop_file
        self.journal = Journal(ledger, replayed, progress)
        self.frontier = schedule.Frontier(self.graph)  # every node: it may be ready after replay
        self.journal.observers.append(self.frontier.observe)
        self.integrity = Integrity(self.journal, dict(replayed.first.get("pins", {})), policy,
                                   spec.policy, node_pin_files(spec))
        self.handoff = HandOff(ledger.path, self.journal,
                               read_only_by_mode=spec.sandbox == "none")
        self.planner = RunPlanner(spec, self.journal)
        # every worker and gate command of the run runs in this sandbox (engine/run/confine.py)
        self.sandbox = RunSandbox(spec, sandbox_backend(spec), ledger=ledger.path,
                                  stop_file=stop_file, secret_files=policy_secrets(policy))
        self.stop_signal: str | None = None
        self.gate_stop: str | None = None  # a gate error on a node with gate_errors = "stop"
        self.stopped = False
        self.error: str | None = None  # why the run stopped with exit 5
        self._lock_fd: int | None = None
        self.new_price: float | None = None  # `resume --price`: recorded by `recover`
        self.approved_by: str | None = None  # a human's sign-off, for the `approved` condition

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def start(cls, spec: Spec, ledger_path: Path | str, *, stop_file: Path | None = None,
              progress: Progress | None = None, jobs: int | None = None,
              cluster: Any = None) -> Runner:
        """Validate everything, then create the ledger (the first write of the run). `jobs`
        (`--jobs N`) overrides the spec's `max_parallel`; it is kept in record 0 (`jobs`, and
        the graph's `max_parallel`), so `resume` runs with the same limit. `cluster`
        (engine/run/remote/cluster.py, `--dask`): every attempt's worker and gate run there."""
        # Absolute from here on: workers, gates and revision nodes run in other folders, and a
        # relative ledger path would name a different file there.
        ledger_path = Path(ledger_path).absolute()
        if jobs is not None:
            spec = with_jobs(spec, jobs, "--jobs", str(spec.path))
        refuse_unfit_model_calls(spec)
        refuse_missing_keys(spec)
        if spec.strict_bound and not spec.bounds()["fits"]:
            b = spec.bounds()
            raise BadInput(str(spec.path), "[graph] strict_bound",
                           f"the pre-run spend bound W_c = {b['W_c']:g} exceeds the budget "
                           f"B = {b['B']:g}",
                           "raise spend_budget, lower attempts / spend_ceiling / repair_budget, "
                           "or set strict_bound = false")
        if lexists(ledger_path, "--ledger"):
            raise _ledger_exists(ledger_path)
        folder = folder_of(ledger_path, "--ledger")
        stop = Path(stop_file or spec.stop_file or default_stop_file(ledger_path))
        if lexists(stop, "--stop-file"):
            raise BadInput(str(stop), "--stop-file", "the stop file already exists",
                           "remove it, or give another --stop-file")
        stop = stop.resolve()
        box = sandbox_backend(spec)  # bwrap missing or not permitted: exit 2 before any write
        if cluster is not None:  # a node that cannot run there, a worker that cannot: exit 2
            spec = remote_spec(spec, cluster, str(spec.path), ledger_path)
        policy = load_policy(spec, workspace_root(ledger_path))
        refuse_at_start(spec, box, ledger_path, stop, policy_secrets(policy))
        first = {"type": "run", "format": RUN_FORMAT, "graph": graph_record(spec.graph),
                 "sandbox": spec.sandbox, "spec": spec.record(), "pins": pin_files(spec),
                 "policy": policy.record() if policy is not None else None,
                 "stop_file": str(stop), "bounds": spec.bounds(), "price": spec.price}
        if jobs is not None:
            first["jobs"] = jobs
        RUN_RECORDS.check_append(first, ledger_path)
        with creating(folder):  # racing `run`s: one creates, the others find it and write nothing
            if lexists(ledger_path, "--ledger"):
                raise _ledger_exists(ledger_path)
            limits.reap(limits.owner_of(ledger_path))  # processes of an old run, ledger gone
            remove_tree(workspace_root(ledger_path))  # an old run's workspaces, its ledger gone
            remove_tree(accepted_root(ledger_path))  # and its judged snapshots
            # A signed run is signed from record 0 on (before the ledger appears at its path),
            # so `resume` can demand a signature that the ledger extends.
            ledger = Ledger.create(ledger_path, first,
                                   before_link=lambda led, path: sign(led, policy, path))
            lock = lock_ledger(ledger_path)
        runner = cls(spec, ledger, replay(ledger), stop_file=stop, progress=progress,
                     policy=policy, cluster=cluster)
        runner._lock_fd = lock
        return runner

    @classmethod
    def resume(cls, ledger_path: Path | str, *, stop_file: Path | None = None,
               progress: Progress | None = None, price: float | None = None,
               cluster: Any = None) -> Runner:
        """Verify and replay the ledger; rebuild the spec from its first record. Appends nothing
        (the `resumed` record, any `abandon` and a `resources` record for a new `price` are
        written by `continue_run`)."""
        if price is not None and not is_price(price):
            raise BadInput(str(ledger_path), "--price", f"must be a number of spend units per "
                           f"second > 0, got {price!r}", "give e.g. --price 2.5")
        ledger_path = Path(ledger_path).absolute()  # as in start: other folders, same file
        lock = lock_ledger(ledger_path)  # before open: opening may cut a torn tail
        try:
            ledger, replayed = open_replayed(ledger_path)  # one streaming pass, no records held
            # the signature first: nothing is appended to (or signed after) a chain that does
            # not extend the last signed head
            policy = recorded_policy(replayed.first.get("policy"), ledger_path)
            from loopproof.engine.record.signing import check_extends_signed
            check_extends_signed(ledger_path, len(ledger), signing_keys(policy)[1])
        except BaseException:
            os.close(lock)
            raise
        spec = Spec.from_record(replayed.first.get("spec", {}), str(ledger_path))
        if replayed.first.get("jobs") is not None:  # `run --jobs N`: the limit it ran with
            spec = with_jobs(spec, replayed.first["jobs"], "records[0].jobs", str(ledger_path))
        if graph_record(spec.graph) != replayed.first["graph"]:
            raise LedgerCorrupt(f"{ledger_path}: the stored spec does not give the stored graph; "
                                f"fix: restore the ledger from a trusted copy")
        stop = Path(stop_file or replayed.first.get("stop_file")
                    or default_stop_file(Path(ledger_path)))
        # the policy is re-pinned from the record; checked (and recorded) by recover
        try:
            refuse_unfit_model_calls(spec, replayed.price if price is None else float(price))
            refuse_missing_keys(spec)
            if cluster is not None:
                spec = remote_spec(spec, cluster, str(ledger_path), ledger_path)
            runner = cls(spec, ledger, replayed, stop_file=stop, progress=progress,
                         policy=policy, cluster=cluster)
        except BadInput:  # e.g. bwrap is missing here: exit 2, nothing appended
            ledger.close()
            os.close(lock)
            raise
        runner._lock_fd = lock
        runner.new_price = None if price is None else float(price)
        return runner

    # ---- state -------------------------------------------------------------------------------
    @property
    def state(self) -> RunState:
        return self.replayed.state

    @property
    def progress(self) -> Progress | None:
        """Called with the replayed state and each appended record (may be set after build)."""
        return self.journal.progress

    @progress.setter
    def progress(self, value: Progress | None) -> None:
        self.journal.progress = value

    @property
    def policy(self) -> Any:
        """The policy pin (engine.policy.pin.PolicyPin), or None."""
        return self.integrity.policy

    # ---- the loop ----------------------------------------------------------------------------
    def run(self) -> int:
        """Run until the run ends, a stop is requested, or a pinned file changes; exit code."""
        with self._signals():
            try:
                if self.graph.max_parallel > 1:
                    fly(self)  # engine/run/flight.py
                else:
                    while self.step():
                        pass
            except PinChanged as exc:
                self.error = str(exc)
            except LedgerLost as exc:  # nothing more is recorded; no end state, no signature
                self.error = str(exc)
            finally:
                with contextlib.suppress(LedgerLost):
                    self.journal.sync()
        try:  # the end: the file on disk must be the chain written before it is reported or
            self.ledger.verify_owned()  # signed
            if self.policy is not None and self.error is None:
                sign(self.ledger, self.policy)
        except LedgerLost as exc:
            self.error = str(exc)
        return self.exit_code()

    def exit_code(self) -> int:
        return finish.exit_code(self.journal, error=self.error, stopped=self.stopped)

    def continue_run(self) -> int:
        """After `resume`: recover, then run on."""
        code = self.recover()
        return self.run() if code is None else code

    def recover(self) -> int | None:
        """Record the resume and recover an attempt with no recorded end. Returns an exit code
        when the run cannot go on (it has ended: nothing is written; the stop file is still
        there: nothing is written; a pinned file changed: that is recorded), else None."""
        # whatever the ledger says: no process a killed engine left in the run's cgroups (a
        # sandbox half-way through its start included) lives on (engine/system/limits/)
        reaped = limits.reap(limits.owner_of(self.ledger.path))
        if self.state.ended:
            return self.exit_code()  # a finished run: report, change nothing
        if self.stop_file.exists():
            self.stopped = True
            return EXIT_STOPPED
        try:
            self.integrity.check_pins()
            self.integrity.check_policy()
        except PinChanged as exc:
            self.error = str(exc)
            return EXIT_PIN_CHANGED
        faults.crashpoint("runner.resume")
        remote = self.cluster and self.cluster.reap(limits.owner_of(self.ledger.path))
        recover(self.journal, self.handoff.root, self.new_price, reaped, remote)
        return None

    def stop_reason(self) -> str | None:
        if self.gate_stop is not None:
            return self.gate_stop
        if self.stop_signal is not None:
            return f"signal {self.stop_signal}"
        if self.stop_file.exists():
            return f"stop file {self.stop_file}"
        return None

    def step(self) -> bool:
        """Take one scheduling decision (at a safe point) and carry it out; False when the run
        has ended or stopped."""
        if self.state.ended:
            return False
        reason = self.stop_reason()
        if reason is not None:
            self.journal.note({"type": "stopped", "reason": reason,
                               "settled": self.state.settled})
            self.stopped = True
            return False
        move = schedule.next_move(self.graph, self.state, plan_due=self.planner.due,
                                  frontier=self.frontier)
        if move.kind == "plan":
            self.planner.plan_round()
        elif move.kind == "attempt":
            assert move.node is not None
            run_attempt(move.node, spec=self.spec, journal=self.journal,
                        integrity=self.integrity, handoff=self.handoff, planner=self.planner,
                        sandbox=self.sandbox)
            self.gate_stop = self.gate_stop or self.gate_error_stop(move.node)
        elif move.kind == "finish":
            return finish.finish(self.journal, self.integrity, move.facts, self.approved_by)
        else:  # repair, fail, refuse: one model event
            assert move.event is not None
            if move.kind == "repair":
                faults.crashpoint("runner.repair")
            self.journal.commit(move.event, move.facts)
        return True

    def gate_error_stop(self, node: str) -> str | None:
        return gate_error_stop(self.spec, self.replayed, node)

    # ---- signals and reporting -----------------------------------------------------------------
    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        """SIGTERM / SIGINT request a stop at the next safe point (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def request(signum: int, _frame: object) -> None:
            self.stop_signal = signal.Signals(signum).name

        old = {sig: signal.signal(sig, request) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def report(self) -> dict[str, Any]:
        return finish.report(self.journal, error=self.error, stopped=self.stopped)

    def close(self) -> None:
        self.journal.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None


def with_jobs(spec: Spec, jobs: object, where: str, name: str) -> Spec:
    """`spec` with `max_parallel` = `jobs` (`--jobs N`); bad input names `where`."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise BadInput(name, where, f"must be an integer from 1 to {MAX_JOBS}, got {jobs!r}",
                       "give e.g. --jobs 4 (attempts in flight at once)")
    return dataclasses.replace(spec, graph=spec.graph.with_max_parallel(jobs))


def _ledger_exists(ledger_path: Path) -> BadInput:
    return BadInput(str(ledger_path), "--ledger", "already exists",
                    "use `loopproof resume --ledger` to continue it, or remove it first")

