"""What a bubblewrap sandbox says on its status pipe (`--json-status-fd`), and what the engine
does with it from outside: wait on the sandbox's set-up by its events (`SetupWatch`), learn
whether bwrap exec'd the command, and end the sandbox's PID namespace once its command is done
(`read_status`).

Why apart from engine/system/sandbox/bwrap.py: that module says what the sandbox is (its mounts
and flags); this one follows one sandbox's life by its pids, pipes and namespaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time

DRAIN_S = 5.0  # how long `read_status` waits for a killed sandbox's namespace to empty
# The least time between two looks at a sandbox's set-up: it makes dozens of mounts, each an
# event, and one look after a burst of them costs as much as one after each
LOOK_GAP_S = 0.002


class SetupWatch:
    """A sandbox's set-up as seen from outside, so that the engine waits on its events instead
    of polling (`Launch.setup_wait`): bwrap writes its status line (`child-pid`) as soon as the
    sandbox's first process exists, and that process then makes every mount of the view in its
    own mount namespace, each of which wakes a poll of its mount table (POLLPRI on
    /proc/PID/mountinfo, which reports every change since the last poll: none is missed).
    What is read of the status pipe here is kept for `read_status`."""

    def __init__(self, status_fd: int) -> None:
        self.fd, self.data = status_fd, b""
        os.set_blocking(status_fd, False)
        self.mounts: int | None = None  # the mount table's fd; -1: the process is gone
        self.pidfd: int | None = None  # the started process (it exits when the sandbox ends)
        self.leader = -1
        self.child: tuple[int, ...] = ()

    def wait(self, leader: int, timeout: float) -> tuple[int, ...]:
        """Block until the set-up may have moved on, at most `timeout` s; the sandbox's first
        process, once known (its mounts are the view's)."""
        if leader != self.leader:
            self.leader = leader
            with contextlib.suppress(OSError, AttributeError):
                self.pidfd = os.pidfd_open(leader)
        poller = select.poll()
        if self.mounts is None:
            with contextlib.suppress(BlockingIOError, OSError):
                while chunk := os.read(self.fd, 65536):
                    self.data += chunk
            pid = child_pid(self.data)
            if pid is not None:
                self.child = (pid,)
                try:
                    self.mounts = os.open(f"/proc/{pid}/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    self.mounts = -1
                return self.child  # look now: its mounts may be made already
            poller.register(self.fd, select.POLLIN)
        elif self.mounts >= 0:
            time.sleep(min(LOOK_GAP_S, timeout))  # a burst of mounts passes: one look for many
            poller.register(self.mounts, select.POLLPRI)
        if self.pidfd is not None:
            poller.register(self.pidfd, select.POLLIN)
        poller.poll(max(0, int(timeout * 1000)))
        return self.child

    def close(self) -> None:
        for fd in (self.mounts, self.pidfd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.mounts = self.pidfd = None


def child_pid(data: bytes) -> int | None:
    """The `child-pid` of bwrap's first status line, once the whole line is there."""
    line, nl, _ = data.partition(b"\n")
    if not nl:
        return None
    with contextlib.suppress(ValueError):
        obj = json.loads(line)
        if isinstance(obj, dict) and isinstance(obj.get("child-pid"), int):
            return int(obj["child-pid"])
    return None


def read_status(fd: int, status: dict[str, object], data: bytes = b"") -> None:
    """Parse bwrap's JSON lines (`data`: what was read of them already; bwrap has exited, so a
    non-blocking read gets the rest), then end the sandbox's PID namespace and wait until it is
    empty."""
    os.set_blocking(fd, False)
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(fd, 65536):
            data += chunk
    status["started"] = False
    for line in data.decode("utf-8", "replace").splitlines():
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict):
                if "child-pid" in obj and "child_pid" not in status:  # bwrap's own, first
                    status["child_pid"] = obj["child-pid"]
                    status["pid_ns"] = obj.get("pid-namespace")
                if "exit-code" in obj:
                    status["started"] = True
    pid, ns = status.get("child_pid"), status.get("pid_ns")
    if isinstance(pid, int) and isinstance(ns, int):
        end_namespace(pid, ns)


def end_namespace(pid: int, ns: int) -> None:
    """SIGKILL the process `pid` if it is still the PID 1 of namespace `ns` (bwrap's init; the
    kernel then kills everything else in the namespace), and wait, at most DRAIN_S, until it is
    gone (the kernel delays a kill only for a process stuck inside a system call)."""
    try:
        pidfd = os.pidfd_open(pid)
    except (ProcessLookupError, AttributeError, OSError):
        return
    try:
        try:
            if os.stat(f"/proc/{pid}/ns/pid").st_ino != ns:
                return  # the pid was reused by an unrelated process
        except OSError:
            return
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        select.select([pidfd], [], [], DRAIN_S)
    finally:
        os.close(pidfd)
