"""G6 (policy pinned): every stage runs under the policy pinned at run start; a change stops the
run (fail closed); no worker event can change the policy or the pin.

The abstract model of engine/policy/pin.py and engine/run/runner.py. State: whether the run has started,
the digest pinned at start (`PolicyPin.load`, recorded in the ledger's first record), the digest
of the policy as the file system reports it now (`current`; it covers the policy's fields, its
file's bytes and every pinned gate/suite/key file), whether the run has stopped on a change
(PolicyChanged, exit 5), whether a worker's attempt is in flight, and a record of every stage
run with the digest current when it ran. Digests are an uninterpreted sort: equal digests are the
same policy (collision-freedom), and nothing else is assumed about the hash function.

Events. Runner: Start (pin the current digest), Begin and Judge (the two stages of an attempt; the
runner calls `pin.check()` before each, so each is guarded by current == pinned), Halt (a check
saw a change: stop), Resume (`PolicyPin.resume`: the pin comes from the record, so it is only
possible once the pinned policy is back; the attempt in flight is abandoned). Environment: Edit
(the operator, or anyone with access to the file, changes the policy on disk, at any time).
Worker: Write (its own workspace) and Reply -- neither has an update of the policy: the worker
has no write path to it (the engine: workers run in their own workspace, and
`PolicyPin.assert_outside` refuses a policy inside one). A ghost `worker_wrote` is set by a
monitor around every worker event that observes its update, so a worker that writes the policy
is caught however its rule is written.
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
from proofs.records import RecordSystem, REv
from proofs.trace import Trace

INT, BOOL = z3.IntSort(), z3.BoolSort()
LOG = z3.ArraySort(INT, H)

WORKER_EVENTS = ("Write", "Reply")
POLICY = ("current", "pinned", "started")  # what no worker event may change


class PolicyLoop(RecordSystem):
    FIELDS = {"started": BOOL, "pinned": H, "current": H, "stopped": BOOL, "working": BOOL,
              "workspace": H, "reply": H, "n_stages": INT, "ran": LOG, "worker_wrote": BOOL}
    EVENTS = {
        "Start": [],       # PolicyPin.load: pin the digest of the policy as it is now
        "Begin": [],       # stage: begin an attempt (pin.check() first)
        "Judge": [],       # stage: the gate judges the attempt (pin.check() first)
        "Halt": [],        # pin.check() raised PolicyChanged: the run stops, exit 5
        "Resume": [],      # PolicyPin.resume against the recorded pin; abandons the attempt
        "Edit": [H],       # environment: the policy file (or a pinned file) changes on disk
        "Write": [H],      # worker: writes its own workspace
        "Reply": [H],      # worker: its reply
    }
    LOGS = {"n_stages": ("ran",)}

    def init(self, s):
        return z3.And(z3.Not(s["started"]), z3.Not(s["stopped"]), z3.Not(s["working"]),
                      s["n_stages"] == 0, z3.Not(s["worker_wrote"]))

    # ---- the check the runner makes before every stage
    def checked(self, s) -> z3.BoolRef:
        """pin.check() passes: the run is going and the policy is the pinned one."""
        return z3.And(s["started"], z3.Not(s["stopped"]), s["current"] == s["pinned"])

    def stage(self, s, guard, upd: dict) -> tuple[z3.BoolRef, dict]:
        """A stage runs: recorded with the digest current when it ran."""
        n = s["n_stages"]
        return guard, {**upd, "ran": z3.Store(s["ran"], n, s["current"]), "n_stages": n + 1}

    def rule(self, s, ev: REv) -> tuple[z3.BoolRef, dict]:
        """Every worker event goes through a monitor that records whether its update touched
        the policy or the pin (the ghost `worker_wrote`); it does not trust the rule."""
        guard, upd = super().rule(s, ev)
        if ev.kind in WORKER_EVENTS:
            touched = z3.Or([upd.get(k, s[k]) != s[k] for k in POLICY])
            upd = {**upd, "worker_wrote": z3.Or(s["worker_wrote"], touched)}
        return guard, upd

    # ---- runner
    def rule_start(self, s, ev):
        return z3.Not(s["started"]), {"started": z3.BoolVal(True), "pinned": s["current"]}

    def rule_begin(self, s, ev):
        return self.stage(s, z3.And(self.checked(s), z3.Not(s["working"])),
                          {"working": z3.BoolVal(True)})

    def rule_judge(self, s, ev):
        return self.stage(s, z3.And(self.checked(s), s["working"]),
                          {"working": z3.BoolVal(False)})

    def rule_halt(self, s, ev):
        return z3.And(s["started"], z3.Not(s["stopped"]), s["current"] != s["pinned"]), {
            "stopped": z3.BoolVal(True)}

    def rule_resume(self, s, ev):
        return z3.And(s["stopped"], s["current"] == s["pinned"]), {
            "stopped": z3.BoolVal(False), "working": z3.BoolVal(False)}

    # ---- environment
    def rule_edit(self, s, ev):
        return z3.BoolVal(True), {"current": ev.args[0]}

    # ---- worker
    def rule_write(self, s, ev):
        return z3.And(s["working"], z3.Not(s["stopped"])), {"workspace": ev.args[0]}

    def rule_reply(self, s, ev):
        return z3.And(s["working"], z3.Not(s["stopped"])), {"reply": ev.args[0]}

    def describe(self, model: z3.ModelRef, s) -> dict[str, Any]:
        started = self.show(model, s["started"])
        return {"started": started,
                "pinned": self.show(model, s["pinned"]) if started else None,
                "current": self.show(model, s["current"]),
                "stopped": self.show(model, s["stopped"]),
                "working": self.show(model, s["working"]),
                "stages(digest)": [row[0] for row in
                                   self.show_list(model, s["n_stages"], [s["ran"]])],
                "worker_wrote": self.show(model, s["worker_wrote"])}


class CheckAtStartOnly(PolicyLoop):
    """Broken: the policy is checked only when the run starts (pinning it); stages run unchecked
    and nothing ever halts the run."""

    def checked(self, s):
        return z3.And(s["started"], z3.Not(s["stopped"]))

    def rule_halt(self, s, ev):
        return z3.BoolVal(False), {}


class WorkerWritesPolicy(PolicyLoop):
    """Broken: a worker's workspace write may also write the policy file (a write path)."""

    EVENTS = {**PolicyLoop.EVENTS, "Write": [H, H]}   # (workspace, policy)

    def rule_write(self, s, ev):
        ws, policy = ev.args
        return z3.And(s["working"], z3.Not(s["stopped"])), {"workspace": ws, "current": policy}


