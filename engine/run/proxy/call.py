"""One metered call of the attempt's proxy: hold the request's bound through the meter, forward
it upstream, relay the answer (a stream chunk by chunk, cut at the reserved completion tokens),
settle the hold, record the call.

Why a module of its own: the accounting of a call is the proxy's promise (a hold released
exactly once, however the call ends); engine/run/proxy/server.py owns the socket, the refusals
that never reach the meter and the endpoints, and hands an admitted request to `Call`. `Call`
sees the server only through `Upstream` and `Client`, so this module imports nothing of it.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import socket
import time
from collections.abc import Iterator
from typing import Any, Protocol

from loopproof.engine.run.proxy import pricing
from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.proxy.pricing import CHAT, Bound, error_body
from loopproof.engine.run.proxy.store import BodyStore

WHAT = "llm"  # the meter label of a model call's reserve and settle records
MAX_RESPONSE = 64 * 1024 * 1024  # bytes of a non-streamed upstream answer


class Account(Protocol):
    """What the proxy needs of the attempt's meter (engine/run/meter.py)."""

    def hold(self, key: str, amount: float, what: str, **facts: Any) -> bool: ...

    def release(self, key: str, used: float, what: str, **facts: Any) -> float: ...

    def fact(self, record: dict[str, Any]) -> None: ...

    def allowance(self) -> float: ...


class Upstream(Protocol):
    """What a call needs of its proxy (engine.run.proxy.server.Proxy)."""

    cfg: LlmConfig
    account: Account
    store: BodyStore

    def upstream(self, timeout_s: float | None = None) -> http.client.HTTPConnection: ...

    def target(self, endpoint: str) -> str: ...

    def headers(self, length: int | None = None) -> dict[str, str]: ...

    def track(self, s: socket.socket, on: bool) -> None: ...

    def record(self, call: str, **facts: Any) -> None: ...

    ending: str | None

    def refused(self, call: str, cost: float, left: float) -> None: ...


class Client(Protocol):
    """What a call needs of the request handler that admitted it (the worker's side)."""

    close_connection: bool
    wfile: io.BufferedIOBase

    @property
    def proxy(self) -> Upstream: ...

    def reply(self, status: int, body: bytes, ctype: str = "application/json") -> None: ...

    def send_response(self, code: int, message: str | None = None) -> None: ...

    def send_header(self, keyword: str, value: str) -> None: ...

    def end_headers(self) -> None: ...


