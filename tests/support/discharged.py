"""Every broken variant discharged in a test process, once per test session, for the tests that
read its result: tests/proofs/test_proofs_deterministic.py (the same counterexample as the full
run's, where each obligation has a fresh process of its own) and the tests that replay a broken
variant's counterexample through the executable model (tests/proofs/test_proofs.py,
test_concurrent_proofs.py, test_extending.py, tests/model/test_budget_rule.py,
test_receipt_rule.py). Each of them discharged the same variants again on the same sources.

The first worker to ask discharges every broken variant in its own process, after whatever that
process ran before, one after another in reverse order of the registry (as the determinism test
did on its own), and pickles the results into the session's shared folder
(tests/support/built_once.py); every test reads them from there. A counterexample keeps its
concrete states and events (what a replay steps through) and, of the Z3 encoding it came from,
its graph alone (`Encoded`: what `proofs.replay.real_run` reads). The results are shared: read
them (each call reads a fresh copy). A test that plants a fault still discharges its own broken variant.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest

from loopproof.model.graph import LoopGraph
from loopproof.proofs import checks, family
from loopproof.proofs.obligations import OBLIGATIONS, discharge
from loopproof.proofs.trace import Trace
from tests.support.built_once import built_once

BROKEN = tuple(ob.id for ob in reversed(OBLIGATIONS) if ob.broken)


@dataclass(frozen=True)
class Encoded:
    """What a shared counterexample keeps of the encoding it was found in: its graph."""

    graph: LoopGraph | None


@dataclass(frozen=True)
class Discharged:
    """A broken variant's result as `discharge` gave it in the test process that built them."""

    result: str
    error: str
    counterexample: Trace | None


def _build(folder: Path) -> None:
    # a full run's knobs: a test that changed them (and restores them) must not build these
    assert family.MAX_NODES == family.DEFAULT_MAX_NODES and checks.DEPTH_LIMIT == 0, \
        "the shared broken variants are discharged with the default family and depths"
    by_id = {ob.id: ob for ob in OBLIGATIONS}
    out: dict[str, Discharged] = {}
    for i in BROKEN:
        r = discharge(by_id[i])
        tr = r.counterexample
        if tr is not None:
            tr.system = Encoded(getattr(tr.system, "graph", None))
        out[i] = Discharged(r.result, r.error, tr)
    (folder / "broken.pickle").write_bytes(pickle.dumps(out))


def discharged(factory: pytest.TempPathFactory) -> dict[str, Discharged]:
    """Broken variant id -> its result, discharged in-process once per test session."""
    folder = built_once(factory, "discharged-broken-variants", _build)
    out: dict[str, Discharged] = pickle.loads((folder / "broken.pickle").read_bytes())  # noqa: S301 -- written by _build in this session
    return out


def counterexample(factory: pytest.TempPathFactory, ob_id: str) -> Trace:
    """A broken variant's counterexample (it must be refuted)."""
    r = discharged(factory)[ob_id]
    assert r.result == "refuted", r.error
    assert r.counterexample is not None
    return r.counterexample
