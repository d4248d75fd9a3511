"""How a run ends: the release check before `Finish`, a stop after a gate error, the exit code,
and the report.

Why together: the exit code is the run's one-word report, and both are read from the same
replayed state; the release check is the last thing that can keep a DONE run from ending DONE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopproof.engine.policy.guards import refuse
from loopproof.engine.record.replay import Replayed, run_bounds
from loopproof.engine.run.journal import Journal
from loopproof.engine.system.exits import Exit
from loopproof.model import Finish, Outcome

if TYPE_CHECKING:  # annotations only: the spec's import pulls in every kind's module (~0.4
    # CPU-s), paid by each growth-study child that only wants EXIT_CODES
    from loopproof.engine.run.integrity import Integrity
    from loopproof.engine.run.spec import Spec

EXIT_CODES = {Outcome.DONE: Exit.OK, Outcome.FAILED: Exit.FAILED,
              Outcome.BUDGET_EXHAUSTED: Exit.BUDGET_EXHAUSTED}
EXIT_PIN_CHANGED = Exit.CORRUPT  # a pinned file or the policy changed mid-run
EXIT_STOPPED = Exit.STOPPED
# The report's outcome when the ledger on disk is not the chain the engine wrote (replaced,
# removed, appended to, truncated, edited, or a write failed): no end state is claimed.
LEDGER_LOST = "LEDGER_LOST"


def finish(journal: Journal, integrity: Integrity, facts: dict[str, Any],
           approved_by: str | None) -> bool:
    """Every node is DONE: commit `Finish`, unless a release condition of the pinned policy does
    not hold; then why is recorded (`release_unmet`) and the run stops with exit 3. True when the
    run finished."""
    journal.ledger.verify_owned()  # never a Finish after a chain the engine did not write
    unmet = integrity.release_unmet(approved_by)
    if refuse("policy.release", ", ".join(unmet) or None):
        from loopproof.model.policy import RELEASE_CONDITIONS
        journal.note({"type": "release_unmet", "unmet": unmet, "settled": journal.state.settled,
                      "why": {c: RELEASE_CONDITIONS[c] for c in unmet}})
        return False
    journal.commit(Finish(), facts)
    return True


def exit_code(journal: Journal, *, error: str | None, stopped: bool) -> int:
    """0 DONE, 3 FAILED (or every node DONE but not released), 4 BUDGET_EXHAUSTED, 5 the
    ledger is no longer the file written, or a pinned file or the policy changed, 6 stopped
    (resumable)."""
    state = journal.state
    if journal.ledger.lost:  # whatever the records in memory say, none of it is on record
        return EXIT_PIN_CHANGED
    if state.ended:
        return EXIT_CODES[state.outcome]
    if error:
        return EXIT_PIN_CHANGED
    if journal.replayed.release_unmet is not None and not stopped:
        return EXIT_CODES[Outcome.FAILED]  # every node DONE, but the result is not released
    return EXIT_STOPPED


def report(journal: Journal, *, error: str | None, stopped: bool) -> dict[str, Any]:
    """The run's summary (what `loopproof run --json` prints)."""
    out = journal.replayed.summary()
    out["stopped"] = out["stopped"] or stopped
    out["ledger"] = str(journal.ledger.path)
    out.update(run_bounds(journal.replayed.first))
    out["exit"] = exit_code(journal, error=error, stopped=stopped)
    out["error"] = error
    out["torn"] = journal.ledger.torn
    # the sandbox every command ran in; a ledger from before sandboxes ran without one
    out["sandbox"] = journal.replayed.first.get("sandbox", "none")
    if journal.ledger.lost:
        out["outcome"] = LEDGER_LOST
        out["error"] = journal.ledger.lost
    return out


def gate_error_stop(spec: Spec, replayed: Replayed, node: str) -> str | None:
    """Why the run stops after this attempt: its gate did not judge (an `error` verdict other
    than "not judged", which is the worker's or a pin's doing) and the node says
    gate_errors = "stop". None otherwise (the default "retry": the error fails the attempt)."""
    last = (replayed.verdicts.get(node) or [None])[-1]
    if (spec.nodes[node].gate_errors != "stop" or last is None or last.get("verdict") != "error"
            or last.get("error") in (None, "not judged")
            or (last.get("activation"), last.get("attempt"))
            != (replayed.state.activation_of(replayed.graph, node),
                replayed.state.attempts_of(replayed.graph, node))):
        return None
    return (f"gate error on node {node!r} (activation {last.get('activation')}, attempt "
            f"{last.get('attempt')}: {last.get('error')}) and gate_errors = \"stop\"")
