"""A scripted stand-in for Anthropic's Messages API, playing the model of the Claude Code example
(standard library only): it writes `calc.py` with the `Bash` tool, checks it, then says it is
done, one step per assistant turn already in the conversation. It answers streamed (server-sent
events, as Claude Code always asks first) and plain JSON (Claude Code's fallback after a broken
stream), reports usage with cache tokens (the system prompt and tools are the cached prefix:
written on the first call, read on every later one), answers `/v1/messages/count_tokens`, and
logs every request with the usage it reported: the ground truth of what was spent.

    python stub_upstream.py [--port 18091] [--log requests.jsonl] [--key sk-local]
        [--break-stream N]   # the N-th streamed answer (1-based) breaks off after its first event
        [--overlong N]       # the N-th streamed answer ignores max tokens: a long text first

With `--key` (or STUB_KEY) it answers 401 to any request whose `x-api-key` is not that key, so
a run against it shows the proxy sent the upstream key and not the worker's token.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any


def _load_sibling() -> Any:
    """The agent-under-budget example's stand-in, by path (its quiet handler is shared)."""
    path = Path(__file__).resolve().parent.parent / "agent-under-budget" / "stub_upstream.py"
    spec = importlib.util.spec_from_file_location("agent_under_budget_stub", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


JsonHandler = _load_sibling().JsonHandler


def tokens(text: str) -> int:
    """The stand-in's tokenizer: one token per 4 bytes of UTF-8, rounded up (a real BPE token
    is at least one byte, so the proxy's byte bound is never below it)."""
    return math.ceil(len(text.encode()) / 4)

STEPS: list[tuple[str, str | None]] = [
    ("I will write calc.py.", "printf 'def add(a, b):\\n    return a + b\\n' > calc.py"),
    ("Now I check it.", "python3 -c 'import calc; print(calc.add(2, 3))'"),
    ("calc.py is written and add(2, 3) returns 5.", None),
]
LONG = "Let me think about this step by step. " * 600  # ~5,600 tokens: past any small cap


def step(body: dict[str, Any]) -> int:
    """Which step to play: the number of assistant turns already in the conversation."""
    turns = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
    return min(turns, len(STEPS) - 1)


def content(n: int) -> list[dict[str, Any]]:
    """The content blocks of step `n`: a text, then (but for the last step) a Bash call."""
    text, command = STEPS[n]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if command is not None:
        blocks.append({"type": "tool_use", "id": f"toolu_stub_{n}", "name": "Bash",
                       "input": {"command": command, "description": "Run a step of the task"}})
    return blocks


class Usage:
    """The stand-in's token counts: the system prompt and tools are a cached prefix, written at
    the first call that sends it and read at every later one (Anthropic's `input_tokens` then
    counts only the rest)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def of(self, body: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, int]:
        prefix = json.dumps([body.get("system"), body.get("tools")], sort_keys=True)
        with self.lock:
            cached = prefix in self.seen
            self.seen.add(prefix)
        return {"input_tokens": tokens(json.dumps(body.get("messages"))),
                "cache_creation_input_tokens": 0 if cached else tokens(prefix),
                "cache_read_input_tokens": tokens(prefix) if cached else 0,
                "output_tokens": tokens(json.dumps(blocks))}


def events(msg: dict[str, Any], usage: dict[str, int]) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of one message, in the Messages API's order."""
    start = dict(msg, content=[], stop_reason=None,
                 usage=dict(usage, output_tokens=1))
    out: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(msg["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": w} for w in _pieces(block["text"])]
        else:
            opened = dict(block, input={})
            deltas = [{"type": "input_json_delta", "partial_json": p}
                      for p in _pieces(json.dumps(block["input"]))]
        out.append(("content_block_start", {"type": "content_block_start", "index": i,
                                            "content_block": opened}))
        out += [("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
                for d in deltas]
        out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": msg["stop_reason"],
                                            "stop_sequence": None},
                                  "usage": {"output_tokens": usage["output_tokens"]}}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


def _pieces(text: str, size: int = 16) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def serve(port: int = 0, log: str | None = None, key: str | None = None,
          break_stream: int = 0, overlong: int = 0) -> ThreadingHTTPServer:
    """The stand-in on 127.0.0.1:`port` (0: any free port); the caller runs serve_forever."""
    lock = threading.Lock()
    usage_of = Usage()
    streams = iter(range(1, 10**9))

    def record(entry: dict[str, Any]) -> None:
        if log:
            with lock, open(log, "a") as f:
                f.write(json.dumps(dict(entry, t=time.time())) + "\n")

    class Handler(JsonHandler):
        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if key and self.headers.get("x-api-key") != key:
                return self.send(401, {"type": "error", "error": {
                    "type": "authentication_error", "message": "invalid x-api-key"}})
            body = json.loads(raw or b"{}")
            path = self.path.split("?")[0]
            if path == "/v1/messages/count_tokens":
                return self.send(200, {"input_tokens": tokens(raw.decode())})
            if path != "/v1/messages":
                return self.send(404, {"type": "error", "error": {
                    "type": "not_found_error", "message": f"no {path} here"}})
            n = step(body)
            k = next(streams) if body.get("stream") else -1  # which streamed answer
            blocks = content(n)
            if k == overlong:  # an upstream that ignores max_tokens (the proxy cuts it)
                blocks.insert(0, {"type": "text", "text": LONG})
            usage = usage_of.of(body, blocks)
            msg = {"id": f"msg_stub_{n}", "type": "message", "role": "assistant",
                   "model": body.get("model", "stub"), "content": blocks,
                   "stop_reason": "tool_use" if STEPS[n][1] else "end_turn",
                   "stop_sequence": None, "usage": usage}
            entry = {"path": self.path, "stream": bool(body.get("stream")), "step": n,
                     "max_tokens": body.get("max_tokens"), "usage": usage,
                     "overlong": k == overlong}
            if not body.get("stream"):
                record(entry)
                return self.send(200, msg)
            evs = events(msg, usage)
            broken = k == break_stream
            if broken:  # the line drops after message_start: the prompt was read, one
                evs = evs[:1]  # token generated (Claude Code then asks again, not streamed)
                entry = dict(entry, broken=True, usage=dict(usage, output_tokens=1))
            record(entry)
            self.send_events(evs, close=broken)

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=18091)
    ap.add_argument("--log", default=None)
    ap.add_argument("--key", default=os.environ.get("STUB_KEY"))
    ap.add_argument("--break-stream", type=int, default=0)
    ap.add_argument("--overlong", type=int, default=0)
    a = ap.parse_args()
    server = serve(a.port, a.log, a.key, a.break_stream, a.overlong)
    print(f"Messages stand-in on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
