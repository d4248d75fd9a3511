"""One metered call of the attempt's proxy: hold the request's bound through the meter, forward
it upstream, relay the answer (a stream event by event, cut at the reserved completion tokens),
settle the hold, record the call.

Why a module of its own: the accounting of a call is the proxy's promise (a hold released
exactly once, however the call ends), the same for every API shape; what differs between the
shapes (their fields, usage and stream events) is asked of the call's `Shape`
(engine/run/proxy/shape.py). engine/run/proxy/server.py owns the socket, the refusals that
never reach the meter and the endpoints, and hands an admitted request to `Call`. `Call` sees
the server only through `Upstream` and `Client`, so this module imports nothing of it.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import time
from typing import Any, Protocol

from loopproof.engine.run.proxy import pricing, refusals
from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.proxy.pricing import Bound, Usage
from loopproof.engine.run.proxy.shape import Shape, data_of, events, json_of
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

    def headers(self, length: int | None = None, api: str = refusals.OPENAI,
                extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]: ...

    def remember(self, response_id: str, tokens: int) -> None: ...

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

    def reply(self, status: int, body: bytes, ctype: str = "application/json",
              headers: tuple[tuple[str, str], ...] = ()) -> None: ...

    def send_response(self, code: int, message: str | None = None) -> None: ...

    def send_header(self, keyword: str, value: str) -> None: ...

    def end_headers(self) -> None: ...


class Call:
    """One metered call: hold, forward, relay, settle, record."""

    def __init__(self, h: Client, call: str, shape: Shape, bound: Bound, t0: float) -> None:
        self.h, self.p, self.call, self.shape, self.bound, self.t0 = (h, h.proxy, call, shape,
                                                                      bound, t0)
        self.status = 0
        self.usage: Usage | None = None
        self.usage_kind = "missing"
        self.cut = False
        self.sent = False  # the request reached the upstream (or may have)
        self.received = bytearray()
        self.error: str | None = None
        self.replied = False  # the client has had a status line

    def refuse(self, reason: str, message: str) -> bytes:
        """Answer the client with the refusal `reason` in the call's API; the body sent."""
        a, body = refusals.answer(self.shape.api, reason, message)
        self.h.close_connection = True
        self.replied = True
        self.h.reply(a.status, body, headers=a.headers)
        self.status = a.status
        return body

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
            body = self.refuse("budget", (
                f"loopproof: this call may cost up to {b.cost:g} spend units "
                f"({b.prompt_tokens} prompt tokens at most, {b.completion_tokens} completion "
                f"tokens at most); the attempt may spend {left:g} more"
                + ("; the attempt ends here (on_refusal = \"end-attempt\")" if ends else "")))
            why = ("the attempt is ending: a call was refused" if ending is not None
                   else "the reservation does not fit")
            p.record(self.call, endpoint=b.endpoint, model=b.model, stream=b.stream,
                     refused=True, status=self.status, why=why, prompt_bound=b.prompt_tokens,
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
                    status = self.status
                    self.refuse("upstream_failed", f"the upstream did not answer: {self.error}")
                    self.status = status  # the record keeps the upstream's (0: none)
        finally:
            if self.cut or (self.sent and self.usage is None):
                used = b.cost  # a cut, a missing or unbelievable usage: the whole hold
            elif self.usage is not None:
                used = min(b.cost, pricing.charge(p.cfg, self.usage))
            else:
                used = 0.0  # the request never left: nothing was used
            charged = p.account.release(self.call, used, WHAT, call=self.call,
                                        usage=self.usage_kind)
            u = self.usage
            extra = {"error": self.error} if self.error else {}
            p.record(self.call, endpoint=b.endpoint, model=b.model, stream=b.stream,
                     refused=False, status=self.status, reserved=b.cost, charged=charged,
                     prompt_bound=b.prompt_tokens, prompt_counted_by=b.prompt_counted_by,
                     prompt_tokens=None if u is None else u.prompt,
                     completion_tokens=None if u is None else u.output,
                     cache_read_tokens=None if u is None else u.cache_read,
                     cache_write_tokens=None if u is None else u.cache_write,
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
            target = p.target(b.endpoint)
            if self.shape.forward_query and b.query:
                target += "?" + b.query
            conn.request("POST", target, body=b.body,
                         headers=p.headers(len(b.body), self.shape.api, b.headers))
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
            self.refuse("upstream_failed", "the upstream's answer is too large")
            self.status = resp.status
            return
        if resp.status == 200:
            doc = json_of(data)
            self.believe(doc, seen=0)
            self.remember(self.shape.response_id(doc))
        self.replied = True
        self.h.reply(resp.status, data, ctype)

    def believe(self, doc: Any, seen: int) -> None:
        """Keep the usage `doc` reports if it is believable for the bound (after `seen`
        content deltas were relayed); else none, and say why (`usage_kind`)."""
        self.usage = None
        try:
            u = self.shape.usage(doc)
        except ValueError:
            self.usage_kind = "implausible"
            return
        if u is None:
            self.usage_kind = "missing"
        elif pricing.believed(u, self.bound, seen):
            self.usage, self.usage_kind = u, "reported"
        else:
            self.usage_kind = "implausible"

    def remember(self, response_id: str | None) -> None:
        """A stored response's context, for a later call that chains to it: known before the
        client has the answer (it may chain at once). Its believed usage, else its bound."""
        b = self.bound
        if b.remember and response_id is not None and self.status == 200:
            u = self.usage
            self.p.remember(response_id, u.prompt + u.output if u is not None
                            else b.prompt_tokens + b.completion_tokens)

    def relay_stream(self, resp: http.client.HTTPResponse) -> None:
        b, h = self.bound, self.h
        h.close_connection = True
        self.replied = True
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        meter = self.shape.stream(b)
        seen = n_bytes = 0
        ended = False
        for event in events(resp, self.received):
            data = data_of(event)
            step = meter.step(event, data, json_of(data) if data != b"[DONE]" else None)
            if (seen + step.tokens > b.completion_tokens
                    or n_bytes + step.size > b.completion_tokens * pricing.MAX_TOKEN_BYTES):
                self.cut = True  # past what was reserved: nothing more is relayed
                h.wfile.write(meter.cut(seen))
                h.wfile.flush()
                return
            seen, n_bytes = seen + step.tokens, n_bytes + step.size
            if meter.complete and not ended:  # its last event: settled before it is relayed
                ended = True
                self.believe(meter.usage, seen)
                self.remember(meter.response_id)
            if step.relay:
                h.wfile.write(event)
                h.wfile.flush()
        if not meter.complete:
            self.usage, self.usage_kind = None, "missing"  # the stream broke off
