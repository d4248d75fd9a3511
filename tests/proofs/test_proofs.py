"""The proof obligations give their expected results; every broken variant's counterexample really
breaks its property when checked concretely (replayed through model.step where the variant is a
run of the model); weakened invariants are caught; the CLI reports what it found."""

from __future__ import annotations

import json
import math

import pytest
import z3

from loopproof.model import checkpoint as mc
from loopproof.model import evidence as me
from loopproof.model import policy as mp
from loopproof.model import rules
from loopproof.model.bounds import attempt_bound
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.state import RunState, Status, initial_state
from loopproof.model.transitions import Begin, Claim, Disabled, Repair, Reserve, Settle, step
from loopproof.proofs import __main__ as cli
from loopproof.proofs import g1_finishes as g1
from loopproof.proofs import g2_no_drift as g2
from loopproof.proofs import g2_order, obligations
from loopproof.proofs import g3_no_overspend as g3
from loopproof.proofs import g5_checkpoint as g5
from loopproof.proofs import g6_policy as g6
from loopproof.proofs.checks import (
    NotRefuted,
    bmc,
    check_inductive,
    check_transitions,
    check_unchanged,
)
from loopproof.proofs.encoding import S_DONE, Params, RunEncoding, State
from loopproof.proofs.family import dags, shapes
from loopproof.proofs.obligations import OBLIGATIONS, Obligation, discharge
from loopproof.proofs.trace import Trace
from tests.support.discharged import counterexample as cex
from tests.support.proofs_report import full_report

BY_ID = {ob.id: ob for ob in OBLIGATIONS}




# ---- the registry ---------------------------------------------------------------------------------

def test_registry_meets_the_card():
    assert len(OBLIGATIONS) >= 7
    assert len({ob.id for ob in OBLIGATIONS}) == len(OBLIGATIONS)
    broken = [ob for ob in OBLIGATIONS if ob.expect == "refuted"]
    assert len(broken) >= 3
    assert {ob.guarantee for ob in OBLIGATIONS} >= {"G1", "G2", "G3", "G4", "G5", "G6"}
    assert {ob.guarantee for ob in broken} >= {"G1", "G2", "G3", "G4", "G5", "G6"}
    assert any("sanity" in ob.id for ob in OBLIGATIONS)


@pytest.mark.parametrize("ob", OBLIGATIONS, ids=lambda ob: ob.id)
def test_obligation_gives_its_expected_result(ob: Obligation):
    """Read from the full run make check's proofs step kept for today's sources
    (tests/support/proofs_report.py runs it when there is none)."""
    row = full_report()[ob.id]
    assert row["result"] == ob.expect, (row.get("error") or row.get("hint")
                                        or json.dumps(row.get("counterexample"))[:3000])
    assert ("counterexample" in row) == (ob.expect == "refuted")


def test_a_proof_that_rests_on_a_bounded_search_that_found_nothing_is_not_proved():
    """A check that ran a bounded search, got no run back and still said "proved" (a
    NotRefuted dropped on the floor) is reported "not refuted within depth d", not proved."""
    from loopproof.proofs.checks import NotRefuted as Made

    def drops_it():
        Made(3, "something")  # the search's answer, ignored
        return None  # "proved"

    ob = Obligation("G6-dropped", "G6", "proved", "a check that drops its bounded search", drops_it)
    r = discharge(ob)
    assert r.result == "not refuted within depth 3" and not r.ok and r.depth == 3
    assert "--only G6-dropped" in r.hint
    ok = Obligation("G6-clean", "G6", "proved", "a check with no bounded search", lambda: None)
    assert discharge(ok).result == "proved"


def test_family_is_every_dag_up_to_three_nodes():
    # 1 + 2 + 6 isomorphism classes of DAGs on 1, 2, 3 nodes
    assert len(list(dags())) == 9
    full = [g for g in shapes() if len(g.names) == 3 and len(g.desc("a")) == 2
            and g.desc("b") == {"c"}]
    assert any(len(g.repair_pairs) == 6 for g in full)  # (a,a),(b,a),(b,b),(c,a),(c,b),(c,c)


# ---- broken variants: their counterexamples break the property concretely ---------------------

def replay(tr: Trace, upto: int | None = None) -> list[RunState]:
    """Run the trace's events through the real model from its first state."""
    steps = tr.steps if upto is None else tr.steps[: upto + 1]
    graph = _graph_of(tr)
    s = steps[0].state_obj
    assert s == initial_state(graph)
    out = [s]
    for st in steps[1:]:
        s = step(graph, s, st.event_obj)
        out.append(s)
    return out


