"""A small system whose state is a record of named Z3 fields and whose events are guard + update
pairs (everything an update does not name stays unchanged). G4 and G5 are written on it; hashes
are an uninterpreted sort, so the proofs hold for any hash function that is a function."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from proofs.encoding import value
from proofs.trace import number

Hash = z3.DeclareSort("Hash")

@dataclass(frozen=True)
class REv:
    """An event with its arguments as Z3 terms (fresh per step)."""

    kind: str
    system: RecordSystem = field(compare=False, repr=False)
    args: tuple[z3.ExprRef, ...] = ()

    def label(self, model: z3.ModelRef | None = None) -> str:
        if not self.args:
            return self.kind
        shown = ["?" if model is None else str(self.system.show(model, a)) for a in self.args]
        return f"{self.kind}({', '.join(shown)})"


class RecordSystem:
    """Subclasses set `FIELDS` (name -> sort), `EVENTS` (kind -> argument sorts), `init`, and a
    method `rule_<kind>(s, ev)` returning (guard, update) per event kind."""

    FIELDS: dict[str, z3.SortRef] = {}
    EVENTS: dict[str, Sequence[z3.SortRef]] = {}
    LOGS: dict[str, Sequence[str]] = {}  # count field -> the Int-indexed arrays it counts
    SHOWN = 16  # rows of a log a trace shows

    def __init__(self) -> None:
        self._names: tuple[int, dict[str, str]] = (0, {})

    def fresh(self, tag: str) -> dict[str, z3.ExprRef]:
        return {k: z3.Const(f"{k}@{tag}", sort) for k, sort in self.FIELDS.items()}

    def axioms(self) -> list[z3.BoolRef]:
        return []

    def init(self, s: dict[str, z3.ExprRef]) -> z3.BoolRef:  # pragma: no cover
        raise NotImplementedError

    def events(self, tag: str) -> list[REv]:
        return [REv(kind, self, tuple(z3.Const(f"{kind}_{i}@{tag}", sort)
                                      for i, sort in enumerate(sorts)))
                for kind, sorts in self.EVENTS.items()]

    def rule(self, s: dict[str, z3.ExprRef], ev: REv) -> tuple[z3.BoolRef, dict]:
        return getattr(self, f"rule_{ev.kind.lower()}")(s, ev)

    def transition(self, s: dict[str, z3.ExprRef], t: dict[str, z3.ExprRef],
                   ev: REv) -> z3.BoolRef:
        guard, upd = self.rule(s, ev)
        assert set(upd) <= set(s), f"unknown fields {set(upd) - set(s)}"
        return z3.And(guard, *[t[k] == upd.get(k, s[k]) for k in s])

    # ---- canonical counterexamples (proofs/canonical.py)
    def observables(self, model: z3.ModelRef, s: dict[str, z3.ExprRef],
                    round_: int) -> list[z3.ExprRef]:
        """Round 0: the scalar fields; round 1: the shown rows of every log, then whatever
        else the system shows (`shown_terms`)."""
        if round_ == 0:
            return [x for x in s.values() if not z3.is_array(x)]
        if round_ > 1:
            return []
        out: list[z3.ExprRef] = []
        for count, logs in self.LOGS.items():
            n = max(0, min(value(model, s[count]), self.SHOWN))
            out += [s[log][i] for i in range(n) for log in logs]
        return out + self.shown_terms(s)

    def shown_terms(self, s: dict[str, z3.ExprRef]) -> list[z3.ExprRef]:
        """Terms a trace shows that are not fields or log rows (e.g. a gate's verdict)."""
        return []

    # ---- readable values
    def show(self, model: z3.ModelRef, e: z3.ExprRef) -> Any:
        """Hashes as h0, h1, ... in the order a trace first shows them (one name per element
        of the model's Hash universe)."""
        if e.sort() == Hash:
            if self._names[0] != id(model):
                self._names = (id(model), {})
            names = self._names[1]
            key = str(model.eval(e, model_completion=True))
            return names.setdefault(key, f"h{len(names)}")
        v = value(model, e)
        return number(v) if not isinstance(v, int | bool | str) else v

    def show_list(self, model: z3.ModelRef, n: z3.ArithRef,
                  columns: Sequence[z3.ArrayRef]) -> list[list[Any]]:
        """The first n rows of some Int-indexed arrays."""
        count = max(0, min(value(model, n), self.SHOWN))
        return [[self.show(model, c[i]) for c in columns] for i in range(count)]
