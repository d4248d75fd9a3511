"""A node's `env` reaches its command worker and never its gate; a name the engine sets or one
that looks secret is refused (one line, exit 2, nothing written); `loopproof bound` needs no
key; a node whose wall-clock reservation leaves no room for one model call is refused by
`bound`, `run` and `resume`; an absolute program later in argv and a script's shebang
interpreter are made visible in the sandbox, and a start failure names the missing interpreter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.runner import Runner
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.process import ProcessError, run_command
from loopproof.engine.system.sandbox import Confinement, View
from loopproof.engine.system.sandbox.bwrap import Bwrap
from tests.support.engine_child import engine_run
from tests.support.specs import command_node, write_spec

SHOW_ENV = ("import json, os; json.dump({k: os.environ.get(k) for k in "
            "['MSWEA_CONFIGURED', 'LITELLM_LOCAL_MODEL_COST_MAP', 'SHARED']}, "
            "open('env.json', 'w'))")
GATE_ENV = ("import os, sys; sys.exit(1 if os.environ.get('MSWEA_CONFIGURED') or "
            "os.environ.get('SHARED') else 0)")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`loopproof ARGS` in a process of its own with `env` as its whole environment (PATH alone
    by default), forked from a warm process (tests/support/engine_child.py)."""
    return engine_run(["cli", *args], env=env if env is not None else {"PATH": os.environ["PATH"]})


def write(tmp: Path, worker: list[str] | None = None, gate: list[str] | None = None,
          graph: dict | None = None, **node: object) -> Path:
    """Node `a` running `worker` and `gate` (`true` each unless given), with `node`'s fields."""
    return write_spec(tmp, {"a": command_node(worker or ["true"], gate or ["true"],
                                              spend_ceiling=1, **node)},
                      spend_budget=10, **(graph or {}))


def test_env_reaches_the_worker_and_never_the_gate(tmp_path: Path):
    spec = write(tmp_path, [sys.executable, "-c", SHOW_ENV], [sys.executable, "-c", GATE_ENV],
                 {"env": {"SHARED": "graph", "MSWEA_CONFIGURED": "graph"}},
                 env={"MSWEA_CONFIGURED": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    proc = cli("run", str(spec), "--ledger", str(tmp_path / "l.jsonl"), "--json")
    assert proc.returncode == 0, proc.stderr  # the gate saw none of them: it accepted
    got = json.loads((tmp_path / "l.jsonl.work" / "a" / "env.json").read_text())
    assert got == {"MSWEA_CONFIGURED": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                   "SHARED": "graph"}  # the node's value wins over the graph's default


REFUSED = {"PATH": "PATH", "HOME": "HOME", "OPENAI_BASE_URL": "OPENAI_BASE_URL",
           "openai_api_key": "openai_api_key", "LOOPPROOF_NODE": "LOOPPROOF_NODE",
           "GITHUB_TOKEN": "GITHUB_TOKEN", "MY_API_KEY": "MY_API_KEY",
           "DB_PASSWORD": "DB_PASSWORD", "1BAD": "1BAD", "LD_PRELOAD": "LD_PRELOAD",
           "ANTHROPIC_BASE_URL": "ANTHROPIC_BASE_URL",
           "anthropic_api_key": "anthropic_api_key"}


def test_an_agents_own_anthropic_variable_is_its_own(tmp_path: Path):
    """Only the two ANTHROPIC_ names the engine sets are refused: Claude Code's model and
    feature switches are the agent's to set."""
    spec = write(tmp_path, env={"ANTHROPIC_MODEL": "claude-fake", "DISABLE_AUTOUPDATER": "1"})
    assert ("ANTHROPIC_MODEL", "claude-fake") in spec_mod.load(spec).nodes["a"].env


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_name_the_engine_sets_or_a_secret_is_refused_naming_it(tmp_path: Path, name: str):
    spec = write(tmp_path, env={name: "sk-abcdef0123456789"})
    with pytest.raises(BadInput) as exc:
        spec_mod.load(spec)
    line = str(exc.value)
    assert "graph.toml" in line and f"env.{name}" in line and "fix:" in line
    assert "sk-abcdef" not in line and "\n" not in line


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "GITHUB_TOKEN"])
def test_through_the_cli_a_refused_name_is_one_line_exit_2_nothing_written(tmp_path: Path,
                                                                          name: str):
    spec = write(tmp_path, env={name: "sk-abcdef0123456789"})
    proc = cli("run", str(spec), "--ledger", str(tmp_path / "l.jsonl"))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert f"env.{name}" in lines[0] and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.toml"]


