"""The engine's one door to Dask (`loopproof run|resume --dask tcp://HOST:8786`): the only module
of the engine, the model and the proofs that imports `distributed`, and only when `--dask` is
given (it is the `cluster` extra, not a core dependency: tests/test_core_only.py).

What it owns:

- *Connecting*: an unreachable scheduler, or `distributed` missing, is one line and exit 2
  before anything is written. Every worker is probed before its first attempt (`checks.probe`):
  the same engine code (a digest of its sources), the graph's programs at the same paths, the
  gates' installed programs as pinned, a sandbox that works. A worker that fails is not used
  (one line on stderr); at start, any failure is exit 2.
- *Slots*: an attempt's worker or gate run takes one thread of one Dask worker *before* its
  wall clock is reserved, so no reservation is spent waiting in a worker's queue. With no free
  thread (no worker at all, or all busy), the attempt waits, and says so on stderr once.
- *Exactly once*: each call is pinned to the worker process the engine chose (its address, no
  other worker allowed) and checks, there, that it runs in that very process (its Dask id: a
  worker restarted at the same address is another process). Dask reschedules a task whose
  worker died; pinned so, it can only run on the chosen process, which is gone, so the command
  never runs twice. Meanwhile the engine sees the worker gone from the scheduler (polled every
  `POLL_S`) and raises `OutcomeUnknown`: the attempt is given back (engine/run/attempt.py).
- *The engine's clock*: a call that has not answered `GRACE_S` after its time limit (on the
  engine's clock) is cancelled and its attempt given back too.
- *Stopping*: a worker stopped by the proxy (a refused model call) is told through a Dask
  `Event`; a cancelled call (the engine gave up, or died: the scheduler then drops its futures)
  is seen on the host within a poll, and its command is killed there. `resume --dask` reaps
  what a killed engine left on every worker (`far.reap`: the run's cgroups, its folders).
- *Blobs*: which blobs each worker process has (sent, or sent back), so each is sent once.

Why one module: over 400 lines because it is, by design, the only module of the engine that
imports Dask (the `dask-one-module` import contract), so everything that speaks Dask lives
here, the engine's side and the three small functions that run on the workers (`_on_worker`,
`_probe`, `_reap`) alike; what the workers do is in far.py, which imports no Dask.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopproof.engine.run.remote import checks, far
from loopproof.engine.run.remote.adapters import Slot
from loopproof.engine.run.remote.parcel import read_blobs
from loopproof.engine.run.remote.relay import reaching
from loopproof.engine.run.worker import OutcomeUnknown
from loopproof.engine.system.errors import BadInput

CONNECT_S = 10.0  # how long `connect` tries to reach the scheduler
POLL_S = 0.1  # how often a waiting call looks at its future, its worker and its stop
INFO_S = 5.0  # how old the scheduler's list of workers may be (its changes are also pushed)
STOP_POLL_S = 0.25  # how often a host asks whether the engine stopped its worker
GRACE_S = 30.0  # beyond a call's time limit, how long the engine waits for its answer
RUN_S = 60.0  # how long a probe or a reap of the workers may take (a hung worker: no answer)
INLINE_BYTES = 1 << 20  # blobs up to this size travel with the call, larger ones scattered
EXTRA = "pip install 'loopproof[cluster]' (dask.distributed) on the engine's machine and on " \
        "every worker host"


@dataclass(frozen=True)
class Elsewhere:
    """A call that reached another process than the one chosen (a worker restarted at the
    same address): it ran nothing."""

    worker_id: str


@dataclass(frozen=True)
class Failed:
    """The far side raised: an engine bug (or a host that cannot do what the engine can), not
    a lost worker. The engine stops as it would on a bug of its own, rather than give the
    attempt back to fail the same way again."""

    trace: str


def _quiet() -> None:
    """Dask's own log lines (connection retries, a worker lost) are not the engine's output."""
    for name in ("distributed", "distributed.client", "distributed.core", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def connect(address: str) -> DaskCluster:
    """The cluster at `address`; `BadInput` (exit 2) if `distributed` is missing or no scheduler
    answers there."""
    try:
        import distributed
    except ImportError:
        raise BadInput(address, "--dask", "dask.distributed is not installed (the `cluster` "
                       "extra)", EXTRA) from None
    _quiet()
    try:
        # answers are fetched from the workers directly (the scheduler passing each one on cost
        # a loaded machine about ten times the round trip); `check` makes sure they can be
        client = distributed.Client(address, timeout=CONNECT_S, set_as_default=False,
                                    direct_to_workers=True)
    except Exception as exc:  # OSError, TimeoutError, ValueError (a malformed address), ...
        words = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise BadInput(address, "--dask", f"no Dask scheduler answers there ({words})",
                       "start one (`dask scheduler`) and its workers (`dask worker "
                       "tcp://HOST:8786`), or give its address as tcp://HOST:8786") from None
    return DaskCluster(client, address)


def _on_worker(fn: str, job: Any, blobs: dict[str, bytes], worker_id: str) -> Any:
    """Runs on the Dask worker: checks it is the process the engine chose, then calls the far
    side (engine/run/remote/far.py) with this host's scratch folder and the call's stop."""
    from distributed import Event, get_client, get_worker

    w = get_worker()
    if w.id != worker_id:
        return Elsewhere(w.id)
    key = w.get_current_task()

    def gone() -> bool:
        ts = w.state.tasks.get(key)
        return ts is None or ts.state not in ("executing", "long-running")

    asked: list[Any] = [0.0, None]

    def stop() -> str | None:
        if gone():
            return "the engine no longer waits for this attempt"
        now = time.monotonic()
        if getattr(job, "proxy", None) is not None and now - asked[0] >= STOP_POLL_S:
            asked[0] = now
            with contextlib.suppress(Exception):
                if Event(f"{key}-stop", client=get_client()).is_set():
                    asked[1] = "the engine's proxy refused a model call (on_refusal)"
        return asked[1]

    host = far.Host(Path(w.local_directory), w.address, stop, gone)
    try:
        return getattr(far, fn)(job, blobs, host)
    except Exception:
        return Failed(traceback.format_exc()[-4000:])


def _probe(programs: list[str], pins: dict[str, str], sandbox: str) -> dict[str, Any]:
    import distributed

    return {"id": distributed.get_worker().id, "dask": distributed.__version__,
            **checks.probe(programs, pins, sandbox)}


def _reap(owner: str, dask_worker: Any = None) -> int:
    return far.reap(Path(dask_worker.local_directory), owner)


class DaskCluster:
    """One engine's view of one Dask cluster (the `Cluster` of engine/run/remote/adapters.py)."""

    def __init__(self, client: Any, address: str) -> None:
        self.client, self.address = client, address
        self.listen = reaching(address)
        self.lock = threading.Lock()
        self.busy: dict[str, int] = {}  # worker id -> slots held
        self.ids: dict[str, str] = {}  # address -> the id of the process probed there
        # address -> the worker process there now, as the scheduler lists it (its own scratch
        # folder: a worker restarted at the same address is another process, probed again)
        self.incarnation: dict[str, str] = {}
        self.probed: dict[str, str] = {}  # address -> the incarnation its `ids` entry is of
        self.bad: dict[str, str] = {}  # worker id -> why it is not used
        self.known: dict[str, set[str]] = {}  # worker id -> blobs it has
        self.hosts: dict[str, str] = {}  # node -> where its last worker ran
        self.waiting = False  # an attempt waits for a thread (said once on stderr)
        self.expect: tuple[list[str], dict[str, str], str] = ([], {}, "bwrap")
        # the scheduler tells of every worker it adds or removes (its "all" topic): each such
        # event makes the list of workers stale, so a lost worker is known at once, and the
        # list is asked for again only when it changed (or after INFO_S)
        self._changes = 0
        self._info: tuple[float, int, dict[str, int]] = (-1.0, -1, {})
        client.subscribe_topic("all", self._event)

    # ---- workers -----------------------------------------------------------------------------
    def _event(self, event: Any) -> None:
        msg = event[1] if isinstance(event, tuple) and len(event) == 2 else {}
        if isinstance(msg, dict) and msg.get("action") in ("add-worker", "remove-worker"):
            self._changes += 1

    def workers(self, fresh: bool = False) -> dict[str, int]:
        """Address -> threads of every worker the scheduler lists now."""
        at, seen, info = self._info
        if fresh or seen != self._changes or time.monotonic() - at > INFO_S:
            changes = self._changes  # an event during the question makes its answer stale
            listed = self.client.scheduler_info(n_workers=-1).get("workers", {})
            info = {a: int(w.get("nthreads", 1)) for a, w in listed.items()}
            self.incarnation = {a: str(w.get("local_directory", a)) for a, w in listed.items()}
            self._info = (time.monotonic(), changes, info)
        return info

    def _run(self, fn: Callable[..., Any], *args: Any, workers: list[str] | None = None
             ) -> dict[str, Any]:
        """`fn` on each worker (outside Dask's task queue), at most RUN_S: a worker that has not
        answered by then is left out of the answers."""
        answers: dict[str, Any] = {}

        def ask() -> None:
            answers.update(self.client.run(fn, *args, workers=workers, on_error="return"))

        asking = threading.Thread(target=ask, daemon=True, name="loopproof-dask-run")
        asking.start()
        asking.join(RUN_S)
        return dict(answers)

    def _probe(self, addresses: Iterable[str]) -> dict[str, str]:
        """Probe each address; the problems found (address -> words). Usable ones get their
        process id recorded."""
        programs, pins, sandbox = self.expect
        # a task pinned to each, its answer fetched as an attempt's is: so a worker the engine
        # cannot reach directly is found here, not at its first attempt
        asked = {a: self.client.submit(_probe, programs, pins, sandbox, workers=[a],
                                       allow_other_workers=False, pure=False,
                                       key=f"loopproof-probe-{a}-{time.monotonic_ns()}")
                 for a in addresses}
        answers: dict[str, Any] = {}
        for a, fut in asked.items():
            try:
                answers[a] = fut.result(timeout=RUN_S)
            except Exception as exc:  # not reached, no answer in time, the worker left
                answers[a] = exc
                fut.cancel()
            fut.release()
        import distributed

        mine = checks.code_digest()
        problems: dict[str, str] = {}
        for addr, got in answers.items():
            if isinstance(got, BaseException) or not isinstance(got, dict):
                problems[addr] = (f"did not answer the engine's probe ({got!r:.200}); the "
                                  f"engine must reach each worker's address directly")
                self.ids[addr] = f"unanswered {addr}"  # not asked again at every look
                self.probed[addr] = self.incarnation.get(addr, addr)
                self.bad[self.ids[addr]] = problems[addr]
                continue
            why = ("it runs other engine code (another loopproof version or checkout)"
                   if got["code"] != mine else
                   f"it runs dask.distributed {got['dask']}, the engine "
                   f"{distributed.__version__}" if got["dask"] != distributed.__version__ else
                   f"its sandbox cannot run: {got['sandbox']}" if got["sandbox"] else
                   f"program {got['missing'][0]} is not there" if got["missing"] else
                   f"the gate's program {got['changed'][0]} differs from the engine's"
                   if got["changed"] else "")
            self.ids[addr] = got["id"]
            self.probed[addr] = self.incarnation.get(addr, addr)
            if why:
                self.bad[got["id"]] = why
                problems[addr] = why
        return problems

    def check(self, programs: Iterable[str], pins: Mapping[str, str], sandbox: str,
              where: str) -> None:
        """Before anything is written: every worker there now must be usable (`BadInput`
        naming the first that is not)."""
        self.expect = (sorted(set(programs)), dict(pins), sandbox)
        live = self.workers(fresh=True)
        problems = self._probe(live) if live else {}
        if problems:
            addr, why = sorted(problems.items())[0]
            raise BadInput(where, "--dask", f"the Dask worker {addr}: {why}",
                           "install the same loopproof, programs and bubblewrap on every "
                           "worker host, at the same paths as on the engine's machine")
        if not live:
            print(f"loopproof: no Dask worker at {self.address} yet: attempts wait for one",
                  file=sys.stderr)

    def _usable(self) -> dict[str, int]:
        live = self.workers()
        new = [a for a in live if self.probed.get(a) != self.incarnation.get(a)]
        if new:
            for addr, why in self._probe(new).items():
                print(f"loopproof: not using the Dask worker {addr}: {why}", file=sys.stderr)
        return {a: n for a, n in live.items()
                if self.probed.get(a) == self.incarnation.get(a) and self.ids[a] not in self.bad}

    # ---- slots -------------------------------------------------------------------------------
    def acquire(self, prefer: str | None = None) -> Slot:
        """A free thread of a usable worker (`prefer`'s if it has one, else the least busy);
        waits for one."""
        while True:
            with self.lock:
                live = self._usable()
                free = [a for a, n in live.items() if self.busy.get(self.ids[a], 0) < n]
                if free:
                    pick = prefer if prefer in free else min(
                        free, key=lambda a: (self.busy.get(self.ids[a], 0) / live[a], a))
                    wid = self.ids[pick]
                    self.busy[wid] = self.busy.get(wid, 0) + 1
                    self.waiting = False
                    return Slot(pick, wid)
                if not self.waiting:  # once per stretch of waiting, whichever attempt waits
                    self.waiting = True
                    print(f"loopproof: waiting for a free Dask worker thread at "
                          f"{self.address} ({len(live)} worker(s) usable)", file=sys.stderr)
            time.sleep(2 * POLL_S)

    def release(self, slot: Slot) -> None:
        with self.lock:
            self.busy[slot.worker_id] = max(0, self.busy.get(slot.worker_id, 0) - 1)

    def last_host(self, node: str, address: str | None = None) -> str | None:
        with self.lock:
            if address is not None:
                self.hosts[node] = address
            return self.hosts.get(node)

    def learn(self, slot: Slot, digests: Iterable[str]) -> None:
        with self.lock:
            self.known.setdefault(slot.worker_id, set()).update(digests)

    def alive(self, slot: Slot) -> bool:
        """Is `slot`'s worker process still listed by the scheduler? Asked afresh before the
        answer is no (a loss gives an attempt back, charged)."""
        return any(slot.address in self.workers(fresh=fresh)
                   and self.probed.get(slot.address) == self.incarnation.get(slot.address)
                   and self.ids.get(slot.address) == slot.worker_id for fresh in (False, True))

    # ---- calls -------------------------------------------------------------------------------
    def call(self, slot: Slot, fn: str, job: Any, digests: set[str],
             sources: Mapping[str, bytes], *, within_s: float,
             stop: Callable[[], str | None] | None = None) -> Any:
        """`far.<fn>(job, ...)` on `slot`'s worker with the blobs of `digests` it lacks; its
        answer. Raises `OutcomeUnknown` when the worker is lost or does not answer in time."""
        with self.lock:
            need = set(digests) - self.known.get(slot.worker_id, set())
        for _ in range(2):
            out = self._call(slot, fn, job, read_blobs(need, sources), within_s, stop)
            self.learn(slot, need)  # stored there before the far side looked for anything
            if isinstance(out, far.Missing):  # its cache was cleared: send them again
                with self.lock:
                    self.known.get(slot.worker_id, set()).difference_update(out.digests)
                need = set(out.digests)
                continue
            if isinstance(out, Elsewhere):
                raise OutcomeUnknown(f"the Dask worker process at {slot.address} that was "
                                     f"given the attempt is gone (another one answered there)")
            if isinstance(out, Failed):
                raise RuntimeError(f"engine error on the Dask worker {slot.address}: "
                                   f"{out.trace}")
            return out
        raise OutcomeUnknown(f"the Dask worker {slot.address} lost the attempt's files twice")

    def _call(self, slot: Slot, fn: str, job: Any, blobs: dict[str, bytes], within_s: float,
              stop: Callable[[], str | None] | None) -> Any:
        from distributed import Event

        payload: Any = blobs
        scattered = None
        if sum(map(len, blobs.values())) > INLINE_BYTES:
            scattered = payload = self.client.scatter([blobs], workers=[slot.address],
                                                      hash=False)[0]
        key = f"loopproof-{fn}-{job.label}"
        fut = self.client.submit(_on_worker, fn, job, payload, slot.worker_id, key=key,
                                 workers=[slot.address], allow_other_workers=False, pure=False,
                                 retries=0)
        told = False
        start = time.monotonic()
        ended = threading.Event()
        fut.add_done_callback(lambda _f: ended.set())
        try:
            while not fut.done():
                if ended.wait(POLL_S):
                    break
                if stop is not None and not told and stop() is not None:
                    Event(f"{key}-stop", client=self.client).set()
                    told = True
                if not self.alive(slot):
                    raise OutcomeUnknown(f"the Dask worker {slot.address} running it was lost")
                if time.monotonic() - start > within_s + GRACE_S:
                    raise OutcomeUnknown(f"no answer from the Dask worker {slot.address} "
                                         f"within {within_s + GRACE_S:g} s of the engine's "
                                         f"clock")
            if fut.status != "finished":
                words = " ".join(repr(fut.exception()).split())[:300] \
                    if fut.status == "error" else fut.status
                raise OutcomeUnknown(f"the Dask worker {slot.address} gave no answer ({words})")
            return fut.result()
        finally:
            if not fut.done():
                fut.cancel()
            fut.release()
            if scattered is not None:
                scattered.release()
            if told:
                with contextlib.suppress(Exception):
                    Event(f"{key}-stop", client=self.client).clear()

    # ---- the run's traces on the hosts -------------------------------------------------------
    def reap(self, owner: str) -> int:
        """Kill what the run left running on every worker host (a killed engine's attempts)
        and remove its folders there; the processes found."""
        answers = self._run(_reap, owner)
        return sum(n for n in answers.values() if isinstance(n, int))

    def close(self, owner: str | None = None) -> None:
        """The run is over (or stopped): its folders on the hosts go; the client closes."""
        try:
            if owner is not None:
                with contextlib.suppress(Exception):
                    self.reap(owner)
        finally:
            with contextlib.suppress(Exception):
                # no event is sent to a client that is leaving (the scheduler logs each one)
                self.client.unsubscribe_topic("all")
                self.client.close()
