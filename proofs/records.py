"""A small system whose state is a record of named Z3 fields and whose events are guard + update
pairs (everything an update does not name stays unchanged). G4, G5 and G6 are written on it;
hashes and check names are uninterpreted sorts, so the proofs hold for any hash function that
is a function and any set of checks. `Item` is a piece of evidence (model/rules.py), and `Names`
pins concrete model values (strings) to distinct constants, for the differential tests."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from loopproof.proofs.encoding import value
from loopproof.proofs.trace import number
from loopproof.proofs.z3_values import all_of

Hash = z3.DeclareSort("Hash")
Check = z3.DeclareSort("Check")
VerdictSort, (V_PASS, V_FAIL, V_ERROR) = z3.EnumSort("Verdict", ["pass", "fail", "error"])
VERDICT = {"pass": V_PASS, "fail": V_FAIL, "error": V_ERROR}
_item = z3.Datatype("Item")
_item.declare("item", ("id", Hash), ("check", Check), ("tree", Hash), ("suite", Hash),
              ("verdict", VerdictSort))
Item = _item.create()


def item_id(e: z3.ExprRef) -> z3.ExprRef:
    return Item.id(e)


def item_check(e: z3.ExprRef) -> z3.ExprRef:
    return Item.check(e)


def item_tree(e: z3.ExprRef) -> z3.ExprRef:
    return Item.tree(e)


def item_suite(e: z3.ExprRef) -> z3.ExprRef:
    return Item.suite(e)


def item_verdict(e: z3.ExprRef) -> z3.ExprRef:
    return Item.verdict(e)


class Names:
    """Concrete strings as constants of a sort, distinct from each other (`distinct()`), and
    one fixed 'anything else' constant per array field (the default of a pinned array)."""

    def __init__(self, tag: str = "c") -> None:
        self.tag = tag
        self.consts: dict[tuple[str, str], z3.ExprRef] = {}
        self._distinct: tuple[int, list[z3.BoolRef]] = (0, [])
        self._items: dict[Any, z3.ExprRef] = {}

    def of(self, sort: z3.SortRef, text: str) -> z3.ExprRef:
        key = (_printed(sort), text)
        if key not in self.consts:
            self.consts[key] = z3.Const(f"{self.tag}:{key[0]}:{text}", sort)
        return self.consts[key]

    def junk(self, sort: z3.SortRef, name: str) -> z3.ExprRef:
        return self.of(sort, f"<default of {name}>")

    def item(self, e: Any) -> z3.ExprRef:
        """A model.rules.Item as an Item term (made once per item: a state pins every item
        issued so far)."""
        if e not in self._items:
            self._items[e] = Item.item(self.of(Hash, e.id), self.of(Check, e.check),
                                       self.of(Hash, e.tree), self.of(Hash, e.suite),
                                       VERDICT[e.verdict])
        return self._items[e]

    def distinct(self) -> list[z3.BoolRef]:
        """(Made again only when a name was added since: a test asks for it per question.)"""
        if self._distinct[0] != len(self.consts):
            out = []
            for sort in (Hash, Check):
                cs = [c for (srt, _), c in self.consts.items() if srt == _printed(sort)]
                if len(cs) > 1:
                    out.append(z3.Distinct(*cs))
            self._distinct = (len(self.consts), out)
        return list(self._distinct[1])


@functools.lru_cache(maxsize=64)
def _printed(sort: z3.SortRef) -> str:
    """`str(sort)`, printed once per sort (Z3's printer is slow, and names ask per constant)."""
    return str(sort)

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

    def rule(self, s: dict[str, z3.ExprRef], ev: REv) -> tuple[z3.BoolRef, dict[str, Any]]:
        return getattr(self, f"rule_{ev.kind.lower()}")(s, ev)

    def transition(self, s: dict[str, z3.ExprRef], t: dict[str, z3.ExprRef],
                   ev: REv) -> z3.BoolRef:
        guard, upd = self.rule(s, ev)
        assert set(upd) <= set(s), f"unknown fields {set(upd) - set(s)}"
        return all_of([guard, *[t[k] == upd.get(k, s[k]) for k in s]])

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
        if e.sort() in (Hash, Check):
            if self._names[0] != id(model):
                self._names = (id(model), {})
            names = self._names[1]
            key = f"{e.sort()}:{model.eval(e, model_completion=True)}"
            letter = "h" if e.sort() == Hash else "c"
            seen = sum(k.startswith(f"{e.sort()}:") for k in names)
            return names.setdefault(key, f"{letter}{seen}")
        if e.sort() == Item:
            fields = [Item.id, Item.check, Item.tree, Item.suite]
            return (f"e({', '.join(str(self.show(model, f(e))) for f in fields)}, "
                    f"{value(model, Item.verdict(e))})")
        v = value(model, e)
        return number(v) if not isinstance(v, int | bool | str) else v

    def show_list(self, model: z3.ModelRef, n: z3.ArithRef,
                  columns: Sequence[z3.ArrayRef]) -> list[list[Any]]:
        """The first n rows of some Int-indexed arrays."""
        count = max(0, min(value(model, n), self.SHOWN))
        return [[self.show(model, c[i]) for c in columns] for i in range(count)]
