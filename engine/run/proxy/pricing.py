"""What one model call may cost, before it is sent, and whether the upstream's usage is believable.

Why an upper bound and not an estimate: the reservation is made before the request leaves, and
the model (`Reserve`) checks it against c_v and B; the call may never be charged more. So:

- prompt tokens <= the bytes of the request as forwarded (every token of a BPE vocabulary is at
  least one byte, and the body holds every message, tool and template word the upstream reads);
- completion tokens <= max_tokens (the request's, capped at the node's `max_tokens`, which is
  also set when the request asks for none) x the choices it asks for (`n`, `best_of`, and for
  /v1/completions the number of prompts);
- inputs whose tokens bytes do not bound (image, audio and file parts, audio output, web
  search) are refused before anything is reserved.

A usage is believed only if both counts are integers within those bounds and, for a stream, the
completion count is at least the content chunks the proxy relayed; anything else (missing, a
string, a negative, more than asked) is charged the reservation in full.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from loopproof.engine.run.proxy.config import LlmConfig

MAX_BODY = 8 * 1024 * 1024  # bytes of one request body
MAX_TOKEN_BYTES = 64  # a relayed stream is cut past this many content bytes per reserved token
CHAT, COMPLETIONS, MODELS = "/v1/chat/completions", "/v1/completions", "/v1/models"
UNBOUNDED_PARTS = ("image_url", "input_audio", "file", "image", "audio")
REFUSED_FIELDS = ("audio", "web_search_options")


class Refused(Exception):
    """The proxy will not forward this request: an OpenAI-style error with this HTTP status."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = (status, message, kind,
                                                                        code, param)

    def body(self) -> bytes:
        return error_body(self.message, self.kind, self.code, self.param)


def error_body(message: str, kind: str, code: str | None = None,
               param: str | None = None) -> bytes:
    """The OpenAI error shape: {"error": {"message", "type", "param", "code"}}."""
    return json.dumps({"error": {"message": message, "type": kind, "param": param,
                                 "code": code}}).encode()


@dataclass(frozen=True)
class Bound:
    """A request as it will be forwarded, and the most it may cost."""

    endpoint: str
    body: bytes  # what is sent upstream: max_tokens capped, include_usage set on a stream
    model: str
    stream: bool
    client_usage: bool  # the client asked for the usage chunk itself
    prompt_tokens: int
    completion_tokens: int
    cost: float
    prompt_counted_by: str = "bytes"  # "bytes" (the body's length) or "tokenize" (upstream)


def with_prompt(b: Bound, tokens: int, cfg: LlmConfig) -> Bound:
    """`b` with its prompt bound the upstream's exact count (engine/run/proxy/tokens.py)."""
    return dataclasses.replace(b, prompt_tokens=tokens, prompt_counted_by="tokenize",
                               cost=cost(cfg, tokens, b.completion_tokens))


def up(x: float) -> float:
    """Spend rounded up to the meter's 1e-6 grain (a bound must never round down)."""
    return math.ceil(x * 1e6 - 1e-6) / 1e6


def cost(cfg: LlmConfig, prompt_tokens: int, completion_tokens: int) -> float:
    return up((prompt_tokens * cfg.price_prompt_per_1k
               + completion_tokens * cfg.price_completion_per_1k) / 1000.0)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def bound_request(endpoint: str, raw: bytes, cfg: LlmConfig) -> Bound:
    """Parse, check and rewrite a chat or completions request; its cost bound. Raises Refused."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise Refused(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise Refused(400, "the request body is not a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Refused(400, "the request names no model", param="model")
    for f in REFUSED_FIELDS:
        if body.get(f) is not None:
            raise Refused(400, f"loopproof cannot bound the cost of {f!r}; leave it out",
                          param=f)
    modalities = body.get("modalities")
    if modalities is not None and modalities != ["text"]:
        raise Refused(400, "loopproof bounds text output only", param="modalities")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise Refused(400, "stream must be true or false", param="stream")
    n = _int(body.get("n", 1))
    if n is None or not 1 <= n <= 128:
        raise Refused(400, "n must be an integer in 1..128", param="n")
    choices = n
    if endpoint == CHAT:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise Refused(400, "messages must be a non-empty list", param="messages")
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list):
                for part in content:
                    kind = part.get("type") if isinstance(part, dict) else None
                    if kind != "text":
                        raise Refused(400, f"loopproof cannot bound the tokens of a {kind!r} "
                                      "content part; send text", param="messages")
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt
                                       and all(_int(t) is not None for t in prompt)):
            prompts = 1
        elif isinstance(prompt, list) and prompt and all(
                isinstance(p, str) or (isinstance(p, list) and all(_int(t) is not None
                                                                    for t in p))
                for p in prompt):
            prompts = len(prompt)
        else:
            raise Refused(400, "prompt must be a string, a list of strings or token lists",
                          param="prompt")
        best_of = _int(body.get("best_of", n))
        if best_of is None or not n <= best_of <= 128:
            raise Refused(400, "best_of must be an integer in n..128", param="best_of")
        choices = best_of * prompts
    asked = [k for k in ("max_tokens", "max_completion_tokens") if body.get(k) is not None]
    limit = cfg.max_tokens
    for k in asked:
        v = _int(body[k])
        if v is None or v < 1:
            raise Refused(400, f"{k} must be an integer >= 1", param=k)
        limit = min(limit, v)
    for k in asked or ["max_tokens"]:
        body[k] = limit
    client_usage = False
    if stream:
        opts = body.get("stream_options")
        if opts is not None and not isinstance(opts, dict):
            raise Refused(400, "stream_options must be an object", param="stream_options")
        client_usage = bool((opts or {}).get("include_usage"))
        body["stream_options"] = {**(opts or {}), "include_usage": True}
    out = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    completion = limit * choices
    return Bound(endpoint, out, model, stream, client_usage, len(out), completion,
                 cost(cfg, len(out), completion))


def believed(usage: Any, bound: Bound, seen: int = 0) -> tuple[int, int] | None:
    """(prompt, completion) tokens if `usage` is believable for `bound`, else None."""
    if not isinstance(usage, dict):
        return None
    p, c = _int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens"))
    if p is None or c is None:
        return None
    if not (0 <= p <= bound.prompt_tokens and seen <= c <= bound.completion_tokens):
        return None
    return p, c


def content_tokens(chunk: Any) -> tuple[int, int]:
    """(content-bearing choice deltas, content bytes) of one streamed chunk: each delta that
    carries text is at least one token; the bytes cap a chunk that packs many."""
    deltas = n_bytes = 0
    for choice in chunk.get("choices") or () if isinstance(chunk, dict) else ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        texts = [choice.get("text"), delta.get("content"), delta.get("refusal"),
                 delta.get("reasoning_content")]
        for call in delta.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                texts += [fn.get("name"), fn.get("arguments")]
        size = sum(len(t.encode()) for t in texts if isinstance(t, str))
        if size:
            deltas += 1
            n_bytes += size
    return deltas, n_bytes
