"""An operator's requests to a run that is not running: `loopproof cancel LEDGER NODE`.

Why a request, honoured on resume, and not the event itself: the runner is the only writer of
model events, and it asks `model.step` (through `Journal.commit`) for each. A cancel is asked
for while no engine runs the ledger (the ledger's lock is held, so a live run refuses it); the
request is checked against the state the next resume will act on (an attempt with no recorded
end is given back first) so that a request the model would refuse is refused now, with the
model's reason, and nothing is written. On resume, after recovery, each pending request is
committed as a `Cancel` event -- or, if the model refuses it after all, recorded as
`cancel_refused` with its reason, never dropped silently.
"""

from __future__ import annotations

from typing import Any

from loopproof.engine.run.journal import Journal
from loopproof.engine.system.errors import BadInput
from loopproof.model import Abandon, Cancel, Disabled, LoopGraph, RunState, step

MAX_REASON = 500  # characters of the operator's note kept in the ledger


def state_on_resume(graph: LoopGraph, state: RunState, pending: list[dict[str, Any]]
                    ) -> RunState:
    """The state the next resume acts on: every attempt in flight given back, then the pending
    cancels that the model allows applied in order."""
    if not state.ended:  # every attempt in flight, as `recover` gives them back
        for node in state.in_flight(graph):
            state = step(graph, state, Abandon(node))
    for req in pending:
        try:
            state = step(graph, state, Cancel(str(req.get("node"))))
        except Disabled:
            continue
    return state


def request_cancel(journal: Journal, node: str, reason: str, ledger: str) -> dict[str, Any]:
    """Append a `cancel_requested` record for `node`, after checking that the model allows
    Cancel(node) in the state the next resume acts on; else BadInput (nothing written)."""
    if not isinstance(reason, str) or len(reason) > MAX_REASON or not reason.isprintable():
        raise BadInput(ledger, "--reason", f"must be printable text of at most {MAX_REASON} "
                       "characters", "give a short note on one line")
    graph, replayed = journal.graph, journal.replayed
    if node not in graph.names:
        raise BadInput(ledger, "NODE", f"{node!r} is not a node of this run",
                       f"give one of {', '.join(graph.names)}")
    pending = [r for r in replayed.cancel_requests if r.get("node") == node]
    if pending:
        raise BadInput(ledger, "NODE", f"a cancel of {node!r} is already pending (record "
                       f"{pending[0].get('seq')})", "resume the run to carry it out")
    after = state_on_resume(graph, replayed.state, replayed.cancel_requests)
    why = Cancel(node).why_not(graph, after)
    if why is not None:
        raise BadInput(ledger, "NODE", f"the model refuses Cancel({node}) in the state the next "
                       f"resume acts on: {why}",
                       "cancel a node that is next to run (no other node exhausted, every "
                       "predecessor DONE), or let the run go on")
    record = {"type": "cancel_requested", "node": node, "reason": reason, "by": "operator",
              "activation": after.activation_of(graph, node),
              "attempts": after.attempts_of(graph, node)}
    journal.note(record)
    journal.sync()
    return journal.replayed.cancel_requests[-1]  # as stored: with its seq and hash


def honour_cancels(journal: Journal) -> None:
    """On resume, after recovery: commit every pending request as a Cancel (the model decides),
    or record why it could not be."""
    graph = journal.graph
    for req in list(journal.replayed.cancel_requests):
        node, seq = req.get("node"), req.get("seq")
        state = journal.state
        why = None if not isinstance(node, str) else Cancel(node).why_not(graph, state)
        if why is None and state.activation_of(graph, node) != req.get("activation"):
            why = f"the request was for activation {req.get('activation')!r}, the node is in " \
                  f"activation {state.activation_of(graph, node)}"
        if why is None:
            journal.commit(Cancel(node), {
                "request": seq, "reason": req.get("reason", ""),
                "activation": state.activation_of(graph, node),
                "attempts": state.attempts_of(graph, node)})
        else:
            journal.note({"type": "cancel_refused", "request": seq, "node": node, "why": why})
