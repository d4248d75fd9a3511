"""The value interface the rule table (model/run_rules.py) is written against.

A rule reads a run through a `View`, states what must hold through a `Guard` and writes its
effect through an `Update`. Each backend implements the three: `model/python_values.py` on a
`RunState` (Python values: `model.step`, the explorer, the engine) and `proofs/z3_values.py` on
Z3 terms (the serial, concurrent and unbounded encodings), the way pySMT puts one formula
interface in front of many solvers. A rule is therefore written once and means the same in
every backend; what differs between backends is only how a state is represented:

- *values*: Python numbers, bools and `Status` members, or Z3 terms. Arithmetic and comparisons
  are Python's operators (both kinds overload them); connectives are `and_`, `or_`, `not_`,
  `ite`, since Python's `and`/`or`/`if` cannot build a Z3 term.
- *nodes*: a node handle is a node's name (Python, bounded encodings) or a constant of a Z3
  sort (the unbounded encoding). A set of nodes (`predecessors`, `subtree`) is what the
  backend can quantify over: a tuple of names made finite by the graph, or a predicate over
  the sort, which `Guard.need_all` and `Update.for_each` turn into a quantifier or a lambda.
- *spend*: the attempts in flight hold accounts (open reservations; settled in the attempt plus
  those). A serial representation keeps one account in the run's totals (`reserved`,
  `attempt_spend`); a concurrent one keeps one per attempt beside the totals. A rule reads an
  account through `View.attempt` and moves it with `Update.open`, `spend` and `close`, so one
  rule serves both (the differences are the concurrent conditions the table marks with
  `View.concurrent`).

Guards say *why not* as well as *whether*: each condition comes with a message function
(model/run_rules.py), which only the Python backend calls (the texts `model.step` raises and
the engine prints); the Z3 backend conjoins the conditions. Conditions are checked in order and
the Python backend stops at the first that fails, so a later condition may read what an earlier
one made safe to read (a node's index once the node is known).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from loopproof.model.state import Outcome

Value = Any  # a Python value (the Python backend) or a Z3 term (the Z3 backends)
Node = Any  # a node's name, or a Z3 constant of a node sort
Nodes = Any  # a finite tuple of node handles, or a backend's predicate over a node sort
Why = Callable[..., str]  # (graph, state, *args) -> the reason, in the Python backend only


class Attempt(Protocol):
    """The account of one attempt in flight: which node, what it holds open (`reserved`), what
    it has settled plus what it holds (`spent`), and the most it may spend (`ceiling`, c_v)."""

    @property
    def node(self) -> Node: ...
    @property
    def reserved(self) -> Value: ...
    @property
    def spent(self) -> Value: ...
    @property
    def ceiling(self) -> Value: ...


class View(Protocol):
    """A run as a rule may read it: the state, the graph's parameters, and the connectives."""

    PENDING: Value
    RUNNING: Value
    DONE: Value
    EXHAUSTED: Value
    eps: Value  # the tolerance of the spend checks (model.run_rules.EPS; 0 for exact amounts)
    concurrent: bool  # several attempts may be in flight (a static fact of the backend)

    # connectives
    def and_(self, *xs: Value) -> Value: ...
    def or_(self, *xs: Value) -> Value: ...
    def not_(self, x: Value) -> Value: ...
    def ite(self, c: Value, a: Value, b: Value) -> Value: ...

    # the graph
    def known(self, v: Node) -> Value: ...
    def attempts_allowed(self, v: Node) -> Value: ...  # a_v
    def ceiling(self, v: Node) -> Value: ...  # c_v
    @property
    def repair_budget(self) -> Value: ...  # K
    @property
    def max_parallel(self) -> Value: ...
    def within_budget(self, amount: Value) -> Value: ...  # amount <= B (+ eps); B may be infinite
    def in_relation(self, d: Node, u: Node) -> Value: ...  # (d, u) in R
    def no_pair(self, d: Node) -> Value: ...  # no (d, u) in R
    def predecessors(self, v: Node) -> Nodes: ...
    def subtree(self, u: Node) -> Nodes: ...  # S_u = {u} + desc(u)

    # the state
    def status(self, v: Node) -> Value: ...
    def activation(self, v: Node) -> Value: ...
    def attempts(self, v: Node) -> Value: ...
    def live(self) -> Value: ...  # the run has not ended
    @property
    def settled(self) -> Value: ...
    @property
    def reserved(self) -> Value: ...  # every open reservation of the run
    @property
    def repairs_used(self) -> Value: ...
    @property
    def attempts_total(self) -> Value: ...
    @property
    def abandoned(self) -> Value: ...

    # derived
    def none(self, status: Value) -> Value: ...  # no node has `status`
    def some(self, status: Value) -> Value: ...
    def every(self, status: Value) -> Value: ...
    def in_flight(self) -> Value: ...  # how many attempts are in flight (concurrent backends)
    def first_running_is(self, v: Node) -> Value: ...  # v is the serial model's attempt in flight
    def held(self) -> Value: ...  # settled + what the attempts in flight may still charge
    def attempt(self, who: Node) -> Attempt: ...  # who None: the only attempt in flight


class Guard(Protocol):
    """What must hold, in order. `need_spend` and `need_room` mark the conditions on spend and
    on the number of attempts in flight: a loosened model (proofs/concurrent.py,
    `AnyNumberInFlight`) drops exactly those."""

    def need(self, cond: Value, why: Why, *args: Any) -> None: ...
    def need_spend(self, cond: Value, why: Why, *args: Any) -> None: ...
    def need_room(self, cond: Value, why: Why, *args: Any) -> None: ...
    def need_all(self, nodes: Nodes, cond: Callable[[Node], Value], why: Why,
                 *args: Any) -> None: ...  # why(graph, state, node, *args)


class Update(Protocol):
    """What an event changes; every field it does not write keeps its value."""

    def set_status(self, v: Node, x: Value) -> None: ...
    def set_activation(self, v: Node, x: Value) -> None: ...
    def set_attempts(self, v: Node, x: Value) -> None: ...
    def add_pass(self, v: Node, activation: Value) -> None: ...
    def add_cancel(self, v: Node, activation: Value) -> None: ...
    def set_repairs_used(self, x: Value) -> None: ...
    def set_attempts_total(self, x: Value) -> None: ...
    def set_abandoned(self, x: Value) -> None: ...
    def set_settled(self, x: Value) -> None: ...
    def set_outcome(self, o: Outcome) -> None: ...
    def open(self, v: Node) -> None: ...  # v's attempt enters the flight with an empty account
    def spend(self, a: Attempt, reserved: Callable[[Value], Value],
              spent: Callable[[Value], Value]) -> None: ...  # the account and the totals, moved
    def close(self, a: Attempt) -> None: ...  # the attempt leaves the flight: its account out of
    # the totals; where the totals are its one account (serially) they drop what it spent and
    # keep what it still holds open -- at most eps, once a rule may end it: the serial model's
    def at(self, a: Attempt, effect: Callable[[Node], None]) -> None: ...  # effect on a's node
    def for_each(self, nodes: Nodes, effect: Callable[[Node], None]) -> None: ...
