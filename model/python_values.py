"""The Python backend of the rule table: the rules of model/run_rules.py evaluated on a `RunState`.

`why_not` runs an event's guard and returns the reason of the first condition that fails (None:
enabled); `apply` runs its effect and builds the successor state. `model.transitions` (and so
`model.step`, the explorer and the engine) asks these two and nothing else.

Reads are by index into the state's tuples, and the counts of RUNNING, EXHAUSTED and DONE nodes
come from the state's census (`RunState.census`), so a guard costs the same on a graph of ten
thousand nodes as on one of three; an effect changes only the items it names
(model/persistent.py), so replaying an n-node ledger stays linear.

Spend, represented as `RunState` keeps it: with one attempt in flight its account is the run's
totals (`reserved`, `attempt_spend`) and `accounts` is empty; only while two or more are in
flight does `accounts` hold each one's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loopproof.model.graph import LoopGraph
from loopproof.model.persistent import added, replaced, replaced_many
from loopproof.model.rule_values import Node, Nodes, Value, Why
from loopproof.model.run_rules import EPS, RunRules
from loopproof.model.state import Outcome, RunState, Status, _recount, changed

Account = tuple[tuple[int, float, float], ...]


class _Refused(Exception):
    """A condition of a guard does not hold: `args` are its reason and the reason's arguments."""


class Checks:
    """The guard on Python values: each condition is checked as it is stated, and the first
    that fails ends the guard (so later conditions never read what an earlier one ruled out)."""

    __slots__ = ()

    def need(self, cond: Value, why: Why, *args: Any) -> None:
        if not cond:
            raise _Refused(why, args)

    need_spend = need
    need_room = need

    def need_all(self, nodes: Nodes, cond: Callable[[Node], Value], why: Why,
                 *args: Any) -> None:
        for v in nodes:
            if not cond(v):
                raise _Refused(why, (v, *args))


CHECKS = Checks()


class PyAttempt:
    __slots__ = ("node", "reserved", "spent", "ceiling")

    def __init__(self, node: str, reserved: float, spent: float, ceiling: float) -> None:
        self.node, self.reserved, self.spent, self.ceiling = node, reserved, spent, ceiling