def _graph_of(tr: Trace) -> LoopGraph:
    return tr.system.graph


def test_lasso_repeats_and_the_real_model_stops_it(tmp_path_factory):
    tr = cex(tmp_path_factory, "G1-broken-per-activation-repairs")
    assert tr.kind == "lasso" and tr.loop_start is not None
    loop = tr.steps[tr.loop_start:]
    # the repeated state agrees with the loop start on every field a guard reads
    first, last = loop[0].state, loop[-1].state
    for name in first["nodes"]:
        for k in ("status", "attempts", "repairs_of"):
            assert first["nodes"][name][k] == last["nodes"][name][k]
    for k in ("repairs_used", "settled", "reserved", "outcome"):
        assert first[k] == last[k]
    assert any(isinstance(st.event_obj, Repair) for st in loop[1:])
    # the real model accepts the same events once (its states equal the trace's on the
    # model's fields up to the global counter) ...
    graph = g1.LASSO_GRAPH
    states = replay(tr)
    for st, real in zip(tr.steps, states, strict=True):
        assert st.state_obj.status == real.status
        assert st.state_obj.attempts == real.attempts
    assert states[-1].repairs_used == 1
    # ... and refuses to go round the loop a second time: the global budget K is spent
    s = states[-1]
    with pytest.raises(Disabled, match="repair budget"):
        for st in loop[1:]:
            s = step(graph, s, st.event_obj)


def test_self_report_run_drifts_only_in_the_broken_variant(tmp_path_factory):
    tr = cex(tmp_path_factory, "G2-broken-self-report-run")
    last = tr.steps[-1]
    assert isinstance(last.event_obj, Claim)
    drifted = last.state_obj
    g = g2.CHAIN
    assert any(st is Status.DONE and (v, e) not in drifted.passes
               for v, st, e in zip(g.names, drifted.status, drifted.activation, strict=True))
    # the real model: the same events, and Claim changes nothing
    states = replay(tr)
    assert states[-1] == states[-2]
    assert Status.DONE not in states[-1].status


def test_self_report_step_breaks_the_invariant(tmp_path_factory):
    tr = cex(tmp_path_factory, "G2-broken-self-report-step")
    pre, post = tr.steps[0].state, tr.steps[1].state

    def no_drift(state: dict) -> bool:
        return all(n["pass_current"] for n in state["nodes"].values() if n["status"] == "DONE")

    assert tr.steps[1].event.startswith("Claim(")
    assert no_drift(pre) and not no_drift(post)


def test_between_attempts_run_overspends_and_the_real_model_refuses(tmp_path_factory):
    tr = cex(tmp_path_factory, "G3-broken-between-attempts")
    g = g3.ONE_NODE
    last = tr.steps[-1].state_obj
    assert last.settled + last.reserved > g.spend_budget + 1e-9
    # every step before the last is a step of the real model ...
    states = replay(tr, upto=len(tr.steps) - 2)
    assert states[-1] == tr.steps[-2].state_obj
    # ... and the real model refuses the overspending one
    with pytest.raises(Disabled):
        step(g, states[-1], tr.steps[-1].event_obj)


def test_check_then_spend_race_overspends_and_the_real_model_refuses(tmp_path_factory):
    """Two concurrent reservations each checked against the settled spend: together they pass
    B; the real model checks the second against the first and refuses it."""
    tr = cex(tmp_path_factory, "G3-broken-check-then-spend")
    g = g3.ONE_NODE
    last = tr.steps[-1].state_obj
    assert last.settled + last.reserved > g.spend_budget + 1e-9
    assert [s.event.split("(")[0] for s in tr.steps[1:]].count("Reserve") >= 2
    states = replay(tr, upto=len(tr.steps) - 2)
    assert states[-1].reserved > 0  # a reservation is in flight when the next one is made
    with pytest.raises(Disabled):
        step(g, states[-1], tr.steps[-1].event_obj)


