"""The field checks of graph.toml's tables: one function per field (or family of fields) of
`[graph]` and `[node.NAME]`, each raising `BadInput` with one line naming the file, the table,
the field and the fix.

Why a module of its own: engine.run.spec decides which checks a table gets and in what order
(structural rules are the model's); what one field may hold is read here, one field at a time.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopproof.engine.run.kinds import NodeTable
from loopproof.engine.run.proxy import pricing
from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.proxy.config import parse as parse_llm
from loopproof.engine.run.values import (
    MAX_COUNT,
    MAX_PRICE,
    MAX_SPEND,
    MIN_PRICE,
    file_or_none,
    number_in,
    short,
)
from loopproof.engine.run.worker import CommandWorker, Worker
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.judged import Limits
from loopproof.engine.system.limits import ResourceLimits
from loopproof.engine.system.secrets import secret_name

_NUMBERS = (int, float)  # for isinstance: a tuple, not `int | float` built anew at every call
LIMIT_FIELDS: dict[str, tuple[int, int]] = {  # field -> (lowest, highest)
    "max_files": (1, 10_000_000),
    "max_workspace_bytes": (0, 1 << 40),
}
# The resource limits of a node's commands (engine/system/limits/): field -> (lowest, highest).
# Below the lowest, the sandbox itself cannot start (bwrap, its init and the command are three
# processes; a Python start-up needs a few MiB).
# Defaults that keep one careless graph from taking a 2-core, 24 GiB machine down: one attempt
# (or its gate) runs at a time, each within these (docs/engine.md, "Resource limits").
DEFAULT_RESOURCES: dict[str, int] = {"max_memory_bytes": 4 << 30, "max_processes": 1024,
                                     "max_tmp_bytes": 1 << 30}
RESOURCE_FIELDS: dict[str, tuple[int, int]] = {
    "max_memory_bytes": (16 << 20, 1 << 40),
    "max_processes": (8, 4_194_304),
    "max_tmp_bytes": (4096, 1 << 40),
}


def is_price(v: Any) -> bool:
    """A price: a number of spend units per second in [MIN_PRICE, MAX_PRICE] (booleans are not
    numbers)."""
    return number_in(v, MIN_PRICE, MAX_PRICE)


def graph_ranges(g: Mapping[str, Any], file: str) -> None:
    """[graph] numbers within their ranges (their types and signs are the model's to check)."""
    for key, high in (("spend_budget", MAX_SPEND), ("repair_budget", MAX_COUNT)):
        v = g.get(key)
        if isinstance(v, _NUMBERS) and not isinstance(v, bool) and not number_in(v, -math.inf, high):
            raise BadInput(file, f"[graph] {key}", f"{short(v)} is out of range (at most "
                           f"{high:g})", f"set {key} to a number up to {high:g}")


def node_ranges(node: NodeTable) -> None:
    """A node's numbers within their ranges (their types and signs are the model's to check)."""
    for key, high in (("spend_ceiling", MAX_SPEND), ("attempts", MAX_COUNT)):
        v = node.get(key)
        if isinstance(v, _NUMBERS) and not isinstance(v, bool) and not number_in(v, -math.inf, high):
            raise node.error(key, f"{short(v)} is out of range (at most {high:g})",
                             f"set {key} to a number up to {high:g}")



def llm_table(node: NodeTable, worker: Worker) -> LlmConfig | None:
    """The node's `llm` table, for a command worker only. Its key variable is not read here:
    a command that calls no model (`bound`, `show`, `audit`) needs no secret (`upstream_keys`
    is asked by `run` and `resume`)."""
    if "llm" not in node:
        return None
    cfg = parse_llm(node["llm"], node.error)
    if not isinstance(worker, CommandWorker):
        raise node.error("llm", "model access is given to command workers only",
                         'use kind = "command" with a worker argv, or remove [llm]')
    return cfg


def tree_limit(node: NodeTable, key: str, default: int) -> int:
    """A tree limit: an integer in its range (`LIMIT_FIELDS`); `node` may be the [graph] table,
    whose value is every node's default."""
    low, high = LIMIT_FIELDS[key] if key in LIMIT_FIELDS else RESOURCE_FIELDS[key]
    v = node.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        where = f"node {node.name!r}, field {key!r}" if node.name else f"[graph] {key}"
        raise BadInput(str(node.spec_path), where, f"must be an integer from {low} to {high}, "
                       f"got {short(v)}", f"set {key} = {default} (the default) or leave it out")
    return v


def eval_reserve_of(node: NodeTable) -> float:
    """The part of c_v held back for the gate: a number in [0, spend_ceiling]. (A non-number
    spend_ceiling is left for the model's check, which names it.)"""
    if "eval_reserve" not in node:
        return 0.0  # nothing held back: fits any ceiling
    v = node["eval_reserve"]
    ceiling = node.get("spend_ceiling")
    if not number_in(v, 0.0, MAX_SPEND):
        raise node.error("eval_reserve", f"must be a number of spend units >= 0, got {v!r}",
                         "set eval_reserve = 0 (nothing held back) or the gate's expected cost")
    if isinstance(ceiling, _NUMBERS) and not isinstance(ceiling, bool) and 0 <= ceiling < v:
        raise node.error("eval_reserve", f"{v!r} exceeds spend_ceiling = {ceiling!r}",
                         "lower eval_reserve or raise spend_ceiling")
    return float(v)


def unknown_keys(t: Mapping[str, Any], allowed: set[str], what: str, file: str, node: str) -> None:
    for key in t:
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(allowed), n=1)
            fix = f"did you mean {close[0]!r}?" if close else f"use one of {sorted(allowed)}"
            where = f"node {node!r}, field {key!r}" if node else f"{what} {key!r}"
            raise BadInput(file, where, f"unknown {what}", fix)


