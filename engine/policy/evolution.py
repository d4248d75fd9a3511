"""Catalog-bounded evolution: the only way a planner may change a run's configuration.

Why: a harness that lets its controller rewrite its own settings can also rewrite the criteria
it is judged by. Here a planner (any worker: a Python callable or a command printing JSON) may
only *name* entries of a code-owned feature catalogue. Code supplies every entry's numeric effect;
each knob has a declared range; a round may merge at most `per_round` features (default 2) and an
idle pass at most `per_idle` (default 1). The planner has no write path to policy fields.

Everything the planner asked for is recorded, accepted or not:

- rejected selections (unknown entry, a knob pushed out of its range, a policy field touched, a
  numeric effect supplied by the planner, over the per-stage limit, a malformed reply) become
  `evolution_rejected` records;
- suggestions for new agents become `agent_proposal` records with `"executable": false` — inert,
  nothing here or elsewhere can run them;
- the accepted changes commit in ONE record per stage (`stage_done` for a round, `idle_finished`
  for an idle pass), so a crash before it leaves the configuration unchanged and a crash after it
  leaves it changed: never half. `replay_config` rebuilds the configuration from those records.

Records go to any object with `append(record)` (an `engine.record.ledger.Ledger`, or a list's `append`
for tests); with none given they are only returned. The catalogue itself is
engine/policy/catalog.py.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loopproof.engine.policy.catalog import POLICY_FIELDS, Catalog, Feature, Stage
from loopproof.engine.system.errors import BadInput

COMMIT_RECORD: dict[str, str] = {"round": "stage_done", "idle": "idle_finished"}

# Keys a planner may use. Anything else in a reply is rejected and recorded.
REPLY_KEYS = frozenset({"features", "agents", "rationale"})
SELECTION_KEYS = frozenset({"id", "evidence", "rationale"})
AGENT_KEYS = frozenset({"id", "rationale"})


class Recorder(Protocol):
    """Where evolution records go: `engine.record.ledger.Ledger` or anything with the same `append`."""

    def append(self, record: dict[str, Any]) -> Any: ...  # pragma: no cover


# ---- one stage of evolution ---------------------------------------------------------------------

@dataclass(frozen=True)
class Rejection:
    """One planner request that was refused, and why (a `reason` code plus a readable detail)."""

    reason: str  # unknown_entry | out_of_range | policy_field | planner_effect | over_limit |
    #              duplicate | unknown_field | malformed | unknown_agent
    entry: str
    detail: str


@dataclass(frozen=True)
class Decision:
    """What one stage did: the new configuration and every record it wrote (in order)."""

    stage: Stage
    round: int
    config: dict[str, float]
    applied: tuple[str, ...]
    rejected: tuple[Rejection, ...]
    proposals: tuple[dict[str, str], ...]
    records: tuple[dict[str, Any], ...] = field(default=())


def evolve(catalog: Catalog, config: Mapping[str, float], reply: object, *, stage: Stage,
           round: int, recorder: Recorder | None = None) -> Decision:
    """Apply a planner's reply to `config` under the catalogue's rules; record everything.

    `reply` is the planner's output: a JSON text or an already-parsed mapping. The result's
    configuration differs from `config` only by the code-owned effects of accepted features.
    """
    if stage not in COMMIT_RECORD:
        raise ValueError(f"stage must be 'round' or 'idle', not {stage!r}")
    if set(config) != set(catalog.knobs):
        raise ValueError(f"the configuration's knobs {sorted(config)} are not the catalogue's "
                         f"{sorted(catalog.knobs)}")
    rejected: list[Rejection] = []
    proposals: list[dict[str, str]] = []
    current = dict(config)
    applied: list[str] = []

    parsed, problem = _parse(reply)
    if problem is not None:
        rejected.append(problem)
        parsed = {}

    rejected.extend(guard_reply_keys(parsed))

    selections = parsed.get("features", [])
    if not isinstance(selections, list):
        rejected.append(Rejection("malformed", "features", "features must be a list"))
        selections = []
    seen: set[str] = set()
    for sel in selections:
        verdict = _check_selection(catalog, current, sel, seen)
        if verdict is not None:
            rejected.append(verdict)
            continue
        fid = sel["id"]
        seen.add(fid)
        if (over := guard_limit(catalog, stage, applied, fid)) is not None:
            rejected.append(over)
            continue
        current = _apply(catalog.features[fid], current)
        applied.append(fid)

    agents = parsed.get("agents", [])
    if not isinstance(agents, list):
        rejected.append(Rejection("malformed", "agents", "agents must be a list"))
        agents = []
    for a in agents:
        if not isinstance(a, dict) or not isinstance(a.get("id"), str):
            rejected.append(Rejection("malformed", "agents", "an agent needs a string id"))
        elif set(a) - AGENT_KEYS:
            extra = set(a) - AGENT_KEYS
            kind = "policy_field" if extra & POLICY_FIELDS else "unknown_field"
            rejected.append(Rejection(kind, f"agents.{a['id']}",
                                      f"unexpected keys {sorted(extra)}"))
        elif a["id"] not in catalog.agents:
            rejected.append(Rejection("unknown_agent", a["id"], "not in the agent catalogue"))
        else:
            proposals.append({"id": a["id"], "rationale": str(a.get("rationale", ""))})

    records = _records(stage, round, current, applied, rejected, proposals)
    if recorder is not None:
        # One fsync for the stage when the recorder is a ledger (group commit); the commit
        # record is last, so a crash before it leaves the configuration as it was.
        with getattr(recorder, "group", contextlib.nullcontext)():
            for rec in records:
                recorder.append(rec)
    return Decision(stage, round, current, tuple(applied), tuple(rejected), tuple(proposals),
                    tuple(records))


def _parse(reply: object) -> tuple[dict[str, Any], Rejection | None]:
    if isinstance(reply, bytes):
        reply = reply.decode("utf-8", errors="replace")
    if isinstance(reply, str):
        try:
            reply = json.loads(reply)
        except json.JSONDecodeError as exc:
            return {}, Rejection("malformed", "reply", f"not JSON ({exc.msg} at {exc.pos})")
    if not isinstance(reply, dict):
        return {}, Rejection("malformed", "reply", "the reply must be a JSON object")
    return reply, None


def guard_reply_keys(parsed: Mapping[str, Any]) -> list[Rejection]:
    """Top-level keys other than features/agents/rationale: policy writes, direct settings of
    values, or noise. None of them is acted on; each is rejected so that it is recorded."""
    out = []
    for key in sorted(set(parsed) - REPLY_KEYS):
        if key in POLICY_FIELDS:
            out.append(Rejection("policy_field", key, "the planner named a pinned policy field"))
        elif key in ("knobs", "config", "effects", "set"):
            out.append(Rejection("planner_effect", key,
                                 "the planner may not set values; name catalogue features"))
        else:
            out.append(Rejection("unknown_field", key, "unexpected key in the reply"))
    return out


# Each guard sees one selection and says why it may not be merged (or None). They run in order;
# the first objection wins. Kept as separate named functions so a test can remove any one of them
# and watch the test that depends on it fail.

def guard_shape(catalog: Catalog, config: Mapping[str, float], sel: Any, seen: set[str]
                ) -> Rejection | None:
    if not isinstance(sel, dict) or not isinstance(sel.get("id"), str):
        return Rejection("malformed", "features", "a selection needs a string id")
    if any(not isinstance(sel.get(k, ""), str) for k in ("evidence", "rationale")):
        return Rejection("malformed", sel["id"], "evidence and rationale must be text")
    return None


def guard_policy_field(catalog: Catalog, config: Mapping[str, float], sel: Any, seen: set[str]
                       ) -> Rejection | None:
    named = (set(sel) | {sel["id"]}) & POLICY_FIELDS
    if named:
        return Rejection("policy_field", sel["id"],
                         f"the selection names pinned policy field(s) {sorted(named)}")
    return None


def guard_planner_effect(catalog: Catalog, config: Mapping[str, float], sel: Any,
                         seen: set[str]) -> Rejection | None:
    extra = set(sel) - SELECTION_KEYS
    if extra:
        return Rejection("planner_effect", sel["id"],
                         f"the selection carries {sorted(extra)}; code supplies every effect")
    return None


def guard_known_entry(catalog: Catalog, config: Mapping[str, float], sel: Any, seen: set[str]
                      ) -> Rejection | None:
    if sel["id"] not in catalog.features:
        return Rejection("unknown_entry", sel["id"], "not in the feature catalogue")
    return None


def guard_duplicate(catalog: Catalog, config: Mapping[str, float], sel: Any, seen: set[str]
                    ) -> Rejection | None:
    if sel["id"] in seen:
        return Rejection("duplicate", sel["id"], "selected twice in one stage")
    return None


def guard_range(catalog: Catalog, config: Mapping[str, float], sel: Any, seen: set[str]
                ) -> Rejection | None:
    after = _apply(catalog.features[sel["id"]], config)
    for knob, value in sorted(after.items()):
        k = catalog.knobs[knob]
        if not k.holds(value):
            return Rejection("out_of_range", sel["id"],
                             f"{knob} would become {value:g}, outside [{k.low:g}, {k.high:g}]")
    return None


SELECTION_GUARDS: tuple[Callable[..., Rejection | None], ...] = (
    guard_shape, guard_policy_field, guard_planner_effect, guard_known_entry, guard_duplicate,
    guard_range,
)


def guard_limit(catalog: Catalog, stage: Stage, applied: Sequence[str], fid: str
                ) -> Rejection | None:
    if len(applied) >= catalog.limit(stage):
        return Rejection("over_limit", fid, f"at most {catalog.limit(stage)} change(s) per {stage}")
    return None


def _check_selection(catalog: Catalog, config: Mapping[str, float], sel: object,
                     seen: set[str]) -> Rejection | None:
    """None when `sel` may be merged into `config`; otherwise the first guard's objection."""
    for guard in SELECTION_GUARDS:
        objection = guard(catalog, config, sel, seen)
        if objection is not None:
            return objection
    return None


