"""The OpenAI Responses shape: `POST /v1/responses` (what Codex CLI speaks).

Bound: the body's bytes plus `HIDDEN_TOKENS` (what the upstream adds unseen around instructions
and tools), at the higher of the prompt and cache-read prices (`input_tokens_details.
cached_tokens` are read from the cache), plus `max_output_tokens` (capped at the node's
`max_tokens`, set when absent: Codex sends none), which covers reasoning too.

A stored response (`store` is true unless set false) can be chained to: a later request's
`previous_response_id` makes the upstream prepend that response's whole context (its input and
its output, reasoning included), which the body does not hold. So the proxy remembers, per
attempt, the context of each response it relayed (its believed input + output tokens, or its
bound when its usage was not believed) and adds the chained one to the prompt bound; a
`previous_response_id` the attempt's proxy did not relay (another attempt's, or one made
elsewhere) is refused (400): send the whole conversation as `input` with `store: false`, as
Codex does. Also refused before any reserve: `conversation` (server-held items), `prompt` (a
stored template), `background` (billed after the answer), server-side compaction
(`context_management`), hosted tools (web search, file search, code interpreter, image
generation, computer use, remote MCP: billed per use, their results unseen; Codex: set
`web_search = "disabled"`), also named by `tool_choice`, `item_reference` items and image,
file and audio parts, a `reasoning` or `compaction` item without its `encrypted_content` (by
its id alone, a stored item's tokens the body does not hold), a `service_tier` billed above
the standard prices (`priority`, `scale`).

Usage from the answer's `usage` (a stream's `response.completed`, or `response.incomplete` when
it stopped at max_output_tokens): `input_tokens` (of which `input_tokens_details.cached_tokens`
were cached) and `output_tokens` (of which `output_tokens_details.reasoning_tokens` reasoned:
billed as output). `response.failed`, an `error` event or a stream that breaks off is charged its
reservation. A cut ends the client's stream with `response.incomplete` (`max_output_tokens`).
Content: each delta of DELTAS, and what a `response.output_item.done` item holds past the
deltas of its `output_index` (an upstream may send an item whole, with no delta).
"""

from __future__ import annotations

from typing import Any

from loopproof.engine.run.proxy import refusals
from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.proxy.pricing import Bound, Refused, Usage, bound, count
from loopproof.engine.run.proxy.shape import (
    RESPONSES,
    Asked,
    Shape,
    Step,
    StreamMeter,
    capped,
    encode,
    model_of,
    none_of,
    parse_object,
    prompt_floor,
    sse,
    standard_price,
    stream_of,
    text_size,
)

HIDDEN_TOKENS = 1024  # what the upstream wraps around instructions, items and tools, unseen
ITEMS = ("message", "function_call", "function_call_output", "reasoning", "custom_tool_call",
         "custom_tool_call_output", "local_shell_call", "local_shell_call_output", "shell_call",
         "shell_call_output", "apply_patch_call", "apply_patch_call_output", "compaction",
         "additional_tools")  # Codex's code mode: tool definitions sent as an input item
PARTS = ("input_text", "output_text", "refusal")
TOOLS = ("function", "custom", "local_shell", "shell", "apply_patch")  # run by the client
# (and a `namespace`, which groups tools: allowed when every tool in it is)
REFUSED = ("background", "conversation", "prompt", "context_management")
DELTAS = ("response.output_text.delta", "response.refusal.delta",
          "response.function_call_arguments.delta", "response.custom_tool_call_input.delta",
          "response.reasoning_text.delta")
ENDS = ("response.completed", "response.incomplete")  # a stream's end, with its usage
TIERS = {"service_tier": ("auto", "default", "flex")}  # billed at most the standard prices
SEALED = ("reasoning", "compaction")  # items whose tokens are their encrypted_content


class ResponsesShape(Shape):
    endpoint = RESPONSES
    api = refusals.RESPONSES

    def bound(self, raw: bytes, cfg: LlmConfig, asked: Asked) -> Bound:
        body = parse_object(raw)
        model = model_of(body, cfg)
        stream = stream_of(body)
        none_of(body, REFUSED, "state or work the upstream holds apart")
        standard_price(body, TIERS)
        _check_input(body.get("input"))
        if not isinstance(body.get("instructions"), str | None):
            raise Refused("instructions must be a string", param="instructions")
        _check_tools(body.get("tools"))
        _check_tool_choice(body.get("tool_choice"))
        limit = capped(body, ("max_output_tokens",), cfg)
        chained = 0
        prev = body.get("previous_response_id")
        if prev is not None:
            known = asked.prior(prev) if isinstance(prev, str) else None
            if known is None:
                raise Refused("previous_response_id names no response this attempt's proxy "
                              "relayed (stored responses chain within one attempt); send the "
                              "whole conversation as input, with store: false",
                              param="previous_response_id")
            chained = known
        out = encode(body)
        return bound(cfg, self.endpoint, out, model, stream=stream,
                     prompt_tokens=len(out) + HIDDEN_TOKENS + chained, completion_tokens=limit,
                     prompt_floor=prompt_floor(body),
                     prompt_price=max(cfg.price_prompt_per_1k, cfg.cache_read_price),
                     remember=body.get("store", True) is not False)

    def usage(self, doc: Any) -> Usage | None:
        usage = doc.get("usage") if isinstance(doc, dict) else None
        if usage is None:
            return None
        if not isinstance(usage, dict):
            raise ValueError("usage is not an object")
        i, o = count(usage.get("input_tokens")), count(usage.get("output_tokens"))
        cached = _detail(usage, "input_tokens_details", "cached_tokens")
        reasoning = _detail(usage, "output_tokens_details", "reasoning_tokens")
        if i is None or o is None or cached is None or reasoning is None or cached > i \
                or reasoning > o:
            raise ValueError("usage is not counts")
        return Usage(input=i - cached, output=o, cache_read=cached)

    def stream(self, b: Bound) -> StreamMeter:
        return ResponsesStream(b)

    def response_id(self, doc: Any) -> str | None:
        rid = doc.get("id") if isinstance(doc, dict) else None
        return rid if isinstance(rid, str) else None

    def content(self, doc: Any) -> tuple[int, int]:
        """Output items' text (message parts, reasoning text), function arguments, custom
        tool input: what the stream's deltas would carry."""
        items = doc.get("output") if isinstance(doc, dict) else None
        sizes = [_item_size(i) for i in (items if isinstance(items, list) else ())]
        return sum(1 for n in sizes if n), sum(sizes)


