"""The admission transaction: only a gated candidate becomes the checkpoint, and completion
re-certifies it.

One revision goes through `AdmissionBroker.submit`:

1. the pinned suites and policy are re-checked (a change fails closed: no more revisions, no
   completion); the workspace is compared with the current candidate and, if anything edited it
   behind the broker's back, restored exactly (untracked leftovers removed);
2. the worker's reply is stored content-addressed and parsed into Keep | Patch | Escalate before
   anything is touched; an invalid reply is Keep (or Escalate, per policy);
3. a Patch must cite evidence this broker issued for the current tree and suite; stale evidence is
   refreshed, kept or escalated per policy and never drives a patch;
4. the Patch is applied to an isolated copy (protected paths refused), every admission check runs
   on a fresh copy of that, and only if all pass does the candidate become the checkpoint;
5. `complete()` re-runs the completion checks on a fresh copy of the checkpoint and, only if all
   pass, writes a receipt whose digest is anchored in the ledger.

A worker's self-report (the reply's `note`, files it writes) is recorded and never read.

Example (the guarded arm of an experiment, no runner needed)::

    from engine.admission.broker import AdmissionBroker, GuardPolicy
    from engine.admission.evidence import CommandCheck

    visible = CommandCheck("visible", ("python3", "/abs/tests/visible.py"))
    challenge = CommandCheck("challenge", ("python3", "/abs/tests/challenge.py"))
    broker = AdmissionBroker(workspace, state_dir, admission=[visible, challenge],
                             policy=GuardPolicy(candidate_budget=3))
    evidence = broker.start()               # the initial tree is checkpointed if it passes
    for _ in range(3):
        reply = coder(evidence.payload)     # any function of the evidence; returns JSON text
        decision = broker.submit(reply, based_on=evidence)
        if broker.closed:
            break
        evidence = broker.evidence()        # fresh, bound evidence for the current candidate
    completion = broker.complete()          # recertify; completion.receipt is the receipt

`run_revisions(broker, coder, revisions)` wraps that loop.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Protocol

from engine.admission.actions import (
    Escalate,
    Keep,
    Patch,
    action_record,
    apply_patch,
    parse_reply,
    patch_violations,
)
from engine.admission.checkpoint import CheckpointError, CheckpointStore, remove_tree
from engine.admission.evidence import (
    Check,
    Evidence,
    UnsafeTree,
    digest,
    run_check,
    stale_reason,
    suite_hash,
    tree_hash,
)
from engine.record.ledger import canonical
from engine.record.ledger import verify as verify_chain
from engine.system.errors import BadInput, LedgerCorrupt

RECEIPT_VERSION = 1


# ---- configuration ---------------------------------------------------------------------------

@dataclass(frozen=True)
class GuardPolicy:
    """How the broker answers each kind of trouble. Each field: its default and why."""

    on_stale: Literal["refresh", "keep", "escalate"] = "refresh"  # stale evidence: what instead
    on_invalid: Literal["keep", "escalate"] = "keep"  # malformed / empty / DONE-only replies
    candidate_budget: int = 10  # patches evaluated by the admission checks, at most
    wall_budget_s: float | None = None  # seconds for revisions after start(); None: unlimited
    repeat_limit: int = 1  # a tree rejected this many times escalates when proposed again
    require_evidence: bool = True  # a Patch must cite evidence bound to the current tree

    def __post_init__(self) -> None:
        if self.on_stale not in ("refresh", "keep", "escalate"):
            raise ValueError("GuardPolicy.on_stale: use 'refresh', 'keep' or 'escalate'")
        if self.on_invalid not in ("keep", "escalate"):
            raise ValueError("GuardPolicy.on_invalid: use 'keep' or 'escalate'")
        if self.candidate_budget < 0 or self.repeat_limit < 1:
            raise ValueError("GuardPolicy: candidate_budget >= 0 and repeat_limit >= 1")
        if self.wall_budget_s is not None and self.wall_budget_s <= 0:
            raise ValueError("GuardPolicy.wall_budget_s: a positive number of seconds, or None")


class Outcome(StrEnum):
    """What one `submit` did."""

    ADMITTED = "admitted"  # the patch passed every admission check: it is the new checkpoint
    REJECTED = "rejected"  # evaluated (or refused as unsafe) and not admitted; checkpoint stays
    KEPT = "kept"  # the worker asked to keep, or the patch changed nothing
    INVALID = "invalid"  # the reply did not parse; mapped to Keep
    STALE = "stale"  # the patch cited evidence that does not bind; not applied
    ESCALATED = "escalated"  # revisions stop; nothing committed
    EXHAUSTED = "exhausted"  # the candidate or wall budget is spent; revisions stop
    CLOSED = "closed"  # revisions had already stopped


@dataclass(frozen=True)
class Decision:
    """The result of one `submit`."""

    outcome: Outcome
    reason: str
    proposal: str | None = None  # digest of the stored proposal
    candidate: str | None = None  # tree hash of the evaluated candidate, if one was built
    checkpoint: str | None = None  # the checkpoint after this decision
    evidence: tuple[Evidence, ...] = ()  # admission evidence on the candidate
    refreshed: Evidence | None = None  # fresh evidence, when stale evidence was refreshed
    restored: tuple[str, ...] = ()  # leftovers removed by restoring the workspace first


@dataclass(frozen=True)
class Completion:
    """The result of `complete`: a receipt, or the reason there is none."""

    completed: bool
    reason: str
    receipt: dict[str, Any] | None = None
    receipt_path: Path | None = None


class EventLog(Protocol):
    """Where the broker appends its records: an `engine.record.ledger.Ledger` or a `MemoryLog`."""

    def append(self, record: dict) -> dict: ...

    @property
    def records(self) -> Sequence[dict]: ...


class MemoryLog:
    """An in-memory hash chain with the ledger's record shape (seq, prev, hash), for experiments
    that drive many short revisions and keep no file."""

    def __init__(self) -> None:
        self._records: list[dict] = []
        self.head = ""

    @property
    def records(self) -> Sequence[dict]:
        return tuple(self._records)

    def append(self, record: dict) -> dict:
        stored = dict(record)
        stored["seq"], stored["prev"] = len(self._records), self.head
        stored["hash"] = hashlib.sha256(canonical(stored)).hexdigest()
        self._records.append(stored)
        self.head = stored["hash"]
        return stored


def file_policy(path: Path) -> Callable[[], str]:
    """A policy digest source for a policy file: the SHA-256 of its bytes, read on every check."""
    def current() -> str:
        try:
            return hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            return "missing"
    return current


# ---- the broker --------------------------------------------------------------------------------

class AdmissionBroker:
    """Guards one workspace: state-bound evidence, typed actions, a checkpoint, recertification.

    `admission` checks must all pass for a candidate to be admitted; `feedback` (default: the
    first admission check) is the check whose evidence a worker sees; `completion` (default: the
    admission checks) is re-run on the checkpoint by `complete()`. `protected` are globs of
    workspace-relative paths a Patch may not write; check files inside the workspace are added.
    """

    def __init__(self, workspace: Path, state_dir: Path, *, admission: Sequence[Check],
                 feedback: Check | None = None, completion: Sequence[Check] | None = None,
                 policy: GuardPolicy | None = None, protected: Sequence[str] = (),
                 policy_digest: Callable[[], str] | None = None, ledger: EventLog | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not admission:
            raise ValueError("AdmissionBroker: at least one admission check (nothing is admitted "
                             "without a gate)")
        self.workspace = Path(workspace)
        self.state_dir = Path(state_dir)
        ws, sd = self.workspace.resolve(), self.state_dir.resolve()
        if sd == ws or ws in sd.parents:
            raise BadInput(str(state_dir), "state_dir", "is inside the guarded workspace",
                           "keep the broker's state outside the workspace the worker edits")
        self.admission = tuple(admission)
        self.feedback = feedback if feedback is not None else self.admission[0]
        self.completion = tuple(completion) if completion is not None else self.admission
        self.policy = policy or GuardPolicy()
        self.policy_digest = policy_digest
        self.log: EventLog = ledger if ledger is not None else MemoryLog()
        self.clock = clock
        checks: dict[str, Check] = {}
        for c in (*self.admission, self.feedback, *self.completion):
            if c.name in checks and checks[c.name].identity() != c.identity():
                raise ValueError(f"two different checks are both named {c.name!r}")
            checks[c.name] = c
        self.checks = checks
        self.protected = tuple(protected) + self._protected_check_files()
        self.store = CheckpointStore(self.state_dir / "checkpoint")
        self.proposals_dir = self.state_dir / "proposals"
        self.scratch = self.state_dir / "scratch"
        # run state
        self.status = "new"  # new | open | escalated | exhausted | failed | completed
        self.status_reason = ""
        self.base: str = ""  # the current candidate: the checkpoint, or the initial tree
        self.checkpoint: str | None = None
        self.generation = -1
        self.pinned_suites: dict[str, str] = {}
        self.pinned_policy: str | None = None
        self._t0 = 0.0
        self._seq = 0
        self._issued: dict[str, Evidence] = {}
        self._feedback_cache: Evidence | None = None
        self._rejected: dict[str, int] = {}
        self._verdicts: list[dict[str, Any]] = []
        self._proposals: list[str] = []
        self._checkpoint_by: str = ""
        self.counts = {"proposals": 0, "evaluated": 0, "admitted": 0, "rejected": 0,
                       "unsafe": 0, "invalid": 0, "stale": 0, "kept": 0, "restores": 0}
        self._proposals_at_checkpoint = 0
        self._completion: Completion | None = None

    def _protected_check_files(self) -> tuple[str, ...]:
        """Workspace paths a check depends on: its named files that lie in the workspace, and
        relative argv items naming files in the workspace (a test script kept in the repo)."""
        ws = self.workspace.resolve()
        out = set()
        for c in self.checks.values():
            named = [Path(f).resolve() for f in c.identity().get("files", {})]
            cwd = ws / str(c.identity().get("cwd", "."))
            for a in c.identity().get("argv", [])[1:]:
                if isinstance(a, str) and not a.startswith("-") and not Path(a).is_absolute():
                    named.append((cwd / a).resolve())
            for p in named:
                if ws in p.parents and p.is_file():
                    out.add(p.relative_to(ws).as_posix())
        return tuple(sorted(out))

    # ---- properties ---------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once revisions have stopped (escalated, exhausted, failed or completed)."""
        return self.status not in ("new", "open")

    @property
    def records(self) -> Sequence[dict]:
        return self.log.records

    # ---- start --------------------------------------------------------------------------------
    def start(self) -> Evidence:
        """Pin suites and policy, snapshot the initial tree, admit it if it passes, and return
        the first feedback evidence for it."""
        if self.status != "new":
            raise RuntimeError("AdmissionBroker.start: already started")
        if self.store.head() is not None:
            raise BadInput(str(self.state_dir), "state_dir", "already holds a checkpoint",
                           "give every guarded run its own empty state folder")
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.proposals_dir.mkdir(parents=True, exist_ok=True)
        self._t0 = self.clock()
        self.pinned_suites = {n: suite_hash(c.identity()) for n, c in sorted(self.checks.items())}
        self.pinned_policy = self.policy_digest() if self.policy_digest else None
        self.base = self.store.snapshot(self.workspace)  # raises UnsafeTree on an escaping link
        self.status = "open"
        self.log.append({"type": "guard.start", "tree": self.base, "suites": self.pinned_suites,
                         "policy": self.pinned_policy, "guard": asdict(self.policy),
                         "protected": list(self.protected)})
        evidence = self._evaluate(self.store.path_of(self.base), self.base, "initial")
        for e in evidence:  # the feedback check may already have judged the initial tree
            if e.check == self.feedback.name:
                self._feedback_cache = e
        if all(e.verdict == "pass" for e in evidence) and len(evidence) == len(self.admission):
            self._commit(self.store.path_of(self.base), evidence, "initial")
        return self.evidence()

    # ---- evidence -------------------------------------------------------------------------------
    def _next_id(self, check: Check) -> str:
        self._seq += 1
        return f"x{self._seq:05d}.{check.name}"

    def _run(self, check: Check, source: Path, candidate: str, phase: str,
             timeout_s: float | None = None) -> Evidence:
        ev = run_check(check, source, self._next_id(check), scratch=self.scratch,
                       timeout_s=timeout_s)
        self._issued[ev.id] = ev
        self._verdicts.append({"phase": phase, "check": check.name, "candidate": ev.state_hash,
                               "verdict": ev.verdict, "evidence_id": ev.id,
                               "execution_id": ev.execution_id})
        self.log.append({"type": "guard.evidence", "id": ev.id, "phase": phase,
                         **ev.to_json()})
        if ev.state_hash != candidate:  # the copy differs from what was asked: fail closed
            self._fail(f"check {check.name!r} saw tree {ev.state_hash[:12]}, "
                       f"not {candidate[:12]}")
        return ev

    def evidence(self) -> Evidence:
        """Evidence from the feedback check bound to the current candidate (run if needed).
        Raises CheckpointError (and stops the broker) if the checkpoint store was damaged."""
        self._require_started()
        self._ensure_base()
        cached = self._feedback_cache
        if cached is not None and self._binding(cached) is None:
            return cached
        ev = self._run(self.feedback, self.store.path_of(self.base), self.base, "feedback",
                       self._time_left())
        self._feedback_cache = ev
        return ev

    def _binding(self, evidence: Evidence | None) -> str | None:
        """Why `evidence` may not drive a revision of the current candidate, or None."""
        if evidence is None:
            return "no evidence was cited"
        if self._issued.get(evidence.id) != evidence:
            return (f"evidence {evidence.execution_id!r} was not issued by this broker "
                    f"(edited, forged or from another run)")
        pinned = self.pinned_suites.get(evidence.check)
        if pinned is None:
            return f"evidence names unknown check {evidence.check!r}"
        return stale_reason(evidence, self.base, pinned)

    def deliver(self, evidence: Evidence | None) -> Evidence | None:
        """The gate between evidence and a worker: `evidence` itself (the same object) if it
        binds to the current tree and suite; otherwise, per policy, fresh evidence (refresh),
        None (keep) or None with revisions stopped (escalate)."""
        self._require_started()
        self._ensure_base()
        why = self._binding(evidence)
        if why is None:
            return evidence
        self.counts["stale"] += 1
        self.log.append({"type": "guard.stale", "where": "deliver", "reason": why})
        if self.policy.on_stale == "refresh" and not self.closed:
            return self.evidence()
        if self.policy.on_stale == "escalate":
            self._stop("escalated", f"stale evidence: {why}")
        return None

    # ---- one revision -------------------------------------------------------------------------
    def submit(self, reply: bytes | str | None, based_on: Evidence | None = None) -> Decision:
        """Parse, store and (for a Patch) evaluate one worker reply. See the module docstring.
        A damaged checkpoint store stops the broker (fail closed) instead of raising."""
        self._require_started()
        try:
            return self._submit(reply, based_on)
        except CheckpointError as exc:
            self._stop("failed", f"checkpoint store damaged: {exc}")
            return self._decide(Outcome.CLOSED, self.status_reason)

    def _submit(self, reply: bytes | str | None, based_on: Evidence | None) -> Decision:
        if self.closed:
            return self._decide(Outcome.CLOSED, f"revisions stopped: {self.status_reason}")
        if not self._pins_hold():
            return self._decide(Outcome.CLOSED, self.status_reason)
        restored = self._ensure_base()
        parsed = parse_reply(reply, on_invalid=self.policy.on_invalid)
        proposal = self._store_proposal(action_record(parsed, reply))
        self.counts["proposals"] += 1
        extra = {"proposal": proposal, "restored": restored}
        if not parsed.valid:
            self.counts["invalid"] += 1
            if isinstance(parsed.action, Escalate):
                self._stop("escalated", parsed.action.reason)
                return self._decide(Outcome.ESCALATED, parsed.action.reason, **extra)
            return self._decide(Outcome.INVALID, f"kept: {parsed.problem}", **extra)
        if isinstance(parsed.action, Keep):
            self.counts["kept"] += 1
            return self._decide(Outcome.KEPT, parsed.action.reason, **extra)
        if isinstance(parsed.action, Escalate):
            self._stop("escalated", f"worker escalated: {parsed.action.reason}")
            return self._decide(Outcome.ESCALATED, parsed.action.reason, **extra)
        return self._patch(parsed.action, based_on, extra)

    def _patch(self, patch: Patch, based_on: Evidence | None, extra: dict) -> Decision:
        if (why := self._budget_spent()) is not None:
            self._stop("exhausted", why)
            return self._decide(Outcome.EXHAUSTED, why, **extra)
        if self.policy.require_evidence or based_on is not None:
            why = self._binding(based_on)
            if why is not None:
                self.counts["stale"] += 1
                self.log.append({"type": "guard.stale", "where": "submit", "reason": why,
                                 "proposal": extra["proposal"]})
                if self.policy.on_stale == "escalate":
                    self._stop("escalated", f"stale evidence: {why}")
                    return self._decide(Outcome.ESCALATED, why, **extra)
                fresh = self.evidence() if self.policy.on_stale == "refresh" else None
                return self._decide(Outcome.STALE, why, refreshed=fresh, **extra)
        problems = patch_violations(patch, self.workspace, self.protected)
        if problems:
            self.counts["unsafe"] += 1
            self.counts["rejected"] += 1
            return self._decide(Outcome.REJECTED, "unsafe patch: " + "; ".join(problems), **extra)
        parent = Path(tempfile.mkdtemp(prefix="candidate-", dir=self.scratch))
        copy = parent / "candidate"
        try:
            shutil.copytree(self.store.path_of(self.base), copy, symlinks=True)
            try:
                apply_patch(patch, copy, self.protected)
            except (OSError, ValueError) as exc:
                self.counts["rejected"] += 1
                return self._decide(Outcome.REJECTED, f"patch cannot be applied: {exc}", **extra)
            candidate = tree_hash(copy)
            if candidate == self.base:
                self.counts["kept"] += 1
                return self._decide(Outcome.KEPT, "the patch changes nothing", candidate=candidate,
                                    **extra)
            seen = self._rejected.get(candidate, 0)
            if seen >= self.policy.repeat_limit:
                why = (f"tree {candidate[:12]} was already rejected {seen} time(s); "
                       f"escalating instead of spending the budget on it again")
                self._stop("escalated", why)
                return self._decide(Outcome.ESCALATED, why, candidate=candidate, **extra)
            self.counts["evaluated"] += 1
            evidence = self._evaluate(copy, candidate, "admission")
            passed = len(evidence) == len(self.admission) and all(
                e.verdict == "pass" and e.suite_hash == self.pinned_suites[e.check]
                for e in evidence)
            if passed and not self.closed:
                self._commit(copy, evidence, extra["proposal"])
                self.counts["admitted"] += 1
                return self._decide(Outcome.ADMITTED, "every admission check passed",
                                    candidate=candidate, evidence=tuple(evidence), **extra)
            self.counts["rejected"] += 1
            self._rejected[candidate] = seen + 1
            failing = next((e for e in evidence if e.verdict != "pass"), None)
            why = (f"{failing.check}: {failing.verdict} ({failing.payload.get('detail', '')})"
                   if failing else self.status_reason)
            return self._decide(Outcome.REJECTED, why, candidate=candidate,
                                evidence=tuple(evidence), **extra)
        finally:
            remove_tree(parent)

    def _evaluate(self, source: Path, candidate: str, phase: str) -> list[Evidence]:
        """Run the admission checks in order on fresh copies of `source`; stop at the first
        non-pass (a later check cannot rescue an earlier failure)."""
        out = []
        for check in self.admission:
            ev = self._run(check, source, candidate, phase, self._time_left())
            out.append(ev)
            if ev.verdict != "pass":
                break
        return out

    def _commit(self, source: Path, evidence: Sequence[Evidence], proposal: str) -> None:
        required = {c.name: self.pinned_suites[c.name] for c in self.admission}
        info = self.store.commit(source, evidence, required)
        self.checkpoint, self.generation, self.base = info.tree_hash, info.generation, info.tree_hash
        self._checkpoint_by = proposal
        self._proposals_at_checkpoint = self.counts["proposals"]
        for ev in evidence:
            if ev.check == self.feedback.name:
                self._feedback_cache = ev
        self.log.append({"type": "guard.checkpoint", "tree": info.tree_hash,
                         "generation": info.generation, "evidence_ids": list(info.evidence_ids),
                         "proposal": proposal})
        self._ensure_base(advance=True)

    # ---- completion -----------------------------------------------------------------------------
    def complete(self) -> Completion:
        """Recertify the checkpoint on a fresh copy and, if every completion check passes,
        write the receipt and anchor its digest in the ledger."""
        self._require_started()
        if self._completion is not None:
            return self._completion
        if self.status == "failed" or not self._pins_hold():
            return Completion(False, f"cannot complete: {self.status_reason}")
        try:
            restored = self._ensure_base()
        except CheckpointError:
            return Completion(False, f"cannot complete: {self.status_reason}")
        if self.checkpoint is None:
            self._stop("failed", "no candidate passed admission; nothing to complete")
            return Completion(False, self.status_reason)
        try:
            source = self.store.path_of(self.checkpoint)
        except CheckpointError as exc:
            self._stop("failed", f"checkpoint snapshot unusable: {exc}")
            return Completion(False, self.status_reason)
        recert = [self._run(c, source, self.checkpoint, "recertification")
                  for c in self.completion]
        bad = [e for e in recert if e.verdict != "pass" or e.state_hash != self.checkpoint
               or e.suite_hash != self.pinned_suites[e.check]]
        if bad or self.status == "failed":
            why = "; ".join(f"{e.check}: {e.verdict} ({e.payload.get('detail', '')})"
                            for e in bad) or self.status_reason
            self._stop("failed", f"recertification failed: {why}")
            self.log.append({"type": "guard.recertification_failed", "reason": why})
            return Completion(False, self.status_reason)
        receipt = self._receipt(recert, restored)
        path = self.state_dir / "receipt.json"
        path.write_bytes(canonical(receipt))
        self.log.append({"type": "guard.receipt", "digest": receipt["digest"],
                         "checkpoint": self.checkpoint})
        previous = self.status_reason
        self.status, self.status_reason = "completed", "recertified"
        self._completion = Completion(True, "recertified" + (f" after: {previous}" if previous
                                                             else ""), receipt, path)
        return self._completion

    def _receipt(self, recert: Sequence[Evidence], restored: Sequence[str]) -> dict[str, Any]:
        assert self.checkpoint is not None
        coverage: dict[str, dict[str, Any]] = {}
        for v in self._verdicts:
            entry = coverage.setdefault(v["check"], {"intermediate": [], "terminal": False})
            if v["phase"] == "recertification":
                entry["terminal"] = True
            elif v["candidate"] != self.checkpoint and v["candidate"] not in entry["intermediate"]:
                entry["intermediate"].append(v["candidate"])
        for entry in coverage.values():
            entry["intermediate"] = len(entry["intermediate"])
        mode = ("intermediate and terminal"
                if any(e["intermediate"] for e in coverage.values()) else "terminal only")
        later = self.counts["proposals"] - self._proposals_at_checkpoint
        origin = ("the initial tree passed admission" if self._checkpoint_by == "initial"
                  else f"proposal {self._checkpoint_by[:12]} passed admission")
        selected = (f"latest admitted candidate (generation {self.generation}: {origin}); "
                    f"{later} later proposal(s) were not admitted; recertified by "
                    f"{', '.join(e.check for e in recert)}")
        body = {
            "version": RECEIPT_VERSION,
            "checkpoint": {"tree_hash": self.checkpoint, "generation": self.generation,
                           "admitted_by": self._checkpoint_by},
            "suites": dict(self.pinned_suites),
            "policy_hash": self.pinned_policy,
            "verdicts": list(self._verdicts),
            "coverage": {"mode": mode, "checks": coverage},
            "liveness": {**self.counts, "after_checkpoint": later,
                         "ended": self.status if self.status != "open" else "by the caller", "why_ended": self.status_reason,
                         "recovered": later > 0 or self.counts["restores"] > 0,
                         "restored_at_completion": list(restored),
                         "selected_because": selected},
            "proposals": list(self._proposals),
        }
        return {**body, "digest": digest(body)}

    # ---- helpers --------------------------------------------------------------------------------
    def _require_started(self) -> None:
        if self.status == "new":
            raise RuntimeError("AdmissionBroker: call start() first")

    def _decide(self, outcome: Outcome, reason: str, *, proposal: str | None = None,
                candidate: str | None = None, evidence: tuple[Evidence, ...] = (),
                refreshed: Evidence | None = None, restored: Sequence[str] = ()) -> Decision:
        d = Decision(outcome, reason, proposal, candidate, self.checkpoint, evidence, refreshed,
                     tuple(restored))
        self.log.append({"type": "guard.decision", "outcome": outcome.value, "reason": reason,
                         "proposal": proposal, "candidate": candidate,
                         "checkpoint": self.checkpoint,
                         "evidence_ids": [e.id for e in evidence]})
        return d

    def _stop(self, status: str, reason: str) -> None:
        if self.status in ("failed", "completed"):
            return
        self.status, self.status_reason = status, reason
        self.log.append({"type": "guard.stop", "status": status, "reason": reason})

    def _fail(self, reason: str) -> None:
        self._stop("failed", reason)

    def _time_left(self) -> float | None:
        if self.policy.wall_budget_s is None:
            return None
        return max(0.01, self.policy.wall_budget_s - (self.clock() - self._t0))

    def _budget_spent(self) -> str | None:
        if self.counts["evaluated"] >= self.policy.candidate_budget:
            return f"candidate budget exhausted ({self.policy.candidate_budget} evaluated)"
        if (self.policy.wall_budget_s is not None
                and self.clock() - self._t0 >= self.policy.wall_budget_s):
            return f"wall budget exhausted ({self.policy.wall_budget_s:g}s)"
        return None

    def _pins_hold(self) -> bool:
        """Re-check the pinned suites and policy; a change stops everything (fail closed)."""
        for name, pinned in self.pinned_suites.items():
            now = suite_hash(self.checks[name].identity())
            if now != pinned:
                self._stop("failed", f"suite {name!r} changed after it was pinned "
                                     f"({pinned[:12]} -> {now[:12]})")
                return False
        if self.policy_digest is not None:
            now_p = self.policy_digest()
            if now_p != self.pinned_policy:
                self._stop("failed", f"policy changed after it was pinned "
                                     f"({str(self.pinned_policy)[:12]} -> {now_p[:12]})")
                return False
        return True

    def _ensure_base(self, advance: bool = False) -> list[str]:
        """If the workspace is not exactly the current candidate, restore it (exactly).
        `advance`: the candidate just moved to a newly admitted checkpoint (not a recovery)."""
        try:
            now: str | None = tree_hash(self.workspace)
        except UnsafeTree:
            now = None  # e.g. a symlink out of the workspace was planted: restore removes it
        if now == self.base:
            return []
        try:
            leftovers = self.store.restore(self.base, self.workspace)
        except CheckpointError as exc:
            self._stop("failed", f"cannot restore the current candidate: {exc}")
            raise
        if not advance:
            self.counts["restores"] += 1
        self.log.append({"type": "guard.advance" if advance else "guard.restore", "found": now,
                         "restored": self.base, "removed": leftovers})
        return leftovers

    def _store_proposal(self, record: dict) -> str:
        d = record["digest"]
        path = self.proposals_dir / f"{d}.json"
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(canonical(record))
            os.replace(tmp, path)
        self._proposals.append(d)
        self.log.append({"type": "guard.proposal", "digest": d, "kind": record["action"]["kind"],
                         "valid": record["valid"], "problem": record["problem"]})
        return d


