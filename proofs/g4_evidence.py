"""G4 (evidence is bound): stale evidence never commits.

State: the candidate's state hash, the suite's hash, an append-only evidence store (each item
carries the state hash and suite hash it was produced on) and an append-only record of commits
(patches), each with the evidence that drove it and the hashes current when it committed.
A commit is guarded by equality of both hashes. Invariant: every commit was driven by evidence
whose state hash and suite hash equalled the current ones at commit time.
Broken variant: a commit accepts evidence whatever its hashes -- refuted by a run from Init.
"""

from __future__ import annotations

from typing import Any

import z3

from proofs.checks import bmc, check_enabled, check_inductive, check_init_satisfiable
from proofs.records import Hash as H
from proofs.records import RecordSystem
from proofs.trace import Trace

INT = z3.IntSort()
LOG = z3.ArraySort(INT, H)


class EvidenceLoop(RecordSystem):
    FIELDS = {"state": H, "suite": H,
              "n_evidence": INT, "ev_state": LOG, "ev_suite": LOG,
              "n_commits": INT, "cm_ev_state": LOG, "cm_ev_suite": LOG,
              "cm_state": LOG, "cm_suite": LOG}
    EVENTS = {
        "Edit": [H],          # anything changes the workspace: a new tree hash
        "ChangeSuite": [H],   # the named suite changes: a new suite hash
        "RunSuite": [],       # run the suite now: evidence bound to the current hashes
        "Commit": [INT, H],   # a patch driven by evidence #k, giving tree h
    }
    LOGS = {"n_evidence": ("ev_state", "ev_suite"),
            "n_commits": ("cm_ev_state", "cm_ev_suite", "cm_state", "cm_suite")}

    def init(self, s):
        return z3.And(s["n_evidence"] == 0, s["n_commits"] == 0)

    def rule_edit(self, s, ev):
        return z3.BoolVal(True), {"state": ev.args[0]}

    def rule_changesuite(self, s, ev):
        return z3.BoolVal(True), {"suite": ev.args[0]}

    def rule_runsuite(self, s, ev):
        n = s["n_evidence"]
        return z3.BoolVal(True), {"ev_state": z3.Store(s["ev_state"], n, s["state"]),
                                  "ev_suite": z3.Store(s["ev_suite"], n, s["suite"]),
                                  "n_evidence": n + 1}

    def admissible(self, s, k):
        """The guard on evidence: it exists and both its hashes are the current ones."""
        return z3.And(self.exists(s, k), s["ev_state"][k] == s["state"],
                      s["ev_suite"][k] == s["suite"])

    def exists(self, s, k):
        return z3.And(k >= 0, k < s["n_evidence"])

    def rule_commit(self, s, ev):
        k, patched = ev.args
        n = s["n_commits"]
        return self.admissible(s, k), {
            "cm_ev_state": z3.Store(s["cm_ev_state"], n, s["ev_state"][k]),
            "cm_ev_suite": z3.Store(s["cm_ev_suite"], n, s["ev_suite"][k]),
            "cm_state": z3.Store(s["cm_state"], n, s["state"]),
            "cm_suite": z3.Store(s["cm_suite"], n, s["suite"]),
            "n_commits": n + 1, "state": patched}

    def describe(self, model: z3.ModelRef, s) -> dict[str, Any]:
        return {"state": self.show(model, s["state"]), "suite": self.show(model, s["suite"]),
                "evidence(state,suite)": self.show_list(model, s["n_evidence"],
                                                        [s["ev_state"], s["ev_suite"]]),
                "commits(ev_state,ev_suite,state,suite)": self.show_list(
                    model, s["n_commits"],
                    [s["cm_ev_state"], s["cm_ev_suite"], s["cm_state"], s["cm_suite"]])}


class StaleAccepted(EvidenceLoop):
    """Broken: a commit takes any stored evidence, whatever hashes it carries."""

    def admissible(self, s, k):
        return self.exists(s, k)


class SuiteUnchecked(EvidenceLoop):
    """Broken: only the state hash is compared; evidence from another suite still commits."""

    def admissible(self, s, k):
        return z3.And(self.exists(s, k), s["ev_state"][k] == s["state"])


def bound_commits(s) -> z3.BoolRef:
    """Every commit's evidence hashes equal the hashes current when it committed."""
    j = z3.Int("j")
    return z3.And(s["n_evidence"] >= 0, s["n_commits"] >= 0, z3.ForAll([j], z3.Implies(
        z3.And(j >= 0, j < s["n_commits"]),
        z3.And(s["cm_ev_state"][j] == s["cm_state"][j], s["cm_ev_suite"][j] == s["cm_suite"][j]))))


def check_bound() -> Trace | None:
    return check_inductive(EvidenceLoop(), bound_commits)


def check_sanity() -> Trace | None:
    sys = EvidenceLoop()
    return check_init_satisfiable(sys, bound_commits) or check_enabled(sys, bound_commits)


def run_stale_accepted(depth: int = 4) -> Trace | None:
    return bmc(StaleAccepted(), lambda s: z3.Not(bound_commits(s)), depth,
               "G4 (every commit bound to the current hashes)")


def run_suite_unchecked(depth: int = 3) -> Trace | None:
    return bmc(SuiteUnchecked(), lambda s: z3.Not(bound_commits(s)), depth,
               "G4 (every commit bound to the current hashes)")


def commit_is_bound(state: dict[str, Any]) -> bool:
    """G4 on a trace state as plain data (for replaying counterexamples)."""
    return all(es == st and eq == sq
               for es, eq, st, sq in state["commits(ev_state,ev_suite,state,suite)"])

