"""`make reproduce` talks like a good tool: one line per step with its headline figure, read from
what the step printed; the full output goes to results/logs/<step>.log."""

from __future__ import annotations

import json

from experiments import reproduce


def test_each_step_has_a_log_and_the_headlines_read_the_figures() -> None:
    plan = reproduce.steps("smoke", 0)
    assert len({st.log for st in plan}) == len(plan)
    assert all(str(st.log).startswith("results/logs/") for st in plan)
    by = {st.name: st for st in plan}
    run = json.dumps({"outcome": "DONE", "attempts_total": 5, "W": 8,
                      "spend": {"settled": 3.4, "budget": 30.0}})
    assert by["example repair"].headline("noise\n" + run) == (
        "DONE: 5 attempts of W = 8, spend 3.4 of B = 30.0")
    audit = json.dumps({"summary": {"tiers": {"2": {"false_accepts": 11, "destroying": 15,
                                                     "equivalent": 0, "undetermined": 0}}}},
                       indent=2)
    assert by["audit of examples/median-command's gate"].headline(audit) == (
        "tier 2: 11 false accepts of 15 destroying (0 equivalent, 0 undetermined)")
    bounds = ('{"explorer_cases": 605295, "explorer_mismatches": 0, "explorer_seconds": 2859.61, '
              '"max_peer_over_w": 4.0, "random_graphs": 300, "worst_equals_w": 300, '
              '"worst_exceeds_w": 0}')  # what `python -m experiments.bounds --json` printed
    assert by["bounds (explorer, random graphs)"].headline(bounds) == (
        "explorer_cases 605295, explorer_mismatches 0, worst_equals_w 300, random_graphs 300")
    crash = json.dumps({"cases": 3, "outcome_recovered": 3, "budget_violations": 0,
                        "lost_verdicts": 0})
    assert by["crash"].headline(crash) == ("cases 3, outcome_recovered 3, budget_violations 0, "
                                           "lost_verdicts 0")
    # what `python -m bench --json` prints on stdout (its "N figures met" line goes to stderr)
    fig = {"target": 5.0, "unit": "s", "value": 1.0, "better": "lower", "ratio_to_target": 0.2}
    report = json.dumps({"bound": {"fan": {"seconds": {**fig, "verdict": "met"}},
                                   "random": {"seconds": {**fig, "verdict": "missed"}}},
                         "machine": {"cores": 2}, "startup": {"help": {**fig, "verdict": "met"}}})
    assert by["bench"].headline(report) == (
        "2 figures met their target, 1 missed (bound.random.seconds)")
    assert by["bench"].headline("bench: not json") == ""
    assert by["notebooks and figures"].headline("crash: executed in 2.0 s -> x\n") == (
        "1 notebooks executed (crash) -> results/notebooks/")


def test_the_mutants_flags_survive_the_csv(tmp_path) -> None:
    """write_csv stores booleans as 1/0; load_results read only "True", so every flag (vacuous,
    self-attesting, flagged, repaired) came back False and the figure could not say why a gate
    was flagged."""
    from experiments.mutants.study import COLUMNS, load_results
    from experiments.results import write_csv, write_json

    row = dict.fromkeys(COLUMNS, 0) | {"gate": "g", "phase": "before", "tier": "1",
                                       "alpha": 1.0, "alpha_low95": 0.5, "alpha_upper95": 1.0,
                                       "vacuous": True, "self_attesting": False,
                                       "flagged": True, "repaired": True}
    write_csv(tmp_path / "gates.csv", [row], COLUMNS)
    write_json(tmp_path / "summary.json", {})
    (back,) = load_results(tmp_path)["rows"]
    assert (back["vacuous"], back["self_attesting"], back["flagged"], back["repaired"]) == (
        True, False, True, True)


def test_reproduce_keeps_the_reports_the_paper_reads_and_ends_with_the_paper() -> None:
    """The paper reads each example's run report and the median audit from results/ (their
    stdout was only in the logs before), and the PDF is the last thing make reproduce builds."""
    plan = reproduce.steps("smoke", 0)
    by = {st.name: st for st in plan}
    assert by["audit of examples/median-command's gate"].save == "results/audit/median.json"
    assert by["example median"].save == "results/examples/median.json"
    assert plan[-1].name == "paper" and plan[-1].argv[1:] == ("-m", "paper", "--pdf")
    assert plan[-1].headline("x\npython -m paper: 17 pages, 2160 result macros, 22 tables, "
                             "5 figures -> paper/build/loopproof.pdf\n") == (
        "17 pages, 2160 result macros, 22 tables, 5 figures -> paper/build/loopproof.pdf")


