"""The `[planner]` of a run: between attempts, a command may tighten command workers' timeouts.

Why here and not in the policy: engine.policy.evolution owns the rules (the catalogue of knobs, what
a reply may change, replaying committed stages); this unit only wires them into a run: when a
round is due, where the planner command runs, and which worker an attempt then uses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loopproof.engine.policy.catalog import TIMEOUT_KNOB, Catalog, timeout_catalog
from loopproof.engine.policy.evolution import command_planner, plan_stage, replay_config
from loopproof.engine.run.journal import Journal
from loopproof.engine.run.spec import Spec
from loopproof.engine.run.worker import CommandWorker
from loopproof.engine.system.process import ProcessError
from loopproof.engine.system.trees import remove_tree


class _Noter:
    """The recorder `engine.policy.evolution` writes to: each record becomes a runner fact record."""

    def __init__(self, note: Callable[[dict[str, Any]], None]) -> None:
        self.append = note


def planner_catalog(spec: Spec) -> Catalog | None:
    """With a `[planner]`: the code-owned catalogue of its knobs (command workers' timeouts)."""
    if spec.planner is None:
        return None
    return timeout_catalog({n: c.worker.timeout_s for n, c in spec.nodes.items()
                            if isinstance(c.worker, CommandWorker)})


class RunPlanner:
    """The catalogue (None without a `[planner]`) and the timeouts its committed stages set."""

    def __init__(self, spec: Spec, journal: Journal) -> None:
        self.spec, self.journal = spec, journal
        self.catalog, self.timeouts = planner_catalog(spec), {}
        if self.catalog is not None:  # the configuration the committed planner stages left
            self.apply_config(replay_config(self.catalog, journal.replayed.stage_done))

    @property
    def due(self) -> bool:
        """A round boundary (a node reached DONE) with no stage recorded yet."""
        replayed = self.journal.replayed
        return self.catalog is not None and replayed.accepts > len(replayed.stage_done)

    def plan_round(self) -> None:
        """Ask the `[planner]` command which catalogue entries to merge, between attempts.

        It runs in a fresh scratch folder (<ledger>.planner/) with the allow-listed environment
        and the context (stage, round, current configuration, catalogue ids) as JSON on stdin.
        `engine.policy.evolution.evolve` checks its reply; rejections and the `stage_done` commit are
        appended as fact records. A planner that cannot start is recorded as a malformed
        reply. The planner's wall clock is not metered (it runs outside every attempt)."""
        assert self.catalog is not None and self.spec.planner is not None
        scratch = Path(f"{self.journal.ledger.path}.planner")
        remove_tree(scratch)
        scratch.mkdir()
        plan = command_planner(self.spec.planner.argv, scratch, self.spec.planner.timeout_s)

        def guarded(context: Any) -> object:
            try:
                return plan(context)
            except ProcessError as exc:  # not JSON: recorded as a malformed reply
                return f"planner could not run: {exc}"

        stage_done = self.journal.replayed.stage_done
        config = replay_config(self.catalog, stage_done)
        decision = plan_stage(self.catalog, config, guarded, stage="round",
                              round=len(stage_done), recorder=_Noter(self.journal.note))
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
