"""G5 (checkpoint): the Z3 encoding of model/checkpoint.py, and its obligations.

One field per field of `model.checkpoint.CheckpointState`, for a fixed number of admission and
completion checks (symbolic: which checks they are, their pins, every hash): the pins and which
checks are pinned, the start, candidate and workspace trees, the checkpoint (and whether there
is one) and its generation, the issued evidence (a log of ids with the maps `used` and `by_id`),
the history of commits (tree, one evidence id per admission check) and the receipt. One rule
per event of the model; tests/proofs/test_admission_encodings.py holds them to the model.

Obligations: the model's invariant (`model.checkpoint.gated`) is inductive -- the checkpoint is
the last committed tree, and every committed tree, the current one and each before it, was
admitted by evidence this broker issued, produced on exactly that tree by the pinned suite of
every admission check, PASS; a receipt names the checkpoint, re-certified the same way -- for
1 or 2 admission and completion checks; only a Commit moves the checkpoint (frame, from any
state); sanity. Broken variants are refuted by runs from Init: a commit on evidence of another
tree, an `error` counted as a pass, evidence of a changed suite, completion without
recertification, and a drift that overwrites the checkpoint.
"""

from __future__ import annotations

from itertools import product
from typing import Any

import z3

from loopproof.model import checkpoint as mc
from loopproof.model.rules import Item as MItem
from loopproof.proofs.checks import (
    Found,
    bmc,
    check_enabled,
    check_inductive,
    check_init_satisfiable,
    check_unchanged,
    first,
)
from loopproof.proofs.records import (
    V_FAIL,
    V_PASS,
    Check,
    Item,
    Names,
    RecordSystem,
    REv,
    item_check,
    item_id,
    item_suite,
    item_tree,
    item_verdict,
)
from loopproof.proofs.records import Hash as H

INT, BOOL = z3.IntSort(), z3.BoolSort()
LOG = z3.ArraySort(INT, H)
SIZES = (1, 2)  # how many admission checks, and how many completion checks, the proofs cover


