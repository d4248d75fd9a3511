"""The audit of a whole catalogue: reference check, mutants and probes, oracle, gate, report.

Order matters for honesty and speed: a gate that does not accept its own reference workspace is
reported broken (never safe) and gets no mutants; the oracle is asked first, so a mutant the
oracle finds harmless never costs a gate run.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loopproof.engine.audit import differential as differential_mod
from loopproof.engine.audit import report
from loopproof.engine.audit.catalogue import Loop
from loopproof.engine.audit.judge import ACCEPT, NOT_RUN, GateReply, Job, Judge
from loopproof.engine.audit.mutants import (
    Files,
    Mutant,
    apply,
    corpus,
    read_reference,
    selfattest_probes,
    workspace_key,
)
from loopproof.engine.audit.operators import kind_of

Progress = Callable[[str, int], Callable[[], None]]


@dataclass
class Audit:
    """What an audit found (`gates`, `summary`: deterministic for a given catalogue and seed)
    and how long it took (`timing`: kept apart so result files can stay byte-identical)."""

    gates: list[dict]
    summary: dict
    timing: dict = field(default_factory=dict)

    def as_json(self, with_timing: bool = True) -> dict:
        summary = dict(self.summary, **self.timing) if with_timing else self.summary
        return {"gates": self.gates, "summary": summary}


def _no_progress(phase: str, total: int) -> Callable[[], None]:
    return lambda: None


def _jobs(loop: Loop, reference: Files, mutants: list[Mutant], role: str) -> list[Job]:
    return [Job(loop, role, apply(reference, m.changes), m.key) for m in mutants]


@dataclass(frozen=True)
class References:
    """Phase 1: each loop's reference workspace, and which loops are broken (their gate, or
    their oracle, does not accept it: reported, never audited)."""

    files: dict[str, Files]
    broken: dict[str, str]
    live: list[Loop]
    not_run: dict[str, str] = field(default_factory=dict)  # the audit's time ran out first


@dataclass(frozen=True)
class Drawn:
    """Phase 2: each live loop's mutants per tier (seeded) and its self-attestation probes."""

    corpora: dict[str, dict[int, list[Mutant]]]
    probes: dict[str, list[Mutant]]

    def mutants(self, loop_id: str) -> list[Mutant]:
        return [m for t in self.corpora[loop_id] for m in self.corpora[loop_id][t]]


Replies = dict[str, dict[str, GateReply]]  # loop id -> mutant key -> reply


def audit(loops: list[Loop], tiers: tuple[int, ...] = (1, 2), seed: int = 0, jobs: int | None = None,
          cap: dict[int, int | None] | None = None, progress: Progress = _no_progress,
          judge: Judge | None = None, differential: bool = True) -> Audit:
    """Audit every loop. `cap[t]` bounds tier t's mutants per loop (a seeded sample). Tier-1
    absence mutants and the self-attestation probes always run: vacuity and self-attestation are
    reported whatever tiers are selected. A loop with no oracle has its Python mutants judged by
    the differential oracle (engine/audit/differential.py) unless `differential` is False.

    The phases, in order: check the references, draw the mutants, ask the oracles, run the
    gates on what the oracles found destroying, then one entry per loop and the summary."""
    judge = judge or Judge(jobs)
    started, cpu_before = time.monotonic(), _cpu_seconds()
    runs_before = judge.runs
    loops = sorted(loops, key=lambda lp: lp.id)
    refs = check_references(loops, judge, progress)
    drawn = draw(refs, tiers, seed, cap or {}, progress)
    # what needs no oracle first (the probes, the mutants wrong by construction): vacuity and
    # self-attestation are what an audit stopped by its deadline must still have judged
    run_gates(refs, drawn, {lp.id: {} for lp in refs.live}, judge, progress, "gate: absence")
    oracle = ask_oracles(refs, drawn, judge, progress, differential)
    gate = run_gates(refs, drawn, oracle, judge, progress)
    gates = [entry(lp, refs, drawn, oracle, gate, tiers, differential) for lp in loops]
    summary = _summary(gates, tiers)
    summary["mutants_judged"] = sum(len(drawn.mutants(lp.id)) for lp in refs.live)
    summary["probes_judged"] = sum(len(p) for p in drawn.probes.values())
    if judge.deadline.passed():  # --max-seconds: what was left, said in the report
        summary["stopped"] = {"why": judge.deadline.why, "loops_not_run": len(refs.not_run),
                              "mutants_not_run": sum(row["not_run"]
                                                     for row in summary["tiers"].values())}
    return Audit(gates, summary, _timing(summary, judge, started, cpu_before, runs_before))


