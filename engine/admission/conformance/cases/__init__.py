"""The conformance cases: deterministic failure injections against the admission layer.

Each case is a function `fn(tmp: Path) -> None` that injects one fault and asserts the specific
outcome the obligation demands (an AssertionError is a failure). The cases live in one module per
family (evidence, checkpoint, actions, verifier, liveness, receipts); `CASES`, by id, is the
single source of truth: `python -m loopproof.engine.admission.conformance` runs it,
tests/engine/admission/conformance/test_conformance.py runs it under pytest, and docs/conformance.md is generated
from it (`python -m loopproof.engine.admission.conformance --markdown`).
"""

from __future__ import annotations

from loopproof.engine.admission.conformance.cases import (  # noqa: F401  (importing registers the cases)
    actions,
    checkpoint,
    evidence,
    liveness,
    policy,
    receipts,
    verifier,
)
from loopproof.engine.admission.conformance.cases.registry import CASES as _REGISTERED
from loopproof.engine.admission.conformance.cases.registry import Case, case

__all__ = ["CASES", "Case", "case"]

CASES: dict[str, Case] = dict(sorted(_REGISTERED.items()))
