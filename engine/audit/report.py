"""Classify one gate from its verdicts: vacuous, self-attesting, and per-tier false-accept rates
with Wilson 95% upper bounds (in closed form: the same figures as statsmodels' `wilson` method,
without importing statsmodels and scipy, about two seconds, for one interval).

Why errors stand apart: the gate protocol makes an error "no verdict", so an error on a destroyed
workspace is neither a catch nor a false accept; it is counted and shown, and left out of alpha.
"""

from __future__ import annotations

import math

from loopproof.engine.audit.judge import ACCEPT, ERROR, NOT_RUN, REJECT, GateReply
from loopproof.engine.audit.mutants import Mutant

DIGITS = 4
Z95 = 1.9599639845400545  # the normal quantile at 0.975 (scipy.stats.norm.isf(0.025))


def wilson_score(count: int, n: int) -> tuple[float, float]:
    """The Wilson score interval at 95% for count/n (n > 0), clipped to [0, 1], unrounded:
    statsmodels' `proportion_confint(count, n, method="wilson")` float for float (the same
    operations in the same order; experiments/stats.py's `wilson` is this one too)."""
    q, z2 = count / n, Z95 * Z95
    denom = 1 + z2 / n
    center = (q + z2 / (2 * n)) / denom
    half = Z95 * math.sqrt(q * (1 - q) / n + z2 / (4 * n**2)) / denom
    return max(0.0, center - half), min(1.0, center + half)


def wilson_upper(false_accepts: int, judged: int) -> float | None:
    """The Wilson 95% upper bound on the false-accept rate; None when nothing was judged."""
    if judged == 0:
        return None
    _, upper = wilson_score(false_accepts, judged)
    return round(float(upper), DIGITS)


def is_destroying(mutant: Mutant, oracle: GateReply | None) -> bool | None:
    """True when wrong by construction or the oracle rejects it; None when nobody can say."""
    if mutant.by_construction:
        return True
    if oracle is None or oracle.outcome in (ERROR, NOT_RUN):
        return None
    return oracle.outcome == REJECT


def tier_stats(corpus: list[Mutant], oracle: dict[str, GateReply], gate: dict[str, GateReply]) -> dict:
    """{"mutants","destroying","false_accepts","alpha","alpha_upper95"} plus the error count,
    the equivalent and undetermined counts (mutants the oracle found harmless, and ones nobody
    could judge: neither is destroying), the labels of the false accepts (what a repair must
    address) and, when the audit's time ran out, how many mutants were not judged (`not_run`:
    counted nowhere else)."""
    destroying = undetermined = equivalent = errors = not_run = 0
    false_accepts: list[str] = []
    for m in corpus:
        said = oracle.get(m.key)
        if said is not None and said.outcome == NOT_RUN:
            not_run += 1
            continue
        verdict = is_destroying(m, said)
        if verdict is None:
            undetermined += 1
            continue
        if not verdict:  # the oracle found it harmless: equivalent (as far as it can tell)
            equivalent += 1
            continue
        outcome = gate[m.key].outcome
        if outcome == NOT_RUN:
            not_run += 1
            continue
        destroying += 1
        if outcome == ERROR:
            errors += 1
        elif outcome == ACCEPT:
            false_accepts.append(m.label)
    judged = destroying - errors
    return {"mutants": len(corpus), "destroying": destroying, "errors": errors,
            "undetermined": undetermined, "equivalent": equivalent, "not_run": not_run,
            "false_accepts": len(false_accepts),
            "alpha": round(len(false_accepts) / judged, DIGITS) if judged else None,
            "alpha_upper95": wilson_upper(len(false_accepts), judged),
            "false_accept_labels": sorted(false_accepts)}


def vacuity(absence: list[Mutant], probes: list[Mutant], gate: dict[str, GateReply]) -> list[str]:
    """The absence operators (and no-claim destruction probes) whose workspace the gate accepted.
    Any entry makes the gate vacuous: it was satisfied by the thing it checks not being there."""
    shown = {m.operator for m in absence if gate[m.key].outcome == ACCEPT}
    shown |= {f"destroyed:{m.label.split(':')[0]}" for m in probes
              if m.role == "base" and gate[m.key].outcome == ACCEPT}
    return sorted(shown)


def self_attestation(probes: list[Mutant], gate: dict[str, GateReply]) -> list[str]:
    """The claims (a file, file:field, or a marker comment) the gate's verdict rests on.

    With the artifact destroyed, a claim is trusted when some form of it (kept, negated, one
    field negated) makes the gate accept, and the forms do not all get the same verdict as no
    claim at all: the claim's content, not the artifact, decides. A field is named when its form's
    verdict differs from the claim kept as written. A gate that needs a claim *and* a sound check
    of the artifact rejects every probe and is not self-attesting."""
    ok = {m.label: gate[m.key].outcome == ACCEPT for m in probes}
    trusted: set[str] = set()
    by_group: dict[tuple[str, str], list[Mutant]] = {}
    for m in probes:
        if m.role in ("claim", "negated", "field"):
            by_group.setdefault((m.label.split(":")[0], m.claim), []).append(m)
    for (how, claim), forms in sorted(by_group.items()):
        base = ok[f"{how}:no-claims"]
        verdicts = {ok[m.label] for m in forms} | {base}
        if not any(ok[m.label] for m in forms) or len(verdicts) == 1:
            continue
        kept = next(ok[m.label] for m in forms if m.role == "claim")
        fields = sorted(f"{claim}:{m.label.rsplit(':', 1)[1]}" for m in forms
                        if m.role == "field" and ok[m.label] != kept)
        trusted.update(fields or [claim])
    for m in probes:
        if m.role == "marker" and ok[m.label] and not ok["emptied:no-claims"]:
            trusted.add(m.claim)
    # Name the narrowest claim: a field over its file, a single file over a group of files.
    named_files = {t.split(":")[0] for t in trusted if "'" not in t}
    return sorted(t for t in trusted
                  if not (":" not in t and "+" not in t and any(
                      x.startswith(t + ":") for x in trusted))
                  and not ("+" in t and named_files & set(t.split("+"))))


def wilson_interval(false_accepts: int, judged: int) -> list[float] | None:
    """The Wilson 95% interval [low, high] on the false-accept rate; None when nothing judged."""
    if judged == 0:
        return None
    low, high = wilson_score(false_accepts, judged)
    return [round(float(low), DIGITS), round(float(high), DIGITS)]
