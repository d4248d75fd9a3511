"""Discharging many obligations at once: one forked process per obligation, `jobs` at a time.

Its own module because it is process management, not the registry of what must hold
(proofs/obligations.py): each obligation's process is watched through its sentinel and its
pipe, so a process that dies is a failure of its obligation and never a hung run.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
from typing import Any

from loopproof.proofs.obligations import FAMILY, Obligation, Result, discharge

_PENDING: list[Obligation] = []  # what the forked processes of `discharge_all` discharge


def discharge_all(obligations: list[Obligation], jobs: int = 1) -> list[Result]:
    """Every obligation's Result, in the given order, whatever `jobs` is.

    Why processes: the obligations are independent and Z3 is single-threaded, so `jobs` forked
    processes share them out (the per-shape families, the slowest, first), which halves
    `python -m loopproof.proofs` on two cores. Each obligation gets a process of its own, forked before
    any Z3 term exists, so the model Z3 picks for a counterexample does not depend on which
    obligations ran before it in the same context: the same counterexamples whatever `jobs` is
    and whatever order the processes finish in. A counterexample comes back as data (its
    steps, states and parameters); the Z3 encoding it came from stays where it was found.

    Why not multiprocessing.Pool: a pool worker that dies in a task (a signal, the OOM
    killer, SystemExit) loses that task and the pool waits for it for ever (a fresh clone's
    `make check` hung so, at load 15). Here each process is watched through its sentinel, and
    one that ends without a result makes its obligation `unknown`, which fails the run."""
    if len(obligations) <= 1:
        return [discharge(ob) for ob in obligations]
    _PENDING[:] = obligations
    order = sorted(range(len(obligations)),
                   key=lambda i: FAMILY not in obligations[i].statement)
    done: dict[int, Result] = {}
    context = multiprocessing.get_context("fork")
    running: dict[int, tuple[Any, Any]] = {}  # index -> (process, reader)
    got: dict[int, tuple[Any, ...]] = {}
    try:
        while order or running:
            while order and len(running) < max(1, jobs):
                i = order.pop(0)
                reader, writer = context.Pipe(duplex=False)
                proc = context.Process(target=_discharge_into, args=(i, writer), daemon=True)
                proc.start()
                writer.close()
                running[i] = (proc, reader)
            # A result larger than a pipe's buffer holds its process until it is read: wait on
            # the readers as well as on the processes' ends.
            ready = set(multiprocessing.connection.wait(
                [proc.sentinel for proc, _ in running.values()]
                + [reader for i, (_, reader) in running.items() if i not in got]))
            for i, (proc, reader) in list(running.items()):
                if i not in got and (reader in ready or proc.sentinel in ready) and reader.poll():
                    with contextlib.suppress(EOFError):  # closed without a result: see below
                        got[i] = reader.recv()
                if proc.sentinel in ready:
                    proc.join()
                    reader.close()
                    del running[i]
                    fields = got.pop(i, None)
                    if fields is None:
                        code = proc.exitcode
                        why = f"signal {-code}" if code and code < 0 else f"exit status {code}"
                        fields = ("unknown", 0.0, None,
                                  f"the process discharging it ended without a result ({why})",
                                  None, "")
                    done[i] = Result(obligations[i], *fields)
    finally:
        for proc, reader in running.values():
            proc.kill()
            proc.join()
            reader.close()
        _PENDING.clear()
    return [done[i] for i in range(len(obligations))]


def _discharge_into(i: int, writer: Any) -> None:
    writer.send(_discharge_at(i)[1])
    writer.close()


def _discharge_at(i: int) -> tuple[int, tuple[Any, ...]]:
    r = discharge(_PENDING[i])
    if r.counterexample is not None:
        r.counterexample.system = None
        for st in r.counterexample.steps:
            st.state_obj = st.event_obj = None
    return i, (r.result, r.seconds, r.counterexample, r.error, r.depth, r.hint)
