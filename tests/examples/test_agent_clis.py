"""examples/claude-code and examples/codex under `loopproof run`: the real Claude Code and Codex
CLIs (the versions `make agents-cli` pins into build/agents), each against its example's scripted
stand-in upstream, which requires the upstream key and logs the usage of every request it
answers (the ground truth of spend). The graphs are the examples', with the lines a test needs
changed (the upstream's port, the CLI's path, and what the test is about).

- Honest task: DONE under the `calls` gate; what the upstream counted equals what the ledger
  settled, within c_v; every call asked the node's max_tokens (not the CLI's 128,000, not
  Codex's none); the upstream key is in no environment a process of the worker's sandbox sees,
  in no file of the run (ledger, stored bodies, workspace, the CLI's own logs); the ledger
  replays and verifies.
- A c_v the second call does not fit: one call reaches the upstream, the second is refused, the
  attempt ends within 45 s of the refusal, and the upstream counted no more than c_v (and B).
- Under `on_refusal = "continue"` the CLI alone decides: the refusal's shape (402
  billing_error; 429 insufficient_quota) makes it stop at once, with no retry.
- A stream that breaks off after its first event is charged its reservation; the CLI asks again
  (Claude Code without streaming) and the run still ends DONE.
- A stream longer than the node's max tokens is cut by the proxy there and charged its
  reservation, not the upstream's (unbelievable) usage.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopproof.engine import cli
from tests.support.engine_child import engine_run
from tests.support.paths import REPO

AGENTS_CLI = REPO / "build" / "agents"  # make agents-cli
KEY = "sk-upstream-7d41c0e9b2-NEVER-IN-THE-WORKER"
SPY = "cat /proc/[0-9]*/environ > seen-by-worker 2>/dev/null; exec \"$@\""


@dataclass(frozen=True)
class Agent:
    """One example: its folder, its worker's program (in build/agents), the variable of its
    upstream key, its token variable inside the sandbox, and how its API reports usage."""

    example: str
    program: str
    key_env: str
    token_env: str

    @property
    def folder(self) -> Path:
        return REPO / "examples" / self.example

    def llm(self) -> dict[str, Any]:
        spec = tomllib.loads((self.folder / "graph.toml").read_text())
        return spec["node"]["write"]["llm"]

    def cost(self, usage: dict[str, Any]) -> float:
        """What the upstream's usage costs at the example's prices."""
        p = self.llm()
        if self.example == "claude-code":  # input_tokens excludes the cache's
            tokens = {"price_prompt_per_1k": usage["input_tokens"],
                      "price_cache_write_per_1k": usage["cache_creation_input_tokens"],
                      "price_cache_read_per_1k": usage["cache_read_input_tokens"],
                      "price_completion_per_1k": usage["output_tokens"]}
        else:  # cached_tokens are part of input_tokens; reasoning is part of output_tokens
            cached = usage["input_tokens_details"]["cached_tokens"]
            tokens = {"price_prompt_per_1k": usage["input_tokens"] - cached,
                      "price_cache_read_per_1k": cached,
                      "price_completion_per_1k": usage["output_tokens"]}
        return sum(n * p[k] / 1000 for k, n in tokens.items())


CLAUDE = Agent("claude-code", "node_modules/.bin/claude", "CLAUDE_UPSTREAM_KEY",
               "ANTHROPIC_API_KEY")
CODEX = Agent("codex", "bin/codex-worker", "CODEX_UPSTREAM_KEY", "OPENAI_API_KEY")
AGENTS = [pytest.param(CLAUDE, id="claude-code"), pytest.param(CODEX, id="codex")]
# c_v that fits the first call's reservation but not the second's once the first is charged
# (the worker's calls share c_v with its 0.12 of wall clock, 120 s x 0.001): Claude Code's first
# call reserves ~0.205 (its ~50 kB body at the cache-write price) and is charged ~0.046, the
# second reserves ~0.207, so c_v in [0.326, 0.372); Codex's reserves ~0.058 (~38 kB) and is
# charged ~0.012, the second ~0.059, so c_v in [0.179, 0.191)
SMALL = {"claude-code": 0.35, "codex": 0.184}


@dataclass
class Run:
    code: int
    recs: list[dict[str, Any]]
    seen: list[dict[str, Any]]  # what the upstream answered, with the usage it reported
    ended: float
    stderr: str
    workspace: list[str]  # every file and folder the attempt left in the judged tree

    def cli_state(self) -> list[str]:
        """What of the workspace is not the task's work: the CLI's own state (its config, its
        sessions, the links Codex makes to itself) belongs in the sandbox's private folders, and a
        link there made the gate refuse the tree (a Codex stopped mid-call left one)."""
        return [p for p in self.workspace if p not in ("calc.py", "seen-by-worker")]

    def calls(self) -> list[dict[str, Any]]:
        return [r for r in self.recs if r["type"] == "llm_call"]

    def llm_settled(self) -> float:
        return sum(r["amount"] for r in self.recs
                   if r["type"] == "settle" and r.get("what") == "llm")


def stand_in(agent: Agent) -> Any:
    path = agent.folder / "stub_upstream.py"
    spec = importlib.util.spec_from_file_location(f"{agent.example}_stand_in", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def edit(text: str, old: str, new: str) -> str:
    assert old in text, f"the example's graph.toml no longer has {old!r}"
    return text.replace(old, new)


def run_example(tmp: Path, agent: Agent, *, ceiling: float | None = None,
                on_refusal: str | None = None, break_stream: int = 0, overlong: int = 0,
                spy: bool = False) -> Run:
    program = AGENTS_CLI / agent.program
    assert program.exists(), f"{program} is missing: run make agents-cli"
    folder = tmp / agent.example
    folder.mkdir()
    for f in agent.folder.iterdir():
        if f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())
            (folder / f.name).chmod(f.stat().st_mode)
    log = tmp / "upstream.jsonl"
    server = stand_in(agent).serve(0, str(log), KEY, break_stream, overlong)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        text = (folder / "graph.toml").read_text()
        port = {"claude-code": 18091, "codex": 18092}[agent.example]
        text = edit(text, f'upstream = "http://127.0.0.1:{port}/v1"',
                    f'upstream = "http://127.0.0.1:{server.server_address[1]}/v1"')
        text = edit(text, f'"../../build/agents/{agent.program}"', json.dumps(str(program)))
        if ceiling is not None:
            text = edit(text, "spend_ceiling = 1.0", f"spend_ceiling = {ceiling}")
        if on_refusal is not None:  # the llm table is the file's last
            text += f'on_refusal = "{on_refusal}"\n'
        if spy:  # every environment the worker's sandbox shows, read first by the worker
            text = edit(text, "worker = [", f'worker = ["/bin/sh", "-c", \'{SPY}\', "sh", ')
        (folder / "graph.toml").write_text(text)
        # the engine in a process of its own with only these variables (forked from a warm
        # process, tests/support/engine_child.py), as `loopproof run` would start
        proc = engine_run(["cli", "run", str(folder / "graph.toml"), "--ledger",
                           str(tmp / "l.jsonl"), "--json"],
                          env={"PATH": os.environ["PATH"], agent.key_env: KEY}, timeout=300)
        ended = time.time()
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in proc.stderr, proc.stderr
    recs = [json.loads(x) for x in (tmp / "l.jsonl").read_text().splitlines()]
    seen = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    work = tmp / "l.jsonl.work" / "write"
    left = sorted(str(p.relative_to(work)) for p in work.rglob("*")) if work.is_dir() else []
    return Run(proc.returncode, recs, seen, ended, proc.stderr, left)


def verifies(tmp: Path) -> None:
    """`loopproof verify` of the run's ledger, in this process (the command's own process is
    not what this file tests)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli.main(["verify", str(tmp / "l.jsonl")])
    assert code == 0, out.getvalue()


