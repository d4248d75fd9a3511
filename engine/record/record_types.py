"""Every record type a run ledger (`loopproof-run/1`) or a guard ledger holds, declared once: its
stored `type`, the model event it stands for, its fields and their JSON types.

Why here and nowhere else: the writers (engine/run/, engine/policy/evolution.py) build records
as plain dicts, and the readers (replay, `show`,
`verify`, the timeline page) read them back; both check them against this table
(engine/record/registry.py), so a field written but not declared, or read with a type no run
writes, fails at once, naming the type and the field. docs/engine.md's record table is generated
from it (`python -m loopproof.engine.record.record_types`; tests/engine/record/test_record_registry.py fails when they
differ). An event record's `type` is its model event's name (model.transitions.EVENT_NAMES) in
lower case; the table names the event, never the class.

To add a field: declare it here (optional, so that older ledgers still read), and rerun the
generator for docs/engine.md. A type added or removed, its event, a required field or its types
changed is a new format (the fingerprint pinned in tests/engine/record/test_record_registry.py says so); an
optional field's types narrowed would refuse a stored ledger (the same test reads one).
"""

from __future__ import annotations

import sys

from loopproof.engine.record.registry import RecordType, Registry, field

RUN_FORMAT = "loopproof-run/1"
ENGINE = "engine"  # engine/run/ and engine/policy/

# fields many types share
_NODE = field("node", "string", "the node", required=True)
_ACTIVATION = field("activation", "integer", "its activation")
_ATTEMPT = field("attempt", "integer", "the attempt's number in its activation")
_WHERE = (_NODE, _ACTIVATION, _ATTEMPT)
_SETTLED = field("settled", "number", "spend settled when written")
_WHY = field("why", "string", "the reason in words")
_ROUND = field("round", "integer", "the planner's round")
_STAGE = field("stage", "string", "`round` or `idle`")