def check_references(loops: list[Loop], judge: Judge, progress: Progress) -> References:
    """Phase 1: every gate (and oracle) on its loop's reference workspace."""
    files = {lp.id: read_reference(lp) for lp in loops}
    keys = {lp.id: workspace_key(files[lp.id]) for lp in loops}  # a workspace's identity
    ref_jobs = [Job(lp, "gate", files[lp.id], keys[lp.id]) for lp in loops]
    ref_jobs += [Job(lp, "oracle", files[lp.id], keys[lp.id]) for lp in loops if lp.oracle]
    replies = dict(zip([(j.loop.id, j.role) for j in ref_jobs],
                       judge.run(ref_jobs, progress("reference", len(ref_jobs))), strict=True))
    broken: dict[str, str] = {}
    not_run: dict[str, str] = {}
    for lp in loops:
        gate_ref = replies[(lp.id, "gate")]
        said = [gate_ref, *([replies[(lp.id, "oracle")]] if lp.oracle else [])]
        if any(r.outcome == NOT_RUN for r in said):
            not_run[lp.id] = next(r.detail for r in said if r.outcome == NOT_RUN)
        elif gate_ref.outcome != ACCEPT:
            broken[lp.id] = f"gate does not accept its reference workspace ({gate_ref.detail})"
        elif lp.oracle and replies[(lp.id, "oracle")].outcome != ACCEPT:
            broken[lp.id] = ("oracle does not accept the reference workspace "
                             f"({replies[(lp.id, 'oracle')].detail})")
    return References(files, broken, [lp for lp in loops
                                      if lp.id not in broken and lp.id not in not_run], not_run)


def draw(refs: References, tiers: tuple[int, ...], seed: int,
         cap: dict[int, int | None], progress: Progress = _no_progress) -> Drawn:
    """Phase 2: the mutants of every selected tier (tier 1's absence mutants always) and the
    probes, for each live loop. On a real tree this takes a minute of parsing (every module
    parsed by cosmic-ray's parso, each mutant normalised), so it reports progress per tier."""
    corpora: dict[str, dict[int, list[Mutant]]] = {}
    probes: dict[str, list[Mutant]] = {}
    drawn_tiers = sorted(set(tiers) | {1})
    tick = progress("drawing mutants (loops x tiers)", len(refs.live) * len(drawn_tiers))
    for lp in refs.live:
        ref = refs.files[lp.id]
        per_tier = {}
        for t in drawn_tiers:
            per_tier[t] = corpus(lp, ref, t, seed, cap.get(t))
            tick()
        if 1 not in tiers:
            per_tier[1] = [m for m in per_tier[1] if m.family == "absence"]
        corpora[lp.id] = per_tier
        probes[lp.id] = selfattest_probes(lp, ref)
    return Drawn(corpora, probes)


def ask_oracles(refs: References, drawn: Drawn, judge: Judge, progress: Progress,
                differential: bool) -> Replies:
    """Phase 3: each loop's own oracle on its mutants (those not harmful by construction); a
    loop without one, the differential oracle (does the mutant behave differently?)."""
    live = refs.live
    oracle_jobs = [job for lp in live if lp.oracle for t in drawn.corpora[lp.id]
                   for job in _jobs(lp, refs.files[lp.id],
                                    [m for m in drawn.corpora[lp.id][t] if not m.by_construction],
                                    "oracle")]
    oracle: Replies = {lp.id: {} for lp in live}
    for job, reply in zip(oracle_jobs, judge.run(oracle_jobs, progress("oracle", len(oracle_jobs))),
                          strict=True):
        oracle[job.loop.id][job.key] = reply
    if differential:
        pending = [(lp, refs.files[lp.id], drawn.mutants(lp.id)) for lp in live if lp.oracle is None]
        count = sum(1 for lp, _, ms in pending for m in ms if differential_mod.applies(lp, m))
        found = differential_mod.judge(pending, judge.jobs, judge.sandbox,
                                       progress("differential", count), judge.deadline)
        for loop_id, replies in found.items():
            oracle[loop_id].update(replies)
    return oracle


def run_gates(refs: References, drawn: Drawn, oracle: Replies, judge: Judge,
              progress: Progress, phase: str = "gate") -> Replies:
    """Phase 4: each gate on its probes and on the mutants its oracle found destroying (and,
    with no oracle replies yet, on those destroying by construction)."""
    gate_jobs: list[Job] = []
    for lp in refs.live:
        wanted = list(drawn.probes[lp.id])
        for mutants in drawn.corpora[lp.id].values():
            wanted += [m for m in mutants
                       if report.is_destroying(m, oracle[lp.id].get(m.key)) is True]
        gate_jobs += _jobs(lp, refs.files[lp.id], wanted, "gate")
    gate: Replies = {lp.id: {} for lp in refs.live}
    for job, reply in zip(gate_jobs, judge.run(gate_jobs, progress(phase,
                                                                   judge.pending(gate_jobs))),
                          strict=True):
        gate[job.loop.id][job.key] = reply
    return gate