# ---- the loop, for callers without a runner -----------------------------------------------------

def run_revisions(broker: AdmissionBroker, coder: Callable[[Evidence], bytes | str | None],
                  revisions: int) -> tuple[list[Decision], Completion]:
    """Start `broker`, ask `coder` for up to `revisions` replies (each given bound evidence for
    the current candidate), then complete. Returns every decision and the completion."""
    evidence: Evidence | None = broker.start()
    decisions: list[Decision] = []
    for _ in range(revisions):
        if broker.closed or evidence is None:
            break
        d = broker.submit(coder(evidence), based_on=evidence)
        decisions.append(d)
        evidence = None if broker.closed else broker.evidence()
    return decisions, broker.complete()


# ---- replay ------------------------------------------------------------------------------------

def stored_proposals(state_dir: Path, records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every proposal the ledger names, in order, read from the content-addressed store and
    checked: a missing or altered proposal raises LedgerCorrupt naming it."""
    out = []
    for r in records:
        if r.get("type") != "guard.proposal":
            continue
        d = str(r.get("digest"))
        path = Path(state_dir) / "proposals" / f"{d}.json"
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LedgerCorrupt(f"{path}: proposal {d[:12]} unreadable ({exc}); fix: restore "
                                f"the proposal store from a trusted copy") from None
        body = {k: v for k, v in stored.items() if k != "digest"}
        if digest(body) != d or stored.get("digest") != d:
            raise LedgerCorrupt(f"{path}: proposal {d[:12]} does not match its digest; fix: "
                                f"restore the proposal store from a trusted copy")
        out.append(stored)
    return out


def replay_outcomes(broker: AdmissionBroker, proposals: Sequence[Mapping[str, Any]]
                    ) -> list[Outcome]:
    """Feed stored proposals, in order, to a fresh `broker` (same workspace start, same checks),
    each citing the evidence current at that moment; return the outcomes. With deterministic
    checks, a guarded run's patch decisions replay identically (stale citations excepted:
    replay cites current evidence)."""
    evidence: Evidence | None = broker.start()
    outcomes = []
    for p in proposals:
        d = broker.submit(p.get("raw"), based_on=evidence)
        outcomes.append(d.outcome)
        evidence = None if broker.closed else broker.evidence()
    return outcomes


# ---- receipts ---------------------------------------------------------------------------------

def load_receipt(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(str(path), "receipt", f"cannot be read as JSON ({exc})",
                       "give the receipt.json a completed guarded run wrote") from None
    if not isinstance(obj, dict):
        raise BadInput(str(path), "receipt", "is not a JSON object",
                       "give the receipt.json a completed guarded run wrote")
    return obj


def verify_receipt(receipt: Mapping[str, Any], records: Iterable[Mapping[str, Any]],
                   store: CheckpointStore | None = None) -> list[str]:
    """Every reason `receipt` cannot be trusted against the ledger `records` (empty: verified).

    Checks: the digest matches the content; the digest is anchored by a `guard.receipt` record;
    every verdict names evidence the ledger holds with that verdict; and, given the store, the
    checkpoint snapshot still hashes to the receipt's tree hash.

    `records` may also be a run ledger (record 0 of type `run`): see `verify_receipt_in_run`.
    """
    records = list(records)
    if records and records[0].get("type") == "run":
        return verify_receipt_in_run(receipt, records, store)
    problems = []
    body = {k: v for k, v in receipt.items() if k != "digest"}
    if digest(body) != receipt.get("digest"):
        problems.append("receipt content does not match its digest (edited after issue)")
    anchors = {r.get("digest") for r in records if r.get("type") == "guard.receipt"}
    if receipt.get("digest") not in anchors:
        problems.append("receipt digest is not anchored in the ledger")
    evidence = {r.get("id"): r for r in records if r.get("type") == "guard.evidence"}
    for v in receipt.get("verdicts", []):
        rec = evidence.get(v.get("evidence_id"))
        if rec is None:
            problems.append(f"verdict {v.get('execution_id')!r}: its evidence is not in the ledger")
        elif rec.get("payload", {}).get("verdict") != v.get("verdict"):
            problems.append(f"verdict {v.get('execution_id')!r}: ledger says "
                            f"{rec.get('payload', {}).get('verdict')!r}, receipt says "
                            f"{v.get('verdict')!r}")
    if store is not None:
        tree = receipt.get("checkpoint", {}).get("tree_hash", "")
        try:
            store.path_of(str(tree))
        except CheckpointError as exc:
            problems.append(f"checkpoint: {exc}")
    return problems


def verify_receipt_in_run(receipt: Mapping[str, Any], run_records: Sequence[Mapping[str, Any]],
                          store: CheckpointStore | None = None) -> list[str]:
    """Verify a receipt against the run ledger that accepted it.

    The runner anchors a revision node's receipt in the accepting `verdict` record (`receipt`:
    digest, guard ledger path, its head hash and record count). The receipt's digest must be
    anchored by a passing verdict; the guard ledger it names must still verify and still have
    the anchored head at the anchored length (so it was not rewritten after the acceptance);
    then everything `verify_receipt` checks against the guard ledger must hold.
    """
    d = receipt.get("digest")
    anchors = [r["receipt"] for r in run_records
               if r.get("type") == "verdict" and r.get("passed") is True
               and isinstance(r.get("receipt"), dict) and r["receipt"].get("digest") == d]
    if not anchors:
        body = {k: v for k, v in receipt.items() if k != "digest"}
        problems = [] if digest(body) == d else [
            "receipt content does not match its digest (edited after issue)"]
        return [*problems, "receipt digest is not anchored in the run ledger (no accepting "
                           "verdict names it)"]
    anchor = anchors[-1]
    guard = Path(str(anchor.get("guard_ledger", "")))
    count, head = anchor.get("guard_records"), anchor.get("guard_head")
    if not guard.is_file():
        return [f"{guard}: the guard ledger the run ledger anchors is missing"]
    check = verify_chain(guard)
    if check.status == "broken":
        return [f"guard ledger: {check.error}"]
    if not isinstance(count, int) or not 0 < count <= check.records:
        return [f"guard ledger: the run ledger anchors {count!r} records, it holds "
                f"{check.records}"]
    lines = guard.read_bytes().split(b"\n")[:count]
    guard_records = [json.loads(line) for line in lines]
    if guard_records[-1].get("hash") != head:
        return [f"guard ledger: record {count - 1} is not the head the run ledger anchored "
                f"({str(head)[:12]}...); it was rewritten after the acceptance"]
    return verify_receipt(receipt, guard_records, store)
