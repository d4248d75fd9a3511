"""The metered proxy of one attempt: an HTTP server on a Unix socket speaking three model APIs.

Why a Unix socket: the worker's sandbox has no network; a socket file bound into it is the one
way out, and only to this server (`bridge.py` relays it to a loopback port inside the sandbox, so
any client that honours OPENAI_BASE_URL or ANTHROPIC_BASE_URL works unchanged). Served: the
metered shapes of engine/run/proxy/shapes.py (OpenAI /v1/chat/completions and /v1/completions,
OpenAI /v1/responses, Anthropic /v1/messages; streamed or not) and the free /v1/models and
/v1/messages/count_tokens; anything else is a 404 and never reaches the upstream.

One call: check the per-attempt token (`Authorization: Bearer` or `x-api-key`); bound the request
(its shape) and hold that bound through the meter (`Meter.hold`: one atomic check-and-`Reserve`,
durable before the request leaves); a hold that does not fit is refused in the request's own API
(engine/run/proxy/refusals.py: chosen so the agent stops), recorded, and the attempt goes on. Forward with the upstream key; relay the answer (a stream chunk by
chunk, cut when its content reaches the reserved completion tokens); settle the hold with the
upstream's usage if it is believable, else the whole hold (`Meter.release`); record the call
(`llm_call`: bodies' SHA-256, model, tokens, cost, latency, refused or not). However a call ends
(upstream error, client gone, the proxy stopped), its hold is released exactly once.

This module holds the server, its life and the refusals that never reach the meter (token,
endpoint, body size); an admitted request is one `Call` (engine/run/proxy/call.py: hold,
forward, relay, settle, record).
"""

from __future__ import annotations

import contextlib
import hmac
import http.client
import itertools
import json
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from loopproof.engine.run.proxy import pricing, refusals
from loopproof.engine.run.proxy.call import MAX_RESPONSE, WHAT, Account, Call
from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.proxy.messages import MessagesShape
from loopproof.engine.run.proxy.pricing import Refused
from loopproof.engine.run.proxy.shape import Asked, passed
from loopproof.engine.run.proxy.shapes import FREE, SHAPES, api_of
from loopproof.engine.run.proxy.store import BodyStore, redact
from loopproof.engine.run.proxy.tokens import PromptCounter

# Names that live in engine.run.proxy.call, importable from here as before.
__all__ = ["MAX_RESPONSE", "WHAT", "Account", "Call", "Proxy"]

class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = False  # stop() joins every handler, so every hold is released
    block_on_close = True
    request_queue_size = 256  # an agent may open many connections at once
    proxy: Proxy

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client gone mid-reply; the call's own record says what happened