def test_a_saved_report_is_written_only_when_the_step_succeeded(tmp_path, monkeypatch) -> None:
    import sys
    monkeypatch.chdir(tmp_path)
    ok = reproduce.Step("ok", (sys.executable, "-c", "print('{\"a\": 1}')"), 1,
                        save="results/x/ok.json")
    bad = reproduce.Step("bad", (sys.executable, "-c", "print('{}'); raise SystemExit(3)"), 1,
                         save="results/x/bad.json")
    monkeypatch.setattr(reproduce, "steps", lambda scale, seed: [ok, bad])
    assert reproduce.main(["--scale", "smoke"]) == 1
    assert json.loads((tmp_path / "results/x/ok.json").read_text()) == {"a": 1}
    assert not (tmp_path / "results/x/bad.json").exists()


def test_a_saved_report_names_paths_of_the_checkout_relative_to_it(tmp_path, monkeypatch) -> None:
    """The copy once held "/tmp/rep/results/examples/pipeline.jsonl", the path of the machine
    that ran it, so every clone's rerun rewrote it. Planted fault (seen failing): the report
    saved as printed."""
    import sys
    monkeypatch.chdir(tmp_path)
    report = {"ledger": str(tmp_path / "results/examples/p.jsonl"), "other": "/elsewhere/x",
              "detail": f"File \"{tmp_path}/examples/g.py\", line 1"}
    step = reproduce.Step("ok", (sys.executable, "-c", f"print({json.dumps(json.dumps(report))})"),
                          1, save="results/examples/p.json")
    monkeypatch.setattr(reproduce, "steps", lambda scale, seed: [step])
    assert reproduce.main(["--scale", "smoke"]) == 0
    assert json.loads((tmp_path / "results/examples/p.json").read_text()) == {
        "ledger": "results/examples/p.jsonl", "other": "/elsewhere/x",
        "detail": 'File "examples/g.py", line 1'}


def test_the_estimate_follows_the_scale(tmp_path, monkeypatch) -> None:
    """The estimate printed before a run is for the scale asked for: smaller for smoke, larger
    for paper, and a last run counts only at its own scale (an older flat file was default)."""
    monkeypatch.setattr(reproduce, "TIMES", tmp_path / "reproduce.json")
    total = {sc: sum(reproduce._estimates(reproduce.steps(sc, 0), sc)[0].values())
             for sc in ("smoke", "default", "paper")}
    assert total["smoke"] < total["default"] < total["paper"]
    by = {st.name: st for st in reproduce.steps("smoke", 0)}
    assert by["crash"].study == "crash" and by["bench"].study is None
    assert by["bench"].estimate("smoke") == by["bench"].estimate("paper")  # bench takes no scale
    smoke = reproduce.steps("smoke", 0)
    (tmp_path / "reproduce.json").write_text(json.dumps({"smoke": {st.name: 1.0 for st in smoke}}))
    assert reproduce._estimates(smoke, "smoke") == ({st.name: 1.0 for st in smoke}, True)
    est, timed = reproduce._estimates(reproduce.steps("default", 0), "default")
    assert not timed and sum(est.values()) == total["default"]
    (tmp_path / "reproduce.json").write_text(json.dumps({st.name: 2.0 for st in smoke}))
    assert reproduce._estimates(smoke, "default")[1] is True
    assert reproduce._estimates(smoke, "smoke")[1] is False


