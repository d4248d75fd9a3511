"""Sanity obligations for the run encoding: Init is satisfiable and every declared transition can
fire from some state satisfying the invariant it is proved against, on every DAG of the family.
Without these, a proof over a contradictory invariant or a dead transition would pass vacuously."""

from __future__ import annotations

from loopproof.proofs.checks import Found, check_enabled, check_init_satisfiable, first
from loopproof.proofs.encoding import Params, RunEncoding
from loopproof.proofs.family import shapes
from loopproof.proofs.g1_finishes import attempt_invariant, ops_encoding, ops_invariant
from loopproof.proofs.g3_no_overspend import spend_invariant


def check_g1_sanity() -> Found:
    def one(graph) -> Found:
        enc = RunEncoding(graph, Params.symbolic(graph))
        ops = ops_encoding(graph)

        def inv(s):
            return attempt_invariant(enc, s)

        def ops_inv(s):
            return ops_invariant(ops, s)

        return (check_init_satisfiable(enc, inv) or check_enabled(enc, inv)
                or check_init_satisfiable(ops, ops_inv) or check_enabled(ops, ops_inv))
    return first(one(g) for g in shapes())


def check_g3_sanity() -> Found:
    def one(graph) -> Found:
        enc = RunEncoding(graph, Params.symbolic(graph))

        def inv(s):
            return spend_invariant(enc, s)

        return check_init_satisfiable(enc, inv) or check_enabled(enc, inv)
    return first(one(g) for g in shapes())
