"""One way to declare the fields of a TOML table, to check a table against its declaration, and
to print the declaration as the docs' field table.

Why one mechanism: every table a user writes (graph.toml's `[graph]`, `[node.NAME]`, a gate
table, an `llm` table, `[planner]`; the policy file's tables; a catalogue's loop.toml) is
checked the same way, in the manner of Hypothesis's settings (each setting defined once, with
its validator and a line of doc): an unknown key is refused in one line naming the table, the key
and the allowed keys; each given field's validator runs in declaration order, so the first error
a bad table gets is always the same one; defaults are filled in. The docs' field tables are
printed from the same declarations (`Table.markdown`, engine/field_tables.py), so what the docs
say a field holds is what is checked.

A validator sees one value and returns None or what is wrong with it (a `Refusal` when the fix,
or the part of the field at fault, is its own). What needs more than the value (a path relative
to the spec's folder, a program on PATH, a field bounded by another) is the reader's to check
after `read`, on values whose shape `read` has vouched for. Defaults are checked against their
validators once, when the table is declared, not at every read.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, NoReturn

from loopproof.engine.system.errors import BadInput


class _Marker:
    """A default that is not a value: `REQUIRED` or `ABSENT`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


REQUIRED: Final = _Marker("REQUIRED")  # no default: a table without it is refused
ABSENT: Final = _Marker("ABSENT")  # optional: left out of the values when not given


@dataclass(frozen=True)
class Refusal:
    """What a validator says when the field's own fix does not fit the problem, or when the
    problem is in a part of the field (`at`: "env.PATH" of the field "env")."""

    problem: str
    fix: str | None = None
    at: str | None = None


Verdict = str | Refusal | None  # None: the value is fine; a str: the problem (the field's fix)
Check = Callable[[Any], Verdict]
Fail = Callable[[str, str, str], Exception]  # (field as named in errors, problem, fix) -> raise


def bad_input(file: str, where: str = "{}") -> Fail:
    """The `fail` of a table in `file`: a `BadInput` naming the field through `where`
    ("[graph] {}", "node 'a', field {!r}")."""
    return lambda field, problem, fix: BadInput(file, where.format(field), problem, fix)


def anything(value: Any) -> Verdict:
    """The validator of a field whose value its reader checks (a kind registered by name)."""
    return None


@dataclass(frozen=True)
class Field:
    """One field: its name, what it holds (in words, for the docs), one line of doc, its
    validator, the fix for a bad value (default: `write NAME = EXAMPLE`), its default (or
    `REQUIRED` or `ABSENT`), where the default is not a plain value how the docs say it, and
    where `add NAME = EXAMPLE to TABLE` is not the way to add it, the fix when it is missing."""

    name: str
    holds: str
    doc: str
    check: Check = anything
    example: str = ""
    fix: str = ""
    default: Any = REQUIRED
    shown_default: str = ""
    add: str = ""  # the fix when it is missing (default: `add NAME = EXAMPLE to TABLE`)

    def bad_fix(self) -> str:
        return self.fix or (f"write {self.name} = {self.example}" if self.example
                            else f"give {self.name} {self.holds}")

    def missing_fix(self, title: str) -> str:
        if self.add:
            return self.add
        value = self.example or f"<{self.holds}>"
        return f"add {self.name} = {value} to {title}"

    def default_text(self) -> str:
        """The default as the docs show it."""
        if self.shown_default:
            return self.shown_default
        if self.default is REQUIRED:
            return "required"
        if self.default is ABSENT:
            return "none"
        return f"`{json.dumps(self.default)}`"