class Proxy:
    """Start with `start()` (or `with`), stop with `stop()`: stopping aborts calls in flight
    (each is charged its hold: its usage is unknown) and returns when every handler is done."""

    def __init__(self, cfg: LlmConfig, account: Account, *, socket_path: Path, token: str,
                 key: str | None, store: BodyStore, where: dict[str, Any]) -> None:
        self.cfg, self.account, self.socket_path = cfg, account, Path(socket_path)
        self.token, self.key, self.store, self.where = token, key, store, dict(where)
        parts = urlsplit(cfg.upstream)
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname or "", parts.port
        self._base = parts.path.rstrip("/")
        root = self._base.removesuffix("/v1")  # vLLM serves /tokenize beside /v1, not in it
        self.counter = PromptCounter(cfg.tokenize, self.upstream, root + "/tokenize",
                                     self.headers)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()  # sockets to shut down on stop
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.stopping = False
        self.ending: str | None = None  # why the worker is to be stopped (on_refusal)
        self._flight = 0  # metered calls between their hold and their settle
        # Responses: the context (tokens) of each stored response relayed, by its id, which a
        # later call's previous_response_id makes the upstream prepend (engine/run/proxy/
        # responses.py)
        self._contexts: dict[str, int] = {}

    # ---- life ----------------------------------------------------------------------------------
    def start(self) -> Proxy:
        self.socket_path.unlink(missing_ok=True)
        server = _Server(str(self.socket_path), _Handler)
        server.proxy = self
        self.socket_path.chmod(0o600)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="loopproof-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self.stopping = True
        self._server.shutdown()
        with self._lock:
            for s in list(self._live):
                _shut(s)
        self._server.server_close()  # joins every handler thread
        if self._thread is not None:
            self._thread.join(5)
        self._server = None
        self.socket_path.unlink(missing_ok=True)

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def track(self, s: socket.socket, on: bool) -> None:
        with self._lock:
            if on:
                self._live.add(s)
                if self.stopping:
                    _shut(s)
            else:
                self._live.discard(s)

    def next_id(self) -> str:
        return f"c{next(self._ids)}"

    # ---- the end of the attempt at a refusal (on_refusal = "end-attempt") ----------------------
    @contextlib.contextmanager
    def in_flight(self) -> Any:
        """Count a metered call from before its hold to after its settle."""
        with self._lock:
            self._flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._flight -= 1

    def refused(self, call: str, cost: float, left: float) -> None:
        """A call's bound did not fit. Under "end-attempt" the first refusal records why the
        worker is to be stopped (`worker_stopped`, validated on replay) and later calls are
        refused at once; the worker is stopped when no call is in flight (`stop_reason`)."""
        if self.cfg.on_refusal != "end-attempt":
            return
        with self._lock:
            if self.ending is not None:
                return
            self.ending = (f"model call refused: the attempt may spend {left:g} more, the call "
                           f"may cost up to {cost:g}")
        self.account.fact({"type": "worker_stopped", **self.where, "why": "model call refused",
                           "call": call, "left": left, "cost": cost})

    def stop_reason(self) -> str | None:
        """Why the worker must stop now: a refusal was recorded and every call it had in
        flight has been settled. None: let it run."""
        with self._lock:
            return self.ending if self.ending is not None and self._flight == 0 else None

    # ---- upstream ------------------------------------------------------------------------------
    def upstream(self, timeout_s: float | None = None) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port,
                   timeout=self.cfg.timeout_s if timeout_s is None else timeout_s)

    def tighten(self, endpoint: str, bound: pricing.Bound) -> pricing.Bound:
        """The bound with its prompt part the upstream's exact count, where it gives one."""
        if self.ending is not None:  # refused anyway: nothing to count
            return bound
        try:
            body = json.loads(bound.body)
        except ValueError:
            return bound
        n = self.counter.count(endpoint, body, bound.prompt_tokens)
        return bound if n is None else pricing.with_prompt(bound, n, self.cfg)

    def target(self, endpoint: str) -> str:
        return self._base + endpoint.removeprefix("/v1")

    def headers(self, length: int | None = None, api: str = refusals.OPENAI,
                extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
        """The upstream request's headers: made here, never copied from the worker's (whose
        token stays with the proxy), but for the shape's passed-on ones in `extra`; the key as
        the API takes it (`x-api-key` for Anthropic's, `Authorization: Bearer` else)."""
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "User-Agent": "loopproof-proxy"}
        for name, value in extra:
            h[name] = redact(value.encode(), [self.token]).decode()
        if length is not None:
            h["Content-Length"] = str(length)
        if self.key:
            if api == refusals.ANTHROPIC:
                h["x-api-key"] = self.key
            else:
                h["Authorization"] = f"Bearer {self.key}"
        return h

    def remember(self, response_id: str, tokens: int) -> None:
        with self._lock:  # an id seen twice (an upstream that repeats one): the larger
            self._contexts[response_id] = max(tokens, self._contexts.get(response_id, 0))

    def prior(self, response_id: str) -> int | None:
        with self._lock:
            return self._contexts.get(response_id)

    def record(self, call: str, **facts: Any) -> None:
        self.account.fact({"type": "llm_call", **self.where, "call": call, **facts})


