"""A run's ledger as a timeline: per attempt what it reserved and settled against c_v and B, how
its worker ended, what its gate said, and the run's repairs, refusals, stops and outcome.

Why a fold of the verified records through `Replayed`: the numbers `loopproof show` prints must
be the ones the engine acted on, so the spend after each record is the model state's, not a
second sum kept here. Only the verified prefix is read (a broken ledger is shown up to its
break); nothing is written.

The attempt records this reads are described in docs/engine.md ("Ledger records the engine
writes"); a record type this module does not know is kept as a run event with its type, so a
newer ledger is shown, not refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopproof.engine.record.ledger import Verification, holds_no_record, verify
from loopproof.engine.record.replay import RUN_FORMAT, Replayed, replay, run_bounds
from loopproof.engine.system.errors import BadInput, LedgerCorrupt

# Run events shown on the timeline between attempts (type -> how it reads).
RUN_EVENTS = ("repair", "fail", "finish", "refuse", "stopped", "resumed", "pin_changed",
              "release_unmet", "resources", "stage_done", "evolution_rejected",
              "cancel_requested", "cancel", "cancel_refused")


@dataclass
class Attempt:
    """One attempt, from its `begin` to the record that ended it (or still open)."""

    node: str
    activation: int
    attempt: int
    begin_seq: int
    spend_ceiling: float
    end_seq: int | None = None
    outcome: str = "open"  # accept | reject | error | overrun | abandoned | open
    reserved: float = 0.0  # every reservation of the worker, added up
    gate_reserved: float = 0.0  # the gate run's reservation (what = "evaluation")
    worker_spend: float = 0.0  # settled for the worker (wall clock, its own charges)
    gate_spend: float = 0.0  # settled for the gate run (what = "evaluation")
    settled_before: float = 0.0  # the run's settled spend when the attempt began
    settled_after: float | None = None
    worker: dict[str, Any] = field(default_factory=dict)
    gate: dict[str, Any] | None = None
    killed: str | None = None  # timeout | ceiling | limit | refused (the kill of the worker's command)
    limit: str | None = None  # the resource limit it was killed at ("memory limit 256 MiB")
    stopped: str | None = None  # why a refused model call ended the worker (`worker_stopped`)
    overrun: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # facts recorded inside the attempt
    other: dict[str, int] = field(default_factory=dict)  # other record types inside it, counted
    beside: list[str] = field(default_factory=list)  # nodes with an attempt in flight at its begin

    @property
    def spend(self) -> float:
        return round(self.worker_spend + self.gate_spend, 6)

    def as_json(self) -> dict[str, Any]:
        return {"node": self.node, "activation": self.activation, "attempt": self.attempt,
                "begin_seq": self.begin_seq, "end_seq": self.end_seq, "outcome": self.outcome,
                "reserved": round(self.reserved, 6),
                "gate_reserved": round(self.gate_reserved, 6), "spend": self.spend,
                "worker_spend": round(self.worker_spend, 6),
                "gate_spend": round(self.gate_spend, 6),
                "spend_ceiling": self.spend_ceiling, "settled_before": self.settled_before,
                "settled_after": self.settled_after, "worker": self.worker,
                "worker_end": worker_end(self), "gate": self.gate, "killed": self.killed,
                "limit": self.limit, "stopped": self.stopped, "overrun": self.overrun, "notes": self.notes,
                "other": self.other, **({"beside": self.beside} if self.beside else {})}


def worker_end(a: Attempt) -> str:
    """How the worker's part of the attempt ended, in a few words."""
    w = a.worker
    if a.overrun is not None and a.overrun.get("what") != "evaluation":
        return f"stopped by the meter: overrun ({a.overrun['why']})"
    if a.killed == "timeout":
        return f"killed: timeout after {num(w.get('seconds'))} s (timeout_s)"
    if a.stopped is not None or a.killed == "refused":
        return (f"stopped: {a.stopped or 'a model call was refused'} (on_refusal = "
                f"\"end-attempt\")" + (f", after {num(w['seconds'])} s" if "seconds" in w
                                         else ""))
    if a.killed == "ceiling":
        return (f"killed: spend ceiling reached after {num(w.get('seconds'))} s "
                f"(c_v - eval_reserve)")
    if a.killed == "limit":
        return f"killed: {a.limit or 'a resource limit'} after {num(w.get('seconds'))} s"
    if not w:
        return "no claim recorded"
    if w.get("started") is False:
        return f"did not start: {w.get('error', '')}"
    if "returncode" in w:
        return f"exit {w['returncode']}" + (f" in {num(w['seconds'])} s" if "seconds" in w
                                            else "")
    if "error" in w:
        return f"raised {w['error']}"
    if "overrun" in w:
        return f"stopped by the meter: {w['overrun']}"
    if "returned" in w:
        return "returned"
    return "ended"