def test_begin_ignoring_needs_starts_too_early_and_the_real_model_refuses(tmp_path_factory):
    tr = cex(tmp_path_factory, "G2-broken-begin-ignores-needs")
    g = g2_order.PAIR
    last = tr.steps[-1].state_obj
    assert last.status_of(g, "b") is Status.RUNNING
    assert last.status_of(g, "a") is not Status.DONE
    states = replay(tr, upto=len(tr.steps) - 2)
    with pytest.raises(Disabled, match="predecessor"):
        step(g, states[-1], tr.steps[-1].event_obj)


def test_bound_attained_finds_w_and_nothing_beyond_it():
    """G1-bound-attained's own search (`g1.bound_attained`: W reached within 14 steps) is the
    `reached` one below; its registered result is read from the full run by
    test_obligation_gives_its_expected_result."""
    from loopproof.proofs.checks import bmc

    g = g1.TIGHT_GRAPH
    enc = g1.ControlRuns(g, Params.of(g))
    w = attempt_bound(g)
    beyond = bmc(enc, lambda s: s.attempts_total > w, 14, "more than W attempts")
    assert beyond == NotRefuted(14, "more than W attempts")
    reached = bmc(enc, lambda s: s.attempts_total == w, 14, "W attempts")
    assert isinstance(reached, Trace)
    assert replay(reached)[-1].attempts_total == w


# the record systems of G4-G6 (G6's budget rule is about runs: tests/model/test_budget_rule.py replays
# its counterexample through model.step)
RECORD_RULES = ("loopproof.proofs.g4_evidence", "loopproof.proofs.g5_checkpoint", "loopproof.proofs.g6_policy")
ADMISSION = [ob.id for ob in OBLIGATIONS if ob.broken and ob.guarantee in ("G4", "G5", "G6")
             and ob.check.__module__ in RECORD_RULES]
INVARIANT = {"G4": me.bound_history, "G5": mc.gated, "G6": mp.pinned_stages}


@pytest.mark.parametrize("ob_id", ADMISSION)
def test_admission_counterexample_replays_through_the_executable_rules(ob_id, tmp_path_factory):
    """Every G4-G6 broken variant's trace is a run of the executable model (model/evidence.py,
    checkpoint.py, policy.py) up to its last step, and the real model refuses that step or,
    where the variant changes an effect, takes it to another state that keeps the invariant;
    a trace from Init ends in a state that breaks the model's own invariant."""
    tr = cex(tmp_path_factory, ob_id)
    invariant = INVARIANT[BY_ID[ob_id].guarantee]
    s = tr.steps[0].state_obj
    if tr.kind == "trace":
        assert invariant(s) is None
    for st in tr.steps[1:-1]:
        s = rules.step(s, st.event_obj)
        assert s == st.state_obj
    last = tr.steps[-1]
    if tr.kind == "trace":
        assert invariant(last.state_obj) is not None
    try:
        real = rules.step(s, last.event_obj)
    except Disabled:
        return
    assert real != last.state_obj and invariant(real) is None


GOOD_POLICY = """\
[policy]
goals = ["every node DONE with a PASS verdict"]
scope = ["."]

[gate]
files = ["gates/check_it.py"]

[budget]
spend = 60.0
repairs = 1
"""


def _policy_files(folder):
    """A real policy for engine.policy.pin, and one distinct policy text per trace hash name."""
    (folder / "gates").mkdir(parents=True)
    (folder / "gates" / "check_it.py").write_text("import sys; sys.exit(0)\n")
    texts: dict[str, str] = {}

    def text(h: str) -> str:
        return texts.setdefault(h, GOOD_POLICY.replace("spend = 60.0",
                                                       f"spend = {60 + len(texts)}.0"))
    return folder / "policy.toml", text


def _replay_on_the_engine(tr: Trace, folder):
    """Replay a G6 trace on real files with engine.policy.pin: Pin pins (PolicyPin.load), Edit
    writes the named policy, and each Stage is the engine's pin.check(). Returns, per stage,
    whether the policy on disk then had the pinned digest and whether the engine refused."""
    from loopproof.engine.policy.pin import PolicyChanged, PolicyPin, load_policy

    path, text = _policy_files(folder)
    path.write_text(text(tr.steps[0].state["current"]))
    pin, stages = None, []
    for prev, st in zip(tr.steps, tr.steps[1:], strict=False):
        if st.state["current"] != prev.state["current"]:
            path.write_text(text(st.state["current"]))
        if st.event == "Pin":
            pin = PolicyPin.load(path)
        elif st.event == "Stage":
            assert pin is not None
            same = load_policy(path).digest == pin.record()["digest"]
            try:
                pin.check()
                refused = False
            except PolicyChanged:
                refused = True
            stages.append((same, refused))
    return pin, stages


