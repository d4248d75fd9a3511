"""The rule table compiled to Python source over the explorer's abstract state: a third backend.

The bound explorer (model/search_space.py) visits millions of abstract states -- an outcome
code `o`, a tuple of status codes `st`, a tuple of attempt counters `at`, and the repairs left
`lf` -- and cannot afford to build a `RunState` and ask `model.step` at each. So it asks the
rule table (model/run_rules.py) once per graph, with this backend, whose values are Python
source text over those four names: each control event's guard becomes one boolean expression
and its effect the expressions of the state it leads to, compiled into one function. A rule
changed in the table changes the explorer with it.

What the abstract state does not hold, it reads as the explorer's runs have it: no spend (the
explorer has no metered events, so settled, reserved and what an attempt spent are 0, and a
budget check is decided here, once), no history (activations, passes, cancels and the totals
are written by effects and dropped, since no guard reads them), and repairs used counted as
`-lf`, the repair budget as 0 (`K - lf < K` is `-lf < 0`), so one function serves every K.
Which repair pairs are in R is read at run time, so one function serves every relation of a
DAG. tests/model/test_search_space.py holds the compiled space to `model.step` at every state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loopproof.model.graph import LoopGraph
from loopproof.model.run_rules import EPS, RunRules
from loopproof.model.state import Outcome

PENDING, RUNNING, DONE, EXHAUSTED = 0, 1, 2, 3  # the explorer's status codes
OUTCOME_CODE = {Outcome.RUNNING: 0, Outcome.DONE: 1, Outcome.FAILED: 2,
                Outcome.BUDGET_EXHAUSTED: 3}


class Src:
    """A Python expression over (o, st, at, lf, rb), as text; operators build larger ones."""

    __slots__ = ("text", "node_status")

    def __init__(self, text: str, node_status: tuple[int, int] | None = None) -> None:
        self.text = text
        self.node_status = node_status  # (i, c) when this implies `st[i] == c`

    def __repr__(self) -> str:
        return self.text

    def _op(self, op: str, other: Any, flip: bool = False) -> Any:
        a, b = (other, self) if flip else (self, other)
        return Src(f"({a!r} {op} {b!r})")

    def __add__(self, o: Any) -> Any: return self._op("+", o)  # noqa: E704
    def __radd__(self, o: Any) -> Any: return self._op("+", o, True)  # noqa: E704
    def __sub__(self, o: Any) -> Any: return self._op("-", o)  # noqa: E704
    def __rsub__(self, o: Any) -> Any: return self._op("-", o, True)  # noqa: E704
    def __lt__(self, o: Any) -> Any: return self._op("<", o)  # noqa: E704
    def __le__(self, o: Any) -> Any: return self._op("<=", o)  # noqa: E704
    def __gt__(self, o: Any) -> Any: return self._op(">", o)  # noqa: E704
    def __ge__(self, o: Any) -> Any: return self._op(">=", o)  # noqa: E704

    def __eq__(self, o: Any) -> Any:  # builds `==`, as a Z3 term does
        return self._op("==", o)

    def __ne__(self, o: Any) -> Any:  # builds `!=`, as a Z3 term does
        return self._op("!=", o)

    __hash__ = None  # type: ignore[assignment]  # (== builds an expression)


class _Status(Src):
    """`st[i]`: compared with a constant it says so, for the dispatch on a node's status."""

    def __init__(self, i: int) -> None:
        super().__init__(f"st[{i}]")
        self.i = i

    def __eq__(self, o: Any) -> Any:  # builds `==`
        return Src(f"({self.text} == {o!r})", (self.i, o) if isinstance(o, int) else None)


def _fold(xs: tuple[Any, ...], unit: bool, op: str) -> Any:
    terms = []
    for x in xs:
        if isinstance(x, bool):
            if x != unit:
                return x
            continue
        terms.append(x)
    if not terms:
        return unit
    return terms[0] if len(terms) == 1 else Src("(" + f" {op} ".join(map(repr, terms)) + ")")


class AbstractAttempt:
    __slots__ = ("node", "reserved", "spent", "ceiling")

    def __init__(self, node: Any, ceiling: float) -> None:
        self.node, self.reserved, self.spent, self.ceiling = node, 0.0, 0.0, ceiling


