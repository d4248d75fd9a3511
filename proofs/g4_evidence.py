"""G4 (evidence is bound): the Z3 encoding of model/evidence.py, and its obligations.

One field per field of `model.evidence.EvidenceState`, for a fixed number of pinned checks
(symbolic: which checks they are, every hash): the start and current trees, the pins and what
each suite hashes to now, the guard policy, the issued
evidence (a log of ids, plus the maps `used` and `by_id`: an envelope is issued iff its id is
used and maps to exactly that envelope), whether revisions are open, and the two histories
(delivered: id, tree; driven: id, from, to). One rule per event of the model, same guard and
same effect; tests/proofs/test_admission_encodings.py holds them to the model.

Obligations: the model's invariant (`model.evidence.bound_history`) is inductive -- every commit
was driven by evidence this broker issued on exactly the tree the commit started from (the tree
the commit before gave, so old evidence can never drive a later commit) by the pinned suite,
and so was everything delivered -- plus sanity; broken variants (stale tree accepted, suite
unchecked, forged evidence accepted, unbound evidence delivered) are refuted by runs from Init.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import z3

from loopproof.model import evidence as me
from loopproof.model.rules import Item as MItem
from loopproof.proofs.checks import (
    Found,
    bmc,
    check_enabled,
    check_inductive,
    check_init_satisfiable,
    first,
)
from loopproof.proofs.records import (
    Check,
    Item,
    Names,
    RecordSystem,
    REv,
    item_check,
    item_id,
    item_suite,
    item_tree,
)
from loopproof.proofs.records import Hash as H

INT, BOOL = z3.IntSort(), z3.BoolSort()
LOG = z3.ArraySort(INT, H)
PolicySort, (P_REFRESH, P_KEEP, P_ESCALATE) = z3.EnumSort("StalePolicy", list(me.STALE_POLICIES))
POLICY = dict(zip(me.STALE_POLICIES, (P_REFRESH, P_KEEP, P_ESCALATE), strict=True))


class EvidenceRules(RecordSystem):
    """The evidence rules with `m` pinned checks (symbolic, distinct: which checks they are,
    their pins, every hash)."""

    FIELDS = {"start": H, "tree": H, "pins": z3.ArraySort(Check, H),
              "suites": z3.ArraySort(Check, H),
              "on_stale": PolicySort, "n": INT, "iss": LOG, "used": z3.ArraySort(H, BOOL),
              "by_id": z3.ArraySort(H, Item), "open": BOOL,
              "nd": INT, "d_id": LOG, "d_tree": LOG,
              "nv": INT, "v_id": LOG, "v_from": LOG, "v_to": LOG, "stale": INT}
    EVENTS = {
        "Issue": [Item],
        "ChangeSuite": [Check, H],
        "Halt": [],
        "Bind": [Item],
        "Refresh": [BOOL, Item, Item],   # (no evidence cited, the cited, the fresh)
        "Keep": [BOOL, Item],
        "Escalate": [BOOL, Item],
        "Admit": [Item, H],
    }
    LOGS = {"n": ("iss",), "nd": ("d_id", "d_tree"), "nv": ("v_id", "v_from", "v_to")}

    def __init__(self, m: int = 1) -> None:
        super().__init__()
        self.checks = [z3.Const(f"check_{i}", Check) for i in range(m)]

    def axioms(self) -> list[z3.BoolRef]:
        return [z3.Distinct(*self.checks)] if len(self.checks) > 1 else []

    def parameters(self) -> list[z3.ExprRef]:
        return list(self.checks)

    def known(self, c) -> z3.BoolRef:
        """`c` is one of the pinned checks."""
        return z3.Or([c == x for x in self.checks])

    def init(self, s):
        return z3.And(s["tree"] == s["start"], s["suites"] == s["pins"], s["n"] == 0,
                      s["used"] == z3.K(H, z3.BoolVal(False)), s["open"], s["nd"] == 0,
                      s["nv"] == 0, s["stale"] == 0)

    # ---- the guards of model/evidence.py
    def issued(self, s, e):
        return z3.And(s["used"][item_id(e)], s["by_id"][item_id(e)] == e)

    def binds(self, s, e):
        """`model.evidence.why_unbound` is None."""
        return z3.And(self.issued(s, e), self.known(item_check(e)), item_tree(e) == s["tree"],
                      item_suite(e) == s["pins"][item_check(e)])

    def changed(self, s):
        return z3.Or([s["suites"][c] != s["pins"][c] for c in self.checks])

    def issuable(self, s, e):
        return z3.And(z3.Not(s["used"][item_id(e)]), self.known(item_check(e)),
                      item_suite(e) == s["suites"][item_check(e)])

    def stale(self, s, none, cited, policy):
        return z3.And(s["open"], z3.Not(z3.And(z3.Not(none), self.binds(s, cited))),
                      s["on_stale"] == POLICY[policy])

    def add(self, s, e):
        n = s["n"]
        return {"n": n + 1, "iss": z3.Store(s["iss"], n, item_id(e)),
                "used": z3.Store(s["used"], item_id(e), True),
                "by_id": z3.Store(s["by_id"], item_id(e), e)}

    def deliver(self, s, evidence_id):
        nd = s["nd"]
        return {"nd": nd + 1, "d_id": z3.Store(s["d_id"], nd, evidence_id),
                "d_tree": z3.Store(s["d_tree"], nd, s["tree"])}

    # ---- one rule per event
    def rule_issue(self, s, ev):
        return self.issuable(s, ev.args[0]), self.add(s, ev.args[0])

    def rule_changesuite(self, s, ev):
        c, h = ev.args
        return self.known(c), {"suites": z3.Store(s["suites"], c, h)}

    def rule_halt(self, s, ev):
        return z3.And(s["open"], self.changed(s)), {"open": z3.BoolVal(False)}

    def rule_bind(self, s, ev):
        e = ev.args[0]
        return z3.And(s["open"], self.binds(s, e)), self.deliver(s, item_id(e))

    def rule_refresh(self, s, ev):
        none, cited, fresh = ev.args
        guard = z3.And(self.stale(s, none, cited, "refresh"), self.binds(s, fresh))
        return guard, {**self.deliver(s, item_id(fresh)), "stale": s["stale"] + 1}

    def rule_keep(self, s, ev):
        none, cited = ev.args
        return self.stale(s, none, cited, "keep"), {"stale": s["stale"] + 1}

    def rule_escalate(self, s, ev):
        none, cited = ev.args
        return self.stale(s, none, cited, "escalate"), {"stale": s["stale"] + 1,
                                                         "open": z3.BoolVal(False)}

    def rule_admit(self, s, ev):
        e, t = ev.args
        nv = s["nv"]
        guard = z3.And(s["open"], self.binds(s, e), z3.Not(self.changed(s)), t != s["tree"])
        return guard, {"tree": t, "nv": nv + 1, "v_id": z3.Store(s["v_id"], nv, item_id(e)),
                       "v_from": z3.Store(s["v_from"], nv, s["tree"]),
                       "v_to": z3.Store(s["v_to"], nv, t)}

    # ---- traces
    def concrete(self, model: z3.ModelRef, s, ev: REv | None):
        """The trace's state and event as model/evidence.py objects (they replay there)."""
        return read_state(self, model, s), None if ev is None else read_event(self, model, ev)

    def observables(self, model, s, round_):
        out = super().observables(model, s, round_)
        if round_ == 1:  # the issued envelopes, by the ids the log names, and their pins
            n = max(0, min(model.eval(s["n"], model_completion=True).as_long(), self.SHOWN))
            issued = [s["by_id"][s["iss"][i]] for i in range(n)]
            out += issued + [s["pins"][item_check(e)] for e in issued]
        return out

    def describe(self, model: z3.ModelRef, s) -> dict[str, Any]:
        n = max(0, min(model.eval(s["n"], model_completion=True).as_long(), self.SHOWN))
        issued = [s["by_id"][s["iss"][i]] for i in range(n)]
        return {"tree": self.show(model, s["tree"]), "start": self.show(model, s["start"]),
                "open": self.show(model, s["open"]),
                "issued(evidence,pin of its check)": [
                    [self.show(model, e), self.show(model, s["pins"][item_check(e)])]
                    for e in issued],
                "delivered(id,tree)": self.show_list(model, s["nd"], [s["d_id"], s["d_tree"]]),
                "driven(id,from,to)": self.show_list(model, s["nv"],
                                                     [s["v_id"], s["v_from"], s["v_to"]])}


