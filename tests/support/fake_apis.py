"""Fake Anthropic Messages and OpenAI Responses upstreams for tests, on tests/support/fake_openai.py's
server: the same scripted `Reply` (content words are tokens; usage honest or lying; cache and
reasoning tokens; a tool call; a stream that breaks off, fails mid-way, or ignores max tokens),
answered in each API's own shape, streamed (its server-sent events) or not.

Why a worst-case tokenizer: the property the proxy promises is that its prompt bound is never
below what an honest upstream counts. So the fake counts as high as an honest one could: one
token per byte of every string in the request (a BPE token is at least a byte) plus what the
provider adds unseen (Anthropic's documented tool-use system prompt, 530 tokens at most, and 735
per Anthropic-defined tool; four tokens an item for the Responses template), and a chained
Responses call (`previous_response_id`) carries the input and output of the response it names.

    with fake_upstream([Reply("a b c", cache_read=5)]) as up:
        ...  # up.base_url serves /v1/messages, /v1/messages/count_tokens, /v1/responses,
             # /v1/chat/completions, /v1/completions and /v1/models
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.fake_openai import FakeServer, Reply, fake_openai

ANTHROPIC_TOOL_PROMPT, ANTHROPIC_TYPED_TOOL = 530, 735
RESPONSES_PER_ITEM = 4


def strings_bytes(doc: Any) -> int:
    """UTF-8 bytes of every string value in `doc` (what a byte-level tokenizer could count)."""
    if isinstance(doc, str):
        return len(doc.encode())
    if isinstance(doc, dict):
        return sum(strings_bytes(v) for v in doc.values())
    if isinstance(doc, list):
        return sum(strings_bytes(v) for v in doc)
    return 0


def anthropic_prompt(body: dict[str, Any]) -> int:
    tools = body.get("tools") or []
    typed = sum(1 for t in tools if isinstance(t, dict) and t.get("type") not in (None,
                                                                                  "custom"))
    hidden = (ANTHROPIC_TOOL_PROMPT if tools else 0) + ANTHROPIC_TYPED_TOOL * typed
    return max(1, strings_bytes({k: v for k, v in body.items()
                                 if k in ("system", "messages", "tools")}) + hidden)


def responses_prompt(body: dict[str, Any], chained: int = 0) -> int:
    items = body.get("input")
    n = len(items) if isinstance(items, list) else 1
    return max(1, strings_bytes({k: v for k, v in body.items()
                                 if k in ("instructions", "input", "tools")})
               + RESPONSES_PER_ITEM * n + chained)


def chat_prompt(body: dict[str, Any]) -> int:
    """A chat template's worst case: every string byte a token, and 4 tokens a message and 3
    for the generation prompt around them (vLLM's templates add about that)."""
    if "messages" in body:
        return (strings_bytes({k: body.get(k) for k in ("messages", "tools")})
                + 4 * len(body["messages"]) + 3)
    return max(1, strings_bytes(body.get("prompt")))


def _next(server: FakeServer, h: Any) -> Reply | None:
    """The next scripted reply (a plain string: its content), after its delay; None if the
    server is closing meanwhile."""
    r = server.next_reply()
    r = r if isinstance(r, Reply) else Reply(str(r))
    return r if h.pause(r.delay_s) else None


def _words(r: Reply, limit: int) -> list[str]:
    return r.content.split(" ")[:limit] + ["more"] * r.extra_tokens


# ---- Anthropic Messages --------------------------------------------------------------------
def anthropic_usage(r: Reply, prompt: int, output: int) -> Any:
    if isinstance(r.usage, dict):
        return r.usage
    cached = r.cache_read + r.cache_write
    honest = {"input_tokens": max(0, prompt - cached), "output_tokens": output,
              "cache_creation_input_tokens": r.cache_write,
              "cache_read_input_tokens": r.cache_read}
    return {"true": honest, "missing": None,
            "low": {**honest, "output_tokens": 1},
            "high": {**honest, "input_tokens": prompt * 10, "output_tokens": output * 10},
            "string": {**honest, "input_tokens": "12", "output_tokens": "3"}}[r.usage]


def messages(server: FakeServer, h: Any, body: dict[str, Any], raw: bytes) -> None:
    r = _next(server, h)
    if r is None:
        return None
    if r.status != 200:
        return h.send(r.status, json.dumps({"type": "error", "error": {
            "type": "overloaded_error" if r.status == 529 else "api_error",
            "message": "scripted failure"}}).encode())
    words = _words(r, body.get("max_tokens") or 10**6)
    tool_json = json.dumps(r.tool["input"]) if r.tool else ""
    pieces = [tool_json[i:i + 4] for i in range(0, len(tool_json), 4)]
    output = len(words) + len(pieces)
    usage = anthropic_usage(r, anthropic_prompt(body), output)
    content: list[dict[str, Any]] = [{"type": "text", "text": " ".join(words)}]
    if r.tool:
        content.append({"type": "tool_use", "id": "toolu_fake", "name": r.tool["name"],
                        "input": r.tool["input"]})
    message = {"id": "msg_fake", "type": "message", "role": "assistant",
               "model": body.get("model"), "content": content,
               "stop_reason": "tool_use" if r.tool else "end_turn", "stop_sequence": None}
    if not body.get("stream"):
        if usage is not None:
            message["usage"] = usage
        return h.send(200, json.dumps(message).encode())
    start_usage = None if usage is None else {**usage, "output_tokens": 1} \
        if isinstance(usage, dict) else usage
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {
            **message, "content": [], "stop_reason": None,
            **({"usage": start_usage} if start_usage is not None else {})}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"})]
    for i, w in enumerate(words):
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta",
                                                          "text": w if i == 0 else " " + w}}))
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    if r.tool:
        events.append(("content_block_start", {"type": "content_block_start", "index": 1,
                                               "content_block": {"type": "tool_use",
                                                                 "id": "toolu_fake",
                                                                 "name": r.tool["name"],
                                                                 "input": {}}}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": 1,
                                            "delta": {"type": "input_json_delta",
                                                      "partial_json": p}}) for p in pieces]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 1}))
    delta_usage = ({"output_tokens": usage.get("output_tokens")}
                   if isinstance(usage, dict) else None)
    events.append(("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": message["stop_reason"], "stop_sequence": None},
        **({"usage": delta_usage} if delta_usage is not None else {})}))
    events.append(("message_stop", {"type": "message_stop"}))
    return _stream(h, r, events, error=("error", {"type": "error", "error": {
        "type": "overloaded_error", "message": "Overloaded"}}))


