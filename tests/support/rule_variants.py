"""Variants of the rule table (model/run_rules.py) that the tests plant: one rule changed each,
so that a backend which kept a copy of its own would not follow it."""

from __future__ import annotations

from loopproof.model.run_rules import RunRules


class FreeRepairs(RunRules):
    """One effect changed: a repair that spends nothing of K."""

    def effect_repair(self, s, ev, u):
        u.for_each(s.subtree(ev.target), lambda w: self.reset(s, u, w))


class CancelAfterAnAttempt(RunRules):
    """One guard changed: a cancel needs an attempt made in the activation (docs/extending.md's
    example C)."""

    def guard_cancel(self, s, ev, g):
        super().guard_cancel(s, ev, g)
        g.need(s.attempts(ev.node) >= 1, lambda graph, st, v: f"{v!r} made no attempt", ev.node)