class PyView:
    """A `RunState` of a graph as the rules read it (model/rule_values.py, `View`)."""

    __slots__ = ("graph", "st", "index", "concurrent", "census", "_attempt")
    PENDING, RUNNING, DONE, EXHAUSTED = (Status.PENDING, Status.RUNNING, Status.DONE,
                                         Status.EXHAUSTED)
    eps = EPS

    def __init__(self, graph: LoopGraph, st: RunState) -> None:
        self.graph, self.st, self.index = graph, st, graph._index
        self.concurrent = graph.max_parallel > 1
        self.census = st.census()  # (RUNNING count, first RUNNING, EXHAUSTED count, first, DONE count)
        self._attempt: tuple[Node | None, PyAttempt] | None = None

    # connectives
    def and_(self, *xs: Value) -> bool:
        return all(xs)

    def or_(self, *xs: Value) -> bool:
        return any(xs)

    def not_(self, x: Value) -> bool:
        return not x

    def ite(self, c: Value, a: Value, b: Value) -> Value:
        return a if c else b

    # the graph
    def known(self, v: Node) -> bool:
        return v in self.index

    def attempts_allowed(self, v: Node) -> int:
        return self.graph.nodes[self.index[v]].attempts

    def ceiling(self, v: Node) -> float:
        return self.graph.nodes[self.index[v]].spend_ceiling

    @property
    def repair_budget(self) -> int:
        return self.graph.repair_budget

    @property
    def max_parallel(self) -> int:
        return self.graph.max_parallel

    def within_budget(self, amount: Value) -> bool:
        return bool(amount <= self.graph.spend_budget + EPS)

    def in_relation(self, d: Node, u: Node) -> bool:
        return (d, u) in self.graph.repair_pairs

    def no_pair(self, d: Node) -> bool:
        return not any(x == d for x, _ in self.graph.repair_pairs)

    def predecessors(self, v: Node) -> tuple[str, ...]:
        return self.graph.nodes[self.index[v]].needs

    def subtree(self, u: Node) -> tuple[str, ...]:
        """S_u in topological order (the order a reason names the first node of it)."""
        memo = self.graph.shape_memo.setdefault("subtree_in_order", {})
        got: tuple[str, ...] | None = memo.get(u)
        if got is None:
            index = self.index
            got = memo[u] = tuple(sorted(self.graph.subtree(u), key=index.__getitem__))
        return got

    # the state
    def status(self, v: Node) -> Status:
        return self.st.status[self.index[v]]

    def activation(self, v: Node) -> int:
        return self.st.activation[self.index[v]]

    def attempts(self, v: Node) -> int:
        return self.st.attempts[self.index[v]]

    def live(self) -> bool:
        return self.st.outcome is Outcome.RUNNING

    @property
    def settled(self) -> float:
        return self.st.settled

    @property
    def reserved(self) -> float:
        return self.st.reserved

    @property
    def repairs_used(self) -> int:
        return self.st.repairs_used

    @property
    def attempts_total(self) -> int:
        return self.st.attempts_total

    @property
    def abandoned(self) -> int:
        return self.st.abandoned

    # derived, from the census where it counts
    def none(self, status: Value) -> bool:
        if status is Status.RUNNING:
            return self.census[0] == 0
        if status is Status.EXHAUSTED:
            return self.census[2] == 0
        return status not in self.st.status

    def some(self, status: Value) -> bool:
        return not self.none(status)

    def every(self, status: Value) -> bool:
        if status is Status.DONE:
            return self.census[4] == len(self.st.status)
        return all(x is status for x in self.st.status)

    def in_flight(self) -> int:
        return self.census[0]

    def first_running_is(self, v: Node) -> bool:
        first = self.census[1]
        return first >= 0 and self.graph.names[first] == v

    def held(self) -> float:
        return self.st.held(self.graph)

    def attempt(self, who: Node | None) -> PyAttempt:
        got = self._attempt
        if got is not None and got[0] == who:
            return got[1]
        i = self.census[1] if who is None else self.index[who]
        reserved, spent = self.st.account(self.graph, i)
        node = self.graph.nodes[i]
        a = PyAttempt(node.name, reserved, spent, node.spend_ceiling)
        self._attempt = (who, a)
        return a