def worker_claim(run: Run) -> dict[str, Any]:
    return next(r["claims"] for r in run.recs if r["type"] == "claim")


@pytest.mark.parametrize("agent", AGENTS)
def test_the_cli_does_the_task_and_the_ledger_settles_what_the_upstream_counted(
        tmp_path: Path, agent: Agent):
    run = run_example(tmp_path, agent, spy=True)
    assert run.code == 0, (worker_claim(run), [r for r in run.recs if r["type"] == "verdict"])
    assert run.cli_state() == [], run.workspace
    assert [s["step"] for s in run.seen] == [0, 1, 2]  # write calc.py, check it, done
    assert all(s["stream"] for s in run.seen)  # both CLIs always ask for a stream
    cap = agent.llm()["max_tokens"]
    assert [s.get("max_tokens", s.get("max_output_tokens")) for s in run.seen] == [cap] * 3
    calls = run.calls()
    assert [c["usage"] for c in calls] == ["reported"] * 3 and not any(c["cut"] for c in calls)
    assert [c["status"] for c in calls] == [200] * 3  # the stand-in took the key each time
    cached = [c["cache_read_tokens"] for c in calls]
    assert cached[0] == 0 and all(cached[1:])  # the stand-in's cache, read by later calls
    upstream = sum(agent.cost(s["usage"]) for s in run.seen)
    assert abs(upstream - run.llm_settled()) < 1e-5  # each call rounds up to the meter's 1e-6
    assert upstream <= 1.0  # c_v
    verifies(tmp_path)
    # the key: not in any environment the worker's sandbox showed it, and in no file of the run
    env = next(tmp_path.glob("l.jsonl.work/write/seen-by-worker")).read_bytes()
    assert f"{agent.token_env}=lp-".encode() in env  # the spy read the CLI's own environment
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert KEY.encode() not in p.read_bytes(), p