class CheckpointRules(RecordSystem):
    """The checkpoint's rules with `m` admission checks and `k` completion checks."""

    def __init__(self, m: int = 1, k: int = 1) -> None:
        super().__init__()
        self.m, self.k = m, k
        self.adm = [z3.Const(f"admission_{i}", Check) for i in range(m)]
        self.comp = [z3.Const(f"completion_{j}", Check) for j in range(k)]
        self.FIELDS = {"pins": z3.ArraySort(Check, H), "known": z3.ArraySort(Check, BOOL),
                       "start": H, "candidate": H, "workspace": H, "has_ck": BOOL,
                       "checkpoint": H, "generation": INT, "n": INT, "iss": LOG,
                       "used": z3.ArraySort(H, BOOL), "by_id": z3.ArraySort(H, Item),
                       "nh": INT, "h_tree": LOG, **{f"h_e{i}": LOG for i in range(m)},
                       "done": BOOL, "receipt": H, **{f"r_e{j}": H for j in range(k)}}
        self.EVENTS = {"Issue": [Item], "Commit": [H] + [H] * m, "Drift": [H], "Restore": [],
                       "Recertify": [H] * k}
        self.LOGS = {"n": ("iss",), "nh": ("h_tree", *[f"h_e{i}" for i in range(m)])}

    def axioms(self) -> list[z3.BoolRef]:
        return [z3.Distinct(*self.adm) if self.m > 1 else z3.BoolVal(True),
                z3.Distinct(*self.comp) if self.k > 1 else z3.BoolVal(True)]

    def init(self, s):
        return z3.And(*[s["known"][c] for c in self.adm + self.comp],
                      s["candidate"] == s["start"], s["workspace"] == s["start"],
                      z3.Not(s["has_ck"]), s["generation"] == -1, s["n"] == 0,
                      s["used"] == z3.K(H, z3.BoolVal(False)), s["nh"] == 0, z3.Not(s["done"]))

    # ---- the guards of model/checkpoint.py
    def ok(self, s, evidence_id, check, tree):
        """`evidence_id` was issued, is of `check`, produced on exactly `tree` by the check's
        pinned suite, PASS (`model.checkpoint.why_unadmitted`, one position)."""
        e = s["by_id"][evidence_id]
        return z3.And(s["used"][evidence_id], s["known"][check], item_check(e) == check,
                      item_tree(e) == tree, item_suite(e) == s["pins"][check],
                      item_verdict(e) == V_PASS)

    def admits(self, s, tree, ids, checks):
        return z3.And([self.ok(s, e, c, tree) for e, c in zip(ids, checks, strict=True)])

    def rule_issue(self, s, ev):
        e = ev.args[0]
        n = s["n"]
        return z3.And(z3.Not(s["used"][item_id(e)]), s["known"][item_check(e)]), {
            "n": n + 1, "iss": z3.Store(s["iss"], n, item_id(e)),
            "used": z3.Store(s["used"], item_id(e), True),
            "by_id": z3.Store(s["by_id"], item_id(e), e)}

    def rule_commit(self, s, ev):
        tree, ids = ev.args[0], ev.args[1:]
        nh = s["nh"]
        upd = {"checkpoint": tree, "candidate": tree, "workspace": tree,
               "has_ck": z3.BoolVal(True), "generation": s["generation"] + 1, "nh": nh + 1,
               "h_tree": z3.Store(s["h_tree"], nh, tree)}
        upd |= {f"h_e{i}": z3.Store(s[f"h_e{i}"], nh, e) for i, e in enumerate(ids)}
        return z3.And(z3.Not(s["done"]), self.admits(s, tree, ids, self.adm)), upd

    def rule_drift(self, s, ev):
        return z3.Not(s["done"]), {"workspace": ev.args[0]}

    def rule_restore(self, s, ev):
        return s["workspace"] != s["candidate"], {"workspace": s["candidate"]}

    def rule_recertify(self, s, ev):
        ck = s["checkpoint"]
        guard = z3.And(z3.Not(s["done"]), s["has_ck"], s["workspace"] == ck,
                       self.admits(s, ck, ev.args, self.comp))
        return guard, {"done": z3.BoolVal(True), "receipt": ck,
                       **{f"r_e{j}": e for j, e in enumerate(ev.args)}}

    # ---- traces
    def concrete(self, model: z3.ModelRef, s, ev: REv | None):
        """The trace's state and event as model/checkpoint.py objects (they replay there)."""
        return read_state(self, model, s), None if ev is None else read_event(self, model, ev)

    def observables(self, model, s, round_):
        out = super().observables(model, s, round_)
        if round_ == 1:
            n = max(0, min(model.eval(s["n"], model_completion=True).as_long(), self.SHOWN))
            issued = [s["by_id"][s["iss"][i]] for i in range(n)]
            out += issued + [s["pins"][c] for c in self.adm + self.comp]
        return out

    def parameters(self) -> list[z3.ExprRef]:
        return [*self.adm, *self.comp]

    def describe(self, model: z3.ModelRef, s) -> dict[str, Any]:
        n = max(0, min(model.eval(s["n"], model_completion=True).as_long(), self.SHOWN))
        has = self.show(model, s["has_ck"])
        done = self.show(model, s["done"])
        return {"pins(admission)": [self.show(model, s["pins"][c]) for c in self.adm],
                "candidate": self.show(model, s["candidate"]),
                "workspace": self.show(model, s["workspace"]),
                "checkpoint": self.show(model, s["checkpoint"]) if has else None,
                "issued": [self.show(model, s["by_id"][s["iss"][i]]) for i in range(n)],
                "history(tree,evidence)": self.show_list(
                    model, s["nh"], [s["h_tree"], *[s[f"h_e{i}"] for i in range(self.m)]]),
                "receipt": self.show(model, s["receipt"]) if done else None}

    def describe_params(self, model: z3.ModelRef) -> dict[str, Any]:
        return {"admission": [self.show(model, c) for c in self.adm],
                "completion": [self.show(model, c) for c in self.comp]}


# ---- the invariant: model.checkpoint.gated -------------------------------------------------------

def gated(sys: CheckpointRules):
    """The invariant, with the real rule's notion of admitted evidence (whatever `sys` is: a
    broken variant is judged by what the model demands)."""
    def ok(s, e, c, tree):
        return CheckpointRules.ok(sys, s, e, c, tree)

    def inv(s) -> z3.BoolRef:
        k = z3.Int("k")
        nh = s["nh"]
        last = s["h_tree"][nh - 1]
        issued_ok = z3.ForAll([k], z3.Implies(z3.And(k >= 0, k < s["n"]), z3.And(
            s["used"][s["iss"][k]], item_id(s["by_id"][s["iss"][k]]) == s["iss"][k])))
        history_ok = z3.ForAll([k], z3.Implies(z3.And(k >= 0, k < nh), z3.And(
            [ok(s, s[f"h_e{i}"][k], c, s["h_tree"][k]) for i, c in enumerate(sys.adm)])))
        receipt_ok = z3.Implies(s["done"], z3.And(
            s["has_ck"], s["receipt"] == s["checkpoint"],
            *[ok(s, s[f"r_e{j}"], c, s["checkpoint"]) for j, c in enumerate(sys.comp)]))
        return z3.And(nh >= 0, s["n"] >= 0, s["has_ck"] == (nh > 0),
                      z3.Implies(s["has_ck"], s["checkpoint"] == last),
                      s["candidate"] == z3.If(s["has_ck"], s["checkpoint"], s["start"]),
                      s["generation"] == nh - 1, issued_ok, history_ok, receipt_ok)
    return inv


