"""What one model call may cost, before it is sent, and whether the upstream's usage is believable.

Why an upper bound and not an estimate: the reservation is made before the request leaves, and
the model (`Reserve`) checks it against c_v and B; the call may never be charged more. So, in
every API shape (engine/run/proxy/chat.py, messages.py, responses.py):

- prompt tokens <= the bytes of the request as forwarded (every token of a BPE vocabulary is at
  least one byte, and the body holds every message, tool and template word the upstream reads),
  plus what the shape's upstream is known to add unseen (a tool-use system prompt), or the
  upstream's exact count where it gives one (engine/run/proxy/tokens.py);
- each prompt token at the highest price the shape may bill it at (plain, cache read, cache
  write: `Bound.prompt_price`), since the upstream decides which tokens hit its cache;
- completion tokens <= the request's max tokens (capped at the node's `max_tokens`, which is also
  set when the request asks for none) x the choices it asks for;
- inputs whose tokens bytes do not bound (images, audio, files, server-side tools) are refused
  before anything is reserved.

A usage is believed only if every count is an integer >= 0, the prompt tokens (plain + cache
read + cache write) are within the prompt bound and at least the request's text at
MAX_TOKEN_BYTES a token, the completion tokens within the completion bound and at least the
content the upstream sent back (a piece each, MAX_TOKEN_BYTES a token); anything else
(missing, a string, a negative, more than asked, less than sent) is charged the reservation.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from loopproof.engine.run.proxy.config import LlmConfig

MAX_BODY = 8 * 1024 * 1024  # bytes of one request body
MAX_TOKEN_BYTES = 64  # a relayed stream is cut past this many content bytes per reserved token


class Refused(Exception):
    """The proxy will not forward this request: `reason` names its row in the refusal table
    (engine/run/proxy/refusals.py), `param` the request field at fault."""

    def __init__(self, message: str, param: str | None = None,
                 reason: str = "bad_request") -> None:
        super().__init__(message)
        self.message, self.param, self.reason = message, param, reason


@dataclass(frozen=True)
class Usage:
    """The tokens an upstream says a call used, by how each is priced. `output` includes any
    reasoning (thinking) tokens: they are billed as output."""

    input: int  # prompt tokens at price_prompt_per_1k (neither read from nor written to cache)
    output: int
    cache_read: int = 0
    cache_write: int = 0

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write


@dataclass(frozen=True)
class Bound:
    """A request as it will be forwarded, and the most it may cost."""

    endpoint: str
    body: bytes  # what is sent upstream: max tokens capped, include_usage set on a chat stream
    model: str
    stream: bool
    client_usage: bool  # chat: the client asked for the usage chunk itself
    prompt_tokens: int
    completion_tokens: int
    cost: float
    prompt_counted_by: str = "bytes"  # "bytes" (the body's length) or "tokenize" (upstream)
    prompt_price: float = 0.0  # per 1,000: the highest price one prompt token may be billed at
    query: str = ""  # the request's query string, passed on where the shape does
    headers: tuple[tuple[str, str], ...] = ()  # the client's headers the shape passes on
    remember: bool = False  # Responses: a stored response a later call may chain to
    prompt_floor: int = 0  # the fewest prompt tokens its text holds (shape.prompt_floor)


def bound(cfg: LlmConfig, endpoint: str, body: bytes, model: str, *, stream: bool,
          prompt_tokens: int, completion_tokens: int, prompt_price: float,
          **more: Any) -> Bound:
    """A `Bound` whose cost is its prompt tokens at `prompt_price` and its completion tokens at
    the completion price, rounded up."""
    return Bound(endpoint, body, model, stream, more.pop("client_usage", False), prompt_tokens,
                 completion_tokens, cost(cfg, prompt_tokens, completion_tokens, prompt_price),
                 prompt_price=prompt_price, **more)


def with_prompt(b: Bound, tokens: int, cfg: LlmConfig) -> Bound:
    """`b` with its prompt bound the upstream's exact count (engine/run/proxy/tokens.py)."""
    return dataclasses.replace(b, prompt_tokens=tokens, prompt_counted_by="tokenize",
                               cost=cost(cfg, tokens, b.completion_tokens, b.prompt_price))


def up(x: float) -> float:
    """Spend rounded up to the meter's 1e-6 grain (a bound must never round down)."""
    return math.ceil(x * 1e6 - 1e-6) / 1e6


def cost(cfg: LlmConfig, prompt_tokens: int, completion_tokens: int,
         prompt_price: float | None = None) -> float:
    """Prompt tokens at `prompt_price` (default: price_prompt_per_1k) and completion tokens at
    price_completion_per_1k, rounded up."""
    price = cfg.price_prompt_per_1k if prompt_price is None else prompt_price
    return up((prompt_tokens * price + completion_tokens * cfg.price_completion_per_1k) / 1000.0)


def charge(cfg: LlmConfig, u: Usage) -> float:
    """What a believed usage costs: each kind of token at its own price, rounded up."""
    return up((u.input * cfg.price_prompt_per_1k + u.cache_read * cfg.cache_read_price
               + u.cache_write * cfg.cache_write_price
               + u.output * cfg.price_completion_per_1k) / 1000.0)


def count(v: Any) -> int | None:
    """`v` if it is an integer (not a bool) >= 0, else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def believed(u: Usage, b: Bound, seen: int = 0) -> bool:
    """A usage is believable for `b`: within its bounds, at least the prompt text it was sent
    and at least the content it sent back (`seen`)."""
    return b.prompt_floor <= u.prompt <= b.prompt_tokens and seen <= u.output <= b.completion_tokens