RECORD_TYPES: tuple[RecordType, ...] = (
    RecordType("run", None, (
        field("format", "string", f"`{RUN_FORMAT}`", required=True),
        field("graph", "object", "the model graph", required=True),
        field("sandbox", "string", "`bwrap` or `none`"),
        field("spec", "object", "path, dir, sha256, the TOML table, `programs`: each argv[0] "
              "as written and the absolute file it was resolved to"),
        field("pins", "object", "gate files and gate programs -> sha256"),
        field("policy", "object|null", "the pinned policy"),
        field("stop_file", "string"),
        field("bounds", "object", "`W`, `W_c`, `B`, `fits` (older ledgers: `attempts`, "
              "`spend`, `budget`)"),
        field("attempt_bound", "integer", "W in ledgers written before `bounds` named it"),
        field("price", "number", "spend units per wall-clock second"),
        field("jobs", "integer", "`run --jobs N`: attempts in flight at once, in place of the "
              "spec's `max_parallel` (the graph says `max_parallel`, written only when not 1)"),
    ), "record 0: what the run is", ENGINE),
    RecordType("begin", "Begin", _WHERE, "an attempt starts", ENGINE),
    RecordType("reserve", "Reserve", (
        _NODE, field("amount", "number", required=True),
        field("what", "string", "`wall_clock`, `evaluation`, `llm` or the worker's label"),
        field("call", "string", "a model call's id"),
        field("endpoint", "string"), field("model", "string|null")),
        "spend held before a metered operation", ENGINE),
    RecordType("settle", "Settle", (
        _NODE, field("amount", "number", "charged", required=True),
        field("of", "number|null", "the reservation it releases (absent in older ledgers: "
              "every open one)"),
        field("reserved", "number"), field("what", "string"), field("seconds", "number"),
        field("killed", "string|null", "`timeout`, `ceiling` or `limit`"),
        field("limit", "string", "the resource limit in words"),
        field("held_by", "object", "which mechanism held each resource limit"),
        field("claimed", "number|string", "a worker's settle claim above its reservation"),
        field("staging", "object", "the evaluation's: `seconds` spent staging the workspace"),
        field("call", "string", "a model call's id"), field("usage", "string|null"),
        field("price", "number")),
        "a reservation released, what was used charged", ENGINE,
        open_to="a worker's labelled settle facts (`worker_<key>`)"),
    RecordType("overrun", "Overrun", (
        _NODE, field("amount", "number", required=True), field("what", "string"),
        field("attempt_spend", "number"), field("ceiling", "number")),
        "a reservation that does not fit c_v or B: the attempt ends", ENGINE),
    RecordType("llm_call", None, (
        _NODE, _ACTIVATION, _ATTEMPT, field("call", "string", required=True),
        field("endpoint", "string"), field("model", "string|null"),
        field("stream", "boolean"), field("status", "integer|null"),
        field("refused", "boolean"), field("why", "string"),
        field("reserved", "number"), field("charged", "number"),
        field("prompt_bound", "integer"), field("prompt_counted_by", "string|null"),
        field("prompt_tokens", "integer|null", "every prompt token, cached or not"),
        field("completion_tokens", "integer|null", "output, reasoning included"),
        field("cache_read_tokens", "integer|null", "of the prompt, read from the cache"),
        field("cache_write_tokens", "integer|null", "of the prompt, written to the cache"),
        field("usage", "string|null"), field("cut", "boolean|string|null"),
        field("latency_s", "number"), field("request_sha256", "string"),
        field("response_sha256", "string"), field("error", "string")),
        "one model call through the proxy ([proxy.md](proxy.md))", ENGINE),
    RecordType("worker_stopped", None, (
        _NODE, _ACTIVATION, _ATTEMPT, _WHY, field("call", "string"),
        field("left", "number", "what the attempt could still reserve"),
        field("cost", "number", "the refused call's bound")),
        "the proxy ends the worker at a refused model call (checked on replay)", ENGINE),
    RecordType("claim", "Claim", (
        *_WHERE, field("claims", "any", "the worker's own (any JSON); a command worker's "
                       "`argv`, `returncode`, `killed`, `limit`, `held_by`, `seconds`, "
                       "`stdout`, `stderr`")),
        "what the worker says it did (changes nothing)", ENGINE),
    RecordType("verdict", "Verdict", (
        *_WHERE, field("passed", "boolean", required=True), field("verdict", "string"),
        field("detail", "string"), field("seconds", "number"),
        field("snapshot", "string", "the gate's hash of what it judged"),
        field("exit", "integer|null"), field("output", "object", "`stdout`, `stderr`"),
        field("held_by", "object"), field("error", "string"), field("limit", "string"),
        field("changed", "array", "paths the gate changed"),
        field("raised", "string"), field("accepted_tree", "string",
                                         "the hash successors' hand-offs are checked against"),
        field("receipt", "object", "an accepting revision node's receipt (docs/evidence.md)"),
        field("judge", "string", "a judge kind's name"), field("cases", "integer"),
        field("failing", "array", "the failing cases' labels"),
        field("forged", "array", "the planted cases that came back otherwise"),
        field("harness", "string", "the judge harness's sha256 (first 16)"),
        field("code", "object", "a pytest gate's judged import names and the file each was "
                                "loaded from (tree-relative; null: never imported)"),
        field("loaded", "array", "a pytest gate's judged files the run loaded"),
        _SETTLED),
        "the gate's verdict", ENGINE,
        open_to="the gate's own facts (a callable gate's third value, a judge kind's)"),
    RecordType("repair", "Repair", (
        _NODE, field("target", "string", required=True), field("rerun", "array"),
        field("repairs_left", "integer")),
        "an exhausted node repairs an upstream target", ENGINE),
    RecordType("fail", "Fail", (_NODE, _WHY), "the run fails at an exhausted node", ENGINE),
    RecordType("finish", "Finish", (_SETTLED,), "every node is DONE", ENGINE),
    RecordType("refuse", "Refuse", (
        _NODE, _SETTLED, field("ceiling", "number"), field("budget", "number"), _WHY),
        "settled + c_v exceeds B: the next attempt is refused", ENGINE),
    RecordType("abandon", "Abandon", (
        *_WHERE, field("outcome", "string", "`unknown`"), field("charged", "number"), _WHY),
        "on resume: an attempt with no recorded end is given back", ENGINE),
    RecordType("cancel_requested", None, (
        _NODE, field("reason", "string"), field("by", "string"), _ACTIVATION,
        field("attempts", "integer")),
        "`loopproof cancel`: pending until honoured", ENGINE),
    RecordType("cancel", "Cancel", (
        _NODE, field("request", "integer", "the seq of the request"), field("reason", "string"),
        _ACTIVATION, field("attempts", "integer")),
        "on resume, a pending cancel honoured", ENGINE),
    RecordType("cancel_refused", None, (
        field("node", "string|null"), field("request", "integer|null"), _WHY),
        "on resume, a pending cancel the model refuses", ENGINE),
    RecordType("worker_output", None, (*_WHERE, field("claims", "any")),
               "claims of a worker whose attempt ended inside it (overrun)", ENGINE),
    RecordType("resumed", None, (
        field("resume", "integer", "the resume count"), _SETTLED, field("reserved", "number"),
        field("orphans_killed", "integer"),
        field("reaped", "integer", "processes killed in the run's cgroups"),
        field("remote_reaped", "integer", "`resume --dask`: processes of the run killed on the "
              "cluster's worker hosts"),
        field("torn_kept", "string", "the side file holding a torn tail's bytes")),
        "`loopproof resume`", ENGINE),
    RecordType("stopped", None, (
        field("reason", "string"), _SETTLED),
        "the run stopped at a safe point", ENGINE),
    RecordType("pin_changed", None, (
        field("node", "string|null"), field("file", "string"),
        field("what", "string", "`policy`, `accepted_snapshot`, or a gate file"),
        field("expected", "string"), field("found", "string"),
        field("predecessor", "string"), field("error", "string")),
        "a pinned file changed", ENGINE),
    RecordType("meter_refused", None, (
        _NODE, field("what", "string"), field("asked", "string"), _WHY),
        "a worker's meter call with no model event (a bad amount, a second `reserve`, a "
        "`settle` with nothing reserved): the attempt ends failed, unjudged", ENGINE),
    RecordType("overspend_claimed", None, (
        _NODE, field("what", "string"), field("reserved", "number"),
        field("claimed", "number|string")),
        "a worker's settle claim above its reservation (or not a number >= 0): the attempt "
        "ends failed, unjudged", ENGINE),
    RecordType("release_unmet", None, (
        field("unmet", "array", required=True), field("why", "object"), _SETTLED),
        "every node DONE but the policy's release conditions do not hold: no `finish`, "
        "exit 3", ENGINE),
    RecordType("evolution_rejected", None, (
        _STAGE, _ROUND, field("reason", "string"), field("entry", "string|null"),
        field("detail", "string")),
        "a `[planner]` round: a refused request", ENGINE),
    RecordType("agent_proposal", None, (
        _STAGE, _ROUND, field("id", "string"), field("rationale", "string"),
        field("status", "string"), field("executable", "boolean")),
        "a `[planner]` round: an inert agent proposal", ENGINE),
    RecordType("stage_done", None, (
        _ROUND, field("applied", "array"), field("config", "object")),
        "a `[planner]` round committed", ENGINE),
    RecordType("worker_ceiling", None, (
        _NODE, field("what", "string"), field("amount", "number"),
        field("attempt_spend", "number"), field("worker_ceiling", "number"),
        field("eval_reserve", "number")),
        "a worker's ask past c_v - eval_reserve, refused", ENGINE),
    RecordType("resources", None, (
        field("old_price", "number", required=True), field("new_price", "number", required=True),
        _SETTLED, field("gpus_old", "integer"), field("gpus", "integer"),
        field("step_old", "number"), field("step", "number")),
        "a change of price on resume (replay refuses one whose `old_price` is not the current "
        "price)", ENGINE),
)

