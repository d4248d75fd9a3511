"""A scripted stand-in for OpenAI's Responses API, playing the model of the Codex example
(standard library only): it writes `calc.py` with the `exec_command` tool, checks it, then says
it is done, one step per function call answered already in the conversation (Codex resends the
whole history every turn, `store: false`). It answers streamed (server-sent events, as Codex
always asks) and plain JSON, reports usage with cached and reasoning tokens (what an earlier
request already sent is the cached prefix; reasoning is part of `output_tokens`, as OpenAI
bills it), and logs every request with the usage it reported: the ground truth of what was
spent.

    python stub_upstream.py [--port 18092] [--log requests.jsonl] [--key sk-local]
        [--break-stream N]   # the N-th streamed answer (1-based) breaks off after its first event
        [--overlong N]       # the N-th streamed answer ignores max tokens: a long text first

With `--key` (or STUB_KEY) it answers 401 to any request whose `Authorization` is not
`Bearer <key>`, so a run against it shows the proxy sent the upstream key and not the worker's
token.
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
REASONING = 8  # reasoning tokens of every answer (not shown: Codex asks no summary here)

STEPS: list[tuple[str, str | None]] = [
    ("I will write calc.py.", "printf 'def add(a, b):\\n    return a + b\\n' > calc.py"),
    ("Now I check it.", "python3 -c 'import calc; print(calc.add(2, 3))'"),
    ("calc.py is written and add(2, 3) returns 5.", None),
]
LONG = "Let me think about this step by step. " * 600  # ~5,600 tokens: past any small cap


def tokens(text: str) -> int:
    """The stand-in's tokenizer: one token per 4 bytes of UTF-8, rounded up (a real BPE token
    is at least one byte, so the proxy's byte bound is never below it)."""
    return math.ceil(len(text.encode()) / 4)


def step(body: dict[str, Any]) -> int:
    """Which step to play: the number of function calls already answered."""
    items = body.get("input") if isinstance(body.get("input"), list) else []
    done = sum(1 for i in items if i.get("type") == "function_call_output")
    return min(done, len(STEPS) - 1)


def output(n: int) -> list[dict[str, Any]]:
    """The output items of step `n`: a message, then (but for the last step) an exec_command
    call."""
    text, command = STEPS[n]
    items: list[dict[str, Any]] = [{
        "type": "message", "id": f"msg_stub_{n}", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]}]
    if command is not None:
        items.append({"type": "function_call", "id": f"fc_stub_{n}", "call_id": f"call_stub_{n}",
                      "name": "exec_command", "arguments": json.dumps({"cmd": command}),
                      "status": "completed"})
    return items


class Usage:
    """The stand-in's token counts: the longest run of input items an earlier request already
    sent (with the same instructions and tools) is read from the cache, a subset of
    `input_tokens` (OpenAI's convention)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def of(self, body: dict[str, Any], items: list[dict[str, Any]]) -> dict[str, Any]:
        head = json.dumps([body.get("instructions"), body.get("tools")], sort_keys=True)
        inputs = body.get("input") if isinstance(body.get("input"), list) else [body.get("input")]
        prefixes = [head + json.dumps(inputs[:k], sort_keys=True) for k in range(len(inputs) + 1)]
        with self.lock:
            hit = max((p for p in prefixes if p in self.seen), key=len, default="")
            self.seen.update(prefixes)
        total = tokens(prefixes[-1])
        out = tokens(json.dumps(items)) + REASONING
        return {"input_tokens": total, "input_tokens_details": {"cached_tokens": tokens(hit)},
                "output_tokens": out, "output_tokens_details": {"reasoning_tokens": REASONING},
                "total_tokens": total + out}


def events(resp: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of one response, in the Responses API's order."""
    seq = iter(range(10**9))

    def ev(name: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        return name, {"type": name, "sequence_number": next(seq), **fields}

    opened = dict(resp, status="in_progress", output=[], usage=None)
    out = [ev("response.created", response=opened), ev("response.in_progress", response=opened)]
    for i, item in enumerate(resp["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            out.append(ev("response.output_item.added", output_index=i,
                          item=dict(item, status="in_progress", content=[])))
            out.append(ev("response.content_part.added", item_id=item["id"], output_index=i,
                          content_index=0, part={"type": "output_text", "text": "",
                                                 "annotations": []}))
            out += [ev("response.output_text.delta", item_id=item["id"], output_index=i,
                       content_index=0, delta=p) for p in _pieces(text)]
            out.append(ev("response.output_text.done", item_id=item["id"], output_index=i,
                          content_index=0, text=text))
            out.append(ev("response.content_part.done", item_id=item["id"], output_index=i,
                          content_index=0, part=item["content"][0]))
        else:
            out.append(ev("response.output_item.added", output_index=i,
                          item=dict(item, status="in_progress", arguments="")))
            out += [ev("response.function_call_arguments.delta", item_id=item["id"],
                       output_index=i, delta=p) for p in _pieces(item["arguments"])]
            out.append(ev("response.function_call_arguments.done", item_id=item["id"],
                          output_index=i, arguments=item["arguments"]))
        out.append(ev("response.output_item.done", output_index=i, item=item))
    out.append(ev("response.completed", response=resp))
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
        def do_GET(self) -> None:  # noqa: N802
            self.send(404, {"error": {"message": f"no {self.path} here", "type":
                                      "invalid_request_error", "param": None, "code": None}})

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                return self.send(401, {"error": {"message": "invalid key", "type":
                                                 "invalid_request_error", "param": None,
                                                 "code": "invalid_api_key"}})
            if self.path.split("?")[0] != "/v1/responses":
                return self.do_GET()
            body = json.loads(raw or b"{}")
            n = step(body)
            k = next(streams) if body.get("stream") else -1  # which streamed answer
            items = output(n)
            if k == overlong:  # an upstream that ignores max_output_tokens (the proxy cuts it)
                items[0]["content"][0]["text"] = LONG + items[0]["content"][0]["text"]
            usage = usage_of.of(body, items)
            resp = {"id": f"resp_stub_{n}", "object": "response", "created_at": 0,
                    "status": "completed", "model": body.get("model", "stub"), "output": items,
                    "usage": usage}
            entry = {"path": self.path, "stream": bool(body.get("stream")), "step": n,
                     "max_output_tokens": body.get("max_output_tokens"), "usage": usage,
                     "overlong": k == overlong}
            if not body.get("stream"):
                record(entry)
                return self.send(200, resp)
            evs = events(resp)
            broken = k == break_stream
            if broken:  # the line drops after response.created: the prompt was read,
                evs = evs[:1]  # nothing generated (Codex then asks again)
                entry = dict(entry, broken=True, usage=dict(
                    usage, output_tokens=0, total_tokens=usage["input_tokens"],
                    output_tokens_details={"reasoning_tokens": 0}))
            record(entry)
            self.send_events(evs, close=broken)

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=18092)
    ap.add_argument("--log", default=None)
    ap.add_argument("--key", default=os.environ.get("STUB_KEY"))
    ap.add_argument("--break-stream", type=int, default=0)
    ap.add_argument("--overlong", type=int, default=0)
    a = ap.parse_args()
    server = serve(a.port, a.log, a.key, a.break_stream, a.overlong)
    print(f"Responses stand-in on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