class Call:
    """One metered call: hold, forward, relay, settle, record."""

    def __init__(self, h: Client, call: str, bound: Bound, t0: float) -> None:
        self.h, self.p, self.call, self.bound, self.t0 = h, h.proxy, call, bound, t0
        self.status = 0
        self.usage: tuple[int, int] | None = None
        self.usage_kind = "missing"
        self.cut = False
        self.sent = False  # the request reached the upstream (or may have)
        self.received = bytearray()
        self.error: str | None = None
        self.replied = False  # the client has had a status line

    def run(self) -> None:
        b, p = self.bound, self.p
        request_sha = p.store.put(b.body)
        facts = {"call": self.call, "endpoint": b.endpoint, "model": b.model}
        ending = p.ending
        if ending is not None or not p.account.hold(self.call, b.cost, WHAT, **facts):
            left = round(p.account.allowance(), 6)
            if ending is None:
                p.refused(self.call, b.cost, left)
            ends = p.ending is not None
            body = error_body(
                f"loopproof: this call may cost up to {b.cost:g} spend units "
                f"({b.prompt_tokens} prompt tokens at most, {b.completion_tokens} completion "
                f"tokens at most); the attempt may spend {left:g} more"
                + ("; the attempt ends here (on_refusal = \"end-attempt\")" if ends else ""),
                "insufficient_quota", "budget_exceeded")
            self.h.close_connection = True
            self.h.reply(402, body)
            why = ("the attempt is ending: a call was refused" if ending is not None
                   else "the reservation does not fit")
            p.record(self.call, endpoint=b.endpoint, model=b.model, stream=b.stream,
                     refused=True, status=402, why=why, prompt_bound=b.prompt_tokens,
                     prompt_counted_by=b.prompt_counted_by,
                     reserved=b.cost, charged=0.0, request_sha256=request_sha,
                     response_sha256=p.store.put(body),
                     latency_s=round(time.monotonic() - self.t0, 6))
            return
        charged = b.cost
        try:
            self.forward()
        except Exception as exc:  # noqa: BLE001 (any failure: the hold is still settled)
            self.error = f"{type(exc).__name__}: {exc}"[:300]
            if not self.replied:
                with contextlib.suppress(OSError):
                    self.h.close_connection = True
                    self.h.reply(502, error_body(f"the upstream did not answer: {self.error}",
                                                 "api_error", "upstream_failed"))
        finally:
            if self.cut or (self.sent and self.usage is None):
                used = b.cost  # a cut, a missing or unbelievable usage: the whole hold
            elif self.usage is not None:
                used = min(b.cost, pricing.cost(p.cfg, *self.usage))
            else:
                used = 0.0  # the request never left: nothing was used
            charged = p.account.release(self.call, used, WHAT, call=self.call,
                                        usage=self.usage_kind)
            tokens = self.usage or (None, None)
            extra = {"error": self.error} if self.error else {}
            p.record(self.call, endpoint=b.endpoint, model=b.model, stream=b.stream,
                     refused=False, status=self.status, reserved=b.cost, charged=charged,
                     prompt_bound=b.prompt_tokens, prompt_counted_by=b.prompt_counted_by,
                     prompt_tokens=tokens[0], completion_tokens=tokens[1],
                     usage=self.usage_kind, cut=self.cut,
                     latency_s=round(time.monotonic() - self.t0, 6),
                     request_sha256=request_sha,
                     response_sha256=p.store.put(bytes(self.received)), **extra)

    def forward(self) -> None:
        b, p = self.bound, self.p
        conn = p.upstream()
        try:
            conn.connect()
            p.track(conn.sock, True)
            self.sent = True
            conn.request("POST", p.target(b.endpoint), body=b.body,
                         headers=p.headers(len(b.body)))
            resp = conn.getresponse()
            self.status = resp.status
            ctype = resp.getheader("Content-Type", "") or ""
            if b.stream and resp.status == 200 and "event-stream" in ctype:
                self.relay_stream(resp)
            else:
                self.relay_whole(resp, ctype or "application/json")
        finally:
            if conn.sock is not None:
                p.track(conn.sock, False)
            conn.close()

    def relay_whole(self, resp: http.client.HTTPResponse, ctype: str) -> None:
        data = resp.read(MAX_RESPONSE + 1)
        self.received += data[:MAX_RESPONSE]
        if len(data) > MAX_RESPONSE:
            self.cut = True
            data = error_body("the upstream's answer is too large", "api_error")
            self.h.close_connection = True
            self.replied = True
            self.h.reply(502, data)
            return
        if resp.status == 200:
            self.believe(_json(data), seen=0)
        self.replied = True
        self.h.reply(resp.status, data, ctype)

    def believe(self, doc: Any, seen: int) -> None:
        usage = doc.get("usage") if isinstance(doc, dict) else None
        if usage is None:
            self.usage_kind = "missing"
            return
        self.usage = pricing.believed(usage, self.bound, seen)
        self.usage_kind = "reported" if self.usage is not None else "implausible"

    def relay_stream(self, resp: http.client.HTTPResponse) -> None:
        b, h = self.bound, self.h
        h.close_connection = True
        self.replied = True
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        seen = n_bytes = 0
        usage: Any = None
        last: dict[str, Any] = {}
        done = False
        for event in _events(resp, self.received):
            data = _data(event)
            if data is None or data == b"[DONE]":
                done = done or data == b"[DONE]"
                h.wfile.write(event)
                h.wfile.flush()
                continue
            chunk = _json(data)
            deltas, size = pricing.content_tokens(chunk)
            if (seen + deltas > b.completion_tokens
                    or n_bytes + size > b.completion_tokens * pricing.MAX_TOKEN_BYTES):
                self.cut = True  # past what was reserved: nothing more is relayed
                h.wfile.write(_cut_event(b, last))
                h.wfile.flush()
                return
            seen, n_bytes = seen + deltas, n_bytes + size
            if isinstance(chunk, dict):
                last = chunk
                if chunk.get("usage") is not None:
                    usage = chunk
                    if not b.client_usage and not chunk.get("choices"):
                        continue  # the usage chunk the proxy asked for, not the client
            h.wfile.write(event)
            h.wfile.flush()
        if usage is not None:
            self.believe(usage, seen)
        if not done:
            self.usage, self.usage_kind = None, "missing"  # the stream broke off


def _events(resp: http.client.HTTPResponse, keep: bytearray) -> Iterator[bytes]:
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


def _data(event: bytes) -> bytes | None:
    """The payload of an event's `data:` lines, or None for a comment or other field."""
    parts = [ln[5:].strip() for ln in event.splitlines() if ln.startswith(b"data:")]
    return b"\n".join(parts) if parts else None


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


def _cut_event(b: Bound, last: dict[str, Any]) -> bytes:
    """A last chunk that ends the client's stream as the upstream should have: at length."""
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