def required(node: NodeTable, key: str) -> Any:
    if key not in node:
        raise node.error(key, "is missing", f"add {key} = <number> to [node.{node.name}]")
    return node[key]


def node_names(node: NodeTable, key: str) -> tuple[str, ...]:
    v = node.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise node.error(key, f"must be a list of node names, got {v!r}",
                         f'write {key} = ["other_node"]')
    return tuple(v)


def listed_paths(node: NodeTable, spec_dir: Path, key: str = "gate_files", *,
           folders: bool = False) -> tuple[Path, ...]:
    if key not in node:
        return ()
    v = node[key]
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise node.error(key, f"must be a list of paths, got {v!r}",
                         f'write {key} = ["path/relative/to/spec"]')
    out = []
    for f in v:
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
    if key not in g:
        return None
    v = g[key]
    if not isinstance(v, str) or not v:
        raise BadInput(file, f"[graph] {key}", f"must be a path string, got {v!r}",
                       f'write {key} = "relative/to/spec"')
    found = file_or_none(spec_dir / v)
    if must_exist and found is None:
        raise BadInput(file, f"[graph] {key}", f"{short(v)} is not a file under {spec_dir}",
                       "give an existing file, relative to the spec's folder")
    try:
        return found or (spec_dir / v).resolve()
    except (OSError, RuntimeError) as exc:
        raise BadInput(file, f"[graph] {key}", f"{short(v)} is not a usable path ({exc})",
                       "give a short path, relative to the spec's folder") from None


def resource_limits(node: NodeTable, defaults: Mapping[str, int],
                    limits: Limits) -> ResourceLimits:
    """A node's resource limits: its own fields, else the graph's, else `DEFAULT_RESOURCES`;
    the workspace's is its judged-tree limit (`max_workspace_bytes`), held while it runs too."""
    got = {key: tree_limit(node, key, defaults[key]) if key in node else defaults[key]
           for key in RESOURCE_FIELDS}
    return ResourceLimits(got["max_memory_bytes"], got["max_processes"], got["max_tmp_bytes"],
                          limits.max_bytes)


def upstream_keys(nodes: Mapping[str, Any], file: str) -> None:
    """BadInput (exit 2) for the first node whose `llm.api_key_env` is not set in the engine's
    environment: asked by `run` and `resume`, the commands that call the model."""
    for name, cfg in nodes.items():
        llm = getattr(cfg, "llm", None)
        if llm is not None and llm.api_key_env is not None and llm.key() is None:
            raise BadInput(file, f"node {name!r}, field 'llm.api_key_env'",
                           f"{llm.api_key_env} is not set in the engine's environment",
                           f"export {llm.api_key_env}=<the upstream key> before "
                           "`loopproof run` / `resume`")


def model_room(nodes: Mapping[str, Any], ceilings: Mapping[str, float], price: float,
               file: str) -> None:
    """BadInput (exit 2) for the first node with an `llm` table whose wall-clock reservation
    leaves less than one call's bound for its model calls. A command worker reserves
    min(timeout_s x price, c_v - eval_reserve) for its wall clock before it starts; its calls
    are paid from the rest, and the least a call can be bound to is its completion cap
    (max_tokens at the completion price, before a single prompt token). Less than that left
    and every call is answered 402 from the first: the run "works" and the agent never gets a
    reply."""
    for name, cfg in nodes.items():
        llm = getattr(cfg, "llm", None)
        if llm is None:
            continue
        worker_c = ceilings[name] - cfg.eval_reserve
        wall = min(cfg.timeout_s * price, worker_c)
        left = round(worker_c - wall, 6)
        call = pricing.cost(llm, 0, llm.max_tokens)
        if left + 1e-9 < call:
            raise BadInput(
                file, f"node {name!r}, field 'timeout_s'",
                f"the wall-clock reservation timeout_s x price = {cfg.timeout_s:g} x "
                f"{price:g} = {cfg.timeout_s * price:g} leaves {left:g} of c_v - eval_reserve "
                f"= {worker_c:g} for model calls, less than one call's bound {call:g} "
                f"(max_tokens {llm.max_tokens} at price_completion_per_1k "
                f"{llm.price_completion_per_1k:g}, before any prompt token)",
                _room_fix(worker_c, call, cfg.timeout_s))


