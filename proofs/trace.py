"""Counterexamples as readable traces of states: what `python -m loopproof.proofs` prints and `--json` holds.

A trace is a list of steps; each step names the event that led to it (None for the first state)
and the state as plain data. Run traces keep the concrete `RunState`s and model events too, so that
tests can replay them through `model.transitions.step`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any


@dataclass
class Step:
    event: str | None
    state: dict[str, Any]
    event_obj: Any = None      # a model.transitions event, when the trace is over run states
    state_obj: Any = None      # a model.state.RunState, when the trace is over run states


@dataclass
class Trace:
    """A counterexample. `kind`: "trace" (from Init), "cti" (an inductive step that breaks the
    invariant), "lasso" (states[loop_start] repeats at the end), "vacuous" (a sanity failure)."""

    kind: str
    note: str
    steps: list[Step] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    loop_start: int | None = None
    system: Any = field(default=None, repr=False, compare=False)  # the encoding it came from

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "note": self.note, "params": self.params,
                               "steps": [{"event": s.event, "state": s.state} for s in self.steps]}
        if self.loop_start is not None:
            out["loop_start"] = self.loop_start
        return out

    def render(self) -> str:
        lines = [f"{self.kind}: {self.note}"]
        if self.params:
            lines.append("  with " + ", ".join(f"{k}={_fmt(v)}" for k, v in self.params.items()))
        for i, st in enumerate(self.steps):
            first = "init" if self.kind in ("trace", "lasso") else "a state"
            head = first if st.event is None else st.event
            mark = "  <- loop starts here" if self.loop_start == i else ""
            lines.append(f"  [{i}] {head}{mark}")
            lines.append("      " + render_state(st.state))
        if self.loop_start is not None:
            lines.append(f"  [{len(self.steps) - 1}] repeats [{self.loop_start}] "
                         "(on every field a guard reads): the loop runs forever")
        return "\n".join(lines)


def render_state(state: dict[str, Any]) -> str:
    parts: list[str] = []
    nodes = state.get("nodes")
    if isinstance(nodes, dict):
        parts.append(" | ".join(
            f"{name}:{v['status']} e{v['activation']} i{v['attempts']}"
            + "".join(f" {k}={_fmt(x)}" for k, x in v.items()
                      if k not in ("status", "activation", "attempts"))
            for name, v in nodes.items()))
    for k, v in state.items():
        if k != "nodes":
            parts.append(f"{k}={_fmt(v)}")
    return "  ".join(parts)


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, list | tuple):
        return "{" + ", ".join(_fmt(x) for x in v) + "}"
    return str(v)


def number(q: Fraction) -> int | float:
    """A model value as JSON: integers stay integers, the rest are floats rounded to 1e-12."""
    if q.denominator == 1:
        return int(q)
    return round(float(q), 12)