class SourceView:
    """A run of `graph` on the explorer's abstract state, as source (model/rule_values.py)."""

    PENDING, RUNNING, DONE, EXHAUSTED = PENDING, RUNNING, DONE, EXHAUSTED
    eps = EPS
    settled = reserved = 0.0  # no metered events in the explorer
    repair_budget = 0  # repairs used is -lf: K - lf < K reads -lf < 0
    repairs_used = Src("(-lf)")
    attempts_total = Src("attempts_total")  # history: written, never read by a guard
    abandoned = Src("abandoned")

    def __init__(self, graph: LoopGraph, universe: tuple[tuple[str, str], ...]) -> None:
        self.graph, self.index = graph, graph._index
        self.concurrent = graph.max_parallel > 1
        self.max_parallel = graph.max_parallel
        self.bit = {p: k for k, p in enumerate(universe)}

    def and_(self, *xs: Any) -> Any:
        return _fold(xs, True, "and")

    def or_(self, *xs: Any) -> Any:
        return _fold(xs, False, "or")

    def not_(self, x: Any) -> Any:
        return (not x) if isinstance(x, bool) else Src(f"(not {x!r})")

    def ite(self, c: Any, a: Any, b: Any) -> Any:
        if isinstance(c, bool):
            return a if c else b
        return Src(f"({a!r} if {c!r} else {b!r})")

    def known(self, v: str) -> bool:
        return v in self.index

    def attempts_allowed(self, v: str) -> int:
        return self.graph.node(v).attempts

    def ceiling(self, v: str) -> float:
        return self.graph.node(v).spend_ceiling

    def within_budget(self, amount: Any) -> Any:
        bound = self.graph.spend_budget + EPS
        return amount <= bound if not isinstance(amount, Src) or bound != float("inf") else True

    def in_relation(self, d: str, u: str) -> Any:
        return Src(f"(((rb >> {self.bit[(d, u)]}) & 1) == 1)")

    def no_pair(self, d: str) -> Any:
        bits = sum(1 << k for (x, _), k in self.bit.items() if x == d)
        return Src(f"((rb & {bits}) == 0)") if bits else True

    def predecessors(self, v: str) -> tuple[str, ...]:
        return self.graph.node(v).needs

    def subtree(self, u: str) -> tuple[str, ...]:
        inside = self.graph.subtree(u)
        return tuple(w for w in self.graph.names if w in inside)

    def status(self, v: str) -> Src:
        return _Status(self.index[v])

    def activation(self, v: str) -> Src:
        return Src(f"activation[{self.index[v]}]")

    def attempts(self, v: str) -> Src:
        return Src(f"at[{self.index[v]}]")

    def live(self) -> bool:
        return True  # the compiled function is asked of live states only

    def none(self, status: int) -> Src:
        return Src(f"({status} not in st)")

    def some(self, status: int) -> Src:
        return Src(f"({status} in st)")

    def every(self, status: int) -> Src:
        return Src(f"(st == {(status,) * len(self.graph.names)!r})")

    def in_flight(self) -> Src:
        return Src("st.count(1)")

    def first_running_is(self, v: str) -> Src:
        i = self.index[v]
        return Src(f"(st[{i}] == 1 and 1 not in st[:{i}])", (i, RUNNING))

    def held(self) -> Any:
        """settled + the ceilings of the attempts in flight (none has spent anything), summed in
        topological order as `RunState.held` does."""
        parts = [f"({n.spend_ceiling!r} if st[{i}] == 1 else 0.0)"
                 for i, n in enumerate(self.graph.nodes)]
        return Src("(0.0 + " + " + ".join(parts) + ")")

    def attempt(self, who: Any) -> AbstractAttempt:
        return AbstractAttempt(who, self.graph.node(who).spend_ceiling)