def test_check_at_start_only_runs_a_stage_under_a_changed_policy_the_engine_refuses(tmp_path, tmp_path_factory):
    tr = cex(tmp_path_factory, "G6-broken-check-at-start-only")
    events = [st.event for st in tr.steps]
    assert events[-1] == "Stage" and "Pin" in events
    assert any(e.startswith("Edit(") for e in events[events.index("Pin"):])
    assert all(g6.stages_pinned(st.state) for st in tr.steps[:-1])
    last = tr.steps[-1].state
    assert not g6.stages_pinned(last) and last["stages(digest)"][-1] == last["current"]
    # on real files: the last stage ran under another digest, and the real check refuses it
    pin, stages = _replay_on_the_engine(tr, tmp_path)
    assert stages and stages[-1] == (False, True)
    assert all(same and not refused for same, refused in stages[:-1])
    # and the real rules have no such run (within a longer bound than the counterexample)
    assert isinstance(bmc(g6.PolicyRules(), lambda s: z3.Not(g6.pinned_stages(s)), 6, "G6"),
                      NotRefuted)


def test_worker_writing_the_policy_breaks_the_frame_and_the_engine_refuses_that_setup(tmp_path, tmp_path_factory):
    from loopproof.engine.policy.pin import PolicyPin
    from loopproof.engine.system.errors import BadInput

    tr = cex(tmp_path_factory, "G6-broken-worker-writes-policy")
    assert tr.kind == "cti" and tr.steps[-1].event.startswith("WorkerWrite(")
    assert tr.steps[0].state["current"] != tr.steps[-1].state["current"]
    assert g6.check_worker_frame() is None
    path, text = _policy_files(tmp_path / "worker")
    path.write_text(text("h0"))
    pin = PolicyPin.load(path)
    pin.assert_outside(tmp_path / "elsewhere")
    with pytest.raises(BadInput, match="inside the worker's folder"):
        pin.assert_outside(tmp_path / "worker")


def test_check_at_start_only_also_breaks_fail_closed():
    found = check_unchanged(g6.CheckAtStartOnly(), g6.fails_closed, allowed=(),
                            what="the fail-closed rule")
    assert found is not None and found.steps[-1].event == "Stage"


class _WatchResume(g6.PolicyRules):
    """The real rules plus a ghost: has a stage run since a Resume?"""

    FIELDS = {**g6.PolicyRules.FIELDS, "resumed": z3.BoolSort(),
              "staged_after_resume": z3.BoolSort()}

    def init(self, s):
        return z3.And(super().init(s), z3.Not(s["resumed"]), z3.Not(s["staged_after_resume"]))

    def rule_resume(self, s, ev):
        guard, upd = super().rule_resume(s, ev)
        return guard, {**upd, "resumed": z3.BoolVal(True)}

    def rule_stage(self, s, ev):
        guard, upd = super().rule_stage(s, ev)
        return guard, {**upd, "staged_after_resume": s["resumed"]}


def test_a_change_stops_the_run_and_only_the_restored_policy_resumes_it():
    """The real rules reach: pin, change, Check (stop), restore, Resume, a stage -- under the
    pin; and cannot resume while the policy still differs."""
    run = bmc(_WatchResume(), lambda s: s["staged_after_resume"], 6, "a stage after a resume")
    assert isinstance(run, Trace)
    events = [st.event for st in run.steps]
    assert events.index("PolicyCheck") < events.index("Resume") < len(events) - 1
    assert all(g6.stages_pinned(st.state) for st in run.steps)
    stopped = run.steps[events.index("PolicyCheck")].state
    assert stopped["stopped"] and stopped["current"] != stopped["pinned"]
    early = bmc(_WatchResume(), lambda s: s["staged_after_resume"], 5, "a stage after a resume")
    assert isinstance(early, NotRefuted)  # no shorter way: the policy must be restored before Resume


def test_stage_record_without_the_unpinned_clause_is_not_inductive():
    i = z3.Int("i")

    def weak(s):
        return z3.And(s["ns"] >= 0, z3.ForAll([i], z3.Implies(
            z3.And(i >= 0, i < s["ns"]), s["stages"][i] == s["pinned"])))

    found = check_transitions(g6.PolicyRules(), weak)
    assert found is not None and found.steps[-1].event == "Pin"


