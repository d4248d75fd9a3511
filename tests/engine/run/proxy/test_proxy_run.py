"""Model calls from a real command worker under `loopproof run`: the runner starts the attempt's
proxy, the worker reaches it through the bridge with the openai client, and the upstream key is
nowhere the worker can look. Then SIGKILL the engine in the middle of a call and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments.crash.observables import prefix_excess
from loopproof.engine import cli
from loopproof.engine.run.proxy.access import socket_prefix
from tests.support.engine_child import engine_run, started
from tests.support.fake_apis import fake_upstream
from tests.support.fake_openai import Reply, fake_openai
from tests.support.oracles import records

KEY = "sk-live-7d1e0c9a55b2-upstream-secret"
AGENT = """
import json, os, sys
import openai
client = openai.OpenAI(max_retries=0)
out = {"base_url": os.environ.get("OPENAI_BASE_URL"), "calls": 0, "refused": 0}
for i in range(int(sys.argv[1])):
    try:
        r = client.chat.completions.create(model="fake-model", max_tokens=16,
                                           messages=[{"role": "user", "content": "step %d" % i}])
        out["calls"] += 1
        out["last"] = r.choices[0].message.content
    except openai.APIStatusError as exc:
        out["refused"] += 1
        out["status"] = exc.status_code
        break
