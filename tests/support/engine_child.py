"""The engine in a process of its own, for a test that kills it (a crash site's SIGKILL, the
test's own SIGKILL or signal): forked from a warm process instead of started cold.

Why a forkserver: a cold `python -c` child spends about half a CPU-second importing the engine
before it runs a one-node graph, and the crash tests start dozens. Python's multiprocessing
forkserver is a process of its own, started once per test process, that imports the engine
once (its preload) and forks each child from there: a new process with a fresh interpreter's
signal handlers, none of the test process's threads, and the engine's module state as import
left it (nothing has run in the server but imports: the commands a `cli` child runs and every
shipped node kind are imported there too, as the entry points import them before they run). The child sets what a cold child got from its
environment (all of it: the test's, `LOOPPROOF_CRASH_AT` read at the first crashpoint, or one
the test gives, as `env=` of subprocess) and its working folder before it runs; its stdout and
stderr go to files the test reads. What is not the same as a cold `python -m
loopproof.engine.cli`: the interpreter's start (tests/engine/run/test_spec.py keeps one test of
the entry point in its own process) and /proc/PID/environ, which shows the environment the
server started with (the engine's own, never what a sandboxed worker sees). The server and its resource
tracker live as long as the test process (tests/support/leftover_processes.py: LIFELONG).

What runs in the child (`argv[0]`):
- `run SPEC LEDGER`: `Runner.start(load(SPEC), LEDGER).run()`;
- `resume LEDGER`: `Runner.resume(LEDGER).continue_run()`;
- `api SPEC LEDGER`: the public `loopproof.run` (it registers every shipped node kind);
- `cli ARG...`: `loopproof.engine.cli.main` (the `loopproof` command).
Its exit code is what that returned; a child killed by a signal has the negative signal
number, as subprocess reports it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import loopproof
import loopproof.engine.commands.resume  # noqa: F401  (preloaded: what a `cli` child runs,
import loopproof.engine.commands.run  # noqa: F401  which `cli` imports only then)
from loopproof.engine import cli
from loopproof.engine.kinds import register_builtin
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load
from loopproof.engine.system import faults
from tests.support.paths import REPO

CRASH_ENV = faults.ENV
_context: Any = None
register_builtin()  # the admission layer's kind imported (every entry point registers it first)


def _forkserver() -> Any:
    """The forkserver context, its preload this module (which imports the engine)."""
    global _context
    if _context is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        _context = ctx
    return _context


def _main(argv: list[str], env: dict[str, str], out: str, err: str) -> None:
    """The child: the environment and folder a cold child had, then `argv`."""
    for path, target in ((out, 1), (err, 2)):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(REPO)
    faults.reset()  # the crash site and count come from this child's environment
    what, args = argv[0], argv[1:]
    if what == "run":
        runner = Runner.start(load(args[0]), args[1])
        code = runner.run()
        runner.close()
    elif what == "resume":
        runner = Runner.resume(args[0])
        code = runner.continue_run()
        runner.close()
    elif what == "api":
        code = loopproof.run(args[0], args[1])["exit"]
    elif what == "cli":
        code = cli.main(args)  # it registers the shipped node kinds, as the command does
    else:
        raise ValueError(f"engine_child: unknown {what!r}")
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


@dataclass
class Child:
    """A started child: its process and the files its stdout and stderr go to."""

    process: Any
    out: Path
    err: Path

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def poll(self) -> int | None:
        code: int | None = self.process.exitcode  # a multiprocessing.Process's
        return code

    def wait(self, timeout: float = 120.0) -> int:
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.kill()
            raise AssertionError(f"the engine's child did not end within {timeout:g} s: "
                                 f"{self.stderr()[-3000:]}")
        return int(self.process.exitcode)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.join(60)

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")


def environment(crash_at: str | None = None, drop_loopproof: bool = False) -> dict[str, str]:
    """This process's environment as a child gets it: `LOOPPROOF_CRASH_AT` set to `crash_at`
    (or removed), and with `drop_loopproof` every LOOPPROOF_ variable removed."""
    env = {k: v for k, v in os.environ.items()
           if k != CRASH_ENV and not (drop_loopproof and k.startswith("LOOPPROOF_"))}
    if crash_at is not None:
        env[CRASH_ENV] = crash_at
    return env


@contextlib.contextmanager
def started(argv: Sequence[str], *, crash_at: str | None = None, drop_loopproof: bool = False,
            env: dict[str, str] | None = None) -> Iterator[Child]:
    """The engine running `argv` in a child, with `env` as its whole environment if given
    (else `environment(crash_at, drop_loopproof)`); killed (and waited for) if it still runs
    when the block ends."""
    with tempfile.TemporaryDirectory(prefix="engine-child-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        out.touch()
        err.touch()
        proc = _forkserver().Process(target=_main, args=(
            [str(a) for a in argv],
            dict(env) if env is not None else environment(crash_at, drop_loopproof),
            str(out), str(err)))
        proc.start()
        child = Child(proc, out, err)
        try:
            yield child
        finally:
            if proc.exitcode is None:
                child.kill()


def engine_run(argv: Sequence[str], *, crash_at: str | None = None,
               env: dict[str, str] | None = None,
               timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run `argv` in a child to its end (or its crash site): its exit code, stdout, stderr."""
    with started(argv, crash_at=crash_at, env=env) as child:
        code = child.wait(timeout)
        return subprocess.CompletedProcess(list(argv), code, child.stdout(), child.stderr())
