"""An upstream that answers each metered request with whatever bytes a test scripts, to attack the
proxy from the upstream's side (tests/engine/run/proxy/test_redteam_upstream.py).

Why not tests/support/fake_apis.py: its replies are well-formed answers of each API with a few
scripted faults; an attacker controls every byte (a stream that drips forever, an event after
the end, a usage that shrinks, the key echoed back). Each answer is a function of the request
handler and the request's body; answers are taken in the order requests arrive.

    with hostile_upstream([whole(200, b"not json"), stream([event("message_stop", {...})])]):
        ...
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.fake_apis import stream_head
from tests.support.fake_openai import FakeServer, fake_openai

Answer = Callable[[Any, dict[str, Any]], None]  # (request handler, request body) -> None
PATHS = ("/v1/messages", "/v1/messages/count_tokens", "/v1/responses",
         "/v1/chat/completions", "/v1/completions")


@contextmanager
def hostile_upstream(answers: list[Answer]) -> Iterator[FakeServer]:
    """tests/support/fake_openai.py's server (it records every request), each metered path
    answered by the next of `answers`."""
    with fake_openai([]) as server:
        queue = list(answers)

        def route(h: Any, body: dict[str, Any], raw: bytes) -> None:
            with server.lock:
                answer = queue.pop(0)
            answer(h, body)

        for p in PATHS:
            server.routes[p] = route
        yield server


def whole(status: int, data: bytes, ctype: str = "application/json",
          headers: tuple[tuple[str, str], ...] = ()) -> Answer:
    """A whole answer: these bytes, this status and content type."""
    def answer(h: Any, body: dict[str, Any]) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
    return answer


def event(name: str | None, doc: Any) -> bytes:
    """One server-sent event (`event:` line when named)."""
    head = b"" if name is None else f"event: {name}\n".encode()
    return head + b"data: " + (doc if isinstance(doc, bytes) else json.dumps(doc).encode()) \
        + b"\n\n"


def stream(events: list[bytes], *, then: Callable[[Any], None] | None = None) -> Answer:
    """A 200 event stream of `events`, then `then(handler)` (say, drip forever), then the end."""
    def answer(h: Any, body: dict[str, Any]) -> None:
        stream_head(h)
        try:
            for e in events:
                h.wfile.write(e)
                h.wfile.flush()
            if then is not None:
                then(h)
        except OSError:  # the proxy hung up: what an attack on it should see
            return
    return answer


def drip(piece: bytes, every_s: float, for_s: float) -> Callable[[Any], None]:
    """Send `piece` every `every_s` seconds for at most `for_s` (or until the server closes)."""
    def then(h: Any) -> None:
        for _ in range(int(for_s / every_s)):
            if not h.pause(every_s):
                return
            h.wfile.write(piece)
            h.wfile.flush()
    return then


def flood(piece: bytes, total: int) -> Callable[[Any], None]:
    """Send `piece` again and again, `total` bytes in all, as fast as the proxy reads."""
    def then(h: Any) -> None:
        sent = 0
        while sent < total:
            h.wfile.write(piece)
            sent += len(piece)
    return then


# ---- the events of each API, enough to build an attack on ------------------------------------
def message_start(usage: dict[str, Any]) -> bytes:
    return event("message_start", {"type": "message_start", "message": {
        "id": "msg_h", "type": "message", "role": "assistant", "model": "claude-fake",
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}})


def text_block(*texts: str) -> list[bytes]:
    """A text content block of these deltas, started and stopped."""
    return [event("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}}),
            *[event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": t}})
              for t in texts],
            event("content_block_stop", {"type": "content_block_stop", "index": 0})]


def message_delta(usage: dict[str, Any]) -> bytes:
    return event("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": "end_turn", "stop_sequence": None}, "usage": usage})


MESSAGE_STOP = event("message_stop", {"type": "message_stop"})


def chat_chunk(content: str | None = None, usage: dict[str, Any] | None = None,
               **delta: Any) -> bytes:
    choices = [] if content is None and not delta else [
        {"index": 0, "delta": {**({"content": content} if content else {}), **delta},
         "finish_reason": None}]
    doc: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "created": 0,
                           "model": "fake-model", "choices": choices}
    if usage is not None:
        doc["usage"] = usage
    return event(None, doc)


DONE = b"data: [DONE]\n\n"


def response_event(kind: str, **fields: Any) -> bytes:
    return event(kind, {"type": kind, **fields})


def response_doc(usage: Any, text: str = "ok", status: str = "completed") -> dict[str, Any]:
    return {"id": "resp_h", "object": "response", "status": status, "model": "gpt-fake",
            "output": [{"type": "message", "id": "m", "role": "assistant", "status": status,
                        "content": [{"type": "output_text", "text": text,
                                     "annotations": []}]}], "usage": usage}