open("agent.json", "w").write(json.dumps(out))
"""
ATTACKER = """
import glob, json, os, sys, urllib.request
env = os.environ
def call(url, body, head):  # one call in each API, as the agents make them, first
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json", **head})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, resp.read().decode()
calls = [
    call(env["ANTHROPIC_BASE_URL"] + "/v1/messages?beta=true",
         {"model": "claude-fake", "max_tokens": 128000, "stream": True,
          "messages": [{"role": "user", "content": "hi"}]},
         {"x-api-key": env["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01"}),
    call(env["OPENAI_BASE_URL"] + "/responses",
         {"model": "gpt-fake", "input": "hi", "stream": True, "store": False},
         {"Authorization": "Bearer " + env["OPENAI_API_KEY"]}),
    call(env["OPENAI_BASE_URL"] + "/chat/completions",
         {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
         {"Authorization": "Bearer " + env["OPENAI_API_KEY"]})]
key = open(sys.argv[1]).read().strip().encode()  # the test's needle, outside the run
found = []
def scan(path):
    try:
        with open(path, "rb") as f:
            if key in f.read():
                found.append(path)
    except OSError:
        pass
scan("/proc/self/environ")
pid = os.getppid()
chain = []
while pid > 1 and len(chain) < 6:  # the bridge, the engine, and whatever started it
    chain.append(pid)
    scan(f"/proc/{pid}/environ")
    scan(f"/proc/{pid}/cmdline")
    try:
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except OSError:
        break
for p in glob.glob("/proc/[0-9]*/environ"):
    scan(p)
here = os.getcwd()  # <ledger>.work/<node>: the ledger and its side files are up there
run_dir = os.path.dirname(os.path.dirname(here))
for root, dirs, files in os.walk(run_dir):
    for f in files:
        scan(os.path.join(root, f))
if any(key.decode() in v for v in os.environ.values()):
    found.append("os.environ")
open("attack.json", "w").write(json.dumps({
    "found": found, "chain": chain, "api_key": os.environ.get("OPENAI_API_KEY", ""),
    "anthropic_key": env.get("ANTHROPIC_API_KEY"), "anthropic_url": env.get("ANTHROPIC_BASE_URL"),
    "openai_url": env.get("OPENAI_BASE_URL"), "calls": calls}))
"""
GATE = "import sys, os; sys.exit(0 if os.path.exists(sys.argv[1]) else 1)\n"


def graph(tmp: Path, upstream: str, argv: list[str], output: str, *, budget: float = 5.0,
          ceiling: float = 5.0, timeout_s: int = 60, on_refusal: str = "continue") -> Path:
    """A one-node graph; `on_refusal = "continue"` by default: these agents write their result
    after the 402 (tests/engine/run/proxy/test_refusal.py covers "end-attempt")."""
    (tmp / "gate.py").write_text(GATE)
    argv_toml = json.dumps([sys.executable, *argv])
    (tmp / "graph.toml").write_text(f"""
[graph]
spend_budget = {budget}
price = 0.001

[node.agent]
worker = {argv_toml}
gate = {json.dumps([sys.executable, "gate.py", output])}
spend_ceiling = {ceiling}
timeout_s = {timeout_s}

[node.agent.llm]
upstream = "{upstream}"
api_key_env = "UPSTREAM_KEY"
price_prompt_per_1k = 1.0
price_completion_per_1k = 2.0
max_tokens = 16
on_refusal = "{on_refusal}"
""")
    return tmp / "graph.toml"


ENV = {"PATH": os.environ["PATH"], "UPSTREAM_KEY": KEY}  # the engine's whole environment


def loopproof(*args: str, **kw) -> subprocess.Popen:
    """`loopproof ARGS` started cold, for the test that reads the engine's own process from its
    worker (/proc/PID/environ and cmdline of each ancestor)."""
    return subprocess.Popen([sys.executable, "-m", "loopproof.engine.cli", *args], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def test_a_command_worker_calls_through_the_proxy_until_the_budget_refuses(tmp_path: Path):
    (tmp_path / "agent.py").write_text(AGENT)
    with fake_openai([]) as up:
        up.default = Reply("fine " * 15 + "fine")
        spec = graph(tmp_path, up.base_url, [str(tmp_path / "agent.py"), "1000"], "agent.json",
                     budget=0.5, ceiling=0.5)
        proc = engine_run(["cli", "run", str(spec), "--ledger", str(tmp_path / "l.jsonl"),
                           "--json"], env=ENV)
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        n_requests = len(up.requests)
        auths = {r["auth"] for r in up.requests}
    report = json.loads(out)
    agent = json.loads((tmp_path / "l.jsonl.work" / "agent" / "agent.json").read_text())
    assert agent["base_url"].startswith("http://127.0.0.1:")
    assert agent["calls"] == n_requests > 1 and agent["refused"] == 1 and agent["status"] == 402
    assert auths == {f"Bearer {KEY}"}
    recs = records(tmp_path / "l.jsonl")
    # in the order the calls arrived: a call's record is written after its answer, so the
    # refused last call may be recorded before the one the agent made just before it
    calls = sorted((r for r in recs if r["type"] == "llm_call"), key=lambda r: int(r["call"][1:]))
    assert len(calls) == n_requests + 1 and calls[-1]["refused"] is True
    assert prefix_excess(recs) <= 1e-9 and report["spend"]["settled"] <= 0.5


def test_the_upstream_key_is_nowhere_the_worker_can_look(tmp_path: Path):
    """The worker calls in each API through the variables the engine set (ANTHROPIC_BASE_URL
    without /v1, the attempt's token as ANTHROPIC_API_KEY and OPENAI_API_KEY), then looks for
    the key everywhere it can."""
    (tmp_path / "attack.py").write_text(ATTACKER)
    needle = tmp_path.parent / f"{tmp_path.name}.needle"  # outside the run folder
    needle.write_text(KEY)
    with fake_upstream([Reply("one two"), Reply("three"), Reply("four")]) as up:
        spec = graph(tmp_path, up.base_url, [str(tmp_path / "attack.py"), str(needle)],
                     "attack.json")
        proc = loopproof("run", str(spec), "--ledger", str(tmp_path / "l.jsonl"))
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        sent = list(up.requests)
    report = json.loads((tmp_path / "l.jsonl.work" / "agent" / "attack.json").read_text())
    assert report["found"] == [], report
    assert report["anthropic_key"] == report["api_key"]
    assert report["openai_url"] == report["anthropic_url"] + "/v1"
    assert [status for status, _ in report["calls"]] == [200, 200, 200]
    assert "message_stop" in report["calls"][0][1]
    assert "response.completed" in report["calls"][1][1]
    assert [r["path"] for r in sent] == ["/v1/messages?beta=true", "/v1/responses",
                                         "/v1/chat/completions"]
    for r in sent:  # the key only in its API's auth header; the worker's token nowhere
        assert [k for k, v in r["headers"].items() if KEY in v] == [
            "x-api-key" if r["path"].startswith("/v1/messages") else "authorization"]
        assert report["api_key"] not in json.dumps(r["headers"]) + r["raw"].decode()
    calls = [c for c in records(tmp_path / "l.jsonl") if c["type"] == "llm_call"]
    assert [c["usage"] for c in calls] == ["reported"] * 3
    assert calls[0]["completion_tokens"] == 2 and calls[0]["reserved"] > calls[0]["charged"]
    assert cli.main(["verify", str(tmp_path / "l.jsonl")]) == 0  # in this process
    # in its sandbox the worker's parent, the bridge, is PID 2 of its own PID namespace, under
    # bwrap's init (PID 1): no process of the engine is there to read (without a sandbox it
    # reads their environ instead)
    assert report["chain"] == [2]
    assert report["api_key"].startswith("lp-") and KEY not in report["api_key"]
    # and, from outside: no file of the run holds the key
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert KEY.encode() not in p.read_bytes(), p


def test_sigkill_of_the_engine_mid_call_charges_the_call_and_never_replays_it(tmp_path: Path):
    (tmp_path / "agent.py").write_text(AGENT)
    with fake_openai([Reply("slow", delay_s=60)]) as up:
        up.default = Reply("quick")
        spec = graph(tmp_path, up.base_url, [str(tmp_path / "agent.py"), "1"], "agent.json",
                     budget=10.0)  # room for the re-run after the crash's charge
        ledger = tmp_path / "l.jsonl"
        with started(["cli", "run", str(spec), "--ledger", str(ledger)], env=ENV) as eng:
            assert up.arrived.wait(60), "the call never reached the upstream"
            os.kill(eng.pid, signal.SIGKILL)
            assert eng.wait(10) == -signal.SIGKILL
        before = records(ledger)
        open_calls = [r for r in before if r["type"] == "reserve" and r.get("what") == "llm"]
        assert len(open_calls) == 1 and not [r for r in before if r["type"] == "settle"
                                             and r.get("what") == "llm"]
        t0 = time.monotonic()
        res = engine_run(["cli", "resume", "--ledger", str(ledger), "--json"], env=ENV)
        assert res.returncode == 0, res.stderr
        out = res.stdout
        assert time.monotonic() - t0 < 50  # it did not wait for the killed call
        n_requests = len(up.requests)
    recs = records(ledger)
    assert prefix_excess(recs) <= 1e-9
    (abandon,) = [r for r in recs if r["type"] == "abandon"]
    wall = [r for r in before if r["type"] == "reserve" and r["what"] == "wall_clock"][0]
    assert abandon["charged"] >= open_calls[0]["amount"] + wall["amount"] - 1e-6
    # the engine sent nothing on its own: every upstream request is a call a worker made
    reserves = [r for r in recs if r["type"] == "reserve" and r.get("what") == "llm"]
    assert n_requests == len(reserves) == 2
    resumed_at = [r["type"] for r in recs].index("resumed")
    assert resumed_at < recs.index(reserves[1])  # the second is the re-run's own call
    assert json.loads(out)["outcome"] == "DONE" and json.loads(out)["outcome_unknown"] == 1
    # the killed engine's socket folder was removed when the re-run's proxy started
    assert not list(Path(tempfile.gettempdir()).glob(socket_prefix(ledger) + "*"))
