"""Stale evidence causes harm through the mechanism, and the guarded loop blocks it.

HumanEval/0, seed 1: the correct start (the reference) is handed the visible trace of the wrong
state it was repaired from. The trace names an assertion the current code already passes; the
search coder, acting on it, proposes an edit checked only against that assertion, and the edit
breaks the code. With a current trace the same coder does no harm. Under the admission broker the
stale trace cannot drive the patch: it is refused and refreshed, the checkpoint is kept, and
completion re-certifies the correct code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.transition import arms
from experiments.transition.coders import SOLUTION, Request, SearchCoder, patched_source
from experiments.transition.conditions import trace
from experiments.transition.tasks import build_task, code_hash, correct, run_cases
from loopproof.engine.admission.broker import AdmissionBroker, Disposition, GuardPolicy

SEED = 1


@pytest.fixture(scope="module")
def task():
    t = build_task("HumanEval/0")
    assert t is not None
    return t


def test_a_stale_trace_edits_a_correct_start_back_to_wrong(task):
    wrong, _ = arms.starts(task, SEED)
    current = task.reference
    assert correct(task, current) and not correct(task, wrong)
    stale = trace(task, wrong)
    # the envelope names the older state; its payload says an assertion fails...
    assert stale.state_hash == code_hash(wrong) != code_hash(current)
    failing = stale.payload["failed"][0]
    # ...which the current state in fact passes
    from experiments.transition.tasks import Case
    named = Case(failing["args"], failing["expected"])
    assert run_cases(task.entry, [current], [named])[0][0][0]

    coder = SearchCoder()
    reply = coder.revise(Request(task, current, stale, (), SEED, 1))
    assert reply.mode == "repair" and reply.claims_done
    harmed = patched_source(reply.action)
    assert harmed is not None and harmed != current
    assert not correct(task, harmed)                       # the correct start is now wrong
    assert run_cases(task.entry, [harmed], [named])[0][0][0]  # it satisfies the stale claim

    fresh = coder.revise(Request(task, current, trace(task, current), (), SEED, 1))
    assert fresh.mode == "preserve"
    kept = patched_source(fresh.action) or current
    assert correct(task, kept)                             # a current trace does no harm here

    # the same thing, through the experiment's common-state branch
    assert arms.common_state(task, "stale_trace", SEED, coder)["harm"] is True
    assert arms.common_state(task, "current_trace", SEED, coder)["harm"] is False


def test_the_guarded_loop_refuses_the_stale_trace_and_keeps_the_correct_state(task, tmp_path):
    wrong, _ = arms.starts(task, SEED)
    ws, state = tmp_path / "ws", tmp_path / "state"
    ws.mkdir()
    (ws / SOLUTION).write_text(task.reference, encoding="utf-8")
    broker = AdmissionBroker(ws, state, admission=list(arms.suite_checks(task)),
                             policy=GuardPolicy(candidate_budget=3))
    current_ev = broker.start()
    assert broker.checkpoint is not None                   # the correct start is gated in

    stale = trace(task, wrong)  # the trace of the state before the bug was fixed
    delivered = broker.deliver(stale)
    assert delivered is not stale and delivered is not None
    assert delivered.state_hash == current_ev.state_hash   # refreshed: bound to the current tree
    assert delivered.verdict == "pass"

    coder = SearchCoder()
    harmful = coder.revise(Request(task, task.reference, stale, (), SEED, 1))
    decision = broker.submit(arms._reply_json(harmful), based_on=stale)
    assert decision.outcome == Disposition.STALE               # stale evidence never drives a patch
    assert decision.checkpoint == current_ev.state_hash
    assert (ws / SOLUTION).read_text(encoding="utf-8") == task.reference
    completion = broker.complete()
    assert completion.completed
    final = (broker.store.path_of(broker.checkpoint) / SOLUTION).read_text(encoding="utf-8")
    assert final == task.reference and correct(task, final)


def test_in_the_paired_comparison_every_stale_offer_is_refused(task):
    coder = SearchCoder()
    offered = 0
    for seed in range(2):
        guard = arms.guarded_run(task, seed, "correct", 3, coder)
        base = arms.baseline_run(task, seed, "correct", 3, coder)
        assert base["offered_stale"][0] == guard["offered_stale"][0]  # same coin, same start
        for t, stale in enumerate(guard["offered_stale"]):
            if stale:
                offered += 1
                assert guard["refused_stale"][t]
        assert guard["harm"] is False  # the gated checkpoint survives every revision here
    assert offered > 0


def test_suite_checks_bind_to_the_task_suites(task):
    visible, challenge = arms.suite_checks(task)
    assert visible.identity()["version"] == task.visible.hash
    assert challenge.identity()["version"] == task.challenge.hash
    d = Path(__file__).parent  # any folder without solution.py is an error, not a pass
    assert visible.run(d).verdict == "error"


def test_condition_payloads(task):
    from experiments.transition.conditions import CONDITIONS, evidence_for
    wrong, previous = arms.starts(task, SEED)
    ev = {c: evidence_for(c, task, wrong, previous) for c in CONDITIONS}
    assert ev["unavailable"] is None
    assert set(ev["current_binary"].payload) == {"check", "verdict", "text"}
    assert ev["current_trace"].payload["failed"][0]["actual"] != \
        ev["current_trace"].payload["failed"][0]["expected"]
    assert ev["stale_trace"].state_hash == code_hash(previous)
    assert ev["current_trace"].state_hash == code_hash(wrong)
    filler, real = ev["nonactionable"].payload["text"], ev["current_trace"].payload["text"]
    assert len(filler) == len(real) and task.entry not in filler
    assert ev["current_trace_full"].payload["check"] == "visible+challenge"
    coder = SearchCoder()
    assert coder.read(ev["nonactionable"]) == ("blind", [])
    assert coder.read(ev["current_binary"])[0] == "blind"
    assert coder.read(trace(task, task.reference))[0] == "preserve"
