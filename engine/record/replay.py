"""state = replay(ledger): the run's state is rebuilt from the verified ledger and nothing else.

Why: after a crash or a stop the engine must not trust anything it held in memory. Every record
read is first checked against its declared type (engine/record/record_types.py: a record no run
writes is RecordInvalid, a corrupt ledger (exit 5), naming the file, the line and the field). Every model
event the engine commits is one ledger record whose `type` is the event's name in lower case
(`begin`, `reserve`, `settle`, `overrun`, `claim`, `verdict`, `abandon`, `cancel`, `repair`,
`fail`, `finish`, `refuse`) and whose fields carry the event's arguments. Replay turns those
records back into events and runs them through `model.step`; a record the model refuses means the
ledger's content is impossible, and replay fails closed with `LedgerCorrupt`. Other record types
(`run`, `resumed`, `stopped`, `pin_changed`, `worker_output`, `worker_ceiling`,
`cancel_requested`, `cancel_refused`) are facts for the reader and the report; a
`worker_stopped` (a refused model call ended the worker) is checked against the state: it must
name the attempt in flight and a refusal its numbers allow (an operator's
`cancel_requested` is pending until a `cancel` or `cancel_refused` names it:
engine/run/operator.py); `resources` (a new price, from `resume --price`) also sets the price at
which later attempts are metered, so it is checked: its old price must be the current one.

Replay is linear in the ledger and holds only what the report needs (per-node counts, verdicts,
the last accepted tree), not the records: `open_replayed` folds each record as the ledger's
streaming verification reads it, so resuming a long run never holds its records in memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from loopproof.engine.record.ledger import Ledger
from loopproof.engine.record.record_types import RUN_FORMAT, RUN_RECORDS
from loopproof.engine.record.registry import Registry
from loopproof.engine.system.errors import LedgerCorrupt
from loopproof.model import Disabled, GraphError, LoopGraph, NodeSpec, RunState, initial_state, step
from loopproof.model.transitions import EVENT_NAMES, EVENT_OF_NAME, Event

__all__ = ["RUN_FORMAT", "Replayed", "event_record", "open_replayed", "replay"]
# record type -> model event class, and back: both from the registry's table, which names each
# event record's model event by its declared name (model.transitions.EVENT_NAMES)
EVENTS: dict[str, type[Event]] = {t.name: EVENT_OF_NAME[t.event] for t in RUN_RECORDS
                           if t.event is not None}
RECORD_OF_EVENT: dict[str, str] = {t.event: t.name for t in RUN_RECORDS if t.event is not None}
_FIELD_TYPES = {"node": str, "target": str, "passed": bool, "amount": float, "of": float}


def event_record(event: Event, **facts: Any) -> dict[str, Any]:
    """The ledger record of a model event: its name as `type`, its arguments, and `facts`."""
    args = dataclasses.asdict(event)  # type: ignore[call-overload]  # every event class is a dataclass, the base Event is not
    if args.get("node", "") is None:  # a spend event left to mean "the only attempt in flight"
        del args["node"]  # (its node, if any, comes as a fact: a serial record's bytes)
    clash = set(args) & set(facts)
    if clash:
        raise ValueError(f"facts {sorted(clash)} would overwrite the event's arguments")
    return {"type": RECORD_OF_EVENT[EVENT_NAMES[type(event)]], **args, **facts}


_FIELDS: dict[type, tuple[Any, ...]] = {}


def _fields(cls: type) -> tuple[Any, ...]:
    """`dataclasses.fields(cls)`, looked up once per event class (replay calls it per record)."""
    got = _FIELDS.get(cls)
    if got is None:
        got = _FIELDS[cls] = dataclasses.fields(cls)
    return got


def event_of(rec: dict[str, Any]) -> Event | None:
    """The model event a record stands for, or None for a fact record. Raises LedgerCorrupt
    when an event record's arguments are missing or of the wrong type."""
    cls = EVENTS.get(rec.get("type", ""))
    if cls is None:
        return None
    args = {}
    for f in _fields(cls):
        v: Any = rec.get(f.name)
        if v is None and f.default is None:  # an optional argument (a Settle's `of`)
            continue
        want = _FIELD_TYPES.get(f.name, object)
        ok = (isinstance(v, int | float) and not isinstance(v, bool)) if want is float \
            else isinstance(v, want)
        if not ok:
            raise LedgerCorrupt(f"record seq {rec.get('seq')}: {rec['type']} record has "
                                f"field {f.name!r} = {v!r}; fix: restore the ledger from a "
                                f"trusted copy")
        args[f.name] = float(v) if want is float else v
    return cls(**args)


