"""The `prover: coq` obligations: the theorems of proofs/coq/ for every finite DAG, and the
runs that refute their broken variants.

A theorem is "proved" when coqc accepts the development and `Print Assumptions` says it is
closed (proofs/coq.py); anything else (coqc missing, a build error, an assumption) is reported
"unknown" with the reason, which never meets an expectation. A broken variant (proofs/coq/
Broken.v: the model with one guard changed) is "refuted" when Coq proves, closed, that a concrete
run from Init breaks the property, and that run, replayed through the variant's extracted step
function, is the printed counterexample.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loopproof.proofs import coq
from loopproof.proofs.solver import Unknown
from loopproof.proofs.trace import Step, Trace


class NotChecked(Unknown):
    """coqc could not check the theorem (missing, a build error, an assumption): reported
    "unknown", like a Z3 timeout, so it never meets an expectation."""

    def __init__(self, reason: str) -> None:
        Exception.__init__(self, f"coq: {reason}")
        self.what, self.reason = "coq", reason


def _closed(theorem: str) -> None:
    try:
        built = coq.build()
    except coq.CoqUnavailable as e:
        raise NotChecked(str(e)) from e
    if not built.closed(theorem):
        raise NotChecked(f"Print Assumptions {theorem}: "
                      f"{built.assumptions.get(theorem, 'not printed')!r}; fix: prove it without "
                      "axioms")


def theorem(name: str) -> Callable[[], None]:
    """The check of a Coq theorem: None (proved) or Unknown."""
    def check() -> None:
        _closed(name)
        return None
    check.__name__ = f"coq_{name}"
    return check


@dataclass(frozen=True)
class Witness:
    """A run of a broken variant, as proofs/coq/Broken.v states it, in driver.ml's format."""

    theorem: str
    variant: str
    graph: str  # "N K B" and the nodes
    names: tuple[str, ...]
    events: tuple[str, ...]
    note: str
    broken: Callable[[dict[str, Any], int], bool]  # the final state (and W) breaks the property


WITNESSES = {
    "cancel_done": Witness(
        "broken_cancel_done_exceeds_W", "cancel_done", "2 1 - 1 4 0 1 0 1 4 1 0 0", ("a", "b"),
        ("begin 0", "verdict 0 1", "begin 1", "verdict 1 1", "cancel 0", "repair 0 0", "begin 0",
         "verdict 0 1", "begin 1"),
        "Cancel allowed on a DONE node: a->b, a repairs itself, K=1; the repair re-runs b, which "
        "had already run: 4 attempts where W = 3",
        lambda s, w: s["attempts_total"] > w),
    "begin_ignores_needs": Witness(
        "broken_begin_ignores_needs_starts_early", "begin_ignores_needs",
        "2 0 - 1 4 0 0 1 4 1 0 0", ("a", "b"), ("begin 1",),
        "Begin without the needs check: b starts while its ancestor a is PENDING",
        lambda s, w: s["status"][1] == "RUNNING" and s["status"][0] != "DONE"),
    "settle_tolerant": Witness(
        "broken_settle_tolerant_overspends", "settle_tolerant", "1 0 1 1 1 0 0", ("a",),
        ("begin 0", "settle 1 -", "settle 1 -"),
        "Settle may charge one quantum more than it releases: c_a = B = 1 quantum, two Settles "
        "with nothing reserved settle 2 quanta",
        lambda s, w: s["settled"] + s["reserved"] > 1),
    "ceiling_unchecked": Witness(
        "broken_ceiling_unchecked_exceeds_c", "ceiling_unchecked", "1 0 10 1 1 0 0", ("a",),
        ("begin 0", "reserve 2"),
        "a reservation checked against B only: c_a = 1 quantum, B = 10; Reserve(2) holds "
        "2 quanta in a's attempt",
        lambda s, w: s["status"][0] == "RUNNING" and s["attempt_spend"] > 1),
}


def refuted(key: str) -> Callable[[], Trace]:
    """The check of a broken variant: the Coq-proved run, replayed through the extracted
    variant, as a Trace (or Unknown)."""
    def check() -> Trace:
        w = WITNESSES[key]
        _closed(w.theorem)
        text = f"case {w.variant} {w.graph} {len(w.events)}\n" + "\n".join(w.events) + "\n"
        try:
            (out,) = coq.drive(text)
        except (coq.CoqUnavailable, OSError) as e:
            raise NotChecked(str(e)) from e
        if not all(out["admitted"]) or not w.broken(out["states"][-1], out["W"]):
            raise NotChecked(f"the extracted {w.variant} variant does not replay the run of "
                          f"{w.theorem}: {out}")
        steps = [Step(None if i == 0 else w.events[i - 1], _shown(st, w.names))
                 for i, st in enumerate(out["states"])]
        return Trace("trace", f"{w.note} (Coq: {w.theorem}, closed)", steps, {"W": out["W"]})
    check.__name__ = f"coq_{key}"
    return check


def _shown(state: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    nodes = {n: {"status": state["status"][i], "activation": state["activation"][i],
                 "attempts": state["attempts"][i]} for i, n in enumerate(names)}
    return {"nodes": nodes, **{k: state[k] for k in ("repairs_used", "attempts_total",
                                                      "settled", "reserved", "attempt_spend",
                                                      "outcome")}}