def _item_size(item: Any) -> int:
    """Content bytes of one output item (what its deltas carry, or a done item holds)."""
    if not isinstance(item, dict):
        return 0
    parts = item.get("content")
    return sum(text_size(p.get("text"), p.get("refusal"))
               for p in (parts if isinstance(parts, list) else []) if isinstance(p, dict)) \
        + text_size(item.get("arguments"), item.get("input"))

def _detail(usage: dict[str, Any], where: str, name: str) -> int | None:
    """A count inside a usage's details object: 0 when absent, None when not a count."""
    details = usage.get(where)
    if details is None:
        return 0
    if not isinstance(details, dict):
        return None
    v = details.get(name)
    return 0 if v is None else count(v)


def _parts(content: Any, where: str) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise Refused(f"{where} content must be a string or a list of parts", param="input")
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in PARTS:
            raise Refused(f"loopproof cannot bound the tokens of a {kind!r} part in {where}; "
                          f"send {', '.join(PARTS)}", param="input")


def _check_input(items: Any) -> None:
    if isinstance(items, str):
        return
    if not isinstance(items, list):
        raise Refused("input must be a string or a list of items", param="input")
    for item in items:
        if not isinstance(item, dict):
            raise Refused("each input item must be an object", param="input")
        kind = item.get("type", "message" if "role" in item else None)
        if kind not in ITEMS:
            raise Refused(f"loopproof cannot bound the tokens of a {kind!r} input item; send "
                          "the items themselves", param="input")
        if kind in SEALED and not isinstance(item.get("encrypted_content"), str):
            raise Refused(f"a {kind!r} input item must carry its encrypted_content (by id "
                          "alone the upstream reads a stored item the body does not hold); "
                          "ask include: [\"reasoning.encrypted_content\"]", param="input")
        if kind == "additional_tools":  # client tools only, as in `tools`; bounded as bytes
            _check_tools(item.get("tools") or [])
        elif kind == "message":
            _parts(item.get("content"), "a message")
        elif kind in ("function_call_output", "custom_tool_call_output"):
            _parts(item.get("output"), kind)  # a string or text parts (no image, no file)


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise Refused("tools must be a list", param="tools")
    for tool in tools:
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "namespace":  # a named group of tools (Codex's sub-agent tools): its own
            _check_tools(tool.get("tools") or [])
            continue
        if kind not in TOOLS:
            raise Refused(f"loopproof cannot bound the cost of the hosted tool {kind!r} (billed "
                          "per use, its results unseen); give the agent client tools (Codex: "
                          "web_search = \"disabled\")", param="tools")


def _check_tool_choice(choice: Any) -> None:
    """A hosted tool named by tool_choice (alone, or among allowed_tools) is refused like one
    in `tools`."""
    if not isinstance(choice, dict):
        return  # "auto", "none", "required"
    kind = choice.get("type")
    if kind == "allowed_tools":
        _check_tools(choice.get("tools") or [])
    elif kind not in TOOLS:
        raise Refused(f"loopproof cannot bound the cost of the hosted tool {kind!r} named by "
                      "tool_choice; choose a client tool", param="tool_choice")


class ResponsesStream(StreamMeter):
    """`event: response.*` events from `response.created` to `response.completed`."""

    def __init__(self, b: Bound) -> None:
        super().__init__(b)
        self.sequence = 0
        self.failed = False
        self.streamed: dict[int | None, int] = {}  # output_index -> content bytes of deltas

    def step(self, event: bytes, data: bytes | None, doc: Any) -> Step:
        if not isinstance(doc, dict):
            return Step()
        kind = doc.get("type")
        seq = doc.get("sequence_number")
        if isinstance(seq, int) and not isinstance(seq, bool):
            self.sequence = max(self.sequence, seq)
        response = doc.get("response")
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            self.response_id = response["id"]
        index = doc.get("output_index")
        key = index if isinstance(index, int) else None
        if kind in DELTAS:
            size = text_size(doc.get("delta"))
            self.streamed[key] = self.streamed.get(key, 0) + size
            return Step(1 if size else 0, size)
        if kind == "response.output_item.done":  # content its deltas did not carry counts too
            extra = max(0, _item_size(doc.get("item")) - self.streamed.get(key, 0))
            return Step(1 if extra else 0, extra)
        if kind in ENDS and isinstance(response, dict):
            self.usage, self.complete = response, not self.failed
        elif kind in ("response.failed", "error"):
            self.failed, self.complete = True, False
        return Step()

    def cut(self, seen: int) -> bytes:
        return sse({"type": "response.incomplete", "sequence_number": self.sequence + 1,
                    "response": {"id": self.response_id or "loopproof-cut",
                                 "object": "response", "status": "incomplete",
                                 "incomplete_details": {"reason": "max_output_tokens"},
                                 "model": self.bound.model, "output": [], "usage": None}},
                   "response.incomplete")
