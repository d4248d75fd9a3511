"""The experiment end to end: same seed same bytes, the notebook at smoke scale, the CLI's bad
input, and a run with the chat coder against the local fake server."""

from __future__ import annotations

import json

from experiments.transition import study as transition
from experiments.transition.study import Scale, main, run_experiment
from tests.experiments.conftest import TINY_TRANSITION as TINY
from tests.support.fake_openai import fake_openai
from tests.support.notebooks import execute_notebook


def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_same_seed_same_bytes_with_and_without_workers(tmp_path, serial_transition):
    """Two workers against the serial run the session shares (tests/experiments/conftest.py:
    the same scale and seed, workers=1; test_headlines.py reads it too)."""
    a = tmp_path / "a"
    s1 = run_experiment(scale_name="smoke", seed=3, out=a, workers=2, scale=TINY)
    b, s2 = serial_transition
    assert s1 == s2
    fa, fb = _files(a), _files(b)
    assert sorted(fa) == ["common_state.csv", "common_state.json", "prospective.csv",
                          "prospective.json", "starts.json", "summary.json",
                          "trajectories.csv", "trajectories.json"]
    assert fa == fb
    summary = json.loads(fa["summary.json"])
    assert summary["trajectories"] == 2 * 6 * 1 and summary["revisions"] == 2 * 6 * 2
    assert len(summary["current_correct"]) == 2 and set(summary["alpha"]) == set(
        transition.CONDITIONS)
    starts = json.loads(fa["starts.json"])["tasks"]
    assert all(len(t["correct"]["hash"]) == 64 and t["wrong"] for t in starts)
    assert b"seconds" not in fa["trajectories.json"]


def test_smoke_run_and_its_notebook(tmp_path):
    out = tmp_path / "transition"
    assert main(["--scale", "smoke", "--seed", "0", "--out", str(out), "--json"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trajectories"] == 3 * 6 * 2 and summary["revisions"] == 3 * 6 * 2 * 3
    h = summary["stale_vs_current_harm"]
    assert h["stale"][1] == h["current"][1] == 3 * 2
    assert set(summary["guarded_vs_baseline"]) >= {"harm_from_correct_starts",
                                                   "repair_from_wrong_starts",
                                                   "unsafe_completion", "sound_completion"}
    execute_notebook("transition", tmp_path)  # the results root; the notebook adds /transition
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