def test_env_values_must_be_strings_and_graph_env_is_checked_too(tmp_path: Path):
    for node, graph, field in (({"env": {"A": 1}}, {}, "env.A"),
                               ({"env": 3}, {}, "'env'"),
                               ({}, {"env": {"SESSION_ID": "x"}}, "env.SESSION_ID")):
        spec = write(tmp_path, graph=graph, **node)
        with pytest.raises(BadInput) as exc:
            spec_mod.load(spec)
        assert field in str(exc.value)


LLM = {"upstream": "http://127.0.0.1:9/v1", "api_key_env": "LP_NEVER_SET_KEY",
       "price_completion_per_1k": 0.6, "max_tokens": 1024}


def test_bound_needs_no_key_and_run_asks_for_it(tmp_path: Path):
    spec = write(tmp_path, graph={"price": 0.001}, timeout_s=1, llm=LLM)
    proc = cli("bound", str(spec), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["W"] == 1
    proc = cli("run", str(spec), "--ledger", str(tmp_path / "l.jsonl"))
    assert proc.returncode == 2 and "LP_NEVER_SET_KEY is not set" in proc.stderr


def test_a_wall_clock_reservation_that_leaves_no_call_is_refused(tmp_path: Path):
    # price 1 x timeout_s 120 reserves all of c_v = 1: every call would be a 402 from the first
    spec = write(tmp_path, timeout_s=120, llm=LLM)
    for args in (("bound", str(spec)), ("run", str(spec), "--ledger",
                                        str(tmp_path / "l.jsonl"))):
        proc = cli(*args, env={"PATH": os.environ["PATH"], "LP_NEVER_SET_KEY": "sk-x"})
        line = proc.stderr.strip()
        assert proc.returncode == 2 and len(line.splitlines()) == 1, proc.stderr
        assert "120 x 1 = 120 leaves 0" in line and "0.6144" in line and "fix:" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.toml"]


def test_resume_at_a_higher_price_is_refused_with_the_numbers(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("LP_NEVER_SET_KEY", "sk-x")
    spec = write(tmp_path, ["false"], graph={"price": 0.001}, timeout_s=1, llm=LLM)
    ledger = tmp_path / "l.jsonl"
    runner = Runner.start(spec_mod.load(spec), ledger)
    runner.close()  # stopped before its first attempt
    size = ledger.stat().st_size
    with pytest.raises(BadInput) as exc:
        Runner.resume(ledger, price=1.0)
    assert "1 x 1 = 1 leaves 0" in str(exc.value) and ledger.stat().st_size == size


def _interpreter_tree(tmp: Path) -> tuple[Path, Path]:
    """A console script outside the spec's folder whose shebang interpreter lives in another
    folder under /tmp (masked in the sandbox, like a `uv tool` interpreter under the home)."""
    interp = tmp / "interp" / "bin" / "sh"
    interp.parent.mkdir(parents=True)
    shutil.copy2("/bin/sh", interp)
    tool = tmp / "tool" / "bin" / "agent"
    tool.parent.mkdir(parents=True)
    tool.write_text(f"#!{interp}\necho ran > out.txt\n")
    tool.chmod(0o755)
    return interp, tool


def test_a_shebang_interpreter_under_a_masked_folder_is_bound(tmp_path: Path):
    interp, tool = _interpreter_tree(tmp_path)
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    spec = write(spec_dir, ["/usr/bin/env", "X=1", str(tool)], ["/bin/sh", "-c", "test -f out.txt"])
    loaded = spec_mod.load(spec)
    assert loaded.programs[str(interp)] == str(interp) and str(tool) in loaded.programs
    proc = cli("run", str(spec), "--ledger", str(tmp_path / "l.jsonl"), "--json")
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_a_missing_shebang_interpreter_is_named_at_load(tmp_path: Path):
    interp, tool = _interpreter_tree(tmp_path)
    interp.unlink()
    spec = write(tmp_path, [str(tool)])
    proc = cli("bound", str(spec))
    assert proc.returncode == 2 and f"the interpreter '{interp}'" in proc.stderr
    assert "shebang" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_start_failure_names_the_interpreter_the_sandbox_hides(tmp_path: Path):
    interp, tool = _interpreter_tree(tmp_path)
    box = Confinement(Bwrap(), View(readable=(tool.parent.parent,)))  # not the interpreter
    with pytest.raises(ProcessError) as exc:
        run_command([str(tool)], tmp_path, 30, confine=box)
    words = str(exc.value)
    assert (f"the interpreter {interp} named by the shebang of {tool} is not visible: it lies "
            "under /tmp, which the sandbox masks") in words, words