def graph_record(graph: LoopGraph) -> dict[str, Any]:
    """The model graph as plain data, for the first ledger record. `max_parallel` is written
    only when it is not 1, so a serial run's record 0 is the bytes it was before the limit
    existed (and a ledger without it replays as serial)."""
    out: dict[str, Any] = {
        "repair_budget": graph.repair_budget, "spend_budget": graph.spend_budget,
        "nodes": [{"name": n.name, "attempts": n.attempts, "spend_ceiling": n.spend_ceiling,
                   "needs": list(n.needs), "repairs": list(n.repairs)} for n in graph.nodes]}
    if graph.max_parallel != 1:
        out["max_parallel"] = graph.max_parallel
    return out


def graph_from_record(d: Any) -> LoopGraph:
    try:
        nodes = [NodeSpec(name=n["name"], attempts=n["attempts"],
                          spend_ceiling=n["spend_ceiling"], needs=tuple(n["needs"]),
                          repairs=tuple(n["repairs"])) for n in d["nodes"]]
        return LoopGraph.build(nodes, repair_budget=d["repair_budget"],
                               spend_budget=d["spend_budget"],
                               max_parallel=d.get("max_parallel", 1))
    except (KeyError, TypeError, GraphError) as exc:
        raise LedgerCorrupt(f"record 0: the stored graph is not valid ({exc}); fix: restore "
                            f"the ledger from a trusted copy") from exc


