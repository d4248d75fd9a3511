"""Workers: what an attempt runs. One protocol, two adapters (a command, a Python callable).

Why claims are only recorded: a worker's exit code, its "done", its "all tests pass" are the
worker speaking about itself. The runner appends them to the ledger (a `Claim` event, which the
model defines to change nothing) and never reads them to decide what happens next; only the
gate's verdict can make a node DONE.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loopproof.engine.run.meter import BudgetOverrun, Meter, Metered
from loopproof.engine.system import untrusted
from loopproof.engine.system.errors import LedgerCorrupt
from loopproof.engine.system.process import ProcessError, safe_environment
from loopproof.engine.system.sandbox import Confinement


@dataclass
class AttemptContext:
    """What a worker gets for one attempt."""

    node: str
    activation: int
    attempt: int
    workspace: Path
    meter: Meter
    env: Mapping[str, str] = field(default_factory=dict)
    # Unix sockets the worker's sandbox must bind in (the attempt's model-call proxy)
    sockets: tuple[Path, ...] = ()
    # where the attempt's commands run (engine/run/confine.py); None: unsandboxed (tests,
    # Python workers)
    worker_sandbox: Confinement | None = None
    gate_sandbox: Confinement | None = None
    # polled while a command worker runs: a reason to stop it now (a refused model call under
    # on_refusal = "end-attempt"), else None
    stop: Callable[[], str | None] | None = None
    # set by a worker whose workspace could not come back to the engine (a remote one over the
    # node's limits): why; the attempt's gate then does not judge (an error, as staging would)
    unstaged: str | None = None


class OutcomeUnknown(Exception):
    """Where the attempt ran is lost (a Dask worker died, or never answered within the engine's
    clock): whether its command ran, and what it did, is unknown. The attempt is given back
    (`Abandon`, charged its open reservations), exactly like one in flight at an engine crash."""


Wrap = Callable[[tuple[str, ...]], tuple[str, ...]]  # puts a bridge in front of a command


class Worker(Protocol):
    """Run one attempt in `ctx.workspace`; return the worker's own claims (JSON-able). That and
    `behind_proxy` are all the attempt (engine/run/attempt.py) asks of a worker; worker classes
    subclass this protocol for `behind_proxy`'s default."""

    def run(self, ctx: AttemptContext) -> dict[str, Any]: ...

    def behind_proxy(self, wrap: Wrap) -> Worker | None:
        """This worker with its model calls sent through the attempt's proxy (`wrap` runs a
        command behind the bridge to it), or None when they cannot be: a Python worker runs in
        the engine's process and pays through `ctx.meter`."""
        return None


@dataclass(frozen=True)
class CommandWorker(Worker):
    """A worker command: its own process group in the node's workspace, in the node's sandbox,
    the allow-listed environment plus LOOPPROOF_NODE / _ACTIVATION / _ATTEMPT, killed at timeout
    or ceiling."""

    argv: tuple[str, ...]
    timeout_s: float = 60.0

    def _sandbox(self, ctx: AttemptContext) -> Confinement | None:
        """The node's worker sandbox, plus the attempt's sockets and the absolute files of this
        argv (a wrapper the attempt put in front, such as the model-call bridge)."""
        if ctx.worker_sandbox is None:
            return None
        named = [Path(a) for a in self.argv if os.path.isabs(a) and os.path.exists(a)]
        return ctx.worker_sandbox.seeing(readable=named, sockets=ctx.sockets)

    def behind_proxy(self, wrap: Wrap) -> Worker:
        return dataclasses.replace(self, argv=wrap(self.argv))

    def run(self, ctx: AttemptContext) -> dict[str, Any]:
        env = safe_environment(extra=dict(ctx.env), home=ctx.workspace)
        try:
            m = ctx.meter.run_command(self.argv, ctx.workspace, self.timeout_s, env=env,
                                      confine=self._sandbox(ctx), stop=ctx.stop)
        except ProcessError as exc:
            return {"argv": list(self.argv), "started": False, "error": str(exc)}
        return command_claims(self.argv, m)


def command_claims(argv: tuple[str, ...], m: Metered) -> dict[str, Any]:
    """A metered command's claims, as the ledger's `claim` record keeps them."""
    r = m.result
    limits = {"limit": r.limit} if r.limit is not None else {}
    if r.held is not None:
        limits["held_by"] = dict(r.held)
    return {"argv": list(argv), "started": True, "returncode": r.returncode,
            "killed": m.killed, **limits, "seconds": round(r.seconds, 6),
            "stdout": r.stream("stdout").record(), "stderr": r.stream("stderr").record(),
            "output_truncated": r.output_truncated}


@dataclass(frozen=True)
class CallableWorker(Worker):
    """A Python worker: `fn(ctx)` runs in this process and pays for what it does through
    `ctx.meter` (e.g. `ctx.meter.charge(price)` before an API call). Its return value is its claim.
    A `BudgetOverrun` raised by the meter ends the attempt inside the worker."""

    fn: Callable[[AttemptContext], Any]

    def run(self, ctx: AttemptContext) -> dict[str, Any]:
        try:
            value = self.fn(ctx)
        except BudgetOverrun as exc:
            return {"overrun": untrusted.text(exc)}
        except LedgerCorrupt:  # the engine's own failure, not the worker's claim
            raise
        except (Exception, SystemExit) as exc:  # the worker's crash is its claim; the gate judges
            return {"error": f"{type(exc).__name__}: {untrusted.text(exc)}"}
        # whatever it returned, recordable (engine/system/untrusted.py): a claim never crashes
        return {"returned": untrusted.record_value(value)}