def test_ranking_needs_the_ops_bound_because_claim_is_a_real_stutter(tmp_path_factory):
    tr = cex(tmp_path_factory, "G1-ranking-needs-ops-bound")
    pre, post = tr.steps
    assert type(post.event_obj).__name__ in ("Claim", "Reserve", "Settle")
    g = next(g for g in shapes() if RunEncoding(g, Params.of(g)).case == tr.params["graph"])
    concrete = LoopGraph.build(
        [NodeSpec(n.name, attempts=tr.params[f"a_{n.name}"],
                  spend_ceiling=float(tr.params[f"c_{n.name}"]), needs=n.needs,
                  repairs=tuple(u for d, u in g.repair_pairs
                                if d == n.name and f"({d},{u})" in tr.params["R"]))
         for n in g.nodes], repair_budget=tr.params["K"], spend_budget=float(tr.params["B"]))
    assert step(concrete, pre.state_obj, post.event_obj) == post.state_obj


# ---- weakened invariants are caught -------------------------------------------------------------

def _full_chain() -> LoopGraph:
    return next(g for g in shapes() if len(g.repair_pairs) == 6)


def test_attempt_bound_without_the_unstarted_descendants_clause_is_not_inductive():
    graph = _full_chain()
    enc = RunEncoding(graph, Params.symbolic(graph))

    def weak(s: State) -> z3.BoolRef:
        a = enc.params.attempts
        lhs = s.attempts_total + z3.Sum([g1.remaining(enc, s, v) for v in graph.names])
        counters = [z3.And(s.attempts(v) >= 0, s.attempts(v) <= a[v]) for v in graph.names]
        return z3.And(*counters, lhs <= z3.Sum(list(a.values()))
                      + s.repairs_used * g1.per_repair(enc))

    assert check_inductive(enc, lambda s: g1.attempt_invariant(enc, s)) is None
    found = check_transitions(enc, weak)
    assert found is not None and found.kind == "cti"


def test_spend_invariant_without_nonnegative_reservation_is_not_inductive():
    graph = _full_chain()
    enc = RunEncoding(graph, Params.symbolic(graph))

    def weak(s: State) -> z3.BoolRef:
        return z3.And(s.settled >= 0, g3.within_budget(enc, s))

    found = check_transitions(enc, weak)
    assert found is not None and found.kind == "cti"


def test_a_claim_that_marks_done_is_caught_on_every_family_shape():
    for graph in shapes():
        enc = RunEncoding(graph, Params.symbolic(graph), g2.SelfReportMarksDone())
        found = check_inductive(enc, lambda s, enc=enc: g2.no_drift_run(enc, s))
        assert found is not None and "Claim" in found.note


def test_settle_with_a_tolerance_lets_spend_creep_past_the_budget():
    """The model once allowed Settle(amount <= reserved + EPS); the G3 proof caught it."""
    from loopproof.model.run_rules import RunRules, settled_outside

    class Tolerant(RunRules):
        def guard_settle(self, s, ev, g):
            self.in_attempt(s, g, ev.node)
            g.need_spend(s.and_(ev.amount >= 0, ev.amount <= s.reserved + s.eps), settled_outside,
                         ev.amount, s.reserved)

    graph = g3.ONE_NODE
    enc = RunEncoding(graph, Params.symbolic(graph), Tolerant())
    found = check_inductive(enc, lambda s: g3.spend_invariant(enc, s))
    assert found is not None and "Settle" in found.note
    # and the fixed model refuses exactly that step
    s = step(graph, initial_state(graph), Begin("a"))
    s = step(graph, s, Reserve(1.0))
    with pytest.raises(Disabled):
        step(graph, s, Settle(1.0 + 0.5e-9))


# ---- the proof's W is the model's W --------------------------------------------------------------

@pytest.mark.parametrize("graph", list(shapes()), ids=lambda g: RunEncoding(g, Params.of(g)).case)
def test_closed_form_in_z3_equals_model_bounds(graph: LoopGraph):
    for attempts, k in (((1, 2, 3), 2), ((2, 1, 1), 1), ((3, 3, 1), 0)):
        for keep in (graph.repair_pairs, graph.repair_pairs[:1], ()):
            nodes = [NodeSpec(n.name, attempts=a, needs=n.needs,
                              repairs=tuple(u for d, u in keep if d == n.name))
                     for n, a in zip(graph.nodes, attempts, strict=False)]
            concrete = LoopGraph.build(nodes, repair_budget=k, spend_budget=math.inf)
            w = z3.simplify(g1.closed_form(RunEncoding(concrete, Params.of(concrete))))
            assert w.as_long() == attempt_bound(concrete)