def entry(lp: Loop, refs: References, drawn: Drawn, oracle: Replies, gate: Replies,
          tiers: tuple[int, ...], differential: bool) -> dict:
    """Phase 5: one loop's report entry (the audit's JSON)."""
    out: dict = {"gate": lp.id, "description": lp.description, "gate_dir": lp.gate_dir.name,
                 "oracle": "declared" if lp.oracle else "differential" if differential
                 and any(kind_of(f) == "python" for f in lp.artifact_files) else "none"}
    if lp.loaded is not None:  # a graph's gate: its kind, and where the mutants were placed
        out.update(kind=lp.kind, artifact=lp.loaded)
    if lp.id in refs.not_run:
        out.update(status="not run", reason=refs.not_run[lp.id], vacuous=None, vacuous_by=[],
                   self_attesting=None, self_attesting_on=[], flagged=False, tiers={})
        return out
    if lp.id in refs.broken:
        out.update(status="broken", reason=refs.broken[lp.id], vacuous=None, vacuous_by=[],
                   self_attesting=None, self_attesting_on=[], flagged=True, tiers={})
        return out
    per_tier = drawn.corpora[lp.id]
    absence = [m for m in per_tier[1] if m.family == "absence"]
    vacuous_by = report.vacuity(absence, drawn.probes[lp.id], gate[lp.id])
    trusts = report.self_attestation(drawn.probes[lp.id], gate[lp.id])
    unjudged = [m for m in absence + drawn.probes[lp.id] if gate[lp.id][m.key].outcome == NOT_RUN]
    stats = {str(t): report.tier_stats(per_tier[t], oracle[lp.id], gate[lp.id])
             for t in sorted(tiers)}
    for t, row in stats.items():  # what the oracle said about each false accept
        row["false_accept_why"] = {m.label: oracle[lp.id][m.key].detail
                                   for m in per_tier[int(t)]
                                   if m.label in row["false_accept_labels"]
                                   and m.key in oracle[lp.id]}
    # with absence mutants or probes left unjudged (--max-seconds), no accept is not "not vacuous"
    out.update(status="audited", vacuous=True if vacuous_by else None if unjudged else False,
               vacuous_by=vacuous_by, self_attesting=bool(trusts) if not unjudged or trusts
               else None, self_attesting_on=trusts, tiers=stats)
    out["flagged"] = bool(vacuous_by or trusts or any(s["false_accepts"] for s in stats.values()))
    return out


def _timing(summary: dict, judge: Judge, started: float, cpu_before: float,
            runs_before: int) -> dict:
    wall = time.monotonic() - started
    runs = judge.runs - runs_before
    cpu = _cpu_seconds() - cpu_before
    return {"wall_s": round(wall, 2), "gate_runs": runs, "jobs": judge.jobs,
            "runs_per_s": round(runs / wall, 1) if wall else None,
            "mutants_per_s": round(summary["mutants_judged"] / wall, 1) if wall else None,
            # CPU time (this process and the gates it ran): a rate that a busy machine does not
            # distort the way wall time is distorted; the load average says how busy it was.
            "cpu_s": round(cpu, 2),
            "mutants_per_cpu_s": round(summary["mutants_judged"] / cpu, 1) if cpu else None,
            "loadavg_1m": round(os.getloadavg()[0], 2)}


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _summary(gates: list[dict], tiers: tuple[int, ...]) -> dict:
    audited = [g for g in gates if g["status"] == "audited"]
    out: dict = {"loops": len(gates), "broken": sum(g["status"] == "broken" for g in gates),
                 "vacuous": sum(bool(g["vacuous"]) for g in audited),
                 "self_attesting": sum(bool(g["self_attesting"]) for g in audited),
                 "neither": sum(g["vacuous"] is False and g["self_attesting"] is False
                                for g in audited),
                 "flagged": sum(g["flagged"] for g in gates), "tiers": {}}
    for t in sorted(tiers):
        rows = [g["tiers"][str(t)] for g in audited]
        destroying = sum(r["destroying"] for r in rows)
        errors = sum(r["errors"] for r in rows)
        undetermined = sum(r["undetermined"] for r in rows)
        equivalent = sum(r["equivalent"] for r in rows)
        fa = sum(r["false_accepts"] for r in rows)
        not_run = sum(r["not_run"] for r in rows)
        judged = destroying - errors
        out["tiers"][str(t)] = {
            "mutants": sum(r["mutants"] for r in rows), "destroying": destroying,
            "equivalent": equivalent, "undetermined": undetermined,
            "errors": errors, "false_accepts": fa, "not_run": not_run,
            "alpha": round(fa / judged, report.DIGITS) if judged else None,
            "alpha_upper95": report.wilson_upper(fa, judged)}
    return out