# ---- the invariant: model.evidence.bound_history -------------------------------------------------

def _bound_to(sys, s, evidence_id, tree):
    e = s["by_id"][evidence_id]
    return z3.And(s["used"][evidence_id], item_id(e) == evidence_id,
                  EvidenceRules.known(sys, item_check(e)),
                  item_tree(e) == tree, item_suite(e) == s["pins"][item_check(e)])


def bound_history(sys: EvidenceRules, s) -> z3.BoolRef:
    """`model.evidence.bound_history`, judged by the real rules whatever `sys` is."""
    k = z3.Int("k")
    nv = s["nv"]
    last = z3.If(nv == 0, s["start"], s["v_to"][nv - 1])
    return z3.And(
        s["n"] >= 0, s["nd"] >= 0, nv >= 0, last == s["tree"],
        z3.ForAll([k], z3.Implies(z3.And(k >= 0, k < nv), z3.And(
            _bound_to(sys, s, s["v_id"][k], s["v_from"][k]),
            s["v_from"][k] == z3.If(k == 0, s["start"], s["v_to"][k - 1])))),
        z3.ForAll([k], z3.Implies(z3.And(k >= 0, k < s["nd"]),
                                  _bound_to(sys, s, s["d_id"][k], s["d_tree"][k]))),
        z3.ForAll([k], z3.Implies(z3.And(k >= 0, k < s["n"]), s["used"][s["iss"][k]])))


