"""The bubblewrap backend: every command in its own mount, PID, IPC and (unless the node asks for
the network) network namespace, with no capabilities.

The filesystem a command sees, built in this order (bwrap applies mounts in argument order, so a
deeper path always goes after the folder that holds it):

1. the host's root, read-only; a fresh /dev and a /proc of the command's own PID namespace;
2. masked by empty private tmpfs: /tmp, /var/tmp, /run and the engine user's home (keys, tokens,
   shell history, and the engine's own temp files live there);
3. `View.readable` bound back read-only, `View.writable` read-write, `View.sockets` bound in;
4. `View.hidden` covered: a file by /dev/null, a folder by an empty read-only tmpfs.

A path is mounted only when the layers above leave it visible the wrong way (a readable path
outside every mask needs no bind), so an attempt costs a handful of mounts.

Why each flag:
- `--unshare-pid --die-with-parent`, *without* `--as-pid-1`: PID 1 of the command's namespace is
  bwrap's own init, whose parent-death signal the command cannot clear (a command's own
  `prctl(PR_SET_PDEATHSIG, 0)` is its own business). bwrap exits as soon as the command does,
  its init dies with it (or with the engine, through bwrap), and the kernel then kills every
  process left in the namespace, `setsid` daemons included. `launch` then kills that init
  itself, in case it outlived bwrap, and waits until the namespace is empty.
- `--cap-drop ALL`: run as root, bwrap keeps every capability by default, and CAP_SYS_ADMIN
  would let the command remount the read-only view read-write.
- `--unshare-net` (unless `View.network`): no route out; only a loopback of its own. Unix
  sockets a node needs are bound in by path (`View.sockets`).
- `--unshare-ipc`: no SysV shared memory or semaphores shared with the engine's processes.
- `--seccomp`: no kernel keyrings (engine/system/sandbox/seccomp.py): they are not files, so no
  mount hides the engine user's keys, and a key added there would outlive the attempt.
- bwrap is started with the child's environment (already allow-listed), so even the namespace's
  /proc/1/environ holds no engine secret.
- `--size` before each private tmpfs (and a tmpfs of its own on /dev/shm) when the view sets
  `tmp_bytes` (the node's `max_tmp_bytes`): a full /tmp is ENOSPC for the command, never the
  host's memory (the pages count against the memory limit too: engine/system/limits/).
- `--json-status-fd`: bwrap reports `exit-code` only if it exec'd the command; a mount or exec
  failure is then an error of the sandbox, never read as the command's exit code.
- `--block-fd` (with sized temp folders): after its mounts, before the command, the sandbox waits
  until the engine closes the pipe's other end (`Launch.release`); the engine first opens the
  folders (engine/system/limits/watch.py `TmpWatch`), so one the command fills and quits is
  still seen full, however soon it quits.
No `--new-session`: `run_command` starts bwrap in a new session already (no controlling
terminal, so no TIOCSTI injection).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import stat
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from loopproof.engine.system import limits
from loopproof.engine.system.sandbox.base import Launch, View
from loopproof.engine.system.sandbox.seccomp import filter_fd

MASKED = ("/tmp", "/var/tmp", "/run")
PRIVATE_TMP = "/tmp"  # HOME and TMPDIR of a command with `View.private_home`; TMPDIR of all
SHM = "/dev/shm"  # a tmpfs of its own when the view sizes the private temp folders
DRAIN_S = 5.0  # how long `launch` waits for a killed sandbox's namespace to empty

_PROBE: dict[str, str | None] = {}


def _real(p: Path | str) -> str:
    return os.path.realpath(p)


def _depth(p: str) -> int:
    """How many components a real path has ("/" has one): `len(Path(p).parts)`, without
    building a Path (mount_plan asks it for every pair of mounts of every launch)."""
    return 1 if p == "/" else p.count("/") + 1


def _under(p: str, root: str) -> bool:
    return p == root or root == "/" or p.startswith(root.rstrip("/") + "/")


def masked_roots(home: str | None = None) -> list[str]:
    """The folders hidden behind an empty tmpfs: the temp folders, /run (sockets of system
    services) and the engine user's home, each as a real path, the ones that exist."""
    home = home if home is not None else os.path.expanduser("~")
    out: list[str] = []
    for p in (*MASKED, home):
        if not p or not os.path.isabs(p) or os.path.islink(p) or not os.path.isdir(p):
            continue
        r = _real(p)
        if r != "/" and r not in out:
            out.append(r)
    return out


