"""The OpenAI chat and text completions shapes: `POST /v1/chat/completions`, `/v1/completions`.

Bound: the body's bytes (or the upstream's /tokenize count, engine/run/proxy/tokens.py) at the
prompt price, or the cache-read price if higher (`prompt_tokens_details.cached_tokens` are read
from the cache), plus `max_tokens` (or `max_completion_tokens`, capped at the node's, set when
absent) x the choices (`n`, or `best_of` where an upstream takes it: vLLM samples that many; for
/v1/completions `best_of` x the number of prompts). Refused: image, audio and file content
parts, `audio` (also an assistant message's reference to an earlier audio answer), non-text
`modalities`, `web_search_options`, `prediction` (rejected predicted tokens are billed as
completion tokens beyond max_tokens), `chat_template` (vLLM renders the prompt with it: a
worker's template may repeat the messages past their bytes), a `service_tier` billed above the
standard prices (`priority`, `scale`).

Stream: `stream_options.include_usage` is set so the upstream reports usage in a last chunk
(`choices: []`), passed on only if the client asked for it; one token per content-bearing choice
delta; the stream is complete at `data: [DONE]`; a cut ends it with `finish_reason: "length"`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from loopproof.engine.run.proxy import refusals
from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.proxy.pricing import Bound, Refused, Usage, bound, count
from loopproof.engine.run.proxy.shape import (
    CHAT,
    Asked,
    Shape,
    Step,
    StreamMeter,
    capped,
    encode,
    model_of,
    parse_object,
    prompt_floor,
    standard_price,
    stream_of,
    text_size,
)

REFUSED_FIELDS = {  # field -> why its cost is not bounded
    "audio": "audio tokens are not bytes of the body",
    "web_search_options": "a search is billed per use, its results unseen",
    "prediction": "rejected predicted tokens are billed as completion tokens past max_tokens",
    "chat_template": "the template makes the prompt, past the bytes of the messages",
}
TIERS = {"service_tier": ("auto", "default", "flex")}  # billed at most the standard prices


class ChatShape(Shape):
    """`/v1/chat/completions` (and, with `endpoint = COMPLETIONS`, `/v1/completions`)."""

    api = refusals.OPENAI

    def __init__(self, endpoint: str = CHAT) -> None:
        self.endpoint = endpoint

    def bound(self, raw: bytes, cfg: LlmConfig, asked: Asked) -> Bound:
        body = parse_object(raw)
        model = model_of(body, cfg)
        for f, why in REFUSED_FIELDS.items():
            if body.get(f) is not None:
                raise Refused(f"loopproof cannot bound the cost of {f!r} ({why}); leave it "
                              "out", param=f)
        standard_price(body, TIERS)
        modalities = body.get("modalities")
        if modalities is not None and modalities != ["text"]:
            raise Refused("loopproof bounds text output only", param="modalities")
        stream = stream_of(body)
        n = body.get("n", 1)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 128:
            raise Refused("n must be an integer in 1..128", param="n")
        choices = (_best_of(body, n) if self.endpoint == CHAT
                   else _completion_choices(body, n))
        if self.endpoint == CHAT:
            _check_messages(body.get("messages"))
        limit = capped(body, ("max_tokens", "max_completion_tokens"), cfg)
        client_usage = False
        if stream:
            opts = body.get("stream_options")
            if opts is not None and not isinstance(opts, dict):
                raise Refused("stream_options must be an object", param="stream_options")
            client_usage = bool((opts or {}).get("include_usage"))
            body["stream_options"] = {**(opts or {}), "include_usage": True}
        out = encode(body)
        return bound(cfg, self.endpoint, out, model, stream=stream, prompt_tokens=len(out),
                     prompt_floor=prompt_floor(body),
                     completion_tokens=limit * choices, client_usage=client_usage,
                     prompt_price=max(cfg.price_prompt_per_1k, cfg.cache_read_price))

    def usage(self, doc: Any) -> Usage | None:
        usage = doc.get("usage") if isinstance(doc, dict) else None
        if usage is None:
            return None
        if not isinstance(usage, dict):
            raise ValueError("usage is not an object")
        p, c = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        k = 0 if cached is None else count(cached)
        if p is None or c is None or k is None or k > p:
            raise ValueError("usage is not counts")
        return Usage(input=p - k, output=c, cache_read=k)

    def stream(self, b: Bound) -> StreamMeter:
        return ChatStream(b)

    def content(self, doc: Any) -> tuple[int, int]:
        return _content(doc, "message")


def _best_of(body: dict[str, Any], n: int) -> int:
    """The sequences a request makes the upstream sample: best_of (>= n) where it is given
    (vLLM takes it in chat too), else n."""
    if body.get("best_of") is None:
        return n
    best_of = body["best_of"]
    if isinstance(best_of, bool) or not isinstance(best_of, int) or not n <= best_of <= 128:
        raise Refused("best_of must be an integer in n..128", param="best_of")
    return best_of


def _completion_choices(body: dict[str, Any], n: int) -> int:
    """best_of (>= n) x the number of prompts of a /v1/completions request."""
    prompt = body.get("prompt")
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt
                                   and all(_token(t) for t in prompt)):
        prompts = 1
    elif isinstance(prompt, list) and prompt and all(
            isinstance(p, str) or (isinstance(p, list) and all(_token(t) for t in p))
            for p in prompt):
        prompts = len(prompt)
    else:
        raise Refused("prompt must be a string, a list of strings or token lists",
                      param="prompt")
    return _best_of(body, n) * prompts


def _token(t: Any) -> bool:
    return isinstance(t, int) and not isinstance(t, bool)


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise Refused("messages must be a non-empty list", param="messages")
    for m in messages:
        if not isinstance(m, dict):
            raise Refused("each message must be an object", param="messages")
        if m.get("audio") is not None:  # an earlier audio answer, by id: tokens unseen
            raise Refused("loopproof cannot bound the tokens of a message's 'audio'; send its "
                          "transcript as text", param="messages")
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise Refused("a message's content must be a string or a list of parts",
                          param="messages")
        if isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind != "text":
                    raise Refused(f"loopproof cannot bound the tokens of a {kind!r} content "
                                  "part; send text", param="messages")


class ChatStream(StreamMeter):
    """`data: {chunk}` events ending `data: [DONE]`; the usage is the last chunk's."""

    def __init__(self, b: Bound) -> None:
        super().__init__(b)
        self.last: dict[str, Any] = {}

    def step(self, event: bytes, data: bytes | None, doc: Any) -> Step:
        if data is None or data == b"[DONE]":
            self.complete = self.complete or data == b"[DONE]"
            return Step()
        tokens, size = content_tokens(doc)
        relay = True
        if isinstance(doc, dict):
            self.last = doc
            if doc.get("usage") is not None:
                self.usage = doc
                relay = self.bound.client_usage or bool(doc.get("choices"))
        return Step(tokens, size, relay)

    def cut(self, seen: int) -> bytes:
        b, last = self.bound, self.last
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if b.endpoint == CHAT:
            choice["delta"] = {}
            kind = "chat.completion.chunk"
        else:
            choice["text"] = ""
            kind = "text_completion"
        chunk = {"id": last.get("id", "loopproof-cut"), "object": kind,
                 "created": last.get("created", int(time.time())), "model": b.model,
                 "choices": [choice]}
        return b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"


def content_tokens(chunk: Any) -> tuple[int, int]:
    """(content-bearing choice deltas, content bytes) of one streamed chunk: each delta that
    carries text is at least one token; the bytes cap a chunk that packs many."""
    return _content(chunk, "delta")


def _content(doc: Any, where: str) -> tuple[int, int]:
    """(choices carrying text, its bytes) of a chunk's deltas or a whole answer's messages:
    content, refusal, reasoning (vLLM's `reasoning_content`, or `reasoning`), tool calls."""
    pieces = n_bytes = 0
    for choice in doc.get("choices") or () if isinstance(doc, dict) else ():
        if not isinstance(choice, dict):
            continue
        got = choice.get(where)
        part: dict[str, Any] = got if isinstance(got, dict) else {}
        texts = [choice.get("text"), part.get("content"), part.get("refusal"),
                 part.get("reasoning_content"), part.get("reasoning")]
        calls = part.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                texts += [fn.get("name"), fn.get("arguments")]
        size = text_size(*texts)
        if size:
            pieces += 1
            n_bytes += size
    return pieces, n_bytes
