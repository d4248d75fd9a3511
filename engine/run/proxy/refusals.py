"""What the proxy answers when it refuses a request itself, in the API the request speaks.

Why one table: an agent reads a refusal through its own API's client, and what that client does
next (stop, or retry for minutes) depends on the status, the error's type and code and a few
headers. The refusal of a call whose bound does not fit (`budget`) is chosen per API so that the
agent stops at once rather than retries; the figures were measured on the agents themselves
(docs/proxy.md, "Refusals"), and this table is the one place to adjust them:

- OpenAI chat and text completions: 402 `insufficient_quota` / `budget_exceeded` (the openai
  client does not retry a 402; litellm's does, which `on_refusal = "end-attempt"` stops);
- OpenAI Responses: 429 with code `insufficient_quota` and no `retry-after` (Codex CLI stops at
  once on it; it retries a 402 six times and a 5xx thirty);
- Anthropic Messages: 402 `billing_error` (Claude Code stops at once; it retries a plain 429 or
  a 529 for minutes).

Every budget refusal also carries `x-should-retry: false`, which the Stainless-generated SDKs
(openai, anthropic) read as "do not retry". The other refusals (a bad request, a wrong token, an
unknown path, a body too large, an upstream that did not answer) take each API's usual status and
error type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

OPENAI, RESPONSES, ANTHROPIC = "openai", "responses", "anthropic"  # the APIs an answer speaks
STOP = (("x-should-retry", "false"),)


@dataclass(frozen=True)
class Answer:
    """A refusal's HTTP status, its error's type (and OpenAI code) and extra headers."""

    status: int
    kind: str
    code: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


_OPENAI = {
    "budget": Answer(402, "insufficient_quota", "budget_exceeded", STOP),
    "bad_request": Answer(400, "invalid_request_error"),
    "unauthorized": Answer(401, "invalid_request_error", "invalid_api_key"),
    "not_found": Answer(404, "invalid_request_error", "unknown_url"),
    "length_required": Answer(411, "invalid_request_error"),
    "too_large": Answer(413, "invalid_request_error"),
    "upstream_failed": Answer(502, "api_error", "upstream_failed"),
}
TABLE: dict[str, dict[str, Answer]] = {
    OPENAI: _OPENAI,
    RESPONSES: {**_OPENAI, "budget": Answer(429, "insufficient_quota", "insufficient_quota",
                                            STOP)},
    ANTHROPIC: {
        "budget": Answer(402, "billing_error", None, STOP),
        "bad_request": Answer(400, "invalid_request_error"),
        "unauthorized": Answer(401, "authentication_error"),
        "not_found": Answer(404, "not_found_error"),
        "length_required": Answer(411, "invalid_request_error"),
        "too_large": Answer(413, "request_too_large"),
        "upstream_failed": Answer(502, "api_error"),
    },
}


def answer(api: str, reason: str, message: str,
           param: str | None = None) -> tuple[Answer, bytes]:
    """The refusal `reason` in `api`'s shape: its status and headers, and its JSON body."""
    a = TABLE[api][reason]
    return a, body(api, a, message, param)


def body(api: str, a: Answer, message: str, param: str | None = None) -> bytes:
    if api == ANTHROPIC:  # {"type": "error", "error": {"type", "message"}, "request_id"}
        return json.dumps({"type": "error", "error": {"type": a.kind, "message": message},
                           "request_id": None}).encode()
    return error_body(message, a.kind, a.code, param)


def error_body(message: str, kind: str, code: str | None = None,
               param: str | None = None) -> bytes:
    """The OpenAI error shape: {"error": {"message", "type", "param", "code"}}."""
    return json.dumps({"error": {"message": message, "type": kind, "param": param,
                                 "code": code}}).encode()