@dataclass
class Replayed:
    """What the ledger says: the model state plus the facts a report needs."""

    graph: LoopGraph
    state: RunState
    first: dict[str, Any]
    records: int = 0
    head: str = ""
    resumes: int = 0
    outcome_unknown: list[dict[str, Any]] = field(default_factory=list)
    stopped: dict[str, Any] | None = None
    release_unmet: dict[str, Any] | None = None  # the last `release_unmet` since a resume
    pin_changed: dict[str, Any] | None = None
    verdicts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # node -> its last accepting verdict (activation, attempt, accepted_tree): the tree its
    # successors receive (engine/run/runner.py `hand_off`)
    accepted: dict[str, dict[str, Any]] = field(default_factory=dict)
    accepts: int = 0  # accepting verdicts: round boundaries for a `[planner]`
    stage_done: list[dict[str, Any]] = field(default_factory=list)  # committed planner rounds
    repairs: list[dict[str, Any]] = field(default_factory=list)
    overruns: int = 0
    begins: dict[str, int] = field(default_factory=dict)  # node -> Begin records, all activations
    cancel_requests: list[dict[str, Any]] = field(default_factory=list)  # not yet honoured
    price: float = 1.0  # spend units per wall-clock second now (record 0, then `resources`)
    prices: list[dict[str, Any]] = field(default_factory=list)
    source: str = "the ledger"  # the file read, for a record that is not one a run writes
    registry: Registry = RUN_RECORDS  # the record types a reader accepts (a study may extend it)

    def apply(self, rec: dict[str, Any]) -> None:
        """Fold one more record read back: it must be a record type of the registry with its
        declared fields (engine/record/record_types.py), else RecordInvalid (exit 5)."""
        self.registry.check_read(rec, self.source)
        self.apply_written(rec)

    def apply_written(self, rec: dict[str, Any]) -> None:
        """Fold in a record this process just appended (checked before it was written)."""
        ev = event_of(rec)
        if ev is not None:
            try:
                self.state = step(self.graph, self.state, ev)
            except Disabled as exc:
                raise LedgerCorrupt(f"record seq {rec.get('seq')}: the model refuses "
                                    f"{rec['type']}: {exc}; fix: restore the ledger from a "
                                    f"trusted copy") from exc
        t = rec["type"]
        if t == "begin":
            self.begins[rec["node"]] = self.begins.get(rec["node"], 0) + 1
        if t == "verdict":
            self.verdicts.setdefault(rec["node"], []).append(
                {k: rec.get(k) for k in ("activation", "attempt", "verdict", "passed", "error")})
            if rec.get("passed") is True:
                self.accepts += 1
                self.accepted[rec["node"]] = {k: rec.get(k) for k in
                                              ("activation", "attempt", "accepted_tree")}
        elif t == "abandon":
            self.outcome_unknown.append(rec)
        elif t == "cancel_requested":
            self.cancel_requests.append(rec)
        elif t in ("cancel", "cancel_refused"):
            self.cancel_requests = [r for r in self.cancel_requests
                                    if r.get("seq") != rec.get("request")]
        elif t == "repair":
            self.repairs.append({"node": rec["node"], "target": rec["target"]})
        elif t == "overrun":
            self.overruns += 1
        elif t == "resumed":
            self.resumes += 1
            self.stopped = self.pin_changed = self.release_unmet = None
        elif t == "stopped":
            self.stopped = rec
        elif t == "stage_done":
            self.stage_done.append(rec)
        elif t == "release_unmet":
            self.release_unmet = rec
        elif t == "pin_changed":
            self.pin_changed = rec
        elif t == "worker_stopped":
            self._check_stopped(rec)
        elif t == "resources":
            old, new = rec.get("old_price"), rec.get("new_price")
            if not (_is_price(new) and _is_price(old) and abs(float(old) - self.price) <= 1e-12):
                raise LedgerCorrupt(f"record seq {rec.get('seq')}: resources record changes the "
                                    f"price {old!r} -> {new!r}, but the price was {self.price!r}; "
                                    f"fix: restore the ledger from a trusted copy")
            self.price = float(new)
            self.prices.append({"old_price": float(old), "new_price": float(new)})
        self.records += 1
        self.head = rec.get("hash", self.head)

    def _check_stopped(self, rec: dict[str, Any]) -> None:
        """A `worker_stopped` record (the proxy stopped the worker at a refused model call,
        engine/run/proxy/server.py) must name the attempt in flight, and its numbers must be
        a refusal the model state allows: `left` (what the attempt could still reserve) within
        what c_v and B leave, and the call's bound `cost` above it. Anything else is a record
        no run writes: LedgerCorrupt."""
        s, g = self.state, self.graph
        node, left, cost = rec.get("node"), rec.get("left"), rec.get("cost")
        why = None
        flying = s.in_flight(g)
        if not isinstance(node, str) or node not in flying:
            why = (f"names node {node!r}, but the attempt in flight is {s.running(g)!r}"
                   if len(flying) <= 1 else
                   f"names node {node!r}, but the attempts in flight are {list(flying)!r}")
        elif not (_is_amount(left) and _is_amount(cost)):
            why = f"has left = {left!r}, cost = {cost!r}: not amounts"
        elif left > min(g.node(node).spend_ceiling - s.spent_of(g, node),
                        g.spend_budget - s.settled - s.reserved) + 1e-6:
            why = f"says {left!r} was left, more than c_v and B leave the attempt"
        elif cost + 1e-6 < left:
            why = f"refuses a call of {cost!r} that fits the {left!r} left"
        if why is not None:
            raise LedgerCorrupt(f"record seq {rec.get('seq')}: worker_stopped record {why}; "
                                f"fix: restore the ledger from a trusted copy")

    def summary(self) -> dict[str, Any]:
        """The run report (`--json`): end state, per-node outcomes, attempts, repairs, spend."""
        s, g = self.state, self.graph
        nodes = {}
        for name in g.names:
            vs = self.verdicts.get(name, [])
            nodes[name] = {
                "status": s.status_of(g, name).value,
                "activation": s.activation_of(g, name),
                "attempts": s.attempts_of(g, name),
                "attempts_all": self.begins.get(name, 0),
                "verdicts": [v["verdict"] for v in vs],
                "cancelled": sorted(e for n, e in s.cancelled if n == name),
            }
        return {
            "outcome": s.outcome.value,
            "stopped": self.stopped is not None,
            "release_unmet": None if self.release_unmet is None
            else list(self.release_unmet.get("unmet", [])),
            "nodes": nodes,
            "attempts_total": s.attempts_total,
            "repairs_used": s.repairs_used,
            "repairs": self.repairs,
            "spend": {"settled": round(s.settled, 6), "reserved": round(s.reserved, 6),
                      "budget": g.spend_budget},
            "overruns": self.overruns,
            "price": self.price,
            "resumes": self.resumes,
            "outcome_unknown": len(self.outcome_unknown),
            "repeated_executions": s.abandoned,  # attempts run again after a crash (G7)
            "cancel_requests": [r.get("node") for r in self.cancel_requests],
            "records": self.records,
            "head": self.head,
        }


