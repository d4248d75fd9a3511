"""The human policy (goals, scope, gate and suite identity, budget, release conditions, signing
key), loaded from TOML, validated, and hash-pinned for the length of a run.

Why pin: a harness that can change its own configuration must not be able to change what it is
judged by. The runner pins the policy at start (`PolicyPin.load`, digests in the first ledger
record) and calls `pin.check()` before every stage; any change — a policy field, the policy
file's bytes, a gate or suite file, the public key — stops the run with PolicyChanged (exit 5),
naming the field. On resume, `PolicyPin.resume(path, recorded)` compares against the digests
recorded at start, so a change made while the run was down is caught too.

The decision is the policy model's (model/policy.py): the pin holds a `PolicyState` pinned to
the recorded digests, and `check()` asks it whether a stage may run, through the guard
"policy.pinned" (engine/policy/guards.py).

Workers have no write path to the policy: the runner gives a worker only its own workspace as
working directory and a filtered environment (engine.system.process.safe_environment), and
`PolicyPin.assert_outside(root)` refuses a policy whose files lie inside a worker's root.

Each field is declared once, in its table's `Table` (engine/system/fields.py), with its
validator and one line of doc; docs/ledger.md's table of them is printed from the declarations.

Why one module: just over 400 lines on purpose, since a field's declaration, its validator and
the pin that hashes the files it names change together: a new field that names a file is
pinned by the same module that parses it, and `PolicyPin.check` reads the policy with the
same parser that loaded it.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from loopproof.engine.policy.guards import refuse
from loopproof.engine.system.canonical import digest as canonical_digest
from loopproof.engine.system.errors import BadInput, LedgerCorrupt
from loopproof.engine.system.fields import (
    ABSENT,
    Check,
    Field,
    Table,
    Verdict,
    bad_input,
    dotted,
    table,
)
from loopproof.engine.system.trees import file_sha256
from loopproof.model import budget as mb
from loopproof.model import policy as mp

RELEASE_CONDITIONS = mp.RELEASE_CONDITIONS  # the rule lives in model/policy.py


class PolicyChanged(LedgerCorrupt):
    """The pinned policy, or a file it names, changed since the run started: exit 5."""


# ---- the fields ---------------------------------------------------------------------------------

def _strings(nonempty: bool) -> Check:
    def check(v: Any) -> Verdict:
        if not isinstance(v, list) or not all(isinstance(s, str) and s.strip() for s in v):
            return "must be a list of non-empty strings"
        if nonempty and not v:
            return "must not be empty"
        if len(set(v)) != len(v):
            return "lists an entry twice"
        return None
    return check


def _number(least: float, integer: bool) -> Check:
    def check(v: Any) -> Verdict:
        kinds = (int,) if integer else (int, float)
        if isinstance(v, bool) or not isinstance(v, kinds):
            return f"must be {'an integer' if integer else 'a number'}"
        if v != v or v in (float("inf"), float("-inf")):
            return "must be a finite number"
        if v < least:
            return f"must be >= {least:g}"
        return None
    return check


def _conditions(v: Any) -> Verdict:
    bad = _strings(nonempty=False)(v)
    if bad:
        return bad
    unknown = [c for c in v if c not in RELEASE_CONDITIONS]
    return f"has unknown condition(s) {unknown}" if unknown else None


def _text(v: Any) -> Verdict:
    return None if isinstance(v, str) and v.strip() else "must be a non-empty string"


def _version(v: Any) -> Verdict:
    return None if v == 1 and not isinstance(v, bool) else "must be 1 (the only format so far)"


def _field(name: str, holds: str, check: Check, doc: str, example: str, **kw: Any) -> Field:
    """A policy field: its fix shows an example and says what the field is for."""
    return Field(name, holds, doc, check, example,
                 fix=f"write e.g. `{name} = {example}` ({doc})", **kw)


STRINGS = "a list of strings"
TABLES: dict[str, Table] = {t.title[1:-1]: t for t in (
    Table("[policy]", (
        _field("version", "`1`", _version, "format version of this policy file", "1",
               default=1),
        _field("goals", STRINGS, _strings(True), "what the run is for, in words; pinned, never "
               "edited by a worker", '["every node DONE with a PASS verdict"]'),
        _field("scope", STRINGS, _strings(True), "what workers may change: paths relative to "
               "their own workspace; nothing outside a workspace is in scope", '["."]'),
    ), prefix="policy."),
    Table("[gate]", (
        _field("files", "a list of paths", _strings(True), "gate identity: the gate programs "
               "and data, relative to the policy file's folder; content-hashed at start, "
               "re-checked before every stage", '["gates/check_it.py"]'),
    ), prefix="gate."),
    Table("[suite]", (
        _field("files", "a list of paths", _strings(False), "suite identity: the test or "
               "mutant suite the gates read; content-hashed like gate.files",
               '["gates/cases.json"]', default=[]),
    ), prefix="suite."),
    Table("[budget]", (
        _field("spend", "a number >= 0", _number(0, False), "run-wide spend budget B, in "
               "spend units; the graph's spend_budget may not exceed it", "60.0"),
        _field("repairs", "an integer >= 0", _number(0, True), "global repair budget K; the "
               "graph's repair_budget may not exceed it", "1"),
        _field("attempts", "an integer >= 1", _number(1, True), "a cap on the closed-form "
               "attempt bound W of the graph", "20", default=ABSENT),
    ), prefix="budget."),
    Table("[release]", (
        _field("conditions", "a list of conditions", _conditions, "what must hold before a "
               f"result is released; any of {', '.join(sorted(RELEASE_CONDITIONS))}",
               '["all_done", "ledger_verified"]', default=["all_done", "ledger_verified"]),
        _field("approver", "a name", _text, "the human who signs off a release (needed by "
               "'approved')", '"alice"', default=ABSENT),
    ), prefix="release."),
    Table("[signing]", (
        _field("private_key", "a path", _text, "Ed25519 private key (PEM) that signs the ledger "
               "head; keep it outside every worker's reach", '"/etc/loopproof/run.key"',
               default=ABSENT),
        _field("public_key", "a path", _text, "the matching public key (with private_key); "
               "pinned by content, used by `loopproof verify --public-key`",
               '"/etc/loopproof/run.pub"', default=ABSENT),
    ), prefix="signing."),
)}
POLICY = Table("the policy file", (Field(name, "a table", f"the {name} fields", table,
                                       default=ABSENT) for name in TABLES), noun="table")
# Every field by its dotted name ("budget.spend"), for the docs' table and the planner's
# catalogue (engine/policy/catalog.py): the declarations above, named as a run refers to them.
FIELDS: tuple[Field, ...] = dotted("the policy file", TABLES.values()).fields
BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
PINNED = {"gate.files": "files", "suite.files": "files", "signing.public_key": "file"}


@dataclass(frozen=True)
class Policy:
    """A validated policy. `values` maps every field name to its value (defaults filled in)."""

    path: Path
    values: Mapping[str, Any]
    fields: Mapping[str, str] = field(init=False)   # field name -> sha256 of its value
    digest: str = field(init=False)                 # sha256 of the canonical content

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", {k: canonical_digest(v)
                                            for k, v in sorted(self.values.items())})
        object.__setattr__(self, "digest", canonical_digest(dict(self.values)))

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def folder(self) -> Path:
        return self.path.parent

    def resolve(self, p: str) -> Path:
        q = Path(p).expanduser()
        return q if q.is_absolute() else (self.folder / q)

    def pinned_paths(self) -> dict[str, list[Path]]:
        """Field -> the files whose content is pinned under it."""
        out: dict[str, list[Path]] = {}
        for name, kind in PINNED.items():
            v = self.values.get(name)
            if v is None:
                continue
            out[name] = [self.resolve(p) for p in v] if kind == "files" else [self.resolve(v)]
        return out

    def key_paths(self) -> tuple[Path | None, Path | None]:
        priv, pub = self.values.get("signing.private_key"), self.values.get("signing.public_key")
        return (self.resolve(priv) if priv else None, self.resolve(pub) if pub else None)

    def admits(self, *, spend_budget: float, repair_budget: int,
               attempt_bound: int | None = None) -> list[str]:
        """Ways a graph asks for more than the policy allows ([] when it fits): the budget
        model's rule (model/budget.py)."""
        return mb.refusals(mb.Budgets(self.values["budget.spend"], self.values["budget.repairs"],
                                      self.values.get("budget.attempts")),
                           mb.Asked(spend_budget, repair_budget, attempt_bound))

    def release_unmet(self, *, outcome: str, ledger_status: str, pins_unchanged: bool,
                      signed: bool, approved_by: str | None = None) -> list[str]:
        """The release conditions that do not hold ([] means the result may be released): the
        model's rule (model/policy.py) on this policy's conditions and approver."""
        return mp.release_unmet(self.values["release.conditions"],
                                self.values.get("release.approver"),
                                mp.RunEnd(outcome, ledger_status, pins_unchanged, signed,
                                          approved_by))


