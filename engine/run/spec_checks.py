"""The tables of graph.toml, declared field by field (engine/system/fields.py): the file's own
tables, `[graph]`, the fields every `[node.NAME]` has and `[planner]`; and the checks that need
more than one value (a path under the spec's folder, `eval_reserve` within `spend_ceiling`).

Why a module of its own: engine.run.spec decides which tables are read, in what order, and
builds the `Spec`; what a field may hold is declared here once, with its line of doc (the tables
in docs/engine.md are printed from these declarations). Structural rules (cycles, unknown nodes,
repair targets) and the types and signs of the model's numbers (attempts, budgets, ceilings,
max_parallel) are the model's (`model.graph`): these validators only bound those numbers, so
every consumer refuses the same graphs with the same words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopproof.engine.run.kinds import KINDS, NodeTable, seconds_field
from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.proxy.config import parse as parse_llm
from loopproof.engine.run.values import (
    MAX_COUNT,
    MAX_PRICE,
    MAX_SPEND,
    MIN_PRICE,
    file_or_none,
)
from loopproof.engine.run.worker import CommandWorker, Worker
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.fields import (
    ABSENT,
    Check,
    Field,
    Refusal,
    Table,
    Verdict,
    amount,
    boolean,
    integer,
    number_in,
    one_of,
    short,
    strings,
    table,
)
from loopproof.engine.system.judged import DEFAULT_MAX_BYTES, DEFAULT_MAX_FILES
from loopproof.engine.system.limits import ResourceLimits, size_text
from loopproof.engine.system.sandbox import BACKENDS, DEFAULT
from loopproof.engine.system.secrets import secret_name

# What a judged tree may hold (engine/system/judged.py): field -> (lowest, highest, default).
LIMIT_FIELDS: dict[str, tuple[int, int, int]] = {
    "max_files": (1, 10_000_000, DEFAULT_MAX_FILES),
    "max_workspace_bytes": (0, 1 << 40, DEFAULT_MAX_BYTES),
}
# The resource limits of a node's commands (engine/system/limits/). Below the lowest, the
# sandbox itself cannot start (bwrap, its init and the command are three processes; a Python
# start-up needs a few MiB). Defaults that keep one careless graph from taking a 2-core, 24 GiB
# machine down: one attempt (or its gate) runs at a time, each within these (docs/engine.md,
# "Resource limits").
RESOURCE_FIELDS: dict[str, tuple[int, int, int]] = {
    "max_memory_bytes": (16 << 20, 1 << 40, 4 << 30),
    "max_processes": (8, 4_194_304, 1024),
    "max_tmp_bytes": (4096, 1 << 40, 1 << 30),
}
DEFAULT_RESOURCES: dict[str, int] = {k: d for k, (_, _, d) in RESOURCE_FIELDS.items()}
GATE_ERRORS = ("retry", "stop")
_NUMBERS = (int, float)  # for isinstance: a tuple, not `int | float` built anew at every call


def is_price(v: Any) -> bool:
    """A price: a number of spend units per second in [MIN_PRICE, MAX_PRICE] (booleans are not
    numbers)."""
    return number_in(v, MIN_PRICE, MAX_PRICE)


def _at_most(high: float) -> Check:
    """A number of the model's at most `high` (its type and sign are the model's to check: a
    value that is no number passes here and is refused by `model.graph` in its words)."""
    def check(v: Any) -> Verdict:
        kind = type(v)  # exactly int or float: a bool is not a number (the model says so)
        if (kind is int or kind is float) and not v <= high:  # nan is not <= high either
            return f"{short(v)} is out of range (at most {high:g})"
        return None
    return check


def _price(v: Any) -> Verdict:
    return None if is_price(v) else (f"must be a number of spend units per second > 0 (from "
                                     f"{MIN_PRICE:g} to {MAX_PRICE:g}), got {short(v)}")


def _path(v: Any) -> Verdict:
    return None if isinstance(v, str) and v else f"must be a path string, got {short(v)}"


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# set by the engine for every worker (the ANTHROPIC_ pair: for a worker with model access)
ENGINE_ENV = frozenset({"PATH", "HOME", "TMPDIR", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"})
ENGINE_ENV_PREFIXES = ("OPENAI_", "LOOPPROOF_")  # the model proxy's and the attempt's own
MAX_ENV_VALUE = 32 * 1024


def _env(v: Any) -> Verdict:
    """An `env` table (names to strings) for a command worker. Refused: a name that is not a
    variable name, one the engine sets, LD_* (it would reach bwrap itself), one whose name says
    it holds a secret (engine/system/secrets.py's rule: the spec is stored in the ledger, so a
    secret reaches a worker only through `api_key_env`), a value that is not a string (or holds
    a NUL byte, or is over 32 KiB)."""
    if not isinstance(v, dict):
        return f"must be a table of names to strings, got {short(v)}"
    for name, value in v.items():
        at = f"env.{name[:64] if name.isprintable() and chr(39) not in name else short(name)}"
        if not ENV_NAME.fullmatch(name):
            return Refusal("is not an environment variable name",
                           "use letters, digits and _ (not first a digit)", at)
        upper = name.upper()
        if upper in ENGINE_ENV or upper.startswith(ENGINE_ENV_PREFIXES):
            return Refusal("is set by the engine for every worker (PATH, HOME, TMPDIR, OPENAI_*, "
                           "ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, LOOPPROOF_*)", "remove it: the "
                           "engine's value is the one the worker gets (docs/proxy.md says which)",
                           at)
        if upper.startswith("LD_"):
            return Refusal("would reach the sandbox launcher itself (bwrap starts with the "
                           "worker's environment, outside the sandbox)",
                           "remove it; set it inside the worker's own command instead", at)
        if secret_name(name):
            return Refusal("looks like a secret's name (the spec is stored in the ledger)",
                           "give a secret to a worker only through an llm table's api_key_env, "
                           "or rename a variable that holds none", at)
        if not isinstance(value, str) or "\0" in value or len(value) > MAX_ENV_VALUE:
            return Refusal(f"must be a string of at most {MAX_ENV_VALUE} characters without "
                           f"NUL, got {short(value)}", f'write {name} = "value"', at)
    return None


def _limit(key: str, low: int, high: int, default: int, *, node: bool) -> Field:
    shown = size_text(default) if key.endswith("_bytes") and default >= 1 << 20 else str(default)
    docs = {
        "max_files": "entries (files and folders) the workspace may hold when it is judged; more "
                     "is an error verdict, checked before anything is copied",
        "max_workspace_bytes": "bytes the workspace's files may add up to while the worker runs "
                               "(more: it is killed, at the workspace limit) and when it is "
                               "judged (sparse files at their full size; more is an error "
                               "verdict, checked before anything is copied)",
        "max_memory_bytes": "memory of all the processes of one worker or gate command "
                            "together, its private temp folders included (more: killed, at the "
                            "memory limit)",
        "max_processes": "processes and threads of one command alive at once (a fork past it is "
                         "refused and the command is killed, at the process limit)",
        "max_tmp_bytes": "size of each private temp folder (/tmp, /var/tmp, /dev/shm, ...) of a "
                         "sandboxed command (full: killed, at the tmp limit)",
    }
    holds = (f"bytes, from {size_text(low)} to {size_text(high)}" if key.endswith("_bytes")
             else f"an integer from {low} to {high}")
    return Field(key, holds,
                 docs[key] if node else f"every node's default for {key}",
                 integer(low, high), fix=f"set {key} = {default} (the default) or leave it out",
                 default=ABSENT if node else default,
                 shown_default=f"the [graph] value ({shown})" if node else shown)


TREE_FIELDS = {**LIMIT_FIELDS, **RESOURCE_FIELDS}
GRAPH = Table("[graph]", (
    Field("repair_budget", f"an integer >= 0, at most {amount(MAX_COUNT)}",
          "K: the global repair budget, never reset", _at_most(MAX_COUNT), example="1",
          fix=f"set repair_budget to a number up to {MAX_COUNT:g}", default=0),
    Field("spend_budget", f"a number >= 0, at most {amount(MAX_SPEND)}",
          "B: the run-wide spend budget, in spend units", _at_most(MAX_SPEND), example="60.0",
          fix=f"set spend_budget to a number up to {MAX_SPEND:g}"),
    Field("strict_bound", "true or false", "true: refuse to start (exit 2) when the pre-run "
          "spend bound W_c exceeds B", boolean, fix="write strict_bound = true or false",
          default=False),
    Field("max_parallel", "an integer >= 1", "attempts in flight at once; `run --jobs N` wins",
          example="2", default=1),
    Field("policy", "a path relative to the spec", "a policy TOML (docs/ledger.md), hash-pinned "
          "at start and re-checked before every stage", _path, '"policy.toml"', default=ABSENT),
    Field("stop_file", "a path relative to the spec", "the kill switch: the run stops at the "
          "next safe point once it exists (`--stop-file` wins)", _path, '"STOP"',
          default=ABSENT, shown_default="`<ledger>.stop`"),
    Field("price", f"a number from {amount(MIN_PRICE)} to {amount(MAX_PRICE)}", "spend units per "
          "wall-clock second of command workers and gates; `loopproof resume --price P` changes "
          "it", _price, fix="set price = 1.0 (or leave it out)", default=1.0),
    Field("sandbox", " or ".join(f'`"{b}"`' for b in sorted(BACKENDS)), '"bwrap": every worker '
          'and gate command runs in a bubblewrap sandbox; "none": no sandbox (recorded and '
          "warned; docs/threat-model.md)", one_of(sorted(BACKENDS)),
          fix=f'write sandbox = "{DEFAULT}" (or leave it out)', default=DEFAULT),
    *(_limit(key, *bounds, node=False) for key, bounds in TREE_FIELDS.items()),
    Field("env", "a table of names to strings", "every command worker's default variables (a "
          "node's own `env` wins per name)", _env, '{ NAME = "value" }', default=ABSENT),
))


def _kind(v: Any) -> Verdict:
    if isinstance(v, str) and v in KINDS:
        return None
    return Refusal(f"unknown kind {short(v)}", f"use one of {sorted(KINDS)}" + (
        "" if len(KINDS) > 1 else " (a program that loads specs itself registers the shipped "
        "kinds first: engine.kinds.register_builtin())"))


def _names(v: Any) -> Verdict:
    if type(v) is list:
        for x in v:  # a loop, not all(...): asked twice per node of a large graph
            if type(x) is not str:
                break
        else:
            return None
    return f"must be a list of node names, got {short(v)}"


def _paths(v: Any) -> Verdict:
    if isinstance(v, list) and all(isinstance(x, str) and x for x in v):
        return None
    return f"must be a list of paths, got {short(v)}"


def _reserve(v: Any) -> Verdict:
    return (None if number_in(v, 0.0, MAX_SPEND)
            else f"must be a number of spend units >= 0, got {short(v)}")


def _llm(v: Any) -> Verdict:
    return None if isinstance(v, dict) else Refusal(
        "is not a table", 'write [node.<name>.llm] with upstream = "..."')


NODE = Table("[node.NAME]", (
    Field("kind", "a registered kind's name", 'which adapter runs the node: "command", '
          '"revision" (below) or a kind another module registers (engine/run/kinds.py)', _kind,
          default="command"),
    Field("attempts", f"an integer >= 1, at most {amount(MAX_COUNT)}",
          "a_v: attempts per activation",
          _at_most(MAX_COUNT), fix=f"set attempts to a number up to {MAX_COUNT:g}", default=1),
    Field("spend_ceiling", f"a number >= 0, at most {amount(MAX_SPEND)}", "c_v: the spend ceiling of "
          "one attempt", _at_most(MAX_SPEND), example="10.0",
          fix=f"set spend_ceiling to a number up to {MAX_SPEND:g}"),
    Field("needs", "a list of node names", "predecessors: the node begins only while they are "
          "DONE", _names, '["other_node"]', default=[]),
    Field("repairs", "a list of node names", "repair targets: the node itself or its ancestors; "
          "the first listed is used", _names, '["other_node"]', default=[]),
    seconds_field("timeout_s", "wall-clock limit of one worker run"),
    seconds_field("gate_timeout_s", "wall-clock limit of one gate run; a timeout is an error "
                  "verdict"),
    Field("eval_reserve", "a number from 0 to spend_ceiling", "spend units of c_v held back for "
          "the gate run", _reserve, fix="set eval_reserve = 0 (nothing held back) or the gate's "
          "expected cost", default=0.0),
    Field("gate_files", "a list of paths relative to the spec", "extra files the gate depends "
          "on, hashed at start, re-checked before each gate run", _paths,
          '["path/relative/to/spec"]', default=[]),
    Field("writable", "a list of paths relative to the spec", "existing files or folders the "
          "worker may write besides its workspace, e.g. a cache: outside every judged tree, and "
          "not confined (docs/threat-model.md)", _paths, '["path/relative/to/spec"]', default=[]),
    Field("gate_errors", '`"retry"` or `"stop"`', "what a gate error (the gate did not judge: "
          "it crashed, timed out, exited 2 or more or by a signal, changed its snapshot) does: "
          '"retry" fails the attempt like a reject; "stop" stops the run after recording it '
          "(exit 6; fix the gate, then resume)", one_of(GATE_ERRORS),
          fix='write gate_errors = "stop" (or leave it out: "retry")', default="retry"),
    Field("network", "true or false", "true: the node's worker (never its gate) shares the "
          "host's network (docs/threat-model.md says what it opens)", boolean,
          fix="write network = true (or leave it out: no network)", default=False),
    Field("env", "a table of names to strings", "the command worker's own variables (never its "
          "gate's); no PATH, HOME, TMPDIR, OPENAI_*, ANTHROPIC_BASE_URL, LOOPPROOF_*, LD_* or "
          "secret-looking name (docs/proxy.md)", _env, '{ NAME = "value" }',
          default=ABSENT, shown_default="the [graph] `env`"),
    Field("llm", "a table", "the model calls a command worker may make through the attempt's "
          "metered proxy (docs/proxy.md)", _llm, default=ABSENT),
    *(_limit(key, *bounds, node=True) for key, bounds in TREE_FIELDS.items()),
))
PLANNER = Table("[planner]", (
    Field("command", "a non-empty list of strings", "the planner's argv (items naming a file "
          "under the spec's folder made absolute)", strings(what="strings"),
          '["python3", "plan.py"]'),
    seconds_field("timeout_s", "wall clock of one planner call", 30.0,
                  fix="write timeout_s = 30"),
))
TOP = Table("graph.toml", (
    Field("graph", "a table", "the run's budgets and defaults", table,
          fix="write [graph] with spend_budget = B", add="add [graph] with spend_budget = B"),
    Field("node", "a table of tables", "one [node.NAME] table per node", table,
          fix="declare at least one [node.NAME] table",
          add="declare at least one [node.NAME] table"),
    Field("planner", "a table", "a command that names catalogue entries between rounds",
          table, fix='write [planner] with command = ["program", ...]', default=ABSENT),
), noun="table")


def eval_reserve_within(node: NodeTable, reserve: float) -> None:
    """eval_reserve at most spend_ceiling. (A non-number spend_ceiling is left for the model's
    check, which names it.)"""
    ceiling = node.get("spend_ceiling")
    if isinstance(ceiling, _NUMBERS) and not isinstance(ceiling, bool) and 0 <= ceiling < reserve:
        raise node.error("eval_reserve", f"{reserve!r} exceeds spend_ceiling = {ceiling!r}",
                         "lower eval_reserve or raise spend_ceiling")


def llm_table(node: NodeTable, worker: Worker) -> LlmConfig | None:
    """The node's `llm` table, for a command worker only. Its key variable is not read here:
    a command that calls no model (`bound`, `show`, `audit`) needs no secret (`upstream_keys`
    is asked by `run` and `resume`)."""
    if "llm" not in node:
        return None
    cfg = parse_llm(node["llm"], node.error, f"[node.{node.name}.llm]")
    if not isinstance(worker, CommandWorker):
        raise node.error("llm", "model access is given to command workers only",
                         'use kind = "command" with a worker argv, or remove [llm]')
    return cfg


def listed_paths(node: NodeTable, spec_dir: Path, key: str, *,
                 folders: bool = False) -> tuple[Path, ...]:
    """The paths a (checked) list names, each an existing file (or folder) under the spec's
    folder, resolved."""
    out = []
    for f in node.values[key]:
        try:  # a path that cannot exist (too long, a NUL byte, a link loop) is not one
            p = (spec_dir / f).resolve()
            found = p.is_file() or (folders and p.is_dir())
        except (OSError, ValueError, RuntimeError):
            found = False
        if not found:
            kind = "a file or folder" if folders else "a file"
            raise node.error(key, f"{short(f)} is not {kind} under {spec_dir}",
                             f"list existing {'paths' if folders else 'files'}, relative to "
                             "the spec's folder")
        out.append(p)
    return tuple(out)


def optional_path(g: Mapping[str, Any], key: str, spec_dir: Path, file: str, *,
                  must_exist: bool) -> Path | None:
    """A (checked) [graph] path, resolved against the spec's folder."""
    if key not in g:
        return None
    v = g[key]
    found = file_or_none(spec_dir / v)
    if must_exist and found is None:
        raise BadInput(file, f"[graph] {key}", f"{short(v)} is not a file under {spec_dir}",
                       "give an existing file, relative to the spec's folder")
    try:
        return found or (spec_dir / v).resolve()
    except (OSError, RuntimeError) as exc:
        raise BadInput(file, f"[graph] {key}", f"{short(v)} is not a usable path ({exc})",
                       "give a short path, relative to the spec's folder") from None


def resource_limits(values: Mapping[str, Any], graph: Mapping[str, Any],
                    max_bytes: int) -> ResourceLimits:
    """A node's resource limits: its own fields, else the graph's; the workspace's is its
    judged-tree limit (`max_workspace_bytes`), held while it runs too."""
    got = {key: values.get(key, graph[key]) for key in RESOURCE_FIELDS}
    return ResourceLimits(got["max_memory_bytes"], got["max_processes"], got["max_tmp_bytes"],
                          max_bytes)


def worker_env(node: NodeTable, worker: Worker, graph: Mapping[str, Any]
               ) -> tuple[tuple[str, str], ...]:
    """A command worker's variables (both tables checked): the `[graph]` table's `env`, then
    the node's (it wins per name). A node whose worker is not a command may not set `env`
    (nothing would read it)."""
    if "env" in node and not isinstance(worker, CommandWorker):
        raise node.error("env", "only a command worker gets environment variables",
                         'use kind = "command", or remove env')
    if not isinstance(worker, CommandWorker):
        return ()
    return tuple(sorted({**graph.get("env", {}), **node.get("env", {})}.items()))