def count_tokens(server: FakeServer, h: Any, body: dict[str, Any], raw: bytes) -> None:
    return h.send(200, json.dumps({"input_tokens": anthropic_prompt(body)}).encode())


# ---- OpenAI Responses ----------------------------------------------------------------------
def responses_usage(r: Reply, prompt: int, output: int, reasoning: int) -> Any:
    if isinstance(r.usage, dict):
        return r.usage
    prompt = max(prompt, r.cache_read)  # a prompt holds at least what was read from cache
    honest = {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": r.cache_read},
              "output_tokens": output,
              "output_tokens_details": {"reasoning_tokens": reasoning},
              "total_tokens": prompt + output}
    return {"true": honest, "missing": None,
            "low": {**honest, "output_tokens": 1,
                    "output_tokens_details": {"reasoning_tokens": 0}},
            "high": {**honest, "input_tokens": prompt * 10, "output_tokens": output * 10},
            "string": {**honest, "input_tokens": "12"}}[r.usage]


def responses(server: FakeServer, ids: Iterator[int], stored: dict[str, int], h: Any,
              body: dict[str, Any], raw: bytes) -> None:
    r = _next(server, h)
    if r is None:
        return None
    if r.status != 200:
        return h.send(r.status, json.dumps({"error": {
            "message": "scripted failure", "type": "server_error", "param": None,
            "code": None}}).encode())
    prev = body.get("previous_response_id")
    if prev is not None and prev not in stored:
        return h.send(400, json.dumps({"error": {"message": f"no response {prev}",
                                                 "type": "invalid_request_error",
                                                 "param": "previous_response_id",
                                                 "code": None}}).encode())
    prompt = responses_prompt(body, stored.get(prev, 0) if prev else 0)
    limit = body.get("max_output_tokens") or 10**6
    reasoning = min(r.reasoning, limit)  # max_output_tokens bounds reasoning too
    words = _words(r, limit - reasoning)
    tool_json = json.dumps(r.tool["input"]) if r.tool else ""
    pieces = [tool_json[i:i + 4] for i in range(0, len(tool_json), 4)]
    output = reasoning + len(words) + len(pieces)
    usage = responses_usage(r, prompt, output, reasoning)
    rid = f"resp_fake_{next(ids)}"
    if body.get("store", True) is not False:
        stored[rid] = prompt + output
    text = " ".join(words)
    items: list[dict[str, Any]] = []
    if reasoning:
        items.append({"type": "reasoning", "id": "rs_fake", "summary": []})
    items.append({"type": "message", "id": "msg_fake", "role": "assistant",
                  "status": "completed", "content": [{"type": "output_text", "text": text,
                                                      "annotations": []}]})
    if r.tool:
        items.append({"type": "function_call", "id": "fc_fake", "call_id": "call_fake",
                      "name": r.tool["name"], "arguments": tool_json, "status": "completed"})
    response = {"id": rid, "object": "response", "created_at": 0, "status": "completed",
                "model": body.get("model"), "output": items, "usage": usage,
                "error": None, "incomplete_details": None}
    if not body.get("stream"):
        if usage is None:
            del response["usage"]
        return h.send(200, json.dumps(response).encode())
    head = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": head}),
        ("response.in_progress", {"type": "response.in_progress", "response": head}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "output_index": 0, "item": {**items[-1 if not r.tool
                                                                            else -2],
                                                                    "content": []}})]
    for i, w in enumerate(words):
        events.append(("response.output_text.delta", {
            "type": "response.output_text.delta", "item_id": "msg_fake", "output_index": 0,
            "content_index": 0, "delta": w if i == 0 else " " + w}))
    events.append(("response.output_text.done", {"type": "response.output_text.done",
                                                 "item_id": "msg_fake", "text": text}))
    events += [("response.function_call_arguments.delta", {
        "type": "response.function_call_arguments.delta", "item_id": "fc_fake",
        "output_index": 1, "delta": p}) for p in pieces]
    end = {**response}
    if usage is None:
        end["usage"] = None
    events.append(("response.completed", {"type": "response.completed", "response": end}))
    for seq, (_, doc) in enumerate(events):
        doc["sequence_number"] = seq
    return _stream(h, r, events, error=("response.failed", {
        "type": "response.failed", "response": {**head, "status": "failed", "error": {
            "code": "server_error", "message": "scripted failure"}}}))