def mount_plan(view: View, masks: Sequence[str]) -> list[tuple[str, str, str]]:
    """(operation, source, destination) triples, in the order bwrap must apply them, after the
    read-only root: "tmpfs", "ro", "rw", "hide-file", "hide-dir"."""
    want: dict[str, tuple[int, str, str]] = {}  # dest -> (priority, op, src); higher wins
    reals: dict[str, str] = {}  # each path resolved once per plan (a resolve is a stat a part)

    def real(p: Path | str) -> str:
        key = os.fspath(p)
        got = reals.get(key)
        if got is None:
            got = reals[key] = _real(key)
        return got

    def put(dest: str, prio: int, op: str, src: str = "") -> None:
        if dest == "/" or (dest in want and want[dest][0] >= prio):
            return
        want[dest] = (prio, op, src)

    temps = {real(t) for t in MASKED if os.path.isdir(t)}
    for m in masks:
        put(m, 0, "tmpfs")
    for p in view.readable:
        if os.path.exists(p) and real(p) not in temps:  # the private temp folder stays private
            put(real(p), 1, "ro", real(p))
    for p in (*view.writable, *view.sockets):
        if os.path.exists(p):
            put(real(p), 2, "rw", real(p))
    for p in view.hidden:
        if os.path.lexists(p):
            r = real(p)
            if os.path.exists(r):
                put(r, 3, "hide-dir" if os.path.isdir(r) else "hide-file")
    ordered = sorted(want.items(), key=lambda kv: (_depth(kv[0]), kv[0]))
    plan: list[tuple[str, str, str]] = []
    layers: list[tuple[str, str]] = [("/", "ro")]  # (dest, op) applied so far
    for dest, (_prio, op, src) in ordered:
        if op in ("ro", "hide-file", "hide-dir") and _cover(dest, layers) == _effect(op):
            continue  # already as it should be: e.g. a readable path outside every mask
        layers.append((dest, op))
        plan.append((op, src, dest))
    return plan


def unseen(path: str, view: View, masks: Sequence[str]) -> str | None:
    """Why `path` cannot be seen by a command under `view` (None: it can): it does not exist,
    or the deepest layer of the mount plan over it masks it (a tmpfs over the engine user's
    home or /tmp, a hidden run file)."""
    if not os.path.exists(path):
        return "it does not exist"
    r = _real(path)
    layers = [("/", "ro"), *((dest, op) for op, _src, dest in mount_plan(view, masks))]
    if _cover(r, layers) != "masked":
        return None
    holder = max((d for d, op in layers if _under(r, d) and _effect(op) == "masked"),
                 key=_depth)
    what = ("it is one of the run's files hidden from workers" if holder == r
            else f"it lies under {holder}, which the sandbox masks (an empty folder)")
    return f"{what}{'' if r == path else f' (it is {r})'}"