def load_policy(path: Path | str) -> Policy:
    """Read, validate and return the policy; BadInput names the file, field and fix."""
    path = Path(path)
    raw = _read_or_bad(path)
    return parse_policy(raw, path)


def parse_policy(raw: bytes, path: Path) -> Policy:
    name = str(path)
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadInput(name, "policy", "is not UTF-8 text", "save the file as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(name, "policy", f"is not valid TOML ({exc})",
                       "fix the TOML syntax at the position given") from None
    POLICY.read(doc, bad_input(name, "[{}]"))
    values: dict[str, Any] = {}
    for tname, declared in TABLES.items():
        read = declared.read(doc.get(tname, {}), bad_input(name))
        values.update((declared.prefix + k, v) for k, v in read.items())
    policy = Policy(path, values)
    if ("signing.private_key" in values) != ("signing.public_key" in values):
        raise BadInput(name, "signing", "names only one of private_key and public_key",
                       "give both keys (see `python -m loopproof.engine.record.signing keygen`) or neither")
    if "signed" in values["release.conditions"] and "signing.private_key" not in values:
        raise BadInput(name, "release.conditions", "asks for 'signed' but [signing] names no key",
                       "add [signing] private_key and public_key, or drop 'signed'")
    if "approved" in values["release.conditions"] and "release.approver" not in values:
        raise BadInput(name, "release.conditions", "asks for 'approved' but names no approver",
                       "add release.approver, or drop 'approved'")
    for fname, paths in policy.pinned_paths().items():
        for p in paths:
            if not p.is_file():
                raise BadInput(name, fname, f"names {p}, which is not a file",
                               "fix the path (relative paths start at the policy's folder)")
    return policy


