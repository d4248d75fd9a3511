"""Recovery on resume: orphaned workers are killed, the resume is recorded, and an attempt with
no recorded end is given back.

Why given back and not judged (each attempt of several in flight alike): the attempt started before a crash or stop and its outcome is
unknown. It is charged its open reservation (never less than it may have used), it does not
count against the node's attempts, and the node runs again: a repeated execution, counted in
the report.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from loopproof.engine.run.journal import Journal
from loopproof.engine.run.operator import honour_cancels
from loopproof.model import Abandon


def kill_orphans(root: Path) -> list[int]:
    """Kill the process groups of workers a crashed engine left running in this run's
    workspaces, so a re-run attempt never shares its workspace with the one it replaces.

    A worker runs in its own session, so when the engine is SIGKILLed nothing stops it. On
    resume, a process counts as such an orphan only if its environment carries LOOPPROOF_NODE
    (set by the engine for workers) and its working directory lies inside `root`; a user's shell
    in the folder is left alone. Linux /proc only; elsewhere this finds nothing."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    root_s = str(root.resolve())
    inside = root_s + os.sep
    own = os.getpgrp()
    killed: list[int] = []
    for pid in pids:  # every process on the machine: paths as strings, not Path objects
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            if not (cwd == root_s or cwd.startswith(inside)):
                continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if b"LOOPPROOF_NODE=" not in fh.read():
                    continue
            pgid = os.getpgid(int(pid))
        except (OSError, ValueError):
            continue
        if pgid != own and pgid not in killed:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
                killed.append(pgid)
    return killed


def give_back(journal: Journal, node: str, why: str) -> None:
    """`node`'s attempt in flight has no end the engine can know (`why`): an `abandon` record
    (model `Abandon`), charged its open reservations in full and given back, so the node runs
    it again. After a crash on resume, and live when a remote worker is lost mid-attempt."""
    state, graph = journal.state, journal.graph
    journal.commit(Abandon(node), {
        "outcome": "unknown", "charged": state.reserved_of(graph, node),
        "activation": state.activation_of(graph, node),
        "attempt": state.attempts_of(graph, node),
        "why": f"{why}: its outcome is unknown; it is charged its open reservation and given "
               "back (it does not count against the node's attempts), and the node will run "
               "again (a repeated execution, counted in the report)"})


def recover(journal: Journal, root: Path, new_price: float | None, reaped: int = 0,
            remote_reaped: int | None = None) -> None:
    """Kill orphans under `root`, record `resumed` (with `reaped`, the processes found in the
    run's cgroups and killed: `engine.system.limits.reap`; and `torn_kept`, the side file beside
    the ledger that holds the bytes of a torn tail opening cut, when it cut one), abandon the
    attempts in flight (none, one, or with `max_parallel` > 1 several: each is given back on
    its own, charged its own open reservation, in the model's `in_flight` order), honour an
    operator's pending cancels (engine/run/operator.py), and record a change of price
    (`resume --price`)."""
    state, graph = journal.state, journal.graph
    orphans = kill_orphans(root)
    resumed = {"type": "resumed", "resume": journal.replayed.resumes + 1,
               "settled": state.settled, "reserved": state.reserved,
               "orphans_killed": len(orphans), "reaped": reaped}
    if remote_reaped is not None:  # `resume --dask`: what the run left on the cluster's hosts
        resumed["remote_reaped"] = remote_reaped
    if journal.ledger.torn_kept is not None:  # opening cut a torn tail: where its bytes are
        resumed["torn_kept"] = journal.ledger.torn_kept
    journal.note(resumed)
    for node in journal.state.in_flight(graph):  # several attempts in flight: each, in order
        give_back(journal, node, "this attempt started before a crash or stop and has no "
                  "recorded end")
    honour_cancels(journal)
    if new_price is not None and new_price != journal.replayed.price:
        # a change of resources: later attempts are metered (and their deadlines set) at
        # the new price; the settled spend replayed from the ledger stays as it is
        journal.note({"type": "resources", "old_price": journal.replayed.price,
                      "new_price": new_price, "settled": journal.state.settled})
