"""Run one command the way workers and gates must run: own process group, filtered environment,
a hard wall-clock limit, a kill that reaches grandchildren, and (given a `Confinement`) a
sandbox (engine/system/sandbox/).

Why a process group: a worker that forks (a shell, `make`, a test runner) leaves children behind;
killing only the direct child lets them keep spending. The child starts a new session, so its
process-group id is its pid, and `killpg(pid, SIGKILL)` takes the whole tree that stayed in it.
The group is also killed after a normal exit, so nothing a command leaves behind keeps running.

Why an allow-list environment: the engine may hold API keys, tokens and the signing-key path
(LOOPPROOF_*). A worker or gate sees only the variables listed in `ALLOWED` plus `extra`.

Why a gate environment of its own: a gate is the judge, so nothing the worker controls may
reach its interpreter. `gate_environment` fixes PATH, turns off Python's per-user site-packages
(a `.pth` file there runs at every start-up), keeps the working directory (the worker's tree)
off `sys.path` for `python -m` and `-c`, and writes no bytecode into the judged copy.
"""

from __future__ import annotations

import contextlib
import hashlib
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
from typing import IO

from loopproof.engine.system.limits import JOIN_FAILED, JOIN_WORDS, Cell
from loopproof.engine.system.sandbox import Confinement, Launch, Unavailable

# Variables a child may inherit from the engine's environment. Everything else is dropped.
ALLOWED: tuple[str, ...] = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT")
# Variables a child always gets, whatever the engine's environment says.
FIXED: dict[str, str] = {
    "PYTHONHASHSEED": "0",           # deterministic hashing in Python workers and gates
    "PYTHONDONTWRITEBYTECODE": "1",  # a gate must not write __pycache__ into its snapshot
}


# A gate's PATH: system folders only, the same on every run (a gate's own program is an absolute
# path pinned at run start, engine/system/programs.py, so PATH only serves what the gate calls).
GATE_PATH = "/usr/local/bin:/usr/bin:/bin"
# How long a sandbox waiting before its command (`Launch.release`) may take to show its mounts
# (its set-up takes milliseconds; this bounds a host where they cannot be seen at all).
SETUP_S = 10.0
GATE_FIXED: dict[str, str] = {
    "PYTHONNOUSERSITE": "1",  # no per-user site-packages: a .pth file there is run at start-up
    "PYTHONSAFEPATH": "1",  # `python -m mod` does not import `mod` from the judged tree first
    "PYTHONDONTWRITEBYTECODE": "1",
}


class ProcessError(OSError):
    """The command could not be started (missing executable, bad working directory)."""


HEAD_BYTES, TAIL_BYTES = 2048, 4096  # what an output record keeps of a stream: its start and end


