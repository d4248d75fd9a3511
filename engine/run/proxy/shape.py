"""What the proxy needs to know of an API shape to meter it, and the wire format they share.

Why a shape: three APIs carry model calls (OpenAI chat and text completions, OpenAI Responses,
Anthropic Messages) and each is metered alike (engine/run/proxy/call.py: reserve the bound, forward,
relay, settle, record), but each names its fields, its usage and its stream events its own way.
A `Shape` says, for one endpoint: how a request is checked, rewritten and bounded (`bound`), how
a whole answer's usage reads (`usage`), how a stream is followed (`StreamMeter`: the content
deltas it relays, the usage it reports, whether it ended as the API ends a stream, and the events
that end it early when it is cut), which headers go upstream and in which API its refusals are
answered (engine/run/proxy/refusals.py). The shapes are in chat.py, messages.py, responses.py;
engine/run/proxy/shapes.py maps paths to them.

Server-sent events (all three stream with them) are read here: lines up to a blank line, the
`data:` payload, its JSON.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.proxy.pricing import Bound, Refused, Usage

CHAT, COMPLETIONS, MODELS = "/v1/chat/completions", "/v1/completions", "/v1/models"
MESSAGES, COUNT_TOKENS, RESPONSES = "/v1/messages", "/v1/messages/count_tokens", "/v1/responses"
MAX_HEADER = 4096  # bytes of one passed-on header value


@dataclass(frozen=True)
class Asked:
    """What a request carries besides its body: its query string, its headers, and what the
    attempt's proxy knows of earlier calls (the context of a stored response, by id)."""

    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    prior: Callable[[str], int | None] = lambda _id: None


@dataclass
class Step:
    """One stream event: the content tokens (deltas) and bytes it carries, and whether the
    client gets it (a usage chunk the client did not ask for is not relayed)."""

    tokens: int = 0
    size: int = 0
    relay: bool = True


class StreamMeter:
    """Follows one relayed stream. `usage` is the usage the stream reported (None: none),
    `complete` whether it ended as the API ends a stream, `response_id` the upstream's id of
    the answer (Responses: for a later call's previous_response_id)."""

    def __init__(self, b: Bound) -> None:
        self.bound = b
        self.usage: Any = None
        self.complete = False
        self.response_id: str | None = None

    def step(self, event: bytes, data: bytes | None, doc: Any) -> Step:
        raise NotImplementedError

    def cut(self, seen: int) -> bytes:
        """The events that end the client's stream as the upstream should have, at its max
        tokens (`seen`: the content deltas relayed)."""
        raise NotImplementedError


class Shape:
    """One metered endpoint of one API (see the module)."""

    endpoint = ""
    api = ""  # which refusal table row answers it (refusals.OPENAI, RESPONSES, ANTHROPIC)
    passed_headers: tuple[str, ...] = ()  # the client's headers sent on to the upstream
    forward_query = False  # the request's query string goes upstream too

    def bound(self, raw: bytes, cfg: LlmConfig, asked: Asked) -> Bound:
        """Parse, check and rewrite a request; its cost bound. Raises Refused."""
        raise NotImplementedError

    def usage(self, doc: Any) -> Usage | None:
        """The usage a whole answer (or a stream's usage) reports: None when it reports none;
        ValueError when what it reports is not counts."""
        raise NotImplementedError

    def stream(self, b: Bound) -> StreamMeter:
        raise NotImplementedError

    def response_id(self, doc: Any) -> str | None:
        """The upstream's id of a whole answer, kept for a later call that chains to it."""
        return None


# ---- checks the shapes share ---------------------------------------------------------------
def parse_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise Refused("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise Refused("the request body is not a JSON object")
    return body


def model_of(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Refused("the request names no model", param="model")
    return model


def stream_of(body: dict[str, Any]) -> bool:
    stream = body.get("stream", False)
    if stream is None:
        return False
    if not isinstance(stream, bool):
        raise Refused("stream must be true or false", param="stream")
    return stream


def capped(body: dict[str, Any], names: tuple[str, ...], cfg: LlmConfig) -> int:
    """Cap every max-tokens field the request sets at the node's `max_tokens` (the first name
    is set when it sets none); the cap."""
    asked = [k for k in names if body.get(k) is not None]
    limit = cfg.max_tokens
    for k in asked:
        v = body[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise Refused(f"{k} must be an integer >= 1", param=k)
        limit = min(limit, v)
    for k in asked or [names[0]]:
        body[k] = limit
    return limit


def none_of(body: dict[str, Any], fields: tuple[str, ...], why: str) -> None:
    """Refuse a request that sets any of `fields` (to anything but null or false)."""
    for f in fields:
        if body.get(f) not in (None, False):
            raise Refused(f"loopproof cannot bound the cost of {f!r} ({why}); leave it out",
                          param=f)


def passed(names: tuple[str, ...], headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The client's headers among `names`, checked: printable, short."""
    out = []
    for name in names:
        v = headers.get(name)
        if v is None:
            continue
        if len(v) > MAX_HEADER or not v.isascii() or not v.isprintable():
            raise Refused(f"the header {name} must be printable ASCII of at most {MAX_HEADER} "
                          "bytes", param=name)
        out.append((name, v))
    return tuple(out)


def encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def text_size(*values: Any) -> int:
    """Bytes of the strings among `values` (content a delta carries)."""
    return sum(len(v.encode()) for v in values if isinstance(v, str))


# ---- server-sent events --------------------------------------------------------------------
def events(resp: http.client.HTTPResponse, keep: bytearray) -> Iterator[bytes]:
    """Server-sent events as raw bytes (lines up to and including the blank line)."""
    buf = bytearray()
    while True:
        line = resp.readline(1 << 20)
        if not line:
            if buf.strip():
                yield bytes(buf)
            return
        keep += line
        buf += line
        if line in (b"\n", b"\r\n"):
            if buf.strip():
                yield bytes(buf)
            buf.clear()


def data_of(event: bytes) -> bytes | None:
    """The payload of an event's `data:` lines, or None for a comment or other field."""
    parts = [ln[5:].strip() for ln in event.splitlines() if ln.startswith(b"data:")]
    return b"\n".join(parts) if parts else None


def json_of(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


def sse(doc: dict[str, Any], name: str | None = None) -> bytes:
    """One event, `event: <name>` first when the API names its events."""
    head = b"" if name is None else b"event: " + name.encode() + b"\n"
    return head + b"data: " + json.dumps(doc).encode() + b"\n\n"
