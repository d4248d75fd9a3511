"""The runner: schedules attempts, asks gates, opens repairs, and ends runs, one ledger record
per model event.

Why this shape: the runner holds no state of its own. Its state is `Replayed` (engine/record/replay.py),
the fold of the ledger's records through `model.step`; `commit` checks the event against the model
*before* appending it, appends it (the commit point), then folds it in. So the state after a crash
is exactly `replay(ledger)`, and `resume` continues from there.

Scheduling is sequential and deterministic: an EXHAUSTED node is repaired (its first listed repair
target) or fails the run; when every node is DONE the run finishes; otherwise the first PENDING
node (topological order, ties by declaration order) whose predecessors are DONE runs its next
attempt, or is refused when settled + c_v does not fit B.

Safe points (where a stop request is honoured) are the moments with no attempt in flight: before
each scheduling decision. The stop file (or SIGTERM / SIGINT) is checked there and a `stopped`
record is appended; `resume` continues.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engine.policy.evolution import (
    TIMEOUT_KNOB,
    Catalog,
    command_planner,
    plan_stage,
    replay_config,
    timeout_catalog,
)
from engine.record.ledger import Ledger
from engine.record.replay import RUN_FORMAT, Replayed, event_record, graph_record, replay
from engine.run.gate import (
    ERROR,
    CommandGate,
    Gate,
    GateResult,
    copy_tree,
    file_digest,
    make_read_only,
    remove_tree,
    tree_digest,
)
from engine.run.meter import METER_SITES, BudgetOverrun, Meter
from engine.run.spec import Spec, is_price
from engine.run.worker import AttemptContext, CommandWorker
from engine.system import faults
from engine.system.errors import BadInput, LedgerCorrupt
from engine.system.process import ProcessError
from model import (
    Abandon,
    Begin,
    Claim,
    Fail,
    Finish,
    Outcome,
    Refuse,
    Repair,
    RunState,
    Verdict,
    enabled,
)
from model.bounds import attempt_bound
from model.transitions import Event

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

EXIT_CODES = {Outcome.DONE: 0, Outcome.FAILED: 3, Outcome.BUDGET_EXHAUSTED: 4}
EXIT_PIN_CHANGED = 5
EXIT_STOPPED = 6
INPUTS = "inputs"

Progress = Callable[[Replayed, dict[str, Any]], None]


class PinChanged(LedgerCorrupt):
    """A file the gate depends on (or the policy) changed since the run started: exit 5."""


def workspace_root(ledger_path: Path) -> Path:
    """Node workspaces live next to the ledger: <ledger>.work/<node>/."""
    return Path(f"{ledger_path}.work")


def accepted_root(ledger_path: Path) -> Path:
    """Judged snapshots live next to the ledger, outside the workers' folder:
    <ledger>.accepted/<node>/<activation>-<attempt>/. The one a gate accepted is what the node's
    successors receive (never the live workspace)."""
    return Path(f"{ledger_path}.accepted")


def default_stop_file(ledger_path: Path) -> Path:
    return Path(f"{ledger_path}.stop")


class Runner:
    """Runs one graph against one ledger. Build with `Runner.start` or `Runner.resume`."""

    def __init__(self, spec: Spec, ledger: Ledger, replayed: Replayed, *, stop_file: Path,
                 progress: Progress | None = None, policy: Any = None) -> None:
        self.spec, self.ledger, self.replayed = spec, ledger, replayed
        self.graph = replayed.graph
        self.stop_file = stop_file
        self.progress = progress
        self.policy = policy
        self.root = workspace_root(ledger.path)
        self.accepted = accepted_root(ledger.path)
        self.pins: dict[str, str] = dict(replayed.first.get("pins", {}))
        self.stop_signal: str | None = None
        self.stopped = False
        self.error: str | None = None  # why the run stopped with exit 5
        self._batch: contextlib.ExitStack | None = None
        self._lock_fd: int | None = None
        self.new_price: float | None = None  # `resume --price`: recorded by `recover`
        self.approved_by: str | None = None  # a human's sign-off, for the `approved` condition
        self.catalog, self.timeouts = _planner_catalog(spec), {}
        if self.catalog is not None:  # the configuration the committed planner stages left
            self.apply_config(replay_config(self.catalog, replayed.stage_done))

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def start(cls, spec: Spec, ledger_path: Path | str, *, stop_file: Path | None = None,
              progress: Progress | None = None) -> Runner:
        """Validate everything, then create the ledger (the first write of the run)."""
        # Absolute from here on: workers, gates and revision nodes run in other folders, and a
        # relative ledger path would name a different file there.
        ledger_path = Path(ledger_path).absolute()
        if spec.strict_bound and not spec.bounds()["fits"]:
            b = spec.bounds()
            raise BadInput(str(spec.path), "[graph] strict_bound",
                           f"the pre-run spend bound W_c = {b['spend']:g} exceeds the budget "
                           f"B = {b['budget']:g}",
                           "raise spend_budget, lower attempts / spend_ceiling / repair_budget, "
                           "or set strict_bound = false")
        if ledger_path.exists():
            raise BadInput(str(ledger_path), "--ledger", "already exists",
                           "use `loopproof resume --ledger` to continue it, or remove it first")
        if not ledger_path.parent.is_dir():
            raise BadInput(str(ledger_path), "--ledger", "its folder does not exist",
                           "create the folder first or choose another path")
        stop = Path(stop_file or spec.stop_file or default_stop_file(ledger_path)).resolve()
        if stop.exists():
            raise BadInput(str(stop), "--stop-file", "the stop file already exists",
                           "remove it, or give another --stop-file")
        policy = _load_policy(spec, workspace_root(ledger_path))
        pins = {str(p): file_digest(p) for cfg in spec.nodes.values()
                for p in cfg.pinned_files()}
        first = {"type": "run", "format": RUN_FORMAT, "graph": graph_record(spec.graph),
                 "spec": spec.record(), "pins": dict(sorted(pins.items())),
                 "policy": policy.record() if policy is not None else None,
                 "stop_file": str(stop), "attempt_bound": attempt_bound(spec.graph),
                 "bounds": spec.bounds(), "price": spec.price}
        root = workspace_root(ledger_path)
        remove_tree(root)  # an old run's workspaces; the ledger they belonged to is gone
        remove_tree(accepted_root(ledger_path))  # and its judged snapshots
        ledger = Ledger.create(ledger_path, first)
        lock = _lock(ledger_path)
        runner = cls(spec, ledger, replay(ledger), stop_file=stop, progress=progress,
                     policy=policy)
        runner._lock_fd = lock
        return runner

    @classmethod
    def resume(cls, ledger_path: Path | str, *, stop_file: Path | None = None,
               progress: Progress | None = None, price: float | None = None) -> Runner:
        """Verify and replay the ledger; rebuild the spec from its first record. Appends nothing
        (the `resumed` record, any `abandon` and a `resources` record for a new `price` are
        written by `continue_run`)."""
        if price is not None and not is_price(price):
            raise BadInput(str(ledger_path), "--price", f"must be a number of spend units per "
                           f"second > 0, got {price!r}", "give e.g. --price 2.5")
        ledger_path = Path(ledger_path).absolute()  # as in start: other folders, same file
        lock = _lock(ledger_path)  # before open: opening may cut a torn tail
        try:
            ledger = Ledger.open(ledger_path)
            replayed = replay(ledger)
        except BaseException:
            os.close(lock)
            raise
        spec = Spec.from_record(replayed.first.get("spec", {}), str(ledger_path))
        if graph_record(spec.graph) != replayed.first["graph"]:
            raise LedgerCorrupt(f"{ledger_path}: the stored spec does not give the stored graph; "
                                f"fix: restore the ledger from a trusted copy")
        stop = Path(stop_file or replayed.first.get("stop_file")
                    or default_stop_file(Path(ledger_path)))
        recorded = replayed.first.get("policy")
        policy = None
        if recorded is not None:  # re-pinned from the record; checked (and recorded) by recover
            from engine.policy.pin import PolicyPin
            if not isinstance(recorded, dict) or "path" not in recorded:
                raise LedgerCorrupt(f"{ledger_path}: record 0: malformed policy record; fix: "
                                    f"restore the ledger from a trusted copy")
            policy = PolicyPin(Path(recorded["path"]), recorded)
        runner = cls(spec, ledger, replayed, stop_file=stop, progress=progress, policy=policy)
        runner._lock_fd = lock
        runner.new_price = None if price is None else float(price)
        return runner

    # ---- state -------------------------------------------------------------------------------
    @property
    def state(self) -> RunState:
        return self.replayed.state

    def commit(self, event: Event, facts: dict[str, Any]) -> RunState:
        """The only way the run's state changes: the model must allow `event`; then its record is
        appended (the commit point) and folded into the replayed state."""
        reason = event.why_not(self.graph, self.state)
        if reason is not None:
            raise RuntimeError(f"engine bug: {event} is not enabled: {reason}")
        self._append(event_record(event, **facts))
        return self.state

    def note(self, record: dict[str, Any]) -> None:
        """Append a fact record (no model event): resumed, stopped, pin_changed, worker_output."""
        self._append(record)

    def _append(self, record: dict[str, Any]) -> None:
        if self._batch is None:  # group commit until the next point that needs durability
            self._batch = contextlib.ExitStack()
            self._batch.enter_context(self.ledger.group())
        stored = self.ledger.append(record)
        self.replayed.apply(stored)
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
        if self._batch is not None:
            batch, self._batch = self._batch, None
            batch.close()

    # ---- the loop ----------------------------------------------------------------------------
    def run(self) -> int:
        """Run until the run ends, a stop is requested, or a pinned file changes; exit code."""
        with self._signals():
            try:
                while self.step():
                    pass
            except PinChanged as exc:
                self.error = str(exc)
            finally:
                self.sync()
        if self.policy is not None and self.error is None:
            _sign(self.ledger.path, self.policy)
        return self.exit_code()

    def exit_code(self) -> int:
        if self.state.ended:
            return EXIT_CODES[self.state.outcome]
        if self.error:
            return EXIT_PIN_CHANGED
        if self.replayed.release_unmet is not None and not self.stopped:
            return EXIT_CODES[Outcome.FAILED]  # every node DONE, but the result is not released
        return EXIT_STOPPED

    def continue_run(self) -> int:
        """After `resume`: recover, then run on."""
        code = self.recover()
        return self.run() if code is None else code

    def recover(self) -> int | None:
        """Record the resume and recover an attempt with no recorded end. Returns an exit code
        when the run cannot go on (it has ended: nothing is written; the stop file is still
        there: nothing is written; a pinned file changed: that is recorded), else None."""
        if self.state.ended:
            return self.exit_code()  # a finished run: report, change nothing
        if self.stop_file.exists():
            self.stopped = True
            return EXIT_STOPPED
        try:
            self.check_pins()
            self.check_policy()
        except PinChanged as exc:
            self.error = str(exc)
            return EXIT_PIN_CHANGED
        faults.crashpoint("runner.resume")
        orphans = kill_orphans(self.root)
        self.note({"type": "resumed", "resume": self.replayed.resumes + 1,
                   "settled": self.state.settled, "reserved": self.state.reserved,
                   "orphans_killed": len(orphans)})
        node = self.state.running(self.graph)
        if node is not None:
            self.commit(Abandon(node), {
                "outcome": "unknown", "charged": self.state.reserved,
                "activation": self.state.activation_of(self.graph, node),
                "attempt": self.state.attempts_of(self.graph, node),
                "why": "this attempt started before a crash or stop and has no recorded end: "
                       "its outcome is unknown; it is charged its open reservation and given "
                       "back (it does not count against the node's attempts), and the node "
                       "will run again (a repeated execution, counted in the report)"})
        if self.new_price is not None and self.new_price != self.replayed.price:
            # a change of resources: later attempts are metered (and their deadlines set) at
            # the new price; the settled spend replayed from the ledger stays as it is
            self.note({"type": "resources", "old_price": self.replayed.price,
                       "new_price": self.new_price, "settled": self.state.settled})
        return None

    def stop_reason(self) -> str | None:
        if self.stop_signal is not None:
            return f"signal {self.stop_signal}"
        if self.stop_file.exists():
            return f"stop file {self.stop_file}"
        return None

    def step(self) -> bool:
        """Take one scheduling decision (at a safe point); False when the run has ended or
        stopped."""
        s, g = self.state, self.graph
        if s.ended:
            return False
        reason = self.stop_reason()
        if reason is not None:
            self.note({"type": "stopped", "reason": reason, "settled": s.settled})
            self.stopped = True
            return False
        if (node := s.running(g)) is not None:  # only after a crash inside this process
            raise RuntimeError(f"{node!r} has an attempt in flight; use resume")
        if self.catalog is not None and self.replayed.accepts > len(self.replayed.stage_done):
            self.plan_round()  # a round boundary (a node reached DONE) with no stage yet
            return True
        if (x := s.exhausted(g)) is not None:
            self._repair_or_fail(x)
            return True
        if enabled(g, s, Finish()):
            unmet = self.release_unmet()
            if unmet:  # the run does not end DONE: why is recorded, and it stops with exit 3
                from engine.policy.pin import RELEASE_CONDITIONS
                self.note({"type": "release_unmet", "unmet": unmet, "settled": s.settled,
                           "why": {c: RELEASE_CONDITIONS[c] for c in unmet}})
                return False
            self.commit(Finish(), {"settled": s.settled})
            return True
        node = self.next_node()
        if enabled(g, s, Refuse(node)):
            self.commit(Refuse(node), {
                "settled": s.settled, "ceiling": g.node(node).spend_ceiling,
                "budget": g.spend_budget,
                "why": "settled + c_v exceeds B: the next attempt could not be paid for"})
            return True
        self.attempt(node)
        return True

    def plan_round(self) -> None:
        """Ask the `[planner]` command which catalogue entries to merge, between attempts.

        It runs in a fresh scratch folder (<ledger>.planner/) with the allow-listed environment
        and the context (stage, round, current configuration, catalogue ids) as JSON on stdin.
        `engine.policy.evolution.evolve` checks its reply; rejections and the `stage_done` commit are
        appended as fact records. A planner that cannot start is recorded as a malformed
        reply. The planner's wall clock is not metered (it runs outside every attempt)."""
        assert self.catalog is not None and self.spec.planner is not None
        scratch = Path(f"{self.ledger.path}.planner")
        remove_tree(scratch)
        scratch.mkdir()
        plan = command_planner(self.spec.planner.argv, scratch, self.spec.planner.timeout_s)

        def guarded(context: Any) -> object:
            try:
                return plan(context)
            except ProcessError as exc:  # not JSON: recorded as a malformed reply
                return f"planner could not run: {exc}"

        config = replay_config(self.catalog, self.replayed.stage_done)
        decision = plan_stage(self.catalog, config, guarded, stage="round",
                              round=len(self.replayed.stage_done), recorder=_Noter(self.note))
        self.apply_config(decision.config)
        remove_tree(scratch)

    def apply_config(self, config: dict[str, float]) -> None:
        self.timeouts = {k[len(TIMEOUT_KNOB):]: v for k, v in config.items()
                         if k.startswith(TIMEOUT_KNOB)}

    def worker_for(self, node: str) -> Any:
        """The node's worker, with the timeout the planner's accepted stages set (never higher
        than the spec's)."""
        worker = self.spec.nodes[node].worker
        t = self.timeouts.get(node)
        if t is not None and isinstance(worker, CommandWorker) and t < worker.timeout_s:
            worker = dataclasses.replace(worker, timeout_s=t)
        return worker

    def release_unmet(self) -> list[str]:
        """The pinned policy's release conditions that do not hold now, every node being DONE
        ([] without a policy). A changed pin or policy raises PinChanged (exit 5) first, so
        `pins_unchanged` holds here. `ledger_verified`: the ledger, synced, verifies now.
        `signed`: the policy names a private key that loads (the head is signed with it when
        the run ends). `approved`: `approved_by` names the policy's approver."""
        if self.policy is None:
            return []
        self.check_pins()
        self.check_policy()
        from engine.policy.pin import parse_policy
        from engine.record.ledger import verify
        from engine.record.signing import _load_private
        policy = self.policy.policy or parse_policy(self.policy.path.read_bytes(),
                                                    self.policy.path)
        self.sync()
        priv, _ = policy.key_paths()
        signed = priv is not None
        if signed:
            try:
                _load_private(priv)
            except BadInput:
                signed = False
        return policy.release_unmet(outcome="DONE",
                                    ledger_status=verify(self.ledger.path).status,
                                    pins_unchanged=True, signed=signed,
                                    approved_by=self.approved_by)

    def next_node(self) -> str:
        s, g = self.state, self.graph
        for name in g.names:
            if enabled(g, s, Begin(name)) or enabled(g, s, Refuse(name)):
                return name
        raise RuntimeError(f"engine bug: nothing can run in {s.summary(g)}")

    def _repair_or_fail(self, x: str) -> None:
        g, s = self.graph, self.state
        targets = [u for d, u in g.repair_pairs if d == x]
        if targets and enabled(g, s, Repair(x, targets[0])):
            faults.crashpoint("runner.repair")
            self.commit(Repair(x, targets[0]), {
                "rerun": sorted(g.subtree(targets[0])), "repairs_left":
                    g.repair_budget - s.repairs_used - 1})
            return
        why = "no repair declared" if not targets else "the global repair budget K is spent"
        self.commit(Fail(x), {"why": why})

    # ---- one attempt -------------------------------------------------------------------------
    def attempt(self, node: str) -> None:
        g = self.graph
        cfg = self.spec.nodes[node]
        self.check_policy()
        faults.crashpoint("runner.before_begin")
        e = self.state.activation_of(g, node)
        i = self.state.attempts_of(g, node) + 1
        ws = self.prepare_workspace(node)  # before Begin: a bad hand-off stops with no attempt open
        self.commit(Begin(node), {"activation": e, "attempt": i})
        meter = Meter(g, node, self.commit, lambda: self.state, sync=self.sync,
                      price=self.replayed.price, eval_reserve=cfg.eval_reserve, note=self.note)
        ctx = AttemptContext(node, e, i, ws, meter, env={
            "LOOPPROOF_NODE": node, "LOOPPROOF_ACTIVATION": str(e), "LOOPPROOF_ATTEMPT": str(i)})
        faults.crashpoint("runner.before_worker")
        try:
            claims = self.worker_for(node).run(ctx)
        except BudgetOverrun as exc:  # an adapter that lets the overrun through
            claims = {"overrun": str(exc)}
        faults.crashpoint("runner.after_worker")
        meter.close()
        where = {"activation": e, "attempt": i}
        if self.state.running(g) != node:  # the attempt ended inside the worker (Overrun)
            self.note({"type": "worker_output", "node": node, **where, "claims": claims})
            return
        self.commit(Claim(node), {**where, "claims": claims})
        if meter.broken is not None:  # a settle claim above its reservation: fails, unjudged
            self.commit(Verdict(node, False), {**where, "verdict": "error", "seconds": 0.0,
                                               "detail": f"not judged: {meter.broken}",
                                               "snapshot": ""})
            return
        try:
            self.check_pins(node)
        except PinChanged as exc:
            self.commit(Verdict(node, False), {**where, "verdict": "error", "seconds": 0.0,
                                               "detail": f"not judged: {exc}", "snapshot": ""})
            raise
        self.check_policy()
        faults.crashpoint("runner.before_verdict")
        judged = self.judged_path(node, e, i)
        staged, stage_error = stage_snapshot(ws, judged)
        try:  # the gate run is paid from c_v too: reserved after the worker's settlement
            limit = meter.reserve_evaluation(cfg.gate_timeout_s)
        except BudgetOverrun:  # recorded as an Overrun: the attempt has ended, no verdict
            remove_tree(judged)
            return
        if staged is None:
            result = GateResult(ERROR, f"cannot copy the workspace to judge it: {stage_error}",
                                0.0)
        else:
            result = judge_within(cfg.gate, judged, limit)
            after = _digest_or_why(judged)
            if result.accepted and after != staged:
                result = GateResult(ERROR, "the judged copy changed while the gate judged it "
                                    f"({staged[:12]}... -> {after[:12]}...)",
                                    result.seconds, result.snapshot)
        if not result.accepted:
            remove_tree(judged)
        meter.settle_evaluation(result.seconds)
        facts = {**where, "verdict": result.verdict, "detail": result.detail,
                 "seconds": round(result.seconds, 6), "snapshot": result.snapshot}
        if result.accepted:  # the tree successors receive (`hand_off` checks it)
            facts["accepted_tree"] = staged
        anchor = getattr(cfg.gate, "receipt_anchor", None)
        if result.accepted and anchor is not None and (receipt := anchor()) is not None:
            facts["receipt"] = receipt  # the receipt's digest, anchored in the run ledger
        self.commit(Verdict(node, result.accepted), facts)
        if result.accepted:  # older accepted snapshots of this node are no longer handed off
            for old in self.accepted.joinpath(node).iterdir():
                if old.name != judged.name:
                    remove_tree(old)
        faults.crashpoint("runner.after_verdict")

    def judged_path(self, node: str, activation: int, attempt: int) -> Path:
        return self.accepted / node / f"{activation}-{attempt}"

    def prepare_workspace(self, node: str) -> Path:
        """The node's workspace persists across its attempts and activations. Before each
        attempt, every predecessor's *accepted* snapshot (the tree its gate judged and accepted,
        without its own inputs/) is copied, read-only, to inputs/<predecessor>/, replacing any
        older copy. The copy is hashed and must match the snapshot hash in the accepting
        verdict record; a mismatch (or a missing snapshot) is recorded and stops the run
        (exit 5), before any Begin."""
        ws = self.root / node
        ws.mkdir(parents=True, exist_ok=True)
        inputs = ws / INPUTS
        remove_tree(inputs)
        preds = self.graph.predecessors(node)
        if preds:
            inputs.mkdir()
            for p in preds:
                self.hand_off(node, p, inputs / p)
        return ws

    def hand_off(self, node: str, pred: str, dst: Path) -> None:
        """Copy `pred`'s accepted snapshot to `dst` and check the copy against the verdict."""
        rec = self.replayed.accepted.get(pred)
        expected = "" if rec is None else str(rec.get("accepted_tree") or "")
        src = (self.judged_path(pred, rec["activation"], rec["attempt"]) if rec is not None
               else self.accepted / pred)
        found = "missing"
        if expected and src.is_dir():
            try:
                copy_tree(src, dst)
                found = tree_digest(dst)
            except (OSError, shutil.Error) as exc:
                found = f"unreadable: {exc}"
        if not expected or found != expected:
            remove_tree(dst)
            self.note({"type": "pin_changed", "what": "accepted_snapshot", "node": node,
                       "predecessor": pred, "file": str(src), "expected": expected,
                       "found": found})
            raise PinChanged(f"{src}: the snapshot {pred!r}'s gate accepted is not what its "
                             f"verdict recorded (sha256 {expected[:12] or 'none'}... -> "
                             f"{found[:12]}...); fix: restore it from a trusted copy, or start "
                             f"the run again")
        remove_tree(dst / INPUTS)  # the predecessor's own inputs are not handed on
        make_read_only(dst)

    # ---- integrity ---------------------------------------------------------------------------
    def check_pins(self, node: str | None = None) -> None:
        """Re-hash every file pinned at run start (all gates' files: cheap, and a gate file
        that moved or vanished is caught too); a change is recorded and stops the run."""
        for path, expected in self.pins.items():
            found = file_digest(Path(path))
            if found != expected:
                self.note({"type": "pin_changed", "node": node, "file": path,
                           "expected": expected, "found": found})
                raise PinChanged(f"{path}: a file a gate depends on changed since the run "
                                 f"started (sha256 {expected[:12]}... -> {found[:12]}...); "
                                 f"fix: restore it, then resume")

    def check_policy(self) -> None:
        if self.policy is None:
            return
        try:
            self.policy.check()
        except LedgerCorrupt as exc:
            self.note({"type": "pin_changed", "file": str(self.spec.policy),
                       "what": "policy", "error": str(exc)})
            raise PinChanged(str(exc)) from exc

    # ---- signals ---------------------------------------------------------------------------
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
        out = self.replayed.summary()
        out["stopped"] = out["stopped"] or self.stopped
        out["ledger"] = str(self.ledger.path)
        out["attempt_bound"] = self.replayed.first.get("attempt_bound")
        out["exit"] = self.exit_code()
        out["error"] = self.error
        out["torn"] = self.ledger.torn
        return out

    def close(self) -> None:
        self.sync()
        self.ledger.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None


