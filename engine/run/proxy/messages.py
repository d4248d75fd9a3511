"""The Anthropic Messages shape: `POST /v1/messages` (any query string, e.g. `?beta=true`).

Bound: the body's bytes plus what Anthropic adds unseen (its tool-use system prompt, and each
Anthropic-defined tool's own prompt: `HIDDEN_TOKENS`, `HIDDEN_TOKENS_PER_TOOL`), each at the
highest of the prompt, cache-read and cache-write prices (the upstream decides what its cache
holds); plus `max_tokens` (required by the API; capped at the node's, set when absent), which
covers thinking too (`thinking.budget_tokens` is lowered below the cap when it is not). Refused
before any reserve: image and document blocks, server tools (web search, web fetch, code
execution, ...: billed per use, and their results are prompt tokens the body does not hold),
`mcp_servers`, `container`, and server-side compaction (a second, unbounded sampling). Also
refused, because the upstream would bill each token above the node's (standard) prices: fast
mode (`speed` other than "standard", the `fast-mode-*` beta: 6x), US-only inference
(`inference_geo` other than "global": 1.1x), the 1M-token context window (the `context-1m-*`
beta: a prompt past 200K tokens is billed 2x, its output 1.5x), and a 1-hour cache write
(`cache_control.ttl = "1h"`: 2x a prompt token) when the node prices a cache write below that.

Usage: `input_tokens`, `cache_creation_input_tokens` (cache write), `cache_read_input_tokens`,
`output_tokens`; on a stream from `message_start` (the message's usage), each `message_delta`'s
cumulative counts overriding it. The stream is complete at `message_stop`; an `error` event or a
stream that breaks off is charged its reservation. A cut closes the open content block and ends
with `message_delta` (`stop_reason: "max_tokens"`) and `message_stop`.

Upstream auth is `x-api-key` (the worker's token never goes on); `anthropic-version` (default
2023-06-01) and `anthropic-beta` are passed on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from loopproof.engine.run.proxy import refusals
from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.proxy.pricing import Bound, Refused, Usage, bound, count
from loopproof.engine.run.proxy.shape import (
    MESSAGES,
    Asked,
    Shape,
    Step,
    StreamMeter,
    capped,
    encode,
    model_of,
    none_of,
    parse_object,
    passed,
    prompt_floor,
    sse,
    standard_price,
    stream_of,
    text_size,
)

VERSION = "2023-06-01"  # anthropic-version when the client sends none
# Tokens Anthropic adds to a prompt that its body does not hold: the tool-use system prompt
# (its docs give 313 to 530 tokens by model and tool_choice) and, per Anthropic-defined client
# tool, that tool's own definition (bash 245, text editor 700, computer use up to 735)
HIDDEN_TOKENS, HIDDEN_TOKENS_PER_TOOL = 1024, 1024
CLIENT_TOOLS = ("bash_", "text_editor_", "computer_", "memory_")  # typed tools run by the client
BLOCKS = ("text", "tool_use", "tool_result", "thinking", "redacted_thinking")
# options billed above the standard prices (a value outside these), and betas that are
TIERS = {"speed": ("standard",), "inference_geo": ("global",)}
DEAR_BETAS = ("context-1m", "fast-mode")
HOUR_WRITE_FACTOR = 2.0  # a 1-hour cache write, in prompt-token prices
RESULT_BLOCKS = ("text",)  # inside a tool_result


class MessagesShape(Shape):
    endpoint = MESSAGES
    api = refusals.ANTHROPIC
    passed_headers = ("anthropic-version", "anthropic-beta")
    forward_query = True

    def bound(self, raw: bytes, cfg: LlmConfig, asked: Asked) -> Bound:
        body = parse_object(raw)
        model = model_of(body, cfg)
        stream = stream_of(body)
        none_of(body, ("mcp_servers", "container"), "billed by the upstream apart")
        standard_price(body, TIERS)
        _check_cache_ttl(body, cfg)
        _check_messages(body.get("messages"))
        _check_system(body.get("system"))
        typed = _check_tools(body.get("tools"))
        _check_context_management(body.get("context_management"))
        limit = capped(body, ("max_tokens",), cfg)
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens")
            if isinstance(budget, int) and budget >= limit:
                body["thinking"] = ({**thinking, "budget_tokens": limit - 1} if limit > 1
                                    else {"type": "disabled"})
        headers = passed(self.passed_headers, asked.headers)
        _check_betas(headers)
        if not any(k == "anthropic-version" for k, _ in headers):
            headers += (("anthropic-version", VERSION),)
        out = encode(body)
        return bound(cfg, self.endpoint, out, model, stream=stream,
                     prompt_tokens=len(out) + HIDDEN_TOKENS + HIDDEN_TOKENS_PER_TOOL * typed,
                     completion_tokens=limit, query=asked.query, headers=headers,
                     prompt_floor=prompt_floor(body),
                     prompt_price=max(cfg.price_prompt_per_1k, cfg.cache_read_price,
                                      cfg.cache_write_price))

    def usage(self, doc: Any) -> Usage | None:
        usage = doc.get("usage") if isinstance(doc, dict) else None
        if usage is None:
            return None
        if not isinstance(usage, dict):
            raise ValueError("usage is not an object")
        got = {k: count(usage.get(k)) for k in ("input_tokens", "output_tokens")}
        for k in ("cache_creation_input_tokens", "cache_read_input_tokens"):
            got[k] = 0 if usage.get(k) is None else count(usage[k])
        if any(v is None for v in got.values()):
            raise ValueError("usage is not counts")
        return Usage(input=got["input_tokens"] or 0, output=got["output_tokens"] or 0,
                     cache_read=got["cache_read_input_tokens"] or 0,
                     cache_write=got["cache_creation_input_tokens"] or 0)

    def stream(self, b: Bound) -> StreamMeter:
        return MessagesStream(b)

    def content(self, doc: Any) -> tuple[int, int]:
        blocks = doc.get("content") if isinstance(doc, dict) else None
        sizes = [_block_size(b) for b in blocks if isinstance(b, dict)] \
            if isinstance(blocks, list) else []
        return sum(1 for n in sizes if n), sum(sizes)


def _block_size(block: dict[str, Any]) -> int:
    """Content bytes of a block (a streamed block's start and deltas carry the same)."""
    tool_input = block.get("input")
    return text_size(block.get("text"), block.get("thinking"), block.get("data"),
                     json.dumps(tool_input) if tool_input else None)


def _check_betas(headers: tuple[tuple[str, str], ...]) -> None:
    for name, value in headers:
        if name != "anthropic-beta":
            continue
        for beta in (b.strip().lower() for b in value.split(",")):  # any case: the same
            if beta.startswith(DEAR_BETAS):
                raise Refused(f"the beta {beta!r} is billed above the node's prices (the 1M "
                              "context window past 200K prompt tokens, fast mode); leave it "
                              "out of anthropic-beta", param="anthropic-beta")


def _ttls(doc: Any) -> Iterator[Any]:
    """The ttl of every cache_control in the body."""
    if isinstance(doc, dict):
        cc = doc.get("cache_control")
        if isinstance(cc, dict) and cc.get("ttl") is not None:
            yield cc["ttl"]
        for v in doc.values():
            yield from _ttls(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _ttls(v)


def _check_cache_ttl(body: dict[str, Any], cfg: LlmConfig) -> None:
    """A cache write of a ttl other than 5 minutes is billed 2x a prompt token: refused when
    the node prices a write below that (its price is one for every write)."""
    if cfg.cache_write_price >= HOUR_WRITE_FACTOR * cfg.price_prompt_per_1k:
        return
    for ttl in _ttls(body):
        if ttl != "5m":
            raise Refused(f"a cache write of ttl {ttl!r} is billed {HOUR_WRITE_FACTOR:g}x a "
                          f"prompt token, above this node's price_cache_write_per_1k; use the "
                          "5-minute cache (leave ttl out)", param="cache_control")


def _blocks(content: Any, allowed: tuple[str, ...], where: str) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise Refused(f"{where} content must be a string or a list of blocks", param=where)
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in allowed:
            raise Refused(f"loopproof cannot bound the tokens of a {kind!r} block in {where}; "
                          f"send {', '.join(allowed)} blocks", param=where)
        if kind == "tool_result" and block.get("content") is not None:
            _blocks(block["content"], RESULT_BLOCKS, "tool_result")


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise Refused("messages must be a non-empty list", param="messages")
    for m in messages:
        if not isinstance(m, dict):
            raise Refused("each message must be an object", param="messages")
        _blocks(m.get("content"), BLOCKS, "messages")


def _check_system(system: Any) -> None:
    if system is not None:
        _blocks(system, ("text",), "system")


def _check_tools(tools: Any) -> int:
    """The Anthropic-defined client tools among `tools` (each adds its hidden prompt); refuse
    server tools."""
    if tools is None:
        return 0
    if not isinstance(tools, list):
        raise Refused("tools must be a list", param="tools")
    typed = 0
    for tool in tools:
        kind = tool.get("type") if isinstance(tool, dict) else "?"
        if kind in (None, "custom"):
            continue
        if isinstance(kind, str) and kind.startswith(CLIENT_TOOLS):
            typed += 1
            continue
        raise Refused(f"loopproof cannot bound the cost of the server tool {kind!r} (billed per "
                      "use, its results unseen); give the agent client tools", param="tools")
    return typed


def _check_context_management(cm: Any) -> None:
    edits = cm.get("edits") if isinstance(cm, dict) else None
    for edit in edits if isinstance(edits, list) else ():
        kind = edit.get("type") if isinstance(edit, dict) else None
        if isinstance(kind, str) and kind.startswith("compact"):
            raise Refused(f"loopproof cannot bound server-side compaction ({kind!r}: a second "
                          "sampling); compact in the client", param="context_management")


class MessagesStream(StreamMeter):
    """`event: <type>` / `data: {"type": ...}` events from `message_start` to `message_stop`."""

    def __init__(self, b: Bound) -> None:
        super().__init__(b)
        self.open: Any = None  # the index of the content block being streamed
        self.failed = False  # an `error` event: the stream did not end as the API ends one

    def step(self, event: bytes, data: bytes | None, doc: Any) -> Step:
        kind = doc.get("type") if isinstance(doc, dict) else None
        size = 0
        if kind == "message_start":
            message = doc.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            if isinstance(usage, dict):
                self.usage = {"usage": dict(usage)}
        elif kind == "message_delta":
            usage = doc.get("usage")
            if isinstance(usage, dict):  # cumulative counts: each overrides what came before
                merged = dict((self.usage or {}).get("usage") or {})
                merged.update({k: v for k, v in usage.items() if v is not None})
                self.usage = {"usage": merged}
        elif kind == "content_block_start":
            self.open = doc.get("index")
            block = doc.get("content_block")
            if isinstance(block, dict):
                size = _block_size(block)
        elif kind == "content_block_delta":
            delta = doc.get("delta")
            if isinstance(delta, dict):
                size = text_size(delta.get("text"), delta.get("partial_json"),
                                 delta.get("thinking"))
        elif kind == "content_block_stop":
            self.open = None
        elif kind == "message_stop":
            self.complete = not self.failed
        elif kind == "error":
            self.failed, self.complete = True, False
        return Step(1 if size else 0, size)

    def cut(self, seen: int) -> bytes:
        out = b""
        if self.open is not None:
            out += sse({"type": "content_block_stop", "index": self.open}, "content_block_stop")
        out += sse({"type": "message_delta",
                    "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                    "usage": {"output_tokens": seen}}, "message_delta")
        return out + sse({"type": "message_stop"}, "message_stop")