class Changes:
    """The effect on Python values: the writes of one event, then `build` makes the successor
    (items changed in place of copies past a few dozen nodes; the census kept up to date)."""

    __slots__ = ("view", "nodes", "run", "spending")

    def __init__(self, view: PyView) -> None:
        self.view = view
        self.nodes: dict[str, dict[int, Any]] = {}
        self.run: dict[str, Any] = {}
        self.spending: tuple[float, float, Account] | None = None  # reserved, attempt_spend, accounts

    def _node(self, field: str, v: Node, x: Any) -> None:
        self.nodes.setdefault(field, {})[self.view.index[v]] = x

    def set_status(self, v: Node, x: Value) -> None:
        self._node("status", v, x)

    def set_activation(self, v: Node, x: Value) -> None:
        self._node("activation", v, x)

    def set_attempts(self, v: Node, x: Value) -> None:
        self._node("attempts", v, x)

    def add_pass(self, v: Node, activation: Value) -> None:
        self.run["passes"] = added(self.run.get("passes", self.view.st.passes), (v, activation))

    def add_cancel(self, v: Node, activation: Value) -> None:
        self.run["cancelled"] = added(self.run.get("cancelled", self.view.st.cancelled),
                                      (v, activation))

    def set_repairs_used(self, x: Value) -> None:
        self.run["repairs_used"] = x

    def set_attempts_total(self, x: Value) -> None:
        self.run["attempts_total"] = x

    def set_abandoned(self, x: Value) -> None:
        self.run["abandoned"] = x

    def set_settled(self, x: Value) -> None:
        self.run["settled"] = x

    def set_outcome(self, o: Outcome) -> None:
        self.run["outcome"] = o

    # ---- spend
    def _spend(self) -> tuple[float, float, Account]:
        if self.spending is None:
            st = self.view.st
            self.spending = (st.reserved, st.attempt_spend, st.accounts)
        return self.spending

    def open(self, v: Node) -> None:
        """None in flight: the totals are the new attempt's (spent 0; a reservation left open by
        the one before, at most EPS, stays, as in the serial model). Else every attempt in
        flight gets an account, the new one empty."""
        st, i = self.view.st, self.view.index[v]
        count, first = self.view.census[:2]
        reserved, spent, accounts = self._spend()
        if count == 0:
            self.spending = (reserved, 0.0, accounts)
            return
        flying = ((first, st.reserved, st.attempt_spend),) if count == 1 else accounts
        self.spending = (reserved, spent, tuple(sorted((*flying, (i, 0.0, 0.0)))))

    def spend(self, a: Any, reserved: Callable[[Value], Value],
              spent: Callable[[Value], Value]) -> None:
        total_r, total_x, accounts = self._spend()
        if accounts:
            i = self.view.index[a.node]
            accounts = tuple((j, reserved(r), spent(x)) if j == i else (j, r, x)
                             for j, r, x in accounts)
        self.spending = (reserved(total_r), spent(total_x), accounts)

    def close(self, a: Any) -> None:
        """One attempt in flight (or a serial graph): what it spent leaves the totals, and what
        it still holds open (at most EPS, once a verdict may end it) stays reserved, as in the
        serial model. Several: its account leaves the totals; one left: the totals are its."""
        total_r, total_x, accounts = self._spend()
        if self.view.census[0] <= 1 or not self.view.concurrent:
            self.spending = (total_r, 0.0, accounts)
            return
        i = self.view.index[a.node]
        mine = next(((r, x) for j, r, x in accounts if j == i), (0.0, 0.0))
        rest = tuple(acc for acc in accounts if acc[0] != i)
        if len(rest) == 1:
            self.spending = (rest[0][1], rest[0][2], ())
        else:
            self.spending = (total_r - mine[0], total_x - mine[1], rest)

    def at(self, a: Any, effect: Callable[[Node], None]) -> None:
        effect(a.node)

    def for_each(self, nodes: Nodes, effect: Callable[[Node], None]) -> None:
        for v in nodes:
            effect(v)

    # ---- the successor
    def build(self) -> RunState:
        st = self.view.st
        fields = self.run
        if not self.nodes and self.spending is None and not fields:
            return st  # nothing changed (a Claim): the state itself, as before the table
        census = st._census
        for name, items in self.nodes.items():
            old = getattr(st, name)
            if len(items) == 1:
                [(i, x)] = items.items()
                fields[name] = replaced(old, i, x)
                if name == "status":
                    census = _recount(st._census, i, old[i], x)
            else:
                fields[name] = replaced_many(old, items)
                if name == "status":
                    census = None  # counted again on first use
        if self.spending is not None:
            fields["reserved"], fields["attempt_spend"], fields["accounts"] = self.spending
        return changed(st, _census=census, **fields)


def why_not(rules: RunRules, graph: LoopGraph, s: RunState, event: Any) -> str | None:
    """The reason `event`'s guard does not hold in `s` (the first condition that fails), or
    None when it is enabled."""
    try:
        rules.guard(PyView(graph, s), event, CHECKS)
    except _Refused as refused:
        why, args = refused.args
        return str(why(graph, s, *args))
    return None


def apply(rules: RunRules, graph: LoopGraph, s: RunState, event: Any) -> RunState:
    """The state `event`'s effect makes of `s` (its guard is the caller's to check)."""
    view = PyView(graph, s)
    changes = Changes(view)
    rules.effect(view, event, changes)
    return changes.build()