# ---- the pin -------------------------------------------------------------------------------------

def _hash_files(policy: Policy) -> dict[str, dict[str, str]]:
    return {fname: {str(p): file_sha256(p) for p in paths}
            for fname, paths in sorted(policy.pinned_paths().items())}


class PolicyPin:
    """The policy as it was at run start; `check()` fails closed on any change."""

    def __init__(self, path: Path, expected: Mapping[str, Any]) -> None:
        self.path = path
        self.expected = expected
        self.policy: Policy | None = None
        # the policy model (model/policy.py), pinned to the recorded digests: every check asks
        # it whether a stage may run
        self.state = mp.Pin().apply(mp.PolicyState(current=_summary(
            expected["file_digest"], expected["files"])))

    @classmethod
    def load(cls, path: Path | str) -> PolicyPin:
        """Load, validate and pin the policy now (run start). Bad policy: BadInput, exit 2."""
        path = Path(path).resolve()
        raw = _read_or_bad(path)
        policy = parse_policy(raw, path)
        expected = {"path": str(path), "digest": policy.digest,
                    "file_digest": hashlib.sha256(raw).hexdigest(),
                    "fields": dict(policy.fields), "files": _hash_files(policy)}
        pin = cls(path, expected)
        pin.policy = policy
        return pin

    @classmethod
    def resume(cls, path: Path | str | None, recorded: Mapping[str, Any]) -> PolicyPin:
        """Re-pin from the digests recorded at run start and check the files still match them."""
        for key in ("path", "digest", "file_digest", "fields", "files"):
            if key not in recorded:
                raise LedgerCorrupt(f"policy record lacks {key!r}; fix: restore the ledger from a "
                                    f"trusted copy")
        pin = cls(Path(path or recorded["path"]).resolve(), dict(recorded))
        pin.check()
        pin.policy = parse_policy(pin.path.read_bytes(), pin.path)
        return pin

    def record(self) -> dict[str, Any]:
        """Digests for the ledger's first record (plain data, canonical-JSON safe)."""
        return {"path": self.expected["path"], "digest": self.expected["digest"],
                "file_digest": self.expected["file_digest"],
                "fields": dict(self.expected["fields"]),
                "files": {k: dict(v) for k, v in self.expected["files"].items()}}

    def check(self, stage: str = "stage") -> None:
        """Before a stage: ask the policy model whether it may run (`model.policy.Stage`, the
        guard "policy.pinned"); if not, the run stops (the model's Check) and PolicyChanged
        names the changed field."""
        now, problem = self._observe()
        state = replace(self.state, current=now)
        why = refuse("policy.pinned", mp.Stage(stage).why_not(state))
        if why is not None:
            if mp.PolicyCheck().why_not(state) is None:
                state = mp.PolicyCheck().apply(state)
            self.state = state
            fix = ("fix: restore the pinned version (digest recorded in the ledger's first "
                   "record), then resume")
            raise PolicyChanged(f"{problem or why}; {fix}")
        self.state = state

    def _observe(self) -> tuple[str, str | None]:
        """The digest of the policy as its files hash now (over the same parts as the pin) and,
        when it is not the pinned one, what changed, named."""
        exp = self.expected
        where = str(self.path)
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            return (_summary("unreadable", {}), f"{where}: policy: the pinned policy file cannot "
                    f"be read ({exc.strerror or exc})")
        file_digest = hashlib.sha256(raw).hexdigest()
        files = {fname: {p: _sha_or_gone(Path(p)) for p in ps} for fname, ps in exp["files"].items()}
        now = _summary(file_digest, files)
        if file_digest != exp["file_digest"]:
            try:
                parsed = parse_policy(raw, self.path)
            except BadInput as exc:
                return now, (f"{where}: policy: changed since the run started and no longer "
                             f"loads ({exc.field}: {exc.problem})")
            changed = sorted(set(parsed.fields) ^ set(exp["fields"])
                             | {k for k in parsed.fields if exp["fields"].get(k) != parsed.fields[k]})
            if changed:
                return now, (f"{where}: policy field(s) {', '.join(changed)} changed since the "
                             f"run started")
            return now, (f"{where}: policy: the file's bytes changed since the run started "
                         f"(comments or layout only; no field changed)")
        for fname, ps in exp["files"].items():
            for p, digest in ps.items():
                found = files[fname][p]
                if found == "gone":
                    return now, f"{where}: {fname}: pinned file {p} is gone"
                if found != digest:
                    return now, (f"{where}: {fname}: pinned file {p} changed since the run "
                                 f"started (sha256 {digest[:12]}... -> {found[:12]}...)")
        return now, None

    def assert_outside(self, *roots: Path) -> None:
        """BadInput if the policy, a pinned file or a key lies inside a worker's root."""
        policy = self.policy or parse_policy(self.path.read_bytes(), self.path)
        named = [("policy", self.path)] + [(f, p) for f, ps in policy.pinned_paths().items()
                                           for p in ps]
        priv, _ = policy.key_paths()
        if priv is not None:
            named.append(("signing.private_key", priv))
        for root in roots:
            r = Path(root).resolve()
            for fname, p in named:
                inside = f"{p} lies inside the worker's folder {r}"
                if refuse("policy.outside", inside if p.resolve().is_relative_to(r) else None):
                    raise BadInput(str(self.path), fname, inside,
                                   "keep the policy, gate files and keys outside every workspace")


def _sha_or_gone(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError:
        return "gone"


def _summary(file_digest: str, files: Mapping[str, Mapping[str, str]]) -> str:
    """One digest over what the pin covers: the policy file's bytes (so its fields) and every
    pinned file's content. Equal summaries: the same policy, as far as a run can tell."""
    return canonical_digest({"file": file_digest,
                             "files": {k: dict(v) for k, v in files.items()}})


def _read_or_bad(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise BadInput(str(path), "policy", "file not found", "give the path of the policy TOML"
                       ) from None
    except IsADirectoryError:
        raise BadInput(str(path), "policy", "is a directory", "give the policy TOML file") from None
    except OSError as exc:
        raise BadInput(str(path), "policy", f"cannot be read ({exc.strerror or exc})",
                       "make the policy file readable by the engine") from None


def sign_with_policy(ledger: Path | str, policy: Policy) -> dict | None:
    """Sign the ledger's head with the policy's [signing] private key; None when the policy names none."""
    private, _ = policy.key_paths()
    from loopproof.engine.record.signing import sign_head

    return sign_head(ledger, private) if private is not None else None
