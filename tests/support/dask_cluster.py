"""A real Dask cluster on this machine for a test: one `dask scheduler` (which a module's tests
may share: `Scheduler`) and `dask worker` processes of the test's own (`Cluster`), each worker
with its own scratch folder and none of the engine's folders.

Why a mount namespace per worker: the workers run on the engine's machine, so only a wall
proves that they read nothing of the run by path. Each `dask worker` runs under
`bwrap --dev-bind / /` with every folder in `hidden` (the spec's folder, the ledger's) covered
by an empty tmpfs, and its own scratch folder (its `--local-directory`, its TMPDIR) bound back;
what a worker needs of the run must reach it through Dask, content-addressed. The sandboxes it
starts for workers and gates are bubblewraps inside that one.

Every wait here is for a condition (a file, a process, the scheduler's list), with a generous
deadline that only ends a hung test; nothing depends on how fast anything is.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
DEADLINE_S = 240.0


def until(what: str, probe: Callable[[], T | None], deadline_s: float = DEADLINE_S,
          engine: subprocess.Popen[str] | None = None) -> T:
    """Poll `probe` until it gives something true; fail the test naming `what` after the deadline,
    or as soon as `engine` (the engine's process, when given) has exited, with what it said."""
    end = time.monotonic() + deadline_s
    while True:
        got = probe()
        if got:
            return got
        if engine is not None and engine.poll() is not None:
            out, err = engine.communicate()
            raise AssertionError(f"the engine exited ({engine.returncode}) before {what}: "
                                 f"{err[-3000:]} {out[-2000:]}")
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what} after {deadline_s:g} s")
        time.sleep(0.05)


@dataclass
class Worker:
    name: str
    scratch: Path
    proc: subprocess.Popen[bytes]
    address: str = ""
    pid: int = 0  # the dask worker's own process (the bwrap wrapping it is `proc`)
    dead: bool = False


class Scheduler:
    """A `dask scheduler` process and a client of it; use as a context manager (stopped and
    waited for when the block ends). Several `Cluster`s may use one in turn (a module's tests
    share its start): each brings its own workers and lets them go before the next begins."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.proc: subprocess.Popen[bytes] | None = None
        self.client: Any = None
        self.address = ""

    def __enter__(self) -> Scheduler:
        from distributed import Client

        self.root.mkdir(parents=True, exist_ok=True)
        info = self.root / "scheduler.json"
        with open(self.root / "scheduler.log", "wb") as log:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                 "--port", "0", "--no-dashboard", "--scheduler-file", str(info)],
                stdout=subprocess.DEVNULL, stderr=log)
        until("the scheduler's file", lambda: info.is_file() and info.stat().st_size > 0)
        self.address = json.loads(info.read_text())["address"]
        self.client = Client(self.address, timeout=60, set_as_default=False)
        return self

    def listed(self) -> dict[str, Any]:
        """Address -> what the scheduler knows of every worker it lists now."""
        return dict(self.client.scheduler_info(n_workers=-1)["workers"])

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            if self.client is not None:
                self.client.close()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


class Cluster:
    """Workers of a scheduler, each started under its own wall (`hidden` masked), its scratch
    folder in `root`; use as a context manager (every worker is stopped, waited for, and gone
    from the scheduler's list when the block ends). A cluster starts with no worker listed:
    the workers the engine sees are this cluster's alone."""

    def __init__(self, scheduler: Scheduler, root: Path, hidden: Sequence[Path],
                 threads: int = 2) -> None:
        self.scheduler = scheduler
        self.root, self.hidden, self.threads = Path(root), [Path(h) for h in hidden], threads
        self.workers: list[Worker] = []
        self.client: Any = scheduler.client
        self.address = scheduler.address

    def __enter__(self) -> Cluster:
        assert not self.scheduler.listed(), \
            f"the scheduler still lists another cluster's workers: {self.scheduler.listed()}"
        self.root.mkdir(parents=True, exist_ok=True)
        return self

    def add_worker(self, name: str) -> Worker:
        scratch = self.root / name
        (scratch / "tmp").mkdir(parents=True)
        masks = [a for h in self.hidden for a in ("--tmpfs", str(h))]
        argv = [shutil.which("bwrap") or "bwrap", "--dev-bind", "/", "/", *masks,
                "--bind", str(scratch), str(scratch), "--",
                sys.executable, "-m", "distributed.cli.dask_worker", self.address,
                "--name", name, "--nthreads", str(self.threads), "--no-nanny",
                "--no-dashboard", "--local-directory", str(scratch)]
        with open(self.root / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(argv, env={**os.environ, "TMPDIR": str(scratch / "tmp")},
                                    stdout=subprocess.DEVNULL, stderr=log)
        w = Worker(name, scratch, proc)
        self.workers.append(w)

        def listed() -> str | None:
            for addr, info in self.scheduler.listed().items():
                if info.get("name") == name:
                    return str(addr)
            return None

        w.address = until(f"worker {name} to join", listed)
        w.pid = self.client.run(os.getpid, workers=[w.address])[w.address]
        return w

    def kill(self, w: Worker) -> None:
        """SIGKILL the worker's process (as a crashed host would die) and wait until the
        scheduler has let it go."""
        os.kill(w.pid, signal.SIGKILL)
        w.dead = True
        w.proc.wait(60)
        until(f"the scheduler to drop {w.name}",
              lambda: w.address not in self.scheduler.listed())

    def live(self) -> list[Worker]:
        return [w for w in self.workers if not w.dead]

    def of_pid(self, pid: int) -> Worker | None:
        """The live worker whose process is an ancestor of `pid`."""
        mine = {w.pid: w for w in self.live()}
        while pid > 1:
            if pid in mine:
                return mine[pid]
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return None
            pid = int(stat.rpartition(")")[2].split()[1])
        return None

    def __exit__(self, *exc: object) -> None:
        for w in self.workers:
            if w.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(w.pid, signal.SIGTERM)
        for w in self.workers:
            try:
                w.proc.wait(30)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait(30)
        # the next cluster on this scheduler must not see one of these
        until("the scheduler to drop this cluster's workers", lambda: not [
            a for a in self.scheduler.listed() if a in {w.address for w in self.workers}])


def processes_with(text: str) -> list[int]:
    """Pids whose command line holds `text`."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if text.encode() in (entry / "cmdline").read_bytes():
                    out.append(int(entry.name))
    return out


@contextlib.contextmanager
def cluster(scheduler: Scheduler, root: Path, hidden: Sequence[Path], workers: int = 2,
            threads: int = 2) -> Iterator[Cluster]:
    """A cluster of `workers` fresh workers on `scheduler`."""
    with Cluster(scheduler, root, hidden, threads) as c:
        for i in range(workers):
            c.add_worker(f"w{i + 1}")
        yield c
