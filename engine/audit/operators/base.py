"""The operator protocol: a named, tiered rewrite of one artifact file, with its own examples.

Why examples live on the operator (as in cosmic-ray): an operator is only trusted for what it is
shown to do, and the same pairs are its tests (tests/engine/audit/test_audit_operators.py runs every one).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

DELETED = None  # a variant of None means "the file is removed"

KINDS = ("python", "json", "markdown", "csv", "text")
_SUFFIX = {".py": "python", ".json": "json", ".md": "markdown", ".csv": "csv"}


def kind_of(path: str) -> str:
    """The content kind of a workspace file, from its suffix; everything else is plain text."""
    return _SUFFIX.get(PurePosixPath(path).suffix.lower(), "text")


@dataclass(frozen=True)
class Example:
    """`operator.mutate(path, before)` must yield `after` (None: the file is deleted)."""

    before: str
    after: str | None
    path: str = "artifact.txt"


@dataclass(frozen=True)
class Operator:
    """A mutation operator. `destroys_by_construction`: every variant is wrong whatever the oracle
    says (absence); otherwise a variant counts as destroying only when the loop's oracle rejects it.
    `family` is "absence" (what vacuity is measured with), "structural", "semantic" or "content"."""

    name: str
    tier: int
    family: str
    kinds: tuple[str, ...]
    destroys_by_construction: bool
    examples: tuple[Example, ...]
    doc: str

    def applies_to(self, path: str) -> bool:
        return kind_of(path) in self.kinds

    def variants(self, path: str, text: str) -> list[str | None]:  # pragma: no cover - abstract
        raise NotImplementedError

    def draw(self, path: str, text: str, rng: random.Random) -> Iterator[tuple[str, str | None]]:
        """The variants in a seeded order, each with a tag naming it, built only as they are
        asked for: a sampled corpus of a large file takes a few of them
        (engine/audit/mutants.py; a 770-line module has about 4,000 cosmic-ray sites)."""
        variants = self.variants(path, text)
        for i in rng.sample(range(len(variants)), len(variants)):
            yield str(i), variants[i]


class FunctionOperator(Operator):
    """An operator whose variants come from a plain function `fn(path, text) -> list`."""

    def __init__(self, fn, **fields) -> None:
        object.__setattr__(self, "_fn", fn)
        super().__init__(**fields)

    def variants(self, path: str, text: str) -> list[str | None]:
        seen: list[str | None] = []
        for variant in self._fn(path, text):
            if variant != text and variant not in seen:
                seen.append(variant)
        return seen


def operator(*, name: str, tier: int, family: str, kinds: tuple[str, ...] = KINDS,
             by_construction: bool, examples: tuple[Example, ...]):
    """Decorator: turn `fn(path, text) -> list[str | None]` into an Operator named `name`."""

    def wrap(fn) -> Operator:
        return FunctionOperator(fn, name=name, tier=tier, family=family, kinds=kinds,
                                destroys_by_construction=by_construction, examples=examples,
                                doc=(fn.__doc__ or "").strip())

    return wrap