def num(v: Any) -> str:
    """A spend, a price or a time in words: to the thousandth, no exponent."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        return str(v)
    r = round(float(v), 3)
    return str(int(r)) if r == int(r) else str(r)


@dataclass
class Timeline:
    """What `loopproof show` prints: the ledger's status, the graph and its bounds, every attempt
    in ledger order, the run events between them, the spend curve and the outcome."""

    ledger: str
    check: Verification
    first: dict[str, Any]
    replayed: Replayed
    attempts: list[Attempt]
    events: list[dict[str, Any]]
    curve: list[tuple[int, float, float]]  # (seq, settled, settled + reserved) where they change

    @property
    def open_attempt(self) -> Attempt | None:
        return next((a for a in reversed(self.attempts) if a.outcome == "open"), None)

    @property
    def open_attempts(self) -> list[Attempt]:
        """Every attempt with no recorded end (several when the engine stopped with several
        in flight), in the order they began."""
        return [a for a in self.attempts if a.outcome == "open"]

    def unfinished(self) -> str | None:
        """Why the run has not ended, in words (None when it has)."""
        return unfinished(self.replayed, self.open_attempts)

    def as_json(self) -> dict[str, Any]:
        r, g = self.replayed, self.replayed.graph
        bounds = self.first.get("bounds") or {}
        return {
            "ledger": self.ledger, "status": self.check.status, "records": self.check.records,
            "head": self.check.head, "error": self.check.error,
            "graph": {"repair_budget": g.repair_budget, "spend_budget": g.spend_budget,
                      "nodes": [{"name": n.name, "attempts": n.attempts,
                                 "spend_ceiling": n.spend_ceiling, "needs": list(n.needs),
                                 "repairs": list(n.repairs)} for n in g.nodes]},
            "bounds": {**run_bounds(self.first), "B": g.spend_budget,
                       "fits": bounds.get("fits")},
            "outcome": r.state.outcome.value, "unfinished": self.unfinished(),
            "summary": r.summary(),
            "attempts": [a.as_json() for a in self.attempts], "events": self.events,
            "curve": [{"seq": s, "settled": round(x, 6), "committed": round(y, 6)}
                      for s, x, y in self.curve],
        }


def unfinished(r: Replayed, open_attempts: list[Attempt] | None = None) -> str | None:
    """None for a run that ended; else why not: an attempt open (the engine stopped inside it:
    a crash or a kill; several, when it stopped with several in flight), a stop, a changed pin,
    an unmet release condition, or between attempts."""
    s, g = r.state, r.graph
    if s.ended:
        return None
    flying = s.in_flight(g)
    if flying:
        since = {a.node: a.begin_seq for a in open_attempts or []}
        opened = "; ".join(
            f"{node}, activation {s.activation_of(g, node)}, attempt {s.attempts_of(g, node)}"
            + (f" since record {since[node]}" if node in since else "")
            + f"; {num(s.reserved_of(g, node))} reserved" for node in flying)
        if len(flying) == 1:
            return (f"unfinished: attempt open ({opened}): the engine stopped inside it; "
                    f"`loopproof resume` charges the reservation and runs it again")
        return (f"unfinished: {len(flying)} attempts open ({opened}): the engine stopped inside "
                f"them; `loopproof resume` charges each its reservation and runs each again")
    if r.pin_changed is not None:
        return (f"unfinished: stopped, a pinned file changed ({r.pin_changed.get('file')}); "
                f"restore it, then `loopproof resume`")
    if r.release_unmet is not None:
        return (f"unfinished: every node DONE but the policy's release conditions do not hold "
                f"({', '.join(r.release_unmet.get('unmet', []))})")
    if r.stopped is not None:
        return f"unfinished: stopped ({r.stopped.get('reason')}); `loopproof resume` continues"
    return ("unfinished: no attempt open (the engine stopped between attempts); "
            "`loopproof resume` continues")


def read_records(path: Path) -> tuple[Verification, list[dict[str, Any]]]:
    """The chain check and the verified prefix's records (a broken ledger: up to the break).
    Reads only; a torn tail is left where it is."""
    if path.is_dir():
        raise BadInput(str(path), "LEDGER", "is a directory, not a ledger file",
                       "give the path of the ledger file itself")
    if not path.is_file():
        raise BadInput(str(path), "LEDGER", "no such file", "give the ledger `loopproof run` wrote")
    check = verify(path)
    if check.records == 0 and check.status != "broken":
        raise holds_no_record(path, check.error)
    if check.records == 0:
        raise LedgerCorrupt(check.error or f"{path}: no verified record")
    records: list[dict[str, Any]] = []
    with open(path, "rb") as fh:
        for _ in range(check.records):
            records.append(json.loads(fh.readline()))
    return check, records


def build(path: Path) -> Timeline:
    """Read, verify and fold a run ledger into its timeline. A ledger that is not a run's (its
    record 0 is not `loopproof-run/1`) is bad input."""
    check, records = read_records(path)
    if records[0].get("type") != "run" or records[0].get("format") != RUN_FORMAT:
        raise BadInput(str(path), "record 0", "is not the start of a loopproof run",
                       "give a ledger written by `loopproof run` (a guard ledger is read with "
                       "`loopproof receipt`)")
    r = replay(records[:1], path)
    attempts: list[Attempt] = []
    events: list[dict[str, Any]] = []
    curve = [(0, 0.0, 0.0)]
    flying: dict[str, Attempt] = {}  # node -> its open attempt (several: max_parallel > 1)
    for rec in records[1:]:
        before = r.state
        r.apply(rec)  # the model's numbers; a record it refuses is LedgerCorrupt (exit 5)
        s, t = r.state, rec["type"]
        seq = rec["seq"]
        if (s.settled, s.settled + s.reserved) != curve[-1][1:]:
            curve.append((seq, s.settled, s.settled + s.reserved))
        if t == "begin":
            flying[rec["node"]] = Attempt(rec["node"], rec.get("activation", 0),
                                          rec.get("attempt", 0), seq,
                                          r.graph.node(rec["node"]).spend_ceiling,
                                          settled_before=round(before.settled, 6),
                                          beside=[n for n in flying if n != rec["node"]])
            attempts.append(flying[rec["node"]])
            continue
        current = _owner(flying, rec)
        if current is not None:
            _fold(current, rec, before, r)
            if current.outcome != "open":
                current.end_seq, current.settled_after = seq, round(s.settled, 6)
                del flying[current.node]
            continue
        events.append(_event(rec))
    return Timeline(str(path), check, records[0], r, attempts, events, curve)


def _owner(flying: dict[str, Attempt], rec: dict[str, Any]) -> Attempt | None:
    """The open attempt a record belongs to: the one of the node it names (records of several
    attempts in flight interleave, each naming its node), or, for a record that names no node,
    the only open attempt. A run event is nobody's; a pinned file found changed before the
    verdict is the attempt's."""
    if rec["type"] in RUN_EVENTS and rec["type"] != "pin_changed":
        return None
    node = rec.get("node")
    if node is None:
        return next(iter(flying.values())) if len(flying) == 1 else None
    return flying.get(node) if isinstance(node, str) else None