def _apply(feature: Feature, config: Mapping[str, float]) -> dict[str, float]:
    out = dict(config)
    for knob, delta in feature.effects.items():
        out[knob] = round(out[knob] + delta, 12)
    return out


def _records(stage: Stage, rnd: int, config: Mapping[str, float], applied: Sequence[str],
             rejected: Sequence[Rejection], proposals: Sequence[Mapping[str, str]]
             ) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in rejected:
        out.append({"type": "evolution_rejected", "stage": stage, "round": rnd,
                    "reason": r.reason, "entry": r.entry, "detail": r.detail})
    for p in proposals:
        out.append({"type": "agent_proposal", "stage": stage, "round": rnd, "id": p["id"],
                    "rationale": p["rationale"], "status": "pending", "executable": False})
    out.append({"type": COMMIT_RECORD[stage], "round": rnd, "applied": list(applied),
                "config": dict(sorted(config.items()))})
    return out


# ---- rebuilding the configuration from records --------------------------------------------------

def replay_config(catalog: Catalog, records: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The configuration after the last committed stage: defaults, then each commit's features
    re-applied by code (a commit's recorded `config` is checked against that, not trusted)."""
    config = catalog.defaults()
    for rec in records:
        if rec.get("type") not in COMMIT_RECORD.values():
            continue
        for fid in rec.get("applied", []):
            if fid not in catalog.features:
                raise BadInput("ledger", f"{rec['type']}.applied",
                               f"feature {fid!r} is not in the catalogue",
                               "resume with the catalogue the run started with")
            config = _apply(catalog.features[fid], config)
        if rec.get("config") is not None and dict(rec["config"]) != config:
            raise BadInput("ledger", f"{rec['type']}.config",
                           "the recorded configuration differs from the replayed one",
                           "resume with the catalogue the run started with")
    return config


# ---- planners -----------------------------------------------------------------------------------

Planner = Callable[[Mapping[str, Any]], object]
"""A planner gets the context (stage, round, config, catalogue ids) and returns its reply."""


def command_planner(argv: Sequence[str], cwd: Path, timeout_s: float = 30.0) -> Planner:
    """A planner that is a command: the context on stdin as JSON, the reply on stdout."""
    from loopproof.engine.system.process import (
        run_command,  # imported here: only command planners need it
    )

    def plan(context: Mapping[str, Any]) -> object:
        res = run_command(argv, cwd, timeout_s,
                          stdin=json.dumps(context, sort_keys=True).encode())
        if res.returncode != 0:  # not JSON, so `evolve` rejects and records it as malformed
            return f"planner failed: exit {res.returncode}, killed={res.killed}"
        return res.stdout.decode("utf-8", errors="replace")

    return plan


def plan_stage(catalog: Catalog, config: Mapping[str, float], planner: Planner, *,
               stage: Stage, round: int, recorder: Recorder | None = None) -> Decision:
    """Ask the planner, then apply its reply under the catalogue's rules."""
    context = {"stage": stage, "round": round, "config": dict(sorted(config.items())),
               "features": sorted(catalog.features), "agents": sorted(catalog.agents),
               "limit": catalog.limit(stage)}
    return evolve(catalog, config, planner(context), stage=stage, round=round, recorder=recorder)
