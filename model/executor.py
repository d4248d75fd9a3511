"""Where independent work units run: one interface, `map(fn, units)`, the results of `fn` over
`units` in the units' order, whatever ran which unit; one adapter per way of running them.

- `Serial()`: in this process, one after another;
- `Processes(n)`: `n` forked processes (spawned where fork is missing), for units that compute
  (the explorer's cases, the bounds study's random graphs, the transition study's searches);
- `Threads(n)`: `n` threads, for units that wait on child processes of their own (the crash and
  growth matrices run real engines), so the GIL is not what they wait on;
- a Dask cluster: `experiments.executor.Executor`, the same `map` (the model never imports Dask).

Why in model/: the explorer (model/explore.py) is the lowest layer that runs units in parallel,
and every study above it takes the same interface, so a study's results do not depend on what
ran it (each combines its results in the units' order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

Unit = TypeVar("Unit")
Result = TypeVar("Result")


class Executor(Protocol):
    """`map(fn, units)`: the results of `fn` over `units`, in the units' order."""

    def map(self, fn: Callable[[Unit], Result], units: Iterable[Unit]) -> list[Result]: ...


@dataclass(frozen=True)
class Serial:
    """Every unit in this process, in order."""

    def map(self, fn: Callable[[Unit], Result], units: Iterable[Unit]) -> list[Result]:
        return [fn(u) for u in units]


@dataclass(frozen=True)
class Processes:
    """Units in `workers` processes (forked where the platform can), one unit per task; with one
    worker or one unit, in this process. `fn` and the units must pickle (no lambdas).

    Why concurrent.futures and not multiprocessing.Pool: a Pool whose worker dies mid-task (a
    SIGKILL, the OOM killer) waits for that task for ever; this pool raises BrokenProcessPool,
    so a run fails with the reason instead of hanging (tests/experiments/test_executor.py)."""

    workers: int

    def map(self, fn: Callable[[Unit], Result], units: Iterable[Unit]) -> list[Result]:
        todo = list(units)
        if self.workers <= 1 or len(todo) <= 1:
            return Serial().map(fn, todo)
        import multiprocessing  # here, not at import: the CLI's start-up stays short
        from concurrent.futures import ProcessPoolExecutor

        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context(method)
                                 ) as pool:
            return list(pool.map(fn, todo))


@dataclass(frozen=True)
class Threads:
    """Units in `workers` threads: for units that wait on processes of their own."""

    workers: int

    def map(self, fn: Callable[[Unit], Result], units: Iterable[Unit]) -> list[Result]:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(fn, units))


def local(workers: int) -> Executor:
    """`workers` processes on this machine (this process alone for one)."""
    return Processes(workers) if workers > 1 else Serial()
