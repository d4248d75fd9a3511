"""G5 (receipts and stored proposals bind their content): the Z3 encoding of model/receipts.py.

The rule compares digests the engine computed: a receipt's body hash with the digest it states,
that digest with the ledger's `guard.receipt` anchors; a stored proposal's body hash and stated
digest with the digest the ledger names. Restated, that is all the guards say. What they are for:
a receipt the rule accepts has exactly a body that was issued and anchored, and a proposal it
accepts is exactly the reply the ledger named. That needs one assumption, stated as an axiom: the
digest is injective on bodies (no collisions; `body_of` is its left inverse), as G6 assumes of
the policy hash. Bodies are an uninterpreted sort, digests the `Hash` sort of proofs/records.py;
the ledger anchors only digests of bodies it issued (build_receipt, then `guard.receipt`).

Broken variants: a receipt rule that checks only that the stated digest is anchored (a body
edited beside the original digest field is accepted), and a proposal rule that checks only the
stated digest field (an edited reply keeping its digest field is replayed).
"""

from __future__ import annotations

from collections.abc import Callable

import z3

from loopproof.proofs.records import Hash
from loopproof.proofs.solver import witness
from loopproof.proofs.trace import Step, Trace

Body = z3.DeclareSort("Body")
DIGEST = z3.Function("digest", Body, Hash)
BODY_OF = z3.Function("body_of", Hash, Body)
Anchored = Callable[[z3.ExprRef], z3.BoolRef]


def receipt_accepts(body_digest: z3.ExprRef, stated: z3.ExprRef,
                    anchored: Anchored) -> z3.BoolRef:
    """`model.receipts.receipt_problems(...) == []`, on terms of any sort."""
    return z3.And(body_digest == stated, anchored(stated))


def proposal_accepts(body_digest: z3.ExprRef, stated: z3.ExprRef,
                     named: z3.ExprRef) -> z3.BoolRef:
    """`model.receipts.proposal_problems(...) == []`, on terms of any sort."""
    return z3.And(body_digest == named, stated == named)


def anchored_only(body_digest: z3.ExprRef, stated: z3.ExprRef, anchored: Anchored) -> z3.BoolRef:
    """Broken: the stated digest is anchored; whether the body hashes to it is not asked."""
    return anchored(stated)


def stated_only(body_digest: z3.ExprRef, stated: z3.ExprRef, named: z3.ExprRef) -> z3.BoolRef:
    """Broken: the proposal's digest field is the named one; its body is not hashed."""
    return stated == named


def injective() -> z3.BoolRef:
    b = z3.Const("b", Body)
    return z3.ForAll([b], BODY_OF(DIGEST(b)) == b, patterns=[DIGEST(b)])


def _receipt_binds(accepts) -> Trace | None:
    issued = z3.Array("issued", Body, z3.BoolSort())
    anchors = z3.Array("anchors", Hash, z3.BoolSort())
    h = z3.Const("h", Hash)
    ledger = z3.ForAll([h], z3.Implies(anchors[h], z3.Exists(
        [z3.Const("i", Body)], z3.And(issued[z3.Const("i", Body)],
                                      DIGEST(z3.Const("i", Body)) == h))))
    body, stated = z3.Const("body", Body), z3.Const("stated", Hash)
    bad = z3.And(accepts(DIGEST(body), stated, lambda d: anchors[d]),
                 z3.Not(z3.And(issued[body], anchors[DIGEST(body)])))
    honest = z3.And(accepts(DIGEST(body), stated, lambda d: anchors[d]), issued[body])
    if witness("an issued, anchored receipt is accepted", [injective(), ledger, honest]) is None:
        return Trace("vacuous", "no receipt is accepted under the assumptions")
    return _cex("receipt", witness("a receipt the rule accepts binds its body",
                                   [injective(), ledger, bad]))


def _proposal_binds(accepts) -> Trace | None:
    reply, stored, stated = z3.Const("reply", Body), z3.Const("stored", Body), z3.Const("stated", Hash)
    named = DIGEST(reply)  # store_proposal: the ledger names the reply's digest
    bad = z3.And(accepts(DIGEST(stored), stated, named), stored != reply)
    return _cex("proposal", witness("a stored proposal the rule accepts is the named reply",
                                    [injective(), bad]))


def _cex(kind: str, model: z3.ModelRef | None) -> Trace | None:
    """The counterexample as a two-step trace with canonical labels (b0, b1, h0, ...: which
    model values are equal, never what Z3 calls them)."""
    if model is None:
        return None
    labels: list[tuple[z3.ExprRef, str]] = []

    def label(t: z3.ExprRef, prefix: str) -> str:
        v = model.eval(t, model_completion=True)
        for w, name in labels:
            if w.sort() == v.sort() and z3.is_true(model.eval(w == v, model_completion=True)):
                return name
        name = f"{prefix}{sum(1 for w, _ in labels if w.sort() == v.sort())}"
        labels.append((v, name))
        return name

    if kind == "receipt":
        body, stated = z3.Const("body", Body), z3.Const("stated", Hash)
        start = {"issued": label(BODY_OF(stated), "b"), "anchored": label(stated, "h")}
        presented = {"body": label(body, "b"), "stated_digest": start["anchored"],
                     "digest_of_body": label(DIGEST(body), "h"), "accepted": True}
        steps = [Step(None, start), Step(f"Present({presented['body']}, {start['anchored']})",
                                         presented)]
        note = "an accepted receipt whose body was not issued with its digest"
    else:
        reply, stored = z3.Const("reply", Body), z3.Const("stored", Body)
        start = {"reply": label(reply, "b"), "named": label(DIGEST(reply), "h")}
        stated = z3.Const("stated", Hash)
        replayed = {"stored": label(stored, "b"), "stated_digest": label(stated, "h"),
                    "digest_of_body": label(DIGEST(stored), "h"), "accepted": True}
        steps = [Step(None, start), Step(f"Read({replayed['stored']}, {replayed['stated_digest']})",
                                         replayed)]
        note = "a replayed proposal that is not the reply the ledger named"
    return Trace("trace", note, steps)


def check_binds() -> Trace | None:
    """Both rules, with an injective digest: what they accept is what was issued and named."""
    return _receipt_binds(receipt_accepts) or _proposal_binds(proposal_accepts)


def receipt_anchor_only() -> Trace | None:
    return _receipt_binds(anchored_only)


def proposal_stated_only() -> Trace | None:
    return _proposal_binds(stated_only)
