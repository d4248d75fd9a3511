"""Catalog-bounded evolution: each guard holds, and each guard's removal is caught.

Every scenario below returns None when the rule it checks holds and a description of the
violation otherwise. `test_scenarios_hold` runs them on the real code; `test_removing_a_guard_is_
caught` removes one guard at a time (monkeypatch) and asserts that the scenario for that guard
now reports a violation — so none of these tests can pass vacuously.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopproof.engine.policy import evolution
from loopproof.engine.policy.catalog import Catalog, Feature, Knob
from loopproof.engine.policy.evolution import evolve, replay_config
from loopproof.engine.system.errors import BadInput


def catalog(per_round: int = 2, per_idle: int = 1) -> Catalog:
    return Catalog.build(
        knobs=[Knob("lr_scale", 0.25, 2.0, 1.0), Knob("batch", 8, 64, 16),
               Knob("augment", 0, 1, 0)],
        features=[Feature("warmup", {"lr_scale": 0.5}), Feature("bigger_batch", {"batch": 16}),
                  Feature("augment_on", {"augment": 1}),
                  Feature("cool_down", {"lr_scale": -0.5, "batch": -8})],
        agents=["reviewer"], per_round=per_round, per_idle=per_idle)


def run(reply: object, stage: str = "round", config: dict | None = None):
    cat = catalog()
    log: list[dict] = []
    d = evolve(cat, config or cat.defaults(), reply, stage=stage, round=1, recorder=log)
    return cat, d, log


def rejected(log: list[dict], reason: str, entry: str | None = None) -> bool:
    return any(r["type"] == "evolution_rejected" and r["reason"] == reason
               and (entry is None or r["entry"] == entry) for r in log)


# ---- scenarios: None when the rule holds --------------------------------------------------------

def s_unknown_entry() -> str | None:
    _, d, log = run({"features": [{"id": "delete_gate"}, {"id": "warmup"}]})
    if "delete_gate" in d.applied:
        return "an unknown entry was applied"
    if not rejected(log, "unknown_entry", "delete_gate"):
        return "the unknown entry was not recorded as rejected"
    return None


def s_out_of_range() -> str | None:
    # warmup twice over two rounds: 1.0 -> 1.5 -> 2.0 fits; a third would be 2.5 > 2.0.
    cat, d, log = run({"features": [{"id": "warmup"}]}, config={"lr_scale": 2.0, "batch": 16,
                                                                  "augment": 0})
    if d.applied or d.config["lr_scale"] != 2.0:
        return f"an out-of-range change was applied: {d.config}"
    if not rejected(log, "out_of_range", "warmup"):
        return "the out-of-range change was not recorded"
    return None


def s_policy_field_top_level() -> str | None:
    _, d, log = run({"budget": 1e9, "features": []})
    return None if rejected(log, "policy_field", "budget") else "a policy write went unrecorded"


def s_policy_field_in_selection() -> str | None:
    _, d, log = run({"features": [{"id": "warmup", "spend_budget": 1e9}]})
    if d.applied:
        return "a selection carrying a policy field was applied"
    return None if rejected(log, "policy_field", "warmup") else "policy write not recorded"


def s_planner_effect() -> str | None:
    # The planner tries to supply the numeric effect itself.
    _, d, log = run({"features": [{"id": "warmup", "effects": {"lr_scale": 100}}]})
    if d.applied or d.config["lr_scale"] != 1.0:
        return f"a planner-supplied effect was used: {d.config}"
    return None if rejected(log, "planner_effect", "warmup") else "not recorded"


def s_direct_setting() -> str | None:
    _, d, log = run({"knobs": {"lr_scale": 1.75}})
    if d.config["lr_scale"] != 1.0:
        return "a direct knob setting changed the configuration"
    return None if rejected(log, "planner_effect", "knobs") else "direct setting not recorded"


def s_round_limit() -> str | None:
    _, d, log = run({"features": [{"id": "warmup"}, {"id": "bigger_batch"},
                                  {"id": "augment_on"}]})
    if len(d.applied) != 2:
        return f"a round applied {len(d.applied)} changes, limit 2"
    return None if rejected(log, "over_limit", "augment_on") else "over-limit not recorded"


def s_idle_limit() -> str | None:
    _, d, log = run({"features": [{"id": "warmup"}, {"id": "bigger_batch"}]}, stage="idle")
    if len(d.applied) != 1:
        return f"an idle pass applied {len(d.applied)} changes, limit 1"
    return None if rejected(log, "over_limit", "bigger_batch") else "over-limit not recorded"


def s_duplicate() -> str | None:
    _, d, log = run({"features": [{"id": "warmup"}, {"id": "warmup"}]})
    if d.config["lr_scale"] != 1.5:
        return f"one feature was merged twice in a stage: {d.config}"
    return None if rejected(log, "duplicate", "warmup") else "duplicate not recorded"


def s_malformed() -> str | None:
    try:
        _, d, log = run({"features": [{"id": 7}, "warmup", {"id": "x", "evidence": {"a": 1}}]})
    except Exception as exc:  # noqa: BLE001 - a crash on a bad reply is itself the violation
        return f"a malformed selection crashed evolve: {exc!r}"
    n = sum(r["type"] == "evolution_rejected" and r["reason"] == "malformed" for r in log)
    return None if n == 3 else f"{n} of 3 malformed selections recorded"


SCENARIOS: dict[str, Callable[[], str | None]] = {
    "unknown_entry": s_unknown_entry, "out_of_range": s_out_of_range,
    "policy_top": s_policy_field_top_level, "policy_selection": s_policy_field_in_selection,
    "planner_effect": s_planner_effect, "direct_setting": s_direct_setting,
    "round_limit": s_round_limit, "idle_limit": s_idle_limit, "duplicate": s_duplicate,
    "malformed": s_malformed,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenarios_hold(name: str) -> None:
    assert SCENARIOS[name]() is None


def _without(guard: Callable) -> tuple:
    return tuple(g for g in evolution.SELECTION_GUARDS if g is not guard)


# guard removed -> scenarios that must then report a violation
MUTANTS: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], tuple[str, ...]]] = {
    "known_entry": (lambda mp: mp.setattr(evolution, "SELECTION_GUARDS",
                                          _without(evolution.guard_known_entry)),
                    ("unknown_entry",)),
    "range": (lambda mp: mp.setattr(evolution, "SELECTION_GUARDS",
                                    _without(evolution.guard_range)), ("out_of_range",)),
    "policy_field": (lambda mp: mp.setattr(evolution, "SELECTION_GUARDS",
                                           _without(evolution.guard_policy_field)),
                     ("policy_selection",)),
    "planner_effect": (lambda mp: mp.setattr(evolution, "SELECTION_GUARDS",
                                             _without(evolution.guard_planner_effect)),
                       ("planner_effect",)),
    "duplicate": (lambda mp: mp.setattr(evolution, "SELECTION_GUARDS",
                                        _without(evolution.guard_duplicate)), ("duplicate",)),
    "shape": (lambda mp: mp.setattr(evolution, "SELECTION_GUARDS",
                                    _without(evolution.guard_shape)), ("malformed",)),
    "limit": (lambda mp: mp.setattr(evolution, "guard_limit", lambda *a: None),
              ("round_limit", "idle_limit")),
    "reply_keys": (lambda mp: mp.setattr(evolution, "guard_reply_keys", lambda parsed: []),
                   ("policy_top", "direct_setting")),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_removing_a_guard_is_caught(mutant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    remove, must_fail = MUTANTS[mutant]
    remove(monkeypatch)
    for name in must_fail:
        try:
            outcome = SCENARIOS[name]()
        except Exception as exc:  # noqa: BLE001 - a crash also counts as caught
            outcome = repr(exc)
        assert outcome is not None, f"removing guard {mutant!r} went unnoticed by {name!r}"


def test_every_guard_has_a_mutant() -> None:
    covered = {"known_entry", "range", "policy_field", "planner_effect", "duplicate", "shape"}
    names = {g.__name__.removeprefix("guard_") for g in evolution.SELECTION_GUARDS}
    assert names == covered


# ---- records, inert proposals, replay -----------------------------------------------------------

def test_stage_commits_in_one_record_and_replays() -> None:
    cat = catalog()
    log: list[dict] = []
    cfg = cat.defaults()
    d1 = evolve(cat, cfg, {"features": [{"id": "warmup"}, {"id": "bigger_batch"}]},
                stage="round", round=1, recorder=log)
    d2 = evolve(cat, d1.config, json.dumps({"features": [{"id": "augment_on"}]}),
                stage="idle", round=1, recorder=log)
    commits = [r for r in log if r["type"] in ("stage_done", "idle_finished")]
    assert [c["type"] for c in commits] == ["stage_done", "idle_finished"]
    assert d2.config == {"augment": 1, "batch": 32, "lr_scale": 1.5}
    assert replay_config(cat, log) == d2.config
    # A crash before the idle commit: the replayed configuration is the round's, not half of it.
    assert replay_config(cat, log[: log.index(commits[1])]) == d1.config


def test_replay_refuses_a_forged_commit() -> None:
    cat = catalog()
    forged = [{"type": "stage_done", "round": 1, "applied": ["warmup"],
               "config": {"augment": 0, "batch": 16, "lr_scale": 9.0}}]
    with pytest.raises(BadInput, match="differs"):
        replay_config(cat, forged)
    with pytest.raises(BadInput, match="not in the catalogue"):
        replay_config(cat, [{"type": "stage_done", "applied": ["rm_rf"]}])


def test_agent_suggestions_are_inert_records() -> None:
    _, d, log = run({"agents": [{"id": "reviewer", "rationale": "second pair of eyes"},
                                {"id": "shell_with_sudo"}]})
    props = [r for r in log if r["type"] == "agent_proposal"]
    assert props == [{"type": "agent_proposal", "stage": "round", "round": 1, "id": "reviewer",
                      "rationale": "second pair of eyes", "status": "pending",
                      "executable": False}]
    assert rejected(log, "unknown_agent", "shell_with_sudo")
    assert d.config == catalog().defaults()


@pytest.mark.parametrize("reply", ["not json", b"[1, 2]", None, 42])
def test_unparseable_replies_are_rejected_and_recorded(reply: object) -> None:
    _, d, log = run(reply)
    assert d.applied == () and rejected(log, "malformed", "reply")
    assert log[-1]["type"] == "stage_done"


def test_catalog_rejects_knobs_that_are_policy_fields() -> None:
    with pytest.raises(BadInput, match="policy field"):
        Catalog.build([Knob("budget", 0, 10, 1)], [Feature("f", {"budget": 1})])
    with pytest.raises(BadInput, match="unknown knob"):
        Catalog.build([Knob("a", 0, 10, 1)], [Feature("f", {"b": 1})])
    with pytest.raises(BadInput, match="not valid"):
        Catalog.build([Knob("a", 0, 10, 11)], [])
    cat = catalog()
    with pytest.raises(TypeError):
        cat.features["evil"] = Feature("evil", {"lr_scale": 9})  # type: ignore[index]  # the write refused


def test_command_planner(tmp_path: Path) -> None:
    script = tmp_path / "planner.py"
    script.write_text("import json, sys\nctx = json.load(sys.stdin)\n"
                      "print(json.dumps({'features': [{'id': ctx['features'][0]}],"
                      " 'budget': 5}))\n")
    log: list[dict] = []
    planner = evolution.command_planner([sys.executable, str(script)], tmp_path)
    d = evolution.plan_stage(catalog(), catalog().defaults(), planner, stage="round", round=3,
                             recorder=log)
    assert d.applied == ("augment_on",)
    assert rejected(log, "policy_field", "budget")
    failing = evolution.command_planner([sys.executable, "-c", "raise SystemExit(1)"], tmp_path)
    d = evolution.plan_stage(catalog(), catalog().defaults(), failing, stage="idle", round=3)
    assert d.applied == () and d.rejected[0].reason == "malformed"


# ---- property: whatever the planner says, the configuration stays inside the catalogue ----------

ids = st.sampled_from(["warmup", "bigger_batch", "augment_on", "cool_down", "nope", "budget",
                       "goals"])
selection = st.one_of(
    st.fixed_dictionaries({"id": ids}),
    st.fixed_dictionaries({"id": ids, "delta": st.floats(-5, 5)}),
    st.fixed_dictionaries({"id": ids, "scope": st.text(max_size=3)}),
)
replies = st.fixed_dictionaries(
    {"features": st.lists(selection, max_size=5)},
    optional={"budget": st.integers(), "knobs": st.just({"batch": 64}), "misc": st.none()})


@given(st.lists(st.tuples(st.sampled_from(["round", "idle"]), replies), max_size=6))
def test_any_planner_stays_inside_the_catalogue(stages: list) -> None:
    cat = catalog()
    log: list[dict] = []
    cfg = cat.defaults()
    for rnd, (stage, reply) in enumerate(stages):
        d = evolve(cat, cfg, reply, stage=stage, round=rnd, recorder=log)
        assert len(d.applied) <= cat.limit(stage)
        assert all(cat.knobs[k].holds(v) for k, v in d.config.items())
        expected = dict(cfg)
        for fid in d.applied:
            for knob, delta in cat.features[fid].effects.items():
                expected[knob] = round(expected[knob] + delta, 12)
        assert d.config == expected  # only code-owned effects, nothing else
        # every request is accounted for: applied or rejected-and-recorded
        top_level = len(evolution.guard_reply_keys(reply))
        assert len(d.applied) + len(d.rejected) - top_level == len(reply["features"])
        assert sum(r["type"] == "evolution_rejected" and r["round"] == rnd for r in log) == \
            len(d.rejected)
        cfg = d.config
    assert replay_config(cat, log) == cfg


def test_records_go_through_the_hash_chained_ledger(tmp_path: Path) -> None:
    from loopproof.engine.record.ledger import Ledger, verify

    path = tmp_path / "ledger.jsonl"
    cat = catalog()
    with Ledger.create(path, {"type": "run", "note": "evolution test"}) as led:
        d = evolve(cat, cat.defaults(), {"features": [{"id": "warmup"}, {"id": "nope"}],
                                         "scope": "everything"},
                   stage="round", round=1, recorder=led)
    assert verify(path).status == "verified"
    with Ledger.open(path) as led:
        types = [r["type"] for r in led.records]
        assert types == ["run", "evolution_rejected", "evolution_rejected", "stage_done"]
        assert {r["reason"] for r in led.records if r["type"] == "evolution_rejected"} == \
            {"policy_field", "unknown_entry"}
        assert replay_config(cat, led.records) == d.config == {**cat.defaults(), "lr_scale": 1.5}


def test_every_pinned_policy_field_is_refused() -> None:
    from loopproof.engine.policy.pin import FIELDS

    for f in FIELDS:
        table, name = f.name.split(".")
        for reply in ({f.name: 1}, {table: {name: 1}},
                      {"features": [{"id": "warmup", name: 1}]}):
            _, d, log = run(reply)
            assert d.applied == () and rejected(log, "policy_field"), (f.name, reply)