def judge_within(gate: Gate, workspace: Path, limit_s: float) -> GateResult:
    """Run the gate with at most `limit_s` seconds of wall clock (its evaluation reservation at
    the current price). A command gate is killed there (a timeout: an `error` verdict); a
    Python gate cannot be killed and is charged at most its reservation."""
    if isinstance(gate, CommandGate) and limit_s < gate.timeout_s:
        gate = dataclasses.replace(gate, timeout_s=limit_s)
    return gate.judge(workspace)


class _Noter:
    """The recorder `engine.policy.evolution` writes to: each record becomes a runner fact record."""

    def __init__(self, note: Callable[[dict[str, Any]], None]) -> None:
        self.append = note


def _planner_catalog(spec: Spec) -> Catalog | None:
    """With a `[planner]`: the code-owned catalogue of its knobs (command workers' timeouts)."""
    if spec.planner is None:
        return None
    return timeout_catalog({n: c.worker.timeout_s for n, c in spec.nodes.items()
                            if isinstance(c.worker, CommandWorker)})


def stage_snapshot(workspace: Path, dst: Path) -> tuple[str | None, str]:
    """Copy the workspace to `dst` and hash it (`tree_digest`): the tree the gate judges and, if
    it accepts, the tree successors receive. Modes are kept as the worker left them (a receipt
    gate compares the tree, modes included, with its checkpoint); what protects the copy is
    its hash, checked after the gate and again at every hand-off. Returns (hash, "") or
    (None, why it failed)."""
    remove_tree(dst)  # an attempt given back after a crash runs again under the same name
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        copy_tree(workspace, dst)
        return tree_digest(dst), ""
    except (OSError, shutil.Error) as exc:  # e.g. a file the worker made unreadable
        remove_tree(dst)
        return None, str(exc)


