"""One way to ask Z3 a question: a fresh solver with a per-query timeout, and `unknown` kept
distinct from `sat`/`unsat` so that no caller can mistake a timeout for a proof."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

import z3

QUERY_TIMEOUT_MS = 20_000  # a query that takes longer is `unknown`, and unknown is a failure
SEED = 0  # every solver's random seed, fixed (counterexamples are made canonical as well)


class Answer(StrEnum):
    SAT = "sat"
    UNSAT = "unsat"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Reply:
    """A solver's answer and, when it is `sat`, the model that witnesses it."""

    answer: Answer
    model: z3.ModelRef | None = None
    reason: str = ""


class Unknown(Exception):
    """Z3 answered `unknown` (timeout, incompleteness): the obligation fails, it is not proved."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what}: Z3 answered unknown ({reason})")
        self.what = what
        self.reason = reason


def ask(formulas: Iterable[z3.BoolRef], timeout_ms: int | None = None) -> Reply:
    """Is the conjunction of `formulas` satisfiable? A fresh solver per question (Z3's
    incremental mode gives up on quantified lambdas that a fresh solver decides at once)."""
    s = z3.Solver()
    s.set("timeout", QUERY_TIMEOUT_MS if timeout_ms is None else timeout_ms)
    s.set("random_seed", SEED)
    s.add(*formulas)
    r = s.check()
    if r == z3.sat:
        return Reply(Answer.SAT, s.model())
    if r == z3.unsat:
        return Reply(Answer.UNSAT)
    return Reply(Answer.UNKNOWN, reason=s.reason_unknown())


def witness(what: str, formulas: Iterable[z3.BoolRef],
            timeout_ms: int | None = None) -> z3.ModelRef | None:
    """A model of `formulas`, None when they are unsatisfiable; raises `Unknown` otherwise."""
    reply = ask(formulas, timeout_ms)
    if reply.answer is Answer.UNKNOWN:
        raise Unknown(what, reply.reason)
    return reply.model
