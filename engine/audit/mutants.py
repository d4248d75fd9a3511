"""Turn a loop's reference workspace into mutants and self-attestation probes.

A mutant is the reference workspace with some files replaced or removed. Two mutants that give the
same workspace after normalisation (Python by AST, JSON by canonical form, else bytes) are one
mutant, and a mutant equal to the reference is equivalent and dropped.

Why a sampled tier of a large artifact is drawn, not built whole: a 13,000-line tree has about
67,000 cosmic-ray sites; building and normalising them all to keep 15 takes longer than the
whole audit may. Up to `BUILD_WHOLE_BYTES` of artifact text (every catalogue loop, the examples)
a tier is built whole, deduplicated and then sampled, as it always was (the same mutants for a
seed); above, each (file, operator) gives its variants in a seeded order (`Operator.draw`), and
the corpus takes the next one of a (file, operator) chosen at random, until the cap holds that
many distinct mutants: every file and operator has the same chance at each draw, whatever its
size. A file's normal form is computed once per content.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
from dataclasses import dataclass
from functools import lru_cache

from loopproof.engine.audit.catalogue import Loop, workspace_files
from loopproof.engine.audit.operators import DELETED, TIERS, kind_of
from loopproof.engine.audit.operators import selfattest as sa

Files = dict[str, bytes]
BUILD_WHOLE_BYTES = 64 * 1024  # artifact text up to which a sampled tier is built whole


@dataclass(frozen=True)
class Mutant:
    """One workspace to judge. `tier` is 1 or 2 for corpus mutants and 0 for probes; `role` says
    what a probe is for (see selfattest_probes); `claim` names the trusted file or field."""

    loop: str
    operator: str
    family: str
    tier: int
    label: str
    changes: tuple[tuple[str, bytes | None], ...]
    by_construction: bool
    key: str
    role: str = "corpus"
    claim: str = ""


def read_reference(loop: Loop) -> Files:
    return {name: (loop.workspace / name).read_bytes() for name in workspace_files(loop.workspace)}


def apply(reference: Files, changes) -> Files:
    files = dict(reference)
    for name, content in changes:
        if content is None:
            files.pop(name, None)
        else:
            files[name] = content
    return files


_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=]", re.MULTILINE)  # PEP 263, lines 1-2
_STATEMENTS: dict[tuple[tuple[str, ...], bytes], str] = {}  # (futures, lines) -> ast.dump
_STATEMENTS_MAX = 20_000


def python_dump(content: bytes) -> str:
    """`ast.dump(ast.parse(content))`, the same string, built statement by statement: a
    top-level statement alone on its lines is dumped once per distinct bytes of those lines
    (from the line after the previous statement's last one to its own last: its decorators,
    comments and blank lines included) and taken from a cache after that. A mutant changes one
    statement of a module, and dumping the other thousand again at every mutant was most of a
    large tree's drawing time. Any other statement (sharing a line), and a file with a coding
    cookie or a bare carriage return (whose lines `ast` counts otherwise), is dumped as it is."""
    tree = ast.parse(content)
    if b"\r" in content or _CODING.search(b"\n".join(content.split(b"\n", 2)[:2])):
        return ast.dump(tree)
    lines = content.split(b"\n")
    body = tree.body
    futures = tuple(sorted(a.name for s in body if isinstance(s, ast.ImportFrom)
                           and s.module == "__future__" for a in s.names))
    spans = [(min([s.lineno, *(d.lineno for d in getattr(s, "decorator_list", ()))]),
              s.end_lineno or s.lineno) for s in body]
    parts = []
    for i, stmt in enumerate(body):
        first, last = spans[i]
        before = spans[i - 1][1] if i else 0
        if before >= first or (i + 1 < len(body) and spans[i + 1][0] <= last):
            parts.append(ast.dump(stmt))  # shares a line with another statement
            continue
        key = (futures, b"\n".join(lines[before:last]))
        dump = _STATEMENTS.get(key)
        if dump is None:
            if len(_STATEMENTS) >= _STATEMENTS_MAX:
                _STATEMENTS.clear()
            dump = _STATEMENTS[key] = ast.dump(stmt)
        parts.append(dump)
    return f"Module(body=[{', '.join(parts)}], type_ignores=[])"


def _normal(name: str, content: bytes) -> bytes:
    kind = kind_of(name)
    try:
        if kind == "python":
            return python_dump(content).encode()
        if kind == "json":
            return json.dumps(json.loads(content), sort_keys=True).encode()
    except (SyntaxError, ValueError):
        pass
    return content


@lru_cache(maxsize=256)
def _digest(name: str, content: bytes, normalize: bool) -> bytes:
    """One file's part of a workspace key (a reference file's is computed once, not once per
    mutant of another file)."""
    return hashlib.sha256(_normal(name, content) if normalize else content).digest()


def workspace_key(files: Files, normalize: bool = False) -> str:
    """The identity of a workspace: exact bytes for the verdict cache (a comment can be a claim),
    normalised content for deciding that two mutants are the same mutant."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + _digest(name, files[name], normalize))
    return digest.hexdigest()


