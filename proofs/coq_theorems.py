"""The `prover: coq` obligations: the theorems of proofs/coq/ for every finite DAG, and the
runs that refute their broken variants.

A theorem is "proved" when coqc accepts the development and `Print Assumptions` says it is
closed (proofs/coq.py); anything else (coqc missing, a build error, an assumption) is reported
"unknown" with the reason, which never meets an expectation. A broken variant (proofs/coq/
Broken.v: the model with one guard changed) is "refuted" when Coq proves, closed, that a concrete
run from Init breaks the property, and that run, replayed through the variant's extracted step
function, is the printed counterexample. The concurrent variants (proofs/coq/BrokenConcurrent.v)
are replayed through the extracted concurrent step the same way; the per-node repair budgets'
run, which never ends, is printed as a lasso (one turn of its loop, back where it started on
every field a guard reads).
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
    """A run of a broken variant, as proofs/coq/Broken.v (BrokenConcurrent.v) states it, in
    driver.ml's format."""

    theorem: str
    variant: str
    graph: str  # "N K B" and the nodes ("MP N K B" and the nodes for a concurrent case)
    names: tuple[str, ...]
    events: tuple[str, ...]
    note: str
    broken: Callable[[dict[str, Any], int], bool]  # the final state (and W) breaks the property
    case: str = "case"  # "pcase": the concurrent step
    loop_start: int | None = None  # a lasso: the last state repeats this one


def committed(state: dict[str, Any], ceilings: tuple[int, ...]) -> int:
    """settled + every open reservation + what every attempt in flight may still reserve
    (proofs/coq/Concurrent.v's `committed`), of a concurrent case's state."""
    return state["settled"] + sum(
        r + (c - x if status == "RUNNING" else 0)
        for status, r, x, c in zip(state["status"], state["res"], state["spt"], ceilings,
                                   strict=True))


def _repeats(first: dict[str, Any], last: dict[str, Any]) -> bool:
    """`last` equals `first` on every field a guard of the model reads (all but activations,
    passes, attempts_total: history)."""
    keys = ("status", "attempts", "repairs_used", "abandoned", "settled", "reserved",
            "attempt_spend", "outcome", "res", "spt", "rep")
    return all(first[k] == last[k] for k in keys)


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
    "check_then_reserve": Witness(
        "broken_check_then_reserve_overspends", "check_then_reserve", "2 2 0 1 1 1 0 0 1 1 0 0",
        ("a", "b"), ("begin 0", "begin 1", "reserve 1 0", "reserve 1 1"),
        "admission checks only settled + c_v <= B and each reservation trusts it (c_v only): "
        "a and b independent, c = 1 quantum each, B = 1 quantum, two in flight; both are "
        "admitted and reserve their whole c_v: settled + reserved = 2 quanta > B (the real model "
        "refuses Begin(b))",
        lambda s, w: s["settled"] + s["reserved"] > 1, "pcase"),
    "check_then_admit": Witness(
        "broken_check_then_admit_overcommits", "check_settled", "2 2 0 1 1 1 0 0 1 1 0 0",
        ("a", "b"), ("begin 0", "begin 1"),
        "admission checks only settled + c_v <= B, reservations still against B: a and b, "
        "c = 1 quantum each, B = 1 quantum; both are admitted, promising 2 quanta of ceiling "
        "against B (held > B), and (Coq proves it too) once a reserves its c_a, b cannot "
        "reserve its own: its outcome depends on the interleaving (the real model refuses "
        "Begin(b))",
        lambda s, w: committed(s, (1, 1)) > 1, "pcase"),
    "repair_in_flight": Witness(
        "broken_repair_in_flight_overcommits", "repair_in_flight",
        "2 3 1 1 1 1 0 0 1 1 1 0 0 1 0 1 0 1 0", ("r", "x", "y"),
        ("begin 0", "verdict 0 1", "begin 1", "cancel 2", "reserve 1 1", "repair 2 0",
         "begin 0"),
        "a Repair that does not wait for S_u's attempts in flight: r -> x, r -> y, y repairs r, "
        "K = 1, c_r = c_x = 1 quantum, c_y = 0, B = 1 quantum; x reserves its quantum, y is "
        "cancelled, Repair(y -> r) re-opens x while its attempt still holds that reservation, "
        "and Begin(r), counting only the attempts in flight, is admitted on the same quantum: "
        "settled + every open reservation + what r may reserve = 2 quanta > B (the real model "
        "refuses the Repair: it waits for x)",
        lambda s, w: (s["status"][1] == "PENDING" and s["res"][1] == 1
                      and committed(s, (1, 1, 0)) > 1), "pcase"),
    "per_node_repairs": Witness(
        "broken_per_node_repairs_runs_forever", "per_node_repairs", "1 2 1 - 1 1 0 0 1 1 1 0 1 0",
        ("a", "b"), ("begin 0", "verdict 0 1", "begin 1", "verdict 1 0", "repair 1 0"),
        "repair budgets per node (each node's own counter, afresh when a repair re-opens it): "
        "a -> b, b repairs a, K = 1; a passes, b fails, Repair(b -> a) re-opens both with fresh "
        "counters: back at Init on every field a guard reads, with no metered operation, claim "
        "or crash, so under G1's assumptions the run never ends and the measure of "
        "loopproof_terminates is where it started (Coq proves the run infinite)",
        lambda s, w: True, "pcase", loop_start=0),
}


def refuted(key: str) -> Callable[[], Trace]:
    """The check of a broken variant: the Coq-proved run, replayed through the extracted
    variant, as a Trace (or Unknown)."""
    def check() -> Trace:
        w = WITNESSES[key]
        _closed(w.theorem)
        text = (f"{w.case} {w.variant} {w.graph} {len(w.events)}\n" + "\n".join(w.events)
                + "\n")
        try:
            (out,) = coq.drive(text)
        except (coq.CoqUnavailable, OSError) as e:
            raise NotChecked(str(e)) from e
        states = out["states"]
        repeats = w.loop_start is None or _repeats(states[w.loop_start], states[-1])
        if not all(out["admitted"]) or not w.broken(states[-1], out["W"]) or not repeats:
            raise NotChecked(f"the extracted {w.variant} variant does not replay the run of "
                          f"{w.theorem}: {out}")
        steps = [Step(None if i == 0 else w.events[i - 1], _shown(st, w.names))
                 for i, st in enumerate(states)]
        return Trace("trace" if w.loop_start is None else "lasso",
                     f"{w.note} (Coq: {w.theorem}, closed)", steps, {"W": out["W"]},
                     loop_start=w.loop_start)
    check.__name__ = f"coq_{key}"
    return check


def _shown(state: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    nodes: dict[str, dict[str, Any]] = {
        n: {"status": state["status"][i], "activation": state["activation"][i],
            "attempts": state["attempts"][i]} for i, n in enumerate(names)}
    for key, shown in (("res", "reserved"), ("spt", "spent"), ("rep", "repairs_of")):
        for i, n in enumerate(names):  # a concurrent case: each node's account
            if key in state:
                nodes[n][shown] = state[key][i]
    return {"nodes": nodes, **{k: state[k] for k in ("repairs_used", "attempts_total",
                                                      "settled", "reserved", "attempt_spend",
                                                      "outcome")}}
