"""examples/agent-under-budget runs as the README says: an openai-client agent loop calls the
model through the proxy until the budget refuses it (402), and the gate accepts that stop."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

from experiments.crash.observables import prefix_excess
from tests.support.engine_child import engine_run
from tests.support.paths import REPO

EXAMPLE = REPO / "examples" / "agent-under-budget"


def _stub():
    spec = importlib.util.spec_from_file_location("stub_upstream", EXAMPLE / "stub_upstream.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_agent_calls_until_the_budget_refuses_it(tmp_path: Path):
    server = _stub().serve(0, key="sk-local")
    try:
        folder = tmp_path / "agent-under-budget"
        shutil.copytree(EXAMPLE, folder)
        text = (folder / "graph.toml").read_text()
        assert '"../../.venv/bin/python"' in text and "127.0.0.1:18089" in text
        text = text.replace('"../../.venv/bin/python"', json.dumps(sys.executable))
        text = text.replace("127.0.0.1:18089", f"127.0.0.1:{server.server_address[1]}")
        (folder / "graph.toml").write_text(text)
        ledger = tmp_path / "agent.jsonl"
        proc = engine_run(["cli", "run", str(folder / "graph.toml"), "--ledger", str(ledger),
                           "--json"],
                          env={"PATH": os.environ["PATH"], "AGENT_UPSTREAM_KEY": "sk-local"},
                          timeout=180)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "agent.jsonl.work" / "agent" / "result.json").read_text())
    assert result["stopped_by"] == "budget" and result["calls"] >= 2
    recs = [json.loads(x) for x in ledger.read_text().splitlines()]
    # in the order the calls arrived: a call's record is written after its answer, so the
    # refused last call may be recorded before the one the agent made just before it
    calls = sorted((r for r in recs if r["type"] == "llm_call"), key=lambda r: int(r["call"][1:]))
    assert len(calls) == result["calls"] + 1
    assert calls[-1]["refused"] is True and calls[-1]["status"] == 402
    assert all(c["usage"] == "reported" for c in calls[:-1])
    assert prefix_excess(recs) <= 1e-9
    assert json.loads(proc.stdout)["spend"]["settled"] <= 0.5