# ---- properties ----------------------------------------------------------------------------------

def pinned_stages(s) -> z3.BoolRef:
    """Every stage that ran, ran under the pinned digest (and none ran before the pin)."""
    i = z3.Int("i")
    return z3.And(
        s["n_stages"] >= 0,
        z3.Implies(z3.Not(s["started"]),
                   z3.And(s["n_stages"] == 0, z3.Not(s["stopped"]), z3.Not(s["working"]))),
        z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < s["n_stages"]), s["ran"][i] == s["pinned"])))


def fails_closed(s, t) -> z3.BoolRef:
    """From a stopped run, or a started one whose policy differs from the pin, no stage runs;
    a stopped run stays stopped unless it resumes with the pinned policy back; the pin, once
    recorded, never changes."""
    blocked = z3.Or(s["stopped"], z3.And(s["started"], s["current"] != s["pinned"]))
    return z3.And(
        z3.Implies(blocked, t["n_stages"] == s["n_stages"]),
        z3.Implies(s["stopped"], z3.Or(t["stopped"], t["current"] == t["pinned"])),
        z3.Implies(s["started"], z3.And(t["started"], t["pinned"] == s["pinned"])))


def policy_unchanged(s, t) -> z3.BoolRef:
    return z3.And([t[k] == s[k] for k in POLICY])


def check_pinned() -> Trace | None:
    """G6-policy-pinned: the stage record invariant is inductive, and the run fails closed (a
    one-step property from ANY state, no invariant assumed)."""
    sys = PolicyLoop()
    return (check_inductive(sys, pinned_stages)
            or check_unchanged(sys, fails_closed, allowed=(), what="the fail-closed rule"))


def check_worker_frame(sys: PolicyLoop | None = None) -> Trace | None:
    """G6-worker-no-write-path: from any state, no worker event changes the policy's digest,
    the pin or whether there is one."""
    sys = sys or PolicyLoop()
    others = tuple(k for k in sys.EVENTS if k not in WORKER_EVENTS)
    return check_unchanged(sys, policy_unchanged, allowed=others,
                           what="the policy or its pin (a worker event)")


def check_sanity() -> Trace | None:
    sys = PolicyLoop()
    return check_init_satisfiable(sys, pinned_stages) or check_enabled(sys, pinned_stages)


def run_check_at_start_only(depth: int = 4) -> Trace | None:
    return bmc(CheckAtStartOnly(), lambda s: z3.Not(pinned_stages(s)), depth,
               "G6 (every stage ran under the pinned policy)")


def run_worker_writes_policy(depth: int = 4) -> Trace | None:
    return bmc(WorkerWritesPolicy(), lambda s: s["worker_wrote"], depth,
               "G6 (no worker event writes the policy)")


def stages_pinned(state: dict[str, Any]) -> bool:
    """G6 on a trace state as plain data (for replaying counterexamples)."""
    return all(d == state["pinned"] for d in state["stages(digest)"])
