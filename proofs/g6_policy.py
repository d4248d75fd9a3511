"""G6 (policy pinned): the Z3 encoding of model/policy.py, and its obligations.

One field per field of `model.policy.PolicyState`: the digest of the policy as its files hash
now, the pinned digest (and whether there is one), whether the run stopped on a change, and the
digest each stage ran under (a log). Digests are an uninterpreted sort: equal digests are the
same policy (collision-freedom), nothing else is assumed of the hash. One rule per event of the
model (Pin, Edit, PolicyCheck, Stage, Resume, WorkerWrite); tests/proofs/test_admission_encodings.py holds
them to the model, and engine/policy/pin.py asks the model before every stage.

Obligations: every stage ran under the digest pinned at start, none before the pin
(`model.policy.pinned_stages`, inductive); from any state, a run that is stopped or whose
policy differs from its pin runs no stage, stays stopped until the pinned policy is back, and
the pin never changes once taken (fail closed); no worker event changes the policy or its pin
(frame); sanity. Broken variants: the policy checked only at start (a run from Init runs a
stage under a changed policy), a resume that re-pins the changed policy, and a worker event that
writes the policy.

What the model leaves out, and the engine and its tests hold instead: that a worker really has no
write path to the policy (own workspace, filtered environment, `PolicyPin.assert_outside`, the
sandbox), that the file system reports the bytes it holds, and the short window between a check
and the stage it guards (a change there is caught by the next check).
"""

from __future__ import annotations

from typing import Any

import z3

from loopproof.model import policy as mp
from loopproof.proofs.checks import (
    Found,
    bmc,
    check_enabled,
    check_inductive,
    check_init_satisfiable,
    check_unchanged,
)
from loopproof.proofs.records import Hash as H
from loopproof.proofs.records import Names, RecordSystem, REv

INT, BOOL = z3.IntSort(), z3.BoolSort()
LOG = z3.ArraySort(INT, H)
WORKER_EVENTS = ("WorkerWrite",)
POLICY = ("current", "pinned", "has_pin")  # what no worker event may change


class PolicyRules(RecordSystem):
    FIELDS = {"current": H, "pinned": H, "has_pin": BOOL, "stopped": BOOL, "ns": INT,
              "stages": LOG}
    EVENTS = {"Pin": [], "Edit": [H], "PolicyCheck": [], "Stage": [], "Resume": [],
              "WorkerWrite": []}
    LOGS = {"ns": ("stages",)}

    def init(self, s):
        return z3.And(z3.Not(s["has_pin"]), z3.Not(s["stopped"]), s["ns"] == 0)

    def checked(self, s) -> z3.BoolRef:
        """`model.policy.why_changed` is None: pinned, not stopped, hashing to the pin."""
        return z3.And(s["has_pin"], z3.Not(s["stopped"]), s["current"] == s["pinned"])

    def rule_pin(self, s, ev):
        return z3.Not(s["has_pin"]), {"has_pin": z3.BoolVal(True), "pinned": s["current"]}

    def rule_edit(self, s, ev):
        return z3.BoolVal(True), {"current": ev.args[0]}

    def rule_policycheck(self, s, ev):
        return z3.And(s["has_pin"], z3.Not(s["stopped"]), s["current"] != s["pinned"]), {
            "stopped": z3.BoolVal(True)}

    def rule_stage(self, s, ev):
        ns = s["ns"]
        return self.checked(s), {"ns": ns + 1, "stages": z3.Store(s["stages"], ns, s["current"])}

    def rule_resume(self, s, ev):
        return z3.And(s["stopped"], s["current"] == s["pinned"]), {"stopped": z3.BoolVal(False)}

    def rule_workerwrite(self, s, ev):
        return z3.BoolVal(True), {}

    def concrete(self, model: z3.ModelRef, s, ev: REv | None):
        """The trace's state and event as model/policy.py objects (they replay there)."""
        return read_state(self, model, s), None if ev is None else read_event(self, model, ev)

    def describe(self, model: z3.ModelRef, s) -> dict[str, Any]:
        has = self.show(model, s["has_pin"])
        return {"pinned": self.show(model, s["pinned"]) if has else None,
                "current": self.show(model, s["current"]),
                "stopped": self.show(model, s["stopped"]),
                "stages(digest)": [row[0] for row in
                                   self.show_list(model, s["ns"], [s["stages"]])]}


def pinned_stages(s) -> z3.BoolRef:
    i = z3.Int("i")
    return z3.And(
        s["ns"] >= 0,
        z3.Implies(z3.Not(s["has_pin"]), z3.And(s["ns"] == 0, z3.Not(s["stopped"]))),
        z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < s["ns"]), s["stages"][i] == s["pinned"])))


