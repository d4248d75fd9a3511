"""results/ as one tree of values, addressed by keys like `crash/summary/outcome_recovered`.

Why one tree: a key names the file and the field at once (results/crash/summary.json, field
`outcome_recovered`), so a number in the paper or the docs says where it came from, and a study
that adds a key or a whole folder is picked up without touching the paper. Lists are indexed by
position (`transition/summary/current_correct/0`) and have a length (`.../tasks/@len`); proofs.json, a list of obligations, is indexed
by obligation id (`proofs/proofs/G1-attempt-bound/result`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The files whose scalars become macros (globs under results/). Other files (row-level CSV and
# JSON, ledgers, stored replies) are read by the tables that need them, not flattened.
FLATTENED = ("*/summary.json", "*/manifest.json", "*/timing.json", "*/timings.json",
             "bounds/explorer.json", "bench/bench.json", "proofs/proofs.json", "audit/*.json",
             "examples/*.json")


class MissingResult(KeyError):
    """A key that results/ does not have (a study not run, or a key it no longer writes)."""


def _proof_counts(results: Results) -> dict[str, Any]:
    """Counts over results/proofs/proofs.json: how many obligations, how many proved and refuted,
    how many are broken variants, how many gave their expected result, per guarantee too."""
    obs = [o for o in results.load("proofs/proofs.json") if isinstance(o, dict)]

    def counts(xs: list[dict]) -> dict[str, Any]:
        return {"obligations": len(xs),
                "proved": sum(o.get("result") == "proved" for o in xs),
                "refuted": sum(o.get("result") == "refuted" for o in xs),
                "broken_variants": sum(o.get("expect") == "refuted" for o in xs),
                "as_expected": sum(o.get("result") == o.get("expect") for o in xs),
                "not_as_expected": sum(o.get("result") != o.get("expect") for o in xs),
                "seconds": round(sum(float(o.get("seconds") or 0) for o in xs), 1)}
    out = counts(obs)
    out["guarantees"] = {g: counts([o for o in obs if o.get("guarantee") == g])
                         for g in sorted({str(o.get("guarantee")) for o in obs})}
    return out


# Files computed from other result files (name -> (the file it reads, how)); their keys read
# like any other (`proofs/counts/refuted`), and values.json names the file they come from.
def _model_effects(results: Results) -> dict[str, Any]:
    """What the local model's distinct replies did to the code (report.patch_effects)."""
    from experiments.transition.report import patch_effects

    out = patch_effects(results.root / "transition-llm" / "replies.jsonl")
    if out is None:
        raise MissingResult("results/transition-llm/replies.jsonl: not found")
    return out


DERIVED = {"proofs/counts.json": ("proofs/proofs.json", _proof_counts),
           "transition-llm/effects.json": ("transition-llm/replies.jsonl", _model_effects)}


def _segments(key: str) -> list[str]:
    return [s for s in key.split("/") if s]


def _by_id(value: Any) -> Any:
    """A list of objects that all carry a unique string `id` is addressed by id, not position."""
    if (isinstance(value, list) and value and all(isinstance(v, dict) and isinstance(
            v.get("id"), str) for v in value) and len({v["id"] for v in value}) == len(value)):
        return {v["id"]: v for v in value}
    return value


def flatten(value: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """Every scalar under `value` as (key, scalar); NaN and infinities are left out."""
    value = _by_id(value)
    if isinstance(value, dict):
        for k in sorted(value, key=str):
            if "/" not in str(k):  # a key with a slash could not be addressed
                yield from flatten(value[k], f"{prefix}/{k}")
    elif isinstance(value, list):
        yield f"{prefix}/@len", len(value)
        for i, v in enumerate(value):
            yield from flatten(v, f"{prefix}/{i}")
    elif isinstance(value, float) and not math.isfinite(value):
        return
    else:
        yield prefix, value


@dataclass
class Results:
    """Read-only view of a results folder; files are parsed on first use."""

    root: Path
    _cache: dict[Path, Any] = field(default_factory=dict)

    def exists(self, path: str) -> bool:
        return (self.root / path).exists()

    def load(self, path: str) -> Any:
        """The parsed JSON file results/<path> (MissingResult when absent or unreadable)."""
        p = self.root / path
        if path in DERIVED and not p.exists():
            source, fn = DERIVED[path]
            if p not in self._cache:
                self._cache[p] = fn(self)
            return self._cache[p]
        if p not in self._cache:
            try:
                self._cache[p] = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise MissingResult(f"results/{path}: {exc.__class__.__name__}") from None
        return self._cache[p]

    def _split(self, key: str) -> tuple[str, list[str]]:
        """(file relative to root, path inside it) for a key."""
        segs = _segments(key)
        for i in range(1, len(segs) + 1):
            rel = "/".join(segs[:i]) + ".json"
            if (self.root / rel).is_file() or (rel in DERIVED and
                                                (self.root / DERIVED[rel][0]).is_file()):
                return rel, segs[i:]
        raise MissingResult(f"{key}: no results/<...>.json file on this key's path")

    def get(self, key: str) -> Any:
        rel, inner = self._split(key)
        node = self.load(rel)
        for s in inner:
            if s == "@len" and isinstance(node, list):
                node = len(node)
                continue
            node = _by_id(node)
            if isinstance(node, dict) and s in node:
                node = node[s]
            elif isinstance(node, list) and s.isdigit() and int(s) < len(node):
                node = node[int(s)]
            else:
                raise MissingResult(f"{key}: results/{rel} has no {s!r} there")
        return node

    def has(self, key: str) -> bool:
        try:
            self.get(key)
        except MissingResult:
            return False
        return True

    def files(self) -> list[str]:
        """The flattened files present, relative to root, sorted."""
        if not self.root.is_dir():
            return []
        found = {p.relative_to(self.root).as_posix() for g in FLATTENED
                 for p in self.root.glob(g) if p.is_file()}
        found |= {rel for rel, (source, _fn) in DERIVED.items() if (self.root / source).is_file()}
        return sorted(found)

    def scalars(self) -> Iterator[tuple[str, Any]]:
        """(key, value) for every scalar of every flattened file that parses."""
        for rel in self.files():
            try:
                data = self.load(rel)
            except MissingResult:
                continue
            yield from flatten(data, rel.removesuffix(".json"))
