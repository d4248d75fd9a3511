"""loopproof: bounded loops for agent harnesses, proved (Z3, Coq) and run (the engine).

The public API is this module's names, the `loopproof` command and the spec's TOML tables
(docs/engine.md); `loopproof.model` and `loopproof.proofs` are public to whoever extends the model
(docs/extending.md). Everything under `loopproof.engine` is the implementation: importable, but
its names may change without notice (docs/design.md, "What is public").

    import loopproof
    loopproof.bound("examples/repair/graph.toml")        # {"W": ..., "W_c": ..., "B": ..., "fits": ...}
    report = loopproof.run("examples/repair/graph.toml", ledger="/tmp/repair.jsonl")
    loopproof.verify("/tmp/repair.jsonl").status         # "verified"

Errors in what a caller passes raise `loopproof.BadInput` (its message is the one line the CLI
prints); the run's outcome is in the report, and `exit` is the code the CLI would have returned.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopproof.model.bounds import attempt_bound, spend_bound
from loopproof.model.graph import GraphError, LoopGraph, NodeSpec
from loopproof.model.state import Outcome

if TYPE_CHECKING:
    from loopproof.engine.record.ledger import Verification

__all__ = ["BadInput", "GraphError", "LoopGraph", "NodeSpec", "Outcome", "attempt_bound",
           "bound", "resume", "run", "spend_bound", "verify"]


def __getattr__(name: str) -> Any:
    if name == "BadInput":  # the engine loads only when asked for
        from loopproof.engine.system.errors import BadInput

        return BadInput
    raise AttributeError(f"module 'loopproof' has no attribute {name!r}")


def bound(graph: str | Path) -> dict[str, Any]:
    """W, W_c, B and whether W_c fits B for the spec at `graph`, before anything runs."""
    from loopproof.engine.kinds import register_builtin
    from loopproof.engine.run import spec as spec_mod
    from loopproof.engine.run.call_room import refuse_unfit_model_calls

    register_builtin()
    spec = spec_mod.load(Path(graph))
    refuse_unfit_model_calls(spec)
    return dict(spec.bounds())


def run(graph: str | Path, ledger: str | Path, *, jobs: int | None = None,
        stop_file: str | Path | None = None) -> dict[str, Any]:
    """Run the graph at `graph` into a new ledger; the report `loopproof run --json` prints."""
    from loopproof.engine.kinds import register_builtin
    from loopproof.engine.run import spec as spec_mod
    from loopproof.engine.run.runner import Runner

    register_builtin()
    spec = spec_mod.load(Path(graph))
    runner = Runner.start(spec, Path(ledger), jobs=jobs,
                          stop_file=None if stop_file is None else Path(stop_file))
    try:
        code = runner.run()
    finally:
        runner.close()
    return {**runner.report(), "exit": code}


def resume(ledger: str | Path, *, stop_file: str | Path | None = None) -> dict[str, Any]:
    """Continue the run of `ledger` after a crash or a stop; a finished run is reported as is."""
    from loopproof.engine.kinds import register_builtin
    from loopproof.engine.run.runner import Runner

    register_builtin()
    runner = Runner.resume(Path(ledger), stop_file=None if stop_file is None else Path(stop_file))
    try:
        code = runner.continue_run()
    finally:
        runner.close()
    return {**runner.report(), "exit": code}


def verify(ledger: str | Path) -> Verification:
    """The hash chain of `ledger` checked record by record (`status`: verified, torn, broken)."""
    from loopproof.engine.record.ledger import verify as verify_ledger

    return verify_ledger(Path(ledger))
