"""Where an experiment's work units run when `--dask` asks for a cluster: on a Dask cluster (a
local one of `--jobs N` processes, or the scheduler at `--dask ADDRESS`), else in this process --
with the same results either way.

Why one module: this is the Dask adapter of model/executor.py's one interface, `map`: the results
of `fn` over `units`, in the units' order, whichever machine computed which (the serial, process
and thread adapters live there). The explorer's work units, the bounds study's random graphs and
the crash matrix take it; the model and the engine never import Dask: a study hands
`Executor.map` to the code that has units.

    with executor_from(args) as ex:     # args from add_arguments(parser)
        results = ex.map(run_unit, units)
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Executor:
    """`map(fn, units)` in the units' order. `kind` is "serial" or "dask"; `workers` is how many
    processes compute (1 when serial; the cluster's workers when on Dask)."""

    kind: str = "serial"
    address: str | None = None
    jobs: int = 1
    client: Any = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, repr=False)

    @property
    def workers(self) -> int:
        if self.client is None:
            return 1
        return len(self.client.scheduler_info().get("workers", {})) or self.jobs

    def map(self, fn: Callable[[Any], Any], units: Iterable[Any]) -> list[Any]:
        units = list(units)
        if self.client is None:
            return [fn(u) for u in units]
        # pure=False: equal units are still run (and counted) separately, as serially
        futures = self.client.map(fn, units, pure=False)
        return self.client.gather(futures)

    def __enter__(self) -> Executor:
        if self.kind == "dask":
            from dask.distributed import Client, LocalCluster

            if self.address:
                self.client = self._stack.enter_context(Client(self.address))
            else:
                cluster = self._stack.enter_context(LocalCluster(
                    n_workers=self.jobs, threads_per_worker=1, processes=True,
                    dashboard_address=None, silence_logs=40))
                self.client = self._stack.enter_context(Client(cluster))
        return self

    def __exit__(self, *exc: object) -> None:
        self.client = None
        self._stack.close()


def add_arguments(parser: argparse.ArgumentParser, default_jobs: int | None = None) -> None:
    """`--jobs N` (more than 1: a local Dask cluster of N processes) and `--dask ADDRESS`."""
    jobs = default_jobs if default_jobs is not None else (os.cpu_count() or 1)
    parser.add_argument("--jobs", type=int, default=jobs,
                        help=f"processes to use; more than 1 starts a local Dask cluster "
                             f"(default {jobs})")
    parser.add_argument("--dask", default=None, metavar="ADDRESS",
                        help="run the work units on the Dask scheduler at ADDRESS "
                             "(e.g. tcp://10.0.0.5:8786); results are the same bytes as serial")


def executor_from(args: argparse.Namespace) -> Executor:
    """The executor the arguments ask for (use it as a context manager)."""
    if getattr(args, "dask", None):
        return Executor("dask", args.dask, max(1, args.jobs))
    if max(1, args.jobs) > 1:
        return Executor("dask", None, args.jobs)
    return Executor()


@contextlib.contextmanager
def serial() -> Iterator[Executor]:
    yield Executor()


def chunks(units: Sequence[Any], size: int) -> list[list[Any]]:
    """Units grouped `size` at a time (fewer, larger tasks when units are small)."""
    return [list(units[i:i + size]) for i in range(0, len(units), size)]