def _room_fix(worker_c: float, call: float, timeout_s: float) -> str:
    """The fix: a price whose wall clock leaves room for ten calls (or one), else a c_v."""
    for calls in (10, 1):
        room = worker_c - calls * call
        if room > 0:
            return (f"lower timeout_s or the price (e.g. [graph] price = "
                    f"{room / timeout_s / 2:.3g} leaves room for {calls} call(s)), or raise "
                    "spend_ceiling")
    return (f"raise spend_ceiling above {call:g} + the wall clock's share, or lower "
            "max_tokens or the prices")


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# set by the engine for every worker (the ANTHROPIC_ pair: for a worker with model access)
ENGINE_ENV = frozenset({"PATH", "HOME", "TMPDIR", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"})
ENGINE_ENV_PREFIXES = ("OPENAI_", "LOOPPROOF_")  # the model proxy's and the attempt's own
MAX_ENV_VALUE = 32 * 1024


def env_table(t: Mapping[str, Any], where: str, file: str) -> dict[str, str]:
    """An `env` table (names to strings) for a command worker. Refused, one line each: a name
    that is not a variable name, one the engine sets (PATH, HOME, TMPDIR, OPENAI_*,
    ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, LOOPPROOF_*), LD_* (it would reach bwrap itself),
    one whose name says it holds a secret (engine/system/secrets.py's rule: the spec is stored in the ledger, so a secret reaches a
    worker only through `api_key_env`), a value that is not a string (or holds a NUL byte, or
    is over 32 KiB)."""
    v = t.get("env", {})
    if not isinstance(v, dict):
        raise BadInput(file, f"{where}'env'", f"must be a table of names to strings, got "
                       f"{short(v)}", 'write env = { NAME = "value" }')
    for name, value in v.items():
        shown = name[:64] if name.isprintable() and "'" not in name else short(name)
        field = f"{where}'env.{shown}'"
        if not ENV_NAME.fullmatch(name):
            raise BadInput(file, field, "is not an environment variable name",
                           "use letters, digits and _ (not first a digit)")
        upper = name.upper()
        if upper in ENGINE_ENV or upper.startswith(ENGINE_ENV_PREFIXES):
            raise BadInput(file, field, "is set by the engine for every worker (PATH, HOME, "
                           "TMPDIR, OPENAI_*, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, "
                           "LOOPPROOF_*)", "remove it: the engine's value "
                           "is the one the worker gets (docs/proxy.md says which)")
        if upper.startswith("LD_"):
            raise BadInput(file, field, "would reach the sandbox launcher itself (bwrap starts "
                           "with the worker's environment, outside the sandbox)",
                           "remove it; set it inside the worker's own command instead")
        if secret_name(name):
            raise BadInput(file, field, "looks like a secret's name (the spec is stored in "
                           "the ledger)", "give a secret to a worker only through an llm "
                           "table's api_key_env, or rename a variable that holds none")
        if not isinstance(value, str) or "\0" in value or len(value) > MAX_ENV_VALUE:
            raise BadInput(file, field, f"must be a string of at most {MAX_ENV_VALUE} "
                           f"characters without NUL, got {short(value)}",
                           f'write {name} = "value"')
    return dict(v)


def worker_env(node: NodeTable, worker: Worker, graph: Mapping[str, Any],
               file: str) -> tuple[tuple[str, str], ...]:
    """A command worker's variables: the `[graph]` table's `env`, then the node's (it wins per
    name). A node whose worker is not a command may not set `env` (nothing would read it)."""
    if "env" in node and not isinstance(worker, CommandWorker):
        raise node.error("env", "only a command worker gets environment variables",
                         'use kind = "command", or remove env')
    if not isinstance(worker, CommandWorker):
        return ()
    defaults = env_table(graph, "[graph] ", file) if "env" in graph else {}
    own = env_table(node, f"node {node.name!r}, field ", file)
    return tuple(sorted({**defaults, **own}.items()))


def refuse_unfit_model_calls(spec: Any, price: float | None = None) -> None:
    """`model_room` for a loaded spec (engine.run.spec.Spec) at `price` (default: the spec's):
    asked by `bound`, `run` and `resume`."""
    model_room(spec.nodes, {n.name: n.spend_ceiling for n in spec.graph.nodes},
               spec.price if price is None else price, str(spec.path))


def refuse_missing_keys(spec: Any) -> None:
    """`upstream_keys` for a loaded spec: asked only where the model is called (`run`,
    `resume`)."""
    upstream_keys(spec.nodes, str(spec.path))
