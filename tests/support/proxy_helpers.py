"""Run model calls through a real proxy inside a real attempt (a Python worker under the runner's
meter), so every test sees the ledger the engine writes."""

from __future__ import annotations

import hashlib
import http.client
import json
import secrets
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopproof.engine.record.replay import open_replayed
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.gate import CallableGate
from loopproof.engine.run.proxy import bridge
from loopproof.engine.run.proxy.config import LlmConfig, parse
from loopproof.engine.run.proxy.server import Proxy
from loopproof.engine.run.proxy.store import BodyStore, calls_root
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.worker import CallableWorker

KIND = "test_proxy_py"
UPSTREAM_KEY = "sk-upstream-4f9c2e7b1d-NEVER-IN-THE-WORKER"
BODIES: dict[str, Callable[[Session], Any]] = {}
spec_mod.register_kind(KIND, lambda table, spec_dir: (CallableWorker(_worker(table["fn"])),
                                                       CallableGate(lambda snap: "accept")),
                       ["fn"])


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float = 30.0) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


@dataclass
class Session:
    """One attempt's proxy, seen from the worker."""

    socket: str
    token: str
    proxy: Proxy
    out: dict[str, Any] = field(default_factory=dict)

    def request(self, method: str, path: str, body: Any = None, *,
                token: str | None = None) -> tuple[int, bytes]:
        conn = UnixHTTPConnection(self.socket)
        data = None if body is None else (body if isinstance(body, bytes)
                                          else json.dumps(body).encode())
        headers = {"Authorization": f"Bearer {self.token if token is None else token}",
                   "Content-Type": "application/json"}
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def chat(self, content: str = "hello", **more: Any) -> tuple[int, bytes]:
        return self.request("POST", "/v1/chat/completions",
                            {"model": "fake-model", "messages": [{"role": "user",
                                                                  "content": content}], **more})

    def send(self, path: str, body: Any, headers: dict[str, str]) -> tuple[int, Any, bytes]:
        """POST `body` with exactly `headers` (no token unless they carry it): the status,
        the answer's headers and its bytes."""
        conn = UnixHTTPConnection(self.socket)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            conn.request("POST", path, body=data,
                         headers={"Content-Type": "application/json", **headers})
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()

    def messages(self, content: Any = "hello", *, path: str = "/v1/messages?beta=true",
                 token: str | None = None, **more: Any) -> tuple[int, Any, bytes]:
        """An Anthropic Messages call as Claude Code makes it: x-api-key, anthropic-version,
        anthropic-beta, `?beta=true`, max_tokens 128000 unless given."""
        body = {"model": "claude-fake", "max_tokens": 128000,
                "messages": [{"role": "user", "content": content}], **more}
        return self.send(path, body, {"x-api-key": self.token if token is None else token,
                                      "anthropic-version": "2023-06-01",
                                      "anthropic-beta": "claude-code-20250219,fake-beta"})

    def responses(self, input: Any = "hello", *, token: str | None = None,
                  **more: Any) -> tuple[int, Any, bytes]:
        """An OpenAI Responses call as Codex makes it: Bearer, no max_output_tokens unless
        given."""
        body = {"model": "gpt-fake", "input": input, **more}
        return self.send("/v1/responses", body,
                         {"Authorization": f"Bearer {self.token if token is None else token}"})

    def base_url(self) -> str:
        """A loopback URL relayed to the socket by the bridge (as inside a sandbox)."""
        server = bridge.serve(self.socket)
        self.out.setdefault("_bridges", []).append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/v1"

    def openai(self, **kw: Any) -> Any:
        import openai
        return openai.OpenAI(base_url=self.base_url(), api_key=self.token, max_retries=0, **kw)


def _worker(name: str) -> Callable[[Any], Any]:
    def run(ctx: Any) -> Any:
        body = BODIES[name]
        table = _TABLES[name]
        cfg: LlmConfig = table["cfg"]
        token = "lp-" + secrets.token_urlsafe(24)
        folder = tempfile.mkdtemp(prefix="lp")
        store = BodyStore(calls_root(table["ledger"]), [UPSTREAM_KEY, token])
        try:
            proxy = Proxy(cfg, ctx.meter, socket_path=Path(folder) / "p.sock", token=token,
                          key=table["key"], store=store,
                          where={"node": ctx.node, "activation": ctx.activation,
                                 "attempt": ctx.attempt})
            with proxy:
                out = table["out"] if not table.get("per_node") else \
                    table["out"].setdefault(ctx.node, {})
                session = Session(str(Path(folder) / "p.sock"), token, proxy, out)
                try:
                    out["value"] = body(session)
                finally:
                    for server in out.pop("_bridges", []):
                        server.shutdown()
                        server.server_close()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return None
    return run


_TABLES: dict[str, dict[str, Any]] = {}