@lru_cache(maxsize=256)
def holds_no_code(name: str, text: str | None) -> bool:
    """A Python file with nothing but a docstring (and `__future__` imports), as a package's
    `__init__.py` often is: its absence takes nothing away, so its absence mutants would be
    equivalent, not wrong by construction, and a gate that accepts them is not vacuous. Asked
    once per file and absence operator: its parse is cached."""
    if text is None or kind_of(name) != "python":
        return False
    try:
        body = ast.parse(text).body
    except SyntaxError:
        return False
    return all((isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                and isinstance(n.value.value, str))
               or (isinstance(n, ast.ImportFrom) and n.module == "__future__") for n in body)


def _text(content: bytes) -> str | None:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _encode(variant: str | None) -> bytes | None:
    return None if variant is DELETED else variant.encode("utf-8")


def corpus(loop: Loop, reference: Files, tier: int, seed: int, cap: int | None) -> list[Mutant]:
    """The tier's mutants of the loop's artifact files, deduplicated, equivalents dropped, and
    at most `cap` of them (a seeded sample; absence mutants are never sampled away)."""
    seen = {workspace_key(reference, normalize=True)}
    out: list[Mutant] = []

    def add(op, label: str, changes) -> None:
        files = apply(reference, changes)
        same = workspace_key(files, normalize=True)
        if same in seen:
            return
        seen.add(same)
        out.append(Mutant(loop.id, op.name, op.family, tier, label, tuple(changes),
                          op.destroys_by_construction, workspace_key(files)))

    operators = TIERS[tier]
    if tier == 1 and len(loop.artifact_files) > 1:
        for op in operators:  # the whole artifact absent or empty at once
            if op.name in ("delete", "empty"):
                variant = op.variants("*", "x")[0]
                add(op, f"{op.name}:*", [(f, _encode(variant)) for f in loop.artifact_files])
    pairs = [(name, text if text is not None else "", op)
             for name in loop.artifact_files for text in [_text(reference[name])]
             for op in operators
             if op.applies_to(name) and (text is not None or op.family == "absence")
             and not (op.family == "absence" and holds_no_code(name, text))]
    if cap is not None and sum(len(reference[f]) for f in loop.artifact_files) > \
            BUILD_WHOLE_BYTES:
        _draw(pairs, add, out, cap, random.Random(f"{seed}:{loop.id}:{tier}:drawn"))
        return out
    for name, text, op in pairs:
        for i, variant in enumerate(op.variants(name, text)):
            add(op, f"{op.name}:{name}#{i}", [(name, _encode(variant))])
    if cap is not None and len(out) > cap:
        keep = [m for m in out if m.family == "absence"]
        rest = [m for m in out if m.family != "absence"]
        room = max(cap - len(keep), 0)
        chosen = set(random.Random(f"{seed}:{loop.id}:{tier}").sample(range(len(rest)), room))
        out = keep + [m for i, m in enumerate(rest) if i in chosen]
    return out


