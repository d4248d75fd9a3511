"""The record registry's machinery: what a declared record type is, and the one check every
record passes, on append and on read.

Why a registry apart from the classes that make records: a ledger is a stored format
(`loopproof-run/1`) that outlives the code. A record's `type` and its fields are declared here as
data (engine/record/record_types.py), frozen, so renaming a class, a function or an event in the
code cannot change what is written or what a reader accepts; a change to the table is a change
of the format and shows as one (tests/engine/record/test_record_registry.py pins each format's fingerprint).

A field's type is one of the JSON types (`string`, `integer`, `number`, `boolean`, `array`,
`object`, `null`); `number` also takes an integer, no type takes a boolean for a number. A record
type is *closed* (a field it does not declare is refused) unless it names who may add fields
(`open_to`): a command gate's or a callable gate's own facts in a `verdict`, a worker's labelled
settle facts. The check is linear in the record's fields (a dict lookup each), so checking every
append costs the same at record 10 as at record 10 million (bench/record_check.py measures it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from loopproof.engine.system.errors import LedgerCorrupt

JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")
CHAIN_FIELDS = frozenset({"seq", "prev", "hash"})  # the ledger's own (engine/record/ledger.py)
_OF_PYTHON: Mapping[type, str] = MappingProxyType({
    str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
    tuple: "array", dict: "object", type(None): "null"})
READ_FIX = "restore the ledger from a trusted copy (a record no loopproof writes is never " \
           "read as one)"


class RecordInvalid(LedgerCorrupt):
    """A record read back that does not match its declared type: the ledger is corrupt (exit 5,
    one line, nothing written), as when its chain breaks. Not bad input: the user named the
    right file, and no run writes such a record, so whoever wrote it rewrote the ledger."""

    def __init__(self, file: str, field: str, problem: str, fix: str) -> None:
        self.file, self.field, self.problem, self.fix = file, field, problem, fix
        super().__init__(f"{file}: {field}: {problem}; fix: {fix}")


@dataclass(frozen=True)
class Field:
    """One declared field: its name, the JSON types it may hold, and what it says."""

    name: str
    types: tuple[str, ...]
    says: str
    required: bool = False

    def __post_init__(self) -> None:
        bad = [t for t in self.types if t not in JSON_TYPES]
        if bad or not self.types:
            raise ValueError(f"field {self.name!r}: types {self.types!r} are not JSON types")


@dataclass(frozen=True)
class RecordType:
    """One record type: the stored `type`, the model event it stands for (a name of
    model.transitions.EVENT_NAMES, or None for a fact record), its fields, and who writes it."""

    name: str
    event: str | None
    fields: tuple[Field, ...]
    says: str
    writer: str
    open_to: str | None = None  # who may add undeclared fields; None: the type is closed

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


def field(name: str, types: str, says: str = "", *, required: bool = False) -> Field:
    """`Field` with its types written `"string|null"`, as the table reads best; `"any"` is every
    JSON type (a worker's own claims)."""
    return Field(name, JSON_TYPES if types == "any" else tuple(types.split("|")), says, required)


def json_type(value: object) -> str:
    """The JSON type of a value as the ledger stores it (a tuple is an array)."""
    got = _OF_PYTHON.get(type(value))
    if got is not None:
        return got
    for py, name in _OF_PYTHON.items():  # subclasses (a str enum, an int subclass)
        if py is not bool and isinstance(value, py):
            return "integer" if py is int and not isinstance(value, bool) else name
    return type(value).__name__


class Registry:
    """A frozen table of record types, checked in O(fields) per record."""

    def __init__(self, fmt: str, types: Iterable[RecordType]) -> None:
        self.format = fmt
        table: dict[str, RecordType] = {}
        for t in types:
            if t.name in table:
                raise ValueError(f"record type {t.name!r} is declared twice")
            names = [f.name for f in t.fields]
            if len(set(names)) != len(names) or "type" in names or CHAIN_FIELDS & set(names):
                raise ValueError(f"record type {t.name!r}: a field is declared twice or is "
                                 f"one of type/seq/prev/hash")
            table[t.name] = t
        self.types: Mapping[str, RecordType] = MappingProxyType(table)
        # per type: field -> allowed JSON types (integer allowed wherever number is)
        self._allowed: dict[str, dict[str, frozenset[str]]] = {
            name: {f.name: frozenset(f.types) | ({"integer"} if "number" in f.types else set())
                   for f in t.fields} for name, t in table.items()}
        self._required = {name: tuple(f.name for f in t.fields if f.required)
                          for name, t in table.items()}

    def __iter__(self) -> Iterator[RecordType]:
        return iter(self.types.values())

    def extended(self, types: Iterable[RecordType] = (),
                 fields: Mapping[str, Iterable[Field]] | None = None) -> Registry:
        """A new registry of the same format: this one's types, `types` added, and the named
        types' fields extended. How a study that drives the engine's primitives (the growth
        loop of experiments/growth/) declares its own records without the engine naming them;
        a field or type declared twice is refused as in the constructor."""
        more = dict(fields or {})
        unknown = sorted(set(more) - set(self.types))
        if unknown:
            raise ValueError(f"extended: no record type {unknown[0]!r} to add fields to")
        return Registry(self.format, [
            *(replace(t, fields=(*t.fields, *more.get(t.name, ()))) for t in self), *types])

    def why_not(self, record: Mapping[str, Any]) -> tuple[str, str] | None:
        """None when `record` matches its declared type, else (field, problem)."""
        t = record.get("type")
        allowed = self._allowed.get(t) if isinstance(t, str) else None
        if allowed is None or not isinstance(t, str):
            return "type", f"{t!r} is not a record type of {self.format}"
        open_type = self.types[t].open_to is not None
        for name, value in record.items():
            want = allowed.get(name)
            if want is None:
                if name == "type" or name in CHAIN_FIELDS or open_type:
                    continue
                return name, f"is not a field of a {t!r} record"
            got = json_type(value)
            if got not in want:
                return name, f"is {got} ({_shown(value)}), a {t!r} record's {name!r} is " \
                             f"{' or '.join(sorted(want - {'integer'} if 'number' in want else want))}"
        for name in self._required[t]:
            if name not in record:
                return name, f"is missing (a {t!r} record always has it)"
        return None

    def check_append(self, record: Mapping[str, Any], path: object) -> None:
        """Before a record is written: a record no type declares is the engine's bug."""
        why = self.why_not(record)
        if why is not None:
            raise RuntimeError(f"engine bug: {path}: a {record.get('type')!r} record's field "
                               f"{why[0]!r} {why[1]}; fix: declare it in "
                               f"engine/record/record_types.py or write what is declared")

    def check_read(self, record: Mapping[str, Any], path: object) -> None:
        """A record read back: one line naming the file, the line, the field and the fix."""
        why = self.why_not(record)
        if why is not None:
            seq = record.get("seq")
            line = f"line {seq + 1}" if isinstance(seq, int) and not isinstance(seq, bool) \
                else "a record"
            raise RecordInvalid(str(path), f"{line}: field {why[0]!r}", why[1], READ_FIX)

    def fingerprint(self) -> str:
        """What a reader of the format relies on (every type, its required fields and every
        field's types), hashed: an optional field added keeps it, anything else changes it."""
        body = {t.name: {"event": t.event, "open": t.open_to is not None,
                         "required": sorted(f.name for f in t.fields if f.required),
                         "types": {f.name: sorted(f.types) for f in t.fields if f.required}}
                for t in self}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def markdown(self, writer: str) -> str:
        """The table of the record types `writer` writes, as docs/engine.md shows it."""
        rows = ["| type | model event | fields beyond seq/prev/hash (* always present) |",
                "|---|---|---|"]
        for t in self:
            if t.writer != writer:
                continue
            cells = []
            for f in t.fields:
                says = f" {f.says}" if f.says else ""
                cells.append(f"`{f.name}`{'*' if f.required else ''} "
                             f"({'/'.join(f.types)}){says}")
            more = f"; and {t.open_to}" if t.open_to else ""
            rows.append(f"| `{t.name}` | {t.event or '—'} | {t.says}: {'; '.join(cells)}{more} |")
        return "\n".join(rows) + "\n"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
