"""Node kinds: the `[node.NAME]` table a kind's factory reads, the registry of kinds, and the
built-in "command" kind.

Why a module of its own: a kind is the one place where graph.toml grows without editing the spec
loader (engine/admission/revision.py registers "revision" from above: engine/kinds.py). A kind
declares its own fields (engine/system/fields.py); the loader checks a node's table against the
common fields and its kind's before the factory runs. A factory is called as
`factory(node_table, spec_dir) -> (Worker, Gate)`, reads the checked values (`node.values`,
defaults filled in) and rejects what needs more than a value with
`node_table.error(field, problem, fix)`; `NodeTable.argv` resolves an argv's program once per
load.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopproof.engine.run.gate import CommandGate, Gate
from loopproof.engine.run.judge.table import gate_from_table
from loopproof.engine.run.values import MAX_SECONDS, exists
from loopproof.engine.run.worker import CommandWorker, Worker
from loopproof.engine.system import programs as programs_mod
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.fields import (
    ABSENT,
    REQUIRED,
    Field,
    Verdict,
    amount,
    anything,
    number_in,
    short,
    strings,
)

DEFAULT_TIMEOUT_S = 60.0  # a worker's or gate's wall-clock limit when the node gives none
ARGV_EXAMPLE = '["program", "arg", ...]'


argv_check = strings()  # an argv: a non-empty list of non-empty strings


def argv_field(name: str, doc: str, *, required: bool = True) -> Field:
    return Field(name, "an argv: a non-empty list of strings", doc, argv_check, ARGV_EXAMPLE,
                 default=REQUIRED if required else ABSENT)


def seconds_check(v: Any) -> Verdict:
    """A wall-clock limit: a finite number of seconds > 0."""
    if number_in(v, 0.0, MAX_SECONDS) and v > 0:
        return None
    return f"must be a number of seconds > 0 and at most {MAX_SECONDS:g}, got {short(v)}"


def seconds_field(name: str, doc: str, default: Any = DEFAULT_TIMEOUT_S, fix: str = "") -> Field:
    return Field(name, f"seconds > 0, at most {amount(MAX_SECONDS)}", doc, seconds_check,
                 fix=fix or f"set {name} = 20", default=default)


def _gate_value(v: Any) -> Verdict:
    return None if isinstance(v, dict) else argv_check(v)


COMMAND_FIELDS: tuple[Field, ...] = (
    argv_field("worker", "the worker's argv; runs with the node's workspace as working "
               "directory"),
    Field("gate", "an argv, or a table", "a command gate's argv (runs with a read-only "
          "snapshot copy of the workspace as working directory), or a table "
          "[node.NAME.gate] naming a judge kind: \"calls\", \"program\" or \"pytest\" "
          "(docs/gates.md)", _gate_value, ARGV_EXAMPLE),
)


Factory = Callable[["NodeTable", Path], tuple[Worker, Gate]]


@dataclass(frozen=True)
class Kind:
    """A node kind: its factory and its own fields (beside every node's)."""

    factory: Factory
    fields: tuple[Field, ...]


KINDS: dict[str, Kind] = {}  # kinds of higher layers register here (engine/kinds.py)


def register_kind(name: str, factory: Factory, fields: Iterable[Field | str] = ()) -> None:
    """Make `kind = name` available in graph.toml. `fields` are the kind's own node fields,
    declared (`Field`) or only named (their factory checks them)."""
    KINDS[name] = Kind(factory, tuple(
        f if isinstance(f, Field) else Field(f, "what the kind reads", f"read by the {name!r} "
                                             "kind's factory", anything, default=ABSENT)
        for f in fields))


class NodeTable(dict):
    """One `[node.NAME]` table as written, with the node's name and file for error messages and
    its checked `values` (defaults filled in)."""

    def __init__(self, name: str, table: Mapping[str, Any], spec_path: Path,
                 programs: dict[str, str] | None = None,
                 args: dict[tuple[Any, Path], Any] | None = None,
                 values: Mapping[str, Any] | None = None) -> None:
        super().__init__(table)
        self.name = name
        self.spec_path = spec_path
        self.values: Mapping[str, Any] = self if values is None else values
        # program as written -> the absolute file it was resolved to at run start (shared by the
        # spec's nodes; given from the ledger's first record on resume, never looked up again)
        self.programs = programs if programs is not None else {}
        # (argv item, spec folder) -> resolve_arg's answer, and (whole argv as a tuple, spec
        # folder) -> `argv`'s answer, shared by one load's nodes: a 100,000-node graph names the
        # same few commands 200,000 times, a stat per item and a check per command otherwise
        self.args = args if args is not None else {}

    def error(self, field_name: str, problem: str, fix: str) -> BadInput:
        return BadInput(str(self.spec_path), f"node {self.name!r}, field {field_name!r}",
                        problem, fix)

    def argv(self, field_name: str, spec_dir: Path) -> tuple[str, ...]:
        """The argv a field holds (() when it is not given), with items that name a file under
        the spec's folder made absolute, and a first item resolved to one absolute file
        (engine/system/programs.py: on the engine's PATH without relative entries, through
        Python shims)."""
        if field_name not in self:
            return ()
        raw = self[field_name]
        if type(raw) is list:  # the same command checked and resolved before (only a list of
            try:               # strings is ever kept, and no other value equals one)
                done = self.args.get((tuple(raw), spec_dir))
            except TypeError:  # an item that is a list or a table: refused below
                done = None
            if done is not None:
                return done
        if (why := argv_check(raw)) is not None:
            raise self.error(field_name, why, f"write {field_name} = {ARGV_EXAMPLE}")
        args = self.args
        argv = tuple(args[(a, spec_dir)] if (a, spec_dir) in args
                     else args.setdefault((a, spec_dir), resolve_arg(a, spec_dir)) for a in raw)
        prog = argv[0]
        if prog not in self.programs:
            try:
                self.programs[prog] = programs_mod.resolve(prog, spec_dir)
            except programs_mod.ProgramNotFound:
                raise self.error(field_name, f"program {raw[0]!r} is not on PATH or under "
                                 f"{spec_dir}", "give an installed program or a path relative "
                                 "to the spec's folder") from None
        # every other absolute program in argv (`/usr/bin/env X=1 /venv/bin/agent`) is one
        # too: resolved, recorded, its installation made visible like argv[0]'s
        rest = tuple(self._program(a, spec_dir, field_name) if _runnable(a) else a
                     for a in argv[1:])
        self._interpreters(self.programs[prog], spec_dir, field_name)
        done = args[(tuple(raw), spec_dir)] = (self.programs[prog], *rest)
        return done

    def _program(self, item: str, spec_dir: Path, field_name: str) -> str:
        if item not in self.programs:
            try:
                self.programs[item] = programs_mod.resolve(item, spec_dir)
            except programs_mod.ProgramNotFound:  # gone between the two looks: kept as is
                return item
        self._interpreters(self.programs[item], spec_dir, field_name)
        return self.programs[item]

    def _interpreters(self, program: str, spec_dir: Path, field_name: str) -> None:
        """The interpreter a script's `#!` line names (and a wrapper's): resolved once and
        recorded with the programs, so the sandbox shows its installation (a `uv tool` or
        pipx console script's interpreter lives under the masked home)."""
        try:
            for named, found in programs_mod.interpreters(program, spec_dir):
                self.programs.setdefault(named, found)
        except programs_mod.ProgramNotFound as exc:
            raise self.error(field_name, f"the interpreter {exc.args[0]!r} named by the "
                             f"shebang (#! line) of {program} does not exist (not a file, not "
                             "on PATH)", "reinstall the program, or run it with an interpreter "
                             "that exists as argv[0]") from None


def _runnable(item: str) -> bool:
    """An absolute argv item naming an executable file: a program of its own."""
    return os.path.isabs(item) and os.path.isfile(item) and os.access(item, os.X_OK)


def resolve_arg(arg: str, spec_dir: Path) -> str:
    """An argv item that names an existing file or folder relative to the spec's folder becomes
    its absolute path; anything else (a program on PATH, a flag, a literal) is kept as written."""
    if Path(arg).is_absolute():
        return arg
    candidate = spec_dir / arg
    # absolute, symlinks kept: a venv's bin/python is a link, and following it would run the
    # base interpreter without the venv's packages
    return os.path.normpath(candidate.absolute()) if exists(candidate) else arg


def _command_factory(node: NodeTable, spec_dir: Path) -> tuple[Worker, Gate]:
    worker = CommandWorker(node.argv("worker", spec_dir), float(node.values["timeout_s"]))
    return worker, node_gate(node, spec_dir)


def node_gate(node: NodeTable, spec_dir: Path) -> Gate:
    """The node's `gate`: an argv array is a command gate; a table names a judge kind."""
    raw = node.get("gate")
    if isinstance(raw, dict):
        return gate_from_table(node, raw, spec_dir)
    return CommandGate(node.argv("gate", spec_dir), float(node.values["gate_timeout_s"]))


register_kind("command", _command_factory, COMMAND_FIELDS)