def _fold(a: Attempt, rec: dict[str, Any], before: Any, r: Replayed) -> None:
    t = rec["type"]
    g = r.graph
    if t == "reserve":
        if rec.get("what") == "evaluation":
            a.gate_reserved += float(rec.get("amount", 0.0))
        else:
            a.reserved += float(rec.get("amount", 0.0))
    elif t == "settle":
        amount = float(rec.get("amount", 0.0))
        if rec.get("what") == "evaluation":
            a.gate_spend += amount
        else:
            a.worker_spend += amount
        if rec.get("killed"):
            a.killed = rec["killed"]
            if isinstance(rec.get("limit"), str):
                a.limit = rec["limit"]
        if "claimed" in rec:
            a.notes.append(f"claimed {rec['claimed']!r} against a reservation of "
                           f"{num(rec.get('reserved'))}: charged the reservation")
    elif t == "overrun":
        amount = float(rec.get("amount", 0.0))
        c_v = g.node(a.node).spend_ceiling
        spent = before.spent_of(g, a.node)  # this attempt's, beside any others in flight
        over_c = spent + amount > c_v + 1e-9
        bound = (f"c_v = {num(c_v)}" if over_c else f"B = {num(g.spend_budget)}")
        what = rec.get("what", "")
        if what == "evaluation":  # asked for the gate's full price: nothing was left for it
            why = (f"nothing left of {bound} for the gate run after the worker spent "
                   f"{num(spent)} (eval_reserve holds part of c_v back for it)")
        else:
            why = (f"reserving {num(amount)} for {what or 'the worker'} would exceed {bound} "
                   f"(attempt spend {num(spent)}, run settled "
                   f"{num(before.settled)})")
        a.overrun = {"what": what, "amount": amount, "bound": "c_v" if over_c else "B",
                     "why": why}
        a.outcome = "overrun"
    elif t in ("claim", "worker_output"):  # worker_output: the claims of an overrun worker
        a.worker = dict(rec.get("claims") or {})
    elif t == "verdict":
        a.gate = {k: rec.get(k) for k in ("verdict", "detail", "seconds", "error", "exit",
                                          "raised", "changed", "output", "snapshot",
                                          "accepted_tree") if k in rec}
        a.outcome = rec.get("verdict") or ("accept" if rec.get("passed") else "reject")
    elif t == "abandon":
        a.outcome = "abandoned"
        cause = ("its Dask worker was lost" if "Dask worker" in str(rec.get("why", ""))
                 else "a crash or a stop inside the attempt")
        a.notes.append(f"outcome unknown ({cause}): charged its "
                       f"open reservation {num(rec.get('charged'))} and given back")
    elif t == "worker_ceiling":
        a.notes.append(f"the worker asked for {num(rec.get('amount'))} past c_v - eval_reserve "
                       f"= {num(rec.get('worker_ceiling'))}: refused, the gate still ran")
    elif t == "worker_stopped":  # a refused model call ended the worker; the gate still ran
        a.stopped = (f"model call refused: the attempt may spend {num(rec.get('left'))} more, "
                     f"the call may cost up to {num(rec.get('cost'))}")
    elif t == "overspend_claimed":
        pass  # the settle record carries the claim (noted above)
    elif t == "pin_changed":
        a.notes.append(f"pin change: {rec.get('file')} ({rec.get('what') or 'gate file'})")
    else:  # e.g. a model call of the attempt (llm_call): counted
        a.other[t] = a.other.get(t, 0) + 1


