"""Receipts and stored proposals bind their content: the rule the engine asks before it trusts
either (engine/admission/receipt.py, guards "receipt.digest" and "receipt.anchored";
engine/admission/proposals.py, guard "proposal.digest").

Digests are opaque values here: the engine hashes (engine/system/canonical.py) and hands this
rule the hash of the content it holds, the digest the content states and what the ledger
anchors. Why a model rule: with a collision-free hash, a receipt it accepts has exactly the body
that was issued and anchored, and a proposal it accepts is exactly the reply the ledger named
(proofs/g5_receipts.py) -- neither check alone says so: a digest anchored in the ledger says
nothing of a body edited beside it, and a body that hashes to its stated digest says nothing of
who issued it.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable

EDITED = "receipt content does not match its digest (edited after issue)"
UNANCHORED = "receipt digest is not anchored in the ledger"
ALTERED = "altered"


def receipt_problems(body_digest: Hashable, stated_digest: Hashable,
                     anchors: Collection[Hashable]) -> list[tuple[str, str]]:
    """Every (rule, reason) a receipt is refused for: "digest" when its body does not hash to
    the digest it states, "anchored" when no `guard.receipt` record anchors that digest."""
    out = []
    if body_digest != stated_digest:
        out.append(("digest", EDITED))
    if stated_digest not in anchors:
        out.append(("anchored", UNANCHORED))
    return out


def proposal_problems(body_digest: Hashable, stated_digest: Hashable,
                      named_digest: Hashable) -> list[tuple[str, str]]:
    """The ("digest", reason) a stored proposal is refused for: its body must hash to the digest
    the ledger names, and the digest it states must be that one."""
    if body_digest != named_digest or stated_digest != named_digest:
        return [("digest", ALTERED)]
    return []