def explain_start(argv: Sequence[str], env: Mapping[str, str], view: View,
                  masks: Sequence[str]) -> str | None:
    """After bwrap could not exec `argv`: the first file it needed that the command cannot see
    (the program, then the interpreter its `#!` line names, and that one's), and why."""
    from loopproof.engine.system.programs import (
        shebang,  # a sibling module; only on this failure path
    )
    if not argv:
        return None
    current = argv[0]
    if not os.path.isabs(current):
        current = shutil.which(current, path=env.get("PATH", os.defpath)) or current
    what = f"the program {current}"
    for _ in range(5):
        why = unseen(current, view, masks) if os.path.isabs(current) else "it is not on PATH"
        if why is not None:
            return f"{what} is not visible: {why}"
        named = shebang(current)
        if named is None:
            return None
        found = named if os.path.isabs(named) else shutil.which(
            named, path=env.get("PATH", os.defpath))
        what = f"the interpreter {named} named by the shebang of {current}"
        if found is None:
            return f"{what} is not visible: it is not on PATH"
        current = found
    return None


def _effect(op: str) -> str:
    return {"ro": "ro", "rw": "rw", "tmpfs": "masked", "hide-file": "masked",
            "hide-dir": "masked"}[op]


def _cover(path: str, layers: Sequence[tuple[str, str]]) -> str:
    """What the deepest layer holding `path` makes of it: "ro", "rw" or "masked"."""
    best = ("/", "ro")
    for dest, op in layers:
        if _under(path, dest) and _depth(dest) >= _depth(best[0]):
            best = (dest, op)
    return _effect(best[1])


def bwrap_argv(bwrap: str, argv: Sequence[str], cwd: Path, view: View, status_fd: int,
               masks: Sequence[str], *, seccomp_fd: int | None = None,
               block_fd: int | None = None) -> list[str]:
    """The bwrap command line that runs `argv` in `cwd` under `view` (and the seccomp filter
    readable from `seccomp_fd`, and waiting on `block_fd` before the command, when given)."""
    size = [] if view.tmp_bytes is None else ["--size", str(max(view.tmp_bytes, 1))]
    out = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
           *((*size, "--tmpfs", SHM) if size else ()),
           "--unshare-pid", "--unshare-ipc", "--die-with-parent",
           "--cap-drop", "ALL", "--json-status-fd", str(status_fd)]
    if seccomp_fd is not None:
        out += ["--seccomp", str(seccomp_fd)]
    if block_fd is not None:
        out += ["--block-fd", str(block_fd)]
    if not view.network:
        out.append("--unshare-net")
    sealed: list[str] = []
    for op, src, dest in mount_plan(view, masks):
        if op == "tmpfs":
            out += [*size, "--tmpfs", dest]
        elif op == "ro":
            out += ["--ro-bind", src, dest]
        elif op == "rw":
            out += ["--bind", src, dest]
        elif op == "hide-file":
            out += ["--ro-bind", "/dev/null", dest]
        else:  # hide-dir: an empty folder, made read-only once the paths inside it are bound
            out += ["--tmpfs", dest]
            sealed.append(dest)
    for dest in sealed:
        out += ["--remount-ro", dest]
    out += ["--chdir", _real(cwd), "--", *argv]
    return out


class Bwrap:
    """`sandbox = "bwrap"`: see the module docstring."""

    name = "bwrap"

    def __init__(self, program: str = "bwrap", *, home: str | None = None) -> None:
        # the bwrap found on the engine's PATH (None: not installed)
        self.program = program if os.path.isabs(program) else shutil.which(program)
        self.masks = masked_roots(home)

    def problem(self) -> str | None:
        if self.program is None:
            return ("bubblewrap (bwrap) is not installed or not on PATH; fix: install it "
                    "(apt-get install bubblewrap, dnf install bubblewrap), or run unsandboxed "
                    "(sandbox = \"none\" in [graph]; audit: --sandbox none)")
        if self.program not in _PROBE:
            _PROBE[self.program] = _probe(self.program)
        return _PROBE[self.program]

    @contextlib.contextmanager
    def launch(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str],
               view: View) -> Iterator[Launch]:
        why = self.problem()
        if why is not None:
            from loopproof.engine.system.sandbox.base import Unavailable
            raise Unavailable(why)
        assert self.program is not None
        child_env = dict(env)
        child_env["TMPDIR"] = PRIVATE_TMP
        if view.private_home:
            child_env["HOME"] = PRIVATE_TMP
        r, w = os.pipe()
        sc = filter_fd()
        gate = _Gate() if view.tmp_bytes is not None else None  # sized temp folders to watch
        status: dict[str, object] = {}
        full = tuple(bwrap_argv(self.program, argv, cwd, view, w, self.masks, seccomp_fd=sc,
                                block_fd=gate.read if gate is not None else None))
        masks = self.masks
        launch = Launch(full, child_env, Path(cwd),
                        (w, sc, *((gate.read,) if gate is not None else ())), status,
                        sized_tmpfs(full),
                        explain=lambda: explain_start(argv, child_env, view, masks),
                        release=gate.open if gate is not None else None)
        try:
            yield launch
        finally:
            if gate is not None:
                gate.close()
            os.close(w)
            os.close(sc)
            try:
                _read_status(r, status)
            finally:
                os.close(r)