def _shut(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 600  # an idle keep-alive connection is closed after this many seconds

    def log_message(self, *args: Any) -> None:  # the ledger is the log
        pass

    def address_string(self) -> str:  # a Unix socket has no peer address
        return "worker"

    def setup(self) -> None:
        super().setup()
        self.server.proxy.track(self.connection, True)

    def finish(self) -> None:
        self.server.proxy.track(self.connection, False)
        super().finish()

    # ---- plumbing ------------------------------------------------------------------------------
    @property
    def proxy(self) -> Proxy:
        return self.server.proxy

    def reply(self, status: int, body: bytes, ctype: str = "application/json",
              headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def refuse(self, reason: str, message: str, param: str | None = None) -> bytes:
        """Answer with the refusal `reason` in the request's API; the body sent."""
        a, body = refusals.answer(api_of(self.endpoint, self.headers), reason, message, param)
        self.reply(a.status, body, headers=a.headers)
        return body

    @property
    def endpoint(self) -> str:
        return self.path.split("?")[0]

    def authorized(self) -> bool:
        """The attempt's token, as `Authorization: Bearer <token>` (OpenAI's clients) or
        `x-api-key: <token>` (Anthropic's)."""
        want = self.proxy.token.encode()
        bearer = self.headers.get("Authorization", "").encode()
        key = self.headers.get("x-api-key", "").encode()
        if hmac.compare_digest(bearer, b"Bearer " + want) or hmac.compare_digest(key, want):
            return True
        self.close_connection = True
        self.discard_body()
        self.refuse("unauthorized", "this proxy takes the attempt's OPENAI_API_KEY "
                    "(ANTHROPIC_API_KEY) only")
        self.proxy.record(self.proxy.next_id(), endpoint=self.path, refused=True, status=401,
                          why="unauthorized", reserved=0.0, charged=0.0)
        return False

    def not_found(self) -> None:
        self.discard_body()
        served = ", ".join([*SHAPES, *FREE])
        self.refuse("not_found", f"loopproof's proxy serves {served} only, not {self.path}")

    def discard_body(self) -> None:
        """Read and drop the request's body before refusing it. Why: a refusal answered before
        the client has sent its body, then closed, fails that client's send (EPIPE, or a reset
        that loses the answer) instead of showing it the 401 or 404. A body with no usable
        length, or too large to read, is not waited for: that connection closes anyway."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            return
        if 0 < length <= pricing.MAX_BODY:
            with contextlib.suppress(OSError):
                self.rfile.read(length)

    def read_body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            self.refuse("length_required", "send a Content-Length")
            return None
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 <= length <= pricing.MAX_BODY:
            self.close_connection = True
            self.refuse("too_large", f"the request body must be 0..{pricing.MAX_BODY} bytes")
            return None
        return self.rfile.read(length)

    # ---- endpoints -----------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if FREE.get(self.endpoint) != "GET":
            return self.not_found()
        if self.authorized():
            self.free(b"")
        return None

    def do_POST(self) -> None:  # noqa: N802
        endpoint = self.endpoint
        shape = SHAPES.get(endpoint)
        if shape is None and FREE.get(endpoint) != "POST":
            self.close_connection = True
            return self.not_found()
        if not self.authorized():
            return None
        raw = self.read_body()
        if raw is None:
            return None
        if shape is None:
            return self.free(raw)
        call, t0 = self.proxy.next_id(), time.monotonic()
        query = self.path.partition("?")[2]
        try:
            bound = shape.bound(raw, self.proxy.cfg, Asked(query, self.headers, self.proxy.prior))
        except Refused as exc:
            body = self.refuse(exc.reason, exc.message, exc.param)
            self.proxy.record(call, endpoint=endpoint, refused=True,
                              status=refusals.TABLE[shape.api][exc.reason].status,
                              why=exc.message, reserved=0.0, charged=0.0,
                              request_sha256=self.proxy.store.put(raw),
                              response_sha256=self.proxy.store.put(body))
            return None
        with self.proxy.in_flight():
            Call(self, call, shape, self.proxy.tighten(endpoint, bound), t0).run()
        return None

    def free(self, raw: bytes) -> None:
        """Forward a request that generates nothing (/v1/models, Anthropic's count_tokens) and
        record it, charged nothing. Its body is the worker's, as sent; in Anthropic's API (an
        `anthropic-version` header, or count_tokens) the key goes as `x-api-key` and the
        Anthropic headers are passed on, as for a metered call."""
        endpoint, api = self.endpoint, api_of(self.endpoint, self.headers)
        call, t0 = self.proxy.next_id(), time.monotonic()
        query = self.path.partition("?")[2]
        extra: tuple[tuple[str, str], ...] = ()
        if api == refusals.ANTHROPIC:
            try:
                extra = passed(MessagesShape.passed_headers, self.headers)
            except Refused as exc:
                self.refuse(exc.reason, exc.message, exc.param)
                return
        method = FREE[endpoint]
        status, data = 502, b""
        try:
            conn = self.proxy.upstream()
            try:
                target = self.proxy.target(endpoint) + (f"?{query}" if query and api ==
                                                        refusals.ANTHROPIC else "")
                conn.request(method, target, body=raw if method == "POST" else None,
                             headers=self.proxy.headers(len(raw) if method == "POST" else None,
                                                        api, extra))
                resp = conn.getresponse()
                status, data = resp.status, resp.read(MAX_RESPONSE)
            finally:
                conn.close()
        except (OSError, http.client.HTTPException) as exc:
            a, data = refusals.answer(api, "upstream_failed",
                                      f"the upstream did not answer: {type(exc).__name__}")
            status = a.status
        self.reply(status, data)
        facts = {"request_sha256": self.proxy.store.put(raw)} if raw else {}
        self.proxy.record(call, endpoint=endpoint, refused=False, status=status, reserved=0.0,
                          charged=0.0, latency_s=round(time.monotonic() - t0, 6),
                          response_sha256=self.proxy.store.put(data), **facts)