# ---- broken variants --------------------------------------------------------------------------

class CommitsAnyTree(CheckpointRules):
    """Broken: the admission evidence need not be of the committed tree."""

    def rule_commit(self, s, ev):
        _, upd = super().rule_commit(s, ev)
        ids = ev.args[1:]
        loose = z3.And([z3.And(s["used"][e], item_check(s["by_id"][e]) == c,
                               item_suite(s["by_id"][e]) == s["pins"][c],
                               item_verdict(s["by_id"][e]) == V_PASS)
                        for e, c in zip(ids, self.adm, strict=True)])
        return z3.And(z3.Not(s["done"]), loose), upd


class ErrorCountsAsPass(CheckpointRules):
    """Broken: a check's `error` (no verdict) is counted as a pass."""

    def ok(self, s, evidence_id, check, tree):
        e = s["by_id"][evidence_id]
        return z3.And(s["used"][evidence_id], s["known"][check], item_check(e) == check,
                      item_tree(e) == tree, item_suite(e) == s["pins"][check],
                      item_verdict(e) != V_FAIL)


class CompletesUnchecked(CheckpointRules):
    """Broken: completion issues a receipt without recertifying the checkpoint."""

    def rule_recertify(self, s, ev):
        ck = s["checkpoint"]
        return z3.And(z3.Not(s["done"]), s["has_ck"]), {
            "done": z3.BoolVal(True), "receipt": ck,
            **{f"r_e{j}": e for j, e in enumerate(ev.args)}}


class DriftOverwrites(CheckpointRules):
    """Broken: a drifted workspace is taken as the checkpoint (a malformed action's files)."""

    def rule_drift(self, s, ev):
        return z3.Not(s["done"]), {"workspace": ev.args[0], "checkpoint": ev.args[0],
                                   "has_ck": z3.BoolVal(True)}


def _shapes():
    return [CheckpointRules(m, k) for m, k in product(SIZES, SIZES)]


def check_gated() -> Found:
    return first(check_inductive(sys, gated(sys)) for sys in _shapes())


def check_frame() -> Found:
    """Only a Commit may change the checkpoint or whether there is one (from any state)."""
    return first(check_unchanged(
        sys, lambda s, t: z3.And(t["checkpoint"] == s["checkpoint"],
                                 t["has_ck"] == s["has_ck"]),
        allowed=("Commit",), what="the checkpoint") for sys in _shapes())


def check_sanity() -> Found:
    return first(check_init_satisfiable(sys, gated(sys)) or check_enabled(sys, gated(sys))
                 for sys in _shapes())


def _refuted(sys: CheckpointRules, depth: int, what: str) -> Found:
    inv = gated(sys)
    return bmc(sys, lambda s: z3.Not(inv(s)), depth, what)


def run_commits_any_tree(depth: int = 2) -> Found:
    return _refuted(CommitsAnyTree(), depth, "G5 (a checkpoint admitted on exactly its tree)")


def run_error_counts_as_pass(depth: int = 2) -> Found:
    return _refuted(ErrorCountsAsPass(), depth, "G5 (a checkpoint admitted by PASS evidence)")


def run_completes_unchecked(depth: int = 3) -> Found:
    return _refuted(CompletesUnchecked(), depth, "G5 (a receipt names a recertified state)")


def run_drift_overwrites(depth: int = 2) -> Found:
    return _refuted(DriftOverwrites(), depth, "G5 (the checkpoint holds an admitted tree)")


# ---- concrete states and events (the differential test) -----------------------------------------