class SourceChecks:
    """A guard as source: its conditions, and `st[i] == c` ones noted for the dispatch."""

    def __init__(self) -> None:
        self.conds: list[Any] = []

    def need(self, cond: Any, why: Any, *args: Any) -> None:
        self.conds.append(cond)

    need_spend = need
    need_room = need

    def need_all(self, nodes: Any, cond: Callable[[Any], Any], why: Any, *args: Any) -> None:
        for v in nodes:
            self.conds.append(cond(v))

    def text(self, own: int | None) -> str | None:
        """The guard as one expression (None: it never holds). A condition on the event's own
        node's status goes first, as a plain `st[i] == c`: most events of a state fail it."""
        terms = []
        first = None
        for c in self.conds:
            if isinstance(c, bool):
                if not c:
                    return None
                continue
            if first is None and c.node_status is not None and c.node_status[0] == own:
                first = "(st[{}] == {})".format(*c.node_status)
                if c.text == first:
                    continue
            terms.append(repr(c))
        return " and ".join(([first] if first else []) + terms) or "True"


class SourceWrites:
    """An effect as source: the new status, counter, repairs left and outcome; what the
    abstract state drops (history, spend) is written to nothing."""

    def __init__(self, view: SourceView) -> None:
        self.view = view
        self.status: dict[int, Any] = {}
        self.counter: dict[int, Any] = {}
        self.left: Any = None
        self.outcome: int | None = None

    def set_status(self, v: str, x: Any) -> None:
        self.status[self.view.index[v]] = x

    def set_attempts(self, v: str, x: Any) -> None:
        self.counter[self.view.index[v]] = x

    def set_repairs_used(self, x: Any) -> None:
        self.left = Src(f"(-{x!r})")

    def set_outcome(self, o: Outcome) -> None:
        self.outcome = OUTCOME_CODE[o]

    def _drop(self, *args: Any) -> None:
        """History and spend: not in the abstract state."""

    set_activation = add_pass = add_cancel = set_attempts_total = set_abandoned = _drop
    set_settled = open = close = _drop

    def spend(self, a: Any, reserved: Any, spent: Any) -> None:
        pass

    def at(self, a: Any, effect: Callable[[Any], None]) -> None:
        effect(a.node)

    def for_each(self, nodes: Any, effect: Callable[[Any], None]) -> None:
        for v in nodes:
            effect(v)

    def state(self, n: int) -> str:
        """(o, st, at, lf) after the effect, the counter of a DONE or EXHAUSTED node as 0 (the
        explorer's key drops it: no rule reads it before a repair resets it)."""
        st = [repr(self.status[i]) if i in self.status else f"st[{i}]" for i in range(n)]
        at = []
        for i in range(n):
            counter = repr(self.counter[i]) if i in self.counter else f"at[{i}]"
            new = self.status.get(i)
            if new is None:
                at.append(counter)
            elif isinstance(new, int):
                at.append("0" if new >= DONE else counter)
            else:
                at.append(f"(0 if {new!r} >= 2 else {counter})")
        o = "o" if self.outcome is None else str(self.outcome)
        left = "lf" if self.left is None else repr(self.left)
        return f"({o}, ({', '.join(st)},), ({', '.join(at)},), {left})"


def compile_successors(rules: RunRules, graph: LoopGraph, events: list[tuple[Any, int | None]],
                       universe: tuple[tuple[str, str], ...]) -> Callable[..., list[Any]]:
    """One function `(o, st, at, lf, rb) -> [(event, o', st', at', lf'), ...]`: the events of
    `events` (each with its own node's index, None for Finish) whose guard holds, in order,
    with the state each leads to. `rb` is a bitmask over `universe`: the pairs in R."""
    view = SourceView(graph, universe)
    n = len(graph.names)
    lines = ["def successors(o, st, at, lf, rb):", "    out = []", "    if o != 0:",
             "        return out"]
    namespace: dict[str, Any] = {}
    for k, (event, own) in enumerate(events):
        checks, writes = SourceChecks(), SourceWrites(view)
        rules.guard(view, event, checks)
        rules.effect(view, event, writes)
        guard = checks.text(own)
        if guard is None:
            continue
        namespace[f"E{k}"] = event
        lines += [f"    if {guard}:", f"        out.append((E{k}, *{writes.state(n)}))"]
    lines.append("    return out")
    exec(compile("\n".join(lines), f"<successors of {graph.names}>", "exec"), namespace)  # noqa: S102 -- our own source, from the rule table
    successors: Callable[..., list[Any]] = namespace["successors"]
    return successors
