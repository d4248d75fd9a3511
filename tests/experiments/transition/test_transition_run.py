"""The experiment end to end: same seed same bytes through the command line, the notebook on the
search coder's run, the CLI's bad input, and a run with the chat coder against the local fake
server."""

from __future__ import annotations

import json

from experiments.transition import study as transition
from experiments.transition.study import Scale, main, run_experiment
from tests.experiments.conftest import TINY_TRANSITION as TINY
from tests.support.fake_openai import fake_openai


def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_same_seed_same_bytes_with_and_without_workers(tmp_path, monkeypatch, serial_transition):
    """The command line with two workers against the serial run the session shares
    (tests/experiments/conftest.py: the same scale and seed, workers=1; test_headlines.py and
    the notebook tests read it too). The smoke scale is TINY here: the same code path, a sixth
    of the candidate runs."""
    monkeypatch.setitem(transition.SCALES, "smoke", TINY)
    a = tmp_path / "a"
    assert main(["--scale", "smoke", "--seed", "3", "--workers", "2", "--out", str(a),
                 "--json"]) == 0
    b, s2 = serial_transition
    fa, fb = _files(a), _files(b)
    assert sorted(fa) == ["common_state.csv", "common_state.json", "prospective.csv",
                          "prospective.json", "starts.json", "summary.json",
                          "trajectories.csv", "trajectories.json"]
    assert fa == fb
    summary = json.loads(fa["summary.json"])
    assert summary == json.loads(json.dumps(s2))  # what run_experiment returned, as written
    assert summary["trajectories"] == 2 * 6 * 1 and summary["revisions"] == 2 * 6 * 2
    assert len(summary["current_correct"]) == 2 and set(summary["alpha"]) == set(
        transition.CONDITIONS)
    starts = json.loads(fa["starts.json"])["tasks"]
    assert all(len(t["correct"]["hash"]) == 64 and t["wrong"] for t in starts)
    assert b"seconds" not in fa["trajectories.json"]


def test_the_notebook_on_the_search_coders_run(transition_results):
    """The notebook on the search coder's results (the session's results root,
    tests/experiments/conftest.py: the notebook executed there on the serial run and the
    model's replayed one; test_transition_report.py checks what it drew for each coder)."""
    out = transition_results / "transition"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scale"] == "smoke" and summary["seed"] == 3
    assert summary["trajectories"] == 2 * 6 * 1 and summary["revisions"] == 2 * 6 * 1 * 2
    h = summary["stale_vs_current_harm"]
    assert h["stale"][1] == h["current"][1] == 2 * 1
    assert set(summary["guarded_vs_baseline"]) >= {"harm_from_correct_starts",
                                                   "repair_from_wrong_starts",
                                                   "unsafe_completion", "sound_completion"}
    assert (out / "transition.png").stat().st_size > 10_000


def test_openai_coder_without_a_server_is_bad_input_and_writes_nothing(tmp_path, capsys,
                                                                       monkeypatch):
    monkeypatch.delenv("LOOPPROOF_OPENAI_BASE_URL", raising=False)
    out = tmp_path / "never"
    assert main(["--coder", "openai", "--model", "m", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "base_url" in err and "fix:" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_run_with_the_chat_coder_against_the_fake_server(tmp_path):
    keep = json.dumps({"action": "keep"})
    with fake_openai([keep] * 200) as server:
        spec = {"kind": "openai", "base_url": server.base_url, "model": "fake", "price": 0.0,
                "budget": 1.0}
        summary = run_experiment(scale_name="smoke", seed=0, out=tmp_path / "o", workers=2,
                                 coder_spec=spec, scale=Scale(1, 1, 1, 100, 100))
    assert summary["coder"] == "openai"
    # every request reached the fake server: 6 trajectories + 2 branches + 2 baseline runs
    # + 2 guarded runs, one revision each
    assert len(server.requests) == 12
    assert summary["current_correct"] == [0.0]  # Keep from a wrong start stays wrong


def test_a_model_run_that_runs_out_of_budget_exits_4_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "o"
    with fake_openai([json.dumps({"action": "keep"})] * 5) as server:
        code = main(["--coder", "openai", "--base-url", server.base_url, "--model", "m",
                     "--price", "1000", "--budget", "0.5", "--scale", "smoke", "--out", str(out)])
    assert code == 4 and not out.exists()
    assert server.requests == []  # the first reservation already did not fit
    assert "budget exhausted" in capsys.readouterr().err
