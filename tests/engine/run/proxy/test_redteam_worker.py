"""The metered proxy attacked by its worker: every byte of every request is the attacker's. Its
goals: a call the upstream bills above the node's prices or past its bound (a dearer tier or
model, a beta or cache option billed more, tokens the body does not hold), a body the upstream
reads differently from the proxy, a path that reaches an endpoint the meter does not bound, and
the engine's threads or disk swallowed without bound. Each test reads the ledger file: G3 at
every prefix, nothing reserved for what was refused, and nothing refused reached the upstream.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from experiments.crash.observables import prefix_excess
from loopproof.engine.run.proxy import server as server_mod
from loopproof.engine.run.proxy.store import BodyStore, calls_root
from tests.support.fake_apis import fake_upstream
from tests.support.fake_openai import Reply
from tests.support.proxy_helpers import Session, run_calls

MODELS = ["fake-model", "claude-fake", "gpt-fake"]  # the node's llm.models: what run_calls' calls name
ANTHROPIC = {"anthropic-version": "2023-06-01"}


def _chat(**more: Any) -> dict[str, Any]:
    return {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], **more}


def _messages(**more: Any) -> dict[str, Any]:
    return {"model": "claude-fake", "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}], **more}


def _responses(**more: Any) -> dict[str, Any]:
    return {"model": "gpt-fake", "input": "hi", **more}


# (what the worker tries, path, body as bytes or JSON, extra headers): each must be refused
# before any hold, and never reach the upstream
REFUSED: list[tuple[str, str, Any, dict[str, str]]] = [
    ("a model the node does not list", "/v1/chat/completions", _chat(model="gpt-5-pro"), {}),
    ("chat service_tier priority", "/v1/chat/completions", _chat(service_tier="priority"), {}),
    ("chat prediction", "/v1/chat/completions",
     _chat(prediction={"type": "content", "content": "x" * 50}), {}),
    ("vLLM chat_template", "/v1/chat/completions",
     _chat(chat_template="{% for i in range(99999) %}{{ messages }}{% endfor %}"), {}),
    ("an earlier audio answer by id", "/v1/chat/completions",
     _chat(messages=[{"role": "assistant", "audio": {"id": "audio_1"}},
                     {"role": "user", "content": "hi"}]), {}),
    ("best_of below n", "/v1/chat/completions", _chat(n=2, best_of=1), {}),
    ("a NaN literal", "/v1/chat/completions",
     b'{"model":"fake-model","messages":[{"role":"user","content":"hi"}],"temperature":NaN}',
     {}),
    ("1e999 (forwarded as Infinity)", "/v1/chat/completions",
     b'{"model":"fake-model","messages":[{"role":"user","content":"hi"}],"top_p":1e999}', {}),
    ("a lone surrogate", "/v1/chat/completions",
     b'{"model":"fake-model","messages":[{"role":"user","content":"\\ud800"}]}', {}),
    ("nesting past the recursion limit", "/v1/chat/completions",
     b'{"model":"fake-model","messages":[{"role":"user","content":"hi"}],"metadata":'
     + b"[" * 100_000 + b"]" * 100_000 + b"}", {}),
    ("fast mode", "/v1/messages", _messages(speed="fast"), ANTHROPIC),
    ("US-only inference", "/v1/messages", _messages(inference_geo="us"), ANTHROPIC),
    ("the 1M context beta among others", "/v1/messages", _messages(),
     {**ANTHROPIC, "anthropic-beta": "claude-code-20250219, context-1m-2025-08-07"}),
    ("the 1M context beta in capitals", "/v1/messages", _messages(),
     {**ANTHROPIC, "anthropic-beta": "Context-1M-2025-08-07"}),
    ("a 1-hour cache write priced below 2x", "/v1/messages", _messages(messages=[
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {
            "type": "ephemeral", "ttl": "1h"}}]}]), ANTHROPIC),
    ("responses service_tier scale", "/v1/responses", _responses(service_tier="scale"), {}),
    ("a hosted tool by tool_choice", "/v1/responses",
     _responses(tools=[{"type": "function", "name": "f", "parameters": {}}],
                tool_choice={"type": "web_search_preview"}), {}),
    ("a hosted tool among allowed_tools", "/v1/responses",
     _responses(tool_choice={"type": "allowed_tools", "mode": "auto",
                             "tools": [{"type": "file_search"}]}), {}),
    ("a stored reasoning item by id", "/v1/responses",
     _responses(input=[{"type": "reasoning", "id": "rs_1", "summary": []},
                       {"role": "user", "content": "hi"}]), {}),
]
# paths the meter does not bound: a 404 from the proxy, whatever the method or spelling
# (http.server makes "//v1/messages" "/v1/messages": metered as one, a control below)
PATHS = ["/v1/messages/../responses", "/v1/%6Dessages", "/v1/messages/",
         "/v1/messages/batches", "/v1/files", "/v1/responses/resp_1/cancel",
         "/v1/chat/completions/../../v1/images/generations", "http://upstream/v1/messages"]


def test_requests_billed_above_the_nodes_bound_never_reach_the_upstream(tmp_path: Path):
    """Each request of REFUSED is answered 400 in its own API, recorded refused with nothing
    reserved; each path of PATHS (POST, and GET /v1/responses/{id}) is a 404; the upstream sees
    only the controls: a standard `service_tier`, a `best_of` counted in the bound, and
    `//v1/messages`, which is /v1/messages (metered as one)."""
    def worker(s: Session) -> dict[str, Any]:
        refused = {}
        for what, path, body, headers in REFUSED:
            auth = {"x-api-key": s.token} if path == "/v1/messages" else \
                {"Authorization": f"Bearer {s.token}"}
            refused[what] = s.send(path, body, {**auth, **headers})[0]
        paths = [s.request("POST", p, _chat())[0] for p in PATHS]
        paths.append(s.request("GET", "/v1/responses/resp_1")[0])
        controls = [s.chat("hi", service_tier="flex")[0], s.chat("hi", best_of=3)[0],
                    s.messages("hi", path="//v1/messages")[0]]
        return {"refused": refused, "paths": paths, "controls": controls}

    with fake_upstream([Reply("ok")] * 3) as up:
        out = run_calls(tmp_path, up.base_url, worker, models=MODELS,
                        price_cache_write_per_1k=1.5)
        reached = [(r["path"], json.loads(r["raw"])) for r in up.requests]
    assert out.value["refused"] == {what: 400 for what, *_ in REFUSED}
    assert out.value["paths"] == [404] * (len(PATHS) + 1)
    assert out.value["controls"] == [200, 200, 200]
    assert [(p, b.get("service_tier"), b.get("best_of")) for p, b in reached] == [
        ("/v1/chat/completions", "flex", None), ("/v1/chat/completions", None, 3),
        ("/v1/messages", None, None)]
    assert prefix_excess(out.records) <= 1e-9
    out.verify()
    calls = out.calls()
    refused = [c for c in calls if c["refused"]]
    assert len(refused) == len(REFUSED) and all(c["reserved"] == 0.0 for c in refused)
    best_of, doubled = calls[-2:]
    assert best_of["reserved"] >= 3 * 64 * 2.0 / 1000  # three sequences of max_tokens each
    assert doubled["endpoint"] == "/v1/messages" and doubled["reserved"] > 0


def test_a_worker_that_opens_connections_without_end_is_served_at_most_the_cap(
        tmp_path: Path, monkeypatch):
    """Connections that send nothing each hold a handler thread: past MAX_CONNECTIONS open at
    once, a new one is closed at once (the engine's threads stay bounded), and once they close
    the proxy serves again."""
    cap = 4
    monkeypatch.setattr(server_mod, "MAX_CONNECTIONS", cap)

    def worker(s: Session) -> list[Any]:
        idle = []
        try:
            for _ in range(cap):
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.connect(s.socket)
                idle.append(c)
            extra = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            extra.settimeout(20.0)
            extra.connect(s.socket)
            try:
                closed = extra.recv(1) == b""  # the cap: shut without a word
            except TimeoutError:
                closed = False  # served: a thread held for it
            finally:
                extra.close()
        finally:
            for c in idle:
                c.close()
        server = s.proxy._server
        assert server is not None
        for _ in range(600):  # their handlers see the close and give their slots back
            if server._open == 0:
                break
            time.sleep(0.05)
        return [closed, s.chat("hi")[0]]

    with fake_upstream([Reply("ok")]) as up:
        out = run_calls(tmp_path, up.base_url, worker)
    assert out.value == [True, 200]
    assert prefix_excess(out.records) <= 1e-9


def test_refused_bodies_are_stored_up_to_a_cap(tmp_path: Path, monkeypatch):
    """A worker that sends large requests that are refused, without end, costs nothing on the
    meter: the proxy stores their bodies (for the record) only up to MAX_UNPAID bytes in all,
    then records the refusal without them."""
    cap = 40_000
    monkeypatch.setattr(server_mod, "MAX_UNPAID", cap)
    pad = "x" * 10_000

    def worker(s: Session) -> list[int]:
        return [s.chat(pad, service_tier="priority")[0] for _ in range(12)]

    with fake_upstream([]) as up:
        out = run_calls(tmp_path, up.base_url, worker)
        assert up.requests == []
    assert out.value == [400] * 12
    calls = out.calls()
    assert all(c["refused"] for c in calls) and len(calls) == 12
    stored = [c[f] for c in calls for f in ("request_sha256", "response_sha256") if f in c]
    assert sum((calls_root(out.ledger) / h).stat().st_size for h in stored) <= cap
    assert "request_sha256" in calls[0] and "request_sha256" not in calls[-1]
    out.verify()


def test_a_body_that_cannot_be_stored_after_the_hold_still_settles_it(tmp_path: Path,
                                                                      monkeypatch):
    """A hostile environment (the engine's disk full) when a held call's request body is
    stored: the hold is settled (nothing was sent: charged 0) and the worker has an answer, so
    a second call that fits only if the first hold was released goes through."""
    put = BodyStore.put

    def full_disk(self: BodyStore, data: bytes) -> str:
        if b"FULL-DISK" in data:
            raise OSError(28, "No space left on device")
        return put(self, data)

    monkeypatch.setattr(BodyStore, "put", full_disk)
    with fake_upstream([Reply("ok")]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [s.chat("FULL-DISK")[0],
                                                          s.chat("hi")[0]],
                        ceiling=0.3, budget=0.3)  # one call's hold fits, two do not
    assert out.value == [502, 200]
    first, second = out.calls()
    assert first["charged"] == 0.0 and "No space left" in first["error"], first
    assert second["reserved"] > 0.3 / 2 and not second["refused"]  # it fit: the first was released
    assert prefix_excess(out.records) <= 1e-9