def _event(rec: dict[str, Any]) -> dict[str, Any]:
    """A run event as {seq, type, text}, the text in words."""
    t = rec["type"]
    words: dict[str, Callable[[], str]] = {
        "repair": lambda: (f"repair: {rec.get('node')} exhausted its attempts; repairs "
                           f"{rec.get('target')}, rerun {', '.join(rec.get('rerun', []))}; "
                           f"{rec.get('repairs_left')} repair(s) of K left"),
        "fail": lambda: f"fail: {rec.get('node')} exhausted its attempts and {rec.get('why')}",
        "finish": lambda: f"finish: every node DONE, settled {num(rec.get('settled'))}",
        "refuse": lambda: (f"refuse: {rec.get('node')} not begun: settled "
                           f"{num(rec.get('settled'))} + c_v {num(rec.get('ceiling'))} > B "
                           f"{num(rec.get('budget'))}"),
        "stopped": lambda: f"stopped: {rec.get('reason')}",
        "resumed": lambda: (f"resumed (resume {rec.get('resume')}, orphans killed "
                            f"{rec.get('orphans_killed', 0)}, processes reaped from the run's "
                            f"cgroups {rec.get('reaped', 0)})"),
        "pin_changed": lambda: (f"pin changed: {rec.get('file')} "
                                f"({rec.get('what') or 'gate file'}); the run stopped"),
        "release_unmet": lambda: f"release unmet: {', '.join(rec.get('unmet', []))}",
        "resources": lambda: (f"price {num(rec.get('old_price'))} -> "
                              f"{num(rec.get('new_price'))} spend units per second"),
        "stage_done": lambda: f"planner round {rec.get('round')}: applied {rec.get('applied')}",
        "evolution_rejected": lambda: f"planner request refused: {rec.get('reason')}",
        "cancel_requested": lambda: (f"cancel of {rec.get('node')} requested (activation "
                                     f"{rec.get('activation')}): {rec.get('reason') or '-'}"),
        "cancel": lambda: (f"cancel: {rec.get('node')}'s activation {rec.get('activation')} "
                           f"ended without a verdict after {rec.get('attempts')} attempt(s)"),
        "cancel_refused": lambda: f"cancel of {rec.get('node')} refused: {rec.get('why')}",
    }
    text = words.get(t, lambda: str(t))()
    return {"seq": rec["seq"], "type": t, "node": rec.get("node"), "text": text}


def run_status(path: Path, check: Verification) -> dict[str, Any] | None:
    """For a run's ledger, how the run stands after its verified prefix: {"outcome",
    "unfinished"} (`loopproof verify` prints it; an open attempt is not visible in the chain).
    None for any other ledger (a guard ledger). A prefix the model refuses says so in "error"."""
    with open(path, "rb") as fh:
        first = json.loads(fh.readline() or b"{}") if check.records else {}
        if first.get("type") != "run" or first.get("format") != RUN_FORMAT:
            return None
        try:
            r = replay([first], path)
            for _ in range(check.records - 1):
                r.apply(json.loads(fh.readline()))
        except LedgerCorrupt as exc:
            return {"outcome": None, "unfinished": None, "error": str(exc)}
    return {"outcome": r.state.outcome.value, "unfinished": unfinished(r), "error": None}