def _stream(h: Any, r: Reply, events: list[tuple[str, dict[str, Any]]],
            error: tuple[str, dict[str, Any]]) -> None:
    """Send `events` as server-sent events (`event:` and `data:` lines), breaking off half-way
    (`break_stream`) or failing there (`fail_stream`: the API's error event)."""
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Connection", "close")
    h.end_headers()
    h.close_connection = True
    try:
        for i, (name, doc) in enumerate(events):
            if (r.break_stream or r.fail_stream) and i == len(events) // 2:
                if r.fail_stream:
                    h.wfile.write(f"event: {error[0]}\ndata: {json.dumps(error[1])}\n\n"
                                  .encode())
                    h.wfile.flush()
                return None
            h.wfile.write(f"event: {name}\ndata: {json.dumps(doc)}\n\n".encode())
            h.wfile.flush()
            if not h.pause(r.chunk_delay_s):
                return None
    except OSError:  # the client (the proxy) cut the stream
        return None
    return None


@contextmanager
def fake_upstream(replies: list[Any]) -> Iterator[FakeServer]:
    """tests/support/fake_openai.py's server, also speaking Anthropic Messages and OpenAI Responses."""
    with fake_openai(replies) as server:
        stored: dict[str, int] = {}
        server.count_prompt = chat_prompt
        server.routes.update({
            "/v1/messages": functools.partial(messages, server),
            "/v1/messages/count_tokens": functools.partial(count_tokens, server),
            "/v1/responses": functools.partial(responses, server, itertools.count(1), stored)})
        yield server