@dataclass(frozen=True)
class Stream:
    """What a command wrote to one pipe: the true byte count and SHA-256 of the whole stream,
    its first bytes (up to `max_output`) and its last `TAIL_BYTES`, whatever its length.

    Why both ends: a record of a stream cut at a limit would say the cut's size and show the end
    of the cut, not of the output (a worker that wrote 150 MB looked like one that wrote 1 MiB)."""

    size: int
    sha256: str
    head: bytes
    tail: bytes

    def record(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> dict[str, object]:
        """The ledger's form: `bytes` and `sha256` of the whole stream, `tail` (its real last
        `tail` bytes: all of a short stream) and `head` (its first bytes, up to `head`, that the
        tail does not cover) as text, and `omitted`, the bytes between them not kept."""
        last = self.tail[len(self.tail) - min(tail, self.size, len(self.tail)):]
        rest = self.size - len(last)
        first = self.head[:min(head, rest)]
        return {"bytes": self.size, "sha256": self.sha256, "head": _decode(first, cut="end"),
                "tail": _decode(last, cut="start" if rest else "none"),
                "omitted": rest - len(first)}

    def text(self) -> str:
        """The whole stream when it was all kept, else its head, a note and its tail."""
        if len(self.head) >= self.size:
            return self.head.decode("utf-8", "replace")
        omitted = self.size - len(self.head) - len(self.tail)
        if omitted <= 0:  # head and tail overlap: the stream was all seen
            return (self.head + self.tail[len(self.tail) - (self.size - len(self.head)):]
                    ).decode("utf-8", "replace")
        return (f"{_decode(self.head, cut='end')}\n[... {omitted:,} bytes not kept ...]\n"
                f"{_decode(self.tail, cut='start')}")


def _decode(data: bytes, *, cut: str) -> str:
    """UTF-8 text of a slice of a stream, without the replacement character a multi-byte
    character cut at the slice's edge would give (`cut`: which edge was cut)."""
    if cut == "none":
        pass
    elif cut == "start":
        i = 0
        while i < min(3, len(data)) and data[i] & 0xC0 == 0x80:
            i += 1
        data = data[i:]
    else:
        for i in range(1, min(4, len(data)) + 1):
            b = data[-i]
            if b & 0xC0 != 0x80:  # the last lead byte: drop it if its character is incomplete
                need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
                if need > i:
                    data = data[:-i]
                break
    return data.decode("utf-8", "replace")


@dataclass(frozen=True)
class ProcessResult:
    """What happened to one command. `returncode` is None when we killed it (`killed` says why)."""

    argv: tuple[str, ...]
    returncode: int | None
    timed_out: bool
    killed: str | None  # "timeout" | "ceiling" | "limit" | "refused" | None
    seconds: float
    stdout: bytes  # the first max_output bytes (all of it, unless output_truncated)
    stderr: bytes
    output_truncated: bool = False  # stdout or stderr exceeded max_output; the rest was dropped
    # the whole streams: true size, SHA-256, head and tail (`Stream.record()` for the ledger)
    stdout_stream: Stream | None = None
    stderr_stream: Stream | None = None
    # the resource limit the command hit, in words ("memory limit 256 MiB"; `killed` is then
    # "limit"), and which mechanism held each limit (engine/system/limits/)
    limit: str | None = None
    held: Mapping[str, str] | None = None

    def stream(self, name: str) -> Stream:
        """"stdout" or "stderr" as a `Stream` (from the kept bytes for a result built without)."""
        found: Stream | None = getattr(self, f"{name}_stream")
        if found is not None:
            return found
        kept: bytes = getattr(self, name)
        return Stream(len(kept), hashlib.sha256(kept).hexdigest(), kept, kept[-TAIL_BYTES:])


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


def gate_environment(extra: Mapping[str, str] | None = None, *, path: str = GATE_PATH
                     ) -> dict[str, str]:
    """The environment of a gate (or an admission check): the allow-listed variables, a fixed
    PATH and the Python switches of `GATE_FIXED`. HOME is made fresh per run by the sandbox
    (`View.private_home`)."""
    env = safe_environment()
    env["PATH"] = path
    env.update(GATE_FIXED)
    if extra:
        env.update(extra)
    return env


class _Drain:
    """Read a pipe to EOF in a thread (so the child never blocks), counting and hashing every
    byte, keeping the first `limit` bytes and a rolling window of the last `TAIL_BYTES`."""

    def __init__(self, pipe: IO[bytes], limit: int) -> None:
        self.pipe, self.limit = pipe, limit
        self.chunks: list[bytes] = []
        self.kept = 0
        self.size = 0
        self.sha = hashlib.sha256()
        self.tail = bytearray()
        self.truncated = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while True:
                chunk = self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536)
                if not chunk:
                    break
                with self.lock:
                    self.size += len(chunk)
                    self.sha.update(chunk)
                    self.tail += chunk[-TAIL_BYTES:]
                    del self.tail[:-TAIL_BYTES]
                    room = self.limit - self.kept
                    if room > 0:
                        self.chunks.append(chunk[:room])
                        self.kept += min(room, len(chunk))
                    if len(chunk) > max(room, 0):
                        self.truncated = True

    def result(self, wait_s: float) -> Stream:
        """What was read so far (all of it, unless a process that escaped the group still
        holds the pipe after `wait_s`)."""
        self.thread.join(wait_s)
        with self.lock:
            return Stream(self.size, self.sha.copy().hexdigest(), b"".join(self.chunks),
                          bytes(self.tail))


def _feed(pipe: IO[bytes], data: bytes) -> None:
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
                max_output: int = 1 << 20, confine: Confinement | None = None,
                stop: Callable[[], str | None] | None = None) -> ProcessResult:
    """Run `argv` in `cwd`; SIGKILL its whole process group at `timeout_s`, when `on_tick`
    (called about every `tick_s` seconds with the elapsed time) returns False (killed =
    "ceiling"), or when `stop` (asked as often) gives a reason (killed = "refused"). With
    `confine`, the command runs in that sandbox; its set-up time counts in `seconds` (it is
    paid for). With `confine.hold`, it runs in a `Cell` (engine/system/limits/): killed at the
    first limit it hits (`killed` = "limit"), and every process it started is killed when it
    ends."""
    argv = tuple(str(a) for a in argv)
    if not argv:
        raise ProcessError("empty command: give the program to run as the first argv item")
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise ProcessError(f"{cwd}: working directory does not exist or is not a directory; "
                           f"fix: create it or point the command at an existing folder")
    child_env = dict(env) if env is not None else safe_environment(home=cwd)
    launcher = (confine.launch(argv, cwd, child_env) if confine is not None
                else contextlib.nullcontext(Launch(argv, child_env, cwd)))
    hold = confine.hold if confine is not None else None
    cell: Cell | None = None
    start = time.monotonic()
    try:
        with launcher as launch:
            cell = Cell(hold, launch.tmpfs) if hold is not None else None
            result = _run(argv, launch, timeout_s, start, stdin, on_tick, tick_s, max_output,
                          cell, stop)
    except Unavailable as exc:
        raise ProcessError(f"{argv[0]}: cannot sandbox the command: {exc}") from exc
    if (cell is not None and result.returncode == JOIN_FAILED
            and result.stderr.startswith(JOIN_WORDS.encode())):
        raise ProcessError(f"{argv[0]}: {result.stderr.decode('utf-8', 'replace').strip()}; "
                           f"fix: check that the engine may create cgroups below its own")
    if launch.started() is False and result.killed is None:
        words = result.stderr.decode("utf-8", "replace").strip()[-500:]
        why = launch.explain() if launch.explain is not None else None
        raise ProcessError(f"{argv[0]}: the sandbox could not start command {list(argv)!r} in "
                           f"{cwd}: {words}" + (f"; {why}" if why else "") + "; fix: check "
                           "the program path (it and its interpreter must be visible in the "
                           "sandbox) and that it is executable")
    return result