@pytest.mark.parametrize("agent", AGENTS)
def test_when_the_second_call_does_not_fit_the_attempt_ends_and_the_upstream_spent_within_cv(
        tmp_path: Path, agent: Agent):
    ceiling = SMALL[agent.example]
    run = run_example(tmp_path, agent, ceiling=ceiling)
    calls = run.calls()
    assert len(run.seen) == 1, calls  # the first call reached the upstream, the second did not
    assert not calls[0]["refused"] and calls[1]["refused"], calls
    stop = [r for r in run.recs if r["type"] == "worker_stopped"]
    assert len(stop) == 1 and stop[0]["call"] == calls[1]["call"]
    assert run.ended - run.seen[-1]["t"] < 45  # the refusal came after the last call answered
    upstream = agent.cost(run.seen[0]["usage"])
    assert upstream <= ceiling and upstream <= 1.5  # c_v, B
    # calc.py was written by the first call's tool, before the refusal: the gate judges what
    # the worker left, and accepts it; the CLI stopped mid-call left nothing of its own there
    assert run.code == 0, [r for r in run.recs if r["type"] == "verdict"]
    assert run.cli_state() == [], run.workspace
    verifies(tmp_path)


@pytest.mark.parametrize("agent", AGENTS)
def test_the_refusal_shape_alone_stops_the_cli_without_a_retry(tmp_path: Path, agent: Agent):
    run = run_example(tmp_path, agent, ceiling=SMALL[agent.example], on_refusal="continue")
    refused = [c for c in run.calls() if c["refused"]]
    assert len(refused) == 1, refused  # a retry would be a second refused call
    assert refused[0]["status"] == {"claude-code": 402, "codex": 429}[agent.example]
    claim = worker_claim(run)
    assert claim["returncode"] != 0 and claim["killed"] is None  # it stopped by itself
    assert not [r for r in run.recs if r["type"] == "worker_stopped"]
    assert run.ended - run.seen[-1]["t"] < 45
    verifies(tmp_path)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_stream_that_breaks_off_is_charged_its_reservation(tmp_path: Path, agent: Agent):
    run = run_example(tmp_path, agent, break_stream=1)
    assert run.code == 0, worker_claim(run)
    calls = run.calls()
    broken = calls[0]
    assert run.seen[0].get("broken") and broken["stream"]
    assert broken["charged"] == broken["reserved"] and broken["usage"] != "reported"
    assert [c["usage"] for c in calls[1:]] == ["reported"] * (len(calls) - 1)
    if agent is CLAUDE:  # Claude Code asks the same again, not streamed (64,000 max_tokens)
        assert run.seen[1]["step"] == 0 and not run.seen[1]["stream"]
        assert run.seen[1]["max_tokens"] == agent.llm()["max_tokens"]
    else:  # Codex asks the same again, streamed
        assert run.seen[1]["step"] == 0 and run.seen[1]["stream"]
    upstream = sum(agent.cost(s["usage"]) for s in run.seen)
    assert run.llm_settled() > upstream  # the reservation, not the upstream's partial count
    verifies(tmp_path)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_stream_past_its_reservation_is_cut_there_and_charged_it(tmp_path: Path, agent: Agent):
    run = run_example(tmp_path, agent, overlong=1)  # the first answer ignores max tokens
    assert run.seen[0]["overlong"]
    first = run.calls()[0]
    assert first["cut"] and first["charged"] == first["reserved"], first
    assert first["completion_tokens"] is None  # the upstream's usage is not believed
    verifies(tmp_path)
