"""Operator families by tier. Tier 1 is the development corpus; tier 2 is held out."""

from loopproof.engine.audit.operators import tier1, tier2
from loopproof.engine.audit.operators.base import DELETED, Example, Operator, kind_of

TIERS: dict[int, tuple[Operator, ...]] = {1: tier1.OPERATORS, 2: tier2.OPERATORS}
ALL: tuple[Operator, ...] = tier1.OPERATORS + tier2.OPERATORS

__all__ = ["ALL", "DELETED", "TIERS", "Example", "Operator", "kind_of"]
