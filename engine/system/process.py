"""Run one command the way workers and gates must run: own process group, filtered environment,
a hard wall-clock limit, and a kill that reaches grandchildren.

Why a process group: a worker that forks (a shell, `make`, a test runner) leaves children behind;
killing only the direct child lets them keep spending. The child starts a new session, so its
process-group id is its pid, and `killpg(pid, SIGKILL)` takes the whole tree that stayed in it.
The group is also killed after a normal exit, so nothing a command leaves behind keeps running.

Why an allow-list environment: the engine may hold API keys, tokens and the signing-key path
(LOOPPROOF_*). A worker or gate sees only the variables listed in `ALLOWED` plus `extra`.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Variables a child may inherit from the engine's environment. Everything else is dropped.
ALLOWED: tuple[str, ...] = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT")
# Variables a child always gets, whatever the engine's environment says.
FIXED: dict[str, str] = {
    "PYTHONHASHSEED": "0",           # deterministic hashing in Python workers and gates
    "PYTHONDONTWRITEBYTECODE": "1",  # a gate must not write __pycache__ into its snapshot
}


class ProcessError(OSError):
    """The command could not be started (missing executable, bad working directory)."""


@dataclass(frozen=True)
class ProcessResult:
    """What happened to one command. `returncode` is None when we killed it (`killed` says why)."""

    argv: tuple[str, ...]
    returncode: int | None
    timed_out: bool
    killed: str | None  # "timeout" | "ceiling" | None
    seconds: float
    stdout: bytes
    stderr: bytes
    output_truncated: bool = False  # stdout or stderr exceeded max_output; the rest was dropped


def safe_environment(extra: Mapping[str, str] | None = None, *, home: Path | str | None = None
                     ) -> dict[str, str]:
    """The allow-listed environment for a child; HOME is `home` (default: the temp dir)."""
    env = {k: os.environ[k] for k in ALLOWED if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(FIXED)
    tmp = tempfile.gettempdir()
    env["TMPDIR"] = tmp
    env["HOME"] = str(home) if home is not None else tmp
    if extra:
        env.update(extra)
    return env


class _Drain:
    """Read a pipe to EOF in a thread, keeping at most `limit` bytes (so the child never blocks)."""

    def __init__(self, pipe, limit: int) -> None:
        self.pipe, self.limit = pipe, limit
        self.chunks: list[bytes] = []
        self.kept = 0
        self.truncated = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while True:
                chunk = self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536)
                if not chunk:
                    break
                room = self.limit - self.kept
                if room > 0:
                    self.chunks.append(chunk[:room])
                    self.kept += min(room, len(chunk))
                if len(chunk) > max(room, 0):
                    self.truncated = True

    def result(self, wait_s: float) -> bytes:
        self.thread.join(wait_s)
        return b"".join(self.chunks)


def _feed(pipe, data: bytes) -> None:
    with contextlib.suppress(OSError, ValueError):
        pipe.write(data)
    with contextlib.suppress(OSError, ValueError):
        pipe.close()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _exited(pid: int) -> bool:
    """Has `pid` exited? Does not reap it, so its process group id cannot be reused meanwhile."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def run_command(argv: Sequence[str], cwd: Path, timeout_s: float, *,
                env: Mapping[str, str] | None = None, stdin: bytes | None = None,
                on_tick: Callable[[float], bool] | None = None, tick_s: float = 0.05,
                max_output: int = 1 << 20) -> ProcessResult:
    """Run `argv` in `cwd`; SIGKILL its whole process group at `timeout_s` or when `on_tick`
    (called about every `tick_s` seconds with the elapsed time) returns False."""
    argv = tuple(str(a) for a in argv)
    if not argv:
        raise ProcessError("empty command: give the program to run as the first argv item")
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise ProcessError(f"{cwd}: working directory does not exist or is not a directory; "
                           f"fix: create it or point the command at an existing folder")
    child_env = dict(env) if env is not None else safe_environment(home=cwd)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=child_env, start_new_session=True, close_fds=True,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise ProcessError(f"{argv[0]}: cannot start command {list(argv)!r} in {cwd}: "
                           f"{exc.strerror or exc}; fix: check the program path and that it "
                           f"is executable") from exc
    out, err = _Drain(proc.stdout, max_output), _Drain(proc.stderr, max_output)
    if stdin is not None:
        threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
    pidfd = None
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(proc.pid)
    killed: str | None = None
    try:
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= timeout_s:
                killed = "timeout"
            elif on_tick is not None and not on_tick(elapsed):
                killed = "ceiling"
            if killed:
                _kill_group(proc.pid)
                break
            wait_s = max(0.0, min(tick_s, timeout_s - elapsed))
            if pidfd is not None:
                ready, _, _ = select.select([pidfd], [], [], wait_s)
                if ready:
                    break
            else:
                if _exited(proc.pid):
                    break
                time.sleep(min(wait_s, 0.005))
        # The leader has exited (or been killed) but is not reaped yet, so its pid still names
        # the group: kill whatever it left behind, then reap.
        _kill_group(proc.pid)
        returncode = proc.wait()
    finally:
        if pidfd is not None:
            os.close(pidfd)
        if proc.poll() is None:  # an exception escaped the loop: leave nothing running
            _kill_group(proc.pid)
            proc.wait()
    seconds = time.monotonic() - start
    stdout, stderr = out.result(1.0), err.result(1.0)
    for drain in (out, err):
        if not drain.thread.is_alive():  # a child that escaped the group may still hold it open
            with contextlib.suppress(OSError):
                drain.pipe.close()
    return ProcessResult(
        argv=argv, returncode=None if killed else returncode, timed_out=killed == "timeout",
        killed=killed, seconds=seconds, stdout=stdout, stderr=stderr,
        output_truncated=out.truncated or err.truncated)
