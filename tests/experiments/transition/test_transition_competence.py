"""The competence check's scoring (experiments/transition/competence.py) without a model: stored
replies through the coder's parser, judged on every suite of the task; pass@1 with an exact
interval; and the stored model replies of the committed reference copy replayed byte for byte."""

from __future__ import annotations

import json

import pytest

from experiments.transition import competence
from experiments.transition.coders import OpenAICoder
from experiments.transition.tasks import select_tasks
from tests.support.paths import REPO as ROOT

REFERENCE = ROOT / "reference-results"


@pytest.fixture(scope="module")
def task():
    return select_tasks(1)[0]  # HumanEval/0, has_close_elements


def test_a_correct_function_passes_and_a_wrong_one_fails_every_suite(task):
    stub = competence.stub(task)
    assert "def has_close_elements" in stub and "return" not in stub  # from scratch: no body
    good = ("```python\ndef has_close_elements(numbers, threshold):\n"
            "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)\n"
            "               for j, b in enumerate(numbers) if i != j)\n```")
    # passes the visible examples' shape but not the hidden suite: <= instead of <
    wrong = good.replace("< threshold", "<= threshold + 1")
    replies = (f"STATUS: DONE\n{good}", f"STATUS: DONE\n{wrong}", "Here it is: return True",
               "KEEP")
    rows = [competence.score(task, OpenAICoder.parse(r, stub, task.entry)) for r in replies]
    assert [r["passed"] for r in rows] == [True, False, False, False]
    assert [r["valid"] for r in rows] == [True, True, False, True]
    assert rows[2]["why"] == "not_an_action" and rows[3]["action"] == "keep"


def test_pass_at_1_has_an_exact_interval_never_a_degenerate_one():
    rows = [{"task": f"T{i}", "valid": True, "why": "", "action": "patch", "passed": i < 3}
            for i in range(8)]
    s = competence.summarize(rows, model="m", scale="llm", seed=0)
    assert (s["passed"], s["tasks"], s["pass_at_1"]) == (3, 8, 0.375)
    assert s["pass_at_1_ci95"] == [0.0852, 0.7551] and "Clopper-Pearson" in s["interval_method"]
    for k in (0, 8):  # all fail, all pass: the exact interval still has width
        lo, hi = competence.summarize([{**r, "passed": i < k} for i, r in enumerate(rows)],
                                      model="m", scale="llm", seed=0)["pass_at_1_ci95"]
        assert lo < hi
    assert competence.summarize([], model="m", scale="llm", seed=0)["pass_at_1_ci95"] is None


@pytest.mark.parametrize("key", ["1.5b"])  # the 0.5B set: make reproduce replays it
def test_the_stored_competence_replies_replay_to_the_same_summary(key, tmp_path):
    stored = REFERENCE / f"competence-{key}"
    summary = json.loads((stored / "summary.json").read_text())
    out = tmp_path / "replay"
    assert competence.main(["--llm", key, "--replay", str(stored), "--scale", summary["scale"],
                            "--seed", str(summary["seed"]), "--out", str(out)]) == 0
    assert (out / "summary.json").read_bytes() == (stored / "summary.json").read_bytes()
    assert (out / "replies.jsonl").read_bytes() == (stored / "replies.jsonl").read_bytes()