def fails_closed(s, t) -> z3.BoolRef:
    """From a stopped run, or a pinned one whose policy differs from the pin, no stage runs; a
    stopped run stays stopped unless the pinned policy is back; the pin never changes."""
    blocked = z3.Or(s["stopped"], z3.And(s["has_pin"], s["current"] != s["pinned"]))
    return z3.And(
        z3.Implies(blocked, t["ns"] == s["ns"]),
        z3.Implies(s["stopped"], z3.Or(t["stopped"], t["current"] == t["pinned"])),
        z3.Implies(s["has_pin"], z3.And(t["has_pin"], t["pinned"] == s["pinned"])))


def policy_unchanged(s, t) -> z3.BoolRef:
    return z3.And([t[k] == s[k] for k in POLICY])


class CheckAtStartOnly(PolicyRules):
    """Broken: the policy is checked only when it is pinned; stages run unchecked and nothing
    ever stops the run."""

    def checked(self, s):
        return z3.And(s["has_pin"], z3.Not(s["stopped"]))

    def rule_policycheck(self, s, ev):
        return z3.BoolVal(False), {}


class RepinOnResume(PolicyRules):
    """Broken: a stopped run resumes by pinning the policy as it is now."""

    def rule_resume(self, s, ev):
        return s["stopped"], {"stopped": z3.BoolVal(False), "pinned": s["current"]}


class WorkerWritesPolicy(PolicyRules):
    """Broken: a worker's write may also write the policy file (a write path)."""

    EVENTS = {**PolicyRules.EVENTS, "WorkerWrite": [H]}

    def rule_workerwrite(self, s, ev):
        return z3.BoolVal(True), {"current": ev.args[0]}


def check_pinned() -> Found:
    sys = PolicyRules()
    return (check_inductive(sys, pinned_stages)
            or check_unchanged(sys, fails_closed, allowed=(), what="the fail-closed rule"))


def check_worker_frame(sys: PolicyRules | None = None) -> Found:
    sys = sys or PolicyRules()
    others = tuple(k for k in sys.EVENTS if k not in WORKER_EVENTS)
    return check_unchanged(sys, policy_unchanged, allowed=others,
                           what="the policy or its pin (a worker event)")


def check_sanity() -> Found:
    sys = PolicyRules()
    return check_init_satisfiable(sys, pinned_stages) or check_enabled(sys, pinned_stages)


def run_check_at_start_only(depth: int = 3) -> Found:
    return bmc(CheckAtStartOnly(), lambda s: z3.Not(pinned_stages(s)), depth,
               "G6 (every stage ran under the pinned policy)")


def run_repin_on_resume() -> Found:
    return check_unchanged(RepinOnResume(), fails_closed, allowed=(),
                           what="the fail-closed rule (the pin never changes)")


def run_worker_writes_policy() -> Found:
    return check_worker_frame(WorkerWritesPolicy())


def stages_pinned(state: dict[str, Any]) -> bool:
    """G6 on a trace state as plain data (for replaying counterexamples)."""
    return all(d == state["pinned"] for d in state["stages(digest)"])


# ---- concrete states and events (the differential test) -----------------------------------------

def pin_state(names: Names, s: mp.PolicyState, z: dict[str, z3.ExprRef]) -> z3.BoolRef:
    h = lambda x: names.of(H, x)  # noqa: E731
    cs = [z["current"] == h(s.current), z["has_pin"] == (s.pinned is not None),
          z["pinned"] == (h(s.pinned) if s.pinned is not None else names.junk(H, "pinned")),
          z["stopped"] == s.stopped, z["ns"] == len(s.stages)]
    cs += [z["stages"][i] == h(d) for i, d in enumerate(s.stages)]
    return z3.And(cs)


def event_of(sys: PolicyRules, names: Names, event: Any) -> REv:
    kind = type(event).__name__
    if kind == "Edit":
        return REv(kind, sys, (names.of(H, event.digest),))
    return REv(kind, sys, ())


# ---- traces as model objects (a counterexample replays through model/policy.py) ------------------

def read_state(sys: PolicyRules, model: z3.ModelRef, s) -> mp.PolicyState:
    show = sys.show
    ns = model.eval(s["ns"], model_completion=True).as_long()
    return mp.PolicyState(current=show(model, s["current"]),
                          pinned=show(model, s["pinned"]) if show(model, s["has_pin"]) else None,
                          stopped=show(model, s["stopped"]),
                          stages=tuple(show(model, s["stages"][i]) for i in range(ns)))


def read_event(sys: PolicyRules, model: z3.ModelRef, ev: REv) -> Any:
    if ev.kind == "Edit":
        return mp.Edit(sys.show(model, ev.args[0]))
    return {"Pin": mp.Pin, "PolicyCheck": mp.PolicyCheck, "Stage": mp.Stage, "Resume": mp.Resume,
            "WorkerWrite": mp.WorkerWrite}[ev.kind]()