def run_bounds(first: dict[str, Any]) -> dict[str, Any]:
    """W and W_c of the run, from its record 0 (a ledger written before they had these names
    holds `attempt_bound` and `bounds` {attempts, spend})."""
    b = first.get("bounds") or {}
    return {"W": b.get("W", b.get("attempts", first.get("attempt_bound"))),
            "W_c": b.get("W_c", b.get("spend"))}


def replay(ledger: Any, source: object = None, registry: Registry = RUN_RECORDS) -> Replayed:
    """Rebuild a run from a ledger (an open `Ledger`, or its records in order, read from
    `source`), each record checked against `registry`."""
    records: Sequence[dict[str, Any]] = getattr(ledger, "records", ledger)
    if not records:
        raise LedgerCorrupt("the ledger is empty; fix: start the run with `loopproof run`")
    r = _start(records[0], source if source is not None else getattr(ledger, "path", None),
               registry)
    for rec in records[1:]:
        r.apply(rec)
    return r


def open_replayed(path: Any, registry: Registry = RUN_RECORDS) -> tuple[Ledger, Replayed]:
    """`Ledger.open(path)` and `replay` in one streaming pass: each verified record is folded
    in as it is read and none is kept (`ledger.records` is not available)."""
    state: list[Replayed] = []

    def fold(rec: dict[str, Any]) -> None:
        if state:
            state[0].apply(rec)
        else:
            state.append(_start(rec, path, registry))

    ledger = Ledger.open(path, keep=False, fold=fold, allow_empty=False)
    if not state:
        ledger.close()
        raise LedgerCorrupt("the ledger is empty; fix: start the run with `loopproof run`")
    return ledger, state[0]


def _start(first: dict[str, Any], source: object = None,
           registry: Registry = RUN_RECORDS) -> Replayed:
    """The replay of record 0 alone: the graph and price it stores, the initial state."""
    if first.get("type") != "run" or first.get("format") != RUN_FORMAT:
        raise LedgerCorrupt(f"record 0 is not the start of a loopproof run (type "
                            f"{first.get('type')!r}, format {first.get('format')!r}); fix: give "
                            f"the ledger written by `loopproof run`")
    where = "the ledger" if source is None else str(source)
    registry.check_read(first, where)
    graph = graph_from_record(first.get("graph"))
    price = first.get("price", 1.0)  # ledgers written before prices existed: 1 unit/second
    if not _is_price(price):
        raise LedgerCorrupt(f"record 0: price {price!r} is not a number > 0; fix: restore the "
                            f"ledger from a trusted copy")
    r = Replayed(graph, initial_state(graph), first, price=float(price), source=where,
                 registry=registry)
    r.records, r.head = 1, first.get("hash", "")
    return r


def _is_amount(v: Any) -> TypeGuard[float]:
    return (not isinstance(v, bool) and isinstance(v, int | float) and v == v
            and 0 <= v < float("inf"))


def _is_price(v: Any) -> TypeGuard[float]:
    return (not isinstance(v, bool) and isinstance(v, int | float) and v == v
            and 0 < v < float("inf"))
