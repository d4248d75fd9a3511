"""Canonical counterexamples: an obligation prints the same trace whatever else ran before it.

Z3 picks *a* model, and which one depends on its internal state (term ids, declarations made by
earlier obligations in the same process), so the same failure could be shown by different runs.
A counterexample is made canonical by fixing its observable terms one at a time, in a fixed
order, each to the least value (in a fixed order of candidates) that keeps the formulas
satisfiable. Every step asks only whether some formulas are satisfiable, a fact about the
formulas and not about the solver, so the result depends on the formulas alone.

Candidates, least first: Bool False, True; Int by |v| then sign (0, 1, -1, 2, ...); Real the
least |v| among integers, then halves, quarters, ... down to 1/1024 (else the model's value);
an enumeration in declaration order; an element of an uninterpreted sort (a hash, a node) a new
one if it can be, else the earliest it can equal; a record (one constructor) field by field. The callers order the terms so that the trace
is also the simplest one: the event chosen at each step first (the lexicographically least run),
then the parameters, each event's arguments, then each state's fields.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import z3

from loopproof.proofs.solver import QUERY_TIMEOUT_MS, SEED, Unknown, witness

_FRESH = itertools.count()
DENOMINATORS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _has_values(t: z3.ExprRef) -> bool:
    """A term whose model value can be written back into a formula (not an array, not an
    element of an uninterpreted sort, whose model values mean nothing outside the model)."""
    sort = t.sort()
    if sort.kind() == z3.Z3_DATATYPE_SORT:
        return _enumeration(sort)
    return sort.kind() in (z3.Z3_BOOL_SORT, z3.Z3_INT_SORT, z3.Z3_REAL_SORT)


def _fields(terms: Iterable[z3.ExprRef]) -> list[z3.ExprRef]:
    """The terms, each record (a one-constructor datatype) replaced by its fields."""
    out: list[z3.ExprRef] = []
    for t in terms:
        sort = t.sort()
        if (sort.kind() == z3.Z3_DATATYPE_SORT and not _enumeration(sort)
                and sort.num_constructors() == 1):
            out += _fields(sort.accessor(0, i)(t) for i in range(sort.constructor(0).arity()))
        else:
            out.append(t)
    return out


def _enumeration(sort: z3.SortRef) -> bool:
    return all(sort.constructor(i).arity() == 0 for i in range(sort.num_constructors()))


class Canonical:
    """The formulas of one counterexample and the constraints fixed so far."""

    def __init__(self, what: str, formulas: Iterable[z3.BoolRef], model: z3.ModelRef) -> None:
        self.what = what
        self.formulas = list(formulas)
        self.model = model
        self.elements: dict[str, list[z3.ExprRef]] = {}  # per uninterpreted sort, in order
        self.fixed: set[int] = set()
        self._solver: z3.Solver | None = None

    def _sat(self, *extra: z3.BoolRef) -> z3.ModelRef | None:
        """A model of the formulas and `extra`, None when there is none; `Unknown` is raised.

        One solver holds the formulas (and every constraint fixed since), each question asked
        between a push and a pop. Which model it returns may differ from a fresh solver's, but
        only whether a question is satisfiable decides a value here (the least one that is), so
        the values fixed are the same; re-asserting the unrolled run for each of a trace's
        questions was most of the cost of the longer ones. What is left unfixed (a cell no
        trace shows as an input) is read from `final`'s model."""
        if self._solver is None:
            self._solver = z3.Solver()
            self._solver.set("timeout", QUERY_TIMEOUT_MS)
            self._solver.set("random_seed", SEED)
            self._solver.add(*self.formulas)
        solver = self._solver
        solver.push()
        try:
            solver.add(*extra)
            r = solver.check()
            if r == z3.sat:
                return solver.model()
            if r == z3.unsat:
                return None
            raise Unknown(f"canonical counterexample of {self.what}", solver.reason_unknown())
        finally:
            solver.pop()

    def final(self) -> z3.ModelRef:
        """The model of the formulas with every fixed value, from a fresh solver: an incremental
        solver's model of what was not fixed depends on what it was asked before."""
        self.model = witness(f"canonical counterexample of {self.what}", self.formulas)
        assert self.model is not None, "the fixed values were satisfiable"
        return self.model

    def _assert(self, *constraints: z3.BoolRef) -> None:
        self.formulas.extend(constraints)
        if self._solver is not None:
            self._solver.add(*constraints)

    def _commit(self, constraint: z3.BoolRef, model: z3.ModelRef) -> None:
        self._assert(constraint)
        self.model = model

    def value(self, t: z3.ExprRef) -> z3.ExprRef:
        return self.model.eval(t, model_completion=True)

    # ---- fixing terms -----------------------------------------------------------------------------
    def fix_all(self, terms: Iterable[z3.ExprRef]) -> None:
        """Fix every term, in order. When the current values are the only ones possible (a run
        from Init whose inputs are fixed), one question settles them all."""
        todo: list[z3.ExprRef] = []
        for t in _fields(terms):
            if t.get_id() not in self.fixed and all(t.get_id() != u.get_id() for u in todo):
                todo.append(t)
        self._settle(todo)

    def _settle(self, todo: list[z3.ExprRef]) -> None:
        """Fix `todo` in order: if their current values (and equalities) are forced, one
        question says so; else each half is settled on its own, down to single terms."""
        todo = [t for t in todo if t.get_id() not in self.fixed]
        if len(todo) <= 1:
            for t in todo:
                self.fix(t)
            return
        valued = [t for t in todo if _has_values(t)]
        elements = [t for t in todo if t.sort().kind() == z3.Z3_UNINTERPRETED_SORT]
        differs = [t != self.value(t) for t in valued] + self._pattern_differs(elements)
        if differs and self._sat(z3.Or(differs)) is None:
            self.fixed.update(t.get_id() for t in valued)
            self._name_forced(elements)
            for t in todo:  # anything else (arrays): nothing to choose
                self.fixed.add(t.get_id())
            return
        half = len(todo) // 2
        self._settle(todo[:half])
        self._settle(todo[half:])

    def _pattern_differs(self, elements: list[z3.ExprRef]) -> list[z3.BoolRef]:
        """Formulas of which one holds iff the elements (with the ones fixed before them) are
        equal to each other otherwise than in the current model."""
        out = []
        for i, t in enumerate(elements):
            others = list(self.elements.get(str(t.sort()), []))
            others += [u for u in elements[:i] if u.sort() == t.sort()]
            for r in others:
                same = z3.is_true(self.model.eval(t == r, model_completion=True))
                out.append(t != r if same else t == r)
        return out

    def _name_forced(self, elements: list[z3.ExprRef]) -> None:
        """Elements whose equalities are forced: each is the earliest element it equals (in the
        current model, which every model agrees with), else a new one."""
        for t in elements:
            reps = self.elements.setdefault(str(t.sort()), [])
            self.fixed.add(t.get_id())
            if not any(z3.is_true(self.model.eval(t == r, model_completion=True)) for r in reps):
                reps.append(t)

    def fix(self, t: z3.ExprRef) -> None:
        if t.get_id() in self.fixed:
            return
        self.fixed.add(t.get_id())
        sort = t.sort()
        if sort.kind() == z3.Z3_UNINTERPRETED_SORT:
            self._fix_element(t)
            return
        if (sort.kind() == z3.Z3_DATATYPE_SORT and not _enumeration(sort)
                and sort.num_constructors() == 1):  # a record: its fields, in order
            for i in range(sort.constructor(0).arity()):
                self.fix(sort.accessor(0, i)(t))
            return
        if not _has_values(t):  # arrays, functions: the callers list their cells instead
            return
        v = self.value(t)
        if self._sat(t != v) is None:  # forced: nothing to choose
            return
        if z3.is_bool(t):
            self._first(t, [z3.BoolVal(False), z3.BoolVal(True)])
        elif sort.kind() == z3.Z3_DATATYPE_SORT and isinstance(sort, z3.DatatypeSortRef):
            self._first(t, [sort.constructor(i)() for i in range(sort.num_constructors())
                            if sort.constructor(i).arity() == 0])
        elif z3.is_int(t):
            self._least_int(t, [])
        else:
            self._least_real(t)

    def _first(self, t: z3.ExprRef, candidates: Sequence[z3.ExprRef]) -> None:
        for c in candidates:
            m = self._sat(t == c)
            if m is not None:
                self._commit(t == c, m)
                return
        self._commit(t == self.value(t), self.model)  # pragma: no cover - a candidate is sat

    def _least_int(self, t: z3.ArithRef, side: list[z3.BoolRef],
                   model: z3.ModelRef | None = None) -> int:
        """Fix t (an Int) to its least |value| (non-negative first) under `side`; return it.
        `model` satisfies the formulas and `side` (the current model when `side` is empty)."""
        m = model if model is not None else self.model
        lo, hi = 0, abs(m.eval(t, model_completion=True).as_long())
        while lo < hi:
            mid = (lo + hi) // 2
            found = self._sat(*side, t >= -mid, t <= mid)
            if found is None:
                lo = mid + 1
            else:
                m, hi = found, abs(found.eval(t, model_completion=True).as_long())
        self._assert(*side)
        if m.eval(t, model_completion=True).as_long() != lo:
            positive = self._sat(t == lo)
            if positive is None:  # |t| = lo and t != lo in every model left: t = -lo
                self._commit(t == -lo, m)
                return -lo
            m = positive
        self._commit(t == lo, m)
        return lo

    def _least_real(self, t: z3.ArithRef) -> None:
        for d in DENOMINATORS:
            n = z3.Int(f"canonical_numerator_{next(_FRESH)}")
            side = [t * d == z3.ToReal(n)]
            m = self._sat(*side)
            if m is not None:
                self._least_int(n, side, m)
                return
        self._commit(t == self.value(t), self.model)

    def _fix_element(self, t: z3.ExprRef) -> None:
        reps = self.elements.setdefault(str(t.sort()), [])
        fresh = z3.And([t != r for r in reps]) if reps else z3.BoolVal(True)
        m = self._sat(fresh)
        if m is not None:
            self._commit(fresh, m)
            reps.append(t)
            return
        for r in reps:
            m = self._sat(t == r)
            if m is not None:
                self._commit(t == r, m)
                return
        raise AssertionError("unreachable: t equals some earlier element")  # pragma: no cover

    def least_universe(self, sort: z3.SortRef, at_most: int) -> list[z3.ExprRef]:
        """Make the universe of `sort` as small as it can be: k distinct named elements that
        every element equals, for the least k. They become the first elements of the sort."""
        x = z3.Const(f"canonical_x_{next(_FRESH)}", sort)
        for k in range(1, at_most + 1):
            es = [z3.Const(f"canonical_{sort}_{next(_FRESH)}", sort) for _ in range(k)]
            cover = z3.And(z3.ForAll([x], z3.Or([x == e for e in es])),
                           z3.Distinct(*es) if k > 1 else z3.BoolVal(True))
            m = self._sat(cover)
            if m is not None:
                self._commit(cover, m)
                self.elements[str(sort)] = list(es)
                self.fixed.update(e.get_id() for e in es)
                return es
        return []
