"""Work units on a Dask LocalCluster of 2 workers give the same bytes as the serial run."""

from __future__ import annotations

import argparse

from experiments.bounds.study import Scale
from experiments.bounds.study import run as run_bounds
from experiments.executor import Executor, add_arguments, executor_from
from tests.support.paths import REPO


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_bounds_study_on_two_dask_workers_is_byte_identical_to_serial(tmp_path):
    tiny = Scale(explore_nodes=3, graphs=12, min_nodes=3, max_nodes=5)
    run_bounds("smoke", 5, tmp_path / "serial", workers=1, scale=tiny, executor=Executor())
    with Executor("dask", None, 2) as cluster:
        assert cluster.workers == 2
        run_bounds("smoke", 5, tmp_path / "dask", workers=1, scale=tiny, executor=cluster)
        # the order of results is the units' order, whichever worker finished first
        assert cluster.map(_square, range(40)) == [i * i for i in range(40)]
    assert _files(tmp_path / "serial") == _files(tmp_path / "dask")
    assert len(_files(tmp_path / "dask")) == 4


def _square(i: int) -> int:
    return i * i


def test_the_arguments_choose_the_executor():
    p = argparse.ArgumentParser()
    add_arguments(p, default_jobs=1)
    assert executor_from(p.parse_args([])).kind == "serial"
    assert executor_from(p.parse_args(["--jobs", "3"])).kind == "dask"
    remote = executor_from(p.parse_args(["--dask", "tcp://10.0.0.5:8786"]))
    assert remote.kind == "dask" and remote.address == "tcp://10.0.0.5:8786"


# ---- model/executor.py: one interface, one adapter per way of running units -------------------

def _slow_square(i: int) -> int:
    import time
    time.sleep(0.01 * (4 - i))  # the first unit ends last: an adapter that gathers by
    return i * i                # completion, not by unit, shows here


def _dies_on_two(i: int) -> int:
    import os
    import signal
    if i == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer or a stray kill would
    return i


def test_a_worker_that_dies_fails_the_map_instead_of_hanging_it() -> None:
    """On multiprocessing.Pool this waits for the lost unit for ever (planted, seen: the
    subprocess below ran into its timeout)."""
    import subprocess
    import sys
    program = ("import sys; from concurrent.futures.process import BrokenProcessPool\n"
               "from loopproof.model.executor import Processes\n"
               "from tests.experiments.test_executor import _dies_on_two\n"
               "try:\n    Processes(2).map(_dies_on_two, [0, 1, 2, 3])\n"
               "except BrokenProcessPool as exc:\n    print('broken:', exc); sys.exit(0)\n"
               "sys.exit(1)\n")
    done = subprocess.run([sys.executable, "-c", program], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("broken:"), done.stderr[-1000:]


def test_every_model_executor_gives_the_results_in_the_units_order() -> None:
    from loopproof.model.executor import Processes, Serial, Threads, local

    units = [0, 1, 2, 3]
    want = [0, 1, 4, 9]
    for ex in (Serial(), Processes(2), Threads(2), local(1), local(2)):
        assert ex.map(_slow_square, units) == want, ex
    assert isinstance(local(1), Serial) and local(2) == Processes(2)
    assert Processes(2).map(_slow_square, []) == [] == Threads(2).map(_slow_square, [])