@dataclass
class Outcome:
    ledger: Path
    records: list[dict[str, Any]]
    value: Any
    exit: int
    name: str = ""

    @property
    def out(self) -> dict[str, Any]:
        """What the worker body shares with the test (set "resumed" to make it do nothing)."""
        return _TABLES[self.name]["out"]

    def calls(self) -> list[dict[str, Any]]:
        """The `llm_call` records in the order the calls arrived (c1, c2, ...), not the order
        they were written: a call's record is written after its answer, so a client's next
        call may be recorded first (the proxy does not order them, and need not)."""
        calls = [r for r in self.records if r["type"] == "llm_call"]
        return sorted(calls, key=lambda r: int(r["call"].lstrip("c")))

    def of_call(self, call: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("call") == call]

    def verify(self) -> None:
        """The ledger verifies and replays (chain, every record's fields, the model's state at
        every step), and every call's stored bodies are the bytes their hashes name."""
        ledger, _ = open_replayed(self.ledger)
        ledger.close()
        calls = calls_root(self.ledger)
        for rec in self.calls():
            for f in ("request_sha256", "response_sha256"):
                if f in rec:
                    data = (calls / rec[f]).read_bytes()
                    assert hashlib.sha256(data).hexdigest() == rec[f], (rec, f)


def run_calls(tmp_path: Path, upstream: str, body: Callable[[Session], Any], *,
              ceiling: float = 10.0, budget: float = 10.0, eval_reserve: float = 0.0,
              key: str | None = UPSTREAM_KEY, **llm: Any) -> Outcome:
    """Run `body(session)` as the worker of a one-node run whose model access is `llm`."""
    name = f"b{len(BODIES)}"
    BODIES[name] = body
    # "continue": these tests follow the proxy's accounting call by call after a 402; the
    # end of an attempt at a refusal ("end-attempt", the default) is asked for by name
    table = {"upstream": upstream, "price_prompt_per_1k": 1.0,
             "price_completion_per_1k": 2.0, "max_tokens": 64, "on_refusal": "continue",
             **llm}
    cfg = parse(table, lambda f, p, fix: ValueError(f"{f} {p}: {fix}"))
    ledger = tmp_path / "run.jsonl"
    _TABLES[name] = {"cfg": cfg, "key": key, "ledger": ledger, "out": {}}
    p = tmp_path / "graph.toml"
    p.write_text(f'[graph]\nspend_budget = {budget}\n[node.n]\nkind = "{KIND}"\n'
                 f'fn = "{name}"\nspend_ceiling = {ceiling}\neval_reserve = {eval_reserve}\n')
    runner = Runner.start(spec_mod.load(p), ledger)
    code = runner.run()
    runner.close()
    recs = [json.loads(line) for line in ledger.read_text().splitlines()]
    return Outcome(ledger, recs, _TABLES[name]["out"].get("value"), code, name)


def run_calls_in_parallel(tmp_path: Path, upstream: str, body: Callable[[Session], Any], *,
                          nodes: int, ceiling: float, budget: float, **llm: Any) -> Outcome:
    """Run `body(session)` as the worker of each of `nodes` independent nodes, all in flight at
    once (max_parallel = nodes), each attempt with its own proxy; `value` is node -> result."""
    name = f"b{len(BODIES)}"
    BODIES[name] = body
    table = {"upstream": upstream, "price_prompt_per_1k": 1.0,
             "price_completion_per_1k": 2.0, "max_tokens": 64, "on_refusal": "continue",
             **llm}
    cfg = parse(table, lambda f, p, fix: ValueError(f"{f} {p}: {fix}"))
    ledger = tmp_path / "run.jsonl"
    _TABLES[name] = {"cfg": cfg, "key": UPSTREAM_KEY, "ledger": ledger, "out": {},
                     "per_node": True}
    p = tmp_path / "graph.toml"
    p.write_text(f"[graph]\nspend_budget = {budget}\nmax_parallel = {nodes}\n" + "".join(
        f'[node.n{i}]\nkind = "{KIND}"\nfn = "{name}"\nspend_ceiling = {ceiling}\n'
        for i in range(nodes)))
    runner = Runner.start(spec_mod.load(p), ledger)
    code = runner.run()
    runner.close()
    recs = [json.loads(line) for line in ledger.read_text().splitlines()]
    values = {n: v.get("value") for n, v in _TABLES[name]["out"].items()}
    return Outcome(ledger, recs, values, code, name)


def no_token_upstream(up, token: str) -> None:
    """The worker's token reached the upstream in no request line, header or body; the key
    only as x-api-key (or Bearer, for the OpenAI shapes), never in a body."""
    for r in up.requests:
        assert token not in r["path"] and token.encode() not in r["raw"]
        assert not any(token in v for v in r["headers"].values()), r["headers"]
        assert UPSTREAM_KEY.encode() not in r["raw"]
        keyed = [k for k, v in r["headers"].items() if UPSTREAM_KEY in v]
        assert keyed in (["x-api-key"], ["authorization"]), keyed
