"""A refused model call ends the attempt at once (`on_refusal = "end-attempt"`, the default):
the worker, an agent that retries a 402 like litellm's clients do, is stopped as soon as the
calls it had in flight are settled; the gate still judges; the ledger says why (`worker_stopped`,
checked on replay) and `loopproof show` prints it. `"continue"` leaves the worker to decide."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.crash.observables import prefix_excess
from loopproof.engine.record.registry import RecordInvalid
from loopproof.engine.record.replay import replay
from loopproof.engine.system.errors import LedgerCorrupt
from tests.support.engine_child import engine_run
from tests.support.fake_openai import Reply, fake_openai

RETRIER = """
import json, time, urllib.request, urllib.error, os
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
head = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
        "Content-Type": "application/json"}
n = 0
while True:  # retries a 402 forever, as an agent with a generic retry policy does
    body = json.dumps({"model": "m", "max_tokens": 16,
                       "messages": [{"role": "user", "content": "step %d" % n}]}).encode()
    try:
        urllib.request.urlopen(urllib.request.Request(url, body, head), timeout=30).read()
        n += 1
        open("calls.txt", "w").write(str(n))
    except urllib.error.HTTPError as exc:
        doc = json.loads(exc.read())
        open("refusal.json", "w").write(json.dumps({"status": exc.code, **doc}))
        time.sleep(0.2)
"""


def graph(tmp: Path, upstream: str, on_refusal: str | None, timeout_s: int) -> Path:
    (tmp / "agent.py").write_text(RETRIER)
    line = "" if on_refusal is None else f'on_refusal = "{on_refusal}"\n'
    (tmp / "graph.toml").write_text(f"""
[graph]
spend_budget = 1
price = 0.001

[node.agent]
worker = [{json.dumps(sys.executable)}, "agent.py"]
gate = ["/bin/sh", "-c", "test -f calls.txt"]
spend_ceiling = 0.2
timeout_s = {timeout_s}

[node.agent.llm]
upstream = "{upstream}"
price_prompt_per_1k = 1.0
price_completion_per_1k = 2.0
max_tokens = 16
{line}""")
    return tmp / "graph.toml"


def cli(*args: str) -> subprocess.CompletedProcess:
    """`loopproof ARGS` in a process of its own, whose whole environment is PATH."""
    return engine_run(["cli", *args], env={"PATH": os.environ["PATH"]})


def run(tmp: Path, on_refusal: str | None, timeout_s: int = 6) -> tuple[float, list[dict], int]:
    with fake_openai([]) as up:
        up.default = Reply("one two three")
        spec = graph(tmp, up.base_url, on_refusal, timeout_s)
        t0 = time.monotonic()
        proc = cli("run", str(spec), "--ledger", str(tmp / "l.jsonl"), "--json")
        took = time.monotonic() - t0
        sent = len(up.requests)
    assert proc.returncode == 0, proc.stderr  # the gate accepted: the worker made calls
    return took, [json.loads(x) for x in (tmp / "l.jsonl").read_text().splitlines()], sent


@pytest.fixture(scope="module")
def ended(tmp_path_factory) -> tuple[Path, float, list[dict], int]:
    tmp = tmp_path_factory.mktemp("ended")
    return (tmp, *run(tmp, None))  # the default is "end-attempt"


def test_a_refusal_ends_the_attempt_at_once_and_show_says_why(ended):
    """The worker is killed for the refusal, not by its timeout (6 s): deterministic, unlike a
    wall-clock figure (it took 5.8 s of the test's own clock under a loaded machine, where the
    old `took < 5` failed)."""
    tmp_path, _took, recs, sent = ended
    calls = [r for r in recs if r["type"] == "llm_call"]
    refused = [c for c in calls if c["refused"]]
    stop = [r for r in recs if r["type"] == "worker_stopped"]
    assert len(refused) == 1 and len(stop) == 1 and stop[0]["call"] == refused[0]["call"]
    assert stop[0]["cost"] > stop[0]["left"] and len(calls) == sent + 1
    wall = [r for r in recs if r["type"] == "settle" and r.get("what") == "wall_clock"]
    assert wall[0]["killed"] == "refused"  # not "timeout": stopped before timeout_s = 6
    assert prefix_excess(recs) <= 1e-9
    refusal = json.loads((tmp_path / "l.jsonl.work" / "agent" / "refusal.json").read_text())
    assert refusal["status"] == 402 and refusal["error"]["code"] == "budget_exceeded"
    assert set(refusal["error"]) == {"message", "type", "param", "code"}
    assert "the attempt ends here" in refusal["error"]["message"]
    shown = cli("show", str(tmp_path / "l.jsonl"))
    assert shown.returncode == 0, shown.stderr
    want = (f"stopped: model call refused: the attempt may spend {round(stop[0]['left'], 3):g}"
            f" more, the call may cost up to {round(stop[0]['cost'], 3):g}")
    assert want in shown.stdout, shown.stdout
    as_json = json.loads(cli("show", str(tmp_path / "l.jsonl"), "--json").stdout)
    assert as_json["attempts"][0]["stopped"].startswith("model call refused")
    assert as_json["attempts"][0]["outcome"] == "accept"  # the gate still judged


def test_continue_leaves_the_retrying_worker_to_its_timeout(tmp_path: Path):
    took, recs, _ = run(tmp_path, "continue", timeout_s=3)
    refused = [r for r in recs if r["type"] == "llm_call" and r["refused"]]
    assert len(refused) >= 2 and not [r for r in recs if r["type"] == "worker_stopped"]
    wall = [r for r in recs if r["type"] == "settle" and r.get("what") == "wall_clock"]
    assert wall[0]["killed"] == "timeout" and took >= 3


def test_a_worker_stopped_record_the_state_does_not_allow_is_ledger_corrupt(ended):
    recs = ended[2]
    i = next(k for k, r in enumerate(recs) if r["type"] == "worker_stopped")
    replay(recs)  # as written: replays
    for field, value in (("node", "ghost"), ("cost", 0.0), ("left", 5.0)):
        bad = copy.deepcopy(recs)
        bad[i][field] = value
        with pytest.raises(LedgerCorrupt, match="worker_stopped"):
            replay(bad)
    bad = copy.deepcopy(recs)  # not a number at all: no run writes it (the record registry)
    bad[i]["left"] = "x"
    with pytest.raises(RecordInvalid, match="'worker_stopped' record's 'left' is number"):
        replay(bad)
    moved = copy.deepcopy(recs)  # after the attempt's verdict: no attempt is in flight
    rec = moved.pop(i)
    moved.insert(next(k for k, r in enumerate(moved) if r["type"] == "verdict") + 1, rec)
    with pytest.raises(LedgerCorrupt, match="attempt in flight"):
        replay(moved)
