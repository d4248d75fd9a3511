"""The shared test oracles: read a ledger file's records, recompute G3 at every prefix from them,
rewrite a ledger as an attacker who recomputes its chain would, and register a node kind whose
worker and gate are Python callables.

Why one module: a check of the engine that each test file writes for itself drifts (three copies
of the G3 check had: two held one reservation at a time, one ignored `abandon`'s charge), and a
drifted oracle passes an engine it should fail. These read the ledger file itself, never the
engine's replay, so a bug in the engine's state cannot hide one in its accounting.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopproof.engine.record.committed import mark_path
from loopproof.engine.record.ledger import canonical, record_hash
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.gate import CallableGate
from loopproof.engine.run.worker import CallableWorker
from tests.support.specs import write_spec

EPS = 1e-9  # model/transitions.py's tolerance for float spend comparisons

Record = dict[str, Any]


def records(ledger: Path) -> list[Record]:
    """Every record of the ledger file, in order, as written (no verification)."""
    return [json.loads(line) for line in Path(ledger).read_bytes().splitlines()]


def rechain(recs: Sequence[Record]) -> bytes:
    """The ledger bytes of `recs` with every seq, prev and hash recomputed: what whoever can
    write the file can make of any records (only a signature tells)."""
    prev, out = "", []
    for seq, r in enumerate(recs):
        r = {k: v for k, v in r.items() if k != "hash"}
        r["seq"], r["prev"] = seq, prev
        r["hash"] = prev = record_hash(r)
        out.append(canonical(r) + b"\n")
    return b"".join(out)


def rewrite(path: Path, edit: Callable[[list[Record]], list[Record]]) -> None:
    """The full-rewrite attacker: change records, then recompute every seq, prev and hash (and
    remove the committed-length mark, which guards against crashes, not against them)."""
    mark_path(path).unlink(missing_ok=True)
    path.write_bytes(rechain(edit(records(path))))


@dataclass(frozen=True)
class Spend:
    """The run's spend after one ledger prefix, recomputed from the records' own amounts."""

    settled: float
    reserved: float
    attempt: float  # what the attempts in flight hold: their settled spend plus reservations
    # per node in flight: (its attempt's open reservations, its settled spend plus them)
    by_node: tuple[tuple[str, float, float], ...] = ()


def spend_at_every_prefix(recs: Sequence[Record]) -> list[Spend]:
    """The spend after each record, by the model's rules (model/transitions.py): `reserve` adds
    its amount to what is outstanding (several may be, of one attempt or of several in flight);
    `settle` charges its amount and releases `of` (None: every outstanding reservation of its
    attempt), never more than it releases; `abandon` charges exactly its attempt's open
    reservation; `begin` starts an attempt at zero; a verdict or an overrun ends it. Each
    reserve, settle, overrun and abandon is its node's (every record names it). A record that
    breaks one of those rules fails here, naming its index."""
    settled = 0.0
    held: dict[str, list[float]] = {}  # node in flight -> [reserved, spent]
    out = []
    for i, r in enumerate(recs):
        t, node = r.get("type"), r.get("node")
        if t == "begin":
            held[node] = [0.0, 0.0]
        elif t == "reserve":
            assert r["amount"] >= 0, (i, r)
            assert node in held, (i, r, "a reservation of no attempt in flight")
            held[node][0] += r["amount"]
            held[node][1] += r["amount"]
        elif t == "settle":
            assert node in held, (i, r, "a settlement of no attempt in flight")
            reserved = held[node][0]
            released = reserved if r.get("of") is None else r["of"]
            assert 0 <= released <= reserved + EPS, (i, r, reserved)
            assert 0 <= r["amount"] <= released + EPS, (i, r, released)
            settled += r["amount"]
            held[node][0] -= released
            held[node][1] += r["amount"] - released
        elif t == "abandon":
            assert node in held, (i, r)
            reserved = held.pop(node)[0]
            assert abs(r["charged"] - reserved) <= EPS, (i, r, reserved)  # the open one, in full
            settled += reserved
        elif t in ("verdict", "overrun"):
            assert node in held, (i, r)
            assert t == "overrun" or held[node][0] <= EPS, (i, r, "a verdict over a reservation")
            del held[node]
        out.append(Spend(settled, sum(h[0] for h in held.values()),
                         sum(h[1] for h in held.values()),
                         tuple((n, h[0], h[1]) for n, h in sorted(held.items()))))
    return out


def assert_g3(ledger: Path | Sequence[Record], budget: float | None = None) -> Spend:
    """G3 at every prefix of a ledger: settled + reserved <= B (every open reservation of every
    attempt in flight counted), and each attempt in flight holds at most its node's c_v. B and
    every c_v come from the ledger's first record (the run's graph); `budget`, when given, must
    be that B. Returns the spend after the last record."""
    recs = records(ledger) if isinstance(ledger, Path) else list(ledger)
    graph = recs[0]["graph"]
    if budget is not None:
        assert graph["spend_budget"] == budget, (graph["spend_budget"], budget)
    ceiling = {n["name"]: n["spend_ceiling"] for n in graph["nodes"]}
    spends = spend_at_every_prefix(recs)
    for i, (r, s) in enumerate(zip(recs, spends, strict=True)):
        assert s.settled + s.reserved <= graph["spend_budget"] + EPS, (i, r, s)
        for node, _reserved, spent in s.by_node:
            assert spent <= ceiling[node] + EPS, (i, r, s, node, ceiling[node])
    return spends[-1] if spends else Spend(0.0, 0.0, 0.0)


Work = Callable[[Any], Any]
Judge = Callable[[Path], str]


def accept(snapshot: Path) -> str:
    return "accept"


class CallableKind:
    """A node kind `kind = NAME` whose node table names, in its `fn` field, a (worker, gate) pair
    of Python callables added here: `kind.add("greedy", worker, gate)`, or a function of the
    node's name making the pair: `kind.add_per_node("plan", make)`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.funcs: dict[str, Callable[[str], tuple[Work, Judge]]] = {}
        spec_mod.register_kind(name, self._factory, ["fn"])

    def _factory(self, table: Any, spec_dir: Path) -> tuple[CallableWorker, CallableGate]:
        worker, gate = self.funcs[table["fn"]](table.name)
        return CallableWorker(worker), CallableGate(gate)

    def add(self, fn: str, worker: Work, gate: Judge = accept) -> str:
        return self.add_per_node(fn, lambda node: (worker, gate))

    def add_per_node(self, fn: str, make: Callable[[str], tuple[Work, Judge]]) -> str:
        self.funcs[fn] = make
        return fn

    def node(self, name: str, fn: str, **fields: object) -> dict[str, dict[str, object]]:
        """`{name: table}`: a node of this kind running `fn`, with `fields` (for
        tests/support/specs.py's write_spec; merge several with `|`)."""
        return {name: {"kind": self.name, "fn": fn, **fields}}

    def one_node_spec(self, tmp_path: Path, fn: str, worker: Work, gate: Judge = accept, *,
                      budget: float, **fields: object) -> spec_mod.Spec:
        """The spec of a graph with one node `n` of this kind running `worker` and `gate`."""
        self.add(fn, worker, gate)
        return spec_mod.load(write_spec(tmp_path, self.node("n", fn, **fields),
                                        spend_budget=budget))
