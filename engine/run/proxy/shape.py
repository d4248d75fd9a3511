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
from loopproof.engine.run.proxy.pricing import MAX_TOKEN_BYTES, Bound, Refused, Usage

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

    def content(self, doc: Any) -> tuple[int, int]:
        """The content of a whole answer: (its non-empty text pieces, their bytes), what a
        stream of it would have carried in its deltas. A usage below it is not believed."""
        return 0, 0


# ---- checks the shapes share ---------------------------------------------------------------
def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_object(raw: bytes) -> dict[str, Any]:
    """The request's JSON object. Refused: what is not strict JSON (NaN, Infinity: the
    proxy would forward what the upstream cannot read), nesting past Python's recursion limit
    (else the handler dies without an answer)."""
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise Refused("the request body is not JSON (strict: no NaN or Infinity, nested at "
                      "most a few hundred deep)") from None
    if not isinstance(body, dict):
        raise Refused("the request body is not a JSON object")
    return body


def model_of(body: dict[str, Any], cfg: LlmConfig) -> str:
    """The model the request names, one of the node's `models` when it lists them (the prices
    are the node's: a worker that names a dearer model would be billed above them)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Refused("the request names no model", param="model")
    if cfg.models is not None and model not in cfg.models:
        raise Refused(f"this node's llm table allows the models {', '.join(cfg.models)} only, "
                      f"not {model!r}", param="model")
    return model


def standard_price(body: dict[str, Any], allowed: Mapping[str, tuple[str, ...]]) -> None:
    """Refuse a request option that makes the upstream bill a token above its standard price
    (a priority tier, fast mode, a regional premium): the node's prices are the standard ones,
    and it is the operator's choice, not the worker's, to pay more. `allowed`: each option
    and the values it may take (absent or null is always allowed)."""
    for name, values in allowed.items():
        v = body.get(name)
        if v is not None and v not in values:
            raise Refused(f"{name} = {v!r} is billed above the node's prices; loopproof "
                          f"allows {' or '.join(map(repr, values))} (or leave it out)",
                          param=name)


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
    """The body as forwarded: compact UTF-8 (its length is the byte bound). A lone surrogate
    (`"\\ud800"`, valid JSON) has no UTF-8, and a number past a float's range (`1e999`, valid
    JSON) would go on as `Infinity`, which is not: refused, not forwarded."""
    try:
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode()
    except UnicodeEncodeError:
        raise Refused("the request body holds a string that is not Unicode text (a lone "
                      "surrogate such as \\ud800)") from None
    except (ValueError, RecursionError):
        raise Refused("the request body holds a number out of a float's range (1e999), or "
                      "is nested too deep") from None


# keys whose strings every shape's upstream reads into the prompt (message text, a tool's
# result, instructions); not thinking or reasoning items, which an upstream may drop
PROMPT_TEXT = ("text", "content", "input", "prompt", "instructions", "system", "output")


def prompt_floor(doc: Any, key: str | None = None) -> int:
    """The fewest prompt tokens a request body holds: the bytes of its prompt text (strings
    under PROMPT_TEXT keys) at MAX_TOKEN_BYTES a token. A usage below it is not believed (an
    upstream that says a long prompt was a few tokens)."""
    return -(-_prompt_bytes(doc, key) // MAX_TOKEN_BYTES)


def _prompt_bytes(doc: Any, key: str | None) -> int:
    if isinstance(doc, str):
        return len(doc.encode()) if key in PROMPT_TEXT else 0
    if isinstance(doc, dict):
        if doc.get("type") == "reasoning":  # an earlier turn's reasoning: the upstream may drop it
            return 0
        return sum(_prompt_bytes(v, k) for k, v in doc.items())
    if isinstance(doc, list):
        return sum(_prompt_bytes(v, key) for v in doc)
    return 0


def text_size(*values: Any) -> int:
    """Bytes of the strings among `values` (content a delta carries)."""
    return sum(len(v.encode()) for v in values if isinstance(v, str))


# ---- server-sent events --------------------------------------------------------------------
class TooLarge(Exception):
    """A stream passed the bytes the proxy keeps of one (engine/run/proxy/call.py)."""


def events(resp: http.client.HTTPResponse, keep: bytearray, limit: int) -> Iterator[bytes]:
    """Server-sent events as raw bytes (lines up to and including the blank line), each line
    also appended to `keep`; TooLarge once `keep` passes `limit` (events that carry no
    content, or a line that never ends, are not tokens: the content cut never sees them)."""
    buf = bytearray()
    while True:
        line = resp.readline(1 << 20)
        if not line:
            if buf.strip():
                yield bytes(buf)
            return
        keep += line
        if len(keep) > limit:
            raise TooLarge(f"the stream passed {limit} bytes")
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
