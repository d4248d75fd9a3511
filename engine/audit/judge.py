"""Run a gate (or an oracle) on mutants, each in its own scratch copy, in parallel.

Why threads: each job is a child process (engine.system.process.run_command), so threads only wait;
the cores go to the gates. Why a cache: probes and corpus mutants often build the same workspace,
and a gate's verdict on a given workspace is asked once.

Why a sandbox: a mutant is code, and the gate runs it. Each run is a gate run of the engine's
own kind (engine/system/sandbox/, bwrap by default): it sees its scratch copy and the gate's
folder read-only, a fresh HOME, the gate environment, no network, and nothing outlives it. A
graph node's own gate (a `GateCall`) is handed the scratch copy and runs as the run runs it, in
the node's gate sandbox.

Why a deadline (`--max-seconds`): an audit of a large tree may be stopped with what it has. A job
not started by then is `not run`; one running then is cut there, and its verdict, if it ran out
of time, is `not run` too, never an error of the gate's.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.audit.catalogue import Command, GateCall, Loop
from loopproof.engine.audit.mutants import workspace_key
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.process import ProcessError, gate_environment, run_command
from loopproof.engine.system.sandbox import DEFAULT, Confinement, Sandbox, View, backend
from loopproof.engine.system.trees import remove_tree

ACCEPT, REJECT, ERROR = "accept", "reject", "error"
NOT_RUN = "not run"  # the audit's time ran out first: no verdict, and none is counted


@dataclass(frozen=True)
class GateReply:
    """The gate protocol's reply (not the model's Verdict event): exit 0 accept, 1 reject;
    anything else (2, a timeout, a signal, a command that cannot start) is an error, never an
    accept. `NOT_RUN`: the audit's deadline came first."""

    outcome: str
    detail: str
    seconds: float


@dataclass(frozen=True)
class Deadline:
    """When the audit stops (`time.monotonic()`; None: never) and what said so."""

    at: float | None = None
    why: str = ""

    @classmethod
    def after(cls, seconds: float | None, why: str = "") -> Deadline:
        return cls(None if seconds is None else time.monotonic() + seconds, why)

    def left(self) -> float | None:
        return None if self.at is None else self.at - time.monotonic()

    def passed(self) -> bool:
        left = self.left()
        return left is not None and left <= 0

    def cut(self, timeout_s: float) -> float:
        """`timeout_s`, or less when the deadline comes first."""
        left = self.left()
        return timeout_s if left is None else max(0.0, min(timeout_s, left))

    def not_run(self) -> GateReply:
        return GateReply(NOT_RUN, f"not run: {self.why or 'the audit stopped'}", 0.0)

    def settle(self, reply: GateReply) -> GateReply:
        """An error that ends past the deadline (the deadline cut the run short) is `not run`:
        never counted as the gate's error."""
        return self.not_run() if reply.outcome == ERROR and self.passed() else reply


NEVER = Deadline()


@dataclass(frozen=True)
class Job:
    loop: Loop
    role: str  # "gate" or "oracle"
    files: dict[str, bytes]
    key: str

    @property
    def command(self) -> Command | GateCall:
        command = self.loop.gate if self.role == "gate" else self.loop.oracle
        assert command is not None, "an oracle job of a loop without an oracle"
        return command


def _verdict(result) -> GateReply:
    if result.timed_out or result.killed:
        return GateReply(ERROR, f"killed: {result.killed}", result.seconds)
    code = result.returncode
    if code == 0:
        return GateReply(ACCEPT, "exit 0", result.seconds)
    if code == 1:
        return GateReply(REJECT, "exit 1", result.seconds)
    return GateReply(ERROR, f"exit {code}", result.seconds)


def gate_view(job: Job, scratch: Path) -> View:
    """What one audit run sees: its scratch copy and the gate's folder (read-only), and the
    interpreter the `{python}` placeholder names."""
    exe = Path(sys.executable)
    return View(readable=(scratch, job.loop.gate_dir, exe.parent.parent,
                          Path(os.path.realpath(exe)).parent.parent), private_home=True)