def test_the_dry_run_prints_the_scaled_estimate(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(reproduce, "TIMES", tmp_path / "reproduce.json")
    lines = {}
    for sc in ("smoke", "paper"):
        assert reproduce.main(["--dry-run", "--scale", sc]) == 0
        lines[sc] = capsys.readouterr().out.splitlines()[0]
    minutes = {sc: int(line.split("about ")[1].split(" min")[0]) for sc, line in lines.items()}
    assert minutes["smoke"] < minutes["paper"], lines


def test_the_growth_and_mutants_lines_say_what_they_measured() -> None:
    """The growth step said only "ok" and the mutants step printed "false_accepts" twice
    unlabeled."""
    by = {st.name: st for st in reproduce.steps("default", 0)}
    mutants = json.dumps({"after": {"tier1": {"false_accepts": 0, "destroying": 400},
                                    "tier2": {"false_accepts": 225, "destroying": 732}},
                          "before": {"tier1": {"false_accepts": 161, "destroying": 392},
                                     "tier2": {"false_accepts": 426, "destroying": 713}}})
    assert by["mutants"].headline(mutants) == (
        "tier 1: 0 false accepts of 400 destroying after repair (161 of 392 before); "
        "tier 2: 225 false accepts of 732 destroying after repair (426 of 713 before)")
    growth = json.dumps({"accounting": {"runs": 350, "within_policy": 350},
                         "crash": {"cases": 48, "outcome_recovered": 48},
                         "contrasts": {"round_attainment": {"difference": 1.0, "p": 2e-05}}})
    assert by["growth"].headline(growth) == (
        "350/350 runs within policy, crash 48/48 recovered, rounds raise attainment by 1.0 "
        "(p 2e-05)")
    assert by["growth"].headline("not json") == ""
    assert "--quick" in by["bench"].argv  # make bench is the full one


def test_the_last_line_gives_the_total_beside_the_estimate(tmp_path, monkeypatch, capsys) -> None:
    import sys
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(reproduce, "TIMES", tmp_path / "reproduce.json")
    plan = [reproduce.Step(name, (sys.executable, "-c", "pass"), 60) for name in ("a", "b")]
    monkeypatch.setattr(reproduce, "steps", lambda scale, seed: plan)
    assert reproduce.main(["--scale", "smoke"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("reproduce: all 2 steps in ") and "(estimated 2 min;" in last


def test_reproduce_refreshes_the_committed_copy_and_keeps_a_model_run(tmp_path, monkeypatch):
    """The step before the paper compares the run with reference-results/ and refreshes it (its
    line is the comparison's); the stored llm-smoke replies are replayed into
    results/transition-llm unless a model run (make reproduce-llm) is there."""
    plan = reproduce.steps("default", 0)
    by = {st.name: st for st in plan}
    ref = by["reference copy"]
    assert [st.name for st in plan][-2:] == ["reference copy", "paper"]
    assert ref.argv[1:] == ("-m", "paper.reference", "--update", "results")
    assert ref.headline("python -m paper.reference: 30 files identical to reference-results/ "
                        "(...), 0 differ; kept out (time or machine): 5\n  kept out: x\n") == (
        "30 files identical to reference-results/ (...), 0 differ; kept out (time or machine): 5")
    replay = by["transition, model replies replayed"]
    assert "--replay" in replay.argv and replay.skip is not None
    monkeypatch.chdir(tmp_path)
    assert replay.skip() == ""  # nothing there: replay
    (tmp_path / "results" / "transition-llm").mkdir(parents=True)
    (tmp_path / reproduce.MODEL_RUN).write_text(json.dumps({"mode": "replay"}))
    assert replay.skip() == ""
    (tmp_path / reproduce.MODEL_RUN).write_text(json.dumps({"mode": "model"}))
    assert "holds a model run" in replay.skip()


def test_reproduce_replays_the_model_runs_the_copy_keeps(tmp_path, monkeypatch):
    """The model runs kept in reference-results/ (competence checks, the transition run) are
    replayed from their own stored replies at the scale, seed and model they were recorded with;
    a copy without a model run falls back to the stored llm-smoke replies."""
    ref = tmp_path / "reference-results"
    for folder, key, scale in (("competence-1.5b", "1.5b", "llm"),
                               ("transition-llm", "1.5b", "llm-short")):
        (ref / folder).mkdir(parents=True)
        (ref / folder / "manifest.json").write_text(json.dumps({"model": {"key": key}}))
        (ref / folder / "summary.json").write_text(json.dumps({"scale": scale, "seed": 0}))
        (ref / folder / "replies.jsonl").write_text("")
    monkeypatch.setattr(reproduce, "REFERENCE", ref)
    by = {st.name: st for st in reproduce.model_replays()}
    assert set(by) == {"competence 1.5b, model replies replayed",
                       "transition, model replies replayed"}
    t = by["transition, model replies replayed"].argv
    assert t[t.index("--replay") + 1] == str(ref / "transition-llm")
    assert t[t.index("--scale") + 1] == "llm-short" and t[t.index("--llm") + 1] == "1.5b"
    c = by["competence 1.5b, model replies replayed"].argv
    assert "experiments.transition.competence" in c and c[c.index("--scale") + 1] == "llm"
    monkeypatch.setattr(reproduce, "REFERENCE", tmp_path / "none")
    (t2,) = [st.argv for st in reproduce.model_replays()]
    assert t2[t2.index("--replay") + 1] == reproduce.SMOKE_REPLIES
    assert t2[t2.index("--scale") + 1] == "llm-smoke"
