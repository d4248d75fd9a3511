"""The growth loop's own records, registered by this study on top of the engine's run format.

Why here and not in engine/record/record_types.py: the loop is a study that drives the engine's
primitives (the model, the journal, the meter, the pinned policy); the engine writes none of
these records and its readers need not know them. `GROWTH_RECORDS` is the engine's registry
extended with the loop's types and the fields it adds to the engine's (record 0's `growth`, a
`begin`'s budget, a `settle`'s work and ticks, a `verdict`'s round, a `stopped` boundary); the
loop writes through a journal replayed with it, and its readers replay with it. Same format,
same hash chain: `loopproof verify` checks a growth ledger's chain as it does any other.
"""

from __future__ import annotations

from loopproof.engine.record.record_types import RUN_RECORDS
from loopproof.engine.record.registry import RecordType, field

GROWTH = "growth"  # the writer named in the table below
_ROUND = field("round", "integer", "the growth round")
_SETTLED = field("settled", "number", "spend settled when written")

TYPES: tuple[RecordType, ...] = (
    RecordType("idle_finished", None, (_ROUND, field("applied", "array"),
                                       field("config", "object")),
               "an idle stage committed", GROWTH),
    RecordType("round", None, (_ROUND, field("work", "number"), _SETTLED),
               "a training round starts", GROWTH),
    RecordType("round_cut", None, (_ROUND, field("done", "number"), _SETTLED),
               "a round cut short", GROWTH),
    RecordType("tick", None, (
        _ROUND, field("tick", "integer"), field("work", "number"), field("charge", "number"),
        field("gpus", "integer"), field("step", "number"), field("price", "number")),
        "one tick of training work", GROWTH),
    RecordType("evaluation", None, (
        _ROUND, field("successes", "array"), field("episodes", "integer"),
        field("rate", "number"), field("rates", "object"), field("target", "number"),
        field("target_met", "boolean"), field("hours", "number"), field("charge", "number"),
        field("config", "object")),
        "a round's evaluation", GROWTH),
    RecordType("planner_call", None, (field("stage", "string", "`round` or `idle`"), _ROUND),
               "the planner is asked", GROWTH),
    RecordType("loop_broken", None, (field("error", "string"),), "the loop broke", GROWTH),
)

FIELDS = {
    "run": (field("growth", "object", "the growth loop's seed, arm, resources, catalogue"),),
    "begin": (field("budget", "number", "B"),),
    "settle": (field("work", "number", "GPU-hours of work"), field("ticks", "integer")),
    "verdict": (field("round", "integer", "the growth round"),
                field("to_target", "number|null")),
    "stopped": (field("boundary", "integer", "the stage boundary"),),
}

GROWTH_RECORDS = RUN_RECORDS.extended(TYPES, FIELDS)
