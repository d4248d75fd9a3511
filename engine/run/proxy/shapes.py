"""Which API shape serves which path, and in which API a request the proxy cannot place speaks.

Why a table: the server (engine/run/proxy/server.py) meters exactly the paths here and refuses
every other with a 404 that never reaches the upstream (files, fine-tuning, images, batches:
paid endpoints the meter does not bound). `FREE` are forwarded and recorded, never charged:
`GET /v1/models`, and Anthropic's `POST /v1/messages/count_tokens` (Anthropic does not bill it;
it generates nothing).
"""

from __future__ import annotations

from collections.abc import Mapping

from loopproof.engine.run.proxy import refusals
from loopproof.engine.run.proxy.chat import ChatShape
from loopproof.engine.run.proxy.messages import MessagesShape
from loopproof.engine.run.proxy.responses import ResponsesShape
from loopproof.engine.run.proxy.shape import (
    CHAT,
    COMPLETIONS,
    COUNT_TOKENS,
    MESSAGES,
    MODELS,
    RESPONSES,
    Shape,
)

SHAPES: dict[str, Shape] = {CHAT: ChatShape(CHAT), COMPLETIONS: ChatShape(COMPLETIONS),
                            MESSAGES: MessagesShape(), RESPONSES: ResponsesShape()}
FREE = {MODELS: "GET", COUNT_TOKENS: "POST"}


def api_of(path: str, headers: Mapping[str, str]) -> str:
    """The API a request speaks, for the shape of a refusal: its shape's, else Anthropic's for
    a request that says so (an `anthropic-version` header, a /v1/messages path), else
    OpenAI's."""
    shape = SHAPES.get(path)
    if shape is not None:
        return shape.api
    if path.startswith(MESSAGES) or headers.get("anthropic-version") is not None:
        return refusals.ANTHROPIC
    return refusals.OPENAI