# ---- broken variants --------------------------------------------------------------------------

class StaleTreeAccepted(EvidenceRules):
    """Broken: evidence binds whatever tree it describes (only issuance and suite checked)."""

    def binds(self, s, e):
        return z3.And(self.issued(s, e), self.known(item_check(e)),
                      item_suite(e) == s["pins"][item_check(e)])


class SuiteUnchecked(EvidenceRules):
    """Broken: only the tree is compared; evidence from a changed suite still binds."""

    def binds(self, s, e):
        return z3.And(self.issued(s, e), self.known(item_check(e)), item_tree(e) == s["tree"])


class ForgedAccepted(EvidenceRules):
    """Broken: evidence need not be issued by this broker: a forged envelope with the right
    hashes binds."""

    def binds(self, s, e):
        return z3.And(self.known(item_check(e)), item_tree(e) == s["tree"],
                      item_suite(e) == s["pins"][item_check(e)])


class DeliverUnbound(EvidenceRules):
    """Broken: evidence is delivered to the worker without the binding check."""

    def rule_bind(self, s, ev):
        return s["open"], self.deliver(s, item_id(ev.args[0]))


WHAT = "G4 (every commit and delivery bound to the tree and pinned suite)"
SIZES = (1, 2)  # how many pinned checks the proofs cover


def check_bound() -> Found:
    return first(check_inductive(sys, partial(bound_history, sys))
                 for sys in (EvidenceRules(m) for m in SIZES))


def check_sanity() -> Found:
    def one(sys: EvidenceRules) -> Found:
        def inv(s):
            return bound_history(sys, s)
        return check_init_satisfiable(sys, inv) or check_enabled(sys, inv)
    return first(one(EvidenceRules(m)) for m in SIZES)


def _refuted(sys: EvidenceRules, depth: int) -> Found:
    return bmc(sys, lambda s: z3.Not(bound_history(sys, s)), depth, WHAT)


def run_stale_accepted(depth: int = 4) -> Found:
    return _refuted(StaleTreeAccepted(), depth)


def run_suite_unchecked(depth: int = 5) -> Found:
    return _refuted(SuiteUnchecked(), depth)


def run_forged_accepted(depth: int = 2) -> Found:
    return _refuted(ForgedAccepted(), depth)


def run_deliver_unbound(depth: int = 2) -> Found:
    return _refuted(DeliverUnbound(), depth)


# ---- concrete states and events (the differential test) -----------------------------------------

def _array(names: Names, field: str, key_sort, val_sort, pairs, value_of) -> z3.ExprRef:
    arr = z3.K(key_sort, names.junk(val_sort, field))
    for k, v in pairs:
        arr = z3.Store(arr, names.of(key_sort, k), value_of(v))
    return arr