def _digest_or_why(root: Path) -> str:
    try:
        return tree_digest(root)
    except OSError as exc:
        return f"unreadable: {exc}"


def kill_orphans(root: Path) -> list[int]:
    """Kill the process groups of workers a crashed engine left running in this run's
    workspaces, so a re-run attempt never shares its workspace with the one it replaces.

    A worker runs in its own session, so when the engine is SIGKILLed nothing stops it. On
    resume, a process counts as such an orphan only if its environment carries LOOPPROOF_NODE
    (set by the engine for workers) and its working directory lies inside `root`; a user's shell
    in the folder is left alone. Linux /proc only; elsewhere this finds nothing."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    root_s = str(root.resolve())
    own = os.getpgrp()
    killed: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            if not (cwd == root_s or cwd.startswith(root_s + os.sep)):
                continue
            if b"LOOPPROOF_NODE=" not in (entry / "environ").read_bytes():
                continue
            pgid = os.getpgid(int(entry.name))
        except (OSError, ValueError):
            continue
        if pgid != own and pgid not in killed:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
                killed.append(pgid)
    return killed


def _lock(ledger_path: Path) -> int:
    """One engine per ledger: an exclusive lock on the ledger file for the whole run (the kernel
    drops it if the process dies). A second `run`/`resume` on the same ledger is refused."""
    try:
        fd = os.open(ledger_path, os.O_RDONLY)
    except FileNotFoundError:
        raise BadInput(str(ledger_path), "--ledger", "file not found",
                       "give the path of an existing ledger file") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise BadInput(str(ledger_path), "--ledger", "another loopproof process is running "
                       "this ledger", "wait for it to finish, or stop it (kill switch), then "
                       "resume") from None
    return fd


def _load_policy(spec: Spec, root: Path) -> Any:
    """Pin the policy the graph names; refuse (exit 2) a graph that asks for more than the policy
    allows, or a policy that lies inside the workers' folder."""
    if spec.policy is None:
        return None
    from engine.policy.pin import PolicyPin

    pin = PolicyPin.load(spec.policy)
    b = spec.bounds()
    problems = pin.policy.admits(spend_budget=spec.graph.spend_budget,
                                 repair_budget=spec.graph.repair_budget,
                                 attempt_bound=b["attempts"])
    if problems:
        raise BadInput(str(spec.path), "[graph] policy", "; ".join(problems),
                       "lower the graph's budgets, or have the policy's owner raise them")
    pin.assert_outside(root)
    return pin


def _sign(ledger_path: Path, pin: Any) -> None:
    """Sign the ledger head when the policy names a signing key (engine.record.signing)."""
    policy = getattr(pin, "policy", None)
    if policy is None:
        from engine.policy.pin import parse_policy
        policy = parse_policy(pin.path.read_bytes(), pin.path)
    from engine.policy.pin import sign_with_policy
    sign_with_policy(ledger_path, policy)