RUN_RECORDS = Registry(RUN_FORMAT, RECORD_TYPES)

# A revision node's guard ledger (engine/admission/: the broker's records; `loopproof receipt`
# reads them). Its record 0 is `guard.run`; it has no format field of its own.
GUARD_FORMAT = "loopproof-guard"
GUARD = "guard"
_TREE = field("tree", "string", "a tree's hash")
_PROPOSAL = field("proposal", "string|null", "the proposal's digest")
_REASON = field("reason", "string")
GUARD_TYPES: tuple[RecordType, ...] = (
    RecordType("guard.run", None, (field("node", "string"), _ACTIVATION, _ATTEMPT),
               "record 0: the attempt the broker guards", GUARD),
    RecordType("guard.start", None, (
        _TREE, field("suites", "object", "check -> suite hash, pinned"),
        field("policy", "string|null", "the pinned policy's digest"),
        field("guard", "object", "the guard policy"), field("protected", "array")),
        "the broker starts", GUARD),
    RecordType("guard.evidence", None, (
        field("id", "string", required=True), field("phase", "string"),
        field("state_hash", "string"), field("suite_hash", "string"),
        field("execution_id", "string"), field("payload", "object")),
        "a check's evidence", GUARD),
    RecordType("guard.stale", None, (field("where", "string"), _REASON, _PROPOSAL),
               "evidence that no longer binds", GUARD),
    RecordType("guard.decision", None, (
        field("outcome", "string", required=True), _REASON, _PROPOSAL,
        field("candidate", "string|null"), field("checkpoint", "string|null"),
        field("evidence_ids", "array")),
        "a proposal admitted or refused", GUARD),
    RecordType("guard.stop", None, (field("status", "string"), _REASON),
               "the broker stops", GUARD),
    RecordType("guard.advance", None, (
        field("found", "string|null"), field("restored", "string|null"),
        field("removed", "array")), "the workspace advanced to the checkpoint", GUARD),
    RecordType("guard.restore", None, (
        field("found", "string|null"), field("restored", "string|null"),
        field("removed", "array")), "the workspace restored to the checkpoint", GUARD),
    RecordType("guard.checkpoint", None, (
        _TREE, field("generation", "integer"), field("evidence_ids", "array"), _PROPOSAL),
        "a new last-known-good checkpoint", GUARD),
    RecordType("guard.proposal", None, (
        field("digest", "string", required=True), field("kind", "string"),
        field("valid", "boolean"), field("problem", "string|null")),
        "a proposal received", GUARD),
    RecordType("guard.recertification_failed", None, (_REASON,),
               "the checkpoint did not recertify", GUARD),
    RecordType("guard.receipt", None, (
        field("digest", "string", required=True), field("checkpoint", "string|null")),
        "the receipt issued", GUARD),
)
GUARD_RECORDS = Registry(GUARD_FORMAT, GUARD_TYPES)

DOC = "docs/engine.md"
BEGIN, END = "<!-- records:begin", "<!-- records:end -->"


def doc_table() -> str:
    """docs/engine.md's record table, as generated from RECORD_TYPES."""
    return (f"{BEGIN} (generated from engine/record/record_types.py by "
            f"`python -m loopproof.engine.record.record_types --write`; do not edit) -->\n"
            + RUN_RECORDS.markdown(ENGINE) + END)


def main(argv: list[str]) -> int:
    """Print the table, or with --write replace it in docs/engine.md."""
    if argv[1:] != ["--write"]:
        print(doc_table())
        return 0
    from pathlib import Path
    doc = Path(__file__).resolve().parents[2] / DOC
    text = doc.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    doc.write_text(text[:start] + doc_table() + text[end:], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
