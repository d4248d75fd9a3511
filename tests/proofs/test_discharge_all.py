"""`discharge_all` never waits for ever: an obligation whose process dies (a signal, the OOM
killer, SystemExit) is `unknown`, a failure, and the others still get their results.

multiprocessing.Pool lost such a task and waited for it for ever (a fresh clone's `make check`
hung in `python -m loopproof.proofs` at load 15); these cases hang on that code and pass here."""

from __future__ import annotations

import os
import signal
import sys

from loopproof.proofs.discharge import discharge_all
from loopproof.proofs.obligations import Obligation
from loopproof.proofs.solver import Unknown


def _proved() -> None:
    return None


def _killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _exits() -> None:
    sys.exit(0)


def _big() -> None:
    """A result far larger than a pipe's buffer: its process can end only once it is read."""
    raise Unknown("x" * 1_000_000, "a test")


def ob(name: str, check) -> Obligation:
    return Obligation(name, "G0", "proved", f"test obligation {name}", check)


def test_a_process_that_dies_makes_its_obligation_unknown_and_the_rest_still_run() -> None:
    obs = [ob("a", _proved), ob("killed", _killed), ob("b", _proved), ob("exits", _exits),
           ob("c", _proved)]
    results = discharge_all(obs, jobs=2)
    assert [r.obligation.id for r in results] == ["a", "killed", "b", "exits", "c"]
    assert [r.result for r in results] == ["proved", "unknown", "proved", "unknown", "proved"]
    assert "signal 9" in results[1].error and "without a result" in results[1].error
    assert "exit status 0" in results[3].error
    assert not results[1].ok and not results[3].ok


def test_a_result_larger_than_a_pipe_comes_back_whole() -> None:
    results = discharge_all([ob("big", _big), ob("b", _proved)], jobs=2)
    assert [r.result for r in results] == ["unknown", "proved"]
    assert results[0].error.startswith("x" * 1_000_000 + ": Z3 answered unknown")
