"""G5 (checkpoint): the last-known-good checkpoint only ever holds a gated state; malformed actions
and rejected proposals cannot overwrite it; completion re-certifies it.

State: the candidate tree's hash, the checkpoint (a hash, once there is one), whether the node has
completed and its receipt; a ghost set of the trees the admission gate admitted. `gate` (the
admission gate) and `recert` (the completion checks on a fresh copy) are uninterpreted functions of
a tree: any gate, as long as its verdict is a function of the tree it is run on.

Obligations: (1) invariant -- a checkpoint was admitted and passes the gate; a completed node's
receipt names the checkpoint and passed recertification; (2) frame -- every event except an
admitted Patch leaves the checkpoint unchanged; (3) broken variant: a malformed action overwrites
the checkpoint -- refuted by a run from Init.
"""

from __future__ import annotations

from typing import Any

import z3

from proofs.checks import (
    bmc,
    check_enabled,
    check_inductive,
    check_init_satisfiable,
    check_unchanged,
)
from proofs.records import Hash as H
from proofs.records import RecordSystem
from proofs.trace import Trace

BOOL = z3.BoolSort()


class CheckpointLoop(RecordSystem):
    FIELDS = {"candidate": H, "checkpoint": H, "has_checkpoint": BOOL, "done": BOOL,
              "receipt": H, "admitted": z3.ArraySort(H, BOOL)}
    EVENTS = {
        "Admit": [H],      # a parsed Patch whose tree passes the gate on an isolated copy
        "Reject": [H],     # a parsed Patch whose tree fails the gate
        "Malformed": [H],  # a reply that does not parse (or is "DONE" only): maps to Keep
        "Keep": [],
        "Regress": [H],    # the workspace drifts away from the checkpoint (any new tree)
        "Restore": [],     # restore the checkpoint exactly
        "Complete": [],    # recertify the checkpoint on a fresh copy and issue a receipt
    }

    def __init__(self) -> None:
        super().__init__()
        self.gate = z3.Function("gate", H, BOOL)
        self.recert = z3.Function("recert", H, BOOL)

    def shown_terms(self, s):
        ck = s["checkpoint"]
        return [self.gate(ck), s["admitted"][ck], self.recert(ck)]

    def init(self, s):
        return z3.And(z3.Not(s["has_checkpoint"]), z3.Not(s["done"]),
                      s["admitted"] == z3.K(H, z3.BoolVal(False)))

    def live(self, s):
        return z3.Not(s["done"])

    def rule_admit(self, s, ev):
        h = ev.args[0]
        return z3.And(self.live(s), self.gate(h)), {
            "candidate": h, "checkpoint": h, "has_checkpoint": z3.BoolVal(True),
            "admitted": z3.Store(s["admitted"], h, True)}

    def rule_reject(self, s, ev):
        return z3.And(self.live(s), z3.Not(self.gate(ev.args[0]))), {}

    def rule_malformed(self, s, ev):
        return self.live(s), {}

    def rule_keep(self, s, ev):
        return self.live(s), {}

    def rule_regress(self, s, ev):
        return self.live(s), {"candidate": ev.args[0]}

    def rule_restore(self, s, ev):
        return z3.And(self.live(s), s["has_checkpoint"]), {"candidate": s["checkpoint"]}

    def rule_complete(self, s, ev):
        ok = z3.And(self.live(s), s["has_checkpoint"], self.recert(s["checkpoint"]))
        return ok, {"done": z3.BoolVal(True), "receipt": s["checkpoint"],
                    "candidate": s["checkpoint"]}

    def describe(self, model: z3.ModelRef, s) -> dict[str, Any]:
        has = self.show(model, s["has_checkpoint"])
        ck = s["checkpoint"]
        return {"candidate": self.show(model, s["candidate"]),
                "checkpoint": self.show(model, ck) if has else None,
                "checkpoint_passes_gate": bool(has and self.show(model, self.gate(ck))),
                "checkpoint_admitted": bool(has and self.show(model, s["admitted"][ck])),
                "done": self.show(model, s["done"]),
                "receipt": self.show(model, s["receipt"]) if self.show(model, s["done"]) else None,
                "checkpoint_recertifies": bool(has and self.show(model, self.recert(ck)))}


class MalformedOverwrites(CheckpointLoop):
    """Broken: a malformed reply's content is written to the checkpoint."""

    def rule_malformed(self, s, ev):
        h = ev.args[0]
        return self.live(s), {"candidate": h, "checkpoint": h,
                              "has_checkpoint": z3.BoolVal(True)}


class CompletesUnchecked(CheckpointLoop):
    """Broken: completion issues a receipt for the checkpoint without recertifying it."""

    def rule_complete(self, s, ev):
        ok = z3.And(self.live(s), s["has_checkpoint"])
        return ok, {"done": z3.BoolVal(True), "receipt": s["checkpoint"],
                    "candidate": s["checkpoint"]}


def gated_checkpoint(sys: CheckpointLoop):
    def inv(s) -> z3.BoolRef:
        ck = s["checkpoint"]
        return z3.And(
            z3.Implies(s["has_checkpoint"], z3.And(s["admitted"][ck], sys.gate(ck))),
            z3.Implies(s["done"], z3.And(s["has_checkpoint"], s["receipt"] == ck,
                                         sys.recert(ck))))
    return inv


def check_gated() -> Trace | None:
    sys = CheckpointLoop()
    return check_inductive(sys, gated_checkpoint(sys))


def check_frame() -> Trace | None:
    """Only an admitted Patch may change the checkpoint."""
    sys = CheckpointLoop()
    return check_unchanged(
        sys, lambda s, t: z3.And(t["checkpoint"] == s["checkpoint"],
                                 t["has_checkpoint"] == s["has_checkpoint"]),
        allowed=("Admit",), what="the checkpoint")


def check_sanity() -> Trace | None:
    sys = CheckpointLoop()
    inv = gated_checkpoint(sys)
    return check_init_satisfiable(sys, inv) or check_enabled(sys, inv)


def run_malformed_overwrites(depth: int = 3) -> Trace | None:
    sys = MalformedOverwrites()
    inv = gated_checkpoint(sys)
    return bmc(sys, lambda s: z3.Not(inv(s)), depth, "G5 (the checkpoint holds a gated state)")


def run_completes_unchecked(depth: int = 3) -> Trace | None:
    sys = CompletesUnchecked()
    inv = gated_checkpoint(sys)
    return bmc(sys, lambda s: z3.Not(inv(s)), depth, "G5 (a receipt names a recertified state)")


def checkpoint_is_gated(state: dict[str, Any]) -> bool:
    """G5 on a trace state as plain data (for replaying counterexamples)."""
    if state["checkpoint"] is None:
        return True
    return state["checkpoint_passes_gate"] and state["checkpoint_admitted"]
