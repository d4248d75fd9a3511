"""examples/mini-swe-agent/ under `loopproof run`: mini-swe-agent (the `[agents]` extra) runs from
its own console script with its variables from `env`, against the example's scripted upstream
(which logs the usage of every request it answers: the ground truth of spend). Honest task:
DONE, and what the upstream counted equals what the ledger settled, within c_v. Small c_v: the
first refusal ends the attempt within seconds (mini's own retries would wait minutes), and the
upstream counted no more than c_v. The graph is the example's, with one line changed: the
upstream's URL."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

from tests.support.engine_child import engine_run
from tests.support.paths import REPO

EXAMPLE = REPO / "examples" / "mini-swe-agent"
PRICES = (0.15, 0.60)  # the example's price_prompt_per_1k, price_completion_per_1k


def stub_module():
    spec = importlib.util.spec_from_file_location("mini_stub", EXAMPLE / "stub_upstream.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_example(tmp: Path, *, ceiling: float | None = None) -> tuple[int, list[dict], list[dict],
                                                                        float]:
    folder = tmp / "mini-swe-agent"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    log = tmp / "upstream.jsonl"
    server = stub_module().serve(0, str(log), True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        text = (folder / "graph.toml").read_text()
        url = f'upstream = "http://127.0.0.1:{server.server_address[1]}/v1"'
        text = text.replace('upstream = "http://127.0.0.1:18090/v1"', url)  # the one line
        mini = Path(sys.executable).parent / "mini"  # the [agents] extra's console script
        text = text.replace('"../../.venv/bin/mini"', json.dumps(str(mini)))
        if ceiling is not None:
            text = text.replace("spend_ceiling = 1.0", f"spend_ceiling = {ceiling}")
        (folder / "graph.toml").write_text(text)
        proc = engine_run(["cli", "run", str(folder / "graph.toml"), "--ledger",
                           str(tmp / "l.jsonl"), "--json"], env={"PATH": os.environ["PATH"]},
                          timeout=240)
        ended = time.time()
    finally:
        server.shutdown()
        server.server_close()
    recs = [json.loads(x) for x in (tmp / "l.jsonl").read_text().splitlines()]
    seen = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, recs, seen, ended


def upstream_cost(seen: list[dict]) -> float:
    return sum(r["usage"]["prompt_tokens"] * PRICES[0] / 1000
               + r["usage"]["completion_tokens"] * PRICES[1] / 1000 for r in seen)


def llm_settled(recs: list[dict]) -> float:
    return sum(r["amount"] for r in recs if r["type"] == "settle" and r.get("what") == "llm")


def test_mini_swe_agent_fixes_the_bug_and_the_ledger_matches_the_upstream(tmp_path: Path):
    code, recs, seen, _ = run_example(tmp_path)
    assert code == 0, [r for r in recs if r["type"] in ("claim", "verdict")]
    assert len(seen) == 3  # copy and test, fix, submit
    calls = [r for r in recs if r["type"] == "llm_call"]
    assert all(c["prompt_counted_by"] == "tokenize" and c["prompt_tokens"] == c["prompt_bound"]
               for c in calls)  # the exact prompt was reserved, and the upstream agreed
    assert abs(upstream_cost(seen) - llm_settled(recs)) < 1e-5
    assert upstream_cost(seen) <= 1.0  # c_v


def test_under_a_small_ceiling_the_first_refusal_ends_the_attempt_in_seconds(tmp_path: Path):
    code, recs, seen, ended = run_example(tmp_path, ceiling=0.35)
    assert code == 3  # the fix was never made: the gate rejected, the node failed
    stop = [r for r in recs if r["type"] == "worker_stopped"]
    assert len(stop) == 1 and len(seen) == 1
    wall = next(r for r in recs if r["type"] == "settle" and r.get("node") == "fix"
                and r.get("what") == "wall_clock")
    assert wall["killed"] == "refused"
    assert ended - seen[-1]["t"] < 10  # mini alone retries a 402 for about 4 minutes
    assert upstream_cost(seen) <= 0.35