def judge_one(job: Job, scratch_root: Path, sandbox: Sandbox | None = None,
              deadline: Deadline = NEVER) -> GateReply:
    """Write the job's workspace into a fresh scratch folder and judge it there: a command
    template run in the audit's sandbox, or a node's own gate handed the folder."""
    if deadline.passed():
        return deadline.not_run()
    scratch = Path(tempfile.mkdtemp(prefix="ws-", dir=scratch_root))
    try:
        for name, content in job.files.items():
            target = scratch / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        command = job.command
        if not isinstance(command, Command):
            start = time.monotonic()
            left = deadline.left()
            verdict, detail = command(scratch, None if left is None else max(left, 0.0))
            return deadline.settle(GateReply(verdict, detail, time.monotonic() - start))
        argv = command.render(job.loop.gate_dir, scratch)
        try:
            box = Confinement(sandbox or backend(DEFAULT), gate_view(job, scratch))
            result = run_command(argv, scratch, deadline.cut(command.timeout_s),
                                 env=gate_environment(), confine=box)
        except ProcessError as exc:
            return GateReply(ERROR, f"cannot start: {exc}", 0.0)
        return deadline.settle(_verdict(result))
    finally:
        remove_tree(scratch, best_effort=True)


def judge_detached(job: Job, sandbox: Sandbox | None = None) -> GateReply:
    """`judge_one` in a scratch folder of its own: a unit an executor may run on another
    machine (the gate folder must be at the same path there)."""
    with tempfile.TemporaryDirectory(prefix="loopproof-audit-") as root:
        return judge_one(job, Path(root), sandbox)


Mapper = Callable[[Callable[[Job], GateReply], list[Job]], list[GateReply]]


class Judge:
    """Judges jobs with `jobs` parallel workers, caching by (loop, gate folder, role, workspace).
    With a `mapper` (an executor outside the engine, e.g. a Dask cluster), the jobs not in the
    cache are handed to it instead, as `judge_detached` units, and the verdicts come back in the
    jobs' order."""

    def __init__(self, jobs: int | None = None, sandbox: str = DEFAULT,
                 mapper: Mapper | None = None, deadline: Deadline = NEVER) -> None:
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.mapper = mapper
        self.deadline = deadline
        self.sandbox = backend(sandbox)
        why = self.sandbox.problem()
        if why is not None:
            problem, _, fix = why.partition("; fix: ")
            raise BadInput("--sandbox", "sandbox", problem, fix or "pass --sandbox none")
        self.cache: dict[tuple[str, str, str, str], GateReply] = {}
        self.runs = 0
        self.busy_s = 0.0
        self._lock = threading.Lock()

    @staticmethod
    def _cache_key(job: Job) -> tuple[str, str, str, str]:
        return (job.loop.id, str(job.loop.gate_dir), job.role, job.key)

    def known(self, loop: Loop, files: dict[str, bytes]) -> GateReply | None:
        """The verdict this judge already has of `loop`'s gate on exactly `files` (never a
        `NOT_RUN`: those are not kept), or None."""
        return self.cache.get((loop.id, str(loop.gate_dir), "gate", workspace_key(files)))

    def pending(self, jobs: Iterable[Job]) -> int:
        """How many distinct jobs of `jobs` are not in the cache (what `run` will judge)."""
        return len({self._cache_key(j) for j in jobs} - self.cache.keys())

    def run(self, jobs: Iterable[Job], on_done: Callable[[], None] | None = None) -> list[GateReply]:
        jobs = list(jobs)
        todo: dict[tuple, Job] = {}
        for job in jobs:
            k = self._cache_key(job)
            if k not in self.cache and k not in todo:
                todo[k] = job
        if todo and self.mapper is not None:
            verdicts = self.mapper(functools.partial(judge_detached, sandbox=self.sandbox),
                                   list(todo.values()))
            for k, verdict in zip(todo, verdicts, strict=True):
                self.cache[k] = verdict
                self.runs += 1
                self.busy_s += verdict.seconds
                if on_done is not None:
                    on_done()
        elif todo:
            with tempfile.TemporaryDirectory(prefix="loopproof-audit-") as root, \
                    ThreadPoolExecutor(max_workers=self.jobs) as pool:
                futures = {k: pool.submit(self._timed, job, Path(root), on_done)
                           for k, job in todo.items()}
                for k, future in futures.items():
                    self.cache[k] = future.result()
        out = [self.cache[self._cache_key(job)] for job in jobs]
        for k in [k for k, v in self.cache.items() if v.outcome == NOT_RUN]:
            del self.cache[k]  # never a verdict: asked again, it is judged again
        return out

    def _timed(self, job: Job, root: Path, on_done) -> GateReply:
        verdict = judge_one(job, root, self.sandbox, self.deadline)
        with self._lock:
            self.runs += 1
            self.busy_s += verdict.seconds
        if on_done is not None:
            on_done()
        return verdict