def _run(argv: tuple[str, ...], launch: Launch, timeout_s: float, start: float,
         stdin: bytes | None, on_tick: Callable[[float], bool] | None, tick_s: float,
         max_output: int, cell: Cell | None = None,
         stop: Callable[[], str | None] | None = None) -> ProcessResult:
    try:
        return _run_in(argv, launch, timeout_s, start, stdin, on_tick, tick_s, max_output, cell,
                       stop)
    finally:
        if cell is not None:  # whatever happened: no process of the command outlives it
            cell.end()


def _run_in(argv: tuple[str, ...], launch: Launch, timeout_s: float, start: float,
            stdin: bytes | None, on_tick: Callable[[float], bool] | None, tick_s: float,
            max_output: int, cell: Cell | None,
            stop: Callable[[], str | None] | None = None) -> ProcessResult:
    try:
        proc = subprocess.Popen(
            cell.wrap(launch.argv) if cell is not None else launch.argv, cwd=launch.cwd,
            env=launch.env, start_new_session=True, close_fds=True,
            pass_fds=launch.pass_fds,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise ProcessError(f"{argv[0]}: cannot start command {list(argv)!r} in {launch.cwd}: "
                           f"{exc.strerror or exc}; fix: check the program path and that it "
                           f"is executable") from exc
    assert proc.stdout is not None and proc.stderr is not None  # both are pipes, above
    out, err = _Drain(proc.stdout, max_output), _Drain(proc.stderr, max_output)
    if stdin is not None:
        threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
    if launch.release is not None:  # the sandbox waits before the command until released
        try:
            if cell is not None:
                cell.hold_tmp(proc.pid, min(start + timeout_s, time.monotonic() + SETUP_S),
                              lambda: _exited(proc.pid))
        finally:
            launch.release()
    pidfd = None
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(proc.pid)
    killed: str | None = None
    limit: str | None = None
    try:
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= timeout_s:
                killed = "timeout"
            elif on_tick is not None and not on_tick(elapsed):
                killed = "ceiling"
            elif cell is not None and (limit := cell.breach()) is not None:
                killed = "limit"
            elif stop is not None and stop() is not None:
                killed = "refused"
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
        if killed is None and cell is not None and (limit := cell.breach(final=True)):
            killed = "limit"  # the kernel ended it at a limit (an OOM kill), or it was over
        # The leader has exited (or been killed) but is not reaped yet, so its pid still names
        # the group: kill whatever it left behind, then reap.
        _kill_group(proc.pid)
        returncode = proc.wait()
        if cell is not None:  # before the pipes are drained: nothing left to hold them open
            cell.end()
    finally:
        if pidfd is not None:
            os.close(pidfd)
        if proc.poll() is None:  # an exception escaped the loop: leave nothing running
            _kill_group(proc.pid)
            proc.wait()
    seconds = time.monotonic() - start
    stdout_stream, stderr_stream = out.result(1.0), err.result(1.0)
    for drain in (out, err):
        if not drain.thread.is_alive():  # a child that escaped the group may still hold it open
            with contextlib.suppress(OSError):
                drain.pipe.close()
    return ProcessResult(
        argv=argv, returncode=None if killed else returncode, timed_out=killed == "timeout",
        killed=killed, seconds=seconds, stdout=stdout_stream.head, stderr=stderr_stream.head,
        output_truncated=out.truncated or err.truncated, stdout_stream=stdout_stream,
        stderr_stream=stderr_stream, limit=limit,
        held=dict(cell.held) if cell is not None else None)
