"""The guarded meta-agent learning loop, driven on loopproof's engine primitives.

It writes through the engine's journal (engine/run/journal.py: the model check, the redaction of
the engine's secrets, the record check, append and fold, under one lock), with its own record
types registered by this study (experiments/growth/records.py), not by the engine.

A run is one attempt of a one-node graph whose spend ceiling and budget are the pinned policy's
`budget.spend` (GPU-hours): the model's `Reserve` guard is then the prefix budget check itself,
and every stage is a `Reserve`/`Settle` pair through `engine.run.meter.Meter`, like any metered
operation. A round is: a `round` record (the work it asks for), training stages of up to
STAGE_WORK GPU-hours (reserved before they run; one `tick` record per unit of work, which is
what a stage is charged), one evaluation (1,000 episodes, reserved ahead: every training
reservation is made with the evaluation's cost held back, `Meter(eval_reserve=...)`), then the
planner's round stage, committed in one `stage_done` record (engine.policy.evolution). When no
round can run (the target is met, or the budget left is below the smallest affordable round)
the loop is idle: with idle growth on, one idle pass commits through one `idle_finished`
record; then the run's verdict ends it (target met: DONE; otherwise FAILED).

The pinned policy (engine.policy.pin: goals, scope, the evaluation file, budget, release
conditions) is checked before every stage; a stop file is honoured at every stage boundary.
State is never kept across processes: `resume` verifies the ledger, replays it (the model state
through engine.record.replay, the configuration through evolution.replay_config), settles an
open reservation at the charges its ticks recorded and re-reserves the unfinished work at the
resources now in force (a `resources` record when GPUs, step or price changed).

`FAULTS` plants one fault each, for the negative controls of the studies; none is on by default.

Why one module: about 490 lines on purpose, since the stages and their recovery are one state
machine over one ledger (which record comes next, and how resume finds its place among them);
split, the stage order and the resume that must agree with it would live in different files.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from experiments.growth import catalogue, sim
from experiments.growth.folder import CALLS, EVALUATION, LEDGER, POLICY, prepare
from experiments.growth.progress import DEFAULT_RESOURCES, FULL_LOOP, Arm, Resources, View
from experiments.growth.records import GROWTH_RECORDS
from loopproof.engine.policy.evolution import Decision, evolve, replay_config
from loopproof.engine.policy.pin import PolicyChanged, PolicyPin
from loopproof.engine.record.ledger import Ledger, verify
from loopproof.engine.record.replay import RUN_FORMAT, Replayed, graph_record, replay
from loopproof.engine.run.finish import EXIT_CODES
from loopproof.engine.run.journal import Journal
from loopproof.engine.run.meter import BudgetOverrun, Meter
from loopproof.engine.system import faults as crash
from loopproof.engine.system.errors import BadInput, LedgerCorrupt
from loopproof.engine.system.exits import Exit
from loopproof.model import (
    Fail,
    Finish,
    LoopGraph,
    NodeSpec,
    Settle,
    Status,
    Verdict,
    enabled,
)
from loopproof.model.transitions import EPS, Begin, Event

NODE = "growth"
EXIT = EXIT_CODES  # the engine's: the loop's outcomes exit as a run's do
EXIT_PIN_CHANGED, EXIT_STOPPED = Exit.CORRUPT, Exit.STOPPED
EXIT_BROKEN = 7  # the loop's own: a planted fault broke the run (the studies' negative controls)
WORK_GRID = 8  # work is planned in 1/8 GPU-hour steps, so charges are exact to 6 decimals

# The loop's own crash boundaries (engine.system.faults.crashpoint), in run order. With the
# engine's meter and ledger sites they are every place the crash matrix kills a run.
SITES: tuple[str, ...] = (
    "growth.after_create",       # record 0 is in place, Begin not yet recorded
    "growth.before_round",       # pin checked; the round's `round` record not yet written
    "growth.before_stage",       # a training stage is next; nothing reserved
    "growth.tick",               # a tick's charge recorded, the stage not settled
    "growth.before_evaluation",  # training settled; the evaluation not yet reserved
    "growth.after_episodes",     # the episodes ran; their result not yet recorded
    "growth.after_evaluation",   # the result recorded; the evaluation not yet settled
    "growth.before_plan",        # the planner not yet called
    "growth.after_plan",         # the planner replied; nothing recorded (pre-commit)
    "growth.before_commit",      # rejections recorded, `stage_done` not yet (pre-commit)
    "growth.after_commit",       # `stage_done` recorded
    "growth.before_idle",        # the idle planner not yet called
    "growth.after_idle_plan",    # the idle planner replied; nothing recorded (pre-commit)
    "growth.before_idle_commit",  # `idle_finished` not yet recorded (pre-commit)
    "growth.after_idle_commit",  # `idle_finished` recorded
    "growth.before_end",         # the verdict not yet recorded
    "growth.after_verdict",      # the verdict recorded, the run's end (finish/fail) not yet
    "growth.resume",             # resume verified and replayed the ledger; appended nothing
    "growth.after_reprice",      # resume settled an open reservation; nothing re-reserved
)
PRE_COMMIT = ("growth.after_plan", "growth.before_commit", "growth.after_idle_plan",
              "growth.before_idle_commit")
FAULTS = frozenset({"unreserved_stage", "skip_repricing", "policy_write", "no_config_replay",
                    "ignore_stop"})


Planner = Callable[[Mapping[str, Any]], object]
Boundary = Callable[["GrowthLoop", str], None]


class GrowthLoop:
    """One run of the loop against one ledger. Build with `start` or `resume`; then `run()`."""

    def __init__(self, folder: Path, ledger: Ledger, replayed: Replayed, pin: PolicyPin, *,
                 planner: Planner | None, faults: Iterable[str], on_boundary: Boundary | None
                 ) -> None:
        self.folder, self.ledger, self.replayed, self.pin = folder, ledger, replayed, pin
        # the engine's journal is the one writer: the model check, redaction of the engine's
        # secrets, the record check against GROWTH_RECORDS, append and fold, under one lock
        self.journal = Journal(ledger, replayed, progress=lambda _r, stored: self._fold(stored))
        self.graph: LoopGraph = replayed.graph
        first = replayed.first["growth"]
        self.seed = int(first["seed"])
        self.arm = Arm(first["arm"]["round"], first["arm"]["idle"])
        self.budget = float(self.graph.spend_budget)
        self.target = float(json.loads((folder / EVALUATION).read_text())["target"])
        self.planner = planner or catalogue.plan
        self.faults = frozenset(faults)
        unknown = self.faults - FAULTS
        if unknown:
            raise ValueError(f"unknown fault(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.on_boundary = on_boundary
        self.catalog = catalogue.CATALOG
        self.view = View(Resources(**first["resources"], price=replayed.first["price"]))
        for rec in ledger.records[1:]:
            self._fold(rec)
        self.config = replay_config(self.catalog, ledger.records)
        self.stop_file = folder / (LEDGER + ".stop")
        self.stopped = False
        self.error: str | None = None
        self.boundaries = 0
        self.resuming = False
        self.new_resources: Resources | None = None

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def start(cls, folder: Path, *, seed: int, arm: Arm = FULL_LOOP,
              resources: Resources = DEFAULT_RESOURCES, planner: Planner | None = None,
              faults: Iterable[str] = (), on_boundary: Boundary | None = None) -> GrowthLoop:
        """Pin the policy in `folder` (see `prepare`) and create the ledger: the run's first
        write. The node's spend ceiling and the budget are the policy's budget.spend."""
        folder = folder.absolute()
        pin = PolicyPin.load(folder / POLICY)
        assert pin.policy is not None
        budget = float(pin.policy["budget.spend"])
        graph = LoopGraph.build([NodeSpec(NODE, attempts=1, spend_ceiling=budget)],
                                repair_budget=0, spend_budget=budget)
        bad = pin.policy.admits(spend_budget=budget, repair_budget=0, attempt_bound=1)
        if bad:  # pragma: no cover - the graph is built from the policy
            raise BadInput(str(pin.path), "budget", "; ".join(bad), "fix the policy")
        first = {"type": "run", "format": RUN_FORMAT, "graph": graph_record(graph),
                 "price": resources.price, "policy": pin.record(),
                 "growth": {"seed": seed, "arm": {"round": arm.round_growth,
                                                  "idle": arm.idle_growth},
                            "resources": {"gpus": resources.gpus, "step": resources.step},
                            "catalogue": catalogue.digest(), "planner": catalogue.PLANNER}}
        GROWTH_RECORDS.check_append(first, folder / LEDGER)
        ledger = Ledger.create(folder / LEDGER, first)
        loop = cls(folder, ledger, replay(ledger, registry=GROWTH_RECORDS), pin, planner=planner,
                   faults=faults,
                   on_boundary=on_boundary)
        crash.crashpoint("growth.after_create")
        return loop

    @classmethod
    def resume(cls, folder: Path, *, resources: Resources | None = None,
               planner: Planner | None = None, faults: Iterable[str] = (),
               on_boundary: Boundary | None = None) -> GrowthLoop:
        """Verify and replay the ledger and re-pin the policy from its recorded digests. Appends
        nothing; `run()` records the resume and recovers first."""
        folder = folder.absolute()
        ledger = Ledger.open(folder / LEDGER)
        replayed = replay(ledger, registry=GROWTH_RECORDS)
        growth = replayed.first.get("growth")
        if not isinstance(growth, dict) or growth.get("catalogue") != catalogue.digest():
            raise LedgerCorrupt(f"{folder / LEDGER}: record 0 is not a growth run of this "
                                f"catalogue; fix: resume with the code the run started with")
        pin = PolicyPin.resume(None, replayed.first["policy"])
        loop = cls(folder, ledger, replayed, pin, planner=planner, faults=faults,
                   on_boundary=on_boundary)
        if "no_config_replay" in loop.faults:  # planted: forget the committed stages
            loop.config = loop.catalog.defaults()
        loop.new_resources, loop.resuming = resources, True
        return loop

    # ---- records -----------------------------------------------------------------------------
    @property
    def state(self):  # noqa: ANN201 - model.RunState
        return self.replayed.state

    def _fold(self, rec: Mapping[str, Any]) -> None:
        self.view.apply(rec)

    def commit(self, event: Event, facts: dict[str, Any]):  # noqa: ANN201 - model.RunState
        """A model event: the model must allow it, then its record is appended (the journal's
        commit, as every engine run's)."""
        return self.journal.commit(event, facts)

    def note(self, record: dict[str, Any]) -> None:
        self.journal.note(record)

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        """One durable batch: the records appended inside are made durable together at its end."""
        try:
            yield
        finally:
            self.journal.sync()

    def append(self, record: dict[str, Any]) -> None:
        """The recorder evolution writes to: crash sites before its commit record."""
        if record["type"] == "stage_done":
            crash.crashpoint("growth.before_commit")
        elif record["type"] == "idle_finished":
            crash.crashpoint("growth.before_idle_commit")
        self.journal.note(record)

    def _call(self, what: str) -> None:
        """Count a real execution (planner call or evaluation) outside the ledger."""
        with open(self.folder / CALLS, "a", encoding="utf-8") as f:
            f.write(what + "\n")

    # ---- the loop ----------------------------------------------------------------------------
    def run(self) -> int:
        """Recover (after `resume`), then run stages until the run ends or stops; exit code."""
        try:
            if self.resuming:
                code = self._recover()
                if code is not None:
                    return code
            while self._step():
                pass
        except PolicyChanged as exc:
            self.error = str(exc)
            with contextlib.suppress(Exception):
                self.note({"type": "pin_changed", "error": self.error[:500]})
        except BudgetOverrun as exc:
            self.error = str(exc)
            self.note({"type": "loop_broken", "error": self.error[:500]})
            return EXIT_BROKEN
        finally:
            self.journal.close()
        return self.exit_code()

    def exit_code(self) -> int:
        if self.state.ended:
            return EXIT[self.state.outcome]
        if self.error:
            return EXIT_PIN_CHANGED
        return EXIT_STOPPED

    def _recover(self) -> int | None:
        if self.state.ended:
            return self.exit_code()
        if self.stop_file.exists():
            self.stopped = True
            return EXIT_STOPPED
        self.pin.check()
        crash.crashpoint("growth.resume")
        with self.group():
            self.note({"type": "resumed", "resume": self.replayed.resumes + 1,
                       "settled": self.state.settled, "reserved": self.state.reserved})
            new = self.new_resources
            if new is not None and new != self.view.resources:
                old = self.view.resources
                self.note({"type": "resources", "old_price": old.price, "new_price": new.price,
                           "gpus_old": old.gpus, "gpus": new.gpus, "step_old": old.step,
                           "step": new.step, "settled": self.state.settled})
            if self.state.reserved > EPS and "skip_repricing" not in self.faults:
                self._reprice()
        return None

    def _reprice(self) -> None:
        """Settle the open reservation at what its records charged; the unfinished work is
        re-reserved, at the resources now in force, by the next stage."""
        v = self.view
        if v.open_what == "train":
            charged = sum(t["charge"] for t in v.open_ticks)
            facts = {"ticks": len(v.open_ticks), "work": sum(t["work"] for t in v.open_ticks)}
        elif v.open_what == "evaluation" and v.last_eval is not None \
                and v.last_eval["round"] == v.round and v.evaluated:
            charged, facts = float(v.last_eval["charge"]), {}
        else:  # an evaluation whose result was never recorded: nothing was charged; it re-runs
            charged, facts = 0.0, {}
        self.commit(Settle(round(charged, 6), node=NODE), {
            "reserved": self.state.reserved, "what": v.open_what, "repriced": True, **facts})
        crash.crashpoint("growth.after_reprice")

    def _boundary(self, where: str) -> bool:
        """A stage boundary: the stop request is honoured and the policy checked. False: stop."""
        self.boundaries += 1
        if self.on_boundary is not None:
            self.on_boundary(self, where)
        if self.stop_file.exists() and not ("ignore_stop" in self.faults and where != "end"):
            self.note({"type": "stopped", "reason": f"stop file at {where}",
                       "boundary": self.boundaries, "settled": self.state.settled})
            self.stopped = True
            return False
        self.pin.check()
        return True

    def _step(self) -> bool:
        if self.state.ended:
            return False
        with self.group():
            status = self.state.status_of(self.graph, NODE)
            if status is Status.PENDING:
                self.commit(Begin(NODE), {"budget": self.budget})
                return True
            if status is not Status.RUNNING:  # the verdict is recorded: end the run
                self._close()
                return True
            v = self.view
            if v.hit_round is not None or (v.closed and self._round_work() < sim.MIN_ROUND_WORK):
                if self.arm.idle_growth and not v.idle_done:
                    if not self._boundary("idle"):
                        return False
                    self._stage("idle")
                    return True
                if not self._boundary("end"):
                    return False
                self._end()
                return True
            if v.closed:
                if not self._boundary("round"):
                    return False
                crash.crashpoint("growth.before_round")
                self.note({"type": "round", "round": v.round + 1, "work": self._round_work(),
                           "settled": self.state.settled})
                return True
            if v.done < v.round_work - EPS and not v.cut:
                if not self._boundary("train"):
                    return False
                self._train()
                return True
            if not v.evaluated:
                if not self._boundary("evaluation"):
                    return False
                self._evaluate()
                return True
            if not self._boundary("plan"):
                return False
            self._stage("round")
            return True

    # ---- stages ------------------------------------------------------------------------------
    def _affordable_work(self) -> float:
        """Training work that fits the budget with the next evaluation's cost held back."""
        price = self.view.resources.price
        left = (self.budget - self.state.settled - self.state.reserved) / price - sim.EVAL_WORK
        return math.floor(max(0.0, left) * WORK_GRID + 1e-9) / WORK_GRID

    def _round_work(self) -> float:
        return float(min(sim.ROUND_WORK, math.floor(self._affordable_work() + 1e-9)))

    def _meter(self, eval_reserve: float) -> Meter:
        return Meter(self.graph, NODE, self.commit, lambda: self.state, self.journal.sync,
                     price=self.view.resources.price, eval_reserve=eval_reserve, note=self.note,
                     lock=self.journal.lock)

    def _train(self) -> None:
        v, res = self.view, self.view.resources
        edge = min(v.round_work, (math.floor(v.done / sim.STAGE_WORK + 1e-9) + 1) * sim.STAGE_WORK)
        work = min(edge - v.done, self._affordable_work())
        if work <= EPS:
            self.note({"type": "round_cut", "round": v.round, "done": v.done,
                       "settled": self.state.settled})
            return
        crash.crashpoint("growth.before_stage")
        if self.state.reserved > EPS:  # only under the planted fault skip_repricing
            self._continue_unrepriced(edge)
            return
        unreserved = "unreserved_stage" in self.faults and v.round == 0 and v.done == 0
        meter = self._meter(sim.EVAL_WORK * res.price)
        if not unreserved:  # planted fault: the first stage runs without a reservation
            meter.reserve(round(work * res.price, 6), "train")
        charges, left = [], work
        while left > EPS:
            w = min(res.tick_work, left)
            charges.append(round(w * res.price, 6))
            self.note({"type": "tick", "round": v.round, "tick": v.gauge + 1, "work": w,
                       "charge": charges[-1], **res.record()})
            crash.crashpoint("growth.tick")
            left -= w
        if not unreserved:
            meter.settle(sum(charges), "train", ticks=len(charges), work=work)

    def _continue_unrepriced(self, edge: float) -> None:
        """Planted fault skip_repricing: the stage open at the crash goes on under its old
        reservation and at the resources it started with, whatever is in force now."""
        v = self.view
        last = v.open_ticks[-1] if v.open_ticks else None
        old = Resources(last["gpus"], last["step"], last["price"]) if last else v.resources
        left = edge - v.done
        while left > EPS:
            w = min(old.tick_work, left)
            self.note({"type": "tick", "round": v.round, "tick": v.gauge + 1, "work": w,
                       "charge": round(w * old.price, 6), **old.record()})
            left -= w
        charged = min(round(sum(t["charge"] for t in v.open_ticks), 6), self.state.reserved)
        self.commit(Settle(charged, node=NODE), {"reserved": self.state.reserved,
                                                 "what": "train"})

    def _evaluate(self) -> None:
        v, price = self.view, self.view.resources.price
        crash.crashpoint("growth.before_evaluation")
        meter = self._meter(0.0)
        cost = round(sim.EVAL_WORK * price, 6)
        meter.reserve(cost, "evaluation")
        self._call(f"evaluation {v.round}")
        ev = sim.evaluate(self.seed, v.round, self.config, v.hours)
        crash.crashpoint("growth.after_episodes")
        self.note({"type": "evaluation", "round": v.round, "successes": list(ev.successes),
                   "episodes": ev.episodes, "rate": ev.rate, "rates": ev.rates(),
                   "target": self.target, "target_met": ev.meets(self.target),
                   "hours": v.hours, "charge": cost,
                   "config": dict(sorted(self.config.items()))})
        crash.crashpoint("growth.after_evaluation")
        meter.settle(cost, "evaluation")

    def _stage(self, stage: str) -> None:
        """A planner stage: ask (round growth or idle growth on), check, commit in one record."""
        v = self.view
        on = self.arm.round_growth if stage == "round" else self.arm.idle_growth
        pre, post = (("growth.before_plan", "growth.after_plan") if stage == "round"
                     else ("growth.before_idle", "growth.after_idle_plan"))
        crash.crashpoint(pre)
        evidence = {"round": v.last_eval["round"], "rates": v.last_eval["rates"],
                    "target": self.target} if v.last_eval else {}
        context = {"stage": stage, "round": v.round, "config": dict(sorted(self.config.items())),
                   "ranges": {k: [kn.low, kn.high] for k, kn in sorted(self.catalog.knobs.items())},
                   "features": sorted(self.catalog.features), "agents": sorted(self.catalog.agents),
                   "limit": self.catalog.limit(stage), "evidence": evidence}  # type: ignore[arg-type]  # stage: 'round'|'idle'
        reply: object = {"features": []}
        if on:  # the call is recorded before it is made, so a repeat shows in the ledger too
            self.note({"type": "planner_call", "stage": stage, "round": v.round})
            self._call(f"planner {stage} {v.round}")
            reply = self.planner(context)
        crash.crashpoint(post)
        decision: Decision = evolve(self.catalog, self.config, reply, stage=stage,  # type: ignore[arg-type]  # 'round'|'idle'
                                    round=v.round, recorder=self)
        self.config = decision.config
        if "policy_write" in self.faults:
            self._write_policy(reply)
        crash.crashpoint("growth.after_commit" if stage == "round" else "growth.after_idle_commit")

    def _write_policy(self, reply: object) -> None:
        """Planted fault: a write path from the planner's reply to the pinned policy file."""
        if isinstance(reply, dict) and isinstance(reply.get("budget"), dict):
            spend = reply["budget"].get("spend")
            if isinstance(spend, int | float):
                path = self.pin.path
                text = path.read_text()
                old = f"spend = {self.budget!r}"
                path.write_text(text.replace(old, f"spend = {float(spend)!r}"))

    def _end(self) -> None:
        crash.crashpoint("growth.before_end")
        hit = self.view.hit_round is not None
        self.commit(Verdict(NODE, hit), {"round": self.view.round,
                                         "to_target": self.view.to_target,
                                         "settled": self.state.settled})
        crash.crashpoint("growth.after_verdict")
        self._close()

    def _close(self) -> None:
        if enabled(self.graph, self.state, Finish()):
            unmet = self.pin.policy.release_unmet(  # type: ignore[union-attr]  # pinned at start
                outcome="DONE", ledger_status=verify(self.ledger.path).status,
                pins_unchanged=True, signed=False)
            if unmet:  # pragma: no cover - the studies' policy asks for nothing else
                self.note({"type": "release_unmet", "unmet": unmet})
                return
            self.commit(Finish(), {"settled": self.state.settled})
        elif enabled(self.graph, self.state, Fail(NODE)):
            self.commit(Fail(NODE), {"why": "the budget left cannot pay for a round before "
                                            "the target was met"})


def run_to_end(folder: Path, *, seed: int, budget: float, arm: Arm = FULL_LOOP,
               resources: Resources = DEFAULT_RESOURCES, planner: Planner | None = None,
               faults: Iterable[str] = (), on_boundary: Boundary | None = None) -> int:
    """Prepare, start and run one loop in this process (no crash): its exit code."""
    prepare(folder, budget)
    return GrowthLoop.start(folder, seed=seed, arm=arm, resources=resources, planner=planner,
                            faults=faults, on_boundary=on_boundary).run()
