"""A bounded search is never a proof: a BMC or lasso search that finds no counterexample is
"not refuted within depth d" (its own result, in the table and in --json), an obligation that
expected a refutation and ends so fails with a hint to go deeper, and `--max-depth N` searches
every depth up to N and prints the shortest counterexample."""

from __future__ import annotations

import json

import pytest
import z3

from loopproof.proofs import __main__ as cli
from loopproof.proofs import checks, g2_order, obligations
from loopproof.proofs import g1_finishes as g1
from loopproof.proofs import g2_no_drift as g2
from loopproof.proofs.checks import NotRefuted, bmc, find_lasso, first
from loopproof.proofs.encoding import Params, RunEncoding
from loopproof.proofs.obligations import Obligation, discharge
from loopproof.proofs.trace import Trace

SHALLOW = Obligation("G2-broken-begin-ignores-needs", "G2", "refuted",
                     "broken: Begin does not check needs (searched one step too shallow)",
                     lambda: g2_order.run_begin_ignores_needs(depth=0))


@pytest.fixture(autouse=True)
def _depth_limit(monkeypatch):
    monkeypatch.setattr(checks, "DEPTH_LIMIT", 0)  # the CLI sets it; restored after each test


def test_a_too_shallow_search_is_not_refuted_and_never_proved():
    r = discharge(SHALLOW)
    assert r.result == "not refuted within depth 0"
    assert r.result != "proved" and not r.ok
    assert r.counterexample is None and r.depth == 0
    assert "--max-depth" in r.hint and SHALLOW.id in r.hint
    row = r.to_json()
    assert row["result"] == "not refuted within depth 0" and row["depth"] == 0
    assert "raise the depth" in row["hint"]


def test_the_table_and_json_show_not_refuted_and_exit_1(monkeypatch, capsys):
    monkeypatch.setattr(obligations, "OBLIGATIONS", (SHALLOW,))
    assert cli.main([]) == 1
    text = capsys.readouterr().out
    [row] = [line for line in text.splitlines() if line.startswith(SHALLOW.id)]
    assert "not refuted within depth 0" in row and "MISMATCH" in row and "proved" not in row
    assert "hint: no run of at most 0 steps" in text
    assert cli.main(["--json"]) == 1
    [doc] = json.loads(capsys.readouterr().out)
    assert doc["result"] == "not refuted within depth 0" and doc["expect"] == "refuted"
    assert doc["depth"] == 0 and "counterexample" not in doc


def test_max_depth_searches_deeper_and_finds_the_shortest_run(monkeypatch, capsys):
    monkeypatch.setattr(obligations, "OBLIGATIONS", (SHALLOW,))
    assert cli.main(["--json", "--max-depth", "6"]) == 0
    [doc] = json.loads(capsys.readouterr().out)
    assert doc["result"] == "refuted" and "depth" not in doc
    steps = doc["counterexample"]["steps"]
    assert [s["event"] for s in steps] == [None, "Begin(b)"]  # the shortest bad run: 1 step


def test_max_depth_must_not_be_negative(capsys):
    assert cli.main(["--only", "G2-needs", "--max-depth", "-1"]) == 2
    assert "fix:" in capsys.readouterr().err


def test_a_bounded_search_of_the_real_model_is_not_a_proof():
    """A careless user checks G2 on the real model by BMC and expects "proved": it is reported
    as what it is, and does not meet that expectation."""
    enc = RunEncoding(g2.CHAIN, Params.of(g2.CHAIN))
    careless = Obligation("G2-by-bmc", "G2", "proved", "G2 on CHAIN by bounded search",
                          lambda: bmc(enc, lambda s: g2.drift(enc, s), 3, "G2"))
    r = discharge(careless)
    assert r.result == "not refuted within depth 3" and not r.ok


def test_a_lasso_search_too_short_is_not_refuted():
    enc = g1.ControlRuns(g1.LASSO_GRAPH, Params.of(g1.LASSO_GRAPH), g1.PerActivationRepairs())
    short = find_lasso(enc, lambda s: g1.guard_relevant(enc, s), 2, "per-activation repairs")
    assert isinstance(short, NotRefuted) and short.depth == 2
    assert isinstance(find_lasso(enc, lambda s: g1.guard_relevant(enc, s), 8, "x"), Trace)


def test_depth_limit_raises_every_bounded_search(monkeypatch):
    enc = RunEncoding(g2_order.PAIR, Params.of(g2_order.PAIR), g2_order.BeginIgnoresNeeds())
    bad = lambda s: z3.Not(g2_order.needs_done(enc, s))  # noqa: E731
    assert bmc(enc, bad, 0, "needs") == NotRefuted(0, "needs")
    monkeypatch.setattr(checks, "DEPTH_LIMIT", 3)
    found = bmc(enc, bad, 0, "needs")
    assert isinstance(found, Trace) and len(found.steps) == 2


def test_first_prefers_a_counterexample_and_never_turns_a_bounded_result_into_a_proof():
    tr = Trace("trace", "x")
    nr = NotRefuted(2, "p")
    assert first([None, nr, tr]) is tr
    assert first([None, nr, None]) is nr
    assert first([None, None]) is None


def test_a_witness_search_too_shallow_finds_no_witness_and_is_not_proved():
    """G1-bound-attained is `proved` by the run it finds (W is reached); searched too shallow it
    finds none, and that must not pass as proved either."""
    shallow = Obligation("G1-bound-attained", "G1", "proved", "W is reached (too shallow)",
                         lambda: g1.bound_attained(depth=3))
    r = discharge(shallow)
    assert r.result == "refuted" and not r.ok
    assert r.counterexample.kind == "vacuous" and "W = 6" in r.counterexample.note