def pin_state(sys: CheckpointRules, names: Names, s: mc.CheckpointState,
              z: dict[str, z3.ExprRef]) -> z3.BoolRef:
    """`z` equals the concrete state `s` (with `sys`'s admission and completion checks the
    state's)."""
    h = lambda x: names.of(H, x)  # noqa: E731
    assert (len(s.admission), len(s.completion)) == (sys.m, sys.k)
    pins = z3.K(Check, names.junk(H, "pins"))
    known = z3.K(Check, z3.BoolVal(False))
    for c, suite in s.pins:
        pins = z3.Store(pins, names.of(Check, c), h(suite))
        known = z3.Store(known, names.of(Check, c), True)
    used = z3.K(H, z3.BoolVal(False))
    by_id = z3.K(H, names.junk(Item, "by_id"))
    for e in s.issued:
        used = z3.Store(used, h(e.id), True)
        by_id = z3.Store(by_id, h(e.id), names.item(e))
    cs = [z["pins"] == pins, z["known"] == known, z["start"] == h(s.start),
          z["candidate"] == h(s.candidate), z["workspace"] == h(s.workspace),
          z["has_ck"] == (s.checkpoint is not None), z["generation"] == s.generation,
          z["used"] == used, z["by_id"] == by_id, z["n"] == len(s.issued),
          z["nh"] == len(s.history), z["done"] == s.done]
    cs += [a == names.of(Check, c) for a, c in zip(sys.adm, s.admission, strict=True)]
    cs += [a == names.of(Check, c) for a, c in zip(sys.comp, s.completion, strict=True)]
    if s.checkpoint is not None:
        cs.append(z["checkpoint"] == h(s.checkpoint))
    else:
        cs.append(z["checkpoint"] == names.junk(H, "checkpoint"))
    cs += [z["iss"][i] == h(e.id) for i, e in enumerate(s.issued)]
    for i, (tree, ids) in enumerate(s.history):
        cs.append(z["h_tree"][i] == h(tree))
        cs += [z[f"h_e{j}"][i] == h(e) for j, e in enumerate(ids)]
    if s.done:
        cs.append(z["receipt"] == h(s.receipt))
        cs += [z[f"r_e{j}"] == h(e) for j, e in enumerate(s.recertified_by)]
    else:
        cs.append(z["receipt"] == names.junk(H, "receipt"))
        cs += [z[f"r_e{j}"] == names.junk(H, f"r_e{j}") for j in range(sys.k)]
    return z3.And(cs)


def event_of(sys: CheckpointRules, names: Names, event: Any) -> REv:
    h = lambda x: names.of(H, x)  # noqa: E731
    kind = type(event).__name__
    if kind == "Issue":
        return REv(kind, sys, (names.item(event.item),))
    if kind == "Commit":
        return REv(kind, sys, (h(event.tree), *[h(e) for e in event.ids]))
    if kind == "Drift":
        return REv(kind, sys, (h(event.tree),))
    if kind == "Recertify":
        return REv(kind, sys, tuple(h(e) for e in event.ids))
    return REv(kind, sys, ())


# ---- traces as model objects (a counterexample replays through model/checkpoint.py) --------------

def read_state(sys: CheckpointRules, model: z3.ModelRef, s) -> mc.CheckpointState:
    show = sys.show
    n = model.eval(s["n"], model_completion=True).as_long()
    nh = model.eval(s["nh"], model_completion=True).as_long()
    e = s["by_id"]
    issued = tuple(MItem(show(model, item_id(e[s["iss"][i]])), show(model, item_check(e[s["iss"][i]])),
                         show(model, item_tree(e[s["iss"][i]])),
                         show(model, item_suite(e[s["iss"][i]])),
                         str(model.eval(item_verdict(e[s["iss"][i]]), model_completion=True)))
                   for i in range(n))
    has, done = show(model, s["has_ck"]), show(model, s["done"])
    return mc.CheckpointState(
        pins=tuple(sorted({(show(model, c), show(model, s["pins"][c]))
                           for c in sys.adm + sys.comp})),
        admission=tuple(show(model, c) for c in sys.adm),
        completion=tuple(show(model, c) for c in sys.comp),
        start=show(model, s["start"]), candidate=show(model, s["candidate"]),
        workspace=show(model, s["workspace"]),
        checkpoint=show(model, s["checkpoint"]) if has else None,
        generation=show(model, s["generation"]), issued=issued,
        history=tuple((show(model, s["h_tree"][i]),
                       tuple(show(model, s[f"h_e{j}"][i]) for j in range(sys.m)))
                      for i in range(nh)),
        done=done, receipt=show(model, s["receipt"]) if done else None,
        recertified_by=tuple(show(model, s[f"r_e{j}"]) for j in range(sys.k)) if done else ())


def read_event(sys: CheckpointRules, model: z3.ModelRef, ev: REv) -> Any:
    show, a = sys.show, ev.args
    if ev.kind == "Issue":
        e = a[0]
        return mc.Issue(MItem(show(model, item_id(e)), show(model, item_check(e)),
                              show(model, item_tree(e)), show(model, item_suite(e)),
                              str(model.eval(item_verdict(e), model_completion=True))))
    if ev.kind == "Commit":
        return mc.Commit(show(model, a[0]), tuple(show(model, x) for x in a[1:]))
    if ev.kind == "Drift":
        return mc.Drift(show(model, a[0]))
    if ev.kind == "Recertify":
        return mc.Recertify(tuple(show(model, x) for x in a))
    return mc.Restore()
