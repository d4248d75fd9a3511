"""The formal model of bounded loops: graph, state, declared transitions, closed-form bounds.

Pure: no I/O, no clock, no randomness. `proofs/` encodes it for Z3; `engine/` asks it what may
happen next and never changes a state any other way.
"""

if __name__ != "loopproof.model":  # the checkout's folder imported by its short name: a second copy
    raise ImportError(f"{__name__}: import loopproof.model (the installed name), not model; "
                      "fix: `python -m loopproof.model...` or `from loopproof.model import ...`")

from loopproof.model.bounds import attempt_bound, peer_bound, spend_bound
from loopproof.model.graph import GraphError, LoopGraph, NodeSpec
from loopproof.model.state import Outcome, RunState, Status, initial_state
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

__all__ = [
    "Abandon", "Begin", "Cancel", "Claim", "Disabled", "Event", "Fail", "Finish", "GraphError", "LoopGraph",
    "NodeSpec", "Outcome", "Overrun", "Refuse", "Repair", "Reserve", "RunState", "Settle",
    "Status", "Verdict", "attempt_bound", "control_events", "enabled", "initial_state",
    "peer_bound", "spend_bound", "step",
]