# ---- the command line ------------------------------------------------------------------------------

def test_cli_json_and_out(tmp_path, capsys):
    out = tmp_path / "deep" / "proofs.json"
    # three guarantees' cheapest obligations, proved and refuted (id prefixes; a whole
    # guarantee, G6, is selected by test_cli_gives_the_same_results_whatever_the_jobs)
    assert cli.main(["--json", "--only", "G4-broken-forged", "G5-receipt", "G5-broken-receipt",
                     "G6-policy", "G6-broken-check", "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    assert {r["guarantee"] for r in printed} == {"G4", "G5", "G6"}
    assert {r["expect"] for r in printed} == {"proved", "refuted"}
    for r in printed:
        assert set(r) >= {"id", "guarantee", "expect", "result", "seconds"}
        assert r["result"] == r["expect"]
        assert isinstance(r["seconds"], float)
        if r["expect"] == "refuted":
            assert r["counterexample"]["steps"]


def test_cli_table_shows_counterexamples(capsys):
    assert cli.main(["--only", "G2-broken-self-report-run"]) == 0
    text = capsys.readouterr().out
    assert "G2-broken-self-report-run" in text and "Claim(a)" in text and "init" in text


def test_cli_exits_nonzero_when_an_expectation_fails(monkeypatch, capsys):
    wrong = Obligation("G5-wrongly-expected", "G5", "proved", "a broken variant expected to hold",
                       g5.run_drift_overwrites)
    monkeypatch.setattr(obligations, "OBLIGATIONS", (wrong,))
    assert cli.main(["--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["result"] == "refuted"


def test_cli_treats_unknown_as_failure(monkeypatch, capsys):
    def undecided():
        from loopproof.proofs.solver import Unknown
        raise Unknown("a query", "timeout")

    monkeypatch.setattr(obligations, "OBLIGATIONS",
                        (Obligation("G1-undecided", "G1", "proved", "times out", undecided),))
    assert cli.main(["--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["result"] == "unknown"


def test_cli_max_nodes_changes_the_family(monkeypatch, capsys):
    from loopproof.proofs import family

    monkeypatch.setattr(family, "MAX_NODES", family.MAX_NODES)  # restored after the test
    assert cli.main(["--json", "--only", "G2-needs", "--max-nodes", "2"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert "up to 2 nodes" in row["statement"] and row["result"] == "proved"
    assert len(list(dags())) == 3  # 1 + 2 classes


def test_cli_rejects_an_unknown_selection(capsys):
    assert cli.main(["--only", "G9-nothing"]) == 2
    assert "fix:" in capsys.readouterr().err


def test_z3_really_times_out_into_unknown():
    """A query Z3 cannot decide (Fermat, n = 3) is `unknown` within a small budget, and
    `witness` -- what every check asks through -- raises instead of answering."""
    from loopproof.proofs.solver import Answer, Unknown, ask, witness

    x, y, z = z3.Ints("x y z")
    fermat = [x > 0, y > 0, z > 0, x * x * x + y * y * y == z * z * z]
    assert ask(fermat, timeout_ms=50).answer is Answer.UNKNOWN
    with pytest.raises(Unknown):
        witness("Fermat", fermat, timeout_ms=50)


def test_done_constant_is_the_model_status():
    assert str(S_DONE) == Status.DONE.value


# ---- recovered crashes (Abandon gives the attempt back) -----------------------------------------

def test_ranking_needs_the_crash_bound_because_abandon_is_a_real_step(tmp_path_factory):
    tr = cex(tmp_path_factory, "G1-ranking-needs-crash-bound")
    pre, post = tr.steps
    assert type(post.event_obj).__name__ == "Abandon"
    g = next(g for g in shapes() if RunEncoding(g, Params.of(g)).case == tr.params["graph"])
    concrete = LoopGraph.build(
        [NodeSpec(n.name, attempts=tr.params[f"a_{n.name}"],
                  spend_ceiling=float(tr.params[f"c_{n.name}"]), needs=n.needs,
                  repairs=tuple(u for d, u in g.repair_pairs
                                if d == n.name and f"({d},{u})" in tr.params["R"]))
         for n in g.nodes], repair_budget=tr.params["K"], spend_budget=float(tr.params["B"]))
    after = step(concrete, pre.state_obj, post.event_obj)
    assert after == post.state_obj and after.abandoned == pre.state_obj.abandoned + 1


def test_unbounded_crashes_loop_in_the_real_model_despite_a_finite_budget(tmp_path_factory):
    tr = cex(tmp_path_factory, "G1-unbounded-crashes-loop")
    assert tr.kind == "lasso" and tr.loop_start is not None
    graph = g1.CRASH_GRAPH
    assert graph.spend_budget == 1.0
    states = replay(tr)
    s = states[-1]
    loop = [st.event_obj for st in tr.steps[tr.loop_start + 1:]]
    for _ in range(50):  # the real model goes round as often as crashes happen
        for e in loop:
            s = step(graph, s, e)
    assert not s.ended and s.abandoned == states[-1].abandoned + 50 and s.settled == 0.0
    assert s.attempts_total == states[-1].attempts_total


def test_paid_crashes_bound_needs_its_assumption():
    """Without `charged >= delta` on Abandon, settled >= delta * abandoned is not inductive."""
    graph = LoopGraph.build([NodeSpec("a", attempts=1)], spend_budget=1.0)

    class Unpaid(g1.PaidCrashes):
        def guard_abandon(self, s, ev, g):
            self.in_attempt(s, g, ev.node)

    for sem, want_cex in ((g1.PaidCrashes(), False), (Unpaid(), True)):
        enc = RunEncoding(graph, Params.symbolic(graph).with_constraints(g1.DELTA > 0), sem)

        def inv(s, enc=enc):
            return z3.And(g3.spend_invariant(enc, s), s.settled >= s.ghost("base"),
                          s.ghost("base") >= g1.DELTA * s.abandoned)

        found = check_inductive(enc, inv)
        assert (found is not None) == want_cex
        if found is not None:
            assert found.steps[-1].event == "Abandon(a)"


def test_cli_gives_the_same_results_whatever_the_jobs(capsys):
    """Each obligation is discharged in a process of its own, forked before any Z3 term: the
    counterexamples Z3 picks do not depend on the order the processes finish in, nor on how
    many run at once (here 3, against the full run's one per core)."""
    # the cheapest guarantee: 8 obligations, 4 of them refuted, in record systems and in runs
    # (G6-broken-cap-ignores-repairs); every obligation's counterexample is also compared with
    # the full run's by tests/proofs/test_proofs_deterministic.py
    chosen = ("G6",)
    assert cli.main(["--json", "--only", *chosen, "--jobs", "3"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == [ob.id for ob in OBLIGATIONS if ob.id.startswith(chosen)]
    full = full_report()

    def same(r: dict) -> dict:
        return {k: v for k, v in r.items() if k != "seconds"}

    assert [same(r) for r in rows] == [same(full[r["id"]]) for r in rows]
    assert sum("counterexample" in r for r in rows) >= 4


def test_an_unknown_in_a_forked_process_is_still_a_failure(monkeypatch, capsys):
    def undecided():
        from loopproof.proofs.solver import Unknown
        raise Unknown("a query", "timeout")

    monkeypatch.setattr(obligations, "OBLIGATIONS", (
        Obligation("G1-undecided", "G1", "proved", "times out", undecided),
        Obligation("G5-gated", "G5", "proved", "holds", g5.check_gated)))
    assert cli.main(["--json", "--jobs", "2"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["result"]) for r in rows] == [("G1-undecided", "unknown"),
                                                      ("G5-gated", "proved")]
    assert "timeout" in rows[0]["error"]


@pytest.mark.parametrize("damage", [b"\0" * 4096, b'[{"id": "G1-', b'{"id": 1}', b"[1, 2]"])
def test_a_kept_report_that_is_not_a_report_is_not_found(tmp_path, damage):
    """A zero-filled, cut or foreign file under today's digest: the tests then run the proofs
    again (tests/support/proofs_report.py), never read it as results."""
    from loopproof.proofs import kept

    kept.keep(tmp_path, [{"id": "G6-x", "result": "proved"}])
    assert kept.load(tmp_path) == [{"id": "G6-x", "result": "proved"}]
    kept.path(tmp_path).write_bytes(damage)
    assert kept.load(tmp_path) is None