class Table:
    """A TOML table's fields, in the order their validators run."""

    def __init__(self, title: str, fields: Iterable[Field], *, prefix: str = "",
                 noun: str = "field") -> None:
        self.title = title  # "[graph]": how errors and docs name the table
        self.fields: tuple[Field, ...] = tuple(fields)
        self.prefix = prefix  # how its fields are named in errors: "llm." -> "llm.upstream"
        self.noun = noun  # "field", or "table" for a file's tables
        self.by_name: dict[str, Field] = {f.name: f for f in self.fields}
        if len(self.by_name) != len(self.fields):
            raise ValueError(f"{title}: a field is declared twice")
        self.names: frozenset[str] = frozenset(self.by_name)
        self.defaults: dict[str, Any] = {f.name: f.default for f in self.fields
                                         if f.default is not REQUIRED and f.default is not ABSENT}
        # (name, validator or None, required?) in declaration order: the walk to the first error
        self._steps: tuple[tuple[str, Check | None, bool], ...] = tuple(
            (f.name, None if f.check is anything else f.check, f.default is REQUIRED)
            for f in self.fields)
        self._checks: dict[str, Check] = {f.name: f.check for f in self.fields
                                          if f.check is not anything}
        self._required: frozenset[str] = frozenset(f.name for f in self.fields
                                                   if f.default is REQUIRED)
        for name, default in self.defaults.items():
            if (why := self.by_name[name].check(default)) is not None:
                raise ValueError(f"{title}: the default of {name} fails its own check: {why}")

    def __iter__(self) -> Any:
        return iter(self.fields)

    def plus(self, title: str, more: Iterable[Field]) -> Table:
        """This table's fields, then `more`'s (a node's common fields, then its kind's)."""
        return Table(title, (*self.fields, *more), prefix=self.prefix, noun=self.noun)

    def read(self, raw: Mapping[str, Any], fail: Fail, *, title: str | None = None
             ) -> dict[str, Any]:
        """`raw` checked against the declaration and its defaults filled in. The first problem
        raises `fail(field, problem, fix)`: an unknown key (in `raw`'s order), then a required
        field missing or a value its validator refuses (in declaration order). `title` names
        the table in errors when it is more precise than the declaration's ("[node.build]")."""
        if not raw.keys() <= self.names:
            self.refuse_unknown(raw, fail, title)
        # The table's own order first (O(fields given)): a table with nothing wrong is read
        # without a walk of every declared field; one with something wrong is walked in
        # declaration order, so that the first error named is the same whatever else is wrong.
        checks = self._checks
        if not raw.keys() >= self._required:
            self._first_error(raw, fail, title)
        for name, value in raw.items():
            check = checks.get(name)
            if check is not None and check(value) is not None:
                self._first_error(raw, fail, title)
        return {**self.defaults, **raw} if self.defaults else dict(raw)

    def _first_error(self, raw: Mapping[str, Any], fail: Fail, title: str | None) -> NoReturn:
        """Raise for the first field, in declaration order, that is refused or missing."""
        for name, check, required in self._steps:
            if name in raw:
                if check is not None and (why := check(raw[name])) is not None:
                    raise self._refused(name, why, fail)
            elif required:
                raise fail(self.prefix + name, "is missing",
                           self.by_name[name].missing_fix(title or self.title))
        raise RuntimeError(f"{self.title}: a validator refused a value, then took it")

    def check(self, name: str, value: Any, fail: Fail) -> None:
        """Raise what `read` would for this one field's value (a field read before the rest:
        a node's kind, which picks the table)."""
        if (why := self.by_name[name].check(value)) is not None:
            raise self._refused(name, why, fail)

    def _refused(self, name: str, why: str | Refusal, fail: Fail) -> Exception:
        f = self.by_name[name]
        if isinstance(why, str):
            return fail(self.prefix + name, why, f.bad_fix())
        return fail(self.prefix + (why.at or name), why.problem, why.fix or f.bad_fix())

    def refuse_unknown(self, raw: Mapping[str, Any], fail: Fail, title: str | None = None
                       ) -> None:
        """Raise for the first key of `raw` (in its order) that is not declared."""
        for key in raw:
            if key not in self.names:
                allowed = ", ".join(f.name for f in self.fields)
                close = difflib.get_close_matches(str(key), list(self.by_name), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise fail(self.prefix + short_key(key),
                           f"is not a {self.noun} of {title or self.title}",
                           f"{hint}use one of: {allowed}")

    def markdown(self) -> str:
        """The docs' table of these fields: name, what it holds, default, what it is for."""
        rows = ["| field | holds | default | what it is |", "|---|---|---|---|"]
        rows += [f"| `{f.name}` | {f.holds} | {f.default_text()} | {f.doc} |"
                 for f in self.fields]
        return "\n".join(rows)


def dotted(title: str, tables: Iterable[Table]) -> Table:
    """The fields of a file's tables as one table, each named as the file's errors name it
    ("budget.spend"): for the docs and for whoever refers to a field by its full name."""
    return Table(title, (replace(f, name=t.prefix + f.name) for t in tables for f in t.fields))


# ---- values and the validators every table shares ----------------------------------------------

def short(v: object, limit: int = 60) -> str:
    """`repr(v)`, cut to `limit` characters: an error names a bad value without quoting a
    megabyte of it."""
    text = repr(v)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def short_key(key: object) -> str:
    """A key as an error names it: printable and short."""
    text = str(key)
    return text if len(text) <= 64 and text.isprintable() else short(key)


def number_in(v: object, low: float, high: float) -> bool:
    """A finite int or float (not a bool) in [low, high]."""
    if type(v) is not float and type(v) is not int and (  # the common case tested first
            isinstance(v, bool) or not isinstance(v, int | float)):
        return False
    try:
        return math.isfinite(v) and low <= v <= high
    except OverflowError:  # an integer too large for a float
        return False


def amount(x: float) -> str:
    """A bound as the docs say it: 10^12 rather than 1e+12 (other numbers as `:g` writes them)."""
    if x > 0:
        power = round(math.log10(x))
        if abs(power) >= 4 and x == 10.0 ** power:
            return f"10^{power}"
    return f"{x:g}"


def is_integer(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def boolean(v: Any) -> Verdict:
    return None if isinstance(v, bool) else f"must be true or false, got {short(v)}"


def integer(low: int, high: int | None = None) -> Check:
    """An integer in [low, high] (no upper bound: None)."""
    def check(v: Any) -> Verdict:
        if is_integer(v) and low <= v and (high is None or v <= high):
            return None
        within = f"from {low} to {high}" if high is not None else f">= {low}"
        return f"must be an integer {within}, got {short(v)}"
    return check


def number(low: float, high: float, *, above: bool = False, what: str = "a number") -> Check:
    """A finite number in [low, high] (`above`: greater than low)."""
    def check(v: Any) -> Verdict:
        if number_in(v, low, high) and not (above and v <= low):
            return None
        bound = f"> {low:g}" if above else f">= {low:g}"
        most = f" and at most {high:g}" if high < math.inf else ""
        return f"must be {what} {bound}{most}, got {short(v)}"
    return check


def one_of(options: Sequence[str]) -> Check:
    choices = tuple(options)

    def check(v: Any) -> Verdict:
        return None if v in choices else f"must be one of {list(choices)}, got {short(v)}"
    return check


def text(rule: re.Pattern[str] | None = None) -> Check:
    """A non-empty string (matching `rule`, if given)."""
    def check(v: Any) -> Verdict:
        if isinstance(v, str) and v and (rule is None or rule.fullmatch(v)):
            return None
        return f"is not valid here: {short(v)}"
    return check


def strings(*, empty: bool = False, what: str = "strings") -> Check:
    """A list of non-empty strings (`empty`: the list may be empty)."""
    def check(v: Any) -> Verdict:
        if type(v) is list and (v or empty):
            for x in v:  # a loop, not all(...): a 100,000-node graph asks this 200,000 times
                if type(x) is not str or not x:
                    break
            else:
                return None
        return (f"must be a {'' if empty else 'non-empty '}list of non-empty {what}, "
                f"got {short(v)}")
    return check


def table(v: Any) -> Verdict:
    return None if isinstance(v, dict) else f"must be a table, got {short(v)}"