class _Gate:
    """The pipe a sandbox blocks on (`--block-fd`) until `open`: closing the only write end
    lets bwrap's read return."""

    def __init__(self) -> None:
        self.read, self._write = os.pipe()

    def open(self) -> None:
        if self._write >= 0:
            os.close(self._write)
            self._write = -1

    def close(self) -> None:
        self.open()
        if self.read >= 0:
            os.close(self.read)
            self.read = -1


def sized_tmpfs(argv: Sequence[str]) -> tuple[str, ...]:
    """The private temp folders a bwrap command line makes at a `--size` (before its `--`)."""
    end = argv.index("--") if "--" in argv else len(argv)
    return tuple(argv[i + 3] for i in range(end - 3)
                 if argv[i] == "--size" and argv[i + 2] == "--tmpfs")


def _read_status(fd: int, status: dict[str, object]) -> None:
    """Parse bwrap's JSON lines (bwrap has exited, so a non-blocking read gets them all), then
    end the sandbox's PID namespace and wait until it is empty."""
    os.set_blocking(fd, False)
    data = b""
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
        _end_namespace(pid, ns)


def _end_namespace(pid: int, ns: int) -> None:
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


def _probe(program: str) -> str | None:
    """Run `true` under the same flags once: a kernel without unprivileged user namespaces, or a
    container that forbids mounts, fails here with bwrap's own words."""
    try:
        st = os.stat(program)
    except OSError as exc:
        return f"{program}: cannot run bubblewrap ({exc.strerror}); fix: reinstall bubblewrap"
    if not stat.S_ISREG(st.st_mode):
        return f"{program}: is not a program; fix: reinstall bubblewrap"
    r, w = os.pipe()
    sc = filter_fd()
    limits.reap_dead()  # what engines killed meanwhile left (a probe, a command of any run)
    cell = limits.Cell(limits.probe_hold())  # so that a kill of this engine now leaves nothing
    try:
        argv = bwrap_argv(program, ["true"], Path("/"), View(), w, masked_roots(), seccomp_fd=sc)
        try:
            res = subprocess.run(cell.wrap(argv), pass_fds=(w, sc), capture_output=True,
                                 timeout=30, env={"PATH": os.defpath})
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{program}: cannot run bubblewrap ({exc}); fix: reinstall bubblewrap"
    finally:
        cell.end()
        os.close(w)
        os.close(r)
        os.close(sc)
    if res.returncode != 0:
        words = res.stderr.decode("utf-8", "replace").strip().splitlines()
        return (f"bubblewrap cannot create a sandbox here ({words[-1] if words else 'exit '}"
                f"{'' if words else res.returncode}); fix: allow unprivileged user namespaces "
                f"(sysctl kernel.unprivileged_userns_clone=1) or run as root, or run "
                f"unsandboxed (sandbox = \"none\" in [graph]; audit: --sandbox none)")
    return None