def pin_state(sys: EvidenceRules, names: Names, s: me.EvidenceState,
              z: dict[str, z3.ExprRef]) -> z3.BoolRef:
    """`z` equals the concrete state `s` on every field the model has (and `sys`'s checks are
    the state's pinned ones)."""
    h = lambda x: names.of(H, x)  # noqa: E731
    assert len(s.pins) == len(sys.checks)
    used = z3.K(H, z3.BoolVal(False))
    by_id = z3.K(H, names.junk(Item, "by_id"))
    for e in s.issued:
        used = z3.Store(used, h(e.id), True)
        by_id = z3.Store(by_id, h(e.id), names.item(e))
    cs = [z["start"] == h(s.start), z["tree"] == h(s.tree),
          z["pins"] == _array(names, "pins", Check, H, s.pins, h),
          z["suites"] == _array(names, "suites", Check, H, s.suites, h),
          z["on_stale"] == POLICY[s.on_stale], z["open"] == s.open,
          z["used"] == used, z["by_id"] == by_id, z["stale"] == s.stale,
          z["n"] == len(s.issued), z["nd"] == len(s.delivered), z["nv"] == len(s.driven)]
    cs += [x == names.of(Check, c) for x, (c, _) in zip(sys.checks, s.pins, strict=True)]
    cs += [z["iss"][i] == h(e.id) for i, e in enumerate(s.issued)]
    cs += [c for i, (d, t) in enumerate(s.delivered)
           for c in (z["d_id"][i] == h(d), z["d_tree"][i] == h(t))]
    cs += [c for i, (d, f, t) in enumerate(s.driven)
           for c in (z["v_id"][i] == h(d), z["v_from"][i] == h(f), z["v_to"][i] == h(t))]
    return z3.And(cs)


_NONE = MItem("<none>", "<none>", "<none>", "<none>", "error")


def event_of(sys: EvidenceRules, names: Names, event: Any) -> REv:
    """The encoded event for a concrete model event."""
    kind = type(event).__name__
    h = lambda x: names.of(H, x)  # noqa: E731
    args: tuple[Any, ...]
    if kind == "Issue":
        args = (names.item(event.item),)
    elif kind == "ChangeSuite":
        args = (names.of(Check, event.check), h(event.suite))
    elif kind == "Halt":
        args = ()
    elif kind == "Bind":
        args = (names.item(event.cited),)
    elif kind in ("Keep", "Escalate", "Refresh"):
        cited = event.cited or _NONE
        args = (z3.BoolVal(event.cited is None), names.item(cited))
        if kind == "Refresh":
            args += (names.item(event.fresh),)
    else:
        args = (names.item(event.cited), h(event.tree))
    return REv(kind, sys, args)



# ---- traces as model objects (a counterexample replays through model/evidence.py) ----------------

def _item(sys: RecordSystem, model: z3.ModelRef, e: z3.ExprRef) -> MItem:
    show = sys.show
    return MItem(show(model, item_id(e)), show(model, item_check(e)), show(model, item_tree(e)),
                 show(model, item_suite(e)), str(model.eval(Item.verdict(e), model_completion=True)))


def read_state(sys: EvidenceRules, model: z3.ModelRef, s) -> me.EvidenceState:
    show = sys.show
    n = model.eval(s["n"], model_completion=True).as_long()

    def rows(count: str, *logs: str) -> tuple[Any, ...]:
        k = model.eval(s[count], model_completion=True).as_long()
        return tuple(tuple(show(model, s[log][i]) for log in logs) for i in range(k))
    return me.EvidenceState(
        start=show(model, s["start"]), tree=show(model, s["tree"]),
        pins=tuple(sorted((show(model, c), show(model, s["pins"][c])) for c in sys.checks)),
        suites=tuple(sorted((show(model, c), show(model, s["suites"][c])) for c in sys.checks)),
        on_stale=str(model.eval(s["on_stale"], model_completion=True)),
        issued=tuple(_item(sys, model, s["by_id"][s["iss"][i]]) for i in range(n)),
        open=show(model, s["open"]), delivered=rows("nd", "d_id", "d_tree"),
        driven=rows("nv", "v_id", "v_from", "v_to"), stale=show(model, s["stale"]))


def read_event(sys: EvidenceRules, model: z3.ModelRef, ev: REv) -> Any:
    a = ev.args
    if ev.kind == "Issue":
        return me.Issue(_item(sys, model, a[0]))
    if ev.kind == "ChangeSuite":
        return me.ChangeSuite(sys.show(model, a[0]), sys.show(model, a[1]))
    if ev.kind == "Halt":
        return me.Halt()
    if ev.kind == "Bind":
        return me.Bind(_item(sys, model, a[0]))
    if ev.kind == "Admit":
        return me.Admit(_item(sys, model, a[0]), sys.show(model, a[1]))
    cited = None if sys.show(model, a[0]) else _item(sys, model, a[1])
    if ev.kind == "Refresh":
        return me.Refresh(cited, _item(sys, model, a[2]))
    return (me.Keep if ev.kind == "Keep" else me.Escalate)(cited)

