"""Model-call proxy overhead: latency added per call and calls/s sustained, against direct calls
to the same stand-in upstream in the same run.

Why side by side: the cost of a loopback HTTP call varies with the machine and its load; what
the proxy adds (the bridge's relay, the Unix socket hop, bounding and rewriting the request, a
durable `reserve` record with its fsync, the `settle` and `llm_call` records, hashing and
storing both bodies) is the difference between the two loops, timed alternately, best of
`ROUNDS`. The upstream is the example's stub (examples/agent-under-budget/stub_upstream.py).
Registered in bench.registry as "proxy_overhead".
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.registry import register
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.gate import CallableGate
from loopproof.engine.run.proxy import bridge
from loopproof.engine.run.proxy.access import model_access
from loopproof.engine.run.proxy.config import parse
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.worker import CallableWorker

CALLS = 100
THREADS = 8
ROUNDS = 3
STUB = Path(__file__).resolve().parents[1] / "examples" / "agent-under-budget" / "stub_upstream.py"
BODY = json.dumps({"model": "stub", "max_tokens": 16,
                   "messages": [{"role": "user", "content": "next step?"}]}).encode()
KIND = "bench_proxy"
_JOBS: dict[str, Any] = {}


def _stub() -> Any:
    spec = importlib.util.spec_from_file_location("stub_upstream", STUB)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _calls(port: int, token: str, n: int, threads: int) -> float:
    """Seconds for `n` calls spread over `threads` threads, one connection per call."""
    per = n // threads

    def one() -> None:
        for _ in range(per):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("POST", "/v1/chat/completions", body=BODY,
                         headers={"Authorization": f"Bearer {token}",
                                  "Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200, resp.status
            conn.close()
    ts = [threading.Thread(target=one) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0


def _worker(ctx: Any) -> None:
    job = _JOBS["job"]
    with model_access(job["cfg"], ctx.meter, ledger=job["ledger"], where={"node": ctx.node}) as a:
        relay = bridge.serve(str(a.socket))
        try:
            port = relay.server_address[1]
            job["result"] = [_calls(port, a.env["OPENAI_API_KEY"], job["n"], t)
                             for t in (1, job["threads"])]
        finally:
            relay.shutdown()
            relay.server_close()


spec_mod.register_kind(KIND, lambda table, spec_dir: (CallableWorker(_worker),
                                                       CallableGate(lambda snap: "accept")), [])


def _proxied(folder: Path, upstream: str, n: int, threads: int) -> list[float]:
    ledger = folder / f"run{len(list(folder.iterdir()))}.jsonl"
    _JOBS["job"] = {"cfg": parse({"upstream": upstream, "max_tokens": 16,
                                  "price_prompt_per_1k": 0.001,
                                  "price_completion_per_1k": 0.001,
                                  "tokenize": "none"},  # the stub has no /tokenize to ask
                                 lambda f, p, fix: ValueError(f)),
                    "ledger": ledger, "n": n, "threads": threads}
    g = folder / "graph.toml"
    g.write_text(f'[graph]\nspend_budget = 1e6\n[node.b]\nkind = "{KIND}"\n'
                 "spend_ceiling = 1e6\n")
    runner = Runner.start(spec_mod.load(g), ledger)
    runner.run()
    runner.close()
    return _JOBS["job"]["result"]


def bench_proxy(args: argparse.Namespace) -> dict:
    server = _stub().serve(0)
    port = server.server_address[1]
    upstream = f"http://127.0.0.1:{port}/v1"
    best = {"direct": [float("inf")] * 2, "proxied": [float("inf")] * 2}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(ROUNDS):
                direct = [_calls(port, "x", CALLS, t) for t in (1, THREADS)]
                proxied = _proxied(Path(tmp), upstream, CALLS, THREADS)
                best["direct"] = [min(a, b) for a, b in zip(best["direct"], direct, strict=True)]
                best["proxied"] = [min(a, b) for a, b in
                                   zip(best["proxied"], proxied, strict=True)]
    finally:
        server.shutdown()
        server.server_close()
    d_ms, p_ms = (best[k][0] / CALLS * 1000 for k in ("direct", "proxied"))
    d_rate, p_rate = (CALLS / best[k][1] for k in ("direct", "proxied"))
    return {"calls": CALLS, "threads": THREADS, "rounds": ROUNDS,
            "direct_ms_per_call": round(d_ms, 3), "proxied_ms_per_call": round(p_ms, 3),
            "added_ms_per_call": round(p_ms - d_ms, 3), "latency_ratio": round(p_ms / d_ms, 2),
            "direct_calls_per_s": round(d_rate, 1), "proxied_calls_per_s": round(p_rate, 1),
            "throughput_ratio": round(p_rate / d_rate, 3)}


register("proxy_overhead", bench_proxy)