def _draw(pairs: list, add, out: list[Mutant], cap: int, rng: random.Random) -> None:
    """Fill `out` up to `cap` distinct non-absence mutants: at each step a (file, operator) at
    random gives its next variant (`Operator.draw`); absence variants are all kept, never
    sampled."""
    streams = []
    for name, text, op in pairs:
        if op.family == "absence":
            for i, variant in enumerate(op.variants(name, text)):
                add(op, f"{op.name}:{name}#{i}", [(name, _encode(variant))])
        else:
            streams.append((name, op, op.draw(name, text, rng)))
    room = cap - sum(m.family != "absence" for m in out)
    while room > 0 and streams:
        k = rng.randrange(len(streams))
        name, op, stream = streams[k]
        try:
            tag, variant = next(stream)
        except StopIteration:
            streams.pop(k)
            continue
        if variant is None and op.family != "absence":  # not a mutant (a parso corner case)
            continue
        before = len(out)
        add(op, f"{op.name}:{name}#{tag}", [(name, _encode(variant))])
        room -= len(out) - before


def selfattest_probes(loop: Loop, reference: Files) -> list[Mutant]:
    """Probes for self-attestation, each with the artifact destroyed (deleted or emptied):
    `base` keeps no claim; `claim` keeps one claim group (all the worker's claim files, one of
    them, or a forged one); `negated` keeps the same group turned into its opposite; `field`
    negates one JSON field of it; `marker` keeps only the artifact's claim comments.
    report.self_attestation reads them together; `claim` names the group."""
    probes: list[Mutant] = []
    existing = {name: reference[name] for name in loop.claim_files}

    def probe(role: str, how: str, tag: str, claim: str, keep: dict[str, bytes]) -> None:
        destroy = None if how == "deleted" else b""
        changes = [(f, destroy) for f in loop.artifact_files]
        changes += [(f, None) for f in existing if f not in keep]
        changes += sorted(keep.items())
        files = apply(reference, changes)
        probes.append(Mutant(loop.id, "selfattest", "selfattest", 0, f"{how}:{tag}",
                             tuple(changes), True, workspace_key(files), role=role, claim=claim))

    def negated(group: dict[str, bytes]) -> dict[str, bytes]:
        return {n: sa.negate(n, c.decode("utf-8", "replace")).encode() for n, c in group.items()}

    groups: list[tuple[str, dict[str, bytes], tuple[str, ...]]] = []
    if len(existing) > 1:
        groups.append(("+".join(sorted(existing)), existing, ("deleted", "emptied")))
    for name, content in sorted(existing.items()):
        groups.append((name, {name: content}, ("deleted", "emptied")))
    for name, text in sorted(sa.FORGED.items()):
        if name not in existing and name not in loop.artifact_files:
            groups.append((name, {name: text.encode()}, ("emptied",)))

    for how in ("deleted", "emptied"):
        probe("base", how, "no-claims", "", {})
    for claim, group, hows in groups:
        for how in hows:
            probe("claim", how, claim, claim, group)
            if claim in existing or "+" in claim:  # a forged claim is only ever kept as forged
                probe("negated", how, f"{claim}:negated", claim, negated(group))
            if len(group) == 1 and claim in existing:
                for field, new in sa.field_negations(claim, existing[claim].decode("utf-8", "replace")):
                    probe("field", how, f"{claim}:{field}", claim, {claim: new.encode()})
    for name in loop.artifact_files:
        text = _text(reference[name])
        marker = sa.marker_lines(text) if text is not None else None
        if marker is not None:
            changes = [(f, b"" if f != name else marker.encode()) for f in loop.artifact_files]
            changes += [(f, None) for f in existing]
            probes.append(Mutant(loop.id, "selfattest", "selfattest", 0, f"emptied:marker:{name}",
                                 tuple(changes), True, workspace_key(apply(reference, changes)),
                                 role="marker", claim=f"{name}: {marker.strip()!r}"))
    return probes
